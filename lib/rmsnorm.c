/* rmsnorm.c — the fused all-reduce + RMSNorm + FP8 quantisation: one kernel where the rows fit,
 * else the all-reduce then the normalisation, and a host path. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gc_entry.h"

/* ---- all-reduce + RMSNorm + FP8 ------------------------------------------------------------- */

/* The numerics a struct asks for: a version-1 struct ends before the field and keeps its meaning
 * (ROUNDED); -1 for a version this library does not know. Not validated otherwise. */
static int numerics_of(const gc_rmsnorm_fp8_t *m) {
  if (!m) return -1;
  if (m->version == 1) return GC_NORM_ROUNDED;
  return m->version == GC_RMSNORM_FP8_VERSION ? (int)m->numerics : -1;
}

static gc_result_t check_rmsnorm(gc_comm_t comm, const void *send, void *out, float *scales, size_t rows,
                                 size_t cols, gc_dtype_t dtype, const gc_rmsnorm_fp8_t *m) {
  if (!m) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce_rmsnorm_fp8: norm is NULL (use GC_RMSNORM_FP8_INIT)");
  if (m->version != 1 && m->version != GC_RMSNORM_FP8_VERSION)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT,
                   "gc_rmsnorm_fp8_t.version is %u, expected %u or 1 (use GC_RMSNORM_FP8_INIT)", m->version,
                   GC_RMSNORM_FP8_VERSION);
  const int numerics = numerics_of(m);
  if (numerics < 0 || numerics >= GC_NUM_NORM_NUMERICS)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "norm.numerics %d is not a gc_norm_numerics_t (GC_NORM_MAX, GC_NORM_ROUNDED)",
                   numerics);
  GC_CHECK(gc__check_dtype(comm, dtype, 1));
  if (!gc__rmsnorm_dtype(dtype))
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
      if (gc__overlaps(wr[w].p, wr[w].bytes, in[i].p, in[i].bytes))
        return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s overlaps %s", wr[w].name, in[i].name);
    }
    for (int v = 0; v < w; v++)
      if (wr[v].p && gc__overlaps(wr[w].p, wr[w].bytes, wr[v].p, wr[v].bytes))
        return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "%s overlaps %s", wr[w].name, wr[v].name);
  }
  return GC_SUCCESS;
}

/* The host's normalization of a row-major rows x cols matrix already reduced, the formulas of
 * gpucoll.h (those of kernels/rmsnorm.cu) in float, each step rounded in the order written:
 *   MAX      f = xs (float32, the sum not rounded); r = 1 / sqrt(sum f^2 / cols + epsilon);
 *            y = (f * r) * w; m = min(max |y|, scale_ub if > 0); scale = m / FP8_MAX;
 *            out = fp8(y * (scale ? 1 / scale : 0))
 *   ROUNDED  x = xs (the input dtype); r as above over x; scale = max(r * max |x * w| / FP8_MAX,
 *            1 / (FP8_MAX * 512)), then at most scale_ub if > 0; out = fp8(((x * r) * w) * (1 / scale))
 * The sums of squares go in column order (the kernel's in its block's order), so the last bit of
 * a scale may differ from the device path's. xdt: GC_FLOAT32 (MAX), else the input dtype. */
