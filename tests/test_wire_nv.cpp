// test_wire_nv.cpp — kernels/wire.cuh's conversions against CUDA's own (cuda_fp8.h, cuda_bf16.h,
// cuda_fp16.h, whose host versions define what the device instructions give), over every float
// whose low 16 bits sit at a rounding boundary: all sign/exponent/top-mantissa patterns, so every
// tie, every value beside a tie, every saturation and underflow edge. For test_wire.c.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "wire.cuh"

namespace {
const uint32_t kLows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000, 0x1234};

float float_of(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}

// x * 2^-k converted by CUDA, from the exact product (a double holds it for these k).
uint8_t nv_e4m3(float x, int k) {
  return (uint8_t)__nv_cvt_double_to_fp8(ldexp((double)x, -k), __NV_SATFINITE, __NV_E4M3);
}

long report(const char *what, uint32_t b, int k, unsigned mine, unsigned theirs, long bad) {
  if (bad < 5) fprintf(stderr, "wire %s: x bits %08x k %d: wire.cuh %x, CUDA %x\n", what, b, k, mine, theirs);
  return bad + 1;
}
}  // namespace

// Mismatches between wire.cuh and CUDA over the boundary floats (0 = none): e4m3 at k = 0 (every
// float, NaN and Inf included, against __nv_cvt_float_to_fp8) and at the scale exponents' ends
// (finite floats), bf16 rounding, and float16 reading.
extern "C" long gc_test_wire_cuda_mismatches(void) {
  static const int ks[] = {GC_WIRE_KMIN, -60, -8, 7, 60, GC_WIRE_KMAX};
  long bad = 0;
  for (uint32_t hi = 0; hi < 65536; hi++)
    for (uint32_t lo : kLows) {
      const uint32_t b = hi << 16 | lo;
      const float x = float_of(b);
      const uint8_t nv = (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
      if (gc_wire_e4m3_rne(b, 0) != nv) bad = report("e4m3", b, 0, gc_wire_e4m3_rne(b, 0), nv, bad);
      if (isfinite(x))
        for (int k : ks)
          if (gc_wire_e4m3_rne(b, k) != nv_e4m3(x, k)) bad = report("e4m3", b, k, gc_wire_e4m3_rne(b, k), nv_e4m3(x, k), bad);
      const __nv_bfloat16 h = __float2bfloat16_rn(x);
      uint16_t hb;
      memcpy(&hb, &h, 2);
      if (gc_wire_bf16_rne(x) != hb) bad = report("bf16", b, 0, gc_wire_bf16_rne(x), hb, bad);
    }
  for (uint32_t h = 0; h < 65536; h++) {
    const uint16_t h16 = (uint16_t)h;
    __half_raw raw;
    raw.x = h16;
    const __half v(raw);
    const float theirs = __half2float(v), mine = gc_wire_half_value(h16);
    if (memcmp(&theirs, &mine, 4) && !(isnan(theirs) && isnan(mine))) {
      uint32_t a, c;
      memcpy(&a, &mine, 4);
      memcpy(&c, &theirs, 4);
      bad = report("half", h, 0, a, c, bad);
    }
  }
  for (int c = 0; c < 256; c++) {
    if (c == 0x7F || c == 0xFF) continue;  // e4m3 NaNs: wire.cuh gives them other meanings
    __nv_fp8_e4m3 v;
    v.__x = (__nv_fp8_storage_t)c;
    const float theirs = (float)v, mine = gc_wire_e4m3_value((uint8_t)c, 0);
    if (memcmp(&theirs, &mine, 4)) bad = report("e4m3 value", (uint32_t)c, 0, (unsigned)mine, (unsigned)theirs, bad);
  }
  return bad;
}
