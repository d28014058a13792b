/*
 * onnx_nn.c — ONNX layers onto dpc: Conv and the pools (1-D ones run as 2-D with a height of
 * 1), BatchNormalization, LayerNormalization, Gemm, MatMul and Dropout.
 */
#include "frontend/onnx_nn.h"

#include <stdlib.h>
#include <string.h>

#define IN(i) onnx_in(c, (i))
#define OOM() onnx_fail(c, DPC_ERR_NOMEM, "out of memory")

/* ---- windows -------------------------------------------------------------------------------- */

/* A window op over x (and weights w for Conv), from the node's ONNX attributes. */
static dpc_status window(onnx_ctx *c, dpc_op op, uint32_t x, uint32_t w, uint32_t *out) {
  if (x == DPC_NONE || (op == DPC_OP_CONV2D && w == DPC_NONE)) return c->d->status;
  dpc_shape xs = c->g->values[x].shape;
  if (xs.rank < 3 || xs.rank > 4)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED,
                     "%u-D %s: dpc's convolutions and pools are 1-D and 2-D",
                     xs.rank < 2 ? 0 : xs.rank - 2, c->node->op_type);
  uint32_t sp = xs.rank - 2;
  for (uint32_t i = 1; i < xs.rank; i++)
    if (DPC_DIM_IS_SYM(xs.d[i]))
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "only the batch dimension may be symbolic");
  int64_t k[2] = {1, 1}, st[2] = {1, 1}, dil[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
  int64_t v[8];
  int n;
  if (op == DPC_OP_CONV2D) {
    const dpc_shape *ws = &c->g->values[w].shape;
    if (ws->rank != xs.rank)
      return onnx_fail(c, DPC_ERR_INVALID, "weights of rank %u for an input of rank %u", ws->rank,
                       xs.rank);
    for (uint32_t i = 0; i < sp; i++) k[i] = ws->d[2 + i];
  } else {
    if ((n = onnx_attr_ints(c, "kernel_shape", v, 8)) != (int)sp)
      return onnx_fail(c, DPC_ERR_INVALID, "kernel_shape must have %u entries", sp);
    for (uint32_t i = 0; i < sp; i++) k[i] = v[i];
  }
  if ((n = onnx_attr_ints(c, "strides", v, 8)) >= 0) {
    if (n != (int)sp) return onnx_fail(c, DPC_ERR_INVALID, "strides must have %u entries", sp);
    for (uint32_t i = 0; i < sp; i++) st[i] = v[i];
  }
  if ((n = onnx_attr_ints(c, "dilations", v, 8)) >= 0) {
    if (n != (int)sp) return onnx_fail(c, DPC_ERR_INVALID, "dilations must have %u entries", sp);
    for (uint32_t i = 0; i < sp; i++) dil[i] = v[i];
  }
  if (op == DPC_OP_AVG_POOL2D && (dil[0] != 1 || dil[1] != 1))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "AveragePool with dilations");
  char ap[32];
  onnx_attr_s(c, "auto_pad", "NOTSET", ap, sizeof ap);
  if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    for (uint32_t i = 0; i < sp; i++) {
      int64_t in = xs.d[2 + i], s = st[i] > 0 ? st[i] : 1;
      int64_t o = (in + s - 1) / s;
      int64_t total = (o - 1) * s + (k[i] - 1) * dil[i] + 1 - in;
      if (total < 0) total = 0;
      int64_t lo = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
      pads[i] = lo, pads[sp + i] = total - lo;
    }
  } else if (!strcmp(ap, "NOTSET")) {
    if ((n = onnx_attr_ints(c, "pads", v, 8)) >= 0) {
      if (n != (int)(2 * sp))
        return onnx_fail(c, DPC_ERR_INVALID, "pads must have %u entries", 2 * sp);
      for (uint32_t i = 0; i < 2 * sp; i++) pads[i] = v[i];
    }
  } else if (strcmp(ap, "VALID")) {
    return onnx_fail(c, DPC_ERR_INVALID, "unknown auto_pad '%s'", ap);
  }
  /* 1-D as 2-D: a height of 1 with no padding, stride or dilation along it */
  int64_t p4[4], s2[2], d2[2], k2[2];
  if (sp == 1) {
    int64_t x4[4] = {xs.d[0], xs.d[1], 1, xs.d[2]};
    x = onnx_reshape(c, x, x4, 4);
    if (op == DPC_OP_CONV2D) {
      const dpc_shape *ws = &c->g->values[w].shape;
      int64_t w4[4] = {ws->d[0], ws->d[1], 1, ws->d[2]};
      w = onnx_reshape(c, w, w4, 4);
    }
    p4[0] = 0, p4[1] = pads[0], p4[2] = 0, p4[3] = pads[1];
    s2[0] = 1, s2[1] = st[0], d2[0] = 1, d2[1] = dil[0], k2[0] = 1, k2[1] = k[0];
  } else {
    memcpy(p4, pads, sizeof p4);
    memcpy(s2, st, sizeof s2), memcpy(d2, dil, sizeof d2), memcpy(k2, k, sizeof k2);
  }
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  dpc_status s = dpc_graph_attr_ints(c->g, "stride", s2, 2);
  if (!s) s = dpc_graph_attr_ints(c->g, "pad", p4, 4);
  if (!s && op != DPC_OP_AVG_POOL2D) s = dpc_graph_attr_ints(c->g, "dilation", d2, 2);
  if (!s && op == DPC_OP_CONV2D) s = dpc_graph_attr_int(c->g, "groups", onnx_attr_i(c, "group", 1));
  if (!s && op != DPC_OP_CONV2D) {
    s = dpc_graph_attr_ints(c->g, "kernel", k2, 2);
    if (!s) s = dpc_graph_attr_int(c->g, "ceil_mode", onnx_attr_i(c, "ceil_mode", 0) != 0);
  }
  if (!s && op == DPC_OP_AVG_POOL2D)
    s = dpc_graph_attr_int(c->g, "count_include_pad", onnx_attr_i(c, "count_include_pad", 0) != 0);
  if (s) return OOM();
  uint32_t in[2] = {x, w};
  if ((s = onnx_emit(c, op, in, op == DPC_OP_CONV2D ? 2 : 1, mark, 0, &y))) return s;
  if (sp == 1) {
    const dpc_shape *ys = &c->g->values[y].shape;
    int64_t y3[3] = {ys->d[0], ys->d[1], ys->d[3]};
    y = onnx_reshape(c, y, y3, 3);
  }
  *out = y;
  return y == DPC_NONE ? c->d->status : DPC_OK;
}

