/* wire.c — the host side of the compressed wire formats: the check of a wire request, buffer
 * sizes, and pack / sum / unpack on host buffers with kernels/wire.cuh's arithmetic. */
#include <stdint.h>
#include <string.h>

#include "gc_wire.h"

gc_result_t gc__wire_check(const char *fn, int format, int group, gc_dtype_t dtype, gc_op_t op, gc_kwire_t *out) {
  const char *dn = gc_dtype_name(dtype) ? gc_dtype_name(dtype) : "an unknown dtype";
  gc_kwire_t w = {format, group};
  if (format == GC_WIRE_FMT_NATIVE) {
    if (group != 0) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s: wire group %d given for the native wire: groups are for fp8 only (use 0)", fn, group);
  } else if (format == GC_WIRE_FMT_FP8) {
    if (group == 0) w.group = 32;
    else if (group != 32 && group != 64 && group != 128)
      return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s: fp8 wire group %d: use 32, 64 or 128 (0 = 32)", fn, group);
    if (dtype != GC_FLOAT32 && dtype != GC_FLOAT16 && dtype != GC_BFLOAT16)
      return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s: the fp8 wire takes float32, float16 or bfloat16 data, not %s: use the native wire", fn, dn);
  } else if (format == GC_WIRE_FMT_BF16) {
    if (group != 0) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s: wire group %d given for the bf16 wire: groups are for fp8 only (use 0)", fn, group);
    if (dtype != GC_FLOAT32)
      return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s: the bf16 wire takes float32 data, not %s: use the fp8 or the native wire", fn, dn);
  } else {
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s: unknown wire format %d: use native, fp8 or bf16", fn, format);
  }
  if (format != GC_WIRE_FMT_NATIVE && op != GC_SUM && op != GC_AVG) {
    const char *on = gc_op_name(op) ? gc_op_name(op) : "an unknown op";
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s: a compressed wire takes sum and avg only, not %s: use the native wire", fn, on);
  }
  *out = w;
  return GC_SUCCESS;
}

gc_result_t gc__wire_bytes(size_t count, const gc_kwire_t *w, size_t *bytes) {
  /* Below 2^60 elements no term of the layout overflows. */
  if (count >> 60) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "wire buffer of %zu elements: too large", count);
  *bytes = gc_wire_layout_bytes(count, w->format, w->group);
  return GC_SUCCESS;
}

size_t gc__wire_unit_elements(const gc_kwire_t *w) { return w->format == GC_WIRE_FMT_FP8 ? (size_t)w->group : 8; }

size_t gc__wire_units(size_t count, const gc_kwire_t *w) {
  const size_t e = gc__wire_unit_elements(w);
  return (count + e - 1) / e;
}

/* Unit u's elements as floats (0 past count): float16 and bfloat16 values are exact in float. */
static int load_unit_floats(const void *in, size_t count, gc_dtype_t dtype, size_t first, int n, float *x) {
  int valid = 0;
  for (int e = 0; e < n; e++) {
    x[e] = 0.0f;
    if (first + e >= count) continue;
    const size_t i = first + e;
    uint16_t h;
    if (dtype == GC_FLOAT32) memcpy(&x[e], (const char *)in + 4 * i, 4);
    else if (dtype == GC_FLOAT16) memcpy(&h, (const char *)in + 2 * i, 2), x[e] = gc_wire_half_value(h);
    else memcpy(&h, (const char *)in + 2 * i, 2), x[e] = gc_wire_bf16_value(h);
    valid++;
  }
  return valid;
}

/* Unit u of a wire buffer, decoded into x (G or 8 values) ... */
static void decode_unit(const unsigned char *wire, size_t count, const gc_kwire_t *w, size_t u, float *x) {
  if (w->format == GC_WIRE_FMT_FP8) {
    const unsigned char s = wire[gc_wire_scales_at(count, w->group) + u];
    for (int e = 0; e < w->group; e++) x[e] = gc_wire_fp8_decode(wire[u * w->group + e], s);
  } else {
    for (int e = 0; e < 8; e++) {
      uint16_t h;
      memcpy(&h, wire + 16 * u + 2 * e, 2);
      x[e] = gc_wire_bf16_value(h);
    }
  }
}

/* ... and encoded from x (`valid` values, the rest zero). */
static void encode_unit(unsigned char *wire, size_t count, const gc_kwire_t *w, size_t u, const float *x, int valid) {
  if (w->format == GC_WIRE_FMT_FP8) {
    gc_wire_fp8_pack_group(x, valid, w->group, wire + u * w->group, wire + gc_wire_scales_at(count, w->group) + u);
  } else {
    for (int e = 0; e < 8; e++) {
      const uint16_t h = e < valid ? gc_wire_bf16_rne(x[e]) : 0;
      memcpy(wire + 16 * u + 2 * e, &h, 2);
    }
  }
}

void gc__wire_pack_host(const void *in, size_t count, gc_dtype_t dtype, const gc_kwire_t *w, void *wire) {
  const size_t units = gc__wire_units(count, w), ue = gc__wire_unit_elements(w), bytes = gc_wire_layout_bytes(count, w->format, w->group);
  float x[128];
  memset(wire, 0, bytes); /* the padding after the scales */
  for (size_t u = 0; u < units; u++) {
    const int valid = load_unit_floats(in, count, dtype, u * ue, (int)ue, x);
    encode_unit(wire, count, w, u, x, valid);
  }
}

void gc__wire_sum_host(const void *const *wires, int n, size_t count, const gc_kwire_t *w, size_t u0, size_t un,
                       void *out) {
  const size_t ue = gc__wire_unit_elements(w);
  float s[128], d[128];
  for (size_t u = u0; u < u0 + un; u++) {
    decode_unit(wires[0], count, w, u, s);
    for (int p = 1; p < n; p++) {
      decode_unit(wires[p], count, w, u, d);
      for (size_t e = 0; e < ue; e++) s[e] = gc_wire_add(s[e], d[e]);
    }
    /* Padding decodes to zeros in every buffer, so the sum is zero there and encodes as the
     * kernels' does (they encode whole units). */
    encode_unit(out, count, w, u, s, (int)ue);
  }
}

void gc__wire_unpack_host(const void *wire, size_t count, gc_dtype_t dtype, const gc_kwire_t *w,
                          const gc_kepilogue_t *ep, void *out) {
  const size_t units = gc__wire_units(count, w), ue = gc__wire_unit_elements(w);
  const gc_dtype_t out_dtype = ep ? (gc_dtype_t)ep->out_dtype : dtype;
  float x[128];
  for (size_t u = 0; u < units; u++) {
    decode_unit(wire, count, w, u, x);
    for (size_t e = 0; e < ue && u * ue + e < count; e++) {
      const size_t i = u * ue + e;
      float v = x[e];
      if (ep && ep->apply_scale) v = v * (float)ep->scale; /* as finish_at: multiply, then add */
      if (ep && ep->add) v = v + (float)gc__load_double(ep->add, i, dtype);
      gc__store_double(out, i, out_dtype, (double)v);
    }
  }
}
