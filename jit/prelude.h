/* jit/prelude.h: the part of the generated source's prelude that the C
 * emitter (jit/c/c_emit.c) and the CUDA emitter (jit/cuda/cuda_emit.c) share
 * (jit/prelude.c). */
#ifndef UJ_JIT_PRELUDE_H
#define UJ_JIT_PRELUDE_H

/* The functions that printed expressions call (jit/c_like.c) for the IR's
 * integer and comparison semantics, and the f32 sigmoid. It expects, from
 * the emitter's own prelude before it: the types int32_t, uint32_t,
 * uint64_t and uj_i64; UJ_INLINE, the qualifier of a helper function
 * (`static inline` in C, `__device__ __forceinline__` in CUDA); and
 * UJ_EXPF, the target's f32 exp. */
extern const char jit_prelude_shared[];

#endif