/* Conv: the bias is added per output channel. */
dpc_status dpc_onnx_imp_conv(onnx_ctx *c) {
  uint32_t y;
  dpc_status st = window(c, DPC_OP_CONV2D, IN(0), IN(1), &y);
  if (st) return st;
  if (onnx_has_in(c, 2)) {
    uint32_t b = IN(2);
    if (b == DPC_NONE) return c->d->status;
    const dpc_shape *ys = &c->g->values[y].shape;
    int64_t dims[DPC_MAX_RANK] = {1, ys->d[1]};
    for (uint32_t i = 2; i < ys->rank; i++) dims[i] = 1;
    y = onnx_bin(c, DPC_OP_ADD, y, onnx_reshape(c, b, dims, ys->rank));
  }
  return onnx_def(c, 0, y);
}

/* ConvTranspose: the input gradient of the convolution it undoes (conv2d_grad_input), whose
 * geometry gives the output size; that op takes its output's shape from a value, here a zero
 * constant, so the batch must be known. 1-D runs as 2-D with a height of 1. */
dpc_status dpc_onnx_imp_conv_transpose(onnx_ctx *c) {
  uint32_t x = IN(0), w = IN(1);
  if (x == DPC_NONE || w == DPC_NONE) return c->d->status;
  const dpc_shape xs = c->g->values[x].shape, ws = c->g->values[w].shape;
  if ((xs.rank != 3 && xs.rank != 4) || ws.rank != xs.rank)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "%u-D ConvTranspose: dpc's are 1-D and 2-D",
                     xs.rank >= 2 ? xs.rank - 2 : 0);
  if (!dpc_shape_is_concrete(&xs) || !dpc_shape_is_concrete(&ws))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "ConvTranspose of symbolic shape");
  uint32_t sp = xs.rank - 2;
  int64_t group = onnx_attr_i(c, "group", 1);
  int64_t st[2] = {1, 1}, dil[2] = {1, 1}, opad[2] = {0, 0}, pads[4] = {0, 0, 0, 0}, v[8], os[2];
  int n;
  if ((n = onnx_attr_ints(c, "strides", v, 8)) >= 0)
    for (uint32_t i = 0; i < sp && i < (uint32_t)n; i++) st[i] = v[i];
  if ((n = onnx_attr_ints(c, "dilations", v, 8)) >= 0)
    for (uint32_t i = 0; i < sp && i < (uint32_t)n; i++) dil[i] = v[i];
  if ((n = onnx_attr_ints(c, "output_padding", v, 8)) >= 0)
    for (uint32_t i = 0; i < sp && i < (uint32_t)n; i++) opad[i] = v[i];
  if ((n = onnx_attr_ints(c, "pads", v, 8)) >= 0) {
    if (n != (int)(2 * sp))
      return onnx_fail(c, DPC_ERR_INVALID, "pads must have %u entries", 2 * sp);
    for (uint32_t i = 0; i < 2 * sp; i++) pads[i] = v[i];
  }
  char ap[32];
  onnx_attr_s(c, "auto_pad", "NOTSET", ap, sizeof ap);
  int nos = onnx_attr_ints(c, "output_shape", v, 8);
  bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
  for (uint32_t i = 0; i < sp; i++) {
    int64_t in = xs.d[2 + i], k = ws.d[2 + i],
            full = st[i] * (in - 1) + opad[i] + (k - 1) * dil[i] + 1;
    if (nos >= 0 || same) {
      /* the padding that gives the asked-for size, split as ONNX splits it */
      os[i] = nos >= 0 ? v[nos == (int)sp ? i : 2 + i] : in * st[i];
      int64_t total = full - os[i], half = total >= 0 ? total / 2 : -((1 - total) / 2);
      bool upper = !strcmp(ap, "SAME_UPPER"); /* half: total / 2 rounded down, as ONNX */
      pads[i] = upper ? half : total - half;
      pads[sp + i] = total - pads[i];
      /* a size past the full one (negative end padding) is zeros there, as output_padding */
      if (pads[sp + i] < 0) pads[sp + i] = 0;
    } else {
      os[i] = full - pads[i] - pads[sp + i];
    }
    if (os[i] < 1 || pads[i] < 0 || pads[sp + i] < 0 || opad[i] < 0 || opad[i] >= st[i])
      return onnx_fail(c, DPC_ERR_INVALID, "ConvTranspose sizes do not fit together");
  }
  int64_t cout = ws.d[1] * group;
  dpc_shape like = {.rank = 4, .d = {xs.d[0], cout, sp == 2 ? os[0] : 1, os[sp - 1]}};
  int64_t p4[4], s2[2], d2[2];
  if (sp == 1) {
    int64_t x4[4] = {xs.d[0], xs.d[1], 1, xs.d[2]}, w4[4] = {ws.d[0], ws.d[1], 1, ws.d[2]};
    x = onnx_reshape(c, x, x4, 4);
    w = onnx_reshape(c, w, w4, 4);
    p4[0] = 0, p4[1] = pads[0], p4[2] = 0, p4[3] = pads[1];
    s2[0] = 1, s2[1] = st[0], d2[0] = 1, d2[1] = dil[0];
  } else {
    memcpy(p4, pads, sizeof p4), memcpy(s2, st, sizeof s2), memcpy(d2, dil, sizeof d2);
  }
  uint32_t z = onnx_filled(c, onnx_dtype_of(c, x == DPC_NONE ? IN(0) : x), &like, 0);
  if (x == DPC_NONE || w == DPC_NONE || z == DPC_NONE) return c->d->status;
  uint32_t in[3] = {x, w, z}, mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_ints(c->g, "stride", s2, 2) || dpc_graph_attr_ints(c->g, "pad", p4, 4) ||
      dpc_graph_attr_ints(c->g, "dilation", d2, 2) || dpc_graph_attr_int(c->g, "groups", group))
    return OOM();
  dpc_status s = onnx_emit(c, DPC_OP_CONV2D_GRAD_INPUT, in, 3, mark, 0, &y);
  if (s) return s;
  if (sp == 1) {
    int64_t y3[3] = {like.d[0], like.d[1], like.d[3]};
    y = onnx_reshape(c, y, y3, 3);
  }
  if (onnx_has_in(c, 2)) {
    uint32_t b = IN(2);
    int64_t dims[DPC_MAX_RANK] = {1, cout, 1, 1};
    y = onnx_bin(c, DPC_OP_ADD, y, onnx_reshape(c, b, dims, xs.rank));
  }
  return onnx_def(c, 0, y);
}

