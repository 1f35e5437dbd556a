/* test_hierarchy.c — the collectives across several nodes (nodes of L ranks made by
 * gc_config_t.local_size) on the hierarchical path: the plans that take it and those that stay
 * flat, then the all-reduce, reduce-scatter, all-gather and broadcast against the float64
 * reference over every rank, for float, half and integer types, odd counts (parts that L does not
 * divide), in place and with epilogues, with identical bits on every rank. Host buffers take the
 * path when the hierarchical switch is 1 (set on the communicator here); device buffers by
 * default. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "gc_internal.h"
#include "gc_test.h"

static int salt_counter = 5000000;

/* Nodes of 2 ranks on a world of 4 or more (an even size); 0 (noted) elsewhere. */
static int node_ranks(void) {
  if (gc_test_size >= 4 && gc_test_size % 2 == 0) return 2;
  gc_test_note("hierarchy: needs 4 or more ranks, an even number (skipped)");
  return 0;
}

/* A communicator in nodes of L ranks whose hierarchical switch is `hier` (-1 auto, 0, 1). */
static gc_comm_t nodes_of(int L, int hier) {
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.local_size = L;
  cfg.use_gpu = gc_test_on_gpu;
  gc_comm_t comm = NULL;
  gc_result_t r = gc_comm_init(&comm, MPI_COMM_WORLD, &cfg);
  if (r != GC_SUCCESS) fprintf(stderr, "[rank %d] gc_comm_init(local_size %d): %s\n", gc_test_rank, L, gc_comm_last_error(NULL));
  CU_ASSERT_EQUAL_FATAL(r, GC_SUCCESS);
  comm->sw.hierarchical = hier;
  return comm;
}

static gc_plan_path_t path_of(gc_comm_t comm, gc_collective_t coll, const void *send, const void *recv, size_t count,
                              gc_dtype_t dtype, gc_op_t op, const gc_options_t *o) {
  gc_plan_t plan = GC_PLAN_INIT;
  gc_result_t r = gc_plan_query(&plan, coll, send, recv, count, dtype, op, 0, comm, o);
  if (r != GC_SUCCESS) fprintf(stderr, "[rank %d] gc_plan_query: %s\n", gc_test_rank, gc_comm_last_error(comm));
  CU_ASSERT_EQUAL(r, GC_SUCCESS);
  return plan.path;
}

/* Which calls take the path: every collective with the switch at 1, none at 0 or by the name
 * mpi; auto on device buffers only; never an integer average or a half-type reduce-scatter with
 * an add vector. */
static void test_plans(void) {
  const int L = node_ranks();
  if (!L) return;
  const size_t n = 1000;
  char *send = gc_test_alloc(n * 8 * (size_t)gc_test_size), *recv = gc_test_alloc(n * 8 * (size_t)gc_test_size);
  char *vector = gc_test_alloc(n * 8);
  gc_comm_t on = nodes_of(L, 1), off = nodes_of(L, 0), by_default = nodes_of(L, -1);
  const gc_collective_t colls[] = {GC_COLLECTIVE_ALLREDUCE, GC_COLLECTIVE_REDUCESCATTER, GC_COLLECTIVE_ALLGATHER,
                                   GC_COLLECTIVE_BROADCAST};
  gc_options_t mpi = GC_OPTIONS_INIT, add = GC_OPTIONS_INIT;
  mpi.algo = GC_ALGO_MPI;
  add.add = vector;
  for (int k = 0; k < 4; k++) {
    CU_ASSERT_EQUAL(path_of(on, colls[k], send, recv, n, GC_FLOAT32, GC_SUM, NULL), GC_PLAN_HIERARCHICAL);
    CU_ASSERT_EQUAL(path_of(on, colls[k], send, recv, n, GC_FLOAT32, GC_SUM, &mpi), GC_PLAN_MPI);
    CU_ASSERT_EQUAL(path_of(off, colls[k], send, recv, n, GC_FLOAT32, GC_SUM, NULL), GC_PLAN_MPI);
    CU_ASSERT_EQUAL(path_of(by_default, colls[k], send, recv, n, GC_FLOAT32, GC_SUM, NULL),
                    gc_test_on_gpu ? GC_PLAN_HIERARCHICAL : GC_PLAN_MPI);
  }
  CU_ASSERT_EQUAL(path_of(on, GC_COLLECTIVE_ALLREDUCE, send, recv, n, GC_INT32, GC_AVG, NULL), GC_PLAN_MPI);
  CU_ASSERT_EQUAL(path_of(on, GC_COLLECTIVE_ALLREDUCE, send, recv, n, GC_FLOAT32, GC_AVG, NULL), GC_PLAN_HIERARCHICAL);
  CU_ASSERT_EQUAL(path_of(on, GC_COLLECTIVE_REDUCESCATTER, send, recv, n, GC_BFLOAT16, GC_SUM, &add), GC_PLAN_MPI);
  CU_ASSERT_EQUAL(path_of(on, GC_COLLECTIVE_REDUCESCATTER, send, recv, n, GC_FLOAT32, GC_SUM, &add), GC_PLAN_HIERARCHICAL);
  CU_ASSERT_STRING_EQUAL(gc_plan_path_name(GC_PLAN_HIERARCHICAL), "hierarchical");
  CU_ASSERT_EQUAL(gc_comm_destroy(by_default), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_comm_destroy(off), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_comm_destroy(on), GC_SUCCESS);
  gc_test_free(vector);
  gc_test_free(recv);
  gc_test_free(send);
}

