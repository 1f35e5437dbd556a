/* tune.c — the autotuner: times each algorithm of each collective (and of the fused RMSNorm) at
 * a ladder of sizes and keeps the fastest as the communicator's dispatch rows, a mixed layout's
 * on its groups; saves and loads a communicator's rows as text. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gc_entry.h"
#include "gc_mixed.h"
#include "gc_plan.h"

/* What can be tried per collective, the two-stage broadcast (GC_ALGO_TWOSHOT) among them: no
 * sm_90 row takes it (the default rows take it above 256 KB on 3+ GPUs), so on sm_90 measurement
 * is how it gets chosen. gc__tune_candidates
 * keeps those the planner takes as asked for the tuner's call on this communicator. The fused
 * RMSNorm tries its three kernels; where none runs it composes the all-reduce, whose own rows
 * are tuned with the collectives. */
static const gc_algo_t candidates[GC_NUM_TUNED_KINDS][7] = {
    [GC_COLL_ALLREDUCE] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT, GC_ALGO_WRITES, GC_ALGO_COPYENGINE,
                           GC_ALGO_MPI},
    [GC_COLL_REDUCESCATTER] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_WRITES, GC_ALGO_COPYENGINE, GC_ALGO_MPI},
    [GC_COLL_ALLGATHER] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_WRITES, GC_ALGO_COPYENGINE, GC_ALGO_MPI},
    [GC_COLL_BROADCAST] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT, GC_ALGO_WRITES, GC_ALGO_COPYENGINE,
                           GC_ALGO_MPI},
    [GC_COLL_RMSNORM] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT},
};

/* The fused kernels need device buffers and peers (two-shot: two GPUs or more); a kernel that
 * cannot take the tuner's shape refuses the call (GC_ERR_UNSUPPORTED), so it is not timed. */
static int rmsnorm_candidates(const gc__facts_t *f, const gc__call_t *c, gc_algo_t out[GC_NUM_ALGOS]) {
  int n = 0;
  if (!f->p2p_ready || !c->all_device) return 0;
  for (const gc_algo_t *a = candidates[GC_COLL_RMSNORM]; *a != GC_ALGO_AUTO; a++)
    if (*a != GC_ALGO_TWOSHOT || f->local_size > 1) out[n++] = *a;
  return n;
}

/* A candidate is timed only where the planner runs it as asked: a refusal (no peers, LL that
 * cannot carry the call, a collective without that algorithm) or a documented fallback to another
 * algorithm would time something else under its name. The refusals are recorded per thread, not
 * on the communicator. */
int gc__tune_candidates(const gc__facts_t *f, const gc__call_t *c, gc_algo_t out[GC_NUM_ALGOS]) {
  if (c->coll == GC_COLL_RMSNORM) return rmsnorm_candidates(f, c, out);
  gc__facts_t quiet = *f;
  quiet.comm = NULL;
  int n = 0;
  for (int k = 0; k < (int)(sizeof candidates[0] / sizeof candidates[0][0]); k++) {
    const gc_algo_t algo = candidates[c->coll][k];
    if (algo == GC_ALGO_AUTO) break;
    gc__call_t asked = *c;
    asked.algo = algo;
    gc__plan_t p;
    if (gc__plan(&quiet, &asked, &p) == GC_SUCCESS && p.algo == algo && p.fell_from == GC_ALGO_AUTO) out[n++] = algo;
  }
  return n;
}

/* The call gc_autotune makes: count elements of dtype (all-gather: each rank's part;
 * reduce-scatter: the whole input) in gc_mem_alloc buffers, out of place. */
