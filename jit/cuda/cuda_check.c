/* jit/cuda/cuda_check.c: many generated sources checked with NVRTC in one
 * compile, for the tests' check that every kernel they make compiles for
 * the GPU on machines without one.
 *
 * NVRTC's optimizer and assembler are most of a compile's cost, which over
 * the few thousand modules of a test run, one compile each, was most of
 * `make test`'s time. The check here asks what an emitter's mistake
 * shows: the front end's verdict (-fdevice-syntax-only: parsing, names,
 * types, overloads), on all the sources at once, each in a namespace of
 * its own (without `extern "C"`, so that equal kernel names do not
 * collide; its macros undefined after it). When the batch fails, each
 * source is checked alone the same way to name the first that fails and
 * give its log. The code generator and the assembler are the engine's own
 * compile (uj_program_compile_cuda), which the tests make for a sample. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../rt/cuda.h"
#include "cuda.h"

#ifdef UJ_HAVE_CUDA

/* NVRTC's front end on text for compute_<arch>; UJ_ERR_COMPILE with the
 * log's start when it fails. */
static uj_status_t check_front_end(const rt_nvrtc_t* nv, const char* text, int arch) {
  nvrtcProgram prog;
  uj_status_t s = rt_nvrtc_check(nv->nvrtcCreateProgram(&prog, text, "uopjit-check.cu", 0, NULL, NULL),
                                 "nvrtcCreateProgram");
  if (s != UJ_OK) return s;
  char arch_option[48];
  snprintf(arch_option, sizeof arch_option, "--gpu-architecture=compute_%d", arch);
  const char* options[] = {arch_option, "-fdevice-syntax-only", "-default-device", "--fmad=false"};
  nvrtcResult r = nv->nvrtcCompileProgram(prog, (int)(sizeof options / sizeof *options), options);
  if (r != NVRTC_SUCCESS) s = rt_nvrtc_compile_failed(prog, r, arch_option);
  nv->nvrtcDestroyProgram(&prog);
  return s;
}

/* Appends source to buf (at *len, capacity *cap) inside namespace
 * uj_check_<k>, without `extern "C"`, its macros undefined after it. 0 on
 * OOM. */
static int append_wrapped(char** buf, size_t* len, size_t* cap, const char* source, int k) {
  size_t need = *len + strlen(source) * 2 + 256;
  if (need > *cap) {
    size_t grown = need * 2;
    char* more = realloc(*buf, grown);
    if (!more) return 0;
    *buf = more, *cap = grown;
  }
  char* out = *buf + *len;
  out += sprintf(out, "namespace uj_check_%d {\n", k);
  static const char cut[] = "extern \"C\" ";
  for (const char* c = source; *c;) {
    if (strncmp(c, cut, sizeof cut - 1) == 0) {
      c += sizeof cut - 1;
      continue;
    }
    *out++ = *c++;
  }
  out += sprintf(out, "\n}\n");
  /* #define NAME at a line's start: undefined after the namespace */
  for (const char* c = source; (c = strstr(c, "#define ")) != NULL; c += 8) {
    if (c != source && c[-1] != '\n') continue;
    const char* name = c + 8;
    size_t n = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
    if (n == 0 || n > 64) continue;
    out += sprintf(out, "#undef %.*s\n", (int)n, name);
  }
  *len = (size_t)(out - *buf);
  return 1;
}

uj_status_t jit_cuda_check_sources(const char* const* sources, int count, int arch, int* failing) {
  *failing = -1;
  const rt_nvrtc_t* nv = rt_nvrtc();
  if (!nv) return UJ_ERR_UNSUPPORTED;
  if (count <= 0) return UJ_OK;
  char* text = NULL;
  size_t len = 0, cap = 0;
  for (int k = 0; k < count; k++)
    if (!append_wrapped(&text, &len, &cap, sources[k], k)) {
      free(text);
      return rt_error(UJ_ERR_OOM, "out of memory joining %d CUDA sources for a check", count);
    }
  uj_status_t s = check_front_end(nv, text, arch);
  free(text);
  if (s != UJ_ERR_COMPILE) return s;
  char batch_error[800];
  snprintf(batch_error, sizeof batch_error, "%s", uj_last_error());
  for (int k = 0; k < count; k++) {
    s = check_front_end(nv, sources[k], arch);
    if (s != UJ_OK) {
      *failing = k;
      return s;
    }
  }
  return rt_error(UJ_ERR_COMPILE, "%d CUDA sources compile one by one but not together: %s", count, batch_error);
}

int jit_cuda_nvrtc_version(void) {
  const rt_nvrtc_t* nv = rt_nvrtc();
  return nv ? nv->major * 100 + nv->minor : 0;
}

#else /* !UJ_HAVE_CUDA */

uj_status_t jit_cuda_check_sources(const char* const* sources, int count, int arch, int* failing) {
  (void)sources, (void)count, (void)arch;
  *failing = -1;
  return rt_error(UJ_ERR_UNSUPPORTED, "this build has no CUDA");
}

int jit_cuda_nvrtc_version(void) { return 0; }

#endif
