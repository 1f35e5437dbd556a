// broadcast.cu — peer-to-peer broadcast. One stage: every rank pulls all of root's data. Two
// stages (3+ GPUs, large data): rank r pulls slice r of root's data into its publish area, barrier,
// then every rank gathers the slices from their holders, so root's links carry the data once.
// By writes: root writes each piece into one owner's output, the owner writes it on to the others,
// each step signalled point to point, so pieces stream through without barriers.
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


// Two-stage, pipelined: root's data goes in chunks; in each chunk the n - 1 other ranks each
// pull one slice from root into their publish area (stage 1), and after the barrier each pulls
// the other slices from their holders (stage 2). Stage 2 of chunk c - 1 runs beside stage 1 of
// chunk c, so root's links and everyone's in-links stay busy: each carries the data about once.
template <bool VEC>
__device__ __forceinline__ void gather_chunk(const gc_kargs_t &a, size_t c0, size_t cn, int owners, int me_owner,
                                             bool dst_vec) {
  const int n = a.peers.nranks, root = a.root;
  char *recv = (char *)a.recv;
  size_t q0[GC_MAX_LOCAL_RANKS], qn[GC_MAX_LOCAL_RANKS];
  const char *src[GC_MAX_LOCAL_RANKS];
  int m = 0;
  for (int r = 0; r < n; r++) {
    if (r == root) continue;
    int o = m++;
    slice_of(cn, owners, o, &q0[o], &qn[o]);
    q0[o] += c0;
    src[o] = (const char *)a.pub[r];
    if (o == me_owner || src[o] == recv) qn[o] = 0;  // ours is already in place
  }
  if (VEC && dst_vec) {
    size_t most = 0;
    for (int o = 0; o < owners; o++) most = qn[o] > most ? qn[o] : most;
    for (size_t j = global_thread(); j < most; j += grid_threads()) {
      uint4 v[GC_MAX_LOCAL_RANKS];
#pragma unroll
      for (int o = 0; o < GC_MAX_LOCAL_RANKS - 1; o++)
        if (o < owners && j < qn[o]) v[o] = ((const uint4 *)src[o])[q0[o] + j];
#pragma unroll
      for (int o = 0; o < GC_MAX_LOCAL_RANKS - 1; o++)
        if (o < owners && j < qn[o]) ((uint4 *)recv)[q0[o] + j] = v[o];
    }
  } else {
    for (int o = 0; o < owners; o++) copy_units<VEC>(recv, src[o], q0[o], qn[o], dst_vec);
  }
}

template <bool VEC>
__global__ void GC_LAUNCH_BOUNDS broadcast_kernel(const gc_kargs_t a, int one_stage) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, root = a.root;
  const size_t bytes = a.count * dtype_size(a.dtype);
  const char *src = (const char *)a.in[root];
  char *recv = (char *)a.recv;
  // Two stages: chunks of at least 4 MB, about eight of them; root meets each chunk's barrier.
  const bool two_stage = !one_stage && n > 2;
  const size_t unit = VEC ? 16 : 1, units = bytes / unit, chunk = max(units / 8, (size_t)(4u << 20) / unit);
  if (!sync.barrier()) return;  // root's data is in place
  if (!two_stage || me == root) {
    // root holds it all (at most a local copy); one-stage ranks pull everything from root.
    copy_bytes(recv, src, bytes);
    if (two_stage)
      for (size_t c0 = 0; c0 < units; c0 += chunk)
        if (!sync.barrier()) return;
  } else {
    const int owners = n - 1, me_owner = me < root ? me : me - 1;
    const bool dst_vec = aligned16(recv);
    size_t prev0 = 0, prevn = 0;
    for (size_t c0 = 0; c0 < units; c0 += chunk) {
      size_t cn = min(chunk, units - c0), s0, sn;
      slice_of(cn, owners, me_owner, &s0, &sn);
      if ((char *)a.pub[me] != src) copy_units<VEC>((char *)a.pub[me], src, c0 + s0, sn, true);
      if ((char *)a.pub[me] != recv) copy_units<VEC>(recv, (const char *)a.pub[me], c0 + s0, sn, dst_vec);
      if (prevn) gather_chunk<VEC>(a, prev0, prevn, owners, me_owner, dst_vec);
      if (!sync.barrier()) return;  // this chunk's slices are published
      prev0 = c0;
      prevn = cn;
    }
    if (prevn) gather_chunk<VEC>(a, prev0, prevn, owners, me_owner, dst_vec);
    for (size_t k = units * unit + global_thread(); k < bytes; k += grid_threads()) recv[k] = src[k];
  }
  if (!sync.barrier()) return;  // nobody still reads root's data or our publish area
  sync.done();
}


