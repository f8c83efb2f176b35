/* tools/cli_optim.c: `uopjit optim`, an optimizer step over many parameter
 * tensors (uj_optim_step) on seeded random values: the median step time, or
 * (--check) every step compared with the same updater run on the
 * interpreter in f64 (or, for many elements, --reference c: the C engine in
 * f64, which is no part of the f32 kernels it checks either).
 *
 * Parameters start uniform in [-1, 1), state at zero, and every step draws
 * new gradients in [-1, 1) (times --grad-scale). The check is per step: the
 * reference starts from the values the engine started that step from, one
 * group at a time (check_group: memory for one group in f64, plus a copy of
 * the f32 values the step overwrites), with the gradient multiplied by the
 * factor the engine's step reported (unscaling and global-norm clipping
 * included); an element agrees within `tolerance`. --dtype bf16|f16: half
 * parameters with f32 master weights and half gradients; the step also
 * writes each group's half copy, checked too (half_copy_agrees). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define CMD "optim"
#define MAX_SCALARS 32
#define MAX_STATE 8

typedef struct {
  int ndim;
  int64_t dims[2];
  int64_t n;
} shape_t;

typedef struct {
  const char* updater; /* a built-in's name or an updater text */
  const char* groups;  /* "37", "gpt2" or a count */
  const char* shapes_file;
  int64_t size_min, size_max;
  int steps;
  int check;
  uj_engine_t engine;
  int engine_given;
  uj_engine_t reference; /* the f64 reference's engine: interp unless --reference */
  uint64_t seed;
  double grad_scale, max_norm;
  const char* scalar_names[MAX_SCALARS];
  double scalar_values[MAX_SCALARS];
  int scalar_count;
  uj_dtype_t half; /* --dtype bf16|f16; UJ_F32 for none */
} optim_options_t;

/* ---- shapes -------------------------------------------------------------------------------- */

static int add_shape(shape_t** shapes, int* count, int ndim, int64_t d0, int64_t d1) {
  shape_t* grown = realloc(*shapes, sizeof(shape_t) * (size_t)(*count + 1));
  if (!grown) return 0;
  *shapes = grown;
  grown[*count] = (shape_t){ndim, {d0, d1}, ndim == 1 ? d0 : d0 * d1};
  (*count)++;
  return 1;
}

/* GPT-2 small (124M): 148 tensors, in the order of its state dict. */
static int gpt2_shapes(shape_t** s, int* n) {
  int ok = add_shape(s, n, 2, 50257, 768) && add_shape(s, n, 2, 1024, 768);
  for (int layer = 0; layer < 12 && ok; layer++)
    ok = add_shape(s, n, 1, 768, 0) && add_shape(s, n, 1, 768, 0) &&       /* ln_1 w, b */
         add_shape(s, n, 2, 768, 2304) && add_shape(s, n, 1, 2304, 0) &&   /* attn.c_attn */
         add_shape(s, n, 2, 768, 768) && add_shape(s, n, 1, 768, 0) &&     /* attn.c_proj */
         add_shape(s, n, 1, 768, 0) && add_shape(s, n, 1, 768, 0) &&       /* ln_2 w, b */
         add_shape(s, n, 2, 768, 3072) && add_shape(s, n, 1, 3072, 0) &&   /* mlp.c_fc */
         add_shape(s, n, 2, 3072, 768) && add_shape(s, n, 1, 768, 0);      /* mlp.c_proj */
  return ok && add_shape(s, n, 1, 768, 0) && add_shape(s, n, 1, 768, 0); /* ln_f */
}

static int parse_dims(const char* text, int* ndim, int64_t dims[2]) {
  char* end;
  errno = 0;
  long long a = strtoll(text, &end, 10), b = 0;
  if (errno || end == text || a < 1) return 0;
  *ndim = 1;
  if (*end == ',') {
    const char* second = end + 1;
    b = strtoll(second, &end, 10);
    if (errno || end == second || b < 1) return 0;
    *ndim = 2;
  }
  while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') end++;
  if (*end || a > (1ll << 34) || b > (1ll << 34) || (b && a * b > (1ll << 34))) return 0;
  dims[0] = a, dims[1] = b;
  return 1;
}

