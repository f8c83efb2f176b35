/* backends/conv/state.c: what the convolution backends keep per context,
 * hung from uj_ctx.backend_state: auto's choices per problem shape,
 * prepared filters per filter_key, a slot per backend, the environment's
 * forced backend and instruction set, a scratch buffer and the last
 * backend that ran (above struct bk_conv_state).
 *
 * The state is made on first use, and when threads race to make it the
 * first one stored wins (as with the JIT's state); everything in it is
 * guarded by one mutex, held only for lookups and updates, never while a
 * convolution runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "cpu.h"

/* The byte budget of prepared filters per context. */
#define FILTER_BUDGET ((size_t)512 << 20)

typedef struct {
  bk_conv_op_t op;
  uj_device_t device;
  uj_dtype_t dtype;
  int64_t sizes[9]; /* n h w c k kh kw oh ow */
  int stride_h, stride_w, pad_h, pad_w, has_bias;
  const bk_conv_backend_t* backend;
} choice_t;

struct bk_conv_filter {
  const bk_conv_backend_t* backend;
  uint64_t key;
  int64_t dims[4]; /* w's sizes: k kh kw c */
  int variant;
  void* data;
  void (*free_fn)(void*);
  size_t bytes;
  int holds;     /* calls reading it now */
  int dropped;   /* out of the list; freed at the last release */
  uint64_t used; /* the state's clock at the last find or add */
  bk_conv_filter_t* next;
};

typedef struct {
  void* data;
  void (*free_fn)(void*);
} slot_t;

/* What the backends keep per context:
 *
 *   choices    auto's pick per problem shape (a small array searched
 *              linearly: a network has tens of distinct conv shapes, and a
 *              lookup costs far less than the convolution it picks for);
 *   filters    prepared filters per filter_key (a Winograd transform, a
 *              packing), each held by a count while a call reads it and
 *              evicted least recently used first past a byte budget;
 *   slots      one pointer per backend for what it keeps per context (the
 *              reference's uop programs), freed with the context;
 *   forced     UOPJIT_CONV_BACKEND, read once when the state is made
 *              (UOPJIT_CONV_ISA too, for the CPU kernels: cpu.h); an
 *              invalid value of either is kept as its message, which
 *              the calls that depend on it return (select.c);
 *   scratch    the largest scratch buffer a call gave back, for the next;
 *   last       the backend that ran the last successful call. */
struct bk_conv_state {
  pthread_mutex_t lock;
  choice_t* choices;
  int nchoices, cap;
  bk_conv_filter_t* filters; /* most recently added first */
  size_t filter_bytes;
  uint64_t clock;
  slot_t* slots; /* one per backend of the table */
  const bk_conv_backend_t* forced;
  const char* isa; /* UOPJIT_CONV_ISA (a kernel table's name), or NULL */
  /* why UOPJIT_CONV_BACKEND's and UOPJIT_CONV_ISA's values were refused ("": they were not) */
  char forced_problem[RT_PROBLEM_CAP], isa_problem[RT_PROBLEM_CAP];
  const bk_conv_backend_t* last;
  float* scratch; /* 64-byte aligned, scratch_floats long; NULL when none is kept */
  int64_t scratch_floats;
};

static void filter_free(bk_conv_filter_t* f) {
  f->free_fn(f->data);
  free(f);
}

