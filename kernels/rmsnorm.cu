// rmsnorm.cu — all-reduce + RMSNorm + FP8 quantization, a row per block (or per cluster of
// blocks) at a time, in the two numerics of gpucoll.h (lib/rmsnorm.c's host loop states the same
// formulas). Pass 1 reduces the row over every rank's input in rank order (read from peers after
// a barrier, as the one-shot all-reduce does, or taken from the LL area as the LL all-reduce
// does), plus the residual, in float: f.
//   MAX (norm_rows_max): r = 1 / sqrt(sum f^2 / cols + epsilon) from pass 1; pass 2 finds
//   m = max |(f * r) * w| (w = gamma + weight_offset), at most scale_ub, and scale = m / FP8_MAX;
//   pass 3 writes fp8(((f * r) * w) * (1 / scale)) (0 where the scale is 0) and x = dtype(f).
//   A thread's first pack of f stays in registers; its further packs are summed again.
//   ROUNDED (norm_rows): x = dtype(f), kept where it is read back; pass 1 sums x^2 and finds
//   the largest |x * w| in one go, combined at once, which gives r and the scale (r * that
//   maximum / FP8_MAX, at least 1 / (FP8_MAX * 512), at most scale_ub); pass 2 writes the row.
// Every float step is rounded on its own (no FMA contraction) and sums and maxima go in a fixed
// order, so every rank computes the same bits.
#include <cooperative_groups.h>

#include <type_traits>

#include "ll.cuh"

namespace gc {

// A row's sum of squares and largest |x * (gamma + weight_offset)|, combined in a fixed order.
struct SumMax {
  float sum, most;
};
__device__ __forceinline__ SumMax combine(SumMax p, SumMax q) { return {__fadd_rn(p.sum, q.sum), fmaxf(p.most, q.most)}; }

// The whole block's combination of v, in the same order on every rank (lanes by butterfly,
// then the warps' results in warp order); every thread gets the result.
__device__ __forceinline__ SumMax block_reduce(SumMax v) {
  __shared__ SumMax part[GC_KTHREADS / 32];
  for (int o = 16; o > 0; o >>= 1)
    v = combine(v, {__shfl_xor_sync(0xffffffffu, v.sum, o), __shfl_xor_sync(0xffffffffu, v.most, o)});
  const int warps = (int)(blockDim.x + 31) / 32;
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  v = part[0];
  for (int w = 1; w < warps; w++) v = combine(v, part[w]);
  __syncthreads();  // part is free for the next row
  return v;
}

// A block may store into another's shared memory only once that block has started. Each block of
// a cluster arrives (relaxed) as norm_rows begins, and its first cluster_reduce waits for them all
// before storing (without, racecheck: "a block that might not have entered yet").
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}

// The same over the `parts` blocks of a row's cluster, in block order (each block's share of the
// row combined by block_reduce first), with whether any block failed. Each block stores its value
// into every block's shared memory, then one cluster barrier; every thread gets the result. The
// slots alternate between a block's rows (`round`): a block storing round k + 2 has passed round
// k + 1's barrier, which a block reaches only after reading round k. After the last barrier no
// block touches another's shared memory, so blocks may leave.
__device__ __forceinline__ SumMax cluster_reduce(SumMax v, int parts, int part, unsigned round, bool &failed) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (parts > 1) {
    if (round == 0) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // cluster_arrive's
    struct Part {
      SumMax v;
      int failed;
    };
    __shared__ Part slots[2][8];
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    Part *const slot = slots[round & 1];
    if ((int)threadIdx.x < parts) *cluster.map_shared_rank(&slot[part], threadIdx.x) = {v, failed};
    cluster.sync();
    v = slot[0].v;
    int any = slot[0].failed;
#pragma unroll
    for (int c = 1; c < 8; c++)
      if (c < parts) {
        v = combine(v, slot[c].v);
        any |= slot[c].failed;
      }
    failed = any;
  }
#endif
  return v;
}

// E values quantized to the fp8 format F (round to nearest even, saturating), two at a time.
template <__nv_fp8_interpretation_t F, int E>
__device__ __forceinline__ void to_fp8(const float (&y)[E], unsigned char (&q)[E]) {
#pragma unroll
  for (int e = 0; e + 1 < E; e += 2) {
    const __nv_fp8x2_storage_t two = __nv_cvt_float2_to_fp8x2(make_float2(y[e], y[e + 1]), __NV_SATFINITE, F);
    q[e] = (unsigned char)(two & 0xffu);
    q[e + 1] = (unsigned char)(two >> 8);
  }
  if constexpr (E % 2 == 1) q[E - 1] = __nv_cvt_float_to_fp8(y[E - 1], __NV_SATFINITE, F);
}

