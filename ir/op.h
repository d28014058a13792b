/*
 * op.h — the op enum and its property table, expanded from ir/ops.def.
 *
 * Inputs, outputs and attributes of an op are declared as short strings in ops.def; the
 * functions here read them, so the table stays one greppable line per op.
 */
#ifndef DPC_IR_OP_H
#define DPC_IR_OP_H

#include "ir/base.h"
#include "ir/types.h"

enum {
  DPC_OPF_SOURCE = 1u << 0,   /* no inputs; value set from outside (input, param, constant) */
  DPC_OPF_PERSIST = 1u << 1,  /* value lives across steps (param, state) */
  DPC_OPF_DIFF = 1u << 2,     /* differentiable: autodiff must have a rule for it */
  DPC_OPF_ELEMWISE = 1u << 3, /* output element i depends only on input elements at i */
  DPC_OPF_MODE = 1u << 4,     /* behaves differently when training (dropout, batch_norm) */
  DPC_OPF_COMM = 1u << 5,     /* communication: runs across devices (the executor, not a kernel) */
};

typedef enum dpc_op {
#define DPC_OP(id, name, ins, outs, flags, attrs) DPC_OP_##id,
#include "ir/ops.def"
#undef DPC_OP
  DPC_OP_COUNT
} dpc_op;

typedef struct dpc_op_info {
  const char *name, *inputs, *outputs, *attrs;
  uint32_t flags;
} dpc_op_info;

extern const dpc_op_info dpc_op_table[DPC_OP_COUNT];

static inline const dpc_op_info *dpc_op_get(dpc_op op) {
  return &dpc_op_table[op];
}
static inline const char *dpc_op_name(dpc_op op) {
  return dpc_op_table[op].name;
}
static inline bool dpc_op_has(dpc_op op, uint32_t flag) {
  return (dpc_op_table[op].flags & flag) != 0;
}

/* Look an op up by name; false when there is none. */
bool dpc_op_find(const char *name, size_t n, dpc_op *out);
/* The closest op name within a small edit distance, for "did you mean"; NULL if none. */
const char *dpc_op_suggest(const char *name);

/* Arity from the inputs string: max_in is UINT32_MAX for a variadic op. */
void dpc_op_arity(dpc_op op, uint32_t *min_in, uint32_t *max_in);
/* Number of outputs, 0 when the statement decides (split). */
uint32_t dpc_op_num_outputs(dpc_op op);
/* Name of input i (the variadic name for any index of a variadic op), into buf. */
void dpc_op_input_name(dpc_op op, uint32_t i, char *buf, size_t n);

/* ---- attribute specifications ------------------------------------------------------------- */

typedef enum dpc_attr_kind {
  DPC_ATTR_INT,
  DPC_ATTR_FLOAT,
  DPC_ATTR_STR,
  DPC_ATTR_INTS,
  DPC_ATTR_FLOATS,
  DPC_ATTR_DTYPE,
  DPC_ATTR_SHAPE,
  DPC_ATTR_TENSOR,
  DPC_ATTR_KIND_COUNT
} dpc_attr_kind;

const char *dpc_attr_kind_name(dpc_attr_kind k);

typedef enum dpc_attr_need {
  DPC_ATTR_REQUIRED,
  DPC_ATTR_DEFAULT, /* optional with a default in the spec */
  DPC_ATTR_OPTIONAL /* optional, no default: absent means "not given" */
} dpc_attr_need;

typedef struct dpc_attr_spec {
  char name[32];
  dpc_attr_kind kind;
  dpc_attr_need need;
  char def[32]; /* default as written in ops.def */
} dpc_attr_spec;

/* Number of attributes an op declares, and the i-th. */
uint32_t dpc_op_attr_count(dpc_op op);
void dpc_op_attr_at(dpc_op op, uint32_t i, dpc_attr_spec *out);
/* Spec by name; false when the op has no such attribute. */
bool dpc_op_attr_find(dpc_op op, const char *name, dpc_attr_spec *out);

/* The same spec language describes other call-like things: optimizers and initializers. */
typedef struct dpc_callspec {
  const char *name;
  const char *attrs;
} dpc_callspec;

/* Optimizers accepted by `minimize ... with NAME(...)`. */
extern const dpc_callspec dpc_optimizer_specs[];
extern const uint32_t dpc_optimizer_count;
/* Initializers accepted by `param w: T = NAME(...)` (aliases included). */
extern const dpc_callspec dpc_init_specs[];
extern const uint32_t dpc_init_count;

uint32_t dpc_spec_count(const char *attrs);
void dpc_spec_at(const char *attrs, uint32_t i, dpc_attr_spec *out);
bool dpc_spec_find(const char *attrs, const char *name, dpc_attr_spec *out);

#endif
