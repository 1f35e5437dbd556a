"""allreduce_torch.py — gpucoll vs torch.distributed (NCCL) all-reduce of torch tensors, under mpirun.

No torchrun: MPI starts the ranks, gpucoll gets MPI_COMM_WORLD, and torch.distributed is set up
from the same rank and size (MASTER_ADDR=127.0.0.1, one node). Both all-reduce the same tensors;
the results are compared, then each is timed with CUDA events on the current stream.

    mpirun -np 4 python3 examples/python/allreduce_torch.py --dtype bfloat16 --sizes 4K,1M,64M
"""

import argparse
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import gpucoll


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def time_us(fn, iters, warmup):
    """Microseconds per call of fn on the current stream, measured with CUDA events."""
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1K,16K,256K,4M,32M", help="message sizes in bytes")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--port", default=os.environ.get("MASTER_PORT", "29533"))
    args = ap.parse_args()

    comm = gpucoll.Comm()
    rank, size = comm.rank, comm.size
    if comm.device < 0 or not torch.cuda.is_available():
        print("allreduce_torch: rank %d has no GPU; this example needs one per rank" % rank,
              file=sys.stderr)
        comm.close()
        return 1
    # NCCL (the reference here) takes one GPU per rank: a node with more ranks than GPUs fails in
    # its first call ("Duplicate GPU detected"), so say so before.
    if comm.local_size > torch.cuda.device_count():
        if rank == 0:
            print("allreduce_torch: %d ranks on a node of %d GPUs; NCCL, the reference here, takes "
                  "one GPU per rank: run at most %d ranks a node"
                  % (comm.local_size, torch.cuda.device_count(), torch.cuda.device_count()),
                  file=sys.stderr)
        comm.close()
        return 1
    torch.cuda.set_device(comm.device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", args.port)
    dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=size)

    dtype = getattr(torch, args.dtype)
    stream = torch.cuda.current_stream()
    status = 0
    if rank == 0:
        print("gpucoll %s vs NCCL %s: all-reduce of %s on %d GPUs (p2p %s), us per call"
              % (gpucoll.version(), ".".join(map(str, torch.cuda.nccl.version())), args.dtype,
                 size, comm.p2p_ready))
        print("%12s %12s %12s %12s %10s %8s"
              % ("bytes", "gpucoll_us", "symmetric_us", "nccl_us", "nccl/gc", "check"))
    for nbytes in (parse_size(s) for s in args.sizes.split(",")):
        n = max(1, nbytes // torch.tensor([], dtype=dtype).element_size())
        gen = torch.Generator(device="cuda").manual_seed(1234 + rank)
        x = torch.randn(n, device="cuda", dtype=dtype, generator=gen)

        # Correctness: both libraries sum the same inputs. Half types accumulate in a different
        # order in each, so they agree to the dtype's rounding, not bit for bit.
        ref = x.clone()
        dist.all_reduce(ref)
        got = comm.allreduce(x, stream=stream)
        torch.cuda.synchronize()
        tol = 1e-5 if dtype == torch.float32 else 3e-2
        ok = torch.allclose(got.float(), ref.float(), rtol=tol, atol=tol * size)

        # Timing: in place with the average, so repeated calls keep values bounded.
        a, b = x.clone(), x.clone()
        gc_us = time_us(lambda: comm.allreduce(a, out=a, op="avg", stream=stream),
                        args.iters, args.warmup)
        nccl_us = time_us(lambda: dist.all_reduce(b, op=dist.ReduceOp.AVG), args.iters,
                          args.warmup)
        # The same in place on symmetric memory (Comm.empty): the kernels' path with no copy.
        sym = comm.empty(n, args.dtype, like="torch")
        sym.copy_(x)
        sym_us = time_us(lambda: comm.allreduce(sym, out=sym, op="avg", stream=stream),
                         args.iters, args.warmup)
        del sym
        comm.free_unused()  # collective: every rank dropped its array
        # The slowest rank's time is the collective's time; gpucoll reduces it on the host.
        gc_us, sym_us, nccl_us = comm.allreduce(np.array([gc_us, sym_us, nccl_us]), op="max")
        all_ok = comm.allreduce(np.array([0 if ok else 1], np.int32))[0] == 0
        if rank == 0:
            print("%12d %12.1f %12.1f %12.1f %10.2f %8s"
                  % (n * x.element_size(), gc_us, sym_us, nccl_us, nccl_us / gc_us,
                     "ok" if all_ok else "MISMATCH"))
        if not all_ok:
            status = 1
    dist.destroy_process_group()
    comm.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
