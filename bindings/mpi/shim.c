/* shim.c — libgpucoll-mpi: MPI_Allreduce, MPI_Reduce, MPI_Reduce_scatter(_block), MPI_Allgather
 * and MPI_Bcast on device buffers served by gpucoll, everything else passed to the PMPI_ entry points unchanged.
 *
 * Route agreement (every rank of a call must take the same route): the call's arguments that MPI
 * requires to match (datatype, op, count, root, communicator; for MPI_Bcast and MPI_Allgather the
 * bytes these describe) decide alike on every rank with no
 * communication. What differs by rank (buffer kind, device, a failed gpucoll communicator) is
 * agreed with one PMPI_Allreduce(MPI_LAND) of "this rank can serve it" the first time this rank
 * sees a (communicator, buffer kind) pair; the answer is cached on the communicator and reused
 * without communication. That is safe for programs whose ranks pass the same kind of buffer
 * (all host or all device) in every call on a communicator; GC_MPI_SHIM_AGREE=always agrees on
 * every call for programs that do not. */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpucoll.h"
#include "shim_route.h"

#define GCM_EXPORT __attribute__((visibility("default")))

enum { UNKNOWN = -1 };

/* What the library keeps on one MPI communicator (its attribute value). */
typedef struct shim_comm {
  gc_comm_t gc;                 /* made on the first call agreed for gpucoll; NULL before */
  int device;                   /* gc's CUDA device */
  int failed;                   /* making gc failed on some rank: never again */
  int agreed[GCM_NUM_KINDS];    /* the last agreed answer per buffer kind, UNKNOWN before */
  void *scratch;                /* MPI_Reduce's result on non-root ranks (gc_buffer_alloc), or NULL */
  size_t scratch_bytes;
} shim_comm_t;

static int keyval = MPI_KEYVAL_INVALID;
/* > 0 while gpucoll runs: its own MPI calls go straight to PMPI. */
static __thread int depth;

static int knob_on(const char *name, const char *on_value) {
  const char *v = getenv(name);
  return v && *v && (on_value ? strcmp(v, on_value) == 0 : strcmp(v, "0") != 0);
}

static int log_enabled(void) {
  static int on = -1;
  if (on < 0) on = knob_on("GC_MPI_SHIM_LOG", NULL);
  return on;
}

static int agree_always(void) {
  static int on = -1;
  if (on < 0) on = knob_on("GC_MPI_SHIM_AGREE", "always");
  return on;
}

static void log_route(const char *name, int count, int gpucoll, gcm_reason_t reason) {
  if (!log_enabled()) return;
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "gpucoll-mpi: rank %d: %s count %d -> %s (%s)\n", rank, name, count,
          gpucoll ? "gpucoll" : "mpi", gcm_reason_text(reason));
}

static int have_gpu(void) {
  static int gpus = -1;
  if (gpus < 0) {
    int n = 0;
    gpus = cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
    cudaGetLastError();
  }
  return gpus > 0;
}

/* Device memory only: managed and host memory are readable by the MPI library itself. */
static gcm_buf_kind_t buf_kind(const void *p, int *device) {
  if (p == MPI_IN_PLACE) return GCM_BUF_NONE;
  if (p == NULL || !have_gpu()) return GCM_BUF_HOST;
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    cudaGetLastError();
    return GCM_BUF_HOST;
  }
  if (at.type != cudaMemoryTypeDevice) return GCM_BUF_HOST;
  *device = at.device;
  return GCM_BUF_DEVICE;
}

static int delete_state(MPI_Comm comm, int key, void *value, void *extra) {
  shim_comm_t *sc = value;
  if (sc->gc) {
    depth++;
    gc_result_t r = gc_comm_destroy(sc->gc); /* frees the scratch buffer too */
    depth--;
    if (r != GC_SUCCESS)
      fprintf(stderr, "gpucoll-mpi: gc_comm_destroy: %s: %s\n", gc_result_name(r), gc_comm_last_error(sc->gc));
  }
  free(sc);
  return MPI_SUCCESS;
}

