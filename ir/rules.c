/*
 * rules.c — the shape rule of every op (see rules.h).
 *
 * A rule reads its inputs' dtypes and shapes, which may hold symbolic dimensions such as the
 * batch size N, and writes its outputs'. Symbolic dimensions pass through where the result is
 * still one symbol or a constant; where it would not be (flattening N with 3, concatenating
 * along N), the rule says so rather than guessing. Once symbols are bound (dpc_graph_bind),
 * rules see only constants.
 */
#include "ir/rules.h"

#include <stdio.h>
#include <string.h>

#define IN(i)  (&g->values[g->ids[g->nodes[node].in + (i)]])
#define OUT(k) (&g->values[g->nodes[node].out + (k)])
#define NIN    (g->nodes[node].n_in)

static dpc_status fail(dpc_graph *g, uint32_t node, dpc_diag *d, const char *fmt, ...)
    DPC_PRINTF(4, 5);

static dpc_status fail(dpc_graph *g, uint32_t node, dpc_diag *d, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dpc_graph_fail_node(g, node, d, DPC_ERR_SHAPE, "%s", msg);
}

static void ty(const dpc_graph *g, const dpc_value *v, char *buf, size_t n) {
  dpc_graph_format_type(g, v->dtype, &v->shape, buf, n);
}

static int64_t resolve(const dpc_graph *g, int64_t d) {
  if (DPC_DIM_IS_SYM(d)) {
    uint32_t k = DPC_DIM_SYM_NO(d);
    if (k < g->n_syms && g->sym_vals[k] >= 0) return g->sym_vals[k];
  }
  return d;
}

static void set_out(dpc_graph *g, uint32_t node, uint32_t k, dpc_dtype t, const dpc_shape *s) {
  OUT(k)->dtype = t;
  OUT(k)->shape = *s;
}

static dpc_status need_float(dpc_graph *g, uint32_t node, uint32_t i, dpc_diag *d) {
  if (dpc_dtype_is_float(IN(i)->dtype)) return DPC_OK;
  char t[160], nm[32];
  ty(g, IN(i), t, sizeof t);
  dpc_op_input_name(g->nodes[node].op, i, nm, sizeof nm);
  return fail(g, node, d, "input '%s' must be floating point, got %s", nm, t);
}

static dpc_status need_numeric(dpc_graph *g, uint32_t node, uint32_t i, dpc_diag *d) {
  if (IN(i)->dtype != DPC_BOOL) return DPC_OK;
  char nm[32];
  dpc_op_input_name(g->nodes[node].op, i, nm, sizeof nm);
  return fail(g, node, d, "input '%s' must be a number type, got bool", nm);
}

static dpc_status need_int(dpc_graph *g, uint32_t node, uint32_t i, dpc_diag *d) {
  if (dpc_dtype_is_int(IN(i)->dtype)) return DPC_OK;
  char t[160], nm[32];
  ty(g, IN(i), t, sizeof t);
  dpc_op_input_name(g->nodes[node].op, i, nm, sizeof nm);
  return fail(g, node, d, "input '%s' must be i32 or i64, got %s", nm, t);
}

static dpc_status same_dtype(dpc_graph *g, uint32_t node, uint32_t i, uint32_t j, dpc_diag *d) {
  if (IN(i)->dtype == IN(j)->dtype) return DPC_OK;
  char a[160], b[160];
  ty(g, IN(i), a, sizeof a);
  ty(g, IN(j), b, sizeof b);
  return fail(g, node, d, "inputs have different dtypes: %s and %s (use cast)", a, b);
}

static dpc_status get_axis(dpc_graph *g, uint32_t node, const char *attr, uint32_t rank,
                           bool allow_end, uint32_t *out, dpc_diag *d) {
  int64_t ax = dpc_attrs_int(dpc_node_attrs(g, node), attr);
  /* Negative axes count from the end (-1 is the last dimension); allow_end admits `rank`
   * itself, as flatten does (ONNX: axis in [-r, r]). */
  int64_t lim = allow_end ? rank + 1 : rank;
  int64_t a = ax < 0 ? ax + rank : ax;
  if (a < 0 || a >= lim)
    return fail(g, node, d, "%s %lld is out of range for rank %u", attr, (long long)ax, rank);
  *out = (uint32_t)a;
  return DPC_OK;
}

/* ---- sources ----------------------------------------------------------------------------- */

