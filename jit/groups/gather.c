/* jit/groups/gather.c: the one walk of multi-tensor execution over the
 * groups' tensor structs.
 *
 * A call may bring 10,000 groups whose tensor structs lie scattered over
 * more memory than the cache holds; each walk over them pays its misses
 * again. So every per-call check of the fast path reads what this walk
 * gathered and nothing else of the groups: the byte ranges to compare for
 * overlap between groups, in the order jit/groups/check.c wants them; per
 * group, the elements of its shape tensor (its first input that is not
 * 0-d; 1 when all are), which the runs cut into pieces, and the data
 * pointers the runs bind; and a summary of all groups folded into masks
 * over the slots (summarize_group), so that fitting the plan and passing
 * the checks cost a few operations per slot, whatever the groups. Any
 * failing group sends the call to the per-group path, which says what is
 * wrong, so the order the checks see the groups in does not matter. */
#include <stdlib.h>
#include <string.h>

#include "groups.h"

/* The elements of t's dims as the overflow check of the fast path counts
 * them (each factor below INT64_MAX / 16 of the product so far): 0 when
 * a size is negative, the rank is out of range or the product too big. */
static int checked_numel(const uj_tensor_t* t, int64_t* numel) {
  if (t->ndim < 0 || t->ndim > UJ_MAX_DIMS) return 0;
  int64_t n = 1;
  for (int a = 0; a < t->ndim; a++) {
    int64_t d = t->dims[a];
    if (d < 0 || (d && n > INT64_MAX / 16 / d)) return 0;
    n *= d;
  }
  *numel = n;
  return 1;
}

/* t's bytes, wrapping rather than overflowing on sizes no check would
 * pass (those never reach a check that reads them). */
static int64_t bytes_of(const uj_tensor_t* t, int64_t esize) {
  uint64_t n = (uint64_t)esize;
  int ndim = t->ndim > UJ_MAX_DIMS ? UJ_MAX_DIMS : t->ndim;
  for (int a = 0; a < ndim; a++) n *= (uint64_t)t->dims[a];
  return (int64_t)n;
}

static int same_shape(const uj_tensor_t* t, int ndim, const int64_t* dims) {
  if (t->ndim != ndim) return 0;
  for (int a = 0; a < ndim; a++)
    if (t->dims[a] != dims[a]) return 0;
  return 1;
}

static int all_ones(const uj_tensor_t* t) {
  if (t->ndim < 0 || t->ndim > UJ_MAX_DIMS) return 0;
  for (int a = 0; a < t->ndim; a++)
    if (t->dims[a] != 1) return 0;
  return 1;
}

enum { GATHER_PART = 2048 }; /* groups: the least a thread of the walk takes (a few hundred us) */

/* 1 when [a, a+na) and [b, b+nb) share a byte. */
static int overlaps(uintptr_t a, int64_t na, uintptr_t b, int64_t nb) {
  return na && nb && a < b + (uintptr_t)nb && b < a + (uintptr_t)na;
}

/* Per call: the element size of each dtype, and group 0's inputs (the
 * shared test of the ranges, the agreement of dtypes and devices). */
typedef struct {
  groups_gather_t* ga;
  int nin, nout, summarize;
  int64_t dtype_size[UJ_F16 + 1];
  int have_first;
  /* scratch of nin + nout entries: a group's tensors' data and bytes */
  uintptr_t* data;
  int64_t* bytes;
  /* group 0's inputs: present, data, bytes */
  unsigned char* first_present;
  uintptr_t* first_data;
  int64_t* first_bytes;
} walk_t;

static int64_t esize_of(const walk_t* w, uj_dtype_t dtype) {
  return (unsigned)dtype <= UJ_F16 ? w->dtype_size[dtype] : uj_dtype_size(dtype);
}

/* The overlap list of group g, appended at r: its outputs, and its inputs
 * but for those that are exactly one of its outputs (in place) or group
 * 0's (shared). Returns the ranges appended. A group that lacks a tensor
 * gives no ranges of it: the overlap check runs only on groups the other
 * checks have passed. */
static size_t list_ranges(const walk_t* w, const uj_group_t* gr, int g, groups_range_t* r) {
  const uintptr_t *data = w->data, *out_data = w->data + w->nin;
  const int64_t *bytes = w->bytes, *out_bytes = w->bytes + w->nin;
  size_t n = 0;
  for (int o = 0; o < w->nout; o++)
    if (out_bytes[o]) r[n++] = (groups_range_t){out_data[o], out_data[o] + (uintptr_t)out_bytes[o], g, (short)o, 1};
  for (int i = 0; i < w->nin; i++) {
    if (!gr->inputs[i]) continue;
    if (g > 0 && w->first_present[i] && data[i] == w->first_data[i] && bytes[i] == w->first_bytes[i]) continue;
    int in_place = 0;
    for (int o = 0; o < w->nout && !in_place; o++)
      in_place = gr->outputs[o] && out_data[o] == data[i] && out_bytes[o] == bytes[i];
    if (bytes[i] && !in_place) r[n++] = (groups_range_t){data[i], data[i] + (uintptr_t)bytes[i], g, (short)i, 0};
  }
  return n;
}

