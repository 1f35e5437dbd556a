// bywrites.cu — the pipelined reduction by writes. Reduce-scatter: rank q owns part q of every
// input. All-reduce: the same, and each owner writes its reduced pieces into every rank's output.
// NVLink carries only writes (on the 4 x H200 host SM writes reach ~351 GB/s per GPU against
// ~323 for reads), and no barrier stalls the grid: each block moves its own pieces with
// point-to-point signals.
//
// Block b takes pieces j = b, b + grid, ... of every part (piece j: bytes [j P, j P + P) of the
// part). Per piece, with e the block's running signal value:
//   1. write piece j of part q of our input into rank q's inbox, slot (e / 2) % 2, for every
//      peer q (starting with the next rank, so the GPUs' writes form a permutation), then signal
//      e + 1 to every peer;
//   2. wait for every peer's e + 1, reduce piece j of our part from our input and the inbox rows
//      in rank order, and store it (our output, or every rank's).
// Slots alternate, and a peer signals piece j + 1 only after it has reduced piece j, so when we
// write a slot two pieces on, the peer has read it; values and slots run on across calls. The last
// piece ends with e + 2 to every peer and a wait for theirs: no rank leaves while a peer still
// reads its inbox or (all-reduce) still writes its output, and nobody writes a peer's output
// before that peer has signalled this call's piece (it has entered the call).
#include "common.cuh"

namespace gc {

// Rank q's inbox for pieces from rank src (!= q), in slot s of block b.
__device__ __forceinline__ unsigned char *inbox(const gc_kargs_t &a, int q, int s, int b, int src) {
  const int n = a.peers.nranks;
  const size_t row = (size_t)((src - q + n) % n - 1);
  return (unsigned char *)a.in[q] + (((size_t)s * GC_BYWRITES_BLOCKS + b) * (n - 1) + row) * a.slot_bytes;
}

// Where results go: our output (reduce-scatter), or every rank's, ours first (all-reduce).
__device__ __forceinline__ unsigned char *output(const gc_kargs_t &a, int everyone, int p) {
  return (unsigned char *)(everyone ? a.pub[(a.peers.rank + p) % a.peers.nranks] : a.recv);
}

// Units [at/16, at/16 + units) of a part of len bytes into a peer's inbox: four local loads in
// flight per thread before their stores cross NVLink.
__device__ __forceinline__ void send_piece(unsigned char *box, const char *part, size_t len, size_t at,
                                           size_t units) {
  const size_t first = at / 16, T = blockDim.x;
  for (size_t u = threadIdx.x; u < units; u += 4 * T) {
    uint4 w[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (u + k * T < units) w[k] = load_unit(part, len, first + u + k * T);
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (u + k * T < units) *(uint4 *)(box + (u + k * T) * 16) = w[k];
  }
}

template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS reduce_bywrites_kernel(const gc_kargs_t a, int everyone) {
  constexpr int E = 16 / sizeof(T);
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, b = blockIdx.x;
  const unsigned others = ((1u << n) - 1) & ~(1u << me);
  const size_t es = sizeof(T), os = dtype_size(a.ep.out_dtype), P = a.piece;
  const char *send = (const char *)a.send;
  const bool plain = no_epilogue<T, A>(a);
  const gc_kregion_t &R = a.region[me];
  const size_t mine = R.width * es;
  size_t most = 0;
  for (int q = 0; q < n; q++) most = max(most, a.region[q].width * es);
  const size_t pieces = (most + P - 1) / P;

  uint32_t e = sync.epoch;
  for (size_t j = b; j < pieces; j += gridDim.x, e += 2) {
    const int s = (e >> 1) & 1;
    const size_t at = j * P;
    for (int i = 1; i < n; i++) {
      const int q = (me + i) % n;
      const size_t len = a.region[q].width * es;
      if (at < len)
        send_piece(inbox(a, q, s, b, me), send + a.region[q].in_offset * es, len, at, (min(P, len - at) + 15) / 16);
    }
    sync.signal_each(others, e + 1);
    if (!sync.wait_each(others, e + 1)) return;
    if (at >= mine) continue;
    const char *own = send + R.in_offset * es;
    const size_t units = (min(P, mine - at) + 15) / 16;
    for (size_t u = threadIdx.x; u < units; u += blockDim.x) {
      uint4 v[GC_MAX_LOCAL_RANKS];
#pragma unroll
      for (int q = 0; q < GC_MAX_LOCAL_RANKS; q++)
        if (q < n) v[q] = q == me ? load_unit(own, mine, at / 16 + u) : *(const uint4 *)(inbox(a, me, s, b, q) + u * 16);
      A acc[E];
      reduce_packs<T, A, OPK>(v, n, a.op, acc);
      const size_t k = (at / 16 + u) * E;               // element of our part
      const size_t i = everyone ? R.in_offset + k : k;  // element of the output (and of the add vector)
      const int valid = (int)min((size_t)E, R.width - k);
      const int outs = everyone ? n : 1;
      if (plain) {
        Pack<T, true> r;
#pragma unroll
        for (int x = 0; x < E; x++) r.v[x] = from_acc<T>(acc[x]);
        const uint4 w = *reinterpret_cast<const uint4 *>(r.v);
        for (int p = 0; p < outs; p++) put_word(output(a, everyone, p) + i * os, w, valid * es);
      } else {
        alignas(16) unsigned char out[64];
        const size_t bytes = pack_results<T, A>(a, acc, i, valid, false, out);
        for (int p = 0; p < outs; p++) put_bytes(output(a, everyone, p) + i * os, out, bytes);
      }
    }
  }
  if (e != sync.epoch) {  // this block had pieces: its last one closes as described above
    sync.signal_each(others, e);
    if (!sync.wait_each(others, e)) return;
  }
  sync.epoch = e;
  sync.done();
}

}  // namespace gc

extern "C" int gc_kernel_reduce_bywrites(const gc_kargs_t *a, int everyone, cudaStream_t s) {
  return gc::with_reduce_types(a->dtype, a->op, [&](auto t) {
    using R = decltype(t);
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
    return cudaLaunchKernelEx(&cfg, gc::reduce_bywrites_kernel<typename R::T, typename R::A, R::OPK>, *a, everyone);
  });
}
