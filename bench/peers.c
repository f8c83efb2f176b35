/* bench/peers.c: runs bench/cpu_peers.py, the numpy, numexpr and torch
 * versions of the bench's workloads, inside the bench's run, so that every
 * figure of one comparison comes from one run on one machine state.
 *
 * The interpreter is the first of $UOPJIT_BENCH_PYTHON (when set), python3
 * on the PATH and /usr/bin/python3 that imports numpy: a PATH python3 may be
 * a separate installation without the system's packages. Without one the
 * peers are skipped with a note in the report; the bench never fails for
 * them. The helper checks its own results (see its docstring) and prints
 * tab-separated lines (--tsv), read here; its stderr goes to the terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Whether `python` imports numpy; the path must hold no single quote. */
static int python_has_numpy(const char* python) {
  char command[4200];
  if (strchr(python, '\'') || snprintf(command, sizeof command, "'%s' -c 'import numpy' >/dev/null 2>&1", python) >=
                                  (int)sizeof command)
    return 0;
  return system(command) == 0;
}

static const char* find_python(void) {
  const char* chosen = getenv("UOPJIT_BENCH_PYTHON");
  if (chosen && *chosen) return python_has_numpy(chosen) ? chosen : NULL;
  static const char* const candidates[] = {"python3", "/usr/bin/python3"};
  for (size_t k = 0; k < sizeof candidates / sizeof candidates[0]; k++)
    if (python_has_numpy(candidates[k])) return candidates[k];
  return NULL;
}

/* Splits line at tabs into at most max fields; the count. */
static int split_tabs(char* line, char** fields, int max) {
  int count = 0;
  line[strcspn(line, "\n")] = '\0';
  for (char* field; count < max && (field = strsep(&line, "\t")) != NULL;) fields[count++] = field;
  return count;
}

/* One `row` line's fields after the tag: 0, or -1 when malformed. */
static int parse_row(char** f, peer_row_t* row) {
  char* end[4];
  row->elements = strtoll(f[1], &end[0], 10);
  row->threads = (int)strtol(f[3], &end[1], 10);
  row->ns_per_call = strtod(f[4], &end[2]);
  row->max_error = strtod(f[5], &end[3]);
  row->checked_ok = strcmp(f[6], "ok") == 0;
  if (*end[0] || *end[1] || *end[2] || *end[3] || row->elements < 1 || row->threads < 1 ||
      (!row->checked_ok && strcmp(f[6], "MISMATCH") != 0) || (row->checked_ok && !(row->ns_per_call > 0)))
    return -1;
  snprintf(row->workload, sizeof row->workload, "%s", f[0]);
  snprintf(row->peer, sizeof row->peer, "%s", f[2]);
  return 0;
}

void peers_measure(const char* workloads, const char* elements, int64_t rows, int64_t cols, int samples,
                   const char* threads, peer_results_t* out) {
  memset(out, 0, sizeof *out);
  const char* python = find_python();
  if (!python) {
    const char* chosen = getenv("UOPJIT_BENCH_PYTHON");
    if (chosen && *chosen)
      snprintf(out->note, sizeof out->note, "skipped: UOPJIT_BENCH_PYTHON=%s cannot import numpy", chosen);
    else
      snprintf(out->note, sizeof out->note, "skipped: neither python3 nor /usr/bin/python3 imports numpy");
    return;
  }
  char command[8400];
  char rows_option[64] = "";
  if (rows > 0) snprintf(rows_option, sizeof rows_option, "--rows %lld", (long long)rows);
  if (strchr(BENCH_SOURCE_DIR, '\'') || strspn(workloads, "abcdefghijklmnopqrstuvwxyz,") != strlen(workloads) ||
      strspn(elements, "0123456789,") != strlen(elements) || strspn(threads, "0123456789,") != strlen(threads) ||
      snprintf(command, sizeof command,
               "'%s' '%s/cpu_peers.py' --tsv --workloads %s --elements %s %s --cols %lld --samples %d --threads %s",
               python, BENCH_SOURCE_DIR, workloads, elements, rows_option, (long long)cols, samples,
               threads) >= (int)sizeof command) {
    snprintf(out->note, sizeof out->note,
             "skipped: the path of bench/, the workloads, sizes or threads cannot be put in a command line");
    return;
  }
  fflush(stdout);
  FILE* helper = popen(command, "r");
  if (!helper) {
    snprintf(out->note, sizeof out->note, "skipped: cannot start %s", python);
    return;
  }
  out->ran = 1;
  char line[1024];
  int malformed = 0;
  while (fgets(line, sizeof line, helper)) {
    char* f[8];
    int count = split_tabs(line, f, 8);
    if (count == 2 && strcmp(f[0], "note") == 0) {
      size_t used = strlen(out->note);
      snprintf(out->note + used, sizeof out->note - used, "%s%s", used ? "; " : "", f[1]);
    } else if (count == 8 && strcmp(f[0], "row") == 0 && out->nrows < PEERS_MAX_ROWS &&
               parse_row(f + 1, &out->rows[out->nrows]) == 0) {
      out->nrows++;
    } else {
      malformed++;
    }
  }
  int status = pclose(helper);
  size_t used = strlen(out->note);
  if (status != 0)
    snprintf(out->note + used, sizeof out->note - used, "%scpu_peers.py failed (status %d)", used ? "; " : "", status);
  else if (malformed)
    snprintf(out->note + used, sizeof out->note - used, "%s%d lines of cpu_peers.py not understood",
             used ? "; " : "", malformed);
}

int peers_find(const peer_results_t* peers, const char* workload, int64_t elements, int from) {
  for (int k = from < 0 ? 0 : from; k < peers->nrows; k++)
    if (strcmp(peers->rows[k].workload, workload) == 0 && peers->rows[k].elements == elements) return k;
  return -1;
}
