// gpucoll-ipcprobe — copy-engine copies into another process's GPU memory, alone and beside SM
// copies: a diagnostic for the staged copy-engine path, whose copies slow down when an allocation's
// size is no multiple of 2 MB.
//
// usage: gpucoll-ipcprobe [MB (512)] [iterations (5)]
// Forks one process for GPU 0 and one for GPU 1 before any CUDA call, as two MPI ranks would be.
// Each process allocates a source, destinations that the other process copies into, and two
// scratch buffers. A destination is shared either through a legacy IPC handle (cudaIpcGetMemHandle,
// opened with cudaIpcMemLazyEnablePeerAccess, as lib/transport.c does) or through a cuMem
// allocation exported as a POSIX file descriptor and mapped by the peer (cuMemImportFromShareableHandle,
// cuMemMap, cuMemSetAccess for the peer's GPU only). Then both GPUs at once copy their source into
// the peer's destination in 16 MB pieces, one after another on one stream: into the whole
// destination in turn, or into a ring of three pieces (as the library's staging rows), the ring
// either a 48 MB allocation or one of 48 MB + kOdd bytes ("odd size"; cuMem allocations are whole
// pages). They do this alone, or beside SM copies of the same bytes on a second stream, one per copy
// once that copy is done (as the staged path copies each piece out of staging): between the two
// scratch buffers, or out of our own destination at that piece's place into scratch ("copy out";
// no back-pressure: the bytes are not checked). Each line gives the slower process's time for the
// copies alone (the second stream is not waited for), best of the iterations, the copies' GB/s,
// the mean over the iterations, and the best iteration's time until the SM copies were done too.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

constexpr const char *kProbeName = "ipcprobe";
#include "probe.cuh"

