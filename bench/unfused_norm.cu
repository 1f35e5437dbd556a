/* unfused_norm.cu — the RMSNorm kernel and the per-row FP8 quantization kernel of the unfused
 * baseline (unfused_norm.h). Each is the usual two-pass form: a block per row, a block-wide
 * reduction, then a second pass over the row (served from L1/L2). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>

#include "unfused_norm.h"

namespace {

constexpr float kFp8Max = 448.0f; /* e4m3 */
/* Two blocks of 1024 threads an SM, so at most 32 registers a thread: keeping a pack in registers
 * between the passes needs 36-41 and halves the blocks an SM holds, which makes the pair slower. */
constexpr int kMaxThreads = 1024;

/* V elements moved by one access: 16 bytes on the vector path, one element otherwise. */
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <typename T>
__device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

struct Sum {
  static constexpr float identity = 0.0f;
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max { /* of non-negative values */
  static constexpr float identity = 0.0f;
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* The block's combination of every thread's v, returned to all threads. */
template <typename Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float warp_part[kMaxThreads / 32];
  __shared__ float result;
  for (int d = 16; d > 0; d >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, d));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? warp_part[lane] : Op::identity;
    for (int d = 16; d > 0; d >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, d));
    if (lane == 0) result = v;
  }
  __syncthreads();
  return result;
}

/* x = dtype(sum + residual) for one pack. */
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_x(const T *sum, const T *residual, size_t at) {
  Pack<T, V> x = *reinterpret_cast<const Pack<T, V> *>(sum + at);
  if (residual) {
    const Pack<T, V> r = *reinterpret_cast<const Pack<T, V> *>(residual + at);
#pragma unroll
    for (int k = 0; k < V; k++) x.v[k] = from_float<T>(to_float(x.v[k]) + to_float(r.v[k]));
  }
  return x;
}

/* Kernel 1: RMSNorm with the residual add, as frameworks run it before quantizing. Pass 2 reads
 * x back from residual_out when kept, else forms it again. */
template <typename T, int V>
__global__ void __launch_bounds__(kMaxThreads, 2)
    rmsnorm_kernel(const T *sum, const T *residual, T *residual_out, const T *gamma, T *y,
                   size_t cols, float epsilon) {
  const size_t base = blockIdx.x * cols, step = (size_t)blockDim.x * V;
  float ss = 0.0f;
  for (size_t j = threadIdx.x * V; j < cols; j += step) {
    const Pack<T, V> x = load_x<T, V>(sum, residual, base + j);
    if (residual_out) *reinterpret_cast<Pack<T, V> *>(residual_out + base + j) = x;
#pragma unroll
    for (int k = 0; k < V; k++) ss += to_float(x.v[k]) * to_float(x.v[k]);
  }
  const float r = rsqrtf(block_reduce(ss, Sum()) / (float)cols + epsilon);
  for (size_t j = threadIdx.x * V; j < cols; j += step) {
    const Pack<T, V> x = residual_out ? *reinterpret_cast<const Pack<T, V> *>(residual_out + base + j)
                                      : load_x<T, V>(sum, residual, base + j);
    const Pack<T, V> g = *reinterpret_cast<const Pack<T, V> *>(gamma + j);
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; k++) out.v[k] = from_float<T>(to_float(x.v[k]) * r * to_float(g.v[k]));
    *reinterpret_cast<Pack<T, V> *>(y + base + j) = out;
  }
}

