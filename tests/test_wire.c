/* test_wire.c — the compressed wire formats on the host: e4m3 codes and scales at their edges,
 * CUDA's own conversions (test_wire_nv.cpp), and the whole all-reduce over the wire simulated
 * for n ranks (one-shot on every rank, two-shot by owners) against a float64 reference and the
 * error bound of docs/wire-format.md, with every rank's bits compared. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_rng.h"
#include "gc_test.h"
#include "gc_plan.h"
#include "gc_wire.h"

long gc_test_wire_cuda_mismatches(void);

/* ---- codes and scales ------------------------------------------------------------------------ */

static void test_cuda_agreement(void) { CU_ASSERT_EQUAL(gc_test_wire_cuda_mismatches(), 0); }

static void test_codes(void) {
  for (int c = 0; c < 256; c++) {
    if (c == 0x7F || c == 0xFF || c == 0x80) continue;
    const int e = (c >> 3) & 15, m = c & 7;
    const double want = (c & 0x80 ? -1 : 1) * (e ? ldexp(8 + m, e - 10) : ldexp(m, -9));
    for (int k = GC_WIRE_KMIN; k <= GC_WIRE_KMAX; k += 49) {
      const float v = gc_wire_fp8_decode((uint8_t)c, (uint8_t)(k + 127));
      CU_ASSERT_EQUAL((double)v, ldexp(want, k));
      /* every finite code but the zeros comes back from its own value */
      if (c & 0x7F && !(k == GC_WIRE_KMAX && (c & 0x7F) > 0x77)) CU_ASSERT_EQUAL(gc_wire_fp8_encode(v, k), c);
    }
  }
  CU_ASSERT(isnan(gc_wire_fp8_decode(GC_WIRE_FP8_NAN, 127)));
  CU_ASSERT_EQUAL(gc_wire_fp8_decode(GC_WIRE_FP8_POS_INF, 3), INFINITY);
  CU_ASSERT_EQUAL(gc_wire_fp8_decode(GC_WIRE_FP8_NEG_INF, 200), -INFINITY);
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(NAN, 0), GC_WIRE_FP8_NAN);
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(-NAN, 9), GC_WIRE_FP8_NAN);
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(INFINITY, 0), GC_WIRE_FP8_POS_INF);
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(-INFINITY, 0), GC_WIRE_FP8_NEG_INF);
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(-0.0f, 0), 0);       /* zeros are 0x00, never 0x80 */
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(-1e-30f, 0), 0);     /* ... also once rounded to zero */
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(448.0f, 0), 0x7E);   /* the largest code, exact */
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(1e9f, 0), 0x7E);     /* saturates (never with a group's own k) */
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(ldexpf(1, -10), 0), 0);          /* half the least step: tie to even */
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(ldexpf(1.5f, -10), 0), 1);
  CU_ASSERT_EQUAL(gc_wire_fp8_encode(ldexpf(3, -10), 0), 2);          /* 1.5 steps: tie to even */
}

/* The exponent is the least k >= -127 with max <= 448 * 2^k. */
static void test_exponents(void) {
  uint64_t seed = gc_test_seed;
  static const float edges[] = {448.0f, 448.00003f, 447.99997f, 1.0f, 0.0f, 1e-45f, 1e-39f, 2.6e-36f, FLT_MAX, 224.0f};
  for (int t = 0; t < 20000; t++) {
    float a;
    if (t < (int)(sizeof edges / sizeof edges[0])) a = edges[t];
    else {
      uint32_t b = (uint32_t)(gc__mix64(seed + t) & 0x7FFFFFFFu);
      if (b >= 0x7F800000u) b -= 0x7F800000u;
      memcpy(&a, &b, 4);
    }
    const int k = gc_wire_fp8_exponent(gc_wire_finite_mag(a));
    CU_ASSERT((double)a <= ldexp(448, k));
    CU_ASSERT(k == GC_WIRE_KMIN || (double)a > ldexp(448, k - 1));
    CU_ASSERT(k >= GC_WIRE_KMIN && k <= GC_WIRE_KMAX);
  }
  CU_ASSERT_EQUAL(gc_wire_fp8_exponent(gc_wire_finite_mag(448.0f)), 0);
  CU_ASSERT_EQUAL(gc_wire_fp8_exponent(gc_wire_finite_mag(449.0f)), 1);
  CU_ASSERT_EQUAL(gc_wire_fp8_exponent(gc_wire_finite_mag(FLT_MAX)), GC_WIRE_KMAX);
  CU_ASSERT_EQUAL(gc_wire_finite_mag(NAN), 0);
  CU_ASSERT_EQUAL(gc_wire_finite_mag(-INFINITY), 0);
}

