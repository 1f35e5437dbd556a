/* gc_exec.h — the execution layer's shared pieces: facts for the planner, kernel arguments from a
 * plan, staging, temporaries, and the executors that run a plan (exec_*.c). */
#ifndef GC_EXEC_H
#define GC_EXEC_H

#include "gc_internal.h"
#include "gc_plan.h"
#include "kernels.h"

/* A call's buffers as peers see them: in[r], out[r] the input's and output's mapping on local
 * rank r where they sit in gc_mem_alloc buffers (gc__symmetric_lookup). */
typedef struct gc__bufs {
  int sym_in, sym_out; /* in[], out[] hold the mappings */
  void *in[GC_MAX_LOCAL_RANKS], *out[GC_MAX_LOCAL_RANKS];
} gc__bufs_t;

/* One rank's plan (GC_FORM_SOLO_*): a copy of `bytes`, or count elements through the epilogue. */
GC_HIDDEN gc_result_t gc__run_solo(gc_comm_t comm, const gc__plan_t *p, const void *send, void *recv, size_t count,
                                   gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, size_t bytes,
                                   cudaStream_t stream);

GC_HIDDEN void gc__facts(gc_comm_t comm, gc__facts_t *f);
GC_HIDDEN gc_kargs_t gc__base_args(gc_comm_t comm, const gc__plan_t *plan, const gc_options_t *o, gc_dtype_t dtype,
                                   gc_op_t op);
GC_HIDDEN char *gc__staging_in(gc_comm_t comm, int r);
GC_HIDDEN char *gc__staging_pub(gc_comm_t comm, int r);
/* The reduce-scatter by writes; a: regions, send, recv and epilogue set. */
GC_HIDDEN gc_result_t gc__reducescatter_bywrites(gc_comm_t comm, gc_kargs_t *a, const gc__bywrites_shape_t *s,
                                                 cudaStream_t stream);
/* A temporary of `bytes` where the operands are: stream-ordered device memory, or host memory;
 * gc__scratch_free returns rc, or the failure to free after a success (p NULL: nothing). After a
 * timed-out wait (rc GC_ERR_TIMEOUT) host memory is kept (gc__park): the wait leaves its MPI
 * request behind (gc__boot_wait), which reads or writes the temporary where it is once a late
 * peer comes. Device memory is read by copies on the stream, which cudaFreeAsync follows. */
GC_HIDDEN gc_result_t gc__scratch_alloc(gc_comm_t comm, int on_device, size_t bytes, cudaStream_t stream, void **p);
GC_HIDDEN gc_result_t gc__scratch_free(gc_comm_t comm, int on_device, void *p, cudaStream_t stream, gc_result_t rc);

/* Reduce-scatter parts: axis 0 (and 1-D) parts are contiguous (off, len per rank); axis 1 parts
 * are column blocks of a rows x cols matrix. */
typedef struct gc__split {
  int axis;
  size_t rows, cols; /* axis 0: rows = 1, cols = all elements */
  size_t *off, *len; /* one per rank of the communicator */
} gc__split_t;

/* The executors: each runs its collective's plan (path GC_PATH_PEERS or GC_PATH_SOLO). */
GC_HIDDEN gc_result_t gc__run_allreduce(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send,
                                        void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *o,
                                        cudaStream_t stream);
GC_HIDDEN gc_result_t gc__run_reducescatter(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send,
                                            void *recv, const gc__split_t *sp, gc_dtype_t dtype, gc_op_t op,
                                            const gc_options_t *o, cudaStream_t stream);
GC_HIDDEN gc_result_t gc__run_allgather(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send,
                                        void *recv, size_t count, gc_dtype_t dtype, const gc_options_t *o,
                                        cudaStream_t stream);
GC_HIDDEN gc_result_t gc__run_broadcast(gc_comm_t comm, const gc__plan_t *p, const gc__bufs_t *b, const void *send,
                                        void *recv, size_t count, gc_dtype_t dtype, int root, const gc_options_t *o,
                                        cudaStream_t stream);

#endif /* GC_EXEC_H */
