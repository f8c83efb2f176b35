/* jit/mir/mir_alloc.c: the memory allocator of the MIR engine's contexts.
 *
 * Why: MIR's generator allocates and frees many blocks for every function
 * it compiles (bitmaps, arrays, tables), the same sizes again for the next
 * function; with the C library's allocator that was a sizeable share of a
 * kernel's compile (docs/ENGINES.md, "Measured").
 *
 * Algorithm: segregated free lists. A request of n bytes takes a block of
 * the smallest size class 2^k >= n + 16 (k = 5 .. 16), whose first 16 bytes
 * record k, keeping malloc's 16-byte alignment. A freed block goes onto its
 * class's list, last freed first taken (most likely still in cache); larger
 * requests go to malloc. Blocks on the lists are released when the pool is
 * (after MIR_finish), so a context holds at most its peak use. A pool
 * serves one context, under the engine's lock only: nothing here is
 * synchronized. */
#ifdef UJ_HAVE_MIR
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mir_emit.h"

enum { SMALLEST = 5, LARGEST = 16, NCLASSES = LARGEST - SMALLEST + 1, HEADER = 16, BIG = NCLASSES };

typedef union block {
  union block* next; /* on a free list */
  struct {
    uint32_t size_class; /* 0 .. NCLASSES - 1, or BIG */
    uint32_t unused;
    size_t big_bytes; /* a BIG block's size, header included */
  } used;
  unsigned char header[HEADER];
} block_t;
_Static_assert(sizeof(block_t) == HEADER, "a block's header keeps malloc's 16-byte alignment");

struct jit_mir_pool {
  struct MIR_alloc alloc; /* handed to MIR_init2; user_data is the pool */
  block_t* free_list[NCLASSES];
  size_t held; /* bytes taken from malloc and not yet given back: in use or on a list */
};

static size_t class_bytes(int c) { return (size_t)1 << (c + SMALLEST); }

static void* pool_malloc(size_t n, void* user_data) {
  jit_mir_pool_t* pool = user_data;
  if (n > class_bytes(NCLASSES - 1) - HEADER) {
    block_t* b = n > SIZE_MAX - HEADER ? NULL : malloc(n + HEADER);
    if (!b) return NULL;
    b->used.size_class = BIG;
    b->used.big_bytes = n + HEADER;
    pool->held += n + HEADER;
    return b->header + HEADER;
  }
  int c = 0;
  while (class_bytes(c) - HEADER < n) c++;
  block_t* b = pool->free_list[c];
  if (b) pool->free_list[c] = b->next;
  else if (!(b = malloc(class_bytes(c)))) return NULL;
  else pool->held += class_bytes(c);
  b->used.size_class = (uint32_t)c;
  return b->header + HEADER;
}

static block_t* block_of(void* p) { return (block_t*)((unsigned char*)p - HEADER); }

static void pool_free(void* p, void* user_data) {
  jit_mir_pool_t* pool = user_data;
  if (!p) return;
  block_t* b = block_of(p);
  uint32_t c = b->used.size_class;
  if (c == BIG) {
    pool->held -= b->used.big_bytes;
    free(b);
    return;
  }
  b->next = pool->free_list[c];
  pool->free_list[c] = b;
}

static void* pool_calloc(size_t count, size_t size, void* user_data) {
  if (size && count > SIZE_MAX / size) return NULL;
  void* p = pool_malloc(count * size, user_data);
  if (p) memset(p, 0, count * size);
  return p;
}

/* Keeps the block when the new size still fits its class. */
static void* pool_realloc(void* p, size_t old_size, size_t new_size, void* user_data) {
  if (!p) return pool_malloc(new_size, user_data);
  uint32_t c = block_of(p)->used.size_class;
  if (c != BIG && new_size <= class_bytes((int)c) - HEADER) return p;
  void* q = pool_malloc(new_size, user_data);
  if (!q) return NULL;
  memcpy(q, p, old_size < new_size ? old_size : new_size);
  pool_free(p, user_data);
  return q;
}

jit_mir_pool_t* jit_mir_pool_new(void) {
  jit_mir_pool_t* pool = calloc(1, sizeof *pool);
  if (pool) pool->alloc = (struct MIR_alloc){pool_malloc, pool_calloc, pool_realloc, pool_free, pool};
  return pool;
}

MIR_alloc_t jit_mir_pool_alloc(jit_mir_pool_t* pool) { return &pool->alloc; }

size_t jit_mir_pool_held(const jit_mir_pool_t* pool) { return pool ? pool->held : 0; }

void jit_mir_pool_free(jit_mir_pool_t* pool) {
  if (!pool) return;
  for (int c = 0; c < NCLASSES; c++)
    while (pool->free_list[c]) {
      block_t* b = pool->free_list[c];
      pool->free_list[c] = b->next;
      free(b);
    }
  free(pool);
}
#endif