// Writes `len` bytes from src to nd destinations, by `threads` threads (this one `thread`; the
// whole block by default); all of a thread's loads are in flight before its stores.
template <bool VEC>
__device__ __forceinline__ void write_piece(const char *src, size_t len, char *const *dst, int nd,
                                            int thread = -1, int threads = -1) {
  if (thread < 0) {
    thread = (int)threadIdx.x;
    threads = (int)blockDim.x;
  }
  size_t done = 0;
  if constexpr (VEC) {
    constexpr int U = 4;
    const size_t units = len / 16, T = (size_t)threads;
    for (size_t j = thread; j < units; j += U * T) {
      uint4 x[U];
#pragma unroll
      for (int u = 0; u < U; u++)
        if (j + u * T < units) x[u] = ((const uint4 *)src)[j + u * T];
      for (int d = 0; d < nd; d++)
#pragma unroll
        for (int u = 0; u < U; u++)
          if (j + u * T < units) ((uint4 *)dst[d])[j + u * T] = x[u];
    }
    done = units * 16;
  }
  for (size_t i = done + thread; i < len; i += threads)
    for (int d = 0; d < nd; d++) dst[d][i] = src[i];
}

// Owner of block b's k-th piece: the non-root ranks in turn over k and b (owner index o is rank o,
// or o + 1 from root on) ...
__device__ __forceinline__ int owner_of(uint32_t k, int root, int owners) {
  const int o = (int)((k + blockIdx.x) % owners);
  return o < root ? o : o + 1;
}
// ... and the first of this block's pieces that rank r (not root) owns: then every owners-th.
__device__ __forceinline__ uint32_t first_owned(int r, int root, int owners) {
  const int o = r < root ? r : r - 1;
  return (uint32_t)((o - (int)(blockIdx.x % owners) + owners) % owners);
}

