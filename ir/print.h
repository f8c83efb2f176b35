/* ir/print.h: the printer's streaming form, private to ir/.
 *
 * ir_print builds a string; ir_hash needs the same canonical text but must
 * not depend on memory being available (a hash that silently degrades on OOM
 * would let two different functions share a kernel-cache key). So the
 * printer writes through a callback, and each caller decides where the text
 * goes: a growable buffer (ir_print) or straight into the hash (ir_hash). */
#ifndef UJ_IR_PRINT_H
#define UJ_IR_PRINT_H

#include "ir.h"

typedef void (*ir_text_write_fn)(void* ctx, const char* text, size_t n);

/* Writes exactly the text ir_print(f, params, flags) returns, in pieces.
 * Never allocates. */
void ir_print_stream(const ir_func_t* f, const int64_t* params, int flags, ir_text_write_fn write,
                     void* ctx);

#endif
