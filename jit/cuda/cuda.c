/* jit/cuda/cuda.c: the CUDA engine: IR -> CUDA C (jit/cuda/cuda_emit.c) -> NVRTC ->
 * a cubin for the device's sm_XX -> cuModuleLoadData -> one cuLaunchKernel
 * per block, or per row chain (jit/cuda/cuda_launch.c), all on the
 * context's stream; and the same path for hand-written sources (the CUDA
 * convolution backend's).
 *
 * NVRTC compiles straight to a cubin for the device's architecture (no PTX
 * for the driver to JIT, so no PTX-version mismatch between NVRTC and the
 * driver); only a device newer than every architecture this NVRTC knows
 * gets PTX (pick_arch). A kernel is found in the context's memory cache or
 * the disk cache (jit/cache/cache.c, payload "cubin" or "ptx") by its key
 * text (key_text), else compiled and stored (jit_disk_get_build_load). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../rt/cuda.h"
#include "cuda_emit.h"
#include "../engine.h"
#include "cuda.h"
#include "cuda_groups.h"

uj_status_t jit_cuda_check(void) {
  uj_status_t s = rt_cuda_device_check();
  return s != UJ_OK ? s : rt_cuda_nvrtc_check();
}

int jit_cuda_available(void) { return jit_cuda_check() == UJ_OK; }

#ifdef UJ_HAVE_CUDA

struct jit_cuda_kernel {
  jit_cu_module_t m; /* the kernels' plans and arguments (source dropped) */
  rt_cuda_ctx_t* cc;
  CUmodule module;
  CUfunction* fns; /* by block; NULL for a block without a kernel */
};

static const char* const nvrtc_options[] = {"-default-device", "--fmad=false"};
enum { NOPTIONS = (int)(sizeof nvrtc_options / sizeof *nvrtc_options) };

/* ---- NVRTC ---- */

/* Compiles source for sm_<arch> (or, with ptx, to PTX for compute_<arch>)
 * into a malloc'ed image. UJ_ERR_COMPILE with NVRTC's log when the source
 * does not compile. */
