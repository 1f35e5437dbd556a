/* types.c — dtype/op/algorithm names and sizes, gc_partition, and the exact element conversions
 * (float16, bfloat16, fp8 e4m3/e5m2, wrapping integers) the MPI path and the tests share. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gc_internal.h"

/* ---- names and sizes, generated from the lists in gpucoll.h -------------------------------- */

static const char *const dtype_names[] = {
#define GC__X(name, str, size, reducible) str,
    GC_DTYPE_MAP(GC__X)
#undef GC__X
};
static const size_t dtype_sizes[] = {
#define GC__X(name, str, size, reducible) size,
    GC_DTYPE_MAP(GC__X)
#undef GC__X
};
static const int dtype_reducible[] = {
#define GC__X(name, str, size, reducible) reducible,
    GC_DTYPE_MAP(GC__X)
#undef GC__X
};
static const char *const op_names[] = {
#define GC__X(name, str) str,
    GC_OP_MAP(GC__X)
#undef GC__X
};
static const char *const algo_names[] = {
#define GC__X(name, str, doc) str,
    GC_ALGO_MAP(GC__X)
#undef GC__X
};

int gc__dtype_valid(gc_dtype_t dtype) { return dtype >= 0 && dtype < GC_NUM_DTYPES; }

int gc__dtype_reducible(gc_dtype_t dtype) {
  return gc__dtype_valid(dtype) && dtype_reducible[dtype];
}

int gc__dtype_is_float(gc_dtype_t dtype) {
  switch (dtype) {
    case GC_FLOAT32: case GC_FLOAT16: case GC_BFLOAT16: case GC_FLOAT64:
    case GC_FP8_E4M3: case GC_FP8_E5M2:
      return 1;
    default:
      return 0;
  }
}

const char *gc_dtype_name(gc_dtype_t dtype) {
  return gc__dtype_valid(dtype) ? dtype_names[dtype] : NULL;
}

size_t gc_dtype_size(gc_dtype_t dtype) { return gc__dtype_valid(dtype) ? dtype_sizes[dtype] : 0; }

const char *gc_op_name(gc_op_t op) { return (op >= 0 && op < GC_NUM_OPS) ? op_names[op] : NULL; }

const char *gc_algo_name(gc_algo_t algo) {
  return (algo >= 0 && algo < GC_NUM_ALGOS) ? algo_names[algo] : NULL;
}

/* Looks name up (case-insensitively) in names[0..n), then in the alias list; -1 when absent. */
static int lookup(const char *name, const char *const *names, int n,
                  const char *const (*aliases)[2]) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(name, names[i]) == 0) return i;
  for (int i = 0; aliases && aliases[i][0]; i++)
    if (strcasecmp(name, aliases[i][0]) == 0) return lookup(aliases[i][1], names, n, NULL);
  return -1;
}

/* The short names people type in scripts and on command lines (nccl-tests, PyTorch). */
static const char *const dtype_aliases[][2] = {
    {"float", "float32"}, {"fp32", "float32"}, {"half", "float16"},  {"fp16", "float16"},
    {"bf16", "bfloat16"}, {"double", "float64"}, {"fp64", "float64"}, {"int", "int32"},
    {"e4m3", "fp8_e4m3"}, {"e5m2", "fp8_e5m2"}, {"fp8e4m3", "fp8_e4m3"}, {"fp8e5m2", "fp8_e5m2"},
    {NULL, NULL}};

gc_result_t gc_dtype_from_name(const char *name, gc_dtype_t *out) {
  if (!name || !out) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_dtype_from_name: NULL argument");
  int i = lookup(name, dtype_names, GC_NUM_DTYPES, dtype_aliases);
  if (i < 0)
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT,
                   "unknown dtype '%s' (float32, float16, bfloat16, float64, int32, int64, uint8, "
                   "fp8_e4m3, fp8_e5m2)", name);
  *out = (gc_dtype_t)i;
  return GC_SUCCESS;
}

