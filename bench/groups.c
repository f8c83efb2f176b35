/* bench/groups.c: `bench --groups`, multi-tensor execution
 * (uj_program_run_groups) on an optimizer step.
 *
 * AdamW (decoupled weight decay; the bias corrections come in as run-time
 * scalars computed from the step, as torch computes them) over GPT-2
 * small's 148 parameter shapes, f32, on the C and MIR engines with 1 and 2
 * threads, against the memory-traffic limit of the step's bytes and torch's
 * multi-tensor AdamW (gpt2_section); then the many-small-tensors case:
 * 10,000 tensors of 1..1000 elements against one tensor of the same total,
 * through the same call (many_small_section).
 *
 * Before anything is timed one step is checked against the update in
 * double (check_step). A time is the median over samples of one step each
 * (bench_time_calls). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define ADAMW_SOURCE "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p*decay - step*m/(sqrt(v)/bc2s + eps)"
enum { BYTES_PER_ELEMENT = 28, MAX_SCALARS = 8 };
static const double LR = 1e-3, B1 = 0.9, B2 = 0.999, EPS = 1e-8, WD = 0.01;

typedef struct {
  int ndim;
  int64_t dims[2];
} shape_t;

/* GPT-2 small's parameters in model order: 148 tensors, 124,439,808 elements. */
static int gpt2_small(shape_t* s) {
  int n = 0;
  s[n++] = (shape_t){2, {50257, 768}}; /* wte */
  s[n++] = (shape_t){2, {1024, 768}};  /* wpe */
  for (int layer = 0; layer < 12; layer++) {
    s[n++] = (shape_t){1, {768}}, s[n++] = (shape_t){1, {768}};             /* ln_1 w, b */
    s[n++] = (shape_t){2, {768, 2304}}, s[n++] = (shape_t){1, {2304}};      /* attn.c_attn */
    s[n++] = (shape_t){2, {768, 768}}, s[n++] = (shape_t){1, {768}};        /* attn.c_proj */
    s[n++] = (shape_t){1, {768}}, s[n++] = (shape_t){1, {768}};             /* ln_2 w, b */
    s[n++] = (shape_t){2, {768, 3072}}, s[n++] = (shape_t){1, {3072}};      /* mlp.c_fc */
    s[n++] = (shape_t){2, {3072, 768}}, s[n++] = (shape_t){1, {768}};       /* mlp.c_proj */
  }
  s[n++] = (shape_t){1, {768}}, s[n++] = (shape_t){1, {768}}; /* ln_f w, b */
  return n;
}

/* The tensors of one list of parameters and the call's bindings. */
typedef struct {
  int count;
  int64_t* numel;
  float **p, **g, **m, **v;
  uj_tensor_t* tensors; /* per group: p, g, m, v */
  traffic_t* traffic;   /* per group: reads p, g, m, v; writes p, m, v in place */
  float scalar_value[MAX_SCALARS];
  uj_tensor_t scalars[MAX_SCALARS];
  const uj_tensor_t** in;
  uj_tensor_t** out;
  uj_group_t* groups;
  int nin, nout;
} param_set_t;

static const char* const scalar_names[] = {"b1", "b2", "decay", "step", "bc2s", "eps"};

/* The scalars of step t (from 1). */
static void set_step(param_set_t* s, int t) {
  double bc1 = 1 - pow(B1, t), bc2 = 1 - pow(B2, t);
  float v[] = {(float)B1, (float)B2, (float)(1 - LR * WD), (float)(LR / bc1), (float)sqrt(bc2), (float)EPS};
  memcpy(s->scalar_value, v, sizeof v);
}

static void set_free(param_set_t* s) {
  for (int i = 0; s->p && i < s->count; i++) free(s->p[i]), free(s->g[i]), free(s->m[i]), free(s->v[i]);
  free(s->numel), free(s->p), free(s->g), free(s->m), free(s->v), free(s->tensors);
  free(s->in), free(s->out), free(s->groups), free(s->traffic);
  memset(s, 0, sizeof *s);
}

/* Binds the program's inputs and outputs by name: p, g, m, v per group,
 * the scalars shared. 0, or -1 for a name it does not know. */
