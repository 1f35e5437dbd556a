/* copyengine.c — large collectives whose bytes cross NVLink by copy engine (cudaMemcpyAsync to a
 * peer's mapped memory), with the SMs reducing and meeting at barriers.
 *
 * Why: on the 4 x H200 host, with every GPU moving data at once, SM reads give ~323 GB/s per GPU,
 * SM writes ~351, and the copy engines ~375-389 in large copies to the peers in turn
 * (measured by a link probe). Each GPU issues its copies one
 * after another to the peers in turn (me+1, me+2, ...), so that at every step the GPUs form a
 * permutation: when every GPU copies to the same GPU first, all fall to ~200.
 *
 * The all-reduce with a reduce kernel runs on the caller's stream (barrier kernels order the
 * GPUs). All-gather, broadcast, reduce-scatter and the all-reduce by copies run on two side
 * streams forked from the caller's stream and joined back, so a call stays one piece of that
 * stream, graph capture included: `copy` carries the copies, `compute` the barriers and
 * reductions; the pipelined ones go chunk by chunk.
 *
 * Reduce-scatter copies piece q of chunk c into rank q's inbox (a staging row per source, in
 * INBOX_NB buffers), and rank q reduces its own input and the rows in rank order with the
 * reduce-scatter kernel, whose first barrier is where every row has arrived; a buffer is written
 * again only once every rank has reduced from it (wait_buffer_free). An entry barrier keeps a
 * call's copies out of buffers and outputs a peer still uses.
 *
 * Outputs not from gc_mem_alloc take the staged forms at the end of this file: the copies go into
 * peers' staging areas, and each rank's SMs copy them out. */
#include "gc_exec.h"

enum { EV_FORK, EV_ENTRY, EV_COPIED, EV_JOIN, EV_SCATTERED, EV_REDUCED = EV_SCATTERED + GC_CE_RING,
       EV_COUNT = EV_REDUCED + GC_CE_RING };
_Static_assert(EV_COUNT == GC_CE_EVENTS, "GC_CE_EVENTS (gc_internal.h) must count the events used here");

/* Made with the communicator (creating streams inside a graph capture is not allowed). */
gc_result_t gc__ce_init(gc_comm_t comm) {
  GC_CUDA_CHECK(NULL, cudaStreamCreateWithFlags(&comm->ce_copy, cudaStreamNonBlocking));
  GC_CUDA_CHECK(NULL, cudaStreamCreateWithFlags(&comm->ce_compute, cudaStreamNonBlocking));
  for (int i = 0; i < GC_CE_EVENTS; i++)
    GC_CUDA_CHECK(NULL, cudaEventCreateWithFlags(&comm->ce_events[i], cudaEventDisableTiming));
  return GC_SUCCESS;
}

void gc__ce_destroy(gc_comm_t comm) {
  for (int i = 0; i < GC_CE_EVENTS; i++)
    if (comm->ce_events[i]) cudaEventDestroy(comm->ce_events[i]);
  if (comm->ce_copy) cudaStreamDestroy(comm->ce_copy);
  if (comm->ce_compute) cudaStreamDestroy(comm->ce_compute);
}

/* `after` waits for what `before` has been given so far, through event i. */
static gc_result_t follow(gc_comm_t comm, cudaStream_t after, cudaStream_t before, int i) {
  GC_CUDA_CHECK(comm, cudaEventRecord(comm->ce_events[i], before));
  GC_CUDA_CHECK(comm, cudaStreamWaitEvent(after, comm->ce_events[i], 0));
  return GC_SUCCESS;
}

static gc_result_t reduce(gc_comm_t comm, const gc_kargs_t *a, cudaStream_t s) {
  return gc__launched(comm, gc_kernel_reducescatter(a, s), "reduce");
}

static gc_result_t barrier(gc_comm_t comm, const gc_kpeers_t *peers, cudaStream_t s) {
  return gc__launched(comm, gc_kernel_barrier(peers, s), "barrier");
}

