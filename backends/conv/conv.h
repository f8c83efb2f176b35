/* backends/conv/conv.h: the seam between the convolution commands
 * (uj_conv2d and its backward counterparts, backends/conv/api.c) and the
 * backends that run them.
 *
 * A backend is one file that defines one bk_conv_backend_t: a name, a
 * capability (which ops, device, dtypes, layout, filter sizes, strides and
 * paddings it handles) and a run function. The table in registry.c lists
 * them; nothing else names a backend, so a new one (a CUDA backend with
 * device UJ_CUDA, say) is a new file plus a row in that table. The API
 * checks every tensor before a backend sees the call (bk_conv_backend_t.run
 * says what a run may assume). Per-context state (the choices of auto,
 * cached filter transforms, the reference's programs) lives in
 * bk_conv_state_t, hung from the context (state.c). */
#ifndef UJ_BACKENDS_CONV_H
#define UJ_BACKENDS_CONV_H

#include <pthread.h>

#include "../../jit/jit.h"

typedef enum { BK_CONV_FORWARD, BK_CONV_BACKWARD_DATA, BK_CONV_BACKWARD_FILTER, BK_CONV_NOPS } bk_conv_op_t;
/* The only layout the public API has today; the capability names it so that
 * a layout added later cannot reach a backend written for another. */
typedef enum { BK_CONV_NHWC } bk_conv_layout_t;

/* One call, sizes resolved: x [n,h,w,c], w [k,kh,kw,c], y [n,oh,ow,k]. */
typedef struct {
  bk_conv_op_t op;
  uj_device_t device;
  uj_dtype_t dtype;
  bk_conv_layout_t layout;
  int64_t n, h, w, c, k, kh, kw, oh, ow;
  int stride_h, stride_w, pad_h, pad_w;
  int has_bias; /* forward: bias given; backward filter: dbias wanted */
  uint64_t filter_key;
} bk_conv_problem_t;

/* What a backend handles. A limit of 0 means "any". */
typedef struct {
  unsigned ops;     /* bit (1u << bk_conv_op_t) per op */
  unsigned devices; /* bit (1u << uj_device_t) per device: a CUDA backend has 1u << UJ_CUDA */
  unsigned dtypes;  /* bit (1u << uj_dtype_t) per dtype */
  bk_conv_layout_t layout;
  int kernel_min, kernel_max; /* KH and KW, inclusive */
  int stride_max;             /* stride_h and stride_w */
  int pad_max;                /* pad_h and pad_w; -1: any */
  int reference;              /* auto takes it only when no other backend qualifies */
} bk_conv_caps_t;

typedef struct bk_conv_state bk_conv_state_t;

/* A call as a backend receives it: the tensors that op uses, checked. */
typedef struct {
  uj_ctx_t* ctx;
  bk_conv_state_t* state;
  const bk_conv_problem_t* p;
  const uj_tensor_t* x;    /* forward, backward filter */
  const uj_tensor_t* w;    /* forward, backward data */
  const uj_tensor_t* bias; /* forward; NULL when absent */
  const uj_tensor_t* dy;   /* backward */
  uj_tensor_t* y;          /* forward */
  uj_tensor_t* dx;         /* backward data */
  uj_tensor_t* dw;         /* backward filter */
  uj_tensor_t* dbias;      /* backward filter; NULL when not wanted */
} bk_conv_call_t;

typedef struct {
  const char* name;
  bk_conv_caps_t caps;
  /* The API checks every tensor before a backend sees the call: ranks,
   * sizes, dtypes and devices agree, no output overlaps an input, and the
   * problem is inside the backend's capability (bk_conv_capable). So run
   * may assume a well-formed call; it returns UJ_OK, or a failure (out of
   * memory, an engine error) with nothing written to the outputs. A device
   * backend queues its work on the context's stream and returns: every
   * failure it can see before the first work that writes an output is
   * queued leaves the outputs untouched, but a fault of the device, or of a
   * library call queued after that first work (cudnn's bias after its
   * convolution), can leave them partly written. */
  uj_status_t (*run)(const bk_conv_call_t* call);
  /* NULL, or whether what the backend needs at run time for problem p is
   * there (a GPU, a library): UJ_OK, else the status and reason. A backend
   * named by the caller reports it; auto passes over a backend that is not
   * available. */
  uj_status_t (*available)(const bk_conv_problem_t* p);
} bk_conv_backend_t;

/* ---- registry.c ---- */

/* Every backend, in the order auto considers them. */
extern const bk_conv_backend_t* const bk_conv_backends[];
extern const int bk_conv_backend_total;
/* The backend called name, or NULL. */
const bk_conv_backend_t* bk_conv_find(const char* name);

/* ---- the backends (one file each) ---- */

extern const bk_conv_backend_t bk_conv_ref;          /* ref.c */
extern const bk_conv_backend_t bk_conv_cpu_direct;   /* cpu_direct.c */
extern const bk_conv_backend_t bk_conv_cpu_winograd; /* cpu_winograd.c */
extern const bk_conv_backend_t bk_conv_cudnn;        /* cudnn.c */
extern const bk_conv_backend_t bk_conv_cuda_winograd; /* cuda_winograd.c */

/* cuda_winograd's CUDA C and the names of its kernels (for tests that
 * compile it with NVRTC without a device). */
const char* bk_conv_cuda_winograd_source(const char* const** names, int* count);
/* Loads cuDNN (once per process): UJ_OK and its version (cudnnGetVersion)
 * when it loads and is cuDNN 9 or newer; else UJ_ERR_UNSUPPORTED and why. */
