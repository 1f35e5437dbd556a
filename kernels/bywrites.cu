// bywrites.cu — reduce-scatter by writes, pipelined: rank q owns part q of every input, and every
// rank writes its pieces of part q into rank q's inbox straight from its input (any pointer, no
// copy-in, no barrier). NVLink carries only writes.
//
// The grid is 2S blocks: S senders and S reducers, so that writing and reducing overlap (one block
// doing both in turn leaves NVLink idle while it reduces). Stream s (sender s, reducer S + s)
// takes pieces j = s, s + S, ... of every part (piece j: bytes [j P, j P + P) of the part); t counts
// a stream's pieces. With base the stream's running signal value:
//   sender s:  for each piece t: wait until every peer's reducer s has freed slot t % NB (its
//              signal base + 1 + t - NB), write piece j of part q of our input into rank q's
//              inbox there, for every peer q (starting with the next rank, so the GPUs' writes form
//              a permutation), then signal base + 1 + t to every rank;
//   reducer s: for each piece t: wait for every peer's sender s to signal base + 1 + t, reduce
//              piece j of our part from our input and the inbox rows in rank order into our
//              output, then signal base + 1 + t to every rank: slot free.
// With a.control (3-4 GPUs by default) the sender's last warp does its waits and signals
// (control_pipeline), so the other warps go on writing while a signal's release drains.
// A sender ends once every rank's reducer s (ours too) has finished the stream, a reducer once our
// sender has: so no rank leaves while a peer still reads its inbox (other collectives may write
// peers' staging as soon as they start), and every slot is free when the next call starts.
// Senders signal in their own
// block's row, reducers in theirs; both start from the larger of the two blocks' epochs and leave
// both at base + (pieces of the stream), the same on every rank, as the barrier expects.
#include "common.cuh"

