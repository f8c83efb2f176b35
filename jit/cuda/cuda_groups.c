/* jit/cuda/cuda_groups.c: multi-tensor execution on CUDA: one launch per
 * call over a table of chunks, in the spirit of multi-tensor apply (DESIGN
 * section 7, "Multi-tensor execution").
 *
 * The host cuts every group into chunks of GROUPS_CUDA_CHUNK elements and
 * uploads one table (groups_table_make). Each CUDA block of the launch takes
 * one chunk: it binds the flat build's tensors (jit/groups/plan.c) at the
 * chunk's first element, every size of the group's shape to the chunk's
 * length, and runs every block of the flat build over the chunk, thread t
 * taking elements t, t + 256, ... A full reduction merges its threads'
 * values (cuda_merge.c) into the chunk's partial; a second launch, one
 * thread per group, merges a group's partials in chunk order into its
 * output. The source depends on the program and the $params only, so
 * sizes, group counts and scalar values never recompile it. */
#include <stdlib.h>
#include <string.h>

#include "../../rt/cuda.h"
#include "../c_like.h"
#include "cuda_groups.h"
#include "cuda_emit.h"
#include "cuda.h"

enum { THREADS = JIT_CU_THREADS_PER_BLOCK };

static const char* const kernel_names[] = {"uj_groups", "uj_groups_combine"};

/* The table: per chunk its group, first element and length; per group the
 * device pointers of its inputs then its outputs; per group its first
 * chunk. The chunks are the CPU path's pieces (jit/groups/cpu.c) at another
 * length; scalars bind at the group's scalar. */
uj_status_t groups_table_make(const groups_plan_t* plan, const uj_group_t* groups, int group_count, int64_t chunk,
                              groups_table_t* out) {
  memset(out, 0, sizeof *out);
  groups_piece_t* pieces;
  int64_t npieces, *first;
  uj_status_t s = groups_pieces(plan, group_count, chunk, &pieces, &npieces, &first);
  if (s != UJ_OK) return s;
  out->nchunks = npieces;
  out->nslots = plan->nin + plan->nout;
  size_t chunk_bytes = (size_t)npieces * 3 * sizeof(int64_t);
  size_t ptr_bytes = (size_t)group_count * (size_t)out->nslots * sizeof(void*);
  out->bytes = chunk_bytes + ptr_bytes + ((size_t)group_count + 1) * sizeof(int64_t);
  out->host = malloc(out->bytes);
  if (!out->host) {
    s = rt_error(UJ_ERR_OOM, "out of memory for the chunk table of %d groups (%zu bytes)", group_count, out->bytes);
  } else {
    out->chunks = out->host;
    out->ptrs = (void**)((char*)out->host + chunk_bytes);
    out->first = (int64_t*)((char*)out->host + chunk_bytes + ptr_bytes);
    for (int64_t k = 0; k < npieces; k++) {
      out->chunks[3 * k] = pieces[k].group;
      out->chunks[3 * k + 1] = pieces[k].begin;
      out->chunks[3 * k + 2] = pieces[k].end - pieces[k].begin;
    }
    for (int g = 0; g < group_count; g++) {
      void** p = &out->ptrs[(size_t)g * (size_t)out->nslots];
      for (int i = 0; i < plan->nin; i++) p[i] = groups[g].inputs[i]->data;
      for (int o = 0; o < plan->nout; o++) p[plan->nin + o] = groups[g].outputs[o]->data;
    }
    memcpy(out->first, first, ((size_t)group_count + 1) * sizeof(int64_t));
  }
  free(pieces);
  free(first);
  return s;
}

void groups_table_release(groups_table_t* t) {
  free(t->host);
  memset(t, 0, sizeof *t);
}

/* ---- the kernels' source ---- */

/* The loop over the chunk's elements that this thread takes, with loop
 * l's locals and statements. Each thread takes the same elements in every
 * block, so an element's statements in one block see its values from the
 * blocks before, as on the CPU. */
