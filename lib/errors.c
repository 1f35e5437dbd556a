/* errors.c — result names and messages from the one list, and where detailed messages are kept. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gc_internal.h"

/* Messages of failures outside a communicator (gc_comm_init, NULL comm): one per thread. */
static _Thread_local char thread_last_error[1024];

const char *gc_result_name(gc_result_t result) {
  switch (result) {
#define GC__RESULT_NAME(name, value, msg) \
  case GC_##name:                         \
    return "GC_" #name;
    GC_RESULT_MAP(GC__RESULT_NAME)
#undef GC__RESULT_NAME
    default:
      return "GC_UNKNOWN_RESULT";
  }
}

const char *gc_strerror(gc_result_t result) {
  switch (result) {
#define GC__RESULT_MSG(name, value, msg) \
  case GC_##name:                        \
    return msg;
    GC_RESULT_MAP(GC__RESULT_MSG)
#undef GC__RESULT_MSG
    default:
      return "unknown result code";
  }
}

/* Only a live communicator may hold the message; anything else goes to the thread's slot. The
 * registry is asked first, so a destroyed handle is never dereferenced. */
static char *error_slot(gc_comm_t comm, size_t *len) {
  if (comm != NULL && gc__comm_is_live(comm)) {
    *len = sizeof comm->last_error;
    return comm->last_error;
  }
  *len = sizeof thread_last_error;
  return thread_last_error;
}

gc_result_t gc__fail(gc_comm_t comm, gc_result_t code, const char *file, int line, const char *fmt,
                     ...) {
  size_t len;
  char *slot = error_slot(comm, &len);
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(slot, len, "%s: %s", gc_result_name(code), msg);
  /* The message is also kept per thread so that gc_comm_last_error(NULL) sees the latest. */
  if (slot != thread_last_error) snprintf(thread_last_error, sizeof thread_last_error, "%s", slot);
  GC_WARN(GC_SUB_ALL, "%s (%s:%d)", slot, file, line);
  return code;
}

const char *gc__message_body(const char *msg) {
  const char *sep = strstr(msg, ": ");
  if (!sep || strncmp(msg, "GC_", 3) != 0) return msg;
  for (const char *c = msg; c < sep; c++)
    if (*c == ' ') return msg;
  return sep + 2;
}

void gc__clear_error(gc_comm_t comm) {
  size_t len;
  char *slot = error_slot(comm, &len);
  slot[0] = '\0';
}

gc_result_t gc__mpi_fail(gc_comm_t comm, int mpi_err, const char *call, const char *file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(mpi_err, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", mpi_err);
  return gc__fail(comm, GC_ERR_MPI, file, line, "%s failed: %s", call, text);
}

const char *gc_comm_last_error(gc_comm_t comm) {
  size_t len;
  return error_slot(comm, &len);
}
