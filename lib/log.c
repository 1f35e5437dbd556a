/* log.c — logging by level and subsystem (GC_DEBUG, GC_DEBUG_SUBSYS); the test happens in the
 * GC_WARN/INFO/TRACE macros, so a disabled line costs one compare and formats nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gc_internal.h"

int gc__log_level = GC_LOG_NONE;
unsigned gc__log_mask = GC_SUB_ALL;
int gc__log_rank = -1;

static const struct { const char *name; unsigned bit; } subsystems[] = {
    {"INIT", GC_SUB_INIT}, {"COLL", GC_SUB_COLL}, {"P2P", GC_SUB_P2P},
    {"MPI", GC_SUB_MPI},   {"TUNE", GC_SUB_TUNE}, {"MEM", GC_SUB_MEM}, {"ALL", GC_SUB_ALL},
};

/* Called by params.c while it reads the environment, with the two values in force. */
void gc__log_init(const char *level, const char *subsys) {
  if (strcasecmp(level, "WARN") == 0) gc__log_level = GC_LOG_WARN;
  else if (strcasecmp(level, "INFO") == 0) gc__log_level = GC_LOG_INFO;
  else if (strcasecmp(level, "TRACE") == 0) gc__log_level = GC_LOG_TRACE;
  else gc__log_level = GC_LOG_NONE;

  char list[256];
  snprintf(list, sizeof list, "%s", subsys);
  unsigned mask = 0;
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    for (size_t i = 0; i < sizeof subsystems / sizeof subsystems[0]; i++)
      if (strcasecmp(tok, subsystems[i].name) == 0) mask |= subsystems[i].bit;
  gc__log_mask = mask ? mask : GC_SUB_ALL;
}

void gc__log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...) {
  static const char *names[] = {"", "WARN", "INFO", "TRACE"};
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  /* One fprintf per line so lines of different ranks don't interleave mid-line. */
  fprintf(stderr, "%s:%d:%d [gpucoll %s] %s:%d %s\n", host, (int)getpid(), gc__log_rank,
          names[level], base ? base + 1 : file, line, msg);
}
