// util.cu — device helpers of the library: the random fill behind gc_fill_random, the
// stand-alone epilogue the MPI path uses on device data, the lone barrier that orders the
// copy-engine collectives' steps across GPUs, and the local copy of their staged path.
#include "common.cuh"
#include "gc_rng.h"

namespace gc {

__global__ void fill_random_kernel(void *buf, size_t count, int dtype, uint64_t seed) {
  for (size_t i = global_thread(); i < count; i += grid_threads()) {
    double v = gc__random_value(seed, i, dtype);  // exactly representable in dtype
    switch (dtype) {
      case GC_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
      case GC_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
      case GC_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
      default: store_double(buf, i, dtype, v);
    }
  }
}

// out[i] = cast(in[i] * scale + add[i]) in float (double for float64 input), as finish() does.
__global__ void epilogue_kernel(void *out, const void *in, size_t count, int in_dtype, gc_kepilogue_t ep) {
  for (size_t i = global_thread(); i < count; i += grid_threads()) {
    if (in_dtype == GC_INT32 || in_dtype == GC_INT64 || in_dtype == GC_UINT8) {
      // Integers: only an add applies, in 64-bit two's complement, wrapped to the output width.
      int64_t v = in_dtype == GC_INT64 ? ((const int64_t *)in)[i]
                  : in_dtype == GC_INT32 ? ((const int32_t *)in)[i] : ((const uint8_t *)in)[i];
      if (ep.add)
        v = op_sum(v, ep.add_dtype == GC_INT64 ? ((const int64_t *)ep.add)[i]
                      : ep.add_dtype == GC_INT32 ? (int64_t)((const int32_t *)ep.add)[i]
                                                 : (int64_t)((const uint8_t *)ep.add)[i]);
      if (ep.out_dtype == GC_INT64) ((int64_t *)out)[i] = v;
      else if (ep.out_dtype == GC_INT32) ((int32_t *)out)[i] = (int32_t)(uint32_t)(uint64_t)v;
      else ((uint8_t *)out)[i] = (uint8_t)(uint64_t)v;
      continue;
    }
    double x = load_as_double(in, i, in_dtype);
    if (in_dtype == GC_FLOAT64) {
      if (ep.apply_scale) x = __dmul_rn(x, ep.scale);
      if (ep.add) x = __dadd_rn(x, load_as_double(ep.add, i, ep.add_dtype));
      store_double(out, i, ep.out_dtype, x);
    } else {
      float f = (float)x;
      if (ep.apply_scale) f = __fmul_rn(f, (float)ep.scale);
      if (ep.add) f = __fadd_rn(f, (float)load_as_double(ep.add, i, ep.add_dtype));
      store_float(out, i, ep.out_dtype, f);
    }
  }
}

// One block meets the same block of every peer: everything this rank's stream did before is
// visible to the peers after it (copies included: they completed before the kernel started).
__global__ void barrier_kernel(const gc_kpeers_t peers) {
  Sync sync(peers);
  if (!sync.barrier()) return;
  sync.done();
}

// Launched with cudaLaunchKernelEx, like every kernel here: the launch's own status comes back,
// never an earlier, unrelated failure left in cudaGetLastError.
static cudaLaunchConfig_t elementwise_config(size_t count, cudaStream_t s) {
  size_t blocks = (count + GC_KTHREADS - 1) / GC_KTHREADS;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks > 1024 ? 1024 : blocks < 1 ? 1 : (unsigned)blocks);
  cfg.blockDim = dim3(GC_KTHREADS);
  cfg.stream = s;
  return cfg;
}

// A local copy by the SMs (copy_bytes: any alignment on either side).
__global__ void GC_LAUNCH_BOUNDS copy_kernel(void *dst, const void *src, size_t bytes) { copy_bytes(dst, src, bytes); }

}  // namespace gc

extern "C" int gc_kernel_fill_random(void *buf, size_t count, int dtype, uint64_t seed, cudaStream_t s) {
  cudaLaunchConfig_t cfg = gc::elementwise_config(count, s);
  return cudaLaunchKernelEx(&cfg, gc::fill_random_kernel, buf, count, dtype, seed);
}

extern "C" int gc_kernel_epilogue(void *out, const void *in, size_t count, int in_dtype, const gc_kepilogue_t *ep,
                                  cudaStream_t s) {
  cudaLaunchConfig_t cfg = gc::elementwise_config(count, s);
  return cudaLaunchKernelEx(&cfg, gc::epilogue_kernel, out, in, count, in_dtype, *ep);
}

extern "C" int gc_kernel_barrier(const gc_kpeers_t *peers, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  return cudaLaunchKernelEx(&cfg, gc::barrier_kernel, *peers);
}

extern "C" int gc_kernel_copy(void *dst, const void *src, size_t bytes, int max_blocks, cudaStream_t s) {
  if (bytes == 0 || dst == src) return cudaSuccess;
  // Four 16-byte units per thread and pass, at most max_blocks blocks.
  size_t blocks = (bytes + (size_t)GC_KTHREADS * 64 - 1) / ((size_t)GC_KTHREADS * 64);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks > (size_t)max_blocks ? (unsigned)max_blocks : (unsigned)blocks);
  cfg.blockDim = dim3(GC_KTHREADS);
  cfg.stream = s;
  return cudaLaunchKernelEx(&cfg, gc::copy_kernel, dst, src, bytes);
}