typedef struct {
  gc_dtype_t dtype;
  gc_op_t op;
  size_t count; /* all-reduce and broadcast: the whole; reduce-scatter, all-gather: one rank's part */
  int in_place, with_add;
  double scale;
} hier_case_t;

static void case_name(char *what, size_t size, const char *coll, const hier_case_t *c) {
  snprintf(what, size, "hierarchical %s %s %s count %zu%s%s scale %g", coll, gc_dtype_name(c->dtype), gc_op_name(c->op),
           c->count, c->in_place ? " in place" : "", c->with_add ? " add" : "", c->scale);
}

/* The add vector of n elements (the same on every rank): a host copy and the test's buffer. */
static void *make_add(const hier_case_t *c, size_t n, int salt, void **host) {
  *host = malloc(n * gc_dtype_size(c->dtype));
  CU_ASSERT_PTR_NOT_NULL_FATAL(*host);
  for (size_t i = 0; i < n; i++) gc__store_double(*host, i, c->dtype, gc_test_input(c->dtype, -1, salt + 7, i));
  void *add = gc_test_alloc(n * gc_dtype_size(c->dtype));
  gc_test_fill(add, n, c->dtype, -1, salt + 7);
  return add;
}

/* Downloads n elements of out (guarded past the end unless in place), checks them against R
 * and that every rank holds the same bits when `same` is set. */
static int check_output(const char *what, const gc_test_red_t *R, const void *dev, size_t n, int guarded, int same) {
  const size_t bytes = n * gc_dtype_size(R->out_dtype);
  char *out = malloc(bytes + GUARD);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  int ok = gc_test_fetch_checked(out, dev, bytes, guarded, what) && gc_test_check_red(what, R, out, n, 1) == 0;
  if (ok && same && !gc_test_same_on_all_ranks(out, bytes)) {
    fprintf(stderr, "[rank %d] %s: ranks differ\n", gc_test_rank, what);
    ok = 0;
  }
  free(out);
  return ok;
}

/* The all-reduce (scatter 0) or the reduce-scatter (scatter 1: this rank's part of count each). */
static int run_reduction(gc_comm_t comm, const hier_case_t *c, int scatter) {
  const int salt = ++salt_counter;
  const size_t n = c->count, es = gc_dtype_size(c->dtype), all = scatter ? n * (size_t)gc_test_size : n;
  const size_t at = scatter ? (size_t)gc_test_rank * n : 0; /* this rank's output in the input */
  char what[160];
  case_name(what, sizeof what, scatter ? "reduce-scatter" : "all-reduce", c);
  char *send = gc_test_alloc(all * es + GUARD);
  gc_test_fill(send, all, c->dtype, gc_test_rank, salt);
  char *recv = c->in_place ? send + at * es : gc_test_alloc(n * es + GUARD);
  void *add_host = NULL, *add = c->with_add ? make_add(c, n, salt, &add_host) : NULL;
  gc_options_t o = GC_OPTIONS_INIT;
  o.scale = c->scale;
  o.add = add;
  gc_result_t r = scatter ? gc_reducescatter_ex(send, recv, n, c->dtype, c->op, comm, NULL, &o)
                          : gc_allreduce_ex(send, recv, n, c->dtype, c->op, comm, NULL, &o);
  int ok = gc_test_finished(comm, r, what);
  gc_test_red_t R;
  gc_test_red_init(&R, c->dtype, c->op, salt);
  R.scale = c->scale;
  R.add = add_host;
  R.base = at;
  if (ok) ok = check_output(what, &R, recv, n, !c->in_place, !scatter);
  free(add_host);
  if (add) gc_test_free(add);
  if (!c->in_place) gc_test_free(recv);
  gc_test_free(send);
  return ok;
}

static int run_allreduce(gc_comm_t comm, const hier_case_t *c) { return run_reduction(comm, c, 0); }

static int run_reducescatter(gc_comm_t comm, const hier_case_t *c) { return run_reduction(comm, c, 1); }

