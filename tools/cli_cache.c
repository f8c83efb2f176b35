/* tools/cli_cache.c: `uopjit cache stats|list|clear`, the on-disk kernel
 * cache of the C and CUDA engines (docs/DESIGN.md section 8, jit/cache/cache.h).
 *
 * The cache is opened exactly as the library opens it, so UOPJIT_CACHE=0,
 * UOPJIT_CACHE_DIR, XDG_CACHE_HOME and HOME mean the same here, and a
 * directory the library would refuse (another owner, writable by others)
 * is reported and left alone rather than listed or cleared. The counts come
 * from the library's own listing (one line per entry), so the tool and the
 * library never disagree about what an entry is. `stats` also says whether
 * the directory can be written (a read-only one still serves its entries),
 * its size on disk and the limit the library keeps it under. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../jit/cache/cache.h"
#include "cli.h"

/* 1 when UOPJIT_CACHE=0 turned the disk cache off: the library then says
 * only that it is disabled, which is worth completing with why. */
static int switched_off(void) {
  const char* setting = getenv("UOPJIT_CACHE");
  return setting && strcmp(setting, "0") == 0;
}

/* The library's listing, one line per entry: "<hex> <ext> <size> <key>", or
 * "<hex> <ext> ? (bad meta)" for an entry whose description is unreadable.
 * NULL after printing why, when the disk cache is not usable. */
static char* disk_listing(jit_cache_t* cache) {
  rt_buf_t buf = {0};
  uj_status_t s = jit_disk_list(cache, &buf);
  if (s != UJ_OK) {
    rt_buf_release(&buf);
    fprintf(stderr, "uopjit cache: %s\n", switched_off() ? "the disk cache is switched off (UOPJIT_CACHE=0)" : uj_last_error());
    return NULL;
  }
  size_t listed = buf.len;
  char* text = rt_buf_take(&buf);
  if (!text) cli_out_of_memory("the listing", listed + 1);
  return text;
}

/* Entries and payload bytes of one kind (payload extension). */
typedef struct {
  char ext[16];
  int64_t entries;
  uint64_t bytes;
} kind_tally_t;

typedef struct {
  kind_tally_t* kinds;
  int nkinds;
  int64_t entries;
  int64_t unreadable; /* entries whose size is unknown (bad meta) */
  uint64_t bytes;
} tally_t;

/* Adds one listing line to the tally; 0 on out of memory. A line the
 * tally cannot read still counts as an entry of unknown size. */
static int tally_line(tally_t* t, const char* line) {
  char ext[16] = "?";
  unsigned long long size = 0;
  int fields = sscanf(line, "%*32s %15s %llu", ext, &size);
  int k = 0;
  while (k < t->nkinds && strcmp(t->kinds[k].ext, ext) != 0) k++;
  if (k == t->nkinds) {
    kind_tally_t* grown = realloc(t->kinds, sizeof *grown * (size_t)(t->nkinds + 1));
    if (!grown) return 0;
    t->kinds = grown;
    memset(&t->kinds[k], 0, sizeof t->kinds[k]);
    memcpy(t->kinds[k].ext, ext, sizeof ext);
    t->nkinds++;
  }
  t->entries++;
  t->kinds[k].entries++;
  if (fields == 2) {
    t->kinds[k].bytes += size;
    t->bytes += size;
  } else {
    t->unreadable++;
  }
  return 1;
}

static int tally_listing(tally_t* t, const char* listing) {
  for (const char* line = listing; *line;) {
    const char* end = strchr(line, '\n');
    if (!tally_line(t, line)) return 0;
    line = end ? end + 1 : line + strlen(line);
  }
  return 1;
}

static const char* plural(int64_t n) { return n == 1 ? "y" : "ies"; }

static int cache_stats(jit_cache_t* cache) {
  if (!jit_disk_enabled(cache)) {
    /* The library's reason names the directory it refused, if any. */
    printf("directory: none in use\nusable: no (%s)\n",
           switched_off() ? "switched off with UOPJIT_CACHE=0" : uj_last_error());
    return 0;
  }
  printf("directory: %s\n", jit_disk_dir(cache));
  /* a directory this process cannot write still serves its entries, but
   * nothing new is stored and nothing is evicted or removed */
  if (jit_disk_writable(cache))
    printf("usable: yes\n");
  else
    printf("usable: for loading only (%s): new kernels are not stored\n", uj_last_error());
  char* listing = disk_listing(cache);
  if (!listing) return 1;
  jit_disk_usage_t usage;
  if (jit_disk_usage(cache, &usage) != UJ_OK) {
    fprintf(stderr, "uopjit cache: %s\n", uj_last_error());
    free(listing);
    return 1;
  }
  tally_t t = {0};
  int ok = tally_listing(&t, listing);
  if (ok) {
    printf("entries: %" PRId64 "\n", t.entries);
    for (int k = 0; k < t.nkinds; k++)
      printf("  %s: %" PRId64 " entr%s, %" PRIu64 " bytes\n", t.kinds[k].ext, t.kinds[k].entries,
             plural(t.kinds[k].entries), t.kinds[k].bytes);
    if (t.unreadable) printf("unreadable entries (size unknown): %" PRId64 "\n", t.unreadable);
    printf("bytes: %" PRIu64 "\n", t.bytes);
    printf("size on disk: %" PRId64 " bytes (payloads, their descriptions, stores under way)\n", usage.bytes);
    printf("limit: %" PRId64 " bytes (%s); the least recently used entries go first\n", usage.limit,
           usage.limit_from);
  } else {
    cli_out_of_memory("the tally of entries by kind", (uint64_t)(t.nkinds + 1) * sizeof *t.kinds);
  }
  free(t.kinds);
  free(listing);
  return ok ? 0 : 1;
}

static int cache_list(jit_cache_t* cache) {
  char* listing = disk_listing(cache);
  if (!listing) return 1;
  fputs(listing, stdout);
  free(listing);
  return 0;
}

static int cache_clear(jit_cache_t* cache) {
  char* listing = disk_listing(cache);
  if (!listing) return 1;
  int64_t entries = 0;
  for (const char* c = listing; *c; c++) entries += *c == '\n';
  free(listing);
  uj_status_t s = jit_disk_clear(cache);
  if (s != UJ_OK) {
    fprintf(stderr, "uopjit cache: %s\n", uj_last_error());
    return 1;
  }
  printf("removed %" PRId64 " entr%s from %s\n", entries, plural(entries), jit_disk_dir(cache));
  return 0;
}

int cli_cmd_cache(int argc, char** argv) {
  static const struct {
    const char* name;
    int (*run)(jit_cache_t* cache);
  } subcommands[] = {{"stats", cache_stats}, {"list", cache_list}, {"clear", cache_clear}};
  if (argc < 2) return cli_usage_error("cache", "wants stats, list or clear", NULL);
  if (argc > 2) return cli_usage_error("cache", "takes one argument, got also", argv[2]);
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
    if (strcmp(argv[1], subcommands[i].name) != 0) continue;
    jit_cache_t* cache = jit_cache_new();
    if (!cache) return cli_report(UJ_ERR_OOM); /* the library says what it was allocating */
    int rc = subcommands[i].run(cache);
    jit_cache_free(cache);
    return rc;
  }
  return cli_usage_error("cache", "wants stats, list or clear, got", argv[1]);
}
