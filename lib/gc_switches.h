/* gc_switches.h — the dispatch table's experiment switches as values: the communicator holds
 * them (gc_internal.h), the plan reads them (gc_plan.h), switches.c declares, parses and writes
 * them. */
#ifndef GC_SWITCHES_H
#define GC_SWITCHES_H

#include <stddef.h>

/* The experiment switches of the kernels by writes, the copy engines, LL and the hierarchical
 * collectives (switches.c: GC_SWITCHES, tune files). */
typedef struct gc__switches {
  size_t push_piece;     /* bytes per piece of the kernels by writes; 0 = by size */
  int push_schedule;     /* broadcast by writes: 1 ring, 0 owners, -1 by size */
  int push_control;      /* kernels by writes: 1 control warp, 0 none, -1 by collective and size */
  int ce_allreduce;      /* a GC_CE_AR_* value */
  int ce_chunks;         /* 1-GC_CE_MAX_CHUNKS */
  int staged_blocks;     /* 1-128 */
  size_t ll_relay_bytes; /* LL broadcast on 3+ GPUs through owners from this size */
  int ll_threads;        /* 32-512, a multiple of 32 */
  int hierarchical;      /* across nodes: 1 always, 0 never (flat MPI), -1 device buffers */
} gc__switches_t;

#endif