/* Folds group g into the summary (groups.h says what each field means).
 * The kinds of the slots (scalar or of the group's shape) are known only
 * after the last group, so each group notes what every kind would need:
 * which of its tensors have its shape tensor's shape, lack data, are sizes
 * of 1 of which rank, share memory exactly or partly. Accumulates in
 * locals: stores through ga could alias the tensors read. */
static void summarize_group(walk_t* w, const uj_group_t* gr, int g) {
  groups_gather_t* ga = w->ga;
  int nin = w->nin, nout = w->nout;
  /* the shape tensor: the first input that is not 0-d */
  const uj_tensor_t* shape = NULL;
  int shape_slot = GROUPS_GATHER_NO_SLOT;
  for (int i = 0; i < nin && !shape; i++)
    if (gr->inputs[i] && gr->inputs[i]->ndim != 0) shape = gr->inputs[i], shape_slot = i;
  int rank = shape ? shape->ndim : 0;
  int64_t numel = 1;
  int shape_ok = !shape || checked_numel(shape, &numel);
  if (!shape_ok) ga->bad_shape = 1, numel = 0;
  ga->numel[g] = numel;
  ga->total += (uint64_t)numel;
  int rank_key = shape_ok ? rank : GROUPS_GATHER_BAD_RANK;
  if (!(ga->rank_seen[shape_slot] >> rank_key & 1)) {
    ga->rank_seen[shape_slot] |= (uint16_t)(1u << rank_key);
    ga->rank_list[ga->nranks_listed++] = (groups_rank_t){(unsigned char)shape_slot, (unsigned char)rank_key};
  }
  /* a shape of a bad rank is compared with nothing (the call is not the fast path's) */
  int same_rank = shape_ok ? rank : -1;
  int64_t dims[UJ_MAX_DIMS];
  for (int a = 0; a < same_rank; a++) dims[a] = shape->dims[a];
  uj_device_t device = ga->device;
  int unlike_first = 0, off_device = 0, inexact = 0;
  uint32_t nonscalar = 0, same_in = 0, same_out = 0, nodata_in = 0, nodata_out = 0, not_ones = 0;
  uint32_t out_unlike_first = 0;
  for (int i = 0; i < nin; i++) {
    const uj_tensor_t* t = gr->inputs[i];
    if (!t) continue;
    unlike_first |= t->dtype != ga->first_dtype[i] || t->device != ga->first_device[i];
    off_device |= t->device != device;
    nonscalar |= (uint32_t)(t->ndim != 0) << i;
    same_in |= (uint32_t)same_shape(t, same_rank, dims) << i;
    nodata_in |= (uint32_t)!t->data << i;
  }
  for (int o = 0; o < nout; o++) {
    const uj_tensor_t* t = gr->outputs[o];
    if (!t) continue;
    out_unlike_first |= (uint32_t)(t->dtype != ga->first_out_dtype[o]) << o;
    off_device |= t->device != device;
    same_out |= (uint32_t)same_shape(t, same_rank, dims) << o;
    nodata_out |= (uint32_t)!t->data << o;
    if (!all_ones(t)) not_ones |= 1u << o;
    else if (shape_ok) ga->ones_rank[rank][o] |= (uint16_t)(1u << t->ndim);
  }
  /* memory within the group: an output shares it with an input only
   * exactly, and with no other output */
  const uintptr_t *data = w->data, *out_data = w->data + nin;
  const int64_t *bytes = w->bytes, *out_bytes = w->bytes + nin;
  for (int o = 0; o < nout; o++) {
    const uj_tensor_t* out = gr->outputs[o];
    if (!out) continue;
    uint32_t exact = 0;
    for (int i = 0; i < nin; i++) {
      if (!overlaps(out_data[o], out_bytes[o], data[i], bytes[i]) || !gr->inputs[i]) continue;
      if (out_data[o] == data[i] && out_bytes[o] == bytes[i] && out->dtype == gr->inputs[i]->dtype)
        exact |= 1u << i;
      else
        inexact = 1;
    }
    ga->exact[o] |= exact;
    for (int o2 = 0; o2 < o; o2++)
      if (gr->outputs[o2] && overlaps(out_data[o], out_bytes[o], out_data[o2], out_bytes[o2])) inexact = 1;
  }
  ga->unlike_first |= unlike_first, ga->off_device |= off_device, ga->inexact |= inexact;
  ga->nonscalar |= nonscalar, ga->out_unlike_first |= out_unlike_first;
  ga->same_in &= same_in, ga->same_out &= same_out;
  ga->nodata_in |= nodata_in, ga->nodata_out |= nodata_out;
  if (numel) ga->nodata_nonempty_in |= nodata_in, ga->nodata_nonempty_out |= nodata_out;
  ga->not_ones |= not_ones;
}