static dpc_status rule_source(dpc_graph *g, uint32_t node, dpc_diag *d) {
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

static dpc_status rule_constant(dpc_graph *g, uint32_t node, dpc_diag *d) {
  (void)d;
  const dpc_attr *v = dpc_attrs_get(dpc_node_attrs(g, node), "value");
  dpc_shape s = {.rank = v->rank};
  memcpy(s.d, g->ints + v->dims, v->rank * sizeof(int64_t));
  set_out(g, node, 0, (dpc_dtype)v->dtype, &s);
  return DPC_OK;
}

/* ---- elementwise ------------------------------------------------------------------------- */

static bool broadcast(const dpc_shape *a, const dpc_shape *b, dpc_shape *out) {
  uint32_t r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (uint32_t i = 0; i < r; i++) {
    int64_t x = i < r - a->rank ? 1 : a->d[i - (r - a->rank)];
    int64_t y = i < r - b->rank ? 1 : b->d[i - (r - b->rank)];
    if (x == y)
      out->d[i] = x;
    else if (x == 1)
      out->d[i] = y;
    else if (y == 1)
      out->d[i] = x;
    else
      return false;
  }
  return true;
}

static dpc_status rule_binary(dpc_graph *g, uint32_t node, dpc_diag *d) {
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

static dpc_status rule_unary(dpc_graph *g, uint32_t node, dpc_diag *d) {
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

/* Broadcast inputs [0, n) together, or fail naming all of them. */
static dpc_status broadcast_inputs(dpc_graph *g, uint32_t node, uint32_t n, dpc_shape *out,
                                   dpc_diag *d) {
  *out = IN(0)->shape;
  bool ok = true;
  for (uint32_t i = 1; i < n && ok; i++) {
    dpc_shape so_far = *out; /* broadcast() must not write over an operand */
    ok = broadcast(&so_far, &IN(i)->shape, out);
  }
  if (ok) return DPC_OK;
  char t[3][160];
  for (uint32_t i = 0; i < n; i++) ty(g, IN(i), t[i], sizeof t[i]);
  if (n == 2) return fail(g, node, d, "cannot broadcast %s and %s", t[0], t[1]);
  return fail(g, node, d, "cannot broadcast %s, %s and %s", t[0], t[1], t[2]);
}

static dpc_status need_bool(dpc_graph *g, uint32_t node, uint32_t i, dpc_diag *d) {
  if (IN(i)->dtype == DPC_BOOL) return DPC_OK;
  char t[160], nm[32];
  ty(g, IN(i), t, sizeof t);
  dpc_op_input_name(g->nodes[node].op, i, nm, sizeof nm);
  return fail(g, node, d, "input '%s' must be bool, got %s", nm, t);
}

/* equal, less, greater: any dtype for equal, numbers for the orderings; the result is bool. */
static dpc_status rule_compare(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = same_dtype(g, node, 0, 1, d))) return st;
  if (g->nodes[node].op != DPC_OP_EQUAL && (st = need_numeric(g, node, 0, d))) return st;
  dpc_shape s;
  if ((st = broadcast_inputs(g, node, 2, &s, d))) return st;
  set_out(g, node, 0, DPC_BOOL, &s);
  return DPC_OK;
}

static dpc_status rule_not(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st = need_bool(g, node, 0, d);
  if (st) return st;
  set_out(g, node, 0, DPC_BOOL, &IN(0)->shape);
  return DPC_OK;
}

static dpc_status rule_where(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_bool(g, node, 0, d)) || (st = same_dtype(g, node, 1, 2, d))) return st;
  dpc_shape s;
  if ((st = broadcast_inputs(g, node, 3, &s, d))) return st;
  set_out(g, node, 0, IN(1)->dtype, &s);
  return DPC_OK;
}