dpc_status dpc_onnx_imp_max_pool(onnx_ctx *c) {
  if (onnx_n_out(c) > 1) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "MaxPool's Indices output");
  if (onnx_attr_i(c, "storage_order", 0))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "MaxPool with storage_order 1");
  uint32_t y;
  dpc_status st = window(c, DPC_OP_MAX_POOL2D, IN(0), DPC_NONE, &y);
  return st ? st : onnx_def(c, 0, y);
}

dpc_status dpc_onnx_imp_avg_pool(onnx_ctx *c) {
  uint32_t y;
  dpc_status st = window(c, DPC_OP_AVG_POOL2D, IN(0), DPC_NONE, &y);
  return st ? st : onnx_def(c, 0, y);
}

/* The global pools reduce every spatial dimension, keeping it as 1. */
static dpc_status global_pool(onnx_ctx *c, dpc_op op) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  uint32_t r = c->g->values[x].shape.rank;
  if (r < 3) return onnx_fail(c, DPC_ERR_INVALID, "input must be [N, C, ...spatial]");
  int64_t axes[DPC_MAX_RANK];
  for (uint32_t i = 2; i < r; i++) axes[i - 2] = i;
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_ints(c->g, "axes", axes, r - 2) || dpc_graph_attr_int(c->g, "keepdims", 1))
    return OOM();
  dpc_status st = onnx_emit(c, op, &x, 1, mark, 0, &y);
  return st ? st : onnx_def(c, 0, y);
}
dpc_status dpc_onnx_imp_global_avg_pool(onnx_ctx *c) {
  return global_pool(c, DPC_OP_REDUCE_MEAN);
}
dpc_status dpc_onnx_imp_global_max_pool(onnx_ctx *c) {
  return global_pool(c, DPC_OP_REDUCE_MAX);
}

