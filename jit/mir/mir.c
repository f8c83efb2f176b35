/* jit/mir/mir.c: the MIR engine: IR -> MIR instructions (jit/mir/mir_emit.c) ->
 * MIR's generator -> machine code in this process.
 *
 * Kernels are kept in the context's in-memory cache (jit/cache/cache.c) under a
 * key text of the engine, MIR's API version, the optimization level and the
 * canonical IR with the $params folded in; sizes are arguments. There is no
 * disk cache: generating a kernel is cheap.
 *
 * MIR keeps every module it was given until MIR_finish, so kernels are
 * generated into "generations": MIR contexts that take a bounded number of
 * modules each and are finished once their last kernel is freed (above
 * generation_t). MIR's errors longjmp back to the compile that called it
 * (on_mir_error). A MIR context is not thread-safe: compiles, and the
 * release of kernels, run under one process-wide lock (mir_lock); generated
 * code is plain machine code and runs on any thread. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine.h"
#include "mir_emit.h"
#include "mir.h"

#ifndef UJ_HAVE_MIR

int jit_mir_available(void) { return 0; }

uj_status_t jit_mir_get(jit_state_t* js, const ir_func_t* f, const int64_t* params, int level,
                        jit_cache_entry_t** out) {
  (void)js, (void)f, (void)params, (void)level;
  *out = NULL;
  return rt_error(UJ_ERR_UNSUPPORTED, "engine mir: this build has no MIR (install it and rebuild)");
}

char* jit_mir_dump(const ir_func_t* f, const int64_t* params) {
  (void)f, (void)params;
  rt_error(UJ_ERR_UNSUPPORTED, "uj_program_dump: the MIR engine is not available (this build has no MIR)");
  return NULL;
}

int jit_mir_generations(void) { return 0; }
int jit_mir_generations_live(void) { return 0; }

uj_status_t jit_mir_provoke_error(void) {
  return rt_error(UJ_ERR_UNSUPPORTED, "engine mir: this build has no MIR");
}

#else
#include <mir-gen.h>
#include <setjmp.h>

/* MIR keeps every module it was given until MIR_finish, so a long-running
 * process that compiles many kernels would grow without bound in one
 * context. Kernels are therefore generated into a "generation": a MIR
 * context that takes at most MODULES_PER_CONTEXT modules and is then
 * retired; a retired generation is finished once the last kernel generated
 * in it is freed. Generations belong to the process, not to a uopjit
 * context: setting one up costs about as much as a compile, and a new
 * uopjit context should not pay it again. */
#define MODULES_PER_CONTEXT 64

typedef struct {
  MIR_context_t ctx;
  jit_mir_pool_t* pool; /* ctx's memory (jit/mir/mir_alloc.c) */
  size_t setup_bytes; /* what its allocator held once the context was set up */
  int modules;  /* modules created in it */
  int live;     /* kernels generated in it and not yet freed */
  int retired;  /* takes no more modules; finished when live drops to 0 */
  int broken;   /* an error left a module half-built: abandoned, never finished */
} generation_t;

/* The process's MIR state, under mir_lock (recursive: a kernel freed while
 * a compile holds the lock takes it again). */
static struct {
  generation_t* current;
  uint64_t modules_made;  /* names modules uniquely */
  int generations_made;
  int generations_live;   /* made and not yet finished (or abandoned) */
} mir = {NULL, 0, 0, 0};
static pthread_mutex_t mir_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

/* fork(): the lock is held across it, and the child gets a fresh one
 * (rt_fork_guard). */
__attribute__((constructor)) static void guard_mir_lock_across_fork(void) {
  static const pthread_mutex_t fresh = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
  rt_fork_guard(&mir_lock, &fresh);
}

typedef struct {
  jit_blocks_t blocks; /* first: the kernel is handed out as a jit_blocks_t */
  generation_t* gen;
} mir_kernel_t;

int jit_mir_available(void) { return 1; }

/* ---- errors: MIR's error function longjmps to the innermost guarded call ---- */

static _Thread_local jmp_buf* error_jump;
static _Thread_local char error_text[512];

/* MIR reports errors through a function that must not return (its default
 * exits the process). This one records the message and longjmps back to the
 * compile that called MIR, which returns UJ_ERR_COMPILE. MIR cannot finish
 * a context holding a half-built module, so a generation an error left in
 * that state is abandoned rather than finished; only a bug in the lowering
 * makes MIR report an error at all. */
