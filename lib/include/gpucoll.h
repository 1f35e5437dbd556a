/* gpucoll.h — the one public header of gpucoll, multi-GPU collectives for MPI applications. */
#ifndef GPUCOLL_H
#define GPUCOLL_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Contract
 * --------
 * - One MPI rank per GPU. gc_comm_init is collective over the MPI communicator it is given.
 * - Collectives take NCCL's argument order (send, recv, count, dtype, op, comm, stream), are
 *   enqueued on `stream` (a cudaStream_t passed as void*, NULL = the legacy default stream) and
 *   return before the data has moved when pointers are on the device. Host pointers (and every
 *   pointer on a rank without a GPU) take the MPI path, which completes before the call returns.
 * - In place when send == recv (for reduce-scatter and all-gather: when send is the rank's own
 *   slice of recv, as in NCCL). Any other overlap of send and recv is GC_ERR_INVALID_ARGUMENT.
 * - Every rank of a communicator must make the same sequence of collective calls with the same
 *   count, dtype, op, root and options; the launch configuration is chosen identically on all ranks.
 *   All ranks pass the same kind of pointer (all device or all host) in one call, and each of
 *   send and recv either at the same offset into the same gc_mem_alloc buffer on every rank
 *   (zero-copy; a call in place there is in place on every rank) or outside gc_mem_alloc
 *   buffers on every rank. Calls that differ are compared and refused with
 *   GC_ERR_INVALID_ARGUMENT on every rank where GC_CHECK_CALLS asks (by default the MPI path's
 *   calls; 1: every call; 0: none); elsewhere a rank that breaks this is not detected: its peers'
 *   waits time out (GC_TIMEOUT_MS), or results are wrong.
 * - The epilogue's add vector must hold the same values on every rank: the two-shot algorithms
 *   apply the add vector of the rank that reduces each slice.
 * - Every rank receives the same bits. The barrier-free algorithm (oneshot_ll) marks data not yet
 *   written with all-ones elements, so an element that is all ones (a NaN in every type it takes)
 *   arrives as another NaN (its top bit cleared), on every rank alike, a broadcast's root too.
 * - Errors found on the device (a peer that never arrived within GC_TIMEOUT_MS) make the kernel
 *   exit and are reported by the next call on the communicator or by gc_synchronize as
 *   GC_ERR_TIMEOUT; the communicator must then be destroyed (or aborted).
 * - A communicator is not thread safe: one host thread at a time may call into it.
 * - Outputs of functions are written only on success; only *_destroy / *_free release what
 *   *_init / *_alloc made.
 */

#define GC_VERSION_MAJOR 0
#define GC_VERSION_MINOR 1
#define GC_VERSION_PATCH 0
#define GC_VERSION_CODE (GC_VERSION_MAJOR * 10000 + GC_VERSION_MINOR * 100 + GC_VERSION_PATCH)

#if defined(_WIN32)
#define GC_API
#elif defined(__GNUC__)
#define GC_API __attribute__((visibility("default")))
#else
#define GC_API
#endif

/* Largest number of GPUs (ranks) of one node that the peer-to-peer kernels serve. */
#define GC_MAX_LOCAL_RANKS 8

/* ---------------------------------------------------------------------------------------------
 * Result codes: one list generates the enum, the names and the messages.
 * ------------------------------------------------------------------------------------------- */
#define GC_RESULT_MAP(XX)                                                                          \
  XX(SUCCESS, 0, "success")                                                                        \
  XX(ERR_INVALID_ARGUMENT, 1, "invalid argument; gc_comm_last_error() says which")                  \
  XX(ERR_INVALID_USAGE, 2, "invalid usage of the API; gc_comm_last_error() says what")              \
  XX(ERR_UNSUPPORTED, 3, "not supported in this build or on this system; see gc_comm_last_error()") \
  XX(ERR_CUDA, 4, "a CUDA call failed; set GC_DEBUG=WARN for details")                              \
  XX(ERR_MPI, 5, "an MPI call failed; set GC_DEBUG=WARN for details")                               \
  XX(ERR_SYSTEM, 6, "a system call or allocation failed; set GC_DEBUG=WARN for details")            \
  XX(ERR_TIMEOUT, 7, "a peer did not arrive within GC_TIMEOUT_MS; destroy the communicator")        \
  XX(ERR_REMOTE, 8, "another rank failed; check its log (GC_DEBUG=WARN)")                           \
  XX(ERR_INTERNAL, 9, "internal error in gpucoll; please report it with GC_DEBUG=INFO output")    \
  XX(ERR_STREAM_TIMEOUT, 10, "work on the stream (not gpucoll's) did not finish in time; the communicator stays usable")

typedef enum gc_result {
#define GC__RESULT_ENUM(name, value, msg) GC_##name = value,
  GC_RESULT_MAP(GC__RESULT_ENUM)
#undef GC__RESULT_ENUM
  GC_NUM_RESULTS
} gc_result_t;

/* "GC_ERR_TIMEOUT" for GC_ERR_TIMEOUT; "GC_UNKNOWN_RESULT" outside the list. */
GC_API const char *gc_result_name(gc_result_t result);
/* One sentence on what the code means and what to do next. */
GC_API const char *gc_strerror(gc_result_t result);

/* ---------------------------------------------------------------------------------------------
 * Data types and reduction operators.
 * XX(ENUM_SUFFIX, short name, size in bytes, reducible)
 * ------------------------------------------------------------------------------------------- */
#define GC_DTYPE_MAP(XX)              \
  XX(FLOAT32, "float32", 4, 1)        \
  XX(FLOAT16, "float16", 2, 1)        \
  XX(BFLOAT16, "bfloat16", 2, 1)      \
  XX(FLOAT64, "float64", 8, 1)        \
  XX(INT32, "int32", 4, 1)            \
  XX(INT64, "int64", 8, 1)            \
  XX(UINT8, "uint8", 1, 1)            \
  XX(FP8_E4M3, "fp8_e4m3", 1, 0)      \
  XX(FP8_E5M2, "fp8_e5m2", 1, 0)

