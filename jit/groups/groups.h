/* jit/groups/groups.h: the parts of multi-tensor execution (uj_program_run_groups,
 * jit/groups/groups.c). A call that the fast path serves runs the program's flat
 * build: the specialization for rank-1 inputs (scalars stay 0-d), whose
 * loop IR is elementwise over one index i (every tensor of the group's
 * shape is read and written at [i]) with, at most, full reductions stored
 * straight into outputs. Any group's tensors then run as one flat range of
 * elements, cut into pieces; jit/groups/plan.c decides whether a program
 * and a list of groups qualify and how each tensor of the flat build is
 * bound per group; jit/groups/gather.c walks the groups' tensors once per
 * call, gathering all that those decisions and jit/groups/check.c's checks
 * of the groups and their memory read;
 * jit/groups/cpu.c runs the pieces on the thread pool; jit/cuda/cuda_groups.c
 * runs them in one CUDA launch over a table of chunks. */
#ifndef UJ_JIT_GROUPS_H
#define UJ_JIT_GROUPS_H

#include "../../lang/parse.h"
#include "../engine.h"

enum {
  GROUPS_MAX_SLOTS = 32,     /* inputs and outputs of a program the fast path takes */
  GROUPS_MAX_TENSORS = 128,  /* tensors of its flat build (bindings live on the stack) */
  GROUPS_PIECE = 32768       /* elements of a piece: a group is cut at multiples of it */
};

typedef enum {
  GK_NONE,    /* a temporary of the flat build that holds no memory */
  GK_SCALAR,  /* a 0-d input: shared by all groups, or one per group */
  GK_GROUP,   /* of the group's shape: read or written at [i] */
  GK_REDUCED  /* an output holding a full reduction of the group's elements */
} groups_kind_t;

/* A byte range of a group's tensor, for the overlap check between groups. */
typedef struct {
  uintptr_t start, end;
  int group;
  short slot;   /* input or output slot */
  short output; /* 1: an output */
} groups_range_t;

enum {
  GROUPS_GATHER_NO_SLOT = GROUPS_MAX_SLOTS, /* the shape slot of a group whose inputs are all 0-d */
  GROUPS_GATHER_BAD_RANK = UJ_MAX_DIMS + 1  /* a shape tensor's rank out of range, or its sizes bad */
};

/* A group's shape slot (its first input that is not 0-d) and that input's rank. */
typedef struct {
  unsigned char slot, rank;
} groups_rank_t;

/* What the one walk over the groups' tensors gathers (jit/groups/gather.c):
 * the overlap list, and, when summarized (at most GROUPS_MAX_SLOTS inputs
 * and outputs), each group's elements and masks over the slots (bit i:
 * input or output slot i) folded over all groups. A group's shape tensor
 * is its first input that is not 0-d; a 0-d one where there is none. */
