/* rt/cuda.c: the CUDA Driver API and NVRTC loaded at run time, and a
 * context's device state (see rt/cuda.h).
 *
 * Loading: each library is opened once per process (pthread_once) and its
 * symbols looked up by the names cuda.h and nvrtc.h map them to, so that
 * the function types come from the headers and the binary never links
 * either library. What failed is remembered as text and turned into the
 * last error each time a caller asks, so every thread gets the reason.
 *
 * A uopjit context that touches the GPU gets, on first use, the device's
 * primary context (shared with any CUDA runtime code in the process, as
 * the runtime itself does), a stream of its own on which every copy and
 * launch of the context is queued, and later the scratch memory of
 * grid-wide reductions. Calls push the primary context for their span and
 * pop it after, so the caller's current context is left as it was. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

#ifdef UJ_HAVE_CUDA

#define RT_STR_(x) #x
#define RT_STR(x) RT_STR_(x)

#ifndef UJ_CUDA_DIR
#define UJ_CUDA_DIR "/usr/local/cuda"
#endif

/* ---- loading ------------------------------------------------------------------ */

static pthread_once_t driver_once = PTHREAD_ONCE_INIT, nvrtc_once = PTHREAD_ONCE_INIT;
static rt_cuda_driver_t driver;
static rt_nvrtc_t nvrtc;
static int driver_ok, nvrtc_ok, device_count;
static char driver_reason[512], nvrtc_reason[1024];

/* Looks name up in lib into *slot; a missing required symbol is the reason
 * written to reason (and 0 returned). */
static int load_symbol(void* lib, const char* name, void* slot, size_t slot_size, int required, char* reason,
                       size_t cap, const char* libname) {
  void* sym = dlsym(lib, name);
  if (!sym && required) {
    snprintf(reason, cap, "%s has no symbol %s (a driver older than the CUDA %d headers this was built with?)",
             libname, name, CUDA_VERSION / 1000);
    return 0;
  }
  memcpy(slot, &sym, slot_size); /* object to function pointer, as POSIX allows */
  return 1;
}
#define LOAD(tbl, lib, name, required, reason, libname) \
  load_symbol(lib, RT_STR(name), &(tbl).name, sizeof (tbl).name, required, reason, sizeof reason, libname)

static void load_driver(void) {
  const char* names[] = {"libcuda.so.1", "libcuda.so"};
  void* lib = NULL;
  char first_error[256] = "";
  for (int i = 0; i < 2 && !lib; i++) {
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib && i == 0) snprintf(first_error, sizeof first_error, "%s", dlerror());
  }
  if (!lib) {
    snprintf(driver_reason, sizeof driver_reason, "no CUDA driver (libcuda.so.1 not found: %s)", first_error);
    return;
  }
  const char* L = "libcuda.so.1";
  int ok = LOAD(driver, lib, cuInit, 1, driver_reason, L) && LOAD(driver, lib, cuDriverGetVersion, 1, driver_reason, L) &&
           LOAD(driver, lib, cuGetErrorName, 1, driver_reason, L) &&
           LOAD(driver, lib, cuGetErrorString, 1, driver_reason, L) &&
           LOAD(driver, lib, cuDeviceGetCount, 1, driver_reason, L) &&
           LOAD(driver, lib, cuDeviceGet, 1, driver_reason, L) &&
           LOAD(driver, lib, cuDeviceGetName, 1, driver_reason, L) &&
           LOAD(driver, lib, cuDeviceGetAttribute, 1, driver_reason, L) &&
           LOAD(driver, lib, cuDevicePrimaryCtxRetain, 1, driver_reason, L) &&
           LOAD(driver, lib, cuDevicePrimaryCtxRelease, 1, driver_reason, L) &&
           LOAD(driver, lib, cuCtxPushCurrent, 1, driver_reason, L) &&
           LOAD(driver, lib, cuCtxPopCurrent, 1, driver_reason, L) &&
           LOAD(driver, lib, cuStreamCreate, 1, driver_reason, L) &&
           LOAD(driver, lib, cuStreamDestroy, 1, driver_reason, L) &&
           LOAD(driver, lib, cuStreamSynchronize, 1, driver_reason, L) &&
           LOAD(driver, lib, cuMemAlloc, 1, driver_reason, L) && LOAD(driver, lib, cuMemFree, 1, driver_reason, L) &&
           LOAD(driver, lib, cuMemcpyHtoDAsync, 1, driver_reason, L) &&
           LOAD(driver, lib, cuMemcpyDtoHAsync, 1, driver_reason, L) &&
           LOAD(driver, lib, cuMemcpyDtoDAsync, 1, driver_reason, L) &&
           LOAD(driver, lib, cuMemsetD32Async, 1, driver_reason, L) &&
           LOAD(driver, lib, cuModuleLoadData, 1, driver_reason, L) &&
           LOAD(driver, lib, cuModuleUnload, 1, driver_reason, L) &&
           LOAD(driver, lib, cuModuleGetFunction, 1, driver_reason, L) &&
           LOAD(driver, lib, cuLaunchKernel, 1, driver_reason, L) &&
           LOAD(driver, lib, cuMemAllocAsync, 0, driver_reason, L) &&
           LOAD(driver, lib, cuMemFreeAsync, 0, driver_reason, L) &&
           LOAD(driver, lib, cuLaunchHostFunc, 0, driver_reason, L);
  if (!ok) return; /* the library stays open: dlclose of a driver is not worth the risk */
  CUresult r = driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = NULL;
    if (driver.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    snprintf(driver_reason, sizeof driver_reason, "no usable CUDA device (cuInit: %s)", name ? name : "unknown error");
    return;
  }
  if (driver.cuDeviceGetCount(&device_count) != CUDA_SUCCESS) device_count = 0;
  driver_ok = 1;
}

