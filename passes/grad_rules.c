/*
 * grad_rules.c — the gradient rule of every differentiable op (see grad.h).
 *
 * Rules are written with ordinary ops wherever that is clear (sigmoid' = y(1 - y)), and with the
 * dedicated gradient ops of ops.def where a composition would be slow or unreadable (convolution,
 * pooling, the normalisations, softmax). Every rule is checked against central finite differences
 * by tests/unit/test_grad.c, which enumerates the op table.
 */
#include "passes/grad.h"

#include <math.h>
#include <string.h>

#define E (a->e)
#define G (a->e->g)

static uint32_t in(const dpc_grad_args *a, uint32_t i) {
  return G->ids[G->nodes[a->node].in + i];
}
static uint32_t out(const dpc_grad_args *a, uint32_t k) {
  return G->nodes[a->node].out + k;
}
static dpc_dtype dt(const dpc_grad_args *a, uint32_t v) {
  return G->values[v].dtype;
}
static uint32_t num(const dpc_grad_args *a, double v, uint32_t like) {
  return dpc_emit_scalar(E, v, dt(a, like));
}
static uint32_t mul(const dpc_grad_args *a, uint32_t x, uint32_t y) {
  return dpc_emit2(E, DPC_OP_MUL, x, y);
}

/* v summed back to the shape of `like` when broadcasting made it larger. */
static uint32_t sum_to(const dpc_grad_args *a, uint32_t v, uint32_t like) {
  if (v == DPC_NONE || E->st) return DPC_NONE;
  if (dpc_shape_eq(&G->values[v].shape, &G->values[like].shape)) return v;
  return dpc_emit2(E, DPC_OP_SUM_TO, v, like);
}

/* where(cond, v, 0) */
static uint32_t keep_where(const dpc_grad_args *a, uint32_t cond, uint32_t v) {
  return dpc_emit3(E, DPC_OP_WHERE, cond, v, num(a, 0, v));
}

/* ---- elementwise binary ------------------------------------------------------------------- */

static void g_add(const dpc_grad_args *a) {
  uint32_t dy = a->dy[0];
  if (a->want[0]) a->dx[0] = sum_to(a, dy, in(a, 0));
  if (a->want[1]) a->dx[1] = sum_to(a, dy, in(a, 1));
}

static void g_sub(const dpc_grad_args *a) {
  uint32_t dy = a->dy[0];
  if (a->want[0]) a->dx[0] = sum_to(a, dy, in(a, 0));
  if (a->want[1]) a->dx[1] = sum_to(a, dpc_emit1(E, DPC_OP_NEG, dy), in(a, 1));
}

static void g_mul(const dpc_grad_args *a) {
  uint32_t dy = a->dy[0], x = in(a, 0), y = in(a, 1);
  if (a->want[0]) a->dx[0] = sum_to(a, mul(a, dy, y), x);
  if (a->want[1]) a->dx[1] = sum_to(a, mul(a, dy, x), y);
}

static void g_div(const dpc_grad_args *a) {
  /* y = p / q: dp = dy / q, dq = -dy * y / q */
  uint32_t dy = a->dy[0], p = in(a, 0), q = in(a, 1), y = out(a, 0);
  if (a->want[0]) a->dx[0] = sum_to(a, dpc_emit2(E, DPC_OP_DIV, dy, q), p);
  if (a->want[1]) {
    uint32_t t = dpc_emit2(E, DPC_OP_DIV, mul(a, dy, y), q);
    a->dx[1] = sum_to(a, dpc_emit1(E, DPC_OP_NEG, t), q);
  }
}

static void g_pow(const dpc_grad_args *a) {
  /* y = p^q: dp = dy * q * p^(q-1), dq = dy * y * log(p) */
  uint32_t dy = a->dy[0], p = in(a, 0), q = in(a, 1), y = out(a, 0);
  if (a->want[0]) {
    uint32_t qm1 = dpc_emit2(E, DPC_OP_SUB, q, num(a, 1, q));
    uint32_t t = mul(a, mul(a, dy, q), dpc_emit2(E, DPC_OP_POW, p, qm1));
    a->dx[0] = sum_to(a, t, p);
  }
  if (a->want[1]) a->dx[1] = sum_to(a, mul(a, mul(a, dy, y), dpc_emit1(E, DPC_OP_LOG, p)), q);
}

