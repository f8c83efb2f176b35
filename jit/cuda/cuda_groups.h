/* jit/cuda/cuda_groups.h: multi-tensor calls on the GPU (cuda_groups.c):
 * the chunk table one launch reads, the kernels' source, and the engine
 * row's run_groups and compile_groups_for (jit/engine.h). */
#ifndef UJ_JIT_CUDA_GROUPS_H
#define UJ_JIT_CUDA_GROUPS_H

#include "../groups/groups.h"

enum { GROUPS_CUDA_CHUNK = 8192 }; /* elements of a chunk: one CUDA block of 256 threads */

/* The table a launch reads (host memory, one allocation, uploaded whole):
 * per chunk its group, first element and length; per group the data
 * pointers of its inputs then its outputs; per group its first chunk
 * (first[group_count] = nchunks). Chunks are groups_pieces of `chunk`. */
typedef struct {
  int64_t nchunks;
  int nslots;       /* pointers per group */
  int64_t* chunks;  /* 3 per chunk */
  void** ptrs;      /* nslots per group */
  int64_t* first;
  void* host;       /* chunks, then ptrs, then first */
  size_t bytes;
} groups_table_t;
uj_status_t groups_table_make(const groups_plan_t* plan, const uj_group_t* groups, int group_count, int64_t chunk,
                              groups_table_t* out);
void groups_table_release(groups_table_t* t);
/* The CUDA C of the plan's kernels (uj_groups, and uj_groups_combine when
 * it reduces); params given: folded in. Malloc'ed. */
uj_status_t jit_cuda_groups_source(const groups_plan_t* plan, const int64_t* params, char** source);
/* Compiles them with NVRTC for `arch` ("sm_90") without a device, into the
 * disk cache (*reused = 1 when a verified cubin was there). */
uj_status_t jit_cuda_groups_compile_for(uj_ctx_t* ctx, const groups_plan_t* plan, const int64_t* params,
                                        const char* arch, int* reused);
/* The CUDA fast path: the table uploaded, one launch over its chunks (and
 * one to combine reductions), queued on the context's stream. *ran 1 once
 * queued. */
uj_status_t jit_cuda_groups_run(uj_ctx_t* ctx, const groups_plan_t* plan, const uj_group_t* groups, int group_count,
                                const int64_t* params, int* ran);

#endif
