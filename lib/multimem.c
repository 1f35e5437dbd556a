/* multimem.c — the NVLink multicast (NVLS) collectives' setup, calls (all-reduce, reduce-scatter)
 * and teardown.
 *
 * Off unless GC_MULTIMEM=1, and never set up while an operator's kill switch is set
 * (gc__multicast_kill_switch): a multicast object on a host whose operator forbids them can take
 * its GPUs out of service. Set up at communicator init on one node of 2+ peer-to-peer GPUs that
 * all report CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
 *   local rank 0 creates the multicast object for the node's GPUs and exports it as a file
 *   descriptor, which reaches the other local ranks over a Unix socket (gc__share_fd); every rank
 *   imports it, adds its GPU, and once all have, binds one allocation of its own to it and maps
 *   both: uc (its own memory) and mc (the multicast address).
 * Every step is agreed on by all local ranks, so one rank's failure leaves the path unavailable
 * everywhere (with the reason in comm->mm.why) and nobody waits. The driver calls come through
 * cudaGetDriverEntryPointByVersion: the library does not link libcuda.
 * Never run on the GPU hosts this project was built on: their operators switch multicast off.
 */
#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cuda.h>

#include "gc_internal.h"
#include "kernels.h"

/* ---- passing a file descriptor to the other local ranks -------------------------------------- */

/* Waits up to ms for fd to become ready for `events`; 0 when it did not. */
static int ready_within(int fd, short events, int ms) {
  struct pollfd p = {fd, events, 0};
  int r;
  do r = poll(&p, 1, ms);
  while (r < 0 && errno == EINTR);
  return r > 0;
}

static int send_fd(int sock, int fd) {
  char byte = 'f';
  struct iovec io = {&byte, 1};
  union { struct cmsghdr h; char space[CMSG_SPACE(sizeof(int))]; } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct msghdr m = {0};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl.space;
  m.msg_controllen = sizeof ctl.space;
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &m, MSG_NOSIGNAL) == 1;
}

static int recv_fd(int sock) {
  char byte;
  struct iovec io = {&byte, 1};
  union { struct cmsghdr h; char space[CMSG_SPACE(sizeof(int))]; } ctl;
  struct msghdr m = {0};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl.space;
  m.msg_controllen = sizeof ctl.space;
  if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1) return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

gc_result_t gc__share_fd(gc_comm_t comm, int fd, int *out) {
  *out = -1;
  const int root = comm->local_rank == 0, ms = comm->timeout_ms;
  /* The root listens on a name in the abstract namespace (nothing on disk), unique per process
   * and call, and broadcasts it with a byte that says whether it listens. */
  static int calls;
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  char name[64] = {0};
  int listener = -1, ok = 1;
  if (root) {
    snprintf(name, sizeof name, "gpucoll-fd-%ld-%d", (long)getpid(), __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED));
    memcpy(addr.sun_path + 1, name, strlen(name));
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ok = listener >= 0 && bind(listener, (struct sockaddr *)&addr, len) == 0 &&
         listen(listener, comm->local_size) == 0 && fd >= 0;
  }
  char said[sizeof name + 1]; /* the root's name, then whether it listens */
  memcpy(said, name, sizeof name);
  said[sizeof name] = (char)ok;
  gc_result_t rc = gc__boot_local_bcast(comm, said, sizeof said); /* every rank, always */
  if (rc != GC_SUCCESS || !said[sizeof name]) {
    if (listener >= 0) close(listener);
    if (rc != GC_SUCCESS) return rc;
    return GC_FAIL(comm, GC_ERR_SYSTEM, "passing a file descriptor: local rank 0 has none or could not listen");
  }
  if (root) {
    *out = fd;
    for (int k = 1; k < comm->local_size && ok; k++) {
      int s = ready_within(listener, POLLIN, ms) ? accept(listener, NULL, NULL) : -1;
      ok = s >= 0 && send_fd(s, fd);
      if (s >= 0) close(s);
    }
    close(listener);
  } else {
    memcpy(addr.sun_path + 1, said, strlen(said));
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(said));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ok = s >= 0 && connect(s, (struct sockaddr *)&addr, len) == 0 && ready_within(s, POLLIN, ms) &&
         (*out = recv_fd(s)) >= 0;
    if (s >= 0) close(s);
  }
  GC_CHECK(gc__boot_local_min_int(comm, &ok));
  if (!ok) {
    if (!root && *out >= 0) close(*out);
    *out = -1;
    return GC_FAIL(comm, GC_ERR_SYSTEM, "passing a file descriptor between local ranks failed (%s)", strerror(errno));
  }
  return GC_SUCCESS;
}

