/* plan.c — the planner: one call and the communicator's facts in, the complete plan out. Host
 * arithmetic on values every rank shares (no CUDA, no MPI), so every rank derives the same plan;
 * this is the only file that writes a gc__plan_t. */
#include <stdint.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_plan.h"
#include "kernels.h"
#include "wire.h"

#define MB ((size_t)1 << 20)

/* ---- dispatch: the algorithm and the grid ------------------------------------------------- */

static gc_algo_t tuned_algo(const gc__facts_t *f, gc__coll_t coll, size_t bytes) {
  for (int i = 0; i < f->tuned_count; i++)
    if (f->tuned[i].coll == coll && bytes <= f->tuned[i].max_bytes) return f->tuned[i].algo;
  return GC_ALGO_AUTO;
}

/* Packs per block: two 16-byte packs per thread hide NVLink latency; the LL kernels take one
 * per thread in small blocks, spread over many SMs. Never more blocks than the cap. */
static int grid_for(size_t bytes, int cap, size_t per_block) {
  size_t packs = (bytes + 15) / 16;
  size_t blocks = (packs + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > (size_t)cap) blocks = (size_t)cap;
  return (int)blocks;
}

/* Threads per block of the two-shot all-reduce by writes on 3+ GPUs while its slices are small
 * (0: GC_KTHREADS, the grid from the whole input). A thread then takes one 16-byte pack of the
 * slice per destination, and the small blocks spread a small slice over more SMs: with 512-thread
 * blocks half the threads idle at 1 MB on 4 GPUs, whose slices are a quarter of the input. On 2
 * GPUs the 512-thread grid already gives every thread one pack per destination. */
static int twoshot_writes_threads(int nranks, size_t slice_bytes) {
  if (nranks < 3) return 0;
  if (slice_bytes <= 1 * MB) return 128;
  if (slice_bytes <= 2 * MB) return 256;
  return 0;
}

static gc_result_t refuse_multimem(const gc__facts_t *f, const gc__call_t *c) {
  const char *which = NULL;
  if (gc__multicast_kill_switch(&which))
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED,
                   "multimem refused: %s is set, the operator's NVLink multicast kill switch", which);
  if (!f->multimem_asked)
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED,
                   "multimem is off by default; it needs GC_MULTIMEM and a host whose operator allows multicast");
  if (!f->multimem_ready)
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "multimem is not available on this communicator: %s",
                   f->multimem_why ? f->multimem_why : "not set up");
  if (c->coll != GC_COLL_ALLREDUCE && c->coll != GC_COLL_REDUCESCATTER)
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "multimem serves the all-reduce and the reduce-scatter, not the %s",
                   gc__coll_name(c->coll));
  if (c->coll == GC_COLL_REDUCESCATTER && c->axis == 1)
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "multimem reduce-scatters contiguous parts (1-D or axis 0), not axis 1");
  return GC_SUCCESS;
}

/* The algorithm: the options', else GC_ALGO's, else the tuned rows', else the table's; a choice
 * the collective or the call cannot take becomes the nearest one that it can, unless the options
 * asked for it. */
static gc_result_t choose_algo(const gc__facts_t *f, const gc__call_t *c, const gc__row_t *row, gc__plan_t *p) {
  const int explicit_algo = c->algo != GC_ALGO_AUTO;
  gc_algo_t algo = explicit_algo ? c->algo : f->forced_algo;
  if (algo == GC_ALGO_MULTIMEM) GC_CHECK(refuse_multimem(f, c));
  if (algo == GC_ALGO_AUTO) algo = tuned_algo(f, c->coll, c->bytes);
  p->from_table = algo == GC_ALGO_AUTO && f->p2p_ready && row;
  if (algo == GC_ALGO_AUTO) algo = f->p2p_ready && row ? row->algo : GC_ALGO_MPI;
  if (algo != GC_ALGO_MPI && !f->p2p_ready) {
    if (explicit_algo)
      return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "algorithm %s needs peer-to-peer GPUs; this communicator has none",
                     gc_algo_name(algo));
    algo = GC_ALGO_MPI; /* GC_ALGO forces kernels where they exist, MPI elsewhere */
  }
  /* Two-shot: all-reduce and broadcast; by writes: every collective. */
  if (algo == GC_ALGO_TWOSHOT && c->coll != GC_COLL_ALLREDUCE && c->coll != GC_COLL_BROADCAST) {
    if (explicit_algo)
      return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "%s has no %s algorithm (use oneshot or mpi)",
                     gc__coll_name(c->coll), gc_algo_name(algo));
    algo = GC_ALGO_ONESHOT;
  }
  if (algo == GC_ALGO_ONESHOT_LL && (c->ll_bytes == 0 || c->ll_bytes > GC_LL_GEN_BYTES)) {
    if (explicit_algo)
      return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED,
                     "algorithm oneshot_ll takes all-reduce, reduce-scatter (contiguous parts, none empty), all-gather and "
                     "broadcast of float32, float16 or bfloat16 data (fp8 to gather or broadcast), an output type "
                     "other than float64, and calls whose n parts fit one LL generation of %zu bytes (a "
                     "broadcast goes in chunks of one; this call %s)",
                     (size_t)GC_LL_GEN_BYTES, c->ll_bytes ? "needs more" : "is none of those");
    algo = row && row->algo == algo && row->fallback != GC_ALGO_AUTO ? row->fallback : GC_ALGO_ONESHOT;
  }
  p->algo = algo;
  return GC_SUCCESS;
}

