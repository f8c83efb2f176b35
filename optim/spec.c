/* optim/spec.c: reads an updater text (format in optim/updaters.c) into a
 * spec. The text is cut at its section lines ([defaults], [scalars],
 * [update], [apply]; a text without any is all [update]); [defaults] is read
 * here (name = number statements), the others are expression-language
 * programs (uj_program_parse). Every name then gets a role, from where it
 * is read and written:
 *   p, g                      the parameter and its gradient (g read only)
 *   written by a pass         a state tensor of p's shape, or, when its value
 *                             reduces every axis (sum(p*p)), a per-group sum
 *                             that a later pass reads as a scalar (output_is_sum)
 *   t, gscale                 run-time scalars the step provides
 *   written by [scalars]      derived scalars
 *   read only, anything else  a hyperparameter (0-d), with the default
 *                             [defaults] gives, if any */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../rt/rt.h"
#include "../lang/parse.h"
#include "optim.h"

enum { SECTION_DEFAULTS, SECTION_SCALARS, SECTION_UPDATE, SECTION_APPLY, SECTION_COUNT };
static const char* const section_names[SECTION_COUNT] = {"defaults", "scalars", "update", "apply"};

typedef struct {
  char* source; /* malloc'ed, or NULL when the section is absent */
  int first_line;
} section_t;

static int blank_or_comment(const char* s, const char* end) {
  while (s < end && isspace((unsigned char)*s)) s++;
  return s == end || *s == '#';
}

/* The section a line names ("[update]"), or -1. */
static int section_marker(const char* s, const char* end) {
  while (s < end && isspace((unsigned char)*s)) s++;
  while (end > s && isspace((unsigned char)end[-1])) end--;
  if (end - s < 3 || *s != '[' || end[-1] != ']') return -1;
  for (int k = 0; k < SECTION_COUNT; k++)
    if ((size_t)(end - s - 2) == strlen(section_names[k]) && strncmp(s + 1, section_names[k], (size_t)(end - s - 2)) == 0)
      return k;
  return -2; /* bracketed but unknown */
}

static uj_status_t split_sections(const char* text, section_t sections[SECTION_COUNT]) {
  memset(sections, 0, sizeof(section_t) * SECTION_COUNT);
  const char* start[SECTION_COUNT] = {0};
  const char* stop[SECTION_COUNT] = {0};
  int current = -1, line = 1;
  for (const char* s = text; *s; line++) {
    const char* end = s + strcspn(s, "\n");
    int marker = section_marker(s, end);
    if (marker == -2)
      return rt_error(UJ_ERR_PARSE,
                      "updater line %d: unknown section %.*s (expected [defaults], [scalars], [update] or [apply])", line,
                      (int)(end - s), s);
    if (current == -2 && marker >= 0)
      return rt_error(UJ_ERR_PARSE, "updater line %d: [%s] follows statements that are in no section", line,
                      section_names[marker]);
    if (marker >= 0) {
      if (start[marker]) return rt_error(UJ_ERR_PARSE, "updater line %d: a second [%s] section", line, section_names[marker]);
      if (current >= 0) stop[current] = s;
      current = marker;
      start[marker] = *end ? end + 1 : end;
      sections[marker].first_line = line + 1;
    } else if (current < 0 && !blank_or_comment(s, end)) {
      current = -2; /* a statement before any section line */
    }
    s = *end ? end + 1 : end;
  }
  if (current == -2 || current == -1) { /* no section line: the whole text is [update] */
    start[SECTION_UPDATE] = text, current = SECTION_UPDATE;
    sections[SECTION_UPDATE].first_line = 1;
  }
  stop[current] = text + strlen(text);
  for (int k = 0; k < SECTION_COUNT; k++) {
    if (!start[k]) continue;
    size_t n = (size_t)(stop[k] - start[k]);
    sections[k].source = malloc(n + 1);
    if (!sections[k].source) return rt_error(UJ_ERR_OOM, "out of memory copying the updater's [%s]", section_names[k]);
    memcpy(sections[k].source, start[k], n);
    sections[k].source[n] = 0;
  }
  return UJ_OK;
}

