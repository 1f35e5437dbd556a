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

import math as _math
import numbers as _numbers
import os as _os
import sys as _sys
import warnings as _warnings
import weakref as _weakref

from . import gpucoll_swig as _s
from . import _gpucoll_swig as _m

# The SWIG modules stay reachable as gpucoll.gpucoll_swig (_sys.modules), not in the namespace.
for _sub in ("gpucoll_swig", "_gpucoll_swig"):
    globals().pop(_sub, None)
del _sub

__version__ = _s.gc_get_version()
__all__ = ["Comm", "Mixed", "Error", "version", "params_table", "partition", "dtype_size", "__version__"]

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


def __dir__():
    return sorted(__all__)
InvalidUsage = _ERRORS["GC_ERR_INVALID_USAGE"]


# allreduce_rmsnorm_fp8's numerics by name (gc_norm_numerics_name's names)
_NORM_NUMERICS = {"max": _s.GC_NORM_MAX, "rounded": _s.GC_NORM_ROUNDED}


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
    np = _sys.modules.get("numpy")
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
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise TypeError("%s: %s must be a name (str), not %s" % (function, what, type(value).__name__))
    try:
        return from_name(value)
    except InvalidArgument:
        _fail(InvalidArgument, function, "unknown %s %r" % (what, value))


# mpi4py's reduction operators that gpucoll has, by their attribute names in mpi4py.MPI.
_MPI_OPS = {"SUM": "sum", "PROD": "prod", "MIN": "min", "MAX": "max"}


def _op_code(op, function):
    """gpucoll op number of a name ("sum", "avg", ...) or an mpi4py operator (MPI.SUM, MPI.MAX, ...)."""
    if isinstance(op, str):
        return _enum(_s.gc_op_from_name, op, "op", function)
    mpi = _sys.modules.get("mpi4py.MPI")
    if mpi is not None and isinstance(op, mpi.Op):
        for attr, name in _MPI_OPS.items():
            if op == getattr(mpi, attr):
                return _s.gc_op_from_name(name)
        raise ValueError("%s: mpi4py operator %r has no gpucoll counterpart (gpucoll takes "
                         "MPI.SUM, MPI.PROD, MPI.MIN, MPI.MAX or the names %s)"
                         % (function, op, ", ".join(_op_names())))
    raise TypeError("%s: op must be an op name (%s) or an mpi4py operator, not %s"
                    % (function, ", ".join(_op_names()), type(op).__name__))


def _op_names():
    return [_s.gc_op_name(i) for i in range(_s.GC_NUM_OPS)]


def _int(value, name, function, minimum=None):
    """value as an int: integers only (not bool, not float), at least `minimum` when given."""
    if isinstance(value, bool) or not isinstance(value, _numbers.Integral):
        raise TypeError("%s: %s must be an integer, not %s" % (function, name, type(value).__name__))
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError("%s: %s must be at least %d, not %d" % (function, name, minimum, value))
    return value


def _real(value, name, function):
    if isinstance(value, bool) or not isinstance(value, _numbers.Real):
        raise TypeError("%s: %s must be a number, not %s" % (function, name, type(value).__name__))
    return float(value)


def _path(path, function):
    """A file name: str or os.PathLike (bytes paths too), never another type made into text."""
    if not isinstance(path, (str, bytes, _os.PathLike)):
        raise TypeError("%s: path must be a str or os.PathLike, not %s"
                        % (function, type(path).__name__))
    return _os.fsdecode(_os.fspath(path))


# ---- arrays --------------------------------------------------------------------------------
class _Buffer:
    """What the C call needs from one array, plus what must stay alive until it returns."""

    __slots__ = ("obj", "ptr", "shape", "nelem", "dtype", "device", "readonly", "keep", "stream")

    def __init__(self, obj, ptr, shape, dtype, device, readonly, keep=None, stream=None):
        self.obj, self.ptr, self.shape, self.dtype = obj, ptr, tuple(shape), dtype
        self.device, self.readonly, self.keep = device, readonly, keep
        self.stream = stream  # the producer's stream to wait for (__cuda_array_interface__), or None
        self.nelem = _math.prod(int(d) for d in self.shape)


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
    if typestr[0] not in "<|=" and _sys.byteorder == "little":
        _fail(InvalidArgument, function, "%s is big-endian (%s)" % (what, typestr))
    return _check_dtype(_dtype_code(_TYPESTR.get(typestr[1:], typestr)), typestr, function, what)


