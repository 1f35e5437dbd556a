/* gc_test.c — the test helpers: buffers where the test runs, inputs, the float64 reference of a
 * reduction with its tolerance, and the cross-rank checks. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "gc_internal.h"
#include "gc_rng.h"
#include "gc_test.h"

gc_comm_t gc_test_comm;
int gc_test_rank, gc_test_size = 1;
int gc_test_on_gpu;
uint64_t gc_test_seed;

void *gc_test_alloc(size_t bytes) {
  void *p = NULL;
  if (bytes == 0) bytes = 1; /* a real pointer even for count 0, so NULL checks don't fire */
  if (gc_test_on_gpu) {
    gc_result_t r = gc_buffer_alloc(gc_test_comm, bytes, 1, &p);
    if (r != GC_SUCCESS)
      fprintf(stderr, "[rank %d] gc_buffer_alloc(%zu) failed: %s\n", gc_test_rank, bytes,
              gc_comm_last_error(gc_test_comm));
  } else {
    p = malloc(bytes);
  }
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  gc_test_poison(p, bytes);
  return p;
}

void gc_test_free(void *p) {
  if (!p) return;
  if (gc_test_on_gpu) gc_buffer_free(gc_test_comm, p);
  else free(p);
}

void *gc_test_alloc_as(int symmetric, size_t bytes) {
  if (!symmetric) return gc_test_alloc(bytes);
  void *p = NULL;
  if (bytes == 0) bytes = 1; /* as gc_test_alloc */
  GC_TEST_OK(gc_mem_alloc(gc_test_comm, bytes, &p));
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  gc_test_poison(p, bytes);
  return p;
}

void gc_test_free_as(int symmetric, void *p) {
  if (!symmetric) gc_test_free(p);
  else if (p) GC_TEST_OK(gc_mem_free(gc_test_comm, p));
}

void gc_test_download(void *host_dst, const void *src, size_t bytes) {
  if (gc_test_on_gpu) GC_TEST_OK(gc_memcpy(gc_test_comm, host_dst, src, bytes));
  else memcpy(host_dst, src, bytes);
}

void gc_test_upload(void *dst, const void *host_src, size_t bytes) {
  if (gc_test_on_gpu) GC_TEST_OK(gc_memcpy(gc_test_comm, dst, host_src, bytes));
  else memcpy(dst, host_src, bytes);
}

int gc_test_fetch_checked(void *host, const void *dev, size_t bytes, int guarded, const char *what) {
  gc_test_download(host, dev, bytes + (guarded ? GUARD : 0));
  if (!guarded) return 1;
  for (size_t i = 0; i < GUARD; i++)
    if (((const unsigned char *)host)[bytes + i] != 0xff) {
      fprintf(stderr, "[rank %d] %s: wrote past the end of the output\n", gc_test_rank, what);
      return 0;
    }
  return 1;
}

void gc_test_poison(void *buf, size_t bytes) {
  if (!gc_test_on_gpu) {
    memset(buf, 0xff, bytes);
    return;
  }
  if (bytes == 0) return;
  /* device memory: up to 1 MB uploaded, then copied over the rest on the device, doubling (every
   * test buffer is poisoned when allocated, up to a GB at a time) */
  size_t done = bytes < ((size_t)1 << 20) ? bytes : ((size_t)1 << 20);
  unsigned char *h = malloc(done);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  memset(h, 0xff, done);
  GC_TEST_OK(gc_memcpy(gc_test_comm, buf, h, done));
  free(h);
  for (; done < bytes; done *= 2)
    GC_TEST_OK(gc_memcpy(gc_test_comm, (char *)buf + done, buf, bytes - done < done ? bytes - done : done));
}

uint64_t gc_test_rank_seed(int rank, int salt) {
  return gc__mix64(gc_test_seed ^ ((uint64_t)(uint32_t)(rank + 1) << 32) ^ (uint64_t)(uint32_t)salt);
}

