/* test_mixed.c — the mixed tensor/data-parallel operations on the world split into nodes of L
 * ranks (gc_config_t.local_size): gc_reducescatter_allreduce and gc_allreduce_allgather against
 * the float64 reference over the ranks each output reduces, for every reducible dtype and op, odd
 * counts, in place and epilogues; identical bits where they must be; the shapes that are one
 * collective (one node, one rank per node); nodes of different sizes; bad arguments; a call that
 * differs on one rank; a node that comes after its peers gave up. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "gc_internal.h"
#include "gc_test.h"

static int salt_counter = 3000000;

/* A communicator over the world in nodes of L ranks (the last node smaller when L does not divide
 * the size), or NULL after a failed assertion. Nodes are consecutive ranks: node k holds ranks
 * kL .. kL+L-1 on one host, which the references below rely on. timeout_ms: its waits' bound
 * (0: GC_TIMEOUT_MS; a test of ranks that part ways stays short even when it fails). */
static gc_comm_t nodes_within(int L, int timeout_ms) {
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.local_size = L;
  cfg.use_gpu = gc_test_on_gpu;
  cfg.timeout_ms = timeout_ms;
  gc_comm_t comm = NULL;
  gc_result_t r = gc_comm_init(&comm, MPI_COMM_WORLD, &cfg);
  if (r != GC_SUCCESS) fprintf(stderr, "[rank %d] gc_comm_init(local_size %d): %s\n", gc_test_rank, L, gc_comm_last_error(NULL));
  CU_ASSERT_EQUAL_FATAL(r, GC_SUCCESS);
  int lr = -1, ls = -1;
  gc_comm_local_rank(comm, &lr);
  gc_comm_local_size(comm, &ls);
  int expect_ls = gc_test_rank / L * L + L <= gc_test_size ? L : gc_test_size % L;
  CU_ASSERT_EQUAL(lr, gc_test_rank % L);
  CU_ASSERT_EQUAL(ls, expect_ls);
  return comm;
}

static gc_comm_t nodes_of(int L) { return nodes_within(L, 0); }

/* The node sizes the world divides into: 1, the size, and 2 when that is neither. */
static int node_sizes(int *L) {
  int k = 0;
  L[k++] = 1;
  if (gc_test_size % 2 == 0 && gc_test_size > 2) L[k++] = 2;
  if (gc_test_size > 1) L[k++] = gc_test_size;
  return k;
}

/* 1 when buf's bytes are the same on every rank of this rank's cross group (same local rank). */
static int same_in_cross_group(const void *buf, size_t bytes, int L) {
  MPI_Comm cross;
  MPI_Comm_split(MPI_COMM_WORLD, gc_test_rank % L, gc_test_rank, &cross);
  unsigned char *first = malloc(bytes ? bytes : 1);
  int same = 0;
  if (first) {
    memcpy(first, buf, bytes);
    MPI_Bcast(first, (int)bytes, MPI_BYTE, 0, cross);
    same = memcmp(first, buf, bytes) == 0;
  }
  free(first);
  MPI_Comm_free(&cross);
  return same;
}

typedef struct {
  int L;
  gc_dtype_t dtype, out_dtype; /* out_dtype GC_DTYPE_SAME: dtype */
  gc_op_t op;
  size_t count;                /* recvcount (reduce-scatter + all-reduce) or sendcount */
  int in_place, with_add;      /* with_add 2: the add vector is the output (a residual in place) */
  double scale;
} mixed_case_t;

/* The epilogue's add vector (the same on every rank) on the host, and where the test runs. */
static void *make_add(const mixed_case_t *c, int salt, void **host) {
  size_t bytes = c->count * gc_dtype_size(c->dtype);
  *host = malloc(bytes);
  CU_ASSERT_PTR_NOT_NULL_FATAL(*host);
  for (size_t i = 0; i < c->count; i++)
    gc__store_double(*host, i, c->dtype, gc_test_input(c->dtype, -1, salt + 7, i));
  void *add = gc_test_alloc(bytes);
  gc_test_fill(add, c->count, c->dtype, -1, salt + 7);
  return add;
}

/* with_add 2: the add vector's values moved into `out` (the output, of the add's dtype), which
 * becomes the add vector; make_add's buffer is freed. */
static void *residual_in_place(void *add, void *out, const mixed_case_t *c, int salt) {
  gc_test_free(add);
  gc_test_fill(out, c->count, c->dtype, -1, salt + 7);
  return out;
}

