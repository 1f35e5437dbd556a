/* timing.c — gpucoll-bench's timing loop (timing.h): each rank's own time per iteration, so that
 * -a can average, take the minimum or the maximum over the ranks as nccl-tests does. */
#include "timing.h"

#include <stdio.h>
#include <time.h>

#include <cuda_runtime_api.h>

static double wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int run_iters(gcb_iter_fn fn, void *arg, void *stream, int n, char *err, size_t errlen) {
  for (int i = 0; i < n; i++) {
    gc_result_t r = fn(arg, stream);
    if (r != GC_SUCCESS) {
      if (!err[0]) snprintf(err, errlen, "iteration %d: %s", i, gc_result_name(r));
      return 1;
    }
  }
  return 0;
}

static int cuda_failed(cudaError_t e, const char *what, char *err, size_t errlen) {
  if (e == cudaSuccess) return 0;
  snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e));
  return 1;
}

static int sync_stream(gc_comm_t comm, void *stream, const char *what, char *err, size_t errlen) {
  gc_result_t r = gc_synchronize(comm, stream);
  if (r == GC_SUCCESS) return 0;
  const char *msg = gc_comm_last_error(comm);
  snprintf(err, errlen, "%s: %s", what, msg[0] ? msg : gc_result_name(r));
  return 1;
}

/* Captures `iters` iterations into *exec and launches it once untimed (the first launch uploads
 * the graph). */
static int capture(gc_comm_t comm, cudaStream_t s, gcb_iter_fn fn, void *arg, int iters,
                   cudaGraphExec_t *exec, char *err, size_t errlen) {
  cudaGraph_t g = NULL;
  if (cuda_failed(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture",
                  err, errlen))
    return 1;
  int bad = run_iters(fn, arg, s, iters, err, errlen);
  cudaError_t e = cudaStreamEndCapture(s, &g);
  if (!bad) bad = cuda_failed(e, "capture of the timed calls", err, errlen);
  if (!bad) bad = cuda_failed(cudaGraphInstantiate(exec, g, 0), "cudaGraphInstantiate", err, errlen);
  if (g) cudaGraphDestroy(g);
  if (!bad) bad = cuda_failed(cudaGraphLaunch(*exec, s), "graph warm-up launch", err, errlen);
  if (!bad) bad = sync_stream(comm, s, "graph warm-up", err, errlen);
  return bad;
}

static int time_device(gc_comm_t comm, MPI_Comm mpi, cudaStream_t s, gcb_iter_fn fn, void *arg, int iters,
                       int launches, gcb_timing_t *out, char *err, size_t errlen) {
  cudaEvent_t start = NULL, stop = NULL;
  cudaGraphExec_t exec = NULL;
  int bad = cuda_failed(cudaEventCreate(&start), "cudaEventCreate", err, errlen) ||
            cuda_failed(cudaEventCreate(&stop), "cudaEventCreate", err, errlen);
  if (!bad && launches > 0) bad = capture(comm, s, fn, arg, iters, &exec, err, errlen);
  if (!bad && MPI_Barrier(mpi) != MPI_SUCCESS) bad = snprintf(err, errlen, "MPI_Barrier failed") > 0;
  double t0 = wall_us(), t1 = t0;
  if (!bad) bad = cuda_failed(cudaEventRecord(start, s), "cudaEventRecord", err, errlen);
  for (int i = 0; !bad && i < launches; i++)
    bad = cuda_failed(cudaGraphLaunch(exec, s), "cudaGraphLaunch", err, errlen);
  if (!bad && launches == 0) bad = run_iters(fn, arg, s, iters, err, errlen);
  t1 = wall_us();
  if (!bad) bad = cuda_failed(cudaEventRecord(stop, s), "cudaEventRecord", err, errlen);
  if (!bad) bad = sync_stream(comm, s, "the timed calls", err, errlen);
  float ms = 0.0f;
  if (!bad) bad = cuda_failed(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime", err, errlen);
  const double n = (double)iters * (launches > 0 ? launches : 1);
  out->us = ms * 1e3 / n;
  out->cpu_us = (t1 - t0) / n;
  if (exec) cudaGraphExecDestroy(exec);
  if (stop) cudaEventDestroy(stop);
  if (start) cudaEventDestroy(start);
  return bad;
}

int gcb_time_calls(gc_comm_t comm, MPI_Comm mpi, void *stream, gcb_iter_fn fn, void *arg, int warmup,
                   int iters, int graph_launches, gcb_timing_t *out, char *err, size_t errlen) {
  err[0] = '\0';
  if (iters < 1) {
    snprintf(err, errlen, "gcb_time_calls: iters %d < 1", iters);
    return 1;
  }
  if (run_iters(fn, arg, stream, warmup, err, errlen)) return 1;
  if (stream && sync_stream(comm, stream, "the warm-up calls", err, errlen)) return 1;
  if (stream) return time_device(comm, mpi, stream, fn, arg, iters, graph_launches, out, err, errlen);
  if (MPI_Barrier(mpi) != MPI_SUCCESS) {
    snprintf(err, errlen, "MPI_Barrier failed");
    return 1;
  }
  const double t0 = wall_us();
  if (run_iters(fn, arg, NULL, iters, err, errlen)) return 1;
  out->us = out->cpu_us = (wall_us() - t0) / iters;
  return 0;
}
