/*
 * onnx_compose.c — ONNX ops that dpc builds from other ops rather than giving them rows of
 * their own: activations (Elu, Selu, HardSigmoid, Softplus, Softsign, ThresholdedRelu, Shrink,
 * PRelu, Ceil), logic (And, Or, Xor, GreaterOrEqual, LessOrEqual, IsInf), reductions (ReduceL1,
 * ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp), Mean, Trilu, Tile, Pad,
 * InstanceNormalization, DepthToSpace, SpaceToDepth, Range, GatherElements, ArgMax, ArgMin
 * and the losses
 * NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * Built from differentiable ops, each trains through dpc's ordinary gradients.
 */
#include "frontend/onnx_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(i) onnx_in(c, (i))
#define OOM() onnx_fail(c, DPC_ERR_NOMEM, "out of memory")

static dpc_dtype dt(onnx_ctx *c, uint32_t v) {
  return c->g->values[v].dtype;
}
static uint32_t k_(onnx_ctx *c, uint32_t like, double v) {
  return like == DPC_NONE ? DPC_NONE : onnx_scalar(c, dt(c, like), v);
}
static uint32_t add(onnx_ctx *c, uint32_t a, uint32_t b) {
  return onnx_bin(c, DPC_OP_ADD, a, b);
}
static uint32_t mul(onnx_ctx *c, uint32_t a, uint32_t b) {
  return onnx_bin(c, DPC_OP_MUL, a, b);
}
/* min(x, 0) and exp of it: the negative half of the exponential units */
static uint32_t expm1_neg(onnx_ctx *c, uint32_t x) {
  uint32_t m = onnx_bin(c, DPC_OP_MIN, x, k_(c, x, 0));
  return onnx_bin(c, DPC_OP_SUB, onnx_un(c, DPC_OP_EXP, m), k_(c, x, 1));
}

/* ---- activations ---------------------------------------------------------------------------- */

static dpc_status imp_elu(onnx_ctx *c) {
  uint32_t x = IN(0);
  double alpha = onnx_attr_f(c, "alpha", 1);
  if (x == DPC_NONE) return c->d->status;
  return onnx_def(c, 0,
                  add(c, onnx_un(c, DPC_OP_RELU, x), mul(c, k_(c, x, alpha), expm1_neg(c, x))));
}

static dpc_status imp_selu(onnx_ctx *c) {
  uint32_t x = IN(0);
  double alpha = onnx_attr_f(c, "alpha", 1.67326319217681884765625);
  double gamma = onnx_attr_f(c, "gamma", 1.05070102214813232421875);
  if (x == DPC_NONE) return c->d->status;
  uint32_t e = add(c, onnx_un(c, DPC_OP_RELU, x), mul(c, k_(c, x, alpha), expm1_neg(c, x)));
  return onnx_def(c, 0, mul(c, k_(c, x, gamma), e));
}

static dpc_status imp_hard_sigmoid(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t a = add(c, mul(c, x, k_(c, x, onnx_attr_f(c, "alpha", 0.2))),
                   k_(c, x, onnx_attr_f(c, "beta", 0.5)));
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (a == DPC_NONE) return c->d->status;
  if (dpc_graph_attr_float(c->g, "min", 0) || dpc_graph_attr_float(c->g, "max", 1)) return OOM();
  dpc_status st = onnx_emit(c, DPC_OP_CLIP, &a, 1, mark, 0, &y);
  return st ? st : onnx_def(c, 0, y);
}

/* log(1 + e^x) as relu(x) + log(1 + e^-|x|), which cannot overflow */
static dpc_status imp_softplus(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t e = onnx_un(c, DPC_OP_EXP, onnx_un(c, DPC_OP_NEG, onnx_un(c, DPC_OP_ABS, x)));
  return onnx_def(
      c, 0, add(c, onnx_un(c, DPC_OP_RELU, x), onnx_un(c, DPC_OP_LOG, add(c, e, k_(c, x, 1)))));
}

static dpc_status imp_softsign(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  return onnx_def(c, 0, onnx_bin(c, DPC_OP_DIV, x, add(c, onnx_un(c, DPC_OP_ABS, x), k_(c, x, 1))));
}