static void case_name(char *what, size_t size, const char *op_name, const mixed_case_t *c) {
  snprintf(what, size, "%s L=%d %s %s -> %s count %zu%s%s scale %g", op_name, c->L, gc_dtype_name(c->dtype),
           gc_op_name(c->op), gc_dtype_name(c->out_dtype == GC_DTYPE_SAME ? c->dtype : c->out_dtype), c->count,
           c->in_place ? " in place" : "", c->with_add == 2 ? " add = output" : c->with_add ? " add" : "", c->scale);
}

static gc_options_t case_options(const mixed_case_t *c, const void *add) {
  gc_options_t o = GC_OPTIONS_INIT;
  o.scale = c->scale;
  o.add = add;
  o.out_dtype = c->out_dtype;
  return o;
}

/* The reference of case c's outputs (the caller picks the ranks and the input offset). */
static gc_test_red_t case_red(const mixed_case_t *c, int salt, const void *add_host) {
  gc_test_red_t R;
  gc_test_red_init(&R, c->dtype, c->op, salt);
  R.out_dtype = c->out_dtype == GC_DTYPE_SAME ? c->dtype : c->out_dtype;
  R.scale = c->scale;
  R.add = add_host;
  return R;
}

/* gc_reducescatter_allreduce: rank r gets block r % L of every rank's input reduced. */
static int run_rs_ar(gc_comm_t comm, const mixed_case_t *c) {
  int salt = ++salt_counter, L = c->L, lr = gc_test_rank % L;
  gc_dtype_t dt = c->dtype, odt = c->out_dtype == GC_DTYPE_SAME ? dt : c->out_dtype;
  size_t isz = gc_dtype_size(dt), osz = gc_dtype_size(odt), n = c->count;
  char what[160];
  case_name(what, sizeof what, "reduce-scatter + all-reduce", c);
  char *send = gc_test_alloc((size_t)L * n * isz);
  gc_test_fill(send, (size_t)L * n, dt, gc_test_rank, salt);
  char *recv = c->in_place ? send + (size_t)lr * n * isz : gc_test_alloc(n * osz + GUARD);
  void *add_host = NULL, *add = c->with_add ? make_add(c, salt, &add_host) : NULL;
  if (c->with_add == 2) add = residual_in_place(add, recv, c, salt);
  gc_options_t o = case_options(c, add);
  int ok = gc_test_finished(comm, gc_reducescatter_allreduce(send, recv, n, dt, c->op, comm, NULL, &o), what);
  char *out = malloc(n * osz + GUARD);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  if (ok) ok = gc_test_fetch_checked(out, recv, n * osz, !c->in_place, what);
  if (ok) {
    gc_test_red_t R = case_red(c, salt, add_host);
    R.base = (size_t)lr * n;
    ok = gc_test_check_red(what, &R, out, n, 1) == 0;
  }
  if (ok && !same_in_cross_group(out, n * osz, L)) {
    fprintf(stderr, "[rank %d] %s: ranks of one cross group differ\n", gc_test_rank, what);
    ok = 0;
  }
  free(out);
  free(add_host);
  if (add && add != recv) gc_test_free(add);
  if (!c->in_place) gc_test_free(recv);
  gc_test_free(send);
  return ok;
}

/* gc_allreduce_allgather: block l of every rank's output is the input of the ranks with local
 * rank l reduced. */
static int run_ar_ag(gc_comm_t comm, const mixed_case_t *c) {
  int salt = ++salt_counter, L = c->L, lr = gc_test_rank % L;
  gc_dtype_t dt = c->dtype, odt = c->out_dtype == GC_DTYPE_SAME ? dt : c->out_dtype;
  size_t isz = gc_dtype_size(dt), osz = gc_dtype_size(odt), n = c->count;
  char what[160];
  case_name(what, sizeof what, "all-reduce + all-gather", c);
  char *recv = gc_test_alloc((size_t)L * n * osz + GUARD);
  char *send = c->in_place ? recv + (size_t)lr * n * osz : gc_test_alloc(n * isz);
  gc_test_fill(send, n, dt, gc_test_rank, salt);
  void *add_host = NULL, *add = c->with_add ? make_add(c, salt, &add_host) : NULL;
  char *mine = recv + (size_t)lr * n * osz;
  if (c->with_add == 2) add = residual_in_place(add, mine, c, salt);
  gc_options_t o = case_options(c, add);
  int ok = gc_test_finished(comm, gc_allreduce_allgather(send, recv, n, dt, c->op, comm, NULL, &o), what);
  char *out = malloc((size_t)L * n * osz + GUARD);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  if (ok) ok = gc_test_fetch_checked(out, recv, (size_t)L * n * osz, 1, what);
  for (int l = 0; ok && l < L; l++) {
    gc_test_red_t R = case_red(c, salt, add_host);
    R.rank_first = l;
    R.rank_step = L;
    ok = gc_test_check_red(what, &R, out + (size_t)l * n * osz, n, 1) == 0;
  }
  if (ok && !gc_test_same_on_all_ranks(out, (size_t)L * n * osz)) {
    fprintf(stderr, "[rank %d] %s: ranks differ\n", gc_test_rank, what);
    ok = 0;
  }
  free(out);
  free(add_host);
  if (add && add != mine) gc_test_free(add);
  if (!c->in_place) gc_test_free(send);
  gc_test_free(recv);
  return ok;
}

