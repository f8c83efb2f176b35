/* jit/blocks.c: runs a compiled function, whatever engine compiled it
 * (DESIGN section 7, "A runner").
 *
 * Every engine compiles a block to the same calling convention
 * (jit_block_fn: buffers, sizes, params, and the [begin, end) range of the
 * outermost loop), so one runner serves them all: it evaluates each block's
 * outermost range, then either calls the block once or, when the outermost
 * loop's iterations are independent (a reduction carried by it keeps it
 * serial) and there is enough work, hands slices of the range to the
 * context's thread pool. A block compiled in strips (jit_strips_t) runs
 * strip by strip, with the square roots taken here in between. The blocks
 * of a chain (ir/chains.c, which says why results stay bit for bit) are
 * taken a chunk of rows at a time through all of them, so that the rows one
 * block read are still in cache when the next reads them; with threads,
 * each takes a range of rows through the whole chain, with no barrier. */
#include <stdlib.h>
#include <string.h>

#include "jit.h"

int jit_block_parallel(const ir_func_t* f, const ir_block_t* b) {
  return b->nloops > 0 && ir_loop_independent(f, b, 0, NULL);
}

typedef struct {
  const ir_func_t* f;
  int* deepest_block; /* per tensor, in the chain being walked: where its deepest access is, -1 none yet */
  int* deepest_level;
  int block;
} footprint_t;

static void note_depth(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)stmt;
  footprint_t* fp = ctx;
  int t = acc->tensor;
  if (fp->f->tensors[t].local) return;
  if (fp->deepest_block[t] < 0 || level > fp->deepest_level[t]) {
    fp->deepest_block[t] = fp->block;
    fp->deepest_level[t] = level;
  }
}

/* Fills level_bytes for each chain of two blocks or more; 0 on OOM. A
 * chunk holds as many rows as fit the context's chain_bytes, by this
 * estimate of bytes per row: each tensor of the chain counted once, at its
 * deepest access, times the iterations of the loops inside the row down to
 * that depth (evaluated per call, since sizes change: run_chain_rows). */
static int chain_footprints(jit_blocks_t* k, const ir_func_t* f) {
  footprint_t fp = {f, calloc((size_t)f->ntensors + 1, sizeof(int)), calloc((size_t)f->ntensors + 1, sizeof(int)), 0};
  if (!fp.deepest_block || !fp.deepest_level) {
    free(fp.deepest_block);
    free(fp.deepest_level);
    return 0;
  }
  for (int first = 0; first < f->nblocks; first++) {
    if (k->chain[first] < 2) continue;
    for (int t = 0; t < f->ntensors; t++) fp.deepest_block[t] = -1;
    for (fp.block = first; fp.block < first + k->chain[first]; fp.block++)
      ir_walk_accesses(&f->blocks[fp.block], note_depth, &fp);
    for (int t = 0; t < f->ntensors; t++)
      if (fp.deepest_block[t] >= 0)
        k->level_bytes[k->level_first[fp.deepest_block[t]] + fp.deepest_level[t]] +=
            uj_dtype_size(f->tensors[t].dtype);
  }
  free(fp.deepest_block);
  free(fp.deepest_level);
  return 1;
}

typedef struct {
  int* first_block; /* per tensor: the first block touching it, -1 none yet */
  int block;
} first_touch_t;

static void note_first(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write, (void)level, (void)stmt;
  first_touch_t* w = ctx;
  if (w->first_block[acc->tensor] < 0) w->first_block[acc->tensor] = w->block;
}

/* scratch_chain: the chain of each chain-local temporary (all its accesses
 * lie in one chain: ir_temp_chain_local), found from the first block that
 * touches it. */
static void find_scratch_chains(jit_blocks_t* k, const ir_func_t* f) {
  for (int t = 0; t < f->ntensors; t++) k->scratch_chain[t] = -1;
  first_touch_t w = {k->scratch_chain, 0};
  for (w.block = 0; w.block < f->nblocks; w.block++) ir_walk_accesses(&f->blocks[w.block], note_first, &w);
  for (int t = 0; t < f->ntensors; t++) {
    int b = k->scratch_chain[t];
    if (!f->tensors[t].chain_local || b < 0) {
      k->scratch_chain[t] = -1;
      continue;
    }
    while (b > 0 && !k->chain[b]) b--;
    k->scratch_chain[t] = k->chain[b] >= 2 ? b : -1;
  }
}