static uint32_t where(onnx_ctx *c, uint32_t cond, uint32_t a, uint32_t b) {
  uint32_t in[3] = {cond, a, b}, y;
  return onnx_emit(c, DPC_OP_WHERE, in, 3, dpc_graph_attr_mark(c->g), 0, &y) ? DPC_NONE : y;
}

static dpc_status imp_thresholded_relu(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t cond = onnx_bin(c, DPC_OP_GREATER, x, k_(c, x, onnx_attr_f(c, "alpha", 1)));
  return onnx_def(c, 0, where(c, cond, x, k_(c, x, 0)));
}

static dpc_status imp_shrink(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  double bias = onnx_attr_f(c, "bias", 0), lambd = onnx_attr_f(c, "lambd", 0.5);
  uint32_t hi = where(c, onnx_bin(c, DPC_OP_GREATER, x, k_(c, x, lambd)),
                      onnx_bin(c, DPC_OP_SUB, x, k_(c, x, bias)), k_(c, x, 0));
  return onnx_def(
      c, 0, where(c, onnx_bin(c, DPC_OP_LESS, x, k_(c, x, -lambd)), add(c, x, k_(c, x, bias)), hi));
}

static dpc_status imp_prelu(onnx_ctx *c) {
  uint32_t x = IN(0), slope = IN(1);
  if (x == DPC_NONE || slope == DPC_NONE) return c->d->status;
  /* Before opset 7 a 1-D slope runs along the channels (axis 1), not the last axis. */
  const dpc_shape *xs = &c->g->values[x].shape, *ss = &c->g->values[slope].shape;
  if (c->opset < 7 && ss->rank == 1 && xs->rank >= 2 && ss->d[0] == xs->d[1] && ss->d[0] > 1) {
    int64_t dims[DPC_MAX_RANK] = {ss->d[0]};
    for (uint32_t i = 1; i + 1 < xs->rank; i++) dims[i] = 1;
    slope = onnx_reshape(c, slope, dims, xs->rank - 1);
  }
  uint32_t neg = onnx_bin(c, DPC_OP_MIN, x, k_(c, x, 0));
  return onnx_def(c, 0, add(c, onnx_un(c, DPC_OP_RELU, x), mul(c, slope, neg)));
}

static dpc_status imp_ceil(onnx_ctx *c) {
  return onnx_def(c, 0,
                  onnx_un(c, DPC_OP_NEG, onnx_un(c, DPC_OP_FLOOR, onnx_un(c, DPC_OP_NEG, IN(0)))));
}

/* ---- logic -------------------------------------------------------------------------------- */

static dpc_status imp_and(onnx_ctx *c) {
  uint32_t a = IN(0), b = IN(1);
  return onnx_def(c, 0, where(c, a, b, a));
}
static dpc_status imp_or(onnx_ctx *c) {
  uint32_t a = IN(0), b = IN(1);
  return onnx_def(c, 0, where(c, a, a, b));
}
static dpc_status imp_xor(onnx_ctx *c) {
  return onnx_def(c, 0, onnx_un(c, DPC_OP_NOT, onnx_bin(c, DPC_OP_EQUAL, IN(0), IN(1))));
}
static dpc_status imp_greater_equal(onnx_ctx *c) {
  return onnx_def(c, 0, onnx_un(c, DPC_OP_NOT, onnx_bin(c, DPC_OP_LESS, IN(0), IN(1))));
}
static dpc_status imp_less_equal(onnx_ctx *c) {
  return onnx_def(c, 0, onnx_un(c, DPC_OP_NOT, onnx_bin(c, DPC_OP_GREATER, IN(0), IN(1))));
}

static dpc_status imp_is_inf(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  bool pos = onnx_attr_i(c, "detect_positive", 1) != 0,
       neg = onnx_attr_i(c, "detect_negative", 1) != 0;
  uint32_t p = onnx_bin(c, DPC_OP_EQUAL, x, k_(c, x, INFINITY));
  uint32_t n = onnx_bin(c, DPC_OP_EQUAL, x, k_(c, x, -INFINITY));
  uint32_t none = onnx_bin(c, DPC_OP_LESS, x, x); /* false everywhere, NaN included */
  uint32_t y = pos && neg ? where(c, p, p, n) : pos ? p : neg ? n : none;
  return onnx_def(c, 0, y);
}