static void MIR_NO_RETURN on_mir_error(MIR_error_type_t type, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = snprintf(error_text, sizeof error_text, "MIR error %d: ", (int)type);
  vsnprintf(error_text + n, sizeof error_text - (size_t)n, format, ap);
  va_end(ap);
  /* every call into MIR is made under a guard, so error_jump is set; if a
   * MIR call were ever made without one, stopping here beats returning
   * into MIR, which assumes the error function does not return */
  if (!error_jump) abort();
  longjmp(*error_jump, 1);
}

/* A fresh MIR context with our error function and its generator set up,
 * its memory from pool (NULL: the C library's allocator). */
static MIR_context_t context_new(jit_mir_pool_t* pool) {
  MIR_context_t ctx = pool ? MIR_init2(jit_mir_pool_alloc(pool), NULL) : MIR_init();
  jmp_buf jb;
  jmp_buf* volatile saved = error_jump;
  error_jump = &jb;
  if (setjmp(jb) == 0) {
    MIR_set_error_func(ctx, on_mir_error);
    MIR_gen_init(ctx);
  } else {
    ctx = NULL; /* abandoned: it failed while being set up */
  }
  error_jump = saved;
  return ctx;
}

static void context_finish(MIR_context_t ctx) {
  jmp_buf jb;
  jmp_buf* volatile saved = error_jump;
  error_jump = &jb;
  if (setjmp(jb) == 0) {
    MIR_gen_finish(ctx);
    MIR_finish(ctx);
  }
  error_jump = saved;
}

static void generation_release(generation_t* g) {
  if (g->live > 0 || !g->retired) return;
  if (!g->broken) context_finish(g->ctx);
  /* the blocks a finished context freed; an abandoned one is never used
   * again, and what it still holds is lost either way */
  jit_mir_pool_free(g->pool);
  free(g);
  mir.generations_live--;
}

static void kernel_free(void* p) {
  mir_kernel_t* k = p;
  if (!k) return;
  jit_blocks_free(&k->blocks);
  pthread_mutex_lock(&mir_lock);
  k->gen->live--;
  generation_release(k->gen);
  pthread_mutex_unlock(&mir_lock);
  free(k);
}

/* ---- compiling ---- */

/* The optimization level is each uopjit context's own
 * (uj_ctx_set_mir_level, UOPJIT_MIR_LEVEL by default, 2 when neither says):
 * it is part of the key, and set on the generation's MIR context before
 * each compile, so contexts of different levels share generations. */
static char* key_text(const ir_func_t* f, const int64_t* params, int level) {
  char* ir = ir_print(f, params, IR_PRINT_CANONICAL);
  if (!ir) return NULL;
  rt_buf_t b = {0};
  /* the IR text appended, not formatted: it is most of the key */
  rt_buf_printf(&b, "engine mir\nmir api %g\nlevel %d\n", (double)MIR_API_VERSION, level);
  rt_buf_append(&b, ir, strlen(ir));
  free(ir);
  return rt_buf_take(&b);
}

/* The generation that takes the next module, made on demand (under mir_lock). */
static generation_t* current_generation(void) {
  if (!mir.current) {
    generation_t* g = calloc(1, sizeof *g);
    if (!g) return NULL;
    if (!(g->pool = jit_mir_pool_new()) || !(g->ctx = context_new(g->pool))) {
      jit_mir_pool_free(g->pool); /* a context that failed while being set up is abandoned, unused */
      free(g);
      return NULL;
    }
    g->setup_bytes = jit_mir_pool_held(g->pool);
    mir.current = g;
    mir.generations_made++;
    mir.generations_live++;
  }
  return mir.current;
}

/* Generates f into the current generation: the kernel and its cost in
 * the memory cache, or an error.
 *
 * Each generation has its own allocator (jit/mir/mir_alloc.c), which keeps
 * the blocks MIR frees for the next function it compiles. A kernel costs
 * what its generation's allocator grew by while generating it (the module
 * MIR keeps, the generator's peak) plus a MODULES_PER_CONTEXT-th of what
 * setting the context up took; machine code is packed into pages shared by
 * the context's kernels and is not counted. Evicting a kernel returns its
 * share once its whole generation is evicted (the generation is finished
 * then): a kernel kept in use keeps its generation's memory, at most
 * MODULES_PER_CONTEXT kernels' worth. */
