/* gc_internal.h — what the modules of lib/ share: the communicator, errors, logging, parameters. */
#ifndef GC_INTERNAL_H
#define GC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "gpucoll.h"
#include "gc_switches.h"

#define GC_HIDDEN __attribute__((visibility("hidden")))

/* ---------------------------------------------------------------------------------------------
 * Parameters: every environment knob in one table, read once (params.c).
 * XX(ID, environment variable, default as text, one-line doc)
 * ------------------------------------------------------------------------------------------- */
#define GC_PARAM_MAP(XX)                                                                              \
  XX(DEBUG, "GC_DEBUG", "", "log level: WARN, INFO or TRACE (empty = silent)")                      \
  XX(DEBUG_SUBSYS, "GC_DEBUG_SUBSYS", "ALL", "comma list of INIT,COLL,P2P,MPI,TUNE,MEM or ALL")     \
  XX(ALGO, "GC_ALGO", "auto", "force an algorithm by name (auto, oneshot, twoshot, mpi, ...)")          \
  XX(MAX_BLOCKS, "GC_MAX_BLOCKS", "0", "cap on the grid of every kernel, 0 to 256 (0 = dispatch table)")      \
  XX(TIMEOUT_MS, "GC_TIMEOUT_MS", "120000", "bound on every wait for a peer, device or MPI (ms)")   \
  XX(LOCAL_SIZE, "GC_LOCAL_SIZE", "0", "ranks per node; splits one host into nodes (0 = MPI)")      \
  XX(STAGING_BYTES, "GC_STAGING_BYTES", "67108864", "registered staging bytes per rank and GPU")    \
  XX(MPI_CHUNK_BYTES, "GC_MPI_CHUNK_BYTES", "4194304", "chunk of the MPI path's pipelined staging") \
  XX(PDL, "GC_PDL", "auto", "programmatic dependent launch when a call leaves it open: auto (sm_90+), 0 or 1") \
  XX(SWITCHES, "GC_SWITCHES", "", "the dispatch table's experiment switches, key=value,... (push_piece, push_schedule, push_control, ce_allreduce, ce_chunks, staged_blocks, ll_relay_bytes, ll_threads, hierarchical; docs/design.md)") \
  XX(CUDA_AWARE, "GC_CUDA_AWARE", "auto", "treat MPI as CUDA-aware: auto, 0 or 1")                  \
  XX(MULTIMEM, "GC_MULTIMEM", "0", "allow the NVLink multicast path (refused under kill switches)") \
  XX(CHECK_CALLS, "GC_CHECK_CALLS", "auto", "ranks compare each call's arguments first: auto (the MPI path's calls), 1 (every call), 0 (none)")

typedef enum gc__param {
#define GC__PARAM_ENUM(id, env, def, doc) GC_PARAM_##id,
  GC_PARAM_MAP(GC__PARAM_ENUM)
#undef GC__PARAM_ENUM
  GC_NUM_PARAMS
} gc__param_t;

GC_HIDDEN const char *gc__param_str(gc__param_t id);   /* value in force (env or default) */
/* A knob that takes one of n words: its index in *index, or GC_ERR_INVALID_ARGUMENT naming the
 * variable and the words it takes. */
GC_HIDDEN gc_result_t gc__param_word(gc__param_t id, const char *const words[], int n, int *index);
/* A knob that takes an integer from lo to hi: it in *value, or GC_ERR_INVALID_ARGUMENT naming the
 * variable and the range. */
GC_HIDDEN gc_result_t gc__param_range(gc__param_t id, int lo, int hi, int *value);
GC_HIDDEN gc_result_t gc__param_range64(gc__param_t id, int64_t lo, int64_t hi, int64_t *value);
/* The text of an integer knob: decimal or 0x hex, optional sign, k/m/g suffix (x 2^10, 2^20,
 * 2^30; a B or iB may follow), blanks around, nothing else. 1 with the value in *out, 0 (nothing
 * written) when it is not one or does not fit in 64 bits. */
GC_HIDDEN int gc__parse_int(const char *text, int64_t *out);

/* ---------------------------------------------------------------------------------------------
 * Logging (log.c): GC_DEBUG level and GC_DEBUG_SUBSYS mask, tested before any formatting.
 * ------------------------------------------------------------------------------------------- */