/* The grid: LL threads take one pack of a part each (every row at that pack; a broadcast has one
 * row), all resident (up to 512 threads an SM: they wait on peers); the small two-shot by writes
 * one pack of its slice; the rest two packs of the input. */
static void choose_grid(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  const int ll = p->algo == GC_ALGO_ONESHOT_LL, n = f->local_size;
  const int sms = f->sm_count > 0 ? f->sm_count : GC_TABLE_MAX_BLOCKS;
  int cap = ll ? sms * (512 / f->sw.ll_threads) : GC_TABLE_MAX_BLOCKS;
  if (!ll && cap > sms) cap = sms;
  if (f->max_blocks > 0 && f->max_blocks < cap) cap = f->max_blocks;
  if (c->max_blocks > 0) cap = c->max_blocks; /* at most GC_KMAX_BLOCKS: gc__resolve_options refuses more */
  const size_t slice = c->bytes / (size_t)n;
  const int small_twoshot = !ll && p->algo == GC_ALGO_WRITES && c->coll == GC_COLL_ALLREDUCE
                                ? twoshot_writes_threads(n, slice)
                                : 0;
  size_t work = c->bytes, per_block = 2 * GC_KTHREADS;
  p->threads = GC_KTHREADS;
  if (ll) {
    p->threads = f->sw.ll_threads;
    per_block = (size_t)f->sw.ll_threads;
    if (c->coll != GC_COLL_BROADCAST) work = c->ll_bytes / (size_t)n;
  } else if (small_twoshot) {
    p->threads = small_twoshot;
    per_block = (size_t)small_twoshot;
    work = slice;
  }
  p->blocks = grid_for(work, cap, per_block);
}

gc_result_t gc__plan_dispatch(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *plan) {
  gc__plan_t p;
  memset(&p, 0, sizeof p);
  const gc__row_t *row = gc__table_row(f->cc_major, c->coll, f->local_size, c->bytes);
  GC_CHECK(choose_algo(f, c, row, &p));
  choose_grid(f, c, &p);
  p.path = p.algo == GC_ALGO_MPI ? GC_PATH_MPI : GC_PATH_PEERS;
  p.fell_from = GC_ALGO_AUTO;
  p.plain = p.from_table ? row->plain : GC_ALGO_AUTO; /* taken by the collective's planner below */
  *plan = p;
  return GC_SUCCESS;
}

/* ---- fallbacks ------------------------------------------------------------------------------ */

/* The copy-engine path and the kernels by writes into peers' outputs need what `usable` says and
 * 2+ GPUs. When the planned algorithm cannot run, a call whose options asked for it is refused;
 * any other choice falls back to `instead`, keeping its grid. */
static gc_result_t usable_or(const gc__facts_t *f, const gc__call_t *c, int usable, const char *why,
                             gc_algo_t instead, gc__plan_t *p) {
  if (usable && f->local_size >= 2) return GC_SUCCESS;
  if (c->algo == p->algo)
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "algorithm %s needs %s", gc_algo_name(p->algo),
                   f->local_size < 2 ? "2 or more GPUs" : why);
  p->fell_from = p->algo;
  p->algo = instead;
  return GC_SUCCESS;
}

/* The table row's choice for a buffer peers cannot use (the reduce-scatter's input, the
 * all-gather's and broadcast's output). */
static void take_plain(int usable_by_peers, gc__plan_t *p) {
  if (usable_by_peers || p->plain == GC_ALGO_AUTO) return;
  p->fell_from = p->algo;
  p->algo = p->plain;
}

/* Outputs not from gc_mem_alloc on the copy-engine path go through staging when the algorithm
 * was asked for, and from the table only on 2 GPUs past `past` bytes, where that is faster than
 * the kernels (the all-gather past 64 MB; the all-reduce and broadcast only when asked). 1 GPU:
 * no peers. */
static int staged(const gc__facts_t *f, const gc__plan_t *p, size_t bytes, size_t past) {
  if (f->local_size < 2) return 0;
  if (!p->from_table) return 1;
  return f->local_size == 2 && bytes > past;
}

