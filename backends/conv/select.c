/* backends/conv/select.c: which backend runs a convolution.
 *
 * A backend named by the caller runs if its capability covers the call,
 * else the call fails with UJ_ERR_UNSUPPORTED and the reason. Auto (no
 * name, or "auto") is, in order:
 *   1. UOPJIT_CONV_BACKEND when set: that backend, under its capability;
 *   2. the choice remembered in the context for this shape;
 *   3. the backends whose capability covers the call and that are
 *      available (bk_conv_backend_t.available: a GPU, a library), the
 *      reference only when no other does. One candidate runs; several are
 *      timed on the call itself, and the fastest is remembered for the
 *      shape (time_candidates).
 * Timing on the real call costs a few extra runs once per shape and
 * context, and measures what matters: this machine, these sizes, the
 * threads the context has. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "conv.h"
#include "../../rt/cuda.h"

static const char* op_name(bk_conv_op_t op) {
  switch (op) {
    case BK_CONV_FORWARD: return "the forward convolution";
    case BK_CONV_BACKWARD_DATA: return "backward data";
    case BK_CONV_BACKWARD_FILTER: return "backward filter";
    case BK_CONV_NOPS: break;
  }
  return "?";
}

static const char* device_name(uj_device_t d) { return d == UJ_CPU ? "cpu" : d == UJ_CUDA ? "cuda" : "?"; }

/* "f32" or "f32 and f64": the dtypes in a capability's mask. */
static void dtype_list(unsigned mask, char* out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int d = UJ_F32; d <= UJ_I32; d++)
    if (mask & (1u << d)) len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s", len ? ", " : "",
                                                  uj_dtype_name((uj_dtype_t)d));
}

/* "cpu" or "cpu, cuda": the devices in a capability's mask. */
static void device_list(unsigned mask, char* out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int d = UJ_CPU; d <= UJ_CUDA; d++)
    if (mask & (1u << d))
      len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s", len ? ", " : "",
                              device_name((uj_device_t)d));
}

uj_status_t bk_conv_capable(const bk_conv_backend_t* b, const bk_conv_problem_t* p, int explain) {
  const bk_conv_caps_t* c = &b->caps;
  if (!(c->ops & (1u << p->op)))
    return explain ? rt_error(UJ_ERR_UNSUPPORTED, "backend %s does not run %s", b->name, op_name(p->op))
                   : UJ_ERR_UNSUPPORTED;
  if (!(c->devices & (1u << p->device))) {
    if (!explain) return UJ_ERR_UNSUPPORTED;
    char list[32];
    device_list(c->devices, list, sizeof list);
    return rt_error(UJ_ERR_UNSUPPORTED, "backend %s runs on %s only, the tensors are on %s", b->name, list,
                    device_name(p->device));
  }
  if (!(c->dtypes & (1u << p->dtype))) {
    if (!explain) return UJ_ERR_UNSUPPORTED;
    char list[32];
    dtype_list(c->dtypes, list, sizeof list);
    return rt_error(UJ_ERR_UNSUPPORTED, "backend %s takes %s only, the tensors are %s", b->name, list,
                    uj_dtype_name(p->dtype));
  }
  if (c->layout != p->layout)
    return explain ? rt_error(UJ_ERR_UNSUPPORTED, "backend %s does not take this layout", b->name)
                   : UJ_ERR_UNSUPPORTED;
  int kernel_ok = p->kh >= c->kernel_min && p->kw >= c->kernel_min &&
                  (!c->kernel_max || (p->kh <= c->kernel_max && p->kw <= c->kernel_max));
  if (!kernel_ok) {
    if (!explain) return UJ_ERR_UNSUPPORTED;
    if (c->kernel_min == c->kernel_max)
      return rt_error(UJ_ERR_UNSUPPORTED, "backend %s takes %dx%d filters only, w is %lldx%lld (axes 1 and 2)",
                      b->name, c->kernel_min, c->kernel_min, (long long)p->kh, (long long)p->kw);
    return rt_error(UJ_ERR_UNSUPPORTED, "backend %s takes filters of %d to %d per side, w is %lldx%lld (axes 1 and 2)",
                    b->name, c->kernel_min, c->kernel_max, (long long)p->kh, (long long)p->kw);
  }
  if (c->stride_max && (p->stride_h > c->stride_max || p->stride_w > c->stride_max))
    return explain ? rt_error(UJ_ERR_UNSUPPORTED, "backend %s takes strides up to %d, desc has stride_h %d, stride_w %d",
                              b->name, c->stride_max, p->stride_h, p->stride_w)
                   : UJ_ERR_UNSUPPORTED;
  if (c->pad_max >= 0 && (p->pad_h > c->pad_max || p->pad_w > c->pad_max))
    return explain ? rt_error(UJ_ERR_UNSUPPORTED, "backend %s takes paddings up to %d, desc has pad_h %d, pad_w %d",
                              b->name, c->pad_max, p->pad_h, p->pad_w)
                   : UJ_ERR_UNSUPPORTED;
  return UJ_OK;
}

/* Capable of p and available here (explain as bk_conv_capable's). */
static uj_status_t usable(const bk_conv_backend_t* b, const bk_conv_problem_t* p, int explain) {
  uj_status_t s = bk_conv_capable(b, p, explain);
  if (s != UJ_OK || !b->available) return s;
  if ((s = b->available(p)) != UJ_OK && explain) rt_error_prefix("backend %s is not available: ", b->name);
  return s;
}

