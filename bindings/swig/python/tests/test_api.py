"""test_api.py — the package's surface: version, namespace, mpi4py objects, argument types, the
fused op and the mixed ops as Comm methods, symmetric memory as arrays (host buffers)."""

import os
import pathlib
import re
import weakref

import numpy as np
import pytest

import gpucoll


def test_version_is_the_library_version():
    assert gpucoll.__version__ == gpucoll.version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", gpucoll.__version__)


def test_namespace_shows_the_api_only():
    public = [n for n in dir(gpucoll) if not n.startswith("_")]
    assert sorted(public) == sorted(n for n in gpucoll.__all__ if not n.startswith("_"))
    for name in ("ctypes", "math", "sys", "os", "gpucoll_swig", "_gpucoll_swig"):
        assert name not in dir(gpucoll), name
    for name in gpucoll.__all__:
        assert hasattr(gpucoll, name), name
    assert {"Comm", "Error", "InvalidArgument", "version", "__version__"} <= set(gpucoll.__all__)


def test_mpi4py_ops_and_comm_are_accepted(comm):
    MPI = pytest.importorskip("mpi4py.MPI")
    x = np.arange(8, dtype=np.float32) + comm.rank
    assert np.array_equal(comm.allreduce(x, op=MPI.MAX), np.arange(8) + comm.size - 1)
    assert np.array_equal(comm.allreduce(x, op=MPI.MIN), np.arange(8, dtype=np.float32))
    assert np.array_equal(comm.allreduce(x, op=MPI.SUM), comm.allreduce(x, op="sum"))
    with pytest.raises(ValueError, match="MPI.BAND.*no gpucoll counterpart|no gpucoll counterpart"):
        comm.allreduce(x, op=MPI.BAND)
    with gpucoll.Comm(MPI.COMM_WORLD.Dup(), use_gpu=False) as c:
        assert c.size == comm.size and c.rank == comm.rank


@pytest.mark.parametrize("op", [3, True, 1.0, None, object()])
def test_op_must_be_a_name_or_an_mpi4py_op(comm, op):
    with pytest.raises(TypeError, match="allreduce: op must be an op name"):
        comm.allreduce(np.ones(4, np.float32), op=op)


def test_argument_types_are_checked(comm):
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="tune_save: path must be a str or os.PathLike, not int"):
        comm.tune_save(123)
    with pytest.raises(TypeError, match="tune_load: path must be a str or os.PathLike, not NoneType"):
        comm.tune_load(None)
    with pytest.raises(TypeError, match="broadcast: root must be an integer, not float"):
        comm.broadcast(x, root=0.0)
    with pytest.raises(ValueError, match="broadcast: root must be at least 0"):
        comm.broadcast(x, root=-1)
    with pytest.raises(TypeError, match="allreduce: max_blocks must be an integer, not str"):
        comm.allreduce(x, max_blocks="8")
    with pytest.raises(TypeError, match="allreduce: scale must be a number, not str"):
        comm.allreduce(x, scale="2")
    with pytest.raises(TypeError, match="allreduce: pdl must be True, False or None"):
        comm.allreduce(x, pdl=1)
    with pytest.raises(TypeError, match="allreduce: algorithm must be a name"):
        comm.allreduce(x, algo=["mpi"])
    with pytest.raises(TypeError, match="reducescatter_2d: axis must be an integer"):
        comm.reducescatter_2d(np.ones((comm.size, 2), np.float32), axis="0")
    with pytest.raises(TypeError, match="Comm: expected an mpi4py communicator"):
        gpucoll.Comm("world")
    with pytest.raises(TypeError, match="Comm: use_gpu must be True or False"):
        gpucoll.Comm(use_gpu="no")
    with pytest.raises(TypeError, match="Comm: timeout_ms must be an integer"):
        gpucoll.Comm(timeout_ms=1.5)


def test_tune_paths_take_pathlike(comm, tmp_path_factory):
    MPI = pytest.importorskip("mpi4py.MPI")
    path = MPI.COMM_WORLD.bcast(str(tmp_path_factory.mktemp("tune") / "p.tune"), root=0)
    comm.tune_save(pathlib.Path(path))
    comm.tune_load(pathlib.Path(path))
    if comm.rank == 0:
        assert os.path.exists(path)


def test_mixed_operations_are_methods(comm):
    assert callable(comm.allreduce_allgather) and callable(comm.reducescatter_allreduce)
    n = 4
    send = np.full(n * comm.local_size, comm.rank + 1, np.float32)
    got = comm.reducescatter_allreduce(send)
    assert got.shape == (n,) and (got == comm.size * (comm.size + 1) / 2).all()
    got = comm.allreduce_allgather(np.full(n, comm.rank + 1, np.float32))
    assert got.shape == (n * comm.local_size,)


