/* exec_gather.c — runs all-gather and broadcast plans on the peers' GPUs. */
#include "gc_exec.h"

/* Chunk by chunk: peers read every part in place, or this rank's chunk copied into staging. */
static gc_result_t allgather_reads(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, gc_kargs_t *a,
                                   const void *send, void *recv, size_t count, size_t es, cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  for (size_t c0 = 0; c0 < count; c0 += p->chunk) {
    const size_t cn = count - c0 < p->chunk ? count - c0 : p->chunk;
    for (int r = 0; r < n; r++) {
      a->in[r] = p->in_zero ? (const char *)b->in[r] + c0 * es : gc__staging_in(comm, r);
      a->region[r] = (gc_kregion_t){1, cn, 0, 0, r * count + c0};
    }
    if (!p->in_zero)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a->in[me], (const char *)send + c0 * es, cn * es,
                                          cudaMemcpyDeviceToDevice, stream));
    a->recv = recv;
    a->count = cn;
    GC_CHECK(gc__launched(comm, gc_kernel_allgather(a, stream), "all-gather"));
  }
  return GC_SUCCESS;
}

gc_result_t gc__run_allgather(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send, void *recv,
                              size_t count, gc_dtype_t dtype, const gc_options_t *o, cudaStream_t stream) {
  const int n = comm->local_size;
  const size_t es = gc_dtype_size(dtype);
  if (p->path == GC_PATH_SOLO) return gc__run_solo(comm, p, send, recv, count, dtype, GC_SUM, o, count * es, stream);
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, GC_SUM);
  a.send = send;
  a.recv = recv;
  a.count = count;
  switch (p->form) {
    case GC_FORM_LL: return gc__launched(comm, gc_kernel_allgather_ll(&a, stream), "all-gather");
    case GC_FORM_RING_STAGED: /* every rank's part along the ring, each piece through the others' staging */
      a.piece = p->piece;
      a.slot_bytes = p->slot_bytes;
      a.control = p->control;
      for (int r = 0; r < n; r++) a.in[r] = gc__staging_in(comm, r);
      return gc__launched(comm, gc_kernel_allgather_staged(&a, stream), "all-gather");
    case GC_FORM_CE_STAGED: {
      size_t off[GC_MAX_LOCAL_RANKS], len[GC_MAX_LOCAL_RANKS];
      for (int r = 0; r < n; r++) {
        off[r] = r * count * es;
        len[r] = count * es;
      }
      return gc__ce_gather_staged(comm, &a.peers, (1u << n) - 1, send, recv, off, len, stream);
    }
    case GC_FORM_CE: return gc__ce_allgather(comm, &a.peers, send, b->out, count * es, stream);
    case GC_FORM_PUSH: return gc__launched(comm, gc_kernel_push_gather(&a, 0, stream), "all-gather");
    case GC_FORM_READS: return allgather_reads(comm, p, b, &a, send, recv, count, es, stream);
    default: return GC_FAIL(comm, GC_ERR_INTERNAL, "all-gather: no executor for plan form %d", (int)p->form);
  }
}

/* More than one LL generation goes as one LL broadcast per generation-sized chunk. */
static gc_result_t broadcast_ll(gc_comm_t comm, const gc__plan_t *p, gc_kargs_t *a, const void *send, void *recv,
                                size_t count, size_t es, int root, cudaStream_t stream) {
  const size_t chunk = GC_LL_GEN_BYTES / es;
  for (size_t c0 = 0; c0 < count; c0 += chunk) {
    a->send = comm->local_rank == root ? (const char *)send + c0 * es : NULL;
    a->recv = (char *)recv + c0 * es;
    a->count = count - c0 < chunk ? count - c0 : chunk;
    GC_CHECK(gc__launched(comm, gc_kernel_broadcast_ll(a, p->ring, stream), "broadcast"));
  }
  return GC_SUCCESS;
}

/* Zero-copy into a gc_mem_alloc recv (root first puts its send there), else through staging. */
static gc_result_t broadcast_reads(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, gc_kargs_t *a,
                                   const void *send, void *recv, size_t count, size_t es, int root,
                                   cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  a->send = NULL;
  if (p->in_zero && me == root && send != recv)
    GC_CUDA_CHECK(comm, cudaMemcpyAsync(recv, send, count * es, cudaMemcpyDeviceToDevice, stream));
  for (size_t c0 = 0; c0 < count; c0 += p->chunk) {
    const size_t cn = count - c0 < p->chunk ? count - c0 : p->chunk;
    for (int r = 0; r < n; r++) {
      a->in[r] = p->in_zero ? (const char *)b->out[r] + c0 * es : gc__staging_in(comm, r);
      a->pub[r] = p->in_zero ? (char *)b->out[r] + c0 * es : gc__staging_pub(comm, r);
    }
    if (!p->in_zero && me == root)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a->in[me], (const char *)send + c0 * es, cn * es,
                                          cudaMemcpyDeviceToDevice, stream));
    a->recv = (char *)recv + c0 * es;
    a->count = cn;
    GC_CHECK(gc__launched(comm, gc_kernel_broadcast(a, p->kernel == GC_KALGO_ONESHOT, stream), "broadcast"));
  }
  return GC_SUCCESS;
}

gc_result_t gc__run_broadcast(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send, void *recv,
                              size_t count, gc_dtype_t dtype, int root, const gc_options_t *o, cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  const size_t es = gc_dtype_size(dtype);
  if (p->path == GC_PATH_SOLO) return gc__run_solo(comm, p, send, recv, count, dtype, GC_SUM, o, count * es, stream);
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, GC_SUM);
  a.root = root;
  a.send = me == root ? send : NULL;
  a.recv = recv;
  a.count = count;
  switch (p->form) {
    case GC_FORM_LL: return broadcast_ll(comm, p, &a, send, recv, count, es, root, stream);
    case GC_FORM_CE_STAGED: {
      size_t off[GC_MAX_LOCAL_RANKS] = {0}, len[GC_MAX_LOCAL_RANKS] = {0};
      len[root] = count * es;
      return gc__ce_gather_staged(comm, &a.peers, 1u << root, me == root ? send : NULL, recv, off, len, stream);
    }
    case GC_FORM_CE: return gc__ce_broadcast(comm, &a.peers, send, b->out, count * es, root, stream);
    case GC_FORM_RING_STAGED: /* root's pieces along the ring through each rank's staging */
      a.piece = p->piece;
      a.slot_bytes = p->slot_bytes;
      a.control = p->control;
      for (int r = 0; r < n; r++) a.in[r] = gc__staging_in(comm, r);
      return gc__launched(comm, gc_kernel_broadcast_staged(&a, stream), "broadcast");
    case GC_FORM_BCAST_WRITES:
      for (int r = 0; r < n; r++) a.pub[r] = b->out[r];
      a.piece = p->piece;
      a.ring = p->ring;
      return gc__launched(comm, gc_kernel_broadcast_push(&a, stream), "broadcast");
    case GC_FORM_PUSH: /* root pushes into every push area, one barrier, everyone copies out */
      a.send = send;
      return gc__launched(comm, gc_kernel_push_gather(&a, 1, stream), "broadcast");
    case GC_FORM_READS: return broadcast_reads(comm, p, b, &a, send, recv, count, es, root, stream);
    default: return GC_FAIL(comm, GC_ERR_INTERNAL, "broadcast: no executor for plan form %d", (int)p->form);
  }
}
