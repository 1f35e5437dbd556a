/* test_mixed_layout.c — mixed TP x DP layouts (gc_mixed_t): FlashInfer's numbering of every split
 * of 2, 4 and 8 ranks against its group lists, the sizes it refuses, and under MPI every split of
 * the world (nodes of L ranks through gc_config_t.local_size, or GC_LOCAL_SIZE for the world
 * communicator) running its valid operations against a float64 reference, with identical bits on
 * every rank of a TP group, and refusing the others. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "gc_mixed.h"
#include "gc_test.h"

enum { MAX_WORLD = 64 };

typedef struct {
  int W, L;               /* world size, ranks per node */
  int ltp, ldp, itp, idp; /* the four sizes, resolved */
} split_t;

/* tp_rank and dp_rank of every world rank as FlashInfer's ParallelInfo.get_tp_comm_group and
 * get_dp_comm_group list their groups: a TP group's index in its list is the dp_rank, a rank's
 * place in it the tp_rank (and the other way round for DP). Both lists are walked; 0 when they
 * disagree. */
static int flashinfer_ranks(const split_t *s, int *tp_of, int *dp_of) {
  int g = 0, ok = 1, tp2[MAX_WORLD], dp2[MAX_WORLD];
  for (int idp = 0; idp < s->idp; idp++)
    for (int ldp = 0; ldp < s->ldp; ldp++, g++) {
      int pos = 0;
      for (int itp = 0; itp < s->itp; itp++)
        for (int l = ldp * s->ltp; l < (ldp + 1) * s->ltp; l++) {
          int r = l + (idp * s->itp + itp) * s->L;
          tp_of[r] = pos++;
          dp_of[r] = g;
        }
    }
  g = 0;
  for (int itp = 0; itp < s->itp; itp++)
    for (int ltp = 0; ltp < s->ltp; ltp++, g++) {
      int pos = 0;
      for (int idp = 0; idp < s->idp; idp++)
        for (int l = ltp; l < s->L; l += s->ltp) {
          int r = l + (idp * s->itp + itp) * s->L;
          dp2[r] = pos++;
          tp2[r] = g;
        }
    }
  for (int r = 0; r < s->W; r++) ok &= tp2[r] == tp_of[r] && dp2[r] == dp_of[r];
  return ok;
}

/* Every split of W ranks: nodes of L | W ranks, local_tp | L, inter_tp | W / L. */
static int every_split(int W, int only_L, split_t *out, int most) {
  int n = 0;
  for (int L = 1; L <= W; L++) {
    if (W % L || (only_L && L != only_L)) continue;
    for (int ltp = 1; ltp <= L; ltp++) {
      if (L % ltp) continue;
      for (int itp = 1; itp <= W / L; itp++)
        if ((W / L) % itp == 0 && n < most) out[n++] = (split_t){W, L, ltp, L / ltp, itp, W / L / itp};
    }
  }
  return n;
}

/* The config of split s in one of three forms: every size given; TP sizes only; DP sizes only. */
static gc_mixed_config_t split_config(const split_t *s, int form) {
  gc_mixed_config_t c = GC_MIXED_CONFIG_INIT;
  if (form != 2) c.local_tp_size = s->ltp, c.inter_tp_size = s->itp;
  if (form != 1) c.local_dp_size = s->ldp, c.inter_dp_size = s->idp;
  return c;
}

static int layout_matches(const split_t *s, const gc_mixed_layout_t *a, int r, const int *tp_of, const int *dp_of) {
  int local = r % s->L, inter = r / s->L;
  return a->world_rank == r && a->world_size == s->W && a->local_rank == local && a->local_size == s->L &&
         a->inter_rank == inter && a->inter_size == s->W / s->L && a->local_tp_size == s->ltp &&
         a->local_dp_size == s->ldp && a->inter_tp_size == s->itp && a->inter_dp_size == s->idp &&
         a->local_tp_rank == local % s->ltp && a->local_dp_rank == local / s->ltp &&
         a->inter_tp_rank == inter % s->itp && a->inter_dp_rank == inter / s->itp && a->tp_rank == tp_of[r] &&
         a->dp_rank == dp_of[r] && a->tp_size == s->ltp * s->itp && a->dp_size == s->ldp * s->idp;
}

