/* rt/tensor.c: checks on the tensors callers hand to the library, and the
 * overflow-safe size arithmetic those checks and the runtime share.
 *
 * The library promises never to abort on bad input and to leave caller
 * buffers untouched when a call fails, so every caller tensor goes through
 * rt_tensor_check before anything reads or writes it. Messages name the
 * tensor, the axis and the expected vs actual value, because a shape error
 * far from where the shape was built is otherwise hard to place. */
#include <stdint.h>

#include "rt.h"

int uj_dtype_size(uj_dtype_t dtype) {
  switch (dtype) {
    case UJ_F32: return 4;
    case UJ_F64: return 8;
    case UJ_I32: return 4;
    case UJ_BF16:
    case UJ_F16: return 2;
  }
  return 0;
}

const char* uj_dtype_name(uj_dtype_t dtype) {
  switch (dtype) {
    case UJ_F32: return "f32";
    case UJ_F64: return "f64";
    case UJ_I32: return "i32";
    case UJ_BF16: return "bf16";
    case UJ_F16: return "f16";
  }
  return "?";
}

int rt_mul_i64(int64_t a, int64_t b, int64_t* out) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return 0;
  *out = r;
  return 1;
}

uj_status_t rt_numel(const char* what, int ndim, const int64_t* dims, int64_t* out) {
  if (ndim < 0 || ndim > UJ_MAX_DIMS)
    return rt_error(UJ_ERR_SHAPE, "%s: rank %d is out of range 0..%d", what, ndim, UJ_MAX_DIMS);
  /* Check every size for a negative value before multiplying, so that the
   * message names the bad axis rather than a confusing overflow. */
  for (int k = 0; k < ndim; k++)
    if (dims[k] < 0)
      return rt_error(UJ_ERR_SHAPE, "%s: axis %d has negative size %lld", what, k,
                      (long long)dims[k]);
  /* An empty tensor holds nothing, but its other sizes still multiply
   * into strides, loop work and offsets: their product, zeros left out,
   * must fit too ({0, INT64_MAX, INT64_MAX} is refused). */
  int64_t n = 1;
  int empty = 0;
  for (int k = 0; k < ndim; k++) empty |= dims[k] == 0;
  for (int k = 0; k < ndim; k++) {
    if (dims[k] == 0) continue;
    if (!rt_mul_i64(n, dims[k], &n))
      return rt_error(UJ_ERR_SHAPE, "%s: the product of its sizes%s overflows int64 (at axis %d)", what,
                      empty ? " (zeros left out)" : "", k);
  }
  *out = empty ? 0 : n;
  return UJ_OK;
}

/* 1 when the tensor passes every check of rt_tensor_check: the fast path
 * of a call, which must not pay for formatting a name it will not print. */
int rt_tensor_ok_on(const uj_tensor_t* t, uj_device_t device, int ndim, uj_dtype_t dtype, const int64_t* dims) {
  if (!t || t->device != device || t->ndim != ndim || ndim < 0 || ndim > UJ_MAX_DIMS || t->dtype != dtype ||
      uj_dtype_size(dtype) == 0)
    return 0;
  /* bytes with zeros left out: see rt_numel */
  int64_t bytes = uj_dtype_size(dtype), empty = 0;
  for (int k = 0; k < ndim; k++) {
    if (t->dims[k] < 0 || (dims && t->dims[k] != dims[k])) return 0;
    empty |= t->dims[k] == 0;
    if (t->dims[k] && !rt_mul_i64(bytes, t->dims[k], &bytes)) return 0;
  }
  return empty || t->data != NULL;
}

int rt_tensor_ok(const uj_tensor_t* t, int ndim, uj_dtype_t dtype, const int64_t* dims) {
  return rt_tensor_ok_on(t, UJ_CPU, ndim, dtype, dims);
}

uj_status_t rt_tensor_check(const char* what, const uj_tensor_t* t, int ndim, uj_dtype_t dtype,
                            const int64_t* dims) {
  return rt_tensor_check_on(what, t, UJ_CPU, ndim, dtype, dims);
}

uj_status_t rt_tensor_check_on(const char* what, const uj_tensor_t* t, uj_device_t device, int ndim,
                               uj_dtype_t dtype, const int64_t* dims) {
  if (!t) return rt_error(UJ_ERR_INVALID, "%s: NULL tensor", what);
  if (t->ndim < 0 || t->ndim > UJ_MAX_DIMS)
    return rt_error(UJ_ERR_SHAPE, "%s: rank %d is out of range 0..%d", what, t->ndim,
                    UJ_MAX_DIMS);
  if (t->device != UJ_CPU && t->device != UJ_CUDA)
    return rt_error(UJ_ERR_INVALID, "%s: unknown device %d", what, (int)t->device);
  if (t->device == UJ_CUDA && device == UJ_CPU)
    return rt_error(UJ_ERR_UNSUPPORTED, "%s: is on the GPU; this engine runs on the CPU", what);
  if (t->device == UJ_CPU && device == UJ_CUDA)
    return rt_error(UJ_ERR_UNSUPPORTED, "%s: is in host memory; the cuda engine runs on the GPU", what);
  if (t->ndim != ndim)
    return rt_error(UJ_ERR_SHAPE, "%s: expected rank %d, got %d", what, ndim, t->ndim);
  if (t->dtype != dtype) {
    if (uj_dtype_size(t->dtype) == 0)
      return rt_error(UJ_ERR_INVALID, "%s: unknown dtype %d, expected %s", what, (int)t->dtype,
                      uj_dtype_name(dtype));
    return rt_error(UJ_ERR_INVALID, "%s: dtype %s, expected %s", what, uj_dtype_name(t->dtype),
                    uj_dtype_name(dtype));
  }
  int64_t numel;
  uj_status_t s = rt_numel(what, t->ndim, t->dims, &numel);
  if (s != UJ_OK) return s;
  /* The byte count must be representable too: kernels index bytes (of an
   * empty tensor too, its sizes with zeros left out: see rt_numel). */
  int64_t bytes = uj_dtype_size(t->dtype);
  for (int k = 0; k < t->ndim; k++)
    if (t->dims[k] && !rt_mul_i64(bytes, t->dims[k], &bytes))
      return rt_error(UJ_ERR_SHAPE, "%s: axis %d: its sizes%s times %d bytes of %s overflow int64", what, k,
                      numel ? "" : " (zeros left out)", uj_dtype_size(t->dtype), uj_dtype_name(t->dtype));
  if (dims) {
    for (int k = 0; k < ndim; k++)
      if (t->dims[k] != dims[k])
        return rt_error(UJ_ERR_SHAPE, "%s: axis %d has size %lld, expected %lld", what, k,
                        (long long)t->dims[k], (long long)dims[k]);
  }
  if (!t->data && numel > 0)
    return rt_error(UJ_ERR_INVALID, "%s: data is NULL but it holds %lld elements", what,
                    (long long)numel);
  return UJ_OK;
}
