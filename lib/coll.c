/* coll.c — the public collectives: argument checks, the choice between the peer-to-peer kernels and
 * the MPI path, zero-copy for symmetric buffers, copy-in through staging, and chunking. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gc_exec.h"

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

/* The plan for call c: its pointers checked and classified, then gc__plan; the MPI path refuses
 * graph capture before it starts. */
static gc_result_t plan_call(gc_comm_t comm, gc__call_t *c, const gc_options_t *o, const ptrs_t *ptrs, void *stream,
                             gc__plan_t *plan) {
  int all_device = 1;
  for (int i = 0; i < ptrs->n; i++) {
    if (!ptrs->ptr[i]) continue;
    gc__ptr_kind_t kind;
    GC_CHECK(check_pointer(comm, ptrs->ptr[i], ptrs->name[i], &kind));
    all_device &= kind == GC_PTR_DEVICE_OWN;
  }
  c->all_device = all_device;
  c->algo = o->algo;
  c->max_blocks = o->max_blocks;
  gc__facts_t f;
  gc__facts(comm, &f);
  GC_CHECK(gc__plan(&f, c, plan));
  if (plan->path == GC_PATH_MPI) GC_CHECK(refuse_capture(comm, stream, "the MPI path (host buffers or no peer access)"));
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
  gc__bufs_t b;
  b.sym_in = gc__symmetric_lookup(comm, send, count * es, b.in);
  b.sym_out = gc__symmetric_lookup(comm, recv, count * os, b.out);
  gc__call_t c = {.coll = GC_COLL_ALLREDUCE, .bytes = count * es, .count = count, .es = es, .os = os,
                  .ll_bytes = ll_need(comm, GC_COLL_ALLREDUCE, dtype, o.out_dtype, count * es),
                  .epilogue = has_epilogue(&o, dtype), .in_place = send == recv, .sym_in = b.sym_in,
                  .sym_out = b.sym_out, .send_off16 = (uintptr_t)send % 16 != 0, .recv_off16 = (uintptr_t)recv % 16 != 0};
  gc__plan_t plan;
  GC_CHECK(plan_call(comm, &c, &o, &p, stream, &plan));
  if (plan.path != GC_PATH_MPI)
    return gc__run_allreduce(comm, &plan, &b, send, recv, count, dtype, op, &o, (cudaStream_t)stream);
  return gc__mpi_allreduce(comm, send, recv, count, dtype, op, &o, NULL, (cudaStream_t)stream);
}

