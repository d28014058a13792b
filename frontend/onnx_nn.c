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

/* An `ints` attribute of one entry per spatial axis (`per` of them) into out, which keeps its
 * defaults when the attribute is absent. */
static dpc_status spatial_ints(onnx_ctx *c, const char *name, uint32_t per, int64_t *out) {
  int64_t v[8];
  int n = onnx_attr_ints(c, name, v, 8);
  if (n < 0) return c->d->status;
  if (n != (int)per) return onnx_fail(c, DPC_ERR_INVALID, "%s must have %u entries", name, per);
  memcpy(out, v, per * sizeof *out);
  return DPC_OK;
}

/* 1-D windows run as 2-D with a height of 1: [a, b, L] -> [a, b, 1, L] (inputs and weights),
 * and back for the result. */
static uint32_t lift_1d(onnx_ctx *c, uint32_t v) {
  if (v == DPC_NONE) return DPC_NONE;
  const dpc_shape *s = &c->g->values[v].shape;
  int64_t d4[4] = {s->d[0], s->d[1], 1, s->d[2]};
  return onnx_reshape(c, v, d4, 4);
}
static uint32_t drop_1d(onnx_ctx *c, uint32_t v) {
  if (v == DPC_NONE) return DPC_NONE;
  const dpc_shape *s = &c->g->values[v].shape;
  int64_t d3[3] = {s->d[0], s->d[1], s->d[3]};
  return onnx_reshape(c, v, d3, 3);
}

/* A window's geometry over `sp` spatial axes as dpc's 2-D attributes: the height of a 1-D
 * window is 1, with stride 1, dilation 1 and no padding; pads are ONNX's [begins, ends]. k may
 * be NULL (the weights give the kernel). */
typedef struct geom2d {
  int64_t pad[4], stride[2], dil[2], kernel[2];
} geom2d;
static geom2d to_2d(uint32_t sp, const int64_t *pads, const int64_t *st, const int64_t *dil,
                    const int64_t *k) {
  static const int64_t ones[2] = {1, 1};
  if (!k) k = ones;
  if (sp == 2)
    return (geom2d){
        {pads[0], pads[1], pads[2], pads[3]}, {st[0], st[1]}, {dil[0], dil[1]}, {k[0], k[1]}};
  return (geom2d){{0, pads[0], 0, pads[1]}, {1, st[0]}, {1, dil[0]}, {1, k[0]}};
}

/* y plus a per-channel bias from input i, when the node has one (Conv, ConvTranspose). */
static uint32_t add_channel_bias(onnx_ctx *c, uint32_t y, uint32_t i) {
  if (y == DPC_NONE || !onnx_has_in(c, i)) return y;
  uint32_t r = c->g->values[y].shape.rank;
  int64_t dims[DPC_MAX_RANK] = {1, c->g->values[y].shape.d[1]};
  for (uint32_t k = 2; k < r; k++) dims[k] = 1;
  return onnx_add(c, y, onnx_reshape(c, IN(i), dims, r));
}

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
  dpc_status s;
  if (op == DPC_OP_CONV2D) {
    const dpc_shape *ws = &c->g->values[w].shape;
    if (ws->rank != xs.rank)
      return onnx_fail(c, DPC_ERR_INVALID, "weights of rank %u for an input of rank %u", ws->rank,
                       xs.rank);
    for (uint32_t i = 0; i < sp; i++) k[i] = ws->d[2 + i];
  } else if (!onnx_attr(c, "kernel_shape")) {
    return onnx_fail(c, DPC_ERR_INVALID, "kernel_shape must have %u entries", sp);
  } else if ((s = spatial_ints(c, "kernel_shape", sp, k))) {
    return s;
  }
  if ((s = spatial_ints(c, "strides", sp, st)) || (s = spatial_ints(c, "dilations", sp, dil)))
    return s;
  if (op == DPC_OP_AVG_POOL2D && (dil[0] != 1 || dil[1] != 1))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "AveragePool with dilations");
  char ap[32];
  onnx_attr_s(c, "auto_pad", "NOTSET", ap, sizeof ap);
  if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    for (uint32_t i = 0; i < sp; i++) {
      int64_t in = xs.d[2 + i], stride = st[i] > 0 ? st[i] : 1;
      int64_t o = (in + stride - 1) / stride;
      int64_t total = (o - 1) * stride + (k[i] - 1) * dil[i] + 1 - in;
      if (total < 0) total = 0;
      int64_t lo = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
      pads[i] = lo, pads[sp + i] = total - lo;
    }
  } else if (!strcmp(ap, "NOTSET")) {
    if ((s = spatial_ints(c, "pads", 2 * sp, pads))) return s;
  } else if (strcmp(ap, "VALID")) {
    return onnx_fail(c, DPC_ERR_INVALID, "unknown auto_pad '%s'", ap);
  }
  if (sp == 1) x = lift_1d(c, x), w = op == DPC_OP_CONV2D ? lift_1d(c, w) : w;
  geom2d g = to_2d(sp, pads, st, dil, k);
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  s = dpc_graph_attr_ints(c->g, "stride", g.stride, 2);
  if (!s) s = dpc_graph_attr_ints(c->g, "pad", g.pad, 4);
  if (!s && op != DPC_OP_AVG_POOL2D) s = dpc_graph_attr_ints(c->g, "dilation", g.dil, 2);
  if (!s && op == DPC_OP_CONV2D) s = dpc_graph_attr_int(c->g, "groups", onnx_attr_i(c, "group", 1));
  if (!s && op != DPC_OP_CONV2D) {
    s = dpc_graph_attr_ints(c->g, "kernel", g.kernel, 2);
    if (!s) s = dpc_graph_attr_int(c->g, "ceil_mode", onnx_attr_i(c, "ceil_mode", 0) != 0);
  }
  if (!s && op == DPC_OP_AVG_POOL2D)
    s = dpc_graph_attr_int(c->g, "count_include_pad", onnx_attr_i(c, "count_include_pad", 0) != 0);
  if (s) return OOM();
  uint32_t in[2] = {x, w};
  if ((s = onnx_emit(c, op, in, op == DPC_OP_CONV2D ? 2 : 1, mark, 0, &y))) return s;
  *out = sp == 1 ? drop_1d(c, y) : y;
  return *out == DPC_NONE ? c->d->status : DPC_OK;
}

