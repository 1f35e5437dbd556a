// common.cuh — what every collective kernel shares: 16-byte packs, accumulation and reduction
// ops, the epilogue store, the bounded cross-GPU barrier, and the dtype list that drives
// instantiation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include <type_traits>

#include "kernels.h"

namespace gc {

// ---- instantiation lists -------------------------------------------------------------------
// XX(dtype code, storage type, accumulator type). fp8 is never reduced, only moved or produced.
#define GC_REDUCE_DTYPES(XX)             \
  XX(GC_FLOAT32, float, float)           \
  XX(GC_FLOAT16, __half, float)          \
  XX(GC_BFLOAT16, __nv_bfloat16, float)  \
  XX(GC_FLOAT64, double, double)         \
  XX(GC_INT32, int32_t, int64_t)         \
  XX(GC_INT64, int64_t, int64_t)         \
  XX(GC_UINT8, uint8_t, int64_t)

// Sum gets its own instantiation (the hot path); the other ops share one that switches on the op
// at run time, a uniform branch that costs nothing next to an NVLink load.
enum OpKind { OPK_SUM = 0, OPK_ANY = 1 };

// A reduction's compile-time types, handed to a launcher by with_reduce_types.
template <typename T_, typename A_, int OPK_>
struct ReduceTypes {
  using T = T_;
  using A = A_;
  static constexpr int OPK = OPK_;
};

// Calls launch(ReduceTypes<T, A, OPK>{}) for a run-time dtype and op: the one place where the
// reducible dtypes become template instantiations.
#define GC_REDUCE_TYPES_CASE(code, T, A) \
  case code: return op == GC_SUM ? launch(ReduceTypes<T, A, OPK_SUM>{}) : launch(ReduceTypes<T, A, OPK_ANY>{});
template <typename F>
cudaError_t with_reduce_types(int dtype, int op, F &&launch) {
  switch (dtype) { GC_REDUCE_DTYPES(GC_REDUCE_TYPES_CASE) }
  return cudaErrorInvalidValue;
}

#define GC_LAUNCH_BOUNDS __launch_bounds__(GC_KTHREADS)

__host__ __device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// ---- packs ---------------------------------------------------------------------------------
// 16 bytes to p in stores of g bytes (p is g-aligned; g uniform over the grid). The words are
// taken apart by shifts, never through v's address, which would put v in local memory (stack
// frames in every kernel that stores through here).
__device__ __forceinline__ void store_split(char *p, const uint4 &v, int g) {
  if (g == 16) {
    *(uint4 *)p = v;
  } else if (g == 8) {
    ((uint2 *)p)[0] = make_uint2(v.x, v.y);
    ((uint2 *)p)[1] = make_uint2(v.z, v.w);
  } else {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      char *q = p + 4 * i;
      if (g == 4) {
        *(uint32_t *)q = w[i];
      } else if (g == 2) {
        ((uint16_t *)q)[0] = (uint16_t)w[i];
        ((uint16_t *)q)[1] = (uint16_t)(w[i] >> 16);
      } else {
#pragma unroll
        for (int b = 0; b < 4; b++) q[b] = (char)(w[i] >> (8 * b));
      }
    }
  }
}

// The widest store (16, 8, 4, 2 or 1 bytes) that address p is aligned for.
__device__ __forceinline__ int store_granule(const void *p) {
  const uintptr_t a = (uintptr_t)p;
  return a % 16 == 0 ? 16 : a % 8 == 0 ? 8 : a % 4 == 0 ? 4 : a % 2 == 0 ? 2 : 1;
}

// E elements of T moved as one 16-byte access when VEC, one element otherwise.
template <typename T, bool VEC>
struct alignas(VEC ? 16 : alignof(T)) Pack {
  static constexpr int E = VEC ? 16 / sizeof(T) : 1;
  T v[E];
  __device__ __forceinline__ void load(const T *p) {
    if constexpr (VEC) *reinterpret_cast<uint4 *>(v) = *reinterpret_cast<const uint4 *>(p);
    else v[0] = *p;
  }
  // g: the widest store p allows (store_granule), 16 when aligned.
  __device__ __forceinline__ void store(T *p, int g = 16) const {
    if constexpr (VEC) store_split(reinterpret_cast<char *>(p), *reinterpret_cast<const uint4 *>(v), g);
    else *p = v[0];
  }
};

