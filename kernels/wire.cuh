/* wire.cuh — the arithmetic of the compressed wire formats (fp8 e4m3 with a power-of-two scale
 * per group, bf16), written once for the host and the device: the kernels, the host path and the
 * tests run this same code, so their bytes agree by construction. docs/wire-format.md states the
 * formats, the error bound and the non-finite rules; this file is valid C and CUDA C++.
 *
 * fp8 wire of count elements, group G (32, 64 or 128): groups = ceil(count / G) groups of G codes
 * (the last group padded with code 0), then one scale byte per group at offset groups * G, the
 * whole rounded up to 16 bytes. Scale byte b means 2^(b - 127) (OCP E8M0); element = code value
 * times the scale. Codes are e4m3 except three: 0x7F = +Inf, 0xFF = -Inf, 0x80 = NaN (zeros are
 * always 0x00, so e4m3's negative zero is free). bf16 wire (float32 data): count bf16 values,
 * rounded up to 16 bytes. */
#ifndef GC_WIRE_CUH
#define GC_WIRE_CUH

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GC_WIRE_FN static __host__ __device__ __forceinline__
#else
#define GC_WIRE_FN static inline
#endif

/* Sums must round like the host's: denormals kept (no -ftz) and float arithmetic in float. */
#if defined(__CUDACC_FTZ__)
#error "wire.cuh needs denormals kept: build without --ftz=true / --use_fast_math"
#endif
#if !defined(__CUDA_ARCH__) && defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "wire.cuh needs float arithmetic evaluated in float (FLT_EVAL_METHOD 0)"
#endif

/* Wire formats (the values of gc_kwire_t.format). */
enum { GC_WIRE_FMT_NATIVE = 0, GC_WIRE_FMT_FP8 = 1, GC_WIRE_FMT_BF16 = 2 };

#define GC_WIRE_FP8_POS_INF 0x7Fu
#define GC_WIRE_FP8_NEG_INF 0xFFu
#define GC_WIRE_FP8_NAN 0x80u
#define GC_WIRE_FP8_MAX_CODE 0x7Eu /* 448 */
/* Scale exponents k (scale 2^k): the byte holds k + 127. k = -127 for groups below 448 * 2^-127
 * (zero groups included); k = 120 is the largest any finite float32 needs (FLT_MAX / 448 <
 * 2^120). At k = 120 codes above 0x77 (240 * 2^120) would decode past FLT_MAX: they stop there. */
#define GC_WIRE_KMIN (-127)
#define GC_WIRE_KMAX 120
#define GC_WIRE_KMAX_CODE 0x77u

/* ---- bits ------------------------------------------------------------------------------------ */
GC_WIRE_FN uint32_t gc_wire_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}
GC_WIRE_FN float gc_wire_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}
/* Position of the highest set bit of m (m > 0). */
GC_WIRE_FN int gc_wire_top_bit(uint32_t m) {
#ifdef __CUDA_ARCH__
  return 31 - __clz(m);
#else
  return 31 - __builtin_clz(m);
#endif
}
/* a + b rounded to nearest even, never fused with a multiply. */
GC_WIRE_FN float gc_wire_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/* ---- e4m3 ------------------------------------------------------------------------------------ */
/* The e4m3 code of x * 2^-k, rounded to nearest even and saturated to +-448: exactly what
 * __nv_cvt_float_to_fp8(x * 2^-k, __NV_SATFINITE, __NV_E4M3) gives for the exact product (NaN
 * 0x7F, +-Inf +-448, negative values that round to zero 0x80). Integer arithmetic only: the
 * product is never formed, so nothing underflows or depends on the FPU's modes. */
