/* test_comm.c — the communicator module: init variants, queries, the local-size override, the
 * parameter and algorithm tables, the multicast kill switch, destroy and use after destroy, and
 * the bounded waits for a stream that someone else's work holds up. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <sys/mman.h>
#include <unistd.h>

#include "gc_internal.h"
#include "gc_test.h"

static void test_queries(void) {
  int v = -1;
  GC_TEST_OK(gc_comm_rank(gc_test_comm, &v));
  CU_ASSERT_EQUAL(v, gc_test_rank);
  GC_TEST_OK(gc_comm_size(gc_test_comm, &v));
  CU_ASSERT_EQUAL(v, gc_test_size);
  int local = -1, lsize = -1, nodes = -1;
  GC_TEST_OK(gc_comm_local_rank(gc_test_comm, &local));
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &lsize));
  GC_TEST_OK(gc_comm_node_count(gc_test_comm, &nodes));
  CU_ASSERT(local >= 0 && local < lsize);
  CU_ASSERT(nodes >= 1 && nodes <= gc_test_size);
  int dev = -2;
  GC_TEST_OK(gc_comm_device(gc_test_comm, &dev));
  CU_ASSERT(gc_test_on_gpu ? dev >= 0 : dev >= -1);
  int self = -1;
  GC_TEST_OK(gc_comm_peer_access(gc_test_comm, local, &self));
  CU_ASSERT_EQUAL(self, dev >= 0);
  CU_ASSERT_EQUAL(gc_comm_peer_access(gc_test_comm, lsize, &self), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_comm_rank(gc_test_comm, NULL), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT(strlen(gc_comm_last_error(gc_test_comm)) > 0);
  int aware = -1, ready = -1;
  GC_TEST_OK(gc_comm_cuda_aware_mpi(gc_test_comm, &aware));
  CU_ASSERT(aware == 0 || aware == 1);
  GC_TEST_OK(gc_comm_p2p_ready(gc_test_comm, &ready));
  CU_ASSERT(ready == 0 || ready == 1);
  if (!gc_test_on_gpu) CU_ASSERT_EQUAL(ready, 0);
  void *stream = (void *)1;
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  CU_ASSERT(dev >= 0 ? stream != NULL : stream == NULL);
  const char *table = gc_comm_algo_table(gc_test_comm);
  CU_ASSERT_PTR_NOT_NULL(strstr(table, "allreduce"));
  CU_ASSERT_PTR_NOT_NULL(strstr(table, "broadcast"));
}

static void test_init_variants(void) {
  gc_comm_t c = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = 0;
  GC_TEST_OK(gc_comm_init_f(&c, MPI_Comm_c2f(MPI_COMM_WORLD), &cfg));
  int dev = 5, ready = 5;
  GC_TEST_OK(gc_comm_device(c, &dev));
  CU_ASSERT_EQUAL(dev, -1);
  GC_TEST_OK(gc_comm_p2p_ready(c, &ready));
  CU_ASSERT_EQUAL(ready, 0);
  GC_TEST_OK(gc_comm_destroy(c));

  /* A config from another version of the header is refused, and *out is left alone. */
  gc_comm_t untouched = (gc_comm_t)&cfg;
  gc_config_t bad = GC_CONFIG_INIT;
  bad.version = 999;
  CU_ASSERT_EQUAL(gc_comm_init(&untouched, MPI_COMM_WORLD, &bad), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT(untouched == (gc_comm_t)&cfg);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "version"));
  CU_ASSERT_EQUAL(gc_comm_init(NULL, MPI_COMM_WORLD, NULL), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_comm_init(&untouched, MPI_COMM_NULL, NULL), GC_ERR_INVALID_ARGUMENT);
}

/* A rank whose setup fails alone (here a staging area too large to round up) fails at once, and
 * its peers with GC_ERR_REMOTE, not after waiting for it (GC_ERR_TIMEOUT, 5 s here). Sizes
 * that rounding would wrap are refused. */
