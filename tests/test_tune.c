/* test_tune.c — the autotuner: tuning installs rows every rank shares, collectives stay correct
 * under them, rows survive a save and load, and bad files are refused alike on every rank. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

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
  /* On GPUs with peer access the fused RMSNorm's kernels are timed too: float32 is one of its
   * dtypes, and one of its kernels runs at every size of the ladder. */
  if (gc_test_peer_gpus("the RMSNorm's tuned rows", 1)) CU_ASSERT(table_has("\nrmsnorm "));
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
    fprintf(f, "gpus %d\nallreduce any mpi\nend 1\n", lsize + 1);
    fclose(f);
    f = fopen(garbled, "w");
    fprintf(f, "gpus %d\nallreduce lots oneshot\nend 1\n", lsize);
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
      {"negative", "allreduce -1024 oneshot\nend 1\n", "line 2"},
      {"overflow", "allreduce 99999999999999999999999 oneshot\nend 1\n", "line 2"},
      {"signed", "allreduce +1024 oneshot\nend 1\n", "line 2"},
      {"extra", "allreduce 1024 oneshot ll\nend 1\n", "line 2"},
      {"short", "allreduce 1024\nend 1\n", "line 2"},
      {"blank", "\n\nallreduce lots oneshot\nend 1\n", "line 4"},
      {"gpus2", "allreduce any mpi\ngpus 99\nend 1\n", "line 3"},
      {"gpusx", "broadcast any mpi\nend 1\n", "line 1"}, /* head replaced below */
      {"end2", "broadcast any mpi\nend 1\nend 1\n", "line 4"},
      {"endx", "broadcast any mpi\nend one\n", "line 3"},
      {"count", "broadcast any mpi\nend 2\n", "says 2"},
      {"rmsnorm", "rmsnorm any writes\nend 1\n", "line 2 is an rmsnorm row"},
      {"rmsnorm2", "rmsnorm any mpi\nend 1\n", "line 2 is an rmsnorm row"},
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
    fprintf(f, "broadcast any oneshot\nend 2\n");
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
    fprintf(f, "end 1\n");
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
               "broadcast 18446744073709551614 mpi\nrmsnorm 65536 twoshot\n  end 4 \r\n# after the end\n\n", lsize);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  GC_TEST_OK(gc_tune_load(gc_test_comm, path));
  CU_ASSERT(table_has("18446744073709551614"));
  CU_ASSERT(table_has("\nrmsnorm        this    65536        twoshot"));
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

/* Rank 0 writes `len` bytes of text to path; every rank then sees it. */
static void put_file(const char *path, const char *text, size_t len) {
  if (gc_test_rank == 0) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(text, 1, len, f), len);
    CU_ASSERT_EQUAL(fclose(f), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 writes a tune file of this communicator's GPU count and `rows` (the lines after the
 * 'gpus' line) to path; every rank then sees it. */
static void put_tune(const char *path, const char *rows) {
  int lsize = 0;
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &lsize));
  char text[512];
  int len = snprintf(text, sizeof text, "gpus %d\n%s", lsize, rows);
  put_file(path, text, (size_t)len);
}

/* 'set' lines set the dispatch table's switches: the table lists them, a save keeps them, a
 * reset returns to the built-in values, and a bad one is refused naming its line. */
static int has_switch(const char *key, const char *value) {
  char line[64];
  snprintf(line, sizeof line, "switch %-14s %-8s", key, value);
  return table_has(line);
}

static void test_tune_switches(void) {
  char path[256];
  gc_test_tmp_path(path, sizeof path, "switches.tune");
  put_tune(path, "allreduce any mpi\nset ce_chunks 3\nset push_schedule ring\nend 1\n");
  CU_ASSERT(has_switch("ce_chunks", "2"));
  GC_TEST_OK(gc_tune_load(gc_test_comm, path));
  CU_ASSERT(has_switch("ce_chunks", "3"));
  CU_ASSERT(has_switch("push_schedule", "ring"));
  check_allreduce_sum(905);
  GC_TEST_OK(gc_tune_save(gc_test_comm, path));
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  CU_ASSERT(has_switch("ce_chunks", "2"));
  CU_ASSERT(has_switch("push_schedule", "auto"));
  GC_TEST_OK(gc_tune_load(gc_test_comm, path)); /* the save kept them */
  CU_ASSERT(has_switch("ce_chunks", "3"));
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  put_tune(path, "set ce_chunks 9\nend 0\n");
  CU_ASSERT_EQUAL(gc_tune_load(gc_test_comm, path), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "line 2 sets ce_chunks=9: use 1 to 8"));
  CU_ASSERT(has_switch("ce_chunks", "2"));
  put_tune(path, "set chunks 2\nend 0\n");
  CU_ASSERT_EQUAL(gc_tune_load(gc_test_comm, path), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "line 2 sets no switch 'chunks'"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0) remove(path);
}

