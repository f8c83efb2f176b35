/* tests/test_index.c: the index-expression parser (ir/index.c): every
 * construct of the grammar, precedence and associativity, [=] assertions and
 * their columns, every error message with its column, the length and depth
 * limits, and a randomized print/parse round trip through ir_print. */
#include "../ir/ir.h"
#include "harness.h"

static rt_arena_t arena;

static ir_ix_t* parse(const char* text) {
  ir_ix_t* ix = NULL;
  uj_status_t s = ir_ix_parse(&arena, text, &ix, NULL, NULL);
  if (s != UJ_OK) {
    printf("  unexpected error for \"%s\": %s\n", text, uj_last_error());
    return NULL;
  }
  return ix;
}

/* Checks that text fails with UJ_ERR_PARSE, quoting the text and naming the
 * column and the reason. */
static int parse_fails(const char* text, int column, const char* what) {
  ir_ix_t* sentinel = (ir_ix_t*)&arena; /* any non-NULL value: must stay untouched */
  ir_ix_t* ix = sentinel;
  ir_ix_assertion_t asserts[IR_IX_MAX_ASSERTIONS];
  int nasserts = 0;
  uj_status_t s = ir_ix_parse(&arena, text, &ix, asserts, &nasserts);
  char expected[512];
  snprintf(expected, sizeof expected, "index expression \"%s\" at column %d: %s", text, column, what);
  int ok = s == UJ_ERR_PARSE && ix == sentinel && nasserts == 0 && !strcmp(uj_last_error(), expected);
  if (!ok) printf("  got status %d, \"%s\"\n  want \"%s\"\n", (int)s, uj_last_error(), expected);
  return ok;
}

static int is_kind(const ir_ix_t* ix, ir_ix_kind_t kind) { return ix && ix->kind == kind; }
static int is_const(const ir_ix_t* ix, int64_t v) { return is_kind(ix, IR_IX_CONST) && ix->value == v; }
static int is_loop(const ir_ix_t* ix, int id) { return is_kind(ix, IR_IX_LOOP) && ix->id == id; }
static int is_dim(const ir_ix_t* ix, int id, int axis) {
  return is_kind(ix, IR_IX_DIM) && ix->id == id && ix->axis == axis;
}

TEST(parse_operands) {
  CHECK(is_const(parse("42"), 42));
  CHECK(is_const(parse("0"), 0));
  CHECK(is_const(parse("9223372036854775807"), INT64_MAX));
  CHECK(is_loop(parse("i0"), 0));
  CHECK(is_loop(parse("i12"), 12));
  CHECK(is_dim(parse("dA0"), 0, 0));
  CHECK(is_dim(parse("dC12"), 2, 12));
  CHECK(is_dim(parse("dZ3"), 25, 3));
  ir_ix_t* p = parse("$kh");
  CHECK(is_kind(p, IR_IX_PARAM) && p->id == -1 && p->name && !strcmp(p->name, "kh"));
  p = parse("$_stride2");
  CHECK(is_kind(p, IR_IX_PARAM) && p->name && !strcmp(p->name, "_stride2"));
  /* the name stops at the first character that cannot continue it */
  p = parse("$n+1");
  CHECK(is_kind(p, IR_IX_ADD) && is_kind(p->a, IR_IX_PARAM) && !strcmp(p->a->name, "n"));
}

TEST(parse_precedence_and_associativity) {
  ir_ix_t* x = parse("i0 + i1 * 2");
  CHECK(is_kind(x, IR_IX_ADD) && is_loop(x->a, 0) && is_kind(x->b, IR_IX_MUL) && is_loop(x->b->a, 1) &&
        is_const(x->b->b, 2));
  x = parse("i0 * 2 + i1");
  CHECK(is_kind(x, IR_IX_ADD) && is_kind(x->a, IR_IX_MUL) && is_loop(x->b, 1));
  x = parse("i0 - i1 - i2");
  CHECK(is_kind(x, IR_IX_SUB) && is_kind(x->a, IR_IX_SUB) && is_loop(x->a->a, 0) && is_loop(x->a->b, 1) &&
        is_loop(x->b, 2));
  x = parse("i0 / 2 * 3");
  CHECK(is_kind(x, IR_IX_MUL) && is_kind(x->a, IR_IX_DIV) && is_const(x->b, 3));
  x = parse("i0 % 4 / 2");
  CHECK(is_kind(x, IR_IX_DIV) && is_kind(x->a, IR_IX_MOD) && is_const(x->a->b, 4));
  x = parse("i0 - i1 + i2");
  CHECK(is_kind(x, IR_IX_ADD) && is_kind(x->a, IR_IX_SUB));
  x = parse("(i0 + 1) * 2");
  CHECK(is_kind(x, IR_IX_MUL) && is_kind(x->a, IR_IX_ADD) && is_const(x->b, 2));
  x = parse("i0 - (i1 - 1)");
  CHECK(is_kind(x, IR_IX_SUB) && is_loop(x->a, 0) && is_kind(x->b, IR_IX_SUB));
  x = parse("((i3))");
  CHECK(is_loop(x, 3));
}