/* ---- names ------------------------------------------------------------------------ */

static int find_name(char* const* names, int count, const char* name) {
  for (int i = 0; i < count; i++)
    if (strcmp(names[i], name) == 0) return i;
  return -1;
}

static uj_status_t add_name(char*** names, int* count, const char* name, int* index) {
  int found = find_name(*names, *count, name);
  if (found >= 0) return *index = found, UJ_OK;
  char** grown = realloc(*names, sizeof(char*) * (size_t)(*count + 1));
  if (!grown) return rt_error(UJ_ERR_OOM, "out of memory naming %s", name);
  *names = grown;
  if (!(grown[*count] = strdup(name))) return rt_error(UJ_ERR_OOM, "out of memory naming %s", name);
  *index = (*count)++;
  return UJ_OK;
}

int optim_spec_scalar(const optim_spec_t* spec, const char* name) {
  for (int i = 0; i < spec->scalar_count; i++)
    if (strcmp(spec->scalar_list[i].name, name) == 0) return i;
  return -1;
}

static uj_status_t add_scalar(optim_spec_t* spec, const char* name, optim_scalar_kind_t kind, int* index) {
  int found = optim_spec_scalar(spec, name);
  if (found >= 0) {
    if (kind == OPTIM_DERIVED) spec->scalar_list[found].kind = kind;
    return *index = found, UJ_OK;
  }
  optim_scalar_t* grown = realloc(spec->scalar_list, sizeof(optim_scalar_t) * (size_t)(spec->scalar_count + 1));
  if (!grown) return rt_error(UJ_ERR_OOM, "out of memory naming scalar %s", name);
  spec->scalar_list = grown;
  optim_scalar_t* s = &grown[spec->scalar_count];
  memset(s, 0, sizeof *s);
  if (!(s->name = strdup(name))) return rt_error(UJ_ERR_OOM, "out of memory naming scalar %s", name);
  s->kind = kind;
  *index = spec->scalar_count++;
  return UJ_OK;
}

/* ---- [defaults] ------------------------------------------------------------------- */

/* One "name = number" statement, [a, end) on text line `line` that starts
 * at line_start. Errors name the line and, where the statement is well
 * formed, the column of what is wrong, as the expression language's do. */
static uj_status_t read_default(optim_spec_t* spec, const char* a, const char* end, int line, const char* line_start) {
  const char* name_end = a;
  while (name_end < end && (isalnum((unsigned char)*name_end) || *name_end == '_')) name_end++;
  const char* eq = name_end;
  while (eq < end && isspace((unsigned char)*eq)) eq++;
  const char* num = eq < end ? eq + 1 : end;
  while (num < end && isspace((unsigned char)*num)) num++;
  /* a number as the expression language writes one (pn_number), after an
   * optional sign: strtod alone would also take "inf", "nan" and hex */
  const char* digits = num < end && (*num == '+' || *num == '-') ? num + 1 : num;
  double magnitude;
  const char* problem;
  int len = pn_number(digits, end, &magnitude, &problem);
  const char* num_end = len ? digits + len : num;
  const char* rest = num_end;
  while (rest < end && isspace((unsigned char)*rest)) rest++;
  int name_ok = name_end > a && !isdigit((unsigned char)*a) && eq < end && *eq == '=';
  if (!name_ok || num_end == num || rest != end) {
    if (!name_ok)
      return rt_error(UJ_ERR_PARSE, "updater [defaults] line %d: expected name = number, found \"%.*s\"", line,
                      (int)(end - a), a);
    return rt_error(UJ_ERR_PARSE,
                    "updater [defaults] line %d: expected name = number, found \"%.*s\" (column %d: %.*s's value "
                    "is not a number as the expression language writes one)",
                    line, (int)(end - a), a, (int)(num - line_start) + 1, (int)(name_end - a), a);
  }
  char name[64];
  if ((size_t)(name_end - a) >= sizeof name)
    return rt_error(UJ_ERR_PARSE, "updater [defaults] line %d: a name of over 63 characters", line);
  memcpy(name, a, (size_t)(name_end - a));
  name[name_end - a] = 0;
  if (problem)
    return rt_error(UJ_ERR_PARSE, "updater [defaults] line %d, column %d: %s = %.*s: %s", line,
                    (int)(num - line_start) + 1, name, (int)(num_end - num), num, problem);
  double value = *num == '-' ? -magnitude : magnitude;
  int index = optim_spec_scalar(spec, name);
  if (index < 0 || spec->scalar_list[index].kind != OPTIM_HPARAM)
    return rt_error(UJ_ERR_INVALID, "updater [defaults] line %d: %s is not a hyperparameter any program reads", line,
                    name);
  optim_scalar_t* sc = &spec->scalar_list[index];
  /* a second value for one key is a mistake (which one was meant?), as a
   * name declared twice is in a program, not a silent override */
  if (sc->has_default)
    return rt_error(UJ_ERR_PARSE, "updater [defaults] line %d, column %d: %s is given twice (first at line %d, column %d)",
                    line, (int)(a - line_start) + 1, name, sc->default_line, sc->default_column);
  sc->has_default = 1;
  sc->default_value = value;
  sc->default_line = line, sc->default_column = (int)(a - line_start) + 1;
  return UJ_OK;
}

