// wire.cu — all-reduce over a compressed wire (wire.h, wire.cuh). A chunk is one 16-byte unit of
// wire: 16 fp8 codes (a group is G / 16 chunks, on as many neighbouring lanes of one warp, which
// meet through shuffles for the group maximum) or 8 bf16 values. Each kernel reads like the
// algorithm: pack: encode chunks. One-shot: barrier, sum every rank's chunk in rank order, encode
// and decode the sum, store, barrier. Two-shot: barrier, the owner sums and encodes its share over
// its own wire buffer, barrier, everyone decodes every owner's share, barrier. Every kernel takes
// its chunks by gc_wire_walk (wire.cuh), which says why the two-shot's decoding block is the
// encoding block.
#include "common.cuh"
#include "wire.h"

namespace gc {
namespace {

// The lanes of one group (lanes = G / 16 of 2, 4 or 8, aligned in the warp) agree on the largest
// of their v.
__device__ __forceinline__ uint32_t group_max(uint32_t v, int lanes) {
  const unsigned base = (threadIdx.x & 31u) & ~(unsigned)(lanes - 1);
  const unsigned mask = ((1u << lanes) - 1) << base;
  for (int o = lanes / 2; o > 0; o /= 2) v = max(v, __shfl_xor_sync(mask, v, o));
  return v;
}

// fp8 e4m3 with a scale per group: chunk c is codes [16c, 16c + 16), group c / L.
struct Fp8Wire {
  static constexpr int N = 16, FORMAT = GC_WIRE_FMT_FP8;
  int L;        // chunks per group
  size_t sat;   // offset of the scale bytes
  __device__ Fp8Wire(size_t count, int G) : L(G / 16), sat(gc_wire_scales_at(count, G)) {}
  __device__ void decode(const void *buf, size_t c, float (&x)[N]) const {
    const uint4 v = ((const uint4 *)buf)[c];
    const uint8_t s = ((const uint8_t *)buf)[sat + c / L];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < N; e++) x[e] = gc_wire_fp8_decode((uint8_t)(w[e / 4] >> (8 * (e % 4))), s);
  }
  // The group's scale exponent: every lane of the group calls this together.
  __device__ int exponent(const float (&x)[N]) const {
    uint32_t most = 0;
#pragma unroll
    for (int e = 0; e < N; e++) most = max(most, gc_wire_finite_mag(x[e]));
    return gc_wire_fp8_exponent(group_max(most, L));
  }
  __device__ static uint4 codes(const float (&x)[N], int k) {
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < N; e++) w[e / 4] |= (uint32_t)gc_wire_fp8_encode(x[e], k) << (8 * (e % 4));
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
  __device__ void encode(void *buf, size_t c, const float (&x)[N]) const {
    const int k = exponent(x);
    ((uint4 *)buf)[c] = codes(x, k);
    if (c % L == 0) ((uint8_t *)buf)[sat + c / L] = (uint8_t)(k + 127);
  }
  // x = decode(encode(x)), in registers.
  __device__ void requantize(float (&x)[N]) const {
    const int k = exponent(x);
    const uint4 v = codes(x, k);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < N; e++) x[e] = gc_wire_fp8_decode((uint8_t)(w[e / 4] >> (8 * (e % 4))), (uint8_t)(k + 127));
  }
};

// bf16 (float32 data): chunk c is values [8c, 8c + 8).
struct Bf16Wire {
  static constexpr int N = 8, FORMAT = GC_WIRE_FMT_BF16;
  __device__ Bf16Wire(size_t, int) {}
  __device__ void decode(const void *buf, size_t c, float (&x)[N]) const {
    const uint4 v = ((const uint4 *)buf)[c];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < N; e++) x[e] = gc_wire_bf16_value((uint16_t)(w[e / 2] >> (16 * (e % 2))));
  }
  __device__ void encode(void *buf, size_t c, const float (&x)[N]) const {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) w[j] = gc_wire_bf16_rne(x[2 * j]) | (uint32_t)gc_wire_bf16_rne(x[2 * j + 1]) << 16;
    ((uint4 *)buf)[c] = make_uint4(w[0], w[1], w[2], w[3]);
  }
  __device__ void requantize(float (&x)[N]) const {
#pragma unroll
    for (int e = 0; e < N; e++) x[e] = gc_wire_bf16_value(gc_wire_bf16_rne(x[e]));
  }
};

