/* calls.c — a plain MPI program that makes every call libgpucoll-mpi intercepts (and some it passes
 * through), checks each result against a float64 reference and writes one line per call to
 * DIR/out.RANK: a hash of the received bytes, so that runs with and without the library compare
 * with diff. Built without CUDA it uses host buffers; built with -DGCM_WITH_CUDA and run with
 * --device its buffers come from cudaMalloc.
 * usage: calls DIR [--device] */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef GCM_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

static int rank, size, on_device, failures;
static FILE *out;

#define CHECK_MPI(call)                                                      \
  do {                                                                       \
    int rc_ = (call);                                                        \
    if (rc_ != MPI_SUCCESS) {                                                \
      fprintf(stderr, "rank %d: %s failed: %d\n", rank, #call, rc_);          \
      MPI_Abort(MPI_COMM_WORLD, 2);                                          \
    }                                                                        \
  } while (0)

/* Exact in every type used: small integers and halves. */
static double value(int r, size_t i) { return (double)((r + 1) * ((int)(i % 7) + 1)) * 0.5 + (double)(i % 3); }

static size_t type_size(MPI_Datatype t) {
  int s = 0;
  MPI_Type_size(t, &s);
  return (size_t)s;
}

static void store(void *b, MPI_Datatype t, size_t i, double v) {
  if (t == MPI_FLOAT) ((float *)b)[i] = (float)v;
  else if (t == MPI_DOUBLE) ((double *)b)[i] = v;
  else if (t == MPI_INT) ((int *)b)[i] = (int)v;
  else ((long long *)b)[i] = (long long)v;
}

static double load(const void *b, MPI_Datatype t, size_t i) {
  if (t == MPI_FLOAT) return ((const float *)b)[i];
  if (t == MPI_DOUBLE) return ((const double *)b)[i];
  if (t == MPI_INT) return ((const int *)b)[i];
  return (double)((const long long *)b)[i];
}

/* Integer types hold the value truncated, as store() writes it. */
static double typed(MPI_Datatype t, double v) {
  return t == MPI_INT || t == MPI_LONG_LONG ? (double)(long long)v : v;
}

static double reduce_ref(MPI_Op op, MPI_Datatype t, size_t i) {
  double acc = typed(t, value(0, i));
  for (int r = 1; r < size; r++) {
    double v = typed(t, value(r, i));
    if (op == MPI_SUM) acc += v;
    else if (op == MPI_PROD) acc *= v;
    else if (op == MPI_MIN) acc = v < acc ? v : acc;
    else acc = v > acc ? v : acc;
  }
  return acc;
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
#ifdef GCM_WITH_CUDA
  if (on_device) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) MPI_Abort(MPI_COMM_WORLD, 3);
    return p;
  }
#endif
  p = malloc(bytes);
  if (!p) MPI_Abort(MPI_COMM_WORLD, 3);
  return p;
}

static void dev_free(void *p) {
#ifdef GCM_WITH_CUDA
  if (on_device) {
    cudaFree(p);
    return;
  }
#endif
  free(p);
}

static void copy(void *dst, const void *src, size_t bytes) {
#ifdef GCM_WITH_CUDA
  if (on_device) {
    if (cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) != cudaSuccess) MPI_Abort(MPI_COMM_WORLD, 3);
    return;
  }
#endif
  memcpy(dst, src, bytes);
}

static uint64_t fnv(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
  return h;
}

/* Compares n received elements (host copy) with the reference and writes the hash line. */
static void report(const char *what, const void *got, MPI_Datatype t, size_t n, double (*ref)(size_t, void *),
                   void *ctx) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    double want = ref(i, ctx), have = load(got, t, i);
    if (fabs(have - want) > 1e-6 * fabs(want)) bad++;
  }
  if (bad) {
    failures++;
    fprintf(stderr, "rank %d: %s: %zu of %zu elements wrong\n", rank, what, bad, n);
  }
  fprintf(out, "%s n=%zu hash=%016llx %s\n", what, n, (unsigned long long)fnv(got, n * type_size(t)),
          bad ? "WRONG" : "ok");
}