void gc_test_fill(void *buf, size_t count, gc_dtype_t dtype, int rank, int salt) {
  GC_TEST_OK(gc_fill_random(gc_test_comm, buf, count, dtype, gc_test_rank_seed(rank, salt)));
}

double gc_test_input(gc_dtype_t dtype, int rank, int salt, size_t i) {
  /* through the dtype, so the value is what a buffer of that type holds */
  unsigned char tmp[8];
  gc__store_double(tmp, 0, dtype, gc__random_value(gc_test_rank_seed(rank, salt), i, (int)dtype));
  return gc__load_double(tmp, 0, dtype);
}

/* ---- the reference --------------------------------------------------------------------- */

void gc_test_red_init(gc_test_red_t *R, gc_dtype_t dtype, gc_op_t op, int salt) {
  memset(R, 0, sizeof *R);
  R->dtype = dtype;
  R->out_dtype = dtype;
  R->op = op;
  R->salt = salt;
  R->scale = 1.0;
}

static int64_t wrap_int(gc_dtype_t dt, int64_t v) {
  switch (dt) {
    case GC_INT32: return (int32_t)(uint32_t)(uint64_t)v;
    case GC_UINT8: return (int64_t)((uint64_t)v & 0xffu);
    default: return v;
  }
}

void gc_test_red_ref(const gc_test_red_t *R, size_t i, double *ref, double *mag) {
  size_t idx = R->width ? R->base + (i / R->width) * R->stride + i % R->width : R->base + i;
  int first = R->rank_first, step = R->rank_step > 0 ? R->rank_step : 1;
  int n = (gc_test_size - first + step - 1) / step; /* the ranks reduced */
  if (!gc__dtype_is_float(R->dtype)) {
    /* the test's integers are small: exact in int64 before wrapping */
    int64_t acc = (int64_t)gc_test_input(R->dtype, first, R->salt, idx);
    for (int r = first + step; r < gc_test_size; r += step) {
      int64_t x = (int64_t)gc_test_input(R->dtype, r, R->salt, idx);
      switch (R->op) {
        case GC_SUM: case GC_AVG: acc += x; break;
        case GC_PROD: acc *= x; break;
        case GC_MIN: acc = x < acc ? x : acc; break;
        case GC_MAX: acc = x > acc ? x : acc; break;
        default: break;
      }
    }
    if (R->op == GC_AVG) acc /= n;
    if (R->add) acc += (int64_t)gc__load_double(R->add, i, R->dtype);
    *ref = gc__dtype_is_float(R->out_dtype) ? (double)acc : (double)wrap_int(R->out_dtype, acc);
    *mag = fabs((double)acc);
    return;
  }
  double acc = gc_test_input(R->dtype, first, R->salt, idx), m = fabs(acc);
  for (int r = first + step; r < gc_test_size; r += step) {
    double x = gc_test_input(R->dtype, r, R->salt, idx);
    switch (R->op) {
      case GC_SUM: case GC_AVG: acc += x; m += fabs(x); break;
      case GC_PROD: acc *= x; m = fabs(acc); break;
      case GC_MIN: acc = x < acc ? x : acc; m = fabs(acc); break;
      case GC_MAX: acc = x > acc ? x : acc; m = fabs(acc); break;
      default: break;
    }
  }
  double s = R->op == GC_AVG ? R->scale / n : R->scale;
  acc *= s;
  m *= fabs(s);
  if (R->add) {
    double a = gc__load_double(R->add, i, R->dtype);
    acc += a;
    m += fabs(a);
  }
  *ref = acc;
  *mag = m;
}

