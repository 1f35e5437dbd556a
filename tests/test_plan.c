/* test_plan.c — the planner (plan.c) over a matrix of calls and switches, with no communicator: a
 * node of n GPUs is a gc__facts_t. Every plan has a form its collective can run and a grid within
 * the kernels' limits; the same inputs give the same plan on every rank; a forced algorithm that
 * cannot run is refused with a message, and the table's choices take their documented fallbacks. */
#include <string.h>

#include "gc_internal.h"
#include "gc_plan.h"
#include "gc_test.h"
#include "kernels.h"

#define MB ((size_t)1 << 20)

static gc__facts_t node(int n) {
  gc__facts_t f;
  memset(&f, 0, sizeof f);
  f.size = n;
  f.local_size = n;
  f.p2p_ready = 1;
  f.sm_count = 132;
  f.cc_major = 9;
  f.forced_algo = GC_ALGO_AUTO;
  f.staging_bytes = 64 * MB;
  f.ce_inbox_fits = n >= 2;
  f.sw = (gc__switches_t){0, -1, -1, GC_CE_AR_AUTO, 2, 128, 512 << 10, 128};
  return f;
}

static gc__call_t call_of(gc__coll_t coll, size_t bytes, int sym) {
  gc__call_t c;
  memset(&c, 0, sizeof c);
  c.coll = coll;
  c.es = c.os = 2;
  c.bytes = bytes;
  c.count = coll == GC_COLL_ALLGATHER ? bytes / 2 / 4 : bytes / 2;
  c.ll_bytes = bytes <= 8 * MB ? bytes : 0;
  c.all_device = 1;
  c.sym_in = c.sym_out = sym;
  c.most_part = bytes / 2 / 4;
  c.parts_on_packs = 1;
  return c;
}

/* Forms each collective has. */
static int coll_runs(gc__coll_t coll, gc__form_t form) {
  switch (form) {
    case GC_FORM_LL:
    case GC_FORM_PUSH:
    case GC_FORM_READS:
    case GC_FORM_CE: return 1;
    case GC_FORM_MULTIMEM:
    case GC_FORM_TWOSHOT_WRITES:
    case GC_FORM_CE_COPIES: return coll == GC_COLL_ALLREDUCE;
    case GC_FORM_RS_WRITES: return coll == GC_COLL_REDUCESCATTER;
    case GC_FORM_RING_STAGED: return coll == GC_COLL_ALLGATHER || coll == GC_COLL_BROADCAST;
    case GC_FORM_BCAST_WRITES: return coll == GC_COLL_BROADCAST;
    case GC_FORM_CE_STAGED: return coll != GC_COLL_REDUCESCATTER;
    default: return 0;
  }
}

static void test_matrix(void) {
  static const int schedules[] = {-1, 0, 1}, controls[] = {-1, 0, 1};
  static const size_t pieces[] = {0, 65536};
  int bad = 0, plans = 0;
  for (int n = 2; n <= GC_MAX_LOCAL_RANKS; n++)
    for (int coll = 0; coll < GC_NUM_COLLS; coll++)
      for (int e = 10; e <= 30; e += 2)
        for (int sym = 0; sym < 2; sym++)
          for (int k = 0; k < 3; k++) {
            gc__facts_t f = node(n);
            f.sw.push_schedule = schedules[k];
            f.sw.push_control = controls[(k + 1) % 3];
            f.sw.push_piece = pieces[k % 2];
            gc__call_t c = call_of((gc__coll_t)coll, (size_t)1 << e, sym);
            gc__plan_t p;
            plans++;
            if (gc__plan(&f, &c, &p) != GC_SUCCESS) {
              if (bad++ < 8) fprintf(stderr, "plan: refused %s of 2^%d on %d GPUs\n", gc__coll_name(c.coll), e, n);
              continue;
            }
            /* LL blocks are small and all resident: up to 512 threads an SM */
            const int most = p.form == GC_FORM_LL ? f.sm_count * (512 / f.sw.ll_threads) : GC_KMAX_BLOCKS;
            int ok = p.path == GC_PATH_PEERS && coll_runs(c.coll, p.form) && p.blocks >= 1 && p.blocks <= most &&
                     p.threads >= 32 && p.threads <= GC_KTHREADS;
            if (p.form == GC_FORM_READS && p.chunk == 0) ok = 0;
            if (p.form == GC_FORM_RS_WRITES && (p.piece < 16 || p.piece > p.slot_bytes)) ok = 0;
            if ((p.form == GC_FORM_BCAST_WRITES || p.form == GC_FORM_CE) && !sym) ok = 0;
            if (!ok && bad++ < 8)
              fprintf(stderr, "plan: %s of 2^%d on %d GPUs (sym %d) -> %s form %d, %d x %d\n", gc__coll_name(c.coll), e,
                      n, sym, gc_algo_name(p.algo), (int)p.form, p.blocks, p.threads);
          }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_TRUE(plans > 1000);
}

/* Every rank derives its plan from the same facts and call: the plan is the same bytes on each
 * (a rank's own fields, such as the facts' comm, do not enter it). */