/* ---- normalisation -------------------------------------------------------------------------- */

/* BatchNormalization. Unless the node asks for training mode itself, it follows the run's mode
 * (inference for `dpc run`, training under `dpc train`), and running statistics held in
 * initializers become state updated after each training step. */
dpc_status dpc_onnx_imp_batch_norm(onnx_ctx *c) {
  uint32_t in[5];
  for (uint32_t i = 0; i < 5; i++)
    if ((in[i] = IN(i)) == DPC_NONE) return c->d->status;
  uint32_t nout = onnx_n_out(c);
  bool training = c->opset >= 14 ? onnx_attr_i(c, "training_mode", 0) != 0 : nout > 1;
  if (nout > 3) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "BatchNormalization's saved statistics");
  if (c->opset < 9 && onnx_attr_i(c, "spatial", 1) == 0)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "BatchNormalization with spatial=0");
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_float(c->g, "epsilon", onnx_attr_f(c, "epsilon", 1e-5)) ||
      dpc_graph_attr_float(c->g, "momentum", onnx_attr_f(c, "momentum", 0.9)) ||
      (training && dpc_graph_attr_int(c->g, "training", 1)))
    return OOM();
  dpc_status st = onnx_emit(c, DPC_OP_BATCH_NORM, in, 5, mark, 0, &y);
  if (st) return st;
  for (uint32_t k = 0; k < 3 && !st; k++) st = onnx_def(c, k, y + k);
  for (uint32_t k = 1; k < 3 && !st; k++) {
    const dpc_node *src = &c->g->nodes[c->g->values[in[2 + k]].node];
    if (src->op != DPC_OP_STATE) continue;
    bool seen = false;
    for (uint32_t u = 0; u < c->g->n_updates; u++) seen |= c->g->updates[u].target == in[2 + k];
    if (seen) continue; /* statistics shared by two nodes: the first one updates them */
    dpc_diag tmp;
    dpc_diag_init(&tmp);
    st = dpc_graph_add_update(c->g, in[2 + k], y + k, (dpc_loc){0}, &tmp);
    if (st) {
      char *m = dpc_diag_render(&tmp);
      onnx_fail(c, st, "%s", m ? m : "cannot update the running statistics");
      free(m);
    }
    dpc_diag_free(&tmp);
  }
  return st;
}

