/* test_dispatch.c — the built-in dispatch table for every GPU count from 1 to 8 and sizes from one
 * byte to 1 TB: each call gets a kernel its collective has, LL only when the call fits LL, a grid
 * within the kernels' limits; no peer access means MPI; the rows follow the GPU's architecture
 * (sm_90's measured rows there, the default set elsewhere). No communicator: a node of n GPUs is a
 * zeroed gc__facts_t with the fields dispatch reads (sm_90 unless a test says otherwise). */
#include <string.h>

#include "gc_internal.h"
#include "gc_plan.h"
#include "gc_test.h"
#include "kernels.h"

static const gc__coll_t colls[] = {GC_COLL_ALLREDUCE, GC_COLL_REDUCESCATTER, GC_COLL_ALLGATHER, GC_COLL_BROADCAST};

static void node_of(gc__facts_t *c, int n, int p2p) {
  memset(c, 0, sizeof *c);
  c->size = n;
  c->local_size = n;
  c->p2p_ready = p2p;
  c->forced_algo = GC_ALGO_AUTO;
  c->sm_count = 132;
  c->cc_major = 9;
  c->sw.ll_threads = 128;
}

/* The dispatch step of the planner for a call of `bytes` (LL needing ll_bytes) under options o. */
static gc_result_t dispatch(const gc__facts_t *f, gc__coll_t coll, size_t bytes, size_t ll_bytes, const gc_options_t *o,
                            gc__plan_t *p) {
  gc__call_t call = {.coll = coll, .bytes = bytes, .ll_bytes = ll_bytes, .algo = o->algo, .max_blocks = o->max_blocks};
  return gc__plan_dispatch(f, &call, p);
}

/* Whether the collective has a kernel of this algorithm that the table may pick. */
static int coll_has(gc__coll_t coll, gc_algo_t algo) {
  switch (algo) {
    case GC_ALGO_ONESHOT:
    case GC_ALGO_ONESHOT_LL:
    case GC_ALGO_WRITES: return 1;
    case GC_ALGO_TWOSHOT: return coll == GC_COLL_ALLREDUCE || coll == GC_COLL_BROADCAST;
    case GC_ALGO_COPYENGINE: return coll != GC_COLL_REDUCESCATTER; /* measured slower there: never picked */
    default: return 0;
  }
}

static void test_every_node_size(void) {
  static const int archs[] = {9, 8, 10};
  gc__facts_t c;
  gc_options_t o = GC_OPTIONS_INIT;
  int bad = 0;
  for (int node = 0; node < 3 * GC_MAX_LOCAL_RANKS; node++) {
    const int n = 1 + node % GC_MAX_LOCAL_RANKS;
    node_of(&c, n, 1);
    c.cc_major = archs[node / GC_MAX_LOCAL_RANKS];
    for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++)
      for (int e = 0; e <= 40; e++)
        for (int plus = 0; plus < 2; plus++)
          for (int fits = 0; fits < 2; fits++) {
            const size_t bytes = ((size_t)1 << e) + (size_t)plus;
            gc__plan_t p;
            memset(&p, 0, sizeof p);
            if (dispatch(&c, colls[k], bytes, fits ? bytes : 0, &o, &p) != GC_SUCCESS) {
              bad++;
              continue;
            }
            const int ll = p.algo == GC_ALGO_ONESHOT_LL;
            const int most = ll ? c.sm_count * (512 / c.sw.ll_threads) : GC_KMAX_BLOCKS;
            int ok = coll_has(colls[k], p.algo) && (fits || !ll) && (n > 1 || p.algo == GC_ALGO_ONESHOT) &&
                     p.blocks >= 1 && p.blocks <= most && p.threads >= 32 && p.threads <= GC_KTHREADS &&
                     p.threads % 32 == 0;
            if (!ok && bad++ < 8)
              fprintf(stderr, "dispatch: %s of %zu bytes on %d GPUs of sm_%d0 (LL %s) -> %s, %d blocks of %d threads\n",
                      gc__coll_name(colls[k]), bytes, n, c.cc_major, fits ? "fits" : "cannot", gc_algo_name(p.algo),
                      p.blocks, p.threads);
          }
  }
  CU_ASSERT_EQUAL(bad, 0);
}

