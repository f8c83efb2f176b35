/* tools/cli_common.c: the helpers of tools/cli.h that several commands of the
 * uopjit tool use: error reporting, the seeded generator, the option parser
 * of run, dump and aot, and loading and specializing their program. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- reporting -------------------------------------------------------------------------- */

int cli_report(uj_status_t s) {
  fprintf(stderr, "uopjit: %s: %s\n", uj_status_str(s), uj_last_error());
  return 1;
}

int cli_usage_error(const char* cmd, const char* what, const char* arg) {
  fprintf(stderr, "uopjit %s: %s%s%s%s\n", cmd, what, arg ? " \"" : "", arg ? arg : "", arg ? "\"" : "");
  fprintf(stderr, "run `uopjit` without arguments for the usage\n");
  return 2;
}

int cli_engine_unavailable(uj_engine_t e) {
  fprintf(stderr, "uopjit: engine %s is not available: %s\n", uj_engine_name(e), uj_last_error());
  return 1;
}

const uj_engine_t cli_engines[CLI_ENGINE_COUNT] = {UJ_ENGINE_AUTO, UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_C,
                                                   UJ_ENGINE_CUDA};

void cli_print_dims(FILE* out, int ndim, const int64_t* dims) {
  fputc('[', out);
  for (int k = 0; k < ndim; k++) fprintf(out, "%s%lld", k ? "," : "", (long long)dims[k]);
  fputc(']', out);
}

/* ---- seeded values ------------------------------------------------------------------------ */