static void print_elements(jit_cx_t* E, const ir_loop_t* l, int depth) {
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "for (uj_i64 i%d = threadIdx.x; i%d < uj_len; i%d += blockDim.x) {\n", l->id, l->id, l->id);
  jit_cx_locals(E, l, depth + 1);
  for (int s = 0; s < l->nstmts; s++) jit_cx_stmt(E, &l->stmts[s], depth + 1);
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "}\n");
}

static void print_blocks(jit_cx_t* E, const groups_plan_t* plan) {
  const ir_func_t* f = plan->f;
  for (int b = 0; b < f->nblocks; b++) {
    const ir_block_t* blk = &f->blocks[b];
    rt_buf_printf(E->out, "  /* block %d: %s */\n  {\n", b, plan->block_reduces[b] ? "a full reduction" : "elementwise");
    if (!plan->block_reduces[b]) {
      print_elements(E, &blk->loops[0], 2);
    } else {
      const ir_loop_t *outer = &blk->loops[0], *inner = &blk->loops[1];
      for (int c = 0; c < outer->ncarried; c++) jit_cx_carried(E, &outer->carried[c], 2);
      print_elements(E, inner, 2);
      for (int c = 0; c < outer->ncarried; c++) jit_cu_block_merge(E, &outer->carried[c], b * JIT_CU_MAX_CARRIED + c, 2);
      /* the outer statements store carried values into reduced outputs: the chunk's partials */
      rt_buf_printf(E->out, "    if (threadIdx.x == 0) {\n");
      for (int s = 0; s < outer->nstmts; s++)
        rt_buf_printf(E->out, "      uj_part[uj_c * %d + %d] = (double)c%d;\n", plan->nred,
                      plan->t_red[outer->stmts[s].target.tensor], outer->stmts[s].value->carried);
      rt_buf_printf(E->out, "    }\n");
    }
    rt_buf_printf(E->out, "  }\n");
  }
}

/* The bindings of the tensors and sizes the body used. */
static void print_bindings(rt_buf_t* out, const groups_plan_t* plan, const unsigned char* used_tensors,
                           const unsigned char* used_dims) {
  const ir_func_t* f = plan->f;
  for (int t = 0; t < f->ntensors; t++) {
    const char* ct = jit_cx_ctype(f->tensors[t].dtype);
    int in = plan->t_input[t], slot = in >= 0 ? in : plan->nin + plan->t_output[t];
    if (used_tensors[t] && (plan->t_kind[t] == GK_GROUP || plan->t_kind[t] == GK_SCALAR))
      rt_buf_printf(out, "  %s%s* t%d = (%s%s*)uj_g[%d]%s;\n", in >= 0 ? "const " : "", ct, t, in >= 0 ? "const " : "",
                    ct, slot, plan->t_kind[t] == GK_GROUP ? " + uj_begin" : "");
    for (int a = 0; a < UJ_MAX_DIMS; a++)
      if (used_dims[t * UJ_MAX_DIMS + a])
        rt_buf_printf(out, "  const uj_i64 d%d_%d = %s;\n", t, a, plan->t_kind[t] == GK_REDUCED ? "1" : "uj_len");
  }
}