static void test_groups_at_edges(void) {
  float x[32];
  uint8_t c[32], s;
  /* zeros: scale 2^-127, codes 0, values +0 */
  for (int i = 0; i < 32; i++) x[i] = i % 2 ? -0.0f : 0.0f;
  gc_wire_fp8_pack_group(x, 32, 32, c, &s);
  CU_ASSERT_EQUAL(s, 0);
  for (int i = 0; i < 32; i++) CU_ASSERT(c[i] == 0 && gc_wire_bits(gc_wire_fp8_decode(c[i], s)) == 0);
  /* near FLT_MAX: finite codes that decode finite, within 2^-4 */
  for (int i = 0; i < 32; i++) x[i] = (i % 2 ? -1 : 1) * FLT_MAX * (1.0f - i / 64.0f);
  gc_wire_fp8_pack_group(x, 32, 32, c, &s);
  for (int i = 0; i < 32; i++) {
    const float v = gc_wire_fp8_decode(c[i], s);
    CU_ASSERT(isfinite(v) && fabs((double)v - x[i]) <= ldexp(fabs(x[i]), -4));
  }
  /* float denormals: the scale floor 2^-127 keeps them to 2^-137 */
  for (int i = 0; i < 32; i++) x[i] = ldexpf(1.0f + i, -140);
  gc_wire_fp8_pack_group(x, 32, 32, c, &s);
  CU_ASSERT_EQUAL(s, 0);
  for (int i = 0; i < 32; i++) CU_ASSERT(fabs((double)gc_wire_fp8_decode(c[i], s) - x[i]) <= fmax(ldexp(fabs(x[i]), -4), ldexp(1, -137)));
  /* NaN and Inf take no part in the scale */
  for (int i = 0; i < 32; i++) x[i] = 1.0f;
  x[3] = NAN, x[4] = INFINITY, x[5] = -INFINITY;
  gc_wire_fp8_pack_group(x, 32, 32, c, &s);
  CU_ASSERT_EQUAL((int)s - 127, gc_wire_fp8_exponent(gc_wire_finite_mag(1.0f)));
  CU_ASSERT(c[3] == GC_WIRE_FP8_NAN && c[4] == GC_WIRE_FP8_POS_INF && c[5] == GC_WIRE_FP8_NEG_INF);
  CU_ASSERT_EQUAL(gc_wire_fp8_decode(c[0], s), 1.0f);
  /* a partial group: codes 0 past the valid ones */
  gc_wire_fp8_pack_group(x, 2, 32, c, &s);
  for (int i = 2; i < 32; i++) CU_ASSERT_EQUAL(c[i], 0);
}

static void test_checks(void) {
  gc_kwire_t w = {-1, -1};
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_FP8, 0, GC_BFLOAT16, GC_AVG, &w), GC_SUCCESS);
  CU_ASSERT(w.format == GC_WIRE_FMT_FP8 && w.group == 32);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_FP8, 128, GC_FLOAT16, GC_SUM, &w), GC_SUCCESS);
  CU_ASSERT_EQUAL(w.group, 128);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_BF16, 0, GC_FLOAT32, GC_SUM, &w), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_NATIVE, 0, GC_INT32, GC_MAX, &w), GC_SUCCESS);
  w.group = 7;
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_FP8, 48, GC_FLOAT32, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(w.group, 7); /* written only on success */
  CU_ASSERT(strstr(gc_comm_last_error(NULL), "use 32, 64 or 128") != NULL);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_FP8, 32, GC_FLOAT64, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_FP8, 32, GC_FLOAT32, GC_MAX, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT(strstr(gc_comm_last_error(NULL), "sum and avg only, not max") != NULL);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_BF16, 0, GC_FLOAT16, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_BF16, 32, GC_FLOAT32, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", GC_WIRE_FMT_NATIVE, 32, GC_FLOAT32, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc__wire_check(NULL, "t", 9, 0, GC_FLOAT32, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  size_t bytes = 0;
  const gc_kwire_t f32 = {GC_WIRE_FMT_FP8, 32}, b16 = {GC_WIRE_FMT_BF16, 0};
  CU_ASSERT(gc__wire_bytes(100, &f32, &bytes) == GC_SUCCESS && bytes == 4 * 32 + 16);
  CU_ASSERT(gc__wire_bytes(0, &f32, &bytes) == GC_SUCCESS && bytes == 0);
  CU_ASSERT(gc__wire_bytes(9, &b16, &bytes) == GC_SUCCESS && bytes == 32);
  CU_ASSERT_EQUAL(gc__wire_bytes((size_t)1 << 62, &f32, &bytes), GC_ERR_INVALID_ARGUMENT);
}

/* ---- the kernels' walks ------------------------------------------------------------------------ */

/* Which block of a grid of `blocks` x `threads` handles each chunk in the two-shot's phases, each
 * thread walking as the kernel does (gc_wire_walk): enc[c] the block that encodes chunk c on its
 * owner, dec[r * chunks + c] the one that decodes it on rank r (flat: phase two walks every chunk
 * from chunk 0, one share of a split over 1). Returns the number of (rank, chunk) pairs decoded
 * by another block than encoded them, or -1 when a walk visits a chunk twice or misses one, or
 * the lanes of an fp8 group fall apart (not one warp, not one step). */
static long walk_mismatches(size_t count, gc_kwire_t w, int n, int blocks, int threads, int flat) {
  const size_t units = gc_wire_units(count, w.format, w.group), per = gc_wire_chunks_per_unit(w.format, w.group);
  const size_t chunks = units * per, T = (size_t)blocks * threads;
  int *enc = malloc(chunks * sizeof *enc), *dec = malloc(chunks * (size_t)n * sizeof *dec);
  size_t *warp = malloc(chunks * sizeof *warp);
  long bad = 0;
  for (size_t c = 0; c < chunks; c++) enc[c] = -1;
  for (size_t c = 0; c < chunks * (size_t)n; c++) dec[c] = -1;
  for (int q = 0; q < n; q++)
    for (size_t t = 0; t < T; t++) {
      gc_wire_walk_t it;
      gc_wire_walk_begin(&it, units, per, n, q, q + 1, t, T);
      size_t c, step = 0;
      for (; gc_wire_walk_next(&it, &c); step++) {
        if (c >= chunks || enc[c] != -1 || it.q != q) bad = -1;
        else enc[c] = (int)(t / (size_t)threads), warp[c] = (t / 32) * chunks + step;
      }
    }
  for (size_t c = 0; c < chunks && bad == 0; c++) {
    if (enc[c] < 0) bad = -1;
    else if (c % per && warp[c] != warp[c - 1]) bad = -1; /* a group's lanes: one warp, one step */
  }
  for (int r = 0; r < n && bad >= 0; r++)
    for (size_t t = 0; t < T; t++) {
      gc_wire_walk_t it;
      if (flat) gc_wire_walk_begin(&it, units, per, 1, 0, 1, t, T);
      else gc_wire_walk_begin(&it, units, per, n, 0, n, t, T);
      for (size_t c; gc_wire_walk_next(&it, &c);) {
        if (c >= chunks || dec[r * chunks + c] != -1) bad = -1;
        else dec[r * chunks + c] = (int)(t / (size_t)threads);
      }
    }
  for (size_t c = 0; c < chunks * (size_t)n && bad >= 0; c++) {
    if (dec[c] < 0) bad = -1;
    else bad += dec[c] != enc[c % chunks];
  }
  free(enc), free(dec), free(warp);
  return bad;
}