typedef int (*mixed_run_t)(gc_comm_t, const mixed_case_t *);

/* Several nodes of several ranks: the operation has a part inside nodes and a part across. */
static int across_nodes(int L) { return L > 1 && L < gc_test_size; }

/* Every node size, reducible dtype and op at odd counts; in place; the epilogues. (The refused
 * int32 and uint8 averages of the reduce-scatter + all-reduce across nodes: "bad arguments".) */
static void sweep(mixed_run_t run) {
  static const gc_op_t ops[] = {GC_SUM, GC_AVG, GC_PROD, GC_MIN, GC_MAX};
  static const size_t counts[] = {1, 13, 4099};
  int Ls[3], nL = node_sizes(Ls);
  for (int k = 0; k < nL; k++) {
    gc_comm_t comm = nodes_of(Ls[k]);
    int ok = 1;
    for (int d = 0; d < GC_TEST_NUM_REDUCIBLE; d++)
      for (size_t p = 0; p < sizeof ops / sizeof ops[0]; p++)
        for (size_t q = 0; q < sizeof counts / sizeof counts[0]; q++) {
          mixed_case_t c = {Ls[k], gc_test_reducible[d], GC_DTYPE_SAME, ops[p], counts[q], 0, 0, 1.0};
          int refused = run == run_rs_ar && across_nodes(c.L) && c.op == GC_AVG &&
                        (c.dtype == GC_INT32 || c.dtype == GC_UINT8);
          if (!refused) ok &= run(comm, &c);
        }
    const mixed_case_t more[] = {
        /* larger than the MPI path's chunk, in place, and the epilogues: scale and a half-type
         * add beside float32 partials, a cast to float32, a cast down, an integer add */
        {Ls[k], GC_BFLOAT16, GC_DTYPE_SAME, GC_SUM, 300001, 0, 0, 1.0},
        {Ls[k], GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, 1001, 1, 0, 1.0},
        {Ls[k], GC_BFLOAT16, GC_DTYPE_SAME, GC_AVG, 777, 1, 0, 1.0},
        {Ls[k], GC_BFLOAT16, GC_DTYPE_SAME, GC_SUM, 1001, 0, 1, 0.5},
        {Ls[k], GC_FLOAT16, GC_FLOAT32, GC_AVG, 1001, 0, 1, 2.0},
        {Ls[k], GC_FLOAT32, GC_BFLOAT16, GC_SUM, 1001, 0, 1, 0.25},
        {Ls[k], GC_INT64, GC_DTYPE_SAME, GC_AVG, 1001, 0, 1, 1.0},
        /* the add vector is the output: a residual added in place */
        {Ls[k], GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, 1001, 0, 2, 1.0},
        {Ls[k], GC_INT32, GC_DTYPE_SAME, GC_SUM, 4099, 0, 2, 1.0},
        {Ls[k], GC_BFLOAT16, GC_DTYPE_SAME, GC_SUM, 1001, 0, 2, 0.5},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) ok &= run(comm, &more[i]);
    CU_ASSERT_TRUE(gc_test_all(ok));
    CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
  }
}

static void test_rs_ar(void) { sweep(run_rs_ar); }
static void test_ar_ag(void) { sweep(run_ar_ag); }

