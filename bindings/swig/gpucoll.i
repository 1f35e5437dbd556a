/* gpucoll.i — the one SWIG interface of gpucoll: Python, Go and Tcl modules over gpucoll.h. */

/* The module is named per language: Python gets the extension `_gpucoll_swig` under the pure-Python
 * package `gpucoll` (which does the array parsing), Go gets an internal package `raw` under the
 * idiomatic package, Tcl gets the namespace `gpucoll`. */
#if defined(SWIGPYTHON)
%module(package="gpucoll") gpucoll_swig
#elif defined(SWIGGO)
%module raw
#else
%module gpucoll
#endif

%{
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpucoll.h"

/* The result-code typemap reports the message of the communicator the failed call was given, or
 * the thread's (gc_comm_last_error(NULL)) when it was given none. The `check` typemap of a
 * `gc_comm_t comm` argument records it, and every wrapper's %exception code takes the record right
 * after the call, whatever the call returns, so no record outlives its call. Thread-local because
 * Python threads and Go's OS threads may be inside different communicators at once; one wrapped
 * call runs on one thread. */
static _Thread_local gc_comm_t gcswig_comm;      /* recorded by the `check` typemap */
static _Thread_local gc_comm_t gcswig_call_comm; /* the comm of the call just made, or NULL */

static void gcswig_take_comm(void) {
  gcswig_call_comm = gcswig_comm;
  gcswig_comm = NULL;
}

/* The detailed message of failure `rc` of the call being wrapped. */
static const char *gcswig_message(gc_result_t rc) {
  const char *msg = gc_comm_last_error(gcswig_call_comm); /* NULL: the thread's slot */
  if (msg == NULL || msg[0] == '\0') return gc_strerror(rc);
  {
    /* The library may lead with the code's name; the bindings print it once themselves. */
    const char *name = gc_result_name(rc);
    size_t len = strlen(name);
    if (strncmp(msg, name, len) == 0 && msg[len] == ':' && msg[len + 1] == ' ') msg += len + 2;
  }
  return msg;
}

/* "fn: GC_ERR_X: message" into buf; returns the message. */
static const char *gcswig_format(char *buf, size_t len, gc_result_t rc, const char *fn) {
  const char *msg = gcswig_message(rc);
  snprintf(buf, len, "%s: %s: %s", fn, gc_result_name(rc), msg);
  return msg;
}
%}

/* Every wrapper, before its result is converted: the recorded comm becomes this call's. */
%exception %{
  $action
  gcswig_take_comm();
%}

/* ---------------------------------------------------------------------------------------------
 * MPI: the bindings pass communicators as Fortran handles (mpi4py's py2f()), so gc_comm_init and
 * its C MPI_Comm stay hidden. The helpers start MPI when no one else has (Go and Tcl programs, or
 * Python without mpi4py) and finish it at exit if they started it.
 * ------------------------------------------------------------------------------------------- */
%include "stdint.i"
typedef int MPI_Fint; /* int in Open MPI and MPICH; only SWIG sees this line */
%ignore gc_comm_init;

%{
static int gcswig_mpi_started; /* 1 when MPI_Init came from here */
%}

%inline %{
/* Finishes MPI if these bindings started it (destroy every communicator first); else nothing.
 * Also registered with atexit by gcswig_mpi_init. */
static void gcswig_finalize(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (gcswig_mpi_started && !finalized) MPI_Finalize();
}
%}

%{
/* MPI_Init (serialized threads: Go may call from any OS thread, one at a time) unless MPI runs. */
static gc_result_t gcswig_mpi_init(void) {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (initialized) return GC_SUCCESS;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return GC_ERR_MPI;
  gcswig_mpi_started = 1;
  atexit(gcswig_finalize);
  return GC_SUCCESS;
}
%}

%inline %{
/* MPI_COMM_WORLD as a Fortran handle, starting MPI first if needed; -1 when MPI fails to start. */
static MPI_Fint gcswig_world(void) {
  if (gcswig_mpi_init() != GC_SUCCESS) return -1;
  return MPI_Comm_c2f(MPI_COMM_WORLD);
}
%}

/* The function-pointer timing API does not map onto these languages; callers time in their own. */
%ignore gc_time;
%ignore gc_timed_fn;