uj_status_t jit_blocks_init(jit_blocks_t* k, const ir_func_t* f) {
  k->nblocks = f->nblocks;
  k->ntensors = f->ntensors;
  k->nlevels = 0;
  for (int b = 0; b < f->nblocks; b++) k->nlevels += f->blocks[b].nloops;
  k->fns = calloc((size_t)f->nblocks + 1, sizeof *k->fns);
  k->strips = calloc((size_t)f->nblocks + 1, sizeof *k->strips);
  k->parallel = calloc((size_t)f->nblocks + 1, sizeof *k->parallel);
  k->chain = calloc((size_t)f->nblocks + 1, sizeof *k->chain);
  k->level_first = calloc((size_t)f->nblocks + 1, sizeof *k->level_first);
  k->level_bytes = calloc((size_t)k->nlevels + 1, sizeof *k->level_bytes);
  k->scratch_chain = calloc((size_t)f->ntensors + 1, sizeof *k->scratch_chain);
  k->ahead_next = calloc((size_t)f->nblocks + 1, sizeof *k->ahead_next);
  if (!k->fns || !k->strips || !k->parallel || !k->chain || !k->level_first || !k->level_bytes ||
      !k->scratch_chain || !k->ahead_next) {
    jit_blocks_free(k);
    return rt_error(UJ_ERR_OOM, "out of memory allocating the tables of %d blocks (%zu bytes)", f->nblocks,
                    jit_blocks_bytes(k));
  }
  for (int b = 0, level = 0; b < f->nblocks; level += f->blocks[b].nloops, b++) {
    k->parallel[b] = jit_block_parallel(f, &f->blocks[b]);
    k->level_first[b] = level;
  }
  uj_status_t s = ir_block_chains(f, k->chain);
  if (s == UJ_OK && !chain_footprints(k, f))
    s = rt_error(UJ_ERR_OOM, "out of memory estimating what the chains of %d blocks over %d tensors touch",
                 f->nblocks, f->ntensors);
  if (s == UJ_OK) find_scratch_chains(k, f);
  if (s != UJ_OK) jit_blocks_free(k);
  return s;
}

void jit_blocks_free(jit_blocks_t* k) {
  free(k->fns);
  free(k->strips);
  free(k->parallel);
  free(k->chain);
  free(k->level_first);
  free(k->level_bytes);
  free(k->scratch_chain);
  free(k->ahead_next);
  k->scratch_chain = NULL;
  k->ahead_next = NULL;
  k->fns = NULL;
  k->strips = NULL;
  k->parallel = NULL;
  k->chain = NULL;
  k->level_first = NULL;
  k->level_bytes = NULL;
}