// Broadcast by writes into every rank's output (a.pub[r], from gc_mem_alloc). The data goes in
// waves of one `piece`-byte piece per block, block b's k-th piece the b-th of wave k. (First
// waves of smaller pieces, doubling to `piece`, are no faster on 2 or 4 GPUs.) Through owners
// (two hops): the piece's
// owner is one of the non-root ranks, in turn over k and b so that root's writes spread over all
// of them; root writes the piece into the owner's output (and its own, out of place) and signals
// the owner; the owner writes it on to every other rank and signals each of them. A rank waits
// only for root's signals of the pieces it owns while it forwards them, and for the other owners'
// pieces once, at the end (each owner's last signal in this block: signals are released in
// order, so it covers the owner's earlier pieces); waiting for every piece in turn would make each
// block's owners forward one after another (4 x H200, 32 KB pieces: 64 MB 230.0 us that way against
// 210.5 this way; 256 MB 964.7 against 790.8). Along the ring (n - 1 hops, one writer per
// receiver): each rank waits for the piece from the rank before it and writes it on to the rank
// after it, up to the rank before root. Signals are block b's slots with the value epoch + k + 1,
// so they only grow and pieces never mix; there is no closing barrier: a rank's kernel ends only
// once all its pieces have arrived, and the next call's entry barrier keeps its writes out of
// outputs still in use.
template <bool VEC>
__global__ void GC_LAUNCH_BOUNDS broadcast_push_kernel(const gc_kargs_t a, size_t piece) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, root = a.root, owners = n - 1;
  const size_t bytes = a.count * dtype_size(a.dtype);
  const char *send = (const char *)a.send;
  char *own = (char *)a.recv;
  if (!sync.barrier()) return;  // every output may be written
  const uint32_t base = sync.epoch;
  const int next = (me + 1) % n, last = (root + n - 1) % n;
  uint32_t k = 0;
  for (size_t off = blockIdx.x * piece; off < bytes; off += gridDim.x * piece, k++) {
    const size_t len = min(piece, bytes - off);
    const int owner = owner_of(k, root, owners);
    const uint32_t mark = base + k + 1;
    char *dst[GC_MAX_LOCAL_RANKS];
    int nd = 0;
    if (a.ring) {
      if (me != root && !sync.wait((me + n - 1) % n, mark)) return;
      if (me != last) {
        dst[nd++] = (char *)a.pub[next] + off;
        if (me == root && send != own) dst[nd++] = own + off;
        write_piece<VEC>((me == root ? send : own) + off, len, dst, nd);
        sync.signal(next, mark);
      }
    } else if (me == root) {
      dst[nd++] = (char *)a.pub[owner] + off;
      if (send != own) dst[nd++] = own + off;
      write_piece<VEC>(send + off, len, dst, nd);
      sync.signal(owner, mark);
    } else if (me == owner) {
      if (!sync.wait(root, mark)) return;
      for (int r = 0; r < n; r++)
        if (r != root && r != me) dst[nd++] = (char *)a.pub[r] + off;
      write_piece<VEC>(own + off, len, dst, nd);
      sync.signal_each(((1u << n) - 1) & ~(1u << root) & ~(1u << me), mark);
    }
  }
  if (!a.ring && me != root) {
    // The other owners' last pieces in this block (pieces 0 .. k - 1): thread r waits for rank r's.
    const int r = (int)threadIdx.x;
    unsigned from = 0;
    uint32_t last_mark = 0;
    if (r < n && r != root && r != me) {
      const uint32_t first = first_owned(r, root, owners);
      if (first < k) {
        from = 1u << r;
        last_mark = base + first + (k - 1 - first) / owners * owners + 1;
      }
    }
    if (!sync.wait_each(from, last_mark)) return;
  }
  sync.epoch = base + k;
  sync.done();
}

