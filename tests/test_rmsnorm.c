/* test_rmsnorm.c — gc_allreduce_rmsnorm_fp8 against a float64 reference of both numerics (MAX's:
 * the float sum normalized, scale_ub bounding the row maximum; ROUNDED: the sum rounded to the
 * input dtype, scale_ub bounding the scale; a version-1 struct), every input dtype, both fp8
 * outputs, odd shapes, the residual in its forms, weight offset and scale bound, unaligned
 * pointers; on GPUs the fused kernel, the all-reduce + normalizing kernel (two-shot and MPI),
 * gc_mem_alloc inputs, chunks through a small staging area, graph replay, rows over clusters
 * and a forced timeout. Bit-identical results on every rank; bad arguments get their own code
 * and message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "gc_internal.h"
#include "gc_test.h"
#include "kernels.h"

enum { RES_NONE, RES_SEPARATE, RES_IN_PLACE, RES_NOT_KEPT, RES_ONLY_OUT };

typedef struct {
  gc_dtype_t dtype, out_dtype;
  size_t rows, cols;
  int residual;        /* RES_*: residual and residual_out given (separate or the same), or one of them */
  float weight_offset;
  int bounded;         /* scale_ub: 0.7 x the reference scale of row 0 (clips and saturates rows) */
  gc_algo_t algo;
  int symmetric;       /* sendbuf from gc_mem_alloc */
  size_t off;          /* elements every pointer sits past its allocation's start */
  int max_blocks;      /* options.max_blocks; 0 = the library's choice */
  size_t skew;         /* elements gamma, residual and residual_out sit further on odd ranks */
  int numerics;        /* NUM_*: GC_NORM_MAX (0, the default), GC_NORM_ROUNDED, or a version-1 struct */
} rn_case_t;

enum { NUM_MAX, NUM_ROUNDED, NUM_V1 };
static const char *const numerics_names[] = {"max", "rounded", "version 1"};

static int salt_counter = 7000;

static double fp8_max(gc_dtype_t t) { return t == GC_FP8_E4M3 ? 448.0 : 57344.0; }

/* One unit in the last place of fp8 type t at magnitude v (subnormals: the smallest step). */
static double fp8_ulp(gc_dtype_t t, double v) {
  const int mant = t == GC_FP8_E4M3 ? 3 : 2, min_exp = t == GC_FP8_E4M3 ? -6 : -14;
  int e = v > 0 ? (int)floor(log2(v)) : min_exp;
  if (e < min_exp) e = min_exp;
  return ldexp(1.0, e - mant);
}

/* f of element i: the inputs summed in float in rank order, plus the residual, in float (MAX
 * normalizes this); x_ref: f rounded once to the input dtype, which residual_out receives and
 * ROUNDED normalizes, exactly as the library defines them. */
static double f_ref(gc_dtype_t dt, int salt, size_t i, const void *res_host) {
  float acc = (float)gc_test_input(dt, 0, salt, i);
  for (int r = 1; r < gc_test_size; r++) acc = acc + (float)gc_test_input(dt, r, salt, i);
  if (res_host) acc = acc + (float)gc__load_double(res_host, i, dt);
  return (double)acc;
}

static double x_ref(gc_dtype_t dt, double f) {
  unsigned char t[8];
  gc__store_double(t, 0, dt, f);
  return gc__load_double(t, 0, dt);
}

/* Runs one case on `comm` (every rank), graph-captured and replayed `replays` times when > 0;
 * returns 1 when this rank's outputs are right. */
