/* mpi_path.c — the MPI path: every collective on host pointers, and on device pointers where the
 * peer-to-peer kernels cannot run (staged through pinned host memory, or CUDA-aware MPI). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "gc_internal.h"

/*
 * Reductions never use MPI's reduction operators (nor a user-defined MPI_Op for the half types,
 * as the original request suggested): an MPI_Op sees the ranks in an order the MPI library
 * chooses, so bits would depend on the MPI algorithm. Instead every rank receives its slice of
 * every rank's data (MPI_Ialltoallv), reduces element i over ranks 0..n-1 in that fixed order in
 * the same accumulator type the kernels use (float for the 16-bit floats and float32, double for
 * float64, wrapping 64-bit for integers), applies the epilogue with one rounding at the end, and
 * the reduced slices travel back with MPI_Iallgatherv. Each element is reduced on exactly one
 * rank, so all ranks hold the same bits, and they equal the GPU kernels' bits (docs/design.md).
 */

/* ---- helpers -------------------------------------------------------------------------------- */

/* An MPI type that moves one element unchanged (fp8 and half types are plain bytes to MPI). */
static MPI_Datatype elem_type(size_t size) {
  switch (size) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

/* Elements per MPI chunk: GC_MPI_CHUNK_BYTES (read at init), but at most INT_MAX / 2 so counts
 * and displacements (ints, up to count + nranks) never overflow, and at least one. */
static size_t chunk_elems(gc_comm_t comm, size_t elem_bytes) {
  size_t n = comm->mpi_chunk_bytes / elem_bytes;
  if (n < 1) n = 1;
  if (n > (size_t)(INT_MAX / 2)) n = (size_t)(INT_MAX / 2);
  return n;
}

static int is_dev(gc_comm_t comm, const void *p) {
  return comm->device >= 0 && p != NULL && gc__ptr_kind(comm, p) != GC_PTR_HOST;
}

/* Makes the two pinned staging chunks at least `bytes` each (lazily; freed in gc__mpi_release). */
static gc_result_t stage_reserve(gc_comm_t comm, size_t bytes) {
  if (comm->mpi_stage[0] && comm->mpi_stage_bytes >= bytes) return GC_SUCCESS;
  gc__mpi_release(comm);
  for (int b = 0; b < 2; b++)
    GC_CUDA_CHECK(comm, cudaHostAlloc(&comm->mpi_stage[b], bytes, cudaHostAllocPortable));
  comm->mpi_stage_bytes = bytes;
  GC_INFO(GC_SUB_MPI, "MPI path: 2 pinned staging chunks of %zu bytes", bytes);
  return GC_SUCCESS;
}

void gc__mpi_release(gc_comm_t comm) {
  for (int b = 0; b < 2; b++) {
    if (comm->mpi_stage[b]) cudaFreeHost(comm->mpi_stage[b]);
    comm->mpi_stage[b] = NULL;
  }
  comm->mpi_stage_bytes = 0;
}

/* ---- the local reduction and the epilogue ---------------------------------------------- */

typedef enum { ACC_FLOAT, ACC_DOUBLE, ACC_INT } acc_kind_t;

static acc_kind_t acc_kind(gc_dtype_t dt) {
  if (dt == GC_FLOAT64) return ACC_DOUBLE;
  if (gc__dtype_is_float(dt)) return ACC_FLOAT;
  return ACC_INT;
}

static int64_t load_int(const void *buf, size_t i, gc_dtype_t dt) {
  const unsigned char *p = buf;
  switch (dt) {
    case GC_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case GC_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    case GC_UINT8: return p[i];
    default: return (int64_t)gc__load_double(buf, i, dt);
  }
}

/* Stores an integer accumulator: integer outputs keep the low bits (two's complement wrap),
 * float outputs round from the exact value via double. */
static void store_int(void *buf, size_t i, gc_dtype_t dt, int64_t v) {
  unsigned char *p = buf;
  switch (dt) {
    case GC_INT32: { uint32_t u = (uint32_t)(uint64_t)v; memcpy(p + 4 * i, &u, 4); break; }
    case GC_INT64: memcpy(p + 8 * i, &v, 8); break;
    case GC_UINT8: p[i] = (unsigned char)(uint64_t)v; break;
    default: gc__store_double(buf, i, dt, (double)v); break;
  }
}

/* What a reduction needs to know besides the data. */
typedef struct {
  gc_dtype_t dt, odt, adt; /* input, output, and the epilogue's add vector */
  gc_op_t op;
  int n;
  int avg_n;    /* GC_AVG divides by this: n, or the parent's rank count in a mixed operation */
  double scale; /* opts->scale (floats only) */
  void *acc;    /* scratch: one accumulator per element of the largest slice */
} red_t;

#define RED_LOOP(T, LOAD)                                                      \
  do {                                                                         \
    T *a_ = (T *)R->acc;                                                       \
    for (size_t j = 0; j < len; j++) a_[j] = (T)LOAD(gath, j, R->dt);          \
    for (int r = 1; r < R->n; r++) {                                           \
      const void *row_ = gath + (size_t)r * len * isz;                         \
      switch (R->op) {                                                         \
        case GC_SUM: case GC_AVG:                                              \
          for (size_t j = 0; j < len; j++) a_[j] = a_[j] + (T)LOAD(row_, j, R->dt); \
          break;                                                               \
        case GC_PROD:                                                          \
          for (size_t j = 0; j < len; j++) a_[j] = a_[j] * (T)LOAD(row_, j, R->dt); \
          break;                                                               \
        case GC_MIN:                                                           \
          for (size_t j = 0; j < len; j++) {                                   \
            T x_ = (T)LOAD(row_, j, R->dt);                                    \
            a_[j] = x_ < a_[j] ? x_ : a_[j];                                   \
          }                                                                    \
          break;                                                               \
        case GC_MAX:                                                           \
          for (size_t j = 0; j < len; j++) {                                   \
            T x_ = (T)LOAD(row_, j, R->dt);                                    \
            a_[j] = x_ > a_[j] ? x_ : a_[j];                                   \
          }                                                                    \
          break;                                                               \
        default: break;                                                        \
      }                                                                        \
    }                                                                          \
  } while (0)

/* The epilogue on len reduced values in place at vals (float32, float64 or int64 accumulators;
 * other integer types are read as such): scale (floats; rounded once to float32 there), add (len
 * elements of add_dtype, or NULL), then len elements of out_dtype to out. Separate multiply and
 * add: no fused multiply-add (x86-64 C without -mfma never contracts; the kernels must use
 * __fmul_rn/__fadd_rn). Integers stay exact: add wraps, integer outputs keep the low bits. */
void gc__host_epilogue(void *vals, gc_dtype_t dtype, size_t len, double scale, const void *add, gc_dtype_t add_dtype,
                       void *out, gc_dtype_t out_dtype) {
  switch (acc_kind(dtype)) {
    case ACC_FLOAT: {
      float *a = vals, s = (float)scale;
      if (s != 1.0f)
        for (size_t j = 0; j < len; j++) a[j] = a[j] * s;
      if (add)
        for (size_t j = 0; j < len; j++) a[j] = a[j] + (float)gc__load_double(add, j, add_dtype);
      for (size_t j = 0; j < len; j++) gc__store_double(out, j, out_dtype, (double)a[j]);
      break;
    }
    case ACC_DOUBLE: {
      double *a = vals;
      if (scale != 1.0)
        for (size_t j = 0; j < len; j++) a[j] = a[j] * scale;
      if (add)
        for (size_t j = 0; j < len; j++) a[j] = a[j] + gc__load_double(add, j, add_dtype);
      for (size_t j = 0; j < len; j++) gc__store_double(out, j, out_dtype, a[j]);
      break;
    }
    case ACC_INT:
      for (size_t j = 0; j < len; j++) {
        uint64_t v = (uint64_t)load_int(vals, j, dtype);
        if (add) v += (uint64_t)load_int(add, j, add_dtype);
        store_int(out, j, out_dtype, (int64_t)v);
      }
      break;
  }
}

/* Reduces gath (n rows of len elements of R->dt, row r from rank r) element-wise in rank order,
 * applies the epilogue (add: len elements of R->adt or NULL) and writes len elements of R->odt. */
static void reduce_slice(const red_t *R, const char *gath, size_t len, const void *add, void *out) {
  size_t isz = gc_dtype_size(R->dt);
  /* The scale is formed in double (scale / n for AVG, as coll.c hands it to the kernels). */
  double s = R->op == GC_AVG ? R->scale / R->avg_n : R->scale;
  switch (acc_kind(R->dt)) {
    case ACC_FLOAT:
      RED_LOOP(float, gc__load_double);
      gc__host_epilogue(R->acc, GC_FLOAT32, len, s, add, R->adt, out, R->odt);
      break;
    case ACC_DOUBLE:
      RED_LOOP(double, gc__load_double);
      gc__host_epilogue(R->acc, GC_FLOAT64, len, s, add, R->adt, out, R->odt);
      break;
    case ACC_INT: {
      /* Unsigned arithmetic: wrapping is defined, and the low bits equal those of the narrow
       * type's own wrapping arithmetic. min/max compare the signed values. */
      uint64_t *a = R->acc;
      for (size_t j = 0; j < len; j++) a[j] = (uint64_t)load_int(gath, j, R->dt);
      for (int r = 1; r < R->n; r++) {
        const char *row = gath + (size_t)r * len * isz;
        for (size_t j = 0; j < len; j++) {
          uint64_t x = (uint64_t)load_int(row, j, R->dt);
          switch (R->op) {
            case GC_SUM: case GC_AVG: a[j] += x; break;
            case GC_PROD: a[j] *= x; break;
            case GC_MIN: if ((int64_t)x < (int64_t)a[j]) a[j] = x; break;
            case GC_MAX: if ((int64_t)x > (int64_t)a[j]) a[j] = x; break;
            default: break;
          }
        }
      }
      if (R->op == GC_AVG) /* C division: truncates toward zero */
        for (size_t j = 0; j < len; j++) a[j] = (uint64_t)((int64_t)a[j] / (int64_t)R->avg_n);
      gc__host_epilogue(a, GC_INT64, len, 1.0, add, R->adt, out, R->odt); /* int64: the same bits */
      break;
    }
  }
}


/* Error exits inside functions that own cleanup: record the failure in rc and jump to `out`. */
#define CU_TRY(call)                                                                           \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      rc = GC_FAIL(comm, GC_ERR_CUDA, "MPI path: %s failed: %s (%s)", #call,                   \
                   cudaGetErrorString(e_), cudaGetErrorName(e_));                              \
      goto out;                                                                                \
    }                                                                                          \
  } while (0)