static gc__call_t tuner_call(gc_comm_t comm, gc__coll_t coll, size_t count, gc_dtype_t dtype) {
  const size_t es = gc_dtype_size(dtype), n = (size_t)comm->size;
  if (coll == GC_COLL_RMSNORM)
    return (gc__call_t){.coll = coll, .bytes = count * es, .count = count, .es = es, .os = 1,
                        .all_device = comm->device >= 0, .sym_in = 1, .rows = 1, .most_part = count};
  const int whole = coll == GC_COLL_ALLREDUCE || coll == GC_COLL_BROADCAST;
  gc__call_t c = {.coll = coll, .bytes = whole ? count * es : count * es * n,
                  .count = coll == GC_COLL_REDUCESCATTER ? count * n : count, .es = es, .os = es,
                  .ll_bytes = gc__ll_need(comm, coll, dtype, dtype, count * es), .all_device = comm->device >= 0,
                  .sym_in = coll != GC_COLL_BROADCAST, .sym_out = coll != GC_COLL_REDUCESCATTER, .rows = 1,
                  .most_part = count, .parts_on_packs = count * es % 16 == 0};
  c.cols = c.count;
  return c;
}

/* How much faster than the built-in table's choice a candidate must be to replace it. */
#define TABLE_MARGIN 0.03

/* The RMSNorm's rows are tuned on rows of this many elements (a common hidden size), or on one
 * row of the whole size below it. */
#define TUNE_RMSNORM_COLS 4096

typedef struct {
  gc_comm_t comm;
  gc__coll_t coll;
  void *send, *recv;
  size_t count; /* elements as the collective takes them */
  gc_dtype_t dtype;
  gc_options_t opts;
  /* Each call takes the next of `sets` places `stride` bytes apart in the buffers, as
   * gpucoll-bench's calls take fresh buffer sets: one place for every call left the data in L2,
   * and on 2 x H200 the tuner then took the one-shot reduce-scatter at 256 KB (4.50 us in the
   * bench) over LL (4.31). */
  size_t stride, sets, next;
  /* The fused RMSNorm's: elements a row, one scale a row, the cols weights. */
  size_t cols;
  float *scales;
  const void *gamma;
} trial_t;

static gc_result_t run_trial(void *arg, void *stream) {
  trial_t *t = arg;
  const size_t at = t->next++ % t->sets * t->stride;
  const void *send = (const char *)t->send + at;
  void *recv = (char *)t->recv + at;
  switch (t->coll) {
    case GC_COLL_ALLREDUCE:
      return gc_allreduce_ex(send, recv, t->count, t->dtype, GC_SUM, t->comm, stream, &t->opts);
    case GC_COLL_REDUCESCATTER:
      return gc_reducescatter_ex(send, recv, t->count, t->dtype, GC_SUM, t->comm, stream, &t->opts);
    case GC_COLL_ALLGATHER:
      return gc_allgather_ex(send, recv, t->count, t->dtype, t->comm, stream, &t->opts);
    case GC_COLL_RMSNORM: {
      gc_rmsnorm_fp8_t norm = GC_RMSNORM_FP8_INIT;
      norm.gamma = t->gamma;
      return gc_allreduce_rmsnorm_fp8(send, recv, t->scales, t->count / t->cols, t->cols, t->dtype, &norm, t->comm,
                                      stream, &t->opts);
    }
    default:
      return gc_broadcast_ex(send, recv, t->count, t->dtype, 0, t->comm, stream, &t->opts);
  }
}

/* Sizes count as nccl-tests counts them: the larger buffer (all-gather's output, reduce-scatter's
 * input). Returns the element count the call takes, 0 when the size is too small to split. */
static size_t elements_for(gc__coll_t coll, size_t bytes, size_t es, int n) {
  size_t count = bytes / es;
  if (coll == GC_COLL_REDUCESCATTER || coll == GC_COLL_ALLGATHER) count /= (size_t)n;
  return count;
}

static gc_result_t set_rows(gc_comm_t comm, gc__tuned_t *rows, int count) {
  free(comm->tuned);
  comm->tuned = rows;
  comm->tuned_count = count;
  return gc__dispatch_describe(comm);
}

/* Every rank ends with rank 0's rows: they are the decision, whatever the others measured. */
static gc_result_t share_rows(gc_comm_t comm, gc__tuned_t *rows, int count) {
  GC_CHECK(gc__boot_bcast(comm, &count, sizeof count, 0));
  gc__tuned_t *mine = calloc(count > 0 ? (size_t)count : 1, sizeof *mine);
  if (!mine) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory");
  if (comm->rank == 0) memcpy(mine, rows, (size_t)count * sizeof *mine);
  gc_result_t r = gc__boot_bcast(comm, mine, (size_t)count * sizeof *mine, 0);
  if (r != GC_SUCCESS) {
    free(mine);
    return r;
  }
  return set_rows(comm, mine, count);
}

