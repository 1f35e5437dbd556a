/* test_params.c — the parameter table: every GC_* knob listed once with its default and doc. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_test.h"

static const struct { const char *env, *def, *doc; } knobs[] = {
#define GC__X(id, env, def, doc) {env, def, doc},
    GC_PARAM_MAP(GC__X)
#undef GC__X
};
#define NUM_KNOBS ((int)(sizeof knobs / sizeof knobs[0]))

/* The line of the table that starts with `name` followed by a blank, or NULL. */
static const char *row_of(const char *table, const char *name) {
  size_t n = strlen(name);
  for (const char *p = table; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (strncmp(p, name, n) == 0 && (p[n] == ' ' || p[n] == '\t')) return p;
  return NULL;
}

static void test_every_knob(void) {
  const char *t = gc_params_table();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(NUM_KNOBS, GC_NUM_PARAMS);
  /* the knobs the design names, whatever the list says */
  static const char *const required[] = {"GC_DEBUG", "GC_DEBUG_SUBSYS", "GC_ALGO", "GC_MAX_BLOCKS",
                                         "GC_TIMEOUT_MS", "GC_LOCAL_SIZE", "GC_STAGING_BYTES",
                                         "GC_MPI_CHUNK_BYTES", "GC_CUDA_AWARE", "GC_MULTIMEM"};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    if (!row_of(t, required[i])) fprintf(stderr, "params table lacks %s\n", required[i]);
    CU_ASSERT_PTR_NOT_NULL(row_of(t, required[i]));
  }
  for (int i = 0; i < NUM_KNOBS; i++) {
    const char *row = row_of(t, knobs[i].env);
    CU_ASSERT_PTR_NOT_NULL_FATAL(row);
    const char *eol = strchr(row, '\n');
    size_t len = eol ? (size_t)(eol - row) : strlen(row);
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)len, row);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, knobs[i].doc));
    if (*knobs[i].def) {
      CU_ASSERT_PTR_NOT_NULL(strstr(line, knobs[i].def));
    }
    /* listed once */
    CU_ASSERT_PTR_NULL(row_of(eol ? eol + 1 : "", knobs[i].env));
  }
}

static void test_values(void) {
  for (int i = 0; i < NUM_KNOBS; i++) {
    const char *env = getenv(knobs[i].env);
    const char *v = gc__param_str((gc__param_t)i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    if (env && *env) {
      CU_ASSERT_STRING_EQUAL(v, env);
    } else {
      CU_ASSERT_STRING_EQUAL(v, knobs[i].def);
    }
  }
  const char *chunk = getenv("GC_MPI_CHUNK_BYTES");
  int value = -1;
  if (!chunk || !*chunk) {
    CU_ASSERT_EQUAL(gc__param_range(GC_PARAM_MPI_CHUNK_BYTES, 1, INT_MAX, &value), GC_SUCCESS);
    CU_ASSERT_EQUAL(value, 4194304);
  }
  const char *mm = getenv("GC_MULTIMEM");
  if (!mm || !*mm) { /* off by default */
    CU_ASSERT_EQUAL(gc__param_range(GC_PARAM_MULTIMEM, 0, 1, &value), GC_SUCCESS);
    CU_ASSERT_EQUAL(value, 0);
  }
}

/* The integer knobs' reader takes the whole text or nothing: strtoll alone made GC_TIMEOUT_MS=1e5
 * a 1 ms timeout, "2x" two, GC_MAX_BLOCKS=08 no cap (0) and 010 eight, and
 * GC_STAGING_BYTES=17179869184g wrapped to 0. */
static void test_integer_text(void) {
  static const struct {
    const char *text;
    int ok;
    int64_t value;
  } cases[] = {
      {"0", 1, 0},
      {"120000", 1, 120000},
      {"-1", 1, -1},
      {"+7", 1, 7},
      {"08", 1, 8},
      {"010", 1, 10},
      {"0x10", 1, 16},
      {"0X1f", 1, 31},
      {" 42\t", 1, 42},
      {"64k", 1, 64 << 10},
      {"64M", 1, 64 << 20},
      {"64MB", 1, 64 << 20},
      {"64MiB", 1, 64 << 20},
      {"2g", 1, (int64_t)2 << 30},
      {"4096B", 1, 4096},
      {"-2k", 1, -2048},
      {"9223372036854775807", 1, INT64_MAX},
      {"-9223372036854775808", 1, INT64_MIN},
      {"8589934591g", 1, (int64_t)8589934591 << 30},
      {"", 0, 0},
      {" ", 0, 0},
      {"1e5", 0, 0},
      {"2x", 0, 0},
      {"12 34", 0, 0},
      {"1.5", 0, 0},
      {"k", 0, 0},
      {"-", 0, 0},
      {"0x", 0, 0},
      {"0xg", 0, 0},
      {"64kk", 0, 0},
      {"64t", 0, 0},
      {"9223372036854775808", 0, 0},
      {"99999999999999999999", 0, 0},
      {"8589934592g", 0, 0},
      {"17179869184g", 0, 0},
      {"-8589934593g", 0, 0},
      {"auto", 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t v = -12345;
    int ok = gc__parse_int(cases[i].text, &v);
    if (ok != cases[i].ok || (ok && v != cases[i].value))
      fprintf(stderr, "gc__parse_int(\"%s\") = %d, %lld; want %d, %lld\n", cases[i].text, ok, (long long)v,
              cases[i].ok, (long long)cases[i].value);
    CU_ASSERT_EQUAL(ok, cases[i].ok);
    CU_ASSERT_EQUAL(v, cases[i].ok ? cases[i].value : -12345); /* nothing written on failure */
  }
  /* every numeric default parses */
  for (int i = 0; i < NUM_KNOBS; i++) {
    int64_t v;
    const char *d = knobs[i].def;
    if (*d >= '0' && *d <= '9') CU_ASSERT(gc__parse_int(d, &v));
  }
}

void gc_test_suite_params(void) {
  static const gc_test_case_t tests[] = {{"every knob in the table", test_every_knob},
                                         {"values in force", test_values},
                                         {"integer knobs: the whole text or nothing", test_integer_text},
                                         {NULL, NULL}};
  gc_test_add_suite("params", tests);
}
