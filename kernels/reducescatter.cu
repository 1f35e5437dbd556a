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
  // A 1-D region's packs start at its first input element on a 128-byte line (allocations are
  // line-aligned, and so is every peer's input at the same offset): its input offset may be no
  // whole number of packs or lines (a count that is no multiple of 128 bytes: parts on 3 GPUs,
  // say). Element loads from every peer for parts off 16 bytes would be slow (3 GPUs,
  // 1 GB 6010 us against NCCL's 2904); parts off a line, a warp's 512 bytes over five lines of each
  // peer: 3 x H200, 1.47 NVLink bytes per byte read and 1 GB in 2562.6 us,
  // 1.26 and 2158.7 us line-aligned. The elements before and after the packs go one by
  // one.
  constexpr size_t LINE = VEC ? 128 / sizeof(T) : 1;
  const size_t head = R.rows == 1 ? min((LINE - R.in_offset % LINE) % LINE, R.width) : 0;
  const size_t row_packs = (R.width - head) / E, packs = R.rows * row_packs;
  const int granule = plain_granule<T, A>(a, (const T *)a.recv + R.out_offset + head);
  // Two packs per step, all their loads issued before the first use. The output (and the
  // epilogue's add vector) is the region packed row after row.
  const size_t G = grid_threads();
  for (size_t k = global_thread(); k < packs; k += 2 * G) {
    const bool has1 = k + G < packs;
    size_t i0 = k / row_packs, j0 = head + (k - i0 * row_packs) * E;
    size_t i1 = (k + G) / row_packs, j1 = head + (k + G - i1 * row_packs) * E;
    A acc0[E], acc1[E];
    reduce_at<T, A, OPK, VEC>(a, R.in_offset + i0 * R.in_ld + j0, acc0);
    if (has1) reduce_at<T, A, OPK, VEC>(a, R.in_offset + i1 * R.in_ld + j1, acc1);
    store_at<T, A, VEC>(a, R.out_offset + i0 * R.width + j0, acc0, a.recv, granule);
    if (has1) store_at<T, A, VEC>(a, R.out_offset + i1 * R.width + j1, acc1, a.recv, granule);
  }
  if (VEC && R.rows == 1) {
    const size_t tail0 = head + row_packs * E, loose = head + (R.width - tail0);
    for (size_t i = global_thread(); i < loose; i += G) {
      const size_t j = i < head ? i : tail0 + (i - head);
      A acc[1];
      reduce_at<T, A, OPK, false>(a, R.in_offset + j, acc);
      store_at<T, A, false>(a, R.out_offset + j, acc, a.recv, 0);
    }
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
  // 16-byte loads need every input aligned; a 2-D region also whole packs in every row.
  bool vec = true;
  for (int p = 0; p < a->peers.nranks; p++) vec &= aligned16(a->in[p]);
  if (R.rows > 1) vec &= R.width % E == 0 && R.in_offset % E == 0 && R.in_ld % E == 0 && R.out_offset % E == 0;
  if (vec) return cudaLaunchKernelEx(&cfg, reducescatter_kernel<T, A, OPK, true>, *a);
  return cudaLaunchKernelEx(&cfg, reducescatter_kernel<T, A, OPK, false>, *a);
}

}  // namespace gc

extern "C" int gc_kernel_reducescatter(const gc_kargs_t *a, cudaStream_t s) {
  return gc::with_reduce_types(a->dtype, a->op, [&](auto t) {
    using R = decltype(t);
    return gc::launch<typename R::T, typename R::A, R::OPK>(a, s);
  });
}