/* ---------------------------------------------------------------------------------------------
 * Config, options, plans and the RMSNorm settings: constructors start from the header's initializers,
 * not from zeros (a zero version is refused).
 * ------------------------------------------------------------------------------------------- */
%extend gc_config {
  gc_config() {
    gc_config_t *c = (gc_config_t *)malloc(sizeof *c);
    if (c) {
      gc_config_t init = GC_CONFIG_INIT;
      *c = init;
    }
    return c;
  }
  ~gc_config() { free($self); }
}
%extend gc_options {
  gc_options() {
    gc_options_t *o = (gc_options_t *)malloc(sizeof *o);
    if (o) {
      gc_options_t init = GC_OPTIONS_INIT;
      *o = init;
    }
    return o;
  }
  ~gc_options() { free($self); }
}
%extend gc_plan {
  gc_plan() {
    gc_plan_t *p = (gc_plan_t *)malloc(sizeof *p);
    if (p) {
      gc_plan_t init = GC_PLAN_INIT;
      *p = init;
    }
    return p;
  }
  ~gc_plan() { free($self); }
}
%extend gc_mixed_config {
  gc_mixed_config() {
    gc_mixed_config_t *c = (gc_mixed_config_t *)malloc(sizeof *c);
    if (c) {
      gc_mixed_config_t init = GC_MIXED_CONFIG_INIT;
      *c = init;
    }
    return c;
  }
  ~gc_mixed_config() { free($self); }
}
%extend gc_rmsnorm_fp8 {
  gc_rmsnorm_fp8() {
    gc_rmsnorm_fp8_t *m = (gc_rmsnorm_fp8_t *)malloc(sizeof *m);
    if (m) {
      gc_rmsnorm_fp8_t init = GC_RMSNORM_FP8_INIT;
      *m = init;
    }
    return m;
  }
  ~gc_rmsnorm_fp8() { free($self); }
}

/* ---------------------------------------------------------------------------------------------
 * Every `gc_comm_t comm` argument is recorded for the result typemap, and every wrapped call takes
 * the record (see gcswig_take_comm).
 * ------------------------------------------------------------------------------------------- */
%typemap(check) gc_comm_t comm %{ gcswig_comm = $1; %}

/* ============================================================================================= */
#if defined(SWIGPYTHON)
/* Python: integers for pointers, outputs appended to the return value, errors as exceptions. */