__host__ __device__ __forceinline__ size_t dtype_size(int dt) {
  switch (dt) {
    case GC_FLOAT64: case GC_INT64: return 8;
    case GC_FLOAT32: case GC_INT32: return 4;
    case GC_FLOAT16: case GC_BFLOAT16: return 2;
    default: return 1;
  }
}

// ---- conversions ---------------------------------------------------------------------------
template <typename A, typename T> __device__ __forceinline__ A to_acc(T x) { return (A)x; }
template <> __device__ __forceinline__ float to_acc<float, __half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T, typename A> __device__ __forceinline__ T from_acc(A x) { return (T)x; }
template <> __device__ __forceinline__ __half from_acc<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float x) { return __float2bfloat16_rn(x); }

// Element i of a buffer of run-time dtype `dt`, as float / double / integer accumulators.
__device__ __forceinline__ double load_as_double(const void *p, size_t i, int dt) {
  switch (dt) {
    case GC_FLOAT32: return ((const float *)p)[i];
    case GC_FLOAT16: return __half2float(((const __half *)p)[i]);
    case GC_BFLOAT16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case GC_FLOAT64: return ((const double *)p)[i];
    case GC_INT32: return ((const int32_t *)p)[i];
    case GC_INT64: return (double)((const int64_t *)p)[i];
    case GC_UINT8: return ((const uint8_t *)p)[i];
    case GC_FP8_E4M3: return (float)((const __nv_fp8_e4m3 *)p)[i];
    case GC_FP8_E5M2: return (float)((const __nv_fp8_e5m2 *)p)[i];
  }
  return 0;
}

// Stores a float accumulator as `dt`, rounding to nearest even (fp8: saturating to finite).
__device__ __forceinline__ void store_float(void *p, size_t i, int dt, float x) {
  switch (dt) {
    case GC_FLOAT32: ((float *)p)[i] = x; break;
    case GC_FLOAT16: ((__half *)p)[i] = __float2half_rn(x); break;
    case GC_BFLOAT16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(x); break;
    case GC_FLOAT64: ((double *)p)[i] = x; break;
    case GC_FP8_E4M3: ((__nv_fp8_storage_t *)p)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); break;
    case GC_FP8_E5M2: ((__nv_fp8_storage_t *)p)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); break;
  }
}

__device__ __forceinline__ void store_double(void *p, size_t i, int dt, double x) {
  switch (dt) {
    case GC_FLOAT32: ((float *)p)[i] = (float)x; break;
    case GC_FLOAT16: ((__half *)p)[i] = __double2half(x); break;
    case GC_BFLOAT16: ((__nv_bfloat16 *)p)[i] = __double2bfloat16(x); break;
    case GC_FLOAT64: ((double *)p)[i] = x; break;
    case GC_FP8_E4M3: ((__nv_fp8_storage_t *)p)[i] = __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3); break;
    case GC_FP8_E5M2: ((__nv_fp8_storage_t *)p)[i] = __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2); break;
  }
}

