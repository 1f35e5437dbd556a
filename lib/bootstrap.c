/* bootstrap.c — the MPI control plane: communicator duplication, node-local split, exchanges of
 * handles, bounded barriers, CUDA-aware detection. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gc_internal.h"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_Query_cuda_support */
#endif

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Requests a timeout left behind, with the MPI communicator each is on. MPI forbids freeing or
 * cancelling a collective request, and freeing its communicator while it is pending lets MPI's
 * progress engine (inside MPI_Finalize, say) send on freed state when a late peer matches it. So
 * such a request stays listed for the life of the process, and gc__boot_destroy keeps (never
 * frees) an MPI communicator that still has one pending: MPI_Finalize then completes or drops it. */
static pthread_mutex_t stranded_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stranded {
  MPI_Request req;
  MPI_Comm over;
} *stranded;
static size_t stranded_count, stranded_cap;

static void strand(MPI_Request req, MPI_Comm over) {
  pthread_mutex_lock(&stranded_lock);
  if (stranded_count == stranded_cap) {
    size_t cap = stranded_cap ? 2 * stranded_cap : 16;
    struct stranded *grown = realloc(stranded, cap * sizeof *grown);
    if (grown) {
      stranded = grown;
      stranded_cap = cap;
    }
  }
  /* Without room the request goes unlisted: its communicator may then be freed (the failure this
   * list exists to avoid), which only an allocation failure of a few bytes can cause. */
  if (stranded_count < stranded_cap) stranded[stranded_count++] = (struct stranded){req, over};
  pthread_mutex_unlock(&stranded_lock);
}

/* Whether a request left on `over` is still pending; completed ones leave the list. */
static int stranded_on(MPI_Comm over) {
  int pending = 0;
  pthread_mutex_lock(&stranded_lock);
  for (size_t i = 0; i < stranded_count;) {
    int done = 0;
    if (stranded[i].over == over && MPI_Test(&stranded[i].req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
      stranded[i] = stranded[--stranded_count];
      continue;
    }
    pending |= stranded[i].over == over;
    i++;
  }
  pthread_mutex_unlock(&stranded_lock);
  return pending;
}

int gc__boot_stranded(gc_comm_t comm) {
  return stranded_on(comm->mpi) + stranded_on(comm->meet) + stranded_on(comm->local);
}

/* Polls a nonblocking request on `over` until it completes or bound_ms pass, so a rank whose peers
 * never arrive gets GC_ERR_TIMEOUT instead of waiting forever. On a timeout the request (and the
 * buffers it may still write) are left alone on purpose (see strand), and the communicator is
 * unusable from then on. */
static gc_result_t boot_wait_for(gc_comm_t comm, MPI_Comm over, MPI_Request *req, const char *what, double bound_ms) {
  double start = now_ms();
  for (unsigned spin = 0;; spin++) {
    int done = 0;
    GC_MPI_CHECK(comm, MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return GC_SUCCESS;
    if ((spin & 63u) == 63u && now_ms() - start > bound_ms) {
      strand(*req, over);
      comm->sticky = GC_ERR_TIMEOUT;
      return GC_FAIL(comm, GC_ERR_TIMEOUT,
                     "%s did not complete within %.0f ms (GC_TIMEOUT_MS=%d; a rank is missing or stuck); destroy "
                     "the communicator", what, bound_ms, comm->timeout_ms);
    }
    /* Ranks are often oversubscribed (CI starts 4 ranks on 2 cores): give the core away. */
    sched_yield();
  }
}

gc_result_t gc__boot_wait(gc_comm_t comm, MPI_Request *req, const char *what) {
  return boot_wait_for(comm, comm->mpi, req, what, comm->timeout_ms);
}

/* The ranks per node that split a host (gc_config_t.local_size, else GC_LOCAL_SIZE; 0: the ranks
 * MPI puts on the host), agreed over comm->mpi before the split: a rank that refused its value
 * alone would leave the others waiting in the split. */
static gc_result_t node_group_size(gc_comm_t comm, const gc_config_t *cfg, int *group) {
  gc_result_t r = GC_SUCCESS;
  if (cfg->local_size < 0)
    r = GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_config_t.local_size is %d: use 0 (GC_LOCAL_SIZE, else the hosts) "
                "or the ranks per node", cfg->local_size);
  else if (cfg->local_size > 0) *group = cfg->local_size;
  else r = gc__param_range(GC_PARAM_LOCAL_SIZE, 0, INT_MAX, group);
  int ok = r == GC_SUCCESS;
  GC_MPI_CHECK(NULL, MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm->mpi));
  if (r == GC_SUCCESS && !ok)
    r = GC_FAIL(NULL, GC_ERR_REMOTE, "another rank refused its ranks per node (GC_LOCAL_SIZE or gc_config_t.local_size)");
  return r;
}