// Elements [first, first + N) of in as floats (exact), 0 past count.
template <typename T, int N>
__device__ __forceinline__ void load_chunk(const T *in, size_t first, size_t count, float (&x)[N]) {
  constexpr int E = 16 / sizeof(T);
  const T *p = in + first;
  if (first + N <= count && aligned16(p)) {
#pragma unroll
    for (int j = 0; j < N / E; j++) {
      Pack<T, true> v;
      v.load(p + j * E);
#pragma unroll
      for (int e = 0; e < E; e++) x[j * E + e] = to_acc<float>(v.v[e]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < N; e++) {
      x[e] = 0.0f;
      if (first + e < count) x[e] = to_acc<float>(p[e]);
    }
  }
}

// Results [first, first + N) (cut at count) through the epilogue into out: whole packs where
// nothing but the cast applies and out allows, element by element otherwise.
template <typename T, int N>
__device__ __forceinline__ void store_chunk(const gc_kepilogue_t &ep, int dtype, size_t first, size_t count,
                                            const float (&x)[N], void *out) {
  constexpr int E = 16 / sizeof(T);
  T *p = (T *)out + first;
  if (first + N <= count && aligned16(p) && !ep.apply_scale && !ep.add && ep.out_dtype == dtype) {
#pragma unroll
    for (int j = 0; j < N / E; j++) {
      Pack<T, true> v;
#pragma unroll
      for (int e = 0; e < E; e++) v.v[e] = from_acc<T>(x[j * E + e]);
      v.store(p + j * E);
    }
    return;
  }
  for (int e = 0; e < N && first + e < count; e++) finish<T, float>(x[e], first + e, ep, GC_SUM, 1, out);
}

// This thread's walk over shares q0 .. q1 - 1 of the wire's units split over n (n = 1: every chunk).
template <typename W>
__device__ __forceinline__ gc_wire_walk_t walk(size_t count, int G, int n, int q0, int q1) {
  gc_wire_walk_t w;
  gc_wire_walk_begin(&w, gc_wire_units(count, W::FORMAT, G), gc_wire_chunks_per_unit(W::FORMAT, G), n, q0, q1,
                     global_thread(), grid_threads());
  return w;
}

// Sums chunk c of every rank's wire buffer, in rank order 0 .. n-1, starting from rank 0's value.
template <typename W>
__device__ __forceinline__ void sum_chunk(const W &w, const gc_kargs_t &a, size_t c, float (&s)[W::N]) {
  w.decode(a.pub[0], c, s);
#pragma unroll
  for (int p = 1; p < GC_MAX_LOCAL_RANKS; p++)
    if (p < a.peers.nranks) {
      float d[W::N];
      w.decode(a.pub[p], c, d);
#pragma unroll
      for (int e = 0; e < W::N; e++) s[e] = gc_wire_add(s[e], d[e]);
    }
}

template <typename T, typename W>
__global__ void __launch_bounds__(GC_WIRE_THREADS) pack_kernel(const T *in, size_t count, int G, void *wire) {
  const W w(count, G);
  gc_wire_walk_t all = walk<W>(count, G, 1, 0, 1);
  for (size_t c; gc_wire_walk_next(&all, &c);) {
    float x[W::N];
    load_chunk<T, W::N>(in, c * W::N, count, x);
    w.encode(wire, c, x);
  }
}

template <typename T, typename W>
__global__ void __launch_bounds__(GC_WIRE_THREADS)
    unpack_kernel(const void *wire, size_t count, int G, const gc_kepilogue_t ep, int dtype, void *out) {
  const W w(count, G);
  gc_wire_walk_t all = walk<W>(count, G, 1, 0, 1);
  for (size_t c; gc_wire_walk_next(&all, &c);) {
    float x[W::N];
    w.decode(wire, c, x);
    store_chunk<T, W::N>(ep, dtype, c * W::N, count, x, out);
  }
}

template <typename T, typename W>
__global__ void __launch_bounds__(GC_WIRE_THREADS) oneshot_kernel(const gc_kargs_t a, int G) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  if (!sync.barrier()) return;  // every rank's wire buffer is packed
  const W w(a.count, G);
  gc_wire_walk_t all = walk<W>(a.count, G, 1, 0, 1);
  for (size_t c; gc_wire_walk_next(&all, &c);) {
    float s[W::N];
    sum_chunk(w, a, c, s);
    w.requantize(s);
    store_chunk<T, W::N>(a.ep, a.dtype, c * W::N, a.count, s, a.recv);
  }
  if (!sync.barrier()) return;  // no rank packs again while a peer may still read its buffer
  sync.done();
}

// Shares are whole groups (fp8) or chunks (bf16), so an owner's encoding covers whole groups.
// The barriers are per block: a chunk is decoded, on every rank, by the block that encoded it on
// its owner, because both phases walk each share alike (gc_wire_walk; the grid is the same on
// every rank).
template <typename T, typename W>
__global__ void __launch_bounds__(GC_WIRE_THREADS) twoshot_kernel(const gc_kargs_t a, int G) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank;
  if (!sync.barrier()) return;  // every rank's wire buffer is packed
  const W w(a.count, G);
  // Our share of every buffer is read by us alone: its sum goes over our own copy. A chunk is
  // read and written by one thread, and a group's scale byte is written only after the group's
  // lanes have used it (their maximum depends on it).
  gc_wire_walk_t mine = walk<W>(a.count, G, n, me, me + 1);
  for (size_t c; gc_wire_walk_next(&mine, &c);) {
    float s[W::N];
    sum_chunk(w, a, c, s);
    w.encode(a.pub[me], c, s);
  }
  if (!sync.barrier()) return;  // this block's chunks of every share are encoded
  gc_wire_walk_t every = walk<W>(a.count, G, n, 0, n);
  for (size_t c; gc_wire_walk_next(&every, &c);) {
    float x[W::N];
    w.decode(a.pub[every.q], c, x);
    store_chunk<T, W::N>(a.ep, a.dtype, c * W::N, a.count, x, a.recv);
  }
  if (!sync.barrier()) return;  // peers are done with our buffer
  sync.done();
}

