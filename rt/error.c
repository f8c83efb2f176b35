/* rt/error.c: the one piece of global state the library has, the calling
 * thread's last error message, plus the printable names of statuses.
 *
 * The message lives in a fixed thread-local buffer so that reporting an error
 * never allocates (an out-of-memory failure must still be reportable) and so
 * that threads using different contexts never see each other's messages. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rt.h"

#define RT_ERROR_CAP 1024

static _Thread_local char rt_error_message[RT_ERROR_CAP];

uj_status_t rt_error(uj_status_t s, const char* fmt, ...) {
  /* Format into a local buffer first: callers may pass uj_last_error() as
   * an argument to wrap the previous message, and vsnprintf must not read
   * the buffer it writes. vsnprintf truncates and always NUL-terminates. */
  char message[RT_ERROR_CAP];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  if (n < 0) message[0] = '\0';
  memcpy(rt_error_message, message, sizeof message);
  return s;
}

void rt_error_prefix(const char* fmt, ...) {
  char prefix[RT_ERROR_CAP];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  size_t plen = strlen(prefix);
  size_t old = strlen(rt_error_message);
  /* Shift the old message right, dropping its tail if the whole would not
   * fit: the prefix (the outer context) is the part worth keeping. */
  if (plen >= RT_ERROR_CAP - 1) {
    memcpy(rt_error_message, prefix, RT_ERROR_CAP - 1);
    rt_error_message[RT_ERROR_CAP - 1] = '\0';
    return;
  }
  size_t keep = old;
  if (plen + keep > RT_ERROR_CAP - 1) keep = RT_ERROR_CAP - 1 - plen;
  memmove(rt_error_message + plen, rt_error_message, keep);
  memcpy(rt_error_message, prefix, plen);
  rt_error_message[plen + keep] = '\0';
}

void rt_error_clear(void) { rt_error_message[0] = '\0'; }

const char* uj_last_error(void) { return rt_error_message; }

const char* uj_status_str(uj_status_t s) {
  switch (s) {
    case UJ_OK: return "UJ_OK";
    case UJ_ERR_INVALID: return "UJ_ERR_INVALID";
    case UJ_ERR_PARSE: return "UJ_ERR_PARSE";
    case UJ_ERR_SHAPE: return "UJ_ERR_SHAPE";
    case UJ_ERR_UNSUPPORTED: return "UJ_ERR_UNSUPPORTED";
    case UJ_ERR_OOM: return "UJ_ERR_OOM";
    case UJ_ERR_COMPILE: return "UJ_ERR_COMPILE";
    case UJ_ERR_DEVICE: return "UJ_ERR_DEVICE";
    case UJ_ERR_IO: return "UJ_ERR_IO";
  }
  return "UJ_ERR_UNKNOWN";
}