static shim_comm_t *get_state(MPI_Comm comm) {
  if (keyval == MPI_KEYVAL_INVALID &&
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, NULL) != MPI_SUCCESS)
    return NULL;
  void *value = NULL;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, keyval, &value, &found) != MPI_SUCCESS) return NULL;
  if (found) return value;
  shim_comm_t *sc = calloc(1, sizeof *sc);
  if (!sc) return NULL;
  sc->device = -1;
  for (int k = 0; k < GCM_NUM_KINDS; k++) sc->agreed[k] = UNKNOWN;
  if (PMPI_Comm_set_attr(comm, keyval, sc) != MPI_SUCCESS) {
    free(sc);
    return NULL;
  }
  return sc;
}

static int all_can(MPI_Comm comm, int can) {
  int all = 0;
  return PMPI_Allreduce(&can, &all, 1, MPI_INT, MPI_LAND, comm) == MPI_SUCCESS && all;
}

/* Collective over the ranks that all agreed to route: every one of them comes here. */
static int make_gc(MPI_Comm comm, shim_comm_t *sc, int device) {
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.device = device;
  depth++;
  gc_result_t r = gc_comm_init(&sc->gc, comm, &cfg);
  depth--;
  if (r != GC_SUCCESS) {
    sc->gc = NULL;
    fprintf(stderr, "gpucoll-mpi: gc_comm_init: %s: %s\n", gc_result_name(r), gc_comm_last_error(NULL));
  } else {
    sc->device = device;
  }
  int all = all_can(comm, r == GC_SUCCESS);
  if (!all) sc->failed = 1; /* on every rank alike, so that no rank's answer differs later */
  return all;
}

enum { ROUTE_MPI, ROUTE_GPUCOLL, ROUTE_REFUSED };

/* Fills in the communicator's part of `a`, agrees where needed; ROUTE_GPUCOLL (and *out) when
 * gpucoll serves the call, ROUTE_REFUSED when this rank cannot follow its peers there. */
static int choose_route(const char *name, int count, MPI_Comm comm, gcm_call_attrs_t *a,
                        int device, shim_comm_t **out) {
  int inter = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return ROUTE_MPI;
  a->inter = inter;
  gcm_reason_t reason = gcm_local_reason(a);
  if (gcm_reason_uniform(reason)) {
    log_route(name, count, 0, reason);
    return ROUTE_MPI;
  }
  shim_comm_t *sc = get_state(comm);
  if (!sc) return ROUTE_MPI;
  a->comm_failed = sc->failed;
  a->buffers_on_comm_device = device >= 0 && (!sc->gc || device == sc->device);
  reason = gcm_local_reason(a);
  int kind = gcm_call_kind(a), can = reason == GCM_REASON_OK;
  /* Agree only where every rank agrees too: never on a change of this rank's own answer alone. */
  if (agree_always() || sc->agreed[kind] == UNKNOWN) {
    int all = all_can(comm, can);
    if (all && !sc->gc) all = make_gc(comm, sc, device);
    sc->agreed[kind] = all;
  }
  if (sc->agreed[kind] && !can) {
    /* The peers go to gpucoll on the cached answer: refuse through the error handler rather than
     * take another route than theirs. */
    log_route(name, count, 0, reason);
    fprintf(stderr, "gpucoll-mpi: %s: %s after the ranks agreed on gpucoll for this buffer kind; "
            "set GC_MPI_SHIM_AGREE=always\n", name, gcm_reason_text(reason));
    PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
    return ROUTE_REFUSED;
  }
  int route = sc->agreed[kind] && can;
  log_route(name, count, route, route || !can ? reason : GCM_REASON_PEER);
  *out = sc;
  return route ? ROUTE_GPUCOLL : ROUTE_MPI;
}

static int mpi_error(const char *name, MPI_Comm comm, shim_comm_t *sc, gc_result_t r) {
  fprintf(stderr, "gpucoll-mpi: %s: %s: %s\n", name, gc_result_name(r), gc_comm_last_error(sc->gc));
  int cls = gcm_mpi_error_class(r);
  PMPI_Comm_call_errhandler(comm, cls);
  return cls;
}

/* The blocking MPI semantics: the call returns once the result is in the receive buffer. */
static int finish(const char *name, MPI_Comm comm, shim_comm_t *sc, gc_result_t r) {
  if (r == GC_SUCCESS) {
    depth++;
    r = gc_synchronize(sc->gc, NULL);
    depth--;
  }
  return r == GC_SUCCESS ? MPI_SUCCESS : mpi_error(name, comm, sc, r);
}