/* The table's rows for 5-8 GPUs are the 8-GPU measurements: spot checks of its choices there. */
static void test_eight_gpu_rows(void) {
  gc__facts_t c;
  gc_options_t o = GC_OPTIONS_INIT;
  static const struct { gc__coll_t coll; size_t bytes; gc_algo_t algo; } want[] = {
      {GC_COLL_ALLREDUCE, 1024, GC_ALGO_ONESHOT},
      {GC_COLL_ALLREDUCE, 256 << 10, GC_ALGO_ONESHOT_LL},
      {GC_COLL_ALLREDUCE, 1 << 20, GC_ALGO_WRITES},
      {GC_COLL_ALLREDUCE, (size_t)1 << 30, GC_ALGO_COPYENGINE},
      {GC_COLL_REDUCESCATTER, 4 << 20, GC_ALGO_ONESHOT_LL},
      {GC_COLL_ALLGATHER, 4 << 20, GC_ALGO_ONESHOT_LL},
      {GC_COLL_ALLGATHER, (size_t)1 << 30, GC_ALGO_COPYENGINE},
      {GC_COLL_BROADCAST, 64 << 10, GC_ALGO_ONESHOT},
      {GC_COLL_BROADCAST, 16 << 20, GC_ALGO_WRITES},
  };
  for (int n = 5; n <= 8; n++) {
    node_of(&c, n, 1);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
      gc__plan_t p;
      CU_ASSERT_EQUAL(dispatch(&c, want[i].coll, want[i].bytes, want[i].bytes, &o, &p), GC_SUCCESS);
      CU_ASSERT_EQUAL(p.algo, want[i].algo);
    }
  }
  /* An LL row whose call cannot go by LL takes the row's fallback. */
  node_of(&c, 8, 1);
  gc__plan_t p;
  CU_ASSERT_EQUAL(dispatch(&c, GC_COLL_ALLREDUCE, 256 << 10, 0, &o, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.algo, GC_ALGO_WRITES);
}

/* On 2 GPUs the reduce-scatter and the all-gather go by LL to 4 MB, on 3-4 GPUs
 * the reduce-scatter to 1 MB; then the one-shot. */
static void test_ll_rows(void) {
  gc__facts_t c;
  gc_options_t o = GC_OPTIONS_INIT;
  static const struct { gc__coll_t coll; int n; size_t bytes; gc_algo_t algo; } want[] = {
      {GC_COLL_REDUCESCATTER, 2, 4 << 20, GC_ALGO_ONESHOT_LL}, {GC_COLL_REDUCESCATTER, 2, 8 << 20, GC_ALGO_ONESHOT},
      {GC_COLL_REDUCESCATTER, 3, 1 << 20, GC_ALGO_ONESHOT_LL}, {GC_COLL_REDUCESCATTER, 3, 2 << 20, GC_ALGO_ONESHOT},
      {GC_COLL_REDUCESCATTER, 4, 1 << 20, GC_ALGO_ONESHOT_LL}, {GC_COLL_REDUCESCATTER, 4, 4 << 20, GC_ALGO_ONESHOT},
      {GC_COLL_ALLGATHER, 2, 256 << 10, GC_ALGO_ONESHOT},      {GC_COLL_ALLGATHER, 2, 4 << 20, GC_ALGO_ONESHOT_LL},
      {GC_COLL_ALLGATHER, 2, 8 << 20, GC_ALGO_ONESHOT},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    node_of(&c, want[i].n, 1);
    gc__plan_t p;
    CU_ASSERT_EQUAL(dispatch(&c, want[i].coll, want[i].bytes, want[i].bytes, &o, &p), GC_SUCCESS);
    CU_ASSERT_EQUAL(p.algo, want[i].algo);
  }
}

/* The reduce-scatter by writes from 512 MB on 4 GPUs only (it is slower on 3 GPUs), and
 * a plan says whether its algorithm is the table's (coll.c moves only those off by writes when
 * the parts are off 16-byte boundaries) or one the caller asked for. */
