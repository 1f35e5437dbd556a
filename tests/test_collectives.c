/* test_collectives.c — reduce-scatter (1-D, 2-D on both axes, uneven splits, in place), all-gather
 * and broadcast (every dtype incl. fp8, every root, in place, odd counts); the same cases again
 * through the copy-engine path on symmetric buffers, with a small staging area for many chunks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "gc_internal.h"
#include "gc_rng.h"
#include "gc_test.h"

static int salt_counter = 1000000;

/* How the cases run: the algorithm asked for, and whether outputs (and reduce-scatter inputs)
 * come from gc_mem_alloc, which every rank calls in the same order. */
static gc_algo_t mode_algo = GC_ALGO_AUTO;
static int mode_symmetric = 0;

/* Buffers in the mode the cases run in (gc_mem_alloc or plain). */
static void *buf_alloc(size_t bytes) { return gc_test_alloc_as(mode_symmetric, bytes); }
static void buf_free(void *p) { gc_test_free_as(mode_symmetric, p); }

/* A collective's result, synchronized when it succeeded; 0 (and a note on stderr) on failure. */
static int finished(gc_result_t r, const char *what) {
  if (r == GC_SUCCESS) r = gc_synchronize(gc_test_comm, NULL);
  if (r != GC_SUCCESS)
    fprintf(stderr, "[rank %d] %s: %s: %s\n", gc_test_rank, what, gc_result_name(r),
            gc_comm_last_error(gc_test_comm));
  return r == GC_SUCCESS;
}

/* What gc_test_fill(buf, count, dt, rank, salt) wrote, built on the host in `want`. */
static void expected_input(void *want, gc_dtype_t dt, int rank, int salt, size_t count) {
  for (size_t j = 0; j < count; j++) gc__store_double(want, j, dt, gc_test_input(dt, rank, salt, j));
}

/* ---- reduce-scatter ------------------------------------------------------------------------- */

typedef struct {
  gc_dtype_t dtype, out_dtype;
  gc_op_t op;
  int two_d, axis;        /* two_d: gc_reducescatter_2d, else gc_reducescatter with rows = 1 */
  size_t rows, cols;      /* 1-D: cols = recvcount */
  int in_place;
  double scale;
  int with_add;           /* 1: an add vector; 2: the add vector is recv itself */
} rs_case_t;

static int run_rs(const rs_case_t *c) {
  int salt = ++salt_counter, n = gc_test_size, me = gc_test_rank;
  gc_dtype_t dt = c->dtype, odt = c->out_dtype == GC_DTYPE_SAME ? dt : c->out_dtype;
  size_t isz = gc_dtype_size(dt), osz = gc_dtype_size(odt);
  size_t total = c->two_d ? c->rows * c->cols : c->cols * (size_t)n;
  gc_test_red_t R;
  gc_test_red_init(&R, dt, c->op, salt);
  R.out_dtype = odt;
  R.scale = c->scale;
  size_t mine, in_off; /* output elements; element offset of the in-place slot */
  if (!c->two_d) {
    mine = c->cols;
    R.base = in_off = (size_t)me * c->cols;
  } else if (c->axis == 0) {
    size_t ro, rl;
    gc_partition(c->rows, n, me, &ro, &rl);
    mine = rl * c->cols;
    R.base = in_off = ro * c->cols;
  } else {
    size_t co, cl;
    gc_partition(c->cols, n, me, &co, &cl);
    mine = c->rows * cl;
    R.base = co;
    R.width = cl;
    R.stride = c->cols;
    in_off = 0;
  }
  char what[200];
  snprintf(what, sizeof what, "reduce-scatter%s %s %s->%s %zu x %zu axis %d%s scale %g%s",
           c->two_d ? "_2d" : "", gc_op_name(c->op), gc_dtype_name(dt), gc_dtype_name(odt), c->rows,
           c->cols, c->axis, c->in_place ? " in place" : "", c->scale, c->with_add == 2 ? " +add (recv)" : c->with_add ? " +add" : "");

  char *send = buf_alloc(total * isz + GUARD);
  gc_test_fill(send, total, dt, me, salt);
  char *recv = c->in_place ? send + in_off * isz : buf_alloc(mine * osz + GUARD);
  void *add = NULL, *add_host = NULL;
  if (c->with_add) {
    add = gc_test_alloc(mine * isz);
    gc_test_fill(add, mine, dt, -1, salt);
    add_host = malloc(mine * isz + 1);
    gc_test_download(add_host, add, mine * isz);
    R.add = add_host;
  }
  gc_options_t o = GC_OPTIONS_INIT;
  o.scale = c->scale;
  o.add = add;
  if (c->with_add == 2) { /* out of place, same dtype: the addends start in recv */
    GC_TEST_OK(gc_memcpy(gc_test_comm, recv, add, mine * isz));
    o.add = recv;
  }
  o.out_dtype = c->out_dtype;
  o.algo = mode_algo;
  gc_result_t r = c->two_d ? gc_reducescatter_2d(send, recv, c->rows, c->cols, c->axis, dt, c->op,
                                                 gc_test_comm, NULL, &o)
                           : gc_reducescatter_ex(send, recv, c->cols, dt, c->op, gc_test_comm, NULL, &o);
  int ok = finished(r, what);
  char *host = malloc(mine * osz + GUARD);
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  if (ok) ok = gc_test_fetch_checked(host, recv, mine * osz, !c->in_place, what);
  if (ok) ok = gc_test_check_red(what, &R, host, mine, 1) == 0;
  free(host);
  free(add_host);
  gc_test_free(add);
  if (!c->in_place) buf_free(recv);
  buf_free(send);
  return gc_test_all(ok);
}

static rs_case_t rs1(gc_dtype_t dt, gc_op_t op, size_t recvcount, int in_place) {
  rs_case_t c = {dt, GC_DTYPE_SAME, op, 0, 0, 1, recvcount, in_place, 1.0, 0};
  return c;
}

