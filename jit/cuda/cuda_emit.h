/* jit/cuda/cuda_emit.h: the CUDA emitter's view of a block (jit/cuda/cuda_plan.c
 * decides how its iterations are shared out among GPU threads,
 * jit/cuda/cuda_emit.c writes the kernel) and what the engine (jit/cuda/cuda.c)
 * needs to launch it.
 *
 * Every block with loops becomes one `extern "C" __global__` kernel
 * uj_block_<N>, launched with 256 threads per CUDA block; a chain of blocks
 * that run row by row also becomes one kernel uj_chain_<N> (see
 * jit_cu_kernel_t). Its loops
 * 0..nouter-1 are the parallel ones, flattened into one 1-D index space that
 * the threads walk grid-stride; the loops inside run sequentially in each
 * thread (so carried reductions stay inside a thread). */
#ifndef UJ_JIT_CUDA_EMIT_H
#define UJ_JIT_CUDA_EMIT_H

#include "../../ir/ir.h"
#include "../c_like.h"

enum { JIT_CU_THREADS_PER_BLOCK = 256, JIT_CU_MAX_CARRIED = 16 };

typedef enum {
  JIT_CU_NONE,    /* a block without loops: no kernel */
  JIT_CU_THREADS, /* one thread per iteration of the flattened loops */
  JIT_CU_REDUCE,  /* as THREADS, or (per launch, the `mode` argument) the reduction carried by loop
                     nouter-1 split over the 256 threads of a CUDA block (mode 1) or over the whole
                     grid, merged by the last block to finish (mode 2, for a single outer iteration) */
  JIT_CU_SERIAL   /* one thread runs the whole nest: nothing in it was proven parallel */
} jit_cu_strategy_t;

typedef struct {
  jit_cu_strategy_t strategy;
  int nouter;        /* loops 0..nouter-1 are flattened (0 for SERIAL) */
  int vector;        /* THREADS: elements per 16-byte vector on the vector path; 0 without one */
  int ncarried;      /* REDUCE: the carried variables of loop nouter-1, merged across threads */
  int has_arg;       /* REDUCE: one of them is an argmax/argmin (partials carry an index) */
  unsigned char* atomic; /* by tensor: scatter-adds into it are atomicAdd (NULL: none) */
} jit_cu_plan_t;

/* 1 when acc indexes its tensor by every loop of b in order and the
 * tensor's sizes are the loops' ranges: its offset is the flattened index
 * (what the vector path loads and stores 16 bytes at a time). */
int jit_cu_access_flat(const ir_func_t* f, const ir_block_t* b, const ir_access_t* acc);

/* The plan of block b; UJ_ERR_OOM. */
uj_status_t jit_cu_plan(const ir_func_t* f, const ir_block_t* b, jit_cu_plan_t* out);
void jit_cu_plan_release(jit_cu_plan_t* p);

/* One kernel argument, in order: a tensor's device pointer, a size
 * (tensor, axis), a $param (slot, when not folded). REDUCE kernels then
 * take four more: the mode (int), the partial values (double*), the
 * partial indices (long long*) and the ticket (unsigned int*). */
typedef enum { JIT_CU_ARG_TENSOR, JIT_CU_ARG_DIM, JIT_CU_ARG_PARAM } jit_cu_arg_kind_t;
typedef struct {
  jit_cu_arg_kind_t kind;
  int index; /* tensor or param slot */
  int axis;  /* DIM */
} jit_cu_arg_t;

typedef struct {
  jit_cu_plan_t plan;
  int nargs;
  jit_cu_arg_t* args;
  /* Row chains. When block b starts a chain of ir/chains.c (chain blocks,
   * chain >= 2) whose blocks all run row by row (a reduction over the
   * loops inside the row loop, or a nest of parallel loops), the module
   * also has uj_chain_<b>: one CUDA block per row (grid-stride over the
   * rows) runs every block of the chain on that row, its threads sharing
   * the loops inside the row and merging reductions by warp shuffles, with
   * a __syncthreads between blocks. A row's values flow from one block to
   * the next through the block's own memory (L1 and L2), and the chain is
   * one launch. 0 when block b starts no such chain. */
  int chain;
  int chain_nargs;
  jit_cu_arg_t* chain_args;
} jit_cu_kernel_t;

/* A function's CUDA module: the source and, per block, its kernel. */
typedef struct {
  char* source;
  int nblocks;
  jit_cu_kernel_t* kernels;
} jit_cu_module_t;

/* Emits the module for f. params given: $params folded in as constants
 * (what the engine compiles); NULL: each kernel takes the $params it uses
 * as arguments p<slot> (for reading). UJ_ERR_OOM, or UJ_ERR_UNSUPPORTED
 * when a kernel would take more argument bytes than a launch can pass. */
uj_status_t jit_cu_emit(const ir_func_t* f, const int64_t* params, jit_cu_module_t* out);
void jit_cu_module_release(jit_cu_module_t* m);

/* One launch of a module (jit/cuda/cuda_launch.c): block `block`'s
 * kernel, or with chain >= 2 the row kernel uj_chain_<block> for that many
 * blocks; the grid; a REDUCE kernel's mode and the bytes of partials its
 * mode 2 needs. */
typedef struct {
  int block, chain;
  int64_t grid;
  int mode;
  size_t scratch;
} jit_cu_launch_t;
/* The launches of module m (emitted for f) for the sizes in env, in order,
 * on a device of `sms` multiprocessors: out has room for f->nblocks;
 * *count launches. UJ_ERR_SHAPE when loops overflow. */
uj_status_t jit_cu_launches(const jit_cu_module_t* m, const ir_func_t* f, const ir_env_t* env, int64_t sms,
                            jit_cu_launch_t* out, int* count);

/* Merging reductions across threads (jit/cuda/cuda_merge.c). a (ai) =
 * partial a merged with partial b (bi), names of variables of dtype dt
 * (the indices, long long, for argmax/argmin only). */
void jit_cu_merge(jit_cx_t* E, uj_reduce_op_t op, uj_dtype_t dt, const char* a, const char* ai, const char* b,
                  const char* bi, int depth);
/* Every thread's c<id> (and c<id>a) merged over the CUDA block of
 * JIT_CU_THREADS_PER_BLOCK threads, by warp shuffles; every thread gets
 * the result. n makes its shared array's name unique in the kernel. Every
 * thread of the block must reach it. */
void jit_cu_block_merge(jit_cx_t* E, const ir_carried_t* c, int n, int depth);

/* Appends what every module's source starts with: the types, special
 * values and helpers its kernels use (jit/cuda/cuda_groups.c's kernels too). */
void jit_cu_prelude(rt_buf_t* out);

#endif