gc_result_t gc_allreduce_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, gc_comm_t comm,
                            void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_ALLREDUCE, allreduce_ex_impl(send, recv, count, dtype, op, comm, stream, opts, 0)));
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
static gc_result_t mpi_reducescatter_columns(gc_comm_t comm, const void *send, void *recv, const gc__split_t *sp,
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

static gc_result_t reducescatter_common(const void *send, void *recv, const gc__split_t *sp, gc_dtype_t dtype, gc_op_t op,
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
  /* LL takes contiguous parts, none of them empty: a rank with nothing to reduce would wait for no
   * peer, finish at once and run calls ahead, writing generations its peers had not read yet
   * (ll.cu's argument needs every rank to wait for every rank). */
  size_t most = 0, least = SIZE_MAX;
  for (int r = 0; r < comm->size; r++) {
    most = sp->len[r] > most ? sp->len[r] : most;
    least = sp->len[r] < least ? sp->len[r] : least;
  }
  size_t ll = sp->axis == 1 || least == 0 ? 0 : ll_need(comm, GC_COLL_REDUCESCATTER, dtype, o.out_dtype, most * es);
  gc__bufs_t b = {0};
  b.sym_in = gc__symmetric_lookup(comm, send, total * es, b.in);
  int on_packs = 1;
  for (int r = 0; r < comm->size; r++) on_packs &= (sp->off[r] * es) % 16 == 0;
  gc__call_t c = {.coll = GC_COLL_REDUCESCATTER, .bytes = total * es, .ll_bytes = ll, .count = total, .es = es,
                  .os = os, .epilogue = has_epilogue(&o, dtype), .sym_in = b.sym_in, .axis = sp->axis,
                  .rows = sp->rows, .cols = sp->cols, .most_part = most, .parts_on_packs = on_packs};
  gc__plan_t plan;
  GC_CHECK(plan_call(comm, &c, &o, &p, stream, &plan));
  /* one rank: its part is the whole input, axis 1 too (every column) */
  if (plan.path != GC_PATH_MPI)
    return gc__run_reducescatter(comm, &plan, &b, send, recv, sp, dtype, op, &o, (cudaStream_t)stream);
  if (sp->axis == 1) return mpi_reducescatter_columns(comm, send, recv, sp, dtype, op, &o, (cudaStream_t)stream);
  return gc__mpi_reducescatter(comm, send, recv, sp->len, dtype, op, &o, (cudaStream_t)stream);
}

/* Validates the common arguments and builds the split (the caller has checked the communicator's
 * health); the caller frees sp->off. */
static gc_result_t reducescatter_begin(gc_comm_t comm, gc_dtype_t dtype, gc_op_t op, gc__split_t *sp) {
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
  gc__split_t sp;
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
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_REDUCESCATTER, reducescatter_ex_impl(send, recv, recvcount, dtype, op, comm, stream, opts)));
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
  gc__split_t sp;
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
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_REDUCESCATTER_2D, reducescatter_2d_impl(send, recv, rows, cols, axis, dtype, op, comm, stream, opts)));
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
  gc__bufs_t b;
  const int n = comm->local_size;
  b.sym_out = gc__symmetric_lookup(comm, recv, n * count * es, b.out);
  if (send == (const char *)recv + comm->local_rank * count * es) {
    /* In place: each rank's part sits at its own slot of its gc_mem_alloc recv, not at our offset. */
    b.sym_in = gc__symmetric_lookup(comm, recv, n * count * es, b.in);
    for (int r = 0; b.sym_in && r < n; r++) b.in[r] = (char *)b.in[r] + r * count * es;
  } else {
    b.sym_in = gc__symmetric_lookup(comm, send, count * es, b.in);
  }
  gc__call_t c = {.coll = GC_COLL_ALLGATHER, .bytes = count * es * comm->size, .count = count, .es = es, .os = es,
                  .ll_bytes = ll_need(comm, GC_COLL_ALLGATHER, dtype, dtype, count * es), .sym_in = b.sym_in,
                  .sym_out = b.sym_out};
  gc__plan_t plan;
  GC_CHECK(plan_call(comm, &c, &o, &p, stream, &plan));
  if (plan.path != GC_PATH_MPI) return gc__run_allgather(comm, &plan, &b, send, recv, count, dtype, &o, (cudaStream_t)stream);
  return gc__mpi_allgather(comm, send, recv, count, dtype, (cudaStream_t)stream);
}

gc_result_t gc_allgather_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_comm_t comm, void *stream,
                            const gc_options_t *opts) {
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_ALLGATHER, allgather_ex_impl(send, recv, count, dtype, comm, stream, opts)));
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
  gc__bufs_t b = {0};
  b.sym_out = gc__symmetric_lookup(comm, recv, count * es, b.out);
  gc__call_t c = {.coll = GC_COLL_BROADCAST, .bytes = count * es, .count = count, .es = es, .os = es,
                  .ll_bytes = ll_need(comm, GC_COLL_BROADCAST, dtype, dtype, count * es), .sym_out = b.sym_out};
  gc__plan_t plan;
  GC_CHECK(plan_call(comm, &c, &o, &p, stream, &plan));
  if (plan.path != GC_PATH_MPI)
    return gc__run_broadcast(comm, &plan, &b, send, recv, count, dtype, root, &o, (cudaStream_t)stream);
  return gc__mpi_broadcast(comm, is_root ? send : NULL, recv, count, dtype, root, (cudaStream_t)stream);
}

gc_result_t gc_broadcast_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, int root, gc_comm_t comm,
                            void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_BROADCAST, broadcast_ex_impl(send, recv, count, dtype, root, comm, stream, opts)));
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
    GC_CHECK(gc__scratch_alloc(comm, on_device, count * gc_dtype_size(part), (cudaStream_t)stream, &tmp));
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
  return gc__scratch_free(comm, on_device, tmp, (cudaStream_t)stream, r);
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