/* Peer or local copies alike (nothing to do when src is dst already). */
static gc_result_t copy(gc_comm_t comm, void *dst, const void *src, size_t bytes, cudaStream_t s) {
  if (bytes && dst != src) GC_CUDA_CHECK(comm, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  return GC_SUCCESS;
}

/* Both side streams start after what the caller's stream holds; the copies wait for the entry
 * barrier (every peer has reached this call). */
static gc_result_t begin(gc_comm_t comm, const gc_kpeers_t *peers, cudaStream_t stream) {
  GC_CUDA_CHECK(comm, cudaEventRecord(comm->ce_events[EV_FORK], stream));
  GC_CUDA_CHECK(comm, cudaStreamWaitEvent(comm->ce_copy, comm->ce_events[EV_FORK], 0));
  GC_CUDA_CHECK(comm, cudaStreamWaitEvent(comm->ce_compute, comm->ce_events[EV_FORK], 0));
  GC_CHECK(barrier(comm, peers, comm->ce_compute));
  return follow(comm, comm->ce_copy, comm->ce_compute, EV_ENTRY);
}

/* The caller's stream continues once both side streams are done; with `final_barrier`, only
 * once every peer's copies into our buffers are done too. */
static gc_result_t end(gc_comm_t comm, const gc_kpeers_t *peers, int final_barrier, cudaStream_t stream) {
  GC_CHECK(follow(comm, comm->ce_compute, comm->ce_copy, EV_COPIED));
  if (final_barrier) GC_CHECK(barrier(comm, peers, comm->ce_compute));
  GC_CUDA_CHECK(comm, cudaEventRecord(comm->ce_events[EV_JOIN], comm->ce_compute));
  GC_CUDA_CHECK(comm, cudaStreamWaitEvent(stream, comm->ce_events[EV_JOIN], 0));
  GC_CUDA_CHECK(comm, cudaStreamWaitEvent(stream, comm->ce_events[EV_COPIED], 0));
  return GC_SUCCESS;
}

static int ring_event(int base, size_t c) { return base + (int)(c % GC_CE_RING); }

/* Both pipelines through inboxes (the copy-engine reduce-scatter and the staged gather) cycle
 * through INBOX_NB buffers. Buffer c % INBOX_NB is free for chunk c once the compute stream has
 * recorded EV_REDUCED for chunk c - INBOX_NB + 1: its barrier is reached by every rank only once
 * that rank is done with chunk c - INBOX_NB, the buffer's last use. With three buffers a copy
 * waits for a barrier two chunks back, so the copy engine always has the next copy queued. */
#define INBOX_NB 3
_Static_assert(INBOX_NB <= GC_CE_RING, "a chunk's EV_REDUCED is waited for INBOX_NB - 1 chunks after it");
static gc_result_t wait_buffer_free(gc_comm_t comm, size_t c) {
  if (c >= INBOX_NB)
    GC_CUDA_CHECK(comm,
                  cudaStreamWaitEvent(comm->ce_copy, comm->ce_events[ring_event(EV_REDUCED, c - INBOX_NB + 1)], 0));
  return GC_SUCCESS;
}

/* Inbox layout in every rank's staging area: INBOX_NB buffers of `rows` rows (the reduce-scatter:
 * one per source rank) of `row` bytes. The row is at most 16 MB (copies that size run at full
 * speed) and a multiple of 4 KB, so every row starts aligned for any dtype. */
typedef struct {
  int rows;
  size_t row;
} inbox_t;

static inbox_t inbox_layout(gc_comm_t comm, int rows) {
  inbox_t ib = {rows, comm->tp.staging_bytes / ((size_t)INBOX_NB * rows)};
  if (ib.row > ((size_t)16 << 20)) ib.row = (size_t)16 << 20;
  ib.row &= ~(size_t)4095;
  return ib;
}

/* Rows under 4 KB: too little staging for the pipelines through inboxes (and 0-byte rows). */
static int inbox_usable(const inbox_t *ib) { return ib->row >= 4096; }

static char *inbox_row(gc_comm_t comm, const inbox_t *ib, int rank, size_t chunk, int row) {
  return comm->tp.staging[rank] + ((chunk % INBOX_NB) * ib->rows + row) * ib->row;
}

/* Reduces w elements from rows[p] (one per rank: our own input and what the others copied to us)
 * in rank order into out, on the compute stream; the kernel's first barrier is where every row is
 * known to have arrived, its last where every rank has read its rows. */
static gc_result_t reduce_rows(gc_comm_t comm, const gc_kargs_t *base, const char *const rows[], char *out,
                               const char *add, size_t w) {
  gc_kargs_t a = *base;
  for (int p = 0; p < comm->local_size; p++) a.in[p] = rows[p];
  a.region[comm->local_rank] = (gc_kregion_t){1, w, 0, 0, 0};
  a.recv = out;
  a.ep.add = add;
  a.pdl = 0;
  return reduce(comm, &a, comm->ce_compute);
}

/* bytes from src into every peer's output at `at`, one peer after another from the next rank. */
static gc_result_t to_every_peer(gc_comm_t comm, char *const out[], size_t at, const void *src, size_t bytes,
                                 cudaStream_t s) {
  const int n = comm->local_size, me = comm->local_rank;
  for (int k = 1; k < n; k++) GC_CHECK(copy(comm, out[(me + k) % n] + at, src, bytes, s));
  return GC_SUCCESS;
}

/* Slice q of a chunk of cn elements: n slices of a 16-element multiple, the last ones shorter. */
static void slice(size_t cn, int n, int q, size_t *s0, size_t *sn) {
  size_t per = ((cn + n - 1) / n + 15) & ~(size_t)15;
  *s0 = (size_t)q * per < cn ? (size_t)q * per : cn;
  *sn = *s0 + per < cn ? per : cn - *s0;
}

/* How much of a part of len units lies in the chunk that starts at c0 (chunks of `chunk` units). */
static size_t in_chunk(size_t len, size_t c0, size_t chunk) {
  return len > c0 ? (len - c0 < chunk ? len - c0 : chunk) : 0;
}

/* The reduce-scatter by writes of every rank's slice of count elements of send (slice()) into
 * a->recv, which the caller has pointed at our slice of the output, as a->ep.add at our slice of
 * the add vector. */
static gc_result_t slices_by_writes(gc_comm_t comm, gc_kargs_t *a, const void *send, size_t count, size_t es,
                                    cudaStream_t stream) {
  a->send = send;
  for (int p = 0; p < comm->local_size; p++) {
    size_t p0, pn;
    slice(count, comm->local_size, p, &p0, &pn);
    a->region[p] = (gc_kregion_t){1, pn, p0, 0, 0};
  }
  size_t most = 0;
  for (int p = 0; p < comm->local_size; p++) most = a->region[p].width * es > most ? a->region[p].width * es : most;
  gc__facts_t f;
  gc__facts(comm, &f);
  const gc__bywrites_shape_t shape = gc__bywrites_shape(&f, most, a->blocks);
  return gc__reducescatter_bywrites(comm, a, &shape, stream);
}

/* All-reduce: a reduce-scatter kernel reduces this rank's slice into its own output, then the
 * copy engine writes that slice into every peer's output, one peer after another (as
 * gc__ce_allgather does, ~385 GB/s against ~323 for SM reads). The reduce half either reads
 * every rank's input (zero-copy; an input that is not symmetric is first copied into the
 * symmetric output and reduced in place) or, by_writes, takes the reduce-scatter by writes
 * (bywrites.cu: any input, no copy-in). One stream, no fork: either kernel ends on this rank
 * only after every peer has entered the call, so its output may be written; the closing barrier
 * is where every slice has arrived. In place is safe: slice q of rank r's buffer is read only by
 * rank q (or sent to it by rank r) before rank q writes it. */
gc_result_t gc__ce_allreduce(gc_comm_t comm, const struct gc_kargs *base, void *const send_peers[],
                             const void *send, void *const recv_peers[], size_t count, size_t es, size_t os,
                             const void *add, int by_writes, cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  char *const *out = (char *const *)recv_peers;
  gc_kargs_t a = *base;
  size_t s0, sn;
  slice(count, n, me, &s0, &sn);
  a.recv = out[me] + s0 * os;
  a.ep.add = add ? (const char *)add + s0 * es : NULL;
  if (by_writes) {
    /* Every rank writes slice q of its input into rank q's inbox, from where it is: no copy-in.
     * The kernel ends on rank q once every peer has sent all of slice q, so the copies below
     * overwrite no input a peer (in place) still sends from. */
    GC_CHECK(slices_by_writes(comm, &a, send, count, es, stream));
  } else {
    for (int p = 0; p < n; p++) a.in[p] = send_peers ? send_peers[p] : out[p];
    if (!send_peers) GC_CHECK(copy(comm, out[me], send, count * es, stream));
    a.region[me] = (gc_kregion_t){1, sn, s0, 0, 0};
    GC_CHECK(reduce(comm, &a, stream));
  }
  GC_CHECK(to_every_peer(comm, out, s0 * os, out[me] + s0 * os, sn * os, stream));
  return barrier(comm, &base->peers, stream);
}

/* All-reduce with the copy engines carrying both halves, out of place (the output holds the
 * input's type): the output is the inbox. The count up to its last whole 16 n elements goes in
 * `chunks` stages (the caller takes the rest), each split into n equal regions. Per chunk c:
 *   scatter: rank p copies region q of its input into rank q's output at region p, for every peer
 *            q in turn from the next rank (region p of rank q's output gets its final value from
 *            rank p later, so it is free until then);
 *   reduce:  rank q reduces region q of its own input and regions p != q of its output (rank p's
 *            rows) in rank order into region q of its output: the reduce-scatter kernel, reading
 *            local memory only; its first barrier is where every rank's scatter has arrived, its
 *            last where every rank has read its rows;
 *   gather:  rank q copies its region q into every peer's output at region q.
 * The copy stream runs scatter 0, scatter 1, gather 0, scatter 2, gather 1, ...: a chunk is reduced
 * on the compute stream while the next one is scattered, and each GPU's copies go to one peer at a
 * time (~375-385 GB/s here; the reduce-scatter kernel reads peers at ~323, writes reach ~336).
 * Why the output: the inbox rows of the copy-engine reduce-scatter fit the staging area only in
 * pieces of a few MB, and such copies run at 181-236 GB/s. */
gc_result_t gc__ce_allreduce_copies(gc_comm_t comm, const struct gc_kargs *base, const void *send,
                                    void *const recv_peers[], size_t count, size_t es, const void *add, int chunks,
                                    cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  char *const *out = (char *const *)recv_peers;
  const char *in = send, *plus = add;
  const size_t unit = (size_t)16 * n, units = count / unit;
  if (units == 0) return GC_SUCCESS;
  if ((size_t)chunks > units) chunks = (int)units;
  GC_CHECK(begin(comm, &base->peers, stream));
  size_t c0[GC_CE_MAX_CHUNKS + 1];
  for (int c = 0; c <= chunks; c++) c0[c] = units * (size_t)c / (size_t)chunks * unit;
  for (int c = 0; c <= chunks; c++) {
    if (c < chunks) { /* scatter chunk c, then reduce it once it has arrived */
      const size_t per = (c0[c + 1] - c0[c]) / n, mine = c0[c] + (size_t)me * per;
      for (int s = 1; s < n; s++) {
        int q = (me + s) % n;
        GC_CHECK(copy(comm, out[q] + mine * es, in + (c0[c] + (size_t)q * per) * es, per * es, comm->ce_copy));
      }
      GC_CHECK(follow(comm, comm->ce_compute, comm->ce_copy, ring_event(EV_SCATTERED, (size_t)c)));
      const char *rows[GC_MAX_LOCAL_RANKS];
      for (int p = 0; p < n; p++) rows[p] = p == me ? in + mine * es : out[me] + (c0[c] + (size_t)p * per) * es;
      GC_CHECK(reduce_rows(comm, base, rows, out[me] + mine * es, plus ? plus + mine * es : NULL, per));
      GC_CUDA_CHECK(comm, cudaEventRecord(comm->ce_events[ring_event(EV_REDUCED, (size_t)c)], comm->ce_compute));
    }
    if (c > 0) { /* gather chunk c - 1, reduced on every rank (the kernel's last barrier) */
      const size_t per = (c0[c] - c0[c - 1]) / n, mine = c0[c - 1] + (size_t)me * per;
      GC_CUDA_CHECK(comm, cudaStreamWaitEvent(comm->ce_copy, comm->ce_events[ring_event(EV_REDUCED, (size_t)c - 1)], 0));
      GC_CHECK(to_every_peer(comm, out, mine * es, out[me] + mine * es, per * es, comm->ce_copy));
    }
  }
  return end(comm, &base->peers, 1, stream);
}

int gc__ce_inbox_fits(gc_comm_t comm) {
  const inbox_t ib = inbox_layout(comm, comm->local_size);
  return inbox_usable(&ib);
}

gc_result_t gc__ce_reducescatter(gc_comm_t comm, const struct gc_kargs *base, const void *send, void *recv,
                                 const size_t *off, const size_t *len, size_t es, size_t os, const void *add,
                                 cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  const inbox_t ib = inbox_layout(comm, n);
  if (!inbox_usable(&ib))
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "a staging area of %zu bytes is too small for the copy-engine "
                                             "reduce-scatter on %d GPUs (GC_STAGING_BYTES)", comm->tp.staging_bytes, n);
  size_t maxlen = 0;
  for (int r = 0; r < n; r++) maxlen = len[r] > maxlen ? len[r] : maxlen;
  const size_t chunk = ib.row / es, chunks = (maxlen + chunk - 1) / chunk;
  const char *in = send, *plus = add;
  GC_CHECK(begin(comm, &base->peers, stream));
  for (size_t c = 0; c < chunks; c++) {
    const size_t c0 = c * chunk;
    GC_CHECK(wait_buffer_free(comm, c));
    for (int s = 1; s < n; s++) {
      int q = (me + s) % n;
      GC_CHECK(copy(comm, inbox_row(comm, &ib, q, c, me), in + (off[q] + c0) * es, in_chunk(len[q], c0, chunk) * es,
                    comm->ce_copy));
    }
    GC_CHECK(follow(comm, comm->ce_compute, comm->ce_copy, ring_event(EV_SCATTERED, c)));
    const char *rows[GC_MAX_LOCAL_RANKS];
    for (int p = 0; p < n; p++) rows[p] = p == me ? in + (off[me] + c0) * es : inbox_row(comm, &ib, me, c, p);
    GC_CHECK(reduce_rows(comm, base, rows, (char *)recv + c0 * os, plus ? plus + c0 * es : NULL,
                         in_chunk(len[me], c0, chunk)));
    GC_CUDA_CHECK(comm, cudaEventRecord(comm->ce_events[ring_event(EV_REDUCED, c)], comm->ce_compute));
  }
  /* A closing barrier although the output is local: reduce-scatter by writes (bywrites.cu) and
   * the two-shot by writes write peers' staging as soon as their call starts, so no call may end
   * while a peer still reduces from its inboxes. */
  return end(comm, &base->peers, 1, stream);
}