/* precision p (bits incl. the implicit one) and smallest normal of each float type */
static void float_traits(gc_dtype_t dt, int *p, double *tiny, double *maxv) {
  *maxv = INFINITY;
  switch (dt) {
    case GC_FLOAT32: *p = 24; *tiny = FLT_MIN; break;
    case GC_FLOAT16: *p = 11; *tiny = ldexp(1, -14); break;
    case GC_BFLOAT16: *p = 8; *tiny = FLT_MIN; break;
    case GC_FLOAT64: *p = 53; *tiny = DBL_MIN; break;
    case GC_FP8_E4M3: *p = 4; *tiny = ldexp(1, -6); *maxv = 448; break;
    case GC_FP8_E5M2: *p = 3; *tiny = ldexp(1, -14); *maxv = 57344; break;
    default: *p = 64; *tiny = 0; break;
  }
}

int gc_test_close_ex(gc_dtype_t out_dtype, gc_dtype_t in_dtype, double got, double ref,
                     double mag) {
  if (isnan(got) || isnan(ref)) return 0;
  if (!gc__dtype_is_float(out_dtype)) return got == ref;
  int p, pin;
  double tiny, maxv, tiny_in, max_in;
  float_traits(out_dtype, &p, &tiny, &maxv);
  float_traits(in_dtype, &pin, &tiny_in, &max_in);
  if (ref > maxv) ref = maxv; /* fp8 outputs saturate */
  if (ref < -maxv) ref = -maxv;
  /* float accumulator for the 32- and 16-bit types, double for float64, exact for integers */
  double eps_acc = in_dtype == GC_FLOAT64 ? ldexp(1, -53)
                   : gc__dtype_is_float(in_dtype) ? ldexp(1, -24) : 0.0;
  double tol = 2.0 * ldexp(1, 1 - p) * fmax(fabs(ref), tiny) + (gc_test_size + 2) * eps_acc * mag;
  return fabs(got - ref) <= tol;
}

/* Every stride-th index below tail, then every index from tail on. */
static size_t next_index(size_t i, size_t stride, size_t tail) {
  if (i >= tail) return i + 1;
  return i + stride < tail ? i + stride : tail;
}

size_t gc_test_check_red(const char *what, const gc_test_red_t *R, const void *out, size_t count,
                         size_t stride) {
  size_t bad = 0;
  if (stride < 1) stride = 1;
  size_t tail = count > 64 ? count - 64 : 0; /* the last 64 are always checked */
  for (size_t i = 0; i < count; i = next_index(i, stride, tail)) {
    double ref, mag, got = gc__load_double(out, i, R->out_dtype);
    gc_test_red_ref(R, i, &ref, &mag);
    if (!gc_test_close_ex(R->out_dtype, R->dtype, got, ref, mag)) {
      if (bad < 5)
        fprintf(stderr, "[rank %d] %s: element %zu is %.17g, expected %.17g (%s %s -> %s)\n",
                gc_test_rank, what, i, got, ref, gc_dtype_name(R->dtype), gc_op_name(R->op),
                gc_dtype_name(R->out_dtype));
      bad++;
    }
  }
  return bad;
}

/* ---- across ranks ------------------------------------------------------------------------- */