static void test_init_fails_on_every_rank(void) {
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = gc_test_on_gpu;
  cfg.timeout_ms = 5000;
  if (gc_test_rank == gc_test_size - 1) cfg.staging_bytes = SIZE_MAX - 4095;
  gc_comm_t c = NULL;
  const double t0 = MPI_Wtime();
  gc_result_t r = gc_comm_init(&c, MPI_COMM_WORLD, &cfg);
  const double took = MPI_Wtime() - t0;
  if (gc_test_rank == gc_test_size - 1) {
    CU_ASSERT_EQUAL(r, GC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "staging_bytes"));
  } else {
    CU_ASSERT_EQUAL(r, GC_ERR_REMOTE);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "another rank failed"));
  }
  CU_ASSERT(took < 4.0);
  CU_ASSERT_PTR_NULL(c);
  if (r == GC_SUCCESS) gc_comm_destroy(c);

  /* A bad node size on one rank, refused before the node split: every rank answers at once. */
  cfg.staging_bytes = 0;
  cfg.local_size = gc_test_rank == 0 ? -1 : 1;
  const double t_split = MPI_Wtime();
  r = gc_comm_init(&c, MPI_COMM_WORLD, &cfg);
  CU_ASSERT(MPI_Wtime() - t_split < 4.0);
  CU_ASSERT_EQUAL(r, gc_test_rank == 0 ? GC_ERR_INVALID_ARGUMENT : GC_ERR_REMOTE);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), gc_test_rank == 0 ? "local_size is -1" : "ranks per node"));
  CU_ASSERT_PTR_NULL(c);
  if (r == GC_SUCCESS) gc_comm_destroy(c);

  void *p = (void *)1;
  CU_ASSERT_EQUAL(gc_buffer_alloc(gc_test_comm, SIZE_MAX, gc_test_on_gpu, &p), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "more than any"));
  CU_ASSERT_EQUAL(gc_mem_alloc(gc_test_comm, SIZE_MAX - 100, &p), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "more than any"));
  CU_ASSERT(p == (void *)1);

  /* gc_mem_alloc failing on one rank only (it asks for 128 TB): that rank reports its CUDA error,
   * the others GC_ERR_REMOTE, at once; the communicator then still works. */
  int ready = 0;
  GC_TEST_OK(gc_comm_p2p_ready(gc_test_comm, &ready));
  if (!ready) return;
  const int last = gc_test_rank == gc_test_size - 1;
  const double t1 = MPI_Wtime();
  r = gc_mem_alloc(gc_test_comm, last ? (size_t)1 << 47 : (size_t)1 << 20, &p);
  CU_ASSERT_EQUAL(r, last ? GC_ERR_CUDA : GC_ERR_REMOTE);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), last ? "cudaMalloc" : "failed to allocate"));
  CU_ASSERT(MPI_Wtime() - t1 < 10.0);
  CU_ASSERT(p == (void *)1);
  GC_TEST_OK(gc_mem_alloc(gc_test_comm, 4096, &p));
  GC_TEST_OK(gc_mem_free(gc_test_comm, p));
}

/* The other collectives on the MPI path, the ranks with a GPU on device buffers and the one
 * without on host ones, staged (as without CUDA-aware MPI) in 4 KB chunks, so that every call
 * takes many rounds: the ranks must agree on the rounds whatever their buffers (an all-gather
 * once cut its chunk for a device output alone and got wrong data). Exact values, checked
 * everywhere. */
