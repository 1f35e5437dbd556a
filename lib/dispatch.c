/* dispatch.c — the table that maps (collective, GPU count, bytes) to an algorithm and a grid.
 * It depends only on values every rank shares, so every rank launches the same configuration. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_plan.h"
#include "kernels.h"

typedef gc__row_t row_t;

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)
#define ANY SIZE_MAX
#define NONE GC_ALGO_AUTO /* no fallback: the row's algorithm takes every dtype */

/* Rows for compute capability 9.x (Hopper: H100, H200), the only architecture they were measured
 * on. First matching row wins. Sizes are the bytes nccl-tests reports (all-gather: the whole output,
 * reduce-scatter: the whole input). Chosen from the bench (4 and 2 x H200, bf16, graph replay, each
 * algorithm forced; the row comments give the figures): small calls by the barrier-free LL
 * one-shot (float32/16, bf16; other dtypes take the row's fallback) or the push kernels; the
 * all-reduce's middle sizes by the two-shot by writes, large ones by the copy-engine forms
 * (copyengine.c: both halves by copy engine, or a reduce-scatter kernel and a copy-engine
 * all-gather; gc__ce_allreduce_by_copies below); all-gather and broadcast switch
 * to the copy engines past the sizes in the row comments. The copy-engine reduce-scatter ran at
 * 181-236 GB/s on 4 GPUs and is never picked. The copy-engine path and the broadcast by writes
 * need outputs from gc_mem_alloc and fall back to the kernels otherwise. 5-8 GPUs: from 8 x H200,
 * each algorithm forced, us. */
