/* rt: the runtime layer under everything else: error reporting, tensor
 * bookkeeping, an arena allocator and the context. It knows nothing of the IR;
 * what the JIT keeps per context hangs from the opaque slot in uj_ctx. */
#ifndef UJ_RT_H
#define UJ_RT_H

#include <stddef.h>
#include <stdint.h>

#include "../include/uopjit.h"

/* ---- errors (rt/error.c) ---------------------------------------------------- */

/* Records a printf-style message as this thread's last error and returns s,
 * so failures read `return rt_error(UJ_ERR_SHAPE, "tensor %d ...", ...);`. */
uj_status_t rt_error(uj_status_t s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current last error with more context ("input 2: " + old). */
void rt_error_prefix(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void rt_error_clear(void);

/* ---- arena (rt/arena.c) -------------------------------------------------------- */

/* A bump allocator: many small objects with one lifetime, freed together.
 * Allocation failure is reported by returning NULL (never aborts). Memory is
 * zeroed. */
typedef struct rt_arena_chunk rt_arena_chunk_t;
typedef struct {
  rt_arena_chunk_t* head;
  size_t used, cap;
} rt_arena_t;
void rt_arena_init(rt_arena_t* a);
void rt_arena_release(rt_arena_t* a);
void* rt_arena_alloc(rt_arena_t* a, size_t bytes);
/* Copies n bytes (or a NUL-terminated string) into the arena. */
void* rt_arena_dup(rt_arena_t* a, const void* p, size_t n);
char* rt_arena_strdup(rt_arena_t* a, const char* s);

/* A growable array whose storage lives in an arena: the old storage stays
 * in the arena (reclaimed when the arena is released). Returns 0 on OOM. */
int rt_arena_grow(rt_arena_t* a, void** items, int* cap, int need, size_t elem_size);
/* The same for a malloc'ed array (realloc'ed, free it with free()). */
int rt_grow(void** items, int* cap, int need, size_t elem_size);

/* A growable malloc'ed text buffer. On OOM it sets failed and drops writes. */
typedef struct {
  char* data;
  size_t len, cap;
  int failed;
} rt_buf_t;
void rt_buf_printf(rt_buf_t* b, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void rt_buf_putc(rt_buf_t* b, char c);
/* Appends n bytes of text (no formatting). */
void rt_buf_append(rt_buf_t* b, const char* text, size_t n);
/* Hands the text over (NUL-terminated) or NULL if a write failed. */
char* rt_buf_take(rt_buf_t* b);
void rt_buf_release(rt_buf_t* b);

/* ---- tensors (rt/tensor.c) ----------------------------------------------------- */

/* Multiplies a*b into *out; returns 0 when the product overflows int64. */
int rt_mul_i64(int64_t a, int64_t b, int64_t* out);
/* Element count of dims[0..ndim): UJ_ERR_SHAPE naming `what` if a size is
 * negative or the product overflows. */
uj_status_t rt_numel(const char* what, int ndim, const int64_t* dims, int64_t* out);
/* Checks one caller tensor against an expected rank, dtype and sizes (sizes
 * may be NULL to check only rank and dtype): non-NULL, CPU, well-formed dims,
 * data present when it has elements. `what` names it in the error. */
uj_status_t rt_tensor_check(const char* what, const uj_tensor_t* t, int ndim, uj_dtype_t dtype,
                            const int64_t* dims);
/* 1 when rt_tensor_check would return UJ_OK, without formatting anything:
 * callers check with it first and build `what` only for the error. */
int rt_tensor_ok(const uj_tensor_t* t, int ndim, uj_dtype_t dtype, const int64_t* dims);
/* The same two for a tensor expected on `device` (rt_tensor_check is
 * rt_tensor_check_on with UJ_CPU). */
uj_status_t rt_tensor_check_on(const char* what, const uj_tensor_t* t, uj_device_t device, int ndim,
                               uj_dtype_t dtype, const int64_t* dims);
int rt_tensor_ok_on(const uj_tensor_t* t, uj_device_t device, int ndim, uj_dtype_t dtype, const int64_t* dims);

/* ---- context (rt/ctx.c) -------------------------------------------------------- */

struct uj_ctx {
  uj_engine_t engine;             /* as set; AUTO resolves at run time */
  int raw_ir;                     /* run the IR as emitted, skipping the passes */
  void* jit_state;                /* owned by jit/: caches, compiled modules */
  void (*jit_state_free)(void*);  /* called by uj_ctx_free */
  /* owned by backends/: the convolution backends' choices per shape, cached
   * filter transforms, reference programs. Made on first use (the first
   * maker wins a race, as with jit_state) and freed before jit_state, since
   * a backend's state may hold programs whose kernels live in the JIT's. */
  void* backend_state;
  void (*backend_state_free)(void*);
  struct rt_cuda_ctx* cuda;       /* the GPU side (rt/cuda.h), made on first use */
};

/* ---- thread pool (rt/threads.c) ---------------------------------------------- */

/* A fixed set of worker threads that split a range [begin, end) into
 * contiguous chunks. One pool serves one caller at a time: rt_pool_run must
 * not be called from two threads at once on the same pool (a call made while
 * the pool is busy, for example from inside fn, runs the whole range on the
 * calling thread instead of deadlocking). */
typedef struct rt_pool rt_pool_t;
typedef void (*rt_range_fn)(void* ctx, int64_t begin, int64_t end);

/* nthreads <= 0: UOPJIT_THREADS when set to a positive number, else the
 * number of online cores. 1 starts no worker thread at all. Returns NULL
 * with uj_last_error() set on OOM; if the system refuses some threads the
 * pool runs with those it got. */
rt_pool_t* rt_pool_new(int nthreads);
void rt_pool_free(rt_pool_t* p);
/* Threads that take part in a run, the caller included (>= 1). */
int rt_pool_size(const rt_pool_t* p);
/* Calls fn over [begin, end) split into at most rt_pool_size() contiguous
 * chunks, none shorter than min_chunk (values < 1 count as 1); a range
 * shorter than 2*min_chunk runs as one call on the calling thread. The
 * caller runs a chunk itself; returns when every chunk has finished. An
 * empty range (end <= begin) calls nothing. p may be NULL (runs serially). */
void rt_pool_run(rt_pool_t* p, int64_t begin, int64_t end, int64_t min_chunk, rt_range_fn fn, void* ctx);

#endif
