/* rt: the runtime layer under everything else: error reporting, tensor
 * bookkeeping, an arena allocator and the context. It knows nothing of the IR;
 * what the JIT keeps per context hangs from the opaque slot in uj_ctx. */
#ifndef UJ_RT_H
#define UJ_RT_H

#include <pthread.h>
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

/* ---- the environment (rt/env.c) ------------------------------------------------- */

/* Every UOPJIT_* variable is read through these. Unset or empty: UJ_OK with
 * *set = 0 (the caller keeps its default). A value outside what is
 * accepted: UJ_ERR_INVALID with the message rt_env_invalid writes. */
uj_status_t rt_env_int(const char* var, int64_t lo, int64_t hi, const char* accepted, int64_t* out, int* set);
/* A size in bytes as rt_parse_size reads it, at least min. */
uj_status_t rt_env_size(const char* var, int64_t min, const char* accepted, int64_t* out, int* set);
/* One of names[0..count): its index. */
uj_status_t rt_env_choice(const char* var, const char* const* names, int count, const char* accepted, int* index,
                          int* set);
/* A list of words[0..count) separated by commas or blanks: bit i of *mask
 * for words[i] (0 when unset). */
uj_status_t rt_env_words(const char* var, const char* const* words, int count, const char* accepted,
                         unsigned* mask);
/* UJ_ERR_INVALID with `VAR="value" is not valid: expected ACCEPTED`. */
uj_status_t rt_env_invalid(const char* var, const char* value, const char* accepted);
/* "<digits>[K|M|G]" (K, M, G: powers of 1024) into *out; 0 when malformed
 * or past INT64_MAX. */
int rt_parse_size(const char* text, int64_t* out);
#define RT_SIZE_ACCEPTED_TAIL "number of bytes, optionally followed by K, M or G (powers of 1024), such as 512M"
#define RT_SIZE_ACCEPTED "a " RT_SIZE_ACCEPTED_TAIL

/* How many uj_engine_t values there are (AUTO included): they run from 0
 * to RT_ENGINE_COUNT - 1, and uj_engine_name spells each. */
enum { RT_ENGINE_COUNT = (int)UJ_ENGINE_CUDA + 1 };
/* The engines' names as a list for a message, "auto, interp, ... or cuda"
 * (rt/env.c holds the one list of names). */
void rt_engine_list(char* out, size_t cap);

/* What a context takes from the environment at uj_ctx_new, each with its
 * uj_ctx_set_* (the environment is only the default). */
typedef enum {
  RT_SETTING_ENGINE,             /* UOPJIT_ENGINE */
  RT_SETTING_THREADS,            /* UOPJIT_THREADS */
  RT_SETTING_MIR_LEVEL,          /* UOPJIT_MIR_LEVEL */
  RT_SETTING_CACHE,              /* UOPJIT_CACHE, UOPJIT_CACHE_DIR */
  RT_SETTING_MEMORY_CACHE_LIMIT, /* UOPJIT_CACHE_MEMORY_LIMIT */
  RT_SETTING_DISK_CACHE_LIMIT,   /* UOPJIT_CACHE_DISK_LIMIT */
  RT_SETTING_TIER,               /* UOPJIT_TIER */
  RT_SETTING_STREAM,             /* UOPJIT_STREAM_BYTES */
  RT_SETTING_COUNT
} rt_setting_t;
#define RT_SETTING_ALL ((1u << RT_SETTING_COUNT) - 1)
#define RT_PROBLEM_CAP 384
#define RT_MAX_THREADS 1024 /* against a typo such as UOPJIT_THREADS=100000 */
#define RT_DEFAULT_MIR_LEVEL 2
/* UOPJIT_TIER: the calls a new kernel makes on the quick tier before the C
 * compile starts in the background (0: tiering off) */
#define RT_DEFAULT_TIER_CALLS 1
#define RT_MAX_TIER_CALLS 1000000000
/* UOPJIT_STREAM_BYTES: outputs of at least this many bytes, written once and
 * never read, are written with streaming stores by the C engine
 * (jit/c/c_stream.c): a few times the last-level cache of a desktop part, or
 * a core's share of a server's, so that what is streamed would not have
 * stayed in cache anyway */
