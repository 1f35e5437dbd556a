/* test_allreduce.c — gc_allreduce(_ex) against the float64 reference: every dtype x op x size,
 * in place and not, unaligned pointers, the epilogue (scale, add, cast), bit-identical results
 * on every rank, and (under --gpu) sizes up to 1 GiB. */
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_test.h"

typedef struct {
  gc_dtype_t dtype, out_dtype; /* out_dtype GC_DTYPE_SAME = dtype */
  gc_op_t op;
  size_t count;
  int in_place;
  size_t send_off, recv_off; /* elements the pointers sit past an allocation's start */
  double scale;
  int with_add;
  size_t check_stride; /* 1 = every element against the reference */
} ar_case_t;

static const size_t counts[] = {0, 1, 2, 3, 7, 31, 127, 1021, 65537, 1048577};
#define NUM_COUNTS ((int)(sizeof counts / sizeof counts[0]))

static int salt_counter;

/* Runs one all-reduce on every rank; returns 1 when this rank's result is right. Collective. */
static int run_case(const ar_case_t *c) {
  int salt = ++salt_counter;
  gc_dtype_t dt = c->dtype, odt = c->out_dtype == GC_DTYPE_SAME ? c->dtype : c->out_dtype;
  size_t isz = gc_dtype_size(dt), osz = gc_dtype_size(odt), n = c->count;
  char what[160];
  snprintf(what, sizeof what, "allreduce %s %s->%s count %zu%s off %zu/%zu scale %g%s", gc_op_name(c->op),
           gc_dtype_name(dt), gc_dtype_name(odt), n, c->in_place ? " in place" : "", c->send_off,
           c->recv_off, c->scale, c->with_add ? " +add" : "");

  size_t sbytes = (c->send_off + n) * isz + GUARD, rbytes = (c->recv_off + n) * osz + GUARD;
  char *sbuf = gc_test_alloc(sbytes);
  char *rbuf = c->in_place ? sbuf : gc_test_alloc(rbytes);
  char *send = sbuf + c->send_off * isz;
  char *recv = c->in_place ? send : rbuf + c->recv_off * osz;
  gc_test_fill(send, n, dt, gc_test_rank, salt);

  void *add = NULL, *add_host = NULL;
  if (c->with_add) {
    add = gc_test_alloc(n * isz);
    gc_test_fill(add, n, dt, -1, salt); /* rank -1: the same vector on every rank */
    add_host = malloc(n * isz + 1);
    gc_test_download(add_host, add, n * isz);
  }
  gc_options_t o = GC_OPTIONS_INIT;
  o.scale = c->scale;
  o.add = add;
  o.out_dtype = c->out_dtype;

  gc_result_t r = gc_allreduce_ex(send, recv, n, dt, c->op, gc_test_comm, NULL, &o);
  if (r == GC_SUCCESS) r = gc_synchronize(gc_test_comm, NULL);
  int ok = r == GC_SUCCESS;
  if (!ok)
    fprintf(stderr, "[rank %d] %s: %s: %s\n", gc_test_rank, what, gc_result_name(r),
            gc_comm_last_error(gc_test_comm));

  size_t hbytes = c->in_place ? sbytes : rbytes;
  char *host = malloc(hbytes);
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  gc_test_download(host, c->in_place ? sbuf : rbuf, hbytes);
  char *out = host + (c->in_place ? c->send_off * isz : c->recv_off * osz);
  if (ok && !c->in_place) {
    /* nothing written before or after the output */
    size_t before = c->recv_off * osz, end = before + n * osz;
    for (size_t i = 0; i < hbytes; i++) {
      if (i >= before && i < end) continue;
      if ((unsigned char)host[i] != 0xff) {
        fprintf(stderr, "[rank %d] %s: byte %zu of the buffer (output starts at %zu) was written\n",
                gc_test_rank, what, i, before);
        ok = 0;
        break;
      }
    }
  }
  if (ok) {
    gc_test_red_t R;
    gc_test_red_init(&R, dt, c->op, salt);
    R.out_dtype = odt;
    R.scale = c->scale;
    R.add = add_host;
    ok = gc_test_check_red(what, &R, out, n, c->check_stride ? c->check_stride : 1) == 0;
  }
  /* every rank must hold the same bits, whatever path the data took */
  int same = gc_test_same_on_all_ranks(out, n * osz);
  if (!same) fprintf(stderr, "[rank %d] %s: ranks disagree\n", gc_test_rank, what);

  free(host);
  free(add_host);
  gc_test_free(add);
  if (!c->in_place) gc_test_free(rbuf);
  gc_test_free(sbuf);
  return ok && same;
}