gc_result_t gc_op_from_name(const char *name, gc_op_t *out) {
  if (!name || !out) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_op_from_name: NULL argument");
  int i = lookup(name, op_names, GC_NUM_OPS, NULL);
  if (i < 0)
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "unknown op '%s' (sum, prod, min, max, avg)", name);
  *out = (gc_op_t)i;
  return GC_SUCCESS;
}

const char *gc__algo_list(char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < GC_NUM_ALGOS && at < n; i++)
    at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", algo_names[i]);
  return buf;
}

gc_result_t gc_algo_from_name(const char *name, gc_algo_t *out) {
  if (!name || !out) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_algo_from_name: NULL argument");
  int i = lookup(name, algo_names, GC_NUM_ALGOS, NULL);
  if (i < 0) {
    char list[256];
    if (strcmp(name, GC__ALGO_WRITES_ALIAS) == 0)
      return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "unknown algorithm '%s': the algorithm by writes is 'writes' (%s)",
                     name, gc__algo_list(list, sizeof list));
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "unknown algorithm '%s' (%s)", name, gc__algo_list(list, sizeof list));
  }
  *out = (gc_algo_t)i;
  return GC_SUCCESS;
}

void gc_partition(size_t total, int parts, int index, size_t *offset, size_t *length) {
  size_t off = 0, len = 0;
  if (parts > 0 && index >= 0 && index < parts) {
    size_t q = total / (size_t)parts, r = total % (size_t)parts, i = (size_t)index;
    len = q + (i < r ? 1 : 0);
    off = i * q + (i < r ? i : r);
  } else if (parts > 0 && index >= parts) {
    off = total; /* past the end: an empty part there, so callers' loops stay simple */
  }
  if (offset) *offset = off;
  if (length) *length = len;
}

/* ---- float16 / bfloat16 ------------------------------------------------------------------ */
/* NaNs become the canonical 0x7FFF, as CUDA's __float2half / __float2bfloat16 produce, so the
 * host and the kernels agree bit for bit even there. */

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint32_t float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static uint16_t float_to_half(float f) {
  uint32_t x = float_to_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fffu;                /* NaN */
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf (RNE) */
  if (ax < 0x38800000u) {                              /* below 2^-14: subnormal or zero */
    if (ax <= 0x33000000u) return sign;                /* <= 2^-25: ties to the even 0 */
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    unsigned shift = 126u - e; /* the value in units of 2^-24 is m >> shift */
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = (ax >> 13) - (112u << 10); /* rebias 127 -> 15, keep the top 10 mantissa bits */
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry rolls into the exponent */
  return (uint16_t)(sign | h);
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    float v = ldexpf((float)m, -24);
    return sign ? -v : v;
  }
  if (e == 31) return bits_to_float(sign | 0x7f800000u | (m << 13));
  return bits_to_float(sign | ((e + 112u) << 23) | (m << 13));
}

static uint16_t float_to_bf16(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; /* NaN */
  x += 0x7fffu + ((x >> 16) & 1u); /* RNE; large finite values carry into inf as IEEE says */
  return (uint16_t)(x >> 16);
}

static float bf16_to_float(uint16_t b) { return bits_to_float((uint32_t)b << 16); }

/* A finite double rounded (to nearest, ties to even) to mbits bits after the point, with the
 * spacing of exponent emin below 2^emin (subnormals); no range limit. The result is exact as a
 * float for the 16-bit types, so rounding it to one of them changes nothing more: a double
 * rounds once, as in the kernels (cvt.rn.f16.f64, cvt.rn.bf16.f64), not twice through float,
 * which took 1 + 2^-11 + 2^-40 to 1 instead of 1 + 2^-10 in float16. */
static double round_to_bits(double v, int mbits, int emin) {
  if (v == 0 || !isfinite(v)) return v;
  int ex;
  frexp(v, &ex);
  const int e = ex - 1 < emin ? emin : ex - 1;
  const double q = ldexp(1.0, e - mbits);
  return rint(v / q) * q; /* exact division by a power of two; rint ties to even */
}