typedef struct {
  groups_range_t* ranges; /* each group's outputs, and its inputs but those in place or shared with group 0 */
  size_t nranges;
  int summarized;
  int64_t* numel;         /* by group: its shape tensor's elements */
  /* by group, its inputs' then its outputs' data (NULL for a missing
   * tensor), nin + nout each: what the runs bind, read from here in
   * group order rather than through each group's tensor structs again */
  void** data;
  int borrowed;           /* numel and data are a context's memo's (jit/groups/memo.c), not to be freed */
  int ranges_verified;    /* the overlap check passed on this very list before (the memo's) */
  uint64_t total;         /* their sum */
  int missing;            /* a group lacks its inputs, its outputs or a tensor */
  int unlike_first;       /* an input's dtype or device differs from group 0's */
  int bad_shape;          /* a shape tensor's rank is out of range or its elements overflow */
  int off_device;         /* a tensor is on another device than group 0's input 0 */
  int inexact;            /* an output shares memory with another output, or with an input other than exactly */
  uj_device_t device;     /* group 0's input 0's */
  uj_dtype_t first_dtype[GROUPS_MAX_SLOTS], first_out_dtype[GROUPS_MAX_SLOTS];
  uj_device_t first_device[GROUPS_MAX_SLOTS];
  uint32_t nonscalar;           /* inputs not 0-d in some group */
  uint32_t same_in, same_out;   /* of its shape tensor's shape in every group */
  uint32_t nodata_in, nodata_out;                     /* data NULL in some group */
  uint32_t nodata_nonempty_in, nodata_nonempty_out;   /* ... in a group of elements */
  uint32_t out_unlike_first;    /* outputs whose dtype differs from group 0's */
  uint32_t not_ones;            /* outputs with a size other than 1 (or a bad rank) in some group */
  uint16_t ones_rank[UJ_MAX_DIMS + 1][GROUPS_MAX_SLOTS]; /* [shape rank][output]: bit r for sizes 1 of rank r */
  uint32_t exact[GROUPS_MAX_SLOTS];                      /* [output]: inputs it is exactly in some group */
  /* the pairs (shape slot, rank) in the order the groups first show them */
  uint16_t rank_seen[GROUPS_MAX_SLOTS + 1];
  groups_rank_t rank_list[(GROUPS_MAX_SLOTS + 1) * (GROUPS_GATHER_BAD_RANK + 1)];
  int nranks_listed;
} groups_gather_t;

/* Walks the groups once (summarize: and fills the summary when the slot
 * counts allow), split over pool's threads when there are enough groups
 * (pool may be NULL): what it gathers is the same whatever the split.
 * UJ_ERR_OOM only. Release with groups_gather_release. */
uj_status_t groups_gather(groups_gather_t* ga, const uj_group_t* groups, int group_count, int input_count,
                          int output_count, int summarize, rt_pool_t* pool);
void groups_gather_release(groups_gather_t* ga);

/* ---- the memo of a context's list (jit/groups/memo.c) ---- */

/* 1 when the groups are, value for value, the list the memo recorded:
 * *ga then borrows what that list's walk gathered (ranges_verified set,
 * no overlap list). memo may be NULL. A record that does not match is
 * dropped. */
int groups_memo_find(void* memo, const uj_group_t* groups, int count, int nin, int nout, groups_gather_t* ga);
/* After a call that ran on the fast path with what *ga gathered: notes
 * the list, and records it (taking ga's elements and data tables) when the
 * call before had the same list. *memo is made on first use, with its
 * free function in *memo_free. */
void groups_memo_keep(void** memo, void (**memo_free)(void*), const uj_group_t* groups, int count, int nin,
                      int nout, groups_gather_t* ga);
void groups_memo_free(void* memo);
/* 1 when memo holds a record of the list at groups (for tests). */
int groups_memo_recorded(const void* memo, const uj_group_t* groups, int count);

typedef struct groups_plan {
  uj_program_t* flat;   /* the program whose build runs (the parsed program's rank-1 specialization) */
  pn_special_t* held;   /* holds flat for a parsed program; NULL otherwise */
  const ir_func_t* f;   /* flat's optimized forward function */
  int nin, nout;
  unsigned char in_kind[GROUPS_MAX_SLOTS], out_kind[GROUPS_MAX_SLOTS];
  uj_dtype_t in_dtype[GROUPS_MAX_SLOTS], out_dtype[GROUPS_MAX_SLOTS];
  /* the ranks of a REDUCED output by the rank of the group's shape (its
   * sizes are all 1); -1 where no group of that rank was seen */
  signed char reduced_rank[UJ_MAX_DIMS + 1][GROUPS_MAX_SLOTS];
  int nred;                              /* REDUCED outputs */
  int red_slot[GROUPS_MAX_SLOTS];        /* by reduction: its output slot */
  uj_reduce_op_t red_op[GROUPS_MAX_SLOTS];
  /* by tensor of f: kind, and the input or output slot it is bound to */
  unsigned char t_kind[GROUPS_MAX_TENSORS];
  signed char t_input[GROUPS_MAX_TENSORS];  /* input slot, or -1 */
  signed char t_output[GROUPS_MAX_TENSORS]; /* output slot, or -1 */
  signed char t_red[GROUPS_MAX_TENSORS];    /* REDUCED: its reduction index */
  /* by block of f: 1 for a full reduction (loops [0,1) then the elements:
   * run as iteration 0 over a piece), 0 elementwise (run over [0, length)) */
  unsigned char block_reduces[GROUPS_MAX_TENSORS];
  int alias_safe[GROUPS_MAX_SLOTS][GROUPS_MAX_SLOTS]; /* [output][input]: may share memory exactly */
  /* by group: its elements (gather.numel), and their sum (groups_check_fast sets it) */
  int64_t* numel;
  int64_t total;
  groups_gather_t gather; /* groups_plan_make's walk over the groups */
} groups_plan_t;

