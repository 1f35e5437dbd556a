/* coll.c — the basic public collectives (all-reduce, reduce-scatter 1-D and 2-D, all-gather,
 * broadcast): checks, the plan, then its executor; the MPI path or, across nodes, the
 * hierarchical one (hierarchy.c) where the plan says so. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gc_entry.h"
#include "gc_wire.h"

/* recv_is_scratch: recv is the library's own device memory from cudaMallocAsync, which during graph
 * capture is not yet memory that cudaPointerGetAttributes knows; it is not looked up. */
gc_result_t gc__allreduce_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, gc_comm_t comm,
                            void *stream, const gc_options_t *opts, int recv_is_scratch) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  GC_CHECK(gc__check_same_call(comm, GC_CALL_ALLREDUCE, count, dtype, op, 0, opts, send, (gc__places_t){send, recv, 0, send == recv}));
  GC_CHECK(gc__check_dtype(comm, dtype, 1));
  GC_CHECK(gc__check_op(comm, op));
  gc_options_t o;
  GC_CHECK(gc__resolve_wire_options(comm, "gc_allreduce_ex", opts, dtype, op, &o));
  if (count == 0) return GC_SUCCESS;
  if (!send || !recv) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce: %s is NULL", send ? "recvbuf" : "sendbuf");
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o.out_dtype);
  if (count > SIZE_MAX / 8) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "count %zu is too large", count);
  if (gc__bad_overlap(send, count * es, recv, count * os, 0) || (send == recv && o.out_dtype != dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  GC_CHECK(gc__check_add(comm, &o, dtype, recv, count));
  gc__ptrs_t p = {{send, recv_is_scratch ? NULL : recv, o.add}, {"sendbuf", "recvbuf", "options.add"}, 3};
  gc__bufs_t b;
  b.sym_in = gc__symmetric_lookup(comm, send, count * es, b.in);
  b.sym_out = gc__symmetric_lookup(comm, recv, count * os, b.out);
  gc__call_t c = {.coll = GC_COLL_ALLREDUCE, .bytes = count * es, .count = count, .es = es, .os = os,
                  .ll_bytes = gc__ll_need(comm, GC_COLL_ALLREDUCE, dtype, o.out_dtype, count * es),
                  .epilogue = gc__has_epilogue(&o, dtype), .in_place = send == recv, .sym_in = b.sym_in,
                  .sym_out = b.sym_out, .send_off16 = (uintptr_t)send % 16 != 0, .recv_off16 = (uintptr_t)recv % 16 != 0,
                  .wire = (int)o.wire, .wire_group = o.wire_group,
                  .flat_only = op == GC_AVG && !gc__dtype_is_float(dtype)};
  gc__plan_t plan;
  GC_CHECK(gc__plan_call(comm, &c, &o, &p, stream, &plan));
  if (plan.path == GC_PATH_HIER) return gc__hier_allreduce(comm, send, recv, count, dtype, op, &o, stream);
  if (plan.path != GC_PATH_MPI)
    return gc__run_allreduce(comm, &plan, &b, send, recv, count, dtype, op, &o, (cudaStream_t)stream);
  if (plan.wire != GC_WIRE_FMT_NATIVE) return gc__wire_allreduce_mpi(comm, (gc_kwire_t){plan.wire, plan.wire_group}, send, recv, count, dtype, op, &o);
  return gc__mpi_allreduce(comm, send, recv, count, dtype, op, &o, NULL, (cudaStream_t)stream);
}

gc_result_t gc_allreduce_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_op_t op, gc_comm_t comm,
                            void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_ALLREDUCE, gc__allreduce_impl(send, recv, count, dtype, op, comm, stream, opts, 0)));
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

/* The temporaries of the axis-1 split freed once nothing can use them any more, else kept
 * (gc__park): r, or after a success the failure of the wait for the stream. reduced: the
 * all-reduce's result; copied: whether the add vector's copy to the host is known to be over. */
