/* test_params.c — the parameter table: every GC_* knob listed once with its default and doc. */
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
  if (!chunk || !*chunk) {
    CU_ASSERT_EQUAL(gc__param_int(GC_PARAM_MPI_CHUNK_BYTES), 4194304);
  }
  const char *mm = getenv("GC_MULTIMEM");
  if (!mm || !*mm) { /* off by default */
    CU_ASSERT_EQUAL(gc__param_int(GC_PARAM_MULTIMEM), 0);
  }
}

void gc_test_suite_params(void) {
  static const gc_test_case_t tests[] = {{"every knob in the table", test_every_knob},
                                         {"values in force", test_values},
                                         {NULL, NULL}};
  gc_test_add_suite("params", tests);
}
