/* tests/groups_world.h: a list of groups for uj_program_run_groups tests,
 * built from a program's input and output names: per group, a tensor of
 * the group's shape for every input (values in [0.01, 1): square roots and
 * divisions stay finite), a 0-d tensor for the inputs named as shared
 * scalars (one tensor in every group) or per-group scalars (group i's
 * points at element i of one array); an output named like an input is that
 * input, written in place; any other output gets its own tensor of the
 * shape the program gives. A clone holds the same values in memory of its
 * own, for running the same update one group at a time. */
#ifndef UJ_TESTS_GROUPS_WORLD_H
#define UJ_TESTS_GROUPS_WORLD_H

#include "oracle.h"

enum { GW_MAX_IO = 16 };

typedef struct {
  uj_program_t* prog;
  int nin, nout, ngroups;
  char kind[GW_MAX_IO]; /* by input: 'g' group-shaped, 's' shared scalar, 'p' per-group scalar */
  int out_in[GW_MAX_IO]; /* by output: the input it is written over, or -1 */
  uj_tensor_t* in;       /* [group * nin + i]; shared scalars: each group's copy of the header */
  uj_tensor_t* out;      /* [group * nout + o], outputs of their own */
  float* per_group[GW_MAX_IO]; /* per-group scalar values */
  void* shared[GW_MAX_IO];     /* shared scalars' data */
  const uj_tensor_t** inp;
  uj_tensor_t** outp;
  uj_group_t* groups;
} gw_t;

static inline int gw_named(const char* list, const char* name) {
  size_t n = strlen(name);
  for (const char* s = list; s && *s;) {
    const char* e = strchr(s, ',');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if (len == n && !strncmp(s, name, n)) return 1;
    s = e ? e + 1 : s + len;
  }
  return 0;
}

static inline void gw_bind(gw_t* w) {
  for (int g = 0; g < w->ngroups; g++) {
    for (int i = 0; i < w->nin; i++) w->inp[g * w->nin + i] = &w->in[g * w->nin + i];
    for (int o = 0; o < w->nout; o++)
      w->outp[g * w->nout + o] = w->out_in[o] >= 0 ? &w->in[g * w->nin + w->out_in[o]] : &w->out[g * w->nout + o];
    w->groups[g] = (uj_group_t){&w->inp[g * w->nin], &w->outp[g * w->nout]};
  }
}

/* ndim[g], dims[g * UJ_MAX_DIMS + a]: group g's shape. shared, per_group:
 * comma-separated input names. NULL when the program does not parse. */
static inline gw_t* gw_new(const char* src, int ngroups, const int* ndim, const int64_t* dims, const char* shared,
                           const char* per_group, uint64_t* st) {
  gw_t* w = calloc(1, sizeof *w);
  if (uj_program_parse(src, &w->prog) != UJ_OK) {
    fprintf(stderr, "  parse: %s\n", uj_last_error());
    free(w);
    return NULL;
  }
  w->nin = uj_program_io_count(w->prog, 0), w->nout = uj_program_io_count(w->prog, 1), w->ngroups = ngroups;
  w->in = calloc((size_t)(ngroups * w->nin + 1), sizeof *w->in);
  w->out = calloc((size_t)(ngroups * w->nout + 1), sizeof *w->out);
  w->inp = calloc((size_t)(ngroups * w->nin + 1), sizeof *w->inp);
  w->outp = calloc((size_t)(ngroups * w->nout + 1), sizeof *w->outp);
  w->groups = calloc((size_t)ngroups + 1, sizeof *w->groups);
  for (int i = 0; i < w->nin; i++) {
    const char* name = uj_program_io_name(w->prog, 0, i);
    w->kind[i] = gw_named(shared, name) ? 's' : gw_named(per_group, name) ? 'p' : 'g';
    if (w->kind[i] == 's') {
      w->shared[i] = calloc(1, sizeof(float));
      *(float*)w->shared[i] = (float)harness_real(st, 0.05, 0.95);
    }
    if (w->kind[i] == 'p') {
      w->per_group[i] = calloc((size_t)ngroups + 1, sizeof(float));
      for (int g = 0; g < ngroups; g++) w->per_group[i][g] = (float)harness_real(st, 0.05, 0.95);
    }
  }
  for (int o = 0; o < w->nout; o++) {
    w->out_in[o] = -1;
    for (int i = 0; i < w->nin; i++)
      if (!strcmp(uj_program_io_name(w->prog, 1, o), uj_program_io_name(w->prog, 0, i))) w->out_in[o] = i;
  }
  for (int g = 0; g < ngroups; g++) {
    for (int i = 0; i < w->nin; i++) {
      uj_tensor_t* t = &w->in[g * w->nin + i];
      if (w->kind[i] == 'g') {
        *t = or_tensor(UJ_F32, ndim[g], &dims[g * UJ_MAX_DIMS]);
        or_fill_real(st, t, 0.01, 1);
      } else {
        *t = (uj_tensor_t){w->kind[i] == 's' ? w->shared[i] : &w->per_group[i][g], UJ_F32, UJ_CPU, 0, {0}};
      }
    }
  }
  gw_bind(w);
  for (int g = 0; g < ngroups; g++)
    for (int o = 0; o < w->nout; o++) {
      if (w->out_in[o] >= 0) continue;
      int nd = 0;
      int64_t d[UJ_MAX_DIMS];
      if (uj_program_shape(w->prog, UJ_FORWARD, w->groups[g].inputs, NULL, o, &nd, d) != UJ_OK)
        fprintf(stderr, "  shape of output %d of group %d: %s\n", o, g, uj_last_error());
      w->out[g * w->nout + o] = or_tensor(UJ_F32, nd, d);
      for (int64_t k = 0; k < or_numel(nd, d); k++) or_set(&w->out[g * w->nout + o], k, -7);
    }
  return w;
}