/* The shares are gc_partition's split; every chunk of the two-shot is decoded on every rank by the
 * block that encoded it (the barriers between them are per block), on grids of 1 to 7 blocks and
 * shares that do not fill them. A walk over all chunks from 0 in phase two would not be: the
 * check finds that. */
static void test_twoshot_walk(void) {
  for (int n = 1; n <= 8; n++)
    for (size_t units = 0; units < 40; units += 3)
      for (int r = 0; r < n; r++) {
        size_t u0, un, o, l;
        gc_wire_share(units, n, r, &u0, &un);
        gc_partition(units, n, r, &o, &l);
        CU_ASSERT(u0 == o && un == l);
      }
  static const size_t counts[] = {1, 45, 1000, 4097, 100003};
  static const gc_kwire_t wires[] = {{GC_WIRE_FMT_FP8, 32}, {GC_WIRE_FMT_FP8, 64}, {GC_WIRE_FMT_FP8, 128}, {GC_WIRE_FMT_BF16, 0}};
  static const int grids[][2] = {{1, 64}, {2, 64}, {4, GC_WIRE_THREADS}, {7, 96}};
  long flat_bad = 0;
  for (int c = 0; c < 5; c++)
    for (int f = 0; f < 4; f++)
      for (int n = 1; n <= 4; n++)
        for (int g = 0; g < 4; g++) {
          const long m = walk_mismatches(counts[c], wires[f], n, grids[g][0], grids[g][1], 0);
          if (m) fprintf(stderr, "wire walk: count %zu format %d G %d n %d grid %dx%d: %ld\n", counts[c], wires[f].format,
                         wires[f].group, n, grids[g][0], grids[g][1], m);
          CU_ASSERT_EQUAL(m, 0);
          if (n > 1 && grids[g][0] > 1) flat_bad += walk_mismatches(counts[c], wires[f], n, grids[g][0], grids[g][1], 1);
        }
  CU_ASSERT(flat_bad > 0);
}

/* ---- the plan ------------------------------------------------------------------------------- */

static gc__facts_t wire_facts(int n) {
  gc__facts_t f;
  memset(&f, 0, sizeof f);
  f.size = f.local_size = n;
  f.p2p_ready = 1;
  f.sm_count = 132;
  f.cc_major = 9;
  f.forced_algo = GC_ALGO_AUTO;
  f.staging_bytes = (size_t)64 << 20;
  gc__switches_default(&f.sw);
  return f;
}

static gc__call_t wire_call(size_t count, int wire, int group, int all_device) {
  gc__call_t c;
  memset(&c, 0, sizeof c);
  c.coll = GC_COLL_ALLREDUCE;
  c.es = c.os = 4;
  c.count = count;
  c.bytes = count * 4;
  c.all_device = all_device;
  c.wire = wire;
  c.wire_group = group;
  return c;
}

/* The plan records the call's wire and nothing else picks one: a native call plans native at
 * every size; an fp8 call plans fp8 with its group (MPI path on host buffers, the wire kernels on
 * device buffers, rounds of whole groups that fit the staging half); what cannot run it is refused. */
static void test_plan_wire(void) {
  gc__plan_t p;
  for (size_t count = 1; count < ((size_t)1 << 30); count *= 16) {
    gc__facts_t f = wire_facts(4);
    gc__call_t c = wire_call(count, GC_WIRE_FMT_NATIVE, 0, 1);
    CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
    CU_ASSERT(p.wire == GC_WIRE_FMT_NATIVE && p.form != GC_FORM_WIRE);
    c = wire_call(count, GC_WIRE_FMT_FP8, 64, 1);
    CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
    CU_ASSERT(p.wire == GC_WIRE_FMT_FP8 && p.wire_group == 64 && p.form == GC_FORM_WIRE && p.path == GC_PATH_PEERS);
    CU_ASSERT(p.kernel == GC_KALGO_TWOSHOT && p.threads == GC_WIRE_THREADS && p.blocks >= 1 && p.blocks <= 132);
    CU_ASSERT(p.chunk > 0 && (p.chunk % 128 == 0 || p.chunk == count));
    CU_ASSERT(gc_wire_layout_bytes(p.chunk, GC_WIRE_FMT_FP8, 64) <= gc__staging_half(f.staging_bytes));
    c.algo = GC_ALGO_ONESHOT;
    CU_ASSERT(gc__plan(&f, &c, &p) == GC_SUCCESS && p.kernel == GC_KALGO_ONESHOT && p.wire == GC_WIRE_FMT_FP8);
    c = wire_call(count, GC_WIRE_FMT_BF16, 0, 0); /* host buffers */
    CU_ASSERT(gc__plan(&f, &c, &p) == GC_SUCCESS && p.path == GC_PATH_MPI && p.wire == GC_WIRE_FMT_BF16);
  }
  gc__facts_t f = wire_facts(2);
  f.forced_algo = GC_ALGO_COPYENGINE; /* GC_ALGO's algorithms that the wire has not: not applied */
  gc__call_t c = wire_call(1000, GC_WIRE_FMT_FP8, 32, 1);
  CU_ASSERT(gc__plan(&f, &c, &p) == GC_SUCCESS && p.form == GC_FORM_WIRE);
  c.algo = GC_ALGO_COPYENGINE; /* the options': refused */
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_ERR_INVALID_ARGUMENT);
  c = wire_call(1000, GC_WIRE_FMT_FP8, 32, 1);
  c.coll = GC_COLL_REDUCESCATTER;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_ERR_INVALID_ARGUMENT);
  f = wire_facts(2);
  f.size = 4; /* two nodes: device buffers are refused, host buffers take the MPI path */
  c = wire_call(1000, GC_WIRE_FMT_FP8, 32, 1);
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_ERR_UNSUPPORTED);
  c.all_device = 0;
  CU_ASSERT(gc__plan(&f, &c, &p) == GC_SUCCESS && p.path == GC_PATH_MPI);
  f.p2p_ready = 0;
  c.all_device = 1;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_ERR_UNSUPPORTED);
}