static void test_rs_1d(void) {
  static const size_t rcs[] = {0, 1, 3, 1021};
  int bad = 0;
  for (int d = 0; d < GC_TEST_NUM_REDUCIBLE; d++)
    for (int op = 0; op < GC_NUM_OPS; op++)
      for (size_t k = 0; k < sizeof rcs / sizeof rcs[0]; k++)
        for (int ip = 0; ip < 2; ip++) {
          rs_case_t c = rs1(gc_test_reducible[d], (gc_op_t)op, rcs[k], ip);
          bad += !run_rs(&c);
        }
  /* larger, several MPI chunks per rank */
  for (int d = 0; d < GC_TEST_NUM_REDUCIBLE; d++)
    for (int ip = 0; ip < 2; ip++) {
      rs_case_t c = rs1(gc_test_reducible[d], ip ? GC_MAX : GC_SUM, 262147, ip);
      bad += !run_rs(&c);
    }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_rs_epilogue(void) {
  /* 1-D: dtype, result dtype, op, -, -, 1 row, recvcount, in place, scale, add (2: the add vector is recv) */
  static const rs_case_t cases[] = {
      {GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, 0, 0, 1, 1021, 0, 0.5, 1},
      {GC_BFLOAT16, GC_FP8_E4M3, GC_AVG, 0, 0, 1, 4099, 0, 1.0, 0},
      {GC_FLOAT16, GC_DTYPE_SAME, GC_SUM, 0, 0, 1, 333, 1, 2.0, 1},
      {GC_INT32, GC_DTYPE_SAME, GC_SUM, 0, 0, 1, 77, 0, 1.0, 1},
      {GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, 0, 0, 1, 1021, 0, 0.5, 2},
      {GC_INT64, GC_DTYPE_SAME, GC_SUM, 0, 0, 1, 77, 0, 1.0, 2},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bad += !run_rs(&cases[i]);
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_rs_2d(void) {
  /* shapes whose rows and columns do not divide by 2, 3 or 4 ranks, plus degenerate ones */
  static const size_t shapes[][2] = {{1, 1}, {1, 3}, {3, 1}, {7, 5}, {13, 31}, {37, 129}, {5, 2}, {2, 1023}};
  static const struct { gc_dtype_t dt; gc_op_t op; } kinds[] = {
      {GC_FLOAT32, GC_SUM}, {GC_BFLOAT16, GC_AVG}, {GC_FLOAT16, GC_MAX}, {GC_FLOAT64, GC_PROD},
      {GC_INT32, GC_SUM},   {GC_UINT8, GC_MIN},    {GC_INT64, GC_AVG}};
  int bad = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
      for (int axis = 0; axis < 2; axis++)
        for (int ip = 0; ip < (axis == 0 ? 2 : 1); ip++) {
          rs_case_t c = {kinds[k].dt, GC_DTYPE_SAME, kinds[k].op, 1, axis, shapes[s][0], shapes[s][1],
                         ip, 1.0, 0};
          bad += !run_rs(&c);
        }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_rs_2d_epilogue(void) {
  int bad = 0;
  for (int axis = 0; axis < 2; axis++) {
    rs_case_t c = {GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, 1, axis, 13, 31, 0, 0.5, 1};
    bad += !run_rs(&c);
    c = (rs_case_t){GC_BFLOAT16, GC_FP8_E4M3, GC_AVG, 1, axis, 37, 129, 0, 2.0, 1};
    bad += !run_rs(&c);
    c = (rs_case_t){GC_FLOAT16, GC_FLOAT32, GC_SUM, 1, axis, 7, 5, 0, 1.0, 1};
    bad += !run_rs(&c);
    c = (rs_case_t){GC_BFLOAT16, GC_DTYPE_SAME, GC_SUM, 1, axis, 13, 31, 0, 1.0, 2};
    bad += !run_rs(&c);
    c = (rs_case_t){GC_INT32, GC_DTYPE_SAME, GC_MAX, 1, axis, 7, 5, 0, 1.0, 1};
    bad += !run_rs(&c);
  }
  CU_ASSERT_EQUAL(bad, 0);
}

/* docs/design.md: the bits do not depend on the algorithm. A reduce-scatter (1-D and both 2-D axes)
 * must equal the matching part of an all-reduce of the same data, bit for bit. */
static void test_rs_matches_allreduce(void) {
  static const gc_dtype_t dts[] = {GC_FLOAT32, GC_BFLOAT16, GC_FLOAT16, GC_FLOAT64};
  const size_t rows = 19, cols = 37, total = rows * cols;
  int n = gc_test_size, me = gc_test_rank, bad = 0;
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (int op = 0; op < GC_NUM_OPS; op++) {
      gc_dtype_t dt = dts[d];
      size_t es = gc_dtype_size(dt);
      int salt = ++salt_counter;
      gc_options_t o = GC_OPTIONS_INIT;
      o.scale = 0.75;
      char *send = gc_test_alloc(total * es), *full = gc_test_alloc(total * es);
      char *part = gc_test_alloc(total * es);
      char *hfull = malloc(total * es), *hpart = malloc(total * es);
      gc_test_fill(send, total, dt, me, salt);
      GC_TEST_OK(gc_allreduce_ex(send, full, total, dt, (gc_op_t)op, gc_test_comm, NULL, &o));
      GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
      gc_test_download(hfull, full, total * es);
      for (int mode = 0; mode < 3; mode++) { /* 2-D axis 0, 2-D axis 1, 1-D on a prefix */
        size_t off, len, mine;
        int ok = 1;
        if (mode < 2) {
          gc_partition(mode == 0 ? rows : cols, n, me, &off, &len);
          mine = mode == 0 ? len * cols : rows * len;
          GC_TEST_OK(gc_reducescatter_2d(send, part, rows, cols, mode, dt, (gc_op_t)op, gc_test_comm, NULL, &o));
        } else {
          len = total / (size_t)n;
          off = (size_t)me * len;
          mine = len;
          GC_TEST_OK(gc_reducescatter_ex(send, part, len, dt, (gc_op_t)op, gc_test_comm, NULL, &o));
        }
        GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
        gc_test_download(hpart, part, mine * es);
        if (mode == 1) {
          for (size_t i = 0; i < rows && ok; i++)
            ok = memcmp(hpart + i * len * es, hfull + (i * cols + off) * es, len * es) == 0;
        } else {
          size_t start = mode == 0 ? off * cols : off;
          ok = memcmp(hpart, hfull + start * es, mine * es) == 0;
        }
        if (!ok) {
          fprintf(stderr, "[rank %d] reduce-scatter %s %s (mode %d) differs from all-reduce bits\n",
                  me, gc_dtype_name(dt), gc_op_name((gc_op_t)op), mode);
          bad++;
        }
      }
      free(hfull);
      free(hpart);
      gc_test_free(part);
      gc_test_free(full);
      gc_test_free(send);
    }
  CU_ASSERT_EQUAL(bad, 0);
}

/* Reduce-scatters of n - 1 rows queued back to back, rank 0 starting 200 ms late: a rank whose
 * part is empty still must not run calls ahead of its peers' reads. The LL kernel's did (it waited
 * for nobody): its call 3 overwrote call 0's data in rank 0's area before rank 0 read it, rank 0
 * reduced the wrong input, and its call 3 waited for data gone already (GC_ERR_TIMEOUT). */
static void test_rs_empty_parts_queued(void) {
  enum { CALLS = 6, COLS = 1024 };
  const int n = gc_test_size, me = gc_test_rank;
  if (n < 2) {
    gc_test_note("queued reduce-scatters with empty parts: skipped (one rank)");
    return;
  }
  const size_t rows = (size_t)n - 1;
  size_t ro, rl;
  gc_partition(rows, n, me, &ro, &rl);
  char *send[CALLS], *recv[CALLS];
  int salts[CALLS];
  for (int i = 0; i < CALLS; i++) {
    salts[i] = ++salt_counter;
    send[i] = gc_test_alloc(rows * COLS * sizeof(float));
    gc_test_fill(send[i], rows * COLS, GC_FLOAT32, me, salts[i]);
    recv[i] = gc_test_alloc(rl * COLS * sizeof(float) + GUARD);
  }
  GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
  CU_ASSERT_EQUAL_FATAL(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  if (me == 0) usleep(200000);
  gc_result_t r = GC_SUCCESS;
  for (int i = 0; i < CALLS && r == GC_SUCCESS; i++)
    r = gc_reducescatter_2d(send[i], recv[i], rows, COLS, 0, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, NULL);
  int ok = finished(r, "queued reduce-scatters with empty parts");
  float *host = malloc(rl * COLS * sizeof(float) + GUARD);
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  for (int i = 0; i < CALLS && ok; i++) {
    char what[80];
    snprintf(what, sizeof what, "queued reduce-scatter %d of %d, %zu x %d rows", i + 1, CALLS, rows, COLS);
    gc_test_red_t R;
    gc_test_red_init(&R, GC_FLOAT32, GC_SUM, salts[i]);
    R.base = ro * COLS;
    ok = gc_test_fetch_checked(host, recv[i], rl * COLS * sizeof(float), 1, what) &&
         gc_test_check_red(what, &R, host, rl * COLS, 1) == 0;
  }
  free(host);
  for (int i = 0; i < CALLS; i++) {
    gc_test_free(recv[i]);
    gc_test_free(send[i]);
  }
  CU_ASSERT(gc_test_all(ok));
}

/* The 2-D reduce-scatter by columns: int64 sums past 2^53 stay exact (the MPI path once took
 * them through double), and an add vector that is not where recv is (device add with a host
 * recv, pageable add with a device recv) gives the same bits as one beside it (the MPI path once
 * read the device add on the host, or handed the host add to a kernel). */
static void test_rs_columns_exact_add_anywhere(void) {
  const size_t rows = 3, cols = 7, total = rows * cols;
  const int n = gc_test_size, me = gc_test_rank;
  size_t c0, w;
  gc_partition(cols, n, me, &c0, &w);
  const size_t mine = rows * w;
  int64_t *hsend = malloc(total * 8), *hadd = malloc(mine * 8 + 8), *got = malloc(mine * 8 + 8);
  CU_ASSERT_FATAL(hsend && hadd && got);
  for (size_t k = 0; k < total; k++) hsend[k] = ((int64_t)1 << 53) + 1 + 3 * (int64_t)k + (int64_t)me * 1000003;
  for (size_t k = 0; k < mine; k++) hadd[k] = -((int64_t)1 << 54) - (int64_t)k;
  char *send = gc_test_alloc(total * 8), *recv = gc_test_alloc(mine * 8 + 8), *add = gc_test_alloc(mine * 8 + 8);
  gc_test_upload(send, hsend, total * 8);
  gc_test_upload(add, hadd, mine * 8);
  gc_options_t o = GC_OPTIONS_INIT;
  o.add = add;
  GC_TEST_OK(gc_reducescatter_2d(send, recv, rows, cols, 1, GC_INT64, GC_SUM, gc_test_comm, NULL, &o));
  GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
  gc_test_download(got, recv, mine * 8);
  size_t wrong = 0;
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < w; j++) {
      int64_t want = hadd[i * w + j];
      for (int r = 0; r < n; r++)
        want += ((int64_t)1 << 53) + 1 + 3 * (int64_t)(i * cols + c0 + j) + (int64_t)r * 1000003;
      wrong += got[i * w + j] != want;
    }
  CU_ASSERT_EQUAL(wrong, 0);
  free(hsend);
  free(hadd);
  free(got);
  gc_test_free(add);
  gc_test_free(recv);
  gc_test_free(send);
  if (!gc_test_on_gpu) return;

  /* float32 with an add vector, device inputs: the add beside recv against the add elsewhere */
  const size_t fr = 5, fc = 9, fall = fr * fc;
  gc_partition(fc, n, me, &c0, &w);
  const size_t fmine = fr * w, fbytes = fmine * 4 + 4;
  int salt = ++salt_counter;
  float *fsend = gc_test_alloc(fall * 4), *dadd = gc_test_alloc(fbytes), *drecv = gc_test_alloc(fbytes);
  float *hadd_f = malloc(fbytes), *hrecv = malloc(fbytes), *want_f = malloc(fbytes), *got_f = malloc(fbytes);
  CU_ASSERT_FATAL(hadd_f && hrecv && want_f && got_f);
  gc_test_fill(fsend, fall, GC_FLOAT32, me, salt);
  gc_test_fill(dadd, fmine, GC_FLOAT32, -1, salt);
  gc_test_download(hadd_f, dadd, fmine * 4);
  for (int where = 0; where < 2; where++) { /* 0: recv on the host; 1: recv on the GPU */
    float *out = where ? drecv : hrecv;
    for (int beside = 1; beside >= 0; beside--) {
      o.add = (beside == (where == 0)) ? (void *)hadd_f : (void *)dadd;
      GC_TEST_OK(gc_reducescatter_2d(fsend, out, fr, fc, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o));
      GC_TEST_OK(gc_synchronize(gc_test_comm, NULL));
      gc_test_download(beside ? want_f : got_f, out, fmine * 4);
    }
    if (memcmp(want_f, got_f, fmine * 4) != 0)
      fprintf(stderr, "[rank %d] reduce-scatter by columns, recv on the %s: the add elsewhere differs\n", me,
              where ? "GPU" : "host");
    CU_ASSERT(memcmp(want_f, got_f, fmine * 4) == 0);
  }
  free(hadd_f);
  free(hrecv);
  free(want_f);
  free(got_f);
  gc_test_free(drecv);
  gc_test_free(dadd);
  gc_test_free(fsend);
}

/* Byte offset of all-gather and broadcast buffers from their allocation (unaligned cases). */
static size_t unaligned_by = 0;

/* ---- all-gather ----------------------------------------------------------------------------- */

static int run_ag(gc_dtype_t dt, size_t count, int in_place) {
  int salt = ++salt_counter, n = gc_test_size, me = gc_test_rank;
  size_t es = gc_dtype_size(dt), total = count * (size_t)n, off = unaligned_by;
  char what[120];
  snprintf(what, sizeof what, "allgather %s count %zu%s%s", gc_dtype_name(dt), count, in_place ? " in place" : "",
           off ? " unaligned" : "");
  char *recv_base = buf_alloc(total * es + GUARD + off), *recv = recv_base + off;
  char *send_base = in_place ? NULL : gc_test_alloc(count * es + off);
  char *send = in_place ? recv + (size_t)me * count * es : send_base + off;
  gc_test_fill(send, count, dt, me, salt);
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = mode_algo;
  int ok = finished(gc_allgather_ex(send, recv, count, dt, gc_test_comm, NULL, &o), what);
  char *host = malloc(total * es + GUARD), *want = malloc(total * es + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  for (int rr = 0; rr < n; rr++) expected_input(want + (size_t)rr * count * es, dt, rr, salt, count);
  if (ok) ok = gc_test_fetch_checked(host, recv, total * es, 1, what);
  if (ok && memcmp(host, want, total * es) != 0) {
    size_t i = 0;
    while (memcmp(host + i * es, want + i * es, es) == 0) i++;
    fprintf(stderr, "[rank %d] %s: element %zu (from rank %zu) is wrong\n", me, what, i, count ? i / count : 0);
    ok = 0;
  }
  free(host);
  free(want);
  if (send_base) gc_test_free(send_base);
  buf_free(recv_base);
  return gc_test_all(ok);
}

static void test_allgather(void) {
  static const size_t sizes[] = {0, 1, 3, 1021, 65537};
  int bad = 0;
  for (int d = 0; d < GC_NUM_DTYPES; d++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (int ip = 0; ip < 2; ip++) bad += !run_ag((gc_dtype_t)d, sizes[s], ip);
  bad += !run_ag(GC_BFLOAT16, 1048583, 0); /* several MPI chunks */
  bad += !run_ag(GC_FP8_E4M3, 4194319, 1);
  /* Parts of over 1 MB at 16-byte aligned places: several 16-byte units per thread and part. */
  bad += !run_ag(GC_BFLOAT16, 1048584, 0);
  bad += !run_ag(GC_FLOAT32, 524296, 1);
  CU_ASSERT_EQUAL(bad, 0);
}

/* ---- broadcast ------------------------------------------------------------------------------- */

static int run_bc(gc_dtype_t dt, size_t count, int root, int in_place) {
  int salt = ++salt_counter, me = gc_test_rank;
  size_t es = gc_dtype_size(dt), off = unaligned_by;
  char what[120];
  snprintf(what, sizeof what, "broadcast %s count %zu root %d%s%s", gc_dtype_name(dt), count, root,
           in_place ? " in place" : "", off ? " unaligned" : "");
  char *recv_base = buf_alloc(count * es + GUARD + off), *recv = recv_base + off, *send_base = NULL;
  char *send = NULL;
  if (me == root) {
    send_base = in_place ? NULL : gc_test_alloc(count * es + off);
    send = in_place ? recv : send_base + off;
    gc_test_fill(send, count, dt, root, salt);
  }
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = mode_algo;
  int ok = finished(gc_broadcast_ex(send, recv, count, dt, root, gc_test_comm, NULL, &o), what);
  char *host = malloc(count * es + GUARD), *want = malloc(count * es + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  expected_input(want, dt, root, salt, count);
  if (ok) ok = gc_test_fetch_checked(host, recv, count * es, 1, what);
  if (ok && memcmp(host, want, count * es) != 0) {
    fprintf(stderr, "[rank %d] %s: wrong data\n", me, what);
    ok = 0;
  }
  if (ok && send && send != recv) { /* the root's input is left alone */
    gc_test_download(host, send, count * es);
    if (memcmp(host, want, count * es) != 0) {
      fprintf(stderr, "[rank %d] %s: the root's sendbuf changed\n", me, what);
      ok = 0;
    }
  }
  free(host);
  free(want);
  if (send_base) gc_test_free(send_base);
  buf_free(recv_base);
  return gc_test_all(ok);
}

static void test_broadcast(void) {
  static const size_t sizes[] = {0, 1, 3, 1021, 65537};
  int bad = 0;
  for (int root = 0; root < gc_test_size; root++)
    for (int d = 0; d < GC_NUM_DTYPES; d++)
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ip = 0; ip < 2; ip++) bad += !run_bc((gc_dtype_t)d, sizes[s], root, ip);
  bad += !run_bc(GC_FLOAT32, 3000017, gc_test_size - 1, 0); /* several MPI chunks */
  bad += !run_bc(GC_UINT8, 9000011, 0, 1);
  CU_ASSERT_EQUAL(bad, 0);
}

/* ---- the copy-engine path -------------------------------------------------------------------- */

/* 1-D reduce-scatters: every dtype of dts x every count, out of place and in place, the op
 * changing from case to case. */
static int rs_sweep(const gc_dtype_t *dts, size_t ndts, const size_t *counts, size_t ncounts) {
  int bad = 0;
  for (size_t d = 0; d < ndts; d++)
    for (size_t k = 0; k < ncounts; k++)
      for (int ip = 0; ip < 2; ip++) {
        rs_case_t c = rs1(dts[d], (gc_op_t)((d + k + ip) % GC_NUM_OPS), counts[k], ip);
        bad += !run_rs(&c);
      }
  return bad;
}

/* Every epilogue at once: a bf16 sum scaled by 1/4, plus a vector, cast to fp8 e4m3. */
static int rs_fp8_epilogue(void) {
  rs_case_t e = rs1(GC_BFLOAT16, GC_SUM, 300007, 0);
  e.scale = 0.25;
  e.with_add = 1;
  e.out_dtype = GC_FP8_E4M3;
  return !run_rs(&e);
}

/* cases() again on another communicator: `staging_bytes` of staging (0: the default), the
 * control warp of the kernels by writes on or off (the push_control switch: 1 or 0; -1: as configured). */
static int on_comm(int (*cases)(void), size_t staging_bytes, int push_control) {
  gc_comm_t keep = gc_test_comm, other = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  cfg.staging_bytes = staging_bytes;
  GC_TEST_OK(gc_comm_init(&other, MPI_COMM_WORLD, &cfg));
  if (push_control >= 0) other->sw.push_control = push_control;
  gc_test_comm = other;
  int bad = cases();
  gc_test_comm = keep;
  GC_TEST_OK(gc_comm_destroy(other));
  return bad;
}

/* cases() again on a communicator with a 1 MB staging area (inbox rows and slots a fraction of
 * the default: many chunks or pieces per call). */
static int on_small_staging(int (*cases)(void)) { return on_comm(cases, 1 << 20, -1); }

static int copyengine_cases(void) {
  static const gc_dtype_t dts[] = {GC_FLOAT32, GC_BFLOAT16, GC_FLOAT64, GC_INT32, GC_UINT8};
  static const size_t counts[] = {1, 3, 1021, 262147};
  int bad = rs_sweep(dts, sizeof dts / sizeof dts[0], counts, sizeof counts / sizeof counts[0]);
  bad += rs_fp8_epilogue();
  rs_case_t rows = {GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, 1, 0, 1001, 517, 0, 1.0, 0}; /* axis 0, uneven */
  bad += !run_rs(&rows);
  for (int d = 0; d < GC_NUM_DTYPES; d++)
    for (int ip = 0; ip < 2; ip++) bad += !run_ag((gc_dtype_t)d, 65537, ip);
  bad += !run_ag(GC_BFLOAT16, 3, 0);
  bad += !run_ag(GC_BFLOAT16, 2097169, 1);
  for (int root = 0; root < gc_test_size; root++)
    for (int ip = 0; ip < 2; ip++) {
      bad += !run_bc(GC_BFLOAT16, 1, root, ip);
      bad += !run_bc(GC_FLOAT32, 65537, root, ip);
      bad += !run_bc(GC_UINT8, 30000017, root, ip); /* several 8 MB slices per owner */
    }
  return bad;
}

/* The same cases on outputs peers cannot write: all-gather and broadcast go through staging
 * (gc__ce_gather_staged), the reduce-scatter as on symmetric buffers; and unaligned broadcasts. */
static int staged_cases(void) {
  int bad = copyengine_cases();
  for (int root = 0; root < gc_test_size; root++) {
    unaligned_by = 3;
    bad += !run_bc(GC_UINT8, 1000003, root, root & 1);
    unaligned_by = 0;
  }
  return bad;
}

static void test_copyengine(void) {
  if (!gc_test_peer_gpus("copy-engine path", 2)) return;
  mode_algo = GC_ALGO_COPYENGINE;
  mode_symmetric = 1;
  int bad = copyengine_cases();
  /* Inbox rows of tens of KB: every reduce-scatter runs many chunks through all of its buffers. */
  bad += on_small_staging(copyengine_cases);
  mode_symmetric = 0;
  bad += staged_cases();
  bad += on_small_staging(staged_cases); /* staging rows of about 114-340 KB: many chunks */
  /* Column blocks are not contiguous: asking is an error. */
  void *send = gc_test_alloc(64 * 64 * 4), *recv = gc_test_alloc(64 * 64 * 4);
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_COPYENGINE;
  CU_ASSERT_EQUAL(gc_reducescatter_2d(send, recv, 64, 64, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o),
                  GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "contiguous"));
  gc_test_free(send);
  gc_test_free(recv);
  mode_algo = GC_ALGO_AUTO;
  CU_ASSERT_EQUAL(bad, 0);
}

/* ---- broadcast by writes (writes) -------------------------------------------------------- */

static int broadcast_push_cases(void) {
  int bad = 0;
  static const size_t counts[] = {0, 1, 3, 1021, 65537, 1048573};
  for (int root = 0; root < gc_test_size; root++)
    for (int d = 0; d < GC_NUM_DTYPES; d++)
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int ip = 0; ip < 2; ip++) bad += !run_bc((gc_dtype_t)d, counts[k], root, ip);
  for (int root = 0; root < gc_test_size; root++) {
    bad += !run_bc(GC_UINT8, 30000017, root, root & 1); /* thousands of pieces per block */
    unaligned_by = 3; /* the byte path: nothing 16-byte aligned */
    bad += !run_bc(GC_UINT8, 1000003, root, 0);
    unaligned_by = 2; /* element-aligned only */
    bad += !run_bc(GC_BFLOAT16, 77777, root, 1);
    unaligned_by = 0;
  }
  return bad;
}

/* The all-gather by writes goes through staging for any outputs: every part along its ring. */
static int allgather_push_cases(void) {
  int bad = 0;
  static const size_t counts[] = {0, 1, 3, 1021, 65537, 1048573};
  for (int d = 0; d < GC_NUM_DTYPES; d++)
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
      for (int ip = 0; ip < 2; ip++) bad += !run_ag((gc_dtype_t)d, counts[k], ip);
  bad += !run_ag(GC_UINT8, 10000019, 1); /* hundreds of pieces per block */
  unaligned_by = 3; /* the byte path: nothing 16-byte aligned */
  bad += !run_ag(GC_UINT8, 1000003, 0);
  unaligned_by = 2; /* element-aligned only */
  bad += !run_ag(GC_BFLOAT16, 77777, 1);
  unaligned_by = 0;
  bad += !run_ag(GC_FLOAT32, 262144, 1); /* parts on 16-byte boundaries, in place */
  return bad;
}

/* The smallest staging area (64 KB): one block per part on 3+ GPUs, pieces under 4 KB. */
static int allgather_tiny_staging_cases(void) {
  return !run_ag(GC_BFLOAT16, 65537, 0) + !run_ag(GC_UINT8, 100003, 1) + !run_ag(GC_FLOAT32, 4096, 1);
}

static int broadcasts_queued(gc_algo_t algo);

static void test_bywrites_rings(void) {
  if (!gc_test_peer_gpus("broadcast and all-gather by writes", 2)) return;
  mode_algo = GC_ALGO_WRITES;
  mode_symmetric = 1;
  int bad = broadcast_push_cases();
  bad += allgather_push_cases();
  mode_symmetric = 0;
  /* Outputs peers cannot write: along the ring through each rank's staging; on a 1 MB staging
   * area 4 KB pieces on 42 blocks (40 for the all-gather on 4 GPUs), each piece's slot reused
   * many times a call. */
  bad += broadcast_push_cases();
  bad += allgather_push_cases();
  bad += on_small_staging(broadcast_push_cases);
  bad += on_small_staging(allgather_push_cases);
  bad += !broadcasts_queued(GC_ALGO_WRITES);
  /* The same rings with a control warp per block (push_control=1), on both staging sizes. */
  bad += on_comm(broadcast_push_cases, 0, 1);
  bad += on_comm(allgather_push_cases, 0, 1);
  bad += on_comm(allgather_push_cases, 1 << 20, 1);
  bad += on_comm(broadcast_push_cases, 1 << 20, 1);
  bad += on_comm(allgather_tiny_staging_cases, 65536, -1);
  mode_algo = GC_ALGO_AUTO;
  CU_ASSERT_EQUAL(bad, 0);
}

/* ---- reduce-scatter by writes (writes) -------------------------------------------------- */

static int rs_bywrites_cases(void) {
  static const size_t counts[] = {0, 1, 3, 1021, 262147};
  int bad = rs_sweep(gc_test_reducible, GC_TEST_NUM_REDUCIBLE, counts, sizeof counts / sizeof counts[0]);
  bad += rs_fp8_epilogue();
  rs_case_t e = rs1(GC_FLOAT16, GC_AVG, 4099, 0);
  e.out_dtype = GC_FLOAT32;
  bad += !run_rs(&e);
  e = rs1(GC_INT32, GC_SUM, 1021, 1);
  e.with_add = 1;
  bad += !run_rs(&e);
  rs_case_t rows = {GC_FLOAT32, GC_DTYPE_SAME, GC_SUM, 1, 0, 1001, 517, 1, 1.0, 0}; /* axis 0, uneven, in place */
  bad += !run_rs(&rows);
  /* 12.6 MB per part in bf16: more pieces than 64 streams x 3 inbox slots of 58 KB (4 GPUs) */
  rs_case_t big = rs1(GC_BFLOAT16, GC_SUM, 6291469, 1);
  bad += !run_rs(&big);
  return bad;
}

static void test_rs_bywrites(void) {
  if (!gc_test_peer_gpus("reduce-scatter by writes", 2)) return;
  mode_algo = GC_ALGO_WRITES;
  int bad = 0;
  /* Any buffers: plain and from gc_mem_alloc; inbox slots under 1 KB (hundreds of pieces per
   * stream). */
  for (mode_symmetric = 0; mode_symmetric < 2; mode_symmetric++) bad += rs_bywrites_cases();
  mode_symmetric = 0;
  bad += on_small_staging(rs_bywrites_cases);
  gc_comm_t tiny = NULL;
  gc_config_t cfg = GC_CONFIG_INIT;
  /* Refused by name: column blocks, and a staging area too small for the inboxes. */
  void *send = gc_test_alloc(64 * 64 * 4), *recv = gc_test_alloc(64 * 64 * 4);
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_WRITES;
  CU_ASSERT_EQUAL(gc_reducescatter_2d(send, recv, 64, 64, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o),
                  GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "contiguous"));
  cfg.staging_bytes = 65536;
  GC_TEST_OK(gc_comm_init(&tiny, MPI_COMM_WORLD, &cfg));
  CU_ASSERT_EQUAL(gc_reducescatter_ex(send, recv, 64, GC_FLOAT32, GC_SUM, tiny, NULL, &o), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(tiny), "GC_STAGING_BYTES"));
  GC_TEST_OK(gc_comm_destroy(tiny));
  gc_test_free(send);
  gc_test_free(recv);
  mode_algo = GC_ALGO_AUTO;
  CU_ASSERT_EQUAL(bad, 0);
}

/* ---- barrier-free one-shot (oneshot_ll) ------------------------------------------------------- */

/* Broadcasts queued back to back with no synchronisation, sizes changing, another collective of
 * the same algorithm among them. LL (plain buffers, one root, sizes between direct and relayed,
 * an all-gather among them): the root needs nobody's data and would run ahead of its readers if
 * it did not wait for every rank to start each call. By writes through staging (plain
 * outputs, roots taking turns, a two-shot all-reduce by writes and an all-gather through staging
 * among them): no entry barrier, so a call's first pieces may land while the receiver still
 * finishes the call before. */
static int broadcasts_queued(gc_algo_t algo) {
  enum { QUEUED = 12 };
  static const size_t ll_n[QUEUED] = {5, 200000, 4099, 131075, 1, 65537, 300001, 77, 262144, 9, 150000, 3};
  static const size_t staged_n[QUEUED] = {5, 4000037, 4099, 131075, 1, 2000003, 300001, 77, 3999999, 9, 150000, 3};
  const int ll = algo == GC_ALGO_ONESHOT_LL, me = gc_test_rank;
  const size_t *qn = ll ? ll_n : staged_n, slice = ll ? 300032 : 4000064;
  const char *what = ll ? "LL broadcast" : "broadcast by writes through staging";
  int root[QUEUED];
  for (int i = 0; i < QUEUED; i++) root[i] = ll ? gc_test_size - 1 : i % gc_test_size;
  char *send = gc_test_alloc(QUEUED * slice * 2), *recv = gc_test_alloc(QUEUED * slice * 2);
  enum { AG_COUNT = 300007 }; /* bf16 per rank: the all-gather through staging among them */
  char *part = gc_test_alloc(64), *gathered = gc_test_alloc(64 * (size_t)gc_test_size);
  char *ag_part = gc_test_alloc(AG_COUNT * 2), *ag_out = gc_test_alloc(AG_COUNT * 2 * (size_t)gc_test_size);
  gc_test_fill(part, 32, GC_BFLOAT16, me, 1300);
  gc_test_fill(ag_part, AG_COUNT, GC_BFLOAT16, me, 1301);
  for (int i = 0; i < QUEUED; i++) gc_test_fill(send + i * slice * 2, qn[i], GC_BFLOAT16, root[i], 1310 + i);
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = algo;
  gc_result_t r = GC_SUCCESS;
  for (int i = 0; i < QUEUED && r == GC_SUCCESS; i++) {
    r = gc_broadcast_ex(me == root[i] ? send + i * slice * 2 : NULL, recv + i * slice * 2, qn[i], GC_BFLOAT16,
                        root[i], gc_test_comm, stream, &o);
    if (r == GC_SUCCESS && i == QUEUED / 2)
      r = ll ? gc_allgather_ex(part, gathered, 32, GC_BFLOAT16, gc_test_comm, stream, &o)
             : gc_allreduce_ex(part, gathered, 32, GC_BFLOAT16, GC_SUM, gc_test_comm, stream, &o);
    if (r == GC_SUCCESS && i == QUEUED / 4 && !ll)
      r = gc_allgather_ex(ag_part, ag_out, AG_COUNT, GC_BFLOAT16, gc_test_comm, stream, &o);
  }
  int ok = finished(r == GC_SUCCESS ? gc_synchronize(gc_test_comm, stream) : r, what);
  unsigned short *h = malloc(slice * 2), *want = malloc(slice * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  for (int i = 0; i < QUEUED && ok; i++) {
    gc_test_download(h, recv + i * slice * 2, qn[i] * 2);
    expected_input(want, GC_BFLOAT16, root[i], 1310 + i, qn[i]);
    if (memcmp(h, want, qn[i] * 2) != 0) {
      fprintf(stderr, "[rank %d] %s %d of %d queued (%zu elements): wrong data\n", me, what, i, QUEUED, qn[i]);
      ok = 0;
    }
  }
  for (int rr = 0; rr < gc_test_size && ok && !ll; rr++) {
    gc_test_download(h, ag_out + (size_t)rr * AG_COUNT * 2, AG_COUNT * 2);
    expected_input(want, GC_BFLOAT16, rr, 1301, AG_COUNT);
    if (memcmp(h, want, AG_COUNT * 2) != 0) {
      fprintf(stderr, "[rank %d] all-gather among the queued broadcasts: rank %d's part is wrong\n", me, rr);
      ok = 0;
    }
  }
  free(h);
  free(want);
  gc_test_free(send);
  gc_test_free(recv);
  gc_test_free(part);
  gc_test_free(gathered);
  gc_test_free(ag_part);
  gc_test_free(ag_out);
  return gc_test_all(ok);
}

/* Random sequences of calls queued on one stream without a synchronization: collective,
 * algorithm, buffers (plain, or from gc_mem_alloc and so zero-copy), dtype, op, size, root, in
 * place, an epilogue (scale, add or cast) and an offset off the buffers' alignment drawn from the
 * run's seed, the same on every rank. So every kind of call follows every other, and whatever one
 * leaves behind (staging, push areas, LL generations, signals, epochs) must not spoil the next. A
 * call an algorithm cannot take (GC_ERR_UNSUPPORTED, alike on every rank) is left out of the
 * check. Every output, and the guard after it, is checked at the end. */
enum { SEQ_CALLS = 32 };
typedef struct {
  int kind, root, in_place, sym, salt;
  gc_algo_t algo;
  gc_dtype_t dtype, out_dtype;
  gc_op_t op;
  size_t count;  /* all-reduce, broadcast: elements; reduce-scatter, all-gather: per rank */
  size_t offset; /* elements from the start of the buffers to send and recv */
  double scale;
  int with_add;
  char *send, *recv, *send_base, *recv_base, *add;
  void *add_host;
  gc_result_t rc;
  char why[160]; /* gc_comm_last_error of a refused call */
} seq_call_t;
enum { SEQ_AR, SEQ_RS, SEQ_AG, SEQ_BC };
static const char *const seq_kind_name[] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast"};

/* A call with no epilogue, at the buffers' start, by the table's choice. */
static seq_call_t seq_call(int kind, gc_dtype_t dt, gc_op_t op, size_t count, int sym) {
  seq_call_t c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.dtype = c.out_dtype = dt;
  c.op = op;
  c.count = count;
  c.sym = sym;
  c.scale = 1.0;
  c.algo = GC_ALGO_AUTO;
  return c;
}

static uint64_t seq_state;
static size_t seq_draw(size_t below) {
  seq_state = gc__mix64(seq_state);
  return (size_t)(seq_state % below);
}

/* Input bytes and output bytes of a call (in place, drawn for all-reduce and broadcast only, with
 * no cast: equal). */
static void seq_sizes(const seq_call_t *c, size_t *in_bytes, size_t *out_bytes) {
  const size_t n = (size_t)gc_test_size;
  *in_bytes = (c->kind == SEQ_RS ? n : 1) * c->count * gc_dtype_size(c->dtype);
  *out_bytes = (c->kind == SEQ_AG ? n : 1) * c->count * gc_dtype_size(c->out_dtype);
}

static void seq_name(const seq_call_t *c, int i, char *what, size_t size) {
  char epilogue[64] = "";
  if (c->scale != 1.0) snprintf(epilogue, sizeof epilogue, " scale %g", c->scale);
  if (c->with_add) snprintf(epilogue, sizeof epilogue, " +add");
  if (c->out_dtype != c->dtype) snprintf(epilogue, sizeof epilogue, " ->%s", gc_dtype_name(c->out_dtype));
  snprintf(what, size, "call %d of a sequence: %s %s %s %s count %zu root %d%s%s offset %zu%s", i,
           seq_kind_name[c->kind], gc_algo_name(c->algo), gc_dtype_name(c->dtype), gc_op_name(c->op), c->count,
           c->root, c->in_place ? " in place" : "", c->sym ? " gc_mem_alloc" : "", c->offset, epilogue);
}

static int seq_check(const seq_call_t *c, int i) {
  const int n = gc_test_size, me = gc_test_rank;
  const size_t es = gc_dtype_size(c->dtype);
  size_t in_bytes, out_bytes;
  seq_sizes(c, &in_bytes, &out_bytes);
  char what[200];
  seq_name(c, i, what, sizeof what);
  char *h = malloc(out_bytes + GUARD), *want = malloc(out_bytes + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  int ok = gc_test_fetch_checked(h, c->recv, out_bytes, 1, what);
  if (ok && (c->kind == SEQ_AR || c->kind == SEQ_RS)) {
    gc_test_red_t R;
    gc_test_red_init(&R, c->dtype, c->op, c->salt);
    if (c->kind == SEQ_RS) R.base = (size_t)me * c->count;
    R.out_dtype = c->out_dtype;
    R.scale = c->scale;
    R.add = c->add_host;
    ok = gc_test_check_red(what, &R, h, c->count, 1) == 0;
  } else if (ok) {
    for (int q = 0; q < (c->kind == SEQ_AG ? n : 1); q++)
      expected_input(want + (size_t)q * c->count * es, c->dtype, c->kind == SEQ_AG ? q : c->root, c->salt, c->count);
    if (memcmp(h, want, out_bytes) != 0) {
      fprintf(stderr, "[rank %d] %s: wrong data\n", me, what);
      ok = 0;
    }
  }
  free(h);
  free(want);
  return ok;
}

/* Buffers for a call whose kind, dtypes, count, root, in place, buffer kind, offset and epilogue
 * are set: outputs and the guard after them poisoned (by the allocation), inputs (and the addend)
 * filled with the call's salt. */
static void seq_prepare(seq_call_t *c) {
  c->salt = ++salt_counter;
  const size_t es = gc_dtype_size(c->dtype), os = gc_dtype_size(c->out_dtype);
  size_t in_bytes, out_bytes;
  seq_sizes(c, &in_bytes, &out_bytes);
  c->recv_base = gc_test_alloc_as(c->sym, c->offset * os + out_bytes + GUARD);
  c->recv = c->recv_base + c->offset * os;
  c->send_base = c->in_place ? c->recv_base : gc_test_alloc_as(c->sym, c->offset * es + in_bytes);
  c->send = c->send_base + c->offset * es;
  if (c->kind != SEQ_BC || gc_test_rank == c->root) gc_test_fill(c->send, in_bytes / es, c->dtype, gc_test_rank, c->salt);
  if (c->with_add) { /* one per output element, the same on every rank */
    c->add = gc_test_alloc(c->count * es);
    gc_test_fill(c->add, c->count, c->dtype, -1, c->salt);
    c->add_host = malloc(c->count * es + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->add_host);
    gc_test_download(c->add_host, c->add, c->count * es);
  }
}

/* Queues the prepared calls on one stream without a synchronization, then synchronizes once,
 * checks that every rank's calls ended alike and every output of a call that was taken, and frees
 * the buffers. Each call keeps its result (and, when refused, why). Returns how many calls were
 * taken and checked, or -1 when anything failed. */
static int seq_run(seq_call_t *calls, int ncalls) {
  const int me = gc_test_rank;
  void *stream = NULL;
  GC_TEST_OK(gc_comm_stream(gc_test_comm, &stream));
  gc_result_t failed = GC_SUCCESS;
  const int trace = getenv("GC_TEST_TRACE") != NULL; /* each call on stderr as it is made */
  for (int i = 0; i < ncalls && failed == GC_SUCCESS; i++) {
    seq_call_t *c = &calls[i];
    gc_options_t o = GC_OPTIONS_INIT;
    o.algo = c->algo;
    o.scale = c->scale;
    o.add = c->add;
    o.out_dtype = c->out_dtype;
    char what[200];
    seq_name(c, i, what, sizeof what);
    if (trace) fprintf(stderr, "[rank %d] %s\n", me, what);
    switch (c->kind) {
      case SEQ_AR: c->rc = gc_allreduce_ex(c->send, c->recv, c->count, c->dtype, c->op, gc_test_comm, stream, &o); break;
      case SEQ_RS: c->rc = gc_reducescatter_ex(c->send, c->recv, c->count, c->dtype, c->op, gc_test_comm, stream, &o); break;
      case SEQ_AG: c->rc = gc_allgather_ex(c->send, c->recv, c->count, c->dtype, gc_test_comm, stream, &o); break;
      default:
        c->rc = gc_broadcast_ex(me == c->root ? c->send : NULL, c->recv, c->count, c->dtype, c->root, gc_test_comm, stream, &o);
    }
    if (c->rc == GC_ERR_UNSUPPORTED) snprintf(c->why, sizeof c->why, "%s", gc_comm_last_error(gc_test_comm));
    if (c->rc != GC_SUCCESS && c->rc != GC_ERR_UNSUPPORTED) {
      fprintf(stderr, "[rank %d] %s: %s: %s\n", me, what, gc_result_name(c->rc), gc_comm_last_error(gc_test_comm));
      failed = c->rc;
    } else if (trace) {
      fprintf(stderr, "[rank %d] call %d: %s %s\n", me, i, gc_result_name(c->rc), c->why);
    }
  }
  if (trace) fprintf(stderr, "[rank %d] all calls made, synchronizing\n", me);
  int ok = finished(failed == GC_SUCCESS ? gc_synchronize(gc_test_comm, stream) : failed, "a sequence of calls");
  int *rcs = malloc((size_t)ncalls * sizeof *rcs), checked = 0;
  CU_ASSERT_PTR_NOT_NULL_FATAL(rcs);
  for (int i = 0; i < ncalls; i++) rcs[i] = (int)calls[i].rc;
  if (!gc_test_same_on_all_ranks(rcs, (size_t)ncalls * sizeof *rcs)) {
    fprintf(stderr, "[rank %d] a sequence of calls: the ranks' calls did not end alike\n", me);
    ok = 0;
  }
  free(rcs);
  for (int i = 0; i < ncalls && ok; i++)
    if (calls[i].rc == GC_SUCCESS) {
      ok = seq_check(&calls[i], i);
      checked++;
    }
  for (int i = ncalls - 1; i >= 0; i--) { /* symmetric buffers: freed alike on every rank */
    if (!calls[i].in_place) gc_test_free_as(calls[i].sym, calls[i].send_base);
    gc_test_free_as(calls[i].sym, calls[i].recv_base);
    gc_test_free(calls[i].add);
    free(calls[i].add_host);
  }
  return gc_test_all(ok) ? checked : -1;
}

static int seq_cases(void) {
  /* Host buffers (no GPU) take the MPI path whatever is asked: there AUTO and MPI only, and the
   * smaller sizes. */
  static const gc_algo_t algos[] = {GC_ALGO_AUTO, GC_ALGO_MPI, GC_ALGO_ONESHOT, GC_ALGO_TWOSHOT,
                                    GC_ALGO_WRITES, GC_ALGO_ONESHOT_LL, GC_ALGO_COPYENGINE};
  static const size_t counts[] = {1, 1021, 65537, 262147, 1000003};
  const size_t nalgos = gc_test_on_gpu ? sizeof algos / sizeof algos[0] : 2;
  const size_t ncounts = gc_test_on_gpu ? sizeof counts / sizeof counts[0] : 3;
  static const gc_dtype_t dtypes[] = {GC_FLOAT32, GC_BFLOAT16};
  static const gc_op_t ops[] = {GC_SUM, GC_MAX, GC_AVG};
  seq_call_t calls[SEQ_CALLS];
  for (int i = 0; i < SEQ_CALLS; i++) {
    seq_call_t *c = &calls[i];
    const int kind = (int)seq_draw(4);
    const gc_algo_t algo = algos[seq_draw(nalgos)];
    const gc_dtype_t dt = dtypes[seq_draw(2)];
    const gc_op_t op = ops[seq_draw(3)];
    *c = seq_call(kind, dt, op, counts[seq_draw(ncounts)], 0);
    c->algo = algo;
    c->root = (int)seq_draw((size_t)gc_test_size);
    c->in_place = (kind == SEQ_AR || kind == SEQ_BC) && seq_draw(4) == 0;
    c->sym = seq_draw(2) == 0;
    c->offset = seq_draw(4) == 0 ? 1 + seq_draw(7) : 0; /* off every 16-byte boundary but the 8th */
    switch (kind == SEQ_AR || kind == SEQ_RS ? seq_draw(4) : 0) { /* an epilogue for reductions */
      case 1: c->scale = 0.5; break;
      case 2: c->with_add = 1; break;
      case 3: if (!c->in_place) c->out_dtype = dt == GC_FLOAT32 ? GC_BFLOAT16 : GC_FP8_E4M3; break;
      default: break;
    }
    seq_prepare(c);
  }
  const int checked = seq_run(calls, SEQ_CALLS);
  /* Refusals come from the draw (an algorithm that needs gc_mem_alloc buffers, LL's limits): a
   * quarter of the calls taken at least, or the sequence checks too little. */
  if (checked >= 0) gc_test_note("a sequence of calls: %d of %d taken and checked", checked, SEQ_CALLS);
  return checked >= SEQ_CALLS / 4 ? 0 : 1;
}

static void test_random_sequences(void) {
  if (gc_test_on_gpu && !gc_test_peer_gpus("random sequences of calls", 2)) return;
  seq_state = gc_test_seed;
  int bad = 0;
  for (int round = 0; round < 3; round++) bad += seq_cases();
  bad += on_small_staging(seq_cases); /* chunks and many pieces per call */
  bad += on_comm(seq_cases, 65536, -1); /* the smallest staging area: refusals and fallbacks from 6 GPUs */
  bad += on_comm(seq_cases, 0, 1);    /* the control warp of the kernels by writes */
  CU_ASSERT_EQUAL(bad, 0);
}

/* Calls right after a ring through staging (the broadcast and the all-gather by writes into
 * outputs peers cannot write). The ring's last rank may still be copying pieces out of its
 * staging when the ranks before it finish, and the kernels by writes of the next call (the
 * two-shot all-reduce, the reduce-scatter) write into every peer's staging as soon as they start:
 * a 4-rank run of broadcasts_queued once got wrong broadcast data that way. So: for every root, a
 * broadcast, an all-reduce, an all-gather and a reduce-scatter, all forced by writes, queued on
 * one stream without a synchronization; the all-reduce's 8 MB of inboxes cover every slot of the
 * rings. Every call must be taken, and every result is checked at the end. */
static void test_after_rings(void) {
  if (!gc_test_peer_gpus("calls after rings through staging", 2)) return;
  enum { BC = 1000003, AR = 2097169, AG = 300007, RS = 262147, ROUNDS = 2, EACH = 4 };
  const int n = gc_test_size, ncalls = ROUNDS * n * EACH;
  seq_call_t *calls = calloc((size_t)ncalls, sizeof *calls);
  CU_ASSERT_PTR_NOT_NULL_FATAL(calls);
  for (int i = 0; i < ROUNDS * n; i++) {
    seq_call_t *c = calls + i * EACH;
    c[0] = seq_call(SEQ_BC, GC_BFLOAT16, GC_SUM, BC, 0);
    c[0].root = i % n;
    c[1] = seq_call(SEQ_AR, GC_FLOAT32, GC_SUM, AR, 0);
    c[2] = seq_call(SEQ_AG, GC_BFLOAT16, GC_SUM, AG, 0);
    c[3] = seq_call(SEQ_RS, GC_FLOAT32, GC_SUM, RS, 0);
    for (int k = 0; k < EACH; k++) {
      c[k].algo = GC_ALGO_WRITES;
      seq_prepare(&c[k]);
    }
  }
  CU_ASSERT(seq_run(calls, ncalls) == ncalls);
  free(calls);
}

/* The smallest staging area (64 KB) on the copy-engine pipelines through inboxes: inbox rows of
 * 4 KB up to 5 GPUs (many chunks per call), under 4 KB from 6. There a forced call is refused by
 * name, and a row that names the copy engines falls back: the reduce-scatter to the one-shot, the
 * all-reduce into plain outputs to the two-shot by writes. Tuned rows stand in for the table's
 * (neither is an explicit choice, so both fall back). */
static int ce_tiny_staging_cases(void) {
  int lsize = 0;
  GC_TEST_OK(gc_comm_local_size(gc_test_comm, &lsize));
  const int fits = lsize <= 5;
  CU_ASSERT_EQUAL(gc__ce_inbox_fits(gc_test_comm), fits);
  const seq_call_t rs_sym = seq_call(SEQ_RS, GC_FLOAT32, GC_SUM, 70001, 1);
  const seq_call_t rs_plain = seq_call(SEQ_RS, GC_BFLOAT16, GC_MAX, 262147, 0);
  const seq_call_t ar_plain = seq_call(SEQ_AR, GC_BFLOAT16, GC_SUM, 1000003, 0);
  const seq_call_t ar_small = seq_call(SEQ_AR, GC_FLOAT32, GC_AVG, 1021, 0);
  enum { FORCED = 3, TUNED = 4 };
  seq_call_t calls[FORCED + TUNED] = {rs_sym, rs_plain, ar_plain, rs_sym, rs_plain, ar_plain, ar_small};
  for (int i = 0; i < FORCED; i++) {
    calls[i].algo = GC_ALGO_COPYENGINE;
    seq_prepare(&calls[i]);
  }
  int bad = seq_run(calls, FORCED) != (fits ? FORCED : 0);
  for (int i = 0; i < FORCED; i++) {
    CU_ASSERT_EQUAL(calls[i].rc, fits ? GC_SUCCESS : GC_ERR_UNSUPPORTED);
    if (!fits) CU_ASSERT_PTR_NOT_NULL(strstr(calls[i].why, "GC_STAGING_BYTES"));
  }
  char path[256];
  gc_test_tmp_path(path, sizeof path, "ce-rows.tune");
  if (gc_test_rank == 0) {
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "gpus %d\nallreduce any copyengine\nreducescatter any copyengine\n", lsize);
    CU_ASSERT_EQUAL(fclose(f), 0);
  }
  GC_TEST_OK(gc_tune_load(gc_test_comm, path));
  for (int i = FORCED; i < FORCED + TUNED; i++) seq_prepare(&calls[i]); /* algo AUTO: the rows' */
  bad += seq_run(calls + FORCED, TUNED) != TUNED;
  GC_TEST_OK(gc_tune_reset(gc_test_comm));
  MPI_Barrier(MPI_COMM_WORLD);
  if (gc_test_rank == 0) remove(path);
  return bad;
}

static void test_ce_tiny_staging(void) {
  if (!gc_test_peer_gpus("copy engines on 64 KB of staging", 2)) return;
  CU_ASSERT_EQUAL(on_comm(ce_tiny_staging_cases, 65536, -1), 0);
}

/* An LL broadcast of float16 data with all-ones elements (a NaN) among others: they arrive as
 * 0x7FFF on every rank, root included (root once kept its 0xFFFF), in place and not; every other
 * element, NaNs of other bits too, arrives as it was. */
static int ll_broadcast_all_ones(int root, int in_place) {
  enum { N = 1031 };
  uint16_t want[N], got[N + GUARD / 2]; /* the guard bytes after the output come back too */
  for (size_t i = 0; i < N; i++) want[i] = i % 3 ? (uint16_t)(i * 40503u) : 0xFFFFu;
  uint16_t *send = gc_test_alloc(sizeof want), *recv = in_place ? send : gc_test_alloc(sizeof want + GUARD);
  gc_test_upload(send, want, sizeof want);
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_ONESHOT_LL;
  int ok = finished(gc_broadcast_ex(send, recv, N, GC_FLOAT16, root, gc_test_comm, NULL, &o), "LL broadcast of all-ones");
  if (ok) ok = gc_test_fetch_checked(got, recv, sizeof want, !in_place, "LL broadcast of all-ones");
  for (size_t i = 0; ok && i < N; i++)
    if (got[i] != (want[i] == 0xFFFFu ? 0x7FFFu : want[i])) {
      fprintf(stderr, "[rank %d] LL broadcast from %d%s: element %zu is 0x%04x, sent 0x%04x\n", gc_test_rank, root,
              in_place ? " in place" : "", i, got[i], want[i]);
      ok = 0;
    }
  ok = gc_test_all(ok) && gc_test_same_on_all_ranks(got, sizeof want);
  if (!in_place) gc_test_free(recv);
  gc_test_free(send);
  return ok;
}

static void test_ll(void) {
  if (!gc_test_peer_gpus("LL collectives", 2)) return;
  mode_algo = GC_ALGO_ONESHOT_LL;
  int bad = 0;
  static const gc_dtype_t floats[] = {GC_FLOAT32, GC_FLOAT16, GC_BFLOAT16};
  static const size_t counts[] = {1, 3, 1021, 65537};
  for (size_t d = 0; d < sizeof floats / sizeof floats[0]; d++)
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
      for (int ip = 0; ip < 2; ip++) {
        rs_case_t c = rs1(floats[d], ip ? GC_MAX : GC_SUM, counts[k], ip);
        bad += !run_rs(&c);
        bad += !run_ag(floats[d], counts[k], ip);
      }
  rs_case_t e = rs1(GC_BFLOAT16, GC_AVG, 4099, 0);
  e.scale = 0.5;
  e.with_add = 1;
  e.out_dtype = GC_FP8_E4M3;
  bad += !run_rs(&e);
  rs_case_t rows = {GC_FLOAT16, GC_DTYPE_SAME, GC_PROD, 1, 0, 37, 129, 1, 1.0, 0}; /* axis 0, uneven, in place */
  bad += !run_rs(&rows);
  bad += !run_ag(GC_FP8_E5M2, 4097, 1);
  /* Broadcast: every root; direct below the ll_relay_bytes switch (512 KB by default), through owners
   * from there on 3+ GPUs (131075 bf16: a last pack cut short); unaligned; more than one
   * generation (8 MB) in chunks, the last one short. */
  for (int root = 0; root < gc_test_size; root++) {
    bad += !run_bc(GC_BFLOAT16, 1021, root, root & 1);
    bad += !run_bc(GC_FP8_E4M3, 65537, root, 0);
    bad += !run_bc(GC_BFLOAT16, 131075, root, 0);
    bad += !run_bc(GC_FLOAT32, 1000003, root, root & 1);
    unaligned_by = 2;
    bad += !run_bc(GC_FLOAT16, 7777, root, 1);
    bad += !run_bc(GC_FLOAT16, 300001, root, 0);
    bad += !run_bc(GC_BFLOAT16, 9437189, root, root & 1);
    unaligned_by = 0;
  }
  bad += !broadcasts_queued(GC_ALGO_ONESHOT_LL);
  for (int root = 0; root < gc_test_size; root++) bad += !ll_broadcast_all_ones(root, 0) + !ll_broadcast_all_ones(root, 1);
  /* What LL cannot carry is refused by name: integers, column blocks, an all-gather of more than
   * a generation. */
  void *send = gc_test_alloc((size_t)16 << 20), *recv = gc_test_alloc((size_t)16 << 20);
  gc_options_t o = GC_OPTIONS_INIT;
  o.algo = GC_ALGO_ONESHOT_LL;
  CU_ASSERT_EQUAL(gc_allgather_ex(send, recv, 16, GC_INT32, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "float16"));
  CU_ASSERT_EQUAL(gc_reducescatter_2d(send, recv, 8, 8, 1, GC_FLOAT32, GC_SUM, gc_test_comm, NULL, &o),
                  GC_ERR_UNSUPPORTED);
  /* ... and a part left empty (fewer rows than ranks): its rank would wait for nobody */
  CU_ASSERT_EQUAL(gc_reducescatter_2d(send, recv, (size_t)gc_test_size - 1, 8, 0, GC_FLOAT32, GC_SUM, gc_test_comm,
                                      NULL, &o),
                  GC_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gc_comm_last_error(gc_test_comm), "none empty"));
  CU_ASSERT_EQUAL(gc_broadcast_ex(send, recv, 1024, GC_INT64, 0, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
  CU_ASSERT_EQUAL(gc_allgather_ex(send, recv, (size_t)3 << 20, GC_FLOAT32, gc_test_comm, NULL, &o), GC_ERR_UNSUPPORTED);
  gc_test_free(send);
  gc_test_free(recv);
  mode_algo = GC_ALGO_AUTO;
  CU_ASSERT_EQUAL(bad, 0);
}

void gc_test_suite_collectives(void) {
  static const gc_test_case_t tests[] = {{"reduce-scatter 1-D", test_rs_1d},
                                         {"reduce-scatter epilogue", test_rs_epilogue},
                                         {"reduce-scatter 2-D, both axes, uneven", test_rs_2d},
                                         {"reduce-scatter 2-D epilogue", test_rs_2d_epilogue},
                                         {"reduce-scatter bits equal all-reduce bits", test_rs_matches_allreduce},
                                         {"reduce-scatter with empty parts, queued", test_rs_empty_parts_queued},
                                         {"reduce-scatter by columns: exact int64, the add anywhere", test_rs_columns_exact_add_anywhere},
                                         {"all-gather", test_allgather},
                                         {"broadcast", test_broadcast},
                                         {"copy-engine path", test_copyengine},
                                         {"broadcast and all-gather by writes", test_bywrites_rings},
                                         {"reduce-scatter by writes", test_rs_bywrites},
                                         {"calls after rings through staging", test_after_rings},
                                         {"random sequences of calls", test_random_sequences},
                                         {"copy engines on 64 KB of staging", test_ce_tiny_staging},
                                         {"barrier-free one-shot (LL)", test_ll},
                                         {NULL, NULL}};
  gc_test_add_suite("collectives", tests);
}
