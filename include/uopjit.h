/* uopjit: tensor computations written as micro-ops, fused into loops and
 * compiled at run time. This is the public API, the one header a user
 * includes; docs/C.md shows its use with a worked example (y = relu(x + b)
 * built, run and freed), and each function's comment below documents it.
 *
 * Conventions. Every function that can fail returns a uj_status_t (or a
 * negative uj_io_t / NULL) and leaves a message for uj_last_error() naming
 * the tensor, axis, parameter or column at fault and the expected vs
 * actual value. Nothing aborts on bad input, and a failing call leaves
 * every caller-owned buffer it was not asked to write untouched. Objects
 * are made by *_new and released by *_free; *_free(NULL) does nothing.
 * Tensors are borrowed: the library never keeps a pointer to caller memory
 * past the call that got it.
 */
#ifndef UOPJIT_H
#define UOPJIT_H

#include <stddef.h>
#include <stdint.h>
#include "uopjit_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version, in this one place: the Makefile reads these three numbers for
 * the shared library's file name and SONAME (libuopjit.so.MAJOR) and for
 * uopjit.pc. MAJOR changes when the ABI breaks. */
#define UJ_VERSION_MAJOR 0
#define UJ_VERSION_MINOR 1
#define UJ_VERSION_PATCH 0
#define UJ_VERSION_STR_(x) #x
#define UJ_VERSION_STR(x) UJ_VERSION_STR_(x)
/* "MAJOR.MINOR.PATCH" of the header being compiled against. */
#define UJ_VERSION                                                          \
  UJ_VERSION_STR(UJ_VERSION_MAJOR) "." UJ_VERSION_STR(UJ_VERSION_MINOR) "." \
  UJ_VERSION_STR(UJ_VERSION_PATCH)
#define UJ_MAX_DIMS 8

/* ---- status ------------------------------------------------------------ */

typedef enum {
  UJ_OK = 0,
  UJ_ERR_INVALID,     /* a bad argument: NULL handle, unknown name, wrong dtype */
  UJ_ERR_PARSE,       /* malformed index expression or program source */
  UJ_ERR_SHAPE,       /* shapes disagree, a [=] assertion failed, sizes overflow */
  UJ_ERR_UNSUPPORTED, /* valid, but not (yet) supported by the chosen engine */
  UJ_ERR_OOM,         /* an allocation failed */
  UJ_ERR_COMPILE,     /* a JIT engine failed to compile a kernel */
  UJ_ERR_DEVICE,      /* a GPU driver call failed */
  UJ_ERR_IO           /* a file could not be read or written */
} uj_status_t;

/* A short static name for a status ("UJ_ERR_SHAPE"); never NULL. */
const char* uj_status_str(uj_status_t s);
/* The detail of the last failure on this thread; "" if none. The string is
 * owned by the library and valid until the next failing call on this thread. */
const char* uj_last_error(void);
/* The library's version, "MAJOR.MINOR.PATCH", as built: a program can compare
 * it with the UJ_VERSION it was compiled against. Static, never NULL. */
const char* uj_version(void);

/* ---- tensors ------------------------------------------------------------ */

/* bf16 (bfloat16: 8 exponent bits, 7 mantissa bits) and f16 (IEEE binary16:
 * 5 and 10) are storage dtypes: their elements are loaded and widened to
 * f32, all arithmetic on them is f32 arithmetic, and a store rounds to the
 * nearest value, ties to even (overflow gives +-inf, subnormals are kept
 * exactly both ways, a NaN stays a NaN and comes back quiet). Values are
 * narrowed only where they are stored in a bf16/f16 tensor or by uj_cast to
 * bf16/f16, never in between. They come after the others so that the
 * earlier numbers keep their meaning. */
typedef enum { UJ_F32, UJ_F64, UJ_I32, UJ_BF16, UJ_F16 } uj_dtype_t;
typedef enum { UJ_CPU, UJ_CUDA } uj_device_t;

typedef struct {
  void* data;           /* borrowed, contiguous row-major */
  uj_dtype_t dtype;
  uj_device_t device;
  int ndim;             /* 0 (a scalar) .. UJ_MAX_DIMS */
  int64_t dims[UJ_MAX_DIMS];
} uj_tensor_t;

/* Bytes per element of a dtype (4, 8, 4, 2 or 2); 0 for an unknown dtype. */
int uj_dtype_size(uj_dtype_t dtype);
/* "f32", "f64", "i32", "bf16", "f16"; "?" for an unknown dtype. */
const char* uj_dtype_name(uj_dtype_t dtype);
/* One bf16 or f16 element: the value of its 16 bits (exact), and x rounded
 * to that dtype as a store rounds it (to nearest, ties to even; beyond the
 * largest finite value +-inf; a NaN stays a NaN, made quiet). For another
 * dtype uj_half_to_f64 gives NaN and uj_half_from_f64 0. */
double uj_half_to_f64(uj_dtype_t dtype, uint16_t bits);
uint16_t uj_half_from_f64(uj_dtype_t dtype, double x);

/* ---- context -------------------------------------------------------------- */