static int run_case(gc_comm_t comm, const rn_case_t *c, int replays) {
  const int salt = ++salt_counter, aux_salt = ++salt_counter;
  const gc_dtype_t dt = c->dtype, ft = c->out_dtype;
  const size_t es = gc_dtype_size(dt), count = c->rows * c->cols, off = c->off;
  char what[200];
  snprintf(what, sizeof what,
           "rmsnorm %s %s->%s %zu x %zu residual %d offset %g%s algo %s%s off %zu skew %zu max_blocks %d%s",
           numerics_names[c->numerics], gc_dtype_name(dt), gc_dtype_name(ft), c->rows, c->cols, c->residual,
           c->weight_offset, c->bounded ? " bounded" : "", gc_algo_name(c->algo), c->symmetric ? " gc_mem_alloc" : "",
           off, c->skew, c->max_blocks, replays ? " graph" : "");
  const size_t aoff = off + (gc_test_rank % 2 ? c->skew : 0); /* gamma's, residual's, residual_out's */

  /* inputs: this rank's rows, and the shared gamma and residual (rank -1) */
  char *send_base = gc_test_alloc_as(c->symmetric, (off + count) * es);
  char *send = send_base + off * es;
  gc_test_fill(send, count, dt, gc_test_rank, salt);
  char *gamma_base = gc_test_alloc((aoff + c->cols) * es), *gamma = gamma_base + aoff * es;
  gc_test_fill(gamma, c->cols, dt, -1, aux_salt);
  const int has_res = c->residual == RES_SEPARATE || c->residual == RES_IN_PLACE || c->residual == RES_NOT_KEPT;
  const int keeps_x = c->residual == RES_SEPARATE || c->residual == RES_IN_PLACE || c->residual == RES_ONLY_OUT;
  char *res_base = NULL, *res = NULL, *xout_base = NULL, *xout = NULL;
  if (has_res) {
    res_base = gc_test_alloc((aoff + count) * es + GUARD);
    gc_test_poison(res_base, (aoff + count) * es + GUARD);
    res = res_base + aoff * es;
    gc_test_fill(res, count, dt, -1, salt);
  }
  if (c->residual == RES_IN_PLACE) {
    xout = res;
  } else if (keeps_x) {
    xout_base = gc_test_alloc((aoff + count) * es + GUARD);
    gc_test_poison(xout_base, (aoff + count) * es + GUARD);
    xout = xout_base + aoff * es;
  }
  /* outputs, poisoned, with a guard after each */
  char *out_base = gc_test_alloc(off + count + GUARD), *out = out_base + off;
  gc_test_poison(out_base, off + count + GUARD);
  char *sc_base = gc_test_alloc((off + c->rows) * sizeof(float) + GUARD);
  gc_test_poison(sc_base, (off + c->rows) * sizeof(float) + GUARD);
  float *scales = (float *)(sc_base + off * sizeof(float)); /* off elements of 4 bytes: still 4-aligned */

  /* the reference, before the call: the residual in place is overwritten by it */
  unsigned char *res_host = has_res ? malloc(count * es) : NULL, *gamma_host = malloc(c->cols * es);
  double *x = malloc(count * sizeof(double)), *v = malloc(count * sizeof(double)),
         *ref_scale = calloc(c->rows, sizeof(double)), *r_row = malloc(c->rows * sizeof(double)),
         *row_max = calloc(c->rows, sizeof(double));
  CU_ASSERT_FATAL(gamma_host && x && v && ref_scale && r_row && row_max && (!has_res || res_host));
  if (has_res) gc_test_download(res_host, res, count * es);
  gc_test_download(gamma_host, gamma, c->cols * es);
  const int max_numerics = c->numerics == NUM_MAX;
  /* v: what is normalized (MAX: f, the float sum; ROUNDED: x, rounded to the input dtype) */
  for (size_t i = 0; i < count; i++) {
    const double f = f_ref(dt, salt, i, res_host);
    x[i] = x_ref(dt, f);
    v[i] = max_numerics ? f : x[i];
  }
  for (size_t row = 0; row < c->rows; row++) {
    double ss = 0;
    for (size_t j = 0; j < c->cols; j++) ss += v[row * c->cols + j] * v[row * c->cols + j];
    r_row[row] = 1.0 / sqrt(ss / (double)c->cols + 1e-6);
    for (size_t j = 0; j < c->cols; j++) {
      double y = v[row * c->cols + j] * r_row[row] * (gc__load_double(gamma_host, j, dt) + c->weight_offset);
      row_max[row] = fabs(y) > row_max[row] ? fabs(y) : row_max[row];
    }
    ref_scale[row] = max_numerics ? row_max[row] / fp8_max(ft) : fmax(row_max[row] / fp8_max(ft), 1.0 / (fp8_max(ft) * 512.0));
  }
  gc_rmsnorm_fp8_t m = GC_RMSNORM_FP8_INIT;
  m.gamma = gamma;
  m.epsilon = 1e-6f;
  m.weight_offset = c->weight_offset;
  /* a bound that binds: 0.7 x row 0's maximum (MAX) or scale (ROUNDED), which clips and
   * saturates rows */
  m.scale_ub = !c->bounded ? 0.0f : (float)(0.7 * (max_numerics ? row_max[0] : ref_scale[0]));
  m.residual = res;
  m.residual_out = xout;
  m.out_dtype = ft;
  if (c->numerics == NUM_ROUNDED) m.numerics = GC_NORM_ROUNDED;
  if (c->numerics == NUM_V1) { /* ends before numerics: what is there must not be read */
    m.version = 1;
    m.numerics = (gc_norm_numerics_t)77;
  }
  for (size_t row = 0; row < c->rows; row++) {
    if (m.scale_ub > 0 && max_numerics && row_max[row] > m.scale_ub) ref_scale[row] = m.scale_ub / fp8_max(ft);
    if (m.scale_ub > 0 && !max_numerics && ref_scale[row] > m.scale_ub) ref_scale[row] = m.scale_ub;
  }
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = c->algo;
  o.max_blocks = c->max_blocks;

  gc_result_t rc;
  if (replays) {
    void *stream = NULL, *exec = NULL;
    GC_TEST_OK(gc_comm_stream(comm, &stream));
    CU_ASSERT_EQUAL_FATAL(gc_test_capture(stream, 1, NULL), 0);
    rc = gc_allreduce_rmsnorm_fp8(send, out, scales, c->rows, c->cols, dt, &m, comm, stream, &o);
    int e = gc_test_capture(stream, 0, &exec);
    /* the residual in place must see the same input on every replay: not a case for graphs */
    for (int k = 0; rc == GC_SUCCESS && !e && k < replays; k++) e = gc_test_replay(exec, stream);
    if (rc == GC_SUCCESS) rc = gc_synchronize(comm, stream);
    gc_test_graph_destroy(exec);
    CU_ASSERT_EQUAL(e, 0);
  } else {
    rc = gc_allreduce_rmsnorm_fp8(send, out, scales, c->rows, c->cols, dt, &m, comm, NULL, &o);
    if (rc == GC_SUCCESS) rc = gc_synchronize(comm, NULL);
  }
  /* MAX's LL kernel holds one 16-byte pack a thread: rows of more than 512 packs may be refused
   * (by the plan's blocks a row), never narrower ones */
  if (rc == GC_ERR_UNSUPPORTED && c->numerics == NUM_MAX && c->algo == GC_ALGO_ONESHOT_LL &&
      c->cols * es / 16 > GC_KTHREADS && strstr(gc_comm_last_error(comm), "one 16-byte pack a thread")) {
    free(res_host);
    free(gamma_host);
    free(x);
    free(v);
    free(ref_scale);
    free(r_row);
    free(row_max);
    gc_test_free_as(c->symmetric, send_base);
    gc_test_free(gamma_base);
    gc_test_free(res_base);
    gc_test_free(xout_base);
    gc_test_free(out_base);
    gc_test_free(sc_base);
    return 1;
  }
  int ok = rc == GC_SUCCESS;
  if (!ok) fprintf(stderr, "[rank %d] %s: %s: %s\n", gc_test_rank, what, gc_result_name(rc), gc_comm_last_error(comm));

  unsigned char *out_host = malloc(count + GUARD), *sc_host = malloc(c->rows * sizeof(float) + GUARD);
  unsigned char *x_host = keeps_x ? malloc(count * es + GUARD) : NULL;
  CU_ASSERT_FATAL(out_host && sc_host && (!keeps_x || x_host));
  /* every output downloaded with the guard after it (& not &&: all of them, whatever the first) */
  const int kept = gc_test_fetch_checked(out_host, out, count, 1, what) &
                   gc_test_fetch_checked(sc_host, scales, c->rows * sizeof(float), 1, what) &
                   (!keeps_x || gc_test_fetch_checked(x_host, xout, count * es, 1, what));
  ok = ok && kept;
  size_t wrong = 0;
  for (size_t row = 0; ok && row < c->rows; row++) {
    float got_scale;
    memcpy(&got_scale, sc_host + row * sizeof(float), sizeof got_scale);
    if (!(fabs(got_scale - ref_scale[row]) <= 1e-4 * ref_scale[row])) {
      if (wrong++ < 4)
        fprintf(stderr, "[rank %d] %s: row %zu scale %.9g, expected %.9g\n", gc_test_rank, what, row, got_scale,
                ref_scale[row]);
      continue;
    }
    for (size_t j = 0; j < c->cols; j++) {
      const size_t i = row * c->cols + j;
      if (keeps_x && gc__load_double(x_host, i, dt) != x[i]) {
        if (wrong++ < 4)
          fprintf(stderr, "[rank %d] %s: residual_out[%zu] = %.9g, expected %.9g\n", gc_test_rank, what, i,
                  gc__load_double(x_host, i, dt), x[i]);
        continue;
      }
      /* against the rank's own scale: the fp8 value of y / scale, clipped at FP8_MAX, within
       * one fp8 step (float rounding of r and y may tip a value to its neighbour) */
      double y = v[i] * r_row[row] * (gc__load_double(gamma_host, j, dt) + c->weight_offset);
      double want = got_scale > 0 ? y / got_scale : 0.0, got = gc__load_double(out_host, i, ft);
      want = fmax(-fp8_max(ft), fmin(fp8_max(ft), want));
      if (!(fabs(got - want) <= fp8_ulp(ft, fabs(want)) * 1.0001)) {
        if (wrong++ < 4)
          fprintf(stderr, "[rank %d] %s: out[%zu] (row %zu) = %.9g, expected %.9g\n", gc_test_rank, what, i, row, got,
                  want);
      }
    }
  }
  if (wrong) {
    fprintf(stderr, "[rank %d] %s: %zu wrong\n", gc_test_rank, what, wrong);
    ok = 0;
  }
  /* every rank computed the same bits */
  int same = gc_test_same_on_all_ranks(out_host, count) && gc_test_same_on_all_ranks(sc_host, c->rows * sizeof(float));
  if (!same) fprintf(stderr, "[rank %d] %s: ranks differ\n", gc_test_rank, what);
  ok = ok && same;

  free(out_host);
  free(sc_host);
  free(x_host);
  free(res_host);
  free(gamma_host);
  free(x);
  free(v);
  free(ref_scale);
  free(r_row);
  free(row_max);
  gc_test_free_as(c->symmetric, send_base);
  gc_test_free(gamma_base);
  gc_test_free(res_base);
  gc_test_free(xout_base);
  gc_test_free(out_base);
  gc_test_free(sc_base);
  return ok;
}

