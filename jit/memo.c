/* jit/memo.c: what the JIT remembers per program, so that a repeated call
 * costs little more than its kernel (DESIGN section 7, "The runner").
 *
 * Three records per pass, behind the program's opaque jit_memo slot (made
 * on the first call that needs it, freed with the program by memo_free):
 * the last kernel (kernel_memo_t: a repeated call skips building the cache
 * key), the in-place answers (alias_memo_t: ir_alias_safe by [in *
 * ntensors + out], -1 not yet asked, since an in-place call asks on every
 * run and the answer depends on the function alone), and the last run per
 * context (last_run_t, for uj_program_last_run). The memo never holds a
 * cache entry: it keeps the entry's serial, never reused, so once the cache
 * evicts it the memo misses rather than dangles. Threads share a program,
 * so all three sit under one lock, never held while an engine compiles.
 * Running out of memory for a memo only costs its saving (and, for the
 * last run, its report). */
#include <stdlib.h>
#include <string.h>

#include "memo.h"

/* The last kernel: for the JIT state, the row, the row's settings part of
 * the key (jit_engine_t.key_setting), the function (raw or optimized: the
 * passes can be switched off) and the $param values, the cache entry it
 * got (the key's hash and the entry's serial). For a choosing row (tiered
 * AUTO) also the row that ran the kernel and the pick's record: a settled
 * pick (a C kernel) is a hit like any other, so the switch costs the hot
 * path nothing; an unsettled one (MIR while C compiles) asks the row's
 * still first. The switch is this memo rewritten under its lock by the
 * caller's own thread, so no call sees half of it. */
typedef struct {
  uint64_t state; /* jit_state_t.id */
  const jit_engine_t* engine;
  const jit_engine_t* served_by; /* the row that runs it: engine, or the one a choosing row picked */
  int settled;
  uint64_t record;
  int key_setting;
  const ir_func_t* func;
  int64_t* params;
  ir_hash_t key;
  uint64_t serial; /* 0: nothing remembered */
} kernel_memo_t;

typedef struct {
  const ir_func_t* func;
  signed char* safe;
} alias_memo_t;

/* The last run is kept per context (by uj_ctx.id): threads share a program
 * but each runs its own context, and "the last run" a thread asks about is
 * its own, not whichever thread's came last: the row that served it and
 * the record, for the LAST_RUNS contexts that ran the pass most recently.
 * Contexts remembered per pass; an older one's last run is forgotten (it
 * reads as never run), which bounds the memo whatever the number of
 * contexts a program meets. uj_program_last_run's comment (uopjit.h)
 * states the number. */
enum { LAST_RUNS = 8 };

typedef struct {
  uint64_t ctx_id; /* uj_ctx.id; 0: an empty slot */
  const jit_engine_t* engine;
  uint64_t record;
} last_run_t;

typedef struct {
  pthread_mutex_t lock;
  kernel_memo_t kernel[2]; /* by uj_pass_t */
  alias_memo_t alias[2];
  last_run_t last_run[2][LAST_RUNS]; /* by uj_pass_t, the most recent first */
} memo_t;

static void memo_free(void* p) {
  memo_t* m = p;
  if (!m) return;
  pthread_mutex_destroy(&m->lock);
  for (int i = 0; i < 2; i++) free(m->kernel[i].params), free(m->alias[i].safe);
  free(m);
}

/* The program's memo, made on first use; NULL when out of memory (no error
 * set: the caller goes without). Threads may race to make it: one wins. */