GC_WIRE_FN uint8_t gc_wire_e4m3_rne(uint32_t xb, int k) {
  const uint32_t sign = (xb >> 24) & 0x80u, mag = xb & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7F;
  if (mag == 0x7F800000u) return (uint8_t)(sign | GC_WIRE_FP8_MAX_CODE);
  const int ef = (int)(mag >> 23);
  const uint32_t m = ef ? (mag & 0x7FFFFFu) | 0x800000u : mag; /* |x| = m * 2^e2 */
  const int e2 = ef ? ef - 150 : -149;
  if (m == 0) return (uint8_t)sign;
  const int lg = gc_wire_top_bit(m) + e2 - k; /* floor(log2 |y|), y = x * 2^-k */
  if (lg > 8) return (uint8_t)(sign | GC_WIRE_FP8_MAX_CODE);
  const int qexp = lg - 3 < -9 ? -9 : lg - 3; /* y's quantum: 2^qexp (2^-9 below 2^-6) */
  const int r = qexp - (e2 - k);              /* |y| / quantum = m / 2^r */
  uint32_t q;
  if (r <= 0) {
    q = m << -r; /* exact: then m < 16 */
  } else if (r > 25) {
    q = 0; /* m < 2^24 < half a quantum */
  } else {
    const uint32_t rem = m & ((1u << r) - 1), half = 1u << (r - 1);
    q = (m >> r) + (rem > half || (rem == half && ((m >> r) & 1u)));
  }
  /* Subnormal: code q (8 is the first normal); normal: exponent field lg + 7, q in [8, 16]
   * (16 carries into the next exponent): both are (qexp + 9) * 8 + q. */
  uint32_t code = (uint32_t)(qexp + 9) * 8u + q;
  if (code > GC_WIRE_FP8_MAX_CODE) code = GC_WIRE_FP8_MAX_CODE;
  return (uint8_t)(sign | code);
}

/* M * 2^E as a float, exactly, for 0 < M < 2^24 and -149 <= E + top_bit(M), value < 2^128. */
GC_WIRE_FN float gc_wire_make_float(uint32_t M, int E, uint32_t negative) {
  const int t = gc_wire_top_bit(M), be = t + E + 127;
  uint32_t bits;
  if (be >= 1) bits = ((uint32_t)be << 23) | ((M << (23 - t)) & 0x7FFFFFu);
  else bits = M << (E + 149); /* a denormal: value = bits * 2^-149 */
  return gc_wire_float(bits | (negative ? 0x80000000u : 0u));
}

/* The value of e4m3 code c times 2^k (c is no wire special: not 0x7F, 0xFF, 0x80). */
GC_WIRE_FN float gc_wire_e4m3_value(uint8_t c, int k) {
  const uint32_t e = (c >> 3) & 15u, m = c & 7u, M = e ? (8u | m) : m;
  if (M == 0) return gc_wire_float((c & 0x80u) ? 0x80000000u : 0u);
  return gc_wire_make_float(M, (e ? (int)e - 10 : -9) + k, c & 0x80u);
}

/* ---- the fp8 wire ---------------------------------------------------------------------------- */
/* |x|'s bits when x is finite, else 0: the group maximum is the integer maximum of these (the
 * bits of non-negative floats order as their values), and non-finite values do not count. */
GC_WIRE_FN uint32_t gc_wire_finite_mag(float x) {
  const uint32_t mag = gc_wire_bits(x) & 0x7FFFFFFFu;
  return mag < 0x7F800000u ? mag : 0u;
}

/* The scale exponent of a group from its largest finite magnitude's bits: the least k >= -127
 * with max <= 448 * 2^k (448 = 1.75 * 2^8), so no finite element of the group saturates. */
GC_WIRE_FN int gc_wire_fp8_exponent(uint32_t maxbits) {
  if (maxbits == 0) return GC_WIRE_KMIN;
  const int ef = (int)(maxbits >> 23);
  uint32_t frac = maxbits & 0x7FFFFFu;
  int lg = ef - 127;
  if (!ef) { /* a denormal maximum: normalize */
    const int t = gc_wire_top_bit(frac);
    lg = t - 149;
    frac = (frac << (23 - t)) & 0x7FFFFFu;
  }
  const int k = frac <= 0x600000u ? lg - 8 : lg - 7;
  return k < GC_WIRE_KMIN ? GC_WIRE_KMIN : k;
}

