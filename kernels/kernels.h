/* kernels.h — the C face of the CUDA kernels: the shared signal layout and one launcher per
 * collective. Everything here is identical on every rank of a call. */
#ifndef GC_KERNELS_H
#define GC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "gpucoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest grid of a peer-to-peer kernel: one signal slot per (block, peer). */
#define GC_KMAX_BLOCKS 256
#define GC_KTHREADS 512
/* Packs (16 bytes) per 128-byte line: slices that peers touch start on lines (slice_lines). */
#define GC_LINE_PACKS 8

/* One rank's signal area, exported over CUDA IPC. flag[b][p] is written only by peer p's block b
 * (single writer) with the epoch of the barrier it reached; epoch[b] is this rank's own count of
 * barriers block b has passed. Epochs only grow, so a waiter tests flag >= epoch. */
typedef struct gc_ksignals {
  uint32_t flag[GC_KMAX_BLOCKS][GC_MAX_LOCAL_RANKS];
  uint32_t epoch[GC_KMAX_BLOCKS];
  uint32_t ll_call;    /* barrier-free (LL) calls made, which picks the generation */
  uint32_t ll_arrived; /* blocks of the current such call that have finished */
  uint32_t ll_started[GC_MAX_LOCAL_RANKS]; /* LL broadcast: rank r's last such call number + 1 */
} gc_ksignals_t;

/* The barrier-free (LL) collectives' area of one rank: GC_LL_GENS generations of
 * GC_LL_GEN_BYTES, all-ones (a NaN in every float type) wherever nothing has arrived. A call uses
 * generation ll_call % GC_LL_GENS; its reader writes all-ones back over what it read. */
#define GC_LL_GENS 3
#define GC_LL_GEN_BYTES (((size_t)8 << 20) + 4096) /* a multiple of 16: an LL broadcast's chunk */
#define GC_LL_BYTES ((size_t)GC_LL_GENS * GC_LL_GEN_BYTES)

/* The push area of one rank, for small all-reduces: peers write their input straight into it
 * (block b, source rank r, parity of block b's epoch), so a call needs one barrier and no copy-in.
 * A block's slot is fixed, so the parity alone keeps consecutive calls apart. Push blocks are
 * small (one 16-byte pack per thread) so that a few hundred KB spread over many SMs. */
#define GC_PUSH_THREADS 128
#define GC_PUSH_BLOCKS 128
#define GC_PUSH_BLOCK_BYTES (GC_PUSH_THREADS * 16)
#define GC_PUSH_MAX_BYTES ((size_t)GC_PUSH_BLOCKS * GC_PUSH_BLOCK_BYTES)
typedef struct gc_kpush {
  unsigned char data[2][GC_PUSH_BLOCKS][GC_MAX_LOCAL_RANKS][GC_PUSH_BLOCK_BYTES];
} gc_kpush_t;

typedef struct gc_kpeers {
  int rank, nranks;
  gc_ksignals_t *sig[GC_MAX_LOCAL_RANKS]; /* every rank's signal area, mapped here */
  gc_kpush_t *push[GC_MAX_LOCAL_RANKS];   /* every rank's push area, mapped here */
  unsigned char *ll[GC_MAX_LOCAL_RANKS];  /* every rank's LL area, mapped here */
  uint32_t *error;                        /* host-mapped; set to 1 when a wait times out */
  unsigned long long timeout_ns;
} gc_kpeers_t;

/* out = cast<out_dtype>(acc * scale + add[i]); acc in float (double for float64). */
typedef struct gc_kepilogue {
  int apply_scale;
  double scale;
  const void *add;  /* one value per output element; NULL = none */
  int add_dtype;    /* dtype of add: the collective's input dtype */
  int out_dtype;    /* gc_dtype_t of the output */
} gc_kepilogue_t;

/* A rank's output region in element units: `rows` rows of `width` elements, read from the inputs
 * at in_offset + i * in_ld + j and written to out at out_offset + i * width + j. */
typedef struct gc_kregion {
  size_t rows, width, in_offset, in_ld, out_offset;
} gc_kregion_t;

typedef struct gc_kargs {
  gc_kpeers_t peers;
  const void *in[GC_MAX_LOCAL_RANKS]; /* each rank's input as seen here (symmetric or staging) */
  void *pub[GC_MAX_LOCAL_RANKS];      /* each rank's publish area (two-shot, broadcast stage 1) */
  const void *send;   /* push all-reduce: this rank's input, read where it is */
  void *recv;         /* this rank's output */
  size_t count;       /* all-reduce: elements; all-gather/broadcast: elements per rank / total */
  int dtype, op;
  int root;
  gc_kepilogue_t ep;
  gc_kregion_t region[GC_MAX_LOCAL_RANKS]; /* reduce-scatter: every rank's output region */
  int blocks, threads;
  int pdl;
  size_t piece;      /* broadcast / reduce-scatter by writes: bytes per piece (broadcast: 0 = by size) */
  size_t slot_bytes; /* reduce-scatter by writes: inbox bytes per (slot, stream, source);
                        broadcast through staging: the bytes all its slots may take */
  size_t chunk;      /* two-shot by writes: elements per chunk (0 = all in one), a multiple of 16 */
  int ring;          /* broadcast by writes: 1 = along the ring, 0 = through owners */
  int control;       /* reduce-scatter by writes (its senders), rings through staging: 1 = the block's last warp
                        waits and signals (control_pipeline) */
} gc_kargs_t;