gc_result_t gc__boot_init(gc_comm_t comm, MPI_Comm user, const gc_config_t *cfg) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return GC_FAIL(NULL, GC_ERR_INVALID_USAGE, "MPI is not initialized (call MPI_Init first)");
  if (user == MPI_COMM_NULL) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "comm is MPI_COMM_NULL");

  GC_MPI_CHECK(NULL, MPI_Comm_dup(user, &comm->mpi));
  GC_MPI_CHECK(NULL, MPI_Comm_set_errhandler(comm->mpi, MPI_ERRORS_RETURN));
  GC_MPI_CHECK(NULL, MPI_Comm_dup(comm->mpi, &comm->meet));
  GC_MPI_CHECK(NULL, MPI_Comm_rank(comm->mpi, &comm->rank));
  GC_MPI_CHECK(NULL, MPI_Comm_size(comm->mpi, &comm->size));

  MPI_Comm node;
  GC_MPI_CHECK(NULL, MPI_Comm_split_type(comm->mpi, MPI_COMM_TYPE_SHARED, comm->rank, MPI_INFO_NULL, &node));
  GC_MPI_CHECK(NULL, MPI_Comm_rank(node, &comm->host_rank));
  int group = 0;
  gc_result_t r = node_group_size(comm, cfg, &group);
  if (r != GC_SUCCESS) {
    MPI_Comm_free(&node);
    return r;
  }
  if (group > 0) {
    /* GC_LOCAL_SIZE splits one host into several "nodes" so the inter-node path runs here too. */
    int node_rank;
    GC_MPI_CHECK(NULL, MPI_Comm_rank(node, &node_rank));
    GC_MPI_CHECK(NULL, MPI_Comm_split(node, node_rank / group, node_rank, &comm->local));
    MPI_Comm_free(&node);
  } else {
    comm->local = node;
  }
  GC_MPI_CHECK(NULL, MPI_Comm_set_errhandler(comm->local, MPI_ERRORS_RETURN));
  GC_MPI_CHECK(NULL, MPI_Comm_rank(comm->local, &comm->local_rank));
  GC_MPI_CHECK(NULL, MPI_Comm_size(comm->local, &comm->local_size));
  int leader = comm->local_rank == 0;
  GC_MPI_CHECK(NULL, MPI_Allreduce(&leader, &comm->node_count, 1, MPI_INT, MPI_SUM, comm->mpi));
  /* Nodes in blocks: node k holds ranks kL .. kL+L-1 on every node (the hierarchical collectives
   * rely on it: their cross-node group's ranks are then the nodes in order). */
  const int in_block = comm->rank == comm->rank / comm->local_size * comm->local_size + comm->local_rank;
  int sizes[3] = {comm->local_size, -comm->local_size, in_block}, fewest_most[3];
  GC_MPI_CHECK(NULL, MPI_Allreduce(sizes, fewest_most, 3, MPI_INT, MPI_MIN, comm->mpi));
  comm->node_size_min = fewest_most[0];
  comm->node_size_max = -fewest_most[1];
  comm->nodes_in_blocks = fewest_most[2] && comm->node_size_min == comm->node_size_max;
  return GC_SUCCESS;
}