#define RT_DEFAULT_STREAM_BYTES (INT64_C(32) << 20)

typedef struct {
  uj_engine_t engine;            /* AUTO resolves at run time */
  int threads;                   /* 0: one per online core */
  int mir_level;                 /* 0..3 */
  int cache_off;                 /* the disk cache switched off on purpose */
  char cache_dir[4096];          /* "": the default location (jit/cache/disk.c) */
  int64_t memory_cache_limit;    /* -1: the default */
  int64_t disk_cache_limit;      /* 0: the default */
  const char* disk_cache_limit_from; /* where it came from, for reports (static text) */
  int tier_calls;                /* AUTO on host tensors: calls before the C compile starts; 0 tiering off */
  int64_t stream_bytes;          /* outputs this large or larger may be streamed (RT_DEFAULT_STREAM_BYTES) */
} rt_settings_t;

/* The settings the environment gives; a setting whose variable is invalid
 * keeps its default and its message goes into problems[setting] (""
 * otherwise). Leaves uj_last_error() as it was. */
void rt_settings_from_env(rt_settings_t* out, char problems[RT_SETTING_COUNT][RT_PROBLEM_CAP]);

/* ---- context (rt/ctx.c) -------------------------------------------------------- */

struct uj_ctx {
  uint64_t id;                    /* unique in the process, never reused (not an address) */
  rt_settings_t set;              /* from the environment, then the setters */
  /* why the environment's value of a setting was refused ("" when it was
   * not): returned by the calls that use the setting until its setter
   * gives a valid value */
  char problem[RT_SETTING_COUNT][RT_PROBLEM_CAP];
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

/* UJ_OK, or UJ_ERR_INVALID with the message of the first setting among
 * `settings` (a mask of 1u << rt_setting_t) whose environment value was
 * refused. */
uj_status_t rt_ctx_settings_check(const uj_ctx_t* ctx, unsigned settings);
/* A setter gave the setting a valid value: the environment's problem is
 * forgotten. */
void rt_ctx_setting_fixed(uj_ctx_t* ctx, rt_setting_t setting);

/* ---- thread pool (rt/threads.c) ---------------------------------------------- */

/* A fixed set of worker threads that split a range [begin, end) into
 * contiguous chunks. One pool serves one caller at a time: rt_pool_run must
 * not be called from two threads at once on the same pool (a call made while
 * the pool is busy, for example from inside fn, runs the whole range on the
 * calling thread instead of deadlocking). */
typedef struct rt_pool rt_pool_t;
typedef void (*rt_range_fn)(void* ctx, int64_t begin, int64_t end);

/* nthreads <= 0: the number of online cores (a context passes its
 * setting, UOPJIT_THREADS by default). 1 starts no worker thread at all. Returns NULL
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
/* fork(): a pool made before a fork works in the child, which has none
 * of the parent's workers. The child's first run that splits starts new
 * workers (as many; rt_pool_size is unchanged), and rt_pool_free there
 * neither joins nor waits for the parent's; their mutex and condition
 * variables are never touched again (a vanished worker may have held the
 * mutex). */

/* A number that is different in the child of every fork() than in its
 * parent (a pthread_atfork handler advances it; the pid stands in where
 * the handler could not be registered). State that owns threads records
 * it when it starts them; a different value later means those threads are
 * not in this process, so they must not be joined or waited for and their
 * locks not taken. Cheap enough for every call. */
unsigned rt_fork_generation(void);

/* Holds the process-wide lock `lock` across every fork(), and gives the
 * child a copy of `fresh` (its initializer) in its place: a child must
 * never start with a lock taken by a thread it does not have, nor with
 * the state it guards half changed. Called once per lock, from a
 * constructor of the file that owns it (at most 8 such locks; they are
 * taken in the order they were given, and no code takes two of them at
 * once). */
void rt_fork_guard(pthread_mutex_t* lock, const pthread_mutex_t* fresh);

#endif