typedef struct reduce_ctx {
  MPI_Op op;
  MPI_Datatype type;
  size_t offset; /* the first element of the whole vector that element 0 of the result is */
} reduce_ctx_t;

static double reduce_at(size_t i, void *ctx) {
  reduce_ctx_t *c = ctx;
  return reduce_ref(c->op, c->type, c->offset + i);
}

/* A send buffer of n elements holding this rank's values, on the device when asked. */
static void *filled(MPI_Datatype t, size_t n, size_t room) {
  size_t es = type_size(t);
  char *host = calloc(room ? room : 1, es);
  for (size_t i = 0; i < n; i++) store(host, t, i, value(rank, i));
  void *buf = dev_alloc((room ? room : 1) * es);
  copy(buf, host, (room ? room : 1) * es);
  free(host);
  return buf;
}

static void *to_host(const void *buf, size_t bytes) {
  void *host = malloc(bytes ? bytes : 1);
  if (!host) MPI_Abort(MPI_COMM_WORLD, 3);
  copy(host, buf, bytes);
  return host;
}

static void allreduce(const char *name, MPI_Datatype t, MPI_Op op, size_t n, int in_place) {
  void *send = filled(t, n, n), *recv = in_place ? send : dev_alloc(n * type_size(t));
  CHECK_MPI(MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, (int)n, t, op, MPI_COMM_WORLD));
  void *got = to_host(recv, n * type_size(t));
  reduce_ctx_t c = {op, t, 0};
  char what[96];
  snprintf(what, sizeof what, "allreduce %s%s", name, in_place ? " in_place" : "");
  report(what, got, t, n, reduce_at, &c);
  free(got);
  if (!in_place) dev_free(recv);
  dev_free(send);
}

static double own_at(size_t i, void *ctx) { return typed(*(MPI_Datatype *)ctx, value(rank, i)); }

enum { RECV_OWN, RECV_IN_PLACE, RECV_HOST };

/* The root receives the reduction, in its own buffer, in place, or (RECV_HOST) in host memory
 * whatever the send buffer is; the other ranks pass NULL as recvbuf (not significant there) and
 * their send buffers must come back unchanged. */
static void reduce(const char *name, MPI_Datatype t, MPI_Op op, size_t n, int root, int how) {
  size_t bytes = n * type_size(t);
  int at_root = rank == root, in_place = how == RECV_IN_PLACE;
  void *send = filled(t, n, n), *recv = NULL;
  if (at_root) recv = in_place ? send : how == RECV_HOST ? malloc(bytes) : dev_alloc(bytes);
  if (at_root && !recv) MPI_Abort(MPI_COMM_WORLD, 3);
  CHECK_MPI(MPI_Reduce(in_place && at_root ? MPI_IN_PLACE : send, recv, (int)n, t, op, root, MPI_COMM_WORLD));
  void *got = at_root && how == RECV_HOST ? recv : to_host(at_root ? recv : send, bytes);
  reduce_ctx_t c = {op, t, 0};
  char what[96];
  snprintf(what, sizeof what, "reduce %s root %d%s%s%s", name, root, in_place ? " in_place" : "",
           how == RECV_HOST ? " host_recv" : "", at_root ? "" : " (send buffer)");
  if (at_root) report(what, got, t, n, reduce_at, &c);
  else report(what, got, t, n, own_at, &t);
  free(got);
  if (at_root && how == RECV_OWN) dev_free(recv);
  dev_free(send);
}

