/* tests/nvrtc_check.h: every program the oracle tests run, compiled for
 * the GPU with NVRTC, GPU or not (OR_CUDA_COMPILE; tests/oracle.h's
 * run-and-compare helpers call it). */
#ifndef UJ_TESTS_NVRTC_CHECK_H
#define UJ_TESTS_NVRTC_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../include/uopjit.h"
#include "../jit/cuda/cuda.h"
#include "harness.h"

/* Every program the helpers here run is compiled with NVRTC for sm_90,
 * once per distinct CUDA source (told apart by a 128-bit hash of
 * UJ_DUMP_CUDA's text). Needs NVRTC, not a GPU. Where a GPU runs the
 * kernels, each is compiled as the engine compiles it
 * (uj_program_compile_cuda, to a cubin in the test's kernel cache). Without
 * one, NVRTC's cost per kernel would make most of make test's time: then
 * the engine's compile is made for a sample (a test binary's first
 * OR_CUDA_FULL_FIRST sources and one in OR_CUDA_FULL_EVERY by hash), and
 * every source goes into batches that NVRTC checks in one compile each
 * (jit_cuda_check_sources: the front end's verdict), at the end of each
 * test or when a batch is full;
 * a failure names the source and the file and line that made it. A source
 * that passed (either way) with the same NVRTC leaves a mark in the test's
 * kernel cache (make test's build/test-cache) and is not compiled again;
 * a fresh cache, or UOPJIT_CACHE=0, compiles everything. Without NVRTC (or
 * in a build without CUDA) it says so once and compiles nothing. At exit
 * each test binary prints how many it compiled. */
#define OR_CUDA_ARCH "sm_90"
#define OR_CUDA_ARCH_NUMBER 90
enum { OR_CUDA_BATCH = 48, OR_CUDA_FULL_FIRST = 1, OR_CUDA_FULL_EVERY = 32 };

typedef struct {
  char* source;
  uint64_t hash[2];
  const char* file;
  int line;
} or_cuda_pending_t;

typedef struct {
  int probed, nvrtc;            /* NVRTC usable (asked once) */
  int gpu;                      /* the CUDA engine runs here */
  uj_ctx_t* ctx;                /* passes on, as the engine runs */
  uint64_t (*seen)[2];          /* hashes of the sources compiled */
  int nseen, cap;
  int modules, kernels, failed, repeats, reused, checked, marked;
  or_cuda_pending_t pending[OR_CUDA_BATCH];
  int npending;
  char marks[512];              /* the marks' directory; "" for none */
} or_cuda_t;
static or_cuda_t or_cuda_;

static void or_cuda_flush_(void);

static void or_cuda_report_(void) {
  or_cuda_flush_();
  if (or_cuda_.nvrtc && (or_cuda_.modules || or_cuda_.checked || or_cuda_.marked || or_cuda_.failed))
    printf("cuda: %d kernels in %d modules compiled with NVRTC for " OR_CUDA_ARCH
           " (%d modules now, %d verified in the disk cache from an earlier compile of the same source), %d more "
           "sources checked in batches, %d passed before (marked); %d failed, %d repeats skipped%s\n",
           or_cuda_.kernels, or_cuda_.modules, or_cuda_.modules - or_cuda_.reused, or_cuda_.reused,
           or_cuda_.checked, or_cuda_.marked, or_cuda_.failed, or_cuda_.repeats,
           or_cuda_.gpu ? "" : "; no CUDA device, so none ran");
  uj_ctx_free(or_cuda_.ctx);
  free(or_cuda_.seen);
  memset(&or_cuda_, 0, sizeof or_cuda_);
}