static int read_shapes_file(const char* path, shape_t** shapes, int* count) {
  FILE* f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "uopjit %s: cannot open --shapes-file \"%s\": %s\n", CMD, path, strerror(errno));
    return 2;
  }
  char line[256];
  int number = 0;
  while (fgets(line, sizeof line, f)) {
    number++;
    const char* s = line;
    while (*s == ' ' || *s == '\t') s++;
    if (*s == '\n' || *s == '#' || !*s) continue;
    int ndim;
    int64_t dims[2];
    if (!parse_dims(s, &ndim, dims) || !add_shape(shapes, count, ndim, dims[0], dims[1])) {
      fprintf(stderr, "uopjit %s: %s line %d: expected a shape such as 768 or 768,2304, got \"%.*s\"\n", CMD, path,
              number, (int)strcspn(s, "\n"), s);
      fclose(f);
      return 2;
    }
  }
  fclose(f);
  if (!*count) {
    fprintf(stderr, "uopjit %s: --shapes-file \"%s\" has no shapes\n", CMD, path);
    return 2;
  }
  return 0;
}

/* Random ranks and sizes: rank 1 of [min, max] elements, or rank 2 with
 * about as many. */
static int random_shapes(int count, int64_t lo, int64_t hi, uint64_t seed, shape_t** shapes, int* n) {
  uint64_t st = seed ^ 0x5eedull;
  for (int i = 0; i < count; i++) {
    int64_t total = lo + (int64_t)(cli_rng_next(&st) % (uint64_t)(hi - lo + 1));
    int64_t rows = 1 + (int64_t)(cli_rng_next(&st) % 64);
    int ok = cli_rng_next(&st) % 2 && total % rows == 0 && rows > 1 ? add_shape(shapes, n, 2, rows, total / rows)
                                                                     : add_shape(shapes, n, 1, total, 0);
    if (!ok) return 0;
  }
  return 1;
}

/* ---- options ---------------------------------------------------------------------------------- */

static int parse_range(const char* text, int64_t* lo, int64_t* hi) {
  char* end;
  long long a = strtoll(text, &end, 10);
  if (end == text || strncmp(end, "..", 2) != 0) return 0;
  const char* second = end + 2;
  long long b = strtoll(second, &end, 10);
  if (end == second || *end || a < 1 || b < a || b > (1ll << 30)) return 0;
  *lo = a, *hi = b;
  return 1;
}

static int parse_double(const char* text, double* out) {
  char* end;
  errno = 0;
  *out = strtod(text, &end);
  return !errno && end != text && !*end && isfinite(*out);
}