#define MPI_TRY(call)                                                                          \
  do {                                                                                         \
    int m_ = (call);                                                                           \
    if (m_ != MPI_SUCCESS) {                                                                   \
      rc = gc__mpi_fail(comm, m_, #call, __FILE__, __LINE__);                                  \
      goto out;                                                                                \
    }                                                                                          \
  } while (0)
#define RC_TRY(expr)                                                                           \
  do {                                                                                         \
    rc = (expr);                                                                               \
    if (rc != GC_SUCCESS) goto out;                                                            \
  } while (0)

/* Two "input staged" and two "output copied back" events, one of each per pinned chunk. */
typedef struct {
  cudaEvent_t in[2], out[2];
  int made;
} evs_t;

static gc_result_t evs_make(gc_comm_t comm, evs_t *E) {
  cudaEvent_t *all[4] = {&E->in[0], &E->in[1], &E->out[0], &E->out[1]};
  for (; E->made < 4; E->made++)
    GC_CUDA_CHECK(comm, cudaEventCreateWithFlags(all[E->made], cudaEventDisableTiming));
  return GC_SUCCESS;
}
static void evs_free(evs_t *E) {
  cudaEvent_t all[4] = {E->in[0], E->in[1], E->out[0], E->out[1]};
  for (int i = 0; i < E->made; i++) cudaEventDestroy(all[i]);
  E->made = 0;
}

/* Device data to the pinned chunks one round ahead: on return chunk k of src (C elements, fewer
 * at the end) is in mpi_stage[k % 2], and chunk k + 1's copy runs while round k communicates. */
static gc_result_t stage_ahead(gc_comm_t comm, evs_t *ev, const char *src, size_t k, size_t C, size_t count,
                               size_t isz, cudaStream_t stream) {
  int b = (int)(k % 2);
  if (k == 0) {
    GC_CUDA_CHECK(comm, cudaMemcpyAsync(comm->mpi_stage[0], src, (count < C ? count : C) * isz,
                                        cudaMemcpyDeviceToHost, stream));
    GC_CUDA_CHECK(comm, cudaEventRecord(ev->in[0], stream));
  }
  GC_CUDA_CHECK(comm, cudaEventSynchronize(ev->in[b]));
  size_t c1 = (k + 1) * C;
  if (c1 < count) {
    size_t ck1 = count - c1 < C ? count - c1 : C;
    GC_CUDA_CHECK(comm, cudaMemcpyAsync(comm->mpi_stage[1 - b], src + c1 * isz, ck1 * isz, cudaMemcpyDeviceToHost,
                                        stream));
    GC_CUDA_CHECK(comm, cudaEventRecord(ev->in[1 - b], stream));
  }
  return GC_SUCCESS;
}

/* An element of this type is `elems` elements, stretched to `stride_bytes`: gathering one from
 * each rank lands rank r's block r * stride_bytes into the buffer, so counts past INT_MAX
 * elements never reach an int displacement. */
static gc_result_t strided_block(gc_comm_t comm, size_t elems, MPI_Datatype et, size_t stride_bytes,
                                 MPI_Datatype *out) {
  MPI_Datatype blk;
  GC_MPI_CHECK(comm, MPI_Type_contiguous((int)elems, et, &blk));
  int m = MPI_Type_create_resized(blk, 0, (MPI_Aint)stride_bytes, out);
  MPI_Type_free(&blk);
  if (m != MPI_SUCCESS) return gc__mpi_fail(comm, m, "MPI_Type_create_resized", __FILE__, __LINE__);
  m = MPI_Type_commit(out);
  if (m != MPI_SUCCESS) {
    MPI_Type_free(out);
    return gc__mpi_fail(comm, m, "MPI_Type_commit", __FILE__, __LINE__);
  }
  return GC_SUCCESS;
}

/* Ends a call that touched device memory: everything enqueued on `stream` has finished. */
static gc_result_t finish_stream(gc_comm_t comm, cudaStream_t stream) {
  return gc__stream_wait(comm, stream, "MPI path: the call's copies");
}

/* ---- reductions: allreduce and reduce-scatter share one round structure ----------------- */

/*
 * One round: rank r receives from every rank its piece (scount[r] elements at sdispl[r] of the
 * round's input) and reduces it. Allreduce: the round's input is one contiguous chunk of send,
 * split with gc_partition; the reduced slices are then all-gathered into recv. Reduce-scatter:
 * the round's input is the next piece of each rank's block, packed; the reduced slice is this
 * rank's output.
 *
 * Device data goes through the two pinned chunks of the communicator (chunk b = k % 2 for round
 * k): round k+1's input is copied device->host on `stream` while round k communicates (event
 * in[b] says it arrived), and results go host->device on the same stream (event out[b] says they
 * left, before round k+2 writes chunk b again). Host inputs of reduce-scatter are packed into two
 * alternating host buffers for the same reason.
 */
typedef struct {
  gc_comm_t comm;
  cudaStream_t stream;
  red_t R;
  size_t isz, osz, asz; /* element sizes of input, output, add vector */
  int allreduce;
  size_t count, C;      /* allreduce: total elements and elements per round */
  const size_t *counts; /* reduce-scatter: every rank's block */
  size_t *base;         /* element offset of each rank's block in send */
  size_t Cr;            /* reduce-scatter: elements of each block per round */
  const char *send;
  char *recv;
  const char *add;
  int send_dev, recv_dev, add_dev;
  size_t rounds;
  int *scount, *sdispl, *rcount, *rdispl; /* geometry of the current round */
  char *gath, *slice, *hpack[2];          /* host scratch */
  size_t st_in, st_out, st_add;           /* byte offsets inside a pinned chunk */
  evs_t ev;
} rctx_t;

/* Geometry of round k: the send pieces, and this rank's output range [*out_off, + *mylen)
 * relative to recv (which is also where its add elements are). */
static void round_geom(rctx_t *X, size_t k, size_t *mylen, size_t *out_off, size_t *in_elems) {
  int n = X->R.n, me = X->comm->rank;
  if (X->allreduce) {
    size_t c0 = k * X->C, ck = X->count - c0 < X->C ? X->count - c0 : X->C;
    for (int r = 0; r < n; r++) {
      size_t off, len;
      gc_partition(ck, n, r, &off, &len);
      X->scount[r] = (int)len;
      X->sdispl[r] = (int)off;
    }
    *out_off = c0 + (size_t)X->sdispl[me];
    *in_elems = ck;
  } else {
    size_t pos = 0, done = k * X->Cr;
    for (int r = 0; r < n; r++) {
      size_t len = 0;
      if (X->counts[r] > done) len = X->counts[r] - done < X->Cr ? X->counts[r] - done : X->Cr;
      X->scount[r] = (int)len;
      X->sdispl[r] = (int)pos;
      pos += len;
    }
    *out_off = done;
    *in_elems = pos;
  }
  *mylen = (size_t)X->scount[me];
  for (int r = 0; r < n; r++) {
    X->rcount[r] = (int)*mylen;
    X->rdispl[r] = (int)(*mylen * (size_t)r);
  }
}

/* Brings round k's input (and add slice) to the host: host data is used in place (or packed
 * with memcpy), device data is copied into pinned chunk k % 2 on `stream`, event in[k % 2]. */
static gc_result_t round_fetch(rctx_t *X, size_t k, const char **in, const char **add) {
  gc_comm_t comm = X->comm;
  size_t mylen, out_off, in_elems;
  round_geom(X, k, &mylen, &out_off, &in_elems);
  char *st = (char *)comm->mpi_stage[k % 2];
  int n = X->R.n;

  if (X->allreduce) {
    const char *src = X->send + k * X->C * X->isz;
    *in = src;
    if (X->send_dev) {
      GC_CUDA_CHECK(comm, cudaMemcpyAsync(st + X->st_in, src, in_elems * X->isz,
                                          cudaMemcpyDeviceToHost, X->stream));
      *in = st + X->st_in;
    }
  } else {
    char *dst = X->send_dev ? st + X->st_in : X->hpack[k % 2];
    for (int r = 0; r < n; r++) {
      if (!X->scount[r]) continue;
      const char *src = X->send + (X->base[r] + k * X->Cr) * X->isz;
      size_t bytes = (size_t)X->scount[r] * X->isz;
      if (X->send_dev)
        GC_CUDA_CHECK(comm, cudaMemcpyAsync(dst + (size_t)X->sdispl[r] * X->isz, src, bytes,
                                            cudaMemcpyDeviceToHost, X->stream));
      else
        memcpy(dst + (size_t)X->sdispl[r] * X->isz, src, bytes);
    }
    *in = dst;
  }

  *add = NULL;
  if (X->add) {
    *add = X->add + out_off * X->asz;
    if (X->add_dev) {
      if (mylen)
        GC_CUDA_CHECK(comm, cudaMemcpyAsync(st + X->st_add, *add, mylen * X->asz,
                                            cudaMemcpyDeviceToHost, X->stream));
      *add = st + X->st_add;
    }
  }
  if (X->send_dev || X->add_dev) GC_CUDA_CHECK(comm, cudaEventRecord(X->ev.in[k % 2], X->stream));
  return GC_SUCCESS;
}

static gc_result_t reduce_rounds(rctx_t *X) {
  gc_comm_t comm = X->comm;
  gc_result_t rc = GC_SUCCESS;
  MPI_Datatype it = elem_type(X->isz), ot = elem_type(X->osz);
  const char *in[2] = {NULL, NULL}, *add[2] = {NULL, NULL};
  RC_TRY(round_fetch(X, 0, &in[0], &add[0]));
  for (size_t k = 0; k < X->rounds; k++) {
    int b = (int)(k % 2);
    size_t mylen, out_off, in_elems;
    char *st = (char *)comm->mpi_stage[b];
    if (X->send_dev || X->add_dev) CU_TRY(cudaEventSynchronize(X->ev.in[b]));
    if (X->recv_dev && k >= 2) CU_TRY(cudaEventSynchronize(X->ev.out[b]));
    /* Overlap: round k+1's device->host copies run while round k communicates. */
    if (k + 1 < X->rounds) RC_TRY(round_fetch(X, k + 1, &in[1 - b], &add[1 - b]));
    round_geom(X, k, &mylen, &out_off, &in_elems);

    MPI_Request req;
    MPI_TRY(MPI_Ialltoallv(in[b], X->scount, X->sdispl, it, X->gath, X->rcount, X->rdispl, it,
                           comm->mpi, &req));
    RC_TRY(gc__boot_wait(comm, &req, "MPI path: MPI_Ialltoallv (reduction)"));

    if (X->allreduce) {
      reduce_slice(&X->R, X->gath, mylen, add[b], X->slice);
      char *dst = X->recv_dev ? st + X->st_out : X->recv + k * X->C * X->osz;
      MPI_TRY(MPI_Iallgatherv(X->slice, (int)mylen, ot, dst, X->scount, X->sdispl, ot, comm->mpi,
                              &req));
      RC_TRY(gc__boot_wait(comm, &req, "MPI path: MPI_Iallgatherv (reduction)"));
      if (X->recv_dev)
        CU_TRY(cudaMemcpyAsync(X->recv + k * X->C * X->osz, dst, in_elems * X->osz,
                               cudaMemcpyHostToDevice, X->stream));
    } else {
      char *dst = X->recv_dev ? st + X->st_out : X->recv + out_off * X->osz;
      reduce_slice(&X->R, X->gath, mylen, add[b], dst);
      if (X->recv_dev && mylen)
        CU_TRY(cudaMemcpyAsync(X->recv + out_off * X->osz, dst, mylen * X->osz,
                               cudaMemcpyHostToDevice, X->stream));
    }
    if (X->recv_dev) CU_TRY(cudaEventRecord(X->ev.out[b], X->stream));
  }
out:
  return rc;
}

/* Sets up scratch and staging for X (geometry fields already filled), runs the rounds, cleans. */
static gc_result_t reduce_run(rctx_t *X, size_t max_in, size_t max_mine) {
  gc_comm_t comm = X->comm;
  int n = X->R.n;
  gc_result_t rc = GC_SUCCESS;
  int any_dev = X->send_dev || X->recv_dev || X->add_dev;

  X->scount = malloc(4 * sizeof(int) * (size_t)n);
  X->gath = malloc((size_t)n * max_mine * X->isz + 1);
  X->slice = malloc(max_mine * X->osz + 1);
  X->R.acc = malloc(max_mine * 8 + 8);
  int need_pack = !X->allreduce && !X->send_dev;
  X->hpack[0] = need_pack ? malloc(2 * max_in * X->isz + 1) : NULL;
  X->hpack[1] = need_pack && X->hpack[0] ? X->hpack[0] + max_in * X->isz : NULL;
  if (!X->scount || !X->gath || !X->slice || !X->R.acc || (need_pack && !X->hpack[0])) {
    rc = GC_FAIL(comm, GC_ERR_SYSTEM, "MPI path: out of host memory for %zu-element scratch",
                 (size_t)n * max_mine);
    goto out;
  }
  X->sdispl = X->scount + n;
  X->rcount = X->scount + 2 * n;
  X->rdispl = X->scount + 3 * n;

  if (any_dev) {
    /* each pinned chunk: [input | output | add], 256-byte aligned pieces */
    size_t out_elems = X->allreduce ? max_in : max_mine;
    X->st_in = 0;
    X->st_out = (max_in * X->isz + 255) & ~(size_t)255;
    X->st_add = X->st_out + ((out_elems * X->osz + 255) & ~(size_t)255);
    RC_TRY(stage_reserve(comm, X->st_add + max_mine * X->asz + 256));
    RC_TRY(evs_make(comm, &X->ev));
  }

  rc = reduce_rounds(X);
  if (rc == GC_ERR_TIMEOUT) {
    /* MPI may still use the scratch buffers: kept (see gc__boot_wait) */
    void *kept[] = {X->scount, X->gath, X->slice, X->R.acc, X->hpack[0]};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) gc__park(kept[i]);
    return rc;
  }
  if (any_dev) {
    gc_result_t r2 = finish_stream(comm, X->stream);
    if (rc == GC_SUCCESS) rc = r2;
  }
out:
  evs_free(&X->ev);
  free(X->scount);
  free(X->gath);
  free(X->slice);
  free(X->R.acc);
  free(X->hpack[0]);
  return rc;
}