static int set_bind(param_set_t* s, uj_program_t* prog) {
  s->nin = uj_program_io_count(prog, 0), s->nout = uj_program_io_count(prog, 1);
  for (int k = 0; k < MAX_SCALARS; k++)
    s->scalars[k] = (uj_tensor_t){&s->scalar_value[k], UJ_F32, UJ_CPU, 0, {0}};
  for (int gi = 0; gi < s->count; gi++) {
    for (int side = 0; side < 2; side++)
      for (int i = 0; i < (side ? s->nout : s->nin); i++) {
        const char* name = uj_program_io_name(prog, side, i);
        uj_tensor_t* t = NULL;
        for (int k = 0; k < 4 && !t; k++)
          if (!strcmp(name, (const char*[]){"p", "g", "m", "v"}[k])) t = &s->tensors[gi * 4 + k];
        for (int k = 0; k < (int)(sizeof scalar_names / sizeof *scalar_names) && !t; k++)
          if (!strcmp(name, scalar_names[k])) t = &s->scalars[k];
        if (!t) {
          fprintf(stderr, "bench --groups: the program's %s %s is not bound\n", side ? "output" : "input", name);
          return -1;
        }
        if (side) s->out[gi * s->nout + i] = t;
        else s->in[gi * s->nin + i] = t;
      }
    s->groups[gi] = (uj_group_t){&s->in[gi * s->nin], &s->out[gi * s->nout]};
  }
  return 0;
}

static int set_new(param_set_t* s, const shape_t* shapes, int count, uj_program_t* prog, uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->count = count;
  s->numel = calloc((size_t)count, sizeof *s->numel);
  s->p = calloc((size_t)count, sizeof *s->p), s->g = calloc((size_t)count, sizeof *s->g);
  s->m = calloc((size_t)count, sizeof *s->m), s->v = calloc((size_t)count, sizeof *s->v);
  s->tensors = calloc((size_t)count * 4, sizeof *s->tensors);
  s->in = calloc((size_t)count * 16, sizeof *s->in);
  s->out = calloc((size_t)count * 16, sizeof *s->out);
  s->groups = calloc((size_t)count, sizeof *s->groups);
  s->traffic = calloc((size_t)count, sizeof *s->traffic);
  if (!s->numel || !s->p || !s->g || !s->m || !s->v || !s->tensors || !s->in || !s->out || !s->groups || !s->traffic)
    return -1;
  uint64_t state = seed | 1;
  for (int i = 0; i < count; i++) {
    int64_t n = 1;
    for (int a = 0; a < shapes[i].ndim; a++) n *= shapes[i].dims[a];
    s->numel[i] = n;
    float** arrays[] = {&s->p[i], &s->g[i], &s->m[i], &s->v[i]};
    for (int k = 0; k < 4; k++) {
      if (!(*arrays[k] = malloc((size_t)n * sizeof(float)))) return -1;
      bench_fill_uniform(*arrays[k], n, &state);
      s->tensors[i * 4 + k] = (uj_tensor_t){*arrays[k], UJ_F32, UJ_CPU, shapes[i].ndim, {0}};
      memcpy(s->tensors[i * 4 + k].dims, shapes[i].dims, sizeof shapes[i].dims);
    }
    s->traffic[i] = (traffic_t){.reads = {s->p[i], s->g[i], s->m[i], s->v[i]}, .nreads = 4,
                                .writes = {s->p[i], s->m[i], s->v[i]}, .nwrites = 3, .n = n};
  }
  set_step(s, 1);
  return uj_program_io_count(prog, 0) > 16 ? -1 : set_bind(s, prog);
}

/* One step from the set's current values, checked against AdamW in double
 * on the first, the largest and the last tensor: the largest relative
 * error, or -1 when the call failed. */
static double check_step(uj_ctx_t* ctx, uj_program_t* prog, param_set_t* s) {
  int largest = 0;
  for (int i = 1; i < s->count; i++)
    if (s->numel[i] > s->numel[largest]) largest = i;
  int which[3] = {0, largest, s->count - 1};
  double* before[3][4] = {{0}};
  for (int k = 0; k < 3; k++) {
    int i = which[k];
    float* src[4] = {s->p[i], s->g[i], s->m[i], s->v[i]};
    for (int a = 0; a < 4; a++) {
      before[k][a] = malloc((size_t)s->numel[i] * sizeof(double));
      if (!before[k][a]) return -1;
      for (int64_t e = 0; e < s->numel[i]; e++) before[k][a][e] = src[a][e];
    }
  }
  set_step(s, 1);
  double worst = 0;
  if (uj_program_run_groups(ctx, prog, s->groups, s->count, s->nin, NULL, 0, s->nout) != UJ_OK) {
    fprintf(stderr, "bench --groups: %s\n", uj_last_error());
    worst = -1;
  }
  for (int k = 0; k < 3; k++) {
    int i = which[k];
    for (int64_t e = 0; e < s->numel[i] && worst >= 0; e++) {
      double p = before[k][0][e], g = before[k][1][e], m = before[k][2][e], v = before[k][3][e];
      m = B1 * m + (1 - B1) * g;
      v = B2 * v + (1 - B2) * g * g;
      p = p * (1 - LR * WD) - (LR / (1 - B1)) * m / (sqrt(v) / sqrt(1 - B2) + EPS);
      double got[3] = {s->p[i][e], s->m[i][e], s->v[i][e]}, want[3] = {p, m, v};
      for (int a = 0; a < 3; a++) {
        double err = fabs(got[a] - want[a]) / (fabs(want[a]) > 1 ? fabs(want[a]) : 1);
        if (err > worst) worst = err;
      }
    }
    for (int a = 0; a < 4; a++) free(before[k][a]);
  }
  return worst;
}

