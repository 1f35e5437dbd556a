/* callcheck.c — ranks compare a call's arguments before it moves any data (GC_CHECK_CALLS).
 *
 * The contract asks every rank to make the same call with the same count, dtype, op, root and
 * options. A rank that breaks it on the MPI path makes MPI receive more than was sent, which Open
 * MPI treats as fatal for the whole process (MPI_ERR_TRUNCATE under MPI_COMM_WORLD's handler,
 * whatever handler our own communicator has), or mixes two reductions silently. So by default
 * the MPI path's calls compare a signature first: one small MPI_Iallreduce, bounded by
 * GC_TIMEOUT_MS like every control-plane wait. GC_CHECK_CALLS=1 compares every call (the kernels'
 * too: a host exchange each, for debugging); 0 none. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gc_internal.h"

static const char *const field_names[GC_SIG_FIELDS] = {
    "collective", "count", "columns", "axis", "parts", "dtype", "op", "root", "result dtype", "options.scale",
    "options.add (rmsnorm: residual, residual_out)", "options.algo", "options.max_blocks", "options.wire", "options.wire_group", "buffer kind",
    "GC_MPI_CHUNK_BYTES", "where sendbuf sits", "where recvbuf sits", "norm.numerics", "refused by rank"};

static const char *const call_names[GC_NUM_CALL_KINDS] = {
    "gc_allreduce", "gc_reducescatter", "gc_reducescatter_2d", "gc_allgather", "gc_broadcast", "gc_reducescatter_allreduce",
    "gc_allreduce_allgather", "gc_allreduce_rmsnorm_fp8", "the MPI path's all-reduce",
    "the MPI path's reduce-scatter", "the MPI path's all-gather", "the MPI path's broadcast"};

static uint64_t bits_of(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

gc__call_sig_t gc__call_sig(gc_comm_t comm, gc__call_kind_t call, size_t count, gc_dtype_t dtype, gc_op_t op, int root,
                            const gc_options_t *o) {
  gc__call_sig_t s;
  memset(&s, 0, sizeof s);
  s.v[GC_SIG_CALL] = (uint64_t)call;
  s.v[GC_SIG_COUNT] = count;
  s.v[GC_SIG_OP] = (uint64_t)(int64_t)op;
  s.v[GC_SIG_ROOT] = (uint64_t)(int64_t)root;
  s.v[GC_SIG_CHUNK] = comm->mpi_chunk_bytes;
  s.v[GC_SIG_DTYPE] = (uint64_t)(int64_t)dtype;
  s.v[GC_SIG_OUT_DTYPE] = (uint64_t)(int64_t)dtype;
  s.v[GC_SIG_SCALE] = bits_of(1.0);
  s.v[GC_SIG_REFUSED] = UINT64_MAX;
  if (o && o->version != GC_OPTIONS_VERSION) {
    s.v[GC_SIG_ALGO] = UINT64_MAX; /* another layout: not read here; the call refuses it after */
  } else if (o) {
    s.v[GC_SIG_OUT_DTYPE] = (uint64_t)(int64_t)(o->out_dtype == GC_DTYPE_SAME ? dtype : o->out_dtype);
    s.v[GC_SIG_SCALE] = bits_of(o->scale);
    s.v[GC_SIG_ADD] = o->add != NULL;
    s.v[GC_SIG_ALGO] = (uint64_t)(int64_t)o->algo;
    s.v[GC_SIG_MAX_BLOCKS] = (uint64_t)(int64_t)o->max_blocks;
    s.v[GC_SIG_WIRE] = (uint64_t)(int64_t)o->wire;
    s.v[GC_SIG_WIRE_GROUP] = (uint64_t)(int64_t)o->wire_group;
  }
  return s;
}

/* One field's value as words: names for the enumerations (a number where it names nothing),
 * numbers for the rest. */