static void rctx_common(rctx_t *X, gc_comm_t comm, const void *send, void *recv, gc_dtype_t dtype,
                        gc_op_t op, const gc_options_t *opts, cudaStream_t stream) {
  memset(X, 0, sizeof *X);
  X->comm = comm;
  X->stream = stream;
  X->R.dt = dtype;
  X->R.odt = opts && opts->out_dtype != GC_DTYPE_SAME ? opts->out_dtype : dtype;
  X->R.adt = dtype;
  X->R.op = op;
  X->R.n = X->R.avg_n = comm->size;
  X->R.scale = opts && gc__dtype_is_float(dtype) ? opts->scale : 1.0;
  X->isz = gc_dtype_size(X->R.dt);
  X->osz = gc_dtype_size(X->R.odt);
  X->asz = X->isz;
  X->send = send;
  X->recv = recv;
  X->add = opts ? opts->add : NULL;
  X->send_dev = is_dev(comm, send);
  X->recv_dev = is_dev(comm, recv);
  X->add_dev = is_dev(comm, X->add);
}

/* The MPI path's calls compare what shapes their MPI traffic and results (callcheck.c): counts,
 * types, op, root, epilogue and chunk; not the algorithm, which the path ignores, nor where
 * buffers lie, which each rank stages on its own. Under GC_CHECK_CALLS=auto and 1 (where the
 * public call was compared as given too): this comparison comes after every local check, so it
 * is where a rank that refused its call alone meets its peers (agree.c); with 0 none is made. */