static void print_combine(rt_buf_t* out, const groups_plan_t* plan) {
  rt_buf_printf(out,
                "\nextern \"C\" __global__ void __launch_bounds__(%d) uj_groups_combine(const long long* uj_first, "
                "const double* uj_part, void* const* uj_ptrs, const long long uj_ngroups) {\n"
                "  const long long uj_group = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                "  if (uj_group >= uj_ngroups) return;\n"
                "  const long long uj_lo = uj_first[uj_group], uj_hi = uj_first[uj_group + 1];\n"
                "  if (uj_lo == uj_hi) return;\n",
                THREADS);
  for (int r = 0; r < plan->nred; r++) {
    int o = plan->red_slot[r];
    const char* t = jit_cx_ctype(plan->out_dtype[o]);
    rt_buf_printf(out, "  {\n    %s uj_a = (%s)uj_part[uj_lo * %d + %d];\n", t, t, plan->nred, r);
    rt_buf_printf(out, "    for (long long uj_k = uj_lo + 1; uj_k < uj_hi; uj_k++) {\n");
    rt_buf_printf(out, "      %s uj_b = (%s)uj_part[uj_k * %d + %d];\n", t, t, plan->nred, r);
    jit_cu_merge(&(jit_cx_t){.out = out}, plan->red_op[r], plan->out_dtype[o], "uj_a", NULL, "uj_b", NULL, 3);
    rt_buf_printf(out, "    }\n    *(%s*)uj_ptrs[uj_group * %d + %d] = uj_a;\n  }\n", t, plan->nin + plan->nout,
                  plan->nin + o);
  }
  rt_buf_printf(out, "}\n");
}

uj_status_t jit_cuda_groups_source(const groups_plan_t* plan, const int64_t* params, char** source) {
  const ir_func_t* f = plan->f;
  *source = NULL;
  size_t nt = (size_t)f->ntensors + 1, np = (size_t)f->nparams + 1;
  unsigned char* used = calloc(nt * (UJ_MAX_DIMS + 1) + np, 1);
  uj_reduce_op_t* ops = jit_cx_carried_ops(f);
  rt_buf_t body = {0}, module = {0};
  uj_status_t s = UJ_OK;
  if (!used || !ops) {
    s = rt_error(UJ_ERR_OOM, "cuda: out of memory for the tables of a multi-tensor kernel of %d tensors", f->ntensors);
  } else {
    jit_cx_t E = {0};
    E.f = f;
    E.dialect = JIT_CX_CUDA;
    E.out = &body;
    E.params = params;
    E.fold_params = params != NULL;
    E.param_fmt = "p%d";
    E.carried_op = ops;
    E.used_tensors = used;
    E.used_dims = used + nt;
    E.used_params = used + nt * (UJ_MAX_DIMS + 1);
    print_blocks(&E, plan);
    jit_cu_prelude(&module);
    rt_buf_printf(&module,
                  "\n/* one CUDA block per chunk of a group (uopjit multi-tensor execution) */\n"
                  "extern \"C\" __global__ void __launch_bounds__(%d) uj_groups(const long long* uj_chunks, "
                  "void* const* uj_ptrs, double* uj_part",
                  THREADS);
    for (int i = 0; i < f->nparams; i++)
      if (E.used_params[i]) rt_buf_printf(&module, ", const uj_i64 p%d", i);
    rt_buf_printf(&module,
                  ") {\n  const long long uj_c = blockIdx.x;\n"
                  "  const long long uj_begin = uj_chunks[3 * uj_c + 1], uj_len = uj_chunks[3 * uj_c + 2];\n"
                  "  void* const* uj_g = uj_ptrs + uj_chunks[3 * uj_c] * %d;\n"
                  "  (void)uj_part; (void)uj_g; (void)uj_begin;\n",
                  plan->nin + plan->nout);
    print_bindings(&module, plan, E.used_tensors, E.used_dims);
    rt_buf_append(&module, body.data ? body.data : "", body.len);
    rt_buf_printf(&module, "}\n");
    if (plan->nred) print_combine(&module, plan);
    if (body.failed || module.failed || !(*source = rt_buf_take(&module)))
      s = rt_error(UJ_ERR_OOM, "cuda: out of memory writing a multi-tensor kernel (%zu bytes so far)", module.len);
  }
  rt_buf_release(&body);
  rt_buf_release(&module);
  free(used);
  free(ops);
  return s;
}

/* ---- compile and run ---- */

/* The kernels are printed from the flat build's loop IR by jit/c_like.c, as
 * the CUDA engine's are, and compiled by NVRTC through the engine's source
 * path (its memory and disk caches). */