gc_result_t gc__ce_allgather(gc_comm_t comm, const gc_kpeers_t *peers, const void *send, void *const recv_peers[],
                             size_t part, cudaStream_t stream) {
  const int me = comm->local_rank;
  char *const *out = (char *const *)recv_peers;
  GC_CHECK(begin(comm, peers, stream));
  GC_CHECK(to_every_peer(comm, out, me * part, send, part, comm->ce_copy));
  GC_CHECK(copy(comm, out[me] + me * part, send, part, comm->ce_compute)); /* ours, beside the peer copies */
  return end(comm, peers, 1, stream);
}

/* Broadcast: root copies chunk c's slice o to owner o (the other ranks in order); after a barrier
 * per chunk each owner copies its slice on to the other owners. Root never waits; owners forward
 * one chunk behind it, so root's link and every owner's in-link stay busy. */
gc_result_t gc__ce_broadcast(gc_comm_t comm, const gc_kpeers_t *peers, const void *send, void *const recv_peers[],
                             size_t bytes, int root, cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank, owners = n - 1;
  char *const *out = (char *const *)recv_peers;
  /* One owner (2 GPUs): a single copy, nothing to forward. */
  const size_t chunk = owners == 1 ? bytes : (size_t)owners * (8u << 20), chunks = (bytes + chunk - 1) / chunk;
  GC_CHECK(begin(comm, peers, stream));
  if (me == root) GC_CHECK(copy(comm, out[me], send, bytes, comm->ce_compute));
  for (size_t c = 0; c < chunks; c++) {
    const size_t c0 = c * chunk, cn = bytes - c0 < chunk ? bytes - c0 : chunk;
    if (me == root) {
      for (int k = 0; k < owners; k++) {
        int o = (int)((k + c) % owners), r = o < root ? o : o + 1;
        size_t s0, sn;
        slice(cn, owners, o, &s0, &sn);
        GC_CHECK(copy(comm, out[r] + c0 + s0, (const char *)send + c0 + s0, sn, comm->ce_copy));
      }
      GC_CHECK(follow(comm, comm->ce_compute, comm->ce_copy, ring_event(EV_SCATTERED, c)));
      GC_CHECK(barrier(comm, peers, comm->ce_compute));
    } else {
      GC_CHECK(barrier(comm, peers, comm->ce_compute));
      GC_CHECK(follow(comm, comm->ce_copy, comm->ce_compute, ring_event(EV_SCATTERED, c)));
      int mine = me < root ? me : me - 1;
      size_t s0, sn;
      slice(cn, owners, mine, &s0, &sn);
      for (int s = 1; s < n; s++) {
        int r = (me + s) % n;
        if (r != root) GC_CHECK(copy(comm, out[r] + c0 + s0, out[me] + c0 + s0, sn, comm->ce_copy));
      }
    }
  }
  return end(comm, peers, 1, stream);
}