size_t jit_blocks_bytes(const jit_blocks_t* k) {
  size_t n = (size_t)k->nblocks + 1;
  return n * (sizeof *k->fns + sizeof *k->strips + sizeof *k->parallel + sizeof *k->chain +
              sizeof *k->level_first + sizeof *k->ahead_next) +
         ((size_t)k->nlevels + 1) * sizeof *k->level_bytes + ((size_t)k->ntensors + 1) * sizeof *k->scratch_chain;
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

void jit_block_call(const jit_blocks_t* k, int block, void* const* data, const int64_t* dims, const int64_t* params,
                    int64_t begin, int64_t end) {
  range_job_t job = {k->fns[block], k->strips[block].finish ? &k->strips[block] : NULL, data, dims, params};
  if ((job.fn || job.strips) && end > begin) run_range(&job, begin, end);
}

/* a * b for a, b >= 0, INT64_MAX when it overflows: the estimates below
 * only steer chunk sizes, and an empty tensor's other sizes may be as
 * large as int64 allows (jit_blocks_run has checked their product). */
static int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* The iterations of loops 1..depth of b for one iteration of its
 * outermost loop, roughly: their extents with the outer loops at their
 * first iteration (the outermost at `row`). */
static int64_t iterations_to(const ir_env_t* env, const ir_block_t* b, int depth, int64_t row) {
  int64_t work = 1;
  env->loops[b->loops[0].id] = row;
  for (int k = 1; k <= depth && k < b->nloops; k++) {
    int oob = 0;
    int64_t start = ir_ix_eval(env, b->loops[k].start, &oob), end = ir_ix_eval(env, b->loops[k].end, &oob);
    env->loops[b->loops[k].id] = start;
    if (end > start && work < (INT64_C(1) << 40)) work = saturating_mul(work, end - start);
  }
  return work;
}

/* Elements of work per iteration of the outermost loop, roughly. */
static int64_t inner_work(const ir_env_t* env, const ir_block_t* b, int64_t row) {
  return iterations_to(env, b, b->nloops - 1, row);
}

/* A longer chain runs as several in a row: any run of consecutive blocks
 * of a chain is a chain. */
enum { CHAIN_MAX_BLOCKS = 64 };

typedef struct {
  int count;              /* blocks in the chain */
  range_job_t jobs[CHAIN_MAX_BLOCKS]; /* per block; fn and strips both NULL: nothing to run */
  int64_t rows_per_chunk;
  /* chain-local temporaries (see run_chain_rows): each call of
   * run_chain takes slot next_slot++ of nslots, slot_bytes each: a copy of
   * the data pointers, then each temporary's scratch */
  int ntensors, nscratch;
  const int* scratch;           /* the tensors */
  const int64_t* scratch_row;   /* bytes of one row of each */
  const size_t* scratch_offset; /* where its scratch starts in a slot */
  unsigned char* slots;
  size_t slot_bytes;
  int nslots, next_slot;
} chain_job_t;

/* Rows [begin, end) of a chain, a chunk through every block at a time. */
static void run_chain(void* ctx, int64_t begin, int64_t end) {
  chain_job_t* c = ctx;
  void** data = NULL;
  unsigned char* slot = NULL;
  if (c->nscratch) {
    /* rt_pool_run calls this at most rt_pool_size() times per run: a slot each */
    int i = __atomic_fetch_add(&c->next_slot, 1, __ATOMIC_RELAXED);
    slot = c->slots + (size_t)(i < c->nslots ? i : 0) * c->slot_bytes;
    data = (void**)(void*)slot;
    memcpy(data, c->jobs[0].buf, (size_t)c->ntensors * sizeof *data);
  }
  for (int64_t first = begin; first < end; first += c->rows_per_chunk) {
    int64_t last = end - first < c->rows_per_chunk ? end : first + c->rows_per_chunk;
    for (int s = 0; s < c->nscratch; s++) /* row `first` at the scratch's row 0 */
      data[c->scratch[s]] =
          (void*)((uintptr_t)(slot + c->scratch_offset[s]) - (uintptr_t)first * (uintptr_t)c->scratch_row[s]);
    for (int b = 0; b < c->count; b++) {
      if (!c->jobs[b].fn && !c->jobs[b].strips) continue;
      range_job_t job = c->jobs[b];
      if (data) job.buf = data;
      run_range(&job, first, last);
    }
  }
}

/* Splits [begin, end) over the pool when there is enough work for two
 * threads: about 16k elements per slice pays for waking a thread. */
static void run_rows(jit_state_t* js, int parallel, int64_t work, int64_t begin, int64_t end, rt_range_fn fn,
                     void* ctx) {
  if (end <= begin) return;
  /* work is 1 .. INT64_MAX (saturated): no sum that could overflow */
  int64_t min_chunk = work >= 16384 ? 1 : (16384 + work - 1) / work;
  if (parallel && js->pool && rt_pool_size(js->pool) > 1 && (uint64_t)end - (uint64_t)begin >= 2 * (uint64_t)min_chunk)
    rt_pool_run(js->pool, begin, end, min_chunk, fn, ctx);
  else
    fn(ctx, begin, end);
}

static size_t round_up_64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Runs the chain of blocks first..first+count-1 over their common range;
 * the chain-local temporaries whose chain starts at first get their rows of
 * scratch. Chain-local temporaries (ir/chain_local.c: row i written and
 * read only at row i, within one chain) get no full-size memory when their
 * chain runs in chunks: each thread taking part gets scratch of
 * rows_per_chunk rows, and for each chunk [first, last) the blocks see a
 * copy of the data pointers in which the temporary's is placed so that row
 * `first` lands on the scratch's row 0 (computed in uintptr_t; the blocks
 * touch only rows first..last-1 of it). The scratch stays in L1 from the
 * block that writes a row to those that read it, and the temporary costs
 * no memory traffic. */