/* The one device of a call's device buffers; -2 when they sit on two devices. */
static int call_device(int send_device, int recv_device) {
  if (send_device >= 0 && recv_device >= 0 && send_device != recv_device) return -2;
  return recv_device >= 0 ? recv_device : send_device;
}

GCM_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm) {
  if (depth) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  gcm_call_attrs_t a = GCM_CALL_ATTRS_INIT;
  int sdev = -1, rdev = -1;
  gc_dtype_t dt = GC_FLOAT32;
  gc_op_t gop = GC_SUM;
  shim_comm_t *sc = NULL;
  a.send = buf_kind(sendbuf, &sdev);
  a.recv = buf_kind(recvbuf, &rdev);
  a.dtype_ok = gcm_dtype_of(datatype, 1, &dt);
  a.op_ok = gcm_op_of(op, &gop);
  a.count_ok = count > 0;
  int route = choose_route("MPI_Allreduce", count, comm, &a, call_device(sdev, rdev), &sc);
  if (route == ROUTE_REFUSED) return MPI_ERR_OTHER;
  if (route == ROUTE_MPI) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  depth++;
  gc_result_t r = gc_allreduce(src, recvbuf, (size_t)count, dt, gop, sc->gc, NULL);
  depth--;
  return finish("MPI_Allreduce", comm, sc, r);
}

/* A blocking copy of a served call's result to where MPI puts it (any memory kind). */
static int copy_out(const char *name, MPI_Comm comm, void *dst, const void *src, size_t bytes) {
  if (cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) == cudaSuccess) return MPI_SUCCESS;
  fprintf(stderr, "gpucoll-mpi: %s: cudaMemcpy: %s\n", name, cudaGetErrorString(cudaGetLastError()));
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

/* A device buffer of at least `bytes` on the gpucoll communicator's device, kept for the next
 * call; NULL (and a message) when it cannot be had. */
static void *scratch(const char *name, shim_comm_t *sc, size_t bytes) {
  if (sc->scratch_bytes >= bytes) return sc->scratch;
  depth++;
  gc_result_t r = sc->scratch ? gc_buffer_free(sc->gc, sc->scratch) : GC_SUCCESS;
  sc->scratch = NULL, sc->scratch_bytes = 0;
  if (r == GC_SUCCESS) r = gc_buffer_alloc(sc->gc, bytes, 1, &sc->scratch);
  depth--;
  if (r != GC_SUCCESS) {
    sc->scratch = NULL;
    fprintf(stderr, "gpucoll-mpi: %s: scratch buffer of %zu bytes: %s: %s\n", name, bytes, gc_result_name(r),
            gc_comm_last_error(sc->gc));
    return NULL;
  }
  sc->scratch_bytes = bytes;
  return sc->scratch;
}

/* gpucoll has no rooted reduction: MPI_Reduce runs as an all-reduce of the ranks' data buffers
 * (see gcm_reduce_attrs) whose result the root keeps and every other rank writes to its scratch
 * buffer. A root receive buffer that is not device memory of the communicator's device gets the
 * result copied from the scratch buffer. A rank without scratch memory still joins the call, with
 * no receive buffer: gpucoll refuses it there, and its call check hands the peers GC_ERR_REMOTE
 * (GC_TIMEOUT_MS bounds their wait when checks are off). */
GCM_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                          int root, MPI_Comm comm) {
  if (depth) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  int sdev = -1, rdev = -1, rank = -1, size = 0;
  gc_dtype_t dt = GC_FLOAT32;
  gc_op_t gop = GC_SUM;
  shim_comm_t *sc = NULL;
  if (comm != MPI_COMM_NULL && (PMPI_Comm_size(comm, &size) != MPI_SUCCESS ||
                                PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS))
    size = 0;
  int at_root = rank == root, in_place = sendbuf == MPI_IN_PLACE;
  gcm_buf_kind_t send = buf_kind(sendbuf, &sdev), recv = at_root ? buf_kind(recvbuf, &rdev) : GCM_BUF_NONE;
  gcm_call_attrs_t a = gcm_reduce_attrs(at_root, in_place, send, recv, root, size, count);
  a.dtype_ok = gcm_dtype_of(datatype, 1, &dt);
  a.op_ok = gcm_op_of(op, &gop);
  int route = choose_route("MPI_Reduce", count, comm, &a, at_root && in_place ? rdev : sdev, &sc);
  if (route == ROUTE_REFUSED) return MPI_ERR_OTHER;
  if (route == ROUTE_MPI) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  size_t bytes = (size_t)count * gc_dtype_size(dt);
  int direct = gcm_reduce_into_recv(at_root, recv, rdev, sc->device);
  void *dst = direct ? recvbuf : scratch("MPI_Reduce", sc, bytes);
  depth++;
  gc_result_t r = gc_allreduce(in_place ? recvbuf : sendbuf, dst, (size_t)count, dt, gop, sc->gc, NULL);
  depth--;
  int rc = finish("MPI_Reduce", comm, sc, r);
  return rc == MPI_SUCCESS && at_root && !direct ? copy_out("MPI_Reduce", comm, recvbuf, dst, bytes) : rc;
}