%{
/* gpucoll.Error and one subclass per result code, made at import from GC_RESULT_MAP. */
static PyObject *gcswig_error_base;
static PyObject *gcswig_error_class[GC_NUM_RESULTS];

/* "ERR_INVALID_ARGUMENT" -> "InvalidArgument". */
static void gcswig_class_name(const char *code, char *out, size_t len) {
  size_t n = 0;
  int upper = 1;
  if (strncmp(code, "ERR_", 4) == 0) code += 4;
  for (; *code && n + 1 < len; code++) {
    if (*code == '_') {
      upper = 1;
      continue;
    }
    out[n++] = upper ? *code : (char)((*code >= 'A' && *code <= 'Z') ? *code + 32 : *code);
    upper = 0;
  }
  out[n] = '\0';
}

static int gcswig_add_error_class(PyObject *d, const char *code, int value, const char *doc) {
  char cls[64], qual[80];
  PyObject *dict, *bases, *klass;
  if (value == GC_SUCCESS || value < 0 || value >= GC_NUM_RESULTS) return 0;
  gcswig_class_name(code, cls, sizeof cls);
  snprintf(qual, sizeof qual, "gpucoll.%s", cls);
  dict = Py_BuildValue("{s:s,s:i}", "code", gc_result_name((gc_result_t)value), "value", value);
  if (!dict) return -1;
  /* Bad arguments are also ValueErrors, so generic callers catch them the Python way. */
  if (value == GC_ERR_INVALID_ARGUMENT)
    bases = PyTuple_Pack(2, gcswig_error_base, PyExc_ValueError);
  else
    bases = PyTuple_Pack(1, gcswig_error_base);
  if (!bases) {
    Py_DECREF(dict);
    return -1;
  }
  klass = PyErr_NewExceptionWithDoc(qual, doc, bases, dict);
  Py_DECREF(bases);
  Py_DECREF(dict);
  if (!klass) return -1;
  gcswig_error_class[value] = klass; /* the module keeps it for the life of the process */
  return PyDict_SetItemString(d, cls, klass);
}

static int gcswig_init_errors(PyObject *d) {
  PyObject *dict = Py_BuildValue("{s:s,s:i,s:s,s:s}", "code", "GC_ERR", "value", -1, "message", "",
                                 "function", "");
  if (!dict) return -1;
  gcswig_error_base = PyErr_NewExceptionWithDoc(
      "gpucoll.Error",
      "A gpucoll call failed. .code is the result name (\"GC_ERR_TIMEOUT\"), .value its number, "
      ".message the library's detailed message, .function the C function.",
      PyExc_RuntimeError, dict);
  Py_DECREF(dict);
  if (!gcswig_error_base || PyDict_SetItemString(d, "Error", gcswig_error_base) < 0) return -1;
#define GCSWIG_ERROR_CLASS(name, value, msg) \
  if (gcswig_add_error_class(d, #name, value, msg) < 0) return -1;
  GC_RESULT_MAP(GCSWIG_ERROR_CLASS)
#undef GCSWIG_ERROR_CLASS
  return 0;
}

/* Raises the subclass of `rc` with the detailed message of the call. */
static void gcswig_py_raise(gc_result_t rc, const char *fn) {
  PyObject *klass = (rc > 0 && rc < GC_NUM_RESULTS && gcswig_error_class[rc])
                        ? gcswig_error_class[rc] : gcswig_error_base;
  char text[1400];
  const char *msg = gcswig_format(text, sizeof text, rc, fn);
  PyObject *exc = PyObject_CallFunction(klass, "s", "");
  if (!exc) return;
  {
    PyObject *args = Py_BuildValue("(s)", text);
    if (args) {
      PyObject_SetAttrString(exc, "args", args);
      Py_DECREF(args);
    }
  }
  PyObject *m = PyUnicode_FromString(msg), *f = PyUnicode_FromString(fn);
  PyObject *c = PyUnicode_FromString(gc_result_name(rc)), *v = PyLong_FromLong((long)rc);
  if (m) PyObject_SetAttrString(exc, "message", m);
  if (f) PyObject_SetAttrString(exc, "function", f);
  if (c) PyObject_SetAttrString(exc, "code", c);
  if (v) PyObject_SetAttrString(exc, "value", v);
  Py_XDECREF(m);
  Py_XDECREF(f);
  Py_XDECREF(c);
  Py_XDECREF(v);
  PyErr_SetObject(klass, exc);
  Py_DECREF(exc);
}

/* Pointers cross as integers (buffers, streams, device pointers); None is NULL. */
static int gcswig_py_ptr(PyObject *o, void **out) {
  unsigned long long v;
  if (o == Py_None) {
    *out = NULL;
    return 0;
  }
  if (!PyLong_Check(o)) {
    PyErr_Format(PyExc_TypeError, "expected an integer address or None, not %s",
                 Py_TYPE(o)->tp_name);
    return -1;
  }
  v = PyLong_AsUnsignedLongLong(o);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *out = (void *)(uintptr_t)v;
  return 0;
}
%}

%init %{
  if (gcswig_init_errors(d) < 0) return NULL;
%}

%typemap(out) gc_result_t {
  if ($1 != GC_SUCCESS) {
    gcswig_py_raise($1, "$symname");
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
}

%typemap(in) void *, const void * {
  if (gcswig_py_ptr($input, (void **)&$1) < 0) SWIG_fail;
}
%typemap(typecheck, precedence=SWIG_TYPECHECK_POINTER) void *, const void * {
  $1 = ($input == Py_None || PyLong_Check($input)) ? 1 : 0;
}
%typemap(out) void *, const void * {
  $result = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)$1);
}
/* Struct members (gc_options_t.add) are stored as given. */
%typemap(memberin) const void * %{ $1 = $input; %}

%typemap(in, numinputs=0) int *out (int tmp = 0) %{ $1 = &tmp; %}
%typemap(argout) int *out %{ $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(tmp$argnum)); %}

