/* comm.c — communicator life cycle (init, destroy, abort), the mixed operations' groups, queries
 * and gc_synchronize. */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_plan.h"
#include "gc_version.h"
#include "kernels.h"

const char *gc_get_version(void) { return GC_VERSION_STRING; }

static gc_result_t select_device(gc_comm_t comm, const gc_config_t *cfg) {
  comm->device = -1;
  if (!cfg->use_gpu) return GC_SUCCESS;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    GC_INFO(GC_SUB_INIT, "no usable GPU (%s): host-only rank", e == cudaSuccess ? "none found" : cudaGetErrorString(e));
    return GC_SUCCESS;
  }
  /* The host-wide rank, not the (GC_LOCAL_SIZE) node rank: emulated nodes on one host must not all
   * land on GPU 0. */
  int dev = cfg->device >= 0 ? cfg->device : comm->host_rank % count;
  if (dev >= count)
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "config names device %d but only %d are visible", dev, count);
  GC_CUDA_CHECK(NULL, cudaSetDevice(dev));
  GC_CUDA_CHECK(NULL, cudaDeviceGetAttribute(&comm->sm_count, cudaDevAttrMultiProcessorCount, dev));
  GC_CUDA_CHECK(NULL, cudaDeviceGetAttribute(&comm->cc_major, cudaDevAttrComputeCapabilityMajor, dev));
  /* GC_PDL=auto: programmatic dependent launch needs compute capability 9.0 */
  if (comm->pdl < 0) comm->pdl = comm->cc_major >= 9;
  GC_CUDA_CHECK(NULL, cudaStreamCreateWithFlags(&comm->stream, cudaStreamNonBlocking));
  comm->device = dev;
  GC_CHECK(gc__ce_init(comm));
  return GC_SUCCESS;
}


static void comm_free(gc_comm_t comm) {
  gc__owned_release_all(comm);
  gc__symmetric_release_all(comm); /* host memory on host-only ranks */
  if (comm->device >= 0) {
    gc__multimem_destroy(comm); /* after the device is idle: comm_destroy synchronized it */
    gc__transport_destroy(comm);
    gc__ce_destroy(comm);
    if (comm->stream) cudaStreamDestroy(comm->stream);
  }
  gc__mpi_release(comm);
  gc__boot_destroy(comm);
  free(comm->algo_table_text);
  free(comm->tuned);
  free(comm->last_plan);
  gc__comm_quarantine(comm);
}

