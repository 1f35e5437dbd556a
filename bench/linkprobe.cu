// gpucoll-linkprobe — what NVLink gives to each access pattern the collectives could use, on every
// GPU at once: SM reads and writes to all peers (each thread touching every peer, or each block
// one peer), to one peer (a ring), and copy-engine copies. One process drives every visible GPU
// through peer access; no MPI, no gpucoll. The figures bound what a kernel design can reach.
//
// usage: gpucoll-linkprobe [MB per peer (64)] [iterations (5)] [pattern name prefix (all)]
// bulk-*: cp.async.bulk copies (sm_90+) of 16 KB chunks, one thread per block; the unroll column
// is then the number of shared-memory stages (loads in flight + 1).
// ce-all: a stream per peer, all copies at once; ce-turn: one stream, a whole region to peer d+1,
// d+2, ... in turn (the copy-engine collectives' order); ce-rotate-N: the same in N MB pieces,
// piece by piece in turn; ce-ring-N: the same pieces, all to peer d+1; ce-graph-*: the same
// copies captured once into a CUDA graph and replayed (as the collectives run under graph
// replay); ce-batch[-N]: one cudaMemcpyBatchAsync of a region (or rounds of an N MB piece) per
// peer, whose copies the driver may run in any order or at once (no graph form exists);
// ce-pull-*: the copies issued by the receiving GPU, reading the peer's region; ce-paced-*: in
// turn, each copy after a one-thread kernel that waits until its receiver's sender of the last
// step is done (no two GPUs ever write to one); ce-solo-*: GPU 0 alone, the others idle.
// staged-*: the staged copy-engine path's pipeline in a ring (run_staged below): 16 MB copies into
// three staging buffers on the next GPU, each copied out there by an SM kernel of N blocks
// (staged-sm-N), a local cudaMemcpyAsync (staged-memcpy) or not at all (staged-ce); staged-busy-N:
// the same copies straight to the peer beside an unrelated local SM copy of the same bytes.
// Each line: pattern, blocks x threads, loads in flight per thread, and the slowest GPU's
// inbound GB/s (reads) or outbound GB/s (writes, copies): bytes moved over the slowest time.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "bulk.cuh"
constexpr const char *kProbeName = "linkprobe";
#include "probe.cuh"

constexpr int kMaxGpus = 8;
constexpr int kThreads = 512;  // threads per block of every kernel launch

struct Peers {
  uint4 *remote[kMaxGpus];  // one region per peer, on that peer
  uint4 *local[kMaxGpus];   // the matching region here
  int count;
};

// WRITE = false: local[p] <- remote[p]; true: remote[p] <- local[p]. SPLIT: block b serves peer
// b % count only; else every thread moves U units of every peer per step.
template <int U, bool WRITE, bool SPLIT>
__global__ void __launch_bounds__(kThreads) move(Peers P, size_t units) {
  if (SPLIT) {
    const int p = blockIdx.x % P.count, lanes = gridDim.x / P.count;
    if (blockIdx.x >= lanes * P.count) return;
    const size_t G = (size_t)lanes * blockDim.x;
    const uint4 *src = WRITE ? P.local[p] : P.remote[p];
    uint4 *dst = WRITE ? P.remote[p] : P.local[p];
    for (size_t k = (size_t)(blockIdx.x / P.count) * blockDim.x + threadIdx.x; k < units; k += U * G) {
      uint4 v[U];
#pragma unroll
      for (int u = 0; u < U; u++)
        if (k + u * G < units) v[u] = src[k + u * G];
#pragma unroll
      for (int u = 0; u < U; u++)
        if (k + u * G < units) dst[k + u * G] = v[u];
    }
  } else {
    const size_t G = (size_t)gridDim.x * blockDim.x;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < units; k += U * G) {
      uint4 v[U][kMaxGpus];
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int p = 0; p < kMaxGpus; p++)
          if (p < P.count && k + u * G < units) v[u][p] = WRITE ? P.local[p][k + u * G] : P.remote[p][k + u * G];
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int p = 0; p < kMaxGpus; p++)
          if (p < P.count && k + u * G < units) (WRITE ? P.remote[p] : P.local[p])[k + u * G] = v[u][p];
    }
  }
}

