/* params.c — the one table of environment knobs: read once, logged when overridden, printable. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"

typedef struct {
  const char *env, *def, *doc;
} param_row_t;

static const param_row_t rows[GC_NUM_PARAMS] = {
#define GC__PARAM_ROW(id, env, def, doc) {env, def, doc},
    GC_PARAM_MAP(GC__PARAM_ROW)
#undef GC__PARAM_ROW
};

static const char *values[GC_NUM_PARAMS];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *table_text;

static void read_all(void) {
  for (int i = 0; i < GC_NUM_PARAMS; i++) {
    const char *v = getenv(rows[i].env);
    values[i] = (v && *v) ? strdup(v) : rows[i].def;
  }
  gc__log_init(values[GC_PARAM_DEBUG], values[GC_PARAM_DEBUG_SUBSYS]);
  for (int i = 0; i < GC_NUM_PARAMS; i++)
    if (values[i] != rows[i].def) GC_INFO(GC_SUB_INIT, "%s set to %s", rows[i].env, values[i]);
}

const char *gc__param_str(gc__param_t id) {
  pthread_once(&once, read_all);
  return (id >= 0 && id < GC_NUM_PARAMS) ? values[id] : "";
}

gc_result_t gc__param_word(gc__param_t id, const char *const words[], int n, int *index) {
  const char *v = gc__param_str(id);
  for (*index = 0; *index < n; ++*index)
    if (strcmp(v, words[*index]) == 0) return GC_SUCCESS;
  char list[128] = "";
  for (int i = 0; i < n; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
             words[i]);
  return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s=%s: use %s", rows[id].env, v, list);
}

/* The whole text must be the number: strtoll alone stops at what it does not take (it would make
 * GC_TIMEOUT_MS=1e5 1 ms), and its base 0 reads "010" as 8 and "08" as 0, so decimal it is
 * unless 0x says hex. Blanks the shell may leave around it are skipped. */
int gc__parse_int(const char *s, int64_t *out) {
  while (*s == ' ' || *s == '\t') s++;
  const char *digits = s + (*s == '-' || *s == '+');
  const int hex = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
  if (!(hex ? isxdigit((unsigned char)digits[2]) : isdigit((unsigned char)digits[0]))) return 0;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, hex ? 16 : 10);
  if (errno == ERANGE) return 0;
  /* k, m, g for byte counts (a B or iB after it is allowed, as is a lone B) */
  int shift = 0;
  if (*end == 'k' || *end == 'K') shift = 10;
  else if (*end == 'm' || *end == 'M') shift = 20;
  else if (*end == 'g' || *end == 'G') shift = 30;
  if (shift) {
    end++;
    if (*end == 'i' && end[1] == 'B') end++;
  }
  if (*end == 'B' || *end == 'b') end++;
  while (*end == ' ' || *end == '\t') end++;
  if (*end) return 0;
  const int64_t unit = (int64_t)1 << shift;
  if (v > INT64_MAX / unit || v < INT64_MIN / unit) return 0; /* "17179869184g" wrapped to 0 */
  *out = v * unit;
  return 1;
}

gc_result_t gc__param_range64(gc__param_t id, int64_t lo, int64_t hi, int64_t *value) {
  int64_t v = 0;
  if (!gc__parse_int(gc__param_str(id), &v))
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s=%s is not an integer: use %lld to %lld", rows[id].env,
                   gc__param_str(id), (long long)lo, (long long)hi);
  if (v < lo || v > hi)
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s=%lld: use %lld to %lld", rows[id].env, (long long)v,
                   (long long)lo, (long long)hi);
  *value = v;
  return GC_SUCCESS;
}

gc_result_t gc__param_range(gc__param_t id, int lo, int hi, int *value) {
  int64_t v = 0;
  GC_CHECK(gc__param_range64(id, lo, hi, &v));
  *value = (int)v;
  return GC_SUCCESS;
}

#define GC__ROW_FORMAT "%-20s %-12s %-12s %s\n"
static int format_row(char *out, size_t cap, int i) {
  return snprintf(out, cap, GC__ROW_FORMAT, rows[i].env, *values[i] ? values[i] : "\"\"",
                  *rows[i].def ? rows[i].def : "\"\"", rows[i].doc);
}

/* Two passes: the rows are measured with the format that prints them, then printed. */
static void build_table(void) {
  size_t cap = (size_t)snprintf(NULL, 0, GC__ROW_FORMAT, "name", "value", "default", "description") + 1;
  for (int i = 0; i < GC_NUM_PARAMS; i++) cap += (size_t)format_row(NULL, 0, i);
  table_text = malloc(cap);
  if (!table_text) return;
  size_t n = (size_t)snprintf(table_text, cap, GC__ROW_FORMAT, "name", "value", "default", "description");
  for (int i = 0; i < GC_NUM_PARAMS; i++) n += (size_t)format_row(table_text + n, cap - n, i);
}

const char *gc_params_table(void) {
  static pthread_once_t table_once = PTHREAD_ONCE_INIT;
  pthread_once(&once, read_all);
  pthread_once(&table_once, build_table);
  return table_text ? table_text : "";
}
