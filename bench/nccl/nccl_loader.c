/* nccl_loader.c — NCCL through dlopen/dlsym, so gpucoll-bench and gpucoll-lua can time it without
 * linking it (or needing nccl.h) at build time. */
#include "nccl_loader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

/* The few NCCL declarations used here, as nccl.h (2.28) declares them; the values are NCCL's ABI,
 * stable since 2.x. */
#define GCB_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[GCB_NCCL_UNIQUE_ID_BYTES];
} gcb_ncclUniqueId;
typedef struct gcb_ncclComm *gcb_ncclComm_t;
typedef int gcb_ncclResult_t; /* ncclSuccess = 0 */
#define GCB_NCCL_IN_PROGRESS 7 /* ncclInProgress: a non-blocking communicator is still busy */
typedef enum {
  GCB_ncclInt8 = 0,
  GCB_ncclUint8 = 1,
  GCB_ncclInt32 = 2,
  GCB_ncclUint32 = 3,
  GCB_ncclInt64 = 4,
  GCB_ncclUint64 = 5,
  GCB_ncclFloat16 = 6,
  GCB_ncclFloat32 = 7,
  GCB_ncclFloat64 = 8,
  GCB_ncclBfloat16 = 9,
  GCB_ncclFloat8e4m3 = 10, /* NCCL >= 2.24 */
  GCB_ncclFloat8e5m2 = 11
} gcb_ncclDataType_t;
typedef enum {
  GCB_ncclSum = 0,
  GCB_ncclProd = 1,
  GCB_ncclMax = 2,
  GCB_ncclMin = 3,
  GCB_ncclAvg = 4 /* NCCL >= 2.10 */
} gcb_ncclRedOp_t;

typedef gcb_ncclResult_t (*fn_get_version_t)(int *);
typedef gcb_ncclResult_t (*fn_get_unique_id_t)(gcb_ncclUniqueId *);
typedef gcb_ncclResult_t (*fn_comm_init_rank_t)(gcb_ncclComm_t *, int, gcb_ncclUniqueId, int);
typedef gcb_ncclResult_t (*fn_comm_destroy_t)(gcb_ncclComm_t);
typedef const char *(*fn_get_error_string_t)(gcb_ncclResult_t);
typedef gcb_ncclResult_t (*fn_comm_get_async_error_t)(gcb_ncclComm_t, gcb_ncclResult_t *);
typedef const char *(*fn_get_last_error_t)(gcb_ncclComm_t);
typedef gcb_ncclResult_t (*fn_allreduce_t)(const void *, void *, size_t, gcb_ncclDataType_t,
                                           gcb_ncclRedOp_t, gcb_ncclComm_t, void *);
typedef gcb_ncclResult_t (*fn_reducescatter_t)(const void *, void *, size_t, gcb_ncclDataType_t,
                                               gcb_ncclRedOp_t, gcb_ncclComm_t, void *);
typedef gcb_ncclResult_t (*fn_allgather_t)(const void *, void *, size_t, gcb_ncclDataType_t,
                                           gcb_ncclComm_t, void *);
typedef gcb_ncclResult_t (*fn_mem_alloc_t)(void **, size_t);
typedef gcb_ncclResult_t (*fn_mem_free_t)(void *);
typedef gcb_ncclResult_t (*fn_comm_register_t)(gcb_ncclComm_t, void *, size_t, void **);
typedef gcb_ncclResult_t (*fn_comm_deregister_t)(gcb_ncclComm_t, void *);
typedef struct gcb_ncclWindow *gcb_ncclWindow_t;
#define GCB_NCCL_WIN_COLL_SYMMETRIC 0x01
typedef gcb_ncclResult_t (*fn_window_register_t)(gcb_ncclComm_t, void *, size_t, gcb_ncclWindow_t *, int);
typedef gcb_ncclResult_t (*fn_window_deregister_t)(gcb_ncclComm_t, gcb_ncclWindow_t);
typedef gcb_ncclResult_t (*fn_group_t)(void);
typedef gcb_ncclResult_t (*fn_broadcast_t)(const void *, void *, size_t, gcb_ncclDataType_t, int,
                                           gcb_ncclComm_t, void *);

