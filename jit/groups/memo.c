/* jit/groups/memo.c: the list of groups a context's multi-tensor calls ran
 * on, so that a call with that list again (an optimizer's step after
 * step) need not walk it again (DESIGN section 7, "Multi-tensor execution").
 *
 * A training loop calls with one list of groups step after step: the same
 * tensor structs and data, only the values in the data new. The walk over
 * the groups (jit/groups/gather.c) is a part of an AdamW step over many
 * small groups that the threads cannot share well (docs/ENGINES.md,
 * "Measured"). The memo holds what a walk gathered (the summary, each
 * group's elements and data pointers) and a record of every value that
 * walk read. A call whose list matches the record value for value gathers
 * exactly what the walk would, so it borrows the memo's; and its overlap
 * check (jit/groups/check.c) passed on that list when the record was made,
 * so it passes again. Matching is a load and a compare a slot, and a few
 * for each struct not met before. */
#include <stdlib.h>
#include <string.h>

#include "groups.h"

enum { MAX_WAIT = 64, LISTS = 4 };

/* A list a call ran on. */
typedef struct {
  const uj_group_t* groups; /* NULL: an empty entry */
  int count, nin, nout;
  uint64_t last_used;       /* the memo's call count at its last call */
  int wait, last_wait;      /* its calls before a record may be made again */
  /* the record (NULL: none) and what that walk gathered, its arrays ours */
  uint64_t* words;
  size_t nwords, cap;
  groups_gather_t ga;
} list_t;

typedef struct {
  list_t lists[LISTS];
  uint64_t calls;
} memo_t;

static void drop_record(list_t* m) {
  free(m->words);
  free(m->ga.numel);
  free(m->ga.data);
  m->words = NULL;
  m->nwords = m->cap = 0;
  memset(&m->ga, 0, sizeof m->ga);
}

static list_t* list_of(memo_t* m, const uj_group_t* groups, int count, int nin, int nout) {
  for (int k = 0; m && k < LISTS; k++) {
    list_t* l = &m->lists[k];
    if (l->groups == groups && l->count == count && l->nin == nin && l->nout == nout) return l;
  }
  return NULL;
}

int groups_memo_recorded(const void* memo, const uj_group_t* groups, int count) {
  for (int k = 0; memo && k < LISTS; k++) {
    const list_t* l = &((const memo_t*)memo)->lists[k];
    if (l->words && l->groups == groups && l->count == count) return 1;
  }
  return 0;
}

void groups_memo_free(void* memo) {
  memo_t* m = memo;
  for (int k = 0; m && k < LISTS; k++) drop_record(&m->lists[k]);
  free(m);
}

static int push(list_t* m, uint64_t w) {
  if (m->nwords == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 1024;
    uint64_t* words = realloc(m->words, cap * sizeof *words);
    if (!words) return 0;
    m->words = words, m->cap = cap;
  }
  m->words[m->nwords++] = w;
  return 1;
}

/* The tensor of slot s of gr (inputs, then outputs). */
static const uj_tensor_t* slot_tensor(const uj_group_t* gr, int nin, int s) {
  return s < nin ? gr->inputs[s] : gr->outputs[s - nin];
}

/* Whether the struct of slot s of group g was recorded already: the same
 * address in slot s of group 0, or in an earlier slot of this group. */
static int met(const uj_group_t* groups, int g, int nin, int s, const uj_tensor_t* t) {
  if (g > 0 && slot_tensor(&groups[0], nin, s) == t) return 1;
  for (int e = 0; e < s; e++)
    if (slot_tensor(&groups[g], nin, e) == t) return 1;
  return 0;
}

/* A struct's dtype and device, both whole: a value outside the enums
 * must not pass for another that is inside. */
static uint64_t kind(const uj_tensor_t* t) { return (uint64_t)(uint32_t)t->dtype | (uint64_t)(uint32_t)t->device << 32; }

/* Records the list in m->words; 0 on out of memory or a struct the fast
 * path would not have taken (a rank out of range). Per group and slot the
 * address of the tensor struct and, unless the same struct was recorded
 * already (met: a shared scalar, an output in place over an input), the
 * struct's data, dtype, device, rank and sizes. */
