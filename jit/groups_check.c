/* jit/groups_check.c: the checks of multi-tensor execution that look at
 * every group: whether each fits the fast path's plan (cheap: a few
 * compares per tensor, since a call may bring 10,000 groups), and whether
 * an output of one group overlaps a tensor of another.
 *
 * The overlap check sorts the byte ranges of the groups' tensors by start
 * address (an LSD radix sort, 16 bits at a time: linear in the tensors,
 * where a comparison sort of 70,000 ranges would cost as much as a step of
 * small tensors) and sweeps them in order, keeping, among the ranges seen,
 * the two furthest-reaching ends that belong to different groups, for
 * outputs and for all ranges: a range overlaps a range of another group
 * exactly when it starts before one of those ends. A tensor every group
 * shares (a common scalar: the same pointer as group 0's) is entered once. */
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
static int overlaps(const uj_tensor_t* a, const uj_tensor_t* b) {
  int64_t na = bytes_of(a), nb = bytes_of(b);
  const char *pa = a->data, *pb = b->data;
  return na && nb && pa < pb + nb && pb < pa + na;
}

/* Within the group: an output shares memory with an input only exactly,
 * where the flat build may write it in place, and with no other output. */
static int group_memory_ok(const groups_plan_t* plan, const uj_group_t* g) {
  for (int o = 0; o < plan->nout; o++) {
    const uj_tensor_t* out = g->outputs[o];
    for (int i = 0; i < plan->nin; i++) {
      const uj_tensor_t* in = g->inputs[i];
      if (!overlaps(out, in)) continue;
      int exact = in->data == out->data && bytes_of(in) == bytes_of(out) && in->dtype == out->dtype;
      if (!exact || plan->in_kind[i] != GK_GROUP || plan->out_kind[o] != GK_GROUP || !plan->alias_safe[o][i])
        return 0;
    }
    for (int o2 = 0; o2 < o; o2++)
      if (overlaps(out, g->outputs[o2])) return 0;
  }
  return 1;
}

static int group_ok(const groups_plan_t* plan, const uj_group_t* g, uj_device_t dev) {
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
  for (int i = 0; i < plan->nin; i++) {
    const uj_tensor_t* t = g->inputs[i];
    if (!tensor_ok(t, dev, plan->in_dtype[i], plan->in_kind[i] == GK_SCALAR ? 1 : numel)) return 0;
    if (plan->in_kind[i] == GK_SCALAR ? t->ndim != 0 : !same_shape(t, shape->ndim, shape->dims)) return 0;
  }
  for (int o = 0; o < plan->nout; o++) {
    const uj_tensor_t* t = g->outputs[o];
    if (plan->out_kind[o] == GK_GROUP) {
      if (!tensor_ok(t, dev, plan->out_dtype[o], numel) || !same_shape(t, shape->ndim, shape->dims)) return 0;
      continue;
    }
    int rank = plan->reduced_rank[shape->ndim][o];
    if (!tensor_ok(t, dev, plan->out_dtype[o], 1) || t->ndim != rank) return 0;
    for (int a = 0; a < rank; a++)
      if (t->dims[a] != 1) return 0;
  }
  return group_memory_ok(plan, g);
}

int groups_check_fast(const groups_plan_t* plan, const uj_group_t* groups, int group_count, uj_device_t dev) {
  for (int g = 0; g < group_count; g++)
    if (!group_ok(plan, &groups[g], dev)) return 0;
  return 1;
}

/* ---- overlap between groups ---- */

typedef struct {
  uintptr_t start, end;
  int group;
  short slot;     /* input or output slot */
  short output;   /* 1: an output */
} range_t;

static void radix_sort(range_t* a, range_t* tmp, size_t n) {
  enum { BITS = 16, BUCKETS = 1 << BITS };
  size_t* count = malloc(BUCKETS * sizeof *count);
  if (!count) { /* no memory for the counts: a slower sort that needs none */
    for (size_t i = 1; i < n; i++)
      for (size_t j = i; j > 0 && a[j - 1].start > a[j].start; j--) {
        range_t t = a[j];
        a[j] = a[j - 1], a[j - 1] = t;
      }
    return;
  }
  for (int shift = 0; shift < (int)(8 * sizeof(uintptr_t)); shift += BITS) {
    memset(count, 0, BUCKETS * sizeof *count);
    for (size_t i = 0; i < n; i++) count[(a[i].start >> shift) & (BUCKETS - 1)]++;
    size_t sum = 0;
    for (size_t b = 0; b < BUCKETS; b++) {
      size_t c = count[b];
      count[b] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) tmp[count[(a[i].start >> shift) & (BUCKETS - 1)]++] = a[i];
    memcpy(a, tmp, n * sizeof *a);
  }
  free(count);
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

uj_status_t groups_check_overlap(const uj_group_t* groups, int group_count, int input_count, int output_count) {
  size_t cap = (size_t)group_count * (size_t)(input_count + output_count);
  range_t* r = malloc((cap + 1) * sizeof *r);
  range_t* tmp = malloc((cap + 1) * sizeof *tmp);
  if (!r || !tmp) {
    free(r), free(tmp);
    return rt_error(UJ_ERR_OOM, "out of memory sorting the %zu tensors of %d groups (%zu bytes)", cap, group_count,
                    2 * (cap + 1) * sizeof *r);
  }
  size_t n = 0;
  for (int g = 0; g < group_count; g++) {
    for (int side = 0; side < 2; side++) {
      int count = side ? output_count : input_count;
      for (int i = 0; i < count; i++) {
        const uj_tensor_t* t = side ? groups[g].outputs[i] : groups[g].inputs[i];
        if (!side && g > 0 && t->data == groups[0].inputs[i]->data) continue; /* shared: entered with group 0 */
        int64_t bytes = bytes_of(t);
        if (!bytes) continue;
        uintptr_t start = (uintptr_t)t->data;
        r[n++] = (range_t){start, start + (uintptr_t)bytes, g, (short)i, (short)side};
      }
    }
  }
  radix_sort(r, tmp, n);
  reach_t outs = {{0, 0}, {-1, -1}, {0, 0}}, all = {{0, 0}, {-1, -1}, {0, 0}};
  uj_status_t s = UJ_OK;
  for (size_t i = 0; i < n && s == UJ_OK; i++) {
    int hit = reach_hit(&outs, &r[i]);
    if (hit < 0 && r[i].output) hit = reach_hit(&all, &r[i]);
    if (hit >= 0) s = overlap_error(&r[hit], &r[i]);
    if (r[i].output) reach_note(&outs, &r[i], (int)i);
    reach_note(&all, &r[i], (int)i);
  }
  free(r);
  free(tmp);
  return s;
}
