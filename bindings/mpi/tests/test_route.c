/* test_route.c — CUnit tests of libgpucoll-mpi's datatype, op and error mapping and of its route
 * decision, driven by made-up call attributes (no MPI communication, no GPU). */
#include <CUnit/Basic.h>
#include <mpi.h>

#include "shim_route.h"

static void test_dtypes(void) {
  gc_dtype_t d = GC_NUM_DTYPES;
  CU_ASSERT(gcm_dtype_of(MPI_FLOAT, 1, &d) && d == GC_FLOAT32);
  CU_ASSERT(gcm_dtype_of(MPI_DOUBLE, 1, &d) && d == GC_FLOAT64);
  CU_ASSERT(gcm_dtype_of(MPI_INT, 1, &d) && d == GC_INT32);
  CU_ASSERT(gcm_dtype_of(MPI_INT32_T, 1, &d) && d == GC_INT32);
  CU_ASSERT(gcm_dtype_of(MPI_INT64_T, 1, &d) && d == GC_INT64);
  CU_ASSERT(gcm_dtype_of(MPI_LONG_LONG, 1, &d) && d == GC_INT64);
  CU_ASSERT(gcm_dtype_of(MPI_UINT8_T, 1, &d) && d == GC_UINT8);
  CU_ASSERT(gcm_dtype_of(MPI_LONG, 1, &d) == (sizeof(long) == 8));
  /* Bytes move but do not reduce. */
  d = GC_NUM_DTYPES;
  CU_ASSERT(!gcm_dtype_of(MPI_BYTE, 1, &d) && d == GC_NUM_DTYPES);
  CU_ASSERT(gcm_dtype_of(MPI_BYTE, 0, &d) && d == GC_UINT8);
  CU_ASSERT(gcm_dtype_of(MPI_CHAR, 0, &d) && d == GC_UINT8);
  d = GC_NUM_DTYPES;
  CU_ASSERT(!gcm_dtype_of(MPI_SHORT, 1, &d) && d == GC_NUM_DTYPES);
  CU_ASSERT(!gcm_dtype_of(MPI_UNSIGNED, 1, &d));
  CU_ASSERT(!gcm_dtype_of(MPI_DOUBLE_INT, 1, &d));
  CU_ASSERT(!gcm_dtype_of(MPI_DATATYPE_NULL, 0, &d));
  MPI_Datatype pair;
  CU_ASSERT_FATAL(MPI_Type_contiguous(2, MPI_FLOAT, &pair) == MPI_SUCCESS);
  CU_ASSERT(!gcm_dtype_of(pair, 0, &d));
  MPI_Type_free(&pair);
}

static void test_ops(void) {
  gc_op_t o = GC_NUM_OPS;
  CU_ASSERT(gcm_op_of(MPI_SUM, &o) && o == GC_SUM);
  CU_ASSERT(gcm_op_of(MPI_PROD, &o) && o == GC_PROD);
  CU_ASSERT(gcm_op_of(MPI_MIN, &o) && o == GC_MIN);
  CU_ASSERT(gcm_op_of(MPI_MAX, &o) && o == GC_MAX);
  o = GC_NUM_OPS;
  CU_ASSERT(!gcm_op_of(MPI_BAND, &o) && o == GC_NUM_OPS);
  CU_ASSERT(!gcm_op_of(MPI_LOR, &o));
  CU_ASSERT(!gcm_op_of(MPI_MAXLOC, &o));
  CU_ASSERT(!gcm_op_of(MPI_REPLACE, &o));
  CU_ASSERT(!gcm_op_of(MPI_OP_NULL, &o));
}

static void test_errors(void) {
  CU_ASSERT(gcm_mpi_error_class(GC_SUCCESS) == MPI_SUCCESS);
  CU_ASSERT(gcm_mpi_error_class(GC_ERR_INVALID_ARGUMENT) == MPI_ERR_ARG);
  CU_ASSERT(gcm_mpi_error_class(GC_ERR_UNSUPPORTED) == MPI_ERR_UNSUPPORTED_OPERATION);
  CU_ASSERT(gcm_mpi_error_class(GC_ERR_SYSTEM) == MPI_ERR_NO_MEM);
  CU_ASSERT(gcm_mpi_error_class(GC_ERR_MPI) == MPI_ERR_INTERN);
  CU_ASSERT(gcm_mpi_error_class(GC_ERR_TIMEOUT) == MPI_ERR_OTHER);
  CU_ASSERT(gcm_mpi_error_class(GC_ERR_CUDA) == MPI_ERR_OTHER);
  for (int r = 1; r < GC_NUM_RESULTS; r++) CU_ASSERT(gcm_mpi_error_class((gc_result_t)r) != MPI_SUCCESS);
}

static gcm_call_attrs_t device_call(void) {
  gcm_call_attrs_t a = GCM_CALL_ATTRS_INIT;
  a.send = a.recv = GCM_BUF_DEVICE;
  return a;
}

static void test_kinds(void) {
  gcm_call_attrs_t a = device_call();
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_DEVICE);
  a.send = GCM_BUF_NONE; /* MPI_IN_PLACE */
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_DEVICE);
  a.send = GCM_BUF_HOST;
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_MIXED);
  a.recv = GCM_BUF_HOST;
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_HOST);
  a.send = GCM_BUF_NONE;
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_HOST);
}

