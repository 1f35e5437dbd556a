/* mixed.c — the mixed tensor/data-parallel operations (all-reduce + all-gather, reduce-scatter +
 * all-reduce), composed from the basic collectives on the node and cross-node groups of a
 * communicator or on the TP and DP groups of a mixed layout (gc_mixed_t). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gc_entry.h"
#include "gc_mixed.h"

/* ---- mixed tensor/data-parallel operations (gpucoll.h) ----------------------------------- */

static const char across_nodes[] = "a mixed operation across nodes (its inter-node part runs on MPI)";

/* The checks both mixed operations start with; *o gets the resolved options. */
static gc_result_t mixed_begin(gc_comm_t comm, gc__call_kind_t call, const char *name, const void *send,
                               const void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *opts,
                               gc_options_t *o) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  GC_CHECK(gc__check_same_call(comm, call, count, dtype, op, 0, opts, send, (gc__places_t){NULL, NULL, 0, 0}));
  GC_CHECK(gc__check_dtype(comm, dtype, 1));
  GC_CHECK(gc__check_op(comm, op));
  GC_CHECK(gc__resolve_options(comm, opts, dtype, 1, o));
  if (count > SIZE_MAX / 8 / (size_t)comm->size) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "count %zu is too large", count);
  if (comm->node_size_min != comm->node_size_max)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED,
                   "mixed operations need the same number of ranks on every node; nodes here have %d to %d",
                   comm->node_size_min, comm->node_size_max);
  if (count && (!send || !recv)) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: %s is NULL", name, send ? "recvbuf" : "sendbuf");
  return GC_SUCCESS;
}

/* Before a mixed call's groups move data: refuses capture (a part runs on MPI) and compares the
 * call. By default (GC_CHECK_CALLS=auto) the MPI path compares its calls, but each group only
 * over its own ranks: a call that differed on one rank was refused by its group alone, while the
 * other groups went on into the next part and met that rank's next call there (GC_SUCCESS with
 * wrong data, or a timeout). So the call as given is compared over the whole communicator before
 * any group moves data (GC_CHECK_CALLS=1 has compared it in mixed_begin). */
static gc_result_t mixed_compare(gc_comm_t comm, void *stream, gc__call_kind_t call, size_t count, gc_dtype_t dtype,
                                 gc_op_t op, const gc_options_t *opts, const void *send, const char *why) {
  GC_CHECK(gc__refuse_capture(comm, stream, why));
  if (comm->check_calls == GC_CHECK_MPI_PATH) {
    gc__call_sig_t sig = gc__public_sig(comm, call, count, dtype, op, 0, opts, send, (gc__places_t){NULL, NULL, 0, 0});
    GC_CHECK(gc__same_call(comm, &sig));
  }
  return GC_SUCCESS;
}

gc_result_t gc__groups_begin(gc_comm_t comm, void *stream, gc__call_kind_t call, size_t count, gc_dtype_t dtype,
                             gc_op_t op, const gc_options_t *opts, const void *send, const char *why) {
  GC_CHECK(mixed_compare(comm, stream, call, count, dtype, op, opts, send, why));
  return gc__mixed_groups(comm);
}

gc_result_t gc__on_group(gc_comm_t comm, const char *name, gc_comm_t group, gc_result_t r) {
  if (r == GC_SUCCESS) return r;
  return GC_FAIL(comm, r, "%s group: %s", name, gc__message_body(gc_comm_last_error(group)));
}

/* A reduce-scatter + all-reduce's buffers: send holds parts blocks of count, recv takes block index. */
static gc_result_t rs_ar_buffers(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                 const gc_options_t *o, int parts, int index) {
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype);
  ptrdiff_t inplace = o->out_dtype == dtype ? (ptrdiff_t)((size_t)index * count * es) : PTRDIFF_MAX;
  if (gc__bad_overlap(send, (size_t)parts * count * es, recv, count * os, inplace))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  return gc__check_add(comm, o, dtype, recv, count);
}

