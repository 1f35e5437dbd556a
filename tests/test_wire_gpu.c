/* test_wire_gpu.c — the wire kernels on one GPU, n ranks simulated by n buffers, signal areas and
 * streams in one process: pack, then the one-shot and the two-shot all-reduce launched on every
 * "rank" at once, each output compared bit for bit with the host path (gc_tests --gpu). */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gc_rng.h"
#include "gc_test.h"
#include "gc_wire.h"

#define CUDA_OK(call) CU_ASSERT_EQUAL_FATAL((int)(call), 0)

/* Runs one all-reduce over the wire on n simulated ranks (grids of `blocks`, small enough to be
 * resident at once) and checks every rank's output against the host path's bytes. Grids of
 * several blocks are where a two-shot chunk decoded by another block than encoded it shows. */
static void run_ranks(gc_dtype_t dtype, gc_kwire_t w, int n, size_t count, int two_shot, int blocks) {
  const size_t es = gc_dtype_size(dtype), ob = count * es;
  size_t wb = 0;
  gc__wire_bytes(count, &w, &wb);
  void *host_in[8], *dev_in[8], *wire[8], *out[8];
  cudaStream_t st[8];
  gc_ksignals_t *sig = NULL;
  uint32_t *err = NULL;
  CUDA_OK(cudaMalloc((void **)&sig, n * sizeof *sig));
  CUDA_OK(cudaMemset(sig, 0, n * sizeof *sig));
  CUDA_OK(cudaHostAlloc((void **)&err, sizeof *err, cudaHostAllocMapped));
  *err = 0;
  for (int p = 0; p < n; p++) {
    host_in[p] = malloc(ob);
    for (size_t i = 0; i < count; i++)
      gc__store_double(host_in[p], i, dtype, gc__random_value(gc_test_seed + (uint64_t)p, i, GC_FLOAT32) * (1 + (i % 97)));
    CUDA_OK(cudaMalloc(&dev_in[p], ob));
    CUDA_OK(cudaMalloc(&wire[p], wb));
    CUDA_OK(cudaMalloc(&out[p], ob));
    CUDA_OK(cudaMemcpy(dev_in[p], host_in[p], ob, cudaMemcpyHostToDevice));
    CUDA_OK(cudaStreamCreateWithFlags(&st[p], cudaStreamNonBlocking));
  }
  /* A copy from pageable memory may return before its DMA lands, and the streams do not wait for
   * the legacy stream: the packs start only once every input is on the device. */
  CUDA_OK(cudaDeviceSynchronize());
  for (int p = 0; p < n; p++) CUDA_OK(gc_kernel_wire_pack(dev_in[p], count, dtype, &w, wire[p], 8, st[p]));
  CUDA_OK(cudaDeviceSynchronize());
  /* the packed bytes are the host path's */
  unsigned char *hw = malloc(wb), *dw = malloc(wb);
  for (int p = 0; p < n; p++) {
    gc__wire_pack_host(host_in[p], count, dtype, &w, hw);
    CUDA_OK(cudaMemcpy(dw, wire[p], wb, cudaMemcpyDeviceToHost));
    CU_ASSERT(memcmp(hw, dw, wb) == 0);
  }
  for (int r = 0; r < n; r++) {
    gc_kargs_t a;
    memset(&a, 0, sizeof a);
    a.peers.rank = r, a.peers.nranks = n, a.peers.error = err, a.peers.timeout_ns = 10000000000ull;
    for (int p = 0; p < n; p++) a.peers.sig[p] = &sig[p], a.pub[p] = wire[p];
    a.recv = out[r], a.count = count, a.dtype = dtype, a.op = GC_SUM, a.blocks = blocks, a.threads = GC_WIRE_THREADS;
    a.ep.scale = 1.0, a.ep.add_dtype = dtype, a.ep.out_dtype = dtype;
    CUDA_OK(gc_kernel_wire_allreduce(&a, &w, two_shot, st[r]));
  }
  CUDA_OK(cudaDeviceSynchronize());
  CU_ASSERT_EQUAL(*err, 0);
  /* the host path's result: every rank's packed input summed, encoded, decoded */
  const void *wires[8];
  unsigned char *all = malloc((size_t)n * wb), *sum = malloc(wb), *want = malloc(ob), *got = malloc(ob);
  for (int p = 0; p < n; p++) {
    gc__wire_pack_host(host_in[p], count, dtype, &w, all + p * wb);
    wires[p] = all + p * wb;
  }
  gc__wire_sum_host(wires, n, count, &w, 0, gc__wire_units(count, &w), sum);
  gc__wire_unpack_host(sum, count, dtype, &w, NULL, want);
  for (int r = 0; r < n; r++) {
    CUDA_OK(cudaMemcpy(got, out[r], ob, cudaMemcpyDeviceToHost));
    if (memcmp(got, want, ob))
      fprintf(stderr, "wire gpu: %s n %d G %d count %zu %s: rank %d differs from the host path\n", gc_dtype_name(dtype), n,
              w.group, count, two_shot ? "two-shot" : "one-shot", r);
    CU_ASSERT(memcmp(got, want, ob) == 0);
  }
  for (int p = 0; p < n; p++) {
    cudaFree(dev_in[p]), cudaFree(wire[p]), cudaFree(out[p]), cudaStreamDestroy(st[p]);
    free(host_in[p]);
  }
  cudaFree(sig), cudaFreeHost(err);
  free(hw), free(dw), free(all), free(sum), free(want), free(got);
}

static void test_wire_kernels(void) {
  static const gc_dtype_t dtypes[] = {GC_FLOAT32, GC_FLOAT16, GC_BFLOAT16};
  static const size_t counts[] = {1, 1000, 100003};
  for (int two = 0; two < 2; two++)
    for (int n = 2; n <= 4; n++)
      for (int c = 0; c < 3; c++) {
        for (int d = 0; d < 3; d++)
          for (int G = 32; G <= 128; G *= 2)
            run_ranks(dtypes[d], (gc_kwire_t){GC_WIRE_FMT_FP8, G}, n, counts[c], two, 1 + 3 * c);
        run_ranks(GC_FLOAT32, (gc_kwire_t){GC_WIRE_FMT_BF16, 0}, n, counts[c], two, 1 + 3 * c);
      }
}

/* Registered only on device buffers: on host buffers there is nothing to run. */
void gc_test_suite_wire_gpu(void) {
  static const gc_test_case_t tests[] = {{"wire kernels match the host path", test_wire_kernels}, {NULL, NULL}};
  if (gc_test_on_gpu) gc_test_add_suite("wire_gpu", tests);
}
