/* run 117-119 experiment: the two-process probe's loop inside a gpucoll MPI process: 16 MB copies
 * into a 3-row ring in the peer's memory, with and without copies out of our own ring by
 * gc_kernel_copy. Run 119: the ring in fresh allocations of several sizes and offsets (the
 * library's old staging layout among them), and in the library's staging. Not part of the project. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "gc_internal.h"
#include "kernels.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
enum { PIECES = 32, RING = 3 };
static const size_t PIECE = (size_t)16 << 20, MB = (size_t)1 << 20;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  gc_comm_t comm;
  if (gc_comm_init(&comm, MPI_COMM_WORLD, NULL) != GC_SUCCESS) { fprintf(stderr, "init failed\n"); return 1; }
  const int me = comm->local_rank, peer = 1 - me;
  char *src, *scratch;
  CK(cudaMalloc((void **)&src, PIECES * PIECE));
  CK(cudaMalloc((void **)&scratch, PIECES * PIECE));
  CK(cudaMemset(src, me + 1, PIECES * PIECE));
  cudaStream_t cs, ss;
  CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&ss, cudaStreamNonBlocking));
  cudaEvent_t start, stop, copied[PIECES];
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  for (int i = 0; i < PIECES; i++) CK(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming));
  const size_t old_head = 29381888, old_size = old_head + 64 * MB; /* the library's layout before 2 MB alignment */
  struct { const char *what; size_t size, off; } cases[] = {
      {"fresh 50 MB, at 0", 50 * MB, 0},
      {"fresh 50 MB + 21760, at 0", 50 * MB + 21760, 0},
      {"old layout: 92 MB + 21760, at 28 MB + 21760", old_size, old_head},
      {"94 MB, at 28 MB + 21760", 94 * MB, old_head},
      {"92 MB + 21760, at 28 MB", old_size, 28 * MB},
      {"library staging", 0, 0}};
  if (me == 0) printf("# 512 MB in 16 MB copies into a 3-row ring, both ways, best of 5, slower rank\n# %-46s %-13s %8s %8s\n", "ring", "beside", "ms", "GB/s");
  for (unsigned k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char *own = NULL, *peer_base = NULL, *to, *arrived;
    if (cases[k].size) {
      CK(cudaMalloc((void **)&own, cases[k].size));
      cudaIpcMemHandle_t h, ph;
      CK(cudaIpcGetMemHandle(&h, own));
      MPI_Sendrecv(&h, sizeof h, MPI_BYTE, peer, 0, &ph, sizeof ph, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CK(cudaIpcOpenMemHandle((void **)&peer_base, ph, cudaIpcMemLazyEnablePeerAccess));
      to = peer_base + cases[k].off;
      arrived = own + cases[k].off;
    } else {
      to = comm->tp.staging[peer];
      arrived = comm->tp.staging[me];
    }
    for (int out = 0; out < 2; out++) {
      float best = 1e30f;
      for (int it = -1; it < 5; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        CK(cudaEventRecord(start, cs));
        for (int i = 0; i < PIECES; i++) {
          CK(cudaMemcpyAsync(to + (i % RING) * PIECE, src + i * PIECE, PIECE, cudaMemcpyDeviceToDevice, cs));
          if (out) {
            CK(cudaEventRecord(copied[i], cs));
            CK(cudaStreamWaitEvent(ss, copied[i], 0));
            CK((cudaError_t)gc_kernel_copy(scratch + i * PIECE, arrived + (i % RING) * PIECE, PIECE, 128, ss));
          }
        }
        CK(cudaEventRecord(stop, cs));
        CK(cudaDeviceSynchronize());
        float ms, worst;
        CK(cudaEventElapsedTime(&ms, start, stop));
        MPI_Allreduce(&ms, &worst, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
        if (it >= 0 && worst < best) best = worst;
      }
      if (me == 0)
        printf("  %-46s %-13s %8.3f %8.1f\n", cases[k].what, out ? "copy out 128" : "nothing", best,
               PIECES * PIECE / (best * 1e-3) / 1e9);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (own) {
      CK(cudaIpcCloseMemHandle(peer_base));
      MPI_Barrier(MPI_COMM_WORLD);
      CK(cudaFree(own));
    }
  }
  gc_comm_destroy(comm);
  MPI_Finalize();
  return 0;
}
