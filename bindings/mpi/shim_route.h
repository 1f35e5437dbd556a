/* shim_route.h — the MPI-to-gpucoll mapping and route decision of libgpucoll-mpi, free of MPI
 * state so that unit tests can drive it with made-up call attributes. */
#ifndef GC_SHIM_ROUTE_H
#define GC_SHIM_ROUTE_H

#include <mpi.h>

#include "gpucoll.h"

/* Where a buffer of a call lives. NONE: the call has no such buffer on this rank (MPI_IN_PLACE,
 * a broadcast's single buffer). */
typedef enum gcm_buf_kind { GCM_BUF_NONE, GCM_BUF_HOST, GCM_BUF_DEVICE } gcm_buf_kind_t;

/* The buffer kind of a whole call on this rank, the key of the agreement cache. */
typedef enum gcm_call_kind { GCM_KIND_HOST, GCM_KIND_DEVICE, GCM_KIND_MIXED, GCM_NUM_KINDS } gcm_call_kind_t;

/* Why a call takes the route it takes. The first group is uniform: it depends only on the call's
 * arguments that MPI requires to match on every rank (datatype, op, count, communicator), so every
 * rank reaches it alike and no agreement is needed. */
#define GCM_REASON_MAP(XX)                                                           \
  XX(OK, 0, "device buffers, predefined datatype and op")                            \
  XX(DTYPE, 1, "datatype has no gpucoll dtype")                                      \
  XX(OP, 1, "op is not MPI_SUM, MPI_PROD, MPI_MIN or MPI_MAX")                       \
  XX(INTERCOMM, 1, "intercommunicator")                                              \
  XX(COUNT, 1, "count is zero or root out of range")                     \
  XX(TYPES_DIFFER, 1, "send and receive datatypes or counts differ")                 \
  XX(UNEQUAL_COUNTS, 1, "receive counts differ between ranks")                       \
  XX(HOST, 0, "host buffers")                                                        \
  XX(MIXED, 0, "host and device buffers mixed")                                      \
  XX(OTHER_DEVICE, 0, "buffer on another device than the gpucoll communicator's")   \
  XX(NO_COMM, 0, "gpucoll communicator unavailable")                                 \
  XX(PEER, 0, "another rank cannot take gpucoll")                                    \
  XX(NESTED, 1, "called from inside gpucoll")

typedef enum gcm_reason {
#define GCM__REASON_ENUM(name, uniform, msg) GCM_REASON_##name,
  GCM_REASON_MAP(GCM__REASON_ENUM)
#undef GCM__REASON_ENUM
  GCM_NUM_REASONS
} gcm_reason_t;

/* What this rank knows about one call. */
typedef struct gcm_call_attrs {
  gcm_buf_kind_t send;  /* NONE for MPI_IN_PLACE or a call with one buffer */
  gcm_buf_kind_t recv;
  int dtype_ok;         /* the datatype maps to a gc_dtype_t (gcm_dtype_of) */
  int op_ok;            /* the op maps to a gc_op_t, or the call does not reduce */
  int inter;            /* the communicator is an intercommunicator */
  int count_ok;         /* count > 0 and count * size fits */
  int types_match;      /* send and receive datatype and count alike (all-gather) */
  int counts_equal;     /* every receive count alike (MPI_Reduce_scatter) */
  int buffers_on_comm_device; /* device buffers sit on the gpucoll communicator's device (1 before it exists) */
  int comm_failed;      /* making the gpucoll communicator failed on this rank */
} gcm_call_attrs_t;
#define GCM_CALL_ATTRS_INIT {GCM_BUF_NONE, GCM_BUF_NONE, 1, 1, 0, 1, 1, 1, 1, 0}

/* The call's buffer kind: DEVICE when every buffer it has is device memory, HOST when every one
 * is host memory, MIXED otherwise. */
gcm_call_kind_t gcm_call_kind(const gcm_call_attrs_t *a);
/* GCM_REASON_OK when this rank can serve the call on gpucoll, else the first reason it cannot. */
gcm_reason_t gcm_local_reason(const gcm_call_attrs_t *a);
/* 1 when every rank of a call reaches `reason` alike (no agreement needed). */
int gcm_reason_uniform(gcm_reason_t reason);
const char *gcm_reason_text(gcm_reason_t reason);

/* MPI_Reduce's attributes on this rank (datatype and op left to the caller). The call's buffer
 * kind is that of its data buffer, sendbuf, or recvbuf at the root in place, which SPMD programs
 * pass alike on every rank; the root's receive buffer does not count: the result is copied there
 * when it is not device memory of the communicator's device (gcm_reduce_into_recv). recvbuf is not
 * significant on the other ranks, and MPI_IN_PLACE there (erroneous) counts as no buffer, so the
 * call goes to MPI. count_ok covers the root too (0 <= root < size, uniform). */
gcm_call_attrs_t gcm_reduce_attrs(int at_root, int in_place, gcm_buf_kind_t send, gcm_buf_kind_t recv,
                                  int root, int size, int count);
/* 1 when a served MPI_Reduce writes its result straight into recvbuf: at the root, device memory
 * on the gpucoll communicator's device. Else it goes to a scratch buffer (copied to recvbuf at
 * the root). */
int gcm_reduce_into_recv(int at_root, gcm_buf_kind_t recv, int recv_device, int comm_device);

/* The gpucoll dtype of a predefined MPI datatype; 0 (and *out untouched) when there is none.
 * reduce: the call reduces, so byte types without arithmetic (MPI_BYTE, MPI_CHAR) do not map. */
int gcm_dtype_of(MPI_Datatype type, int reduce, gc_dtype_t *out);
/* The gpucoll op of a predefined MPI op; 0 when there is none. */
int gcm_op_of(MPI_Op op, gc_op_t *out);

/* The MPI error class of a gpucoll result: GC_ERR_INVALID_ARGUMENT -> MPI_ERR_ARG,
 * GC_ERR_UNSUPPORTED -> MPI_ERR_UNSUPPORTED_OPERATION, GC_ERR_MPI -> MPI_ERR_INTERN... */
int gcm_mpi_error_class(gc_result_t r);

#endif /* GC_SHIM_ROUTE_H */