namespace gc {

// Rank q's inbox for pieces of stream `stream` from rank src (!= q), in slot `slot`.
__device__ __forceinline__ unsigned char *inbox(const gc_kargs_t &a, int q, int slot, int stream, int src) {
  const int n = a.peers.nranks;
  const size_t row = (size_t)((src - q + n) % n - 1);
  return (unsigned char *)a.in[q] + (((size_t)slot * GC_BYWRITES_STREAMS + stream) * (n - 1) + row) * a.slot_bytes;
}

// Units [at/16, at/16 + units) of a part of len bytes into a peer's inbox: four local loads in
// flight per thread before their stores cross NVLink.
__device__ __forceinline__ void send_piece(unsigned char *box, const char *part, size_t len, size_t at,
                                           size_t units, int thread, int threads) {
  const size_t first = at / 16, step = (size_t)threads;
  for (size_t u = thread; u < units; u += 4 * step) {
    uint4 w[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (u + k * step < units) w[k] = load_unit(part, len, first + u + k * step);
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (u + k * step < units) *(uint4 *)(box + (u + k * step) * 16) = w[k];
  }
}

// Our part's piece at `at` (units of 16 bytes) reduced from our input and the inbox rows, stored.
template <typename T, typename A, int OPK>
__device__ __forceinline__ void reduce_piece(const gc_kargs_t &a, int slot, int stream, size_t at, size_t units,
                                             bool plain) {
  constexpr int E = 16 / sizeof(T);
  const int n = a.peers.nranks, me = a.peers.rank;
  const size_t es = sizeof(T), os = dtype_size(a.ep.out_dtype);
  const gc_kregion_t &R = a.region[me];
  const size_t mine = R.width * es;
  const char *own = (const char *)a.send + R.in_offset * es;
  for (size_t u = threadIdx.x; u < units; u += blockDim.x) {
    uint4 v[GC_MAX_LOCAL_RANKS];
#pragma unroll
    for (int q = 0; q < GC_MAX_LOCAL_RANKS; q++)
      if (q < n) v[q] = q == me ? load_unit(own, mine, at / 16 + u) : *(const uint4 *)(inbox(a, me, slot, stream, q) + u * 16);
    A acc[E];
    reduce_packs<T, A, OPK>(v, n, a.op, acc);
    const size_t k = (at / 16 + u) * E;  // element of our part, of the output and of the add vector
    const int valid = (int)min((size_t)E, R.width - k);
    alignas(16) unsigned char out[64];
    put_bytes((unsigned char *)a.recv + k * os, out, pack_results<T, A>(a, acc, k, valid, plain, out));
  }
}

__device__ __forceinline__ uint32_t later(uint32_t x, uint32_t y) { return (int32_t)(x - y) > 0 ? x : y; }

template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS reducescatter_bywrites_kernel(const gc_kargs_t a) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, S = gridDim.x / 2, stream = blockIdx.x % S;
  const bool sender = (int)blockIdx.x < S;
  const unsigned all = (1u << n) - 1, others = all & ~(1u << me);
  const size_t es = sizeof(T), P = a.piece;
  size_t most = 0;
  for (int q = 0; q < n; q++) most = max(most, a.region[q].width * es);
  const size_t pieces = (most + P - 1) / P;
  const uint32_t T_ = pieces > (size_t)stream ? (uint32_t)((pieces - 1 - stream) / S + 1) : 0;
  const uint32_t *epoch = a.peers.sig[me]->epoch;
  const uint32_t base = later(epoch[stream], epoch[S + stream]);
  const int reducers = S + stream, senders = stream;  // the two signal rows of this stream

  if (sender) {
    const char *send = (const char *)a.send;
    // Piece t of the stream, for every peer q in turn from the next rank.
    auto send_all = [&](uint32_t t, int thread, int threads) {
      const size_t at = (stream + (size_t)t * S) * P;
      for (int i = 1; i < n; i++) {
        const int q = (me + i) % n;
        const size_t len = a.region[q].width * es;
        if (at < len)
          send_piece(inbox(a, q, (int)(t % GC_BYWRITES_SLOTS), stream, me), send + a.region[q].in_offset * es, len,
                     at, (min(P, len - at) + 15) / 16, thread, threads);
      }
    };
    if (a.control) {
      // A control warp waits for the slots and signals the pieces (control_pipeline).
      // Step t's slot is free once every peer's reducer has signalled piece t - NB.
      auto slots_free = [&]() -> uint32_t {
        const int lane = (int)(threadIdx.x & 31);
        return lane < n && (others >> lane & 1u) ? sync.past(lane, base, reducers) + GC_BYWRITES_SLOTS : ~0u;
      };
      auto signal = [&](uint32_t, uint32_t hi) { sync.warp_signal_each(all, base + hi); };
      if (!control_pipeline(a.peers, T_, slots_free, send_all, signal)) return;
    } else {
      for (uint32_t t = 0; t < T_; t++) {
        if (t >= GC_BYWRITES_SLOTS && !sync.wait_each(others, base + 1 + t - GC_BYWRITES_SLOTS, reducers)) return;
        send_all(t, threadIdx.x, blockDim.x);
        sync.signal_each(all, base + 1 + t);
      }
    }
    if (T_ && !sync.wait_each(all, base + T_, reducers)) return;
  } else {
    const size_t mine = a.region[me].width * es;
    const bool plain = no_epilogue<T, A>(a);
    for (uint32_t t = 0; t < T_; t++) {
      const size_t at = (stream + (size_t)t * S) * P;
      if (!sync.wait_each(others, base + 1 + t, senders)) return;
      if (at < mine)
        reduce_piece<T, A, OPK>(a, (int)(t % GC_BYWRITES_SLOTS), stream, at, (min(P, mine - at) + 15) / 16, plain);
      sync.signal_each(all, base + 1 + t);
    }
    if (T_ && !sync.wait_each(1u << me, base + T_, senders)) return;
  }
  sync.epoch = base + T_;
  sync.done();
}

}  // namespace gc

extern "C" int gc_kernel_reducescatter_bywrites(const gc_kargs_t *a, cudaStream_t s) {
  return gc::with_reduce_types(a->dtype, a->op, [&](auto t) {
    using R = decltype(t);
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
    if (a->control && a->threads < 64) return cudaErrorInvalidConfiguration;  // a control warp and workers
    return cudaLaunchKernelEx(&cfg, gc::reducescatter_bywrites_kernel<typename R::T, typename R::A, R::OPK>, *a);
  });
}