/* A tune file that names the algorithm by writes by its former name ("twoshot_push") loads, and
 * the table and a save name it "writes". */
static void test_tune_former_name(void) {
  char path[256];
  gc_test_tmp_path(path, sizeof path, "former.tune");
  put_tune(path, "allreduce 4096 twoshot_push\nallreduce any mpi\nend 2\n");
  GC_TEST_OK(gc_tune_load(gc_test_comm, path));
  CU_ASSERT(table_has("writes"));
  CU_ASSERT(!table_has("twoshot_push"));
  GC_TEST_OK(gc_tune_save(gc_test_comm, path));
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  GC_TEST_OK(gc_tune_load(gc_test_comm, path));
  CU_ASSERT(table_has("writes"));
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0) remove(path);
}

/* The whole of a file on rank 0 (NUL-terminated, *len bytes), broadcast to every rank. */
static char *get_file(const char *path, size_t *len) {
  long n = -1;
  char *text = NULL;
  if (gc_test_rank == 0) {
    FILE *f = fopen(path, "rb");
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (f) rewind(f);
    text = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) n = -1;
    if (f) fclose(f);
  }
  MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  if (n < 0) {
    free(text);
    return NULL;
  }
  if (!text) text = calloc((size_t)n + 1, 1);
  MPI_Bcast(text, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
  *len = (size_t)n;
  return text;
}

/* Rows in force that no other test leaves: the built-in table with these tuned rows. */
static void load_rows(const char *path, int lsize) {
  char text[256];
  int n = snprintf(text, sizeof text,
                   "gpus %d\nallreduce 4096 mpi\nallreduce 1048576 oneshot_ll\nbroadcast any twoshot\n"
                   "allgather any oneshot\nend 4\n",
                   lsize);
  put_file(path, text, (size_t)n);
  GC_TEST_OK(gc_tune_load(gc_test_comm, path));
}

/* A saved file cut at every byte is refused as truncated and leaves the rows in force: every
 * proper prefix lacks the whole 'end' line, whether it stops inside a row ("oneshot_ll" cut to
 * "oneshot" is another row), at a row's end, or inside the end line. */
static void test_tune_truncated(void) {
  int lsize = 0;
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &lsize));
  char saved[256], cut[256];
  gc_test_tmp_path(saved, sizeof saved, "whole.tune");
  gc_test_tmp_path(cut, sizeof cut, "cut.tune");
  load_rows(saved, lsize);
  GC_TEST_OK(gc_tune_save(gc_test_comm, saved));
  char *kept = strdup(gc_comm_algo_table(gc_test_comm));
  size_t len = 0;
  char *text = get_file(saved, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nend 4\n"));
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  char *reset = strdup(gc_comm_algo_table(gc_test_comm));
  int loaded = 0, unsaid = 0, changed = 0;
  for (size_t at = 0; at < len; at++) {
    put_file(cut, text, at);
    gc_result_t r = gc_tune_load(gc_test_comm, cut);
    loaded += r != GC_ERR_INVALID_ARGUMENT;
    unsaid += !strstr(gc_comm_last_error(gc_test_comm), "truncated") ||
              !strstr(gc_comm_last_error(gc_test_comm), "gc_autotune and gc_tune_save");
    changed += strcmp(gc_comm_algo_table(gc_test_comm), reset) != 0;
    if (r == GC_SUCCESS) GC_TEST_OK(gc_tune_reset(gc_test_comm));
  }
  CU_ASSERT_EQUAL(loaded, 0);
  CU_ASSERT_EQUAL(unsaid, 0);
  CU_ASSERT_EQUAL(changed, 0);
  put_file(cut, text, len); /* the whole file loads back to the same rows */
  GC_TEST_OK(gc_tune_load(gc_test_comm, cut));
  CU_ASSERT_STRING_EQUAL(gc_comm_algo_table(gc_test_comm), kept);
  /* a file of the format without end lines: refused alike, saying how to make a new one */
  char legacy[128];
  int n = snprintf(legacy, sizeof legacy, "gpus %d\nallreduce any mpi\n", lsize);
  put_file(cut, legacy, (size_t)n);
  CU_ASSERT_EQUAL(gc_tune_load(gc_test_comm, cut), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "without end markers"));
  CU_ASSERT_STRING_EQUAL(gc_comm_algo_table(gc_test_comm), kept);
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  free(text);
  free(kept);
  free(reset);
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0) {
    remove(saved);
    remove(cut);
  }
}

