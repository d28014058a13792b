/*
 * onnx_fold.c — evaluating the constant parts of an ONNX graph while importing it.
 *
 * Exporters compute shapes in the graph: Shape -> Gather -> Unsqueeze -> Concat -> Reshape,
 * integer arithmetic on dimensions, Range, Cast. dpc's ops take shapes as attributes, so these
 * chains are evaluated here, on small host tensors, and never reach the graph. Elements that
 * stand for a symbolic dimension (a dynamic batch) travel through the layout ops unchanged;
 * arithmetic on them is not folded (the node is then imported as usual, and fails if it needs
 * the number).
 */
#include "frontend/onnx_internal.h"
#include "ir/rules.h"
#include "ir/scalar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The most elements the folder computes; larger constants are left to the graph. */
#define FOLD_MAX (INT64_C(1) << 20)

static bool new_const(onnx_const *k, dpc_dtype t, const dpc_shape *s, bool with_sym) {
  memset(k, 0, sizeof *k);
  k->t.dtype = t;
  k->t.shape = *s;
  int64_t n = dpc_shape_numel(s);
  k->t.data = calloc((size_t)(n ? n : 1), dpc_dtype_size(t));
  if (with_sym) k->sym = calloc((size_t)(n ? n : 1), 1);
  return k->t.data && (!with_sym || k->sym);
}

static bool has_sym(const onnx_const *k) {
  if (!k->sym) return false;
  int64_t n = dpc_tensor_numel(&k->t);
  for (int64_t i = 0; i < n; i++)
    if (k->sym[i]) return true;
  return false;
}

/* Copy element i of a into element o of y, exactly for integers. */
static void copy_el(onnx_const *y, int64_t o, const onnx_const *a, int64_t i) {
  size_t es = dpc_dtype_size(a->t.dtype);
  if (y->t.dtype == a->t.dtype) {
    memcpy((char *)y->t.data + (size_t)o * es, (const char *)a->t.data + (size_t)i * es, es);
  } else if (y->t.dtype == DPC_I64 && dpc_dtype_is_int(a->t.dtype)) {
    int64_t v = dpc_tload_i64(&a->t, i);
    memcpy((char *)y->t.data + 8 * o, &v, 8);
  } else {
    dpc_tstore(&y->t, o, dpc_tload(&a->t, i));
  }
  if (y->sym) y->sym[o] = a->sym && a->sym[i];
}

/* The index into a broadcast operand of shape s for the flat output index o of shape r. */
static int64_t bcast_index(const dpc_shape *r, const dpc_shape *s, int64_t o) {
  int64_t idx = 0, stride = 1;
  for (int32_t i = (int32_t)r->rank - 1; i >= 0; i--) {
    int64_t coord = o % r->d[i];
    o /= r->d[i];
    int32_t j = i - (int32_t)(r->rank - s->rank);
    if (j >= 0) {
      if (s->d[j] != 1) idx += coord * stride;
      stride *= s->d[j];
    }
  }
  return idx;
}

static bool bshape(const dpc_shape *a, const dpc_shape *b, dpc_shape *r) {
  r->rank = a->rank > b->rank ? a->rank : b->rank;
  for (uint32_t i = 0; i < r->rank; i++) {
    int64_t x = i + a->rank >= r->rank ? a->d[i + a->rank - r->rank] : 1;
    int64_t y = i + b->rank >= r->rank ? b->d[i + b->rank - r->rank] : 1;
    if (x != y && x != 1 && y != 1) return false;
    r->d[i] = x == 1 ? y : x;
  }
  return true;
}

/* The dpc op of an ONNX binary op the folder evaluates, decided once per node rather than per
 * element; each element is then what the op's reference kernel gives (ir/scalar.h). */
static bool binary_op_of(const char *name, dpc_op *op) {
  static const struct {
    const char *name;
    dpc_op op;
  } ops[] = {{"Add", DPC_OP_ADD},     {"Sub", DPC_OP_SUB},   {"Mul", DPC_OP_MUL},
             {"Div", DPC_OP_DIV},     {"Max", DPC_OP_MAX},   {"Min", DPC_OP_MIN},
             {"Equal", DPC_OP_EQUAL}, {"Less", DPC_OP_LESS}, {"Greater", DPC_OP_GREATER}};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(name, ops[i].name)) {
      *op = ops[i].op;
      return true;
    }
  return false;
}

