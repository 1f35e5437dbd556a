/* registry.c — the live-handle registry: which communicators are live, so that a handle used
 * after gc_comm_destroy is an error instead of a crash, and the quarantine of freed ones. */
#include <pthread.h>
#include <stdlib.h>

#include "gc_internal.h"

/* Live communicators. Membership is tested by pointer value only, so a destroyed handle is
 * recognised without touching the memory it pointed to. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static gc_comm_t live[64];
static int live_count;

int gc__live_add(gc_comm_t comm) {
  pthread_mutex_lock(&live_lock);
  int ok = live_count < (int)(sizeof live / sizeof live[0]);
  if (ok) live[live_count++] = comm;
  pthread_mutex_unlock(&live_lock);
  return ok;
}

void gc__live_remove(gc_comm_t comm) {
  pthread_mutex_lock(&live_lock);
  for (int i = 0; i < live_count; i++)
    if (live[i] == comm) live[i] = live[--live_count];
  pthread_mutex_unlock(&live_lock);
}

bool gc__comm_is_live(gc_comm_t comm) {
  bool found = false;
  pthread_mutex_lock(&live_lock);
  for (int i = 0; i < live_count && !found; i++) found = live[i] == comm;
  pthread_mutex_unlock(&live_lock);
  return found;
}

gc_result_t gc__comm_check(gc_comm_t comm) {
  if (comm == NULL) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "comm is NULL");
  if (!gc__comm_is_live(comm))
    return GC_FAIL(NULL, GC_ERR_INVALID_USAGE,
                   "comm %p is not a live communicator (used after gc_comm_destroy?)", (void *)comm);
  return GC_SUCCESS;
}

/* Freed communicators wait here before their memory goes back to malloc, so that a new one never
 * gets the address of any of the last GC_QUARANTINE destroyed: a handle used after destroy is then
 * not live (gc__comm_check) instead of naming the newer communicator. */
#define GC_QUARANTINE 256
static gc_comm_t quarantine[GC_QUARANTINE];
static unsigned quarantine_next;

void gc__comm_quarantine(gc_comm_t comm) {
  pthread_mutex_lock(&live_lock);
  gc_comm_t oldest = quarantine[quarantine_next];
  quarantine[quarantine_next] = comm;
  quarantine_next = (quarantine_next + 1) % GC_QUARANTINE;
  pthread_mutex_unlock(&live_lock);
  free(oldest);
}
