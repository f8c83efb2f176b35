/* tools/cli_inputs.c: what run, dump and aot are told about the program's
 * inputs, and the shape and dtype each input gets from it.
 *
 * --shape and --dtype come in two forms: plain (`--shape 64,128`), the
 * default for every input not named otherwise, and per input (`--shape
 * b=128`, `--dtype x=f64`); --scalar NAME[,NAME...] makes inputs 0-d. Each
 * option is recorded as it is parsed, and a second statement about the
 * same thing that says something else (`--shape x=4 --shape x=5`, `--shape
 * 4 --shape 5`, `--scalar s --shape s=4`) is refused then, naming both. A
 * name is an identifier; whether it is an input can only be known once the
 * program is parsed (cli_check_input_names). Then each input's dtype is,
 * in order: its --dtype NAME=, the dtype the program declares for it
 * (`x: f64`; a different --dtype NAME= is a conflict), the plain --dtype,
 * f32; its shape: 0-d for --scalar, its --shape NAME=, the plain --shape,
 * [1000000]. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The size of every non-scalar input when --shape is not given. */
#define DEFAULT_SIZE 1000000
/* Bounds what `run` allocates per input; the sizes of aot and dump only
 * pick a rank, but one rule for all keeps --shape's meaning simple. */
#define MAX_ELEMENTS ((int64_t)1 << 34)

void cli_inputs_init(cli_inputs_t* in) {
  memset(in, 0, sizeof *in);
  in->all.ndim = 1;
  in->all.dims[0] = DEFAULT_SIZE;
  in->all.dtype = UJ_F32;
}

/* "1000000" or "64,128": 1..8 positive sizes whose product stays at most
 * MAX_ELEMENTS. */
static int parse_dims(const char* text, int* ndim, int64_t* dims) {
  int n = 0;
  int64_t total = 1;
  const char* s = text;
  for (;;) {
    if (n == UJ_MAX_DIMS || *s < '0' || *s > '9') return 0;
    char* end;
    long long v = strtoll(s, &end, 10);
    if (v <= 0 || __builtin_mul_overflow(total, (int64_t)v, &total) || total > MAX_ELEMENTS) return 0;
    dims[n++] = v;
    if (*end == 0) break;
    if (*end != ',') return 0;
    s = end + 1;
  }
  *ndim = n;
  return 1;
}

static int parse_dtype(const char* text, uj_dtype_t* dt) {
  if (!strcmp(text, "f32")) *dt = UJ_F32;
  else if (!strcmp(text, "f64")) *dt = UJ_F64;
  else if (!strcmp(text, "bf16")) *dt = UJ_BF16;
  else if (!strcmp(text, "f16")) *dt = UJ_F16;
  else return 0;
  return 1;
}

/* The length of the identifier at the start of s ([A-Za-z_][A-Za-z0-9_]*),
 * 0 when there is none. */
static size_t identifier_length(const char* s) {
  size_t n = 0;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) return 0;
  while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_')
    n++;
  return n;
}

/* "64,128", or "0-d" for a scalar, into buf. */
static const char* spec_shape_text(const cli_input_spec_t* s, char* buf, size_t cap) {
  if (s->is_scalar) return "0-d (--scalar)";
  size_t k = 0;
  buf[0] = 0;
  for (int d = 0; d < s->ndim && k < cap; d++) k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? "," : "", (long long)s->dims[d]);
  return buf;
}

/* Reports that what the options say about `name` (NULL: the plain form)
 * disagrees: the earlier statement `was`, the new one `now`. */
static int conflict(const char* cmd, const cli_input_spec_t* spec, const char* option, const char* was, const char* now) {
  char what[320];
  if (spec->name)
    snprintf(what, sizeof what, "conflicting %s for input %.*s: %.64s, then %.64s; give one", option, spec->name_len,
             spec->name, was, now);
  else
    snprintf(what, sizeof what, "conflicting plain %s: %.64s, then %.64s; give one (or NAME=... for one input)", option,
             was, now);
  return cli_usage_error(cmd, what, NULL);
}

/* The entry of name (len bytes) in in->named, added when absent; NULL
 * after printing why when the table is full. */
static cli_input_spec_t* named_spec(const char* cmd, cli_inputs_t* in, const char* name, int len) {
  for (int i = 0; i < in->named_count; i++)
    if (in->named[i].name_len == len && strncmp(in->named[i].name, name, (size_t)len) == 0) return &in->named[i];
  if (in->named_count == CLI_MAX_NAMED_INPUTS) {
    char what[96];
    snprintf(what, sizeof what, "more than %d inputs named in --shape, --dtype and --scalar", CLI_MAX_NAMED_INPUTS);
    cli_usage_error(cmd, what, NULL);
    return NULL;
  }
  cli_input_spec_t* s = &in->named[in->named_count++];
  memset(s, 0, sizeof *s);
  s->name = name;
  s->name_len = len;
  return s;
}

static int set_shape(const char* cmd, cli_input_spec_t* s, int ndim, const int64_t* dims, int is_scalar) {
  cli_input_spec_t now = *s;
  now.ndim = ndim, now.is_scalar = is_scalar;
  for (int d = 0; d < ndim; d++) now.dims[d] = dims[d]; /* dims is NULL for a scalar */
  if (s->has_shape &&
      (s->is_scalar != is_scalar || s->ndim != ndim || memcmp(s->dims, now.dims, sizeof(int64_t) * (size_t)ndim) != 0)) {
    char was[160], then[160];
    return conflict(cmd, s, s->is_scalar || is_scalar ? "shapes" : "--shape", spec_shape_text(s, was, sizeof was),
                    spec_shape_text(&now, then, sizeof then));
  }
  *s = now;
  s->has_shape = 1;
  return 0;
}