const rt_cuda_driver_t* rt_cuda_driver(void) {
  pthread_once(&driver_once, load_driver);
  if (!driver_ok) {
    rt_error(UJ_ERR_DEVICE, "%s", driver_reason);
    return NULL;
  }
  return &driver;
}

uj_status_t rt_cuda_device_check(void) {
  if (!rt_cuda_driver()) return UJ_ERR_DEVICE;
  return device_count > 0 ? UJ_OK : rt_error(UJ_ERR_DEVICE, "the CUDA driver reports no device");
}

int rt_cuda_device_present(void) { return rt_cuda_device_check() == UJ_OK; }

/* Opens the first NVRTC that loads; its name into nvrtc.path. */
static void* open_nvrtc(char* tried, size_t cap) {
  const char* forced = getenv("UOPJIT_NVRTC");
  char names[8][sizeof nvrtc.path];
  int n = 0;
  if (forced && *forced) {
    snprintf(names[n++], sizeof names[0], "%s", forced);
  } else {
    snprintf(names[n++], sizeof names[0], "libnvrtc.so.%d", CUDA_VERSION / 1000);
    snprintf(names[n++], sizeof names[0], "libnvrtc.so.12");
    snprintf(names[n++], sizeof names[0], "libnvrtc.so");
    snprintf(names[n++], sizeof names[0], "%s/lib64/libnvrtc.so.%d", UJ_CUDA_DIR, CUDA_VERSION / 1000);
    snprintf(names[n++], sizeof names[0], "%s/lib64/libnvrtc.so", UJ_CUDA_DIR);
    snprintf(names[n++], sizeof names[0], "%s/lib/libnvrtc.so.%d", UJ_CUDA_DIR, CUDA_VERSION / 1000);
  }
  size_t used = 0;
  tried[0] = 0;
  for (int i = 0; i < n; i++) {
    void* lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      memcpy(nvrtc.path, names[i], sizeof nvrtc.path); /* the same size, NUL-terminated */
      return lib;
    }
    if (used < cap) used += (size_t)snprintf(tried + used, cap - used, "%s%s", i ? ", " : "", names[i]);
  }
  return NULL;
}

