/* test_validation.c — every argument check of the collectives: each returns its specific code and
 * leaves a detailed message. Every case fails on all ranks alike, so no rank enters MPI alone. */
#include <limits.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gc_internal.h"
#include "gc_test.h"
#include "kernels.h"

/* Runs `call`, expects `code`, and a fresh message naming the code in the communicator's slot
 * (or the thread's, for calls without a live communicator). */
#define EXPECT(code, call) expect_impl((code), (call), #call, __LINE__, 1)
#define EXPECT_NOCOMM(code, call) expect_impl((code), (call), #call, __LINE__, 0)
#define CLEAR()                                              \
  do {                                                       \
    gc__clear_error(gc_test_comm);                           \
    gc__clear_error(NULL);                                   \
  } while (0)

static void expect_impl(gc_result_t want, gc_result_t got, const char *text, int line, int in_comm) {
  const char *msg = gc_comm_last_error(in_comm ? gc_test_comm : NULL);
  int ok = got == want && msg && strlen(msg) > 0 && strstr(msg, gc_result_name(want)) != NULL;
  if (!ok)
    fprintf(stderr, "[rank %d] line %d: %s returned %s (want %s), message \"%s\"\n", gc_test_rank, line,
            text, gc_result_name(got), gc_result_name(want), msg ? msg : "(null)");
  CU_ASSERT(got == want);
  CU_ASSERT(msg && strstr(msg, gc_result_name(want)) != NULL);
  CLEAR();
}

enum { N = 64 };
static char *buf_a, *buf_b; /* N float64 each, where the tests run */

static int setup(void) {
  buf_a = gc_test_alloc(N * 8);
  buf_b = gc_test_alloc(N * 8);
  return 0;
}

static void teardown(void) {
  gc_test_free(buf_a);
  gc_test_free(buf_b);
  buf_a = buf_b = NULL;
}

static void test_null_comm(void) {
  setup();
  CLEAR();
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_allreduce(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, NULL, NULL));
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_reducescatter(buf_a, buf_b, 1, GC_FLOAT32, GC_SUM, NULL, NULL));
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT,
                gc_reducescatter_2d(buf_a, buf_b, 2, 2, 0, GC_FLOAT32, GC_SUM, NULL, NULL, NULL));
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_allgather(buf_a, buf_b, 1, GC_FLOAT32, NULL, NULL));
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_broadcast(buf_a, buf_b, 1, GC_FLOAT32, 0, NULL, NULL));
  int x = -7;
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_comm_rank(NULL, &x));
  CU_ASSERT_EQUAL(x, -7); /* outputs written only on success */
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_comm_destroy(NULL));
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_synchronize(NULL, NULL));
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_comm_init(NULL, MPI_COMM_WORLD, NULL));
  teardown();
}

