/* waits.c — bounded waits on streams, events and the device, the communicator's health (its
 * sticky error and the kernels' timeout flag), and the device switch of every public call. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "gc_internal.h"

gc_result_t gc__device_enter(gc_comm_t comm, int *prev) {
  *prev = -1;
  GC_CHECK(gc__comm_check(comm));
  if (comm->device < 0) return GC_SUCCESS;
  GC_CUDA_CHECK(comm, cudaGetDevice(prev));
  if (*prev != comm->device) GC_CUDA_CHECK(comm, cudaSetDevice(comm->device));
  return GC_SUCCESS;
}

void gc__device_leave(gc_comm_t comm, int prev) {
  if (prev >= 0 && prev != comm->device) cudaSetDevice(prev);
}

gc_result_t gc__comm_health(gc_comm_t comm) {
  if (comm->sticky != GC_SUCCESS)
    return GC_FAIL(comm, comm->sticky, "the communicator failed earlier (%s); destroy it",
                   gc_result_name(comm->sticky));
  if (comm->tp.error_host && *(volatile uint32_t *)comm->tp.error_host) {
    comm->sticky = GC_ERR_TIMEOUT;
    return GC_FAIL(comm, GC_ERR_TIMEOUT,
                   "a kernel waited more than %d ms (GC_TIMEOUT_MS) for a peer and gave up", comm->timeout_ms);
  }
  gc_comm_t groups[2] = {comm->node_group, comm->cross_group};
  for (int g = 0; g < 2; g++)
    if (groups[g] && gc__comm_health(groups[g]) != GC_SUCCESS) {
      comm->sticky = groups[g]->sticky;
      return GC_FAIL(comm, comm->sticky, "in a mixed operation's group: %s", gc__message_body(groups[g]->last_error));
    }
  return GC_SUCCESS;
}

/* The host's bound on a wait for a stream: twice the kernels' own, so a gpucoll kernel that gave
 * up on a peer (its clock starts when it starts waiting) is what gets reported. */
static double stream_wait_bound_ms(gc_comm_t comm) { return 2.0 * comm->timeout_ms; }

static double elapsed_ms(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) * 1e-6;
}

/* Polls query(handle) until it stops answering cudaErrorNotReady or bound_ms pass, and returns
 * its last answer: back to back for the first 50 ms (as a spinning cudaStreamSynchronize would;
 * gpucoll-bench -z times these waits), then with 100 us naps, 1 ms ones after a second. */
static cudaError_t poll_bounded(cudaError_t (*query)(void *), void *handle, double bound_ms) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    cudaError_t e = query(handle);
    double ms = elapsed_ms(&t0);
    if (e != cudaErrorNotReady || ms > bound_ms) return e;
    if (ms > 50) {
      struct timespec nap = {0, ms > 1000 ? 1000000L : 100000L};
      nanosleep(&nap, NULL);
    }
  }
}

