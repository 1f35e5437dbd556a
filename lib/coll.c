/* coll.c — the public collectives: argument checks, the choice between the peer-to-peer kernels and
 * the MPI path, zero-copy for symmetric buffers, copy-in through staging, and chunking. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "kernels.h"

/* ---- argument checks ---------------------------------------------------------------------- */

static gc_result_t check_dtype(gc_comm_t comm, gc_dtype_t dtype, int reduces) {
  if (!gc__dtype_valid(dtype)) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "dtype %d is not a gc_dtype_t", (int)dtype);
  if (reduces && !gc__dtype_reducible(dtype))
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "%s cannot be reduced (fp8 is an output and gather/broadcast type)",
                   gc_dtype_name(dtype));
  return GC_SUCCESS;
}

static gc_result_t check_op(gc_comm_t comm, gc_op_t op) {
  if ((int)op < 0 || op >= GC_NUM_OPS) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "op %d is not a gc_op_t", (int)op);
  return GC_SUCCESS;
}

/* Whether resolved options change the reduced values (scale, add or a cast). */
static int has_epilogue(const gc_options_t *o, gc_dtype_t dtype) {
  return o->scale != 1.0 || o->add != NULL || o->out_dtype != dtype;
}

/* *o without its epilogue (no scale, no add), results of out_dtype: for a stage whose epilogue
 * another stage applies. */
static gc_options_t without_epilogue(const gc_options_t *o, gc_dtype_t out_dtype) {
  gc_options_t plain = *o;
  plain.scale = 1.0;
  plain.add = NULL;
  plain.out_dtype = out_dtype;
  return plain;
}

/* Fills *out from opts (NULL = defaults), with out_dtype resolved; refuses epilogues that do not
 * fit the dtype or the collective. */
static gc_result_t resolve_options(gc_comm_t comm, const gc_options_t *opts, gc_dtype_t dtype, int reduces,
                                   gc_options_t *out) {
  gc_options_t o = GC_OPTIONS_INIT;
  if (opts) {
    if (opts->version != GC_OPTIONS_VERSION)
      return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_options_t.version is %u, expected %u (use GC_OPTIONS_INIT)",
                     opts->version, GC_OPTIONS_VERSION);
    o = *opts;
  }
  if ((int)o.algo < 0 || o.algo >= GC_NUM_ALGOS)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "options.algo %d is not a gc_algo_t", (int)o.algo);
  if (o.max_blocks < 0) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "options.max_blocks is negative");
  if (o.out_dtype == GC_DTYPE_SAME) o.out_dtype = dtype;
  if (!gc__dtype_valid(o.out_dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "options.out_dtype %d is not a gc_dtype_t", (int)o.out_dtype);
  int epilogue = has_epilogue(&o, dtype);
  if (epilogue && !reduces)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "epilogues (scale, add, out_dtype) apply to reductions only");
  if (epilogue && !gc__dtype_is_float(dtype)) {
    if (o.scale != 1.0 || o.out_dtype != dtype)
      return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s results take no scale or cast (only add)", gc_dtype_name(dtype));
  }
  if (o.out_dtype != dtype && !gc__dtype_is_float(o.out_dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "cannot cast %s results to %s", gc_dtype_name(dtype),
                   gc_dtype_name(o.out_dtype));
  *out = o;
  return GC_SUCCESS;
}

static gc_result_t check_pointer(gc_comm_t comm, const void *p, const char *name, gc__ptr_kind_t *kind) {
  *kind = gc__ptr_kind(comm, p);
  if (*kind == GC_PTR_DEVICE_OTHER) {
    struct cudaPointerAttributes attr;
    int dev = cudaPointerGetAttributes(&attr, p) == cudaSuccess ? attr.device : -1;
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s (%p) is memory of GPU %d, but this communicator uses GPU %d",
                   name, p, dev, comm->device);
  }
  return GC_SUCCESS;
}

/* Whether [a, a+an) and [b, b+bn) share a byte. */
static int overlaps(const void *a, size_t an, const void *b, size_t bn) {
  const char *x = a, *y = b;
  return an != 0 && bn != 0 && x < y + bn && y < x + an;
}

/* Any overlap of [a, a+an) and [b, b+bn) other than b == a + allowed (the in-place layout). */
static int bad_overlap(const void *a, size_t an, const void *b, size_t bn, ptrdiff_t allowed) {
  return (const char *)b != (const char *)a + allowed && overlaps(a, an, b, bn);
}

/* The epilogue's add vector (count elements of the input dtype, count results in recv) may be
 * recv itself when the results keep the input dtype (each element is read before its own result
 * replaces it); any other overlap with recv is refused. */
static gc_result_t check_add(gc_comm_t comm, const gc_options_t *o, gc_dtype_t dtype, const void *recv, size_t count) {
  if (!o->add) return GC_SUCCESS;
  if (o->add == recv && o->out_dtype != dtype)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT,
                   "the epilogue's add vector is recvbuf, whose results are %s, not the input's %s "
                   "(the results would overwrite addends not yet read)",
                   gc_dtype_name(o->out_dtype), gc_dtype_name(dtype));
  if (o->add != recv && overlaps(o->add, count * gc_dtype_size(dtype), recv, count * gc_dtype_size(o->out_dtype)))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "the epilogue's add vector partially overlaps recvbuf");
  return GC_SUCCESS;
}

/* ---- the peer-to-peer path ---------------------------------------------------------------- */

static gc_kargs_t base_args(gc_comm_t comm, const gc__plan_t *plan, const gc_options_t *o, gc_dtype_t dtype,
                            gc_op_t op) {
  gc_kargs_t a;
  memset(&a, 0, sizeof a);
  a.peers.rank = comm->local_rank;
  a.peers.nranks = comm->local_size;
  for (int r = 0; r < comm->local_size; r++) {
    a.peers.sig[r] = (gc_ksignals_t *)comm->tp.signals[r];
    a.peers.push[r] = (gc_kpush_t *)comm->tp.push[r];
    a.peers.ll[r] = comm->tp.ll[r];
  }
  a.peers.error = comm->tp.error_dev;
  a.peers.timeout_ns = comm->tp.timeout_ns;
  a.blocks = plan->blocks;
  a.threads = plan->threads;
  a.pdl = o->pdl > 0 ? 1 : o->pdl < 0 ? 0 : comm->pdl;
  a.dtype = dtype;
  a.op = op;
  a.ep.scale = o->scale;
  a.ep.out_dtype = o->out_dtype;
  a.ep.add = o->add;
  a.ep.add_dtype = dtype;
  /* Averages of floats are sums scaled by 1/n in the epilogue; integers divide in the kernel. */
  if (op == GC_AVG && gc__dtype_is_float(dtype)) {
    a.op = GC_SUM;
    a.ep.scale = o->scale / comm->local_size;
  }
  a.ep.apply_scale = a.ep.scale != 1.0;
  return a;
}

/* The copy-engine path and the broadcast by writes write into peers' outputs, so they need an
 * output from gc_mem_alloc (the copy-engine path also takes others through staging where staged()
 * says so) and 2+ GPUs. When plan->algo cannot run, a call that asked for it
 * fails; the dispatch table's choice falls back to `instead` (plan->algo is changed, and the
 * kernel path below takes the call). */
static gc_result_t usable_or(gc_comm_t comm, const gc_options_t *o, int usable, const char *why, gc_algo_t instead,
                             gc__plan_t *plan) {
  if (usable && comm->local_size >= 2) return GC_SUCCESS;
  if (o->algo == plan->algo)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "algorithm %s needs %s", gc_algo_name(plan->algo),
                   comm->local_size < 2 ? "2 or more GPUs" : why);
  plan->algo = instead;
  return GC_SUCCESS;
}

/* Half of the staging area holds inputs, the other half what two-shot and broadcast publish. */
static size_t staging_half(gc_comm_t comm) { return (comm->tp.staging_bytes / 2) & ~(size_t)255; }
static char *staging_in(gc_comm_t comm, int r) { return comm->tp.staging[r]; }
static char *staging_pub(gc_comm_t comm, int r) { return comm->tp.staging[r] + staging_half(comm); }

/* Reduce-scatter by writes keeps its inboxes at fixed places in the first half of every rank's
 * staging area (GC_BYWRITES_SLOTS slots x GC_BYWRITES_STREAMS streams x (n - 1) sources): 58 KB
 * each for 4 GPUs with the default 64 MB. Pieces are at most that. */
static size_t bywrites_slot(gc_comm_t comm) {
  size_t rows = (size_t)GC_BYWRITES_SLOTS * GC_BYWRITES_STREAMS * (size_t)(comm->local_size - 1);
  return comm->local_size < 2 ? 0 : (staging_half(comm) / rows) & ~(size_t)15;
}

/* Outputs not from gc_mem_alloc on the copy-engine path go through staging (gc__ce_gather_staged)
 * when the algorithm was asked for, and from the table only on 2 GPUs past `past` bytes, where
 * that measured faster than the kernels. 2 x H200, bf16, --eager, each forced, out of place, us
 * (bench/results/plain-h200x2/): the all-gather staged against the one-shot at 64 / 128 / 256 MB
 * 148.8 / 240.9 / 429.1 against 138.4 / 275.9 / 551.0 (run 118, forced_*_run118.txt), so past 64
 * MB (where the table's row does not take it by writes through staging instead); the all-reduce
 * staged 280.0 / 473.0 / 881.2 / 3182.3 at 64 / 128 / 256 MB / 1 GB against the
 * two-shot by writes' 220.5 / 413.5 / 794.5 / 3063.1 (run 127, ar_forced_*_eager_run127.txt), and the
 * broadcast staged 225.2 / 771.8 / 2949.7 at 64 / 256 MB / 1 GB against by writes through staging
 * 191.0 / 739.3 / 2925.4 (run 123, bc_forced_*_run123.txt): those two only when asked. 3+ GPUs: not
 * measured. 1 GPU: no peers. */
static int staged(gc_comm_t comm, const gc__plan_t *plan, size_t bytes, size_t past) {
  if (comm->local_size < 2) return 0;
  if (!plan->from_table) return 1;
  return comm->local_size == 2 && bytes > past;
}

/* The rings through staging (broadcast and all-gather by writes, broadcast.cu): their slots in the
 * first half of every rank's staging, pieces by size or GC_PUSH_PIECE, and the control warp
 * (GC_PUSH_CONTROL; auto: the all-gather's). 2 x H200, plain outputs, forced, us, with it against
 * without (run 135, bench/results/plain-h200x2/ring_control_run135/): all-gather 64 MB 108.2
 * against 113.7, 256 MB 390.5 against 410.7, 1 GB 1536.9 against 1595.8; broadcast 64 MB 197.2
 * against 191.1, 1 GB 2931.3 against 2920.2. */
static void staged_ring_args(gc_comm_t comm, gc_kargs_t *a, int gather) {
  a->piece = comm->push_piece;
  a->slot_bytes = staging_half(comm);
  for (int r = 0; r < comm->local_size; r++) a->in[r] = staging_in(comm, r);
  a->control = comm->push_control >= 0 ? comm->push_control : gather;
}

/* Half the planned grid as streams (a sender and a reducer each, at most GC_BYWRITES_STREAMS),
 * pieces of about (largest part) / streams bytes from 4 KB up to the inbox slot (32 KB with the
 * senders' control warp), or GC_PUSH_PIECE; no more streams than pieces. The control warp
 * (GC_PUSH_CONTROL; auto: on 3-4 GPUs, where it was measured faster): 4 x H200, 1 GB, run 77
 * (forced/bywrites_control_run77.txt), 2399.9 us with 32 KB pieces against 2452.1 (58 KB, the
 * slot) and 2549.7 (16 KB), 2554.2 without it; run 78 2402.1 against 2531.7. 2 x H200, run 78:
 * 2144.5 with it against 1767.5 without (forced/bywrites_control_run78.txt). */