/* ---- the all-reduce simulated ---------------------------------------------------------------- */

enum { MAX_N = 8 };
typedef struct {
  gc_dtype_t dtype;
  gc_kwire_t w;
  int n;
  size_t count;
} sim_t;

/* Every rank's output of the all-reduce over the wire, one-shot on each rank and two-shot by
 * owners (in place over each owner's buffer, as the kernel does); 1 when all 2n are the same
 * bits, with rank 0's one-shot output in out. */
static int simulate(const sim_t *S, void *const *in, void *out) {
  size_t bytes = 0;
  gc__wire_bytes(S->count, &S->w, &bytes);
  const size_t ob = S->count * gc_dtype_size(S->dtype), units = gc__wire_units(S->count, &S->w);
  unsigned char *wire = calloc((size_t)S->n, bytes + 16), *sum = calloc(1, bytes + 16), *o = calloc(1, ob + 1);
  const void *wires[MAX_N];
  for (int p = 0; p < S->n; p++) {
    wires[p] = wire + p * (bytes + 16);
    gc__wire_pack_host(in[p], S->count, S->dtype, &S->w, wire + p * (bytes + 16));
  }
  int same = 1;
  for (int r = 0; r < S->n; r++) { /* one-shot: every rank sums everything itself */
    gc__wire_sum_host(wires, S->n, S->count, &S->w, 0, units, sum);
    gc__wire_unpack_host(sum, S->count, S->dtype, &S->w, NULL, r == 0 ? out : o);
    if (r) same &= memcmp(o, out, ob) == 0;
  }
  size_t u0[MAX_N], un[MAX_N];
  for (int q = 0; q < S->n; q++) { /* two-shot: owner q encodes its share over its own buffer */
    u0[q] = units / S->n * q + (q < (int)(units % S->n) ? (size_t)q : units % S->n);
    un[q] = units / S->n + (q < (int)(units % S->n));
    gc__wire_sum_host(wires, S->n, S->count, &S->w, u0[q], un[q], (void *)wires[q]);
  }
  for (int q = 0; q < S->n; q++) /* every rank then decodes the owners' shares: the same bytes */
    memcpy(sum + u0[q] * (S->w.format == GC_WIRE_FMT_FP8 ? S->w.group : 16),
           (const unsigned char *)wires[q] + u0[q] * (S->w.format == GC_WIRE_FMT_FP8 ? S->w.group : 16),
           un[q] * (S->w.format == GC_WIRE_FMT_FP8 ? S->w.group : 16));
  if (S->w.format == GC_WIRE_FMT_FP8)
    for (int q = 0; q < S->n; q++)
      memcpy(sum + gc_wire_scales_at(S->count, S->w.group) + u0[q],
             (const unsigned char *)wires[q] + gc_wire_scales_at(S->count, S->w.group) + u0[q], un[q]);
  gc__wire_unpack_host(sum, S->count, S->dtype, &S->w, NULL, o);
  same &= memcmp(o, out, ob) == 0;
  free(wire), free(sum), free(o);
  return same;
}

/* Rank p's largest finite magnitude in element i's group. */
static double group_max(const sim_t *S, const void *x, size_t i) {
  const size_t G = gc__wire_unit_elements(&S->w), g0 = i / G * G;
  double m = 0;
  for (size_t j = g0; j < g0 + G && j < S->count; j++) {
    const double v = fabs(gc__load_double(x, j, S->dtype));
    if (isfinite(v) && v > m) m = v;
  }
  return m;
}

/* The first encoding's error bound of element i of rank p, and the float32 sum's (docs/wire-format.md). */
static double first_bound(const sim_t *S, double x, double A) {
  if (S->w.format == GC_WIRE_FMT_BF16) return ldexp(fabs(x), -8) + ldexp(1, -134);
  return fmax(ldexp(fabs(x), -4), ldexp(fmax(A / 224, ldexp(1, -127)), -10));
}

/* The bound of every element, from the inputs alone: E1 (first encodings plus the sum), then the
 * second encoding of the sum with the group maximum it can reach, then the output's rounding. */
