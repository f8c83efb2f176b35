/* lang/parse.c: the expression language, text to syntax tree (DESIGN section 5).
 *
 *   program := stmt { (';' | newline) stmt }          '#' starts a comment
 *   stmt    := name '=' expr | name ':' dtype | (empty)
 *   expr    := or [ ('<' | '<=' | '>' | '>=' | '==' | '!=') or ]
 *   or      := and { '|' and }                          logical, as Python
 *   and     := sum { '&' sum }                            binds them
 *   sum     := term { ('+' | '-') term }
 *   term    := unary { ('*' | '/' | '//' | '%') unary }
 *   unary   := ('-' | '+' | '~') unary | power
 *   power   := atom [ '**' unary ]                      right associative
 *   atom    := number | name | name '(' args ')' | '(' expr ')'
 *
 * Recursive descent, nesting bounded (open_level); names become slots and
 * numbers doubles here, so no source text ever reaches generated code. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

typedef enum { TK_END, TK_SEP, TK_NAME, TK_NUMBER, TK_OP } tk_kind_t;

typedef struct {
  tk_kind_t kind;
  const char* start;
  int len;
  int line, column;
  double number;
} token_t;

typedef struct {
  const char* src;
  const char* pos;
  int line;
  const char* line_start;
  token_t tok;
  pn_program_t* pp;
  int failed;
  int assigned[PARSE_MAX_NAMES];  /* assignments so far, per name */
  int is_input[PARSE_MAX_NAMES];
  /* where each name's dtype hint was given, for the message that refuses
   * a second one (a second hint silently winning would hide a typo) */
  int hint_line[PARSE_MAX_NAMES], hint_column[PARSE_MAX_NAMES];
} parser_t;

static int fail(parser_t* p, int line, int column, const char* fmt, const char* what) {
  if (!p->failed) {
    char msg[900];
    snprintf(msg, sizeof msg, fmt, what);
    rt_error(UJ_ERR_PARSE, "program line %d, column %d: %s", line, column, msg);
  }
  p->failed = 1;
  return 0;
}

/* A printable description of the current token, for messages. */
static const char* describe(const token_t* t, char* buf, size_t n) {
  switch (t->kind) {
    case TK_END: return "the end of the program";
    case TK_SEP: return t->start && *t->start == ';' ? "';'" : "the end of the line";
    default: {
      int len = t->len > 24 ? 24 : t->len;
      snprintf(buf, n, "'%.*s'%s", len, t->start, t->len > 24 ? "..." : "");
      return buf;
    }
  }
}

static int expected(parser_t* p, const char* what) {
  char buf[64], msg[160];
  snprintf(msg, sizeof msg, "expected %s, found %s", what, describe(&p->tok, buf, sizeof buf));
  return fail(p, p->tok.line, p->tok.column, "%s", msg);
}

static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }

int pn_number(const char* s, const char* end, double* value, const char** problem) {
#define AT(q) ((end && (q) >= end) ? 0 : *(q))
  const char* q = s;
  *value = 0;
  *problem = NULL;
  while (is_digit(AT(q))) q++;
  int whole = q > s;
  if (AT(q) == '.') {
    const char* frac = ++q;
    while (is_digit(AT(q))) q++;
    if (!whole && q == frac) return 0;
  } else if (!whole) {
    return 0;
  }
  if ((AT(q) == 'e' || AT(q) == 'E') &&
      (is_digit(AT(q + 1)) || ((AT(q + 1) == '+' || AT(q + 1) == '-') && is_digit(AT(q + 2))))) {
    q += 2;
    while (is_digit(AT(q))) q++;
  }
#undef AT
  char buf[64]; /* strtod needs the number's own end */
  size_t len = (size_t)(q - s);
  if (len >= sizeof buf) {
    *problem = "number too long";
    return (int)len;
  }
  memcpy(buf, s, len);
  buf[len] = 0;
  errno = 0;
  *value = strtod(buf, NULL);
  if (errno == ERANGE && (*value > 1.0 || *value < -1.0)) *problem = "number out of range";
  return (int)len;
}