/* Not folded (false) where running the node would fail: an integer division by zero. */
static bool fold_binary(const char *name, const onnx_const *a, const onnx_const *b, onnx_const *y) {
  dpc_op op;
  if (!binary_op_of(name, &op) || has_sym(a) || has_sym(b) || a->t.dtype != b->t.dtype)
    return false;
  dpc_shape r;
  if (!bshape(&a->t.shape, &b->t.shape, &r) || dpc_shape_numel(&r) > FOLD_MAX) return false;
  bool cmp = op == DPC_OP_EQUAL || op == DPC_OP_LESS || op == DPC_OP_GREATER;
  bool ints = dpc_dtype_is_int(a->t.dtype) || a->t.dtype == DPC_BOOL;
  if (a->t.dtype == DPC_BOOL && !cmp) return false; /* no arithmetic on bool */
  if (!new_const(y, cmp ? DPC_BOOL : a->t.dtype, &r, false)) return false;
  int64_t n = dpc_shape_numel(&r);
  for (int64_t o = 0; o < n; o++) {
    int64_t i = bcast_index(&r, &a->t.shape, o), j = bcast_index(&r, &b->t.shape, o);
    if (ints) {
      int64_t u = dpc_tload_i64(&a->t, i), v = dpc_tload_i64(&b->t, j);
      if (cmp) {
        dpc_tstore(&y->t, o, dpc_scalar_compare(op, dpc_scalar_order_int(u, v)));
        continue;
      }
      if (op == DPC_OP_DIV && v == 0) return false;
      dpc_tstore_i64(&y->t, o, dpc_scalar_int(op, a->t.dtype, u, v));
    } else {
      double u = dpc_tload(&a->t, i), v = dpc_tload(&b->t, j);
      dpc_tstore(&y->t, o,
                 cmp ? dpc_scalar_compare(op, dpc_scalar_order_float(u, v))
                     : dpc_scalar_float(op, u, v));
    }
  }
  return true;
}

static bool fold_where(const onnx_const *cd, const onnx_const *a, const onnx_const *b,
                       onnx_const *y) {
  if (has_sym(cd) || a->t.dtype != b->t.dtype) return false;
  dpc_shape r1, r;
  if (!bshape(&cd->t.shape, &a->t.shape, &r1) || !bshape(&r1, &b->t.shape, &r) ||
      dpc_shape_numel(&r) > FOLD_MAX)
    return false;
  if (!new_const(y, a->t.dtype, &r, a->sym || b->sym)) return false;
  int64_t n = dpc_shape_numel(&r);
  for (int64_t o = 0; o < n; o++) {
    bool t = dpc_tload(&cd->t, bcast_index(&r, &cd->t.shape, o)) != 0;
    const onnx_const *s = t ? a : b;
    copy_el(y, o, s, bcast_index(&r, &s->t.shape, o));
  }
  return true;
}

/* Same elements, another shape (Identity, Reshape, Squeeze, Unsqueeze). */
static bool fold_view(const onnx_const *a, const dpc_shape *s, onnx_const *y) {
  if (dpc_shape_numel(s) != dpc_tensor_numel(&a->t)) return false;
  if (!new_const(y, a->t.dtype, s, a->sym != NULL)) return false;
  int64_t n = dpc_shape_numel(s);
  for (int64_t i = 0; i < n; i++) copy_el(y, i, a, i);
  return true;
}