/* MPI's in-place reduce-scatter leaves the result at the start of recvbuf; gpucoll's leaves it at
 * the rank's own block, so it is moved down after the call. */
static int reduce_scatter_gc(const char *name, const void *sendbuf, void *recvbuf, int recvcount,
                             int counts_equal, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  gcm_call_attrs_t a = GCM_CALL_ATTRS_INIT;
  int sdev = -1, rdev = -1, rank = 0;
  gc_dtype_t dt = GC_FLOAT32;
  gc_op_t gop = GC_SUM;
  shim_comm_t *sc = NULL;
  a.send = buf_kind(sendbuf, &sdev);
  a.recv = buf_kind(recvbuf, &rdev);
  a.dtype_ok = gcm_dtype_of(datatype, 1, &dt);
  a.op_ok = gcm_op_of(op, &gop);
  a.count_ok = recvcount > 0;
  a.counts_equal = counts_equal;
  int route = choose_route(name, recvcount, comm, &a, call_device(sdev, rdev), &sc);
  if (route == ROUTE_REFUSED) return MPI_ERR_OTHER;
  if (route == ROUTE_MPI) return -1;
  PMPI_Comm_rank(comm, &rank);
  size_t block = (size_t)recvcount * gc_dtype_size(dt);
  char *own = (char *)recvbuf + (sendbuf == MPI_IN_PLACE ? (size_t)rank * block : 0);
  const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  depth++;
  gc_result_t r = gc_reducescatter(src, own, (size_t)recvcount, dt, gop, sc->gc, NULL);
  depth--;
  int rc = finish(name, comm, sc, r);
  return rc == MPI_SUCCESS && own != (char *)recvbuf ? copy_out(name, comm, recvbuf, own, block) : rc;
}

GCM_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  int rc = depth ? -1
                 : reduce_scatter_gc("MPI_Reduce_scatter_block", sendbuf, recvbuf, recvcount, 1, datatype, op, comm);
  return rc != -1 ? rc : PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

/* Served only when every rank receives the same count (the block form); recvcounts is the same
 * array on every rank, so that test decides alike everywhere. */