static dpc_status rule_softmax(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  uint32_t ax;
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

static dpc_status rule_sce(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st = sce_inputs(g, node, 0, d);
  if (st) return st;
  dpc_shape s = {0};
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* dloss: the scalar gradient of the loss, of the logits' dtype. */
static dpc_status rule_sce_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
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

/* dy and the tensor it is the gradient of (input i) must have the same dtype and shape. */
static dpc_status same_type(dpc_graph *g, uint32_t node, uint32_t i, uint32_t j, dpc_diag *d) {
  dpc_status st = same_dtype(g, node, i, j, d);
  if (st || dpc_shape_eq(&IN(i)->shape, &IN(j)->shape)) return st;
  char a[160], b[160], na[32], nb[32];
  ty(g, IN(i), a, sizeof a);
  ty(g, IN(j), b, sizeof b);
  dpc_op_input_name(g->nodes[node].op, i, na, sizeof na);
  dpc_op_input_name(g->nodes[node].op, j, nb, sizeof nb);
  return fail(g, node, d, "'%s' %s and '%s' %s must have the same shape", na, a, nb, b);
}

/* softmax_grad, log_softmax_grad: dy and the forward output y, same type; dx like them. */
static dpc_status rule_softmax_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  uint32_t ax;
  if ((st = need_float(g, node, 0, d)) || (st = same_type(g, node, 0, 1, d))) return st;
  if (IN(0)->shape.rank == 0) return fail(g, node, d, "needs at least one dimension");
  if ((st = get_axis(g, node, "axis", IN(0)->shape.rank, false, &ax, d))) return st;
  set_out(g, node, 0, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}

static dpc_status rule_mse(dpc_graph *g, uint32_t node, dpc_diag *d) {
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

static dpc_status rule_reduce(dpc_graph *g, uint32_t node, dpc_diag *d) {
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
    uint32_t ax;
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
static dpc_status rule_sum_to(dpc_graph *g, uint32_t node, dpc_diag *d) {
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
    uint32_t ax;
    if (!dpc_axis_norm(axes[i], rank, &ax))
      return fail(g, node, d, "axis %lld is out of range for rank %u", (long long)axes[i], rank);
    if (in_a[ax]) return fail(g, node, d, "axis %lld is listed twice", (long long)axes[i]);
    in_a[ax] = true;
  }
  *n_a = n;
  return DPC_OK;
}

/* expand(x, like): x is like without the axes A (rank r - |A|) or with 1s there (rank r). */
static dpc_status rule_expand(dpc_graph *g, uint32_t node, dpc_diag *d) {
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

static dpc_status rule_zeros_like(dpc_graph *g, uint32_t node, dpc_diag *d) {
  (void)d;
  set_out(g, node, 0, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}

/* ---- layout -------------------------------------------------------------------------------- */

static dpc_status rule_transpose(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x = &IN(0)->shape;
  int64_t perm[DPC_MAX_RANK + 1];
  dpc_attrs a = dpc_node_attrs(g, node);
  uint32_t n = dpc_attrs_ints(a, "perm", perm, DPC_MAX_RANK + 1, 0);
  if (!dpc_attrs_get(a, "perm")) {
    n = x->rank;
    for (uint32_t i = 0; i < n; i++) perm[i] = n - 1 - i;
  }
  if (n != x->rank)
    return fail(g, node, d, "perm has %u entries but the input has rank %u", n, x->rank);
  bool seen[DPC_MAX_RANK] = {0};
  dpc_shape s = {.rank = n};
  for (uint32_t i = 0; i < n; i++) {
    if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
      return fail(g, node, d, "perm is not a permutation of 0..%u", n - 1);
    seen[perm[i]] = true;
    s.d[i] = x->d[perm[i]];
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* A product of dimensions as a constant times a sorted list of symbol numbers. */
typedef struct symprod {
  int64_t c;
  uint32_t n;
  int64_t sym[DPC_MAX_RANK];
} symprod;

static bool prod_mul(symprod *p, int64_t dim) {
  if (DPC_DIM_IS_SYM(dim)) {
    uint32_t i = p->n++;
    while (i > 0 && p->sym[i - 1] > dim) p->sym[i] = p->sym[i - 1], i--;
    p->sym[i] = dim;
    return true;
  }
  if (dim != 0 && p->c > INT64_MAX / dim) return false;
  p->c *= dim;
  return true;
}

static dpc_status rule_reshape(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x = &IN(0)->shape;
  const dpc_attr *sa = dpc_attrs_get(dpc_node_attrs(g, node), "shape");
  if (sa->n > DPC_MAX_RANK)
    return fail(g, node, d, "rank %u is above dpc's limit of %d", sa->n, DPC_MAX_RANK);
  symprod pin = {1, 0, {0}}, pout = {1, 0, {0}};
  for (uint32_t i = 0; i < x->rank; i++)
    if (!prod_mul(&pin, x->d[i])) return fail(g, node, d, "input has too many elements");
  dpc_shape s = {.rank = sa->n};
  int infer = -1;
  for (uint32_t i = 0; i < sa->n; i++) {
    int64_t v = resolve(g, g->ints[sa->u.off + i]);
    s.d[i] = v;
    if (v == DPC_DIM_INFER) {
      if (infer >= 0) return fail(g, node, d, "shape has more than one -1");
      infer = (int)i;
    } else if (v < DPC_DIM_INFER && !DPC_DIM_IS_SYM(v)) {
      return fail(g, node, d, "shape has a negative dimension");
    } else if (!prod_mul(&pout, v)) {
      return fail(g, node, d, "shape has too many elements");
    }
  }
  char a[160];
  ty(g, IN(0), a, sizeof a);
  /* Symbols of the output must all come from the input. */
  uint32_t rest[DPC_MAX_RANK], nrest = 0, j = 0;
  for (uint32_t i = 0; i < pin.n; i++) {
    if (j < pout.n && pout.sym[j] == pin.sym[i])
      j++;
    else
      rest[nrest++] = (uint32_t)i;
  }
  if (j != pout.n)
    return fail(g, node, d,
                "cannot reshape %s: a symbolic dimension of the new shape is not in the input", a);
  if (infer < 0) {
    if (nrest || pin.c != pout.c)
      return fail(g, node, d, "cannot reshape %s (%lld elements) into a shape of %lld", a,
                  (long long)pin.c, (long long)pout.c);
  } else if (nrest == 0) {
    if (pout.c == 0 || pin.c % pout.c)
      return fail(g, node, d, "cannot reshape %s: its %lld elements do not divide by %lld", a,
                  (long long)pin.c, (long long)pout.c);
    s.d[infer] = pin.c / pout.c;
  } else if (nrest == 1 && pin.c == pout.c) {
    s.d[infer] = pin.sym[rest[0]];
  } else {
    return fail(g, node, d,
                "cannot infer -1 when reshaping %s: it would mix a symbolic dimension with others",
                a);
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* Product of x->d[lo..hi) as one dimension, if it is a constant or a single symbol. */
static bool collapse(const dpc_shape *x, uint32_t lo, uint32_t hi, int64_t *out) {
  symprod p = {1, 0, {0}};
  for (uint32_t i = lo; i < hi; i++)
    if (!prod_mul(&p, x->d[i])) return false;
  if (p.n == 0)
    *out = p.c;
  else if (p.n == 1 && p.c == 1)
    *out = p.sym[0];
  else
    return false;
  return true;
}

static dpc_status rule_flatten(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x = &IN(0)->shape;
  uint32_t ax;
  dpc_status st = get_axis(g, node, "axis", x->rank, true, &ax, d);
  if (st) return st;
  dpc_shape s = {.rank = 2};
  if (!collapse(x, 0, ax, &s.d[0]) || !collapse(x, ax, x->rank, &s.d[1])) {
    char a[160];
    ty(g, IN(0), a, sizeof a);
    return fail(g, node, d,
                "cannot flatten %s at axis %u: a symbolic dimension would be multiplied by another",
                a, ax);
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

static dpc_status rule_concat(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x0 = &IN(0)->shape;
  uint32_t ax;
  dpc_status st;
  if (x0->rank == 0) return fail(g, node, d, "cannot concatenate scalars");
  if ((st = get_axis(g, node, "axis", x0->rank, false, &ax, d))) return st;
  dpc_shape s = *x0;
  for (uint32_t i = 1; i < NIN; i++) {
    const dpc_shape *xi = &IN(i)->shape;
    char a[160], b[160];
    ty(g, IN(0), a, sizeof a);
    ty(g, IN(i), b, sizeof b);
    if ((st = same_dtype(g, node, 0, i, d))) return st;
    bool ok = xi->rank == x0->rank;
    for (uint32_t k = 0; ok && k < x0->rank; k++) ok = k == ax || xi->d[k] == x0->d[k];
    if (!ok)
      return fail(g, node, d, "input %u %s does not match input 0 %s outside axis %u", i, b, a, ax);
    if (DPC_DIM_IS_SYM(xi->d[ax]) || DPC_DIM_IS_SYM(s.d[ax]))
      return fail(g, node, d, "cannot concatenate along a symbolic dimension");
    s.d[ax] += xi->d[ax];
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

static dpc_status rule_split(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x = &IN(0)->shape;
  uint32_t ax, nout = g->nodes[node].n_out;
  dpc_status st;
  if (x->rank == 0) return fail(g, node, d, "cannot split a scalar");
  if ((st = get_axis(g, node, "axis", x->rank, false, &ax, d))) return st;
  int64_t dim = x->d[ax];
  if (DPC_DIM_IS_SYM(dim)) return fail(g, node, d, "cannot split along a symbolic dimension");
  dpc_attrs a = dpc_node_attrs(g, node);
  if (dpc_attrs_get(a, "sizes")) {
    const dpc_attr *sa = dpc_attrs_get(a, "sizes");
    uint32_t n = sa->kind == DPC_ATTR_INTS ? sa->n : 1;
    if (n != nout) return fail(g, node, d, "sizes has %u entries for %u outputs", n, nout);
    int64_t sum = 0;
    for (uint32_t k = 0; k < n; k++) {
      int64_t sz = sa->kind == DPC_ATTR_INTS ? g->ints[sa->u.off + k] : sa->u.i;
      if (sz < 0) return fail(g, node, d, "sizes has a negative entry");
      if (sz > dim - sum) return fail(g, node, d, "sizes add up to more than %lld", (long long)dim);
      sum += sz;
      dpc_shape s = *x;
      s.d[ax] = sz;
      set_out(g, node, k, IN(0)->dtype, &s);
    }
    if (sum != dim)
      return fail(g, node, d, "sizes add up to %lld, not %lld", (long long)sum, (long long)dim);
    return DPC_OK;
  }
  if (dim % nout)
    return fail(g, node, d, "dimension %lld does not split evenly into %u", (long long)dim, nout);
  dpc_shape s = *x;
  s.d[ax] = dim / nout;
  for (uint32_t k = 0; k < nout; k++) set_out(g, node, k, IN(0)->dtype, &s);
  return DPC_OK;
}

void dpc_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                    int64_t *count) {
  /* Compare before adding so huge sentinels such as INT64_MAX cannot overflow. */
  if (start < 0) start = start < -dim ? -1 : start + dim;
  if (end < 0) end = end < -dim ? -1 : end + dim;
  if (step > 0) {
    if (start < 0) start = 0;
    if (start > dim) start = dim;
    if (end < 0) end = 0;
    if (end > dim) end = dim;
    *first = start;
    *count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    /* ONNX: with a negative step the start is clamped to [0, dim-1], the end to [-1, dim-1]. */
    if (start < 0) start = 0;
    if (start > dim - 1) start = dim - 1;
    if (end > dim - 1) end = dim - 1;
    *first = start;
    *count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
}

/* The shape slice() takes from x under the node's starts/ends/axes/steps (slice and slice_grad
 * share the attributes). */
static dpc_status slice_shape(dpc_graph *g, uint32_t node, const dpc_shape *x, dpc_shape *s,
                              dpc_diag *d) {
  dpc_attrs a = dpc_node_attrs(g, node);
  int64_t st[DPC_MAX_RANK + 1], en[DPC_MAX_RANK + 1], ax[DPC_MAX_RANK + 1], sp[DPC_MAX_RANK + 1];
  uint32_t n = dpc_attrs_ints(a, "starts", st, DPC_MAX_RANK + 1, 0);
  uint32_t ne = dpc_attrs_ints(a, "ends", en, DPC_MAX_RANK + 1, 0);
  if (n != ne) return fail(g, node, d, "starts has %u entries and ends %u", n, ne);
  if (n > x->rank) return fail(g, node, d, "%u slice bounds for rank %u", n, x->rank);
  if (dpc_attrs_get(a, "axes")) {
    if (dpc_attrs_ints(a, "axes", ax, DPC_MAX_RANK + 1, 0) != n)
      return fail(g, node, d, "axes must have as many entries as starts");
  } else {
    for (uint32_t i = 0; i < n; i++) ax[i] = i;
  }
  if (dpc_attrs_get(a, "steps")) {
    if (dpc_attrs_ints(a, "steps", sp, DPC_MAX_RANK + 1, 0) != n)
      return fail(g, node, d, "steps must have as many entries as starts");
  } else {
    for (uint32_t i = 0; i < n; i++) sp[i] = 1;
  }
  *s = *x;
  bool seen[DPC_MAX_RANK] = {0};
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k;
    if (!dpc_axis_norm(ax[i], x->rank, &k))
      return fail(g, node, d, "axis %lld is out of range", (long long)ax[i]);
    if (seen[k]) return fail(g, node, d, "axis %u is sliced twice", k);
    seen[k] = true;
    if (sp[i] == 0) return fail(g, node, d, "a step of 0");
    if (DPC_DIM_IS_SYM(x->d[k])) return fail(g, node, d, "cannot slice a symbolic dimension");
    int64_t first, count;
    dpc_slice_axis(x->d[k], st[i], en[i], sp[i], &first, &count);
    s->d[k] = count;
  }
  return DPC_OK;
}

static dpc_status rule_slice(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape s;
  dpc_status st = slice_shape(g, node, &IN(0)->shape, &s, d);
  if (st) return st;
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* dy (input 0) must be what the forward op produced from its input: `want`. */
static dpc_status dy_is(dpc_graph *g, uint32_t node, const dpc_shape *want, const char *what,
                        dpc_diag *d) {
  if (dpc_shape_eq(&IN(0)->shape, want)) return DPC_OK;
  char a[160], b[160];
  ty(g, IN(0), a, sizeof a);
  dpc_graph_format_type(g, IN(0)->dtype, want, b, sizeof b);
  return fail(g, node, d, "dy must be %s (the shape of the %s output), got %s", b, what, a);
}

/* slice_grad(dy, x): dx shaped like x. dy and x share the dtype, as a gradient and its value. */
static dpc_status rule_slice_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape s;
  dpc_status st;
  if ((st = same_dtype(g, node, 0, 1, d))) return st;
  if ((st = slice_shape(g, node, &IN(1)->shape, &s, d))) return st;
  if ((st = dy_is(g, node, &s, "slice", d))) return st;
  set_out(g, node, 0, IN(0)->dtype, &IN(1)->shape);
  return DPC_OK;
}

/* The result shape of gather(data, indices) along the node's axis; data is input di. */
static dpc_status gather_shape(dpc_graph *g, uint32_t node, uint32_t di, dpc_shape *s,
                               dpc_diag *d) {
  dpc_status st;
  if ((st = need_int(g, node, di + 1, d))) return st;
  const dpc_shape *x = &IN(di)->shape, *idx = &IN(di + 1)->shape;
  uint32_t ax;
  if (x->rank == 0) return fail(g, node, d, "data must have at least one dimension");
  if ((st = get_axis(g, node, "axis", x->rank, false, &ax, d))) return st;
  if (x->rank - 1 + idx->rank > DPC_MAX_RANK)
    return fail(g, node, d, "the result's rank is above dpc's limit of %d", DPC_MAX_RANK);
  memset(s, 0, sizeof *s);
  for (uint32_t i = 0; i < ax; i++) s->d[s->rank++] = x->d[i];
  for (uint32_t i = 0; i < idx->rank; i++) s->d[s->rank++] = idx->d[i];
  for (uint32_t i = ax + 1; i < x->rank; i++) s->d[s->rank++] = x->d[i];
  return DPC_OK;
}

static dpc_status rule_gather(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape s;
  dpc_status st = gather_shape(g, node, 0, &s, d);
  if (st) return st;
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* gather_grad(dy, data, indices): ddata shaped like data; it sums, so floating point only. */
static dpc_status rule_gather_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape s;
  dpc_status st;
  if ((st = need_float(g, node, 0, d)) || (st = same_dtype(g, node, 0, 1, d))) return st;
  if ((st = gather_shape(g, node, 1, &s, d))) return st;
  if ((st = dy_is(g, node, &s, "gather", d))) return st;
  set_out(g, node, 0, IN(0)->dtype, &IN(1)->shape);
  return DPC_OK;
}

static dpc_status rule_cast(dpc_graph *g, uint32_t node, dpc_diag *d) {
  (void)d;
  set_out(g, node, 0, dpc_attrs_dtype(dpc_node_attrs(g, node), "dtype"), &IN(0)->shape);
  return DPC_OK;
}

/* ---- matmul -----------------------------------------------------------------------------------
 */

static dpc_status rule_matmul(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = same_dtype(g, node, 0, 1, d)) || (st = need_float(g, node, 0, d))) return st;
  dpc_attrs at = dpc_node_attrs(g, node);
  dpc_shape a = IN(0)->shape, b = IN(1)->shape;
  char sa[160], sb[160];
  ty(g, IN(0), sa, sizeof sa);
  ty(g, IN(1), sb, sizeof sb);
  if (a.rank == 0 || b.rank == 0)
    return fail(g, node, d, "needs at least 1-D operands, got %s and %s", sa, sb);
  bool a1 = a.rank == 1, b1 = b.rank == 1;
  if (a1) a.rank = 2, a.d[1] = a.d[0], a.d[0] = 1;
  if (b1) b.rank = 2, b.d[1] = 1;
  /* Transposing a vector is a no-op, as in NumPy: only operands of rank 2 or more swap. */
  if (!a1 && dpc_attrs_int(at, "transpose_a")) {
    int64_t t = a.d[a.rank - 1];
    a.d[a.rank - 1] = a.d[a.rank - 2], a.d[a.rank - 2] = t;
  }
  if (!b1 && dpc_attrs_int(at, "transpose_b")) {
    int64_t t = b.d[b.rank - 1];
    b.d[b.rank - 1] = b.d[b.rank - 2], b.d[b.rank - 2] = t;
  }
  int64_t m = a.d[a.rank - 2], k = a.d[a.rank - 1], k2 = b.d[b.rank - 2], n = b.d[b.rank - 1];
  if (k != k2) {
    char dk[80], dk2[80];
    dpc_graph_format_dim(g, k, dk, sizeof dk);
    dpc_graph_format_dim(g, k2, dk2, sizeof dk2);
    return fail(g, node, d, "inner dimensions differ (%s vs %s) in %s x %s", dk, dk2, sa, sb);
  }
  dpc_shape ba = {.rank = a.rank - 2}, bb = {.rank = b.rank - 2}, s;
  memcpy(ba.d, a.d, ba.rank * sizeof(int64_t));
  memcpy(bb.d, b.d, bb.rank * sizeof(int64_t));
  if (!broadcast(&ba, &bb, &s))
    return fail(g, node, d, "batch dimensions of %s and %s do not broadcast", sa, sb);
  if (s.rank + 2 > DPC_MAX_RANK) return fail(g, node, d, "result rank above dpc's limit");
  if (!a1) s.d[s.rank++] = m;
  if (!b1) s.d[s.rank++] = n;
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* ---- windows: conv2d and pools -----------------------------------------------------------------
 */

bool dpc_pads4(dpc_attrs a, int64_t out[4]) {
  int64_t p[5];
  uint32_t n = dpc_attrs_ints(a, "pad", p, 5, 0);
  const dpc_attr *at = dpc_attrs_get(a, "pad");
  if (!at || at->kind == DPC_ATTR_INT || n == 1) {
    out[0] = out[1] = out[2] = out[3] = p[0];
  } else if (n == 2) {
    out[0] = out[2] = p[0];
    out[1] = out[3] = p[1];
  } else if (n == 4) {
    memcpy(out, p, 4 * sizeof *out);
  } else {
    return false;
  }
  return out[0] >= 0 && out[1] >= 0 && out[2] >= 0 && out[3] >= 0;
}

/* Two integers from an `ints` attribute that may be a single integer. */
static bool pair(dpc_attrs a, const char *name, int64_t *x, int64_t *y) {
  int64_t v[3];
  uint32_t n = dpc_attrs_ints(a, name, v, 3, 2);
  if (n != 2) return false;
  *x = v[0];
  *y = v[1];
  return true;
}

/* Does every window along an axis see at least one input position? A window that starts at or
 * after 0 does (every start is below `in`), so only those starting in the left padding need a
 * look, and there are fewer of them than the padding is wide. */
static bool windows_touch(int64_t out, int64_t stride, int64_t pad, int64_t k, int64_t dil,
                          int64_t in) {
  for (int64_t o = 0; o < out && o * stride < pad; o++) {
    int64_t start = o * stride - pad;     /* < 0 */
    int64_t j = (-start + dil - 1) / dil; /* first tap at or after position 0 */
    if (j >= k || start + j * dil >= in) return false;
  }
  return true;
}

dpc_status dpc_window_from(const dpc_graph *g, uint32_t node, dpc_op kind, uint32_t xv, uint32_t wv,
                           dpc_window *w, dpc_diag *d) {
  DPC_ASSERT(kind == DPC_OP_CONV2D || kind == DPC_OP_MAX_POOL2D || kind == DPC_OP_AVG_POOL2D);
  dpc_graph *mg = (dpc_graph *)g; /* fail() only reads */
  dpc_attrs a = dpc_node_attrs(g, node);
  const dpc_shape *x = &g->values[xv].shape;
  memset(w, 0, sizeof *w);
  char sx[160];
  dpc_graph_format_type(g, g->values[xv].dtype, x, sx, sizeof sx);
  if (x->rank != 4) return fail(mg, node, d, "input must be [N, C, H, W], got %s", sx);
  for (int i = 1; i < 4; i++)
    if (DPC_DIM_IS_SYM(x->d[i]))
      return fail(mg, node, d, "only the batch dimension of %s may be symbolic", sx);
  w->n = x->d[0], w->c = x->d[1], w->h = x->d[2], w->w = x->d[3];
  w->groups = 1;
  int64_t p[4];
  if (!dpc_pads4(a, p))
    return fail(mg, node, d, "pad must be p, [ph, pw] or [top, left, bottom, right], all >= 0");
  w->pt = p[0], w->pl = p[1], w->pb = p[2], w->pr = p[3];
  w->dh = w->dw = 1;
  if (kind != DPC_OP_AVG_POOL2D && !pair(a, "dilation", &w->dh, &w->dw))
    return fail(mg, node, d, "dilation must be d or [dh, dw]");
  bool ceil_mode = false;
  if (kind == DPC_OP_CONV2D) {
    const dpc_shape *ws = &g->values[wv].shape;
    char swt[160];
    dpc_graph_format_type(g, g->values[wv].dtype, ws, swt, sizeof swt);
    if (ws->rank != 4 || !dpc_shape_is_concrete(ws))
      return fail(mg, node, d, "weights must be [out_channels, in_channels/groups, kh, kw], got %s",
                  swt);
    w->groups = dpc_attrs_int(a, "groups");
    if (w->groups < 1 || w->c % w->groups || ws->d[0] % w->groups)
      return fail(mg, node, d,
                  "groups=%lld must divide input channels %lld and output channels %lld",
                  (long long)w->groups, (long long)w->c, (long long)ws->d[0]);
    if (ws->d[1] != w->c / w->groups)
      return fail(mg, node, d, "weights %s expect %lld input channels per group, input %s has %lld",
                  swt, (long long)ws->d[1], sx, (long long)(w->c / w->groups));
    w->oc = ws->d[0], w->kh = ws->d[2], w->kw = ws->d[3];
    if (!pair(a, "stride", &w->sh, &w->sw))
      return fail(mg, node, d, "stride must be s or [sh, sw]");
  } else {
    w->oc = w->c;
    if (!pair(a, "kernel", &w->kh, &w->kw))
      return fail(mg, node, d, "kernel must be k or [kh, kw]");
    if (dpc_attrs_get(a, "stride")) {
      if (!pair(a, "stride", &w->sh, &w->sw))
        return fail(mg, node, d, "stride must be s or [sh, sw]");
    } else {
      w->sh = w->kh, w->sw = w->kw;
    }
    ceil_mode = dpc_attrs_int(a, "ceil_mode") != 0;
  }
  const int64_t big = INT64_C(1) << 20;
  if (w->kh > big || w->kw > big || w->sh > big || w->sw > big || w->dh > big || w->dw > big ||
      w->pt > big || w->pl > big || w->pb > big || w->pr > big)
    return fail(mg, node, d, "kernel, stride, padding and dilation must be at most 2^20");
  if (w->kh < 1 || w->kw < 1) return fail(mg, node, d, "kernel size must be at least 1");
  if (w->sh < 1 || w->sw < 1) return fail(mg, node, d, "stride must be at least 1");
  if (w->dh < 1 || w->dw < 1) return fail(mg, node, d, "dilation must be at least 1");
  if (kind != DPC_OP_CONV2D &&
      (w->pt >= w->kh || w->pb >= w->kh || w->pl >= w->kw || w->pr >= w->kw))
    return fail(mg, node, d, "padding must be smaller than the kernel");
  int64_t eh = w->h + w->pt + w->pb - w->dh * (w->kh - 1) - 1;
  int64_t ew = w->w + w->pl + w->pr - w->dw * (w->kw - 1) - 1;
  if (eh < 0 || ew < 0)
    return fail(mg, node, d, "the %lldx%lld window (dilated) does not fit in %s with this padding",
                (long long)w->kh, (long long)w->kw, sx);
  w->oh = (ceil_mode ? eh + w->sh - 1 : eh) / w->sh + 1;
  w->ow = (ceil_mode ? ew + w->sw - 1 : ew) / w->sw + 1;
  /* The last window must start inside the input or its left padding (as PyTorch and ONNX). */
  if (ceil_mode && (w->oh - 1) * w->sh >= w->h + w->pt) w->oh--;
  if (ceil_mode && (w->ow - 1) * w->sw >= w->w + w->pl) w->ow--;
  /* A pooling window that sees only padding has no value to take; with dilation that can
   * happen even when the padding is smaller than the kernel. */
  if (kind != DPC_OP_CONV2D && (!windows_touch(w->oh, w->sh, w->pt, w->kh, w->dh, w->h) ||
                                !windows_touch(w->ow, w->sw, w->pl, w->kw, w->dw, w->w)))
    return fail(mg, node, d, "a pooling window falls entirely in the padding of %s", sx);
  return DPC_OK;
}

/* Which forward geometry a window op follows and which of its inputs are x and w (-1: none). */
static void window_inputs(dpc_op op, dpc_op *kind, int *xi, int *wi) {
  switch (op) {
  case DPC_OP_CONV2D: *kind = DPC_OP_CONV2D, *xi = 0, *wi = 1; return;
  case DPC_OP_CONV2D_GRAD_INPUT: *kind = DPC_OP_CONV2D, *xi = 2, *wi = 1; return;
  case DPC_OP_CONV2D_GRAD_WEIGHT: *kind = DPC_OP_CONV2D, *xi = 1, *wi = 2; return;
  case DPC_OP_MAX_POOL2D: *kind = DPC_OP_MAX_POOL2D, *xi = 0, *wi = -1; return;
  case DPC_OP_AVG_POOL2D: *kind = DPC_OP_AVG_POOL2D, *xi = 0, *wi = -1; return;
  case DPC_OP_MAX_POOL2D_GRAD: *kind = DPC_OP_MAX_POOL2D, *xi = 1, *wi = -1; return;
  case DPC_OP_AVG_POOL2D_GRAD: *kind = DPC_OP_AVG_POOL2D, *xi = 1, *wi = -1; return;
  default:
    DPC_ASSERT(!"not a window op");
    *kind = op, *xi = 0, *wi = -1;
    return;
  }
}

dpc_status dpc_window_of(const dpc_graph *g, uint32_t node, dpc_window *w, dpc_diag *d) {
  const dpc_node *nd = &g->nodes[node];
  dpc_op kind;
  int xi, wi;
  window_inputs(nd->op, &kind, &xi, &wi);
  return dpc_window_from(g, node, kind, g->ids[nd->in + (uint32_t)xi],
                         wi < 0 ? DPC_NONE : g->ids[nd->in + (uint32_t)wi], w, d);
}

static dpc_status rule_window(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 0, d))) return st;
  if (g->nodes[node].op == DPC_OP_CONV2D && (st = same_dtype(g, node, 0, 1, d))) return st;
  dpc_window w;
  if ((st = dpc_window_of(g, node, &w, d))) return st;
  dpc_shape s = {.rank = 4, .d = {IN(0)->shape.d[0], w.oc, w.oh, w.ow}};
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* The gradients of conv2d and the pools: dy first, then the forward's inputs in some order;
 * dy must have the forward output's shape, and the result takes x's (or w's) shape. */
static dpc_status rule_window_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  dpc_op op = g->nodes[node].op, kind;
  int xi, wi;
  window_inputs(op, &kind, &xi, &wi);
  if ((st = need_float(g, node, 0, d))) return st;
  for (uint32_t i = 1; i < NIN; i++)
    if ((st = same_dtype(g, node, 0, i, d))) return st;
  dpc_window w;
  if ((st = dpc_window_of(g, node, &w, d))) return st;
  const dpc_value *x = IN((uint32_t)xi);
  dpc_shape want = {.rank = 4, .d = {x->shape.d[0], w.oc, w.oh, w.ow}};
  if ((st = dy_is(g, node, &want, dpc_op_name(kind), d))) return st;
  const dpc_value *like = op == DPC_OP_CONV2D_GRAD_WEIGHT ? IN((uint32_t)wi) : x;
  set_out(g, node, 0, IN(0)->dtype, &like->shape);
  return DPC_OK;
}

/* ---- normalisation ----------------------------------------------------------------------------
 */

static dpc_status rule_batch_norm(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 0, d))) return st;
  const dpc_shape *x = &IN(0)->shape;
  char sx[160];
  ty(g, IN(0), sx, sizeof sx);
  if (x->rank < 2) return fail(g, node, d, "input must be [N, C, ...], got %s", sx);
  if (DPC_DIM_IS_SYM(x->d[1]))
    return fail(g, node, d, "the channel dimension of %s must be concrete", sx);
  for (uint32_t i = 1; i < 5; i++) {
    char nm[32], si[160];
    dpc_op_input_name(DPC_OP_BATCH_NORM, i, nm, sizeof nm);
    ty(g, IN(i), si, sizeof si);
    if ((st = same_dtype(g, node, 0, i, d))) return st;
    if (IN(i)->shape.rank != 1 || IN(i)->shape.d[0] != x->d[1])
      return fail(g, node, d, "'%s' must be [%lld] (one per channel of %s), got %s", nm,
                  (long long)x->d[1], sx, si);
  }
  double mom = dpc_attrs_float(dpc_node_attrs(g, node), "momentum");
  if (mom < 0 || mom > 1) return fail(g, node, d, "momentum must be in [0, 1]");
  set_out(g, node, 0, IN(0)->dtype, x);
  set_out(g, node, 1, IN(3)->dtype, &IN(3)->shape);
  set_out(g, node, 2, IN(4)->dtype, &IN(4)->shape);
  return DPC_OK;
}

static dpc_status rule_layer_norm(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 0, d))) return st;
  const dpc_shape *x = &IN(0)->shape;
  uint32_t ax;
  if (x->rank == 0) return fail(g, node, d, "needs at least one dimension");
  if ((st = get_axis(g, node, "axis", x->rank, false, &ax, d))) return st;
  dpc_shape want = {.rank = x->rank - ax};
  memcpy(want.d, x->d + ax, want.rank * sizeof(int64_t));
  for (uint32_t i = 1; i < NIN; i++) {
    if ((st = same_dtype(g, node, 0, i, d))) return st;
    if (!dpc_shape_eq(&IN(i)->shape, &want)) {
      char si[160], sw[160], nm[32];
      ty(g, IN(i), si, sizeof si);
      dpc_graph_format_type(g, IN(0)->dtype, &want, sw, sizeof sw);
      dpc_op_input_name(DPC_OP_LAYER_NORM, i, nm, sizeof nm);
      return fail(g, node, d, "'%s' must be %s (the normalised dimensions), got %s", nm, sw, si);
    }
  }
  set_out(g, node, 0, IN(0)->dtype, x);
  return DPC_OK;
}

/* batch_norm_grad(dy, x, scale, mean, var) -> dx like x, dscale and dbias like scale. */
static dpc_status rule_batch_norm_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 1, d)) || (st = same_type(g, node, 0, 1, d))) return st;
  const dpc_shape *x = &IN(1)->shape;
  char sx[160];
  ty(g, IN(1), sx, sizeof sx);
  if (x->rank < 2) return fail(g, node, d, "input must be [N, C, ...], got %s", sx);
  if (DPC_DIM_IS_SYM(x->d[1]))
    return fail(g, node, d, "the channel dimension of %s must be concrete", sx);
  for (uint32_t i = 2; i < 5; i++) {
    char nm[32], si[160];
    dpc_op_input_name(DPC_OP_BATCH_NORM_GRAD, i, nm, sizeof nm);
    ty(g, IN(i), si, sizeof si);
    if ((st = same_dtype(g, node, 1, i, d))) return st;
    if (IN(i)->shape.rank != 1 || IN(i)->shape.d[0] != x->d[1])
      return fail(g, node, d, "'%s' must be [%lld] (one per channel of %s), got %s", nm,
                  (long long)x->d[1], sx, si);
  }
  set_out(g, node, 0, IN(1)->dtype, x);
  set_out(g, node, 1, IN(2)->dtype, &IN(2)->shape);
  set_out(g, node, 2, IN(2)->dtype, &IN(2)->shape);
  return DPC_OK;
}