gc_result_t gc__reducescatter_bywrites(gc_comm_t comm, gc_kargs_t *a, size_t es, cudaStream_t stream) {
  const int n = comm->local_size;
  size_t most = 0;
  for (int r = 0; r < n; r++) most = a->region[r].width * es > most ? a->region[r].width * es : most;
  if (most == 0) return GC_SUCCESS;
  const size_t slot = bywrites_slot(comm);
  size_t streams = a->blocks / 2 < GC_BYWRITES_STREAMS ? (size_t)a->blocks / 2 : GC_BYWRITES_STREAMS;
  if (streams < 1) streams = 1;
  size_t piece = comm->push_piece ? comm->push_piece : (most + streams - 1) / streams;
  piece = (piece + 15) & ~(size_t)15;
  if (piece < 4096) piece = 4096;
  if (piece > slot) piece = slot;
  const int control = comm->push_control >= 0 ? comm->push_control : n == 3 || n == 4;
  if (!comm->push_piece && control && piece > 32768) piece = 32768;
  size_t pieces = (most + piece - 1) / piece;
  a->blocks = 2 * (int)(pieces < streams ? pieces : streams);
  a->piece = piece;
  a->slot_bytes = slot;
  a->control = control;
  for (int r = 0; r < n; r++) a->in[r] = staging_in(comm, r);
  return gc__launched(comm, gc_kernel_reducescatter_bywrites(a, stream), "reduce-scatter");
}

/* A temporary of `bytes` where the operands are: stream-ordered device memory, or host memory. */
static gc_result_t scratch_alloc(gc_comm_t comm, int on_device, size_t bytes, cudaStream_t stream, void **p) {
  *p = NULL;
  if (on_device) GC_CUDA_CHECK(comm, cudaMallocAsync(p, bytes, stream));
  else if (!(*p = malloc(bytes))) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory for %zu bytes", bytes);
  return GC_SUCCESS;
}

/* Frees scratch_alloc's temporary (NULL: nothing); returns rc, or the failure to free after a success. */
static gc_result_t scratch_free(gc_comm_t comm, int on_device, void *p, cudaStream_t stream, gc_result_t rc) {
  if (!p) return rc;
  if (!on_device) {
    free(p);
    return rc;
  }
  cudaError_t e = cudaFreeAsync(p, stream);
  if (rc == GC_SUCCESS && e != cudaSuccess) return GC_FAIL(comm, GC_ERR_CUDA, "cudaFreeAsync: %s", cudaGetErrorString(e));
  return rc;
}

/* The copy-engine all-reduce's reduce half (GC_CE_ALLREDUCE; auto: by copies out of place where
 * dispatch.c measured them faster, else the reduce-scatter table's choice for this size and input,
 * by writes or by reads). By copies, the elements past the last whole 16 n (fewer than 16 n) take
 * the push one-shot. */
static gc_result_t ce_allreduce(gc_comm_t comm, const gc__plan_t *plan, const gc_options_t *o, const void *send,
                                void *recv, void *const sym_in[], void *const sym_out[], size_t count,
                                gc_dtype_t dtype, gc_op_t op, cudaStream_t stream) {
  const int n = comm->local_size;
  const size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype), bytes = count * es;
  gc_kargs_t a = base_args(comm, plan, o, dtype, op);
  int form = comm->ce_allreduce;
  int copies = form == GC_CE_AR_COPIES || (form == GC_CE_AR_AUTO && gc__ce_allreduce_by_copies(comm, bytes));
  if (copies && send != recv && os == es) {
    GC_CHECK(gc__ce_allreduce_copies(comm, &a, send, sym_out, count, es, o->add, comm->ce_chunks, stream));
    size_t body = count / (16 * (size_t)n) * (16 * (size_t)n);
    if (body == count) return GC_SUCCESS;
    a.send = (const char *)send + body * es;
    a.recv = (char *)recv + body * os;
    a.count = count - body;
    a.ep.add = o->add ? (const char *)o->add + body * es : NULL;
    return gc__launched(comm, gc_kernel_allreduce(&a, GC_KALGO_PUSH, stream), "all-reduce");
  }
  if (form == GC_CE_AR_AUTO || form == GC_CE_AR_COPIES)
    form = gc__table_choice(comm, GC_COLL_REDUCESCATTER, bytes, sym_in != NULL) == GC_ALGO_TWOSHOT_PUSH ? GC_CE_AR_WRITES
                                                                                                       : GC_CE_AR_READS;
  if (bywrites_slot(comm) < 256) form = GC_CE_AR_READS; /* inboxes too small (GC_STAGING_BYTES) */
  /* By reads, an input peers cannot read is copied into the output first, over an add vector that
   * is the output (a residual added in place): that goes aside first. Only this rank knows whether
   * its add vector is its output, so that must not change the form, which every rank shares. */
  const void *add = o->add;
  void *aside = NULL;
  if (form == GC_CE_AR_READS && sym_in == NULL && add != NULL && add == recv) {
    GC_CHECK(scratch_alloc(comm, 1, bytes, stream, &aside));
    cudaError_t e = cudaMemcpyAsync(aside, add, bytes, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess)
      return scratch_free(comm, 1, aside, stream,
                          GC_FAIL(comm, GC_ERR_CUDA, "setting the add vector aside: %s", cudaGetErrorString(e)));
    add = aside;
  }
  gc_result_t r = gc__ce_allreduce(comm, &a, (void *const *)sym_in, send, sym_out, count, es, os, add,
                                   form == GC_CE_AR_WRITES, stream);
  return scratch_free(comm, 1, aside, stream, r);
}

static gc_result_t p2p_allreduce(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                 gc_op_t op, const gc_options_t *o, gc__plan_t *plan, cudaStream_t stream) {
  int n = comm->local_size;
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype);
  void *sym_in[GC_MAX_LOCAL_RANKS], *sym_out[GC_MAX_LOCAL_RANKS];
  if (plan->algo == GC_ALGO_ONESHOT_LL) {
    /* Barrier-free, through the LL areas: any pointers, no copy-in (ll.cu). The dispatcher has
     * checked that the call fits. */
    gc_kargs_t a = base_args(comm, plan, o, dtype, op);
    a.send = send;
    a.recv = recv;
    a.count = count;
    return gc__launched(comm, gc_kernel_reduce_ll(&a, 0, stream), "all-reduce");
  }
  if (plan->algo == GC_ALGO_MULTIMEM) {
    gc_kargs_t a = base_args(comm, plan, o, dtype, op);
    return gc__multimem_allreduce(comm, &a, send, recv, count, stream);
  }
  if (plan->algo == GC_ALGO_COPYENGINE) {
    /* An input peers cannot read is first copied into the output, which needs the same dtype.
     * Without a symmetric output the two-shot by writes takes the call: it sends from the input
     * where it is (the two-shot by reads copies every chunk into staging first). */
    int out_ok = gc__symmetric_lookup(comm, recv, count * os, sym_out);
    int in_ok = gc__symmetric_lookup(comm, send, count * es, sym_in);
    if (!out_ok && staged(comm, plan, count * es, SIZE_MAX)) {
      int by_copies = comm->ce_allreduce == GC_CE_AR_COPIES || bywrites_slot(comm) < 256;
      GC_CHECK(usable_or(comm, o, !by_copies || gc__ce_inbox_fits(comm), "a larger staging area (GC_STAGING_BYTES)",
                         GC_ALGO_TWOSHOT_PUSH, plan));
      if (plan->algo == GC_ALGO_COPYENGINE) {
        gc_kargs_t a = base_args(comm, plan, o, dtype, op);
        return gc__ce_allreduce_staged(comm, &a, send, recv, count, es, os, o->add, by_copies, stream);
      }
    }
    GC_CHECK(usable_or(comm, o, out_ok && (in_ok || os == es),
                       out_ok ? "sendbuf from gc_mem_alloc when out_dtype differs" : "recvbuf from gc_mem_alloc",
                       GC_ALGO_TWOSHOT_PUSH, plan));
    if (plan->algo == GC_ALGO_COPYENGINE) return ce_allreduce(comm, plan, o, send, recv, in_ok ? sym_in : NULL, sym_out,
                                                              count, dtype, op, stream);
  }
  if (plan->algo == GC_ALGO_ONESHOT && count * es <= GC_PUSH_MAX_BYTES) {
    /* Small: ranks push their input into each other's push areas; one barrier, no copy-in. */
    gc_kargs_t a = base_args(comm, plan, o, dtype, op);
    a.send = send;
    a.recv = recv;
    a.count = count;
    return gc__launched(comm, gc_kernel_allreduce(&a, GC_KALGO_PUSH, stream), "all-reduce");
  }
  if (plan->algo == GC_ALGO_TWOSHOT_PUSH) {
    int out_sym = gc__symmetric_lookup(comm, recv, count * os, sym_out);
    /* Inboxes are the staging inputs; results land in symmetric recvs, else in staging. Each
     * chunk's n inbox rows (ceil(lines / n) lines of GC_LINE_PACKS packs each) fit half the staging
     * area; one kernel takes every chunk. */
    const size_t per_line_row = GC_LINE_PACKS * (size_t)n;
    size_t chunk_packs = staging_half(comm) / 16 / per_line_row * per_line_row;
    size_t chunk = chunk_packs * 16 / es;
    if (!out_sym && chunk > staging_half(comm) / os) chunk = (staging_half(comm) / os) & ~(size_t)15;
    gc_kargs_t a = base_args(comm, plan, o, dtype, op);
    for (int r = 0; r < n; r++) {
      a.in[r] = staging_in(comm, r);
      a.pub[r] = out_sym ? sym_out[r] : staging_pub(comm, r);
    }
    a.send = send;
    a.recv = recv;
    a.count = count;
    a.chunk = chunk;
    return gc__launched(comm, gc_kernel_allreduce(&a, GC_KALGO_TWOSHOT_PUSH, stream), "all-reduce");
  }
  int in_zero = gc__symmetric_lookup(comm, send, count * es, sym_in);
  int out_sym = plan->algo == GC_ALGO_TWOSHOT && gc__symmetric_lookup(comm, recv, count * os, sym_out);
  /* The two-shot kernel takes only inputs and publish areas on 16-byte boundaries (symmetric
   * buffers sit at the same offset on every rank, so send and recv decide for all; staging is
   * aligned); off them the one-shot kernel runs. That one, in place on a symmetric buffer, would
   * overwrite data peers are still reading, so it reads copies in staging. */
  const gc_kalgo_t kernel = plan->algo == GC_ALGO_TWOSHOT && !(in_zero && (uintptr_t)send % 16) &&
                                    !(out_sym && (uintptr_t)recv % 16)
                                ? GC_KALGO_TWOSHOT
                                : GC_KALGO_ONESHOT;
  if (send == recv && kernel == GC_KALGO_ONESHOT) in_zero = 0;
  size_t chunk = count;
  if (!in_zero) chunk = staging_half(comm) / es;
  if (plan->algo == GC_ALGO_TWOSHOT && !out_sym && staging_half(comm) / os < chunk) chunk = staging_half(comm) / os;
  /* Chunk starts 16-byte aligned for any element size; one chunk (zero-copy) needs no rounding,
   * which would make it 0 under 16 elements (the loop below never ended). */
  if (chunk < count) chunk &= ~(size_t)15;
  gc_kargs_t a = base_args(comm, plan, o, dtype, op);
  for (size_t c0 = 0; c0 < count; c0 += chunk) {
    size_t cn = count - c0 < chunk ? count - c0 : chunk;
    for (int r = 0; r < n; r++) {
      a.in[r] = in_zero ? (const char *)sym_in[r] + c0 * es : staging_in(comm, r);
      a.pub[r] = out_sym ? (char *)sym_out[r] + c0 * os : staging_pub(comm, r);
    }
    if (!in_zero)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a.in[comm->local_rank], (const char *)send + c0 * es, cn * es,
                                          cudaMemcpyDeviceToDevice, stream));
    a.recv = (char *)recv + c0 * os;
    a.count = cn;
    a.ep.add = o->add ? (const char *)o->add + c0 * es : NULL;
    GC_CHECK(gc__launched(comm, gc_kernel_allreduce(&a, kernel, stream), "all-reduce"));
  }
  return GC_SUCCESS;
}

/* Reduce-scatter: every rank reduces its own part of all inputs. Axis 0 (and 1-D) parts are
 * contiguous (off, len per rank); axis 1 parts are column blocks of a rows x cols matrix. */
typedef struct {
  int axis;
  size_t rows, cols; /* axis 0: rows = 1, cols = all elements */
  size_t *off, *len; /* one per rank of the communicator */
} split_t;

/* Whether every part starts on a 16-byte boundary of the input (the offsets are the same on
 * every rank, so is the answer). */
static int parts_on_packs(const split_t *sp, int n, size_t es) {
  for (int r = 0; r < n; r++)
    if ((sp->off[r] * es) % 16 != 0) return 0;
  return 1;
}

