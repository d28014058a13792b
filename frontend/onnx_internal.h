/*
 * onnx_internal.h — what the ONNX importer's files share: the import context, the table of
 * what each ONNX name stands for, and the helpers op importers are written with.
 *
 * An ONNX name stands for a dpc value, a constant the importer holds (folded at import: a
 * Constant, an integer initializer, a Shape of known dimensions, arithmetic on those), or both
 * once a constant has been materialised as a node. A constant of int64 may hold symbolic
 * dimensions (Shape of a dynamic batch): `sym` marks those elements, whose value is then the
 * DPC_DIM_SYM encoding, so Gather/Concat/Unsqueeze on shapes carry the symbol into Reshape.
 */
#ifndef DPC_FRONTEND_ONNX_INTERNAL_H
#define DPC_FRONTEND_ONNX_INTERNAL_H

#include "frontend/onnx.h"

#include <onnx/onnx-ml.pb-c.h>

typedef struct onnx_const {
  dpc_tensor t; /* owned data */
  bool *sym;    /* NULL, or per element (int64 only): the element is a symbolic dimension */
  bool param;   /* a float initializer: becomes a param (or state), never folded */
  bool state;   /* ... used as BatchNormalization's running statistics: a state */
  bool flipped; /* a Gemm's transB weight, held (and made a param) as its transpose */
} onnx_const;

typedef struct onnx_entry {
  uint32_t value; /* dpc value id, DPC_NONE until there is one */
  int32_t k;      /* index in ctx->ks, -1 when not a constant */
  int32_t pos;    /* a graph input: its position (for dpc_onnx_opts.known), else -1 */
} onnx_entry;

typedef struct onnx_ctx {
  dpc_graph *g;
  dpc_diag *d;
  const char *file;
  int64_t opset;   /* of the default domain */
  dpc_idmap names; /* ONNX name (string id in g->strs) -> index in ents */
  onnx_entry *ents;
  uint32_t n_ents, cap_ents;
  onnx_const *ks;
  uint32_t n_ks, cap_ks;
  /* The node being imported, for messages and for the helpers below. */
  const Onnx__NodeProto *node;
  uint32_t node_no;
  dpc_op op; /* the dpc op the node's table row names (onnx_op_row) */
  const dpc_onnx_opts *opts;
  /* With opts->leading_batch: the export's fixed batch (0: none was made symbolic) and the
   * dimension that stands for it now (DPC_DIM_SYM of the symbol `batch`). */
  int64_t batch, batch_dim;
} onnx_ctx;

/* ---- onnx_tensor.c ---- */
bool dpc_onnx_dtype(int32_t onnx, dpc_dtype *out);
int32_t dpc_onnx_dtype_to(dpc_dtype t);
const char *dpc_onnx_dtype_name(int32_t onnx);
dpc_status dpc_onnx_tensor_from(const Onnx__TensorProto *tp, const char *what, dpc_tensor *t,
                                dpc_diag *d);

/* ---- onnx.c: the helpers op importers use; all name the current node in their errors ---- */
dpc_status onnx_fail(onnx_ctx *c, dpc_status st, const char *fmt, ...) DPC_PRINTF(3, 4);
/* Input i is given (present and not the empty name of a skipped optional input). */
bool onnx_has_in(onnx_ctx *c, uint32_t i);
/* Input i as a foldable constant, or NULL when it is computed at run time (or a param). */
const onnx_const *onnx_in_const(onnx_ctx *c, uint32_t i);
/* Input i is an initializer the importer holds transposed (onnx_const.flipped). */
bool onnx_in_flipped(onnx_ctx *c, uint32_t i);
/* The same, also taking a graph input's value when the caller knows it (dpc_onnx_opts). */
const onnx_const *onnx_in_known(onnx_ctx *c, uint32_t i);
/* Input i as a dpc value (a constant is materialised once); DPC_NONE after an error. */
uint32_t onnx_in(onnx_ctx *c, uint32_t i);
/* Input i's type, without materialising it. */
dpc_status onnx_in_type(onnx_ctx *c, uint32_t i, dpc_dtype *t, dpc_shape *s);
/* Add a node of `op` whose attributes were appended since `mark`; *out gets its first output
 * value. */
dpc_status onnx_emit(onnx_ctx *c, dpc_op op, const uint32_t *in, uint32_t n_in, uint32_t mark,
                     uint32_t n_out, uint32_t *out);
/* Shorthands for one-input and two-input nodes without attributes. */
uint32_t onnx_un(onnx_ctx *c, dpc_op op, uint32_t x);
uint32_t onnx_bin(onnx_ctx *c, dpc_op op, uint32_t a, uint32_t b);
/* x reshaped (dims may be symbols); cast to a dtype; a constant of values v (row-major) and a
 * concrete shape; a scalar constant of a dtype, or of the dtype of value `like`; a constant of
 * one value and a concrete shape. */
uint32_t onnx_reshape(onnx_ctx *c, uint32_t x, const int64_t *dims, uint32_t rank);
uint32_t onnx_cast(onnx_ctx *c, uint32_t x, dpc_dtype t);
uint32_t onnx_constant(onnx_ctx *c, dpc_dtype t, const dpc_shape *s, const double *v);
uint32_t onnx_scalar(onnx_ctx *c, dpc_dtype t, double v);
uint32_t onnx_k(onnx_ctx *c, uint32_t like, double v);
uint32_t onnx_filled(onnx_ctx *c, dpc_dtype t, const dpc_shape *s, double v);
/* cond ? a : b; a reduction over axes (n < 0 or 0: all) keeping them or not; x[lo:hi:step]
 * along one axis; a concat (one value passes through); rows of x picked along an axis; a
 * transpose. */
