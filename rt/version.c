/* rt/version.c: uj_version(), the version the library was built as.
 *
 * The string is UJ_VERSION as the library's own build saw it, so a program
 * that compiled against one header and loads another build's libuopjit.so
 * can tell the two apart at run time. */
#include "uopjit.h"

const char* uj_version(void) { return UJ_VERSION; }
