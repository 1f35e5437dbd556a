/* timing.h — nccl-tests' timing loop for gpucoll-bench: warm-up, then CUDA events around
 * back-to-back iterations or around graph launches; each rank's own figure (the caller combines
 * them as -a asks). */
#ifndef GCB_TIMING_H
#define GCB_TIMING_H

#include <stddef.h>

#include <mpi.h>

#include "gpucoll.h"

/* One timed iteration (nccl-tests' -m calls) on `stream`; 0 or a failure with its message kept by
 * the caller. */
typedef gc_result_t (*gcb_iter_fn)(void *arg, void *stream);

typedef struct gcb_timing {
  double us;     /* per iteration, this rank: GPU time between events, or wall time on host ranks */
  double cpu_us; /* per iteration, this rank: host time to enqueue (nccl-tests' -C) */
} gcb_timing_t;

/* Runs `warmup` iterations, lines the ranks up (MPI_Barrier on `mpi`), then times `iters`
 * iterations: with graph_launches > 0 a CUDA graph capturing the iters iterations is launched
 * that many times (the figure is per iteration). stream NULL: host-only, the wall clock, no
 * graph. The waits are gc_synchronize's (bounded by GC_TIMEOUT_MS). Returns 0, or nonzero with
 * a message in err. */
int gcb_time_calls(gc_comm_t comm, MPI_Comm mpi, void *stream, gcb_iter_fn fn, void *arg, int warmup,
                   int iters, int graph_launches, gcb_timing_t *out, char *err, size_t errlen);

#endif /* GCB_TIMING_H */
