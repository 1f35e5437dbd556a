// bulk.cuh — sm_90's bulk copies (cp.async.bulk, the tensor memory accelerator) between global
// and shared memory, each issued by one thread: a load completes on an mbarrier in shared memory,
// stores complete in bulk groups the issuing thread waits for. Sizes and addresses are multiples
// of 16 bytes. On older GPUs the bodies are empty and nothing may launch a kernel that uses them.
// Used by the link probe.
#pragma once
#include <stdint.h>

namespace gc {
namespace bulk {

__device__ __forceinline__ uint32_t smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// An mbarrier that completes a phase when one arrival and its expected bytes are in.
__device__ __forceinline__ void init(uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(bar)));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// bytes from global src into shared dst; completes bar's current phase.
__device__ __forceinline__ void load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem(bar)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem(dst)),
               "l"((uint64_t)src), "r"(bytes), "r"(smem(bar))
               : "memory");
#endif
}

// Whether bar's phase of the given parity has completed.
__device__ __forceinline__ bool done(uint64_t *bar, uint32_t parity) {
  uint32_t ok = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok)
               : "r"(smem(bar)), "r"(parity)
               : "memory");
#endif
  return ok != 0;
}

// bytes from shared src to global dst (a peer's memory too), in the thread's current bulk group.
__device__ __forceinline__ void store(void *dst, const void *src, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"((uint64_t)dst), "r"(smem(src)),
               "r"(bytes)
               : "memory");
#endif
}

// Closes the current bulk group.
__device__ __forceinline__ void commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

// Waits until at most N of the thread's bulk groups are pending: READ_ONLY, until they have read
// their shared memory; else until their writes are done and visible to this thread.
template <int N, bool READ_ONLY = false>
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (READ_ONLY) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
  else asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
#endif
}

}  // namespace bulk
}  // namespace gc
