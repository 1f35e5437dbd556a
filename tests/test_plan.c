/* test_plan.c — the planner (plan.c) over a matrix of calls and switches, with no communicator: a
 * node of n GPUs is a gc__facts_t. Every plan has a form its collective can run and a grid within
 * the kernels' limits; the same inputs give the same plan on every rank; a forced algorithm that
 * cannot run is refused with a message, and the table's choices take their documented fallbacks. */
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "gc_entry.h"
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
  gc__switches_default(&f.sw);
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

/* The plan follows the node's architecture: sm_90 plans from the rows measured there, any other
 * (sm_80, sm_100) from the default set, the kernels by reads; on every architecture every rank
 * derives the same plan, and every plan is one its collective can run. */
static void test_by_architecture(void) {
  static const int archs[] = {8, 9, 10};
  int differ = 0, bad = 0, measured = 0;
  for (int a = 0; a < 3; a++)
    for (int n = 2; n <= GC_MAX_LOCAL_RANKS; n++)
      for (int coll = 0; coll < GC_NUM_COLLS; coll++)
        for (int e = 10; e <= 32; e += 2) {
          gc__plan_t first;
          for (int rank = 0; rank < n; rank++) {
            gc__facts_t f = node(n);
            f.cc_major = archs[a];
            gc__call_t c = call_of((gc__coll_t)coll, (size_t)1 << e, e % 4 == 0);
            gc__plan_t p;
            memset(&p, 0x5a + rank, sizeof p);
            CU_ASSERT_EQUAL_FATAL(gc__plan(&f, &c, &p), GC_SUCCESS);
            if (rank == 0) first = p;
            else differ += memcmp(&first, &p, sizeof p) != 0;
          }
          const int by_reads = first.algo == GC_ALGO_ONESHOT || first.algo == GC_ALGO_TWOSHOT;
          if (archs[a] != 9 && (!by_reads || !coll_runs((gc__coll_t)coll, first.form)) && bad++ < 8)
            fprintf(stderr, "plan: sm_%d0, %s of 2^%d on %d GPUs -> %s form %d\n", archs[a],
                    gc__coll_name((gc__coll_t)coll), e, n, gc_algo_name(first.algo), (int)first.form);
          measured += archs[a] == 9 && !by_reads;
        }
  CU_ASSERT_EQUAL(differ, 0);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_TRUE(measured > 100); /* sm_90 takes LL, the kernels by writes, the copy engines */
  /* one call, three architectures */
  gc__facts_t f = node(2);
  gc__call_t c = call_of(GC_COLL_ALLREDUCE, 256 << 10, 1);
  gc__plan_t p;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.algo, GC_ALGO_ONESHOT_LL);
  f.cc_major = 10;
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.algo, GC_ALGO_ONESHOT);
  f.cc_major = 8;
  c = call_of(GC_COLL_ALLREDUCE, 64 * MB, 1);
  CU_ASSERT_EQUAL(gc__plan(&f, &c, &p), GC_SUCCESS);
  CU_ASSERT_EQUAL(p.algo, GC_ALGO_TWOSHOT);
  CU_ASSERT_EQUAL(p.form, GC_FORM_READS);
  CU_ASSERT_TRUE(p.from_table);
}

static int has_algo(const gc_algo_t *algos, int n, gc_algo_t algo) {
  for (int i = 0; i < n; i++)
    if (algos[i] == algo) return 1;
  return 0;
}

/* gc_autotune times the two-stage broadcast (GC_ALGO_TWOSHOT), which no row of the built-in table
 * takes, wherever the communicator can run it, on every architecture; where it cannot (no peer
 * access, host buffers) only what can run is timed, and never an algorithm the planner would
 * move to another. */