static dpc_status imp_mean(onnx_ctx *c) {
  uint32_t y = IN(0), n = (uint32_t)c->node->n_input;
  for (uint32_t i = 1; i < n && y != DPC_NONE; i++) y = add(c, y, IN(i));
  if (y == DPC_NONE) return c->d->status;
  return onnx_def(c, 0, n > 1 ? onnx_bin(c, DPC_OP_DIV, y, k_(c, y, n)) : y);
}

/* ---- reductions -------------------------------------------------------------------------------
 */

static uint32_t reduce_node(onnx_ctx *c, dpc_op op, uint32_t x, const int64_t *axes, int n,
                            bool keep) {
  if (x == DPC_NONE) return DPC_NONE;
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if ((n > 0 && dpc_graph_attr_ints(c->g, "axes", axes, (uint32_t)n)) ||
      dpc_graph_attr_int(c->g, "keepdims", keep))
    return OOM(), DPC_NONE;
  return onnx_emit(c, op, &x, 1, mark, 0, &y) ? DPC_NONE : y;
}

typedef enum { R_L1, R_L2, R_SUM_SQUARE, R_LOG_SUM, R_LOG_SUM_EXP } reduce_kind;

static dpc_status reduce_composed(onnx_ctx *c, reduce_kind k) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  int64_t axes[DPC_MAX_RANK + 1];
  int n = onnx_attr_ints(c, "axes", axes, DPC_MAX_RANK + 1);
  if (n > DPC_MAX_RANK) return onnx_fail(c, DPC_ERR_INVALID, "too many axes");
  if (c->d->status) return c->d->status;
  bool keep = onnx_attr_i(c, "keepdims", 1) != 0;
  uint32_t y;
  switch (k) {
  case R_L1: y = reduce_node(c, DPC_OP_REDUCE_SUM, onnx_un(c, DPC_OP_ABS, x), axes, n, keep); break;
  case R_L2:
  case R_SUM_SQUARE:
    y = reduce_node(c, DPC_OP_REDUCE_SUM, mul(c, x, x), axes, n, keep);
    if (k == R_L2) y = onnx_un(c, DPC_OP_SQRT, y);
    break;
  case R_LOG_SUM:
    y = onnx_un(c, DPC_OP_LOG, reduce_node(c, DPC_OP_REDUCE_SUM, x, axes, n, keep));
    break;
  default: {
    /* log sum exp(x - m) + m, m the maximum: no overflow */
    uint32_t m = reduce_node(c, DPC_OP_REDUCE_MAX, x, axes, n, true);
    uint32_t s = reduce_node(c, DPC_OP_REDUCE_SUM,
                             onnx_un(c, DPC_OP_EXP, onnx_bin(c, DPC_OP_SUB, x, m)), axes, n, true);
    y = add(c, onnx_un(c, DPC_OP_LOG, s), m);
    if (!keep && y != DPC_NONE) {
      uint32_t r = reduce_node(c, DPC_OP_REDUCE_MAX, y, axes, n, false); /* drops the 1s */
      y = r;
    }
    break;
  }
  }
  return onnx_def(c, 0, y);
}
static dpc_status imp_reduce_l1(onnx_ctx *c) {
  return reduce_composed(c, R_L1);
}
static dpc_status imp_reduce_l2(onnx_ctx *c) {
  return reduce_composed(c, R_L2);
}
static dpc_status imp_reduce_sum_square(onnx_ctx *c) {
  return reduce_composed(c, R_SUM_SQUARE);
}
static dpc_status imp_reduce_log_sum(onnx_ctx *c) {
  return reduce_composed(c, R_LOG_SUM);
}
static dpc_status imp_reduce_log_sum_exp(onnx_ctx *c) {
  return reduce_composed(c, R_LOG_SUM_EXP);
}

/* ---- layout ------------------------------------------------------------------------------------
 */

