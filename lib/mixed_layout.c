/* mixed_layout.c — mixed TP x DP layouts (gc_mixed_t): FlashInfer's rank numbering, the checks of
 * the sizes against the communicator, the TP and DP groups, and the queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_mixed.h"
#include "gc_plan.h"

static const char *const mixed_op_names[] = {
#define GC__MIXED_OP_NAME(name, str) str,
    GC_MIXED_OP_MAP(GC__MIXED_OP_NAME)
#undef GC__MIXED_OP_NAME
};

const char *gc_mixed_op_name(gc_mixed_op_t op) {
  return (int)op >= 0 && op < GC_NUM_MIXED_OPS ? mixed_op_names[op] : NULL;
}

/* One axis (local: the ranks of a node; inter: the nodes) split into TP x DP as FlashInfer's
 * ParallelInfo does: neither given, TP takes all of it; one given, it must divide the total and
 * the other is the quotient; both given, their product must be the total. */
static gc_result_t split_axis(gc_comm_t comm, const char *axis, const char *total_is, int total, int tp, int dp,
                              int *tp_out, int *dp_out) {
  if (tp < 0 || dp < 0)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_init: %s_%s_size %d: use 0 (the default) or a positive size",
                   axis, tp < 0 ? "tp" : "dp", tp < 0 ? tp : dp);
  if (tp == 0 && dp == 0) {
    tp = total;
    dp = 1;
  } else if (tp == 0 || dp == 0) {
    int given = tp ? tp : dp;
    if (total % given != 0)
      return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_init: %s_%s_size %d does not divide %s", axis,
                     tp ? "tp" : "dp", given, total_is);
    if (tp) dp = total / tp;
    else tp = total / dp;
  } else if ((long long)tp * dp != total) {
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_init: %s_tp_size %d x %s_dp_size %d = %lld, not %s", axis,
                   tp, axis, dp, (long long)tp * dp, total_is);
  }
  *tp_out = tp;
  *dp_out = dp;
  return GC_SUCCESS;
}

gc_result_t gc__mixed_number(gc_comm_t comm, const gc_mixed_config_t *cfg, int world_size, int local_size,
                             int world_rank, gc_mixed_layout_t *out) {
  gc_mixed_config_t c = GC_MIXED_CONFIG_INIT;
  if (cfg && cfg->version != GC_MIXED_CONFIG_VERSION)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_init: config version %u, this library takes %u (GC_MIXED_CONFIG_INIT)",
                   cfg->version, GC_MIXED_CONFIG_VERSION);
  if (cfg) c = *cfg;
  if (local_size < 1 || world_size % local_size != 0 || world_rank < 0 || world_rank >= world_size)
    return GC_FAIL(comm, GC_ERR_INTERNAL, "gc__mixed_number: rank %d of %d in nodes of %d", world_rank, world_size, local_size);
  gc_mixed_layout_t a = {0};
  a.world_rank = world_rank;
  a.world_size = world_size;
  a.local_size = local_size;
  a.inter_size = world_size / local_size;
  a.local_rank = world_rank % local_size;
  a.inter_rank = world_rank / local_size;
  char local_is[96], inter_is[96];
  snprintf(local_is, sizeof local_is, "the %d ranks of a node (GC_LOCAL_SIZE or gc_config_t.local_size)", local_size);
  snprintf(inter_is, sizeof inter_is, "the %d nodes of the communicator (%d ranks, %d a node)", a.inter_size, world_size,
           local_size);
  GC_CHECK(split_axis(comm, "local", local_is, local_size, c.local_tp_size, c.local_dp_size, &a.local_tp_size,
                      &a.local_dp_size));
  GC_CHECK(split_axis(comm, "inter", inter_is, a.inter_size, c.inter_tp_size, c.inter_dp_size, &a.inter_tp_size,
                      &a.inter_dp_size));
  a.local_tp_rank = a.local_rank % a.local_tp_size;
  a.local_dp_rank = a.local_rank / a.local_tp_size;
  a.inter_tp_rank = a.inter_rank % a.inter_tp_size;
  a.inter_dp_rank = a.inter_rank / a.inter_tp_size;
  a.tp_rank = a.local_tp_rank + a.inter_tp_rank * a.local_tp_size;
  a.tp_size = a.local_tp_size * a.inter_tp_size;
  a.dp_rank = a.local_dp_rank + a.inter_dp_rank * a.local_dp_size;
  a.dp_size = a.local_dp_size * a.inter_dp_size;
  *out = a;
  return GC_SUCCESS;
}

/* Collective: every rank passes the same sizes, and the ranks of each node are consecutive (the
 * node starts at world rank rank - local_rank), as FlashInfer's numbering takes them. */