static int set_dtype(const char* cmd, cli_input_spec_t* s, uj_dtype_t dt) {
  if (s->has_dtype && s->dtype != dt) return conflict(cmd, s, "--dtype", uj_dtype_name(s->dtype), uj_dtype_name(dt));
  s->dtype = dt;
  s->has_dtype = 1;
  return 0;
}

/* Splits "NAME=REST" into the spec of NAME and REST; plain values (no '=')
 * give the defaults' spec. NULL after printing why for a malformed name. */
static cli_input_spec_t* spec_of(const char* cmd, const char* option, const char* value, cli_inputs_t* in,
                                 const char** rest) {
  const char* eq = strchr(value, '=');
  if (!eq) {
    *rest = value;
    return &in->all;
  }
  size_t len = identifier_length(value);
  if (len == 0 || value + len != eq || len > 256) {
    char what[128];
    snprintf(what, sizeof what, "%s NAME=... wants an input's name (letters, digits, _) before '=', got", option);
    cli_usage_error(cmd, what, value);
    return NULL;
  }
  *rest = eq + 1;
  return named_spec(cmd, in, value, (int)len);
}

int cli_inputs_option(const char* cmd, const char* option, const char* value, cli_inputs_t* in) {
  const char* rest;
  if (!strcmp(option, "--scalar")) {
    for (const char* s = value;;) {
      size_t len = identifier_length(s);
      if (len == 0 || (s[len] != ',' && s[len] != 0) || len > 256)
        return cli_usage_error(cmd, "--scalar wants input names separated by commas, got", value);
      cli_input_spec_t* spec = named_spec(cmd, in, s, (int)len);
      int rc = spec ? set_shape(cmd, spec, 0, NULL, 1) : 2;
      if (rc) return rc;
      if (!s[len]) break;
      s += len + 1;
    }
  } else if (!strcmp(option, "--shape")) {
    cli_input_spec_t* spec = spec_of(cmd, option, value, in, &rest);
    int ndim;
    int64_t dims[UJ_MAX_DIMS];
    if (!spec) return 2;
    if (!parse_dims(rest, &ndim, dims))
      return cli_usage_error(cmd,
                             "--shape wants DIMS or NAME=DIMS, DIMS being 1 to 8 sizes from 1 with at most 2^34 "
                             "elements, such as 1000000, 64,128 or b=128; got",
                             value);
    int rc = set_shape(cmd, spec, ndim, dims, 0);
    if (rc) return rc;
  } else { /* --dtype */
    cli_input_spec_t* spec = spec_of(cmd, option, value, in, &rest);
    uj_dtype_t dt;
    if (!spec) return 2;
    if (!parse_dtype(rest, &dt)) return cli_usage_error(cmd, "--dtype wants f32, f64, bf16 or f16, plain or as NAME=DTYPE, got", value);
    int rc = set_dtype(cmd, spec, dt);
    if (rc) return rc;
  }
  in->specialized = 1;
  return 0;
}

/* The index of input name (len bytes) in p, or -1. */
static int input_index(const uj_program_t* p, const char* name, int len) {
  for (int i = 0; i < uj_program_io_count(p, 0); i++) {
    const char* n = uj_program_io_name(p, 0, i);
    if ((int)strlen(n) == len && strncmp(n, name, (size_t)len) == 0) return i;
  }
  return -1;
}

int cli_check_input_names(const char* cmd, const uj_program_t* p, const cli_inputs_t* in) {
  for (int k = 0; k < in->named_count; k++) {
    const cli_input_spec_t* s = &in->named[k];
    if (input_index(p, s->name, s->name_len) >= 0) continue;
    const char* option = s->is_scalar ? "--scalar" : s->has_shape ? "--shape" : "--dtype";
    fprintf(stderr, "uopjit %s: %s names \"%.*s\", which is not an input of the program (inputs:", cmd, option,
            s->name_len, s->name);
    for (int i = 0; i < uj_program_io_count(p, 0); i++) fprintf(stderr, " %s", uj_program_io_name(p, 0, i));
    fprintf(stderr, ")\nsee `uopjit %s --help`\n", cmd);
    return 2;
  }
  return 0;
}

int cli_resolve_inputs(const char* cmd, const uj_program_t* p, const cli_inputs_t* in, cli_input_t* out) {
  for (int i = 0; i < uj_program_io_count(p, 0); i++) {
    const char* name = uj_program_io_name(p, 0, i);
    const cli_input_spec_t* named = NULL;
    for (int k = 0; k < in->named_count && !named; k++)
      if (in->named[k].name_len == (int)strlen(name) && strncmp(in->named[k].name, name, strlen(name)) == 0)
        named = &in->named[k];
    uj_dtype_t declared;
    int has_declared = uj_program_input_dtype(p, i, &declared);
    if (named && named->has_dtype && has_declared && named->dtype != declared) {
      char what[160];
      snprintf(what, sizeof what, "conflicting dtypes for input %s: the program declares %s: %s, --dtype says %s", name,
               name, uj_dtype_name(declared), uj_dtype_name(named->dtype));
      return cli_usage_error(cmd, what, NULL);
    }
    cli_input_t* t = &out[i];
    memset(t, 0, sizeof *t);
    t->dtype = named && named->has_dtype ? named->dtype : has_declared ? declared : in->all.dtype;
    const cli_input_spec_t* shape = named && named->has_shape ? named : &in->all;
    t->ndim = shape->is_scalar ? 0 : shape->ndim;
    memcpy(t->dims, shape->dims, sizeof(int64_t) * (size_t)t->ndim);
  }
  return 0;
}
