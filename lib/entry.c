/* entry.c — the front half every public collective shares: argument checks, options resolved,
 * pointers classified, the call's signature compared across ranks, and the plan (gc_entry.h). */
#include <stdint.h>
#include <stdlib.h>

#include "gc_entry.h"
#include "gc_wire.h"

/* ---- argument checks ---------------------------------------------------------------------- */

gc_result_t gc__check_dtype(gc_comm_t comm, gc_dtype_t dtype, int reduces) {
  if (!gc__dtype_valid(dtype)) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "dtype %d is not a gc_dtype_t", (int)dtype);
  if (reduces && !gc__dtype_reducible(dtype))
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "%s cannot be reduced (fp8 is an output and gather/broadcast type)",
                   gc_dtype_name(dtype));
  return GC_SUCCESS;
}

gc_result_t gc__check_op(gc_comm_t comm, gc_op_t op) {
  if ((int)op < 0 || op >= GC_NUM_OPS) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "op %d is not a gc_op_t", (int)op);
  return GC_SUCCESS;
}

/* Whether resolved options change the reduced values (scale, add or a cast). */
int gc__has_epilogue(const gc_options_t *o, gc_dtype_t dtype) {
  return o->scale != 1.0 || o->add != NULL || o->out_dtype != dtype;
}

/* *o without its epilogue (no scale, no add), results of out_dtype: for a stage whose epilogue
 * another stage applies. */
gc_options_t gc__without_epilogue(const gc_options_t *o, gc_dtype_t out_dtype) {
  gc_options_t plain = *o;
  plain.scale = 1.0;
  plain.add = NULL;
  plain.out_dtype = out_dtype;
  return plain;
}

/* Fills *out from opts (NULL = defaults), with out_dtype resolved; refuses epilogues that do not
 * fit the dtype or the collective. wire_fn: the call that takes a compressed wire, whose request
 * is checked against dtype and op (gc__wire_check) and kept resolved (fp8 group 0 becomes 32);
 * NULL: the call moves native data only. */
static gc_result_t resolve(gc_comm_t comm, const gc_options_t *opts, gc_dtype_t dtype, int reduces,
                           const char *wire_fn, gc_op_t op, gc_options_t *out) {
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
  if (o.max_blocks > GC_KMAX_BLOCKS) /* one signal row a block: more have none to meet at */
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "options.max_blocks %d is above %d, the most blocks a kernel takes "
                   "(GC_KMAX_BLOCKS); use 0 (the dispatch table) to %d", o.max_blocks, GC_KMAX_BLOCKS, GC_KMAX_BLOCKS);
  if (!wire_fn && (o.wire != GC_WIRE_NATIVE || o.wire_group != 0)) {
    const char *wn = gc_wire_name(o.wire);
    if (!wn) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "options.wire %d is not a gc_wire_t", (int)o.wire);
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT,
                   "options.wire is %s (group %d): only gc_allreduce_ex takes a compressed wire; this call moves "
                   "native data (use GC_WIRE_NATIVE, group 0)", wn, o.wire_group);
  }
  if (o.out_dtype == GC_DTYPE_SAME) o.out_dtype = dtype;
  if (!gc__dtype_valid(o.out_dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "options.out_dtype %d is not a gc_dtype_t", (int)o.out_dtype);
  int epilogue = gc__has_epilogue(&o, dtype);
  if (epilogue && !reduces)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "epilogues (scale, add, out_dtype) apply to reductions only");
  if (epilogue && !gc__dtype_is_float(dtype)) {
    if (o.scale != 1.0 || o.out_dtype != dtype)
      return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s results take no scale or cast (only add)", gc_dtype_name(dtype));
  }
  if (o.out_dtype != dtype && !gc__dtype_is_float(o.out_dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "cannot cast %s results to %s", gc_dtype_name(dtype),
                   gc_dtype_name(o.out_dtype));
  if (wire_fn) {
    gc_kwire_t w;
    GC_CHECK(gc__wire_check(comm, wire_fn, (int)o.wire, o.wire_group, dtype, op, &w));
    o.wire = (gc_wire_t)w.format;
    o.wire_group = w.group;
  }
  *out = o;
  return GC_SUCCESS;
}

gc_result_t gc__resolve_options(gc_comm_t comm, const gc_options_t *opts, gc_dtype_t dtype, int reduces,
                                gc_options_t *out) {
  return resolve(comm, opts, dtype, reduces, NULL, GC_SUM, out);
}

gc_result_t gc__resolve_wire_options(gc_comm_t comm, const char *fn, const gc_options_t *opts, gc_dtype_t dtype,
                                     gc_op_t op, gc_options_t *out) {
  return resolve(comm, opts, dtype, 1, fn, op, out);
}

