/* jit/jit.h: what the engines share: emitted kernels' calling convention,
 * the context's JIT state, and the runner of compiled blocks (jit/blocks.c).
 * The runner reaches the engines through the table in jit/engine.h; each
 * engine's own entry points are in its folder's header (jit/c/c.h,
 * jit/mir/mir.h, jit/cuda/cuda.h). */
#ifndef UJ_JIT_H
#define UJ_JIT_H

#include <pthread.h>

#include "../ir/ir.h"
#include "cache/cache.h"

/* A compiled block: runs iterations [begin, end) of the block's outermost
 * loop. buf[t] is tensor t's data (NULL when no-alloc), dims[t*8+k] its
 * size on axis k, params the $param values (folded kernels ignore them). */
typedef void (*jit_block_fn)(void* const* buf, const int64_t* dims, const int64_t* params, int64_t begin,
                             int64_t end);
/* dims has two entries past the tensors' sizes: the bytes from which an
 * output written once and never read is written with streaming stores
 * (jit/c/c_stream.c; the context's stream_bytes; engines that do not
 * stream ignore it), and the elements of the next piece of a multi-tensor
 * call, 0 for none (jit/groups/cpu.c). Where that is above 0, buf has
 * ntensors more entries: buf[ntensors + t] is tensor t's data in the next
 * piece, which a block that prefetches across pieces (jit_blocks_t's
 * ahead_next) fetches toward the cache near the end of this one. */
#define JIT_STREAM_SLOT(ntensors) ((ntensors) * UJ_MAX_DIMS)
#define JIT_NEXT_SLOT(ntensors) ((ntensors) * UJ_MAX_DIMS + 1)
#define JIT_DIMS_SLOTS(ntensors) ((ntensors) * UJ_MAX_DIMS + 2)

/* A block compiled in two halves whose square roots the runner takes in
 * between, a strip at a time (jit/mir/mir_batch.c says why and when). The
 * runner's scratch has 2 * JIT_STRIP_MAX_ROOTS parts of JIT_STRIP doubles;
 * part k holds root k's arguments, part JIT_STRIP_MAX_ROOTS + k the roots,
 * element i - first of a part for iteration i, as float or double (f64[k]).
 * For each strip [first, last) of at most JIT_STRIP iterations of the
 * block's range, the runner calls args(..., first, last, scratch), which
 * stores the arguments; takes their square roots (jit_batch_sqrtf,
 * jit_batch_sqrt); then finish(..., first, last, scratch), which runs the
 * block's statements reading the roots, and arguments it needs again. */
enum { JIT_STRIP = 256, JIT_STRIP_MAX_ROOTS = 8 };
typedef void (*jit_strip_fn)(void* const* buf, const int64_t* dims, const int64_t* params, int64_t first,
                             int64_t last, void* scratch);
typedef struct {
  jit_strip_fn args, finish; /* both NULL: the block is an ordinary jit_block_fn */
  int nroots;
  unsigned char f64[JIT_STRIP_MAX_ROOTS];
} jit_strips_t;

/* A compiled function as the engines hand it to the runner: one entry per
 * block (NULL for a block with no loops, or one run in strips), the blocks
 * run in strips, and whether a block's outermost loop may be split across
 * threads. Engines embed it as the first member of their kernel, so a
 * kernel pointer is also a jit_blocks_t pointer. */
typedef struct {
  int nblocks;
  jit_block_fn* fns;
  jit_strips_t* strips;
  int* parallel;
  /* [block]: blocks in the chain that starts there, 0 inside a chain
   * (ir_block_chains): the runner takes a chain chunk of rows by chunk */
  int* chain;
  /* an estimate of the bytes one row of a chain touches: for each block
   * and loop depth d (from level_first[block]), the bytes of the chain's
   * tensors whose deepest access is there, times the iterations of loops
   * 1..d per row */
  int* level_first;
  int64_t* level_bytes; /* nlevels entries: the blocks' loops in all */
  int nlevels;
  /* [tensor]: for a chain-local temporary (ir_tensor_t.chain_local), the
   * first block of its chain; -1 for every other tensor */
  int* scratch_chain;
  /* [block]: its code prefetches the next piece (JIT_NEXT_SLOT), so that
   * the multi-tensor runner need not */
  unsigned char* ahead_next;
  int ntensors;
} jit_blocks_t;

