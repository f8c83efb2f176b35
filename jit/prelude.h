/* jit/prelude.h: the part of the generated source's prelude that the C
 * emitter (jit/c/c_emit.c) and the CUDA emitter (jit/cuda/cuda_emit.c) share
 * (jit/prelude.c). */
#ifndef UJ_JIT_PRELUDE_H
#define UJ_JIT_PRELUDE_H

/* The functions that printed expressions call (jit/c_like.c) for the IR's
 * integer and comparison semantics, and the f32 sigmoid. It expects, from
 * the emitter's own prelude before it: the types int32_t, uint32_t,
 * uint64_t, uint16_t and uj_i64; UJ_INLINE, the qualifier of a helper
 * function (`static inline` in C, `__device__ __forceinline__` in CUDA);
 * UJ_EXPF, the target's f32 exp; and UJ_F2U(x) and UJ_U2F(u), the bits of a
 * float as a uint32_t and back. The bf16/f16 conversions are uj_bf16_to_f32,
 * uj_f32_to_bf16, uj_f16_to_f32, uj_f32_to_f16 and uj_f64_to_f32_odd
 * (ir/half.c). */
extern const char jit_prelude_shared[];

#endif