static uj_status_t nvrtc_compile(const rt_nvrtc_t* nv, const char* source, int arch, int ptx, char** image,
                                 size_t* size) {
  nvrtcProgram prog;
  uj_status_t s = rt_nvrtc_check(nv->nvrtcCreateProgram(&prog, source, "uopjit.cu", 0, NULL, NULL), "nvrtcCreateProgram");
  if (s != UJ_OK) return s;
  char arch_option[64];
  snprintf(arch_option, sizeof arch_option, "--gpu-architecture=%s_%d", ptx ? "compute" : "sm", arch);
  const char* options[NOPTIONS + 1];
  options[0] = arch_option;
  for (int i = 0; i < NOPTIONS; i++) options[i + 1] = nvrtc_options[i];
  nvrtcResult r = nv->nvrtcCompileProgram(prog, NOPTIONS + 1, options);
  if (r != NVRTC_SUCCESS) {
    s = rt_nvrtc_compile_failed(prog, r, arch_option);
    nv->nvrtcDestroyProgram(&prog);
    return s;
  }
  size_t n = 0;
  s = ptx ? rt_nvrtc_check(nv->nvrtcGetPTXSize(prog, &n), "nvrtcGetPTXSize")
          : rt_nvrtc_check(nv->nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
  char* bytes = s == UJ_OK ? malloc(n + 1) : NULL;
  if (s == UJ_OK && !bytes) s = rt_error(UJ_ERR_OOM, "out of memory for a %zu-byte cubin", n);
  if (s == UJ_OK)
    s = ptx ? rt_nvrtc_check(nv->nvrtcGetPTX(prog, bytes), "nvrtcGetPTX")
            : rt_nvrtc_check(nv->nvrtcGetCUBIN(prog, bytes), "nvrtcGetCUBIN");
  nv->nvrtcDestroyProgram(&prog);
  if (s != UJ_OK) {
    free(bytes);
    return s;
  }
  bytes[n] = 0; /* PTX is text; a cubin ignores the extra byte */
  *image = bytes;
  *size = n;
  return UJ_OK;
}

static int arch_supported(const rt_nvrtc_t* nv, int arch) {
  for (int i = 0; i < nv->narchs; i++)
    if (nv->archs[i] == arch) return 1;
  return 0;
}

/* The architecture to compile for on a device of compute capability
 * `device`: its own when NVRTC knows it; PTX for NVRTC's newest when the
 * device is newer than all of them. */
static uj_status_t pick_arch(const rt_nvrtc_t* nv, int device, int* arch, int* ptx) {
  *ptx = 0;
  *arch = device;
  if (arch_supported(nv, device)) return UJ_OK;
  int newest = nv->archs[nv->narchs - 1];
  if (device > newest) {
    *arch = newest;
    *ptx = 1;
    return UJ_OK;
  }
  return rt_error(UJ_ERR_UNSUPPORTED, "NVRTC %d.%d cannot compile for this device's sm_%d (it knows sm_%d to sm_%d)",
                  nv->major, nv->minor, device, nv->archs[0], newest);
}

/* The context's device and NVRTC, and the architecture to compile for. */
static uj_status_t device_target(uj_ctx_t* ctx, rt_cuda_ctx_t** cc, const rt_nvrtc_t** nv, int* arch, int* ptx) {
  uj_status_t s = rt_cuda_ctx_get(ctx, cc);
  if (s != UJ_OK) return s;
  if (!(*nv = rt_nvrtc())) return UJ_ERR_UNSUPPORTED;
  return pick_arch(*nv, 10 * (*cc)->sm_major + (*cc)->sm_minor, arch, ptx);
}

/* The cache key: engine, NVRTC version, architecture, options and the CUDA
 * source itself, so that a change of the emitter can never reuse an old
 * cubin. */
static char* key_text(const rt_nvrtc_t* nv, int arch, int ptx, const char* source) {
  rt_buf_t b = {0};
  rt_buf_printf(&b, "engine cuda\nnvrtc %d.%d\narch %s_%d\noptions", nv->major, nv->minor, ptx ? "compute" : "sm",
                arch);
  for (int i = 0; i < NOPTIONS; i++) rt_buf_printf(&b, " %s", nvrtc_options[i]);
  rt_buf_printf(&b, "\n%s", source);
  return rt_buf_take(&b);
}

static int kernel_count(const jit_cu_module_t* m) {
  int n = 0;
  for (int b = 0; b < m->nblocks; b++) n += (m->kernels[b].plan.strategy != JIT_CU_NONE) + (m->kernels[b].chain >= 2);
  return n;
}

/* The longest architecture number taken: NVRTC's are two or three digits. */
#define ARCH_DIGITS_MAX 4

/* "sm_" then 1 to ARCH_DIGITS_MAX decimal digits, the first not 0, and
 * nothing else: *number. sscanf's %d would also take a sign, leading
 * spaces and a value past INT_MAX (wrapping "sm_4294967386" to 90). */
static int arch_number(const char* arch, int* number) {
  if (strncmp(arch, "sm_", 3) != 0) return 0;
  const char* digits = arch + 3;
  int n = 0, value = 0;
  for (; digits[n] >= '0' && digits[n] <= '9'; n++) {
    if (n == ARCH_DIGITS_MAX) return 0;
    value = 10 * value + (digits[n] - '0');
  }
  if (n == 0 || digits[n] != '\0' || digits[0] == '0') return 0;
  *number = value;
  return 1;
}

/* A compile, and for a cache miss the kernels' or the hand-written
 * source's load (module or names set) into the context. */
typedef struct {
  jit_state_t* js;
  const rt_nvrtc_t* nv;
  rt_cuda_ctx_t* cc;
  ir_hash_t h;
  const char* key;
  const char* source;
  int arch, ptx;
  jit_cu_module_t* module;
  const char* const* names;
  int nnames;
} cu_build_t;

static const char* image_ext(int ptx) { return ptx ? "ptx" : "cubin"; }

/* The disk cache's build: NVRTC's image of the source. */
static uj_status_t compile_job(void* arg, char** image, size_t* size) {
  const cu_build_t* j = arg;
  return nvrtc_compile(j->nv, j->source, j->arch, j->ptx, image, size);
}

/* The module image (cubin, or PTX for a device newer than NVRTC knows) for
 * source under key: the disk cache's verified copy (the bytes it checked,
 * never the file again) when it has one, *from_disk then 1; else NVRTC's,
 * which is then stored (a failed store only costs a compile later), one
 * context of the process compiling a key at a time (jit_disk_get_or_build). */
static uj_status_t image_for(jit_state_t* js, const rt_nvrtc_t* nv, ir_hash_t h, const char* key,
                             const char* source, int arch, int ptx, char** image, size_t* size, int* from_disk) {
  cu_build_t job = {.js = js, .nv = nv, .source = source, .arch = arch, .ptx = ptx};
  return jit_disk_get_or_build(js->cache, h, key, image_ext(ptx), compile_job, &job, image, size, from_disk);
}

/* "sm_XX" as a number NVRTC knows. */
static uj_status_t parse_arch(const rt_nvrtc_t* nv, const char* arch, int* number) {
  if (!arch || !arch_number(arch, number))
    return rt_error(UJ_ERR_INVALID, "cuda: architecture \"%s\" is not of the form sm_XX (sm_ and up to %d digits)",
                    arch ? arch : "(null)", ARCH_DIGITS_MAX);
  if (!arch_supported(nv, *number))
    return rt_error(UJ_ERR_UNSUPPORTED, "NVRTC %d.%d cannot compile for sm_%d (it knows sm_%d to sm_%d)", nv->major,
                    nv->minor, *number, nv->archs[0], nv->archs[nv->narchs - 1]);
  return UJ_OK;
}

uj_status_t jit_cuda_compile_source(const char* source, const char* arch, size_t* cubin_size) {
  const rt_nvrtc_t* nv = rt_nvrtc();
  if (!nv) return UJ_ERR_UNSUPPORTED;
  int number = 0;
  uj_status_t s = parse_arch(nv, arch, &number);
  char* image = NULL;
  size_t size = 0;
  if (s == UJ_OK) s = nvrtc_compile(nv, source, number, 0, &image, &size);
  if (s == UJ_OK && cubin_size) *cubin_size = size;
  free(image);
  return s;
}

uj_status_t jit_cuda_compile_for(jit_state_t* js, const ir_func_t* f, const int64_t* params, const char* arch,
                                 int* kernels, int* reused) {
  if (reused) *reused = 0;
  const rt_nvrtc_t* nv = rt_nvrtc();
  if (!nv) return UJ_ERR_UNSUPPORTED;
  int number = 0;
  uj_status_t s0 = parse_arch(nv, arch, &number);
  if (s0 != UJ_OK) return s0;
  jit_cu_module_t m;
  uj_status_t s = jit_cu_emit(f, params, &m);
  if (s != UJ_OK) return s;
  char* key = key_text(nv, number, 0, m.source);
  char* image = NULL;
  size_t size = 0;
  if (!key) s = rt_error(UJ_ERR_OOM, "engine cuda: out of memory printing the kernel's key text");
  ir_hash_t h = key ? ir_hash_bytes(key, strlen(key)) : (ir_hash_t){0, 0};
  /* found: a verified cubin for exactly this key was compiled by this NVRTC
   * before; else it is compiled and stored, for a later run on such a device */
  int found = 0;
  if (s == UJ_OK) s = image_for(js, nv, h, key, m.source, number, 0, &image, &size, &found);
  if (s == UJ_OK && reused) *reused = found;
  if (s == UJ_OK && kernels) *kernels = kernel_count(&m);
  free(image);
  free(key);
  jit_cu_module_release(&m);
  return s;
}

/* ---- modules ---- */

/* Unloads a module once the context's stream has run what was queued:
 * a call releases its kernel right after queueing the launches, and an
 * evicted module is freed by that release. */
static void module_unload(rt_cuda_ctx_t* cc, CUmodule module) {
  if (!module || rt_cuda_enter(cc) != UJ_OK) return;
  cc->drv->cuStreamSynchronize(cc->stream);
  cc->drv->cuModuleUnload(module);
  rt_cuda_leave(cc);
}

static void kernel_free(void* p) {
  jit_cuda_kernel_t* k = p;
  if (!k) return;
  module_unload(k->cc, k->module);
  free(k->fns);
  jit_cu_module_release(&k->m);
  free(k);
}


/* Loads the image and finds every block's kernel (a jit_cuda_kernel_t);
 * takes the module description b->module over (emptied) when it succeeds,
 * and leaves it to the caller when it fails (the caller may try another
 * image). */
static uj_status_t load_kernel(void* arg, const char* image, size_t size, void** out) {
  const cu_build_t* b = arg;
  (void)size;
  rt_cuda_ctx_t* cc = b->cc;
  jit_cu_module_t* m = b->module;
  jit_cuda_kernel_t* k = calloc(1, sizeof *k);
  /* fns[b]: uj_block_<b>; fns[nblocks + b]: uj_chain_<b> */
  if (!k || !(k->fns = calloc(2 * (size_t)m->nblocks + 1, sizeof *k->fns))) {
    free(k);
    return rt_error(UJ_ERR_OOM, "engine cuda: out of memory allocating a module of %d kernels (%zu bytes)", m->nblocks,
                    sizeof *k + (2 * (size_t)m->nblocks + 1) * sizeof *k->fns);
  }
  k->cc = cc;
  uj_status_t s = rt_cuda_enter(cc);
  if (s != UJ_OK) {
    kernel_free(k);
    return s;
  }
  s = rt_cuda_check(cc->drv->cuModuleLoadData(&k->module, image), "cuModuleLoadData");
  for (int b = 0; b < m->nblocks && s == UJ_OK; b++) {
    if (m->kernels[b].plan.strategy == JIT_CU_NONE) continue;
    char name[32];
    snprintf(name, sizeof name, "uj_block_%d", b);
    s = rt_cuda_check(cc->drv->cuModuleGetFunction(&k->fns[b], k->module, name), "cuModuleGetFunction");
    if (s != UJ_OK) rt_error_prefix("%s: ", name);
    if (s != UJ_OK || m->kernels[b].chain < 2) continue;
    snprintf(name, sizeof name, "uj_chain_%d", b);
    s = rt_cuda_check(cc->drv->cuModuleGetFunction(&k->fns[m->nblocks + b], k->module, name), "cuModuleGetFunction");
    if (s != UJ_OK) rt_error_prefix("%s: ", name);
  }
  rt_cuda_leave(cc);
  if (s != UJ_OK) {
    kernel_free(k); /* k->m is still empty: m stays the caller's */
    return s;
  }
  k->m = *m;
  memset(m, 0, sizeof *m);
  free(k->m.source);
  k->m.source = NULL;
  *out = k;
  return UJ_OK;
}


/* A loaded module's cost in the memory cache: its image (the driver keeps
 * the code, host side and on the device, in proportion to it) plus the
 * host-side tables. */
static uj_status_t build_kernel(void* arg, void** value, size_t* bytes) {
  const cu_build_t* b = arg;
  size_t size = 0;
  uj_status_t s =
      jit_disk_get_build_load(b->js->cache, b->h, b->key, image_ext(b->ptx), compile_job, load_kernel, arg, value, &size);
  const jit_cuda_kernel_t* k = *value;
  if (s == UJ_OK)
    *bytes = size + sizeof *k + ((size_t)k->m.nblocks + 1) * (sizeof *k->fns + sizeof *k->m.kernels);
  return s;
}

/* jit/memo.c keeps a per-program memo in front of this, so that a repeated
 * call does not emit again. */
uj_status_t jit_cuda_get(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                         jit_cache_entry_t** out) {
  *out = NULL;
  rt_cuda_ctx_t* cc;
  const rt_nvrtc_t* nv;
  int arch, ptx;
  uj_status_t s = device_target(ctx, &cc, &nv, &arch, &ptx);
  if (s != UJ_OK) return s;
  jit_cu_module_t m;
  if ((s = jit_cu_emit(f, params, &m)) != UJ_OK) return s;
  char* key = key_text(nv, arch, ptx, m.source);
  if (!key) {
    jit_cu_module_release(&m);
    return rt_error(UJ_ERR_OOM, "engine cuda: out of memory printing the kernel's key text");
  }
  cu_build_t b = {js, nv, cc, ir_hash_bytes(key, strlen(key)), key, m.source, arch, ptx, &m, NULL, 0};
  s = jit_cache_get_or_build(js->cache, &js->lock, b.h, key, build_kernel, &b, kernel_free, out);
  jit_cu_module_release(&m);
  free(key);
  return s;
}

/* ---- launching ---- */

/* Places the chain-local temporaries (ir/chain_local.c) in the context's
 * scratch, after the largest mode-2 partials of these launches (launches
 * run in stream order, so each kernel finds its scratch unused by the
 * ones before): one row per CUDA block of the row kernel that uses it
 * (rows start .. start + grid: the rows its pointer shift lands on), or
 * its full size when its chain launches block by block. The scratch is
 * kept by the context, so a call allocates nothing. at[t] receives the
 * address of temporary t. */
static uj_status_t place_chain_local(rt_cuda_ctx_t* cc, const jit_cu_module_t* m, const ir_env_t* env,
                                     const jit_cu_launch_t* launches, int count, void** at) {
  const ir_func_t* f = env->f;
  const ir_buffer_t* buf = env->buf;
  enum { ALIGN = 256 };
  size_t total = 0;
  for (int i = 0; i < count; i++)
    if (launches[i].scratch > total) total = launches[i].scratch;
  size_t* offset = calloc((size_t)f->ntensors + 1, sizeof *offset);
  if (!offset) return rt_error(UJ_ERR_OOM, "engine cuda: out of memory placing the temporaries of %d tensors", f->ntensors);
  int any = 0;
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_TEMP || tt->noalloc || !tt->chain_local) continue;
    size_t row = (size_t)uj_dtype_size(tt->dtype), bytes = 0;
    for (int a = 1; a < tt->ndim; a++) row *= (size_t)buf[t].dims[a];
    for (int i = 0; i < count && !bytes; i++) {
      const jit_cu_kernel_t* kk = &m->kernels[launches[i].block];
      for (int a = 0; launches[i].chain && a < kk->chain_nargs && !bytes; a++)
        if (kk->chain_args[a].kind == JIT_CU_ARG_TENSOR && kk->chain_args[a].index == t) {
          int oob = 0;
          int64_t start = ir_ix_eval(env, f->blocks[launches[i].block].loops[0].start, &oob);
          bytes = row * (size_t)(start + launches[i].grid);
        }
    }
    if (!bytes) bytes = row * (size_t)(tt->ndim ? buf[t].dims[0] : 1);
    total = (total + ALIGN - 1) / ALIGN * ALIGN;
    offset[t] = total;
    total += bytes;
    any = 1;
  }
  void *work = NULL, *ticket = NULL;
  uj_status_t s = any ? rt_cuda_workspace(cc, total, &work, &ticket) : UJ_OK;
  for (int t = 0; t < f->ntensors && s == UJ_OK && any; t++)
    if (f->tensors[t].chain_local) at[t] = (char*)work + offset[t];
  free(offset);
  return s;
}