static int parse_options(int argc, char** argv, optim_options_t* o) {
  memset(o, 0, sizeof *o);
  o->size_min = 1, o->size_max = 65536, o->seed = 1, o->reference = UJ_ENGINE_INTERP, o->half = UJ_F32;
  int steps_given = 0;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    if (strcmp(a, "--check") == 0) {
      o->check = 1;
      takes = v && strncmp(v, "--", 2) != 0; /* --check NAME names the updater */
      if (takes) o->updater = v;
    } else if (!v && strcmp(a, "--check") != 0) {
      return cli_usage_error(CMD, strncmp(a, "--", 2) == 0 ? "option needs a value:" : "unexpected argument", a);
    } else if (strcmp(a, "--updater") == 0 || strcmp(a, "--source") == 0) {
      o->updater = v;
    } else if (strcmp(a, "--groups") == 0 || strcmp(a, "--tensors") == 0) {
      o->groups = v;
    } else if (strcmp(a, "--sizes") == 0) {
      if (!parse_range(v, &o->size_min, &o->size_max))
        return cli_usage_error(CMD, "--sizes wants MIN..MAX, 1 <= MIN <= MAX <= 2^30, got", v);
    } else if (strcmp(a, "--shapes-file") == 0) {
      o->shapes_file = v;
    } else if (strcmp(a, "--steps") == 0) {
      char* end;
      long k = strtol(v, &end, 10);
      if (*end || end == v || k < 1 || k > 100000) return cli_usage_error(CMD, "--steps wants 1 to 100000, got", v);
      o->steps = (int)k, steps_given = 1;
    } else if (strcmp(a, "--engine") == 0) {
      if (!cli_parse_engine(v, &o->engine)) return cli_usage_error(CMD, cli_engine_usage(), v);
      o->engine_given = 1;
    } else if (strcmp(a, "--reference") == 0) {
      if (!cli_parse_engine(v, &o->reference) || o->reference == UJ_ENGINE_CUDA || o->reference == UJ_ENGINE_AUTO)
        return cli_usage_error(CMD, "--reference wants interp, mir or c, got", v);
    } else if (strcmp(a, "--seed") == 0) {
      char* end;
      o->seed = strtoull(v, &end, 10);
      if (*end || end == v) return cli_usage_error(CMD, "--seed wants a whole number, got", v);
    } else if (strcmp(a, "--grad-scale") == 0 || strcmp(a, "--max-grad-norm") == 0) {
      double* to = a[2] == 'g' ? &o->grad_scale : &o->max_norm;
      if (!parse_double(v, to) || *to < 0) return cli_usage_error(CMD, "wants a number >= 0:", a);
    } else if (strcmp(a, "--scalar") == 0) {
      const char* eq = strchr(v, '=');
      double value;
      if (!eq || eq == v || !parse_double(eq + 1, &value) || o->scalar_count == MAX_SCALARS)
        return cli_usage_error(CMD, "--scalar wants NAME=VALUE (at most 32), got", v);
      o->scalar_names[o->scalar_count] = v, o->scalar_values[o->scalar_count++] = value;
    } else if (strcmp(a, "--dtype") == 0) {
      if (strcmp(v, "f32") == 0) o->half = UJ_F32;
      else if (strcmp(v, "bf16") == 0) o->half = UJ_BF16;
      else if (strcmp(v, "f16") == 0) o->half = UJ_F16;
      else return cli_usage_error(CMD, "--dtype wants f32, bf16 or f16 (half parameters with f32 master weights), got", v);
    } else if (strcmp(a, "--master") == 0) {
      if (strcmp(v, "f32") != 0) return cli_usage_error(CMD, "--master wants f32 (the master weights' dtype), got", v);
    } else {
      return cli_usage_error(CMD, "unknown option", a);
    }
    i += takes;
  }
  if (!o->updater) return cli_usage_error(CMD, "needs an updater: --updater NAME|TEXT or --check NAME", NULL);
  if (o->groups && o->shapes_file) return cli_usage_error(CMD, "--groups and --shapes-file exclude each other", NULL);
  if (!steps_given) o->steps = o->check ? 3 : 10;
  return 0;
}

/* ---- the model -------------------------------------------------------------------------------- */

typedef struct {
  int count, nstate;
  shape_t* shapes;
  uj_dtype_t half;              /* the gradients' and half copies' dtype, or UJ_F32 */
  uj_tensor_t *p, *g, *p_half, *state; /* state[i * nstate + k]; p_half with --dtype bf16|f16 */
  uj_tensor_t** state_ptr;
  uj_optim_group_t* groups;
} model_t;

/* Also what a model_make that failed part way made: arrays it did not get
 * are NULL, tensors it did not reach have NULL data. */
static void model_free(model_t* m) {
  for (int i = 0; i < m->count; i++) {
    if (m->p) free(m->p[i].data);
    if (m->g) free(m->g[i].data);
    if (m->p_half) free(m->p_half[i].data);
    for (int k = 0; m->state && k < m->nstate; k++) free(m->state[i * m->nstate + k].data);
  }
  free(m->p), free(m->g), free(m->p_half), free(m->state), free(m->state_ptr), free(m->groups);
}

static uj_tensor_t host_tensor(const shape_t* s, uj_dtype_t dtype) {
  uj_tensor_t t = {calloc((size_t)s->n, (size_t)uj_dtype_size(dtype)), dtype, UJ_CPU, s->ndim, {s->dims[0], s->dims[1]}};
  return t;
}

/* Gradient element e of group i, widened. */
static double grad_at(const model_t* m, int i, int64_t e) {
  if (m->half == UJ_F32) return ((const float*)m->g[i].data)[e];
  return uj_half_to_f64(m->half, ((const uint16_t*)m->g[i].data)[e]);
}