static const gc_dtype_t in_types[] = {GC_BFLOAT16, GC_FLOAT16, GC_FLOAT32};

/* Every input dtype x both fp8 outputs x shapes (one element, odd, vector rows with a tail,
 * wide rows) x residual forms, offsets and bounds, in both numerics; a version-1 struct means
 * ROUNDED. Host buffers take the MPI path, whose host loop normalizes. */
static void test_shapes(void) {
  static const size_t shapes[][2] = {{1, 1}, {3, 7}, {2, 4099}, {17, 1000}, {5, 8192}};
  int bad = 0;
  for (int nm = 0; nm < 3; nm++) {
    int k = 0;
    for (int d = 0; d < 3; d++)
      for (int f = 0; f < 2; f++)
        for (int s = 0; s < 5; s++, k++) {
          if (nm == NUM_V1 && k % 4) continue; /* a few suffice */
          rn_case_t c = {in_types[d], f ? GC_FP8_E5M2 : GC_FP8_E4M3, shapes[s][0], shapes[s][1], k % 5,
                         (float)(k % 2), k % 3 == 0, GC_ALGO_AUTO, 0, (size_t)(k % 4 == 1), 0, 0, nm};
          bad += !run_case(gc_test_comm, &c, 0);
        }
  }
  CU_ASSERT(gc_test_all(bad == 0));
}