// ---- reduction -----------------------------------------------------------------------------
// Integers accumulate in 64 bits with two's-complement wrap (unsigned arithmetic, no UB).
template <typename A> __device__ __forceinline__ A op_sum(A a, A b) { return a + b; }
template <> __device__ __forceinline__ int64_t op_sum(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
template <> __device__ __forceinline__ float op_sum(float a, float b) { return __fadd_rn(a, b); }
template <> __device__ __forceinline__ double op_sum(double a, double b) { return __dadd_rn(a, b); }
template <typename A> __device__ __forceinline__ A op_prod(A a, A b) { return a * b; }
template <> __device__ __forceinline__ int64_t op_prod(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
template <> __device__ __forceinline__ float op_prod(float a, float b) { return __fmul_rn(a, b); }
template <> __device__ __forceinline__ double op_prod(double a, double b) { return __dmul_rn(a, b); }

template <typename A, int OPK>
__device__ __forceinline__ A combine(A acc, A x, int op) {
  if constexpr (OPK == OPK_SUM) {
    return op_sum(acc, x);
  } else {
    switch (op) {
      case GC_PROD: return op_prod(acc, x);
      case GC_MIN: return x < acc ? x : acc;
      case GC_MAX: return x > acc ? x : acc;
      default: return op_sum(acc, x); // GC_SUM, GC_AVG
    }
  }
}

// The epilogue on one accumulated value of element i, stored into out[i] in ep.out_dtype.
// Separate multiply and add (no FMA contraction) so the host's MPI path rounds identically.
// finish_at reads the add vector at element i and stores at out[o] (they differ when the result
// goes to a staging slot rather than to the output itself).
template <typename T, typename A>
__device__ __forceinline__ void finish_at(A acc, size_t i, const gc_kepilogue_t &ep, int op, int nranks, void *out,
                                          size_t o) {
  if constexpr (sizeof(A) == 8 && !std::is_floating_point<A>::value) {
    if (op == GC_AVG) acc = acc / nranks;
    if (ep.add) acc = op_sum(acc, (A)((const T *)ep.add)[i]);
    ((T *)out)[o] = (T)acc;
  } else if constexpr (std::is_same<A, double>::value) {
    if (ep.apply_scale) acc = __dmul_rn(acc, ep.scale);
    if (ep.add) acc = __dadd_rn(acc, ((const double *)ep.add)[i]);
    store_double(out, o, ep.out_dtype, acc);
  } else {
    if (ep.apply_scale) acc = __fmul_rn(acc, (float)ep.scale);
    if (ep.add) acc = __fadd_rn(acc, to_acc<float>(((const T *)ep.add)[i]));
    store_float(out, o, ep.out_dtype, acc);
  }
}

template <typename T, typename A>
__device__ __forceinline__ void finish(A acc, size_t i, const gc_kepilogue_t &ep, int op, int nranks, void *out) {
  finish_at<T, A>(acc, i, ep, op, nranks, out, i);
}

// Reduces the pack at element `el` over every rank's input, in rank order 0..n-1, so every rank
// computes the same bits. All loads are issued before the first use.
template <typename T, typename A, int OPK, bool VEC>
__device__ __forceinline__ void reduce_at(const gc_kargs_t &a, size_t el, A (&acc)[Pack<T, VEC>::E]) {
  constexpr int E = Pack<T, VEC>::E;
  Pack<T, VEC> v[GC_MAX_LOCAL_RANKS];
#pragma unroll
  for (int p = 0; p < GC_MAX_LOCAL_RANKS; p++)
    if (p < a.peers.nranks) v[p].load((const T *)a.in[p] + el);
#pragma unroll
  for (int e = 0; e < E; e++) acc[e] = to_acc<A>(v[0].v[e]);
#pragma unroll
  for (int p = 1; p < GC_MAX_LOCAL_RANKS; p++)
    if (p < a.peers.nranks)
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] = combine<A, OPK>(acc[e], to_acc<A>(v[p].v[e]), a.op);
}

// The same for n packs held in registers (v[p]: rank p's pack), in rank order.
template <typename T, typename A, int OPK>
__device__ __forceinline__ void reduce_packs(const uint4 (&v)[GC_MAX_LOCAL_RANKS], int n, int op,
                                             A (&acc)[16 / sizeof(T)]) {
  constexpr int E = 16 / sizeof(T);
  const T *x0 = reinterpret_cast<const T *>(&v[0]);
#pragma unroll
  for (int e = 0; e < E; e++) acc[e] = to_acc<A>(x0[e]);
#pragma unroll
  for (int p = 1; p < GC_MAX_LOCAL_RANKS; p++)
    if (p < n) {
      const T *xp = reinterpret_cast<const T *>(&v[p]);
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] = combine<A, OPK>(acc[e], to_acc<A>(xp[e]), op);
    }
}

// ... and for n packs gathered in local memory at base, base + stride, ...: the push kernels'
// inboxes.
template <typename T, typename A, int OPK>
__device__ __forceinline__ void reduce_local(const unsigned char *base, size_t stride, int n, int op,
                                             A (&acc)[16 / sizeof(T)]) {
  uint4 v[GC_MAX_LOCAL_RANKS];
#pragma unroll
  for (int p = 0; p < GC_MAX_LOCAL_RANKS; p++)
    if (p < n) v[p] = *(const uint4 *)(base + p * stride);
  reduce_packs<T, A, OPK>(v, n, op, acc);
}