// How a row is cut into units, a thread's piece of work. PACKS: 16-byte packs, every array's rows
// on 16-byte boundaries. ELEMENTS: single elements (inputs off 16-byte boundaries). FLAT: the
// input's own 16-byte packs that touch the row, for rows of any width and gamma, residual and x
// at any offset: the first and last may hold elements of the rows beside it, which are left out,
// and the row's other arrays go element by element. The inputs (peers' memory) are read 16 bytes
// at a time there. 2 x H200, 8191 bf16 cols with residual, us, FLAT against ELEMENTS:
// 1 MB 18.23 / 21.88, 16 MB 79.32 / 121.5, 64 MB 269.5 / 457.7 (the unfused baseline: 470.5).
enum class Shape { PACKS, ELEMENTS, FLAT };

template <typename T, Shape S>
struct Units {
  static constexpr bool VEC = S != Shape::ELEMENTS;
  static constexpr int E = Pack<T, VEC>::E;
  using P = Pack<T, VEC>;
  size_t lead;  // FLAT: the elements of the row before in its first unit; else 0
  size_t cols;
  __device__ Units(size_t base, size_t row_cols) : lead(S == Shape::FLAT ? base % E : 0), cols(row_cols) {}
  __device__ size_t count() const { return (lead + cols + E - 1) / E; }
  // whether element e of unit k is one of the row's
  __device__ bool has(size_t k, int e) const {
    if constexpr (S != Shape::FLAT) return true;
    const size_t i = k * E + e;
    return i >= lead && i - lead < cols;
  }
  // unit k of a row array whose element 0 is at row (zeros for elements not the row's)
  __device__ void load(P &v, const T *row, size_t k) const {
    if constexpr (S != Shape::FLAT) v.load(row + k * E);
    else
#pragma unroll
      for (int e = 0; e < E; e++) v.v[e] = has(k, e) ? row[k * E + e - lead] : from_acc<T>(0.0f);
  }
  __device__ void store(T *row, size_t k, const P &v) const {
    if constexpr (S != Shape::FLAT) v.store(row + k * E);
    else
#pragma unroll
      for (int e = 0; e < E; e++)
        if (has(k, e)) row[k * E + e - lead] = v.v[e];
  }
  // the row's fp8 bytes of unit k
  __device__ void put(unsigned char *row, size_t k, const unsigned char (&q)[E]) const {
    if (S != Shape::FLAT || (has(k, 0) && has(k, E - 1))) put_bytes(row + k * E - lead, q, E);
    else
#pragma unroll
      for (int e = 0; e < E; e++)
        if (has(k, e)) row[k * E + e - lead] = q[e];
  }
};

