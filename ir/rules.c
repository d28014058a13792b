/*
 * rules.c — shape rules of sources, elementwise ops, softmax and losses, reductions and their
 * gradients, and the table of every op's rule (see rules.h). Layout ops and matmul are in
 * rules_layout.c, windows and normalisation in rules_window.c.
 *
 * A rule reads its inputs' dtypes and shapes, which may hold symbolic dimensions such as the
 * batch size N, and writes its outputs'. Symbolic dimensions pass through where the result is
 * still one symbol or a constant; where it would not be (flattening N with 3, concatenating
 * along N), the rule says so rather than guessing. Once symbols are bound (dpc_graph_bind),
 * rules see only constants.
 */
#include "ir/rules_internal.h"

/* ---- sources ----------------------------------------------------------------------------- */

dpc_status dpc_rule_source(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_attrs a = dpc_node_attrs(g, node);
  const dpc_attr *sh = dpc_attrs_get(a, "shape");
  dpc_shape s = {0};
  if (sh->n > DPC_MAX_RANK)
    return fail(g, node, d, "rank %u is above dpc's limit of %d", sh->n, DPC_MAX_RANK);
  s.rank = sh->n;
  for (uint32_t i = 0; i < s.rank; i++) {
    int64_t v = g->ints[sh->u.off + i];
    if (v == DPC_DIM_INFER) return fail(g, node, d, "a declared shape cannot use -1");
    s.d[i] = resolve(g, v);
  }
  dpc_op op = g->nodes[node].op;
  if (op != DPC_OP_INPUT && !dpc_shape_is_concrete(&s)) {
    char t[160];
    dpc_graph_format_type(g, dpc_attrs_dtype(a, "dtype"), &s, t, sizeof t);
    return fail(g, node, d, "a %s must have a concrete shape, got %s", dpc_op_name(op), t);
  }
  set_out(g, node, 0, dpc_attrs_dtype(a, "dtype"), &s);
  return DPC_OK;
}

dpc_status dpc_rule_constant(dpc_graph *g, uint32_t node, dpc_diag *d) {
  (void)d;
  const dpc_attr *v = dpc_attrs_get(dpc_node_attrs(g, node), "value");
  dpc_shape s = {.rank = v->rank};
  memcpy(s.d, g->ints + v->dims, v->rank * sizeof(int64_t));
  set_out(g, node, 0, (dpc_dtype)v->dtype, &s);
  return DPC_OK;
}

/* ---- elementwise ------------------------------------------------------------------------- */

dpc_status dpc_rule_binary(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  dpc_op op = g->nodes[node].op;
  if ((st = same_dtype(g, node, 0, 1, d))) return st;
  if ((st = op == DPC_OP_POW ? need_float(g, node, 0, d) : need_numeric(g, node, 0, d))) return st;
  dpc_shape s;
  if (!broadcast(&IN(0)->shape, &IN(1)->shape, &s)) {
    char a[160], b[160];
    ty(g, IN(0), a, sizeof a);
    ty(g, IN(1), b, sizeof b);
    return fail(g, node, d, "cannot broadcast %s and %s", a, b);
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

dpc_status dpc_rule_unary(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_op op = g->nodes[node].op;
  bool numeric = op == DPC_OP_NEG || op == DPC_OP_ABS || op == DPC_OP_SIGN;
  dpc_status st = numeric ? need_numeric(g, node, 0, d) : need_float(g, node, 0, d);
  if (st) return st;
  if (op == DPC_OP_CLIP) {
    dpc_attrs a = dpc_node_attrs(g, node);
    if (dpc_attrs_get(a, "min") && dpc_attrs_get(a, "max") &&
        dpc_attrs_float(a, "min") > dpc_attrs_float(a, "max"))
      return fail(g, node, d, "min %g is above max %g", dpc_attrs_float(a, "min"),
                  dpc_attrs_float(a, "max"));
  }
  set_out(g, node, 0, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}

/* equal, less, greater: any dtype for equal, numbers for the orderings; the result is bool. */
dpc_status dpc_rule_compare(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = same_dtype(g, node, 0, 1, d))) return st;
  if (g->nodes[node].op != DPC_OP_EQUAL && (st = need_numeric(g, node, 0, d))) return st;
  dpc_shape s;
  if ((st = broadcast_inputs(g, node, 2, &s, d))) return st;
  set_out(g, node, 0, DPC_BOOL, &s);
  return DPC_OK;
}

dpc_status dpc_rule_not(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st = need_bool(g, node, 0, d);
  if (st) return st;
  set_out(g, node, 0, DPC_BOOL, &IN(0)->shape);
  return DPC_OK;
}

dpc_status dpc_rule_where(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_bool(g, node, 0, d)) || (st = same_dtype(g, node, 1, 2, d))) return st;
  dpc_shape s;
  if ((st = broadcast_inputs(g, node, 3, &s, d))) return st;
  set_out(g, node, 0, IN(1)->dtype, &s);
  return DPC_OK;
}