static int record(list_t* m, const uj_group_t* groups, int count, int nin, int nout) {
  m->nwords = 0;
  for (int g = 0; g < count; g++) {
    if (!groups[g].inputs || !groups[g].outputs) return 0;
    for (int s = 0; s < nin + nout; s++) {
      const uj_tensor_t* t = slot_tensor(&groups[g], nin, s);
      if (!t || !push(m, (uintptr_t)t)) return 0;
      if (met(groups, g, nin, s, t)) continue;
      if (t->ndim < 0 || t->ndim > UJ_MAX_DIMS || !push(m, (uintptr_t)t->data) || !push(m, kind(t)) ||
          !push(m, (uint64_t)t->ndim))
        return 0;
      for (int a = 0; a < t->ndim; a++)
        if (!push(m, (uint64_t)t->dims[a])) return 0;
    }
  }
  return 1;
}

/* 1 when the list matches the record value for value. */
static int matches(const list_t* m, const uj_group_t* groups, int count, int nin, int nout) {
  const uint64_t* w = m->words;
  const uint64_t* end = m->words + m->nwords;
  for (int g = 0; g < count; g++) {
    if (!groups[g].inputs || !groups[g].outputs) return 0;
    for (int s = 0; s < nin + nout; s++) {
      const uj_tensor_t* t = slot_tensor(&groups[g], nin, s);
      if (w == end || *w++ != (uintptr_t)t || !t) return 0;
      if (met(groups, g, nin, s, t)) continue;
      if (end - w < 3 || w[0] != (uintptr_t)t->data || w[1] != kind(t) || w[2] != (uint64_t)(int64_t)t->ndim) return 0;
      w += 3;
      if (t->ndim < 0 || t->ndim > UJ_MAX_DIMS || end - w < t->ndim) return 0;
      for (int a = 0; a < t->ndim; a++)
        if (*w++ != (uint64_t)t->dims[a]) return 0;
    }
  }
  return w == end;
}

int groups_memo_find(void* memo, const uj_group_t* groups, int count, int nin, int nout, groups_gather_t* ga) {
  list_t* m = list_of(memo, groups, count, nin, nout);
  if (!m || !m->words) return 0;
  if (!matches(m, groups, count, nin, nout)) {
    drop_record(m);
    m->last_wait = m->wait = m->last_wait ? (2 * m->last_wait < MAX_WAIT ? 2 * m->last_wait : MAX_WAIT) : 1;
    return 0;
  }
  *ga = m->ga;
  ga->borrowed = 1;
  ga->ranges_verified = 1;
  return 1;
}

/* A record is made after a call that ran on the fast path with a list
 * (address, count, slots) one of the context's last LISTS calls had, so a
 * caller that brings a new list every call never pays for one, and one
 * that alternates a few lists (an optimizer's passes: the norms, then the
 * update) has each recorded. A record that stops matching is dropped
 * (groups_memo_find); the next for that list is made only after twice as
 * many calls with it as the last wait (up to MAX_WAIT), so that a list
 * whose structs change under the same address costs little more than the
 * walk. */
void groups_memo_keep(void** memo, void (**memo_free)(void*), const uj_group_t* groups, int count, int nin,
                      int nout, groups_gather_t* ga) {
  memo_t* mm = *memo;
  if (!mm) {
    if (!(mm = calloc(1, sizeof *mm))) return; /* out of memory: no memo, the walk every call */
    *memo = mm, *memo_free = groups_memo_free;
  }
  mm->calls++;
  list_t* m = list_of(mm, groups, count, nin, nout);
  if (m) m->last_used = mm->calls;
  if (ga->borrowed || !ga->summarized || !ga->numel || !ga->data) return;
  if (!m) { /* a list new to the memo: in the entry used longest ago */
    m = &mm->lists[0];
    for (int k = 1; k < LISTS; k++)
      if (mm->lists[k].last_used < m->last_used) m = &mm->lists[k];
    drop_record(m);
    *m = (list_t){groups, count, nin, nout, mm->calls, 0, 0, NULL, 0, 0, {0}};
    return;
  }
  if (m->wait > 0) {
    m->wait--;
    return;
  }
  drop_record(m);
  if (!record(m, groups, count, nin, nout)) {
    drop_record(m);
    return;
  }
  /* what the walk gathered, less the overlap list (the check has it) */
  m->ga = *ga;
  m->ga.ranges = NULL, m->ga.nranges = 0;
  ga->numel = NULL, ga->data = NULL;
}