static void rmsnorm_fp8_host(const void *xs, gc_dtype_t xdt, size_t rows, size_t cols, gc_dtype_t dtype,
                             const gc_rmsnorm_fp8_t *m, int numerics, void *out, float *scales) {
  const float fp8_max = m->out_dtype == GC_FP8_E4M3 ? 448.0f : 57344.0f, least = 1.0f / (fp8_max * 512.0f);
  for (size_t i = 0; i < rows; i++) {
    const size_t base = i * cols;
    float ss = 0.0f, most = 0.0f;
    for (size_t j = 0; j < cols; j++) {
      const float v = (float)gc__load_double(xs, base + j, xdt), sq = v * v;
      const float w = (float)gc__load_double(m->gamma, j, dtype) + m->weight_offset, vw = fabsf(v * w);
      ss += sq;
      most = vw > most ? vw : most;
    }
    const float r = 1.0f / sqrtf(ss / (float)cols + m->epsilon);
    float scale;
    if (numerics == GC_NORM_MAX) {
      most = 0.0f;
      for (size_t j = 0; j < cols; j++) {
        const float xr = (float)gc__load_double(xs, base + j, xdt) * r;
        const float y = fabsf(xr * ((float)gc__load_double(m->gamma, j, dtype) + m->weight_offset));
        most = y > most ? y : most;
      }
      if (m->scale_ub > 0.0f && most > m->scale_ub) most = m->scale_ub;
      scale = most / fp8_max;
    } else {
      scale = r * most / fp8_max;
      if (scale < least) scale = least;
      if (m->scale_ub > 0.0f && scale > m->scale_ub) scale = m->scale_ub;
    }
    scales[i] = scale;
    const float inv_scale = scale == 0.0f ? 0.0f : 1.0f / scale;
    for (size_t j = 0; j < cols; j++) {
      const float xr = (float)gc__load_double(xs, base + j, xdt) * r;
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
  k.numerics = numerics_of(m) == GC_NORM_MAX ? GC_KNORM_MAX : GC_KNORM_ROUNDED;
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
 * element by element). ROUNDED keeps x in shared memory without residual_out; MAX keeps each
 * thread's float sums in registers (LL data is taken once), one pack a thread. */
static const char *rmsnorm_ll_refusal(gc_comm_t comm, const gc_options_t *o, size_t rows, size_t cols, size_t es,
                                      const gc_rmsnorm_fp8_t *m) {
  if (rows * cols * es > GC_LL_GEN_BYTES / (size_t)comm->local_size)
    return "every rank's input must fit its row of an LL generation (8 MB over the GPU count)";
  if (cols * es % 16) return "rows must be whole 16-byte packs (cols x element size a multiple of 16)";
  if (numerics_of(m) == GC_NORM_MAX) {
    gc_knorm_t k = knorm(m, rows, cols);
    k.mode = GC_KNORM_LL;
    rmsnorm_plan(comm, o, rows, cols, es, 0, &k);
    if ((cols * es / 16 + (size_t)k.parts - 1) / (size_t)k.parts > GC_KTHREADS)
      return "with numerics max a block's share of a row must be at most one 16-byte pack a thread (512 a block)";
    return NULL;
  }
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
  /* ROUNDED x: in residual_out, else in shared memory where a row fits, else in this rank's
   * publish half of staging, whose size then sets the chunks (one call into residual_out is
   * faster than chunks with x in staging). MAX keeps no x to read back: the kernel sums a
   * thread's further packs again from the inputs, which stay in place until its last barrier. */
  const int rounded = numerics_of(m) == GC_NORM_ROUNDED;
  const int x_shared = rounded && !m->residual_out && row_bytes <= GC_KNORM_SHARED_ROW;
  size_t chunk = rows;
  if (!in_zero || (rounded && !m->residual_out && !x_shared && !twoshot))
    chunk = gc__staging_half(comm->tp.staging_bytes) / row_bytes;
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
  *fits = chunk > 0 && (!twoshot || !rounded || row_bytes / (size_t)k.parts <= GC_KNORM_SHARED_ROW);
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
    k.x = m->residual_out && !twoshot ? (char *)m->residual_out + at
          : twoshot || x_shared || !rounded ? NULL
                                            : gc__staging_pub(comm, me);
    k.out = (char *)out + c0 * cols;
    k.scales = scales + c0;
    GC_CHECK(gc__launched(comm, gc_kernel_rmsnorm_fp8(&a, &k, stream), "all-reduce + RMSNorm"));
  }
  return GC_SUCCESS;
}

/* The normalizing kernel on x, the all-reduce's output on this GPU (float32 for MAX over half
 * inputs), storing x in the input dtype at keep (NULL: not) as it goes. */
static gc_result_t rmsnorm_local(gc_comm_t comm, const void *x, int x_float, void *keep, void *out, float *scales,
                                 size_t rows, size_t cols, gc_dtype_t dtype, const gc_rmsnorm_fp8_t *m,
                                 const gc_options_t *o, cudaStream_t stream) {
  gc_knorm_t k = knorm(m, rows, cols);
  gc__plan_t plan = rmsnorm_plan(comm, o, rows, cols, gc_dtype_size(dtype), (uintptr_t)x % 16 != 0, &k);
  gc_kargs_t a = gc__base_args(comm, &plan, o, dtype, GC_SUM);
  a.peers.nranks = 1;
  a.in[0] = x;
  k.x_float = x_float;
  k.x = keep;
  k.out = out;
  k.scales = scales;
  return gc__launched(comm, gc_kernel_rmsnorm_fp8(&a, &k, stream), "RMSNorm");
}

/* The all-reduce (with the residual as its add vector) into residual_out or a temporary, then the
 * normalization: a kernel on device buffers, the host loop on host buffers. MAX over half inputs
 * needs the float sum: the all-reduce writes float32 into a temporary (its epilogue adds the
 * residual in float and rounds once, to float32: the fused kernels' f), and residual_out
 * receives it in the input dtype from the normalization. */
static gc_result_t rmsnorm_composed(gc_comm_t comm, const void *send, void *out, float *scales, size_t rows,
                                    size_t cols, gc_dtype_t dtype, const gc_rmsnorm_fp8_t *m, const gc_options_t *o,
                                    int on_device, cudaStream_t stream) {
  const int numerics = numerics_of(m);
  const gc_dtype_t xdt = numerics == GC_NORM_MAX ? GC_FLOAT32 : dtype;
  const size_t count = rows * cols, bytes = count * gc_dtype_size(xdt);
  /* x, the all-reduce's output: residual_out, else a temporary. On the GPU also a temporary where
   * residual_out sits off 16 bytes on this rank, and the kernel stores x there as it goes: its
   * input's alignment decides its split of rows and the order of its sums, so it must be alike on
   * every rank for their results to be identical. */
  void *keep = m->residual_out, *tmp = NULL;
  const int keep_apart = keep && (xdt != dtype || (on_device && (uintptr_t)keep % 16 != 0));
  if (!keep || keep_apart) GC_CHECK(gc__scratch_alloc(comm, on_device, bytes, stream, &tmp));
  void *x = tmp ? tmp : keep;
  gc_options_t ao = *o;
  ao.add = m->residual;
  ao.out_dtype = xdt;
  gc_result_t rc = gc__allreduce_impl(send, x, count, dtype, GC_SUM, comm, stream, &ao, tmp && on_device);
  if (rc == GC_SUCCESS && on_device) {
    rc = rmsnorm_local(comm, x, xdt != dtype, keep_apart ? keep : NULL, out, scales, rows, cols, dtype, m, o, stream);
  } else if (rc == GC_SUCCESS) {
    rmsnorm_fp8_host(x, xdt, rows, cols, dtype, m, numerics, out, scales);
    for (size_t i = 0; keep_apart && i < count; i++) gc__store_double(keep, i, dtype, gc__load_double(x, i, xdt));
  }
  return gc__scratch_free(comm, on_device, tmp, stream, rc);
}

/* gc__check_same_call under GC_CHECK_CALLS=2, with rmsnorm's columns, result type, residuals
 * and numerics. */
static gc_result_t same_rmsnorm_call(gc_comm_t comm, const void *send, size_t rows, size_t cols, gc_dtype_t dtype,
                                     const gc_rmsnorm_fp8_t *m, const gc_options_t *opts) {
  if (comm->check_calls != GC_CHECK_EVERY_CALL) return GC_SUCCESS;
  gc__call_sig_t sig = gc__public_sig(comm, GC_CALL_RMSNORM, rows, dtype, GC_SUM, 0, opts, send, (gc__places_t){send, NULL, 0, 0});
  sig.v[GC_SIG_COLS] = cols;
  sig.v[GC_SIG_OUT_DTYPE] = m ? (uint64_t)(int64_t)m->out_dtype : UINT64_MAX;
  sig.v[GC_SIG_ADD] = m ? (m->residual != NULL) | (uint64_t)(m->residual_out != NULL) << 1 : 0;
  sig.v[GC_SIG_NUMERICS] = (uint64_t)(int64_t)numerics_of(m);
  return gc__same_call(comm, &sig);
}

/* All pointers on this rank's GPU (*device: how many), or all on the host. */
static gc_result_t rmsnorm_places(gc_comm_t comm, const void *send, const void *out, const float *scales,
                                  const gc_rmsnorm_fp8_t *m, int *device) {
  const void *ptrs[] = {send, out, scales, m->gamma, m->residual, m->residual_out};
  const char *names[] = {"sendbuf", "outbuf", "scales", "norm.gamma", "norm.residual", "norm.residual_out"};
  int host = 0;
  *device = 0;
  for (int i = 0; i < 6; i++) {
    if (!ptrs[i]) continue;
    gc__ptr_kind_t kind;
    GC_CHECK(gc__check_pointer(comm, ptrs[i], names[i], &kind));
    host += kind == GC_PTR_HOST;
    *device += kind == GC_PTR_DEVICE_OWN;
  }
  if (host && *device)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce_rmsnorm_fp8 takes all its pointers on this rank's GPU "
                                                  "or all on the host, not some of each");
  return GC_SUCCESS;
}

static gc_result_t rmsnorm_impl(const void *send, void *out, float *scales, size_t rows, size_t cols, gc_dtype_t dtype,
                                const gc_rmsnorm_fp8_t *m, gc_comm_t comm, void *stream, const gc_options_t *opts) {
  GC_CHECK(gc__comm_health(comm));
  GC_CHECK(same_rmsnorm_call(comm, send, rows, cols, dtype, m, opts));
  GC_CHECK(check_rmsnorm(comm, send, out, scales, rows, cols, dtype, m));
  gc_options_t o;
  GC_CHECK(gc__resolve_options(comm, opts, dtype, 1, &o));
  if (gc__has_epilogue(&o, dtype))
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_allreduce_rmsnorm_fp8 takes no epilogue in its options "
                                                  "(scale, add, out_dtype); the residual is norm.residual");
  if (rows == 0 || cols == 0) return GC_SUCCESS;
  int device;
  GC_CHECK(rmsnorm_places(comm, send, out, scales, m, &device));
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
    const char *why = rmsnorm_ll_refusal(comm, &o, rows, cols, es, m);
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