/* Kernel 2: dynamic per-row FP8 quantization of y. */
template <typename T, int V>
__global__ void __launch_bounds__(kMaxThreads, 2)
    quantize_kernel(const T *y, __nv_fp8_storage_t *out, float *scales, size_t cols) {
  const size_t base = blockIdx.x * cols, step = (size_t)blockDim.x * V;
  float amax = 0.0f;
  for (size_t j = threadIdx.x * V; j < cols; j += step) {
    const Pack<T, V> p = *reinterpret_cast<const Pack<T, V> *>(y + base + j);
#pragma unroll
    for (int k = 0; k < V; k++) amax = fmaxf(amax, fabsf(to_float(p.v[k])));
  }
  // the library's default (GC_NORM_MAX, Modular MAX's): no floor; a row of zeros gets scale 0
  const float scale = block_reduce(amax, Max()) / kFp8Max;
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  const float inv_scale = scale == 0.0f ? 0.0f : 1.0f / scale;  // a multiply per element, not a division
  for (size_t j = threadIdx.x * V; j < cols; j += step) {
    const Pack<T, V> p = *reinterpret_cast<const Pack<T, V> *>(y + base + j);
    Pack<__nv_fp8_storage_t, V> q;
#pragma unroll
    for (int k = 0; k < V; k++)
      q.v[k] = __nv_cvt_float_to_fp8(to_float(p.v[k]) * inv_scale, __NV_SATFINITE, __NV_E4M3);
    *reinterpret_cast<Pack<__nv_fp8_storage_t, V> *>(out + base + j) = q;
  }
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

template <typename T, int V>
cudaError_t launch(const void *sum, const void *residual, void *residual_out, const void *gamma,
                   void *y, void *out, float *scales, size_t rows, size_t cols, float epsilon,
                   cudaStream_t stream) {
  size_t packs = (cols + V - 1) / V, threads = (packs + 31) / 32 * 32;
  if (threads > (size_t)kMaxThreads) threads = kMaxThreads;
  rmsnorm_kernel<T, V><<<(unsigned)rows, (unsigned)threads, 0, stream>>>(
      (const T *)sum, (const T *)residual, (T *)residual_out, (const T *)gamma, (T *)y, cols,
      epsilon);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  quantize_kernel<T, V><<<(unsigned)rows, (unsigned)threads, 0, stream>>>(
      (const T *)y, (__nv_fp8_storage_t *)out, scales, cols);
  return cudaGetLastError();
}

/* The vector path when the row length and every pointer allow 16-byte accesses. */
template <typename T>
cudaError_t dispatch(const void *sum, const void *residual, void *residual_out, const void *gamma,
                     void *y, void *out, float *scales, size_t rows, size_t cols, float epsilon,
                     cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  const bool vec = cols % V == 0 && aligned16(sum) && aligned16(residual) &&
                   aligned16(residual_out) && aligned16(gamma) && aligned16(y) && aligned16(out);
  return vec ? launch<T, V>(sum, residual, residual_out, gamma, y, out, scales, rows, cols, epsilon, stream)
             : launch<T, 1>(sum, residual, residual_out, gamma, y, out, scales, rows, cols, epsilon, stream);
}

}  // namespace

extern "C" int gcb_unfused_norm(const void *sum, const void *residual, void *residual_out,
                                const void *gamma, void *y, void *out_fp8, float *scales,
                                size_t rows, size_t cols, gc_dtype_t dtype, float epsilon,
                                void *stream, char *err, size_t errlen) {
  if (rows == 0 || cols == 0 || rows > 0x7fffffffu || !sum || !gamma || !y || !out_fp8 || !scales) {
    snprintf(err, errlen, "unfused norm: bad arguments (rows %zu, cols %zu)", rows, cols);
    return 1;
  }
  cudaStream_t s = (cudaStream_t)stream;
  cudaError_t e;
  switch (dtype) {
    case GC_FLOAT32:
      e = dispatch<float>(sum, residual, residual_out, gamma, y, out_fp8, scales, rows, cols, epsilon, s);
      break;
    case GC_FLOAT16:
      e = dispatch<__half>(sum, residual, residual_out, gamma, y, out_fp8, scales, rows, cols, epsilon, s);
      break;
    case GC_BFLOAT16:
      e = dispatch<__nv_bfloat16>(sum, residual, residual_out, gamma, y, out_fp8, scales, rows,
                                  cols, epsilon, s);
      break;
    default:
      snprintf(err, errlen, "unfused norm: dtype %s is not float32, float16 or bfloat16",
               gc_dtype_name(dtype));
      return 1;
  }
  if (e != cudaSuccess) {
    snprintf(err, errlen, "unfused norm: %s", cudaGetErrorString(e));
    return 1;
  }
  return 0;
}
