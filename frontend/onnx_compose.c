/*
 * onnx_compose.c — ONNX ops that dpc builds from other ops rather than giving them rows of
 * their own: activations (Elu, Selu, HardSigmoid, Softplus, Softsign, ThresholdedRelu, Shrink,
 * PRelu, Ceil), logic (And, Or, Xor, GreaterOrEqual, LessOrEqual, IsInf), reductions (ReduceL1,
 * ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp), Mean, Tile, Pad,
 * InstanceNormalization, DepthToSpace, SpaceToDepth and Range. The ops on positions are in
 * onnx_index.c.
 *
 * Built from differentiable ops, each trains through dpc's ordinary gradients.
 */
#include "frontend/onnx_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(i) onnx_in(c, (i))
#define OOM() onnx_fail(c, DPC_ERR_NOMEM, "out of memory")

/* relu(x) + alpha (e^min(x, 0) - 1): the exponential linear unit, Elu and (scaled) Selu */
static uint32_t elu(onnx_ctx *c, uint32_t x, double alpha) {
  uint32_t m = onnx_bin(c, DPC_OP_MIN, x, onnx_k(c, x, 0));
  uint32_t e = onnx_bin(c, DPC_OP_SUB, onnx_un(c, DPC_OP_EXP, m), onnx_k(c, x, 1));
  return onnx_add(c, onnx_un(c, DPC_OP_RELU, x), onnx_mul(c, onnx_k(c, x, alpha), e));
}

/* ---- activations ---------------------------------------------------------------------------- */

static dpc_status imp_elu(onnx_ctx *c) {
  uint32_t x = IN(0);
  double alpha = onnx_attr_f(c, "alpha", 1);
  if (x == DPC_NONE) return c->d->status;
  return onnx_def(c, 0, elu(c, x, alpha));
}

static dpc_status imp_selu(onnx_ctx *c) {
  uint32_t x = IN(0);
  double alpha = onnx_attr_f(c, "alpha", 1.67326319217681884765625);
  double gamma = onnx_attr_f(c, "gamma", 1.05070102214813232421875);
  if (x == DPC_NONE) return c->d->status;
  return onnx_def(c, 0, onnx_mul(c, onnx_k(c, x, gamma), elu(c, x, alpha)));
}

static dpc_status imp_hard_sigmoid(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t a = onnx_add(c, onnx_mul(c, x, onnx_k(c, x, onnx_attr_f(c, "alpha", 0.2))),
                        onnx_k(c, x, onnx_attr_f(c, "beta", 0.5)));
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
  return onnx_def(c, 0,
                  onnx_add(c, onnx_un(c, DPC_OP_RELU, x),
                           onnx_un(c, DPC_OP_LOG, onnx_add(c, e, onnx_k(c, x, 1)))));
}

static dpc_status imp_softsign(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  return onnx_def(
      c, 0, onnx_bin(c, DPC_OP_DIV, x, onnx_add(c, onnx_un(c, DPC_OP_ABS, x), onnx_k(c, x, 1))));
}

static dpc_status imp_thresholded_relu(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t cond = onnx_bin(c, DPC_OP_GREATER, x, onnx_k(c, x, onnx_attr_f(c, "alpha", 1)));
  return onnx_def(c, 0, onnx_where(c, cond, x, onnx_k(c, x, 0)));
}

static dpc_status imp_shrink(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  double bias = onnx_attr_f(c, "bias", 0), lambd = onnx_attr_f(c, "lambd", 0.5);
  uint32_t hi = onnx_where(c, onnx_bin(c, DPC_OP_GREATER, x, onnx_k(c, x, lambd)),
                           onnx_bin(c, DPC_OP_SUB, x, onnx_k(c, x, bias)), onnx_k(c, x, 0));
  return onnx_def(c, 0,
                  onnx_where(c, onnx_bin(c, DPC_OP_LESS, x, onnx_k(c, x, -lambd)),
                             onnx_add(c, x, onnx_k(c, x, bias)), hi));
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
  uint32_t neg = onnx_bin(c, DPC_OP_MIN, x, onnx_k(c, x, 0));
  return onnx_def(c, 0, onnx_add(c, onnx_un(c, DPC_OP_RELU, x), onnx_mul(c, slope, neg)));
}

static dpc_status imp_ceil(onnx_ctx *c) {
  return onnx_def(c, 0,
                  onnx_un(c, DPC_OP_NEG, onnx_un(c, DPC_OP_FLOOR, onnx_un(c, DPC_OP_NEG, IN(0)))));
}

/* ---- logic -------------------------------------------------------------------------------- */

static dpc_status imp_and(onnx_ctx *c) {
  uint32_t a = IN(0), b = IN(1);
  return onnx_def(c, 0, onnx_where(c, a, b, a));
}
static dpc_status imp_or(onnx_ctx *c) {
  uint32_t a = IN(0), b = IN(1);
  return onnx_def(c, 0, onnx_where(c, a, a, b));
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
  uint32_t p = onnx_bin(c, DPC_OP_EQUAL, x, onnx_k(c, x, INFINITY));
  uint32_t n = onnx_bin(c, DPC_OP_EQUAL, x, onnx_k(c, x, -INFINITY));
  uint32_t none = onnx_bin(c, DPC_OP_LESS, x, x); /* false everywhere, NaN included */
  uint32_t y = pos && neg ? onnx_where(c, p, p, n) : pos ? p : neg ? n : none;
  return onnx_def(c, 0, y);
}