static uj_status_t read_defaults(optim_spec_t* spec, const section_t* section) {
  int line = section->first_line;
  const char* line_start = section->source;
  for (const char* s = section->source; *s;) {
    const char* end = s + strcspn(s, ";\n#");
    const char* a = s;
    while (a < end && isspace((unsigned char)*a)) a++;
    if (a < end) {
      uj_status_t st = read_default(spec, a, end, line, line_start);
      if (st != UJ_OK) return st;
    }
    if (*end == '#') end += strcspn(end, "\n");
    if (*end == '\n') line++, line_start = end + 1;
    s = *end ? end + 1 : end;
  }
  return UJ_OK;
}

/* ---- roles -------------------------------------------------------------------------- */

static int reserved_scalar(const char* name, optim_scalar_kind_t* kind) {
  if (strcmp(name, "t") == 0) return *kind = OPTIM_STEP, 1;
  if (strcmp(name, "gscale") == 0) return *kind = OPTIM_GSCALE, 1;
  return 0;
}

static int written_by_pass(const uj_program_t* const* programs, int count, const char* name) {
  for (int k = 0; k < count; k++)
    for (int o = 0; o < uj_program_io_count(programs[k], 1); o++)
      if (strcmp(uj_program_io_name(programs[k], 1, o), name) == 0) return 1;
  return 0;
}

/* Whether output `o` of pass program q reduces every axis: its shape when
 * the tensors (p, g and whatever a pass writes) have 2 elements. */
static uj_status_t output_is_sum(uj_program_t* q, const uj_program_t* const* passes, int pass_count, int o,
                                 int* is_sum, int* wide) {
  int n = uj_program_io_count(q, 0);
  uj_tensor_t* probe = calloc((size_t)n + 1, sizeof(uj_tensor_t));
  const uj_tensor_t** ptrs = calloc((size_t)n + 1, sizeof(uj_tensor_t*));
  static double storage[2];
  if (!probe || !ptrs) {
    free(probe), free(ptrs);
    return rt_error(UJ_ERR_OOM, "out of memory probing an updater's outputs");
  }
  for (int i = 0; i < n; i++) {
    const char* name = uj_program_io_name(q, 0, i);
    int tensor = strcmp(name, "p") == 0 || strcmp(name, "g") == 0 || written_by_pass(passes, pass_count, name);
    uj_dtype_t declared = tensor ? UJ_F32 : UJ_F64; /* scalars are bound in f64 (optim/bindings.c) */
    uj_program_input_dtype(q, i, &declared);
    probe[i] = (uj_tensor_t){storage, declared, UJ_CPU, tensor ? 1 : 0, {2}};
    ptrs[i] = &probe[i];
  }
  int ndim = 0;
  int64_t dims[UJ_MAX_DIMS];
  uj_dtype_t dtype = UJ_F32;
  uj_status_t s = uj_program_shape(q, UJ_FORWARD, ptrs, NULL, o, &ndim, dims);
  if (s == UJ_OK) s = uj_program_output_dtype(q, UJ_FORWARD, ptrs, o, &dtype);
  free(probe), free(ptrs);
  *wide = dtype == UJ_F64;
  if (s != UJ_OK) return s;
  if (ndim == 0)
    return rt_error(UJ_ERR_INVALID, "updater output %s reads no tensor: assign it in [scalars]", uj_program_io_name(q, 1, o));
  *is_sum = ndim == 1 && dims[0] == 1;
  return UJ_OK;
}