/* On GPUs, each way the library computes it: the fused kernels, barrier-free (LL; x in shared
 * memory or residual_out), one-shot and two-shot by reads (plain and gc_mem_alloc inputs, aligned
 * and not; two-shot without residual_out, else the two-shot all-reduce then the normalizing
 * kernel), the all-reduce by writes then that kernel, and the MPI path on device buffers then it. */
static void test_algorithms(void) {
  if (!gc_test_peer_gpus("rmsnorm algorithms", 1)) return;
  static const gc_algo_t algos[] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT, GC_ALGO_WRITES,
                                    GC_ALGO_MPI};
  int bad = 0;
  for (int nm = 0; nm < 2; nm++) /* MAX, ROUNDED */
    for (int a = 0; a < 5; a++)
      for (int d = 0; d < 3; d++)
        for (int v = 0; v < (a == 0 ? 2 : 4); v++) { /* LL: whole 16-byte packs (below: the refusal) */
          rn_case_t c = {in_types[d], v & 1 ? GC_FP8_E5M2 : GC_FP8_E4M3, v < 2 ? 33 : 4, v < 2 ? 4096 : 12289,
                         v == 0 ? RES_IN_PLACE : v == 1 ? RES_NOT_KEPT : RES_SEPARATE, v == 3 ? 1.0f : 0.0f,
                         v == 2 || (a == 0 && v == 1), algos[a], v >= 2 && algos[a] != GC_ALGO_MPI,
                         (size_t)(v == 3 ? 3 : 0), 0, 0, nm};
          bad += !run_case(gc_test_comm, &c, 0);
        }
  CU_ASSERT(gc_test_all(bad == 0));
}

/* 1 MB of staging: the fused kernels take 4 MB of rows in chunks (one-shot: x in staging, and in
 * residual_out; two-shot), and the one-shot refuses a row larger than half of it when forced on
 * 2+ GPUs (one GPU reads its input in place);
 * the table's choice then goes through the all-reduce. */
static void test_chunks(void) {
  if (!gc_test_peer_gpus("rmsnorm chunks", 1)) return;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.staging_bytes = (size_t)1 << 20;
  gc_comm_t small = NULL;
  GC_TEST_OK(gc_comm_init(&small, MPI_COMM_WORLD, &cfg));
  int bad = 0;
  for (int nm = 0; nm < 2; nm++) { /* MAX, ROUNDED (x in staging) */
    rn_case_t c = {GC_BFLOAT16, GC_FP8_E4M3, 256, 8192, RES_NONE, 0.0f, 0, GC_ALGO_ONESHOT, 0, 0, 0, 0, nm};
    bad += !run_case(small, &c, 0);
    c.algo = GC_ALGO_TWOSHOT; /* 63 rows a chunk: uneven shares */
    bad += !run_case(small, &c, 0);
    c.algo = GC_ALGO_ONESHOT;
    c.residual = RES_SEPARATE;
    c.symmetric = 0;
    bad += !run_case(small, &c, 0);
    c.dtype = GC_FLOAT32;
    c.cols = 200000; /* 800 KB rows: more than half the staging */
    c.rows = 2;
    c.residual = RES_NONE;
    c.algo = GC_ALGO_AUTO;
    bad += !run_case(small, &c, 0);
  }
  /* forced, the same call is refused, naming the staging area */
  void *buf = gc_test_alloc(2 * 200000 * 4), *out = gc_test_alloc(2 * 200000), *sc = gc_test_alloc(8),
       *gamma = gc_test_alloc(200000 * 4);
  gc_rmsnorm_fp8_t m = GC_RMSNORM_FP8_INIT;
  m.gamma = gamma;
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_ONESHOT;
  gc_result_t r = gc_allreduce_rmsnorm_fp8(buf, out, sc, 2, 200000, GC_FLOAT32, &m, small, NULL, &o);
  int lsize = 0;
  GC_TEST_OK(gc_comm_local_size(small, &lsize));
  if (lsize == 1) { /* one GPU: the kernel reads the input in place, no staging */
    GC_TEST_OK(r);
    GC_TEST_OK(gc_synchronize(small, NULL));
  } else {
    CU_ASSERT_EQUAL(r, GC_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(small), "GC_STAGING_BYTES"));
  }
  gc_test_free(buf);
  gc_test_free(out);
  gc_test_free(sc);
  gc_test_free(gamma);
  GC_TEST_OK(gc_comm_destroy(small));
  CU_ASSERT(gc_test_all(bad == 0));
}

/* Captured into a CUDA graph and replayed: the fused kernels and the composed path, whose
 * temporary for x is allocated and freed inside the graph. */
