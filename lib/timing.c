/* timing.c — gc_time: warm-up, then CUDA events around back-to-back calls or around the replay of
 * a captured graph; the figure is the slowest rank's. */
#include <time.h>

#include "gc_internal.h"

static double wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static gc_result_t run_calls(gc_timed_fn fn, void *arg, void *stream, int n) {
  for (int i = 0; i < n; i++) {
    gc_result_t r = fn(arg, stream);
    if (r != GC_SUCCESS) return r;
  }
  return GC_SUCCESS;
}

/* Host-only ranks: barrier, wall clock around the calls (each completes before it returns). */
static gc_result_t time_host(gc_comm_t comm, gc_timed_fn fn, void *arg, int iters, double *us) {
  GC_CHECK(gc__boot_barrier(comm));
  double t0 = wall_us();
  GC_CHECK(run_calls(fn, arg, NULL, iters));
  *us = (wall_us() - t0) / iters;
  return GC_SUCCESS;
}

/* The iters calls captured into a graph on s (*g, *exec: what the caller destroys, set as far as
 * they were made) and replayed once untimed: the first launch of a graph uploads it. */
static gc_result_t capture(gc_comm_t comm, gc_timed_fn fn, void *arg, cudaStream_t s, int iters, cudaGraph_t *g,
                           cudaGraphExec_t *exec) {
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return GC_FAIL(comm, GC_ERR_CUDA, "gc_time: cudaStreamBeginCapture: %s", cudaGetErrorString(e));
  gc_result_t r = run_calls(fn, arg, s, iters);
  e = cudaStreamEndCapture(s, g);
  if (r != GC_SUCCESS) return r;
  if (e != cudaSuccess) return GC_FAIL(comm, GC_ERR_CUDA, "gc_time: capture failed: %s", cudaGetErrorString(e));
  e = cudaGraphInstantiate(exec, *g, 0);
  if (e != cudaSuccess) return GC_FAIL(comm, GC_ERR_CUDA, "gc_time: cudaGraphInstantiate: %s", cudaGetErrorString(e));
  e = cudaGraphLaunch(*exec, s);
  if (e != cudaSuccess) return GC_FAIL(comm, GC_ERR_CUDA, "gc_time: graph warm-up: %s", cudaGetErrorString(e));
  GC_CHECK(gc__stream_wait(comm, s, "gc_time: graph warm-up"));
  return gc__comm_health(comm);
}

static gc_result_t time_device(gc_comm_t comm, gc_timed_fn fn, void *arg, cudaStream_t s, int iters,
                               int graph, double *us) {
  cudaEvent_t start = NULL, stop = NULL;
  cudaGraph_t g = NULL;
  cudaGraphExec_t exec = NULL;
  gc_result_t r = GC_SUCCESS;
  cudaError_t e = cudaEventCreate(&start);
  if (e == cudaSuccess) e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    r = GC_FAIL(comm, GC_ERR_CUDA, "gc_time: cudaEventCreate: %s", cudaGetErrorString(e));
    goto destroy_events;
  }
  if (graph && (r = capture(comm, fn, arg, s, iters, &g, &exec)) != GC_SUCCESS) goto destroy_graph;
  /* Line the ranks up so the slowest rank's figure is not inflated by a late start. */
  if ((r = gc__boot_barrier(comm)) != GC_SUCCESS) goto destroy_graph;
  e = cudaEventRecord(start, s);
  if (e == cudaSuccess) {
    if (graph) e = cudaGraphLaunch(exec, s);
    else r = run_calls(fn, arg, s, iters);
  }
  if (e == cudaSuccess && r == GC_SUCCESS) e = cudaEventRecord(stop, s);
  if (r != GC_SUCCESS) goto destroy_graph;
  if (e != cudaSuccess) {
    r = GC_FAIL(comm, GC_ERR_CUDA, "gc_time: timed run: %s", cudaGetErrorString(e));
    goto destroy_graph;
  }
  if ((r = gc__event_wait(comm, stop, "gc_time: timed run")) != GC_SUCCESS) goto destroy_graph;
  if ((r = gc__comm_health(comm)) != GC_SUCCESS) goto destroy_graph;
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  *us = ms * 1e3 / iters;
destroy_graph:
  if (exec) cudaGraphExecDestroy(exec);
  if (g) cudaGraphDestroy(g);
destroy_events:
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  return r;
}

static gc_result_t time_impl(gc_comm_t comm, gc_timed_fn fn, void *arg, void *stream, int warmup, int iters,
                    int graph, double *us_per_call) {
  GC_CHECK(gc__comm_check(comm));
  if (!fn || !us_per_call || iters <= 0 || warmup < 0)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_time: need fn, us_per_call, iters > 0, warmup >= 0");
  if (graph && comm->device < 0)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "gc_time: graph replay needs a GPU; this rank has none");
  cudaStream_t s = (cudaStream_t)stream;
  if (comm->device >= 0 && s == NULL) s = comm->stream; /* legacy stream cannot be captured */
  GC_CHECK(run_calls(fn, arg, comm->device >= 0 ? (void *)s : NULL, warmup));
  if (comm->device >= 0) GC_CHECK(gc__stream_wait(comm, s, "gc_time: warm-up"));
  double us = 0;
  if (comm->device >= 0) GC_CHECK(time_device(comm, fn, arg, s, iters, graph, &us));
  else GC_CHECK(time_host(comm, fn, arg, iters, &us));
  GC_CHECK(gc__boot_max_double(comm, &us));
  *us_per_call = us;
  return GC_SUCCESS;
}

gc_result_t gc_time(gc_comm_t comm, gc_timed_fn fn, void *arg, void *stream, int warmup, int iters,
                    int graph, double *us_per_call) {
  GC_ON_DEVICE(comm, time_impl(comm, fn, arg, stream, warmup, iters, graph, us_per_call));
}
