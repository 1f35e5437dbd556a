/* test_faults.c — the fault suite: each scenario is a whole MPI program (gc_faults <scenario>),
 * because what it checks includes how every rank leaves: gc_comm_destroy's answer and a clean
 * MPI_Finalize. A rank prints what went wrong and exits non-zero; mpirun's status is the verdict.
 *   skip N        every rank position in turn skips an all-reduce, N times each (fresh communicators)
 *   refuse        one rank's bad argument in each collective: every rank answers in < 1 s, next call exact
 *   freeze        the last rank stops mid-loop (SIGSTOP): the others fail within GC_TIMEOUT_MS and
 *                 destroy within a short grace, then wake it (SIGCONT) so that it finalizes too
 *   tunefuzz N    N random and truncated tune files: gc_tune_load refuses or loads, never crashes
 *   soak N        N mixed host-buffer collectives of small sizes, every result compared
 *   stale N       use after destroy, also where a new communicator could get the freed address */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpucoll.h"

static int rank, size, failures;

#define EXPECT(cond, ...)                                                   \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__);       \
      fprintf(stderr, __VA_ARGS__);                                         \
      fprintf(stderr, "\n");                                                \
      failures++;                                                           \
    }                                                                       \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static gc_comm_t make_comm(void) {
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = 0;
  gc_comm_t c = NULL;
  gc_result_t r = gc_comm_init(&c, MPI_COMM_WORLD, &cfg);
  if (r != GC_SUCCESS) {
    fprintf(stderr, "rank %d: gc_comm_init: %s\n", rank, gc_comm_last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return c;
}

/* An exact all-reduce (int32 sums) on c: GC_SUCCESS with the right sums, or the error. */
static gc_result_t exact_allreduce(gc_comm_t c, size_t n, int salt) {
  int32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  for (size_t i = 0; i < n; i++) a[i] = (int32_t)(i * 7 + (size_t)rank * 3 + (size_t)salt);
  gc_result_t r = gc_allreduce(a, b, n, GC_INT32, GC_SUM, c, NULL);
  for (size_t i = 0; r == GC_SUCCESS && i < n; i++) {
    int32_t want = (int32_t)((int64_t)size * (int64_t)(i * 7 + (size_t)salt) + 3LL * size * (size - 1) / 2);
    if (b[i] != want) {
      EXPECT(0, "all-reduce element %zu is %d, not %d", i, b[i], want);
      break;
    }
  }
  free(a);
  free(b);
  return r;
}

static void scenario_skip(int reps) {
  for (int rep = 0; rep < reps; rep++)
    for (int skipper = 0; skipper < size; skipper++) {
      gc_comm_t c = make_comm();
      if (rank != skipper) {
        gc_result_t r = exact_allreduce(c, 256, rep);
        EXPECT(r == GC_ERR_TIMEOUT, "rank %d skipped, yet the call returned %s", skipper, gc_result_name(r));
      }
      gc_result_t d = gc_comm_destroy(c);
      EXPECT(d == GC_SUCCESS || d == GC_ERR_TIMEOUT || d == GC_ERR_REMOTE, "destroy returned %s", gc_result_name(d));
    }
}

/* One rank's bad argument per case; `call` runs collective k with this rank's arguments. */
enum { BAD_NULL_SEND, BAD_NULL_RECV, BAD_DTYPE, BAD_COUNT0, BAD_KINDS };
static const char *const bad_names[BAD_KINDS] = {"NULL sendbuf", "NULL recvbuf", "invalid dtype", "count 0"};
static const char *const coll_names[5] = {"allreduce", "reducescatter", "reducescatter_2d", "allgather", "broadcast"};

static gc_result_t call_coll(gc_comm_t c, int k, int bad, int root) {
  enum { N = 64 };
  static int32_t send[4 * N * 4], recv[4 * N * 4];
  const void *s = bad == BAD_NULL_SEND ? NULL : send;
  void *d = bad == BAD_NULL_RECV ? NULL : recv;
  gc_dtype_t t = bad == BAD_DTYPE ? (gc_dtype_t)77 : GC_INT32;
  size_t n = bad == BAD_COUNT0 ? 0 : N;
  switch (k) {
    case 0: return gc_allreduce(s, d, n, t, GC_SUM, c, NULL);
    case 1: return gc_reducescatter(s, d, n, t, GC_SUM, c, NULL);
    case 2: return gc_reducescatter_2d(s, d, n, 4, 0, t, GC_SUM, c, NULL, NULL);
    case 3: return gc_allgather(s, d, n, t, c, NULL);
    default: return gc_broadcast(s, d, n, t, root, c, NULL);
  }
}

static void scenario_refuse(void) {
  gc_comm_t c = make_comm();
  for (int k = 0; k < 5; k++)
    for (int bad = 0; bad < BAD_KINDS; bad++) {
      const int who = (k + bad) % size, root = (who + 1) % size;
      /* A non-root's sendbuf of a broadcast is not read: NULL there is no refusal. */
      if (k == 4 && bad == BAD_NULL_SEND && who != root) continue;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now_s();
      gc_result_t r = call_coll(c, k, rank == who ? bad : -1, root);
      const double took = now_s() - t0;
      const char *msg = gc_comm_last_error(c);
      EXPECT(r != GC_SUCCESS, "%s with %s on rank %d: rank %d returned GC_SUCCESS", coll_names[k], bad_names[bad], who,
             rank);
      EXPECT(took < 1.0, "%s with %s on rank %d: answered after %.2f s", coll_names[k], bad_names[bad], who, took);
      if (rank != who && bad != BAD_COUNT0) {
        /* A refusal names its rank; with GC_CHECK_CALLS=1 an invalid dtype is a difference the
         * comparison names first (the two ranks and the field). */
        char refused[32], differs[32];
        snprintf(refused, sizeof refused, "rank %d refused", who);
        snprintf(differs, sizeof differs, "on rank %d)", who);
        EXPECT((r == GC_ERR_REMOTE && strstr(msg, refused)) ||
                   (r == GC_ERR_INVALID_ARGUMENT && strstr(msg, "differ in dtype") && strstr(msg, differs)),
               "%s with %s on rank %d: %s (%s)", coll_names[k], bad_names[bad], who, gc_result_name(r), msg);
      }
      if (bad == BAD_COUNT0) EXPECT(strstr(msg, "count") != NULL, "count 0 on rank %d: %s", who, msg);
      /* The communicator is usable: the next call is exact on every rank. */
      gc_result_t next = exact_allreduce(c, 1000, k * 10 + bad);
      EXPECT(next == GC_SUCCESS, "the call after %s with %s: %s (%s)", coll_names[k], bad_names[bad],
             gc_result_name(next), gc_comm_last_error(c));
    }
  EXPECT(gc_comm_destroy(c) == GC_SUCCESS, "destroy: %s", gc_comm_last_error(NULL));
}

static void scenario_freeze(void) {
  int pid = (int)getpid(), *pids = malloc(sizeof(int) * (size_t)size);
  MPI_Allgather(&pid, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
  const char *env = getenv("GC_TIMEOUT_MS");
  const double timeout_s = (env ? atof(env) : 120000.0) / 1000.0;
  const int victim = size - 1;
  gc_comm_t c = make_comm();
  gc_result_t r = GC_SUCCESS;
  double t0 = 0;
  for (int i = 0; i < 50 && r == GC_SUCCESS; i++) {
    if (i == 20 && rank == victim) raise(SIGSTOP); /* a survivor wakes it once it is done */
    t0 = now_s();
    r = exact_allreduce(c, 512, i);
  }
  if (rank != victim) {
    const double failed_after = now_s() - t0;
    EXPECT(r == GC_ERR_TIMEOUT, "a peer stopped, yet the loop ended with %s", gc_result_name(r));
    EXPECT(failed_after < timeout_s + 1.0, "the error came %.2f s after the call began (GC_TIMEOUT_MS %.2f s)",
           failed_after, timeout_s);
    t0 = now_s();
    gc_result_t d = gc_comm_destroy(c);
    const double destroy_s = now_s() - t0;
    EXPECT(destroy_s < 1.0, "gc_comm_destroy took %.2f s on a failed communicator (%s)", destroy_s, gc_result_name(d));
    if (rank == 0) {
      sleep(1); /* every survivor past destroy, bounded by the grace */
      kill(pids[victim], SIGCONT);
    }
  } else {
    gc_result_t d = gc_comm_destroy(c); /* its peers are gone from the communicator */
    EXPECT(d == GC_ERR_TIMEOUT || d == GC_SUCCESS, "the stopped rank's destroy returned %s", gc_result_name(d));
  }
  free(pids);
}

/* Rows as gc_tune_save writes them, cut anywhere and with random bytes: loading must give a
 * result code (and an error message when it refuses), never a crash (the sanitizer build runs
 * this too). */
static void scenario_tunefuzz(int files) {
  gc_comm_t c = make_comm();
  char path[64], good[4096];
  snprintf(path, sizeof path, "gc_faults_tune_%d.txt", rank);
  EXPECT(gc_tune_save(c, path) == GC_SUCCESS, "gc_tune_save: %s", gc_comm_last_error(c));
  FILE *f = fopen(path, "rb");
  size_t len = f ? fread(good, 1, sizeof good, f) : 0;
  if (f) fclose(f);
  srand(1234 + (unsigned)rank);
  for (int i = 0; i < files; i++) {
    char text[4096];
    size_t n = len ? (size_t)rand() % (len + 1) : 0; /* a truncation */
    memcpy(text, good, n);
    if (i % 2) /* and random bytes in it or after it */
      for (int j = rand() % 16; j > 0; j--) {
        size_t at = (size_t)rand() % (n + 8);
        if (at >= sizeof text) continue;
        text[at] = (char)(rand() % 256);
        if (at >= n) n = at + 1;
      }
    f = fopen(path, "wb");
    if (!f) break;
    fwrite(text, 1, n, f);
    fclose(f);
    gc_result_t r = gc_tune_load(c, path);
    EXPECT(r >= GC_SUCCESS && r < GC_NUM_RESULTS, "gc_tune_load returned %d", (int)r);
    EXPECT(r == GC_SUCCESS || strlen(gc_comm_last_error(c)) > 0, "a refusal without a message");
    gc_tune_reset(c);
  }
  remove(path);
  EXPECT(gc_comm_destroy(c) == GC_SUCCESS, "destroy: %s", gc_comm_last_error(NULL));
}

/* Mixed collectives of small sizes, every result compared: exact (int32 sums, copies). */
static void scenario_soak(int calls) {
  gc_comm_t c = make_comm();
  enum { MOST = 300 };
  int32_t *in = malloc(sizeof(int32_t) * MOST * 4), *out = malloc(sizeof(int32_t) * MOST * 4);
  for (int i = 0; i < calls && !failures; i++) {
    const size_t n = 1 + (size_t)(i * 37) % MOST;
    const int k = i % 4, root = i % size;
    for (size_t j = 0; j < n * (size_t)size; j++) in[j] = (int32_t)(j + (size_t)rank * 1000 + (size_t)i);
    gc_result_t r;
    switch (k) {
      case 0: r = gc_allreduce(in, out, n, GC_INT32, GC_SUM, c, NULL); break;
      case 1: r = gc_reducescatter(in, out, n, GC_INT32, GC_SUM, c, NULL); break;
      case 2: r = gc_allgather(in, out, n, GC_INT32, c, NULL); break;
      default: r = gc_broadcast(in, out, n, GC_INT32, root, c, NULL); break;
    }
    EXPECT(r == GC_SUCCESS, "soak call %d: %s", i, gc_comm_last_error(c));
    const int64_t ranks_sum = 1000LL * size * (size - 1) / 2;
    for (size_t j = 0; r == GC_SUCCESS && j < n; j++) {
      int64_t want;
      if (k == 0) want = (int64_t)size * (int64_t)(j + (size_t)i) + ranks_sum;
      else if (k == 1) want = (int64_t)size * (int64_t)((size_t)rank * n + j + (size_t)i) + ranks_sum;
      else if (k == 2) want = -1; /* checked below */
      else want = (int64_t)(j + (size_t)root * 1000 + (size_t)i);
      if (k == 2) {
        for (int p = 0; p < size; p++)
          if (out[(size_t)p * n + j] != (int32_t)(j + (size_t)p * 1000 + (size_t)i)) {
            EXPECT(0, "soak call %d (all-gather): element %zu of rank %d wrong", i, j, p);
            j = n;
            break;
          }
        continue;
      }
      if (out[j] != (int32_t)want) {
        EXPECT(0, "soak call %d (kind %d): element %zu is %d, not %lld", i, k, j, out[j], (long long)want);
        break;
      }
    }
  }
  free(in);
  free(out);
  EXPECT(gc_comm_destroy(c) == GC_SUCCESS, "destroy: %s", gc_comm_last_error(NULL));
}

/* A destroyed handle is refused, also after new communicators were made (one may get its address). */
static void scenario_stale(int reps) {
  for (int i = 0; i < reps; i++) {
    gc_comm_t old = make_comm();
    EXPECT(gc_comm_destroy(old) == GC_SUCCESS, "destroy: %s", gc_comm_last_error(NULL));
    gc_comm_t fresh = make_comm();
    int out = -1;
    gc_result_t r = gc_comm_rank(old, &out);
    EXPECT(r == GC_ERR_INVALID_USAGE, "a destroyed handle (rep %d%s) gave %s", i, old == fresh ? ", address reused" : "",
           gc_result_name(r));
    EXPECT(gc_comm_destroy(fresh) == GC_SUCCESS, "destroy: %s", gc_comm_last_error(NULL));
  }
  /* A Fortran handle that names no communicator is refused before MPI sees it. */
  gc_comm_t c = NULL;
  gc_result_t r = gc_comm_init_f(&c, (MPI_Fint)987654, NULL);
  EXPECT(r == GC_ERR_INVALID_ARGUMENT && c == NULL, "gc_comm_init_f(987654) gave %s", gc_result_name(r));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *what = argc > 1 ? argv[1] : "";
  const int n = argc > 2 ? atoi(argv[2]) : 1;
  if (strcmp(what, "skip") == 0) scenario_skip(n);
  else if (strcmp(what, "refuse") == 0) scenario_refuse();
  else if (strcmp(what, "freeze") == 0) scenario_freeze();
  else if (strcmp(what, "tunefuzz") == 0) scenario_tunefuzz(n);
  else if (strcmp(what, "soak") == 0) scenario_soak(n);
  else if (strcmp(what, "stale") == 0) scenario_stale(n);
  else EXPECT(0, "unknown scenario '%s' (skip, refuse, freeze, tunefuzz, soak, stale)", what);
  MPI_Finalize();
  if (failures) fprintf(stderr, "rank %d: %d failure(s) in %s\n", rank, failures, what);
  return failures ? 1 : 0;
}
