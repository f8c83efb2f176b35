/* rt/cuda.h: the CUDA Driver API and NVRTC, loaded with dlopen at run time,
 * and what a context keeps on the GPU (its device, primary context and
 * stream, and the scratch memory of grid-wide reductions).
 *
 * Nothing links against libcuda or libnvrtc: one build runs on machines with
 * and without a GPU. Building needs only the toolkit's headers (the Makefile
 * defines UJ_HAVE_CUDA when it finds them); the function tables below take
 * their types from those headers. Without the headers every entry point here
 * still exists and reports that this build has no CUDA support.
 *
 * Errors: every failing driver call becomes UJ_ERR_DEVICE (UJ_ERR_OOM for
 * CUDA_ERROR_OUT_OF_MEMORY) with "cuCall: CUDA_ERROR_NAME (description)" in
 * uj_last_error(); NVRTC failures become UJ_ERR_COMPILE the same way. */
#ifndef UJ_RT_CUDA_H
#define UJ_RT_CUDA_H

#include <stddef.h>

#include "rt.h"

#ifdef UJ_HAVE_CUDA
#include <cuda.h>
#include <nvrtc.h>

/* The driver entry points the library calls, each typed from cuda.h's own
 * prototype (cuda.h maps some names to versioned symbols, cuMemAlloc to
 * cuMemAlloc_v2: the member and the symbol looked up follow the same
 * mapping, so the type always matches the symbol). */
#define RT_CUDA_FN(name) __typeof__(name)* name
typedef struct {
  RT_CUDA_FN(cuInit);
  RT_CUDA_FN(cuDriverGetVersion);
  RT_CUDA_FN(cuGetErrorName);
  RT_CUDA_FN(cuGetErrorString);
  RT_CUDA_FN(cuDeviceGetCount);
  RT_CUDA_FN(cuDeviceGet);
  RT_CUDA_FN(cuDeviceGetName);
  RT_CUDA_FN(cuDeviceGetAttribute);
  RT_CUDA_FN(cuDevicePrimaryCtxRetain);
  RT_CUDA_FN(cuDevicePrimaryCtxRelease);
  RT_CUDA_FN(cuCtxPushCurrent);
  RT_CUDA_FN(cuCtxPopCurrent);
  RT_CUDA_FN(cuStreamCreate);
  RT_CUDA_FN(cuStreamDestroy);
  RT_CUDA_FN(cuStreamSynchronize);
  RT_CUDA_FN(cuMemAlloc);
  RT_CUDA_FN(cuMemFree);
  RT_CUDA_FN(cuMemcpyHtoDAsync);
  RT_CUDA_FN(cuMemcpyDtoHAsync);
  RT_CUDA_FN(cuMemcpyDtoDAsync);
  RT_CUDA_FN(cuMemsetD32Async);
  RT_CUDA_FN(cuModuleLoadData);
  RT_CUDA_FN(cuModuleUnload);
  RT_CUDA_FN(cuModuleGetFunction);
  RT_CUDA_FN(cuLaunchKernel);
  /* stream-ordered allocation (CUDA 11.2); NULL when the driver lacks it */
  RT_CUDA_FN(cuMemAllocAsync);
  RT_CUDA_FN(cuMemFreeAsync);
  /* a host function in stream order (CUDA 10); NULL when the driver lacks it */
  RT_CUDA_FN(cuLaunchHostFunc);
} rt_cuda_driver_t;

typedef struct {
  RT_CUDA_FN(nvrtcVersion);
  RT_CUDA_FN(nvrtcGetErrorString);
  RT_CUDA_FN(nvrtcGetNumSupportedArchs);
  RT_CUDA_FN(nvrtcGetSupportedArchs);
  RT_CUDA_FN(nvrtcCreateProgram);
  RT_CUDA_FN(nvrtcDestroyProgram);
  RT_CUDA_FN(nvrtcCompileProgram);
  RT_CUDA_FN(nvrtcGetProgramLogSize);
  RT_CUDA_FN(nvrtcGetProgramLog);
  RT_CUDA_FN(nvrtcGetCUBINSize);
  RT_CUDA_FN(nvrtcGetCUBIN);
  RT_CUDA_FN(nvrtcGetPTXSize);
  RT_CUDA_FN(nvrtcGetPTX);
  int major, minor;      /* nvrtcVersion() */
  char path[512];        /* the library that was loaded */
  int archs[64], narchs; /* the sm_XX it compiles for, as 10 * major + minor, ascending */
} rt_nvrtc_t;
#undef RT_CUDA_FN

/* The driver, loaded and initialised (cuInit) once per process; NULL with
 * UJ_ERR_DEVICE and the reason ("no CUDA driver (libcuda.so.1 not found:
 * ...)") as the last error. */
const rt_cuda_driver_t* rt_cuda_driver(void);
/* NVRTC, loaded once per process: libnvrtc.so.<toolkit major> (then .12,
 * unversioned) from the loader's path, then from the toolkit's lib64 and
 * lib directories. UOPJIT_NVRTC names a library to use instead. NULL with
 * UJ_ERR_UNSUPPORTED and the reason as the last error. */
const rt_nvrtc_t* rt_nvrtc(void);