typedef struct uj_ctx uj_ctx_t;
/* A context holds the engine choice, the thread pool, the kernel caches
 * and their settings. NULL on out of memory only. A context may be used
 * from one thread at a time.
 *
 * Settings. Each has a setter below, and its default comes from the
 * environment, read once here: UOPJIT_ENGINE, UOPJIT_THREADS,
 * UOPJIT_MIR_LEVEL, UOPJIT_CACHE and UOPJIT_CACHE_DIR,
 * UOPJIT_CACHE_MEMORY_LIMIT, UOPJIT_CACHE_DISK_LIMIT, UOPJIT_TIER, UOPJIT_STREAM_BYTES (docs/CONFIGURATION.md lists them
 * with their values). An unset or empty variable leaves the built-in
 * default. A variable set to a value it does not accept does not stop the
 * context from being made; instead the setting keeps its built-in default,
 * and every call that depends on it (uj_program_run and the convolutions
 * for the engine, and for the threads, caches and MIR level of the engine
 * that runs; uj_program_compile_cuda for the caches) returns
 * UJ_ERR_INVALID with a message naming the variable, its value and the
 * accepted values, such as
 *   UOPJIT_THREADS="abc" is not valid: expected a whole number of threads from 1 to 1024
 * until the setting's setter gives it a valid value (so a program can
 * recover). uj_env_check reports such a value up front. */
uj_ctx_t* uj_ctx_new(void);
void uj_ctx_free(uj_ctx_t* ctx);
/* Checks every UOPJIT_* variable the library reads (the context settings
 * above and UOPJIT_CONV_BACKEND, UOPJIT_CONV_ISA, UOPJIT_CUDA_DEVICE's form,
 * UOPJIT_DEBUG) without making anything: UJ_OK, or UJ_ERR_INVALID naming
 * the first invalid variable, its value and the accepted values. For a
 * program that would rather refuse to start than fail at first use; the
 * uopjit tool calls it and exits with status 2. */
uj_status_t uj_env_check(void);

typedef enum { UJ_ENGINE_AUTO, UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_C,
               UJ_ENGINE_CUDA } uj_engine_t;
/* 1 when engine e can run in this build and on this machine, else 0. AUTO
 * and INTERP are always available. */
int uj_engine_available(uj_ctx_t* ctx, uj_engine_t e);
/* Chooses the engine uj_program_run uses (default: UOPJIT_ENGINE, else
 * AUTO). UJ_ERR_UNSUPPORTED (and the context unchanged) when e is not
 * available; UJ_ERR_INVALID for a NULL ctx or an engine value out of range. */
uj_status_t uj_ctx_set_engine(uj_ctx_t* ctx, uj_engine_t e);
/* The engine AUTO resolves to, or the one set (for tiered AUTO the quick
 * tier, MIR: uj_program_last_run tells which engine served a run). */
uj_engine_t uj_ctx_engine(uj_ctx_t* ctx);
/* enabled = 0 makes uj_program_run execute the loop IR as emitted, before
 * the pass pipeline (for checking the passes); 1, the default, the
 * optimized IR. UJ_ERR_INVALID for a NULL ctx. */
uj_status_t uj_ctx_set_passes(uj_ctx_t* ctx, int enabled);
/* Limits the context's in-memory kernel cache to `bytes`, evicting the
 * least recently used kernels beyond it, at once and whenever a new kernel
 * is compiled. Every distinct $param value is a kernel of its own, so a
 * caller that keeps varying one needs the limit. A kernel costs what its
 * engine measures: for MIR, what its MIR context grew by plus a share of
 * the context's setup (about 40 KiB for a small kernel); for C, the shared
 * object's mapped pages (about 14 KiB); for CUDA, the module's image; plus
 * its key text. 0 keeps no kernel beyond the call that runs it (every call
 * compiles, or for C and CUDA loads from the disk cache). A kernel a
 * running call uses is freed only when that call finishes. Default:
 * UOPJIT_CACHE_MEMORY_LIMIT (bytes, with an optional K, M or G suffix),
 * else 256 MiB. UJ_ERR_INVALID for a NULL ctx or a negative limit. */
uj_status_t uj_ctx_set_memory_cache_limit(uj_ctx_t* ctx, int64_t bytes);
/* The most bytes the disk kernel cache (the C engine's shared objects and
 * the CUDA engine's cubins, shared by every process that uses the
 * directory) may hold after this context stores a kernel: each store
 * removes the least recently used entries until the new one fits. The
 * default is UOPJIT_CACHE_DISK_LIMIT (bytes, or a number with K, M or G),
 * else 512 MiB. UJ_ERR_INVALID for a NULL ctx or bytes <= 0. */
uj_status_t uj_ctx_set_disk_cache_limit(uj_ctx_t* ctx, int64_t bytes);
/* The threads the CPU engines and convolution backends split work over,
 * the calling thread included: 1 to 1024, or 0 for one per online core.
 * Default: UOPJIT_THREADS, else 0. UJ_ERR_INVALID (the context unchanged)
 * for a NULL ctx or a count out of range; UJ_ERR_OOM when a new pool
 * cannot be made (the old one stays). */
uj_status_t uj_ctx_set_threads(uj_ctx_t* ctx, int threads);
/* The directory of the disk kernel cache (the C engine's shared objects,
 * the CUDA engine's cubins), or NULL for no disk cache. The directory is
 * made on first use and must belong to the user and be writable by no one
 * else, or the disk cache is not used (one warning on stderr). Default:
 * none when UOPJIT_CACHE=0, else UOPJIT_CACHE_DIR, else
 * $XDG_CACHE_HOME/uopjit, else $HOME/.cache/uopjit. The path is copied.
 * UJ_ERR_INVALID for a NULL ctx, an empty path or one of 4096 characters or
 * more. */
uj_status_t uj_ctx_set_cache_dir(uj_ctx_t* ctx, const char* path);
/* MIR's optimization level for the kernels the MIR engine compiles for
 * this context: 0 to 3. Default: UOPJIT_MIR_LEVEL, else 2. It is part of a
 * kernel's cache key. UJ_ERR_INVALID for a NULL ctx or a level out of
 * range (accepted in a build without MIR, where it has no effect). */
