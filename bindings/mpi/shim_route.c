/* shim_route.c — libgpucoll-mpi's datatype and op mapping and its per-rank route decision. */
#include "shim_route.h"

#include <limits.h>

static const int reason_uniform[] = {
#define GCM__REASON_UNIFORM(name, uniform, msg) uniform,
    GCM_REASON_MAP(GCM__REASON_UNIFORM)
#undef GCM__REASON_UNIFORM
};
static const char *const reason_text[] = {
#define GCM__REASON_TEXT(name, uniform, msg) msg,
    GCM_REASON_MAP(GCM__REASON_TEXT)
#undef GCM__REASON_TEXT
};

int gcm_reason_uniform(gcm_reason_t reason) {
  return reason >= 0 && reason < GCM_NUM_REASONS ? reason_uniform[reason] : 1;
}

const char *gcm_reason_text(gcm_reason_t reason) {
  return reason >= 0 && reason < GCM_NUM_REASONS ? reason_text[reason] : "unknown reason";
}

gcm_call_kind_t gcm_call_kind(const gcm_call_attrs_t *a) {
  int host = a->send == GCM_BUF_HOST || a->recv == GCM_BUF_HOST;
  int device = a->send == GCM_BUF_DEVICE || a->recv == GCM_BUF_DEVICE;
  if (device && host) return GCM_KIND_MIXED;
  return device ? GCM_KIND_DEVICE : GCM_KIND_HOST;
}

/* Uniform reasons first: a rank must never agree over a call its peers skip without agreeing. */
gcm_reason_t gcm_local_reason(const gcm_call_attrs_t *a) {
  if (a->inter) return GCM_REASON_INTERCOMM;
  if (!a->dtype_ok) return GCM_REASON_DTYPE;
  if (!a->op_ok) return GCM_REASON_OP;
  if (!a->count_ok) return GCM_REASON_COUNT;
  if (!a->types_match) return GCM_REASON_TYPES_DIFFER;
  if (!a->counts_equal) return GCM_REASON_UNEQUAL_COUNTS;
  switch (gcm_call_kind(a)) {
    case GCM_KIND_HOST: return GCM_REASON_HOST;
    case GCM_KIND_MIXED: return GCM_REASON_MIXED;
    default: break;
  }
  if (a->comm_failed) return GCM_REASON_NO_COMM;
  if (!a->buffers_on_comm_device) return GCM_REASON_OTHER_DEVICE;
  return GCM_REASON_OK;
}

gcm_call_attrs_t gcm_reduce_attrs(int at_root, int in_place, gcm_buf_kind_t send, gcm_buf_kind_t recv,
                                  int root, int size, int count) {
  gcm_call_attrs_t a = GCM_CALL_ATTRS_INIT;
  a.send = at_root && in_place ? recv : send;
  a.recv = GCM_BUF_NONE;
  a.count_ok = count > 0 && root >= 0 && root < size;
  return a;
}

int gcm_reduce_into_recv(int at_root, gcm_buf_kind_t recv, int recv_device, int comm_device) {
  return at_root && recv == GCM_BUF_DEVICE && recv_device == comm_device;
}

/* Open MPI's handles are addresses of globals, not constants: a chain of comparisons, not a switch. */
int gcm_dtype_of(MPI_Datatype type, int reduce, gc_dtype_t *out) {
  gc_dtype_t d;
  if (type == MPI_FLOAT) d = GC_FLOAT32;
  else if (type == MPI_DOUBLE) d = GC_FLOAT64;
  else if (type == MPI_INT || type == MPI_INT32_T) d = GC_INT32;
  else if (type == MPI_INT64_T || type == MPI_LONG_LONG_INT || type == MPI_LONG_LONG ||
           (type == MPI_LONG && sizeof(long) == 8)) d = GC_INT64;
  else if (type == MPI_UINT8_T || type == MPI_UNSIGNED_CHAR) d = GC_UINT8;
  else if (!reduce && (type == MPI_BYTE || type == MPI_CHAR || type == MPI_SIGNED_CHAR ||
                       type == MPI_INT8_T)) d = GC_UINT8;
#ifdef MPIX_C_FLOAT16
  else if (type == MPIX_C_FLOAT16) d = GC_FLOAT16;
#endif
#ifdef MPIX_BFLOAT16
  else if (type == MPIX_BFLOAT16) d = GC_BFLOAT16;
#endif
  else return 0;
  *out = d;
  return 1;
}

int gcm_op_of(MPI_Op op, gc_op_t *out) {
  gc_op_t o;
  if (op == MPI_SUM) o = GC_SUM;
  else if (op == MPI_PROD) o = GC_PROD;
  else if (op == MPI_MIN) o = GC_MIN;
  else if (op == MPI_MAX) o = GC_MAX;
  else return 0;
  *out = o;
  return 1;
}

int gcm_mpi_error_class(gc_result_t r) {
  switch (r) {
    case GC_SUCCESS: return MPI_SUCCESS;
    case GC_ERR_INVALID_ARGUMENT: return MPI_ERR_ARG;
    case GC_ERR_INVALID_USAGE: return MPI_ERR_OTHER;
    case GC_ERR_UNSUPPORTED: return MPI_ERR_UNSUPPORTED_OPERATION;
    case GC_ERR_SYSTEM: return MPI_ERR_NO_MEM;
    case GC_ERR_MPI: return MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER; /* CUDA, timeouts, a failed peer, internal errors */
  }
}