/* Conv: the bias is added per output channel. */
dpc_status dpc_onnx_imp_conv(onnx_ctx *c) {
  uint32_t y;
  dpc_status st = window(c, DPC_OP_CONV2D, IN(0), IN(1), &y);
  return st ? st : onnx_def(c, 0, add_channel_bias(c, y, 2));
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
  dpc_status s;
  if ((s = spatial_ints(c, "strides", sp, st)) || (s = spatial_ints(c, "dilations", sp, dil)) ||
      (s = spatial_ints(c, "output_padding", sp, opad)) ||
      (s = spatial_ints(c, "pads", 2 * sp, pads)))
    return s;
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
  dpc_shape like = {.rank = 4, .d = {xs.d[0], ws.d[1] * group, sp == 2 ? os[0] : 1, os[sp - 1]}};
  uint32_t z = onnx_filled(c, onnx_dtype_of(c, x), &like, 0);
  if (sp == 1) x = lift_1d(c, x), w = lift_1d(c, w);
  if (x == DPC_NONE || w == DPC_NONE || z == DPC_NONE) return c->d->status;
  geom2d g = to_2d(sp, pads, st, dil, NULL);
  uint32_t in[3] = {x, w, z}, mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_ints(c->g, "stride", g.stride, 2) ||
      dpc_graph_attr_ints(c->g, "pad", g.pad, 4) ||
      dpc_graph_attr_ints(c->g, "dilation", g.dil, 2) || dpc_graph_attr_int(c->g, "groups", group))
    return OOM();
  dpc_status e = onnx_emit(c, DPC_OP_CONV2D_GRAD_INPUT, in, 3, mark, 0, &y);
  if (e) return e;
  if (sp == 1) y = drop_1d(c, y);
  return onnx_def(c, 0, add_channel_bias(c, y, 2));
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
  return onnx_def(c, 0, onnx_reduce(c, op, x, axes, (int)r - 2, true));
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
  uint32_t mean, dev, inv;
  onnx_moments(c, x, axes, (int)(r - axis), eps, &mean, &dev, &inv);
  if ((st = onnx_def(c, 1, mean))) return st;
  return onnx_n_out(c) > 2 ? onnx_def(c, 2, inv) : DPC_OK;
}

/* ---- dense layers -----------------------------------------------------------------------------
 */

/* Gemm: alpha * A' B' + beta * C. */
dpc_status dpc_onnx_imp_gemm(onnx_ctx *c) {
  bool ta = onnx_attr_i(c, "transA", 0) != 0, tb = onnx_attr_i(c, "transB", 0) != 0;
  if (onnx_in_flipped(c, 1)) tb = false; /* the importer holds B transposed already */
  uint32_t y = onnx_matmul(c, IN(0), IN(1), ta, tb);
  if (y == DPC_NONE) return c->d->status;
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
