/* tests/cuda_check.h: what the CUDA tests share: whether there is a GPU or
 * NVRTC (skipping with a message when not), parsing a source, and the CUDA
 * source of a parsed program (written without a GPU). Used by
 * test_cuda.c and test_cuda_rows.c. */
#ifndef UJ_TESTS_CUDA_CHECK_H
#define UJ_TESTS_CUDA_CHECK_H

#include "oracle.h"

static inline int have_gpu(void) { return or_engine_available(UJ_ENGINE_CUDA); }
static inline int have_nvrtc(void) { return or_cuda_nvrtc_(); }

#define SKIP_WITHOUT_GPU() SKIP_IF(!have_gpu(), "no CUDA device: GPU test skipped")
#define SKIP_WITHOUT_NVRTC() SKIP_IF(!have_nvrtc(), "no NVRTC: CUDA compile test skipped")

static inline uj_program_t* parse(const char* src) {
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_parse(src, &p);
  if (s != UJ_OK) fprintf(stderr, "  parse \"%s\": %s\n", src, uj_last_error());
  CHECK(s == UJ_OK);
  return p;
}

/* The CUDA dump of a parsed program built for n rank-`ndim` f32 inputs of
 * size 4 (0-d for the first `scalars`). */
static inline char* cuda_source(uj_program_t* p, int ndim, int scalars) {
  float data[64] = {0};
  uj_tensor_t t[8];
  const uj_tensor_t* in[8];
  int n = uj_program_io_count(p, 0);
  for (int i = 0; i < n && i < 8; i++) {
    memset(&t[i], 0, sizeof t[i]);
    t[i].data = data, t[i].dtype = UJ_F32, t[i].ndim = i < scalars ? 0 : ndim;
    for (int k = 0; k < t[i].ndim; k++) t[i].dims[k] = 4;
    in[i] = &t[i];
  }
  uj_dtype_t dt;
  CHECK(uj_program_output_dtype(p, UJ_FORWARD, in, 0, &dt) == UJ_OK);
  char* text = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_CUDA, NULL);
  CHECK(text != NULL);
  return text;
}

#endif
