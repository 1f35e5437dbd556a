/* test_p2p.c — the peer-to-peer path on GPUs: every forced algorithm, zero-copy symmetric buffers,
 * chunking through a small staging area, fused epilogues, unaligned pointers, PDL, CUDA-graph
 * capture and replay, and a forced timeout that returns GC_ERR_TIMEOUT instead of hanging. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "gc_internal.h"
#include "gc_rng.h"
#include "kernels.h"
#include "gc_test.h"

/* One all-reduce checked end to end: fresh input, poisoned output, float64 reference, identical
 * bits on every rank. send/recv are device buffers of the caller's choosing (eager or symmetric);
 * in place when send == recv. */
static void check_allreduce(gc_comm_t comm, const char *what, void *send, void *recv, size_t count, gc_dtype_t dtype,
                            gc_op_t op, const gc_options_t *opts, int salt) {
  gc_options_t o = opts ? *opts : (gc_options_t)GC_OPTIONS_INIT;
  gc_dtype_t out_dtype = o.out_dtype == GC_DTYPE_SAME ? dtype : o.out_dtype;
  size_t os = gc_dtype_size(out_dtype);
  gc_test_fill(send, count, dtype, gc_test_rank, salt);
  void *add_host = NULL; /* read before the call: the add vector may be recv (a residual in place) */
  if (o.add) {
    add_host = malloc(count * gc_dtype_size(dtype));
    CU_ASSERT_PTR_NOT_NULL_FATAL(add_host);
    gc_test_download(add_host, o.add, count * gc_dtype_size(dtype));
  }
  if (send != recv && o.add != recv) gc_test_poison(recv, count * os);
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(comm, &stream));
  GC_TEST_OK(gc_allreduce_ex(send, recv, count, dtype, op, comm, stream, &o));
  GC_TEST_OK(gc_synchronize(comm, stream));
  void *host = malloc(count * os);
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  gc_test_download(host, recv, count * os);
  gc_test_red_t R;
  gc_test_red_init(&R, dtype, op, salt);
  R.out_dtype = out_dtype;
  R.scale = o.scale;
  R.add = add_host;
  size_t bad = gc_test_check_red(what, &R, host, count, count > (1u << 22) ? 97 : 1);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(gc_test_same_on_all_ranks(host, count * os));
  free(add_host);
  free(host);
}

static const size_t sizes[] = {1, 7, 4099, 65537, 1048577, 8388608};

static void test_forced_algorithms(void) {
  if (!gc_test_peer_gpus("forced algorithms", 1)) return;
  static const gc_algo_t algos[] = {GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT, GC_ALGO_WRITES};
  size_t maxn = sizes[sizeof sizes / sizeof sizes[0] - 1];
  void *a = gc_test_alloc(maxn * 4), *b = gc_test_alloc(maxn * 4);
  int salt = 100;
  for (size_t ai = 0; ai < 3; ai++)
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      gc_options_t o = GC_OPTIONS_INIT;
      o.algo = algos[ai];
      char what[96];
      snprintf(what, sizeof what, "%s bf16 sum n=%zu", gc_algo_name(algos[ai]), sizes[si]);
      check_allreduce(gc_test_comm, what, a, b, sizes[si], GC_BFLOAT16, GC_SUM, &o, salt++);
      snprintf(what, sizeof what, "%s f32 max in-place n=%zu", gc_algo_name(algos[ai]), sizes[si]);
      check_allreduce(gc_test_comm, what, a, a, sizes[si], GC_FLOAT32, GC_MAX, &o, salt++);
      snprintf(what, sizeof what, "%s i32 avg n=%zu", gc_algo_name(algos[ai]), sizes[si]);
      check_allreduce(gc_test_comm, what, a, b, sizes[si], GC_INT32, GC_AVG, &o, salt++);
    }
  gc_test_free(a);
  gc_test_free(b);
}