/* Nodes of different sizes: both operations refuse, on every rank alike (nobody waits). */
static void test_uneven_nodes(void) {
  if (gc_test_size < 3) {
    gc_test_note("nodes of different sizes need 3+ ranks");
    return;
  }
  gc_comm_t comm = nodes_of(gc_test_size - 1);
  float *send = gc_test_alloc(gc_test_size * sizeof(float)), *recv = gc_test_alloc(gc_test_size * sizeof(float));
  gc_test_fill(send, (size_t)gc_test_size, GC_FLOAT32, gc_test_rank, 1);
  gc_result_t r = gc_reducescatter_allreduce(send, recv, 1, GC_FLOAT32, GC_SUM, comm, NULL, NULL);
  CU_ASSERT_EQUAL(r, GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(comm), "same number of ranks on every node"));
  CU_ASSERT_EQUAL(gc_allreduce_allgather(send, recv, 1, GC_FLOAT32, GC_SUM, comm, NULL, NULL), GC_ERR_UNSUPPORTED);
  /* the other collectives still work on it */
  CU_ASSERT_EQUAL(gc_allreduce(send, recv, 1, GC_FLOAT32, GC_SUM, comm, NULL), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_synchronize(comm, NULL), GC_SUCCESS);
  gc_test_free(send);
  gc_test_free(recv);
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
}

/* A refused call: its code and a piece of its message. */
static void expect_refusal(gc_comm_t comm, gc_result_t got, gc_result_t want, const char *text, int line) {
  const char *msg = gc_comm_last_error(comm);
  if (got != want || !strstr(msg, text))
    fprintf(stderr, "[rank %d] test_mixed.c:%d: %s (%s), expected %s with \"%s\"\n", gc_test_rank, line,
            gc_result_name(got), msg, gc_result_name(want), text);
  CU_ASSERT_EQUAL(got, want);
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, text));
}
#define EXPECT_REFUSAL(call, want, text) expect_refusal(comm, (call), (want), (text), __LINE__)

/* Bad arguments get their own code and message, on every rank alike. */
static void test_bad_arguments(void) {
  int L = gc_test_size % 2 == 0 ? 2 : 1;
  gc_comm_t comm = nodes_of(L);
  size_t n = 64;
  float *send = gc_test_alloc((size_t)L * n * sizeof(float)), *recv = gc_test_alloc((size_t)L * n * sizeof(float));
  float *slot = send + (size_t)(gc_test_rank % L) * n; /* the in-place slot */
  gc_options_t old = GC_OPTIONS_INIT, int_out = GC_OPTIONS_INIT;
  old.version = 99;
  int_out.out_dtype = GC_INT32;
  EXPECT_REFUSAL(gc_reducescatter_allreduce(NULL, recv, n, GC_FLOAT32, GC_SUM, comm, NULL, NULL),
                 GC_ERR_INVALID_ARGUMENT, "sendbuf is NULL");
  EXPECT_REFUSAL(gc_allreduce_allgather(send, NULL, n, GC_FLOAT32, GC_SUM, comm, NULL, NULL), GC_ERR_INVALID_ARGUMENT,
                 "recvbuf is NULL");
  EXPECT_REFUSAL(gc_reducescatter_allreduce(send, recv, n, GC_FP8_E4M3, GC_SUM, comm, NULL, NULL), GC_ERR_UNSUPPORTED,
                 "cannot be reduced");
  EXPECT_REFUSAL(gc_allreduce_allgather(send, recv, n, GC_FLOAT32, (gc_op_t)42, comm, NULL, NULL),
                 GC_ERR_INVALID_ARGUMENT, "is not a gc_op_t");
  EXPECT_REFUSAL(gc_reducescatter_allreduce(send, recv, n, GC_FLOAT32, GC_SUM, comm, NULL, &old),
                 GC_ERR_INVALID_ARGUMENT, "version");
  EXPECT_REFUSAL(gc_allreduce_allgather(send, recv, n, GC_FLOAT32, GC_SUM, comm, NULL, &int_out),
                 GC_ERR_INVALID_ARGUMENT, "cannot cast");
  EXPECT_REFUSAL(gc_reducescatter_allreduce(send, slot + 1, n, GC_FLOAT32, GC_SUM, comm, NULL, NULL),
                 GC_ERR_INVALID_ARGUMENT, "overlap");
  EXPECT_REFUSAL(gc_allreduce_allgather(recv + 1, recv, n, GC_FLOAT32, GC_SUM, comm, NULL, NULL),
                 GC_ERR_INVALID_ARGUMENT, "overlap");
  EXPECT_REFUSAL(gc_reducescatter_allreduce(send, recv, SIZE_MAX / 4, GC_FLOAT32, GC_SUM, comm, NULL, NULL),
                 GC_ERR_INVALID_ARGUMENT, "too large");
  if (across_nodes(L))
    EXPECT_REFUSAL(gc_reducescatter_allreduce(send, recv, n, GC_INT32, GC_AVG, comm, NULL, NULL), GC_ERR_UNSUPPORTED,
                   "would wrap");
  /* zero elements: nothing to do, even with NULL buffers */
  CU_ASSERT_EQUAL(gc_reducescatter_allreduce(NULL, NULL, 0, GC_FLOAT32, GC_SUM, comm, NULL, NULL), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_allreduce_allgather(NULL, NULL, 0, GC_FLOAT32, GC_SUM, comm, NULL, NULL), GC_SUCCESS);
  /* and the communicator still works */
  mixed_case_t c = {L, GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, n, 0, 0, 1.0};
  CU_ASSERT_TRUE(gc_test_all(run_rs_ar(comm, &c) && run_ar_ag(comm, &c)));
  gc_test_free(send);
  gc_test_free(recv);
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
}

