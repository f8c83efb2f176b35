/* ir/hash.c: the 128-bit hash that keys the kernel cache and checksums its
 * disk entries.
 *
 * Algorithm: the input is read as little-endian 8-byte words (the last one
 * zero-padded) into two 64-bit lanes that mix differently, so that a
 * difference cancelling in one lane survives in the other; the length is
 * mixed in at the end and each 64-bit half of the result goes through the
 * murmur3 finalizer. A word per step, not a byte, since a disk-cache hit
 * hashes the key text and the whole shared object.
 *
 * Not cryptographic, and need not be: every lookup also compares the full
 * key text, so a collision costs a recompile, never a wrong kernel; the
 * checksum guards against damage, not an attacker (the directory's owner
 * and mode do). */
#include "print.h"

#include <string.h>

#define K1 0x9e3779b97f4a7c15ull
#define K2 0xc2b2ae3d27d4eb4full
#define K3 0x165667b19e3779f9ull

typedef struct {
  uint64_t a, b;
  uint64_t pending; /* the bytes of an unfinished word, little-endian */
  unsigned npending;
  uint64_t length;
} hash_state_t;

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* a = rotl((a ^ w) * K1, 29), b = ((b + w) * K2) ^ (that >> 31): each a
 * bijection of its lane for a fixed word, so two inputs of equal length
 * that differ in one word always differ after it. */
static void absorb(hash_state_t* s, uint64_t w) {
  s->a = rotl64((s->a ^ w) * K1, 29);
  uint64_t b = (s->b + w) * K2;
  s->b = b ^ (b >> 31);
}

/* Byte order fixed, so the value is the same on every host. */
static uint64_t load_le64(const unsigned char* p) {
  uint64_t w;
  memcpy(&w, p, sizeof w);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  return w;
}

static void hash_init(hash_state_t* s) { *s = (hash_state_t){.a = K3, .b = ~K3}; }

static void hash_update(hash_state_t* s, const void* data, size_t n) {
  const unsigned char* p = data;
  s->length += n;
  while (n && s->npending) {
    s->pending |= (uint64_t)*p++ << (8 * s->npending);
    n--;
    if (++s->npending == 8) {
      absorb(s, s->pending);
      s->pending = 0;
      s->npending = 0;
    }
  }
  for (; n >= 8; p += 8, n -= 8) absorb(s, load_le64(p));
  for (; n; n--) s->pending |= (uint64_t)*p++ << (8 * s->npending++);
}

static uint64_t avalanche(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* The length goes in last, so that "a" and "a\0" differ. */
static ir_hash_t hash_result(const hash_state_t* state) {
  hash_state_t s = *state;
  if (s.npending) absorb(&s, s.pending);
  absorb(&s, s.length);
  ir_hash_t r = {avalanche(s.a ^ rotl64(s.b, 17)), avalanche(s.b + s.a * K3)};
  return r;
}

ir_hash_t ir_hash_bytes(const void* data, size_t n) {
  hash_state_t s;
  hash_init(&s);
  if (data) hash_update(&s, data, n);
  return hash_result(&s);
}

static void write_to_hash(void* ctx, const char* text, size_t n) { hash_update(ctx, text, n); }

/* Streams the canonical text of ir_print into the hash instead of building
 * a string, so it cannot run out of memory: there is no fallback value that
 * several distinct functions could end up sharing. Streaming in pieces gives
 * the same value as hashing the whole text at once. */
ir_hash_t ir_hash(const ir_func_t* f) {
  hash_state_t s;
  hash_init(&s);
  if (f) ir_print_stream(f, NULL, IR_PRINT_CANONICAL, write_to_hash, &s);
  return hash_result(&s);
}

ir_hash_t ir_hash_params(const ir_func_t* f, const int64_t* params) {
  hash_state_t s;
  hash_init(&s);
  if (f) ir_print_stream(f, params, IR_PRINT_CANONICAL, write_to_hash, &s);
  return hash_result(&s);
}