/* What the planner takes for a call of `bytes` without tuned rows: the built-in table's choice,
 * for the RMSNorm by the all-reduce table (gc__plan_rmsnorm_algo). */
static gc_algo_t table_choice(const gc__facts_t *f, gc__coll_t coll, size_t bytes) {
  if (coll != GC_COLL_RMSNORM) return gc__table_choice(f->cc_major, f->local_size, coll, bytes, 1);
  gc__facts_t untuned = *f;
  untuned.tuned_count = 0;
  return gc__plan_rmsnorm_algo(&untuned, GC_ALGO_AUTO, bytes, 1);
}

/* Times every candidate for t's call of `bytes` and writes the winner to *best (GC_ALGO_AUTO:
 * none ran). The built-in table's choice (the inputs here are gc_mem_alloc's) stays unless another
 * is faster by more than TABLE_MARGIN: below ~1 MB the candidates are within tenths of a us, and on
 * 2 x H200 the tuner's small-size picks then flipped from run to run, 6-10% slower than the
 * table's in the bench at 1 KB, 64 KB and 256 KB (reduce-scatter). */
static gc_result_t time_candidates(gc_comm_t comm, trial_t *t, size_t bytes, gc_algo_t *best) {
  gc__facts_t f;
  gc__facts(comm, &f);
  const gc__call_t call = tuner_call(comm, t->coll, t->count, t->dtype);
  gc_algo_t algos[GC_NUM_ALGOS];
  const int count = gc__tune_candidates(&f, &call, algos);
  const gc_algo_t table = table_choice(&f, t->coll, bytes);
  double best_us = 0, table_us = 0;
  *best = GC_ALGO_AUTO;
  for (int k = 0; k < count; k++) {
    t->opts.algo = algos[k];
    /* GPU algorithms: 5 + 20 calls whatever the size (1 GB: ~0.1 s a candidate); with 2 + 3 from
     * 64 MB, the tuner took the copy engines for the 2-GPU all-gather and broadcast at 64 MB,
     * which the bench then timed 13-19% slower than the table's choice. The MPI
     * path (host staging) keeps 2 + 3 from 64 MB: it is most of the tuning time. */
    const int mpi = t->opts.algo == GC_ALGO_MPI, graph = comm->device >= 0 && !mpi;
    const int warmup = mpi ? 2 : 5, iters = mpi ? (bytes >= ((size_t)64 << 20) ? 3 : 10) : 20;
    double us = 0;
    gc_result_t tr = gc_time(comm, run_trial, t, NULL, warmup, iters, graph, &us);
    if (tr == GC_ERR_UNSUPPORTED) continue; /* refused alike on every rank */
    GC_CHECK(tr);
    /* us is the slowest rank's time: the same number everywhere, so the same choice. */
    if (*best == GC_ALGO_AUTO || us < best_us) {
      *best = t->opts.algo;
      best_us = us;
    }
    if (t->opts.algo == table) table_us = us;
    GC_INFO(GC_SUB_TUNE, "%s %zu bytes %s: %.2f us", gc__coll_name(t->coll), bytes, gc_algo_name(t->opts.algo), us);
  }
  if (*best != GC_ALGO_AUTO && table_us > 0 && best_us >= table_us * (1.0 - TABLE_MARGIN)) *best = table;
  return GC_SUCCESS;
}

/* The buffers gc_autotune times in: send and recv of max_bytes from gc_mem_alloc, and for the
 * fused RMSNorm (float32, float16 or bfloat16 on a GPU) its weights and a scale a row. */
typedef struct {
  void *send, *recv, *gamma;
  float *scales;
} tune_bufs_t;

static int tunes_rmsnorm(gc_comm_t comm, gc_dtype_t dtype) {
  return comm->device >= 0 && gc__rmsnorm_dtype(dtype);
}