/* layer_norm_grad(dy, x, scale) -> dx like x, dscale and dbias shaped x.shape[axis:]. */
static dpc_status rule_layer_norm_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 1, d)) || (st = same_type(g, node, 0, 1, d))) return st;
  const dpc_shape *x = &IN(1)->shape;
  uint32_t ax;
  if (x->rank == 0) return fail(g, node, d, "needs at least one dimension");
  if ((st = get_axis(g, node, "axis", x->rank, false, &ax, d))) return st;
  dpc_shape want = {.rank = x->rank - ax};
  memcpy(want.d, x->d + ax, want.rank * sizeof(int64_t));
  if ((st = same_dtype(g, node, 1, 2, d))) return st;
  if (!dpc_shape_eq(&IN(2)->shape, &want)) {
    char si[160], sw[160];
    ty(g, IN(2), si, sizeof si);
    dpc_graph_format_type(g, IN(1)->dtype, &want, sw, sizeof sw);
    return fail(g, node, d, "'scale' must be %s (the normalised dimensions), got %s", sw, si);
  }
  set_out(g, node, 0, IN(1)->dtype, x);
  set_out(g, node, 1, IN(1)->dtype, &want);
  set_out(g, node, 2, IN(1)->dtype, &want);
  return DPC_OK;
}