static void test_tune_candidates(void) {
  gc_algo_t algos[GC_NUM_ALGOS];
  int missing = 0, wrong = 0;
  for (int n = 2; n <= GC_MAX_LOCAL_RANKS; n++)
    for (int cc = 9; cc <= 10; cc++)
      for (int e = 10; e <= 30; e += 4) {
        gc__facts_t f = node(n);
        f.cc_major = cc;
        for (int coll = 0; coll < GC_NUM_COLLS; coll++) {
          gc__call_t c = call_of((gc__coll_t)coll, (size_t)1 << e, 1);
          const int count = gc__tune_candidates(&f, &c, algos);
          const int twoshot = has_algo(algos, count, GC_ALGO_TWOSHOT);
          if (coll == GC_COLL_BROADCAST || coll == GC_COLL_ALLREDUCE) missing += !twoshot;
          else wrong += twoshot; /* the collective has no two-shot */
          missing += !has_algo(algos, count, GC_ALGO_MPI) || !has_algo(algos, count, GC_ALGO_ONESHOT);
          for (int i = 0; i < count; i++) {
            gc__plan_t p;
            c.algo = algos[i];
            wrong += algos[i] == GC_ALGO_AUTO || algos[i] == GC_ALGO_MULTIMEM || gc__plan(&f, &c, &p) != GC_SUCCESS ||
                     p.algo != algos[i] || p.fell_from != GC_ALGO_AUTO;
          }
        }
      }
  CU_ASSERT_EQUAL(missing, 0);
  CU_ASSERT_EQUAL(wrong, 0);
  /* no peer access, or host buffers: the MPI path alone */
  gc__facts_t f = node(4);
  gc__call_t c = call_of(GC_COLL_BROADCAST, 1 * MB, 1);
  f.p2p_ready = 0;
  CU_ASSERT_EQUAL(gc__tune_candidates(&f, &c, algos), 1);
  CU_ASSERT_EQUAL(algos[0], GC_ALGO_MPI);
  f = node(4);
  c.all_device = 0;
  CU_ASSERT_EQUAL(gc__tune_candidates(&f, &c, algos), 1);
  CU_ASSERT_EQUAL(algos[0], GC_ALGO_MPI);
  /* LL only where the call fits it */
  c = call_of(GC_COLL_BROADCAST, 1 * MB, 1);
  CU_ASSERT_TRUE(has_algo(algos, gc__tune_candidates(&f, &c, algos), GC_ALGO_ONESHOT_LL));
  c.ll_bytes = 0;
  CU_ASSERT_FALSE(has_algo(algos, gc__tune_candidates(&f, &c, algos), GC_ALGO_ONESHOT_LL));
  CU_ASSERT_TRUE(has_algo(algos, gc__tune_candidates(&f, &c, algos), GC_ALGO_TWOSHOT));
}

/* The fused RMSNorm: its tuner candidates are its three kernels (the two-shot from two GPUs),
 * none without peers or on host buffers; its algorithm is the asked one, else GC_ALGO's, else its
 * tuned rows' (first match wins), else by the all-reduce table; the tuned rows of the all-reduce
 * do not decide it. */