// The block's rows. sum_at(el, acc) gives the unit at element `el` of the input (el .. el + E - 1)
// summed over the ranks in rank order, or false when a wait ran out (CAN_FAIL); then false is
// returned. x is kept at m.x, else in `row_x` (shared memory for the block's share of a row),
// else read from a.in[0] (LOCAL). A block that failed before (`entered` false: its barrier ran
// out) still meets its cluster once, so that none leaves while another may store into it.
template <typename T, Shape S, bool CAN_FAIL, typename SumAt>
__device__ bool norm_rows(const gc_kargs_t &a, const gc_knorm_t &m, SumAt sum_at, T *row_x = nullptr,
                          bool entered = true) {
  using U = Units<T, S>;
  using P = typename U::P;
  constexpr int E = U::E;
  const float fp8_max = m.out_dtype == GC_FP8_E4M3 ? 448.0f : 57344.0f;
  const int parts = m.parts, part = (int)blockIdx.x % parts;
  const T *gamma = (const T *)m.gamma;
  auto weight = [&](const P &g, int e) { return __fadd_rn(to_acc<float>(g.v[e]), m.weight_offset); };
  // This block's share of a row: units [k0, k1), one of m.parts blocks of a cluster (FLAT: per row).
  size_t k0, kn;
  slice_of(U(0, m.cols).count(), parts, part, &k0, &kn);
  unsigned round = 0;
  if (parts > 1 && blockIdx.x / parts < m.rows) cluster_arrive();  // the cluster has rows to reduce
  for (size_t row = blockIdx.x / parts; row < m.rows; row += gridDim.x / parts) {
    const size_t base = row * m.cols;
    const U u(base, m.cols);
    if constexpr (S == Shape::FLAT) slice_of(u.count(), parts, part, &k0, &kn);
    const size_t k1 = k0 + kn;
    // where x goes, when it is not in a.in[0]; row_x holds this block's share only, from unit k0
    T *const keep = m.x ? (T *)m.x + base : row_x;
    const size_t from = !m.x && row_x ? k0 : 0;
    const T *const xs = keep ? keep : (const T *)a.in[0] + base;
    // FLAT: x goes element by element at its place in the row (only the row's elements) where it
    // is kept from the row's start: at m.x, in a.in[0], or in row_x of a block whose share starts
    // the row; row_x of the other blocks takes whole units from unit k0.
    const bool by_row = S == Shape::FLAT && !from;
    const T *const res_row = m.residual ? (const T *)m.residual + base : nullptr;
    // This thread's first unit (often its only one) keeps gamma, residual and x in registers:
    // gamma and residual are loaded before pass 1 waits for the ranks, so their latency hides.
    const size_t kf = k0 + threadIdx.x;
    P g_first, res_first, x_first;
    if (kf < k1) {
      u.load(g_first, gamma, kf);
      if (res_row) u.load(res_first, res_row, kf);
    }
    // 1. x = the row summed over the ranks (+ residual), rounded to T; the row's sum of squares
    // and largest |x * w| (w = gamma + weight_offset), combined over the block and cluster at once
    SumMax acc_row = {0.0f, 0.0f};
    bool failed = !entered;
    for (size_t k = kf; !failed && k < k1; k += blockDim.x) {
      float acc[E];
      if (!sum_at(base - u.lead + k * E, acc) && CAN_FAIL) {
        failed = true;
        break;
      }
      P x, g = g_first;
      if (k != kf) u.load(g, gamma, k);
      if (res_row) {
        P res = res_first;
        if (k != kf) u.load(res, res_row, k);
#pragma unroll
        for (int e = 0; e < E; e++) acc[e] = __fadd_rn(acc[e], to_acc<float>(res.v[e]));
      }
#pragma unroll
      for (int e = 0; e < E; e++) {
        x.v[e] = from_acc<T>(acc[e]);
        const float xf = to_acc<float>(x.v[e]);
        if (!u.has(k, e)) continue;
        acc_row.sum = __fadd_rn(acc_row.sum, __fmul_rn(xf, xf));
        acc_row.most = fmaxf(acc_row.most, fabsf(__fmul_rn(xf, weight(g, e))));
      }
      if (by_row && keep) u.store(keep, k, x);
      else if (keep) x.store(keep + (k - from) * E);
      if (k == kf) x_first = x;
    }
    if (CAN_FAIL) failed = __syncthreads_or(failed);
    if (!failed) acc_row = block_reduce(acc_row);
    acc_row = cluster_reduce(acc_row, parts, part, round++, failed);
    if (failed) return false;
    const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(acc_row.sum, (float)m.cols), m.epsilon)));
    float scale = fmaxf(__fdiv_rn(__fmul_rn(r, acc_row.most), fp8_max), __fdiv_rn(1.0f, fp8_max * 512.0f));
    if (m.scale_ub > 0.0f) scale = fminf(scale, m.scale_ub);
    if (threadIdx.x == 0 && part == 0) m.scales[row] = scale;
    const float inv_scale = __fdiv_rn(1.0f, scale);

    // 2. the quantized row, y = x * r * w times the scale's reciprocal (the same thread reads back
    // what it stored); the format is chosen once per row, not per element. A division per element
    // costs 0.9 us of a 1-row call (2 x H200, bf16, 8192 cols, LL, 6.03 against 5.15 us).
    auto quantize = [&](auto format) {
      for (size_t k = kf; k < k1; k += blockDim.x) {
        P x = x_first, g = g_first;
        if (k != kf) {
          if (by_row) u.load(x, xs, k);
          else x.load(xs + (k - from) * E);
          u.load(g, gamma, k);
        }
        float y[E];
#pragma unroll
        for (int e = 0; e < E; e++)
          y[e] = __fmul_rn(__fmul_rn(__fmul_rn(to_acc<float>(x.v[e]), r), weight(g, e)), inv_scale);
        unsigned char q[E];
        to_fp8<decltype(format)::value>(y, q);
        u.put((unsigned char *)m.out + base, k, q);
      }
    };
    if (m.out_dtype == GC_FP8_E4M3) quantize(std::integral_constant<__nv_fp8_interpretation_t, __NV_E4M3>{});
    else quantize(std::integral_constant<__nv_fp8_interpretation_t, __NV_E5M2>{});
  }
  return true;
}

