// ll.cu — the barrier-free ("LL", low-latency) all-reduce for float32, float16 and bfloat16.
// No flags, no barrier: the data says what has arrived. Every rank's LL area holds all-ones
// wherever nothing has arrived (a NaN in every float type); a sender replaces that one bit
// pattern in its data by another NaN and writes 16-byte words into peers' areas; a reader polls
// its own area until no element of a word is all-ones, then writes all-ones back over what it
// read. Elements are at most 4 bytes, so no element can be seen half-written.
// Calls rotate through GC_LL_GENS generations of the area (sig->ll_call % GC_LL_GENS, advanced by
// the last block to finish). A peer runs at most one call ahead of this rank (it needs this
// rank's data to finish a call), so a generation is written again only after its reader is done.
//   one-shot: every rank writes its input into row `me` of every rank's area, then reduces its
//             n rows in rank order 0..n-1.
//   two-shot: every rank writes slice q of its input into rank q's inbox, row `me`; rank q
//             reduces the slice, applies the epilogue and writes the results into every rank's
//             gather rows; every rank copies them out.
#include "common.cuh"

namespace gc {

constexpr uint32_t ALL_ONES = 0xFFFFFFFFu;

// Volatile loads of u = 16, 8 or 4 bytes: they see peers' stores as they land.
__device__ __forceinline__ uint4 ll_load(const unsigned char *p, int u) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (u == 16)
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else if (u == 8)
    asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  else
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v.x) : "l"(p));
  return v;
}

__device__ __forceinline__ void ll_store(unsigned char *p, const uint4 &v, int u) {
  if (u == 16) *(uint4 *)p = v;
  else if (u == 8) *(uint2 *)p = make_uint2(v.x, v.y);
  else *(uint32_t *)p = v.x;
}

// Whether 32-bit word w holds no all-ones element of es bytes.
__device__ __forceinline__ bool word_arrived(uint32_t w, int es) {
  if (es == 4) return w != ALL_ONES;
  if (es == 2) return (w & 0xFFFFu) != 0xFFFFu && (w >> 16) != 0xFFFFu;
  return __vcmpeq4(w, ALL_ONES) == 0;
}

// The same word with every all-ones element made another NaN (its top bit cleared).
__device__ __forceinline__ uint32_t word_canonical(uint32_t w, int es) {
  if (es == 4) return w == ALL_ONES ? 0x7FFFFFFFu : w;
  if (es == 2) {
    if ((w & 0xFFFFu) == 0xFFFFu) w &= 0xFFFF7FFFu;
    if ((w >> 16) == 0xFFFFu) w &= 0x7FFFFFFFu;
    return w;
  }
  return w & ~(__vcmpeq4(w, ALL_ONES) & 0x80808080u);
}

__device__ __forceinline__ bool ll_arrived(const uint4 &v, int u, int es) {
  bool ok = word_arrived(v.x, es);
  if (u >= 8) ok = ok && word_arrived(v.y, es);
  if (u == 16) ok = ok && word_arrived(v.z, es) && word_arrived(v.w, es);
  return ok;
}

__device__ __forceinline__ uint4 ll_canonical(uint4 v, int es) {
  return make_uint4(word_canonical(v.x, es), word_canonical(v.y, es), word_canonical(v.z, es),
                    word_canonical(v.w, es));
}

// Waits for the n words at base, base + stride, ... (u bytes, elements of es bytes), then writes
// all-ones back over them. False once the Deadline expires.
__device__ __forceinline__ bool ll_take(unsigned char *base, size_t stride, int n, int u, int es,
                                        uint4 (&v)[GC_MAX_LOCAL_RANKS], Deadline &d, const gc_kpeers_t &P) {
  unsigned pending = (1u << n) - 1;
  while (true) {
#pragma unroll
    for (int s = 0; s < GC_MAX_LOCAL_RANKS; s++)
      if (pending >> s & 1u) v[s] = ll_load(base + s * stride, u);
#pragma unroll
    for (int s = 0; s < GC_MAX_LOCAL_RANKS; s++)
      if ((pending >> s & 1u) && ll_arrived(v[s], u, es)) pending &= ~(1u << s);
    if (!pending) break;
    if (d.expired(P)) return false;
  }
  const uint4 clear = make_uint4(ALL_ONES, ALL_ONES, ALL_ONES, ALL_ONES);
#pragma unroll
  for (int s = 0; s < GC_MAX_LOCAL_RANKS; s++)
    if (s < n) ll_store(base + s * stride, clear, u);
  return true;
}