static void test_reducescatter_by_writes_rows(void) {
  gc__facts_t c;
  gc_options_t o = GC_OPTIONS_INIT;
  gc__plan_t p;
  for (int n = 2; n <= 8; n++) {
    node_of(&c, n, 1);
    CU_ASSERT_EQUAL(dispatch(&c, GC_COLL_REDUCESCATTER, (size_t)1 << 30, 0, &o, &p), GC_SUCCESS);
    CU_ASSERT_EQUAL(p.algo, n == 4 ? GC_ALGO_WRITES : GC_ALGO_ONESHOT);
    CU_ASSERT_TRUE(p.from_table);
  }
  o.algo = GC_ALGO_WRITES;
  CU_ASSERT_EQUAL(dispatch(&c, GC_COLL_REDUCESCATTER, (size_t)1 << 30, 0, &o, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.algo, GC_ALGO_WRITES);
  CU_ASSERT_FALSE(p.from_table);
}

/* 2 GPUs, all-gather: by writes through staging past 16 MB up to 64 MB for any
 * output and up to 256 MB for outputs peers cannot write (the row's plain column), the copy
 * engines above; 3+ GPUs leave it alone. */
static void test_allgather_by_writes_rows(void) {
  gc__facts_t c;
  gc_options_t o = GC_OPTIONS_INIT;
  static const struct { size_t bytes; gc_algo_t algo, plain; } want[] = {
      {16 << 20, GC_ALGO_ONESHOT, GC_ALGO_AUTO},
      {64 << 20, GC_ALGO_WRITES, GC_ALGO_AUTO},
      {128 << 20, GC_ALGO_COPYENGINE, GC_ALGO_WRITES},
      {256 << 20, GC_ALGO_COPYENGINE, GC_ALGO_WRITES},
      {(size_t)1 << 30, GC_ALGO_COPYENGINE, GC_ALGO_AUTO},
  };
  node_of(&c, 2, 1);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    gc__plan_t p;
    CU_ASSERT_EQUAL(dispatch(&c, GC_COLL_ALLGATHER, want[i].bytes, 0, &o, &p), GC_SUCCESS);
    CU_ASSERT_EQUAL(p.algo, want[i].algo);
    CU_ASSERT_EQUAL(p.plain, want[i].plain);
  }
  for (int n = 3; n <= 8; n++) {
    node_of(&c, n, 1);
    gc__plan_t p;
    CU_ASSERT_EQUAL(dispatch(&c, GC_COLL_ALLGATHER, (size_t)1 << 30, 0, &o, &p), GC_SUCCESS);
    CU_ASSERT_EQUAL(p.plain, GC_ALGO_AUTO);
  }
}

/* Rows measured on one architecture apply to it: sm_90 gets them; every other compute capability
 * (sm_80, sm_89, sm_100, sm_120, a rank without a GPU) gets the default set, whose rows are only
 * the kernels by reads, never sm_90's thresholds. */
static void test_rows_by_architecture(void) {
  const gc__row_t *measured = NULL, *rows = NULL;
  const char *name = NULL;
  const int n90 = gc__table_rows(9, &measured, &name);
  CU_ASSERT_PTR_NOT_NULL(strstr(name, "sm_90"));
  static const int others[] = {0, 7, 8, 10, 12};
  for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
    const int count = gc__table_rows(others[k], &rows, &name);
    CU_ASSERT_TRUE(rows != measured && count > 0 && count < n90);
    CU_ASSERT_PTR_NOT_NULL(strstr(name, "default"));
    for (int i = 0; i < count; i++) {
      CU_ASSERT_TRUE(rows[i].algo == GC_ALGO_ONESHOT || rows[i].algo == GC_ALGO_TWOSHOT);
      CU_ASSERT_EQUAL(rows[i].fallback, GC_ALGO_AUTO);
      CU_ASSERT_EQUAL(rows[i].plain, GC_ALGO_AUTO);
    }
  }
  static const struct {
    int cc, n;
    gc__coll_t coll;
    size_t bytes;
    gc_algo_t algo;
  } want[] = {
      {9, 2, GC_COLL_ALLREDUCE, 256 << 10, GC_ALGO_ONESHOT_LL},   {10, 2, GC_COLL_ALLREDUCE, 256 << 10, GC_ALGO_ONESHOT},
      {8, 2, GC_COLL_ALLREDUCE, 256 << 10, GC_ALGO_ONESHOT},      {9, 4, GC_COLL_ALLREDUCE, 64 << 20, GC_ALGO_WRITES},
      {10, 4, GC_COLL_ALLREDUCE, 64 << 20, GC_ALGO_TWOSHOT},      {9, 2, GC_COLL_ALLGATHER, (size_t)1 << 30, GC_ALGO_COPYENGINE},
      {8, 2, GC_COLL_ALLGATHER, (size_t)1 << 30, GC_ALGO_ONESHOT}, {9, 8, GC_COLL_BROADCAST, 1 << 30, GC_ALGO_WRITES},
      {10, 8, GC_COLL_BROADCAST, 1 << 30, GC_ALGO_TWOSHOT},       {12, 2, GC_COLL_BROADCAST, 1 << 30, GC_ALGO_ONESHOT},
      {0, 4, GC_COLL_REDUCESCATTER, 4 << 20, GC_ALGO_ONESHOT},
  };
  gc_options_t o = GC_OPTIONS_INIT;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    gc__facts_t c;
    node_of(&c, want[i].n, 1);
    c.cc_major = want[i].cc;
    gc__plan_t p;
    CU_ASSERT_EQUAL(dispatch(&c, want[i].coll, want[i].bytes, want[i].bytes, &o, &p), GC_SUCCESS);
    if (p.algo != want[i].algo)
      fprintf(stderr, "dispatch: sm_%d0, %d GPUs, %s of %zu bytes -> %s, not %s\n", want[i].cc, want[i].n,
              gc__coll_name(want[i].coll), want[i].bytes, gc_algo_name(p.algo), gc_algo_name(want[i].algo));
    CU_ASSERT_EQUAL(p.algo, want[i].algo);
    CU_ASSERT_EQUAL(gc__table_choice(want[i].cc, want[i].n, want[i].coll, want[i].bytes, 1), want[i].algo);
  }
  /* the copy-engine all-reduce's measured crossover to copies: sm_90 only */
  CU_ASSERT_TRUE(gc__ce_allreduce_by_copies(9, 4, (size_t)1 << 30));
  CU_ASSERT_FALSE(gc__ce_allreduce_by_copies(10, 4, (size_t)1 << 30));
  CU_ASSERT_FALSE(gc__ce_allreduce_by_copies(8, 2, (size_t)1 << 30));
}