/* blocks == NULL: MPI_Reduce_scatter_block with `n` per rank; else MPI_Reduce_scatter. */
static void reduce_scatter(const char *name, MPI_Datatype t, MPI_Op op, size_t n, const int *blocks,
                           int in_place) {
  size_t total = 0, offset = 0, mine = blocks ? (size_t)blocks[rank] : n;
  for (int r = 0; r < size; r++) {
    if (r == rank) offset = total;
    total += blocks ? (size_t)blocks[r] : n;
  }
  void *send = filled(t, total, total), *recv = in_place ? send : dev_alloc(mine * type_size(t));
  const void *src = in_place ? MPI_IN_PLACE : send;
  if (blocks) CHECK_MPI(MPI_Reduce_scatter(src, recv, blocks, t, op, MPI_COMM_WORLD));
  else CHECK_MPI(MPI_Reduce_scatter_block(src, recv, (int)n, t, op, MPI_COMM_WORLD));
  void *got = to_host(recv, mine * type_size(t));
  reduce_ctx_t c = {op, t, offset};
  char what[96];
  snprintf(what, sizeof what, "%s %s%s", blocks ? "reduce_scatter" : "reduce_scatter_block", name,
           in_place ? " in_place" : "");
  report(what, got, t, mine, reduce_at, &c);
  free(got);
  if (!in_place) dev_free(recv);
  dev_free(send);
}

typedef struct gather_ctx {
  MPI_Datatype type;
  size_t n;
} gather_ctx_t;

static double gather_at(size_t i, void *ctx) {
  gather_ctx_t *c = ctx;
  return typed(c->type, value((int)(i / c->n), i % c->n));
}

static void allgather(MPI_Datatype t, size_t n, int in_place) {
  size_t es = type_size(t);
  void *send = filled(t, n, n), *recv = dev_alloc(n * (size_t)size * es);
  if (in_place) copy((char *)recv + (size_t)rank * n * es, send, n * es);
  CHECK_MPI(MPI_Allgather(in_place ? MPI_IN_PLACE : send, (int)n, t, recv, (int)n, t, MPI_COMM_WORLD));
  void *got = to_host(recv, n * (size_t)size * es);
  gather_ctx_t c = {t, n};
  report(in_place ? "allgather in_place" : "allgather", got, t, n * (size_t)size, gather_at, &c);
  free(got);
  dev_free(recv);
  dev_free(send);
}

static double bcast_at(size_t i, void *ctx) { return typed(*(MPI_Datatype *)ctx, value(size - 1, i)); }

static void bcast(MPI_Datatype t, size_t n) {
  void *buf = filled(t, rank == size - 1 ? n : 0, n);
  CHECK_MPI(MPI_Bcast(buf, (int)n, t, size - 1, MPI_COMM_WORLD));
  void *got = to_host(buf, n * type_size(t));
  report("bcast", got, t, n, bcast_at, &t);
  free(got);
  dev_free(buf);
}

static double expected_at(size_t i, void *ctx) { return ((const double *)ctx)[i]; }

/* n ints from init, in device memory when asked. */
static void *ints(const int *init, size_t n) {
  void *buf = dev_alloc(n * sizeof(int));
  copy(buf, init, n * sizeof(int));
  return buf;
}

/* n ints of buf against want (n doubles). */
static void check_ints(const char *what, const void *buf, size_t n, const double *want) {
  void *got = to_host(buf, n * sizeof(int));
  report(what, got, MPI_INT, n, expected_at, (void *)want);
  free(got);
}

/* MPI_Bcast with type signatures that match where the datatypes do not: the root's 4 MPI_INT as
 * one contiguous type of 4 elsewhere; the root's vector of 3 ints with gaps (stride 2) as 3
 * MPI_INT elsewhere; and the root's 3 MPI_INT as that vector elsewhere (the gaps keep -1). */
