/* gc_test.h — what the test files share: the world communicator, buffers on the place under test
 * (host or device), the float64 reference of a reduction and the checks. */
#ifndef GC_TEST_H
#define GC_TEST_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include <CUnit/CUnit.h>

#include "gpucoll.h"

extern gc_comm_t gc_test_comm; /* NULL in the unit suites, which run without MPI peers */
extern int gc_test_rank, gc_test_size;
extern int gc_test_on_gpu;     /* buffers under test are device memory */

/* The reducible dtypes in the order the tests walk them, and the poisoned bytes kept after every
 * output, which must stay untouched. */
extern const gc_dtype_t gc_test_reducible[];
#define GC_TEST_NUM_REDUCIBLE 7
enum { GUARD = 16 };
extern uint64_t gc_test_seed;  /* fresh per run (time-based unless GC_TEST_SEED is set) */

/* Asserts that a gpucoll call succeeded, printing its detailed message when not. */
#define GC_TEST_OK(call)                                                                      \
  do {                                                                                        \
    gc_result_t r_ = (call);                                                                  \
    if (r_ != GC_SUCCESS)                                                                     \
      fprintf(stderr, "[rank %d] %s:%d: %s -> %s (%s)\n", gc_test_rank, __FILE__, __LINE__,   \
              #call, gc_result_name(r_), gc_comm_last_error(gc_test_comm));                    \
    CU_ASSERT_EQUAL_FATAL(r_, GC_SUCCESS);                                                    \
  } while (0)

/* Buffers where the test runs: device memory of the communicator's GPU under --gpu, else host.
 * The allocation fails the test (fatally) when memory is short. Every byte starts as 0xFF
 * (gc_test_poison), so no test reads memory that nothing wrote (compute-sanitizer's initcheck). */
void *gc_test_alloc(size_t bytes);
void gc_test_free(void *p);
void gc_test_download(void *host_dst, const void *src, size_t bytes);
void gc_test_upload(void *dst, const void *host_src, size_t bytes);
/* A buffer from gc_mem_alloc (symmetric = 1; collective: every rank calls in the same order) or
 * from gc_test_alloc, poisoned either way; gc_test_free_as frees it with the same flag. */
void *gc_test_alloc_as(int symmetric, size_t bytes);
void gc_test_free_as(int symmetric, void *p);
/* Downloads `bytes` of output plus, when guarded, the GUARD bytes after it; 0 (and a note on
 * stderr naming `what`) when the guard was written. */
int gc_test_fetch_checked(void *host, const void *dev, size_t bytes, int guarded, const char *what);
/* Fills with 0xFF bytes: a NaN in every float type (fp8 included), so unwritten output shows. */
void gc_test_poison(void *buf, size_t bytes);

/* The seed rank `rank` uses for its input in the test with this salt (rank -1: shared data such
 * as an epilogue's add vector, the same on every rank). */
uint64_t gc_test_rank_seed(int rank, int salt);
/* Fills buf (where the test runs) with count values of rank `rank`'s input for salt. */
void gc_test_fill(void *buf, size_t count, gc_dtype_t dtype, int rank, int salt);
/* Element i of rank r's input for salt, exactly as gc_fill_random writes it. */
double gc_test_input(gc_dtype_t dtype, int rank, int salt, size_t i);

/* The reduction a test expects: output element i reduces input element map(i) of every rank,
 * then the epilogue (scale, add[i] from a host copy of the add vector) and out dtype apply. */
typedef struct gc_test_red {
  gc_dtype_t dtype, out_dtype; /* out_dtype is never GC_DTYPE_SAME here */
  gc_op_t op;
  int salt;
  double scale;
  const void *add; /* host copy, dtype, one per output element; NULL = none */
  /* input index of output element i: base + (i / width) * stride + i % width (width 0 = i) */
  size_t base, width, stride;
  /* the ranks reduced: rank_first, + rank_step, ... below the size (0, 0 = every rank) */
  int rank_first, rank_step;
} gc_test_red_t;
void gc_test_red_init(gc_test_red_t *R, gc_dtype_t dtype, gc_op_t op, int salt);
/* The exact (float64) expected value of output i, and the magnitude its rounding errors scale
 * with (sum of |terms|). Integer results are exact and wrapped to the output width. */
void gc_test_red_ref(const gc_test_red_t *R, size_t i, double *ref, double *mag);
/* Compares out (a host copy) against the reference; returns the number of wrong elements and
 * prints the first few on stderr, prefixed by `what`. stride > 1 checks every stride-th element
 * (plus the last 64) for the largest sizes. */
size_t gc_test_check_red(const char *what, const gc_test_red_t *R, const void *out, size_t count,
                         size_t stride);
/* Tolerance: exact for integers; floats within 2 ulp of the output type relative to
 * max(|ref|, smallest normal) plus the accumulator's rounding over `mag`. NaN never passes. */
int gc_test_close_ex(gc_dtype_t out_dtype, gc_dtype_t in_dtype, double got, double ref, double mag);

/* Graph capture of gpucoll calls on `stream`: begin = 1 starts it, begin = 0 ends it and
 * instantiates the graph into *graph_exec; replay launches it. cudaError_t values (0 = fine). */
int gc_test_capture(void *stream, int begin, void **graph_exec);
int gc_test_replay(void *graph_exec, void *stream);
void gc_test_graph_destroy(void *graph_exec);

/* 1 when call result r and then gc_synchronize(comm, NULL) succeed; else prints the failure,
 * prefixed by `what`, and returns 0. */
int gc_test_finished(gc_comm_t comm, gc_result_t r, const char *what);
/* 1 on every rank when ok is 1 on every rank. */
int gc_test_all(int ok);
/* 1 when the bytes are identical on every rank (rank 0's bytes broadcast and compared). */
int gc_test_same_on_all_ranks(const void *host_buf, size_t bytes);
/* A file path every rank agrees on (rank 0's seed), unique per run: /tmp/gpucoll-test-SEED-NAME. */
void gc_test_tmp_path(char *buf, size_t len, const char *name);
/* Prints (rank 0 only) a note about a skipped case. */
void gc_test_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 when the suite runs on at least min_ranks GPUs with peer access; else notes that `what` was
 * skipped and returns 0. */
int gc_test_peer_gpus(const char *what, int min_ranks);
/* What a call that must run on the kernels (graph capture) asks for: the dispatch table's choice
 * (GC_ALGO_AUTO), or the one-shot where GC_ALGO forces the MPI path (ctest gpu_np2_mpi_staged),
 * which capture refuses. */
gc_algo_t gc_test_kernel_algo(void);

/* The suite table: each test file defines one function that adds its suite(s) to CUnit. */
void gc_test_suite_errors(void);
void gc_test_suite_params(void);
void gc_test_suite_dispatch(void);
void gc_test_suite_plan(void);
void gc_test_suite_plan_query(void);
void gc_test_suite_types(void);
void gc_test_suite_comm(void);
void gc_test_suite_validation(void);
void gc_test_suite_allreduce(void);
void gc_test_suite_collectives(void);
void gc_test_suite_p2p(void);
void gc_test_suite_tune(void);
void gc_test_suite_rmsnorm(void);
void gc_test_suite_mixed_layout_numbering(void);
void gc_test_suite_mixed_layout(void);
void gc_test_suite_mixed(void);
void gc_test_suite_hierarchy(void);
void gc_test_suite_wire(void);
void gc_test_suite_wire_gpu(void);
void gc_test_suite_wire_calls(void);

/* Adds a suite with `tests` (NULL-terminated {name, fn}) to the registry. */
typedef struct { const char *name; void (*fn)(void); } gc_test_case_t;
void gc_test_add_suite(const char *name, const gc_test_case_t *tests);
/* --test TEXT (gc_tests): gc_test_add_suite adds only the tests whose names contain one of these. */
#define GC_TEST_MAX_ONLY 32
extern const char *gc_test_only[GC_TEST_MAX_ONLY];
extern int gc_test_nonly;

#endif /* GC_TEST_H */