typedef enum gc_dtype {
  GC_DTYPE_SAME = -1, /* in gc_options_t.out_dtype: the input dtype */
#define GC__DTYPE_ENUM(name, str, size, reducible) GC_##name,
  GC_DTYPE_MAP(GC__DTYPE_ENUM)
#undef GC__DTYPE_ENUM
  GC_NUM_DTYPES
} gc_dtype_t;

#define GC_OP_MAP(XX) \
  XX(SUM, "sum")      \
  XX(PROD, "prod")    \
  XX(MIN, "min")      \
  XX(MAX, "max")      \
  XX(AVG, "avg")

typedef enum gc_op {
#define GC__OP_ENUM(name, str) GC_##name,
  GC_OP_MAP(GC__OP_ENUM)
#undef GC__OP_ENUM
  GC_NUM_OPS
} gc_op_t;

/* Algorithms. AUTO picks from the dispatch table (GPU count, bytes); GC_ALGO overrides it. */
#define GC_ALGO_MAP(XX)                                                                         \
  XX(AUTO, "auto", "dispatch table (GPU count, bytes)")                                         \
  XX(ONESHOT, "oneshot", "every rank reads all peers and reduces its whole output")             \
  XX(TWOSHOT, "twoshot", "reduce-scatter of a 1/n slice, barrier, all-gather")                  \
  XX(WRITES, "writes", "by writes into the peers: all-reduce two-shot (scatter to owners, reduce, write back), reduce-scatter to owners, all-gather and broadcast along a ring or through owners") \
  XX(MPI, "mpi", "MPI path (CUDA-aware or staged through pinned host memory)")                  \
  XX(MULTIMEM, "multimem", "all-reduce and 1-D reduce-scatter sums (float32/16, bf16, no epilogue) reduced in the NVLink switch; off unless GC_MULTIMEM=1 and no kill switch set") \
  XX(COPYENGINE, "copyengine", "bytes move by copy engine, SMs reduce; outputs not from gc_mem_alloc go through staging") \
  XX(ONESHOT_LL, "oneshot_ll", "one-shot without barriers: a NaN sentinel marks data not yet written (float32/16, bf16; fp8 gathered or broadcast)")

typedef enum gc_algo {
#define GC__ALGO_ENUM(name, str, doc) GC_ALGO_##name,
  GC_ALGO_MAP(GC__ALGO_ENUM)
#undef GC__ALGO_ENUM
  GC_NUM_ALGOS
} gc_algo_t;

/* Names and sizes; the *_from_name functions return GC_ERR_INVALID_ARGUMENT for unknown names. */
GC_API const char *gc_dtype_name(gc_dtype_t dtype); /* "bfloat16"; NULL when out of range */
GC_API size_t gc_dtype_size(gc_dtype_t dtype);      /* bytes per element; 0 when out of range */
GC_API const char *gc_op_name(gc_op_t op);
GC_API const char *gc_algo_name(gc_algo_t algo);
GC_API gc_result_t gc_dtype_from_name(const char *name, gc_dtype_t *out);
GC_API gc_result_t gc_op_from_name(const char *name, gc_op_t *out);
GC_API gc_result_t gc_algo_from_name(const char *name, gc_algo_t *out);

/* ---------------------------------------------------------------------------------------------
 * Version, parameters, communicator.
 * ------------------------------------------------------------------------------------------- */
GC_API const char *gc_get_version(void); /* "0.1.0" */

/* The table of every environment knob (name, value in force, default, one-line doc), one row
 * a line. The string is owned by the library and valid for the life of the process. */
GC_API const char *gc_params_table(void);

typedef struct gc_comm *gc_comm_t;

#define GC_CONFIG_VERSION 1
typedef struct gc_config {
  unsigned version;     /* GC_CONFIG_VERSION */
  int device;           /* CUDA device to use; -1 = local rank modulo the device count */
  int use_gpu;          /* 0 = host-only rank even if GPUs are present (MPI path for everything) */
  int local_size;       /* ranks per node; 0 = GC_LOCAL_SIZE or MPI_Comm_split_type(SHARED) */
  size_t staging_bytes; /* per-rank registered staging area; 0 = GC_STAGING_BYTES */
  int timeout_ms;       /* bound on every device-side wait; 0 = GC_TIMEOUT_MS */
} gc_config_t;
#define GC_CONFIG_INIT {GC_CONFIG_VERSION, -1, 1, 0, 0, 0}

/* Collective over `comm` (which is duplicated; the caller keeps ownership of its handle).
 * *out is written only on success. cfg == NULL means defaults. */
GC_API gc_result_t gc_comm_init(gc_comm_t *out, MPI_Comm comm, const gc_config_t *cfg);
/* The same with a Fortran handle (MPI_Comm_c2f), for bindings such as mpi4py's. */
GC_API gc_result_t gc_comm_init_f(gc_comm_t *out, MPI_Fint comm, const gc_config_t *cfg);
/* Collective: waits for outstanding work on every rank's device, unmaps peers, frees everything
 * init made (with any gc_mem_alloc buffers left). The wait is bounded by twice GC_TIMEOUT_MS: if
 * a device still has work then (not gpucoll's: a stuck kernel of another library, say), every
 * rank gets GC_ERR_STREAM_TIMEOUT, nothing is freed and the communicator stays usable; call it
 * again on every rank once that work ends. A rank that never comes does not stop the others. */
GC_API gc_result_t gc_comm_destroy(gc_comm_t comm);
/* Not collective: tells device waiters to stop, then MPI_Abort()s the duplicated communicator.
 * For a rank that knows its peers will never arrive. Does not return on success. */
GC_API gc_result_t gc_comm_abort(gc_comm_t comm, int errorcode);

/* The detailed message of the last failed call on `comm` (or of the calling thread when comm is
 * NULL or the failure was in gc_comm_init). Never NULL; "" when nothing failed. */
GC_API const char *gc_comm_last_error(gc_comm_t comm);

