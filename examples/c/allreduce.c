/* allreduce.c — the smallest MPI program that uses gpucoll: every rank contributes rank + i, the
 * sum lands on every rank, and the program checks it. Runs on GPUs, or on host buffers without. */
#include <stdio.h>
#include <stdlib.h>

#include <gpucoll.h>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    gc_result_t r_ = (call);                                                              \
    if (r_ != GC_SUCCESS) {                                                               \
      fprintf(stderr, "%s: %s\n  %s\n", #call, gc_strerror(r_), gc_comm_last_error(comm)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                       \
    }                                                                                     \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  gc_comm_t comm = NULL;
  CHECK(gc_comm_init(&comm, MPI_COMM_WORLD, NULL));
  int rank, size, device;
  CHECK(gc_comm_rank(comm, &rank));
  CHECK(gc_comm_size(comm, &size));
  CHECK(gc_comm_device(comm, &device));

  enum { N = 1 << 20 };
  float *host = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) host[i] = (float)(rank + i % 1000);
  /* On a GPU rank the data goes to device memory; gc_buffer_alloc gives host memory otherwise. */
  void *buf = NULL, *stream = NULL;
  CHECK(gc_buffer_alloc(comm, N * sizeof(float), device >= 0, &buf));
  CHECK(gc_comm_stream(comm, &stream));
  CHECK(gc_memcpy(comm, buf, host, N * sizeof(float)));
  CHECK(gc_allreduce(buf, buf, N, GC_FLOAT32, GC_SUM, comm, stream)); /* in place */
  CHECK(gc_synchronize(comm, stream));
  CHECK(gc_memcpy(comm, host, buf, N * sizeof(float)));

  long wrong = 0;
  for (int i = 0; i < N; i++)
    wrong += host[i] != (float)(size * (i % 1000) + size * (size - 1) / 2);
  if (rank == 0)
    printf("gpucoll %s: all-reduce of %d floats on %d ranks (%s): %ld wrong\n", gc_get_version(), N, size,
           device >= 0 ? "GPUs" : "host buffers", wrong);
  CHECK(gc_buffer_free(comm, buf));
  free(host);
  CHECK(gc_comm_destroy(comm));
  MPI_Finalize();
  return wrong != 0;
}