static gc_result_t columns_release(gc_comm_t comm, int host, void *full, void *add_here, gc_result_t reduced,
                                   int copied, gc_result_t r, cudaStream_t stream) {
  if (host) {
    if (reduced == GC_ERR_TIMEOUT) gc__park(full); /* the timed-out request may still gather into it */
    else free(full);
    if (copied) free(add_here);
    else gc__park(add_here); /* the copy may still write it */
    return r;
  }
  gc_result_t waited = gc__stream_wait(comm, stream, "gc_reducescatter_2d");
  void *temps[2] = {full, add_here};
  for (int t = 0; t < 2; t++) {
    if (!temps[t]) continue;
    if (waited == GC_SUCCESS) cudaFree(temps[t]);
    else gc__park(temps[t]); /* the stream may still read it; cudaFree would wait for it */
  }
  return r == GC_SUCCESS ? waited : r;
}

/* The MPI path's axis-1 split: an all-reduce of the whole matrix into a float32 (float64,
 * integer) temporary, then this rank's columns through the epilogue, rounding once as the
 * kernels do, so the bits match the peer-to-peer path. An add vector that is not where the
 * epilogue runs (host or this GPU) is copied there first. */
static gc_result_t mpi_reducescatter_columns(gc_comm_t comm, const void *send, void *recv, const gc__split_t *sp,
                                             gc_dtype_t dtype, gc_op_t op, const gc_options_t *o, cudaStream_t stream) {
  size_t total = sp->rows * sp->cols, c0 = sp->off[comm->rank], w = sp->len[comm->rank];
  gc_dtype_t wide = gc__partial_dtype(dtype);
  size_t es = gc_dtype_size(dtype), ws = gc_dtype_size(wide), os = gc_dtype_size(o->out_dtype);
  gc_options_t plain = gc__without_epilogue(o, wide);
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
  return columns_release(comm, host, full, add_here, reduced, copied, r, stream);
}

static gc_result_t reducescatter_common(const void *send, void *recv, const gc__split_t *sp, gc_dtype_t dtype, gc_op_t op,
                                        gc_comm_t comm, void *stream, const gc_options_t *opts) {
  gc_options_t o;
  GC_CHECK(gc__resolve_options(comm, opts, dtype, 1, &o));
  int me = comm->rank;
  size_t total = sp->rows * sp->cols, mine = sp->axis == 1 ? sp->rows * sp->len[me] : sp->len[me];
  if (total == 0) return GC_SUCCESS;
  if (!send || (!recv && mine))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "reduce-scatter: %s is NULL", send ? "recvbuf" : "sendbuf");
  size_t es = gc_dtype_size(dtype), os = gc_dtype_size(o.out_dtype);
  /* In place: recv is this rank's own part of send (axis 0 / 1-D, same dtype only). */
  ptrdiff_t inplace = sp->axis == 1 || o.out_dtype != dtype ? PTRDIFF_MAX : (ptrdiff_t)(sp->off[me] * es);
  if (recv && gc__bad_overlap(send, total * es, recv, mine * os, inplace))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  GC_CHECK(gc__check_add(comm, &o, dtype, recv, mine));
  gc__ptrs_t p = {{send, recv, o.add}, {"sendbuf", "recvbuf", "options.add"}, 3};
  /* LL takes contiguous parts, none of them empty: a rank with nothing to reduce would wait for no
   * peer, finish at once and run calls ahead, writing generations its peers had not read yet
   * (ll.cu's argument needs every rank to wait for every rank). */
  size_t most = 0, least = SIZE_MAX;
  for (int r = 0; r < comm->size; r++) {
    most = sp->len[r] > most ? sp->len[r] : most;
    least = sp->len[r] < least ? sp->len[r] : least;
  }
  size_t ll = sp->axis == 1 || least == 0 ? 0 : gc__ll_need(comm, GC_COLL_REDUCESCATTER, dtype, o.out_dtype, most * es);
  gc__bufs_t b = {0};
  b.sym_in = gc__symmetric_lookup(comm, send, total * es, b.in);
  int on_packs = 1, equal = sp->axis == 0;
  for (int r = 0; r < comm->size; r++) {
    on_packs &= (sp->off[r] * es) % 16 == 0;
    equal &= sp->len[r] == sp->len[0] && sp->off[r] == (size_t)r * sp->len[0];
  }
  gc__call_t c = {.coll = GC_COLL_REDUCESCATTER, .bytes = total * es, .ll_bytes = ll, .count = total, .es = es,
                  .os = os, .epilogue = gc__has_epilogue(&o, dtype), .sym_in = b.sym_in, .axis = sp->axis,
                  .rows = sp->rows, .cols = sp->cols, .most_part = most, .parts_on_packs = on_packs,
                  .equal_parts = equal, .flat_only = (op == GC_AVG && !gc__dtype_is_float(dtype)) || (gc__partial_dtype(dtype) != dtype && o.add)};
  gc__plan_t plan;
  GC_CHECK(gc__plan_call(comm, &c, &o, &p, stream, &plan));
  if (plan.path == GC_PATH_HIER) return gc__hier_reducescatter(comm, send, recv, sp->len[0], dtype, op, &o, stream);
  /* one rank: its part is the whole input, axis 1 too (every column) */
  if (plan.path != GC_PATH_MPI)
    return gc__run_reducescatter(comm, &plan, &b, send, recv, sp, dtype, op, &o, (cudaStream_t)stream);
  if (sp->axis == 1) return mpi_reducescatter_columns(comm, send, recv, sp, dtype, op, &o, (cudaStream_t)stream);
  return gc__mpi_reducescatter(comm, send, recv, sp->len, dtype, op, &o, (cudaStream_t)stream);
}