/* A call that differs on one rank (its op), across nodes, by default (GC_CHECK_CALLS unset: the
 * MPI path's calls are compared; 1 too): refused with GC_ERR_INVALID_ARGUMENT on every rank, and
 * the communicator goes on working. The groups compared on their own: the odd rank's node
 * refused, the other nodes went on into the cross groups and met the refused ranks' next call
 * there (GC_SUCCESS with wrong data on ranks 0 and 2 of 4, then GC_ERR_TIMEOUT). */
static void test_calls_differ(void) {
  const char *level = getenv("GC_CHECK_CALLS");
  if (gc_test_size < 4 || gc_test_size % 2 || (level && strcmp(level, "0") == 0)) {
    gc_test_note("mixed calls that differ: 4+ ranks, an even number, GC_CHECK_CALLS not 0");
    return;
  }
  const int L = 2, odd = gc_test_rank == gc_test_size - 1;
  gc_comm_t comm = nodes_within(L, 1500);
  size_t n = 16;
  float *send = gc_test_alloc((size_t)L * n * sizeof(float)), *recv = gc_test_alloc((size_t)L * n * sizeof(float));
  gc_test_fill(send, (size_t)L * n, GC_FLOAT32, gc_test_rank, 11);
  for (int first = 0; first < 2; first++) { /* the first call sets the groups up, the second finds them */
    gc_result_t r = gc_reducescatter_allreduce(send, recv, n, GC_FLOAT32, odd ? GC_MAX : GC_SUM, comm, NULL, NULL);
    EXPECT_REFUSAL(r, GC_ERR_INVALID_ARGUMENT, "differ in op");
    r = gc_allreduce_allgather(send, recv, n, GC_FLOAT32, odd ? GC_MAX : GC_SUM, comm, NULL, NULL);
    EXPECT_REFUSAL(r, GC_ERR_INVALID_ARGUMENT, "differ in op");
  }
  mixed_case_t c = {L, GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, n, 0, 0, 1.0};
  CU_ASSERT_TRUE(gc_test_all(run_rs_ar(comm, &c) && run_ar_ag(comm, &c)));
  gc_test_free(send);
  gc_test_free(recv);
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
}

/* The last node comes late, after its peers' waits in the cross groups gave up (GC_ERR_TIMEOUT).
 * Their MPI requests stay behind, still reading the input they were given: for bfloat16 the
 * node's float32 partials, the library's own temporary. It was freed on the timeout, so when the
 * late ranks came and MPI went on sending (here in MPI_Barrier), the early ranks read unmapped
 * memory (a segmentation fault in mca_btl_vader; M_MMAP_THRESHOLD makes the temporary its own
 * mapping, as large ones are). Comparing calls first (the default) waits on copies of its own, so
 * the exchange is reached at once as under GC_CHECK_CALLS=0, which the test sets on the groups. */
