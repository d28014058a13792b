/*
 * rules_window.c — window geometry and the shape rules of conv2d, the pools, batch_norm,
 * layer_norm, dropout and their gradients. See rules.h.
 */
#include "ir/rules_internal.h"

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

dpc_status dpc_rule_window(dpc_graph *g, uint32_t node, dpc_diag *d) {
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
dpc_status dpc_rule_window_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
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

dpc_status dpc_rule_batch_norm(dpc_graph *g, uint32_t node, dpc_diag *d) {
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

dpc_status dpc_rule_layer_norm(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 0, d))) return st;
  const dpc_shape *x = &IN(0)->shape;
  uint32_t ax = 0;
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
dpc_status dpc_rule_batch_norm_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
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
dpc_status dpc_rule_layer_norm_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 1, d)) || (st = same_type(g, node, 0, 1, d))) return st;
  const dpc_shape *x = &IN(1)->shape;
  uint32_t ax = 0;
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

dpc_status dpc_rule_dropout(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = need_float(g, node, 0, d))) return st;
  double p = dpc_attrs_float(dpc_node_attrs(g, node), "p");
  if (!(p >= 0 && p < 1)) return fail(g, node, d, "p must be in [0, 1), got %g", p);
  set_out(g, node, 0, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}