static gc_result_t p2p_reducescatter(gc_comm_t comm, const void *send, void *recv, const split_t *sp,
                                     gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, gc__plan_t *plan,
                                     cudaStream_t stream) {
  int n = comm->local_size, me = comm->local_rank;
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o->out_dtype);
  size_t total = sp->rows * sp->cols;
  gc_kargs_t a = base_args(comm, plan, o, dtype, op);
  /* Contiguous parts as the LL, by-writes and push kernels take them, straight from send into
   * recv (the chunked and column paths below set their own). */
  for (int r = 0; r < n; r++) a.region[r] = (gc_kregion_t){1, sp->len[r], sp->off[r], 0, 0};
  a.send = send;
  a.recv = recv;
  if (plan->algo == GC_ALGO_ONESHOT_LL) /* contiguous parts (the dispatcher checked) */
    return gc__launched(comm, gc_kernel_reduce_ll(&a, 1, stream), "reduce-scatter");
  void *sym_in[GC_MAX_LOCAL_RANKS];
  int in_zero = gc__symmetric_lookup(comm, send, total * es, sym_in);
  if (!in_zero && plan->plain != GC_ALGO_AUTO) plan->algo = plan->plain; /* the table's row says so */
  /* From gc_mem_alloc the table takes the kernel by writes where it was measured faster, with
   * parts on 16-byte boundaries; off them the read kernel is faster (4 GPUs, 1 GB - 16 bytes, run
   * 93: by writes 2600.9 us out of place and 3117.3 in place against 2454.8 / 2452.0; on whole
   * packs 2410.9 / 2394.3 against 2456.1 / 2450.8). */
  if (in_zero && plan->algo == GC_ALGO_TWOSHOT_PUSH && plan->from_table && !parts_on_packs(sp, n, es))
    plan->algo = GC_ALGO_ONESHOT;
  if (plan->algo == GC_ALGO_TWOSHOT_PUSH) { /* by writes: contiguous parts, any pointers */
    const char *why = sp->axis == 1             ? "contiguous parts (axis 0 or 1-D)"
                      : bywrites_slot(comm) < 256 ? "a larger staging area (GC_STAGING_BYTES)"
                                                  : NULL;
    GC_CHECK(usable_or(comm, o, why == NULL, why, GC_ALGO_ONESHOT, plan));
    if (plan->algo == GC_ALGO_TWOSHOT_PUSH) return gc__reducescatter_bywrites(comm, &a, es, stream);
  }
  if (plan->algo == GC_ALGO_COPYENGINE) {
    GC_CHECK(usable_or(comm, o, sp->axis != 1 && gc__ce_inbox_fits(comm),
                       sp->axis == 1 ? "contiguous parts (axis 0 or 1-D)" : "a larger staging area (GC_STAGING_BYTES)",
                       GC_ALGO_ONESHOT, plan));
    if (plan->algo == GC_ALGO_COPYENGINE)
      return gc__ce_reducescatter(comm, &a, send, recv, sp->off, sp->len, es, os, o->add, stream);
  }
  if (sp->axis == 1) {
    /* Chunks of whole rows: a row block of the input is contiguous, so one copy fills staging. */
    size_t rows_per = in_zero ? sp->rows : staging_half(comm) / (sp->cols * es);
    if (rows_per == 0)
      return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "a row of %zu elements does not fit the staging area (GC_STAGING_BYTES)",
                     sp->cols);
    for (size_t i0 = 0; i0 < sp->rows; i0 += rows_per) {
      size_t rn = sp->rows - i0 < rows_per ? sp->rows - i0 : rows_per;
      for (int r = 0; r < n; r++) {
        a.in[r] = in_zero ? (const char *)sym_in[r] + i0 * sp->cols * es : staging_in(comm, r);
        a.region[r] = (gc_kregion_t){rn, sp->len[r], sp->off[r], sp->cols, 0};
      }
      if (!in_zero)
        GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a.in[me], (const char *)send + i0 * sp->cols * es,
                                            rn * sp->cols * es, cudaMemcpyDeviceToDevice, stream));
      a.recv = (char *)recv + i0 * sp->len[me] * os;
      a.ep.add = o->add ? (const char *)o->add + i0 * sp->len[me] * es : NULL;
      GC_CHECK(gc__launched(comm, gc_kernel_reducescatter(&a, stream), "reduce-scatter"));
    }
    return GC_SUCCESS;
  }
  /* Axis 0 / 1-D: chunk every rank's part in step; each chunk copies n pieces into staging. */
  size_t maxlen = 0;
  for (int r = 0; r < n; r++) maxlen = sp->len[r] > maxlen ? sp->len[r] : maxlen;
  if (maxlen * es <= GC_PUSH_MAX_BYTES) {
    /* Small parts: pushed straight from send into the owners' push areas, one barrier. */
    return gc__launched(comm, gc_kernel_push_reducescatter(&a, stream), "reduce-scatter");
  }
  size_t chunk = in_zero ? maxlen : (staging_half(comm) / es / n) & ~(size_t)15;
  for (size_t c0 = 0; c0 < maxlen; c0 += chunk) {
    size_t pos = 0;
    for (int r = 0; r < n; r++) {
      size_t w = sp->len[r] > c0 ? sp->len[r] - c0 : 0;
      if (w > chunk) w = chunk;
      if (in_zero) {
        a.in[r] = sym_in[r];
        a.region[r] = (gc_kregion_t){1, w, sp->off[r] + c0, 0, 0};
      } else {
        a.in[r] = staging_in(comm, r);
        a.region[r] = (gc_kregion_t){1, w, pos, 0, 0};
        if (w)
          GC_CUDA_CHECK(comm, cudaMemcpyAsync(staging_in(comm, me) + pos * es, (const char *)send + (sp->off[r] + c0) * es,
                                              w * es, cudaMemcpyDeviceToDevice, stream));
        pos += (w + 15) & ~(size_t)15; /* keeps each piece 16-byte aligned in staging */
      }
    }
    a.recv = (char *)recv + c0 * os;
    a.ep.add = o->add ? (const char *)o->add + c0 * es : NULL;
    GC_CHECK(gc__launched(comm, gc_kernel_reducescatter(&a, stream), "reduce-scatter"));
  }
  return GC_SUCCESS;
}

static gc_result_t p2p_allgather(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                 const gc_options_t *o, gc__plan_t *plan, cudaStream_t stream) {
  int n = comm->local_size, me = comm->local_rank;
  size_t es = gc_dtype_size(dtype);
  gc_kargs_t a = base_args(comm, plan, o, dtype, GC_SUM);
  a.send = send;
  a.recv = recv;
  a.count = count;
  if (plan->algo == GC_ALGO_ONESHOT_LL) return gc__launched(comm, gc_kernel_allgather_ll(&a, stream), "all-gather");
  void *sym_out[GC_MAX_LOCAL_RANKS];
  int sym = gc__symmetric_lookup(comm, recv, n * count * es, sym_out);
  if (!sym && plan->plain != GC_ALGO_AUTO) plan->algo = plan->plain; /* the table's row says so */
  if (plan->algo == GC_ALGO_TWOSHOT_PUSH) {
    /* By writes through staging, any buffers: every rank's part along the ring from it, each
     * piece through every other rank's staging (broadcast.cu). */
    GC_CHECK(usable_or(comm, o, 1, "", GC_ALGO_ONESHOT, plan));
    if (plan->algo == GC_ALGO_TWOSHOT_PUSH) {
      staged_ring_args(comm, &a, 1);
      return gc__launched(comm, gc_kernel_allgather_staged(&a, stream), "all-gather");
    }
  }
  if (plan->algo == GC_ALGO_COPYENGINE) {
    if (!sym && staged(comm, plan, n * count * es, (size_t)64 << 20)) {
      size_t off[GC_MAX_LOCAL_RANKS], len[GC_MAX_LOCAL_RANKS];
      for (int r = 0; r < n; r++) {
        off[r] = r * count * es;
        len[r] = count * es;
      }
      return gc__ce_gather_staged(comm, &a.peers, (1u << n) - 1, send, recv, off, len, stream);
    }
    GC_CHECK(usable_or(comm, o, sym, "recvbuf from gc_mem_alloc", GC_ALGO_ONESHOT, plan));
    if (plan->algo == GC_ALGO_COPYENGINE) return gc__ce_allgather(comm, &a.peers, send, sym_out, count * es, stream);
  }
  if (count * es <= GC_PUSH_MAX_BYTES) return gc__launched(comm, gc_kernel_push_gather(&a, 0, stream), "all-gather");
  void *sym_in[GC_MAX_LOCAL_RANKS];
  int in_zero;
  if (send == (const char *)recv + me * count * es) {
    /* In place: each rank's part sits at its own slot of its symmetric recv, not at our offset. */
    in_zero = gc__symmetric_lookup(comm, recv, n * count * es, sym_in);
    for (int r = 0; in_zero && r < n; r++) sym_in[r] = (char *)sym_in[r] + r * count * es;
  } else {
    in_zero = gc__symmetric_lookup(comm, send, count * es, sym_in);
  }
  size_t chunk = in_zero ? count : (staging_half(comm) / es) & ~(size_t)15;
  for (size_t c0 = 0; c0 < count; c0 += chunk) {
    size_t cn = count - c0 < chunk ? count - c0 : chunk;
    for (int r = 0; r < n; r++) {
      a.in[r] = in_zero ? (const char *)sym_in[r] + c0 * es : staging_in(comm, r);
      a.region[r] = (gc_kregion_t){1, cn, 0, 0, r * count + c0};
    }
    if (!in_zero)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a.in[me], (const char *)send + c0 * es, cn * es,
                                          cudaMemcpyDeviceToDevice, stream));
    a.recv = recv;
    a.count = cn;
    GC_CHECK(gc__launched(comm, gc_kernel_allgather(&a, stream), "all-gather"));
  }
  return GC_SUCCESS;
}

/* Broadcast by writes: along the ring or through owners (GC_PUSH_SCHEDULE). By size: owners (two
 * hops) up to 64 MB on 3-4 GPUs and 256 MB on 5-8, the ring (one writer per receiver) above. 4 x
 * H200, bf16, forced, run 29 (bench/results/forced/ll4_broadcast_twoshot_push*_run29.txt): owners
 * with 32 KB pieces 210.5 us at 64 MB, 790.8 at 256 MB, 3109.4 at 1 GB; the ring (64 KB pieces)
 * 781.4 and 2977.0 at 256 MB and 1 GB (run 29), 234.7 at 64 MB (forced/bcast4_ring.txt, runs 7-9).
 * 8 x H200, run 69 (forced/ll8_broadcast_twoshot_push_*_run69.txt): owners 231.3 / 813.2 / 3159.7
 * at 64 MB / 256 MB / 1 GB, the ring 285.2 / 839.3 / 3042.6. */
static int push_schedule_ring(gc_comm_t comm, size_t bytes) {
  if (comm->push_schedule >= 0) return comm->push_schedule;
  size_t owners_up_to = (size_t)(comm->local_size > 4 ? 256 : 64) << 20;
  return comm->local_size > 2 && bytes > owners_up_to;
}

