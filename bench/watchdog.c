/* watchdog.c — see watchdog.h. One thread per rank; it makes no MPI calls. When it fires it prints
 * why on stderr and ends the process with _exit: the main thread is then blocked in a CUDA or NCCL
 * wait that may never return, and mpirun ends the job's other ranks once one exits nonzero. */
#define _GNU_SOURCE
#include "watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How often NCCL is asked for an asynchronous error while one of its steps runs. */
#define POLL_NS 100000000L
/* The exit status of a step that ran past -T, as timeout(1) reports one. */
#define EXIT_TIMEOUT 124

struct gcb_watchdog {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  int rank;
  double timeout_s;
  /* Under lock: */
  const gcb_nccl_t *nccl[GCB_WATCHDOG_MAX_NCCL];
  int n_nccl;
  int stop, armed, uses_nccl;
  struct timespec started;
  char what[256];
};

static double seconds_since(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t0->tv_sec) + 1e-9 * (double)(now.tv_nsec - t0->tv_nsec);
}

static void add_ns(struct timespec *t, long ns) {
  t->tv_nsec += ns;
  while (t->tv_nsec >= 1000000000L) {
    t->tv_nsec -= 1000000000L;
    t->tv_sec++;
  }
}

static void fire(const gcb_watchdog_t *w, int status, const char *why) {
  fflush(stdout);
  fprintf(stderr, "gpucoll-bench: rank %d: %s: %s; ending the run\n", w->rank, w->what, why);
  fflush(stderr);
  _exit(status);
}

static void *watch(void *arg) {
  gcb_watchdog_t *w = arg;
  pthread_mutex_lock(&w->lock);
  while (!w->stop) {
    if (w->armed) {
      double ran = seconds_since(&w->started);
      char why[640];
      if (w->timeout_s > 0 && ran > w->timeout_s) {
        snprintf(why, sizeof why, "ran past -T %g s (%.1f s so far)", w->timeout_s, ran);
        fire(w, EXIT_TIMEOUT, why);
      }
      for (int i = 0; w->uses_nccl && i < w->n_nccl; i++)
        if (gcb_nccl_async_error(w->nccl[i], why, sizeof why)) fire(w, 1, why);
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    add_ns(&until, POLL_NS);
    int e = pthread_cond_timedwait(&w->wake, &w->lock, &until);
    if (e != 0 && e != ETIMEDOUT) break; /* cannot wait: the bench runs on unwatched */
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

gcb_watchdog_t *gcb_watchdog_start(int rank, double timeout_s, const gcb_nccl_t *nccl, char *err,
                                   size_t errlen) {
  gcb_watchdog_t *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(err, errlen, "watchdog: out of host memory");
    return NULL;
  }
  w->rank = rank;
  w->timeout_s = timeout_s;
  if (nccl) w->nccl[w->n_nccl++] = nccl;
  pthread_condattr_t attr;
  int e = pthread_condattr_init(&attr);
  if (!e) e = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (!e) e = pthread_cond_init(&w->wake, &attr);
  pthread_condattr_destroy(&attr);
  if (!e) {
    e = pthread_mutex_init(&w->lock, NULL);
    if (!e) {
      e = pthread_create(&w->thread, NULL, watch, w);
      if (!e) return w;
      pthread_mutex_destroy(&w->lock);
    }
    pthread_cond_destroy(&w->wake);
  }
  snprintf(err, errlen, "watchdog: cannot start its thread: %s", strerror(e));
  free(w);
  return NULL;
}

int gcb_watchdog_watch(gcb_watchdog_t *w, const gcb_nccl_t *nccl, char *err, size_t errlen) {
  pthread_mutex_lock(&w->lock);
  const int full = w->n_nccl == GCB_WATCHDOG_MAX_NCCL;
  if (!full) w->nccl[w->n_nccl++] = nccl;
  pthread_mutex_unlock(&w->lock);
  if (full) snprintf(err, errlen, "watchdog: it polls at most %d NCCL communicators", GCB_WATCHDOG_MAX_NCCL);
  return full;
}

void gcb_watchdog_arm(gcb_watchdog_t *w, const char *what, int uses_nccl) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  snprintf(w->what, sizeof w->what, "%s", what);
  w->uses_nccl = uses_nccl && w->n_nccl > 0;
  clock_gettime(CLOCK_MONOTONIC, &w->started);
  w->armed = 1;
  pthread_mutex_unlock(&w->lock);
}

void gcb_watchdog_disarm(gcb_watchdog_t *w) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->armed = 0;
  pthread_mutex_unlock(&w->lock);
}

void gcb_watchdog_stop(gcb_watchdog_t *w) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->stop = 1;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->lock);
  free(w);
}