gc_result_t gc__check_pointer(gc_comm_t comm, const void *p, const char *name, gc__ptr_kind_t *kind) {
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
int gc__overlaps(const void *a, size_t an, const void *b, size_t bn) {
  const char *x = a, *y = b;
  return an != 0 && bn != 0 && x < y + bn && y < x + an;
}

/* Any overlap of [a, a+an) and [b, b+bn) other than b == a + allowed (the in-place layout). */
int gc__bad_overlap(const void *a, size_t an, const void *b, size_t bn, ptrdiff_t allowed) {
  return (const char *)b != (const char *)a + allowed && gc__overlaps(a, an, b, bn);
}

/* The epilogue's add vector (count elements of the input dtype, count results in recv) may be
 * recv itself when the results keep the input dtype (each element is read before its own result
 * replaces it); any other overlap with recv is refused. */
gc_result_t gc__check_add(gc_comm_t comm, const gc_options_t *o, gc_dtype_t dtype, const void *recv, size_t count) {
  if (!o->add) return GC_SUCCESS;
  if (o->add == recv && o->out_dtype != dtype)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT,
                   "the epilogue's add vector is recvbuf, whose results are %s, not the input's %s "
                   "(the results would overwrite addends not yet read)",
                   gc_dtype_name(o->out_dtype), gc_dtype_name(dtype));
  if (o->add != recv && gc__overlaps(o->add, count * gc_dtype_size(dtype), recv, count * gc_dtype_size(o->out_dtype)))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "the epilogue's add vector partially overlaps recvbuf");
  return GC_SUCCESS;
}

/* ---- shared front half ---------------------------------------------------------------------- */


/* What one LL generation must hold for a call whose largest part has part_bytes (n rows of
 * them; a broadcast one, of at most a generation: it goes in chunks), or 0 when LL cannot carry
 * it: ll.cu moves float32/16 and bf16, and fp8 where nothing is reduced; no float64 output. */
size_t gc__ll_need(gc_comm_t comm, gc__coll_t coll, gc_dtype_t dtype, gc_dtype_t out, size_t part_bytes) {
  int reduces = coll == GC_COLL_ALLREDUCE || coll == GC_COLL_REDUCESCATTER;
  int ok = dtype == GC_FLOAT32 || dtype == GC_FLOAT16 || dtype == GC_BFLOAT16 ||
           (!reduces && (dtype == GC_FP8_E4M3 || dtype == GC_FP8_E5M2));
  if (!ok || out == GC_FLOAT64) return 0;
  size_t row = (part_bytes + 15) / 16 * 16;
  if (coll == GC_COLL_BROADCAST) return row < GC_LL_GEN_BYTES ? row : GC_LL_GEN_BYTES;
  return row * (size_t)comm->local_size;
}

/* The MPI path cannot run inside a CUDA graph capture: refused with `why` before it starts. */
gc_result_t gc__refuse_capture(gc_comm_t comm, void *stream, const char *why) {
  if (comm->device < 0) return GC_SUCCESS;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing((cudaStream_t)stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone)
    return GC_FAIL(comm, GC_ERR_INVALID_USAGE, "%s cannot run inside CUDA graph capture", why);
  (void)cudaGetLastError();
  return GC_SUCCESS;
}

/* The plan for call c: its pointers checked and classified, then gc__plan; the MPI path refuses
 * graph capture before it starts; the plan is recorded (gc__plan_record). */
gc_result_t gc__plan_call(gc_comm_t comm, gc__call_t *c, const gc_options_t *o, const gc__ptrs_t *ptrs, void *stream,
                             gc__plan_t *plan) {
  int all_device = 1;
  for (int i = 0; i < ptrs->n; i++) {
    if (!ptrs->ptr[i]) continue;
    gc__ptr_kind_t kind;
    GC_CHECK(gc__check_pointer(comm, ptrs->ptr[i], ptrs->name[i], &kind));
    all_device &= kind == GC_PTR_DEVICE_OWN;
  }
  c->all_device = all_device;
  c->algo = o->algo;
  c->max_blocks = o->max_blocks;
  gc__facts_t f;
  gc__facts(comm, &f);
  GC_CHECK(gc__plan(&f, c, plan));
  if (plan->path == GC_PATH_MPI) GC_CHECK(gc__refuse_capture(comm, stream, "the MPI path (host buffers or no peer access)"));
  return gc__plan_record(comm, plan); /* GC__PLANNED under gc_plan_query: nothing runs */
}

/* ---- public entry points -------------------------------------------------------------------- */


/* Where p sits in gc_mem_alloc buffers, for the signature (gc__symmetric_place; 1: in place). */
static uint64_t sig_place(gc_comm_t comm, const void *p, int in_place) {
  uint64_t at = p ? gc__symmetric_place(comm, p) : 0;
  return at && in_place ? 1 : at;
}

/* GC_CHECK_CALLS=1: the ranks compare a public call's arguments, as given, before they are checked
 * here (so a rank that would refuse its own call alone is caught too) and before any data moves
 * (callcheck.c; `buf` tells host buffers from device ones, `at` where send and recv sit). Under
 * GC_CHECK_CALLS=auto the MPI path compares its own calls instead (mpi_path.c). */
gc__call_sig_t gc__public_sig(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype, gc_op_t op,
                                 int root, const gc_options_t *opts, const void *buf, gc__places_t at) {
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

gc_result_t gc__check_same_call(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype, gc_op_t op, int root,
                             const gc_options_t *opts, const void *buf, gc__places_t at) {
  if (comm->check_calls != GC_CHECK_EVERY_CALL) return GC_SUCCESS;
  gc__call_sig_t sig = gc__public_sig(comm, call, count, dtype, op, root, opts, buf, at);
  return gc__same_call(comm, &sig);
}