static void next(parser_t* p) {
  token_t* t = &p->tok;
  for (;;) {
    while (*p->pos == ' ' || *p->pos == '\t' || *p->pos == '\r') p->pos++;
    if (*p->pos != '#') break;
    while (*p->pos && *p->pos != '\n') p->pos++;
  }
  t->start = p->pos;
  t->line = p->line;
  t->column = (int)(p->pos - p->line_start) + 1;
  t->len = 1;
  unsigned char c = (unsigned char)*p->pos;
  if (!c) {
    t->kind = TK_END;
    t->len = 0;
  } else if (c == '\n' || c == ';') {
    t->kind = TK_SEP;
    p->pos++;
    if (c == '\n') {
      p->line++;
      p->line_start = p->pos;
    }
  } else if (is_alpha(c)) {
    t->kind = TK_NAME;
    while (is_alpha(*p->pos) || is_digit(*p->pos)) p->pos++;
    t->len = (int)(p->pos - t->start);
  } else if (is_digit(c) || (c == '.' && is_digit(p->pos[1]))) {
    t->kind = TK_NUMBER;
    const char* problem;
    t->len = pn_number(p->pos, NULL, &t->number, &problem);
    if (problem) fail(p, t->line, t->column, "%s", problem);
    p->pos += t->len;
  } else if (c >= 0x80) {
    char what[32];
    snprintf(what, sizeof what, "byte 0x%02x is not ASCII", c);
    fail(p, t->line, t->column, "%s", what);
    t->kind = TK_END;
  } else {
    static const char* const two[] = {"**", "<=", ">=", "==", "!=", "//"};
    t->kind = TK_OP;
    for (size_t i = 0; i < sizeof two / sizeof *two; i++)
      if (p->pos[0] == two[i][0] && p->pos[1] == two[i][1]) t->len = 2;
    if (t->len == 1 && !strchr("+-*/%&|~()<>=,:", c)) {
      char what[48];
      snprintf(what, sizeof what, (c >= 0x20 && c < 0x7f) ? "unexpected character '%c'" : "unexpected byte 0x%02x", c);
      fail(p, t->line, t->column, "%s", what);
      t->kind = TK_END;
    }
    p->pos += t->len;
  }
}

static int is_op(const parser_t* p, const char* op) {
  return p->tok.kind == TK_OP && p->tok.len == (int)strlen(op) && !strncmp(p->tok.start, op, (size_t)p->tok.len);
}

static int is_name(const parser_t* p, const char* name) {
  return p->tok.kind == TK_NAME && p->tok.len == (int)strlen(name) && !strncmp(p->tok.start, name, (size_t)p->tok.len);
}

/* ---- nodes ---- */

static pn_node_t* node_new(parser_t* p, pn_kind_t kind, int line, int column) {
  pn_node_t* n = rt_arena_alloc(&p->pp->arena, sizeof *n);
  if (!n) {
    if (!p->failed) rt_error(UJ_ERR_OOM, "uj_program_parse: out of memory allocating a syntax node (%zu bytes)", sizeof *n);
    p->failed = 1;
    return NULL;
  }
  n->kind = kind;
  n->line = line;
  n->column = column;
  n->version = -1;
  return n;
}

static pn_node_t* with_args(pn_node_t* n, int nargs, pn_node_t* a, pn_node_t* b) {
  if (!n || !a || (nargs > 1 && !b)) return NULL;
  n->nargs = nargs;
  n->args[0] = a;
  n->args[1] = b;
  return n;
}

static pn_node_t* parse_expr(parser_t* p, int depth);

/* Safety: the source is bounded (PARSE_MAX_SOURCE bytes) and so is the
 * nesting of every expression (PARSE_MAX_NESTING levels), so that deep
 * input is an error naming the line and column of the level past the
 * limit, never a stack overflow. A level is what this parser recurses for.
 * A chain of left-associative binary operators (x + y - z, a * b / c) is no
 * nesting at all: it is read by a loop here, and the builder (build.c)
 * walks its left spine with a loop too, so that a flat sum of 10,000 terms
 * costs no stack. What bounds such a chain is the source's size here and,
 * once built, the pass pipeline's limit on operations (ir/pipeline.c).
 *
 * `depth` below is the number of levels open around the current token: a
 * parenthesis, a call, a unary operator or the exponent of '**' opens one
 * (the parser recurses for each), an operator of a chain does not. 1 when
 * the token at (line, column) may open one more; else the error, naming
 * that token's place. */
static int open_level(parser_t* p, int depth, int line, int column) {
  if (depth < PARSE_MAX_NESTING) return 1;
  char what[160];
  snprintf(what, sizeof what,
           "expression nested deeper than %d levels (each parenthesis, function call, unary '-' or '+' and "
           "'**' opens a level)",
           PARSE_MAX_NESTING);
  return fail(p, line, column, "%s", what);
}

