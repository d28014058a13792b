/*
 * onnx_index.c — ONNX ops on positions, built from comparisons with a constant 0..n-1 (a
 * one-hot mask) and reductions: GatherElements, ArgMax, ArgMin, Hardmax, OneHot, EyeLike,
 * Trilu, CumSum (a matmul with a triangle of ones), Mod and Round, and the losses
 * NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. Built from differentiable ops, the
 * float ones train through dpc's ordinary gradients.
 */
#include "frontend/onnx_internal.h"

#include <stdlib.h>
#include <string.h>

#define IN(i) onnx_in(c, (i))
#define OOM() onnx_fail(c, DPC_ERR_NOMEM, "out of memory")

/* A 0/1 constant of shape s from comparing j - i with k, (i, j) an element's last two
 * coordinates: the diagonals (EyeLike), triangles (Trilu, CumSum). */
typedef enum { D_EQ, D_GE, D_GT, D_LE, D_LT } diag_cmp;

static uint32_t pattern(onnx_ctx *c, dpc_dtype t, const dpc_shape *s, diag_cmp cmp, int64_t k) {
  int64_t n = dpc_shape_numel(s);
  if (!dpc_shape_is_concrete(s) || n > (INT64_C(1) << 24))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a constant of symbolic or huge shape"), DPC_NONE;
  int64_t cols = s->rank ? s->d[s->rank - 1] : 1;
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  if (!v) return OOM(), DPC_NONE;
  for (int64_t e = 0; e < n; e++) {
    int64_t dij = cols ? e % cols - e / cols : 0;
    v[e] = cmp == D_EQ   ? dij == k
           : cmp == D_GE ? dij >= k
           : cmp == D_GT ? dij > k
           : cmp == D_LE ? dij <= k
                         : dij < k;
  }
  uint32_t y = onnx_constant(c, t, s, v);
  free(v);
  return y;
}

/* Trilu: x where the mask of the last two axes keeps it, zero elsewhere. */
static dpc_status imp_trilu(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape *s = &c->g->values[x].shape;
  int64_t k = 0;
  if (onnx_has_in(c, 1)) {
    const onnx_const *kc = onnx_in_known(c, 1);
    if (!kc || dpc_tensor_numel(&kc->t) != 1)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a Trilu k computed at run time");
    k = dpc_tload_i64(&kc->t, 0);
  }
  if (s->rank < 2 || DPC_DIM_IS_SYM(s->d[s->rank - 1]) || DPC_DIM_IS_SYM(s->d[s->rank - 2]))
    return onnx_fail(c, DPC_ERR_INVALID, "needs at least 2 axes, the last two known");
  dpc_shape ms = {.rank = 2, .d = {s->d[s->rank - 2], s->d[s->rank - 1]}};
  bool upper = onnx_attr_i(c, "upper", 1) != 0;
  uint32_t mask = pattern(c, DPC_BOOL, &ms, upper ? D_GE : D_LE, k);
  return onnx_def(c, 0, onnx_where(c, mask, x, onnx_k(c, x, 0)));
}

/* The constant step * (0, 1, ..., n-1) of dtype t along `axis` of a rank-`rank` shape whose
 * other dimensions are 1: what indices are compared with to make one-hot masks. */
static uint32_t iota(onnx_ctx *c, dpc_dtype t, uint32_t rank, uint32_t axis, int64_t n,
                     int64_t step) {
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  if (!v) return OOM(), DPC_NONE;
  for (int64_t i = 0; i < n; i++) v[i] = (double)(i * step);
  dpc_shape s = {.rank = rank};
  for (uint32_t i = 0; i < rank; i++) s.d[i] = i == axis ? n : 1;
  uint32_t y = onnx_constant(c, t, &s, v);
  free(v);
  return y;
}

/* The index of the first (or last) maximum of x along axis, kept as a dimension of 1 or not. */
static uint32_t max_index(onnx_ctx *c, uint32_t x, int64_t axis, int64_t n, bool last, bool keep) {
  uint32_t rank = c->g->values[x].shape.rank;
  uint32_t m = onnx_reduce(c, DPC_OP_REDUCE_MAX, x, &axis, 1, true);
  /* the largest of +i (last) or of -i (first) among the hits; misses count as -n */
  uint32_t iv = iota(c, DPC_I64, rank, (uint32_t)axis, n, last ? 1 : -1);
  uint32_t cand =
      onnx_where(c, onnx_bin(c, DPC_OP_EQUAL, x, m), iv, onnx_scalar(c, DPC_I64, (double)-n));
  uint32_t y = onnx_reduce(c, DPC_OP_REDUCE_MAX, cand, &axis, 1, keep);
  return last ? y : onnx_un(c, DPC_OP_NEG, y);
}