/* A copy within this GPU by the SMs, leaving the copy engine to the copies to peers. */
static gc_result_t local_copy(gc_comm_t comm, void *dst, const void *src, size_t bytes, cudaStream_t s) {
  return gc__launched(comm, gc_kernel_copy(dst, src, bytes, comm->sw.staged_blocks, s), "local copy");
}

/* Source p's row in rank q's staging buffers: how many of q's other sources come before it,
 * counting from q + 1. */
static int row_of(int n, unsigned sources, int p, int q) {
  int row = 0;
  for (int r = (q + 1) % n; r != p; r = (r + 1) % n) row += sources >> r & 1u;
  return row;
}

/* Gathers into outputs peers cannot write (not from gc_mem_alloc) through every rank's staging
 * area: the all-gather, the broadcast and the staged all-reduce's second half. Every rank in the
 * bit mask `sources` sends bytes [0, len[p]) of its `src`; every rank gets them at out + off[p]
 * (ours too, copied locally unless src is there already). In chunks of one staging row; per
 * chunk c:
 *   copy stream:    each source copies its piece into row k of buffer c % INBOX_NB of every other rank,
 *                   to the peers in turn from the next rank (k: the source's place among that
 *                   rank's other sources, counted from the next rank);
 *   compute stream: a barrier, where every piece of chunk c has arrived, then the rows are copied
 *                   into the output by the SMs (local; up to 4% faster than on the copy engine
 *                   on H200).
 * A source writes a buffer again only once every rank has copied it out (wait_buffer_free). */