static gc_result_t mixed_kinds(gc_comm_t c, int on_gpu) {
  enum { N = 1000 };
  const int n = gc_test_size, me = gc_test_rank;
  c->cuda_aware = 0;
  c->mpi_chunk_bytes = 4096;
  float *in = malloc(N * sizeof *in), *out = malloc((size_t)n * N * sizeof *out);
  float *d_in = NULL, *d_out = NULL;
  if (!in || !out) return GC_ERR_SYSTEM;
  for (int j = 0; j < N; j++) in[j] = (float)(me * N + j);
  if (on_gpu) {
    CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&d_in, (size_t)n * N * sizeof *in), cudaSuccess);
    CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&d_out, (size_t)n * N * sizeof *out), cudaSuccess);
  }
  gc_result_t r = GC_SUCCESS;
  for (int coll = 0; coll < 3 && r == GC_SUCCESS; coll++) {
    /* all-gather; broadcast from the last rank (the one without a GPU); reduce-scatter of n x N */
    size_t in_count = coll == 2 ? (size_t)n * N : N, out_count = coll == 0 ? (size_t)n * N : N;
    float *src = in;
    if (coll == 2) {
      src = out; /* n blocks of N: block b holds me * N + b * N + j */
      for (size_t j = 0; j < in_count; j++) src[j] = (float)(me * N) + (float)j;
    }
    if (on_gpu && cudaMemcpy(d_in, src, in_count * sizeof *src, cudaMemcpyHostToDevice) != cudaSuccess) r = GC_ERR_CUDA;
    float *send = on_gpu ? d_in : src, *recv = on_gpu ? d_out : malloc(out_count * sizeof *recv);
    if (!recv) r = GC_ERR_SYSTEM;
    if (r == GC_SUCCESS)
      r = coll == 0 ? gc_allgather(send, recv, N, GC_FLOAT32, c, NULL)
        : coll == 1 ? gc_broadcast(send, recv, N, GC_FLOAT32, n - 1, c, NULL)
                    : gc_reducescatter(send, recv, N, GC_FLOAT32, GC_SUM, c, NULL);
    if (r == GC_SUCCESS) r = gc_synchronize(c, NULL);
    float *got = malloc(out_count * sizeof *got);
    if (r == GC_SUCCESS && got && (!on_gpu || cudaMemcpy(got, recv, out_count * sizeof *got, cudaMemcpyDeviceToHost) == cudaSuccess)) {
      if (!on_gpu) memcpy(got, recv, out_count * sizeof *got);
      size_t wrong = 0;
      for (size_t j = 0; j < out_count; j++) {
        double want = coll == 0 ? (double)j                                  /* rank j / N's element j % N */
                    : coll == 1 ? (double)((n - 1) * N) + (double)j
                                : (double)n * (n - 1) / 2 * N + (double)n * (double)(me * N + (int)j);
        wrong += got[j] != (float)want;
      }
      if (wrong) fprintf(stderr, "[rank %d] mixed kinds, collective %d: %zu of %zu wrong\n", me, coll, wrong, out_count);
      CU_ASSERT_EQUAL(wrong, 0);
    } else if (r == GC_SUCCESS) {
      r = GC_ERR_SYSTEM;
    }
    free(got);
    if (!on_gpu) free(recv);
  }
  if (r != GC_SUCCESS) fprintf(stderr, "[rank %d] mixed kinds: %s\n", me, gc_comm_last_error(c));
  cudaFree(d_in);
  cudaFree(d_out);
  free(in);
  free(out);
  return r;
}

/* One rank without its GPU (use_gpu 0) beside ranks with theirs: every rank's init succeeds (no
 * peer-to-peer kernels then), and a collective on each rank's host buffers is right. */