/* r != CUDA_SUCCESS: sets the last error to "call: CUDA_ERROR_NAME
 * (description)" and returns UJ_ERR_DEVICE (UJ_ERR_OOM for out of memory);
 * UJ_OK otherwise. */
uj_status_t rt_cuda_check(CUresult r, const char* call);
/* The same for NVRTC: UJ_ERR_COMPILE with "call: NVRTC_ERROR_... ". */
uj_status_t rt_nvrtc_check(nvrtcResult r, const char* call);
/* A failed nvrtcCompileProgram (r): UJ_ERR_COMPILE with "nvrtcCompileProgram
 * (options_text): NVRTC's error: the start of its log". */
uj_status_t rt_nvrtc_compile_failed(nvrtcProgram prog, nvrtcResult r, const char* options_text);

/* What a context keeps on the GPU. Made on first use by rt_cuda_ctx_get,
 * released by uj_ctx_free after the JIT state (whose modules live in this
 * context). */
struct rt_cuda_ctx {
  const rt_cuda_driver_t* drv;
  int ordinal;          /* UOPJIT_CUDA_DEVICE, else 0 */
  CUdevice device;
  CUcontext cu;         /* the device's primary context, retained */
  CUstream stream;      /* every copy and launch of this uopjit context */
  int sm_major, sm_minor, sm_count;
  int stream_ordered;   /* cuMemAllocAsync usable (memory pools supported) */
  char name[256];
  /* scratch of grid-wide reductions: partial values, then a ticket counter
   * that the last block of each launch leaves at 0 */
  CUdeviceptr work;
  size_t work_bytes;
};
#endif

typedef struct rt_cuda_ctx rt_cuda_ctx_t;

/* UJ_OK when the driver loads and reports at least one device, else
 * UJ_ERR_DEVICE with the reason (UJ_ERR_UNSUPPORTED in a build without
 * CUDA). */
uj_status_t rt_cuda_device_check(void);
/* UJ_OK when NVRTC loads, else UJ_ERR_UNSUPPORTED with the reason. */
uj_status_t rt_cuda_nvrtc_check(void);
int rt_cuda_device_present(void);
int rt_cuda_nvrtc_present(void);

/* The context's CUDA state, made on first use: the driver, device
 * UOPJIT_CUDA_DEVICE (default 0), its primary context and a stream of the
 * context's own. UJ_ERR_DEVICE with the reason when there is none. */
uj_status_t rt_cuda_ctx_get(uj_ctx_t* ctx, rt_cuda_ctx_t** out);
/* Releases the stream, the scratch memory and the primary context. */
void rt_cuda_ctx_free(rt_cuda_ctx_t* c);

/* Makes c's context current on this thread for a span of driver calls,
 * and restores the caller's afterwards. */
uj_status_t rt_cuda_enter(rt_cuda_ctx_t* c);
void rt_cuda_leave(rt_cuda_ctx_t* c);

/* Device memory (the context entered by the callee). Allocation of 0
 * bytes gives a 1-byte block, so a tensor's data is never NULL. */
uj_status_t rt_cuda_alloc(rt_cuda_ctx_t* c, size_t bytes, void** out);
uj_status_t rt_cuda_free(rt_cuda_ctx_t* c, void* p);
/* Memory for the span of one run, ordered on the stream: freed memory is
 * reused only by work queued after the free (stream-ordered allocation
 * where the device has it, else allocation that waits for the stream
 * before freeing). */
uj_status_t rt_cuda_alloc_temp(rt_cuda_ctx_t* c, size_t bytes, void** out);
uj_status_t rt_cuda_free_temp(rt_cuda_ctx_t* c, void* p);
/* Copies bytes between host and device memory in any direction on the
 * stream. Copies that touch host memory have completed on return (the
 * stream is synchronized); device-to-device copies are queued. */
uj_status_t rt_cuda_copy(rt_cuda_ctx_t* c, void* dst, int dst_on_device, const void* src, int src_on_device,
                         size_t bytes);
/* Waits for everything queued on the context's stream. */
uj_status_t rt_cuda_sync(rt_cuda_ctx_t* c);
/* Queues a copy of bytes from src to device memory dst, without waiting
 * for the stream, and takes src over: src is a block from malloc, freed
 * by a host function queued after the copy (cuLaunchHostFunc), so that it
 * lives until the copy has read it whatever the driver does with pageable
 * memory (it may copy it later than the call returns). Without
 * cuLaunchHostFunc, it waits for the copy, then frees src. src is freed on
 * failure too. For the library's own tables and scalars. */
uj_status_t rt_cuda_upload(rt_cuda_ctx_t* c, void* dst, void* src, size_t bytes);
/* At least `bytes` of reduction scratch followed by a 4-byte ticket that
 * is 0; grown (after waiting for the stream) when too small. Returns the
 * scratch's device address in *work and the ticket's in *ticket. */
uj_status_t rt_cuda_workspace(rt_cuda_ctx_t* c, size_t bytes, void** work, void** ticket);

/* The device's name, compute capability and multiprocessor count. */
void rt_cuda_describe(const rt_cuda_ctx_t* c, const char** name, int* sm_major, int* sm_minor, int* sm_count);

#endif