enum { GC_LOG_NONE = 0, GC_LOG_WARN = 1, GC_LOG_INFO = 2, GC_LOG_TRACE = 3 };
enum {
  GC_SUB_INIT = 1u << 0,
  GC_SUB_COLL = 1u << 1,
  GC_SUB_P2P = 1u << 2,
  GC_SUB_MPI = 1u << 3,
  GC_SUB_TUNE = 1u << 4,
  GC_SUB_MEM = 1u << 5,
  GC_SUB_ALL = ~0u
};
GC_HIDDEN extern int gc__log_level;
GC_HIDDEN extern unsigned gc__log_mask;
GC_HIDDEN extern int gc__log_rank; /* world rank for the log prefix; -1 before init */
GC_HIDDEN void gc__log_init(const char *level, const char *subsys);
GC_HIDDEN void gc__log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define GC__LOG(level, sub, ...)                                                     \
  do {                                                                               \
    if (gc__log_level >= (level) && (gc__log_mask & (sub)))                          \
      gc__log((level), (sub), __FILE__, __LINE__, __VA_ARGS__);                      \
  } while (0)
#define GC_WARN(sub, ...) GC__LOG(GC_LOG_WARN, sub, __VA_ARGS__)
#define GC_INFO(sub, ...) GC__LOG(GC_LOG_INFO, sub, __VA_ARGS__)
#define GC_TRACE(sub, ...) GC__LOG(GC_LOG_TRACE, sub, __VA_ARGS__)

/* ---------------------------------------------------------------------------------------------
 * Errors (errors.c). GC_FAIL records the message where the error starts (in the communicator,
 * or per thread when comm is NULL), logs it once at WARN, and returns the code. Callers above
 * propagate the code with GC_CHECK, which only leaves a TRACE line.
 * ------------------------------------------------------------------------------------------- */
