/* jit/groups/cpu.c: multi-tensor execution on the CPU: one threaded pass
 * over all groups, split by elements.
 *
 * Each group is cut into pieces at multiples of GROUPS_PIECE elements
 * (fixed, whatever the threads: the partial reductions, one per piece,
 * then combine in the same order on any machine). Consecutive pieces form
 * tasks of about equal work (make_tasks), which the pool hands out in
 * contiguous runs per thread. A piece runs every block of the flat build
 * (jit/groups/plan.c) directly: its tensors of the group's shape bound at
 * the piece's first element with a size of the piece's length, scalars at
 * the group's scalar, a reduction's output at the piece's partial; an
 * elementwise block over [0, length), a reduction block as its one outer
 * iteration. Nothing is allocated per piece and nothing compiles: the
 * kernel is the program's, taking sizes at run time. */
#include <stdlib.h>
#include <string.h>

#include "groups.h"

enum {
  PARTIAL_BYTES = 8,        /* a partial result of any dtype */
  PIECE_OVERHEAD = 64,      /* the cost of a call, in elements, for balancing tasks */
  TASKS_PER_THREAD = 16,    /* imbalance at most about 1/16 of a thread's share */
  MIN_TASK = 16384,         /* elements: about what pays for waking a thread (jit/blocks.c) */
  PREFETCH_BYTES = 1024,    /* of each tensor of the next piece (see run_tasks) */
  CACHE_LINE = 64,
};

uj_status_t groups_pieces(const groups_plan_t* plan, int group_count, int64_t piece, groups_piece_t** pieces,
                          int64_t* npieces, int64_t** first) {
  *pieces = NULL;
  *first = malloc(((size_t)group_count + 1) * sizeof **first);
  if (!*first)
    return rt_error(UJ_ERR_OOM, "out of memory listing the pieces of %d groups (%zu bytes)", group_count,
                    ((size_t)group_count + 1) * sizeof **first);
  int64_t n = 0;
  for (int g = 0; g < group_count; g++) {
    int64_t numel = plan->numel[g];
    (*first)[g] = n;
    n += numel ? (numel + piece - 1) / piece : plan->nred > 0;
  }
  (*first)[group_count] = n;
  *npieces = n;
  *pieces = malloc(((size_t)n + 1) * sizeof **pieces);
  if (!*pieces) {
    free(*first);
    *first = NULL;
    return rt_error(UJ_ERR_OOM, "out of memory listing %lld pieces of %d groups (%zu bytes)", (long long)n,
                    group_count, ((size_t)n + 1) * sizeof **pieces);
  }
  int64_t k = 0;
  for (int g = 0; g < group_count; g++) {
    int64_t numel = plan->numel[g];
    if (!numel && plan->nred) (*pieces)[k++] = (groups_piece_t){g, 0, 0};
    for (int64_t b = 0; b < numel; b += piece)
      (*pieces)[k++] = (groups_piece_t){g, b, numel - b < piece ? numel : b + piece};
  }
  return UJ_OK;
}

/* The fmax-like order of the interpreter's max and min: the new value wins
 * unless the old one is better; a NaN never wins over a number. */
#define EXTREMUM(op, acc, x) ((x op acc || acc != acc) ? x : acc)

void groups_combine(uj_dtype_t dtype, uj_reduce_op_t op, const void* partials, int64_t stride, int64_t count,
                    void* out) {
  const char* p = partials;
  if (dtype == UJ_F32) {
    float acc = *(const float*)p;
    for (int64_t k = 1; k < count; k++) {
      float x = *(const float*)(p + k * stride);
      acc = op == UJ_REDUCE_SUM ? acc + x : op == UJ_REDUCE_PROD ? acc * x
          : op == UJ_REDUCE_MAX ? EXTREMUM(>, acc, x) : EXTREMUM(<, acc, x);
    }
    *(float*)out = acc;
  } else if (dtype == UJ_F64) {
    double acc = *(const double*)p;
    for (int64_t k = 1; k < count; k++) {
      double x = *(const double*)(p + k * stride);
      acc = op == UJ_REDUCE_SUM ? acc + x : op == UJ_REDUCE_PROD ? acc * x
          : op == UJ_REDUCE_MAX ? EXTREMUM(>, acc, x) : EXTREMUM(<, acc, x);
    }
    *(double*)out = acc;
  } else { /* i32, wrapping as the kernels do */
    int32_t acc = *(const int32_t*)p;
    for (int64_t k = 1; k < count; k++) {
      int32_t x = *(const int32_t*)(p + k * stride);
      acc = op == UJ_REDUCE_SUM ? (int32_t)((uint32_t)acc + (uint32_t)x)
          : op == UJ_REDUCE_PROD ? (int32_t)((uint32_t)acc * (uint32_t)x)
          : op == UJ_REDUCE_MAX ? (x > acc ? x : acc) : (x < acc ? x : acc);
    }
    *(int32_t*)out = acc;
  }
}