dpc_status dpc_rule_softmax(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  uint32_t ax = 0;
  if ((st = need_float(g, node, 0, d))) return st;
  if (IN(0)->shape.rank == 0) return fail(g, node, d, "needs at least one dimension");
  if ((st = get_axis(g, node, "axis", IN(0)->shape.rank, false, &ax, d))) return st;
  set_out(g, node, 0, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}

/* logits [N, C] (input li) and labels [N] (input li + 1) of softmax_cross_entropy or its
 * gradient. */
static dpc_status sce_inputs(dpc_graph *g, uint32_t node, uint32_t li, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, li, d)) || (st = need_int(g, node, li + 1, d))) return st;
  const dpc_shape *l = &IN(li)->shape, *y = &IN(li + 1)->shape;
  char a[160], b[160];
  ty(g, IN(li), a, sizeof a);
  ty(g, IN(li + 1), b, sizeof b);
  if (l->rank != 2) return fail(g, node, d, "logits must be [batch, classes], got %s", a);
  if (y->rank != 1 || y->d[0] != l->d[0])
    return fail(g, node, d, "labels must be [batch] matching logits %s, got %s", a, b);
  return DPC_OK;
}

dpc_status dpc_rule_sce(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st = sce_inputs(g, node, 0, d);
  if (st) return st;
  dpc_shape s = {0};
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* dloss: the scalar gradient of the loss, of the logits' dtype. */
dpc_status dpc_rule_sce_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = sce_inputs(g, node, 1, d)) || (st = same_dtype(g, node, 0, 1, d))) return st;
  if (IN(0)->shape.rank != 0) {
    char t[160];
    ty(g, IN(0), t, sizeof t);
    return fail(g, node, d, "dloss must be a scalar (the loss is one), got %s", t);
  }
  set_out(g, node, 0, IN(1)->dtype, &IN(1)->shape);
  return DPC_OK;
}

/* softmax_grad, log_softmax_grad: dy and the forward output y, same type; dx like them. */
dpc_status dpc_rule_softmax_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  uint32_t ax = 0;
  if ((st = need_float(g, node, 0, d)) || (st = same_type(g, node, 0, 1, d))) return st;
  if (IN(0)->shape.rank == 0) return fail(g, node, d, "needs at least one dimension");
  if ((st = get_axis(g, node, "axis", IN(0)->shape.rank, false, &ax, d))) return st;
  set_out(g, node, 0, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}

dpc_status dpc_rule_mse(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 0, d)) || (st = same_dtype(g, node, 0, 1, d))) return st;
  if (!dpc_shape_eq(&IN(0)->shape, &IN(1)->shape)) {
    char a[160], b[160];
    ty(g, IN(0), a, sizeof a);
    ty(g, IN(1), b, sizeof b);
    return fail(g, node, d, "predictions %s and targets %s must have the same shape", a, b);
  }
  dpc_shape s = {0};
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* ---- reductions -------------------------------------------------------------------------- */