/* 256 threads per CUDA block; which kernels, their grids and modes follow
 * from the sizes of the run (jit/cuda/cuda_launch.c, which evaluates the
 * loops' extents on the host from the same index expressions the kernels
 * evaluate); a REDUCE kernel's mode 2 gets the context's reduction scratch
 * for its partials. */
uj_status_t jit_cuda_launch(uj_ctx_t* ctx, const jit_cuda_kernel_t* k, const ir_func_t* f, const ir_buffer_t* buf,
                            const int64_t* params) {
  rt_cuda_ctx_t* cc = k->cc;
  (void)ctx;
  enum { ON_STACK = 64 };
  int64_t stack_loops[ON_STACK];
  jit_cu_launch_t stack_launches[ON_STACK];
  int64_t* loops = f->next_loop_id <= ON_STACK ? stack_loops : calloc((size_t)f->next_loop_id + 1, sizeof *loops);
  jit_cu_launch_t* launches = f->nblocks <= ON_STACK ? stack_launches : calloc((size_t)f->nblocks, sizeof *launches);
  uj_status_t s = UJ_OK;
  if (!loops || !launches)
    s = rt_error(UJ_ERR_OOM, "engine cuda: out of memory planning the launches of %d blocks", f->nblocks);
  ir_env_t env = {f, (ir_buffer_t*)buf, params, loops};
  int count = 0;
  if (s == UJ_OK) s = jit_cu_launches(&k->m, f, &env, cc->sm_count, launches, &count);
  /* the context's scratch: the partials of mode 2 first, then the
   * chain-local temporaries this engine places (chain_scratch) */
  void* placed[ON_STACK] = {0};
  void** chain_local = f->ntensors <= ON_STACK ? placed : calloc((size_t)f->ntensors, sizeof *chain_local);
  if (s == UJ_OK && !chain_local)
    s = rt_error(UJ_ERR_OOM, "engine cuda: out of memory placing the temporaries of %d tensors", f->ntensors);
  if (s == UJ_OK) s = place_chain_local(cc, &k->m, &env, launches, count, chain_local);
  int entered = s == UJ_OK && (s = rt_cuda_enter(cc)) == UJ_OK;
  for (int i = 0; i < count && s == UJ_OK; i++) {
    const jit_cu_launch_t* l = &launches[i];
    const jit_cu_kernel_t* kk = &k->m.kernels[l->block];
    int reduce = !l->chain && kk->plan.strategy == JIT_CU_REDUCE;
    int nargs = l->chain ? kk->chain_nargs : kk->nargs;
    const jit_cu_arg_t* args = l->chain ? kk->chain_args : kk->args;
    void* work_area = NULL;
    void* ticket = NULL;
    if (l->scratch && (s = rt_cuda_workspace(cc, l->scratch, &work_area, &ticket)) != UJ_OK) break;
    /* the argument values, then pointers to them */
    uint64_t values[600];
    void* argv[604];
    if (nargs > 600) {
      s = rt_error(UJ_ERR_UNSUPPORTED, "cuda: block %d's kernel takes %d arguments", l->block, nargs);
      break;
    }
    for (int a = 0; a < nargs; a++) {
      const jit_cu_arg_t* arg = &args[a];
      if (arg->kind == JIT_CU_ARG_TENSOR && f->tensors[arg->index].chain_local)
        values[a] = (uint64_t)(uintptr_t)chain_local[arg->index];
      else if (arg->kind == JIT_CU_ARG_TENSOR) values[a] = (uint64_t)(uintptr_t)buf[arg->index].data;
      else if (arg->kind == JIT_CU_ARG_DIM) values[a] = (uint64_t)buf[arg->index].dims[arg->axis];
      else values[a] = (uint64_t)params[arg->index];
      argv[a] = &values[a];
    }
    int nargv = nargs, mode = l->mode;
    CUdeviceptr part = 0, part_i = 0, ticket_ptr = (CUdeviceptr)(uintptr_t)ticket;
    if (reduce) {
      part = (CUdeviceptr)(uintptr_t)work_area;
      part_i = part + (CUdeviceptr)((size_t)kk->plan.ncarried * (size_t)l->grid * 8);
      argv[nargv++] = &mode;
      argv[nargv++] = &part;
      argv[nargv++] = &part_i;
      argv[nargv++] = &ticket_ptr;
    }
    CUfunction fn = l->chain ? k->fns[f->nblocks + l->block] : k->fns[l->block];
    CUresult r = cc->drv->cuLaunchKernel(fn, (unsigned)l->grid, 1, 1, JIT_CU_THREADS_PER_BLOCK, 1, 1, 0, cc->stream,
                                         argv, NULL);
    if ((s = rt_cuda_check(r, "cuLaunchKernel")) != UJ_OK) rt_error_prefix("block %d: ", l->block);
  }
  if (entered) rt_cuda_leave(cc);
  if (loops != stack_loops) free(loops);
  if (launches != stack_launches) free(launches);
  if (chain_local != placed) free(chain_local);
  return s;
}

