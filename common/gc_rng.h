/* gc_rng.h — the counter-based random pattern behind gc_fill_random, shared by the host, the
 * device fill kernel, the bench's and the tests' float64 references, so all agree on every value.
 * Header-only and free of the library's private headers (the gpucoll_rng target). */
#ifndef GC_RNG_H
#define GC_RNG_H

#include <stdint.h>
#include <stddef.h>

#ifdef __CUDACC__
#define GC_HD __host__ __device__ __forceinline__
#else
#define GC_HD static inline
#endif

/* splitmix64's finalizer: a bijective mix of a 64-bit counter. */
GC_HD uint64_t gc__mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Value i of the pattern for `seed`, chosen to be exactly representable in `dtype_code` (a
 * gc_dtype_t): floats are k / 2^p uniform in [-1, 1) with p the type's precision (so half types
 * hold them exactly and sums of up to 8 ranks stay exact in float32), integers are in [-8, 8),
 * uint8 in [0, 16). */
GC_HD double gc__random_value(uint64_t seed, uint64_t i, int dtype_code) {
  uint64_t r = gc__mix64(seed * 0xD1342543DE82EF95ull + i);
  int bits; /* significant bits of the float types, incl. the sign's range */
  switch (dtype_code) {
    case 0: bits = 24; break;  /* float32 */
    case 1: bits = 11; break;  /* float16 */
    case 2: bits = 8; break;   /* bfloat16 */
    case 3: bits = 40; break;  /* float64 */
    case 4: case 5: return (double)((int)(r >> 60) - 8);   /* int32, int64 */
    case 6: return (double)(int)(r >> 60);                  /* uint8 */
    case 7: bits = 4; break;   /* fp8 e4m3 */
    case 8: bits = 3; break;   /* fp8 e5m2 */
    default: return 0.0;
  }
  int64_t k = (int64_t)(r >> (64 - bits)) - ((int64_t)1 << (bits - 1));
  return (double)k / (double)((int64_t)1 << (bits - 1));
}

#endif /* GC_RNG_H */
