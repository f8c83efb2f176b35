/* jit/groups_check.c: the checks of multi-tensor execution that look at
 * every group: whether each fits the fast path's plan (cheap: a few
 * compares per tensor, since a call may bring 10,000 groups), and whether
 * an output of one group overlaps a tensor of another.
 *
 * The overlap check sorts the byte ranges of the groups' tensors by start
 * address (an LSD radix sort, 11 bits at a time, skipping the digits all
 * addresses share: linear in the tensors,
 * where a comparison sort of 70,000 ranges would cost as much as a step of
 * small tensors) and sweeps them in order, keeping, among the ranges seen,
 * the two furthest-reaching ends that belong to different groups, for
 * outputs and for all ranges: a range overlaps a range of another group
 * exactly when it starts before one of those ends. A tensor every group
 * shares (a common scalar: the same pointer as group 0's) is entered once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"

static int same_shape(const uj_tensor_t* t, int ndim, const int64_t* dims) {
  if (t->ndim != ndim) return 0;
  for (int a = 0; a < ndim; a++)
    if (t->dims[a] != dims[a]) return 0;
  return 1;
}

static int tensor_ok(const uj_tensor_t* t, uj_device_t dev, uj_dtype_t dtype, int64_t numel) {
  return t && t->device == dev && t->dtype == dtype && (numel == 0 || t->data);
}

static int64_t bytes_of(const uj_tensor_t* t) {
  int64_t n = 1;
  for (int a = 0; a < t->ndim; a++) n *= t->dims[a];
  return n * uj_dtype_size(t->dtype);
}

/* 1 when [a, a+na) and [b, b+nb) share a byte. */
static int overlaps(const void* a, int64_t na, const void* b, int64_t nb) {
  const char *pa = a, *pb = b;
  return na && nb && pa < pb + nb && pb < pa + na;
}

/* Within the group: an output shares memory with an input only exactly,
 * where the flat build may write it in place, and with no other output.
 * The byte counts come from group_ok, which has checked every shape and
 * dtype: nothing here walks dims again (a call may bring 10,000 groups). */
static int group_memory_ok(const groups_plan_t* plan, const uj_group_t* g, const int64_t* in_bytes,
                           const int64_t* out_bytes) {
  for (int o = 0; o < plan->nout; o++) {
    const uj_tensor_t* out = g->outputs[o];
    for (int i = 0; i < plan->nin; i++) {
      const uj_tensor_t* in = g->inputs[i];
      if (!overlaps(out->data, out_bytes[o], in->data, in_bytes[i])) continue;
      int exact = in->data == out->data && in_bytes[i] == out_bytes[o] && in->dtype == out->dtype;
      if (!exact || plan->in_kind[i] != GK_GROUP || plan->out_kind[o] != GK_GROUP || !plan->alias_safe[o][i])
        return 0;
    }
    for (int o2 = 0; o2 < o; o2++)
      if (overlaps(out->data, out_bytes[o], g->outputs[o2]->data, out_bytes[o2])) return 0;
  }
  return 1;
}

/* Element sizes of the plan's slots, looked up once per call. */
typedef struct {
  int64_t in[GROUPS_MAX_SLOTS], out[GROUPS_MAX_SLOTS];
} slot_sizes_t;

static int group_ok(const groups_plan_t* plan, const slot_sizes_t* esize, const uj_group_t* g, uj_device_t dev,
                    int64_t* numel_out) {
  if ((plan->nin && !g->inputs) || !g->outputs) return 0;
  const uj_tensor_t* shape = NULL;
  for (int i = 0; i < plan->nin && !shape; i++)
    if (plan->in_kind[i] == GK_GROUP) shape = g->inputs[i];
  if (!shape || shape->ndim < 0 || shape->ndim > UJ_MAX_DIMS) return 0;
  int64_t numel = 1;
  for (int a = 0; a < shape->ndim; a++) {
    if (shape->dims[a] < 0 || (shape->dims[a] && numel > INT64_MAX / 16 / shape->dims[a])) return 0;
    numel *= shape->dims[a];
  }
  *numel_out = numel;
  int64_t in_bytes[GROUPS_MAX_SLOTS], out_bytes[GROUPS_MAX_SLOTS];
  for (int i = 0; i < plan->nin; i++) {
    const uj_tensor_t* t = g->inputs[i];
    int scalar = plan->in_kind[i] == GK_SCALAR;
    if (!tensor_ok(t, dev, plan->in_dtype[i], scalar ? 1 : numel)) return 0;
    if (scalar ? t->ndim != 0 : !same_shape(t, shape->ndim, shape->dims)) return 0;
    in_bytes[i] = (scalar ? 1 : numel) * esize->in[i];
  }
  for (int o = 0; o < plan->nout; o++) {
    const uj_tensor_t* t = g->outputs[o];
    if (plan->out_kind[o] == GK_GROUP) {
      if (!tensor_ok(t, dev, plan->out_dtype[o], numel) || !same_shape(t, shape->ndim, shape->dims)) return 0;
      out_bytes[o] = numel * esize->out[o];
      continue;
    }
    int rank = plan->reduced_rank[shape->ndim][o];
    if (!tensor_ok(t, dev, plan->out_dtype[o], 1) || t->ndim != rank) return 0;
    for (int a = 0; a < rank; a++)
      if (t->dims[a] != 1) return 0;
    out_bytes[o] = esize->out[o];
  }
  return group_memory_ok(plan, g, in_bytes, out_bytes);
}

