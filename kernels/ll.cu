// ll.cu — the barrier-free ("LL", low-latency) one-shot collectives for float32, float16,
// bfloat16 (and, where nothing is reduced, fp8). No flags, no barrier: the data says what has
// arrived. Every rank's LL area holds all-ones wherever nothing has arrived (a NaN in each of
// those types); a sender replaces that one bit pattern in its data by another NaN and writes
// 16-byte words into peers' areas; a reader polls its own area until no element of a word is
// all-ones, then writes all-ones back over what it read. Elements are at most 4 bytes, so none
// can be seen half-written.
// Calls rotate through GC_LL_GENS generations of the area (sig->ll_call % GC_LL_GENS, advanced by
// the last block to finish). A rank finishes an LL call only once every rank has started it: the
// reducing calls and the all-gather need every rank's data; a broadcast, whose root needs
// nobody's, waits at its end for every rank's "started" word (ll_started; without it the root runs
// calls ahead and overwrites generations not yet read). So a rank that starts call c knows
// every rank finished call c - 2, and generation c % GC_LL_GENS was last read in call c - 3.
// A generation holds rows of 16-byte packs:
//   all-reduce      every rank writes its input into row `me` of every rank's area, then reduces
//                   its n rows in rank order 0..n-1;
//   reduce-scatter  every rank writes part q of its input into row `me` of rank q's area; rank q
//                   reduces its n rows;
//   all-gather      every rank writes its part into row `me` of every area and copies the n rows
//                   out;
//   broadcast       one row: root writes it into every other area, or (relay) each 32-pack run
//                   into one owner's, which writes it on to the others.
// The same thread handles pack k when writing and when reading, so in place is safe.
#include "ll.cuh"