// Bulk copies (sm_90's cp.async.bulk, the tensor memory accelerator): one thread per block moves
// chunks of kChunk bytes, peer global memory to shared to global, through `stages` shared buffers
// so that up to stages - 1 loads are in flight while earlier chunks are stored. Chunk i of the
// block's share is peer i % count's chunk i / count. Whether such copies carry NVLink payload at
// the copy engines' protocol cost (1.10 raw bytes per payload byte against the SM's 1.19-1.28) is
// what these patterns measure.
constexpr int kChunk = 16384;
constexpr int kMaxStages = 4;

template <bool WRITE>
__global__ void __launch_bounds__(kThreads) bulk_move(Peers P, size_t units, int stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char buf[];  // stages x kChunk
  __shared__ __align__(8) uint64_t full[kMaxStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < stages; s++) gc::bulk::init(&full[s]);
  const size_t chunk_units = kChunk / 16, per_peer = units / chunk_units, total = per_peer * P.count;
  auto chunk = [&](size_t i, bool remote) {  // chunk i on our side or the peer's
    const int p = (int)(i % P.count);
    return (char *)(remote ? P.remote[p] : P.local[p]) + (i / P.count) * kChunk;
  };
  auto load = [&](size_t i, int s) { gc::bulk::load(buf + (size_t)s * kChunk, chunk(i, !WRITE), kChunk, &full[s]); };
  uint32_t phase = 0;  // bit s: the parity stage s waits for next
  size_t first = blockIdx.x, step = gridDim.x, issued = first;
  for (int s = 0; s < stages - 1 && issued < total; s++, issued += step) load(issued, s);
  int s = 0;
  for (size_t i = first; i < total; i += step, s = (s + 1) % stages) {
    if (issued < total) {  // refill the stage the previous chunk's store read from
      gc::bulk::wait<0, true>();
      load(issued, (s + stages - 1) % stages);
      issued += step;
    }
    for (long spin = 0; !gc::bulk::done(&full[s], (phase >> s) & 1u); spin++)
      if (spin > (1L << 30)) __trap();  // a bulk copy that never completes: fail, do not hang
    phase ^= 1u << s;
    gc::bulk::store(chunk(i, WRITE), buf + (size_t)s * kChunk, kChunk);
    gc::bulk::commit();
  }
  gc::bulk::wait<0>();
#else
  __trap();  // bulk copies need sm_90
#endif
}

typedef void (*kernel_t)(Peers, size_t);
template <int U>
kernel_t pick(bool write, bool split) {
  if (write) return split ? move<U, true, true> : move<U, true, false>;
  return split ? move<U, false, true> : move<U, false, false>;
}

struct Gpu {
  uint4 *src, *dst;  // kMaxGpus regions each
  cudaStream_t stream[kMaxGpus];
  cudaEvent_t start, stop, copied[kMaxGpus];  // copied[i]: stream i's copy is done
};

static int ngpu;
static size_t region_bytes;
static std::vector<Gpu> gpus;

// Peers of GPU d in a pattern: every other GPU, or the next one (a ring).
static int peers_of(int d, bool ring, int *out) {
  if (ring) {
    out[0] = (d + 1) % ngpu;
    return 1;
  }
  int c = 0;
  for (int p = 0; p < ngpu; p++)
    if (p != d) out[c++] = p;
  return c;
}

// Copy-engine patterns: how GPU d's copies are issued (see the top of the file).
enum CeMode { CE_NO, CE_STREAMS, CE_TURN, CE_BATCH };
struct Ce {
  CeMode mode;
  size_t piece_mb;  // 0: whole regions
  bool pull, graph;
  bool solo;   // GPU 0 copies alone, the others idle (is a cost the copy engine's own, or the GPUs' together?)
  bool paced;  // in turn, each copy waits (a one-thread kernel) until its receiver's previous sender is done
};

// Pacing: flags[g][s] on GPU g holds the last step GPU s reported done. A one-thread-per-peer
// kernel between two copies reports this GPU's last step to every peer, then waits for `from`'s
// report of the same step (from < 0: every peer's: a barrier). Steps count up over the whole run:
// every GPU numbers a paced iteration's steps from the same base, advanced once per iteration.
struct Flags {
  int *at[kMaxGpus];
};
static Flags flags;
static int pace_base;  // the current paced iteration's first step

