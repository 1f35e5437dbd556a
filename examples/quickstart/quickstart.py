"""quickstart.py — all-reduces of numpy arrays (host buffers), and of a torch tensor on the GPU
where there is one and torch is installed."""
import numpy as np
import gpucoll

with gpucoll.Comm() as comm:                      # over MPI_COMM_WORLD; one rank per GPU
    x = np.arange(4, dtype=np.float32) + comm.rank
    y = comm.allreduce(x)                         # a new array: the sum over ranks
    comm.allreduce(x, out=x, op="max")            # in place
    comm.synchronize()
    n = comm.size
    assert (y == np.arange(4) * n + n * (n - 1) / 2).all() and x[0] == n - 1, (y, x)
    if comm.device >= 0:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            t = torch.ones(1 << 20, device="cuda:%d" % comm.device, dtype=torch.bfloat16)
            stream = torch.cuda.current_stream()
            comm.allreduce(t, out=t, stream=stream)
            comm.synchronize(stream)
            assert bool((t == n).all())
    if comm.rank == 0:
        print("sum over %d ranks:" % n, y)
