/* wire.h — the C face of the compressed-wire kernels (wire.cu): pack an input into a wire buffer,
 * all-reduce wire buffers one-shot or two-shot through peer pointers, unpack a wire buffer. The
 * formats and their layout are in wire.cuh; docs/wire-format.md gives the error bound. */
#ifndef GC_WIRE_H
#define GC_WIRE_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "wire.cuh"

#ifdef __cplusplus
extern "C" {
#endif

/* A wire format: GC_WIRE_FMT_FP8 with group 32, 64 or 128, or GC_WIRE_FMT_BF16 (group unused). */
typedef struct gc_kwire {
  int format;
  int group;
} gc_kwire_t;

/* Threads per block of the wire kernels: a multiple of 32, so a group's lanes share a warp. */
#define GC_WIRE_THREADS 256

/* Packs count elements of `in` (float32, float16, bfloat16; bf16 wire: float32 only; any
 * alignment) into `wire` (gc_wire_layout_bytes bytes, 16-byte aligned), by at most `blocks`
 * blocks. Local: no peers. */
int gc_kernel_wire_pack(const void *in, size_t count, int dtype, const gc_kwire_t *w, void *wire, int blocks,
                        cudaStream_t stream);

/* Dequantizes a wire buffer of count elements into out (dtype as packed; any alignment),
 * through the epilogue ep (NULL: none): out[i] = cast(value[i] * scale + add[i]). Local. */
int gc_kernel_wire_unpack(const void *wire, size_t count, int dtype, const gc_kwire_t *w, const gc_kepilogue_t *ep,
                          void *out, int blocks, cudaStream_t stream);

/* All-reduce over the wire. a->pub[p] is rank p's wire buffer, mapped here and packed by rank p
 * (gc_kernel_wire_pack on the stream before this launch); a->recv this rank's output (any
 * alignment), a->count, a->dtype (the input dtype), a->op (GC_SUM; GC_AVG with the epilogue's
 * scale set to 1 / n by the caller), a->ep the epilogue, a->peers, a->blocks (<= GC_KMAX_BLOCKS),
 * a->threads (GC_WIRE_THREADS), a->pdl. Every element's result is
 *   epilogue(decode(encode(S))),  S = decode(wire_0) + decode(wire_1) + ... + decode(wire_{n-1})
 * in float32, left to right, encode per group of the sum: the same bits on every rank and in both
 * algorithms. one-shot (two_shot = 0): every rank reads every wire buffer whole. Two-shot: rank q
 * sums its share of the groups (gc_partition's split of the groups) from every buffer, encodes
 * it over that share of its own buffer (which only it reads), barrier, then every rank decodes
 * every owner's share. a->pub[me] is overwritten in the two-shot: pack again before reuse. */
int gc_kernel_wire_allreduce(const gc_kargs_t *a, const gc_kwire_t *w, int two_shot, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GC_WIRE_H */