// Reduces n packs held in registers, in rank order.
template <typename T, typename A, int OPK>
__device__ __forceinline__ void reduce_words(const uint4 (&v)[GC_MAX_LOCAL_RANKS], int n, int op,
                                             A (&acc)[16 / sizeof(T)]) {
  constexpr int E = 16 / sizeof(T);
  const T *x0 = reinterpret_cast<const T *>(&v[0]);
#pragma unroll
  for (int e = 0; e < E; e++) acc[e] = to_acc<A>(x0[e]);
#pragma unroll
  for (int s = 1; s < GC_MAX_LOCAL_RANKS; s++)
    if (s < n) {
      const T *xs = reinterpret_cast<const T *>(&v[s]);
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] = combine<A, OPK>(acc[e], to_acc<A>(xs[e]), op);
    }
}

__device__ __forceinline__ unsigned char *ll_gen(const gc_kpeers_t &P, int r, uint32_t call) {
  return P.ll[r] + (size_t)(call % GC_LL_GENS) * GC_LL_GEN_BYTES;
}

// The last block of the call to finish moves the communicator to the next generation; a block
// that timed out leaves it (the communicator has failed).
__device__ __forceinline__ void ll_finish(const gc_kpeers_t &P, uint32_t call, bool failed) {
  if (__syncthreads_or(failed) || threadIdx.x != 0) return;
  gc_ksignals_t *sig = P.sig[P.rank];
  __threadfence();
  if (atomicAdd(&sig->ll_arrived, 1u) == gridDim.x - 1) {
    sig->ll_arrived = 0;
    sig->ll_call = call + 1;
  }
}

template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS oneshot_ll_kernel(const gc_kargs_t a) {
  constexpr int E = 16 / sizeof(T);
  pdl_begin(a.pdl);
  const int n = a.peers.nranks, me = a.peers.rank;
  const uint32_t call = *(volatile uint32_t *)&a.peers.sig[me]->ll_call;
  const size_t bytes = a.count * sizeof(T), packs = (bytes + 15) / 16, row = packs * 16, G = grid_threads();

  // 1. our input, row `me` of every rank's area, starting with the next rank.
  for (size_t k = global_thread(); k < packs; k += G) {
    const uint4 w = ll_canonical(load_unit((const char *)a.send, bytes, k), sizeof(T));
    for (int i = 1; i <= n; i++) {
      const int p = (me + i) % n;
      *(uint4 *)(ll_gen(a.peers, p, call) + me * row + k * 16) = w;
    }
  }

  // 2. every rank's row of our area, reduced in rank order; same thread-to-pack mapping, so in
  // place is safe.
  unsigned char *mine = ll_gen(a.peers, me, call);
  const bool plain = is_plain<T, A>(a, a.recv);
  Deadline d;
  bool failed = false;
  for (size_t k = global_thread(); k < packs; k += G) {
    uint4 v[GC_MAX_LOCAL_RANKS];
    if (!ll_take(mine + k * 16, row, n, 16, sizeof(T), v, d, a.peers)) {
      failed = true;
      break;
    }
    A acc[E];
    reduce_words<T, A, OPK>(v, n, a.op, acc);
    const size_t first = k * E;
    if (first + E <= a.count) store_at<T, A, true>(a, first, acc, a.recv, plain);
    else
      for (int e = 0; first + e < a.count; e++) finish<T, A>(acc[e], first + e, a.ep, a.op, n, a.recv);
  }
  ll_finish(a.peers, call, failed);
}