static void test_rmsnorm_rows(void) {
  gc_algo_t algos[GC_NUM_ALGOS];
  gc__facts_t f = node(4);
  gc__call_t c = call_of(GC_COLL_RMSNORM, 1 * MB, 1);
  CU_ASSERT_EQUAL(gc__tune_candidates(&f, &c, algos), 3);
  CU_ASSERT_TRUE(has_algo(algos, 3, GC_ALGO_TWOSHOT));
  f = node(1);
  CU_ASSERT_EQUAL(gc__tune_candidates(&f, &c, algos), 2);
  CU_ASSERT_FALSE(has_algo(algos, 2, GC_ALGO_TWOSHOT));
  f = node(4);
  f.p2p_ready = 0;
  CU_ASSERT_EQUAL(gc__tune_candidates(&f, &c, algos), 0);
  f = node(4);
  c.all_device = 0;
  CU_ASSERT_EQUAL(gc__tune_candidates(&f, &c, algos), 0);

  const gc_algo_t table_small = gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 4096, 1);
  const gc_algo_t table_big = gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 4 * MB + 1, 1);
  const gc__tuned_t rows[] = {{GC_COLL_ALLREDUCE, SIZE_MAX, GC_ALGO_WRITES},
                              {GC_COLL_RMSNORM, 64 * 1024, GC_ALGO_TWOSHOT},
                              {GC_COLL_RMSNORM, 1 * MB, GC_ALGO_ONESHOT_LL},
                              {GC_COLL_RMSNORM, 4 * MB, GC_ALGO_ONESHOT}};
  f.tuned = rows;
  f.tuned_count = 1;
  CU_ASSERT_EQUAL(gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 4096, 1), table_small);
  f.tuned_count = 4;
  CU_ASSERT_EQUAL(gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 4096, 1), GC_ALGO_TWOSHOT);
  CU_ASSERT_EQUAL(gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 64 * 1024 + 1, 1), GC_ALGO_ONESHOT_LL);
  CU_ASSERT_EQUAL(gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 4 * MB, 1), GC_ALGO_ONESHOT);
  CU_ASSERT_EQUAL(gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 4 * MB + 1, 1), table_big); /* past the last row */
  CU_ASSERT_EQUAL(gc__plan_rmsnorm_algo(&f, GC_ALGO_ONESHOT, 4096, 1), GC_ALGO_ONESHOT);
  f.forced_algo = GC_ALGO_ONESHOT_LL;
  CU_ASSERT_EQUAL(gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 4096, 1), GC_ALGO_ONESHOT_LL);
  f.forced_algo = GC_ALGO_AUTO;
  CU_ASSERT_EQUAL(gc__plan_rmsnorm_algo(&f, GC_ALGO_AUTO, 4096, 0), GC_ALGO_AUTO); /* no peers: composed */
  CU_ASSERT_STRING_EQUAL(gc__coll_name(GC_COLL_RMSNORM), "rmsnorm");
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
  c.algo = GC_ALGO_WRITES;
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
  CU_ASSERT_EQUAL(p.algo, GC_ALGO_WRITES);
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
                                         {"rows by architecture", test_by_architecture},
                                         {"tuner's candidates", test_tune_candidates},
                                         {"the RMSNorm's tuned rows", test_rmsnorm_rows},
                                         {"forced algorithms and fallbacks", test_forced_and_fallback},
                                         {"switches reach the plan", test_switches},
                                         {"one rank", test_one_rank},
                                         {NULL, NULL}};
  gc_test_add_suite("plan", tests);
}

/* ---- gc_plan_query against the calls (a suite on the communicator) ------------------------- */

/* One call of collective k with these buffers, as gc_plan_query takes it. */
static gc_result_t run_call(gc_collective_t k, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                            const gc_options_t *o) {
  switch (k) {
    case GC_COLLECTIVE_ALLREDUCE: return gc_allreduce_ex(send, recv, count, dtype, GC_SUM, gc_test_comm, NULL, o);
    case GC_COLLECTIVE_REDUCESCATTER:
      return gc_reducescatter_ex(send, recv, count, dtype, GC_SUM, gc_test_comm, NULL, o);
    case GC_COLLECTIVE_ALLGATHER: return gc_allgather_ex(send, recv, count, dtype, gc_test_comm, NULL, o);
    default: return gc_broadcast_ex(send, recv, count, dtype, 0, gc_test_comm, NULL, o);
  }
}

static const gc__coll_t internal_coll[GC_NUM_COLLECTIVES] = {GC_COLL_ALLREDUCE, GC_COLL_REDUCESCATTER,
                                                              GC_COLL_ALLGATHER, GC_COLL_BROADCAST};

/* Field by field: the structs' padding is not part of a plan. */
static int same_plan(const gc_plan_t *a, const gc_plan_t *b) {
  return a->version == b->version && a->path == b->path && a->algo == b->algo && a->fell_from == b->fell_from &&
         a->from_table == b->from_table && a->blocks == b->blocks && a->threads == b->threads &&
         a->chunk_bytes == b->chunk_bytes && a->piece_bytes == b->piece_bytes && a->staged == b->staged;
}

/* For a matrix of calls (every collective, sizes, dtypes, every algorithm asked for, buffers from
 * gc_mem_alloc or not, in place or not), gc_plan_query gives the plan the call then takes (the one
 * it records), or refuses with the call's own code and message; it runs nothing (the output
 * keeps its poison) and leaves the communicator as it was. */