struct gcb_nccl {
  void *dl;
  gcb_ncclComm_t comm;
  int version_code;
  char version[32];
  char path[256]; /* the library name dlopen accepted */
  fn_get_version_t get_version;
  fn_get_unique_id_t get_unique_id;
  fn_comm_init_rank_t comm_init_rank;
  fn_comm_destroy_t comm_destroy;
  fn_get_error_string_t get_error_string;
  fn_comm_get_async_error_t comm_get_async_error; /* NULL where absent (before 2.4) */
  fn_comm_destroy_t comm_abort;                   /* ncclCommAbort; NULL where absent (before 2.4) */
  char aborted[256];                              /* why, once gcb_nccl_abort ended it */
  fn_get_last_error_t get_last_error;             /* NULL where absent (before 2.13) */
  fn_allreduce_t allreduce;
  fn_reducescatter_t reducescatter;
  fn_allgather_t allgather;
  fn_broadcast_t broadcast;
  /* Optional (NULL where absent): the group calls, and -R 1 and -R 2's functions. */
  fn_group_t group_start, group_end;
  fn_mem_alloc_t mem_alloc;
  fn_mem_free_t mem_free;
  fn_comm_register_t comm_register;
  fn_comm_deregister_t comm_deregister;
  fn_window_register_t window_register;
  fn_window_deregister_t window_deregister;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static const char *nccl_err(const gcb_nccl_t *n, gcb_ncclResult_t r) {
  return n->get_error_string ? n->get_error_string(r) : "unknown NCCL error";
}

/* dlopen + dlsym of everything we call; fills n or explains what is missing. */
static int load_library(gcb_nccl_t *n, char *err, size_t errlen) {
  const char *env = getenv("GC_NCCL_LIBRARY");
  const char *names[3];
  int nnames = 0;
  if (env && *env) {
    names[nnames++] = env; /* an explicit choice: no silent fallback to another NCCL */
  } else {
    names[nnames++] = "libnccl.so.2";
    names[nnames++] = "libnccl.so";
  }
  const char *last = "";
  for (int i = 0; i < nnames && !n->dl; i++) {
    n->dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (n->dl) {
      snprintf(n->path, sizeof n->path, "%s", names[i]);
    } else {
      last = dlerror();
    }
  }
  if (!n->dl) {
    set_err(err, errlen, "NCCL not found (%s); set GC_NCCL_LIBRARY to libnccl.so's path",
            last ? last : "dlopen failed");
    return 1;
  }
#define GCB_SYM(field, name)                                                                 \
  do {                                                                                       \
    *(void **)(&n->field) = dlsym(n->dl, name);                                              \
    if (!n->field) {                                                                         \
      set_err(err, errlen, "%s has no %s: not a usable NCCL 2.x", n->path, name);                   \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)
  GCB_SYM(get_version, "ncclGetVersion");
  GCB_SYM(get_unique_id, "ncclGetUniqueId");
  GCB_SYM(comm_init_rank, "ncclCommInitRank");
  GCB_SYM(comm_destroy, "ncclCommDestroy");
  GCB_SYM(get_error_string, "ncclGetErrorString");
  GCB_SYM(allreduce, "ncclAllReduce");
  GCB_SYM(reducescatter, "ncclReduceScatter");
  GCB_SYM(allgather, "ncclAllGather");
  GCB_SYM(broadcast, "ncclBroadcast");
#undef GCB_SYM
  *(void **)(&n->comm_get_async_error) = dlsym(n->dl, "ncclCommGetAsyncError");
  *(void **)(&n->get_last_error) = dlsym(n->dl, "ncclGetLastError");
  *(void **)(&n->comm_abort) = dlsym(n->dl, "ncclCommAbort");
  *(void **)(&n->group_start) = dlsym(n->dl, "ncclGroupStart");
  *(void **)(&n->group_end) = dlsym(n->dl, "ncclGroupEnd");
  *(void **)(&n->mem_alloc) = dlsym(n->dl, "ncclMemAlloc");
  *(void **)(&n->mem_free) = dlsym(n->dl, "ncclMemFree");
  *(void **)(&n->comm_register) = dlsym(n->dl, "ncclCommRegister");
  *(void **)(&n->comm_deregister) = dlsym(n->dl, "ncclCommDeregister");
  *(void **)(&n->window_register) = dlsym(n->dl, "ncclCommWindowRegister");
  *(void **)(&n->window_deregister) = dlsym(n->dl, "ncclCommWindowDeregister");
  gcb_ncclResult_t r = n->get_version(&n->version_code);
  if (r != 0) {
    set_err(err, errlen, "ncclGetVersion failed: %s", nccl_err(n, r));
    return 1;
  }
  /* NCCL_VERSION(X,Y,Z) is X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before. */
  int c = n->version_code;
  if (c >= 10000)
    snprintf(n->version, sizeof n->version, "%d.%d.%d", c / 10000, (c % 10000) / 100, c % 100);
  else
    snprintf(n->version, sizeof n->version, "%d.%d.%d", c / 1000, (c % 1000) / 100, c % 100);
  return 0;
}

/* Every rank learns whether all ranks succeeded; a failing rank's message is not lost on the
 * others: they say which rank failed. */
static int agree(MPI_Comm comm, int rank, int ok, char *err, size_t errlen, const char *stage) {
  int all_ok = 0, first_bad = -1;
  if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
    set_err(err, errlen, "MPI_Allreduce failed while agreeing on %s", stage);
    return 0;
  }
  if (all_ok) return 1;
  int mine = ok ? 1 << 30 : rank;
  int found = MPI_Allreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, comm) == MPI_SUCCESS;
  if (ok && found) set_err(err, errlen, "NCCL %s failed on rank %d", stage, first_bad);
  else if (ok) set_err(err, errlen, "NCCL %s failed on another rank (MPI_Allreduce failed finding which)", stage);
  return 0;
}