static int name_id(parser_t* p, const token_t* t) {
  pn_program_t* pp = p->pp;
  for (int i = 0; i < pp->nnames; i++)
    if ((int)strlen(pp->names[i]) == t->len && !strncmp(pp->names[i], t->start, (size_t)t->len)) return i;
  if (pp->nnames == PARSE_MAX_NAMES) return fail(p, t->line, t->column, "more than %s distinct names", "256"), -1;
  char* s = rt_arena_alloc(&pp->arena, (size_t)t->len + 1);
  if (!s) return fail(p, t->line, t->column, "%s", "out of memory"), -1;
  memcpy(s, t->start, (size_t)t->len);
  pp->names[pp->nnames] = s;
  return pp->nnames++;
}

typedef struct {
  const char* name;
  pn_func_t func;
  int min_args, max_args;
} func_entry_t;

/* The language's own functions; every unary op of the op table and every
 * binary op called by name (pow, max, atan2, ...) is one too. */
static const func_entry_t functions[] = {
    {"relu", PF_RELU, 1, 1},           {"softplus", PF_SOFTPLUS, 1, 1},     {"clamp", PF_CLAMP, 3, 3},
    {"where", PF_WHERE, 3, 3},         {"ones_like", PF_ONES_LIKE, 1, 1},   {"zeros_like", PF_ZEROS_LIKE, 1, 1},
    {"sum", PF_SUM, 1, 2},             {"mean", PF_MEAN, 1, 2},             {"prod", PF_PROD, 1, 2},
    {"amax", PF_AMAX, 1, 2},           {"amin", PF_AMIN, 1, 2},
};

static int is_reduction(pn_func_t f) {
  return f == PF_SUM || f == PF_MEAN || f == PF_PROD || f == PF_AMAX || f == PF_AMIN;
}

/* The function called name, with its op for a table op; 0 when none is. */
static int find_function(const token_t* name, func_entry_t* fe, int* op) {
  size_t len = (size_t)name->len;
  *op = -1;
  for (size_t i = 0; i < sizeof functions / sizeof *functions; i++)
    if (strlen(functions[i].name) == len && !strncmp(functions[i].name, name->start, len)) return *fe = functions[i], 1;
  if ((*op = ir_unary_find(name->start, len)) >= 0 && *op != UJ_UNARY_NEG)
    return *fe = (func_entry_t){ir_unary_name((uj_unary_op_t)*op), PF_UNARY, 1, 1}, 1;
  if ((*op = ir_binary_find_call(name->start, len)) >= 0)
    return *fe = (func_entry_t){ir_binary_name((uj_binary_op_t)*op), PF_BINARY, 2, 2}, 1;
  return 0;
}

/* "unknown function 'name'; the functions are a, b, ...": what a newcomer
 * needs next. */
static void unknown_function(parser_t* p, const token_t* name) {
  char what[768];
  int at = snprintf(what, sizeof what, "unknown function '%.*s'; the functions are", name->len > 24 ? 24 : name->len,
                    name->start);
  int n = 0;
  for (int op = 0; op < UJ_UNARY_COUNT; op++)
    if (op != UJ_UNARY_NEG && at > 0 && at < (int)sizeof what)
      at += snprintf(what + at, sizeof what - (size_t)at, "%s %s", n++ ? "," : "", ir_unary_name((uj_unary_op_t)op));
  for (int op = 0; op < UJ_BINARY_COUNT; op++)
    if (ir_binary_kind((uj_binary_op_t)op) == UJ_OP_CALL && at > 0 && at < (int)sizeof what)
      at += snprintf(what + at, sizeof what - (size_t)at, ", %s", ir_binary_name((uj_binary_op_t)op));
  for (size_t i = 0; i < sizeof functions / sizeof *functions && at > 0 && at < (int)sizeof what; i++)
    at += snprintf(what + at, sizeof what - (size_t)at, ", %s", functions[i].name);
  fail(p, name->line, name->column, "%s", what);
}

/* An axis argument: an integer literal, optionally negative. */
static int parse_axis(parser_t* p, pn_node_t* call) {
  int neg = 0;
  if (is_op(p, "-")) {
    neg = 1;
    next(p);
  }
  /* range first: (int) of a number outside int's range is undefined */
  if (p->tok.kind != TK_NUMBER || !(p->tok.number <= 8) || p->tok.number != (double)(int)p->tok.number)
    return expected(p, "an axis (an integer such as 0 or -1)");
  call->axis = neg ? -(int)p->tok.number : (int)p->tok.number;
  call->has_axis = 1;
  next(p);
  return 1;
}

