"""test_host.py — the Python bindings on numpy host buffers: every collective, dtypes, errors."""

import numpy as np
import pytest

import gpucoll
from gpucoll import gpucoll_swig as _swig

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.int64, np.uint8]


def contribution(rank, n, dtype):
    """Small integers, exact in every dtype even after a sum over a few ranks."""
    i = np.arange(n)
    return ((rank + 1) * (i % 5 + 1) + i % 3).astype(dtype)


def total(size, n, dtype):
    return sum(contribution(r, n, np.float64) for r in range(size)).astype(dtype)


def test_queries(comm):
    assert 0 <= comm.rank < comm.size
    assert comm.local_size >= 1 and 0 <= comm.local_rank < comm.local_size
    assert comm.node_count >= 1
    assert isinstance(comm.cuda_aware_mpi, bool) and isinstance(comm.p2p_ready, bool)
    assert isinstance(comm.algo_table, str) and comm.algo_table
    assert isinstance(comm.device, int)
    assert gpucoll.version().count(".") == 2
    assert "GC_TIMEOUT_MS" in gpucoll.params_table()
    assert gpucoll.partition(10, 3, 0) == (0, 4) and gpucoll.partition(10, 3, 2) == (7, 3)
    assert gpucoll.dtype_size("bfloat16") == 2 and gpucoll.dtype_size(np.float64) == 8
    assert "rank %d of %d" % (comm.rank, comm.size) in repr(comm)


def test_mpi4py_comm_matches(comm):
    MPI = pytest.importorskip("mpi4py.MPI")
    with gpucoll.Comm(MPI.COMM_WORLD) as c:
        assert (c.rank, c.size) == (MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size())
        assert (c.rank, c.size) == (comm.rank, comm.size)
        x = c.allreduce(np.full(3, c.rank + 1, np.int64))
        assert (x == c.size * (c.size + 1) // 2).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("mode", ["new", "out", "inplace"])
def test_allreduce_sum(comm, dtype, mode):
    n = 1031
    send = contribution(comm.rank, n, dtype)
    if mode == "new":
        got = comm.allreduce(send)
        assert got is not send
    elif mode == "out":
        out = np.full(n, 77, dtype)
        got = comm.allreduce(send, out=out)
        assert got is out
    else:
        got = comm.allreduce(send, out=send)
        assert got is send
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, total(comm.size, n, dtype))


@pytest.mark.parametrize("op", ["prod", "min", "max", "avg"])
def test_allreduce_ops(comm, op):
    n = 64
    parts = np.stack([contribution(r, n, np.float64) for r in range(comm.size)])
    want = {"prod": parts.prod(0), "min": parts.min(0), "max": parts.max(0),
            "avg": parts.mean(0)}[op]
    got = comm.allreduce(contribution(comm.rank, n, np.float64), op=op)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_allreduce_2d_shape_and_epilogue(comm):
    send = contribution(comm.rank, 6 * 5, np.float32).reshape(6, 5)
    add = np.arange(30, dtype=np.float32).reshape(6, 5)
    got = comm.allreduce(send, scale=0.5, add=add)
    assert got.shape == (6, 5)
    np.testing.assert_array_equal(got, total(comm.size, 30, np.float32).reshape(6, 5) * 0.5 + add)


def test_allreduce_out_dtype(comm):
    send = contribution(comm.rank, 100, np.float32)
    got = comm.allreduce(send, out_dtype="float64")
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, total(comm.size, 100, np.float64))


@pytest.mark.parametrize("wire,group", [("fp8", 0), ("fp8", 128), ("bf16", 0), ("native", 0)])
def test_allreduce_wire(comm, wire, group):
    # powers of two, the same on every rank: every wire carries them and their sums exactly
    send = (2.0 ** (np.arange(300) % 4)).astype(np.float32)
    got = comm.allreduce(send, wire=wire, wire_group=group)
    np.testing.assert_array_equal(got, comm.size * send)


