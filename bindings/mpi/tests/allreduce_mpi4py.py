"""allreduce_mpi4py.py — mpi4py's comm.Allreduce on CuPy (or torch) device arrays, run under
LD_PRELOAD=libgpucoll-mpi.so: the sums must equal a float64 reference computed on the host.
Exits 77 (skipped) when mpi4py or both CuPy and torch are missing, or no GPU is present."""
import sys

try:
    from mpi4py import MPI
except ImportError:
    print("allreduce_mpi4py: skipped: mpi4py is not installed")
    sys.exit(77)

try:
    import cupy as xp
    backend = "cupy"
except ImportError:
    try:
        import torch
        backend = "torch"
    except ImportError:
        print("allreduce_mpi4py: skipped: neither cupy nor torch is installed")
        sys.exit(77)

import numpy as np

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def device_array(values):
    """A device copy of a host numpy array, and a function that copies it back."""
    if backend == "cupy":
        xp.cuda.Device(rank % xp.cuda.runtime.getDeviceCount()).use()
        a = xp.asarray(values)
        return a, lambda: xp.asnumpy(a)
    if not torch.cuda.is_available():
        print("allreduce_mpi4py: skipped: torch sees no GPU")
        sys.exit(77)
    torch.cuda.set_device(rank % torch.cuda.device_count())
    t = torch.from_numpy(values).cuda()
    # mpi4py reads __cuda_array_interface__, which CuPy has and torch tensors have as well.
    return t, lambda: t.cpu().numpy()


failures = 0
for n in (1, 1001, 1 << 20):
    for dtype in (np.float32, np.float64, np.int32):
        i = np.arange(n)
        send_host = ((rank + 1) * (i % 7 + 1) * 0.5 + i % 3).astype(dtype)
        ref = sum(((r + 1) * (i % 7 + 1) * 0.5 + i % 3).astype(dtype).astype(np.float64) for r in range(size))
        send, _ = device_array(send_host)
        recv, back = device_array(np.zeros(n, dtype))
        comm.Allreduce(send, recv, op=MPI.SUM)
        got = back().astype(np.float64)
        if not np.allclose(got, ref, rtol=1e-6, atol=0):
            failures += 1
            print(f"rank {rank}: Allreduce {np.dtype(dtype).name} n={n}: wrong", flush=True)
        inplace, back = device_array(send_host.copy())
        comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.SUM)
        if not np.allclose(back().astype(np.float64), ref, rtol=1e-6, atol=0):
            failures += 1
            print(f"rank {rank}: Allreduce in place {np.dtype(dtype).name} n={n}: wrong", flush=True)

total = comm.allreduce(failures)
if rank == 0:
    print(f"allreduce_mpi4py ({backend}, {size} ranks): {'FAIL' if total else 'PASS'}")
sys.exit(1 if total else 0)