static void test_rank_without_gpu(void) {
  if (!gc_test_on_gpu || gc_test_size < 2) {
    gc_test_note("a rank without its GPU needs 2+ ranks on GPUs; skipped");
    return;
  }
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = gc_test_rank != gc_test_size - 1;
  cfg.timeout_ms = 5000;
  gc_comm_t c = NULL;
  gc_result_t r = gc_comm_init(&c, MPI_COMM_WORLD, &cfg);
  if (r != GC_SUCCESS) fprintf(stderr, "[rank %d] gc_comm_init: %s\n", gc_test_rank, gc_comm_last_error(NULL));
  CU_ASSERT_EQUAL_FATAL(gc_test_all(r == GC_SUCCESS), 1);
  int ready = 1;
  GC_TEST_OK(gc_comm_p2p_ready(c, &ready));
  CU_ASSERT_EQUAL(ready, 0);
  float in[3] = {1.0f, 2.0f, (float)gc_test_rank}, out[3] = {0};
  GC_TEST_OK(gc_allreduce(in, out, 3, GC_FLOAT32, GC_SUM, c, NULL));
  CU_ASSERT(out[0] == (float)gc_test_size && out[1] == 2.0f * (float)gc_test_size &&
            out[2] == (float)(gc_test_size * (gc_test_size - 1) / 2));
  /* The ranks with a GPU pass device buffers, the one without host buffers: the MPI path stages
   * each rank's own (and GC_CHECK_CALLS=1 must not take the kinds for calls that differ). */
  float *dev = NULL, back[3] = {0};
  if (cfg.use_gpu) {
    CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&dev, 2 * sizeof in), cudaSuccess);
    CU_ASSERT_EQUAL(cudaMemcpy(dev, in, sizeof in, cudaMemcpyHostToDevice), cudaSuccess);
  }
  GC_TEST_OK(gc_allreduce(dev ? dev : in, dev ? dev + 3 : back, 3, GC_FLOAT32, GC_SUM, c, NULL));
  GC_TEST_OK(gc_synchronize(c, NULL));
  if (dev) {
    CU_ASSERT_EQUAL(cudaMemcpy(back, dev + 3, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    CU_ASSERT_EQUAL(cudaFree(dev), cudaSuccess);
  }
  CU_ASSERT(memcmp(back, out, sizeof out) == 0);
  GC_TEST_OK(mixed_kinds(c, cfg.use_gpu));
  GC_TEST_OK(gc_comm_destroy(c));
}

/* A staging area of another size on the last rank: its peers would write past the smaller one's
 * end. Every rank's gc_comm_init refuses, naming the setting, and the same sizes then work. */
static void test_settings_differ(void) {
  if (gc_test_size < 2) {
    gc_test_note("ranks that differ in a setting need 2+ ranks; skipped");
    return;
  }
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = gc_test_on_gpu;
  cfg.staging_bytes = gc_test_rank == gc_test_size - 1 ? (size_t)2 << 20 : (size_t)1 << 20;
  gc_comm_t c = (gc_comm_t)1;
  CU_ASSERT_EQUAL(gc_comm_init(&c, MPI_COMM_WORLD, &cfg), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "ranks differ in the staging area"));
  CU_ASSERT(c == (gc_comm_t)1);
  cfg.staging_bytes = (size_t)1 << 20;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  float one = 1.0f, sum = 0.0f;
  GC_TEST_OK(gc_allreduce(&one, &sum, 1, GC_FLOAT32, GC_SUM, c, NULL));
  CU_ASSERT(sum == (float)gc_test_size);
  GC_TEST_OK(gc_comm_destroy(c));
}

/* Only rank 0 calls, on host buffers (the MPI path): its wait for the others times out after 300
 * ms and leaves its MPI request behind; then every rank destroys the communicator. The closing
 * barrier used to meet that request on the other ranks and end the process (MPI_ERR_TRUNCATE). */
static void test_lone_mpi_call(void) {
  if (gc_test_size < 2) {
    gc_test_note("a lone call on the MPI path needs 2+ ranks; skipped");
    return;
  }
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = 0;
  cfg.timeout_ms = 300;
  gc_comm_t c = NULL;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  float in[1000] = {0}, out[1000];
  if (gc_test_rank == 0) {
    CU_ASSERT_EQUAL(gc_allreduce(in, out, 1000, GC_FLOAT32, GC_SUM, c, NULL), GC_ERR_TIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), "GC_TIMEOUT_MS"));
    CU_ASSERT_EQUAL(gc_allreduce(in, out, 1000, GC_FLOAT32, GC_SUM, c, NULL), GC_ERR_TIMEOUT); /* sticky */
  }
  MPI_Barrier(MPI_COMM_WORLD);
  GC_TEST_OK(gc_comm_destroy(c));
}

/* Someone else's work that does not end, as a host function on the stream: it holds the stream
 * until the test releases it (or 30 s pass, so the test itself cannot hang). */