/* ---- sizes ----------------------------------------------------------------------------------- */

size_t gc__multimem_bytes(size_t want, size_t mc_granularity, size_t alloc_granularity) {
  size_t g = mc_granularity > alloc_granularity ? mc_granularity : alloc_granularity;
  if (g == 0) return 0;
  if (want < g) want = g;
  if (want > SIZE_MAX - g) return 0;
  return (want + g - 1) / g * g;
}

#if CUDART_VERSION >= 12050

/* ---- the driver calls ------------------------------------------------------------------------ */

typedef struct {
  CUresult (*GetErrorString)(CUresult, const char **);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*MulticastGetGranularity)(size_t *, const CUmulticastObjectProp *, CUmulticastGranularity_flags);
  CUresult (*MulticastCreate)(CUmemGenericAllocationHandle *, const CUmulticastObjectProp *);
  CUresult (*MulticastAddDevice)(CUmemGenericAllocationHandle, CUdevice);
  CUresult (*MulticastBindMem)(CUmemGenericAllocationHandle, size_t, CUmemGenericAllocationHandle, size_t, size_t,
                               unsigned long long);
  CUresult (*MulticastUnbind)(CUmemGenericAllocationHandle, CUdevice, size_t, size_t);
  CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
  CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
  CUresult (*MemRelease)(CUmemGenericAllocationHandle);
  CUresult (*MemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                         unsigned long long);
  CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
  CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*MemAddressFree)(CUdeviceptr, size_t);
  CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*MemUnmap)(CUdeviceptr, size_t);
  CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
} driver_t;

static int load_driver(driver_t *d, char *why, size_t len) {
  static const char *const names[] = {
      "cuGetErrorString",       "cuDeviceGet",          "cuDeviceGetAttribute",
      "cuMulticastGetGranularity", "cuMulticastCreate",  "cuMulticastAddDevice",
      "cuMulticastBindMem",     "cuMulticastUnbind",    "cuMemGetAllocationGranularity",
      "cuMemCreate",            "cuMemRelease",         "cuMemExportToShareableHandle",
      "cuMemImportFromShareableHandle", "cuMemAddressReserve", "cuMemAddressFree",
      "cuMemMap",               "cuMemUnmap",           "cuMemSetAccess"};
  void **slot = (void **)d;
  _Static_assert(sizeof(driver_t) == sizeof names / sizeof names[0] * sizeof(void *), "one slot per name");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    enum cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion(names[i], &slot[i], 12010, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || !slot[i]) {
      (void)cudaGetLastError();
      snprintf(why, len, "the driver has no %s", names[i]);
      return 0;
    }
  }
  return 1;
}

/* Records why the path is unavailable (first reason wins) and returns 0. */
static int no(gc_comm_t comm, const driver_t *d, CUresult e, const char *what) {
  if (comm->mm.why[0]) return 0;
  const char *text = "?";
  if (d->GetErrorString) d->GetErrorString(e, &text);
  snprintf(comm->mm.why, sizeof comm->mm.why, "%s failed: %s", what, text);
  return 0;
}
#define DRV(call, what) ((e = d->call) == CUDA_SUCCESS || no(comm, d, e, what))

/* 1 (and why in comm->mm.why) when this communicator takes no multicast object. The conditions
 * are the same on every rank (p2p_ready and the size are agreed). */
static int multimem_refused(gc_comm_t comm) {
  gc__multimem_t *mm = &comm->mm;
  if (!comm->multimem_asked) {
    snprintf(mm->why, sizeof mm->why, "GC_MULTIMEM is not 1");
    return 1;
  }
  const char *which = NULL;
  if (gc__multicast_kill_switch(&which)) { /* never a multicast object where the operator forbids it */
    snprintf(mm->why, sizeof mm->why, "%s is set, the operator's NVLink multicast kill switch", which);
    return 1;
  }
  if (comm->device < 0 || !comm->p2p_ready || comm->local_size < 2 || comm->cc_major < 9) {
    snprintf(mm->why, sizeof mm->why, "it needs 2+ peer-to-peer GPUs of compute capability 9.0 or newer");
    return 1;
  }
  return 0;
}

