/* ir/hash.c: the 128-bit hash that keys the kernel cache.
 *
 * Algorithm: FNV-1a over 128 bits (for each byte: h ^= byte; h *= prime)
 * with the standard 128-bit offset basis and prime 2^88 + 0x13b. The input
 * of ir_hash is the canonical text of ir_print (IR_PRINT_CANONICAL): names
 * are left out of that text, everything else that changes the computation
 * (constants, ops, bounds, dtypes, check bits, ids) is in it, so equal IR
 * hashes equal and a change of anything but a name changes the hash.
 *
 * ir_hash streams the text into the hash (ir/print.h) instead of building a
 * string, so it cannot run out of memory: there is no fallback value that
 * several distinct functions could end up sharing. */
#include "print.h"

__extension__ typedef unsigned __int128 u128_t;

typedef struct {
  u128_t h;
} fnv_state_t;

static u128_t fnv_offset_basis(void) {
  return ((u128_t)0x6c62272e07bb0142ull << 64) | 0x62b821756295c58dull;
}

static u128_t fnv_prime(void) { return ((u128_t)1 << 88) | 0x13b; }

static void fnv_update(fnv_state_t* s, const void* data, size_t n) {
  const unsigned char* bytes = data;
  u128_t h = s->h;
  const u128_t prime = fnv_prime();
  for (size_t i = 0; i < n; i++) {
    h ^= bytes[i];
    h *= prime; /* unsigned: wraps modulo 2^128 as FNV intends */
  }
  s->h = h;
}

static ir_hash_t fnv_result(const fnv_state_t* s) {
  ir_hash_t r = {(uint64_t)s->h, (uint64_t)(s->h >> 64)};
  return r;
}

ir_hash_t ir_hash_bytes(const void* data, size_t n) {
  fnv_state_t s = {fnv_offset_basis()};
  if (data) fnv_update(&s, data, n);
  return fnv_result(&s);
}

static void write_to_hash(void* ctx, const char* text, size_t n) { fnv_update(ctx, text, n); }

ir_hash_t ir_hash(const ir_func_t* f) {
  fnv_state_t s = {fnv_offset_basis()};
  if (f) ir_print_stream(f, NULL, IR_PRINT_CANONICAL, write_to_hash, &s);
  return fnv_result(&s);
}