/* Queries. */
GC_API gc_result_t gc_comm_rank(gc_comm_t comm, int *out);
GC_API gc_result_t gc_comm_size(gc_comm_t comm, int *out);
GC_API gc_result_t gc_comm_local_rank(gc_comm_t comm, int *out);
GC_API gc_result_t gc_comm_local_size(gc_comm_t comm, int *out);
GC_API gc_result_t gc_comm_node_count(gc_comm_t comm, int *out);
/* The CUDA device this rank uses; -1 for a host-only rank. */
GC_API gc_result_t gc_comm_device(gc_comm_t comm, int *out);
/* 1 when this rank's GPU can read and write the GPU of local rank `peer` (probed with an IPC
 * open, not only cudaDeviceCanAccessPeer); 1 for peer == own local rank when on a GPU. */
GC_API gc_result_t gc_comm_peer_access(gc_comm_t comm, int peer, int *out);
/* 1 when every local GPU reaches every other: the peer-to-peer kernels are usable. */
GC_API gc_result_t gc_comm_p2p_ready(gc_comm_t comm, int *out);
/* 1 when the MPI library handles device pointers itself (MPIX_Query_cuda_support or MPICH's). */
GC_API gc_result_t gc_comm_cuda_aware_mpi(gc_comm_t comm, int *out);
/* A non-blocking stream owned by the communicator (NULL on host-only ranks), for callers that
 * have none of their own. */
GC_API gc_result_t gc_comm_stream(gc_comm_t comm, void **out);
/* The dispatch table in force, as text (one row a line). Owned by the communicator. */
GC_API const char *gc_comm_algo_table(gc_comm_t comm);

/* Waits for `stream`, then reports any error a kernel recorded (GC_ERR_TIMEOUT). The wait is
 * bounded by twice GC_TIMEOUT_MS: work on the stream that is not gpucoll's and never ends (an
 * NCCL kernel whose peers never came, say) gives GC_ERR_STREAM_TIMEOUT instead of a hang. So do
 * gc_time, gc_memcpy, gc_fill_random, the MPI path's waits for the caller's stream, and the waits
 * for the whole device in gc_comm_destroy and gc_mem_free. */
GC_API gc_result_t gc_synchronize(gc_comm_t comm, void *stream);

/* ---------------------------------------------------------------------------------------------
 * Per-call options and the elementwise epilogue (the C form of an output lambda):
 *   out[i] = cast<out_dtype>( reduced[i] * scale + add[i] )
 * scale == 1 and add == NULL leave values as they are; add has the collective's input dtype and
 * one element per output element. GC_AVG is GC_SUM with scale 1/nranks. When out_dtype differs
 * from the input dtype, send and recv must not overlap. add may be recv itself (a residual
 * updated in place) when out_dtype is the input dtype; any other overlap of add and recv is
 * GC_ERR_INVALID_ARGUMENT.
 * ------------------------------------------------------------------------------------------- */
/* Wire formats (gc_options_t.wire): what gc_allreduce_ex moves between ranks. NATIVE: the input
 * dtype, exact as ever (the default). FP8: e4m3 codes with a power-of-two scale per group of
 * wire_group elements (32, 64 or 128; 0 = 32), for float32, float16 and bfloat16 inputs. BF16:
 * bfloat16, for float32 inputs. FP8 and BF16 take sum and avg, accumulate in float32, and give
 * every rank the same bits, within the error bound of docs/wire-format.md (fp8: about 1/16 of each
 * term; bf16: about 1/256). Only gc_allreduce_ex takes them (on host buffers through MPI, and on
 * device buffers of one node's peer-to-peer GPUs); every other call, and any other dtype or op,
 * is refused with GC_ERR_INVALID_ARGUMENT (GC_ERR_UNSUPPORTED where the path cannot run them). */
#define GC_WIRE_MAP(XX) \
  XX(NATIVE, "native")  \
  XX(FP8, "fp8")        \
  XX(BF16, "bf16")

typedef enum gc_wire {
#define GC__WIRE_ENUM(name, str) GC_WIRE_##name,
  GC_WIRE_MAP(GC__WIRE_ENUM)
#undef GC__WIRE_ENUM
  GC_NUM_WIRES
} gc_wire_t;

/* "fp8" for GC_WIRE_FP8 (NULL when out of range); GC_ERR_INVALID_ARGUMENT for unknown names. */
GC_API const char *gc_wire_name(gc_wire_t wire);
GC_API gc_result_t gc_wire_from_name(const char *name, gc_wire_t *out);

#define GC_OPTIONS_VERSION 2
typedef struct gc_options {
  unsigned version;     /* GC_OPTIONS_VERSION */
  gc_algo_t algo;       /* GC_ALGO_AUTO = dispatch table */
  int max_blocks;       /* upper bound on the grid, 0 to 256 (more: GC_ERR_INVALID_ARGUMENT); 0 = dispatch table */
  int pdl;              /* programmatic dependent launch (the kernel starts while the stream's
                         * previous kernel ends, and waits for its memory): 1 on, -1 off,
                         * 0 = GC_PDL (default: on for GPUs of compute capability 9.0 and up) */
  double scale;         /* epilogue multiplier */
  const void *add;      /* epilogue addend (bias / residual), input dtype, or NULL */
  gc_dtype_t out_dtype; /* dtype of recv; GC_DTYPE_SAME = input dtype */
  gc_wire_t wire;       /* gc_allreduce_ex's wire format; GC_WIRE_NATIVE elsewhere */
  int wire_group;       /* GC_WIRE_FP8: elements per scale, 32, 64 or 128; 0 = 32 (others: 0) */
} gc_options_t;
#define GC_OPTIONS_INIT {GC_OPTIONS_VERSION, GC_ALGO_AUTO, 0, 0, 1.0, NULL, GC_DTYPE_SAME, GC_WIRE_NATIVE, 0}

/* ---------------------------------------------------------------------------------------------
 * Collectives. Counts are elements. opts == NULL means GC_OPTIONS_INIT.
 * ------------------------------------------------------------------------------------------- */
GC_API gc_result_t gc_allreduce(const void *sendbuf, void *recvbuf, size_t count, gc_dtype_t dtype,
                                gc_op_t op, gc_comm_t comm, void *stream);
GC_API gc_result_t gc_allreduce_ex(const void *sendbuf, void *recvbuf, size_t count,
                                   gc_dtype_t dtype, gc_op_t op, gc_comm_t comm, void *stream,
                                   const gc_options_t *opts);