static void bcast_signatures(MPI_Datatype four, MPI_Datatype strided) {
  const int root = size - 1, at_root = rank == root;
  int init[6];
  double want[6];
  for (int i = 0; i < 6; i++) init[i] = at_root ? 100 + i : -1;
  for (int i = 0; i < 4; i++) want[i] = 100 + i;
  void *buf = ints(init, 4);
  CHECK_MPI(MPI_Bcast(buf, at_root ? 4 : 1, at_root ? MPI_INT : four, root, MPI_COMM_WORLD));
  check_ints("bcast int x4 as contiguous x1", buf, 4, want);
  dev_free(buf);
  for (int i = 0; i < 3; i++) want[i] = 100 + 2 * i; /* the root's elements 0, 2, 4 */
  buf = ints(init, 6);
  CHECK_MPI(MPI_Bcast(buf, at_root ? 1 : 3, at_root ? strided : MPI_INT, root, MPI_COMM_WORLD));
  check_ints("bcast vector as int x3", buf, at_root ? 6 : 3, at_root ? (double[]){100, 101, 102, 103, 104, 105} : want);
  dev_free(buf);
  for (int i = 0; i < 6; i++) want[i] = at_root ? 100 + i : i % 2 ? -1 : 100 + i / 2;
  buf = ints(init, 6);
  CHECK_MPI(MPI_Bcast(buf, at_root ? 3 : 1, at_root ? MPI_INT : strided, root, MPI_COMM_WORLD));
  check_ints("bcast int x3 as vector", buf, 6, want);
  dev_free(buf);
}

/* MPI_Allgather alike: 4 MPI_INT on rank 0 as one contiguous type of 4 on the others; then 3
 * MPI_INT sent by every rank, received as one vector (3 ints, stride 2, extent 5) per rank. */
static void allgather_signatures(MPI_Datatype four, MPI_Datatype strided) {
  enum { MOST = 64 };
  if (size > MOST) return;
  int mine[4], init[5 * MOST];
  static double want[5 * MOST];
  for (int i = 0; i < 4; i++) mine[i] = 10 * rank + i;
  for (int i = 0; i < 5 * size; i++) init[i] = -1;
  for (int i = 0; i < 4 * size; i++) want[i] = 10 * (i / 4) + i % 4;
  void *send = ints(mine, 4), *recv = ints(init, 4 * (size_t)size);
  MPI_Datatype t = rank == 0 ? MPI_INT : four;
  CHECK_MPI(MPI_Allgather(send, rank == 0 ? 4 : 1, t, recv, rank == 0 ? 4 : 1, t, MPI_COMM_WORLD));
  check_ints("allgather int x4 as contiguous x1", recv, 4 * (size_t)size, want);
  dev_free(recv);
  for (int i = 0; i < 5 * size; i++) want[i] = i % 5 == 1 || i % 5 == 3 ? -1 : 10 * (i / 5) + (i % 5) / 2;
  recv = ints(init, 5 * (size_t)size);
  CHECK_MPI(MPI_Allgather(send, 3, MPI_INT, recv, 1, strided, MPI_COMM_WORLD));
  check_ints("allgather int x3 as vector", recv, 5 * (size_t)size, want);
  dev_free(recv);
  dev_free(send);
}

/* Calls the library passes through on any buffer: an op and a datatype gpucoll lacks, and a
 * communicator that is duplicated and freed (its attribute's delete callback runs). */
static void pass_through(void) {
  int band_in = 0x5a5a ^ rank, band = 0;
  CHECK_MPI(MPI_Allreduce(&band_in, &band, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD));
  fprintf(out, "allreduce band %d\n", band);
  int bor = 0;
  CHECK_MPI(MPI_Reduce(&band_in, &bor, 1, MPI_INT, MPI_BOR, 0, MPI_COMM_WORLD));
  fprintf(out, "reduce bor %d\n", bor);

  MPI_Datatype pair;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_FLOAT, &pair));
  CHECK_MPI(MPI_Type_commit(&pair));
  float mine[2] = {(float)rank, 0.5f * (float)rank}, *all = calloc(2 * (size_t)size, sizeof *all);
  CHECK_MPI(MPI_Allgather(mine, 1, pair, all, 1, pair, MPI_COMM_WORLD));
  fprintf(out, "allgather pair hash=%016llx\n", (unsigned long long)fnv(all, 2 * (size_t)size * sizeof *all));
  free(all);
  MPI_Type_free(&pair);

  MPI_Comm dup, half;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  double x = rank + 0.25, sum = 0;
  CHECK_MPI(MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, dup));
  CHECK_MPI(MPI_Comm_free(&dup));
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
  CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, half));
  CHECK_MPI(MPI_Comm_free(&half));
  fprintf(out, "dup sum %.17g split max %.17g\n", sum, x);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  on_device = argc > 2 && strcmp(argv[2], "--device") == 0;