typedef struct {
  uj_ctx_t* ctx;
  uj_program_t* prog;
  param_set_t* s;
  int step;
} step_arg_t;

/* One optimizer step, the scalars those of the next step number. */
static int step_call(void* arg) {
  step_arg_t* a = arg;
  set_step(a->s, ++a->step);
  if (uj_program_run_groups(a->ctx, a->prog, a->s->groups, a->s->count, a->s->nin, NULL, 0, a->s->nout) == UJ_OK)
    return 0;
  fprintf(stderr, "bench --groups: %s\n", uj_last_error());
  return -1;
}

/* A context for engine e on `threads` threads, warmed by one step (its
 * kernel compiled); NULL with a message when it cannot run. */
static uj_ctx_t* warm_context(uj_engine_t e, int threads, step_arg_t* arg) {
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx || uj_ctx_set_engine(ctx, e) != UJ_OK || uj_ctx_set_threads(ctx, threads) != UJ_OK) {
    fprintf(stderr, "bench --groups: engine %s: %s\n", uj_engine_name(e), uj_last_error());
    uj_ctx_free(ctx);
    return NULL;
  }
  arg->ctx = ctx;
  if (step_call(arg) != 0) {
    uj_ctx_free(ctx);
    return NULL;
  }
  return ctx;
}

/* The traffic-matched copy over a set, as a call. */
typedef struct {
  param_set_t* s;
  int threads;
} copy_arg_t;

static int copy_call(void* arg) {
  copy_arg_t* c = arg;
  return traffic_copy_all(c->s->traffic, c->s->count, c->threads);
}

/* Round-robin timing: each round calls every item once, so that they share
 * the machine's state of the moment (it is noisy and shared); the median
 * per item over the rounds, or -1 for an item whose call failed. */
enum { MAX_ITEMS = 8, MAX_ROUNDS = 64 };
typedef struct {
  bench_call_fn call;
  void* arg;
  double ns[MAX_ROUNDS];
  int failed;
} timed_t;

static void time_rounds(timed_t* items, int n, int rounds, double* medians) {
  if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < n; i++) {
      if (items[i].failed) continue;
      double t0 = bench_now_ns();
      items[i].failed = items[i].call(items[i].arg) != 0;
      items[i].ns[r] = bench_now_ns() - t0;
    }
  for (int i = 0; i < n; i++) medians[i] = items[i].failed ? -1 : bench_median(items[i].ns, rounds);
}

/* ---- torch, through bench/groups_peers.py ---- */

typedef struct {
  char peer[16];
  int threads;
  double ns;
  int ok;
} torch_row_t;

static const char* torch_python(void) {
  const char* chosen = getenv("UOPJIT_BENCH_PYTHON");
  static const char* const candidates[] = {"/usr/bin/python3", "python3"};
  for (int k = chosen && *chosen ? -1 : 0; k < 2; k++) {
    const char* py = k < 0 ? chosen : candidates[k];
    char command[4200];
    if (strchr(py, '\'') ||
        snprintf(command, sizeof command, "'%s' -c 'import torch' >/dev/null 2>&1", py) >= (int)sizeof command)
      continue;
    if (system(command) == 0) return py;
    if (k < 0) return NULL; /* the one asked for has no torch */
  }
  return NULL;
}

