/* memory.c — local buffers, blocking copies, the random fill, and pointer classification. */
#include <stdlib.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_rng.h"
#include "kernels.h"

gc__ptr_kind_t gc__ptr_kind(gc_comm_t comm, const void *ptr) {
  if (comm->device < 0 || ptr == NULL) return GC_PTR_HOST;
  struct cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return GC_PTR_HOST;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged)
    return attr.device == comm->device ? GC_PTR_DEVICE_OWN : GC_PTR_DEVICE_OTHER;
  return GC_PTR_HOST;
}

static cudaError_t owned_memory_free(gc__owned_kind_t kind, void *p) {
  if (kind == GC_OWNED_MALLOC) {
    free(p);
    return cudaSuccess;
  }
  return kind == GC_OWNED_DEVICE ? cudaFree(p) : cudaFreeHost(p);
}

static gc_result_t buffer_alloc_impl(gc_comm_t comm, size_t bytes, int on_device, void **out) {
  GC_CHECK(gc__comm_check(comm));
  if (!out) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_buffer_alloc: out is NULL");
  if (bytes == 0) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_buffer_alloc: bytes is 0");
  if (bytes > GC_MAX_ALLOC_BYTES)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_buffer_alloc: %zu bytes is more than any machine holds", bytes);
  void *p = NULL;
  gc__owned_kind_t kind = comm->device < 0 ? GC_OWNED_MALLOC : on_device ? GC_OWNED_DEVICE : GC_OWNED_PINNED;
  if (kind == GC_OWNED_MALLOC) {
    if (on_device) return GC_FAIL(comm, GC_ERR_UNSUPPORTED, "gc_buffer_alloc: this rank has no GPU");
    p = malloc(bytes);
    if (!p) return GC_FAIL(comm, GC_ERR_SYSTEM, "gc_buffer_alloc: malloc(%zu) failed", bytes);
  } else if (kind == GC_OWNED_DEVICE) {
    GC_CUDA_CHECK(comm, cudaMalloc(&p, gc__whole_pages(bytes)));
  } else {
    GC_CUDA_CHECK(comm, cudaMallocHost(&p, bytes));
  }
  gc__owned_t *o = malloc(sizeof *o);
  if (!o) {
    owned_memory_free(kind, p);
    return GC_FAIL(comm, GC_ERR_SYSTEM, "gc_buffer_alloc: out of host memory");
  }
  *o = (gc__owned_t){.next = comm->owned, .ptr = p, .kind = kind}; /* freed by gc_buffer_free or gc_comm_destroy */
  comm->owned = o;
  *out = p;
  return GC_SUCCESS;
}

gc_result_t gc_buffer_alloc(gc_comm_t comm, size_t bytes, int on_device, void **out) {
  GC_ON_DEVICE(comm, buffer_alloc_impl(comm, bytes, on_device, out));
}

static gc_result_t buffer_free_impl(gc_comm_t comm, void *ptr) {
  GC_CHECK(gc__comm_check(comm));
  if (!ptr) return GC_SUCCESS;
  gc__owned_t **link = &comm->owned;
  while (*link && (*link)->ptr != ptr) link = &(*link)->next;
  if (!*link)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_buffer_free: %p was not made by gc_buffer_alloc on this "
                   "communicator (or was freed already)", ptr);
  gc__owned_t o = **link;
  /* cudaFree and cudaFreeHost wait for the whole device: wait here first, bounded. */
  if (o.kind != GC_OWNED_MALLOC) GC_CHECK(gc__device_wait(comm, "gc_buffer_free"));
  free(*link);
  *link = o.next;
  GC_CUDA_CHECK(comm, owned_memory_free(o.kind, o.ptr));
  return GC_SUCCESS;
}

void gc__owned_release_all(gc_comm_t comm) {
  while (comm->owned) {
    gc__owned_t *o = comm->owned;
    comm->owned = o->next;
    (void)owned_memory_free(o->kind, o->ptr);
    free(o);
  }
}

gc_result_t gc_buffer_free(gc_comm_t comm, void *ptr) {
  GC_ON_DEVICE(comm, buffer_free_impl(comm, ptr));
}

static gc_result_t memcpy_impl(gc_comm_t comm, void *dst, const void *src, size_t bytes) {
  GC_CHECK(gc__comm_check(comm));
  if (bytes == 0) return GC_SUCCESS;
  if (!dst || !src) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_memcpy: NULL pointer");
  if (comm->device < 0) {
    memmove(dst, src, bytes);
    return GC_SUCCESS;
  }
  /* First the work before it: a copy to pageable memory would wait for it inside the driver. */
  GC_CHECK(gc__stream_wait(comm, comm->stream, "gc_memcpy"));
  GC_CUDA_CHECK(comm, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, comm->stream));
  GC_CHECK(gc__stream_wait(comm, comm->stream, "gc_memcpy"));
  return GC_SUCCESS;
}

gc_result_t gc_memcpy(gc_comm_t comm, void *dst, const void *src, size_t bytes) {
  GC_ON_DEVICE(comm, memcpy_impl(comm, dst, src, bytes));
}

static gc_result_t fill_random_impl(gc_comm_t comm, void *buf, size_t count, gc_dtype_t dtype, uint64_t seed) {
  GC_CHECK(gc__comm_check(comm));
  if (!gc__dtype_valid(dtype)) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_fill_random: bad dtype %d", (int)dtype);
  if (count == 0) return GC_SUCCESS;
  if (!buf) return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_fill_random: buf is NULL");
  gc__ptr_kind_t kind = gc__ptr_kind(comm, buf);
  if (kind == GC_PTR_DEVICE_OTHER)
    return GC_FAIL(comm, GC_ERR_INVALID_ARGUMENT, "gc_fill_random: %p is memory of another GPU", buf);
  if (kind == GC_PTR_DEVICE_OWN) {
    GC_CUDA_CHECK(comm, (cudaError_t)gc_kernel_fill_random(buf, count, dtype, seed, comm->stream));
    GC_CHECK(gc__stream_wait(comm, comm->stream, "gc_fill_random"));
    return GC_SUCCESS;
  }
  for (size_t i = 0; i < count; i++) gc__store_double(buf, i, dtype, gc__random_value(seed, i, dtype));
  return GC_SUCCESS;
}

gc_result_t gc_fill_random(gc_comm_t comm, void *buf, size_t count, gc_dtype_t dtype, uint64_t seed) {
  GC_ON_DEVICE(comm, fill_random_impl(comm, buf, count, dtype, seed));
}