static void CUDART_CB hold_stream(void *flag) {
  for (int ms = 0; ms < 30000 && !__atomic_load_n((int *)flag, __ATOMIC_ACQUIRE); ms++) usleep(1000);
}

/* A communicator whose waits give up after 2 x 400 ms, and its stream. */
static gc_comm_t impatient_comm(void **stream) {
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.timeout_ms = 400;
  gc_comm_t c = NULL;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  GC_TEST_OK(gc_comm_stream(c, stream));
  return c;
}

/* Holds `stream` until *released is set. */
static void hold(void *stream, int *released) {
  __atomic_store_n(released, 0, __ATOMIC_RELEASE);
  CU_ASSERT_EQUAL(cudaLaunchHostFunc((cudaStream_t)stream, hold_stream, released), cudaSuccess);
}

/* Elements of a sum over every rank of 1 + i that are wrong. */
static int wrong_sums(const float *out, int n) {
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += out[i] != (1.0f + (float)i) * (float)gc_test_size;
  return wrong;
}

static gc_result_t enqueue_nothing(void *arg, void *stream) {
  (void)arg;
  (void)stream;
  return GC_SUCCESS;
}

/* A wait for a stream held up by work that is not gpucoll's gives GC_ERR_STREAM_TIMEOUT after
 * twice the communicator's timeout (here 2 x 400 ms), not a hang, and leaves the communicator
 * usable: gc_synchronize, gc_time, gc_memcpy; then the work ends and an all-reduce is right. */
static void test_stuck_stream(void) {
  if (!gc_test_on_gpu) {
    gc_test_note("a stuck stream needs a GPU; skipped");
    return;
  }
  static int released;
  void *stream = NULL;
  gc_comm_t c = impatient_comm(&stream);
  hold(stream, &released);

  const double t0 = MPI_Wtime();
  CU_ASSERT_EQUAL(gc_synchronize(c, stream), GC_ERR_STREAM_TIMEOUT);
  const double took = MPI_Wtime() - t0;
  CU_ASSERT(took >= 0.75 && took < 10.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), "gc_synchronize: the stream's work did not finish"));
  double us = -1;
  CU_ASSERT_EQUAL(gc_time(c, enqueue_nothing, NULL, stream, 1, 1, 0, &us), GC_ERR_STREAM_TIMEOUT);
  CU_ASSERT_EQUAL(us, -1); /* outputs only on success */
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), "gc_time: warm-up"));
  float host[64], *dev = gc_test_alloc(sizeof host);
  for (int i = 0; i < 64; i++) host[i] = 1.0f + (float)i;
  CU_ASSERT_EQUAL(gc_memcpy(c, dev, host, sizeof host), GC_ERR_STREAM_TIMEOUT);
  float back[64]; /* pageable: a copy into it would wait for the stream inside the driver */
  CU_ASSERT_EQUAL(gc_memcpy(c, back, dev, sizeof back), GC_ERR_STREAM_TIMEOUT);
  CU_ASSERT(MPI_Wtime() - t0 < 12.0); /* four bounded waits, not the 30 s hold */

  __atomic_store_n(&released, 1, __ATOMIC_RELEASE);
  GC_TEST_OK(gc_synchronize(c, stream));
  GC_TEST_OK(gc_memcpy(c, dev, host, sizeof host));
  GC_TEST_OK(gc_allreduce(dev, dev, 64, GC_FLOAT32, GC_SUM, c, stream));
  GC_TEST_OK(gc_synchronize(c, stream));
  float out[64];
  gc_test_download(out, dev, sizeof out);
  CU_ASSERT_EQUAL(wrong_sums(out, 64), 0);
  gc_test_free(dev);
  GC_TEST_OK(gc_comm_destroy(c));
}

/* gc_mem_free and gc_comm_destroy first wait for every rank's device. One that stays busy (a host
 * function on rank 0's stream) makes both give GC_ERR_STREAM_TIMEOUT on every rank after about
 * twice the timeout, with nothing freed: the buffer and the communicator still work. Once the
 * work ends, both succeed. */
