/* jit/groups/check.c: the checks of multi-tensor execution that look at
 * every group: whether each fits the fast path's plan, and whether an
 * output of one group overlaps a tensor of another. Both read what
 * jit/groups/gather.c's one walk gathered, not the groups: the fit is a few
 * operations per slot on the masks folded over all groups.
 *
 * The overlap check sorts the byte ranges of the groups' tensors by start
 * address (radix_sort) and sweeps them in order, keeping, among the ranges
 * seen, the two furthest-reaching ends that belong to different groups,
 * for outputs and for all ranges: a range overlaps a range of another
 * group exactly when it starts before one of those ends. A tensor every
 * group shares (a common scalar: the same pointer as group 0's) is entered
 * once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"

static uint32_t low_bits(int n) { return n >= 32 ? ~0u : (1u << n) - 1; }

/* Every group fits the plan when, over all groups: no tensor is missing,
 * on another device or of another dtype than the plan's; every tensor of
 * a slot of the group's shape has its group's shape tensor's shape (which
 * has a rank in range and elements that do not overflow), and data unless
 * the group has no elements; every scalar input and reduced output has
 * data, and a reduced output sizes of 1 at the rank the plan gives for
 * the group's rank; an output shares memory only exactly with an input of
 * the group's shape that the flat build may write in place, and never with
 * another output. */
int groups_check_fast(groups_plan_t* plan, const uj_group_t* groups, int group_count, uj_device_t dev) {
  (void)groups, (void)group_count; /* groups_plan_make gathered all these read of them */
  const groups_gather_t* ga = &plan->gather;
  plan->total = 0;
  if (!ga->summarized || !ga->numel || ga->missing || ga->unlike_first || ga->bad_shape || ga->off_device ||
      ga->device != dev || ga->inexact)
    return 0;
  uint32_t group_in = 0, group_out = 0;
  for (int i = 0; i < plan->nin; i++)
    if (plan->in_kind[i] == GK_GROUP) group_in |= 1u << i;
  for (int o = 0; o < plan->nout; o++)
    if (plan->out_kind[o] == GK_GROUP) group_out |= 1u << o;
  uint32_t other_in = low_bits(plan->nin) & ~group_in, other_out = low_bits(plan->nout) & ~group_out;
  if ((group_in & ~ga->same_in) || (group_out & ~ga->same_out)) return 0;
  if ((ga->nodata_in & other_in) || (ga->nodata_out & other_out)) return 0;
  if ((ga->nodata_nonempty_in & group_in) || (ga->nodata_nonempty_out & group_out)) return 0;
  for (int i = 0; i < plan->nin; i++)
    if (ga->first_dtype[i] != plan->in_dtype[i]) return 0;
  for (int o = 0; o < plan->nout; o++) {
    if ((ga->out_unlike_first >> o & 1) || ga->first_out_dtype[o] != plan->out_dtype[o]) return 0;
    if (plan->out_kind[o] != GK_GROUP) {
      if (ga->not_ones >> o & 1) return 0;
      for (int r = 0; r <= UJ_MAX_DIMS; r++) {
        if (!ga->ones_rank[r][o]) continue;
        int rank = plan->reduced_rank[r][o];
        if (rank < 0 || (ga->ones_rank[r][o] & ~(1u << rank))) return 0;
      }
    }
    for (int i = 0; i < plan->nin; i++)
      if ((ga->exact[o] >> i & 1) &&
          (plan->in_kind[i] != GK_GROUP || plan->out_kind[o] != GK_GROUP || !plan->alias_safe[o][i]))
        return 0;
  }
  plan->total = (int64_t)ga->total;
  return 1;
}

/* ---- overlap between groups ---- */

typedef groups_range_t range_t;

enum { RADIX_BITS = 11, RADIX_BUCKETS = 1 << RADIX_BITS, RADIX_DIGITS = (8 * sizeof(uintptr_t) + RADIX_BITS - 1) / RADIX_BITS };

/* The ranges of the last list found free of overlaps, in the order they
 * were listed: an optimizer passes the same tensors every step, and
 * comparing its list with this one costs far less than sorting it. */
static struct {
  pthread_mutex_t lock;
  range_t* ranges;
  size_t n;
} verified = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

/* fork(): the lock is held across it, and the child gets a fresh one
 * (rt_fork_guard). */
__attribute__((constructor)) static void guard_verified_lock_across_fork(void) {
  static const pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  rt_fork_guard(&verified.lock, &fresh);
}

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

/* Sorts a[0..n) by start into a or tmp; returns the one holding the result.
 * An LSD radix sort, RADIX_BITS at a time, skipping the digits all
 * addresses share: linear in the tensors, where a comparison sort of
 * 70,000 ranges would cost as much as a step of small tensors. */
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

uj_status_t groups_check_overlap(groups_gather_t* gathered, const uj_group_t* groups, int group_count,
                                 int input_count, int output_count) {
  if (gathered && gathered->ranges_verified) return UJ_OK; /* the memo's list: checked when recorded */
  groups_gather_t own;
  memset(&own, 0, sizeof own);
  if (!gathered || !gathered->ranges) {
    uj_status_t s = groups_gather(&own, groups, group_count, input_count, output_count, 0, NULL);
    if (s != UJ_OK) return s;
    gathered = &own;
  }
  size_t cap = (size_t)group_count * (size_t)(input_count + output_count);
  range_t* r = gathered->ranges;
  size_t n = gathered->nranges;
  gathered->ranges = NULL, gathered->nranges = 0; /* r is ours now */
  groups_gather_release(&own);
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
