// allreduce.cu — peer-to-peer all-reduce. Push (small): every rank writes its input into every
// peer's push area, one barrier, each rank reduces locally. One-shot: every rank reads all inputs
// and reduces everything. Two-shot: reduce-scatter of a 1/n slice, barrier, all-gather with the
// same thread-to-pack mapping.
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

// Reduces packs k and k + G (when it exists) with every load of both issued before the first
// use, then stores both: twice the bytes in flight of a one-pack loop.
template <typename T, typename A, int OPK, bool VEC>
__device__ __forceinline__ void reduce_two(const gc_kargs_t &a, size_t el0, size_t el1, bool has1, void *out,
                                           int granule) {
  constexpr int E = Pack<T, VEC>::E;
  A acc0[E], acc1[E];
  reduce_at<T, A, OPK, VEC>(a, el0, acc0);
  if (has1) reduce_at<T, A, OPK, VEC>(a, el1, acc1);
  store_at<T, A, VEC>(a, el0, acc0, out, granule);
  if (has1) store_at<T, A, VEC>(a, el1, acc1, out, granule);
}

template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS oneshot_writes_kernel(const gc_kargs_t a) {
  constexpr int E = 16 / sizeof(T);
  using P = Pack<T, true>;
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, b = blockIdx.x, par = sync.epoch & 1;
  const size_t first = global_thread() * E;  // this thread's pack: elements [first, first + E)
  const int valid = first < a.count ? (int)min((size_t)E, a.count - first) : 0;
  const size_t slot = threadIdx.x * 16;
  if (valid) {
    P v;
    const T *src = (const T *)a.send + first;
    if (valid == E && aligned16(src)) v.load(src);
    else
      for (int e = 0; e < E; e++) v.v[e] = e < valid ? src[e] : src[0];  // padding is never stored
#pragma unroll
    for (int p = 0; p < GC_MAX_LOCAL_RANKS; p++)
      if (p < n) *(uint4 *)&a.peers.push[p]->data[par][b][me][slot] = *(const uint4 *)v.v;
  }
  if (!sync.barrier()) return;  // release/acquire: every rank's pack is in our push area
  if (valid) {
    A acc[E];
    reduce_local<T, A, OPK>(&a.peers.push[me]->data[par][b][0][slot], GC_PUSH_BLOCK_BYTES, n, a.op, acc);
    const int granule = plain_granule<T, A>(a, (const T *)a.recv + first);
    if (valid == E && granule) {
      store_at<T, A, true>(a, first, acc, a.recv, granule);
    } else {
      for (int e = 0; e < valid; e++) finish<T, A>(acc[e], first + e, a.ep, a.op, n, a.recv);
    }
  }
  // No closing barrier: a peer writes this block's slot of our area again only two epochs on,
  // after a barrier that needs this block to have finished reading it.
  sync.done();
}

template <typename T, typename A, int OPK, bool VEC>
__global__ void GC_LAUNCH_BOUNDS oneshot_kernel(const gc_kargs_t a) {
  constexpr int E = Pack<T, VEC>::E;
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  if (!sync.barrier()) return;  // every input is in place on every rank
  const int granule = plain_granule<T, A>(a, a.recv);
  const size_t packs = a.count / E, G = grid_threads();
  for (size_t k = global_thread(); k < packs; k += 2 * G)
    reduce_two<T, A, OPK, VEC>(a, k * E, (k + G) * E, k + G < packs, a.recv, granule);
  if (VEC) reduce_tail<T, A, OPK>(a, packs * E);
  if (!sync.barrier()) return;  // no rank leaves while a peer may still read its input
  sync.done();
}

