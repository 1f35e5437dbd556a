// probe.cuh — what gpucoll-linkprobe and gpucoll-ipcprobe share: CHECK, which ends the program
// with the failed call, where it was and CUDA's message (each probe names itself in kProbeName
// before including this), and local_copy, the SM copy within one GPU (units of 16 bytes, four loads
// in flight per thread, kCopyThreads per block).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                                    \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      fprintf(stderr, "%s: %s failed at %s:%d: %s\n", kProbeName, #x, __FILE__, __LINE__,          \
              cudaGetErrorString(e_));                                                              \
      exit(1);                                                                                      \
    }                                                                                               \
  } while (0)

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
