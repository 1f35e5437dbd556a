"""test_gpu.py — the Python bindings on device buffers (torch tensors, CuPy arrays), marked gpu.

Skipped without CUDA unless GC_TEST_REQUIRE_GPU=1 (the gpu-labelled CTest entry sets it), where a
missing GPU, torch or cupy is a failure instead of a silent pass.
"""

import os

import numpy as np
import pytest

import gpucoll

pytestmark = pytest.mark.gpu
REQUIRED = os.environ.get("GC_TEST_REQUIRE_GPU") == "1"


def need(module):
    try:
        return __import__(module)
    except ImportError:
        if REQUIRED:
            pytest.fail("GC_TEST_REQUIRE_GPU=1 but %s is not importable" % module)
        pytest.skip("%s is not installed" % module)


@pytest.fixture(scope="module")
def torch(comm):
    t = need("torch")
    if not t.cuda.is_available() or comm.device < 0:
        if REQUIRED:
            pytest.fail("GC_TEST_REQUIRE_GPU=1 but this rank has no GPU (device %d)" % comm.device)
        pytest.skip("no CUDA device")
    t.cuda.set_device(comm.device)
    return t


@pytest.fixture(scope="module")
def cupy(comm, torch):
    cp = need("cupy")
    cp.cuda.Device(comm.device).use()
    return cp


def contribution(torch, rank, n, dtype):
    i = torch.arange(n, device="cuda")
    return ((rank + 1) * (i % 5 + 1) + i % 3).to(dtype)


def total(torch, size, n, dtype):
    return sum(contribution(torch, r, n, torch.float64) for r in range(size)).to(dtype)


TORCH_DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8"]


@pytest.mark.parametrize("name", TORCH_DTYPES)
@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
@pytest.mark.parametrize("mode", ["new", "out", "inplace"])
def test_torch_allreduce(comm, torch, name, n, mode):
    dtype = getattr(torch, name)
    send = contribution(torch, comm.rank, n, dtype)
    stream = torch.cuda.current_stream()
    if mode == "new":
        got = comm.allreduce(send, stream=stream)
    elif mode == "out":
        got = comm.allreduce(send, out=torch.full_like(send, 77), stream=stream)
    else:
        got = comm.allreduce(send, out=send, stream=stream)
        assert got is send
    assert got.is_cuda and got.dtype == dtype
    comm.synchronize(stream)
    assert torch.equal(got, total(torch, comm.size, n, dtype))


@pytest.mark.parametrize("algo", ["oneshot", "twoshot", "writes", "mpi"])
def test_torch_allreduce_algos_bit_identical(comm, torch, algo):
    send = torch.randn(4099, device="cuda", generator=torch.Generator("cuda").manual_seed(comm.rank))
    if algo != "mpi" and not comm.p2p_ready:
        pytest.skip("peer-to-peer kernels unavailable")
    got = comm.allreduce(send, algo=algo)
    torch.cuda.synchronize()
    ref = sum(torch.randn(4099, device="cuda", generator=torch.Generator("cuda").manual_seed(r))
              .double() for r in range(comm.size))
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)
    # every rank holds the same bits
    everyone = comm.allgather(got.view(torch.int32))
    torch.cuda.synchronize()
    rows = everyone.view(comm.size, -1)
    assert all(torch.equal(rows[0], rows[r]) for r in range(comm.size))


def test_torch_epilogue_and_out_dtype(comm, torch):
    n = 5000
    send = contribution(torch, comm.rank, n, torch.float32)
    add = torch.arange(n, device="cuda", dtype=torch.float32)
    got = comm.allreduce(send, scale=0.25, add=add, out_dtype="bfloat16")
    torch.cuda.synchronize()
    assert got.dtype == torch.bfloat16
    want = (total(torch, comm.size, n, torch.float32) * 0.25 + add).to(torch.bfloat16)
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)