/* sendbuf holds size * recvcount elements; rank r receives the reduction of elements
 * [r * recvcount, (r + 1) * recvcount). In place when sendbuf + rank * recvcount == recvbuf. */
GC_API gc_result_t gc_reducescatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                    gc_dtype_t dtype, gc_op_t op, gc_comm_t comm, void *stream);
GC_API gc_result_t gc_reducescatter_ex(const void *sendbuf, void *recvbuf, size_t recvcount,
                                       gc_dtype_t dtype, gc_op_t op, gc_comm_t comm,
                                       void *stream, const gc_options_t *opts);

/* 2-D reduce-scatter of a row-major rows x cols matrix (the same shape on every rank).
 * axis 0: rank r receives rows [gc_partition(rows)) as a contiguous block x cols;
 * axis 1: rank r receives columns [gc_partition(cols)) of every row, row-major rows x block.
 * Uneven splits: see gc_partition. The epilogue's add vector has the output's shape. */
GC_API gc_result_t gc_reducescatter_2d(const void *sendbuf, void *recvbuf, size_t rows,
                                       size_t cols, int axis, gc_dtype_t dtype, gc_op_t op,
                                       gc_comm_t comm, void *stream, const gc_options_t *opts);

/* recvbuf holds size * sendcount elements, rank r's contribution at r * sendcount.
 * In place when sendbuf == recvbuf + rank * sendcount. */
GC_API gc_result_t gc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                gc_dtype_t dtype, gc_comm_t comm, void *stream);
GC_API gc_result_t gc_allgather_ex(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   gc_dtype_t dtype, gc_comm_t comm, void *stream,
                                   const gc_options_t *opts);

/* sendbuf is read on root only (may be NULL elsewhere); in place on root when send == recv. */
GC_API gc_result_t gc_broadcast(const void *sendbuf, void *recvbuf, size_t count, gc_dtype_t dtype,
                                int root, gc_comm_t comm, void *stream);
GC_API gc_result_t gc_broadcast_ex(const void *sendbuf, void *recvbuf, size_t count,
                                   gc_dtype_t dtype, int root, gc_comm_t comm, void *stream,
                                   const gc_options_t *opts);

/* ---------------------------------------------------------------------------------------------
 * Mixed tensor/data-parallel operations, for communicators that span several nodes (hosts, or
 * GC_LOCAL_SIZE / gc_config_t.local_size groups of one host), every node with the same number L
 * of ranks. A rank's node group is the L ranks of its node; its cross group is the ranks with
 * its local rank on every node (gc_comm_local_rank, gc_comm_node_count). The part inside a node
 * runs the peer-to-peer kernels where they can (options.algo, max_blocks and pdl steer it); the
 * part across nodes runs on MPI, so a call returns with its stream synchronized, and cannot be
 * captured into a CUDA graph (one node: no MPI part, and capture works where the collective's
 * does, but for gc_allreduce_allgather with an epilogue, whose one-rank all-reduce runs on the
 * MPI path). The first call of a communicator sets up its node and cross groups (collective, as
 * every call is). Nodes of different sizes: GC_ERR_UNSUPPORTED.
 *
 * gc_reducescatter_allreduce: sendbuf holds L * recvcount elements; recvbuf receives block
 * local_rank reduced over every rank of the communicator: first inside each node (half types
 * summed in float32 and kept in float32), then across nodes in node order. Bits are identical on
 * the ranks of one cross group, and may differ from gc_allreduce's (another order). GC_AVG divides
 * by the communicator's size (int32 and uint8 averages across nodes: GC_ERR_UNSUPPORTED, their
 * partial sums would wrap). The epilogue (scale, add of recvcount elements, out_dtype) applies
 * once, to the final value. In place when recvbuf == sendbuf + local_rank * recvcount.
 *
 * gc_allreduce_allgather: sendbuf holds sendcount elements, reduced across the cross group (GC_AVG
 * divides by the node count; the epilogue applies to that result); recvbuf receives the L results
 * of the node group, local rank l's at l * sendcount, identical on every rank. In place when
 * sendbuf == recvbuf + local_rank * sendcount (same dtype).
 * ------------------------------------------------------------------------------------------- */
GC_API gc_result_t gc_reducescatter_allreduce(const void *sendbuf, void *recvbuf, size_t recvcount,
                                              gc_dtype_t dtype, gc_op_t op, gc_comm_t comm, void *stream,
                                              const gc_options_t *opts);
GC_API gc_result_t gc_allreduce_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                          gc_dtype_t dtype, gc_op_t op, gc_comm_t comm, void *stream,
                                          const gc_options_t *opts);

