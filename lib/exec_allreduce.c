/* exec_allreduce.c — runs an all-reduce plan on the peers' GPUs (or one rank's). */
#include <stdint.h>

#include "gc_exec.h"
#include "gc_wire.h"

/* One rank: a copy (cudaMemcpyAsync, or the SMs for large ones: plan blocks), or the one-shot
 * kernel through the epilogue reading the input where it is (no peer reads it). */
gc_result_t gc__run_solo(gc_comm_t comm, const gc__plan_t *p, const void *send, void *recv, size_t count,
                         gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, size_t bytes, cudaStream_t stream) {
  if (p->form == GC_FORM_SOLO_COPY) {
    if (recv == send) return GC_SUCCESS;
    if (p->blocks == 0) {
      GC_CUDA_CHECK(comm, cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, stream));
      return GC_SUCCESS;
    }
    return gc__launched(comm, gc_kernel_copy(recv, send, bytes, p->blocks, stream), "copy");
  }
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
  a.in[0] = send;
  a.recv = recv;
  a.count = count;
  return gc__launched(comm, gc_kernel_allreduce(&a, GC_KALGO_ONESHOT, stream), "all-reduce");
}

/* By copies, the elements past the last whole 16 n (fewer than 16 n) take the push one-shot. */
static gc_result_t ce_copies(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send, void *recv,
                             size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, cudaStream_t stream) {
  const size_t n = (size_t)comm->local_size, es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype);
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
  GC_CHECK(gc__ce_allreduce_copies(comm, &a, send, b->out, count, es, o->add, p->ce_chunks, stream));
  const size_t body = count / (16 * n) * (16 * n);
  if (body == count) return GC_SUCCESS;
  a.send = (const char *)send + body * es;
  a.recv = (char *)recv + body * os;
  a.count = count - body;
  a.ep.add = o->add ? (const char *)o->add + body * es : NULL;
  return gc__launched(comm, gc_kernel_allreduce(&a, GC_KALGO_ONESHOT_WRITES, stream), "all-reduce");
}

/* By reads, an input peers cannot read is copied into the output first, over an add vector that
 * is the output (a residual added in place): that goes aside first. Only this rank knows whether
 * its add vector is its output, so it changes no part of the plan, which every rank shares. */
static gc_result_t ce_reduce(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, int sym_in, const void *send,
                             void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *o,
                             cudaStream_t stream) {
  const size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype), bytes = count * es;
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
  const void *add = o->add;
  void *aside = NULL;
  if (p->ce_form == GC_CE_AR_READS && !sym_in && add != NULL && add == recv) {
    GC_CHECK(gc__scratch_alloc(comm, 1, bytes, stream, &aside));
    cudaError_t e = cudaMemcpyAsync(aside, add, bytes, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess)
      return gc__scratch_free(comm, 1, aside, stream,
                              GC_FAIL(comm, GC_ERR_CUDA, "setting the add vector aside: %s", cudaGetErrorString(e)));
    add = aside;
  }
  gc_result_t r = gc__ce_allreduce(comm, &a, sym_in ? (void *const *)b->in : NULL, send, b->out, count, es, os, add,
                                   p->ce_form == GC_CE_AR_WRITES, stream);
  return gc__scratch_free(comm, 1, aside, stream, r);
}

static gc_result_t twoshot_writes(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send,
                                  void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *o,
                                  cudaStream_t stream) {
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
  for (int r = 0; r < comm->local_size; r++) {
    a.in[r] = gc__staging_in(comm, r);
    a.pub[r] = p->out_sym ? b->out[r] : gc__staging_pub(comm, r);
  }
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.chunk = p->chunk;
  return gc__launched(comm, gc_kernel_allreduce(&a, GC_KALGO_TWOSHOT_WRITES, stream), "all-reduce");
}