static void destroy(gcb_nccl_t *n) {
  if (!n) return;
  if (n->comm && n->comm_destroy) n->comm_destroy(n->comm);
  /* Not dlclose'd: NCCL keeps threads and atexit handlers that must not outlive their code. */
  free(n);
}

/* NVLink multicast stays off in every mode: NCCL_NVLS_ENABLE=0 where unset (before NCCL reads its
 * environment, at communicator init); any other value is refused rather than honoured. */
static int multicast_off(char *err, size_t errlen) {
  const char *v = getenv("NCCL_NVLS_ENABLE");
  if (v == NULL) {
    if (setenv("NCCL_NVLS_ENABLE", "0", 0) != 0) {
      set_err(err, errlen, "cannot set NCCL_NVLS_ENABLE=0");
      return 1;
    }
    return 0;
  }
  if (strcmp(v, "0") != 0) {
    set_err(err, errlen, "NCCL_NVLS_ENABLE=%s: NVLink multicast must stay off; unset it or set it to 0", v);
    return 1;
  }
  return 0;
}

int gcb_nccl_open(gcb_nccl_t **out, MPI_Comm comm, int device, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!out) {
    set_err(err, errlen, "gcb_nccl_open: out is NULL");
    return 1;
  }
  int rank, size;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS) {
    set_err(err, errlen, "gcb_nccl_open: not a valid MPI communicator");
    return 1;
  }
  gcb_nccl_t *n = calloc(1, sizeof *n);
  int ok = n != NULL;
  if (!ok) set_err(err, errlen, "out of host memory");
  /* Multicast, then the library, then the GPU: each is named as such, also on ranks without
   * a GPU. */
  if (ok) ok = multicast_off(err, errlen) == 0;
  if (ok) ok = load_library(n, err, errlen) == 0;
  if (ok && device < 0) {
    set_err(err, errlen, "rank %d has no GPU; NCCL needs one GPU per rank", rank);
    ok = 0;
  }
  if (ok) {
    cudaError_t ce = cudaSetDevice(device);
    if (ce != cudaSuccess) {
      set_err(err, errlen, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
      ok = 0;
    }
  }
  if (!agree(comm, rank, ok, err, errlen, "load")) goto fail_destroy;

  /* Rank 0 makes the id; its status travels with it so no rank waits on a missing id. */
  struct {
    gcb_ncclUniqueId id;
    int status;
  } msg;
  memset(&msg, 0, sizeof msg);
  if (rank == 0) {
    gcb_ncclResult_t r = n->get_unique_id(&msg.id);
    msg.status = (int)r;
    if (r != 0) set_err(err, errlen, "ncclGetUniqueId failed: %s", nccl_err(n, r));
  }
  if (MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, comm) != MPI_SUCCESS) {
    set_err(err, errlen, "MPI_Bcast of the NCCL unique id failed");
    goto fail_destroy;
  }
  if (msg.status != 0) {
    if (rank != 0) set_err(err, errlen, "ncclGetUniqueId failed on rank 0");
    goto fail_destroy;
  }
  gcb_ncclResult_t r = n->comm_init_rank(&n->comm, size, msg.id, rank);
  ok = r == 0;
  if (!ok) {
    n->comm = NULL;
    set_err(err, errlen, "ncclCommInitRank failed: %s", nccl_err(n, r));
  }
  if (!agree(comm, rank, ok, err, errlen, "communicator init")) goto fail_destroy;
  *out = n;
  return 0;