dpc_status dpc_rule_reduce(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_op op = g->nodes[node].op;
  dpc_status st =
      op == DPC_OP_REDUCE_MEAN ? need_float(g, node, 0, d) : need_numeric(g, node, 0, d);
  if (st) return st;
  dpc_attrs a = dpc_node_attrs(g, node);
  const dpc_shape *x = &IN(0)->shape;
  int64_t axes[DPC_MAX_RANK + 1];
  bool red[DPC_MAX_RANK] = {0};
  uint32_t n = dpc_attrs_ints(a, "axes", axes, DPC_MAX_RANK + 1, 0);
  if (n > DPC_MAX_RANK) return fail(g, node, d, "more axes than dimensions");
  if (!dpc_attrs_get(a, "axes"))
    for (uint32_t i = 0; i < x->rank; i++) red[i] = true;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t ax = 0;
    if (!dpc_axis_norm(axes[i], x->rank, &ax))
      return fail(g, node, d, "axis %lld is out of range for rank %u", (long long)axes[i], x->rank);
    if (red[ax]) return fail(g, node, d, "axis %lld is listed twice", (long long)axes[i]);
    red[ax] = true;
  }
  bool keep = dpc_attrs_int(a, "keepdims") != 0;
  dpc_shape s = {0};
  for (uint32_t i = 0; i < x->rank; i++) {
    if (!red[i])
      s.d[s.rank++] = x->d[i];
    else if (keep)
      s.d[s.rank++] = 1;
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* ---- gradients of broadcasting and reducing ---------------------------------------------- */

/* sum_to(x, like): like must broadcast to exactly x's shape; x is summed over its leading extra
 * dims and over the dims where like has 1 and x does not. A symbolic dim matches only the same
 * symbol (or a 1 in like), since nothing else is known to be equal to it before binding. */
dpc_status dpc_rule_sum_to(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st = need_numeric(g, node, 0, d);
  if (st) return st;
  const dpc_shape *x = &IN(0)->shape, *l = &IN(1)->shape;
  bool ok = l->rank <= x->rank;
  for (uint32_t i = 0; ok && i < l->rank; i++) {
    int64_t ld = l->d[i], xd = x->d[x->rank - l->rank + i];
    ok = ld == xd || ld == 1;
  }
  if (!ok) {
    char a[160], b[160];
    ty(g, IN(0), a, sizeof a);
    ty(g, IN(1), b, sizeof b);
    return fail(g, node, d, "cannot sum %s to the shape of %s: %s does not broadcast to %s", a, b,
                b, a);
  }
  set_out(g, node, 0, IN(0)->dtype, l);
  return DPC_OK;
}

/* The axes of expand, normalised against like's rank; all of them when absent. */
static dpc_status expand_axes(dpc_graph *g, uint32_t node, uint32_t rank, bool in_a[DPC_MAX_RANK],
                              uint32_t *n_a, dpc_diag *d) {
  dpc_attrs a = dpc_node_attrs(g, node);
  memset(in_a, 0, DPC_MAX_RANK * sizeof *in_a);
  *n_a = 0;
  if (!dpc_attrs_get(a, "axes")) {
    for (uint32_t i = 0; i < rank; i++) in_a[i] = true;
    *n_a = rank;
    return DPC_OK;
  }
  int64_t axes[DPC_MAX_RANK + 1];
  uint32_t n = dpc_attrs_ints(a, "axes", axes, DPC_MAX_RANK + 1, 0);
  if (n > rank) return fail(g, node, d, "%u axes for like of rank %u", n, rank);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t ax = 0;
    if (!dpc_axis_norm(axes[i], rank, &ax))
      return fail(g, node, d, "axis %lld is out of range for rank %u", (long long)axes[i], rank);
    if (in_a[ax]) return fail(g, node, d, "axis %lld is listed twice", (long long)axes[i]);
    in_a[ax] = true;
  }
  *n_a = n;
  return DPC_OK;
}

/* expand(x, like): x is like without the axes A (rank r - |A|) or with 1s there (rank r). */
dpc_status dpc_rule_expand(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  const dpc_shape *x = &IN(0)->shape, *l = &IN(1)->shape;
  bool in_a[DPC_MAX_RANK];
  uint32_t n_a;
  if ((st = expand_axes(g, node, l->rank, in_a, &n_a, d))) return st;
  if (dpc_attrs_int(dpc_node_attrs(g, node), "mean") && (st = need_float(g, node, 0, d))) return st;
  bool ok = x->rank == l->rank || x->rank == l->rank - n_a;
  bool kept = x->rank == l->rank;
  for (uint32_t i = 0, j = 0; ok && i < l->rank; i++) {
    if (in_a[i] && !kept) continue;
    ok = x->d[j++] == (in_a[i] ? 1 : l->d[i]);
  }
  if (!ok) {
    char a[160], b[160];
    ty(g, IN(0), a, sizeof a);
    ty(g, IN(1), b, sizeof b);
    return fail(g, node, d,
                "cannot expand %s to %s: it must have like's dims outside the expanded axes, "
                "with those axes absent or of size 1",
                a, b);
  }
  set_out(g, node, 0, IN(0)->dtype, l);
  return DPC_OK;
}