/* The helper's rows for these shapes; how many, notes printed to stdout. */
static int torch_measure(const shape_t* shapes, int count, int samples, torch_row_t* rows, int max_rows) {
  const char* py = torch_python();
  if (!py) {
    printf("  torch: no python3 that imports torch (UOPJIT_BENCH_PYTHON): no torch rows\n");
    return 0;
  }
  char path[] = "/tmp/uopjit-groups-XXXXXX";
  int fd = mkstemp(path);
  FILE* f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) return 0;
  for (int i = 0; i < count; i++)
    fprintf(f, shapes[i].ndim == 2 ? "%lld,%lld\n" : "%lld\n", (long long)shapes[i].dims[0],
            (long long)shapes[i].dims[1]);
  fclose(f);
  char command[8400];
  snprintf(command, sizeof command, "'%s' '%s/groups_peers.py' --samples %d < '%s'", py, BENCH_SOURCE_DIR, samples,
           path);
  FILE* helper = popen(command, "r");
  int n = 0;
  char line[1024];
  while (helper && fgets(line, sizeof line, helper)) {
    line[strcspn(line, "\n")] = '\0';
    char peer[16], verdict[16];
    int threads;
    double ns, err;
    if (!strncmp(line, "note\t", 5)) printf("  torch: %s\n", line + 5);
    else if (n < max_rows && sscanf(line, "row\t%15s\t%d\t%lf\t%lf\t%15s", peer, &threads, &ns, &err, verdict) == 5) {
      snprintf(rows[n].peer, sizeof rows[n].peer, "%s", peer);
      rows[n].threads = threads, rows[n].ns = ns, rows[n].ok = !strcmp(verdict, "ok");
      n++;
    }
  }
  if (helper) pclose(helper);
  unlink(path);
  return n;
}

/* ---- the report ---- */

static const uj_engine_t engines[] = {UJ_ENGINE_C, UJ_ENGINE_MIR};

static double total_elements(const param_set_t* s) {
  double n = 0;
  for (int i = 0; i < s->count; i++) n += (double)s->numel[i];
  return n;
}

static void print_row(const char* who, int threads, double ns, double bytes, double limit, double foreach) {
  if (ns < 0) {
    printf("  %-22s %7d %10s\n", who, threads, "failed");
    return;
  }
  char ratio[32] = "";
  if (foreach > 0) snprintf(ratio, sizeof ratio, "%.2fx", foreach / ns);
  printf("  %-22s %7d %10.2f %8.2f %10.0f%% %14s\n", who, threads, ns / 1e6, bytes / ns, 100.0 * limit / ns, ratio);
}

/* GPT-2 small's step against:
 *   - the memory-traffic limit of the step's bytes (p, g, m, v read; p, m,
 *     v written: 28 bytes per element), measured here by a loop that moves
 *     exactly those bytes over the same tensors as one job split by
 *     elements, as the suite's AdamW row does (traffic_copy_all, traffic.c);
 *   - torch.optim.AdamW(foreach=True), and fused=True where the installed
 *     torch offers it on the CPU, in the same run (bench/groups_peers.py). */
static void gpt2_section(int samples) {
  static shape_t shapes[148];
  int count = gpt2_small(shapes);
  torch_row_t trows[8];
  int ntorch = torch_measure(shapes, count, samples, trows, 8);
  uj_program_t* prog = NULL;
  param_set_t s;
  if (uj_program_parse(ADAMW_SOURCE, &prog) != UJ_OK || set_new(&s, shapes, count, prog, 7) != 0) {
    fprintf(stderr, "bench --groups: cannot set up GPT-2 small's parameters: %s\n", uj_last_error());
    uj_program_free(prog);
    return;
  }
  double bytes = total_elements(&s) * BYTES_PER_ELEMENT;
  printf("AdamW over GPT-2 small: %d tensors, %.0f elements, %.2f GB moved per step (28 bytes per element)\n",
         count, total_elements(&s), bytes / 1e9);
  uj_ctx_t* ctx = uj_ctx_new();
  double err = ctx ? check_step(ctx, prog, &s) : -1;
  uj_ctx_free(ctx);
  printf("  checked one step against AdamW in double: max rel error %.2g (%s)\n", err,
         err >= 0 && err <= 1e-5 ? "ok" : "MISMATCH");
  printf("  %-22s %7s %10s %8s %11s %14s\n", "", "threads", "ms/step", "GB/s", "% of limit", "torch foreach/");
  for (int threads = 1; threads <= 2; threads++) {
    enum { NE = sizeof engines / sizeof *engines };
    copy_arg_t copy = {&s, threads};
    step_arg_t steps[NE];
    uj_ctx_t* ctxs[NE];
    timed_t items[NE + 1] = {{copy_call, &copy, {0}, 0}};
    for (int e = 0; e < NE; e++) {
      steps[e] = (step_arg_t){NULL, prog, &s, 1};
      ctxs[e] = warm_context(engines[e], threads, &steps[e]);
      items[e + 1] = (timed_t){step_call, &steps[e], {0}, ctxs[e] == NULL};
    }
    double ns[NE + 1];
    time_rounds(items, NE + 1, samples, ns);
    for (int e = 0; e < NE; e++) uj_ctx_free(ctxs[e]);
    double foreach = -1;
    for (int k = 0; k < ntorch; k++)
      if (!strcmp(trows[k].peer, "foreach") && trows[k].threads == threads && trows[k].ok) foreach = trows[k].ns;
    print_row("traffic limit (copy)", threads, ns[0], bytes, ns[0], -1);
    for (int e = 0; e < NE; e++) {
      char who[32];
      snprintf(who, sizeof who, "uopjit %s", uj_engine_name(engines[e]));
      print_row(who, threads, ns[e + 1], bytes, ns[0], foreach);
    }
    for (int k = 0; k < ntorch; k++)
      if (trows[k].threads == threads) {
        char who[64];
        snprintf(who, sizeof who, "torch AdamW %.15s%s", trows[k].peer, trows[k].ok ? "" : " (MISMATCH)");
        print_row(who, threads, trows[k].ns, bytes, ns[0], -1);
      }
  }
  set_free(&s);
  uj_program_free(prog);
}