#define CHECK_CU(x)                                                                         \
  do {                                                                                      \
    CUresult r_ = (x);                                                                      \
    if (r_ != CUDA_SUCCESS) {                                                               \
      const char *s_ = "?";                                                                 \
      cuGetErrorString(r_, &s_);                                                            \
      fprintf(stderr, "ipcprobe: %s failed at %s:%d: %s\n", #x, __FILE__, __LINE__, s_);   \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)
#define CHECK_SYS(x)                                                                 \
  do {                                                                               \
    if ((x) < 0) {                                                                   \
      perror("ipcprobe: " #x);                                                       \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

constexpr size_t kPiece = (size_t)16 << 20;
constexpr size_t kRing = 3;       // a "ring" destination: three pieces in turn, as the library's staging rows
constexpr size_t kOdd = 21760;    // the "odd size" ring's allocation is this much past 48 MB

// The socket to the other process: whole messages, one file descriptor alongside when asked.
static int sock;

static void send_all(const void *p, size_t n, int fd = -1) {
  struct iovec iov = {(void *)p, n};
  struct msghdr m = {};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  char ctl[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  if (sendmsg(sock, &m, 0) != (ssize_t)n) {
    perror("ipcprobe: sendmsg");
    exit(1);
  }
}

static void recv_all(void *p, size_t n, int *fd = nullptr) {
  struct iovec iov = {p, n};
  struct msghdr m = {};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  char ctl[CMSG_SPACE(sizeof(int))] = {};
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  if (recvmsg(sock, &m, MSG_WAITALL) != (ssize_t)n) {
    perror("ipcprobe: recvmsg");
    exit(1);
  }
  if (fd) {
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS) {
      fprintf(stderr, "ipcprobe: no file descriptor came with the message\n");
      exit(1);
    }
    memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
}

static void host_barrier() {
  char b = 0;
  send_all(&b, 1);
  recv_all(&b, 1);
}

static float slower(float mine) {  // the larger of the two processes' figures
  float theirs;
  send_all(&mine, sizeof mine);
  recv_all(&theirs, sizeof theirs);
  return mine > theirs ? mine : theirs;
}

// The peer's destination mapped here by cuMem: our allocation's fd goes out, the peer's comes in.
static char *share_cumem(int dev, size_t bytes, char **mine) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  bytes = (bytes + gran - 1) / gran * gran;
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUmemGenericAllocationHandle own, peer;
  CHECK_CU(cuMemCreate(&own, bytes, &prop, 0));
  CUdeviceptr p, q;
  CHECK_CU(cuMemAddressReserve(&p, bytes, gran, 0, 0));
  CHECK_CU(cuMemMap(p, bytes, 0, own, 0));
  CHECK_CU(cuMemSetAccess(p, bytes, &access, 1));
  int fd = -1, peer_fd = -1;
  CHECK_CU(cuMemExportToShareableHandle(&fd, own, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  char b = 0;
  send_all(&b, 1, fd);
  recv_all(&b, 1, &peer_fd);
  CHECK_CU(cuMemImportFromShareableHandle(&peer, (void *)(uintptr_t)peer_fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  CHECK_CU(cuMemAddressReserve(&q, bytes, gran, 0, 0));
  CHECK_CU(cuMemMap(q, bytes, 0, peer, 0));
  CHECK_CU(cuMemSetAccess(q, bytes, &access, 1));  // mapped for our GPU only: no peer context
  close(fd);
  close(peer_fd);
  *mine = (char *)p;
  return (char *)q;
}

// The same by a legacy IPC handle.
static char *share_ipc(size_t bytes, char **mine) {
  CHECK(cudaMalloc((void **)mine, bytes));
  cudaIpcMemHandle_t h, ph;
  CHECK(cudaIpcGetMemHandle(&h, *mine));
  send_all(&h, sizeof h);
  recv_all(&ph, sizeof ph);
  void *q = nullptr;
  CHECK(cudaIpcOpenMemHandle(&q, ph, cudaIpcMemLazyEnablePeerAccess));
  return (char *)q;
}

static void run(int rank, size_t bytes, int iters) {
  CHECK(cudaSetDevice(rank));
  char *src, *scratch, *mine_ipc, *mine_cumem, *mine_ring, *mine_odd;
  CHECK(cudaMalloc((void **)&src, bytes));
  CHECK(cudaMalloc((void **)&scratch, 2 * bytes));
  CHECK(cudaMemset(src, rank + 1, bytes));
  char *const dst_ipc = share_ipc(bytes, &mine_ipc);
  char *const dst_cumem = share_cumem(rank, bytes, &mine_cumem);
  char *const dst_ring = share_ipc(kRing * kPiece, &mine_ring);
  char *const dst_odd = share_ipc(kRing * kPiece + kOdd, &mine_odd);
  cudaStream_t copies, sm;
  cudaEvent_t start, stop, fork, sm_done;
  CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&sm, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventCreate(&sm_done));
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  std::vector<cudaEvent_t> copied((bytes + kPiece - 1) / kPiece);
  for (auto &e : copied) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  if (rank == 0) {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# ipcprobe: 2 processes, GPUs 0 and 1 (%s), %zu MB each way in 16 MB copies, best of %d\n", prop.name,
           bytes >> 20, iters);
    printf("# %-28s %-20s %8s %8s %8s %8s\n", "destination", "beside the copies", "ms", "GB/s", "mean ms",
           "ms, all");
  }
  struct {
    const char *name;
    char *dst, *arrived;  // the peer's destination mapped here, and ours
    size_t ring;          // 0: the whole destination in turn; else pieces go to kRing places in turn
  } dests[] = {{"cudaIpc, whole", dst_ipc, mine_ipc, 0},
               {"cuMem fd, whole", dst_cumem, mine_cumem, 0},
               {"cudaIpc, ring", dst_ring, mine_ring, kRing},
               {"cuMem fd, ring", dst_cumem, mine_cumem, kRing},
               {"cudaIpc, ring, odd size", dst_odd, mine_odd, kRing}};
  struct {
    const char *name;
    int blocks;     // SM copy beside the copies (0: none)
    bool copy_out;  // from what the peer wrote into our destination (else between scratch buffers)
  } sides[] = {{"nothing", 0, false},
               {"SM copy, 16 blocks", 16, false},
               {"SM copy, 132 blocks", 132, false},
               {"SM copy out, 132", 132, true}};
  for (auto &dest : dests) {
    for (auto &side : sides) {
      float best = 1e30f, best_all = 0, sum = 0;
      for (int it = -1; it < iters; it++) {
        host_barrier();
        CHECK(cudaEventRecord(start, copies));
        CHECK(cudaEventRecord(fork, copies));
        CHECK(cudaStreamWaitEvent(sm, fork, 0));
        for (size_t off = 0; off < bytes; off += kPiece) {
          const size_t len = kPiece < bytes - off ? kPiece : bytes - off;
          const size_t at = dest.ring ? off / kPiece % dest.ring * kPiece : off;  // in the destination
          CHECK(cudaMemcpyAsync(dest.dst + at, src + off, len, cudaMemcpyDeviceToDevice, copies));
          if (side.blocks) {  // paced as the copies out of staging are: one per copy, once it is done
            CHECK(cudaEventRecord(copied[off / kPiece], copies));
            CHECK(cudaStreamWaitEvent(sm, copied[off / kPiece], 0));
            const char *from = side.copy_out ? dest.arrived + at : scratch + bytes + off;
            local_copy<<<side.blocks, kCopyThreads, 0, sm>>>((uint4 *)(scratch + off), (const uint4 *)from,
                                                            len / 16);
            CHECK(cudaGetLastError());
          }
        }
        CHECK(cudaEventRecord(stop, copies));
        CHECK(cudaEventRecord(sm_done, sm));
        CHECK(cudaDeviceSynchronize());
        float ms, ms_all;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        CHECK(cudaEventElapsedTime(&ms_all, start, sm_done));
        ms = slower(ms);
        ms_all = slower(ms_all > ms ? ms_all : ms);
        if (it < 0) continue;  // warm-up
        sum += ms;
        if (ms < best) best = ms, best_all = ms_all;
      }
      if (rank == 0) {
        printf("  %-28s %-20s %8.3f %8.1f %8.3f %8.3f\n", dest.name, side.name, best, bytes / (best * 1e-3) / 1e9,
               sum / iters, best_all);
        fflush(stdout);
      }
    }
  }
  host_barrier();  // neither unmaps what the other may still copy into
  for (char *p : {dst_ipc, dst_ring, dst_odd}) CHECK(cudaIpcCloseMemHandle(p));
  host_barrier();
  for (char *p : {mine_ipc, mine_ring, mine_odd}) CHECK(cudaFree(p));
}

int main(int argc, char **argv) {
  const size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
  const int iters = argc > 2 ? atoi(argv[2]) : 5;
  if (mb < 16 || mb % 16) {
    fprintf(stderr, "ipcprobe: MB must be a multiple of 16\n");
    return 1;
  }
  int pair[2];
  CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
  fflush(stdout);
  const pid_t child = fork();  // before any CUDA call: each process makes its own context
  CHECK_SYS(child);
  const int rank = child == 0 ? 1 : 0;
  sock = pair[rank];
  close(pair[1 - rank]);
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    if (rank == 0) fprintf(stderr, "ipcprobe: needs 2 GPUs, found %d\n", count);
    return 1;
  }
  run(rank, mb << 20, iters);
  if (rank == 1) return 0;
  int status = 0;
  CHECK_SYS(waitpid(child, &status, 0));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
