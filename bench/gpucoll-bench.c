/* gpucoll-bench.c — nccl-tests-style benchmark of gpucoll's collectives (and of the fused all-reduce
 * + RMSNorm + FP8), with NCCL timed beside it on the same buffers (--vs nccl), correctness counted
 * on fresh random data, and a CSV out. */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "gpucoll.h"
#include "nccl_loader.h"
#include "timing.h"
#include "unfused_norm.h"
#include "watchdog.h"
/* Header-only and pure: the pattern gc_fill_random writes, so the float64 reference is exact. */
#include "gc_rng.h"

/* ---------------------------------------------------------------------------------------------
 * Constants of the method.
 * ------------------------------------------------------------------------------------------- */
/* H200's L2 is 60 MB: a buffer that fits would be served from L2 on the next call, so calls
 * rotate among sets until they have touched more than twice that. */
#define ROTATE_BYTES (128ull << 20)
/* The largest size -b, -e and -i take: 2^50 bytes (1048576G). */
#define MAX_SIZE ((double)(1ull << 50))
/* Cap on the sets; every set is used once per timed run, so this also bounds the iterations. */
#define MAX_SETS 512
/* Sets start on 4 KiB boundaries so every set has the alignment of the first. */
#define SET_ALIGN 4096ull
/* Above this size the iteration counts shrink in proportion, so one size stays near a second. */
#define ITER_SCALE_BYTES (256ull << 20)
/* Byte written over outputs before a checked call: NaN in every float type, and outside the
 * range of every integer result the pattern can produce (0x7F7F7F7F, 127 for uint8). */
#define POISON_BYTE 0x7F
/* Host chunk the poison is copied from. */
#define POISON_CHUNK (16ull << 20)

/* The columns: gpucoll, gpucoll over a compressed wire (--wire), the MPI library's own
 * collective (host buffers), NCCL in each -R mode. */
enum { LIB_GC, LIB_WIRE, LIB_MPI, LIB_NCCL0, LIB_NCCL1, LIB_NCCL2, NUM_LIBS };
#define IS_NCCL(lib) ((lib) >= LIB_NCCL0)
#define NCCL_MODE(lib) ((gcb_nccl_mode_t)((lib) - LIB_NCCL0))
enum { OOP, INPLACE, NUM_PLACEMENTS };
static const char *const lib_names[NUM_LIBS] = {"gpucoll", "gpucoll", "mpi", "nccl", "nccl", "nccl"};
static const char *const lib_titles[NUM_LIBS] = {"gpucoll", "gpucoll wire", "MPI", "nccl -R 0", "nccl -R 1", "nccl -R 2"};
static const char *const nccl_mode_names[GCB_NCCL_NUM_MODES] = {"plain", "registered", "symmetric"};
/* -a: how the ranks' times become one (nccl-tests' meaning). */
enum { AVG_RANK0, AVG_MEAN, AVG_MIN, AVG_MAX };
static const char *const placement_names[NUM_PLACEMENTS] = {"out-of-place", "in-place"};
/* The bench's collectives: the loader's four, which NCCL runs too, then the fused all-reduce +
 * RMSNorm + FP8 quantization, which NCCL has no counterpart of (--vs nccl times its all-reduce),
 * then the two mixed TP x DP operations of a gc_mixed_t (--vs nccl: NCCL's two collectives on
 * the same TP and DP groups). */
enum { COLL_RMSNORM = GCB_NUM_COLLS, COLL_AR_AG, COLL_RS_AR, NUM_COLLS };
static const char *const coll_names[NUM_COLLS] = {"allreduce", "reducescatter", "allgather", "broadcast",
                                                  "rmsnorm", "allreduce_allgather", "reducescatter_allreduce"};
#define COLL_LIST "allreduce reducescatter allgather broadcast rmsnorm allreduce_allgather reducescatter_allreduce"
#define IS_MIXED(coll) ((coll) == COLL_AR_AG || (coll) == COLL_RS_AR)
#define LAYOUT_FLAGS "--local-tp, --local-dp, --inter-tp and --inter-dp"

static const int dtype_reducible[GC_NUM_DTYPES] = {
#define BENCH_DTYPE_RED(name, str, size, reducible) reducible,
    GC_DTYPE_MAP(BENCH_DTYPE_RED)
#undef BENCH_DTYPE_RED
};

typedef struct options {
  size_t min_bytes, max_bytes, step_bytes;
  double step_factor;
  double timeout_s; /* -T: bound on one size of one library and placement (0: none) */
  int iters, warmup, check, blocking, root, max_blocks, host, eager, vs_nccl;
  int graph;     /* -G: launches of a graph that captured the -n iterations (0: no graph) */
  int agg;       /* -m: calls per iteration (NCCL's in one group) */
  int average;   /* -a: AVG_RANK0 .. AVG_MAX */
  int cycles;    /* -N: passes over every size (0: until stopped) */
  int cputime;   /* -C: report the host time to enqueue instead of the GPU time */
  int nccl_modes; /* -R: bit m for gcb_nccl_mode_t m */
  gc_dtype_t dtype; /* the one in progress, from dtypes */
  gc_op_t op;       /* the one in progress, from ops */
  gc_dtype_t dtypes[GC_NUM_DTYPES];
  gc_op_t ops[GC_NUM_OPS];
  int ndtypes, nops, all_dtypes, all_ops;
  gc_algo_t algo;
  int coll; /* a gcb_coll_t or COLL_RMSNORM */
  size_t cols;  /* rmsnorm: elements per row */
  int residual; /* rmsnorm: add a residual and keep x in residual_out */
  int nccl_alone; /* rmsnorm --vs nccl: NCCL's all-reduce alone instead of the unfused pipeline */
  gc_norm_numerics_t numerics; /* rmsnorm: --numerics (GC_NORM_MAX, the library's default) */
  const char *csv;
  const char *tune_file; /* --tuned: dispatch rows to load (gc_tune_load) */
  const char *autotune_file; /* --autotune: where the rows gc_autotune finds go (gc_tune_save) */
  uint64_t seed;
  int seed_set;
  gc_wire_t wire; /* --wire: the wire column's format (GC_WIRE_NATIVE: no such column) */
  int wire_group; /* --wire-group: fp8's group (0 = 32) */
  gc_mixed_config_t layout; /* --local-tp ...: the mixed collectives' sizes (0: FlashInfer's defaults) */
  int layout_set;           /* one of those flags was given */
} options_t;

typedef struct result {
  double us, algbw, busbw; /* us < 0: not run */
  long long wrong; /* -1: not checked */
  double max_err, mean_err; /* --wire: |result - float64 reference| over all ranks; < 0: not measured */
} result_t;

/* Where rmsnorm's buffers lie in a set (byte offsets, each on a 256-byte boundary so that rows
 * keep the 16-byte alignment the kernel's vector loads want): the send region holds the input,
 * then the residual (--residual); the receive region the fp8 rows, the row scales, residual_out,
 * then for --vs nccl the NCCL all-reduce's output (sum) and the unfused RMSNorm's output (y),
 * which the baseline writes and the fused op does not have. */
typedef struct rms_layout {
  size_t rows, count; /* count = rows x cols elements */
  size_t residual_at, send_bytes;
  size_t scales_at, residual_out_at, sum_at, y_at, recv_bytes;
} rms_layout_t;

typedef struct bench {
  options_t o;
  gc_comm_t comm;
  gcb_nccl_t *nccl;
  gcb_watchdog_t *watchdog; /* NULL unless -T or NCCL is on */
  void *stream;
  int rank, nranks, on_gpu;
  int nccl_ok[GCB_NCCL_NUM_MODES]; /* the modes this NCCL has, among -R's */
  int active[NUM_LIBS];            /* the columns of the combination in progress */
  char device_name[64];            /* rank 0's GPU model, or "host" */
  char mpi_version[64];
  size_t elt;
  /* Each column's pools (MPI's are gpucoll's host buffers) and NCCL's registrations of them. */
  char *send_pools[NUM_LIBS], *recv_pools[NUM_LIBS];
  void *send_reg[NUM_LIBS], *recv_reg[NUM_LIBS];
  size_t send_pool_bytes, recv_pool_bytes;
  char *gamma;           /* rmsnorm: --cols weights, shared by every set */
  unsigned char *host;   /* output copy for the check (pinned where there is a GPU) */
  unsigned char *poison; /* POISON_CHUNK bytes of POISON_BYTE */
  size_t poison_bytes;
  FILE *csv;
  /* The size in progress. */
  size_t param_count, send_elems, recv_elems, bytes;
  size_t send_stride, recv_stride;
  int nsets;
  uint64_t size_seed;
  rms_layout_t rms;
  double max_err, mean_err; /* the last check's errors (--wire) */
  /* The mixed collectives (NULL mixed: another collective): the layout, this rank's place in it,
   * tp_groups[d * tp_size + t] = the world rank of dp_rank d and tp_rank t, and the TP and DP
   * groups as MPI communicators (the MPI column) and NCCL's (--vs nccl). */
  gc_mixed_t mixed;
  gc_mixed_layout_t at;
  int *tp_groups;
  MPI_Comm tp_mpi, dp_mpi;
  gcb_nccl_t *nccl_tp, *nccl_dp;
} bench_t;

/* ---------------------------------------------------------------------------------------------
 * Messages: rank 0 prints results; any rank prints its own errors, prefixed with its rank.
 * ------------------------------------------------------------------------------------------- */
static int g_rank;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gpucoll-bench: rank %d: ", g_rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stderr);
  /* A collective is half done on the other ranks; only an abort frees them. */
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* What went wrong: the library's message (it starts with the result's name), else the name. */
static const char *failure(gc_comm_t comm, gc_result_t r) {
  const char *msg = gc_comm_last_error(comm);
  return msg[0] ? msg : gc_result_name(r);
}

#define GC_OK(b, call)                                                                          \
  do {                                                                                          \
    gc_result_t r_ = (call);                                                                    \
    if (r_ != GC_SUCCESS) die("%s: %s (%s)", #call, failure((b)->comm, r_), gc_strerror(r_));  \
  } while (0)

/* Every MPI call is checked: a failure ends the whole job with the call's name. */
#define MPI_OK(call)                                                                            \
  do {                                                                                          \
    int mpi_e_ = (call);                                                                        \
    if (mpi_e_ != MPI_SUCCESS) die("%s failed (MPI error %d)", #call, mpi_e_);                  \
  } while (0)

/* -h's second half: gpucoll's own flags, rmsnorm's and the mixed collectives'. */
static void usage_own(FILE *f);

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpucoll-bench [COLL] [options]   (run under mpirun, one rank per GPU)\n"
          "  COLL, --coll C         allreduce | reducescatter | allgather | broadcast | rmsnorm |\n"
          "                         allreduce_allgather | reducescatter_allreduce (allreduce;\n"
          "                         rmsnorm: all-reduce + RMSNorm + FP8; the last two: the mixed\n"
          "                         TP x DP operations of a gc_mixed_t; see below)\n"
          "nccl-tests' flags, with nccl-tests' meanings:\n"
          "  -b, --minbytes N       smallest size, K/M/G suffixes (32M)\n"
          "  -e, --maxbytes N       largest size (32M)\n"
          "  -i, --stepbytes N      add N bytes each step (1M; used when -f is 1)\n"
          "  -f, --stepfactor F     multiply the size by F each step (2)\n"
          "  -g, --ngpus N          GPUs per rank: 1 only (gpucoll runs one rank per GPU)\n"
          "  -t, --nthreads N       threads per rank: 1 only\n"
          "  -w, --warmup_iters N   untimed iterations first (5)\n"
          "  -n, --iters N          timed iterations per size (20; fewer above 256 MB, more\n"
          "                         where buffer sets rotate, so every set is used)\n"
          "  -m, --agg_iters N      calls per iteration (1; NCCL's in one ncclGroupStart/End)\n"
          "  -c, --check 0/1        count wrong elements on fresh random data (1)\n"
          "  -o, --op OP            sum prod min max avg, or all (sum)\n"
          "  -d, --datatype T       float32 float16 bfloat16 float64 int32 int64 uint8\n"
          "                         fp8_e4m3 fp8_e5m2 (also float, half, bf16), or all (float32)\n"
          "  -r, --root R           broadcast root (0)\n"
          "  -a, --average 0..3     time printed: rank 0's (0), the mean over ranks (1, the\n"
          "                         default), the minimum (2), the maximum (3)\n"
          "  -z, --blocking 0/1     synchronize after every iteration (0)\n"
          "  -G, --cudagraph N      capture the -n iterations in a CUDA graph and time N\n"
          "                         launches of it (0: no graph)\n"
          "  -N, --run_cycles N     run every size N times, printing each (1; 0: until stopped)\n"
          "  -C, --report_cputime 0/1  print the host time to enqueue instead of the GPU time\n"
          "  -R, --local_register M NCCL's buffers with --vs nccl: 0 plain cudaMalloc, 1\n"
          "                         ncclMemAlloc + ncclCommRegister, 2 ncclMemAlloc +\n"
          "                         ncclCommWindowRegister (symmetric kernels), all = the three (0)\n"
          "  -T, --timeout S        end the run, exit status 124, when one size of one column\n"
          "                         and placement (check, warm-up, timed calls) takes more than\n"
          "                         S seconds (0 = no bound, the default; gpucoll's own waits\n"
          "                         are bounded anyway by GC_TIMEOUT_MS). With --vs nccl the\n"
          "                         run also ends at NCCL's first asynchronous error\n");
  usage_own(f);
}

static void usage_own(FILE *f) {
  fprintf(f,
          "gpucoll's own:\n"
          "  --algo A               auto oneshot twoshot ... (gc_algo_name's list; auto) (rmsnorm:\n"
          "                         oneshot_ll, oneshot, twoshot = the fused kernels, any other =\n"
          "                         that all-reduce, then a normalizing kernel; see gpucoll.h)\n"
          "  --max-blocks N         cap on gpucoll's grid (0 = dispatch table)\n"
          "  --wire W               allreduce: a column over the compressed wire W (fp8, bf16;\n"
          "                         options.wire) beside the native one; both print the largest\n"
          "                         and the mean |error| against the float64 reference, the\n"
          "                         wire's #wrong counts elements past docs/wire-format.md's\n"
          "                         bound; bandwidths count input bytes (-o sum or avg)\n"
          "  --wire-group G         fp8's elements per scale: 32, 64 or 128 (32)\n"
          "  --vs nccl              time NCCL beside gpucoll (rmsnorm: NCCL's all-reduce, then\n"
          "                         separate RMSNorm and quantization kernels)\n"
          "  --csv FILE             one row per (size, placement, column) with every figure\n"
          "  --host                 host buffers and the MPI path even where GPUs are present;\n"
          "                         the MPI library's own collective is timed beside gpucoll\n"
          "  --eager                plain gc_buffer_alloc buffers (copy-in) instead of gc_mem_alloc\n"
          "  --seed S               seed of the random data (default: from the clock)\n"
          "  --autotune FILE        run gc_autotune up to -e bytes of -d (a reducible type)\n"
          "                         first, save its rows to FILE (gc_tune_save), time with them\n"
          "  --tuned FILE           time with the dispatch rows in FILE (gc_tune_load; not\n"
          "                         --tune, which mpirun takes for itself wherever it stands)\n"
          "  -h, --help             this text\n"
          "rmsnorm (gc_allreduce_rmsnorm_fp8: rows x cols inputs summed over the ranks, each row\n"
          "RMS-normalized, times gamma, quantized to fp8_e4m3 with one scale per row; float32,\n"
          "float16 or bfloat16, -o sum; no in-place form; gamma random, epsilon 1e-6):\n"
          "  --cols N               elements per row (8192); a size is rows x cols x dtype bytes,\n"
          "                         rows = max(1, size / (cols x dtype bytes))\n"
          "  --residual             add a random residual and keep the sum in a residual_out\n"
          "  --nccl-baseline B      what --vs nccl times: unfused (NCCL's all-reduce, an RMSNorm\n"
          "                         kernel, a per-row FP8 quantization kernel; the default) or\n"
          "                         allreduce (NCCL's all-reduce alone)\n"
          "  --numerics N           max (the float32 sum normalized, as Modular MAX; the default) or\n"
          "                         rounded (the sum rounded to the input dtype first; gpucoll.h)\n"
          "allreduce_allgather, reducescatter_allreduce (gc_mixed_allreduce_allgather: the input\n"
          "all-reduced over the TP group, then gathered over the DP group; gc_mixed_reducescatter_\n"
          "allreduce: reduce-scatter over the DP group, then all-reduce over the TP group; a size is\n"
          "the larger buffer, dp_size x count; the MPI column and --vs nccl run the same two steps\n"
          "on the same groups, NCCL with -R 0 only; TP and DP must both be above 1):\n"
          "  --local-tp N           TP ranks of one node (0 = FlashInfer's default, as all four)\n"
          "  --local-dp N           DP ranks of one node\n"
          "  --inter-tp N           nodes one TP group spans (nodes: hosts, or GC_LOCAL_SIZE ranks)\n"
          "  --inter-dp N           nodes one DP group spans; both of a pair 0: TP takes the level,\n"
          "                         one 0: the other divides it (gpucoll.h, docs/mixed.md)\n"
          "Exit status: 0 all correct, 1 usage error or wrong results, 124 -T ran out.\n");
}