static void test_null_buffers(void) {
  setup();
  CLEAR();
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce(NULL, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce(buf_a, NULL, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_reducescatter(NULL, buf_b, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_reducescatter(buf_a, NULL, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT,
         gc_reducescatter_2d(NULL, buf_b, 4, 4, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allgather(NULL, buf_b, 1, GC_FLOAT32, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allgather(buf_a, NULL, 1, GC_FLOAT32, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast(buf_a, NULL, 1, GC_FLOAT32, 0, gc_test_comm, NULL));
  if (gc_test_size == 1) /* only the root checks send: with peers they would wait for it */
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast(NULL, buf_b, 1, GC_FLOAT32, 0, gc_test_comm, NULL));
  /* count 0 needs no buffers, and every rank returns at once */
  CU_ASSERT_EQUAL(gc_allreduce(NULL, NULL, 0, GC_FLOAT32, GC_SUM, gc_test_comm, NULL), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_reducescatter(NULL, NULL, 0, GC_FLOAT32, GC_SUM, gc_test_comm, NULL), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_allgather(NULL, NULL, 0, GC_INT32, gc_test_comm, NULL), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_broadcast(NULL, NULL, 0, GC_UINT8, 0, gc_test_comm, NULL), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_reducescatter_2d(NULL, NULL, 0, 5, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, NULL),
                  GC_SUCCESS);
  teardown();
}

static void test_bad_dtype_op(void) {
  setup();
  CLEAR();
  const gc_dtype_t bad_d[] = {GC_NUM_DTYPES, GC_DTYPE_SAME, (gc_dtype_t)-5, (gc_dtype_t)1000};
  for (int i = 0; i < 4; i++) {
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce(buf_a, buf_b, 4, bad_d[i], GC_SUM, gc_test_comm, NULL));
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_reducescatter(buf_a, buf_b, 1, bad_d[i], GC_SUM, gc_test_comm, NULL));
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allgather(buf_a, buf_b, 1, bad_d[i], gc_test_comm, NULL));
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast(buf_a, buf_b, 4, bad_d[i], 0, gc_test_comm, NULL));
  }
  const gc_op_t bad_o[] = {GC_NUM_OPS, (gc_op_t)-1};
  for (int i = 0; i < 2; i++) {
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce(buf_a, buf_b, 4, GC_FLOAT32, bad_o[i], gc_test_comm, NULL));
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_reducescatter(buf_a, buf_b, 1, GC_FLOAT32, bad_o[i], gc_test_comm, NULL));
    EXPECT(GC_ERR_INVALID_ARGUMENT,
           gc_reducescatter_2d(buf_a, buf_b, 2, 2, 0, GC_FLOAT32, bad_o[i], gc_test_comm, NULL, NULL));
  }
  /* fp8 is an output and gather/broadcast type: reducing it is unsupported */
  const gc_dtype_t fp8[] = {GC_FP8_E4M3, GC_FP8_E5M2};
  for (int i = 0; i < 2; i++) {
    EXPECT(GC_ERR_UNSUPPORTED, gc_allreduce(buf_a, buf_b, 4, fp8[i], GC_SUM, gc_test_comm, NULL));
    EXPECT(GC_ERR_UNSUPPORTED, gc_reducescatter(buf_a, buf_b, 1, fp8[i], GC_MAX, gc_test_comm, NULL));
    EXPECT(GC_ERR_UNSUPPORTED,
           gc_reducescatter_2d(buf_a, buf_b, 2, 2, 1, fp8[i], GC_SUM, gc_test_comm, NULL, NULL));
  }
  teardown();
}