static dpc_status rule_dropout(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 0, d))) return st;
  double p = dpc_attrs_float(dpc_node_attrs(g, node), "p");
  if (!(p >= 0 && p < 1)) return fail(g, node, d, "p must be in [0, 1), got %g", p);
  set_out(g, node, 0, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}

const dpc_shape_rule dpc_shape_rules[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = rule_source,
    [DPC_OP_PARAM] = rule_source,
    [DPC_OP_STATE] = rule_source,
    [DPC_OP_CONSTANT] = rule_constant,
    [DPC_OP_ADD] = rule_binary,
    [DPC_OP_SUB] = rule_binary,
    [DPC_OP_MUL] = rule_binary,
    [DPC_OP_DIV] = rule_binary,
    [DPC_OP_POW] = rule_binary,
    [DPC_OP_MAX] = rule_binary,
    [DPC_OP_MIN] = rule_binary,
    [DPC_OP_NEG] = rule_unary,
    [DPC_OP_ABS] = rule_unary,
    [DPC_OP_RELU] = rule_unary,
    [DPC_OP_RELU6] = rule_unary,
    [DPC_OP_CLIP] = rule_unary,
    [DPC_OP_LEAKY_RELU] = rule_unary,
    [DPC_OP_GELU] = rule_unary,
    [DPC_OP_SIGMOID] = rule_unary,
    [DPC_OP_TANH] = rule_unary,
    [DPC_OP_EXP] = rule_unary,
    [DPC_OP_LOG] = rule_unary,
    [DPC_OP_SQRT] = rule_unary,
    [DPC_OP_RSQRT] = rule_unary,
    [DPC_OP_ERF] = rule_unary,
    [DPC_OP_FLOOR] = rule_unary,
    [DPC_OP_SIGN] = rule_unary,
    [DPC_OP_COS] = rule_unary,
    [DPC_OP_SIN] = rule_unary,
    [DPC_OP_EQUAL] = rule_compare,
    [DPC_OP_LESS] = rule_compare,
    [DPC_OP_GREATER] = rule_compare,
    [DPC_OP_NOT] = rule_not,
    [DPC_OP_WHERE] = rule_where,
    [DPC_OP_SOFTMAX] = rule_softmax,
    [DPC_OP_LOG_SOFTMAX] = rule_softmax,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY] = rule_sce,
    [DPC_OP_MSE] = rule_mse,
    [DPC_OP_REDUCE_SUM] = rule_reduce,
    [DPC_OP_REDUCE_MEAN] = rule_reduce,
    [DPC_OP_REDUCE_MAX] = rule_reduce,
    [DPC_OP_TRANSPOSE] = rule_transpose,
    [DPC_OP_RESHAPE] = rule_reshape,
    [DPC_OP_FLATTEN] = rule_flatten,
    [DPC_OP_CONCAT] = rule_concat,
    [DPC_OP_SPLIT] = rule_split,
    [DPC_OP_SLICE] = rule_slice,
    [DPC_OP_GATHER] = rule_gather,
    [DPC_OP_CAST] = rule_cast,
    [DPC_OP_MATMUL] = rule_matmul,
    [DPC_OP_CONV2D] = rule_window,
    [DPC_OP_MAX_POOL2D] = rule_window,
    [DPC_OP_AVG_POOL2D] = rule_window,
    [DPC_OP_BATCH_NORM] = rule_batch_norm,
    [DPC_OP_LAYER_NORM] = rule_layer_norm,
    [DPC_OP_DROPOUT] = rule_dropout,
    [DPC_OP_SUM_TO] = rule_sum_to,
    [DPC_OP_EXPAND] = rule_expand,
    [DPC_OP_ZEROS_LIKE] = rule_zeros_like,
    [DPC_OP_SOFTMAX_GRAD] = rule_softmax_grad,
    [DPC_OP_LOG_SOFTMAX_GRAD] = rule_softmax_grad,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY_GRAD] = rule_sce_grad,
    [DPC_OP_SLICE_GRAD] = rule_slice_grad,
    [DPC_OP_GATHER_GRAD] = rule_gather_grad,
    [DPC_OP_CONV2D_GRAD_INPUT] = rule_window_grad,
    [DPC_OP_CONV2D_GRAD_WEIGHT] = rule_window_grad,
    [DPC_OP_MAX_POOL2D_GRAD] = rule_window_grad,
    [DPC_OP_AVG_POOL2D_GRAD] = rule_window_grad,
    [DPC_OP_BATCH_NORM_GRAD] = rule_batch_norm_grad,
    [DPC_OP_LAYER_NORM_GRAD] = rule_layer_norm_grad,
};