/* max and min route the gradient to the operand that won (the first one on ties). */
static void g_max_min(const dpc_grad_args *a) {
  uint32_t dy = a->dy[0], p = in(a, 0), q = in(a, 1);
  bool is_max = G->nodes[a->node].op == DPC_OP_MAX;
  /* p wins where !(p < q) for max, !(p > q) for min */
  uint32_t lose = dpc_emit2(E, is_max ? DPC_OP_LESS : DPC_OP_GREATER, p, q);
  uint32_t win = dpc_emit1(E, DPC_OP_NOT, lose);
  /* dy may be smaller than the broadcast mask: where broadcasts all three */
  if (a->want[0]) a->dx[0] = sum_to(a, keep_where(a, win, dy), p);
  if (a->want[1]) a->dx[1] = sum_to(a, keep_where(a, lose, dy), q);
}

static void g_where(const dpc_grad_args *a) {
  uint32_t dy = a->dy[0], c = in(a, 0), p = in(a, 1), q = in(a, 2);
  if (a->want[1]) a->dx[1] = sum_to(a, keep_where(a, c, dy), p);
  if (a->want[2]) a->dx[2] = sum_to(a, keep_where(a, dpc_emit1(E, DPC_OP_NOT, c), dy), q);
}

/* ---- elementwise unary -------------------------------------------------------------------- */

static void g_unary(const dpc_grad_args *a) {
  if (!a->want[0]) return;
  uint32_t dy = a->dy[0], x = in(a, 0), y = out(a, 0), r = DPC_NONE;
  dpc_attrs at = dpc_node_attrs(G, a->node);
  switch (G->nodes[a->node].op) {
  case DPC_OP_NEG: r = dpc_emit1(E, DPC_OP_NEG, dy); break;
  case DPC_OP_ABS: r = mul(a, dy, dpc_emit1(E, DPC_OP_SIGN, x)); break;
  case DPC_OP_RELU:
    /* y > 0 exactly where x > 0; reading y lets the pre-activation fuse away (passes/fuse.c) */
    r = keep_where(a, dpc_emit2(E, DPC_OP_GREATER, y, num(a, 0, y)), dy);
    break;
  case DPC_OP_RELU6: {
    uint32_t inside = dpc_emit2(E, DPC_OP_LESS, x, num(a, 6, x));
    r = keep_where(a, dpc_emit2(E, DPC_OP_GREATER, x, num(a, 0, x)), keep_where(a, inside, dy));
    break;
  }
  case DPC_OP_CLIP: {
    /* inclusive bounds pass the gradient, as PyTorch's clamp */
    r = dy;
    if (dpc_attrs_get(at, "max"))
      r = keep_where(
          a,
          dpc_emit1(E, DPC_OP_NOT,
                    dpc_emit2(E, DPC_OP_GREATER, x, num(a, dpc_attrs_float(at, "max"), x))),
          r);
    if (dpc_attrs_get(at, "min"))
      r = keep_where(a,
                     dpc_emit1(E, DPC_OP_NOT,
                               dpc_emit2(E, DPC_OP_LESS, x, num(a, dpc_attrs_float(at, "min"), x))),
                     r);
    break;
  }
  case DPC_OP_LEAKY_RELU: {
    uint32_t scaled = mul(a, dy, num(a, dpc_attrs_float(at, "alpha"), x));
    r = dpc_emit3(E, DPC_OP_WHERE, dpc_emit2(E, DPC_OP_GREATER, x, num(a, 0, x)), dy, scaled);
    break;
  }
  case DPC_OP_GELU: {
    /* d/dx x*Phi(x) = Phi(x) + x*phi(x) */
    uint32_t cdf =
        mul(a, num(a, 0.5, x),
            dpc_emit2(E, DPC_OP_ADD, num(a, 1, x),
                      dpc_emit1(E, DPC_OP_ERF, mul(a, x, num(a, 0.7071067811865476, x)))));
    uint32_t pdf = mul(a, num(a, 0.3989422804014327, x),
                       dpc_emit1(E, DPC_OP_EXP, mul(a, mul(a, x, x), num(a, -0.5, x))));
    r = mul(a, dy, dpc_emit2(E, DPC_OP_ADD, cdf, mul(a, x, pdf)));
    break;
  }
  case DPC_OP_SIGMOID: r = mul(a, mul(a, dy, y), dpc_emit2(E, DPC_OP_SUB, num(a, 1, y), y)); break;
  case DPC_OP_TANH: r = mul(a, dy, dpc_emit2(E, DPC_OP_SUB, num(a, 1, y), mul(a, y, y))); break;
  case DPC_OP_EXP: r = mul(a, dy, y); break;
  case DPC_OP_LOG: r = dpc_emit2(E, DPC_OP_DIV, dy, x); break;
  case DPC_OP_SQRT: r = dpc_emit2(E, DPC_OP_DIV, dy, mul(a, y, num(a, 2, y))); break;
  case DPC_OP_RSQRT: r = mul(a, mul(a, dy, mul(a, y, mul(a, y, y))), num(a, -0.5, y)); break;
  case DPC_OP_ERF:
    r = mul(a, mul(a, dy, num(a, 1.1283791670955126, x)),
            dpc_emit1(E, DPC_OP_EXP, dpc_emit1(E, DPC_OP_NEG, mul(a, x, x))));
    break;
  case DPC_OP_COS: r = dpc_emit1(E, DPC_OP_NEG, mul(a, dy, dpc_emit1(E, DPC_OP_SIN, x))); break;
  case DPC_OP_SIN: r = mul(a, dy, dpc_emit1(E, DPC_OP_COS, x)); break;
  default: break;
  }
  a->dx[0] = r;
}