void gc__boot_destroy(gc_comm_t comm) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm *ours[3] = {&comm->local, &comm->meet, &comm->mpi};
  for (int i = 0; i < 3; i++)
    if (*ours[i] != MPI_COMM_NULL && *ours[i] != 0 && !stranded_on(*ours[i])) MPI_Comm_free(ours[i]);
}

/* Buffers a timed-out request may still write, kept until the process ends: MPI forbids freeing
 * the request, so its buffers stay allocated and reachable (not lost: a leak checker sees them). */
static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;
static void **parked;
static size_t parked_count, parked_cap;

void gc__park(void *p) {
  if (!p) return;
  pthread_mutex_lock(&parked_lock);
  if (parked_count == parked_cap) {
    size_t cap = parked_cap ? 2 * parked_cap : 16;
    void **grown = realloc(parked, cap * sizeof *grown);
    if (grown) {
      parked = grown;
      parked_cap = cap;
    }
  }
  if (parked_count < parked_cap) parked[parked_count++] = p; /* else it stays allocated, unlisted */
  pthread_mutex_unlock(&parked_lock);
}

/* The control plane's collectives go on heap copies of their buffers: a request that timed out
 * may still write its buffer whenever MPI next makes progress (a late peer), long after the
 * caller's stack frame is gone, so on a timeout (or an MPI error) the copy is left allocated. */
typedef enum { BOOT_ALLGATHER, BOOT_BCAST, BOOT_MIN_INT, BOOT_MAX_DOUBLE, BOOT_MIN_U64 } boot_op_t;

/* `in` (bytes) from this rank; the result, bytes x the group's size for the all-gather, into out. */
static gc_result_t boot_collective(gc_comm_t comm, MPI_Comm over, boot_op_t op, const void *in, void *out,
                                   size_t bytes, int root, const char *what, double bound_ms) {
  int ranks = 1;
  if (op == BOOT_ALLGATHER) GC_MPI_CHECK(comm, MPI_Comm_size(over, &ranks));
  if (bytes > INT_MAX) return GC_FAIL(comm, GC_ERR_INTERNAL, "%s of %zu bytes", what, bytes);
  const size_t out_bytes = bytes * (size_t)ranks;
  char *copy = malloc(bytes + out_bytes + 1);
  if (!copy) return GC_FAIL(comm, GC_ERR_SYSTEM, "%s: out of host memory", what);
  char *const result = copy + bytes;
  memcpy(copy, in, bytes);
  if (op == BOOT_BCAST) memcpy(result, in, bytes);
  MPI_Request req;
  int e = op == BOOT_ALLGATHER ? MPI_Iallgather(copy, (int)bytes, MPI_BYTE, result, (int)bytes, MPI_BYTE, over, &req)
          : op == BOOT_BCAST   ? MPI_Ibcast(result, (int)bytes, MPI_BYTE, root, over, &req)
          : op == BOOT_MIN_INT ? MPI_Iallreduce(copy, result, 1, MPI_INT, MPI_MIN, over, &req)
          : op == BOOT_MIN_U64 ? MPI_Iallreduce(copy, result, (int)(bytes / sizeof(uint64_t)), MPI_UINT64_T, MPI_MIN,
                                                over, &req)
                               : MPI_Iallreduce(copy, result, 1, MPI_DOUBLE, MPI_MAX, over, &req);
  if (e != MPI_SUCCESS) {
    free(copy);
    return gc__mpi_fail(comm, e, what, __FILE__, __LINE__);
  }
  gc_result_t r = boot_wait_for(comm, over, &req, what, bound_ms);
  if (r != GC_SUCCESS) {
    gc__park(copy); /* MPI may still write it */
    return r;
  }
  memcpy(out, result, out_bytes);
  free(copy);
  return GC_SUCCESS;
}

gc_result_t gc__boot_local_allgather(gc_comm_t comm, const void *mine, void *all, size_t bytes) {
  return boot_collective(comm, comm->local, BOOT_ALLGATHER, mine, all, bytes, 0, "local allgather",
                         comm->timeout_ms);
}