static uj_status_t generate(const ir_func_t* f, const int64_t* params, int level, mir_kernel_t** out,
                            size_t* bytes) {
  /* volatile: read after a longjmp */
  generation_t* volatile g = current_generation();
  mir_kernel_t* volatile k = g ? calloc(1, sizeof *k) : NULL;
  jit_mir_block_t* volatile funcs = k ? calloc((size_t)f->nblocks + 1, sizeof *funcs) : NULL;
  if (!funcs || jit_blocks_init(&k->blocks, f) != UJ_OK) {
    free(funcs);
    free(k);
    return rt_error(UJ_ERR_OOM, "engine mir: out of memory allocating a kernel of %d blocks (%zu bytes)", f->nblocks,
                    sizeof(mir_kernel_t) + ((size_t)f->nblocks + 1) * sizeof *funcs);
  }
  char name[48];
  snprintf(name, sizeof name, "m%llu", (unsigned long long)mir.modules_made++);
  volatile int failed = 0, oom = 0;
  jmp_buf jb;
  jmp_buf* volatile saved = error_jump;
  error_jump = &jb;
  g->modules++;
  size_t held_before = jit_mir_pool_held(g->pool);
  if (setjmp(jb) == 0) {
    MIR_gen_set_optimize_level(g->ctx, (unsigned)level); /* the uopjit context's: see key_text */
    MIR_module_t module = jit_mir_lower(g->ctx, f, params, name, funcs);
    if (!module) {
      oom = 1;
    } else {
      MIR_load_module(g->ctx, module);
      MIR_link(g->ctx, MIR_set_gen_interface, jit_mir_resolve);
      for (int b = 0; b < f->nblocks; b++) {
        if (!funcs[b].fn) continue;
        void *code = funcs[b].fn->u.func->call_addr, *args = funcs[b].args ? funcs[b].args->u.func->call_addr : NULL;
        /* object to function pointer */
        if (!args) {
          memcpy(&k->blocks.fns[b], &code, sizeof code);
          continue;
        }
        jit_strips_t* st = &k->blocks.strips[b];
        memcpy(&st->args, &args, sizeof args);
        memcpy(&st->finish, &code, sizeof code);
        st->nroots = funcs[b].nroots;
        memcpy(st->f64, funcs[b].f64, sizeof st->f64);
      }
    }
  } else {
    failed = 1;
  }
  error_jump = saved;
  free(funcs);
  if (!failed && !oom) {
    k->gen = g;
    g->live++;
    size_t held = jit_mir_pool_held(g->pool);
    *bytes = (held > held_before ? held - held_before : 0) + g->setup_bytes / MODULES_PER_CONTEXT + sizeof *k +
             jit_blocks_bytes(&k->blocks);
  }
  if (failed) g->broken = 1;
  if (failed || g->modules >= MODULES_PER_CONTEXT) {
    /* retired: the next compile starts a new generation; this one goes
     * when its last kernel does (at once if it has none) */
    g->retired = 1;
    mir.current = NULL;
    generation_release(g);
  }
  if (failed || oom) {
    jit_blocks_free(&k->blocks);
    free(k);
    if (oom) return rt_error(UJ_ERR_OOM, "engine mir: out of memory lowering %d blocks to MIR", f->nblocks);
    return rt_error(UJ_ERR_COMPILE, "engine mir: %s", error_text);
  }
  *out = k;
  return UJ_OK;
}

typedef struct {
  const ir_func_t* f;
  const int64_t* params;
  int level;
} mir_build_t;

static uj_status_t build_kernel(void* arg, void** value, size_t* bytes) {
  const mir_build_t* b = arg;
  mir_kernel_t* k = NULL;
  uj_status_t s = generate(b->f, b->params, b->level, &k, bytes);
  *value = k;
  return s;
}

uj_status_t jit_mir_get(jit_state_t* js, const ir_func_t* f, const int64_t* params, int level,
                        jit_cache_entry_t** out) {
  *out = NULL;
  char* key = key_text(f, params, level);
  if (!key) return rt_error(UJ_ERR_OOM, "engine mir: out of memory printing the kernel's key text");
  ir_hash_t h = ir_hash_bytes(key, strlen(key));
  mir_build_t b = {f, params, level};
  /* under the process-wide lock: MIR contexts are not thread-safe */
  uj_status_t s = jit_cache_get_or_build(js->cache, &mir_lock, h, key, build_kernel, &b, kernel_free, out);
  free(key);
  return s;
}

