/* nccl_loader.h — NCCL loaded at run time (dlopen), so gpucoll-bench and gpucoll-lua can time it
 * beside gpucoll on the same buffers without a link-time dependency. The one place NCCL is used. */
#ifndef GC_NCCL_LOADER_H
#define GC_NCCL_LOADER_H

#include <stddef.h>

#include <mpi.h>

#include "gpucoll.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gcb_nccl gcb_nccl_t;

typedef enum gcb_coll {
  GCB_ALLREDUCE,
  GCB_REDUCESCATTER,
  GCB_ALLGATHER,
  GCB_BROADCAST,
  GCB_NUM_COLLS
} gcb_coll_t;

/* Collective over `comm`: loads libnccl (GC_NCCL_LIBRARY, else libnccl.so.2), makes a unique id on
 * rank 0, broadcasts it and initialises an NCCL communicator on `device`. NVLink multicast stays
 * off: NCCL_NVLS_ENABLE is set to 0 where unset, and any other value is refused. Returns 0 and
 * *out on success; else nonzero with a message in err (NCCL absent, no GPU, ...) — on every rank
 * alike. */
int gcb_nccl_open(gcb_nccl_t **out, MPI_Comm comm, int device, char *err, size_t errlen);

/* 0 when this NCCL runs `coll` on `dtype` with `op` (op only for the reductions); else nonzero
 * with a message in err. The same on every rank of one NCCL version. */
int gcb_nccl_supports(const gcb_nccl_t *nccl, gcb_coll_t coll, gc_dtype_t dtype, gc_op_t op, char *err,
                      size_t errlen);

/* Enqueues one collective with gpucoll's argument meaning (count = recvcount for reduce-scatter,
 * sendcount for all-gather; root only for broadcast). Returns 0, or nonzero with a message. */
int gcb_nccl_run(gcb_nccl_t *nccl, gcb_coll_t coll, const void *send, void *recv, size_t count,
                 gc_dtype_t dtype, gc_op_t op, int root, void *stream, char *err, size_t errlen);

/* 1 with a message in err when NCCL reports an asynchronous error on this rank's communicator
 * (ncclCommGetAsyncError; its kernels may then never finish); else 0, also where the NCCL is too
 * old to tell. Safe to call from a thread other than the one enqueueing calls. */
int gcb_nccl_async_error(const gcb_nccl_t *nccl, char *err, size_t errlen);

/* Ends this rank's NCCL communicator at once (ncclCommAbort), kernels in flight included: the way
 * out when they wait for peers that never come. Later calls fail, naming `why`; gcb_nccl_close
 * still frees the handle. Returns 0, or nonzero with a message (an NCCL before 2.4 has no abort:
 * nothing is done). Only from the thread that enqueues calls, between calls. */
int gcb_nccl_abort(gcb_nccl_t *nccl, const char *why, char *err, size_t errlen);

/* 1 once gcb_nccl_abort ended the communicator. */
int gcb_nccl_aborted(const gcb_nccl_t *nccl);

/* "2.28.9" */
const char *gcb_nccl_version(const gcb_nccl_t *nccl);
/* NCCL_VERSION_CODE of the loaded library: 22809 for 2.28.9. */
int gcb_nccl_version_code(const gcb_nccl_t *nccl);

/* How NCCL's buffers are prepared, nccl-tests' -R: plain cudaMalloc buffers (0), ncclMemAlloc
 * buffers registered with ncclCommRegister (1: NCCL's local registration wants ncclMemAlloc's
 * memory), ncclMemAlloc buffers registered as symmetric windows with
 * ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC) (2). */
typedef enum gcb_nccl_mode {
  GCB_NCCL_PLAIN,
  GCB_NCCL_REGISTERED,
  GCB_NCCL_SYMMETRIC,
  GCB_NCCL_NUM_MODES
} gcb_nccl_mode_t;

/* The oldest NCCL whose symmetric kernels have no known small-message defect (2.28.7). */
#define GCB_NCCL_SYMMETRIC_GOOD 22807

/* 0 when this NCCL has what `mode` needs (its functions, found by the loader); else nonzero with
 * a one-line reason in err. The same on every rank of one NCCL version. */
int gcb_nccl_mode_available(const gcb_nccl_t *nccl, gcb_nccl_mode_t mode, char *err, size_t errlen);

/* A buffer of `bytes` for `mode`: cudaMalloc for plain, ncclMemAlloc for the others. Local. Returns 0 and *out, or nonzero with a message. */
int gcb_nccl_buffer_alloc(gcb_nccl_t *nccl, gcb_nccl_mode_t mode, size_t bytes, void **out, char *err,
                          size_t errlen);
/* Frees what gcb_nccl_buffer_alloc returned for the same mode (NULL: nothing). */
int gcb_nccl_buffer_free(gcb_nccl_t *nccl, gcb_nccl_mode_t mode, void *buf, char *err, size_t errlen);

/* Registers buf[0..bytes) for `mode` (plain: nothing, *handle = NULL): ncclCommRegister, or
 * ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC, which is collective: every rank calls it in
 * the same order with the same size. Returns 0 and *handle, or nonzero with a message. */
int gcb_nccl_register(gcb_nccl_t *nccl, gcb_nccl_mode_t mode, void *buf, size_t bytes, void **handle,
                      char *err, size_t errlen);
/* Undoes gcb_nccl_register (collective for symmetric windows); a NULL handle is nothing. */
int gcb_nccl_deregister(gcb_nccl_t *nccl, gcb_nccl_mode_t mode, void *handle, char *err, size_t errlen);

/* ncclGroupStart / ncclGroupEnd: the calls between them are one NCCL launch (nccl-tests' -m). */
int gcb_nccl_group_start(gcb_nccl_t *nccl, char *err, size_t errlen);
int gcb_nccl_group_end(gcb_nccl_t *nccl, char *err, size_t errlen);

void gcb_nccl_close(gcb_nccl_t *nccl);

#ifdef __cplusplus
}
#endif

#endif /* GC_NCCL_LOADER_H */