static bool fold_concat(onnx_ctx *c, onnx_const *y) {
  uint32_t n = (uint32_t)c->node->n_input;
  const onnx_const *k0 = onnx_in_const(c, 0);
  int64_t axis = onnx_attr_i(c, "axis", 0), r = k0->t.shape.rank;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return false;
  dpc_shape s = k0->t.shape;
  s.d[axis] = 0;
  bool sym = false;
  for (uint32_t i = 0; i < n; i++) {
    const onnx_const *k = onnx_in_const(c, i);
    if (k->t.shape.rank != (uint32_t)r || k->t.dtype != k0->t.dtype) return false;
    for (int64_t j = 0; j < r; j++)
      if (j != axis && k->t.shape.d[j] != k0->t.shape.d[j]) return false;
    s.d[axis] += k->t.shape.d[axis];
    sym |= k->sym != NULL;
  }
  if (dpc_shape_numel(&s) > FOLD_MAX || !new_const(y, k0->t.dtype, &s, sym)) return false;
  int64_t outer = 1, inner = 1;
  for (int64_t j = 0; j < axis; j++) outer *= s.d[j];
  for (int64_t j = axis + 1; j < r; j++) inner *= s.d[j];
  int64_t o = 0;
  for (int64_t p = 0; p < outer; p++)
    for (uint32_t i = 0; i < n; i++) {
      const onnx_const *k = onnx_in_const(c, i);
      int64_t m = k->t.shape.d[axis] * inner;
      for (int64_t q = 0; q < m; q++) copy_el(y, o++, k, p * m + q);
    }
  return true;
}