/* A broadcast and a minimum over `over`: the whole communicator or its node. */
static gc_result_t bcast_over(gc_comm_t comm, MPI_Comm over, void *buf, size_t bytes, int root) {
  return boot_collective(comm, over, BOOT_BCAST, buf, buf, bytes, root,
                         over == comm->local ? "local broadcast" : "broadcast", comm->timeout_ms);
}

static gc_result_t min_int_over(gc_comm_t comm, MPI_Comm over, int *value) {
  return boot_collective(comm, over, BOOT_MIN_INT, value, value, sizeof *value, 0,
                         over == comm->local ? "local allreduce(min)" : "allreduce(min)", comm->timeout_ms);
}

gc_result_t gc__boot_local_bcast(gc_comm_t comm, void *buf, size_t bytes) {
  return bcast_over(comm, comm->local, buf, bytes, 0);
}

gc_result_t gc__boot_local_min_int(gc_comm_t comm, int *value) { return min_int_over(comm, comm->local, value); }

gc_result_t gc__boot_bcast(gc_comm_t comm, void *buf, size_t bytes, int root) {
  return bcast_over(comm, comm->mpi, buf, bytes, root);
}

/* On comm->meet: after a timeout a rank may hold a request on comm->mpi that its peers never
 * matched (gc__boot_wait leaves it), and a call there would meet it on the ranks that come later
 * (gc_comm_destroy after a lone call that timed out ended the process inside MPI). meet carries
 * one kind of call only, this minimum, so a request a timeout left there meets its own kind. */
gc_result_t gc__boot_agree(gc_comm_t comm, int *all, double bound_ms, const char *what) {
  return boot_collective(comm, comm->meet, BOOT_MIN_INT, all, all, sizeof *all, 0, what, bound_ms);
}

gc_result_t gc__boot_barrier(gc_comm_t comm) {
  int one = 1;
  return gc__boot_agree(comm, &one, comm->timeout_ms, "barrier");
}

gc_result_t gc__boot_max_double(gc_comm_t comm, double *value) {
  return boot_collective(comm, comm->mpi, BOOT_MAX_DOUBLE, value, value, sizeof *value, 0, "allreduce(max)",
                         comm->timeout_ms);
}

gc_result_t gc__boot_min_int(gc_comm_t comm, int *value) { return min_int_over(comm, comm->mpi, value); }

gc_result_t gc__boot_min_u64(gc_comm_t comm, uint64_t *values, int n) {
  return boot_collective(comm, comm->mpi, BOOT_MIN_U64, values, values, (size_t)n * sizeof *values, 0,
                         "allreduce(min) of a call's arguments", comm->timeout_ms);
}

gc_result_t gc__boot_range_u64(gc_comm_t comm, const uint64_t *values, int n, uint64_t *lo, uint64_t *hi) {
  enum { MOST = 32 };
  if (n > MOST) return GC_FAIL(comm, GC_ERR_INTERNAL, "gc__boot_range_u64 of %d values (at most %d)", n, MOST);
  uint64_t both[2 * MOST]; /* the least of v and of ~v in one reduction: min(~v) = ~max(v) */
  for (int i = 0; i < n; i++) {
    both[i] = values[i];
    both[n + i] = ~values[i];
  }
  GC_CHECK(gc__boot_min_u64(comm, both, 2 * n));
  for (int i = 0; i < n; i++) {
    lo[i] = both[i];
    hi[i] = ~both[n + i];
  }
  return GC_SUCCESS;
}

int gc__boot_query_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  /* Open MPI: the compile-time macro says whether the extension was built; the call asks the
   * library actually loaded, which may differ from the headers. */
  return MPIX_Query_cuda_support();
#elif defined(MPIX_GPU_SUPPORT_CUDA)
  int supported = 0;
  if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) != MPI_SUCCESS) return 0;
  return supported;
#else
  return 0;
#endif
}