def test_torch_reducescatter_allgather_broadcast(comm, torch):
    size, rank, n = comm.size, comm.rank, 4096 + 3
    send = contribution(torch, rank, n * size, torch.float32)
    rs = comm.reducescatter(send)
    ag = comm.allgather(contribution(torch, rank, n, torch.float16))
    buf = contribution(torch, rank, n, torch.int64)
    comm.broadcast(buf, root=size - 1)
    rows, cols = 33, 65
    m = contribution(torch, rank, rows * cols, torch.float32).view(rows, cols)
    rs2 = comm.reducescatter_2d(m, axis=1)
    torch.cuda.synchronize()
    full = total(torch, size, n * size, torch.float32)
    assert torch.equal(rs, full[rank * n:(rank + 1) * n])
    assert torch.equal(ag, torch.cat([contribution(torch, r, n, torch.float16) for r in range(size)]))
    assert torch.equal(buf, contribution(torch, size - 1, n, torch.int64))
    off, length = gpucoll.partition(cols, size, rank)
    assert torch.equal(rs2, total(torch, size, rows * cols, torch.float32).view(rows, cols)
                       [:, off:off + length])


def test_torch_stream_object(comm, torch):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        send = contribution(torch, comm.rank, 777, torch.float32)
        got = comm.allreduce(send, stream=s)
    comm.synchronize(s)
    assert torch.equal(got, total(torch, comm.size, 777, torch.float32))


def test_dlpack_device_path(comm, torch):
    class OnlyDLPack:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

    send = contribution(torch, comm.rank, 300, torch.bfloat16)
    out = torch.zeros_like(send)
    comm.allreduce(OnlyDLPack(send), out=OnlyDLPack(out))
    torch.cuda.synchronize()
    assert torch.equal(out, total(torch, comm.size, 300, torch.bfloat16))


def test_cupy(comm, cupy):
    n = 10007
    send = (cupy.arange(n, dtype=cupy.float32) % 7) * (comm.rank + 1)
    got = comm.allreduce(send, stream=cupy.cuda.get_current_stream())
    out = cupy.empty(n * comm.size, dtype=cupy.int32)
    comm.allgather(cupy.full(n, comm.rank, dtype=cupy.int32), out=out)
    cupy.cuda.get_current_stream().synchronize()
    assert isinstance(got, cupy.ndarray)
    want = (np.arange(n, dtype=np.float32) % 7) * (comm.size * (comm.size + 1) // 2)
    np.testing.assert_array_equal(cupy.asnumpy(got), want)
    np.testing.assert_array_equal(cupy.asnumpy(out), np.repeat(np.arange(comm.size), n))


def test_device_buffer_helpers(comm, torch):
    n = 1024
    ptr = comm.buffer_alloc(n * 4, on_device=True)
    try:
        host = np.arange(n, dtype=np.float32)
        comm.memcpy(ptr, host.ctypes.data, n * 4)
        back = np.zeros(n, np.float32)
        comm.memcpy(back.ctypes.data, ptr, n * 4)
        np.testing.assert_array_equal(back, host)
    finally:
        comm.buffer_free(ptr)


def test_device_errors(comm, torch):
    with pytest.raises(gpucoll.InvalidArgument, match="contiguous"):
        comm.allreduce(torch.zeros(8, 8, device="cuda").t())
    with pytest.raises(gpucoll.InvalidArgument, match="host or on a device"):
        comm.allreduce(torch.zeros(8, device="cuda"), out=np.zeros(8, np.float32))


@pytest.mark.parametrize("like", ["torch", "cupy"])
def test_empty_is_device_symmetric_memory(comm, torch, like):
    """Comm.empty on a GPU rank: a CUDA tensor/array over gc_mem_alloc memory (DLPack, no copy),
    all-reduced in place there; freed collectively once every rank dropped it."""
    module = torch if like == "torch" else need("cupy")
    a = comm.empty((comm.size, 1000), "float32", like=like)
    if like == "torch":
        assert a.is_cuda and a.device.index == comm.device and a.dtype == torch.float32
        a.fill_(comm.rank + 1)
    else:
        assert a.device.id == comm.device and a.dtype == module.float32
        a.fill(comm.rank + 1)
    ptr = a.data_ptr() if like == "torch" else a.data.ptr
    assert ptr == comm._blocks[-1][0]  # the array is the symmetric block itself
    comm.allreduce(a, out=a)
    comm.synchronize()
    want = comm.size * (comm.size + 1) / 2
    assert float(a.min()) == want and float(a.max()) == want
    del a
    assert comm.free_unused() == 1
