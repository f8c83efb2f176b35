/* tests/fake_cuda.c: a stand-in for the CUDA driver (libcuda.so.1), built
 * as build/tests/libfakecuda.so with that soname, so that
 * tests/test_cuda_host.c can run the CUDA engine's host side (launch
 * planning, kernel arguments, memory, driver calls per call) on a machine
 * without a GPU. NVRTC stays the real one: kernels are compiled, never run
 * (NVRTC asks a loaded driver for its export tables: it is told there are
 * none, and compiles without them).
 *
 * One device, sm_90 with 132 multiprocessors. Device memory is host memory
 * and copies are memcpy, so data put on the "device" comes back unchanged;
 * launches do nothing but are recorded (kernel name, grid, block) and
 * counted, as are allocations, frees and synchronizations, for the test to
 * read through fake_cuda_stats and fake_cuda_launch. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  long launches, allocs, async_allocs, async_frees, frees, syncs, pushes, copies;
  long long async_bytes, up_bytes, down_bytes; /* allocated; copied host to device, device to host */
} fake_cuda_stats_t;

enum { RECORDED = 4096 };
static fake_cuda_stats_t stats;
static struct {
  char name[64];
  unsigned grid, block;
} recorded[RECORDED];

/* for the test (found with dlsym) */
void fake_cuda_stats(fake_cuda_stats_t* out) { *out = stats; }
/* launch i (counting from 0 since the start): its kernel's name, grid and
 * block; NULL past what was recorded */
const char* fake_cuda_launch(long i, unsigned* grid, unsigned* block) {
  if (i < 0 || i >= stats.launches || i >= RECORDED) return NULL;
  *grid = recorded[i].grid, *block = recorded[i].block;
  return recorded[i].name;
}

CUresult CUDAAPI cuInit(unsigned int flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }
/* NVRTC looks the driver up too once one is loaded, and asks it for its
 * internal tables: there are none here, and it compiles without them */
CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid* id) {
  (void)id;
  *table = NULL;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuDriverGetVersion(int* v) { return *v = 13000, CUDA_SUCCESS; }
CUresult CUDAAPI cuGetErrorName(CUresult e, const char** s) { return (void)e, *s = "CUDA_ERROR_FAKE", CUDA_SUCCESS; }
CUresult CUDAAPI cuGetErrorString(CUresult e, const char** s) { return (void)e, *s = "fake driver", CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetCount(int* n) { return *n = 1, CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) { return *d = ordinal, CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice d) {
  (void)d;
  strncpy(name, "fake sm_90", (size_t)len - 1);
  name[len - 1] = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    default: *v = 1; break; /* memory pools and the rest: supported */
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) { return (void)d, *c = (CUcontext)0x1, CUDA_SUCCESS; }
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) { return (void)d, CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) { return (void)c, stats.pushes++, CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPopCurrent(CUcontext* c) {
  if (c) *c = (CUcontext)0x1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int flags) { return (void)flags, *s = (CUstream)0x2, CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamDestroy(CUstream s) { return (void)s, CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamSynchronize(CUstream s) { return (void)s, stats.syncs++, CUDA_SUCCESS; }

static CUresult allocate(CUdeviceptr* p, size_t n) {
  void* q = calloc(1, n ? n : 1);
  if (!q) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)q;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) { return stats.allocs++, allocate(p, n); }
CUresult CUDAAPI cuMemFree(CUdeviceptr p) { return stats.frees++, free((void*)(uintptr_t)p), CUDA_SUCCESS; }
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* p, size_t n, CUstream s) {
  (void)s;
  stats.async_allocs++;
  stats.async_bytes += (long long)n;
  return allocate(p, n);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  return (void)s, stats.async_frees++, free((void*)(uintptr_t)p), CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream st) {
  stats.up_bytes += (long long)n;
  return (void)st, stats.copies++, memcpy((void*)(uintptr_t)d, s, n), CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream st) {
  stats.down_bytes += (long long)n;
  return (void)st, stats.copies++, memcpy(d, (const void*)(uintptr_t)s, n), CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return (void)st, stats.copies++, memmove((void*)(uintptr_t)d, (const void*)(uintptr_t)s, n), CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream st) {
  (void)st;
  unsigned int* p = (unsigned int*)(uintptr_t)d;
  for (size_t i = 0; i < n; i++) p[i] = v;
  return CUDA_SUCCESS;
}
/* the stream has done everything queued: run it now */
CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  (void)s;
  fn(data);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule* m, const void* image) { return (void)image, *m = (CUmodule)0x3, CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleUnload(CUmodule m) { return (void)m, CUDA_SUCCESS; }
/* a function is its name, kept (once per name) until the process ends */
enum { NAMES = 256 };
static char names[NAMES][64];
static int nnames;
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  (void)m;
  int i = 0;
  while (i < nnames && strcmp(names[i], name)) i++;
  if (i == nnames) {
    if (nnames == NAMES || strlen(name) >= sizeof names[0]) return CUDA_ERROR_OUT_OF_MEMORY;
    strcpy(names[nnames++], name);
  }
  *f = (CUfunction)(void*)names[i];
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  (void)gy, (void)gz, (void)by, (void)bz, (void)shared, (void)s, (void)params, (void)extra;
  if (stats.launches < RECORDED) {
    strncpy(recorded[stats.launches].name, (const char*)(void*)f, sizeof recorded[0].name - 1);
    recorded[stats.launches].grid = gx, recorded[stats.launches].block = bx;
  }
  stats.launches++;
  return CUDA_SUCCESS;
}
