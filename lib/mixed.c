/* mixed.c — the mixed tensor/data-parallel operations (all-reduce + all-gather, reduce-scatter +
 * all-reduce), composed from the basic collectives on the node and cross-node groups. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gc_entry.h"

/* ---- mixed tensor/data-parallel operations (gpucoll.h) ----------------------------------- */

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

/* Several nodes of several ranks: refuses capture, compares the call, then makes the groups
 * (first call). By default (GC_CHECK_CALLS=auto) the MPI path compares its calls, but each group
 * only over its own ranks: a call that differed on one rank was refused by its node alone, while
 * the other nodes went on into the cross groups and met that rank's next call there (GC_SUCCESS
 * with wrong data, or a timeout). So the call as given is compared over the whole communicator
 * before any group moves data (GC_CHECK_CALLS=1 has compared it in mixed_begin). */
static gc_result_t mixed_groups(gc_comm_t comm, void *stream, gc__call_kind_t call, size_t count, gc_dtype_t dtype,
                                gc_op_t op, const gc_options_t *opts, const void *send) {
  GC_CHECK(gc__refuse_capture(comm, stream, "a mixed operation across nodes (its inter-node part runs on MPI)"));
  if (comm->check_calls == GC_CHECK_MPI_PATH) {
    gc__call_sig_t sig = gc__public_sig(comm, call, count, dtype, op, 0, opts, send, (gc__places_t){NULL, NULL, 0, 0});
    GC_CHECK(gc__same_call(comm, &sig));
  }
  return gc__mixed_groups(comm);
}

/* The result of a call on one of comm's groups; a failure is reported on comm too. */
static gc_result_t on_group(gc_comm_t comm, gc_comm_t group, gc_result_t r) {
  if (r == GC_SUCCESS) return r;
  return GC_FAIL(comm, r, "%s group: %s", group == comm->node_group ? "node" : "cross",
                 gc__message_body(gc_comm_last_error(group)));
}

static gc_result_t reducescatter_allreduce_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                                gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  gc_options_t o;
  GC_CHECK(mixed_begin(comm, GC_CALL_REDUCESCATTER_ALLREDUCE, "gc_reducescatter_allreduce", send, recv, count, dtype, op, opts, &o));
  if (count == 0) return GC_SUCCESS;
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o.out_dtype), L = (size_t)comm->local_size;
  ptrdiff_t inplace = o.out_dtype == dtype ? (ptrdiff_t)((size_t)comm->local_rank * count * es) : PTRDIFF_MAX;
  if (gc__bad_overlap(send, L * count * es, recv, count * os, inplace))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  GC_CHECK(gc__check_add(comm, &o, dtype, recv, count));
  /* One node: the reduce-scatter is the whole operation; one rank per node: the all-reduce is. */
  if (comm->node_count == 1) return gc__reducescatter_impl(send, recv, count, dtype, op, comm, stream, &o);
  if (L == 1) return gc__allreduce_impl(send, recv, count, dtype, op, comm, stream, &o, 0);
  if (op == GC_AVG && (dtype == GC_INT32 || dtype == GC_UINT8))
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED,
                   "GC_AVG of %s across nodes would wrap the nodes' partial sums; use int64, or GC_SUM and divide",
                   gc_dtype_name(dtype));
  GC_CHECK(mixed_groups(comm, stream, GC_CALL_REDUCESCATTER_ALLREDUCE, count, dtype, op, opts, send));

  /* Inside the node: op (a sum for GC_AVG) without epilogue, into partials of float32 for half
   * types, else of dtype. Across nodes: op over the partials, then the epilogue, rounding once. */
  gc_dtype_t part = dtype == GC_FLOAT16 || dtype == GC_BFLOAT16 ? GC_FLOAT32 : dtype;
  gc_options_t inside = gc__without_epilogue(&o, part), across = GC_OPTIONS_INIT;
  across.scale = o.scale;
  across.add = o.add;
  across.out_dtype = o.out_dtype;
  gc__mpi_mix_t mix = {dtype, comm->size};
  /* The partials go to recv when they have its type, else (or where recv is the add vector, which
   * they would overwrite before it is added) to a temporary where the input is. */
  void *tmp = NULL;
  int on_device = gc__ptr_kind(comm, send) == GC_PTR_DEVICE_OWN;
  if (part != o.out_dtype || o.add == recv)
    GC_CHECK(gc__scratch_alloc(comm, on_device, count * gc_dtype_size(part), (cudaStream_t)stream, &tmp));
  void *partial = tmp ? tmp : recv;
  gc_comm_t node = comm->node_group, cross = comm->cross_group;
  gc_result_t r = on_group(comm, node, gc_reducescatter_ex(send, partial, count, dtype, op == GC_AVG ? GC_SUM : op,
                                                           node, stream, &inside));
  if (r == GC_SUCCESS)
    r = on_group(comm, cross, gc__mpi_allreduce(cross, partial, recv, count, part, op, &across, &mix,
                                                (cudaStream_t)stream));
  if (r == GC_ERR_TIMEOUT && tmp && !on_device) {
    /* A wait that timed out leaves its request behind (gc__boot_wait), and on the host that
     * request reads the partials where they are: kept, or MPI reads freed memory once a late peer
     * comes. (Device partials are read by copies on the stream, which cudaFreeAsync follows.) */
    gc__park(tmp);
    tmp = NULL;
  }
  return gc__scratch_free(comm, on_device, tmp, (cudaStream_t)stream, r);
}

