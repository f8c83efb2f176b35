/* rt/device.c: tensors whose memory the library owns, on the CPU or on the
 * context's GPU, copies between them in any direction, and waiting for the
 * context's GPU work (the public uj_tensor_alloc, uj_tensor_free,
 * uj_tensor_copy, uj_ctx_synchronize, uj_ctx_device).
 *
 * Every argument is checked before anything is allocated or written, so a
 * failing call leaves the caller's tensors as they were. Host memory is
 * 64-byte aligned (a cache line, and enough for any vector load); device
 * memory comes from cuMemAlloc (256-byte aligned), which the CUDA kernels'
 * 16-byte vector paths rely on for whole tensors. */
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "rt.h"

static const char* device_name(uj_device_t d) { return d == UJ_CPU ? "cpu" : d == UJ_CUDA ? "cuda" : "?"; }

uj_status_t uj_tensor_alloc(uj_ctx_t* ctx, uj_device_t device, uj_dtype_t dtype, int ndim, const int64_t* dims,
                            uj_tensor_t* out) {
  if (!ctx || !out) return rt_error(UJ_ERR_INVALID, "uj_tensor_alloc: ctx and out must not be NULL");
  if (device != UJ_CPU && device != UJ_CUDA)
    return rt_error(UJ_ERR_INVALID, "uj_tensor_alloc: unknown device %d", (int)device);
  if (uj_dtype_size(dtype) == 0) return rt_error(UJ_ERR_INVALID, "uj_tensor_alloc: unknown dtype %d", (int)dtype);
  if (ndim < 0 || ndim > UJ_MAX_DIMS)
    return rt_error(UJ_ERR_SHAPE, "uj_tensor_alloc: rank %d is out of range 0..%d", ndim, UJ_MAX_DIMS);
  if (ndim > 0 && !dims) return rt_error(UJ_ERR_INVALID, "uj_tensor_alloc: dims is NULL for rank %d", ndim);
  int64_t numel, bytes;
  uj_status_t s = rt_numel("uj_tensor_alloc", ndim, dims, &numel);
  if (s != UJ_OK) return s;
  if (!rt_mul_i64(numel, uj_dtype_size(dtype), &bytes) || (uint64_t)bytes > (uint64_t)SIZE_MAX / 2)
    return rt_error(UJ_ERR_SHAPE, "uj_tensor_alloc: %lld elements of %s are too many bytes", (long long)numel,
                    uj_dtype_name(dtype));
  void* data = NULL;
  if (device == UJ_CPU) {
    /* rounded up to the alignment, and never 0 bytes, so data is never NULL */
    size_t n = ((size_t)bytes + 63) / 64 * 64;
    if (posix_memalign(&data, 64, n ? n : 64) != 0)
      return rt_error(UJ_ERR_OOM, "uj_tensor_alloc: out of memory for %lld bytes", (long long)bytes);
  } else {
    rt_cuda_ctx_t* c;
    if ((s = rt_cuda_ctx_get(ctx, &c)) != UJ_OK) return s;
    if ((s = rt_cuda_alloc(c, (size_t)bytes, &data)) != UJ_OK) {
      rt_error_prefix("uj_tensor_alloc (%lld bytes on the GPU): ", (long long)bytes);
      return s;
    }
  }
  memset(out, 0, sizeof *out);
  out->data = data;
  out->dtype = dtype;
  out->device = device;
  out->ndim = ndim;
  for (int k = 0; k < ndim; k++) out->dims[k] = dims[k];
  return UJ_OK;
}

uj_status_t uj_tensor_free(uj_ctx_t* ctx, uj_tensor_t* t) {
  if (!t || !t->data) return UJ_OK;
  if (t->device == UJ_CPU) {
    free(t->data);
  } else if (t->device == UJ_CUDA) {
    if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_tensor_free: a GPU tensor needs its context (ctx is NULL)");
    rt_cuda_ctx_t* c;
    uj_status_t s = rt_cuda_ctx_get(ctx, &c);
    if (s == UJ_OK) s = rt_cuda_free(c, t->data);
    if (s != UJ_OK) return s;
  } else {
    return rt_error(UJ_ERR_INVALID, "uj_tensor_free: unknown device %d", (int)t->device);
  }
  t->data = NULL;
  return UJ_OK;
}