static void test_overlap(void) {
  setup();
  CLEAR();
  int me = gc_test_rank, n = gc_test_size;
  /* all-reduce: recv one element past send */
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce(buf_a, buf_a + 4, 8, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce(buf_a + 4, buf_a, 8, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  /* reduce-scatter: recv one element off this rank's slice (send holds n x 2 float32) */
  char *big = gc_test_alloc((size_t)n * 2 * 4 + 64);
  EXPECT(GC_ERR_INVALID_ARGUMENT,
         gc_reducescatter(big, big + ((size_t)me * 2 + 1) * 4, 2, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  /* all-gather: send one element off this rank's slot of recv */
  EXPECT(GC_ERR_INVALID_ARGUMENT,
         gc_allgather(big + ((size_t)me * 2 + 1) * 4, big, 2, GC_FLOAT32, gc_test_comm, NULL));
  /* in place with a cast: send == recv but the output has another type */
  gc_options_t o = GC_OPTIONS_INIT;
  o.out_dtype = GC_BFLOAT16;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_a, 8, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  /* the add vector partially overlapping recv */
  o = (gc_options_t)GC_OPTIONS_INIT;
  o.add = buf_b + 4;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 8, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_reducescatter_ex(big, buf_b, 2, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  /* the add vector as recv, but recv of a wider type: results would overwrite addends */
  o.add = buf_b;
  o.out_dtype = GC_FLOAT32;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 8, GC_BFLOAT16, GC_SUM, gc_test_comm, NULL, &o));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_reducescatter_ex(big, buf_b, 2, GC_BFLOAT16, GC_SUM, gc_test_comm, NULL, &o));
  if (n == 1) /* only the root checks: with peers they would wait for it */
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast(buf_a, buf_a + 4, 8, GC_FLOAT32, 0, gc_test_comm, NULL));
  gc_test_free(big);
  teardown();
}

static void test_root_axis(void) {
  setup();
  CLEAR();
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast(buf_a, buf_b, 4, GC_FLOAT32, -1, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast(buf_a, buf_b, 4, GC_FLOAT32, gc_test_size, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast(buf_a, buf_b, 0, GC_FLOAT32, gc_test_size + 3, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT,
         gc_reducescatter_2d(buf_a, buf_b, 2, 2, 2, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT,
         gc_reducescatter_2d(buf_a, buf_b, 2, 2, -1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, NULL));
  teardown();
}

static void test_epilogue_misuse(void) {
  setup();
  CLEAR();
  gc_options_t o = GC_OPTIONS_INIT;
  o.scale = 2.0; /* integers take no scale */
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 4, GC_INT32, GC_SUM, gc_test_comm, NULL, &o));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 4, GC_UINT8, GC_AVG, gc_test_comm, NULL, &o));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_reducescatter_ex(buf_a, buf_b, 1, GC_INT64, GC_SUM, gc_test_comm, NULL, &o));
  /* epilogues belong to reductions */
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allgather_ex(buf_a, buf_b, 1, GC_FLOAT32, gc_test_comm, NULL, &o));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast_ex(buf_a, buf_b, 4, GC_FLOAT32, 0, gc_test_comm, NULL, &o));
  /* casts: integer results cannot be cast, nothing casts to an integer */
  o = (gc_options_t)GC_OPTIONS_INIT;
  o.out_dtype = GC_FLOAT32;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 4, GC_INT32, GC_SUM, gc_test_comm, NULL, &o));
  o.out_dtype = GC_INT32;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  o.out_dtype = (gc_dtype_t)77;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  /* a struct from another version, bad algorithm, negative grid */
  o = (gc_options_t)GC_OPTIONS_INIT;
  o.version = 0;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  o = (gc_options_t)GC_OPTIONS_INIT;
  o.algo = (gc_algo_t)42;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  o = (gc_options_t)GC_OPTIONS_INIT;
  o.max_blocks = -1;
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  /* more blocks than the kernels take is refused, naming the limit, never clamped; the limit itself runs */
  const int grids[] = {GC_KMAX_BLOCKS + 1, 1024, INT_MAX};
  for (int g = 0; g < 3; g++) {
    o.max_blocks = grids[g];
    gc_result_t r = gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "above 256"));
    EXPECT(GC_ERR_INVALID_ARGUMENT, r);
    o.algo = GC_ALGO_ONESHOT; /* and on every entry point that takes options */
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_reducescatter_ex(buf_a, buf_b, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allgather_ex(buf_a, buf_b, 1, GC_FLOAT32, gc_test_comm, NULL, &o));
    EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast_ex(buf_a, buf_b, 1, GC_FLOAT32, 0, gc_test_comm, NULL, &o));
    o.algo = GC_ALGO_AUTO;
  }
  o.max_blocks = GC_KMAX_BLOCKS;
  CU_ASSERT_EQUAL(gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_synchronize(gc_test_comm, NULL), GC_SUCCESS);
  /* an add vector on an integer reduction is fine */
  o = (gc_options_t)GC_OPTIONS_INIT;
  o.add = buf_a;
  CU_ASSERT_EQUAL(gc_allreduce_ex(buf_a, buf_b, 4, GC_INT32, GC_SUM, gc_test_comm, NULL, &o), GC_SUCCESS);
  teardown();
}