typedef struct {
  const groups_plan_t* plan;
  const jit_blocks_t* k;
  const groups_piece_t* pieces;
  const int64_t* task_first; /* by task: its first piece; [ntasks] = the count */
  const int64_t* params;
  char* partials;            /* by piece and reduction, PARTIAL_BYTES each */
  int64_t stream_bytes;      /* the kernels' JIT_STREAM_SLOT */
} job_t;

/* Binds the tensors of the group's shape to a piece: data[t] at the
 * piece's first element in its group's data (group_data, from the walk's
 * table). */
static void bind_piece(void** data, void* const* group_data, const groups_piece_t* piece, const int* group_t,
                       int ngroup_t, const int* slot_of, const int64_t* esize) {
  for (int i = 0; i < ngroup_t; i++) {
    int t = group_t[i];
    char* bound = slot_of[t] >= 0 ? group_data[slot_of[t]] : NULL;
    data[t] = bound ? bound + piece->begin * esize[t] : NULL;
  }
}

static void run_tasks(void* ctx, int64_t first_task, int64_t end_task) {
  const job_t* j = ctx;
  const groups_plan_t* plan = j->plan;
  const ir_func_t* f = plan->f;
  void* const* table = plan->gather.data;
  int slots = plan->nin + plan->nout;
  void* data[2 * GROUPS_MAX_TENSORS] = {0}; /* this piece's, then the next piece's (JIT_NEXT_SLOT) */
  int64_t dims[JIT_DIMS_SLOTS(GROUPS_MAX_TENSORS)] = {0};
  dims[JIT_STREAM_SLOT(f->ntensors)] = j->stream_bytes;
  /* whether every block fetches the next piece itself (the C engine's
   * flat loops), or the runner must (the MIR engine's, a reduction's) */
  int blocks_fetch = 1;
  for (int b = 0; b < f->nblocks; b++) blocks_fetch &= j->k->ahead_next[b];
  /* the tensors a piece rebinds, their slots in the table and element
   * sizes; the slots of the group's shape, to prefetch */
  int group_t[GROUPS_MAX_TENSORS], ngroup_t = 0, other_t[GROUPS_MAX_TENSORS], nother = 0;
  int slot_of[GROUPS_MAX_TENSORS], fetch_slot[GROUPS_MAX_TENSORS], nfetch = 0;
  int64_t esize[GROUPS_MAX_TENSORS], fetch_esize[GROUPS_MAX_TENSORS];
  for (int t = 0; t < f->ntensors; t++) {
    esize[t] = uj_dtype_size(f->tensors[t].dtype);
    slot_of[t] = plan->t_input[t] >= 0 ? plan->t_input[t] : plan->t_output[t] >= 0 ? plan->nin + plan->t_output[t] : -1;
    if (plan->t_kind[t] == GK_SCALAR || plan->t_kind[t] == GK_REDUCED) other_t[nother++] = t;
    if (plan->t_kind[t] == GK_REDUCED) dims[t * UJ_MAX_DIMS] = 1;
    else if (f->tensors[t].ndim == 1) group_t[ngroup_t++] = t;
    if (plan->t_kind[t] == GK_GROUP && slot_of[t] >= 0) {
      int seen = 0;
      for (int k = 0; k < nfetch && !seen; k++) seen = fetch_slot[k] == slot_of[t];
      if (!seen) fetch_slot[nfetch] = slot_of[t], fetch_esize[nfetch++] = esize[t];
    }
  }
  int64_t end_piece = j->task_first[end_task];
  for (int64_t pc = j->task_first[first_task]; pc < end_piece; pc++) {
    /* The data of the next piece, fetched toward the cache while this one
     * runs. A small group is a short stream in memory of its own: the
     * hardware prefetcher learns each stream only after several misses,
     * so each of 10,000 groups of a few KB began with a stall on memory
     * per tensor, and the step over them took about twice as long as over
     * one tensor of the same elements.
     * Blocks that fetch the next piece themselves get its data and
     * elements (JIT_NEXT_SLOT): their prefetch ahead runs on into it, a
     * line per stream at a time, while they compute. Otherwise the next
     * piece's first PREFETCH_BYTES of each tensor are fetched here, before
     * the call; in a long piece the hardware prefetcher carries on from
     * there. Not more: these prefetches go in one burst, and a burst
     * longer than the core's line-fill buffers holds the piece up until
     * memory answers; and the burst is slower than a block that fetches
     * into the next group itself (docs/ENGINES.md, "Measured"). Written here, not in a function of its
     * own: gcc takes a function of only prefetches for one without effect
     * and drops the call. */
    dims[JIT_NEXT_SLOT(f->ntensors)] = 0;
    if (blocks_fetch && pc + 1 < end_piece) {
      const groups_piece_t* next = &j->pieces[pc + 1];
      bind_piece(data + f->ntensors, table + (size_t)next->group * (size_t)slots, next, group_t, ngroup_t, slot_of,
                 esize);
      dims[JIT_NEXT_SLOT(f->ntensors)] = next->end - next->begin;
    }
#if defined(__GNUC__)
    if (!blocks_fetch && pc + 1 < end_piece) {
      const groups_piece_t* next = &j->pieces[pc + 1];
      void* const* next_data = table + (size_t)next->group * (size_t)slots;
      for (int k = 0; k < nfetch; k++) {
        const char* at = next_data[fetch_slot[k]];
        int seen = !at;
        for (int e = 0; e < k && !seen; e++) seen = next_data[fetch_slot[e]] == at; /* updated in place */
        if (seen) continue;
        at += next->begin * fetch_esize[k];
        int64_t bytes = (next->end - next->begin) * fetch_esize[k];
        for (int64_t b = 0; b < bytes && b < PREFETCH_BYTES; b += CACHE_LINE) __builtin_prefetch(at + b);
      }
    }
#endif
    const groups_piece_t* piece = &j->pieces[pc];
    void* const* group_data = table + (size_t)piece->group * (size_t)slots;
    int64_t len = piece->end - piece->begin;
    bind_piece(data, group_data, piece, group_t, ngroup_t, slot_of, esize);
    for (int i = 0; i < ngroup_t; i++) dims[group_t[i] * UJ_MAX_DIMS] = len;
    for (int i = 0; i < nother; i++) {
      int t = other_t[i];
      data[t] = plan->t_kind[t] == GK_SCALAR ? group_data[slot_of[t]]
                                             : j->partials + (pc * plan->nred + plan->t_red[t]) * PARTIAL_BYTES;
    }
    for (int b = 0; b < f->nblocks; b++)
      jit_block_call(j->k, b, data, dims, j->params, 0, plan->block_reduces[b] ? 1 : len);
  }
}