#ifdef GCM_WITH_CUDA
  int gpus = 0;
  if (on_device && (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0)) {
    if (rank == 0) fprintf(stderr, "calls: --device needs a GPU\n");
    MPI_Abort(MPI_COMM_WORLD, 77);
  }
  if (on_device) cudaSetDevice(rank % gpus);
#endif
  char path[4096];
  snprintf(path, sizeof path, "%s/out.%d", argc > 1 ? argv[1] : ".", rank);
  out = fopen(path, "w");
  if (!out) {
    fprintf(stderr, "calls: cannot write %s\n", path);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int blocks[64];
  for (int r = 0; r < size && r < 64; r++) blocks[r] = 7 + r; /* unequal: passed through */
  for (int in_place = 0; in_place < 2; in_place++) {
    allreduce("float sum", MPI_FLOAT, MPI_SUM, 1001, in_place);
    allreduce("double max", MPI_DOUBLE, MPI_MAX, 257, in_place);
    allreduce("int min", MPI_INT, MPI_MIN, 3, in_place);
    allreduce("long_long sum", MPI_LONG_LONG, MPI_SUM, 65537, in_place);
    allreduce("float prod", MPI_FLOAT, MPI_PROD, 5, in_place);
    reduce("float sum", MPI_FLOAT, MPI_SUM, 1003, 0, in_place ? RECV_IN_PLACE : RECV_OWN);
    reduce("double min", MPI_DOUBLE, MPI_MIN, 129, size - 1, in_place ? RECV_IN_PLACE : RECV_OWN);
    reduce("int max", MPI_INT, MPI_MAX, 1, size / 2, in_place ? RECV_IN_PLACE : RECV_OWN);
    reduce_scatter("float sum", MPI_FLOAT, MPI_SUM, 333, NULL, in_place);
    reduce_scatter("int max", MPI_INT, MPI_MAX, 1, NULL, in_place);
    allgather(MPI_INT, 17, in_place);
    allgather(MPI_DOUBLE, 1000, in_place);
  }
  int equal[64];
  for (int r = 0; r < size && r < 64; r++) equal[r] = 129;
  reduce_scatter("double sum equal", MPI_DOUBLE, MPI_SUM, 0, equal, 0);
  /* Unequal counts pass through to the MPI library, which (not being CUDA-aware) takes host
   * buffers only: the program would have had to pass host buffers without this library too. */
  int device = on_device;
  on_device = 0;
  if (size <= 64) reduce_scatter("float sum unequal", MPI_FLOAT, MPI_SUM, 0, blocks, 0);
  on_device = device;
  reduce("long_long prod", MPI_LONG_LONG, MPI_PROD, 4099, size - 1, RECV_HOST);
  bcast(MPI_DOUBLE, 999);
  bcast(MPI_INT, 1);
  MPI_Datatype four, strided;
  CHECK_MPI(MPI_Type_contiguous(4, MPI_INT, &four));
  CHECK_MPI(MPI_Type_vector(3, 1, 2, MPI_INT, &strided));
  CHECK_MPI(MPI_Type_commit(&four));
  CHECK_MPI(MPI_Type_commit(&strided));
  bcast_signatures(four, strided);
  allgather_signatures(four, strided);
  MPI_Type_free(&four);
  MPI_Type_free(&strided);
  pass_through();
  fclose(out);
  int all_failures = 0;
  PMPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("calls: %s (%d wrong results)\n", all_failures ? "FAIL" : "PASS", all_failures);
  MPI_Finalize();
  return all_failures ? 1 : 0;
}