%typemap(in, numinputs=0) gc_dtype_t *out (gc_dtype_t tmp), gc_op_t *out (gc_op_t tmp),
                          gc_algo_t *out (gc_algo_t tmp), gc_wire_t *out (gc_wire_t tmp),
                          gc_norm_numerics_t *out (gc_norm_numerics_t tmp) %{ $1 = &tmp; %}
%typemap(argout) gc_dtype_t *out, gc_op_t *out, gc_algo_t *out, gc_wire_t *out, gc_norm_numerics_t *out
%{ $result = SWIG_Python_AppendOutput($result, PyLong_FromLong((long)tmp$argnum)); %}

%typemap(in, numinputs=0) size_t *offset (size_t tmp = 0), size_t *length (size_t tmp = 0)
%{ $1 = &tmp; %}
%typemap(argout) size_t *offset, size_t *length
%{ $result = SWIG_Python_AppendOutput($result, PyLong_FromSize_t(tmp$argnum)); %}

%typemap(in, numinputs=0) void **out (void *tmp = NULL) %{ $1 = &tmp; %}
%typemap(argout) void **out
%{ $result = SWIG_Python_AppendOutput($result,
       PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)tmp$argnum)); %}

%typemap(in, numinputs=0) gc_comm_t *out (gc_comm_t tmp = NULL) %{ $1 = &tmp; %}
%typemap(argout) gc_comm_t *out
%{ $result = SWIG_Python_AppendOutput($result, SWIG_NewPointerObj(tmp$argnum, $*1_descriptor, 0)); %}
%typemap(in, numinputs=0) gc_mixed_t *out (gc_mixed_t tmp = NULL) %{ $1 = &tmp; %}
%typemap(argout) gc_mixed_t *out
%{ $result = SWIG_Python_AppendOutput($result, SWIG_NewPointerObj(tmp$argnum, $*1_descriptor, 0)); %}

/* DLPack for the Python layer, producer and consumer. Producer (Comm.empty): the classic DLManagedTensor in a capsule named "dltensor" over
 * memory the Python layer owns. The tensor holds a reference to `owner` and drops it, under the
 * GIL, when its consumer calls the deleter (or when the capsule dies unconsumed). The structs are
 * DLPack's own layout (dlpack.h), spelled here so the build needs no DLPack header. */
%{
typedef struct { int32_t device_type, device_id; } gcswig_dl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } gcswig_dl_dtype;
typedef struct {
  void *data;
  gcswig_dl_device device;
  int32_t ndim;
  gcswig_dl_dtype dtype;
  int64_t *shape, *strides; /* strides NULL: C order */
  uint64_t byte_offset;
} gcswig_dl_tensor;
typedef struct gcswig_dl_managed {
  gcswig_dl_tensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct gcswig_dl_managed *self);
} gcswig_dl_managed;
typedef struct {
  gcswig_dl_managed managed; /* first, so the managed tensor's address is the block's */
  PyObject *owner;
  int64_t shape[32];
} gcswig_dl_block;

static void gcswig_dl_delete(gcswig_dl_managed *m) {
  gcswig_dl_block *b = (gcswig_dl_block *)m;
  PyGILState_STATE gil = PyGILState_Ensure(); /* consumers may call from any thread */
  Py_XDECREF(b->owner);
  PyGILState_Release(gil);
  free(b);
}