static void test_stuck_teardown(void) {
  if (!gc_test_on_gpu) {
    gc_test_note("a stuck device needs a GPU; skipped");
    return;
  }
  static int released;
  void *stream = NULL;
  gc_comm_t c = impatient_comm(&stream);
  enum { N = 64 };
  float host[N];
  for (int i = 0; i < N; i++) host[i] = 1.0f + (float)i;
  float *sym = NULL;
  GC_TEST_OK(gc_mem_alloc(c, sizeof host, (void **)&sym));
  if (gc_test_rank == 0) hold(stream, &released);

  const double t0 = MPI_Wtime();
  const char *whose = gc_test_rank == 0 ? "work on this rank's GPU did not finish" : "work on another rank's GPU";
  CU_ASSERT_EQUAL(gc_mem_free(c, sym), GC_ERR_STREAM_TIMEOUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), whose));
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), "Nothing was freed"));
  CU_ASSERT_EQUAL(gc_comm_destroy(c), GC_ERR_STREAM_TIMEOUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), whose));
  const double took = MPI_Wtime() - t0;
  CU_ASSERT(took >= 1.5 && took < 12.0); /* two bounded waits of 2 x 400 ms, not the 30 s hold */

  /* Both still live: an all-reduce in place on the symmetric buffer, on the legacy default
   * stream (the communicator's own is non-blocking, so the hold does not stop it). */
  CU_ASSERT_EQUAL_FATAL(cudaMemcpy(sym, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  GC_TEST_OK(gc_allreduce(sym, sym, N, GC_FLOAT32, GC_SUM, c, NULL));
  GC_TEST_OK(gc_synchronize(c, NULL));
  float out[N];
  CU_ASSERT_EQUAL_FATAL(cudaMemcpy(out, sym, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
  CU_ASSERT_EQUAL(wrong_sums(out, N), 0);

  __atomic_store_n(&released, 1, __ATOMIC_RELEASE);
  /* Together again: under compute-sanitizer's memcheck the ranks can drift more than the 400 ms
   * apart that make a rank missing. */
  MPI_Barrier(MPI_COMM_WORLD);
  GC_TEST_OK(gc_mem_free(c, sym));
  GC_TEST_OK(gc_comm_destroy(c));
}

/* gc_buffer_free takes what gc_buffer_alloc made on that communicator, once; anything else is
 * refused, never passed to free() or cudaFree. What is left at
 * gc_comm_destroy goes with it (the sanitizer pass fails on a leak). */
static void test_owned_buffers(void) {
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = gc_test_on_gpu;
  gc_comm_t c = NULL;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  void *freed = NULL, *left = NULL, *pinned = NULL, *other = NULL;
  GC_TEST_OK(gc_buffer_alloc(c, 1000, gc_test_on_gpu, &freed));
  GC_TEST_OK(gc_buffer_alloc(c, 3 << 20, gc_test_on_gpu, &left));
  GC_TEST_OK(gc_buffer_alloc(c, 4096, 0, &pinned));
  GC_TEST_OK(gc_buffer_alloc(gc_test_comm, 64, 0, &other));
  char stack[16];
  CU_ASSERT_EQUAL(gc_buffer_free(c, stack), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), "was not made by gc_buffer_alloc"));
  CU_ASSERT_EQUAL(gc_buffer_free(c, other), GC_ERR_INVALID_ARGUMENT); /* another communicator's */
  CU_ASSERT_EQUAL(gc_buffer_free(c, (char *)freed + 8), GC_ERR_INVALID_ARGUMENT);
  GC_TEST_OK(gc_buffer_free(c, freed));
  CU_ASSERT_EQUAL(gc_buffer_free(c, freed), GC_ERR_INVALID_ARGUMENT); /* twice */
  GC_TEST_OK(gc_buffer_free(c, NULL));
  GC_TEST_OK(gc_buffer_free(gc_test_comm, other));
  GC_TEST_OK(gc_comm_destroy(c)); /* with `left` and `pinned` */
}

/* GC_LOCAL_SIZE (here via the config) splits one host into nodes: 2 ranks per "node". */
static void test_local_size_override(void) {
  if (gc_test_size < 2 || gc_test_size % 2) {
    gc_test_note("local-size override needs an even number of ranks; skipped");
    return;
  }
  gc_comm_t c = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = gc_test_on_gpu;
  cfg.local_size = 1;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  int lsize = 0, nodes = 0, ready = 1;
  GC_TEST_OK(gc_comm_local_size(c, &lsize));
  GC_TEST_OK(gc_comm_node_count(c, &nodes));
  GC_TEST_OK(gc_comm_p2p_ready(c, &ready));
  CU_ASSERT_EQUAL(lsize, 1);
  CU_ASSERT_EQUAL(nodes, gc_test_size);
  CU_ASSERT_EQUAL(ready, 0); /* several nodes: the kernels stay off, MPI carries the data */
  /* The collectives still give the right answer across the "nodes". */
  size_t count = 1000;
  float *in = malloc(count * sizeof(float)), *out = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; i++) in[i] = (float)(gc_test_rank + 1) * (float)i;
  GC_TEST_OK(gc_allreduce(in, out, count, GC_FLOAT32, GC_SUM, c, NULL));
  float factor = (float)(gc_test_size * (gc_test_size + 1) / 2);
  int ok = 1;
  for (size_t i = 0; i < count; i++) ok &= out[i] == factor * (float)i;
  CU_ASSERT(ok);
  free(in);
  free(out);
  GC_TEST_OK(gc_comm_destroy(c));
}

