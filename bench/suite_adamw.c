/* bench/suite_adamw.c: one AdamW step over every parameter tensor of a
 * model, the multi-tensor case: GPT-2 small (148 tensors, 124M parameters)
 * or, for --quick, the same layout scaled down (2 layers, width 256,
 * vocabulary 8192). The program is bench/adamw.uj (m, v, p in place; b1,
 * b2, lr, eps, wd shared 0-d tensors).
 *
 *   mir, c, auto  one uj_program_run_groups call for all tensors
 *   aot           the `uopjit aot` kernel called once per tensor
 *   hand          hand_adamw_step (hand.c) once per tensor
 *   copy          the traffic-matched copy kernel, one call for all tensors
 *                 split by elements as the library's multi-tensor pass is
 *                 (traffic_copy_all), timed alone for its own row and in
 *                 alternation with each runner for that runner's % of
 *                 limit; each runner is checked (model_error), then timed
 *                 step after step in place */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suite.h"

enum { MAX_TENSORS = 160, NHYPER = 5 };
static const char* const hyper_names[NHYPER] = {"b1", "b2", "lr", "eps", "wd"};

typedef struct {
  int count;
  int64_t numel[MAX_TENSORS], total;
  float *m[MAX_TENSORS], *g[MAX_TENSORS], *v[MAX_TENSORS], *p[MAX_TENSORS];
  float* pristine; /* m, v, p of every tensor, back to back */
  float* reference;
  traffic_t traffic[MAX_TENSORS]; /* each tensor's: reads m, g, v, p; writes m, v, p in place */
  float hyper[NHYPER];
  uj_tensor_t hyper_t[NHYPER];
  uj_tensor_t tm[MAX_TENSORS], tg[MAX_TENSORS], tv[MAX_TENSORS], tp[MAX_TENSORS];
  const uj_tensor_t* inputs[MAX_TENSORS][BENCH_MAX_IO];
  uj_tensor_t* outputs[MAX_TENSORS][3];
  uj_group_t groups[MAX_TENSORS];
  int ninputs;
} model_t;

static void add_tensor(model_t* m, int64_t numel) {
  if (m->count < MAX_TENSORS) m->numel[m->count++] = numel, m->total += numel;
}

/* GPT-2's parameter tensors: embeddings, per layer two layer norms,
 * attention (qkv and projection) and the MLP, each weight with its bias,
 * then the final layer norm. */
static void gpt2_layout(model_t* m, int64_t vocab, int64_t context, int64_t width, int layers) {
  add_tensor(m, vocab * width);
  add_tensor(m, context * width);
  for (int l = 0; l < layers; l++) {
    add_tensor(m, width), add_tensor(m, width);                     /* ln_1 */
    add_tensor(m, width * 3 * width), add_tensor(m, 3 * width);     /* attn.c_attn */
    add_tensor(m, width * width), add_tensor(m, width);             /* attn.c_proj */
    add_tensor(m, width), add_tensor(m, width);                     /* ln_2 */
    add_tensor(m, width * 4 * width), add_tensor(m, 4 * width);     /* mlp.c_fc */
    add_tensor(m, 4 * width * width), add_tensor(m, width);         /* mlp.c_proj */
  }
  add_tensor(m, width), add_tensor(m, width); /* ln_f */
}

static void model_free(model_t* m) {
  for (int k = 0; k < m->count; k++) free(m->m[k]), free(m->g[k]), free(m->v[k]), free(m->p[k]);
  free(m->pristine);
  free(m->reference);
}

/* Puts the initial m, v, p back. */
static void model_reset(model_t* m) {
  int64_t at = 0;
  for (int k = 0; k < m->count; k++) {
    size_t bytes = (size_t)m->numel[k] * sizeof(float);
    memcpy(m->m[k], m->pristine + at, bytes), at += m->numel[k];
    memcpy(m->v[k], m->pristine + at, bytes), at += m->numel[k];
    memcpy(m->p[k], m->pristine + at, bytes), at += m->numel[k];
  }
}

static void model_copy_out(const model_t* m, float* out) {
  int64_t at = 0;
  for (int k = 0; k < m->count; k++) {
    size_t bytes = (size_t)m->numel[k] * sizeof(float);
    memcpy(out + at, m->m[k], bytes), at += m->numel[k];
    memcpy(out + at, m->v[k], bytes), at += m->numel[k];
    memcpy(out + at, m->p[k], bytes), at += m->numel[k];
  }
}

/* The check: every runner starts from the same initial values and must
 * agree with the hand-written loop's step within 1e-5 relative (the
 * |got - ref| / max(1, |ref|) of the 1-D programs). */