static void test_same_on_every_rank(void) {
  int differ = 0;
  for (int n = 2; n <= GC_MAX_LOCAL_RANKS; n++)
    for (int coll = 0; coll < GC_NUM_COLLS; coll++)
      for (int e = 10; e <= 32; e += 3) {
        gc__plan_t first;
        for (int rank = 0; rank < n; rank++) {
          gc__facts_t f = node(n);
          gc__call_t c = call_of((gc__coll_t)coll, (size_t)1 << e, e % 2);
          gc__plan_t p;
          memset(&p, 0xa5 + rank, sizeof p);
          CU_ASSERT_EQUAL_FATAL(gc__plan(&f, &c, &p), GC_SUCCESS);
          if (rank == 0) first = p;
          else differ += memcmp(&first, &p, sizeof p) != 0;
        }
      }
  CU_ASSERT_EQUAL(differ, 0);
}

/* Asked for, an algorithm that cannot run is refused with a message; chosen by the table, it
 * takes its fallback, and the plan says which algorithm it fell from. */
static void test_forced_and_fallback(void) {
  gc__facts_t f = node(2);
  gc__call_t c = call_of(GC_COLL_ALLGATHER, 512 * MB, 0);
  gc__plan_t p;
  c.algo = GC_ALGO_TWOSHOT;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "has no twoshot"));
  f = node(4);
  c = call_of(GC_COLL_BROADCAST, 64 * MB, 0);
  c.algo = GC_ALGO_COPYENGINE;
  f.local_size = 1;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "2 or more GPUs"));
  c = call_of(GC_COLL_REDUCESCATTER, 64 * MB, 1);
  c.algo = GC_ALGO_TWOSHOT_PUSH;
  c.axis = 1;
  c.rows = 64;
  c.cols = c.count / 64;
  f = node(4);
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(NULL), "contiguous parts"));
  /* the table's copy engines for an output peers cannot write, 3+ GPUs: the broadcast by writes */
  f = node(4);
  f.forced_algo = GC_ALGO_COPYENGINE; /* GC_ALGO: a preference, not a demand */
  c = call_of(GC_COLL_BROADCAST, 64 * MB, 0);
  f.local_size = 4;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.form, GC_FORM_CE_STAGED); /* staged when asked (GC_ALGO) */
  /* host buffers: the MPI path; forced kernels on them are refused */
  f = node(2);
  c = call_of(GC_COLL_ALLREDUCE, 1 * MB, 0);
  c.all_device = 0;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.path, GC_PATH_MPI);
  c.algo = GC_ALGO_ONESHOT;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_ERR_UNSUPPORTED);
  /* 2 GPUs, 512 MB all-reduce, output peers cannot write: the table's copy engines fall back to
   * the two-shot by writes */
  c = call_of(GC_COLL_ALLREDUCE, 512 * MB, 0);
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.algo, GC_ALGO_TWOSHOT_PUSH);
  CU_ASSERT_EQUAL(p.fell_from, GC_ALGO_COPYENGINE);
  CU_ASSERT_EQUAL(p.form, GC_FORM_TWOSHOT_WRITES);
}

/* The switches reach the plan: the broadcast schedule, the control warp, pieces, LL relay. */
static void test_switches(void) {
  gc__facts_t f = node(4);
  gc__call_t c = call_of(GC_COLL_BROADCAST, 256 * MB, 1);
  gc__plan_t p;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.form, GC_FORM_BCAST_WRITES);
  CU_ASSERT_EQUAL(p.ring, 1); /* past 64 MB on 4 GPUs */
  f.sw.push_schedule = 0;
  f.sw.push_piece = 65536;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.ring, 0);
  CU_ASSERT_EQUAL(p.piece, 65536);
  f = node(4);
  c = call_of(GC_COLL_REDUCESCATTER, 1024 * MB, 1);
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.form, GC_FORM_RS_WRITES);
  CU_ASSERT_EQUAL(p.control, 1);
  CU_ASSERT_EQUAL(p.piece, 32768);
  f.sw.push_control = 0;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.control, 0);
  c.parts_on_packs = 0; /* off 16-byte boundaries the table's by writes becomes the one-shot */
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.algo, GC_ALGO_ONESHOT);
  f = node(4);
  c = call_of(GC_COLL_BROADCAST, 1 * MB, 1);
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.form, GC_FORM_LL);
  CU_ASSERT_EQUAL(p.ring, 1); /* relay from 512 KB */
  f.sw.ll_relay_bytes = 2 * MB;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.ring, 0);
}

/* One rank: copies (by cudaMemcpyAsync up to GC_SOLO_MEMCPY_MAX), the one-shot for an epilogue. */
static void test_one_rank(void) {
  gc__facts_t f = node(1);
  gc__call_t c = call_of(GC_COLL_ALLREDUCE, 1 * MB, 0);
  gc__plan_t p;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.path, GC_PATH_SOLO);
  CU_ASSERT_EQUAL(p.form, GC_FORM_SOLO_COPY);
  CU_ASSERT_EQUAL(p.blocks, 0);
  c = call_of(GC_COLL_ALLREDUCE, 512 * MB, 0);
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.blocks, 132);
  c.epilogue = 1;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.form, GC_FORM_SOLO_EPILOGUE);
  CU_ASSERT_TRUE(p.blocks >= 1);
}

void gc_test_suite_plan(void) {
  static const gc_test_case_t tests[] = {{"matrix of calls and switches", test_matrix},
                                         {"same plan on every rank", test_same_on_every_rank},
                                         {"forced algorithms and fallbacks", test_forced_and_fallback},
                                         {"switches reach the plan", test_switches},
                                         {"one rank", test_one_rank},
                                         {NULL, NULL}};
  gc_test_add_suite("plan", tests);
}
