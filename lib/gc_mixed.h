/* gc_mixed.h — the mixed-layout handle (mixed_layout.c makes it, mixed.c runs its operations):
 * FlashInfer's TP x DP numbering of one rank and the groups of its TP and DP axes. */
#ifndef GC_MIXED_H
#define GC_MIXED_H

#include "gc_internal.h"

struct gc_mixed {
  gc_comm_t comm;       /* the communicator the layout splits (not owned) */
  gc_mixed_layout_t at; /* this rank's numbering */
  /* The ranks of this rank's dp_rank (TP) and tp_rank (DP). Where the other axis has one rank a
   * group is comm itself, else a communicator of the handle's own. */
  gc_comm_t tp, dp;
};

/* FlashInfer's numbering of world_rank in a world of nodes of local_size consecutive ranks, with
 * cfg's sizes (0: defaults). GC_ERR_INVALID_ARGUMENT (recorded on comm, which may be NULL) when a
 * size does not fit. Pure arithmetic: every rank computes the same sizes from the same inputs. */
GC_HIDDEN gc_result_t gc__mixed_number(gc_comm_t comm, const gc_mixed_config_t *cfg, int world_size, int local_size,
                                       int world_rank, gc_mixed_layout_t *out);
/* A handle that is not NULL and whose communicator is live. */
GC_HIDDEN gc_result_t gc__mixed_check(gc_mixed_t m);
/* GC_ERR_INVALID_USAGE (recorded on m->comm) unless op is an operation of m's layout; fn opens the message. */
GC_HIDDEN gc_result_t gc__mixed_require(gc_mixed_t m, gc_mixed_op_t op, const char *fn);

/* A call composed of collectives on comm's node and cross-node groups (mixed.c, hierarchy.c):
 * capture refused (`why`: the cross-node part runs on MPI), the call compared over the whole
 * communicator before any group moves data (GC_CHECK_CALLS=auto: each group alone would compare
 * only its own ranks), then the groups (made on the first such call). */
GC_HIDDEN gc_result_t gc__groups_begin(gc_comm_t comm, void *stream, gc__call_kind_t call, size_t count, gc_dtype_t dtype,
                                       gc_op_t op, const gc_options_t *opts, const void *send, const char *why);
/* The result r of a call on one of comm's groups (named `name` in the message); a failure is
 * reported on comm too. */
GC_HIDDEN gc_result_t gc__on_group(gc_comm_t comm, const char *name, gc_comm_t group, gc_result_t r);

#endif