static uj_status_t run_chain_rows(jit_state_t* js, const jit_blocks_t* k, const ir_func_t* f, const ir_env_t* env,
                                  int first, int count, void* const* data, const int64_t* dims,
                                  const int64_t* params) {
  const ir_block_t* head = &f->blocks[first];
  int oob = 0;
  int64_t begin = ir_ix_eval(env, head->loops[0].start, &oob), end = ir_ix_eval(env, head->loops[0].end, &oob);
  if (end <= begin) return UJ_OK;
  chain_job_t c = {count, {{0}}, 1, f->ntensors, 0, NULL, NULL, NULL, NULL, 0, 1, 0};
  int64_t row_bytes = 0, work = 0;
  for (int i = 0; i < count; i++) {
    int b = first + i;
    const ir_block_t* blk = &f->blocks[b];
    c.jobs[i] = (range_job_t){k->fns[b], k->strips[b].finish ? &k->strips[b] : NULL, data, dims, params};
    for (int d = 0; d < blk->nloops; d++)
      if (k->level_bytes[k->level_first[b] + d]) {
        int64_t add = saturating_mul(k->level_bytes[k->level_first[b] + d], iterations_to(env, blk, d, begin));
        row_bytes = row_bytes > INT64_MAX - add ? INT64_MAX : row_bytes + add;
      }
    int64_t w = inner_work(env, blk, begin);
    work = work > INT64_MAX - w ? INT64_MAX : work + w;
  }
  if (row_bytes > 0 && js->chain_bytes > row_bytes) c.rows_per_chunk = js->chain_bytes / row_bytes;
  int nscratch = 0;
  for (int t = 0; t < f->ntensors; t++) nscratch += k->scratch_chain[t] == first;
  if (!nscratch) {
    run_rows(js, 1, work, begin, end, run_chain, &c);
    return UJ_OK;
  }
  /* on the stack for a few temporaries, as is the usual case */
  enum { SCRATCH_ON_STACK = 8 };
  int stack_scratch[SCRATCH_ON_STACK];
  int64_t stack_row[SCRATCH_ON_STACK];
  size_t stack_offset[SCRATCH_ON_STACK];
  int small = nscratch <= SCRATCH_ON_STACK;
  int* scratch = small ? stack_scratch : malloc((size_t)nscratch * sizeof *scratch);
  int64_t* scratch_row = small ? stack_row : malloc((size_t)nscratch * sizeof *scratch_row);
  size_t* scratch_offset = small ? stack_offset : malloc((size_t)nscratch * sizeof *scratch_offset);
  uj_status_t s = UJ_OK;
  if (!scratch || !scratch_row || !scratch_offset)
    s = rt_error(UJ_ERR_OOM, "out of memory listing the %d chain-local temporaries of blocks %d to %d", nscratch,
                 first, first + count - 1);
  size_t slot_bytes = round_up_64((size_t)f->ntensors * sizeof(void*));
  for (int t = 0, i = 0; t < f->ntensors && s == UJ_OK; t++) {
    if (k->scratch_chain[t] != first) continue;
    const ir_buffer_t* b = &env->buf[t];
    int64_t row = b->dims[0] > 0 ? b->numel / b->dims[0] * uj_dtype_size(f->tensors[t].dtype) : 0;
    scratch[i] = t;
    scratch_row[i] = row;
    scratch_offset[i] = slot_bytes;
    slot_bytes += round_up_64((size_t)row * (size_t)c.rows_per_chunk);
    i++;
  }
  c.nslots = js->pool && rt_pool_size(js->pool) > 1 ? rt_pool_size(js->pool) : 1;
  if (s == UJ_OK && !(c.slots = aligned_alloc(64, slot_bytes * (size_t)c.nslots)))
    s = rt_error(UJ_ERR_OOM, "out of memory allocating %zu bytes of scratch rows for %d temporaries of blocks %d to %d",
                 slot_bytes * (size_t)c.nslots, nscratch, first, first + count - 1);
  if (s == UJ_OK) {
    c.nscratch = nscratch, c.scratch = scratch, c.scratch_row = scratch_row, c.scratch_offset = scratch_offset;
    c.slot_bytes = slot_bytes;
    run_rows(js, 1, work, begin, end, run_chain, &c);
  }
  free(c.slots);
  if (!small) free(scratch), free(scratch_row), free(scratch_offset);
  return s;
}

/* Whether block b's chain runs in chunks this call (see jit_blocks_run). */
static int chain_runs(const jit_state_t* js, const jit_blocks_t* k, int b) {
  return js->chain_bytes > 0 && k->chain[b] >= 2 && k->chain[b] <= CHAIN_MAX_BLOCKS;
}

