/* exec.c — what every executor of a plan shares: the communicator's facts for the planner, the
 * kernels' arguments from a plan, the staging halves, temporaries, and the reduce-scatter by
 * writes (which the copy-engine all-reduce takes as its reduce half too). */
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_exec.h"

void gc__facts(gc_comm_t comm, gc__facts_t *f) {
  f->comm = comm;
  f->size = comm->size;
  f->local_size = comm->local_size;
  f->node_count = comm->node_count;
  f->nodes_in_blocks = comm->nodes_in_blocks;
  f->all_gpu = comm->all_gpu;
  f->p2p_ready = comm->p2p_ready;
  f->sm_count = comm->sm_count;
  f->cc_major = comm->cc_major;
  f->forced_algo = comm->forced_algo;
  f->max_blocks = comm->max_blocks;
  f->staging_bytes = comm->tp.staging_bytes;
  f->ce_inbox_fits = comm->local_size >= 2 && gc__ce_inbox_fits(comm);
  f->multimem_asked = comm->multimem_asked;
  f->multimem_ready = comm->mm.ready;
  f->multimem_why = comm->mm.why;
  f->sw = comm->sw;
  f->tuned = comm->tuned;
  f->tuned_count = comm->tuned_count;
}

gc_kargs_t gc__base_args(gc_comm_t comm, const gc__plan_t *plan, const gc_options_t *o, gc_dtype_t dtype, gc_op_t op) {
  gc_kargs_t a;
  memset(&a, 0, sizeof a);
  a.peers.rank = comm->local_rank;
  a.peers.nranks = comm->local_size;
  for (int r = 0; r < comm->local_size; r++) {
    a.peers.sig[r] = (gc_ksignals_t *)comm->tp.signals[r];
    a.peers.push[r] = (gc_kpush_t *)comm->tp.push[r];
    a.peers.ll[r] = comm->tp.ll[r];
  }
  a.peers.error = comm->tp.error_dev;
  a.peers.timeout_ns = comm->tp.timeout_ns;
  a.blocks = plan->blocks;
  a.threads = plan->threads;
  a.pdl = o->pdl > 0 ? 1 : o->pdl < 0 ? 0 : comm->pdl;
  a.dtype = dtype;
  a.op = op;
  a.ep.scale = o->scale;
  a.ep.out_dtype = o->out_dtype;
  a.ep.add = o->add;
  a.ep.add_dtype = dtype;
  /* Averages of floats are sums scaled by 1/n in the epilogue; integers divide in the kernel. */
  if (op == GC_AVG && gc__dtype_is_float(dtype)) {
    a.op = GC_SUM;
    a.ep.scale = o->scale / comm->local_size;
  }
  a.ep.apply_scale = a.ep.scale != 1.0;
  return a;
}

char *gc__staging_in(gc_comm_t comm, int r) { return comm->tp.staging[r]; }
char *gc__staging_pub(gc_comm_t comm, int r) { return comm->tp.staging[r] + gc__staging_half(comm->tp.staging_bytes); }

/* The reduce-scatter by writes of a's regions in shape s: inboxes at fixed places in the first
 * half of every rank's staging area. */
gc_result_t gc__reducescatter_bywrites(gc_comm_t comm, gc_kargs_t *a, const gc__bywrites_shape_t *s,
                                       cudaStream_t stream) {
  if (s->blocks == 0) return GC_SUCCESS; /* every part empty */
  a->blocks = s->blocks;
  a->piece = s->piece;
  a->slot_bytes = s->slot_bytes;
  a->control = s->control;
  for (int r = 0; r < comm->local_size; r++) a->in[r] = gc__staging_in(comm, r);
  return gc__launched(comm, gc_kernel_reducescatter_bywrites(a, stream), "reduce-scatter");
}

gc_result_t gc__scratch_alloc(gc_comm_t comm, int on_device, size_t bytes, cudaStream_t stream, void **p) {
  *p = NULL;
  if (on_device) GC_CUDA_CHECK(comm, cudaMallocAsync(p, bytes, stream));
  else if (!(*p = malloc(bytes))) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory for %zu bytes", bytes);
  return GC_SUCCESS;
}

gc_result_t gc__scratch_free(gc_comm_t comm, int on_device, void *p, cudaStream_t stream, gc_result_t rc) {
  if (!p) return rc;
  if (!on_device) {
    if (rc == GC_ERR_TIMEOUT) gc__park(p);
    else free(p);
    return rc;
  }
  cudaError_t e = cudaFreeAsync(p, stream);
  if (rc == GC_SUCCESS && e != cudaSuccess) return GC_FAIL(comm, GC_ERR_CUDA, "cudaFreeAsync: %s", cudaGetErrorString(e));
  return rc;
}