static pn_node_t* parse_call(parser_t* p, const token_t* name, int depth) {
  func_entry_t entry;
  const func_entry_t* fe = &entry;
  int op;
  if (!find_function(name, &entry, &op)) {
    unknown_function(p, name);
    return NULL;
  }
  pn_node_t* call = node_new(p, PN_CALL, name->line, name->column);
  if (!call) return NULL;
  call->func = fe->func;
  call->op = op;
  next(p); /* '(' */
  for (;;) {
    if (call->nargs == fe->max_args || (call->nargs >= 1 && is_reduction(fe->func))) {
      if (is_reduction(fe->func) && call->nargs == 1 && !call->has_axis) {
        if (!parse_axis(p, call)) return NULL;
      } else {
        char what[64];
        if (is_reduction(fe->func))
          snprintf(what, sizeof what, "')': %s takes at most 2 arguments", fe->name);
        else
          snprintf(what, sizeof what, "')': %s takes %d argument%s", fe->name, fe->max_args, fe->max_args > 1 ? "s" : "");
        expected(p, what);
        return NULL;
      }
    } else {
      pn_node_t* a = parse_expr(p, depth + 1); /* the caller opened the level */
      if (!a) return NULL;
      call->args[call->nargs++] = a;
    }
    if (is_op(p, ")")) break;
    if (!is_op(p, ",")) return expected(p, "',' or ')'"), NULL;
    next(p);
  }
  if (call->nargs < fe->min_args) {
    char what[64];
    snprintf(what, sizeof what, "%s takes %d argument%s", fe->name, fe->min_args, fe->min_args > 1 ? "s" : "");
    fail(p, p->tok.line, p->tok.column, "%s", what);
    return NULL;
  }
  next(p); /* ')' */
  return call;
}

/* A name read before any assignment is an input (in order of first
 * appearance); one read after an assignment reads that assignment's value
 * (its version). */
static pn_node_t* parse_atom(parser_t* p, int depth) {
  token_t t = p->tok;
  if (t.kind == TK_NUMBER) {
    next(p);
    pn_node_t* n = node_new(p, PN_NUMBER, t.line, t.column);
    if (n) n->number = t.number;
    return n;
  }
  if (t.kind == TK_NAME) {
    next(p);
    if (is_op(p, "(")) return open_level(p, depth, t.line, t.column) ? parse_call(p, &t, depth) : NULL;
    int id = name_id(p, &t);
    if (id < 0) return NULL;
    pn_node_t* n = node_new(p, PN_NAME, t.line, t.column);
    if (!n) return NULL;
    n->name = id;
    n->version = p->assigned[id] - 1;
    if (n->version < 0 && !p->is_input[id]) {
      p->is_input[id] = 1;
      p->pp->input_name[p->pp->ninputs++] = id;
    }
    return n;
  }
  if (is_op(p, "(")) {
    if (!open_level(p, depth, t.line, t.column)) return NULL;
    next(p);
    pn_node_t* e = parse_expr(p, depth + 1);
    if (!e) return NULL;
    if (!is_op(p, ")")) return expected(p, "')'"), NULL;
    next(p);
    return e;
  }
  return expected(p, "an expression"), NULL;
}

static pn_node_t* binary(parser_t* p, uj_binary_op_t op, const token_t* at, pn_node_t* a, pn_node_t* b) {
  pn_node_t* n = a && b ? node_new(p, PN_BINARY, at->line, at->column) : NULL;
  if (n) n->op = op;
  return with_args(n, 2, a, b);
}

static pn_node_t* parse_unary(parser_t* p, int depth);

/* x ** y ** z is x ** (y ** z): the exponent is a level of its own (the
 * tree grows to the right there, and the builder recurses into it). */
static pn_node_t* parse_power(parser_t* p, int depth) {
  pn_node_t* a = parse_atom(p, depth);
  if (!a || !is_op(p, "**")) return a;
  token_t at = p->tok;
  if (!open_level(p, depth, at.line, at.column)) return NULL;
  next(p);
  return binary(p, UJ_BINARY_POW, &at, a, parse_unary(p, depth + 1));
}

static pn_node_t* parse_unary(parser_t* p, int depth) {
  if (!is_op(p, "+") && !is_op(p, "-") && !is_op(p, "~")) return parse_power(p, depth);
  token_t at = p->tok;
  if (!open_level(p, depth, at.line, at.column)) return NULL;
  next(p);
  if (at.start[0] == '+') return parse_unary(p, depth + 1);
  pn_node_t* a = parse_unary(p, depth + 1);
  pn_node_t* n = a ? node_new(p, at.start[0] == '-' ? PN_NEG : PN_NOT, at.line, at.column) : NULL;
  return with_args(n, 1, a, NULL);
}