static void bounds(const sim_t *S, void *const *in, double *ref, double *bound) {
  const double gamma = (S->n - 1) * ldexp(1, -24) / (1 - (S->n - 1) * ldexp(1, -24));
  const size_t G = gc__wire_unit_elements(&S->w);
  double *e1 = malloc(S->count * sizeof *e1), A[MAX_N];
  for (size_t i = 0; i < S->count; i++) {
    double sum = 0, mag = 0, err = 0;
    for (int p = 0; p < S->n; p++) {
      if (i % G == 0) A[p] = group_max(S, in[p], i);
      const double x = gc__load_double(in[p], i, S->dtype), b = first_bound(S, x, A[p]);
      sum += x, err += b, mag += fabs(x) + b;
    }
    ref[i] = sum;
    e1[i] = err + gamma * mag + ldexp(mag, -50);
  }
  const double uo = S->dtype == GC_FLOAT16 ? ldexp(1, -11) : S->dtype == GC_BFLOAT16 ? ldexp(1, -8) : 0;
  const double tiny = S->dtype == GC_FLOAT16 ? ldexp(1, -25) : S->dtype == GC_BFLOAT16 ? ldexp(1, -134) : 0;
  for (size_t g0 = 0; g0 < S->count; g0 += G) {
    double AS = 0;
    for (size_t j = g0; j < g0 + G && j < S->count; j++) /* non-finite sums take no part in the scale */
      if (isfinite(ref[j]) && isfinite(e1[j])) AS = fmax(AS, fabs(ref[j]) + e1[j]);
    for (size_t j = g0; j < g0 + G && j < S->count; j++) {
      const double s2 = S->w.format == GC_WIRE_FMT_BF16 ? ldexp(fabs(ref[j]) + e1[j], -8) + ldexp(1, -134)
                                                        : fmax(ldexp(fabs(ref[j]) + e1[j], -4), ldexp(fmax(AS / 224, ldexp(1, -127)), -10));
      const double b = e1[j] + s2;
      bound[j] = b + (uo ? uo * (fabs(ref[j]) + b) : 0) + tiny;
    }
  }
  free(e1);
}

/* Input kinds: uniform, heavy-tailed, one huge value per group, alternating signs, all equal,
 * denormals, groups at scales far apart, all zeros. */
enum { UNIFORM, HEAVY, HUGE_ONE, ALTERNATING, EQUAL, DENORMAL, SCALES, ZEROS, NUM_KINDS };
static double input_value(const sim_t *S, int kind, int p, size_t i, uint64_t seed) {
  const double u = (double)(gc__mix64(seed ^ (uint64_t)p << 40 ^ i) >> 11) * ldexp(1, -53) * 2 - 1;
  const int half = S->dtype == GC_FLOAT16;
  const size_t G = gc__wire_unit_elements(&S->w);
  switch (kind) {
    case HEAVY: return (u < 0 ? -1 : 1) * ldexp(1, (int)(fabs(u) * 1e6) % (half ? 24 : 60) - (half ? 12 : 30));
    case HUGE_ONE: return i % G == (size_t)(p * 5) % G ? (half ? 2000 : 1e4) * (u < 0 ? -1 : 1) : u * 1e-3;
    case ALTERNATING: return ((i + p) % 2 ? -1 : 1) * (0.5 + fabs(u));
    case EQUAL: return 0.3 + p;
    case DENORMAL: return u * (half ? 5e-6 : 1e-39);
    case SCALES: return u * ldexp(1, (int)((i / G * 37 + p * 3) % (half ? 20 : 160)) - (half ? 10 : 80));
    case ZEROS: return 0.0;
    default: return u;
  }
}

/* One case: inputs of `kind`, the simulation, the bound on every element; the worst error to
 * bound ratio goes to *worst. */
static void run_case(const sim_t *S, int kind, double *worst) {
  const size_t es = gc_dtype_size(S->dtype);
  void *in[MAX_N];
  for (int p = 0; p < S->n; p++) {
    in[p] = malloc(S->count * es);
    for (size_t i = 0; i < S->count; i++) gc__store_double(in[p], i, S->dtype, input_value(S, kind, p, i, gc_test_seed + (uint64_t)kind));
  }
  void *out = malloc(S->count * es);
  double *ref = malloc(S->count * sizeof *ref), *bound = malloc(S->count * sizeof *bound);
  CU_ASSERT(simulate(S, in, out));
  bounds(S, in, ref, bound);
  size_t wrong = 0;
  for (size_t i = 0; i < S->count; i++) {
    const double err = fabs(gc__load_double(out, i, S->dtype) - ref[i]);
    if (!(err <= bound[i]) && wrong++ < 3)
      fprintf(stderr, "wire %s n %d G %d count %zu kind %d: element %zu is %.9g, reference %.9g, bound %.3g\n",
              gc_dtype_name(S->dtype), S->n, S->w.group, S->count, kind, i, gc__load_double(out, i, S->dtype), ref[i], bound[i]);
    if (bound[i] > 0 && err / bound[i] > *worst) *worst = err / bound[i];
  }
  CU_ASSERT_EQUAL(wrong, 0);
  if (kind == EQUAL) /* every element of a group is the same value, and so is its result */
    for (size_t i = 1; i < S->count; i++)
      if (i % gc__wire_unit_elements(&S->w)) CU_ASSERT_EQUAL(gc__load_double(out, i, S->dtype), gc__load_double(out, i - 1, S->dtype));
  for (int p = 0; p < S->n; p++) free(in[p]);
  free(out), free(ref), free(bound);
}

