/* unfused_norm.h — the unfused pipeline that the fused all-reduce + RMSNorm + FP8 is measured
 * against: after an all-reduce (NCCL's, in gpucoll-bench) into `sum`, two
 * separate kernels as an inference framework runs them,
 *   1. RMSNorm:  x = dtype(sum + residual) (into residual_out when not NULL),
 *                y = dtype(x * r * gamma) with r = 1 / sqrt(mean(x^2) + epsilon), into y;
 *   2. per-row FP8 quantization: scale = amax(y) / 448 into scales (the fused op's default
 *                scale, GC_NORM_MAX's), out = fp8_e4m3(y * (1 / scale)) (0 where the scale is 0),
 *                round to nearest even, saturating.
 * Its all-reduce hands over the sum rounded to the dtype, so it normalizes x as GC_NORM_ROUNDED
 * does (and as Modular MAX's split path for large residual payloads does), not the float sum.
 * y is a rows x cols buffer of the input dtype (the intermediate the fused op never writes).
 * Float32, float16 or bfloat16 inputs; a block per row; 16-byte accesses where every pointer and
 * the row length allow. Bench code, not part of the library. */
#ifndef GCB_UNFUSED_NORM_H
#define GCB_UNFUSED_NORM_H

#include <stddef.h>

#include "gpucoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues both kernels on `stream`. Returns 0, or nonzero with a message in err (bad dtype, a
 * launch the runtime refused). residual and residual_out may be NULL. */
int gcb_unfused_norm(const void *sum, const void *residual, void *residual_out, const void *gamma,
                     void *y, void *out_fp8, float *scales, size_t rows, size_t cols,
                     gc_dtype_t dtype, float epsilon, void *stream, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