static int parse_size(const char *s, size_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return 1;
  switch (*end) {
    case 'k': case 'K': v *= 1024.0; end++; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; end++; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; end++; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end || !(v <= MAX_SIZE)) return 1; /* also NaN; past it the size loop's arithmetic could wrap */
  *out = (size_t)v;
  return 0;
}

static int parse_int(const char *s, int lo, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo || v > 1 << 30) return 1;
  *out = (int)v;
  return 0;
}

/* A number from lo to hi (so not NaN nor infinite). */
static int parse_real(const char *s, double lo, double hi, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v >= lo && v <= hi)) return 1;
  *out = v;
  return 0;
}

static int parse_coll(const char *s, int *out) {
  for (int c = 0; c < NUM_COLLS; c++) {
    if (strcmp(s, coll_names[c]) == 0) {
      *out = c;
      return 0;
    }
  }
  /* nccl-tests' binary names, for muscle memory. */
  if (!strcmp(s, "all_reduce")) *out = GCB_ALLREDUCE;
  else if (!strcmp(s, "reduce_scatter")) *out = GCB_REDUCESCATTER;
  else if (!strcmp(s, "all_gather")) *out = GCB_ALLGATHER;
  else if (!strcmp(s, "bcast")) *out = GCB_BROADCAST;
  else return 1;
  return 0;
}

static int parse_dtype(const char *s, options_t *o) {
  o->all_dtypes = !strcmp(s, "all");
  o->ndtypes = 1;
  return !o->all_dtypes && gc_dtype_from_name(s, &o->dtypes[0]) != GC_SUCCESS;
}

static int parse_op(const char *s, options_t *o) {
  o->all_ops = !strcmp(s, "all");
  o->nops = 1;
  return !o->all_ops && gc_op_from_name(s, &o->ops[0]) != GC_SUCCESS;
}

/* -R 0, 1, 2 or all: a bit per NCCL buffer mode. */
static int parse_modes(const char *s, int *mask) {
  int m;
  if (!strcmp(s, "all")) *mask = (1 << GCB_NCCL_NUM_MODES) - 1;
  else if (parse_int(s, 0, &m) || m >= GCB_NCCL_NUM_MODES) return 1;
  else *mask = 1 << m;
  return 0;
}

static int is_reduction(int coll) {
  return coll == GCB_ALLREDUCE || coll == GCB_REDUCESCATTER || coll == COLL_RMSNORM || IS_MIXED(coll);
}

/* reducescatter_allreduce's GC_AVG of these sums in two steps, whose partial sums would wrap:
 * the library refuses it (gpucoll.h). */
static int avg_wraps(int coll, gc_dtype_t dt, gc_op_t op) {
  return coll == COLL_RS_AR && op == GC_AVG && (dt == GC_INT32 || dt == GC_UINT8);
}

/* -d all and -o all, once the collective is known: the types and ops it takes. */
static void expand_lists(options_t *o) {
  if (o->all_dtypes) {
    o->ndtypes = 0;
    for (int d = 0; d < GC_NUM_DTYPES; d++) {
      int fits = o->coll == COLL_RMSNORM ? d == GC_FLOAT32 || d == GC_FLOAT16 || d == GC_BFLOAT16
                 : is_reduction(o->coll) ? dtype_reducible[d]
                                         : 1;
      if (fits) o->dtypes[o->ndtypes++] = (gc_dtype_t)d;
    }
  }
  if (o->all_ops) {
    o->nops = 0;
    if (o->coll == COLL_RMSNORM || !is_reduction(o->coll)) o->ops[o->nops++] = GC_SUM;
    else
      for (int p = 0; p < GC_NUM_OPS; p++) o->ops[o->nops++] = (gc_op_t)p;
  }
  o->dtype = o->dtypes[0];
  o->op = o->ops[0];
}

/* The checks across flags, after parsing: a reason, with the offending value in *arg, or NULL. */
/* --wire: the all-reduce of float data, summed or averaged; --wire-group for fp8 only. */
static const char *check_wire_args(const options_t *o, const char **arg) {
  if (o->wire == GC_WIRE_NATIVE) return o->wire_group ? "--wire-group needs --wire fp8" : NULL;
  if (o->coll != GCB_ALLREDUCE) return "--wire applies to allreduce only";
  if (o->wire_group && o->wire != GC_WIRE_FP8) return "--wire-group needs --wire fp8";
  if (o->all_ops || (o->ops[0] != GC_SUM && o->ops[0] != GC_AVG)) return "--wire takes -o sum or avg";
  const gc_dtype_t d = o->dtypes[0];
  if (o->all_dtypes || (d != GC_FLOAT32 && (o->wire == GC_WIRE_BF16 || (d != GC_FLOAT16 && d != GC_BFLOAT16)))) {
    *arg = o->all_dtypes ? "all" : gc_dtype_name(d);
    return o->wire == GC_WIRE_BF16 ? "--wire bf16 takes -d float32" : "--wire fp8 takes -d float32, float16 or bfloat16";
  }
  return NULL;
}

/* The mixed collectives: the layout's flags for them only; NCCL's plain buffers (-R 1 and 2
 * register a buffer with one NCCL communicator, and their baseline runs on two); no dispatch rows
 * of the communicator (the TP and DP groups dispatch by their own); no average that wraps. */
static const char *check_mixed_args(const options_t *o, const char **arg) {
  if (!IS_MIXED(o->coll))
    return o->layout_set ? LAYOUT_FLAGS " apply to allreduce_allgather and reducescatter_allreduce only" : NULL;
  if (o->nccl_modes != 1 << GCB_NCCL_PLAIN)
    return "-R 1 and 2 register buffers with one NCCL communicator; the mixed collectives' NCCL "
           "columns run on two (TP and DP): -R 0 only";
  if (o->tune_file || o->autotune_file)
    return "--tuned and --autotune set the communicator's dispatch rows, which the TP and DP groups "
           "of the mixed collectives do not use";
  if (!o->all_dtypes && !o->all_ops && avg_wraps(o->coll, o->dtypes[0], o->ops[0])) {
    *arg = gc_dtype_name(o->dtypes[0]);
    return "reducescatter_allreduce -o avg would wrap this type's partial sums (use int64, or -o sum)";
  }
  return NULL;
}

static const char *check_args(const options_t *o, int cols_set, int baseline_set, int modes_set,
                              const char **arg) {
  *arg = NULL;
  if (o->min_bytes > o->max_bytes) return "-b is larger than -e";
  if (o->min_bytes == 0) return "-b must be at least one element";
  if (modes_set && !o->vs_nccl) return "-R picks NCCL's buffers: add --vs nccl";
  if (!o->all_dtypes && is_reduction(o->coll) && o->coll != COLL_RMSNORM && !dtype_reducible[o->dtypes[0]]) {
    *arg = gc_dtype_name(o->dtypes[0]);
    return "this datatype cannot be reduced (fp8 works with allgather and broadcast)";
  }
  if (!o->all_dtypes && o->coll == COLL_RMSNORM && o->dtypes[0] != GC_FLOAT32 &&
      o->dtypes[0] != GC_FLOAT16 && o->dtypes[0] != GC_BFLOAT16) {
    *arg = gc_dtype_name(o->dtypes[0]);
    return "rmsnorm takes float32, float16 or bfloat16";
  }
  if (!o->all_ops && o->coll == COLL_RMSNORM && o->ops[0] != GC_SUM) {
    *arg = gc_op_name(o->ops[0]);
    return "rmsnorm sums over the ranks (-o sum)";
  }
  if (o->coll != COLL_RMSNORM && (cols_set || o->residual || baseline_set))
    return "--cols, --residual, --nccl-baseline and --numerics apply to rmsnorm only";
  if (o->tune_file && o->autotune_file) return "--tuned and --autotune exclude each other";
  if (o->autotune_file && (o->all_dtypes || !dtype_reducible[o->dtypes[0]]))
    return "--autotune times reductions too: -d must be one reducible type";
  if (o->graph && o->blocking) return "-z 1 synchronizes inside the loop, which -G cannot capture";
  const char *why = check_mixed_args(o, arg);
  return why ? why : check_wire_args(o, arg);
}

enum { OPT_COLL = 256, OPT_VS, OPT_CSV, OPT_HOST, OPT_EAGER, OPT_SEED, OPT_COLS, OPT_RESIDUAL,
      OPT_BASELINE, OPT_TUNE, OPT_AUTOTUNE, OPT_ALGO, OPT_MAX_BLOCKS, OPT_WIRE, OPT_WIRE_GROUP, OPT_NUMERICS,
      OPT_LOCAL_TP, OPT_LOCAL_DP, OPT_INTER_TP, OPT_INTER_DP };

static const struct option longopts[] = {
    {"minbytes", required_argument, 0, 'b'},     {"maxbytes", required_argument, 0, 'e'},
    {"stepbytes", required_argument, 0, 'i'},    {"stepfactor", required_argument, 0, 'f'},
    {"ngpus", required_argument, 0, 'g'},        {"nthreads", required_argument, 0, 't'},
    {"iters", required_argument, 0, 'n'},        {"warmup_iters", required_argument, 0, 'w'},
    {"agg_iters", required_argument, 0, 'm'},    {"check", required_argument, 0, 'c'},
    {"datatype", required_argument, 0, 'd'},     {"op", required_argument, 0, 'o'},
    {"root", required_argument, 0, 'r'},         {"average", required_argument, 0, 'a'},
    {"blocking", required_argument, 0, 'z'},     {"cudagraph", required_argument, 0, 'G'},
    {"run_cycles", required_argument, 0, 'N'},   {"report_cputime", required_argument, 0, 'C'},
    {"local_register", required_argument, 0, 'R'}, {"timeout", required_argument, 0, 'T'},
    {"help", no_argument, 0, 'h'},               {"coll", required_argument, 0, OPT_COLL},
    {"algo", required_argument, 0, OPT_ALGO},    {"max-blocks", required_argument, 0, OPT_MAX_BLOCKS},
    {"vs", required_argument, 0, OPT_VS},        {"csv", required_argument, 0, OPT_CSV},
    {"host", no_argument, 0, OPT_HOST},          {"eager", no_argument, 0, OPT_EAGER},
    {"seed", required_argument, 0, OPT_SEED},    {"cols", required_argument, 0, OPT_COLS},
    {"residual", no_argument, 0, OPT_RESIDUAL},  {"nccl-baseline", required_argument, 0, OPT_BASELINE},
    {"tuned", required_argument, 0, OPT_TUNE},   {"autotune", required_argument, 0, OPT_AUTOTUNE},
    {"wire", required_argument, 0, OPT_WIRE},    {"wire-group", required_argument, 0, OPT_WIRE_GROUP},
    {"numerics", required_argument, 0, OPT_NUMERICS}, {"local-tp", required_argument, 0, OPT_LOCAL_TP},
    {"local-dp", required_argument, 0, OPT_LOCAL_DP}, {"inter-tp", required_argument, 0, OPT_INTER_TP},
    {"inter-dp", required_argument, 0, OPT_INTER_DP},
    {0, 0, 0, 0}};

/* --local-tp, --local-dp, --inter-tp, --inter-dp: one size of the mixed layout. */
static const char *parse_layout(int c, const char *v, options_t *o) {
  gc_mixed_config_t *l = &o->layout;
  int *size = c == OPT_LOCAL_TP ? &l->local_tp_size
              : c == OPT_LOCAL_DP ? &l->local_dp_size
              : c == OPT_INTER_TP ? &l->inter_tp_size
                                  : &l->inter_dp_size;
  o->layout_set = 1;
  return parse_int(v, 0, size) ? LAYOUT_FLAGS " want a size >= 0 (0: FlashInfer's default)" : NULL;
}

/* One flag and its value; returns the reason when the value is bad, else NULL. */
static const char *parse_flag(int c, const char *v, options_t *o, int *cols_set, int *baseline_set,
                              int *modes_set) {
  int one = 1;
  switch (c) {
    case 'b': return parse_size(v, &o->min_bytes) ? "-b wants a size (8, 1K, 64M; at most 1048576G)" : NULL;
    case 'e': return parse_size(v, &o->max_bytes) ? "-e wants a size (8, 1K, 64M; at most 1048576G)" : NULL;
    case 'i': return parse_size(v, &o->step_bytes) || o->step_bytes == 0 ? "-i wants a size > 0" : NULL;
    case 'f': return parse_real(v, 1.0, 1024.0, &o->step_factor) ? "-f wants a factor from 1 to 1024" : NULL;
    case 'g': return parse_int(v, 1, &one) || one != 1 ? "-g: gpucoll drives one GPU per rank; run one rank per GPU (-g 1)" : NULL;
    case 't': return parse_int(v, 1, &one) || one != 1 ? "-t: gpucoll-bench runs one thread per rank (-t 1); run more ranks instead" : NULL;
    case 'n': return parse_int(v, 1, &o->iters) ? "-n wants an integer >= 1" : NULL;
    case 'w': return parse_int(v, 0, &o->warmup) ? "-w wants an integer >= 0" : NULL;
    case 'm': return parse_int(v, 1, &o->agg) ? "-m wants an integer >= 1" : NULL;
    case 'c': return parse_int(v, 0, &o->check) || o->check > 1 ? "-c wants 0 or 1" : NULL;
    case 'd': return parse_dtype(v, o) ? "unknown datatype (see -h)" : NULL;
    case 'o': return parse_op(v, o) ? "unknown op (sum prod min max avg all)" : NULL;
    case 'r': return parse_int(v, 0, &o->root) ? "-r wants a rank >= 0" : NULL;
    case 'a': return parse_int(v, 0, &o->average) || o->average > AVG_MAX ? "-a wants 0, 1, 2 or 3" : NULL;
    case 'z': return parse_int(v, 0, &o->blocking) || o->blocking > 1 ? "-z wants 0 or 1" : NULL;
    case 'G': return parse_int(v, 0, &o->graph) ? "-G wants a number of graph launches >= 0" : NULL;
    case 'N': return parse_int(v, 0, &o->cycles) ? "-N wants a number of cycles >= 0" : NULL;
    case 'C': return parse_int(v, 0, &o->cputime) || o->cputime > 1 ? "-C wants 0 or 1" : NULL;
    case 'R': *modes_set = 1; return parse_modes(v, &o->nccl_modes) ? "-R wants 0, 1, 2 or all" : NULL;
    case 'T': return parse_real(v, 0.0, 1e6, &o->timeout_s) ? "-T wants seconds from 0 to 1000000" : NULL;
    case OPT_COLL: return parse_coll(v, &o->coll) ? "unknown collective (" COLL_LIST ")" : NULL;
    case OPT_ALGO: return gc_algo_from_name(v, &o->algo) != GC_SUCCESS ? "unknown algorithm (see -h)" : NULL;
    case OPT_MAX_BLOCKS:
      return parse_int(v, 0, &o->max_blocks) || o->max_blocks > 256 ? "--max-blocks wants 0 to 256 (the kernels' most)"
                                                                     : NULL;
    case OPT_NUMERICS:
      *baseline_set = 1; /* rmsnorm only, as --nccl-baseline */
      return gc_norm_numerics_from_name(v, &o->numerics) != GC_SUCCESS ? "--numerics is max or rounded" : NULL;
    case OPT_VS: o->vs_nccl = 1; return strcmp(v, "nccl") ? "--vs knows only nccl" : NULL;
    case OPT_CSV: o->csv = v; return NULL;
    case OPT_WIRE: return gc_wire_from_name(v, &o->wire) != GC_SUCCESS ? "--wire is native, fp8 or bf16" : NULL;
    case OPT_WIRE_GROUP:
      return parse_int(v, 1, &o->wire_group) || (o->wire_group != 32 && o->wire_group != 64 && o->wire_group != 128)
                 ? "--wire-group is 32, 64 or 128"
                 : NULL;
    case OPT_LOCAL_TP: case OPT_LOCAL_DP: case OPT_INTER_TP: case OPT_INTER_DP: return parse_layout(c, v, o);
    case OPT_HOST: o->host = 1; return NULL;
    case OPT_EAGER: o->eager = 1; return NULL;
    case OPT_RESIDUAL: o->residual = 1; return NULL;
    case OPT_TUNE: o->tune_file = v; return NULL;
    case OPT_AUTOTUNE: o->autotune_file = v; return NULL;
    case OPT_COLS: *cols_set = 1; return parse_size(v, &o->cols) || o->cols == 0 ? "--cols wants a count > 0" : NULL;
    case OPT_BASELINE:
      *baseline_set = 1;
      o->nccl_alone = !strcmp(v, "allreduce");
      return !o->nccl_alone && strcmp(v, "unfused") ? "--nccl-baseline is unfused or allreduce" : NULL;
    case OPT_SEED: {
      char *end;
      o->seed = strtoull(v, &end, 0);
      o->seed_set = 1;
      return end == v || *end ? "--seed wants an integer" : NULL;
    }
    default: return "unknown option or missing value";
  }
}