int groups_check_fast(groups_plan_t* plan, const uj_group_t* groups, int group_count, uj_device_t dev) {
  plan->total = 0;
  slot_sizes_t esize;
  for (int i = 0; i < plan->nin; i++) esize.in[i] = uj_dtype_size(plan->in_dtype[i]);
  for (int o = 0; o < plan->nout; o++) esize.out[o] = uj_dtype_size(plan->out_dtype[o]);
  for (int g = 0; g < group_count; g++) {
    if (!group_ok(plan, &esize, &groups[g], dev, &plan->numel[g])) return 0;
    plan->total += plan->numel[g];
  }
  return 1;
}

/* ---- overlap between groups ---- */

typedef struct {
  uintptr_t start, end;
  int group;
  short slot;     /* input or output slot */
  short output;   /* 1: an output */
} range_t;

enum { RADIX_BITS = 11, RADIX_BUCKETS = 1 << RADIX_BITS, RADIX_DIGITS = (8 * sizeof(uintptr_t) + RADIX_BITS - 1) / RADIX_BITS };

/* The ranges of the last list found free of overlaps, in the order they
 * were listed: an optimizer passes the same tensors every step, and
 * comparing its list with this one costs far less than sorting it. */
static struct {
  pthread_mutex_t lock;
  range_t* ranges;
  size_t n;
} verified = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static int seen_verified(const range_t* r, size_t n) {
  pthread_mutex_lock(&verified.lock);
  int same = verified.ranges && verified.n == n && !memcmp(verified.ranges, r, n * sizeof *r);
  pthread_mutex_unlock(&verified.lock);
  return same;
}

/* Remembers r as verified, taking ownership of it (freeing the old list). */
static void note_verified(range_t* r, size_t n) {
  pthread_mutex_lock(&verified.lock);
  range_t* old = verified.ranges;
  verified.ranges = r, verified.n = n;
  pthread_mutex_unlock(&verified.lock);
  free(old);
}

/* Sorts a[0..n) by start into a or tmp; returns the one holding the result. */
static range_t* radix_sort(range_t* a, range_t* tmp, size_t n, size_t (*count)[RADIX_BUCKETS]) {
  memset(count, 0, sizeof(size_t) * RADIX_DIGITS * RADIX_BUCKETS);
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < RADIX_DIGITS; d++) count[d][(a[i].start >> (d * RADIX_BITS)) & (RADIX_BUCKETS - 1)]++;
  for (int d = 0; d < RADIX_DIGITS; d++) {
    int shift = d * RADIX_BITS;
    if (n == 0 || count[d][(a[0].start >> shift) & (RADIX_BUCKETS - 1)] == n) continue; /* one digit for all */
    size_t sum = 0;
    for (size_t b = 0; b < RADIX_BUCKETS; b++) {
      size_t c = count[d][b];
      count[d][b] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) tmp[count[d][(a[i].start >> shift) & (RADIX_BUCKETS - 1)]++] = a[i];
    range_t* t = a;
    a = tmp, tmp = t;
  }
  return a;
}

/* The two furthest ends seen, from different groups. */
typedef struct {
  uintptr_t end[2];
  int group[2];
  int index[2]; /* into the sorted ranges */
} reach_t;

static void reach_note(reach_t* r, const range_t* x, int index) {
  if (x->group == r->group[0]) {
    if (x->end > r->end[0]) r->end[0] = x->end, r->index[0] = index;
  } else if (x->end > r->end[0]) {
    r->end[1] = r->end[0], r->group[1] = r->group[0], r->index[1] = r->index[0];
    r->end[0] = x->end, r->group[0] = x->group, r->index[0] = index;
  } else if (x->end > r->end[1]) {
    r->end[1] = x->end, r->group[1] = x->group, r->index[1] = index;
  }
}

/* The index of a range in r from a group other than x's that reaches past x's start, or -1. */
static int reach_hit(const reach_t* r, const range_t* x) {
  for (int k = 0; k < 2; k++)
    if (r->group[k] >= 0 && r->group[k] != x->group && r->end[k] > x->start) return r->index[k];
  return -1;
}