uj_status_t jit_blocks_run(jit_state_t* js, const jit_blocks_t* k, const ir_func_t* f, ir_buffer_t* buf,
                           const int64_t* params) {
  /* every tensor's sizes, zeros left out, times its element size fit
   * int64 (ir_func_sizes and the tensor checks have said so): strides, the
   * work of a loop nest and byte offsets, all bounded by that, cannot
   * overflow even when the tensor is empty */
  /* on the stack for small functions: this runs on every call */
  enum { TENSORS_ON_STACK = 32, LOOPS_ON_STACK = 64 };
  int64_t stack_dims[JIT_DIMS_SLOTS(TENSORS_ON_STACK)], stack_loops[LOOPS_ON_STACK];
  void* stack_data[TENSORS_ON_STACK];
  void* stack_owned[TENSORS_ON_STACK] = {0}; /* freed whole, also after a failure part way */
  int small = f->ntensors <= TENSORS_ON_STACK && f->next_loop_id <= LOOPS_ON_STACK;
  int64_t* dims = small ? stack_dims : calloc((size_t)JIT_DIMS_SLOTS(f->ntensors), sizeof *dims);
  void** data = small ? stack_data : calloc((size_t)f->ntensors + 1, sizeof *data);
  void** owned = small ? stack_owned : calloc((size_t)f->ntensors + 1, sizeof *owned);
  int64_t* loops = small ? stack_loops : calloc((size_t)f->next_loop_id + 1, sizeof *loops);
  uj_status_t s = dims && data && owned && loops
                 ? UJ_OK
                 : rt_error(UJ_ERR_OOM, "out of memory allocating the sizes of %d tensors and %d loops (%zu bytes)",
                            f->ntensors, f->next_loop_id,
                            ((size_t)f->ntensors * (UJ_MAX_DIMS + 2) + (size_t)f->next_loop_id + 3) * sizeof(int64_t));
  for (int t = 0; t < f->ntensors && s == UJ_OK; t++) {
    data[t] = buf[t].data;
    owned[t] = NULL;
    for (int a = 0; a < f->tensors[t].ndim; a++) dims[t * UJ_MAX_DIMS + a] = buf[t].dims[a];
    /* a chain-local temporary the caller left without memory, whose chain
     * will not run in chunks (chain_bytes 0, or a chain longer than
     * CHAIN_MAX_BLOCKS, which runs in pieces): full-size memory for this
     * call */
    if (k->scratch_chain[t] < 0 || buf[t].data || chain_runs(js, k, k->scratch_chain[t])) continue;
    size_t bytes = (size_t)buf[t].numel * (size_t)uj_dtype_size(f->tensors[t].dtype);
    if (!(data[t] = owned[t] = malloc(bytes ? bytes : 1)))
      s = rt_error(UJ_ERR_OOM, "out of memory allocating tensor t%d (%zu bytes)", t, bytes);
  }
  if (s == UJ_OK) {
    dims[JIT_STREAM_SLOT(f->ntensors)] = __atomic_load_n(&js->stream_bytes, __ATOMIC_RELAXED);
    dims[JIT_NEXT_SLOT(f->ntensors)] = 0;
    ir_env_t env = {f, buf, params, loops};
    int chain_left = 0; /* blocks of the current chain not run yet, this one included */
    for (int b = 0; b < f->nblocks && s == UJ_OK; b++) {
      const ir_block_t* blk = &f->blocks[b];
      if (k->chain[b]) chain_left = k->chain[b];
      int count = chain_left < CHAIN_MAX_BLOCKS ? chain_left : CHAIN_MAX_BLOCKS;
      if (count >= 2 && js->chain_bytes > 0) {
        s = run_chain_rows(js, k, f, &env, b, count, data, dims, params);
        b += count - 1;
        chain_left -= count;
        continue;
      }
      chain_left--;
      const jit_strips_t* strips = k->strips[b].finish ? &k->strips[b] : NULL;
      if (!blk->nloops || (!k->fns[b] && !strips)) continue;
      int oob = 0;
      int64_t begin = ir_ix_eval(&env, blk->loops[0].start, &oob), end = ir_ix_eval(&env, blk->loops[0].end, &oob);
      range_job_t job = {k->fns[b], strips, data, dims, params};
      run_rows(js, k->parallel[b], inner_work(&env, blk, begin), begin, end, run_range, &job);
    }
  }
  for (int t = 0; owned && t < f->ntensors; t++) free(owned[t]);
  if (!small) {
    free(dims);
    free(data);
    free(owned);
    free(loops);
  }
  return s;
}