static void test_route(void) {
  gcm_call_attrs_t a = device_call();
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_OK);
  a.dtype_ok = 0;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_DTYPE);
  a = device_call(), a.op_ok = 0;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_OP);
  a = device_call(), a.inter = 1;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_INTERCOMM);
  a = device_call(), a.count_ok = 0;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_COUNT);
  a = device_call(), a.types_match = 0;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_TYPES_DIFFER);
  a = device_call(), a.counts_equal = 0;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_UNEQUAL_COUNTS);
  a = device_call(), a.recv = GCM_BUF_HOST;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_MIXED);
  a.send = GCM_BUF_HOST;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_HOST);
  a = device_call(), a.comm_failed = 1;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_NO_COMM);
  a = device_call(), a.buffers_on_comm_device = 0;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_OTHER_DEVICE);
}

/* MPI_Reduce: the data buffer decides the kind on every rank alike, whatever the root receives
 * into and whatever the other ranks pass as recvbuf. */
static void test_reduce(void) {
  const gcm_buf_kind_t D = GCM_BUF_DEVICE, H = GCM_BUF_HOST, N = GCM_BUF_NONE;
  /* root 1 of 3: rank 0 (recvbuf not looked at), the root, the root in place */
  gcm_call_attrs_t a = gcm_reduce_attrs(0, 0, D, N, 1, 3, 100);
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_DEVICE && gcm_local_reason(&a) == GCM_REASON_OK);
  a = gcm_reduce_attrs(1, 0, D, D, 1, 3, 100);
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_DEVICE && gcm_local_reason(&a) == GCM_REASON_OK);
  a = gcm_reduce_attrs(1, 1, N, D, 1, 3, 100);
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_DEVICE && gcm_local_reason(&a) == GCM_REASON_OK);
  /* a host receive buffer at the root keeps the device kind of its peers (result copied there) */
  a = gcm_reduce_attrs(1, 0, D, H, 1, 3, 100);
  CU_ASSERT(gcm_call_kind(&a) == GCM_KIND_DEVICE && gcm_local_reason(&a) == GCM_REASON_OK);
  CU_ASSERT(!gcm_reduce_into_recv(1, H, -1, 0));
  CU_ASSERT(gcm_reduce_into_recv(1, D, 0, 0));
  CU_ASSERT(!gcm_reduce_into_recv(1, D, 1, 0)); /* another device: through the scratch buffer */
  CU_ASSERT(!gcm_reduce_into_recv(0, D, 0, 0)); /* not the root: recvbuf is not significant */
  /* host data on any rank: MPI */
  a = gcm_reduce_attrs(0, 0, H, N, 1, 3, 100);
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_HOST);
  a = gcm_reduce_attrs(1, 1, N, H, 1, 3, 100);
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_HOST);
  /* MPI_IN_PLACE off the root is erroneous: no buffer, never gpucoll */
  a = gcm_reduce_attrs(0, 1, N, N, 1, 3, 100);
  CU_ASSERT(gcm_local_reason(&a) != GCM_REASON_OK);
  /* uniform refusals: root out of range, count 0 */
  a = gcm_reduce_attrs(0, 0, D, N, 3, 3, 100);
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_COUNT && gcm_reason_uniform(GCM_REASON_COUNT));
  a = gcm_reduce_attrs(0, 0, D, N, -1, 3, 100);
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_COUNT);
  a = gcm_reduce_attrs(1, 0, D, D, 1, 3, 0);
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_COUNT);
  a = gcm_reduce_attrs(0, 0, D, N, 0, 0, 100); /* size unknown */
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_COUNT);
  /* datatype and op stay the caller's, and win over the buffers */
  a = gcm_reduce_attrs(0, 0, H, N, 1, 3, 100);
  a.op_ok = 0;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_OP);
}

/* A reason that depends on the rank's buffers must never be uniform (it needs the agreement), and
 * a uniform reason must win over every per-rank one, so that no rank agrees alone. */
static void test_uniform_first(void) {
  CU_ASSERT(!gcm_reason_uniform(GCM_REASON_OK));
  CU_ASSERT(!gcm_reason_uniform(GCM_REASON_HOST));
  CU_ASSERT(!gcm_reason_uniform(GCM_REASON_MIXED));
  CU_ASSERT(!gcm_reason_uniform(GCM_REASON_OTHER_DEVICE));
  CU_ASSERT(!gcm_reason_uniform(GCM_REASON_NO_COMM));
  CU_ASSERT(gcm_reason_uniform(GCM_REASON_DTYPE) && gcm_reason_uniform(GCM_REASON_OP));
  gcm_call_attrs_t a = GCM_CALL_ATTRS_INIT;
  a.send = GCM_BUF_HOST, a.recv = GCM_BUF_DEVICE, a.comm_failed = 1, a.buffers_on_comm_device = 0;
  a.op_ok = 0;
  CU_ASSERT(gcm_local_reason(&a) == GCM_REASON_OP);
  for (int r = 0; r < GCM_NUM_REASONS; r++) CU_ASSERT(gcm_reason_text((gcm_reason_t)r)[0] != '\0');
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("shim_route", NULL, NULL);
  CU_add_test(s, "dtypes", test_dtypes);
  CU_add_test(s, "ops", test_ops);
  CU_add_test(s, "errors", test_errors);
  CU_add_test(s, "kinds", test_kinds);
  CU_add_test(s, "route", test_route);
  CU_add_test(s, "uniform_first", test_uniform_first);
  CU_add_test(s, "reduce", test_reduce);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  MPI_Finalize();
  return failed ? 1 : 0;
}