static uj_status_t classify_pass(optim_spec_t* spec, int k, const char* section) {
  optim_pass_t* pass = &spec->passes[k];
  const uj_program_t* programs[OPTIM_MAX_PASSES];
  for (int j = 0; j < spec->pass_count; j++) programs[j] = spec->passes[j].program;
  pass->input_count = uj_program_io_count(pass->program, 0);
  pass->output_count = uj_program_io_count(pass->program, 1);
  pass->inputs = calloc((size_t)pass->input_count + 1, sizeof(optim_slot_t));
  pass->outputs = calloc((size_t)pass->output_count + 1, sizeof(optim_slot_t));
  if (!pass->inputs || !pass->outputs) return rt_error(UJ_ERR_OOM, "out of memory reading the updater's [%s]", section);
  uj_status_t s = UJ_OK;
  optim_scalar_kind_t kind;
  for (int o = 0; o < pass->output_count && s == UJ_OK; o++) {
    const char* name = uj_program_io_name(pass->program, 1, o);
    if (strcmp(name, "g") == 0 || reserved_scalar(name, &kind))
      return rt_error(UJ_ERR_INVALID, "updater [%s] assigns %s, which the step provides (read only)", section, name);
    if (strcmp(name, "p") == 0) {
      pass->outputs[o] = (optim_slot_t){OPTIM_PARAM, 0};
      continue;
    }
    int is_sum = 0, wide = 0;
    if ((s = output_is_sum(pass->program, programs, spec->pass_count, o, &is_sum, &wide)) != UJ_OK) break;
    if (is_sum) {
      if (find_name(spec->states, spec->state_count, name) >= 0)
        return rt_error(UJ_ERR_INVALID, "updater [%s]: %s is a per-group sum here and a tensor elsewhere", section, name);
      pass->outputs[o].role = OPTIM_SUM;
      s = add_name(&spec->sums, &spec->sum_count, name, &pass->outputs[o].index);
      int* grown = s == UJ_OK ? realloc(spec->sum_wide, sizeof(int) * (size_t)spec->sum_count) : NULL;
      if (s == UJ_OK && !grown) return rt_error(UJ_ERR_OOM, "out of memory naming %s", name);
      if (grown) spec->sum_wide = grown, grown[pass->outputs[o].index] = wide;
    } else {
      if (find_name(spec->sums, spec->sum_count, name) >= 0)
        return rt_error(UJ_ERR_INVALID, "updater [%s]: %s is a tensor here and a per-group sum elsewhere", section, name);
      pass->outputs[o].role = OPTIM_STATE;
      s = add_name(&spec->states, &spec->state_count, name, &pass->outputs[o].index);
    }
  }
  return s;
}

static uj_status_t bind_pass_inputs(optim_spec_t* spec, int k, const char* section) {
  optim_pass_t* pass = &spec->passes[k];
  optim_scalar_kind_t kind;
  for (int i = 0; i < pass->input_count; i++) {
    const char* name = uj_program_io_name(pass->program, 0, i);
    optim_slot_t* slot = &pass->inputs[i];
    int index;
    if (strcmp(name, "p") == 0) {
      *slot = (optim_slot_t){OPTIM_PARAM, 0};
    } else if (strcmp(name, "g") == 0) {
      *slot = (optim_slot_t){OPTIM_GRAD, 0};
    } else if ((index = find_name(spec->states, spec->state_count, name)) >= 0) {
      *slot = (optim_slot_t){OPTIM_STATE, index};
    } else if ((index = find_name(spec->sums, spec->sum_count, name)) >= 0) {
      int made_before = 0;
      for (int j = 0; j < k; j++)
        for (int o = 0; o < spec->passes[j].output_count; o++)
          if (spec->passes[j].outputs[o].role == OPTIM_SUM && spec->passes[j].outputs[o].index == index) made_before = 1;
      if (!made_before)
        return rt_error(UJ_ERR_INVALID, "updater [%s] reads the per-group sum %s before a pass has made it", section,
                        name);
      *slot = (optim_slot_t){OPTIM_SUM, index};
    } else {
      slot->role = OPTIM_SCALAR;
      uj_status_t s = add_scalar(spec, name, reserved_scalar(name, &kind) ? kind : OPTIM_HPARAM, &slot->index);
      if (s != UJ_OK) return s;
    }
  }
  return UJ_OK;
}