static gc_result_t p2p_broadcast(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                 int root, const gc_options_t *o, gc__plan_t *plan, cudaStream_t stream) {
  int n = comm->local_size, me = comm->local_rank;
  size_t es = gc_dtype_size(dtype);
  if (plan->algo == GC_ALGO_ONESHOT_LL) {
    /* Barrier-free through the LL areas: any pointers (ll.cu). More than one generation goes as
     * one LL broadcast per generation-sized chunk, each its own LL call. On 3+ GPUs from
     * GC_LL_RELAY_BYTES root's data goes through owners. */
    gc_kargs_t a = base_args(comm, plan, o, dtype, GC_SUM);
    a.root = root;
    int relay = n > 2 && count * es >= comm->ll_relay_bytes;
    size_t chunk = GC_LL_GEN_BYTES / es;
    for (size_t c0 = 0; c0 < count; c0 += chunk) {
      a.send = me == root ? (const char *)send + c0 * es : NULL;
      a.recv = (char *)recv + c0 * es;
      a.count = count - c0 < chunk ? count - c0 : chunk;
      GC_CHECK(gc__launched(comm, gc_kernel_broadcast_ll(&a, relay, stream), "broadcast"));
    }
    return GC_SUCCESS;
  }
  void *sym[GC_MAX_LOCAL_RANKS];
  /* Zero-copy when recv is symmetric: root's data is read from root's recv, so root first puts
   * its send there. The test uses only recv, which every rank passes, so all ranks agree. */
  int zero = gc__symmetric_lookup(comm, recv, count * es, sym);
  if (!zero && plan->plain != GC_ALGO_AUTO) plan->algo = plan->plain; /* the table's row says so */
  if (plan->algo == GC_ALGO_COPYENGINE) {
    if (!zero && staged(comm, plan, count * es, SIZE_MAX)) {
      gc_kargs_t a = base_args(comm, plan, o, dtype, GC_SUM);
      size_t off[GC_MAX_LOCAL_RANKS] = {0}, len[GC_MAX_LOCAL_RANKS] = {0};
      len[root] = count * es;
      return gc__ce_gather_staged(comm, &a.peers, 1u << root, me == root ? send : NULL, recv, off, len, stream);
    }
    GC_CHECK(usable_or(comm, o, zero, "recvbuf from gc_mem_alloc", n > 2 ? GC_ALGO_TWOSHOT : GC_ALGO_ONESHOT, plan));
    if (plan->algo == GC_ALGO_COPYENGINE) {
      gc_kargs_t a = base_args(comm, plan, o, dtype, GC_SUM);
      return gc__ce_broadcast(comm, &a.peers, send, sym, count * es, root, stream);
    }
  }
  if (plan->algo == GC_ALGO_TWOSHOT_PUSH) {
    GC_CHECK(usable_or(comm, o, 1, "", GC_ALGO_ONESHOT, plan));
    if (plan->algo == GC_ALGO_TWOSHOT_PUSH) {
      gc_kargs_t a = base_args(comm, plan, o, dtype, GC_SUM);
      a.root = root;
      a.send = me == root ? send : NULL;
      a.recv = recv;
      a.count = count;
      if (!zero) {
        /* Peers cannot write our output: root's pieces go along the ring through each rank's
         * staging (broadcast.cu). 2 GPUs: from 32 MB it beats LL (run 123, forced: 101.5 / 191.0
         * us at 32 / 64 MB against 104.2 / 208.1; 16 MB 58.25 against 52.30). 4 GPUs: the
         * two-stage pull it replaced ran at ~205 GB/s (run 129: 1 GB 5228.4 us against NCCL's
         * 2995.4). 3 and 5-8 GPUs: not measured. */
        staged_ring_args(comm, &a, 0);
        return gc__launched(comm, gc_kernel_broadcast_staged(&a, stream), "broadcast");
      }
      for (int r = 0; r < n; r++) a.pub[r] = sym[r];
      a.piece = comm->push_piece;
      a.ring = push_schedule_ring(comm, count * es);
      return gc__launched(comm, gc_kernel_broadcast_push(&a, stream), "broadcast");
    }
  }
  int two_stage = plan->algo == GC_ALGO_TWOSHOT;
  size_t chunk = zero ? count : (staging_half(comm) / es) & ~(size_t)15;
  gc_kargs_t a = base_args(comm, plan, o, dtype, GC_SUM);
  a.root = root;
  if (!two_stage && count * es <= GC_PUSH_MAX_BYTES) {
    /* Small: root pushes into every push area, one barrier, everyone copies out locally. */
    a.send = send;
    a.recv = recv;
    a.count = count;
    return gc__launched(comm, gc_kernel_push_gather(&a, 1, stream), "broadcast");
  }
  if (zero && me == root && send != recv)
    GC_CUDA_CHECK(comm, cudaMemcpyAsync(recv, send, count * es, cudaMemcpyDeviceToDevice, stream));
  for (size_t c0 = 0; c0 < count; c0 += chunk) {
    size_t cn = count - c0 < chunk ? count - c0 : chunk;
    for (int r = 0; r < n; r++) {
      a.in[r] = zero ? (const char *)sym[r] + c0 * es : staging_in(comm, r);
      a.pub[r] = zero ? (char *)sym[r] + c0 * es : staging_pub(comm, r);
    }
    if (!zero && me == root)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a.in[me], (const char *)send + c0 * es, cn * es,
                                          cudaMemcpyDeviceToDevice, stream));
    a.recv = (char *)recv + c0 * es;
    a.count = cn;
    GC_CHECK(gc__launched(comm, gc_kernel_broadcast(&a, !two_stage, stream), "broadcast"));
  }
  return GC_SUCCESS;
}

/* ---- one rank ------------------------------------------------------------------------------ */

/* A communicator of one rank, on its GPU, whose call asks for no algorithm (options, GC_ALGO):
 * every collective's result is its input through the epilogue, so no kernel of the table runs.
 * Without an epilogue nothing moves in place and out of place it is one copy; with one, the
 * one-shot kernel reads the input where it is (no staging: no peer reads it). The table's one-shot
 * kernels, 1 x H200, bf16, graph replay, against NCCL with one rank (a copy), us (run 208,
 * bench/results/solo-h200x1/): all-reduce 1 KB 2.22 / 0.84, 1 MB 4.80 / 1.90, 1 GB 846.7 / 775.9;
 * in place 1 MB 6.24, 1 GB 1569.8 (through staging) against NCCL's nothing (0.00-0.67). */
static int solo(gc_comm_t comm, const gc_options_t *o) {
  return comm->size == 1 && o->algo == GC_ALGO_AUTO && comm->forced_algo == GC_ALGO_AUTO;
}

/* Copies of up to GC_SOLO_MEMCPY_MAX bytes (gc_internal.h) by cudaMemcpyAsync, larger ones by the
 * SMs (gc_kernel_copy, a block an SM). 1 x H200, bf16 all-gather, graph replay, us (run 209,
 * bench/results/solo-h200x1/): cudaMemcpyAsync 126.2 / 388.4 / 775.4 at 256 / 512 MB / 1 GB, the
 * kernel 132.8 / 264.8 / 530.1 (two, four, eight blocks an SM: 541.0 / 548.0 / 542.0 at 1 GB);
 * at 1-64 MB cudaMemcpyAsync 1.91 / 9.55 / 32.95, the kernel (four an SM) 2.44 / 10.11 / 35.80. */
static gc_result_t solo_copy(gc_comm_t comm, void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  if (dst == src) return GC_SUCCESS;
  if (bytes <= GC_SOLO_MEMCPY_MAX) {
    GC_CUDA_CHECK(comm, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    return GC_SUCCESS;
  }
  return gc__launched(comm, gc_kernel_copy(dst, src, bytes, comm->sm_count, stream), "copy");
}

/* An all-reduce or reduce-scatter of one rank: count elements of send through the epilogue. */
static gc_result_t solo_reduce(gc_comm_t comm, const void *send, void *recv, size_t count, gc_dtype_t dtype,
                               gc_op_t op, const gc_options_t *o, cudaStream_t stream) {
  const size_t bytes = count * gc_dtype_size(dtype);
  if (!has_epilogue(o, dtype)) return solo_copy(comm, recv, send, bytes, stream);
  gc_options_t oneshot = *o;
  oneshot.algo = GC_ALGO_ONESHOT;
  gc__plan_t plan;
  GC_CHECK(gc__dispatch(comm, GC_COLL_ALLREDUCE, bytes, 0, &oneshot, &plan));
  gc_kargs_t a = base_args(comm, &plan, o, dtype, op);
  a.in[0] = send;
  a.recv = recv;
  a.count = count;
  return gc__launched(comm, gc_kernel_allreduce(&a, GC_KALGO_ONESHOT, stream), "all-reduce");
}

/* ---- shared front half ---------------------------------------------------------------------- */

/* The pointers of one call and whether they can take the peer-to-peer path. */
typedef struct {
  const void *ptr[3];
  const char *name[3];
  int n;
} ptrs_t;

/* What one LL generation must hold for a call whose largest part has part_bytes (n rows of
 * them; a broadcast one, of at most a generation: it goes in chunks), or 0 when LL cannot carry
 * it: ll.cu moves float32/16 and bf16, and fp8 where nothing is reduced; no float64 output. */
static size_t ll_need(gc_comm_t comm, gc__coll_t coll, gc_dtype_t dtype, gc_dtype_t out, size_t part_bytes) {
  int reduces = coll == GC_COLL_ALLREDUCE || coll == GC_COLL_REDUCESCATTER;
  int ok = dtype == GC_FLOAT32 || dtype == GC_FLOAT16 || dtype == GC_BFLOAT16 ||
           (!reduces && (dtype == GC_FP8_E4M3 || dtype == GC_FP8_E5M2));
  if (!ok || out == GC_FLOAT64) return 0;
  size_t row = (part_bytes + 15) / 16 * 16;
  if (coll == GC_COLL_BROADCAST) return row < GC_LL_GEN_BYTES ? row : GC_LL_GEN_BYTES;
  return row * (size_t)comm->local_size;
}

/* The MPI path cannot run inside a CUDA graph capture: refused with `why` before it starts. */
static gc_result_t refuse_capture(gc_comm_t comm, void *stream, const char *why) {
  if (comm->device < 0) return GC_SUCCESS;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing((cudaStream_t)stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone)
    return GC_FAIL(comm, GC_ERR_INVALID_USAGE, "%s cannot run inside CUDA graph capture", why);
  (void)cudaGetLastError();
  return GC_SUCCESS;
}

static gc_result_t choose_path(gc_comm_t comm, gc__coll_t coll, size_t bytes, size_t ll_bytes, const gc_options_t *o,
                               const ptrs_t *ptrs, void *stream, gc__plan_t *plan, int *use_p2p) {
  GC_CHECK(gc__dispatch(comm, coll, bytes, ll_bytes, o, plan));
  int all_device = 1;
  for (int i = 0; i < ptrs->n; i++) {
    if (!ptrs->ptr[i]) continue;
    gc__ptr_kind_t kind;
    GC_CHECK(check_pointer(comm, ptrs->ptr[i], ptrs->name[i], &kind));
    all_device &= kind == GC_PTR_DEVICE_OWN;
  }
  *use_p2p = plan->algo != GC_ALGO_MPI && all_device;
  if (plan->algo != GC_ALGO_MPI && !all_device && o->algo != GC_ALGO_AUTO)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "algorithm %s needs device buffers of this rank's GPU",
                   gc_algo_name(o->algo));
  if (!*use_p2p) GC_CHECK(refuse_capture(comm, stream, "the MPI path (host buffers or no peer access)"));
  return GC_SUCCESS;
}


/* ---- public entry points -------------------------------------------------------------------- */

/* A call's send and recv buffers as its signature sees them; either may be NULL (not compared).
 * In place, the one inside the other (recv for the all-reduce and reduce-scatter, send for the
 * all-gather) is compared as "in place": its offset differs by rank. */
typedef struct {
  const void *send, *recv;
  int send_in_place, recv_in_place;
} places_t;

/* Where p sits in gc_mem_alloc buffers, for the signature (gc__symmetric_place; 1: in place). */
static uint64_t sig_place(gc_comm_t comm, const void *p, int in_place) {
  uint64_t at = p ? gc__symmetric_place(comm, p) : 0;
  return at && in_place ? 1 : at;
}

/* GC_CHECK_CALLS=1: the ranks compare a public call's arguments, as given, before they are checked
 * here (so a rank that would refuse its own call alone is caught too) and before any data moves
 * (callcheck.c; `buf` tells host buffers from device ones, `at` where send and recv sit). Under
 * GC_CHECK_CALLS=auto the MPI path compares its own calls instead (fallback.c). */
static gc__call_sig_t public_sig(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype, gc_op_t op,
                                 int root, const gc_options_t *opts, const void *buf, places_t at) {
  gc__call_sig_t sig = gc__call_sig(comm, call, count, dtype, op, root, opts);
  /* Where kernels may run, all ranks pass device buffers or all host ones, and each buffer at the
   * same offset of the same gc_mem_alloc buffer on every rank or outside them on every rank (the
   * kernels read and write peers' buffers at this rank's offsets); on the MPI path alone (no peer
   * access, a rank without a GPU) each rank may pass either. */
  if (comm->p2p_ready) {
    sig.v[GC_SIG_HOST] = buf && gc__ptr_kind(comm, buf) == GC_PTR_HOST;
    sig.v[GC_SIG_SEND_AT] = sig_place(comm, at.send, at.send_in_place);
    sig.v[GC_SIG_RECV_AT] = sig_place(comm, at.recv, at.recv_in_place);
  }
  return sig;
}