static void state_free(void* p) {
  bk_conv_state_t* st = p;
  if (!st) return;
  for (bk_conv_filter_t *f = st->filters, *next; f; f = next) {
    next = f->next;
    filter_free(f);
  }
  for (int i = 0; i < bk_conv_backend_total; i++)
    if (st->slots[i].data && st->slots[i].free_fn) st->slots[i].free_fn(st->slots[i].data);
  free(st->scratch);
  free(st->slots);
  free(st->choices);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

uj_status_t bk_conv_env_backend(const bk_conv_backend_t** forced) {
  *forced = NULL;
  char accepted[256] = "one of auto";
  size_t len = strlen(accepted);
  const char* names[32];
  int count = 0;
  for (int i = 0; i < bk_conv_backend_total && count < 32; i++) {
    names[count++] = bk_conv_backends[i]->name;
    len += (size_t)snprintf(accepted + len, len < sizeof accepted ? sizeof accepted - len : 0, ", %s",
                            bk_conv_backends[i]->name);
  }
  static const char* const auto_name[] = {"auto"};
  int index, set;
  if (rt_env_choice("UOPJIT_CONV_BACKEND", auto_name, 1, accepted, &index, &set) == UJ_OK) return UJ_OK;
  uj_status_t s = rt_env_choice("UOPJIT_CONV_BACKEND", names, count, accepted, &index, &set);
  if (s == UJ_OK && set) *forced = bk_conv_backends[index];
  return s;
}

uj_status_t bk_conv_env_isa(const char** isa) {
  *isa = NULL;
  int count;
  const bk_conv_kernel_t* k = bk_conv_kernels(&count);
  const char* names[8];
  char accepted[160] = "";
  size_t len = 0;
  for (int i = 0; i < count && i < 8; i++) {
    names[i] = k[i].isa;
    len += (size_t)snprintf(accepted + len, len < sizeof accepted ? sizeof accepted - len : 0, "%s%s",
                            i ? (i + 1 == count ? " or " : ", ") : "", k[i].isa);
  }
  snprintf(accepted + len, len < sizeof accepted ? sizeof accepted - len : 0, " (the instruction sets this CPU runs)");
  int index, set;
  uj_status_t s = rt_env_choice("UOPJIT_CONV_ISA", names, count < 8 ? count : 8, accepted, &index, &set);
  if (s == UJ_OK && set) *isa = k[index].isa;
  return s;
}

bk_conv_state_t* bk_conv_state(uj_ctx_t* ctx) {
  bk_conv_state_t* st = __atomic_load_n(&ctx->backend_state, __ATOMIC_ACQUIRE);
  if (st) return st;
  st = calloc(1, sizeof *st);
  if (st) st->slots = calloc((size_t)bk_conv_backend_total, sizeof *st->slots);
  if (!st || !st->slots || pthread_mutex_init(&st->lock, NULL) != 0) {
    if (st) free(st->slots);
    free(st);
    rt_error(UJ_ERR_OOM, "out of memory creating the convolution backends' state (%zu bytes)",
             sizeof *st + (size_t)bk_conv_backend_total * sizeof *st->slots);
    return NULL;
  }
  /* an invalid value is kept as its message, for the calls it concerns */
  if (bk_conv_env_backend(&st->forced) != UJ_OK)
    snprintf(st->forced_problem, sizeof st->forced_problem, "%s", uj_last_error());
  if (bk_conv_env_isa(&st->isa) != UJ_OK) snprintf(st->isa_problem, sizeof st->isa_problem, "%s", uj_last_error());
  void* expected = NULL;
  __atomic_store_n(&ctx->backend_state_free, state_free, __ATOMIC_RELAXED); /* the same value from every racer */
  if (!__atomic_compare_exchange_n(&ctx->backend_state, &expected, st, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    state_free(st);
    return expected;
  }
  return st;
}

const bk_conv_backend_t* bk_conv_state_forced(bk_conv_state_t* st, const char** problem) {
  *problem = st->forced_problem[0] ? st->forced_problem : NULL;
  return st->forced;
}

const char* bk_conv_state_isa_problem(bk_conv_state_t* st) { return st->isa_problem[0] ? st->isa_problem : NULL; }

const char* bk_conv_state_isa(bk_conv_state_t* st) { return st->isa; }

/* ---- auto's choices ---- */

static void choice_key(const bk_conv_problem_t* p, choice_t* c) {
  memset(c, 0, sizeof *c);
  c->op = p->op;
  c->device = p->device;
  c->dtype = p->dtype;
  const int64_t sizes[9] = {p->n, p->h, p->w, p->c, p->k, p->kh, p->kw, p->oh, p->ow};
  memcpy(c->sizes, sizes, sizeof sizes);
  c->stride_h = p->stride_h;
  c->stride_w = p->stride_w;
  c->pad_h = p->pad_h;
  c->pad_w = p->pad_w;
  c->has_bias = p->has_bias;
}

static int same_choice_key(const choice_t* a, const choice_t* b) {
  return a->op == b->op && a->device == b->device && a->dtype == b->dtype &&
         !memcmp(a->sizes, b->sizes, sizeof a->sizes) && a->stride_h == b->stride_h && a->stride_w == b->stride_w &&
         a->pad_h == b->pad_h && a->pad_w == b->pad_w && a->has_bias == b->has_bias;
}

const bk_conv_backend_t* bk_conv_state_choice(bk_conv_state_t* st, const bk_conv_problem_t* p) {
  choice_t key;
  choice_key(p, &key);
  const bk_conv_backend_t* found = NULL;
  pthread_mutex_lock(&st->lock);
  for (int i = 0; i < st->nchoices && !found; i++)
    if (same_choice_key(&st->choices[i], &key)) found = st->choices[i].backend;
  pthread_mutex_unlock(&st->lock);
  return found;
}

void bk_conv_state_remember(bk_conv_state_t* st, const bk_conv_problem_t* p, const bk_conv_backend_t* b) {
  choice_t key;
  choice_key(p, &key);
  key.backend = b;
  pthread_mutex_lock(&st->lock);
  int i = 0;
  while (i < st->nchoices && !same_choice_key(&st->choices[i], &key)) i++;
  if (i == st->nchoices) rt_grow((void**)&st->choices, &st->cap, st->nchoices + 1, sizeof *st->choices);
  if (i < st->cap) {
    st->choices[i] = key;
    if (i == st->nchoices) st->nchoices++;
  }
  pthread_mutex_unlock(&st->lock);
}

void bk_conv_state_set_last(bk_conv_state_t* st, const bk_conv_backend_t* b) {
  pthread_mutex_lock(&st->lock);
  st->last = b;
  pthread_mutex_unlock(&st->lock);
}

const bk_conv_backend_t* bk_conv_state_last(bk_conv_state_t* st) {
  pthread_mutex_lock(&st->lock);
  const bk_conv_backend_t* b = st->last;
  pthread_mutex_unlock(&st->lock);
  return b;
}

/* ---- per-backend slots ---- */

void** bk_conv_state_slot(bk_conv_state_t* st, const bk_conv_backend_t* b, void (*free_fn)(void*)) {
  for (int i = 0; i < bk_conv_backend_total; i++)
    if (bk_conv_backends[i] == b) {
      st->slots[i].free_fn = free_fn;
      return &st->slots[i].data;
    }
  return NULL;
}

void bk_conv_state_lock(bk_conv_state_t* st) { pthread_mutex_lock(&st->lock); }
void bk_conv_state_unlock(bk_conv_state_t* st) { pthread_mutex_unlock(&st->lock); }

/* ---- prepared filters ---- */

static int filter_matches(const bk_conv_filter_t* f, const bk_conv_backend_t* b, const bk_conv_problem_t* p,
                          int variant) {
  return f->backend == b && f->key == p->filter_key && f->variant == variant && f->dims[0] == p->k &&
         f->dims[1] == p->kh && f->dims[2] == p->kw && f->dims[3] == p->c;
}

/* Unlinks f; frees it now when no call holds it, else at its last release. */
static void filter_drop(bk_conv_state_t* st, bk_conv_filter_t** link) {
  bk_conv_filter_t* f = *link;
  *link = f->next;
  st->filter_bytes -= f->bytes;
  if (f->holds) f->dropped = 1;
  else filter_free(f);
}

/* Evicts the least recently used unheld entries until the budget holds. */
static void filter_evict(bk_conv_state_t* st) {
  while (st->filter_bytes > FILTER_BUDGET) {
    bk_conv_filter_t** oldest = NULL;
    for (bk_conv_filter_t** link = &st->filters; *link; link = &(*link)->next)
      if (!(*link)->holds && (!oldest || (*link)->used < (*oldest)->used)) oldest = link;
    if (!oldest) return; /* everything is in use: over budget until released */
    filter_drop(st, oldest);
  }
}

bk_conv_filter_t* bk_conv_filter_find(bk_conv_state_t* st, const bk_conv_backend_t* b, const bk_conv_problem_t* p,
                                      int variant) {
  if (!p->filter_key) return NULL;
  pthread_mutex_lock(&st->lock);
  bk_conv_filter_t* f = st->filters;
  while (f && !filter_matches(f, b, p, variant)) f = f->next;
  if (f) {
    f->holds++;
    f->used = ++st->clock;
  }
  pthread_mutex_unlock(&st->lock);
  return f;
}

bk_conv_filter_t* bk_conv_filter_add(bk_conv_state_t* st, const bk_conv_backend_t* b, const bk_conv_problem_t* p,
                                     int variant, void* data, size_t bytes, void (*free_fn)(void*)) {
  if (!free_fn) free_fn = free;
  bk_conv_filter_t* f = calloc(1, sizeof *f);
  if (!f) {
    free_fn(data);
    return NULL;
  }
  *f = (bk_conv_filter_t){b, p->filter_key, {p->k, p->kh, p->kw, p->c}, variant, data, free_fn, bytes, 1, 0, 0, NULL};
  pthread_mutex_lock(&st->lock);
  /* the same key with other sizes or from another backend is a different
   * entry; the same everything (two calls racing to prepare it) is replaced */
  for (bk_conv_filter_t** link = &st->filters; *link;) {
    if (filter_matches(*link, b, p, variant)) filter_drop(st, link);
    else link = &(*link)->next;
  }
  f->used = ++st->clock;
  f->next = st->filters;
  st->filters = f;
  st->filter_bytes += bytes;
  filter_evict(st);
  pthread_mutex_unlock(&st->lock);
  return f;
}

const void* bk_conv_filter_data(const bk_conv_filter_t* f) { return f->data; }

void bk_conv_filter_release(bk_conv_state_t* st, bk_conv_filter_t* f) {
  if (!f) return;
  pthread_mutex_lock(&st->lock);
  int free_now = --f->holds == 0 && f->dropped;
  if (!free_now && !f->holds) filter_evict(st);
  pthread_mutex_unlock(&st->lock);
  if (free_now) filter_free(f);
}

void bk_conv_filter_forget(bk_conv_state_t* st, uint64_t key) {
  pthread_mutex_lock(&st->lock);
  for (bk_conv_filter_t** link = &st->filters; *link;) {
    if (!key || (*link)->key == key) filter_drop(st, link);
    else link = &(*link)->next;
  }
  pthread_mutex_unlock(&st->lock);
}

/* ---- scratch ---- */

float* bk_conv_scratch_take(bk_conv_state_t* st, int64_t floats, int64_t* got, const char* what) {
  pthread_mutex_lock(&st->lock);
  float* kept = st->scratch;
  int64_t kept_floats = st->scratch_floats;
  st->scratch = NULL;
  st->scratch_floats = 0;
  pthread_mutex_unlock(&st->lock);
  if (kept && kept_floats >= floats) {
    *got = kept_floats;
    return kept;
  }
  free(kept); /* too small for this call: the larger one replaces it */
  int64_t bytes;
  if (floats < 0 || !rt_mul_i64(floats < 1 ? 1 : floats, (int64_t)sizeof(float), &bytes) || bytes > INT64_MAX - 64) {
    rt_error(UJ_ERR_OOM, "%s: %lld floats of scratch is more than can be addressed", what, (long long)floats);
    return NULL;
  }
  float* p = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
  if (!p) {
    rt_error(UJ_ERR_OOM, "%s: out of memory for %lld bytes of scratch", what, (long long)bytes);
    return NULL;
  }
  *got = floats;
  return p;
}

void bk_conv_scratch_give(bk_conv_state_t* st, float* p, int64_t floats) {
  if (!p) return;
  pthread_mutex_lock(&st->lock);
  if (!st->scratch || st->scratch_floats < floats) {
    float* old = st->scratch;
    st->scratch = p;
    st->scratch_floats = floats;
    p = old;
  }
  pthread_mutex_unlock(&st->lock);
  free(p);
}

rt_pool_t* bk_conv_pool(uj_ctx_t* ctx) {
  jit_state_t* js = jit_state(ctx);
  return js ? js->pool : NULL;
}