static uj_status_t bind_scalars_program(optim_spec_t* spec) {
  uj_program_t* q = spec->scalars;
  spec->scalars_input_count = uj_program_io_count(q, 0);
  spec->scalars_output_count = uj_program_io_count(q, 1);
  spec->scalars_inputs = calloc((size_t)spec->scalars_input_count + 1, sizeof(optim_slot_t));
  spec->scalars_outputs = calloc((size_t)spec->scalars_output_count + 1, sizeof(optim_slot_t));
  if (!spec->scalars_inputs || !spec->scalars_outputs)
    return rt_error(UJ_ERR_OOM, "out of memory reading the updater's [scalars]");
  optim_scalar_kind_t kind;
  for (int o = 0; o < spec->scalars_output_count; o++) {
    const char* name = uj_program_io_name(q, 1, o);
    if (strcmp(name, "p") == 0 || strcmp(name, "g") == 0 || reserved_scalar(name, &kind) ||
        find_name(spec->states, spec->state_count, name) >= 0 || find_name(spec->sums, spec->sum_count, name) >= 0)
      return rt_error(UJ_ERR_INVALID, "updater [scalars] assigns %s, which is not a scalar of its own", name);
    int index = optim_spec_scalar(spec, name);
    uj_status_t s = add_scalar(spec, name, OPTIM_DERIVED, &index);
    if (s != UJ_OK) return s;
    spec->scalars_outputs[o] = (optim_slot_t){OPTIM_SCALAR, index};
  }
  for (int i = 0; i < spec->scalars_input_count; i++) {
    const char* name = uj_program_io_name(q, 0, i);
    int index = optim_spec_scalar(spec, name);
    if (strcmp(name, "p") == 0 || strcmp(name, "g") == 0 || find_name(spec->states, spec->state_count, name) >= 0 ||
        find_name(spec->sums, spec->sum_count, name) >= 0 || strcmp(name, "gscale") == 0 ||
        (index >= 0 && spec->scalar_list[index].kind == OPTIM_DERIVED))
      return rt_error(UJ_ERR_INVALID, "updater [scalars] reads %s: it may read only t and hyperparameters", name);
    uj_status_t s = add_scalar(spec, name, reserved_scalar(name, &kind) ? kind : OPTIM_HPARAM, &index);
    if (s != UJ_OK) return s;
    spec->scalars_inputs[i] = (optim_slot_t){OPTIM_SCALAR, index};
  }
  return UJ_OK;
}

static uj_status_t parse_section(const section_t* section, const char* name, uj_program_t** out) {
  uj_status_t s = uj_program_parse(section->source, out);
  if (s != UJ_OK) rt_error_prefix("updater [%s], starting at text line %d: ", name, section->first_line);
  else pn_program_weak_scalars(*out); /* its scalars are bound in f64 (optim/bindings.c) */
  return s;
}

/* Whether variant q binds the inputs and outputs of pass k's program in
 * the same order (q may add `extra` outputs after them). */
static int same_bindings(const optim_pass_t* pass, const uj_program_t* q, int extra) {
  int same = uj_program_io_count(q, 0) == pass->input_count && uj_program_io_count(q, 1) == pass->output_count + extra;
  for (int i = 0; same && i < pass->input_count; i++)
    same = strcmp(uj_program_io_name(q, 0, i), uj_program_io_name(pass->program, 0, i)) == 0;
  for (int o = 0; same && o < pass->output_count; o++)
    same = strcmp(uj_program_io_name(q, 1, o), uj_program_io_name(pass->program, 1, o)) == 0;
  return same;
}