gc_result_t gc__ce_gather_staged(gc_comm_t comm, const gc_kpeers_t *peers, unsigned sources, const void *src,
                                 void *out, const size_t *off, const size_t *len, cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  int count = 0;
  size_t most = 0;
  for (int p = 0; p < n; p++)
    if (sources >> p & 1u) {
      count++;
      most = len[p] > most ? len[p] : most;
    }
  const inbox_t ib = inbox_layout(comm, count < n ? count : n - 1);
  if (!inbox_usable(&ib))
    return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "a staging area of %zu bytes is too small for the staged copy-engine "
                                             "path (GC_STAGING_BYTES)", comm->tp.staging_bytes);
  char *const dst = out;
  const char *from = src;
  const int sending = sources >> me & 1u;
  const size_t chunks = (most + ib.row - 1) / ib.row;
  int row_there[GC_MAX_LOCAL_RANKS], row_here[GC_MAX_LOCAL_RANKS]; /* our row at rank p, p's row here */
  for (int p = 0; p < n; p++) {
    row_there[p] = row_of(n, sources, me, p);
    row_here[p] = row_of(n, sources, p, me);
  }
  GC_CHECK(begin(comm, peers, stream));
  for (size_t c = 0; c < chunks; c++) {
    const size_t c0 = c * ib.row;
    if (sending) {
      GC_CHECK(wait_buffer_free(comm, c));
      const size_t w = in_chunk(len[me], c0, ib.row);
      for (int k = 1; k < n; k++) {
        int q = (me + k) % n;
        GC_CHECK(copy(comm, inbox_row(comm, &ib, q, c, row_there[q]), from + c0, w, comm->ce_copy));
      }
      GC_CHECK(follow(comm, comm->ce_compute, comm->ce_copy, ring_event(EV_SCATTERED, c)));
    }
    GC_CHECK(barrier(comm, peers, comm->ce_compute));
    GC_CUDA_CHECK(comm, cudaEventRecord(comm->ce_events[ring_event(EV_REDUCED, c)], comm->ce_compute));
    for (int k = 1; k < n; k++) {
      int p = (me + k) % n;
      if (sources >> p & 1u)
        GC_CHECK(local_copy(comm, dst + off[p] + c0, inbox_row(comm, &ib, me, c, row_here[p]),
                            in_chunk(len[p], c0, ib.row), comm->ce_compute));
    }
    if (sending)
      GC_CHECK(local_copy(comm, dst + off[me] + c0, from + c0, in_chunk(len[me], c0, ib.row), comm->ce_compute));
  }
  return end(comm, peers, 1, stream);
}

