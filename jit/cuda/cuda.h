/* jit/cuda/cuda.h: the CUDA engine's entry points beside its row in the
 * engine table: compiles without a device, and the interface for
 * hand-written CUDA C (the convolution backends) through the engine's
 * compiler, caches and stream. */
#ifndef UJ_JIT_CUDA_H
#define UJ_JIT_CUDA_H

#include "../jit.h"

/* UJ_OK when the CUDA driver loads, reports a device, and NVRTC loads;
 * else the status and reason of the first that does not. */
uj_status_t jit_cuda_check(void);
int jit_cuda_available(void);
/* A reference to a loaded module for f with these $params on the
 * context's device (its value is a jit_cuda_kernel_t; jit_cache_release
 * gives it back): from the memory cache, the disk cache, or compiled now
 * with NVRTC. Its cost in the memory cache is the module's image size. */
typedef struct jit_cuda_kernel jit_cuda_kernel_t;
uj_status_t jit_cuda_get(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                         jit_cache_entry_t** out);
/* Queues one launch per block on the context's stream; buf holds device
 * pointers. Returns once queued. */
uj_status_t jit_cuda_launch(uj_ctx_t* ctx, const jit_cuda_kernel_t* k, const ir_func_t* f, const ir_buffer_t* buf,
                            const int64_t* params);
/* Compiles f's kernels with NVRTC for `arch` ("sm_90") without a device
 * and stores the cubin in the disk cache, unless the disk cache holds a
 * verified cubin for exactly this key already (*reused = 1 then); says how
 * many kernels the module has. UJ_ERR_UNSUPPORTED without NVRTC,
 * UJ_ERR_COMPILE with NVRTC's log. */
uj_status_t jit_cuda_compile_for(jit_state_t* js, const ir_func_t* f, const int64_t* params, const char* arch,
                                 int* kernels, int* reused);
/* NVRTC on any source, for `arch`, with the engine's options: the size of
 * the cubin, or UJ_ERR_COMPILE with NVRTC's log (for tests of that path). */
uj_status_t jit_cuda_compile_source(const char* source, const char* arch, size_t* cubin_size);

/* Hand-written CUDA C (the convolution backends): source, with `extern "C"`
 * kernels called names[0..nnames), compiled through the engine's path
 * (same architecture choice, NVRTC options, memory and disk caches; the key
 * is the source and the names) and loaded on the context's device. *out
 * is valid until *ref, the reference into the context's cache that keeps
 * it, is given back with jit_cuda_source_release. */
typedef struct jit_cuda_source jit_cuda_source_t;
uj_status_t jit_cuda_source_get(uj_ctx_t* ctx, const char* source, const char* const* names, int nnames,
                                const jit_cuda_source_t** out, jit_cache_entry_t** ref);
/* Gives back a reference from jit_cuda_source_get (NULL is ignored). Its
 * launches may still be queued: an evicted module is unloaded only after
 * the context's stream has run them. */
void jit_cuda_source_release(uj_ctx_t* ctx, jit_cache_entry_t* ref);
/* Queues kernel names[fn] on the context's stream: grid[0..3) blocks of
 * `threads` threads, args as cuLaunchKernel takes them. A grid with a zero
 * extent launches nothing. */
uj_status_t jit_cuda_source_launch(const jit_cuda_source_t* m, int fn, const unsigned grid[3], unsigned threads,
                                   void** args);
/* Compiles the source for `arch` ("sm_90") without a device into the disk
 * cache (*reused = 1 when a verified cubin for this key was there). */
uj_status_t jit_cuda_source_compile_for(uj_ctx_t* ctx, const char* source, const char* const* names, int nnames,
                                        const char* arch, int* reused);

/* For tests (jit/cuda/cuda_check.c): the sources, each a module the
 * engine generates, checked by NVRTC's front end in one compile for
 * compute_<arch>;
 * UJ_OK when all compile. Else UJ_ERR_COMPILE with the log of the first
 * that fails alone (*failing its index; -1 when none does alone), or
 * UJ_ERR_UNSUPPORTED without NVRTC. */
uj_status_t jit_cuda_check_sources(const char* const* sources, int count, int arch, int* failing);
/* NVRTC's version as 100 * major + minor; 0 without NVRTC. */
int jit_cuda_nvrtc_version(void);

#endif