/* ---- hand-written sources ---- */

struct jit_cuda_source {
  rt_cuda_ctx_t* cc;
  CUmodule module;
  int nfns;
  CUfunction fns[];
};

static void source_free(void* p) {
  jit_cuda_source_t* m = p;
  if (!m) return;
  module_unload(m->cc, m->module);
  free(m);
}

/* The key of a hand-written module: the engine's key for the source, then
 * the kernels looked up in it. */
static char* source_key(const rt_nvrtc_t* nv, int arch, int ptx, const char* source, const char* const* names,
                        int nnames) {
  char* base = key_text(nv, arch, ptx, source);
  if (!base) return NULL;
  rt_buf_t b = {0};
  rt_buf_printf(&b, "%s\nfunctions", base);
  for (int i = 0; i < nnames; i++) rt_buf_printf(&b, " %s", names[i]);
  free(base);
  return rt_buf_take(&b);
}

/* Loads image as a hand-written module (a jit_cuda_source_t) and finds its
 * kernels. */
static uj_status_t load_source(void* arg, const char* image, size_t size, void** out) {
  const cu_build_t* b = arg;
  (void)size;
  jit_cuda_source_t* m = calloc(1, sizeof *m + (size_t)b->nnames * sizeof(CUfunction));
  if (!m)
    return rt_error(UJ_ERR_OOM, "out of memory allocating a module of %d kernels (%zu bytes)", b->nnames,
                    sizeof *m + (size_t)b->nnames * sizeof(CUfunction));
  rt_cuda_ctx_t* cc = b->cc;
  m->cc = cc;
  m->nfns = b->nnames;
  uj_status_t s = rt_cuda_enter(cc);
  if (s == UJ_OK) {
    s = rt_cuda_check(cc->drv->cuModuleLoadData(&m->module, image), "cuModuleLoadData");
    for (int i = 0; i < b->nnames && s == UJ_OK; i++)
      if ((s = rt_cuda_check(cc->drv->cuModuleGetFunction(&m->fns[i], m->module, b->names[i]),
                             "cuModuleGetFunction")) != UJ_OK)
        rt_error_prefix("%s: ", b->names[i]);
    rt_cuda_leave(cc);
  }
  if (s != UJ_OK) {
    source_free(m);
    return s;
  }
  *out = m;
  return UJ_OK;
}