/* ---- numbering (no communicator) ------------------------------------------------------------ */

static void test_every_split_numbered(void) {
  static const int worlds[3] = {2, 4, 8};
  int checked = 0;
  for (int w = 0; w < 3; w++) {
    split_t splits[64];
    int ns = every_split(worlds[w], 0, splits, 64);
    for (int k = 0; k < ns; k++) {
      int tp_of[MAX_WORLD], dp_of[MAX_WORLD];
      CU_ASSERT_TRUE_FATAL(flashinfer_ranks(&splits[k], tp_of, dp_of));
      for (int form = 0; form < 3; form++) {
        gc_mixed_config_t c = split_config(&splits[k], form);
        for (int r = 0; r < splits[k].W; r++) {
          gc_mixed_layout_t a;
          CU_ASSERT_EQUAL_FATAL(gc__mixed_number(NULL, &c, splits[k].W, splits[k].L, r, &a), GC_SUCCESS);
          if (!layout_matches(&splits[k], &a, r, tp_of, dp_of))
            fprintf(stderr, "W %d L %d tp %dx%d dp %dx%d form %d: rank %d numbered tp %d dp %d, expected %d %d\n",
                    splits[k].W, splits[k].L, splits[k].ltp, splits[k].itp, splits[k].ldp, splits[k].idp, form, r,
                    a.tp_rank, a.dp_rank, tp_of[r], dp_of[r]);
          CU_ASSERT_TRUE(layout_matches(&splits[k], &a, r, tp_of, dp_of));
          checked++;
        }
      }
    }
  }
  /* 2 ranks: 4 splits, 4 ranks: 10, 8 ranks: 20; three forms each */
  CU_ASSERT_EQUAL(checked, 3 * (4 * 2 + 10 * 4 + 20 * 8));
}

/* The 8-rank example of docs/mixed.md, written out: 2 nodes of 4, local TP 2 x local DP 2,
 * inter TP 2; and the defaults (TP over everything) and TP inside nodes with DP across. */
static void test_tables(void) {
  static const struct {
    gc_mixed_config_t cfg;
    int tp[8], dp[8];
  } rows[] = {
      {{GC_MIXED_CONFIG_VERSION, 2, 2, 2, 1}, {0, 1, 0, 1, 2, 3, 2, 3}, {0, 0, 1, 1, 0, 0, 1, 1}},
      {{GC_MIXED_CONFIG_VERSION, 0, 0, 0, 0}, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 0, 0, 0, 0, 0, 0, 0}},
      {{GC_MIXED_CONFIG_VERSION, 4, 0, 0, 2}, {0, 1, 2, 3, 0, 1, 2, 3}, {0, 0, 0, 0, 1, 1, 1, 1}},
      {{GC_MIXED_CONFIG_VERSION, 0, 4, 2, 0}, {0, 0, 0, 0, 1, 1, 1, 1}, {0, 1, 2, 3, 0, 1, 2, 3}},
  };
  for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
    for (int r = 0; r < 8; r++) {
      gc_mixed_layout_t a;
      CU_ASSERT_EQUAL_FATAL(gc__mixed_number(NULL, &rows[k].cfg, 8, 4, r, &a), GC_SUCCESS);
      CU_ASSERT_EQUAL(a.tp_rank, rows[k].tp[r]);
      CU_ASSERT_EQUAL(a.dp_rank, rows[k].dp[r]);
      CU_ASSERT_EQUAL(a.inter_rank, r / 4);
    }
}

static void expect_refused(int local_tp, int local_dp, int inter_tp, int inter_dp, const char *text) {
  gc_mixed_config_t c = {GC_MIXED_CONFIG_VERSION, local_tp, local_dp, inter_tp, inter_dp};
  gc_mixed_layout_t a;
  memset(&a, 0x5a, sizeof a);
  gc_mixed_layout_t before = a;
  CU_ASSERT_EQUAL(gc__mixed_number(NULL, &c, 8, 4, 0, &a), GC_ERR_INVALID_ARGUMENT);
  const char *msg = gc_comm_last_error(NULL);
  if (!strstr(msg, text)) fprintf(stderr, "expected '%s' in: %s\n", text, msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, text));
  CU_ASSERT_EQUAL(memcmp(&a, &before, sizeof a), 0); /* written only on success */
}