// The MAX numerics (gpucoll.h) of the block's rows: f = sum_at (the row summed over the ranks in
// rank order, false when a wait ran out: CAN_FAIL) plus the residual, in float, never rounded
// before it is normalized. Three passes over a thread's packs: f^2 summed (then r), the largest
// |(f * r) * w| (then the scale), the quantized row with x = dtype(f) stored at m.x. The first pack
// stays in registers; the others are summed again by sum_at, the same loads in the same order
// (the same bits), so x is stored only in the last pass, after every read of the residual it may
// overwrite (in place: each pack read and stored by one thread). LL data is taken once: its
// kernel runs with one pack a thread at most (launch). Failure and `entered` as norm_rows.
template <typename T, Shape S, bool CAN_FAIL, typename SumAt>
__device__ bool norm_rows_max(const gc_kargs_t &a, const gc_knorm_t &m, SumAt sum_at, bool entered = true) {
  using U = Units<T, S>;
  using P = typename U::P;
  constexpr int E = U::E;
  const float fp8_max = m.out_dtype == GC_FP8_E4M3 ? 448.0f : 57344.0f;
  const int parts = m.parts, part = (int)blockIdx.x % parts;
  const T *gamma = (const T *)m.gamma;
  auto weight = [&](const P &g, int e) { return __fadd_rn(to_acc<float>(g.v[e]), m.weight_offset); };
  size_t k0, kn;
  slice_of(U(0, m.cols).count(), parts, part, &k0, &kn);
  unsigned round = 0;
  if (parts > 1 && blockIdx.x / parts < m.rows) cluster_arrive();  // the cluster has rows to reduce
  for (size_t row = blockIdx.x / parts; row < m.rows; row += gridDim.x / parts) {
    const size_t base = row * m.cols;
    const U u(base, m.cols);
    if constexpr (S == Shape::FLAT) slice_of(u.count(), parts, part, &k0, &kn);
    const size_t k1 = k0 + kn, kf = k0 + threadIdx.x;
    const T *const res_row = m.residual ? (const T *)m.residual + base : nullptr;
    auto f_at = [&](size_t k, float(&f)[E]) {  // f of pack k
      if (!sum_at(base - u.lead + k * E, f)) return false;
      if (res_row) {
        P res;
        u.load(res, res_row, k);
#pragma unroll
        for (int e = 0; e < E; e++) f[e] = __fadd_rn(f[e], to_acc<float>(res.v[e]));
      }
      return true;
    };
    P g_first;
    float f_first[E];
    if (kf < k1) u.load(g_first, gamma, kf);
    // f of pack k (the first from registers) and its weights
    auto pack_at = [&](size_t k, float(&f)[E], P &g) {
      g = g_first;
      if (k == kf) {
#pragma unroll
        for (int e = 0; e < E; e++) f[e] = f_first[e];
        return;
      }
      f_at(k, f);
      u.load(g, gamma, k);
    };
    // 1. the sum of f^2 over the row: r
    SumMax acc_row = {0.0f, 0.0f};
    bool failed = !entered;
    for (size_t k = kf; !failed && k < k1; k += blockDim.x) {
      float f[E];
      if (!f_at(k, f) && CAN_FAIL) {
        failed = true;
        break;
      }
#pragma unroll
      for (int e = 0; e < E; e++) {
        if (u.has(k, e)) acc_row.sum = __fadd_rn(acc_row.sum, __fmul_rn(f[e], f[e]));
        if (k == kf) f_first[e] = f[e];
      }
    }
    if (CAN_FAIL) failed = __syncthreads_or(failed);
    if (!failed) acc_row = block_reduce(acc_row);
    acc_row = cluster_reduce(acc_row, parts, part, round++, failed);
    if (failed) return false;
    const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(acc_row.sum, (float)m.cols), m.epsilon)));
    // 2. the row's largest |y| = |(f * r) * w|, at most scale_ub: the scale
    SumMax top = {0.0f, 0.0f};
    for (size_t k = kf; k < k1; k += blockDim.x) {
      float f[E];
      P g;
      pack_at(k, f, g);
#pragma unroll
      for (int e = 0; e < E; e++)
        if (u.has(k, e)) top.most = fmaxf(top.most, fabsf(__fmul_rn(__fmul_rn(f[e], r), weight(g, e))));
    }
    top = block_reduce(top);
    bool none_failed = false;
    top = cluster_reduce(top, parts, part, round++, none_failed);
    const float bounded = m.scale_ub > 0.0f ? fminf(top.most, m.scale_ub) : top.most;
    const float scale = __fdiv_rn(bounded, fp8_max);
    if (threadIdx.x == 0 && part == 0) m.scales[row] = scale;
    const float inv_scale = scale == 0.0f ? 0.0f : __fdiv_rn(1.0f, scale);
    // 3. the quantized row, y times the scale's reciprocal, and x = dtype(f) at m.x
    T *const keep = m.x ? (T *)m.x + base : nullptr;
    auto quantize = [&](auto format) {
      for (size_t k = kf; k < k1; k += blockDim.x) {
        float f[E], y[E];
        P g, x;
        pack_at(k, f, g);
#pragma unroll
        for (int e = 0; e < E; e++) {
          y[e] = __fmul_rn(__fmul_rn(__fmul_rn(f[e], r), weight(g, e)), inv_scale);
          x.v[e] = from_acc<T>(f[e]);
        }
        unsigned char q[E];
        to_fp8<decltype(format)::value>(y, q);
        u.put((unsigned char *)m.out + base, k, q);
        if (keep) u.store(keep, k, x);
      }
    };
    if (m.out_dtype == GC_FP8_E4M3) quantize(std::integral_constant<__nv_fp8_interpretation_t, __NV_E4M3>{});
    else quantize(std::integral_constant<__nv_fp8_interpretation_t, __NV_E5M2>{});
  }
  return true;
}