static gc_result_t bufs_alloc(gc_comm_t comm, size_t max_bytes, gc_dtype_t dtype, tune_bufs_t *b) {
  const size_t es = gc_dtype_size(dtype), rows = max_bytes / es / TUNE_RMSNORM_COLS + 1;
  GC_CHECK(gc_mem_alloc(comm, max_bytes, &b->send));
  GC_CHECK(gc_mem_alloc(comm, max_bytes, &b->recv));
  GC_CHECK(gc_fill_random(comm, b->send, max_bytes / es, dtype, 1234u + (unsigned)comm->rank));
  if (!tunes_rmsnorm(comm, dtype)) return GC_SUCCESS;
  GC_CHECK(gc_buffer_alloc(comm, TUNE_RMSNORM_COLS * es, 1, &b->gamma));
  GC_CHECK(gc_buffer_alloc(comm, rows * sizeof(float), 1, (void **)&b->scales));
  return gc_fill_random(comm, b->gamma, TUNE_RMSNORM_COLS, dtype, 99u); /* alike on every rank */
}

static void bufs_free(gc_comm_t comm, tune_bufs_t *b) {
  if (b->scales) gc_buffer_free(comm, b->scales);
  if (b->gamma) gc_buffer_free(comm, b->gamma);
  if (b->recv) gc_mem_free(comm, b->recv);
  if (b->send) gc_mem_free(comm, b->send);
}

/* The call of `bytes` that tunes kind: its elements (0: too small to split), and for the RMSNorm
 * rows of TUNE_RMSNORM_COLS, or one row of the whole below that. */
static trial_t trial_for(gc_comm_t comm, const tune_bufs_t *b, gc__coll_t kind, size_t bytes, size_t max_bytes,
                         gc_dtype_t dtype) {
  const size_t es = gc_dtype_size(dtype), stride = (bytes + 4095) & ~(size_t)4095, sets = max_bytes / stride;
  trial_t t = {comm, kind, b->send, b->recv, elements_for(kind, bytes, es, comm->size), dtype, GC_OPTIONS_INIT,
               stride, sets > 0 ? sets : 1, 0, 0, b->scales, b->gamma};
  if (kind == GC_COLL_RMSNORM) {
    t.cols = t.count < TUNE_RMSNORM_COLS ? t.count : TUNE_RMSNORM_COLS;
    if (t.cols) t.count -= t.count % t.cols;
  }
  return t;
}

/* Appends kind's rows: a run of sizes with the same winner is one row, and the last row covers
 * anything larger. */
static gc_result_t tune_kind(gc_comm_t comm, const tune_bufs_t *b, gc__coll_t kind, size_t max_bytes, gc_dtype_t dtype,
                             gc__tuned_t *rows, int cap, int *nrows) {
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    trial_t t = trial_for(comm, b, kind, bytes, max_bytes, dtype);
    if (t.count == 0) continue;
    gc_algo_t best = GC_ALGO_AUTO;
    GC_CHECK(time_candidates(comm, &t, bytes, &best));
    if (best == GC_ALGO_AUTO) continue;
    if (*nrows > 0 && rows[*nrows - 1].coll == kind && rows[*nrows - 1].algo == best) rows[*nrows - 1].max_bytes = bytes;
    else if (*nrows < cap) rows[(*nrows)++] = (gc__tuned_t){kind, bytes, best};
  }
  if (*nrows > 0 && rows[*nrows - 1].coll == kind) rows[*nrows - 1].max_bytes = SIZE_MAX;
  return GC_SUCCESS;
}