static uj_status_t build_source(void* arg, void** value, size_t* bytes) {
  const cu_build_t* b = arg;
  size_t size = 0;
  uj_status_t s =
      jit_disk_get_build_load(b->js->cache, b->h, b->key, image_ext(b->ptx), compile_job, load_source, arg, value, &size);
  if (s == UJ_OK) *bytes = size + sizeof(jit_cuda_source_t) + (size_t)b->nnames * sizeof(CUfunction); /* as build_kernel */
  return s;
}

uj_status_t jit_cuda_source_get(uj_ctx_t* ctx, const char* source, const char* const* names, int nnames,
                                const jit_cuda_source_t** out, jit_cache_entry_t** ref) {
  *out = NULL;
  *ref = NULL;
  jit_state_t* js = jit_state(ctx);
  if (!js) return UJ_ERR_OOM;
  rt_cuda_ctx_t* cc;
  const rt_nvrtc_t* nv;
  int arch, ptx;
  uj_status_t s = device_target(ctx, &cc, &nv, &arch, &ptx);
  if (s != UJ_OK) return s;
  char* key = source_key(nv, arch, ptx, source, names, nnames);
  if (!key) return rt_error(UJ_ERR_OOM, "out of memory printing a module's key text (%zu bytes of source)", strlen(source));
  cu_build_t b = {js, nv, cc, ir_hash_bytes(key, strlen(key)), key, source, arch, ptx, NULL, names, nnames};
  s = jit_cache_get_or_build(js->cache, &js->lock, b.h, key, build_source, &b, source_free, ref);
  free(key);
  if (s == UJ_OK) *out = jit_cache_value(*ref);
  return s;
}

