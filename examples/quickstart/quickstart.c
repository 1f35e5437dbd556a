/* quickstart.c — an all-reduce on every rank's GPU, or on host buffers where there is none. */
#include <stdio.h>
#include <gpucoll.h>
#define CHECK(call) do { gc_result_t r_ = (call); if (r_ != GC_SUCCESS) { \
    fprintf(stderr, "%s: %s\n", #call, gc_comm_last_error(comm)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  gc_comm_t comm = NULL;
  CHECK(gc_comm_init(&comm, MPI_COMM_WORLD, NULL));   /* collective; one rank per GPU */
  int rank, size, device;
  CHECK(gc_comm_rank(comm, &rank)); CHECK(gc_comm_size(comm, &size)); CHECK(gc_comm_device(comm, &device));
  float x[4] = {1, 2, 3, 4};
  void *buf, *stream;
  CHECK(gc_buffer_alloc(comm, sizeof x, device >= 0, &buf));   /* device memory, or host without a GPU */
  CHECK(gc_comm_stream(comm, &stream));
  CHECK(gc_memcpy(comm, buf, x, sizeof x));
  CHECK(gc_allreduce(buf, buf, 4, GC_FLOAT32, GC_SUM, comm, stream));   /* in place */
  CHECK(gc_synchronize(comm, stream));
  CHECK(gc_memcpy(comm, x, buf, sizeof x));
  if (rank == 0) printf("sum over %d ranks: %g %g %g %g\n", size, x[0], x[1], x[2], x[3]);
  CHECK(gc_buffer_free(comm, buf));
  CHECK(gc_comm_destroy(comm));
  MPI_Finalize();
  return x[3] != 4.0f * size;
}