static void gcswig_dl_capsule_free(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return; /* consumed: renamed, the consumer owns it */
  gcswig_dl_managed *m = (gcswig_dl_managed *)PyCapsule_GetPointer(capsule, "dltensor");
  if (m && m->deleter) m->deleter(m);
}
%}
%inline %{
static PyObject *gcswig_dlpack(PyObject *owner, size_t address, PyObject *shape, int code, int bits,
                               int device_type, int device_id) {
  PyObject *dims = PySequence_Fast(shape, "shape must be a sequence of integers");
  if (!dims) return NULL;
  Py_ssize_t ndim = PySequence_Fast_GET_SIZE(dims);
  gcswig_dl_block *b = ndim <= 32 ? (gcswig_dl_block *)calloc(1, sizeof *b) : NULL;
  if (!b) {
    Py_DECREF(dims);
    return ndim <= 32 ? PyErr_NoMemory() : PyErr_Format(PyExc_ValueError, "more than 32 dimensions");
  }
  for (Py_ssize_t i = 0; i < ndim; i++) {
    b->shape[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(dims, i));
    if (b->shape[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(dims);
      free(b);
      return NULL;
    }
  }
  Py_DECREF(dims);
  gcswig_dl_tensor *t = &b->managed.dl_tensor;
  t->data = (void *)(uintptr_t)address;
  t->device.device_type = device_type;
  t->device.device_id = device_id;
  t->ndim = (int32_t)ndim;
  t->dtype.code = (uint8_t)code;
  t->dtype.bits = (uint8_t)bits;
  t->dtype.lanes = 1;
  t->shape = b->shape;
  b->managed.manager_ctx = b;
  b->managed.deleter = gcswig_dl_delete;
  Py_INCREF(owner);
  b->owner = owner;
  PyObject *capsule = PyCapsule_New(&b->managed, "dltensor", gcswig_dl_capsule_free);
  if (!capsule) gcswig_dl_delete(&b->managed);
  return capsule;
}

/* DLPack consumer: the fields of a "dltensor" capsule's tensor as (data, device_type, device_id,
 * code, bits, lanes, shape, strides or None, byte_offset), strides in elements. The capsule is
 * read, not consumed: its destructor still frees the tensor when the caller drops it. */
static PyObject *gcswig_dlpack_fields(PyObject *capsule) {
  gcswig_dl_managed *m = (gcswig_dl_managed *)PyCapsule_GetPointer(capsule, "dltensor");
  if (!m) return NULL;
  const gcswig_dl_tensor *t = &m->dl_tensor;
  if (t->ndim < 0 || (t->ndim > 0 && !t->shape))
    return PyErr_Format(PyExc_ValueError, "DLPack tensor with ndim %d and no shape", (int)t->ndim);
  PyObject *shape = PyTuple_New(t->ndim);
  PyObject *strides = t->strides ? PyTuple_New(t->ndim) : Py_None;
  if (strides == Py_None) Py_INCREF(strides);
  if (!shape || !strides) goto fail;
  for (int32_t i = 0; i < t->ndim; i++) {
    PyObject *d = PyLong_FromLongLong(t->shape[i]);
    if (!d) goto fail;
    PyTuple_SET_ITEM(shape, i, d);
    if (t->strides) {
      PyObject *st = PyLong_FromLongLong(t->strides[i]);
      if (!st) goto fail;
      PyTuple_SET_ITEM(strides, i, st);
    }
  }
  return Py_BuildValue("(KiiiiiNNK)", (unsigned long long)(uintptr_t)t->data,
                       (int)t->device.device_type, (int)t->device.device_id, (int)t->dtype.code,
                       (int)t->dtype.bits, (int)t->dtype.lanes, shape, strides,
                       (unsigned long long)t->byte_offset);
fail:
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return NULL;
}
%}

/* ============================================================================================= */
#elif defined(SWIGGO)
/* Go: uintptr for pointers and handles, one-element slices for outputs, `error` for results. */

%{
/* "" on success, else "<code number> fn: GC_ERR_X: message": gcswigError splits it. */
static _Thread_local char gcswig_go_text[1400]; /* copied into a Go string before the call returns */
static const char *gcswig_go_result(gc_result_t rc, const char *fn) {
  char msg[1300];
  if (rc == GC_SUCCESS) return "";
  gcswig_format(msg, sizeof msg, rc, fn);
  snprintf(gcswig_go_text, sizeof gcswig_go_text, "%d %s", (int)rc, msg);
  return gcswig_go_text;
}
%}

%go_import("errors", "strconv", "strings")
%insert(go_wrapper) %{
// NewError makes the error of a failed call from its result code and full message; the package
// gpucoll sets it so that every call returns a *gpucoll.Error.
var NewError = func(value int, message string) error { return errors.New(message) }

func gcswigError(s string) error {
	if s == "" {
		return nil
	}
	number, message, _ := strings.Cut(s, " ")
	value, err := strconv.Atoi(number)
	if err != nil {
		return NewError(int(GC_ERR_INTERNAL), s)
	}
	return NewError(value, message)
}
%}

%typemap(gotype) gc_result_t "error"
%typemap(imtype) gc_result_t "string"
/* ... but a code given to gc_result_name / gc_strerror is a plain number. */
%typemap(gotype) gc_result_t result "int"
%typemap(imtype) gc_result_t result "int"
%typemap(out, fragment="AllocateString") gc_result_t {
  const char *text = gcswig_go_result($1, "$symname");
  $result = Swig_AllocateString(text, strlen(text));
}
%typemap(goout, fragment="CopyString") gc_result_t %{ $result = gcswigError(swigCopyString($1)) %}

/* Handles and buffers are integers on the Go side; device pointers never touch Go's heap. */
%typemap(gotype) gc_comm_t, gc_mixed_t, void *, const void * "uintptr"
%typemap(in) gc_comm_t, gc_mixed_t, void *, const void * %{ $1 = ($1_ltype)$input; %}
%typemap(out) gc_comm_t, gc_mixed_t, void *, const void * %{ *($&1_ltype)&$result = ($1_ltype)$1; %}
%typemap(goout) gc_comm_t, gc_mixed_t, void *, const void * ""

%define GCSWIG_GO_OUT(CTYPE, GOTYPE, NAMES)
%typemap(gotype) NAMES "[]GOTYPE"
%typemap(in) NAMES (CTYPE tmp) {
  if ($input.len < 1) _swig_gopanic("output slice must hold at least 1 element");
  $1 = ($1_ltype)&tmp;
}
%typemap(argout) NAMES %{ *(GOTYPE##_gcswig *)$input.array = (GOTYPE##_gcswig)tmp$argnum; %}
%enddef
%{
typedef int32_t int32_gcswig;
typedef uint64_t uint64_gcswig;
typedef uintptr_t uintptr_gcswig;
%}
GCSWIG_GO_OUT(int, int32, int *out)
GCSWIG_GO_OUT(gc_dtype_t, int32, gc_dtype_t *out)
GCSWIG_GO_OUT(gc_op_t, int32, gc_op_t *out)
GCSWIG_GO_OUT(gc_algo_t, int32, gc_algo_t *out)
GCSWIG_GO_OUT(gc_wire_t, int32, gc_wire_t *out)
GCSWIG_GO_OUT(gc_norm_numerics_t, int32, gc_norm_numerics_t *out)
GCSWIG_GO_OUT(size_t, uint64, size_t *offset)
GCSWIG_GO_OUT(size_t, uint64, size_t *length)
GCSWIG_GO_OUT(void *, uintptr, void **out)
GCSWIG_GO_OUT(gc_comm_t, uintptr, gc_comm_t *out)
GCSWIG_GO_OUT(gc_mixed_t, uintptr, gc_mixed_t *out)

/* ============================================================================================= */
#elif defined(SWIGTCL)
/* Tcl: integers for pointers, outputs as the command's result list, errors as TCL_ERROR with the
 * message and errorCode {GPUCOLL GC_ERR_X}. */

%typemap(out) gc_result_t {
  if ($1 != GC_SUCCESS) {
    char text[1400];
    gcswig_format(text, sizeof text, $1, "$symname");
    Tcl_SetObjResult(interp, Tcl_NewStringObj(text, -1));
    Tcl_SetErrorCode(interp, "GPUCOLL", gc_result_name($1), (char *)NULL);
    SWIG_fail;
  }
  Tcl_SetObjResult(interp, Tcl_NewListObj(0, NULL));
}

%{
static int gcswig_tcl_ptr(Tcl_Interp *interp, Tcl_Obj *o, void **out) {
  Tcl_WideInt v;
  if (Tcl_GetWideIntFromObj(interp, o, &v) != TCL_OK) return TCL_ERROR;
  *out = (void *)(uintptr_t)v;
  return TCL_OK;
}
%}
%typemap(in) void *, const void * {
  if (gcswig_tcl_ptr(interp, $input, (void **)&$1) != TCL_OK) SWIG_fail;
}
%typemap(out) void *, const void * %{
  Tcl_SetObjResult(interp, Tcl_NewWideIntObj((Tcl_WideInt)(uintptr_t)$1));
%}
%typemap(memberin) const void * %{ $1 = $input; %}

%define GCSWIG_TCL_OUT(CTYPE, NEWOBJ, NAMES)
%typemap(in, numinputs=0) NAMES (CTYPE tmp) %{ $1 = ($1_ltype)&tmp; %}
%typemap(argout) NAMES %{ Tcl_ListObjAppendElement(interp, Tcl_GetObjResult(interp), NEWOBJ); %}
%enddef
GCSWIG_TCL_OUT(int, Tcl_NewIntObj(tmp$argnum), int *out)
GCSWIG_TCL_OUT(gc_dtype_t, Tcl_NewIntObj((int)tmp$argnum), gc_dtype_t *out)
GCSWIG_TCL_OUT(gc_op_t, Tcl_NewIntObj((int)tmp$argnum), gc_op_t *out)
GCSWIG_TCL_OUT(gc_algo_t, Tcl_NewIntObj((int)tmp$argnum), gc_algo_t *out)
GCSWIG_TCL_OUT(gc_wire_t, Tcl_NewIntObj((int)tmp$argnum), gc_wire_t *out)
GCSWIG_TCL_OUT(gc_norm_numerics_t, Tcl_NewIntObj((int)tmp$argnum), gc_norm_numerics_t *out)
GCSWIG_TCL_OUT(size_t, Tcl_NewWideIntObj((Tcl_WideInt)tmp$argnum), size_t *offset)
GCSWIG_TCL_OUT(size_t, Tcl_NewWideIntObj((Tcl_WideInt)tmp$argnum), size_t *length)
GCSWIG_TCL_OUT(void *, Tcl_NewWideIntObj((Tcl_WideInt)(uintptr_t)tmp$argnum), void **out)
GCSWIG_TCL_OUT(gc_comm_t, SWIG_NewInstanceObj(tmp$argnum, $*1_descriptor, 0), gc_comm_t *out)
GCSWIG_TCL_OUT(gc_mixed_t, SWIG_NewInstanceObj(tmp$argnum, $*1_descriptor, 0), gc_mixed_t *out)

/* Host arrays for scripts: carrays.i makes them, gcswig_addr turns one into the integer address the
 * collectives take. */
%include "carrays.i"
%array_functions(double, doubleArray)
%array_functions(float, floatArray)
%array_functions(int, intArray)
%inline %{
static size_t gcswig_addr_double(double *a) { return (size_t)(uintptr_t)a; }
static size_t gcswig_addr_float(float *a) { return (size_t)(uintptr_t)a; }
static size_t gcswig_addr_int(int *a) { return (size_t)(uintptr_t)a; }
%}
#endif

/* gc_comm_destroy frees a live communicator even when it fails (but for GC_ERR_STREAM_TIMEOUT), so
 * its failure message is read from the thread's slot (errors.c copies every message there), not
 * through a handle whose address a new communicator may reuse: this wrapper takes it under another
 * name, which `check` skips. */
%ignore gc_comm_destroy;
%rename(gc_comm_destroy) gcswig_comm_destroy;
%inline %{
static gc_result_t gcswig_comm_destroy(gc_comm_t handle) { return gc_comm_destroy(handle); }
%}

/* gc_mixed_algos fills a caller's array: the bindings ask for its entries one at a time. */
%ignore gc_mixed_algos;
%inline %{
/* Entry k of gc_mixed_algos(mixed, op) (a gc_algo_t), -1 past the end, -2 when the query fails
 * (the failure's message is the thread's: gc_comm_last_error(NULL)). */
static int gcswig_mixed_algo(gc_mixed_t mixed, int op, int k) {
  gc_algo_t algos[GC_NUM_ALGOS];
  int n = 0;
  if (gc_mixed_algos(mixed, (gc_mixed_op_t)op, algos, GC_NUM_ALGOS, &n) != GC_SUCCESS) return -2;
  return k >= 0 && k < n && k < GC_NUM_ALGOS ? (int)algos[k] : -1;
}
%}

/* gc_allreduce_rmsnorm_fp8's scales (float *) is an output array like any buffer: an integer
 * address, as void * is in each language above. */
%apply void * { float *scales };

/* The contract itself (GC_API expands to nothing under SWIG, which defines no __GNUC__). */
%include "gpucoll.h"