fail_destroy:
  destroy(n);
  return 1;
}

static int map_dtype(gc_dtype_t d, gcb_ncclDataType_t *out) {
  switch (d) {
    case GC_FLOAT32: *out = GCB_ncclFloat32; return 0;
    case GC_FLOAT16: *out = GCB_ncclFloat16; return 0;
    case GC_BFLOAT16: *out = GCB_ncclBfloat16; return 0;
    case GC_FLOAT64: *out = GCB_ncclFloat64; return 0;
    case GC_INT32: *out = GCB_ncclInt32; return 0;
    case GC_INT64: *out = GCB_ncclInt64; return 0;
    case GC_UINT8: *out = GCB_ncclUint8; return 0;
    case GC_FP8_E4M3: *out = GCB_ncclFloat8e4m3; return 0;
    case GC_FP8_E5M2: *out = GCB_ncclFloat8e5m2; return 0;
    default: return 1;
  }
}

static int map_op(gc_op_t op, gcb_ncclRedOp_t *out) {
  switch (op) {
    case GC_SUM: *out = GCB_ncclSum; return 0;
    case GC_PROD: *out = GCB_ncclProd; return 0;
    case GC_MIN: *out = GCB_ncclMin; return 0;
    case GC_MAX: *out = GCB_ncclMax; return 0;
    case GC_AVG: *out = GCB_ncclAvg; return 0;
    default: return 1;
  }
}

/* NCCL's type and op for a call (op only for the reductions), or nonzero with a message. */
static int nccl_args(const gcb_nccl_t *n, gcb_coll_t coll, gc_dtype_t dtype, gc_op_t op, gcb_ncclDataType_t *dt,
                     gcb_ncclRedOp_t *rop, char *err, size_t errlen) {
  *rop = GCB_ncclSum;
  if (n && n->aborted[0]) {
    set_err(err, errlen, "the NCCL communicator was aborted (%s)", n->aborted);
    return 1;
  }
  if (!n || !n->comm) {
    set_err(err, errlen, "NCCL communicator not open");
    return 1;
  }
  if (map_dtype(dtype, dt)) {
    set_err(err, errlen, "%s has no NCCL equivalent", gc_dtype_name(dtype));
    return 1;
  }
  if ((dtype == GC_FP8_E4M3 || dtype == GC_FP8_E5M2) && n->version_code < 22400) {
    set_err(err, errlen, "NCCL %s has no fp8 types (needs 2.24)", n->version);
    return 1;
  }
  if (coll == GCB_ALLREDUCE || coll == GCB_REDUCESCATTER) {
    if (map_op(op, rop)) {
      set_err(err, errlen, "op %s has no NCCL equivalent", gc_op_name(op));
      return 1;
    }
    if (op == GC_AVG && n->version_code < 21000) {
      set_err(err, errlen, "NCCL %s has no avg (needs 2.10)", n->version);
      return 1;
    }
  }
  return 0;
}

int gcb_nccl_supports(const gcb_nccl_t *n, gcb_coll_t coll, gc_dtype_t dtype, gc_op_t op, char *err, size_t errlen) {
  gcb_ncclDataType_t dt;
  gcb_ncclRedOp_t rop;
  return nccl_args(n, coll, dtype, op, &dt, &rop, err, errlen);
}