/* What a rank sets up on its own: the parameters and its GPU. */
static gc_result_t local_setup(gc_comm_t comm, const gc_config_t *cfg) {
  /* Integer knobs are read in range or refused: a cast of what was read would make
   * GC_TIMEOUT_MS=4294967297 a 1 ms timeout. */
  comm->timeout_ms = cfg->timeout_ms;
  if (comm->timeout_ms <= 0) GC_CHECK(gc__param_range(GC_PARAM_TIMEOUT_MS, 1, INT_MAX, &comm->timeout_ms));
  /* A staging area of up to 64 GB (rounding a larger size could wrap) */
  int64_t staging = (int64_t)cfg->staging_bytes;
  if (cfg->staging_bytes > GC_MAX_STAGING_BYTES)
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_config_t.staging_bytes %zu: use at most %zu", cfg->staging_bytes,
                   GC_MAX_STAGING_BYTES);
  if (!staging) GC_CHECK(gc__param_range64(GC_PARAM_STAGING_BYTES, 0, (int64_t)GC_MAX_STAGING_BYTES, &staging));
  comm->tp.staging_bytes = ((size_t)staging + 4095) & ~(size_t)4095;
  if (comm->tp.staging_bytes < 65536) comm->tp.staging_bytes = 65536;
  GC_CHECK(gc__param_range(GC_PARAM_MAX_BLOCKS, 0, GC_KMAX_BLOCKS, &comm->max_blocks)); /* the kernels' most */
  int mpi_chunk = 0;
  GC_CHECK(gc__param_range(GC_PARAM_MPI_CHUNK_BYTES, 1, INT_MAX, &mpi_chunk));
  comm->mpi_chunk_bytes = (size_t)mpi_chunk;
  static const char *const off_on[] = {"0", "1"};
  GC_CHECK(gc__param_word(GC_PARAM_MULTIMEM, off_on, 2, &comm->multimem_asked));
  /* auto, 0, 1 -> -1, 0, 1 */
  static const char *const auto_off_on[] = {"auto", "0", "1"};
  GC_CHECK(gc__param_word(GC_PARAM_PDL, auto_off_on, 3, &comm->pdl)); /* auto: decided with the device */
  comm->pdl--;
  gc__switches_default(&comm->sw_init);
  GC_CHECK(gc__switches_parse(&comm->sw_init, gc__param_str(GC_PARAM_SWITCHES), "GC_SWITCHES:"));
  comm->sw = comm->sw_init;
  static const char *const none_mpi_all[] = {"0", "auto", "1"}; /* gc__check_level_t's order */
  GC_CHECK(gc__param_word(GC_PARAM_CHECK_CALLS, none_mpi_all, 3, &comm->check_calls));
  if (gc_algo_from_name(gc__param_str(GC_PARAM_ALGO), &comm->forced_algo) != GC_SUCCESS)
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "GC_ALGO=%s: %s", gc__param_str(GC_PARAM_ALGO),
                   gc__message_body(gc_comm_last_error(NULL)));

  static const char *const off_on_auto[] = {"0", "1", "auto"}; /* atoi read "true" as off */
  int aware = 0;
  GC_CHECK(gc__param_word(GC_PARAM_CUDA_AWARE, off_on_auto, 3, &aware));
  comm->cuda_aware = aware == 2 ? gc__boot_query_cuda_aware() : aware;

  GC_CHECK(select_device(comm, cfg));
  if (comm->pdl < 0) comm->pdl = 0; /* no GPU */
  return GC_SUCCESS;
}

/* The settings that shape what ranks exchange (staging layout, chunks and pieces, grids, forced
 * algorithms and forms) must be the same on every rank: a rank with a larger staging area would
 * write past a peer's, a different chunk would leave ranks waiting for rounds that never come.
 * Each is compared once here; a difference is refused on every rank, naming the setting. */
static gc_result_t same_settings(gc_comm_t comm) {
  enum { FIXED = 5, MOST = FIXED + 16 };
  const char *name[MOST] = {"the staging area (gc_config_t.staging_bytes or GC_STAGING_BYTES)", "GC_MPI_CHUNK_BYTES",
                            "GC_ALGO", "GC_MAX_BLOCKS", "GC_MULTIMEM"};
  uint64_t v[MOST] = {comm->tp.staging_bytes, comm->mpi_chunk_bytes, (uint64_t)comm->forced_algo,
                      (uint64_t)(int64_t)comm->max_blocks, (uint64_t)comm->multimem_asked},
           lo[MOST], hi[MOST];
  const int n = FIXED + gc__switches_count();
  if (n > MOST) return GC_FAIL(NULL, GC_ERR_INTERNAL, "more switches than same_settings holds");
  for (int i = FIXED; i < n; i++) {
    name[i] = gc__switch_key(i - FIXED); /* GC_SWITCHES' keys */
    v[i] = (uint64_t)gc__switch_value(&comm->sw_init, i - FIXED);
  }
  GC_CHECK(gc__boot_range_u64(comm, v, n, lo, hi));
  for (int i = 0; i < n; i++)
    if (lo[i] != hi[i])
      return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "ranks differ in %s%s (from %" PRId64 " to %" PRId64
                     "); every rank must use the same", i >= FIXED ? "GC_SWITCHES " : "", name[i], (int64_t)lo[i],
                     (int64_t)hi[i]);
  return GC_SUCCESS;
}

/* Every rank's outcome of a step, agreed: a rank that failed alone says so instead of leaving its
 * peers to wait for it. `r` is this rank's; a peer's failure is GC_ERR_REMOTE here. */
static gc_result_t agree(gc_comm_t comm, gc_result_t r, const char *step) {
  int ok = r == GC_SUCCESS;
  GC_CHECK(gc__boot_min_int(comm, &ok));
  if (r != GC_SUCCESS || ok) return r;
  return GC_FAIL(NULL, GC_ERR_REMOTE, "another rank failed %s", step);
}