static double model_error(const model_t* m) {
  double worst = 0;
  int64_t at = 0;
  for (int k = 0; k < m->count; k++) {
    const float* arrays[3] = {m->m[k], m->v[k], m->p[k]};
    for (int a = 0; a < 3; a++)
      for (int64_t i = 0; i < m->numel[k]; i++, at++) {
        double ref = m->reference[at], err = fabs((double)arrays[a][i] - ref) / fmax(1.0, fabs(ref));
        if (err != err) return INFINITY;
        worst = fmax(worst, err);
      }
  }
  return worst;
}

/* Allocates and fills the tensors and binds the program's inputs by name. */
static int model_new(model_t* m, const uj_program_t* program) {
  uint64_t seed = 0x853c49e6748fea9bull;
  m->pristine = malloc((size_t)(3 * m->total) * sizeof(float));
  m->reference = malloc((size_t)(3 * m->total) * sizeof(float));
  if (!m->pristine || !m->reference) return -1;
  for (int h = 0; h < NHYPER; h++) {
    bench_named_scalar(hyper_names[h], &m->hyper[h]);
    m->hyper_t[h] = (uj_tensor_t){&m->hyper[h], UJ_F32, UJ_CPU, 0, {0}};
  }
  m->ninputs = uj_program_io_count(program, 0);
  if (m->ninputs > BENCH_MAX_IO || uj_program_io_count(program, 1) != 3) {
    fprintf(stderr, "bench: adamw.uj: expected at most %d inputs and the outputs m, v, p\n", BENCH_MAX_IO);
    return -1;
  }
  for (int k = 0; k < m->count; k++) {
    size_t bytes = (size_t)m->numel[k] * sizeof(float);
    float** arrays[4] = {&m->m[k], &m->g[k], &m->v[k], &m->p[k]};
    uj_tensor_t* tensors[4] = {&m->tm[k], &m->tg[k], &m->tv[k], &m->tp[k]};
    for (int a = 0; a < 4; a++) {
      if (!(*arrays[a] = malloc(bytes))) return -1;
      bench_fill_uniform(*arrays[a], m->numel[k], &seed);
      *tensors[a] = (uj_tensor_t){*arrays[a], UJ_F32, UJ_CPU, 1, {m->numel[k]}};
    }
    for (int i = 0; i < m->ninputs; i++) {
      const char* name = uj_program_io_name(program, 0, i);
      const uj_tensor_t* t = NULL;
      for (int h = 0; h < NHYPER; h++)
        if (strcmp(name, hyper_names[h]) == 0) t = &m->hyper_t[h];
      if (!strcmp(name, "m")) t = &m->tm[k];
      if (!strcmp(name, "g")) t = &m->tg[k];
      if (!strcmp(name, "v")) t = &m->tv[k];
      if (!strcmp(name, "p")) t = &m->tp[k];
      if (!t) {
        fprintf(stderr, "bench: adamw.uj: unknown input '%s'\n", name);
        return -1;
      }
      m->inputs[k][i] = t;
    }
    for (int o = 0; o < 3; o++) {
      const char* name = uj_program_io_name(program, 1, o);
      m->outputs[k][o] = !strcmp(name, "m") ? &m->tm[k] : !strcmp(name, "v") ? &m->tv[k] : &m->tp[k];
    }
    m->groups[k] = (uj_group_t){m->inputs[k], m->outputs[k]};
    m->traffic[k] = (traffic_t){.reads = {m->m[k], m->g[k], m->v[k], m->p[k]}, .nreads = 4,
                                .writes = {m->m[k], m->v[k], m->p[k]}, .nwrites = 3, .n = m->numel[k]};
  }
  model_copy_out(m, m->pristine);
  return 0;
}

typedef struct {
  model_t* model;
  runner_t* runner; /* NULL: hand; else a JIT engine or AOT */
  const aot_kernel_t* aot;
  int copy_threads; /* > 0: the copy kernel */
} step_t;

static int step_call(void* arg) {
  step_t* st = arg;
  model_t* m = st->model;
  if (st->copy_threads > 0) return traffic_copy_all(m->traffic, m->count, st->copy_threads);
  if (!st->runner) {
    for (int k = 0; k < m->count; k++) hand_adamw_step(m->m[k], m->g[k], m->v[k], m->p[k], m->numel[k], m->hyper);
    return 0;
  }
  if (st->aot) {
    for (int k = 0; k < m->count; k++) {
      void* data[BENCH_MAX_IO];
      const int64_t* dims[BENCH_MAX_IO];
      for (int i = 0; i < m->ninputs; i++) data[i] = m->inputs[k][i]->data, dims[i] = m->inputs[k][i]->dims;
      void* out[3] = {m->outputs[k][0]->data, m->outputs[k][1]->data, m->outputs[k][2]->data};
      if (st->aot->run(data, dims, out, NULL) != 0) return -1;
    }
    return 0;
  }
  if (uj_program_run_groups(st->runner->ctx, st->runner->program, m->groups, m->count, m->ninputs, NULL, 0, 3) ==
      UJ_OK)
    return 0;
  fprintf(stderr, "bench: adamw on %s: %s\n", runner_name(st->runner->kind), uj_last_error());
  return -1;
}