size_t gc__bywrites_slot(const gc__facts_t *f) {
  size_t rows = (size_t)GC_BYWRITES_SLOTS * GC_BYWRITES_STREAMS * (size_t)(f->local_size - 1);
  return f->local_size < 2 ? 0 : (gc__staging_half(f->staging_bytes) / rows) & ~(size_t)15;
}

/* Half the grid as streams (a sender and a reducer each, at most GC_BYWRITES_STREAMS), pieces of
 * about most / streams bytes from 4 KB up to the inbox slot (32 KB with the senders' control
 * warp), or the push_piece switch; no more streams than pieces. The control warp by default on 3-4 GPUs,
 * where it is faster; on 2 GPUs the block signals faster. */
gc__bywrites_shape_t gc__bywrites_shape(const gc__facts_t *f, size_t most, int blocks) {
  const int n = f->local_size;
  gc__bywrites_shape_t s = {blocks, 0, gc__bywrites_slot(f), 0};
  size_t streams = blocks / 2 < GC_BYWRITES_STREAMS ? (size_t)blocks / 2 : GC_BYWRITES_STREAMS;
  if (streams < 1) streams = 1;
  size_t piece = f->sw.push_piece ? f->sw.push_piece : (most + streams - 1) / streams;
  piece = (piece + 15) & ~(size_t)15;
  if (piece < 4096) piece = 4096;
  if (piece > s.slot_bytes) piece = s.slot_bytes;
  s.control = f->sw.push_control >= 0 ? f->sw.push_control : n == 3 || n == 4;
  if (!f->sw.push_piece && s.control && piece > 32768) piece = 32768;
  const size_t pieces = most ? (most + piece - 1) / piece : 0;
  s.blocks = 2 * (int)(pieces < streams ? pieces : streams);
  s.piece = piece;
  return s;
}

/* The rings through staging (all-gather and broadcast by writes): pieces by size or the push_piece switch,
 * the control warp by default for the all-gather, where it is faster (the broadcast's is level). */
static void staged_ring(const gc__facts_t *f, int gather, gc__plan_t *p) {
  p->form = GC_FORM_RING_STAGED;
  p->piece = f->sw.push_piece;
  p->slot_bytes = gc__staging_half(f->staging_bytes);
  p->control = f->sw.push_control >= 0 ? f->sw.push_control : gather;
}

/* ---- per collective ----------------------------------------------------------------------- */

/* Chunks start 16-byte aligned for any element size; one chunk needs no rounding (under 16
 * elements it would be 0). */
static size_t aligned_chunk(size_t chunk, size_t count) { return chunk < count ? chunk & ~(size_t)15 : chunk; }

/* The copy-engine all-reduce's reduce half (the ce_allreduce switch; auto: by copies out of place where
 * gc__ce_allreduce_by_copies says they are faster, else the reduce-scatter table's choice for this
 * size and input, by writes or by reads). */
static void plan_ce_allreduce(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  int form = f->sw.ce_allreduce;
  const int copies = form == GC_CE_AR_COPIES || (form == GC_CE_AR_AUTO && gc__ce_allreduce_by_copies(f->cc_major, f->local_size, c->bytes));
  if (copies && !c->in_place && c->os == c->es) {
    p->form = GC_FORM_CE_COPIES;
    p->ce_chunks = f->sw.ce_chunks;
    return;
  }
  if (form == GC_CE_AR_AUTO || form == GC_CE_AR_COPIES)
    form = gc__table_choice(f->cc_major, f->local_size, GC_COLL_REDUCESCATTER, c->bytes, c->sym_in) == GC_ALGO_WRITES
               ? GC_CE_AR_WRITES
               : GC_CE_AR_READS;
  if (gc__bywrites_slot(f) < 256) form = GC_CE_AR_READS; /* inboxes too small (GC_STAGING_BYTES) */
  p->form = GC_FORM_CE;
  p->ce_form = form;
}

/* The copy-engine all-reduce: through staging into an output peers cannot write, else into the
 * gc_mem_alloc output; the two-shot by writes where neither can run (it sends from the input
 * where it is). */
static gc_result_t plan_allreduce_ce(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  if (!c->sym_out && staged(f, p, c->bytes, SIZE_MAX)) {
    const int by_copies = f->sw.ce_allreduce == GC_CE_AR_COPIES || gc__bywrites_slot(f) < 256;
    GC_CHECK(usable_or(f, c, !by_copies || f->ce_inbox_fits, "a larger staging area (GC_STAGING_BYTES)",
                       GC_ALGO_WRITES, p));
    if (p->algo == GC_ALGO_COPYENGINE) {
      p->form = GC_FORM_CE_STAGED;
      p->by_copies = by_copies;
      return GC_SUCCESS;
    }
  }
  GC_CHECK(usable_or(f, c, c->sym_out && (c->sym_in || c->os == c->es),
                     c->sym_out ? "sendbuf from gc_mem_alloc when out_dtype differs" : "recvbuf from gc_mem_alloc",
                     GC_ALGO_WRITES, p));
  if (p->algo == GC_ALGO_COPYENGINE) plan_ce_allreduce(f, c, p);
  return GC_SUCCESS;
}