static gc_result_t avg_across(gc_comm_t comm, gc_dtype_t dtype, gc_op_t op) {
  if (op == GC_AVG && (dtype == GC_INT32 || dtype == GC_UINT8))
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED,
                   "GC_AVG of %s in two steps would wrap the partial sums; use int64, or GC_SUM and divide",
                   gc_dtype_name(dtype));
  return GC_SUCCESS;
}

/* The reduce-scatter over rs (named rs_name), then the all-reduce over ar on MPI, of a call on
 * comm: inside rs op (a sum for GC_AVG) without epilogue, into partials of float32 for half
 * types, else of dtype; over ar op over the partials, then the epilogue, rounding once. GC_AVG
 * divides by comm's size. */
static gc_result_t rs_ar_run(gc_comm_t comm, gc_comm_t rs, const char *rs_name, gc_comm_t ar, const char *ar_name,
                             const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, void *stream,
                             const gc_options_t *o) {
  gc_dtype_t part = gc__partial_dtype(dtype);
  gc_options_t inside = gc__without_epilogue(o, part), across = GC_OPTIONS_INIT;
  across.scale = o->scale;
  across.add = o->add;
  across.out_dtype = o->out_dtype;
  gc__mpi_mix_t mix = {dtype, comm->size};
  /* The partials go to recv when they have its type, else (or where recv is the add vector, which
   * they would overwrite before it is added) to a temporary where the input is. */
  void *tmp = NULL;
  int on_device = gc__ptr_kind(comm, send) == GC_PTR_DEVICE_OWN;
  if (part != o->out_dtype || o->add == recv)
    GC_CHECK(gc__scratch_alloc(comm, on_device, count * gc_dtype_size(part), (cudaStream_t)stream, &tmp));
  void *partial = tmp ? tmp : recv;
  gc_result_t r = gc__on_group(comm, rs_name, rs, gc_reducescatter_ex(send, partial, count, dtype, op == GC_AVG ? GC_SUM : op,
                                                                  rs, stream, &inside));
  if (r == GC_SUCCESS)
    r = gc__on_group(comm, ar_name, ar, gc__mpi_allreduce(ar, partial, recv, count, part, op, &across, &mix,
                                                      (cudaStream_t)stream));
  return gc__scratch_free(comm, on_device, tmp, (cudaStream_t)stream, r);
}

static gc_result_t reducescatter_allreduce_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                                gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  gc_options_t o;
  GC_CHECK(mixed_begin(comm, GC_CALL_REDUCESCATTER_ALLREDUCE, "gc_reducescatter_allreduce", send, recv, count, dtype, op, opts, &o));
  if (count == 0) return GC_SUCCESS;
  GC_CHECK(rs_ar_buffers(comm, send, recv, count, dtype, &o, comm->local_size, comm->local_rank));
  /* One node: the reduce-scatter is the whole operation; one rank per node: the all-reduce is. */
  if (comm->node_count == 1) return gc__reducescatter_impl(send, recv, count, dtype, op, comm, stream, &o);
  if (comm->local_size == 1) return gc__allreduce_impl(send, recv, count, dtype, op, comm, stream, &o, 0);
  GC_CHECK(avg_across(comm, dtype, op));
  GC_CHECK(gc__groups_begin(comm, stream, GC_CALL_REDUCESCATTER_ALLREDUCE, count, dtype, op, opts, send, across_nodes));
  return rs_ar_run(comm, comm->node_group, "node", comm->cross_group, "cross", send, recv, count, dtype, op, stream, &o);
}

gc_result_t gc_reducescatter_allreduce(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                                       gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, reducescatter_allreduce_impl(send, recv, recvcount, dtype, op, comm, stream, opts));
}