static void load_nvrtc(void) {
  char tried[600];
  void* lib = open_nvrtc(tried, sizeof tried);
  if (!lib) {
    snprintf(nvrtc_reason, sizeof nvrtc_reason, "no NVRTC (tried %s)", tried);
    return;
  }
  const char* L = nvrtc.path;
  int ok = LOAD(nvrtc, lib, nvrtcVersion, 1, nvrtc_reason, L) && LOAD(nvrtc, lib, nvrtcGetErrorString, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcGetNumSupportedArchs, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcGetSupportedArchs, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcCreateProgram, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcDestroyProgram, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcCompileProgram, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcGetProgramLogSize, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcGetProgramLog, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcGetCUBINSize, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcGetCUBIN, 1, nvrtc_reason, L) &&
           LOAD(nvrtc, lib, nvrtcGetPTXSize, 1, nvrtc_reason, L) && LOAD(nvrtc, lib, nvrtcGetPTX, 1, nvrtc_reason, L);
  if (!ok) return;
  if (nvrtc.nvrtcVersion(&nvrtc.major, &nvrtc.minor) != NVRTC_SUCCESS) {
    snprintf(nvrtc_reason, sizeof nvrtc_reason, "%s: nvrtcVersion failed", L);
    return;
  }
  int n = 0;
  if (nvrtc.nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) {
    snprintf(nvrtc_reason, sizeof nvrtc_reason, "%s: nvrtcGetNumSupportedArchs failed", L);
    return;
  }
  int* archs = calloc((size_t)n, sizeof *archs);
  if (!archs || nvrtc.nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) {
    free(archs);
    snprintf(nvrtc_reason, sizeof nvrtc_reason, "%s: nvrtcGetSupportedArchs failed", L);
    return;
  }
  /* NVRTC lists them as 10 * major + minor; keep the last 64 (the newest) */
  int from = n > 64 ? n - 64 : 0;
  for (int i = from; i < n; i++) nvrtc.archs[nvrtc.narchs++] = archs[i];
  free(archs);
  nvrtc_ok = 1;
}

const rt_nvrtc_t* rt_nvrtc(void) {
  pthread_once(&nvrtc_once, load_nvrtc);
  if (!nvrtc_ok) {
    rt_error(UJ_ERR_UNSUPPORTED, "%s", nvrtc_reason);
    return NULL;
  }
  return &nvrtc;
}

uj_status_t rt_cuda_nvrtc_check(void) { return rt_nvrtc() ? UJ_OK : UJ_ERR_UNSUPPORTED; }

int rt_cuda_nvrtc_present(void) { return rt_nvrtc() != NULL; }

/* ---- errors --------------------------------------------------------------------- */