/* Collective from gc__boot_init on; every step that one rank may fail alone is agreed on before
 * the next collective step, so all ranks succeed or all fail. */
static gc_result_t comm_setup(gc_comm_t comm, MPI_Comm user, const gc_config_t *cfg) {
  GC_CHECK(gc__boot_init(comm, user, cfg));
  gc__log_rank = comm->rank;
  /* 0: a rank failed, 1: a rank has no GPU, 2: every rank has one */
  gc_result_t r = local_setup(comm, cfg);
  int state = r != GC_SUCCESS ? 0 : comm->device >= 0 ? 2 : 1;
  GC_CHECK(gc__boot_min_int(comm, &state));
  GC_CHECK(r);
  if (state == 0) return GC_FAIL(NULL, GC_ERR_REMOTE, "another rank failed to read its parameters or set up its GPU");
  GC_CHECK(same_settings(comm));
  /* The most checking any rank asks for: a check one rank made alone would wait for the others. */
  int fewest = -comm->check_calls;
  GC_CHECK(gc__boot_min_int(comm, &fewest));
  comm->check_calls = -fewest;
  comm->all_gpu = state == 2;
  if (comm->all_gpu) GC_CHECK(gc__transport_init(comm));
  if (comm->p2p_ready) { /* grids and clusters are sized from these: the least over the node's GPUs */
    GC_CHECK(gc__boot_local_min_int(comm, &comm->sm_count));
    GC_CHECK(gc__boot_local_min_int(comm, &comm->cc_major));
  }
  GC_CHECK(gc__multimem_init(comm));
  r = gc__dispatch_describe(comm);
  const int added = r == GC_SUCCESS && gc__live_add(comm);
  if (r == GC_SUCCESS && !added) r = GC_FAIL(NULL, GC_ERR_SYSTEM, "too many live communicators (64)");
  r = agree(comm, r, "to finish setting up the communicator");
  if (r != GC_SUCCESS && added) gc__live_remove(comm);
  GC_CHECK(r);
  GC_INFO(GC_SUB_INIT, "rank %d/%d local %d/%d nodes %d device %d cuda-aware %d p2p %d", comm->rank,
          comm->size, comm->local_rank, comm->local_size, comm->node_count, comm->device,
          comm->cuda_aware, comm->p2p_ready);
  return GC_SUCCESS;
}

gc_result_t gc_comm_init(gc_comm_t *out, MPI_Comm user, const gc_config_t *cfg) {
  gc__clear_error(NULL);
  (void)gc_params_table(); /* reads the environment once, sets up logging */
  if (!out) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_comm_init: out is NULL");
  gc_config_t c = GC_CONFIG_INIT;
  if (cfg) {
    if (cfg->version != GC_CONFIG_VERSION)
      return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_config_t.version is %u, expected %u (use GC_CONFIG_INIT)",
                     cfg->version, GC_CONFIG_VERSION);
    c = *cfg;
  }
  gc_comm_t comm = calloc(1, sizeof *comm);
  if (!comm) return GC_FAIL(NULL, GC_ERR_SYSTEM, "gc_comm_init: out of host memory");
  comm->mpi = comm->local = comm->meet = MPI_COMM_NULL;
  comm->device = -1;
  comm->mm.fd = -1;
  gc_result_t r = comm_setup(comm, user, &c);
  if (r != GC_SUCCESS) {
    /* The message may sit in the communicator we are about to free: keep it for the caller. */
    char msg[sizeof comm->last_error];
    snprintf(msg, sizeof msg, "%s", comm->last_error[0] ? comm->last_error : gc_comm_last_error(NULL));
    comm_free(comm);
    gc__fail(NULL, r, __FILE__, __LINE__, "gc_comm_init: %s", gc__message_body(msg));
    return r;
  }
  *out = comm;
  return GC_SUCCESS;
}