/* GatherElements: y[.., i, ..] = x[.., idx[.., i, ..], ..] along `axis`, as a one-hot mask of
 * the indices (a new axis of the x's length there) times x, summed over that axis. */
static dpc_status imp_gather_elements(onnx_ctx *c) {
  uint32_t x = IN(0), idx = IN(1);
  if (x == DPC_NONE || idx == DPC_NONE) return c->d->status;
  const dpc_shape xs = c->g->values[x].shape, is = c->g->values[idx].shape;
  int64_t axis = onnx_attr_i(c, "axis", 0);
  if (axis < 0) axis += xs.rank;
  if (xs.rank != is.rank || axis < 0 || axis >= (int64_t)xs.rank || xs.rank + 1 > DPC_MAX_RANK ||
      DPC_DIM_IS_SYM(xs.d[axis]) || xs.d[axis] > (1 << 20))
    return onnx_fail(c, DPC_ERR_INVALID, "needs data and indices of one rank and a known axis");
  int64_t n = xs.d[axis], ishape[DPC_MAX_RANK], xshape[DPC_MAX_RANK];
  uint32_t r = xs.rank + 1;
  for (uint32_t i = 0, j = 0; i < r; i++) { /* the new axis sits after `axis` */
    bool at = i == (uint32_t)axis + 1;
    ishape[i] = at ? 1 : is.d[j];
    xshape[i] = i == (uint32_t)axis ? 1 : at ? n : xs.d[j];
    if (!at) j++;
  }
  uint32_t iv = iota(c, onnx_dtype_of(c, idx), r, (uint32_t)axis + 1, n, 1);
  /* negative indices count from the end */
  uint32_t i1 = onnx_reshape(c, idx, ishape, r);
  i1 = onnx_where(c, onnx_bin(c, DPC_OP_LESS, i1, onnx_k(c, i1, 0)),
                  onnx_add(c, i1, onnx_k(c, i1, (double)n)), i1);
  uint32_t mask = onnx_cast(c, onnx_bin(c, DPC_OP_EQUAL, i1, iv), onnx_dtype_of(c, x));
  int64_t ax = axis + 1;
  uint32_t y = onnx_reduce(c, DPC_OP_REDUCE_SUM, onnx_mul(c, mask, onnx_reshape(c, x, xshape, r)),
                           &ax, 1, false);
  return onnx_def(c, 0, y);
}

/* ArgMax and ArgMin: the positions along `axis` equal to the maximum (of -x for ArgMin), and
 * of those the first (or with select_last_index the last) by reducing over 0..n-1. */
static dpc_status arg_extreme(onnx_ctx *c, bool min) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape xs = c->g->values[x].shape;
  int64_t axis = onnx_attr_i(c, "axis", 0);
  if (axis < 0) axis += xs.rank;
  if (axis < 0 || axis >= (int64_t)xs.rank || DPC_DIM_IS_SYM(xs.d[axis]) || xs.d[axis] > (1 << 24))
    return onnx_fail(c, DPC_ERR_INVALID, "axis out of range or of unknown length");
  bool keep = onnx_attr_i(c, "keepdims", 1) != 0, last = onnx_attr_i(c, "select_last_index", 0);
  int64_t n = xs.d[axis];
  if (min) x = onnx_un(c, DPC_OP_NEG, x);
  uint32_t y = x == DPC_NONE ? DPC_NONE : max_index(c, x, axis, n, last, keep);
  return onnx_def(c, 0, y);
}
static dpc_status imp_argmax(onnx_ctx *c) {
  return arg_extreme(c, false);
}
static dpc_status imp_argmin(onnx_ctx *c) {
  return arg_extreme(c, true);
}

/* Mod: fmod=0 takes the divisor's sign (a - floor(a/b) b), fmod=1 the dividend's
 * (a - trunc(a/b) b); worked in f64, exact for the integers models use. */