static const row_t sm90_rows[] = {
    {GC_COLL_ALLREDUCE, 1, 1, ANY, GC_ALGO_ONESHOT, NONE, NONE},
    /* LL one-shot against the push one-shot, 2 GPUs, us: 1 KB 3.19 vs 3.49, 256 KB 4.80 vs 4.94;
     * 1 MB 7.24 (one pack per thread) vs two-shot by writes 9.69. */
    {GC_COLL_ALLREDUCE, 2, 2, 512 * KB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_ALLREDUCE, 2, 2, 1 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_WRITES, NONE},
    /* The two-shot by writes (every chunk in one kernel) against the copy engines, 2 x H200, forced,
     * us: 55.89 / 108.1 / 204.5 / 389.0 at 16 / 32 /
     * 64 / 128 MB against 68.66 / 119.2 / 212.7 / 401.1; 767.6 / 3017.8 at 256 MB / 1 GB against
     * 728.2 / 2774.8. Outputs peers cannot write take it at every size (coll.c `staged`). */
    {GC_COLL_ALLREDUCE, 2, 2, 128 * MB, GC_ALGO_WRITES, NONE, NONE},
    {GC_COLL_ALLREDUCE, 2, 2, ANY, GC_ALGO_COPYENGINE, NONE, NONE},
    /* 4 GPUs, us: LL one-shot 3.62 /
     * 4.06 / 6.93 at 1 / 16 / 256 KB against the push one-shot's 3.76 / 4.13 / 7.34; two-shot by
     * writes 12.64 / 29.36 / 80.76 / 298.3 at 1 / 4 / 16 / 64 MB against two-shot by reads 15.78 /
     * 31.91 / 93.19 / 321.5 and the copy engines' 318.5 at 64 MB. */
    /* 4 GPUs, forced: LL one-shot 8.77-8.82 us at 512 KB against the two-shot by
     * writes' 9.31-9.34 (128-thread blocks), 14.86-14.98 at 1 MB against 11.81-11.97. */
    {GC_COLL_ALLREDUCE, 3, 4, 256 * KB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_ALLREDUCE, 3, 4, 512 * KB, GC_ALGO_ONESHOT_LL, GC_ALGO_WRITES, NONE},
    /* 4 GPUs, forced, us, the two-shot by writes in one kernel: 298.6 / 587.9 /
     * 1166.7 at 64 / 128 / 256 MB against the copy engines' 319.8 / 604.9 / 1167.5. 3 GPUs: not
     * measured at 128 MB. */
    {GC_COLL_ALLREDUCE, 3, 4, 128 * MB, GC_ALGO_WRITES, NONE, NONE},
    {GC_COLL_ALLREDUCE, 3, 4, ANY, GC_ALGO_COPYENGINE, NONE, NONE},
    /* 8 GPUs: the push one-shot 3.72 / 4.34 at 1 / 16 KB against LL's 4.19 / 4.84; LL 5.95 / 10.22
     * at 64 / 256 KB against the one-shot's 6.09 / 13.43 and the two-shot by writes' 11.55 / 12.19;
     * by writes 14.65 / 31.35 / 95.98 / 365.4 at 1 / 4 / 16 / 64 MB against by reads 17.96 / 38.08 /
     * 114.5 / 377.5 and the copy engines' 394.9 at 64 MB; the copy engines 1384.3 / 5351.5 at 256 MB /
     * 1 GB against by reads 1449.7 / 5734.0 and by writes 1456.7 / 5826.1. */
    {GC_COLL_ALLREDUCE, 5, 8, 16 * KB, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_ALLREDUCE, 5, 8, 64 * KB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_ALLREDUCE, 5, 8, 256 * KB, GC_ALGO_ONESHOT_LL, GC_ALGO_WRITES, NONE},
    {GC_COLL_ALLREDUCE, 5, 8, 64 * MB, GC_ALGO_WRITES, NONE, NONE},
    {GC_COLL_ALLREDUCE, 5, 8, ANY, GC_ALGO_COPYENGINE, NONE, NONE},
    /* LL against the push / read kernels, us, 4 GPUs: 4.24 vs 4.35 at 1 KB, 5.91 vs 6.14 at 256 KB,
     * 7.02 vs 8.64 at 1 MB; 2 GPUs 6.03 vs 7.94 at 1 MB (forced). */
    /* 2 GPUs to 4 MB (forced, us): LL 5.92 / 7.51 / 11.65 / 20.35 at 1 / 2 / 4 / 8 MB against the
     * one-shot's 7.91 / 9.81 / 13.55 / 20.14; the autotuner picks LL there too (4 MB 11.47 against
     * the one-shot's 13.38). */
    {GC_COLL_REDUCESCATTER, 2, 2, 4 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_REDUCESCATTER, 2, 4, 1 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    /* 8 GPUs: LL 4.81 / 6.04 / 8.41 / 18.29 at 1 KB / 256 KB / 1 MB / 4 MB against the one-shot's
     * 5.30 / 8.10 / 10.01 / 20.74. Past 16 MB the one-shot and the reduce-scatter by writes are
     * level (731.8 / 731.7 at 256 MB, 2901.6 / 2866.1 at 1 GB). */
    {GC_COLL_REDUCESCATTER, 5, 8, 4 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    /* From a plain input the one-shot copies every chunk into staging first; past 16 MB the
     * reduce-scatter by writes, which sends from the input where it is, is faster (forced,
     * --eager, us, 4 GPUs: 663.9 / 2545.9 vs 864.0 / 3456.2 at 256 MB / 1 GB; 2 GPUs
     * 453.2 / 1633.7 vs 622.4 / 2491.7; at 16 MB the one-shot wins, 60.21 vs 68.20 on 4 GPUs). */
    {GC_COLL_REDUCESCATTER, 1, 8, 16 * MB, GC_ALGO_ONESHOT, NONE, NONE},
    /* 4 GPUs, symmetric input: by writes with the senders' control warp against the one-shot
     * (both forced, us): 320.9 / 618.1 / 1210.3 /
     * 2402.1 at 128 / 256 / 512 MB / 1 GB against 316.8 / 623.4 / 1238.0 / 2447.3. Not on 3
     * GPUs (a part of 1 GB starts off a 16-byte boundary there): by writes takes 2551.9 us
     * out of place and 4007.4 in place at 1 GB against the one-shot's 2151.2-2158.7 / 2152.3-2154.7
     * (3 x H200, forced). On 4 GPUs coll.c also keeps it off parts that are
     * off 16-byte boundaries. */
    {GC_COLL_REDUCESCATTER, 4, 4, 256 * MB, GC_ALGO_ONESHOT, NONE, GC_ALGO_WRITES},
    {GC_COLL_REDUCESCATTER, 4, 4, ANY, GC_ALGO_WRITES, NONE, NONE},
    {GC_COLL_REDUCESCATTER, 1, 8, ANY, GC_ALGO_ONESHOT, NONE, GC_ALGO_WRITES},
    {GC_COLL_ALLGATHER, 1, 1, ANY, GC_ALGO_ONESHOT, NONE, NONE},
    /* All-gather by LL, us: ties the push kernel to 64 KB, loses at 256 KB (4 GPUs 5.71 vs 5.48, 2
     * GPUs 4.79 vs 4.53), wins at 1 MB on 2 GPUs (6.17 vs 8.25; forced/ll{4,2}_allgather_*_run14.txt). */
    {GC_COLL_ALLGATHER, 2, 2, 256 * KB, GC_ALGO_ONESHOT, NONE, NONE},
    /* To 4 MB because the autotuner takes LL there in every tuning pass: LL against the one-shot at
     * 4 MB, out of place / in place, us, over four passes: 11.84-12.20 / 11.85-12.58 against
     * 13.33-13.84 / 12.31-12.97 (2 x H200). */
    {GC_COLL_ALLGATHER, 2, 2, 4 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_ALLGATHER, 2, 2, 16 * MB, GC_ALGO_ONESHOT, NONE, NONE},
    /* By writes through staging (control warp) against the copy engines and the one-shot, outputs
     * from gc_mem_alloc, forced, us: 16 MB 39.41 /
     * 46.26 / 33.98, 32 MB 60.27 / 69.62 / 61.67, 64 MB 107.0 / 114.8 / 120.1, 128 MB 203.2 / 203.2
     * / 233.3, 256 MB 391.6 / 373.3 / 453.6. Outputs peers cannot write, against the staged copy
     * engines and the one-shot with copy-in, --eager (by writes without the control warp; with
     * it: 64 MB 108.2, 256 MB 390.5, 1 GB 1536.9): 16 MB 39.30 / 68.19 / 39.70, 64 MB 113.9 / 148.5 /
     * 138.6, 256 MB 406.6 / 427.0 / 549.7, 1 GB 1593.8 / 1527.3 / 2201.7. */
    {GC_COLL_ALLGATHER, 2, 2, 64 * MB, GC_ALGO_WRITES, NONE, NONE},
    {GC_COLL_ALLGATHER, 2, 2, 256 * MB, GC_ALGO_COPYENGINE, NONE, GC_ALGO_WRITES},
    {GC_COLL_ALLGATHER, 2, 2, ANY, GC_ALGO_COPYENGINE, NONE, NONE},
    {GC_COLL_ALLGATHER, 3, 4, 64 * MB, GC_ALGO_ONESHOT, NONE, NONE}, /* 64 MB: 164.8 vs 167.4 us */
    /* 8 GPUs: the push kernel 3.80 / 5.24 / 8.37 / 20.66 at 1 KB / 256 KB / 1 MB / 4 MB against LL's
     * 5.25 / 6.52 / 8.69 / 17.40; the copy engines 711.2 / 2472.5 at 256 MB / 1 GB against the
     * kernel's 725.7 / 2884.4, 245.7 against 194.9 at 64 MB. */
    {GC_COLL_ALLGATHER, 5, 8, 1 * MB, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_ALLGATHER, 5, 8, 4 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_ALLGATHER, 5, 8, 64 * MB, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_ALLGATHER, 3, 8, ANY, GC_ALGO_COPYENGINE, NONE, NONE},
    {GC_COLL_BROADCAST, 1, 1, ANY, GC_ALGO_ONESHOT, NONE, NONE},
    /* Broadcast, us (forced, 1 KB - 256 MB). 2 GPUs: the push one-shot 2.97 / 3.18 at
     * 1 / 16 KB against LL's 3.23 / 3.33; LL 3.45 / 3.85 / 5.95 / 14.74 / 52.81 at 64 KB / 256 KB /
     * 1 / 4 / 16 MB against the one-shot's 3.90 / 4.73 / 10.41 / 20.65 and the by-writes kernel's
     * 54.46 at 16 MB; by writes 100.4 / 189.6 at 32 / 64 MB against LL's 105.7 / 211.4; one copy
     * engine copy 721.4 at 256 MB against 733.1. Outputs peers cannot write: LL to 16 MB, then
     * by writes through staging (coll.c p2p_broadcast), faster than the staged copy engines at
     * every size (2 x H200: 191.0 / 739.3 / 2925.4 us at 64 / 256 MB / 1 GB against 225.2 / 771.8
     * / 2949.7). */
    {GC_COLL_BROADCAST, 2, 2, 16 * KB, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_BROADCAST, 2, 2, 4 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_BROADCAST, 2, 2, 16 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_WRITES, NONE},
    {GC_COLL_BROADCAST, 2, 2, 64 * MB, GC_ALGO_WRITES, NONE, NONE},
    {GC_COLL_BROADCAST, 2, 2, ANY, GC_ALGO_COPYENGINE, NONE, GC_ALGO_WRITES},
    /* 4 GPUs: the push one-shot 3.14 / 3.36 at 1 / 16 KB against LL's 3.61 / 3.67; LL (direct to
     * 256 KB, through owners from 512 KB) 3.97 / 5.48 / 7.95 / 17.10 / 30.00 / 59.61 / 118.9 at
     * 64 KB / 256 KB / 1 / 4 / 8 / 16 / 32 MB against the one-shot's 4.27 / 6.32 / 16.24 and the
     * by-writes kernel's 15.63 / 31.61 / 44.21 / 72.46 / 124.9 at 1 - 32 MB (through
     * owners 13.75 / 25.71 / 69.69 at 1 / 4 / 16 MB, still behind LL); by writes (owners to 64 MB,
     * then the ring; coll.c) 210.5 / 781.4 at 64 / 256 MB against LL's 238.8 / 949.9 and the copy
     * engines' 338.9 / 1127.8. */
    {GC_COLL_BROADCAST, 3, 4, 16 * KB, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_BROADCAST, 3, 4, 256 * KB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_BROADCAST, 3, 4, 32 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_WRITES, NONE},
    /* 8 GPUs: the push one-shot 2.91 / 4.67 at 1 / 64 KB against LL's 4.38 / 5.01; LL 8.88 / 9.48 /
     * 22.46 / 80.04 / 317.6 at 256 KB / 1 / 4 / 16 / 64 MB against the one-shot's 9.41 / 28.19 and
     * by writes through owners 12.76 / 15.24 / 28.66 / 88.61 / 231.3 (32 KB pieces); the two-stage
     * pull 1372.1 and the copy engines 1266.4 at 256 MB against by writes' 813.2 (owners; schedule:
     * coll.c). With 16 KB pieces (forced)
     * owners took 33.20 / 47.74 / 71.78 at 4 / 8 / 16 MB: LL up to 8 MB (LL at 8 MB not measured;
     * between its 22.46 and 80.04 at 4 and 16 MB). */
    {GC_COLL_BROADCAST, 5, 8, 64 * KB, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_BROADCAST, 5, 8, 256 * KB, GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, NONE},
    {GC_COLL_BROADCAST, 5, 8, 8 * MB, GC_ALGO_ONESHOT_LL, GC_ALGO_WRITES, NONE},
    {GC_COLL_BROADCAST, 3, 8, ANY, GC_ALGO_WRITES, NONE, NONE},
};

/* Every other architecture (sm_80, sm_89, sm_100, ...; host-only ranks too, which take the MPI
 * path whatever the rows say): none of the rows above was measured there, and the sizes where
 * LL, the kernels by writes and the copy engines win follow from Hopper's NVLink bandwidth, SM
 * count and copy engines. These rows take the kernels by reads, which every architecture runs
 * and which depend on no measured crossover but the one from latency to bandwidth: the one-shot
 * (every rank reads every peer) up to 256 KB, the two-shot (each rank reduces or relays a 1/n
 * slice, then all read it) above for the all-reduce and, on 3+ GPUs, the broadcast (two stages);
 * the reduce-scatter and the all-gather by the one-shot, which moves every byte once already.
 * 256 KB is a round figure, not a measurement: gc_autotune measures the rest on such a machine. */
static const row_t default_rows[] = {
    {GC_COLL_ALLREDUCE, 1, 1, ANY, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_ALLREDUCE, 2, 8, 256 * KB, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_ALLREDUCE, 2, 8, ANY, GC_ALGO_TWOSHOT, NONE, NONE},
    {GC_COLL_REDUCESCATTER, 1, 8, ANY, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_ALLGATHER, 1, 8, ANY, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_BROADCAST, 1, 2, ANY, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_BROADCAST, 3, 8, 256 * KB, GC_ALGO_ONESHOT, NONE, NONE},
    {GC_COLL_BROADCAST, 3, 8, ANY, GC_ALGO_TWOSHOT, NONE, NONE},
};

/* The row sets by architecture (compute capability major); the last is every other one's. */
typedef struct {
  int cc_major;
  const char *name;
  const row_t *rows;
  int count;
} row_set_t;
static const row_set_t row_sets[] = {
    {9, "sm_90 (measured on H200)", sm90_rows, (int)(sizeof sm90_rows / sizeof sm90_rows[0])},
    {-1, "default (other architectures: not measured)", default_rows, (int)(sizeof default_rows / sizeof default_rows[0])},
};
enum { NUM_ROW_SETS = sizeof row_sets / sizeof row_sets[0] };

static const row_set_t *row_set(int cc_major) {
  for (int i = 0; i < NUM_ROW_SETS - 1; i++)
    if (row_sets[i].cc_major == cc_major) return &row_sets[i];
  return &row_sets[NUM_ROW_SETS - 1];
}

static const char *coll_names[GC_NUM_TUNED_KINDS] = {"allreduce", "reducescatter", "allgather", "broadcast", "rmsnorm"};
const char *gc__coll_name(gc__coll_t coll) { return coll < GC_NUM_TUNED_KINDS ? coll_names[coll] : "?"; }

const gc__row_t *gc__table_row(int cc_major, gc__coll_t coll, int n, size_t bytes) {
  const row_set_t *set = row_set(cc_major);
  for (int i = 0; i < set->count; i++) {
    const row_t *row = &set->rows[i];
    if (row->coll == coll && n >= row->min_ranks && n <= row->max_ranks && bytes <= row->max_bytes) return row;
  }
  return NULL;
}

/* The copy-engine all-reduce by copies (copyengine.c: both halves by copy engine, two stages)
 * against its forms with a reduce kernel, forced, us, sm_90:
 * 4 GPUs 632.3 / 1175.0 / 2165.2 / 4228.8 at 128 / 256 / 512 MB / 1 GB against by writes' 601.1 /
 * 1152.2 / 2240.6 / 4437.4 (one stage 658.5 / 1216.4 / 2308.5 / 4526.6; four stages 4408.0 at 1
 * GB); 3 GPUs 975.6 / 3728.7 at 256 MB / 1 GB against by reads' 1023.9 / 3999.5; 2 GPUs 756.6 /
 * 2783.9 at 256 MB / 1 GB against 773.0 / 3006.1, but 232.9 against 213.5 at 64 MB. 5-8 GPUs and
 * other architectures: not measured, so not taken. */
int gc__ce_allreduce_by_copies(int cc_major, int n, size_t bytes) {
  if (cc_major != 9 || n < 2 || n > 4) return 0;
  return bytes >= (n == 4 ? 512 * MB : 256 * MB);
}

gc_algo_t gc__table_choice(int cc_major, int n, gc__coll_t coll, size_t bytes, int symmetric_input) {
  const row_t *row = gc__table_row(cc_major, coll, n, bytes);
  if (!row) return GC_ALGO_AUTO;
  return !symmetric_input && row->plain != NONE ? row->plain : row->algo;
}

int gc__table_rows(int cc_major, const gc__row_t **out, const char **name) {
  const row_set_t *set = row_set(cc_major);
  *out = set->rows;
  if (name) *name = set->name;
  return set->count;
}

gc_result_t gc__dispatch_describe(gc_comm_t comm) {
  size_t cap = 8192 + (size_t)comm->tuned_count * 80, n = 0;
  char *text = malloc(cap);
  if (!text) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory");
  const row_t *rows = NULL;
  const char *set = NULL;
  const int count = gc__table_rows(comm->cc_major, &rows, &set);
  if (comm->cc_major > 0) n += (size_t)snprintf(text + n, cap - n, "rows for %s; this GPU: sm_%d0\n", set, comm->cc_major);
  else n += (size_t)snprintf(text + n, cap - n, "rows for %s; no GPU on this rank\n", set);
  n += (size_t)snprintf(text + n, cap - n, "%-14s %-7s %-12s %-9s %s\n", "collective", "gpus", "up to bytes",
                        "algorithm", "max blocks");
  for (int i = 0; i < count && n < cap; i++) {
    char gpus[16], upto[24];
    snprintf(gpus, sizeof gpus, "%d-%d", rows[i].min_ranks, rows[i].max_ranks);
    if (rows[i].max_bytes == ANY) snprintf(upto, sizeof upto, "any");
    else snprintf(upto, sizeof upto, "%zu", rows[i].max_bytes);
    const char *algo = gc_algo_name(rows[i].algo);
    if (rows[i].coll == GC_COLL_BROADCAST && (rows[i].algo == GC_ALGO_ONESHOT || rows[i].algo == GC_ALGO_TWOSHOT))
      algo = rows[i].algo == GC_ALGO_ONESHOT ? "one-stage" : "two-stage";
    n += (size_t)snprintf(text + n, cap - n, "%-14s %-7s %-12s %-9s %d", gc__coll_name(rows[i].coll), gpus, upto,
                          algo, GC_TABLE_MAX_BLOCKS);
    if (rows[i].fallback != GC_ALGO_AUTO && n < cap)
      n += (size_t)snprintf(text + n, cap - n, " (other dtypes: %s)", gc_algo_name(rows[i].fallback));
    if (rows[i].plain != GC_ALGO_AUTO && n < cap)
      n += (size_t)snprintf(text + n, cap - n, " (%s not from gc_mem_alloc: %s)",
                            rows[i].coll == GC_COLL_REDUCESCATTER ? "input" : "output", gc_algo_name(rows[i].plain));
    if (n < cap) n += (size_t)snprintf(text + n, cap - n, "\n");
  }
  if (!comm->p2p_ready && n < cap)
    n += (size_t)snprintf(text + n, cap - n, "(this communicator has no peer-to-peer GPUs: every call takes the MPI path)\n");
  else if (comm->size == 1 && n < cap)
    n += (size_t)snprintf(text + n, cap - n, "(one rank: a call that asks for no algorithm copies its input, or runs the one-shot "
                                             "kernel for an epilogue, whatever the rows say)\n");
  for (int i = 0; i < comm->tuned_count && n < cap; i++) {
    const gc__tuned_t *t = &comm->tuned[i];
    char upto[24];
    if (t->max_bytes == ANY) snprintf(upto, sizeof upto, "any");
    else snprintf(upto, sizeof upto, "%zu", t->max_bytes);
    n += (size_t)snprintf(text + n, cap - n, "%-14s %-7s %-12s %-9s tuned (first match wins)\n", gc__coll_name(t->coll),
                          "this", upto, gc_algo_name(t->algo));
  }
  if (n < cap) n += gc__switches_describe(&comm->sw, text + n, cap - n);
  free(comm->algo_table_text);
  comm->algo_table_text = text;
  return GC_SUCCESS;
}
