/* gc_plan.h — the planning layer: what a call is (gc__call_t), what the communicator offers it
 * (gc__facts_t), and the plan (gc__plan_t) that gc__plan derives from the two. Planning is host
 * arithmetic on values every rank shares, so every rank derives the same plan; plan.c is the only
 * file that writes a plan, and the executors only read it. */
#ifndef GC_PLAN_H
#define GC_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gc_switches.h"
#include "gpucoll.h"

#ifndef GC_HIDDEN
#define GC_HIDDEN __attribute__((visibility("hidden")))
#endif

/* The collectives gc__plan plans, then the fused all-reduce + RMSNorm, which has tuned rows of
 * its own (gc__plan_rmsnorm_algo reads them) but is planned apart. */
typedef enum { GC_COLL_ALLREDUCE, GC_COLL_REDUCESCATTER, GC_COLL_ALLGATHER, GC_COLL_BROADCAST,
               GC_NUM_COLLS, GC_COLL_RMSNORM = GC_NUM_COLLS, GC_NUM_TUNED_KINDS } gc__coll_t;

/* The copy-engine all-reduce's reduce half (the ce_allreduce switch). */
enum { GC_CE_AR_AUTO, GC_CE_AR_COPIES, GC_CE_AR_READS, GC_CE_AR_WRITES };

/* Tuned rows (tune.c): an algorithm per collective (or the RMSNorm) for sizes up to max_bytes. */
typedef struct gc__tuned {
  gc__coll_t coll;
  size_t max_bytes; /* SIZE_MAX: any larger size */
  gc_algo_t algo;
} gc__tuned_t;

/* The experiment switches (switches.c declares each once: name, range, built-in value, doc). */
GC_HIDDEN void gc__switches_default(gc__switches_t *sw);
/* key to value, as GC_SWITCHES or a tune file's 'set' line gives it; `where` starts the message
 * ("GC_SWITCHES:"). */
GC_HIDDEN gc_result_t gc__switches_set(gc__switches_t *sw, const char *key, const char *value, const char *where);
/* A comma list of key=value (GC_SWITCHES), applied in order over *sw. */
GC_HIDDEN gc_result_t gc__switches_parse(gc__switches_t *sw, const char *list, const char *where);
GC_HIDDEN int gc__switches_count(void);
GC_HIDDEN const char *gc__switch_key(int i);                          /* 0 <= i < gc__switches_count() */
GC_HIDDEN int64_t gc__switch_value(const gc__switches_t *sw, int i); /* as a number */
/* A 'set KEY VALUE' line for every switch off its built-in value (gc_tune_save). */
GC_HIDDEN void gc__switches_write(const gc__switches_t *sw, FILE *f);
/* One line a switch, its value in force and its doc (gc_comm_algo_table); the bytes written. */
GC_HIDDEN size_t gc__switches_describe(const gc__switches_t *sw, char *buf, size_t cap);

/* What the communicator offers a call: the same on every rank of a node. */
typedef struct gc__facts {
  gc_comm_t comm; /* where a refusal's message is recorded; NULL: per thread */
  int size;       /* ranks of the communicator */
  int local_size; /* GPUs of this node */
  int node_count;
  int nodes_in_blocks; /* every node local_size ranks, node k ranks k L .. k L + L - 1 */
  int all_gpu;         /* every rank has a GPU */
  int p2p_ready, sm_count, cc_major;
  gc_algo_t forced_algo; /* GC_ALGO; AUTO = none */
  int max_blocks;        /* GC_MAX_BLOCKS; 0 = none */
  size_t staging_bytes;  /* per rank */
  int ce_inbox_fits;     /* the copy-engine reduce-scatter's inboxes fit the staging area */
  int multimem_asked, multimem_ready; /* GC_MULTIMEM=1; set up (else why says why not) */
  const char *multimem_why;
  gc__switches_t sw;
  const gc__tuned_t *tuned;
  int tuned_count;
} gc__facts_t;

/* A call as planning sees it. Buffer facts (sym_*, *_off16, in_place) hold on every rank alike:
 * a gc_mem_alloc buffer sits at the same offset on every rank. */