static gc_result_t same_call(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype, gc_op_t op, int root,
                             const gc_options_t *opts, const void *buf, places_t at) {
  if (comm->check_calls != GC_CHECK_EVERY_CALL) return GC_SUCCESS;
  gc__call_sig_t sig = public_sig(comm, call, count, dtype, op, root, opts, buf, at);
  return gc__same_call(comm, &sig);
}

/* recv_is_scratch: recv is the library's own device memory from cudaMallocAsync, which during graph
 * capture is not yet memory that cudaPointerGetAttributes knows; it is not looked up. */
static gc_result_t allreduce_ex_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, gc_comm_t comm,
                            void *stream, const gc_options_t *opts, int recv_is_scratch) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  GC_CHECK(same_call(comm, GC_CALL_ALLREDUCE, count, dtype, op, 0, opts, send, (places_t){send, recv, 0, send == recv}));
  GC_CHECK(check_dtype(comm, dtype, 1));
  GC_CHECK(check_op(comm, op));
  gc_options_t o;
  GC_CHECK(resolve_options(comm, opts, dtype, 1, &o));
  if (count == 0) return GC_SUCCESS;
  if (!send || !recv) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce: %s is NULL", send ? "recvbuf" : "sendbuf");
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o.out_dtype);
  if (count > SIZE_MAX / 8) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "count %zu is too large", count);
  if (bad_overlap(send, count * es, recv, count * os, 0) || (send == recv && o.out_dtype != dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  GC_CHECK(check_add(comm, &o, dtype, recv, count));
  ptrs_t p = {{send, recv_is_scratch ? NULL : recv, o.add}, {"sendbuf", "recvbuf", "options.add"}, 3};
  gc__plan_t plan;
  int p2p;
  GC_CHECK(choose_path(comm, GC_COLL_ALLREDUCE, count * es,
                       ll_need(comm, GC_COLL_ALLREDUCE, dtype, o.out_dtype, count * es), &o, &p, stream, &plan, &p2p));
  if (p2p && solo(comm, &o)) return solo_reduce(comm, send, recv, count, dtype, op, &o, (cudaStream_t)stream);
  if (p2p) return p2p_allreduce(comm, send, recv, count, dtype, op, &o, &plan, (cudaStream_t)stream);
  return gc__mpi_allreduce(comm, send, recv, count, dtype, op, &o, NULL, (cudaStream_t)stream);
}

gc_result_t gc_allreduce_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, gc_comm_t comm,
                            void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, allreduce_ex_impl(send, recv, count, dtype, op, comm, stream, opts, 0));
}

gc_result_t gc_allreduce(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, gc_comm_t comm,
                         void *stream) {
  return gc_allreduce_ex(send, recv, count, dtype, op, comm, stream, NULL);
}

/* A temporary beside recv: host memory for a host output (the epilogue runs on the host), else
 * memory of this rank's GPU; NULL when none could be had. */
static void *temp_alloc(int host, size_t bytes) {
  void *p = NULL;
  if (host) return malloc(bytes);
  return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
}

/* The MPI path's axis-1 split: an all-reduce of the whole matrix into a float32 (float64,
 * integer) temporary, then this rank's columns through the epilogue, rounding once as the
 * kernels do, so the bits match the peer-to-peer path. An add vector that is not where the
 * epilogue runs (host or this GPU) is copied there first. */
static gc_result_t mpi_reducescatter_columns(gc_comm_t comm, const void *send, void *recv, const split_t *sp,
                                             gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, cudaStream_t stream) {
  size_t total = sp->rows * sp->cols, c0 = sp->off[comm->rank], w = sp->len[comm->rank];
  gc_dtype_t wide = dtype == GC_FLOAT16 || dtype == GC_BFLOAT16 ? GC_FLOAT32 : dtype;
  size_t es = gc_dtype_size(dtype), ws = gc_dtype_size(wide), os = gc_dtype_size(o->out_dtype);
  gc_options_t plain = without_epilogue(o, wide);
  double scale = o->scale;
  if (op == GC_AVG && gc__dtype_is_float(dtype)) {
    op = GC_SUM;
    scale /= comm->size;
  }
  int host = gc__ptr_kind(comm, recv) == GC_PTR_HOST;
  const char *add = o->add;
  void *full = temp_alloc(host, total * ws), *add_here = NULL;
  if (!full) return GC_FAIL(comm, GC_ERR_SYSTEM, "gc_reducescatter_2d: no memory for a %zu-byte temporary", total * ws);
  gc_result_t r = GC_SUCCESS;
  cudaError_t e;
  gc__ptr_kind_t add_kind = add ? gc__ptr_kind(comm, add) : GC_PTR_HOST;
  if (add && w && (host ? add_kind != GC_PTR_HOST : add_kind != GC_PTR_DEVICE_OWN)) {
    size_t bytes = sp->rows * w * es;
    add_here = temp_alloc(host, bytes);
    if (!add_here) r = GC_FAIL(comm, GC_ERR_SYSTEM, "gc_reducescatter_2d: no memory for a %zu-byte copy of the add vector", bytes);
    else if ((e = cudaMemcpyAsync(add_here, add, bytes, cudaMemcpyDefault, stream)) != cudaSuccess)
      r = GC_FAIL(comm, GC_ERR_CUDA, "gc_reducescatter_2d: copying the add vector: %s", cudaGetErrorString(e));
    add = add_here;
  }
  /* every rank takes part in the all-reduce, whatever failed here (the others would wait) */
  gc_result_t reduced = gc__mpi_allreduce(comm, send, full, total, dtype, op, &plain, NULL, stream);
  if (r == GC_SUCCESS) r = reduced;
  int copied = 1; /* whether the add vector's copy to the host is known to be over */
  if (host && add_here) {
    gc_result_t waited = gc__stream_wait(comm, stream, "gc_reducescatter_2d: the add vector's copy");
    copied = waited == GC_SUCCESS;
    if (r == GC_SUCCESS) r = waited;
  }
  for (size_t i = 0; r == GC_SUCCESS && w && i < sp->rows; i++) {
    char *src = (char *)full + (i * sp->cols + c0) * ws;
    char *dst = (char *)recv + i * w * os;
    const char *add_row = add ? add + i * w * es : NULL;
    if (host) {
      gc__host_epilogue(src, wide, w, scale, add_row, dtype, dst, o->out_dtype);
    } else {
      gc_kepilogue_t ep = {scale != 1.0, scale, add_row, dtype, o->out_dtype};
      e = (cudaError_t)gc_kernel_epilogue(dst, src, w, wide, &ep, stream);
      if (e != cudaSuccess) r = GC_FAIL(comm, GC_ERR_CUDA, "epilogue kernel: %s", cudaGetErrorString(e));
    }
  }
  if (host) {
    if (reduced == GC_ERR_TIMEOUT) gc__park(full); /* the timed-out request may still gather into it */
    else free(full);
    if (copied) free(add_here);
    else gc__park(add_here); /* the copy may still write it */
  } else {
    gc_result_t waited = gc__stream_wait(comm, stream, "gc_reducescatter_2d");
    void *temps[2] = {full, add_here};
    for (int t = 0; t < 2; t++) {
      if (!temps[t]) continue;
      if (waited == GC_SUCCESS) cudaFree(temps[t]);
      else gc__park(temps[t]); /* the stream may still read it; cudaFree would wait for it */
    }
    if (r == GC_SUCCESS) r = waited;
  }
  return r;
}

static gc_result_t reducescatter_common(const void *send, void *recv, const split_t *sp, gc_dtype_t dtype, gc_op_t op,
                                        gc_comm_t comm, void *stream, const gc_options_t *opts) {
  gc_options_t o;
  GC_CHECK(resolve_options(comm, opts, dtype, 1, &o));
  int me = comm->rank;
  size_t total = sp->rows * sp->cols, mine = sp->axis == 1 ? sp->rows * sp->len[me] : sp->len[me];
  if (total == 0) return GC_SUCCESS;
  if (!send || (!recv && mine))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "reduce-scatter: %s is NULL", send ? "recvbuf" : "sendbuf");
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o.out_dtype);
  /* In place: recv is this rank's own part of send (axis 0 / 1-D, same dtype only). */
  ptrdiff_t inplace = sp->axis == 1 || o.out_dtype != dtype ? PTRDIFF_MAX : (ptrdiff_t)(sp->off[me] * es);
  if (recv && bad_overlap(send, total * es, recv, mine * os, inplace))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  GC_CHECK(check_add(comm, &o, dtype, recv, mine));
  ptrs_t p = {{send, recv, o.add}, {"sendbuf", "recvbuf", "options.add"}, 3};
  gc__plan_t plan;
  int p2p;
  /* LL takes contiguous parts, none of them empty: a rank with nothing to reduce would wait for no
   * peer, finish at once and run calls ahead, writing generations its peers had not read yet
   * (ll.cu's argument needs every rank to wait for every rank). */
  size_t most = 0, least = SIZE_MAX;
  for (int r = 0; r < comm->size; r++) {
    most = sp->len[r] > most ? sp->len[r] : most;
    least = sp->len[r] < least ? sp->len[r] : least;
  }
  size_t ll = sp->axis == 1 || least == 0 ? 0 : ll_need(comm, GC_COLL_REDUCESCATTER, dtype, o.out_dtype, most * es);
  GC_CHECK(choose_path(comm, GC_COLL_REDUCESCATTER, total * es, ll, &o, &p, stream, &plan, &p2p));
  /* one rank: its part is the whole input, axis 1 too (every column) */
  if (p2p && solo(comm, &o)) return solo_reduce(comm, send, recv, total, dtype, op, &o, (cudaStream_t)stream);
  if (p2p) return p2p_reducescatter(comm, send, recv, sp, dtype, op, &o, &plan, (cudaStream_t)stream);
  if (sp->axis == 1) return mpi_reducescatter_columns(comm, send, recv, sp, dtype, op, &o, (cudaStream_t)stream);
  return gc__mpi_reducescatter(comm, send, recv, sp->len, dtype, op, &o, (cudaStream_t)stream);
}

/* Validates the common arguments and builds the split (the caller has checked the communicator's
 * health); the caller frees sp->off. */
static gc_result_t reducescatter_begin(gc_comm_t comm, gc_dtype_t dtype, gc_op_t op, split_t *sp) {
  GC_CHECK(check_dtype(comm, dtype, 1));
  GC_CHECK(check_op(comm, op));
  memset(sp, 0, sizeof *sp);
  sp->off = calloc(2 * (size_t)comm->size, sizeof(size_t));
  if (!sp->off) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory");
  sp->len = sp->off + comm->size;
  return GC_SUCCESS;
}

static gc_result_t reducescatter_ex_impl(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                                gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  const int in_place = recv == (const char *)send + (size_t)comm->rank * recvcount * gc_dtype_size(dtype);
  GC_CHECK(same_call(comm, GC_CALL_REDUCESCATTER, recvcount, dtype, op, 0, opts, send, (places_t){send, recv, 0, in_place}));
  split_t sp;
  GC_CHECK(reducescatter_begin(comm, dtype, op, &sp));
  gc_result_t r = GC_SUCCESS;
  if (recvcount > SIZE_MAX / 8 / (size_t)comm->size)
    r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "recvcount %zu is too large", recvcount);
  sp.rows = 1;
  sp.cols = recvcount * (size_t)comm->size;
  for (int i = 0; i < comm->size; i++) {
    sp.off[i] = (size_t)i * recvcount;
    sp.len[i] = recvcount;
  }
  if (r == GC_SUCCESS) r = reducescatter_common(send, recv, &sp, dtype, op, comm, stream, opts);
  free(sp.off);
  return r;
}

gc_result_t gc_reducescatter_ex(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                                gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, reducescatter_ex_impl(send, recv, recvcount, dtype, op, comm, stream, opts));
}

gc_result_t gc_reducescatter(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                             gc_comm_t comm, void *stream) {
  return gc_reducescatter_ex(send, recv, recvcount, dtype, op, comm, stream, NULL);
}