/* The variants of pass k that also write p rounded to bf16 and to f16 (see
 * optim_pass_t). Appending the assignment leaves the pass's inputs and its
 * other outputs as they are, in the same order (checked: the step binds the
 * variant with the pass's slots). */
static uj_status_t build_half_variants(optim_spec_t* spec, int k, const section_t* section) {
  static const char* const dtype_names[2] = {"bf16", "f16"};
  optim_pass_t* pass = &spec->passes[k];
  for (int io = 0; io < 2; io++)
    for (int i = 0; i < uj_program_io_count(pass->program, io); i++)
      if (strcmp(uj_program_io_name(pass->program, io, i), OPTIM_HALF_NAME) == 0)
        return rt_error(UJ_ERR_INVALID, "updater [%s] uses the name %s, which the half copy of p takes",
                        section_names[SECTION_UPDATE + k], OPTIM_HALF_NAME);
  for (int d = 0; d < 2; d++) {
    rt_buf_t text = {0};
    rt_buf_printf(&text, "%s\n" OPTIM_HALF_NAME ": %s\n" OPTIM_HALF_NAME " = p\n", section->source, dtype_names[d]);
    char* source = rt_buf_take(&text);
    if (!source) return rt_error(UJ_ERR_OOM, "out of memory making the %s variant of the updater", dtype_names[d]);
    uj_status_t s = uj_program_parse(source, &pass->half_program[d]);
    free(source);
    if (s != UJ_OK) return s;
    pn_program_weak_scalars(pass->half_program[d]);
    if (!same_bindings(pass, pass->half_program[d], 1))
      return rt_error(UJ_ERR_INVALID, "updater [%s]: its %s variant binds other inputs or outputs",
                      section_names[SECTION_UPDATE + k], dtype_names[d]);
  }
  return UJ_OK;
}

/* The variants of pass k for bf16 and f16 parameters without a master
 * (see optim_pass_t). Hints change no name's place (checked as above). */
static uj_status_t build_direct_variants(optim_spec_t* spec, int k, const section_t* section) {
  static const char* const dtype_names[2] = {"bf16", "f16"};
  optim_pass_t* pass = &spec->passes[k];
  for (int d = 0; d < 2; d++) {
    rt_buf_t text = {0};
    for (int io = 0; io < 2; io++) {
      int count = io ? pass->output_count : pass->input_count;
      const optim_slot_t* slots = io ? pass->outputs : pass->inputs;
      for (int i = 0; i < count; i++) {
        optim_role_t role = slots[i].role;
        const char* name = uj_program_io_name(pass->program, io, i);
        int seen = 0; /* p is an input and an output: one hint */
        for (int j = 0; io && j < pass->input_count; j++) seen |= strcmp(uj_program_io_name(pass->program, 0, j), name) == 0;
        if (!seen && (role == OPTIM_PARAM || role == OPTIM_GRAD || role == OPTIM_STATE))
          rt_buf_printf(&text, "%s: %s; ", name, dtype_names[d]);
      }
    }
    rt_buf_printf(&text, "\n%s\n", section->source);
    char* source = rt_buf_take(&text);
    if (!source) return rt_error(UJ_ERR_OOM, "out of memory making the direct %s variant of the updater", dtype_names[d]);
    uj_status_t s = uj_program_parse(source, &pass->direct_program[d]);
    free(source);
    /* a rule that declares a dtype of its own for p, g or a state has no
     * such variant: its step refuses half parameters (optim.c) */
    if (s == UJ_ERR_PARSE) continue;
    if (s != UJ_OK) return s;
    pn_program_weak_scalars(pass->direct_program[d]);
    if (!same_bindings(pass, pass->direct_program[d], 0))
      return rt_error(UJ_ERR_INVALID, "updater [%s]: its variant for %s parameters binds other inputs or outputs",
                      section_names[SECTION_UPDATE + k], dtype_names[d]);
  }
  return UJ_OK;
}