static int mpi_compares(gc_comm_t comm) { return comm->check_calls != GC_CHECK_NONE; }

static gc__call_sig_t mpi_sig(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype, gc_op_t op, int root,
                              const gc_options_t *opts) {
  gc__call_sig_t sig = gc__call_sig(comm, call, count, dtype, op, root, opts);
  sig.v[GC_SIG_ALGO] = sig.v[GC_SIG_MAX_BLOCKS] = 0;
  return sig;
}

static gc_result_t same_mpi_call(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype, gc_op_t op,
                                 int root, const gc_options_t *opts) {
  if (!mpi_compares(comm)) return GC_SUCCESS;
  gc__call_sig_t sig = mpi_sig(comm, call, count, dtype, op, root, opts);
  return gc__same_call(comm, &sig);
}

gc_result_t gc__mpi_allreduce(gc_comm_t comm, const void *send, void *recv, size_t count,
                              gc_dtype_t dtype, gc_op_t op, const gc_options_t *opts,
                              const gc__mpi_mix_t *mix, cudaStream_t stream) {
  GC_CHECK(same_mpi_call(comm, GC_CALL_MPI_ALLREDUCE, count, dtype, op, 0, opts));
  if (count == 0) return GC_SUCCESS;
  rctx_t X;
  rctx_common(&X, comm, send, recv, dtype, op, opts, stream);
  if (mix) {
    X.R.adt = mix->add_dtype;
    X.asz = gc_dtype_size(mix->add_dtype);
    X.R.avg_n = mix->avg_ranks;
  }
  X.allreduce = 1;
  X.count = count;
  /* the larger element size sets the chunk, so the pinned chunks stay near GC_MPI_CHUNK_BYTES */
  X.C = chunk_elems(comm, X.isz > X.osz ? X.isz : X.osz);
  if (X.C > count) X.C = count;
  X.rounds = (count + X.C - 1) / X.C;
  size_t max_mine = (X.C + (size_t)comm->size - 1) / (size_t)comm->size;
  GC_TRACE(GC_SUB_MPI, "MPI allreduce: %zu x %s %s, %zu rounds of %zu", count,
           gc_dtype_name(dtype), gc_op_name(op), X.rounds, X.C);
  return reduce_run(&X, X.C, max_mine);
}

