/* gc_entry.h — what every public entry point (coll.c, mixed.c, rmsnorm.c) starts with: argument
 * checks, options resolved, pointers classified, the call compared across ranks, then the plan. */
#ifndef GC_ENTRY_H
#define GC_ENTRY_H

#include "gc_exec.h"

/* The pointers of one call and whether they can take the peer-to-peer path. */
typedef struct {
  const void *ptr[3];
  const char *name[3];
  int n;
} gc__ptrs_t;

/* A call's send and recv buffers as its signature sees them; either may be NULL (not compared).
 * In place, the one inside the other (recv for the all-reduce and reduce-scatter, send for the
 * all-gather) is compared as "in place": its offset differs by rank. */
typedef struct {
  const void *send, *recv;
  int send_in_place, recv_in_place;
} gc__places_t;

GC_HIDDEN gc_result_t gc__check_dtype(gc_comm_t comm, gc_dtype_t dtype, int reduces);
GC_HIDDEN gc_result_t gc__check_op(gc_comm_t comm, gc_op_t op);
GC_HIDDEN int gc__has_epilogue(const gc_options_t *o, gc_dtype_t dtype);
GC_HIDDEN gc_options_t gc__without_epilogue(const gc_options_t *o, gc_dtype_t out_dtype);
/* The type of a reduction's partial sums between two steps (node, then across nodes): float32 for
 * the half types, rounded once at the end; the input's type for the others. */
static inline gc_dtype_t gc__partial_dtype(gc_dtype_t dtype) {
  return dtype == GC_FLOAT16 || dtype == GC_BFLOAT16 ? GC_FLOAT32 : dtype;
}
/* The inputs gc_allreduce_rmsnorm_fp8 takes: float32 and the half types. */
static inline int gc__rmsnorm_dtype(gc_dtype_t dtype) { return gc__partial_dtype(dtype) == GC_FLOAT32; }
GC_HIDDEN gc_result_t gc__resolve_options(gc_comm_t comm, const gc_options_t *opts, gc_dtype_t dtype, int reduces,
                                          gc_options_t *out);
GC_HIDDEN gc_result_t gc__resolve_wire_options(gc_comm_t comm, const char *fn, const gc_options_t *opts,
                                               gc_dtype_t dtype, gc_op_t op, gc_options_t *out);
GC_HIDDEN gc_result_t gc__check_pointer(gc_comm_t comm, const void *p, const char *name, gc__ptr_kind_t *kind);
GC_HIDDEN int gc__overlaps(const void *a, size_t an, const void *b, size_t bn);
GC_HIDDEN int gc__bad_overlap(const void *a, size_t an, const void *b, size_t bn, ptrdiff_t allowed);
GC_HIDDEN gc_result_t gc__check_add(gc_comm_t comm, const gc_options_t *o, gc_dtype_t dtype, const void *recv,
                                    size_t count);
GC_HIDDEN size_t gc__ll_need(gc_comm_t comm, gc__coll_t coll, gc_dtype_t dtype, gc_dtype_t out, size_t part_bytes);
GC_HIDDEN gc_result_t gc__refuse_capture(gc_comm_t comm, void *stream, const char *why);
GC_HIDDEN gc_result_t gc__plan_call(gc_comm_t comm, gc__call_t *c, const gc_options_t *o, const gc__ptrs_t *ptrs,
                                    void *stream, gc__plan_t *plan);
GC_HIDDEN gc__call_sig_t gc__public_sig(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype,
                                        gc_op_t op, int root, const gc_options_t *opts, const void *buf,
                                        gc__places_t at);
GC_HIDDEN gc_result_t gc__check_same_call(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype,
                                          gc_op_t op, int root, const gc_options_t *opts, const void *buf,
                                          gc__places_t at);

/* plan_query.c. gc__plan_call ends with gc__plan_record: the plan becomes comm->last_plan and,
 * while gc_plan_query asks (comm->plan_only), is handed over with GC__PLANNED, which the entry
 * returns before anything runs (never a public result). */
#define GC__PLANNED ((gc_result_t)(GC_NUM_RESULTS + 1))
GC_HIDDEN gc_result_t gc__plan_record(gc_comm_t comm, const gc__plan_t *plan);
/* gc_plan_t from a plan of collective coll with elements of es bytes. */
GC_HIDDEN gc_plan_t gc__plan_public(gc__coll_t coll, const gc__plan_t *plan, size_t es);

/* The basic collectives after the public entry's device switch and before its outcome is agreed
 * (coll.c): what the mixed operations and the fused RMSNorm compose. recv_is_scratch: recv is the
 * library's own cudaMallocAsync memory, not looked up while a graph is being captured. */
GC_HIDDEN gc_result_t gc__allreduce_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op,
                                         gc_comm_t comm, void *stream, const gc_options_t *opts, int recv_is_scratch);
GC_HIDDEN gc_result_t gc__reducescatter_impl(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype,
                                             gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts);
GC_HIDDEN gc_result_t gc__allgather_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_comm_t comm,
                                         void *stream, const gc_options_t *opts);
GC_HIDDEN gc_result_t gc__broadcast_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, int root,
                                         gc_comm_t comm, void *stream, const gc_options_t *opts);

/* hierarchy.c: the collectives across several nodes (the plan's GC_PATH_HIER), with the call's
 * resolved options; send and recv checked by the entry point. */
GC_HIDDEN gc_result_t gc__hier_allreduce(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                         gc_op_t op, const gc_options_t *o, void *stream);
GC_HIDDEN gc_result_t gc__hier_reducescatter(gc_comm_t comm, const void *send, void *recv, size_t recvcount,
                                             gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, void *stream);
GC_HIDDEN gc_result_t gc__hier_allgather(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                         const gc_options_t *o, void *stream);
GC_HIDDEN gc_result_t gc__hier_broadcast(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                         int root, const gc_options_t *o, void *stream);

#endif