static void test_graph(void) {
  if (!gc_test_peer_gpus("rmsnorm graph replay", 1)) return;
  int bad = 0;
  for (int nm = 0; nm < 2; nm++) { /* MAX, ROUNDED */
    rn_case_t c = {GC_BFLOAT16, GC_FP8_E4M3, 8, 4096, RES_SEPARATE, 0.0f, 0, GC_ALGO_ONESHOT, 0, 0, 0, 0, nm};
    bad += !run_case(gc_test_comm, &c, 3);
    c.algo = GC_ALGO_TWOSHOT; /* fused two-shot */
    c.residual = RES_NOT_KEPT;
    bad += !run_case(gc_test_comm, &c, 3);
    c.algo = GC_ALGO_WRITES; /* the all-reduce into a temporary (MAX: float32), then the kernel */
    c.residual = RES_SEPARATE;
    bad += !run_case(gc_test_comm, &c, 3);
  }
  CU_ASSERT(gc_test_all(bad == 0));
}

/* Under 64 rows a row is split over a cluster of blocks; with max_blocks 16 a few clusters take
 * all 50 rows in turn (8192 bf16 and float32 a row), so their partial sums go through the
 * cluster's alternating slots row after row. */
static void test_cluster_rows(void) {
  if (!gc_test_peer_gpus("rmsnorm clusters over several rows", 1)) return;
  static const gc_algo_t algos[] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT};
  int bad = 0;
  for (int nm = 0; nm < 2; nm++) /* MAX (two cluster reductions a row), ROUNDED */
    for (int a = 0; a < 3; a++)
      for (int d = 0; d < 2; d++) {
        rn_case_t c = {d ? GC_FLOAT32 : GC_BFLOAT16, GC_FP8_E4M3, 50, 8192, a == 2 ? RES_NONE : RES_SEPARATE, 0.0f,
                       0, algos[a], 1, 0, 16, 0, nm};
        bad += !run_case(gc_test_comm, &c, 0);
      }
  CU_ASSERT(gc_test_all(bad == 0));
}

/* Rows that are not whole 16-byte packs, and arrays off 16-byte boundaries, on GPUs. Where the
 * inputs sit on 16-byte boundaries (staging, or gc_mem_alloc at an aligned offset) the kernel reads
 * them by their own packs, one of which may hold the ends of two rows; else element by element.
 * x in residual_out, in shared memory, or read back (the composed path); rows under 64 (clusters,
 * whose shares differ row by row) and from 64; 1 to 7 elements over whole packs, or none with
 * gamma, residual and residual_out off 16-byte boundaries. */
static void test_odd_widths(void) {
  if (!gc_test_peer_gpus("rmsnorm odd widths", 1)) return;
  static const struct {
    gc_dtype_t dtype;
    size_t rows, cols;
  } shapes[] = {{GC_BFLOAT16, 70, 8191}, {GC_FLOAT16, 9, 999}, {GC_FLOAT32, 20, 4097}, {GC_BFLOAT16, 3, 4101},
                {GC_BFLOAT16, 65, 4096}};
  static const int residuals[] = {RES_SEPARATE, RES_NOT_KEPT, RES_NONE, RES_IN_PLACE};
  int bad = 0;
  for (int nm = 0; nm < 2; nm++) /* MAX (further packs summed again), ROUNDED (x read back) */
    for (int s = 0; s < 5; s++)
      for (int a = 0; a < 2; a++)
        for (int v = 0; v < 4; v++) { /* plain or gc_mem_alloc input, at offset 0 or 1 */
          rn_case_t c = {shapes[s].dtype, v & 1 ? GC_FP8_E5M2 : GC_FP8_E4M3, shapes[s].rows, shapes[s].cols,
                         residuals[v], 0.0f, 0, a ? GC_ALGO_WRITES : GC_ALGO_AUTO, v & 1, (size_t)(v >= 2), 0,
                         0, nm};
          bad += !run_case(gc_test_comm, &c, 0);
        }
  CU_ASSERT(gc_test_all(bad == 0));
}

/* Rows that fill the 48 KB of shared memory a row may take there (no residual_out: x kept in
 * shared memory, static and dynamic over the 48 KB a block gets unasked): from 64 rows a row a
 * block (one-shot, two-shot, and LL where the rows fit its area; one call graph-captured), under
 * 64 rows a cluster's share. */
static void test_full_shared_rows(void) {
  if (!gc_test_peer_gpus("rmsnorm rows that fill shared memory", 1)) return;
  static const rn_case_t cases[] = {
      {GC_BFLOAT16, GC_FP8_E4M3, 64, 24576, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_ONESHOT, 1, 0, 0, 0, 0},
      {GC_FLOAT32, GC_FP8_E5M2, 64, 12288, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_ONESHOT, 0, 0, 0, 0, 0},
      {GC_BFLOAT16, GC_FP8_E4M3, 70, 24567, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_ONESHOT, 0, 0, 0, 0, 0},
      {GC_BFLOAT16, GC_FP8_E5M2, 130, 24576, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_TWOSHOT, 0, 0, 0, 0, 0},
      {GC_FLOAT16, GC_FP8_E4M3, 70, 24576, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_ONESHOT_LL, 0, 0, 0, 0, 0},
      {GC_BFLOAT16, GC_FP8_E5M2, 5, 24576, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_AUTO, 0, 0, 0, 0, 0}};
  int bad = 0;
  for (int nm = 0; nm < 2; nm++) /* ROUNDED keeps x there; MAX sums a thread's further packs again */
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
      rn_case_t c = cases[k];
      c.numerics = nm ? NUM_MAX : NUM_ROUNDED;
      const size_t bytes = c.rows * c.cols * gc_dtype_size(c.dtype);
      if (c.algo == GC_ALGO_ONESHOT_LL && bytes > GC_LL_GEN_BYTES / (size_t)gc_test_size) continue;
      bad += !run_case(gc_test_comm, &c, k == 1 ? 2 : 0); /* one under graph capture */
    }
  CU_ASSERT(gc_test_all(bad == 0));
}