def test_allreduce_rmsnorm_fp8_method(comm):
    rows, cols = 3, 37
    i = np.arange(rows * cols)
    part = lambda r: ((i * 7 + r * 3) % 17 - 8) / 8  # noqa: E731 (exact in float32)
    send = part(comm.rank).astype(np.float32).reshape(rows, cols)
    gamma = (0.5 + (np.arange(cols) % 9) / 8).astype(np.float32)
    residual_out = np.full((rows, cols), np.nan, np.float32)
    out, scales = comm.allreduce_rmsnorm_fp8(send, gamma, epsilon=0.25, residual_out=residual_out)
    assert out.shape == (rows, cols) and scales.shape == (rows,) and scales.dtype == np.float32
    x = sum(part(r) for r in range(comm.size)).reshape(rows, cols)
    np.testing.assert_array_equal(residual_out, x)
    y = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 0.25) * gamma.astype(np.float64)
    np.testing.assert_allclose(scales, np.abs(y).max(axis=1) / 448, rtol=1e-5)  # numerics "max"
    with pytest.raises(gpucoll.InvalidArgument, match="gamma has 36 elements, expected 37"):
        comm.allreduce_rmsnorm_fp8(send, gamma[:-1])
    with pytest.raises(gpucoll.InvalidArgument, match="out_dtype must be fp8_e4m3 or fp8_e5m2"):
        comm.allreduce_rmsnorm_fp8(send, gamma, out=np.zeros((rows, cols), np.float32),
                                   out_dtype="float32")


def test_allreduce_rmsnorm_fp8_numerics(comm):
    """numerics "max" (the default) normalizes the float32 sum and bounds the row maximum by
    scale_ub; "rounded" normalizes the sum rounded to send's dtype and bounds the scale."""
    rows, cols = 2, 40
    i = np.arange(rows * cols)
    # exact in float16 (steps of 1/1024 from 1); sums from 2 step by 1/512 there, so f != x
    part = lambda r: 1 + ((i + r) % 4) / 1024 + (i % 3) / 4  # noqa: E731
    send = part(comm.rank).astype(np.float16).reshape(rows, cols)
    gamma = (0.5 + (np.arange(cols) % 9) / 8).astype(np.float16)
    f = sum(part(r) for r in range(comm.size)).reshape(rows, cols)
    x = f.astype(np.float16).astype(np.float64)
    g = gamma.astype(np.float64)

    def amax(v):
        return np.abs(v / np.sqrt((v * v).mean(axis=1, keepdims=True) + 1e-6) * g).max(axis=1)

    _, s_max = comm.allreduce_rmsnorm_fp8(send, gamma)
    _, s_rounded = comm.allreduce_rmsnorm_fp8(send, gamma, numerics="rounded")
    np.testing.assert_allclose(s_max, amax(f) / 448, rtol=1e-5)
    np.testing.assert_allclose(s_rounded, np.maximum(amax(x) / 448, 1 / (448 * 512)), rtol=1e-5)
    if comm.size > 1:  # one rank: f is x
        assert (np.abs(s_max - s_rounded) > 1e-4 * s_max).any()
    # scale_ub: the row maximum (max) against the scale itself (rounded), both binding
    _, s = comm.allreduce_rmsnorm_fp8(send, gamma, scale_ub=0.5)
    np.testing.assert_allclose(s, np.minimum(amax(f), 0.5) / 448, rtol=1e-5)
    _, s = comm.allreduce_rmsnorm_fp8(send, gamma, scale_ub=1 / 2048, numerics="rounded")
    np.testing.assert_allclose(s, np.full(rows, 1 / 2048), rtol=1e-6)
    with pytest.raises(gpucoll.InvalidArgument, match="numerics must be 'max' or 'rounded', not 'fast'"):
        comm.allreduce_rmsnorm_fp8(send, gamma, numerics="fast")


def test_empty_gives_symmetric_host_memory_as_an_array(comm):
    a = comm.empty((comm.size, 5), "float32", like="numpy")
    assert a.shape == (comm.size, 5) and a.dtype == np.float32
    a[:] = comm.rank + 1
    comm.allreduce(a, out=a)  # in place on symmetric memory
    assert (a == comm.size * (comm.size + 1) / 2).all()
    ref = weakref.ref(a)
    del a
    assert ref() is None
    assert comm.free_unused() >= 1  # every rank dropped it: freed collectively
    assert comm.free_unused() == 0
    with pytest.raises(ValueError, match="like must be"):
        comm.empty(4, like="jax")
    with pytest.raises(TypeError, match="shape must be an integer or a tuple"):
        comm.empty("4")


def test_empty_arrays_alive_at_close_are_reported():
    c = gpucoll.Comm(use_gpu=False)
    keep = c.empty(4, "int32", like="numpy")
    with pytest.warns(ResourceWarning, match="1 array\\(s\\) from Comm.empty are still alive"):
        c.close()
    del keep


def test_dlpack_capsule_holds_its_owner_until_the_array_dies():
    """The C module's DLPack producer (behind Comm.empty for torch and cupy), consumed by numpy."""
    buf = np.arange(6, dtype=np.float32)

    class Block:  # what _DLPackView takes: an owner with the address
        ptr = buf.__array_interface__["data"][0]

    block = Block()
    ref = weakref.ref(block)
    view = gpucoll._DLPackView(block, (2, 3), gpucoll._dtype_code("float32"), (1, 0))
    a = np.from_dlpack(view)
    del view, block
    assert ref() is not None  # the array's capsule holds it
    assert a.shape == (2, 3) and np.array_equal(a.ravel(), buf)
    del a
    assert ref() is None  # the deleter dropped it
    unused = gpucoll._DLPackView(Block(), (6,), gpucoll._dtype_code("float32"), (1, 0)).__dlpack__()
    del unused  # a capsule never consumed frees itself
