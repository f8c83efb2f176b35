/* backends/conv/registry.c: the table of convolution backends. The order is
 * the order in which auto considers them and in which uj_conv2d_backend_name
 * lists them; the reference comes first so that listings start from the
 * definition. A backend added here is reachable by name, by auto (through
 * its capability) and by every test that walks the table. The CUDA
 * backends (device mask UJ_CUDA) come last: CPU calls never reach them. */
#include <string.h>

#include "conv.h"

const bk_conv_backend_t* const bk_conv_backends[] = {
    &bk_conv_ref,
    &bk_conv_cpu_direct,
    &bk_conv_cpu_winograd,
    &bk_conv_cudnn,
    &bk_conv_cuda_winograd,
};
const int bk_conv_backend_total = (int)(sizeof bk_conv_backends / sizeof bk_conv_backends[0]);

const bk_conv_backend_t* bk_conv_find(const char* name) {
  for (int i = 0; name && i < bk_conv_backend_total; i++)
    if (strcmp(bk_conv_backends[i]->name, name) == 0) return bk_conv_backends[i];
  return NULL;
}

int uj_conv2d_backend_count(void) { return bk_conv_backend_total; }

const char* uj_conv2d_backend_name(int i) {
  return i >= 0 && i < bk_conv_backend_total ? bk_conv_backends[i]->name : NULL;
}
