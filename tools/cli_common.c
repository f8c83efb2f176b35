/* tools/cli_common.c: the helpers of tools/cli.h that several commands of the
 * uopjit tool use: error reporting, the seeded generator, the option parser
 * of run, dump and aot, and loading and specializing their program. */
/* open_memstream needs POSIX 2008; the Makefile's _GNU_SOURCE covers it,
 * this keeps a bare `cc -std=c11` working too. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../jit/tier.h"
#include "cli.h"

/* ---- reporting -------------------------------------------------------------------------- */

int cli_report(uj_status_t s) {
  fprintf(stderr, "uopjit: %s: %s\n", uj_status_str(s), uj_last_error());
  return 1;
}

int cli_usage_error(const char* cmd, const char* what, const char* arg) {
  fprintf(stderr, "uopjit %s: %s%s%s%s\n", cmd, what, arg ? " \"" : "", arg ? arg : "", arg ? "\"" : "");
  fprintf(stderr, "see `uopjit %s --help`\n", cmd);
  return 2;
}

int cli_engine_unavailable(uj_engine_t e) {
  fprintf(stderr, "uopjit: engine %s is not available: %s\n", uj_engine_name(e), uj_last_error());
  return 1;
}

int cli_parse_engine(const char* text, uj_engine_t* e) {
  for (int i = 0; i < CLI_ENGINE_COUNT; i++)
    if (strcmp(text, uj_engine_name((uj_engine_t)i)) == 0) {
      *e = (uj_engine_t)i;
      return 1;
    }
  return 0;
}

const char* cli_engine_usage(void) {
  static char text[160];
  char names[128];
  rt_engine_list(names, sizeof names);
  snprintf(text, sizeof text, "--engine wants %s, got", names);
  return text;
}

uj_engine_t cli_engine_asked(int engine_given, uj_engine_t engine) {
  if (engine_given) return engine;
  const char* from_env = getenv("UOPJIT_ENGINE");
  uj_engine_t e = UJ_ENGINE_AUTO;
  if (from_env && *from_env) cli_parse_engine(from_env, &e);
  return e;
}

/* ---- which engine served ---------------------------------------------------------------- */

void cli_served_mark(uj_ctx_t* ctx, cli_served_mark_t* mark) {
  jit_tier_served(ctx, &mark->mir, &mark->interp, &mark->c);
}

uj_engine_t cli_served_since(uj_ctx_t* ctx, uj_engine_t asked, const cli_served_mark_t* mark) {
  if (asked != UJ_ENGINE_AUTO) return asked;
  cli_served_mark_t now;
  if (!jit_tier_served(ctx, &now.mir, &now.interp, &now.c)) return uj_ctx_engine(ctx); /* AUTO, not tiered */
  /* a call the quick tier served shows in its count; a C kernel's memo hits
   * show nowhere, so tiered calls that moved neither count ran C */
  if (now.mir > mark->mir) return UJ_ENGINE_MIR;
  if (now.interp > mark->interp) return UJ_ENGINE_INTERP;
  return UJ_ENGINE_C;
}

void cli_served_summary(const uj_engine_t* served, int n, const char* call, char* out, size_t cap) {
  if (n < 1) {
    snprintf(out, cap, "-");
    return;
  }
  uj_engine_t last = served[n - 1];
  size_t used = (size_t)snprintf(out, cap, "%s", uj_engine_name(last));
  const char* open = " (";
  for (int e = 0; e < CLI_ENGINE_COUNT && used < cap; e++) {
    if ((uj_engine_t)e == last) continue;
    int count = 0, first = -1, last_at = -1;
    for (int i = 0; i < n; i++)
      if (served[i] == (uj_engine_t)e) count++, last_at = i, first = first < 0 ? i : first;
    if (!count) continue;
    /* a run of calls from the first (the usual switch from MIR to C) by
     * their numbers, else a count */
    if (first == 0 && last_at == count - 1 && count == 1)
      used += (size_t)snprintf(out + used, cap - used, "%s%s 1 on %s", open, call, uj_engine_name((uj_engine_t)e));
    else if (first == 0 && last_at == count - 1)
      used += (size_t)snprintf(out + used, cap - used, "%s%ss 1-%d on %s", open, call, count,
                               uj_engine_name((uj_engine_t)e));
    else
      used += (size_t)snprintf(out + used, cap - used, "%s%d of %d %ss on %s", open, count, n, call,
                               uj_engine_name((uj_engine_t)e));
    open = "; ";
  }
  if (*open == ';' && used < cap) snprintf(out + used, cap - used, ")");
}

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

/* ---- timing ----------------------------------------------------------------------------------- */

