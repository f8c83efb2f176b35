/* bench/traffic.c: the traffic-matched copy kernel, each workload's memory
 * limit. It reads exactly the arrays a workload reads and writes exactly
 * the arrays it writes, each once per element, in place where the workload
 * is in place, with no arithmetic: every output element is the XOR of the
 * bits of the inputs' elements (one integer instruction per input, so that
 * no load can be dropped as dead). Whatever the hardware does for that
 * traffic (write-allocate reads of the outputs' lines, the prefetchers) it
 * does for the workload too, so a kernel's time over this one's is the
 * fraction of the reachable bandwidth it gets; STREAM's byte counts, which
 * leave write-allocate out, are not (see stream.c). The loop, the in-place
 * masks and the streamed outputs: above copy_fixed; the split over threads
 * and tensors: above traffic_copy_all. The Makefile compiles this file
 * with -O3 -march=native. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rt/rt.h"
#include "bench.h"

enum { BLOCK = 1024, MAX_THREADS = 64, LANES = 16, PREFETCH_AHEAD = 256 };

/* Sixteen 4-byte lanes loaded and stored whole: explicit vectors, so that an
 * in-place output (the same pointer as an input) costs no fallback to
 * scalar code, which the compiler's overlap checks would take. aligned(4):
 * the arrays need not be 64-byte aligned. */
typedef uint32_t lanes_t __attribute__((vector_size(LANES * sizeof(uint32_t)), aligned(4)));

/* Keeps the XOR of outputs that nobody stores (a workload with no
 * per-element output, as a sum), so its loads stay. */
static volatile uint32_t traffic_sink;

/* Zero, read at run time, so that the compiler keeps what it masks. */
static volatile uint32_t opaque_zero;

/* For each output: the input it is (in place), else the first, and the
 * masks that select that input's bits (in place) or the XOR of all the
 * inputs (a separate output): stored = (own & keep) ^ (xor & take); and
 * whether it is streamed. */
typedef struct {
  int source[BENCH_MAX_IO];
  uint32_t keep[BENCH_MAX_IO], take[BENCH_MAX_IO];
  int stream[BENCH_MAX_IO];
} output_plan_t;

/* 64 bytes to a 64-byte aligned address with streaming stores. */
static inline __attribute__((always_inline)) void stream_line(uint32_t* at, lanes_t v) {
#if defined(__AVX512F__)
  _mm512_stream_si512((void*)at, (__m512i)v);
#elif defined(__AVX__)
  for (int h = 0; h < 2; h++) _mm256_stream_si256((__m256i*)(void*)at + h, ((const __m256i*)(const void*)&v)[h]);
#elif defined(__SSE2__)
  for (int q = 0; q < 4; q++) _mm_stream_si128((__m128i*)(void*)at + q, ((const __m128i*)(const void*)&v)[q]);
#else
  *(lanes_t*)at = v;
#endif
}