/* A constant tensor of one value, in x's dtype. */
static uint32_t filled(onnx_ctx *c, dpc_dtype t, const dpc_shape *s, double v) {
  int64_t n = dpc_shape_numel(s);
  if (!dpc_shape_is_concrete(s) || n > (INT64_C(1) << 24))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a constant block of symbolic or huge shape"),
           DPC_NONE;
  double *vals = malloc((size_t)(n ? n : 1) * sizeof *vals);
  if (!vals) return OOM(), DPC_NONE;
  for (int64_t i = 0; i < n; i++) vals[i] = v;
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  dpc_status st = dpc_graph_attr_tensor(c->g, "value", t, s, vals);
  free(vals);
  if (st) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_CONSTANT, NULL, 0, mark, 0, &y) ? DPC_NONE : y;
}

static uint32_t slice1(onnx_ctx *c, uint32_t x, int64_t axis, int64_t lo, int64_t hi,
                       int64_t step) {
  if (x == DPC_NONE) return DPC_NONE;
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_ints(c->g, "starts", &lo, 1) || dpc_graph_attr_ints(c->g, "ends", &hi, 1) ||
      dpc_graph_attr_ints(c->g, "axes", &axis, 1) || dpc_graph_attr_ints(c->g, "steps", &step, 1))
    return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_SLICE, &x, 1, mark, 0, &y) ? DPC_NONE : y;
}

static uint32_t concat(onnx_ctx *c, const uint32_t *xs, uint32_t n, int64_t axis) {
  for (uint32_t i = 0; i < n; i++)
    if (xs[i] == DPC_NONE) return DPC_NONE;
  if (n == 1) return xs[0];
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_int(c->g, "axis", axis)) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_CONCAT, xs, n, mark, 0, &y) ? DPC_NONE : y;
}

static uint32_t transpose(onnx_ctx *c, uint32_t x, const int64_t *perm, uint32_t n) {
  if (x == DPC_NONE) return DPC_NONE;
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_ints(c->g, "perm", perm, n)) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_TRANSPOSE, &x, 1, mark, 0, &y) ? DPC_NONE : y;
}

static dpc_status imp_tile(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t r = c->g->values[x].shape.rank;
  int64_t rep[DPC_MAX_RANK + 1];
  int n = onnx_const_ints(c, 1, rep, DPC_MAX_RANK + 1, NULL);
  if (n < 0) return c->d->status;
  if ((uint32_t)n != r)
    return onnx_fail(c, DPC_ERR_INVALID, "repeats must have one entry per axis");
  for (uint32_t a = 0; a < r && x != DPC_NONE; a++) {
    if (rep[a] < 0 || rep[a] > 4096)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "repeats of %lld", (long long)rep[a]);
    if (rep[a] == 1) continue;
    if (rep[a] == 0) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "Tile to an empty tensor");
    uint32_t *xs = malloc((size_t)rep[a] * sizeof *xs);
    if (!xs) return OOM();
    for (int64_t i = 0; i < rep[a]; i++) xs[i] = x;
    x = concat(c, xs, (uint32_t)rep[a], a);
    free(xs);
  }
  return onnx_def(c, 0, x);
}