/* ---- softmax family and losses -------------------------------------------------------------- */

static void g_softmax(const dpc_grad_args *a) {
  if (!a->want[0]) return;
  dpc_op op =
      G->nodes[a->node].op == DPC_OP_SOFTMAX ? DPC_OP_SOFTMAX_GRAD : DPC_OP_LOG_SOFTMAX_GRAD;
  dpc_emit_begin(E);
  dpc_emit_copy_attr(E, a->node, "axis");
  uint32_t ins[2] = {a->dy[0], out(a, 0)};
  uint32_t n = dpc_emit_node(E, op, ins, 2, 0);
  if (n != DPC_NONE) a->dx[0] = G->nodes[n].out;
}

static void g_sce(const dpc_grad_args *a) {
  if (a->want[0])
    a->dx[0] = dpc_emit3(E, DPC_OP_SOFTMAX_CROSS_ENTROPY_GRAD, a->dy[0], in(a, 0), in(a, 1));
}

/* expand(v, like) over every axis of like, optionally dividing by the count (a mean). */
static uint32_t expand_all(const dpc_grad_args *a, uint32_t v, uint32_t like, const int64_t *axes,
                           uint32_t n_axes, bool given, bool mean) {
  dpc_emit_begin(E);
  if (given) dpc_emit_ints(E, "axes", axes, n_axes);
  if (mean) dpc_emit_int(E, "mean", 1);
  uint32_t ins[2] = {v, like};
  uint32_t n = dpc_emit_node(E, DPC_OP_EXPAND, ins, 2, 0);
  return n == DPC_NONE ? DPC_NONE : G->nodes[n].out;
}

static void g_mse(const dpc_grad_args *a) {
  /* loss = mean((p - q)^2): dp = 2 (p - q) dloss / count, dq = -dp */
  uint32_t p = in(a, 0), q = in(a, 1);
  uint32_t diff = dpc_emit2(E, DPC_OP_SUB, p, q);
  uint32_t scale = expand_all(a, a->dy[0], p, NULL, 0, false, true);
  uint32_t dp = mul(a, mul(a, diff, scale), num(a, 2, p));
  if (a->want[0]) a->dx[0] = dp;
  if (a->want[1]) a->dx[1] = dpc_emit1(E, DPC_OP_NEG, dp);
}