static bool fold_gather(onnx_ctx *c, const onnx_const *a, const onnx_const *idx, onnx_const *y) {
  if (has_sym(idx)) return false;
  int64_t r = a->t.shape.rank, axis = onnx_attr_i(c, "axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r || r - 1 + idx->t.shape.rank > DPC_MAX_RANK) return false;
  dpc_shape s = {0};
  for (int64_t j = 0; j < axis; j++) s.d[s.rank++] = a->t.shape.d[j];
  for (uint32_t j = 0; j < idx->t.shape.rank; j++) s.d[s.rank++] = idx->t.shape.d[j];
  for (int64_t j = axis + 1; j < r; j++) s.d[s.rank++] = a->t.shape.d[j];
  if (dpc_shape_numel(&s) > FOLD_MAX || !new_const(y, a->t.dtype, &s, a->sym != NULL)) return false;
  int64_t outer = 1, inner = 1, dim = a->t.shape.d[axis], ni = dpc_tensor_numel(&idx->t);
  for (int64_t j = 0; j < axis; j++) outer *= a->t.shape.d[j];
  for (int64_t j = axis + 1; j < r; j++) inner *= a->t.shape.d[j];
  int64_t o = 0;
  for (int64_t p = 0; p < outer; p++)
    for (int64_t i = 0; i < ni; i++) {
      int64_t j = dpc_tload_i64(&idx->t, i);
      if (j < 0) j += dim;
      if (j < 0 || j >= dim) return false;
      for (int64_t q = 0; q < inner; q++) copy_el(y, o++, a, (p * dim + j) * inner + q);
    }
  return true;
}

static bool fold_slice(onnx_ctx *c, const onnx_const *a, onnx_const *y) {
  int64_t st[DPC_MAX_RANK + 1], en[DPC_MAX_RANK + 1], ax[DPC_MAX_RANK + 1], sp[DPC_MAX_RANK + 1];
  int n = onnx_slice_args(c, st, en, ax, sp);
  dpc_diag_clear(c->d); /* a slice it cannot fold is imported as a node, which says why */
  uint32_t r = a->t.shape.rank;
  if (n < 0 || n > (int)r) return false;
  int64_t first[DPC_MAX_RANK], step[DPC_MAX_RANK];
  dpc_shape s = a->t.shape;
  for (uint32_t j = 0; j < r; j++) first[j] = 0, step[j] = 1;
  for (int i = 0; i < n; i++) {
    int64_t k = ax[i], stp = sp[i], cnt;
    if (k < 0) k += r;
    if (k < 0 || k >= (int64_t)r || stp == 0) return false;
    dpc_slice_axis(a->t.shape.d[k], st[i], en[i], stp, &first[k], &cnt);
    step[k] = stp, s.d[k] = cnt;
  }
  if (!new_const(y, a->t.dtype, &s, a->sym != NULL)) return false;
  int64_t total = dpc_shape_numel(&s), istr[DPC_MAX_RANK];
  dpc_shape_strides(&a->t.shape, istr);
  for (int64_t o = 0; o < total; o++) {
    int64_t rem = o, src = 0;
    for (int32_t j = (int32_t)r - 1; j >= 0; j--) {
      int64_t coord = rem % s.d[j];
      rem /= s.d[j];
      src += (first[j] + coord * step[j]) * istr[j];
    }
    copy_el(y, o, a, src);
  }
  return true;
}

bool onnx_fold_range(const onnx_const *a, const onnx_const *b, const onnx_const *d, onnx_const *y) {
  if (has_sym(a) || has_sym(b) || has_sym(d)) return false;
  double start = dpc_tload(&a->t, 0), limit = dpc_tload(&b->t, 0), delta = dpc_tload(&d->t, 0);
  if (delta == 0) return false;
  double cnt = ceil((limit - start) / delta);
  if (!(cnt <= (double)FOLD_MAX)) return false;
  dpc_shape s = {.rank = 1, .d = {cnt > 0 ? (int64_t)cnt : 0}};
  if (!new_const(y, a->t.dtype, &s, false)) return false;
  for (int64_t i = 0; i < s.d[0]; i++) dpc_tstore(&y->t, i, start + (double)i * delta);
  if (a->t.dtype == DPC_I64) {
    int64_t s0 = dpc_tload_i64(&a->t, 0), dl = dpc_tload_i64(&d->t, 0);
    for (int64_t i = 0; i < s.d[0]; i++) {
      int64_t v = s0 + i * dl;
      memcpy((char *)y->t.data + 8 * i, &v, 8);
    }
  }
  return true;
}

static bool fold_unary(const char *name, const onnx_const *a, onnx_const *y) {
  if (has_sym(a)) return false;
  if (!new_const(y, a->t.dtype, &a->t.shape, false)) return false;
  enum {
    NEG,
    ABS,
    NOT,
    FLOOR
  } op = !strcmp(name, "Neg")   ? NEG
         : !strcmp(name, "Abs") ? ABS
         : !strcmp(name, "Not") ? NOT
                                : FLOOR;
  int64_t n = dpc_tensor_numel(&a->t);
  for (int64_t i = 0; i < n; i++) {
    if (a->t.dtype == DPC_I64) {
      int64_t v = dpc_tload_i64(&a->t, i);
      if (op == NEG || (op == ABS && v < 0)) v = (int64_t)(0 - (uint64_t)v);
      memcpy((char *)y->t.data + 8 * i, &v, 8);
      continue;
    }
    double v = dpc_tload(&a->t, i);
    v = op == NEG ? -v : op == ABS ? fabs(v) : op == NOT ? v == 0 : floor(v);
    dpc_tstore(&y->t, i, v);
  }
  return true;
}

/* The new shape of Reshape/Squeeze/Unsqueeze over a constant, or false. */
static bool view_shape(onnx_ctx *c, const char *op, const onnx_const *a, dpc_shape *s) {
  const dpc_shape *in = &a->t.shape;
  int64_t v[DPC_MAX_RANK + 1];
  int n;
  bool input_axes = c->opset >= 13;
  if (!strcmp(op, "Identity")) {
    *s = *in;
    return true;
  }
  if (!strcmp(op, "Reshape")) {
    if ((n = onnx_const_ints(c, 1, v, DPC_MAX_RANK + 1, NULL)) < 0 || n > DPC_MAX_RANK)
      return false;
    int64_t known = 1;
    int infer = -1;
    s->rank = (uint32_t)n;
    for (int i = 0; i < n; i++) {
      int64_t d = v[i];
      if (d == 0 && !onnx_attr_i(c, "allowzero", 0)) d = (uint32_t)i < in->rank ? in->d[i] : -2;
      if (d == -1) {
        if (infer >= 0) return false;
        infer = i;
        continue;
      }
      if (d < 0) return false;
      s->d[i] = d, known *= d;
    }
    if (infer >= 0) {
      if (known == 0 || dpc_tensor_numel(&a->t) % known) return false;
      s->d[infer] = dpc_tensor_numel(&a->t) / known;
    }
    return true;
  }
  n = input_axes ? (onnx_has_in(c, 1) ? onnx_const_ints(c, 1, v, DPC_MAX_RANK + 1, NULL) : -1)
                 : onnx_attr_ints(c, "axes", v, DPC_MAX_RANK + 1);
  bool unsqueeze = !strcmp(op, "Unsqueeze");
  int bad;
  return n <= DPC_MAX_RANK && (!unsqueeze || n >= 0) &&
         onnx_squeeze_shape(in, v, n, unsqueeze, s, &bad);
}

dpc_status onnx_try_fold(onnx_ctx *c, bool *folded) {
  *folded = false;
  const char *op = c->node->op_type ? c->node->op_type : "";
  static const char *const foldable[] = {
      "Identity", "Cast",  "Unsqueeze", "Squeeze", "Reshape", "Concat", "Gather", "Slice",
      "Add",      "Sub",   "Mul",       "Div",     "Max",     "Min",    "Equal",  "Less",
      "Greater",  "Where", "Range",     "Neg",     "Abs",     "Not",    "Floor"};
  bool known = false;
  for (size_t i = 0; i < sizeof foldable / sizeof *foldable; i++) known |= !strcmp(foldable[i], op);
  if (!known || c->node->n_input == 0 || onnx_n_out(c) != 1) return DPC_OK;
  for (uint32_t i = 0; i < c->node->n_input; i++)
    if (onnx_has_in(c, i) && !onnx_in_const(c, i)) return DPC_OK;
  const onnx_const *a = onnx_in_const(c, 0);
  if (!a || dpc_tensor_numel(&a->t) > FOLD_MAX) return DPC_OK;
  onnx_const y = {0};
  bool ok = false;
  dpc_shape s;
  if (!strcmp(op, "Cast")) {
    dpc_dtype t;
    if (!dpc_onnx_dtype((int32_t)onnx_attr_i(c, "to", -1), &t)) return DPC_OK;
    ok = new_const(&y, t, &a->t.shape, a->sym && t == DPC_I64);
    for (int64_t i = 0; ok && i < dpc_tensor_numel(&a->t); i++) copy_el(&y, i, a, i);
  } else if (!strcmp(op, "Concat")) {
    ok = fold_concat(c, &y);
  } else if (!strcmp(op, "Gather")) {
    ok = onnx_has_in(c, 1) && fold_gather(c, a, onnx_in_const(c, 1), &y);
  } else if (!strcmp(op, "Slice")) {
    ok = fold_slice(c, a, &y);
  } else if (!strcmp(op, "Where")) {
    ok = c->node->n_input == 3 && onnx_has_in(c, 1) && onnx_has_in(c, 2) &&
         fold_where(a, onnx_in_const(c, 1), onnx_in_const(c, 2), &y);
  } else if (!strcmp(op, "Range")) {
    ok = c->node->n_input == 3 && onnx_has_in(c, 1) && onnx_has_in(c, 2) &&
         onnx_fold_range(a, onnx_in_const(c, 1), onnx_in_const(c, 2), &y);
  } else if (!strcmp(op, "Neg") || !strcmp(op, "Abs") || !strcmp(op, "Not") ||
             !strcmp(op, "Floor")) {
    ok = fold_unary(op, a, &y);
  } else if (!strcmp(op, "Identity") || !strcmp(op, "Reshape") || !strcmp(op, "Squeeze") ||
             !strcmp(op, "Unsqueeze")) {
    ok = view_shape(c, op, a, &s) && fold_view(a, &s, &y);
    dpc_diag_clear(c->d);
  } else if (c->node->n_input == 2 && onnx_has_in(c, 1)) {
    ok = fold_binary(op, a, onnx_in_const(c, 1), &y);
  }
  if (!ok) {
    onnx_const_free(&y);
    return DPC_OK; /* imported as a node instead, which says what is wrong if anything is */
  }
  *folded = true;
  return onnx_def_const(c, 0, &y);
}