uj_status_t uj_ctx_set_mir_level(uj_ctx_t* ctx, int level);
/* Tiered execution of AUTO on host tensors. A kernel new to the process
 * runs at once on the MIR engine (quick to compile, slower to run) while
 * the C engine (slow to compile, fast to run) compiles it on a background
 * thread (at most two per context); the first call after the C kernel is
 * ready runs it, and so does every later one. A C kernel already in the
 * disk cache is used from the first call, so a second process starts on
 * C. A call never waits for a background compile; one that fails leaves
 * MIR serving and is reported by uj_program_last_run, never as a failed
 * run. Without MIR, a new kernel runs on the interpreter while C compiles
 * when the call is small (under 2^16 elements in its largest tensor), and
 * waits for the C compile otherwise (docs/ENGINES.md says why). Freeing the
 * context drops the compiles not yet started and waits for those running
 * (each one compile at most).
 *
 * `calls` is how many calls a new kernel makes on MIR before its C
 * compile starts (1, the default: at once; a larger count keeps kernels
 * that run only a few times off the compiler); 0 switches tiering off, and
 * AUTO then runs MIR alone (C without MIR). Default: UOPJIT_TIER, else 1.
 * UJ_ERR_INVALID for a NULL ctx or calls outside 0 to 1000000000. */
uj_status_t uj_ctx_set_tier(uj_ctx_t* ctx, int calls);
/* The size in bytes from which the C engine writes an output with streaming
 * (non-temporal) stores, which skip reading each line of it from memory
 * before writing it: for outputs written once, by one store covering them,
 * and read nowhere else in the program (softmax's, layernorm's, an
 * elementwise chain's). Smaller outputs keep ordinary stores, which leave
 * them in cache for whatever reads them next. Results are the same either
 * way. 0 streams every such output; a size past any output's, none.
 * Default: UOPJIT_STREAM_BYTES, else 32 MiB. UJ_ERR_INVALID for a NULL
 * ctx or a negative size. */
uj_status_t uj_ctx_set_stream_bytes(uj_ctx_t* ctx, int64_t bytes);
/* "auto", "interp", "mir", "c", "cuda"; "?" when out of range. */
const char* uj_engine_name(uj_engine_t e);

/* ---- memory on a device ------------------------------------------------------ */

/* The library's own memory for a tensor of this dtype and shape on `device`:
 * UJ_CPU, 64-byte aligned host memory; UJ_CUDA, memory on the GPU of ctx
 * (device UOPJIT_CUDA_DEVICE, default 0), 256-byte aligned. *out is filled
 * in (data never NULL, even for 0 elements) only on success. Errors:
 * UJ_ERR_INVALID for a NULL ctx or out, an unknown device or dtype, dims
 * NULL for rank > 0; UJ_ERR_SHAPE for a rank out of 0..8, a negative size
 * or a byte count that overflows; UJ_ERR_OOM; for UJ_CUDA, UJ_ERR_DEVICE
 * when there is no driver or device ("no CUDA driver (libcuda.so.1 not
 * found: ...)", or the failing driver call and its CUDA error name) and
 * UJ_ERR_UNSUPPORTED in a build without CUDA.
 *
 * GPU work of a context is queued in order on a stream of its own:
 * uj_program_run on GPU tensors returns once its kernels are queued, and a
 * copy to or from host memory, uj_tensor_free of GPU memory and
 * uj_ctx_synchronize wait for the queue first. An error raised while a
 * kernel runs is reported by the next call that waits. */
uj_status_t uj_tensor_alloc(uj_ctx_t* ctx, uj_device_t device, uj_dtype_t dtype, int ndim,
                            const int64_t* dims, uj_tensor_t* out);
/* Frees memory that uj_tensor_alloc gave t (with the same context for GPU
 * memory) and sets t->data to NULL. t NULL or t->data NULL: nothing to do.
 * Only tensors from uj_tensor_alloc may be passed. */
uj_status_t uj_tensor_free(uj_ctx_t* ctx, uj_tensor_t* t);
/* Copies src's elements into dst: host to host, host to GPU, GPU to host
 * or GPU to GPU. dst must have src's dtype, rank and sizes (UJ_ERR_INVALID
 * for the dtype, UJ_ERR_SHAPE naming the axis for a size), both must be
 * well-formed (data present when they hold elements), and GPU tensors must
 * not partly overlap. Nothing is written unless every check passes. A copy
 * that touches host memory has completed on return; a GPU-to-GPU copy is
 * queued on the context's stream. */
uj_status_t uj_tensor_copy(uj_ctx_t* ctx, uj_tensor_t* dst, const uj_tensor_t* src);
/* Waits until every copy and kernel queued on ctx's stream has finished,
 * and reports an error any of them raised (UJ_ERR_DEVICE). UJ_OK at once
 * for a context that never used the GPU. */
uj_status_t uj_ctx_synchronize(uj_ctx_t* ctx);
/* The context's GPU: its name (into name, at most name_cap bytes with the
 * NUL; may be NULL), compute capability as 10 * major + minor (90 for
 * 9.0) and multiprocessor count (each may be NULL). Errors as
 * uj_tensor_alloc's for a missing driver or device. */
uj_status_t uj_ctx_device(uj_ctx_t* ctx, char* name, size_t name_cap, int* arch, int* multiprocessors);

/* ---- micro-ops -------------------------------------------------------------- */

/* The elementwise ops, one row each in uopjit_ops.h (the name in the
 * language, which take i32, the function that defines each). */