/* 1 when NVRTC compiles here: a one-line program for sm_90. */
static inline int or_cuda_nvrtc_(void) {
  if (or_cuda_.probed) return or_cuda_.nvrtc;
  or_cuda_.probed = 1;
  or_cuda_.ctx = uj_ctx_new();
  uj_program_t* p = NULL;
  float one = 1;
  uj_tensor_t x;
  memset(&x, 0, sizeof x);
  x.data = &one, x.dtype = UJ_F32, x.ndim = 1, x.dims[0] = 1;
  const uj_tensor_t* in[] = {&x};
  uj_status_t s = or_cuda_.ctx ? uj_program_parse("y = x + 1", &p) : UJ_ERR_OOM;
  if (s == UJ_OK) s = uj_program_compile_cuda(or_cuda_.ctx, p, UJ_FORWARD, in, 1, NULL, 0, OR_CUDA_ARCH, NULL, NULL);
  uj_program_free(p);
  or_cuda_.nvrtc = s == UJ_OK;
  if (!or_cuda_.nvrtc) fprintf(stderr, "CUDA kernels not compiled with NVRTC: %s\n", uj_last_error());
  uj_ctx_t* probe = uj_ctx_new();
  or_cuda_.gpu = probe && uj_engine_available(probe, UJ_ENGINE_CUDA);
  uj_ctx_free(probe);
  const char* dir = getenv("UOPJIT_CACHE_DIR");
  const char* off = getenv("UOPJIT_CACHE");
  if (or_cuda_.nvrtc && dir && *dir && !(off && strcmp(off, "0") == 0) && strlen(dir) < 400) {
    snprintf(or_cuda_.marks, sizeof or_cuda_.marks, "%s/nvrtc-checked-%d", dir, jit_cuda_nvrtc_version());
    mkdir(dir, 0755);
    if (mkdir(or_cuda_.marks, 0755) != 0 && errno != EEXIST) or_cuda_.marks[0] = 0;
  }
  harness_after_test = or_cuda_flush_;
  atexit(or_cuda_report_);
  return or_cuda_.nvrtc;
}