/* Chunk by chunk: peers read the input in place, or this rank's chunk copied into staging. */
static gc_result_t reads(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send, void *recv,
                         size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, cudaStream_t stream) {
  const size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype);
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
  for (size_t c0 = 0; c0 < count; c0 += p->chunk) {
    const size_t cn = count - c0 < p->chunk ? count - c0 : p->chunk;
    for (int r = 0; r < comm->local_size; r++) {
      a.in[r] = p->in_zero ? (const char *)b->in[r] + c0 * es : gc__staging_in(comm, r);
      a.pub[r] = p->out_sym ? (char *)b->out[r] + c0 * os : gc__staging_pub(comm, r);
    }
    if (!p->in_zero)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a.in[comm->local_rank], (const char *)send + c0 * es, cn * es,
                                          cudaMemcpyDeviceToDevice, stream));
    a.recv = (char *)recv + c0 * os;
    a.count = cn;
    a.ep.add = o->add ? (const char *)o->add + c0 * es : NULL;
    GC_CHECK(gc__launched(comm, gc_kernel_allreduce(&a, (gc_kalgo_t)p->kernel, stream), "all-reduce"));
  }
  return GC_SUCCESS;
}

/* The LL, push and multicast kernels take any pointers: no copy-in. */
static gc_result_t direct(gc_comm_t comm, const gc__plan_t *p, const void *send, void *recv, size_t count,
                          gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, cudaStream_t stream) {
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
  if (p->form == GC_FORM_MULTIMEM) return gc__multimem_allreduce(comm, &a, send, recv, count, stream);
  a.send = send;
  a.recv = recv;
  a.count = count;
  if (p->form == GC_FORM_LL) return gc__launched(comm, gc_kernel_reduce_ll(&a, 0, stream), "all-reduce");
  return gc__launched(comm, gc_kernel_allreduce(&a, GC_KALGO_ONESHOT_WRITES, stream), "all-reduce");
}

/* Over a compressed wire, round by round of p->chunk elements (whole groups), through the
 * staging inputs: every rank packs its round into its own staging input, then the wire kernel
 * reads every rank's there (one-shot or two-shot: the same bits). The kernel ends with a barrier
 * after the last read of every peer's staging, so the next round's pack may overwrite it. */
static gc_result_t wire_rounds(gc_comm_t comm, const gc__plan_t *p, const void *send, void *recv, size_t count,
                               gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, cudaStream_t stream) {
  const size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype);
  const gc_kwire_t w = {p->wire, p->wire_group};
  gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
  for (int r = 0; r < comm->local_size; r++) a.pub[r] = gc__staging_in(comm, r);
  for (size_t c0 = 0; c0 < count; c0 += p->chunk) {
    const size_t cn = count - c0 < p->chunk ? count - c0 : p->chunk;
    GC_CHECK(gc__launched(comm, gc_kernel_wire_pack((const char *)send + c0 * es, cn, dtype, &w, a.pub[comm->local_rank],
                                                    p->blocks, stream), "wire pack"));
    a.recv = (char *)recv + c0 * os;
    a.count = cn;
    a.ep.add = o->add ? (const char *)o->add + c0 * es : NULL;
    GC_CHECK(gc__launched(comm, gc_kernel_wire_allreduce(&a, &w, p->kernel == GC_KALGO_TWOSHOT, stream), "wire all-reduce"));
  }
  return GC_SUCCESS;
}

gc_result_t gc__run_allreduce(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send, void *recv,
                              size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, cudaStream_t stream) {
  const size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype);
  switch (p->form) {
    case GC_FORM_SOLO_COPY:
    case GC_FORM_SOLO_EPILOGUE: return gc__run_solo(comm, p, send, recv, count, dtype, op, o, count * es, stream);
    case GC_FORM_LL:
    case GC_FORM_MULTIMEM:
    case GC_FORM_PUSH: return direct(comm, p, send, recv, count, dtype, op, o, stream);
    case GC_FORM_CE_STAGED: {
      gc_kargs_t a = gc__base_args(comm, p, o, dtype, op);
      return gc__ce_allreduce_staged(comm, &a, send, recv, count, es, os, o->add, p->by_copies, stream);
    }
    case GC_FORM_CE_COPIES: return ce_copies(comm, p, b, send, recv, count, dtype, op, o, stream);
    case GC_FORM_CE:
      return ce_reduce(comm, p, b, b->sym_in, send, recv, count, dtype, op, o, stream);
    case GC_FORM_TWOSHOT_WRITES: return twoshot_writes(comm, p, b, send, recv, count, dtype, op, o, stream);
    case GC_FORM_READS: return reads(comm, p, b, send, recv, count, dtype, op, o, stream);
    case GC_FORM_WIRE: return wire_rounds(comm, p, send, recv, count, dtype, op, o, stream);
    default: return GC_FAIL(comm, GC_ERR_INTERNAL, "all-reduce: no executor for plan form %d", (int)p->form);
  }
}