/* Element x of a group with scale exponent k on the wire: NaN, +Inf, -Inf get their codes,
 * zeros (and values that round to zero) 0x00, the rest gc_wire_e4m3_rne. */
GC_WIRE_FN uint8_t gc_wire_fp8_encode(float x, int k) {
  const uint32_t b = gc_wire_bits(x), mag = b & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return GC_WIRE_FP8_NAN;
  if (mag == 0x7F800000u) return (b >> 31) ? GC_WIRE_FP8_NEG_INF : GC_WIRE_FP8_POS_INF;
  uint8_t c = gc_wire_e4m3_rne(b, k);
  if ((c & 0x7Fu) == 0) return 0;
  if (k == GC_WIRE_KMAX && (c & 0x7Fu) > GC_WIRE_KMAX_CODE) c = (uint8_t)((c & 0x80u) | GC_WIRE_KMAX_CODE);
  return c;
}

/* The value of wire code c in a group of scale byte s. NaN is 0x7FFFFFFF, the device's own. */
GC_WIRE_FN float gc_wire_fp8_decode(uint8_t c, uint8_t s) {
  if (c == GC_WIRE_FP8_NAN) return gc_wire_float(0x7FFFFFFFu);
  if (c == GC_WIRE_FP8_POS_INF) return gc_wire_float(0x7F800000u);
  if (c == GC_WIRE_FP8_NEG_INF) return gc_wire_float(0xFF800000u);
  return gc_wire_e4m3_value(c, (int)s - 127);
}

/* One whole group on one thread (the host path and the tests; the kernels spread a group over
 * G / 16 lanes with the same pieces): x[0 .. valid) into codes[0 .. G) (code 0 past valid) and
 * its scale byte. */
GC_WIRE_FN void gc_wire_fp8_pack_group(const float *x, int valid, int G, uint8_t *codes, uint8_t *scale) {
  uint32_t most = 0;
  for (int i = 0; i < valid; i++) {
    const uint32_t m = gc_wire_finite_mag(x[i]);
    most = m > most ? m : most;
  }
  const int k = gc_wire_fp8_exponent(most);
  for (int i = 0; i < G; i++) codes[i] = i < valid ? gc_wire_fp8_encode(x[i], k) : 0;
  *scale = (uint8_t)(k + 127);
}

/* ---- bf16 ------------------------------------------------------------------------------------ */
/* Round to nearest even; NaN becomes 0x7FFF and values past the largest bf16 become Inf, as
 * __float2bfloat16_rn does. */
