/* test_errors.c — result codes: names and messages for the whole list, and for unknown codes. */
#include <string.h>

#include "gc_test.h"

static const struct { gc_result_t code; int value; const char *name; } codes[] = {
#define GC__X(name, value, msg) {GC_##name, value, "GC_" #name},
    GC_RESULT_MAP(GC__X)
#undef GC__X
};
#define NUM_CODES ((int)(sizeof codes / sizeof codes[0]))

static void test_names(void) {
  CU_ASSERT_EQUAL(NUM_CODES, GC_NUM_RESULTS);
  for (int i = 0; i < NUM_CODES; i++) {
    CU_ASSERT_EQUAL((int)codes[i].code, codes[i].value);
    CU_ASSERT_EQUAL(codes[i].value, i); /* contiguous from 0: tables may index by code */
    CU_ASSERT_STRING_EQUAL(gc_result_name(codes[i].code), codes[i].name);
  }
  CU_ASSERT_EQUAL(GC_SUCCESS, 0);
  CU_ASSERT_STRING_EQUAL(gc_result_name(GC_ERR_TIMEOUT), "GC_ERR_TIMEOUT");
}

static void test_messages(void) {
  for (int i = 0; i < NUM_CODES; i++) {
    const char *m = gc_strerror(codes[i].code);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(strlen(m) > 5);
    for (int j = 0; j < i; j++) CU_ASSERT(strcmp(m, gc_strerror(codes[j].code)) != 0);
  }
  /* failures say what to do next */
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_strerror(GC_ERR_CUDA), "GC_DEBUG"));
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_strerror(GC_ERR_INVALID_ARGUMENT), "gc_comm_last_error"));
}

static void test_unknown(void) {
  const gc_result_t bad[] = {GC_NUM_RESULTS, (gc_result_t)-1, (gc_result_t)1000};
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_STRING_EQUAL(gc_result_name(bad[i]), "GC_UNKNOWN_RESULT");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gc_strerror(bad[i]));
    CU_ASSERT(strlen(gc_strerror(bad[i])) > 0);
  }
}

static void test_last_error_null(void) {
  /* Never NULL, and a failure outside a communicator is recorded for the thread. */
  CU_ASSERT_PTR_NOT_NULL(gc_comm_last_error(NULL));
  gc_dtype_t d;
  CU_ASSERT_EQUAL(gc_dtype_from_name("no-such-type", &d), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "no-such-type"));
}

void gc_test_suite_errors(void) {
  static const gc_test_case_t tests[] = {{"names", test_names},
                                         {"messages", test_messages},
                                         {"unknown code", test_unknown},
                                         {"last error without a communicator", test_last_error_null},
                                         {NULL, NULL}};
  gc_test_add_suite("errors", tests);
}