/* Pad: constant, reflect and edge modes, one axis at a time; negative pads crop. */
static dpc_status imp_pad(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t r = c->g->values[x].shape.rank;
  int64_t pads[2 * DPC_MAX_RANK + 1];
  int n;
  double value = 0;
  char mode[16];
  onnx_attr_s(c, "mode", "constant", mode, sizeof mode);
  if (c->opset < 11) {
    n = onnx_attr_ints(c, "pads", pads, 2 * DPC_MAX_RANK + 1);
    value = onnx_attr_f(c, "value", 0);
  } else {
    n = onnx_const_ints(c, 1, pads, 2 * DPC_MAX_RANK + 1, NULL);
    if (n < 0) return c->d->status;
    if (onnx_has_in(c, 2)) {
      const onnx_const *k = onnx_in_known(c, 2);
      if (!k || dpc_tensor_numel(&k->t) != 1)
        return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a Pad value computed at run time");
      value = dpc_tload(&k->t, 0);
    }
  }
  if (n != (int)(2 * r)) return onnx_fail(c, DPC_ERR_INVALID, "pads must have 2 * rank entries");
  bool constant = !strcmp(mode, "constant"), reflect = !strcmp(mode, "reflect");
  if (!constant && !reflect && strcmp(mode, "edge"))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "Pad mode '%s'", mode);
  for (uint32_t a = 0; a < r && x != DPC_NONE; a++) {
    int64_t lo = pads[a], hi = pads[r + a], dim = c->g->values[x].shape.d[a];
    if (DPC_DIM_IS_SYM(dim)) {
      if (lo || hi) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "padding a symbolic dimension");
      continue;
    }
    if (lo < 0 || hi < 0) { /* crop first */
      x = slice1(c, x, a, lo < 0 ? -lo : 0, hi < 0 ? dim + hi : dim, 1);
      dim -= (lo < 0 ? -lo : 0) + (hi < 0 ? -hi : 0);
      lo = lo < 0 ? 0 : lo, hi = hi < 0 ? 0 : hi;
    }
    if (!lo && !hi) continue;
    if ((reflect && (lo >= dim || hi >= dim)) || (!constant && dim == 0) || lo > 4096 || hi > 4096)
      return onnx_fail(c, DPC_ERR_INVALID, "pads of %lld and %lld do not fit dimension %lld",
                       (long long)lo, (long long)hi, (long long)dim);
    uint32_t parts[3 + 2 * 4096], np = 0;
    dpc_shape s = c->g->values[x].shape;
    if (constant) {
      s.d[a] = lo;
      if (lo) parts[np++] = filled(c, dt(c, x), &s, value);
      parts[np++] = x;
      s.d[a] = hi;
      if (hi) parts[np++] = filled(c, dt(c, x), &s, value);
    } else if (reflect) {
      if (lo) parts[np++] = slice1(c, x, a, lo, 0, -1);
      parts[np++] = x;
      /* an end below 0 must not read as "from the back": -dim-1 is before the first */
      if (hi)
        parts[np++] = slice1(c, x, a, dim - 2, dim - 2 - hi < 0 ? -dim - 1 : dim - 2 - hi, -1);
    } else {
      for (int64_t i = 0; i < lo; i++) parts[np++] = slice1(c, x, a, 0, 1, 1);
      parts[np++] = x;
      for (int64_t i = 0; i < hi; i++) parts[np++] = slice1(c, x, a, dim - 1, dim, 1);
    }
    x = concat(c, parts, np, a);
  }
  return onnx_def(c, 0, x);
}

static dpc_status imp_instance_norm(onnx_ctx *c) {
  uint32_t x = IN(0), scale = IN(1), bias = IN(2);
  if (x == DPC_NONE || scale == DPC_NONE || bias == DPC_NONE) return c->d->status;
  /* a copy: adding nodes moves the values array */
  const dpc_shape s = c->g->values[x].shape;
  if (s.rank < 3) return onnx_fail(c, DPC_ERR_INVALID, "input must be [N, C, ...spatial]");
  int64_t axes[DPC_MAX_RANK], cs[DPC_MAX_RANK] = {1, s.d[1]};
  for (uint32_t i = 2; i < s.rank; i++) axes[i - 2] = i, cs[i] = 1;
  uint32_t mean = reduce_node(c, DPC_OP_REDUCE_MEAN, x, axes, (int)s.rank - 2, true);
  uint32_t dev = onnx_bin(c, DPC_OP_SUB, x, mean);
  uint32_t var = reduce_node(c, DPC_OP_REDUCE_MEAN, mul(c, dev, dev), axes, (int)s.rank - 2, true);
  uint32_t inv = onnx_un(c, DPC_OP_RSQRT, add(c, var, k_(c, x, onnx_attr_f(c, "epsilon", 1e-5))));
  uint32_t y = mul(c, mul(c, dev, inv), onnx_reshape(c, scale, cs, s.rank));
  return onnx_def(c, 0, add(c, y, onnx_reshape(c, bias, cs, s.rank)));
}