#define UJ_OP_ENUM_UNARY(NAME, spelling, flags, ref, cfn) UJ_UNARY_##NAME,
#define UJ_OP_ENUM_BINARY(NAME, spelling, kind, flags, ref, cfn) UJ_BINARY_##NAME,
typedef enum { UJ_UNARY_OPS(UJ_OP_ENUM_UNARY) UJ_UNARY_COUNT } uj_unary_op_t;
typedef enum { UJ_BINARY_OPS(UJ_OP_ENUM_BINARY) UJ_BINARY_COUNT } uj_binary_op_t;
#undef UJ_OP_ENUM_UNARY
#undef UJ_OP_ENUM_BINARY
/* An op's name in the expression language ("erf", "atan2", "+"), or "?"
 * for a number that is no op. */
const char* uj_unary_name(uj_unary_op_t op);
const char* uj_binary_name(uj_binary_op_t op);
typedef enum { UJ_REDUCE_SUM, UJ_REDUCE_PROD, UJ_REDUCE_MAX, UJ_REDUCE_MIN, UJ_REDUCE_MEAN,
               UJ_REDUCE_ARGMAX, UJ_REDUCE_ARGMIN } uj_reduce_op_t;

/* A graph is a scratch pad of uops. Each builder returns the new node's id
 * (>= 0), or a negative value with uj_last_error() set when an argument is
 * bad (a NULL graph, an unknown node, a dtype or rank mismatch, a malformed
 * index expression). Sizes are symbolic while building: shapes are only
 * checked against each other when a program runs (UJ_ERR_SHAPE then). */
typedef struct uj_graph uj_graph_t;
typedef int uj_io_t;
uj_graph_t* uj_graph_new(void);              /* NULL on out of memory */
void uj_graph_free(uj_graph_t* g);

/* An input of rank ndim (0..8). Its sizes come from the tensor at run time. */
uj_io_t uj_input(uj_graph_t* g, int ndim, uj_dtype_t dtype);
/* A 0-d f32 constant; it takes the dtype of what it is combined with. */
uj_io_t uj_const(uj_graph_t* g, double value);
/* out[i0..] = x[index(i0..)], with shape[] giving out's sizes. Index and
 * shape strings are index expressions (docs/DESIGN.md section 4): iN is the N-th
 * axis of out, dXn axis n of the X-th shape source (A = ss[0], B = ss[1], ...),
 * $name a program parameter, dA1[=dB2] asserts dA1 == dB2 at run time.
 * index_count must equal x's rank. Reads out of range give 0. The strings are
 * copied. */
uj_io_t uj_reindex(uj_graph_t* g, uj_io_t x, int shape_count, const char* const* shape,
                   int ss_count, const uj_io_t* ss, int index_count, const char* const* index);
/* Elementwise op (uopjit_ops.h lists them). The float-only ops (all but
 * neg, abs, floor, ceil, round and sign) refuse i32. */
uj_io_t uj_unary(uj_graph_t* g, uj_unary_op_t op, uj_io_t x);
/* out = a op b elementwise. Either operand may be 0-d (read at every
 * element); otherwise both have one rank, and their sizes are checked
 * against each other at run time (UJ_ERR_SHAPE naming both and the axis).
 * Both must share a dtype (a constant adopts the other side's). Comparisons give 1 or 0 in
 * that dtype. i32 division and mod round toward negative infinity, fmod
 * toward zero; an i32 division or remainder by zero gives 0. pow, atan2,
 * hypot and copysign refuse i32. */
uj_io_t uj_binary(uj_graph_t* g, uj_binary_op_t op, uj_io_t a, uj_io_t b);
/* out = cond != 0 ? a : b with a's shape; cond and b have that shape or are 0-d. */
uj_io_t uj_where(uj_graph_t* g, uj_io_t cond, uj_io_t a, uj_io_t b);
/* Reduces the listed axes (negative counts from the end) to size 1. argmax
 * and argmin give the first flat index over the reduced axes as i32; mean
 * divides by the element count (floor division for i32). */
uj_io_t uj_reduce(uj_graph_t* g, uj_reduce_op_t op, int axis_count, const int* axis, uj_io_t x);
/* Gather along one axis: out has x's shape with that axis set to 1, index is
 * an i32 tensor of out's shape, out[..,0,..] = x[.., index[..,0,..], ..].
 * An index value out of range gives 0. */
uj_io_t uj_select(uj_graph_t* g, int axis, uj_io_t x, uj_io_t index);
/* Converts to dtype. Float to i32 truncates toward zero and saturates; NaN
 * gives 0. To bf16/f16 it rounds to nearest, ties to even (from f64 and
 * i32 once, never through f32 first); the rounded value goes on as an f32,
 * as every bf16/f16 value does. */
uj_io_t uj_cast(uj_graph_t* g, uj_dtype_t dtype, uj_io_t x);
/* Names the gradient of x, for the ingrads and outgrads of a backward pass. */
uj_io_t uj_grad(uj_graph_t* g, uj_io_t x);

/* ---- programs ------------------------------------------------------------- */

typedef struct uj_program uj_program_t;
typedef enum { UJ_FORWARD, UJ_BACKWARD } uj_pass_t;
typedef struct {
  int input_count;   const uj_io_t* inputs;
  int param_count;   const char* const* params;   /* "$kh", ...: the order of values at run time */
  int output_count;  const uj_io_t* outputs;
  int ingrad_count;  const uj_io_t* ingrads;      /* backward inputs: uj_grad(output)s and forward tensors */
  int outgrad_count; const uj_io_t* outgrads;     /* backward outputs: uj_grad(input)s */
} uj_program_desc_t;