gc_result_t gc__mpi_reducescatter(gc_comm_t comm, const void *send, void *recv,
                                  const size_t *counts, gc_dtype_t dtype, gc_op_t op,
                                  const gc_options_t *opts, cudaStream_t stream) {
  int n = comm->size;
  size_t maxc = 0;
  for (int r = 0; r < n; r++)
    if (counts[r] > maxc) maxc = counts[r];
  if (mpi_compares(comm)) {
    size_t total = 0;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the part sizes */
    for (int r = 0; r < n; r++) {
      total += counts[r];
      h = (h ^ counts[r]) * 0x100000001b3ull;
    }
    gc__call_sig_t sig = mpi_sig(comm, GC_CALL_MPI_REDUCESCATTER, total, dtype, op, 0, opts);
    sig.v[GC_SIG_PARTS] = h;
    GC_CHECK(gc__same_call(comm, &sig));
  }
  if (maxc == 0) return GC_SUCCESS; /* the same decision on every rank: counts are shared */
  rctx_t X;
  rctx_common(&X, comm, send, recv, dtype, op, opts, stream);
  X.counts = counts;
  X.base = malloc(sizeof(size_t) * (size_t)n);
  if (!X.base) return GC_FAIL(comm, GC_ERR_SYSTEM, "MPI path: out of host memory");
  size_t pos = 0;
  for (int r = 0; r < n; r++) {
    X.base[r] = pos;
    pos += counts[r];
  }
  /* every rank's block advances by Cr elements a round, so a round moves about one chunk */
  X.Cr = chunk_elems(comm, X.isz > X.osz ? X.isz : X.osz) / (size_t)n;
  if (X.Cr < 1) X.Cr = 1;
  if (X.Cr > maxc) X.Cr = maxc;
  X.rounds = (maxc + X.Cr - 1) / X.Cr;
  GC_TRACE(GC_SUB_MPI, "MPI reduce-scatter: %zu x %s %s on rank %d, %zu rounds",
           counts[comm->rank], gc_dtype_name(dtype), gc_op_name(op), comm->rank, X.rounds);
  gc_result_t rc = reduce_run(&X, X.Cr * (size_t)n, X.Cr);
  free(X.base);
  return rc;
}

