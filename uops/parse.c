/* uops/parse.c: the expression language front end. */
#include "uops.h"

uj_status_t uj_program_parse(const char* source, uj_program_t** out) {
  (void)source;
  (void)out;
  return rt_error(UJ_ERR_UNSUPPORTED, "uj_program_parse: the expression language is not built yet");
}