// True when results go out as they are: no epilogue, no cast, no integer average ...
template <typename T, typename A>
__device__ __forceinline__ bool no_epilogue(const gc_kargs_t &a) {
  bool integer_avg = !std::is_floating_point<A>::value && a.op == GC_AVG;
  return !a.ep.apply_scale && !a.ep.add && a.ep.out_dtype == a.dtype && !integer_avg;
}
// ... and how packs go to out: 0 through the epilogue element by element, else in stores of
// store_granule(out) bytes (packs at out + 16 k share out's alignment) ...
template <typename T, typename A>
__device__ __forceinline__ int plain_granule(const gc_kargs_t &a, const void *out) {
  return no_epilogue<T, A>(a) ? store_granule(out) : 0;
}
// ... and whether a pack goes to out in one access.
template <typename T, typename A>
__device__ __forceinline__ bool is_plain(const gc_kargs_t &a, const void *out) {
  return plain_granule<T, A>(a, out) == 16;
}

// Writes a reduced pack to out at element `el`: in stores of `granule` bytes (plain_granule),
// or, with granule 0, element by element through the epilogue (which indexes the add vector
// with the same element number). An output that is no multiple of 16 bytes off alignment (a
// reduce-scatter part on 3 GPUs, say) goes in store_granule's narrower stores, not the epilogue's
// element stores.
template <typename T, typename A, bool VEC>
__device__ __forceinline__ void store_at(const gc_kargs_t &a, size_t el, const A (&acc)[Pack<T, VEC>::E], void *out,
                                         int granule) {
  constexpr int E = Pack<T, VEC>::E;
  if (granule) {
    Pack<T, VEC> r;
#pragma unroll
    for (int e = 0; e < E; e++) r.v[e] = from_acc<T>(acc[e]);
    r.store((T *)out + el, granule);
  } else {
#pragma unroll
    for (int e = 0; e < E; e++) finish<T, A>(acc[e], el + e, a.ep, a.op, a.peers.nranks, out);
  }
}

// The results of one pack (elements i .. i + valid - 1) in the output dtype, through the
// epilogue unless plain, packed into out (E results of at most 8 bytes each); returns their bytes.
// For kernels that store one pack to several places (put_bytes).
template <typename T, typename A>
__device__ __forceinline__ size_t pack_results(const gc_kargs_t &a, const A (&acc)[16 / sizeof(T)], size_t i,
                                               int valid, bool plain, unsigned char (&out)[64]) {
  constexpr int E = 16 / sizeof(T);
  if (plain) {
#pragma unroll
    for (int e = 0; e < E; e++) ((T *)out)[e] = from_acc<T>(acc[e]);
    return valid * sizeof(T);
  }
  for (int e = 0; e < valid; e++) finish_at<T, A>(acc[e], i + e, a.ep, a.op, a.peers.nranks, out, e);
  return valid * dtype_size(a.ep.out_dtype);
}