int jit_mir_generations(void) {
  pthread_mutex_lock(&mir_lock);
  int n = mir.generations_made;
  pthread_mutex_unlock(&mir_lock);
  return n;
}

int jit_mir_generations_live(void) {
  pthread_mutex_lock(&mir_lock);
  int n = mir.generations_live;
  pthread_mutex_unlock(&mir_lock);
  return n;
}

uj_status_t jit_mir_provoke_error(void) {
  MIR_context_t ctx = context_new(NULL);
  if (!ctx) return rt_error(UJ_ERR_OOM, "engine mir: out of memory setting up a MIR context");
  volatile int failed = 0;
  jmp_buf jb;
  jmp_buf* volatile saved = error_jump;
  error_jump = &jb;
  if (setjmp(jb) == 0) MIR_new_func(ctx, "f", 0, NULL, 0); /* no module: MIR reports an error */
  else failed = 1;
  error_jump = saved;
  /* the error came before any module was begun, so this context, unlike
   * one a failed compile leaves behind, can still be finished */
  context_finish(ctx);
  if (!failed) return UJ_OK;
  return rt_error(UJ_ERR_COMPILE, "engine mir: %s", error_text);
}

/* ---- the text form ---- */

char* jit_mir_dump(const ir_func_t* f, const int64_t* params) {
  MIR_context_t ctx = context_new(NULL);
  jit_mir_block_t* funcs = calloc((size_t)f->nblocks + 1, sizeof *funcs);
  char* text = NULL;
  size_t size = 0;
  FILE* mem = ctx && funcs ? open_memstream(&text, &size) : NULL;
  if (!mem) {
    free(funcs);
    if (ctx) context_finish(ctx);
    rt_error(UJ_ERR_OOM, "uj_program_dump: out of memory setting up MIR for %d blocks", f->nblocks);
    return NULL;
  }
  volatile int failed = 0;
  jmp_buf jb;
  jmp_buf* volatile saved = error_jump;
  error_jump = &jb;
  if (setjmp(jb) == 0) {
    MIR_module_t module = jit_mir_lower(ctx, f, params, "uopjit", funcs);
    if (module) MIR_output_module(ctx, mem, module);
    else failed = 2;
  } else {
    failed = 1;
  }
  error_jump = saved;
  fclose(mem);
  free(funcs);
  if (failed == 1) {
    rt_error(UJ_ERR_COMPILE, "uj_program_dump: %s", error_text); /* ctx abandoned: half-built */
  } else {
    context_finish(ctx);
    if (failed) rt_error(UJ_ERR_OOM, "uj_program_dump: out of memory lowering %d blocks to MIR", f->nblocks);
  }
  if (failed) {
    free(text);
    return NULL;
  }
  return text;
}
#endif

/* ---- the engine's row (jit/engine.h) ---- */

static int mir_available(uj_ctx_t* ctx) {
  (void)ctx;
  return jit_mir_available();
}

static uj_status_t mir_check(uj_ctx_t* ctx) {
  (void)ctx;
  if (jit_mir_available()) return UJ_OK;
  return rt_error(UJ_ERR_UNSUPPORTED, "this build has no MIR (install it and rebuild)");
}

/* the optimization level is part of the key: a kernel of another level is another kernel */
static int mir_key_setting(const uj_ctx_t* ctx) { return ctx->set.mir_level; }

static uj_status_t mir_get(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                           jit_cache_entry_t** out) {
  return jit_mir_get(js, f, params, ctx->set.mir_level, out);
}

static char* mir_dump(const ir_func_t* f, const int64_t* params, uj_dump_t what) {
  (void)what;
  return jit_mir_dump(f, params);
}

const jit_engine_t jit_engine_mir = {
    .device = UJ_CPU,
    .settings = 1u << RT_SETTING_THREADS | 1u << RT_SETTING_MEMORY_CACHE_LIMIT | 1u << RT_SETTING_MIR_LEVEL,
    .chain_scratch = 1,
    .dumps = 1u << UJ_DUMP_MIR,
    .available = mir_available,
    .check = mir_check,
    .key_setting = mir_key_setting,
    .get = mir_get,
    .run = jit_engine_run_blocks,
    .dump = mir_dump,
};
