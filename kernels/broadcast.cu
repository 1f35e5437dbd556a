// broadcast.cu — peer-to-peer broadcast. One stage: every rank pulls all of root's data. Two
// stages (3+ GPUs, large data): rank r pulls slice r of root's data into its publish area, barrier,
// then every rank gathers the slices from their holders, so root's links carry the data once.
#include "common.cuh"

namespace gc {

// Units of the two-stage copy are 16 bytes when every shared pointer allows it, else bytes; the
// choice is the same on every rank, and so is the unit-to-thread mapping of both stages.
template <bool VEC>
__device__ __forceinline__ void copy_units(char *dst, const char *src, size_t u0, size_t un, bool dst_vec) {
  for (size_t j = global_thread(); j < un; j += grid_threads()) {
    size_t u = u0 + j;
    if constexpr (VEC) {
      uint4 x = ((const uint4 *)src)[u];
      if (dst_vec) ((uint4 *)dst)[u] = x;
      else
        for (int b = 0; b < 16; b++) dst[u * 16 + b] = ((const char *)&x)[b];
    } else {
      dst[u] = src[u];
    }
  }
}

__device__ __forceinline__ void slice_of(size_t units, int n, int r, size_t *s0, size_t *sn) {
  size_t base = units / n, extra = units % n;
  *s0 = r * base + (r < (int)extra ? r : extra);
  *sn = base + (r < (int)extra ? 1 : 0);
}

template <bool VEC>
__global__ void GC_LAUNCH_BOUNDS broadcast_kernel(const gc_kargs_t a, int one_stage) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, root = a.root;
  const size_t bytes = a.count * dtype_size(a.dtype);
  const char *src = (const char *)a.in[root];
  char *recv = (char *)a.recv;
  if (!sync.barrier()) return;  // root's data is in place
  if (one_stage || n <= 2) {
    copy_bytes(recv, src, bytes);
  } else {
    const size_t unit = VEC ? 16 : 1, units = bytes / unit;
    size_t s0, sn;
    slice_of(units, n, me, &s0, &sn);
    if ((char *)a.pub[me] != src) copy_units<VEC>((char *)a.pub[me], src, s0, sn, true);
    if (!sync.barrier()) return;  // every slice is published
    if (me == root) {
      copy_bytes(recv, src, bytes);  // root has it all; at most a local copy
    } else {
      const bool dst_vec = aligned16(recv);
      for (int step = 0; step < n; step++) {
        int q = (me + step) % n;
        size_t q0, qn;
        slice_of(units, n, q, &q0, &qn);
        if ((char *)a.pub[q] + q0 * unit != recv + q0 * unit) copy_units<VEC>(recv, (const char *)a.pub[q], q0, qn, dst_vec);
      }
      for (size_t k = units * unit + global_thread(); k < bytes; k += grid_threads()) recv[k] = src[k];
    }
  }
  if (!sync.barrier()) return;  // nobody still reads root's data or our publish area
  sync.done();
}

}  // namespace gc

extern "C" int gc_kernel_broadcast(const gc_kargs_t *a, int one_stage, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
  bool vec = gc::aligned16(a->in[a->root]);
  for (int p = 0; p < a->peers.nranks; p++) vec &= gc::aligned16(a->pub[p]);
  if (vec) return cudaLaunchKernelEx(&cfg, gc::broadcast_kernel<true>, *a, one_stage);
  return cudaLaunchKernelEx(&cfg, gc::broadcast_kernel<false>, *a, one_stage);
}