/* gamma, residual and residual_out at other alignments on odd ranks than on even ones (each
 * rank's own memory): every rank must still take the same kernel and grid, or they wait for each
 * other until GC_TIMEOUT_MS. The barrier-free kernel (LL: x in residual_out and in shared memory),
 * the one-shot, and the two-shot with plain and gc_mem_alloc inputs and rows over clusters. */
static void test_skewed_ranks(void) {
  if (!gc_test_peer_gpus("rmsnorm pointers aligned differently on each rank", 1)) return;
  static const rn_case_t cases[] = {
      {GC_BFLOAT16, GC_FP8_E4M3, 8, 4096, RES_SEPARATE, 0.0f, 0, GC_ALGO_AUTO, 0, 0, 0, 1, 0},
      {GC_FLOAT16, GC_FP8_E5M2, 8, 4096, RES_NOT_KEPT, 1.0f, 0, GC_ALGO_ONESHOT_LL, 0, 0, 0, 3, 0},
      {GC_FLOAT32, GC_FP8_E4M3, 70, 2048, RES_IN_PLACE, 0.0f, 0, GC_ALGO_ONESHOT_LL, 0, 0, 0, 1, 0},
      {GC_BFLOAT16, GC_FP8_E4M3, 16, 8192, RES_SEPARATE, 0.0f, 0, GC_ALGO_ONESHOT, 0, 0, 0, 5, 0},
      {GC_BFLOAT16, GC_FP8_E4M3, 32, 1032, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_TWOSHOT, 0, 0, 0, 1, 0},
      {GC_FLOAT32, GC_FP8_E5M2, 130, 4096, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_TWOSHOT, 1, 0, 0, 2, 0},
      {GC_BFLOAT16, GC_FP8_E4M3, 33, 8192, RES_NONE, 0.0f, 0, GC_ALGO_TWOSHOT, 1, 0, 0, 7, 0},
      /* rows of a block each that fill shared memory (48 KB): the odd ranks' residual off 16
       * bytes once took a thread per element there, the even ranks packs (other bits) */
      {GC_FLOAT32, GC_FP8_E5M2, 64, 12288, RES_NOT_KEPT, 0.0f, 0, GC_ALGO_ONESHOT, 0, 0, 0, 1, 0}};
  int bad = 0;
  for (int nm = 0; nm < 2; nm++) /* MAX, ROUNDED */
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
      rn_case_t c = cases[k];
      c.numerics = nm;
      bad += !run_case(gc_test_comm, &c, 0);
    }
  CU_ASSERT(gc_test_all(bad == 0));
}

/* Only rank 0 calls: each fused kernel (LL waiting on data, one-shot and two-shot at barriers, a
 * row over a cluster of 8 blocks and rows of a block each) gives up after 300 ms, the call's error
 * surfaces as GC_ERR_TIMEOUT, and the communicator stays failed: no hang. No CUDA fault either:
 * a call on another communicator afterwards is right. */
static void test_timeout(void) {
  if (!gc_test_peer_gpus("rmsnorm forced timeout", 2)) return;
  if (gc_test_comm->check_calls == GC_CHECK_EVERY_CALL) { /* the lone call would time out comparing, on the host */
    gc_test_note("rmsnorm forced timeout: kernels' timeouts need GC_CHECK_CALLS unset; skipped");
    return;
  }
  static const gc_algo_t algos[] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT};
  for (int a = 0; a < 3; a++)
    for (size_t rows = 1; rows <= 100; rows += 99) {
      const size_t cols = 8192, count = rows * cols;
      gc_comm_t c = NULL;
      gc_config_t cfg = GC_CONFIG_INIT;
      cfg.timeout_ms = 300;
      GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
      char *send = gc_test_alloc(count * 2), *out = gc_test_alloc(count), *gamma = gc_test_alloc(cols * 2);
      float *sc = gc_test_alloc(rows * sizeof(float));
      gc_test_fill(send, count, GC_BFLOAT16, gc_test_rank, 900);
      gc_test_fill(gamma, cols, GC_BFLOAT16, -1, 901);
      gc_rmsnorm_fp8_t m = GC_RMSNORM_FP8_INIT;
      m.gamma = gamma;
      m.numerics = rows == 1 ? GC_NORM_MAX : GC_NORM_ROUNDED; /* MAX's LL takes 100 such rows one pack a thread */
      gc_options_t o = GC_OPTIONS_INIT;
      o.algo = algos[a];
      void *stream = NULL;
      GC_TEST_OK(gc_comm_stream(c, &stream));
      if (gc_test_rank == 0) {
        GC_TEST_OK(gc_allreduce_rmsnorm_fp8(send, out, sc, rows, cols, GC_BFLOAT16, &m, c, stream, &o));
        gc_result_t r = gc_synchronize(c, stream);
        if (r != GC_ERR_TIMEOUT)
          fprintf(stderr, "[rank 0] rmsnorm timeout, %s, %zu rows: %s (%s)\n", gc_algo_name(algos[a]), rows,
                  gc_result_name(r), gc_comm_last_error(c));
        CU_ASSERT_EQUAL(r, GC_ERR_TIMEOUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), "GC_TIMEOUT_MS"));
        CU_ASSERT_EQUAL(gc_allreduce_rmsnorm_fp8(send, out, sc, rows, cols, GC_BFLOAT16, &m, c, stream, &o),
                        GC_ERR_TIMEOUT);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      gc_test_free(send);
      gc_test_free(out);
      gc_test_free(gamma);
      gc_test_free(sc);
      gc_result_t r = gc_comm_destroy(c);
      CU_ASSERT(r == GC_SUCCESS || (gc_test_rank == 0 && r == GC_ERR_TIMEOUT));
    }
  rn_case_t c = {GC_BFLOAT16, GC_FP8_E4M3, 1, 8192, RES_SEPARATE, 0.0f, 0, GC_ALGO_ONESHOT_LL, 0, 0, 0, 0, 0};
  CU_ASSERT(gc_test_all(run_case(gc_test_comm, &c, 0)));
}