static int model_make(model_t* m, const shape_t* shapes, int count, int nstate, uj_dtype_t half, uint64_t seed) {
  memset(m, 0, sizeof *m);
  m->count = count, m->nstate = nstate, m->shapes = (shape_t*)shapes, m->half = half;
  m->p = calloc((size_t)count, sizeof(uj_tensor_t)), m->g = calloc((size_t)count, sizeof(uj_tensor_t));
  if (half != UJ_F32 && !(m->p_half = calloc((size_t)count, sizeof(uj_tensor_t)))) return 0;
  m->state = calloc((size_t)count * nstate + 1, sizeof(uj_tensor_t));
  m->state_ptr = calloc((size_t)count * nstate + 1, sizeof(uj_tensor_t*));
  m->groups = calloc((size_t)count, sizeof(uj_optim_group_t));
  if (!m->p || !m->g || !m->state || !m->state_ptr || !m->groups) return 0;
  uint64_t st = seed;
  for (int i = 0; i < count; i++) {
    m->p[i] = host_tensor(&shapes[i], UJ_F32), m->g[i] = host_tensor(&shapes[i], half);
    if (!m->p[i].data || !m->g[i].data) return 0;
    if (m->p_half && !(m->p_half[i] = host_tensor(&shapes[i], half)).data) return 0;
    for (int64_t e = 0; e < shapes[i].n; e++) ((float*)m->p[i].data)[e] = cli_rng_float(&st);
    for (int k = 0; k < nstate; k++) {
      uj_tensor_t* t = &m->state[i * nstate + k];
      *t = host_tensor(&shapes[i], UJ_F32);
      if (!t->data) return 0;
      m->state_ptr[i * nstate + k] = t;
    }
    m->groups[i] = (uj_optim_group_t){&m->p[i], &m->g[i], &m->state_ptr[i * nstate], m->p_half ? &m->p_half[i] : NULL};
  }
  return 1;
}

static void draw_grads(model_t* m, uint64_t* st, double scale) {
  for (int i = 0; i < m->count; i++)
    for (int64_t e = 0; e < m->shapes[i].n; e++) {
      double v = scale * cli_rng_float(st);
      if (m->half == UJ_F32) ((float*)m->g[i].data)[e] = (float)v;
      else ((uint16_t*)m->g[i].data)[e] = uj_half_from_f64(m->half, v);
    }
}

/* ---- one engine ------------------------------------------------------------------------------- */

static int make_optimizer(const optim_options_t* o, int with_amp, uj_optim_t** out) {
  const char* text = uj_optim_builtin_text(o->updater);
  uj_status_t s = text ? uj_optim_new(o->updater, out) : uj_optim_new_source("custom", o->updater, out);
  if (s != UJ_OK) {
    if (!text && !strchr(o->updater, '='))
      return cli_usage_error(CMD, "no such updater (`uopjit help optim` lists them):", o->updater);
    fprintf(stderr, "uopjit %s: %s: %s\n", CMD, uj_status_str(s), uj_last_error());
    return 2;
  }
  for (int k = 0; k < o->scalar_count; k++) {
    const char* eq = strchr(o->scalar_names[k], '=');
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(eq - o->scalar_names[k]), o->scalar_names[k]);
    if ((s = uj_optim_set(*out, name, o->scalar_values[k])) != UJ_OK) {
      fprintf(stderr, "uopjit %s: --scalar %s: %s\n", CMD, o->scalar_names[k], uj_last_error());
      uj_optim_free(*out), *out = NULL;
      return 2;
    }
  }
  if (with_amp && (uj_optim_set_grad_scale(*out, o->grad_scale) != UJ_OK ||
                   uj_optim_set_max_grad_norm(*out, o->max_norm) != UJ_OK))
    return cli_report(UJ_ERR_INVALID);
  return 0;
}

typedef struct {
  uj_optim_t* ref;
  uj_ctx_t* ctx;
  float** before; /* [group][1 + nstate]: p and the state as the step found them */
  double max_rel_err;
  int64_t ill_conditioned; /* disagreeing elements a perturbation of the inputs explains */
} checker_t;