// Pass 1's source by reads: pack `el` of every rank's input (k.in[]) summed in rank order. The
// loads go four ranks at a time (reduce_at issues all eight slots' at once): fewer registers.
// TAIL (FLAT): a pack reaching past the inputs' `count` elements, the last row's last, is read
// element by element, zeros past the end: one 16-byte load there would read outside the input
// (memcheck). PACKS' and ELEMENTS' units lie within the inputs.
template <typename T, bool VEC, bool TAIL = false>
struct SumByReads {
  const gc_kargs_t &k;
  size_t count;
  __device__ bool operator()(size_t el, float (&acc)[Pack<T, VEC>::E]) const {
    constexpr int E = Pack<T, VEC>::E, G = 4;
    const int n = k.peers.nranks;
    const bool whole = !TAIL || el + E <= count;
    for (int p0 = 0; p0 < n; p0 += G) {
      Pack<T, VEC> v[G];
#pragma unroll
      for (int i = 0; i < G; i++) {
        if (p0 + i >= n) continue;
        const T *in = (const T *)k.in[p0 + i] + el;
        if (whole) v[i].load(in);
        else
#pragma unroll
          for (int e = 0; e < E; e++) v[i].v[e] = el + e < count ? in[e] : from_acc<T>(0.0f);
      }
#pragma unroll
      for (int i = 0; i < G; i++)
        if (p0 + i < n)
#pragma unroll
          for (int e = 0; e < E; e++)
            acc[e] = p0 + i == 0 ? to_acc<float>(v[i].v[e]) : __fadd_rn(acc[e], to_acc<float>(v[i].v[e]));
    }
    return true;
  }
};

// LOCAL's source under MAX over half inputs: x summed already, as float32 (lib/rmsnorm.c's
// all-reduce into a float32 temporary on 16-byte boundaries), E values from element `el` (a
// multiple of E), 16 bytes at a time where E allows. TAIL: zeros past the input's `count`.
template <int E, bool TAIL>
struct SumOfFloats {
  const float *in;
  size_t count;
  __device__ bool operator()(size_t el, float (&acc)[E]) const {
    if constexpr (E % 4 == 0) {
      if (!TAIL || el + E <= count) {
#pragma unroll
        for (int q = 0; q < E / 4; q++) {
          const float4 v = *(const float4 *)(in + el + 4 * q);
          acc[4 * q] = v.x;
          acc[4 * q + 1] = v.y;
          acc[4 * q + 2] = v.z;
          acc[4 * q + 3] = v.w;
        }
        return true;
      }
    }
    if constexpr (E % 4 != 0 || TAIL) {  // element by element: odd packs, or a pack past the end
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] = !TAIL || el + e < count ? in[el + e] : 0.0f;
    }
    return true;
  }
};

// LOCAL and READS (kernels.h). Two blocks an SM (at most 64 registers a thread, a few spilled):
// one block's loads overlap the other's reductions and quantizing, and the grid (up to the 256
// signal rows) is resident at once. 2 x H200, bf16, 8192 cols with residual, forced one-shot, us,
// two blocks an SM against one (the register-bound kernel uses 113-128 registers):
// 4 MB 26.54 / 33.02, 16 MB 67.04 / 84.33, 64 MB 220.5 / 250.0. 256-thread blocks, one or two an
// SM, are slower from 16 MB (74.84 / 81.95).
template <typename T, Shape S>
__global__ void __launch_bounds__(GC_KTHREADS, 2) rmsnorm_fp8_kernel(const gc_kargs_t a, const gc_knorm_t m) {
  using Sum = SumByReads<T, Units<T, S>::VEC, S == Shape::FLAT>;
  pdl_begin(a.pdl);
  extern __shared__ uint4 shared_row[];  // READS: x of the block's share of a row, when m.x is NULL
  if (a.peers.nranks == 1) {  // LOCAL, or one rank: no peer reads our input, so no barriers
    norm_rows<T, S, false>(a, m, Sum{a, m.rows * m.cols}, m.mode == GC_KNORM_READS && !m.x ? (T *)shared_row : nullptr);
    return;
  }
  Sync sync(a.peers);
  const bool entered = sync.barrier();  // every input is in place on every rank
  if (!norm_rows<T, S, false>(a, m, Sum{a, m.rows * m.cols}, m.x ? nullptr : (T *)shared_row, entered)) return;
  if (!sync.barrier()) return;  // no rank leaves while a peer may still read its input
  sync.done();
}