def test_allreduce_wire_bound_and_refusals(comm):
    # random data: within the fp8 bound (about 1/16 of each term and of the sum), the same on
    # every rank (rank 0's result broadcast through an all-reduce of the difference)
    rng = np.random.default_rng(1234 + comm.rank)
    send = rng.standard_normal(4099).astype(np.float32)
    parts = [np.random.default_rng(1234 + r).standard_normal(4099).astype(np.float32)
             for r in range(comm.size)]
    ref = np.sum(np.stack(parts).astype(np.float64), 0)
    mag = np.sum(np.abs(np.stack(parts).astype(np.float64)), 0)
    got = comm.allreduce(send, wire="fp8")
    assert np.all(np.abs(got - ref) <= 2.0 ** -4 * (mag + np.abs(ref)) * 1.01 + 1e-3)
    spread = comm.allreduce(got.astype(np.float64), op="max") - comm.allreduce(got.astype(np.float64), op="min")
    assert not spread.any()
    with pytest.raises(gpucoll.InvalidArgument, match="fp8 wire takes float32"):
        comm.allreduce(np.zeros(8, np.int32), wire="fp8")
    with pytest.raises(gpucoll.InvalidArgument, match="unknown wire format"):
        comm.allreduce(send, wire="fp4")
    with pytest.raises(gpucoll.InvalidArgument, match="use 32, 64 or 128"):
        comm.allreduce(send, wire="fp8", wire_group=48)


def test_allreduce_algo_mpi_and_stream_forms(comm):
    class Stream:
        cuda_stream = 0

    send = contribution(comm.rank, 10, np.int32)
    want = total(comm.size, 10, np.int32)
    np.testing.assert_array_equal(comm.allreduce(send, algo="mpi"), want)
    np.testing.assert_array_equal(comm.allreduce(send, stream=0), want)
    np.testing.assert_array_equal(comm.allreduce(send, stream=Stream()), want)
    comm.synchronize()


def test_reducescatter(comm):
    n = 37
    send = contribution(comm.rank, n * comm.size, np.float32)
    got = comm.reducescatter(send)
    assert got.shape == (n,)
    np.testing.assert_array_equal(got, total(comm.size, n * comm.size, np.float32)
                                  [comm.rank * n:(comm.rank + 1) * n])
    # 2-D input keeps its trailing dimensions.
    send2 = send.reshape(comm.size * n, 1)
    assert comm.reducescatter(send2, op="max").shape == (n, 1)


def node_sizes(size):
    """Nodes of 1 rank, of 2 (when that makes several nodes) and of every rank."""
    return sorted({1, size} | ({2} if size % 2 == 0 and size > 2 else set()))