static dpc_status imp_mod(onnx_ctx *c) {
  uint32_t a = IN(0), b = IN(1);
  if (a == DPC_NONE || b == DPC_NONE) return c->d->status;
  dpc_dtype t = onnx_dtype_of(c, a);
  uint32_t a64 = onnx_cast(c, a, DPC_F64), b64 = onnx_cast(c, b, DPC_F64);
  uint32_t q = onnx_bin(c, DPC_OP_DIV, a64, b64);
  if (onnx_attr_i(c, "fmod", 0))
    q = onnx_mul(c, onnx_un(c, DPC_OP_SIGN, q),
                 onnx_un(c, DPC_OP_FLOOR, onnx_un(c, DPC_OP_ABS, q)));
  else
    q = onnx_un(c, DPC_OP_FLOOR, q);
  uint32_t r = onnx_bin(c, DPC_OP_SUB, a64, onnx_mul(c, q, b64));
  return onnx_def(c, 0, onnx_cast(c, r, t));
}

/* Round half to even: floor(x + 0.5), less one where that broke a tie upward to an odd. */
static dpc_status imp_round(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t r = onnx_un(c, DPC_OP_FLOOR, onnx_add(c, x, onnx_k(c, x, 0.5)));
  uint32_t tie = onnx_bin(c, DPC_OP_EQUAL, onnx_bin(c, DPC_OP_SUB, r, x), onnx_k(c, x, 0.5));
  uint32_t half = onnx_bin(c, DPC_OP_MUL, r, onnx_k(c, x, 0.5));
  uint32_t odd =
      onnx_un(c, DPC_OP_NOT, onnx_bin(c, DPC_OP_EQUAL, half, onnx_un(c, DPC_OP_FLOOR, half)));
  uint32_t down = onnx_where(c, tie, odd, onnx_bin(c, DPC_OP_LESS, x, x)); /* tie and odd */
  return onnx_def(c, 0, onnx_where(c, down, onnx_bin(c, DPC_OP_SUB, r, onnx_k(c, x, 1)), r));
}

/* CumSum: the axis moved last, a matmul with a triangle of ones, moved back. */
static dpc_status imp_cumsum(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  int64_t axis;
  if (onnx_const_ints(c, 1, &axis, 1, NULL) != 1)
    return c->d->status ? c->d->status : onnx_fail(c, DPC_ERR_INVALID, "axis must be one integer");
  const dpc_shape xs = c->g->values[x].shape;
  if (axis < 0) axis += xs.rank;
  if (axis < 0 || axis >= (int64_t)xs.rank || DPC_DIM_IS_SYM(xs.d[axis]) || xs.d[axis] > 4096)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED,
                     "CumSum along an axis out of range, symbolic or over 4096");
  bool excl = onnx_attr_i(c, "exclusive", 0) != 0, rev = onnx_attr_i(c, "reverse", 0) != 0;
  dpc_dtype t = onnx_dtype_of(c, x), work = dpc_dtype_is_float(t) ? t : DPC_F64;
  int64_t perm[DPC_MAX_RANK], n = xs.d[axis];
  uint32_t r = xs.rank;
  for (uint32_t i = 0, j = 0; i < r; i++)
    if (i != (uint32_t)axis) perm[j++] = i;
  perm[r - 1] = axis;
  int64_t inv[DPC_MAX_RANK];
  for (uint32_t i = 0; i < r; i++) inv[perm[i]] = i;
  dpc_shape ms = {.rank = 2, .d = {n, n}};
  /* y_j = sum_i x_i M[i][j]: forward i <= j (i < j exclusive), reverse i >= j (i > j) */
  uint32_t m = pattern(c, work, &ms, rev ? (excl ? D_LT : D_LE) : (excl ? D_GT : D_GE), 0);
  uint32_t xt = r > 1 && axis != (int64_t)r - 1 ? onnx_transpose(c, onnx_cast(c, x, work), perm, r)
                                                : onnx_cast(c, x, work);
  uint32_t y = onnx_bin(c, DPC_OP_MATMUL, xt, m);
  if (r > 1 && axis != (int64_t)r - 1) y = onnx_transpose(c, y, inv, r);
  return onnx_def(c, 0, onnx_cast(c, y, t));
}

/* OneHot: indices (cast to integers, negative ones from the end) against 0..depth-1 along a new
 * axis, then on/off from `values`. */