__global__ void pace(Flags f, int me, int n, int step, int from) {
  const int t = threadIdx.x;
  if (t < n && t != me) *(volatile int *)(f.at[t] + me) = step;
  if (t != 0) return;
  volatile int *mine = f.at[me];
  for (int p = 0; p < n; p++)
    if ((from < 0 && p != me) || p == from)
      for (long spin = 0; mine[p] < step; spin++)
        if (spin > (1L << 30)) __trap();  // a peer that never reports: fail, do not hang
}

// Enqueues GPU d's copies on its streams (stream 0 begins and ends them), one region per peer:
// pushed into peer p's dst at region d, or pulled from peer p's src region d into our region p.
static void enqueue_copies(int d, const Ce &ce, bool ring) {
  if (ce.solo && d != 0) return;
  int step = pace_base;  // paced: the step each copy waits for
  Gpu &g = gpus[d];
  int list[kMaxGpus];  // peer d+1, d+2, ... (in turn, the GPUs form a permutation at every step)
  const int c = ring ? 1 : ngpu - 1;
  for (int i = 0; i < c; i++) list[i] = (d + 1 + i) % ngpu;
  const size_t piece = ce.piece_mb ? ce.piece_mb << 20 : region_bytes;
  auto dst = [&](int p, size_t off) {
    return (ce.pull ? (char *)g.dst + p * region_bytes : (char *)gpus[p].dst + d * region_bytes) + off;
  };
  auto src = [&](int p, size_t off) {
    return (ce.pull ? (char *)gpus[p].src + d * region_bytes : (char *)g.src + p * region_bytes) + off;
  };
  auto len = [&](size_t off) { return piece < region_bytes - off ? piece : region_bytes - off; };
  if (ce.mode == CE_STREAMS) {
    CHECK(cudaEventRecord(g.copied[0], g.stream[0]));
    for (int i = 1; i < c; i++) CHECK(cudaStreamWaitEvent(g.stream[i], g.copied[0], 0));
    for (int i = 0; i < c; i++)
      for (size_t off = 0; off < region_bytes; off += piece)
        CHECK(cudaMemcpyAsync(dst(list[i], off), src(list[i], off), len(off), cudaMemcpyDeviceToDevice, g.stream[i]));
    for (int i = 1; i < c; i++) {
      CHECK(cudaEventRecord(g.copied[i], g.stream[i]));
      CHECK(cudaStreamWaitEvent(g.stream[0], g.copied[i], 0));
    }
  } else if (ce.mode == CE_TURN) {
    int prev = -1;  // the last copy's peer offset
    for (size_t off = 0; off < region_bytes; off += piece)
      for (int i = 0; i < c; i++) {
        if (ce.paced && prev >= 0) {  // the GPU that sent to list[i] in the last step: d + (i + 1) - prev
          pace<<<1, kMaxGpus, 0, g.stream[0]>>>(flags, d, ngpu, ++step, (d + i + 1 - prev + ngpu) % ngpu);
          CHECK(cudaGetLastError());
        }
        prev = i + 1;
        CHECK(cudaMemcpyAsync(dst(list[i], off), src(list[i], off), len(off), cudaMemcpyDeviceToDevice, g.stream[0]));
      }
  } else {  // CE_BATCH: a batch per piece round, one copy per peer
    for (size_t off = 0; off < region_bytes; off += piece) {
      void *dsts[kMaxGpus];
      const void *srcs[kMaxGpus];
      size_t sizes[kMaxGpus], first = 0;
      for (int i = 0; i < c; i++) dsts[i] = dst(list[i], off), srcs[i] = src(list[i], off), sizes[i] = len(off);
      cudaMemcpyAttributes attr = {};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, c, &attr, &first, 1, g.stream[0]));
    }
  }
}

// Waits for every GPU's stop event; the slowest GPU's milliseconds from its start event.
static float slowest_ms() {
  float worst = 0;
  for (int d = 0; d < ngpu; d++) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaEventSynchronize(gpus[d].stop));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, gpus[d].start, gpus[d].stop));
    if (ms > worst) worst = ms;
  }
  return worst;
}