TEST(parse_leading_sign) {
  /* a leading '-' negates the whole first term, not just its first factor */
  ir_ix_t* x = parse("-i0*2 + 3");
  CHECK(is_kind(x, IR_IX_ADD) && is_kind(x->a, IR_IX_NEG) && is_kind(x->a->a, IR_IX_MUL) &&
        is_loop(x->a->a->a, 0) && is_const(x->b, 3));
  x = parse("-5");
  CHECK(is_kind(x, IR_IX_NEG) && is_const(x->a, 5));
  CHECK(is_loop(parse("+i4"), 4));
  x = parse("min(-i0, 1)");
  CHECK(is_kind(x, IR_IX_MIN) && is_kind(x->a, IR_IX_NEG));
  x = parse("(-i0) / 2");
  CHECK(is_kind(x, IR_IX_DIV) && is_kind(x->a, IR_IX_NEG));
}

TEST(parse_min_max_and_spaces) {
  ir_ix_t* x = parse("min(i0, 3)");
  CHECK(is_kind(x, IR_IX_MIN) && is_loop(x->a, 0) && is_const(x->b, 3));
  x = parse("max(min(i0, dA0 - 1), 0)");
  CHECK(is_kind(x, IR_IX_MAX) && is_kind(x->a, IR_IX_MIN) && is_kind(x->a->b, IR_IX_SUB) &&
        is_dim(x->a->b->a, 0, 0) && is_const(x->b, 0));
  x = parse(" \tmax ( i1 ,\ti2 ) * 2 ");
  CHECK(is_kind(x, IR_IX_MUL) && is_kind(x->a, IR_IX_MAX) && is_loop(x->a->b, 2));
  x = parse("i0*dA1+i1");
  CHECK(is_kind(x, IR_IX_ADD) && is_kind(x->a, IR_IX_MUL) && is_dim(x->a->b, 0, 1));
}

TEST(parse_assertions) {
  ir_ix_assertion_t as[IR_IX_MAX_ASSERTIONS];
  int n = 0;
  ir_ix_t* x = NULL;
  CHECK(ir_ix_parse(&arena, "dA3[=dB3] + dC1[=dA1]", &x, as, &n) == UJ_OK);
  CHECK(is_kind(x, IR_IX_ADD) && is_dim(x->a, 0, 3) && is_dim(x->b, 2, 1));
  CHECK(n == 2);
  CHECK(is_dim(as[0].dim, 0, 3) && is_dim(as[0].equal_to, 1, 3) && as[0].column == 4);
  CHECK(is_dim(as[1].dim, 2, 1) && is_dim(as[1].equal_to, 0, 1) && as[1].column == 16);
  /* a second parse appends after what the array already holds */
  CHECK(ir_ix_parse(&arena, " dA0 [ = dB2 ]", &x, as, &n) == UJ_OK);
  CHECK(n == 3 && is_dim(x, 0, 0) && is_dim(as[2].equal_to, 1, 2) && as[2].column == 6);
  /* without an array to put them in, assertions are refused rather than lost */
  CHECK(ir_ix_parse(&arena, "dA0[=dB0]", &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "at column 4: [=] assertions are not allowed here") != NULL);
}

