/* jit/blocks.c: runs a compiled function, whatever engine compiled it.
 *
 * Every engine compiles a block to the same calling convention
 * (jit_block_fn: buffers, sizes, params, and the [begin, end) range of the
 * outermost loop), so one runner serves them all: it evaluates each block's
 * outermost range, then either calls the block once or, when the outermost
 * loop's iterations are independent and there is enough work, hands slices
 * of the range to the context's thread pool. A reduction carried by the
 * outermost loop makes the block not parallel, so it stays correct. A block
 * compiled in strips (jit_strips_t) is run strip by strip over whatever
 * range it is given, with the square roots taken here in between. */
#include <stdlib.h>

#include "jit.h"

uj_status_t jit_blocks_init(jit_blocks_t* k, const ir_func_t* f) {
  k->nblocks = f->nblocks;
  k->fns = calloc((size_t)f->nblocks + 1, sizeof *k->fns);
  k->strips = calloc((size_t)f->nblocks + 1, sizeof *k->strips);
  k->parallel = calloc((size_t)f->nblocks + 1, sizeof *k->parallel);
  if (!k->fns || !k->strips || !k->parallel) {
    jit_blocks_free(k);
    return rt_error(UJ_ERR_OOM, "out of memory allocating the tables of %d blocks (%zu bytes)", f->nblocks,
                    ((size_t)f->nblocks + 1) * (sizeof *k->fns + sizeof *k->strips + sizeof *k->parallel));
  }
  for (int b = 0; b < f->nblocks; b++) k->parallel[b] = jit_block_parallel(f, &f->blocks[b]);
  return UJ_OK;
}

void jit_blocks_free(jit_blocks_t* k) {
  free(k->fns);
  free(k->strips);
  free(k->parallel);
  k->fns = NULL;
  k->strips = NULL;
  k->parallel = NULL;
}

size_t jit_blocks_bytes(const jit_blocks_t* k) {
  size_t n = (size_t)k->nblocks + 1;
  return n * (sizeof *k->fns + sizeof *k->strips + sizeof *k->parallel);
}

typedef struct {
  jit_block_fn fn;
  const jit_strips_t* strips; /* NULL unless the block runs in strips */
  void* const* buf;
  const int64_t* dims;
  const int64_t* params;
} range_job_t;

static void run_strips(const range_job_t* j, int64_t begin, int64_t end) {
  const jit_strips_t* st = j->strips;
  /* 2 x 8 bytes per root and iteration, 32 KiB in all: stays in L1;
   * accessed by generated code and the batch functions only, as float or
   * double */
  enum { PART = JIT_STRIP * sizeof(double) };
  _Alignas(64) unsigned char scratch[2 * JIT_STRIP_MAX_ROOTS * PART];
  for (int64_t first = begin; first < end; first += JIT_STRIP) {
    int64_t n = end - first < JIT_STRIP ? end - first : JIT_STRIP;
    st->args(j->buf, j->dims, j->params, first, first + n, scratch);
    for (int r = 0; r < st->nroots; r++) {
      void *args = scratch + (size_t)r * PART, *roots = scratch + (size_t)(JIT_STRIP_MAX_ROOTS + r) * PART;
      if (st->f64[r]) jit_batch_sqrt(roots, args, n);
      else jit_batch_sqrtf(roots, args, n);
    }
    st->finish(j->buf, j->dims, j->params, first, first + n, scratch);
  }
}

static void run_range(void* ctx, int64_t begin, int64_t end) {
  const range_job_t* j = ctx;
  if (j->strips) run_strips(j, begin, end);
  else j->fn(j->buf, j->dims, j->params, begin, end);
}

/* Elements of work per iteration of the outermost loop, roughly: the extents
 * of the inner loops at their first iteration. */
static int64_t inner_work(const ir_env_t* env, const ir_block_t* b) {
  int64_t work = 1;
  for (int k = 1; k < b->nloops; k++) {
    int oob = 0;
    int64_t n = ir_ix_eval(env, b->loops[k].end, &oob) - ir_ix_eval(env, b->loops[k].start, &oob);
    if (n > 0 && work < (INT64_C(1) << 40)) work *= n;
  }
  return work;
}

uj_status_t jit_blocks_run(jit_state_t* js, const jit_blocks_t* k, const ir_func_t* f, ir_buffer_t* buf,
                           const int64_t* params) {
  /* on the stack for small functions: this runs on every call */
  enum { TENSORS_ON_STACK = 32, LOOPS_ON_STACK = 64 };
  int64_t stack_dims[TENSORS_ON_STACK * UJ_MAX_DIMS], stack_loops[LOOPS_ON_STACK];
  void* stack_data[TENSORS_ON_STACK];
  int small = f->ntensors <= TENSORS_ON_STACK && f->next_loop_id <= LOOPS_ON_STACK;
  int64_t* dims = small ? stack_dims : calloc((size_t)f->ntensors * UJ_MAX_DIMS + 1, sizeof *dims);
  void** data = small ? stack_data : calloc((size_t)f->ntensors + 1, sizeof *data);
  int64_t* loops = small ? stack_loops : calloc((size_t)f->next_loop_id + 1, sizeof *loops);
  uj_status_t s = dims && data && loops ? UJ_OK
                 : rt_error(UJ_ERR_OOM, "out of memory allocating the sizes of %d tensors and %d loops (%zu bytes)",
                            f->ntensors, f->next_loop_id,
                            ((size_t)f->ntensors * (UJ_MAX_DIMS + 1) + (size_t)f->next_loop_id + 3) * sizeof(int64_t));
  if (s == UJ_OK) {
    for (int t = 0; t < f->ntensors; t++) {
      data[t] = buf[t].data;
      for (int a = 0; a < f->tensors[t].ndim; a++) dims[t * UJ_MAX_DIMS + a] = buf[t].dims[a];
    }
    ir_env_t env = {f, buf, params, loops};
    for (int b = 0; b < f->nblocks; b++) {
      const ir_block_t* blk = &f->blocks[b];
      const jit_strips_t* strips = k->strips[b].finish ? &k->strips[b] : NULL;
      if (!blk->nloops || (!k->fns[b] && !strips)) continue;
      int oob = 0;
      int64_t begin = ir_ix_eval(&env, blk->loops[0].start, &oob), end = ir_ix_eval(&env, blk->loops[0].end, &oob);
      range_job_t job = {k->fns[b], strips, data, dims, params};
      /* about 16k elements per chunk pays for waking a thread */
      int64_t work = inner_work(&env, blk);
      int64_t min_chunk = (INT64_C(16384) + work - 1) / work;
      if (k->parallel[b] && js->pool && rt_pool_size(js->pool) > 1 && end - begin >= 2 * min_chunk)
        rt_pool_run(js->pool, begin, end, min_chunk, run_range, &job);
      else if (end > begin)
        run_range(&job, begin, end);
    }
  }
  if (!small) {
    free(dims);
    free(data);
    free(loops);
  }
  return s;
}
