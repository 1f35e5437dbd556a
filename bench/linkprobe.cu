// gpucoll-linkprobe — what NVLink gives to each access pattern the collectives could use, on every
// GPU at once: SM reads and writes to all peers (each thread touching every peer, or each block
// one peer), to one peer (a ring), and copy-engine copies. One process drives every visible GPU
// through peer access; no MPI, no gpucoll. The figures bound what a kernel design can reach.
//
// usage: gpucoll-linkprobe [MB per peer (64)] [iterations (5)] [pattern name prefix (all)]
// bulk-*: cp.async.bulk copies (sm_90+) of 16 KB chunks, one thread per block; the unroll column
// is then the number of shared-memory stages (loads in flight + 1).
// ce-rotate-N: one stream per GPU copies its regions in N MB pieces, piece by piece to peer d+1,
// d+2, ... in turn (the order of the copy-engine reduce-scatter's copies, without its reductions
// and barriers); ce-ring-N: the same pieces, all to peer d+1.
// Each line: pattern, blocks x threads, loads in flight per thread, and the slowest GPU's
// inbound GB/s (reads) or outbound GB/s (writes, copies): bytes moved over the slowest time.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "bulk.cuh"

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "linkprobe: %s failed at %s:%d: %s\n", #x, __FILE__, __LINE__,         \
              cudaGetErrorString(e_));                                                        \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

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
// what these patterns measure (run 63: they do not; writes 1.25, reads 1.38, as the SM's).
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

// Runs one pattern on every GPU at once; returns the slowest GPU's milliseconds (best of iters).
static float run_pattern(bool ce, bool ring, bool write, bool split, bool bulk, int unroll, int blocks, int iters,
                         size_t piece_mb, int *npeers) {
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
  float best = 1e30f;
  for (int it = -1; it < iters; it++) {  // it = -1: warm-up
    for (int d = 0; d < ngpu; d++) {
      CHECK(cudaSetDevice(d));
      Gpu &g = gpus[d];
      CHECK(cudaEventRecord(g.start, g.stream[0]));
      const int c = P[d].count;
      if (ce && piece_mb) {
        const size_t piece = piece_mb << 20;
        for (size_t off = 0; off < region_bytes; off += piece)
          for (int s = 1; s < (ring ? 2 : ngpu); s++) {
            const int p = (d + s) % ngpu;
            CHECK(cudaMemcpyPeerAsync((char *)gpus[p].dst + d * region_bytes + off, p,
                                      (char *)g.src + p * region_bytes + off, d,
                                      piece < region_bytes - off ? piece : region_bytes - off, g.stream[0]));
          }
      } else if (ce) {
        for (int i = 1; i < c; i++) CHECK(cudaStreamWaitEvent(g.stream[i], g.start, 0));
        for (int i = 0; i < c; i++) {
          int p = list[d][i];
          CHECK(cudaMemcpyPeerAsync((char *)gpus[p].dst + d * region_bytes, p, (char *)g.src + p * region_bytes, d,
                                    region_bytes, g.stream[i]));
        }
        for (int i = 1; i < c; i++) {
          CHECK(cudaEventRecord(g.copied[i], g.stream[i]));
          CHECK(cudaStreamWaitEvent(g.stream[0], g.copied[i], 0));
        }
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
    float worst = 0;
    for (int d = 0; d < ngpu; d++) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaEventSynchronize(gpus[d].stop));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, gpus[d].start, gpus[d].stop));
      if (ms > worst) worst = ms;
    }
    if (it >= 0 && worst < best) best = worst;
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
    bool ce, ring, write, split;
    size_t piece_mb;
    bool bulk;
  } pats[] = {
      {"read-all-interleaved", false, false, false, false}, {"read-all-split", false, false, false, true},
      {"write-all-interleaved", false, false, true, false}, {"write-all-split", false, false, true, true},
      {"read-ring", false, true, false, false},             {"write-ring", false, true, true, false},
      {"ce-all", true, false, true, false},                 {"ce-ring", true, true, true, false},
      {"ce-rotate-1", true, false, true, false, 1},         {"ce-rotate-4", true, false, true, false, 4},
      {"ce-rotate-16", true, false, true, false, 16},       {"ce-rotate-64", true, false, true, false, 64},
      {"ce-ring-1", true, true, true, false, 1},            {"ce-ring-4", true, true, true, false, 4},
      {"ce-ring-16", true, true, true, false, 16},
      {"bulk-read-all", false, false, false, false, 0, true}, {"bulk-write-all", false, false, true, false, 0, true},
      {"bulk-read-ring", false, true, false, false, 0, true}, {"bulk-write-ring", false, true, true, false, 0, true},
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
  for (auto &pt : pats) {
    if (strncmp(pt.name, only, strlen(only)) != 0) continue;
    if (pt.bulk && prop.major < 9) {
      printf("  %-22s skipped: bulk copies need compute capability 9.0\n", pt.name);
      continue;
    }
    for (int bi = 0; bi < (pt.ce ? 1 : nblock_list); bi++) {
      for (int unroll = 1; unroll <= (pt.ce ? 1 : 4); unroll *= 2) {
        int blocks = block_list[bi], np = 0;
        float ms = run_pattern(pt.ce, pt.ring, pt.write, pt.split, pt.bulk, unroll, blocks, iters, pt.piece_mb, &np);
        double gbs = (double)np * region_bytes / (ms * 1e-3) / 1e9;
        printf("  %-22s %8d %6d %10.3f %10.1f\n", pt.name, pt.ce ? 0 : blocks, unroll, ms, gbs);
        fflush(stdout);
      }
    }
  }
  return 0;
}