/* How far an f32 result may be from the f64 reference ref:
 *   |got - ref| <= 8u|ref| + 1e-4 (|ref - before| + mean change)   (u = 2^-24)
 * a few roundings of the new value plus a relative error of the change the
 * step made, or of the mean change of that tensor in that group: an
 * element whose change is small because its terms cancel (a momentum
 * buffer that changes sign) is rounded relative to its terms, which are of
 * the size of the typical change, not of its own. An element that still
 * disagrees may be explained_by_perturbation; the line counts those.
 * max_rel_err is the largest |got - ref| / max(1, |ref|), as in `uopjit
 * run --check`. */
static double tolerance(double ref, double before, double typical) {
  return 8 * 0x1p-24 * fabs(ref) + 1e-4 * (fabs(ref - before) + typical);
}

static int agrees(double got, double ref, double before, double typical) {
  if (isnan(ref) || isnan(got)) return isnan(ref) && isnan(got);
  if (isinf(ref) || isinf(got)) return got == ref;
  return fabs(got - ref) <= tolerance(ref, before, typical);
}

/* An element the reference disagrees with may sit where the rule is
 * discontinuous (Lion's sign(c) with c within rounding of 0): the f32 step
 * is then right if it is the rule's result for inputs within 4 ulps of its
 * own. Each of the element's inputs (p, g, state) is moved by +-4 ulps, in
 * every combination of signs, and the step run in f64 on that one element;
 * 1 when one combination gives every output the engine gave. Only for
 * updaters without per-group sums, whose elements are independent. */
static int explained_by_perturbation(checker_t* c, const model_t* m, int i, int64_t e, const uj_optim_report_t* r,
                                     const double* typical) {
  int ns = m->nstate, nin = 2 + ns;
  if (strstr(uj_optim_text(c->ref), "[apply]") || nin > 10) return 0;
  double in[2 + MAX_STATE], cell[2 + MAX_STATE];
  uj_tensor_t t[2 + MAX_STATE];
  uj_tensor_t* state[MAX_STATE];
  for (int k = 0; k < nin; k++) {
    in[k] = k == 1 ? grad_at(m, i, e) * r->gscale : c->before[i * (ns + 1) + (k ? k - 1 : 0)][e];
    t[k] = (uj_tensor_t){&cell[k], UJ_F64, UJ_CPU, 1, {1}};
    if (k >= 2) state[k - 2] = &t[k];
  }
  uj_optim_group_t group = {&t[0], &t[1], state, NULL};
  for (int mask = 0; mask < 1 << nin; mask++) {
    for (int k = 0; k < nin; k++) cell[k] = in[k] * (1 + (mask >> k & 1 ? 4 : -4) * 0x1p-24);
    if (uj_optim_set_step_count(c->ref, r->t - 1) != UJ_OK || uj_optim_step(c->ctx, c->ref, &group, 1, NULL) != UJ_OK)
      return 0;
    int all = 1;
    for (int k = 0; k <= ns && all; k++) {
      double got = k ? ((float*)m->state[i * ns + k - 1].data)[e] : ((float*)m->p[i].data)[e];
      all = agrees(got, cell[k ? k + 1 : 0], c->before[i * (ns + 1) + k][e], typical[k]);
    }
    if (all) return 1;
  }
  return 0;
}

/* Copies what the step is about to overwrite. */
static void keep_before(checker_t* c, const model_t* m) {
  for (int i = 0; i < m->count; i++)
    for (int k = 0; k <= m->nstate; k++) {
      const uj_tensor_t* t = k ? &m->state[i * m->nstate + k - 1] : &m->p[i];
      memcpy(c->before[i * (m->nstate + 1) + k], t->data, (size_t)m->shapes[i].n * sizeof(float));
    }
}

/* A half value's place on a line where neighbours differ by 1 (+0 and -0
 * both 0), so that two values' distance in units is a difference. */
static int32_t half_rank(uint16_t bits) { return bits & 0x8000u ? -(int32_t)(bits & 0x7fffu) : (int32_t)bits; }

/* The half copy of element e of group i: the engine's master rounded, bit
 * for bit, and within one unit of the f64 reference `ref` rounded (the
 * reference reads the half gradients widened, exactly). Where the master may
 * be further from ref than half a unit of the half dtype (a result that
 * cancels to near 0: tol, the master's own tolerance, is then relative to
 * the change, not to the result), within one unit of the rounding of some
 * value within tol of ref. */