static void run_format(int format) {
  static const gc_dtype_t dtypes[] = {GC_FLOAT32, GC_FLOAT16, GC_BFLOAT16};
  static const int ns[] = {1, 2, 3, 4, 8}, groups[] = {32, 64, 128};
  static const size_t counts[] = {1, 45, 1000, 3001};
  double worst[NUM_KINDS] = {0};
  for (int d = 0; d < 3; d++)
    for (int g = 0; g < 3; g++)
      for (int k = 0; k < 5; k++)
        for (int c = 0; c < 4; c++)
          for (int kind = 0; kind < NUM_KINDS; kind++) {
            if (format == GC_WIRE_FMT_BF16 && (dtypes[d] != GC_FLOAT32 || g)) continue;
            const sim_t S = {dtypes[d], {format, format == GC_WIRE_FMT_FP8 ? groups[g] : 0}, ns[k], counts[c]};
            run_case(&S, kind, &worst[kind]);
          }
  printf("\n  %s wire, worst error / bound by input kind:", format == GC_WIRE_FMT_FP8 ? "fp8" : "bf16");
  for (int kind = 0; kind < NUM_KINDS; kind++) printf(" %.2f", worst[kind]);
  printf("\n");
  /* The bound is near what random data reaches: a bound this test could never approach would
   * hide a wrong scale or rounding. */
  CU_ASSERT(worst[UNIFORM] > 0.25);
}

static void test_allreduce_fp8(void) { run_format(GC_WIRE_FMT_FP8); }
static void test_allreduce_bf16(void) { run_format(GC_WIRE_FMT_BF16); }

/* NaN and Inf go through as a float32 sum of the inputs would carry them, element by element;
 * the other elements of their groups keep their bound. */
static void test_nonfinite(void) {
  for (int f = 0; f < 3; f++) {
    const gc_dtype_t dt = f == 2 ? GC_FLOAT16 : GC_FLOAT32;
    const sim_t S = {dt, {f == 1 ? GC_WIRE_FMT_BF16 : GC_WIRE_FMT_FP8, f == 1 ? 0 : 32}, 3, 100};
    void *in[3];
    for (int p = 0; p < 3; p++) {
      in[p] = malloc(100 * 4);
      for (size_t i = 0; i < 100; i++) gc__store_double(in[p], i, dt, input_value(&S, UNIFORM, p, i, gc_test_seed));
    }
    gc__store_double(in[0], 5, dt, NAN);
    gc__store_double(in[1], 40, dt, INFINITY);
    gc__store_double(in[2], 41, dt, -INFINITY);
    gc__store_double(in[0], 70, dt, INFINITY);
    gc__store_double(in[2], 70, dt, -INFINITY);
    gc__store_double(in[1], 99, dt, INFINITY);
    gc__store_double(in[2], 99, dt, INFINITY);
    for (size_t i = 64; i < 96; i++) gc__store_double(in[1], i, dt, NAN); /* a whole group */
    void *out = malloc(100 * 4);
    CU_ASSERT(simulate(&S, in, out));
    double ref[100], bound[100];
    bounds(&S, in, ref, bound);
    for (size_t i = 0; i < 100; i++) {
      const double v = gc__load_double(out, i, dt);
      if (i == 5 || i == 70 || (i >= 64 && i < 96)) {
        CU_ASSERT(isnan(v));
      } else if (i == 40 || i == 99) {
        CU_ASSERT_EQUAL(v, INFINITY);
      } else if (i == 41) {
        CU_ASSERT_EQUAL(v, -INFINITY);
      } else {
        CU_ASSERT(fabs(v - ref[i]) <= bound[i]);
      }
    }
    for (int p = 0; p < 3; p++) free(in[p]);
    free(out);
  }
}

/* ---- gc_allreduce_ex over the wire on the communicator's ranks ------------------------------ */

/* One call's case: format and group, data, input kind, count, op (sum or avg), and NaN and Inf
 * placed in the inputs. */
typedef struct {
  gc_kwire_t w;
  gc_dtype_t dtype;
  int kind;
  size_t count;
  gc_op_t op;
  int nonfinite;
} call_case_t;

/* Rank p's input: every rank makes every rank's, from a seed they share. With nonfinite: NaN on
 * rank 0 at 5, +Inf on rank 1 % n at 40, -Inf on the last rank at 41, and +Inf on rank 0 against
 * -Inf on the last at 70 (NaN when they are two ranks). */
static void call_input(const sim_t *S, const call_case_t *k, int p, int salt, void *buf) {
  for (size_t i = 0; i < S->count; i++)
    gc__store_double(buf, i, S->dtype, input_value(S, k->kind, p, i, gc_test_rank_seed(-1, salt)));
  if (!k->nonfinite || S->count < 71) return;
  if (p == 0) gc__store_double(buf, 5, S->dtype, NAN), gc__store_double(buf, 70, S->dtype, INFINITY);
  if (p == 1 % S->n) gc__store_double(buf, 40, S->dtype, INFINITY);
  if (p == S->n - 1) gc__store_double(buf, 41, S->dtype, -INFINITY), gc__store_double(buf, 70, S->dtype, -INFINITY);
}

/* The bits every rank must get: the host path's pack, sum in rank order, encode, decode through
 * the average's scale. */
static void call_expected(const sim_t *S, const call_case_t *k, void *const *in, void *want) {
  size_t bytes = 0;
  gc__wire_bytes(S->count, &S->w, &bytes);
  unsigned char *all = calloc((size_t)S->n, bytes + 16), *sum = calloc(1, bytes + 16);
  const void *wires[MAX_N];
  for (int p = 0; p < S->n; p++) {
    wires[p] = all + (size_t)p * (bytes + 16);
    gc__wire_pack_host(in[p], S->count, S->dtype, &S->w, all + (size_t)p * (bytes + 16));
  }
  gc__wire_sum_host(wires, S->n, S->count, &S->w, 0, gc__wire_units(S->count, &S->w), sum);
  const gc_kepilogue_t ep = {k->op == GC_AVG, k->op == GC_AVG ? 1.0 / S->n : 1.0, NULL, S->dtype, S->dtype};
  gc__wire_unpack_host(sum, S->count, S->dtype, &S->w, &ep, want);
  free(all), free(sum);
}