static inline void or_hash128_(const char* text, uint64_t out[2]) {
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  for (const unsigned char* c = (const unsigned char*)text; *c; c++) {
    a = (a ^ *c) * 0x100000001b3ull;
    b = (b ^ *c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  out[0] = a, out[1] = b;
}

/* The mark of a source that compiled: its path, "" when marks are off. */
static inline void or_cuda_mark_path_(const uint64_t h[2], char* out, size_t cap) {
  if (!or_cuda_.marks[0]) {
    out[0] = 0;
    return;
  }
  snprintf(out, cap, "%s/%016llx%016llx", or_cuda_.marks, (unsigned long long)h[0], (unsigned long long)h[1]);
}
static inline int or_cuda_marked_(const uint64_t h[2]) {
  char path[600];
  or_cuda_mark_path_(h, path, sizeof path);
  return path[0] && access(path, F_OK) == 0;
}
static inline void or_cuda_mark_(const uint64_t h[2]) {
  char path[600];
  or_cuda_mark_path_(h, path, sizeof path);
  FILE* f = path[0] ? fopen(path, "w") : NULL;
  if (f) fclose(f);
}

/* The pending sources checked in one NVRTC compile; a failure fails the
 * running test, naming where the failing source was made. */
static void or_cuda_flush_(void) {
  if (or_cuda_.npending == 0) return;
  const char* sources[OR_CUDA_BATCH];
  for (int k = 0; k < or_cuda_.npending; k++) sources[k] = or_cuda_.pending[k].source;
  int failing = -1;
  uj_status_t s = jit_cuda_check_sources(sources, or_cuda_.npending, OR_CUDA_ARCH_NUMBER, &failing);
  if (s != UJ_OK) {
    char msg[1400];
    const or_cuda_pending_t* at = failing >= 0 ? &or_cuda_.pending[failing] : &or_cuda_.pending[0];
    snprintf(msg, sizeof msg, "NVRTC (compute_%d) on the CUDA source of a program run at %s:%d: %s: %s",
             OR_CUDA_ARCH_NUMBER, at->file, at->line, uj_status_str(s), uj_last_error());
    harness_fail(at->file, at->line, msg);
    or_cuda_.failed++;
  }
  for (int k = 0; k < or_cuda_.npending; k++) {
    if (s == UJ_OK) or_cuda_mark_(or_cuda_.pending[k].hash);
    free(or_cuda_.pending[k].source);
  }
  or_cuda_.checked += or_cuda_.npending;
  or_cuda_.npending = 0;
}

/* Compiles pass of p, built for these inputs and params, for sm_90 unless
 * that source was compiled already, or queues it for a batch check (above);
 * a failure fails the running test with NVRTC's message. Returns the
 * number of failures found now (0 or 1). */
static inline int or_cuda_compile_(const char* file, int line, uj_program_t* p, uj_pass_t pass,
                                   const uj_tensor_t* const* in, int nin, const int64_t* params, int np) {
  if (!p || !or_cuda_nvrtc_()) return 0;
  /* a parsed program's build for these inputs, so that the dump shows it */
  uj_dtype_t dt;
  if (pass == UJ_FORWARD) uj_program_output_dtype(p, pass, in, 0, &dt);
  char* text = uj_program_dump(or_cuda_.ctx, p, pass, UJ_DUMP_CUDA, np ? params : NULL);
  if (!text) {
    char msg[1200];
    snprintf(msg, sizeof msg, "CUDA source of the program: %s", uj_last_error());
    harness_fail(file, line, msg);
    or_cuda_.failed++;
    return 1;
  }
  uint64_t h[2];
  or_hash128_(text, h);
  for (int i = 0; i < or_cuda_.nseen; i++)
    if (or_cuda_.seen[i][0] == h[0] && or_cuda_.seen[i][1] == h[1]) {
      or_cuda_.repeats++;
      free(text);
      return 0;
    }
  if (or_cuda_.nseen == or_cuda_.cap) {
    int cap = or_cuda_.cap ? 2 * or_cuda_.cap : 256;
    uint64_t(*more)[2] = realloc(or_cuda_.seen, sizeof *more * (size_t)cap);
    if (!more) {
      free(text);
      return 0;
    }
    or_cuda_.seen = more, or_cuda_.cap = cap;
  }
  or_cuda_.seen[or_cuda_.nseen][0] = h[0], or_cuda_.seen[or_cuda_.nseen][1] = h[1];
  int nth = or_cuda_.nseen++;
  int full = or_cuda_.gpu || nth < OR_CUDA_FULL_FIRST || h[0] % OR_CUDA_FULL_EVERY == 0;
  if (!full && or_cuda_marked_(h)) {
    or_cuda_.marked++;
    free(text);
    return 0;
  }
  if (!full) {
    or_cuda_pending_t* q = &or_cuda_.pending[or_cuda_.npending++];
    q->source = text, q->hash[0] = h[0], q->hash[1] = h[1], q->file = file, q->line = line;
    if (or_cuda_.npending == OR_CUDA_BATCH) or_cuda_flush_();
    return 0;
  }
  free(text);
  int kernels = 0, reused = 0;
  uj_status_t s = uj_program_compile_cuda(or_cuda_.ctx, p, pass, in, nin, params, np, OR_CUDA_ARCH, &kernels, &reused);
  if (s != UJ_OK) {
    char msg[1200];
    snprintf(msg, sizeof msg, "NVRTC (" OR_CUDA_ARCH "), %s pass: %s: %s", pass == UJ_FORWARD ? "forward" : "backward",
             uj_status_str(s), uj_last_error());
    harness_fail(file, line, msg);
    or_cuda_.failed++;
    return 1;
  }
  or_cuda_.modules++;
  or_cuda_.kernels += kernels;
  or_cuda_.reused += reused;
  return 0;
}
#define OR_CUDA_COMPILE(p, pass, in, nin, params, np) \
  or_cuda_compile_(__FILE__, __LINE__, (p), (pass), (in), (nin), (params), (np))

#endif