/* LayerNormalization; the optional Mean and InvStdDev outputs are computed beside it. */
dpc_status dpc_onnx_imp_layer_norm(onnx_ctx *c) {
  uint32_t x = IN(0), scale = IN(1);
  if (x == DPC_NONE || scale == DPC_NONE) return c->d->status;
  uint32_t in[3] = {x, scale, DPC_NONE}, nin = 2;
  if (onnx_has_in(c, 2)) {
    if ((in[2] = IN(2)) == DPC_NONE) return c->d->status;
    nin = 3;
  }
  int64_t r = c->g->values[x].shape.rank, axis = onnx_attr_i(c, "axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return onnx_fail(c, DPC_ERR_INVALID, "axis is out of range");
  double eps = onnx_attr_f(c, "epsilon", 1e-5);
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_int(c->g, "axis", axis) || dpc_graph_attr_float(c->g, "epsilon", eps))
    return OOM();
  dpc_status st = onnx_emit(c, DPC_OP_LAYER_NORM, in, nin, mark, 0, &y);
  if (st || (st = onnx_def(c, 0, y)) || onnx_n_out(c) < 2) return st;
  int64_t axes[DPC_MAX_RANK];
  for (int64_t i = axis; i < r; i++) axes[i - axis] = i;
  uint32_t mean, var;
  mark = dpc_graph_attr_mark(c->g);
  if (dpc_graph_attr_ints(c->g, "axes", axes, (uint32_t)(r - axis)) ||
      dpc_graph_attr_int(c->g, "keepdims", 1))
    return OOM();
  if ((st = onnx_emit(c, DPC_OP_REDUCE_MEAN, &x, 1, mark, 0, &mean))) return st;
  uint32_t dev = onnx_bin(c, DPC_OP_SUB, x, mean);
  uint32_t sq = onnx_bin(c, DPC_OP_MUL, dev, dev);
  mark = dpc_graph_attr_mark(c->g);
  if (dpc_graph_attr_ints(c->g, "axes", axes, (uint32_t)(r - axis)) ||
      dpc_graph_attr_int(c->g, "keepdims", 1))
    return OOM();
  if ((st = onnx_emit(c, DPC_OP_REDUCE_MEAN, &sq, 1, mark, 0, &var))) return st;
  dpc_dtype t = c->g->values[x].dtype;
  uint32_t inv = onnx_un(c, DPC_OP_RSQRT, onnx_bin(c, DPC_OP_ADD, var, onnx_scalar(c, t, eps)));
  if ((st = onnx_def(c, 1, mean))) return st;
  return onnx_n_out(c) > 2 ? onnx_def(c, 2, inv) : DPC_OK;
}

/* ---- dense layers -----------------------------------------------------------------------------
 */