// Runs one pattern on every GPU at once; returns the slowest GPU's milliseconds (best of iters).
static float run_pattern(const Ce &ce, bool ring, bool write, bool split, bool bulk, int unroll, int blocks,
                         int iters, int *npeers) {
  // What each GPU moves is the same in every iteration: built once, before the timed launches.
  int list[kMaxGpus][kMaxGpus];
  Peers P[kMaxGpus];
  for (int d = 0; d < ngpu; d++) {
    const int c = peers_of(d, ring, list[d]);
    *npeers = c;
    P[d].count = c;
    for (int i = 0; i < c; i++) {
      const int p = list[d][i];
      // reads: our region p <- peer p's region d; writes: peer p's region d <- our region p
      P[d].remote[i] = write ? (uint4 *)((char *)gpus[p].dst + d * region_bytes)
                             : (uint4 *)((char *)gpus[p].src + d * region_bytes);
      P[d].local[i] = write ? (uint4 *)((char *)gpus[d].src + p * region_bytes)
                            : (uint4 *)((char *)gpus[d].dst + p * region_bytes);
    }
  }
  const kernel_t k = unroll == 1 ? pick<1>(write, split) : unroll == 2 ? pick<2>(write, split) : pick<4>(write, split);
  cudaGraphExec_t graphs[kMaxGpus] = {};
  if (ce.graph)
    for (int d = 0; d < ngpu; d++) {  // captured once; every iteration replays the same copies
      CHECK(cudaSetDevice(d));
      cudaGraph_t graph;
      CHECK(cudaStreamBeginCapture(gpus[d].stream[0], cudaStreamCaptureModeThreadLocal));
      enqueue_copies(d, ce, ring);
      CHECK(cudaStreamEndCapture(gpus[d].stream[0], &graph));
      CHECK(cudaGraphInstantiate(&graphs[d], graph, 0));
      CHECK(cudaGraphDestroy(graph));
    }
  float best = 1e30f;
  for (int it = -1; it < iters; it++) {  // it = -1: warm-up
    if (ce.paced) pace_base += 1 << 16;  // more than an iteration's steps
    for (int d = 0; d < ngpu; d++) {
      CHECK(cudaSetDevice(d));
      Gpu &g = gpus[d];
      if (ce.paced) {  // every GPU starts together
        pace<<<1, kMaxGpus, 0, g.stream[0]>>>(flags, d, ngpu, pace_base, -1);
        CHECK(cudaGetLastError());
      }
      CHECK(cudaEventRecord(g.start, g.stream[0]));
      if (ce.mode != CE_NO) {
        if (ce.graph) CHECK(cudaGraphLaunch(graphs[d], g.stream[0]));
        else enqueue_copies(d, ce, ring);
      } else if (bulk) {  // unroll = stages
        const size_t smem = (size_t)unroll * kChunk;
        if (write) bulk_move<true><<<blocks, kThreads, smem, g.stream[0]>>>(P[d], region_bytes / 16, unroll);
        else bulk_move<false><<<blocks, kThreads, smem, g.stream[0]>>>(P[d], region_bytes / 16, unroll);
        CHECK(cudaGetLastError());
      } else {
        k<<<blocks, kThreads, 0, g.stream[0]>>>(P[d], region_bytes / 16);
        CHECK(cudaGetLastError());
      }
      CHECK(cudaEventRecord(g.stop, g.stream[0]));
    }
    const float worst = slowest_ms();
    if (it >= 0 && worst < best) best = worst;
  }
  for (int d = 0; d < ngpu; d++)
    if (graphs[d]) CHECK(cudaGraphExecDestroy(graphs[d]));
  return best;
}

// The staged copy-engine path's shape (lib/copyengine.c, gc__ce_gather_staged) in a ring: GPU d's
// copy engine sends its region to GPU d+1 in pieces of `piece` bytes, into one of kStagedNb
// staging buffers there, and GPU d+1 copies each piece out of staging into its own dst on a second
// stream. Events order it as the library's barriers do: a piece goes out once it is staged, and
// buffer c % kStagedNb is written again once the receiver's copy of piece c - kStagedNb is out.
// out: 0 none (staged-ce: the pipeline's copies alone), 1 SM kernel of `blocks` blocks
// (staged-sm-N), 2 a local cudaMemcpyAsync (staged-memcpy); 3 (staged-busy-N): no staging, the
// copies straight to the peer's dst while an unrelated SM copy of the same bytes runs beside them.
constexpr int kStagedNb = 3;