static uj_status_t overlap_error(const range_t* a, const range_t* b) {
  if (!a->output) {
    const range_t* t = a;
    a = b, b = t;
  }
  return rt_error(UJ_ERR_INVALID, "group %d: output %d overlaps %s %d of group %d: groups must not share memory",
                  a->group, a->slot, b->output ? "output" : "input", b->slot, b->group);
}

/* The byte ranges to compare: each group's outputs, and its inputs but for
 * those that are exactly one of its outputs (in place) or group 0's
 * (shared). */
static size_t list_ranges(const uj_group_t* groups, int group_count, int input_count, int output_count, range_t* r) {
  /* each tensor's bytes counted once: group 0's inputs for the shared
   * test, each group's outputs for the in-place test */
  int64_t shared_bytes[GROUPS_MAX_SLOTS], out_bytes[GROUPS_MAX_SLOTS];
  int small = input_count <= GROUPS_MAX_SLOTS && output_count <= GROUPS_MAX_SLOTS;
  for (int i = 0; small && i < input_count; i++)
    shared_bytes[i] = groups[0].inputs[i] ? bytes_of(groups[0].inputs[i]) : 0;
  size_t n = 0;
  for (int g = 0; g < group_count; g++) {
    const uj_group_t* gr = &groups[g];
    for (int o = 0; o < output_count; o++) {
      const uj_tensor_t* t = gr->outputs[o];
      int64_t bytes = t ? bytes_of(t) : 0;
      if (small) out_bytes[o] = bytes;
      if (bytes) r[n++] = (range_t){(uintptr_t)t->data, (uintptr_t)t->data + (uintptr_t)bytes, g, (short)o, 1};
    }
    for (int i = 0; i < input_count; i++) {
      const uj_tensor_t* t = gr->inputs[i];
      if (!t) continue;
      const uj_tensor_t* shared = groups[0].inputs[i];
      if (g > 0 && shared && t->data == shared->data &&
          bytes_of(t) == (small ? shared_bytes[i] : bytes_of(shared)))
        continue;
      int64_t bytes = bytes_of(t);
      int in_place = 0;
      for (int o = 0; o < output_count && !in_place; o++) {
        const uj_tensor_t* out = gr->outputs[o];
        in_place = out && out->data == t->data && (small ? out_bytes[o] : bytes_of(out)) == bytes;
      }
      if (bytes && !in_place)
        r[n++] = (range_t){(uintptr_t)t->data, (uintptr_t)t->data + (uintptr_t)bytes, g, (short)i, 0};
    }
  }
  return n;
}

uj_status_t groups_check_overlap(const uj_group_t* groups, int group_count, int input_count, int output_count) {
  size_t cap = (size_t)group_count * (size_t)(input_count + output_count);
  range_t* r = malloc((cap + 1) * sizeof *r);
  if (!r) return rt_error(UJ_ERR_OOM, "out of memory listing the %zu tensors of %d groups (%zu bytes)", cap,
                          group_count, (cap + 1) * sizeof *r);
  size_t n = list_ranges(groups, group_count, input_count, output_count, r);
  if (seen_verified(r, n)) {
    free(r);
    return UJ_OK;
  }
  range_t* sorted = malloc((cap + 1) * sizeof *sorted);
  range_t* tmp = malloc((cap + 1) * sizeof *tmp);
  size_t(*count)[RADIX_BUCKETS] = malloc(sizeof(size_t) * RADIX_DIGITS * RADIX_BUCKETS);
  uj_status_t s = UJ_OK;
  if (!sorted || !tmp || !count) {
    s = rt_error(UJ_ERR_OOM, "out of memory sorting the %zu tensors of %d groups (%zu bytes)", n, group_count,
                 2 * (cap + 1) * sizeof *r + sizeof(size_t) * RADIX_DIGITS * RADIX_BUCKETS);
  } else {
    memcpy(sorted, r, n * sizeof *r);
    const range_t* in_order = radix_sort(sorted, tmp, n, count);
    reach_t outs = {{0, 0}, {-1, -1}, {0, 0}}, all = {{0, 0}, {-1, -1}, {0, 0}};
    for (size_t i = 0; i < n && s == UJ_OK; i++) {
      int hit = reach_hit(&outs, &in_order[i]);
      if (hit < 0 && in_order[i].output) hit = reach_hit(&all, &in_order[i]);
      if (hit >= 0) s = overlap_error(&in_order[hit], &in_order[i]);
      if (in_order[i].output) reach_note(&outs, &in_order[i], (int)i);
      reach_note(&all, &in_order[i], (int)i);
    }
  }
  free(sorted), free(tmp), free(count);
  if (s == UJ_OK) note_verified(r, n);
  else free(r);
  return s;
}