/* Notes group 0's inputs and outputs: what the others are compared with. */
static void note_first(walk_t* w, const uj_group_t* gr) {
  groups_gather_t* ga = w->ga;
  for (int i = 0; i < w->nin; i++) {
    const uj_tensor_t* t = gr->inputs ? gr->inputs[i] : NULL;
    w->first_present[i] = t != NULL;
    w->first_data[i] = t ? (uintptr_t)t->data : 0;
    w->first_bytes[i] = t ? bytes_of(t, esize_of(w, t->dtype)) : 0;
    if (!w->summarize) continue;
    if (t) ga->first_dtype[i] = t->dtype, ga->first_device[i] = t->device;
    if (i == 0 && t) ga->device = t->device;
  }
  for (int o = 0; w->summarize && gr->outputs && o < w->nout; o++)
    if (gr->outputs[o]) ga->first_out_dtype[o] = gr->outputs[o]->dtype;
}

static void walk_group(walk_t* w, const uj_group_t* gr, int g) {
  int slots = w->nin + w->nout;
  void** table = w->ga->data ? w->ga->data + (size_t)g * (size_t)slots : NULL;
  if ((w->nin && !gr->inputs) || (w->nout && !gr->outputs)) {
    w->ga->missing = 1;
    return;
  }
  for (int s = 0; s < slots; s++) {
    const uj_tensor_t* t = s < w->nin ? gr->inputs[s] : gr->outputs[s - w->nin];
    if (!t) {
      w->ga->missing = 1;
      w->data[s] = 0, w->bytes[s] = 0;
    } else {
      w->data[s] = (uintptr_t)t->data, w->bytes[s] = bytes_of(t, esize_of(w, t->dtype));
    }
    if (table) table[s] = t ? t->data : NULL;
  }
  w->ga->nranges += list_ranges(w, gr, g, w->ga->ranges + w->ga->nranges);
  if (w->summarize) summarize_group(w, gr, g);
}

/* A part of the walk: groups [begin, end) on one thread, folded into a
 * summary of its own whose ranges start at the part's place in the call's
 * list (a group lists at most nin + nout of them). */
typedef struct {
  _Alignas(64) int64_t begin; /* a cache line of its own: the walks write their parts all the time */
  groups_gather_t ga;
} part_t;

typedef struct {
  const walk_t* call;       /* group 0's facts, read only */
  const uj_group_t* groups;
  part_t* parts;
  char* scratch;            /* per part: its walk's data and bytes */
  size_t walk_bytes;        /* of each part's scratch */
  int nparts;               /* parts begun (atomic) */
} split_t;

static void walk_part(void* ctx, int64_t begin, int64_t end) {
  split_t* sp = ctx;
  int k = __atomic_fetch_add(&sp->nparts, 1, __ATOMIC_RELAXED);
  part_t* part = &sp->parts[k];
  walk_t w = *sp->call;
  size_t slots = (size_t)w.nin + (size_t)w.nout;
  part->begin = begin;
  part->ga = *w.ga; /* the call's starting summary and group 0's dtypes */
  part->ga.ranges = w.ga->ranges + (size_t)begin * slots;
  part->ga.nranges = 0;
  w.ga = &part->ga;
  w.data = (uintptr_t*)(void*)(sp->scratch + (size_t)k * sp->walk_bytes);
  w.bytes = (int64_t*)(w.data + slots);
  for (int64_t g = begin; g < end; g++) walk_group(&w, &sp->groups[g], (int)g);
}

/* Folds a part into the call's summary, the parts taken in group order:
 * its ranges moved up behind the earlier parts', its ranks listed where
 * they first show. */