static void test_bad_sizes(void) {
  /* 8 ranks in 2 nodes of 4 */
  expect_refused(3, 0, 0, 0, "local_tp_size 3 does not divide the 4 ranks of a node");
  expect_refused(0, 3, 0, 0, "local_dp_size 3 does not divide the 4 ranks of a node");
  expect_refused(2, 1, 0, 0, "local_tp_size 2 x local_dp_size 1 = 2, not the 4 ranks of a node");
  expect_refused(0, 0, 4, 0, "inter_tp_size 4 does not divide the 2 nodes of the communicator (8 ranks, 4 a node)");
  expect_refused(0, 0, 2, 2, "inter_tp_size 2 x inter_dp_size 2 = 4, not the 2 nodes");
  expect_refused(-1, 0, 0, 0, "local_tp_size -1: use 0 (the default) or a positive size");
  expect_refused(0, 0, 0, -2, "inter_dp_size -2: use 0");
  gc_mixed_config_t c = GC_MIXED_CONFIG_INIT;
  c.version = 99;
  gc_mixed_layout_t a;
  CU_ASSERT_EQUAL(gc__mixed_number(NULL, &c, 8, 4, 0, &a), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "config version 99"));
  CU_ASSERT_STRING_EQUAL(gc_mixed_op_name(GC_MIXED_REDUCESCATTER_ALLREDUCE), "reducescatter_allreduce");
  CU_ASSERT_PTR_NULL(gc_mixed_op_name(GC_NUM_MIXED_OPS));
  CU_ASSERT_EQUAL(gc_mixed_op_valid(NULL, GC_MIXED_ALLREDUCE), 0);
}

/* ---- under MPI ------------------------------------------------------------------------------ */

static int salt_counter = 4000000;

static gc_comm_t nodes_of(int L) {
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.local_size = L;
  cfg.use_gpu = gc_test_on_gpu;
  gc_comm_t comm = NULL;
  gc_result_t r = gc_comm_init(&comm, MPI_COMM_WORLD, &cfg);
  if (r != GC_SUCCESS) fprintf(stderr, "[rank %d] gc_comm_init(local_size %d): %s\n", gc_test_rank, L, gc_comm_last_error(NULL));
  CU_ASSERT_EQUAL_FATAL(r, GC_SUCCESS);
  return comm;
}

typedef struct {
  gc_dtype_t dtype;
  gc_op_t op;
  size_t n;
  int in_place;
  double scale;
} op_case_t;

/* The operation's element counts: input and output per rank. */
static void op_counts(gc_mixed_op_t mop, size_t n, int dp, size_t *in, size_t *out) {
  int rs = mop == GC_MIXED_REDUCESCATTER || mop == GC_MIXED_REDUCESCATTER_ALLREDUCE;
  int ag = mop == GC_MIXED_ALLGATHER || mop == GC_MIXED_ALLREDUCE_ALLGATHER;
  *in = rs ? (size_t)dp * n : n;
  *out = ag ? (size_t)dp * n : n;
}

static gc_result_t call_op(gc_mixed_op_t mop, const void *send, void *recv, const op_case_t *c, gc_mixed_t m) {
  gc_options_t o = GC_OPTIONS_INIT;
  o.scale = mop == GC_MIXED_ALLGATHER ? 1.0 : c->scale; /* the all-gather takes no epilogue */
  switch (mop) {
    case GC_MIXED_ALLREDUCE: return gc_mixed_allreduce(send, recv, c->n, c->dtype, c->op, m, NULL, &o);
    case GC_MIXED_ALLGATHER: return gc_mixed_allgather(send, recv, c->n, c->dtype, m, NULL, &o);
    case GC_MIXED_REDUCESCATTER: return gc_mixed_reducescatter(send, recv, c->n, c->dtype, c->op, m, NULL, &o);
    case GC_MIXED_ALLREDUCE_ALLGATHER: return gc_mixed_allreduce_allgather(send, recv, c->n, c->dtype, c->op, m, NULL, &o);
    default: return gc_mixed_reducescatter_allreduce(send, recv, c->n, c->dtype, c->op, m, NULL, &o);
  }
}