static void g_reduce(const dpc_grad_args *a) {
  if (!a->want[0]) return;
  uint32_t x = in(a, 0), y = out(a, 0);
  dpc_attrs at = dpc_node_attrs(G, a->node);
  int64_t axes[DPC_MAX_RANK];
  bool given = dpc_attrs_get(at, "axes") != NULL;
  uint32_t n = given ? dpc_attrs_ints(at, "axes", axes, DPC_MAX_RANK, 0) : 0;
  dpc_op op = G->nodes[a->node].op;
  uint32_t g = expand_all(a, a->dy[0], x, axes, n, given, op == DPC_OP_REDUCE_MEAN);
  if (op == DPC_OP_REDUCE_MAX) {
    /* every position holding the maximum receives the gradient */
    uint32_t ymax = expand_all(a, y, x, axes, n, given, false);
    g = keep_where(a, dpc_emit2(E, DPC_OP_EQUAL, x, ymax), g);
  }
  a->dx[0] = g;
}

/* ---- layout ---------------------------------------------------------------------------------- */

static void g_transpose(const dpc_grad_args *a) {
  if (!a->want[0]) return;
  uint32_t x = in(a, 0);
  uint32_t r = G->values[x].shape.rank;
  int64_t perm[DPC_MAX_RANK], inv[DPC_MAX_RANK];
  dpc_attrs at = dpc_node_attrs(G, a->node);
  if (dpc_attrs_get(at, "perm"))
    dpc_attrs_ints(at, "perm", perm, DPC_MAX_RANK, 0);
  else
    for (uint32_t i = 0; i < r; i++) perm[i] = r - 1 - i;
  for (uint32_t i = 0; i < r; i++) inv[perm[i]] = i;
  dpc_emit_begin(E);
  dpc_emit_ints(E, "perm", inv, r);
  uint32_t n = dpc_emit_node(E, DPC_OP_TRANSPOSE, &a->dy[0], 1, 0);
  if (n != DPC_NONE) a->dx[0] = G->nodes[n].out;
}

/* v reshaped to the (possibly symbolic) shape of `like`. */
static uint32_t reshape_like(const dpc_grad_args *a, uint32_t v, const dpc_shape *shape) {
  if (v == DPC_NONE || E->st) return DPC_NONE;
  const dpc_shape copy = *shape, *s = &copy;
  if (dpc_shape_eq(&G->values[v].shape, s)) return v;
  dpc_emit_begin(E);
  dpc_emit_shape(E, "shape", s->d, s->rank);
  uint32_t n = dpc_emit_node(E, DPC_OP_RESHAPE, &v, 1, 0);
  return n == DPC_NONE ? DPC_NONE : G->nodes[n].out;
}

static void g_reshape(const dpc_grad_args *a) {
  if (a->want[0]) a->dx[0] = reshape_like(a, a->dy[0], &G->values[in(a, 0)].shape);
}

/* Rules build nodes, which can move g->nodes, g->values and the string pool: they copy what
 * they need from them first rather than keep pointers. */

static void g_concat(const dpc_grad_args *a) {
  const dpc_node nd_copy = G->nodes[a->node], *nd = &nd_copy;
  uint32_t rank = G->values[in(a, 0)].shape.rank, ax;
  dpc_axis_norm(dpc_attrs_int(dpc_node_attrs(G, a->node), "axis"), rank, &ax);
  int64_t off = 0;
  for (uint32_t i = 0; i < nd->n_in; i++) {
    int64_t len = G->values[in(a, i)].shape.d[ax];
    if (a->want[i]) {
      int64_t st = off, en = off + len, axis = ax;
      dpc_emit_begin(E);
      dpc_emit_ints(E, "starts", &st, 1);
      dpc_emit_ints(E, "ends", &en, 1);
      dpc_emit_ints(E, "axes", &axis, 1);
      uint32_t n = dpc_emit_node(E, DPC_OP_SLICE, &a->dy[0], 1, 0);
      if (n != DPC_NONE) a->dx[i] = G->nodes[n].out;
    }
    off += len;
  }
}

static void g_split(const dpc_grad_args *a) {
  if (!a->want[0]) return;
  const dpc_node nd_copy = G->nodes[a->node], *nd = &nd_copy;
  uint32_t parts[DPC_MAX_RANK * 8], n_out = nd->n_out;
  if (n_out > sizeof parts / sizeof *parts) {
    if (!E->st)
      E->st = dpc_graph_fail_node(G, a->node, E->d, DPC_ERR_UNSUPPORTED,
                                  "autodiff: split into more than 64 parts");
    return;
  }
  for (uint32_t k = 0; k < n_out; k++)
    parts[k] = a->dy[k] != DPC_NONE ? a->dy[k] : dpc_emit1(E, DPC_OP_ZEROS_LIKE, out(a, k));
  dpc_emit_begin(E);
  dpc_emit_copy_attr(E, a->node, "axis");
  if (!dpc_attrs_get(dpc_node_attrs(G, a->node), "axis")) dpc_emit_int(E, "axis", 0);
  uint32_t n = dpc_emit_node(E, DPC_OP_CONCAT, parts, n_out, 0);
  if (n != DPC_NONE) a->dx[0] = G->nodes[n].out;
}