int gcb_nccl_run(gcb_nccl_t *n, gcb_coll_t coll, const void *send, void *recv, size_t count,
                 gc_dtype_t dtype, gc_op_t op, int root, void *stream, char *err, size_t errlen) {
  gcb_ncclDataType_t dt;
  gcb_ncclRedOp_t rop;
  if (nccl_args(n, coll, dtype, op, &dt, &rop, err, errlen)) return 1;
  gcb_ncclResult_t r;
  const char *what;
  switch (coll) {
    case GCB_ALLREDUCE:
      what = "ncclAllReduce";
      r = n->allreduce(send, recv, count, dt, rop, n->comm, stream);
      break;
    case GCB_REDUCESCATTER:
      what = "ncclReduceScatter";
      r = n->reducescatter(send, recv, count, dt, rop, n->comm, stream);
      break;
    case GCB_ALLGATHER:
      what = "ncclAllGather";
      r = n->allgather(send, recv, count, dt, n->comm, stream);
      break;
    case GCB_BROADCAST:
      what = "ncclBroadcast";
      r = n->broadcast(send, recv, count, dt, root, n->comm, stream);
      break;
    default:
      set_err(err, errlen, "unknown collective %d", (int)coll);
      return 1;
  }
  if (r != 0) {
    set_err(err, errlen, "%s failed: %s", what, nccl_err(n, r));
    return 1;
  }
  return 0;
}

int gcb_nccl_async_error(const gcb_nccl_t *n, char *err, size_t errlen) {
  if (!n || !n->comm || !n->comm_get_async_error) return 0;
  gcb_ncclResult_t state = 0;
  gcb_ncclResult_t r = n->comm_get_async_error(n->comm, &state);
  if (r != 0) state = r;
  if (state == 0 || state == GCB_NCCL_IN_PROGRESS) return 0;
  const char *last = n->get_last_error ? n->get_last_error(n->comm) : NULL;
  set_err(err, errlen, "NCCL reports an asynchronous error: %s%s%s", nccl_err(n, state),
          last && *last ? "; " : "", last && *last ? last : "");
  return 1;
}

int gcb_nccl_abort(gcb_nccl_t *n, const char *why, char *err, size_t errlen) {
  if (!n || !n->comm) return 0;
  if (!n->comm_abort) {
    set_err(err, errlen, "NCCL %s lacks ncclCommAbort: its kernels cannot be ended", n->version);
    return 1;
  }
  gcb_ncclResult_t r = n->comm_abort(n->comm);
  n->comm = NULL; /* freed by the abort, whatever it returned */
  snprintf(n->aborted, sizeof n->aborted, "%s", why && *why ? why : "aborted");
  if (r != 0) {
    set_err(err, errlen, "ncclCommAbort: %s", nccl_err(n, r));
    return 1;
  }
  return 0;
}

int gcb_nccl_aborted(const gcb_nccl_t *n) { return n && n->aborted[0]; }

const char *gcb_nccl_version(const gcb_nccl_t *n) { return n ? n->version : ""; }

int gcb_nccl_version_code(const gcb_nccl_t *n) { return n ? n->version_code : 0; }

static const char *const mode_names[GCB_NCCL_NUM_MODES] = {"plain", "registered", "symmetric"};

int gcb_nccl_mode_available(const gcb_nccl_t *n, gcb_nccl_mode_t mode, char *err, size_t errlen) {
  if (!n || !n->comm) {
    set_err(err, errlen, "NCCL communicator not open");
    return 1;
  }
  const char *missing = NULL;
  if (mode != GCB_NCCL_PLAIN && (!n->mem_alloc || !n->mem_free))
    missing = !n->mem_alloc ? "ncclMemAlloc" : "ncclMemFree";
  else if (mode == GCB_NCCL_REGISTERED && (!n->comm_register || !n->comm_deregister))
    missing = !n->comm_register ? "ncclCommRegister" : "ncclCommDeregister";
  else if (mode == GCB_NCCL_SYMMETRIC) {
    if (n->version_code < 22700) missing = "symmetric kernels (they came with 2.27)";
    else if (!n->window_register) missing = "ncclCommWindowRegister";
    else if (!n->window_deregister) missing = "ncclCommWindowDeregister";
  }
  if (mode < 0 || mode >= GCB_NCCL_NUM_MODES) {
    set_err(err, errlen, "unknown NCCL buffer mode %d", (int)mode);
    return 1;
  }
  if (missing) {
    set_err(err, errlen, "NCCL %s (%s) has no %s: -R %d (%s buffers) is not available", n->version,
            n->path, missing, (int)mode, mode_names[mode]);
    return 1;
  }
  return 0;
}