/* Output element j's float64 reference: the ranks it reduces (a dp rank's TP group, or all) at
 * input index idx, then op (an all-gather copies), then the scale. */
static void reference(gc_mixed_op_t mop, const op_case_t *c, const int *dp_of, int W, int my_dp, int salt, size_t j,
                      double *ref, double *mag) {
  int ag = mop == GC_MIXED_ALLGATHER || mop == GC_MIXED_ALLREDUCE_ALLGATHER;
  int d = ag ? (int)(j / c->n) : -1;
  size_t idx = ag ? j % c->n : (mop == GC_MIXED_ALLREDUCE ? j : (size_t)my_dp * c->n + j);
  double acc = 0, m = 0;
  int k = 0;
  for (int r = 0; r < W; r++) {
    if (d >= 0 && dp_of[r] != d) continue;
    double v = gc_test_input(c->dtype, r, salt, idx);
    acc = k == 0 ? v : c->op == GC_MAX ? fmax(acc, v) : c->op == GC_MIN ? fmin(acc, v) : acc + v;
    m += fabs(v);
    k++;
  }
  double scale = mop == GC_MIXED_ALLGATHER ? 1.0 : c->scale;
  if (c->op == GC_AVG && mop != GC_MIXED_ALLGATHER) acc /= k;
  *ref = acc * scale;
  *mag = m * fabs(scale);
}

/* 1 when the bytes are the same on every rank of this rank's TP group. */
static int same_in_tp_group(const void *buf, size_t bytes, int dp_rank, int tp_rank) {
  MPI_Comm tp;
  if (MPI_Comm_split(MPI_COMM_WORLD, dp_rank, tp_rank, &tp) != MPI_SUCCESS) return 0;
  unsigned char *first = malloc(bytes ? bytes : 1);
  int same = 0;
  if (first) {
    memcpy(first, buf, bytes);
    same = MPI_Bcast(first, (int)bytes, MPI_BYTE, 0, tp) == MPI_SUCCESS && memcmp(first, buf, bytes) == 0;
  }
  free(first);
  MPI_Comm_free(&tp);
  return same;
}

/* Runs mop with case c on layout m; 1 on every rank when every rank's output is right. */
static int run_op(gc_mixed_t m, gc_comm_t comm, gc_mixed_op_t mop, const op_case_t *c, const int *dp_of) {
  gc_mixed_layout_t a;
  GC_TEST_OK(gc_mixed_get_layout(m, &a));
  int salt = ++salt_counter;
  size_t in, out, es = gc_dtype_size(c->dtype);
  op_counts(mop, c->n, a.dp_size, &in, &out);
  int rs = in > c->n, ag = out > c->n || mop == GC_MIXED_ALLGATHER;
  char *send = NULL, *recv = NULL;
  if (c->in_place && ag) { /* send is this rank's block of recv */
    recv = gc_test_alloc(out * es + GUARD);
    send = recv + (size_t)a.dp_rank * c->n * es;
  } else {
    send = gc_test_alloc(in * es);
    recv = c->in_place ? send + (rs ? (size_t)a.dp_rank * c->n * es : 0) : gc_test_alloc(out * es + GUARD);
  }
  gc_test_fill(send, in, c->dtype, gc_test_rank, salt);
  gc_result_t r = call_op(mop, send, recv, c, m);
  if (r == GC_SUCCESS) r = gc_synchronize(comm, NULL);
  char what[160];
  snprintf(what, sizeof what, "%s tp %dx%d dp %dx%d %s %s n %zu%s", gc_mixed_op_name(mop), a.local_tp_size,
           a.inter_tp_size, a.local_dp_size, a.inter_dp_size, gc_dtype_name(c->dtype), gc_op_name(c->op), c->n,
           c->in_place ? " in place" : "");
  if (r != GC_SUCCESS) fprintf(stderr, "[rank %d] %s: %s: %s\n", gc_test_rank, what, gc_result_name(r), gc_comm_last_error(comm));
  unsigned char *host = malloc(out * es + GUARD);
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  int ok = r == GC_SUCCESS && gc_test_fetch_checked(host, recv, out * es, !c->in_place, what);
  for (size_t j = 0; ok && j < out; j++) {
    double ref, mag, got = gc_element_get(host, j, c->dtype);
    reference(mop, c, dp_of, a.world_size, a.dp_rank, salt, j, &ref, &mag);
    if (!gc_test_close_ex(c->dtype, c->dtype, got, ref, mag)) {
      fprintf(stderr, "[rank %d] %s: element %zu is %.17g, expected %.17g\n", gc_test_rank, what, j, got, ref);
      ok = 0;
    }
  }
  int same = same_in_tp_group(host, out * es, a.dp_rank, a.tp_rank);
  if (!same) fprintf(stderr, "[rank %d] %s: ranks of one TP group differ\n", gc_test_rank, what);
  free(host);
  if (c->in_place && ag) gc_test_free(recv);
  else {
    if (!c->in_place) gc_test_free(recv);
    gc_test_free(send);
  }
  return gc_test_all(ok && same);
}