gc_result_t gc_comm_init_f(gc_comm_t *out, MPI_Fint fcomm, const gc_config_t *cfg) {
  gc__clear_error(NULL);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return GC_FAIL(NULL, GC_ERR_INVALID_USAGE, "MPI is not initialized (call MPI_Init first)");
  /* Open MPI's MPI_Comm_f2c answers a handle that names no communicator with a null pointer, not
   * MPI_COMM_NULL, and MPI_Comm_dup of that ends the process. */
  MPI_Comm c = MPI_Comm_f2c(fcomm);
  if (c == MPI_COMM_NULL || (void *)(intptr_t)c == NULL)
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "gc_comm_init_f: Fortran handle %d names no communicator", (int)fcomm);
  return gc_comm_init(out, c, cfg);
}

/* An agreement in the groups' setup. Its failure also leaves comm failed: the groups made so far
 * stay until gc_comm_destroy, and no later call makes them again over them. */
static gc_result_t groups_agree(gc_comm_t comm, int *ok) {
  gc_result_t r = gc__boot_min_int(comm, ok);
  if (r != GC_SUCCESS && comm->sticky == GC_SUCCESS) comm->sticky = r;
  return r;
}

/* The groups of the mixed operations: communicators of our own, over this rank's node (L ranks, so
 * the peer-to-peer kernels serve it) and over the ranks of its local rank on every node (one rank
 * per node: MPI). Same GPU, staging and timeout as comm. */
gc_result_t gc__mixed_groups(gc_comm_t comm) {
  if (comm->cross_group) return GC_SUCCESS;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.device = comm->device;
  cfg.use_gpu = comm->device >= 0;
  cfg.staging_bytes = comm->tp.staging_bytes;
  cfg.timeout_ms = comm->timeout_ms;
  cfg.local_size = comm->local_size;
  gc_result_t r = gc_comm_init(&comm->node_group, comm->local, &cfg);
  /* Every step is agreed on (bounded waits), so no rank goes on to a collective another left. */
  int ok = r == GC_SUCCESS;
  GC_CHECK(groups_agree(comm, &ok));
  if (ok) {
    MPI_Comm cross = MPI_COMM_NULL;
    if (MPI_Comm_split(comm->mpi, comm->local_rank, comm->rank, &cross) != MPI_SUCCESS) {
      r = GC_FAIL(NULL, GC_ERR_MPI, "MPI_Comm_split (cross group) failed");
    } else {
      cfg.local_size = 1;
      cfg.staging_bytes = 65536; /* the least: MPI carries everything it does */
      r = gc_comm_init(&comm->cross_group, cross, &cfg);
      MPI_Comm_free(&cross);
    }
    ok = r == GC_SUCCESS;
    GC_CHECK(groups_agree(comm, &ok));
  }
  gc__log_rank = comm->rank; /* the groups' setup logged with their own ranks */
  if (ok) {
    /* A mixed call is compared whole over comm before its groups move data (coll.c mixed_groups,
     * mixed_begin), and what they run follows from it: they compare nothing again. */
    comm->node_group->check_calls = comm->cross_group->check_calls = GC_CHECK_NONE;
    return GC_SUCCESS;
  }
  /* The groups made stay until gc_comm_destroy; nothing runs on them. */
  comm->sticky = r != GC_SUCCESS ? r : GC_ERR_REMOTE;
  return GC_FAIL(comm, comm->sticky, "setting up the mixed operations' groups: %s",
                 r != GC_SUCCESS ? gc__message_body(gc_comm_last_error(NULL)) : "another rank failed");
}

static gc_result_t comm_destroy(gc_comm_t comm) {
  /* Kernels in flight may still read peers' buffers or be read: every rank's device idle first.
   * The waits are bounded, so a dead peer or a stuck device cannot hang us; a device still busy
   * leaves everything as it was (GC_ERR_STREAM_TIMEOUT), a missing peer does not. */
  gc_result_t quiet = gc__quiesce(comm, "gc_comm_destroy");
  if (quiet == GC_ERR_STREAM_TIMEOUT) return quiet;
  gc_result_t r = GC_SUCCESS;
  /* The groups first: every rank of comm is in one of each, so these are collective too. */
  gc_comm_t groups[2] = {comm->cross_group, comm->node_group};
  for (int g = 0; g < 2; g++) {
    if (!groups[g]) continue;
    gc_result_t d = gc_comm_destroy(groups[g]);
    if (d != GC_SUCCESS && r == GC_SUCCESS)
      r = GC_FAIL(comm, d, "destroying a mixed group: %s", gc__message_body(gc_comm_last_error(NULL)));
  }
  if (r == GC_SUCCESS) r = quiet;
  /* The message may sit in the communicator about to be freed: kept for the caller. */
  char msg[sizeof comm->last_error];
  snprintf(msg, sizeof msg, "%s", r != GC_SUCCESS ? gc__message_body(comm->last_error) : "");
  const int kept = gc__boot_stranded(comm);
  gc__live_remove(comm);
  comm_free(comm);
  if (r == GC_SUCCESS) return GC_SUCCESS;
  return gc__fail(NULL, r, __FILE__, __LINE__, "gc_comm_destroy: %s; this rank's resources are freed%s", msg,
                  kept ? " (but for MPI communicators a timed-out request still uses: MPI_Finalize ends them)" : "");
}

