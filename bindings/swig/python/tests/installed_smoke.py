"""installed_smoke.py — run by the offline install test with the venv's python: the package as
installed there (not the build tree's) does one checked all-reduce over MPI_COMM_WORLD."""

import numpy as np

import gpucoll

with gpucoll.Comm(use_gpu=False) as comm:
    x = np.arange(1000, dtype=np.float32) + comm.rank
    y = comm.allreduce(x)
    want = comm.size * np.arange(1000) + comm.size * (comm.size - 1) / 2
    wrong = int((y != want).sum())
    if comm.rank == 0:
        print("installed gpucoll %s from %s: all-reduce over %d ranks: %d wrong"
              % (gpucoll.__version__, gpucoll.__file__, comm.size, wrong))
raise SystemExit(1 if wrong else 0)