/* ONESHOT_WRITES: one-shot by writes, up to GC_PUSH_MAX_BYTES, through the push areas (grid fixed by the size). */
/* TWOSHOT_WRITES: two-shot by writes through inboxes (in[]) into pub[] (see allreduce.cu). */
typedef enum { GC_KALGO_ONESHOT = 1, GC_KALGO_TWOSHOT = 2, GC_KALGO_ONESHOT_WRITES = 3, GC_KALGO_TWOSHOT_WRITES = 4 } gc_kalgo_t;

/* All return a cudaError_t value (0 = launched). */
int gc_kernel_allreduce(const gc_kargs_t *a, gc_kalgo_t algo, cudaStream_t stream);
/* Barrier-free one-shot collectives through the LL areas (ll.cu): a->send, a->recv any device
 * pointers of this rank; float32/16, bf16 (all-gather: fp8 too); one generation must hold n rows
 * of the largest part rounded up to 16 bytes. Reduce: all-reduce of a->count elements, or with
 * scatter = 1 a reduce-scatter where region[q] (rows 1) is rank q's part. All-gather: a->count
 * elements per rank. */
int gc_kernel_reduce_ll(const gc_kargs_t *a, int scatter, cudaStream_t stream);
int gc_kernel_allgather_ll(const gc_kargs_t *a, cudaStream_t stream);
/* LL broadcast of root's a->send (a->count elements, float32/16, bf16, fp8) into every a->recv;
 * relay = 1 (3+ ranks): root writes each run of packs to one owner, which writes it on. */
int gc_kernel_broadcast_ll(const gc_kargs_t *a, int relay, cudaStream_t stream);
int gc_kernel_reducescatter(const gc_kargs_t *a, cudaStream_t stream);
int gc_kernel_allgather(const gc_kargs_t *a, cudaStream_t stream);
/* one_stage = 1: every rank pulls all of root's data; else scatter from root then all-gather. */
int gc_kernel_broadcast(const gc_kargs_t *a, int one_stage, cudaStream_t stream);
/* Broadcast by writes (a->send: root's data; a->pub[r]: rank r's output, from gc_mem_alloc). */
int gc_kernel_broadcast_push(const gc_kargs_t *a, cudaStream_t stream);
/* Broadcast by writes through staging, for any outputs (broadcast.cu): along the ring from root,
 * each piece into the next rank's staging a->in[next] at slot (k % GC_STAGED_SLOTS, block), in
 * the first a->slot_bytes (pieces of 4 KB or more, less on the smallest staging area); a->piece
 * as for gc_kernel_broadcast_push; a->control: the control warp. */
#define GC_STAGED_SLOTS 3
int gc_kernel_broadcast_staged(const gc_kargs_t *a, cudaStream_t stream);
/* All-gather by writes through staging, for any outputs: n such rings at once, rank g's part
 * (a->send, a->count elements on every rank) along the ring from g into every a->recv + g * part. */
int gc_kernel_allgather_staged(const gc_kargs_t *a, cudaStream_t stream);

/* Reduce-scatter by writes, pipelined (bywrites.cu). region[q] (rows 1) is rank q's part of every
 * rank's input a->send (any pointer); rank q reduces it into a->recv. The grid is 2S blocks, S <=
 * GC_BYWRITES_STREAMS streams of a sender and a reducer (all resident: at most one block per
 * SM). Every rank writes piece j of part q into rank q's inbox (a->in[q]: GC_BYWRITES_SLOTS slots x
 * GC_BYWRITES_STREAMS streams x (n - 1) sources of a->slot_bytes, fixed places, so calls of any
 * size follow one another) and signals it; rank q reduces the piece from its own input and the
 * inbox, in rank order. a->piece bytes per piece; stream s takes pieces s, s + S, ... */
#define GC_BYWRITES_STREAMS 64
#define GC_BYWRITES_SLOTS 3
int gc_kernel_reducescatter_bywrites(const gc_kargs_t *a, cudaStream_t stream);

/* Small collectives through the push areas (push.cu): parts of at most GC_PUSH_MAX_BYTES, grid
 * fixed by the size. Gather: a->send is this rank's part (root's, for broadcast), a->count its
 * elements. Reduce-scatter: a->send the whole input, region[q] (rows 1) rank q's part. */