static gc_result_t autotune(gc_comm_t comm, size_t max_bytes, gc_dtype_t dtype) {
  if (!gc__dtype_valid(dtype) || !gc__dtype_reducible(dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_autotune: dtype must be a reducible type");
  if (max_bytes < 1024 || max_bytes > ((size_t)1 << 40))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_autotune: max_bytes %zu is outside 1 KB .. 1 TB", max_bytes);
  enum { MAX_ROWS = GC_NUM_TUNED_KINDS * 64 };
  gc__tuned_t rows[MAX_ROWS];
  int nrows = 0;
  tune_bufs_t b = {0};
  gc_result_t r = bufs_alloc(comm, max_bytes, dtype, &b);
  /* The weights and scales are this rank's own allocations: every rank goes on, or none. */
  int ok = r == GC_SUCCESS;
  gc_result_t met = gc__boot_agree(comm, &ok, comm->timeout_ms, "gc_autotune's buffers");
  if (r == GC_SUCCESS && met != GC_SUCCESS) r = met;
  else if (r == GC_SUCCESS && !ok) r = GC_FAIL(comm, GC_ERR_REMOTE, "gc_autotune: another rank could not set up its buffers");
  const int kinds = tunes_rmsnorm(comm, dtype) ? GC_NUM_TUNED_KINDS : GC_NUM_COLLS;
  for (int k = 0; r == GC_SUCCESS && k < kinds; k++) r = tune_kind(comm, &b, (gc__coll_t)k, max_bytes, dtype, rows, MAX_ROWS, &nrows);
  bufs_free(comm, &b);
  GC_CHECK(r);
  return share_rows(comm, rows, nrows);
}

gc_result_t gc_autotune(gc_comm_t comm, size_t max_bytes, gc_dtype_t dtype) {
  GC_CHECK(gc__comm_check(comm));
  GC_CHECK(gc__comm_health(comm));
  return autotune(comm, max_bytes, dtype);
}

/* Every rank tunes its TP group, then its DP group: the ranks of each group meet in the same
 * order, and all agree between the two, so that a group's failure stops every rank before the
 * next step instead of leaving the others waiting in it. A group that is the communicator itself
 * (the other axis has one rank) gets the communicator's rows. */
static gc_result_t mixed_autotune(gc_mixed_t m, size_t max_bytes, gc_dtype_t dtype) {
  gc_comm_t groups[2] = {m->tp, m->dp};
  static const char *const names[2] = {"TP", "DP"};
  for (int g = 0; g < 2; g++) {
    if (g == 1 && m->dp == m->tp) break;
    gc_result_t r = gc__on_group(m->comm, names[g], groups[g], autotune(groups[g], max_bytes, dtype));
    int ok = r == GC_SUCCESS;
    gc_result_t met = gc__boot_agree(m->comm, &ok, m->comm->timeout_ms, "gc_mixed_autotune");
    GC_CHECK(r);
    GC_CHECK(met);
    if (!ok) return GC_FAIL(m->comm, GC_ERR_REMOTE, "gc_mixed_autotune: the %s group of another rank failed", names[g]);
  }
  return GC_SUCCESS;
}

gc_result_t gc_mixed_autotune(gc_mixed_t mixed, size_t max_bytes, gc_dtype_t dtype) {
  GC_CHECK(gc__mixed_check(mixed));
  GC_CHECK(gc__comm_health(mixed->comm));
  return mixed_autotune(mixed, max_bytes, dtype);
}

/* ---- save and load -------------------------------------------------------------------------
 * Text, one row a line:   gpus N   then   <collective> <max bytes | any> <algorithm>   then
 * set <switch> <value>   for each switch off its built-in value (switches.c), then
 * end <rows>   with its newline, last: a file cut at any byte lacks that line, so it is refused
 * instead of read as a smaller table. The file is written beside its target and renamed over it,
 * so a save that fails (disk full, a size limit, a read-only directory) leaves the old file. */

static void write_rows(gc_comm_t comm, FILE *f) {
  fprintf(f, "# gpucoll %s tuned dispatch rows (gc_tune_load reads them; first match wins)\n", gc_get_version());
  fprintf(f, "gpus %d\n", comm->local_size);
  for (int i = 0; i < comm->tuned_count; i++) {
    const gc__tuned_t *t = &comm->tuned[i];
    if (t->max_bytes == SIZE_MAX) fprintf(f, "%s any %s\n", gc__coll_name(t->coll), gc_algo_name(t->algo));
    else fprintf(f, "%s %zu %s\n", gc__coll_name(t->coll), t->max_bytes, gc_algo_name(t->algo));
  }
  gc__switches_write(&comm->sw, f);
  fprintf(f, "end %d\n", comm->tuned_count);
}

/* A new file beside path (the same directory, so that rename replaces path in one step), named
 * path.tmp.PID.N; O_EXCL, so that no other saver or stale temporary shares it. -1 and errno. */
static int open_beside(const char *path, char *tmp, size_t cap) {
  static unsigned serial;
  for (int tries = 0; tries < 64; tries++) {
    if (snprintf(tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), serial++) >= (int)cap) {
      errno = ENAMETOOLONG;
      return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

/* After the rename: the directory's entry on disk too. The new file is in place either way, so a
 * failure here is a warning, not the call's result. */
static void sync_directory(const char *path) {
  char *dir = strdup(path);
  if (!dir) return;
  char *slash = strrchr(dir, '/');
  const char *name = slash ? dir : ".";
  if (slash == dir) slash[1] = '\0'; /* "/x": the root */
  else if (slash) *slash = '\0';
  int fd = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) GC_WARN(GC_SUB_TUNE, "gc_tune_save: syncing directory %s: %s", name, strerror(errno));
  if (fd >= 0) close(fd);
  free(dir);
}

static gc_result_t write_file(gc_comm_t comm, const char *path) {
  const size_t cap = strlen(path) + 48;
  char *tmp = malloc(cap);
  if (!tmp) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory");
  int fd = open_beside(path, tmp, cap);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    gc_result_t r = GC_FAIL(comm, GC_ERR_SYSTEM, "gc_tune_save: cannot create a file beside %s: %s; %s is as it was",
                            path, strerror(errno), path);
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    free(tmp);
    return r;
  }
  write_rows(comm, f);
  const char *step = NULL;
  if (fflush(f) != 0 || ferror(f)) step = "writing";
  else if (fsync(fileno(f)) != 0) step = "flushing";
  int err = errno;
  if (fclose(f) != 0 && !step) {
    step = "closing";
    err = errno;
  }
  if (!step && rename(tmp, path) != 0) {
    step = "renaming";
    err = errno;
  }
  gc_result_t r = GC_SUCCESS;
  if (step) {
    unlink(tmp);
    r = GC_FAIL(comm, GC_ERR_SYSTEM, "gc_tune_save: %s %s failed: %s; %s is as it was", step, tmp, strerror(err), path);
  } else {
    sync_directory(path);
  }
  free(tmp);
  return r;
}

gc_result_t gc_tune_save(gc_comm_t comm, const char *path) {
  GC_CHECK(gc__comm_check(comm));
  if (!path) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_tune_save: path is NULL");
  /* Rank 0 writes; its result is everyone's, so the call succeeds or fails alike. */
  int code = comm->rank == 0 ? (int)write_file(comm, path) : 0;
  char msg[sizeof comm->last_error];
  snprintf(msg, sizeof msg, "%s", comm->rank == 0 ? comm->last_error : "");
  GC_CHECK(gc__boot_bcast(comm, &code, sizeof code, 0));
  GC_CHECK(gc__boot_bcast(comm, msg, sizeof msg, 0));
  if (code == GC_SUCCESS) return GC_SUCCESS;
  /* Rank 0 has its message and logged it; the others get it without its "GC_ERR_...: ". */
  if (comm->rank == 0) return (gc_result_t)code;
  return GC_FAIL(comm, (gc_result_t)code, "on rank 0: %s", gc__message_body(msg));
}

/* A count of the file: decimal digits only, no sign (strtoull would take "-1024" as 2^64 - 1024),
 * at most max; 0 when it is not one. */
static int parse_count(const char *s, unsigned long long max, unsigned long long *out) {
  if (*s < '0' || *s > '9') return 0;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno == ERANGE || v > max) return 0;
  *out = v;
  return 1;
}

/* What the lines read so far hold. */
typedef struct {
  gc__tuned_t *rows;
  gc__switches_t sw;       /* the communicator's GC_SWITCHES, then the file's 'set' lines */
  char why[256];           /* what is wrong with a 'set' line */
  int n, gpus;             /* gpus: -1 until its line */
  int ended;               /* the 'end <rows>' line was read */
  unsigned long long said; /* its row count */
} tune_text_t;

/* One line of words into t: NULL, or what is wrong with the line. */
static const char *parse_line(char *const *w, int nw, tune_text_t *t) {
  unsigned long long v = 0;
  if (t->ended) return "follows the 'end <rows>' line";
  if (strcmp(w[0], "gpus") == 0) {
    if (nw != 2 || t->gpus >= 0 || !parse_count(w[1], INT_MAX, &v)) return "is not the one 'gpus <count>' line";
    t->gpus = (int)v;
    return NULL;
  }
  if (strcmp(w[0], "end") == 0) {
    if (nw != 2 || !parse_count(w[1], INT_MAX, &v)) return "is not 'end <rows>'";
    t->ended = 1;
    t->said = v;
    return NULL;
  }
  if (strcmp(w[0], "set") == 0) {
    if (nw != 3) return "is not 'set <switch> <value>'";
    if (gc__switches_set(&t->sw, w[1], w[2], "sets") == GC_SUCCESS) return NULL;
    snprintf(t->why, sizeof t->why, "%s", gc__message_body(gc_comm_last_error(NULL)));
    return t->why;
  }
  int coll = -1;
  gc_algo_t algo = GC_ALGO_AUTO;
  for (int k = 0; nw == 3 && k < GC_NUM_TUNED_KINDS; k++)
    if (strcmp(w[0], gc__coll_name((gc__coll_t)k)) == 0) coll = k;
  if (coll >= 0 && strcmp(w[1], "any") == 0) v = SIZE_MAX;
  else if (coll >= 0 && !parse_count(w[1], SIZE_MAX, &v)) coll = -1;
  const char *name = coll >= 0 && strcmp(w[2], GC__ALGO_WRITES_ALIAS) == 0 ? "writes" : w[2];
  if (coll < 0 || gc_algo_from_name(name, &algo) != GC_SUCCESS || algo == GC_ALGO_AUTO || algo == GC_ALGO_MULTIMEM)
    return "is not '<collective> <bytes|any> <algorithm>'";
  if (coll == GC_COLL_RMSNORM && algo != GC_ALGO_ONESHOT_LL && algo != GC_ALGO_ONESHOT && algo != GC_ALGO_TWOSHOT)
    return "is an rmsnorm row of another algorithm than its kernels (oneshot_ll, oneshot, twoshot)";
  t->rows[t->n++] = (gc__tuned_t){(gc__coll_t)coll, (size_t)v, algo};
  return NULL;
}

/* Whether the last line of words is an 'end' line ended by its newline, as gc_tune_save writes
 * it: no proper prefix of a saved file has one, so a file cut anywhere is told apart before its
 * cut line is read as a row ("oneshot_ll" cut to "oneshot") or refused as a garbled one. */
static int ends_whole(const char *text, size_t len) {
  if (len == 0 || text[len - 1] != '\n') return 0;
  for (size_t e = len - 1;;) { /* text[e] ends the line */
    size_t b = e;
    while (b > 0 && text[b - 1] != '\n') b--;
    const char *s = text + b, *stop = text + e;
    while (s < stop && strchr(" \t\r\v\f", *s)) s++;
    if (s < stop && *s != '#')
      return stop - s >= 3 && strncmp(s, "end", 3) == 0 && (stop - s == 3 || strchr(" \t\r\v\f", s[3]));
    if (b == 0) return 0;
    e = b - 1;
  }
}

/* Every line is whole words: one 'gpus N' line, rows of exactly three words, and the 'end <rows>'
 * line last ('#' starts a comment line). Anything else is refused, naming the line as an editor
 * counts it: a file that is not exactly what gc_tune_save writes (or a hand edit of it) must not
 * become rows. */
static gc_result_t parse(gc_comm_t comm, const char *path, char *text, gc__tuned_t **out, int *count,
                         gc__switches_t *sw) {
  static const char *const regenerate = "make a new one with gc_autotune and gc_tune_save";
  if (!ends_whole(text, strlen(text)))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT,
                   "gc_tune_load: %s does not end with its 'end <rows>' line: it is truncated (or was saved by a "
                   "gpucoll without end markers); %s",
                   path, regenerate);
  int lines = 1;
  for (const char *p = text; *p; p++) lines += *p == '\n';
  tune_text_t t = {.rows = calloc((size_t)lines, sizeof(gc__tuned_t)), .sw = comm->sw_init, .gpus = -1};
  if (!t.rows) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory");
  int line = 0;
  const char *bad = NULL;
  for (char *s = text, *next; !bad && s; s = next) {
    line++;
    next = strchr(s, '\n');
    if (next) *next++ = '\0';
    char *w[4] = {NULL}, *save = NULL;
    int nw = 0;
    for (char *tok = strtok_r(s, " \t\r\v\f", &save); tok && nw < 4; tok = strtok_r(NULL, " \t\r\v\f", &save)) w[nw++] = tok;
    if (nw > 0 && w[0][0] != '#') bad = parse_line(w, nw, &t);
  }
  gc_result_t r = GC_SUCCESS;
  if (bad) r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_tune_load: %s line %d %s", path, line, bad);
  else if (t.said != (unsigned long long)t.n)
    r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT,
                "gc_tune_load: %s holds %d rows where its 'end' line says %llu: rows are missing or were added; %s",
                path, t.n, t.said, regenerate);
  else if (t.gpus < 0) r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_tune_load: %s has no 'gpus <count>' line", path);
  else if (t.gpus != comm->local_size)
    r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_tune_load: %s was tuned for %d GPUs, this communicator has %d", path,
                t.gpus, comm->local_size);
  if (r != GC_SUCCESS) {
    free(t.rows);
    return r;
  }
  *out = t.rows;
  *count = t.n;
  *sw = t.sw;
  return GC_SUCCESS;
}