/* Returns 0 to run, 1 after -h, 2 on a usage error (one line, printed by rank 0). */
static int parse_args(int argc, char **argv, options_t *o) {
  *o = (options_t){.min_bytes = 32u << 20, .max_bytes = 32u << 20, .step_bytes = 1u << 20,
                   .step_factor = 2.0, .iters = 20, .warmup = 5, .check = 1, .agg = 1,
                   .average = AVG_MEAN, .cycles = 1, .nccl_modes = 1 << GCB_NCCL_PLAIN,
                   .dtypes = {GC_FLOAT32}, .ndtypes = 1, .ops = {GC_SUM}, .nops = 1,
                   .algo = GC_ALGO_AUTO, .coll = GCB_ALLREDUCE, .cols = 8192,
                   .layout = GC_MIXED_CONFIG_INIT};
  int cols_set = 0, baseline_set = 0, modes_set = 0, c;
  const char *why = NULL, *arg = NULL;
  opterr = 0;
  /* '+': stop at the first word that is no flag, the collective, which may stand anywhere. */
  while (!why) {
    c = getopt_long(argc, argv, "+b:e:i:f:g:t:n:w:m:c:d:o:r:a:z:G:N:C:R:T:h", longopts, NULL);
    if (c == -1) {
      if (optind >= argc) break;
      arg = argv[optind];
      if (parse_coll(argv[optind++], &o->coll)) why = "unknown collective (" COLL_LIST ") or stray argument";
      continue;
    }
    if (c == 'h') {
      if (g_rank == 0) usage(stdout);
      return 1;
    }
    arg = c == '?' ? argv[optind - 1] : optarg;
    why = parse_flag(c, optarg, o, &cols_set, &baseline_set, &modes_set);
  }
  if (!why) why = check_args(o, cols_set, baseline_set, modes_set, &arg);
  if (why) {
    if (g_rank == 0)
      fprintf(stderr, "gpucoll-bench: %s%s%s (gpucoll-bench -h lists the flags)\n", why, arg ? ": " : "",
              arg ? arg : "");
    return 2;
  }
  expand_lists(o);
  return 0;
}

/* Unit in the last place at 1.0 of each float type (for the tolerance); 0 = compared exactly. */
static double dtype_eps(gc_dtype_t dt) {
  switch (dt) {
    case GC_FLOAT32: return 0x1p-23;
    case GC_FLOAT64: return 0x1p-52;
    case GC_FLOAT16: return 0x1p-10;
    case GC_BFLOAT16: return 0x1p-7;
    default: return 0.0;
  }
}

/* Spacing of the subnormals: the absolute error floor of a rounding near zero. */
static double dtype_tiny(gc_dtype_t dt) {
  switch (dt) {
    case GC_FLOAT32: return 0x1p-149;
    case GC_FLOAT16: return 0x1p-24;
    case GC_BFLOAT16: return 0x1p-133;
    default: return 0x1p-1074;
  }
}

/* ---------------------------------------------------------------------------------------------
 * The float64 reference, from the same pattern gc_fill_random writes.
 * ------------------------------------------------------------------------------------------- */
static uint64_t rank_seed(const bench_t *b, int rank) {
  return gc__mix64(b->size_seed + (uint64_t)rank * 0x9E3779B97F4A7C15ull);
}

/* rmsnorm's gamma and residual: one seed for every rank, since the fused op wants them alike on
 * all ranks (as the epilogue's add vector). */
static uint64_t gamma_seed(const bench_t *b) {
  return gc__mix64(b->size_seed ^ 0x6A09E667F3BCC908ull);
}
static uint64_t residual_seed(const bench_t *b) {
  return gc__mix64(b->size_seed ^ 0xBB67AE8584CAA73Bull);
}

typedef struct check_ctx {
  int coll; /* a gcb_coll_t, or one of the mixed collectives */
  gc_dtype_t dt;
  gc_op_t op;
  int rank, nranks, root;
  size_t param;
  uint64_t seeds[64]; /* enough for one node; larger jobs derive seeds on the fly */
  const bench_t *b;
  /* The mixed collectives: this rank's dp_rank and the TP groups (bench_t.tp_groups). */
  int dp_rank, tp_size;
  const int *tp_groups;
} check_ctx_t;

static inline uint64_t ctx_seed(const check_ctx_t *c, int r) {
  return r < 64 ? c->seeds[r] : rank_seed(c->b, r);
}

/* Element idx of the n ranks' inputs (ranks[0..n), or NULL: ranks 0..n-1) reduced with the op. */
static inline double reduce_ranks(const check_ctx_t *c, const int *ranks, int n, size_t idx, double *tol) {
  const int dt = (int)c->dt;
  const int is_int = c->dt == GC_INT32 || c->dt == GC_INT64 || c->dt == GC_UINT8;
  double acc = gc__random_value(ctx_seed(c, ranks ? ranks[0] : 0), idx, dt);
  int64_t iacc = (int64_t)acc;
  for (int k = 1; k < n; k++) {
    double v = gc__random_value(ctx_seed(c, ranks ? ranks[k] : k), idx, dt);
    switch (c->op) {
      case GC_SUM: case GC_AVG: acc += v; iacc += (int64_t)v; break;
      case GC_PROD: acc *= v; iacc = (int64_t)((uint64_t)iacc * (uint64_t)(int64_t)v); break;
      case GC_MIN: acc = v < acc ? v : acc; break;
      case GC_MAX: acc = v > acc ? v : acc; break;
      default: break;
    }
  }
  if (is_int) {
    if (c->op == GC_SUM || c->op == GC_PROD) { /* wrapped at the type's width, as on the device */
      unsigned char tmp[8];
      gc_element_set(tmp, 0, c->dt, (double)iacc);
      return gc_element_get(tmp, 0, c->dt);
    }
    if (c->op == GC_AVG) {
      *tol = 1.0; /* truncated or rounded division are both fine */
      return acc / n;
    }
    return acc;
  }
  /* Floats: the sum of n pattern values is exact in float32 accumulation, but NCCL rounds
   * partial sums to the dtype at each step (magnitudes up to n/2 on average), so allow n
   * roundings at that scale; products carry n relative roundings, plus the absolute ones of
   * subnormal results (float16 products of 3 values reach them). min/max are exact. */
  const double eps = dtype_eps(c->dt);
  switch (c->op) {
    case GC_SUM: *tol = eps * n * (fabs(acc) + n / 2.0); return acc;
    case GC_AVG: *tol = eps * n * (1.0 + fabs(acc / n)); return acc / n; /* NCCL pre-scales */
    case GC_PROD: *tol = eps * n * fabs(acc) + n * dtype_tiny(c->dt); return acc;
    default: return acc;
  }
}

/* Expected element i of this rank's output; *tol receives the allowed absolute error. Block d of
 * an allreduce_allgather is the reduction over dp_rank d's TP group; a reducescatter_allreduce
 * gives block dp_rank reduced over every rank. */
static inline double reference(const check_ctx_t *c, size_t i, double *tol) {
  *tol = 0.0;
  if (c->coll == GCB_ALLGATHER) {
    int r = (int)(i / c->param);
    return gc__random_value(ctx_seed(c, r), i % c->param, (int)c->dt);
  }
  if (c->coll == GCB_BROADCAST) return gc__random_value(ctx_seed(c, c->root), i, (int)c->dt);
  if (c->coll == COLL_AR_AG)
    return reduce_ranks(c, c->tp_groups + i / c->param * c->tp_size, c->tp_size, i % c->param, tol);
  const size_t block = c->coll == GCB_REDUCESCATTER ? (size_t)c->rank : c->coll == COLL_RS_AR ? (size_t)c->dp_rank : 0;
  return reduce_ranks(c, NULL, c->nranks, block * c->param + i, tol);
}

/* Counts the wrong elements of out[0..n) (host copy); prints the first few. */
static long long compare(const check_ctx_t *c, const unsigned char *out, size_t n, const char *what) {
  long long wrong = 0;
#pragma omp parallel for reduction(+ : wrong) schedule(static)
  for (size_t i = 0; i < n; i++) {
    double tol, ref = reference(c, i, &tol);
    double got = gc_element_get(out, i, c->dt);
    if (!(fabs(got - ref) <= tol)) wrong++;
  }
  if (wrong) {
    int shown = 0;
    for (size_t i = 0; i < n && shown < 4; i++) {
      double tol, ref = reference(c, i, &tol);
      double got = gc_element_get(out, i, c->dt);
      if (!(fabs(got - ref) <= tol)) {
        fprintf(stderr, "gpucoll-bench: rank %d: %s: element %zu is %.9g, expected %.9g (+-%.3g)\n",
                c->rank, what, i, got, ref, tol);
        shown++;
      }
    }
  }
  return wrong;
}

/* ---------------------------------------------------------------------------------------------
 * --wire: each element's error against the float64 reference, and docs/wire-format.md's bound
 * from every rank's group maximum (fp8) or the values alone (bf16): the first encodings and the
 * float32 sum (E1), the second encoding of the sum, the average's scaling and the output's
 * rounding.
 * ------------------------------------------------------------------------------------------- */
static double wire_first(int fp8, double x, double A) {
  return fp8 ? fmax(ldexp(fabs(x), -4), ldexp(fmax(A / 224, 0x1p-127), -10)) : ldexp(fabs(x), -8) + 0x1p-134;
}

/* The group of elements [g0, g0 + G) cut at n: errors into *max_err and *sum_err; returns the
 * elements past the bound. */
static long long wire_group_check(const check_ctx_t *c, int fp8, size_t g0, size_t G, size_t n,
                                  const unsigned char *out, double *max_err, double *sum_err) {
  const int nr = c->nranks;
  const double gamma = (nr - 1) * 0x1p-24 / (1 - (nr - 1) * 0x1p-24), div = c->op == GC_AVG ? nr : 1;
  double S[128] = {0}, err[128] = {0}, mag[128] = {0}, AS = 0;
  const size_t len = g0 + G < n ? G : n - g0;
  for (int r = 0; r < nr; r++) {
    double A = 0;
    for (size_t j = 0; j < len; j++) A = fmax(A, fabs(gc__random_value(ctx_seed(c, r), g0 + j, (int)c->dt)));
    for (size_t j = 0; j < len; j++) {
      const double x = gc__random_value(ctx_seed(c, r), g0 + j, (int)c->dt), e = wire_first(fp8, x, A);
      S[j] += x, err[j] += e, mag[j] += fabs(x) + e;
    }
  }
  for (size_t j = 0; j < len; j++) err[j] += gamma * mag[j] + ldexp(mag[j], -50), AS = fmax(AS, fabs(S[j]) + err[j]);
  long long wrong = 0;
  for (size_t j = 0; j < len; j++) {
    const double t = fabs(S[j]) + err[j];
    const double second = fp8 ? fmax(ldexp(t, -4), ldexp(fmax(AS / 224, 0x1p-127), -10)) : ldexp(t, -8) + 0x1p-134;
    const double ref = S[j] / div, within = (err[j] + second) / div;
    const double bound = within + (dtype_eps(c->dt) / 2 + 0x1p-23) * (fabs(ref) + within) + dtype_tiny(c->dt);
    const double e = fabs(gc_element_get(out, g0 + j, c->dt) - ref);
    if (!(e <= bound)) wrong++;
    *max_err = fmax(*max_err, e);
    *sum_err += e;
  }
  return wrong;
}