/* DepthToSpace and SpaceToDepth: a reshape to rank 6, a transpose, a reshape back. */
static dpc_status depth_space(onnx_ctx *c, bool to_space) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape *s = &c->g->values[x].shape;
  int64_t b = onnx_attr_i(c, "blocksize", 0);
  char mode[8];
  onnx_attr_s(c, "mode", "DCR", mode, sizeof mode);
  if (s->rank != 4 || b < 1 || DPC_DIM_IS_SYM(s->d[1]) || DPC_DIM_IS_SYM(s->d[2]) ||
      DPC_DIM_IS_SYM(s->d[3]))
    return onnx_fail(c, DPC_ERR_INVALID, "needs [N, C, H, W] of known C, H, W and a blocksize");
  int64_t n = s->d[0], ch = s->d[1], h = s->d[2], w = s->d[3];
  bool crd = !strcmp(mode, "CRD");
  if (to_space) {
    if (ch % (b * b)) return onnx_fail(c, DPC_ERR_INVALID, "channels must divide by blocksize^2");
    int64_t c2 = ch / (b * b);
    int64_t d6[6] = {n, b, b, c2, h, w}, p[6] = {0, 3, 4, 1, 5, 2};
    if (crd) {
      int64_t e6[6] = {n, c2, b, b, h, w}, q[6] = {0, 1, 4, 2, 5, 3};
      memcpy(d6, e6, sizeof d6), memcpy(p, q, sizeof p);
    }
    int64_t o[4] = {n, c2, h * b, w * b};
    return onnx_def(c, 0, onnx_reshape(c, transpose(c, onnx_reshape(c, x, d6, 6), p, 6), o, 4));
  }
  if (h % b || w % b) return onnx_fail(c, DPC_ERR_INVALID, "H and W must divide by blocksize");
  int64_t d6[6] = {n, ch, h / b, b, w / b, b}, p[6] = {0, 3, 5, 1, 2, 4};
  int64_t o[4] = {n, ch * b * b, h / b, w / b};
  return onnx_def(c, 0, onnx_reshape(c, transpose(c, onnx_reshape(c, x, d6, 6), p, 6), o, 4));
}
static dpc_status imp_depth_to_space(onnx_ctx *c) {
  return depth_space(c, true);
}
static dpc_status imp_space_to_depth(onnx_ctx *c) {
  return depth_space(c, false);
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
  int64_t rows = s->d[s->rank - 2], cols = s->d[s->rank - 1];
  if (rows * cols > (INT64_C(1) << 24)) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a huge Trilu");
  bool upper = onnx_attr_i(c, "upper", 1) != 0;
  int64_t cells = rows * cols;
  double *m = malloc((size_t)(cells > 0 ? cells : 1) * sizeof *m);
  if (!m) return OOM();
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) m[i * cols + j] = upper ? j - i >= k : j - i <= k;
  dpc_shape ms = {.rank = 2, .d = {rows, cols}};
  uint32_t mark = dpc_graph_attr_mark(c->g), mask;
  dpc_status st = dpc_graph_attr_tensor(c->g, "value", DPC_BOOL, &ms, m);
  free(m);
  if (st) return OOM();
  if ((st = onnx_emit(c, DPC_OP_CONSTANT, NULL, 0, mark, 0, &mask))) return st;
  return onnx_def(c, 0, where(c, mask, x, k_(c, x, 0)));
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
  int64_t n = xs.d[axis], ishape[DPC_MAX_RANK], xshape[DPC_MAX_RANK], ones[DPC_MAX_RANK];
  uint32_t r = xs.rank + 1;
  for (uint32_t i = 0, j = 0; i < r; i++) { /* the new axis sits after `axis` */
    bool at = i == (uint32_t)axis + 1;
    ishape[i] = at ? 1 : is.d[j];
    xshape[i] = i == (uint32_t)axis ? 1 : at ? n : xs.d[j];
    ones[i] = at ? n : 1;
    if (!at) j++;
  }
  double *iota = malloc((size_t)n * sizeof *iota);
  if (!iota) return OOM();
  for (int64_t i = 0; i < n; i++) iota[i] = (double)i;
  dpc_shape os = {.rank = r};
  memcpy(os.d, ones, sizeof ones);
  uint32_t mark = dpc_graph_attr_mark(c->g), iv;
  dpc_status st = dpc_graph_attr_tensor(c->g, "value", dt(c, idx), &os, iota);
  free(iota);
  if (st) return OOM();
  if ((st = onnx_emit(c, DPC_OP_CONSTANT, NULL, 0, mark, 0, &iv))) return st;
  /* negative indices count from the end */
  uint32_t i1 = onnx_reshape(c, idx, ishape, r);
  i1 = where(c, onnx_bin(c, DPC_OP_LESS, i1, k_(c, i1, 0)), add(c, i1, k_(c, i1, (double)n)), i1);
  uint32_t mask = onnx_cast(c, onnx_bin(c, DPC_OP_EQUAL, i1, iv), dt(c, x));
  int64_t ax = axis + 1;
  uint32_t y =
      reduce_node(c, DPC_OP_REDUCE_SUM, mul(c, mask, onnx_reshape(c, x, xshape, r)), &ax, 1, false);
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
  uint32_t m = reduce_node(c, DPC_OP_REDUCE_MAX, x, &axis, 1, true);
  uint32_t eq = onnx_bin(c, DPC_OP_EQUAL, x, m);
  double *iota = malloc((size_t)n * sizeof *iota);
  if (!iota) return OOM();
  for (int64_t i = 0; i < n; i++) iota[i] = (double)(last ? i : -i);
  dpc_shape is = {.rank = xs.rank};
  for (uint32_t i = 0; i < xs.rank; i++) is.d[i] = i == (uint32_t)axis ? n : 1;
  uint32_t mark = dpc_graph_attr_mark(c->g), iv;
  dpc_status st = dpc_graph_attr_tensor(c->g, "value", DPC_I64, &is, iota);
  free(iota);
  if (st) return OOM();
  if ((st = onnx_emit(c, DPC_OP_CONSTANT, NULL, 0, mark, 0, &iv))) return st;
  /* the largest of +i (last) or of -i (first) among the hits; misses count as -n */
  uint32_t cand = where(c, eq, iv, onnx_scalar(c, DPC_I64, (double)-n));
  uint32_t y = reduce_node(c, DPC_OP_REDUCE_MAX, cand, &axis, 1, keep);
  if (!last) y = onnx_un(c, DPC_OP_NEG, y);
  return onnx_def(c, 0, y);
}
static dpc_status imp_argmax(onnx_ctx *c) {
  return arg_extreme(c, false);
}
static dpc_status imp_argmin(onnx_ctx *c) {
  return arg_extreme(c, true);
}

