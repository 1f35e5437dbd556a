/* hierarchy.c — the collectives across several nodes of L ranks each (nodes in blocks: node k
 * holds ranks kL .. kL+L-1), composed of collectives on the communicator's node group (its GPUs:
 * the peer kernels) and its cross-node group (the ranks of one local rank, one per node: MPI).
 * Between the nodes each rank moves what one rank of a flat algorithm would move for 1/L of the
 * data: the all-reduce reduce-scatters inside the node, all-reduces its shard across the nodes
 * and all-gathers inside the node again. Every rank ends with the same bits: what crosses the
 * nodes is reduced once, in node order, and gathered. */
#include <stdint.h>
#include <stdlib.h>

#include "gc_entry.h"
#include "gc_mixed.h"

static const char why[] = "a collective across nodes (its inter-node part runs on MPI)";

/* The node's sums of its shard (c elements at local_rank c) and of the tail (the last count - cL
 * elements, which every rank of the node sums whole) into part, without epilogue. */
static gc_result_t node_sums(gc_comm_t comm, const char *send, char *part, size_t c, size_t tail, gc_dtype_t dtype,
                             gc_op_t op, const gc_options_t *inside, void *stream) {
  gc_comm_t node = comm->node_group;
  const size_t es = gc_dtype_size(dtype), ps = gc_dtype_size(inside->out_dtype);
  gc_result_t r = GC_SUCCESS;
  if (c) r = gc__on_group(comm, "node", node, gc_reducescatter_ex(send, part, c, dtype, op, node, stream, inside));
  if (r == GC_SUCCESS && tail)
    r = gc__on_group(comm, "node", node, gc_allreduce_ex(send + (size_t)comm->local_size * c * es, part + c * ps, tail,
                                                        dtype, op, node, stream, inside));
  return r;
}

/* The cross-node all-reduce of `n` partials at `part` into recv (offset `at` elements), with the
 * epilogue of o over the add vector at the same offset; GC_AVG divides by comm's rank count. */
static gc_result_t across(gc_comm_t comm, const char *part, char *recv, size_t at, size_t n, gc_dtype_t dtype,
                          gc_op_t op, const gc_options_t *o, void *stream) {
  gc_options_t x = GC_OPTIONS_INIT;
  x.scale = o->scale;
  x.add = o->add ? (const char *)o->add + at * gc_dtype_size(dtype) : NULL;
  x.out_dtype = o->out_dtype;
  const gc__mpi_mix_t mix = {dtype, comm->size};
  gc_comm_t cross = comm->cross_group;
  return gc__on_group(comm, "cross", cross, gc__mpi_allreduce(cross, part, recv + at * gc_dtype_size(o->out_dtype), n,
                                                             gc__partial_dtype(dtype), op, &x, &mix, (cudaStream_t)stream));
}

gc_result_t gc__hier_allreduce(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op,
                               const gc_options_t *o, void *stream) {
  GC_CHECK(gc__groups_begin(comm, stream, GC_CALL_ALLREDUCE, count, dtype, op, o, send, why));
  const int L = comm->local_size, l = comm->local_rank;
  const size_t c = count / (size_t)L, tail = count - c * (size_t)L, os = gc_dtype_size(o->out_dtype);
  const gc_dtype_t part = gc__partial_dtype(dtype);
  gc_options_t inside = gc__without_epilogue(o, part), plain = gc__without_epilogue(o, GC_DTYPE_SAME);
  const int on_device = gc__ptr_kind(comm, send) == GC_PTR_DEVICE_OWN;
  void *tmp = NULL;
  GC_CHECK(gc__scratch_alloc(comm, on_device, (c + tail) * gc_dtype_size(part), (cudaStream_t)stream, &tmp));
  char *p = tmp, *out = recv;
  gc_result_t r = node_sums(comm, send, p, c, tail, dtype, op == GC_AVG ? GC_SUM : op, &inside, stream);
  if (r == GC_SUCCESS && c) r = across(comm, p, out, (size_t)l * c, c, dtype, op, o, stream);
  if (r == GC_SUCCESS && tail) r = across(comm, p + c * gc_dtype_size(part), out, c * (size_t)L, tail, dtype, op, o, stream);
  if (r == GC_SUCCESS && c)
    r = gc__on_group(comm, "node", comm->node_group, gc_allgather_ex(out + (size_t)l * c * os, out, c, o->out_dtype,
                                                                    comm->node_group, stream, &plain));
  return gc__scratch_free(comm, on_device, tmp, (cudaStream_t)stream, r);
}

/* Node m's parts of the input (L parts of rc from m L rc) reduced inside the node, for every node
 * m, into part (rank l of the node gets part l of each, node order); then across the nodes each
 * rank reduces its own part of those. */