/* ---- data movement: all-gather and broadcast ------------------------------------------ */

/* Round k of the all-gather into a staged device output: every rank's ck elements gathered
 * into pinned chunk k % 2 behind this rank's own block, then n blocks of ck elements to their
 * places, count elements apart in recv (one copy each: cudaMemcpy2D's pitch is limited, and
 * count * isz may pass it). */
static gc_result_t allgather_staged_round(gc_comm_t comm, evs_t *ev, const char *own, char *d, size_t k, size_t C,
                                          size_t ck, size_t count, size_t isz, MPI_Datatype et,
                                          cudaStream_t stream) {
  gc_result_t rc = GC_SUCCESS;
  int b = (int)(k % 2), n = comm->size;
  size_t c0 = k * C;
  char *all = (char *)comm->mpi_stage[b] + C * isz;
  MPI_Request req;
  if (k >= 2) CU_TRY(cudaEventSynchronize(ev->out[b])); /* round k-2's copy has left */
  MPI_TRY(MPI_Iallgather(own, (int)ck, et, all, (int)ck, et, comm->mpi, &req));
  RC_TRY(gc__boot_wait(comm, &req, "MPI path: MPI_Iallgather (staged)"));
  for (int r = 0; r < n; r++)
    CU_TRY(cudaMemcpyAsync(d + ((size_t)r * count + c0) * isz, all + (size_t)r * ck * isz,
                           ck * isz, cudaMemcpyHostToDevice, stream));
  CU_TRY(cudaEventRecord(ev->out[b], stream));
out:
  return rc;
}