/* Whether the fast path serves p on these groups (*fast 1) and its plan
 * (the groups walked once, into plan->gather, for every later check);
 * *fast 0 when not (the program's flat build is not elementwise, a group's
 * tensors differ in shape, dtypes differ between groups, ...): the caller
 * runs the groups one by one. Errors only for out of memory. Release the
 * plan with groups_plan_release whatever *fast says. */
uj_status_t groups_plan_make(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups, int group_count,
                             const int64_t* params, groups_plan_t* plan, int* fast);
void groups_plan_release(groups_plan_t* plan);

/* Checks every group against the plan (device dev, the dtypes, ranks and
 * sizes it needs, data present) from what groups_plan_make gathered of
 * the same groups, and sets plan->total:
 * 1 when all pass; 0 names nothing (the
 * caller's per-group check says what is wrong, or that the fast path's
 * stricter rules are what failed). Also 0 when an output of a group shares
 * memory with one of its inputs other than exactly (the per-group run copies
 * such an output aside). */
int groups_check_fast(groups_plan_t* plan, const uj_group_t* groups, int group_count, uj_device_t dev);

/* UJ_ERR_INVALID naming both when an output of one group overlaps a tensor
 * of another (sorted by address: linear in the tensors after a radix sort;
 * a list the previous call verified is recognized without sorting). The
 * ranges are gathered's when it has them (it then gives them up), else
 * listed here. */
uj_status_t groups_check_overlap(groups_gather_t* gathered, const uj_group_t* groups, int group_count,
                                 int input_count, int output_count);

/* A piece: elements [begin, end) of group `group`. Pieces cut each group at
 * multiples of GROUPS_PIECE, whatever the threads, so that per-piece
 * partial reductions combine the same way on any machine. A group with no
 * elements has one empty piece when the plan reduces (its outputs get the
 * reduction's identity). */
typedef struct {
  int group;
  int64_t begin, end;
} groups_piece_t;

/* The pieces of all groups in order, and per group the index of its first
 * piece (first[group_count] = the count): malloc'ed, freed by the caller. */
uj_status_t groups_pieces(const groups_plan_t* plan, int group_count, int64_t piece, groups_piece_t** pieces,
                          int64_t* npieces, int64_t** first);

/* Combines a group's per-piece partial results of one reduction (count of
 * them in the output's dtype, stride bytes apart, in piece order) into
 * *out, as the kernels accumulate: in the dtype, max and min ignoring NaN. */
void groups_combine(uj_dtype_t dtype, uj_reduce_op_t op, const void* partials, int64_t stride, int64_t count,
                    void* out);

/* The CPU fast path: every piece through the kernel's blocks on the pool. */
uj_status_t groups_cpu_run(jit_state_t* js, const jit_blocks_t* k, const groups_plan_t* plan,
                           const uj_group_t* groups, int group_count, const int64_t* params);

/* 1 when uj_program_run_groups would take the fast path for these groups
 * on a compiling engine (for tests: the per-group path gives the same
 * results, only slower). */
int jit_groups_fast(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups, int group_count,
                    const int64_t* params);

#endif
