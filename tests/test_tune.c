/* test_tune.c — the autotuner: tuning installs rows every rank shares, collectives stay correct
 * under them, rows survive a save and load, and bad files are refused alike on every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "gc_test.h"

static int table_has(const char *needle) { return strstr(gc_comm_algo_table(gc_test_comm), needle) != NULL; }

static void check_allreduce_sum(int salt) {
  size_t n = 3001;
  void *a = gc_test_alloc(n * 4), *b = gc_test_alloc(n * 4);
  gc_test_fill(a, n, GC_FLOAT32, gc_test_rank, salt);
  gc_test_poison(b, n * 4);
  GC_TEST_OK(gc_allreduce(a, b, n, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
  float *h = malloc(n * 4);
  gc_test_download(h, b, n * 4);
  gc_test_red_t R;
  gc_test_red_init(&R, GC_FLOAT32, GC_SUM, salt);
  CU_ASSERT_EQUAL(gc_test_check_red("all-reduce after tuning", &R, h, n, 1), 0);
  free(h);
  gc_test_free(a);
  gc_test_free(b);
}

static void test_tune_save_load(void) {
  GC_TEST_OK(gc_autotune(gc_test_comm, 64 * 1024, GC_FLOAT32));
  CU_ASSERT(table_has("tuned"));
  /* Every rank holds the same rows (rank 0's decision). */
  const char *t = gc_comm_algo_table(gc_test_comm);
  CU_ASSERT(gc_test_same_on_all_ranks(t, strlen(t)));
  check_allreduce_sum(900);

  char path[256];
  gc_test_tmp_path(path, sizeof path, "ok.tune");
  GC_TEST_OK(gc_tune_save(gc_test_comm, path));
  char *saved = strdup(gc_comm_algo_table(gc_test_comm));
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  CU_ASSERT(!table_has("tuned"));
  GC_TEST_OK(gc_tune_load(gc_test_comm, path));
  CU_ASSERT_STRING_EQUAL(gc_comm_algo_table(gc_test_comm), saved);
  check_allreduce_sum(901);
  free(saved);
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0) remove(path);
}

static void test_tune_bad_files(void) {
  char wrong_gpus[256], garbled[256], missing[256];
  gc_test_tmp_path(wrong_gpus, sizeof wrong_gpus, "gpus.tune");
  gc_test_tmp_path(garbled, sizeof garbled, "garbled.tune");
  gc_test_tmp_path(missing, sizeof missing, "missing.tune");
  int lsize = 0;
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &lsize));
  if (gc_test_rank == 0) {
    FILE *f = fopen(wrong_gpus, "w");
    fprintf(f, "gpus %d\nallreduce any mpi\n", lsize + 1);
    fclose(f);
    f = fopen(garbled, "w");
    fprintf(f, "gpus %d\nallreduce lots oneshot\n", lsize);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CU_ASSERT_EQUAL(gc_tune_load(gc_test_comm, wrong_gpus), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "GPUs"));
  CU_ASSERT_EQUAL(gc_tune_load(gc_test_comm, garbled), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "line 2"));
  CU_ASSERT_EQUAL(gc_tune_load(gc_test_comm, missing), GC_ERR_SYSTEM);
  CU_ASSERT_EQUAL(gc_tune_save(gc_test_comm, "/nonexistent-dir/x.tune"), GC_ERR_SYSTEM);
  CU_ASSERT_EQUAL(gc_autotune(gc_test_comm, 10, GC_FLOAT32), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_autotune(gc_test_comm, 4096, GC_FP8_E4M3), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT(!table_has("tuned")); /* failures leave the table alone */
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0) {
    remove(wrong_gpus);
    remove(garbled);
  }
}

void gc_test_suite_tune(void) {
  static const gc_test_case_t tests[] = {
      {"autotune, save, load", test_tune_save_load},
      {"bad tune files", test_tune_bad_files},
      {NULL, NULL},
  };
  gc_test_add_suite("tune", tests);
}