static gc_result_t reducescatter_2d_impl(const void *send, void *recv, size_t rows, size_t cols, int axis, gc_dtype_t dtype,
                                gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  if (comm->check_calls == GC_CHECK_EVERY_CALL) { /* same_call, with the columns and axis */
    size_t off = 0, len = 0;
    gc_partition(rows, comm->size, comm->rank, &off, &len);
    const int in_place = axis == 0 && recv == (const char *)send + off * cols * gc_dtype_size(dtype);
    gc__call_sig_t sig = public_sig(comm, GC_CALL_REDUCESCATTER_2D, rows, dtype, op, 0, opts, send,
                                    (places_t){send, recv, 0, in_place});
    sig.v[GC_SIG_COLS] = cols;
    sig.v[GC_SIG_AXIS] = (uint64_t)(int64_t)axis;
    GC_CHECK(gc__same_call(comm, &sig));
  }
  split_t sp;
  GC_CHECK(reducescatter_begin(comm, dtype, op, &sp));
  gc_result_t r = GC_SUCCESS;
  if (axis != 0 && axis != 1) r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "axis is %d; it must be 0 (rows) or 1 (columns)", axis);
  else if (rows && cols > SIZE_MAX / 8 / rows) r = GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "rows x cols is too large");
  if (r == GC_SUCCESS) {
    sp.axis = axis;
    sp.rows = axis == 0 ? 1 : rows;
    sp.cols = axis == 0 ? rows * cols : cols;
    for (int i = 0; i < comm->size; i++) {
      gc_partition(axis == 0 ? rows : cols, comm->size, i, &sp.off[i], &sp.len[i]);
      if (axis == 0) {
        sp.off[i] *= cols;
        sp.len[i] *= cols;
      }
    }
    r = reducescatter_common(send, recv, &sp, dtype, op, comm, stream, opts);
  }
  free(sp.off);
  return r;
}

gc_result_t gc_reducescatter_2d(const void *send, void *recv, size_t rows, size_t cols, int axis, gc_dtype_t dtype,
                                gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, reducescatter_2d_impl(send, recv, rows, cols, axis, dtype, op, comm, stream, opts));
}

static gc_result_t allgather_ex_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_comm_t comm, void *stream,
                            const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  const int in_place = send == (const char *)recv + (size_t)comm->rank * count * gc_dtype_size(dtype);
  GC_CHECK(same_call(comm, GC_CALL_ALLGATHER, count, dtype, GC_SUM, 0, opts, send, (places_t){send, recv, in_place, 0}));
  GC_CHECK(check_dtype(comm, dtype, 0));
  gc_options_t o;
  GC_CHECK(resolve_options(comm, opts, dtype, 0, &o));
  if (count == 0) return GC_SUCCESS;
  if (!send || !recv) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allgather: %s is NULL", send ? "recvbuf" : "sendbuf");
  size_t es = gc_dtype_size(dtype);
  if (count > SIZE_MAX / 8 / (size_t)comm->size) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "count %zu is too large", count);
  if (bad_overlap(recv, count * es * comm->size, send, count * es, (ptrdiff_t)(comm->rank * count * es)))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  ptrs_t p = {{send, recv, NULL}, {"sendbuf", "recvbuf", ""}, 2};
  gc__plan_t plan;
  int p2p;
  GC_CHECK(choose_path(comm, GC_COLL_ALLGATHER, count * es * comm->size,
                       ll_need(comm, GC_COLL_ALLGATHER, dtype, dtype, count * es), &o, &p, stream, &plan, &p2p));
  if (p2p && solo(comm, &o)) return solo_copy(comm, recv, send, count * es, (cudaStream_t)stream);
  if (p2p) return p2p_allgather(comm, send, recv, count, dtype, &o, &plan, (cudaStream_t)stream);
  return gc__mpi_allgather(comm, send, recv, count, dtype, (cudaStream_t)stream);
}

gc_result_t gc_allgather_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_comm_t comm, void *stream,
                            const gc_options_t *opts) {
  GC_ON_DEVICE(comm, allgather_ex_impl(send, recv, count, dtype, comm, stream, opts));
}

gc_result_t gc_allgather(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_comm_t comm, void *stream) {
  return gc_allgather_ex(send, recv, count, dtype, comm, stream, NULL);
}

static gc_result_t broadcast_ex_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, int root, gc_comm_t comm,
                            void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  GC_CHECK(same_call(comm, GC_CALL_BROADCAST, count, dtype, GC_SUM, root, opts, recv, (places_t){NULL, recv, 0, 0}));
  GC_CHECK(check_dtype(comm, dtype, 0));
  gc_options_t o;
  GC_CHECK(resolve_options(comm, opts, dtype, 0, &o));
  if (root < 0 || root >= comm->size)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "root %d is not a rank (0..%d)", root, comm->size - 1);
  if (count == 0) return GC_SUCCESS;
  int is_root = comm->rank == root;
  if (!recv || (is_root && !send))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_broadcast: %s is NULL", recv ? "sendbuf (on root)" : "recvbuf");
  size_t es = gc_dtype_size(dtype);
  if (count > SIZE_MAX / 8) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "count %zu is too large", count);
  if (is_root && bad_overlap(send, count * es, recv, count * es, 0))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  ptrs_t p = {{is_root ? send : NULL, recv, NULL}, {"sendbuf", "recvbuf", ""}, 2};
  gc__plan_t plan;
  int p2p;
  GC_CHECK(choose_path(comm, GC_COLL_BROADCAST, count * es, ll_need(comm, GC_COLL_BROADCAST, dtype, dtype, count * es),
                       &o, &p, stream, &plan, &p2p));
  if (p2p && solo(comm, &o)) return solo_copy(comm, recv, send, count * es, (cudaStream_t)stream);
  if (p2p) return p2p_broadcast(comm, send, recv, count, dtype, root, &o, &plan, (cudaStream_t)stream);
  return gc__mpi_broadcast(comm, is_root ? send : NULL, recv, count, dtype, root, (cudaStream_t)stream);
}

gc_result_t gc_broadcast_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, int root, gc_comm_t comm,
                            void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, broadcast_ex_impl(send, recv, count, dtype, root, comm, stream, opts));
}

gc_result_t gc_broadcast(const void *send, void *recv, size_t count, gc_dtype_t dtype, int root, gc_comm_t comm,
                         void *stream) {
  return gc_broadcast_ex(send, recv, count, dtype, root, comm, stream, NULL);
}

/* ---- mixed tensor/data-parallel operations (gpucoll.h) ----------------------------------- */

/* The checks both mixed operations start with; *o gets the resolved options. */
static gc_result_t mixed_begin(gc_comm_t comm, gc__call_kind_t call, const char *name, const void *send,
                               const void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *opts,
                               gc_options_t *o) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  GC_CHECK(same_call(comm, call, count, dtype, op, 0, opts, send, (places_t){NULL, NULL, 0, 0}));
  GC_CHECK(check_dtype(comm, dtype, 1));
  GC_CHECK(check_op(comm, op));
  GC_CHECK(resolve_options(comm, opts, dtype, 1, o));
  if (count > SIZE_MAX / 8 / (size_t)comm->size) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "count %zu is too large", count);
  if (comm->node_size_min != comm->node_size_max)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED,
                   "mixed operations need the same number of ranks on every node; nodes here have %d to %d",
                   comm->node_size_min, comm->node_size_max);
  if (count && (!send || !recv)) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s: %s is NULL", name, send ? "recvbuf" : "sendbuf");
  return GC_SUCCESS;
}

/* Several nodes of several ranks: refuses capture, compares the call, then makes the groups
 * (first call). By default (GC_CHECK_CALLS=auto) the MPI path compares its calls, but each group
 * only over its own ranks: a call that differed on one rank was refused by its node alone, while
 * the other nodes went on into the cross groups and met that rank's next call there (GC_SUCCESS
 * with wrong data, or a timeout). So the call as given is compared over the whole communicator
 * before any group moves data (GC_CHECK_CALLS=1 has compared it in mixed_begin). */
static gc_result_t mixed_groups(gc_comm_t comm, void *stream, gc__call_kind_t call, size_t count, gc_dtype_t dtype,
                                gc_op_t op, const gc_options_t *opts, const void *send) {
  GC_CHECK(refuse_capture(comm, stream, "a mixed operation across nodes (its inter-node part runs on MPI)"));
  if (comm->check_calls == GC_CHECK_MPI_PATH) {
    gc__call_sig_t sig = public_sig(comm, call, count, dtype, op, 0, opts, send, (places_t){NULL, NULL, 0, 0});
    GC_CHECK(gc__same_call(comm, &sig));
  }
  return gc__mixed_groups(comm);
}

/* The result of a call on one of comm's groups; a failure is reported on comm too. */
static gc_result_t on_group(gc_comm_t comm, gc_comm_t group, gc_result_t r) {
  if (r == GC_SUCCESS) return r;
  return GC_FAIL(comm, r, "%s group: %s", group == comm->node_group ? "node" : "cross",
                 gc__message_body(gc_comm_last_error(group)));
}

static gc_result_t reducescatter_allreduce_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                                gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  gc_options_t o;
  GC_CHECK(mixed_begin(comm, GC_CALL_REDUCESCATTER_ALLREDUCE, "gc_reducescatter_allreduce", send, recv, count, dtype, op, opts, &o));
  if (count == 0) return GC_SUCCESS;
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o.out_dtype), L = (size_t)comm->local_size;
  ptrdiff_t inplace = o.out_dtype == dtype ? (ptrdiff_t)((size_t)comm->local_rank * count * es) : PTRDIFF_MAX;
  if (bad_overlap(send, L * count * es, recv, count * os, inplace))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  GC_CHECK(check_add(comm, &o, dtype, recv, count));
  /* One node: the reduce-scatter is the whole operation; one rank per node: the all-reduce is. */
  if (comm->node_count == 1) return reducescatter_ex_impl(send, recv, count, dtype, op, comm, stream, &o);
  if (L == 1) return allreduce_ex_impl(send, recv, count, dtype, op, comm, stream, &o, 0);
  if (op == GC_AVG && (dtype == GC_INT32 || dtype == GC_UINT8))
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED,
                   "GC_AVG of %s across nodes would wrap the nodes' partial sums; use int64, or GC_SUM and divide",
                   gc_dtype_name(dtype));
  GC_CHECK(mixed_groups(comm, stream, GC_CALL_REDUCESCATTER_ALLREDUCE, count, dtype, op, opts, send));

  /* Inside the node: op (a sum for GC_AVG) without epilogue, into partials of float32 for half
   * types, else of dtype. Across nodes: op over the partials, then the epilogue, rounding once. */
  gc_dtype_t part = dtype == GC_FLOAT16 || dtype == GC_BFLOAT16 ? GC_FLOAT32 : dtype;
  gc_options_t inside = without_epilogue(&o, part), across = GC_OPTIONS_INIT;
  across.scale = o.scale;
  across.add = o.add;
  across.out_dtype = o.out_dtype;
  gc__mpi_mix_t mix = {dtype, comm->size};
  /* The partials go to recv when they have its type, else (or where recv is the add vector, which
   * they would overwrite before it is added) to a temporary where the input is. */
  void *tmp = NULL;
  int on_device = gc__ptr_kind(comm, send) == GC_PTR_DEVICE_OWN;
  if (part != o.out_dtype || o.add == recv)
    GC_CHECK(scratch_alloc(comm, on_device, count * gc_dtype_size(part), (cudaStream_t)stream, &tmp));
  void *partial = tmp ? tmp : recv;
  gc_comm_t node = comm->node_group, cross = comm->cross_group;
  gc_result_t r = on_group(comm, node, gc_reducescatter_ex(send, partial, count, dtype, op == GC_AVG ? GC_SUM : op,
                                                           node, stream, &inside));
  if (r == GC_SUCCESS)
    r = on_group(comm, cross, gc__mpi_allreduce(cross, partial, recv, count, part, op, &across, &mix,
                                                (cudaStream_t)stream));
  if (r == GC_ERR_TIMEOUT && tmp && !on_device) {
    /* A wait that timed out leaves its request behind (gc__boot_wait), and on the host that
     * request reads the partials where they are: kept, or MPI reads freed memory once a late peer
     * comes. (Device partials are read by copies on the stream, which cudaFreeAsync follows.) */
    gc__park(tmp);
    tmp = NULL;
  }
  return scratch_free(comm, on_device, tmp, (cudaStream_t)stream, r);
}

gc_result_t gc_reducescatter_allreduce(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                                       gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, reducescatter_allreduce_impl(send, recv, recvcount, dtype, op, comm, stream, opts));
}