/* An all-reduce + all-gather's buffers: recv holds parts blocks of count, *mine is block index. */
static gc_result_t ar_ag_buffers(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                 const gc_options_t *o, int parts, int index, void **mine) {
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype), all = (size_t)parts * count * os;
  char *block = (char *)recv + (size_t)index * count * os;
  ptrdiff_t inplace = o->out_dtype == dtype ? (ptrdiff_t)((size_t)index * count * os) : PTRDIFF_MAX;
  if (gc__bad_overlap(recv, all, send, count * es, inplace))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  if (o->add && gc__bad_overlap(o->add, count * es, recv, all, PTRDIFF_MAX) && o->add != block)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "the epilogue's add vector overlaps recvbuf");
  GC_CHECK(gc__check_add(comm, o, dtype, block, count));
  *mine = block;
  return GC_SUCCESS;
}

/* The all-reduce over ar into this rank's block of recv (mine), then the blocks gathered over ag
 * in place. dispatched: the all-reduce through its group's dispatch (the table's algorithm: the
 * kernels inside one node, MPI across), else on MPI; options.algo steers the gather. */
static gc_result_t ar_ag_run(gc_comm_t comm, gc_comm_t ar, const char *ar_name, gc_comm_t ag, const char *ag_name,
                             int dispatched, const void *send, void *mine, void *recv, size_t count, gc_dtype_t dtype,
                             gc_op_t op, void *stream, const gc_options_t *o) {
  gc_options_t plain = gc__without_epilogue(o, GC_DTYPE_SAME), table = *o;
  table.algo = GC_ALGO_AUTO;
  table.max_blocks = 0;
  gc_result_t r = dispatched ? gc_allreduce_ex(send, mine, count, dtype, op, ar, stream, &table)
                             : gc__mpi_allreduce(ar, send, mine, count, dtype, op, o, NULL, (cudaStream_t)stream);
  r = gc__on_group(comm, ar_name, ar, r);
  if (r == GC_SUCCESS) r = gc__on_group(comm, ag_name, ag, gc_allgather_ex(mine, recv, count, o->out_dtype, ag, stream, &plain));
  return r;
}

static gc_result_t allreduce_allgather_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                            gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  gc_options_t o;
  GC_CHECK(mixed_begin(comm, GC_CALL_ALLREDUCE_ALLGATHER, "gc_allreduce_allgather", send, recv, count, dtype, op, opts, &o));
  if (count == 0) return GC_SUCCESS;
  void *mine = NULL; /* this rank's block of recv */
  GC_CHECK(ar_ag_buffers(comm, send, recv, count, dtype, &o, comm->local_size, comm->local_rank, &mine));
  /* One rank per node: the all-reduce is the whole operation; one node without an epilogue: the
   * all-gather is (an all-reduce over one rank changes nothing). */
  if (comm->local_size == 1) return gc__allreduce_impl(send, recv, count, dtype, op, comm, stream, &o, 0);
  if (comm->node_count == 1 && !gc__has_epilogue(&o, dtype)) return gc__allgather_impl(send, recv, count, dtype, comm, stream, &o);
  GC_CHECK(gc__groups_begin(comm, stream, GC_CALL_ALLREDUCE_ALLGATHER, count, dtype, op, opts, send, across_nodes));
  /* Across nodes into this rank's block of recv, then the node's blocks gathered in place. */
  return ar_ag_run(comm, comm->cross_group, "cross", comm->node_group, "node", 0, send, mine, recv, count, dtype, op,
                   stream, &o);
}

gc_result_t gc_allreduce_allgather(const void *send, void *recv, size_t sendcount, gc_dtype_t dtype, gc_op_t op,
                                   gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, allreduce_allgather_impl(send, recv, sendcount, dtype, op, comm, stream, opts));
}

/* ---- the operations of a mixed layout (gc_mixed_t, mixed_layout.c) ---------------------------- */

