/* gc_wire.h — the host side of the compressed wire formats (wire.c): which calls may take them,
 * buffer sizes, and the host path's pack / sum / unpack, on the arithmetic of kernels/wire.cuh
 * (so host and device bytes agree). Named apart from kernels/wire.h, which it includes. */
#ifndef GC_WIRE_INTERNAL_H
#define GC_WIRE_INTERNAL_H

#include "gc_internal.h"
#include "kernels.h"
#include "wire.h"

/* Checks a wire request of a call `fn` (format GC_WIRE_FMT_*, group 0 = the default 32) against
 * its dtype and op, and on success writes the format in force to *out:
 *   native  any call (group must be 0);
 *   fp8     float32, float16, bfloat16 data; group 0, 32, 64 or 128;
 *   bf16    float32 data (group must be 0);
 *   fp8 and bf16 take GC_SUM and GC_AVG only.
 * Anything else: GC_ERR_INVALID_ARGUMENT with a message naming what to use instead (recorded on
 * comm; NULL: per thread). */
GC_HIDDEN gc_result_t gc__wire_check(gc_comm_t comm, const char *fn, int format, int group, gc_dtype_t dtype, gc_op_t op,
                                     gc_kwire_t *out);
/* Bytes of a wire buffer of count elements (16-byte multiple); GC_ERR_INVALID_ARGUMENT when the
 * count is too large to size. Native: 0. */
GC_HIDDEN gc_result_t gc__wire_bytes(size_t count, const gc_kwire_t *w, size_t *bytes);
/* Units a wire buffer splits into for the owners of a two-shot (groups for fp8, 8-element
 * chunks for bf16): shares are gc_partition's split of these. elements_per_unit gives their
 * size in elements. */
GC_HIDDEN size_t gc__wire_units(size_t count, const gc_kwire_t *w);
GC_HIDDEN size_t gc__wire_unit_elements(const gc_kwire_t *w);

/* The host path (host buffers; the kernels do the same on the device, byte for byte):
 * pack: count elements of `in` (dtype) into wire;
 * sum: units [u0, u0 + un) of n wire buffers, decoded and summed in float32 in order 0 .. n-1,
 *      encoded into `out` at the same place (out may be one of wires);
 * unpack: wire into out through the epilogue ep (NULL: none; out_dtype as ep says). */
GC_HIDDEN void gc__wire_pack_host(const void *in, size_t count, gc_dtype_t dtype, const gc_kwire_t *w,
                                  void *wire);
GC_HIDDEN void gc__wire_sum_host(const void *const *wires, int n, size_t count, const gc_kwire_t *w, size_t u0,
                                 size_t un, void *out);
GC_HIDDEN void gc__wire_unpack_host(const void *wire, size_t count, gc_dtype_t dtype, const gc_kwire_t *w,
                                    const gc_kepilogue_t *ep, void *out);

/* Ranks whose wire shares the MPI path lists on the stack (more: on the heap). */
#define GC_MAX_WIRE_RANKS 64

/* The MPI path's all-reduce over the plan's wire w (host buffers; any number of ranks and
 * nodes): per round of whole groups, each owner's share of every rank's packed input goes to its
 * owner (MPI_Ialltoallv, compressed bytes), which sums them in rank order and encodes the sum
 * once; the encoded sums are gathered by all (MPI_Iallgatherv) and decoded through o's
 * epilogue. The result is what docs/wire-format.md defines, the same bits on every rank and as
 * the kernels give. */
GC_HIDDEN gc_result_t gc__wire_allreduce_mpi(gc_comm_t comm, gc_kwire_t w, const void *send, void *recv,
                                             size_t count, gc_dtype_t dtype, gc_op_t op, const gc_options_t *o);

#endif /* GC_WIRE_INTERNAL_H */