/* The names in dir other than "." and "..", counted; *only is set when there is just `name`. */
static int entries(const char *dir, const char *name, int *only) {
  DIR *d = opendir(dir);
  int count = 0, named = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    count++;
    named += strcmp(e->d_name, name) == 0;
  }
  if (d) closedir(d);
  *only = count == 1 && named == 1;
  return count;
}

/* One failed save (how it fails is `fail`'s, on rank 0): GC_ERR_SYSTEM on every rank, the old
 * file byte for byte as it was, and no temporary left beside it. */
static void expect_failed_save(const char *dir, const char *path, const char *old, size_t old_len,
                               int (*fail)(int on), const char *what) {
  int ready = gc_test_rank == 0 ? fail(1) : 1;
  MPI_Bcast(&ready, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ready) {
    gc_test_note("tune: cannot arrange %s here; that case is not run", what);
    return;
  }
  gc_result_t r = gc_tune_save(gc_test_comm, path);
  if (gc_test_rank == 0) CU_ASSERT_EQUAL(fail(0), 1);
  if (r != GC_ERR_SYSTEM) fprintf(stderr, "[rank %d] save with %s: %s\n", gc_test_rank, what, gc_result_name(r));
  CU_ASSERT_EQUAL(r, GC_ERR_SYSTEM);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "is as it was"));
  size_t len = 0;
  char *now = get_file(path, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(now);
  CU_ASSERT_TRUE(len == old_len && memcmp(now, old, len) == 0);
  free(now);
  if (gc_test_rank == 0) {
    int only = 0;
    entries(dir, strrchr(path, '/') + 1, &only);
    CU_ASSERT_TRUE(only);
  }
}

static char fail_dir[256];

/* A read-only directory: mode 0555, and for root (whom modes do not stop) an effective user
 * without rights for the duration of the save. on = 1 arranges it, on = 0 undoes it. */
static int read_only_dir(int on) {
  if (on) {
    if (chmod(fail_dir, 0555) != 0) return 0;
    if (geteuid() == 0 && seteuid(65534) != 0) {
      chmod(fail_dir, 0755);
      return 0;
    }
    return 1;
  }
  int ok = getuid() != 0 || seteuid(0) == 0;
  return chmod(fail_dir, 0755) == 0 && ok;
}

/* A file size limit below what the save writes (SIGXFSZ ignored: the write fails with EFBIG). */
static int size_limit(int on) {
  static struct rlimit was;
  static void (*handler)(int);
  if (on) {
    if (getrlimit(RLIMIT_FSIZE, &was) != 0) return 0;
    struct rlimit small = {24, was.rlim_max};
    handler = signal(SIGXFSZ, SIG_IGN);
    return setrlimit(RLIMIT_FSIZE, &small) == 0;
  }
  int ok = setrlimit(RLIMIT_FSIZE, &was) == 0;
  signal(SIGXFSZ, handler);
  return ok;
}

/* A save that fails part way leaves the previous file whole: it writes beside the target and
 * renames only a complete, flushed file over it. */
static void test_tune_failed_save(void) {
  int lsize = 0;
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &lsize));
  char path[300];
  gc_test_tmp_path(fail_dir, sizeof fail_dir, "savedir");
  snprintf(path, sizeof path, "%s/rows.tune", fail_dir);
  if (gc_test_rank == 0) CU_ASSERT_EQUAL(mkdir(fail_dir, 0755), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  load_rows(path, lsize);
  GC_TEST_OK(gc_tune_save(gc_test_comm, path));
  size_t old_len = 0;
  char *old = get_file(path, &old_len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(old);
  GC_TEST_OK(gc_tune_reset(gc_test_comm)); /* other rows now: a save would change the file */
  expect_failed_save(fail_dir, path, old, old_len, read_only_dir, "a read-only directory");
  expect_failed_save(fail_dir, path, old, old_len, size_limit, "a file size limit");
  GC_TEST_OK(gc_tune_save(gc_test_comm, path)); /* and a save that can succeed replaces it */
  size_t len = 0;
  char *now = get_file(path, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(now);
  CU_ASSERT_PTR_NOT_NULL(strstr(now, "\nend 0\n"));
  free(now);
  free(old);
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0) {
    remove(path);
    CU_ASSERT_EQUAL(rmdir(fail_dir), 0);
  }
}

void gc_test_suite_tune(void) {
  static const gc_test_case_t tests[] = {
      {"autotune, save, load", test_tune_save_load},
      {"bad tune files", test_tune_bad_files},
      {"hostile tune files", test_tune_hostile_files},
      {"hand-edited tune file", test_tune_hand_edited},
      {"tune file with the former name of writes", test_tune_former_name},
      {"tune file switches", test_tune_switches},
      {"truncated tune files", test_tune_truncated},
      {"failed saves leave the old file", test_tune_failed_save},
      {NULL, NULL},
  };
  gc_test_add_suite("tune", tests);
}