static int half_copy_agrees(const model_t* m, int i, int64_t e, double ref, double tol, int step) {
  uint16_t got = ((const uint16_t*)m->p_half[i].data)[e];
  double master = ((const float*)m->p[i].data)[e], value = uj_half_to_f64(m->half, got);
  int ok = isnan(master) ? isnan(value) : got == uj_half_from_f64(m->half, master);
  int32_t rank = half_rank(got), lo = half_rank(uj_half_from_f64(m->half, ref - tol)) - 1,
          hi = half_rank(uj_half_from_f64(m->half, ref + tol)) + 1;
  if (ok && (isnan(ref) || isinf(ref) ? (isnan(ref) ? isnan(value) : value == ref) : rank >= lo && rank <= hi)) return 1;
  printf("check: FAILED step %d, group %d, the %s copy of p, element %lld: got %.9g, master %.9g, f64 %.17g\n", step, i,
         uj_dtype_name(m->half), (long long)e, value, master, ref);
  return 0;
}

/* The reference step of group i in f64, compared element by element. */
static int check_group(checker_t* c, const model_t* m, int i, const uj_optim_report_t* r, int step) {
  const shape_t* sh = &m->shapes[i];
  int ns = m->nstate;
  double* cells = malloc(sizeof(double) * (size_t)sh->n * (size_t)(2 + ns));
  if (!cells) return cli_out_of_memory("the f64 reference", sizeof(double) * (uint64_t)sh->n * (uint64_t)(2 + ns));
  uj_tensor_t t[2 + MAX_STATE];
  uj_tensor_t* state[MAX_STATE];
  for (int k = 0; k < 2 + ns; k++) {
    t[k] = (uj_tensor_t){cells + (size_t)k * sh->n, UJ_F64, UJ_CPU, sh->ndim, {sh->dims[0], sh->dims[1]}};
    double* d = t[k].data;
    const float* from = c->before[i * (ns + 1) + (k ? k - 1 : 0)];
    for (int64_t e = 0; e < sh->n; e++) d[e] = k == 1 ? grad_at(m, i, e) * r->gscale : (double)from[e];
    if (k >= 2) state[k - 2] = &t[k];
  }
  uj_optim_group_t group = {&t[0], &t[1], state, NULL};
  uj_status_t s = uj_optim_set_step_count(c->ref, r->t - 1);
  if (s == UJ_OK) s = uj_optim_step(c->ctx, c->ref, &group, 1, NULL);
  if (s != UJ_OK) {
    free(cells);
    return cli_report(s);
  }
  double typical[1 + MAX_STATE] = {0}; /* the mean change of each tensor in this group */
  for (int k = 0; k <= ns; k++) {
    const float* before = c->before[i * (ns + 1) + k];
    const double* ref = t[k ? k + 1 : 0].data;
    for (int64_t e = 0; e < sh->n; e++)
      if (isfinite(ref[e])) typical[k] += fabs(ref[e] - before[e]) / (double)sh->n;
  }
  /* the element loop outermost: an element is explained as a whole */
  for (int64_t e = 0; e < sh->n; e++) {
    int all = 1, bad = 0;
    for (int k = 0; k <= ns; k++) {
      const float* got = k ? m->state[i * ns + k - 1].data : m->p[i].data;
      int ok = agrees(got[e], ((double*)t[k ? k + 1 : 0].data)[e], c->before[i * (ns + 1) + k][e], typical[k]);
      if (!ok && all) bad = k;
      all &= ok;
    }
    if (!all && explained_by_perturbation(c, m, i, e, r, typical)) {
      c->ill_conditioned++;
      continue;
    }
    double ref_p = ((double*)t[0].data)[e];
    if (all && m->p_half &&
        !half_copy_agrees(m, i, e, ref_p, tolerance(ref_p, c->before[i * (ns + 1)][e], typical[0]), step)) {
      free(cells);
      return 1;
    }
    for (int k = 0; k <= ns; k++) {
      double g = k ? ((float*)m->state[i * ns + k - 1].data)[e] : ((float*)m->p[i].data)[e];
      double f = ((double*)t[k ? k + 1 : 0].data)[e];
      if (!all && k == bad) {
        printf("check: FAILED step %d, group %d, %s element %lld: got %.9g, f64 %.17g, before %.9g\n", step, i,
               k ? uj_optim_state_name(c->ref, k - 1) : "p", (long long)e, g, f, (double)c->before[i * (ns + 1) + k][e]);
        free(cells);
        return 1;
      }
      double rel = isfinite(f) && isfinite(g) ? fabs(g - f) / fmax(1, fabs(f)) : 0;
      if (rel > c->max_rel_err) c->max_rel_err = rel;
    }
  }
  free(cells);
  return 0;
}