gc_result_t gc_comm_destroy(gc_comm_t comm) {
  int prev;
  GC_CHECK(gc__device_enter(comm, &prev));
  int device = comm->device;
  gc_result_t r = comm_destroy(comm);
  if (prev >= 0 && prev != device) cudaSetDevice(prev); /* comm is freed: restore by hand */
  return r;
}

gc_result_t gc_comm_abort(gc_comm_t comm, int errorcode) {
  GC_CHECK(gc__comm_check(comm));
  /* Kernels of this rank that wait on peers see the flag at their next timeout check. */
  gc_comm_t all[3] = {comm, comm->node_group, comm->cross_group};
  for (int i = 0; i < 3; i++)
    if (all[i] && all[i]->tp.error_host) *(volatile uint32_t *)all[i]->tp.error_host = 2;
  GC_WARN(GC_SUB_ALL, "gc_comm_abort(%d) called on rank %d", errorcode, comm->rank);
  MPI_Abort(comm->mpi, errorcode);
  return GC_FAIL(comm, GC_ERR_MPI, "MPI_Abort returned");
}

#define GC__QUERY(fn, expr)                                                              \
  gc_result_t fn(gc_comm_t comm, int *out) {                                             \
    GC_CHECK(gc__comm_check(comm));                                                      \
    if (!out) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, #fn ": out is NULL");       \
    *out = (expr);                                                                       \
    return GC_SUCCESS;                                                                   \
  }
GC__QUERY(gc_comm_rank, comm->rank)
GC__QUERY(gc_comm_size, comm->size)
GC__QUERY(gc_comm_local_rank, comm->local_rank)
GC__QUERY(gc_comm_local_size, comm->local_size)
GC__QUERY(gc_comm_node_count, comm->node_count)
GC__QUERY(gc_comm_device, comm->device)
GC__QUERY(gc_comm_p2p_ready, comm->p2p_ready)
GC__QUERY(gc_comm_cuda_aware_mpi, comm->cuda_aware)
#undef GC__QUERY

gc_result_t gc_comm_peer_access(gc_comm_t comm, int peer, int *out) {
  GC_CHECK(gc__comm_check(comm));
  if (!out) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_comm_peer_access: out is NULL");
  if (peer < 0 || peer >= comm->local_size)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "peer %d is not a local rank (0..%d)", peer, comm->local_size - 1);
  *out = comm->device >= 0 && peer < GC_MAX_LOCAL_RANKS && comm->peer_access[peer];
  return GC_SUCCESS;
}

gc_result_t gc_comm_stream(gc_comm_t comm, void **out) {
  GC_CHECK(gc__comm_check(comm));
  if (!out) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_comm_stream: out is NULL");
  *out = comm->stream;
  return GC_SUCCESS;
}

const char *gc_comm_algo_table(gc_comm_t comm) {
  if (gc__comm_check(comm) != GC_SUCCESS) return "";
  return comm->algo_table_text ? comm->algo_table_text : "";
}

static gc_result_t synchronize(gc_comm_t comm, void *stream) {
  if (comm->device >= 0) GC_CHECK(gc__stream_wait(comm, stream, "gc_synchronize"));
  return gc__comm_health(comm);
}

gc_result_t gc_synchronize(gc_comm_t comm, void *stream) { GC_ON_DEVICE(comm, synchronize(comm, stream)); }