gc_result_t gc__mpi_allgather(gc_comm_t comm, const void *send, void *recv, size_t count,
                              gc_dtype_t dtype, cudaStream_t stream) {
  GC_CHECK(same_mpi_call(comm, GC_CALL_MPI_ALLGATHER, count, dtype, GC_SUM, 0, NULL));
  if (count == 0) return GC_SUCCESS;
  size_t isz = gc_dtype_size(dtype);
  int n = comm->size, me = comm->rank;
  const char *s = send;
  char *d = recv;
  int in_place = s == d + (size_t)me * count * isz;
  int send_dev = is_dev(comm, send), recv_dev = is_dev(comm, recv);
  int any_dev = send_dev || recv_dev;
  /* CUDA-aware MPI moves device data itself; otherwise device data is staged. */
  int direct = !any_dev || (comm->cuda_aware && send_dev == recv_dev);
  MPI_Datatype et = elem_type(isz), wide = MPI_DATATYPE_NULL;
  /* A staged device output takes [own | n x] C elements of a pinned chunk. Every rank uses that
   * C, whatever its buffers: ranks may pass different kinds, and MPI needs the same rounds. */
  size_t C = chunk_elems(comm, isz) / (size_t)(n + 1);
  if (C < 1) C = 1;
  if (C > count) C = count;
  size_t rounds = (count + C - 1) / C;
  gc_result_t rc = GC_SUCCESS;
  evs_t ev = {.made = 0};

  if (any_dev) RC_TRY(gc__stream_wait(comm, stream, "MPI path: the input's producer")); /* may still be writing */
  if (!direct) {
    RC_TRY(stage_reserve(comm, C * isz * (size_t)(recv_dev ? n + 1 : 1)));
    RC_TRY(evs_make(comm, &ev));
  }

  for (size_t k = 0; k < rounds; k++) {
    size_t c0 = k * C, ck = count - c0 < C ? count - c0 : C;
    int b = (int)(k % 2);
    char *st = comm->mpi_stage[b];
    const char *own = s + c0 * isz;
    MPI_Request req;
    if (!direct && send_dev) {
      RC_TRY(stage_ahead(comm, &ev, s, k, C, count, isz, stream));
      own = st;
    }
    if (!direct && recv_dev) {
      RC_TRY(allgather_staged_round(comm, &ev, own, d, k, C, ck, count, isz, et, stream));
      continue;
    }
    /* recv is host memory (or device memory that CUDA-aware MPI writes itself) */
    RC_TRY(strided_block(comm, ck, et, count * isz, &wide));
    MPI_TRY(MPI_Iallgather(in_place && direct ? MPI_IN_PLACE : own, (int)ck, et, d + c0 * isz, 1,
                           wide, comm->mpi, &req));
    RC_TRY(gc__boot_wait(comm, &req, "MPI path: MPI_Iallgather"));
    MPI_Type_free(&wide);
    wide = MPI_DATATYPE_NULL;
  }
  if (any_dev) RC_TRY(finish_stream(comm, stream));
out:
  if (rc == GC_ERR_TIMEOUT) {
    return rc; /* MPI may still use the type and the events' chunks: leave them (see gc__boot_wait) */
  }
  if (wide != MPI_DATATYPE_NULL) MPI_Type_free(&wide);
  evs_free(&ev);
  return rc;
}