/* All-reduce into an output peers cannot write: every rank reduces its slice into its own output
 * (the reduce-scatter by writes, or with by_copies the copy-engine reduce-scatter above), then the
 * slices go out through staging (gc__ce_gather_staged). Any input; in place too: the
 * reduce-scatter has sent every part of our input before the gather writes over it. */
gc_result_t gc__ce_allreduce_staged(gc_comm_t comm, const struct gc_kargs *base, const void *send, void *recv,
                                    size_t count, size_t es, size_t os, const void *add, int by_copies,
                                    cudaStream_t stream) {
  const int n = comm->local_size, me = comm->local_rank;
  size_t p0[GC_MAX_LOCAL_RANKS], pn[GC_MAX_LOCAL_RANKS], off[GC_MAX_LOCAL_RANKS], len[GC_MAX_LOCAL_RANKS];
  for (int p = 0; p < n; p++) {
    slice(count, n, p, &p0[p], &pn[p]);
    off[p] = p0[p] * os;
    len[p] = pn[p] * os;
  }
  char *mine = (char *)recv + off[me];
  const char *plus = add ? (const char *)add + p0[me] * es : NULL;
  if (by_copies) {
    GC_CHECK(gc__ce_reducescatter(comm, base, send, mine, p0, pn, es, os, plus, stream));
  } else {
    gc_kargs_t a = *base;
    a.recv = mine;
    a.ep.add = plus;
    GC_CHECK(slices_by_writes(comm, &a, send, count, es, stream));
  }
  return gc__ce_gather_staged(comm, &base->peers, (1u << n) - 1, mine, recv, off, len, stream);
}