// Two-shot. Rank r owns packs [s0, s0 + sn) (an even split of the packs): it reduces them from
// every input into its publish area, then every rank gathers every owner's packs. The all-gather
// walks each slice with the same block/thread mapping the owner used, so the per-block barrier in
// between is enough.
template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS twoshot_kernel(const gc_kargs_t a) {
  constexpr int E = Pack<T, true>::E;
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank;
  const size_t packs = a.count / E, G = grid_threads();
  const size_t out_pack_bytes = (size_t)E * dtype_size(a.ep.out_dtype);
  if (!sync.barrier()) return;

  size_t s0, sn;
  slice_lines(packs, n, me, &s0, &sn);
  void *pub = a.pub[me];
  const int granule = plain_granule<T, A>(a, pub);
  for (size_t j = global_thread(); j < sn; j += 2 * G)
    reduce_two<T, A, OPK, true>(a, (s0 + j) * E, (s0 + j + G) * E, j + G < sn, pub, granule);
  // The tail (< E elements) is reduced by every rank, but stored only after the barrier: in place
  // on symmetric buffers, our output is a peer's input until then.
  const size_t ti = packs * E + global_thread();
  A tail = A();
  if (ti < a.count) {
    tail = to_acc<A>(((const T *)a.in[0])[ti]);
    for (int p = 1; p < n; p++) tail = combine<A, OPK>(tail, to_acc<A>(((const T *)a.in[p])[ti]), a.op);
  }
  if (!sync.barrier()) return;  // every slice is published
  if (ti < a.count) finish<T, A>(tail, ti, a.ep, a.op, n, a.recv);

  // Gather: the j-th pack of every owner's slice is loaded before any is stored, so n loads
  // from n different GPUs are in flight per thread.
  size_t q0[GC_MAX_LOCAL_RANKS], qn[GC_MAX_LOCAL_RANKS];
  for (int q = 0; q < n; q++) slice_lines(packs, n, q, &q0[q], &qn[q]);
  if (out_pack_bytes == 16 && aligned16(a.recv)) {
    for (size_t j = global_thread(); j < qn[0]; j += G) {
      uint4 v[GC_MAX_LOCAL_RANKS];
#pragma unroll
      for (int q = 0; q < GC_MAX_LOCAL_RANKS; q++)
        if (q < n && j < qn[q]) v[q] = ((const uint4 *)a.pub[q])[q0[q] + j];
#pragma unroll
      for (int q = 0; q < GC_MAX_LOCAL_RANKS; q++)
        if (q < n && j < qn[q] && (const char *)a.pub[q] != (const char *)a.recv) ((uint4 *)a.recv)[q0[q] + j] = v[q];
    }
  } else {
    for (int q = 0; q < n; q++) {
      const char *src = (const char *)a.pub[q] + q0[q] * out_pack_bytes;
      char *dst = (char *)a.recv + q0[q] * out_pack_bytes;
      if (src == dst) continue;  // the publish area is our own output
      for (size_t j = global_thread(); j < qn[q]; j += G)
        for (size_t b = 0; b < out_pack_bytes; b++) dst[j * out_pack_bytes + b] = src[j * out_pack_bytes + b];
    }
  }
  if (!sync.barrier()) return;  // peers are done with our input and publish area
  sync.done();
}

// Slice q of a chunk of `packs` packs, laid out as in a chunk of `full` packs and cut at the
// chunk's end: every pack keeps its place, and so its thread, from chunk to chunk.
__device__ __forceinline__ void chunk_slice(size_t full, size_t packs, int n, int q, size_t *p0, size_t *pn) {
  slice_lines(full, n, q, p0, pn);
  const size_t end = min(*p0 + *pn, packs);
  *p0 = min(*p0, packs);
  *pn = end - *p0;
}