static void describe(int field, uint64_t v, char *out, size_t cap) {
  const char *name = NULL;
  switch (field) {
    case GC_SIG_CALL: name = v < GC_NUM_CALL_KINDS ? call_names[v] : NULL; break;
    case GC_SIG_DTYPE:
    case GC_SIG_OUT_DTYPE: name = gc_dtype_name((gc_dtype_t)(int64_t)v); break;
    case GC_SIG_OP: name = gc_op_name((gc_op_t)(int64_t)v); break;
    case GC_SIG_ALGO: name = gc_algo_name((gc_algo_t)(int64_t)v); break;
    case GC_SIG_WIRE: name = gc_wire_name((gc_wire_t)(int64_t)v); break;
    case GC_SIG_NUMERICS: name = gc_norm_numerics_name((gc_norm_numerics_t)(int64_t)v); break;
    default: break;
  }
  if (name) {
    snprintf(out, cap, "%s", name);
    return;
  }
  switch (field) {
    case GC_SIG_SCALE: {
      double d;
      memcpy(&d, &v, sizeof d);
      snprintf(out, cap, "%g", d);
      break;
    }
    case GC_SIG_ADD: snprintf(out, cap, "%s", v == 0 ? "none" : v == 1 ? "given" : v == 2 ? "residual_out only" : "residual and residual_out"); break;
    case GC_SIG_HOST: snprintf(out, cap, "%s", v ? "host buffers" : "device buffers"); break;
    case GC_SIG_PARTS: snprintf(out, cap, "sizes hashed to %016" PRIx64, v); break;
    case GC_SIG_SEND_AT:
    case GC_SIG_RECV_AT:
      if (v < 2) snprintf(out, cap, "%s", v ? "in place in a gc_mem_alloc buffer" : "outside gc_mem_alloc buffers");
      else snprintf(out, cap, "gc_mem_alloc buffer #%" PRIu64 " at offset %" PRIu64, (v >> 40) - 2, v & (((uint64_t)1 << 40) - 1));
      break;
    case GC_SIG_ROOT:
    case GC_SIG_MAX_BLOCKS:
    case GC_SIG_WIRE:
    case GC_SIG_WIRE_GROUP:
    case GC_SIG_CALL:
    case GC_SIG_DTYPE:
    case GC_SIG_OUT_DTYPE:
    case GC_SIG_OP:
    case GC_SIG_ALGO:
    case GC_SIG_NUMERICS: snprintf(out, cap, "%" PRId64, (int64_t)v); break;
    default: snprintf(out, cap, "%" PRIu64, v); break;
  }
}

/* Every rank's answer when rank `refuser` (the lowest that did) refused the call: its own error on
 * every rank that refused, GC_ERR_REMOTE with rank refuser's reason (broadcast from it) elsewhere. */
static gc_result_t refused(gc_comm_t comm, const gc__call_sig_t *sig, int refuser) {
  char reason[256] = "";
  if (comm->rank == refuser) snprintf(reason, sizeof reason, "%s", gc__message_body(comm->last_error));
  GC_CHECK(gc__boot_bcast(comm, reason, sizeof reason, refuser));
  reason[sizeof reason - 1] = 0;
  /* A rank that refused too keeps its own code and message (gc__call_end returns them). */
  if (sig->v[GC_SIG_REFUSED] != UINT64_MAX) return GC_ERR_REMOTE;
  char call[64];
  describe(GC_SIG_CALL, sig->v[GC_SIG_CALL], call, sizeof call);
  return GC_FAIL(comm, GC_ERR_REMOTE, "%s: rank %d refused its call, so no rank ran it (the communicator stays "
                 "usable): %s", call, refuser, reason);
}

gc_result_t gc__same_call(gc_comm_t comm, const gc__call_sig_t *sig) {
  if (comm->size == 1) return GC_SUCCESS;
  /* The MPI path's comparison is where a rank that refused a call meets its peers (agree.c). */
  if (sig->v[GC_SIG_CALL] >= GC_CALL_MPI_ALLREDUCE) comm->call_met = 1;
  uint64_t least[GC_SIG_FIELDS], most[GC_SIG_FIELDS];
  GC_CHECK(gc__boot_range_u64(comm, sig->v, GC_SIG_FIELDS, least, most));
  if (least[GC_SIG_REFUSED] != UINT64_MAX) {
    comm->call_met = 1; /* every rank has this answer */
    return refused(comm, sig, (int)least[GC_SIG_REFUSED]);
  }
  for (int i = 0; i < GC_SIG_FIELDS; i++) {
    const uint64_t lo = least[i], hi = most[i];
    if (lo == hi) continue;
    comm->call_met = 1; /* every rank has this answer */
    /* The first rank holding the least value and the first holding the most. */
    uint64_t who[2] = {sig->v[i] == lo ? (uint64_t)comm->rank : UINT64_MAX,
                       sig->v[i] == hi ? (uint64_t)comm->rank : UINT64_MAX};
    GC_CHECK(gc__boot_min_u64(comm, who, 2));
    char a[96], b[96], call[64];
    describe(GC_SIG_CALL, sig->v[GC_SIG_CALL], call, sizeof call);
    describe(i, lo, a, sizeof a);
    describe(i, hi, b, sizeof b);
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT,
                   "%s: the ranks' calls differ in %s (%s on rank %" PRIu64 ", %s on rank %" PRIu64
                   "); every rank must make the same call with the same arguments (checked: GC_CHECK_CALLS)",
                   i == GC_SIG_CALL ? "collective calls" : call, field_names[i], a, who[0], b, who[1]);
  }
  return GC_SUCCESS;
}
