/* lang/parse.h: the expression language's syntax tree, shared by the parser
 * (parse.c) and the builder that turns it into uop programs per input
 * signature (build.c). */
#ifndef UJ_UOPS_PARSE_H
#define UJ_UOPS_PARSE_H

#include <pthread.h>
#include <stdatomic.h>

#include "../uops/uops.h"

#define PARSE_MAX_SOURCE (1 << 20)  /* bytes */
#define PARSE_MAX_NESTING 256       /* levels of parentheses, calls, unary operators and '**' (parse.c) */
/* The most operations a built program may need: the pass pipeline's limit
 * on loop blocks (every operation lowers to one block at least), checked
 * before lowering (build.c). */
#define PARSE_MAX_OPERATIONS PIPELINE_MAX_BLOCKS
#define PARSE_MAX_NAMES 256
#define PARSE_MAX_ARGS 3
#define PARSE_CACHE 8               /* specializations kept per program */

typedef enum { PN_NUMBER, PN_NAME, PN_NEG, PN_NOT, PN_BINARY, PN_CALL } pn_kind_t;

/* A call: an op of the op table (PF_UNARY, PF_BINARY: its number in
 * pn_node_t.op), or a function of the language's own. */
typedef enum {
  PF_UNARY, PF_BINARY, PF_RELU, PF_SOFTPLUS, PF_CLAMP, PF_WHERE, PF_ONES_LIKE, PF_ZEROS_LIKE,
  PF_SUM, PF_MEAN, PF_PROD, PF_AMAX, PF_AMIN
} pn_func_t;

/* The operators of PN_BINARY that are no single op of the table (its op
 * is a uj_binary_op_t or one of these). */
enum { PN_FLOORDIV = 1000, PN_AND, PN_OR };

typedef struct pn_node pn_node_t;
struct pn_node {
  pn_kind_t kind;
  int line, column;
  double number;          /* PN_NUMBER */
  int name;               /* PN_NAME: name id */
  int version;            /* PN_NAME: which assignment it reads; -1 the input */
  int op;                 /* PN_BINARY: uj_binary_op_t or PN_FLOORDIV...; PN_CALL: the table op */
  int func;               /* PN_CALL: pn_func_t */
  int nargs;
  pn_node_t* args[PARSE_MAX_ARGS];
  int axis, has_axis;     /* reductions */
};

typedef struct {
  int name;
  pn_node_t* value;
} pn_stmt_t;

/* What a specialization depends on: the pass it builds, and per input its
 * dtype, rank and which axes have size 1 (broadcasting is decided by
 * those). */
typedef struct {
  int n;
  unsigned char pass;     /* uj_pass_t */
  unsigned char dtype[PARSE_MAX_NAMES];
  unsigned char ndim[PARSE_MAX_NAMES];
  unsigned char ones[PARSE_MAX_NAMES];
} pn_signature_t;

/* One specialization: the uop program built for a signature. refs counts
 * its holders: the parsed program's cache while the entry is cached, and
 * each call from pn_specialize to pn_release. The last holder frees it, so
 * an entry evicted while other threads run it lives until they are done. */
typedef struct {
  pn_signature_t sig;
  uj_program_t* program;
  atomic_int refs;
} pn_special_t;

struct pn_program {
  rt_arena_t arena;
  int nnames;
  const char* names[PARSE_MAX_NAMES];
  int weak_scalars;                       /* pn_program_weak_scalars */
  int hinted[PARSE_MAX_NAMES];            /* 1 when a dtype hint was given */
  uj_dtype_t hint[PARSE_MAX_NAMES];
  int nstmts, stmt_cap;
  pn_stmt_t* stmts;
  int ninputs, noutputs;
  int input_name[PARSE_MAX_NAMES];        /* input slot -> name id */
  int output_name[PARSE_MAX_NAMES];       /* output slot -> name id */
  /* specializations by input signature, most recently used first (the
   * first is the one dumps show); the lock guards the list and its order */
  pthread_mutex_t lock;
  int ncached;
  pn_special_t* cached[PARSE_CACHE];
};

/* Finds or builds the specialization of a pass for these inputs and holds
 * it for the caller: (*out)->program stays valid until pn_release(*out),
 * whatever other threads evict meanwhile. The forward pass takes the
 * program's inputs. The backward pass takes them, then the gradient of
 * each output (of its shape and dtype), and gives the gradient of each
 * input: its program is a uop program with only a backward pass, built by
 * the uop autodiff (uops/backward.c). */
uj_status_t pn_specialize(pn_program_t* pp, uj_pass_t pass, const uj_tensor_t* const* inputs, int input_count,
                          pn_special_t** out);
/* The same for dumps: the most recently used specialization of the pass,
 * else one for default inputs (rank 1, f32 unless hinted). */
uj_status_t pn_specialize_default(pn_program_t* pp, uj_pass_t pass, pn_special_t** out);
/* Drops a hold from pn_specialize*; the last one frees the
 * specialization. NULL does nothing. */
void pn_release(pn_special_t* sp);
void pn_program_free(pn_program_t* pp);
/* Makes a parsed program's 0-d f64 values weak against f32, bf16 and f16
 * tensors (lang/build.c): what an optimizer's passes need, whose
 * scalars are bound in f64. Call it before the program first runs. */
void pn_program_weak_scalars(uj_program_t* p);

/* A number as the expression language writes one (digits with an optional
 * fraction, or a fraction alone, then an optional exponent; no sign), at
 * s and before end (NULL: s is NUL-terminated). Returns its length in
 * bytes, 0 when none starts at s. *value is its value and *problem NULL,
 * or *problem says why it is not one ("number too long", over 63 bytes;
 * "number out of range", beyond f64: underflow rounds). Also what an
 * updater's [defaults] reads (optim/spec.c), so that a default holds only
 * what a program could write. */
int pn_number(const char* s, const char* end, double* value, const char** problem);

#endif