/* The multicast object's properties (its size still 0) and this rank's allocation's. */
static void multimem_props(gc_comm_t comm, CUmulticastObjectProp *mprop, CUmemAllocationProp *aprop) {
  memset(mprop, 0, sizeof *mprop);
  mprop->numDevices = (unsigned)comm->local_size;
  mprop->handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  memset(aprop, 0, sizeof *aprop);
  aprop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  aprop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  aprop->location.id = comm->device;
  aprop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

/* The size (collective over the node): the staging area's, in whole granules of both the
 * multicast object and cuMemCreate (the minimum granules: the recommended multicast one can be
 * hundreds of MB). Every rank must use the same size: the largest granule of any rank decides
 * (*g). Sets mm.bytes and mprop's size; *ok stays 1 only where every rank's granules are known. */
static gc_result_t multimem_size(gc_comm_t comm, const driver_t *d, CUmulticastObjectProp *mprop,
                                 const CUmemAllocationProp *aprop, double *g, int *ok) {
  CUresult e = CUDA_SUCCESS;
  size_t mgran = 0, agran = 0;
  *ok = *ok && DRV(MulticastGetGranularity(&mgran, mprop, CU_MULTICAST_GRANULARITY_MINIMUM), "cuMulticastGetGranularity") &&
        DRV(MemGetAllocationGranularity(&agran, aprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
  *g = *ok ? (double)(mgran > agran ? mgran : agran) : 0;
  GC_CHECK(gc__boot_local_min_int(comm, ok));
  GC_CHECK(gc__boot_max_double(comm, g));
  comm->mm.bytes = *ok ? gc__multimem_bytes(comm->tp.staging_bytes, (size_t)*g, 1) : 0;
  mprop->size = comm->mm.bytes;
  *ok = *ok && comm->mm.bytes > 0;
  return GC_SUCCESS;
}

/* Local rank 0 makes the object; every rank gets it as a file descriptor and adds its GPU, all
 * GPUs before any memory is bound (collective over the node). */
static gc_result_t multimem_share(gc_comm_t comm, const driver_t *d, CUdevice dev, const CUmulticastObjectProp *mprop,
                                  int *ok) {
  gc__multimem_t *mm = &comm->mm;
  CUresult e = CUDA_SUCCESS;
  int fd = -1;
  if (*ok && comm->local_rank == 0) {
    *ok = DRV(MulticastCreate(&mm->mc_handle, mprop), "cuMulticastCreate");
    mm->have_mc = *ok;
    *ok = *ok && DRV(MemExportToShareableHandle(&fd, mm->mc_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     "cuMemExportToShareableHandle");
  }
  GC_CHECK(gc__boot_local_min_int(comm, ok));
  if (*ok) {
    gc_result_t r = gc__share_fd(comm, fd, &mm->fd);
    if (r != GC_SUCCESS) *ok = 0, snprintf(mm->why, sizeof mm->why, "%s", gc__message_body(comm->last_error));
  }
  if (fd >= 0 && mm->fd != fd) close(fd); /* the root's, when it did not become mm->fd */
  if (*ok && comm->local_rank != 0) {
    *ok = DRV(MemImportFromShareableHandle(&mm->mc_handle, (void *)(uintptr_t)mm->fd,
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              "cuMemImportFromShareableHandle");
    mm->have_mc = *ok;
  }
  *ok = *ok && DRV(MulticastAddDevice(mm->mc_handle, dev), "cuMulticastAddDevice");
  GC_CHECK(gc__boot_local_min_int(comm, ok));
  return GC_SUCCESS;
}

/* This rank's memory, bound to the object, then both mappings (uc its own memory, mc the
 * multicast address), each reserved at alignment `align`; mm records what teardown must undo. */
static void multimem_map(gc_comm_t comm, const driver_t *d, const CUmemAllocationProp *aprop, size_t align, int *ok) {
  gc__multimem_t *mm = &comm->mm;
  CUresult e = CUDA_SUCCESS;
  *ok = *ok && DRV(MemCreate(&mm->mem_handle, mm->bytes, aprop, 0), "cuMemCreate");
  mm->have_mem = *ok;
  *ok = *ok && DRV(MulticastBindMem(mm->mc_handle, 0, mm->mem_handle, 0, mm->bytes, 0), "cuMulticastBindMem");
  mm->bound = *ok;
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = comm->device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr uc = 0, mc = 0;
  *ok = *ok && DRV(MemAddressReserve(&uc, mm->bytes, align, 0, 0), "cuMemAddressReserve");
  mm->uc = (void *)(uintptr_t)uc;
  *ok = *ok && DRV(MemMap(uc, mm->bytes, 0, mm->mem_handle, 0), "cuMemMap") && (mm->uc_mapped = 1) &&
        DRV(MemSetAccess(uc, mm->bytes, &access, 1), "cuMemSetAccess");
  *ok = *ok && DRV(MemAddressReserve(&mc, mm->bytes, align, 0, 0), "cuMemAddressReserve");
  mm->mc = (void *)(uintptr_t)mc;
  *ok = *ok && DRV(MemMap(mc, mm->bytes, 0, mm->mc_handle, 0), "cuMemMap (multicast)") && (mm->mc_mapped = 1) &&
        DRV(MemSetAccess(mc, mm->bytes, &access, 1), "cuMemSetAccess (multicast)");
}

gc_result_t gc__multimem_init(gc_comm_t comm) {
  gc__multimem_t *mm = &comm->mm;
  memset(mm, 0, sizeof *mm);
  mm->fd = -1;
  if (multimem_refused(comm)) return GC_SUCCESS;
  driver_t drv, *d = &drv;
  memset(d, 0, sizeof *d);
  CUresult e = CUDA_SUCCESS;
  CUdevice dev = 0;
  int ok = load_driver(d, mm->why, sizeof mm->why), supported = 0;
  ok = ok && DRV(DeviceGet(&dev, comm->device), "cuDeviceGet") &&
       DRV(DeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev), "cuDeviceGetAttribute");
  if (ok && !supported) ok = 0, snprintf(mm->why, sizeof mm->why, "GPU %d does not support multicast", comm->device);
  CUmulticastObjectProp mprop;
  CUmemAllocationProp aprop;
  multimem_props(comm, &mprop, &aprop);
  double g = 0;
  GC_CHECK(multimem_size(comm, d, &mprop, &aprop, &g, &ok));
  GC_CHECK(multimem_share(comm, d, dev, &mprop, &ok));
  multimem_map(comm, d, &aprop, (size_t)g, &ok);
  GC_CHECK(gc__boot_local_min_int(comm, &ok));
  if (!ok) {
    if (!mm->why[0]) snprintf(mm->why, sizeof mm->why, "another local rank failed to set it up");
    GC_INFO(GC_SUB_P2P, "multimem unavailable: %s", mm->why);
    gc__multimem_destroy(comm);
    return GC_SUCCESS;
  }
  mm->ready = 1;
  GC_INFO(GC_SUB_P2P, "multimem ready: %zu bytes bound on %d GPUs", mm->bytes, comm->local_size);
  return GC_SUCCESS;
}

void gc__multimem_destroy(gc_comm_t comm) {
  gc__multimem_t *mm = &comm->mm;
  driver_t d;
  memset(&d, 0, sizeof d);
  char why[sizeof mm->why];
  if ((mm->uc || mm->mc || mm->have_mem || mm->have_mc) && load_driver(&d, why, sizeof why)) {
    CUdevice dev = 0;
    d.DeviceGet(&dev, comm->device);
    if (mm->mc_mapped) d.MemUnmap((CUdeviceptr)(uintptr_t)mm->mc, mm->bytes);
    if (mm->mc) d.MemAddressFree((CUdeviceptr)(uintptr_t)mm->mc, mm->bytes);
    if (mm->uc_mapped) d.MemUnmap((CUdeviceptr)(uintptr_t)mm->uc, mm->bytes);
    if (mm->uc) d.MemAddressFree((CUdeviceptr)(uintptr_t)mm->uc, mm->bytes);
    if (mm->bound) d.MulticastUnbind(mm->mc_handle, dev, 0, mm->bytes);
    if (mm->have_mem) d.MemRelease(mm->mem_handle);
    if (mm->have_mc) d.MemRelease(mm->mc_handle);
  }
  if (mm->fd >= 0) close(mm->fd);
  char keep[sizeof mm->why];
  memcpy(keep, mm->why, sizeof keep);
  memset(mm, 0, sizeof *mm);
  mm->fd = -1;
  memcpy(mm->why, keep, sizeof keep);
}

#else /* a toolkit older than 12.5 (no cudaGetDriverEntryPointByVersion) */

gc_result_t gc__multimem_init(gc_comm_t comm) {
  memset(&comm->mm, 0, sizeof comm->mm);
  comm->mm.fd = -1;
  snprintf(comm->mm.why, sizeof comm->mm.why, "gpucoll was built with a CUDA toolkit older than 12.5");
  return GC_SUCCESS;
}

void gc__multimem_destroy(gc_comm_t comm) { (void)comm; }

#endif

/* ---- the call -------------------------------------------------------------------------------- */

/* What both multicast collectives take: sums of float32/16 or bf16, no epilogue. */
static gc_result_t check_multimem_call(gc_comm_t comm, const gc_kargs_t *a) {
  gc_dtype_t dtype = (gc_dtype_t)a->dtype;
  if (a->op != GC_SUM || (dtype != GC_FLOAT32 && dtype != GC_FLOAT16 && dtype != GC_BFLOAT16))
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "multimem sums float32, float16 or bfloat16 (not %s %s)",
                   gc_dtype_name(dtype), gc_op_name((gc_op_t)a->op));
  if (a->ep.apply_scale || a->ep.add || a->ep.out_dtype != a->dtype)
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "multimem takes no epilogue (scale, add, out_dtype; GC_AVG is a scaled sum)");
  return GC_SUCCESS;
}

gc_result_t gc__multimem_allreduce(gc_comm_t comm, gc_kargs_t *a, const void *send, void *recv, size_t count,
                                   cudaStream_t stream) {
  GC_CHECK(check_multimem_call(comm, a));
  a->pub[0] = comm->mm.uc;
  a->pub[1] = comm->mm.mc;
  /* In chunks of the bound memory, each one kernel: copy in, reduce through the switch, copy out. */
  size_t es = gc_dtype_size((gc_dtype_t)a->dtype), chunk = comm->mm.bytes / es;
  for (size_t done = 0; done < count; done += chunk) {
    a->send = (const char *)send + done * es;
    a->recv = (char *)recv + done * es;
    a->count = count - done < chunk ? count - done : chunk;
    GC_CHECK(gc__launched(comm, gc_kernel_allreduce_multimem(a, stream), "multimem all-reduce"));
  }
  return GC_SUCCESS;
}

/* Parts of len[r] elements at off[r] of send, rank r's reduced into recv: in chunks of every part
 * in step, each chunk's parts side by side in the bound memory (a 16-byte multiple apart). */
gc_result_t gc__multimem_reducescatter(gc_comm_t comm, gc_kargs_t *a, const void *send, void *recv,
                                       const size_t *off, const size_t *len, cudaStream_t stream) {
  GC_CHECK(check_multimem_call(comm, a));
  const int n = comm->local_size;
  const size_t es = gc_dtype_size((gc_dtype_t)a->dtype), slot = comm->mm.bytes / (size_t)n / 16 * 16;
  if (slot < 16) return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "multimem: %zu bound bytes cannot hold %d parts", comm->mm.bytes, n);
  const size_t chunk = slot / es; /* elements of each part per kernel */
  size_t most = 0;
  for (int r = 0; r < n; r++) most = len[r] > most ? len[r] : most;
  a->pub[0] = comm->mm.uc;
  a->pub[1] = comm->mm.mc;
  a->send = send;
  a->slot_bytes = slot;
  for (size_t c0 = 0; c0 < most; c0 += chunk) {
    for (int r = 0; r < n; r++) {
      size_t w = len[r] > c0 ? len[r] - c0 : 0;
      a->region[r] = (gc_kregion_t){1, w < chunk ? w : chunk, off[r] + c0, 0, 0};
    }
    a->recv = (char *)recv + c0 * es;
    GC_CHECK(gc__launched(comm, gc_kernel_reducescatter_multimem(a, stream), "multimem reduce-scatter"));
  }
  return GC_SUCCESS;
}