typedef struct gc__call {
  gc__coll_t coll;
  size_t bytes;    /* the table's size: all-gather the whole output, reduce-scatter the whole input */
  size_t ll_bytes; /* what one LL generation must hold; 0: LL cannot carry the call */
  size_t count;    /* elements: all-reduce, broadcast the whole; all-gather each rank's part */
  size_t es, os;   /* element sizes of input and output */
  gc_algo_t algo;  /* the options' algorithm; AUTO = none */
  int max_blocks;  /* the options' cap; 0 = none */
  int all_device;  /* every buffer on this rank's GPU */
  int epilogue;    /* scale, add or cast */
  int in_place;
  int sym_in, sym_out;         /* input, output inside gc_mem_alloc buffers */
  int send_off16, recv_off16;  /* their addresses off 16-byte boundaries */
  /* reduce-scatter */
  int axis;                  /* 1: column blocks */
  size_t rows, cols;         /* axis 1 */
  size_t most_part;          /* elements of the largest part */
  int parts_on_packs;        /* every part starts on a 16-byte boundary of the input */
  /* the wire format the options asked for (gc__wire_check's: a GC_WIRE_FMT_* and its group) */
  int wire, wire_group;
  /* the hierarchical path cannot compose it: a GC_AVG of an integer type (two steps would round
   * twice), a reduce-scatter of half types with an add vector (its cross-node part reduces
   * float32 partials, the vector has the input's type) */
  int flat_only;
  int equal_parts; /* reduce-scatter: contiguous parts of one size, in rank order */
} gc__call_t;

/* GC_PATH_HIER: several nodes, the call composed of collectives on the node and cross-node
 * groups (hierarchy.c); the groups plan their parts. */
typedef enum { GC_PATH_MPI, GC_PATH_SOLO, GC_PATH_PEERS, GC_PATH_HIER } gc__path_t;

/* How the chosen algorithm runs (the executors switch on this). */
typedef enum {
  GC_FORM_NONE,
  GC_FORM_SOLO_COPY,      /* one rank: cudaMemcpyAsync (blocks 0) or the copy kernel */
  GC_FORM_SOLO_EPILOGUE,  /* one rank: the one-shot kernel for the epilogue */
  GC_FORM_LL,             /* barrier-free through the LL areas (ll.cu) */
  GC_FORM_MULTIMEM,       /* NVLink multicast (multimem.c) */
  GC_FORM_PUSH,           /* small: through the push areas, one barrier (push.cu) */
  GC_FORM_READS,          /* peers read inputs in place or staged copies, chunk by chunk */
  GC_FORM_TWOSHOT_WRITES, /* all-reduce: two-shot by writes into inboxes */
  GC_FORM_RS_WRITES,      /* reduce-scatter by writes (bywrites.cu) */
  GC_FORM_RING_STAGED,    /* all-gather, broadcast by writes along the ring through staging */
  GC_FORM_BCAST_WRITES,   /* broadcast by writes into gc_mem_alloc outputs (owners or ring) */
  GC_FORM_CE,             /* copy engines into gc_mem_alloc outputs (copyengine.c) */
  GC_FORM_CE_STAGED,      /* copy engines through staging into any output */
  GC_FORM_CE_COPIES,      /* copy-engine all-reduce, both halves by copies */
  GC_FORM_WIRE            /* all-reduce over a compressed wire through the staging inputs (wire.cu) */
} gc__form_t;

typedef struct gc__plan {
  gc__path_t path;
  gc_algo_t algo;      /* the algorithm that runs */
  gc_algo_t fell_from; /* the algorithm chosen before a documented fallback; AUTO: none */
  gc__form_t form;
  int blocks, threads; /* the grid */
  int from_table;      /* the algorithm came from the built-in table */
  gc_algo_t plain;     /* dispatch step: the table row's choice for buffers peers cannot use */
  int kernel;          /* GC_FORM_READS all-reduce: a gc_kalgo_t (one-shot or two-shot kernel) */
  int in_zero;         /* peers read the input where it is (else copies in staging) */
  int out_sym;         /* results land in gc_mem_alloc outputs (else in staging) */
  size_t chunk;        /* elements (axis 1: rows) per step; the whole call when one step */
  size_t piece;        /* bytes per piece of the kernels by writes; 0 = by size in the kernel */
  size_t slot_bytes;   /* their inbox slot */
  int control;         /* the senders' control warp */
  int ring;            /* broadcast by writes: along the ring (else through owners); LL: relay */
  int ce_form;         /* GC_FORM_CE all-reduce: GC_CE_AR_READS or _WRITES */
  int ce_chunks;       /* GC_FORM_CE_COPIES: pipeline stages */
  int by_copies;       /* GC_FORM_CE_STAGED all-reduce: the reduce half by copies */
  int wire, wire_group; /* the wire format (GC_WIRE_FMT_*) and fp8 group: the call's, never another */
} gc__plan_t;

