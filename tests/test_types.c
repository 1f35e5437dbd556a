/* test_types.c — names and their parsing, gc_partition, the element conversions (RNE ties,
 * fp8 saturation, integer wrapping), the random pattern, and the header's constants. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_rng.h"
#include "gc_test.h"

/* ---- names ----------------------------------------------------------------------------- */

static void test_dtype_names(void) {
  static const struct { gc_dtype_t d; const char *name; size_t size; } want[] = {
      {GC_FLOAT32, "float32", 4}, {GC_FLOAT16, "float16", 2},   {GC_BFLOAT16, "bfloat16", 2},
      {GC_FLOAT64, "float64", 8}, {GC_INT32, "int32", 4},       {GC_INT64, "int64", 8},
      {GC_UINT8, "uint8", 1},     {GC_FP8_E4M3, "fp8_e4m3", 1}, {GC_FP8_E5M2, "fp8_e5m2", 1}};
  CU_ASSERT_EQUAL(sizeof want / sizeof want[0], GC_NUM_DTYPES);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    CU_ASSERT_EQUAL((int)want[i].d, (int)i);
    CU_ASSERT_STRING_EQUAL(gc_dtype_name(want[i].d), want[i].name);
    CU_ASSERT_EQUAL(gc_dtype_size(want[i].d), want[i].size);
    gc_dtype_t back = GC_DTYPE_SAME;
    CU_ASSERT_EQUAL(gc_dtype_from_name(want[i].name, &back), GC_SUCCESS);
    CU_ASSERT_EQUAL(back, want[i].d);
  }
  CU_ASSERT_PTR_NULL(gc_dtype_name(GC_NUM_DTYPES));
  CU_ASSERT_PTR_NULL(gc_dtype_name(GC_DTYPE_SAME));
  CU_ASSERT_EQUAL(gc_dtype_size(GC_NUM_DTYPES), 0);
  CU_ASSERT_EQUAL(gc_dtype_size(GC_DTYPE_SAME), 0);

  gc_dtype_t d = GC_FLOAT32;
  CU_ASSERT_EQUAL(gc_dtype_from_name("BFloat16", &d), GC_SUCCESS);
  CU_ASSERT_EQUAL(d, GC_BFLOAT16);
  CU_ASSERT_EQUAL(gc_dtype_from_name("bf16", &d), GC_SUCCESS);
  CU_ASSERT_EQUAL(d, GC_BFLOAT16);
  CU_ASSERT_EQUAL(gc_dtype_from_name("half", &d), GC_SUCCESS);
  CU_ASSERT_EQUAL(d, GC_FLOAT16);
  d = GC_INT32;
  CU_ASSERT_EQUAL(gc_dtype_from_name("float17", &d), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(d, GC_INT32); /* outputs are written only on success */
  CU_ASSERT(strlen(gc_comm_last_error(NULL)) > 0);
  CU_ASSERT_EQUAL(gc_dtype_from_name("", &d), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_dtype_from_name(NULL, &d), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_dtype_from_name("float32", NULL), GC_ERR_INVALID_ARGUMENT);
}