static void test_params_and_version(void) {
  const char *t = gc_params_table();
  CU_ASSERT_PTR_NOT_NULL(strstr(t, "GC_TIMEOUT_MS"));
  CU_ASSERT_PTR_NOT_NULL(strstr(t, "GC_LOCAL_SIZE"));
  CU_ASSERT_STRING_EQUAL(gc_get_version(), "0.1.0");
}

/* The multimem path is off by default and refuses while an operator's kill switch is set; it
 * never reaches a multicast object. The test only ever switches multicast off (and leaves it off). */
static void test_multimem_refused(void) {
  float x[4] = {1, 2, 3, 4}, y[4];
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_MULTIMEM;
  float *rs_in = calloc((size_t)gc_test_size * 4, sizeof *rs_in); /* the reduce-scatter's input */
  CU_ASSERT_FATAL(rs_in != NULL);
  if (!getenv("NCCL_NVLS_ENABLE") && !getenv("TORCH_SYMM_MEM_DISABLE_MULTICAST") && !getenv("NVSHMEM_DISABLE_NVLS")) {
    CU_ASSERT_EQUAL(gc_allreduce_ex(x, y, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "off by default"));
    CU_ASSERT_EQUAL(gc_reducescatter_ex(rs_in, y, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "off by default"));
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  CU_ASSERT_EQUAL(gc_allreduce_ex(x, y, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "kill switch"));
  /* The reduce-scatter behind the same gate: the kill switch is named before anything else. */
  CU_ASSERT_EQUAL(gc_reducescatter_ex(rs_in, y, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "kill switch"));
  /* and the communicator goes on working */
  GC_TEST_OK(gc_reducescatter(rs_in, y, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  free(rs_in);
  /* The switches' values read as their owners read them, and every doubt as off: NCCL takes
   * integers only (a word is its 0), torch and NVSHMEM also words. */
  static const struct { const char *value; bool off_is_zero, off; } values[] = {
      {"0", true, true},      {" 0\n", true, true}, {"00", true, true},      {"true", true, true},
      {"OFF", true, true},    {"", true, true},      {"zero", true, true},    {"1", true, false},
      {"2", true, false},     {"1", false, true},    {"true", false, true},   {"Yes", false, true},
      {" on ", false, true},  {"enabled", false, true}, {"0", false, false}, {"False", false, false}};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
    if (gc__switch_says_off(values[i].value, values[i].off_is_zero) != values[i].off) {
      fprintf(stderr, "kill switch value '%s' (%s): read as %s\n", values[i].value,
              values[i].off_is_zero ? "0 is off" : "1 is off", values[i].off ? "on" : "off");
      CU_FAIL("a kill switch value read the wrong way");
    }
  /* and nothing was set up at init: GC_MULTIMEM is off here, or a kill switch is set */
  CU_ASSERT_FALSE(gc_test_comm->mm.ready);
  CU_ASSERT_PTR_NULL(gc_test_comm->mm.mc);
  CU_ASSERT_NOT_EQUAL(gc_test_comm->mm.why[0], 0);
}

/* The multicast object's file descriptor travels from local rank 0 to the others (multimem.c):
 * here a memory file with a known text, which every rank reads through its own descriptor. */
static void test_share_fd(void) {
  char text[64];
  snprintf(text, sizeof text, "gpucoll fd %llu", (unsigned long long)gc_test_seed);
  int fd = -1;
  int lr = -1;
  GC_TEST_OK(gc_comm_local_rank(gc_test_comm, &lr));
  if (lr == 0) {
    fd = memfd_create("gpucoll-test", MFD_CLOEXEC);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, text, strlen(text) + 1), (ssize_t)strlen(text) + 1);
  }
  int got = -1;
  GC_TEST_OK(gc__share_fd(gc_test_comm, fd, &got));
  CU_ASSERT(got >= 0);
  char back[64] = {0};
  CU_ASSERT_EQUAL(pread(got, back, sizeof back, 0), (ssize_t)strlen(text) + 1);
  CU_ASSERT_STRING_EQUAL(back, text);
  if (lr == 0) {
    CU_ASSERT_EQUAL(got, fd); /* the root keeps its own */
  } else {
    CU_ASSERT_NOT_EQUAL(got, fd);
  }
  close(got);
  /* A root without a descriptor: refused on every local rank alike. */
  int none = -1;
  CU_ASSERT_EQUAL(gc__share_fd(gc_test_comm, -1, &none), GC_ERR_SYSTEM);
  CU_ASSERT_EQUAL(none, -1);
}

static void test_use_after_destroy(void) {
  gc_comm_t c = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = 0;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  GC_TEST_OK(gc_comm_destroy(c));
  int v;
  CU_ASSERT_EQUAL(gc_comm_rank(c, &v), GC_ERR_INVALID_USAGE);
  float x = 1, y;
  CU_ASSERT_EQUAL(gc_allreduce(&x, &y, 1, GC_FLOAT32, GC_SUM, c, NULL), GC_ERR_INVALID_USAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "destroy"));
  CU_ASSERT_EQUAL(gc_comm_destroy(c), GC_ERR_INVALID_USAGE);
  CU_ASSERT_EQUAL(gc_comm_destroy(NULL), GC_ERR_INVALID_ARGUMENT);
}

void gc_test_suite_comm(void) {
  static const gc_test_case_t tests[] = {
      {"queries", test_queries},
      {"init variants", test_init_variants},
      {"init fails on every rank", test_init_fails_on_every_rank},
      {"a rank without its GPU", test_rank_without_gpu},
      {"ranks that differ in a setting are refused", test_settings_differ},
      {"a lone call on the MPI path times out, then destroy", test_lone_mpi_call},
      {"local size override", test_local_size_override},
      {"params and version", test_params_and_version},
      {"multimem refused", test_multimem_refused},
      {"file descriptor to local ranks", test_share_fd},
      {"use after destroy", test_use_after_destroy},
      {"buffers: gc_buffer_alloc's only, once; the rest go with destroy", test_owned_buffers},
      {"a stuck stream gives GC_ERR_STREAM_TIMEOUT, then works", test_stuck_stream},
      {"a stuck device: free and destroy give GC_ERR_STREAM_TIMEOUT, then work", test_stuck_teardown},
      {NULL, NULL},
  };
  gc_test_add_suite("comm", tests);
}