/* Bad arguments: the code and the message say which, and nothing is written. */
static void test_errors(void) {
  const size_t rows = 2, cols = 16;
  char *send = gc_test_alloc(rows * cols * 2), *out = gc_test_alloc(rows * cols + 64), *gamma = gc_test_alloc(cols * 2);
  float *sc = gc_test_alloc(rows * sizeof(float));
  gc_test_fill(send, rows * cols, GC_BFLOAT16, gc_test_rank, 1);
  gc_test_fill(gamma, cols, GC_BFLOAT16, -1, 2);
  gc_rmsnorm_fp8_t ok = GC_RMSNORM_FP8_INIT;
  ok.gamma = gamma;
  struct {
    const char *what, *message;
    gc_result_t code;
  } want[] = {
      {"NULL norm", "norm is NULL", GC_ERR_INVALID_ARGUMENT},
      {"version", "version is 7", GC_ERR_INVALID_ARGUMENT},
      {"float64 input", "float32, float16 or bfloat16", GC_ERR_UNSUPPORTED},
      {"fp8 input", "cannot be reduced", GC_ERR_UNSUPPORTED},
      {"bf16 output", "norm.out_dtype must be fp8", GC_ERR_INVALID_ARGUMENT},
      {"no gamma", "norm.gamma is NULL", GC_ERR_INVALID_ARGUMENT},
      {"negative epsilon", "norm.epsilon", GC_ERR_INVALID_ARGUMENT},
      {"NaN scale bound", "norm.scale_ub", GC_ERR_INVALID_ARGUMENT},
      {"out over send", "outbuf overlaps sendbuf", GC_ERR_INVALID_ARGUMENT},
      {"scales over out", "scales overlaps outbuf", GC_ERR_INVALID_ARGUMENT},
      {"epilogue", "takes no epilogue", GC_ERR_INVALID_ARGUMENT},
      {"no scales", "scales is NULL", GC_ERR_INVALID_ARGUMENT},
      {"unknown numerics", "norm.numerics 5 is not", GC_ERR_INVALID_ARGUMENT},
      {"negative numerics", "norm.numerics -1 is not", GC_ERR_INVALID_ARGUMENT},
  };
  for (int k = 0; k < (int)(sizeof want / sizeof want[0]); k++) {
    gc_rmsnorm_fp8_t m = ok;
    gc_options_t o = GC_OPTIONS_INIT;
    const void *s = send;
    void *dst = out;
    float *scales = sc;
    gc_dtype_t dt = GC_BFLOAT16;
    switch (k) {
      case 1: m.version = 7; break;
      case 2: dt = GC_FLOAT64; break;
      case 3: dt = GC_FP8_E4M3; break;
      case 4: m.out_dtype = GC_BFLOAT16; break;
      case 5: m.gamma = NULL; break;
      case 6: m.epsilon = -1.0f; break;
      case 7: m.scale_ub = NAN; break;
      case 8: dst = send + 8; break;
      case 9: scales = (float *)(out + 16); break;
      case 10: o.scale = 0.5; break;
      case 11: scales = NULL; break;
      case 12: m.numerics = (gc_norm_numerics_t)5; break;
      case 13: m.numerics = (gc_norm_numerics_t)-1; break;
    }
    gc_result_t r = gc_allreduce_rmsnorm_fp8(s, dst, scales, rows, cols, dt, k == 0 ? NULL : &m, gc_test_comm, NULL, &o);
    const char *msg = gc_comm_last_error(gc_test_comm);
    if (r != want[k].code || !strstr(msg, want[k].message))
      fprintf(stderr, "[rank %d] rmsnorm error case '%s': %s (%s)\n", gc_test_rank, want[k].what, gc_result_name(r), msg);
    CU_ASSERT_EQUAL(r, want[k].code);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, want[k].message));
  }
  /* nothing to do is a success that touches nothing */
  gc_test_poison(out, rows * cols);
  GC_TEST_OK(gc_allreduce_rmsnorm_fp8(send, out, sc, 0, cols, GC_BFLOAT16, &ok, gc_test_comm, NULL, NULL));
  unsigned char host[32];
  gc_test_download(host, out, sizeof host);
  for (size_t b = 0; b < sizeof host; b++) CU_ASSERT_EQUAL(host[b], 0xff);
  if (gc_test_peer_gpus("rmsnorm LL refusal", 1)) { /* LL takes whole 16-byte packs only */
    gc_options_t o = GC_OPTIONS_INIT;
    o.algo = GC_ALGO_ONESHOT_LL;
    gc_result_t r = gc_allreduce_rmsnorm_fp8(send, out, sc, 2, 15, GC_BFLOAT16, &ok, gc_test_comm, NULL, &o);
    CU_ASSERT_EQUAL(r, GC_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "16-byte packs"));
    /* MAX's LL kernel: one pack a thread; a row of 2048 packs on one block is refused, ROUNDED
     * (x in residual_out) takes it */
    const size_t wide = 16384;
    char *wsend = gc_test_alloc(2 * wide * 2), *wout = gc_test_alloc(2 * wide), *wgamma = gc_test_alloc(wide * 2),
         *wx = gc_test_alloc(2 * wide * 2);
    float *wsc = gc_test_alloc(2 * sizeof(float));
    gc_test_fill(wsend, 2 * wide, GC_BFLOAT16, gc_test_rank, 3);
    gc_test_fill(wgamma, wide, GC_BFLOAT16, -1, 4);
    gc_rmsnorm_fp8_t m = ok;
    m.gamma = wgamma;
    m.residual_out = wx;
    o.max_blocks = 1;
    r = gc_allreduce_rmsnorm_fp8(wsend, wout, wsc, 2, wide, GC_BFLOAT16, &m, gc_test_comm, NULL, &o);
    CU_ASSERT_EQUAL(r, GC_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "one 16-byte pack a thread"));
    m.numerics = GC_NORM_ROUNDED;
    GC_TEST_OK(gc_allreduce_rmsnorm_fp8(wsend, wout, wsc, 2, wide, GC_BFLOAT16, &m, gc_test_comm, NULL, &o));
    GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
    gc_test_free(wsend);
    gc_test_free(wout);
    gc_test_free(wgamma);
    gc_test_free(wx);
    gc_test_free(wsc);
  }
  if (gc_test_on_gpu) { /* a host gamma beside device buffers */
    unsigned char hg[32] = {0};
    gc_rmsnorm_fp8_t m = ok;
    m.gamma = hg;
    gc_result_t r = gc_allreduce_rmsnorm_fp8(send, out, sc, rows, cols, GC_BFLOAT16, &m, gc_test_comm, NULL, NULL);
    CU_ASSERT_EQUAL(r, GC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "not some of each"));
  }
  gc_test_free(send);
  gc_test_free(out);
  gc_test_free(gamma);
  gc_test_free(sc);
}

