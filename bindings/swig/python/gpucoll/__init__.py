"""gpucoll: multi-GPU collectives for MPI programs, over the SWIG module _gpucoll_swig.

The SWIG module takes pointers as integers; this layer turns arrays into (pointer, count, dtype):
numpy arrays and anything with ``__array_interface__`` (host), PyTorch tensors, anything with
``__cuda_array_interface__`` (CuPy, Numba) or ``__dlpack__`` (device or host).

    import gpucoll, numpy as np
    with gpucoll.Comm() as comm:                  # MPI_COMM_WORLD, or Comm(mpi4py_comm)
        y = comm.allreduce(np.ones(4, np.float32))  # out-of-place; out=x for in place

Failures raise gpucoll.Error subclasses (InvalidArgument, Timeout, ...) carrying .code
("GC_ERR_TIMEOUT"), .value, .message (the library's detailed message) and .function.
"""

import ctypes
import math
import sys

from . import gpucoll_swig as _s
from . import _gpucoll_swig as _m

__all__ = ["Comm", "Error", "version", "params_table", "partition", "dtype_size"]

# Error and one subclass per result code, made by the C module from GC_RESULT_MAP.
Error = _m.Error
_ERRORS = {}
for _name in dir(_m):
    _obj = getattr(_m, _name)
    if isinstance(_obj, type) and issubclass(_obj, Error) and _obj is not Error:
        globals()[_name] = _obj
        _ERRORS[_obj.code] = _obj
        __all__.append(_name)
del _name, _obj

InvalidArgument = _ERRORS["GC_ERR_INVALID_ARGUMENT"]
InvalidUsage = _ERRORS["GC_ERR_INVALID_USAGE"]


def _fail(cls, function, message):
    err = cls("%s: %s: %s" % (function, cls.code, message))
    err.message = message
    err.function = function
    raise err


def version():
    """The library's version, "0.1.0"."""
    return _s.gc_get_version()


def params_table():
    """Every environment knob with the value in force, one row a line."""
    return _s.gc_params_table()


def partition(total, parts, index):
    """(offset, length) of part `index` when `total` items split over `parts` parts."""
    return tuple(_s.gc_partition(int(total), int(parts), int(index)))


# ---- dtypes --------------------------------------------------------------------------------
# Names other libraries use for gpucoll's dtypes (numpy/ml_dtypes/torch spell fp8 like this).
_DTYPE_ALIASES = {
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "long": "int64",
}
_DTYPE_NAMES = [_s.gc_dtype_name(i) for i in range(_s.GC_NUM_DTYPES)]
# gpucoll dtype -> the name numpy/ml_dtypes and torch use for it.
_FOREIGN_NAME = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


def _dtype_code(name):
    """gpucoll dtype number of a dtype name ("float32", "torch.bfloat16", ...), or None."""
    name = str(name)
    if name.startswith("torch."):
        name = name[6:]
    name = _DTYPE_ALIASES.get(name, name)
    return _DTYPE_NAMES.index(name) if name in _DTYPE_NAMES else None


def _dtype_code_of(dtype):
    """gpucoll dtype number of a name, a numpy dtype or scalar type, a torch dtype or a number."""
    if isinstance(dtype, int):
        return dtype if 0 <= dtype < _s.GC_NUM_DTYPES else None
    if isinstance(dtype, str) or type(dtype).__module__ == "torch":
        return _dtype_code(dtype)
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            return _dtype_code(np.dtype(dtype).name)
        except TypeError:
            pass
    return _dtype_code(getattr(dtype, "name", dtype))


def dtype_size(dtype):
    """Bytes per element of a dtype (a name, a numpy/torch dtype or a gpucoll dtype number)."""
    code = _dtype_code_of(dtype)
    if code is None:
        _fail(InvalidArgument, "dtype_size", "unknown dtype %r" % (dtype,))
    return _s.gc_dtype_size(code)


def _want_dtype(dtype, function):
    if dtype is None:
        return None
    code = _dtype_code_of(dtype)
    if code is None:
        _fail(InvalidArgument, function, "unknown dtype %r; gpucoll has %s"
              % (dtype, ", ".join(_DTYPE_NAMES)))
    return code