/* The operations a layout takes (FlashInfer's get_valid_op_list), written out. */
static int expect_valid(const gc_mixed_layout_t *a, gc_mixed_op_t op) {
  if (a->tp_size > 1 && a->dp_size > 1) return op == GC_MIXED_ALLREDUCE_ALLGATHER || op == GC_MIXED_REDUCESCATTER_ALLREDUCE;
  if (a->tp_size > 1) return op == GC_MIXED_ALLREDUCE;
  return op == GC_MIXED_ALLGATHER || op == GC_MIXED_REDUCESCATTER;
}

static void check_queries(gc_mixed_t m, const gc_mixed_layout_t *a) {
  int v = -1;
  GC_TEST_OK(gc_mixed_tp_rank(m, &v));
  CU_ASSERT_EQUAL(v, a->tp_rank);
  GC_TEST_OK(gc_mixed_dp_size(m, &v));
  CU_ASSERT_EQUAL(v, a->dp_size);
  for (int op = 0; op < GC_NUM_MIXED_OPS; op++) {
    CU_ASSERT_EQUAL(gc_mixed_op_valid(m, (gc_mixed_op_t)op), expect_valid(a, (gc_mixed_op_t)op));
    gc_algo_t algos[GC_NUM_ALGOS];
    int n = -1;
    GC_TEST_OK(gc_mixed_algos(m, (gc_mixed_op_t)op, algos, GC_NUM_ALGOS, &n));
    if (!expect_valid(a, (gc_mixed_op_t)op)) {
      CU_ASSERT_EQUAL(n, 0);
      continue;
    }
    CU_ASSERT_TRUE(n >= 2);
    CU_ASSERT_EQUAL(algos[0], GC_ALGO_AUTO);
    int has_mpi = 0;
    for (int k = 0; k < n && k < GC_NUM_ALGOS; k++) has_mpi |= algos[k] == GC_ALGO_MPI;
    CU_ASSERT_TRUE(has_mpi);
    if (!gc_test_on_gpu) CU_ASSERT_EQUAL(n, 2); /* host buffers: MPI alone */
  }
}

/* An operation of another layout: refused on every rank, and the layout works after. */
static void check_refusal(gc_mixed_t m, gc_comm_t comm, const gc_mixed_layout_t *a) {
  gc_mixed_op_t bad = GC_MIXED_ALLREDUCE;
  while (expect_valid(a, bad)) bad = (gc_mixed_op_t)(bad + 1);
  op_case_t c = {GC_FLOAT32, GC_SUM, 3, 0, 1.0};
  float buf[64];
  CU_ASSERT_EQUAL(call_op(bad, buf, buf + 32, &c, m), GC_ERR_INVALID_USAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(comm), "not an operation of this layout"));
}