/* ---------------------------------------------------------------------------------------------
 * Mixed layouts: any TP x DP split of a communicator, numbered as FlashInfer's MixedCommHandler
 * numbers it (docs/mixed.md has the table). The communicator's nodes (hosts, or GC_LOCAL_SIZE /
 * gc_config_t.local_size groups) must hold the same number L of ranks, consecutive: world rank
 * = inter_rank * L + local_rank, with inter_rank the node's index. Then, TP innermost:
 *   local_rank = local_tp_rank + local_dp_rank * local_tp_size   (L = local_tp_size * local_dp_size)
 *   inter_rank = inter_tp_rank + inter_dp_rank * inter_tp_size   (nodes = inter_tp_size * inter_dp_size)
 *   tp_rank    = local_tp_rank + inter_tp_rank * local_tp_size,  tp_size = local_tp_size * inter_tp_size
 *   dp_rank    = local_dp_rank + inter_dp_rank * local_dp_size,  dp_size = local_dp_size * inter_dp_size
 * A TP group is the ranks of one dp_rank (in tp_rank order), a DP group those of one tp_rank.
 * Sizes of 0 take FlashInfer's defaults: both of a pair 0: TP is the whole of it (local_tp_size
 * = L, inter_tp_size = the node count, DP sizes 1); one 0: the other divides into it.
 *
 * The valid operations follow from the sizes as FlashInfer's get_valid_op_list has them: TP and
 * DP both > 1: ALLREDUCE_ALLGATHER and REDUCESCATTER_ALLREDUCE; only TP > 1: ALLREDUCE; otherwise
 * (one rank too) ALLGATHER and REDUCESCATTER. Another operation is GC_ERR_INVALID_USAGE.
 * Arguments, in-place rules, epilogues and GC_AVG are those of the collectives above, with the
 * TP and DP groups in place of the communicator; failures are recorded on the communicator
 * (gc_comm_last_error(comm)).
 *   gc_mixed_allreduce: all-reduce over the TP group (here the whole communicator).
 *   gc_mixed_allgather, gc_mixed_reducescatter: over the DP group (the whole communicator).
 *   gc_mixed_allreduce_allgather: sendbuf (sendcount) all-reduced over the TP group (GC_AVG
 *     divides by tp_size; the epilogue applies to that result), then gathered over the DP group:
 *     recvbuf (dp_size * sendcount) holds dp rank d's result at d * sendcount, the same bits on
 *     every rank. In place when sendbuf == recvbuf + dp_rank * sendcount.
 *   gc_mixed_reducescatter_allreduce: sendbuf holds dp_size * recvcount elements; recvbuf
 *     receives block dp_rank reduced over every rank: over the DP group first (half types summed
 *     in float32 and kept so), then over the TP group in tp_rank order; GC_AVG divides by the
 *     communicator's size (int32 and uint8 averages: GC_ERR_UNSUPPORTED, the partial sums would
 *     wrap); the epilogue applies once, to the final value; the same bits on every rank of a TP
 *     group. In place when recvbuf == sendbuf + dp_rank * recvcount.
 * options.algo, max_blocks and pdl steer the pure operations, and the DP part of the two mixed
 * ones (gc_mixed_algos lists what they may name); the TP all-reduce of ALLREDUCE_ALLGATHER takes
 * the dispatch table's choice (the peer-to-peer kernels inside one node, MPI across nodes), that
 * of REDUCESCATTER_ALLREDUCE runs on MPI. A mixed operation with a part on MPI returns with its
 * stream synchronized and cannot be captured into a CUDA graph (GC_ERR_INVALID_USAGE);
 * ALLREDUCE_ALLGATHER inside one node runs on the kernels and can be.
 * ------------------------------------------------------------------------------------------- */
typedef struct gc_mixed *gc_mixed_t;

#define GC_MIXED_CONFIG_VERSION 1
typedef struct gc_mixed_config {
  unsigned version;  /* GC_MIXED_CONFIG_VERSION */
  int local_tp_size; /* TP ranks of one node; 0 = default */
  int local_dp_size; /* DP ranks of one node; 0 = default */
  int inter_tp_size; /* nodes one TP group spans; 0 = default */
  int inter_dp_size; /* nodes one DP group spans; 0 = default */
} gc_mixed_config_t;
#define GC_MIXED_CONFIG_INIT {GC_MIXED_CONFIG_VERSION, 0, 0, 0, 0}

/* The operations, in FlashInfer's MixedCommOp order. */
#define GC_MIXED_OP_MAP(XX)                         \
  XX(ALLREDUCE, "allreduce")                        \
  XX(ALLGATHER, "allgather")                        \
  XX(REDUCESCATTER, "reducescatter")                \
  XX(ALLREDUCE_ALLGATHER, "allreduce_allgather")    \
  XX(REDUCESCATTER_ALLREDUCE, "reducescatter_allreduce")

typedef enum gc_mixed_op {
#define GC__MIXED_OP_ENUM(name, str) GC_MIXED_##name,
  GC_MIXED_OP_MAP(GC__MIXED_OP_ENUM)
#undef GC__MIXED_OP_ENUM
  GC_NUM_MIXED_OPS
} gc_mixed_op_t;

/* One rank's place in the layout. */
typedef struct gc_mixed_layout {
  int world_rank, world_size;
  int local_rank, local_size, inter_rank, inter_size;
  int local_tp_rank, local_tp_size, local_dp_rank, local_dp_size;
  int inter_tp_rank, inter_tp_size, inter_dp_rank, inter_dp_size;
  int tp_rank, tp_size, dp_rank, dp_size;
} gc_mixed_layout_t;

/* "reducescatter_allreduce"; NULL when out of range. */
GC_API const char *gc_mixed_op_name(gc_mixed_op_t op);
/* Collective over comm: checks cfg (NULL = defaults; the same on every rank) against comm's nodes
 * (GC_ERR_INVALID_ARGUMENT saying which size does not fit; GC_ERR_UNSUPPORTED for nodes of
 * different sizes or not consecutive) and makes the TP and DP groups. comm must outlive the
 * handle, and is used by it: one host thread at a time for both. *out is written on success. */
GC_API gc_result_t gc_mixed_init(gc_mixed_t *out, gc_comm_t comm, const gc_mixed_config_t *cfg);
/* Collective: frees the groups and the handle (not comm); call it before gc_comm_destroy(comm).
 * GC_ERR_STREAM_TIMEOUT (a group's device stayed busy, as in gc_comm_destroy): the handle stays;
 * call it again on every rank once that work ends. */
GC_API gc_result_t gc_mixed_destroy(gc_mixed_t mixed);
/* This rank's numbering, whole or a field at a time. */
GC_API gc_result_t gc_mixed_get_layout(gc_mixed_t mixed, gc_mixed_layout_t *out);
GC_API gc_result_t gc_mixed_tp_rank(gc_mixed_t mixed, int *out);
GC_API gc_result_t gc_mixed_tp_size(gc_mixed_t mixed, int *out);
GC_API gc_result_t gc_mixed_dp_rank(gc_mixed_t mixed, int *out);
GC_API gc_result_t gc_mixed_dp_size(gc_mixed_t mixed, int *out);
/* 1 when op is an operation of this layout (above); 0 otherwise, or for a NULL handle. */
GC_API int gc_mixed_op_valid(gc_mixed_t mixed, gc_mixed_op_t op);
/* The algorithms options.algo may name for op here, GC_ALGO_AUTO first: the first `capacity`
 * go to algos (may be NULL when capacity is 0), *count gets how many there are (0 for an
 * operation of another layout). What the group that runs the steered part reaches decides: on
 * the peer-to-peer kernels what gc_autotune tries for that collective (and MULTIMEM where it is
 * set up), else MPI alone. A call may still refuse one for its dtype or size, with a message. */