uj_status_t bk_conv_cudnn_library(size_t* version);

/* ---- capability (select.c) ---- */

/* UJ_OK when p is inside b's capability; otherwise UJ_ERR_UNSUPPORTED with
 * a message "backend NAME ...: REASON" naming the axis or parameter at
 * fault (set only when `explain` is 1, so that auto can test candidates
 * without formatting messages). */
uj_status_t bk_conv_capable(const bk_conv_backend_t* b, const bk_conv_problem_t* p, int explain);

/* Runs the call on the named backend (NULL or "auto": chosen as
 * include/uopjit.h describes) and records the one that ran. */
uj_status_t bk_conv_dispatch(bk_conv_call_t* call, const char* backend);

/* ---- per-context state (state.c) ---- */

/* The context's backend state, made on first use; NULL (error set) on OOM. */
bk_conv_state_t* bk_conv_state(uj_ctx_t* ctx);

/* The forced backend from UOPJIT_CONV_BACKEND: NULL when unset, empty or
 * "auto"; *problem is the message for an invalid value (else NULL). */
const bk_conv_backend_t* bk_conv_state_forced(bk_conv_state_t* st, const char** problem);
/* UOPJIT_CONV_ISA as it was when the state was made (NULL: unset); see
 * bk_conv_kernel_for in cpu.h. */
const char* bk_conv_state_isa(bk_conv_state_t* st);
/* The message for an invalid UOPJIT_CONV_ISA, or NULL. */
const char* bk_conv_state_isa_problem(bk_conv_state_t* st);
/* UOPJIT_CONV_BACKEND read now: *forced the backend it names (NULL when
 * unset, empty or "auto"), or UJ_ERR_INVALID naming the variable and the
 * backends. */
uj_status_t bk_conv_env_backend(const bk_conv_backend_t** forced);
/* UOPJIT_CONV_ISA read now: *isa the kernel set it names (NULL when unset
 * or empty), or UJ_ERR_INVALID naming the variable and the instruction
 * sets this CPU runs. */
uj_status_t bk_conv_env_isa(const char** isa);
/* The backend auto chose for p earlier, or NULL. */
const bk_conv_backend_t* bk_conv_state_choice(bk_conv_state_t* st, const bk_conv_problem_t* p);
/* Remembers b as auto's choice for p (silently not on OOM: it is only a memo). */
void bk_conv_state_remember(bk_conv_state_t* st, const bk_conv_problem_t* p, const bk_conv_backend_t* b);
void bk_conv_state_set_last(bk_conv_state_t* st, const bk_conv_backend_t* b);
const bk_conv_backend_t* bk_conv_state_last(bk_conv_state_t* st);

/* A backend's slot for data that lives as long as the context (the
 * reference keeps its programs there): *slot is NULL until the backend sets
 * it, and free_fn releases it with the context. Read and write the slot
 * between bk_conv_state_lock and bk_conv_state_unlock. NULL for a backend
 * not in the table. */
void** bk_conv_state_slot(bk_conv_state_t* st, const bk_conv_backend_t* b, void (*free_fn)(void*));
void bk_conv_state_lock(bk_conv_state_t* st);
void bk_conv_state_unlock(bk_conv_state_t* st);

/* Prepared filters (a transform or a packing of w), kept per filter_key.
 * A found or added entry is held until released, so eviction never frees
 * memory a running call reads. */
typedef struct bk_conv_filter bk_conv_filter_t;
/* The entry of backend b for (key, w's sizes, variant), held; NULL when
 * none (or key is 0). variant tells apart layouts one backend may make
 * (a kernel's panel width, say). */
bk_conv_filter_t* bk_conv_filter_find(bk_conv_state_t* st, const bk_conv_backend_t* b, const bk_conv_problem_t* p,
                                      int variant);
/* Keeps data (`bytes` long; ownership passes to the cache, which releases
 * it with free_fn, or free() when NULL: a GPU backend keeps device memory)
 * under p->filter_key and returns the held entry; on OOM releases data and
 * returns NULL. An older entry for the same name is replaced. */
bk_conv_filter_t* bk_conv_filter_add(bk_conv_state_t* st, const bk_conv_backend_t* b, const bk_conv_problem_t* p,
                                     int variant, void* data, size_t bytes, void (*free_fn)(void*));
const void* bk_conv_filter_data(const bk_conv_filter_t* f);
void bk_conv_filter_release(bk_conv_state_t* st, bk_conv_filter_t* f);
/* Drops the entries of key (0: all) that no call holds; held ones go when released. */
void bk_conv_filter_forget(bk_conv_state_t* st, uint64_t key);

/* Scratch memory that outlives a call: the context keeps the largest buffer
 * given back, so that back-to-back calls reuse mapped pages instead of
 * faulting in fresh ones (for a small convolution the faults cost as much
 * as the arithmetic). take returns at least `floats` 64-byte aligned
 * floats (*got: how many), or NULL with the error set; give hands it back. */
float* bk_conv_scratch_take(bk_conv_state_t* st, int64_t floats, int64_t* got, const char* what);
void bk_conv_scratch_give(bk_conv_state_t* st, float* p, int64_t floats);

/* The context's CPU thread pool (the JIT's, sized by UOPJIT_THREADS); NULL
 * (run serially) when it cannot be had. */
rt_pool_t* bk_conv_pool(uj_ctx_t* ctx);

#endif