static void merge_part(groups_gather_t* ga, const groups_gather_t* part) {
  if (part->ranges != ga->ranges + ga->nranges) /* the first part's are in place */
    memmove(ga->ranges + ga->nranges, part->ranges, part->nranges * sizeof *ga->ranges);
  ga->nranges += part->nranges;
  ga->total += part->total;
  ga->missing |= part->missing, ga->unlike_first |= part->unlike_first, ga->bad_shape |= part->bad_shape;
  ga->off_device |= part->off_device, ga->inexact |= part->inexact;
  ga->nonscalar |= part->nonscalar, ga->same_in &= part->same_in, ga->same_out &= part->same_out;
  ga->nodata_in |= part->nodata_in, ga->nodata_out |= part->nodata_out;
  ga->nodata_nonempty_in |= part->nodata_nonempty_in, ga->nodata_nonempty_out |= part->nodata_nonempty_out;
  ga->out_unlike_first |= part->out_unlike_first, ga->not_ones |= part->not_ones;
  for (int r = 0; r <= UJ_MAX_DIMS; r++)
    for (int o = 0; o < GROUPS_MAX_SLOTS; o++) ga->ones_rank[r][o] |= part->ones_rank[r][o];
  for (int o = 0; o < GROUPS_MAX_SLOTS; o++) ga->exact[o] |= part->exact[o];
  for (int k = 0; k < part->nranks_listed; k++) {
    groups_rank_t e = part->rank_list[k];
    if (ga->rank_seen[e.slot] >> e.rank & 1) continue;
    ga->rank_seen[e.slot] |= (uint16_t)(1u << e.rank);
    ga->rank_list[ga->nranks_listed++] = e;
  }
}

uj_status_t groups_gather(groups_gather_t* ga, const uj_group_t* groups, int group_count, int input_count,
                          int output_count, int summarize, rt_pool_t* pool) {
  groups_gather_release(ga);
  memset(ga, 0, sizeof *ga);
  summarize = summarize && input_count <= GROUPS_MAX_SLOTS && output_count <= GROUPS_MAX_SLOTS;
  size_t slots = (size_t)input_count + (size_t)output_count;
  size_t cap = (size_t)group_count * slots;
  int max_parts = pool && group_count >= 2 * GATHER_PART ? rt_pool_size(pool) : 1;
  /* each part's walk scratch on cache lines of its own, as its part_t */
  size_t walk_bytes = (slots * (sizeof(uintptr_t) + sizeof(int64_t)) + 63) / 64 * 64;
  size_t scratch_bytes = 64 + (size_t)max_parts * (walk_bytes + sizeof(part_t)) +
                         (size_t)input_count * (1 + sizeof(uintptr_t) + sizeof(int64_t));
  ga->ranges = malloc((cap + 1) * sizeof *ga->ranges);
  ga->numel = summarize ? malloc(((size_t)group_count + 1) * sizeof *ga->numel) : NULL;
  ga->data = summarize ? malloc((cap + 1) * sizeof *ga->data) : NULL;
  char* scratch = malloc(scratch_bytes + 1);
  if (!ga->ranges || (summarize && (!ga->numel || !ga->data)) || !scratch) {
    free(scratch);
    groups_gather_release(ga);
    return rt_error(UJ_ERR_OOM, "out of memory listing the %zu tensors of %d groups (%zu bytes)", cap, group_count,
                    (cap + 1) * (sizeof *ga->ranges + sizeof *ga->data) +
                        ((size_t)group_count + 1) * sizeof(int64_t) + scratch_bytes);
  }
  /* scratch: the parts, their walks' data and bytes, group 0's facts */
  char* lines = scratch + (64 - (uintptr_t)scratch % 64) % 64;
  split_t sp = {NULL, groups, (part_t*)(void*)lines, lines + (size_t)max_parts * sizeof(part_t), walk_bytes, 0};
  walk_t w = {.ga = ga, .nin = input_count, .nout = output_count, .summarize = summarize};
  for (int d = 0; d <= UJ_F16; d++) w.dtype_size[d] = uj_dtype_size((uj_dtype_t)d);
  w.first_data = (uintptr_t*)(void*)(sp.scratch + (size_t)max_parts * walk_bytes);
  w.first_bytes = (int64_t*)(w.first_data + input_count);
  w.first_present = (unsigned char*)(w.first_bytes + input_count);
  ga->summarized = summarize;
  ga->same_in = ga->same_out = ~0u;
  if (group_count > 0) note_first(&w, &groups[0]);
  sp.call = &w;
  if (max_parts > 1) rt_pool_run(pool, 0, group_count, GATHER_PART, walk_part, &sp);
  else if (group_count > 0) walk_part(&sp, 0, group_count);
  /* in group order: parts begin where the pool cut the range, in any order */
  for (int i = 1; i < sp.nparts; i++)
    for (int j = i; j > 0 && sp.parts[j].begin < sp.parts[j - 1].begin; j--) {
      part_t t = sp.parts[j];
      sp.parts[j] = sp.parts[j - 1], sp.parts[j - 1] = t;
    }
  for (int i = 0; i < sp.nparts; i++) merge_part(ga, &sp.parts[i].ga);
  free(scratch);
  return UJ_OK;
}

void groups_gather_release(groups_gather_t* ga) {
  free(ga->ranges);
  if (!ga->borrowed) free(ga->numel), free(ga->data);
  ga->borrowed = 0;
  ga->ranges = NULL;
  ga->numel = NULL;
  ga->data = NULL;
  ga->nranges = 0;
}