// ---- barrier -------------------------------------------------------------------------------
// Loads with acquire and stores with release at one scope: ld_acquire_sys / st_release_sys on
// global words other GPUs write or read, ld_acquire_cta / st_release_cta within the block.
#define GC_ACQUIRE_RELEASE(scope, qualifiers)                                               \
  __device__ __forceinline__ uint32_t ld_acquire_##scope(const uint32_t *p) {               \
    uint32_t v;                                                                            \
    asm volatile("ld.acquire." qualifiers ".u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); \
    return v;                                                                              \
  }                                                                                        \
  __device__ __forceinline__ void st_release_##scope(uint32_t *p, uint32_t v) {             \
    asm volatile("st.release." qualifiers ".u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");   \
  }
GC_ACQUIRE_RELEASE(sys, "sys.global")
GC_ACQUIRE_RELEASE(cta, "cta")
#undef GC_ACQUIRE_RELEASE
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A bounded wait's clock: expired() is true once timeout_ns have passed since its first look at
// the clock, or once the communicator's error flag is set (it then sets the flag, so every other
// waiter stops too). The clock is read only every 1024th call.
struct Deadline {
  unsigned long long start = 0;
  uint32_t spins = 0;
  __device__ bool expired(const gc_kpeers_t &P) {
    if (++spins % 1024) return false;
    unsigned long long now = globaltimer();
    if (start == 0) start = now;
    if (now - start <= P.timeout_ns && !*(volatile uint32_t *)P.error) return false;
    *(volatile uint32_t *)P.error = 1;
    __threadfence_system();
    return true;
  }
};

// Whether a barrier of the block ran out: cleared when the kernel makes its Sync, set by a
// waiting thread, read by every thread after the block's __syncthreads. barrier() never clears
// it: its thread 0 would then write while a slower thread may still read the last outcome
// (a race racecheck reports). Every caller leaves on a failed barrier.
__shared__ int barrier_failed;

// Per-block state of one kernel: the block's epoch, read at entry and written back at exit.
struct Sync {
  const gc_kpeers_t &P;
  uint32_t epoch;
  __device__ explicit Sync(const gc_kpeers_t &peers) : P(peers) {
    epoch = P.sig[P.rank]->epoch[blockIdx.x];
    if (threadIdx.x == 0) barrier_failed = 0;  // ordered before any use by barrier()'s __syncthreads
  }
  // Our word in rank r's signals of this block, and rank r's word in ours of block `row`
  // (default: this block).
  __device__ uint32_t *to_rank(int r) const { return &P.sig[r]->flag[blockIdx.x][P.rank]; }
  __device__ const uint32_t *from_rank(int r, int row = -1) const {
    return &P.sig[P.rank]->flag[row < 0 ? blockIdx.x : (unsigned)row][r];
  }
  // Thread (or lane) r tells rank r `value` when r is in the bit mask `to` (release).
  __device__ void post(int r, unsigned to, uint32_t value) const {
    if (r < P.nranks && (to >> r & 1u)) st_release_sys(to_rank(r), value);
  }
  // One thread waits until `word` reaches `value` (acquire: what its writer did before is
  // visible after), bounded by the Deadline.
  __device__ bool wait_word(const uint32_t *word, uint32_t value) const {
    Deadline d;
    while ((int32_t)(ld_acquire_sys(word) - value) < 0)
      if (d.expired(P)) return false;
    return true;
  }
  // Every block of every rank meets here: thread p tells peer p "block b reached epoch e"
  // (release: this block's earlier writes are visible first) and waits for peer p's word.
  __device__ bool barrier() {
    __syncthreads();  // the block's earlier writes come before the release below
    ++epoch;
    if (threadIdx.x < P.nranks) {
      int p = threadIdx.x;
      st_release_sys(to_rank(p), epoch);
      if (!wait_word(from_rank(p), epoch)) barrier_failed = 1;
    }
    __syncthreads();
    return !barrier_failed;
  }
  // Point to point, for kernels that pipeline between barriers: tell every rank in the bit mask
  // `to` that this block's writes so far are done (its slot of this block and this rank gets
  // `value`; thread r writes to rank r, as in barrier) ...
  __device__ void signal_each(unsigned to, uint32_t value) {
    __syncthreads();
    post((int)threadIdx.x, to, value);
  }
  __device__ void signal(int to, uint32_t value) { signal_each(1u << to, value); }
  // ... and wait, the whole block, until every rank in the bit mask `from` has signalled `value`
  // (or more) here; thread r waits for rank r, with its own `from` and `value` (they may differ
  // per thread). Signals of block `row` (default: this block's counterparts).
  __device__ bool wait_each(unsigned from, uint32_t value, int row = -1) {
    const bool failed = threadIdx.x < (unsigned)P.nranks && (from >> threadIdx.x & 1u) &&
                        !wait_word(from_rank((int)threadIdx.x, row), value);
    return !__syncthreads_or(failed);
  }
  __device__ bool wait(int from, uint32_t value) { return wait_each(1u << from, value); }
  // For the control warp of control_pipeline: how far rank `from`'s signal in row `row` (default:
  // this block's) has gone past `base`, 0 if not yet (acquire, no wait) ...
  __device__ uint32_t past(int from, uint32_t base, int row = -1) const {
    const int32_t d = (int32_t)(ld_acquire_sys(from_rank(from, row)) - base);
    return d > 0 ? (uint32_t)d : 0;
  }
  // ... and lane r signals rank r, for the ranks in the bit mask `to`, each lane its own value.
  __device__ void warp_signal_each(unsigned to, uint32_t value) const { post((int)(threadIdx.x & 31), to, value); }
  // Written back only by a block that finished: a failed communicator is never reused.
  __device__ void done() {
    if (threadIdx.x == 0) P.sig[P.rank]->epoch[blockIdx.x] = epoch;
  }
};

// ---- a block's pipeline with a control warp ----------------------------------------------------

// Steps 0 .. T - 1 of one block, each: its inputs must be ready, the working warps (all but the
// block's last) do it, and then it is signalled. The last warp, the control warp, polls and
// signals; the working warps never wait for a signal's release (which waits until the step's
// stores have landed), only for inputs. In the control warp's loop:
//   avail()        per lane, how many steps have their inputs ready now (a bound that only grows;
//                  ~0u in lanes that check nothing): the least over the warp is published;
//   signal(lo, hi) steps lo .. hi - 1, which every working warp has issued, are signalled.
// A working warp takes published steps in order: work(t, thread, threads), then publishes that it
// has issued step t. The shared counters go with release and acquire at block scope, so a
// working warp's reads of a step's inputs come after the control warp's acquire of them, and a
// signal's release covers the stores of the steps it signals. False once the control warp's wait
// ran out (timeout or error flag): the working warps stop before the next step. blockDim.x >= 64.
template <typename Avail, typename Work, typename Signal>
__device__ bool control_pipeline(const gc_kpeers_t &P, uint32_t T, Avail avail, Work work, Signal signal) {
  __shared__ uint32_t ready_steps, failed, issued[GC_KTHREADS / 32];
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x & 31, workers = (int)blockDim.x / 32 - 1;
  if (threadIdx.x == 0) ready_steps = failed = 0;
  if (lane == 0) issued[warp] = 0;
  __syncthreads();
  if (warp == workers) {
    uint32_t ready = 0, signalled = 0;
    Deadline d;
    while (signalled < T) {
      const uint32_t now = min(__reduce_min_sync(~0u, (uint32_t)avail()), T);
      const uint32_t done = __reduce_min_sync(~0u, lane < workers ? ld_acquire_cta(&issued[lane]) : ~0u);
      if (now > ready || done > signalled) d = Deadline();  // the wait is bounded from the last progress
      if (now > ready) {
        ready = now;
        if (lane == 0) st_release_cta(&ready_steps, ready);
      }
      if (done > signalled) {
        signal(signalled, done);
        signalled = done;
      } else if (__any_sync(~0u, d.expired(P))) {
        if (lane == 0) st_release_cta(&failed, 1);
        break;
      }
    }
  } else {
    for (uint32_t t = 0; t < T; t++) {
      uint32_t go = 1;
      if (lane == 0)
        while (ld_acquire_cta(&ready_steps) <= t)
          if (ld_acquire_cta(&failed)) {
            go = 0;
            break;
          }
      __syncwarp();
      if (!__shfl_sync(~0u, go, 0)) break;
      work(t, (int)threadIdx.x, workers * 32);
      __syncwarp();
      if (lane == 0) st_release_cta(&issued[warp], t + 1);
    }
  }
  __syncthreads();
  return !failed;
}

// Programmatic dependent launch: let the next kernel start its prologue now, and wait for the
// previous one's memory before touching anything (the epoch included).
__device__ __forceinline__ void pdl_begin(int pdl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (pdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
  }
#endif
}

// Rank r's share of `units` split over n ranks, gc_partition's rule: the first units % n ranks
// take one more.
__device__ __forceinline__ void slice_of(size_t units, int n, int r, size_t *s0, size_t *sn) {
  size_t base = units / n, extra = units % n;
  *s0 = r * base + (r < (int)extra ? r : extra);
  *sn = base + (r < (int)extra ? 1 : 0);
}
// The same split of `packs` in whole 128-byte lines of GC_LINE_PACKS packs (the last one may be
// partial), for slices that peers read or write: a warp's 512 bytes then cover four whole lines,
// not parts of five (3-GPU slices of a power-of-two count sat 16-112 bytes off a line). 3 x H200,
// two-shot all-reduce by writes, bf16: 4 / 16 / 64 MB 22.99 / 70.54 / 276.1 us with
// whole lines against 24.04 / 75.27 / 283.5 without.
__device__ __forceinline__ void slice_lines(size_t packs, int n, int r, size_t *p0, size_t *pn) {
  size_t l0, ln;
  slice_of((packs + GC_LINE_PACKS - 1) / GC_LINE_PACKS, n, r, &l0, &ln);
  *p0 = min(l0 * GC_LINE_PACKS, packs);
  *pn = min((l0 + ln) * GC_LINE_PACKS, packs) - *p0;
}

__device__ __forceinline__ size_t global_thread() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t grid_threads() { return (size_t)gridDim.x * blockDim.x; }


// Bytes [u*16, u*16 + 16) of a part of `len` bytes as one 16-byte word (zero past the end).
__device__ __forceinline__ uint4 load_unit(const char *part, size_t len, size_t u) {
  const size_t at = u * 16;
  if (at + 16 <= len && aligned16(part)) return *(const uint4 *)(part + at);
  uint4 w = make_uint4(0, 0, 0, 0);
  for (size_t b = 0; b < 16 && at + b < len; b++) ((char *)&w)[b] = part[at + b];
  return w;
}

// The other way: w into bytes [u*16, u*16 + 16) of a part of `len` bytes (cut at the end).
__device__ __forceinline__ void store_unit(char *part, size_t len, size_t u, uint4 w) {
  const size_t at = u * 16;
  if (at + 16 <= len && aligned16(part)) {
    *(uint4 *)(part + at) = w;
    return;
  }
  for (size_t b = 0; b < 16 && at + b < len; b++) part[at + b] = ((const char *)&w)[b];
}

// Stores len bytes at dst, which may sit at any offset (a symmetric output at an unaligned
// offset): a wide store only where dst is aligned for it.
__device__ __forceinline__ void put_bytes(unsigned char *dst, const unsigned char *src, size_t len) {
  const uintptr_t at = (uintptr_t)dst;
  if (len == 16 && (at & 15) == 0) *(uint4 *)dst = *(const uint4 *)src;
  else if (len == 8 && (at & 7) == 0) *(uint2 *)dst = *(const uint2 *)src;
  else if (len == 4 && (at & 3) == 0) *(uint32_t *)dst = *(const uint32_t *)src;
  else
    for (size_t b = 0; b < len; b++) dst[b] = src[b];
}

// Copies nbytes: 16-byte loads once the source is aligned (its first bytes one by one), each
// stored whole where the destination is aligned too, else in the widest stores its alignment
// allows. The source is the side that may be a peer's, where wide accesses matter; the stores
// are local. (Parts of a count that is no multiple of 16 bytes, e.g. on 3 GPUs, would be slow byte
// by byte: 3 GPUs, all-gather 1 MB 28.3 us against NCCL's 13.9.) Four loads are in flight
// per thread before their stores, to cover NVLink latency.
// By threads t of G: the whole grid by default, or one block (copy_bytes(d, s, n, threadIdx.x,
// blockDim.x)).
__device__ __forceinline__ void copy_bytes(void *dst, const void *src, size_t nbytes, size_t t, size_t G) {
  if (dst == src || nbytes == 0) return;
  const char *s = (const char *)src;
  char *d = (char *)dst;
  const size_t head = min((size_t)((16 - (uintptr_t)s % 16) % 16), nbytes);
  const size_t units = (nbytes - head) / 16, done = head + units * 16;
  for (size_t k = t; k < head; k += G) d[k] = s[k];
  const uint4 *su = (const uint4 *)(s + head);
  char *du = d + head;
  const int g = store_granule(du);
  size_t k = t;
  for (; k + 3 * G < units; k += 4 * G) {
    uint4 x0 = su[k], x1 = su[k + G], x2 = su[k + 2 * G], x3 = su[k + 3 * G];
    store_split(du + 16 * k, x0, g);
    store_split(du + 16 * (k + G), x1, g);
    store_split(du + 16 * (k + 2 * G), x2, g);
    store_split(du + 16 * (k + 3 * G), x3, g);
  }
  for (; k < units; k += G) store_split(du + 16 * k, su[k], g);
  for (size_t b = done + t; b < nbytes; b += G) d[b] = s[b];
}
__device__ __forceinline__ void copy_bytes(void *dst, const void *src, size_t nbytes) {
  copy_bytes(dst, src, nbytes, global_thread(), grid_threads());
}

// Launch configuration shared by the launchers.
inline cudaLaunchConfig_t launch_config(const gc_kargs_t *a, cudaStream_t s, cudaLaunchAttribute *attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(a->blocks);
  cfg.blockDim = dim3(a->threads);
  cfg.stream = s;
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = a->pdl ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

}  // namespace gc
