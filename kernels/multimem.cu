// multimem.cu — the all-reduce and the reduce-scatter through an NVLink multicast object (NVLS):
// the switch reduces.
// Built but not exercised on GPUs here: the hosts this project tests on have multicast switched
// off. Checked by its SASS (`multimem_sass` test) and by the host code's unit tests.
//
// Every rank's buffer is one physical allocation bound to the multicast object: `uc` is this
// rank's own mapping of it, `mc` the multicast mapping (a load through it reduces the same
// address of every rank's allocation in the switch; a store through it writes every rank's).
// The input is cut into the same block ranges on every rank. Block b of each rank
//   1. copies its range of its input into uc (the last pack padded with zeros: sum's identity),
//   2. meets block b of every rank (all of the range is in place everywhere),
//   3. reduces its rank's share of the range through mc (multimem.ld_reduce) and stores the sum
//      through mc (multimem.st): every rank's uc now holds that share's result,
//   4. meets block b of every rank again (every share is stored),
//   5. copies its range of uc out to recv.
// Accesses through the two mappings of one allocation are ordered by fence.proxy.alias, on both
// sides of each barrier.
// One 16-byte pack a thread per step; sums only; half types accumulate in float32 in the switch
// (acc::f32). Each element is reduced once, by the switch, so every rank gets the same bits.
#include <type_traits>

#include "common.cuh"

namespace gc {

__device__ __forceinline__ void alias_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.alias;" ::: "memory");
#endif
}

// The sum of the 16-byte pack at multicast address p over every rank (reduced in the switch).
// T: float, __half or __nv_bfloat16.
template <typename T> __device__ __forceinline__ uint4 reduce_pack(const uint4 *p) {
  uint4 v = make_uint4(0, 0, 0, 0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (sizeof(T) == 4)
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  else if constexpr (std::is_same<T, __half>::value)
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.f16x2 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  else
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
#endif
  return v;
}

// Stores v through the multicast address p: the same bytes land in every rank's allocation.
__device__ __forceinline__ void broadcast_pack(uint4 *p, uint4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
#endif
}

// a->send: this rank's input, a->recv: its output (any device pointers), a->count elements;
// a->pub[0]: uc, a->pub[1]: mc (16-byte aligned, room for the count rounded up to 16 bytes).
template <typename T> __global__ void GC_LAUNCH_BOUNDS multimem_allreduce_kernel(gc_kargs_t a) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const size_t bytes = a.count * sizeof(T), packs = (bytes + 15) / 16;
  size_t p0, np;
  slice_of(packs, gridDim.x, blockIdx.x, &p0, &np); // this block's range, alike on every rank
  char *uc = (char *)a.pub[0];
  uint4 *mc = (uint4 *)a.pub[1];
  const size_t b0 = p0 * 16, b1 = min(bytes, (p0 + np) * 16); // its bytes of the input
  if (b1 > b0) copy_bytes(uc + b0, (const char *)a.send + b0, b1 - b0, threadIdx.x, blockDim.x);
  if (np && b1 < (p0 + np) * 16) // the zeros after the input's last byte, up to the pack's end
    for (size_t k = b1 + threadIdx.x; k < (p0 + np) * 16; k += blockDim.x) uc[k] = 0;
  alias_fence();
  if (!sync.barrier()) return;
  alias_fence();
  size_t s0, sn;
  slice_of(np, a.peers.nranks, a.peers.rank, &s0, &sn); // this rank's share of the range
  for (size_t k = threadIdx.x; k < sn; k += blockDim.x) broadcast_pack(mc + p0 + s0 + k, reduce_pack<T>(mc + p0 + s0 + k));
  alias_fence();
  if (!sync.barrier()) return;
  alias_fence();
  if (b1 > b0) copy_bytes((char *)a.recv + b0, uc + b0, b1 - b0, threadIdx.x, blockDim.x);
  sync.done();
}


// Reduce-scatter through the switch. a->region[s] is rank s's part of the input (a->send, this
// rank's, at region[s].in_offset elements, region[s].width long); every rank copies its whole
// input into uc, part s at s * a->slot_bytes (a multiple of 16, zeros after the part's end), so a
// part sits at the same address in every rank's allocation. Block b of each rank
//   1. copies its pack range of every part into uc,
//   2. meets block b of every rank,
//   3. reduces its range of its own part through mc (multimem.ld_reduce) into recv,
//   4. meets block b of every rank again (no rank refills its uc while another still reads it).
template <typename T> __global__ void GC_LAUNCH_BOUNDS multimem_reducescatter_kernel(gc_kargs_t a) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank;
  size_t most = 0;
  for (int s = 0; s < n; s++) most = max(most, a.region[s].width);
  size_t p0, np;
  slice_of((most * sizeof(T) + 15) / 16, gridDim.x, blockIdx.x, &p0, &np); // alike on every rank
  char *uc = (char *)a.pub[0];
  for (int s = 0; s < n; s++) {
    const size_t bytes = a.region[s].width * sizeof(T);
    const size_t b0 = min(bytes, p0 * 16), b1 = min(bytes, (p0 + np) * 16);
    char *dst = uc + (size_t)s * a.slot_bytes;
    if (b1 > b0) copy_bytes(dst + b0, (const char *)a.send + a.region[s].in_offset * sizeof(T) + b0, b1 - b0,
                            threadIdx.x, blockDim.x);
    for (size_t k = max(b1, p0 * 16) + threadIdx.x; k < (p0 + np) * 16; k += blockDim.x) dst[k] = 0;
  }
  alias_fence();
  if (!sync.barrier()) return;
  alias_fence();
  const uint4 *mine = (const uint4 *)(a.pub[1]) + (size_t)me * a.slot_bytes / 16;
  const size_t bytes = a.region[me].width * sizeof(T);
  char *out = (char *)a.recv;
  const bool aligned = ((uintptr_t)out & 15) == 0;
  for (size_t k = p0 + threadIdx.x; k < p0 + np && k * 16 < bytes; k += blockDim.x) {
    const uint4 v = reduce_pack<T>(mine + k);
    if (aligned && (k + 1) * 16 <= bytes) {
      *(uint4 *)(out + k * 16) = v;
    } else { // the part's last pack, or an output off 16-byte boundaries
      const char *src = (const char *)&v;
      for (size_t j = 0; j < 16 && k * 16 + j < bytes; j++) out[k * 16 + j] = src[j];
    }
  }
  alias_fence();
  if (!sync.barrier()) return;
  sync.done();
}

}  // namespace gc

extern "C" int gc_kernel_allreduce_multimem(const gc_kargs_t *a, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
  switch (a->dtype) {
    case GC_FLOAT32: return cudaLaunchKernelEx(&cfg, gc::multimem_allreduce_kernel<float>, *a);
    case GC_FLOAT16: return cudaLaunchKernelEx(&cfg, gc::multimem_allreduce_kernel<__half>, *a);
    case GC_BFLOAT16: return cudaLaunchKernelEx(&cfg, gc::multimem_allreduce_kernel<__nv_bfloat16>, *a);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" int gc_kernel_reducescatter_multimem(const gc_kargs_t *a, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
  switch (a->dtype) {
    case GC_FLOAT32: return cudaLaunchKernelEx(&cfg, gc::multimem_reducescatter_kernel<float>, *a);
    case GC_FLOAT16: return cudaLaunchKernelEx(&cfg, gc::multimem_reducescatter_kernel<__half>, *a);
    case GC_BFLOAT16: return cudaLaunchKernelEx(&cfg, gc::multimem_reducescatter_kernel<__nv_bfloat16>, *a);
    default: return cudaErrorInvalidValue;
  }
}