def _enum(from_name, value, what, function):
    if isinstance(value, int):
        return value
    try:
        return from_name(str(value))
    except InvalidArgument:
        _fail(InvalidArgument, function, "unknown %s %r" % (what, value))


# ---- arrays --------------------------------------------------------------------------------
class _Buffer:
    """What the C call needs from one array, plus what must stay alive until it returns."""

    __slots__ = ("obj", "ptr", "shape", "nelem", "dtype", "device", "readonly", "keep", "stream")

    def __init__(self, obj, ptr, shape, dtype, device, readonly, keep=None, stream=None):
        self.obj, self.ptr, self.shape, self.dtype = obj, ptr, tuple(shape), dtype
        self.device, self.readonly, self.keep = device, readonly, keep
        self.stream = stream  # the producer's stream to wait for (__cuda_array_interface__), or None
        self.nelem = math.prod(int(d) for d in self.shape)


def _c_contiguous(shape, strides, itemsize):
    """strides in bytes (None means C order)."""
    if strides is None:
        return True
    expect = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim > 1 and stride != expect:
            return False
        expect *= dim
    return True


def _check_dtype(code, name, function, what):
    if code is None:
        _fail(InvalidArgument, function, "%s has dtype %s, which gpucoll does not take (%s)"
              % (what, name, ", ".join(_DTYPE_NAMES)))
    return code


_TYPESTR = {"f4": "float32", "f2": "float16", "f8": "float64", "i4": "int32", "i8": "int64",
            "u1": "uint8"}


def _typestr_code(typestr, function, what):
    if typestr[0] not in "<|=" and sys.byteorder == "little":
        _fail(InvalidArgument, function, "%s is big-endian (%s)" % (what, typestr))
    return _check_dtype(_dtype_code(_TYPESTR.get(typestr[1:], typestr)), typestr, function, what)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# DLPack (type code, bits) -> gpucoll dtype name; codes 10 and 12 are float8_e4m3fn / e5m2.
_DL_DTYPES = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (2, 64): "float64",
              (0, 32): "int32", (0, 64): "int64", (1, 8): "uint8", (10, 8): "fp8_e4m3",
              (12, 8): "fp8_e5m2"}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