static const op_case_t cases[] = {
    {GC_FLOAT32, GC_SUM, 37, 0, 1.0},   {GC_BFLOAT16, GC_SUM, 37, 0, 1.0}, {GC_INT32, GC_SUM, 37, 1, 1.0},
    {GC_FLOAT64, GC_MAX, 1, 0, 1.0},    {GC_FLOAT32, GC_AVG, 37, 1, 1.0},  {GC_FLOAT16, GC_SUM, 5, 0, 0.5},
};

/* Every split of comm (nodes of L ranks): numbering, queries, the valid operations, a refusal. */
static void run_splits(gc_comm_t comm, int L) {
  split_t splits[64];
  int ns = every_split(gc_test_size, L, splits, 64);
  for (int k = 0; k < ns; k++) {
    int tp_of[MAX_WORLD], dp_of[MAX_WORLD];
    CU_ASSERT_TRUE_FATAL(flashinfer_ranks(&splits[k], tp_of, dp_of));
    gc_mixed_config_t cfg = split_config(&splits[k], k % 3);
    gc_mixed_t m = NULL;
    gc_result_t r = gc_mixed_init(&m, comm, &cfg);
    if (r != GC_SUCCESS) fprintf(stderr, "[rank %d] gc_mixed_init: %s\n", gc_test_rank, gc_comm_last_error(comm));
    CU_ASSERT_EQUAL_FATAL(r, GC_SUCCESS);
    gc_mixed_layout_t a;
    GC_TEST_OK(gc_mixed_get_layout(m, &a));
    CU_ASSERT_TRUE(layout_matches(&splits[k], &a, gc_test_rank, tp_of, dp_of));
    check_queries(m, &a);
    for (int op = 0; op < GC_NUM_MIXED_OPS; op++) {
      if (!expect_valid(&a, (gc_mixed_op_t)op)) continue;
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        CU_ASSERT_TRUE(run_op(m, comm, (gc_mixed_op_t)op, &cases[c], dp_of));
    }
    check_refusal(m, comm, &a);
    CU_ASSERT_EQUAL(gc_mixed_destroy(m), GC_SUCCESS);
  }
}

static void test_every_split_runs(void) {
  if (gc_test_size > MAX_WORLD) {
    gc_test_note("mixed layouts: at most %d ranks", MAX_WORLD);
    return;
  }
  for (int L = 1; L <= gc_test_size; L++) {
    if (gc_test_size % L) continue;
    gc_comm_t comm = nodes_of(L);
    run_splits(comm, L);
    CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
  }
}

/* The world communicator's own nodes (GC_LOCAL_SIZE in the CTest entry, or the hosts). */
static void test_world_nodes(void) {
  int L = 0, nodes = 0;
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &L));
  GC_TEST_OK(gc_comm_node_count(gc_test_comm, &nodes));
  if (L * nodes != gc_test_size || gc_test_size > MAX_WORLD) {
    gc_test_note("world layouts: nodes of different sizes");
    return;
  }
  run_splits(gc_test_comm, L);
}

/* gc_mixed_autotune: every split of the world into nodes of 2 (1 for an odd world) gives each own
 * group tuned rows and runs its operations right after; a bad dtype is refused on every rank,
 * named after the group it stopped in, and a NULL handle is refused. */