static gc_result_t layout_rs_ar(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, gc_mixed_t m,
                                void *stream, const gc_options_t *opts) {
  static const char fn[] = "gc_mixed_reducescatter_allreduce";
  gc_comm_t comm = m->comm;
  gc_options_t o;
  GC_CHECK(gc__mixed_require(m, GC_MIXED_REDUCESCATTER_ALLREDUCE, fn));
  GC_CHECK(mixed_begin(comm, GC_CALL_REDUCESCATTER_ALLREDUCE, fn, send, recv, count, dtype, op, opts, &o));
  if (count == 0) return GC_SUCCESS;
  GC_CHECK(rs_ar_buffers(comm, send, recv, count, dtype, &o, m->at.dp_size, m->at.dp_rank));
  GC_CHECK(avg_across(comm, dtype, op));
  GC_CHECK(mixed_compare(comm, stream, GC_CALL_REDUCESCATTER_ALLREDUCE, count, dtype, op, opts, send,
                         "gc_mixed_reducescatter_allreduce (its TP all-reduce runs on MPI)"));
  return rs_ar_run(comm, m->dp, "DP", m->tp, "TP", send, recv, count, dtype, op, stream, &o);
}

static gc_result_t layout_ar_ag(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, gc_mixed_t m,
                                void *stream, const gc_options_t *opts) {
  static const char fn[] = "gc_mixed_allreduce_allgather";
  gc_comm_t comm = m->comm;
  gc_options_t o;
  GC_CHECK(gc__mixed_require(m, GC_MIXED_ALLREDUCE_ALLGATHER, fn));
  GC_CHECK(mixed_begin(comm, GC_CALL_ALLREDUCE_ALLGATHER, fn, send, recv, count, dtype, op, opts, &o));
  if (count == 0) return GC_SUCCESS;
  void *mine = NULL; /* this rank's block of recv: dp rank's */
  GC_CHECK(ar_ag_buffers(comm, send, recv, count, dtype, &o, m->at.dp_size, m->at.dp_rank, &mine));
  /* Inside one node on the GPUs both parts run on the kernels; elsewhere a part runs on MPI. */
  if (m->at.inter_size > 1 || !comm->p2p_ready || gc__ptr_kind(comm, send) != GC_PTR_DEVICE_OWN)
    GC_CHECK(mixed_compare(comm, stream, GC_CALL_ALLREDUCE_ALLGATHER, count, dtype, op, opts, send,
                           "gc_mixed_allreduce_allgather across nodes (a part runs on MPI)"));
  return ar_ag_run(comm, m->tp, "TP", m->dp, "DP", 1, send, mine, recv, count, dtype, op, stream, &o);
}

gc_result_t gc_mixed_reducescatter_allreduce(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype,
                                             gc_op_t op, gc_mixed_t mixed, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__mixed_check(mixed));
  GC_ON_DEVICE(mixed->comm, layout_rs_ar(send, recv, recvcount, dtype, op, mixed, stream, opts));
}

gc_result_t gc_mixed_allreduce_allgather(const void *send, void *recv, size_t sendcount, gc_dtype_t dtype, gc_op_t op,
                                         gc_mixed_t mixed, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__mixed_check(mixed));
  GC_ON_DEVICE(mixed->comm, layout_ar_ag(send, recv, sendcount, dtype, op, mixed, stream, opts));
}

/* The pure operations: the layout has one axis, whose group is the communicator itself. */
gc_result_t gc_mixed_allreduce(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op,
                               gc_mixed_t mixed, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__mixed_check(mixed));
  GC_CHECK(gc__mixed_require(mixed, GC_MIXED_ALLREDUCE, "gc_mixed_allreduce"));
  return gc_allreduce_ex(send, recv, count, dtype, op, mixed->tp, stream, opts);
}

gc_result_t gc_mixed_allgather(const void *send, void *recv, size_t sendcount, gc_dtype_t dtype, gc_mixed_t mixed,
                               void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__mixed_check(mixed));
  GC_CHECK(gc__mixed_require(mixed, GC_MIXED_ALLGATHER, "gc_mixed_allgather"));
  return gc_allgather_ex(send, recv, sendcount, dtype, mixed->dp, stream, opts);
}

gc_result_t gc_mixed_reducescatter(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                                   gc_mixed_t mixed, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__mixed_check(mixed));
  GC_CHECK(gc__mixed_require(mixed, GC_MIXED_REDUCESCATTER, "gc_mixed_reducescatter"));
  return gc_reducescatter_ex(send, recv, recvcount, dtype, op, mixed->dp, stream, opts);
}