static uint16_t double_to_half(double v) {
  if (isnan(v)) return 0x7fffu;
  return float_to_half((float)round_to_bits(v, 10, -14)); /* past 65520: float inf or float_to_half's */
}

static uint16_t double_to_bf16(double v) {
  if (isnan(v)) return 0x7fffu;
  return float_to_bf16((float)round_to_bits(v, 7, -126)); /* past the largest bf16: inf, as IEEE */
}

/* ---- fp8 (OCP E4M3FN and E5M2) --------------------------------------------------------- */
/* Conversions saturate like CUDA's __NV_SATFINITE: finite values and infinities past the largest
 * finite value become +-max (448 / 57344), NaN becomes 0x7F. */

typedef struct { int mbits, bias; double max; uint8_t max_code; } fp8_fmt_t;
static const fp8_fmt_t fmt_e4m3 = {3, 7, 448.0, 0x7e};
static const fp8_fmt_t fmt_e5m2 = {2, 15, 57344.0, 0x7b};

/* From a double, rounding once as the kernels' __nv_cvt_double_to_fp8 does (float inputs are
 * doubles exactly). */
static uint8_t double_to_fp8(double f, const fp8_fmt_t *fmt) {
  if (isnan(f)) return 0x7f;
  uint8_t sign = signbit(f) ? 0x80 : 0;
  double a = fabs(f);
  if (isinf(a)) return (uint8_t)(sign | fmt->max_code);
  if (a == 0.0) return sign;
  const int emin = 1 - fmt->bias;
  int ex;
  frexp(a, &ex);
  int e = ex - 1 < emin ? emin : ex - 1;
  double q = ldexp(1.0, e - fmt->mbits); /* the spacing of representable values around a */
  double r = rint(a / q) * q;            /* exact division by a power of two; rint ties to even */
  if (r > fmt->max) r = fmt->max;
  if (r == 0.0) return sign;
  frexp(r, &ex); /* rounding may have moved r into the next binade */
  e = ex - 1;
  if (e < emin) return (uint8_t)(sign | (uint8_t)(r / ldexp(1.0, emin - fmt->mbits)));
  unsigned m = (unsigned)(r / ldexp(1.0, e - fmt->mbits)) - (1u << fmt->mbits);
  return (uint8_t)(sign | ((unsigned)(e + fmt->bias) << fmt->mbits) | m);
}

static float fp8_to_float(uint8_t v, const fp8_fmt_t *fmt) {
  int sign = v & 0x80;
  unsigned ebits = fmt->mbits == 3 ? 4u : 5u;
  unsigned e = (v >> fmt->mbits) & ((1u << ebits) - 1u), m = v & ((1u << fmt->mbits) - 1u);
  float r;
  if (fmt->mbits == 3 && (v & 0x7f) == 0x7f) return NAN; /* E4M3FN: only S.1111.111 is NaN */
  if (fmt->mbits == 2 && e == 31) r = m ? NAN : INFINITY;
  else if (e == 0) r = ldexpf((float)m, 1 - fmt->bias - fmt->mbits);
  else r = ldexpf((float)((1u << fmt->mbits) | m), (int)e - fmt->bias - fmt->mbits);
  return sign ? -r : r;
}

/* ---- integers ----------------------------------------------------------------------------- */
/* Doubles become integers by truncation, then wrap modulo 2^64 (and modulo the width on
 * storing), as the integer accumulator's unsigned arithmetic does; NaN becomes 0. */
static uint64_t double_to_u64_wrap(double v) {
  if (isnan(v)) return 0;
  if (isinf(v)) return 0;
  v = trunc(v);
  if (v < 0) return (uint64_t)0 - double_to_u64_wrap(-v);
  double m = fmod(v, 18446744073709551616.0); /* exact */
  return (uint64_t)m;
}

/* ---- element access --------------------------------------------------------------------- */