def mixed_reference(op, ranks, n, node_count_or_size):
    """op over contribution(r, n) of `ranks`, "avg" dividing by the given count (float64)."""
    s = sum(contribution(r, n, np.float64) for r in ranks)
    return s / node_count_or_size if op == "avg" else s


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["sum", "avg"])
def test_mixed_operations(comm, dtype, op):
    """reducescatter_allreduce: block local_rank reduced over every rank; allreduce_allgather:
    block l the reduction over the ranks of local rank l (nodes of consecutive ranks)."""
    size, rank, n = comm.size, comm.rank, 13
    for L in node_sizes(size):
        with gpucoll.Comm(local_size=L) as c:
            assert (c.local_size, c.local_rank, c.node_count) == (L, rank % L, size // L)
            lr = c.local_rank
            send = contribution(rank, L * n, dtype)
            got = c.reducescatter_allreduce(send, op=op)
            assert got.shape == (n,) and got.dtype == np.dtype(dtype)
            want = mixed_reference(op, range(size), L * n, size)[lr * n:(lr + 1) * n]
            np.testing.assert_array_equal(got, want.astype(dtype), err_msg="L=%d" % L)
            got = c.allreduce_allgather(contribution(rank, n, dtype), op=op)
            assert got.shape == (L * n,)
            want = np.concatenate([mixed_reference(op, range(l, size, L), n, size // L)
                                   for l in range(L)])
            np.testing.assert_array_equal(got, want.astype(dtype), err_msg="L=%d" % L)


def test_mixed_layouts(comm):
    """Comm.mixed: FlashInfer's numbering of every split of the world, the operations each
    layout takes (against a float64 reference, identical on every rank here) and a refusal."""
    size, rank, n = comm.size, comm.rank, 7
    for L in node_sizes(size):
        with gpucoll.Comm(local_size=L) as c:
            nodes = size // L
            for ltp in [d for d in range(1, L + 1) if L % d == 0]:
                for itp in [d for d in range(1, nodes + 1) if nodes % d == 0]:
                    with c.mixed(local_tp_size=ltp, inter_tp_size=itp) as m:
                        check_layout(m, rank, L, ltp, itp, nodes, n)
    bad = comm.local_size + 1
    with pytest.raises(gpucoll.InvalidArgument, match="local_tp_size %d does not divide" % bad):
        comm.mixed(local_tp_size=bad)


def test_mixed_autotune(comm):
    """Mixed.autotune tunes the layout's groups; the operations stay right after it, and a bad
    dtype or size is refused."""
    with comm.mixed() as m:
        m.autotune(16 * 1024, "float32")
        if m.valid_ops == ["allreduce"]:  # one node: TP over all of it
            got = m.allreduce(contribution(comm.rank, 7, np.int32))
            np.testing.assert_array_equal(got, total(comm.size, 7, np.int32))
        with pytest.raises(gpucoll.InvalidArgument, match="dtype"):
            m.autotune(16 * 1024, "fp8_e4m3")
        with pytest.raises(gpucoll.InvalidArgument, match="max_bytes"):
            m.autotune(100)


def check_layout(m, rank, L, ltp, itp, nodes, n):
    local, inter = rank % L, rank // L
    tp = local % ltp + (inter % itp) * ltp
    dp = local // ltp + (inter // itp) * (L // ltp)
    assert (m.tp_rank, m.tp_size, m.dp_rank, m.dp_size) == (tp, ltp * itp, dp, (L // ltp) * (nodes // itp))
    assert m.layout["inter_rank"] == inter and m.layout["local_tp_rank"] == local % ltp
    # the ranks of each TP group (one dp rank) and the ranks of every dp rank
    of_dp = {}
    for r in range(L * nodes):
        rl, ri = r % L, r // L
        of_dp.setdefault(rl // ltp + (ri // itp) * (L // ltp), []).append(r)
    both, tp_only = m.tp_size > 1 and m.dp_size > 1, m.tp_size > 1 and m.dp_size == 1
    want = (["allreduce_allgather", "reducescatter_allreduce"] if both else
            ["allreduce"] if tp_only else ["allgather", "reducescatter"])
    assert m.valid_ops == want
    for op in want:
        algos = m.algos(op)
        assert algos[0] == "auto" and "mpi" in algos
    D, world = m.dp_size, L * nodes
    if "allreduce_allgather" in want:
        got = m.allreduce_allgather(contribution(rank, n, np.float32))
        ref = np.concatenate([sum(contribution(r, n, np.float64) for r in of_dp[d]) for d in range(D)])
        np.testing.assert_array_equal(got, ref.astype(np.float32))
        send = contribution(rank, D * n, np.float64)
        got = m.reducescatter_allreduce(send)
        ref = sum(contribution(r, D * n, np.float64) for r in range(world))[dp * n:(dp + 1) * n]
        np.testing.assert_array_equal(got, ref)
        with pytest.raises(gpucoll.InvalidUsage, match="not an operation of this layout"):
            m.allreduce(np.zeros(n, np.float32))
    elif tp_only:
        got = m.allreduce(contribution(rank, n, np.int32))
        np.testing.assert_array_equal(got, total(world, n, np.int32))
        with pytest.raises(gpucoll.InvalidUsage, match="which takes allreduce"):
            m.allgather(np.zeros(n, np.float32))
    else:
        got = m.allgather(contribution(rank, n, np.float32))
        ref = np.concatenate([contribution(of_dp[d][0], n, np.float32) for d in range(D)])
        np.testing.assert_array_equal(got, ref)
        got = m.reducescatter(contribution(rank, D * n, np.float32))
        ref = sum(contribution(r, D * n, np.float64) for r in range(world))[dp * n:(dp + 1) * n]
        np.testing.assert_array_equal(got, ref.astype(np.float32))
        with pytest.raises(gpucoll.InvalidUsage, match="not an operation of this layout"):
            m.allreduce_allgather(np.zeros(n, np.float32))


def test_mixed_in_place_epilogue_and_errors(comm):
    size, rank, n = comm.size, comm.rank, 11
    add = ((np.arange(n) % 7 - 3) / 4).astype(np.float32)
    for L in node_sizes(size):
        with gpucoll.Comm(local_size=L) as c:
            lr = c.local_rank
            total_rs = mixed_reference("sum", range(size), L * n, size)[lr * n:(lr + 1) * n]
            gathered = np.concatenate([mixed_reference("sum", range(l, size, L), n, 1)
                                       for l in range(L)])
            # in place: out is this rank's block of send / send is this rank's block of out
            buf = contribution(rank, L * n, np.float32)
            block = buf[lr * n:(lr + 1) * n]
            assert c.reducescatter_allreduce(buf, out=block) is block
            np.testing.assert_array_equal(block, total_rs.astype(np.float32))
            out = np.full(L * n, np.nan, np.float32)
            out[lr * n:(lr + 1) * n] = contribution(rank, n, np.float32)
            c.allreduce_allgather(out[lr * n:(lr + 1) * n], out=out)
            np.testing.assert_array_equal(out, gathered.astype(np.float32))
            # the epilogue: scale, an add of recvcount / sendcount elements, out_dtype
            got = c.reducescatter_allreduce(contribution(rank, L * n, np.float32), scale=0.5,
                                            add=add, out_dtype="float64")
            assert got.dtype == np.float64
            np.testing.assert_array_equal(got, total_rs * 0.5 + add)
            got = c.allreduce_allgather(contribution(rank, n, np.float32), scale=0.5, add=add)
            np.testing.assert_array_equal(got, gathered * 0.5 + np.tile(add, L))
            # errors of the Python layer (counts of L * n and n tell apart for L > 1) ...
            if L > 1:
                with pytest.raises(gpucoll.InvalidArgument, match="multiple of the %d ranks of a node" % L):
                    c.reducescatter_allreduce(np.zeros(L * n + 1, np.float32))
                with pytest.raises(gpucoll.InvalidArgument, match="add has %d elements, expected %d"
                                   % (L * n, n)):
                    c.allreduce_allgather(np.zeros(n, np.float32), add=np.zeros(L * n, np.float32))
                with pytest.raises(gpucoll.InvalidArgument, match="out has %d elements, expected %d"
                                   % (n, L * n)):
                    c.allreduce_allgather(np.zeros(n, np.float32), out=np.zeros(n, np.float32))
            # ... and of the library
            with pytest.raises(gpucoll.Error) as info:
                c.allreduce_allgather(np.zeros(n, np.float32), out_dtype="int32")
            assert info.value.function == "gc_allreduce_allgather"


@pytest.mark.parametrize("axis", [0, 1])
def test_reducescatter_2d(comm, axis):
    rows, cols = 5, 7  # uneven over 2 ranks on both axes
    send = contribution(comm.rank, rows * cols, np.int64).reshape(rows, cols)
    full = total(comm.size, rows * cols, np.int64).reshape(rows, cols)
    off, length = gpucoll.partition(send.shape[axis], comm.size, comm.rank)
    got = comm.reducescatter_2d(send, axis=axis)
    want = full[off:off + length, :] if axis == 0 else full[:, off:off + length]
    np.testing.assert_array_equal(got, want)


def test_allgather(comm):
    n = 11
    got = comm.allgather(contribution(comm.rank, n, np.int32))
    want = np.concatenate([contribution(r, n, np.int32) for r in range(comm.size)])
    np.testing.assert_array_equal(got, want)
    out = np.zeros((comm.size * 2, 3), np.uint8)
    got = comm.allgather(np.full((2, 3), comm.rank, np.uint8), out=out)
    assert got is out
    np.testing.assert_array_equal(out, np.repeat(np.arange(comm.size), 2)[:, None] * np.ones(3))


@pytest.mark.parametrize("root_last", [False, True])
def test_broadcast(comm, root_last):
    root = comm.size - 1 if root_last else 0
    buf = contribution(comm.rank, 100, np.float64)
    assert comm.broadcast(buf, root=root) is buf  # in place
    np.testing.assert_array_equal(buf, contribution(root, 100, np.float64))
    out = np.zeros(100, np.float64)
    comm.broadcast(contribution(comm.rank, 100, np.float64), root=root, out=out)
    np.testing.assert_array_equal(out, contribution(root, 100, np.float64))


def test_allreduce_rmsnorm_fp8_through_the_swig_module(comm):
    """The fused all-reduce + RMSNorm + FP8 as the SWIG module wraps it: gc_rmsnorm_fp8_t starts
    from GC_RMSNORM_FP8_INIT, pointers (scales too) are integer addresses; the result against a
    float64 reference of gpucoll.h's formulas."""
    s = _swig
    rows, cols = 3, 37
    i = np.arange(rows * cols)

    def part(r):  # multiples of 1/8: exact in float32, and so are their sums
        return ((i * 7 + r * 3) % 17 - 8) / 8

    send = part(comm.rank).astype(np.float32)
    gamma = (0.5 + (np.arange(cols) % 9) / 8).astype(np.float32)
    residual = ((i % 5 - 2) / 4).astype(np.float32)
    residual_out = np.full(rows * cols, np.nan, np.float32)
    out = np.zeros(rows * cols, np.uint8)  # fp8_e4m3 codes
    scales = np.zeros(rows, np.float32)

    norm = s.gc_rmsnorm_fp8_t()
    assert norm.version == s.GC_RMSNORM_FP8_VERSION and norm.out_dtype == s.GC_FP8_E4M3
    assert norm.epsilon == pytest.approx(1e-6, rel=1e-6) and norm.scale_ub == 0.0 and norm.residual == 0
    assert norm.numerics == s.GC_NORM_MAX and s.gc_norm_numerics_from_name("rounded") == s.GC_NORM_ROUNDED
    norm.gamma = gamma.ctypes.data
    norm.residual = residual.ctypes.data
    norm.residual_out = residual_out.ctypes.data
    norm.epsilon = 0.25  # large enough that dropping it would move every scale
    norm.weight_offset = 1.0
    s.gc_allreduce_rmsnorm_fp8(send.ctypes.data, out.ctypes.data, scales.ctypes.data, rows, cols,
                               s.GC_FLOAT32, norm, comm._h, None, None)

    x = (sum(part(r) for r in range(comm.size)) + (i % 5 - 2) / 4).reshape(rows, cols)
    y = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 0.25) * (gamma.astype(np.float64) + 1.0)
    scale_ref = np.abs(y).max(axis=1) / 448  # GC_NORM_MAX, the default (x is exact here: f == x)
    np.testing.assert_allclose(scales, scale_ref, rtol=1e-5)
    np.testing.assert_array_equal(residual_out.reshape(rows, cols), x)
    q = np.array([s.gc_element_get(out.ctypes.data, k, s.GC_FP8_E4M3) for k in range(rows * cols)])
    got = q.reshape(rows, cols) * scales[:, None].astype(np.float64)
    tol = 2.0 ** -4 * np.abs(y) + 2 * scale_ref[:, None] * 2.0 ** -9  # half an e4m3 step
    assert (np.abs(got - y) <= tol).all(), np.abs(got - y).max()

    norm.out_dtype = s.GC_BFLOAT16  # the library's own message comes back
    with pytest.raises(gpucoll.InvalidArgument, match="out_dtype must be fp8_e4m3 or fp8_e5m2") as info:
        s.gc_allreduce_rmsnorm_fp8(send.ctypes.data, out.ctypes.data, scales.ctypes.data, rows, cols,
                                   s.GC_FLOAT32, norm, comm._h, None, None)
    assert info.value.function == "gc_allreduce_rmsnorm_fp8"


def test_dlpack_and_array_interface_objects(comm):
    class OnlyDLPack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    class OnlyArrayInterface:
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    send = contribution(comm.rank, 20, np.float32)
    out = np.zeros(20, np.float32)
    comm.allreduce(OnlyDLPack(send), out=OnlyArrayInterface(out))
    np.testing.assert_array_equal(out, total(comm.size, 20, np.float32))


def test_fill_random(comm):
    a = comm.fill_random(np.zeros(1000, np.float32), seed=7)
    b = comm.fill_random(np.zeros(1000, np.float32), seed=7)
    np.testing.assert_array_equal(a, b)
    assert (a >= -1).all() and (a < 1).all() and a.std() > 0.3


def test_library_error_raises_subclass_with_code_and_message(comm):
    buf = np.zeros(8, np.float32)
    with pytest.raises(gpucoll.InvalidArgument) as info:
        comm.broadcast(buf, root=comm.size + 3)  # the same bad root on every rank
    e = info.value
    assert isinstance(e, gpucoll.Error) and isinstance(e, ValueError)
    assert e.code == "GC_ERR_INVALID_ARGUMENT" and e.value == 1
    assert e.function == "gc_broadcast_ex"
    assert e.message and e.message in str(e) and "GC_ERR_INVALID_ARGUMENT" in str(e)


def test_failure_without_a_comm_reports_its_own_message(comm):
    """A failing call that takes no communicator, after calls that took one but return no result
    code (algo_table, gc_comm_last_error), reports its own message, not that communicator's."""
    s = _swig
    with pytest.raises(gpucoll.InvalidArgument):  # leaves a message in comm's slot
        comm.broadcast(np.zeros(8, np.float32), root=comm.size + 3)
    assert comm.algo_table
    with pytest.raises(gpucoll.InvalidArgument) as info:
        s.gc_op_from_name("xor")
    assert "unknown op 'xor'" in info.value.message and info.value.function == "gc_op_from_name"
    s.gc_comm_last_error(comm._h)
    cfg = s.gc_config_t()
    cfg.version = 0  # refused before any communication, alike on every rank
    with pytest.raises(gpucoll.InvalidArgument) as info:
        s.gc_comm_init_f(s.gcswig_world(), cfg)
    assert "gc_config_t.version is 0" in info.value.message
    assert info.value.function == "gc_comm_init_f"


def test_failed_destroy_reports_the_library_message():
    s = _swig
    c = gpucoll.Comm()
    h = c._h
    c.close()
    with pytest.raises(gpucoll.InvalidUsage) as info:
        s.gc_comm_destroy(h)  # a handle not live any more: refused, nothing freed twice
    assert "not a live communicator" in info.value.message
    assert info.value.function == "gc_comm_destroy"


def test_close_keeps_the_communicator_while_a_device_stays_busy(monkeypatch):
    # GC_ERR_STREAM_TIMEOUT from gc_comm_destroy frees nothing: close() keeps the handle, so that
    # close() can be called again (a busy device needs a GPU; the library's answer is stood in for).
    c = gpucoll.Comm()
    h = c._h

    def busy(handle):
        raise gpucoll.StreamTimeout("gc_comm_destroy: work on this rank's GPU did not finish")

    monkeypatch.setattr(_swig, "gc_comm_destroy", busy)
    with pytest.raises(gpucoll.StreamTimeout):
        c.close()
    assert not c.closed and c._h == h
    monkeypatch.undo()
    c.close()
    assert c.closed


def test_overlap_is_refused_by_the_library(comm):
    buf = np.zeros(8, np.float32)
    with pytest.raises(gpucoll.InvalidArgument) as info:
        comm.allreduce(buf[:6], out=buf[1:7])
    assert info.value.code == "GC_ERR_INVALID_ARGUMENT" and info.value.function == "gc_allreduce_ex"


def test_argument_errors_in_python_layer(comm):
    with pytest.raises(gpucoll.InvalidArgument, match="int16"):
        comm.allreduce(np.zeros(4, np.int16))
    with pytest.raises(gpucoll.InvalidArgument, match="contiguous"):
        comm.allreduce(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(gpucoll.InvalidArgument, match="elements"):
        comm.allreduce(np.zeros(4, np.float32), out=np.zeros(5, np.float32))
    with pytest.raises(gpucoll.InvalidArgument, match="dtype"):
        comm.allreduce(np.zeros(4, np.float32), out=np.zeros(4, np.float64))
    with pytest.raises(gpucoll.InvalidArgument, match="unknown op"):
        comm.allreduce(np.zeros(4, np.float32), op="xor")
    with pytest.raises(gpucoll.InvalidArgument, match="unknown algorithm"):
        comm.allreduce(np.zeros(4, np.float32), algo="fastest")
    with pytest.raises(gpucoll.InvalidArgument, match="not an array"):
        comm.allreduce([1.0, 2.0])
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(gpucoll.InvalidArgument, match="read-only"):
        comm.allreduce(np.zeros(4, np.float32), out=ro)
    with pytest.raises(gpucoll.InvalidArgument, match="stream"):
        comm.allreduce(np.zeros(4, np.float32), stream="default")
    with pytest.raises(gpucoll.InvalidArgument, match="multiple"):
        comm.reducescatter(np.zeros(comm.size * 3 + 1, np.float32))


def test_context_manager_and_closed_comm():
    with gpucoll.Comm() as c:
        x = c.allreduce(np.ones(4, np.float32))
        assert (x == c.size).all()
    assert c.closed and "closed" in repr(c)
    c.close()  # idempotent
    with pytest.raises(gpucoll.InvalidUsage) as info:
        c.allreduce(np.ones(4, np.float32))
    assert info.value.code == "GC_ERR_INVALID_USAGE" and "closed" in info.value.message
    with pytest.raises(gpucoll.Error):
        c.rank


def test_error_classes_cover_every_code():
    names = {cls.code for cls in vars(gpucoll).values()
             if isinstance(cls, type) and issubclass(cls, gpucoll.Error) and cls is not gpucoll.Error}
    assert {"GC_ERR_INVALID_ARGUMENT", "GC_ERR_TIMEOUT", "GC_ERR_MPI", "GC_ERR_CUDA"} <= names
    assert gpucoll.Timeout.code == "GC_ERR_TIMEOUT" and issubclass(gpucoll.Timeout, gpucoll.Error)
    assert gpucoll.StreamTimeout.code == "GC_ERR_STREAM_TIMEOUT"


def test_autotune_save_load(comm, tmp_path_factory):
    table = comm.autotune(16 * 1024, "float32")
    assert "tuned" in table
    # every rank must name the same file: rank 0's path, broadcast
    from mpi4py import MPI
    path = MPI.COMM_WORLD.bcast(str(tmp_path_factory.mktemp("tune") / "t.tune"), root=0)
    comm.tune_save(path)
    comm.tune_reset()
    assert "tuned" not in comm.algo_table
    comm.tune_load(path)
    assert comm.algo_table == table
    with pytest.raises(gpucoll.InvalidArgument):
        comm.autotune(10)
    comm.tune_reset()


def test_plan_query(comm):
    x = contribution(comm.rank, 1000, np.float32)
    for collective in ("allreduce", "reducescatter", "allgather", "broadcast"):
        send = x[: 1000 - 1000 % comm.size] if collective == "reducescatter" else x
        p = comm.plan(collective, send)
        assert set(p) == {"algorithm", "fell_from", "from_table", "path", "blocks", "threads",
                          "chunk_bytes", "piece_bytes", "staged"}
        assert p["path"] == "mpi" and p["algorithm"] == "mpi"  # host buffers take the MPI path
        assert p["blocks"] == 0 and p["fell_from"] is None
    y = comm.allreduce(x)  # the query ran nothing; the call still gives the sum
    assert np.array_equal(y, total(comm.size, 1000, np.float32))
    assert comm.plan("allreduce", x, algo="mpi")["algorithm"] == "mpi"
    with pytest.raises(gpucoll.Error) as refused:  # no kernels on host buffers: as the call says
        comm.plan("allreduce", x, algo="oneshot")
    with pytest.raises(gpucoll.Error) as call_refused:
        comm.allreduce(x, algo="oneshot")
    assert refused.value.code == call_refused.value.code == "GC_ERR_UNSUPPORTED"
    assert refused.value.message == call_refused.value.message
    with pytest.raises(ValueError):
        comm.plan("alltoall", x)
    assert comm.plan("allreduce", x[:0])["path"] == "none"


def test_big_endian_numpy_arrays_are_refused(comm):
    # numpy names '>f4' "float32" too; read as native it would reduce garbage.
    for dtype in (">f4", ">i8", ">f2"):
        with pytest.raises(gpucoll.InvalidArgument, match="big-endian"):
            comm.allreduce(np.arange(4, dtype=dtype))
    with pytest.raises(gpucoll.InvalidArgument, match="big-endian"):
        comm.allreduce(np.arange(4, dtype=np.float32), out=np.zeros(4, ">f4"))
    # one-byte and native-order arrays are fine
    got = comm.allreduce(np.arange(4, dtype="|u1"))
    np.testing.assert_array_equal(got, np.arange(4) * comm.size)


class _CudaArray:
    """__cuda_array_interface__ over host memory: on a host-only rank the library takes every
    pointer through the MPI path, so host memory stands in for the device's."""

    def __init__(self, a, **fields):
        self.a = a
        d = dict(a.__array_interface__, version=3)
        d.update(fields)
        self.__cuda_array_interface__ = d


def test_cuda_array_interface_stream_and_mask(comm, monkeypatch):
    s = _swig
    waited = []
    real = s.gc_synchronize

    def sync(handle, stream):
        waited.append(stream)
        return real(handle, None)  # the streams here are made up: wait for nothing real

    monkeypatch.setattr(s, "gc_synchronize", sync)
    send, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    # 0 is disallowed (ambiguous) by the protocol
    with pytest.raises(gpucoll.InvalidArgument, match="stream 0"):
        comm.allreduce(_CudaArray(send, stream=0), out=_CudaArray(out))
    # a masked array: the mask cannot be honoured
    with pytest.raises(gpucoll.InvalidArgument, match="mask"):
        comm.allreduce(_CudaArray(send, mask=np.ones(4, bool)), out=_CudaArray(out))
    assert waited == []
    # the producer's streams are waited for before the call, unless the call runs on them
    comm.allreduce(_CudaArray(send, stream=0x1234), out=_CudaArray(out, stream=0x5678, mask=None))
    np.testing.assert_array_equal(out, np.full(4, comm.size, np.float32))
    assert sorted(waited) == [0x1234, 0x5678]
    waited.clear()
    comm.allreduce(_CudaArray(send, stream=0x1234), out=_CudaArray(out, stream=None), stream=0x1234)
    comm.allreduce(_CudaArray(send, stream=1), out=_CudaArray(out))  # legacy: the call's own
    comm.allreduce(_CudaArray(send, stream=1), out=_CudaArray(out), stream=0)  # NULL: legacy too
    assert waited == []
    comm.fill_random(_CudaArray(out, stream=1))  # on the communicator's stream: waits for any
    assert waited == [1]


def test_array_interface_without_a_data_pointer_is_refused(comm):
    class ArrayInterface:
        def __init__(self, d):
            self.__array_interface__ = d

    for d in ({"shape": (4,), "typestr": "<f4", "version": 3},
              {"shape": (4,), "typestr": "<f4", "version": 3, "data": None}):
        with pytest.raises(gpucoll.InvalidArgument, match="data pointer"):
            comm.allreduce(ArrayInterface(d))