static gc_result_t allreduce_allgather_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype,
                                            gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  gc_options_t o;
  GC_CHECK(mixed_begin(comm, GC_CALL_ALLREDUCE_ALLGATHER, "gc_allreduce_allgather", send, recv, count, dtype, op, opts, &o));
  if (count == 0) return GC_SUCCESS;
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o.out_dtype), L = (size_t)comm->local_size;
  void *mine = (char *)recv + (size_t)comm->local_rank * count * os; /* this rank's block of recv */
  ptrdiff_t inplace = o.out_dtype == dtype ? (ptrdiff_t)((size_t)comm->local_rank * count * os) : PTRDIFF_MAX;
  if (bad_overlap(recv, L * count * os, send, count * es, inplace))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  if (o.add && bad_overlap(o.add, count * es, recv, L * count * os, PTRDIFF_MAX) && o.add != mine)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "the epilogue's add vector overlaps recvbuf");
  GC_CHECK(check_add(comm, &o, dtype, mine, count));
  /* One rank per node: the all-reduce is the whole operation; one node without an epilogue: the
   * all-gather is (an all-reduce over one rank changes nothing). */
  if (L == 1) return allreduce_ex_impl(send, recv, count, dtype, op, comm, stream, &o, 0);
  if (comm->node_count == 1 && !has_epilogue(&o, dtype)) return allgather_ex_impl(send, recv, count, dtype, comm, stream, &o);
  GC_CHECK(mixed_groups(comm, stream, GC_CALL_ALLREDUCE_ALLGATHER, count, dtype, op, opts, send));
  /* Across nodes into this rank's block of recv, then the node's blocks gathered in place. */
  gc_options_t plain = without_epilogue(&o, GC_DTYPE_SAME);
  gc_comm_t node = comm->node_group, cross = comm->cross_group;
  gc_result_t r = on_group(comm, cross, gc__mpi_allreduce(cross, send, mine, count, dtype, op, &o, NULL,
                                                          (cudaStream_t)stream));
  if (r == GC_SUCCESS)
    r = on_group(comm, node, gc_allgather_ex(mine, recv, count, o.out_dtype, node, stream, &plain));
  return r;
}

gc_result_t gc_allreduce_allgather(const void *send, void *recv, size_t sendcount, gc_dtype_t dtype, gc_op_t op,
                                   gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, allreduce_allgather_impl(send, recv, sendcount, dtype, op, comm, stream, opts));
}

/* ---- all-reduce + RMSNorm + FP8 ------------------------------------------------------------- */

static gc_result_t check_rmsnorm(gc_comm_t comm, const void *send, void *out, float *scales, size_t rows,
                                 size_t cols, gc_dtype_t dtype, const gc_rmsnorm_fp8_t *m) {
  if (!m) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce_rmsnorm_fp8: norm is NULL (use GC_RMSNORM_FP8_INIT)");
  if (m->version != GC_RMSNORM_FP8_VERSION)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_rmsnorm_fp8_t.version is %u, expected %u (use GC_RMSNORM_FP8_INIT)",
                   m->version, GC_RMSNORM_FP8_VERSION);
  GC_CHECK(check_dtype(comm, dtype, 1));
  if (dtype != GC_FLOAT32 && dtype != GC_FLOAT16 && dtype != GC_BFLOAT16)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "gc_allreduce_rmsnorm_fp8 takes float32, float16 or bfloat16 inputs, not %s",
                   gc_dtype_name(dtype));
  if (m->out_dtype != GC_FP8_E4M3 && m->out_dtype != GC_FP8_E5M2)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "norm.out_dtype must be fp8_e4m3 or fp8_e5m2, not %s",
                   gc_dtype_name(m->out_dtype) ? gc_dtype_name(m->out_dtype) : "out of range");
  if (!(m->epsilon >= 0.0f) || !(m->epsilon < INFINITY))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "norm.epsilon must be finite and >= 0");
  if (!(m->scale_ub >= 0.0f) || !(m->scale_ub < INFINITY))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "norm.scale_ub must be finite and >= 0 (0 = no bound)");
  if (!(m->weight_offset > -INFINITY && m->weight_offset < INFINITY))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "norm.weight_offset must be finite");
  if (rows == 0 || cols == 0) return GC_SUCCESS;
  if (cols > SIZE_MAX / 8 / rows) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "rows x cols (%zu x %zu) is too large", rows, cols);
  const char *missing = !send ? "sendbuf" : !out ? "outbuf" : !scales ? "scales" : !m->gamma ? "norm.gamma" : NULL;
  if (missing) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce_rmsnorm_fp8: %s is NULL", missing);
  /* What the call writes must not overlap what it reads or each other; residual_out may be the
   * residual itself. */
  const size_t es = gc_dtype_size(dtype), count = rows * cols;
  const struct { const void *p; size_t bytes; const char *name; } in[] = {
      {send, count * es, "sendbuf"}, {m->gamma, cols * es, "norm.gamma"}, {m->residual, count * es, "norm.residual"}},
    wr[] = {{out, count, "outbuf"}, {scales, rows * sizeof(float), "scales"}, {m->residual_out, count * es, "norm.residual_out"}};
  for (int w = 0; w < 3; w++) {
    if (!wr[w].p) continue;
    for (int i = 0; i < 3; i++) {
      if (!in[i].p || (w == 2 && i == 2 && wr[w].p == in[i].p)) continue;
      if (overlaps(wr[w].p, wr[w].bytes, in[i].p, in[i].bytes))
        return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s overlaps %s", wr[w].name, in[i].name);
    }
    for (int v = 0; v < w; v++)
      if (wr[v].p && overlaps(wr[w].p, wr[w].bytes, wr[v].p, wr[v].bytes))
        return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s overlaps %s", wr[w].name, wr[v].name);
  }
  return GC_SUCCESS;
}

/* The host's normalization of x (rows x cols, already reduced), the formulas of gpucoll.h in
 * float, each step rounded; the sum of squares goes in column order (the kernel's in its block's
 * order), so the last bit of a scale may differ from the device path's. */
static void rmsnorm_fp8_host(const void *x, size_t rows, size_t cols, gc_dtype_t dtype, const gc_rmsnorm_fp8_t *m,
                             void *out, float *scales) {
  const float fp8_max = m->out_dtype == GC_FP8_E4M3 ? 448.0f : 57344.0f, least = 1.0f / (fp8_max * 512.0f);
  for (size_t i = 0; i < rows; i++) {
    const size_t base = i * cols;
    float ss = 0.0f, most = 0.0f;
    for (size_t j = 0; j < cols; j++) {
      const float v = (float)gc__load_double(x, base + j, dtype), sq = v * v;
      const float w = (float)gc__load_double(m->gamma, j, dtype) + m->weight_offset, vw = fabsf(v * w);
      ss += sq;
      most = vw > most ? vw : most;
    }
    const float r = 1.0f / sqrtf(ss / (float)cols + m->epsilon), top = r * most;
    float scale = top / fp8_max;
    if (scale < least) scale = least;
    if (m->scale_ub > 0.0f && scale > m->scale_ub) scale = m->scale_ub;
    scales[i] = scale;
    const float inv_scale = 1.0f / scale;
    for (size_t j = 0; j < cols; j++) {
      const float xr = (float)gc__load_double(x, base + j, dtype) * r;
      const float y = xr * ((float)gc__load_double(m->gamma, j, dtype) + m->weight_offset);
      gc__store_double(out, base + j, m->out_dtype, y * inv_scale);
    }
  }
}

static gc_knorm_t knorm(const gc_rmsnorm_fp8_t *m, size_t rows, size_t cols) {
  gc_knorm_t k;
  memset(&k, 0, sizeof k);
  k.rows = rows;
  k.cols = cols;
  k.gamma = m->gamma;
  k.epsilon = m->epsilon;
  k.weight_offset = m->weight_offset;
  k.scale_ub = m->scale_ub;
  k.out_dtype = m->out_dtype;
  return k;
}

/* A row per `parts` blocks at a time, up to the signal rows (or max_blocks), a thread per 16 bytes
 * of a block's share. Under 64 rows a row is split over a cluster of up to 8 blocks (compute
 * capability 9.0+), about 2 KB each: on 2 x H200, 8192 bf16 a row, one row took 9.30 us in one
 * block (run 160) and 7.87 in 8 (run 162); 64 rows took 12.89 us in 64 blocks (run 161) and
 * 18.61 in 64 clusters of 4 (run 162). The LL kernel, when those blocks would not all fit the
 * signal rows at once (and from 64 rows), takes as many blocks a row as keep the grid within the
 * SMs: 2 x H200, 8192 bf16 a row with residual, us (run 186): 48 rows 9.04 in clusters of 2
 * against 13.13 in clusters of 5; 64 rows 9.64-9.75 against 11.67-11.94 in single blocks; 24-32
 * rows stay at 8 (32 rows: 7.62-7.73 against 7.96-8.00 in clusters of 4). Rows that are not
 * whole packs take the rule for packs (the kernel reads the input's own packs, FLAT). Where the
 * inputs sit off 16-byte boundaries the kernel goes element by element (a thread an element, up
 * to 512 a block): about 128 blocks in all. 2 x H200, 8191 bf16 a row with residual, element by
 * element, us (run 191), 32 / 64 / 128 rows: 17.29 / 21.70 / 34.72 in clusters of 4 / 2 / 1,
 * against 22.19 / 33.29 / 34.46 by the rule for packs; 4097 float32, 31 / 63 rows: 12.76 / 15.21
 * against 18.65 / 21.02. */
static gc__plan_t rmsnorm_plan(gc_comm_t comm, const gc_options_t *o, size_t rows, size_t cols, size_t es,
                               int by_elements, gc_knorm_t *k) {
  gc__plan_t plan;
  memset(&plan, 0, sizeof plan);
  const size_t units = (cols * es + 15) / 16, most = (units + 127) / 128 < 8 ? (units + 127) / 128 : 8;
  size_t parts = 1;
  if (comm->cc_major >= 9 && rows < 64) parts = most;
  if (parts > GC_KMAX_BLOCKS / rows) parts = GC_KMAX_BLOCKS / rows;
  if (comm->cc_major >= 9 && k->mode == GC_KNORM_LL && (rows >= 64 || rows * most > GC_KMAX_BLOCKS)) {
    const size_t sms = comm->sm_count > 0 ? (size_t)comm->sm_count : 132;
    parts = sms / rows < most ? sms / rows : most;
  }
  if (comm->cc_major >= 9 && by_elements) { /* element by element: up to 512 a block, ~128 blocks */
    const size_t by_cols = (cols + 511) / 512, by_rows = rows < 128 ? 128 / rows : 1;
    parts = by_cols < by_rows ? by_cols : by_rows;
    if (parts > 8) parts = 8;
  }
  if (o->max_blocks && parts > (size_t)o->max_blocks) parts = (size_t)o->max_blocks;
  if (parts < 1) parts = 1;
  size_t groups = rows < GC_KMAX_BLOCKS / parts ? rows : GC_KMAX_BLOCKS / parts;
  if (o->max_blocks && groups * parts > (size_t)o->max_blocks)
    groups = (size_t)o->max_blocks > parts ? (size_t)o->max_blocks / parts : 1;
  /* rows that are not whole packs touch one more of the input's packs */
  const size_t row_units = units + (cols * es % 16 != 0), threads = ((row_units + parts - 1) / parts + 31) / 32 * 32;
  plan.blocks = (int)(groups * parts);
  plan.threads = (int)(threads < 64 ? 64 : threads > GC_KTHREADS ? GC_KTHREADS : threads);
  k->parts = (int)parts;
  return plan;
}

/* Why the LL kernel cannot take a call (NULL: it can). Only what every rank shares decides: gamma,
 * residual and residual_out may sit at other alignments on other ranks (the kernel then loads them
 * element by element). */
static const char *rmsnorm_ll_refusal(gc_comm_t comm, size_t rows, size_t cols, size_t es, const gc_rmsnorm_fp8_t *m) {
  if (rows * cols * es > GC_LL_GEN_BYTES / (size_t)comm->local_size)
    return "every rank's input must fit its row of an LL generation (8 MB over the GPU count)";
  if (cols * es % 16) return "rows must be whole 16-byte packs (cols x element size a multiple of 16)";
  if (!m->residual_out && cols * es > GC_KNORM_SHARED_ROW)
    return "without residual_out a row must fit shared memory (48 KB)";
  return NULL;
}

/* The barrier-free fused kernel: every rank writes its rows into every rank's LL area, where
 * each reads them as they arrive (any pointers, no copy-in). */