/* The two-shot by writes: inboxes in the staging inputs, results into gc_mem_alloc outputs, else
 * into staging. Each chunk's n inbox rows (ceil(lines / n) lines of GC_LINE_PACKS packs each) fit
 * half the staging area; one kernel takes every chunk. */
static void plan_twoshot_writes(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  const size_t half = gc__staging_half(f->staging_bytes), per_line_row = GC_LINE_PACKS * (size_t)f->local_size;
  const size_t chunk_packs = half / 16 / per_line_row * per_line_row;
  p->form = GC_FORM_TWOSHOT_WRITES;
  p->out_sym = c->sym_out;
  p->chunk = chunk_packs * 16 / c->es;
  if (!p->out_sym && p->chunk > half / c->os) p->chunk = (half / c->os) & ~(size_t)15;
}

/* By reads. The two-shot kernel takes only inputs and publish areas on 16-byte boundaries
 * (staging is aligned); off them the one-shot kernel runs. That one, in place on a gc_mem_alloc
 * buffer, would overwrite data peers are still reading, so it reads copies in staging. */
static void plan_allreduce_reads(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  const size_t half = gc__staging_half(f->staging_bytes);
  p->form = GC_FORM_READS;
  p->in_zero = c->sym_in;
  p->out_sym = p->algo == GC_ALGO_TWOSHOT && c->sym_out;
  const int twoshot = p->algo == GC_ALGO_TWOSHOT && !(p->in_zero && c->send_off16) && !(p->out_sym && c->recv_off16);
  p->kernel = twoshot ? GC_KALGO_TWOSHOT : GC_KALGO_ONESHOT;
  if (c->in_place && !twoshot) p->in_zero = 0;
  p->chunk = p->in_zero ? c->count : half / c->es;
  if (p->algo == GC_ALGO_TWOSHOT && !p->out_sym && half / c->os < p->chunk) p->chunk = half / c->os;
  p->chunk = aligned_chunk(p->chunk, c->count);
}

static gc_result_t plan_allreduce(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  take_plain(1, p);
  if (p->algo == GC_ALGO_ONESHOT_LL || p->algo == GC_ALGO_MULTIMEM) {
    p->form = p->algo == GC_ALGO_ONESHOT_LL ? GC_FORM_LL : GC_FORM_MULTIMEM;
    return GC_SUCCESS;
  }
  if (p->algo == GC_ALGO_COPYENGINE) {
    GC_CHECK(plan_allreduce_ce(f, c, p));
    if (p->algo == GC_ALGO_COPYENGINE) return GC_SUCCESS;
  }
  if (p->algo == GC_ALGO_ONESHOT && c->bytes <= GC_PUSH_MAX_BYTES) p->form = GC_FORM_PUSH;
  else if (p->algo == GC_ALGO_WRITES) plan_twoshot_writes(f, c, p);
  else plan_allreduce_reads(f, c, p);
  return GC_SUCCESS;
}

/* Axis 1: chunks of whole rows (a row block of the input is contiguous, one copy into staging);
 * axis 0: every rank's part chunked in step, each chunk n pieces copied into staging. Small parts
 * go straight into the owners' push areas. */
static gc_result_t plan_reducescatter_reads(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  const size_t half = gc__staging_half(f->staging_bytes), n = (size_t)f->local_size;
  p->in_zero = c->sym_in;
  p->form = GC_FORM_READS;
  if (c->axis == 1) {
    p->chunk = p->in_zero ? c->rows : half / (c->cols * c->es);
    if (p->chunk == 0)
      return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "a row of %zu elements does not fit the staging area (GC_STAGING_BYTES)",
                     c->cols);
    return GC_SUCCESS;
  }
  if (c->most_part * c->es <= GC_PUSH_MAX_BYTES) p->form = GC_FORM_PUSH;
  else p->chunk = p->in_zero ? c->most_part : (half / c->es / n) & ~(size_t)15;
  return GC_SUCCESS;
}

/* From gc_mem_alloc the table takes the kernel by writes with parts on 16-byte boundaries; off
 * them the kernel by reads is faster. By writes and the copy engines take contiguous parts. */