dpc_status dpc_rule_zeros_like(dpc_graph *g, uint32_t node, dpc_diag *d) {
  (void)d;
  set_out(g, node, 0, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}

const dpc_shape_rule dpc_shape_rules[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = dpc_rule_source,
    [DPC_OP_PARAM] = dpc_rule_source,
    [DPC_OP_STATE] = dpc_rule_source,
    [DPC_OP_CONSTANT] = dpc_rule_constant,
    [DPC_OP_ADD] = dpc_rule_binary,
    [DPC_OP_SUB] = dpc_rule_binary,
    [DPC_OP_MUL] = dpc_rule_binary,
    [DPC_OP_DIV] = dpc_rule_binary,
    [DPC_OP_POW] = dpc_rule_binary,
    [DPC_OP_MAX] = dpc_rule_binary,
    [DPC_OP_MIN] = dpc_rule_binary,
    [DPC_OP_NEG] = dpc_rule_unary,
    [DPC_OP_ABS] = dpc_rule_unary,
    [DPC_OP_RELU] = dpc_rule_unary,
    [DPC_OP_RELU6] = dpc_rule_unary,
    [DPC_OP_CLIP] = dpc_rule_unary,
    [DPC_OP_LEAKY_RELU] = dpc_rule_unary,
    [DPC_OP_GELU] = dpc_rule_unary,
    [DPC_OP_SIGMOID] = dpc_rule_unary,
    [DPC_OP_TANH] = dpc_rule_unary,
    [DPC_OP_EXP] = dpc_rule_unary,
    [DPC_OP_LOG] = dpc_rule_unary,
    [DPC_OP_SQRT] = dpc_rule_unary,
    [DPC_OP_RSQRT] = dpc_rule_unary,
    [DPC_OP_ERF] = dpc_rule_unary,
    [DPC_OP_FLOOR] = dpc_rule_unary,
    [DPC_OP_SIGN] = dpc_rule_unary,
    [DPC_OP_COS] = dpc_rule_unary,
    [DPC_OP_SIN] = dpc_rule_unary,
    [DPC_OP_EQUAL] = dpc_rule_compare,
    [DPC_OP_LESS] = dpc_rule_compare,
    [DPC_OP_GREATER] = dpc_rule_compare,
    [DPC_OP_NOT] = dpc_rule_not,
    [DPC_OP_WHERE] = dpc_rule_where,
    [DPC_OP_SOFTMAX] = dpc_rule_softmax,
    [DPC_OP_LOG_SOFTMAX] = dpc_rule_softmax,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY] = dpc_rule_sce,
    [DPC_OP_MSE] = dpc_rule_mse,
    [DPC_OP_REDUCE_SUM] = dpc_rule_reduce,
    [DPC_OP_REDUCE_MEAN] = dpc_rule_reduce,
    [DPC_OP_REDUCE_MAX] = dpc_rule_reduce,
    [DPC_OP_TRANSPOSE] = dpc_rule_transpose,
    [DPC_OP_RESHAPE] = dpc_rule_reshape,
    [DPC_OP_FLATTEN] = dpc_rule_flatten,
    [DPC_OP_CONCAT] = dpc_rule_concat,
    [DPC_OP_SPLIT] = dpc_rule_split,
    [DPC_OP_ALL_REDUCE] = dpc_rule_all_reduce,
    [DPC_OP_SLICE] = dpc_rule_slice,
    [DPC_OP_GATHER] = dpc_rule_gather,
    [DPC_OP_CAST] = dpc_rule_cast,
    [DPC_OP_MATMUL] = dpc_rule_matmul,
    [DPC_OP_CONV2D] = dpc_rule_window,
    [DPC_OP_MAX_POOL2D] = dpc_rule_window,
    [DPC_OP_AVG_POOL2D] = dpc_rule_window,
    [DPC_OP_BATCH_NORM] = dpc_rule_batch_norm,
    [DPC_OP_LAYER_NORM] = dpc_rule_layer_norm,
    [DPC_OP_DROPOUT] = dpc_rule_dropout,
    [DPC_OP_SUM_TO] = dpc_rule_sum_to,
    [DPC_OP_EXPAND] = dpc_rule_expand,
    [DPC_OP_ZEROS_LIKE] = dpc_rule_zeros_like,
    [DPC_OP_SOFTMAX_GRAD] = dpc_rule_softmax_grad,
    [DPC_OP_LOG_SOFTMAX_GRAD] = dpc_rule_softmax_grad,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY_GRAD] = dpc_rule_sce_grad,
    [DPC_OP_SLICE_GRAD] = dpc_rule_slice_grad,
    [DPC_OP_GATHER_GRAD] = dpc_rule_gather_grad,
    [DPC_OP_CONV2D_GRAD_INPUT] = dpc_rule_window_grad,
    [DPC_OP_CONV2D_GRAD_WEIGHT] = dpc_rule_window_grad,
    [DPC_OP_MAX_POOL2D_GRAD] = dpc_rule_window_grad,
    [DPC_OP_AVG_POOL2D_GRAD] = dpc_rule_window_grad,
    [DPC_OP_BATCH_NORM_GRAD] = dpc_rule_batch_norm_grad,
    [DPC_OP_LAYER_NORM_GRAD] = dpc_rule_layer_norm_grad,
};