static dpc_status imp_mean(onnx_ctx *c) {
  uint32_t y = IN(0), n = (uint32_t)c->node->n_input;
  for (uint32_t i = 1; i < n && y != DPC_NONE; i++) y = onnx_add(c, y, IN(i));
  if (y == DPC_NONE) return c->d->status;
  return onnx_def(c, 0, n > 1 ? onnx_bin(c, DPC_OP_DIV, y, onnx_k(c, y, n)) : y);
}

/* ---- reductions -------------------------------------------------------------------------------
 */

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
  case R_L1: y = onnx_reduce(c, DPC_OP_REDUCE_SUM, onnx_un(c, DPC_OP_ABS, x), axes, n, keep); break;
  case R_L2:
  case R_SUM_SQUARE:
    y = onnx_reduce(c, DPC_OP_REDUCE_SUM, onnx_mul(c, x, x), axes, n, keep);
    if (k == R_L2) y = onnx_un(c, DPC_OP_SQRT, y);
    break;
  case R_LOG_SUM:
    y = onnx_un(c, DPC_OP_LOG, onnx_reduce(c, DPC_OP_REDUCE_SUM, x, axes, n, keep));
    break;
  default: {
    /* log sum exp(x - m) + m, m the maximum: no overflow */
    uint32_t m = onnx_reduce(c, DPC_OP_REDUCE_MAX, x, axes, n, true);
    uint32_t s = onnx_reduce(c, DPC_OP_REDUCE_SUM,
                             onnx_un(c, DPC_OP_EXP, onnx_bin(c, DPC_OP_SUB, x, m)), axes, n, true);
    y = onnx_add(c, onnx_un(c, DPC_OP_LOG, s), m);
    if (!keep) y = onnx_reduce(c, DPC_OP_REDUCE_MAX, y, axes, n, false); /* drops the 1s */
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
    x = onnx_concat(c, xs, (uint32_t)rep[a], a);
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
      x = onnx_slice(c, x, a, lo < 0 ? -lo : 0, hi < 0 ? dim + hi : dim, 1);
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
      if (lo) parts[np++] = onnx_filled(c, onnx_dtype_of(c, x), &s, value);
      parts[np++] = x;
      s.d[a] = hi;
      if (hi) parts[np++] = onnx_filled(c, onnx_dtype_of(c, x), &s, value);
    } else if (reflect) {
      if (lo) parts[np++] = onnx_slice(c, x, a, lo, 0, -1);
      parts[np++] = x;
      /* an end below 0 must not read as "from the back": -dim-1 is before the first */
      if (hi)
        parts[np++] = onnx_slice(c, x, a, dim - 2, dim - 2 - hi < 0 ? -dim - 1 : dim - 2 - hi, -1);
    } else {
      for (int64_t i = 0; i < lo; i++) parts[np++] = onnx_slice(c, x, a, 0, 1, 1);
      parts[np++] = x;
      for (int64_t i = 0; i < hi; i++) parts[np++] = onnx_slice(c, x, a, dim - 1, dim, 1);
    }
    x = onnx_concat(c, parts, np, a);
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
  uint32_t mean, dev, inv;
  onnx_moments(c, x, axes, (int)s.rank - 2, onnx_attr_f(c, "epsilon", 1e-5), &mean, &dev, &inv);
  uint32_t y = onnx_mul(c, onnx_mul(c, dev, inv), onnx_reshape(c, scale, cs, s.rank));
  return onnx_def(c, 0, onnx_add(c, y, onnx_reshape(c, bias, cs, s.rank)));
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
    return onnx_def(c, 0,
                    onnx_reshape(c, onnx_transpose(c, onnx_reshape(c, x, d6, 6), p, 6), o, 4));
  }
  if (h % b || w % b) return onnx_fail(c, DPC_ERR_INVALID, "H and W must divide by blocksize");
  int64_t d6[6] = {n, ch, h / b, b, w / b, b}, p[6] = {0, 3, 5, 1, 2, 4};
  int64_t o[4] = {n, ch * b * b, h / b, w / b};
  return onnx_def(c, 0, onnx_reshape(c, onnx_transpose(c, onnx_reshape(c, x, d6, 6), p, 6), o, 4));
}
static dpc_status imp_depth_to_space(onnx_ctx *c) {
  return depth_space(c, true);
}
static dpc_status imp_space_to_depth(onnx_ctx *c) {
  return depth_space(c, false);
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

static const onnx_op_row composed[] = {
    {"And", imp_and},
    {"Ceil", imp_ceil},
    {"DepthToSpace", imp_depth_to_space},
    {"Elu", imp_elu},
    {"GreaterOrEqual", imp_greater_equal},
    {"HardSigmoid", imp_hard_sigmoid},
    {"InstanceNormalization", imp_instance_norm},
    {"IsInf", imp_is_inf},
    {"LessOrEqual", imp_less_equal},
    {"Mean", imp_mean},
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
    {"Softplus", imp_softplus},
    {"Softsign", imp_softsign},
    {"SpaceToDepth", imp_space_to_depth},
    {"ThresholdedRelu", imp_thresholded_relu},
    {"Tile", imp_tile},
    {"Xor", imp_xor},
};

const onnx_op_row *onnx_find_composed(const char *op_type) {
  for (size_t i = 0; i < sizeof composed / sizeof *composed; i++)
    if (!strcmp(composed[i].name, op_type)) return &composed[i];
  return NULL;
}
