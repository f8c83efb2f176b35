/* tests/test_bench_traffic.c: the bench's traffic-matched copy kernel
 * (bench/traffic.c) over several tensors at once, as the multi-tensor AdamW
 * step's limit uses it: on 1, 2 and 3 threads, with tensors from 1 element
 * to some hundred thousand (tiny ones packed into a chunk with the end of a
 * big one), every element of every tensor is written: a separate output
 * holds the XOR of its inputs' bits, written with ordinary stores and with
 * streaming ones (from its first 64-byte aligned element); an in-place output (the optimizer's
 * m, v, p) keeps its bits, so that the copy kernel can be timed between
 * steps of the workload on the same arrays. Calls without elements or
 * without an input are refused with -1. No timing is checked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/bench.h"
#include "harness.h"

enum { NTENSORS = 6 };
static const int64_t sizes[NTENSORS] = {1, 7, 100003, 3, 40000, 17};

static uint32_t next_bits(uint64_t* state) {
  *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
  return (uint32_t)(*state >> 32);
}

TEST(separate_outputs_get_every_element_of_every_tensor) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  uint32_t *a[NTENSORS], *b[NTENSORS], *y[NTENSORS];
  traffic_t parts[NTENSORS];
  for (int k = 0; k < NTENSORS; k++) {
    a[k] = malloc((size_t)sizes[k] * 4), b[k] = malloc((size_t)sizes[k] * 4), y[k] = malloc((size_t)sizes[k] * 4);
    CHECK(a[k] && b[k] && y[k]);
    if (!a[k] || !b[k] || !y[k]) return;
    for (int64_t i = 0; i < sizes[k]; i++) a[k][i] = next_bits(&state), b[k][i] = next_bits(&state);
    parts[k] = (traffic_t){.reads = {a[k], b[k]}, .nreads = 2, .writes = {y[k]}, .nwrites = 1, .n = sizes[k]};
  }
  /* ordinary stores, then streamed ones (every output of 4 bytes or more) */
  for (int run = 0; run < 6; run++) {
    int threads = 1 + run % 3;
    traffic_set_stream_bytes(run < 3 ? INT64_MAX : 4);
    for (int k = 0; k < NTENSORS; k++) memset(y[k], 0, (size_t)sizes[k] * 4);
    CHECK(traffic_copy_all(parts, NTENSORS, threads) == 0);
    int64_t wrong = 0;
    for (int k = 0; k < NTENSORS; k++)
      for (int64_t i = 0; i < sizes[k]; i++) wrong += y[k][i] != (a[k][i] ^ b[k][i]);
    if (wrong) fprintf(stderr, "  %lld elements wrong on %d threads\n", (long long)wrong, threads);
    CHECK(wrong == 0);
  }
  traffic_set_stream_bytes(-1);
  for (int k = 0; k < NTENSORS; k++) free(a[k]), free(b[k]), free(y[k]);
}

TEST(in_place_outputs_keep_their_bits) {
  uint64_t state = 0x243f6a8885a308d3ull;
  traffic_set_stream_bytes(4); /* an output in place is never streamed */
  uint32_t *arrays[NTENSORS][4], *kept[NTENSORS][4];
  traffic_t parts[NTENSORS];
  for (int k = 0; k < NTENSORS; k++) {
    for (int a = 0; a < 4; a++) {
      arrays[k][a] = malloc((size_t)sizes[k] * 4), kept[k][a] = malloc((size_t)sizes[k] * 4);
      CHECK(arrays[k][a] && kept[k][a]);
      if (!arrays[k][a] || !kept[k][a]) return;
      for (int64_t i = 0; i < sizes[k]; i++) arrays[k][a][i] = next_bits(&state);
      memcpy(kept[k][a], arrays[k][a], (size_t)sizes[k] * 4);
    }
    /* AdamW's traffic: reads m, g, v, p; writes m, v, p in place */
    uint32_t **m = &arrays[k][0], **g = &arrays[k][1], **v = &arrays[k][2], **p = &arrays[k][3];
    parts[k] = (traffic_t){.reads = {*m, *g, *v, *p}, .nreads = 4, .writes = {*m, *v, *p}, .nwrites = 3, .n = sizes[k]};
  }
  for (int threads = 1; threads <= 3; threads++) {
    CHECK(traffic_copy_all(parts, NTENSORS, threads) == 0);
    int64_t changed = 0;
    for (int k = 0; k < NTENSORS; k++)
      for (int a = 0; a < 4; a++) changed += memcmp(arrays[k][a], kept[k][a], (size_t)sizes[k] * 4) != 0;
    if (changed) fprintf(stderr, "  %lld arrays changed on %d threads\n", (long long)changed, threads);
    CHECK(changed == 0);
  }
  traffic_set_stream_bytes(-1);
  for (int k = 0; k < NTENSORS; k++)
    for (int a = 0; a < 4; a++) free(arrays[k][a]), free(kept[k][a]);
}

TEST(calls_without_elements_or_inputs_are_refused) {
  uint32_t x[4] = {1, 2, 3, 4}, y[4];
  traffic_t empty = {.reads = {x}, .nreads = 1, .writes = {y}, .nwrites = 1, .n = 0};
  traffic_t no_input = {.nreads = 0, .writes = {y}, .nwrites = 1, .n = 4};
  CHECK(traffic_copy_all(&empty, 1, 2) == -1);
  CHECK(traffic_copy_all(&no_input, 1, 2) == -1);
  CHECK(traffic_copy_all(&empty, 0, 1) == -1);
  CHECK(traffic_copy(&no_input) == -1);
}

TEST_MAIN()
