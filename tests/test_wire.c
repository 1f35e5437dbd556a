/* test_wire.c — the compressed wire formats on the host: e4m3 codes and scales at their edges,
 * CUDA's own conversions (test_wire_nv.cpp), and the whole all-reduce over the wire simulated
 * for n ranks (one-shot on every rank, two-shot by owners) against a float64 reference and the
 * error bound of docs/wire-format.md, with every rank's bits compared. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gc_rng.h"
#include "gc_test.h"
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
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_FP8, 0, GC_BFLOAT16, GC_AVG, &w), GC_SUCCESS);
  CU_ASSERT(w.format == GC_WIRE_FMT_FP8 && w.group == 32);
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_FP8, 128, GC_FLOAT16, GC_SUM, &w), GC_SUCCESS);
  CU_ASSERT_EQUAL(w.group, 128);
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_BF16, 0, GC_FLOAT32, GC_SUM, &w), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_NATIVE, 0, GC_INT32, GC_MAX, &w), GC_SUCCESS);
  w.group = 7;
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_FP8, 48, GC_FLOAT32, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(w.group, 7); /* written only on success */
  CU_ASSERT(strstr(gc_comm_last_error(NULL), "use 32, 64 or 128") != NULL);
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_FP8, 32, GC_FLOAT64, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_FP8, 32, GC_FLOAT32, GC_MAX, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT(strstr(gc_comm_last_error(NULL), "sum and avg only, not max") != NULL);
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_BF16, 0, GC_FLOAT16, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_BF16, 32, GC_FLOAT32, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc__wire_check("t", GC_WIRE_FMT_NATIVE, 32, GC_FLOAT32, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc__wire_check("t", 9, 0, GC_FLOAT32, GC_SUM, &w), GC_ERR_INVALID_ARGUMENT);
  size_t bytes = 0;
  const gc_kwire_t f32 = {GC_WIRE_FMT_FP8, 32}, b16 = {GC_WIRE_FMT_BF16, 0};
  CU_ASSERT(gc__wire_bytes(100, &f32, &bytes) == GC_SUCCESS && bytes == 4 * 32 + 16);
  CU_ASSERT(gc__wire_bytes(0, &f32, &bytes) == GC_SUCCESS && bytes == 0);
  CU_ASSERT(gc__wire_bytes(9, &b16, &bytes) == GC_SUCCESS && bytes == 32);
  CU_ASSERT_EQUAL(gc__wire_bytes((size_t)1 << 62, &f32, &bytes), GC_ERR_INVALID_ARGUMENT);
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
 * denormals, groups at scales far apart. */
enum { UNIFORM, HEAVY, HUGE_ONE, ALTERNATING, EQUAL, DENORMAL, SCALES, NUM_KINDS };
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

void gc_test_suite_wire(void) {
  static const gc_test_case_t tests[] = {{"wire conversions match CUDA's", test_cuda_agreement},
                                         {"wire e4m3 codes", test_codes},
                                         {"wire scale exponents", test_exponents},
                                         {"wire groups at the edges", test_groups_at_edges},
                                         {"wire checks and sizes", test_checks},
                                         {"wire fp8 all-reduce within the bound", test_allreduce_fp8},
                                         {"wire bf16 all-reduce within the bound", test_allreduce_bf16},
                                         {"wire NaN and Inf", test_nonfinite},
                                         {NULL, NULL}};
  gc_test_add_suite("wire", tests);
}