/* The fused kernels' grid (gc__plan_rmsnorm_grid); k->parts gets the blocks a row. */
static gc__plan_t rmsnorm_plan(gc_comm_t comm, const gc_options_t *o, size_t rows, size_t cols, size_t es,
                               int by_elements, gc_knorm_t *k) {
  gc__facts_t f;
  gc__facts(comm, &f);
  return gc__plan_rmsnorm_grid(&f, o->max_blocks, rows, cols, es, by_elements, k->mode == GC_KNORM_LL, &k->parts);
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
  gc_kargs_t a = gc__base_args(comm, &plan, o, dtype, GC_SUM);
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
   * of staging, whose size then sets the chunks (one call into residual_out is faster than
   * chunks with x in staging) */
  const int x_shared = !m->residual_out && row_bytes <= GC_KNORM_SHARED_ROW;
  size_t chunk = rows;
  if (!in_zero || (!m->residual_out && !x_shared && !twoshot)) chunk = gc__staging_half(comm->tp.staging_bytes) / row_bytes;
  /* two-shot: every row's fp8 and scale fit the publish half, whoever owns it */
  if (twoshot && chunk > gc__staging_half(comm->tp.staging_bytes) / (cols + 2 * sizeof(float))) chunk = gc__staging_half(comm->tp.staging_bytes) / (cols + 2 * sizeof(float));
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
  gc_kargs_t a = gc__base_args(comm, &plan, o, dtype, GC_SUM);
  for (size_t c0 = 0; c0 < rows; c0 += chunk) {
    const size_t cn = rows - c0 < chunk ? rows - c0 : chunk, at = c0 * row_bytes;
    for (int r = 0; r < n; r++) {
      a.in[r] = in_zero ? (const char *)sym_in[r] + at : gc__staging_in(comm, r);
      a.pub[r] = gc__staging_pub(comm, r);
    }
    if (!in_zero)
      GC_CUDA_CHECK(comm, cudaMemcpyAsync((void *)a.in[me], (const char *)send + at, cn * row_bytes,
                                          cudaMemcpyDeviceToDevice, stream));
    k.rows = cn;
    k.mode = twoshot ? GC_KNORM_TWOSHOT : GC_KNORM_READS;
    k.pub_scales = ((cn + n - 1) / n * cols + 15) & ~(size_t)15;
    k.residual = m->residual ? (const char *)m->residual + at : NULL;
    k.x = twoshot || x_shared ? NULL : m->residual_out ? (char *)m->residual_out + at : gc__staging_pub(comm, me);
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
   * every rank for their results to be identical. */
  void *keep = m->residual_out, *tmp = NULL;
  const int keep_apart = on_device && keep && (uintptr_t)keep % 16 != 0;
  if (!keep || keep_apart) GC_CHECK(gc__scratch_alloc(comm, on_device, bytes, stream, &tmp));
  void *x = tmp ? tmp : keep;
  gc_options_t ao = *o;
  ao.add = m->residual;
  gc_result_t rc = allreduce_ex_impl(send, x, count, dtype, GC_SUM, comm, stream, &ao, tmp && on_device);
  if (rc == GC_SUCCESS && on_device) {
    gc_knorm_t k = knorm(m, rows, cols);
    gc__plan_t plan = rmsnorm_plan(comm, o, rows, cols, gc_dtype_size(dtype), (uintptr_t)x % 16 != 0, &k);
    gc_kargs_t a = gc__base_args(comm, &plan, o, dtype, GC_SUM);
    a.peers.nranks = 1;
    a.in[0] = x;
    k.x = keep_apart ? keep : NULL;
    k.out = out;
    k.scales = scales;
    rc = gc__launched(comm, gc_kernel_rmsnorm_fp8(&a, &k, stream), "RMSNorm");
  } else if (rc == GC_SUCCESS) {
    rmsnorm_fp8_host(x, rows, cols, dtype, m, out, scales);
  }
  return gc__scratch_free(comm, on_device, tmp, stream, rc);
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
   * the one-shot is faster from 16 MB. */
  const size_t es = gc_dtype_size(dtype), bytes = rows * cols * es;
  const int forced = o.algo != GC_ALGO_AUTO, p2p = device && comm->p2p_ready;
  gc__facts_t f;
  gc__facts(comm, &f);
  gc_algo_t algo = gc__plan_rmsnorm_algo(&f, o.algo, bytes, p2p);
  const int twoshot_ok = p2p && !m->residual_out && comm->local_size > 1;
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