uj_status_t uj_tensor_copy(uj_ctx_t* ctx, uj_tensor_t* dst, const uj_tensor_t* src) {
  if (!ctx || !dst || !src) return rt_error(UJ_ERR_INVALID, "uj_tensor_copy: ctx, dst and src must not be NULL");
  /* src's own description must be sound; dst must match it except for the device */
  uj_status_t s = rt_tensor_check_on("uj_tensor_copy: src", src, src->device, src->ndim, src->dtype, NULL);
  if (s != UJ_OK) return s;
  if (dst->device != UJ_CPU && dst->device != UJ_CUDA)
    return rt_error(UJ_ERR_INVALID, "uj_tensor_copy: dst: unknown device %d", (int)dst->device);
  if (dst->dtype != src->dtype)
    return rt_error(UJ_ERR_INVALID, "uj_tensor_copy: dst has dtype %s, src %s", uj_dtype_name(dst->dtype),
                    uj_dtype_name(src->dtype));
  if ((s = rt_tensor_check_on("uj_tensor_copy: dst", dst, dst->device, src->ndim, src->dtype, src->dims)) != UJ_OK)
    return s;
  int64_t numel;
  if ((s = rt_numel("uj_tensor_copy", src->ndim, src->dims, &numel)) != UJ_OK) return s;
  size_t bytes = (size_t)numel * (size_t)uj_dtype_size(src->dtype);
  if (bytes == 0) return UJ_OK;
  if (dst->device == UJ_CPU && src->device == UJ_CPU) {
    memmove(dst->data, src->data, bytes);
    return UJ_OK;
  }
  if (dst->device == UJ_CUDA && src->device == UJ_CUDA) {
    const char *d = dst->data, *from = src->data;
    if (d == from) return UJ_OK;
    if (d < from + bytes && from < d + bytes)
      return rt_error(UJ_ERR_INVALID, "uj_tensor_copy: dst and src overlap on the GPU without being the same memory");
  }
  rt_cuda_ctx_t* c;
  if ((s = rt_cuda_ctx_get(ctx, &c)) != UJ_OK) return s;
  s = rt_cuda_copy(c, dst->data, dst->device == UJ_CUDA, src->data, src->device == UJ_CUDA, bytes);
  if (s != UJ_OK)
    rt_error_prefix("uj_tensor_copy (%s to %s, %zu bytes): ", device_name(src->device), device_name(dst->device),
                    bytes);
  return s;
}

uj_status_t uj_ctx_synchronize(uj_ctx_t* ctx) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_synchronize: ctx is NULL");
  rt_cuda_ctx_t* c = __atomic_load_n(&ctx->cuda, __ATOMIC_ACQUIRE);
  return c ? rt_cuda_sync(c) : UJ_OK; /* nothing was ever queued */
}

uj_status_t uj_ctx_device(uj_ctx_t* ctx, char* name, size_t name_cap, int* arch, int* multiprocessors) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_device: ctx is NULL");
  rt_cuda_ctx_t* c;
  uj_status_t s = rt_cuda_ctx_get(ctx, &c);
  if (s != UJ_OK) return s;
  const char* n;
  int major, minor, sms;
  rt_cuda_describe(c, &n, &major, &minor, &sms);
  if (name && name_cap) {
    size_t len = strlen(n);
    if (len >= name_cap) len = name_cap - 1;
    memcpy(name, n, len);
    name[len] = 0;
  }
  if (arch) *arch = 10 * major + minor;
  if (multiprocessors) *multiprocessors = sms;
  return UJ_OK;
}
