// local_copy.cuh — the probes' SM copy within one GPU (gpucoll-linkprobe's staged patterns,
// gpucoll-ipcprobe): units of 16 bytes, four loads in flight per thread, kCopyThreads per block.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

constexpr int kCopyThreads = 512;

__global__ void __launch_bounds__(kCopyThreads) local_copy(uint4 *dst, const uint4 *src, size_t units) {
  const size_t G = (size_t)gridDim.x * blockDim.x;
  for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < units; k += 4 * G) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (k + u * G < units) v[u] = src[k + u * G];
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (k + u * G < units) dst[k + u * G] = v[u];
  }
}