static void g_slice(const dpc_grad_args *a) {
  if (!a->want[0]) return;
  dpc_emit_begin(E);
  const char *names[] = {"starts", "ends", "axes", "steps"};
  for (int i = 0; i < 4; i++) dpc_emit_copy_attr(E, a->node, names[i]);
  uint32_t ins[2] = {a->dy[0], in(a, 0)};
  uint32_t n = dpc_emit_node(E, DPC_OP_SLICE_GRAD, ins, 2, 0);
  if (n != DPC_NONE) a->dx[0] = G->nodes[n].out;
}

static void g_gather(const dpc_grad_args *a) {
  if (!a->want[0]) return;
  dpc_emit_begin(E);
  dpc_emit_copy_attr(E, a->node, "axis");
  uint32_t ins[3] = {a->dy[0], in(a, 0), in(a, 1)};
  uint32_t n = dpc_emit_node(E, DPC_OP_GATHER_GRAD, ins, 3, 0);
  if (n != DPC_NONE) a->dx[0] = G->nodes[n].out;
}

static void g_cast(const dpc_grad_args *a) {
  uint32_t x = in(a, 0);
  if (!a->want[0] || !dpc_dtype_is_float(G->values[a->dy[0]].dtype)) return;
  dpc_emit_begin(E);
  dpc_emit_dtype(E, "dtype", G->values[x].dtype);
  uint32_t n = dpc_emit_node(E, DPC_OP_CAST, &a->dy[0], 1, 0);
  if (n != DPC_NONE) a->dx[0] = G->nodes[n].out;
}

/* ---- matmul ------------------------------------------------------------------------------- */

static uint32_t mm(const dpc_grad_args *a, uint32_t p, uint32_t q, bool tp, bool tq) {
  dpc_emit_begin(E);
  if (tp) dpc_emit_int(E, "transpose_a", 1);
  if (tq) dpc_emit_int(E, "transpose_b", 1);
  uint32_t ins[2] = {p, q};
  uint32_t n = dpc_emit_node(E, DPC_OP_MATMUL, ins, 2, 0);
  return n == DPC_NONE ? DPC_NONE : G->nodes[n].out;
}

static void g_matmul(const dpc_grad_args *a) {
  uint32_t p = in(a, 0), q = in(a, 1), dy = a->dy[0];
  dpc_attrs at = dpc_node_attrs(G, a->node);
  const dpc_shape sp_copy = G->values[p].shape, sq_copy = G->values[q].shape;
  const dpc_shape *sp = &sp_copy, *sq = &sq_copy;
  bool tp = dpc_attrs_int(at, "transpose_a") && sp->rank > 1,
       tq = dpc_attrs_int(at, "transpose_b") && sq->rank > 1;
  /* Vectors take part as [1, K] (left) or [K, 1] (right); dy gets the dropped dimension back. */
  uint32_t p2 = p, q2 = q, dy2 = dy;
  if (sp->rank == 1) {
    dpc_shape s = {2, {1, sp->d[0]}};
    p2 = reshape_like(a, p, &s);
    dpc_shape ds = G->values[dy].shape;
    uint32_t at_m = sq->rank == 1 ? ds.rank : ds.rank - 1; /* where M was dropped */
    for (uint32_t i = ds.rank; i > at_m; i--) ds.d[i] = ds.d[i - 1];
    ds.d[at_m] = 1;
    ds.rank++;
    dy2 = reshape_like(a, dy2, &ds);
  }
  if (sq->rank == 1) {
    dpc_shape s = {2, {sq->d[0], 1}};
    q2 = reshape_like(a, q, &s);
    dpc_shape ds = G->values[dy2].shape;
    ds.d[ds.rank++] = 1;
    dy2 = reshape_like(a, dy2, &ds);
  }
  /* y = A B with A = tp ? p^T : p and B = tq ? q^T : q */
  if (a->want[0]) {
    uint32_t d = !tp ? mm(a, dy2, q2, false, !tq) : mm(a, q2, dy2, tq, true);
    d = sum_to(a, d, p2);
    a->dx[0] = reshape_like(a, d, sp);
  }
  if (a->want[1]) {
    uint32_t d = !tq ? mm(a, p2, dy2, !tp, false) : mm(a, dy2, p2, true, tp);
    d = sum_to(a, d, q2);
    a->dx[1] = reshape_like(a, d, sq);
  }
}