static gc_result_t plan_reducescatter(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  if (p->algo == GC_ALGO_ONESHOT_LL || p->algo == GC_ALGO_MULTIMEM) {
    take_plain(1, p);
    p->form = p->algo == GC_ALGO_ONESHOT_LL ? GC_FORM_LL : GC_FORM_MULTIMEM;
    return GC_SUCCESS;
  }
  take_plain(c->sym_in, p);
  if (c->sym_in && p->algo == GC_ALGO_WRITES && p->from_table && !c->parts_on_packs) {
    p->fell_from = p->algo;
    p->algo = GC_ALGO_ONESHOT;
  }
  if (p->algo == GC_ALGO_WRITES) {
    const char *why = c->axis == 1 ? "contiguous parts (axis 0 or 1-D)"
                      : gc__bywrites_slot(f) < 256 ? "a larger staging area (GC_STAGING_BYTES)"
                                                   : NULL;
    GC_CHECK(usable_or(f, c, why == NULL, why, GC_ALGO_ONESHOT, p));
    if (p->algo == GC_ALGO_WRITES) {
      const gc__bywrites_shape_t s = gc__bywrites_shape(f, c->most_part * c->es, p->blocks);
      p->form = GC_FORM_RS_WRITES;
      p->piece = s.piece;
      p->slot_bytes = s.slot_bytes;
      p->control = s.control;
      if (s.blocks > 0) p->blocks = s.blocks;
      return GC_SUCCESS;
    }
  }
  if (p->algo == GC_ALGO_COPYENGINE) {
    GC_CHECK(usable_or(f, c, c->axis != 1 && f->ce_inbox_fits,
                       c->axis == 1 ? "contiguous parts (axis 0 or 1-D)" : "a larger staging area (GC_STAGING_BYTES)",
                       GC_ALGO_ONESHOT, p));
    if (p->algo == GC_ALGO_COPYENGINE) {
      p->form = GC_FORM_CE;
      return GC_SUCCESS;
    }
  }
  return plan_reducescatter_reads(f, c, p);
}

static gc_result_t plan_allgather(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  if (p->algo == GC_ALGO_ONESHOT_LL) {
    take_plain(1, p);
    p->form = GC_FORM_LL;
    return GC_SUCCESS;
  }
  take_plain(c->sym_out, p);
  if (p->algo == GC_ALGO_WRITES) { /* by writes through staging: any buffers */
    GC_CHECK(usable_or(f, c, 1, "", GC_ALGO_ONESHOT, p));
    if (p->algo == GC_ALGO_WRITES) {
      staged_ring(f, 1, p);
      return GC_SUCCESS;
    }
  }
  if (p->algo == GC_ALGO_COPYENGINE) {
    if (!c->sym_out && staged(f, p, c->bytes, 64 * MB)) {
      p->form = GC_FORM_CE_STAGED;
      return GC_SUCCESS;
    }
    GC_CHECK(usable_or(f, c, c->sym_out, "recvbuf from gc_mem_alloc", GC_ALGO_ONESHOT, p));
    if (p->algo == GC_ALGO_COPYENGINE) {
      p->form = GC_FORM_CE;
      return GC_SUCCESS;
    }
  }
  const size_t half = gc__staging_half(f->staging_bytes);
  p->in_zero = c->sym_in;
  p->form = c->count * c->es <= GC_PUSH_MAX_BYTES ? GC_FORM_PUSH : GC_FORM_READS;
  p->chunk = p->in_zero ? c->count : (half / c->es) & ~(size_t)15;
  return GC_SUCCESS;
}

/* Broadcast by writes: along the ring or through owners (the push_schedule switch). By size: owners (two
 * hops) up to 64 MB on 3-4 GPUs and 256 MB on 5-8, the ring (one writer per receiver) above. */
static int push_schedule_ring(const gc__facts_t *f, size_t bytes) {
  if (f->sw.push_schedule >= 0) return f->sw.push_schedule;
  const size_t owners_up_to = (size_t)(f->local_size > 4 ? 256 : 64) << 20;
  return f->local_size > 2 && bytes > owners_up_to;
}

/* Zero-copy when recv is from gc_mem_alloc (root's data is read from root's recv); outputs peers
 * cannot write take the ring through staging by writes. */
