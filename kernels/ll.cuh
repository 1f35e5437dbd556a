// ll.cuh — what the barrier-free (LL) kernels share (ll.cu has the protocol): the all-ones
// sentinel, loads that see peers' stores, taking n rows' words once all have arrived, and the
// call's generation and its end.
#pragma once

#include "common.cuh"

namespace gc {

constexpr uint32_t ALL_ONES = 0xFFFFFFFFu;

// A volatile load sees peers' stores as they land.
__device__ __forceinline__ uint4 ll_load(const unsigned char *p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Whether 32-bit word w holds no all-ones element of es bytes.
__device__ __forceinline__ bool word_arrived(uint32_t w, int es) {
  if (es == 4) return w != ALL_ONES;
  if (es == 2) return (w & 0xFFFFu) != 0xFFFFu && (w >> 16) != 0xFFFFu;
  return __vcmpeq4(w, ALL_ONES) == 0;
}

// The same word with every all-ones element made another NaN (its top bit cleared).
__device__ __forceinline__ uint32_t word_canonical(uint32_t w, int es) {
  if (es == 4) return w == ALL_ONES ? 0x7FFFFFFFu : w;
  if (es == 2) {
    if ((w & 0xFFFFu) == 0xFFFFu) w &= 0xFFFF7FFFu;
    if ((w >> 16) == 0xFFFFu) w &= 0x7FFFFFFFu;
    return w;
  }
  return w & ~(__vcmpeq4(w, ALL_ONES) & 0x80808080u);
}

__device__ __forceinline__ bool ll_arrived(const uint4 &v, int es) {
  return word_arrived(v.x, es) && word_arrived(v.y, es) && word_arrived(v.z, es) && word_arrived(v.w, es);
}

__device__ __forceinline__ uint4 ll_canonical(uint4 v, int es) {
  return make_uint4(word_canonical(v.x, es), word_canonical(v.y, es), word_canonical(v.z, es),
                    word_canonical(v.w, es));
}

// Waits for the n words at base, base + stride, ... (elements of es bytes), then writes all-ones
// back over them. False once the Deadline expires.
__device__ __forceinline__ bool ll_take(unsigned char *base, size_t stride, int n, int es,
                                        uint4 (&v)[GC_MAX_LOCAL_RANKS], Deadline &d, const gc_kpeers_t &P) {
  unsigned pending = (1u << n) - 1;
  while (true) {
#pragma unroll
    for (int s = 0; s < GC_MAX_LOCAL_RANKS; s++)
      if (pending >> s & 1u) v[s] = ll_load(base + s * stride);
#pragma unroll
    for (int s = 0; s < GC_MAX_LOCAL_RANKS; s++)
      if ((pending >> s & 1u) && ll_arrived(v[s], es)) pending &= ~(1u << s);
    if (!pending) break;
    if (d.expired(P)) return false;
  }
  const uint4 clear = make_uint4(ALL_ONES, ALL_ONES, ALL_ONES, ALL_ONES);
#pragma unroll
  for (int s = 0; s < GC_MAX_LOCAL_RANKS; s++)
    if (s < n) *(uint4 *)(base + s * stride) = clear;
  return true;
}

// This call's number (read at entry, before any block can advance it) and its generation's
// offset in every rank's LL area.
struct LLCall {
  uint32_t call;
  size_t gen;
  __device__ explicit LLCall(const gc_kpeers_t &P)
      : call(*(volatile uint32_t *)&P.sig[P.rank]->ll_call), gen((size_t)(call % GC_LL_GENS) * GC_LL_GEN_BYTES) {}
};

// Call numbers run from 0 to LL_CALL_WRAP - 1 and start again at 0: 2^32 is no multiple of
// GC_LL_GENS, so a plain 32-bit count would give calls 0xFFFFFFFF and 0 the same generation (the
// second would write into areas its peers had not read yet).
constexpr uint32_t LL_CALL_WRAP = (uint32_t)((1ull << 32) / GC_LL_GENS * GC_LL_GENS);

// The last block of the call to finish moves the communicator to the next generation; a block
// that timed out leaves it (the communicator has failed). A broadcast's last block first waits
// until every rank has started this call (see the top of this file).
__device__ __forceinline__ void ll_finish(const gc_kpeers_t &P, uint32_t call, bool failed, bool wait_started = false) {
  if (__syncthreads_or(failed) || threadIdx.x != 0) return;
  gc_ksignals_t *sig = P.sig[P.rank];
  __threadfence();
  if (atomicAdd(&sig->ll_arrived, 1u) != gridDim.x - 1) return;
  Deadline d;
  for (int q = 0; wait_started && q < P.nranks; q++) {
    if (q == P.rank) continue;
    while ((int32_t)(ld_acquire_sys(&sig->ll_started[q]) - (call + 1)) < 0)
      if (d.expired(P)) return;
  }
  sig->ll_arrived = 0;
  sig->ll_call = call + 1 == LL_CALL_WRAP ? 0 : call + 1;
}

}  // namespace gc
