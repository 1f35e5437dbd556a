"""conftest.py — one gpucoll.Comm per pytest process, shared by every test (run under mpirun)."""

import pytest

import gpucoll

_shared = []  # the one communicator, made by the first test that asks for it


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CUDA devices and torch or cupy (run with -m gpu)")


def pytest_unconfigure(config):
    while _shared:
        _shared.pop().close()


@pytest.fixture(scope="module")  # the torch and cupy fixtures, module-scoped, take it
def comm():
    # MPI_COMM_WORLD without mpi4py: the bindings start MPI and finish it at exit.
    if not _shared:
        _shared.append(gpucoll.Comm())
    return _shared[0]