uint32_t onnx_where(onnx_ctx *c, uint32_t cond, uint32_t a, uint32_t b);
uint32_t onnx_reduce(onnx_ctx *c, dpc_op op, uint32_t x, const int64_t *axes, int n, bool keep);
uint32_t onnx_slice(onnx_ctx *c, uint32_t x, int64_t axis, int64_t lo, int64_t hi, int64_t step);
uint32_t onnx_concat(onnx_ctx *c, const uint32_t *xs, uint32_t n, int64_t axis);
uint32_t onnx_gather(onnx_ctx *c, uint32_t x, uint32_t idx, int64_t axis);
uint32_t onnx_transpose(onnx_ctx *c, uint32_t x, const int64_t *perm, uint32_t n);
/* a @ b, either side transposed; and over `axes` of x (kept): its mean, x - mean, and
 * 1 / sqrt(variance + eps), what normalising divides by. */
uint32_t onnx_matmul(onnx_ctx *c, uint32_t a, uint32_t b, bool trans_a, bool trans_b);
void onnx_moments(onnx_ctx *c, uint32_t x, const int64_t *axes, int n, double eps, uint32_t *mean,
                  uint32_t *dev, uint32_t *inv);
static inline uint32_t onnx_add(onnx_ctx *c, uint32_t a, uint32_t b) {
  return onnx_bin(c, DPC_OP_ADD, a, b);
}
static inline uint32_t onnx_mul(onnx_ctx *c, uint32_t a, uint32_t b) {
  return onnx_bin(c, DPC_OP_MUL, a, b);
}
static inline dpc_dtype onnx_dtype_of(const onnx_ctx *c, uint32_t v) {
  return c->g->values[v].dtype;
}
/* Bind output k of the node to a value / to a constant (taken over, also on failure). */
dpc_status onnx_def(onnx_ctx *c, uint32_t k, uint32_t value);
dpc_status onnx_def_const(onnx_ctx *c, uint32_t k, onnx_const *k_owned);
uint32_t onnx_n_out(onnx_ctx *c);

/* Attributes of the current node. */
const Onnx__AttributeProto *onnx_attr(onnx_ctx *c, const char *name);
int64_t onnx_attr_i(onnx_ctx *c, const char *name, int64_t def);
double onnx_attr_f(onnx_ctx *c, const char *name, double def);
/* Copies up to max ints; returns how many the attribute has, or -1 when absent. */
int onnx_attr_ints(onnx_ctx *c, const char *name, int64_t *out, int max);
/* The string attribute (or def) into buf, cut to fit. */
void onnx_attr_s(onnx_ctx *c, const char *name, const char *def, char *buf, size_t n);
/* Integers from a constant input (int32/int64), up to max; -1 with an error when input i is
 * not a constant or is too long. Symbolic elements are errors unless `sym` is given. */
int onnx_const_ints(onnx_ctx *c, uint32_t i, int64_t *out, int max, bool *sym);
/* Slice's starts, ends, axes and steps (attributes before opset 10, constant inputs after),
 * each array of DPC_MAX_RANK + 1; absent axes are 0, 1, ..., absent steps 1. Their count, or
 * -1 with an error. */
int onnx_slice_args(onnx_ctx *c, int64_t *st, int64_t *en, int64_t *ax, int64_t *sp);

/* The shape Squeeze makes of `in` (dropping `axes`, or every 1 when n < 0) or Unsqueeze
 * (inserting 1s at `axes`, numbered in the result); false when an axis does not fit, *bad its
 * index in axes (-1: the result's rank is above dpc's limit). */
bool onnx_squeeze_shape(const dpc_shape *in, const int64_t *axes, int n, bool unsqueeze,
                        dpc_shape *out, int *bad);

void onnx_const_free(onnx_const *k);

/* ---- onnx_fold.c ---- */
/* Evaluate the current node at import when every input is a constant and the op is one the
 * folder knows; *folded says whether it did. */
dpc_status onnx_try_fold(onnx_ctx *c, bool *folded);

/* Range of three scalar constants of one type, or false. */
bool onnx_fold_range(const onnx_const *a, const onnx_const *b, const onnx_const *d, onnx_const *y);

/* ---- onnx_ops.c, onnx_compose.c ---- */
typedef dpc_status (*onnx_import_fn)(onnx_ctx *c);
/* A row of the op tables: an ONNX op type, its importer, and the dpc op an importer shared by
 * several ONNX ops makes (c->op while it runs; unused by the others). */
typedef struct onnx_op_row {
  const char *name;
  onnx_import_fn fn;
  dpc_op op;
} onnx_op_row;
/* The row of an ONNX op type, or NULL when dpc does not support it. */
const onnx_op_row *onnx_find_op(const char *op_type);
/* The ops built from other ops (onnx_compose.c, onnx_index.c); onnx_find_op asks them too. */
const onnx_op_row *onnx_find_composed(const char *op_type);
const onnx_op_row *onnx_find_indexed(const char *op_type);

#endif