/* Every rank's part at its place: a "reduction" over one rank (rank_first r) is that rank's input. */
static int run_allgather(gc_comm_t comm, const hier_case_t *c) {
  const int salt = ++salt_counter;
  const size_t n = c->count, es = gc_dtype_size(c->dtype);
  char what[160];
  case_name(what, sizeof what, "all-gather", c);
  char *recv = gc_test_alloc((size_t)gc_test_size * n * es + GUARD);
  char *send = c->in_place ? recv + (size_t)gc_test_rank * n * es : gc_test_alloc(n * es);
  gc_test_fill(send, n, c->dtype, gc_test_rank, salt);
  int ok = gc_test_finished(comm, gc_allgather_ex(send, recv, n, c->dtype, comm, NULL, NULL), what);
  char *out = malloc((size_t)gc_test_size * n * es + GUARD);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  if (ok) ok = gc_test_fetch_checked(out, recv, (size_t)gc_test_size * n * es, 1, what);
  for (int r = 0; ok && r < gc_test_size; r++) {
    gc_test_red_t R;
    gc_test_red_init(&R, c->dtype, GC_SUM, salt);
    R.rank_first = r;
    R.rank_step = gc_test_size;
    ok = gc_test_check_red(what, &R, out + (size_t)r * n * es, n, 1) == 0;
  }
  if (ok) ok = gc_test_same_on_all_ranks(out, (size_t)gc_test_size * n * es);
  free(out);
  if (!c->in_place) gc_test_free(send);
  gc_test_free(recv);
  return ok;
}

static int run_broadcast(gc_comm_t comm, const hier_case_t *c, int root) {
  const int salt = ++salt_counter;
  const size_t n = c->count, es = gc_dtype_size(c->dtype);
  char what[160];
  case_name(what, sizeof what, "broadcast", c);
  snprintf(what + strlen(what), sizeof what - strlen(what), " root %d", root);
  char *recv = gc_test_alloc(n * es + GUARD);
  char *send = c->in_place ? recv : gc_test_alloc(n * es);
  if (gc_test_rank == root) gc_test_fill(send, n, c->dtype, root, salt);
  int ok = gc_test_finished(comm, gc_broadcast_ex(send, recv, n, c->dtype, root, comm, NULL, NULL), what);
  gc_test_red_t R;
  gc_test_red_init(&R, c->dtype, GC_SUM, salt);
  R.rank_first = root;
  R.rank_step = gc_test_size;
  if (ok) ok = check_output(what, &R, recv, n, 1, 1);
  if (!c->in_place) gc_test_free(send);
  gc_test_free(recv);
  return ok;
}

static const size_t counts[] = {1, 3, 1001, 65539};
#define NUM_COUNTS (sizeof counts / sizeof counts[0])

static void reductions(int (*run)(gc_comm_t, const hier_case_t *), int add_halves) {
  const int L = node_ranks();
  if (!L) return;
  gc_comm_t comm = nodes_of(L, 1);
  const gc_dtype_t dtypes[] = {GC_FLOAT32, GC_BFLOAT16, GC_FLOAT16, GC_FLOAT64, GC_INT32};
  const gc_op_t ops[] = {GC_SUM, GC_MAX, GC_AVG};
  int bad = 0;
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
      for (size_t i = 0; i < NUM_COUNTS; i++)
        for (int in_place = 0; in_place < 2; in_place++) {
          const int is_float = dtypes[d] != GC_INT32, half = dtypes[d] == GC_BFLOAT16 || dtypes[d] == GC_FLOAT16;
          if (ops[k] == GC_AVG && !is_float) continue; /* flat (test_plans) */
          hier_case_t c = {dtypes[d], ops[k], counts[i], in_place, 0, 1.0};
          bad += !gc_test_all(run(comm, &c));
          if (!is_float || ops[k] == GC_MAX || (half && !add_halves)) continue;
          c.with_add = 1;
          c.scale = 0.5;
          bad += !gc_test_all(run(comm, &c));
        }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
}

static void test_allreduce(void) { reductions(run_allreduce, 1); }

static void test_reducescatter(void) { reductions(run_reducescatter, 0); }

static void test_gathers(void) {
  const int L = node_ranks();
  if (!L) return;
  gc_comm_t comm = nodes_of(L, 1);
  const gc_dtype_t dtypes[] = {GC_FLOAT32, GC_BFLOAT16, GC_UINT8};
  int bad = 0;
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
    for (size_t i = 0; i < NUM_COUNTS; i++)
      for (int in_place = 0; in_place < 2; in_place++) {
        hier_case_t c = {dtypes[d], GC_SUM, counts[i], in_place, 0, 1.0};
        bad += !gc_test_all(run_allgather(comm, &c));
        for (int root = 0; root < gc_test_size; root++) bad += !gc_test_all(run_broadcast(comm, &c, root));
      }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
}

void gc_test_suite_hierarchy(void) {
  static const gc_test_case_t tests[] = {
      {"plans", test_plans},
      {"all-reduce", test_allreduce},
      {"reduce-scatter", test_reducescatter},
      {"all-gather and broadcast", test_gathers},
      {NULL, NULL},
  };
  gc_test_add_suite("hierarchy", tests);
}
