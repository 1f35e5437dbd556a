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

/* Files that are not what gc_tune_save writes are refused whole, naming the line as an editor
 * counts it (blank lines too), and leave the table as it was: before, a negative or overflowing
 * size became a huge one or "any", words after a row, a second 'gpus' line and everything after a
 * NUL byte were ignored, and a file over 64 KB was cut, its cut row read as another ("oneshot_ll"
 * as "oneshot"). */
static void test_tune_hostile_files(void) {
  int lsize = 0;
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &lsize));
  char head[32];
  snprintf(head, sizeof head, "gpus %d\n", lsize);
  const struct {
    const char *name, *rows, *says;
  } cases[] = {
      {"negative", "allreduce -1024 oneshot\n", "line 2"},
      {"overflow", "allreduce 99999999999999999999999 oneshot\n", "line 2"},
      {"signed", "allreduce +1024 oneshot\n", "line 2"},
      {"extra", "allreduce 1024 oneshot ll\n", "line 2"},
      {"short", "allreduce 1024\n", "line 2"},
      {"blank", "\n\nallreduce lots oneshot\n", "line 4"},
      {"gpus2", "allreduce any mpi\ngpus 99\n", "line 3"},
      {"gpusx", "broadcast any mpi\n", "line 1"}, /* head replaced below */
  };
  enum { N = sizeof cases / sizeof cases[0] };
  char path[N + 2][256];
  for (int i = 0; i < N + 2; i++) {
    char name[32];
    snprintf(name, sizeof name, "hostile%d.tune", i);
    gc_test_tmp_path(path[i], sizeof path[i], name);
  }
  enum { BIG = (1 << 16) + 64 };
  if (gc_test_rank == 0) {
    for (int i = 0; i < N; i++) {
      FILE *f = fopen(path[i], "w");
      CU_ASSERT_PTR_NOT_NULL_FATAL(f);
      if (strcmp(cases[i].name, "gpusx") == 0) fprintf(f, "gpus %dx\n%s", lsize, cases[i].rows);
      else fprintf(f, "%s%s", head, cases[i].rows);
      fclose(f);
    }
    /* a NUL byte in the middle */
    FILE *f = fopen(path[N], "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "%sallreduce any mpi\n", head);
    fputc('\0', f);
    fprintf(f, "broadcast any oneshot\n");
    fclose(f);
    /* over 64 KB, with a row across the 64 KB mark */
    f = fopen(path[N + 1], "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const char *row = "allreduce 1048576 oneshot_ll\n";
    long at = (1 << 16) - (long)strlen("allreduce 1048576 oneshot") - (long)strlen(head) - 2;
    fprintf(f, "%s#", head);
    for (long k = 0; k < at; k++) fputc('x', f);
    fprintf(f, "\n%s", row);
    while (ftell(f) < BIG) fprintf(f, "# more\n");
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const char *before = gc_comm_algo_table(gc_test_comm);
  char *kept = strdup(before);
  for (int i = 0; i < N + 2; i++) {
    gc_result_t r = gc_tune_load(gc_test_comm, path[i]);
    const char *msg = gc_comm_last_error(gc_test_comm);
    const char *says = i < N ? cases[i].says : i == N ? "NUL" : "larger than";
    if (r != GC_ERR_INVALID_ARGUMENT || !strstr(msg, says))
      fprintf(stderr, "[rank %d] hostile tune file %d (%s): %s, '%s'\n", gc_test_rank, i, i < N ? cases[i].name : says,
              gc_result_name(r), msg);
    CU_ASSERT_EQUAL(r, GC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, says));
    CU_ASSERT_STRING_EQUAL(gc_comm_algo_table(gc_test_comm), kept); /* failures leave the table alone */
    if (r == GC_SUCCESS) GC_TEST_OK(gc_tune_reset(gc_test_comm));
  }
  free(kept);
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0)
    for (int i = 0; i < N + 2; i++) remove(path[i]);
}

/* A file every rank saves as it read it: comments, blank lines and indented comments are
 * allowed, and the saved file reads back to the same rows. */
static void test_tune_hand_edited(void) {
  int lsize = 0;
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &lsize));
  char path[256], again[256];
  gc_test_tmp_path(path, sizeof path, "edited.tune");
  gc_test_tmp_path(again, sizeof again, "edited2.tune");
  if (gc_test_rank == 0) {
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "# by hand\r\n\ngpus %d\r\n   # the small ones\nallreduce\t4096   mpi\r\nallreduce any mpi\n"
               "broadcast 18446744073709551614 mpi", lsize);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  GC_TEST_OK(gc_tune_load(gc_test_comm, path));
  CU_ASSERT(table_has("18446744073709551614"));
  char *rows = strdup(gc_comm_algo_table(gc_test_comm));
  GC_TEST_OK(gc_tune_save(gc_test_comm, again));
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  GC_TEST_OK(gc_tune_load(gc_test_comm, again));
  CU_ASSERT_STRING_EQUAL(gc_comm_algo_table(gc_test_comm), rows);
  free(rows);
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  /* a failed save: rank 0's message once, without the code repeated inside it */
  CU_ASSERT_EQUAL(gc_tune_save(gc_test_comm, "/nonexistent-dir/x.tune"), GC_ERR_SYSTEM);
  CU_ASSERT_PTR_NULL(strstr(gc_comm_last_error(gc_test_comm), "GC_ERR_SYSTEM: GC_ERR_SYSTEM"));
  CU_ASSERT_PTR_NULL(strstr(gc_comm_last_error(gc_test_comm), "on rank 0: GC_ERR"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0) {
    remove(path);
    remove(again);
  }
}

void gc_test_suite_tune(void) {
  static const gc_test_case_t tests[] = {
      {"autotune, save, load", test_tune_save_load},
      {"bad tune files", test_tune_bad_files},
      {"hostile tune files", test_tune_hostile_files},
      {"hand-edited tune file", test_tune_hand_edited},
      {NULL, NULL},
  };
  gc_test_add_suite("tune", tests);
}