static gc_result_t plan_broadcast(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  const int n = f->local_size;
  if (p->algo == GC_ALGO_ONESHOT_LL) { /* on 3+ GPUs from the ll_relay_bytes switch through owners */
    take_plain(1, p);
    p->form = GC_FORM_LL;
    p->ring = n > 2 && c->bytes >= f->sw.ll_relay_bytes;
    return GC_SUCCESS;
  }
  take_plain(c->sym_out, p);
  if (p->algo == GC_ALGO_COPYENGINE) {
    if (!c->sym_out && staged(f, p, c->bytes, SIZE_MAX)) {
      p->form = GC_FORM_CE_STAGED;
      return GC_SUCCESS;
    }
    GC_CHECK(usable_or(f, c, c->sym_out, "recvbuf from gc_mem_alloc", n > 2 ? GC_ALGO_TWOSHOT : GC_ALGO_ONESHOT, p));
    if (p->algo == GC_ALGO_COPYENGINE) {
      p->form = GC_FORM_CE;
      return GC_SUCCESS;
    }
  }
  if (p->algo == GC_ALGO_WRITES) {
    GC_CHECK(usable_or(f, c, 1, "", GC_ALGO_ONESHOT, p));
    if (p->algo == GC_ALGO_WRITES) {
      if (!c->sym_out) {
        staged_ring(f, 0, p);
        return GC_SUCCESS;
      }
      p->form = GC_FORM_BCAST_WRITES;
      p->piece = f->sw.push_piece;
      p->ring = push_schedule_ring(f, c->bytes);
      return GC_SUCCESS;
    }
  }
  const size_t half = gc__staging_half(f->staging_bytes);
  p->in_zero = p->out_sym = c->sym_out;
  p->form = p->algo != GC_ALGO_TWOSHOT && c->bytes <= GC_PUSH_MAX_BYTES ? GC_FORM_PUSH : GC_FORM_READS;
  p->kernel = p->algo == GC_ALGO_TWOSHOT ? GC_KALGO_TWOSHOT : GC_KALGO_ONESHOT;
  p->chunk = c->sym_out ? c->count : (half / c->es) & ~(size_t)15;
  return GC_SUCCESS;
}

/* A communicator of one rank whose call asks for no algorithm: every collective's result is its
 * input through the epilogue. Without one, a copy (cudaMemcpyAsync up to GC_SOLO_MEMCPY_MAX, the
 * SMs above, a block an SM); with one, the one-shot kernel reads the input where it is. */
static gc_result_t plan_solo(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  const int reduces = c->coll == GC_COLL_ALLREDUCE || c->coll == GC_COLL_REDUCESCATTER;
  if (reduces && c->epilogue) {
    gc__call_t one = *c;
    one.coll = GC_COLL_ALLREDUCE;
    one.algo = GC_ALGO_ONESHOT;
    one.ll_bytes = 0;
    GC_CHECK(gc__plan_dispatch(f, &one, p));
    p->form = GC_FORM_SOLO_EPILOGUE;
  } else {
    memset(p, 0, sizeof *p);
    p->algo = GC_ALGO_ONESHOT;
    p->fell_from = GC_ALGO_AUTO;
    p->form = GC_FORM_SOLO_COPY;
    const size_t copied = c->coll == GC_COLL_ALLGATHER ? c->count * c->es : c->bytes;
    p->blocks = copied <= GC_SOLO_MEMCPY_MAX ? 0 : f->sm_count;
  }
  p->path = GC_PATH_SOLO;
  return GC_SUCCESS;
}

/* ---- a compressed wire ------------------------------------------------------------------ */

/* Elements of one round of the wire all-reduce through the staging inputs: the most whose wire
 * buffer fits half the staging area, in whole groups of 128 (every group size divides it). */
static size_t wire_round(const gc__facts_t *f, const gc__call_t *c) {
  const size_t half = gc__staging_half(f->staging_bytes);
  if (half < 256) return 0;
  size_t e = c->wire == GC_WIRE_FMT_FP8 ? (half - 32) / (size_t)(c->wire_group + 1) * (size_t)c->wire_group : half / 2;
  e &= ~(size_t)127;
  return e < c->count ? e : c->count;
}

/* Only a call that asks for a compressed wire gets one: the plan records the call's format and
 * group, and nothing else picks or changes them. Host buffers (and ranks without peers) take the
 * MPI path's wire all-reduce (wire.c); device buffers the wire kernels of one node's GPUs,
 * two-shot unless the options or GC_ALGO ask for oneshot (GC_ALGO's other algorithms do not
 * apply to the wire; the options' are refused). */