namespace gc {

// The second half of both reducing kernels: pack k of this rank's n rows, reduced in rank order
// and stored as elements [k * E, k * E + E) of a.recv (width elements in all) by the thread that
// wrote pack k of every part. False once a wait times out. Granules are constants (a run-time one
// made this loop spill). SPLIT: an output 4 or 8 bytes off a 16-byte boundary (a reduce-scatter
// part in place on 3 GPUs, say) takes split stores, not the epilogue's element stores, which are
// 0.4-1.6 us slower at 1 KB - 1 MB; the all-reduce, whose output is the caller's
// pointer, goes without (with the branches ptxas held its bf16 and fp16 kernels to 64 registers
// and 24-112 bytes of spills).
template <typename T, typename A, int OPK, bool SPLIT>
__device__ __forceinline__ bool reduce_rows(const gc_kargs_t &a, unsigned char *mine, size_t row, size_t width) {
  constexpr int E = 16 / sizeof(T);
  const int n = a.peers.nranks;
  const bool plain = is_plain<T, A>(a, a.recv);
  const int granule = SPLIT ? plain_granule<T, A>(a, a.recv) : 0;
  Deadline d;
  for (size_t k = global_thread(); k * E < width; k += grid_threads()) {
    uint4 v[GC_MAX_LOCAL_RANKS];
    if (!ll_take(mine + k * 16, row, n, sizeof(T), v, d, a.peers)) return false;
    A acc[E];
    reduce_packs<T, A, OPK>(v, n, a.op, acc);
    const size_t first = k * E;
    if (first + E <= width) {
      if (plain) store_at<T, A, true>(a, first, acc, a.recv, 16);
      else if (SPLIT && granule == 8) store_at<T, A, true>(a, first, acc, a.recv, 8);
      else if (SPLIT && granule == 4) store_at<T, A, true>(a, first, acc, a.recv, 4);
      else store_at<T, A, true>(a, first, acc, a.recv, 0);
    } else {
      for (int e = 0; first + e < width; e++) finish<T, A>(acc[e], first + e, a.ep, a.op, n, a.recv);
    }
  }
  return true;
}

// All-reduce: every rank's input into row `me` of every rank's area, then every rank reduces all
// of it. (The reduce-scatter kernel below computes the same when every part is the whole input,
// but all-reducing through it is 0.3-0.4 us slower at 1-16 KB than this.)
template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS allreduce_ll_kernel(const gc_kargs_t a) {
  pdl_begin(a.pdl);
  const int n = a.peers.nranks, me = a.peers.rank;
  const LLCall c(a.peers);
  const size_t bytes = a.count * sizeof(T), packs = (bytes + 15) / 16, row = packs * 16, G = grid_threads();
  for (size_t k = global_thread(); k < packs; k += G) {
    const uint4 w = ll_canonical(load_unit((const char *)a.send, bytes, k), sizeof(T));
    for (int i = 1; i <= n; i++) *(uint4 *)(a.peers.ll[(me + i) % n] + c.gen + me * row + k * 16) = w;
  }
  ll_finish(a.peers, c.call, !reduce_rows<T, A, OPK, false>(a, a.peers.ll[me] + c.gen, row, a.count));
}

// Reduce-scatter: rank q reduces region[q].width elements found at region[q].in_offset of every
// rank's input.
template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS reducescatter_ll_kernel(const gc_kargs_t a) {
  pdl_begin(a.pdl);
  const int n = a.peers.nranks, me = a.peers.rank;
  const LLCall c(a.peers);
  const size_t G = grid_threads();
  size_t most = 0;
  for (int q = 0; q < n; q++) most = max(most, a.region[q].width);
  const size_t row = (most * sizeof(T) + 15) / 16 * 16;

  // Part q of our input into row `me` of rank q's area, starting with the next rank; then our
  // part's n rows (thread k wrote pack k of every part: in place is safe). A thread loads its
  // pack of every part before it stores any: a load after a store it may alias waits for that
  // store, so one part after another would take n load latencies in turn (4 GPUs: 1 KB
  // 3.69 against 4.03 us, 256 KB 4.96 against 5.70-5.74).
  auto part = [&](int q) { return (const char *)a.send + a.region[q].in_offset * sizeof(T); };
  auto len = [&](int q) { return a.region[q].width * sizeof(T); };
  for (size_t k = global_thread(); k * 16 < row; k += G) {
    uint4 w[GC_MAX_LOCAL_RANKS];
#pragma unroll
    for (int i = 0; i < GC_MAX_LOCAL_RANKS; i++) {
      const int q = (me + 1 + i) % n;
      if (i < n && k * 16 < len(q)) w[i] = load_unit(part(q), len(q), k);
    }
#pragma unroll
    for (int i = 0; i < GC_MAX_LOCAL_RANKS; i++) {
      const int q = (me + 1 + i) % n;
      if (i < n && k * 16 < len(q)) *(uint4 *)(a.peers.ll[q] + c.gen + me * row + k * 16) = ll_canonical(w[i], sizeof(T));
    }
  }
  ll_finish(a.peers, c.call, !reduce_rows<T, A, OPK, true>(a, a.peers.ll[me] + c.gen, row, a.region[me].width));
}

// All-gather: every rank's part (a.count elements) to every rank.
__global__ void GC_LAUNCH_BOUNDS allgather_ll_kernel(const gc_kargs_t a) {
  pdl_begin(a.pdl);
  const int n = a.peers.nranks, me = a.peers.rank, es = (int)dtype_size(a.dtype);
  const LLCall c(a.peers);
  const size_t part = a.count * es, packs = (part + 15) / 16, row = packs * 16, G = grid_threads();
  for (size_t k = global_thread(); k < packs; k += G) {
    const uint4 w = ll_canonical(load_unit((const char *)a.send, part, k), es);
    for (int i = 1; i <= n; i++) *(uint4 *)(a.peers.ll[(me + i) % n] + c.gen + me * row + k * 16) = w;
  }
  unsigned char *mine = a.peers.ll[me] + c.gen;
  Deadline d;
  bool failed = false;
  for (size_t k = global_thread(); k < packs; k += G) {
    uint4 v[GC_MAX_LOCAL_RANKS];
    if (!ll_take(mine + k * 16, row, n, es, v, d, a.peers)) {
      failed = true;
      break;
    }
#pragma unroll
    for (int q = 0; q < GC_MAX_LOCAL_RANKS; q++)
      if (q < n) store_unit((char *)a.recv + q * part, part, k, v[q]);
  }
  ll_finish(a.peers, c.call, failed);
}

// Broadcast of root's a.count elements. Every rank first tells every other that it has started
// this call (after its previous kernel: what that one read is reset). Direct: root writes each
// pack into every other rank's area. Relay: root writes each run of 32 packs (a warp's 512 bytes)
// into one owner's area, owners taking runs in turn; the owner writes it on to the others, so
// root sends the data once and the others share forwarding it.
__global__ void GC_LAUNCH_BOUNDS broadcast_ll_kernel(const gc_kargs_t a, int relay) {
  pdl_begin(a.pdl);
  const int n = a.peers.nranks, me = a.peers.rank, root = a.root, es = (int)dtype_size(a.dtype);
  const LLCall c(a.peers);
  if (blockIdx.x == 0 && threadIdx.x < (unsigned)n && (int)threadIdx.x != me)
    st_release_sys(&a.peers.sig[threadIdx.x]->ll_started[me], c.call + 1);
  const size_t bytes = a.count * es, packs = (bytes + 15) / 16, G = grid_threads();
  auto owner = [&](size_t k) { return (root + 1 + (int)((k >> 5) % (size_t)(n - 1))) % n; };
  bool failed = false;
  if (me == root) {
    for (size_t k = global_thread(); k < packs; k += G) {
      const uint4 w = load_unit((const char *)a.send, bytes, k);
      const uint4 x = ll_canonical(w, es);
      // root keeps what the others get: an all-ones element is the same other NaN on every rank
      if (a.send != a.recv || x.x != w.x || x.y != w.y || x.z != w.z || x.w != w.w) store_unit((char *)a.recv, bytes, k, x);
      if (relay) *(uint4 *)(a.peers.ll[owner(k)] + c.gen + k * 16) = x;
      else
        for (int i = 1; i < n; i++) *(uint4 *)(a.peers.ll[(me + i) % n] + c.gen + k * 16) = x;
    }
  } else {
    unsigned char *mine = a.peers.ll[me] + c.gen;
    Deadline d;
    for (size_t k = global_thread(); k < packs; k += G) {
      uint4 v[GC_MAX_LOCAL_RANKS];
      if (!ll_take(mine + k * 16, 0, 1, es, v, d, a.peers)) {
        failed = true;
        break;
      }
      if (relay && owner(k) == me)
        for (int i = 1; i < n; i++) {
          const int q = (me + i) % n;
          if (q != root) *(uint4 *)(a.peers.ll[q] + c.gen + k * 16) = v[0];
        }
      store_unit((char *)a.recv, bytes, k, v[0]);
    }
  }
  ll_finish(a.peers, c.call, failed, true);
}

// The reducing LL kernels take float32, float16 and bfloat16 (the all-gather and broadcast move fp8 too):
// elements of at most 4 bytes, never seen half-written, whose all-ones pattern is a NaN.
template <typename F>
cudaError_t with_ll_types(int dtype, int op, F &&launch) {
  switch (dtype) {
    GC_REDUCE_TYPES_CASE(GC_FLOAT32, float, float)
    GC_REDUCE_TYPES_CASE(GC_FLOAT16, __half, float)
    GC_REDUCE_TYPES_CASE(GC_BFLOAT16, __nv_bfloat16, float)
  }
  return cudaErrorInvalidValue;
}

}  // namespace gc

extern "C" int gc_kernel_reduce_ll(const gc_kargs_t *a, int scatter, cudaStream_t s) {
  return gc::with_ll_types(a->dtype, a->op, [&](auto t) {
    using R = decltype(t);
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
    if (scatter) return cudaLaunchKernelEx(&cfg, gc::reducescatter_ll_kernel<typename R::T, typename R::A, R::OPK>, *a);
    return cudaLaunchKernelEx(&cfg, gc::allreduce_ll_kernel<typename R::T, typename R::A, R::OPK>, *a);
  });
}

extern "C" int gc_kernel_allgather_ll(const gc_kargs_t *a, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
  return cudaLaunchKernelEx(&cfg, gc::allgather_ll_kernel, *a);
}

extern "C" int gc_kernel_broadcast_ll(const gc_kargs_t *a, int relay, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
  return cudaLaunchKernelEx(&cfg, gc::broadcast_ll_kernel, *a, relay);
}