void jit_cuda_source_release(uj_ctx_t* ctx, jit_cache_entry_t* ref) {
  /* a reference exists only where the context's JIT state does */
  if (ref) jit_cache_release(jit_state(ctx)->cache, ref);
}

uj_status_t jit_cuda_source_launch(const jit_cuda_source_t* m, int fn, const unsigned grid[3], unsigned threads,
                                   void** args) {
  if (fn < 0 || fn >= m->nfns) return rt_error(UJ_ERR_INVALID, "cuda: kernel %d of a module of %d", fn, m->nfns);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return UJ_OK;
  uj_status_t s = rt_cuda_enter(m->cc);
  if (s != UJ_OK) return s;
  s = rt_cuda_check(m->cc->drv->cuLaunchKernel(m->fns[fn], grid[0], grid[1], grid[2], threads, 1, 1, 0,
                                                m->cc->stream, args, NULL),
                    "cuLaunchKernel");
  rt_cuda_leave(m->cc);
  return s;
}

uj_status_t jit_cuda_source_compile_for(uj_ctx_t* ctx, const char* source, const char* const* names, int nnames,
                                        const char* arch, int* reused) {
  if (reused) *reused = 0;
  jit_state_t* js = jit_state(ctx);
  if (!js) return UJ_ERR_OOM;
  const rt_nvrtc_t* nv = rt_nvrtc();
  if (!nv) return UJ_ERR_UNSUPPORTED;
  int number = 0;
  uj_status_t s = parse_arch(nv, arch, &number);
  if (s != UJ_OK) return s;
  char* key = source_key(nv, number, 0, source, names, nnames);
  if (!key) return rt_error(UJ_ERR_OOM, "out of memory printing a module's key text (%zu bytes of source)", strlen(source));
  ir_hash_t h = ir_hash_bytes(key, strlen(key));
  char* image = NULL;
  size_t size = 0;
  int found = 0;
  s = image_for(js, nv, h, key, source, number, 0, &image, &size, &found);
  if (s == UJ_OK && reused) *reused = found;
  free(image);
  free(key);
  return s;
}