/* Validates the common arguments and builds the split (the caller has checked the communicator's
 * health); the caller frees sp->off. */
static gc_result_t reducescatter_begin(gc_comm_t comm, gc_dtype_t dtype, gc_op_t op, gc__split_t *sp) {
  GC_CHECK(gc__check_dtype(comm, dtype, 1));
  GC_CHECK(gc__check_op(comm, op));
  memset(sp, 0, sizeof *sp);
  sp->off = calloc(2 * (size_t)comm->size, sizeof(size_t));
  if (!sp->off) return GC_FAIL(comm, GC_ERR_SYSTEM, "out of host memory");
  sp->len = sp->off + comm->size;
  return GC_SUCCESS;
}

gc_result_t gc__reducescatter_impl(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                                gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  const int in_place = recv == (const char *)send + (size_t)comm->rank * recvcount * gc_dtype_size(dtype);
  GC_CHECK(gc__check_same_call(comm, GC_CALL_REDUCESCATTER, recvcount, dtype, op, 0, opts, send, (gc__places_t){send, recv, 0, in_place}));
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
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_REDUCESCATTER, gc__reducescatter_impl(send, recv, recvcount, dtype, op, comm, stream, opts)));
}

gc_result_t gc_reducescatter(const void *send, void *recv, size_t recvcount, gc_dtype_t dtype, gc_op_t op,
                             gc_comm_t comm, void *stream) {
  return gc_reducescatter_ex(send, recv, recvcount, dtype, op, comm, stream, NULL);
}

static gc_result_t reducescatter_2d_impl(const void *send, void *recv, size_t rows, size_t cols, int axis, gc_dtype_t dtype,
                                gc_op_t op, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  if (comm->check_calls == GC_CHECK_EVERY_CALL) { /* gc__check_same_call, with the columns and axis */
    size_t off = 0, len = 0;
    gc_partition(rows, comm->size, comm->rank, &off, &len);
    const int in_place = axis == 0 && recv == (const char *)send + off * cols * gc_dtype_size(dtype);
    gc__call_sig_t sig = gc__public_sig(comm, GC_CALL_REDUCESCATTER_2D, rows, dtype, op, 0, opts, send,
                                    (gc__places_t){send, recv, 0, in_place});
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

gc_result_t gc__allgather_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_comm_t comm, void *stream,
                            const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  const int in_place = send == (const char *)recv + (size_t)comm->rank * count * gc_dtype_size(dtype);
  GC_CHECK(gc__check_same_call(comm, GC_CALL_ALLGATHER, count, dtype, GC_SUM, 0, opts, send, (gc__places_t){send, recv, in_place, 0}));
  GC_CHECK(gc__check_dtype(comm, dtype, 0));
  gc_options_t o;
  GC_CHECK(gc__resolve_options(comm, opts, dtype, 0, &o));
  if (count == 0) return GC_SUCCESS;
  if (!send || !recv) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allgather: %s is NULL", send ? "recvbuf" : "sendbuf");
  size_t es = gc_dtype_size(dtype);
  if (count > SIZE_MAX / 8 / (size_t)comm->size) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "count %zu is too large", count);
  if (gc__bad_overlap(recv, count * es * comm->size, send, count * es, (ptrdiff_t)(comm->rank * count * es)))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  gc__ptrs_t p = {{send, recv, NULL}, {"sendbuf", "recvbuf", ""}, 2};
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
                  .ll_bytes = gc__ll_need(comm, GC_COLL_ALLGATHER, dtype, dtype, count * es), .sym_in = b.sym_in,
                  .sym_out = b.sym_out};
  gc__plan_t plan;
  GC_CHECK(gc__plan_call(comm, &c, &o, &p, stream, &plan));
  if (plan.path == GC_PATH_HIER) return gc__hier_allgather(comm, send, recv, count, dtype, &o, stream);
  if (plan.path != GC_PATH_MPI) return gc__run_allgather(comm, &plan, &b, send, recv, count, dtype, &o, (cudaStream_t)stream);
  return gc__mpi_allgather(comm, send, recv, count, dtype, (cudaStream_t)stream);
}

