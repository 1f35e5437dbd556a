/* gc_test.h — what the test files share: the world communicator, buffers on the place under test
 * (host or device), the float64 reference and the checks. */
#ifndef GC_TEST_H
#define GC_TEST_H

#include <stdint.h>
#include <stddef.h>

#include <CUnit/CUnit.h>

#include "gpucoll.h"

extern gc_comm_t gc_test_comm; /* NULL in the unit suites, which run without MPI peers */
extern int gc_test_rank, gc_test_size;
extern int gc_test_on_gpu;     /* buffers under test are device memory */
extern uint64_t gc_test_seed;  /* fresh per run (time-based unless GC_TEST_SEED is set) */

/* Buffers where the test runs: device memory of the communicator's GPU under --gpu, else host. */
void *gc_test_alloc(size_t bytes);
void gc_test_free(void *p);
void gc_test_upload(void *dst, const void *host_src, size_t bytes);
void gc_test_download(void *host_dst, const void *src, size_t bytes);
/* Fills with a byte pattern that is a NaN for float types, so unwritten output is caught. */
void gc_test_poison(void *buf, size_t bytes);
/* gc_fill_random on buf with the seed that rank `rank` uses in this test. */
uint64_t gc_test_rank_seed(int rank, int salt);

/* Element i of rank r's input for seed salt, as gc_fill_random writes it. */
double gc_test_input(gc_dtype_t dtype, int rank, int salt, size_t i);
/* The float64 reference of `op` over every rank's input element i (AVG divides by size). */
double gc_test_reduce_ref(gc_dtype_t dtype, gc_op_t op, int salt, size_t i);
/* Compares out (host copy, dtype) with ref(i) for i in [0, count); returns the wrong count and
 * prints the first few on stderr with `what`. */
size_t gc_test_compare(const char *what, const void *out, gc_dtype_t dtype, size_t count,
                       double (*ref)(void *ctx, size_t i), void *ctx);
/* Tolerance for a result in dtype of magnitude |ref| after reducing `nranks` values. */
int gc_test_close(gc_dtype_t dtype, double got, double ref);
/* 1 on every rank when ok is 1 on every rank. */
int gc_test_all(int ok);
/* 1 when the bytes are identical on every rank. */
int gc_test_same_on_all_ranks(const void *host_buf, size_t bytes);

/* The suite table: each test file defines one function that adds its suite(s) to CUnit. */
void gc_test_suite_errors(void);
void gc_test_suite_params(void);
void gc_test_suite_types(void);
void gc_test_suite_comm(void);
void gc_test_suite_validation(void);
void gc_test_suite_allreduce(void);
void gc_test_suite_collectives(void);
void gc_test_suite_p2p(void);

#endif /* GC_TEST_H */