/* Left-associative chains are read by a loop, at the depth of their first
 * operand: a chain is no nesting (open_level says why). The tree
 * grows to the left, and the builder walks that spine with a loop. Each
 * level lists its operators and what they build. */
typedef struct {
  const char* op;
  int code;
} infix_t;

static pn_node_t* parse_level(parser_t* p, int depth, int level);

static const infix_t level_ops[][5] = {
    {{"|", PN_OR}},
    {{"&", PN_AND}},
    {{"+", UJ_BINARY_ADD}, {"-", UJ_BINARY_SUB}},
    {{"*", UJ_BINARY_MUL}, {"//", PN_FLOORDIV}, {"/", UJ_BINARY_DIV}, {"%", UJ_BINARY_MOD}},
};
#define PARSE_LEVELS ((int)(sizeof level_ops / sizeof level_ops[0]))

static pn_node_t* parse_level(parser_t* p, int depth, int level) {
  if (level == PARSE_LEVELS) return parse_unary(p, depth);
  pn_node_t* a = parse_level(p, depth, level + 1);
  for (;;) {
    const infix_t* hit = NULL;
    for (int i = 0; a && i < 5 && level_ops[level][i].op; i++)
      if (is_op(p, level_ops[level][i].op)) hit = &level_ops[level][i];
    if (!hit) return a;
    token_t at = p->tok;
    next(p);
    a = binary(p, (uj_binary_op_t)hit->code, &at, a, parse_level(p, depth, level + 1));
  }
}

static pn_node_t* parse_expr(parser_t* p, int depth) {
  pn_node_t* a = parse_level(p, depth, 0);
  static const struct {
    const char* op;
    uj_binary_op_t bop;
  } cmps[] = {{"<=", UJ_BINARY_LE}, {">=", UJ_BINARY_GE}, {"==", UJ_BINARY_EQ},
              {"!=", UJ_BINARY_NE}, {"<", UJ_BINARY_LT},  {">", UJ_BINARY_GT}};
  for (size_t i = 0; a && i < sizeof cmps / sizeof *cmps; i++) {
    if (!is_op(p, cmps[i].op)) continue;
    token_t at = p->tok;
    next(p);
    return binary(p, cmps[i].bop, &at, a, parse_level(p, depth, 0));
  }
  return a;
}

static int parse_dtype_hint(parser_t* p, int id, const token_t* at) {
  next(p); /* ':' */
  static const struct {
    const char* name;
    uj_dtype_t dtype;
  } dtypes[] = {{"f32", UJ_F32}, {"f64", UJ_F64}, {"i32", UJ_I32}, {"bf16", UJ_BF16}, {"f16", UJ_F16}};
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (is_name(p, dtypes[i].name)) {
      if (p->pp->hinted[id]) {
        /* even the same dtype again: one declaration per name, so that an
         * edit that changes one of two never goes unnoticed */
        char what[160];
        snprintf(what, sizeof what, "a second dtype hint for '%.64s' (the first, %s, is at line %d, column %d)",
                 p->pp->names[id], uj_dtype_name(p->pp->hint[id]), p->hint_line[id], p->hint_column[id]);
        return fail(p, at->line, at->column, "%s", what);
      }
      if (p->assigned[id] || p->is_input[id])
        return fail(p, at->line, at->column, "a dtype hint for '%s' must come before its first use", p->pp->names[id]);
      p->pp->hinted[id] = 1;
      p->pp->hint[id] = dtypes[i].dtype;
      p->hint_line[id] = at->line;
      p->hint_column[id] = at->column;
      next(p);
      return 1;
    }
  return expected(p, "a dtype (f32, f64, i32, bf16 or f16)");
}

/* An assigned name is an output unless it starts with '_'; a name read
 * first and assigned later is both (an in-place update: its reads see the
 * input). */