static void many_small_section(int samples) {
  enum { MANY = 10000, NE = sizeof engines / sizeof *engines };
  static shape_t many[MANY];
  uint64_t state = 12345;
  int64_t total = 0;
  for (int i = 0; i < MANY; i++) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    many[i] = (shape_t){1, {1 + (int64_t)(state % 1000), 0}};
    total += many[i].dims[0];
  }
  shape_t one = {1, {total, 0}};
  uj_program_t* prog = NULL;
  param_set_t sets[2];
  if (uj_program_parse(ADAMW_SOURCE, &prog) != UJ_OK || set_new(&sets[0], many, MANY, prog, 8) != 0 ||
      set_new(&sets[1], &one, 1, prog, 9) != 0) {
    fprintf(stderr, "bench --groups: cannot set up the small tensors: %s\n", uj_last_error());
    uj_program_free(prog);
    return;
  }
  printf("\nMany small tensors: %d tensors of 1..1000 elements (%lld in all) against one tensor of %lld\n", MANY,
         (long long)total, (long long)total);
  printf("  %-22s %7s %12s %12s %10s\n", "", "threads", "many ms", "one ms", "many/one");
  for (int threads = 1; threads <= 2; threads++) {
    /* items: per set, the copy then each engine */
    copy_arg_t copies[2] = {{&sets[0], threads}, {&sets[1], threads}};
    step_arg_t steps[2][NE];
    uj_ctx_t* ctxs[2][NE];
    timed_t items[2 * (NE + 1)];
    for (int k = 0; k < 2; k++) {
      items[k * (NE + 1)] = (timed_t){copy_call, &copies[k], {0}, 0};
      for (int e = 0; e < NE; e++) {
        steps[k][e] = (step_arg_t){NULL, prog, &sets[k], 1};
        ctxs[k][e] = warm_context(engines[e], threads, &steps[k][e]);
        items[k * (NE + 1) + e + 1] = (timed_t){step_call, &steps[k][e], {0}, ctxs[k][e] == NULL};
      }
    }
    double ns[2 * (NE + 1)];
    time_rounds(items, 2 * (NE + 1), 3 * samples, ns);
    for (int k = 0; k < 2; k++)
      for (int e = 0; e < NE; e++) uj_ctx_free(ctxs[k][e]);
    for (int e = 0; e <= NE; e++) {
      char who[32];
      snprintf(who, sizeof who, e ? "uopjit %s" : "traffic limit (copy)", e ? uj_engine_name(engines[e - 1]) : "");
      double a = ns[e], b = ns[NE + 1 + e];
      if (a < 0 || b < 0) printf("  %-22s %7d %12s\n", who, threads, "failed");
      else printf("  %-22s %7d %12.3f %12.3f %9.2fx\n", who, threads, a / 1e6, b / 1e6, a / b);
    }
  }
  set_free(&sets[0]);
  set_free(&sets[1]);
  uj_program_free(prog);
}

int bench_groups(int short_run) {
  char load[64];
  bench_load_average(load, sizeof load);
  int samples = short_run ? 3 : 7;
  printf("== multi-tensor execution: an AdamW step over many tensors (uj_program_run_groups), f32 ==\n");
  printf("load average at the start: %s; medians of %d steps\n\n", load, samples);
  gpt2_section(samples);
  many_small_section(samples);
  return 0;
}