static gc_result_t agree_on_world(gc_comm_t comm, const gc_mixed_config_t *cfg) {
  gc_mixed_config_t c = GC_MIXED_CONFIG_INIT;
  if (cfg) c = *cfg;
  int first = comm->rank; /* local rank 0's value reaches every rank of the node */
  GC_CHECK(gc__boot_local_bcast(comm, &first, sizeof first));
  const int consecutive = first == comm->rank - comm->local_rank;
  uint64_t v[6] = {c.version, (uint64_t)(int64_t)c.local_tp_size, (uint64_t)(int64_t)c.local_dp_size,
                   (uint64_t)(int64_t)c.inter_tp_size, (uint64_t)(int64_t)c.inter_dp_size, (uint64_t)consecutive};
  uint64_t lo[6], hi[6];
  GC_CHECK(gc__boot_range_u64(comm, v, 6, lo, hi));
  static const char *const names[5] = {"version", "local_tp_size", "local_dp_size", "inter_tp_size", "inter_dp_size"};
  for (int i = 0; i < 5; i++)
    if (lo[i] != hi[i])
      return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_init: ranks pass different configs (%s from %lld to %lld); pass the same on every rank",
                     names[i], (long long)lo[i], (long long)hi[i]);
  if (lo[5] == 0)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED,
                   "gc_mixed_init: FlashInfer's numbering needs each node's ranks consecutive (world rank = node x local "
                   "size + local rank)%s; order the ranks by node (mpirun --map-by slot or core)",
                   consecutive ? "; another rank's node is not" : "; this rank's node is not");
  if (comm->node_size_min != comm->node_size_max)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "gc_mixed_init: the nodes have %d to %d ranks; a layout needs the same number on every node",
                   comm->node_size_min, comm->node_size_max);
  return GC_SUCCESS;
}

/* The group of the ranks of one color, in key order, with `local` of its ranks to a node. */
static gc_result_t make_group(gc_comm_t comm, int color, int key, int local, const char *what, gc_comm_t *out) {
  MPI_Comm split = MPI_COMM_NULL;
  int mr = MPI_Comm_split(comm->mpi, color, key, &split);
  if (mr != MPI_SUCCESS) return GC_FAIL(comm, GC_ERR_MPI, "gc_mixed_init: MPI_Comm_split (%s group) failed (MPI error %d)", what, mr);
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.device = comm->device;
  cfg.use_gpu = comm->device >= 0;
  cfg.staging_bytes = comm->tp.staging_bytes;
  cfg.timeout_ms = comm->timeout_ms;
  cfg.local_size = local;
  gc_result_t r = gc_comm_init(out, split, &cfg);
  if (r != GC_SUCCESS)
    r = GC_FAIL(comm, r, "gc_mixed_init: the %s group: %s", what, gc__message_body(gc_comm_last_error(NULL)));
  mr = MPI_Comm_free(&split);
  if (r == GC_SUCCESS && mr != MPI_SUCCESS) {
    gc_comm_destroy(*out);
    *out = NULL;
    r = GC_FAIL(comm, GC_ERR_MPI, "gc_mixed_init: MPI_Comm_free (%s group) failed (MPI error %d)", what, mr);
  }
  return r;
}

static void free_groups(gc_mixed_t m) {
  if (m->dp && m->dp != m->comm) gc_comm_destroy(m->dp);
  if (m->tp && m->tp != m->comm) gc_comm_destroy(m->tp);
  m->dp = m->tp = NULL;
}

/* Collective: the TP group (the ranks of this dp_rank) and the DP group (of this tp_rank); a
 * group of the whole communicator is the communicator. Each step is agreed on, so no rank goes on
 * with a group another failed to make. The mixed calls compare themselves over comm before a
 * group moves data (mixed.c), so the groups compare nothing again. */