/* With --grad-scale or --max-grad-norm, the reported global norm against
 * the f64 norm. */
static int check_norm(const optim_options_t* o, const model_t* m, const uj_optim_report_t* r, int step) {
  double sum = 0, inv = o->grad_scale > 0 ? 1 / o->grad_scale : 1;
  int64_t most = 1;
  for (int i = 0; i < m->count; i++) {
    for (int64_t e = 0; e < m->shapes[i].n; e++) sum += pow(grad_at(m, i, e) * inv, 2);
    if (m->shapes[i].n > most) most = m->shapes[i].n;
  }
  double norm = sqrt(sum), gamma = most * 0x1p-24 / (1 - most * 0x1p-24);
  if (fabs(r->grad_norm - norm) <= (gamma / 2 + 1e-7) * norm) return 0;
  printf("check: FAILED step %d: global gradient norm %.9g, f64 %.17g\n", step, r->grad_norm, norm);
  return 1;
}

static int run_engine(const optim_options_t* o, uj_engine_t engine, int engine_given, const shape_t* shapes,
                      int count) {
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return cli_out_of_memory("a context", 0);
  if (engine_given && uj_ctx_set_engine(ctx, engine) != UJ_OK) {
    uj_ctx_free(ctx);
    return cli_engine_unavailable(engine);
  }
  uj_optim_t* opt = NULL;
  int rc = make_optimizer(o, 1, &opt);
  int ns = opt ? uj_optim_state_count(opt) : 0;
  if (!rc && ns > MAX_STATE) rc = cli_usage_error(CMD, "the updater has more than 8 state tensors", NULL);
  model_t m = {0};
  int made = !rc && model_make(&m, shapes, count, ns, o->half, o->seed);
  if (!rc && !made) rc = cli_out_of_memory("the parameters, gradients and state", 0);
  checker_t c = {0};
  if (!rc && o->check) {
    rc = make_optimizer(o, 0, &c.ref);
    c.ctx = uj_ctx_new();
    c.before = calloc((size_t)count * (ns + 1), sizeof(float*));
    if (!rc && (!c.ctx || !c.before)) rc = cli_out_of_memory("the reference", 0);
    if (!rc && uj_ctx_set_engine(c.ctx, o->reference) != UJ_OK) rc = cli_engine_unavailable(o->reference);
    for (int i = 0; !rc && i < count; i++)
      for (int k = 0; k <= ns && !rc; k++)
        if (!(c.before[i * (ns + 1) + k] = malloc(sizeof(float) * (size_t)shapes[i].n)))
          rc = cli_out_of_memory("a copy of the parameters", sizeof(float) * (uint64_t)shapes[i].n);
  }
  double* times = calloc((size_t)o->steps, sizeof(double));
  /* which engine served each step: under auto, MIR until a kernel's C
   * compile is ready, then C (cli_served_since) */
  uj_engine_t* served = calloc((size_t)o->steps, sizeof *served);
  uj_engine_t asked = cli_engine_asked(engine_given, engine);
  uint64_t st = o->seed * 7919 + 17;
  double scale = o->grad_scale > 0 ? o->grad_scale : 1;
  for (int step = 1; !rc && step <= o->steps; step++) {
    draw_grads(&m, &st, scale);
    if (o->check) keep_before(&c, &m);
    uj_optim_report_t r;
    cli_served_mark_t mark;
    cli_served_mark(ctx, &mark);
    double t0 = 1e3 * cli_now_seconds();
    uj_status_t s = uj_optim_step(ctx, opt, m.groups, count, &r);
    if (times) times[step - 1] = 1e3 * cli_now_seconds() - t0;
    if (served) served[step - 1] = cli_served_since(ctx, asked, &mark);
    if (s != UJ_OK) rc = cli_report(s);
    if (!rc && o->check && (o->grad_scale > 0 || o->max_norm > 0)) rc = check_norm(o, &m, &r, step);
    for (int i = 0; !rc && o->check && i < count; i++) rc = check_group(&c, &m, i, &r, step);
  }
  int64_t elements = 0;
  for (int i = 0; i < count; i++) elements += shapes[i].n;
  /* the engine that served the steps, not the one auto starts on: "c",
   * or "c (steps 1-3 on mir)" when the tiers changed during the run */
  char engine_name[160];
  if (served) cli_served_summary(served, o->steps, "step", engine_name, sizeof engine_name);
  else snprintf(engine_name, sizeof engine_name, "%s", uj_engine_name(asked));
  if (!rc && o->check) {
    printf("%s: check: ok max_rel_err=%.3g (%s, %s, %d groups, %lld elements, %d steps; f64 reference on %s",
           engine_name, c.max_rel_err, uj_optim_name(opt), o->half == UJ_F32 ? "f32" : o->half == UJ_BF16 ? "bf16 with f32 master" : "f16 with f32 master",
           count, (long long)elements, o->steps, uj_engine_name(o->reference));
    if (c.ill_conditioned)
      printf("; %lld elements where the rule jumps, each the f64 result of inputs within 4 ulps",
             (long long)c.ill_conditioned);
    printf(")\n");
  } else if (!rc && times) {
    /* the first step compiles: the median of the others */
    int n = o->steps > 1 ? o->steps - 1 : 1;
    double median = cli_median(times + (o->steps > 1), n);
    /* read p, g, state; write p, state and the half copy */
    double half_bytes = o->half == UJ_F32 ? 0 : 2, grad_bytes = o->half == UJ_F32 ? 4 : 2;
    double bytes = (double)elements * (sizeof(float) * (2 + 2 * ns) + grad_bytes + half_bytes);
    printf("%s: %s, %s, %d groups, %lld elements: median step %.3f ms, %.2f GB/s of the %.0f MB a step must move "
           "(first step, compiling: %.1f ms)\n",
           engine_name, uj_optim_name(opt), uj_dtype_name(o->half), count, (long long)elements, median, bytes / (median * 1e6), bytes / 1e6,
           times[0]);
  }
  free(times);
  free(served);
  for (int i = 0; c.before && i < count * (ns + 1); i++) free(c.before[i]);
  free(c.before);
  uj_optim_free(c.ref), uj_ctx_free(c.ctx);
  model_free(&m); /* also what a failed model_make made */
  uj_optim_free(opt);
  uj_ctx_free(ctx);
  return rc;
}