// Two-shot by writes. a.in[r] is rank r's inbox (staging), a.pub[r] where rank r's output is
// assembled (its symmetric recv, or its staging); a.send this rank's input. The input goes in
// chunks of a.chunk elements (0: one), each chunk's inbox rows and pub fitting staging. Packs are
// 16 bytes of input, the last one partial; in a chunk rank q owns the packs of slice q
// (chunk_slice), and inbox rows hold the largest slice. Per chunk:
//   1. every rank writes slice q of its input into rank q's inbox, row `rank`; a rank whose pub
//      is not its output copies the previous chunk's other slices from its pub there (local);
//   2. barrier; rank q reduces its inbox rows in rank order and writes the result into every
//      other rank's pub, at the slice's place, and into its own output;
//   3. barrier.
// After the last chunk, its copy out of the pub. Every pack of a chunk has the same thread on
// every rank and in every chunk, and the barriers are per block: so a pub or inbox place is
// written again (next chunk) only after the block that reads it has passed the barrier that
// follows its read (packs spread over blocks would break this). No closing barrier: peers
// write our inbox and pub again only after the next call's first barrier, which we reach only
// when done with this call.
// put_bytes (common.cuh) stores to destinations at any offset.
template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS twoshot_writes_kernel(const gc_kargs_t a) {
  constexpr int E = 16 / sizeof(T);
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank;
  const size_t es = sizeof(T), os = dtype_size(a.ep.out_dtype);
  const size_t chunk = a.chunk && a.chunk < a.count ? a.chunk : a.count, full = (chunk * es + 15) / 16;
  const size_t lines = (full + GC_LINE_PACKS - 1) / GC_LINE_PACKS, row = (lines + n - 1) / n * GC_LINE_PACKS;
  const size_t G = grid_threads(), gt = global_thread();
  const bool pub_is_out = a.pub[me] == a.recv;  // symmetric outputs: pubs advance with the chunk
  const bool plain = is_plain<T, A>(a, a.pub[me]);
  unsigned char *const recv = (unsigned char *)a.recv;

  // The other slices of the chunk at c0 (cn elements), from our pub into our output.
  auto copy_out = [&](size_t c0, size_t cn) {
    const size_t packs = (cn * es + 15) / 16;
    for (int q = 0; q < n; q++) {
      if (q == me) continue;
      size_t q0, qn;
      chunk_slice(full, packs, n, q, &q0, &qn);
      for (size_t j = gt; j < qn; j += G) {
        const size_t first = (q0 + j) * E;
        put_bytes(recv + (c0 + first) * os, (const unsigned char *)a.pub[me] + first * os,
                  min((size_t)E, cn - first) * os);
      }
    }
  };

  size_t prev0 = 0, prevn = 0;
  for (size_t c0 = 0; c0 < a.count; c0 += chunk) {
    const size_t cn = min(chunk, a.count - c0), in_bytes = cn * es, packs = (in_bytes + 15) / 16;
    const char *send = (const char *)a.send + c0 * es;
    // 1. scatter our input by writes: slice q goes to rank q's inbox, row `me`. Each rank starts
    // with the next rank, so no GPU takes every writer at once.
    for (int i = 1; i <= n; i++) {
      const int q = (me + i) % n;
      size_t q0, qn;
      chunk_slice(full, packs, n, q, &q0, &qn);
      unsigned char *inbox = (unsigned char *)a.in[q] + (size_t)me * row * 16;
      for (size_t j = gt; j < qn; j += G) *(uint4 *)(inbox + j * 16) = load_unit(send, in_bytes, q0 + j);
    }
    if (prevn && !pub_is_out) copy_out(prev0, prevn);  // local, while our writes cross NVLink
    if (!sync.barrier()) return;

    // 2. reduce our slice from the inbox (local), write the result to every rank: ours straight
    // into our output (where our pub is staging, that saves copying our slice out of it).
    size_t s0, sn;
    chunk_slice(full, packs, n, me, &s0, &sn);
    const unsigned char *inbox = (const unsigned char *)a.in[me];
    const size_t pub_at = pub_is_out ? c0 : 0;
    for (size_t j = gt; j < sn; j += G) {
      A acc[E];
      reduce_local<T, A, OPK>(inbox + j * 16, row * 16, n, a.op, acc);
      const size_t first = (s0 + j) * E;
      alignas(16) unsigned char out[64];
      const size_t bytes = pack_results<T, A>(a, acc, c0 + first, (int)min((size_t)E, cn - first), plain, out);
#pragma unroll
      for (int p = 0; p < GC_MAX_LOCAL_RANKS; p++)
        if (p < n)
          put_bytes(p == me ? recv + (c0 + first) * os : (unsigned char *)a.pub[p] + (pub_at + first) * os, out, bytes);
    }
    if (!sync.barrier()) return;
    prev0 = c0;
    prevn = cn;
  }
  // 3. the last chunk's other slices, from our pub into our output (local).
  if (prevn && !pub_is_out) copy_out(prev0, prevn);
  sync.done();
}

template <typename T, typename A, int OPK>
static cudaError_t launch(const gc_kargs_t *a, gc_kalgo_t algo, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launch_config(a, s, attr);
  if (algo == GC_KALGO_ONESHOT_WRITES) {
    // One pack per thread, GC_PUSH_BLOCK_BYTES per block: the grid follows from the size alone.
    size_t packs = (a->count * sizeof(T) + 15) / 16;
    cfg.gridDim = dim3((unsigned)((packs + GC_PUSH_THREADS - 1) / GC_PUSH_THREADS));
    cfg.blockDim = dim3(GC_PUSH_THREADS);
    return cudaLaunchKernelEx(&cfg, oneshot_writes_kernel<T, A, OPK>, *a);
  }
  if (algo == GC_KALGO_TWOSHOT_WRITES) return cudaLaunchKernelEx(&cfg, twoshot_writes_kernel<T, A, OPK>, *a);
  // Vector packs need 16-byte aligned inputs (shared by all ranks: staging or symmetric at the
  // same offset) and a publish area alike; the local output may be unaligned. p2p_allreduce asks
  // for the two-shot only so; anything else takes the one-shot kernel here as well.
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
  return gc::with_reduce_types(a->dtype, a->op, [&](auto t) {
    using R = decltype(t);
    return gc::launch<typename R::T, typename R::A, R::OPK>(a, algo, s);
  });
}