// Returns the slowest GPU's milliseconds (best of iters) for region_bytes from each GPU.
static float run_staged(size_t piece, int out, int blocks, int iters) {
  const size_t pieces = (region_bytes + piece - 1) / piece;
  std::vector<cudaEvent_t> staged(ngpu * pieces), copied_out(ngpu * pieces);  // [gpu * pieces + c]
  for (int d = 0; d < ngpu; d++) {
    CHECK(cudaSetDevice(d));
    for (size_t c = 0; c < pieces; c++) {
      CHECK(cudaEventCreateWithFlags(&staged[d * pieces + c], cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&copied_out[d * pieces + c], cudaEventDisableTiming));
    }
  }
  // staging: kStagedNb pieces at the top of dst's regions 2.. (regions 0 and 1 take the outputs)
  auto staging = [&](int d, size_t c) { return (char *)gpus[d].dst + 2 * region_bytes + (c % kStagedNb) * piece; };
  float best = 1e30f;
  for (int it = -1; it < iters; it++) {
    for (int d = 0; d < ngpu; d++) {
      CHECK(cudaSetDevice(d));
      Gpu &g = gpus[d];
      CHECK(cudaEventRecord(g.start, g.stream[0]));
      CHECK(cudaEventRecord(g.copied[0], g.stream[0]));
      CHECK(cudaStreamWaitEvent(g.stream[1], g.copied[0], 0));
    }
    // Piece by piece on every GPU, so that every event is recorded before any stream waits for it.
    for (size_t c = 0; c < pieces; c++) {
      const size_t off = c * piece, len = piece < region_bytes - off ? piece : region_bytes - off;
      for (int d = 0; d < ngpu; d++) {  // GPU d's copy of piece c to GPU d+1
        CHECK(cudaSetDevice(d));
        Gpu &g = gpus[d];
        const int to = (d + 1) % ngpu;
        const char *src = (const char *)g.src + off;
        if (out == 3) {
          CHECK(cudaMemcpyAsync((char *)gpus[to].dst + off, src, len, cudaMemcpyDeviceToDevice, g.stream[0]));
          local_copy<<<blocks, kCopyThreads, 0, g.stream[1]>>>((uint4 *)((char *)g.dst + region_bytes + off),
                                                          (const uint4 *)src, len / 16);
          CHECK(cudaGetLastError());
          continue;
        }
        if (c >= kStagedNb) CHECK(cudaStreamWaitEvent(g.stream[0], copied_out[to * pieces + c - kStagedNb], 0));
        CHECK(cudaMemcpyAsync(staging(to, c), src, len, cudaMemcpyDeviceToDevice, g.stream[0]));
        CHECK(cudaEventRecord(staged[d * pieces + c], g.stream[0]));
      }
      for (int d = 0; d < ngpu && out != 3; d++) {  // GPU d's copy of piece c out of staging
        CHECK(cudaSetDevice(d));
        Gpu &g = gpus[d];
        CHECK(cudaStreamWaitEvent(g.stream[1], staged[((d + ngpu - 1) % ngpu) * pieces + c], 0));
        char *dst = (char *)g.dst + off;
        if (out == 1) {
          local_copy<<<blocks, kCopyThreads, 0, g.stream[1]>>>((uint4 *)dst, (const uint4 *)staging(d, c), len / 16);
          CHECK(cudaGetLastError());
        } else if (out == 2) {
          CHECK(cudaMemcpyAsync(dst, staging(d, c), len, cudaMemcpyDeviceToDevice, g.stream[1]));
        }
        CHECK(cudaEventRecord(copied_out[d * pieces + c], g.stream[1]));
      }
    }
    for (int d = 0; d < ngpu; d++) {
      CHECK(cudaSetDevice(d));
      Gpu &g = gpus[d];
      CHECK(cudaEventRecord(g.copied[1], g.stream[1]));
      CHECK(cudaStreamWaitEvent(g.stream[0], g.copied[1], 0));
      CHECK(cudaEventRecord(g.stop, g.stream[0]));
    }
    const float worst = slowest_ms();
    if (it >= 0 && worst < best) best = worst;
  }
  for (size_t i = 0; i < staged.size(); i++) {
    CHECK(cudaEventDestroy(staged[i]));
    CHECK(cudaEventDestroy(copied_out[i]));
  }
  return best;
}