gc_result_t gc__hier_reducescatter(gc_comm_t comm, const void *send, void *recv, size_t rc, gc_dtype_t dtype,
                                   gc_op_t op, const gc_options_t *o, void *stream) {
  GC_CHECK(gc__groups_begin(comm, stream, GC_CALL_REDUCESCATTER, rc, dtype, op, o, send, why));
  const int L = comm->local_size, N = comm->node_count;
  const size_t es = gc_dtype_size(dtype);
  const gc_dtype_t part = gc__partial_dtype(dtype);
  const size_t ps = gc_dtype_size(part);
  const gc_op_t inner = op == GC_AVG ? GC_SUM : op;
  gc_options_t inside = gc__without_epilogue(o, part), x = *o;
  /* GC_AVG of floats (the planner keeps integer averages flat): sums, scaled by 1 / size once */
  if (op == GC_AVG) x.scale = o->scale / comm->size;
  const int on_device = gc__ptr_kind(comm, send) == GC_PTR_DEVICE_OWN;
  size_t *counts = malloc((size_t)N * sizeof *counts);
  void *tmp = NULL;
  if (!counts) return GC_FAIL(comm, GC_ERR_SYSTEM, "gc_reducescatter: out of host memory");
  for (int m = 0; m < N; m++) counts[m] = rc;
  gc_result_t r = gc__scratch_alloc(comm, on_device, (size_t)N * rc * ps, (cudaStream_t)stream, &tmp);
  gc_comm_t node = comm->node_group, cross = comm->cross_group;
  for (int m = 0; r == GC_SUCCESS && m < N; m++)
    r = gc__on_group(comm, "node", node, gc_reducescatter_ex((const char *)send + (size_t)m * L * rc * es,
                                                            (char *)tmp + (size_t)m * rc * ps, rc, dtype, inner, node,
                                                            stream, &inside));
  if (r == GC_SUCCESS)
    r = gc__on_group(comm, "cross", cross, gc__mpi_reducescatter(cross, tmp, recv, counts, part, inner, &x,
                                                                (cudaStream_t)stream));
  free(counts);
  return gc__scratch_free(comm, on_device, tmp, (cudaStream_t)stream, r);
}

/* Across the nodes first (each rank's part from the same local rank of every node, node order),
 * then node m's parts gathered inside the node into its block of recv, for every node m. */
gc_result_t gc__hier_allgather(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                               const gc_options_t *o, void *stream) {
  GC_CHECK(gc__groups_begin(comm, stream, GC_CALL_ALLGATHER, count, dtype, GC_SUM, o, send, why));
  const int L = comm->local_size, N = comm->node_count;
  const size_t es = gc_dtype_size(dtype);
  const gc_options_t plain = gc__without_epilogue(o, GC_DTYPE_SAME);
  const int on_device = gc__ptr_kind(comm, send) == GC_PTR_DEVICE_OWN;
  void *tmp = NULL;
  GC_CHECK(gc__scratch_alloc(comm, on_device, (size_t)N * count * es, (cudaStream_t)stream, &tmp));
  gc_comm_t node = comm->node_group, cross = comm->cross_group;
  gc_result_t r = gc__on_group(comm, "cross", cross, gc_allgather_ex(send, tmp, count, dtype, cross, stream, &plain));
  for (int m = 0; r == GC_SUCCESS && m < N; m++)
    r = gc__on_group(comm, "node", node, gc_allgather_ex((const char *)tmp + (size_t)m * count * es,
                                                        (char *)recv + (size_t)m * L * count * es, count, dtype, node,
                                                        stream, &plain));
  return gc__scratch_free(comm, on_device, tmp, (cudaStream_t)stream, r);
}

/* The root's local rank on every node gets the data across the nodes, then each node's copy
 * goes out inside the node from that rank. */
gc_result_t gc__hier_broadcast(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype, int root,
                               const gc_options_t *o, void *stream) {
  GC_CHECK(gc__groups_begin(comm, stream, GC_CALL_BROADCAST, count, dtype, GC_SUM, o, recv, why));
  const int L = comm->local_size, root_node = root / L, root_local = root % L;
  const gc_options_t plain = gc__without_epilogue(o, GC_DTYPE_SAME);
  gc_comm_t node = comm->node_group, cross = comm->cross_group;
  gc_result_t r = GC_SUCCESS;
  if (comm->local_rank == root_local)
    r = gc__on_group(comm, "cross", cross, gc_broadcast_ex(comm->rank == root ? send : NULL, recv, count, dtype,
                                                          root_node, cross, stream, &plain));
  if (r == GC_SUCCESS)
    r = gc__on_group(comm, "node", node, gc_broadcast_ex(comm->local_rank == root_local ? recv : NULL, recv, count,
                                                        dtype, root_local, node, stream, &plain));
  return r;
}