static void test_late_node(void) {
  if (gc_test_size < 4 || gc_test_size % 2) {
    gc_test_note("a late node: 4+ ranks, an even number");
    return;
  }
  const int L = 2, timeout_ms = 600, late = gc_test_rank >= gc_test_size - L;
  gc_comm_t comm = nodes_within(L, timeout_ms);
  size_t n = (size_t)1 << 17; /* 512 KB of partials */
  uint16_t *send = gc_test_alloc((size_t)L * n * 2), *recv = gc_test_alloc(n * 2);
  gc_test_fill(send, (size_t)L * n, GC_BFLOAT16, gc_test_rank, 12);
  /* the groups made, on time */
  CU_ASSERT_EQUAL_FATAL(gc_test_all(gc_reducescatter_allreduce(send, recv, 16, GC_BFLOAT16, GC_SUM, comm, NULL, NULL) ==
                                    GC_SUCCESS), 1);
  comm->check_calls = comm->node_group->check_calls = comm->cross_group->check_calls = GC_CHECK_NONE;
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  if (late) usleep(2 * timeout_ms * 1000);
  gc_result_t r = gc_reducescatter_allreduce(send, recv, n, GC_BFLOAT16, GC_SUM, comm, NULL, NULL);
  if (r != GC_ERR_TIMEOUT)
    fprintf(stderr, "[rank %d] late node: %s (%s), expected GC_ERR_TIMEOUT\n", gc_test_rank, gc_result_name(r),
            gc_comm_last_error(comm));
  CU_ASSERT_EQUAL(r, GC_ERR_TIMEOUT);
  /* the late ranks' requests meet the early ones' here, and the early ones send their partials */
  MPI_Barrier(MPI_COMM_WORLD);
  usleep(200 * 1000);
  MPI_Barrier(MPI_COMM_WORLD);
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
  gc_test_free(send);
  gc_test_free(recv);
}

/* Across nodes the MPI part cannot be captured: refused before anything starts, and the
 * communicator still works after. One node: the reduce-scatter alone, captured and replayed. */
static void test_graph_capture(void) {
  if (!gc_test_on_gpu || gc_test_size < 2) {
    gc_test_note("graph capture of mixed operations: device buffers on 2+ ranks only");
    return;
  }
  int Ls[3], nL = node_sizes(Ls);
  for (int k = 0; k < nL; k++) {
    int L = Ls[k];
    gc_comm_t comm = nodes_of(L);
    void *stream = NULL;
    gc_comm_stream(comm, &stream);
    size_t n = 1000;
    float *send = gc_test_alloc((size_t)L * n * sizeof(float)), *recv = gc_test_alloc(n * sizeof(float));
    gc_test_fill(send, (size_t)L * n, GC_FLOAT32, gc_test_rank, 5);
    void *graph = NULL;
    CU_ASSERT_EQUAL_FATAL(gc_test_capture(stream, 1, NULL), 0);
    gc_options_t o = GC_OPTIONS_INIT;
    o.algo = gc_test_kernel_algo();
    gc_result_t r = gc_reducescatter_allreduce(send, recv, n, GC_FLOAT32, GC_SUM, comm, stream, &o);
    int end = gc_test_capture(stream, 0, &graph);
    if (across_nodes(L)) {
      CU_ASSERT_EQUAL(r, GC_ERR_INVALID_USAGE);
      CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(comm), "graph capture"));
    } else if (L == gc_test_size) {
      CU_ASSERT_EQUAL(r, GC_SUCCESS);
      CU_ASSERT_EQUAL(end, 0);
      if (graph) CU_ASSERT_EQUAL(gc_test_replay(graph, stream), 0);
    }
    if (graph) gc_test_graph_destroy(graph);
    if (L < gc_test_size) {
      /* one rank per node, or across nodes: MPI, never captured; the call after works */
      CU_ASSERT_NOT_EQUAL(r, GC_SUCCESS);
      mixed_case_t c = {L, GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, n, 0, 0, 1.0};
      CU_ASSERT_TRUE(gc_test_all(run_rs_ar(comm, &c)));
    } else {
      CU_ASSERT_EQUAL(gc_synchronize(comm, stream), GC_SUCCESS);
      float *out = malloc(n * sizeof(float));
      gc_test_download(out, recv, n * sizeof(float));
      gc_test_red_t R;
      gc_test_red_init(&R, GC_FLOAT32, GC_SUM, 5);
      R.base = (size_t)gc_test_rank * n;
      CU_ASSERT_EQUAL(gc_test_check_red("captured reduce-scatter + all-reduce on one node", &R, out, n, 1), 0);
      free(out);
    }
    gc_test_free(send);
    gc_test_free(recv);
    CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
  }
}

void gc_test_suite_mixed(void) {
  static const gc_test_case_t tests[] = {
      {"reduce-scatter + all-reduce", test_rs_ar},
      {"all-reduce + all-gather", test_ar_ag},
      {"nodes of different sizes", test_uneven_nodes},
      {"bad arguments", test_bad_arguments},
      {"calls that differ between ranks", test_calls_differ},
      {"a late node", test_late_node},
      {"graph capture", test_graph_capture},
      {NULL, NULL},
  };
  gc_test_add_suite("mixed", tests);
}
