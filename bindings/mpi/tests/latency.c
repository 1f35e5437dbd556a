/* latency.c — MPI_Allreduce latency on device buffers, one row per size, for comparing
 * LD_PRELOAD=libgpucoll-mpi.so against the same program without it. A plain MPI program.
 * --direct passes the device pointers to MPI_Allreduce (served by libgpucoll-mpi, or by a CUDA-aware
 * MPI); --staged copies to host memory, reduces there and copies back, which is what a program
 * must do on an MPI that is not CUDA-aware. Each size: warm-up calls, then `iters` calls between
 * two CUDA events on the legacy default stream (the MPI call returns with the result in place, so
 * the events bracket whole calls); the row is the maximum over ranks, and the result is checked.
 * usage: latency --direct|--staged [max_bytes] [iters] */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_CUDA(call)                                                                        \
  do {                                                                                          \
    cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "latency: %s: %s\n", #call, cudaGetErrorString(e_));                       \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                             \
    }                                                                                           \
  } while (0)

static int staged;
static float *host;

static void allreduce(float *dev, size_t n) {
  if (!staged) {
    if (MPI_Allreduce(MPI_IN_PLACE, dev, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
      MPI_Abort(MPI_COMM_WORLD, 2);
    return;
  }
  CHECK_CUDA(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  if (MPI_Allreduce(MPI_IN_PLACE, host, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
    MPI_Abort(MPI_COMM_WORLD, 2);
  CHECK_CUDA(cudaMemcpy(dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
}

/* Every element 1 on every rank: after one call each holds size (exact in float). */
static int check(float *dev, size_t n, int size) {
  CHECK_CUDA(cudaMemset(dev, 0, n * sizeof(float)));
  for (size_t i = 0; i < n; i++) host[i] = 1.0f;
  CHECK_CUDA(cudaMemcpy(dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
  allreduce(dev, n);
  CHECK_CUDA(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++)
    if (host[i] != (float)size) return 0;
  return 1;
}

static double time_us(float *dev, size_t n, int iters) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 10; i++) allreduce(dev, n);
  CHECK_CUDA(cudaDeviceSynchronize());
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_CUDA(cudaEventRecord(start, 0));
  for (int i = 0; i < iters; i++) allreduce(dev, n);
  CHECK_CUDA(cudaEventRecord(stop, 0));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  double us = 1000.0 * ms / iters, worst = 0;
  MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return worst;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, gpus = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2 || (strcmp(argv[1], "--direct") != 0 && strcmp(argv[1], "--staged") != 0)) {
    if (rank == 0) fprintf(stderr, "usage: latency --direct|--staged [max_bytes] [iters]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  staged = strcmp(argv[1], "--staged") == 0;
  size_t max_bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : (size_t)64 << 20;
  int iters = argc > 3 ? atoi(argv[3]) : 50;
  CHECK_CUDA(cudaGetDeviceCount(&gpus));
  CHECK_CUDA(cudaSetDevice(rank % gpus));
  float *dev = NULL;
  CHECK_CUDA(cudaMalloc((void **)&dev, max_bytes));
  CHECK_CUDA(cudaMallocHost((void **)&host, max_bytes));
  if (rank == 0) printf("# MPI_Allreduce float sum in place, %s, %d ranks\n# bytes us_per_call GB/s ok\n",
                        staged ? "staged through host" : "device pointers", size);
  for (size_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
    size_t n = bytes / sizeof(float);
    int ok = check(dev, n, size), all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    double us = time_us(dev, n, bytes >= ((size_t)16 << 20) ? iters / 5 + 1 : iters);
    if (rank == 0) printf("%zu %.2f %.3f %s\n", bytes, us, bytes / us / 1e3, all_ok ? "ok" : "WRONG");
  }
  cudaFreeHost(host);
  cudaFree(dev);
  MPI_Finalize();
  return 0;
}