static gc_result_t plan_wire(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *p) {
  memset(p, 0, sizeof *p);
  p->fell_from = GC_ALGO_AUTO;
  p->wire = c->wire;
  p->wire_group = c->wire_group;
  if (c->coll != GC_COLL_ALLREDUCE)
    return GC_FAIL(f->comm, GC_ERR_INVALID_ARGUMENT, "the %s moves native data only (options.wire is for gc_allreduce_ex)",
                   gc__coll_name(c->coll));
  gc_algo_t algo = c->algo != GC_ALGO_AUTO ? c->algo : f->forced_algo;
  if (algo != GC_ALGO_AUTO && algo != GC_ALGO_ONESHOT && algo != GC_ALGO_TWOSHOT && algo != GC_ALGO_MPI) {
    if (c->algo != GC_ALGO_AUTO)
      return GC_FAIL(f->comm, GC_ERR_INVALID_ARGUMENT,
                     "a compressed wire runs the oneshot, twoshot or mpi algorithm, not %s (or use the native wire)",
                     gc_algo_name(algo));
    algo = GC_ALGO_AUTO;
  }
  if (!c->all_device || !f->p2p_ready || algo == GC_ALGO_MPI) {
    if (c->all_device)
      return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED,
                     "a compressed wire on device buffers needs peer-to-peer GPUs (this call would take the MPI path): "
                     "pass host buffers or use the native wire");
    p->path = GC_PATH_MPI;
    p->algo = GC_ALGO_MPI;
    return GC_SUCCESS;
  }
  if (f->size != f->local_size)
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED,
                   "a compressed wire across nodes runs on host buffers (the MPI path); device buffers take it within one node");
  const size_t chunks = (c->count + 7) / 8 * 2; /* an upper bound of the wire's 16-byte chunks */
  int cap = f->sm_count > 0 ? f->sm_count : GC_TABLE_MAX_BLOCKS;
  if (f->max_blocks > 0 && f->max_blocks < cap) cap = f->max_blocks;
  if (c->max_blocks > 0) cap = c->max_blocks < GC_KMAX_BLOCKS ? c->max_blocks : GC_KMAX_BLOCKS;
  p->path = GC_PATH_PEERS;
  p->form = GC_FORM_WIRE;
  p->algo = algo == GC_ALGO_ONESHOT ? GC_ALGO_ONESHOT : GC_ALGO_TWOSHOT;
  p->kernel = p->algo == GC_ALGO_ONESHOT ? GC_KALGO_ONESHOT : GC_KALGO_TWOSHOT;
  p->threads = GC_WIRE_THREADS;
  p->blocks = grid_for(chunks * 16, cap, (size_t)GC_WIRE_THREADS);
  p->chunk = wire_round(f, c);
  if (p->chunk == 0)
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "the staging area is too small for a round of the wire (GC_STAGING_BYTES)");
  return GC_SUCCESS;
}

/* ---- several nodes: hierarchical or flat ------------------------------------------------- */

/* A call on a communicator of several nodes of several ranks, nodes in blocks, takes the
 * hierarchical path (hierarchy.c): each node's part on its GPUs, 1/L of the data between the
 * nodes on MPI. Not when the call or GC_ALGO names mpi (the flat MPI path, by name), nor for the
 * calls this path does not compose (a reduce-scatter of unequal or column parts, and the calls
 * gc__call_t.flat_only names). The hierarchical switch: auto takes it for device
 * buffers of GPU ranks (host buffers: MPI's own algorithms), 1 for any buffers, 0 never. */
static int hierarchical(const gc__facts_t *f, const gc__call_t *c) {
  if (f->node_count < 2 || f->local_size < 2 || !f->nodes_in_blocks || f->sw.hierarchical == 0) return 0;
  if (c->algo == GC_ALGO_MPI || (c->algo == GC_ALGO_AUTO && f->forced_algo == GC_ALGO_MPI)) return 0;
  if (c->flat_only || (c->coll == GC_COLL_REDUCESCATTER && !c->equal_parts)) return 0;
  return f->sw.hierarchical == 1 || (c->all_device && f->all_gpu);
}

gc_result_t gc__plan(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *plan) {
  gc__plan_t p;
  if (c->wire == GC_WIRE_FMT_NATIVE && hierarchical(f, c)) {
    memset(plan, 0, sizeof *plan);
    plan->path = GC_PATH_HIER;
    plan->algo = c->algo; /* the node parts' (AUTO: their tables') */
    plan->fell_from = GC_ALGO_AUTO;
    GC_TRACE(GC_SUB_COLL, "%s %zu bytes on %d nodes of %d -> hierarchical", gc__coll_name(c->coll), c->bytes,
             f->node_count, f->local_size);
    return GC_SUCCESS;
  }
  if (c->wire != GC_WIRE_FMT_NATIVE) {
    GC_CHECK(plan_wire(f, c, &p));
    GC_TRACE(GC_SUB_COLL, "%s %zu bytes over the %s wire (group %d) -> %s, %d blocks", gc__coll_name(c->coll), c->bytes,
             c->wire == GC_WIRE_FMT_FP8 ? "fp8" : "bf16", c->wire_group, gc_algo_name(p.algo), p.blocks);
    *plan = p;
    return GC_SUCCESS;
  }
  GC_CHECK(gc__plan_dispatch(f, c, &p));
  if (p.algo != GC_ALGO_MPI && !c->all_device && c->algo != GC_ALGO_AUTO)
    return GC_FAIL(f->comm, GC_ERR_UNSUPPORTED, "algorithm %s needs device buffers of this rank's GPU",
                   gc_algo_name(c->algo));
  if (p.algo == GC_ALGO_MPI || !c->all_device) {
    memset(&p, 0, sizeof p);
    p.path = GC_PATH_MPI;
    p.algo = GC_ALGO_MPI;
    p.fell_from = GC_ALGO_AUTO;
  } else if (f->size == 1 && c->algo == GC_ALGO_AUTO && f->forced_algo == GC_ALGO_AUTO) {
    GC_CHECK(plan_solo(f, c, &p));
  } else {
    static gc_result_t (*const by_coll[GC_NUM_COLLS])(const gc__facts_t *, const gc__call_t *, gc__plan_t *) = {
        plan_allreduce, plan_reducescatter, plan_allgather, plan_broadcast};
    GC_CHECK(by_coll[c->coll](f, c, &p));
  }
  GC_TRACE(GC_SUB_COLL, "%s %zu bytes on %d GPUs -> %s (form %d), %d blocks of %d threads", gc__coll_name(c->coll),
           c->bytes, f->local_size, gc_algo_name(p.algo), (int)p.form, p.blocks, p.threads);
  *plan = p;
  return GC_SUCCESS;
}