gc_result_t gc_allgather_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_comm_t comm, void *stream,
                            const gc_options_t *opts) {
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_ALLGATHER, gc__allgather_impl(send, recv, count, dtype, comm, stream, opts)));
}

gc_result_t gc_allgather(const void *send, void *recv, size_t count, gc_dtype_t dtype, gc_comm_t comm, void *stream) {
  return gc_allgather_ex(send, recv, count, dtype, comm, stream, NULL);
}

gc_result_t gc__broadcast_impl(const void *send, void *recv, size_t count, gc_dtype_t dtype, int root, gc_comm_t comm,
                            void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm)); /* a failed communicator stays failed */
  GC_CHECK(gc__check_same_call(comm, GC_CALL_BROADCAST, count, dtype, GC_SUM, root, opts, recv, (gc__places_t){NULL, recv, 0, 0}));
  GC_CHECK(gc__check_dtype(comm, dtype, 0));
  gc_options_t o;
  GC_CHECK(gc__resolve_options(comm, opts, dtype, 0, &o));
  if (root < 0 || root >= comm->size)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "root %d is not a rank (0..%d)", root, comm->size - 1);
  if (count == 0) return GC_SUCCESS;
  int is_root = comm->rank == root;
  if (!recv || (is_root && !send))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_broadcast: %s is NULL", recv ? "sendbuf (on root)" : "recvbuf");
  size_t es = gc_dtype_size(dtype);
  if (count > SIZE_MAX / 8) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "count %zu is too large", count);
  if (is_root && gc__bad_overlap(send, count * es, recv, count * es, 0))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "sendbuf and recvbuf overlap without being in place");
  gc__ptrs_t p = {{is_root ? send : NULL, recv, NULL}, {"sendbuf", "recvbuf", ""}, 2};
  gc__bufs_t b = {0};
  b.sym_out = gc__symmetric_lookup(comm, recv, count * es, b.out);
  gc__call_t c = {.coll = GC_COLL_BROADCAST, .bytes = count * es, .count = count, .es = es, .os = es,
                  .ll_bytes = gc__ll_need(comm, GC_COLL_BROADCAST, dtype, dtype, count * es), .sym_out = b.sym_out};
  gc__plan_t plan;
  GC_CHECK(gc__plan_call(comm, &c, &o, &p, stream, &plan));
  if (plan.path == GC_PATH_HIER) return gc__hier_broadcast(comm, send, recv, count, dtype, root, &o, stream);
  if (plan.path != GC_PATH_MPI)
    return gc__run_broadcast(comm, &plan, &b, send, recv, count, dtype, root, &o, (cudaStream_t)stream);
  return gc__mpi_broadcast(comm, is_root ? send : NULL, recv, count, dtype, root, (cudaStream_t)stream);
}

gc_result_t gc_broadcast_ex(const void *send, void *recv, size_t count, gc_dtype_t dtype, int root, gc_comm_t comm,
                            void *stream, const gc_options_t *opts) {
  GC_ON_DEVICE(comm, gc__call_end(comm, GC_CALL_BROADCAST, gc__broadcast_impl(send, recv, count, dtype, root, comm, stream, opts)));
}

gc_result_t gc_broadcast(const void *send, void *recv, size_t count, gc_dtype_t dtype, int root, gc_comm_t comm,
                         void *stream) {
  return gc_broadcast_ex(send, recv, count, dtype, root, comm, stream, NULL);
}