/* Over this rank's output: the elements past the bound; the errors summed over the ranks. */
static long long wire_check(bench_t *b, const check_ctx_t *c, const unsigned char *out, size_t n) {
  const int fp8 = b->o.wire == GC_WIRE_FP8;
  const size_t G = fp8 ? (size_t)(b->o.wire_group ? b->o.wire_group : 32) : 8;
  double max_err = 0, sum_err = 0;
  long long wrong = 0;
  for (size_t g0 = 0; g0 < n; g0 += G) wrong += wire_group_check(c, fp8, g0, G, n, out, &max_err, &sum_err);
  MPI_OK(MPI_Allreduce(&max_err, &b->max_err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  MPI_OK(MPI_Allreduce(&sum_err, &b->mean_err, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  b->mean_err /= (double)n * b->nranks;
  return wrong;
}

/* The native column's errors beside the wire's (its #wrong is compare()'s). */
static void native_errors(bench_t *b, const check_ctx_t *c, const unsigned char *out, size_t n) {
  double max_err = 0, sum_err = 0, tol;
  for (size_t i = 0; i < n; i++) {
    const double e = fabs(gc_element_get(out, i, c->dt) - reference(c, i, &tol));
    max_err = fmax(max_err, e);
    sum_err += e;
  }
  MPI_OK(MPI_Allreduce(&max_err, &b->max_err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  MPI_OK(MPI_Allreduce(&sum_err, &b->mean_err, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  b->mean_err /= (double)n * b->nranks;
}

/* ---------------------------------------------------------------------------------------------
 * The rmsnorm reference: per row, in float64 from every rank's pattern, with
 *   f = sum over ranks + residual,  x = dtype(f),  v = f (numerics max) or x (rounded),
 *   r = 1 / sqrt(mean(v^2) + epsilon),  y = v * r * (gamma + weight_offset),
 *   scale = amax(y) / FP8_MAX (max: at most scale_ub / FP8_MAX when bounded) or
 *           max(amax(y) / FP8_MAX, 1 / (FP8_MAX * 512)) (rounded: then at most scale_ub),
 * the formulas of gpucoll.h. An fp8 element is wrong when out * scale (the GPU's scale) misses y
 * by more than the fp8 rounding (half an ulp, relative) plus twice the subnormal spacing at the
 * reference scale; a row's scale when it is off by more than 1e-3 of itself; a residual_out
 * element like an all-reduce element of n + 1 addends.
 * The unfused baseline (--vs nccl) is checked by the same rules, from its own all-reduce's
 * output: it normalizes x = dtype(sum + residual), as its kernel forms it (the sum is checked as
 * an all-reduce), and scales as max does (unfused_norm.h), allowing for its y rounded to the
 * dtype: half an ulp more on each scale, twice that on each fp8 value.
 * ------------------------------------------------------------------------------------------- */
/* The fp8 type's largest finite value, its worst relative rounding (half an ulp) and the spacing
 * of its subnormals. */
static void fp8_limits(gc_dtype_t dt, double *max, double *rel, double *tiny) {
  const int e5m2 = dt == GC_FP8_E5M2;
  *max = e5m2 ? 57344.0 : 448.0;
  *rel = e5m2 ? 0x1p-3 : 0x1p-4;
  *tiny = e5m2 ? 0x1p-16 : 0x1p-9;
}

typedef struct rms_check {
  gc_rmsnorm_fp8_t norm; /* its scalars (the pointers are the device's) */
  gc_dtype_t dt;
  size_t cols;
  int rank, nranks, residual;
  double fp8_max, fp8_rel, fp8_tiny;
  uint64_t gamma_seed, residual_seed;
  const unsigned char *out, *residual_out; /* host copies */
  const float *scales;
  const unsigned char *sum; /* the unfused baseline's all-reduce output (host copy), else NULL */
  double y_round;           /* relative rounding of an intermediate y: 0 when fused */
  int float_sum;            /* v is f, not rounded to the dtype (max's fused kernels) */
  int scale_floor;          /* rounded's scale: a floor, and scale_ub bounds the scale */
  check_ctx_t ranks; /* the rank seeds */
} rms_check_t;

static double round_to(gc_dtype_t dt, double v) {
  unsigned char tmp[8];
  gc_element_set(tmp, 0, dt, v);
  return gc_element_get(tmp, 0, dt);
}

/* The wrong values of one row (fp8 elements, its scale, residual_out elements); prints them while
 * *shown < 4 (shown NULL: silently). x is scratch for 2 x cols values. */
static long long rms_check_row(const rms_check_t *c, size_t row, double *x, int *shown,
                               const char *what) {
  double *const v = x + c->cols;
  const size_t cols = c->cols, base = row * cols;
  const int n = c->nranks;
  long long wrong = 0;
  double ss = 0.0;
  for (size_t j = 0; j < cols; j++) {
    double acc = 0.0;
    if (c->sum)
      acc = gc_element_get(c->sum, base + j, c->dt);
    else
      for (int r = 0; r < n; r++) acc += gc__random_value(ctx_seed(&c->ranks, r), base + j, c->dt);
    if (c->residual) acc += gc__random_value(c->residual_seed, base + j, c->dt);
    x[j] = round_to(c->dt, acc);
    v[j] = c->float_sum ? acc : x[j];
    ss += v[j] * v[j];
  }
  const double rinv = 1.0 / sqrt(ss / (double)cols + (double)c->norm.epsilon);
  double amax = 0.0;
  for (size_t j = 0; j < cols; j++) {
    double g = gc__random_value(c->gamma_seed, j, c->dt) + c->norm.weight_offset;
    amax = fmax(amax, fabs(v[j] * rinv * g));
  }
  double scale_ref = amax / c->fp8_max;
  if (c->scale_floor) {
    scale_ref = fmax(scale_ref, 1.0 / (c->fp8_max * 512.0));
    if (c->norm.scale_ub > 0.0f) scale_ref = fmin(scale_ref, (double)c->norm.scale_ub);
  } else if (c->norm.scale_ub > 0.0f) {
    scale_ref = fmin(amax, (double)c->norm.scale_ub) / c->fp8_max;
  }
  const double scale = c->scales[row];
  if (!(fabs(scale - scale_ref) <= (1e-3 + c->y_round) * scale_ref)) {
    wrong++;
    if (shown && (*shown)++ < 4)
      fprintf(stderr, "gpucoll-bench: rank %d: %s: row %zu: scale is %.9g, expected %.9g\n",
              c->rank, what, row, scale, scale_ref);
  }
  const double floor_tol = 2.0 * scale_ref * c->fp8_tiny, eps = dtype_eps(c->dt);
  for (size_t j = 0; j < cols; j++) {
    double y = v[j] * rinv * (gc__random_value(c->gamma_seed, j, c->dt) + c->norm.weight_offset);
    double q = gc_element_get(c->out, base + j, c->norm.out_dtype), got = q * scale;
    double tol = (c->fp8_rel + 2.0 * c->y_round) * fabs(y) + floor_tol;
    if (!(fabs(got - y) <= tol)) {
      wrong++;
      if (shown && (*shown)++ < 4)
        fprintf(stderr, "gpucoll-bench: rank %d: %s: row %zu col %zu: %g x scale %.9g = %.9g, "
                "expected %.9g (+-%.3g)\n", c->rank, what, row, j, q, scale, got, y, tol);
    }
    if (c->residual_out) {
      double xo = gc_element_get(c->residual_out, base + j, c->dt);
      double xtol = eps * (n + 1) * (fabs(x[j]) + (n + 1) / 2.0);
      if (!(fabs(xo - x[j]) <= xtol)) {
        wrong++;
        if (shown && (*shown)++ < 4)
          fprintf(stderr, "gpucoll-bench: rank %d: %s: residual_out row %zu col %zu is %.9g, "
                  "expected %.9g (+-%.3g)\n", c->rank, what, row, j, xo, x[j], xtol);
      }
    }
  }
  return wrong;
}

/* Counts the wrong values of every row (rows in parallel), then prints the first few. */
static long long compare_rmsnorm(const rms_check_t *c, size_t rows, const char *what) {
  long long wrong = 0;
#pragma omp parallel reduction(+ : wrong)
  {
    double *x = malloc(2 * c->cols * sizeof *x);
    if (!x) die("out of host memory (%zu bytes)", 2 * c->cols * sizeof *x);
#pragma omp for schedule(static)
    for (size_t row = 0; row < rows; row++) wrong += rms_check_row(c, row, x, NULL, what);
    free(x);
  }
  if (wrong) {
    double *x = malloc(2 * c->cols * sizeof *x);
    if (!x) die("out of host memory (%zu bytes)", 2 * c->cols * sizeof *x);
    int shown = 0;
    for (size_t row = 0; row < rows && shown < 4; row++) rms_check_row(c, row, x, &shown, what);
    free(x);
  }
  return wrong;
}

/* ---------------------------------------------------------------------------------------------
 * Buffers: pools carved into rotating sets.
 * ------------------------------------------------------------------------------------------- */
static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

#define RMS_ALIGN 256u

/* rmsnorm at `bytes`: whole rows of --cols elements, at least one. */
static rms_layout_t rms_layout(const options_t *o, size_t bytes, size_t elt) {
  rms_layout_t l;
  memset(&l, 0, sizeof l);
  l.rows = bytes / (o->cols * elt);
  if (l.rows == 0) l.rows = 1;
  l.count = l.rows * o->cols;
  const size_t in_bytes = l.count * elt;
  l.residual_at = round_up(in_bytes, RMS_ALIGN);
  l.send_bytes = o->residual ? l.residual_at + in_bytes : in_bytes;
  l.scales_at = round_up(l.count, RMS_ALIGN); /* after count fp8 bytes */
  const size_t scales_end = l.scales_at + l.rows * sizeof(float);
  l.residual_out_at = round_up(scales_end, RMS_ALIGN);
  size_t used = o->residual ? l.residual_out_at + in_bytes : scales_end;
  if (o->vs_nccl) {
    l.sum_at = round_up(used, RMS_ALIGN);
    used = l.sum_at + in_bytes;
    if (!o->nccl_alone) {
      l.y_at = round_up(used, RMS_ALIGN);
      used = l.y_at + in_bytes;
    }
  }
  l.recv_bytes = used;
  return l;
}

/* Element counts of one call at `bytes` (nccl-tests' meaning of -b/-e: the larger buffer, of n
 * blocks for the reduce-scatters and all-gathers); for rmsnorm the count of the input, and its
 * regions in elements of the input dtype. */
static void size_counts(const options_t *o, size_t bytes, size_t elt, int n, size_t *param,
                        size_t *send, size_t *recv) {
  size_t count = bytes / elt;
  switch (o->coll) {
    case GCB_ALLREDUCE: case GCB_BROADCAST: *param = *send = *recv = count; break;
    case GCB_REDUCESCATTER: case COLL_RS_AR: *param = *recv = count / n; *send = *param * n; break;
    case GCB_ALLGATHER: case COLL_AR_AG: *param = *send = count / n; *recv = *param * n; break;
    case COLL_RMSNORM: {
      rms_layout_t l = rms_layout(o, bytes, elt);
      *param = l.count;
      *send = (l.send_bytes + elt - 1) / elt;
      *recv = (l.recv_bytes + elt - 1) / elt;
      break;
    }
    default: *param = *send = *recv = 0;
  }
}

/* The blocks of a call's larger buffer: one per rank, for the mixed collectives one per DP rank. */
static int parts(const bench_t *b) { return IS_MIXED(b->o.coll) ? b->at.dp_size : b->nranks; }

/* This rank's block in it. */
static int block_index(const bench_t *b) { return IS_MIXED(b->o.coll) ? b->at.dp_rank : b->rank; }

/* Sets for one size: enough that a call comes back to a set only after the calls between have
 * touched ROTATE_BYTES. In place a call touches only the larger of its buffers (input and output
 * overlap), which decides; out of place a call touches more. */
static int sets_for(const bench_t *b, size_t send_bytes, size_t recv_bytes) {
  const size_t touched = send_bytes > recv_bytes ? send_bytes : recv_bytes;
  if (!b->on_gpu || touched == 0 || touched >= ROTATE_BYTES) return 1;
  size_t n = (ROTATE_BYTES + touched - 1) / touched;
  return n > MAX_SETS ? MAX_SETS : (int)n;
}

static size_t next_size(const options_t *o, size_t s) {
  if (o->step_factor > 1.0) {
    size_t nx = (size_t)((double)s * o->step_factor);
    return nx > s ? nx : s + 1;
  }
  return s + o->step_bytes;
}

/* The pools a column uses: MPI's are gpucoll's (host buffers); NCCL's modes have their own. */
static int pool_of(int lib) { return IS_NCCL(lib) ? lib : LIB_GC; }

static void alloc_gc_pool(bench_t *b, size_t bytes, char **out) {
  void *p = NULL;
  if (b->o.eager) GC_OK(b, gc_buffer_alloc(b->comm, bytes, b->on_gpu, &p));
  else GC_OK(b, gc_mem_alloc(b->comm, bytes, &p));
  *out = p;
}

static void free_gc_pool(bench_t *b, char **p) {
  if (!*p) return;
  if (b->o.eager) GC_OK(b, gc_buffer_free(b->comm, *p));
  else GC_OK(b, gc_mem_free(b->comm, *p));
  *p = NULL;
}

/* One NCCL pool of `bytes` for lib's mode, registered as the mode wants (collective for -R 2:
 * every rank registers the same sizes in the same order, so set k's offset is k x stride, on a
 * 4096-byte boundary, alike on every rank). */
static void alloc_nccl_pool(bench_t *b, int lib, size_t bytes, char **pool, void **reg) {
  char err[512];
  void *p = NULL;
  if (gcb_nccl_buffer_alloc(b->nccl, NCCL_MODE(lib), bytes, &p, err, sizeof err) ||
      gcb_nccl_register(b->nccl, NCCL_MODE(lib), p, bytes, reg, err, sizeof err))
    die("%s buffers: %s", lib_titles[lib], err);
  *pool = p;
}

static void free_nccl_pool(bench_t *b, int lib, char **pool, void **reg) {
  char err[512];
  if (gcb_nccl_deregister(b->nccl, NCCL_MODE(lib), *reg, err, sizeof err) ||
      gcb_nccl_buffer_free(b->nccl, NCCL_MODE(lib), *pool, err, sizeof err))
    die("%s buffers: %s", lib_titles[lib], err);
  *pool = NULL;
  *reg = NULL;
}

/* Pools for every size of the combination in progress, for every active column. */
static void setup_buffers(bench_t *b) {
  size_t send_max = SET_ALIGN, recv_max = SET_ALIGN, out_max = 0;
  for (size_t s = b->o.min_bytes; s <= b->o.max_bytes; s = next_size(&b->o, s)) {
    size_t param, se, re;
    size_counts(&b->o, s, b->elt, parts(b), &param, &se, &re);
    if (param == 0) continue;
    int sets = sets_for(b, se * b->elt, re * b->elt);
    size_t sp = sets * round_up(se * b->elt, SET_ALIGN), rp = sets * round_up(re * b->elt, SET_ALIGN);
    if (sp > send_max) send_max = sp;
    if (rp > recv_max) recv_max = rp;
    /* In-place reduce-scatter checks its slice of send; everything else checks recv. */
    if (re * b->elt > out_max) out_max = re * b->elt;
    if (s == SIZE_MAX) break;
  }
  b->send_pool_bytes = send_max;
  b->recv_pool_bytes = recv_max;
  alloc_gc_pool(b, send_max, &b->send_pools[LIB_GC]);
  alloc_gc_pool(b, recv_max, &b->recv_pools[LIB_GC]);
  for (int lib = LIB_NCCL0; lib < NUM_LIBS; lib++) {
    if (!b->active[lib]) continue;
    alloc_nccl_pool(b, lib, send_max, &b->send_pools[lib], &b->send_reg[lib]);
    alloc_nccl_pool(b, lib, recv_max, &b->recv_pools[lib], &b->recv_reg[lib]);
  }
  /* Of the pools' kind: the fused op wants all its pointers on the device or all on the host. */
  if (b->o.coll == COLL_RMSNORM) alloc_gc_pool(b, b->o.cols * b->elt, &b->gamma);
  if (b->o.check) {
    void *p;
    size_t host_bytes = out_max ? out_max : 1;
    GC_OK(b, gc_buffer_alloc(b->comm, host_bytes, 0, &p));
    b->host = p;
    b->poison_bytes = host_bytes < POISON_CHUNK ? host_bytes : POISON_CHUNK;
    b->poison = malloc(b->poison_bytes);
    if (!b->poison) die("out of host memory (%zu bytes)", b->poison_bytes);
    memset(b->poison, POISON_BYTE, b->poison_bytes);
  }
}

/* Undoes setup_buffers, NCCL's registrations first (in the order every rank made them). */
static void free_buffers(bench_t *b) {
  for (int lib = LIB_NCCL0; lib < NUM_LIBS; lib++) {
    if (b->send_pools[lib]) free_nccl_pool(b, lib, &b->send_pools[lib], &b->send_reg[lib]);
    if (b->recv_pools[lib]) free_nccl_pool(b, lib, &b->recv_pools[lib], &b->recv_reg[lib]);
  }
  free_gc_pool(b, &b->send_pools[LIB_GC]);
  free_gc_pool(b, &b->recv_pools[LIB_GC]);
  free_gc_pool(b, &b->gamma);
  if (b->host) GC_OK(b, gc_buffer_free(b->comm, b->host));
  b->host = NULL;
  free(b->poison);
  b->poison = NULL;
}

static void poison(bench_t *b, char *dst, size_t bytes) {
  for (size_t off = 0; off < bytes; off += b->poison_bytes) {
    size_t n = bytes - off < b->poison_bytes ? bytes - off : b->poison_bytes;
    GC_OK(b, gc_memcpy(b->comm, dst + off, b->poison, n));
  }
}

/* The pointers of set k for a column and placement. */
static void set_ptrs(const bench_t *b, int lib, int k, int placement, const void **send, void **recv) {
  char *s = b->send_pools[pool_of(lib)] + (size_t)k * b->send_stride;
  char *r = b->recv_pools[pool_of(lib)] + (size_t)k * b->recv_stride;
  if (placement == OOP) {
    *send = s;
    *recv = r;
    return;
  }
  const size_t at = (size_t)block_index(b) * b->param_count * b->elt;
  switch (b->o.coll) {
    case GCB_REDUCESCATTER: case COLL_RS_AR: /* recv is this rank's slice of send */
      *send = s;
      *recv = s + at;
      break;
    case GCB_ALLGATHER: case COLL_AR_AG: /* send is this rank's slice of recv */
      *send = r + at;
      *recv = r;
      break;
    default:
      *send = r;
      *recv = r;
      break;
  }
}

/* rmsnorm's settings: gamma, epsilon 1e-6, e4m3 output, and with --residual the residual and
 * residual_out at the given places (else none). */
static gc_rmsnorm_fp8_t rms_norm(const bench_t *b, const void *residual, void *residual_out) {
  gc_rmsnorm_fp8_t norm = GC_RMSNORM_FP8_INIT;
  norm.gamma = b->gamma;
  norm.epsilon = 1e-6f;
  norm.out_dtype = GC_FP8_E4M3;
  norm.numerics = b->o.numerics;
  if (b->o.residual) {
    norm.residual = residual;
    norm.residual_out = residual_out;
  }
  return norm;
}


/* ---------------------------------------------------------------------------------------------
 * The MPI library's own collective, beside gpucoll on host buffers: what the MPI path costs.
 * ------------------------------------------------------------------------------------------- */
/* Indexed by collective; rmsnorm has no MPI column. */
static const char *const mpi_names[NUM_COLLS] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Allgather",
                                                 "MPI_Bcast", NULL, "MPI_Allreduce(TP)+MPI_Allgather(DP)",
                                                 "MPI_Reduce_scatter_block(DP)+MPI_Allreduce(TP)"};

/* MPI's type and op for the combination in progress, or a reason there is none. */
static const char *mpi_types(const options_t *o, MPI_Datatype *dt, MPI_Op *op) {
  switch (o->dtype) {
    case GC_FLOAT32: *dt = MPI_FLOAT; break;
    case GC_FLOAT64: *dt = MPI_DOUBLE; break;
    case GC_INT32: *dt = MPI_INT32_T; break;
    case GC_INT64: *dt = MPI_INT64_T; break;
    case GC_UINT8: *dt = MPI_UINT8_T; break;
    default: return "MPI has no datatype for it";
  }
  switch (o->op) {
    case GC_SUM: *op = MPI_SUM; break;
    case GC_PROD: *op = MPI_PROD; break;
    case GC_MIN: *op = MPI_MIN; break;
    case GC_MAX: *op = MPI_MAX; break;
    default: *op = MPI_OP_NULL; break;
  }
  if (*op == MPI_OP_NULL && is_reduction(o->coll)) return "MPI has no such op";
  return NULL;
}

/* False where the MPI column has no form of the placement: MPI's in-place reduce-scatter leaves
 * the result at the start of the buffer, not at this rank's slice. */
static int mpi_has(const options_t *o, int placement) {
  return !(placement == INPLACE && (o->coll == GCB_REDUCESCATTER || o->coll == COLL_RS_AR));
}

/* The mixed collectives on MPI over the same TP and DP groups: MPI_Allreduce over TP into this
 * rank's block of recv, then MPI_Allgather over DP in place; or MPI_Reduce_scatter_block over DP
 * into recv, then MPI_Allreduce over TP in place. */
static gc_result_t run_mpi_mixed(bench_t *b, const void *send, void *recv, MPI_Datatype dt, MPI_Op op,
                                 char *err, size_t errlen) {
  const int n = (int)b->param_count; /* sizes below 2^31 elements: checked when the column opens */
  const char *what;
  int e;
  if (b->o.coll == COLL_AR_AG) {
    char *mine = (char *)recv + (size_t)b->at.dp_rank * b->param_count * b->elt;
    what = "MPI_Allreduce over the TP group";
    e = MPI_Allreduce(send == mine ? MPI_IN_PLACE : send, mine, n, dt, op, b->tp_mpi);
    if (e == MPI_SUCCESS) {
      what = "MPI_Allgather over the DP group";
      e = MPI_Allgather(MPI_IN_PLACE, 0, dt, recv, n, dt, b->dp_mpi);
    }
  } else {
    what = "MPI_Reduce_scatter_block over the DP group";
    e = MPI_Reduce_scatter_block(send, recv, n, dt, op, b->dp_mpi);
    if (e == MPI_SUCCESS) {
      what = "MPI_Allreduce over the TP group";
      e = MPI_Allreduce(MPI_IN_PLACE, recv, n, dt, op, b->tp_mpi);
    }
  }
  if (e == MPI_SUCCESS) return GC_SUCCESS;
  snprintf(err, errlen, "%s failed (MPI error %d)", what, e);
  return GC_ERR_MPI;
}

static gc_result_t run_mpi(bench_t *b, const void *send, void *recv, char *err, size_t errlen) {
  const options_t *o = &b->o;
  MPI_Datatype dt;
  MPI_Op op;
  if (mpi_types(o, &dt, &op)) return GC_ERR_UNSUPPORTED;
  if (IS_MIXED(o->coll)) return run_mpi_mixed(b, send, recv, dt, op, err, errlen);
  const int n = (int)b->param_count; /* sizes below 2^31 elements: checked when the column opens */
  const void *in = send == recv ? MPI_IN_PLACE : send;
  int e;
  switch (o->coll) {
    case GCB_ALLREDUCE: e = MPI_Allreduce(in, recv, n, dt, op, MPI_COMM_WORLD); break;
    case GCB_REDUCESCATTER: e = MPI_Reduce_scatter_block(send, recv, n, dt, op, MPI_COMM_WORLD); break;
    case GCB_ALLGATHER:
      in = (const char *)recv + (size_t)b->rank * b->param_count * b->elt == send ? MPI_IN_PLACE : send;
      e = MPI_Allgather(in, n, dt, recv, n, dt, MPI_COMM_WORLD);
      break;
    default: /* the root's send is copied into its recv first, then recv goes out */
      if (b->rank == o->root && send != recv) memcpy(recv, send, b->param_count * b->elt);
      e = MPI_Bcast(recv, n, dt, o->root, MPI_COMM_WORLD);
      break;
  }
  if (e == MPI_SUCCESS) return GC_SUCCESS;
  snprintf(err, errlen, "%s failed (MPI error %d)", mpi_names[o->coll], e);
  return GC_ERR_MPI;
}

/* ---------------------------------------------------------------------------------------------
 * One call, and one timed iteration of -m calls.
 * ------------------------------------------------------------------------------------------- */
typedef struct call {
  bench_t *b;
  int lib, placement;
  int next; /* the set the next call uses */
  char err[512];
} call_t;

/* The mixed collectives' unfused baseline on NCCL, over the same TP and DP groups: ncclAllReduce
 * over TP into this rank's block of recv, then ncclAllGather over DP in place; or
 * ncclReduceScatter over DP into recv, then ncclAllReduce over TP in place. */
static gc_result_t run_nccl_mixed(bench_t *b, const void *send, void *recv, void *stream, char *err,
                                  size_t errlen) {
  const options_t *o = &b->o;
  const size_t n = b->param_count;
  int bad;
  if (o->coll == COLL_AR_AG) {
    char *mine = (char *)recv + (size_t)b->at.dp_rank * n * b->elt;
    bad = gcb_nccl_run(b->nccl_tp, GCB_ALLREDUCE, send, mine, n, o->dtype, o->op, 0, stream, err, errlen) ||
          gcb_nccl_run(b->nccl_dp, GCB_ALLGATHER, mine, recv, n, o->dtype, o->op, 0, stream, err, errlen);
  } else {
    bad = gcb_nccl_run(b->nccl_dp, GCB_REDUCESCATTER, send, recv, n, o->dtype, o->op, 0, stream, err, errlen) ||
          gcb_nccl_run(b->nccl_tp, GCB_ALLREDUCE, recv, recv, n, o->dtype, o->op, 0, stream, err, errlen);
  }
  return bad ? GC_ERR_REMOTE : GC_SUCCESS; /* NCCL's own error; the message is in err */
}

static gc_result_t run_nccl(bench_t *b, const void *send, void *recv, void *stream, char *err,
                            size_t errlen) {
  const options_t *o = &b->o;
  if (IS_MIXED(o->coll)) return run_nccl_mixed(b, send, recv, stream, err, errlen);
  if (o->coll != COLL_RMSNORM) {
    if (gcb_nccl_run(b->nccl, (gcb_coll_t)o->coll, send, recv, b->param_count, o->dtype, o->op,
                     o->root, stream, err, errlen))
      return GC_ERR_REMOTE; /* NCCL's own error; the message is in err */
    return GC_SUCCESS;
  }
  /* NCCL's all-reduce of the same input into sum, then (unless alone) the unfused kernels */
  const rms_layout_t *l = &b->rms;
  char *out = recv, *sum = out + l->sum_at;
  if (gcb_nccl_run(b->nccl, GCB_ALLREDUCE, send, sum, l->count, o->dtype, GC_SUM, 0, stream, err, errlen))
    return GC_ERR_REMOTE;
  if (o->nccl_alone) return GC_SUCCESS;
  gc_rmsnorm_fp8_t norm = rms_norm(b, (const char *)send + l->residual_at, out + l->residual_out_at);
  if (gcb_unfused_norm(sum, norm.residual, norm.residual_out, norm.gamma, out + l->y_at, out,
                       (float *)(out + l->scales_at), l->rows, o->cols, o->dtype, norm.epsilon,
                       stream, err, errlen))
    return GC_ERR_CUDA;
  return GC_SUCCESS;
}

static gc_result_t run_gpucoll(bench_t *b, int wire, const void *send, void *recv, void *stream, char *err,
                               size_t errlen) {
  const options_t *o = &b->o;
  gc_options_t opts = GC_OPTIONS_INIT;
  opts.algo = o->algo;
  opts.max_blocks = o->max_blocks;
  if (wire) {
    opts.wire = o->wire;
    opts.wire_group = o->wire_group;
  }
  gc_result_t r;
  switch (o->coll) {
    case COLL_RMSNORM: { /* out of place only: send and recv are set k's regions */
      const rms_layout_t *l = &b->rms;
      gc_rmsnorm_fp8_t norm = rms_norm(b, (const char *)send + l->residual_at,
                                       (char *)recv + l->residual_out_at);
      r = gc_allreduce_rmsnorm_fp8(send, recv, (float *)((char *)recv + l->scales_at), l->rows,
                                   o->cols, o->dtype, &norm, b->comm, stream, &opts);
      break;
    }
    case GCB_ALLREDUCE:
      r = gc_allreduce_ex(send, recv, b->param_count, o->dtype, o->op, b->comm, stream, &opts);
      break;
    case COLL_AR_AG:
      r = gc_mixed_allreduce_allgather(send, recv, b->param_count, o->dtype, o->op, b->mixed, stream, &opts);
      break;
    case COLL_RS_AR:
      r = gc_mixed_reducescatter_allreduce(send, recv, b->param_count, o->dtype, o->op, b->mixed, stream, &opts);
      break;
    case GCB_REDUCESCATTER:
      r = gc_reducescatter_ex(send, recv, b->param_count, o->dtype, o->op, b->comm, stream, &opts);
      break;
    case GCB_ALLGATHER:
      r = gc_allgather_ex(send, recv, b->param_count, o->dtype, b->comm, stream, &opts);
      break;
    default:
      r = gc_broadcast_ex(send, recv, b->param_count, o->dtype, o->root, b->comm, stream, &opts);
      break;
  }
  if (r != GC_SUCCESS)
    snprintf(err, errlen, "gpucoll %s: %s", coll_names[o->coll], failure(b->comm, r));
  return r;
}

static gc_result_t run_one(bench_t *b, int lib, int placement, int set, void *stream, char *err,
                           size_t errlen) {
  const void *send;
  void *recv;
  set_ptrs(b, lib, set, placement, &send, &recv);
  if (IS_NCCL(lib)) return run_nccl(b, send, recv, stream, err, errlen);
  if (lib == LIB_MPI) return run_mpi(b, send, recv, err, errlen);
  return run_gpucoll(b, lib == LIB_WIRE, send, recv, stream, err, errlen);
}

/* nccl-tests' iteration: -m calls (NCCL's in one group, but not rmsnorm's baseline, whose own
 * kernels must follow NCCL's all-reduce, nor the mixed collectives', whose second collective,
 * on another NCCL communicator, must follow the first), then with -z a wait for them. */
static gc_result_t timed_iter(void *arg, void *stream) {
  call_t *c = arg;
  bench_t *b = c->b;
  const int group = IS_NCCL(c->lib) && b->o.agg > 1 && b->o.coll != COLL_RMSNORM && !IS_MIXED(b->o.coll);
  if (group && gcb_nccl_group_start(b->nccl, c->err, sizeof c->err)) return GC_ERR_REMOTE;
  gc_result_t r = GC_SUCCESS;
  for (int a = 0; a < b->o.agg && r == GC_SUCCESS; a++) {
    int set = c->next;
    c->next = (c->next + 1) % b->nsets;
    r = run_one(b, c->lib, c->placement, set, stream, c->err, sizeof c->err);
  }
  if (group && gcb_nccl_group_end(b->nccl, r == GC_SUCCESS ? c->err : NULL, sizeof c->err) && r == GC_SUCCESS)
    r = GC_ERR_REMOTE;
  if (r == GC_SUCCESS && b->o.blocking && stream) {
    r = gc_synchronize(b->comm, stream);
    if (r != GC_SUCCESS)
      snprintf(c->err, sizeof c->err, "gc_synchronize: %s", failure(b->comm, r));
  }
  return r;
}
/* ---------------------------------------------------------------------------------------------
 * Check and time one (column, placement) at the current size.
 * ------------------------------------------------------------------------------------------- */
/* Fresh input and poisoned output in set 0 of the column's pools, for a checked call. */
static void prepare_check(bench_t *b, int lib, int placement, const void *send) {
  const options_t *o = &b->o;
  const size_t elt = b->elt;
  const uint64_t mine = rank_seed(b, b->rank);
  char *s0 = b->send_pools[pool_of(lib)], *r0 = b->recv_pools[pool_of(lib)];
  if (o->coll == COLL_RMSNORM) { /* out of place only; gamma is fresh for every size already */
    GC_OK(b, gc_fill_random(b->comm, s0, b->param_count, o->dtype, mine));
    if (o->residual)
      GC_OK(b, gc_fill_random(b->comm, s0 + b->rms.residual_at, b->param_count, o->dtype,
                              residual_seed(b)));
    poison(b, r0, b->recv_elems * elt);
  } else if (placement == OOP) {
    GC_OK(b, gc_fill_random(b->comm, s0, b->send_elems, o->dtype, mine));
    poison(b, r0, b->recv_elems * elt);
  } else {
    switch (o->coll) {
      case GCB_ALLREDUCE: GC_OK(b, gc_fill_random(b->comm, r0, b->recv_elems, o->dtype, mine)); break;
      case GCB_REDUCESCATTER: case COLL_RS_AR: /* the output is a slice of the input */
        GC_OK(b, gc_fill_random(b->comm, s0, b->send_elems, o->dtype, mine));
        break;
      case GCB_ALLGATHER: case COLL_AR_AG: /* the input is a slice of the output */
        poison(b, r0, b->recv_elems * elt);
        GC_OK(b, gc_fill_random(b->comm, (void *)send, b->send_elems, o->dtype, mine));
        break;
      default:
        if (b->rank == o->root) GC_OK(b, gc_fill_random(b->comm, r0, b->recv_elems, o->dtype, mine));
        else poison(b, r0, b->recv_elems * elt);
        break;
    }
  }
}

/* rmsnorm's wrong values on this rank (host copy in b->host): its NCCL column's all-reduce is
 * checked as one, then the fused op's or the unfused kernels' output. */
static long long check_rmsnorm(bench_t *b, int lib, const check_ctx_t *c, const char *what) {
  const options_t *o = &b->o;
  long long wrong = 0;
  const unsigned char *nccl_sum = IS_NCCL(lib) ? b->host + b->rms.sum_at : NULL;
  if (nccl_sum) wrong += compare(c, nccl_sum, b->param_count, what);
  if (lib != LIB_GC && o->nccl_alone) return wrong;
  gc_rmsnorm_fp8_t norm = rms_norm(b, NULL, NULL);
  rms_check_t rc = {.norm = norm, .dt = o->dtype, .cols = o->cols, .rank = b->rank,
                    .nranks = b->nranks, .residual = o->residual, .gamma_seed = gamma_seed(b),
                    .residual_seed = residual_seed(b), .out = b->host,
                    .scales = (const float *)(b->host + b->rms.scales_at), .ranks = *c,
                    .sum = nccl_sum, .y_round = nccl_sum ? dtype_eps(o->dtype) / 2.0 : 0.0,
                    .float_sum = !nccl_sum && norm.numerics == GC_NORM_MAX,
                    .scale_floor = !nccl_sum && norm.numerics == GC_NORM_ROUNDED};
  fp8_limits(norm.out_dtype, &rc.fp8_max, &rc.fp8_rel, &rc.fp8_tiny);
  if (o->residual) rc.residual_out = b->host + b->rms.residual_out_at;
  return wrong + compare_rmsnorm(&rc, b->rms.rows, what);
}

static long long check_one(bench_t *b, int lib, int placement) {
  b->max_err = b->mean_err = -1;
  const options_t *o = &b->o;
  const void *send;
  void *recv;
  set_ptrs(b, lib, 0, placement, &send, &recv);
  const size_t out_elems = b->recv_elems;
  prepare_check(b, lib, placement, send);
  char err[512] = "";
  gc_result_t r = run_one(b, lib, placement, 0, b->stream, err, sizeof err);
  if (r == GC_SUCCESS) {
    r = gc_synchronize(b->comm, b->stream);
    if (r != GC_SUCCESS)
      snprintf(err, sizeof err, "gc_synchronize: %s", failure(b->comm, r));
  }
  if (r != GC_SUCCESS)
    die("%s %s %zu bytes: %s", lib_titles[lib], placement_names[placement], b->bytes, err);
  GC_OK(b, gc_memcpy(b->comm, b->host, recv, out_elems * b->elt));

  const int rms = o->coll == COLL_RMSNORM;
  check_ctx_t c = {.coll = rms ? GCB_ALLREDUCE : o->coll, .dt = o->dtype, .op = o->op,
                   .rank = b->rank, .nranks = b->nranks, .root = o->root,
                   .param = b->param_count, .b = b, .dp_rank = b->at.dp_rank,
                   .tp_size = b->at.tp_size, .tp_groups = b->tp_groups};
  for (int i = 0; i < b->nranks && i < 64; i++) c.seeds[i] = rank_seed(b, i);
  char what[128];
  snprintf(what, sizeof what, "%s %s %s %zu bytes", lib_titles[lib], coll_names[o->coll],
           placement_names[placement], b->bytes);
  long long wrong = 0, total = 0;
  if (rms) {
    wrong = check_rmsnorm(b, lib, &c, what);
  } else if (lib == LIB_WIRE) {
    wrong = wire_check(b, &c, b->host, out_elems);
  } else {
    wrong = compare(&c, b->host, out_elems, what);
    if (lib == LIB_GC && o->wire != GC_WIRE_NATIVE) native_errors(b, &c, b->host, out_elems);
  }
  MPI_OK(MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
  return total;
}


/* busbw / algbw: nccl-tests' factors; for the mixed collectives the sum of their two parts'
 * nccl-tests bus bytes over the size S (the dp_size x count buffer): the TP all-reduce of S / d
 * (x 2(t-1)/t) and the DP gather or scatter of S (x (d-1)/d), so 2(t-1)/(t d) + (d-1)/d. */
static double bus_factor(const bench_t *b) {
  const int n = b->nranks, t = b->at.tp_size, d = b->at.dp_size;
  switch (b->o.coll) {
    case GCB_ALLREDUCE: case COLL_RMSNORM: return 2.0 * (n - 1) / n;
    case GCB_REDUCESCATTER: case GCB_ALLGATHER: return (double)(n - 1) / n;
    case COLL_AR_AG: case COLL_RS_AR: return 2.0 * (t - 1) / ((double)t * d) + (double)(d - 1) / d;
    default: return 1.0;
  }
}

/* This rank's figure made one, as -a asks: rank 0's, the mean, the minimum or the maximum. */
static double over_ranks(const bench_t *b, double v) {
  double out = v;
  switch (b->o.average) {
    case AVG_RANK0: MPI_OK(MPI_Bcast(&out, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD)); break;
    case AVG_MIN: MPI_OK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD)); break;
    case AVG_MAX: MPI_OK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD)); break;
    default:
      MPI_OK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
      out /= b->nranks;
      break;
  }
  return out;
}

static result_t measure(bench_t *b, int lib, int placement, int warmup, int iters) {
  result_t res = {.wrong = -1};
  char what[128];
  snprintf(what, sizeof what, "%s %s %s %zu bytes", lib_titles[lib], coll_names[b->o.coll],
           placement_names[placement], b->bytes);
  gcb_watchdog_arm(b->watchdog, what, IS_NCCL(lib));
  res.max_err = res.mean_err = -1;
  if (b->o.check) {
    res.wrong = check_one(b, lib, placement);
    res.max_err = b->max_err;
    res.mean_err = b->mean_err;
  }
  call_t c = {.b = b, .lib = lib, .placement = placement, .next = 0};
  gcb_timing_t t = {0, 0};
  char err[512];
  if (gcb_time_calls(b->comm, MPI_COMM_WORLD, b->stream, timed_iter, &c, warmup, iters, b->o.graph, &t,
                     err, sizeof err))
    die("timing %s %s %zu bytes: %s%s%s", lib_titles[lib], placement_names[placement], b->bytes, err,
        c.err[0] ? ": " : "", c.err);
  gcb_watchdog_disarm(b->watchdog);
  /* A time per call: an iteration is -m calls. */
  res.us = over_ranks(b, (b->o.cputime ? t.cpu_us : t.us) / b->o.agg);
  res.algbw = res.us > 0 ? (double)b->bytes / res.us / 1e3 : 0; /* bytes/us/1e3 = GB/s */
  res.busbw = res.algbw * bus_factor(b);
  return res;
}

/* ---------------------------------------------------------------------------------------------
 * Output: nccl-tests' columns, a block per column of the bench and placement.
 * ------------------------------------------------------------------------------------------- */
static void fmt_time(char *buf, size_t n, double us) {
  if (us >= 1e4) snprintf(buf, n, "%7.0f", us);
  else if (us >= 100) snprintf(buf, n, "%7.1f", us);
  else snprintf(buf, n, "%7.2f", us);
}

/* False for a placement a column has no form of (rmsnorm in place): printed as N/A. */
static int ran(const result_t *r) { return r->us >= 0; }

static void fmt_wrong(char *buf, size_t n, long long w) {
  if (w < 0) snprintf(buf, n, "%6s", "N/A");
  else snprintf(buf, n, "%6lld", w);
}

/* A group title centred over a block of columns `width` wide (its two leading spaces included). */
static void print_centered(const char *title, int width) {
  int len = (int)strlen(title), left = (width - len) / 2;
  if (left < 0) left = 0;
  printf("%*s%s%*s", left, "", title, width - len - left > 0 ? width - len - left : 0, "");
}

static int any_nccl(const bench_t *b) {
  for (int lib = LIB_NCCL0; lib < NUM_LIBS; lib++)
    if (b->active[lib]) return 1;
  return 0;
}

/* The columns that print errors beside #wrong (--wire: the native one and the wire's). */
static int has_err(const bench_t *b, int lib) { return b->o.wire != GC_WIRE_NATIVE && (lib == LIB_GC || lib == LIB_WIRE); }

static void print_header(const bench_t *b) {
  char title[96];
  if (b->active[LIB_WIRE]) {
    char group[32] = "";
    if (b->o.wire == GC_WIRE_FP8) snprintf(group, sizeof group, ", group %d", b->o.wire_group ? b->o.wire_group : 32);
    printf("# the gpucoll wire columns run over the %s wire%s (options.wire); bandwidths count input bytes\n",
           gc_wire_name(b->o.wire), group);
  }
  if (b->active[LIB_MPI])
    printf("# the MPI columns time %s on the same host buffers%s\n", mpi_names[b->o.coll],
           IS_MIXED(b->o.coll) ? ", over the same TP and DP groups (MPI_Comm_split)" : "");
  printf("#%11s  %12s  %8s  %6s  %6s", "", "", "", "", "");
  for (int lib = 0; lib < NUM_LIBS; lib++) {
    if (!b->active[lib]) continue;
    for (int p = 0; p < NUM_PLACEMENTS; p++) {
      snprintf(title, sizeof title, "%s %s", lib_titles[lib], placement_names[p]);
      print_centered(title, has_err(b, lib) ? 53 : 33);
    }
  }
  if (any_nccl(b)) print_centered("vs best nccl", 18);
  printf("\n#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int lib = 0; lib < NUM_LIBS; lib++)
    for (int p = 0; b->active[lib] && p < NUM_PLACEMENTS; p++)
      printf("  %7s  %6s  %6s  %6s%s", b->o.cputime ? "cputime" : "time", "algbw", "busbw", "#wrong",
             has_err(b, lib) ? "    maxerr   meanerr" : "");
  if (any_nccl(b)) printf("  %7s  %7s", "oop", "inplace");
  printf("\n#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int lib = 0; lib < NUM_LIBS; lib++)
    for (int p = 0; b->active[lib] && p < NUM_PLACEMENTS; p++)
      printf("  %7s  %6s  %6s  %6s%s", "(us)", "(GB/s)", "(GB/s)", "", has_err(b, lib) ? "  (abs)     (abs)   " : "");
  if (any_nccl(b)) printf("  %7s  %7s", "(x)", "(x)");
  printf("\n");
  fflush(stdout);
}

/* The fastest NCCL mode's time at a placement (0: none ran). */
static double best_nccl(const bench_t *b, result_t res[NUM_LIBS][NUM_PLACEMENTS], int p) {
  double best = 0;
  for (int lib = LIB_NCCL0; lib < NUM_LIBS; lib++)
    if (b->active[lib] && ran(&res[lib][p]) && res[lib][p].us > 0 && (best == 0 || res[lib][p].us < best))
      best = res[lib][p].us;
  return best;
}

/* gpucoll's speed-up over the fastest NCCL mode (0: not measured). */
static double speedup(const bench_t *b, result_t res[NUM_LIBS][NUM_PLACEMENTS], int p) {
  double best = best_nccl(b, res, p);
  return best > 0 && ran(&res[LIB_GC][p]) && res[LIB_GC][p].us > 0 ? best / res[LIB_GC][p].us : 0;
}

static void print_row(const bench_t *b, result_t res[NUM_LIBS][NUM_PLACEMENTS]) {
  const options_t *o = &b->o;
  char t[32], w[32];
  printf("%12zu  %12zu  %8s  %6s  %6d", b->bytes, b->param_count, gc_dtype_name(o->dtype),
         is_reduction(o->coll) ? gc_op_name(o->op) : "none", o->coll == GCB_BROADCAST ? o->root : -1);
  for (int lib = 0; lib < NUM_LIBS; lib++) {
    for (int p = 0; b->active[lib] && p < NUM_PLACEMENTS; p++) {
      const result_t *r = &res[lib][p];
      if (!ran(r)) {
        printf("  %7s  %6s  %6s  %6s%s", "N/A", "N/A", "N/A", "N/A", has_err(b, lib) ? "       N/A       N/A" : "");
        continue;
      }
      fmt_time(t, sizeof t, r->us);
      fmt_wrong(w, sizeof w, r->wrong);
      printf("  %7s  %6.2f  %6.2f  %6s", t, r->algbw, r->busbw, w);
      if (has_err(b, lib) && r->max_err >= 0) printf("  %8.2e  %8.2e", r->max_err, r->mean_err);
      else if (has_err(b, lib)) printf("  %8s  %8s", "N/A", "N/A");
    }
  }
  for (int p = 0; any_nccl(b) && p < NUM_PLACEMENTS; p++) {
    double x = speedup(b, res, p);
    if (x > 0) printf("  %6.2fx", x);
    else printf("  %7s", "N/A");
  }
  printf("\n");
  fflush(stdout);
}

/* The one CSV schema of gpucoll-bench, the Lua sweep and scripts/torch_compare.py
 * (scripts/plot_bench.py reads it and checks the header). */
#define CSV_HEADER                                                                              \
  "coll,lib,mode,placement,bytes,count,dtype,op,root,nranks,device,buffers,graph,iters,warmup," \
  "time_us,algbw_GBps,busbw_GBps,wrong,speedup,version"

/* The mode column: gpucoll's algorithm, NCCL's -R mode, the MPI function. */
static const char *csv_mode(const bench_t *b, int lib) {
  static char wire[64];
  if (lib == LIB_GC) return gc_algo_name(b->o.algo);
  if (lib == LIB_WIRE) {
    snprintf(wire, sizeof wire, "%s+wire-%s%s%d", gc_algo_name(b->o.algo), gc_wire_name(b->o.wire),
             b->o.wire == GC_WIRE_FP8 ? "-g" : "", b->o.wire == GC_WIRE_FP8 ? (b->o.wire_group ? b->o.wire_group : 32) : 0);
    if (b->o.wire != GC_WIRE_FP8) wire[strlen(wire) - 1] = 0; /* no group: drop the 0 */
    return wire;
  }
  if (lib == LIB_MPI) return mpi_names[b->o.coll];
  return nccl_mode_names[NCCL_MODE(lib)];
}

static const char *csv_buffers(const bench_t *b, int lib) {
  if (!b->on_gpu) return "host";
  if (lib == LIB_GC || lib == LIB_WIRE) return b->o.eager ? "gc_buffer_alloc" : "gc_mem_alloc";
  return NCCL_MODE(lib) == GCB_NCCL_PLAIN ? "cudaMalloc" : "ncclMemAlloc";
}

static void csv_rows(bench_t *b, result_t res[NUM_LIBS][NUM_PLACEMENTS], int warmup, int iters) {
  if (!b->csv) return;
  const options_t *o = &b->o;
  for (int lib = 0; lib < NUM_LIBS; lib++) {
    for (int p = 0; b->active[lib] && p < NUM_PLACEMENTS; p++) {
      const result_t *r = &res[lib][p];
      if (!ran(r)) continue;
      char x[32] = "", wrong[32] = "";
      if (lib == LIB_GC && speedup(b, res, p) > 0) snprintf(x, sizeof x, "%.4f", speedup(b, res, p));
      if (r->wrong >= 0) snprintf(wrong, sizeof wrong, "%lld", r->wrong);
      const char *name = IS_NCCL(lib) && o->coll == COLL_RMSNORM && !o->nccl_alone ? "nccl+unfused"
                                                                                : lib_names[lib];
      const char *version = lib == LIB_GC || lib == LIB_WIRE ? gc_get_version() : lib == LIB_MPI ? b->mpi_version
                                                                            : gcb_nccl_version(b->nccl);
      fprintf(b->csv, "%s,%s,%s,%s,%zu,%zu,%s,%s,%d,%d,%s,%s,%d,%d,%d,%.3f,%.3f,%.3f,%s,%s,%s\n",
              coll_names[o->coll], name, csv_mode(b, lib), p == OOP ? "oop" : "inplace", b->bytes,
              b->param_count, gc_dtype_name(o->dtype), is_reduction(o->coll) ? gc_op_name(o->op) : "none",
              o->coll == GCB_BROADCAST ? o->root : -1, b->nranks, b->device_name, csv_buffers(b, lib),
              o->graph, iters * o->agg, warmup, r->us, r->algbw, r->busbw, wrong, x, version);
    }
  }
  fflush(b->csv);
}
/* ---------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------- */
static void print_devices(bench_t *b) {
  struct { int rank, pid, device; char host[64]; } me, *all = NULL;
  memset(&me, 0, sizeof me);
  me.rank = b->rank;
  me.pid = (int)getpid();
  GC_OK(b, gc_comm_device(b->comm, &me.device));
  int len = 0;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_OK(MPI_Get_processor_name(name, &len));
  memcpy(me.host, name, (size_t)len < sizeof me.host - 1 ? (size_t)len : sizeof me.host - 1);
  if (b->rank == 0) all = calloc(b->nranks, sizeof *all);
  MPI_OK(MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD));
  if (b->rank == 0) {
    printf("#\n# Using devices\n");
    for (int r = 0; r < b->nranks; r++) {
      if (all[r].device >= 0)
        printf("#  Rank %2d Pid %6d on %10s device %2d\n", all[r].rank, all[r].pid, all[r].host,
               all[r].device);
      else
        printf("#  Rank %2d Pid %6d on %10s host only\n", all[r].rank, all[r].pid, all[r].host);
    }
    free(all);
  }
}

/* Notes and progress go to stderr, rank 0 only; stdout carries the header and the rows. */
static void note(const bench_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const bench_t *b, const char *fmt, ...) {
  if (b->rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gpucoll-bench: note: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* The dispatch rows from --autotune (timed here, then saved) or --tuned (loaded), printed. */
static void tune(bench_t *b) {
  const options_t *o = &b->o;
  if (o->autotune_file) {
    const size_t upto = o->max_bytes < 1024 ? 1024 : o->max_bytes;
    const double t0 = MPI_Wtime();
    GC_OK(b, gc_autotune(b->comm, upto, o->dtype));
    const double took = MPI_Wtime() - t0;
    GC_OK(b, gc_tune_save(b->comm, o->autotune_file));
    if (b->rank == 0)
      printf("# autotuned up to %zu bytes of %s in %.1f s; rows saved to %s:\n", upto, gc_dtype_name(o->dtype),
             took, o->autotune_file);
  } else {
    GC_OK(b, gc_tune_load(b->comm, o->tune_file));
    if (b->rank == 0) printf("# dispatch rows loaded from %s:\n", o->tune_file);
  }
  FILE *f = b->rank == 0 ? fopen(o->autotune_file ? o->autotune_file : o->tune_file, "r") : NULL;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (line[0] != '#') printf("#   %s", line);
  if (f) fclose(f);
}


/* ---------------------------------------------------------------------------------------------
 * The mixed collectives' layout: a gc_mixed_t of the bench's communicator, every rank's place in
 * it, and its TP and DP groups for the MPI and NCCL columns.
 * ------------------------------------------------------------------------------------------- */
/* "TP 2 x DP 2 (local tp 2 x dp 1, inter tp 1 x dp 2; 2 nodes of 2 ranks)" */
static void layout_name(const gc_mixed_layout_t *a, char *buf, size_t n) {
  snprintf(buf, n, "TP %d x DP %d (local tp %d x dp %d, inter tp %d x dp %d; %d node%s of %d rank%s)", a->tp_size,
           a->dp_size, a->local_tp_size, a->local_dp_size, a->inter_tp_size, a->inter_dp_size, a->inter_size,
           a->inter_size == 1 ? "" : "s", a->local_size, a->local_size == 1 ? "" : "s");
}

/* Every rank's place, worked out from FlashInfer's numbering (gpucoll.h) with the layout's sizes
 * and compared with what each rank's handle reports, into tp_groups: the reference sums by it. */
static void number_ranks(bench_t *b) {
  const gc_mixed_layout_t *a = &b->at;
  const int n = b->nranks, mine[2] = {a->tp_rank, a->dp_rank};
  int *all = malloc(2 * (size_t)n * sizeof *all);
  b->tp_groups = malloc((size_t)n * sizeof *b->tp_groups);
  if (!all || !b->tp_groups) die("out of host memory (%d ranks)", n);
  if (a->world_size != n || a->tp_size * a->dp_size != n || a->local_size * a->inter_size != n)
    die("the layout's sizes (%d ranks, TP %d x DP %d, %d nodes of %d) do not make the %d ranks", a->world_size,
        a->tp_size, a->dp_size, a->inter_size, a->local_size, n);
  MPI_OK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
  for (int r = 0; r < n; r++) {
    const int local = r % a->local_size, inter = r / a->local_size;
    const int tp = local % a->local_tp_size + inter % a->inter_tp_size * a->local_tp_size;
    const int dp = local / a->local_tp_size + inter / a->inter_tp_size * a->local_dp_size;
    if (all[2 * r] != tp || all[2 * r + 1] != dp)
      die("rank %d reports tp_rank %d and dp_rank %d; FlashInfer's numbering gives %d and %d", r, all[2 * r],
          all[2 * r + 1], tp, dp);
    b->tp_groups[dp * a->tp_size + tp] = r;
  }
  free(all);
}

/* The operations a layout takes: "allreduce", "allgather and reducescatter". */
static void valid_ops(gc_mixed_t m, char *buf, size_t n) {
  buf[0] = '\0';
  for (int k = 0; k < GC_NUM_MIXED_OPS; k++)
    if (gc_mixed_op_valid(m, (gc_mixed_op_t)k))
      snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", buf[0] ? " and " : "", gc_mixed_op_name((gc_mixed_op_t)k));
}

/* Collective: the layout from --local-tp ... (0: FlashInfer's defaults), every rank's place and
 * the TP group (color dp_rank, key tp_rank) and the DP group (color tp_rank, key dp_rank) as MPI
 * communicators. Returns 0, or 1 on every rank, the reason printed once, where the sizes do not
 * fit the communicator or the layout does not take the collective. */
static int open_mixed(bench_t *b) {
  if (!IS_MIXED(b->o.coll)) return 0;
  gc_mixed_t m = NULL;
  gc_result_t r = gc_mixed_init(&m, b->comm, &b->o.layout);
  int ok = r == GC_SUCCESS, all = 0;
  MPI_OK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (ok && !all) die("gc_mixed_init failed on another rank only");
  if (!ok) {
    if (b->rank == 0) fprintf(stderr, "gpucoll-bench: %s (gpucoll-bench -h lists the flags)\n", failure(b->comm, r));
    return 1;
  }
  b->mixed = m;
  GC_OK(b, gc_mixed_get_layout(m, &b->at));
  const gc_mixed_op_t op = b->o.coll == COLL_AR_AG ? GC_MIXED_ALLREDUCE_ALLGATHER : GC_MIXED_REDUCESCATTER_ALLREDUCE;
  if (!gc_mixed_op_valid(m, op)) {
    char name[160], ops[128];
    layout_name(&b->at, name, sizeof name);
    valid_ops(m, ops, sizeof ops);
    if (b->rank == 0)
      fprintf(stderr, "gpucoll-bench: %s: the layout %s takes only %s; set --local-tp, --local-dp, "
              "--inter-tp or --inter-dp so that TP and DP both exceed 1 (gpucoll-bench -h lists the flags)\n",
              coll_names[b->o.coll], name, ops);
    return 1;
  }
  number_ranks(b);
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, b->at.dp_rank, b->at.tp_rank, &b->tp_mpi));
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, b->at.tp_rank, b->at.dp_rank, &b->dp_mpi));
  return 0;
}

/* -G on a mixed collective with a part on MPI, which CUDA graph capture refuses (gpucoll.h): every
 * column is timed without a graph, said once. */
static void mixed_graph(bench_t *b) {
  options_t *o = &b->o;
  if (!o->graph || !b->mixed) return;
  int p2p = 0;
  GC_OK(b, gc_comm_p2p_ready(b->comm, &p2p));
  MPI_OK(MPI_Allreduce(MPI_IN_PLACE, &p2p, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  const char *why = o->coll == COLL_RS_AR    ? "its TP all-reduce runs on MPI"
                    : b->at.inter_size > 1   ? "the layout spans nodes, and its part across them runs on MPI"
                    : !p2p                   ? "without peer access its parts run on MPI"
                    : o->algo == GC_ALGO_MPI ? "--algo mpi runs its DP all-gather on MPI"
                                             : NULL;
  if (!why) return;
  note(b, "-G %d: %s cannot be captured into a CUDA graph (%s); every column is timed without a graph, as -G 0",
       o->graph, coll_names[o->coll], why);
  o->graph = 0;
}

/* The mixed collectives' NCCL communicators of the TP and DP groups (collective; each step agreed
 * over the world, so a group that fails leaves no rank waiting in the next). Returns 0, or nonzero
 * on every rank with a reason in err. */
static int open_nccl_groups(bench_t *b, int device, char *err, size_t errlen) {
  gcb_nccl_t **handles[2] = {&b->nccl_tp, &b->nccl_dp};
  const MPI_Comm comms[2] = {b->tp_mpi, b->dp_mpi};
  static const char *const names[2] = {"TP", "DP"};
  int all = 1;
  for (int g = 0; g < 2 && all; g++) {
    char why[512] = "";
    const int ok = gcb_nccl_open(handles[g], comms[g], device, why, sizeof why) == 0;
    if (!ok) *handles[g] = NULL;
    MPI_OK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all) snprintf(err, errlen, "the %s group: %s", names[g], ok ? "another rank could not open NCCL" : why);
  }
  if (all) return 0;
  for (int g = 0; g < 2; g++) {
    if (*handles[g]) gcb_nccl_close(*handles[g]);
    *handles[g] = NULL;
  }
  return 1;
}

/* The header's layout lines: the sizes, the TP groups (the DP groups are their columns), what
 * a size counts and the bus factor (bus_factor). */
static void print_layout(const bench_t *b) {
  const gc_mixed_layout_t *a = &b->at;
  char name[160];
  layout_name(a, name, sizeof name);
  printf("# mixed layout: %s\n", name);
  if (b->nranks <= 64) {
    printf("# TP groups (by dp_rank, in tp_rank order; a DP group: one tp_rank of each):");
    for (int d = 0; d < a->dp_size; d++)
      for (int t = 0; t < a->tp_size; t++)
        printf("%s%d%s", t ? " " : " {", b->tp_groups[d * a->tp_size + t], t == a->tp_size - 1 ? "}" : "");
    printf("\n");
  }
  printf("# %s: size = dp_size x count elements (the %s); busbw = algbw x (2(t-1)/(t d) + (d-1)/d) = "
         "algbw x %.4g\n",
         coll_names[b->o.coll], b->o.coll == COLL_AR_AG ? "output" : "input", bus_factor(b));
}

/* --vs nccl: NCCL opened (collective; every rank learns alike) and the -R modes it has. A missing
 * NCCL or mode is one line, and the run goes on without it. */
static void open_nccl(bench_t *b, int device) {
  const options_t *o = &b->o;
  char err[512];
  if (!o->vs_nccl) return;
  if (gcb_nccl_open(&b->nccl, MPI_COMM_WORLD, device, err, sizeof err) != 0) {
    note(b, "NCCL not measured: %s", err); /* every rank failed alike; rank 0's reason */
    b->nccl = NULL;
    return;
  }
  if (b->mixed && open_nccl_groups(b, device, err, sizeof err)) {
    note(b, "NCCL not measured: %s", err);
    gcb_nccl_close(b->nccl);
    b->nccl = NULL;
    return;
  }
  if (b->rank == 0)
    printf("# NCCL %s (runtime version), NCCL_NVLS_ENABLE=0 (no NVLink multicast), same stream\n",
           gcb_nccl_version(b->nccl));
  for (int m = 0; m < GCB_NCCL_NUM_MODES; m++) {
    if (!(o->nccl_modes & (1 << m))) continue;
    b->nccl_ok[m] = gcb_nccl_mode_available(b->nccl, (gcb_nccl_mode_t)m, err, sizeof err) == 0;
    if (!b->nccl_ok[m]) note(b, "%s; its column is left out", err);
  }
  if (b->nccl_ok[GCB_NCCL_SYMMETRIC] && gcb_nccl_version_code(b->nccl) < GCB_NCCL_SYMMETRIC_GOOD)
    note(b, "warning: NCCL %s is older than 2.28.7, whose symmetric kernels fix a small-message "
            "defect: -R 2 figures may be NCCL's worst, not its best", gcb_nccl_version(b->nccl));
  if (b->rank == 0 && o->coll == COLL_RMSNORM && o->nccl_alone)
    printf("# the nccl columns time NCCL's all-reduce (sum) of the same input ALONE, without the norm "
           "and the quantization (NCCL has no fused op)\n");
  else if (b->rank == 0 && o->coll == COLL_RMSNORM)
    printf("# the nccl columns time the unfused baseline: NCCL's all-reduce (sum) of the same input, "
           "then an RMSNorm kernel and a per-row FP8 quantization kernel (bench/unfused_norm.cu)\n");
  else if (b->rank == 0 && o->coll == COLL_AR_AG)
    printf("# the nccl columns time ncclAllReduce over the TP group into this rank's block of the output, "
           "then ncclAllGather over the DP group in place (two NCCL communicators of the same groups)\n");
  else if (b->rank == 0 && o->coll == COLL_RS_AR)
    printf("# the nccl columns time ncclReduceScatter over the DP group, then ncclAllReduce over the TP "
           "group in place (two NCCL communicators of the same groups)\n");
}

/* 0 when NCCL runs what the NCCL columns of the combination in progress call: the collective,
 * rmsnorm's all-reduce of the sum, or the mixed collectives' all-reduce and DP collective. */
static int nccl_runs(const bench_t *b, char *err, size_t errlen) {
  const options_t *o = &b->o;
  if (o->coll == COLL_RMSNORM) return gcb_nccl_supports(b->nccl, GCB_ALLREDUCE, o->dtype, GC_SUM, err, errlen);
  if (!IS_MIXED(o->coll)) return gcb_nccl_supports(b->nccl, (gcb_coll_t)o->coll, o->dtype, o->op, err, errlen);
  const gcb_coll_t dp = o->coll == COLL_AR_AG ? GCB_ALLGATHER : GCB_REDUCESCATTER;
  return gcb_nccl_supports(b->nccl, GCB_ALLREDUCE, o->dtype, o->op, err, errlen) ||
         gcb_nccl_supports(b->nccl, dp, o->dtype, o->op, err, errlen);
}

/* The columns of the combination (dtype, op) in progress; a column left out says why, once. */
static void choose_columns(bench_t *b) {
  const options_t *o = &b->o;
  char err[512];
  memset(b->active, 0, sizeof b->active);
  b->active[LIB_GC] = 1;
  if (!b->on_gpu && o->coll != COLL_RMSNORM) {
    MPI_Datatype dt;
    MPI_Op op;
    const char *why = mpi_types(o, &dt, &op);
    if (!why && o->max_bytes / b->elt > (size_t)INT32_MAX) why = "counts past 2^31 elements";
    b->active[LIB_MPI] = why == NULL;
    if (why) note(b, "no %s column for %s %s: %s", mpi_names[o->coll], gc_dtype_name(o->dtype),
                  gc_op_name(o->op), why);
  }
  b->active[LIB_WIRE] = o->wire != GC_WIRE_NATIVE;
  const gc_op_t nop = o->coll == COLL_RMSNORM ? GC_SUM : o->op;
  for (int m = 0; b->nccl && m < GCB_NCCL_NUM_MODES; m++) {
    if (!b->nccl_ok[m]) continue;
    b->active[LIB_NCCL0 + m] = nccl_runs(b, err, sizeof err) == 0;
    if (!b->active[LIB_NCCL0 + m]) {
      note(b, "no nccl columns for %s %s: %s", gc_dtype_name(o->dtype), gc_op_name(nop), err);
      break; /* the same reason for every mode */
    }
  }
}

typedef struct totals {
  long long wrong;
  double bw_sum[NUM_LIBS], log_speedup[NUM_PLACEMENTS];
  int bw_count[NUM_LIBS], speedup_count[NUM_PLACEMENTS];
  long long steps_done, steps; /* steps 0: -N 0, no end */
  double t0;
} totals_t;

/* A progress line on stderr with the time left; over the line before only on a terminal. */
static void progress(const bench_t *b, const totals_t *t, size_t bytes) {
  if (b->rank != 0) return;
  const double el = MPI_Wtime() - t->t0;
  const int tty = isatty(STDERR_FILENO);
  if (t->steps > 0) {
    const double left = el / (double)t->steps_done * (double)(t->steps - t->steps_done);
    fprintf(stderr, "%sgpucoll-bench: %lld/%lld sizes (%zu B done), %.0f s elapsed, ~%.0f s left%s",
            tty ? "\r\033[K" : "", t->steps_done, t->steps, bytes, el, left,
            tty && t->steps_done < t->steps ? "" : "\n");
  } else {
    fprintf(stderr, "%sgpucoll-bench: %lld sizes (%zu B done), %.0f s elapsed (-N 0: until stopped)%s",
            tty ? "\r\033[K" : "", t->steps_done, bytes, el, tty ? "" : "\n");
  }
  fflush(stderr);
}

/* The size in progress: counts, layout, rotation and seed. */
static void set_size(bench_t *b, size_t s) {
  const options_t *o = &b->o;
  b->bytes = (o->coll == GCB_ALLREDUCE || o->coll == GCB_BROADCAST || o->coll == COLL_RMSNORM
                  ? b->param_count
                  : b->param_count * parts(b)) *
             b->elt;
  if (o->coll == COLL_RMSNORM) b->rms = rms_layout(o, s, b->elt);
  b->nsets = sets_for(b, b->send_elems * b->elt, b->recv_elems * b->elt);
  b->send_stride = round_up(b->send_elems * b->elt, SET_ALIGN);
  b->recv_stride = round_up(b->recv_elems * b->elt, SET_ALIGN);
  b->size_seed = gc__mix64(o->seed ^ (uint64_t)s * 0xD1342543DE82EF95ull ^ (uint64_t)o->dtype << 56 ^
                           (uint64_t)o->op << 48);
}

/* Iterations at the size in progress: fewer above ITER_SCALE_BYTES (a 1 GB all-reduce takes
 * ~4.5 ms on NVLink); at least one pass over every rotating set so timed calls miss L2. */
static void size_iters(const bench_t *b, int *iters, int *warmup) {
  const options_t *o = &b->o;
  *iters = o->iters;
  *warmup = o->warmup;
  if (b->bytes > ITER_SCALE_BYTES) {
    double f = (double)ITER_SCALE_BYTES / (double)b->bytes;
    int mi = o->iters < 5 ? o->iters : 5, mw = o->warmup < 1 ? o->warmup : 1;
    *iters = (int)ceil(o->iters * f);
    *warmup = (int)ceil(o->warmup * f);
    if (*iters < mi) *iters = mi;
    if (*warmup < mw) *warmup = mw;
  }
  const int per_pass = (b->nsets + o->agg - 1) / o->agg;
  if (*iters < per_pass) *iters = per_pass;
}

/* Realistic data in every set of every column's pools for the timed calls (the check refills
 * set 0). */
static void fill_sets(bench_t *b) {
  const options_t *o = &b->o;
  const uint64_t mine = rank_seed(b, b->rank);
  for (int lib = 0; lib < NUM_LIBS; lib++) {
    if (!b->active[lib] || pool_of(lib) != lib) continue;
    GC_OK(b, gc_fill_random(b->comm, b->send_pools[lib], b->nsets * b->send_stride / b->elt, o->dtype, mine));
    GC_OK(b, gc_fill_random(b->comm, b->recv_pools[lib], b->nsets * b->recv_stride / b->elt, o->dtype, mine));
  }
  if (o->coll == COLL_RMSNORM) GC_OK(b, gc_fill_random(b->comm, b->gamma, o->cols, o->dtype, gamma_seed(b)));
}

static void add_totals(const bench_t *b, result_t res[NUM_LIBS][NUM_PLACEMENTS], totals_t *t) {
  for (int lib = 0; lib < NUM_LIBS; lib++) {
    for (int p = 0; b->active[lib] && p < NUM_PLACEMENTS; p++) {
      if (res[lib][p].wrong > 0) t->wrong += res[lib][p].wrong;
      if (!ran(&res[lib][p])) continue;
      t->bw_sum[lib] += res[lib][p].busbw;
      t->bw_count[lib]++;
    }
  }
  for (int p = 0; p < NUM_PLACEMENTS; p++) {
    double x = speedup(b, res, p);
    if (x > 0) {
      t->log_speedup[p] += log(x);
      t->speedup_count[p]++;
    }
  }
}

static long long count_sizes(const options_t *o) {
  long long n = 0;
  for (size_t s = o->min_bytes; s <= o->max_bytes; s = next_size(o, s)) {
    n++;
    if (s == SIZE_MAX) break;
  }
  return n;
}

/* Every size of the combination (dtype, op) in progress, each row printed as it is measured. */
static void run_combination(bench_t *b, totals_t *t) {
  const options_t *o = &b->o;
  if (avg_wraps(o->coll, o->dtype, o->op)) { /* -d all or -o all: the library refuses it */
    note(b, "%s %s skipped: reducescatter_allreduce's average would wrap the partial sums",
         gc_dtype_name(o->dtype), gc_op_name(o->op));
    t->steps_done += count_sizes(o);
    return;
  }
  b->elt = gc_dtype_size(o->dtype);
  choose_columns(b);
  setup_buffers(b);
  if (b->rank == 0) print_header(b);
  for (size_t s = o->min_bytes; s <= o->max_bytes; s = next_size(o, s)) {
    size_counts(o, s, b->elt, parts(b), &b->param_count, &b->send_elems, &b->recv_elems);
    t->steps_done++;
    if (b->param_count == 0) {
      note(b, "%zu bytes skipped: fewer than one %s per %s", s, gc_dtype_name(o->dtype),
           IS_MIXED(o->coll) ? "DP rank" : "rank");
      if (s == SIZE_MAX) break;
      continue;
    }
    set_size(b, s);
    int iters, warmup;
    size_iters(b, &iters, &warmup);
    fill_sets(b);
    /* rmsnorm has no in-place form, MPI's reduce-scatter none that matches: N/A. */
    const result_t not_run = {.us = -1, .wrong = -1};
    result_t res[NUM_LIBS][NUM_PLACEMENTS];
    for (int lib = 0; lib < NUM_LIBS; lib++)
      for (int p = 0; p < NUM_PLACEMENTS; p++)
        res[lib][p] = !b->active[lib] || (p == INPLACE && o->coll == COLL_RMSNORM) ||
                              (lib == LIB_MPI && !mpi_has(o, p))
                          ? not_run
                          : measure(b, lib, p, warmup, iters);
    if (b->rank == 0) {
      print_row(b, res);
      csv_rows(b, res, warmup, iters);
    }
    add_totals(b, res, t);
    progress(b, t, s);
    if (s == SIZE_MAX) break;
  }
  free_buffers(b);
}

static void print_summary(const bench_t *b, const totals_t *t) {
  if (b->rank != 0) return;
  if (b->o.check) printf("# Out of bounds values : %lld %s\n", t->wrong, t->wrong ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %g\n", t->bw_count[LIB_GC] ? t->bw_sum[LIB_GC] / t->bw_count[LIB_GC] : 0.0);
  for (int lib = LIB_WIRE; lib < NUM_LIBS; lib++)
    if (t->bw_count[lib])
      printf("# Avg bus bandwidth (%s) : %g\n", lib == LIB_MPI ? mpi_names[b->o.coll] : lib_titles[lib],
             t->bw_sum[lib] / t->bw_count[lib]);
  if (t->speedup_count[OOP] || t->speedup_count[INPLACE]) {
    /* Per placement: at one rank an in-place call moves nothing in either library, and its
       ratio of two empty calls would blur the out-of-place figure. */
    printf("# Geometric mean speed-up vs the fastest NCCL mode (its time / gpucoll's) :");
    for (int p = 0; p < NUM_PLACEMENTS; p++)
      if (t->speedup_count[p]) printf(" %s %.3fx", placement_names[p], exp(t->log_speedup[p] / t->speedup_count[p]));
    printf("\n");
  }
  printf("#\n");
  fflush(stdout);
}

/* Rank 0's GPU model (or "host") and the MPI library's name, for the header and the CSV. */
static void describe(bench_t *b, int device) {
  snprintf(b->device_name, sizeof b->device_name, "host");
  struct cudaDeviceProp prop;
  if (b->on_gpu && device >= 0 && cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    snprintf(b->device_name, sizeof b->device_name, "%.63s", prop.name);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_OK(MPI_Get_library_version(lib, &len));
  lib[strcspn(lib, ",\n")] = '\0'; /* "Open MPI v4.1.6": one CSV field */
  snprintf(b->mpi_version, sizeof b->mpi_version, "%.63s", lib);
}

static void print_settings(const bench_t *b) {
  const options_t *o = &b->o;
  if (b->rank != 0) return;
  static const char *const avg_names[] = {"rank 0", "mean over ranks", "min over ranks", "max over ranks"};
  printf("# gpucoll-bench %s: %s, %d ranks, %s, %s\n", gc_get_version(), coll_names[o->coll], b->nranks,
         b->device_name, b->mpi_version);
  printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d iters: %d "
         "agg iters: %d validation: %d graph: %d blocking: %d cycles: %d\n",
         o->min_bytes, o->max_bytes, o->step_factor > 1 ? o->step_factor : (double)o->step_bytes,
         o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->agg, o->check, o->graph,
         o->blocking, o->cycles);
  printf("# time: %s, %s; algo %s maxblocks %d; buffers %s; seed %llu\n",
         o->cputime ? "host time to enqueue (-C 1)" : b->on_gpu ? "GPU time" : "wall time", avg_names[o->average],
         gc_algo_name(o->algo), o->max_blocks,
         !b->on_gpu ? "host memory (the MPI path), beside the MPI library's own collective"
         : o->eager ? "gc_buffer_alloc (copy-in)"
                    : "gc_mem_alloc (symmetric, zero-copy)",
         (unsigned long long)o->seed);
  if (o->coll == COLL_RMSNORM)
    printf("# rmsnorm: rows of %zu cols (rows = max(1, size / (cols x dtype bytes))), gamma random, "
           "epsilon 1e-6, %s, out fp8_e4m3, no in-place form; #wrong counts fp8 elements%s "
           "row scales\n",
           o->cols, o->residual ? "random residual into residual_out" : "no residual",
           o->residual ? ", residual_out elements and" : " and");
  if (b->mixed) print_layout(b);
}

#ifdef _OPENMP
/* The ranks of a node check at the same time: share its cores, unless told otherwise. The split
 * is collective, so every rank makes it whatever its own environment says. */
static void share_cores(void) {
  int local = 1;
  MPI_Comm node;
  MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  MPI_OK(MPI_Comm_size(node, &local));
  MPI_OK(MPI_Comm_free(&node));
  int t = omp_get_num_procs() / local;
  if (!getenv("OMP_NUM_THREADS")) omp_set_num_threads(t > 0 ? t : 1);
}
#endif

/* The communicator, its GPU and stream, and the mixed layout: 0, or 1 on every rank where the
 * layout refuses (open_mixed). */
static int open_comm(bench_t *b, int *device) {
  gc_config_t cfg = GC_CONFIG_INIT;
  if (b->o.host) cfg.use_gpu = 0;
  gc_result_t r = gc_comm_init(&b->comm, MPI_COMM_WORLD, &cfg);
  if (r != GC_SUCCESS) die("gc_comm_init: %s", failure(NULL, r));
  GC_OK(b, gc_comm_device(b->comm, device));
  b->on_gpu = *device >= 0;
  /* Rotation, graphs and NCCL need a GPU on every rank; treat a mixed job as host-only for them. */
  MPI_OK(MPI_Allreduce(MPI_IN_PLACE, &b->on_gpu, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (b->on_gpu) GC_OK(b, gc_comm_stream(b->comm, &b->stream));
  return open_mixed(b);
}

/* The watchdog, with -T or NCCL: it bounds each step and polls every NCCL communicator. */
static void start_watchdog(bench_t *b) {
  const options_t *o = &b->o;
  if (o->timeout_s <= 0 && !b->nccl) return;
  char err[256];
  b->watchdog = gcb_watchdog_start(b->rank, o->timeout_s, b->nccl, err, sizeof err);
  if (!b->watchdog) die("%s", err);
  if ((b->nccl_tp && gcb_watchdog_watch(b->watchdog, b->nccl_tp, err, sizeof err)) ||
      (b->nccl_dp && gcb_watchdog_watch(b->watchdog, b->nccl_dp, err, sizeof err)))
    die("%s", err);
  if (o->timeout_s > 0) note(b, "-T %g: one size of one column and placement may take that many seconds", o->timeout_s);
}

/* Communicator, stream, layout, seed, CSV and NCCL: everything before the first size. Returns 0,
 * or 1 on every rank where the layout refuses (the reason printed). */
static int start(bench_t *b) {
  options_t *o = &b->o;
  int device = -1;
  if (open_comm(b, &device)) return 1;
  describe(b, device);
  if (!o->seed_set) {
    o->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    MPI_OK(MPI_Bcast(&o->seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
  }
  if (b->rank == 0 && o->csv) {
    b->csv = fopen(o->csv, "w");
    if (!b->csv) die("cannot write %s", o->csv);
    fprintf(b->csv, CSV_HEADER "\n");
  }
#ifdef _OPENMP
  share_cores();
#endif
  print_settings(b);
  print_devices(b);
  if (o->graph && !b->on_gpu) {
    note(b, "-G %d needs a GPU on every rank; host buffers are timed with the wall clock instead", o->graph);
    o->graph = 0;
  }
  mixed_graph(b);
  if (b->on_gpu)
    note(b, "buffers smaller than %llu MB rotate over sets (at most %d) until a call has touched %llu MB "
            "since its set's last use, in place too; iterations shrink above %llu MB",
         ROTATE_BYTES >> 20, MAX_SETS, ROTATE_BYTES >> 20, ITER_SCALE_BYTES >> 20);
  open_nccl(b, b->on_gpu ? device : -1);
  start_watchdog(b);
  if (o->autotune_file || o->tune_file) tune(b);
  if (b->rank == 0) printf("#\n");
  return 0;
}

/* Undoes start: the watchdog first (it polls NCCL's communicators), NCCL's, the layout's groups
 * and handle, then the communicator. */
static void finish(bench_t *b) {
  if (b->csv) fclose(b->csv);
  gcb_watchdog_stop(b->watchdog);
  if (b->nccl_tp) gcb_nccl_close(b->nccl_tp);
  if (b->nccl_dp) gcb_nccl_close(b->nccl_dp);
  if (b->nccl) gcb_nccl_close(b->nccl);
  if (b->tp_groups) {
    MPI_OK(MPI_Comm_free(&b->tp_mpi));
    MPI_OK(MPI_Comm_free(&b->dp_mpi));
    free(b->tp_groups);
  }
  if (b->mixed) GC_OK(b, gc_mixed_destroy(b->mixed));
  GC_OK(b, gc_comm_destroy(b->comm));
}

int main(int argc, char **argv) {
  /* Rows appear as they are measured, also through mpirun's pipes. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Other threads (OpenMP's, the watchdog) make no MPI calls. */
  int thread_level = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &thread_level) != MPI_SUCCESS) {
    fprintf(stderr, "gpucoll-bench: MPI_Init_thread failed\n");
    return 1;
  }
  bench_t bench, *b = &bench;
  memset(b, 0, sizeof *b);
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &b->rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &b->nranks));
  g_rank = b->rank;
  /* Usage errors: one line on rank 0, exit status 1 on every rank, no abort. */
  int pa = parse_args(argc, argv, &b->o);
  if (!pa && b->o.root >= b->nranks) {
    if (b->rank == 0) fprintf(stderr, "gpucoll-bench: -r %d is not a rank (0..%d)\n", b->o.root, b->nranks - 1);
    pa = 2;
  }
  if (pa) {
    MPI_Finalize();
    return pa == 1 ? 0 : 1;
  }
  if (start(b)) {
    finish(b);
    MPI_Finalize();
    return 1;
  }
  options_t *o = &b->o;
  totals_t t;
  memset(&t, 0, sizeof t);
  t.steps = o->cycles ? (long long)o->cycles * o->ndtypes * o->nops * count_sizes(o) : 0;
  t.t0 = MPI_Wtime();
  for (int cycle = 0; o->cycles == 0 || cycle < o->cycles; cycle++) {
    for (int d = 0; d < o->ndtypes; d++) {
      for (int p = 0; p < o->nops; p++) {
        o->dtype = o->dtypes[d];
        o->op = o->ops[p];
        run_combination(b, &t);
      }
    }
  }
  print_summary(b, &t);
  finish(b);
  MPI_Finalize();
  return t.wrong ? 1 : 0;
}