static dpc_status imp_onehot(onnx_ctx *c) {
  uint32_t idx = IN(0), vals = IN(2);
  const onnx_const *dk = onnx_in_known(c, 1);
  if (idx == DPC_NONE || vals == DPC_NONE) return c->d->status;
  if (!dk || dpc_tensor_numel(&dk->t) != 1)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a OneHot depth computed at run time");
  int64_t depth = (int64_t)dpc_tload(&dk->t, 0);
  const dpc_shape is = c->g->values[idx].shape;
  int64_t axis = onnx_attr_i(c, "axis", -1);
  uint32_t r = is.rank + 1;
  if (axis < 0) axis += r;
  if (depth < 1 || depth > (1 << 20) || axis < 0 || axis >= (int64_t)r || r > DPC_MAX_RANK)
    return onnx_fail(c, DPC_ERR_INVALID, "depth or axis out of range");
  int64_t ishape[DPC_MAX_RANK];
  for (uint32_t i = 0, j = 0; i < r; i++) ishape[i] = i == (uint32_t)axis ? 1 : is.d[j++];
  uint32_t iv = iota(c, DPC_I64, r, (uint32_t)axis, depth, 1);
  uint32_t i1 = onnx_reshape(c, onnx_cast(c, idx, DPC_I64), ishape, r);
  i1 = onnx_where(c, onnx_bin(c, DPC_OP_LESS, i1, onnx_k(c, i1, 0)),
                  onnx_add(c, i1, onnx_k(c, i1, (double)depth)), i1);
  uint32_t hit = onnx_bin(c, DPC_OP_EQUAL, i1, iv);
  int64_t scalar[1] = {0};
  uint32_t off = onnx_reshape(c, onnx_slice(c, vals, 0, 0, 1, 1), scalar, 0);
  uint32_t on = onnx_reshape(c, onnx_slice(c, vals, 0, 1, 2, 1), scalar, 0);
  return onnx_def(c, 0, onnx_where(c, hit, on, off));
}

static dpc_status imp_eyelike(onnx_ctx *c) {
  dpc_dtype t;
  dpc_shape s;
  dpc_status st = onnx_in_type(c, 0, &t, &s);
  if (st) return st;
  if (onnx_attr(c, "dtype") && !dpc_onnx_dtype((int32_t)onnx_attr_i(c, "dtype", 1), &t))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "EyeLike to a type dpc does not have");
  if (s.rank != 2) return onnx_fail(c, DPC_ERR_INVALID, "EyeLike needs a 2-D input");
  return onnx_def(c, 0, pattern(c, t, &s, D_EQ, onnx_attr_i(c, "k", 0)));
}

/* Hardmax: 1 at the first maximum along the axis, 0 elsewhere (opset 13's per-axis form). */
static dpc_status imp_hardmax(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape xs = c->g->values[x].shape;
  int64_t axis = onnx_attr_i(c, "axis", c->opset >= 13 ? -1 : 1);
  if (axis < 0) axis += xs.rank;
  if (c->opset < 13 && axis != (int64_t)xs.rank - 1)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "Hardmax before opset 13 on an axis but the last");
  if (axis < 0 || axis >= (int64_t)xs.rank || DPC_DIM_IS_SYM(xs.d[axis]))
    return onnx_fail(c, DPC_ERR_INVALID, "axis out of range or of unknown length");
  int64_t n = xs.d[axis];
  uint32_t first = max_index(c, x, axis, n, false, true);
  uint32_t iv = iota(c, DPC_I64, xs.rank, (uint32_t)axis, n, 1);
  return onnx_def(c, 0, onnx_cast(c, onnx_bin(c, DPC_OP_EQUAL, iv, first), onnx_dtype_of(c, x)));
}

/* ---- losses ------------------------------------------------------------------------------ */

/* NegativeLogLikelihoodLoss on log-probabilities x [N, C, d...] and class indices t [N, d...]:
 * a one-hot mask from comparing t with 0..C-1 (ignore_index left out, and the class weights in
 * it) picks -x[n, t[n]]; `mean` divides by the picked weights' sum, as ONNX does. */