int main(int argc, char **argv) {
  size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  int iters = argc > 2 ? atoi(argv[2]) : 5;
  const char *only = argc > 3 ? argv[3] : "";
  region_bytes = mb << 20;
  CHECK(cudaGetDeviceCount(&ngpu));
  if (ngpu > kMaxGpus) ngpu = kMaxGpus;
  if (ngpu < 2) {
    fprintf(stderr, "linkprobe: needs 2 or more GPUs, found %d\n", ngpu);
    return 1;
  }
  gpus.resize(ngpu);
  for (int d = 0; d < ngpu; d++) {
    CHECK(cudaSetDevice(d));
    for (int p = 0; p < ngpu; p++) {
      if (p == d) continue;
      int can = 0;
      CHECK(cudaDeviceCanAccessPeer(&can, d, p));
      if (!can) {
        fprintf(stderr, "linkprobe: GPU %d cannot access GPU %d\n", d, p);
        return 1;
      }
      cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CHECK(e);
      (void)cudaGetLastError();
    }
    Gpu &g = gpus[d];
    CHECK(cudaMalloc(&flags.at[d], kMaxGpus * sizeof(int)));
    CHECK(cudaMemset(flags.at[d], 0, kMaxGpus * sizeof(int)));
    CHECK(cudaMalloc(&g.src, kMaxGpus * region_bytes));
    CHECK(cudaMalloc(&g.dst, kMaxGpus * region_bytes));
    CHECK(cudaMemset(g.src, d + 1, kMaxGpus * region_bytes));
    CHECK(cudaMemset(g.dst, 0, kMaxGpus * region_bytes));
    for (int i = 0; i < kMaxGpus; i++) {
      CHECK(cudaStreamCreateWithFlags(&g.stream[i], cudaStreamNonBlocking));
      CHECK(cudaEventCreateWithFlags(&g.copied[i], cudaEventDisableTiming));
    }
    CHECK(cudaEventCreate(&g.start));
    CHECK(cudaEventCreate(&g.stop));
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("# linkprobe: %d x %s, %zu MB per peer, best of %d, every GPU at once\n", ngpu, prop.name, mb, iters);
  printf("# %-22s %8s %6s %10s %10s\n", "pattern", "blocks", "unroll", "ms", "GB/s/GPU");
  struct {
    const char *name;
    bool ring, write, split;
    Ce ce;
    bool bulk;
  } pats[] = {
      {"read-all-interleaved", false, false, false}, {"read-all-split", false, false, true},
      {"write-all-interleaved", false, true, false}, {"write-all-split", false, true, true},
      {"read-ring", true, false, false},             {"write-ring", true, true, false},
      {"ce-all", false, true, false, {CE_STREAMS}},  {"ce-ring", true, true, false, {CE_STREAMS}},
      {"ce-turn", false, true, false, {CE_TURN}},
      {"ce-rotate-1", false, true, false, {CE_TURN, 1}},   {"ce-rotate-4", false, true, false, {CE_TURN, 4}},
      {"ce-rotate-16", false, true, false, {CE_TURN, 16}}, {"ce-rotate-64", false, true, false, {CE_TURN, 64}},
      {"ce-ring-1", true, true, false, {CE_TURN, 1}},      {"ce-ring-4", true, true, false, {CE_TURN, 4}},
      {"ce-ring-16", true, true, false, {CE_TURN, 16}},
      {"ce-graph-all", false, true, false, {CE_STREAMS, 0, false, true}},
      {"ce-graph-turn", false, true, false, {CE_TURN, 0, false, true}},
      {"ce-graph-ring", true, true, false, {CE_TURN, 0, false, true}},
      {"ce-batch", false, true, false, {CE_BATCH}},
      {"ce-batch-8", false, true, false, {CE_BATCH, 8}},
      {"ce-batch-32", false, true, false, {CE_BATCH, 32}},
      {"ce-pull-all", false, true, false, {CE_STREAMS, 0, true}},
      {"ce-pull-turn", false, true, false, {CE_TURN, 0, true}},
      {"ce-pull-ring", true, true, false, {CE_TURN, 0, true}},
      {"ce-pull-graph-turn", false, true, false, {CE_TURN, 0, true, true}},
      {"ce-paced-turn", false, true, false, {CE_TURN, 0, false, false, false, true}},
      {"ce-paced-rotate-4", false, true, false, {CE_TURN, 4, false, false, false, true}},
      {"ce-paced-rotate-16", false, true, false, {CE_TURN, 16, false, false, false, true}},
      {"ce-paced-rotate-32", false, true, false, {CE_TURN, 32, false, false, false, true}},
      {"ce-solo-turn", false, true, false, {CE_TURN, 0, false, false, true}},
      {"ce-solo-rotate-16", false, true, false, {CE_TURN, 16, false, false, true}},
      {"ce-solo-ring-16", true, true, false, {CE_TURN, 16, false, false, true}},
      {"ce-solo-ring", true, true, false, {CE_TURN, 0, false, false, true}},
      {"bulk-read-all", false, false, false, {}, true}, {"bulk-write-all", false, true, false, {}, true},
      {"bulk-read-ring", true, false, false, {}, true}, {"bulk-write-ring", true, true, false, {}, true},
  };
  for (int d = 0; d < ngpu; d++) {  // the bulk kernels' stage buffers: up to kMaxStages x kChunk bytes
    CHECK(cudaSetDevice(d));
    CHECK(cudaFuncSetAttribute(bulk_move<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxStages * kChunk));
    CHECK(cudaFuncSetAttribute(bulk_move<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxStages * kChunk));
  }
  static constexpr int block_list[] = {16, 32, 64, 132, 264};
  constexpr int nblock_list = (int)(sizeof block_list / sizeof block_list[0]);
  // A split grid needs a block per peer (kMaxGpus - 1 at most); the smallest count has them.
  static_assert(block_list[0] >= kMaxGpus - 1, "split patterns need a block per peer");
  // staged-*: region_bytes per GPU in 16 MB pieces through 3 staging buffers (run_staged); these
  // need kMaxGpus >= 2 + kStagedNb * 16 MB / region_bytes regions of dst: region_bytes >= 16 MB.
  struct {
    const char *name;
    int out, blocks;
  } staged[] = {{"staged-ce", 0, 0},          {"staged-memcpy", 2, 0},      {"staged-sm-16", 1, 16},
                {"staged-sm-32", 1, 32},      {"staged-sm-132", 1, 132},    {"staged-busy-16", 3, 16},
                {"staged-busy-132", 3, 132}};
  const size_t staged_piece = (size_t)16 << 20;
  for (auto &st : staged) {
    if (strncmp(st.name, only, strlen(only)) != 0) continue;
    if (region_bytes < staged_piece || region_bytes % 16) {
      printf("  %-22s skipped: needs 16 MB or more per peer\n", st.name);
      continue;
    }
    float ms = run_staged(staged_piece, st.out, st.blocks, iters);
    printf("  %-22s %8d %6d %10.3f %10.1f\n", st.name, st.blocks, 1, ms, region_bytes / (ms * 1e-3) / 1e9);
    fflush(stdout);
  }
  for (auto &pt : pats) {
    if (strncmp(pt.name, only, strlen(only)) != 0) continue;
    if (pt.bulk && prop.major < 9) {
      printf("  %-22s skipped: bulk copies need compute capability 9.0\n", pt.name);
      continue;
    }
    const bool ce = pt.ce.mode != CE_NO;
    for (int bi = 0; bi < (ce ? 1 : nblock_list); bi++) {
      for (int unroll = 1; unroll <= (ce ? 1 : 4); unroll *= 2) {
        int blocks = block_list[bi], np = 0;
        float ms = run_pattern(pt.ce, pt.ring, pt.write, pt.split, pt.bulk, unroll, blocks, iters, &np);
        double gbs = (double)np * region_bytes / (ms * 1e-3) / 1e9;
        printf("  %-22s %8d %6d %10.3f %10.1f\n", pt.name, ce ? 0 : blocks, unroll, ms, gbs);
        fflush(stdout);
      }
    }
  }
  return 0;
}