GC_WIRE_FN uint16_t gc_wire_bf16_rne(float x) {
  const uint32_t b = gc_wire_bits(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  return (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
GC_WIRE_FN float gc_wire_bf16_value(uint16_t h) { return gc_wire_float((uint32_t)h << 16); }

/* float16 bits to float, exactly (the host's reading of float16 inputs). */
GC_WIRE_FN float gc_wire_half_value(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 0x3FFu;
  if (e == 31) return gc_wire_float(sign | 0x7F800000u | (m << 13));
  if (e == 0 && m == 0) return gc_wire_float(sign);
  if (e == 0) return gc_wire_make_float(m, -24, sign);
  return gc_wire_float(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---- layout ---------------------------------------------------------------------------------- */
GC_WIRE_FN size_t gc_wire_round16(size_t b) { return (b + 15) / 16 * 16; }
GC_WIRE_FN size_t gc_wire_groups(size_t count, int G) { return (count + (size_t)G - 1) / (size_t)G; }
/* Offset of the scale bytes in an fp8 wire buffer (a multiple of 32). */
GC_WIRE_FN size_t gc_wire_scales_at(size_t count, int G) { return gc_wire_groups(count, G) * (size_t)G; }
/* Bytes of a wire buffer of count elements (no overflow check: lib/wire.c checks the count). */
GC_WIRE_FN size_t gc_wire_layout_bytes(size_t count, int format, int G) {
  if (format == GC_WIRE_FMT_FP8) return gc_wire_scales_at(count, G) + gc_wire_round16(gc_wire_groups(count, G));
  if (format == GC_WIRE_FMT_BF16) return gc_wire_round16(count * 2);
  return 0;
}

/* ---- which thread handles which chunk -------------------------------------------------------- */
/* A chunk is 16 bytes of wire: 16 fp8 codes (a group is G / 16 chunks) or 8 bf16 values. The
 * two-shot splits the wire's units (groups for fp8, chunks for bf16; per_unit chunks each) into
 * n shares, gc_partition's split: share r is units [u0, u0 + un). */
GC_WIRE_FN void gc_wire_share(size_t units, int n, int r, size_t *u0, size_t *un) {
  const size_t base = units / (size_t)n, extra = units % (size_t)n, i = (size_t)r;
  *u0 = i * base + (i < extra ? i : extra);
  *un = base + (i < extra ? 1 : 0);
}

/* A thread's walk over the chunks of shares q0 .. q1 - 1, share after share: thread t of a grid
 * of T threads takes offsets t, t + T, t + 2T, ... inside each share. Every kernel of wire.cu
 * walks its chunks so (pack, unpack and one-shot as the one share of a split over 1).
 *
 * The two-shot's invariant: its barriers are per block (block b of every rank meets block b of
 * every other), not across the grid, so a chunk that rank q encodes in the first phase may be
 * decoded after the barrier only by block b of each rank, b the block that encoded it. Both
 * phases walk share q from the same first chunk with the same t and T (every rank launches the
 * same grid), so the thread, and the block, that decodes a chunk on every rank is the one that
 * encoded it on its owner. A walk over all chunks from chunk 0 would decode a chunk of share q
 * (q > 0) in another block, which may still be encoding it: the test suite's "wire two-shot walk"
 * checks both.
 *
 * The lanes of an fp8 group take part in one shuffle for the group maximum: a share starts on a
 * group, T is a multiple of 32, so the G / 16 chunks of a group fall to G / 16 neighbouring lanes
 * of one warp in the same step. */
typedef struct gc_wire_walk {
  size_t units, per_unit, t, T;
  size_t at, end; /* the next chunk and the end of the current share */
  int n, q, q1;   /* the current share and the end of the walk */
} gc_wire_walk_t;

GC_WIRE_FN void gc_wire_walk_begin(gc_wire_walk_t *w, size_t units, size_t per_unit, int n, int q0, int q1, size_t t,
                                   size_t T) {
  w->units = units, w->per_unit = per_unit, w->t = t, w->T = T;
  w->at = w->end = 0;
  w->n = n, w->q = q0 - 1, w->q1 = q1;
}

/* The next chunk of the walk into *chunk (share w->q); 0 once the walk is over. */
GC_WIRE_FN int gc_wire_walk_next(gc_wire_walk_t *w, size_t *chunk) {
  while (w->at >= w->end) {
    if (w->q + 1 >= w->q1) return 0;
    size_t u0, un;
    gc_wire_share(w->units, w->n, ++w->q, &u0, &un);
    w->at = u0 * w->per_unit + w->t;
    w->end = (u0 + un) * w->per_unit;
  }
  *chunk = w->at;
  w->at += w->T;
  return 1;
}

/* Units of a wire of count elements and chunks per unit. */
GC_WIRE_FN size_t gc_wire_units(size_t count, int format, int G) {
  return format == GC_WIRE_FMT_FP8 ? gc_wire_groups(count, G) : (count + 7) / 8;
}
GC_WIRE_FN size_t gc_wire_chunks_per_unit(int format, int G) { return format == GC_WIRE_FMT_FP8 ? (size_t)(G / 16) : 1; }

#endif /* GC_WIRE_CUH */