static uj_status_t run_recorded(bk_conv_call_t* call, const bk_conv_backend_t* b) {
  uj_status_t s = b->run(call);
  if (s == UJ_OK) bk_conv_state_set_last(call->state, b);
  return s;
}

static void known_names(char* out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < bk_conv_backend_total; i++)
    len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s", i ? ", " : "", bk_conv_backends[i]->name);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* No backend covers the call: one message with every backend's reason. */
static uj_status_t none_capable(const bk_conv_problem_t* p) {
  char reasons[1024];
  size_t len = 0;
  reasons[0] = '\0';
  for (int i = 0; i < bk_conv_backend_total; i++) {
    usable(bk_conv_backends[i], p, 1);
    len += (size_t)snprintf(reasons + len, len < sizeof reasons ? sizeof reasons - len : 0, "%s%s", i ? "; " : "",
                            uj_last_error());
  }
  return rt_error(UJ_ERR_UNSUPPORTED, "no convolution backend can run this call: %s", reasons);
}

/* Timed runs per candidate after its warm-up. */
#define TIMED_RUNS 3

/* Waits for the work a run queued on the device, if the call is on one. */
static uj_status_t finish(const bk_conv_call_t* call) {
  if (call->p->device != UJ_CUDA) return UJ_OK;
  rt_cuda_ctx_t* cc;
  uj_status_t s = rt_cuda_ctx_get(call->ctx, &cc);
  return s == UJ_OK ? rt_cuda_sync(cc) : s;
}

/* Times every candidate, remembers the fastest of those that worked. Each
 * runs on the call's own tensors once as a warm-up (first-touch page
 * faults, a JIT compile, a filter transform that a filter_key then caches)
 * and then TIMED_RUNS times, its best time counting (the best, not the
 * mean: on a busy machine a run can lose its thread for a while, which
 * says nothing about the backend); if the fastest was not the last to run
 * it runs once more, so that the output always comes from the backend
 * uj_conv2d_last_backend names. A device backend returns once its work is
 * queued on the context's stream, so each of its timed runs waits for the
 * stream before and after. */
static uj_status_t time_candidates(bk_conv_call_t* call, const bk_conv_backend_t* const* cand, int ncand) {
  const bk_conv_backend_t* best = NULL;
  const bk_conv_backend_t* last_ok = NULL;
  double best_time = 0;
  uj_status_t failure = UJ_OK;
  for (int i = 0; i < ncand; i++) {
    uj_status_t s = cand[i]->run(call);
    if (s == UJ_OK) s = finish(call);
    double elapsed = 0;
    for (int r = 0; r < TIMED_RUNS && s == UJ_OK; r++) {
      double t0 = now_seconds();
      s = cand[i]->run(call);
      if (s == UJ_OK) s = finish(call);
      double t = now_seconds() - t0;
      if (r == 0 || t < elapsed) elapsed = t;
    }
    if (s != UJ_OK) {
      failure = s;
      continue;
    }
    last_ok = cand[i];
    if (!best || elapsed < best_time) best = cand[i], best_time = elapsed;
  }
  if (!best) return failure;
  bk_conv_state_remember(call->state, call->p, best);
  if (best != last_ok) return run_recorded(call, best);
  bk_conv_state_set_last(call->state, best);
  return UJ_OK;
}

uj_status_t bk_conv_dispatch(bk_conv_call_t* call, const char* name) {
  const bk_conv_problem_t* p = call->p;
  /* any backend may run on the context's threads, and ref on its engine:
   * an invalid environment value of those is this call's error */
  uj_status_t env = rt_ctx_settings_check(call->ctx, RT_SETTING_ALL);
  if (env != UJ_OK) return env;
  const char* isa_problem = bk_conv_state_isa_problem(call->state);
  if (isa_problem) return rt_error(UJ_ERR_INVALID, "%s", isa_problem);
  if (name && strcmp(name, "auto") != 0) {
    const bk_conv_backend_t* b = bk_conv_find(name);
    if (!b) {
      char known[256];
      known_names(known, sizeof known);
      return rt_error(UJ_ERR_INVALID, "unknown convolution backend \"%s\" (known: auto, %s)", name, known);
    }
    uj_status_t s = usable(b, p, 1);
    return s != UJ_OK ? s : run_recorded(call, b);
  }
  const char* problem = NULL;
  const bk_conv_backend_t* forced = bk_conv_state_forced(call->state, &problem);
  if (problem) return rt_error(UJ_ERR_INVALID, "%s", problem);
  if (forced) {
    uj_status_t s = usable(forced, p, 1);
    if (s != UJ_OK) {
      rt_error_prefix("UOPJIT_CONV_BACKEND: ");
      return s;
    }
    return run_recorded(call, forced);
  }
  const bk_conv_backend_t* chosen = bk_conv_state_choice(call->state, p);
  if (chosen) return run_recorded(call, chosen);

  const bk_conv_backend_t* cand[16];
  const bk_conv_backend_t* reference = NULL;
  int ncand = 0;
  for (int i = 0; i < bk_conv_backend_total; i++) {
    const bk_conv_backend_t* b = bk_conv_backends[i];
    if (usable(b, p, 0) != UJ_OK) continue;
    if (b->caps.reference) {
      if (!reference) reference = b;
    } else if (ncand < (int)(sizeof cand / sizeof cand[0])) {
      cand[ncand++] = b;
    }
  }
  if (ncand == 0 && reference) return run_recorded(call, reference);
  if (ncand == 0) return none_capable(p);
  if (ncand == 1) return run_recorded(call, cand[0]);
  return time_candidates(call, cand, ncand);
}