static void test_op_algo_names(void) {
  static const char *const ops[] = {"sum", "prod", "min", "max", "avg"};
  CU_ASSERT_EQUAL(sizeof ops / sizeof ops[0], GC_NUM_OPS);
  for (int i = 0; i < GC_NUM_OPS; i++) {
    CU_ASSERT_STRING_EQUAL(gc_op_name((gc_op_t)i), ops[i]);
    gc_op_t back = GC_NUM_OPS;
    CU_ASSERT_EQUAL(gc_op_from_name(ops[i], &back), GC_SUCCESS);
    CU_ASSERT_EQUAL(back, (gc_op_t)i);
  }
  CU_ASSERT_EQUAL(GC_SUM, 0);
  CU_ASSERT_EQUAL(GC_AVG, 4);
  CU_ASSERT_PTR_NULL(gc_op_name(GC_NUM_OPS));
  CU_ASSERT_PTR_NULL(gc_op_name((gc_op_t)-1));
  gc_op_t op = GC_MAX;
  CU_ASSERT_EQUAL(gc_op_from_name("mean", &op), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(op, GC_MAX);
  CU_ASSERT_EQUAL(gc_op_from_name(NULL, &op), GC_ERR_INVALID_ARGUMENT);

  static const char *const algos[] = {"auto", "oneshot", "twoshot", "writes", "mpi", "multimem", "copyengine",
                                      "oneshot_ll"};
  CU_ASSERT_EQUAL(sizeof algos / sizeof algos[0], GC_NUM_ALGOS);
  for (int i = 0; i < GC_NUM_ALGOS; i++) {
    CU_ASSERT_STRING_EQUAL(gc_algo_name((gc_algo_t)i), algos[i]);
    gc_algo_t back = GC_NUM_ALGOS;
    CU_ASSERT_EQUAL(gc_algo_from_name(algos[i], &back), GC_SUCCESS);
    CU_ASSERT_EQUAL(back, (gc_algo_t)i);
  }
  CU_ASSERT_EQUAL(GC_ALGO_AUTO, 0);
  CU_ASSERT_PTR_NULL(gc_algo_name(GC_NUM_ALGOS));
  gc_algo_t a = GC_ALGO_MPI;
  CU_ASSERT_EQUAL(gc_algo_from_name("threeshot", &a), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(a, GC_ALGO_MPI);
  CU_ASSERT_EQUAL(gc_algo_from_name("mpi", NULL), GC_ERR_INVALID_ARGUMENT);
  /* the former name of the algorithm by writes is refused with a message naming the current one */
  CU_ASSERT_EQUAL(gc_algo_from_name("twoshot_push", &a), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "is 'writes'"));
  CU_ASSERT_EQUAL(a, GC_ALGO_MPI);
}

/* ---- partition --------------------------------------------------------------------------- */

static void test_partition(void) {
  size_t off = 99, len = 99;
  gc_partition(10, 3, 0, &off, &len);
  CU_ASSERT(off == 0 && len == 4);
  gc_partition(10, 3, 1, &off, &len);
  CU_ASSERT(off == 4 && len == 3);
  gc_partition(10, 3, 2, &off, &len);
  CU_ASSERT(off == 7 && len == 3);
  gc_partition(2, 4, 3, &off, &len); /* more parts than items */
  CU_ASSERT(off == 2 && len == 0);
  gc_partition(0, 4, 0, &off, &len);
  CU_ASSERT(off == 0 && len == 0);
  gc_partition(7, 1, 0, &off, &len);
  CU_ASSERT(off == 0 && len == 7);
  /* past 2^32 items */
  size_t big = ((size_t)1 << 33) + 5;
  gc_partition(big, 4, 3, &off, &len);
  CU_ASSERT(len == ((size_t)1 << 31) + 1 && off + len == big);

  static const size_t totals[] = {0, 1, 2, 3, 7, 8, 31, 1021, 65537};
  for (int parts = 1; parts <= 9; parts++)
    for (size_t t = 0; t < sizeof totals / sizeof totals[0]; t++) {
      size_t total = totals[t], next = 0;
      for (int i = 0; i < parts; i++) {
        gc_partition(total, parts, i, &off, &len);
        CU_ASSERT_EQUAL(off, next); /* contiguous, in order */
        CU_ASSERT_EQUAL(len, total / parts + ((size_t)i < total % parts ? 1 : 0));
        next = off + len;
      }
      CU_ASSERT_EQUAL(next, total);
    }
}

/* ---- conversions ---------------------------------------------------------------------------- */

static unsigned store_bits(gc_dtype_t dt, double v) {
  unsigned char b[8] = {0};
  gc__store_double(b, 0, dt, v);
  if (gc_dtype_size(dt) == 1) return b[0];
  uint16_t h;
  memcpy(&h, b, 2);
  return h;
}

static double load_bits(gc_dtype_t dt, unsigned bits) {
  unsigned char b[8] = {0};
  if (gc_dtype_size(dt) == 1) b[0] = (unsigned char)bits;
  else {
    uint16_t h = (uint16_t)bits;
    memcpy(b, &h, 2);
  }
  return gc__load_double(b, 0, dt);
}

/* The 16-bit patterns that do not survive load + store (NaNs become the canonical one). */
static unsigned round_trip_bad(gc_dtype_t dt) {
  unsigned bad = 0;
  for (unsigned h = 0; h < 65536; h++) {
    double v = load_bits(dt, h);
    unsigned back = store_bits(dt, v);
    if (isnan(v) ? back != 0x7fff : back != h) bad++;
  }
  return bad;
}

static void test_float16(void) {
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 1.0), 0x3c00);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, -2.0), 0xc000);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 65504.0), 0x7bff);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 65519.0), 0x7bff); /* below the midpoint to inf */
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 65520.0), 0x7c00); /* the midpoint ties to inf (even) */
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 1e9), 0x7c00);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, -INFINITY), 0xfc00);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, NAN), 0x7fff);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, -0.0), 0x8000);
  /* round to nearest, ties to even */
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 1.0 + ldexp(1, -11)), 0x3c00);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 1.0 + 3 * ldexp(1, -11)), 0x3c02);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 1.0 + ldexp(1, -11) + ldexp(1, -20)), 0x3c01);
  /* subnormals */
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, ldexp(1, -24)), 0x0001);
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, ldexp(1, -25)), 0x0000);    /* tie to even 0 */
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, 3 * ldexp(1, -25)), 0x0002); /* tie to even 2 */
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, ldexp(1, -14) - ldexp(1, -25)), 0x0400); /* to normal */
  CU_ASSERT_EQUAL(store_bits(GC_FLOAT16, ldexp(1, -26)), 0x0000);
  CU_ASSERT_DOUBLE_EQUAL(load_bits(GC_FLOAT16, 0x0001), ldexp(1, -24), 0.0);
  CU_ASSERT_DOUBLE_EQUAL(load_bits(GC_FLOAT16, 0x7bff), 65504.0, 0.0);
  CU_ASSERT(isinf(load_bits(GC_FLOAT16, 0x7c00)));
  CU_ASSERT(isnan(load_bits(GC_FLOAT16, 0x7e00)));
  unsigned bad = round_trip_bad(GC_FLOAT16);
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_bfloat16(void) {
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, 1.0), 0x3f80);
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, -1.5), 0xbfc0);
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, 1.0 + ldexp(1, -8)), 0x3f80);     /* tie to even */
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, 1.0 + 3 * ldexp(1, -8)), 0x3f82); /* tie to even */
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, 1.0 + 5 * ldexp(1, -9)), 0x3f81); /* above the tie */
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, FLT_MAX), 0x7f80);                /* overflows to inf */
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, -INFINITY), 0xff80);
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, NAN), 0x7fff);
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, ldexp(1, -133)), 0x0001); /* subnormal */
  /* from double in one rounding: 1 + 2^-8 + 2^-30 is above the tie (the kernels' float64
   * results convert with __double2bfloat16 alike; float accumulators are doubles exactly) */
  CU_ASSERT_EQUAL(store_bits(GC_BFLOAT16, 1.0 + ldexp(1, -8) + ldexp(1, -30)), 0x3f81);
  unsigned bad = round_trip_bad(GC_BFLOAT16);
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_fp8_e4m3(void) {
  const gc_dtype_t d = GC_FP8_E4M3;
  CU_ASSERT_EQUAL(store_bits(d, 1.0), 0x38);
  CU_ASSERT_EQUAL(store_bits(d, -1.0), 0xb8);
  CU_ASSERT_EQUAL(store_bits(d, 448.0), 0x7e);
  CU_ASSERT_EQUAL(store_bits(d, -448.0), 0xfe);
  /* saturation of finite values and infinities (__NV_SATFINITE) */
  CU_ASSERT_EQUAL(store_bits(d, 464.0), 0x7e); /* the midpoint to 480 ties to even 448 */
  CU_ASSERT_EQUAL(store_bits(d, 470.0), 0x7e);
  CU_ASSERT_EQUAL(store_bits(d, 1e6), 0x7e);
  CU_ASSERT_EQUAL(store_bits(d, -1e30), 0xfe);
  CU_ASSERT_EQUAL(store_bits(d, INFINITY), 0x7e);
  CU_ASSERT_EQUAL(store_bits(d, -INFINITY), 0xfe);
  CU_ASSERT_EQUAL(store_bits(d, NAN), 0x7f);
  CU_ASSERT_EQUAL(store_bits(d, -0.0), 0x80);
  /* ties to even */
  CU_ASSERT_EQUAL(store_bits(d, 1.0625), 0x38); /* between 1 and 1.125 */
  CU_ASSERT_EQUAL(store_bits(d, 1.1875), 0x3a); /* between 1.125 and 1.25 -> 1.25 */
  CU_ASSERT_EQUAL(store_bits(d, 1.07), 0x39);
  /* subnormals: 2^-9 is the smallest */
  CU_ASSERT_EQUAL(store_bits(d, ldexp(1, -9)), 0x01);
  CU_ASSERT_EQUAL(store_bits(d, ldexp(1, -10)), 0x00);     /* tie to even 0 */
  CU_ASSERT_EQUAL(store_bits(d, 3 * ldexp(1, -10)), 0x02); /* tie to even 2 */
  CU_ASSERT_EQUAL(store_bits(d, ldexp(1, -6) - ldexp(1, -11)), 0x08); /* rounds up to normal */
  CU_ASSERT_DOUBLE_EQUAL(load_bits(d, 0x01), ldexp(1, -9), 0.0);
  CU_ASSERT_DOUBLE_EQUAL(load_bits(d, 0x7e), 448.0, 0.0);
  CU_ASSERT_DOUBLE_EQUAL(load_bits(d, 0x78), 256.0, 0.0); /* no infinities in E4M3FN */
  CU_ASSERT(isnan(load_bits(d, 0x7f)));
  CU_ASSERT(isnan(load_bits(d, 0xff)));
  unsigned bad = 0;
  for (unsigned b = 0; b < 256; b++) {
    if ((b & 0x7f) == 0x7f) continue;
    if (store_bits(d, load_bits(d, b)) != b) bad++;
  }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_fp8_e5m2(void) {
  const gc_dtype_t d = GC_FP8_E5M2;
  CU_ASSERT_EQUAL(store_bits(d, 1.0), 0x3c);
  CU_ASSERT_EQUAL(store_bits(d, 57344.0), 0x7b);
  CU_ASSERT_EQUAL(store_bits(d, 61440.0), 0x7b); /* would round to inf: saturates */
  CU_ASSERT_EQUAL(store_bits(d, 1e9), 0x7b);
  CU_ASSERT_EQUAL(store_bits(d, -1e9), 0xfb);
  CU_ASSERT_EQUAL(store_bits(d, INFINITY), 0x7b);
  CU_ASSERT_EQUAL(store_bits(d, NAN), 0x7f);
  CU_ASSERT_EQUAL(store_bits(d, 1.125), 0x3c); /* tie between 1 and 1.25 -> 1 */
  CU_ASSERT_EQUAL(store_bits(d, 1.375), 0x3e); /* tie between 1.25 and 1.5 -> 1.5 */
  CU_ASSERT_EQUAL(store_bits(d, ldexp(1, -16)), 0x01);
  CU_ASSERT_EQUAL(store_bits(d, ldexp(1, -17)), 0x00);
  CU_ASSERT(isinf(load_bits(d, 0x7c)));
  CU_ASSERT(isnan(load_bits(d, 0x7d)));
  CU_ASSERT_DOUBLE_EQUAL(load_bits(d, 0x7b), 57344.0, 0.0);
  unsigned bad = 0;
  for (unsigned b = 0; b < 256; b++) {
    if ((b & 0x7c) == 0x7c) continue; /* inf and NaN */
    if (store_bits(d, load_bits(d, b)) != b) bad++;
  }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_float32_64(void) {
  unsigned char b[8];
  gc__store_double(b, 0, GC_FLOAT32, 1.0 + ldexp(1, -24)); /* tie to even */
  CU_ASSERT_DOUBLE_EQUAL(gc__load_double(b, 0, GC_FLOAT32), 1.0, 0.0);
  gc__store_double(b, 0, GC_FLOAT32, 1.0 + 3 * ldexp(1, -24));
  CU_ASSERT_DOUBLE_EQUAL(gc__load_double(b, 0, GC_FLOAT32), 1.0 + ldexp(1, -22), 0.0);
  gc__store_double(b, 0, GC_FLOAT64, 3.141592653589793);
  CU_ASSERT_DOUBLE_EQUAL(gc__load_double(b, 0, GC_FLOAT64), 3.141592653589793, 0.0);
  /* element i of an array, unaligned */
  unsigned char arr[3 * 8 + 1];
  gc__store_double(arr + 1, 2, GC_FLOAT64, -7.25);
  CU_ASSERT_DOUBLE_EQUAL(gc__load_double(arr + 1, 2, GC_FLOAT64), -7.25, 0.0);
}

static void test_integers(void) {
  unsigned char b[8];
  int32_t i32;
  int64_t i64;
  gc__store_double(b, 0, GC_INT32, 2147483648.0); /* 2^31 wraps */
  memcpy(&i32, b, 4);
  CU_ASSERT_EQUAL(i32, INT32_MIN);
  gc__store_double(b, 0, GC_INT32, -1.0);
  memcpy(&i32, b, 4);
  CU_ASSERT_EQUAL(i32, -1);
  gc__store_double(b, 0, GC_INT32, 4294967298.0); /* 2^32 + 2 */
  memcpy(&i32, b, 4);
  CU_ASSERT_EQUAL(i32, 2);
  gc__store_double(b, 0, GC_INT32, -2.7); /* truncation */
  memcpy(&i32, b, 4);
  CU_ASSERT_EQUAL(i32, -2);
  gc__store_double(b, 0, GC_INT64, 9223372036854775808.0); /* 2^63 wraps */
  memcpy(&i64, b, 8);
  CU_ASSERT_EQUAL(i64, INT64_MIN);
  gc__store_double(b, 0, GC_INT64, -12345678901.0);
  memcpy(&i64, b, 8);
  CU_ASSERT_EQUAL(i64, -12345678901LL);
  gc__store_double(b, 0, GC_UINT8, 256.0);
  CU_ASSERT_EQUAL(b[0], 0);
  gc__store_double(b, 0, GC_UINT8, 257.0);
  CU_ASSERT_EQUAL(b[0], 1);
  gc__store_double(b, 0, GC_UINT8, -1.0);
  CU_ASSERT_EQUAL(b[0], 255);
  gc__store_double(b, 0, GC_UINT8, NAN);
  CU_ASSERT_EQUAL(b[0], 0);
  b[0] = 200;
  CU_ASSERT_DOUBLE_EQUAL(gc__load_double(b, 0, GC_UINT8), 200.0, 0.0);
  i32 = -5;
  memcpy(b, &i32, 4);
  CU_ASSERT_DOUBLE_EQUAL(gc__load_double(b, 0, GC_INT32), -5.0, 0.0);
}

static void test_dtype_classes(void) {
  for (int d = 0; d < GC_NUM_DTYPES; d++) {
    CU_ASSERT(gc__dtype_valid((gc_dtype_t)d));
    int fp8 = d == GC_FP8_E4M3 || d == GC_FP8_E5M2;
    CU_ASSERT_EQUAL(gc__dtype_reducible((gc_dtype_t)d), !fp8);
    int fl = d == GC_FLOAT32 || d == GC_FLOAT16 || d == GC_BFLOAT16 || d == GC_FLOAT64 || fp8;
    CU_ASSERT_EQUAL(gc__dtype_is_float((gc_dtype_t)d) != 0, fl);
  }
  CU_ASSERT(!gc__dtype_valid(GC_DTYPE_SAME));
  CU_ASSERT(!gc__dtype_valid(GC_NUM_DTYPES));
  CU_ASSERT(!gc__dtype_reducible(GC_NUM_DTYPES));
}

/* The pattern behind gc_fill_random: in range and exact in its own type. */
static void test_random_pattern(void) {
  for (int d = 0; d < GC_NUM_DTYPES; d++) {
    unsigned bad = 0, distinct_lo = 0, distinct_hi = 0;
    for (uint64_t i = 0; i < 4096; i++) {
      double v = gc__random_value(12345, i, d);
      unsigned char b[8];
      gc__store_double(b, 0, (gc_dtype_t)d, v);
      if (gc__load_double(b, 0, (gc_dtype_t)d) != v) bad++;
      if (gc__dtype_is_float((gc_dtype_t)d)) {
        if (!(v >= -1.0 && v < 1.0)) bad++;
      } else if (d == GC_UINT8) {
        if (!(v >= 0 && v < 16) || v != floor(v)) bad++;
      } else if (!(v >= -8 && v < 8) || v != floor(v)) {
        bad++;
      }
      distinct_lo += v < 0;
      distinct_hi += v > 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(distinct_hi > 1000); /* not constant */
    if (d != GC_UINT8) CU_ASSERT(distinct_lo > 1000);
    /* a different seed gives different data */
    CU_ASSERT(gc__random_value(1, 7, d) != gc__random_value(2, 7, d) ||
              gc__random_value(1, 8, d) != gc__random_value(2, 8, d) ||
              gc__random_value(1, 9, d) != gc__random_value(2, 9, d));
  }
}

static void test_header_constants(void) {
  CU_ASSERT_EQUAL(GC_VERSION_CODE, GC_VERSION_MAJOR * 10000 + GC_VERSION_MINOR * 100 + GC_VERSION_PATCH);
  char v[32];
  snprintf(v, sizeof v, "%d.%d.%d", GC_VERSION_MAJOR, GC_VERSION_MINOR, GC_VERSION_PATCH);
  CU_ASSERT_STRING_EQUAL(gc_get_version(), v);
  CU_ASSERT_EQUAL(GC_DTYPE_SAME, -1);
  CU_ASSERT_EQUAL(GC_NUM_DTYPES, 9);
  CU_ASSERT_EQUAL(GC_NUM_OPS, 5);
  CU_ASSERT_EQUAL(GC_NUM_ALGOS, 8);
  CU_ASSERT_EQUAL(GC_NUM_RESULTS, 11);
  CU_ASSERT(GC_MAX_LOCAL_RANKS >= 8);
  gc_config_t c = GC_CONFIG_INIT;
  CU_ASSERT_EQUAL(c.version, GC_CONFIG_VERSION);
  CU_ASSERT_EQUAL(c.device, -1);
  CU_ASSERT_EQUAL(c.use_gpu, 1);
  CU_ASSERT(c.local_size == 0 && c.staging_bytes == 0 && c.timeout_ms == 0);
  gc_options_t o = GC_OPTIONS_INIT;
  CU_ASSERT_EQUAL(o.version, GC_OPTIONS_VERSION);
  CU_ASSERT_EQUAL(o.algo, GC_ALGO_AUTO);
  CU_ASSERT(o.max_blocks == 0 && o.pdl == 0 && o.scale == 1.0 && o.add == NULL);
  CU_ASSERT_EQUAL(o.out_dtype, GC_DTYPE_SAME);
}

/* The public element accessors are the internal conversions, and refuse bad dtypes quietly. */
static void test_public_elements(void) {
  unsigned char buf[16];
  for (int d = 0; d < GC_NUM_DTYPES; d++) {
    gc_element_set(buf, 1, (gc_dtype_t)d, 0.75);
    CU_ASSERT_EQUAL(gc_element_get(buf, 1, (gc_dtype_t)d), gc__load_double(buf, 1, (gc_dtype_t)d));
  }
  gc_element_set(buf, 0, GC_BFLOAT16, 1.0 + 0x1p-9); /* a tie: to even */
  CU_ASSERT_EQUAL(gc_element_get(buf, 0, GC_BFLOAT16), 1.0);
  gc_element_set(buf, 0, GC_FP8_E4M3, 1000.0);
  CU_ASSERT_EQUAL(gc_element_get(buf, 0, GC_FP8_E4M3), 448.0);
  double bad = gc_element_get(buf, 0, GC_NUM_DTYPES);
  CU_ASSERT(bad != bad);
  memset(buf, 0x5a, sizeof buf);
  gc_element_set(buf, 0, (gc_dtype_t)99, 1.0);
  CU_ASSERT_EQUAL(buf[0], 0x5a);
}

/* A double between two neighbours of a 16-bit or fp8 type rounds to the nearer one: once, from
 * the double (as the kernels' double conversions and numpy do). Through float first, a double
 * just off a midpoint became the midpoint itself and then went to the even neighbour:
 * 1 + 2^-11 + 2^-40 stored 1.0 in float16 instead of 1 + 2^-10, and a float64 all-reduce cast to
 * float16 on the MPI path differed from the kernels' result there. */
static void test_round_once_from_double(void) {
  static const gc_dtype_t types[] = {GC_FLOAT16, GC_BFLOAT16, GC_FP8_E4M3, GC_FP8_E5M2};
  unsigned char b[2];
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    const gc_dtype_t dt = types[t];
    const int wide = gc_dtype_size(dt) == 2;
    /* the largest finite positive code; the 16-bit types round past it to inf, fp8 saturates */
    const unsigned top = dt == GC_FLOAT16 ? 0x7bffu : dt == GC_BFLOAT16 ? 0x7f7fu : dt == GC_FP8_E4M3 ? 0x7eu : 0x7bu;
    int wrong = 0;
    const unsigned step = wide ? 37 : 1; /* every step-th pair of neighbours, and the last one below top */
    for (unsigned c = 0; c < top; c = c + step < top || c == top - 1 ? c + step : top - 1) {
      const double a = load_bits(dt, c), z = load_bits(dt, c + 1), mid = (a + z) / 2;
      for (int side = -1; side <= 1; side += 2)
        for (int neg = 0; neg < 2; neg++) {
          const double v = (neg ? -1 : 1) * mid * (1 + side * 0x1p-40);
          gc_element_set(b, 0, dt, v);
          unsigned got = wide ? (unsigned)(b[0] | b[1] << 8) : b[0];
          unsigned want = (side > 0 ? c + 1 : c) | (neg ? (wide ? 0x8000u : 0x80u) : 0);
          if (got != want && wrong++ < 4)
            fprintf(stderr, "%s: %.17g stored 0x%x, want 0x%x\n", gc_dtype_name(dt), v, got, want);
        }
    }
    CU_ASSERT_EQUAL(wrong, 0);
    /* just past the largest finite value's midpoint: inf for the 16-bit types, the largest for fp8 */
    const double m = (load_bits(dt, top) + (dt == GC_FLOAT16 ? 65536.0 : dt == GC_BFLOAT16 ? 0x1p128
                                             : dt == GC_FP8_E4M3 ? 480.0 : 65536.0)) / 2;
    gc_element_set(b, 0, dt, m * (1 - 0x1p-40));
    CU_ASSERT_EQUAL(wide ? (unsigned)(b[0] | b[1] << 8) : b[0], top);
    gc_element_set(b, 0, dt, m * (1 + 0x1p-40));
    CU_ASSERT_EQUAL(wide ? (unsigned)(b[0] | b[1] << 8) : b[0], wide ? (dt == GC_FLOAT16 ? 0x7c00u : 0x7f80u) : top);
  }
  /* the example above, and doubles that are floats keep their float rounding */
  gc_element_set(b, 0, GC_FLOAT16, 1 + 0x1p-11 + 0x1p-40);
  CU_ASSERT_EQUAL(gc_element_get(b, 0, GC_FLOAT16), 1 + 0x1p-10);
  gc_element_set(b, 0, GC_FLOAT16, 1 + 0x1p-11);
  CU_ASSERT_EQUAL(gc_element_get(b, 0, GC_FLOAT16), 1.0);
  gc_element_set(b, 0, GC_BFLOAT16, 1 + 0x1p-8 + 0x1p-40);
  CU_ASSERT_EQUAL(gc_element_get(b, 0, GC_BFLOAT16), 1 + 0x1p-7);
  gc_element_set(b, 0, GC_FP8_E4M3, 1 + 0x1p-4 + 0x1p-40);
  CU_ASSERT_EQUAL(gc_element_get(b, 0, GC_FP8_E4M3), 1.125);
  gc_element_set(b, 0, GC_FP8_E5M2, -(1 + 0x1p-3 + 0x1p-40));
  CU_ASSERT_EQUAL(gc_element_get(b, 0, GC_FP8_E5M2), -1.25);
  /* below the smallest subnormal's half: zero, signed */
  gc_element_set(b, 0, GC_FLOAT16, -0x1p-25);
  CU_ASSERT_EQUAL(b[0] | b[1] << 8, 0x8000);
  gc_element_set(b, 0, GC_FLOAT16, 0x1p-25 * (1 + 0x1p-40));
  CU_ASSERT_EQUAL(b[0] | b[1] << 8, 1);
  gc_element_set(b, 0, GC_FLOAT16, 1e300);
  CU_ASSERT_EQUAL(b[0] | b[1] << 8, 0x7c00);
  gc_element_set(b, 0, GC_BFLOAT16, -1e300);
  CU_ASSERT_EQUAL(b[0] | b[1] << 8, 0xff80);
  gc_element_set(b, 0, GC_FP8_E4M3, -1e300);
  CU_ASSERT_EQUAL(b[0], 0xfe);
}

void gc_test_suite_types(void) {
  static const gc_test_case_t tests[] = {{"dtype names", test_dtype_names},
                                         {"op and algorithm names", test_op_algo_names},
                                         {"partition", test_partition},
                                         {"float16 conversions", test_float16},
                                         {"bfloat16 conversions", test_bfloat16},
                                         {"fp8 e4m3 conversions", test_fp8_e4m3},
                                         {"fp8 e5m2 conversions", test_fp8_e5m2},
                                         {"float32 and float64", test_float32_64},
                                         {"integer wrapping", test_integers},
                                         {"dtype classes", test_dtype_classes},
                                         {"random pattern", test_random_pattern},
                                         {"header constants", test_header_constants},
                                         {"public element access", test_public_elements},
                                         {"rounding once from double", test_round_once_from_double},
                                         {NULL, NULL}};
  gc_test_add_suite("types", tests);
}
