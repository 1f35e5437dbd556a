// allgather.cu — peer-to-peer all-gather: every rank copies every rank's part into its output.
#include "common.cuh"

namespace gc {

__global__ void GC_LAUNCH_BOUNDS allgather_kernel(const gc_kargs_t a) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  if (!sync.barrier()) return;  // every part is in place on every rank
  const int n = a.peers.nranks;
  const size_t es = dtype_size(a.dtype);
  auto src = [&](int q) { return (const char *)a.in[q] + a.region[q].in_offset * es; };
  auto dst = [&](int q) { return (char *)a.recv + a.region[q].out_offset * es; };
  auto bytes = [&](int q) { return a.region[q].width * es; };
  auto moves = [&](int q) { return src(q) != dst(q); };  // in place, our own part stays
  bool vec = true;
  size_t most = 0;  // units of 16 bytes in the longest part
  for (int q = 0; q < n; q++) {
    vec &= aligned16(src(q)) && aligned16(dst(q));
    most = max(most, bytes(q) / 16);
  }
  const size_t G = grid_threads();
  const int me = a.peers.rank;
  if (vec && most > G) {
    // Several units of a part per thread: unit j of every part is loaded before any is stored,
    // n loads in flight per thread, the i-th from rank me + 1 + i so the ranks read different
    // GPUs at any moment. Then the parts' last bytes (under 16). With one unit per part and
    // thread, one part after another was faster (4 GPUs, 4 MB: 17.1-17.3 against 19.0 us; 16 MB,
    // four units: 48.4-48.8 against 49.7-50.2; run 43).
    for (size_t j = global_thread(); j < most; j += G) {
      uint4 v[GC_MAX_LOCAL_RANKS];
#pragma unroll
      for (int i = 0; i < GC_MAX_LOCAL_RANKS; i++) {
        const int q = (me + 1 + i) % n;
        if (i < n && j < bytes(q) / 16 && moves(q)) v[i] = ((const uint4 *)src(q))[j];
      }
#pragma unroll
      for (int i = 0; i < GC_MAX_LOCAL_RANKS; i++) {
        const int q = (me + 1 + i) % n;
        if (i < n && j < bytes(q) / 16 && moves(q)) ((uint4 *)dst(q))[j] = v[i];
      }
    }
    for (int q = 0; q < n; q++)
      if (moves(q))
        for (size_t b = bytes(q) / 16 * 16 + global_thread(); b < bytes(q); b += G) dst(q)[b] = src(q)[b];
  } else {
    // One part after another, starting with the next rank's so the ranks read different peers.
    for (int step = 0; step < n; step++) {
      const int q = (me + 1 + step) % n;
      copy_bytes(dst(q), src(q), bytes(q));
    }
  }
  if (!sync.barrier()) return;  // peers are done reading our part
  sync.done();
}

}  // namespace gc

extern "C" int gc_kernel_allgather(const gc_kargs_t *a, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
  return cudaLaunchKernelEx(&cfg, gc::allgather_kernel, *a);
}