GCM_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  int size = 0, inter = 0, rc = -1;
  if (!depth && comm != MPI_COMM_NULL && recvcounts && PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS &&
      !inter && PMPI_Comm_size(comm, &size) == MPI_SUCCESS) {
    int equal = 1;
    for (int i = 1; i < size; i++) equal = equal && recvcounts[i] == recvcounts[0];
    rc = reduce_scatter_gc("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts[0], equal, datatype, op, comm);
  }
  return rc != -1 ? rc : PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

/* ---- the calls without arithmetic: bytes ---------------------------------------------------
 * MPI_Allgather and MPI_Bcast require only the type signatures of the ranks' (count, datatype)
 * pairs to match, not the pairs themselves: the root may send 4 MPI_INT that another rank
 * receives as one contiguous type of 4 MPI_INT. So their route is decided on what is the same on
 * every rank, the bytes the pair describes, and gpucoll moves those bytes. A rank whose layout has
 * gaps (a vector type, say) packs its elements into a device scratch buffer and unpacks them
 * there, through host memory. A rank that cannot (no scratch memory, no packing) still joins the
 * call, with no buffer: gpucoll refuses it there, as in MPI_Reduce. */

/* A (count, datatype) pair as its bytes: how many, and whether they lie one after another from
 * the buffer's start. 0 for a datatype MPI does not take (MPI reports it). */
typedef struct layout {
  size_t bytes;
  int contiguous;
  MPI_Aint extent;        /* from one element to the next */
  MPI_Aint true_lb, span; /* where the elements start and the bytes they cover */
} layout_t;

static int layout_of(int count, MPI_Datatype type, layout_t *out) {
  int size = 0;
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (count < 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0 ||
      PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS)
    return 0;
  out->bytes = (size_t)count * (size_t)size;
  out->contiguous = true_lb == 0 && true_extent == size && (count <= 1 || extent == size);
  out->extent = extent;
  out->true_lb = true_lb;
  out->span = count > 0 ? (MPI_Aint)(count - 1) * extent + true_extent : 0;
  return 1;
}

/* Between `count` elements of `type` at `buf` (device memory) and `packed` (device memory, their
 * bytes one after another), through host copies: MPI packs host memory only. Unpacking reads the
 * span first, so that the bytes between elements stay as they are. MPI_Pack's format is the bytes
 * themselves in a homogeneous job, which MPI_Pack_size confirms; anything else is refused. Says
 * why it failed; the caller reports it to MPI. */
static int repack(const char *name, MPI_Comm comm, void *buf, int count, MPI_Datatype type, const layout_t *L,
                  void *packed, int unpack) {
  int psize = -1, pos = 0, ok = PMPI_Pack_size(count, type, comm, &psize) == MPI_SUCCESS && (size_t)psize == L->bytes;
  char *image = ok ? malloc((size_t)L->span + 1) : NULL, *flat = ok ? malloc(L->bytes + 1) : NULL;
  char *span_at = (char *)buf + L->true_lb, *base = image ? image - L->true_lb : NULL; /* buf's place in image */
  ok = image && flat && cudaMemcpy(image, span_at, (size_t)L->span, cudaMemcpyDeviceToHost) == cudaSuccess;
  if (ok && !unpack)
    ok = PMPI_Pack(base, count, type, flat, psize, &pos, comm) == MPI_SUCCESS &&
         cudaMemcpy(packed, flat, L->bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  if (ok && unpack)
    ok = cudaMemcpy(flat, packed, L->bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
         PMPI_Unpack(flat, psize, &pos, base, count, type, comm) == MPI_SUCCESS &&
         cudaMemcpy(span_at, image, (size_t)L->span, cudaMemcpyHostToDevice) == cudaSuccess;
  free(image);
  free(flat);
  if (ok) return MPI_SUCCESS;
  cudaGetLastError();
  fprintf(stderr, "gpucoll-mpi: %s: cannot %s a datatype with gaps (packed size %d for %zu bytes)\n", name,
          unpack ? "unpack" : "pack", psize, L->bytes);
  return MPI_ERR_TYPE;
}

/* After a served call: the result unpacked from `packed` into the caller's layout. */
static int unpack_result(const char *name, MPI_Comm comm, void *buf, int count, MPI_Datatype type, const layout_t *L,
                         void *packed) {
  int rc = repack(name, comm, buf, count, type, L, packed, 1);
  if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
  return rc;
}

/* An all-gather of `block` bytes per rank. Contiguous layouts are gathered where they are; else
 * this rank's block is packed into its place in a scratch buffer, gathered there in place and
 * copied or unpacked into recvbuf. */
static int allgather_bytes(MPI_Comm comm, shim_comm_t *sc, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           const layout_t *S, void *recvbuf, int recvcount, MPI_Datatype recvtype, const layout_t *R) {
  static const char name[] = "MPI_Allgather";
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const int in_place = sendbuf == MPI_IN_PLACE;
  char *own = (char *)recvbuf + (size_t)rank * (size_t)recvcount * (size_t)R->extent; /* this rank's block */
  gc_result_t r = GC_SUCCESS;
  if (R->contiguous && (in_place || S->contiguous)) {
    depth++;
    r = gc_allgather(in_place ? own : sendbuf, recvbuf, R->bytes, GC_UINT8, sc->gc, NULL);
    depth--;
    return finish(name, comm, sc, r);
  }
  char *all = scratch(name, sc, (size_t)size * R->bytes), *mine = all ? all + (size_t)rank * R->bytes : NULL;
  const int packed = mine && (in_place ? repack(name, comm, own, recvcount, recvtype, R, mine, 0)
                                       : repack(name, comm, (void *)sendbuf, sendcount, sendtype, S, mine, 0)) ==
                                 MPI_SUCCESS;
  depth++;
  r = gc_allgather(packed ? mine : NULL, packed ? all : NULL, R->bytes, GC_UINT8, sc->gc, NULL);
  depth--;
  int rc = finish(name, comm, sc, r);
  if (rc != MPI_SUCCESS) return rc;
  layout_t whole;
  layout_of(size * recvcount, recvtype, &whole);
  return R->contiguous ? copy_out(name, comm, recvbuf, all, whole.bytes)
                       : unpack_result(name, comm, recvbuf, size * recvcount, recvtype, &whole, all);
}

GCM_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (depth) return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  gcm_call_attrs_t a = GCM_CALL_ATTRS_INIT;
  int sdev = -1, rdev = -1, size = 0;
  layout_t S = {0, 1, 0, 0, 0}, R = {0, 1, 0, 0, 0};
  shim_comm_t *sc = NULL;
  if (comm != MPI_COMM_NULL) PMPI_Comm_size(comm, &size);
  a.send = buf_kind(sendbuf, &sdev);
  a.recv = buf_kind(recvbuf, &rdev);
  a.dtype_ok = layout_of(recvcount, recvtype, &R) && (sendbuf == MPI_IN_PLACE || layout_of(sendcount, sendtype, &S));
  a.count_ok = R.bytes > 0 && (size_t)size <= SIZE_MAX / R.bytes;
  a.types_match = sendbuf == MPI_IN_PLACE || S.bytes == R.bytes;
  int route = choose_route("MPI_Allgather", recvcount, comm, &a, call_device(sdev, rdev), &sc);
  if (route == ROUTE_REFUSED) return MPI_ERR_OTHER;
  if (route == ROUTE_MPI) return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return allgather_bytes(comm, sc, sendbuf, sendcount, sendtype, &S, recvbuf, recvcount, recvtype, &R);
}

GCM_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (depth) return PMPI_Bcast(buffer, count, datatype, root, comm);
  static const char name[] = "MPI_Bcast";
  gcm_call_attrs_t a = GCM_CALL_ATTRS_INIT;
  int rdev = -1, rank = 0, size = 0;
  layout_t L = {0, 1, 0, 0, 0};
  shim_comm_t *sc = NULL;
  if (comm != MPI_COMM_NULL) PMPI_Comm_size(comm, &size);
  a.recv = buf_kind(buffer, &rdev);
  a.dtype_ok = layout_of(count, datatype, &L);
  a.count_ok = L.bytes > 0 && root >= 0 && root < size;
  int route = choose_route(name, count, comm, &a, rdev, &sc);
  if (route == ROUTE_REFUSED) return MPI_ERR_OTHER;
  if (route == ROUTE_MPI) return PMPI_Bcast(buffer, count, datatype, root, comm);
  PMPI_Comm_rank(comm, &rank);
  char *data = L.contiguous ? buffer : scratch(name, sc, L.bytes);
  if (data && rank == root && !L.contiguous && repack(name, comm, buffer, count, datatype, &L, data, 0) != MPI_SUCCESS)
    data = NULL;
  depth++;
  gc_result_t r = gc_broadcast(rank == root ? data : NULL, data, L.bytes, GC_UINT8, root, sc->gc, NULL);
  depth--;
  int rc = finish(name, comm, sc, r);
  return rc == MPI_SUCCESS && rank != root && !L.contiguous
             ? unpack_result(name, comm, buffer, count, datatype, &L, data)
             : rc;
}

/* gpucoll communicators are destroyed while MPI still runs: the attributes of the two predefined
 * communicators are deleted here (MPI_Comm_free deletes those of the others). */
GCM_EXPORT int MPI_Finalize(void) {
  if (keyval != MPI_KEYVAL_INVALID) {
    MPI_Comm comms[2] = {MPI_COMM_SELF, MPI_COMM_WORLD};
    for (int i = 0; i < 2; i++) {
      void *value = NULL;
      int found = 0;
      if (PMPI_Comm_get_attr(comms[i], keyval, &value, &found) == MPI_SUCCESS && found)
        PMPI_Comm_delete_attr(comms[i], keyval);
    }
    PMPI_Comm_free_keyval(&keyval);
  }
  return PMPI_Finalize();
}