static inline void stream_fence(void) {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

/* The size from which outputs stream: traffic_set_stream_bytes's, else
 * UOPJIT_STREAM_BYTES as the library reads it (threads that ask at once
 * all read the same value). */
static int64_t stream_threshold = -1;

void traffic_set_stream_bytes(int64_t bytes) { __atomic_store_n(&stream_threshold, bytes, __ATOMIC_RELAXED); }

static int64_t stream_bytes(void) {
  int64_t b = __atomic_load_n(&stream_threshold, __ATOMIC_RELAXED);
  if (b < 0) {
    rt_settings_t settings;
    char problems[RT_SETTING_COUNT][RT_PROBLEM_CAP];
    rt_settings_from_env(&settings, problems);
    b = settings.stream_bytes;
    __atomic_store_n(&stream_threshold, b, __ATOMIC_RELAXED);
  }
  return b;
}

static void plan_outputs(const traffic_t* t, output_plan_t* plan) {
  uint32_t zero = opaque_zero;
  for (int w = 0; w < t->nwrites; w++) {
    plan->source[w] = 0;
    for (int r = 0; r < t->nreads; r++)
      if (t->reads[r] == t->writes[w]) plan->source[w] = r;
    int in_place = t->reads[plan->source[w]] == t->writes[w];
    plan->keep[w] = in_place ? ~zero : zero;
    plan->take[w] = in_place ? zero : ~zero;
    plan->stream[w] = !in_place && t->n * (int64_t)sizeof(uint32_t) >= stream_bytes();
  }
}

/* The copy of [begin, end) with `reads` inputs and `writes` outputs; always
 * inlined with constant counts, so each case gets its own loop with the
 * inner loops unrolled and everything in registers.
 *
 * The loop takes sixteen elements (one 64-byte line) at a time: every
 * input's lanes loaded and XORed, then stored to every output, so the
 * inputs of an element are all read before an in-place output overwrites
 * one. Every array is also prefetched PREFETCH_AHEAD elements ahead (for
 * writing where it is written). Both are there because the limit must be
 * the fastest this traffic moves, not one loop's speed: with Adam's
 * traffic, eight-lane vectors without prefetch were slower than Adam
 * itself, no limit at all; sixteen lanes, and the prefetch, were faster.
 *
 * An in-place output gets its own input's bits back unchanged: the XOR is
 * folded in under a mask the compiler cannot see is zero, so the loads stay
 * while the values do not change. The copy kernel can thus be timed between
 * calls of the workload on the same arrays (in alternation, for a ratio
 * taken at the same moments) without turning an optimizer's state into
 * arbitrary bits, denormals among them, that would slow the workload down.
 *
 * An output the workload may write with streaming stores (not in place, at
 * least UOPJIT_STREAM_BYTES, as the C engine streams it: jit/c/c_stream.c)
 * is written here with streaming stores too, 64 bytes at a time from its
 * first 64-byte aligned element, skipping the read of each line before it
 * is written: the limit of a workload that may do so is that traffic, and
 * a copy that read every line first would be no limit. */
static inline __attribute__((always_inline)) void copy_fixed(const traffic_t* t, int64_t begin, int64_t end,
                                                             const int reads, const int writes) {
  const uint32_t* in[BENCH_MAX_IO];
  uint32_t* out[BENCH_MAX_IO];
  const uint32_t* own[BENCH_MAX_IO];
  output_plan_t plan;
  plan_outputs(t, &plan);
  lanes_t keep[BENCH_MAX_IO], take[BENCH_MAX_IO];
  for (int r = 0; r < reads; r++) in[r] = t->reads[r];
  for (int w = 0; w < writes; w++) {
    out[w] = t->writes[w], own[w] = in[plan.source[w]];
    keep[w] = (lanes_t){0} + plan.keep[w], take[w] = (lanes_t){0} + plan.take[w];
  }
  lanes_t fold = {0};
  int64_t i = begin;
  /* the streamed outputs' lines from the first element aligned in all of
   * them (none streams when their alignments differ) */
  int streams = 0, offset = -1;
  for (int w = 0; w < writes; w++) {
    if (!plan.stream[w]) continue;
    int at = (int)(((uintptr_t)(out[w] + i) & 63u) / sizeof(uint32_t));
    if ((uintptr_t)out[w] & 3u || (offset >= 0 && at != offset)) {
      streams = 0;
      break;
    }
    streams = 1, offset = at;
  }
  for (int w = 0; w < writes; w++) plan.stream[w] &= streams;
  for (int64_t peel = streams ? (LANES - offset) % LANES : 0; i < end && peel > 0; i++, peel--) {
    uint32_t x = in[0][i];
    for (int r = 1; r < reads; r++) x ^= in[r][i];
    for (int w = 0; w < writes; w++) out[w][i] = (own[w][i] & plan.keep[w]) ^ (x & plan.take[w]);
  }
  for (; i + LANES <= end; i += LANES) {
    if (i + PREFETCH_AHEAD < end) {
      for (int r = 0; r < reads; r++) __builtin_prefetch(in[r] + i + PREFETCH_AHEAD, 0);
      for (int w = 0; w < writes; w++)
        if (!plan.stream[w]) __builtin_prefetch(out[w] + i + PREFETCH_AHEAD, 1); /* a streamed line is never read */
    }
    lanes_t x = *(const lanes_t*)(in[0] + i);
    for (int r = 1; r < reads; r++) x ^= *(const lanes_t*)(in[r] + i);
    for (int w = 0; w < writes; w++) {
      lanes_t v = (*(const lanes_t*)(own[w] + i) & keep[w]) ^ (x & take[w]);
      if (plan.stream[w]) stream_line(out[w] + i, v);
      else *(lanes_t*)(out[w] + i) = v;
    }
    if (writes == 0) fold ^= x;
  }
  if (streams) stream_fence();
  uint32_t tail_fold = 0;
  for (; i < end; i++) {
    uint32_t x = in[0][i];
    for (int r = 1; r < reads; r++) x ^= in[r][i];
    for (int w = 0; w < writes; w++) out[w][i] = (own[w][i] & plan.keep[w]) ^ (x & plan.take[w]);
    tail_fold ^= x;
  }
  if (writes == 0) {
    for (int k = 0; k < LANES; k++) tail_fold ^= fold[k];
    traffic_sink ^= tail_fold;
  }
}

/* The general case, for counts no workload has yet: the XOR of a block of
 * inputs in a buffer, then each output's block stored from it (masked as
 * in copy_fixed). */
static void copy_blocks(const traffic_t* t, int64_t begin, int64_t end) {
  uint32_t block[BLOCK], fold = 0;
  output_plan_t plan;
  plan_outputs(t, &plan);
  for (int64_t start = begin; start < end; start += BLOCK) {
    int64_t count = end - start < BLOCK ? end - start : BLOCK;
    const uint32_t* first = (const uint32_t*)t->reads[0] + start;
    for (int64_t i = 0; i < count; i++) block[i] = first[i];
    for (int r = 1; r < t->nreads; r++) {
      const uint32_t* in = (const uint32_t*)t->reads[r] + start;
      for (int64_t i = 0; i < count; i++) block[i] ^= in[i];
    }
    for (int w = 0; w < t->nwrites; w++) {
      const uint32_t* own = (const uint32_t*)t->reads[plan.source[w]] + start;
      uint32_t* out = (uint32_t*)t->writes[w] + start;
      for (int64_t i = 0; i < count; i++) out[i] = (own[i] & plan.keep[w]) ^ (block[i] & plan.take[w]);
    }
    if (t->nwrites == 0)
      for (int64_t i = 0; i < count; i++) fold ^= block[i];
  }
  traffic_sink ^= fold;
}

static void copy_part(const traffic_t* t, int64_t begin, int64_t end) {
  switch (t->nreads * 16 + t->nwrites) {
    case 1 * 16 + 0: copy_fixed(t, begin, end, 1, 0); break;
    case 1 * 16 + 1: copy_fixed(t, begin, end, 1, 1); break;
    case 2 * 16 + 1: copy_fixed(t, begin, end, 2, 1); break;
    case 3 * 16 + 1: copy_fixed(t, begin, end, 3, 1); break;
    case 4 * 16 + 3: copy_fixed(t, begin, end, 4, 3); break;
    default: copy_blocks(t, begin, end);
  }
}

/* One call's work: `count` tensors' traffic, `total` elements in all. */
typedef struct {
  const traffic_t* parts;
  int count;
  int64_t total;
} job_t;

/* Copies [begin, end) of the concatenation: the part in each tensor it
 * covers. The walk from the first tensor is cheap beside a run's copy (a
 * model has some hundreds of tensors, a run some 16K elements or more). */
static void copy_span(const job_t* job, int64_t begin, int64_t end) {
  int64_t base = 0;
  for (int k = 0; k < job->count && base < end; base += job->parts[k].n, k++) {
    int64_t lo = begin > base ? begin - base : 0;
    int64_t hi = end - base < job->parts[k].n ? end - base : job->parts[k].n;
    if (hi > lo) copy_part(&job->parts[k], lo, hi);
  }
}

/* The library's own thread pool (rt/threads.c), kept between calls as a
 * context keeps it: the same split into contiguous runs, one per thread,
 * and the same wake-up (a brief spin, then sleep) as the JIT engines' calls
 * that the limit is compared with, so that a difference between the two is
 * the kernels' and not the pools'. */
static rt_pool_t* pool;

static void run_range(void* arg, int64_t begin, int64_t end) { copy_span(arg, begin, end); }

/* On several threads the elements are split into one contiguous run per
 * thread (at least 16K elements each) by the library's own thread pool, as
 * the JIT engines split theirs. A multi-tensor workload (an optimizer step
 * over a model's tensors) is one job over the concatenation of its tensors'
 * elements, as the library's multi-tensor pass splits it
 * (jit/groups/cpu.c): the threads' runs are equal runs of that
 * concatenation, so a run may hold the end of one tensor and several tiny
 * ones after it, and no tensor costs a round of the pool of its own. A copy
 * per tensor, each split over the threads, would pay a barrier per tensor
 * and leave threads idle on the small ones: slower than the workload, which
 * is no limit. */
int traffic_copy_all(const traffic_t* parts, int count, int threads) {
  if (count < 1) return -1;
  job_t job = {parts, count, 0};
  for (int k = 0; k < count; k++) {
    if (parts[k].nreads < 1 || parts[k].n < 0) return -1;
    job.total += parts[k].n;
  }
  if (job.total < 1) return -1;
  threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
  if (threads == 1 || job.total < (int64_t)threads * BLOCK) {
    copy_span(&job, 0, job.total);
    return 0;
  }
  if (!pool || rt_pool_size(pool) != threads) {
    rt_pool_free(pool);
    if (!(pool = rt_pool_new(threads))) {
      fprintf(stderr, "bench: the copy kernel could not start %d threads\n", threads);
      return -1;
    }
  }
  rt_pool_run(pool, 0, job.total, 16 * BLOCK, run_range, &job);
  return 0;
}

int traffic_copy(const traffic_t* t) { return traffic_copy_all(t, 1, t->threads); }