static void test_symmetric_zero_copy(void) {
  if (!gc_test_peer_gpus("symmetric buffers", 1)) return;
  size_t n = 3 * 1048576 + 5;
  void *a = NULL, *b = NULL;
  GC_TEST_OK(gc_mem_alloc(gc_test_comm, n * 4, &a));
  GC_TEST_OK(gc_mem_alloc(gc_test_comm, n * 4, &b));
  int salt = 200;
  for (int algo = GC_ALGO_ONESHOT; algo <= GC_ALGO_WRITES; algo++) {
    gc_options_t o = GC_OPTIONS_INIT;
    o.algo = (gc_algo_t)algo;
    check_allreduce(gc_test_comm, "symmetric out-of-place bf16", a, b, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    check_allreduce(gc_test_comm, "symmetric in-place f32", a, a, n, GC_FLOAT32, GC_SUM, &o, salt++);
    check_allreduce(gc_test_comm, "symmetric small f16 min", a, b, 1000, GC_FLOAT16, GC_MIN, &o, salt++);
    /* Under 16 elements: one chunk (the two-shot by reads once looped forever on 0-element chunks). */
    check_allreduce(gc_test_comm, "symmetric 1 element f32", a, b, 1, GC_FLOAT32, GC_SUM, &o, salt++);
    check_allreduce(gc_test_comm, "symmetric 15 elements bf16 in place", a, a, 15, GC_BFLOAT16, GC_MAX, &o, salt++);
    /* Offsets that break 16-byte alignment take the element-wise path, still zero-copy. */
    check_allreduce(gc_test_comm, "symmetric unaligned bf16", (char *)a + 2, (char *)b + 6, 70001, GC_BFLOAT16, GC_SUM,
                    &o, salt++);
    /* In place off 16-byte boundaries: the two-shot kernel cannot take it, and the one-shot
     * kernel in place must not read peers' inputs that they overwrite. */
    check_allreduce(gc_test_comm, "symmetric unaligned bf16 in place", (char *)a + 4, (char *)a + 4, 262147,
                    GC_BFLOAT16, GC_SUM, &o, salt++);
  }
  /* Reduce-scatter and all-gather read symmetric inputs in place too. */
  size_t rc = 100003;
  void *out = gc_test_alloc(rc * 2 * gc_test_size);
  gc_test_fill(a, rc * gc_test_size, GC_BFLOAT16, gc_test_rank, 300);
  GC_TEST_OK(gc_reducescatter(a, out, rc, GC_BFLOAT16, GC_SUM, gc_test_comm, NULL));
  GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
  unsigned short *h = malloc(rc * 2);
  gc_test_download(h, out, rc * 2);
  gc_test_red_t R;
  gc_test_red_init(&R, GC_BFLOAT16, GC_SUM, 300);
  R.base = (size_t)gc_test_rank * rc;
  CU_ASSERT_EQUAL(gc_test_check_red("symmetric reduce-scatter", &R, h, rc, 1), 0);
  free(h);
  gc_test_free(out);
  GC_TEST_OK(gc_mem_free(gc_test_comm, a));
  GC_TEST_OK(gc_mem_free(gc_test_comm, b));
}

/* A 64 KiB staging area forces every eager collective through many chunks. */
static void test_small_staging_chunks(void) {
  if (!gc_test_peer_gpus("chunked staging", 1)) return;
  gc_comm_t c = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.staging_bytes = 65536;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  size_t n = 1048576 + 3;
  void *a = gc_test_alloc(n * 4 * gc_test_size), *b = gc_test_alloc(n * 4 * gc_test_size);
  for (int algo = GC_ALGO_ONESHOT; algo <= GC_ALGO_WRITES; algo++) {
    gc_options_t o = GC_OPTIONS_INIT;
    o.algo = (gc_algo_t)algo;
    check_allreduce(c, "chunked f32 sum", a, b, n, GC_FLOAT32, GC_SUM, &o, 400 + algo);
    check_allreduce(c, "chunked bf16 in place", a, a, n, GC_BFLOAT16, GC_SUM, &o, 410 + algo);
  }
  /* The two-shot by writes takes every chunk in one kernel: epilogues index the add vector by the
   * whole call's element, a wider output takes smaller chunks, a residual added in place. */
  void *add = gc_test_alloc(n * 2);
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_WRITES;
  o.scale = 0.5;
  o.add = add;
  o.out_dtype = GC_FLOAT32;
  gc_test_fill(add, n, GC_BFLOAT16, -1, 440);
  check_allreduce(c, "chunked bf16 scale+add -> f32", a, b, n, GC_BFLOAT16, GC_SUM, &o, 441);
  o.out_dtype = GC_DTYPE_SAME;
  o.add = b;
  gc_test_fill(b, n, GC_BFLOAT16, -1, 442);
  check_allreduce(c, "chunked bf16 residual in place", a, b, n, GC_BFLOAT16, GC_SUM, &o, 443);
  gc_test_free(add);
  /* all-gather of parts larger than staging */
  gc_test_fill(a, n, GC_FLOAT32, gc_test_rank, 420);
  gc_test_poison(b, n * 4 * gc_test_size);
  GC_TEST_OK(gc_allgather(a, b, n, GC_FLOAT32, c, NULL));
  GC_TEST_OK(gc_synchronize(c, NULL));
  float *h = malloc(n * 4 * gc_test_size);
  gc_test_download(h, b, n * 4 * gc_test_size);
  size_t bad = 0;
  for (int r = 0; r < gc_test_size; r++)
    for (size_t i = 0; i < n; i += 1 + (i % 7))
      bad += h[r * n + i] != (float)gc_test_input(GC_FLOAT32, r, 420, i);
  CU_ASSERT_EQUAL(bad, 0);
  /* broadcast larger than staging from the last rank */
  int root = gc_test_size - 1;
  gc_test_fill(a, n, GC_FLOAT32, root, 430);
  gc_test_poison(b, n * 4);
  GC_TEST_OK(gc_broadcast(a, b, n, GC_FLOAT32, root, c, NULL));
  GC_TEST_OK(gc_synchronize(c, NULL));
  gc_test_download(h, b, n * 4);
  bad = 0;
  for (size_t i = 0; i < n; i++) bad += h[i] != (float)gc_test_input(GC_FLOAT32, root, 430, i);
  CU_ASSERT_EQUAL(bad, 0);
  free(h);
  gc_test_free(a);
  gc_test_free(b);
  GC_TEST_OK(gc_comm_destroy(c));
}

static void test_fused_epilogue(void) {
  if (!gc_test_peer_gpus("fused epilogues", 1)) return;
  size_t n = 262147;
  void *a = gc_test_alloc(n * 4), *b = gc_test_alloc(n * 4), *add = gc_test_alloc(n * 4);
  gc_test_fill(add, n, GC_BFLOAT16, -1, 500);
  for (int algo = GC_ALGO_ONESHOT; algo <= GC_ALGO_WRITES; algo++) {
    gc_options_t o = GC_OPTIONS_INIT;
    o.algo = (gc_algo_t)algo;
    o.scale = 0.5;
    o.add = add;
    check_allreduce(gc_test_comm, "bf16 scale+add", a, b, n, GC_BFLOAT16, GC_SUM, &o, 510 + algo);
    o.out_dtype = GC_FP8_E4M3;
    check_allreduce(gc_test_comm, "bf16 -> fp8 e4m3", a, b, n, GC_BFLOAT16, GC_SUM, &o, 520 + algo);
    o.add = NULL;
    o.out_dtype = GC_FLOAT32;
    check_allreduce(gc_test_comm, "bf16 avg -> f32", a, b, n, GC_BFLOAT16, GC_AVG, &o, 530 + algo);
  }
  gc_test_free(a);
  gc_test_free(b);
  gc_test_free(add);
}

static void test_pdl(void) {
  if (!gc_test_peer_gpus("programmatic dependent launch", 1)) return;
  size_t n = 65536 + 8;
  void *a = gc_test_alloc(n * 2), *b = gc_test_alloc(n * 2);
  gc_options_t o = GC_OPTIONS_INIT;
  for (int i = 0; i < 6; i++) { /* on, off, and the communicator's GC_PDL (on for sm_90+) in turn */
    o.pdl = i % 3 - 1;
    check_allreduce(gc_test_comm, "pdl bf16", a, b, n, GC_BFLOAT16, GC_SUM, &o, 600 + i);
  }
  gc_test_free(a);
  gc_test_free(b);
}

/* Captures an all-reduce (eager, through staging) and an all-gather into one graph, replays it
 * three times on fresh inputs, and checks every replay. */
static void test_graph_capture(void) {
  if (!gc_test_peer_gpus("graph capture", 1)) return;
  size_t n = 300007;
  void *send = gc_test_alloc(n * 2), *recv = gc_test_alloc(n * 2), *gather = gc_test_alloc(n * 2 * gc_test_size);
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  /* gpucoll's own entry points enqueue on the stream; the graph records them. */
  gc_result_t r1, r2;
  int capture_ok = 1;
  void *exec = NULL;
  capture_ok &= gc_test_capture(stream, 1, NULL) == 0;
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_TWOSHOT;
  r1 = gc_allreduce_ex(send, recv, n, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  gc_options_t go = GC_OPTIONS_INIT;
  go.algo = gc_test_kernel_algo();
  r2 = gc_allgather_ex(recv, gather, n, GC_BFLOAT16, gc_test_comm, stream, &go);
  capture_ok &= gc_test_capture(stream, 0, &exec) == 0;
  CU_ASSERT_EQUAL(r1, GC_SUCCESS);
  CU_ASSERT_EQUAL(r2, GC_SUCCESS);
  CU_ASSERT_FATAL(gc_test_all(capture_ok && r1 == GC_SUCCESS && r2 == GC_SUCCESS));
  unsigned short *h = malloc(n * 2 * gc_test_size);
  for (int replay = 0; replay < 3; replay++) {
    int salt = 700 + replay;
    gc_test_fill(send, n, GC_BFLOAT16, gc_test_rank, salt);
    gc_test_poison(gather, n * 2 * gc_test_size);
    CU_ASSERT_EQUAL(gc_test_replay(exec, stream), 0);
    GC_TEST_OK(gc_synchronize(gc_test_comm, stream));
    gc_test_download(h, gather, n * 2 * gc_test_size);
    gc_test_red_t R;
    gc_test_red_init(&R, GC_BFLOAT16, GC_SUM, salt);
    for (int r = 0; r < gc_test_size; r++)
      CU_ASSERT_EQUAL(gc_test_check_red("graph replay", &R, h + (size_t)r * n, n, 1), 0);
  }
  gc_test_graph_destroy(exec);
  free(h);
  gc_test_free(send);
  gc_test_free(recv);
  gc_test_free(gather);
}

/* One replay of exec: `in` refilled (m bf16 elements, salt), `poison` bytes at `out` poisoned,
 * then the first m results at out downloaded into host; returns how many (every stride-th) are
 * not the all-reduce of that input. */
static size_t replay_allreduce(void *exec, void *stream, void *in, void *out, size_t m, size_t poison, int salt,
                               size_t stride, const char *what, unsigned short *host) {
  gc_test_fill(in, m, GC_BFLOAT16, gc_test_rank, salt);
  gc_test_poison(out, poison);
  CU_ASSERT_EQUAL(gc_test_replay(exec, stream), 0);
  GC_TEST_OK(gc_synchronize(gc_test_comm, stream));
  gc_test_download(host, out, m * 2);
  gc_test_red_t R;
  gc_test_red_init(&R, GC_BFLOAT16, GC_SUM, salt);
  return gc_test_check_red(what, &R, host, m, stride);
}

/* Elements i < m of the bf16 buffer `got` that are not n times element i of `once` (within 1%:
 * a call whose inputs were another call's bf16 outputs). */
static size_t not_n_times(const unsigned short *once, const unsigned short *got, size_t m, int n) {
  size_t bad = 0;
  for (size_t i = 0; i < m; i++) {
    float want = (float)gc_element_get(once, i, GC_BFLOAT16) * n;
    float x = (float)gc_element_get(got, i, GC_BFLOAT16);
    bad += !(fabsf(x - want) <= 1e-2f * fabsf(want) + 1e-6f);
  }
  return bad;
}

/* The barrier-free all-reduce (oneshot_ll): counts that end mid-pack, every dtype it takes, ops,
 * in place, unaligned pointers, epilogues and casts; calls of changing sizes queued back to back
 * (the generations rotate, each left all-ones for the next), with other collectives' LL calls
 * between them; inputs holding the sentinel bit pattern itself; refusals; the table's fallback
 * for integers; graph capture and replay. */
/* LL calls across the wrap of their 32-bit count: each call's generation (its number mod
 * GC_LL_GENS) differs from the one before, and the results stay right. 2^32 is no multiple of 3:
 * counting on through 0xFFFFFFFF gave calls 0xFFFFFFFF and 0 the same generation, so the second
 * wrote into areas peers might not have read yet. */
static void test_ll_call_wrap(void) {
  if (!gc_test_peer_gpus("LL call count wrap", 2)) return;
  gc_comm_t comm = gc_test_comm;
  uint32_t *ll_call = &((gc_ksignals_t *)comm->tp.signals[comm->local_rank])->ll_call;
  uint32_t last = 0xFFFFFFFCu, kept = 0; /* the same on every rank, as the counts always are */
  GC_TEST_OK(gc_synchronize(comm, NULL));
  CU_ASSERT_EQUAL_FATAL(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(cudaMemcpy(&kept, ll_call, sizeof kept, cudaMemcpyDeviceToHost), cudaSuccess);
  CU_ASSERT_EQUAL_FATAL(cudaMemcpy(ll_call, &last, sizeof last, cudaMemcpyHostToDevice), cudaSuccess);
  CU_ASSERT_EQUAL_FATAL(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  void *a = gc_test_alloc(4099 * 2), *b = gc_test_alloc(4099 * 2);
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_ONESHOT_LL;
  for (int i = 0; i < 6; i++) {
    char what[64];
    snprintf(what, sizeof what, "oneshot_ll bf16 sum, LL call 0x%08x", last);
    check_allreduce(comm, what, a, b, 4099, GC_BFLOAT16, GC_SUM, &o, 2000 + i);
    uint32_t now = 0;
    CU_ASSERT_EQUAL_FATAL(cudaMemcpy(&now, ll_call, sizeof now, cudaMemcpyDeviceToHost), cudaSuccess);
    if (now % GC_LL_GENS == last % GC_LL_GENS)
      fprintf(stderr, "[rank %d] LL calls 0x%08x and 0x%08x share generation %u\n", gc_test_rank, last, now,
              now % GC_LL_GENS);
    CU_ASSERT_NOT_EQUAL(now % GC_LL_GENS, last % GC_LL_GENS);
    last = now;
  }
  /* The count goes back: the broadcasts' "started" words (ll_started) hold numbers of the count
   * as it was, and a count behind them would let a root run calls ahead of its peers. */
  GC_TEST_OK(gc_synchronize(comm, NULL));
  CU_ASSERT_EQUAL_FATAL(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(cudaMemcpy(ll_call, &kept, sizeof kept, cudaMemcpyHostToDevice), cudaSuccess);
  CU_ASSERT_EQUAL_FATAL(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  gc_test_free(b);
  gc_test_free(a);
}

static void test_ll_allreduce(void) {
  if (!gc_test_peer_gpus("LL all-reduce", 2)) return;
  static const size_t counts[] = {1, 7, 9, 4099, 65537, 262147};
  const size_t big = 2 * 1048576 + 5; /* float32: more than one LL generation holds */
  void *a = gc_test_alloc(big * 4), *b = gc_test_alloc(big * 4), *add = gc_test_alloc(big * 4);
  gc_test_fill(add, big, GC_BFLOAT16, -1, 1099);
  int salt = 1000;
  char what[96];
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_ONESHOT_LL;
  for (size_t si = 0; si < sizeof counts / sizeof counts[0]; si++) {
    size_t n = counts[si];
    snprintf(what, sizeof what, "oneshot_ll bf16 sum n=%zu", n);
    check_allreduce(gc_test_comm, what, a, b, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    snprintf(what, sizeof what, "oneshot_ll f16 sum unaligned n=%zu", n);
    check_allreduce(gc_test_comm, what, (char *)a + 2, (char *)b + 6, n, GC_FLOAT16, GC_SUM, &o, salt++);
    snprintf(what, sizeof what, "oneshot_ll f32 max in place n=%zu", n);
    check_allreduce(gc_test_comm, what, a, a, n, GC_FLOAT32, GC_MAX, &o, salt++);
  }
  gc_options_t e = o;
  e.out_dtype = GC_FLOAT32;
  check_allreduce(gc_test_comm, "oneshot_ll bf16 avg -> f32", a, b, 100003, GC_BFLOAT16, GC_AVG, &e, salt++);
  e.out_dtype = GC_FP8_E4M3;
  e.scale = 0.5;
  e.add = add;
  check_allreduce(gc_test_comm, "oneshot_ll bf16 scale+add -> fp8", a, b, 100003, GC_BFLOAT16, GC_SUM, &e, salt++);
  e.out_dtype = GC_DTYPE_SAME;
  check_allreduce(gc_test_comm, "oneshot_ll bf16 scale+add, unaligned", (char *)a + 2, (char *)b + 2, 9001,
                  GC_BFLOAT16, GC_SUM, &e, salt++);
  gc_options_t c = o;
  c.out_dtype = GC_BFLOAT16;
  check_allreduce(gc_test_comm, "oneshot_ll f32 prod -> bf16", a, b, 3001, GC_FLOAT32, GC_PROD, &c, salt++);

  /* Refused by name: integers, a float64 output, more than one generation holds. */
  CU_ASSERT_EQUAL(gc_allreduce_ex(a, b, 1000, GC_INT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "float16"));
  c.out_dtype = GC_FLOAT64;
  CU_ASSERT_EQUAL(gc_allreduce_ex(a, b, 1000, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &c), GC_ERR_UNSUPPORTED);
  CU_ASSERT_EQUAL(gc_allreduce_ex(a, b, big, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
  /* The table picks LL at these sizes for bf16; int32 takes the row's other algorithm. */
  check_allreduce(gc_test_comm, "auto i32 sum 16 KB", a, b, 4096, GC_INT32, GC_SUM, NULL, salt++);
  check_allreduce(gc_test_comm, "auto bf16 sum 16 KB", a, b, 8192, GC_BFLOAT16, GC_SUM, NULL, salt++);

  /* Back to back, no synchronisation between calls: sizes change while peers may run a call
   * ahead, and an LL all-gather between every two all-reduces takes its own generation. Inputs
   * and outputs are disjoint slices of a and b. */
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  enum { QUEUED = 8 };
  const size_t slice = 65536, qn[QUEUED] = {5, 65536, 4099, 1, 60000, 8, 33333, 65535};
  void *gathered = gc_test_alloc(16 * 2 * (size_t)gc_test_size);
  for (int i = 0; i < QUEUED; i++) gc_test_fill((char *)a + i * slice * 2, qn[i], GC_BFLOAT16, gc_test_rank, 1200 + i);
  gc_test_poison(b, QUEUED * slice * 2);
  for (int i = 0; i < QUEUED; i++) {
    GC_TEST_OK(gc_allreduce_ex((char *)a + i * slice * 2, (char *)b + i * slice * 2, qn[i], GC_BFLOAT16, GC_SUM,
                               gc_test_comm, stream, &o));
    GC_TEST_OK(gc_allgather_ex(add, gathered, 16, GC_BFLOAT16, gc_test_comm, stream, &o));
  }
  GC_TEST_OK(gc_synchronize(gc_test_comm, stream));
  gc_test_free(gathered);
  unsigned short *h = malloc(QUEUED * slice * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  gc_test_download(h, b, QUEUED * slice * 2);
  for (int i = 0; i < QUEUED; i++) {
    gc_test_red_t R;
    gc_test_red_init(&R, GC_BFLOAT16, GC_SUM, 1200 + i);
    CU_ASSERT_EQUAL(gc_test_check_red("LL queued calls", &R, h + i * slice, qn[i], 1), 0);
  }

  /* Inputs holding the sentinel itself (all-ones: a NaN) come out as NaN and do not stall. */
  const size_t sn = 4103;
  unsigned short *x = malloc(sn * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  for (size_t i = 0; i < sn; i++) x[i] = i % 100 == 3 ? 0xFFFF : 0x3F80; /* bf16 1.0 */
  CU_ASSERT_EQUAL(gc_memcpy(gc_test_comm, a, x, sn * 2), GC_SUCCESS);
  GC_TEST_OK(gc_allreduce_ex(a, b, sn, GC_BFLOAT16, GC_SUM, gc_test_comm, NULL, &o));
  GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
  gc_test_download(x, b, sn * 2);
  size_t bad = 0;
  for (size_t i = 0; i < sn; i++) {
    double v = gc_element_get(x, i, GC_BFLOAT16);
    bad += i % 100 == 3 ? !isnan(v) : v != gc_test_size;
  }
  CU_ASSERT_EQUAL(bad, 0);
  free(x);

  /* Captured once (two calls, the second on the first's output), replayed three times. */
  const size_t m = 200003;
  void *exec = NULL;
  int capture_ok = gc_test_capture(stream, 1, NULL) == 0;
  gc_result_t r1 = gc_allreduce_ex(a, b, m, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  gc_result_t r2 = gc_allreduce_ex(b, (char *)b + m * 2, m, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  capture_ok &= gc_test_capture(stream, 0, &exec) == 0;
  CU_ASSERT_FATAL(gc_test_all(capture_ok && r1 == GC_SUCCESS && r2 == GC_SUCCESS));
  unsigned short *g = malloc(m * 2), *g2 = malloc(m * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g2);
  for (int replay = 0; replay < 3; replay++) {
    CU_ASSERT_EQUAL(replay_allreduce(exec, stream, a, b, m, m * 4, 1300 + replay, 1, "LL graph replay", g), 0);
    /* The second call sums n copies of the first's output (every rank holds the same). */
    gc_test_download(g2, (char *)b + m * 2, m * 2);
    CU_ASSERT(gc_test_same_on_all_ranks(g2, m * 2));
    CU_ASSERT_EQUAL(not_n_times(g, g2, m, gc_test_size), 0);
  }
  gc_test_graph_destroy(exec);
  free(g);
  free(g2);
  free(h);
  gc_test_free(a);
  gc_test_free(b);
  gc_test_free(add);
}

/* The copy-engine all-reduce: dtypes, ops, in place, unaligned offsets, counts with and without
 * a tail past the last whole 16 n, fused epilogues with and without a cast, a 1 MB staging area,
 * graph capture and replay; on symmetric outputs and, staged, on outputs peers cannot write. At
 * these sizes the reduce half is by reads (symmetric) or by writes (staged) unless
 * the ce_allreduce switch names another (the gpu_*_ce_* tests: by copies, by writes). */
static void test_copyengine_allreduce(void) {
  if (!gc_test_peer_gpus("copy-engine all-reduce", 2)) return;
  gc_comm_t small = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.staging_bytes = 1 << 20;
  GC_TEST_OK(gc_comm_init(&small, MPI_COMM_WORLD, &cfg));
  gc_comm_t comms[2] = {gc_test_comm, small};
  size_t n = 5 * 1048576 + 3;
  int salt = 900;
  void *add = gc_test_alloc(n * 2);
  gc_test_fill(add, n, GC_BFLOAT16, -1, 899);
  for (int k = 0; k < 2; k++) {
    gc_comm_t c = comms[k];
    void *a = NULL, *b = NULL;
    GC_TEST_OK(gc_mem_alloc(c, n * 4, &a));
    GC_TEST_OK(gc_mem_alloc(c, n * 4, &b));
    gc_options_t o = GC_OPTIONS_INIT;
    o.algo = GC_ALGO_COPYENGINE;
    check_allreduce(c, "copyengine bf16 sum", a, b, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    check_allreduce(c, "copyengine f32 sum in place", a, a, n, GC_FLOAT32, GC_SUM, &o, salt++);
    check_allreduce(c, "copyengine i32 avg", a, b, 1000003, GC_INT32, GC_AVG, &o, salt++);
    check_allreduce(c, "copyengine f64 max", a, b, 7, GC_FLOAT64, GC_MAX, &o, salt++);
    check_allreduce(c, "copyengine f16 min", a, b, 1, GC_FLOAT16, GC_MIN, &o, salt++);
    check_allreduce(c, "copyengine unaligned bf16", (char *)a + 2, (char *)b + 6, 700001, GC_BFLOAT16, GC_SUM, &o,
                    salt++);
    check_allreduce(c, "copyengine unaligned bf16, several pipeline chunks", (char *)a + 2, (char *)b + 6, n - 16,
                    GC_BFLOAT16, GC_SUM, &o, salt++);
    void *eager = gc_test_alloc(n * 2); /* an input peers cannot read: copied into the output first */
    check_allreduce(c, "copyengine bf16 from a plain input", eager, b, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    check_allreduce(c, "copyengine f16 odd count from a plain input", eager, b, 1000001, GC_FLOAT16, GC_SUM, &o, salt++);
    /* An output peers cannot write: through staging (gc__ce_allreduce_staged), in chunks of a
     * staging row (about 340 KB with the 1 MB area: many chunks through all three buffers). */
    void *plain = gc_test_alloc(n * 4);
    check_allreduce(c, "copyengine staged bf16", eager, plain, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    check_allreduce(c, "copyengine staged f32 in place", plain, plain, n, GC_FLOAT32, GC_SUM, &o, salt++);
    check_allreduce(c, "copyengine staged i32 avg, symmetric input", a, plain, 1000003, GC_INT32, GC_AVG, &o, salt++);
    check_allreduce(c, "copyengine staged f64 max", eager, plain, 7, GC_FLOAT64, GC_MAX, &o, salt++);
    check_allreduce(c, "copyengine staged u8 min, 1 element", eager, plain, 1, GC_UINT8, GC_MIN, &o, salt++);
    check_allreduce(c, "copyengine staged unaligned f16", (char *)eager + 2, (char *)plain + 6, n - 16, GC_FLOAT16,
                    GC_SUM, &o, salt++);
    /* A residual added in place on rank 0 only (the others add a copy of it) from a plain input:
     * the same form on every rank all the same (by reads, rank 0 sets its residual aside). */
    void *copy = gc_test_alloc(n * 2);
    gc_test_fill(b, n, GC_BFLOAT16, -1, 897);
    gc_test_fill(copy, n, GC_BFLOAT16, -1, 897);
    o.add = gc_test_rank == 0 ? b : copy;
    check_allreduce(c, "copyengine bf16 residual in place on rank 0 only", eager, b, n, GC_BFLOAT16, GC_SUM, &o,
                    salt++);
    o.add = NULL;
    gc_test_free(copy);
    gc_test_free(eager);
    o.scale = 0.5;
    o.add = add;
    check_allreduce(c, "copyengine bf16 scale+add", a, b, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    check_allreduce(c, "copyengine staged bf16 scale+add", a, plain, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    gc_test_fill(plain, n, GC_BFLOAT16, -1, 898); /* a residual added in place: add == recv, plain */
    o.add = plain;
    check_allreduce(c, "copyengine staged bf16 residual in place", b, plain, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    o.add = add;
    o.out_dtype = GC_FP8_E4M3;
    check_allreduce(c, "copyengine bf16 scale+add -> fp8", a, b, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    check_allreduce(c, "copyengine staged bf16 scale+add -> fp8", a, plain, n, GC_BFLOAT16, GC_SUM, &o, salt++);
    gc_test_free(plain);
    GC_TEST_OK(gc_mem_free(c, a));
    GC_TEST_OK(gc_mem_free(c, b));
  }
  GC_TEST_OK(gc_comm_destroy(small));

  /* Captured once, replayed three times on fresh inputs. */
  size_t m = 3 * 1048576 + 11;
  void *a = NULL, *b = NULL, *stream = NULL, *exec = NULL;
  GC_TEST_OK(gc_mem_alloc(gc_test_comm, m * 2, &a));
  GC_TEST_OK(gc_mem_alloc(gc_test_comm, m * 2, &b));
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_COPYENGINE;
  int capture_ok = gc_test_capture(stream, 1, NULL) == 0;
  gc_result_t r = gc_allreduce_ex(a, b, m, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  capture_ok &= gc_test_capture(stream, 0, &exec) == 0;
  CU_ASSERT_EQUAL(r, GC_SUCCESS);
  CU_ASSERT_FATAL(gc_test_all(capture_ok && r == GC_SUCCESS));
  unsigned short *h = malloc(m * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  for (int replay = 0; replay < 3; replay++)
    CU_ASSERT_EQUAL(replay_allreduce(exec, stream, a, b, m, m * 2, 950 + replay, 97, "copyengine graph replay", h), 0);
  gc_test_graph_destroy(exec);

  /* The staged form (plain input and output) captured and replayed the same way. */
  void *pin = gc_test_alloc(m * 2), *pout = gc_test_alloc(m * 2);
  capture_ok = gc_test_capture(stream, 1, NULL) == 0;
  r = gc_allreduce_ex(pin, pout, m, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  capture_ok &= gc_test_capture(stream, 0, &exec) == 0;
  CU_ASSERT_EQUAL(r, GC_SUCCESS);
  CU_ASSERT_FATAL(gc_test_all(capture_ok && r == GC_SUCCESS));
  for (int replay = 0; replay < 3; replay++)
    CU_ASSERT_EQUAL(replay_allreduce(exec, stream, pin, pout, m, m * 2, 960 + replay, 97, "staged graph replay", h), 0);
  gc_test_graph_destroy(exec);
  free(h);
  gc_test_free(pin);
  gc_test_free(pout);
  gc_test_free(add);
  GC_TEST_OK(gc_mem_free(gc_test_comm, a));
  GC_TEST_OK(gc_mem_free(gc_test_comm, b));
}

/* Calls of every kind queued back to back with no synchronisation: reduce-scatter by writes keeps
 * its inboxes in the staging area that the two-shot by writes, the copy-engine reduce-scatter, the
 * staged copy-engine all-reduce and the copy-ins use too, and its signal values run on from call
 * to call. All bf16 sums, each call
 * on its own slice of the buffers, checked after one synchronisation; then an all-reduce and a
 * reduce-scatter by writes captured in a graph and replayed. */
enum { Q_AR_SYM, Q_AR_EAGER, Q_RS };
static void test_bywrites_queued(void) {
  if (!gc_test_peer_gpus("queued calls by writes", 2)) return;
  enum { QUEUED = 13 };
  static const struct {
    int kind;
    size_t count; /* all-reduce: elements; reduce-scatter: recvcount */
    gc_algo_t algo;
  } q[QUEUED] = {{Q_AR_SYM, 3000001, GC_ALGO_WRITES}, {Q_RS, 1000003, GC_ALGO_WRITES},
                 {Q_AR_EAGER, 2000003, GC_ALGO_WRITES}, {Q_AR_SYM, 5, GC_ALGO_WRITES},
                 {Q_AR_EAGER, 300001, GC_ALGO_ONESHOT}, {Q_RS, 77, GC_ALGO_WRITES},
                 {Q_AR_SYM, 2500007, GC_ALGO_COPYENGINE}, {Q_RS, 500001, GC_ALGO_COPYENGINE},
                 {Q_AR_EAGER, 3000017, GC_ALGO_COPYENGINE}, {Q_AR_SYM, 1048576, GC_ALGO_WRITES},
                 {Q_AR_EAGER, 4099, GC_ALGO_TWOSHOT}, {Q_RS, 700001, GC_ALGO_WRITES},
                 {Q_AR_EAGER, 999999, GC_ALGO_COPYENGINE}};
  const int n = gc_test_size, me = gc_test_rank;
  const size_t m = 2097169; /* the captured all-reduce's count, below */
  /* Elements per call's slice: the largest input (a reduce-scatter's is n x its count; a fixed
   * 4.2 M would run past the buffers on 8 ranks). */
  size_t slot = m;
  for (int i = 0; i < QUEUED; i++) {
    size_t in = q[i].kind == Q_RS ? q[i].count * n : q[i].count;
    if (in > slot) slot = in;
  }
  char *sym_in = NULL, *sym_out = NULL;
  GC_TEST_OK(gc_mem_alloc(gc_test_comm, QUEUED * slot * 2, (void **)&sym_in));
  GC_TEST_OK(gc_mem_alloc(gc_test_comm, QUEUED * slot * 2, (void **)&sym_out));
  char *eag_in = gc_test_alloc(QUEUED * slot * 2), *eag_out = gc_test_alloc(QUEUED * slot * 2);
  CU_ASSERT_FATAL(gc_test_all(sym_in && sym_out));
  for (int i = 0; i < QUEUED; i++) {
    char *in = (q[i].kind == Q_AR_SYM ? sym_in : eag_in) + i * slot * 2;
    gc_test_fill(in, q[i].kind == Q_RS ? q[i].count * n : q[i].count, GC_BFLOAT16, me, 1600 + i);
  }
  gc_test_poison(sym_out, QUEUED * slot * 2);
  gc_test_poison(eag_out, QUEUED * slot * 2);
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  gc_result_t r = GC_SUCCESS;
  for (int i = 0; i < QUEUED && r == GC_SUCCESS; i++) {
    gc_options_t o = GC_OPTIONS_INIT;
    o.algo = q[i].algo;
    char *in = (q[i].kind == Q_AR_SYM ? sym_in : eag_in) + i * slot * 2;
    char *out = (q[i].kind == Q_AR_SYM ? sym_out : eag_out) + i * slot * 2;
    r = q[i].kind == Q_RS ? gc_reducescatter_ex(in, out, q[i].count, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o)
                          : gc_allreduce_ex(in, out, q[i].count, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  }
  CU_ASSERT_EQUAL(r, GC_SUCCESS);
  if (r == GC_SUCCESS) r = gc_synchronize(gc_test_comm, stream);
  CU_ASSERT_FATAL(gc_test_all(r == GC_SUCCESS));
  unsigned short *h = malloc(slot * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  for (int i = 0; i < QUEUED; i++) {
    char *out = (q[i].kind == Q_AR_SYM ? sym_out : eag_out) + i * slot * 2;
    gc_test_download(h, out, q[i].count * 2);
    gc_test_red_t R;
    gc_test_red_init(&R, GC_BFLOAT16, GC_SUM, 1600 + i);
    if (q[i].kind == Q_RS) R.base = (size_t)me * q[i].count;
    char what[96];
    snprintf(what, sizeof what, "queued call %d (%s, %zu)", i, gc_algo_name(q[i].algo), q[i].count);
    CU_ASSERT_EQUAL(gc_test_check_red(what, &R, h, q[i].count, 1), 0);
  }

  /* Captured once: a two-shot all-reduce by writes, then a reduce-scatter by writes of its output. */
  void *exec = NULL;
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_WRITES;
  int capture_ok = gc_test_capture(stream, 1, NULL) == 0;
  gc_result_t r1 = gc_allreduce_ex(sym_in, sym_out, m, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  gc_result_t r2 = gc_reducescatter_ex(sym_out, eag_out, m / n, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  capture_ok &= gc_test_capture(stream, 0, &exec) == 0;
  CU_ASSERT_FATAL(gc_test_all(capture_ok && r1 == GC_SUCCESS && r2 == GC_SUCCESS));
  unsigned short *g = malloc(m * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  for (int replay = 0; replay < 3; replay++) {
    gc_test_poison(eag_out, m / n * 2);
    CU_ASSERT_EQUAL(replay_allreduce(exec, stream, sym_in, sym_out, m, m * 2, 1700 + replay, 1, "by writes graph replay", g),
                    0);
    /* The reduce-scatter sums n copies of the all-reduce's output (every rank holds the same). */
    gc_test_download(h, eag_out, m / n * 2);
    CU_ASSERT_EQUAL(not_n_times(g + me * (m / n), h, m / n, n), 0);
  }
  gc_test_graph_destroy(exec);
  free(g);
  free(h);
  GC_TEST_OK(gc_mem_free(gc_test_comm, sym_in));
  GC_TEST_OK(gc_mem_free(gc_test_comm, sym_out));
  gc_test_free(eag_in);
  gc_test_free(eag_out);
}

/* Only rank 0 calls: its kernel waits for peers that never come, gives up after the configured
 * 300 ms, and the call's error surfaces as GC_ERR_TIMEOUT; the communicator stays failed. For a
 * kernel that waits at barriers (two-shot), one that waits on data (LL), and ones that wait on
 * point-to-point signals (reduce-scatter by writes; the broadcast and the all-gather by writes
 * through staging, whose roots wait for their slots to be freed). */
enum { T_ALLREDUCE, T_REDUCESCATTER, T_BROADCAST, T_ALLGATHER, T_ALLGATHER_CONTROL };
static void timeout_case(gc_algo_t algo, int kind) {
  gc_comm_t c = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.timeout_ms = 300;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  if (kind == T_ALLGATHER_CONTROL) c->sw.push_control = 1; /* the waits in the control warp */
  size_t n = 4096;
  void *a = gc_test_alloc(n * 4), *b = gc_test_alloc(n * 4);
  gc_test_fill(a, n, GC_FLOAT32, gc_test_rank, 800);
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(c, &stream));
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = algo;
  if (gc_test_rank == 0) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (kind == T_REDUCESCATTER) GC_TEST_OK(gc_reducescatter_ex(a, b, n / gc_test_size, GC_FLOAT32, GC_SUM, c, stream, &o));
    else if (kind == T_BROADCAST) GC_TEST_OK(gc_broadcast_ex(a, b, n, GC_FLOAT32, 0, c, stream, &o));
    else if (kind == T_ALLGATHER || kind == T_ALLGATHER_CONTROL) GC_TEST_OK(gc_allgather_ex(a, b, n / gc_test_size, GC_FLOAT32, c, stream, &o));
    else GC_TEST_OK(gc_allreduce_ex(a, b, n, GC_FLOAT32, GC_SUM, c, stream, &o));
    CU_ASSERT_EQUAL(gc_synchronize(c, stream), GC_ERR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CU_ASSERT(s < 30.0); /* bounded: 300 ms per wait, a few waits at most */
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(c), "GC_TIMEOUT_MS"));
    /* Sticky: the next call reports the failure instead of launching. */
    CU_ASSERT_EQUAL(gc_allreduce(a, b, n, GC_FLOAT32, GC_SUM, c, stream), GC_ERR_TIMEOUT);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  gc_test_free(a);
  gc_test_free(b);
  gc_result_t r = gc_comm_destroy(c);
  CU_ASSERT(r == GC_SUCCESS || (gc_test_rank == 0 && r == GC_ERR_TIMEOUT));
}

static void test_forced_timeout(void) {
  if (!gc_test_peer_gpus("forced timeout", 2)) return;
  if (gc_test_comm->check_calls == GC_CHECK_EVERY_CALL) { /* the lone call would time out comparing, on the host */
    gc_test_note("forced timeout: kernels' timeouts need GC_CHECK_CALLS unset; skipped");
    return;
  }
  timeout_case(GC_ALGO_TWOSHOT, T_ALLREDUCE);
  timeout_case(GC_ALGO_ONESHOT_LL, T_ALLREDUCE);
  timeout_case(GC_ALGO_WRITES, T_REDUCESCATTER); /* the reduction by writes waits on signals per piece */
  timeout_case(GC_ALGO_WRITES, T_BROADCAST); /* plain output: through staging */
  timeout_case(GC_ALGO_WRITES, T_ALLGATHER);
  timeout_case(GC_ALGO_WRITES, T_ALLGATHER_CONTROL);
}

/* One rank's call copies bytes, so its result is its input bit for bit: `bytes` random bytes
 * (NaN payloads and -0.0 among them, which a float sum would change) at `in`, `out` poisoned, the
 * call, then out compared with in. Returns whether they match. */
typedef gc_result_t (*one_rank_call_t)(void *in, void *out, size_t bytes, void *stream);

static int one_rank_copies(const char *what, one_rank_call_t call, void *in, void *out, size_t bytes, void *stream,
                           uint64_t seed) {
  unsigned char *want = malloc(bytes), *got = malloc(bytes);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_PTR_NOT_NULL_FATAL(got);
  const uint64_t base = gc__mix64(seed); /* the calls' seeds are consecutive: spread them */
  for (size_t i = 0; i < bytes; i++) want[i] = (unsigned char)(gc__mix64(base + i) >> 56);
  static const unsigned short specials[] = {0x8000, 0x7fc1, 0xff81, 0x7f80}; /* -0, NaNs, inf (bf16) */
  for (size_t k = 0; k < 4 && 2 * k + 1 < bytes; k++) memcpy(want + 2 * k, &specials[k], 2);
  CU_ASSERT_EQUAL_FATAL(cudaMemcpy(in, want, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  if (out != in) gc_test_poison(out, bytes);
  /* a copy from pageable memory may return before its DMA lands; the call's stream does not wait
   * for the legacy stream */
  CU_ASSERT_EQUAL_FATAL(cudaDeviceSynchronize(), cudaSuccess);
  GC_TEST_OK(call(in, out, bytes, stream));
  GC_TEST_OK(gc_synchronize(gc_test_comm, stream));
  gc_test_download(got, out, bytes);
  size_t first = bytes;
  for (size_t i = 0; i < bytes && first == bytes; i++)
    if (got[i] != want[i]) first = i;
  if (first < bytes)
    fprintf(stderr, "[rank 0] %s, %zu bytes: byte %zu is %#x, the input's %#x\n", what, bytes, first, got[first],
            want[first]);
  free(want);
  free(got);
  return first == bytes;
}

static gc_result_t one_allreduce(void *in, void *out, size_t bytes, void *stream) {
  return gc_allreduce(in, out, bytes / 2, GC_BFLOAT16, GC_SUM, gc_test_comm, stream);
}
static gc_result_t one_reducescatter(void *in, void *out, size_t bytes, void *stream) {
  return gc_reducescatter(in, out, bytes / 2, GC_BFLOAT16, GC_MAX, gc_test_comm, stream);
}
static gc_result_t one_columns(void *in, void *out, size_t bytes, void *stream) { /* axis 1: every column */
  return gc_reducescatter_2d(in, out, 3, bytes / 2 / 3, 1, GC_BFLOAT16, GC_AVG, gc_test_comm, stream, NULL);
}
static gc_result_t one_allgather(void *in, void *out, size_t bytes, void *stream) {
  return gc_allgather(in, out, bytes, GC_UINT8, gc_test_comm, stream);
}
static gc_result_t one_broadcast(void *in, void *out, size_t bytes, void *stream) {
  return gc_broadcast(in, out, bytes, GC_FP8_E4M3, 0, gc_test_comm, stream);
}

/* A communicator of one GPU: a call that asks for no algorithm returns its input as it is (a
 * copy out of place, nothing in place; by the SMs past GC_SOLO_MEMCPY_MAX bytes) for every
 * collective, odd sizes and unaligned pointers; epilogues still apply (float64 reference), in
 * place too; all of it captured in a graph and replayed. */
static void test_one_rank(void) {
  if (!gc_test_on_gpu || gc_test_size != 1) {
    gc_test_note("one rank: needs --gpu and exactly one rank; skipped");
    return;
  }
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  static const struct {
    const char *what;
    one_rank_call_t call;
    size_t unit; /* bytes an element (the 2-D call: a column of 3 rows) */
  } calls[] = {{"all-reduce", one_allreduce, 2},       {"reduce-scatter", one_reducescatter, 2},
               {"reduce-scatter by columns", one_columns, 6}, {"all-gather", one_allgather, 1},
               {"broadcast", one_broadcast, 1}};
  static const size_t counts[] = {1, 7, 4099, 1048583};
  const size_t most = counts[3] * 6 + 16;
  char *a = gc_test_alloc(most), *b = gc_test_alloc(most);
  uint64_t seed = gc_test_seed;
  for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++)
    for (size_t k = 0; k < 4; k++)
      for (int place = 0; place < 3; place++) { /* out of place, unaligned by one element, in place */
        if (place == 2 && calls[c].call == one_columns) continue; /* axis 1 has no in-place form */
        const size_t bytes = counts[k] * calls[c].unit, shift = place == 1 ? calls[c].unit : 0;
        char what[96];
        snprintf(what, sizeof what, "one rank %s, %s", calls[c].what,
                 place == 0 ? "out of place" : place == 1 ? "unaligned" : "in place");
        CU_ASSERT(one_rank_copies(what, calls[c].call, a + shift, place == 2 ? a + shift : b + shift, bytes, stream, ++seed));
      }
  gc_test_free(a);
  gc_test_free(b);

  /* Past GC_SOLO_MEMCPY_MAX bytes the SMs copy (gc_kernel_copy): an odd count, one byte off. */
  const size_t big = GC_SOLO_MEMCPY_MAX + 3;
  a = gc_test_alloc(big + 1);
  b = gc_test_alloc(big + 1);
  CU_ASSERT(one_rank_copies("one rank all-gather by the SMs", one_allgather, a + 1, b, big, stream, ++seed));
  gc_test_free(a);
  gc_test_free(b);

  /* Epilogues: the one-shot kernel on the input where it is. */
  const size_t n = 262147;
  a = gc_test_alloc(n * 4 + 16); /* room for the unaligned case's offsets */
  b = gc_test_alloc(n * 4 + 16);
  void *add = gc_test_alloc(n * 4);
  gc_test_fill(add, n, GC_FLOAT32, -1, 1300);
  gc_options_t o = GC_OPTIONS_INIT;
  o.scale = 0.25;
  o.add = add;
  check_allreduce(gc_test_comm, "one rank f32 scale+add", a, b, n, GC_FLOAT32, GC_SUM, &o, 1301);
  check_allreduce(gc_test_comm, "one rank f32 scale+add in place", a, a, n, GC_FLOAT32, GC_SUM, &o, 1302);
  check_allreduce(gc_test_comm, "one rank f32 scale+add unaligned", a + 4, b + 8, n, GC_FLOAT32, GC_SUM, &o, 1303);
  o.out_dtype = GC_BFLOAT16;
  check_allreduce(gc_test_comm, "one rank f32 -> bf16", a, b, n, GC_FLOAT32, GC_AVG, &o, 1304);
  o = (gc_options_t)GC_OPTIONS_INIT;
  gc_test_fill(add, n, GC_INT32, -1, 1305);
  o.add = add;
  check_allreduce(gc_test_comm, "one rank i32 + add", a, b, n, GC_INT32, GC_SUM, &o, 1306);

  /* Graph capture: a copy, an epilogue and an all-gather, replayed on fresh inputs. */
  void *exec = NULL, *gather = gc_test_alloc(n * 2);
  int capture_ok = gc_test_capture(stream, 1, NULL) == 0;
  o = (gc_options_t)GC_OPTIONS_INIT;
  o.scale = 2.0;
  gc_result_t r1 = gc_allreduce(a, b, n, GC_BFLOAT16, GC_SUM, gc_test_comm, stream);
  gc_result_t r2 = gc_allreduce_ex(b, b, n, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
  gc_result_t r3 = gc_allgather(b, gather, n, GC_BFLOAT16, gc_test_comm, stream);
  capture_ok &= gc_test_capture(stream, 0, &exec) == 0;
  CU_ASSERT_FATAL(capture_ok && r1 == GC_SUCCESS && r2 == GC_SUCCESS && r3 == GC_SUCCESS);
  unsigned short *in = malloc(n * 2), *got = malloc(n * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(in);
  CU_ASSERT_PTR_NOT_NULL_FATAL(got);
  for (int replay = 0; replay < 2; replay++) {
    gc_test_fill(a, n, GC_BFLOAT16, 0, 1310 + replay);
    gc_test_poison(b, n * 2);
    gc_test_poison(gather, n * 2);
    CU_ASSERT_EQUAL(gc_test_replay(exec, stream), 0);
    GC_TEST_OK(gc_synchronize(gc_test_comm, stream));
    gc_test_download(in, a, n * 2);
    gc_test_download(got, gather, n * 2);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) /* times 2 is exact in bf16 (the inputs are small) */
      bad += (float)gc_element_get(got, i, GC_BFLOAT16) != 2.0f * (float)gc_element_get(in, i, GC_BFLOAT16);
    CU_ASSERT_EQUAL(bad, 0);
  }
  gc_test_graph_destroy(exec);
  free(in);
  free(got);
  gc_test_free(gather);
  gc_test_free(add);
  gc_test_free(a);
  gc_test_free(b);
}

/* A refused allocation (128 TB of pinned host memory: within what gc_buffer_alloc accepts, more
 * than CUDA gives) leaves CUDA's last-error state set; the library's next launch must not
 * report it as its own failure (seen through gpucoll-lua on the GPU host). */
static void test_failed_alloc_then_launch(void) {
  if (!gc_test_on_gpu) {
    gc_test_note("failed allocation then launch: needs --gpu; skipped");
    return;
  }
  void *huge = NULL;
  CU_ASSERT_EQUAL(gc_buffer_alloc(gc_test_comm, (size_t)1 << 47, 0, &huge), GC_ERR_CUDA);
  CU_ASSERT_PTR_NULL(huge);
  void *d = gc_test_alloc(4096);
  GC_TEST_OK(gc_fill_random(gc_test_comm, d, 1024, GC_FLOAT32, 7));
  gc_test_free(d);
}

void gc_test_suite_p2p(void) {
  static const gc_test_case_t tests[] = {
      {"forced algorithms", test_forced_algorithms},
      {"symmetric zero-copy", test_symmetric_zero_copy},
      {"small staging chunks", test_small_staging_chunks},
      {"fused epilogue", test_fused_epilogue},
      {"pdl", test_pdl},
      {"graph capture and replay", test_graph_capture},
      {"copy-engine all-reduce", test_copyengine_allreduce},
      {"queued calls, reduce-scatter by writes among them", test_bywrites_queued},
      {"LL all-reduce", test_ll_allreduce},
      {"LL call count wrap", test_ll_call_wrap},
      {"one rank", test_one_rank},
      {"failed allocation then launch", test_failed_alloc_then_launch},
      {"forced timeout", test_forced_timeout},
      {NULL, NULL},
  };
  gc_test_add_suite("p2p", tests);
}