double cli_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double cli_median(double* times, int n) {
  qsort(times, (size_t)n, sizeof *times, compare_doubles);
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/* ---- options ---------------------------------------------------------------------------------- */

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
  if ((accepted & CLI_ACCEPT_RUN) && (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0)) {
    o->verbose = 1;
    return 1;
  }
  return 0;
}

static int takes_value(const char* name, unsigned accepted) {
  if (!strcmp(name, "--shape") || !strcmp(name, "--dtype") || !strcmp(name, "--scalar") || !strcmp(name, "--file"))
    return 1;
  if ((accepted & CLI_ACCEPT_RUN) && (!strcmp(name, "--engine") || !strcmp(name, "--repeat") || !strcmp(name, "--seed")))
    return 1;
  return (accepted & CLI_ACCEPT_OUTPUT) && (!strcmp(name, "-o") || !strcmp(name, "--output"));
}

/* Stores the value of option `name`; 0 or a usage error's exit status. */
static int set_value(const char* cmd, const char* name, const char* value, cli_options_t* o) {
  char* end = NULL;
  if (!strcmp(name, "--shape") || !strcmp(name, "--dtype") || !strcmp(name, "--scalar")) {
    return cli_inputs_option(cmd, name, value, &o->inputs);
  } else if (!strcmp(name, "--file")) {
    if (!*value) return cli_usage_error(cmd, "--file wants a file name (- for stdin)", NULL);
    if (o->source_file) return cli_usage_error(cmd, "--file given twice, again as", value);
    o->source_file = value;
  } else if (!strcmp(name, "--engine")) {
    if (!cli_parse_engine(value, &o->engine)) return cli_usage_error(cmd, cli_engine_usage(), value);
    o->engine_given = 1;
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
  cli_inputs_init(&o->inputs);
  o->engine = UJ_ENGINE_AUTO;
  o->repeat = 5;
  o->seed = 1;
  o->dump = UJ_DUMP_IR;
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    /* "-o" is the one short option; any other argument not starting with
     * "--" is the source, so that '-x*2' stays an expression. */
    int is_option = strncmp(arg, "--", 2) == 0 || ((accepted & CLI_ACCEPT_OUTPUT) && strcmp(arg, "-o") == 0) ||
                    ((accepted & CLI_ACCEPT_RUN) && strcmp(arg, "-v") == 0);
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
  if (o->source && o->source_file)
    return cli_usage_error(cmd, "takes the program as SOURCE or from --file, not both; SOURCE is", o->source);
  if (!o->source && !o->source_file)
    return cli_usage_error(cmd, "missing the program source, e.g. 'y = 1/(1+exp(-x))' or --file FILE", NULL);
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
static uj_status_t parse_source(const char* source, uj_program_t** p, char** parsed) {
  static const char prefix[] = "y = ";
  const int prefix_len = (int)sizeof prefix - 1;
  uj_status_t s = uj_program_parse(source, p);
  if (s == UJ_OK && parsed && !(*parsed = strdup(source))) s = UJ_ERR_OOM;
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
    if (parsed) {
      *parsed = wrapped;
      wrapped = NULL;
    }
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

/* The most a source may hold (docs/LANGUAGE.md: "sources over 1 MiB ... are
 * errors"); a file is read to one byte past it, so that the parser's own
 * message says the source is too long. */
#define CLI_MAX_SOURCE (1 << 20)

/* Where byte `offset` of text is, as the parser counts: lines from 1 at
 * each '\n', columns from 1. */
static void text_position(const char* text, size_t offset, int* line, int* column) {
  size_t line_start = 0;
  *line = 1;
  for (size_t i = 0; i < offset; i++)
    if (text[i] == '\n') (*line)++, line_start = i + 1;
  *column = (int)(offset - line_start) + 1;
}

/* The text of --file PATH ("-": standard input), NUL-terminated. 0 with
 * *text (malloc'ed), or the exit status after printing why: 2 when the file
 * cannot be opened (like any option naming a file that is not there), 1
 * when it cannot be read or holds a NUL byte. A NUL is refused rather than
 * taken as the end of the text: the parser would read the program up to it
 * and silently drop the rest. */
static int read_source_file(const char* cmd, const char* path, char** text) {
  *text = NULL;
  int from_stdin = strcmp(path, "-") == 0;
  FILE* f = from_stdin ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "uopjit %s: cannot open --file \"%s\": %s\n", cmd, path, strerror(errno));
    return 2;
  }
  size_t cap = 4096, len = 0;
  char* buf = malloc(cap + 1);
  int failed = 0, oom = !buf;
  while (!oom && len <= CLI_MAX_SOURCE) {
    if (len == cap) {
      char* grown = realloc(buf, 2 * cap + 1);
      if (!grown) {
        oom = 1;
        break;
      }
      buf = grown, cap *= 2;
    }
    size_t want = cap - len, limit = (size_t)CLI_MAX_SOURCE + 1 - len;
    size_t got = fread(buf + len, 1, want < limit ? want : limit, f);
    len += got;
    if (got == 0) {
      failed = ferror(f);
      break;
    }
  }
  int err = errno;
  if (!from_stdin) fclose(f);
  if (oom) {
    free(buf);
    return cli_out_of_memory("the program's source", (uint64_t)cap * 2 + 1);
  }
  if (failed) {
    fprintf(stderr, "uopjit %s: cannot read --file \"%s\": %s\n", cmd, path, strerror(err));
    free(buf);
    return 1;
  }
  buf[len] = 0;
  const char* nul = memchr(buf, 0, len);
  if (nul) {
    int line, column;
    size_t offset = (size_t)(nul - buf);
    text_position(buf, offset, &line, &column);
    fprintf(stderr,
            "uopjit: %s: program line %d, column %d: a NUL byte (offset %zu of %s); a program's source is text, "
            "and the rest of it would be lost\n",
            uj_status_str(UJ_ERR_PARSE), line, column, offset, from_stdin ? "standard input" : path);
    free(buf);
    return 1;
  }
  *text = buf;
  return 0;
}

int cli_load_program(const char* cmd, const cli_options_t* o, uj_program_t** p, cli_input_t** inputs,
                     char** parsed) {
  *p = NULL;
  *inputs = NULL;
  if (parsed) *parsed = NULL;
  char* from_file = NULL;
  if (o->source_file) {
    int rc = read_source_file(cmd, o->source_file, &from_file);
    if (rc) return rc;
  }
  uj_status_t parse_status = parse_source(from_file ? from_file : o->source, p, parsed);
  free(from_file);
  if (parse_status != UJ_OK) return 1;
  int rc = cli_check_input_names(cmd, *p, &o->inputs);
  if (!rc && !(*inputs = calloc((size_t)uj_program_io_count(*p, 0) + 1, sizeof **inputs))) rc = cli_report(UJ_ERR_OOM);
  if (!rc) rc = cli_resolve_inputs(cmd, *p, &o->inputs, *inputs);
  if (rc) {
    uj_program_free(*p);
    free(*inputs);
    *p = NULL;
    *inputs = NULL;
    if (parsed) {
      free(*parsed);
      *parsed = NULL;
    }
  }
  return rc;
}

/* Tensors standing for inputs in a build: their dtypes and ranks, size 1
 * where the input has size 1 and 0 elsewhere. The build depends on ranks,
 * dtypes and which axes have size 1, not on the sizes, so no data is
 * needed; a tensor of size-1 axes only holds one element, which `one`
 * provides. */
static void stand_ins(const uj_program_t* p, const cli_input_t* inputs, uj_tensor_t* tensors,
                      const uj_tensor_t** ptrs) {
  static double one;
  for (int i = 0; i < uj_program_io_count(p, 0); i++) {
    uj_tensor_t* t = &tensors[i];
    memset(t, 0, sizeof *t);
    t->dtype = inputs[i].dtype;
    t->device = UJ_CPU;
    t->data = &one;
    t->ndim = inputs[i].ndim;
    for (int k = 0; k < t->ndim; k++) t->dims[k] = inputs[i].dims[k] == 1 ? 1 : 0;
    ptrs[i] = t;
  }
}

uj_status_t cli_specialize(uj_program_t* p, const cli_input_t* inputs) {
  int n = uj_program_io_count(p, 0);
  uj_tensor_t* tensors = calloc((size_t)n + 1, sizeof *tensors);
  const uj_tensor_t** ptrs = calloc((size_t)n + 1, sizeof *ptrs);
  uj_status_t s = UJ_ERR_OOM;
  if (tensors && ptrs) {
    stand_ins(p, inputs, tensors, ptrs);
    uj_dtype_t unused;
    s = uj_program_output_dtype(p, UJ_FORWARD, ptrs, 0, &unused);
  }
  free(tensors);
  free(ptrs);
  return s;
}

/* 1 when name is an identifier: the parser admits no other input or output
 * names, and this is checked again before a name goes into a C comment. */
static int is_identifier(const char* name) {
  if (!((*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') || *name == '_')) return 0;
  for (const char* c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
  return 1;
}

/* One line of the io comment: " *   0 x  f32, rank 2 [d0, 1]" (size-1 axes
 * are fixed in the build, the others are run-time sizes). */
static void io_comment_line(FILE* out, int index, const char* name, uj_dtype_t dt, int ndim, const int64_t* dims) {
  fprintf(out, " *   %d %s  %s, ", index, is_identifier(name) ? name : "(unnamed)", uj_dtype_name(dt));
  if (ndim == 0) {
    fprintf(out, "0-d\n");
    return;
  }
  fprintf(out, "rank %d [", ndim);
  for (int k = 0; k < ndim; k++) fprintf(out, "%s%s", k ? ", " : "", dims[k] == 1 ? "1" : "n");
  fprintf(out, "]\n");
}

/* A C comment naming p's inputs and outputs in the order the AOT entry
 * points take them, for the build of these inputs; NULL on a failure
 * (status in *s). */
static char* io_comment(uj_program_t* p, const cli_input_t* inputs, uj_status_t* s) {
  int nin = uj_program_io_count(p, 0), nout = uj_program_io_count(p, 1);
  uj_tensor_t* tensors = calloc((size_t)nin + 1, sizeof *tensors);
  const uj_tensor_t** ptrs = calloc((size_t)nin + 1, sizeof *ptrs);
  char* text = NULL;
  size_t len = 0;
  FILE* out = tensors && ptrs ? open_memstream(&text, &len) : NULL;
  *s = out ? UJ_OK : UJ_ERR_OOM;
  if (out) {
    stand_ins(p, inputs, tensors, ptrs);
    fprintf(out, "/* uopjit aot: the inputs and outputs of uopjit_kernel_run and\n"
                 " * uopjit_kernel_output_dims, in order (n: a size given at run time).\n * inputs:\n");
    for (int i = 0; i < nin; i++)
      io_comment_line(out, i, uj_program_io_name(p, 0, i), inputs[i].dtype, tensors[i].ndim, tensors[i].dims);
    fprintf(out, " * outputs:\n");
    for (int i = 0; i < nout && *s == UJ_OK; i++) {
      uj_tensor_t o;
      memset(&o, 0, sizeof o);
      *s = uj_program_shape(p, UJ_FORWARD, ptrs, NULL, i, &o.ndim, o.dims);
      if (*s == UJ_OK) *s = uj_program_output_dtype(p, UJ_FORWARD, ptrs, i, &o.dtype);
      /* an output's axis of size 1 here may be a reduced axis, or follow
       * an input's; either way it is 1 */
      if (*s == UJ_OK) io_comment_line(out, i, uj_program_io_name(p, 1, i), o.dtype, o.ndim, o.dims);
    }
    fprintf(out, " */\n");
    if (fclose(out) != 0 && *s == UJ_OK) *s = UJ_ERR_OOM;
  }
  free(tensors);
  free(ptrs);
  if (*s != UJ_OK) {
    free(text);
    return NULL;
  }
  return text;
}
int cli_program_text(const char* cmd, const cli_options_t* o, uj_dump_t what, int always_specialize, char** text) {
  uj_program_t* p = NULL;
  cli_input_t* inputs = NULL;
  uj_ctx_t* ctx = NULL;
  char *dump = NULL, *comment = NULL;
  *text = NULL;
  int rc = cli_load_program(cmd, o, &p, &inputs, NULL);
  uj_status_t s = UJ_OK;
  if (!rc && (always_specialize || o->inputs.specialized) && (s = cli_specialize(p, inputs)) != UJ_OK) rc = cli_report(s);
  if (!rc && what == UJ_DUMP_C_AOT && !(comment = io_comment(p, inputs, &s))) rc = cli_report(s);
  if (!rc && !(ctx = uj_ctx_new())) rc = cli_report(UJ_ERR_OOM);
  if (!rc && !(dump = uj_program_dump(ctx, p, UJ_FORWARD, what, NULL))) {
    /* only MIR's needs an engine; the others fail for the usual reasons */
    rc = what == UJ_DUMP_MIR ? cli_engine_unavailable(UJ_ENGINE_MIR) : cli_report(UJ_ERR_INVALID);
  }
  if (!rc && comment) {
    size_t comment_len = strlen(comment), dump_len = strlen(dump);
    if ((*text = malloc(comment_len + dump_len + 1)) != NULL) {
      memcpy(*text, comment, comment_len);
      memcpy(*text + comment_len, dump, dump_len + 1);
    } else {
      rc = cli_report(UJ_ERR_OOM);
    }
    free(dump);
  } else if (!rc) {
    *text = dump;
  }
  free(comment);
  free(inputs);
  uj_ctx_free(ctx);
  uj_program_free(p);
  return rc;
}
