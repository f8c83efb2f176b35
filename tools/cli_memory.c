/* tools/cli_memory.c: refusing a run whose buffers cannot fit in memory,
 * before anything is allocated.
 *
 * `uopjit run` fills every input with values, so a shape too large for the
 * machine does not fail at malloc (Linux overcommits) but later, with the
 * machine swapping or the process killed. Instead the bytes every buffer
 * will take are added up first (inputs, outputs and, for --check, their
 * f64 copies), with overflow checked at every step, and compared with what
 * the process can get: the memory the kernel reports available
 * (MemAvailable in /proc/meminfo, else free pages), less where a limit on
 * the process (ulimit -v, ulimit -d) leaves less room than that. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* A field of /proc/meminfo in bytes, or 0 when it cannot be read. */
static uint64_t meminfo_bytes(const char* field) {
  FILE* f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  uint64_t bytes = 0;
  size_t len = strlen(field);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, len) == 0 && line[len] == ':') {
      bytes = strtoull(line + len + 1, NULL, 10) * 1024; /* the file counts kB */
      break;
    }
  fclose(f);
  return bytes;
}

/* Field `index` (0-based) of /proc/self/statm in bytes, or 0. */
static uint64_t statm_bytes(int index) {
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long v[7] = {0};
  int n = fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]);
  fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  return n > index && page > 0 ? (uint64_t)v[index] * (uint64_t)page : 0;
}

/* Lowers *room to what limit `resource` leaves beyond `used` bytes. */
static void apply_limit(int resource, uint64_t used, const char* what, uint64_t* room, const char** source) {
  struct rlimit r;
  if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return;
  uint64_t left = (uint64_t)r.rlim_cur > used ? (uint64_t)r.rlim_cur - used : 0;
  if (left < *room) {
    *room = left;
    *source = what;
  }
}

/* The bytes this process can still allocate and touch, and what bounds it;
 * UINT64_MAX when nothing can be found out. */
static uint64_t memory_room(const char** source) {
  uint64_t room = meminfo_bytes("MemAvailable");
  *source = "available memory (MemAvailable)";
  if (!room) {
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    room = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    *source = "free memory";
  }
  apply_limit(RLIMIT_AS, statm_bytes(0), "the address-space limit (ulimit -v)", &room, source);
  apply_limit(RLIMIT_DATA, statm_bytes(5), "the data-size limit (ulimit -d)", &room, source);
  return room;
}

/* *total += the bytes of t; 0 when that overflows. */
static int add_tensor(uint64_t* total, int ndim, const int64_t* dims, uint64_t elem_size) {
  uint64_t bytes = elem_size;
  for (int k = 0; k < ndim; k++)
    if (dims[k] < 0 || __builtin_mul_overflow(bytes, (uint64_t)dims[k], &bytes)) return 0;
  return !__builtin_add_overflow(*total, bytes, total);
}

int cli_out_of_memory(const char* what, uint64_t bytes) {
  fprintf(stderr, "uopjit: out of memory allocating %s (%llu bytes)\n", what, (unsigned long long)bytes);
  return 1;
}

int cli_check_memory(const char* cmd, uint64_t bytes, int overflow) {
  if (overflow) {
    fprintf(stderr, "uopjit %s: the buffers need more than 2^64 bytes; choose a smaller --shape\n", cmd);
    return 1;
  }
  const char* source;
  uint64_t room = memory_room(&source);
  if (bytes <= room) return 0;
  fprintf(stderr,
          "uopjit %s: the buffers need %llu bytes (%.1f GiB) but %s leaves %llu bytes (%.1f GiB); "
          "choose a smaller --shape\n",
          cmd, (unsigned long long)bytes, (double)bytes / GIB, source, (unsigned long long)room,
          (double)room / GIB);
  return 1;
}

int cli_check_run_memory(const char* cmd, uj_program_t* p, const cli_input_t* inputs, int check) {
  int nin = uj_program_io_count(p, 0), nout = uj_program_io_count(p, 1);
  uj_tensor_t* in = calloc((size_t)nin + 1, sizeof *in);
  const uj_tensor_t** in_ptr = calloc((size_t)nin + 1, sizeof *in_ptr);
  if (!in || !in_ptr) {
    free(in);
    free(in_ptr);
    fprintf(stderr, "uopjit %s: out of memory describing %d inputs\n", cmd, nin);
    return 1;
  }
  /* the inputs as `run` lays them out; their data is never read here, but
   * a described tensor must point somewhere */
  static double placeholder;
  uint64_t total = 0, reference = 0; /* reference: the f64 copies of --check */
  int ok = 1;
  for (int i = 0; i < nin; i++) {
    uj_tensor_t* t = &in[i];
    t->dtype = inputs[i].dtype;
    t->device = UJ_CPU;
    t->data = &placeholder;
    t->ndim = inputs[i].ndim;
    memcpy(t->dims, inputs[i].dims, sizeof t->dims);
    in_ptr[i] = t;
    ok = ok && add_tensor(&total, t->ndim, t->dims, (uint64_t)uj_dtype_size(t->dtype)) &&
         add_tensor(&reference, t->ndim, t->dims, 8);
  }
  int rc = 0;
  for (int i = 0; i < nout && ok && !rc; i++) {
    int ndim;
    int64_t dims[UJ_MAX_DIMS];
    uj_dtype_t dtype;
    uj_status_t s = uj_program_shape(p, UJ_FORWARD, in_ptr, NULL, i, &ndim, dims);
    if (s == UJ_OK) s = uj_program_output_dtype(p, UJ_FORWARD, in_ptr, i, &dtype);
    if (s != UJ_OK) rc = cli_report(s);
    else ok = add_tensor(&total, ndim, dims, (uint64_t)uj_dtype_size(dtype)) && add_tensor(&reference, ndim, dims, 8);
  }
  free(in);
  free(in_ptr);
  if (rc) return rc;
  if (ok && check) ok = !__builtin_add_overflow(total, reference, &total);
  return cli_check_memory(cmd, total, !ok);
}