static uj_status_t build(optim_spec_t* spec, section_t sections[SECTION_COUNT]) {
  if (!sections[SECTION_UPDATE].source) return rt_error(UJ_ERR_PARSE, "the updater has no [update] section");
  uj_status_t s = parse_section(&sections[SECTION_UPDATE], "update", &spec->passes[0].program);
  if (s != UJ_OK) return s;
  spec->pass_count = 1;
  if (sections[SECTION_APPLY].source) {
    if ((s = parse_section(&sections[SECTION_APPLY], "apply", &spec->passes[1].program)) != UJ_OK) return s;
    spec->pass_count = 2;
  }
  for (int k = 0; k < spec->pass_count; k++)
    if ((s = classify_pass(spec, k, section_names[SECTION_UPDATE + k])) != UJ_OK) return s;
  spec->half_pass = -1;
  for (int k = 0; k < spec->pass_count; k++)
    for (int o = 0; o < spec->passes[k].output_count; o++)
      if (spec->passes[k].outputs[o].role == OPTIM_PARAM) spec->half_pass = k;
  if (spec->half_pass < 0) return rt_error(UJ_ERR_INVALID, "the updater never assigns the parameter p");
  if ((s = build_half_variants(spec, spec->half_pass, &sections[SECTION_UPDATE + spec->half_pass])) != UJ_OK) return s;
  if (sections[SECTION_SCALARS].source) {
    if ((s = parse_section(&sections[SECTION_SCALARS], "scalars", &spec->scalars)) != UJ_OK) return s;
    if ((s = bind_scalars_program(spec)) != UJ_OK) return s;
  }
  for (int k = 0; k < spec->pass_count; k++)
    if ((s = bind_pass_inputs(spec, k, section_names[SECTION_UPDATE + k])) != UJ_OK) return s;
  for (int k = 0; k < spec->pass_count; k++)
    if ((s = build_direct_variants(spec, k, &sections[SECTION_UPDATE + k])) != UJ_OK) return s;
  if (sections[SECTION_DEFAULTS].source && (s = read_defaults(spec, &sections[SECTION_DEFAULTS])) != UJ_OK) return s;
  return UJ_OK;
}

uj_status_t optim_spec_parse(const char* text, optim_spec_t* spec) {
  memset(spec, 0, sizeof *spec);
  if (!text) return rt_error(UJ_ERR_INVALID, "the updater text is NULL");
  section_t sections[SECTION_COUNT];
  uj_status_t s = split_sections(text, sections);
  if (s == UJ_OK) s = build(spec, sections);
  if (s == UJ_OK) {
    free(spec->text);
    if (!(spec->text = strdup(text))) s = rt_error(UJ_ERR_OOM, "out of memory copying the updater text");
  }
  for (int k = 0; k < SECTION_COUNT; k++) free(sections[k].source);
  if (s != UJ_OK) optim_spec_release(spec);
  return s;
}

void optim_spec_release(optim_spec_t* spec) {
  if (!spec) return;
  free(spec->text);
  uj_program_free(spec->scalars);
  free(spec->scalars_inputs), free(spec->scalars_outputs);
  for (int k = 0; k < OPTIM_MAX_PASSES; k++) {
    uj_program_free(spec->passes[k].program);
    uj_program_free(spec->passes[k].half_program[0]), uj_program_free(spec->passes[k].half_program[1]);
    uj_program_free(spec->passes[k].direct_program[0]), uj_program_free(spec->passes[k].direct_program[1]);
    free(spec->passes[k].inputs), free(spec->passes[k].outputs);
  }
  for (int i = 0; i < spec->state_count; i++) free(spec->states[i]);
  free(spec->states);
  for (int i = 0; i < spec->sum_count; i++) free(spec->sums[i]);
  free(spec->sums), free(spec->sum_wide);
  for (int i = 0; i < spec->scalar_count; i++) free(spec->scalar_list[i].name);
  free(spec->scalar_list);
  memset(spec, 0, sizeof *spec);
}