gc_result_t gc_tune_load(gc_comm_t comm, const char *path) {
  GC_CHECK(gc__comm_check(comm));
  if (!path) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_tune_load: path is NULL");
  /* Rank 0 reads, everyone parses the same bytes: the same rows or the same error everywhere.
   * One byte more than the limit is read so that a longer file is refused, not cut: a row cut
   * at the limit reads as another row ("oneshot_ll" as "oneshot"). */
  enum { MAX_FILE = 1 << 16 };
  char *text = calloc(MAX_FILE + 2, 1);
  if (!text) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory");
  int len = -1;
  if (comm->rank == 0) {
    FILE *f = fopen(path, "r");
    if (f) {
      len = (int)fread(text, 1, MAX_FILE + 1, f);
      if (ferror(f)) len = -1; /* a directory opens, then fails to read */
      fclose(f);
    }
  }
  gc_result_t r = gc__boot_bcast(comm, &len, sizeof len, 0);
  if (r == GC_SUCCESS && len < 0) r = GC_FAIL(comm, GC_ERR_SYSTEM, "gc_tune_load: rank 0 cannot read %s", path);
  if (r == GC_SUCCESS && len > MAX_FILE)
    r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_tune_load: %s is larger than %d bytes, more than gc_tune_save writes",
                path, MAX_FILE);
  if (r == GC_SUCCESS) r = gc__boot_bcast(comm, text, (size_t)len, 0);
  if (r == GC_SUCCESS && strlen(text) != (size_t)len) /* the parser would stop at the NUL */
    r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_tune_load: %s holds a NUL byte; it is not a tune file", path);
  gc__tuned_t *rows = NULL;
  int count = 0;
  gc__switches_t sw;
  if (r == GC_SUCCESS) r = parse(comm, path, text, &rows, &count, &sw);
  free(text);
  GC_CHECK(r);
  comm->sw = sw;
  return set_rows(comm, rows, count);
}

gc_result_t gc_tune_reset(gc_comm_t comm) {
  GC_CHECK(gc__comm_check(comm));
  comm->sw = comm->sw_init;
  return set_rows(comm, NULL, 0);
}
