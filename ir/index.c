/* ir/index.c: the parser of index expressions (docs/DESIGN.md section 4).
 *
 *   expr   := ['+' | '-'] term { ('+' | '-') term }   -- a leading '-' negates the first term
 *   term   := factor { ('*' | '/' | '%') factor }
 *   factor := integer | 'i' digits | dim | '$' name | '(' expr ')'
 *           | ('min' | 'max') '(' expr ',' expr ')'
 *   dim    := 'd' LETTER digits [ '[' '=' dim ']' ]
 *
 * Algorithm: recursive descent with one function per rule; the repetitions
 * are loops building left-associative trees, so only parentheses and
 * min/max recurse. Depth, operators and length are capped, so that hostile
 * input is an error, never a stack overflow. Spaces and tabs are skipped
 * between tokens ("i 0" is an error). The first error wins, with its 1-based
 * column; assertions reach the caller only on success, so a failed parse
 * leaves the caller's buffers untouched. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"

/* How much of the text an error message quotes when the text is long: the
 * column still locates the fault, and the message stays within a line. */
#define QUOTE_FULL_LIMIT 200
#define QUOTE_PREFIX 40

typedef struct {
  rt_arena_t* arena;
  const char* text;
  size_t len;
  size_t pos;
  int depth;
  int operations;     /* binary nodes made so far, at most IR_IX_MAX_OPERATIONS */
  uj_status_t status; /* UJ_OK until the first error */
  /* assertion columns are kept here until the parse has succeeded */
  ir_ix_assertion_t asserts[IR_IX_MAX_ASSERTIONS];
  int nasserts;
  int assert_room;    /* how many more the caller's array can take */
  int accept_asserts; /* the caller passed somewhere to put them */
} parser_t;

/* Writes text[0..n) into out as a readable quoted body: printable bytes as
 * they are, '"' and '\\' escaped, anything else as \xNN. */
static void quote(char* out, size_t out_size, const char* text, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 5 < out_size; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if (c >= 0x20 && c < 0x7f) {
      out[o++] = (char)c;
    } else {
      o += (size_t)snprintf(out + o, out_size - o, "\\x%02x", c);
    }
  }
  out[o] = '\0';
}

/* The quoted form of the whole text, shortened to a prefix and "..." when it
 * is too long to repeat in a message. */
static void quote_text(char* out, size_t out_size, const char* text, size_t len) {
  if (len <= QUOTE_FULL_LIMIT) {
    quote(out, out_size, text, len);
  } else {
    quote(out, out_size - 4, text, QUOTE_PREFIX);
    strcat(out, "...");
  }
}

/* Records the first error, at byte offset `at` of the text. */
static void fail_at(parser_t* p, size_t at, const char* what) {
  if (p->status != UJ_OK) return;
  char quoted[QUOTE_FULL_LIMIT * 4 + 8];
  quote_text(quoted, sizeof quoted, p->text, p->len);
  p->status = rt_error(UJ_ERR_PARSE, "index expression \"%s\" at column %zu: %s", quoted, at + 1,
                       what);
}

static void fail_oom(parser_t* p) {
  if (p->status != UJ_OK) return;
  p->status = rt_error(UJ_ERR_OOM, "index expression: out of memory allocating a node (%zu bytes)", sizeof(ir_ix_t));
}

static void skip_spaces(parser_t* p) {
  while (p->pos < p->len && (p->text[p->pos] == ' ' || p->text[p->pos] == '\t')) p->pos++;
}

static char peek(const parser_t* p) { return p->pos < p->len ? p->text[p->pos] : '\0'; }

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* Characters that can begin some token of the grammar. Anything else is
 * reported as an unexpected character wherever it turns up, which names the
 * culprit better than "expected an operand". */
static int starts_token(char c) {
  return is_digit(c) || (c != '\0' && strchr("idm$()+-*/%,[]=", c) != NULL);
}

/* Reports the character at the current position: an unknown one by name,
 * a known one (or the end of the text) with `expected`. */
static void fail_here(parser_t* p, const char* expected) {
  char c = peek(p);
  if (p->pos < p->len && !starts_token(c)) {
    char what[64], shown[8];
    quote(shown, sizeof shown, &p->text[p->pos], 1);
    /* a quote mark reads better bare inside single quotes */
    snprintf(what, sizeof what, "unexpected character '%s'", c == '"' ? "\"" : shown);
    fail_at(p, p->pos, what);
  } else {
    fail_at(p, p->pos, expected);
  }
}

static ir_ix_t* node(parser_t* p, ir_ix_kind_t kind) {
  ir_ix_t* n = rt_arena_alloc(p->arena, sizeof *n);
  if (!n) {
    fail_oom(p);
    return NULL;
  }
  n->kind = kind;
  return n;
}

/* An operator's node. Chains such as a/b/c/... are loops in the parser but
 * trees as deep as they are long, which every pass walks recursively: the
 * count of operators bounds that depth as IR_IX_MAX_DEPTH bounds nesting. */
