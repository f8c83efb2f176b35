/* bench/util.c: the benchmark's small helpers: a monotonic clock in
 * nanoseconds, medians (every figure the bench prints is a median of
 * repeated measurements, machines being noisy), the timing of a call as the
 * median of samples of back-to-back calls (so that short calls are not lost
 * in the clock's resolution), two calls timed in alternation and the ratio
 * of their fastest batches, seeded input values, the CPU's model and the
 * load average, reading the program files and the private directories that
 * hold the kernel cache while it runs. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double bench_median(const double* values, int count) {
  if (count <= 0) return NAN;
  double* sorted = malloc((size_t)count * sizeof *sorted);
  if (!sorted) return NAN;
  memcpy(sorted, values, (size_t)count * sizeof *sorted);
  qsort(sorted, (size_t)count, sizeof *sorted, compare_doubles);
  double m = count % 2 ? sorted[count / 2] : 0.5 * (sorted[count / 2 - 1] + sorted[count / 2]);
  free(sorted);
  return m;
}

void bench_cpu_model(char* out, size_t size) {
  snprintf(out, size, "unknown CPU");
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char* colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !colon) continue;
    colon += 1 + strspn(colon + 1, " \t");
    colon[strcspn(colon, "\n")] = '\0';
    snprintf(out, size, "%s", colon);
    break;
  }
  fclose(f);
}

int bench_load_average(char* out, size_t size) {
  snprintf(out, size, "unknown");
  FILE* f = fopen("/proc/loadavg", "r");
  if (!f) return -1;
  char first[32];
  int read = fscanf(f, "%31s", first) == 1;
  if (read) snprintf(out, size, "%s", first);
  fclose(f);
  return read;
}

char* bench_read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "bench: cannot open %s: %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 256, len = 0;
  char* text = malloc(cap);
  while (text) {
    len += fread(text + len, 1, cap - len - 1, f);
    if (len < cap - 1) break;
    char* bigger = realloc(text, cap * 2);
    if (!bigger) {
      free(text);
      text = NULL;
      break;
    }
    text = bigger;
    cap *= 2;
  }
  int failed = ferror(f);
  fclose(f);
  if (!text || failed) {
    fprintf(stderr, "bench: cannot read %s\n", path);
    free(text);
    return NULL;
  }
  while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\t' ||
                     text[len - 1] == '\r'))
    len--;
  text[len] = '\0';
  return text;
}

char* bench_make_dir(const char* parent, const char* prefix) {
  size_t size = strlen(parent) + strlen(prefix) + 16;
  char* path = malloc(size);
  if (!path) return NULL;
  snprintf(path, size, "%s/%s-XXXXXX", parent, prefix);
  if (!mkdtemp(path)) {
    fprintf(stderr, "bench: cannot create a directory under %s: %s\n", parent, strerror(errno));
    free(path);
    return NULL;
  }
  return path;
}

void bench_remove_dir(const char* dir) {
  DIR* d = opendir(dir);
  if (d) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      size_t size = strlen(dir) + strlen(e->d_name) + 2;
      char* path = malloc(size);
      if (!path) break;
      snprintf(path, size, "%s/%s", dir, e->d_name);
      unlink(path);
      free(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

int bench_time_stats(bench_call_fn call, void* arg, int samples, double min_sample_ns, bench_timing_t* out) {
  enum { MAX_SAMPLES = 64 };
  if (samples > MAX_SAMPLES) samples = MAX_SAMPLES;
  if (samples < 1) samples = 1;
  double start = bench_now_ns();
  if (call(arg) != 0) return -1;
  double one_call = bench_now_ns() - start;
  int64_t calls = one_call >= min_sample_ns ? 1 : (int64_t)ceil(min_sample_ns / fmax(one_call, 1.0));
  double per_call[MAX_SAMPLES];
  int first = 0;
  if (calls == 1) per_call[first++] = one_call; /* a slow call is a sample of its own */
  for (int s = first; s < samples; s++) {
    start = bench_now_ns();
    for (int64_t c = 0; c < calls; c++)
      if (call(arg) != 0) return -1;
    per_call[s] = (bench_now_ns() - start) / (double)calls;
  }
  out->samples = samples;
  out->median_ns = bench_median(per_call, samples);
  out->min_ns = out->max_ns = per_call[0];
  for (int s = 1; s < samples; s++) out->min_ns = fmin(out->min_ns, per_call[s]), out->max_ns = fmax(out->max_ns, per_call[s]);
  return 0;
}

/* How many calls make a sample of at least min_sample_ns, from one call
 * that took one_call_ns. */
static int64_t calls_per_sample(double one_call_ns, double min_sample_ns) {
  return one_call_ns >= min_sample_ns ? 1 : (int64_t)ceil(min_sample_ns / fmax(one_call_ns, 1.0));
}

static void timing_of(const double* per_call, int samples, bench_timing_t* out) {
  out->samples = samples;
  out->median_ns = bench_median(per_call, samples);
  out->min_ns = out->max_ns = per_call[0];
  for (int s = 1; s < samples; s++) out->min_ns = fmin(out->min_ns, per_call[s]), out->max_ns = fmax(out->max_ns, per_call[s]);
}

/* Round by round: a batch of `call`, then one of `alongside`, each batch
 * as many back-to-back calls as fill min_sample_ns, so that both see the
 * same machine (the same other processes, clock and cache state) and their
 * ratio does not drift with the load between two separate runs. The ratio
 * is alongside's fastest batch over call's fastest batch: preemption,
 * another process's share of the cores or of the memory bus only ever add
 * time to a batch, never take it away, so the minimum over the rounds of
 * each side is the standard robust estimator of its undisturbed time,
 * where a median of per-round ratios still moves when one of only a few
 * rounds has one side held back (a quick run printed 176% so). The rounds
 * alternate so that a disturbance lasting longer than a round reaches
 * both sides' batches alike. Each call is made once first to size its
 * batches. */
int bench_time_alternating(bench_call_fn call, void* arg, bench_call_fn alongside, void* alongside_arg, int rounds,
                           double min_sample_ns, bench_timing_t* out, bench_timing_t* alongside_out,
                           double* fastest_ratio) {
  enum { MAX_ROUNDS = 64 };
  if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
  if (rounds < 1) rounds = 1;
  bench_call_fn calls[2] = {call, alongside};
  void* args[2] = {arg, alongside_arg};
  int64_t count[2];
  for (int k = 0; k < 2; k++) {
    double start = bench_now_ns();
    if (calls[k](args[k]) != 0) return -1;
    count[k] = calls_per_sample(bench_now_ns() - start, min_sample_ns);
  }
  double per_call[2][MAX_ROUNDS];
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < 2; k++) {
      double start = bench_now_ns();
      for (int64_t c = 0; c < count[k]; c++)
        if (calls[k](args[k]) != 0) return -1;
      per_call[k][r] = (bench_now_ns() - start) / (double)count[k];
    }
  timing_of(per_call[0], rounds, out);
  timing_of(per_call[1], rounds, alongside_out);
  *fastest_ratio = alongside_out->min_ns / out->min_ns;
  return 0;
}

double bench_time_calls(bench_call_fn call, void* arg, int samples, double min_sample_ns) {
  bench_timing_t timing;
  return bench_time_stats(call, arg, samples, min_sample_ns, &timing) == 0 ? timing.median_ns : -1;
}

void bench_fill_uniform(float* data, int64_t count, uint64_t* state) {
  for (int64_t k = 0; k < count; k++) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    data[k] = 0.5f + (float)(*state >> 40) / (float)(1 << 24);
  }
}