gc_result_t gc_reducescatter_allreduce(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                                       gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, reducescatter_allreduce_impl(send, recv, recvcount, dtype, op, comm, stream, opts));
}

static gc_result_t allreduce_allgather_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                            gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  gc_options_t o;
  GC_CHECK(mixed_begin(comm, GC_CALL_ALLREDUCE_ALLGATHER, "gc_allreduce_allgather", send, recv, count, dtype, op, opts, &o));
  if (count == 0) return GC_SUCCESS;
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o.out_dtype), L = (size_t)comm->local_size;
  void *mine = (char *)recv + (size_t)comm->local_rank * count * os; /* this rank's block of recv */
  ptrdiff_t inplace = o.out_dtype == dtype ? (ptrdiff_t)((size_t)comm->local_rank * count * os) : PTRDIFF_MAX;
  if (gc__bad_overlap(recv, L * count * os, send, count * es, inplace))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  if (o.add && gc__bad_overlap(o.add, count * es, recv, L * count * os, PTRDIFF_MAX) && o.add != mine)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "the epilogue's add vector overlaps recvbuf");
  GC_CHECK(gc__check_add(comm, &o, dtype, mine, count));
  /* One rank per node: the all-reduce is the whole operation; one node without an epilogue: the
   * all-gather is (an all-reduce over one rank changes nothing). */
  if (L == 1) return gc__allreduce_impl(send, recv, count, dtype, op, comm, stream, &o, 0);
  if (comm->node_count == 1 && !gc__has_epilogue(&o, dtype)) return gc__allgather_impl(send, recv, count, dtype, comm, stream, &o);
  GC_CHECK(mixed_groups(comm, stream, GC_CALL_ALLREDUCE_ALLGATHER, count, dtype, op, opts, send));
  /* Across nodes into this rank's block of recv, then the node's blocks gathered in place. */
  gc_options_t plain = gc__without_epilogue(&o, GC_DTYPE_SAME);
  gc_comm_t node = comm->node_group, cross = comm->cross_group;
  gc_result_t r = on_group(comm, cross, gc__mpi_allreduce(cross, send, mine, count, dtype, op, &o, NULL,
                                                          (cudaStream_t)stream));
  if (r == GC_SUCCESS)
    r = on_group(comm, node, gc_allgather_ex(mine, recv, count, o.out_dtype, node, stream, &plain));
  return r;
}

gc_result_t gc_allreduce_allgather(const void *send, void *recv, size_t sendcount, gc_dtype_t dtype, gc_op_t op,
                                   gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, allreduce_allgather_impl(send, recv, sendcount, dtype, op, comm, stream, opts));
}