int gc_test_all(int ok) {
  int in = ok ? 1 : 0, all = in;
  if (gc_test_size > 1) MPI_Allreduce(&in, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all;
}

int gc_test_same_on_all_ranks(const void *host_buf, size_t bytes) {
  if (gc_test_size == 1) return 1;
  const size_t piece_max = (size_t)64 << 20; /* bounded memory whatever the buffer size */
  size_t piece = bytes < piece_max ? bytes : piece_max;
  unsigned char *tmp = malloc(piece ? piece : 1);
  int same = tmp != NULL;
  if (!gc_test_all(same)) {
    free(tmp);
    return 0;
  }
  for (size_t off = 0; off < bytes; off += piece) {
    size_t n = bytes - off < piece ? bytes - off : piece;
    if (gc_test_rank == 0) memcpy(tmp, (const char *)host_buf + off, n);
    MPI_Bcast(tmp, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (same && memcmp(tmp, (const char *)host_buf + off, n) != 0) {
      size_t first = 0;
      while (first < n && tmp[first] == ((const unsigned char *)host_buf)[off + first]) first++;
      fprintf(stderr, "[rank %d] result differs from rank 0's at byte %zu\n", gc_test_rank,
              off + first);
      same = 0;
    }
  }
  free(tmp);
  return gc_test_all(same);
}

void gc_test_tmp_path(char *buf, size_t len, const char *name) {
  snprintf(buf, len, "/tmp/gpucoll-test-%llu-%s", (unsigned long long)gc_test_seed, name);
}

void gc_test_note(const char *fmt, ...) {
  if (gc_test_rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stdout, "\n    note: ");
  vfprintf(stdout, fmt, ap);
  fprintf(stdout, "\n");
  va_end(ap);
}

const gc_dtype_t gc_test_reducible[GC_TEST_NUM_REDUCIBLE] = {GC_FLOAT32, GC_FLOAT16, GC_BFLOAT16, GC_FLOAT64,
                                                             GC_INT32,   GC_INT64,   GC_UINT8};

int gc_test_peer_gpus(const char *what, int min_ranks) {
  int ready = 0;
  if (gc_test_on_gpu) GC_TEST_OK(gc_comm_p2p_ready(gc_test_comm, &ready));
  if (ready && gc_test_size >= min_ranks) return 1;
  gc_test_note("%s: needs %d+ GPUs with peer access (--gpu on a GPU host); skipped", what, min_ranks);
  return 0;
}

gc_algo_t gc_test_kernel_algo(void) {
  return strcmp(gc__param_str(GC_PARAM_ALGO), "mpi") == 0 ? GC_ALGO_ONESHOT : GC_ALGO_AUTO;
}

const char *gc_test_only[GC_TEST_MAX_ONLY];
int gc_test_nonly = 0;

void gc_test_add_suite(const char *name, const gc_test_case_t *tests) {
  CU_pSuite s = CU_add_suite(name, NULL, NULL);
  if (!s) {
    fprintf(stderr, "CU_add_suite(%s) failed: %s\n", name, CU_get_error_msg());
    return;
  }
  for (const gc_test_case_t *t = tests; t->name; t++) {
    int chosen = gc_test_nonly == 0;
    for (int i = 0; i < gc_test_nonly; i++) chosen |= strstr(t->name, gc_test_only[i]) != NULL;
    if (chosen && !CU_add_test(s, t->name, t->fn))
      fprintf(stderr, "CU_add_test(%s.%s) failed: %s\n", name, t->name, CU_get_error_msg());
  }
}

/* ---- CUDA graphs --------------------------------------------------------------------------- */

int gc_test_capture(void *stream, int begin, void **graph_exec) {
  if (begin) return cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal);
  cudaGraph_t g = NULL;
  cudaGraphExec_t exec = NULL;
  cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &g);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, g, 0);
  if (g) cudaGraphDestroy(g);
  if (e != cudaSuccess) fprintf(stderr, "[rank %d] capture: %s\n", gc_test_rank, cudaGetErrorString(e));
  *graph_exec = exec;
  return e;
}
int gc_test_replay(void *graph_exec, void *stream) {
  return cudaGraphLaunch((cudaGraphExec_t)graph_exec, (cudaStream_t)stream);
}
void gc_test_graph_destroy(void *graph_exec) {
  if (graph_exec) cudaGraphExecDestroy((cudaGraphExec_t)graph_exec);
}

int gc_test_finished(gc_comm_t comm, gc_result_t r, const char *what) {
  if (r == GC_SUCCESS) r = gc_synchronize(comm, NULL);
  if (r != GC_SUCCESS)
    fprintf(stderr, "[rank %d] %s: %s: %s\n", gc_test_rank, what, gc_result_name(r), gc_comm_last_error(comm));
  return r == GC_SUCCESS;
}