#else /* !UJ_HAVE_CUDA */

struct jit_cuda_kernel {
  int unused;
};

static uj_status_t no_cuda(void) {
  return rt_error(UJ_ERR_UNSUPPORTED, "this build has no CUDA support (the CUDA headers were not found at build time)");
}

uj_status_t jit_cuda_compile_for(jit_state_t* js, const ir_func_t* f, const int64_t* params, const char* arch,
                                 int* kernels, int* reused) {
  (void)js, (void)f, (void)params, (void)arch, (void)kernels, (void)reused;
  return no_cuda();
}
uj_status_t jit_cuda_get(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                         jit_cache_entry_t** out) {
  (void)ctx, (void)js, (void)f, (void)params;
  *out = NULL;
  return no_cuda();
}
uj_status_t jit_cuda_launch(uj_ctx_t* ctx, const jit_cuda_kernel_t* k, const ir_func_t* f, const ir_buffer_t* buf,
                            const int64_t* params) {
  (void)ctx, (void)k, (void)f, (void)buf, (void)params;
  return no_cuda();
}
uj_status_t jit_cuda_compile_source(const char* source, const char* arch, size_t* cubin_size) {
  (void)source, (void)arch, (void)cubin_size;
  return no_cuda();
}

uj_status_t jit_cuda_source_get(uj_ctx_t* ctx, const char* source, const char* const* names, int nnames,
                                const jit_cuda_source_t** out, jit_cache_entry_t** ref) {
  (void)ctx, (void)source, (void)names, (void)nnames;
  *out = NULL;
  *ref = NULL;
  return no_cuda();
}
void jit_cuda_source_release(uj_ctx_t* ctx, jit_cache_entry_t* ref) { (void)ctx, (void)ref; }
uj_status_t jit_cuda_source_launch(const jit_cuda_source_t* m, int fn, const unsigned grid[3], unsigned threads,
                                   void** args) {
  (void)m, (void)fn, (void)grid, (void)threads, (void)args;
  return no_cuda();
}
uj_status_t jit_cuda_source_compile_for(uj_ctx_t* ctx, const char* source, const char* const* names, int nnames,
                                        const char* arch, int* reused) {
  (void)ctx, (void)source, (void)names, (void)nnames, (void)arch, (void)reused;
  return no_cuda();
}