/* ---- convolution, pooling, normalisation ------------------------------------------------------
 */

static uint32_t with_attrs(const dpc_grad_args *a, dpc_op op, const uint32_t *ins, uint32_t n_in,
                           uint32_t n_out, const char *const *names, uint32_t n_names) {
  dpc_emit_begin(E);
  for (uint32_t i = 0; i < n_names; i++) dpc_emit_copy_attr(E, a->node, names[i]);
  return dpc_emit_node(E, op, ins, n_in, n_out);
}

static const char *const conv_attrs[] = {"stride", "pad", "dilation", "groups"};
static const char *const pool_attrs[] = {"kernel",   "stride",    "pad",
                                         "dilation", "ceil_mode", "count_include_pad"};

/* Input k's gradient, when wanted: a convolution-family node on `ins` with the node's own
 * geometry. */
static void conv_dx(const dpc_grad_args *a, uint32_t k, dpc_op op, const uint32_t *ins,
                    uint32_t n_in) {
  if (!a->want[k]) return;
  uint32_t n = with_attrs(a, op, ins, n_in, 0, conv_attrs, 4);
  if (n != DPC_NONE) a->dx[k] = G->nodes[n].out;
}

static void g_conv2d(const dpc_grad_args *a) {
  uint32_t x = in(a, 0), w = in(a, 1), dy = a->dy[0];
  conv_dx(a, 0, DPC_OP_CONV2D_GRAD_INPUT, (const uint32_t[]){dy, w, x}, 3);
  conv_dx(a, 1, DPC_OP_CONV2D_GRAD_WEIGHT, (const uint32_t[]){dy, x, w}, 3);
}

/* dx = conv2d_grad_input(dy, w, x) is linear in dy and in w: the convolution carries its
 * gradient back to dy, and the weight gradient is conv2d_grad_weight with the roles of the
 * two activations swapped. x gives only a shape: no gradient. */
static void g_conv2d_grad_input(const dpc_grad_args *a) {
  uint32_t u = in(a, 0), w = in(a, 1), g = a->dy[0];
  conv_dx(a, 0, DPC_OP_CONV2D, (const uint32_t[]){g, w}, 2);
  conv_dx(a, 1, DPC_OP_CONV2D_GRAD_WEIGHT, (const uint32_t[]){u, g, w}, 3);
}

static void g_pool(const dpc_grad_args *a) {
  if (!a->want[0]) return;
  bool is_max = G->nodes[a->node].op == DPC_OP_MAX_POOL2D;
  uint32_t ins[2] = {a->dy[0], in(a, 0)};
  /* copy only what the op declares: max has dilation, avg has count_include_pad */
  const char *names[5];
  uint32_t k = 0;
  for (uint32_t i = 0; i < 6; i++) {
    dpc_attr_spec sp;
    if (dpc_op_attr_find(G->nodes[a->node].op, pool_attrs[i], &sp)) names[k++] = pool_attrs[i];
  }
  uint32_t n =
      with_attrs(a, is_max ? DPC_OP_MAX_POOL2D_GRAD : DPC_OP_AVG_POOL2D_GRAD, ins, 2, 0, names, k);
  if (n != DPC_NONE) a->dx[0] = G->nodes[n].out;
}