GC_API gc_result_t gc_mixed_algos(gc_mixed_t mixed, gc_mixed_op_t op, gc_algo_t *algos, int capacity,
                                  int *count);

/* Collective over the handle's communicator: gc_autotune (below) on this rank's TP group, then on
 * its DP group, so that each part of the handle's operations dispatches by rows measured on the
 * group it runs on, while all groups of an axis tune at once, as they run. A group that is the
 * communicator itself (the other axis has one rank) gets the communicator's rows. The rows last
 * as long as the handle (gc_tune_save saves a communicator's own). */
GC_API gc_result_t gc_mixed_autotune(gc_mixed_t mixed, size_t max_bytes, gc_dtype_t dtype);

GC_API gc_result_t gc_mixed_allreduce(const void *sendbuf, void *recvbuf, size_t count, gc_dtype_t dtype,
                                      gc_op_t op, gc_mixed_t mixed, void *stream, const gc_options_t *opts);
GC_API gc_result_t gc_mixed_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, gc_dtype_t dtype,
                                      gc_mixed_t mixed, void *stream, const gc_options_t *opts);
GC_API gc_result_t gc_mixed_reducescatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                          gc_dtype_t dtype, gc_op_t op, gc_mixed_t mixed, void *stream,
                                          const gc_options_t *opts);
GC_API gc_result_t gc_mixed_allreduce_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                                gc_dtype_t dtype, gc_op_t op, gc_mixed_t mixed, void *stream,
                                                const gc_options_t *opts);
GC_API gc_result_t gc_mixed_reducescatter_allreduce(const void *sendbuf, void *recvbuf, size_t recvcount,
                                                    gc_dtype_t dtype, gc_op_t op, gc_mixed_t mixed,
                                                    void *stream, const gc_options_t *opts);

/* ---------------------------------------------------------------------------------------------
 * Fused all-reduce + RMSNorm + FP8 quantization of a row-major rows x cols matrix (the same shape
 * on every rank), the step between tensor-parallel layers of a transformer. Inputs are float32,
 * float16 or bfloat16; FP8_MAX is 448 for e4m3, 57344 for e5m2. With s the sum over ranks in
 * float, in rank order, every step in float and rounded in the order written:
 *   f[i][j]   = s[i][j] + residual[i][j]                  (no residual: s[i][j])
 *   x[i][j]   = dtype( f[i][j] )                          rounded once, as gc_allreduce_ex with
 *                                                         options.add = residual; residual_out gets x
 *   w[j]      = gamma[j] + weight_offset
 * norm.numerics = GC_NORM_MAX (the default; Modular MAX's fused kernels): the float sum f is
 * normalized, and scale_ub bounds the row's largest magnitude
 *   r[i]      = 1 / sqrt( (sum_j f[i][j]^2) / cols + epsilon )
 *   y[i][j]   = (f[i][j] * r[i]) * w[j]
 *   m[i]      = max_j |y[i][j]|, then at most scale_ub when scale_ub > 0
 *   scales[i] = m[i] / FP8_MAX                            (0 for a row of zeros)
 *   out[i][j] = fp8( y[i][j] * (1 / scales[i]) )          (0 where scales[i] is 0)
 * norm.numerics = GC_NORM_ROUNDED: x, the sum rounded to the input dtype, is normalized, the scale
 * has a floor, and scale_ub bounds the scale itself
 *   r[i]      = 1 / sqrt( (sum_j x[i][j]^2) / cols + epsilon )
 *   scales[i] = max( r[i] * max_j |x[i][j] * w[j]| / FP8_MAX, 1 / (FP8_MAX * 512) ), then at
 *               most scale_ub when scale_ub > 0
 *   out[i][j] = fp8( ((x[i][j] * r[i]) * w[j]) * (1 / scales[i]) )
 * fp8() rounds to nearest even and saturates at FP8_MAX (a bound that binds clips the row's
 * largest values). The sums of squares and the maxima go in the kernel's fixed order (the host
 * path's: column order), so the last bits of a scale may differ between the device and the host
 * path; every rank gets all rows, bit-identical on all ranks of one call. residual_out (when not
 * NULL) may be the residual itself (updated in place). out (rows x cols fp8) and scales (rows
 * floats) are written on every rank; they, like residual_out, must not overlap sendbuf or each
 * other. gamma has cols values of the input dtype. residual and residual_out are given on every
 * rank or on none; any pointer may sit at any alignment, not necessarily the same on every rank.
 * A struct of version 1 (one without the numerics field) means GC_NORM_ROUNDED.
 * options: algo (ONESHOT_LL: one fused kernel without barriers, every rank writing its rows into
 * every rank's LL area, for inputs of whole 16-byte rows up to 8 MB / GPU count (GC_NORM_MAX: and
 * a block's share of a row at most one 16-byte pack a thread, 512 a block); ONESHOT: one
 * fused kernel that reads every rank's rows after a barrier; TWOSHOT: without residual_out one
 * fused kernel where each rank normalizes 1/n of the rows and all gather the fp8 rows, with it
 * the two-shot all-reduce into residual_out, then a normalizing kernel; any other: that
 * all-reduce into residual_out (or a temporary), then a normalizing kernel; AUTO: ONESHOT_LL where
 * the all-reduce takes it at this size and it fits, else ONESHOT), max_blocks, pdl; its epilogue
 * fields must stay at their defaults (the residual is this struct's). Host pointers, and devices
 * without peer-to-peer access, take the MPI path's all-reduce (host buffers normalize on the host).
 * ------------------------------------------------------------------------------------------- */
#define GC_NORM_NUMERICS_MAP(XX)                                                         \
  XX(MAX, "max", "the float32 sum is normalized; scale_ub bounds the row maximum (Modular MAX)") \
  XX(ROUNDED, "rounded", "the sum rounded to the input dtype is normalized; scale_ub bounds the scale")

typedef enum gc_norm_numerics {
#define GC__NORM_ENUM(name, str, doc) GC_NORM_##name,
  GC_NORM_NUMERICS_MAP(GC__NORM_ENUM)
#undef GC__NORM_ENUM
  GC_NUM_NORM_NUMERICS
} gc_norm_numerics_t;