/* The broadcast's first step: the root's send into its recv (bytes), after whatever produced
 * send on `stream`. */
static gc_result_t broadcast_root_copy(gc_comm_t comm, const void *send, void *recv, size_t bytes, int is_root,
                                       int any_dev, cudaStream_t stream) {
  gc_result_t rc = GC_SUCCESS;
  if (any_dev) {
    /* The producer first: a copy into pageable memory would wait for it inside the driver. */
    RC_TRY(gc__stream_wait(comm, stream, "MPI path: the input's producer"));
    if (is_root && send != recv) {
      CU_TRY(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDefault, stream));
      RC_TRY(gc__stream_wait(comm, stream, "MPI path: the root's copy"));
    }
  } else if (is_root && send != recv) {
    memcpy(recv, send, bytes);
  }
out:
  return rc;
}

gc_result_t gc__mpi_broadcast(gc_comm_t comm, const void *send, void *recv, size_t count,
                              gc_dtype_t dtype, int root, cudaStream_t stream) {
  GC_CHECK(same_mpi_call(comm, GC_CALL_MPI_BROADCAST, count, dtype, GC_SUM, root, NULL));
  if (count == 0) return GC_SUCCESS;
  size_t isz = gc_dtype_size(dtype);
  int is_root = comm->rank == root;
  int send_dev = is_root && is_dev(comm, send), recv_dev = is_dev(comm, recv);
  int any_dev = send_dev || recv_dev;
  int direct = !recv_dev || comm->cuda_aware;
  MPI_Datatype et = elem_type(isz);
  size_t C = chunk_elems(comm, isz);
  if (C > count) C = count;
  size_t rounds = (count + C - 1) / C;
  gc_result_t rc = GC_SUCCESS;
  evs_t ev = {.made = 0};
  char *d = recv;

  /* First the root's recv gets the data; from then on recv is the source on the root and the
   * destination elsewhere. */
  RC_TRY(broadcast_root_copy(comm, send, recv, count * isz, is_root, any_dev, stream));
  if (!direct) {
    RC_TRY(stage_reserve(comm, C * isz));
    RC_TRY(evs_make(comm, &ev));
  }

  /* Staged rounds alternate the two pinned chunks: the root copies round k+1 to the host, and
   * the others copy round k to the device, on `stream` while the next round is broadcast. */
  for (size_t k = 0; k < rounds; k++) {
    size_t c0 = k * C, ck = count - c0 < C ? count - c0 : C;
    int b = (int)(k % 2);
    char *buf = d + c0 * isz;
    MPI_Request req;
    if (!direct) {
      buf = comm->mpi_stage[b];
      if (is_root) {
        RC_TRY(stage_ahead(comm, &ev, d, k, C, count, isz, stream));
      } else if (k >= 2) {
        CU_TRY(cudaEventSynchronize(ev.out[b])); /* round k-2's copy has left chunk b */
      }
    }
    MPI_TRY(MPI_Ibcast(buf, (int)ck, et, root, comm->mpi, &req));
    RC_TRY(gc__boot_wait(comm, &req, "MPI path: MPI_Ibcast"));
    if (!direct && !is_root) {
      CU_TRY(cudaMemcpyAsync(d + c0 * isz, buf, ck * isz, cudaMemcpyHostToDevice, stream));
      CU_TRY(cudaEventRecord(ev.out[b], stream));
    }
  }
  if (any_dev) RC_TRY(finish_stream(comm, stream));
out:
  if (rc == GC_ERR_TIMEOUT) {
    return rc; /* see gc__boot_wait: MPI may still write the chunks */
  }
  evs_free(&ev);
  return rc;
}