/* Allocates fns and strips (all NULL), parallel and the chains (computed
 * from f) for f's blocks. */
uj_status_t jit_blocks_init(jit_blocks_t* k, const ir_func_t* f);
void jit_blocks_free(jit_blocks_t* k);
/* The heap memory jit_blocks_init allocated for k: part of what a kernel
 * costs in the memory cache. */
size_t jit_blocks_bytes(const jit_blocks_t* k);

/* A CPU engine's kernel in the memory cache: its value starts with the
 * jit_blocks_t. Valid while the reference is held. */
static inline const jit_blocks_t* jit_blocks_of(const jit_cache_entry_t* e) { return jit_cache_value(e); }

/* What jit/ keeps per context (hung from uj_ctx.jit_state). */
typedef struct {
  jit_cache_t* cache;
  rt_pool_t* pool;
  pthread_mutex_t lock;   /* compiles and probes */
  uint64_t id;            /* unique in the process: programs memoize kernels by it */
  unsigned fork_generation; /* rt_fork_generation() when made: see jit_state */
  /* each engine's own state, opaque here (jit_engine_state), by uj_engine_t */
  void* engine_state[RT_ENGINE_COUNT];
  /* tiered AUTO's records and background compiles (jit/tier.c), opaque
   * here: made on the first tiered call, freed through tier_free first of
   * all (its compiles store into the cache and read the C engine's slot) */
  void* tier;
  void (*tier_free)(void* tier);
  /* the bytes a chunk of a chain's rows should touch, to stay in cache
   * between its blocks (JIT_CHAIN_BYTES); 0 runs every block over all its
   * rows before the next (tests compare the two) */
  int64_t chain_bytes;
  /* the output size in bytes from which outputs written once and never
   * read are streamed past the cache (uj_ctx_set_stream_bytes) */
  int64_t stream_bytes;
  /* the list of groups the multi-tensor calls ran on (jit/groups/memo.c),
   * opaque here: made on first use */
  void* groups_memo;
  void (*groups_memo_free)(void* memo);
} jit_state_t;

/* An L1 data cache (32 KiB on most current x86 and ARM cores, 48 KiB on
 * newer ones): one row of softmax over 4096 f32, read and written, so each
 * block of the chain finds its row in L1 rather than L2, as the row-at-a-time
 * kernels of the peers do; the later blocks prefetch the next chunk's rows
 * (jit/c/c_reduce.c), which hides that chunks are small. Measured against
 * larger chunks in docs/ENGINES.md. */
enum { JIT_CHAIN_BYTES = 32 * 1024 };

/* The context's JIT state, created on first use; NULL (error set) on OOM.
 * In a child of fork() a state made before the fork is abandoned and a new
 * one made (jit/engine.c says why). */
jit_state_t* jit_state(uj_ctx_t* ctx);
/* The context's JIT state when it has one made in this process, else NULL;
 * never makes one. For readers that must not create state (reports,
 * settings on a context not yet used). */
jit_state_t* jit_state_existing(uj_ctx_t* ctx);

/* Runs every block of f with the kernel, a chain of blocks (k->chain) a
 * chunk of js->chain_bytes at a time, splitting parallel blocks and chains
 * across the context's threads (jit/blocks.c). */
uj_status_t jit_blocks_run(jit_state_t* js, const jit_blocks_t* k, const ir_func_t* f, ir_buffer_t* buf,
                           const int64_t* params);

/* Runs iterations [begin, end) of block `block`'s outermost loop with the
 * kernel on the calling thread, in strips when the block is compiled so;
 * nothing for a block without code or an empty range (multi-tensor
 * execution, jit/groups/cpu.c, calls it once per piece of a group). */
void jit_block_call(const jit_blocks_t* k, int block, void* const* data, const int64_t* dims, const int64_t* params,
                    int64_t begin, int64_t end);

/* 1 when iterations of the block's outermost loop touch disjoint elements
 * of every tensor the block writes, so they may run on different threads. */
int jit_block_parallel(const ir_func_t* f, const ir_block_t* b);

/* root[i] = sqrt(x[i]) for i < n, compiled to vectorize (jit/batch_math.c):
 * what the runner calls once per strip for a block run in strips, instead
 * of sqrtf once per element. */
void jit_batch_sqrtf(float* restrict root, const float* restrict x, int64_t n);
void jit_batch_sqrt(double* restrict root, const double* restrict x, int64_t n);

#endif