static memo_t* memo_of(uj_program_t* p) {
  memo_t* m = __atomic_load_n(&p->jit_memo, __ATOMIC_ACQUIRE);
  if (m) return m;
  if (!(m = calloc(1, sizeof *m))) return NULL;
  pthread_mutex_init(&m->lock, NULL);
  __atomic_store_n(&p->jit_memo_free, memo_free, __ATOMIC_RELAXED); /* the same value from every racer */
  void* expected = NULL;
  if (!__atomic_compare_exchange_n(&p->jit_memo, &expected, m, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    memo_free(m);
    return expected;
  }
  return m;
}

/* The row's own answer: get's kernel, run by the row itself, or choose's pick. */
static uj_status_t ask_row(uj_ctx_t* ctx, const jit_engine_t* e, jit_state_t* js, const ir_func_t* f,
                           const int64_t* params, const ir_buffer_t* buf, jit_served_t* out) {
  if (e->chooser) return e->chooser->choose(ctx, js, f, params, buf, out);
  *out = (jit_served_t){NULL, e, 1, 0, 0};
  return e->get(ctx, js, f, params, &out->kernel);
}

uj_status_t jit_memo_kernel(uj_ctx_t* ctx, const jit_engine_t* e, uj_program_t* p, uj_pass_t pass,
                            const ir_func_t* f, const int64_t* params, const ir_buffer_t* buf, jit_state_t* js,
                            jit_served_t* out) {
  *out = (jit_served_t){NULL, e, 1, 0, 0};
  memo_t* m = memo_of(p);
  if (!m) return ask_row(ctx, e, js, f, params, buf, out);
  kernel_memo_t* k = &m->kernel[pass];
  int setting = e->key_setting ? e->key_setting(ctx) : 0;
  size_t pbytes = (size_t)p->nparams * sizeof *params;
  pthread_mutex_lock(&m->lock);
  int hit = k->state == js->id && k->engine == e && k->func == f && k->key_setting == setting && k->serial &&
            (!pbytes || !memcmp(k->params, params, pbytes));
  ir_hash_t key = k->key;
  uint64_t serial = hit ? k->serial : 0;
  if (hit) *out = (jit_served_t){NULL, k->served_by, k->settled, k->record, 0};
  pthread_mutex_unlock(&m->lock);
  if (hit && !out->settled) hit = e->chooser->still(ctx, js, serial, out);
  if (hit && (out->kernel = jit_cache_acquire_serial(js->cache, key, serial))) return UJ_OK;
  uj_status_t s = ask_row(ctx, e, js, f, params, buf, out);
  if (s != UJ_OK || !out->kernel) return s; /* no kernel: its row runs the IR itself, nothing to remember */
  pthread_mutex_lock(&m->lock);
  int64_t* copy = pbytes ? malloc(pbytes) : NULL;
  if (!pbytes || copy) {
    if (pbytes) memcpy(copy, params, pbytes);
    free(k->params);
    k->params = copy;
    k->state = js->id;
    k->engine = e;
    k->served_by = out->engine;
    k->settled = out->settled;
    k->record = out->record;
    k->key_setting = setting;
    k->func = f;
    k->key = jit_cache_key(out->kernel);
    k->serial = jit_cache_serial(out->kernel);
  }
  pthread_mutex_unlock(&m->lock);
  return UJ_OK;
}

void jit_memo_note_run(uj_program_t* p, uj_pass_t pass, uint64_t ctx_id, const jit_served_t* served) {
  memo_t* m = memo_of(p);
  if (!m) return;
  last_run_t* runs = m->last_run[pass];
  /* The common case, a context running its program again the way it did,
   * changes nothing: seen without the lock. Every field is read and written
   * atomically, so a look that races with another context's update sees
   * either value of each; a mismatch takes the lock, and a match whose
   * entry another update is moving down finds it moved intact. */
  if (__atomic_load_n(&runs[0].ctx_id, __ATOMIC_RELAXED) == ctx_id &&
      __atomic_load_n(&runs[0].engine, __ATOMIC_RELAXED) == served->engine &&
      __atomic_load_n(&runs[0].record, __ATOMIC_RELAXED) == served->record)
    return;
  pthread_mutex_lock(&m->lock);
  int at = 0;
  while (at < LAST_RUNS - 1 && runs[at].ctx_id != ctx_id) at++; /* its slot, else the oldest */
  for (int i = at; i > 0; i--) {
    __atomic_store_n(&runs[i].ctx_id, runs[i - 1].ctx_id, __ATOMIC_RELAXED);
    __atomic_store_n(&runs[i].engine, runs[i - 1].engine, __ATOMIC_RELAXED);
    __atomic_store_n(&runs[i].record, runs[i - 1].record, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&runs[0].ctx_id, ctx_id, __ATOMIC_RELAXED);
  __atomic_store_n(&runs[0].engine, served->engine, __ATOMIC_RELAXED);
  __atomic_store_n(&runs[0].record, served->record, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&m->lock);
}

void jit_memo_last_run(const uj_program_t* p, uj_pass_t pass, uint64_t ctx_id, const jit_engine_t** engine,
                       uint64_t* record) {
  memo_t* m = __atomic_load_n(&p->jit_memo, __ATOMIC_ACQUIRE);
  *engine = NULL;
  *record = 0;
  if (!m) return;
  pthread_mutex_lock(&m->lock);
  for (int i = 0; i < LAST_RUNS; i++)
    if (m->last_run[pass][i].ctx_id == ctx_id) {
      *engine = m->last_run[pass][i].engine;
      *record = m->last_run[pass][i].record;
      break;
    }
  pthread_mutex_unlock(&m->lock);
}

/* Contexts with the passes on and off ask about different functions, each
 * replacing the table: the answer is stored through the table of the
 * moment, never through a pointer kept across the unlock. */
int jit_memo_alias_safe(uj_program_t* p, uj_pass_t pass, const ir_func_t* f, int in, int out) {
  memo_t* m = memo_of(p);
  if (!m) return ir_alias_safe(f, in, out);
  alias_memo_t* a = &m->alias[pass];
  size_t n = (size_t)f->ntensors * (size_t)f->ntensors, at = (size_t)in * (size_t)f->ntensors + (size_t)out;
  pthread_mutex_lock(&m->lock);
  if (a->func != f) {
    free(a->safe);
    a->func = f;
    if ((a->safe = malloc(n))) memset(a->safe, -1, n);
  }
  int safe = a->safe ? a->safe[at] : -1;
  pthread_mutex_unlock(&m->lock);
  if (safe >= 0) return safe;
  safe = ir_alias_safe(f, in, out);
  pthread_mutex_lock(&m->lock);
  if (a->func == f && a->safe) a->safe[at] = (signed char)safe;
  pthread_mutex_unlock(&m->lock);
  return safe;
}