/* Gemm: alpha * A' B' + beta * C. */
dpc_status dpc_onnx_imp_gemm(onnx_ctx *c) {
  uint32_t in[2] = {IN(0), IN(1)}, mark = dpc_graph_attr_mark(c->g), y;
  if (in[0] == DPC_NONE || in[1] == DPC_NONE) return c->d->status;
  if (dpc_graph_attr_int(c->g, "transpose_a", onnx_attr_i(c, "transA", 0) != 0) ||
      dpc_graph_attr_int(c->g, "transpose_b", onnx_attr_i(c, "transB", 0) != 0))
    return OOM();
  dpc_status st = onnx_emit(c, DPC_OP_MATMUL, in, 2, mark, 0, &y);
  if (st) return st;
  dpc_dtype t = c->g->values[y].dtype;
  double alpha = onnx_attr_f(c, "alpha", 1), beta = onnx_attr_f(c, "beta", 1);
  if (alpha != 1) y = onnx_bin(c, DPC_OP_MUL, y, onnx_scalar(c, t, alpha));
  if (onnx_has_in(c, 2) && beta != 0) {
    uint32_t b = IN(2);
    if (beta != 1) b = onnx_bin(c, DPC_OP_MUL, b, onnx_scalar(c, t, beta));
    y = onnx_bin(c, DPC_OP_ADD, y, b);
  }
  return onnx_def(c, 0, y);
}

dpc_status dpc_onnx_imp_matmul(onnx_ctx *c) {
  return onnx_def(c, 0, onnx_bin(c, DPC_OP_MATMUL, IN(0), IN(1)));
}

/* ---- dropout ----------------------------------------------------------------------------------
 */

/* Dropout: in training mode when the node says so, otherwise it follows the run's mode (it
 * drops under `dpc train`, passes through under `dpc run`). The mask output is all true where
 * nothing is dropped. */
dpc_status dpc_onnx_imp_dropout(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  double ratio = c->opset >= 12 ? 0.5 : onnx_attr_f(c, "ratio", 0.5);
  int training = -1; /* -1: follow the run */
  if (c->opset >= 12 && onnx_has_in(c, 1)) {
    const onnx_const *k = onnx_in_known(c, 1);
    if (!k || dpc_tensor_numel(&k->t) != 1)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a Dropout ratio computed at run time");
    ratio = dpc_tload(&k->t, 0);
  }
  if (c->opset >= 12 && onnx_has_in(c, 2)) {
    const onnx_const *k = onnx_in_known(c, 2);
    if (!k || dpc_tensor_numel(&k->t) != 1)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a Dropout training_mode computed at run time");
    training = dpc_tload(&k->t, 0) != 0;
  }
  if (c->opset < 7 && onnx_attr_i(c, "is_test", 0)) training = 0;
  uint32_t y = x;
  if (ratio != 0 && training != 0) {
    uint32_t mark = dpc_graph_attr_mark(c->g);
    if (dpc_graph_attr_float(c->g, "p", ratio) ||
        (onnx_attr(c, "seed") && dpc_graph_attr_int(c->g, "seed", onnx_attr_i(c, "seed", 0))) ||
        (training > 0 && dpc_graph_attr_int(c->g, "training", 1)))
      return OOM();
    dpc_status st = onnx_emit(c, DPC_OP_DROPOUT, &x, 1, mark, 0, &y);
    if (st) return st;
  }
  dpc_status st = onnx_def(c, 0, y);
  if (st || onnx_n_out(c) < 2) return st;
  if (y != x) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "the mask of a Dropout that may drop");
  const dpc_shape *s = &c->g->values[x].shape;
  if (!dpc_shape_is_concrete(s))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a Dropout mask of symbolic shape");
  onnx_const k = {.t = {.dtype = DPC_BOOL, .shape = *s}};
  int64_t n = dpc_shape_numel(s);
  if (!(k.t.data = malloc((size_t)(n ? n : 1)))) return OOM();
  memset(k.t.data, 1, (size_t)n);
  return onnx_def_const(c, 1, &k);
}
