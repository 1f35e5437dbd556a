/* wire.c — the host side of the compressed wire formats: their names, the check of a wire
 * request, buffer sizes, pack / sum / unpack on host buffers with kernels/wire.cuh's arithmetic,
 * and the MPI path's all-reduce over the wire. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gc_wire.h"

/* The public names are the kernels' formats. */
_Static_assert((int)GC_WIRE_NATIVE == GC_WIRE_FMT_NATIVE && (int)GC_WIRE_FP8 == GC_WIRE_FMT_FP8 &&
                   (int)GC_WIRE_BF16 == GC_WIRE_FMT_BF16,
               "gc_wire_t and GC_WIRE_FMT_* differ");

gc_result_t gc__wire_check(gc_comm_t comm, const char *fn, int format, int group, gc_dtype_t dtype, gc_op_t op, gc_kwire_t *out) {
  const char *dn = gc_dtype_name(dtype) ? gc_dtype_name(dtype) : "an unknown dtype";
  gc_kwire_t w = {format, group};
  if (format == GC_WIRE_FMT_NATIVE) {
    if (group != 0) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: wire group %d given for the native wire: groups are for fp8 only (use 0)", fn, group);
  } else if (format == GC_WIRE_FMT_FP8) {
    if (group == 0) w.group = 32;
    else if (group != 32 && group != 64 && group != 128)
      return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: fp8 wire group %d: use 32, 64 or 128 (0 = 32)", fn, group);
    if (dtype != GC_FLOAT32 && dtype != GC_FLOAT16 && dtype != GC_BFLOAT16)
      return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: the fp8 wire takes float32, float16 or bfloat16 data, not %s: use the native wire", fn, dn);
  } else if (format == GC_WIRE_FMT_BF16) {
    if (group != 0) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: wire group %d given for the bf16 wire: groups are for fp8 only (use 0)", fn, group);
    if (dtype != GC_FLOAT32)
      return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: the bf16 wire takes float32 data, not %s: use the fp8 or the native wire", fn, dn);
  } else {
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: unknown wire format %d: use native, fp8 or bf16", fn, format);
  }
  if (format != GC_WIRE_FMT_NATIVE && op != GC_SUM && op != GC_AVG) {
    const char *on = gc_op_name(op) ? gc_op_name(op) : "an unknown op";
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: a compressed wire takes sum and avg only, not %s: use the native wire", fn, on);
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

/* ---- the MPI path ------------------------------------------------------------------------- */

/* Share q of a round of cn elements split over n ranks (gc_wire_share of the wire's units): its
 * first element e0, its elements en and the bytes of its wire (the layout of en elements, whose
 * groups are the round's), at offset `at` of a buffer of every share in rank order. */
typedef struct {
  size_t e0, en, bytes, at;
} share_t;

static void round_shares(size_t cn, const gc_kwire_t *w, int n, share_t *sh) {
  const size_t units = gc__wire_units(cn, w), ue = gc__wire_unit_elements(w);
  size_t at = 0;
  for (int q = 0; q < n; q++) {
    size_t u0, un;
    gc_wire_share(units, n, q, &u0, &un);
    sh[q].e0 = u0 * ue < cn ? u0 * ue : cn;
    sh[q].en = un ? ((u0 + un) * ue < cn ? (u0 + un) * ue : cn) - sh[q].e0 : 0;
    sh[q].bytes = gc_wire_layout_bytes(sh[q].en, w->format, w->group);
    sh[q].at = at;
    at += sh[q].bytes;
  }
}

/* The buffers of the MPI wire all-reduce, for rounds of up to C elements; counts and offsets
 * for MPI. */
typedef struct {
  gc_comm_t comm;
  gc_kwire_t w;
  int n;
  share_t *sh;
  int *cnt, *dsp, *rcnt, *rdsp;
  unsigned char *out_shares, *in_shares, *sum, *gathered;
} wire_mpi_t;

static void wire_mpi_free(wire_mpi_t *X, int park) {
  void *bufs[] = {X->out_shares, X->in_shares, X->sum, X->gathered};
  for (int i = 0; i < 4; i++) {
    if (park) gc__park(bufs[i]); /* a timed-out request may still read or write them */
    else free(bufs[i]);
  }
  free(X->sh), free(X->cnt), free(X->dsp), free(X->rcnt), free(X->rdsp);
}

/* Every share of a round is at most one unit larger than the round over n. */
static gc_result_t wire_mpi_alloc(wire_mpi_t *X, size_t C) {
  const size_t n = (size_t)X->n, ue = gc__wire_unit_elements(&X->w);
  const size_t share_max = gc_wire_layout_bytes((C + n - 1) / n + ue, X->w.format, X->w.group);
  const size_t all = gc_wire_layout_bytes(C, X->w.format, X->w.group) + n * 16;
  X->sh = malloc(n * sizeof *X->sh);
  X->cnt = malloc(n * sizeof(int)), X->dsp = malloc(n * sizeof(int));
  X->rcnt = malloc(n * sizeof(int)), X->rdsp = malloc(n * sizeof(int));
  X->out_shares = malloc(all), X->gathered = malloc(all);
  X->in_shares = malloc(n * share_max), X->sum = malloc(share_max);
  if (!X->sh || !X->cnt || !X->dsp || !X->rcnt || !X->rdsp || !X->out_shares || !X->gathered || !X->in_shares || !X->sum) {
    wire_mpi_free(X, 0);
    return GC_FAIL(X->comm, GC_ERR_SYSTEM, "gc_allreduce_ex: out of host memory for the wire's buffers");
  }
  return GC_SUCCESS;
}

/* One round: every rank packs each owner's share of its elements and sends it there; the owner
 * sums the n shares it receives in rank order and encodes the sum once; every rank gathers the
 * owners' encoded sums and decodes them through the epilogue. */
static gc_result_t wire_mpi_round(wire_mpi_t *X, const char *send, char *recv, size_t cn, gc_dtype_t dtype,
                                  const gc_kepilogue_t *ep, int *stuck) {
  gc_comm_t comm = X->comm;
  const int n = X->n, me = comm->rank;
  const size_t es = gc_dtype_size(dtype), os = gc_dtype_size((gc_dtype_t)ep->out_dtype);
  round_shares(cn, &X->w, n, X->sh);
  const share_t mine = X->sh[me];
  for (int q = 0; q < n; q++) {
    gc__wire_pack_host(send + X->sh[q].e0 * es, X->sh[q].en, dtype, &X->w, X->out_shares + X->sh[q].at);
    X->cnt[q] = (int)X->sh[q].bytes, X->dsp[q] = (int)X->sh[q].at;
    X->rcnt[q] = (int)mine.bytes, X->rdsp[q] = q * (int)mine.bytes;
  }
  MPI_Request req;
  GC_MPI_CHECK(comm, MPI_Ialltoallv(X->out_shares, X->cnt, X->dsp, MPI_BYTE, X->in_shares, X->rcnt, X->rdsp, MPI_BYTE,
                                    comm->mpi, &req));
  gc_result_t r = gc__boot_wait(comm, &req, "gc_allreduce_ex: MPI_Ialltoallv (wire)");
  if (r != GC_SUCCESS) return *stuck = 1, r;
  const void *wires[GC_MAX_WIRE_RANKS];
  const void **from = n <= GC_MAX_WIRE_RANKS ? wires : malloc((size_t)n * sizeof *from);
  if (!from) return GC_FAIL(comm, GC_ERR_SYSTEM, "gc_allreduce_ex: out of host memory");
  for (int p = 0; p < n; p++) from[p] = X->in_shares + (size_t)p * mine.bytes;
  memset(X->sum, 0, mine.bytes); /* the padding after the scales goes out as zeros */
  gc__wire_sum_host(from, n, mine.en, &X->w, 0, gc__wire_units(mine.en, &X->w), X->sum);
  if (from != wires) free(from);
  GC_MPI_CHECK(comm, MPI_Iallgatherv(X->sum, (int)mine.bytes, MPI_BYTE, X->gathered, X->cnt, X->dsp, MPI_BYTE, comm->mpi,
                                     &req));
  r = gc__boot_wait(comm, &req, "gc_allreduce_ex: MPI_Iallgatherv (wire)");
  if (r != GC_SUCCESS) return *stuck = 1, r;
  for (int q = 0; q < n; q++) {
    gc_kepilogue_t e = *ep;
    if (e.add) e.add = (const char *)e.add + X->sh[q].e0 * es;
    gc__wire_unpack_host(X->gathered + X->sh[q].at, X->sh[q].en, dtype, &X->w, &e, recv + X->sh[q].e0 * os);
  }
  return GC_SUCCESS;
}

/* The MPI path's calls compare their signatures first (GC_CHECK_CALLS auto or 1), as mpi_path.c's do. */
static gc_result_t same_wire_call(gc_comm_t comm, size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *o) {
  if (comm->check_calls == GC_CHECK_NONE) return GC_SUCCESS;
  gc__call_sig_t sig = gc__call_sig(comm, GC_CALL_MPI_ALLREDUCE, count, dtype, op, 0, o);
  sig.v[GC_SIG_ALGO] = sig.v[GC_SIG_MAX_BLOCKS] = 0;
  return gc__same_call(comm, &sig);
}

gc_result_t gc__wire_allreduce_mpi(gc_comm_t comm, gc_kwire_t w, const void *send, void *recv, size_t count,
                                   gc_dtype_t dtype, gc_op_t op, const gc_options_t *o) {
  const void *ptrs[3] = {send, recv, o->add};
  static const char *const names[3] = {"sendbuf", "recvbuf", "options.add"};
  for (int i = 0; i < 3; i++)
    if (ptrs[i] && gc__ptr_kind(comm, ptrs[i]) != GC_PTR_HOST)
      return GC_FAIL(comm, GC_ERR_UNSUPPORTED,
                     "gc_allreduce_ex: the compressed wire on the MPI path takes host buffers; %s is device memory "
                     "(pass all buffers on the host, or all on peer-to-peer GPUs)", names[i]);
  GC_CHECK(same_wire_call(comm, count, dtype, op, o));
  wire_mpi_t X = {comm, w, comm->size, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  const size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype);
  /* Rounds of whole groups (128 elements: every group size divides it) near GC_MPI_CHUNK_BYTES of
   * input, small enough for MPI's int counts. The bits do not depend on the rounds. */
  size_t C = comm->mpi_chunk_bytes / es & ~(size_t)127;
  if (C < 128) C = 128;
  if (C > ((size_t)1 << 28)) C = (size_t)1 << 28;
  if (C > count) C = count;
  GC_CHECK(wire_mpi_alloc(&X, C));
  const double scale = op == GC_AVG ? o->scale / comm->size : o->scale;
  const gc_kepilogue_t ep = {scale != 1.0, scale, o->add, dtype, o->out_dtype};
  int stuck = 0;
  gc_result_t r = GC_SUCCESS;
  for (size_t c0 = 0; c0 < count && r == GC_SUCCESS; c0 += C) {
    gc_kepilogue_t e = ep;
    if (e.add) e.add = (const char *)e.add + c0 * es;
    r = wire_mpi_round(&X, (const char *)send + c0 * es, (char *)recv + c0 * os, count - c0 < C ? count - c0 : C, dtype,
                       &e, &stuck);
  }
  wire_mpi_free(&X, stuck);
  return r;
}