// Broadcast by writes through staging, for outputs peers cannot write (not from gc_mem_alloc).
// Along the ring from root: a rank writes each piece into the next rank's staging (a.in[next],
// slot k % GC_STAGED_SLOTS of block b, the same place on every rank) and signals it; the next rank
// copies the piece into its output, and on into the rank after it, and then tells the rank before
// it that the slot is free. A rank writes into a slot of the next rank only once that rank has
// freed the piece that was there (k - GC_STAGED_SLOTS). Block b's signals carry epoch + k + 1 for
// its k-th piece: data in the receiver's row of its sender, "free" in the sender's row of its
// receiver (different words, one writer each). No entry barrier: a call starts with every
// staging area free (every call ends only once its peers are done reading their own staging) and
// with every rank's signal rows at the epochs they share. So this one ends the same way: on 2 GPUs
// a rank that writes on ends once the next rank has freed its last piece; on 3+ at a barrier.
// The all-gather (gather = 1) is n such broadcasts at once: the blocks make n groups, block b the
// (b / n)-th lane of group b % n, and group g carries rank g's part (a.send, a.count elements)
// into every recv + g * part along the ring from g, in the same slots with the same signals.
// With a.control the block's last warp does the waits and signals (control_pipeline), so the
// other warps go on copying while a signal's release drains.
template <bool VEC>
__global__ void GC_LAUNCH_BOUNDS staged_ring_kernel(const gc_kargs_t a, int gather) {
  pdl_begin(a.pdl);
  Sync sync(a.peers);
  const int n = a.peers.nranks, me = a.peers.rank, groups = gather ? n : 1, group = (int)blockIdx.x % groups;
  const int root = gather ? group : a.root;
  const int next = (me + 1) % n, prev = (me + n - 1) % n, last = (root + n - 1) % n;
  const bool receives = me != root, forwards = me != last;
  const size_t bytes = a.count * dtype_size(a.dtype), piece = a.piece;
  const size_t lane = blockIdx.x / groups, lanes = gridDim.x / groups;
  const char *here = (const char *)a.in[me];
  char *there = (char *)a.in[next], *own = (char *)a.recv + group * bytes;
  const uint32_t base = sync.epoch;
  const unsigned tell = (forwards ? 1u << next : 0u) | (receives ? 1u << prev : 0u);
  // Piece k of this block: copied from root's input or our slot into the next rank's slot and
  // into our output (root in place: already there).
  auto copy = [&](uint32_t k, int thread, int threads) {
    const size_t off = (lane + (size_t)k * lanes) * piece, len = min(piece, bytes - off);
    const size_t slot = ((size_t)(k % GC_STAGED_SLOTS) * gridDim.x + blockIdx.x) * piece;
    const char *src = receives ? here + slot : (const char *)a.send + off;
    char *dst[2];
    int nd = 0;
    if (forwards) dst[nd++] = there + slot;
    if (src != own + off) dst[nd++] = own + off;
    write_piece<VEC>(src, len, dst, nd, thread, threads);
  };
  const uint32_t T = lane * piece < bytes ? (uint32_t)((bytes - lane * piece + lanes * piece - 1) / (lanes * piece)) : 0;
  if (a.control) {
    // Lane prev: pieces arrived; lane next: slots free there (the first GC_STAGED_SLOTS always).
    auto ready = [&]() -> uint32_t {
      const int r = (int)(threadIdx.x & 31);
      if (receives && r == prev) return sync.past(prev, base);
      if (forwards && r == next) return sync.past(next, base) + GC_STAGED_SLOTS;
      return ~0u;
    };
    auto signal = [&](uint32_t, uint32_t hi) { sync.warp_signal_each(tell, base + hi); };
    if (!control_pipeline(a.peers, T, ready, copy, signal)) return;
  } else {
    for (uint32_t k = 0; k < T; k++) {
      const uint32_t mark = base + k + 1;
      // Thread prev waits for the piece, thread next for its slot there to be free.
      const unsigned from = (receives ? 1u << prev : 0u) | (forwards && k >= GC_STAGED_SLOTS ? 1u << next : 0u);
      if (!sync.wait_each(from, receives && (int)threadIdx.x == prev ? mark : mark - GC_STAGED_SLOTS)) return;
      copy(k, (int)threadIdx.x, (int)blockDim.x);
      sync.signal_each(tell, mark);
    }
  }
  sync.epoch = base + T;
  // No rank ends while another may still read its staging: the next call may write peers'
  // staging as soon as it starts (the kernels by writes). On 2 GPUs only the next rank writes into
  // ours, and it ends once we have freed its last piece; on 3+ GPUs ranks further up the ring do
  // not wait for us, so every block ends at a barrier (without it, 4 ranks once got wrong broadcast
  // data: root began an all-reduce by writes into the staging of ranks still copying out).
  if (n > 2) {
    if (!sync.barrier()) return;
  } else if (forwards && T && !sync.wait(next, base + T)) {
    return;
  }
  sync.done();
}