int cli_cmd_optim(int argc, char** argv) {
  optim_options_t o;
  int rc = parse_options(argc, argv, &o);
  if (rc) return rc;
  shape_t* shapes = NULL;
  int count = 0, ok = 1;
  if (o.shapes_file) {
    if ((rc = read_shapes_file(o.shapes_file, &shapes, &count))) return free(shapes), rc;
  } else if (o.groups && strcmp(o.groups, "gpt2") == 0) {
    ok = gpt2_shapes(&shapes, &count);
  } else {
    char* end = NULL;
    long n = o.groups ? strtol(o.groups, &end, 10) : 37;
    if (o.groups && (*end || end == o.groups || n < 1 || n > 1000000))
      return cli_usage_error(CMD, "--groups wants gpt2 or a count from 1 to 1000000, got", o.groups);
    ok = random_shapes((int)n, o.size_min, o.size_max, o.seed, &shapes, &count);
  }
  if (!ok) return free(shapes), cli_out_of_memory("the list of shapes", 0);
  /* --check without --engine: every CPU engine there is */
  static const uj_engine_t cpu[] = {UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_C};
  uj_ctx_t* probe = uj_ctx_new();
  for (int k = 0; k < 3 && !rc; k++) {
    if (o.engine_given || !o.check) {
      rc = run_engine(&o, o.engine, o.engine_given, shapes, count);
      break;
    }
    if (probe && uj_engine_available(probe, cpu[k])) rc = run_engine(&o, cpu[k], 1, shapes, count);
  }
  uj_ctx_free(probe);
  free(shapes);
  return rc;
}