/* "max" for GC_NORM_MAX; NULL out of range. gc_norm_numerics_from_name: GC_ERR_INVALID_ARGUMENT
 * for other names. */
GC_API const char *gc_norm_numerics_name(gc_norm_numerics_t numerics);
GC_API gc_result_t gc_norm_numerics_from_name(const char *name, gc_norm_numerics_t *out);

#define GC_RMSNORM_FP8_VERSION 2
typedef struct gc_rmsnorm_fp8 {
  unsigned version;      /* GC_RMSNORM_FP8_VERSION (1: a struct without numerics, GC_NORM_ROUNDED) */
  const void *gamma;     /* cols weights, input dtype; required */
  float epsilon;         /* > 0 or 0; added to the mean square */
  float weight_offset;   /* 0, or 1 for norms that scale by (1 + gamma) */
  float scale_ub;        /* > 0: upper bound of every row's maximum (GC_NORM_MAX) or scale
                          * (GC_NORM_ROUNDED); 0 = none */
  const void *residual;  /* rows x cols, input dtype, added to the sum; NULL = none */
  void *residual_out;    /* rows x cols, input dtype, receives x; NULL = not kept */
  gc_dtype_t out_dtype;  /* GC_FP8_E4M3 or GC_FP8_E5M2 */
  gc_norm_numerics_t numerics; /* version 2 on; GC_NORM_MAX (0) = the default */
} gc_rmsnorm_fp8_t;
#define GC_RMSNORM_FP8_INIT {GC_RMSNORM_FP8_VERSION, NULL, 1e-6f, 0.0f, 0.0f, NULL, NULL, GC_FP8_E4M3, GC_NORM_MAX}

GC_API gc_result_t gc_allreduce_rmsnorm_fp8(const void *sendbuf, void *outbuf, float *scales, size_t rows,
                                            size_t cols, gc_dtype_t dtype, const gc_rmsnorm_fp8_t *norm,
                                            gc_comm_t comm, void *stream, const gc_options_t *opts);

/* Host-side element access with the library's own conversions: element i of a host array of
 * dtype as a double, and a double stored into one with round-to-nearest-even (fp8 saturating to
 * its largest finite value, integers wrapping). For checks, tools and bindings. An out-of-range
 * dtype reads as NaN and stores nothing. */
GC_API double gc_element_get(const void *host_buf, size_t i, gc_dtype_t dtype);
GC_API void gc_element_set(void *host_buf, size_t i, gc_dtype_t dtype, double value);

/* How `total` items split over `parts` parts: the first total % parts parts get one more.
 * Writes the offset and length of part `index`. */
GC_API void gc_partition(size_t total, int parts, int index, size_t *offset, size_t *length);

/* ---------------------------------------------------------------------------------------------
 * Plan query: the plan a call would take, without running anything. gc_plan_query takes a basic
 * collective's arguments as the call takes them (count: all-reduce and broadcast the whole,
 * reduce-scatter recvcount, all-gather sendcount; op for reductions, root for the broadcast) and
 * writes the plan that call would take now on this rank: the same checks (a call the collective
 * would refuse is refused here with the same code and message) and the same planner, with the
 * options, GC_ALGO, the tuned rows and the built-in table in force. It is not collective and
 * talks to no other rank (calls are not compared under GC_CHECK_CALLS); every rank derives the
 * same plan from the same arguments, as the call does. No stream: the MPI path's refusal inside
 * a CUDA graph capture is the call's alone. *out must be initialized with GC_PLAN_INIT and is
 * written only on success.
 * XX(ENUM_SUFFIX, name, what moves the data)
 * ------------------------------------------------------------------------------------------- */
#define GC_PLAN_PATH_MAP(XX)                                                              \
  XX(NONE, "none", "nothing moves (count 0)")                                             \
  XX(KERNELS, "kernels", "peer-to-peer kernels: the SMs read or write the peers' GPUs")   \
  XX(COPYENGINE, "copyengine", "copy engines move the bytes, the SMs reduce")             \
  XX(MPI, "mpi", "the MPI path (host buffers, no peer access, several nodes)")            \
  XX(LOCAL, "local", "one rank: a copy (or the epilogue's kernel) on its own GPU")                \
  XX(HIERARCHICAL, "hierarchical", "several nodes: each node's part on its GPUs, MPI between the nodes")

typedef enum gc_plan_path {
#define GC__PLAN_PATH_ENUM(name, str, doc) GC_PLAN_##name,
  GC_PLAN_PATH_MAP(GC__PLAN_PATH_ENUM)
#undef GC__PLAN_PATH_ENUM
  GC_NUM_PLAN_PATHS
} gc_plan_path_t;

typedef enum gc_collective {
  GC_COLLECTIVE_ALLREDUCE,
  GC_COLLECTIVE_REDUCESCATTER,
  GC_COLLECTIVE_ALLGATHER,
  GC_COLLECTIVE_BROADCAST,
  GC_NUM_COLLECTIVES
} gc_collective_t;

#define GC_PLAN_VERSION 1
typedef struct gc_plan {
  unsigned version;     /* GC_PLAN_VERSION */
  gc_plan_path_t path;  /* what moves the data */
  gc_algo_t algo;       /* the algorithm that runs (gc_algo_name); MPI on the MPI path, AUTO for none */
  gc_algo_t fell_from;  /* the algorithm chosen before a documented fallback (AUTO: none) */
  int from_table;       /* 1: the algorithm is the built-in table's (not asked for, GC_ALGO or tuned) */
  int blocks, threads;  /* the grid of the call's kernel; 0 where none runs (MPI, cudaMemcpyAsync) */
  size_t chunk_bytes;   /* bytes a step takes: of the input (all-reduce, broadcast) or of one
                         * rank's part (reduce-scatter, all-gather); all of it when one step
                         * does; 0 where the algorithm does not go in such steps */
  size_t piece_bytes;   /* bytes per piece of the kernels by writes; 0: none, or by size */
  int staged;           /* 1: the data passes through the library's own areas (staging, inboxes,
                         * LL or push areas, the multicast buffer); 0: peers read and write the
                         * caller's gc_mem_alloc buffers where they are, one rank copies locally,
                         * or the MPI path (which stages device buffers through pinned host
                         * memory unless gc_comm_cuda_aware_mpi) */
} gc_plan_t;
#define GC_PLAN_INIT {GC_PLAN_VERSION, GC_PLAN_NONE, GC_ALGO_AUTO, GC_ALGO_AUTO, 0, 0, 0, 0, 0, 0}