/* ---- fused all-reduce + RMSNorm ---------------------------------------------------------- */

/* AUTO: a fused kernel, barrier-free (LL) where the all-reduce table takes LL at this size, else
 * the one-shot by reads. The two-shot fused kernel runs only when asked for: it is slower than the
 * one-shot at every size from 16 MB. */
gc_algo_t gc__plan_rmsnorm_algo(const gc__facts_t *f, gc_algo_t asked, size_t bytes, int p2p) {
  gc_algo_t algo = asked != GC_ALGO_AUTO ? asked : f->forced_algo;
  if (p2p && algo == GC_ALGO_AUTO) algo = tuned_algo(f, GC_COLL_RMSNORM, bytes);
  if (p2p && algo == GC_ALGO_AUTO)
    algo = gc__table_choice(f->cc_major, f->local_size, GC_COLL_ALLREDUCE, bytes, 0) == GC_ALGO_ONESHOT_LL ? GC_ALGO_ONESHOT_LL
                                                                                              : GC_ALGO_ONESHOT;
  return algo;
}

/* Blocks a row (*parts) for a row block split over a cluster (compute capability 9.0+): under 64
 * rows up to 8 blocks of about 2 KB of the row each, which is faster than one block a row while
 * the grid is small; from 64 rows, or where the LL kernel's blocks would not fit the signal rows
 * at once, as many a row as keep the grid within the SMs. Element by element (inputs off 16-byte
 * boundaries) a thread an element, up to 512 a block, about 128 blocks in all. */
static size_t rmsnorm_parts(const gc__facts_t *f, size_t rows, size_t cols, size_t es, int by_elements, int ll) {
  const size_t units = (cols * es + 15) / 16, most = (units + 127) / 128 < 8 ? (units + 127) / 128 : 8;
  size_t parts = 1;
  if (f->cc_major >= 9 && rows < 64) parts = most;
  if (parts > GC_KMAX_BLOCKS / rows) parts = GC_KMAX_BLOCKS / rows;
  if (f->cc_major >= 9 && ll && (rows >= 64 || rows * most > GC_KMAX_BLOCKS)) {
    const size_t sms = f->sm_count > 0 ? (size_t)f->sm_count : GC_TABLE_MAX_BLOCKS;
    parts = sms / rows < most ? sms / rows : most;
  }
  if (f->cc_major >= 9 && by_elements) {
    const size_t by_cols = (cols + 511) / 512, by_rows = rows < 128 ? 128 / rows : 1;
    parts = by_cols < by_rows ? by_cols : by_rows;
    if (parts > 8) parts = 8;
  }
  return parts;
}

/* A row group per `parts` blocks at a time, up to the signal rows (or max_blocks), a thread per
 * 16 bytes of a block's share; rows that are not whole packs touch one more of the input's packs. */
gc__plan_t gc__plan_rmsnorm_grid(const gc__facts_t *f, int max_blocks, size_t rows, size_t cols, size_t es,
                                 int by_elements, int ll, int *parts_out) {
  gc__plan_t plan;
  memset(&plan, 0, sizeof plan);
  size_t parts = rmsnorm_parts(f, rows, cols, es, by_elements, ll);
  if (max_blocks && parts > (size_t)max_blocks) parts = (size_t)max_blocks;
  if (parts < 1) parts = 1;
  size_t groups = rows < GC_KMAX_BLOCKS / parts ? rows : GC_KMAX_BLOCKS / parts;
  if (max_blocks && groups * parts > (size_t)max_blocks) groups = (size_t)max_blocks > parts ? (size_t)max_blocks / parts : 1;
  const size_t units = (cols * es + 15) / 16, row_units = units + (cols * es % 16 != 0);
  const size_t threads = ((row_units + parts - 1) / parts + 31) / 32 * 32;
  plan.path = GC_PATH_PEERS;
  plan.algo = ll ? GC_ALGO_ONESHOT_LL : GC_ALGO_ONESHOT;
  plan.blocks = (int)(groups * parts);
  plan.threads = (int)(threads < 64 ? 64 : threads > GC_KTHREADS ? GC_KTHREADS : threads);
  *parts_out = (int)parts;
  return plan;
}