static void test_no_peer_access_is_mpi(void) {
  gc__facts_t c;
  gc_options_t o = GC_OPTIONS_INIT;
  for (int n = 1; n <= GC_MAX_LOCAL_RANKS; n++) {
    node_of(&c, n, 0);
    for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++) {
      gc__plan_t p;
      CU_ASSERT_EQUAL(dispatch(&c, colls[k], 1 << 20, 1 << 20, &o, &p), GC_SUCCESS);
      CU_ASSERT_EQUAL(p.algo, GC_ALGO_MPI);
    }
  }
}

/* The multicast allocation's size: whole granules of the larger granularity, at least one. */
static void test_multimem_sizes(void) {
  const size_t MB = (size_t)1 << 20;
  CU_ASSERT_EQUAL(gc__multimem_bytes(0, 2 * MB, 2 * MB), 2 * MB);
  CU_ASSERT_EQUAL(gc__multimem_bytes(1, 2 * MB, 64 * 1024), 2 * MB);
  CU_ASSERT_EQUAL(gc__multimem_bytes(2 * MB, 2 * MB, 2 * MB), 2 * MB);
  CU_ASSERT_EQUAL(gc__multimem_bytes(2 * MB + 1, 2 * MB, 2 * MB), 4 * MB);
  CU_ASSERT_EQUAL(gc__multimem_bytes(64 * MB, 512 * MB, 2 * MB), 512 * MB);
  CU_ASSERT_EQUAL(gc__multimem_bytes(600 * MB, 2 * MB, 512 * MB), 1024 * MB);
  CU_ASSERT_EQUAL(gc__multimem_bytes(5 * MB, 0, 0), 0);                 /* no granule known */
  CU_ASSERT_EQUAL(gc__multimem_bytes(SIZE_MAX - 1, 2 * MB, 2 * MB), 0); /* does not fit */
}

void gc_test_suite_dispatch(void) {
  static const gc_test_case_t tests[] = {{"every GPU count 1-8 and size", test_every_node_size},
                                         {"8-GPU rows", test_eight_gpu_rows},
                                         {"LL rows", test_ll_rows},
                                         {"reduce-scatter by writes rows", test_reducescatter_by_writes_rows},
                                         {"all-gather by writes rows", test_allgather_by_writes_rows},
                                         {"rows by architecture", test_rows_by_architecture},
                                         {"no peer access: MPI", test_no_peer_access_is_mpi},
                                         {"multimem sizes", test_multimem_sizes},
                                         {NULL, NULL}};
  gc_test_add_suite("dispatch", tests);
}