// LOCAL and READS under MAX (norm_rows_max; XF: LOCAL's x is float32). A kernel of its own, one
// block an SM: in one kernel with ROUNDED's at two blocks an SM (64 registers) ptxas spills
// 312-1744 bytes a thread, ROUNDED's path with it (0-176 alone); on its own at one block an SM it
// takes 52-127 registers and spills none (sm_90, CUDA 13.0).
template <typename T, Shape S, bool XF>
__global__ void __launch_bounds__(GC_KTHREADS, 1) rmsnorm_max_kernel(const gc_kargs_t a, const gc_knorm_t m) {
  pdl_begin(a.pdl);
  if constexpr (XF) {
    norm_rows_max<T, S, false>(a, m, SumOfFloats<Units<T, S>::E, S == Shape::FLAT>{(const float *)a.in[0], m.rows * m.cols});
  } else {
    const SumByReads<T, Units<T, S>::VEC, S == Shape::FLAT> sum{a, m.rows * m.cols};
    if (a.peers.nranks == 1) {  // LOCAL, or one rank: no peer reads our input, so no barriers
      norm_rows_max<T, S, false>(a, m, sum);
      return;
    }
    Sync sync(a.peers);
    const bool entered = sync.barrier();  // every input is in place on every rank
    if (!norm_rows_max<T, S, false>(a, m, sum, entered)) return;
    if (!sync.barrier()) return;  // no rank leaves while a peer may still read its input
    sync.done();
  }
}

// TWOSHOT: this rank's rows (gc_partition's split) into its publish area, x in shared memory,
// then every owner's fp8 rows and scales copied out. A kernel of its own: its copies of the
// arguments took the one-shot's registers and stack when both shared one. One block an SM, said
// outright: left to choose, ptxas gave the odd-width (ELEMENTS) kernel 64 registers and spilled
// 40-44 bytes a thread; with this bound 96 and none (sm_90, CUDA 13.0), one block an SM as before
// (90 registers until 38587ac) and as the PACKS kernel (118-120).
// S: PACKS, FLAT (rows of whole packs, inputs on 16-byte boundaries, but gamma or residual off
// them on this rank: the same split of rows as PACKS) or ELEMENTS (rows not whole packs, or
// inputs off 16-byte boundaries, alike on every rank), so counterpart blocks copy out the parts
// their peers wrote.
template <typename T, Shape S>
__global__ void __launch_bounds__(GC_KTHREADS, 1) rmsnorm_twoshot_kernel(const gc_kargs_t a, const gc_knorm_t m) {
  constexpr bool VEC = S != Shape::ELEMENTS;
  constexpr int E = Pack<T, VEC>::E;
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const bool entered = sync.barrier();  // every input is in place on every rank
  extern __shared__ uint4 shared_row[];
  const int n = a.peers.nranks, me = a.peers.rank;
  size_t r0, rn;
  slice_of(m.rows, n, me, &r0, &rn);
  gc_kargs_t own = a;
  for (int p = 0; p < n; p++) own.in[p] = (const T *)a.in[p] + r0 * m.cols;
  gc_knorm_t mine = m;
  mine.rows = rn;
  mine.residual = m.residual ? (const T *)m.residual + r0 * m.cols : nullptr;
  mine.x = nullptr;
  mine.out = a.pub[me];
  mine.scales = (float *)((char *)a.pub[me] + m.pub_scales);
  const SumByReads<T, VEC> sum{own, rn * m.cols};
  const bool ok = m.numerics == GC_KNORM_ROUNDED ? norm_rows<T, S, false>(own, mine, sum, (T *)shared_row, entered)
                                                 : norm_rows_max<T, S, false>(own, mine, sum, entered);
  if (!ok) return;
  // Every owner's fp8 rows and scales, from its publish area into our outputs. The barrier is
  // per block, so a block copies exactly what its counterparts wrote: the same rows of every
  // owner's share, the same part of each row (norm_rows' split).
  if (!sync.barrier()) return;
  const int parts = m.parts, part = (int)blockIdx.x % parts;
  size_t k0, kn;
  slice_of(m.cols / E, parts, part, &k0, &kn);
  for (int i = 0; i < n; i++) {
    const int q = (me + i) % n;
    size_t q0, qn;
    slice_of(m.rows, n, q, &q0, &qn);
    const float *their_scales = (const float *)((const char *)a.pub[q] + m.pub_scales);
    for (size_t row = blockIdx.x / parts; row < qn; row += gridDim.x / parts) {
      copy_bytes((unsigned char *)m.out + (q0 + row) * m.cols + k0 * E,
                 (const unsigned char *)a.pub[q] + row * m.cols + k0 * E, kn * E, threadIdx.x, blockDim.x);
      if (part == 0 && threadIdx.x == 0) m.scales[q0 + row] = their_scales[row];
    }
  }
  if (!sync.barrier()) return;  // no rank leaves while a peer may still read its input (or pub)
  sync.done();
}