/* The shape of a reduce-scatter by writes whose largest part has `most` bytes on a grid of
 * `blocks`: blocks (senders and reducers), piece and slot bytes, control warp. */
typedef struct gc__bywrites_shape {
  int blocks;
  size_t piece, slot_bytes;
  int control;
} gc__bywrites_shape_t;

/* Half of the staging area holds inputs, the other half what two-shot and broadcast publish. */
static inline size_t gc__staging_half(size_t staging_bytes) { return (staging_bytes / 2) & ~(size_t)255; }

/* The plan for a call, or a refusal (recorded on f->comm) when the call asked for an algorithm
 * that cannot run it; the table's choices fall back as documented in plan.c instead. */
GC_HIDDEN gc_result_t gc__plan(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *plan);
/* Only the algorithm and grid (the dispatch step of gc__plan), for the table's tests. */
GC_HIDDEN gc_result_t gc__plan_dispatch(const gc__facts_t *f, const gc__call_t *c, gc__plan_t *plan);
GC_HIDDEN gc__bywrites_shape_t gc__bywrites_shape(const gc__facts_t *f, size_t most, int blocks);
/* The inbox slot of the reduce-scatter by writes (0: under 2 GPUs). */
GC_HIDDEN size_t gc__bywrites_slot(const gc__facts_t *f);

/* The algorithms gc_autotune times for call c (c->algo ignored) on a communicator with facts f:
 * its collective's candidates (the two-stage broadcast among them) that the planner takes as
 * asked. Writes them to out, returns how many (tune.c). */
GC_HIDDEN int gc__tune_candidates(const gc__facts_t *f, const gc__call_t *c, gc_algo_t out[GC_NUM_ALGOS]);

/* The fused all-reduce + RMSNorm: the algorithm for a call of `bytes` (forced: the options' or
 * GC_ALGO's; AUTO: the tuned rmsnorm rows', else by the all-reduce table), and the grid of its
 * kernels. */
GC_HIDDEN gc_algo_t gc__plan_rmsnorm_algo(const gc__facts_t *f, gc_algo_t asked, size_t bytes, int p2p);
GC_HIDDEN gc__plan_t gc__plan_rmsnorm_grid(const gc__facts_t *f, int max_blocks, size_t rows, size_t cols, size_t es,
                                           int by_elements, int ll, int *parts);

/* dispatch.c: the built-in table. */
typedef struct gc__row {
  gc__coll_t coll;
  int min_ranks, max_ranks;
  size_t max_bytes;   /* the row applies up to and including this size */
  gc_algo_t algo;
  gc_algo_t fallback; /* LL rows: the choice for dtypes and sizes LL cannot take (AUTO: none) */
  gc_algo_t plain;    /* the choice when peers cannot use the buffer (AUTO: the same) */
} gc__row_t;
/* Every kernel grid's cap from the table (GC_MAX_BLOCKS and the options lower it). */
#define GC_TABLE_MAX_BLOCKS 132
/* The built-in table is a row set per architecture (compute capability major): rows measured on
 * one apply to it; every other architecture gets the default set (dispatch.c). */
GC_HIDDEN const gc__row_t *gc__table_row(int cc_major, gc__coll_t coll, int n, size_t bytes);
/* The row set for cc_major: its rows, their count, and (when name is not NULL) what it is for. */
GC_HIDDEN int gc__table_rows(int cc_major, const gc__row_t **rows, const char **name);
/* The table's choice for (coll, bytes) on n GPUs of compute capability cc_major, for an input
 * from gc_mem_alloc (symmetric_input) or not. GC_ALGO_AUTO when no row matches. */
GC_HIDDEN gc_algo_t gc__table_choice(int cc_major, int n, gc__coll_t coll, size_t bytes, int symmetric_input);
/* Whether the copy-engine all-reduce of `bytes` on n GPUs goes by copies when it can. */
GC_HIDDEN int gc__ce_allreduce_by_copies(int cc_major, int n, size_t bytes);
GC_HIDDEN const char *gc__coll_name(gc__coll_t coll);

#endif /* GC_PLAN_H */