TEST(parse_error_messages) {
  CHECK(parse_fails("i0 + ", 6, "expected an operand"));
  CHECK(parse_fails("-", 2, "expected an operand"));
  CHECK(parse_fails("--i0", 2, "expected an operand"));
  CHECK(parse_fails("i0 * )", 6, "expected an operand"));
  CHECK(parse_fails("i0 + x", 6, "unexpected character 'x'"));
  CHECK(parse_fails("i0 @ 1", 4, "unexpected character '@'"));
  CHECK(parse_fails("mx(1, 2)", 1, "unexpected character 'm'"));
  CHECK(parse_fails("(i0 + 1", 8, "expected ')'"));
  CHECK(parse_fails("min(i0, 1", 10, "expected ')'"));
  CHECK(parse_fails("min(i0 3)", 8, "expected ','"));
  CHECK(parse_fails("min i0", 5, "expected '(' after min"));
  CHECK(parse_fails("max", 4, "expected '(' after max"));
  CHECK(parse_fails("99999999999999999999", 1, "integer out of range"));
  CHECK(parse_fails("i0 + 9223372036854775808", 6, "integer out of range"));
  CHECK(parse_fails("i99999999999", 2, "integer out of range"));
  CHECK(parse_fails("i", 2, "expected digits after 'i'"));
  CHECK(parse_fails("i x", 2, "expected digits after 'i'"));
  CHECK(parse_fails("d0", 2, "expected an axis letter A-Z after 'd'"));
  CHECK(parse_fails("i0 + da1", 7, "expected an axis letter A-Z after 'd'"));
  CHECK(parse_fails("dA", 3, "expected digits after dA"));
  CHECK(parse_fails("dBx", 3, "expected digits after dB"));
  CHECK(parse_fails("$", 2, "expected a name after '$'"));
  CHECK(parse_fails("$1a", 2, "expected a name after '$'"));
  CHECK(parse_fails("dA0[dB0]", 5, "expected '=' after '['"));
  CHECK(parse_fails("dA0[=dB0", 9, "expected ']'"));
  CHECK(parse_fails("dA0[=dB0)", 9, "expected ']'"));
  CHECK(parse_fails("dA0[=i0]", 6, "expected a size dXn after '[='"));
  CHECK(parse_fails("dA0[=dB0[=dC0]]", 9, "nested [=] assertion"));
  CHECK(parse_fails("i0 i1", 4, "unexpected trailing text"));
  CHECK(parse_fails("i0)", 3, "unexpected trailing text"));
  CHECK(parse_fails("", 1, "empty expression"));
  CHECK(parse_fails("   ", 4, "empty expression"));
}

