/* exec_reducescatter.c — runs a reduce-scatter plan on the peers' GPUs: every rank reduces its
 * own part of all inputs. */
#include "gc_exec.h"

/* Axis 1: chunks of whole rows, each row block copied into staging unless peers read it in place. */
static gc_result_t columns(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, gc_kargs_t *a, const void *send,
                           void *recv, const gc__split_t *sp, size_t es, size_t os, const gc_options_t *o,
                           cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  for (size_t i0 = 0; i0 < sp->rows; i0 += p->chunk) {
    const size_t rn = sp->rows - i0 < p->chunk ? sp->rows - i0 : p->chunk;
    for (int r = 0; r < n; r++) {
      a->in[r] = p->in_zero ? (const char *)b->in[r] + i0 * sp->cols * es : gc__staging_in(comm, r);
      a->region[r] = (gc_kregion_t){rn, sp->len[r], sp->off[r], sp->cols, 0};
    }
    if (!p->in_zero)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a->in[me], (const char *)send + i0 * sp->cols * es,
                                          rn * sp->cols * es, cudaMemcpyDeviceToDevice, stream));
    a->recv = (char *)recv + i0 * sp->len[me] * os;
    a->ep.add = o->add ? (const char *)o->add + i0 * sp->len[me] * es : NULL;
    GC_CHECK(gc__launched(comm, gc_kernel_reducescatter(a, stream), "reduce-scatter"));
  }
  return GC_SUCCESS;
}

/* Axis 0 / 1-D: every rank's part chunked in step; each chunk copies n pieces into staging
 * (each piece 16-byte aligned there) unless peers read the input in place. */
static gc_result_t rows(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, gc_kargs_t *a, const void *send,
                        void *recv, const gc__split_t *sp, size_t es, size_t os, const gc_options_t *o,
                        cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  size_t maxlen = 0;
  for (int r = 0; r < n; r++) maxlen = sp->len[r] > maxlen ? sp->len[r] : maxlen;
  for (size_t c0 = 0; c0 < maxlen; c0 += p->chunk) {
    size_t pos = 0;
    for (int r = 0; r < n; r++) {
      size_t w = sp->len[r] > c0 ? sp->len[r] - c0 : 0;
      if (w > p->chunk) w = p->chunk;
      if (p->in_zero) {
        a->in[r] = b->in[r];
        a->region[r] = (gc_kregion_t){1, w, sp->off[r] + c0, 0, 0};
        continue;
      }
      a->in[r] = gc__staging_in(comm, r);
      a->region[r] = (gc_kregion_t){1, w, pos, 0, 0};
      if (w)
        GC_CUDA_CHECK(comm, cudaMemcpyAsync(gc__staging_in(comm, me) + pos * es, (const char *)send + (sp->off[r] + c0) * es,
                                            w * es, cudaMemcpyDeviceToDevice, stream));
      pos += (w + 15) & ~(size_t)15;
    }
    a->recv = (char *)recv + c0 * os;
    a->ep.add = o->add ? (const char *)o->add + c0 * es : NULL;
    GC_CHECK(gc__launched(comm, gc_kernel_reducescatter(a, stream), "reduce-scatter"));
  }
  return GC_SUCCESS;
}

gc_result_t gc__run_reducescatter(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send,
                                  void *recv, const gc__split_t *sp, gc_dtype_t dtype, gc_op_t op,
                                  const gc_options_t *o, cudaStream_t stream) {
  const int n = comm->local_size;
  const size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype), total = sp->rows * sp->cols;
  if (p->path == GC_PATH_SOLO) return gc__run_solo(comm, p, send, recv, total, dtype, op, o, total * es, stream);
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
  /* contiguous parts as the LL, by-writes and push kernels take them, straight from send into recv */
  for (int r = 0; r < n; r++) a.region[r] = (gc_kregion_t){1, sp->len[r], sp->off[r], 0, 0};
  a.send = send;
  a.recv = recv;
  switch (p->form) {
    case GC_FORM_LL: return gc__launched(comm, gc_kernel_reduce_ll(&a, 1, stream), "reduce-scatter");
    case GC_FORM_RS_WRITES: {
      const gc__bywrites_shape_t s = {p->blocks, p->piece, p->slot_bytes, p->control};
      return gc__reducescatter_bywrites(comm, &a, &s, stream);
    }
    case GC_FORM_CE: return gc__ce_reducescatter(comm, &a, send, recv, sp->off, sp->len, es, os, o->add, stream);
    case GC_FORM_PUSH: return gc__launched(comm, gc_kernel_push_reducescatter(&a, stream), "reduce-scatter");
    case GC_FORM_MULTIMEM: return gc__multimem_reducescatter(comm, &a, send, recv, sp->off, sp->len, stream);
    case GC_FORM_READS:
      if (sp->axis == 1) return columns(comm, p, b, &a, send, recv, sp, es, os, o, stream);
      return rows(comm, p, b, &a, send, recv, sp, es, os, o, stream);
    default: return GC_FAIL(comm, GC_ERR_INTERNAL, "reduce-scatter: no executor for plan form %d", (int)p->form);
  }
}