int gc_kernel_push_gather(const gc_kargs_t *a, int broadcast, cudaStream_t stream);
int gc_kernel_push_reducescatter(const gc_kargs_t *a, cudaStream_t stream);

/* All-reduce through an NVLink multicast object (multimem.cu): a->send summed over the ranks into
 * a->recv (a->count elements, float32/16, bf16), through a->pub[0] (this rank's memory bound to
 * the object) and a->pub[1] (the multicast address), each holding a->count rounded up to 16 bytes. */
int gc_kernel_allreduce_multimem(const gc_kargs_t *a, cudaStream_t stream);
/* Reduce-scatter through the same object: a->region[r] is rank r's part of a->send (contiguous,
 * axis 0 or 1-D), reduced into a->recv on rank r; a->pub[0] / a->pub[1] as above, holding every
 * part at r * a->slot_bytes (a multiple of 16 at least each part's bytes). */
int gc_kernel_reducescatter_multimem(const gc_kargs_t *a, cudaStream_t stream);

/* All-reduce + RMSNorm + FP8 of `rows` rows of `cols` elements (rmsnorm.cu; gpucoll.h gives the
 * formulas), one row at a time per `parts` blocks, at most a->blocks blocks of a->threads threads; dtype
 * float32, float16, bfloat16. Where x (the reduced row) comes from:
 *   LOCAL  a->in[0] holds x already (the all-reduce ran before); no peers; residual NULL; x NULL
 *          or where x is copied to as the kernel goes;
 *   READS  the sum of every rank's a->in[] rows (after a barrier; another closes the kernel;
 *          one rank: none), plus residual, stored at x (NULL: in shared memory, as TWOSHOT);
 *   TWOSHOT as READS, but rank q normalizes only its rows (gc_partition's split of rows) into its
 *          publish area a->pub[q] (fp8 rows, then scales at pub_scales), x in shared memory (a
 *          block's share at most GC_KNORM_SHARED_ROW bytes; residual_out is not kept); a
 *          barrier; every rank copies every owner's rows and scales into out and scales;
 *   LL     every rank writes its rows (a->send, any pointer) into row `rank` of every rank's LL
 *          area and reads its own (ll.cu); no barrier. The whole input of every rank fits one
 *          generation; cols * size and gamma, residual and x sit on 16 bytes; without x a row
 *          (kept in shared memory) is at most GC_KNORM_SHARED_ROW bytes. */
#define GC_KNORM_SHARED_ROW 49152
typedef enum { GC_KNORM_LOCAL = 0, GC_KNORM_READS = 1, GC_KNORM_LL = 2, GC_KNORM_TWOSHOT = 3 } gc_knorm_mode_t;
/* MAX: the float sum is normalized and scale_ub bounds the row maximum (no x is read back: a
 * thread's packs after its first are summed again, so LL takes one pack a thread); ROUNDED: x,
 * rounded to the input dtype, is normalized and scale_ub bounds the scale (gpucoll.h). */
typedef enum { GC_KNORM_MAX = 0, GC_KNORM_ROUNDED = 1 } gc_knorm_numerics_t;
typedef struct gc_knorm {
  size_t rows, cols;
  const void *gamma;    /* cols values of the input dtype */
  float epsilon, weight_offset, scale_ub;
  const void *residual; /* rows x cols of the input dtype, or NULL */
  void *x;              /* rows x cols: where x goes (READS, LL), or NULL */
  void *out;            /* rows x cols of out_dtype (fp8) */
  float *scales;        /* rows */
  int out_dtype;
  gc_knorm_mode_t mode;
  gc_knorm_numerics_t numerics;
  int x_float;          /* LOCAL: a->in[0] holds x as float32 whatever the input dtype (MAX) */
  size_t pub_scales;    /* TWOSHOT: bytes from a->pub[q] to rank q's scales */
  int parts;            /* blocks per row, a thread-block cluster (compute capability 9.0+) when
                           more than 1; a->blocks is a multiple of it */
} gc_knorm_t;
int gc_kernel_rmsnorm_fp8(const gc_kargs_t *a, const gc_knorm_t *norm, cudaStream_t stream);

/* Every rank's stream meets here (one block): what each stream did before is visible after. */
int gc_kernel_barrier(const gc_kpeers_t *peers, cudaStream_t stream);

/* A local copy of bytes from src to dst (same GPU, any alignment) by at most max_blocks blocks:
 * the staged copy-engine path's copies out of staging. */
int gc_kernel_copy(void *dst, const void *src, size_t bytes, int max_blocks, cudaStream_t stream);

/* Device helpers used by the library. */
int gc_kernel_fill_random(void *buf, size_t count, int dtype, uint64_t seed, cudaStream_t stream);
/* Elementwise epilogue on device data in place of a fused one (MPI path, CUDA-aware). */
int gc_kernel_epilogue(void *out, const void *in, size_t count, int in_dtype,
                       const gc_kepilogue_t *ep, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GC_KERNELS_H */