/* Combines the graph into a program: the uops the outputs need, in
 * topological order, emitted into loop IR. The graph may be freed or reused
 * afterwards. Errors: UJ_ERR_INVALID for a NULL argument, an output or input
 * that is not a node of g, an input listed twice, an uop that needs an input
 * not listed, a $param used but not declared or declared twice (the message
 * names it); UJ_ERR_UNSUPPORTED for a program that lowers to more than 8192
 * operations (one per uop, constants included) or 16384 tensors, since the
 * compiler's passes cost grows with the square of a program's size (a
 * parsed program reports it where it is built, on first use), and for a
 * backward pass that needs a bf16 or f16 value (cast it to f32 first).
 * *out is set only on success. */
uj_status_t uj_program_new(uj_graph_t* g, const uj_program_desc_t* desc, uj_program_t** out);
/* Builds a program from the expression language:
 *
 *   m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g
 *   p = p - lr*m/(sqrt(v)+eps)          # comments run to the end of the line
 *
 * Statements `name = expr` are separated by newlines or ';'. Expressions:
 * numbers (1, 1.5, 1e-8), + - * / ** (pow), unary minus, < <= > >= == !=
 * (1 or 0), parentheses, exp log sqrt rsqrt abs sin cos tanh sigmoid relu
 * floor, min(a,b) max(a,b) pow(a,b) where(c,a,b), and sum mean amax amin
 * (x[, axis]) which keep the reduced axis with size 1 (no axis: all axes).
 * A name read before it is assigned is an input (in order of first
 * appearance); an assigned name is an output (in order of first
 * assignment) unless it starts with '_'; a name read first and assigned
 * later (p = p - lr*m) is both, and the caller may pass one tensor for
 * both: the result is as if every read came before the write. `x: f64`
 * (f32, f64, i32, bf16, f16) before x's first use fixes an input's dtype,
 * and an assigned name with one is cast to it (`p: bf16; p = m`);
 * otherwise inputs take their tensors' dtypes (mixed dtypes promote to the
 * wider: i32 < bf16, f16 < f32 < f64, bf16 with f16 gives f32; all-bf16
 * inputs give bf16 outputs); a float value computed from 0-d values alone
 * (1 - b2) is computed in f64 and rounded once to its dtype where it meets
 * a tensor or is an output. Operands broadcast
 * as in NumPy; 0-d inputs (scalars) go everywhere. The uop program is built
 * on first use for each combination of input ranks, dtypes and size-1
 * axes, and kept (the 8 most recently used); several threads may run one
 * parsed program at the same time, each with its own context. Errors: UJ_ERR_PARSE with "program line L, column C:
 * expected ..., found ..."; sources over 1 MiB and expressions nested
 * deeper than 256 levels (parentheses, function calls, unary operators,
 * exponents of `**`; a chain of binary operators is not nesting) are
 * errors naming the line and column, and so is a second dtype hint for a
 * name. A program needing more than 8192 operations is refused with
 * UJ_ERR_UNSUPPORTED when it is built. The program takes no $params.
 *
 * Its UJ_BACKWARD pass is the uop autodiff of the same program: it takes
 * the inputs, then the gradient of each output (of the output's shape and
 * dtype), and gives the gradient of each input, of the input's shape (a
 * broadcast input's gradient is summed over the axes it was broadcast
 * along; an i32 input's is zeros, and an i32 output's gradient is read for
 * its size only). An output named twice, or that is an input, adds each of
 * its gradients. It is built on first use per signature, as the forward
 * pass is, and refuses bf16 and f16 values (UJ_ERR_UNSUPPORTED) and a
 * program without inputs (UJ_ERR_INVALID). */
uj_status_t uj_program_parse(const char* source, uj_program_t** out);
/* Number of inputs (is_output = 0) or outputs (1) of the forward pass; -1
 * for a NULL program. (A parsed program's backward pass takes inputs +
 * outputs tensors and gives inputs.) */
int uj_program_io_count(const uj_program_t* p, int is_output);
/* The name of input or output `index` of a parsed program (owned by the
 * program); NULL for uop programs or an index out of range. */
const char* uj_program_io_name(const uj_program_t* p, int is_output, int index);
/* 1, with *dtype (when not NULL), when input `index` of a parsed program
 * declares its dtype (`x: f32`): its tensor must have that one. 0 when the
 * input takes its tensor's dtype, for uop programs and for an index out of
 * range. */
int uj_program_input_dtype(const uj_program_t* p, int index, uj_dtype_t* dtype);
/* The dtype output `output_index` has for these inputs (a parsed
 * program's outputs follow its inputs' dtypes). */
uj_status_t uj_program_output_dtype(uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                                    int output_index, uj_dtype_t* dtype);
void uj_program_free(uj_program_t* p);

/* The shape output output_index would have for these inputs and params:
 * writes *ndim and dims[0..*ndim). Errors as uj_program_run's, for the
 * inputs only. */
uj_status_t uj_program_shape(uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                             const int64_t* params, int output_index, int* ndim, int64_t* dims);
/* Runs the program. inputs[] and params[] follow the order of the
 * description; each output tensor must have the inferred rank and sizes
 * (UJ_ERR_SHAPE naming the tensor, the axis, expected and got otherwise).
 * Every check happens before anything is written. An output may share its
 * memory with an input (an in-place update): where the fused loops read
 * each element before writing it, the output is written directly;
 * otherwise it is computed aside and copied in. Two outputs may not share
 * memory (UJ_ERR_INVALID).
 *
 * Devices: the tensors of one call must all be in host memory or all on
 * the GPU (UJ_ERR_INVALID naming both otherwise). With the engine AUTO,
 * GPU tensors run on UJ_ENGINE_CUDA (UJ_ERR_UNSUPPORTED with the reason
 * when it is not available); a CPU engine given GPU tensors, or the CUDA
 * engine given host tensors, is UJ_ERR_UNSUPPORTED naming the tensor. On
 * the GPU the call returns once its kernels are queued on the context's
 * stream (see uj_ctx_synchronize); its temporaries are stream-ordered
 * device memory. Float sums and products that a CUDA kernel splits across
 * threads are merged in a fixed tree order: reproducible for a given size
 * and device, but rounded differently from the serial order (a relative
 * difference of about n * 1e-7 for n f32 terms, usually far less). */