static void test_query_matches_calls(void) {
  static const size_t counts[] = {1000, 65537, 1 << 17};
  static const gc_dtype_t dtypes[] = {GC_FLOAT32, GC_BFLOAT16};
  const size_t n = (size_t)gc_test_size, most = (1 << 17) * 4 * n;
  int differ = 0, unequal_refusals = 0, ran = 0, wrote = 0;
  for (int sym = 0; sym < 2; sym++) {
    char *send = gc_test_alloc_as(sym, most), *recv = gc_test_alloc_as(sym, most);
    gc_test_fill(send, most / 4, GC_FLOAT32, gc_test_rank, 7);
    gc_test_fill(recv, most / 4, GC_FLOAT32, gc_test_rank, 8);
    for (int k = 0; k < GC_NUM_COLLECTIVES; k++)
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
        for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++)
          for (int a = 0; a < GC_NUM_ALGOS; a++)
            for (int in_place = 0; in_place < 2; in_place++) {
              if (a == GC_ALGO_MULTIMEM) continue; /* off on these hosts; its refusal is multimem's test */
              const size_t count = counts[ci], es = gc_dtype_size(dtypes[di]), mine = (size_t)gc_test_rank * count * es;
              const char *from = send;
              char *to = recv;
              if (in_place && (k == GC_COLLECTIVE_ALLREDUCE || k == GC_COLLECTIVE_BROADCAST)) from = recv;
              if (in_place && k == GC_COLLECTIVE_REDUCESCATTER) to = send + mine;
              if (in_place && k == GC_COLLECTIVE_ALLGATHER) from = recv + mine;
              gc_options_t o = GC_OPTIONS_INIT;
              o.algo = (gc_algo_t)a;
              gc_plan_t q = GC_PLAN_INIT;
              unsigned char before[64], after[64];
              gc_test_download(before, to, sizeof before);
              gc_result_t rq = gc_plan_query(&q, (gc_collective_t)k, from, to, count, dtypes[di], GC_SUM, 0,
                                             gc_test_comm, &o);
              char qmsg[1024];
              snprintf(qmsg, sizeof qmsg, "%s", gc__message_body(gc_comm_last_error(gc_test_comm)));
              gc_test_download(after, to, sizeof after);
              wrote += memcmp(before, after, sizeof before) != 0;
              const unsigned long made = gc_test_comm->plans_made;
              gc_result_t rc = run_call((gc_collective_t)k, from, to, count, dtypes[di], &o);
              if (rc == GC_SUCCESS) GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
              if (rq != GC_SUCCESS || rc != GC_SUCCESS) {
                int same = rq == rc && strstr(gc_comm_last_error(gc_test_comm), qmsg) != NULL;
                if (!same && unequal_refusals++ < 4)
                  fprintf(stderr, "[rank %d] %s, %zu x %s, %s, sym %d: query %s '%s', call %s '%s'\n", gc_test_rank,
                          gc__coll_name(internal_coll[k]), count, gc_dtype_name(dtypes[di]), gc_algo_name(o.algo), sym,
                          gc_result_name(rq), qmsg, gc_result_name(rc), gc_comm_last_error(gc_test_comm));
                continue;
              }
              ran++;
              gc_plan_t took = gc__plan_public(internal_coll[k], gc_test_comm->last_plan, es);
              const int same = gc_test_comm->plans_made == made + 1 && same_plan(&took, &q);
              if (!same && differ++ < 4)
                fprintf(stderr, "[rank %d] %s, %zu x %s, %s, sym %d: %lu plans; query %s/%s %d x %d, call %s/%s %d x %d\n",
                        gc_test_rank, gc__coll_name(internal_coll[k]), count, gc_dtype_name(dtypes[di]),
                        gc_algo_name(o.algo), sym, gc_test_comm->plans_made - made, gc_plan_path_name(q.path),
                        gc_algo_name(q.algo), q.blocks, q.threads, gc_plan_path_name(took.path),
                        gc_algo_name(took.algo), took.blocks, took.threads);
            }
    gc_test_free_as(sym, send);
    gc_test_free_as(sym, recv);
  }
  CU_ASSERT_EQUAL(differ, 0);
  CU_ASSERT_EQUAL(unequal_refusals, 0);
  CU_ASSERT_EQUAL(wrote, 0);
  CU_ASSERT_TRUE(ran > 50);
}

