// allreduce.cu — peer-to-peer all-reduce: one-shot (every rank reduces everything) and two-shot
// (reduce-scatter of a 1/n slice, barrier, all-gather with the same thread-to-pack mapping).
#include <type_traits>

#include "common.cuh"

namespace gc {

// Elements past the last whole pack: every rank reduces them itself, straight from the inputs.
template <typename T, typename A, int OPK>
__device__ __forceinline__ void reduce_tail(const gc_kargs_t &a, size_t first) {
  for (size_t i = first + global_thread(); i < a.count; i += grid_threads()) {
    A acc = to_acc<A>(((const T *)a.in[0])[i]);
    for (int p = 1; p < a.peers.nranks; p++) acc = combine<A, OPK>(acc, to_acc<A>(((const T *)a.in[p])[i]), a.op);
    finish<T, A>(acc, i, a.ep, a.op, a.peers.nranks, a.recv);
  }
}

template <typename T, typename A, int OPK, bool VEC>
__global__ void GC_LAUNCH_BOUNDS oneshot_kernel(const gc_kargs_t a) {
  constexpr int E = Pack<T, VEC>::E;
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  if (!sync.barrier()) return;  // every input is in place on every rank
  const bool plain = is_plain<T, A>(a, a.recv);
  const size_t packs = a.count / E;
  for (size_t k = global_thread(); k < packs; k += grid_threads()) {
    A acc[E];
    reduce_at<T, A, OPK, VEC>(a, k * E, acc);
    store_at<T, A, VEC>(a, k * E, acc, a.recv, plain);
  }
  if (VEC) reduce_tail<T, A, OPK>(a, packs * E);
  if (!sync.barrier()) return;  // no rank leaves while a peer may still read its input
  sync.done();
}

// Two-shot. Rank r owns packs [s0, s0 + sn) (gc_partition of the packs): it reduces them from
// every input into its publish area, then every rank gathers every owner's packs. The all-gather
// walks each slice with the same block/thread mapping the owner used, so the per-block barrier in
// between is enough.
__device__ __forceinline__ void slice_of(size_t packs, int n, int r, size_t *s0, size_t *sn) {
  size_t base = packs / n, extra = packs % n;
  *s0 = r * base + (r < (int)extra ? r : extra);
  *sn = base + (r < (int)extra ? 1 : 0);
}

template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS twoshot_kernel(const gc_kargs_t a) {
  constexpr int E = Pack<T, true>::E;
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank;
  const size_t packs = a.count / E;
  const size_t out_pack_bytes = (size_t)E * dtype_size(a.ep.out_dtype);
  if (!sync.barrier()) return;

  size_t s0, sn;
  slice_of(packs, n, me, &s0, &sn);
  void *pub = a.pub[me];
  const bool plain = is_plain<T, A>(a, pub);
  for (size_t j = global_thread(); j < sn; j += grid_threads()) {
    A acc[E];
    reduce_at<T, A, OPK, true>(a, (s0 + j) * E, acc);
    store_at<T, A, true>(a, (s0 + j) * E, acc, pub, plain);
  }
  reduce_tail<T, A, OPK>(a, packs * E);
  if (!sync.barrier()) return;  // every slice is published

  const bool vec_out = aligned16(a.recv) && out_pack_bytes == 16;
  for (int q = 0; q < n; q++) {
    size_t q0, qn;
    slice_of(packs, n, q, &q0, &qn);
    const char *src = (const char *)a.pub[q] + q0 * out_pack_bytes;
    char *dst = (char *)a.recv + q0 * out_pack_bytes;
    if (src == dst) continue;  // the publish area is our own output
    for (size_t j = global_thread(); j < qn; j += grid_threads()) {
      if (vec_out) {
        ((uint4 *)dst)[j] = ((const uint4 *)src)[j];
      } else {
        for (size_t b = 0; b < out_pack_bytes; b++) dst[j * out_pack_bytes + b] = src[j * out_pack_bytes + b];
      }
    }
  }
  if (!sync.barrier()) return;  // peers are done with our input and publish area
  sync.done();
}

template <typename T, typename A, int OPK>
static cudaError_t launch(const gc_kargs_t *a, gc_kalgo_t algo, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launch_config(a, s, attr);
  // Vector packs need 16-byte aligned inputs (shared by all ranks: staging or symmetric at the
  // same offset) and a publish area alike; the local output may be unaligned.
  bool shared_aligned = true;
  for (int p = 0; p < a->peers.nranks; p++) shared_aligned &= aligned16(a->in[p]);
  if (algo == GC_KALGO_TWOSHOT) {
    for (int p = 0; p < a->peers.nranks; p++) shared_aligned &= aligned16(a->pub[p]);
    if (shared_aligned) return cudaLaunchKernelEx(&cfg, twoshot_kernel<T, A, OPK>, *a);
  }
  bool local_aligned = aligned16(a->recv) && (!a->ep.add || aligned16(a->ep.add));
  if (shared_aligned && local_aligned) return cudaLaunchKernelEx(&cfg, oneshot_kernel<T, A, OPK, true>, *a);
  return cudaLaunchKernelEx(&cfg, oneshot_kernel<T, A, OPK, false>, *a);
}

}  // namespace gc

extern "C" int gc_kernel_allreduce(const gc_kargs_t *a, gc_kalgo_t algo, cudaStream_t s) {
  bool sum = a->op == GC_SUM;
  switch (a->dtype) {
#define GC__CASE(code, T, A) \
  case code: return sum ? gc::launch<T, A, gc::OPK_SUM>(a, algo, s) : gc::launch<T, A, gc::OPK_ANY>(a, algo, s);
    GC_REDUCE_DTYPES(GC__CASE)
#undef GC__CASE
  }
  return cudaErrorInvalidValue;
}