static gc_result_t make_groups(gc_mixed_t m) {
  const gc_mixed_layout_t *a = &m->at;
  gc_result_t r = GC_SUCCESS;
  m->tp = a->dp_size == 1 ? m->comm : NULL;
  m->dp = a->tp_size == 1 ? m->comm : NULL;
  if (!m->tp) r = make_group(m->comm, a->dp_rank, a->tp_rank, a->local_tp_size, "TP", &m->tp);
  int ok = r == GC_SUCCESS;
  gc_result_t agreed = gc__boot_min_int(m->comm, &ok);
  if (agreed == GC_SUCCESS && ok) {
    if (!m->dp) r = make_group(m->comm, a->tp_rank, a->dp_rank, a->local_dp_size, "DP", &m->dp);
    ok = r == GC_SUCCESS;
    agreed = gc__boot_min_int(m->comm, &ok);
  }
  gc__log_rank = m->comm->rank; /* the groups' setup logged with their own ranks */
  if (agreed == GC_SUCCESS && ok) {
    if (m->tp != m->comm) m->tp->check_calls = GC_CHECK_NONE;
    if (m->dp != m->comm) m->dp->check_calls = GC_CHECK_NONE;
    return GC_SUCCESS;
  }
  free_groups(m);
  if (r != GC_SUCCESS) return r;
  if (agreed != GC_SUCCESS) return agreed;
  return GC_FAIL(m->comm, GC_ERR_REMOTE, "gc_mixed_init: another rank could not make its TP or DP group");
}

static gc_result_t mixed_init(gc_mixed_t *out, gc_comm_t comm, const gc_mixed_config_t *cfg) {
  GC_CHECK(gc__comm_check(comm));
  if (!out) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_init: out is NULL");
  GC_CHECK(gc__comm_health(comm));
  GC_CHECK(agree_on_world(comm, cfg));
  gc_mixed_layout_t at;
  GC_CHECK(gc__mixed_number(comm, cfg, comm->size, comm->local_size, comm->rank, &at));
  gc_mixed_t m = calloc(1, sizeof *m);
  int ok = m != NULL; /* agreed: a rank short of memory must not leave the others in make_groups */
  GC_CHECK(gc__boot_min_int(comm, &ok));
  if (!ok) {
    const int mine = m == NULL;
    free(m);
    return GC_FAIL(comm, mine ? GC_ERR_SYSTEM : GC_ERR_REMOTE, "gc_mixed_init: %s",
                   mine ? "out of host memory" : "another rank is out of host memory");
  }
  m->comm = comm;
  m->at = at;
  gc_result_t r = make_groups(m);
  if (r != GC_SUCCESS) {
    free(m);
    return r;
  }
  *out = m;
  return GC_SUCCESS;
}

gc_result_t gc_mixed_init(gc_mixed_t *out, gc_comm_t comm, const gc_mixed_config_t *cfg) {
  GC_CHECK(gc__comm_check(comm));
  GC_ON_DEVICE(comm, mixed_init(out, comm, cfg));
}

gc_result_t gc__mixed_check(gc_mixed_t m) {
  if (!m) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "the gc_mixed_t handle is NULL");
  return gc__comm_check(m->comm);
}

/* A group whose device stayed busy (GC_ERR_STREAM_TIMEOUT) keeps the handle, with what is left
 * of it, for the next call; any other outcome frees it. */
static gc_result_t mixed_destroy(gc_mixed_t m) {
  gc_result_t r = GC_SUCCESS;
  gc_comm_t *groups[2] = {&m->dp, &m->tp};
  for (int g = 0; g < 2; g++) {
    if (!*groups[g] || *groups[g] == m->comm) continue;
    gc_result_t d = gc_comm_destroy(*groups[g]);
    if (d == GC_ERR_STREAM_TIMEOUT)
      return GC_FAIL(m->comm, d, "gc_mixed_destroy: the %s group: %s; call it again", g ? "TP" : "DP",
                     gc__message_body(gc_comm_last_error(NULL)));
    *groups[g] = NULL;
    if (d != GC_SUCCESS && r == GC_SUCCESS)
      r = GC_FAIL(m->comm, d, "gc_mixed_destroy: the %s group: %s", g ? "TP" : "DP", gc__message_body(gc_comm_last_error(NULL)));
  }
  free(m);
  return r;
}

gc_result_t gc_mixed_destroy(gc_mixed_t m) {
  GC_CHECK(gc__mixed_check(m));
  GC_ON_DEVICE(m->comm, mixed_destroy(m));
}