static void test_algorithms(void) {
  setup();
  CLEAR();
  /* multimem is refused here: off by default, and the operator's kill switches may be set */
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_MULTIMEM;
  EXPECT(GC_ERR_UNSUPPORTED, gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  int p2p = 0;
  GC_TEST_OK(gc_comm_p2p_ready(gc_test_comm, &p2p));
  if (!gc_test_on_gpu || !p2p) {
    /* the kernels need device buffers on peer-to-peer GPUs; asking for them explicitly fails */
    o.algo = GC_ALGO_ONESHOT;
    EXPECT(GC_ERR_UNSUPPORTED, gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
    o.algo = GC_ALGO_TWOSHOT;
    EXPECT(GC_ERR_UNSUPPORTED, gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
  }
  /* the MPI path always works */
  o.algo = GC_ALGO_MPI;
  CU_ASSERT_EQUAL(gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o), GC_SUCCESS);
  teardown();
}

/* A device pointer of another GPU: needs --gpu and two visible GPUs. */
static void test_other_gpu(void) {
  int ndev = 0, dev = -1;
  if (!gc_test_on_gpu || cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    gc_test_note("other-GPU pointer check skipped: needs --gpu and 2+ visible GPUs");
    (void)cudaGetLastError();
    return;
  }
  setup();
  CLEAR();
  GC_TEST_OK(gc_comm_device(gc_test_comm, &dev));
  int other = (dev + 1) % ndev;
  void *p = NULL;
  CU_ASSERT_EQUAL_FATAL(cudaSetDevice(other), cudaSuccess);
  cudaError_t e = cudaMalloc(&p, N * 8);
  cudaSetDevice(dev);
  CU_ASSERT_EQUAL_FATAL(e, cudaSuccess);
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce(p, buf_b, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allreduce(buf_a, p, 4, GC_FLOAT32, GC_SUM, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_allgather(buf_a, p, 1, GC_FLOAT32, gc_test_comm, NULL));
  EXPECT(GC_ERR_INVALID_ARGUMENT, gc_broadcast(p, p, 4, GC_FLOAT32, 0, gc_test_comm, NULL));
  cudaFree(p);
  teardown();
}

static void test_use_after_destroy(void) {
  gc_comm_t c = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.use_gpu = gc_test_on_gpu;
  GC_TEST_OK(gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  int n = 0;
  GC_TEST_OK(gc_comm_size(c, &n));
  CU_ASSERT_EQUAL(n, gc_test_size);
  GC_TEST_OK(gc_comm_destroy(c));
  CLEAR();
  /* the destroyed handle is only passed in, never asked for its message (its memory is gone) */
  setup();
  EXPECT_NOCOMM(GC_ERR_INVALID_USAGE, gc_allreduce(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, c, NULL));
  EXPECT_NOCOMM(GC_ERR_INVALID_USAGE, gc_broadcast(buf_a, buf_b, 4, GC_FLOAT32, 0, c, NULL));
  EXPECT_NOCOMM(GC_ERR_INVALID_USAGE, gc_comm_rank(c, &n));
  EXPECT_NOCOMM(GC_ERR_INVALID_USAGE, gc_comm_destroy(c));
  teardown();
}

/* Calls that differ between ranks: every rank gets GC_ERR_INVALID_ARGUMENT naming the field, where
 * calls are compared (GC_CHECK_CALLS: the MPI path's by default, every call with 1); without the
 * comparison the MPI path's count mismatches ended the process inside MPI (MPI_ERR_TRUNCATE). The
 * communicator stays usable. */
#define DIFFER(field, call) expect_differ((call), (field), #call, __LINE__)
static void expect_differ(gc_result_t got, const char *field, const char *text, int line) {
  const char *msg = gc_comm_last_error(gc_test_comm);
  char want[96];
  snprintf(want, sizeof want, "calls differ in %s (", field);
  int ok = got == GC_ERR_INVALID_ARGUMENT && strstr(msg, want) != NULL;
  if (!ok)
    fprintf(stderr, "[rank %d] line %d: %s returned %s, message \"%s\" (want GC_ERR_INVALID_ARGUMENT, \"%s\")\n",
            gc_test_rank, line, text, gc_result_name(got), msg, want);
  CU_ASSERT(ok);
  CLEAR();
}

static void test_calls_differ(void) {
  const gc_comm_t comm = gc_test_comm;
  const int mpi_path = !gc_test_on_gpu || !comm->p2p_ready || comm->forced_algo == GC_ALGO_MPI;
  const int every = comm->check_calls == GC_CHECK_EVERY_CALL;
  if (gc_test_size < 2 || !(every || (comm->check_calls == GC_CHECK_MPI_PATH && mpi_path))) {
    gc_test_note("calls that differ: not compared here (one rank, or kernels with GC_CHECK_CALLS unset)");
    return;
  }
  setup();
  CLEAR();
  const int odd = gc_test_rank == gc_test_size - 1; /* the rank whose call differs */
  DIFFER("count", gc_allreduce(buf_a, buf_b, odd ? 5 : 4, GC_FLOAT32, GC_SUM, comm, NULL));
  DIFFER("dtype", gc_allreduce(buf_a, buf_b, 4, odd ? GC_INT32 : GC_FLOAT32, GC_SUM, comm, NULL));
  DIFFER("op", gc_allreduce(buf_a, buf_b, 4, GC_FLOAT32, odd ? GC_MAX : GC_SUM, comm, NULL));
  gc_options_t scaled = GC_OPTIONS_INIT;
  scaled.scale = odd ? 0.5 : 1.0;
  DIFFER("options.scale", gc_allreduce_ex(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, comm, NULL, &scaled));
  DIFFER("count", gc_reducescatter(buf_a, buf_b, odd ? 2 : 1, GC_FLOAT32, GC_SUM, comm, NULL));
  DIFFER("count", gc_allgather(buf_a, buf_b, odd ? 2 : 1, GC_FLOAT32, comm, NULL));
  DIFFER("root", gc_broadcast(buf_a, buf_b, 4, GC_FLOAT32, odd ? 1 : 0, comm, NULL));
  /* 24 elements each, split into other parts: 3 x 8 by rows against 4 x 6 (the MPI path sees the
   * same total and compares the parts' sizes) */
  DIFFER(every ? "count" : "parts", gc_reducescatter_2d(buf_a, buf_b, odd ? 3 : 4, odd ? 8 : 6, 0, GC_FLOAT32, GC_SUM,
                                                       comm, NULL, NULL));
  DIFFER("collective", odd ? gc_allgather(buf_a, buf_b, 1, GC_FLOAT32, comm, NULL)
                           : gc_broadcast(buf_a, buf_b, 1, GC_FLOAT32, 0, comm, NULL));
  if (every) /* an argument this rank alone would refuse: all refuse together */
    DIFFER("dtype", gc_allgather(buf_a, buf_b, 1, odd ? (gc_dtype_t)1000 : GC_FLOAT32, comm, NULL));
  if (every) { /* the fused RMSNorm in other numerics on one rank: other bits, so refused */
    gc_test_fill(buf_a, 2 * N, GC_FLOAT32, gc_test_rank, 79);
    gc_rmsnorm_fp8_t m = GC_RMSNORM_FP8_INIT;
    m.gamma = buf_a + 256;
    m.numerics = odd ? GC_NORM_ROUNDED : GC_NORM_MAX;
    DIFFER("norm.numerics", gc_allreduce_rmsnorm_fp8(buf_a, buf_b, (float *)(buf_b + 64), 2, 4, GC_FLOAT32, &m, comm,
                                                     NULL, NULL));
    /* a version-1 struct means ROUNDED: it runs beside ROUNDED */
    m.numerics = GC_NORM_ROUNDED;
    m.version = odd ? 1 : GC_RMSNORM_FP8_VERSION;
    GC_TEST_OK(gc_allreduce_rmsnorm_fp8(buf_a, buf_b, (float *)(buf_b + 64), 2, 4, GC_FLOAT32, &m, comm, NULL, NULL));
    GC_TEST_OK(gc_synchronize(comm, NULL));
  }
  if (every && comm->p2p_ready) {
    /* Buffers from gc_mem_alloc on some ranks only, or in place on some only: the kernels would
     * read peers' buffers that hold nothing (wrong results) or wait for rounds that never come. */
    float *sym = NULL;
    GC_TEST_OK(gc_mem_alloc(comm, 64 * sizeof(float), (void **)&sym));
    gc_test_fill(sym, 64, GC_FLOAT32, gc_test_rank, 78);
    DIFFER("where recvbuf sits", gc_allreduce(sym, odd ? (float *)buf_b : sym, 4, GC_FLOAT32, GC_SUM, comm, NULL));
    DIFFER("where sendbuf sits", gc_allreduce(odd ? (float *)buf_a : sym, buf_b, 4, GC_FLOAT32, GC_SUM, comm, NULL));
    DIFFER("where sendbuf sits", gc_allgather(odd ? (float *)buf_a : sym + gc_test_rank, sym, 1, GC_FLOAT32, comm, NULL));
    DIFFER("where recvbuf sits", gc_broadcast(sym, odd ? sym + 8 : sym, 4, GC_FLOAT32, 0, comm, NULL));
    /* in place on some ranks only, outside gc_mem_alloc buffers: nothing is shared, it runs */
    GC_TEST_OK(gc_allreduce(buf_a, odd ? buf_a : buf_b, 4, GC_FLOAT32, GC_SUM, comm, NULL));
    /* in place on every rank in a gc_mem_alloc buffer: the same place everywhere, it runs */
    GC_TEST_OK(gc_allreduce(sym, sym, 4, GC_FLOAT32, GC_SUM, comm, NULL));
    GC_TEST_OK(gc_allgather(sym + gc_test_rank, sym, 1, GC_FLOAT32, comm, NULL));
    GC_TEST_OK(gc_synchronize(comm, NULL));
    GC_TEST_OK(gc_mem_free(comm, sym));
  }
  /* then a matching call runs and is right */
  gc_test_fill(buf_a, 4, GC_FLOAT32, gc_test_rank, 77);
  GC_TEST_OK(gc_allreduce(buf_a, buf_b, 4, GC_FLOAT32, GC_SUM, comm, NULL));
  GC_TEST_OK(gc_synchronize(comm, NULL));
  float out[4];
  gc_test_download(out, buf_b, sizeof out);
  gc_test_red_t R;
  gc_test_red_init(&R, GC_FLOAT32, GC_SUM, 77);
  CU_ASSERT_EQUAL(gc_test_check_red("allreduce after calls that differed", &R, out, 4, 1), 0);
  teardown();
}

static void test_config_version(void) {
  gc_comm_t c = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.version = 99;
  CLEAR();
  EXPECT_NOCOMM(GC_ERR_INVALID_ARGUMENT, gc_comm_init(&c, MPI_COMM_WORLD, &cfg));
  CU_ASSERT_PTR_NULL(c);
}

void gc_test_suite_validation(void) {
  static const gc_test_case_t tests[] = {{"NULL communicator", test_null_comm},
                                         {"NULL buffers", test_null_buffers},
                                         {"bad dtype, op, fp8 reductions", test_bad_dtype_op},
                                         {"overlapping buffers", test_overlap},
                                         {"root and axis", test_root_axis},
                                         {"epilogue misuse", test_epilogue_misuse},
                                         {"algorithm requests", test_algorithms},
                                         {"pointer of another GPU", test_other_gpu},
                                         {"use after destroy", test_use_after_destroy},
                                         {"config version", test_config_version},
                                         {"calls that differ between ranks", test_calls_differ},
                                         {NULL, NULL}};
  gc_test_add_suite("validation", tests);
}