uj_status_t jit_cuda_groups_compile_for(uj_ctx_t* ctx, const groups_plan_t* plan, const int64_t* params,
                                        const char* arch, int* reused) {
  char* source;
  uj_status_t s = jit_cuda_groups_source(plan, params, &source);
  if (s == UJ_OK) s = jit_cuda_source_compile_for(ctx, source, kernel_names, plan->nred ? 2 : 1, arch, reused);
  free(source);
  return s;
}

/* Queues the launches on the context's stream with the table at dev: its
 * nchunks chunks first, the pointers at byte ptrs_at, the groups' first
 * chunks at first_at. */
static uj_status_t launch(rt_cuda_ctx_t* cc, const jit_cuda_source_t* m, const groups_plan_t* plan, int64_t nchunks,
                          size_t ptrs_at, size_t first_at, char* dev, int group_count) {
  void* part = NULL;
  uj_status_t s = UJ_OK;
  if (plan->nred)
    s = rt_cuda_alloc_temp(cc, (size_t)(nchunks ? nchunks : 1) * (size_t)plan->nred * sizeof(double), &part);
  if (s != UJ_OK) return s;
  void* chunks = dev;
  void* ptrs = dev + ptrs_at;
  void* first = dev + first_at;
  void* args[3] = {&chunks, &ptrs, &part}; /* $params are folded into the source: no more arguments */
  unsigned grid[3] = {(unsigned)nchunks, 1, 1};
  s = jit_cuda_source_launch(m, 0, grid, THREADS, args);
  if (s == UJ_OK && plan->nred) {
    long long ngroups = group_count;
    void* cargs[4] = {&first, &part, &ptrs, &ngroups};
    unsigned cgrid[3] = {(unsigned)((group_count + THREADS - 1) / THREADS), 1, 1};
    s = jit_cuda_source_launch(m, 1, cgrid, THREADS, cargs);
  }
  if (part) rt_cuda_free_temp(cc, part); /* stream-ordered: after the launches */
  return s;
}

uj_status_t jit_cuda_groups_run(uj_ctx_t* ctx, const groups_plan_t* plan, const uj_group_t* groups, int group_count,
                                const int64_t* params, int* ran) {
  *ran = 0;
  rt_cuda_ctx_t* cc;
  uj_status_t s = rt_cuda_ctx_get(ctx, &cc);
  if (s != UJ_OK) return s;
  char* source;
  if ((s = jit_cuda_groups_source(plan, params, &source)) != UJ_OK) return s;
  const jit_cuda_source_t* m;
  jit_cache_entry_t* ref;
  s = jit_cuda_source_get(ctx, source, kernel_names, plan->nred ? 2 : 1, &m, &ref);
  free(source);
  if (s != UJ_OK) return s;
  groups_table_t t;
  s = groups_table_make(plan, groups, group_count, GROUPS_CUDA_CHUNK, &t);
  if (s == UJ_OK && t.nchunks > 0x7fffffff)
    s = rt_error(UJ_ERR_UNSUPPORTED, "cuda: %lld chunks are more than one launch's grid holds",
                 (long long)t.nchunks);
  void* dev = NULL;
  if (s == UJ_OK) s = rt_cuda_alloc_temp(cc, t.bytes, &dev);
  size_t ptrs_at = (size_t)((char*)t.ptrs - (char*)t.host), first_at = (size_t)((char*)t.first - (char*)t.host);
  if (s == UJ_OK) {
    s = rt_cuda_upload(cc, dev, t.host, t.bytes); /* no wait: it frees the table once copied */
    t.host = NULL;
  }
  if (s == UJ_OK) s = launch(cc, m, plan, t.nchunks, ptrs_at, first_at, dev, group_count);
  if (dev) rt_cuda_free_temp(cc, dev);
  groups_table_release(&t);
  jit_cuda_source_release(ctx, ref);
  if (s == UJ_OK) *ran = 1;
  return s;
}