uj_status_t uj_program_run(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass,
                           const uj_tensor_t* const* inputs, int input_count,
                           const int64_t* params, int param_count,
                           uj_tensor_t* const* outputs, int output_count);

/* What served a pass's last successful uj_program_run, and, when that run
 * was tiered (AUTO on host tensors, see uj_ctx_set_tier), the state of its
 * kernel in ctx: */
typedef enum {
  UJ_TIER_NONE,     /* not tiered (an engine chosen, GPU tensors, tiering off) or never run */
  UJ_TIER_WAITING,  /* C not started yet: fewer calls than uj_ctx_set_tier asks */
  UJ_TIER_COMPILING,/* C queued or compiling in the background; MIR (or the interpreter) serves */
  UJ_TIER_READY,    /* the C kernel serves (compiled here, or loaded from the disk cache) */
  UJ_TIER_FAILED    /* the C compile failed: MIR serves for good; c_error says why */
} uj_tier_state_t;
typedef struct {
  uj_engine_t engine;     /* INTERP, MIR, C or CUDA; AUTO when the pass has not run */
  uj_tier_state_t tier;
  double mir_ms;          /* the MIR kernel's compile in ctx, in ms; -1 when none was needed */
  double c_ms;            /* the C kernel's compile, or its load from the disk cache, in ms; -1 not yet */
  int c_from_disk;        /* 1 when the C kernel was found in the disk cache rather than compiled */
  char c_error[512];      /* UJ_TIER_FAILED: the compile's error; else "" */
} uj_run_info_t;
/* Fills *out for pass `pass` of p as last run on ctx: threads that share a
 * program, each with its own context, each learn about their own runs.
 * Before ctx's first run of p (or when more than 8 other contexts have run
 * p since), engine is UJ_ENGINE_AUTO and tier UJ_TIER_NONE. UJ_ERR_INVALID
 * for a NULL argument or an unknown pass. */
uj_status_t uj_program_last_run(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, uj_run_info_t* out);

/* ---- multi-tensor execution ------------------------------------------------ */

/* One group of tensors for uj_program_run_groups: group i holds parameter
 * i's tensors (p, g, m, v, ...), in the program's input and output order,
 * as uj_program_run takes them. */
typedef struct {
  const uj_tensor_t* const* inputs;
  uj_tensor_t* const* outputs;
} uj_group_t;

/* Runs the forward pass of p on every group, with the results of calling
 * uj_program_run once per group in order (groups may differ in size and,
 * for a parsed program, in the ranks of their tensors). A scalar is a 0-d
 * tensor in each group: the same one in every group to share it, or one
 * per group (pointing at element i of a per-group array: per-layer learning
 * rates). An output that reduces every axis (sum(x*x)) is a per-group
 * result, written to that group's tensor. params are shared by all groups.
 * An output of one group must not overlap any tensor of another group
 * (UJ_ERR_INVALID naming both; an output may share memory with an input of
 * its own group, as in uj_program_run).
 *
 * When every tensor of a group that is not 0-d has the group's shape, the
 * dtypes agree between groups, and the program is elementwise with, at
 * most, full reductions into outputs (an update, sum(p*p), amax(g)), the
 * call is one pass over all the groups' elements: on the CPU split across
 * the context's threads by elements, not by groups, through one compiled
 * kernel for every size and number of groups; on CUDA one launch over a
 * table of chunks. A full reduction adds the partial results of pieces of
 * 32768 elements in order (the same bits for any number of threads, within
 * rounding of one run of that group). Other programs and groups (broadcasting
 * within a group, a reduction over one axis, the interpreter) run group by
 * group through uj_program_run.
 *
 * Every group is checked before anything is written: a failing call names
 * the group ("group 3: ...") and writes nothing. group_count 0 does
 * nothing. Errors as uj_program_run's, and UJ_ERR_INVALID for a NULL
 * groups with group_count > 0 or a negative count. */
uj_status_t uj_program_run_groups(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups, int group_count,
                                  int input_count, const int64_t* params, int param_count, int output_count);

typedef enum { UJ_DUMP_IR_RAW, UJ_DUMP_IR, UJ_DUMP_C, UJ_DUMP_MIR, UJ_DUMP_CUDA, UJ_DUMP_C_AOT } uj_dump_t;
/* A printable form of the program: the loop IR as emitted (IR_RAW) or after
 * the passes (IR); every block starts with a line beginning with "block".
 * UJ_DUMP_C is the C engine's source (params given: folded in, as the JIT
 * compiles it), UJ_DUMP_MIR the MIR engine's module in MIR's text form.
 * UJ_DUMP_C_AOT is a self-contained C file (it needs only the C library)
 * with $params as run-time arguments and this entry point:
 *
 *   int uopjit_kernel_output_dims(const int64_t* const* input_dims,
 *                                 const int64_t* params, int output, int64_t* dims);
 *       writes output `output`'s sizes into dims and returns its rank, or
 *       -1 when the input sizes are inconsistent;
 *   int uopjit_kernel_run(void* const* inputs, const int64_t* const* input_dims,
 *                         void* const* outputs, const int64_t* params);
 *       runs the program on contiguous row-major buffers, inputs and outputs
 *       in the program's order; 0, -1 (inconsistent sizes) or -2 (no memory).
 *
 * Everything else in the file is static, so several such files link into
 * one program once the two names are renamed (-Duopjit_kernel_run=...).
 * UJ_DUMP_CUDA is the CUDA engine's source: one `extern "C" __global__`
 * kernel uj_block_<N> per block of the fused function, with no #include;
 * params given: folded in, as the engine compiles it; NULL: each kernel
 * takes the $params it uses as arguments p<slot>. Writing it needs neither
 * a GPU nor NVRTC.
 * For a parsed program: the build last run, else one for rank-1 inputs.
 * params may be NULL (then $params print by name). Returns a malloc'ed
 * string the caller frees, or NULL with uj_last_error() set (UJ_DUMP_MIR
 * needs MIR in the build). */
