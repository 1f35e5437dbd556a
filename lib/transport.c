/* transport.c — the peer-to-peer data plane's memory: per-rank signal + staging buffers exported
 * with CUDA IPC, the real peer-access probe, and symmetric allocations (gc_mem_alloc). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "kernels.h"

/* One IPC export: the handle, whether the export worked, whether the rank failed before it (no
 * memory to export), and which GPU it lives on. */
typedef struct {
  cudaIpcMemHandle_t handle;
  int ok, failed;
  char pci_bus_id[32]; /* which GPU: ordinals differ between processes, bus ids don't */
} ipc_export_t;

/* The driver's view of whether this GPU can reach local rank p's: same GPU (several ranks on one
 * device) or cudaDeviceCanAccessPeer. A GPU not visible here leaves the answer to the IPC open. */
static int driver_allows(gc_comm_t comm, const ipc_export_t *mine, const ipc_export_t *peer) {
  if (strcmp(mine->pci_bus_id, peer->pci_bus_id) == 0) return 1;
  int dev = -1, can = 0;
  if (cudaDeviceGetByPCIBusId(&dev, peer->pci_bus_id) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  if (cudaDeviceCanAccessPeer(&can, comm->device, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return can;
}

/* Opens every local peer's handle; peer_ok[p] says whether the open worked. A failed open is not
 * an error here: it is how peer access is probed for real. A rank that failed to make its memory
 * passes mine = NULL, so that its peers return GC_ERR_REMOTE instead of waiting for it (it gets
 * GC_ERR_REMOTE without a message, and reports its own error). Nothing is opened unless every
 * rank has memory. */
static gc_result_t exchange(gc_comm_t comm, void *mine, char *mapped[GC_MAX_LOCAL_RANKS],
                            int peer_ok[GC_MAX_LOCAL_RANKS]) {
  ipc_export_t me, all[GC_MAX_LOCAL_RANKS];
  memset(&me, 0, sizeof me);
  me.failed = mine == NULL;
  me.ok = mine && cudaIpcGetMemHandle(&me.handle, mine) == cudaSuccess;
  if (mine && !me.ok) (void)cudaGetLastError();
  if (cudaDeviceGetPCIBusId(me.pci_bus_id, sizeof me.pci_bus_id, comm->device) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(me.pci_bus_id, sizeof me.pci_bus_id, "device-%d", comm->device);
  }
  GC_CHECK(gc__boot_local_allgather(comm, &me, all, sizeof me));
  for (int p = 0; p < comm->local_size; p++) /* a rank that failed reports its own error */
    if (all[p].failed)
      return me.failed ? GC_ERR_REMOTE : GC_FAIL(comm, GC_ERR_REMOTE, "local rank %d failed to allocate its memory", p);
  for (int p = 0; p < comm->local_size; p++) {
    mapped[p] = NULL;
    peer_ok[p] = 0;
    if (p == comm->local_rank) {
      mapped[p] = mine;
      peer_ok[p] = 1;
      continue;
    }
    if (!all[p].ok || !driver_allows(comm, &me, &all[p])) continue;
    void *ptr = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&ptr, all[p].handle, cudaIpcMemLazyEnablePeerAccess);
    if (e == cudaSuccess) {
      mapped[p] = ptr;
      peer_ok[p] = 1;
    } else {
      GC_INFO(GC_SUB_P2P, "cannot map local rank %d's memory: %s", p, cudaGetErrorString(e));
      (void)cudaGetLastError();
    }
  }
  return GC_SUCCESS;
}

static void unmap(gc_comm_t comm, char *mapped[GC_MAX_LOCAL_RANKS]) {
  for (int p = 0; p < comm->local_size && p < GC_MAX_LOCAL_RANKS; p++)
    if (p != comm->local_rank && mapped[p]) cudaIpcCloseMemHandle(mapped[p]);
}

/* exchange, then whether every rank mapped every peer, agreed (*everyone). Unless it succeeds with
 * *everyone, nothing stays mapped. */
static gc_result_t map_everywhere(gc_comm_t comm, void *mine, char *mapped[GC_MAX_LOCAL_RANKS],
                                  int peer_ok[GC_MAX_LOCAL_RANKS], int *everyone) {
  *everyone = 0;
  GC_CHECK(exchange(comm, mine, mapped, peer_ok));
  int all = 1;
  for (int p = 0; p < comm->local_size; p++) all &= peer_ok[p];
  gc_result_t r = gc__boot_min_int(comm, &all);
  *everyone = r == GC_SUCCESS && all;
  if (!*everyone) unmap(comm, mapped);
  return r;
}

/* This rank's part: one allocation of signals, the push area, the LL area (all-ones: nothing has
 * arrived), then staging; and the mapped host word where kernels record errors. */
static gc_result_t transport_alloc(gc_comm_t comm, size_t bytes, size_t sig_bytes, size_t ll_at, char **base) {
  gc__transport_t *tp = &comm->tp;
  GC_CUDA_CHECK(comm, cudaMalloc((void **)base, gc__whole_pages(bytes)));
  /* On the communicator's own (non-blocking) stream: nobody else's work is waited for. */
  GC_CUDA_CHECK(comm, cudaMemsetAsync(*base, 0, sig_bytes, comm->stream));
  GC_CUDA_CHECK(comm, cudaMemsetAsync(*base + ll_at, 0xFF, (GC_LL_BYTES + 255) & ~(size_t)255, comm->stream));
  GC_CHECK(gc__stream_wait(comm, comm->stream, "gc_comm_init: clearing the signals"));
  GC_CUDA_CHECK(comm, cudaHostAlloc((void **)&tp->error_host, sizeof(uint32_t), cudaHostAllocMapped));
  *tp->error_host = 0;
  GC_CUDA_CHECK(comm, cudaHostGetDevicePointer((void **)&tp->error_dev, tp->error_host, 0));
  return GC_SUCCESS;
}

gc_result_t gc__transport_init(gc_comm_t comm) {
  gc__transport_t *tp = &comm->tp;
  int n = comm->local_size;
  /* Peer-to-peer kernels serve one node of 1..8 GPUs with every rank on a GPU (all agreed). */
  if (!comm->all_gpu || comm->node_count != 1 || n > GC_MAX_LOCAL_RANKS) {
    GC_INFO(GC_SUB_P2P, "peer-to-peer kernels off (all_gpu=%d nodes=%d local_size=%d)", comm->all_gpu,
            comm->node_count, n);
    return GC_SUCCESS;
  }

  size_t staging = comm->tp.staging_bytes;
  size_t sig_bytes = (sizeof(gc_ksignals_t) + 255) & ~(size_t)255;
  size_t push_bytes = (sizeof(gc_kpush_t) + 255) & ~(size_t)255;
  size_t ll_bytes = (GC_LL_BYTES + 255) & ~(size_t)255;
  char *base = NULL;
  gc_result_t mine = transport_alloc(comm, sig_bytes + push_bytes + ll_bytes + staging, sig_bytes,
                                     sig_bytes + push_bytes, &base);
  char *mapped[GC_MAX_LOCAL_RANKS];
  int ok[GC_MAX_LOCAL_RANKS], everyone = 0;
  gc_result_t r = map_everywhere(comm, mine == GC_SUCCESS ? base : NULL, mapped, ok, &everyone);
  if (r == GC_SUCCESS)
    for (int p = 0; p < n; p++) comm->peer_access[p] = ok[p];
  if (mine != GC_SUCCESS || r != GC_SUCCESS || !everyone) {
    if (mine == GC_SUCCESS && r == GC_SUCCESS)
      GC_INFO(GC_SUB_P2P, "some pair of GPUs cannot map each other: MPI path for device buffers");
    cudaFree(base);
    if (tp->error_host) cudaFreeHost(tp->error_host);
    tp->error_host = NULL;
    tp->error_dev = NULL;
    return mine != GC_SUCCESS ? mine : r;
  }
  for (int p = 0; p < n; p++) {
    tp->signals[p] = (uint32_t *)mapped[p];
    tp->push[p] = mapped[p] + sig_bytes;
    tp->ll[p] = (unsigned char *)mapped[p] + sig_bytes + push_bytes;
    tp->staging[p] = mapped[p] + sig_bytes + push_bytes + ll_bytes;
  }
  tp->timeout_ns = (uint64_t)comm->timeout_ms * 1000000ull;
  comm->p2p_ready = 1;
  GC_INFO(GC_SUB_P2P, "peer-to-peer ready: %d GPUs, %zu staging bytes each", n, staging);
  return GC_SUCCESS;
}

void gc__transport_destroy(gc_comm_t comm) {
  gc__transport_t *tp = &comm->tp;
  if (!comm->p2p_ready) return;
  char *mapped[GC_MAX_LOCAL_RANKS] = {0};
  for (int p = 0; p < comm->local_size; p++) mapped[p] = (char *)tp->signals[p];
  unmap(comm, mapped);
  cudaFree(tp->signals[comm->local_rank]);
  if (tp->error_host) cudaFreeHost(tp->error_host);
  memset(tp, 0, sizeof *tp);
  comm->p2p_ready = 0;
}

/* The gc_mem_alloc buffer holding [p, p + bytes), or NULL. */
static const gc__symmetric_t *symmetric_holding(gc_comm_t comm, const char *p, size_t bytes) {
  for (const gc__symmetric_t *s = comm->symmetric; s; s = s->next) {
    const char *own = s->base[comm->local_rank];
    if (p >= own && p + bytes <= own + s->bytes) return s;
  }
  return NULL;
}

bool gc__symmetric_lookup(gc_comm_t comm, const void *ptr, size_t bytes,
                          void *peers[GC_MAX_LOCAL_RANKS]) {
  const gc__symmetric_t *s = symmetric_holding(comm, ptr, bytes);
  if (!s) return false;
  size_t off = (size_t)((const char *)ptr - s->base[comm->local_rank]);
  for (int r = 0; r < comm->local_size; r++) peers[r] = s->base[r] + off;
  return true;
}

uint64_t gc__symmetric_place(gc_comm_t comm, const void *ptr) {
  const gc__symmetric_t *s = symmetric_holding(comm, ptr, 1);
  return s ? (s->serial + 2) << 40 | (uint64_t)((const char *)ptr - s->base[comm->local_rank]) : 0;
}

/* This rank's part of a gc_mem_alloc buffer, in a new record. */
static gc_result_t mem_alloc_mine(gc_comm_t comm, size_t bytes, void **out, gc__symmetric_t **made) {
  if (!out) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mem_alloc: out is NULL");
  if (bytes == 0) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mem_alloc: bytes is 0");
  if (bytes > GC_MAX_ALLOC_BYTES)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mem_alloc: %zu bytes is more than any GPU holds", bytes);
  gc__symmetric_t *s = calloc(1, sizeof *s);
  if (!s) return GC_FAIL(comm, GC_ERR_SYSTEM, "gc_mem_alloc: out of host memory");
  s->bytes = bytes;
  s->device = comm->device >= 0;
  /* On the device rounded up so every rank's buffer ends on a 16-byte pack boundary (and from
   * 2 MB up, on a page: gc__whole_pages). */
  cudaError_t e = cudaSuccess;
  if (s->device) e = cudaMalloc((void **)&s->base[comm->local_rank], gc__whole_pages((bytes + 255) & ~(size_t)255));
  else s->base[comm->local_rank] = malloc(bytes);
  if (e != cudaSuccess || !s->base[comm->local_rank]) {
    free(s);
    if (e == cudaSuccess) return GC_FAIL(comm, GC_ERR_SYSTEM, "gc_mem_alloc: malloc(%zu) failed", bytes);
    (void)cudaGetLastError();
    return GC_FAIL(comm, GC_ERR_CUDA, "gc_mem_alloc: cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
  }
  *made = s;
  return GC_SUCCESS;
}

/* gc_mem_alloc: collective; on a peer-to-peer communicator every rank maps every other's buffer,
 * and a rank that could not allocate tells its peers (every rank then fails). */
static gc_result_t mem_alloc_impl(gc_comm_t comm, size_t bytes, void **out) {
  GC_CHECK(gc__comm_check(comm));
  gc__symmetric_t *s = NULL;
  gc_result_t mine = mem_alloc_mine(comm, bytes, out, &s);
  if (comm->p2p_ready) {
    char *mapped[GC_MAX_LOCAL_RANKS];
    int ok[GC_MAX_LOCAL_RANKS], everyone = 0;
    gc_result_t r = map_everywhere(comm, s ? s->base[comm->local_rank] : NULL, mapped, ok, &everyone);
    if (mine == GC_SUCCESS && r == GC_SUCCESS && !everyone)
      r = GC_FAIL(comm, GC_ERR_CUDA, "gc_mem_alloc: a peer could not map the buffer");
    if (mine == GC_SUCCESS && r != GC_SUCCESS) {
      cudaFree(s->base[comm->local_rank]);
      free(s);
      return r;
    }
    if (mine == GC_SUCCESS)
      for (int p = 0; p < comm->local_size; p++) s->base[p] = mapped[p];
  }
  GC_CHECK(mine);
  s->serial = comm->symmetric_made++;
  s->next = comm->symmetric;
  comm->symmetric = s;
  *out = s->base[comm->local_rank];
  return GC_SUCCESS;
}

gc_result_t gc_mem_alloc(gc_comm_t comm, size_t bytes, void **out) {
  GC_ON_DEVICE(comm, mem_alloc_impl(comm, bytes, out));
}

static void symmetric_release(gc_comm_t comm, gc__symmetric_t *s) {
  if (s->device) {
    if (comm->p2p_ready) unmap(comm, s->base);
    cudaFree(s->base[comm->local_rank]);
  } else {
    free(s->base[comm->local_rank]);
  }
  free(s);
}

static gc_result_t mem_free_impl(gc_comm_t comm, void *ptr) {
  GC_CHECK(gc__comm_check(comm));
  if (!ptr) return GC_SUCCESS;
  for (gc__symmetric_t **link = &comm->symmetric; *link; link = &(*link)->next) {
    gc__symmetric_t *s = *link;
    if (s->base[comm->local_rank] != ptr) continue;
    /* Peers may still read this buffer in a kernel in flight: every rank's device idle first
     * (bounded; a device still busy leaves the buffer as it was, GC_ERR_STREAM_TIMEOUT). */
    GC_CHECK(gc__quiesce(comm, "gc_mem_free"));
    *link = s->next;
    symmetric_release(comm, s);
    return GC_SUCCESS;
  }
  return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_mem_free: %p was not returned by gc_mem_alloc", ptr);
}

gc_result_t gc_mem_free(gc_comm_t comm, void *ptr) {
  GC_ON_DEVICE(comm, mem_free_impl(comm, ptr));
}

void gc__symmetric_release_all(gc_comm_t comm) {
  while (comm->symmetric) {
    gc__symmetric_t *s = comm->symmetric;
    comm->symmetric = s->next;
    symmetric_release(comm, s);
  }
}