int suite_measure_adamw(suite_t* s) {
  static const program_spec_t spec = {"adamw", 28, 1e-5, 0, NULL, NULL};
  static model_t model;
  memset(&model, 0, sizeof model);
  if (s->quick) gpt2_layout(&model, 8192, 256, 256, 2);
  else gpt2_layout(&model, 50257, 1024, 768, 12);
  char shape[40];
  snprintf(shape, sizeof shape, "%s, %d tensors", s->quick ? "GPT-2 layout, 2x256" : "GPT-2 small", model.count);
  program_text_t text;
  uj_program_t* parsed = NULL;
  if (program_text_load(&spec, &text) != 0) return 1;
  int failed = uj_program_parse(text.source, &parsed) != UJ_OK || model_new(&model, parsed) != 0;
  uj_program_free(parsed);
  if (failed) fprintf(stderr, "bench: adamw: cannot set the model up (%s)\n", uj_last_error());
  step_t hand = {&model, NULL, NULL, 0};
  if (!failed) {
    step_call(&hand); /* the reference */
    model_copy_out(&model, model.reference);
  }
  double bytes = 28.0 * (double)model.total;
  for (int t = 0; t < s->nthreads && !failed; t++) {
    step_t copy = {&model, NULL, NULL, s->threads[t]};
    suite_row_t* row = suite_add_row(s, "adamw", "copy", "limit", model.total, s->threads[t]);
    if (!row) break;
    snprintf(row->shape, sizeof row->shape, "%s", shape);
    row->bytes = bytes;
    if (bench_time_stats(step_call, &copy, s->samples, s->min_sample_ns, &row->timing) == 0)
      snprintf(row->status, sizeof row->status, "ok");
    static const struct {
      runner_kind_t kind;
      suite_runner_t engine;
    } plan[] = {{RUNNER_MIR, SR_MIR}, {RUNNER_C, SR_C}, {RUNNER_AUTO, SR_AUTO}, {RUNNER_AOT, SR_AOT}, {RUNNER_HAND, SR_HAND}};
    for (size_t k = 0; k < sizeof plan / sizeof plan[0]; k++) {
      int jit = plan[k].kind != RUNNER_AOT && plan[k].kind != RUNNER_HAND;
      if (!s->engines[plan[k].engine] || (!jit && t > 0)) continue;
      row = suite_add_row(s, "adamw", runner_name(plan[k].kind), jit ? "jit" : plan[k].kind == RUNNER_AOT ? "aot" : "baseline",
                          model.total, jit ? s->threads[t] : 1);
      if (!row) return 1;
      snprintf(row->shape, sizeof row->shape, "%s", shape);
      row->bytes = bytes;
      runner_t runner;
      int opened = plan[k].kind == RUNNER_HAND ? 1 : runner_open(&runner, plan[k].kind, row->threads, &text);
      step_t st = {&model, plan[k].kind == RUNNER_HAND ? NULL : &runner, aot_find("adamw"), 0};
      if (jit) st.aot = NULL;
      snprintf(row->status, sizeof row->status, "%s", opened == 0 ? "unavailable" : "failed");
      if (opened == 1) {
        model_reset(&model);
        if (step_call(&st) == 0) {
          row->max_error = model_error(&model);
          int ok = row->max_error <= spec.tolerance;
          snprintf(row->status, sizeof row->status, "%s", ok ? "ok" : "mismatch");
          if (ok && st.runner) runner_warm_auto(&runner, step_call, &st);
          step_t limit = {&model, NULL, NULL, row->threads};
          if (ok && bench_time_alternating(step_call, &st, step_call, &limit, s->alternation_rounds, s->min_sample_ns,
                                           &row->timing, &row->limit_timing, &row->limit_ratio) != 0)
            snprintf(row->status, sizeof row->status, "failed");
        }
        if (plan[k].kind != RUNNER_HAND) runner_close(&runner);
      }
      if (strcmp(row->status, "ok") != 0 && strcmp(row->status, "unavailable") != 0) failed = 1;
    }
  }
  model_free(&model);
  program_text_free(&text);
  return failed;
}
