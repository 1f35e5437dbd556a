/* plan_query.c — gc_plan_query: a collective's own entry runs up to its plan, which is taken
 * here instead of executed, so the query and the call cannot disagree; and the record of the
 * last plan a call took. */
#include <stdlib.h>
#include <string.h>

#include "gc_entry.h"

/* gc__plan_call's last step: every plan is recorded; under gc_plan_query it is handed over and
 * GC__PLANNED stops the entry before anything runs. */
gc_result_t gc__plan_record(gc_comm_t comm, const gc__plan_t *plan) {
  if (!comm->last_plan) comm->last_plan = malloc(sizeof *comm->last_plan); /* freed with comm */
  if (comm->last_plan) {
    *comm->last_plan = *plan;
    comm->plans_made++;
  }
  if (!comm->plan_only) return GC_SUCCESS;
  *comm->plan_only = *plan;
  return GC__PLANNED;
}

static const char *const path_names[GC_NUM_PLAN_PATHS] = {
#define GC__PLAN_PATH_NAME(name, str, doc) str,
    GC_PLAN_PATH_MAP(GC__PLAN_PATH_NAME)
#undef GC__PLAN_PATH_NAME
};

const char *gc_plan_path_name(gc_plan_path_t path) {
  return (int)path >= 0 && path < GC_NUM_PLAN_PATHS ? path_names[path] : NULL;
}

/* Whether the form passes the data through the library's own areas (gc_plan_t.staged). */
static int staged_form(gc__coll_t coll, const gc__plan_t *p) {
  switch (p->form) {
    case GC_FORM_READS: return !p->in_zero;              /* else peers read the input where it is */
    case GC_FORM_BCAST_WRITES: return 0;                  /* into the gc_mem_alloc outputs */
    case GC_FORM_CE: return coll == GC_COLL_REDUCESCATTER || (coll == GC_COLL_ALLREDUCE && p->ce_form == GC_CE_AR_WRITES);
    case GC_FORM_NONE:
    case GC_FORM_SOLO_COPY:
    case GC_FORM_SOLO_EPILOGUE: return 0;
    default: return 1; /* LL, push areas, inboxes, the multicast buffer, staging rings and copies */
  }
}

/* The public view of an internal plan for a call of element size es. */
gc_plan_t gc__plan_public(gc__coll_t coll, const gc__plan_t *p, size_t es) {
  gc_plan_t out = GC_PLAN_INIT;
  const int ce = p->form == GC_FORM_CE || p->form == GC_FORM_CE_STAGED || p->form == GC_FORM_CE_COPIES;
  out.path = p->path == GC_PATH_MPI ? GC_PLAN_MPI : p->path == GC_PATH_SOLO ? GC_PLAN_LOCAL
             : p->path == GC_PATH_HIER ? GC_PLAN_HIERARCHICAL
             : ce                   ? GC_PLAN_COPYENGINE
                                    : GC_PLAN_KERNELS;
  out.algo = p->algo;
  out.fell_from = p->fell_from;
  out.from_table = p->from_table;
  out.blocks = p->blocks;
  out.threads = p->threads;
  out.chunk_bytes = p->path == GC_PATH_PEERS ? p->chunk * es : 0;
  out.piece_bytes = p->piece;
  out.staged = p->path == GC_PATH_PEERS && staged_form(coll, p);
  return out;
}

/* The collective's entry (coll.c) with the plan taken instead of run, and no comparison across
 * ranks (GC_CHECK_CALLS=1 would make the query collective). */
static gc_result_t plan_of(gc__plan_t *plan, int *planned, gc_collective_t coll, const void *send, const void *recv,
                           size_t count, gc_dtype_t dtype, gc_op_t op, int root, gc_comm_t comm,
                           const gc_options_t *opts) {
  const int check_calls = comm->check_calls;
  comm->check_calls = GC_CHECK_NONE;
  comm->plan_only = plan;
  void *out = (void *)recv; /* nothing is written: the entry stops at its plan */
  gc_result_t r;
  switch (coll) {
    case GC_COLLECTIVE_ALLREDUCE: r = gc__allreduce_impl(send, out, count, dtype, op, comm, NULL, opts, 0); break;
    case GC_COLLECTIVE_REDUCESCATTER: r = gc__reducescatter_impl(send, out, count, dtype, op, comm, NULL, opts); break;
    case GC_COLLECTIVE_ALLGATHER: r = gc__allgather_impl(send, out, count, dtype, comm, NULL, opts); break;
    default: r = gc__broadcast_impl(send, out, count, dtype, root, comm, NULL, opts); break;
  }
  comm->plan_only = NULL;
  comm->check_calls = check_calls;
  *planned = r == GC__PLANNED;
  return *planned ? GC_SUCCESS : r; /* GC_SUCCESS unplanned: count 0, nothing moves */
}

gc_result_t gc_plan_query(gc_plan_t *out, gc_collective_t coll, const void *send, const void *recv, size_t count,
                          gc_dtype_t dtype, gc_op_t op, int root, gc_comm_t comm, const gc_options_t *opts) {
  GC_CHECK(gc__comm_check(comm));
  if (!out) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_plan_query: out is NULL");
  if (out->version != GC_PLAN_VERSION)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_plan_t.version is %u, expected %u (use GC_PLAN_INIT)",
                   out->version, GC_PLAN_VERSION);
  if ((int)coll < 0 || coll >= GC_NUM_COLLECTIVES)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_plan_query: collective %d is not a gc_collective_t", (int)coll);
  gc__plan_t plan;
  memset(&plan, 0, sizeof plan);
  int planned = 0, prev = 0;
  GC_CHECK(gc__device_enter(comm, &prev));
  gc_result_t r = plan_of(&plan, &planned, coll, send, recv, count, dtype, op, root, comm, opts);
  gc__device_leave(comm, prev);
  GC_CHECK(r);
  static const gc__coll_t colls[GC_NUM_COLLECTIVES] = {GC_COLL_ALLREDUCE, GC_COLL_REDUCESCATTER, GC_COLL_ALLGATHER,
                                                       GC_COLL_BROADCAST};
  gc_plan_t result = GC_PLAN_INIT;
  if (planned) result = gc__plan_public(colls[coll], &plan, gc_dtype_size(dtype));
  *out = result;
  return GC_SUCCESS;
}