gc_result_t gc_mixed_get_layout(gc_mixed_t m, gc_mixed_layout_t *out) {
  GC_CHECK(gc__mixed_check(m));
  if (!out) return GC_FAIL(m->comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_get_layout: out is NULL");
  *out = m->at;
  return GC_SUCCESS;
}

#define GC__MIXED_QUERY(fn, field)                                               \
  gc_result_t fn(gc_mixed_t m, int *out) {                                       \
    GC_CHECK(gc__mixed_check(m));                                                \
    if (!out) return GC_FAIL(m->comm, GC_ERR_INVALID_ARGUMENT, #fn ": out is NULL"); \
    *out = m->at.field;                                                          \
    return GC_SUCCESS;                                                           \
  }
GC__MIXED_QUERY(gc_mixed_tp_rank, tp_rank)
GC__MIXED_QUERY(gc_mixed_tp_size, tp_size)
GC__MIXED_QUERY(gc_mixed_dp_rank, dp_rank)
GC__MIXED_QUERY(gc_mixed_dp_size, dp_size)
#undef GC__MIXED_QUERY

/* FlashInfer's is_valid_op: both axes: the two mixed operations; TP alone: the all-reduce; else
 * (DP alone, or one rank) the all-gather and the reduce-scatter. */
static int op_valid(const gc_mixed_layout_t *a, gc_mixed_op_t op) {
  if (a->tp_size > 1 && a->dp_size > 1) return op == GC_MIXED_ALLREDUCE_ALLGATHER || op == GC_MIXED_REDUCESCATTER_ALLREDUCE;
  if (a->tp_size > 1) return op == GC_MIXED_ALLREDUCE;
  return op == GC_MIXED_ALLGATHER || op == GC_MIXED_REDUCESCATTER;
}

int gc_mixed_op_valid(gc_mixed_t m, gc_mixed_op_t op) {
  return m && (int)op >= 0 && op < GC_NUM_MIXED_OPS && op_valid(&m->at, op);
}

gc_result_t gc__mixed_require(gc_mixed_t m, gc_mixed_op_t op, const char *fn) {
  if (op_valid(&m->at, op)) return GC_SUCCESS;
  char ops[128] = "";
  for (int k = 0; k < GC_NUM_MIXED_OPS; k++)
    if (op_valid(&m->at, (gc_mixed_op_t)k))
      snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s", ops[0] ? ", " : "", mixed_op_names[k]);
  return GC_FAIL(m->comm, GC_ERR_INVALID_USAGE, "%s: not an operation of this layout (TP %d x DP %d), which takes %s",
                 fn, m->at.tp_size, m->at.dp_size, ops);
}

/* What options.algo may name for a collective on a group that reaches its peers' GPUs: what
 * gc_autotune tries for it (tune.c), then MULTIMEM for the reductions where it is set up. */
static int kernel_algos(gc__coll_t coll, int multimem, gc_algo_t *list) {
  static const gc_algo_t ar[] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT, GC_ALGO_WRITES,
                                 GC_ALGO_COPYENGINE, GC_ALGO_MPI};
  static const gc_algo_t other[] = {GC_ALGO_ONESHOT_LL, GC_ALGO_ONESHOT, GC_ALGO_WRITES, GC_ALGO_COPYENGINE,
                                    GC_ALGO_MPI};
  const gc_algo_t *from = coll == GC_COLL_ALLREDUCE ? ar : other;
  int n = coll == GC_COLL_ALLREDUCE ? (int)(sizeof ar / sizeof ar[0]) : (int)(sizeof other / sizeof other[0]);
  memcpy(list, from, (size_t)n * sizeof *list);
  if (multimem && coll != GC_COLL_ALLGATHER) list[n++] = GC_ALGO_MULTIMEM;
  return n;
}

gc_result_t gc_mixed_algos(gc_mixed_t m, gc_mixed_op_t op, gc_algo_t *algos, int capacity, int *count) {
  GC_CHECK(gc__mixed_check(m));
  if (!count || capacity < 0 || (capacity > 0 && !algos))
    return GC_FAIL(m->comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_algos: %s", !count ? "count is NULL" : "algos is NULL or capacity < 0");
  if ((int)op < 0 || op >= GC_NUM_MIXED_OPS)
    return GC_FAIL(m->comm, GC_ERR_INVALID_ARGUMENT, "gc_mixed_algos: op %d is not a gc_mixed_op_t", (int)op);
  gc_algo_t list[GC_NUM_ALGOS];
  int n = 0;
  if (op_valid(&m->at, op)) {
    /* The part options.algo steers: the TP all-reduce, else the DP group's collective. */
    gc_comm_t g = op == GC_MIXED_ALLREDUCE ? m->tp : m->dp;
    gc__coll_t coll = op == GC_MIXED_ALLREDUCE ? GC_COLL_ALLREDUCE
                      : op == GC_MIXED_ALLGATHER || op == GC_MIXED_ALLREDUCE_ALLGATHER ? GC_COLL_ALLGATHER
                                                                                        : GC_COLL_REDUCESCATTER;
    list[n++] = GC_ALGO_AUTO;
    if (g->device >= 0 && g->p2p_ready) n += kernel_algos(coll, g->mm.ready, list + n);
    else list[n++] = GC_ALGO_MPI;
  }
  for (int i = 0; i < n && i < capacity; i++) algos[i] = list[i];
  *count = n;
  return GC_SUCCESS;
}