/* The output against the float64 reference: NaN and Inf where the inputs' sum has them (NaN
 * when any term is NaN or +Inf meets -Inf), every other element within the bound (divided by n
 * for the average, plus its scaling's rounding). Returns the elements outside. */
static size_t call_check(const sim_t *S, const call_case_t *k, void *const *in, const void *got) {
  double *ref = malloc(S->count * sizeof *ref), *bound = malloc(S->count * sizeof *bound);
  bounds(S, in, ref, bound);
  const double div = k->op == GC_AVG ? S->n : 1;
  size_t wrong = 0;
  for (size_t i = 0; i < S->count; i++) {
    const double v = gc__load_double(got, i, S->dtype), r = ref[i] / div;
    int ok;
    if (isnan(r)) ok = isnan(v);
    else if (isinf(r)) ok = v == r;
    else ok = fabs(v - r) <= bound[i] / div + ldexp(fabs(r), -22) + ldexp(1, -140);
    if (!ok && wrong++ < 3)
      fprintf(stderr, "[rank %d] wire %s G %d %s kind %d count %zu: element %zu is %.9g, reference %.9g, bound %.3g\n",
              gc_test_rank, S->w.format == GC_WIRE_FMT_FP8 ? "fp8" : "bf16", S->w.group, gc_dtype_name(S->dtype), k->kind,
              S->count, i, v, r, bound[i] / div);
  }
  free(ref), free(bound);
  return wrong;
}

/* One gc_allreduce_ex over the wire, twice: both results the expected bits on every rank, the
 * same run to run, within the bound; nothing written past the output. */
static void call_case(const call_case_t *k, int salt) {
  const sim_t S = {k->dtype, k->w, gc_test_size, k->count};
  const size_t es = gc_dtype_size(k->dtype), ob = k->count * es;
  void *in[MAX_N], *want = malloc(ob + 1), *got[2] = {malloc(ob + GUARD), malloc(ob + GUARD)};
  for (int p = 0; p < S.n; p++) {
    in[p] = malloc(ob + 1);
    call_input(&S, k, p, salt, in[p]);
  }
  call_expected(&S, k, in, want);
  void *send = gc_test_alloc(ob), *recv = gc_test_alloc(ob + GUARD);
  gc_test_upload(send, in[gc_test_rank], ob);
  gc_options_t o = GC_OPTIONS_INIT;
  o.wire = (gc_wire_t)k->w.format;
  o.wire_group = k->w.group;
  for (int run = 0; run < 2; run++) {
    gc_test_poison(got[run], ob + GUARD);
    gc_test_upload(recv, got[run], ob + GUARD);
    GC_TEST_OK(gc_allreduce_ex(send, recv, k->count, k->dtype, k->op, gc_test_comm, NULL, &o));
    GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
    CU_ASSERT(gc_test_fetch_checked(got[run], recv, ob, 1, "wire all-reduce"));
  }
  const int same = memcmp(got[0], want, ob) == 0;
  if (!same)
    fprintf(stderr, "[rank %d] wire format %d G %d %s kind %d count %zu: not the host path's bits\n", gc_test_rank,
            k->w.format, k->w.group, gc_dtype_name(k->dtype), k->kind, k->count);
  CU_ASSERT(same);
  CU_ASSERT(memcmp(got[0], got[1], ob) == 0);
  CU_ASSERT(gc_test_same_on_all_ranks(got[0], ob));
  CU_ASSERT_EQUAL(call_check(&S, k, in, got[0]), 0);
  for (int p = 0; p < S.n; p++) free(in[p]);
  gc_test_free(send), gc_test_free(recv);
  free(want), free(got[0]), free(got[1]);
}

static void test_call_bounds(void) {
  if (gc_test_size > MAX_N) {
    gc_test_note("wire all-reduce: more than %d ranks, skipped", MAX_N);
    return;
  }
  static const gc_kwire_t wires[] = {{GC_WIRE_FMT_FP8, 32}, {GC_WIRE_FMT_FP8, 64}, {GC_WIRE_FMT_FP8, 128}, {GC_WIRE_FMT_BF16, 0}};
  static const gc_dtype_t dtypes[] = {GC_FLOAT32, GC_FLOAT16, GC_BFLOAT16};
  static const int kinds[] = {UNIFORM, HEAVY, HUGE_ONE, SCALES, ZEROS};
  static const size_t counts[] = {1, 1000, 70001};
  int salt = 7000;
  for (int f = 0; f < 4; f++)
    for (int d = 0; d < 3; d++)
      for (int k = 0; k < 5; k++)
        for (int c = 0; c < 3; c++) {
          if (wires[f].format == GC_WIRE_FMT_BF16 && dtypes[d] != GC_FLOAT32) continue;
          const call_case_t kc = {wires[f], dtypes[d], kinds[k], counts[c], (k + c) % 2 ? GC_AVG : GC_SUM, 0};
          call_case(&kc, ++salt);
        }
}

static void test_call_nonfinite(void) {
  if (gc_test_size > MAX_N) return;
  static const gc_kwire_t wires[] = {{GC_WIRE_FMT_FP8, 32}, {GC_WIRE_FMT_FP8, 128}, {GC_WIRE_FMT_BF16, 0}};
  for (int f = 0; f < 3; f++)
    for (int d = 0; d < 2; d++) {
      const gc_dtype_t dt = wires[f].format == GC_WIRE_FMT_BF16 || d == 0 ? GC_FLOAT32 : GC_FLOAT16;
      const call_case_t kc = {wires[f], dt, UNIFORM, 1000, GC_SUM, 1};
      call_case(&kc, 7900 + 2 * f + d);
    }
}