static void test_autotune(void) {
  const int L = gc_test_size % 2 == 0 ? 2 : 1;
  gc_comm_t comm = nodes_of(L);
  split_t splits[64];
  const int ns = gc_test_size <= MAX_WORLD ? every_split(gc_test_size, L, splits, 64) : 0;
  for (int k = 0; k < ns; k++) {
    int tp_of[MAX_WORLD], dp_of[MAX_WORLD];
    CU_ASSERT_TRUE_FATAL(flashinfer_ranks(&splits[k], tp_of, dp_of));
    gc_mixed_config_t cfg = split_config(&splits[k], 0);
    gc_mixed_t m = NULL;
    CU_ASSERT_EQUAL_FATAL(gc_mixed_init(&m, comm, &cfg), GC_SUCCESS);
    GC_TEST_OK(gc_mixed_autotune(m, 16 * 1024, GC_FLOAT32));
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_algo_table(m->tp), "tuned"));
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_algo_table(m->dp), "tuned"));
    gc_mixed_layout_t a;
    GC_TEST_OK(gc_mixed_get_layout(m, &a));
    for (int op = 0; op < GC_NUM_MIXED_OPS; op++)
      if (expect_valid(&a, (gc_mixed_op_t)op)) CU_ASSERT_TRUE(run_op(m, comm, (gc_mixed_op_t)op, &cases[0], dp_of));
    CU_ASSERT_EQUAL(gc_mixed_autotune(m, 16 * 1024, GC_FP8_E4M3), GC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(comm), "TP group: gc_autotune: dtype must be a reducible type"));
    CU_ASSERT_EQUAL(gc_mixed_autotune(m, 100, GC_FLOAT32), GC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(gc_mixed_destroy(m), GC_SUCCESS);
  }
  CU_ASSERT_EQUAL(gc_mixed_autotune(NULL, 16 * 1024, GC_FLOAT32), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
}

/* Sizes that do not fit the world, sizes that differ between ranks, nodes of different sizes:
 * refused on every rank with the reason, nothing written, and the communicator usable after. */
static void test_refusals(void) {
  gc_comm_t comm = nodes_of(gc_test_size % 2 == 0 ? 2 : 1);
  gc_mixed_t m = (gc_mixed_t)(uintptr_t)0x1;
  gc_mixed_config_t cfg = GC_MIXED_CONFIG_INIT;
  cfg.local_tp_size = 3;
  CU_ASSERT_EQUAL(gc_mixed_init(&m, comm, &cfg), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(comm), "local_tp_size 3 does not divide"));
  cfg.local_tp_size = gc_test_rank == 0 ? 1 : 0; /* what rank 0 asks differs */
  CU_ASSERT_EQUAL(gc_mixed_init(&m, comm, &cfg), gc_test_size > 1 ? GC_ERR_INVALID_ARGUMENT : GC_SUCCESS);
  if (gc_test_size > 1) CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(comm), "ranks pass different configs (local_tp_size"));
  if (gc_test_size == 1) CU_ASSERT_EQUAL(gc_mixed_destroy(m), GC_SUCCESS);
  if (gc_test_size > 1) CU_ASSERT_EQUAL(m, (gc_mixed_t)(uintptr_t)0x1);
  CU_ASSERT_EQUAL(gc_mixed_init(NULL, comm, NULL), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_mixed_allreduce(NULL, NULL, 0, GC_FLOAT32, GC_SUM, NULL, NULL, NULL), GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_mixed_init(&m, comm, NULL), GC_SUCCESS); /* usable after */
  CU_ASSERT_EQUAL(gc_mixed_destroy(m), GC_SUCCESS);
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
  if (gc_test_size < 3) return;
  /* nodes of 3 (of 2 where 3 divides the size): the last one smaller */
  int L = gc_test_size % 3 ? 3 : 2;
  if (gc_test_size % L == 0) return;
  comm = nodes_of(L);
  CU_ASSERT_EQUAL(gc_mixed_init(&m, comm, NULL), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(comm), "the same number on every node"));
  CU_ASSERT_EQUAL(gc_comm_destroy(comm), GC_SUCCESS);
}

void gc_test_suite_mixed_layout_numbering(void) {
  static const gc_test_case_t tests[] = {
      {"every split of 2, 4 and 8 ranks", test_every_split_numbered},
      {"written tables", test_tables},
      {"sizes that do not fit", test_bad_sizes},
      {NULL, NULL},
  };
  gc_test_add_suite("mixed_layout_numbering", tests);
}

void gc_test_suite_mixed_layout(void) {
  static const gc_test_case_t tests[] = {
      {"every split runs", test_every_split_runs},
      {"the world's nodes", test_world_nodes},
      {"refusals", test_refusals},
      {"tuned groups", test_autotune},
      {NULL, NULL},
  };
  gc_test_add_suite("mixed_layout", tests);
}