/* The same groups with the same values in memory of their own. */
static inline gw_t* gw_clone(const gw_t* src) {
  gw_t* w = calloc(1, sizeof *w);
  *w = *src;
  w->prog = NULL;
  int ni = src->ngroups * src->nin, no = src->ngroups * src->nout;
  w->in = calloc((size_t)ni + 1, sizeof *w->in);
  w->out = calloc((size_t)no + 1, sizeof *w->out);
  w->inp = calloc((size_t)ni + 1, sizeof *w->inp);
  w->outp = calloc((size_t)no + 1, sizeof *w->outp);
  w->groups = calloc((size_t)src->ngroups + 1, sizeof *w->groups);
  for (int i = 0; i < src->nin; i++) {
    w->shared[i] = NULL, w->per_group[i] = NULL;
    if (src->kind[i] == 's') w->shared[i] = calloc(1, sizeof(float)), memcpy(w->shared[i], src->shared[i], 4);
    if (src->kind[i] == 'p')
      w->per_group[i] = calloc((size_t)src->ngroups + 1, sizeof(float)),
      memcpy(w->per_group[i], src->per_group[i], (size_t)src->ngroups * 4);
  }
  for (int k = 0; k < ni; k++) {
    int i = k % src->nin, g = k / src->nin;
    const uj_tensor_t* s = &src->in[k];
    if (src->kind[i] == 'g') {
      w->in[k] = or_tensor(UJ_F32, s->ndim, s->dims);
      memcpy(w->in[k].data, s->data, (size_t)or_tnumel(s) * 4);
    } else {
      w->in[k] = (uj_tensor_t){src->kind[i] == 's' ? w->shared[i] : &w->per_group[i][g], UJ_F32, UJ_CPU, 0, {0}};
    }
  }
  for (int k = 0; k < no; k++) {
    if (src->out_in[k % src->nout] >= 0) continue;
    w->out[k] = or_tensor(UJ_F32, src->out[k].ndim, src->out[k].dims);
    memcpy(w->out[k].data, src->out[k].data, (size_t)or_tnumel(&src->out[k]) * 4);
  }
  gw_bind(w);
  return w;
}

static inline void gw_free(gw_t* w) {
  if (!w) return;
  for (int k = 0; k < w->ngroups * w->nin; k++)
    if (w->kind[k % w->nin] == 'g') or_tensor_free(&w->in[k]);
  for (int k = 0; k < w->ngroups * w->nout; k++)
    if (w->out_in[k % w->nout] < 0) or_tensor_free(&w->out[k]);
  for (int i = 0; i < w->nin; i++) free(w->shared[i]), free(w->per_group[i]);
  free(w->in), free(w->out), free(w->inp), free(w->outp), free(w->groups);
  if (w->prog) uj_program_free(w->prog);
  free(w);
}

/* Runs the program on each group of w alone, in order. */
static inline uj_status_t gw_run_one_by_one(uj_ctx_t* ctx, uj_program_t* prog, gw_t* w) {
  for (int g = 0; g < w->ngroups; g++) {
    uj_status_t s = uj_program_run(ctx, prog, UJ_FORWARD, w->groups[g].inputs, w->nin, NULL, 0,
                                   w->groups[g].outputs, w->nout);
    if (s != UJ_OK) return s;
  }
  return UJ_OK;
}

/* A context on a compiling engine (C, else MIR) with `threads` threads;
 * NULL when neither is available. */
static inline uj_ctx_t* gw_compiling_ctx(int threads) {
  static const uj_engine_t engines[] = {UJ_ENGINE_C, UJ_ENGINE_MIR};
  for (int e = 0; e < 2; e++) {
    uj_ctx_t* ctx = uj_ctx_new();
    if (ctx && uj_ctx_set_engine(ctx, engines[e]) == UJ_OK && uj_ctx_set_threads(ctx, threads) == UJ_OK) return ctx;
    uj_ctx_free(ctx);
  }
  return NULL;
}

/* The tensor output o of group g. */
static inline const uj_tensor_t* gw_out(const gw_t* w, int g, int o) { return w->outp[g * w->nout + o]; }

#endif