/* Tasks of consecutive pieces of about `target` work each: task_first.
 * Work is elements plus a little per piece for the call, so that a
 * thousand tiny groups make one task and a huge group many; handing each
 * thread a contiguous run of tasks is balanced because the tasks are. */
static int64_t make_tasks(const groups_piece_t* pieces, int64_t npieces, int64_t target, int64_t* task_first) {
  int64_t ntasks = 0, work = 0;
  for (int64_t pc = 0; pc < npieces; pc++) {
    if (work == 0) task_first[ntasks++] = pc;
    work += pieces[pc].end - pieces[pc].begin + PIECE_OVERHEAD;
    if (work >= target) work = 0;
  }
  task_first[ntasks] = npieces;
  return ntasks;
}

uj_status_t groups_cpu_run(jit_state_t* js, const jit_blocks_t* k, const groups_plan_t* plan,
                           const uj_group_t* groups, int group_count, const int64_t* params) {
  groups_piece_t* pieces;
  int64_t npieces, *first;
  uj_status_t s = groups_pieces(plan, group_count, GROUPS_PIECE, &pieces, &npieces, &first);
  if (s != UJ_OK) return s;
  int64_t* task_first = malloc(((size_t)npieces + 1) * sizeof *task_first);
  size_t partial_bytes = (size_t)npieces * (size_t)plan->nred * PARTIAL_BYTES;
  char* partials = plan->nred ? malloc(partial_bytes) : NULL;
  if (!task_first || (plan->nred && !partials)) {
    s = rt_error(UJ_ERR_OOM, "out of memory for the tasks and partial results of %lld pieces (%zu bytes)",
                 (long long)npieces, partial_bytes + ((size_t)npieces + 1) * sizeof *task_first);
  } else {
    int64_t total = 0;
    for (int64_t pc = 0; pc < npieces; pc++) total += pieces[pc].end - pieces[pc].begin + PIECE_OVERHEAD;
    int threads = js->pool ? rt_pool_size(js->pool) : 1;
    int64_t target = total / ((int64_t)threads * TASKS_PER_THREAD);
    if (target < MIN_TASK) target = MIN_TASK;
    int64_t ntasks = make_tasks(pieces, npieces, target, task_first);
    job_t job = {plan, k, pieces, task_first, params, partials,
                 __atomic_load_n(&js->stream_bytes, __ATOMIC_RELAXED)};
    if (threads > 1 && ntasks >= 2) rt_pool_run(js->pool, 0, ntasks, 1, run_tasks, &job);
    else if (ntasks) run_tasks(&job, 0, ntasks);
    for (int g = 0; g < group_count && plan->nred; g++)
      for (int r = 0; r < plan->nred; r++) {
        int o = plan->red_slot[r];
        groups_combine(plan->out_dtype[o], plan->red_op[r], partials + (first[g] * plan->nred + r) * PARTIAL_BYTES,
                       (int64_t)plan->nred * PARTIAL_BYTES, first[g + 1] - first[g], groups[g].outputs[o]->data);
      }
  }
  free(partials);
  free(task_first);
  free(pieces);
  free(first);
  return s;
}