TEST(parse_error_escapes_unprintable_bytes) {
  ir_ix_t* x = NULL;
  CHECK(ir_ix_parse(&arena, "i0 + \x01", &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(!strcmp(uj_last_error(),
                "index expression \"i0 + \\x01\" at column 6: unexpected character '\\x01'"));
  CHECK(ir_ix_parse(&arena, " \t", &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(!strcmp(uj_last_error(), "index expression \" \\x09\" at column 3: empty expression"));
  CHECK(ir_ix_parse(&arena, "i0 \"", &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(!strcmp(uj_last_error(), "index expression \"i0 \\\"\" at column 4: unexpected character '\"'"));
}

TEST(parse_too_many_assertions) {
  char text[400] = "";
  for (int k = 0; k <= IR_IX_MAX_ASSERTIONS; k++) strcat(text, k ? "+dA0[=dB0]" : "dA0[=dB0]");
  ir_ix_assertion_t as[IR_IX_MAX_ASSERTIONS];
  int n = 0;
  ir_ix_t* x = NULL;
  CHECK(ir_ix_parse(&arena, text, &x, as, &n) == UJ_ERR_PARSE);
  CHECK(n == 0);
  /* the 17th '[' is at offset 3 + 16 * 10 */
  char want[64];
  snprintf(want, sizeof want, "at column %d: too many [=] assertions", 4 + IR_IX_MAX_ASSERTIONS * 10);
  CHECK(strstr(uj_last_error(), want) != NULL);
  /* exactly the maximum is fine */
  text[strlen(text) - 10] = '\0';
  CHECK(ir_ix_parse(&arena, text, &x, as, &n) == UJ_OK && n == IR_IX_MAX_ASSERTIONS);
}

TEST(parse_limits) {
  /* 64 levels of nesting parse; the 65th is an error at its '(' */
  char text[IR_IX_MAX_LENGTH + 2];
  int d = IR_IX_MAX_DEPTH;
  memset(text, '(', (size_t)d);
  memcpy(text + d, "i0", 2);
  memset(text + d + 2, ')', (size_t)d);
  text[2 * d + 2] = '\0';
  CHECK(is_loop(parse(text), 0));
  memset(text, '(', (size_t)d + 1);
  memcpy(text + d + 1, "i0", 2);
  memset(text + d + 3, ')', (size_t)d + 1);
  text[2 * d + 4] = '\0';
  ir_ix_t* x = NULL;
  CHECK(ir_ix_parse(&arena, text, &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "at column 65: nesting deeper than 64") != NULL);
  /* min/max count as nesting too */
  text[0] = '\0';
  for (int k = 0; k <= d; k++) strcat(text, "min(");
  strcat(text, "i0");
  for (int k = 0; k <= d; k++) strcat(text, ",1)");
  CHECK(ir_ix_parse(&arena, text, &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "nesting deeper than 64") != NULL);

  /* within the length limit but far deeper than allowed: an error, no crash */
  memset(text, '(', IR_IX_MAX_LENGTH);
  text[IR_IX_MAX_LENGTH] = '\0';
  CHECK(ir_ix_parse(&arena, text, &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "nesting deeper than 64") != NULL);
  /* long texts are quoted as a prefix */
  CHECK(strstr(uj_last_error(), "\"((((((((((((((((((((((((((((((((((((((((...\"") != NULL);

  /* 10000 '(' is over the length limit: rejected before any recursion */
  char* huge = malloc(10001);
  memset(huge, '(', 10000);
  huge[10000] = '\0';
  CHECK(ir_ix_parse(&arena, huge, &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "longer than 4096 characters") != NULL);
  CHECK(strstr(uj_last_error(), "...\"") != NULL);
  CHECK(strlen(uj_last_error()) < 200);
  free(huge);

  /* exactly the maximum length is accepted */
  memset(text, ' ', IR_IX_MAX_LENGTH);
  text[0] = '7';
  text[IR_IX_MAX_LENGTH] = '\0';
  CHECK(is_const(parse(text), 7));
  text[IR_IX_MAX_LENGTH] = ' ';
  text[IR_IX_MAX_LENGTH + 1] = '\0';
  CHECK(ir_ix_parse(&arena, text, &x, NULL, NULL) == UJ_ERR_PARSE);

  /* a chain of operators is a loop in the parser but a tree as deep as it
   * is long, which later passes walk recursively (a fuzzer's 1763-byte
   * chain of / and * overflowed the stack of the bounds pass): at most
   * IR_IX_MAX_OPERATIONS operators */
  strcpy(text, "i0");
  for (int k = 0; k < IR_IX_MAX_OPERATIONS; k++) strcat(text, k % 2 ? "*1" : "/7");
  CHECK(parse(text) != NULL);
  strcat(text, "+1");
  CHECK(ir_ix_parse(&arena, text, &x, NULL, NULL) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "more than 256 operations") != NULL);

  CHECK(ir_ix_parse(&arena, NULL, &x, NULL, NULL) == UJ_ERR_INVALID);
  CHECK(ir_ix_parse(NULL, "i0", &x, NULL, NULL) == UJ_ERR_INVALID);
  CHECK(ir_ix_parse(&arena, "i0", NULL, NULL, NULL) == UJ_ERR_INVALID);
}

/* ---- round trip: ir_print's index text parses back to the same tree ---- */

static ir_ix_t* random_ix(ir_func_t* f, uint64_t* rng, int depth) {
  int kind = depth <= 0 ? (int)harness_int(rng, 0, 1) : (int)harness_int(rng, 0, 9);
  switch (kind) {
    case 0: return ir_ix_const(f, harness_int(rng, 0, 20));
    case 1: return ir_ix_loop(f, (int)harness_int(rng, 0, 3));
    case 2: return ir_ix_bin(f, IR_IX_NEG, random_ix(f, rng, depth - 1), NULL);
    default: {
      static const ir_ix_kind_t kinds[] = {IR_IX_ADD, IR_IX_SUB, IR_IX_MUL, IR_IX_DIV,
                                           IR_IX_MOD, IR_IX_MIN, IR_IX_MAX};
      ir_ix_kind_t k = kinds[harness_int(rng, 0, 6)];
      ir_ix_t* a = random_ix(f, rng, depth - 1);
      return ir_ix_bin(f, k, a, random_ix(f, rng, depth - 1));
    }
  }
}

TEST(print_parse_round_trip) {
  uint64_t seed = 20240611;
  HARNESS_SEED(seed);
  uint64_t rng = seed;
  for (int iter = 0; iter < 2000; iter++) {
    ir_func_t* f = ir_func_new();
    int t = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_TEMP, 0);
    ir_ix_t* tree = random_ix(f, &rng, (int)harness_int(&rng, 0, 5));
    f->tensors[t].dims[0] = tree;
    char* text = ir_print(f, NULL, IR_PRINT_CANONICAL);
    CHECK(text != NULL);
    if (!text) {
      ir_func_free(f);
      break;
    }
    /* the tensor line is "  t0 temp f32 [<expr>]" */
    char* open = strchr(text, '[');
    char* close = strrchr(text, ']');
    CHECK(open && close && close > open);
    *close = '\0';
    ir_ix_t* back = NULL;
    uj_status_t s = ir_ix_parse(&f->arena, open + 1, &back, NULL, NULL);
    int same = s == UJ_OK && ir_ix_equal(back, tree);
    CHECK(same);
    if (!same) {
      printf("  text %s: %s\n", open + 1, uj_last_error());
      free(text);
      ir_func_free(f);
      break;
    }
    free(text);
    ir_func_free(f);
  }
}

TEST(arena_release) { rt_arena_release(&arena); }

TEST_MAIN()