template <typename T, typename A, int OPK>
__global__ void GC_LAUNCH_BOUNDS twoshot_ll_kernel(const gc_kargs_t a) {
  constexpr int E = 16 / sizeof(T);
  pdl_begin(a.pdl);
  const int n = a.peers.nranks, me = a.peers.rank;
  const uint32_t call = *(volatile uint32_t *)&a.peers.sig[me]->ll_call;
  const size_t bytes = a.count * sizeof(T), packs = (bytes + 15) / 16, G = grid_threads(), gt = global_thread();
  const size_t row = (packs + n - 1) / n * 16;  // an inbox row: the longest slice
  const int os = (int)dtype_size(a.ep.out_dtype), ob = E * os, u = ob < 16 ? ob : 16;
  size_t q0[GC_MAX_LOCAL_RANKS], qn[GC_MAX_LOCAL_RANKS];
  for (int q = 0; q < n; q++) slice_of(packs, n, q, &q0[q], &qn[q]);

  // 1. slice q of our input into rank q's inbox, row `me`, each rank starting with the next.
  for (size_t j = gt; j < qn[0]; j += G)
    for (int i = 1; i <= n; i++) {
      const int q = (me + i) % n;
      if (j < qn[q]) {
        const uint4 w = ll_canonical(load_unit((const char *)a.send, bytes, q0[q] + j), sizeof(T));
        *(uint4 *)(ll_gen(a.peers, q, call) + me * row + j * 16) = w;
      }
    }

  // 2. our slice: its n inbox rows reduced in rank order, the epilogue applied, the result
  // written into every rank's gather rows (after the inboxes, ob bytes per pack).
  unsigned char *mine = ll_gen(a.peers, me, call);
  const size_t gather = n * row;
  const bool plain = is_plain<T, A>(a, mine);
  Deadline d;
  bool failed = false;
  for (size_t j = gt; j < qn[me]; j += G) {
    uint4 v[GC_MAX_LOCAL_RANKS];
    if (!ll_take(mine + j * 16, row, n, 16, sizeof(T), v, d, a.peers)) {
      failed = true;
      break;
    }
    A acc[E];
    reduce_words<T, A, OPK>(v, n, a.op, acc);
    const size_t k = q0[me] + j, first = k * E;
    uint4 out[2] = {};  // E results in the output dtype: at most 8 x 4 bytes
    if (plain) {
#pragma unroll
      for (int e = 0; e < E; e++) reinterpret_cast<T *>(out)[e] = from_acc<T>(acc[e]);
    } else {
      for (int e = 0; first + e < a.count && e < E; e++) finish_at<T, A>(acc[e], first + e, a.ep, a.op, n, out, e);
    }
    for (int c = 0; c * u < ob; c++) {
      const uint4 w = ll_canonical(out[c], os);
      for (int i = 1; i <= n; i++) {
        const int p = (me + i) % n;
        ll_store(ll_gen(a.peers, p, call) + gather + k * ob + c * u, w, u);
      }
    }
  }

  // 3. every pack's result from our gather rows into the output. The warp meets first: a lane
  // spinning here must not hold up a lane of its own warp still producing in step 2.
  __syncwarp();
  for (size_t k = gt; k < packs && !failed; k += G) {
    const size_t first = k * E, valid = (first + E <= a.count ? E : a.count - first) * os;
    for (int c = 0; c * u < ob; c++) {
      uint4 v[GC_MAX_LOCAL_RANKS];
      if (!ll_take(mine + gather + k * ob + c * u, 0, 1, u, os, v, d, a.peers)) {
        failed = true;
        break;
      }
      if ((size_t)c * u < valid)
        put_bytes((unsigned char *)a.recv + first * os + c * u, (const unsigned char *)&v[0],
                  min((size_t)u, valid - c * u));
    }
  }
  ll_finish(a.peers, call, failed);
}

// The LL kernels take float32, float16 and bfloat16 only: elements of at most 4 bytes (never
// seen half-written) whose all-ones pattern is a NaN.
template <typename F>
cudaError_t with_ll_types(int dtype, int op, F &&launch) {
  switch (dtype) {
#define GC__CASE(code, T, A) \
  case code: return op == GC_SUM ? launch(ReduceTypes<T, A, OPK_SUM>{}) : launch(ReduceTypes<T, A, OPK_ANY>{});
    GC__CASE(GC_FLOAT32, float, float)
    GC__CASE(GC_FLOAT16, __half, float)
    GC__CASE(GC_BFLOAT16, __nv_bfloat16, float)
#undef GC__CASE
  }
  return cudaErrorInvalidValue;
}

}  // namespace gc

extern "C" int gc_ll_fits(gc_kalgo_t algo, size_t count, gc_dtype_t dtype, gc_dtype_t out_dtype, int n) {
  const bool types = (dtype == GC_FLOAT32 || dtype == GC_FLOAT16 || dtype == GC_BFLOAT16) && out_dtype != GC_FLOAT64;
  if (!types || n < 1 || n > GC_MAX_LOCAL_RANKS) return 0;
  const size_t es = gc::dtype_size(dtype), os = gc::dtype_size(out_dtype);
  if (count > GC_LL_GEN_BYTES / es) return 0;
  const size_t packs = (count * es + 15) / 16;
  if (algo == GC_KALGO_ONESHOT_LL) return packs * 16 * n <= GC_LL_GEN_BYTES;
  const size_t row = (packs + n - 1) / n * 16;
  return algo == GC_KALGO_TWOSHOT_LL && n * row + packs * (16 / es) * os <= GC_LL_GEN_BYTES;
}

extern "C" int gc_kernel_allreduce_ll(const gc_kargs_t *a, gc_kalgo_t algo, cudaStream_t s) {
  return gc::with_ll_types(a->dtype, a->op, [&](auto t) {
    using R = decltype(t);
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = gc::launch_config(a, s, attr);
    if (algo == GC_KALGO_ONESHOT_LL)
      return cudaLaunchKernelEx(&cfg, gc::oneshot_ll_kernel<typename R::T, typename R::A, R::OPK>, *a);
    return cudaLaunchKernelEx(&cfg, gc::twoshot_ll_kernel<typename R::T, typename R::A, R::OPK>, *a);
  });
}