uj_status_t rt_cuda_check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return UJ_OK;
  const char *name = NULL, *text = NULL;
  if (driver.cuGetErrorName && driver.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
  if (driver.cuGetErrorString && driver.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
  uj_status_t s = r == CUDA_ERROR_OUT_OF_MEMORY ? UJ_ERR_OOM : UJ_ERR_DEVICE;
  if (name) return rt_error(s, "%s: %s (%s)", call, name, text ? text : "no description");
  return rt_error(s, "%s: CUDA error %d", call, (int)r);
}

uj_status_t rt_nvrtc_check(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return UJ_OK;
  const char* text = nvrtc.nvrtcGetErrorString ? nvrtc.nvrtcGetErrorString(r) : NULL;
  if (text) return rt_error(UJ_ERR_COMPILE, "%s: %s", call, text);
  return rt_error(UJ_ERR_COMPILE, "%s: NVRTC error %d", call, (int)r);
}

uj_status_t rt_nvrtc_compile_failed(nvrtcProgram prog, nvrtcResult r, const char* options_text) {
  size_t size = 0;
  char* log = NULL;
  if (nvrtc.nvrtcGetProgramLogSize(prog, &size) == NVRTC_SUCCESS && (log = malloc(size + 1)) &&
      nvrtc.nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
    log[size] = 0;
  else if (log)
    log[0] = 0;
  uj_status_t s = rt_error(UJ_ERR_COMPILE, "nvrtcCompileProgram (%s): %s: %.700s", options_text,
                           nvrtc.nvrtcGetErrorString(r), log ? log : "(no log)");
  free(log);
  return s;
}

/* ---- the context's device state ---------------------------------------------------- */

static uj_status_t pick_ordinal(int* ordinal) {
  *ordinal = 0;
  if (device_count <= 0) return rt_error(UJ_ERR_DEVICE, "the CUDA driver reports no device");
  char accepted[96];
  snprintf(accepted, sizeof accepted, "a device number from 0 to %d (this machine has %d)", device_count - 1,
           device_count);
  int64_t n;
  int set;
  uj_status_t s = rt_env_int("UOPJIT_CUDA_DEVICE", 0, device_count - 1, accepted, &n, &set);
  if (s == UJ_OK && set) *ordinal = (int)n;
  return s;
}

static uj_status_t attribute(rt_cuda_ctx_t* c, CUdevice_attribute a, int* out) {
  return rt_cuda_check(c->drv->cuDeviceGetAttribute(out, a, c->device), "cuDeviceGetAttribute");
}

static uj_status_t ctx_open(rt_cuda_ctx_t* c) {
  uj_status_t s = pick_ordinal(&c->ordinal);
  if (s == UJ_OK) s = rt_cuda_check(c->drv->cuDeviceGet(&c->device, c->ordinal), "cuDeviceGet");
  if (s == UJ_OK) s = rt_cuda_check(c->drv->cuDeviceGetName(c->name, (int)sizeof c->name - 1, c->device), "cuDeviceGetName");
  if (s == UJ_OK) s = attribute(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &c->sm_major);
  if (s == UJ_OK) s = attribute(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &c->sm_minor);
  if (s == UJ_OK) s = attribute(c, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &c->sm_count);
  int pools = 0;
  if (s == UJ_OK && c->drv->cuMemAllocAsync && c->drv->cuMemFreeAsync &&
      c->drv->cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, c->device) == CUDA_SUCCESS)
    c->stream_ordered = pools != 0;
  if (s == UJ_OK) s = rt_cuda_check(c->drv->cuDevicePrimaryCtxRetain(&c->cu, c->device), "cuDevicePrimaryCtxRetain");
  if (s != UJ_OK) return s;
  if ((s = rt_cuda_enter(c)) != UJ_OK) return s;
  s = rt_cuda_check(c->drv->cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  rt_cuda_leave(c);
  return s;
}

uj_status_t rt_cuda_ctx_get(uj_ctx_t* ctx, rt_cuda_ctx_t** out) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "ctx is NULL");
  rt_cuda_ctx_t* c = __atomic_load_n(&ctx->cuda, __ATOMIC_ACQUIRE);
  if (c) {
    *out = c;
    return UJ_OK;
  }
  const rt_cuda_driver_t* drv = rt_cuda_driver();
  if (!drv) return UJ_ERR_DEVICE;
  if (!(c = calloc(1, sizeof *c)))
    return rt_error(UJ_ERR_OOM, "out of memory allocating the context's GPU state (%zu bytes)", sizeof *c);
  c->drv = drv;
  uj_status_t s = ctx_open(c);
  if (s != UJ_OK) {
    rt_cuda_ctx_free(c);
    return s;
  }
  /* threads may race to make a context's first state: one wins */
  rt_cuda_ctx_t* expected = NULL;
  if (!__atomic_compare_exchange_n(&ctx->cuda, &expected, c, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    rt_cuda_ctx_free(c);
    c = expected;
  }
  *out = c;
  return UJ_OK;
}

void rt_cuda_ctx_free(rt_cuda_ctx_t* c) {
  if (!c) return;
  if (c->cu && rt_cuda_enter(c) == UJ_OK) {
    if (c->stream) c->drv->cuStreamSynchronize(c->stream);
    if (c->work) c->drv->cuMemFree(c->work);
    if (c->stream) c->drv->cuStreamDestroy(c->stream);
    rt_cuda_leave(c);
  }
  if (c->cu) c->drv->cuDevicePrimaryCtxRelease(c->device);
  free(c);
}

uj_status_t rt_cuda_enter(rt_cuda_ctx_t* c) { return rt_cuda_check(c->drv->cuCtxPushCurrent(c->cu), "cuCtxPushCurrent"); }

void rt_cuda_leave(rt_cuda_ctx_t* c) {
  CUcontext popped;
  c->drv->cuCtxPopCurrent(&popped);
}

/* ---- memory ------------------------------------------------------------------------- */

static void* as_ptr(CUdeviceptr p) { return (void*)(uintptr_t)p; }
static CUdeviceptr as_dev(const void* p) { return (CUdeviceptr)(uintptr_t)p; }

uj_status_t rt_cuda_alloc(rt_cuda_ctx_t* c, size_t bytes, void** out) {
  uj_status_t s = rt_cuda_enter(c);
  if (s != UJ_OK) return s;
  CUdeviceptr p = 0;
  s = rt_cuda_check(c->drv->cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc");
  rt_cuda_leave(c);
  if (s == UJ_OK) *out = as_ptr(p);
  return s;
}

uj_status_t rt_cuda_free(rt_cuda_ctx_t* c, void* p) {
  if (!p) return UJ_OK;
  uj_status_t s = rt_cuda_enter(c);
  if (s != UJ_OK) return s;
  /* memory the stream may still be using must outlive that use */
  s = rt_cuda_check(c->drv->cuStreamSynchronize(c->stream), "cuStreamSynchronize");
  if (s == UJ_OK) s = rt_cuda_check(c->drv->cuMemFree(as_dev(p)), "cuMemFree");
  rt_cuda_leave(c);
  return s;
}

uj_status_t rt_cuda_alloc_temp(rt_cuda_ctx_t* c, size_t bytes, void** out) {
  if (!c->stream_ordered) return rt_cuda_alloc(c, bytes, out);
  uj_status_t s = rt_cuda_enter(c);
  if (s != UJ_OK) return s;
  CUdeviceptr p = 0;
  s = rt_cuda_check(c->drv->cuMemAllocAsync(&p, bytes ? bytes : 1, c->stream), "cuMemAllocAsync");
  rt_cuda_leave(c);
  if (s == UJ_OK) *out = as_ptr(p);
  return s;
}

uj_status_t rt_cuda_free_temp(rt_cuda_ctx_t* c, void* p) {
  if (!p) return UJ_OK;
  if (!c->stream_ordered) return rt_cuda_free(c, p);
  uj_status_t s = rt_cuda_enter(c);
  if (s != UJ_OK) return s;
  s = rt_cuda_check(c->drv->cuMemFreeAsync(as_dev(p), c->stream), "cuMemFreeAsync");
  rt_cuda_leave(c);
  return s;
}

uj_status_t rt_cuda_copy(rt_cuda_ctx_t* c, void* dst, int dst_on_device, const void* src, int src_on_device,
                         size_t bytes) {
  if (!bytes) return UJ_OK;
  if (!dst_on_device && !src_on_device) {
    memmove(dst, src, bytes);
    return UJ_OK;
  }
  uj_status_t s = rt_cuda_enter(c);
  if (s != UJ_OK) return s;
  if (dst_on_device && src_on_device) {
    s = rt_cuda_check(c->drv->cuMemcpyDtoDAsync(as_dev(dst), as_dev(src), bytes, c->stream), "cuMemcpyDtoDAsync");
  } else {
    if (dst_on_device)
      s = rt_cuda_check(c->drv->cuMemcpyHtoDAsync(as_dev(dst), src, bytes, c->stream), "cuMemcpyHtoDAsync");
    else
      s = rt_cuda_check(c->drv->cuMemcpyDtoHAsync(dst, as_dev(src), bytes, c->stream), "cuMemcpyDtoHAsync");
    /* the host side may be touched as soon as this returns */
    if (s == UJ_OK) s = rt_cuda_check(c->drv->cuStreamSynchronize(c->stream), "cuStreamSynchronize");
  }
  rt_cuda_leave(c);
  return s;
}

static void CUDA_CB free_host(void* p) { free(p); }

uj_status_t rt_cuda_upload(rt_cuda_ctx_t* c, void* dst, void* src, size_t bytes) {
  uj_status_t s = rt_cuda_enter(c);
  if (s != UJ_OK) {
    free(src);
    return s;
  }
  if (bytes) s = rt_cuda_check(c->drv->cuMemcpyHtoDAsync(as_dev(dst), src, bytes, c->stream), "cuMemcpyHtoDAsync");
  if (s == UJ_OK && c->drv->cuLaunchHostFunc &&
      rt_cuda_check(c->drv->cuLaunchHostFunc(c->stream, free_host, src), "cuLaunchHostFunc") == UJ_OK) {
    rt_cuda_leave(c);
    return UJ_OK; /* src is the host function's */
  }
  /* no host function (or it failed, or the copy did): wait, then free */
  uj_status_t w = rt_cuda_check(c->drv->cuStreamSynchronize(c->stream), "cuStreamSynchronize");
  if (s == UJ_OK) s = w;
  free(src);
  rt_cuda_leave(c);
  return s;
}

uj_status_t rt_cuda_sync(rt_cuda_ctx_t* c) {
  uj_status_t s = rt_cuda_enter(c);
  if (s != UJ_OK) return s;
  s = rt_cuda_check(c->drv->cuStreamSynchronize(c->stream), "cuStreamSynchronize");
  rt_cuda_leave(c);
  return s;
}

/* The ticket sits first, the partial values from byte 256 on. */
enum { WORK_TICKET_BYTES = 256 };

uj_status_t rt_cuda_workspace(rt_cuda_ctx_t* c, size_t bytes, void** work, void** ticket) {
  if (c->work_bytes < bytes + WORK_TICKET_BYTES) {
    size_t want = bytes + WORK_TICKET_BYTES < 65536 ? 65536 : bytes + WORK_TICKET_BYTES;
    uj_status_t s = rt_cuda_enter(c);
    if (s != UJ_OK) return s;
    /* a queued reduction may still use the old scratch */
    s = rt_cuda_check(c->drv->cuStreamSynchronize(c->stream), "cuStreamSynchronize");
    if (s == UJ_OK && c->work) {
      s = rt_cuda_check(c->drv->cuMemFree(c->work), "cuMemFree");
      c->work = 0;
      c->work_bytes = 0;
    }
    CUdeviceptr p = 0;
    if (s == UJ_OK) s = rt_cuda_check(c->drv->cuMemAlloc(&p, want), "cuMemAlloc");
    if (s == UJ_OK) {
      s = rt_cuda_check(c->drv->cuMemsetD32Async(p, 0, WORK_TICKET_BYTES / 4, c->stream), "cuMemsetD32Async");
      if (s == UJ_OK) {
        c->work = p;
        c->work_bytes = want;
      } else {
        c->drv->cuMemFree(p);
      }
    }
    rt_cuda_leave(c);
    if (s != UJ_OK) return s;
  }
  *ticket = as_ptr(c->work);
  *work = as_ptr(c->work + WORK_TICKET_BYTES);
  return UJ_OK;
}

void rt_cuda_describe(const rt_cuda_ctx_t* c, const char** name, int* sm_major, int* sm_minor, int* sm_count) {
  if (name) *name = c->name;
  if (sm_major) *sm_major = c->sm_major;
  if (sm_minor) *sm_minor = c->sm_minor;
  if (sm_count) *sm_count = c->sm_count;
}

#else /* !UJ_HAVE_CUDA */

/* Built without the CUDA headers: there is no GPU side, and each entry
 * point says so. */
static uj_status_t no_cuda(void) {
  return rt_error(UJ_ERR_UNSUPPORTED, "this build has no CUDA support (the CUDA headers were not found at build time)");
}

uj_status_t rt_cuda_device_check(void) { return no_cuda(); }
uj_status_t rt_cuda_nvrtc_check(void) { return no_cuda(); }
int rt_cuda_device_present(void) { return 0; }
int rt_cuda_nvrtc_present(void) { return 0; }
uj_status_t rt_cuda_ctx_get(uj_ctx_t* ctx, rt_cuda_ctx_t** out) {
  (void)ctx;
  *out = NULL;
  return no_cuda();
}
void rt_cuda_ctx_free(rt_cuda_ctx_t* c) { (void)c; }
uj_status_t rt_cuda_enter(rt_cuda_ctx_t* c) {
  (void)c;
  return no_cuda();
}
void rt_cuda_leave(rt_cuda_ctx_t* c) { (void)c; }
uj_status_t rt_cuda_alloc(rt_cuda_ctx_t* c, size_t bytes, void** out) {
  (void)c, (void)bytes, (void)out;
  return no_cuda();
}
uj_status_t rt_cuda_free(rt_cuda_ctx_t* c, void* p) {
  (void)c, (void)p;
  return no_cuda();
}
uj_status_t rt_cuda_alloc_temp(rt_cuda_ctx_t* c, size_t bytes, void** out) {
  (void)c, (void)bytes, (void)out;
  return no_cuda();
}
uj_status_t rt_cuda_free_temp(rt_cuda_ctx_t* c, void* p) {
  (void)c, (void)p;
  return no_cuda();
}
uj_status_t rt_cuda_copy(rt_cuda_ctx_t* c, void* dst, int dst_on_device, const void* src, int src_on_device,
                         size_t bytes) {
  (void)c, (void)dst, (void)dst_on_device, (void)src, (void)src_on_device, (void)bytes;
  return no_cuda();
}
uj_status_t rt_cuda_sync(rt_cuda_ctx_t* c) {
  (void)c;
  return no_cuda();
}
uj_status_t rt_cuda_upload(rt_cuda_ctx_t* c, void* dst, void* src, size_t bytes) {
  (void)c, (void)dst, (void)bytes;
  free(src);
  return no_cuda();
}
uj_status_t rt_cuda_workspace(rt_cuda_ctx_t* c, size_t bytes, void** work, void** ticket) {
  (void)c, (void)bytes, (void)work, (void)ticket;
  return no_cuda();
}
void rt_cuda_describe(const rt_cuda_ctx_t* c, const char** name, int* sm_major, int* sm_minor, int* sm_count) {
  (void)c;
  if (name) *name = "";
  if (sm_major) *sm_major = 0;
  if (sm_minor) *sm_minor = 0;
  if (sm_count) *sm_count = 0;
}

#endif
