/* agree.c — a collective refused on one rank is answered on every rank at once, and the
 * communicator stays usable (no data moved).
 *
 * Where every call takes the MPI path (a communicator without peer-to-peer kernels) and calls are
 * compared (GC_CHECK_CALLS auto or 1), every rank that runs a call meets the others in the MPI
 * path's comparison (mpi_path.c), after all of its own checks. A rank that refused the call
 * before that point (a NULL buffer, an invalid dtype, no memory), or that returned at once with
 * nothing to do (count 0), makes the same exchange from here instead: its peers, already waiting
 * in theirs, read "refused by rank r" (callcheck.c broadcasts the reason) or the difference in
 * counts, and return at once instead of after GC_TIMEOUT_MS; nothing is left pending, so the
 * next call runs as usual. Calls that reach the comparison pay nothing more: the exchange is
 * the one they make anyway.
 *
 * Where kernels may run (comm->p2p_ready), the peers of a refusing rank may be inside a kernel
 * already, and no host exchange reaches them without costing every call one: a refusal there
 * is not made known here (the peers' kernels give up after GC_TIMEOUT_MS). */
#include <stdint.h>

#include "gc_internal.h"

/* The MPI path's kind of a public collective, for the exchange a call with nothing to do makes. */
static gc__call_kind_t mpi_kind(gc__call_kind_t call) {
  switch (call) {
    case GC_CALL_ALLREDUCE: return GC_CALL_MPI_ALLREDUCE;
    case GC_CALL_REDUCESCATTER:
    case GC_CALL_REDUCESCATTER_2D: return GC_CALL_MPI_REDUCESCATTER;
    case GC_CALL_ALLGATHER: return GC_CALL_MPI_ALLGATHER;
    case GC_CALL_BROADCAST: return GC_CALL_MPI_BROADCAST;
    default: return call;
  }
}

/* Whether every rank of comm meets the others in the MPI path's comparison of each call. */
static int calls_meet_on_mpi(gc_comm_t comm) {
  return comm->size > 1 && !comm->p2p_ready && comm->check_calls != GC_CHECK_NONE;
}

gc_result_t gc__call_end(gc_comm_t comm, gc__call_kind_t call, gc_result_t r) {
  const int met = comm->call_met;
  comm->call_met = 0;
  /* A failed communicator answers every call with its failure on its own. */
  if (met || !calls_meet_on_mpi(comm) || comm->sticky != GC_SUCCESS) return r;
  gc__call_sig_t sig = gc__call_sig(comm, mpi_kind(call), 0, GC_FLOAT32, GC_SUM, 0, NULL);
  if (r != GC_SUCCESS) sig.v[GC_SIG_REFUSED] = (uint64_t)comm->rank;
  gc_result_t agreed = gc__same_call(comm, &sig);
  comm->call_met = 0;
  return r != GC_SUCCESS ? r : agreed;
}
