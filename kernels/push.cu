// push.cu — small collectives through the push areas: each rank writes what others need straight
// into their push area (the slot of its block, its rank and the parity of the block's epoch), one
// barrier, then every rank finishes from local memory. No copy-in, no closing barrier: a slot is
// written again only two epochs on, after a barrier that needs its reader to have finished.
#include "common.cuh"

namespace gc {

__device__ __forceinline__ unsigned char *slot(const gc_kpush_t *area, int par, int src) {
  return (unsigned char *)&area->data[par][blockIdx.x][src][threadIdx.x * 16];
}

// All-gather (every rank pushes its part) or broadcast (root pushes), `part` bytes per rank.
__global__ void GC_LAUNCH_BOUNDS push_gather_kernel(const gc_kargs_t a, int broadcast) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, par = sync.epoch & 1;
  const size_t es = dtype_size(a.dtype), part = a.count * es, u = global_thread();
  const bool active = u * 16 < part;
  if (active && (!broadcast || me == a.root)) {
    uint4 w = load_unit((const char *)a.send, part, u);
#pragma unroll
    for (int p = 0; p < GC_MAX_LOCAL_RANKS; p++)
      if (p < n) *(uint4 *)slot(a.peers.push[p], par, me) = w;
  }
  if (!sync.barrier()) return;
  if (active) {
    const gc_kpush_t *mine = a.peers.push[me];
    if (broadcast) {
      store_unit((char *)a.recv, part, u, *(const uint4 *)slot(mine, par, a.root));
    } else {  // every rank's pack loaded before any is stored: n loads in flight
      uint4 w[GC_MAX_LOCAL_RANKS];
#pragma unroll
      for (int q = 0; q < GC_MAX_LOCAL_RANKS; q++)
        if (q < n) w[q] = *(const uint4 *)slot(mine, par, q);
#pragma unroll
      for (int q = 0; q < GC_MAX_LOCAL_RANKS; q++)
        if (q < n) store_unit((char *)a.recv + q * part, part, u, w[q]);
    }
  }
  sync.done();
}

// Reduce-scatter of contiguous parts (region[q].width elements at region[q].in_offset of every
// rank's send): rank r pushes its piece of part q to rank q; each rank reduces its part locally.
template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS push_reducescatter_kernel(const gc_kargs_t a) {
  constexpr int E = 16 / sizeof(T);
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, par = sync.epoch & 1;
  const size_t u = global_thread();
#pragma unroll
  for (int q = 0; q < GC_MAX_LOCAL_RANKS; q++) {
    if (q >= n) break;
    const size_t len = a.region[q].width * sizeof(T);
    if (u * 16 < len)
      *(uint4 *)slot(a.peers.push[q], par, me) = load_unit((const char *)a.send + a.region[q].in_offset * sizeof(T), len, u);
  }
  if (!sync.barrier()) return;
  const size_t width = a.region[me].width, first = u * E;
  if (first < width) {
    A acc[E];
    reduce_local<T, A, OPK>(slot(a.peers.push[me], par, 0), GC_PUSH_BLOCK_BYTES, n, a.op, acc);
    const int valid = (int)min((size_t)E, width - first);
    const int granule = plain_granule<T, A>(a, (const T *)a.recv + first);
    if (valid == E && granule) store_at<T, A, true>(a, first, acc, a.recv, granule);
    else
      for (int e = 0; e < valid; e++) finish<T, A>(acc[e], first + e, a.ep, a.op, n, a.recv);
  }
  sync.done();
}

static dim3 push_grid(size_t bytes) { return dim3((unsigned)((bytes + GC_PUSH_BLOCK_BYTES - 1) / GC_PUSH_BLOCK_BYTES)); }

template <typename T, typename A, int OPK>
static cudaError_t launch_rs(const gc_kargs_t *a, size_t most, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launch_config(a, s, attr);
  cfg.gridDim = push_grid(most * sizeof(T));
  cfg.blockDim = dim3(GC_PUSH_THREADS);
  return cudaLaunchKernelEx(&cfg, push_reducescatter_kernel<T, A, OPK>, *a);
}

}  // namespace gc

extern "C" int gc_kernel_push_gather(const gc_kargs_t *a, int broadcast, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
  cfg.gridDim = gc::push_grid(a->count * gc::dtype_size(a->dtype));
  cfg.blockDim = dim3(GC_PUSH_THREADS);
  return cudaLaunchKernelEx(&cfg, gc::push_gather_kernel, *a, broadcast);
}

extern "C" int gc_kernel_push_reducescatter(const gc_kargs_t *a, cudaStream_t s) {
  size_t most = 0;
  for (int q = 0; q < a->peers.nranks; q++) most = a->region[q].width > most ? a->region[q].width : most;
  return gc::with_reduce_types(a->dtype, a->op, [&](auto t) {
    using R = decltype(t);
    return gc::launch_rs<typename R::T, typename R::A, R::OPK>(a, most, s);
  });
}