def _from_dlpack(obj, function, what):
    # The capsule is not consumed (not renamed), so its destructor frees the DLManagedTensor;
    # _Buffer.keep holds it until the call returns. The producer syncs to the legacy stream.
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    if t.device.device_type not in (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        _fail(InvalidArgument, function, "%s lives on DLPack device type %d, not CPU or CUDA"
              % (what, t.device.device_type))
    if t.dtype.lanes != 1:
        _fail(InvalidArgument, function, "%s has vector lanes" % what)
    key = (t.dtype.code, t.dtype.bits)
    code = _check_dtype(_dtype_code(_DL_DTYPES.get(key, "")), "DLPack %s" % (key,), function, what)
    shape = [t.shape[i] for i in range(t.ndim)]
    itemsize = t.dtype.bits // 8
    strides = None if not t.strides else [t.strides[i] * itemsize for i in range(t.ndim)]
    if not _c_contiguous(shape, strides, itemsize):
        _fail(InvalidArgument, function, "%s is not contiguous" % what)
    ptr = (t.data or 0) + t.byte_offset
    device = t.device.device_type in (_DL_CUDA, _DL_CUDA_MANAGED)
    return _Buffer(obj, ptr, shape, code, device, False, keep=capsule)


def _from_interface(obj, iface, device, function, what):
    """A _Buffer from an __array_interface__ (host) or __cuda_array_interface__ (device) dict."""
    data = iface.get("data")
    if not isinstance(data, tuple):  # absent, None or a buffer object: the buffer protocol's
        _fail(InvalidArgument, function, "%s has no data pointer in its array interface" % what)
    ptr, readonly = data
    shape = tuple(iface["shape"])
    code = _typestr_code(iface["typestr"], function, what)
    if not _c_contiguous(shape, iface.get("strides"), _s.gc_dtype_size(code)):
        _fail(InvalidArgument, function, "%s is not C-contiguous" % what)
    if iface.get("mask") is not None:
        _fail(InvalidArgument, function, "%s has a mask, which gpucoll cannot honour" % what)
    # Version 3: the consumer must wait for `stream` (the producer's last writes) before it
    # touches the data; 0 is disallowed as ambiguous, 1 and 2 are the default streams.
    stream = iface.get("stream") if device else None
    if stream is not None and (not isinstance(stream, int) or stream == 0):
        _fail(InvalidArgument, function, "%s has __cuda_array_interface__ stream %r; the protocol "
              "allows None, 1, 2 or a stream's address, never 0" % (what, stream))
    return _Buffer(obj, ptr or 0, shape, code, device, bool(readonly), stream=stream)


def _is_torch(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _buffer(obj, function, what, writable=False):
    """Parses an array-like into a _Buffer; raises InvalidArgument for what gpucoll cannot take."""
    if obj is None:
        _fail(InvalidArgument, function, "%s is None" % what)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            _fail(InvalidArgument, function, "%s is not C-contiguous (use numpy.ascontiguousarray)"
                  % what)
        if not obj.dtype.isnative:  # its dtype's name ("float32") does not say so
            _fail(InvalidArgument, function, "%s is big-endian (%s; use .astype(%r))"
                  % (what, obj.dtype.str, obj.dtype.newbyteorder("=").name))
        code = _check_dtype(_dtype_code(obj.dtype.name), obj.dtype.name, function, what)
        buf = _Buffer(obj, obj.__array_interface__["data"][0], obj.shape, code, False,
                      not obj.flags.writeable)
    elif _is_torch(obj):
        # torch first: its __cuda_array_interface__ knows no bfloat16 and refuses grad tensors.
        if not obj.is_contiguous():
            _fail(InvalidArgument, function, "%s is not contiguous (use .contiguous())" % what)
        code = _check_dtype(_dtype_code(obj.dtype), obj.dtype, function, what)
        buf = _Buffer(obj, obj.data_ptr(), obj.shape, code, obj.device.type == "cuda", False)
    else:
        try:
            cai = obj.__cuda_array_interface__
        except AttributeError:
            cai = None
        if cai is not None:
            buf = _from_interface(obj, cai, True, function, what)
        elif hasattr(obj, "__dlpack__"):
            buf = _from_dlpack(obj, function, what)
        elif hasattr(obj, "__array_interface__"):
            buf = _from_interface(obj, obj.__array_interface__, False, function, what)
        else:
            _fail(InvalidArgument, function, "%s (%s) is not an array: gpucoll takes numpy arrays, "
                  "torch tensors and objects with __cuda_array_interface__, __dlpack__ or "
                  "__array_interface__" % (what, type(obj).__name__))
    if writable and buf.readonly:
        _fail(InvalidArgument, function, "%s is read-only" % what)
    return buf


def _numpy_dtype(code):
    import numpy as np
    name = _DTYPE_NAMES[code]
    if name in ("bfloat16", "fp8_e4m3", "fp8_e5m2"):
        import ml_dtypes  # numpy has no such dtypes; ml_dtypes (JAX's) adds them
        return np.dtype(getattr(ml_dtypes, _FOREIGN_NAME.get(name, name)))
    return np.dtype(name)


def _empty_like(buf, shape, code, function):
    """A new array of the kind of buf (numpy, torch, cupy) for an output."""
    obj = buf.obj
    if _is_torch(obj):
        import torch
        name = _DTYPE_NAMES[code]
        return torch.empty(shape, dtype=getattr(torch, _FOREIGN_NAME.get(name, name)),
                           device=obj.device)
    module = type(obj).__module__.split(".")[0]
    if module == "cupy":
        import cupy
        with obj.device:
            return cupy.empty(shape, dtype=_numpy_dtype(code))
    if not buf.device:
        import numpy as np
        return np.empty(shape, dtype=_numpy_dtype(code))
    _fail(InvalidArgument, function, "cannot allocate an output like %s on the device; pass out="
          % type(obj).__name__)


def _stream(stream, function):
    """A cudaStream_t as an integer: an int, or an object with .cuda_stream (torch) / .ptr (cupy)."""
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    _fail(InvalidArgument, function, "stream %r is neither an int nor has .cuda_stream or .ptr"
          % (stream,))


def _gathered_shape(shape, parts):
    """The shape of `parts` arrays of `shape` concatenated along the first dimension."""
    return (parts * shape[0],) + tuple(shape[1:]) if shape else (parts,)


# ---- communicator --------------------------------------------------------------------------
def _world_fint():
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:  # the program already runs MPI through mpi4py
        return mpi.COMM_WORLD.py2f()
    fint = _s.gcswig_world()  # MPI_Init here (finished at exit) unless MPI already runs
    if fint == -1:
        _fail(_ERRORS["GC_ERR_MPI"], "Comm", "MPI_Init_thread failed")
    return fint


class Comm:
    """A gpucoll communicator over an MPI communicator (collective to create and to close).

    Comm(mpi4py_comm=None, *, device=-1, use_gpu=True, local_size=0, staging_bytes=0,
    timeout_ms=0): mpi4py_comm is an mpi4py communicator (or its Fortran handle as an int);
    None means MPI_COMM_WORLD (MPI is started if nothing started it). The keywords are the
    fields of gc_config_t. Use it as a context manager or call close() on every rank.
    """

    def __init__(self, mpi4py_comm=None, *, device=-1, use_gpu=True, local_size=0,
                 staging_bytes=0, timeout_ms=0):
        self._h = None
        if mpi4py_comm is None:
            fint = _world_fint()
        elif isinstance(mpi4py_comm, int):
            fint = mpi4py_comm
        else:
            fint = mpi4py_comm.py2f()
        cfg = _s.gc_config_t()
        cfg.device = int(device)
        cfg.use_gpu = 1 if use_gpu else 0
        cfg.local_size = int(local_size)
        cfg.staging_bytes = int(staging_bytes)
        cfg.timeout_ms = int(timeout_ms)
        self._h = _s.gc_comm_init_f(fint, cfg)

    # -- lifetime
    def close(self):
        """Collective: destroys the communicator (waits for its outstanding work). Idempotent.
        StreamTimeout (a device's work did not finish): nothing was freed and the communicator
        stays open; close again on every rank once that work ends."""
        h, self._h = self._h, None
        if h is not None:
            try:
                _s.gc_comm_destroy(h)
            except StreamTimeout:
                self._h = h
                raise

    def abort(self, errorcode=1):
        """Not collective: stops device waiters and MPI_Abort()s; for a rank whose peers are gone."""
        _s.gc_comm_abort(self._handle("abort"), int(errorcode))

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._h is None:
            return "<gpucoll.Comm closed>"
        return "<gpucoll.Comm rank %d of %d, device %d>" % (self.rank, self.size, self.device)

    def _handle(self, function):
        if self._h is None:
            _fail(InvalidUsage, function, "the communicator is closed")
        return self._h

    # -- queries
    def _query(self, fn, name):
        return fn(self._handle(name))

    rank = property(lambda self: self._query(_s.gc_comm_rank, "rank"), doc="rank in the communicator")
    size = property(lambda self: self._query(_s.gc_comm_size, "size"), doc="number of ranks")
    local_rank = property(lambda self: self._query(_s.gc_comm_local_rank, "local_rank"),
                          doc="rank among the ranks of this node")
    local_size = property(lambda self: self._query(_s.gc_comm_local_size, "local_size"),
                          doc="ranks on this node")
    node_count = property(lambda self: self._query(_s.gc_comm_node_count, "node_count"),
                          doc="number of nodes")
    device = property(lambda self: self._query(_s.gc_comm_device, "device"),
                      doc="CUDA device of this rank; -1 on a host-only rank")
    cuda_aware_mpi = property(lambda self: bool(self._query(_s.gc_comm_cuda_aware_mpi,
                                                            "cuda_aware_mpi")),
                              doc="True when MPI takes device pointers itself")
    p2p_ready = property(lambda self: bool(self._query(_s.gc_comm_p2p_ready, "p2p_ready")),
                         doc="True when every local GPU reaches every other (P2P kernels usable)")
    stream = property(lambda self: self._query(_s.gc_comm_stream, "stream") or None,
                      doc="the communicator's own stream as an int (None on host-only ranks)")

    @property
    def algo_table(self):
        """The dispatch table in force, one row a line."""
        return _s.gc_comm_algo_table(self._handle("algo_table"))

    def peer_access(self, peer):
        """True when this rank's GPU can read and write the GPU of local rank `peer`."""
        return bool(_s.gc_comm_peer_access(self._handle("peer_access"), int(peer)))

    def synchronize(self, stream=None):
        """Waits for `stream` and reports any error a kernel recorded (Timeout). Gives up after
        twice GC_TIMEOUT_MS when work on the stream that is not gpucoll's never ends
        (StreamTimeout; the communicator stays usable once that work ends)."""
        _s.gc_synchronize(self._handle("synchronize"), _stream(stream, "synchronize"))

    # -- tuning
    def autotune(self, max_bytes=64 << 20, dtype="float32"):
        """Times every algorithm per collective up to `max_bytes` and makes the fastest this
        communicator's choice (collective). Returns the new dispatch table."""
        code = _want_dtype(dtype, "autotune")
        if code is None:
            _fail(InvalidArgument, "autotune", "needs a dtype; gpucoll has %s" % ", ".join(_DTYPE_NAMES))
        _s.gc_autotune(self._handle("autotune"), int(max_bytes), code)
        return self.algo_table

    def tune_save(self, path):
        """Writes the tuned rows to `path` (rank 0 writes; collective)."""
        _s.gc_tune_save(self._handle("tune_save"), str(path))

    def tune_load(self, path):
        """Reads tuned rows saved by tune_save (rank 0 reads and broadcasts; collective)."""
        _s.gc_tune_load(self._handle("tune_load"), str(path))

    def tune_reset(self):
        """Goes back to the built-in dispatch table."""
        _s.gc_tune_reset(self._handle("tune_reset"))

    # -- collectives
    def _options(self, function, algo, max_blocks, pdl, scale, add, out_dtype, in_code, out_shape,
                 keep):
        if (algo in (None, "auto", _s.GC_ALGO_AUTO) and not max_blocks and pdl is None
                and scale == 1.0 and add is None and out_dtype is None):
            return None, in_code
        opts = _s.gc_options_t()
        if algo is not None:
            opts.algo = _enum(_s.gc_algo_from_name, algo, "algorithm", function)
        opts.max_blocks = int(max_blocks or 0)
        opts.pdl = 0 if pdl is None else 1 if pdl else -1  # None: the communicator's GC_PDL
        opts.scale = float(scale)
        out_code = in_code
        if out_dtype is not None:
            out_code = _want_dtype(out_dtype, function)
            opts.out_dtype = out_code
        if add is not None:
            a = _buffer(add, function, "add")
            n = math.prod(out_shape)
            if a.dtype != in_code:
                _fail(InvalidArgument, function, "add has dtype %s, the input %s"
                      % (_DTYPE_NAMES[a.dtype], _DTYPE_NAMES[in_code]))
            if a.nelem != n:
                _fail(InvalidArgument, function, "add has %d elements, expected %d"
                      % (a.nelem, n))
            opts.add = a.ptr
            keep.append(a)
        return opts, out_code

    @staticmethod
    def _wait_producers(h, stream, *bufs):
        """Waits for the streams that __cuda_array_interface__ producers wrote the arrays on, but
        for the call's own `stream` (None and 0, NULL, are the legacy default stream: 1)."""
        own = 1 if not stream else stream
        for p in {b.stream for b in bufs if b is not None and b.stream is not None}:
            if p != own:
                _s.gc_synchronize(h, p)

    def _output(self, function, send, out, shape, code):
        """The receive buffer: a new array like send, send itself (in place) or the given one."""
        if out is None:
            out = _empty_like(send, shape, code, function)
        if out is send.obj:
            recv = send
            if recv.readonly:
                _fail(InvalidArgument, function, "out is read-only")
        else:
            recv = _buffer(out, function, "out", writable=True)
        n = math.prod(shape)
        if recv.nelem != n:
            _fail(InvalidArgument, function, "out has %d elements, expected %d" % (recv.nelem, n))
        if recv.dtype != code:
            _fail(InvalidArgument, function, "out has dtype %s, expected %s"
                  % (_DTYPE_NAMES[recv.dtype], _DTYPE_NAMES[code]))
        if recv.device != send.device:
            _fail(InvalidArgument, function, "send and out must both be on the host or on a device")
        return out, recv

    def allreduce(self, send, out=None, op="sum", *, algo=None, max_blocks=0, pdl=None,
                  scale=1.0, add=None, out_dtype=None, stream=None):
        """Element-wise reduction over all ranks; returns out (new unless given; in place when
        out is send). Epilogue: out = cast<out_dtype>(reduced * scale + add)."""
        f = "allreduce"
        h = self._handle(f)
        s = _buffer(send, f, "send")
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, scale, add, out_dtype, s.dtype,
                                   s.shape, keep)
        out, r = self._output(f, s, out, s.shape, code)
        op, st = _enum(_s.gc_op_from_name, op, "op", f), _stream(stream, f)
        self._wait_producers(h, st, s, r, *keep)
        _s.gc_allreduce_ex(s.ptr, r.ptr, s.nelem, s.dtype, op, h, st, opts)
        return out

    def _scatter(self, f, c_function, parts, ranks, send, out, op, algo, max_blocks, pdl, scale,
                 add, out_dtype, stream):
        """A reduce-scatter into `parts` blocks, one per rank of `ranks` (the words for them)."""
        h = self._handle(f)
        s = _buffer(send, f, "send")
        if s.nelem % parts:
            _fail(InvalidArgument, f, "send has %d elements, not a multiple of the %d %s"
                  % (s.nelem, parts, ranks))
        n = s.nelem // parts
        shape = ((s.shape[0] // parts,) + s.shape[1:]
                 if s.shape and s.shape[0] % parts == 0 else (n,))
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, scale, add, out_dtype, s.dtype, shape,
                                   keep)
        out, r = self._output(f, s, out, shape, code)
        op, st = _enum(_s.gc_op_from_name, op, "op", f), _stream(stream, f)
        self._wait_producers(h, st, s, r, *keep)
        c_function(s.ptr, r.ptr, n, s.dtype, op, h, st, opts)
        return out

    def reducescatter(self, send, out=None, op="sum", *, algo=None, max_blocks=0, pdl=None,
                      scale=1.0, add=None, out_dtype=None, stream=None):
        """send holds size * n elements; rank r gets the reduction of elements [r*n, (r+1)*n).
        The output has send's shape with the first dimension divided by size (1-D otherwise)."""
        return self._scatter("reducescatter", _s.gc_reducescatter_ex, self.size, "ranks", send,
                             out, op, algo, max_blocks, pdl, scale, add, out_dtype, stream)

    def reducescatter_allreduce(self, send, out=None, op="sum", *, algo=None, max_blocks=0,
                                pdl=None, scale=1.0, add=None, out_dtype=None, stream=None):
        """Mixed tensor/data parallelism over nodes of local_size ranks: send holds
        local_size * n elements; this rank gets elements [l*n, (l+1)*n), l its local_rank,
        reduced over every rank ("avg" divides by size). Shaped as reducescatter's output with
        local_size for size; add has n elements. In place when out is that block of send."""
        return self._scatter("reducescatter_allreduce", _s.gc_reducescatter_allreduce,
                             self.local_size, "ranks of a node", send, out, op, algo, max_blocks,
                             pdl, scale, add, out_dtype, stream)

    def reducescatter_2d(self, send, axis=0, out=None, op="sum", *, algo=None, max_blocks=0,
                         pdl=None, scale=1.0, add=None, out_dtype=None, stream=None):
        """Reduce-scatter of a rows x cols matrix: axis 0 gives this rank a block of rows
        (block x cols), axis 1 a block of columns of every row (rows x block); uneven splits
        follow partition()."""
        f = "reducescatter_2d"
        h = self._handle(f)
        s = _buffer(send, f, "send")
        if len(s.shape) != 2:
            _fail(InvalidArgument, f, "send must be 2-D, not of shape %s" % (s.shape,))
        if axis not in (0, 1):
            _fail(InvalidArgument, f, "axis must be 0 or 1, not %r" % (axis,))
        rows, cols = s.shape
        _, block = partition(s.shape[axis], self.size, self.rank)
        shape = (block, cols) if axis == 0 else (rows, block)
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, scale, add, out_dtype, s.dtype, shape,
                                   keep)
        out, r = self._output(f, s, out, shape, code)
        op, st = _enum(_s.gc_op_from_name, op, "op", f), _stream(stream, f)
        self._wait_producers(h, st, s, r, *keep)
        _s.gc_reducescatter_2d(s.ptr, r.ptr, rows, cols, axis, s.dtype, op, h, st, opts)
        return out

    def allgather(self, send, out=None, *, algo=None, max_blocks=0, pdl=None, stream=None):
        """Concatenates every rank's send along the first dimension (rank order)."""
        f = "allgather"
        h = self._handle(f)
        s = _buffer(send, f, "send")
        shape = _gathered_shape(s.shape, self.size)
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, 1.0, None, None, s.dtype, shape, keep)
        out, r = self._output(f, s, out, shape, code)
        st = _stream(stream, f)
        self._wait_producers(h, st, s, r)
        _s.gc_allgather_ex(s.ptr, r.ptr, s.nelem, s.dtype, h, st, opts)
        return out

    def allreduce_allgather(self, send, out=None, op="sum", *, algo=None, max_blocks=0, pdl=None,
                            scale=1.0, add=None, out_dtype=None, stream=None):
        """Mixed tensor/data parallelism over nodes of local_size ranks: send reduced over the
        ranks of this local rank on every node ("avg" divides by the node count; the epilogue
        applies here, add has send's elements), then the node's results concatenated along the
        first dimension in local-rank order, the same on every rank. In place when send is
        block local_rank of out."""
        f = "allreduce_allgather"
        h = self._handle(f)
        s = _buffer(send, f, "send")
        shape = _gathered_shape(s.shape, self.local_size)
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, scale, add, out_dtype, s.dtype,
                                   s.shape, keep)
        out, r = self._output(f, s, out, shape, code)
        op, st = _enum(_s.gc_op_from_name, op, "op", f), _stream(stream, f)
        self._wait_producers(h, st, s, r, *keep)
        _s.gc_allreduce_allgather(s.ptr, r.ptr, s.nelem, s.dtype, op, h, st, opts)
        return out

    def broadcast(self, buf, root=0, out=None, *, algo=None, max_blocks=0, pdl=None, stream=None):
        """Root's buf on every rank: in buf itself (out=None) or in out; returns that array."""
        f = "broadcast"
        h = self._handle(f)
        s = _buffer(buf, f, "buf")
        if out is None:
            out = buf
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, 1.0, None, None, s.dtype, s.shape, keep)
        out, r = self._output(f, s, out, s.shape, code)
        st = _stream(stream, f)
        self._wait_producers(h, st, s, r)
        _s.gc_broadcast_ex(s.ptr, r.ptr, s.nelem, s.dtype, int(root), h, st, opts)
        return out

    # -- memory helpers
    def fill_random(self, array, seed=0):
        """Fills an array (host or device) from the library's generator keyed by (seed, index)."""
        b = _buffer(array, "fill_random", "array", writable=True)
        h = self._handle("fill_random")
        self._wait_producers(h, -1, b)  # on the communicator's own stream: wait for every one
        _s.gc_fill_random(h, b.ptr, b.nelem, b.dtype, int(seed))
        return array

    def buffer_alloc(self, nbytes, on_device=True):
        """Local allocation: device memory of this rank's GPU, or pinned host memory; an int."""
        return _s.gc_buffer_alloc(self._handle("buffer_alloc"), int(nbytes), 1 if on_device else 0)

    def buffer_free(self, ptr):
        _s.gc_buffer_free(self._handle("buffer_free"), int(ptr))

    def mem_alloc(self, nbytes):
        """Collective, symmetric allocation the collectives use in place (zero-copy); an int."""
        return _s.gc_mem_alloc(self._handle("mem_alloc"), int(nbytes))

    def mem_free(self, ptr):
        """Collective. StreamTimeout: nothing was freed; free again on every rank later."""
        _s.gc_mem_free(self._handle("mem_free"), int(ptr))

    def memcpy(self, dst, src, nbytes):
        """Blocking copy between two integer addresses (host or device)."""
        _s.gc_memcpy(self._handle("memcpy"), int(dst), int(src), int(nbytes))