uint64_t cli_rng_next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float cli_rng_float(uint64_t* state) {
  return (float)((double)(cli_rng_next(state) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* ---- options ---------------------------------------------------------------------------------- */

/* The size of every non-scalar input when --shape is not given. */
#define DEFAULT_SIZE 1000000
/* Bounds what `run` allocates per input; the sizes of aot and dump only
 * pick a rank, but one rule for all keeps --shape's meaning simple. */
#define MAX_ELEMENTS ((int64_t)1 << 34)

/* "1000000" or "64,128": 1..8 positive sizes whose product stays below
 * MAX_ELEMENTS. */
static int parse_shape(const char* text, cli_options_t* o) {
  int n = 0;
  int64_t total = 1;
  const char* s = text;
  for (;;) {
    if (n == UJ_MAX_DIMS || *s < '0' || *s > '9') return 0;
    char* end;
    long long v = strtoll(s, &end, 10);
    if (v <= 0 || __builtin_mul_overflow(total, (int64_t)v, &total) || total > MAX_ELEMENTS) return 0;
    o->dims[n++] = v;
    if (*end == 0) break;
    if (*end != ',') return 0;
    s = end + 1;
  }
  o->ndim = n;
  return 1;
}

static int parse_engine(const char* text, uj_engine_t* e) {
  for (int i = 0; i < CLI_ENGINE_COUNT; i++)
    if (strcmp(text, uj_engine_name(cli_engines[i])) == 0) {
      *e = cli_engines[i];
      return 1;
    }
  return 0;
}

/* The flags without a value: --check and the dump kinds. 1 when arg is one
 * of them that the command accepts. */
static int parse_flag(const char* arg, unsigned accepted, cli_options_t* o) {
  static const struct {
    const char* name;
    uj_dump_t what;
  } dumps[] = {{"--ir-raw", UJ_DUMP_IR_RAW}, {"--ir", UJ_DUMP_IR}, {"--c", UJ_DUMP_C},
               {"--mir", UJ_DUMP_MIR},       {"--cuda", UJ_DUMP_CUDA}};
  for (size_t k = 0; (accepted & CLI_ACCEPT_DUMP_KIND) && k < sizeof dumps / sizeof dumps[0]; k++)
    if (strcmp(arg, dumps[k].name) == 0) {
      o->dump = dumps[k].what;
      return 1;
    }
  if ((accepted & CLI_ACCEPT_RUN) && strcmp(arg, "--check") == 0) {
    o->check = 1;
    return 1;
  }
  return 0;
}

static int takes_value(const char* name, unsigned accepted) {
  if (!strcmp(name, "--shape") || !strcmp(name, "--dtype") || !strcmp(name, "--scalar")) return 1;
  if ((accepted & CLI_ACCEPT_RUN) && (!strcmp(name, "--engine") || !strcmp(name, "--repeat") || !strcmp(name, "--seed")))
    return 1;
  return (accepted & CLI_ACCEPT_OUTPUT) && (!strcmp(name, "-o") || !strcmp(name, "--output"));
}

/* Stores the value of option `name`; 0 or a usage error's exit status. */
static int set_value(const char* cmd, const char* name, const char* value, cli_options_t* o) {
  char* end = NULL;
  if (!strcmp(name, "--shape")) {
    if (!parse_shape(value, o)) {
      char what[192];
      snprintf(what, sizeof what,
               "--shape wants 1 to %d positive sizes such as 1000000 or 64,128, with at most 2^34 (%lld) "
               "elements in all; got",
               UJ_MAX_DIMS, (long long)MAX_ELEMENTS);
      return cli_usage_error(cmd, what, value);
    }
    o->specialized = 1;
  } else if (!strcmp(name, "--dtype")) {
    if (!strcmp(value, "f32")) o->dtype = UJ_F32;
    else if (!strcmp(value, "f64")) o->dtype = UJ_F64;
    else return cli_usage_error(cmd, "--dtype wants f32 or f64, got", value);
    o->specialized = 1;
  } else if (!strcmp(name, "--scalar")) {
    o->scalars = value;
    o->specialized = 1;
  } else if (!strcmp(name, "--engine")) {
    if (!parse_engine(value, &o->engine))
      return cli_usage_error(cmd, "--engine wants auto, interp, mir, c or cuda, got", value);
  } else if (!strcmp(name, "--repeat")) {
    long v = strtol(value, &end, 10);
    if (*value < '0' || *value > '9' || *end || v < 1 || v > 1000000)
      return cli_usage_error(cmd, "--repeat wants a count from 1, got", value);
    o->repeat = (int)v;
  } else if (!strcmp(name, "--seed")) {
    unsigned long long v = strtoull(value, &end, 10);
    if (*value < '0' || *value > '9' || *end) return cli_usage_error(cmd, "--seed wants a non-negative integer, got", value);
    o->seed = v;
  } else { /* -o, --output */
    if (!*value) return cli_usage_error(cmd, "-o wants a file name", NULL);
    o->output_path = value;
  }
  return 0;
}

int cli_parse_options(const char* cmd, int argc, char** argv, unsigned accepted, cli_options_t* o) {
  memset(o, 0, sizeof *o);
  o->ndim = 1;
  o->dims[0] = DEFAULT_SIZE;
  o->dtype = UJ_F32;
  o->engine = UJ_ENGINE_AUTO;
  o->repeat = 5;
  o->seed = 1;
  o->dump = UJ_DUMP_IR;
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    /* "-o" is the one short option; any other argument not starting with
     * "--" is the source, so that '-x*2' stays an expression. */
    int is_option = strncmp(arg, "--", 2) == 0 || ((accepted & CLI_ACCEPT_OUTPUT) && strcmp(arg, "-o") == 0);
    if (!is_option) {
      if (o->source) return cli_usage_error(cmd, "more than one program source:", arg);
      o->source = arg;
      continue;
    }
    if (parse_flag(arg, accepted, o)) continue;
    char name[32];
    const char* value = strchr(arg, '=');
    size_t len = value ? (size_t)(value - arg) : strlen(arg);
    if (len >= sizeof name) return cli_usage_error(cmd, "unknown option", arg);
    memcpy(name, arg, len);
    name[len] = 0;
    if (!takes_value(name, accepted)) return cli_usage_error(cmd, "unknown option", arg);
    if (value) {
      value++;
    } else {
      if (i + 1 >= argc) return cli_usage_error(cmd, "missing value after", arg);
      value = argv[++i];
    }
    int rc = set_value(cmd, name, value, o);
    if (rc) return rc;
  }
  if (!o->source) return cli_usage_error(cmd, "missing the program source, e.g. 'y = 1/(1+exp(-x))'", NULL);
  return 0;
}

int cli_in_list(const char* list, const char* name) {
  size_t n = strlen(name);
  for (const char* s = list; s && *s;) {
    const char* end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len == n && strncmp(s, name, n) == 0) return 1;
    s = end ? end + 1 : NULL;
  }
  return 0;
}

/* ---- programs ------------------------------------------------------------------------------- */

/* Where a parse error message "program line L, column C: ..." points; 0
 * when it names no position (a source over 1 MiB, out of memory). *rest
 * receives the text after the position. */
static int error_position(const char* message, int* line, int* column, const char** rest) {
  int consumed = 0;
  if (sscanf(message, "program line %d, column %d%n", line, column, &consumed) != 2 || !consumed) return 0;
  *rest = message + consumed;
  return 1;
}

/* Parses source; a bare expression, which is no program by itself, is
 * taken as 'y = EXPR'. When neither parses, the error reported is the one
 * that got further into the text: "expected a name at the start of a
 * statement" says little about '1/(1+', its wrapped form's error does. */
static uj_status_t parse_source(const char* source, uj_program_t** p) {
  static const char prefix[] = "y = ";
  const int prefix_len = (int)sizeof prefix - 1;
  uj_status_t s = uj_program_parse(source, p);
  if (s != UJ_ERR_PARSE) {
    if (s != UJ_OK) cli_report(s);
    return s;
  }
  size_t len = strlen(source);
  char* wrapped = malloc(len + sizeof prefix);
  char* first_error = strdup(uj_last_error());
  if (!wrapped || !first_error) {
    free(wrapped);
    free(first_error);
    fprintf(stderr, "uopjit: out of memory\n");
    return UJ_ERR_OOM;
  }
  memcpy(wrapped, prefix, (size_t)prefix_len);
  memcpy(wrapped + prefix_len, source, len + 1);
  if (uj_program_parse(wrapped, p) == UJ_OK) {
    s = UJ_OK;
  } else {
    int line0, column0, line1, column1;
    const char *rest0, *rest1;
    const char* second_error = uj_last_error();
    int further = error_position(first_error, &line0, &column0, &rest0) &&
                  error_position(second_error, &line1, &column1, &rest1) && line1 == 1 && line0 == 1 &&
                  column1 - prefix_len > column0;
    if (further)
      fprintf(stderr, "uopjit: %s: program line 1, column %d%s\n", uj_status_str(s), column1 - prefix_len, rest1);
    else
      fprintf(stderr, "uopjit: %s: %s\n", uj_status_str(s), first_error);
  }
  free(wrapped);
  free(first_error);
  return s;
}

/* Every name in --scalar must be an input of the program. */
static int check_scalars(const char* cmd, const uj_program_t* p, const char* list) {
  for (const char* s = list; s && *s;) {
    const char* end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int found = 0;
    for (int i = 0; i < uj_program_io_count(p, 0) && !found; i++) {
      const char* name = uj_program_io_name(p, 0, i);
      found = strlen(name) == len && strncmp(name, s, len) == 0;
    }
    if (!found) {
      fprintf(stderr, "uopjit %s: --scalar names \"%.*s\", which is not an input of the program (inputs:", cmd,
              (int)(len > 64 ? 64 : len), s);
      for (int i = 0; i < uj_program_io_count(p, 0); i++) fprintf(stderr, " %s", uj_program_io_name(p, 0, i));
      fprintf(stderr, ")\n");
      return 2;
    }
    s = end ? end + 1 : NULL;
  }
  return 0;
}

int cli_load_program(const char* cmd, const cli_options_t* o, uj_program_t** p) {
  *p = NULL;
  if (parse_source(o->source, p) != UJ_OK) return 1;
  int rc = check_scalars(cmd, *p, o->scalars);
  if (rc) {
    uj_program_free(*p);
    *p = NULL;
  }
  return rc;
}

uj_status_t cli_specialize(uj_program_t* p, const cli_options_t* o) {
  int n = uj_program_io_count(p, 0);
  uj_tensor_t* tensors = calloc((size_t)n + 1, sizeof *tensors);
  const uj_tensor_t** inputs = calloc((size_t)n + 1, sizeof *inputs);
  if (!tensors || !inputs) {
    free(tensors);
    free(inputs);
    return UJ_ERR_OOM;
  }
  /* The build depends on ranks, dtypes and which axes have size 1, not on
   * the sizes, so the other axes are given size 0: no data is needed. A
   * tensor of size-1 axes only holds one element, which `one` provides. */
  static double one;
  for (int i = 0; i < n; i++) {
    uj_tensor_t* t = &tensors[i];
    t->dtype = o->dtype;
    t->device = UJ_CPU;
    t->data = &one;
    if (!cli_in_list(o->scalars, uj_program_io_name(p, 0, i))) {
      t->ndim = o->ndim;
      for (int k = 0; k < o->ndim; k++) t->dims[k] = o->dims[k] == 1 ? 1 : 0;
    }
    inputs[i] = t;
  }
  uj_dtype_t unused;
  uj_status_t s = uj_program_output_dtype(p, UJ_FORWARD, inputs, 0, &unused);
  free(tensors);
  free(inputs);
  return s;
}

int cli_program_text(const char* cmd, const cli_options_t* o, uj_dump_t what, int always_specialize, char** text) {
  uj_program_t* p = NULL;
  uj_ctx_t* ctx = NULL;
  *text = NULL;
  int rc = cli_load_program(cmd, o, &p);
  uj_status_t s = UJ_OK;
  if (!rc && (always_specialize || o->specialized) && (s = cli_specialize(p, o)) != UJ_OK) rc = cli_report(s);
  if (!rc && !(ctx = uj_ctx_new())) rc = cli_report(UJ_ERR_OOM);
  if (!rc && !(*text = uj_program_dump(ctx, p, UJ_FORWARD, what, NULL))) {
    /* only MIR's needs an engine; the others fail for the usual reasons */
    rc = what == UJ_DUMP_MIR ? cli_engine_unavailable(UJ_ENGINE_MIR) : cli_report(UJ_ERR_INVALID);
  }
  uj_ctx_free(ctx);
  uj_program_free(p);
  return rc;
}
