/* rt/arena.c: the arena (bump) allocator that holds IR nodes and other
 * many-small-objects-one-lifetime data, and the growable text buffer used by
 * printers and code emitters.
 *
 * Both report out of memory by return value and never abort: the library
 * promises to turn every failure, OOM included, into a status. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define RT_ARENA_ALIGN 16
/* The first ordinary chunk; later ones double up to the maximum, so a small
 * function costs little and a big one makes few trips to malloc. */
#define RT_ARENA_FIRST_CHUNK ((size_t)4096)
#define RT_ARENA_MAX_CHUNK ((size_t)1 << 20)

struct rt_arena_chunk {
  rt_arena_chunk_t* next;
  size_t cap;
  /* The payload starts at the first 16-byte boundary after the header. */
  _Alignas(RT_ARENA_ALIGN) unsigned char data[];
};

static size_t align_up(size_t n) { return (n + (RT_ARENA_ALIGN - 1)) & ~(size_t)(RT_ARENA_ALIGN - 1); }

static rt_arena_chunk_t* chunk_new(size_t cap) {
  if (cap > SIZE_MAX - sizeof(rt_arena_chunk_t)) return NULL;
  /* calloc gives the zeroed memory the arena promises for free. */
  rt_arena_chunk_t* c = calloc(1, sizeof(rt_arena_chunk_t) + cap);
  if (!c) return NULL;
  c->cap = cap;
  return c;
}

void rt_arena_init(rt_arena_t* a) {
  a->head = NULL;
  a->used = 0;
  a->cap = 0;
}

void rt_arena_release(rt_arena_t* a) {
  if (!a) return;
  rt_arena_chunk_t* c = a->head;
  while (c) {
    rt_arena_chunk_t* next = c->next;
    free(c);
    c = next;
  }
  rt_arena_init(a);
}

void* rt_arena_alloc(rt_arena_t* a, size_t bytes) {
  /* A zero-byte request still gets a distinct pointer, so that NULL always
   * means out of memory. */
  if (bytes == 0) bytes = 1;
  if (bytes > SIZE_MAX - RT_ARENA_ALIGN) return NULL;
  size_t need = align_up(bytes);

  if (a->head && a->cap - a->used >= need) {
    void* p = a->head->data + a->used;
    a->used += need;
    return p;
  }

  size_t next_cap = a->cap ? a->cap * 2 : RT_ARENA_FIRST_CHUNK;
  if (next_cap > RT_ARENA_MAX_CHUNK) next_cap = RT_ARENA_MAX_CHUNK;

  if (need > next_cap / 4) {
    /* A large request gets a chunk of its own, linked behind the current
     * head so that the head's free space stays in use. */
    rt_arena_chunk_t* big = chunk_new(need);
    if (!big) return NULL;
    if (a->head) {
      big->next = a->head->next;
      a->head->next = big;
    } else {
      /* No head yet: the big chunk becomes it, full, and the next small
       * request opens a fresh one. */
      a->head = big;
      a->cap = need;
      a->used = need;
    }
    return big->data;
  }

  rt_arena_chunk_t* c = chunk_new(next_cap);
  if (!c) return NULL;
  c->next = a->head;
  a->head = c;
  a->cap = next_cap;
  a->used = need;
  return c->data;
}

void* rt_arena_dup(rt_arena_t* a, const void* p, size_t n) {
  void* r = rt_arena_alloc(a, n);
  if (r && n) memcpy(r, p, n);
  return r;
}

char* rt_arena_strdup(rt_arena_t* a, const char* s) {
  if (!s) return NULL;
  return rt_arena_dup(a, s, strlen(s) + 1);
}

/* The capacity a growable array of cap items takes to hold need: doubled
 * until it does. 0 when need cannot be had. */
static int grown_cap(int cap, int need, size_t elem_size) {
  if (need < 0 || elem_size == 0) return 0;
  int new_cap = cap > 0 ? cap : 4;
  while (new_cap < need) {
    if (new_cap > INT32_MAX / 2) {
      new_cap = need;
      break;
    }
    new_cap *= 2;
  }
  return (size_t)new_cap > SIZE_MAX / elem_size ? 0 : new_cap;
}

int rt_grow(void** items, int* cap, int need, size_t elem_size) {
  if (need <= *cap) return 1;
  int new_cap = grown_cap(*cap, need, elem_size);
  void* more = new_cap ? realloc(*items, (size_t)new_cap * elem_size) : NULL;
  if (!more) return 0;
  *items = more;
  *cap = new_cap;
  return 1;
}

int rt_arena_grow(rt_arena_t* a, void** items, int* cap, int need, size_t elem_size) {
  if (need <= *cap) return 1;
  int new_cap = grown_cap(*cap, need, elem_size);
  if (!new_cap) return 0;
  void* fresh = rt_arena_alloc(a, (size_t)new_cap * elem_size);
  if (!fresh) return 0;
  /* The old storage stays in the arena; callers hold no pointers into it
   * across a grow. */
  if (*items && *cap > 0) memcpy(fresh, *items, (size_t)*cap * elem_size);
  *items = fresh;
  *cap = new_cap;
  return 1;
}

/* ---- text buffer ---------------------------------------------------------------- */

/* Makes room for `extra` more bytes plus the terminating NUL. */
static int buf_reserve(rt_buf_t* b, size_t extra) {
  if (b->failed) return 0;
  if (extra > SIZE_MAX - b->len - 1) {
    b->failed = 1;
    return 0;
  }
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) {
      cap = need;
      break;
    }
    cap *= 2;
  }
  char* data = realloc(b->data, cap);
  if (!data) {
    b->failed = 1;
    return 0;
  }
  b->data = data;
  b->cap = cap;
  return 1;
}

void rt_buf_printf(rt_buf_t* b, const char* fmt, ...) {
  if (b->failed) return;
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  /* one formatting pass when the text fits the room left, which is the
   * common case: the buffer grows geometrically */
  size_t room = b->data ? b->cap - b->len : 0;
  int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < room) {
    b->len += (size_t)n;
    va_end(ap2);
    return;
  }
  if (n < 0 || !buf_reserve(b, (size_t)n)) {
    b->failed = 1;
    va_end(ap2);
    return;
  }
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  b->len += (size_t)n;
}

void rt_buf_append(rt_buf_t* b, const char* text, size_t n) {
  if (b->failed || !buf_reserve(b, n)) return;
  memcpy(b->data + b->len, text, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void rt_buf_putc(rt_buf_t* b, char c) {
  if (!buf_reserve(b, 1)) return;
  b->data[b->len++] = c;
  b->data[b->len] = '\0';
}

char* rt_buf_take(rt_buf_t* b) {
  if (b->failed) {
    rt_buf_release(b);
    return NULL;
  }
  /* An empty buffer still hands over a string the caller can free. */
  if (!b->data && !buf_reserve(b, 0)) {
    rt_buf_release(b);
    return NULL;
  }
  b->data[b->len] = '\0';
  char* text = b->data;
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
  return text;
}

void rt_buf_release(rt_buf_t* b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
}