static dpc_status nll(onnx_ctx *c, uint32_t x, uint32_t t, uint32_t weight) {
  if (x == DPC_NONE || t == DPC_NONE) return c->d->status;
  const dpc_shape xs = c->g->values[x].shape, ts = c->g->values[t].shape;
  dpc_dtype ft = onnx_dtype_of(c, x);
  if (xs.rank < 2 || ts.rank != xs.rank - 1 || DPC_DIM_IS_SYM(xs.d[1]) || xs.d[1] > (1 << 24))
    return onnx_fail(c, DPC_ERR_INVALID, "needs scores [N, C, ...] and targets [N, ...]");
  char red[16];
  onnx_attr_s(c, "reduction", "mean", red, sizeof red);
  if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
    return onnx_fail(c, DPC_ERR_INVALID, "unknown reduction '%s'", red);
  int64_t classes = xs.d[1], shape[DPC_MAX_RANK] = {1, classes}, tdims[DPC_MAX_RANK];
  for (uint32_t i = 2; i < xs.rank; i++) shape[i] = 1;
  uint32_t iv = iota(c, onnx_dtype_of(c, t), xs.rank, 1, classes, 1);
  if (iv == DPC_NONE) return c->d->status;
  tdims[0] = ts.d[0], tdims[1] = 1;
  for (uint32_t i = 1; i < ts.rank; i++) tdims[i + 1] = ts.d[i];
  uint32_t t1 = onnx_reshape(c, t, tdims, xs.rank);
  uint32_t hit = onnx_bin(c, DPC_OP_EQUAL, t1, iv);
  if (onnx_attr(c, "ignore_index")) {
    uint32_t ign =
        onnx_bin(c, DPC_OP_EQUAL, t1, onnx_k(c, t1, (double)onnx_attr_i(c, "ignore_index", 0)));
    hit = onnx_where(c, ign, onnx_bin(c, DPC_OP_LESS, t1, t1), hit); /* less(t, t): false */
  }
  uint32_t mw = onnx_cast(c, hit, ft);
  if (weight != DPC_NONE) mw = onnx_mul(c, mw, onnx_reshape(c, weight, shape, xs.rank));
  int64_t one = 1;
  uint32_t loss =
      onnx_un(c, DPC_OP_NEG, onnx_reduce(c, DPC_OP_REDUCE_SUM, onnx_mul(c, mw, x), &one, 1, false));
  if (!strcmp(red, "sum")) loss = onnx_reduce(c, DPC_OP_REDUCE_SUM, loss, NULL, 0, false);
  if (!strcmp(red, "mean"))
    loss = onnx_bin(c, DPC_OP_DIV, onnx_reduce(c, DPC_OP_REDUCE_SUM, loss, NULL, 0, false),
                    onnx_reduce(c, DPC_OP_REDUCE_SUM, mw, NULL, 0, false));
  return onnx_def(c, 0, loss);
}

static dpc_status imp_nll_loss(onnx_ctx *c) {
  return nll(c, IN(0), IN(1), onnx_has_in(c, 2) ? IN(2) : DPC_NONE);
}

static dpc_status imp_softmax_ce_loss(onnx_ctx *c) {
  uint32_t x = IN(0), mark = dpc_graph_attr_mark(c->g), lp;
  if (x == DPC_NONE) return c->d->status;
  if (dpc_graph_attr_int(c->g, "axis", 1)) return OOM();
  dpc_status st = onnx_emit(c, DPC_OP_LOG_SOFTMAX, &x, 1, mark, 0, &lp);
  if (!st) st = nll(c, lp, IN(1), onnx_has_in(c, 2) ? IN(2) : DPC_NONE);
  if (!st && onnx_n_out(c) > 1) st = onnx_def(c, 1, lp);
  return st;
}

static const onnx_op_row indexed[] = {
    {"ArgMax", imp_argmax},
    {"ArgMin", imp_argmin},
    {"CumSum", imp_cumsum},
    {"EyeLike", imp_eyelike},
    {"GatherElements", imp_gather_elements},
    {"Hardmax", imp_hardmax},
    {"Mod", imp_mod},
    {"NegativeLogLikelihoodLoss", imp_nll_loss},
    {"OneHot", imp_onehot},
    {"Round", imp_round},
    {"SoftmaxCrossEntropyLoss", imp_softmax_ce_loss},
    {"Trilu", imp_trilu},
};

const onnx_op_row *onnx_find_indexed(const char *op_type) {
  for (size_t i = 0; i < sizeof indexed / sizeof *indexed; i++)
    if (!strcmp(indexed[i].name, op_type)) return &indexed[i];
  return NULL;
}