# DLPack (type code, bits) -> gpucoll dtype name; codes 10 and 12 are float8_e4m3fn / e5m2.
_DL_DTYPES = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (2, 64): "float64",
              (0, 32): "int32", (0, 64): "int64", (1, 8): "uint8", (10, 8): "fp8_e4m3",
              (12, 8): "fp8_e5m2"}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


def _from_dlpack(obj, function, what):
    # The capsule is read, not consumed (not renamed), so its destructor frees the tensor;
    # _Buffer.keep holds it until the call returns. The producer syncs to the legacy stream.
    capsule = obj.__dlpack__()
    data, device_type, _, dl_code, bits, lanes, shape, strides, offset = \
        _s.gcswig_dlpack_fields(capsule)
    if device_type not in (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        _fail(InvalidArgument, function, "%s lives on DLPack device type %d, not CPU or CUDA"
              % (what, device_type))
    if lanes != 1:
        _fail(InvalidArgument, function, "%s has vector lanes" % what)
    key = (dl_code, bits)
    code = _check_dtype(_dtype_code(_DL_DTYPES.get(key, "")), "DLPack %s" % (key,), function, what)
    itemsize = bits // 8
    strides = None if strides is None else [st * itemsize for st in strides]
    if not _c_contiguous(shape, strides, itemsize):
        _fail(InvalidArgument, function, "%s is not contiguous" % what)
    ptr = (data or 0) + offset
    device = device_type in (_DL_CUDA, _DL_CUDA_MANAGED)
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
    np = _sys.modules.get("numpy")
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
    mpi = _sys.modules.get("mpi4py.MPI")
    if mpi is not None:  # the program already runs MPI through mpi4py
        return mpi.COMM_WORLD.py2f()
    fint = _s.gcswig_world()  # MPI_Init here (finished at exit) unless MPI already runs
    if fint == -1:
        _fail(_ERRORS["GC_ERR_MPI"], "Comm", "MPI_Init_thread failed")
    return fint


def _tune_args(max_bytes, dtype):
    """autotune's (max_bytes, dtype code), checked."""
    code = _want_dtype(dtype, "autotune")
    if code is None:
        _fail(InvalidArgument, "autotune", "needs a dtype; gpucoll has %s" % ", ".join(_DTYPE_NAMES))
    return _int(max_bytes, "max_bytes", "autotune", 1), code


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
        self._blocks = []  # (address, weakref to its _SymmetricBlock), in allocation order
        f = "Comm"
        if mpi4py_comm is None:
            fint = _world_fint()
        elif isinstance(mpi4py_comm, int) and not isinstance(mpi4py_comm, bool):
            fint = mpi4py_comm
        elif callable(getattr(mpi4py_comm, "py2f", None)):
            fint = mpi4py_comm.py2f()
        else:
            raise TypeError("Comm: expected an mpi4py communicator, its Fortran handle (int) or "
                            "None, not %s" % type(mpi4py_comm).__name__)
        if not isinstance(use_gpu, bool):
            raise TypeError("Comm: use_gpu must be True or False, not %s" % type(use_gpu).__name__)
        cfg = _s.gc_config_t()
        cfg.device = _int(device, "device", f, -1)
        cfg.use_gpu = 1 if use_gpu else 0
        cfg.local_size = _int(local_size, "local_size", f, 0)
        cfg.staging_bytes = _int(staging_bytes, "staging_bytes", f, 0)
        cfg.timeout_ms = _int(timeout_ms, "timeout_ms", f, 0)
        self._h = _s.gc_comm_init_f(fint, cfg)

    # -- lifetime
    def close(self):
        """Collective: destroys the communicator (waits for its outstanding work). Idempotent.
        StreamTimeout (a device's work did not finish): nothing was freed and the communicator
        stays open; close again on every rank once that work ends."""
        h, self._h = self._h, None
        if h is not None:
            alive = sum(1 for _, ref in self._blocks if ref() is not None)
            if alive:
                _warnings.warn("gpucoll.Comm.close: %d array(s) from Comm.empty are still alive; "
                               "their memory is freed now and must not be used" % alive,
                               ResourceWarning, stacklevel=2)
            try:
                _s.gc_comm_destroy(h)
            except StreamTimeout:
                self._h = h
                raise
            self._blocks = []  # gc_comm_destroy freed what gc_mem_alloc gave

    def abort(self, errorcode=1):
        """Not collective: stops device waiters and MPI_Abort()s; for a rank whose peers are gone."""
        _s.gc_comm_abort(self._handle("abort"), _int(errorcode, "errorcode", "abort"))

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
        return bool(_s.gc_comm_peer_access(self._handle("peer_access"), _int(peer, "peer", "peer_access", 0)))

    def synchronize(self, stream=None):
        """Waits for `stream` and reports any error a kernel recorded (Timeout). Gives up after
        twice GC_TIMEOUT_MS when work on the stream that is not gpucoll's never ends
        (StreamTimeout; the communicator stays usable once that work ends)."""
        _s.gc_synchronize(self._handle("synchronize"), _stream(stream, "synchronize"))

    # -- tuning
    def autotune(self, max_bytes=64 << 20, dtype="float32"):
        """Times every algorithm per collective up to `max_bytes` and makes the fastest this
        communicator's choice (collective). Returns the new dispatch table."""
        _s.gc_autotune(self._handle("autotune"), *_tune_args(max_bytes, dtype))
        return self.algo_table

    def tune_save(self, path):
        """Writes the tuned rows to `path` (rank 0 writes; collective)."""
        _s.gc_tune_save(self._handle("tune_save"), _path(path, "tune_save"))

    def tune_load(self, path):
        """Reads tuned rows saved by tune_save (rank 0 reads and broadcasts; collective)."""
        _s.gc_tune_load(self._handle("tune_load"), _path(path, "tune_load"))

    def tune_reset(self):
        """Goes back to the built-in dispatch table."""
        _s.gc_tune_reset(self._handle("tune_reset"))

    # -- collectives
    def _options(self, function, algo, max_blocks, pdl, scale, add, out_dtype, in_code, out_shape,
                 keep, wire=None, wire_group=0):
        if (algo in (None, "auto", _s.GC_ALGO_AUTO) and not max_blocks and pdl is None
                and scale == 1.0 and add is None and out_dtype is None and wire is None
                and not wire_group):
            return None, in_code
        opts = _s.gc_options_t()
        if wire is not None:
            opts.wire = _enum(_s.gc_wire_from_name, wire, "wire format", function)
        opts.wire_group = _int(wire_group or 0, "wire_group", function, 0)
        if algo is not None:
            opts.algo = _enum(_s.gc_algo_from_name, algo, "algorithm", function)
        opts.max_blocks = _int(max_blocks or 0, "max_blocks", function, 0)
        if pdl is not None and not isinstance(pdl, bool):
            raise TypeError("%s: pdl must be True, False or None, not %s" % (function, type(pdl).__name__))
        opts.pdl = 0 if pdl is None else 1 if pdl else -1  # None: the communicator's GC_PDL
        opts.scale = _real(scale, "scale", function)
        out_code = in_code
        if out_dtype is not None:
            out_code = _want_dtype(out_dtype, function)
            opts.out_dtype = out_code
        if add is not None:
            a = _buffer(add, function, "add")
            n = _math.prod(out_shape)
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
        n = _math.prod(shape)
        if recv.nelem != n:
            _fail(InvalidArgument, function, "out has %d elements, expected %d" % (recv.nelem, n))
        if recv.dtype != code:
            _fail(InvalidArgument, function, "out has dtype %s, expected %s"
                  % (_DTYPE_NAMES[recv.dtype], _DTYPE_NAMES[code]))
        if recv.device != send.device:
            _fail(InvalidArgument, function, "send and out must both be on the host or on a device")
        return out, recv

    def allreduce(self, send, out=None, op="sum", *, algo=None, max_blocks=0, pdl=None,
                  scale=1.0, add=None, out_dtype=None, stream=None, wire=None, wire_group=0):
        """Element-wise reduction over all ranks; returns out (new unless given; in place when
        out is send). Epilogue: out = cast<out_dtype>(reduced * scale + add). wire: "native"
        (None, the default), "fp8" (float32/float16/bfloat16 data, wire_group 32, 64 or 128
        elements per scale; 0 = 32) or "bf16" (float32 data) moves compressed bytes, sum and avg
        only, within the error bound of docs/wire-format.md, the same bits on every rank."""
        f = "allreduce"
        h = self._handle(f)
        s = _buffer(send, f, "send")
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, scale, add, out_dtype, s.dtype,
                                   s.shape, keep, wire, wire_group)
        out, r = self._output(f, s, out, s.shape, code)
        op, st = _op_code(op, f), _stream(stream, f)
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
        op, st = _op_code(op, f), _stream(stream, f)
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
        axis = _int(axis, "axis", f)
        if axis not in (0, 1):
            _fail(InvalidArgument, f, "axis must be 0 or 1, not %r" % (axis,))
        rows, cols = s.shape
        _, block = partition(s.shape[axis], self.size, self.rank)
        shape = (block, cols) if axis == 0 else (rows, block)
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, scale, add, out_dtype, s.dtype, shape,
                                   keep)
        out, r = self._output(f, s, out, shape, code)
        op, st = _op_code(op, f), _stream(stream, f)
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
        op, st = _op_code(op, f), _stream(stream, f)
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
        root = _int(root, "root", f, 0)
        _s.gc_broadcast_ex(s.ptr, r.ptr, s.nelem, s.dtype, root, h, st, opts)
        return out

    _PLANNED = {"allreduce": _s.GC_COLLECTIVE_ALLREDUCE,
                "reducescatter": _s.GC_COLLECTIVE_REDUCESCATTER,
                "allgather": _s.GC_COLLECTIVE_ALLGATHER,
                "broadcast": _s.GC_COLLECTIVE_BROADCAST}

    def plan(self, collective, send, out=None, op="sum", *, root=0, algo=None, max_blocks=0,
             pdl=None, scale=1.0, add=None, out_dtype=None):
        """The plan that comm.<collective>(send, out, ...) would take, without running anything
        (not collective): a dict of algorithm, fell_from (None: no fallback), from_table, path
        ("kernels", "copyengine", "mpi", "local", "hierarchical", "none"), blocks, threads, chunk_bytes,
        piece_bytes and staged. The arguments are the call's; out=None plans for a new array (the
        broadcast: in place in send), as the call would make. Refused calls raise as they would."""
        f = "plan"
        h = self._handle(f)
        if not isinstance(collective, str) or collective not in self._PLANNED:
            raise ValueError("plan: collective must be one of %s, not %r"
                             % (", ".join(sorted(self._PLANNED)), collective))
        s = _buffer(send, f, "send")
        count, shape = s.nelem, s.shape
        if collective == "reducescatter":
            if s.nelem % self.size:
                _fail(InvalidArgument, f, "send has %d elements, not a multiple of the %d ranks"
                      % (s.nelem, self.size))
            count = s.nelem // self.size
            shape = ((s.shape[0] // self.size,) + s.shape[1:]
                     if s.shape and s.shape[0] % self.size == 0 else (count,))
        elif collective == "allgather":
            shape = _gathered_shape(s.shape, self.size)
        elif collective == "broadcast" and out is None:
            out = send
        keep = []
        opts, code = self._options(f, algo, max_blocks, pdl, scale, add, out_dtype, s.dtype, shape,
                                   keep)
        out, r = self._output(f, s, out, shape, code)
        op = _op_code(op, f) if collective in ("allreduce", "reducescatter") else _s.GC_SUM
        root = _int(root, "root", f, 0)
        p = _s.gc_plan_t()
        _s.gc_plan_query(p, self._PLANNED[collective], s.ptr, r.ptr, count, s.dtype, op, root, h,
                         opts)
        return {"algorithm": _s.gc_algo_name(p.algo),
                "fell_from": None if p.fell_from == _s.GC_ALGO_AUTO else _s.gc_algo_name(p.fell_from),
                "from_table": bool(p.from_table), "path": _s.gc_plan_path_name(p.path),
                "blocks": p.blocks, "threads": p.threads, "chunk_bytes": p.chunk_bytes,
                "piece_bytes": p.piece_bytes, "staged": bool(p.staged)}

    def mixed(self, local_tp_size=0, local_dp_size=0, inter_tp_size=0, inter_dp_size=0):
        """Collective: a TP x DP layout of this communicator (a Mixed), numbered as FlashInfer
        numbers it (docs/mixed.md); sizes of 0 take FlashInfer's defaults. Close it before the
        communicator."""
        return Mixed(self, local_tp_size, local_dp_size, inter_tp_size, inter_dp_size)

    # -- memory helpers
    def fill_random(self, array, seed=0):
        """Fills an array (host or device) from the library's generator keyed by (seed, index)."""
        b = _buffer(array, "fill_random", "array", writable=True)
        h = self._handle("fill_random")
        self._wait_producers(h, -1, b)  # on the communicator's own stream: wait for every one
        _s.gc_fill_random(h, b.ptr, b.nelem, b.dtype, _int(seed, "seed", "fill_random", 0))
        return array

    def buffer_alloc(self, nbytes, on_device=True):
        """Local allocation: device memory of this rank's GPU, or pinned host memory; an int."""
        return _s.gc_buffer_alloc(self._handle("buffer_alloc"), _int(nbytes, "nbytes", "buffer_alloc", 1),
                                  1 if on_device else 0)

    def buffer_free(self, ptr):
        _s.gc_buffer_free(self._handle("buffer_free"), int(ptr))

    def mem_alloc(self, nbytes):
        """Collective, symmetric allocation the collectives use in place (zero-copy); an int."""
        return _s.gc_mem_alloc(self._handle("mem_alloc"), _int(nbytes, "nbytes", "mem_alloc", 1))

    def mem_free(self, ptr):
        """Collective. StreamTimeout: nothing was freed; free again on every rank later."""
        _s.gc_mem_free(self._handle("mem_free"), int(ptr))

    def memcpy(self, dst, src, nbytes):
        """Blocking copy between two integer addresses (host or device)."""
        _s.gc_memcpy(self._handle("memcpy"), int(dst), int(src), int(nbytes))

    # -- the fused all-reduce + RMSNorm + FP8
    def allreduce_rmsnorm_fp8(self, send, gamma, out=None, scales=None, *, epsilon=1e-6,
                              weight_offset=0.0, scale_ub=0.0, residual=None, residual_out=None,
                              out_dtype="fp8_e4m3", numerics="max", algo=None, max_blocks=0, pdl=None,
                              stream=None):
        """send (rows x cols, or one row) all-reduced (sum) plus residual, f in float32, then per
        row y = v / sqrt(mean(v^2) + epsilon) * (gamma + weight_offset) quantized to out_dtype
        (fp8_e4m3 or fp8_e5m2) with one float32 scale a row. numerics "max" (the default, Modular
        MAX's): v = f, scale = min(max |y|, scale_ub) / FP8_MAX; "rounded": v = f rounded to
        send's dtype, scale = max(max |y| / FP8_MAX, 1 / (FP8_MAX * 512)), then at most scale_ub
        (gpucoll.h; scale_ub 0: no bound). Returns (out, scales), new unless given. residual_out,
        when given, receives f rounded to send's dtype. A numpy out may be uint8 (the fp8 codes);
        a new numpy out is one too unless ml_dtypes is installed."""
        f = "allreduce_rmsnorm_fp8"
        h = self._handle(f)
        s = _buffer(send, f, "send")
        if len(s.shape) not in (1, 2):
            _fail(InvalidArgument, f, "send must be 1-D or 2-D, not of shape %s" % (s.shape,))
        rows, cols = s.shape if len(s.shape) == 2 else (1, s.shape[0])
        out_code = _want_dtype(out_dtype, f)
        keep = [s]
        norm = _s.gc_rmsnorm_fp8_t()
        norm.out_dtype = out_code
        norm.epsilon = _real(epsilon, "epsilon", f)
        norm.weight_offset = _real(weight_offset, "weight_offset", f)
        norm.scale_ub = _real(scale_ub, "scale_ub", f)
        if not isinstance(numerics, str) or numerics not in _NORM_NUMERICS:
            _fail(InvalidArgument, f, "numerics must be 'max' or 'rounded', not %r" % (numerics,))
        norm.numerics = _NORM_NUMERICS[numerics]
        norm.gamma = self._like(f, "gamma", gamma, s, cols, s.dtype, keep).ptr
        if residual is not None:
            norm.residual = self._like(f, "residual", residual, s, rows * cols, s.dtype, keep).ptr
        if residual_out is not None:
            norm.residual_out = self._like(f, "residual_out", residual_out, s, rows * cols, s.dtype,
                                           keep, writable=True).ptr
        if out is None:
            out = self._fp8_like(s, out_code, f)
        o = self._like(f, "out", out, s, rows * cols, out_code, keep, writable=True, codes_ok=True)
        if scales is None:
            scales = _empty_like(s, (rows,), _dtype_code("float32"), f)
        sc = self._like(f, "scales", scales, s, rows, _dtype_code("float32"), keep, writable=True)
        opts, _ = self._options(f, algo, max_blocks, pdl, 1.0, None, None, s.dtype, s.shape, keep)
        st = _stream(stream, f)
        self._wait_producers(h, st, *keep)
        _s.gc_allreduce_rmsnorm_fp8(s.ptr, o.ptr, sc.ptr, rows, cols, s.dtype, norm, h, st, opts)
        return out, scales

    @staticmethod
    def _like(function, what, obj, send, nelem, code, keep, writable=False, codes_ok=False):
        """An argument array with nelem elements of dtype code, where send is (host or device);
        codes_ok: a uint8 array stands for an fp8 one (its codes)."""
        b = _buffer(obj, function, what, writable=writable)
        uint8 = _dtype_code("uint8")
        if b.dtype != code and not (codes_ok and b.dtype == uint8):
            _fail(InvalidArgument, function, "%s has dtype %s, expected %s"
                  % (what, _DTYPE_NAMES[b.dtype], _DTYPE_NAMES[code]))
        if b.nelem != nelem:
            _fail(InvalidArgument, function, "%s has %d elements, expected %d" % (what, b.nelem, nelem))
        if b.device != send.device:
            _fail(InvalidArgument, function, "send and %s must both be on the host or on a device"
                  % what)
        keep.append(b)
        return b

    @staticmethod
    def _fp8_like(send, code, function):
        """A new fp8 output like send; numpy without ml_dtypes gets uint8 (the codes)."""
        if _is_torch(send.obj) or send.device:
            return _empty_like(send, send.shape, code, function)
        try:
            import ml_dtypes  # noqa: F401 (numpy's fp8 dtypes)
        except ImportError:
            import numpy as np
            return np.empty(send.shape, dtype=np.uint8)
        return _empty_like(send, send.shape, code, function)

    # -- symmetric memory as arrays
    def empty(self, shape, dtype="float32", like="torch"):
        """Collective: a new array of `shape` and `dtype` on symmetric memory (gc_mem_alloc),
        which the collectives use in place with no copy: like="torch" or "cupy" (device or, on
        a host-only rank, host memory), "numpy" (host only). Made through DLPack; the array
        keeps this communicator alive.

        gc_mem_free is collective, so an array's death frees nothing by itself: its memory goes
        back at free_unused() (collective: what every rank has dropped) or close() (everything;
        an array still alive then must not be used again)."""
        f = "empty"
        h = self._handle(f)
        if isinstance(shape, bool) or not isinstance(shape, (_numbers.Integral, tuple, list)):
            raise TypeError("empty: shape must be an integer or a tuple of integers, not %s"
                            % type(shape).__name__)
        shape = (shape,) if isinstance(shape, _numbers.Integral) else tuple(shape)
        shape = tuple(_int(d, "each dimension of shape", f, 0) for d in shape)
        code = _want_dtype(dtype, f)
        if like not in ("torch", "cupy", "numpy"):
            raise ValueError("empty: like must be 'torch', 'cupy' or 'numpy', not %r" % (like,))
        module = __import__(like)  # before the collective allocation: a missing one fails alone
        itemsize = _s.gc_dtype_size(code)
        nbytes = max(_math.prod(shape) * itemsize, itemsize)
        block = _SymmetricBlock(self, _s.gc_mem_alloc(h, nbytes), nbytes)
        self._blocks.append((block.ptr, _weakref.ref(block)))
        device = self.device
        if like == "numpy":  # numpy's from_dlpack makes read-only arrays: its own protocol
            if device >= 0:
                _fail(InvalidArgument, f, "like='numpy' is for host memory; this rank's "
                      "symmetric memory is on device %d (use torch or cupy)" % device)
            return module.asarray(_HostView(block, shape, _numpy_dtype(code)))
        dl_device = (_DL_CUDA, device) if device >= 0 else (_DL_CPU, 0)
        return module.from_dlpack(_DLPackView(block, shape, code, dl_device))

    def free_unused(self):
        """Collective: frees the symmetric memory of Comm.empty arrays that every rank has
        dropped; returns how many blocks went back."""
        h = self._handle("free_unused")
        if not self._blocks:
            return 0
        import numpy as np
        dropped = np.array([ref() is None for _, ref in self._blocks], dtype=np.int32)
        everywhere = self.allreduce(dropped, op="min", algo="mpi")
        kept = []
        for (ptr, ref), gone in zip(self._blocks, everywhere):
            if gone:
                _s.gc_mem_free(h, ptr)
            else:
                kept.append((ptr, ref))
        freed = len(self._blocks) - len(kept)
        self._blocks = kept
        return freed


_MIXED_OPS = ("allreduce", "allgather", "reducescatter", "allreduce_allgather",
              "reducescatter_allreduce")
_LAYOUT_FIELDS = ("world_rank", "world_size", "local_rank", "local_size", "inter_rank",
                  "inter_size", "local_tp_rank", "local_tp_size", "local_dp_rank", "local_dp_size",
                  "inter_tp_rank", "inter_tp_size", "inter_dp_rank", "inter_dp_size", "tp_rank",
                  "tp_size", "dp_rank", "dp_size")


class Mixed:
    """A TP x DP layout of a Comm (made by Comm.mixed; collective to create and to close).

    .layout is this rank's numbering (a dict of gc_mixed_layout_t's fields), .valid_ops the
    operations the layout takes, algos(op) what algo= may name for one. The methods take the
    arguments of Comm's collectives, on the TP and DP groups (gpucoll.h, "Mixed layouts").
    """

    def __init__(self, comm, local_tp_size=0, local_dp_size=0, inter_tp_size=0, inter_dp_size=0):
        f = "mixed"
        self._h = None
        self._comm = comm
        cfg = _s.gc_mixed_config_t()
        cfg.local_tp_size = _int(local_tp_size, "local_tp_size", f)
        cfg.local_dp_size = _int(local_dp_size, "local_dp_size", f)
        cfg.inter_tp_size = _int(inter_tp_size, "inter_tp_size", f)
        cfg.inter_dp_size = _int(inter_dp_size, "inter_dp_size", f)
        self._h = _s.gc_mixed_init(comm._handle(f), cfg)
        lay = _s.gc_mixed_layout_t()
        _s.gc_mixed_get_layout(self._h, lay)
        self.layout = {name: getattr(lay, name) for name in _LAYOUT_FIELDS}

    def close(self):
        """Collective: frees the layout's groups (not the communicator). Idempotent."""
        h, self._h = self._h, None
        if h is not None:
            _s.gc_mixed_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._h is None:
            return "<gpucoll.Mixed closed>"
        return "<gpucoll.Mixed tp %d of %d, dp %d of %d>" % (self.tp_rank, self.tp_size,
                                                           self.dp_rank, self.dp_size)

    def _handle(self, function):
        if self._h is None:
            _fail(InvalidUsage, function, "the layout is closed")
        return self._h

    tp_rank = property(lambda self: self.layout["tp_rank"])
    tp_size = property(lambda self: self.layout["tp_size"])
    dp_rank = property(lambda self: self.layout["dp_rank"])
    dp_size = property(lambda self: self.layout["dp_size"])

    @property
    def valid_ops(self):
        """The operations of this layout, as FlashInfer's get_valid_op_list lists them."""
        h = self._handle("valid_ops")
        return [name for k, name in enumerate(_MIXED_OPS) if _s.gc_mixed_op_valid(h, k)]

    def autotune(self, max_bytes=64 << 20, dtype="float32"):
        """Tunes the layout's TP group, then its DP group, up to `max_bytes` (collective), so
        that each part of the operations dispatches by rows measured where it runs. The rows
        last as long as the layout."""
        _s.gc_mixed_autotune(self._handle("autotune"), *_tune_args(max_bytes, dtype))

    def algos(self, op):
        """The algorithms algo= may name for operation `op` here ("auto" first); [] for an
        operation of another layout."""
        h = self._handle("algos")
        if op not in _MIXED_OPS:
            _fail(InvalidArgument, "algos", "op %r is not one of %s" % (op, ", ".join(_MIXED_OPS)))
        names, k = [], 0
        while True:
            a = _s.gcswig_mixed_algo(h, _MIXED_OPS.index(op), k)
            if a == -2:
                _fail(Error, "algos", _s.gc_comm_last_error(None))
            if a < 0:
                return names
            names.append(_s.gc_algo_name(a))
            k += 1

    def _run(self, f, c_function, send, out, parts_in, parts_out, op, algo, max_blocks, pdl,
             scale, add, out_dtype, stream):
        """send holds parts_in blocks of n elements, out parts_out blocks (one of them 1)."""
        c, h = self._comm, self._handle(f)
        s = _buffer(send, f, "send")
        if s.nelem % parts_in:
            _fail(InvalidArgument, f, "send has %d elements, not a multiple of the %d DP ranks"
                  % (s.nelem, parts_in))
        n = s.nelem // parts_in
        if parts_out > 1:
            shape = _gathered_shape(s.shape, parts_out)
        elif parts_in > 1:
            shape = ((s.shape[0] // parts_in,) + s.shape[1:]
                     if s.shape and s.shape[0] % parts_in == 0 else (n,))
        else:
            shape = s.shape
        keep = []
        add_shape = s.shape if parts_in == 1 else shape
        opts, code = c._options(f, algo, max_blocks, pdl, scale, add, out_dtype, s.dtype,
                                add_shape, keep)
        out, r = c._output(f, s, out, shape, code)
        st = _stream(stream, f)
        c._wait_producers(c._handle(f), st, s, r, *keep)
        if op is None:
            c_function(s.ptr, r.ptr, n, s.dtype, h, st, opts)
        else:
            c_function(s.ptr, r.ptr, n, s.dtype, _op_code(op, f), h, st, opts)
        return out

    def allreduce(self, send, out=None, op="sum", *, algo=None, max_blocks=0, pdl=None,
                  scale=1.0, add=None, out_dtype=None, stream=None):
        """All-reduce over the TP group (layouts with DP 1)."""
        return self._run("mixed.allreduce", _s.gc_mixed_allreduce, send, out, 1, 1, op, algo,
                         max_blocks, pdl, scale, add, out_dtype, stream)

    def allgather(self, send, out=None, *, algo=None, max_blocks=0, pdl=None, stream=None):
        """All-gather over the DP group (layouts with TP 1), in dp-rank order."""
        return self._run("mixed.allgather", _s.gc_mixed_allgather, send, out, 1, self.dp_size,
                         None, algo, max_blocks, pdl, 1.0, None, None, stream)

    def reducescatter(self, send, out=None, op="sum", *, algo=None, max_blocks=0, pdl=None,
                      scale=1.0, add=None, out_dtype=None, stream=None):
        """Reduce-scatter over the DP group (layouts with TP 1): block dp_rank of send."""
        return self._run("mixed.reducescatter", _s.gc_mixed_reducescatter, send, out,
                         self.dp_size, 1, op, algo, max_blocks, pdl, scale, add, out_dtype, stream)

    def allreduce_allgather(self, send, out=None, op="sum", *, algo=None, max_blocks=0,
                            pdl=None, scale=1.0, add=None, out_dtype=None, stream=None):
        """send all-reduced over the TP group (the epilogue applies there), then the results of
        the DP group concatenated along the first dimension in dp-rank order."""
        return self._run("mixed.allreduce_allgather", _s.gc_mixed_allreduce_allgather, send, out,
                         1, self.dp_size, op, algo, max_blocks, pdl, scale, add, out_dtype, stream)

    def reducescatter_allreduce(self, send, out=None, op="sum", *, algo=None, max_blocks=0,
                                pdl=None, scale=1.0, add=None, out_dtype=None, stream=None):
        """send holds dp_size blocks; this rank gets block dp_rank reduced over every rank."""
        return self._run("mixed.reducescatter_allreduce", _s.gc_mixed_reducescatter_allreduce,
                         send, out, self.dp_size, 1, op, algo, max_blocks, pdl, scale, add,
                         out_dtype, stream)


class _SymmetricBlock:
    """One gc_mem_alloc block behind a Comm.empty array: the DLPack tensor holds it, it holds
    the communicator. Its death frees nothing (gc_mem_free is collective; see Comm.empty)."""

    __slots__ = ("comm", "ptr", "nbytes", "__weakref__")

    def __init__(self, comm, ptr, nbytes):
        self.comm, self.ptr, self.nbytes = comm, ptr, nbytes


class _HostView:
    """What numpy.asarray takes for host symmetric memory; the array keeps it (and the block)."""

    __slots__ = ("_block", "__array_interface__")

    def __init__(self, block, shape, dtype):
        self._block = block
        self.__array_interface__ = {"shape": shape, "typestr": dtype.str, "version": 3,
                                    "data": (block.ptr, False), "descr": dtype.descr}


# gpucoll dtype name -> DLPack (type code, bits), the inverse of _DL_DTYPES.
_DL_CODES = {name: key for key, name in _DL_DTYPES.items()}


class _DLPackView:
    """What from_dlpack() takes: __dlpack__ gives a capsule over the block (made by the C module)."""

    __slots__ = ("_block", "_shape", "_code", "_device")

    def __init__(self, block, shape, code, device):
        self._block, self._shape, self._code, self._device = block, shape, code, device

    def __dlpack__(self, stream=None, **kwargs):
        # The memory is new: no work on any stream to wait for.
        dl_code, bits = _DL_CODES[_DTYPE_NAMES[self._code]]
        return _s.gcswig_dlpack(self._block, self._block.ptr, self._shape, dl_code, bits,
                                self._device[0], self._device[1])

    def __dlpack_device__(self):
        return self._device
