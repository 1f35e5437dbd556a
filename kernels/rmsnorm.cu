// rmsnorm.cu — all-reduce + RMSNorm + FP8 quantization, one block per row. The block reduces its
// row over every rank's input in rank order (as the one-shot all-reduce does), rounds it to the
// input dtype (x), and keeps x where it reads it back; then the row's mean square, then the
// largest |y| and so the row's scale, then the quantized row. Every float step is rounded on its
// own (no FMA contraction) and the block's sums and maxima go in a fixed order, so every rank
// computes the same bits.
#include "common.cuh"

namespace gc {

// The whole block's combination of v, in the same order on every rank (lanes by butterfly,
// then the warps' results in warp order); every thread gets the result.
template <typename F>
__device__ __forceinline__ float block_reduce(float v, F f) {
  __shared__ float part[GC_KTHREADS / 32];
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warps = (int)(blockDim.x + 31) / 32;
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  v = part[0];
  for (int w = 1; w < warps; w++) v = f(v, part[w]);
  __syncthreads();  // part is free for the next call
  return v;
}

// y of element e of a pack: x * r * (gamma + weight_offset), each step rounded.
__device__ __forceinline__ float normed(float x, float r, float g, float offset) {
  return __fmul_rn(__fmul_rn(x, r), __fadd_rn(g, offset));
}

template <typename T, bool VEC>
__device__ void norm_rows(const gc_kargs_t &a, const gc_knorm_t &m) {
  constexpr int E = Pack<T, VEC>::E;
  const float fp8_max = m.out_dtype == GC_FP8_E4M3 ? 448.0f : 57344.0f;
  const size_t units = m.cols / E;  // VEC only when cols is a multiple of E
  const T *xs = (const T *)(m.x ? m.x : a.in[0]);
  const T *gamma = (const T *)m.gamma;
  for (size_t row = blockIdx.x; row < m.rows; row += gridDim.x) {
    const size_t base = row * m.cols;
    // 1. x = the row summed over the ranks (+ residual), rounded to T, and its sum of squares
    float ss = 0.0f;
    for (size_t k = threadIdx.x; k < units; k += blockDim.x) {
      float acc[E];
      reduce_at<T, float, OPK_SUM, VEC>(a, base + k * E, acc);
      Pack<T, VEC> x;
      if (m.residual) {
        Pack<T, VEC> res;
        res.load((const T *)m.residual + base + k * E);
#pragma unroll
        for (int e = 0; e < E; e++) acc[e] = __fadd_rn(acc[e], to_acc<float>(res.v[e]));
      }
#pragma unroll
      for (int e = 0; e < E; e++) {
        x.v[e] = from_acc<T>(acc[e]);
        const float xf = to_acc<float>(x.v[e]);
        ss = __fadd_rn(ss, __fmul_rn(xf, xf));
      }
      if (m.x) x.store((T *)m.x + base + k * E);
    }
    ss = block_reduce(ss, [](float p, float q) { return __fadd_rn(p, q); });
    const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)m.cols), m.epsilon)));

    // 2. the row's largest |y| and its scale (the same thread reads back what it stored)
    float amax = 0.0f;
    for (size_t k = threadIdx.x; k < units; k += blockDim.x) {
      Pack<T, VEC> x, g;
      x.load(xs + base + k * E);
      g.load(gamma + k * E);
#pragma unroll
      for (int e = 0; e < E; e++)
        amax = fmaxf(amax, fabsf(normed(to_acc<float>(x.v[e]), r, to_acc<float>(g.v[e]), m.weight_offset)));
    }
    amax = block_reduce(amax, [](float p, float q) { return fmaxf(p, q); });
    float scale = fmaxf(__fdiv_rn(amax, fp8_max), __fdiv_rn(1.0f, fp8_max * 512.0f));
    if (m.scale_ub > 0.0f) scale = fminf(scale, m.scale_ub);
    if (threadIdx.x == 0) m.scales[row] = scale;

    // 3. the quantized row
    for (size_t k = threadIdx.x; k < units; k += blockDim.x) {
      Pack<T, VEC> x, g;
      x.load(xs + base + k * E);
      g.load(gamma + k * E);
      unsigned char q[E];
#pragma unroll
      for (int e = 0; e < E; e++)
        store_float(q, e, m.out_dtype,
                    __fdiv_rn(normed(to_acc<float>(x.v[e]), r, to_acc<float>(g.v[e]), m.weight_offset), scale));
      put_bytes((unsigned char *)m.out + base + k * E, q, E);
    }
  }
}

template <typename T, bool VEC>
__global__ void GC_LAUNCH_BOUNDS rmsnorm_fp8_kernel(const gc_kargs_t a, const gc_knorm_t m) {
  pdl_begin(a.pdl);
  if (!m.reduce) {  // x is in a.in[0] already: no peers, no barriers
    norm_rows<T, VEC>(a, m);
    return;
  }
  Sync sync(a.peers);
  if (!sync.barrier()) return;  // every input is in place on every rank
  norm_rows<T, VEC>(a, m);
  if (!sync.barrier()) return;  // no rank leaves while a peer may still read its input
  sync.done();
}

template <typename T>
static cudaError_t launch(const gc_kargs_t *a, const gc_knorm_t *m, cudaStream_t s) {
  constexpr int E = 16 / sizeof(T);
  // Packs need rows on 16-byte boundaries in every array a pack is loaded from or stored to.
  bool vec = m->cols % E == 0 && aligned16(m->gamma) && (!m->residual || aligned16(m->residual)) &&
             (!m->x || aligned16(m->x));
  const int n = m->reduce ? a->peers.nranks : 1;
  for (int p = 0; p < n; p++) vec &= aligned16(a->in[p]);
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launch_config(a, s, attr);
  if (vec) return cudaLaunchKernelEx(&cfg, rmsnorm_fp8_kernel<T, true>, *a, *m);
  return cudaLaunchKernelEx(&cfg, rmsnorm_fp8_kernel<T, false>, *a, *m);
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