static gc_result_t bounded_wait(gc_comm_t comm, cudaError_t (*query)(void *), void *handle, const char *what) {
  double bound = stream_wait_bound_ms(comm);
  cudaError_t e = poll_bounded(query, handle, bound);
  if (e == cudaSuccess) return GC_SUCCESS;
  if (e != cudaErrorNotReady)
    return GC_FAIL(comm, GC_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  GC_CHECK(gc__comm_health(comm)); /* a gpucoll kernel gave up: that is the cause */
  return GC_FAIL(comm, GC_ERR_STREAM_TIMEOUT,
                 "%s: the stream's work did not finish within %.0f ms (twice GC_TIMEOUT_MS); work enqueued "
                 "before gpucoll's (another library's kernel, say) may be stuck; the communicator stays "
                 "usable once that work ends",
                 what, bound);
}

static cudaError_t query_stream(void *s) { return cudaStreamQuery((cudaStream_t)s); }
static cudaError_t query_event(void *ev) { return cudaEventQuery((cudaEvent_t)ev); }

gc_result_t gc__stream_wait(gc_comm_t comm, void *stream, const char *what) {
  return bounded_wait(comm, query_stream, stream, what);
}

gc_result_t gc__event_wait(gc_comm_t comm, void *event, const char *what) {
  return bounded_wait(comm, query_event, event, what);
}

/* cudaDeviceSynchronize on a thread of its own, so that its caller can stop waiting: work on the
 * device that never ends (not gpucoll's) would hold the caller forever. Whichever of the two lets
 * go last frees it. */
typedef struct {
  int device;
  cudaError_t result;
  atomic_int done;
  atomic_int holders;
} device_sync_t;

static void device_sync_let_go(device_sync_t *sync) {
  if (atomic_fetch_sub(&sync->holders, 1) == 1) free(sync);
}

static void *device_sync_run(void *arg) {
  device_sync_t *sync = arg;
  cudaError_t e = cudaSetDevice(sync->device);
  sync->result = e == cudaSuccess ? cudaDeviceSynchronize() : e;
  atomic_store(&sync->done, 1);
  device_sync_let_go(sync);
  return NULL;
}

static cudaError_t query_device_sync(void *arg) {
  device_sync_t *sync = arg;
  return atomic_load(&sync->done) ? sync->result : cudaErrorNotReady;
}

/* A thread that waits for the device; 0 when none could be started. */
static device_sync_t *device_sync_start(int device) {
  device_sync_t *sync = calloc(1, sizeof *sync);
  if (!sync) return NULL;
  sync->device = device;
  atomic_init(&sync->done, 0);
  atomic_init(&sync->holders, 2);
  pthread_attr_t attr;
  pthread_t thread;
  int started = 0;
  if (pthread_attr_init(&attr) == 0) {
    started = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
              pthread_create(&thread, &attr, device_sync_run, sync) == 0;
    pthread_attr_destroy(&attr);
  }
  if (started) return sync;
  free(sync);
  return NULL;
}

gc_result_t gc__device_wait(gc_comm_t comm, const char *what) {
  cudaError_t e;
  device_sync_t *sync = device_sync_start(comm->device);
  if (sync) {
    e = poll_bounded(query_device_sync, sync, stream_wait_bound_ms(comm));
    device_sync_let_go(sync);
  } else {
    e = cudaDeviceSynchronize(); /* no thread to spare (out of memory or threads): unbounded */
  }
  if (e == cudaErrorNotReady)
    return GC_FAIL(comm, GC_ERR_STREAM_TIMEOUT,
                   "%s: work on this rank's GPU did not finish within %.0f ms (twice GC_TIMEOUT_MS); work "
                   "that is not gpucoll's (another library's kernel, say) may be stuck. Nothing was freed and "
                   "the communicator stays usable: call it again once that work ends (on every rank if it is "
                   "collective)",
                   what, stream_wait_bound_ms(comm));
  if (e != cudaSuccess)
    return GC_FAIL(comm, GC_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return GC_SUCCESS;
}

/* Before freeing what kernels of this rank or of its peers may still use: waits (bounded) until
 * this rank's device is idle, then agrees with every rank that each one's is, waiting for a late
 * one as long as its device wait could take. GC_ERR_STREAM_TIMEOUT whenever a device, this rank's
 * or a peer's, was not: the caller frees nothing and may be called again. Any other failure (a
 * peer missing) still leaves this rank's device idle, so freeing here is safe (gc_comm_destroy). */
/* How long an agreement of quiesce waits for the other ranks: bound_ms, but at most
 * GC_FAILED_GRACE_MS once the communicator has failed: the other ranks failed too (they come as
 * soon as their own bounded waits end) or are gone, so a full second timeout would only delay. */
#define GC_FAILED_GRACE_MS 500.0
static double agree_bound_ms(gc_comm_t comm, double bound_ms) {
  return comm->sticky == GC_SUCCESS || bound_ms < GC_FAILED_GRACE_MS ? bound_ms : GC_FAILED_GRACE_MS;
}

gc_result_t gc__quiesce(gc_comm_t comm, const char *what) {
  /* First that every rank came, so that a missing one is found within GC_TIMEOUT_MS. */
  int all = 1;
  gc_result_t met = gc__boot_agree(comm, &all, agree_bound_ms(comm, comm->timeout_ms), what);
  gc_result_t r = comm->device >= 0 ? gc__device_wait(comm, what) : GC_SUCCESS;
  if (met != GC_SUCCESS) return r != GC_SUCCESS ? r : met;
  all = r != GC_ERR_STREAM_TIMEOUT; /* this rank's device idle */
  gc_result_t agreed =
      gc__boot_agree(comm, &all, agree_bound_ms(comm, stream_wait_bound_ms(comm) + comm->timeout_ms), what);
  if (r != GC_SUCCESS) return r;
  if (agreed != GC_SUCCESS) return agreed;
  if (!all)
    return GC_FAIL(comm, GC_ERR_STREAM_TIMEOUT,
                   "%s: work on another rank's GPU did not finish within %.0f ms (twice GC_TIMEOUT_MS). Nothing "
                   "was freed and the communicator stays usable: call it again on every rank once that work ends",
                   what, stream_wait_bound_ms(comm));
  return GC_SUCCESS;
}