#endif

/* ---- the engine's row (jit/engine.h) ---- */

static int cuda_available(uj_ctx_t* ctx) {
  (void)ctx;
  return jit_cuda_available();
}

static uj_status_t cuda_check(uj_ctx_t* ctx) {
  (void)ctx;
  return jit_cuda_check();
}

static uj_status_t cuda_run(uj_ctx_t* ctx, jit_state_t* js, const void* kernel, const ir_func_t* f, ir_buffer_t* buf,
                            const int64_t* params) {
  (void)js;
  return jit_cuda_launch(ctx, kernel, f, buf, params);
}

/* CUDA source needs neither a GPU nor NVRTC to be written */
static char* cuda_dump(const ir_func_t* f, const int64_t* params, uj_dump_t what) {
  (void)what;
  jit_cu_module_t m;
  if (jit_cu_emit(f, params, &m) != UJ_OK) return NULL;
  char* text = m.source;
  m.source = NULL;
  jit_cu_module_release(&m);
  return text;
}

const jit_engine_t jit_engine_cuda = {
    .device = UJ_CUDA,
    .settings = 1u << RT_SETTING_MEMORY_CACHE_LIMIT | 1u << RT_SETTING_CACHE | 1u << RT_SETTING_DISK_CACHE_LIMIT,
    .dumps = 1u << UJ_DUMP_CUDA,
    .chain_scratch = 1, /* in the context's scratch (place_chain_local) */
    .available = cuda_available,
    .check = cuda_check,
    .get = jit_cuda_get,
    .run = cuda_run,
    .dump = cuda_dump,
    .compile_for = jit_cuda_compile_for,
    .run_groups = jit_cuda_groups_run,
    .compile_groups_for = jit_cuda_groups_compile_for,
};