static ir_ix_t* binary(parser_t* p, ir_ix_kind_t kind, ir_ix_t* a, ir_ix_t* b) {
  if (++p->operations > IR_IX_MAX_OPERATIONS) {
    char what[48];
    snprintf(what, sizeof what, "more than %d operations", IR_IX_MAX_OPERATIONS);
    fail_at(p, p->pos, what);
    return NULL;
  }
  ir_ix_t* n = node(p, kind);
  if (n) {
    n->a = a;
    n->b = b;
  }
  return n;
}

/* Reads a run of decimal digits at the current position into *out (at most
 * `max`). 0 when there is no digit; -1 (error recorded) when too large. */
static int read_digits(parser_t* p, int64_t max, int64_t* out) {
  size_t start = p->pos;
  int64_t v = 0;
  while (is_digit(peek(p))) {
    int d = peek(p) - '0';
    if (v > (max - d) / 10) {
      fail_at(p, start, "integer out of range");
      return -1;
    }
    v = v * 10 + d;
    p->pos++;
  }
  if (p->pos == start) return 0;
  *out = v;
  return 1;
}

/* dim := 'd' LETTER digits [ '[' '=' dim ']' ], at a 'd'. An assertion is
 * allowed only when allow_assert (not inside another assertion). */
static ir_ix_t* parse_dim(parser_t* p, int allow_assert) {
  p->pos++; /* 'd' */
  char letter = peek(p);
  if (!(letter >= 'A' && letter <= 'Z')) {
    fail_at(p, p->pos, "expected an axis letter A-Z after 'd'");
    return NULL;
  }
  p->pos++;
  int64_t axis = 0;
  int got = read_digits(p, INT_MAX, &axis);
  if (got <= 0) {
    if (got == 0) {
      char what[40];
      snprintf(what, sizeof what, "expected digits after d%c", letter);
      fail_at(p, p->pos, what);
    }
    return NULL;
  }
  ir_ix_t* dim = node(p, IR_IX_DIM);
  if (!dim) return NULL;
  dim->id = letter - 'A';
  dim->axis = (int)axis;

  skip_spaces(p);
  if (peek(p) != '[') return dim;
  size_t bracket = p->pos;
  if (!allow_assert) {
    fail_at(p, bracket, "nested [=] assertion");
    return NULL;
  }
  p->pos++;
  skip_spaces(p);
  if (peek(p) != '=') {
    fail_at(p, p->pos, "expected '=' after '['");
    return NULL;
  }
  p->pos++;
  skip_spaces(p);
  if (peek(p) != 'd') {
    fail_here(p, "expected a size dXn after '[='");
    return NULL;
  }
  ir_ix_t* other = parse_dim(p, 0);
  if (!other) return NULL;
  skip_spaces(p);
  if (peek(p) != ']') {
    fail_here(p, "expected ']'");
    return NULL;
  }
  p->pos++;
  if (!p->accept_asserts) {
    fail_at(p, bracket, "[=] assertions are not allowed here");
    return NULL;
  }
  if (p->nasserts >= p->assert_room) {
    fail_at(p, bracket, "too many [=] assertions");
    return NULL;
  }
  ir_ix_assertion_t* a = &p->asserts[p->nasserts++];
  a->dim = dim;
  a->equal_to = other;
  a->column = (int)bracket + 1;
  return dim;
}

static ir_ix_t* parse_expr(parser_t* p);

/* Consumes `c` after optional spaces or records `expected`. */
static int expect(parser_t* p, char c, const char* expected) {
  skip_spaces(p);
  if (peek(p) != c) {
    fail_here(p, expected);
    return 0;
  }
  p->pos++;
  return 1;
}

/* Entering a parenthesis or min/max: counts the nesting, which bounds the
 * recursion. */
static int enter(parser_t* p, size_t at) {
  if (++p->depth > IR_IX_MAX_DEPTH) {
    char what[40];
    snprintf(what, sizeof what, "nesting deeper than %d", IR_IX_MAX_DEPTH);
    fail_at(p, at, what);
    return 0;
  }
  return 1;
}

/* ('min' | 'max') '(' expr ',' expr ')', at the 'm'. */
static ir_ix_t* parse_min_max(parser_t* p) {
  size_t at = p->pos;
  int is_min = p->len - p->pos >= 3 && !strncmp(&p->text[p->pos], "min", 3);
  int is_max = p->len - p->pos >= 3 && !strncmp(&p->text[p->pos], "max", 3);
  if (!is_min && !is_max) {
    fail_at(p, at, "unexpected character 'm'");
    return NULL;
  }
  p->pos += 3;
  if (!expect(p, '(', is_min ? "expected '(' after min" : "expected '(' after max")) return NULL;
  if (!enter(p, at)) return NULL;
  ir_ix_t* a = parse_expr(p);
  if (!a || !expect(p, ',', "expected ','")) return NULL;
  ir_ix_t* b = parse_expr(p);
  if (!b || !expect(p, ')', "expected ')'")) return NULL;
  p->depth--;
  return binary(p, is_min ? IR_IX_MIN : IR_IX_MAX, a, b);
}