/* Refused on every rank alike, with a message that says what to use. */
static void expect_refusal(gc_result_t r, gc_result_t code, const char *text) {
  CU_ASSERT_EQUAL(r, code);
  const char *msg = gc_comm_last_error(gc_test_comm);
  if (!strstr(msg, text)) fprintf(stderr, "[rank %d] expected '%s' in: %s\n", gc_test_rank, text, msg);
  CU_ASSERT(strstr(msg, text) != NULL);
}

static void test_call_refusals(void) {
  const size_t n = 64 * (size_t)gc_test_size;
  char *send = gc_test_alloc(n * 8), *recv = gc_test_alloc(n * 8);
  gc_test_fill(send, n, GC_FLOAT32, gc_test_rank, 7990);
  gc_options_t o = GC_OPTIONS_INIT;
  CU_ASSERT(o.wire == GC_WIRE_NATIVE && o.wire_group == 0);
  o.wire = GC_WIRE_FP8;
  expect_refusal(gc_allreduce_ex(send, recv, 64, GC_INT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "the fp8 wire takes float32, float16 or bfloat16 data, not int32");
  expect_refusal(gc_allreduce_ex(send, recv, 64, GC_FLOAT32, GC_MAX, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "sum and avg only, not max");
  expect_refusal(gc_reducescatter_ex(send, recv, 64, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "only gc_allreduce_ex takes a compressed wire");
  expect_refusal(gc_allgather_ex(send, recv, 64, GC_FLOAT32, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "only gc_allreduce_ex takes a compressed wire");
  expect_refusal(gc_broadcast_ex(send, recv, 64, GC_FLOAT32, 0, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "only gc_allreduce_ex takes a compressed wire");
  o.algo = GC_ALGO_COPYENGINE;
  expect_refusal(gc_allreduce_ex(send, recv, 64, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "runs the oneshot, twoshot or mpi algorithm, not copyengine");
  o.algo = GC_ALGO_AUTO;
  o.wire_group = 48;
  expect_refusal(gc_allreduce_ex(send, recv, 64, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "use 32, 64 or 128");
  o.wire = GC_WIRE_BF16;
  o.wire_group = 0;
  expect_refusal(gc_allreduce_ex(send, recv, 64, GC_BFLOAT16, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "the bf16 wire takes float32 data");
  o.wire = GC_WIRE_NATIVE;
  o.wire_group = 32;
  expect_refusal(gc_allreduce_ex(send, recv, 64, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "groups are for fp8 only");
  o.wire = (gc_wire_t)7;
  o.wire_group = 0;
  expect_refusal(gc_allreduce_ex(send, recv, 64, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_INVALID_ARGUMENT,
                 "unknown wire format 7");
  gc_test_free(send), gc_test_free(recv);
}

/* The default is the native wire, bit for bit what a call without options gives. Where the
 * ranks' calls are compared (GC_CHECK_CALLS; on host buffers the MPI path's default), ranks that
 * ask for different wires are refused, naming the wire. */
static void test_call_default_and_signature(void) {
  const size_t n = 1001;
  float *send = gc_test_alloc(n * 4), *a = gc_test_alloc(n * 4), *b = gc_test_alloc(n * 4);
  float *ha = malloc(n * 4), *hb = malloc(n * 4);
  gc_test_fill(send, n, GC_FLOAT32, gc_test_rank, 7991);
  gc_options_t o = GC_OPTIONS_INIT;
  GC_TEST_OK(gc_allreduce_ex(send, a, n, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, NULL));
  GC_TEST_OK(gc_allreduce_ex(send, b, n, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
  gc_test_download(ha, a, n * 4), gc_test_download(hb, b, n * 4);
  CU_ASSERT(memcmp(ha, hb, n * 4) == 0);
  const int compared = gc_test_comm->check_calls == GC_CHECK_EVERY_CALL ||
                       (gc_test_comm->check_calls == GC_CHECK_MPI_PATH && !gc_test_on_gpu);
  if (gc_test_size > 1 && compared) {
    o.wire = gc_test_rank == 0 ? GC_WIRE_FP8 : GC_WIRE_NATIVE;
    const gc_result_t r = gc_allreduce_ex(send, a, n, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o);
    CU_ASSERT_EQUAL(r, GC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(gc_comm_last_error(gc_test_comm), "options.wire") != NULL);
  }
  gc_test_free(send), gc_test_free(a), gc_test_free(b);
  free(ha), free(hb);
}

void gc_test_suite_wire_calls(void) {
  static const gc_test_case_t tests[] = {{"wire all-reduce: host path's bits, bound, every rank, every run", test_call_bounds},
                                         {"wire all-reduce: NaN and Inf", test_call_nonfinite},
                                         {"wire refusals", test_call_refusals},
                                         {"wire default and call signature", test_call_default_and_signature},
                                         {NULL, NULL}};
  gc_test_add_suite("wire_calls", tests);
}

void gc_test_suite_wire(void) {
  static const gc_test_case_t tests[] = {{"wire conversions match CUDA's", test_cuda_agreement},
                                         {"wire e4m3 codes", test_codes},
                                         {"wire scale exponents", test_exponents},
                                         {"wire groups at the edges", test_groups_at_edges},
                                         {"wire checks and sizes", test_checks},
                                         {"wire two-shot walk", test_twoshot_walk},
                                         {"wire plans", test_plan_wire},
                                         {"wire fp8 all-reduce within the bound", test_allreduce_fp8},
                                         {"wire bf16 all-reduce within the bound", test_allreduce_bf16},
                                         {"wire NaN and Inf", test_nonfinite},
                                         {NULL, NULL}};
  gc_test_add_suite("wire", tests);
}