/* The numerics' names both ways; GC_NORM_MAX is 0, the default a zeroed field gives. */
static void test_numerics_names(void) {
  CU_ASSERT_EQUAL(GC_NORM_MAX, 0);
  gc_rmsnorm_fp8_t m = GC_RMSNORM_FP8_INIT;
  CU_ASSERT_EQUAL(m.numerics, GC_NORM_MAX);
  CU_ASSERT_EQUAL(m.version, 2);
  CU_ASSERT_STRING_EQUAL(gc_norm_numerics_name(GC_NORM_MAX), "max");
  CU_ASSERT_STRING_EQUAL(gc_norm_numerics_name(GC_NORM_ROUNDED), "rounded");
  CU_ASSERT_PTR_NULL(gc_norm_numerics_name(GC_NUM_NORM_NUMERICS));
  CU_ASSERT_PTR_NULL(gc_norm_numerics_name((gc_norm_numerics_t)-1));
  gc_norm_numerics_t n = GC_NORM_MAX;
  CU_ASSERT_EQUAL(gc_norm_numerics_from_name("rounded", &n), GC_SUCCESS);
  CU_ASSERT_EQUAL(n, GC_NORM_ROUNDED);
  CU_ASSERT_EQUAL(gc_norm_numerics_from_name("max", &n), GC_SUCCESS);
  CU_ASSERT_EQUAL(n, GC_NORM_MAX);
  CU_ASSERT_EQUAL(gc_norm_numerics_from_name("fast", &n), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "unknown norm numerics 'fast'"));
  CU_ASSERT_EQUAL(n, GC_NORM_MAX);
  CU_ASSERT_EQUAL(gc_norm_numerics_from_name(NULL, &n), GC_ERR_INVALID_ARGUMENT);
}

void gc_test_suite_rmsnorm(void) {
  static const gc_test_case_t tests[] = {
      {"rmsnorm shapes, dtypes and residual forms", test_shapes},
      {"rmsnorm algorithms on GPUs", test_algorithms},
      {"rmsnorm chunks through 1 MB of staging", test_chunks},
      {"rmsnorm graph replay", test_graph},
      {"rmsnorm clusters over several rows", test_cluster_rows},
      {"rmsnorm odd widths and offsets", test_odd_widths},
      {"rmsnorm rows that fill shared memory", test_full_shared_rows},
      {"rmsnorm pointers aligned differently on each rank", test_skewed_ranks},
      {"rmsnorm forced timeout", test_timeout},
      {"rmsnorm bad arguments", test_errors},
      {"rmsnorm numerics names", test_numerics_names},
      {NULL, NULL},
  };
  gc_test_add_suite("rmsnorm", tests);
}