static ir_ix_t* parse_factor(parser_t* p) {
  skip_spaces(p);
  char c = peek(p);
  if (is_digit(c)) {
    int64_t v = 0;
    if (read_digits(p, INT64_MAX, &v) < 0) return NULL;
    ir_ix_t* n = node(p, IR_IX_CONST);
    if (n) n->value = v;
    return n;
  }
  if (c == 'i') {
    p->pos++;
    int64_t id = 0;
    int got = read_digits(p, INT_MAX, &id);
    if (got == 0) fail_at(p, p->pos, "expected digits after 'i'");
    if (got <= 0) return NULL;
    ir_ix_t* n = node(p, IR_IX_LOOP);
    if (n) n->id = (int)id;
    return n;
  }
  if (c == 'd') return parse_dim(p, 1);
  if (c == 'm') return parse_min_max(p);
  if (c == '$') {
    p->pos++;
    size_t start = p->pos;
    if (!is_name_start(peek(p))) {
      fail_at(p, p->pos, "expected a name after '$'");
      return NULL;
    }
    while (is_name_char(peek(p))) p->pos++;
    ir_ix_t* n = node(p, IR_IX_PARAM);
    if (!n) return NULL;
    n->id = -1;
    char* name = rt_arena_alloc(p->arena, p->pos - start + 1);
    if (!name) {
      fail_oom(p);
      return NULL;
    }
    memcpy(name, &p->text[start], p->pos - start);
    n->name = name;
    return n;
  }
  if (c == '(') {
    if (!enter(p, p->pos)) return NULL;
    p->pos++;
    ir_ix_t* inner = parse_expr(p);
    if (!inner || !expect(p, ')', "expected ')'")) return NULL;
    p->depth--;
    return inner;
  }
  fail_here(p, "expected an operand");
  return NULL;
}

static ir_ix_t* parse_term(parser_t* p) {
  ir_ix_t* left = parse_factor(p);
  while (left) {
    skip_spaces(p);
    char c = peek(p);
    ir_ix_kind_t kind = c == '*' ? IR_IX_MUL : c == '/' ? IR_IX_DIV : c == '%' ? IR_IX_MOD : IR_IX_CONST;
    if (kind == IR_IX_CONST) break;
    p->pos++;
    ir_ix_t* right = parse_factor(p);
    if (!right) return NULL;
    left = binary(p, kind, left, right);
  }
  return left;
}

static ir_ix_t* parse_expr(parser_t* p) {
  skip_spaces(p);
  char sign = peek(p);
  if (sign == '+' || sign == '-') p->pos++;
  ir_ix_t* left = parse_term(p);
  if (left && sign == '-') {
    ir_ix_t* neg = node(p, IR_IX_NEG);
    if (neg) neg->a = left;
    left = neg;
  }
  while (left) {
    skip_spaces(p);
    char c = peek(p);
    if (c != '+' && c != '-') break;
    p->pos++;
    ir_ix_t* right = parse_term(p);
    if (!right) return NULL;
    left = binary(p, c == '+' ? IR_IX_ADD : IR_IX_SUB, left, right);
  }
  return left;
}

uj_status_t ir_ix_parse(rt_arena_t* arena, const char* text, ir_ix_t** out,
                        ir_ix_assertion_t* asserts, int* nasserts) {
  if (!text) return rt_error(UJ_ERR_INVALID, "index expression: text is NULL");
  if (!arena || !out) return rt_error(UJ_ERR_INVALID, "index expression: arena or result is NULL");
  /* *nasserts counts what the array already holds; the parse appends. */
  int have = (asserts && nasserts) ? *nasserts : 0;
  if (have < 0 || have > IR_IX_MAX_ASSERTIONS)
    return rt_error(UJ_ERR_INVALID, "index expression: assertion count %d out of range", have);

  static parser_t zero;
  parser_t p = zero;
  p.arena = arena;
  p.text = text;
  /* a bounded strlen: an unterminated giant text is not walked to its end */
  while (p.len <= IR_IX_MAX_LENGTH && text[p.len]) p.len++;
  p.accept_asserts = asserts && nasserts;
  p.assert_room = p.accept_asserts ? IR_IX_MAX_ASSERTIONS - have : 0;

  if (p.len > IR_IX_MAX_LENGTH) {
    char what[64];
    snprintf(what, sizeof what, "longer than %d characters", IR_IX_MAX_LENGTH);
    fail_at(&p, IR_IX_MAX_LENGTH, what);
    return p.status;
  }
  skip_spaces(&p);
  if (p.pos == p.len) {
    fail_at(&p, p.pos, "empty expression");
    return p.status;
  }
  p.pos = 0;
  ir_ix_t* root = parse_expr(&p);
  if (root) {
    skip_spaces(&p);
    if (p.pos < p.len) fail_here(&p, "unexpected trailing text");
  }
  if (p.status != UJ_OK) return p.status;

  for (int k = 0; k < p.nasserts; k++) asserts[have + k] = p.asserts[k];
  if (nasserts && asserts) *nasserts = have + p.nasserts;
  *out = root;
  return UJ_OK;
}