/* ---- losses ------------------------------------------------------------------------------ */

/* NegativeLogLikelihoodLoss on log-probabilities x [N, C, d...] and class indices t [N, d...]:
 * a one-hot mask from comparing t with 0..C-1 (ignore_index left out, and the class weights in
 * it) picks -x[n, t[n]]; `mean` divides by the picked weights' sum, as ONNX does. */
static dpc_status nll(onnx_ctx *c, uint32_t x, uint32_t t, uint32_t weight) {
  if (x == DPC_NONE || t == DPC_NONE) return c->d->status;
  const dpc_shape xs = c->g->values[x].shape, ts = c->g->values[t].shape;
  dpc_dtype ft = dt(c, x);
  if (xs.rank < 2 || ts.rank != xs.rank - 1 || DPC_DIM_IS_SYM(xs.d[1]) || xs.d[1] > (1 << 24))
    return onnx_fail(c, DPC_ERR_INVALID, "needs scores [N, C, ...] and targets [N, ...]");
  char red[16];
  onnx_attr_s(c, "reduction", "mean", red, sizeof red);
  if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
    return onnx_fail(c, DPC_ERR_INVALID, "unknown reduction '%s'", red);
  int64_t classes = xs.d[1], shape[DPC_MAX_RANK] = {1, classes}, tdims[DPC_MAX_RANK];
  for (uint32_t i = 2; i < xs.rank; i++) shape[i] = 1;
  double *iota = malloc((size_t)classes * sizeof *iota);
  if (!iota) return OOM();
  for (int64_t i = 0; i < classes; i++) iota[i] = (double)i;
  dpc_shape is = {.rank = xs.rank};
  memcpy(is.d, shape, sizeof shape);
  uint32_t mark = dpc_graph_attr_mark(c->g), iv;
  dpc_status st = dpc_graph_attr_tensor(c->g, "value", dt(c, t), &is, iota);
  free(iota);
  if (st) return OOM();
  if ((st = onnx_emit(c, DPC_OP_CONSTANT, NULL, 0, mark, 0, &iv))) return st;
  tdims[0] = ts.d[0], tdims[1] = 1;
  for (uint32_t i = 1; i < ts.rank; i++) tdims[i + 1] = ts.d[i];
  uint32_t t1 = onnx_reshape(c, t, tdims, xs.rank);
  uint32_t hit = onnx_bin(c, DPC_OP_EQUAL, t1, iv);
  if (onnx_attr(c, "ignore_index")) {
    uint32_t ign =
        onnx_bin(c, DPC_OP_EQUAL, t1, k_(c, t1, (double)onnx_attr_i(c, "ignore_index", 0)));
    hit = where(c, ign, onnx_bin(c, DPC_OP_LESS, t1, t1), hit); /* less(t, t): false */
  }
  uint32_t mw = onnx_cast(c, hit, ft);
  if (weight != DPC_NONE) mw = mul(c, mw, onnx_reshape(c, weight, shape, xs.rank));
  int64_t one = 1;
  uint32_t loss =
      onnx_un(c, DPC_OP_NEG, reduce_node(c, DPC_OP_REDUCE_SUM, mul(c, mw, x), &one, 1, false));
  if (!strcmp(red, "sum")) loss = reduce_node(c, DPC_OP_REDUCE_SUM, loss, NULL, 0, false);
  if (!strcmp(red, "mean"))
    loss = onnx_bin(c, DPC_OP_DIV, reduce_node(c, DPC_OP_REDUCE_SUM, loss, NULL, 0, false),
                    reduce_node(c, DPC_OP_REDUCE_SUM, mw, NULL, 0, false));
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

/* Range of inputs known at import (constants, or the values dpc runs with). */
static dpc_status imp_range(onnx_ctx *c) {
  const onnx_const *a = onnx_in_known(c, 0), *b = onnx_in_known(c, 1), *d = onnx_in_known(c, 2);
  if (!a || !b || !d)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a Range whose bounds are computed at run time");
  onnx_const y;
  if (!onnx_fold_range(a, b, d, &y))
    return onnx_fail(c, DPC_ERR_INVALID,
                     "Range needs three scalars of one type and a non-zero delta");
  return onnx_def_const(c, 0, &y);
}

static const struct {
  const char *name;
  onnx_import_fn fn;
} composed[] = {
    {"And", imp_and},
    {"ArgMax", imp_argmax},
    {"ArgMin", imp_argmin},
    {"Ceil", imp_ceil},
    {"DepthToSpace", imp_depth_to_space},
    {"Elu", imp_elu},
    {"GatherElements", imp_gather_elements},
    {"GreaterOrEqual", imp_greater_equal},
    {"HardSigmoid", imp_hard_sigmoid},
    {"InstanceNormalization", imp_instance_norm},
    {"IsInf", imp_is_inf},
    {"LessOrEqual", imp_less_equal},
    {"Mean", imp_mean},
    {"NegativeLogLikelihoodLoss", imp_nll_loss},
    {"Or", imp_or},
    {"Pad", imp_pad},
    {"PRelu", imp_prelu},
    {"Range", imp_range},
    {"ReduceL1", imp_reduce_l1},
    {"ReduceL2", imp_reduce_l2},
    {"ReduceLogSum", imp_reduce_log_sum},
    {"ReduceLogSumExp", imp_reduce_log_sum_exp},
    {"ReduceSumSquare", imp_reduce_sum_square},
    {"Selu", imp_selu},
    {"Shrink", imp_shrink},
    {"SoftmaxCrossEntropyLoss", imp_softmax_ce_loss},
    {"Softplus", imp_softplus},
    {"Softsign", imp_softsign},
    {"SpaceToDepth", imp_space_to_depth},
    {"ThresholdedRelu", imp_thresholded_relu},
    {"Tile", imp_tile},
    {"Trilu", imp_trilu},
    {"Xor", imp_xor},
};

onnx_import_fn onnx_find_composed(const char *op_type) {
  for (size_t i = 0; i < sizeof composed / sizeof *composed; i++)
    if (!strcmp(composed[i].name, op_type)) return composed[i].fn;
  return NULL;
}