static gc_result_t rmsnorm_ll(gc_comm_t comm, const void *send, void *out, float *scales, size_t rows, size_t cols,
                              gc_dtype_t dtype, const gc_rmsnorm_fp8_t *m, const gc_options_t *o, cudaStream_t stream) {
  gc_knorm_t k = knorm(m, rows, cols);
  k.mode = GC_KNORM_LL;
  gc__plan_t plan = rmsnorm_plan(comm, o, rows, cols, gc_dtype_size(dtype), 0, &k);
  gc_kargs_t a = base_args(comm, &plan, o, dtype, GC_SUM);
  a.send = send;
  k.residual = m->residual;
  k.x = m->residual_out;
  k.out = out;
  k.scales = scales;
  return gc__launched(comm, gc_kernel_rmsnorm_fp8(&a, &k, stream), "all-reduce + RMSNorm (LL)");
}

/* The fused kernel by reads: every rank reads every rank's rows (its gc_mem_alloc input in place,
 * else a chunk of whole rows copied into staging). One-shot: every rank normalizes every row.
 * Two-shot (no residual_out): rank q normalizes its share of the rows into its publish half (fp8
 * rows, then scales) and every rank copies them out, so a rank reads 1/n of the input from each
 * peer and the rest as fp8. False in *fits when a row does not fit staging (or, two-shot, a
 * block's share of one shared memory). */
static gc_result_t rmsnorm_fused(gc_comm_t comm, const void *send, void *out, float *scales, size_t rows, size_t cols,
                                 gc_dtype_t dtype, const gc_rmsnorm_fp8_t *m, const gc_options_t *o, int twoshot,
                                 cudaStream_t stream, int *fits) {
  const int n = comm->local_size, me = comm->local_rank;
  const size_t es = gc_dtype_size(dtype), row_bytes = cols * es;
  void *sym_in[GC_MAX_LOCAL_RANKS] = {(void *)send}; /* one rank: its input where it is (no peer reads it) */
  const int in_zero = n == 1 || gc__symmetric_lookup(comm, send, rows * row_bytes, sym_in);
  /* x: in residual_out, else in shared memory where a row fits, else in this rank's publish half
   * of staging, whose size then sets the chunks: 2 x H200, 256 MB bf16 of gc_mem_alloc input,
   * forced one-shot in 32 MB chunks with x in staging 1057.7 us (run 165), auto into
   * residual_out in one call 914.0 (run 166) */
  const int x_shared = !m->residual_out && row_bytes <= GC_KNORM_SHARED_ROW;
  size_t chunk = rows;
  if (!in_zero || (!m->residual_out && !x_shared && !twoshot)) chunk = staging_half(comm) / row_bytes;
  /* two-shot: every row's fp8 and scale fit the publish half, whoever owns it */
  if (twoshot && chunk > staging_half(comm) / (cols + 2 * sizeof(float))) chunk = staging_half(comm) / (cols + 2 * sizeof(float));
  if (chunk > rows) chunk = rows;
  gc_knorm_t k = knorm(m, chunk, cols);
  const size_t owned = twoshot ? (chunk + n - 1) / n : chunk;
  /* the kernel goes element by element where the inputs sit off 16-byte boundaries (two-shot: or
   * its rows are not whole packs); else by the inputs' packs. gc_kernel_rmsnorm_fp8 decides (and
   * sizes the blocks); this picks the blocks a row, which must be the same on every rank: from
   * what every rank shares (symmetric inputs sit at one offset on all), never from gamma's or
   * residual's alignment, which may differ between ranks. */
  const int by_elements = (in_zero && (uintptr_t)sym_in[me] % 16) || (twoshot && row_bytes % 16);
  gc__plan_t plan = rmsnorm_plan(comm, o, owned ? owned : 1, cols, es, by_elements, &k);
  *fits = chunk > 0 && (!twoshot || row_bytes / (size_t)k.parts <= GC_KNORM_SHARED_ROW);
  if (!*fits) return GC_SUCCESS;
  gc_kargs_t a = base_args(comm, &plan, o, dtype, GC_SUM);
  for (size_t c0 = 0; c0 < rows; c0 += chunk) {
    const size_t cn = rows - c0 < chunk ? rows - c0 : chunk, at = c0 * row_bytes;
    for (int r = 0; r < n; r++) {
      a.in[r] = in_zero ? (const char *)sym_in[r] + at : staging_in(comm, r);
      a.pub[r] = staging_pub(comm, r);
    }
    if (!in_zero)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a.in[me], (const char *)send + at, cn * row_bytes,
                                          cudaMemcpyDeviceToDevice, stream));
    k.rows = cn;
    k.mode = twoshot ? GC_KNORM_TWOSHOT : GC_KNORM_READS;
    k.pub_scales = ((cn + n - 1) / n * cols + 15) & ~(size_t)15;
    k.residual = m->residual ? (const char *)m->residual + at : NULL;
    k.x = twoshot || x_shared ? NULL : m->residual_out ? (char *)m->residual_out + at : staging_pub(comm, me);
    k.out = (char *)out + c0 * cols;
    k.scales = scales + c0;
    GC_CHECK(gc__launched(comm, gc_kernel_rmsnorm_fp8(&a, &k, stream), "all-reduce + RMSNorm"));
  }
  return GC_SUCCESS;
}

/* The all-reduce (with the residual as its add vector) into residual_out or a temporary, then the
 * normalization: a kernel on device buffers, the host loop on host buffers. */
static gc_result_t rmsnorm_composed(gc_comm_t comm, const void *send, void *out, float *scales, size_t rows,
                                    size_t cols, gc_dtype_t dtype, const gc_rmsnorm_fp8_t *m, const gc_options_t *o,
                                    int on_device, cudaStream_t stream) {
  const size_t count = rows * cols, bytes = count * gc_dtype_size(dtype);
  /* x, the all-reduce's output: residual_out, else a temporary. On the GPU also a temporary where
   * residual_out sits off 16 bytes on this rank, and the kernel stores x there as it goes: its
   * input's alignment decides its split of rows and the order of its sums, so it must be alike on
   * every rank for their results to be identical (GC_ALGO=mpi, run 235: "ranks differ"). */
  void *keep = m->residual_out, *tmp = NULL;
  const int keep_apart = on_device && keep && (uintptr_t)keep % 16 != 0;
  if (!keep || keep_apart) GC_CHECK(scratch_alloc(comm, on_device, bytes, stream, &tmp));
  void *x = tmp ? tmp : keep;
  gc_options_t ao = *o;
  ao.add = m->residual;
  gc_result_t rc = allreduce_ex_impl(send, x, count, dtype, GC_SUM, comm, stream, &ao, tmp && on_device);
  if (rc == GC_SUCCESS && on_device) {
    gc_knorm_t k = knorm(m, rows, cols);
    gc__plan_t plan = rmsnorm_plan(comm, o, rows, cols, gc_dtype_size(dtype), (uintptr_t)x % 16 != 0, &k);
    gc_kargs_t a = base_args(comm, &plan, o, dtype, GC_SUM);
    a.peers.nranks = 1;
    a.in[0] = x;
    k.x = keep_apart ? keep : NULL;
    k.out = out;
    k.scales = scales;
    rc = gc__launched(comm, gc_kernel_rmsnorm_fp8(&a, &k, stream), "RMSNorm");
  } else if (rc == GC_SUCCESS) {
    rmsnorm_fp8_host(x, rows, cols, dtype, m, out, scales);
  }
  return scratch_free(comm, on_device, tmp, stream, rc);
}

static gc_result_t rmsnorm_impl(const void *send, void *out, float *scales, size_t rows, size_t cols, gc_dtype_t dtype,
                                const gc_rmsnorm_fp8_t *m, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm));
  if (comm->check_calls == GC_CHECK_EVERY_CALL) { /* same_call, with rmsnorm's columns, result type and residuals */
    gc__call_sig_t sig = public_sig(comm, GC_CALL_RMSNORM, rows, dtype, GC_SUM, 0, opts, send, (places_t){send, NULL, 0, 0});
    sig.v[GC_SIG_COLS] = cols;
    sig.v[GC_SIG_OUT_DTYPE] = m ? (uint64_t)(int64_t)m->out_dtype : UINT64_MAX;
    sig.v[GC_SIG_ADD] = m ? (m->residual != NULL) | (uint64_t)(m->residual_out != NULL) << 1 : 0;
    GC_CHECK(gc__same_call(comm, &sig));
  }
  GC_CHECK(check_rmsnorm(comm, send, out, scales, rows, cols, dtype, m));
  gc_options_t o;
  GC_CHECK(resolve_options(comm, opts, dtype, 1, &o));
  if (has_epilogue(&o, dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce_rmsnorm_fp8 takes no epilogue in its options "
                                                  "(scale, add, out_dtype); the residual is norm.residual");
  if (rows == 0 || cols == 0) return GC_SUCCESS;
  /* All on this rank's GPU, or all on the host. */
  const void *ptrs[] = {send, out, scales, m->gamma, m->residual, m->residual_out};
  const char *names[] = {"sendbuf", "outbuf", "scales", "norm.gamma", "norm.residual", "norm.residual_out"};
  int host = 0, device = 0;
  for (int i = 0; i < 6; i++) {
    if (!ptrs[i]) continue;
    gc__ptr_kind_t kind;
    GC_CHECK(check_pointer(comm, ptrs[i], names[i], &kind));
    host += kind == GC_PTR_HOST;
    device += kind == GC_PTR_DEVICE_OWN;
  }
  if (host && device)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce_rmsnorm_fp8 takes all its pointers on this rank's GPU "
                                                  "or all on the host, not some of each");
  /* AUTO: a fused kernel, barrier-free (LL) where the all-reduce table takes LL at this size, else
   * the one-shot by reads; the all-reduce then the normalizing kernel without peer-to-peer GPUs.
   * The two-shot fused kernel only when asked for: 2 x H200, bf16, 8192 cols, gc_mem_alloc input,
   * us, two-shot against one-shot 16 MB 92.27 / 80.94, 64 MB 275.1 / 230.1, 256 MB 977.9 / 844.6
   * (run 167, rmsnorm-h200x2/r167.tgz). */
  const size_t es = gc_dtype_size(dtype), bytes = rows * cols * es;
  const int forced = o.algo != GC_ALGO_AUTO, p2p = device && comm->p2p_ready;
  gc_algo_t algo = forced ? o.algo : comm->forced_algo;
  const int twoshot_ok = p2p && !m->residual_out && comm->local_size > 1;
  if (p2p && algo == GC_ALGO_AUTO)
    algo = gc__table_choice(comm, GC_COLL_ALLREDUCE, bytes, 0) == GC_ALGO_ONESHOT_LL ? GC_ALGO_ONESHOT_LL : GC_ALGO_ONESHOT;
  if (algo == GC_ALGO_TWOSHOT && twoshot_ok) { /* else the two-shot all-reduce, then the normalizing kernel */
    int fits;
    GC_CHECK(rmsnorm_fused(comm, send, out, scales, rows, cols, dtype, m, &o, 1, (cudaStream_t)stream, &fits));
    if (fits) return GC_SUCCESS;
  }
  if ((algo == GC_ALGO_ONESHOT || algo == GC_ALGO_ONESHOT_LL) && !p2p && forced)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "the fused kernels (%s) need device buffers and peer-to-peer GPUs",
                   gc_algo_name(algo));
  if (p2p && algo == GC_ALGO_ONESHOT_LL) {
    const char *why = rmsnorm_ll_refusal(comm, rows, cols, es, m);
    if (!why) return rmsnorm_ll(comm, send, out, scales, rows, cols, dtype, m, &o, (cudaStream_t)stream);
    if (forced) return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "oneshot_ll: %s", why);
    algo = GC_ALGO_ONESHOT;
  }
  if (p2p && algo == GC_ALGO_ONESHOT) {
    int fits;
    GC_CHECK(rmsnorm_fused(comm, send, out, scales, rows, cols, dtype, m, &o, 0, (cudaStream_t)stream, &fits));
    if (fits) return GC_SUCCESS;
    if (forced)
      return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "a row of %zu bytes does not fit half the staging area (GC_STAGING_BYTES)",
                     cols * es);
  }
  return rmsnorm_composed(comm, send, out, scales, rows, cols, dtype, m, &o, device > 0, (cudaStream_t)stream);
}

gc_result_t gc_allreduce_rmsnorm_fp8(const void *send, void *out, float *scales, size_t rows, size_t cols,
                                     gc_dtype_t dtype, const gc_rmsnorm_fp8_t *norm, gc_comm_t comm, void *stream,
                                     const gc_options_t *opts) {
  GC_ON_DEVICE(comm, rmsnorm_impl(send, out, scales, rows, cols, dtype, norm, comm, stream, opts));
}