GC_HIDDEN gc_result_t gc__fail(gc_comm_t comm, gc_result_t code, const char *file, int line,
                               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
GC_HIDDEN void gc__clear_error(gc_comm_t comm);
#define GC_FAIL(comm, code, ...) gc__fail((comm), (code), __FILE__, __LINE__, __VA_ARGS__)
/* A recorded message without the "GC_ERR_...: " that gc__fail put in front (for passing a
 * message on to another gc__fail, which adds its own). */
GC_HIDDEN const char *gc__message_body(const char *msg);

#define GC_CHECK(expr)                                                                  \
  do {                                                                                  \
    gc_result_t gc_r_ = (expr);                                                         \
    if (gc_r_ != GC_SUCCESS) {                                                          \
      GC_TRACE(GC_SUB_ALL, "%s -> %s", #expr, gc_result_name(gc_r_));                   \
      return gc_r_;                                                                     \
    }                                                                                   \
  } while (0)

#define GC_CUDA_CHECK(comm, call)                                                       \
  do {                                                                                  \
    cudaError_t gc_e_ = (call);                                                         \
    if (gc_e_ != cudaSuccess) {                                                         \
      (void)cudaGetLastError(); /* a failed allocation must not fail the next launch */ \
      return GC_FAIL((comm), GC_ERR_CUDA, "%s failed: %s (%s)", #call,                  \
                     cudaGetErrorString(gc_e_), cudaGetErrorName(gc_e_));               \
    }                                                                                   \
  } while (0)

/* Device allocations that copy engines copy into or out of, from 2 MB up, are whole 2 MB pages.
 * 2 x H200, 512 MB in 16 MB copies both ways into a 3-buffer ring in the peer's cudaMalloc
 * allocation: in allocations of 50 and 94 MB the copies run at 359-360 GB/s alone and 364 while
 * the SMs copy out of the ring; in ones 21760 bytes past a 2 MB multiple, at 350-358 and 260-275,
 * wherever the ring sits in them.
 * The communicator's own allocation (signals, push and LL areas, staging) is rounded up the same
 * way (transport.c). */
/* The largest staging area (GC_STAGING_BYTES) and allocation (gc_mem_alloc, gc_buffer_alloc)
 * taken: rounding larger sizes up could wrap. */
#define GC_MAX_STAGING_BYTES ((size_t)64 << 30)
#define GC_MAX_ALLOC_BYTES ((size_t)1 << 48)

static inline size_t gc__whole_pages(size_t bytes) {
  const size_t page = (size_t)2 << 20;
  return bytes < page ? bytes : (bytes + page - 1) & ~(page - 1);
}

/* A kernel launcher's status (a cudaError_t value) as a result: "<what> kernel launch failed". */
static inline gc_result_t gc__launched(gc_comm_t comm, int err, const char *what) {
  if (err != 0)
    return GC_FAIL(comm, GC_ERR_CUDA, "%s kernel launch failed: %s", what, cudaGetErrorString((cudaError_t)err));
  return GC_SUCCESS;
}

/* MPI return codes; the communicators gpucoll uses are set to MPI_ERRORS_RETURN. */
GC_HIDDEN gc_result_t gc__mpi_fail(gc_comm_t comm, int mpi_err, const char *call, const char *file,
                                   int line);
#define GC_MPI_CHECK(comm, call)                                                        \
  do {                                                                                  \
    int gc_m_ = (call);                                                                 \
    if (gc_m_ != MPI_SUCCESS) return gc__mpi_fail((comm), gc_m_, #call, __FILE__, __LINE__); \
  } while (0)

/* ---------------------------------------------------------------------------------------------
 * The communicator.
 * ------------------------------------------------------------------------------------------- */
#define GC_CE_RING 4                        /* per-chunk events of the copy-engine path, reused */
#define GC_CE_EVENTS (4 + 2 * GC_CE_RING)
#define GC_CE_MAX_CHUNKS 8                  /* pipeline stages of the copy-engine all-reduce by copies */

/* A buffer from gc_mem_alloc: its base on every local rank, mapped into this process. */
typedef struct gc__symmetric {
  struct gc__symmetric *next;
  char *base[GC_MAX_LOCAL_RANKS]; /* base[local_rank] is our own allocation */
  size_t bytes;
  bool device;
  uint64_t serial; /* how many gc_mem_alloc buffers the communicator made before it: alike on every rank */
} gc__symmetric_t;

/* A buffer from gc_buffer_alloc, until gc_buffer_free or gc_comm_destroy frees it. */
typedef enum { GC_OWNED_MALLOC, GC_OWNED_DEVICE, GC_OWNED_PINNED } gc__owned_kind_t; /* malloc: host-only rank */
typedef struct gc__owned {
  struct gc__owned *next;
  void *ptr;
  gc__owned_kind_t kind;
} gc__owned_t;

/* The NVLink multicast all-reduce's state (multimem.c): one allocation of this rank bound to the
 * node's multicast object, mapped at uc (its own memory) and mc (the multicast address). */
typedef struct gc__multimem {
  int ready;                        /* usable; else why says why not */
  char why[200];
  size_t bytes;                     /* of the allocation and of each mapping */
  void *uc, *mc;
  unsigned long long mc_handle, mem_handle; /* CUmemGenericAllocationHandle */
  int fd;                           /* the object's file descriptor here, -1 when none */
  int have_mc, have_mem, bound, uc_mapped, mc_mapped; /* what teardown must undo */
} gc__multimem_t;

/* Device-side state shared with the kernels; see transport.c for the layout. */
typedef struct gc__transport {
  size_t staging_bytes;                      /* per rank */
  char *staging[GC_MAX_LOCAL_RANKS];         /* every local rank's staging area, mapped */
  uint32_t *signals[GC_MAX_LOCAL_RANKS];     /* every local rank's signal area, mapped */
  void *push[GC_MAX_LOCAL_RANKS];            /* every local rank's push area (kernels.h), mapped */
  unsigned char *ll[GC_MAX_LOCAL_RANKS];     /* every local rank's LL area (kernels.h), mapped */
  uint32_t *error_host;                      /* host-mapped flag kernels write on a timeout */
  uint32_t *error_dev;                       /* the same flag as seen by the device */
  uint64_t timeout_ns;
} gc__transport_t;

struct gc_comm {
  MPI_Comm mpi;       /* our duplicate of the user's communicator, MPI_ERRORS_RETURN */
  MPI_Comm local;     /* ranks of this node (or of this GC_LOCAL_SIZE group) */
  MPI_Comm meet;      /* a duplicate that carries only gc__boot_agree (and barriers, agreements on
                         1): they never meet a request a timeout left behind on mpi (it would fail
                         as MPI_ERR_TRUNCATE) */
  int rank, size;
  int local_rank, local_size, node_count;
  int node_size_min, node_size_max; /* the fewest and most ranks of a node */
  int nodes_in_blocks;              /* every node L ranks, node k ranks kL .. kL+L-1 */
  int host_rank;      /* rank among the processes of this host (picks the GPU) */
  int device;         /* -1: host-only rank */
  int sm_count;
  int cuda_aware;     /* MPI takes device pointers */
  int all_gpu;        /* every rank of the communicator has a GPU */
  int p2p_ready;      /* one node, every pair of GPUs reaches each other: kernels usable */
  int peer_access[GC_MAX_LOCAL_RANKS];
  cudaStream_t stream;   /* the communicator's own stream */
  cudaStream_t ce_copy, ce_compute;         /* the copy-engine path's side streams (copyengine.c) */
  cudaEvent_t ce_events[GC_CE_EVENTS];
  gc__transport_t tp;
  gc__multimem_t mm;
  gc__symmetric_t *symmetric;
  uint64_t symmetric_made; /* gc_mem_alloc buffers made so far (the next one's serial) */
  gc__owned_t *owned;
  gc_algo_t forced_algo;  /* from GC_ALGO; GC_ALGO_AUTO = none */
  int max_blocks;         /* from GC_MAX_BLOCKS; 0 = none */
  size_t mpi_chunk_bytes; /* from GC_MPI_CHUNK_BYTES (> 0) */
  gc__switches_t sw;      /* in force: sw_init, then a loaded tune file's 'set' lines */
  gc__switches_t sw_init; /* the built-in values, then GC_SWITCHES */
  int cc_major;           /* compute capability of the GPU (9: clusters, PDL); 0 on host-only ranks */
  int multimem_asked;     /* GC_MULTIMEM=1 (multicast is set up only then, with no kill switch set) */
  int pdl;                /* from GC_PDL: 1 on, 0 off (options.pdl == 0 takes this); -1 until the device is known */
  int timeout_ms;
  int check_calls;        /* a gc__check_level_t from GC_CHECK_CALLS, the most any rank asks */
  int call_met;           /* the public call under way has reached a comparison every rank makes (agree.c) */
  gc_result_t sticky;     /* a device-side failure makes the communicator unusable */
  void *mpi_stage[2];     /* pinned host chunks for the MPI path (mpi_path.c), lazily made */
  size_t mpi_stage_bytes;
  char *algo_table_text;
  struct gc__tuned *tuned; /* rows from gc_autotune / gc_tune_load, first match wins; NULL = none */
  int tuned_count;
  struct gc__plan *last_plan; /* the plan of the last call that got one (plan_query.c); NULL before */
  unsigned long plans_made;
  struct gc__plan *plan_only; /* gc_plan_query under way: the call's plan goes here, nothing runs */
  /* The mixed operations' groups (gc__mixed_groups): this rank's node, and the ranks with its
   * local rank on every node. NULL until the first mixed call; destroyed with the communicator. */
  gc_comm_t node_group, cross_group;
  char last_error[1024];
};

/* Makes comm's GPU current for the length of one public call and restores the caller's after,
 * so a call works whatever device the calling thread has current (waits.c). */
GC_HIDDEN gc_result_t gc__device_enter(gc_comm_t comm, int *prev);
GC_HIDDEN void gc__device_leave(gc_comm_t comm, int prev);
#define GC_ON_DEVICE(comm, call)                               \
  do {                                                         \
    gc_comm_t gc_on_ = (comm); /* read once: call may free what it came from */ \
    int gc_prev_;                                              \
    gc_result_t gc_rr_ = gc__device_enter(gc_on_, &gc_prev_);  \
    if (gc_rr_ != GC_SUCCESS) return gc_rr_;                   \
    gc_rr_ = (call);                                           \
    gc__device_leave(gc_on_, gc_prev_);                        \
    return gc_rr_;                                             \
  } while (0)

/* registry.c: checks that comm is a live communicator (not NULL, not destroyed); records why not. */
GC_HIDDEN gc_result_t gc__comm_check(gc_comm_t comm);
GC_HIDDEN bool gc__comm_is_live(gc_comm_t comm);
/* Enters comm into the registry (0 when it is full) / takes it out. */
GC_HIDDEN int gc__live_add(gc_comm_t comm);
GC_HIDDEN void gc__live_remove(gc_comm_t comm);
/* Frees a destroyed communicator's struct once GC_QUARANTINE later ones have been freed. */
GC_HIDDEN void gc__comm_quarantine(gc_comm_t comm);
/* waits.c: GC_ERR_TIMEOUT (and the communicator marked failed) once a kernel recorded a timeout,
 * here or in one of its mixed operations' groups. */
GC_HIDDEN gc_result_t gc__comm_health(gc_comm_t comm);
/* Waits until the work enqueued on a stream (before an event) has finished, at most twice
 * comm->timeout_ms: then GC_ERR_STREAM_TIMEOUT (not sticky: gpucoll's own waits are bounded, so
 * what is stuck is someone else's work), unless a gpucoll kernel recorded a timeout
 * (GC_ERR_TIMEOUT). `what` opens the message. Never blocks in the driver, so work that never
 * ends cannot hang the caller. */
GC_HIDDEN gc_result_t gc__stream_wait(gc_comm_t comm, void *stream, const char *what);
GC_HIDDEN gc_result_t gc__event_wait(gc_comm_t comm, void *event, const char *what);
/* This rank's device idle, bounded like a stream wait (waits.c): GC_ERR_STREAM_TIMEOUT when it
 * stayed busy. gc__quiesce: every rank's, agreed (collective). */
GC_HIDDEN gc_result_t gc__device_wait(gc_comm_t comm, const char *what);
GC_HIDDEN gc_result_t gc__quiesce(gc_comm_t comm, const char *what);
/* Makes comm->node_group and comm->cross_group (collective; once; nodes of one size). A failure
 * leaves the communicator failed. */
GC_HIDDEN gc_result_t gc__mixed_groups(gc_comm_t comm);

/* ---------------------------------------------------------------------------------------------
 * Element conversions and the host epilogue (types.c): used by the MPI path and the tests.
 * ------------------------------------------------------------------------------------------- */
GC_HIDDEN int gc__dtype_reducible(gc_dtype_t dtype);
GC_HIDDEN int gc__dtype_is_float(gc_dtype_t dtype);
GC_HIDDEN int gc__dtype_valid(gc_dtype_t dtype);
/* Reads element i of a host array of dtype as double / writes it with round-to-nearest-even
 * (saturating for fp8, wrapping for integers). */
GC_HIDDEN double gc__load_double(const void *buf, size_t i, gc_dtype_t dtype);
GC_HIDDEN void gc__store_double(void *buf, size_t i, gc_dtype_t dtype, double v);

/* ---------------------------------------------------------------------------------------------
 * Modules.
 * ------------------------------------------------------------------------------------------- */
/* transport.c: IPC buffers, signals, peer probe, symmetric allocations. */
GC_HIDDEN gc_result_t gc__transport_init(gc_comm_t comm);
GC_HIDDEN void gc__transport_destroy(gc_comm_t comm);
GC_HIDDEN void gc__symmetric_release_all(gc_comm_t comm);
/* Where ptr sits: 0 outside every gc_mem_alloc buffer, else its buffer's serial and offset in one
 * number (2 + serial above bit 40, the offset below), the same on every rank for the same place. */
GC_HIDDEN uint64_t gc__symmetric_place(gc_comm_t comm, const void *ptr);
/* Finds ptr inside a gc_mem_alloc buffer: peers[r] = the same offset in rank r's buffer. */
GC_HIDDEN bool gc__symmetric_lookup(gc_comm_t comm, const void *ptr, size_t bytes,
                                    void *peers[GC_MAX_LOCAL_RANKS]);

/* copyengine.c: large collectives moved by copy engine (see the file). recv_peers[r] is the
 * output's mapping on rank r: the output must come from gc_mem_alloc. base: the kernels'
 * arguments for the call (peers, op, epilogue, grid). Sizes: bytes per element of input (es) and
 * output (os); for all-gather `part` and for broadcast `bytes` are byte counts. */
struct gc_kargs;
struct gc_kpeers;
GC_HIDDEN gc_result_t gc__ce_init(gc_comm_t comm);
GC_HIDDEN void gc__ce_destroy(gc_comm_t comm);
/* send_peers: the input's mapping on every rank, or NULL when the input is not symmetric. */
GC_HIDDEN gc_result_t gc__ce_allreduce(gc_comm_t comm, const struct gc_kargs *base, void *const send_peers[],
                                       const void *send, void *const recv_peers[], size_t count, size_t es,
                                       size_t os, const void *add, int by_writes, cudaStream_t stream);
/* Out of place, output in the input's type, the output as inbox (copyengine.c): the first
 * count - count % (16 n) elements; `chunks` (at most GC_CE_MAX_CHUNKS) pipeline stages. */
GC_HIDDEN gc_result_t gc__ce_allreduce_copies(gc_comm_t comm, const struct gc_kargs *base, const void *send,
                                              void *const recv_peers[], size_t count, size_t es, const void *add,
                                              int chunks, cudaStream_t stream);
/* Whether the copy-engine reduce-scatter's inboxes (a row per rank, three buffers) fit the
 * staging area in rows of 4 KB or more; gc__ce_reducescatter refuses the call otherwise. */
GC_HIDDEN int gc__ce_inbox_fits(gc_comm_t comm);
GC_HIDDEN gc_result_t gc__ce_reducescatter(gc_comm_t comm, const struct gc_kargs *base, const void *send,
                                           void *recv, const size_t *off, const size_t *len, size_t es,
                                           size_t os, const void *add, cudaStream_t stream);
GC_HIDDEN gc_result_t gc__ce_allgather(gc_comm_t comm, const struct gc_kpeers *peers, const void *send,
                                       void *const recv_peers[], size_t part, cudaStream_t stream);
GC_HIDDEN gc_result_t gc__ce_broadcast(gc_comm_t comm, const struct gc_kpeers *peers, const void *send,
                                       void *const recv_peers[], size_t bytes, int root, cudaStream_t stream);
/* Outputs not from gc_mem_alloc, through every rank's staging area in chunks (copyengine.c):
 * the ranks in the bit mask `sources` send bytes [0, len[p]) of their src to every rank's
 * out + off[p] (byte offsets). */
GC_HIDDEN gc_result_t gc__ce_gather_staged(gc_comm_t comm, const struct gc_kpeers *peers, unsigned sources,
                                           const void *src, void *out, const size_t *off, const size_t *len,
                                           cudaStream_t stream);
/* The all-reduce into such an output: the reduce-scatter by writes (by_copies: the copy-engine
 * reduce-scatter) into our slice, then the staged gather. */
GC_HIDDEN gc_result_t gc__ce_allreduce_staged(gc_comm_t comm, const struct gc_kargs *base, const void *send,
                                              void *recv, size_t count, size_t es, size_t os, const void *add,
                                              int by_copies, cudaStream_t stream);

/* bootstrap.c: the MPI control plane. */
GC_HIDDEN gc_result_t gc__boot_init(gc_comm_t comm, MPI_Comm user, const gc_config_t *cfg);
GC_HIDDEN void gc__boot_destroy(gc_comm_t comm);
GC_HIDDEN gc_result_t gc__boot_local_allgather(gc_comm_t comm, const void *mine, void *all,
                                               size_t bytes);
/* Over the ranks of this node: local rank 0's bytes to all; the least value of all. */
GC_HIDDEN gc_result_t gc__boot_local_bcast(gc_comm_t comm, void *buf, size_t bytes);
GC_HIDDEN gc_result_t gc__boot_local_min_int(gc_comm_t comm, int *value);
/* Keeps p allocated and reachable until the process ends: a buffer a timed-out request may write. */
GC_HIDDEN void gc__park(void *p);
/* Waits for a nonblocking MPI request, bounded by comm->timeout_ms (then GC_ERR_TIMEOUT, sticky). */
GC_HIDDEN gc_result_t gc__boot_wait(gc_comm_t comm, MPI_Request *req, const char *what);
/* How many of comm's MPI communicators hold a request a timeout left pending (bootstrap.c: such a
 * communicator is never freed). */
GC_HIDDEN int gc__boot_stranded(gc_comm_t comm);
GC_HIDDEN gc_result_t gc__boot_barrier(gc_comm_t comm);
/* Every rank's *all (0 or 1) ANDed into *all, on comm->meet like the barrier, waited for up to bound_ms. */
GC_HIDDEN gc_result_t gc__boot_agree(gc_comm_t comm, int *all, double bound_ms, const char *what);
GC_HIDDEN gc_result_t gc__boot_bcast(gc_comm_t comm, void *buf, size_t bytes, int root);
GC_HIDDEN gc_result_t gc__boot_max_double(gc_comm_t comm, double *value);
GC_HIDDEN gc_result_t gc__boot_min_int(gc_comm_t comm, int *value);
/* The least of each of n values over the communicator, in place. */
GC_HIDDEN gc_result_t gc__boot_min_u64(gc_comm_t comm, uint64_t *values, int n);
/* The least and the most of each of n values (n <= 32) over the communicator, in one reduction. */
GC_HIDDEN gc_result_t gc__boot_range_u64(gc_comm_t comm, const uint64_t *values, int n, uint64_t *lo, uint64_t *hi);
GC_HIDDEN int gc__boot_query_cuda_aware(void);

/* What GC_CHECK_CALLS compares (0, auto, 1): nothing, the MPI path's calls, every public call. */
typedef enum { GC_CHECK_NONE, GC_CHECK_MPI_PATH, GC_CHECK_EVERY_CALL } gc__check_level_t;

/* callcheck.c: every rank compares a call's arguments before the call moves data (GC_CHECK_CALLS).
 * A signature holds what must be the same on every rank; fields a call has not are 0. */
typedef enum {
  GC_SIG_CALL,       /* a gc__call_kind_t */
  GC_SIG_COUNT,      /* count (recvcount, sendcount; 2-D and rmsnorm: rows) */
  GC_SIG_COLS,       /* 2-D reduce-scatter and rmsnorm: columns */
  GC_SIG_AXIS,       /* 2-D reduce-scatter: axis */
  GC_SIG_PARTS,      /* the MPI path's reduce-scatter: a hash of every rank's part size */
  GC_SIG_DTYPE,
  GC_SIG_OP,
  GC_SIG_ROOT,
  GC_SIG_OUT_DTYPE,
  GC_SIG_SCALE,      /* the epilogue's scale, its bits */
  GC_SIG_ADD,        /* 1 with an add vector (rmsnorm: bit 0 a residual, bit 1 a residual_out) */
  GC_SIG_ALGO,
  GC_SIG_MAX_BLOCKS,
  GC_SIG_WIRE,       /* options.wire and options.wire_group, as given */
  GC_SIG_WIRE_GROUP,
  GC_SIG_HOST,       /* 1 when the call's buffers are on the host */
  GC_SIG_CHUNK,      /* the MPI path's chunk (GC_MPI_CHUNK_BYTES) */
  GC_SIG_SEND_AT,    /* where sendbuf sits in gc_mem_alloc buffers (gc__symmetric_place; 1: in place) */
  GC_SIG_RECV_AT,    /* the same for recvbuf */
  GC_SIG_NUMERICS,   /* rmsnorm: norm.numerics as read (a version-1 struct: ROUNDED) */
  GC_SIG_REFUSED,    /* the rank when this rank refused the call on its own, else UINT64_MAX (agree.c) */
  GC_SIG_FIELDS
} gc__sig_field_t;
typedef enum {
  GC_CALL_ALLREDUCE, GC_CALL_REDUCESCATTER, GC_CALL_REDUCESCATTER_2D, GC_CALL_ALLGATHER, GC_CALL_BROADCAST,
  GC_CALL_REDUCESCATTER_ALLREDUCE, GC_CALL_ALLREDUCE_ALLGATHER, GC_CALL_RMSNORM,
  GC_CALL_MPI_ALLREDUCE, GC_CALL_MPI_REDUCESCATTER, GC_CALL_MPI_ALLGATHER, GC_CALL_MPI_BROADCAST,
  GC_NUM_CALL_KINDS
} gc__call_kind_t;
typedef struct gc__call_sig {
  uint64_t v[GC_SIG_FIELDS];
} gc__call_sig_t;
/* A signature of kind `call`: count, dtype, op, root, comm's MPI chunk and, from o (may be NULL;
 * read as given, GC_DTYPE_SAME = dtype), the options that must agree. */
GC_HIDDEN gc__call_sig_t gc__call_sig(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype, gc_op_t op,
                                      int root, const gc_options_t *o);
/* Collective (callers ask comm->check_calls whether to call it): GC_ERR_INVALID_ARGUMENT on every
 * rank, naming the first field that differs and two ranks that differ in it, when the ranks'
 * signatures are not all the same. */
GC_HIDDEN gc_result_t gc__same_call(gc_comm_t comm, const gc__call_sig_t *sig);

/* agree.c: a public collective's outcome, r, made known to every rank of the call. On a
 * communicator whose calls all take the MPI path (no peer-to-peer kernels) and compare their
 * calls (GC_CHECK_CALLS auto or 1), a call that this rank refused on its own (bad argument, no
 * memory: an error before any comparison) or that did nothing here (count 0) meets its peers in
 * the comparison they make, so every rank returns at once: they with GC_ERR_REMOTE naming this
 * rank and its reason, or the difference in counts. Each public collective returns through it. */
GC_HIDDEN gc_result_t gc__call_end(gc_comm_t comm, gc__call_kind_t call, gc_result_t r);

/* mpi_path.c: the MPI path, called with comm's GPU current (GC_ON_DEVICE). Pointers may be host or device memory; device memory goes through
 * MPI directly when comm->cuda_aware, else through pinned host chunks with the copies of one
 * chunk overlapped with the communication of the previous one. Every call completes (stream
 * synchronized) before it returns. opts carries the epilogue (already validated). */
/* What a mixed operation (mixed.c) changes in the all-reduce across nodes: the epilogue's add
 * vector has another dtype than the input (a float32 partial sum plus a bfloat16 bias), and
 * GC_AVG divides by the parent communicator's rank count, not this one's. NULL: neither. */
typedef struct gc__mpi_mix {
  gc_dtype_t add_dtype;
  int avg_ranks;
} gc__mpi_mix_t;
GC_HIDDEN gc_result_t gc__mpi_allreduce(gc_comm_t comm, const void *send, void *recv, size_t count,
                                        gc_dtype_t dtype, gc_op_t op, const gc_options_t *opts,
                                        const gc__mpi_mix_t *mix, cudaStream_t stream);
/* Reduce-scatter with per-rank counts (counts[r] elements to rank r, taken in rank order from
 * send); recv gets counts[rank] elements. */
GC_HIDDEN gc_result_t gc__mpi_reducescatter(gc_comm_t comm, const void *send, void *recv,
                                            const size_t *counts, gc_dtype_t dtype, gc_op_t op,
                                            const gc_options_t *opts, cudaStream_t stream);
GC_HIDDEN gc_result_t gc__mpi_allgather(gc_comm_t comm, const void *send, void *recv, size_t count,
                                        gc_dtype_t dtype, cudaStream_t stream);
GC_HIDDEN gc_result_t gc__mpi_broadcast(gc_comm_t comm, const void *send, void *recv, size_t count,
                                        gc_dtype_t dtype, int root, cudaStream_t stream);
GC_HIDDEN void gc__mpi_release(gc_comm_t comm); /* frees the pinned chunks */
/* The MPI path's epilogue on host values (mpi_path.c has the rules); vals is overwritten. */
GC_HIDDEN void gc__host_epilogue(void *vals, gc_dtype_t dtype, size_t len, double scale, const void *add,
                                 gc_dtype_t add_dtype, void *out, gc_dtype_t out_dtype);

/* multimem.c: the NVLink multicast all-reduce (off unless GC_MULTIMEM=1 and no kill switch set). */
GC_HIDDEN gc_result_t gc__multimem_init(gc_comm_t comm);   /* collective; leaves mm.ready or mm.why */
GC_HIDDEN void gc__multimem_destroy(gc_comm_t comm);
/* a: the call's kernel arguments as coll.c makes them (peers, grid, dtype, op, epilogue). */
GC_HIDDEN gc_result_t gc__multimem_allreduce(gc_comm_t comm, struct gc_kargs *a, const void *send, void *recv,
                                             size_t count, cudaStream_t stream);
/* Rank r's part (len[r] elements at off[r] of send, contiguous) reduced into recv on rank r. */
GC_HIDDEN gc_result_t gc__multimem_reducescatter(gc_comm_t comm, struct gc_kargs *a, const void *send, void *recv,
                                                 const size_t *off, const size_t *len, cudaStream_t stream);
/* The bytes to bind: `want` rounded up to whole granules of both (0 when it cannot be). */
GC_HIDDEN size_t gc__multimem_bytes(size_t want, size_t mc_granularity, size_t alloc_granularity);
/* Local rank 0's file descriptor fd reaches every local rank as its own descriptor in *out (the
 * root's is fd itself) over a Unix socket (SCM_RIGHTS); collective over the node, bounded. */
GC_HIDDEN gc_result_t gc__share_fd(gc_comm_t comm, int fd, int *out);
/* A communicator of one rank copies up to this many bytes by cudaMemcpyAsync, more by the SMs. */
#define GC_SOLO_MEMCPY_MAX ((size_t)256 << 20)
/* Rebuilds comm->algo_table_text from the built-in table and the tuned rows. */
GC_HIDDEN gc_result_t gc__dispatch_describe(gc_comm_t comm);
/* "auto, oneshot, ...": every algorithm name, into buf. */
GC_HIDDEN const char *gc__algo_list(char *buf, size_t n);
/* The algorithm by writes under its former name: tune files carrying it load as "writes"; an
 * option or GC_ALGO naming it is refused with a message that names "writes". */
#define GC__ALGO_WRITES_ALIAS "twoshot_push"

/* Pointer classification (memory.c). */
typedef enum { GC_PTR_HOST, GC_PTR_DEVICE_OWN, GC_PTR_DEVICE_OTHER } gc__ptr_kind_t;
GC_HIDDEN gc__ptr_kind_t gc__ptr_kind(gc_comm_t comm, const void *ptr);
/* Frees what gc_buffer_alloc made and gc_buffer_free did not (gc_comm_destroy, device idle). */
GC_HIDDEN void gc__owned_release_all(gc_comm_t comm);

/* killswitch.c: is a multicast kill switch set? Writes the variable's name (kept for the message). */
GC_HIDDEN bool gc__multicast_kill_switch(const char **which);
/* Whether one switch's value means "multicast off" (off_is_zero: NCCL_NVLS_ENABLE's sense). */
GC_HIDDEN bool gc__switch_says_off(const char *value, bool off_is_zero);

#endif /* GC_INTERNAL_H */
