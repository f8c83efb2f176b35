/* tools/cli_magnitude.c: the magnitude form of an expression-language
 * program, from which `run --check` bounds the rounding error of a
 * reduction.
 *
 * A sum of n terms t_i computed in floating point, in any order, is within
 * (n-1) u / (1 - (n-1) u) * sum |t_i| of the exact sum, u being the unit
 * roundoff (Higham, Accuracy and Stability of Numerical Algorithms, 4.2);
 * a mean divides both sides by n. The program's own result does not give
 * sum |t_i| (the terms of sum(x - 1) cancel), so the magnitude form gives
 * every sum or mean the absolute value of its terms:
 *
 *   y = sum(x*x - 1, -1) / mean(z)   becomes   y = sum(abs(x*x - 1), -1) / mean(abs(z))
 *
 * Run in f64 on the same inputs, drawn from [0.5, 1.5) so that they are
 * their own absolute values, it gives sum |t_i| (or its mean). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* A place to insert text: "abs(" opening an argument, ")" closing it. */
typedef struct {
  size_t at;
  int closes;
} insert_t;

static int by_position(const void* a, const void* b) {
  const insert_t *x = a, *y = b;
  if (x->at != y->at) return x->at < y->at ? -1 : 1;
  return x->closes - y->closes; /* never both at one place in a valid program */
}

/* The end of the argument that starts at source[from]: the offset of the
 * first ',' or ')' at depth 0, skipping comments; strlen when there is
 * none (not in a source that parsed). */
static size_t argument_end(const char* source, size_t from) {
  int depth = 0;
  size_t i = from;
  for (; source[i]; i++) {
    char c = source[i];
    if (c == '#') {
      while (source[i + 1] && source[i + 1] != '\n') i++;
    } else if (c == '(') {
      depth++;
    } else if (c == ')' || c == ',') {
      if (depth == 0) return i;
      if (c == ')') depth--;
    }
  }
  return i;
}

/* The rewrite works on the text, not on a syntax tree the library does not
 * expose: it finds the names sum and mean followed by '(' outside comments
 * and wraps their first argument, which ends at the first ',' or ')' at
 * its own nesting depth. It only runs on a source that parsed, and
 * wrapping an argument in abs( ) keeps any argument an expression, so the
 * result parses too. Inner sums and means are rewritten too, which for
 * inputs of one sign changes nothing. */
char* cli_magnitude_source(const char* source, int* reductions) {
  size_t len = strlen(source), count = 0, cap = 0;
  insert_t* inserts = NULL;
  *reductions = 0;
  for (size_t i = 0; i < len; i++) {
    if (source[i] == '#') {
      while (i + 1 < len && source[i + 1] != '\n') i++;
      continue;
    }
    /* a name starts here when the character before it cannot continue a
     * name or a number ("1e5" is no name e5) */
    if (!is_name_char(source[i]) || (source[i] >= '0' && source[i] <= '9')) continue;
    if (i > 0 && (is_name_char(source[i - 1]) || source[i - 1] == '.')) continue;
    size_t end = i;
    while (end < len && is_name_char(source[end])) end++;
    size_t paren = end;
    while (paren < len && (source[paren] == ' ' || source[paren] == '\t')) paren++;
    int reduces = ((end - i == 3 && strncmp(source + i, "sum", 3) == 0) ||
                   (end - i == 4 && strncmp(source + i, "mean", 4) == 0)) &&
                  paren < len && source[paren] == '(';
    if (reduces) {
      if (count + 2 > cap) {
        cap = cap ? 2 * cap : 16;
        insert_t* grown = realloc(inserts, sizeof *grown * cap);
        if (!grown) {
          free(inserts);
          return NULL;
        }
        inserts = grown;
      }
      inserts[count++] = (insert_t){paren + 1, 0};
      inserts[count++] = (insert_t){argument_end(source, paren + 1), 1};
      (*reductions)++;
    }
    i = end - 1; /* the argument is scanned on: inner calls are rewritten too */
  }
  if (count) qsort(inserts, count, sizeof *inserts, by_position); /* NULL when there are none */
  static const char open[] = "abs(";
  char* out = malloc(len + count / 2 * (sizeof open - 1 + 1) + 1);
  if (out) {
    size_t from = 0, o = 0;
    for (size_t k = 0; k < count; k++) {
      memcpy(out + o, source + from, inserts[k].at - from);
      o += inserts[k].at - from;
      from = inserts[k].at;
      const char* text = inserts[k].closes ? ")" : open;
      memcpy(out + o, text, strlen(text));
      o += strlen(text);
    }
    memcpy(out + o, source + from, len - from + 1);
  }
  free(inserts);
  return out;
}
