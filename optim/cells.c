/* optim/cells.c: the small values a step binds besides the caller's tensors
 * (step scalars, per-group sums, the gradient pass's sums) kept in one host
 * block, mirrored by one block on the GPU when the step's tensors are there.
 *
 * uj_program_run_groups wants every tensor of a call on one device, scalars
 * included. So a step on GPU tensors allocates one device block per step
 * (stream-ordered: freeing it waits for nothing), uploads the scalars in
 * one copy that does not wait for the stream either (rt_cuda_upload, from
 * a copy of the block it frees once copied), and reads back only what the
 * host must see (the per-group sums LAMB's [apply] reads, the gradient pass's
 * found-inf and norm sums: a few values per group), each in one copy. The
 * tensors a pass binds are views at the same offsets in whichever block
 * the step runs on; on the CPU syncing is nothing. Regions are multiples
 * of 8 bytes at offsets that are too, so a copy is one f64 1-D view. */
#include <stdlib.h>
#include <string.h>

#include "../rt/cuda.h"
#include "../rt/rt.h"
#include "optim.h"

size_t optim_cells_round(size_t bytes) { return (bytes + 7) / 8 * 8; }

uj_status_t optim_cells_make(uj_ctx_t* ctx, uj_device_t device, size_t bytes, optim_cells_t* c) {
  memset(c, 0, sizeof *c);
  c->ctx = ctx, c->device = device, c->bytes = optim_cells_round(bytes ? bytes : 8);
  if (!(c->host = calloc(c->bytes, 1)))
    return rt_error(UJ_ERR_OOM, "out of memory for the step's scalars (%zu bytes)", c->bytes);
  if (device == UJ_CPU) return UJ_OK;
  rt_cuda_ctx_t* cc = NULL;
  uj_status_t s = rt_cuda_ctx_get(ctx, &cc);
  void* mirror = NULL;
  if (s == UJ_OK) s = rt_cuda_alloc_temp(cc, c->bytes, &mirror);
  c->mirror = (uj_tensor_t){mirror, UJ_F64, device, 1, {(int64_t)(c->bytes / 8)}};
  if (s != UJ_OK) {
    rt_error_prefix("the step's scalars on the GPU (%zu bytes): ", c->bytes);
    free(c->host), c->host = NULL;
  }
  return s;
}

void optim_cells_release(optim_cells_t* c) {
  rt_cuda_ctx_t* cc = NULL;
  if (c->mirror.data && rt_cuda_ctx_get(c->ctx, &cc) == UJ_OK) rt_cuda_free_temp(cc, c->mirror.data);
  free(c->host);
  memset(c, 0, sizeof *c);
}

uj_tensor_t optim_cells_tensor(const optim_cells_t* c, const void* host_cell, uj_dtype_t dtype, int ndim) {
  size_t offset = (size_t)((const char*)host_cell - c->host);
  void* data = c->device == UJ_CPU ? (void*)host_cell : (char*)c->mirror.data + offset;
  uj_tensor_t t = {data, dtype, c->device, ndim, {0}};
  for (int a = 0; a < ndim; a++) t.dims[a] = 1;
  return t;
}

uj_status_t optim_cells_sync(optim_cells_t* c, size_t offset, size_t bytes, int to_device) {
  if (c->device == UJ_CPU || bytes == 0) return UJ_OK;
  uj_tensor_t host = {c->host + offset, UJ_F64, UJ_CPU, 1, {(int64_t)(bytes / 8)}};
  uj_tensor_t dev = {(char*)c->mirror.data + offset, UJ_F64, c->device, 1, {(int64_t)(bytes / 8)}};
  rt_cuda_ctx_t* cc = NULL;
  uj_status_t s = to_device ? rt_cuda_ctx_get(c->ctx, &cc) : uj_tensor_copy(c->ctx, &host, &dev);
  if (s == UJ_OK && to_device) {
    /* a copy, for the upload to free once copied: the block is rewritten next step */
    void* copy = malloc(bytes);
    if (!copy) return rt_error(UJ_ERR_OOM, "out of memory staging %zu bytes of step scalars", bytes);
    memcpy(copy, host.data, bytes);
    s = rt_cuda_upload(cc, dev.data, copy, bytes);
  }
  if (s != UJ_OK) rt_error_prefix("copying %zu bytes of step scalars %s the GPU: ", bytes, to_device ? "to" : "from");
  return s;
}