// LL: the block that normalizes a row first writes this rank's copy of it into row `me` of every
// rank's LL area (a generation holds n rows of the whole input), then takes the row's packs from
// its own area as they arrive. Without barriers a peer may be in its next call already, so x is
// kept at m.x or in shared memory, never in staging.
// One block an SM: with two (64 registers) it is slower at every size (2 x H200, bf16,
// 8192 cols with residual: 256 KB 9.76 against 8.35 us, 2 MB 22.04 against 16.20).
// S: PACKS, or FLAT where gamma, residual or x sit off 16-byte boundaries on this rank (the LL
// area's rows are whole packs, so FLAT splits rows as PACKS does and only loads those element by
// element): the choice is this rank's alone and changes neither the grid nor what peers see.
template <typename T, Shape S>
__global__ void GC_LAUNCH_BOUNDS rmsnorm_ll_kernel(const gc_kargs_t a, const gc_knorm_t m) {
  constexpr int E = 16 / sizeof(T);
  pdl_begin(a.pdl);
  const int n = a.peers.nranks, me = a.peers.rank;
  const LLCall c(a.peers);
  const size_t row_bytes = m.cols * sizeof(T), bytes = m.rows * row_bytes, units = row_bytes / 16;
  size_t k0, kn;  // the packs of each row that this block writes and later reads (norm_rows' split)
  slice_of(units, m.parts, (int)blockIdx.x % m.parts, &k0, &kn);
  for (size_t r = blockIdx.x / m.parts; r < m.rows; r += gridDim.x / m.parts)
    for (size_t k = k0 + threadIdx.x; k < k0 + kn; k += blockDim.x) {
      const size_t u = r * units + k;
      const uint4 w = ll_canonical(load_unit((const char *)a.send, bytes, u), sizeof(T));
      for (int i = 1; i <= n; i++) *(uint4 *)(a.peers.ll[(me + i) % n] + c.gen + me * bytes + u * 16) = w;
    }
  unsigned char *mine = a.peers.ll[me] + c.gen;
  extern __shared__ uint4 shared_row[];  // x of the block's row when m.x is NULL
  Deadline d;
  auto take = [&](size_t el, float(&acc)[E]) {
    uint4 v[GC_MAX_LOCAL_RANKS];
    if (!ll_take(mine + el * sizeof(T), bytes, n, sizeof(T), v, d, a.peers)) return false;
    reduce_packs<T, float, OPK_SUM>(v, n, GC_SUM, acc);
    return true;
  };
  const bool ok = m.numerics == GC_KNORM_ROUNDED ? norm_rows<T, S, true>(a, m, take, m.x ? nullptr : (T *)shared_row)
                                                 : norm_rows_max<T, S, true>(a, m, take);
  ll_finish(a.peers, c.call, !ok);
}

// A block gets 48 KB of shared memory, static and dynamic together, unless its kernel asks for
// more: a row of up to 48 KB kept in shared memory needs it (test "rmsnorm rows that fill shared
// memory"; without it those launches fail with "invalid argument"). The kernels' own
// static shared memory is a few hundred bytes (ptxas), so up to 40 KB of dynamic needs no asking.
static cudaError_t launch_kernel(cudaLaunchConfig_t &cfg, void (*kernel)(const gc_kargs_t, const gc_knorm_t),
                                 const gc_kargs_t *a, const gc_knorm_t *m) {
  if (cfg.dynamicSmemBytes > 40 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg.dynamicSmemBytes);
    if (e != cudaSuccess) return e;
  }
  return cudaLaunchKernelEx(&cfg, kernel, *a, *m);
}