// Calls f(T{}, (W *)nullptr) for a run-time dtype and wire format; cudaErrorInvalidValue for the pairs
// the wire does not take (bf16 wire: float32 data only).
template <typename F>
cudaError_t with_wire_types(int dtype, const gc_kwire_t *w, F &&f) {
  if (!w) return cudaErrorInvalidValue;
  if (w->format == GC_WIRE_FMT_BF16) return dtype == GC_FLOAT32 ? f(float(), (Bf16Wire *)nullptr) : cudaErrorInvalidValue;
  if (w->format != GC_WIRE_FMT_FP8 || (w->group != 32 && w->group != 64 && w->group != 128))
    return cudaErrorInvalidValue;
  switch (dtype) {
    case GC_FLOAT32: return f(float(), (Fp8Wire *)nullptr);
    case GC_FLOAT16: return f(__half(), (Fp8Wire *)nullptr);
    case GC_BFLOAT16: return f(__nv_bfloat16(), (Fp8Wire *)nullptr);
  }
  return cudaErrorInvalidValue;
}

unsigned wire_grid(size_t count, const gc_kwire_t *w, int blocks) {
  const size_t chunks = w->format == GC_WIRE_FMT_FP8 ? gc_wire_groups(count, w->group) * (size_t)(w->group / 16)
                                                      : (count + 7) / 8;
  const size_t need = (chunks + GC_WIRE_THREADS - 1) / GC_WIRE_THREADS;
  return (unsigned)(need < (size_t)blocks ? (need ? need : 1) : (size_t)blocks);
}

}  // namespace
}  // namespace gc

using namespace gc;

extern "C" int gc_kernel_wire_pack(const void *in, size_t count, int dtype, const gc_kwire_t *w, void *wire,
                                   int blocks, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  if (blocks < 1 || !aligned16(wire)) return cudaErrorInvalidValue;
  return with_wire_types(dtype, w, [&](auto t, auto wt) {
    using T = decltype(t);
    using W = std::remove_pointer_t<decltype(wt)>;
    pack_kernel<T, W><<<wire_grid(count, w, blocks), GC_WIRE_THREADS, 0, s>>>((const T *)in, count, w->group, wire);
    return cudaGetLastError();
  });
}

extern "C" int gc_kernel_wire_unpack(const void *wire, size_t count, int dtype, const gc_kwire_t *w,
                                     const gc_kepilogue_t *ep, void *out, int blocks, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  if (blocks < 1 || !aligned16(wire)) return cudaErrorInvalidValue;
  gc_kepilogue_t plain = {0, 1.0, NULL, dtype, dtype};
  const gc_kepilogue_t e = ep ? *ep : plain;
  return with_wire_types(dtype, w, [&](auto t, auto wt) {
    using T = decltype(t);
    using W = std::remove_pointer_t<decltype(wt)>;
    unpack_kernel<T, W><<<wire_grid(count, w, blocks), GC_WIRE_THREADS, 0, s>>>(wire, count, w->group, e, dtype, out);
    return cudaGetLastError();
  });
}

// The grid is a->blocks whatever the size (the barriers need every block of every rank), with
// GC_WIRE_THREADS threads.
extern "C" int gc_kernel_wire_allreduce(const gc_kargs_t *a, const gc_kwire_t *w, int two_shot, cudaStream_t s) {
  if (a->blocks < 1 || a->blocks > GC_KMAX_BLOCKS || a->peers.nranks < 1 || a->peers.nranks > GC_MAX_LOCAL_RANKS)
    return cudaErrorInvalidValue;
  if (a->op != GC_SUM && a->op != GC_AVG) return cudaErrorInvalidValue;
  for (int p = 0; p < a->peers.nranks; p++)
    if (!aligned16(a->pub[p])) return cudaErrorInvalidValue;
  return with_wire_types(a->dtype, w, [&](auto t, auto wt) {
    using T = decltype(t);
    using W = std::remove_pointer_t<decltype(wt)>;
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = launch_config(a, s, attr);
    cfg.blockDim = dim3(GC_WIRE_THREADS);
    const int G = w->group;
    if (two_shot) return cudaLaunchKernelEx(&cfg, twoshot_kernel<T, W>, *a, G);
    return cudaLaunchKernelEx(&cfg, oneshot_kernel<T, W>, *a, G);
  });
}