/* What the query itself refuses, and what it reports where nothing moves. */
static void test_query_arguments(void) {
  gc_plan_t q = GC_PLAN_INIT;
  char *buf = gc_test_alloc(4096 * (size_t)gc_test_size);
  CU_ASSERT_EQUAL(gc_plan_query(NULL, GC_COLLECTIVE_ALLREDUCE, buf, buf, 16, GC_FLOAT32, GC_SUM, 0, gc_test_comm, NULL),
                  GC_ERR_INVALID_ARGUMENT);
  q.version = 99;
  CU_ASSERT_EQUAL(gc_plan_query(&q, GC_COLLECTIVE_ALLREDUCE, buf, buf, 16, GC_FLOAT32, GC_SUM, 0, gc_test_comm, NULL),
                  GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "GC_PLAN_INIT"));
  CU_ASSERT_EQUAL(q.version, 99); /* written only on success */
  q = (gc_plan_t)GC_PLAN_INIT;
  CU_ASSERT_EQUAL(gc_plan_query(&q, (gc_collective_t)7, buf, buf, 16, GC_FLOAT32, GC_SUM, 0, gc_test_comm, NULL),
                  GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(gc_plan_query(&q, GC_COLLECTIVE_ALLREDUCE, NULL, buf, 16, GC_FLOAT32, GC_SUM, 0, gc_test_comm, NULL),
                  GC_ERR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "sendbuf is NULL"));
  CU_ASSERT_EQUAL(gc_plan_query(&q, GC_COLLECTIVE_BROADCAST, buf, buf, 16, GC_FLOAT32, GC_SUM, gc_test_size,
                                gc_test_comm, NULL),
                  GC_ERR_INVALID_ARGUMENT);
  GC_TEST_OK(gc_plan_query(&q, GC_COLLECTIVE_ALLGATHER, buf, buf, 0, GC_FLOAT32, GC_SUM, 0, gc_test_comm, NULL));
  CU_ASSERT_EQUAL(q.path, GC_PLAN_NONE);
  CU_ASSERT_EQUAL(q.algo, GC_ALGO_AUTO);
  GC_TEST_OK(gc_plan_query(&q, GC_COLLECTIVE_ALLREDUCE, buf, buf, 16, GC_FLOAT32, GC_SUM, 0, gc_test_comm, NULL));
  CU_ASSERT_TRUE(q.path != GC_PLAN_NONE && q.algo != GC_ALGO_AUTO);
  CU_ASSERT_STRING_EQUAL(gc_plan_path_name(GC_PLAN_COPYENGINE), "copyengine");
  CU_ASSERT_PTR_NULL(gc_plan_path_name(GC_NUM_PLAN_PATHS));
  /* the same plan on every rank */
  const long fields[] = {q.path, q.algo, q.fell_from, q.from_table, q.blocks, q.threads, (long)q.chunk_bytes,
                         (long)q.piece_bytes, q.staged};
  CU_ASSERT_TRUE(gc_test_same_on_all_ranks(fields, sizeof fields));
  /* the query compares nothing across ranks, so one rank may ask alone (GC_CHECK_CALLS=1 too) */
  if (gc_test_rank == 0)
    GC_TEST_OK(gc_plan_query(&q, GC_COLLECTIVE_BROADCAST, buf, buf, 64, GC_FLOAT32, GC_SUM, 0, gc_test_comm, NULL));
  MPI_Barrier(MPI_COMM_WORLD);
  gc_test_free(buf);
}

void gc_test_suite_plan_query(void) {
  static const gc_test_case_t tests[] = {{"the query is the call's plan", test_query_matches_calls},
                                         {"query arguments", test_query_arguments},
                                         {NULL, NULL}};
  gc_test_add_suite("plan_query", tests);
}