static ar_case_t basic(gc_dtype_t dt, gc_op_t op, size_t count, int in_place) {
  ar_case_t c = {dt, GC_DTYPE_SAME, op, count, in_place, 0, 0, 1.0, 0, 1};
  return c;
}

/* every dtype x op at one size, in place and out of place */
static void sweep_count(size_t count) {
  int bad = 0;
  for (int d = 0; d < GC_TEST_NUM_REDUCIBLE; d++)
    for (int op = 0; op < GC_NUM_OPS; op++)
      for (int ip = 0; ip < 2; ip++) {
        ar_case_t c = basic(gc_test_reducible[d], (gc_op_t)op, count, ip);
        if (!run_case(&c)) bad++;
      }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_small(void) {
  for (int i = 0; i < NUM_COUNTS && counts[i] < 1000; i++) sweep_count(counts[i]);
}
static void test_medium(void) {
  for (int i = 0; i < NUM_COUNTS; i++)
    if (counts[i] >= 1000 && counts[i] < 1000000) sweep_count(counts[i]);
}
static void test_large(void) { sweep_count(1048577); }

static void test_unaligned(void) {
  static const gc_dtype_t dts[] = {GC_FLOAT32, GC_BFLOAT16, GC_FLOAT16, GC_FLOAT64, GC_INT32, GC_UINT8};
  static const size_t sizes[] = {1, 31, 1021, 65537};
  int bad = 0;
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (size_t off = 1; off <= 3; off++) {
        ar_case_t c = basic(dts[d], off == 2 ? GC_MAX : GC_SUM, sizes[s], 0);
        c.send_off = off;
        c.recv_off = 4 - off; /* different misalignments on the two sides */
        if (!run_case(&c)) bad++;
        c.in_place = 1; /* in place on a misaligned pointer */
        if (!run_case(&c)) bad++;
      }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_epilogue(void) {
  static const size_t sizes[] = {1, 7, 1021, 65537};
  const struct {
    gc_dtype_t dt, odt;
    gc_op_t op;
    double scale;
    int add, in_place;
  } cases[] = {
      {GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, 0.5, 0, 0},
      {GC_FLOAT32, GC_DTYPE_SAME, GC_AVG, 3.0, 1, 0},
      {GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, -1.25, 1, 1},
      {GC_BFLOAT16, GC_DTYPE_SAME, GC_SUM, 0.25, 1, 0},
      {GC_BFLOAT16, GC_DTYPE_SAME, GC_AVG, 1.0, 0, 1},
      {GC_FLOAT16, GC_DTYPE_SAME, GC_SUM, 1.0, 1, 0},
      {GC_FLOAT16, GC_DTYPE_SAME, GC_MAX, 2.0, 1, 1},
      {GC_FLOAT64, GC_DTYPE_SAME, GC_PROD, -2.0, 1, 0},
      {GC_INT32, GC_DTYPE_SAME, GC_SUM, 1.0, 1, 0},
      {GC_INT32, GC_DTYPE_SAME, GC_AVG, 1.0, 1, 1},
      {GC_INT64, GC_DTYPE_SAME, GC_MAX, 1.0, 1, 0},
      {GC_UINT8, GC_DTYPE_SAME, GC_PROD, 1.0, 1, 0}, /* wraps modulo 256 */
      /* casts */
      {GC_FLOAT32, GC_BFLOAT16, GC_SUM, 1.0, 0, 0},
      {GC_FLOAT32, GC_FLOAT16, GC_AVG, 1.0, 1, 0},
      {GC_FLOAT32, GC_FLOAT64, GC_SUM, 1.0, 0, 0},
      {GC_FLOAT64, GC_FLOAT32, GC_SUM, 0.125, 1, 0},
      {GC_BFLOAT16, GC_FP8_E4M3, GC_SUM, 1.0, 0, 0},
      {GC_BFLOAT16, GC_FP8_E4M3, GC_SUM, 0.5, 1, 0},
      {GC_BFLOAT16, GC_FLOAT32, GC_PROD, 1.0, 0, 0},
      {GC_FLOAT16, GC_FP8_E5M2, GC_MAX, 3.0, 1, 0},
      {GC_FLOAT16, GC_BFLOAT16, GC_SUM, 1.0, 1, 0},
      {GC_FLOAT32, GC_FP8_E4M3, GC_SUM, 300.0, 0, 0}, /* saturates at 448 */
  };
  int bad = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      ar_case_t c = basic(cases[k].dt, cases[k].op, sizes[s], cases[k].in_place);
      c.out_dtype = cases[k].odt;
      c.scale = cases[k].scale;
      c.with_add = cases[k].add;
      if (!run_case(&c)) bad++;
    }
  CU_ASSERT_EQUAL(bad, 0);
}

/* The communicator's own stream and a second call on the same buffers (state carried between
 * calls, such as epochs and staging, must not leak into results). */
static void test_repeat_and_stream(void) {
  int bad = 0;
  for (int rep = 0; rep < 3; rep++) {
    ar_case_t c = basic(GC_BFLOAT16, GC_SUM, 4099, rep == 1);
    if (!run_case(&c)) bad++;
  }
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  size_t n = 1021;
  float *buf = gc_test_alloc(n * sizeof(float));
  gc_test_fill(buf, n, GC_FLOAT32, gc_test_rank, 9999);
  GC_TEST_OK(gc_allreduce(buf, buf, n, GC_FLOAT32, GC_MAX, gc_test_comm, stream));
  GC_TEST_OK(gc_synchronize(gc_test_comm, stream));
  float *host = malloc(n * sizeof(float));
  gc_test_download(host, buf, n * sizeof(float));
  gc_test_red_t R;
  gc_test_red_init(&R, GC_FLOAT32, GC_MAX, 9999);
  CU_ASSERT_EQUAL(gc_test_check_red("allreduce on the communicator's stream", &R, host, n, 1), 0);
  free(host);
  gc_test_free(buf);
  CU_ASSERT_EQUAL(bad, 0);
}

/* Under --gpu: 64 MiB and 1 GiB of bfloat16, a prime count near 50M and 2^31 + 5 bytes, checked
 * on a sample (every element for bit-identity across ranks). */
/* float64 sums cast to float16, bfloat16 and fp8: the kernels and the MPI path give the same bits.
 * Element 0 sums to 1 + 2^-11 + n 2^-40, just above a float16 midpoint that rounding through
 * float first (the MPI path's store did) lands on, then takes to 1.0; the rest are random. */
static void test_float64_cast_paths_agree(void) {
  static const gc_dtype_t outs[] = {GC_FLOAT16, GC_BFLOAT16, GC_FP8_E4M3, GC_FP8_E5M2};
  const size_t count = 4099;
  double *in = malloc(count * sizeof(double));
  unsigned char *by_path[2];
  CU_ASSERT_PTR_NOT_NULL_FATAL(in);
  int bad = 0;
  for (size_t d = 0; d < sizeof outs / sizeof outs[0]; d++) {
    const size_t osz = gc_dtype_size(outs[d]);
    for (size_t i = 0; i < count; i++) in[i] = gc_test_input(GC_FLOAT64, gc_test_rank, 77 + (int)d, i);
    in[0] = (gc_test_rank == 0 ? 1.0 + 0x1p-11 : 0.0) + 0x1p-40;
    void *send = gc_test_alloc(count * sizeof(double)), *recv = gc_test_alloc(count * osz);
    gc_test_upload(send, in, count * sizeof(double));
    for (int path = 0; path < 2; path++) { /* the table's choice, then the MPI path */
      gc_options_t o = GC_OPTIONS_INIT;
      o.out_dtype = outs[d];
      o.algo = path ? GC_ALGO_MPI : GC_ALGO_AUTO;
      gc_test_poison(recv, count * osz);
      GC_TEST_OK(gc_allreduce_ex(send, recv, count, GC_FLOAT64, GC_SUM, gc_test_comm, NULL, &o));
      GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
      by_path[path] = malloc(count * osz);
      CU_ASSERT_PTR_NOT_NULL_FATAL(by_path[path]);
      gc_test_download(by_path[path], recv, count * osz);
    }
    if (memcmp(by_path[0], by_path[1], count * osz) != 0) {
      size_t i = 0;
      while (memcmp(by_path[0] + i * osz, by_path[1] + i * osz, osz) == 0) i++;
      fprintf(stderr, "[rank %d] float64 -> %s: element %zu differs between the table's path and the MPI path\n",
              gc_test_rank, gc_dtype_name(outs[d]), i);
      bad++;
    }
    free(by_path[0]);
    free(by_path[1]);
    gc_test_free(recv);
    gc_test_free(send);
  }
  free(in);
  CU_ASSERT(gc_test_all(bad == 0));
}

static void test_big(void) {
  const char *huge = getenv("GC_TEST_HUGE");
  if (!gc_test_on_gpu && !(huge && *huge == '1')) {
    gc_test_note("big all-reduce sizes run under --gpu (or GC_TEST_HUGE=1: ~8 GiB per rank)");
    return;
  }
  const struct { gc_dtype_t dt; size_t count; gc_op_t op; } big[] = {
      {GC_BFLOAT16, ((size_t)64 << 20) / 2, GC_SUM},
      {GC_FLOAT32, 50000017, GC_SUM},
      {GC_BFLOAT16, 50000017, GC_AVG},
      {GC_BFLOAT16, ((size_t)1 << 30) / 2, GC_SUM},
      {GC_UINT8, ((size_t)1 << 31) + 5, GC_SUM}, /* past INT_MAX elements */
  };
  int bad = 0;
  for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
    ar_case_t c = basic(big[k].dt, big[k].op, big[k].count, 0);
    c.check_stride = big[k].count / (1 << 20) + 1;
    if (!run_case(&c)) bad++;
  }
  ar_case_t c = basic(GC_BFLOAT16, GC_SUM, ((size_t)64 << 20) / 2, 1);
  c.check_stride = 31;
  if (!run_case(&c)) bad++;
  CU_ASSERT_EQUAL(bad, 0);
}

void gc_test_suite_allreduce(void) {
  static const gc_test_case_t tests[] = {{"dtypes x ops, small counts", test_small},
                                         {"dtypes x ops, 1021 and 65537", test_medium},
                                         {"dtypes x ops, 1048577", test_large},
                                         {"unaligned pointers", test_unaligned},
                                         {"epilogue: scale, add, cast", test_epilogue},
                                         {"repeats and the communicator's stream", test_repeat_and_stream},
                                         {"float64 cast: kernels and MPI path agree", test_float64_cast_paths_agree},
                                         {"big sizes (GPU)", test_big},
                                         {NULL, NULL}};
  gc_test_add_suite("allreduce", tests);
}