// Bytes per piece of the broadcasts by writes: about four per block, 16-byte multiples from 8 KB
// to `most`; `asked` (the push_piece switch) when set.
static size_t piece_for(size_t bytes, size_t blocks, size_t most, size_t asked) {
  if (asked) return (asked + 15) & ~(size_t)15;
  const size_t piece = (bytes / (blocks * 4) + 15) & ~(size_t)15;
  return piece < 8192 ? 8192 : piece > most ? most : piece;
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

extern "C" int gc_kernel_broadcast_push(const gc_kargs_t *a, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
  // Pieces: piece_for, at most 64 KB (through owners: 32 KB on 3+ GPUs, 16 KB on 5-8 up to 64 MB):
  // short pipelines for small data (each piece pays a signal), big pieces for large data. 4 x H200,
  // owners, 64 MB: 210.5 us with 32 KB pieces against 213.9 and 215.4 with 64 KB (two forced
  // measurements). 8 x H200, owners, 16 KB against 32 KB
  // pieces: 47.74 / 71.82 / 122.7 / 225.7 us at 8 / 16 / 32 / 64 MB against 58.52 / 85.59 / 136.4 /
  // 231.5; 429.8 / 842.6 at 128 / 256 MB against 426.7 / 817.4. The ring keeps 64 KB.
  const size_t bytes = a->count * gc::dtype_size(a->dtype), blocks = (size_t)a->blocks;
  const int n = a->peers.nranks;
  const size_t most = a->ring || n < 3 ? 65536 : n > 4 && bytes <= ((size_t)64 << 20) ? 16384 : 32768;
  const size_t piece = gc::piece_for(bytes, blocks, most, a->piece);
  bool vec = a->peers.rank != a->root || gc::aligned16(a->send);
  for (int p = 0; p < n; p++) vec &= gc::aligned16(a->pub[p]);
  if (vec) return cudaLaunchKernelEx(&cfg, gc::broadcast_push_kernel<true>, *a, piece);
  return cudaLaunchKernelEx(&cfg, gc::broadcast_push_kernel<false>, *a, piece);
}

// The ring through staging for `groups` broadcasts at once (1, or n for the all-gather): pieces
// and grid such that GC_STAGED_SLOTS of every block fit a->slot_bytes: less room takes smaller
// pieces, down to 4 KB, then fewer blocks, down to one per group, then pieces under 4 KB (the
// smallest staging area, 64 KB, on 8 GPUs); the grid a multiple of the groups.
static int launch_staged_ring(const gc_kargs_t *a, int gather, cudaStream_t s) {
  gc_kargs_t b = *a;
  const size_t groups = gather ? (size_t)a->peers.nranks : 1;
  const size_t room = a->slot_bytes / GC_STAGED_SLOTS;  // one slot of every block
  const size_t bytes = a->count * gc::dtype_size(a->dtype);  // per group
  size_t blocks = (size_t)a->blocks / groups * groups;
  if (blocks < groups) blocks = groups;
  size_t piece = gc::piece_for(bytes, blocks / groups, 65536, a->piece);
  if (blocks * piece > room) piece = (room / blocks) & ~(size_t)15;
  if (piece < 4096) {
    piece = 4096;
    blocks = room / piece / groups * groups;
  }
  if (blocks < groups) {
    blocks = groups;
    piece = (room / groups) & ~(size_t)15;
  }
  if (piece < 16 || blocks > GC_KMAX_BLOCKS) return cudaErrorInvalidValue;
  b.blocks = (int)blocks;
  b.piece = piece;
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = gc::launch_config(&b, s, attr);
  // Units of 16 bytes where this rank's own pointers allow (pieces and staging are 16-byte
  // multiples); the choice is this rank's alone: pieces and signals do not depend on it.
  const bool sends = gather || a->peers.rank == a->root;
  bool vec = gc::aligned16(a->recv) && (!gather || bytes % 16 == 0) && (!sends || gc::aligned16(a->send));
  if (vec) return cudaLaunchKernelEx(&cfg, gc::staged_ring_kernel<true>, b, gather);
  return cudaLaunchKernelEx(&cfg, gc::staged_ring_kernel<false>, b, gather);
}

extern "C" int gc_kernel_broadcast_staged(const gc_kargs_t *a, cudaStream_t s) { return launch_staged_ring(a, 0, s); }

extern "C" int gc_kernel_allgather_staged(const gc_kargs_t *a, cudaStream_t s) { return launch_staged_ring(a, 1, s); }