static void g_batch_norm(const dpc_grad_args *a) {
  if (a->dy[0] == DPC_NONE || !(a->want[0] || a->want[1] || a->want[2])) return;
  static const char *const names[] = {"epsilon", "training"};
  uint32_t ins[5] = {a->dy[0], in(a, 0), in(a, 1), in(a, 3), in(a, 4)};
  uint32_t n = with_attrs(a, DPC_OP_BATCH_NORM_GRAD, ins, 5, 0, names, 2);
  if (n == DPC_NONE) return;
  for (uint32_t i = 0; i < 3; i++)
    if (a->want[i]) a->dx[i] = G->nodes[n].out + i;
}

static void g_layer_norm(const dpc_grad_args *a) {
  uint32_t n_in = G->nodes[a->node].n_in;
  bool any = a->want[0] || a->want[1] || (n_in > 2 && a->want[2]);
  if (!any) return;
  static const char *const names[] = {"axis", "epsilon"};
  uint32_t ins[3] = {a->dy[0], in(a, 0), in(a, 1)};
  uint32_t n = with_attrs(a, DPC_OP_LAYER_NORM_GRAD, ins, 3, 0, names, 2);
  if (n == DPC_NONE) return;
  for (uint32_t i = 0; i < n_in; i++)
    if (a->want[i]) a->dx[i] = G->nodes[n].out + i;
}

static void g_dropout(const dpc_grad_args *a) {
  /* the same node on dy draws the same mask: it depends only on seed, step and position */
  if (!a->want[0]) return;
  static const char *const names[] = {"p", "seed", "training", "offset"};
  uint32_t n = with_attrs(a, DPC_OP_DROPOUT, &a->dy[0], 1, 0, names, 4);
  if (n != DPC_NONE) a->dx[0] = G->nodes[n].out;
}

const dpc_grad_rule dpc_grad_rules[DPC_OP_COUNT] = {
    [DPC_OP_ADD] = g_add,
    [DPC_OP_SUB] = g_sub,
    [DPC_OP_MUL] = g_mul,
    [DPC_OP_DIV] = g_div,
    [DPC_OP_POW] = g_pow,
    [DPC_OP_MAX] = g_max_min,
    [DPC_OP_MIN] = g_max_min,
    [DPC_OP_WHERE] = g_where,
    [DPC_OP_NEG] = g_unary,
    [DPC_OP_ABS] = g_unary,
    [DPC_OP_RELU] = g_unary,
    [DPC_OP_RELU6] = g_unary,
    [DPC_OP_CLIP] = g_unary,
    [DPC_OP_LEAKY_RELU] = g_unary,
    [DPC_OP_GELU] = g_unary,
    [DPC_OP_SIGMOID] = g_unary,
    [DPC_OP_TANH] = g_unary,
    [DPC_OP_EXP] = g_unary,
    [DPC_OP_LOG] = g_unary,
    [DPC_OP_SQRT] = g_unary,
    [DPC_OP_RSQRT] = g_unary,
    [DPC_OP_ERF] = g_unary,
    [DPC_OP_COS] = g_unary,
    [DPC_OP_SIN] = g_unary,
    [DPC_OP_SOFTMAX] = g_softmax,
    [DPC_OP_LOG_SOFTMAX] = g_softmax,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY] = g_sce,
    [DPC_OP_MSE] = g_mse,
    [DPC_OP_REDUCE_SUM] = g_reduce,
    [DPC_OP_REDUCE_MEAN] = g_reduce,
    [DPC_OP_REDUCE_MAX] = g_reduce,
    [DPC_OP_TRANSPOSE] = g_transpose,
    [DPC_OP_RESHAPE] = g_reshape,
    [DPC_OP_FLATTEN] = g_reshape,
    [DPC_OP_CONCAT] = g_concat,
    [DPC_OP_SPLIT] = g_split,
    [DPC_OP_SLICE] = g_slice,
    [DPC_OP_GATHER] = g_gather,
    [DPC_OP_CAST] = g_cast,
    [DPC_OP_MATMUL] = g_matmul,
    [DPC_OP_CONV2D] = g_conv2d,
    [DPC_OP_CONV2D_GRAD_INPUT] = g_conv2d_grad_input,
    [DPC_OP_MAX_POOL2D] = g_pool,
    [DPC_OP_AVG_POOL2D] = g_pool,
    [DPC_OP_BATCH_NORM] = g_batch_norm,
    [DPC_OP_LAYER_NORM] = g_layer_norm,
    [DPC_OP_DROPOUT] = g_dropout,
};