GC_API gc_result_t gc_plan_query(gc_plan_t *out, gc_collective_t coll, const void *sendbuf,
                                 const void *recvbuf, size_t count, gc_dtype_t dtype, gc_op_t op,
                                 int root, gc_comm_t comm, const gc_options_t *opts);
/* "kernels" for GC_PLAN_KERNELS; NULL when out of range. */
GC_API const char *gc_plan_path_name(gc_plan_path_t path);

/* ---------------------------------------------------------------------------------------------
 * Autotuning. gc_autotune times every algorithm this communicator can run, for each collective at
 * sizes 1 KB, 4 KB, ... up to max_bytes (dtype elements, graph replay on GPUs), and makes the
 * fastest at each size the communicator's choice for the sizes up to it (the last for everything
 * larger); the built-in table's choice stays unless another is more than 3% faster. For a dtype
 * gc_allreduce_rmsnorm_fp8 takes, on GPUs with peer access, it also times the fused RMSNorm's
 * kernels (oneshot_ll, oneshot, twoshot) on rows of 4096 elements (one row below 4096), giving
 * its 'rmsnorm' rows; the RMSNorm composed of an all-reduce follows the all-reduce rows. Collective;
 * rank 0's measurement (the maximum over ranks) decides and is broadcast, so every rank
 * dispatches alike. Explicit per-call algorithms and GC_ALGO still win over it.
 * gc_tune_save writes the tuned rows (rank 0 writes; collective) as text: a 'gpus N' line, one
 * '<collective> <max bytes|any> <algorithm>' line a row, and last 'end <rows>' with its newline.
 * It writes a new file beside `path` (same directory), flushes it to disk (fflush, fsync) and
 * renames it over `path`: a save that fails (disk full, a file size limit, a read-only directory)
 * returns GC_ERR_SYSTEM on every rank and leaves any old file at `path` as it was.
 * gc_tune_load reads a saved file on rank 0 and broadcasts it; every rank gets the same rows or
 * the same refusal (GC_ERR_INVALID_ARGUMENT), and a refusal leaves the rows in force alone. It
 * refuses a file made for another GPU count, anything gc_tune_save would not write, and a file
 * that does not end with its 'end <rows>' line or whose row count differs from it: a file cut at
 * any byte is refused with a message saying it is truncated, never loaded as a smaller table.
 * A file without that line is refused alike, whatever wrote it (it cannot be told from a truncated
 * one); make a new one with gc_autotune and gc_tune_save. gc_tune_reset goes back to the built-in table.
 * ------------------------------------------------------------------------------------------- */
GC_API gc_result_t gc_autotune(gc_comm_t comm, size_t max_bytes, gc_dtype_t dtype);
GC_API gc_result_t gc_tune_save(gc_comm_t comm, const char *path);
GC_API gc_result_t gc_tune_load(gc_comm_t comm, const char *path);
GC_API gc_result_t gc_tune_reset(gc_comm_t comm);

/* ---------------------------------------------------------------------------------------------
 * Memory. gc_mem_alloc is collective and symmetric: every rank asks for the same size, and the
 * collectives use such buffers in place (zero-copy) instead of copying through staging.
 * On a host-only rank it returns host memory. gc_mem_free is collective too, and waits for every
 * rank's device as gc_comm_destroy does (GC_ERR_STREAM_TIMEOUT: nothing freed, call it again).
 * gc_buffer_alloc is local: device memory of the communicator's GPU (on_device = 1) or pinned
 * host memory (on_device = 0; plain host memory on host-only ranks). gc_buffer_free takes only
 * what gc_buffer_alloc made on the same communicator, and waits for the device as gc_mem_free
 * does (on this rank alone); gc_comm_destroy frees what is left.
 * Device allocations of 2 MB or more are made in whole 2 MB pages: copy engines are up to 29%
 * slower into allocations of other sizes while the SMs are busy (H200). Size your own so too.
 * ------------------------------------------------------------------------------------------- */
GC_API gc_result_t gc_mem_alloc(gc_comm_t comm, size_t bytes, void **out);
GC_API gc_result_t gc_mem_free(gc_comm_t comm, void *ptr);
GC_API gc_result_t gc_buffer_alloc(gc_comm_t comm, size_t bytes, int on_device, void **out);
GC_API gc_result_t gc_buffer_free(gc_comm_t comm, void *ptr);
/* Blocking copy between any two pointers (host or device). */
GC_API gc_result_t gc_memcpy(gc_comm_t comm, void *dst, const void *src, size_t bytes);
/* Fills buf (host or device) with count values of dtype drawn from a generator keyed by
 * (seed, index): floats uniform in [-1, 1), integers in [-8, 8) (uint8 in [0, 16)). */
GC_API gc_result_t gc_fill_random(gc_comm_t comm, void *buf, size_t count, gc_dtype_t dtype,
                                  uint64_t seed);

/* ---------------------------------------------------------------------------------------------
 * Timing, for gpucoll-bench, gpucoll-lua and the bindings. `fn(arg, stream)` enqueues one
 * operation on `stream`. gc_time runs `warmup` calls, then times `iters` back-to-back calls with
 * CUDA events (graph = 0) or captures `iters` calls into one CUDA graph and times its replay
 * (graph = 1). The result is microseconds per call, the maximum over the ranks of `comm`.
 * Collective. On host-only ranks it uses the wall clock between barriers; graph is then refused.
 * ------------------------------------------------------------------------------------------- */
typedef gc_result_t (*gc_timed_fn)(void *arg, void *stream);
GC_API gc_result_t gc_time(gc_comm_t comm, gc_timed_fn fn, void *arg, void *stream, int warmup,
                           int iters, int graph, double *us_per_call);

#ifdef __cplusplus
}
#endif

#endif /* GPUCOLL_H */
