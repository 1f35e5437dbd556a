// reducescatter.cu — peer-to-peer reduce-scatter: each rank reduces its own region (a 1-D part,
// a block of rows, or a block of columns of every row) from every rank's input.
#include "common.cuh"

namespace gc {

template <typename T, typename A, int OPK, bool VEC>
__global__ void GC_LAUNCH_BOUNDS reducescatter_kernel(const gc_kargs_t a) {
  constexpr int E = Pack<T, VEC>::E;
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  if (!sync.barrier()) return;  // every input is in place on every rank
  const gc_kregion_t R = a.region[a.peers.rank];
  const size_t row_packs = R.width / E, packs = R.rows * row_packs;
  const bool plain = is_plain<T, A>(a, a.recv);
  // Two packs per step, all their loads issued before the first use. The output (and the
  // epilogue's add vector) is the region packed row after row.
  const size_t G = grid_threads();
  for (size_t k = global_thread(); k < packs; k += 2 * G) {
    const bool has1 = k + G < packs;
    size_t i0 = k / row_packs, j0 = (k - i0 * row_packs) * E;
    size_t i1 = (k + G) / row_packs, j1 = (k + G - i1 * row_packs) * E;
    A acc0[E], acc1[E];
    reduce_at<T, A, OPK, VEC>(a, R.in_offset + i0 * R.in_ld + j0, acc0);
    if (has1) reduce_at<T, A, OPK, VEC>(a, R.in_offset + i1 * R.in_ld + j1, acc1);
    store_at<T, A, VEC>(a, R.out_offset + i0 * R.width + j0, acc0, a.recv, plain);
    if (has1) store_at<T, A, VEC>(a, R.out_offset + i1 * R.width + j1, acc1, a.recv, plain);
  }
  // A 1-D region may end in a partial pack: its last elements one by one.
  if (VEC && R.rows == 1)
    for (size_t j = row_packs * E + global_thread(); j < R.width; j += G) {
      A acc[1];
      reduce_at<T, A, OPK, false>(a, R.in_offset + j, acc);
      store_at<T, A, false>(a, R.out_offset + j, acc, a.recv, false);
    }
  if (!sync.barrier()) return;  // no rank leaves while a peer may still read its input
  sync.done();
}

// A 1-D part whose input offset is not a whole number of packs (a count that is no multiple of 16
// bytes: parts on 3 GPUs, say) while every input is aligned: its first elements one by one, then
// 16-byte loads of every input, each result stored element by element (local stores). Before, the
// whole part took element loads from the peers: run 52, 3 GPUs, 1 GB 6010 us against NCCL's 2904.
template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS reducescatter_shifted_kernel(const gc_kargs_t a) {
  constexpr int E = 16 / sizeof(T);
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  if (!sync.barrier()) return;  // every input is in place on every rank
  const gc_kregion_t R = a.region[a.peers.rank];
  const int n = a.peers.nranks;
  const size_t head = min((E - R.in_offset % E) % E, R.width), packs = (R.width - head) / E;
  const size_t G = grid_threads();
  auto store_pack = [&](size_t j, const A (&acc)[E]) {
#pragma unroll
    for (int e = 0; e < E; e++) finish<T, A>(acc[e], R.out_offset + j + e, a.ep, a.op, n, a.recv);
  };
  for (size_t k = global_thread(); k < packs; k += 2 * G) {
    const bool has1 = k + G < packs;
    const size_t j0 = head + k * E, j1 = head + (k + G) * E;
    A acc0[E], acc1[E];
    reduce_at<T, A, OPK, true>(a, R.in_offset + j0, acc0);
    if (has1) reduce_at<T, A, OPK, true>(a, R.in_offset + j1, acc1);
    store_pack(j0, acc0);
    if (has1) store_pack(j1, acc1);
  }
  // The elements before and after the packs (fewer than 2 E).
  const size_t tail0 = head + packs * E, loose = head + (R.width - tail0);
  for (size_t i = global_thread(); i < loose; i += G) {
    const size_t j = i < head ? i : tail0 + (i - head);
    A acc[1];
    reduce_at<T, A, OPK, false>(a, R.in_offset + j, acc);
    finish<T, A>(acc[0], R.out_offset + j, a.ep, a.op, n, a.recv);
  }
  if (!sync.barrier()) return;  // no rank leaves while a peer may still read its input
  sync.done();
}

template <typename T, typename A, int OPK>
static cudaError_t launch(const gc_kargs_t *a, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launch_config(a, s, attr);
  constexpr size_t E = 16 / sizeof(T);
  const gc_kregion_t &R = a->region[a->peers.rank];
  // The whole grid takes the same path on this rank; ranks may differ (nothing is published).
  bool vec = (R.width % E == 0 || R.rows == 1) && R.in_offset % E == 0 && (R.rows == 1 || R.in_ld % E == 0) && R.out_offset % E == 0;
  for (int p = 0; p < a->peers.nranks; p++) vec &= aligned16(a->in[p]);
  if (vec) return cudaLaunchKernelEx(&cfg, reducescatter_kernel<T, A, OPK, true>, *a);
  bool inputs_aligned = true;
  for (int p = 0; p < a->peers.nranks; p++) inputs_aligned &= aligned16(a->in[p]);
  if (R.rows == 1 && inputs_aligned) return cudaLaunchKernelEx(&cfg, reducescatter_shifted_kernel<T, A, OPK>, *a);
  return cudaLaunchKernelEx(&cfg, reducescatter_kernel<T, A, OPK, false>, *a);
}

}  // namespace gc

extern "C" int gc_kernel_reducescatter(const gc_kargs_t *a, cudaStream_t s) {
  return gc::with_reduce_types(a->dtype, a->op, [&](auto t) {
    using R = decltype(t);
    return gc::launch<typename R::T, typename R::A, R::OPK>(a, s);
  });
}