double gc__load_double(const void *buf, size_t i, gc_dtype_t dtype) {
  const unsigned char *p = buf;
  switch (dtype) {
    case GC_FLOAT32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case GC_FLOAT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return half_to_float(v); }
    case GC_BFLOAT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bf16_to_float(v); }
    case GC_FLOAT64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case GC_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case GC_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case GC_UINT8: return p[i];
    case GC_FP8_E4M3: return fp8_to_float(p[i], &fmt_e4m3);
    case GC_FP8_E5M2: return fp8_to_float(p[i], &fmt_e5m2);
    default: return NAN;
  }
}

/* The half and fp8 types round once from the double: float accumulators' values are doubles
 * exactly (the same bits as rounding the float), and float64 results round as the kernels'
 * double conversions do. */
void gc__store_double(void *buf, size_t i, gc_dtype_t dtype, double v) {
  unsigned char *p = buf;
  switch (dtype) {
    case GC_FLOAT32: { float f = (float)v; memcpy(p + 4 * i, &f, 4); break; }
    case GC_FLOAT16: { uint16_t h = double_to_half(v); memcpy(p + 2 * i, &h, 2); break; }
    case GC_BFLOAT16: { uint16_t h = double_to_bf16(v); memcpy(p + 2 * i, &h, 2); break; }
    case GC_FLOAT64: memcpy(p + 8 * i, &v, 8); break;
    case GC_INT32: { uint32_t u = (uint32_t)double_to_u64_wrap(v); memcpy(p + 4 * i, &u, 4); break; }
    case GC_INT64: { uint64_t u = double_to_u64_wrap(v); memcpy(p + 8 * i, &u, 8); break; }
    case GC_UINT8: p[i] = (unsigned char)double_to_u64_wrap(v); break;
    case GC_FP8_E4M3: p[i] = double_to_fp8(v, &fmt_e4m3); break;
    case GC_FP8_E5M2: p[i] = double_to_fp8(v, &fmt_e5m2); break;
    default: break;
  }
}

double gc_element_get(const void *host_buf, size_t i, gc_dtype_t dtype) {
  if (!host_buf || !gc__dtype_valid(dtype)) return NAN;
  return gc__load_double(host_buf, i, dtype);
}

void gc_element_set(void *host_buf, size_t i, gc_dtype_t dtype, double value) {
  if (host_buf && gc__dtype_valid(dtype)) gc__store_double(host_buf, i, dtype, value);
}

/* ---- names of the wire formats and the norm numerics ---------------------------------------- */

static const char *const wire_names[] = {
#define GC__X(name, str) str,
    GC_WIRE_MAP(GC__X)
#undef GC__X
};

const char *gc_wire_name(gc_wire_t wire) { return (int)wire >= 0 && wire < GC_NUM_WIRES ? wire_names[wire] : NULL; }

gc_result_t gc_wire_from_name(const char *name, gc_wire_t *out) {
  if (!name || !out) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_wire_from_name: NULL argument");
  for (int i = 0; i < GC_NUM_WIRES; i++)
    if (strcasecmp(name, wire_names[i]) == 0) {
      *out = (gc_wire_t)i;
      return GC_SUCCESS;
    }
  return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "unknown wire format '%s' (native, fp8, bf16)", name);
}

static const char *const numerics_names[GC_NUM_NORM_NUMERICS] = {
#define GC__NORM_NAME(name, str, doc) str,
    GC_NORM_NUMERICS_MAP(GC__NORM_NAME)
#undef GC__NORM_NAME
};

const char *gc_norm_numerics_name(gc_norm_numerics_t numerics) {
  return (int)numerics >= 0 && numerics < GC_NUM_NORM_NUMERICS ? numerics_names[numerics] : NULL;
}

gc_result_t gc_norm_numerics_from_name(const char *name, gc_norm_numerics_t *out) {
  if (!name || !out) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_norm_numerics_from_name: NULL argument");
  for (int i = 0; i < GC_NUM_NORM_NUMERICS; i++)
    if (strcmp(name, numerics_names[i]) == 0) {
      *out = (gc_norm_numerics_t)i;
      return GC_SUCCESS;
    }
  return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "unknown norm numerics '%s' (max, rounded)", name);
}