template <typename T>
static cudaError_t launch(const gc_kargs_t *a, const gc_knorm_t *m, cudaStream_t s) {
  constexpr int E = 16 / sizeof(T);
  // PACKS need rows on 16-byte boundaries in every array a pack is loaded from or stored to; FLAT
  // only the inputs there (the LL kernel's input is its own area); else ELEMENTS. What only this
  // rank's gamma, residual and x decide must leave the grid and the split of rows alone: ranks
  // may pass them at different alignments.
  const bool whole_packs = m->cols % E == 0;
  const bool packs = whole_packs && aligned16(m->gamma) && (!m->residual || aligned16(m->residual)) &&
                     (!m->x || aligned16(m->x));
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t cfg = launch_config(a, s, attr);
  if (m->parts < 1 || a->blocks % m->parts) return cudaErrorInvalidValue;
  if (m->parts > 1) {
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = (unsigned)m->parts;
    attr[1].val.clusterDim.y = attr[1].val.clusterDim.z = 1;
    cfg.numAttrs = 2;
  }
  const bool rounded = m->numerics == GC_KNORM_ROUNDED;
  if (m->mode == GC_KNORM_LL) {
    if (!whole_packs || (rounded && !m->x && m->cols * sizeof(T) > GC_KNORM_SHARED_ROW)) return cudaErrorInvalidValue;
    // MAX: one pack a thread, in registers (LL data cannot be taken twice)
    if (!rounded && (m->cols / E + m->parts - 1) / m->parts > cfg.blockDim.x) return cudaErrorInvalidValue;
    cfg.dynamicSmemBytes = m->x || !rounded ? 0 : (m->cols / E + m->parts - 1) / m->parts * 16;  // the block's share
    return launch_kernel(cfg, packs ? rmsnorm_ll_kernel<T, Shape::PACKS> : rmsnorm_ll_kernel<T, Shape::FLAT>, a, m);
  }
  bool inputs16 = true;
  for (int p = 0; p < a->peers.nranks; p++) inputs16 &= aligned16(a->in[p]);
  // x in shared memory: the block's share of a row's units (FLAT: one more than whole packs where
  // rows are not whole packs; whole-pack rows need what PACKS needs, so a rank whose gamma or
  // residual alone is off 16 bytes takes FLAT where its peers take PACKS, the same split and
  // order, even for a row that fills GC_KNORM_SHARED_ROW)
  const bool x_shared = rounded && (m->mode == GC_KNORM_TWOSHOT || (m->mode == GC_KNORM_READS && !m->x));
  const size_t flat_share = ((m->cols + E - 1) / E + (whole_packs ? 0 : 1) + m->parts - 1) / m->parts * 16;
  // TWOSHOT's copy-out takes the same part of every row from each owner, and FLAT's shares move
  // with each row's offset from the input's packs: it takes FLAT only for rows of whole packs,
  // which FLAT splits as PACKS does.
  Shape shape = Shape::ELEMENTS;
  if (inputs16 && packs) shape = Shape::PACKS;
  else if (inputs16 && (m->mode == GC_KNORM_TWOSHOT ? whole_packs : (!x_shared || flat_share <= GC_KNORM_SHARED_ROW)))
    shape = Shape::FLAT;
  if (shape == Shape::ELEMENTS) {  // a thread an element: as many threads as the block's share of a row
    const size_t share = (m->cols + m->parts - 1) / m->parts, threads = (share + 31) / 32 * 32;
    cfg.blockDim.x = (unsigned)(threads < 64 ? 64 : threads > GC_KTHREADS ? GC_KTHREADS : threads);
  }
  if (x_shared) {
    if (m->cols * sizeof(T) / m->parts > GC_KNORM_SHARED_ROW) return cudaErrorInvalidValue;
    cfg.dynamicSmemBytes = shape == Shape::PACKS ? (m->cols / E + m->parts - 1) / m->parts * 16
                           : shape == Shape::FLAT ? flat_share
                                                  : (m->cols + m->parts - 1) / m->parts * sizeof(T);
  }
  if (m->mode == GC_KNORM_TWOSHOT)
    return launch_kernel(cfg, shape == Shape::PACKS  ? rmsnorm_twoshot_kernel<T, Shape::PACKS>
                              : shape == Shape::FLAT ? rmsnorm_twoshot_kernel<T, Shape::FLAT>
                                                     : rmsnorm_twoshot_kernel<T, Shape::ELEMENTS>,
                         a, m);
  if (!rounded && m->x_float)
    return launch_kernel(cfg, shape == Shape::PACKS  ? rmsnorm_max_kernel<T, Shape::PACKS, true>
                              : shape == Shape::FLAT ? rmsnorm_max_kernel<T, Shape::FLAT, true>
                                                     : rmsnorm_max_kernel<T, Shape::ELEMENTS, true>,
                         a, m);
  if (!rounded)
    return launch_kernel(cfg, shape == Shape::PACKS  ? rmsnorm_max_kernel<T, Shape::PACKS, false>
                              : shape == Shape::FLAT ? rmsnorm_max_kernel<T, Shape::FLAT, false>
                                                     : rmsnorm_max_kernel<T, Shape::ELEMENTS, false>,
                         a, m);
  return launch_kernel(cfg, shape == Shape::PACKS  ? rmsnorm_fp8_kernel<T, Shape::PACKS>
                            : shape == Shape::FLAT ? rmsnorm_fp8_kernel<T, Shape::FLAT>
                                                   : rmsnorm_fp8_kernel<T, Shape::ELEMENTS>,
                       a, m);
}

}  // namespace gc

extern "C" int gc_kernel_rmsnorm_fp8(const gc_kargs_t *a, const gc_knorm_t *m, cudaStream_t s) {
  if (m->out_dtype != GC_FP8_E4M3 && m->out_dtype != GC_FP8_E5M2) return cudaErrorInvalidValue;
  switch (a->dtype) {
    case GC_FLOAT32: return gc::launch<float>(a, m, s);
    case GC_FLOAT16: return gc::launch<__half>(a, m, s);
    case GC_BFLOAT16: return gc::launch<__nv_bfloat16>(a, m, s);
  }
  return cudaErrorInvalidValue;
}
