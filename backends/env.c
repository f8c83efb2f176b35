/* backends/env.c: uj_env_check, every UOPJIT_* variable validated at once
 * (docs/DESIGN.md section 12).
 *
 * Each variable is read where it is used, by the layer that knows its
 * accepted values: a context's settings in rt (rt/env.c), the pass
 * pipeline's UOPJIT_DEBUG in ir, the convolution backends' variables here
 * in backends. This file sits in the top layer because it is the one that
 * may call all of them; it runs each reader and reports the first invalid
 * value, exactly as the call that used it would. UOPJIT_CUDA_DEVICE is
 * checked for its form (a device number) only: how many devices there are
 * is known once the driver is loaded, which a check must not do. Paths
 * (UOPJIT_CACHE_DIR, UOPJIT_CC, UOPJIT_NVRTC) take any value here; what
 * they name is checked when it is used. */
#include <limits.h>

#include "conv/conv.h"

uj_status_t uj_env_check(void) {
  rt_settings_t set;
  char problem[RT_SETTING_COUNT][RT_PROBLEM_CAP];
  rt_settings_from_env(&set, problem);
  for (int i = 0; i < RT_SETTING_COUNT; i++)
    if (problem[i][0]) return rt_error(UJ_ERR_INVALID, "%s", problem[i]);
  unsigned debug;
  uj_status_t s = ir_debug_from_env(&debug);
  const bk_conv_backend_t* forced;
  if (s == UJ_OK) s = bk_conv_env_backend(&forced);
  const char* isa;
  if (s == UJ_OK) s = bk_conv_env_isa(&isa);
  int64_t device;
  int given;
  if (s == UJ_OK)
    s = rt_env_int("UOPJIT_CUDA_DEVICE", 0, INT_MAX, "a device number (0 is the first GPU)", &device, &given);
  return s;
}