static int parse_statement(parser_t* p) {
  pn_program_t* pp = p->pp;
  if (p->tok.kind != TK_NAME) return expected(p, "a name at the start of a statement");
  token_t name = p->tok;
  next(p);
  int id = name_id(p, &name);
  if (id < 0) return 0;
  if (is_op(p, ":")) return parse_dtype_hint(p, id, &name);
  if (!is_op(p, "=")) return expected(p, "'=' after the name");
  next(p);
  pn_node_t* value = parse_expr(p, 0);
  if (!value) return 0;
  if (!rt_arena_grow(&pp->arena, (void**)&pp->stmts, &pp->stmt_cap, pp->nstmts + 1, sizeof *pp->stmts))
    return fail(p, name.line, name.column, "%s", "out of memory");
  pp->stmts[pp->nstmts++] = (pn_stmt_t){id, value};
  if (p->assigned[id]++ == 0 && pp->names[id][0] != '_') pp->output_name[pp->noutputs++] = id;
  return 1;
}

static int parse_program(parser_t* p) {
  next(p);
  while (!p->failed && p->tok.kind != TK_END) {
    if (p->tok.kind == TK_SEP) {
      next(p);
      continue;
    }
    if (!parse_statement(p)) return 0;
    if (p->tok.kind != TK_SEP && p->tok.kind != TK_END) return expected(p, "';' or the end of the line");
  }
  if (p->failed) return 0;
  if (p->pp->nstmts == 0) return fail(p, p->line, 1, "%s", "the program has no statements");
  if (p->pp->noutputs == 0)
    return fail(p, p->line, 1, "%s", "the program has no outputs (every assigned name starts with '_')");
  return 1;
}

void pn_program_free(pn_program_t* pp) {
  if (!pp) return;
  for (int i = 0; i < pp->ncached; i++) pn_release(pp->cached[i]);
  pthread_mutex_destroy(&pp->lock);
  rt_arena_release(&pp->arena);
  free(pp);
}

uj_status_t uj_program_parse(const char* source, uj_program_t** out) {
  if (!source || !out) return rt_error(UJ_ERR_INVALID, "uj_program_parse: source and out must not be NULL");
  size_t len = strnlen(source, PARSE_MAX_SOURCE + 1);
  if (len > PARSE_MAX_SOURCE)
    return rt_error(UJ_ERR_PARSE, "program line 1, column 1: the source is longer than %d bytes", PARSE_MAX_SOURCE);
  pn_program_t* pp = calloc(1, sizeof *pp);
  parser_t* p = calloc(1, sizeof *p);
  uj_program_t* prog = calloc(1, sizeof *prog);
  if (!pp || !p || !prog) {
    free(pp);
    free(p);
    free(prog);
    return rt_error(UJ_ERR_OOM, "uj_program_parse: out of memory allocating the parser and program (%zu bytes)",
                    sizeof *pp + sizeof *p + sizeof *prog);
  }
  rt_arena_init(&pp->arena);
  pthread_mutex_init(&pp->lock, NULL);
  p->src = p->pos = p->line_start = source;
  p->line = 1;
  p->pp = pp;
  int ok = parse_program(p);
  free(p);
  if (!ok) {
    pn_program_free(pp);
    free(prog);
    return strstr(uj_last_error(), "out of memory") ? UJ_ERR_OOM : UJ_ERR_PARSE;
  }
  prog->parsed = pp;
  prog->parsed_free = pn_program_free;
  prog->ninputs[UJ_FORWARD] = pp->ninputs;
  prog->noutputs[UJ_FORWARD] = pp->noutputs;
  /* its backward pass: the inputs and each output's gradient, giving
   * each input's gradient (build.c) */
  prog->ninputs[UJ_BACKWARD] = pp->ninputs + pp->noutputs;
  prog->noutputs[UJ_BACKWARD] = pp->ninputs;
  *out = prog;
  return UJ_OK;
}

void pn_program_weak_scalars(uj_program_t* p) {
  if (p && p->parsed) p->parsed->weak_scalars = 1;
}

int uj_program_io_count(const uj_program_t* p, int is_output) {
  if (!p) return -1;
  return is_output ? p->noutputs[UJ_FORWARD] : p->ninputs[UJ_FORWARD];
}

const char* uj_program_io_name(const uj_program_t* p, int is_output, int index) {
  if (!p || !p->parsed || index < 0 || index >= uj_program_io_count(p, is_output)) return NULL;
  return p->parsed->names[is_output ? p->parsed->output_name[index] : p->parsed->input_name[index]];
}

int uj_program_input_dtype(const uj_program_t* p, int index, uj_dtype_t* dtype) {
  if (!p || !p->parsed || index < 0 || index >= uj_program_io_count(p, 0)) return 0;
  int name = p->parsed->input_name[index];
  if (!p->parsed->hinted[name]) return 0;
  if (dtype) *dtype = p->parsed->hint[name];
  return 1;
}
