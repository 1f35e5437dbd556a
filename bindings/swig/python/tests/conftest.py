"""conftest.py — one gpucoll.Comm per pytest session, shared by every test (run under mpirun)."""

import pytest

import gpucoll


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CUDA devices and torch or cupy (run with -m gpu)")


@pytest.fixture(scope="session")
def comm():
    # MPI_COMM_WORLD without mpi4py: the bindings start MPI and finish it at exit.
    c = gpucoll.Comm()
    yield c
    c.close()