char* uj_program_dump(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, uj_dump_t what,
                      const int64_t* params);

/* ---- convolution ---------------------------------------------------------- */

/* 2-D convolution (the cross-correlation of deep learning frameworks) on
 * NHWC tensors:
 *
 *   x [N, H, W, C]    w [K, KH, KW, C]    bias [K] (optional)    y [N, OH, OW, K]
 *   OH = (H + 2*pad_h - KH) / stride_h + 1      OW = (W + 2*pad_w - KW) / stride_w + 1
 *   y[n,oh,ow,k] = bias[k] + sum over r < KH, s < KW, c < C of
 *                  x[n, oh*stride_h + r - pad_h, ow*stride_w + s - pad_w, c] * w[k,r,s,c]
 *
 * where reads outside x count as 0 (zero padding). Every size must be >= 1
 * and the (padded) input at least as large as the filter. The backward
 * functions give the gradients through y of a loss L, from dy = dL/dy:
 * dx = dL/dx, dw = dL/dw and dbias = dL/dbias.
 *
 *   uj_conv2d_desc_t d = {.stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1};
 *   float xv[1*8*8*16], wv[32*3*3*16], yv[1*8*8*32];
 *   uj_tensor_t x = {xv, UJ_F32, UJ_CPU, 4, {1, 8, 8, 16}};
 *   uj_tensor_t w = {wv, UJ_F32, UJ_CPU, 4, {32, 3, 3, 16}};
 *   uj_tensor_t y = {yv, UJ_F32, UJ_CPU, 4, {1, 8, 8, 32}};
 *   uj_status_t s = uj_conv2d(ctx, &d, &x, &w, NULL, &y, NULL);   // NULL: auto
 *
 * Backends, each with its capability (outside it: UJ_ERR_UNSUPPORTED with
 * the reason, nothing written):
 *   "ref"           the convolution written in uops, run on the context's
 *                   engine (uj_ctx_set_engine; on device tensors the CUDA
 *                   engine): the definition the others are tested against.
 *                   f32 and f64, host or device tensors, any filter, stride
 *                   and padding; forward, backward data and backward filter
 *                   (the gradients by the uop autodiff).
 *   "cpu_direct"    hand-written, cache- and register-blocked. f32 forward,
 *                   any filter, stride and padding.
 *   "cpu_winograd"  Winograd F(4x4, 3x3). f32 forward, 3x3 filters, stride
 *                   1, any padding. Its rounding error is larger than a
 *                   direct sum's (the transforms scale values by up to 8
 *                   and back): within 1e-5 * KH*KW*C * max|x| * max|w| of
 *                   the exact result per element, against 1e-6 for the others.
 *   "cudnn"         NVIDIA cuDNN 9 on device tensors (UJ_CUDA), loaded at run
 *                   time (libcudnn.so.9), never linked. f32 forward, backward
 *                   data and backward filter, any filter, stride and padding;
 *                   the algorithm cuDNN times fastest (FMA math only, no
 *                   TF32) is found once per shape and kept in the context,
 *                   with one workspace that grows as needed. Bound as ref's.
 *   "cuda_winograd" Winograd F(2x2, 3x3) on device tensors, hand-written
 *                   kernels compiled by NVRTC like the CUDA engine's (same
 *                   disk cache). f32 forward, 3x3 filters, stride 1, any
 *                   padding; filter transforms kept per filter_key. Bound as
 *                   cpu_winograd's.
 * The CUDA backends take device tensors only (host tensors: UJ_ERR_UNSUPPORTED
 * naming the device), queue their work on the context's stream, and are
 * not available without a GPU (or, for cudnn, without the library): named,
 * they fail with UJ_ERR_DEVICE or UJ_ERR_UNSUPPORTED and the reason; auto
 * passes over them.
 * Both CPU backends split their work over the context's threads
 * (UOPJIT_THREADS) and pick their kernels' instruction set (avx512, avx2
 * or generic) from the CPU; UOPJIT_CONV_ISA=<one of those>, read on a
 * context's first convolution, makes them use another the CPU can run.
 *
 * backend names one of them; NULL or "auto" picks by capability: the
 * backends that can run the call, "ref" only when no other can. When
 * several qualify, the first call of a shape on a context runs each of them
 * four times (a warm-up, then the best of three timed runs counts; a GPU
 * backend's run is timed until its kernels finish) and the context remembers the fastest for that shape (op, dtype, sizes, stride,
 * padding, bias or not).
 * UOPJIT_CONV_BACKEND=<name>, read on a context's first convolution, makes
 * auto mean that backend (its capability still applies); an unknown name
 * there makes auto calls fail with UJ_ERR_INVALID naming the variable.
 *
 * filter_key: 0, or a caller-chosen name for the current values of w. With
 * a nonzero key the caller promises that every call on this context with
 * that key passes a w of the same shape and values; backends that
 * transform the filter first (cpu_winograd's filter transform, cpu_direct's
 * packing) keep the result in the context under the key and skip that work
 * on later calls. Use a new key, or uj_conv2d_forget, when the values
 * change. Kept copies are freed with the context, least recently used first
 * when they pass 512 MiB.
 *
 * Errors (checked before anything is written): UJ_ERR_INVALID for a NULL
 * ctx, desc or tensor, an unknown backend name, a stride < 1, a padding < 0,
 * a dtype other than f32/f64 (bf16 and f16: UJ_ERR_UNSUPPORTED, no backend
 * takes them) or tensors of different dtypes or devices, or
 * an output sharing memory with an input; UJ_ERR_SHAPE for a wrong rank or
 * size, naming the tensor, the axis, expected and got; UJ_ERR_UNSUPPORTED
 * when the chosen backend (or, for auto, every backend) cannot run it. */