int gcb_nccl_buffer_alloc(gcb_nccl_t *n, gcb_nccl_mode_t mode, size_t bytes, void **out, char *err,
                          size_t errlen) {
  if (gcb_nccl_mode_available(n, mode, err, errlen)) return 1;
  *out = NULL;
  if (mode != GCB_NCCL_PLAIN) {
    gcb_ncclResult_t r = n->mem_alloc(out, bytes);
    if (r != 0) set_err(err, errlen, "ncclMemAlloc(%zu bytes): %s", bytes, nccl_err(n, r));
    return r != 0;
  }
  cudaError_t ce = cudaMalloc(out, bytes);
  if (ce != cudaSuccess) {
    set_err(err, errlen, "cudaMalloc(%zu bytes): %s", bytes, cudaGetErrorString(ce));
    *out = NULL;
    return 1;
  }
  return 0;
}

int gcb_nccl_buffer_free(gcb_nccl_t *n, gcb_nccl_mode_t mode, void *buf, char *err, size_t errlen) {
  if (!buf) return 0;
  if (mode != GCB_NCCL_PLAIN) {
    gcb_ncclResult_t r = n && n->mem_free ? n->mem_free(buf) : 1;
    if (r != 0) set_err(err, errlen, "ncclMemFree: %s", n ? nccl_err(n, r) : "no NCCL");
    return r != 0;
  }
  cudaError_t ce = cudaFree(buf);
  if (ce != cudaSuccess) set_err(err, errlen, "cudaFree: %s", cudaGetErrorString(ce));
  return ce != cudaSuccess;
}

int gcb_nccl_register(gcb_nccl_t *n, gcb_nccl_mode_t mode, void *buf, size_t bytes, void **handle,
                      char *err, size_t errlen) {
  *handle = NULL;
  if (mode == GCB_NCCL_PLAIN) return 0;
  if (gcb_nccl_mode_available(n, mode, err, errlen)) return 1;
  gcb_ncclResult_t r;
  if (mode == GCB_NCCL_REGISTERED) {
    r = n->comm_register(n->comm, buf, bytes, handle);
    if (r != 0) set_err(err, errlen, "ncclCommRegister(%zu bytes): %s", bytes, nccl_err(n, r));
  } else {
    gcb_ncclWindow_t win = NULL;
    r = n->window_register(n->comm, buf, bytes, &win, GCB_NCCL_WIN_COLL_SYMMETRIC);
    if (r != 0) set_err(err, errlen, "ncclCommWindowRegister(%zu bytes): %s", bytes, nccl_err(n, r));
    *handle = win;
  }
  if (r != 0) *handle = NULL;
  return r != 0;
}

int gcb_nccl_deregister(gcb_nccl_t *n, gcb_nccl_mode_t mode, void *handle, char *err, size_t errlen) {
  if (!handle || mode == GCB_NCCL_PLAIN) return 0;
  if (!n || !n->comm) {
    set_err(err, errlen, "NCCL communicator not open");
    return 1;
  }
  gcb_ncclResult_t r = mode == GCB_NCCL_REGISTERED ? n->comm_deregister(n->comm, handle)
                                                   : n->window_deregister(n->comm, handle);
  if (r != 0)
    set_err(err, errlen, "%s: %s", mode == GCB_NCCL_REGISTERED ? "ncclCommDeregister" : "ncclCommWindowDeregister",
            nccl_err(n, r));
  return r != 0;
}

static int group_call(gcb_nccl_t *n, fn_group_t fn, const char *name, char *err, size_t errlen) {
  if (!fn) {
    set_err(err, errlen, "NCCL %s has no %s", n ? n->version : "", name);
    return 1;
  }
  gcb_ncclResult_t r = fn();
  if (r != 0) set_err(err, errlen, "%s: %s", name, nccl_err(n, r));
  return r != 0;
}

int gcb_nccl_group_start(gcb_nccl_t *n, char *err, size_t errlen) {
  return group_call(n, n ? n->group_start : NULL, "ncclGroupStart", err, errlen);
}

int gcb_nccl_group_end(gcb_nccl_t *n, char *err, size_t errlen) {
  return group_call(n, n ? n->group_end : NULL, "ncclGroupEnd", err, errlen);
}

void gcb_nccl_close(gcb_nccl_t *n) { destroy(n); }