typedef struct {
  int stride_h, stride_w; /* >= 1 */
  int pad_h, pad_w;       /* zero rows and columns added on each side, >= 0 */
  uint64_t filter_key;    /* 0, or a name for w's values (above) */
} uj_conv2d_desc_t;

/* y = conv(x, w) (+ bias when bias is not NULL). */
uj_status_t uj_conv2d(uj_ctx_t* ctx, const uj_conv2d_desc_t* desc, const uj_tensor_t* x, const uj_tensor_t* w,
                      const uj_tensor_t* bias, uj_tensor_t* y, const char* backend);
/* dx [N,H,W,C] from dy [N,OH,OW,K] and w; dx's sizes give H and W (with a
 * stride > 1 several input sizes share one output size). */
uj_status_t uj_conv2d_backward_data(uj_ctx_t* ctx, const uj_conv2d_desc_t* desc, const uj_tensor_t* dy,
                                    const uj_tensor_t* w, uj_tensor_t* dx, const char* backend);
/* dw [K,KH,KW,C] from x and dy; dw's sizes give KH and KW. dbias [K] too
 * when it is not NULL. filter_key is ignored. */
uj_status_t uj_conv2d_backward_filter(uj_ctx_t* ctx, const uj_conv2d_desc_t* desc, const uj_tensor_t* x,
                                      const uj_tensor_t* dy, uj_tensor_t* dw, uj_tensor_t* dbias,
                                      const char* backend);
/* The sizes of y for x and w: dims[0..4) = N, OH, OW, K. Errors as uj_conv2d's
 * for desc, x and w. */
uj_status_t uj_conv2d_output_shape(const uj_conv2d_desc_t* desc, const uj_tensor_t* x, const uj_tensor_t* w,
                                   int64_t dims[4]);
/* The backends, in the order auto tries them: names for i in 0..count-1,
 * NULL out of range. */
int uj_conv2d_backend_count(void);
const char* uj_conv2d_backend_name(int i);
/* The backend that ran the last successful convolution call on ctx; NULL
 * when none has. */
const char* uj_conv2d_last_backend(uj_ctx_t* ctx);
/* Drops what the context keeps under filter_key (0: every key).
 * UJ_ERR_INVALID for a NULL ctx. */
uj_status_t uj_conv2d_forget(uj_ctx_t* ctx, uint64_t filter_key);

/* Compiles, without running anything, the CUDA kernels uj_program_run
 * would launch for this pass, inputs (as uj_program_run takes them; only
 * their ranks, dtypes and size-1 axes matter, to pick the build of a parsed
 * program, and their data is not read) and params, with NVRTC for
 * architecture arch ("sm_90"). It needs NVRTC but no GPU, so a machine
 * without one can check that every kernel compiles. The cubin goes into
 * the disk cache, where a run on such a device finds it; when the disk
 * cache already holds a verified cubin for exactly this source, NVRTC
 * version, architecture and options, that one stands (*reused = 1; it may
 * be NULL) and NVRTC is not run again (UOPJIT_CACHE=0 forces it).
 * *kernels (may be NULL) receives the number of kernels in the module.
 * Errors: UJ_ERR_INVALID for a NULL ctx or p, wrong counts or an arch not
 * of the form sm_XX; UJ_ERR_UNSUPPORTED without NVRTC (or in a build
 * without CUDA) or for an arch NVRTC does not know; UJ_ERR_COMPILE with
 * NVRTC's log. */
uj_status_t uj_program_compile_cuda(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass,
                                    const uj_tensor_t* const* inputs, int input_count,
                                    const int64_t* params, int param_count, const char* arch,
                                    int* kernels, int* reused);
/* The same for the kernels uj_program_run_groups launches on CUDA for
 * groups like these (one over the chunk table, and one that combines
 * reductions when the program has any): host tensors may stand in for GPU
 * ones, as only their dtypes, ranks and shapes matter. UJ_ERR_UNSUPPORTED
 * when the groups would not take the multi-tensor path (they would run one
 * by one through uj_program_run); other errors as uj_program_compile_cuda's
 * and uj_program_run_groups' checks. */
uj_status_t uj_program_compile_groups_cuda(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups,
                                           int group_count, int input_count, const int64_t* params,
                                           int param_count, int output_count, const char* arch, int* kernels,
                                           int* reused);

/* ---- optimizers --------------------------------------------------------------- */

/* uj_optim_*, fused optimizer updates over many parameter tensors, are
 * declared in uopjit_optim.h, included at the end of this header (outside
 * its extern "C" block, as that header opens its own). */

#ifdef __cplusplus
}
#endif

#include "uopjit_optim.h"

#endif
