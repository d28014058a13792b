/*
 * onnx_resize.c — ONNX Resize (and the older Upsample) as gathers: for every resized axis the
 * importer works out, from the sizes it knows, which input positions each output position reads
 * and with what weight (one tap for nearest, two for linear, four for cubic), and the graph
 * gathers those rows and sums them weighted, one axis after another. Exact to ONNX's formulas,
 * and trainable (gather has a gradient).
 */
#include "frontend/onnx_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(i) onnx_in(c, (i))
#define OOM() onnx_fail(c, DPC_ERR_NOMEM, "out of memory")

typedef struct resize_opts {
  char mode[16], coord[32], nearest[32];
  double cubic_a;
  bool exclude_outside;
} resize_opts;

/* Where output position x falls in the input, by ONNX's coordinate_transformation_mode. `out` is
 * the output length before rounding (in * scale), which is what ONNX's formulas take. */
static double source_coord(const resize_opts *o, double x, int64_t in, double out, double scale) {
  if (!strcmp(o->coord, "align_corners")) return out == 1 ? 0 : x * (double)(in - 1) / (out - 1);
  if (!strcmp(o->coord, "asymmetric")) return x / scale;
  if (!strcmp(o->coord, "tf_half_pixel_for_nn")) return (x + 0.5) / scale;
  if (!strcmp(o->coord, "pytorch_half_pixel")) return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
  return (x + 0.5) / scale - 0.5; /* half_pixel */
}

static int64_t nearest_index(const resize_opts *o, double s) {
  double f = floor(s);
  if (!strcmp(o->nearest, "floor")) return (int64_t)f;
  if (!strcmp(o->nearest, "ceil")) return (int64_t)ceil(s);
  if (s - f == 0.5) return (int64_t)(strcmp(o->nearest, "round_prefer_ceil") ? f : f + 1);
  return (int64_t)floor(s + 0.5);
}

static double cubic_weight(double a, double d) { /* Keys' kernel at distance |d| */
  d = fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

/* The taps of one axis: source rows idx[t * out + x] (as the doubles constants hold) and weights
 * w[t * out + x]. */
static int taps_of(const resize_opts *o, int64_t in, int64_t out, double scale, double *idx,
                   double *w) {
  int taps = !strcmp(o->mode, "nearest") ? 1 : !strcmp(o->mode, "linear") ? 2 : 4;
  for (int64_t x = 0; x < out; x++) {
    double s = source_coord(o, (double)x, in, (double)in * scale, scale), f = floor(s), sum = 0;
    for (int t = 0; t < taps; t++) {
      int64_t i;
      double wt;
      if (taps == 1) {
        i = nearest_index(o, s), wt = 1;
      } else if (taps == 2) {
        i = (int64_t)f + t, wt = t ? s - f : 1 - (s - f);
      } else {
        i = (int64_t)f - 1 + t, wt = cubic_weight(o->cubic_a, s - (double)i);
        if (o->exclude_outside && (i < 0 || i >= in)) wt = 0;
      }
      idx[t * out + x] = (double)(i < 0 ? 0 : i >= in ? in - 1 : i); /* the edges repeat */
      w[t * out + x] = wt;
      sum += wt;
    }
    if (taps == 4 && o->exclude_outside && sum != 0)
      for (int t = 0; t < taps; t++) w[t * out + x] /= sum;
  }
  return taps;
}

/* x resized along one axis from its length to `out`. */
static uint32_t resize_axis(onnx_ctx *c, const resize_opts *o, uint32_t x, uint32_t axis,
                            int64_t out, double scale) {
  const dpc_shape xs = c->g->values[x].shape;
  int64_t in = xs.d[axis];
  double *idx = malloc((size_t)(4 * out) * sizeof *idx), *w = malloc((size_t)(4 * out) * sizeof *w);
  if (!idx || !w) {
    free(idx), free(w);
    return OOM(), DPC_NONE;
  }
  int taps = taps_of(o, in, out, scale, idx, w);
  uint32_t y = DPC_NONE;
  dpc_shape ws = {.rank = xs.rank}, is = {.rank = 1, .d = {out}};
  for (uint32_t i = 0; i < xs.rank; i++) ws.d[i] = i == axis ? out : 1;
  for (int t = 0; t < taps && !c->d->status; t++) {
    uint32_t g = onnx_gather(c, x, onnx_constant(c, DPC_I64, &is, idx + t * out), axis);
    if (taps > 1) g = onnx_mul(c, g, onnx_constant(c, onnx_dtype_of(c, x), &ws, w + t * out));
    y = t ? onnx_add(c, y, g) : g;
  }
  free(idx), free(w);
  return c->d->status ? DPC_NONE : y;
}

/* Resize (opset 10 and later) and Upsample: the output sizes from `sizes` or from `scales`. */
dpc_status dpc_onnx_imp_resize(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape xs = c->g->values[x].shape;
  bool upsample = !strcmp(c->node->op_type, "Upsample");
  resize_opts o = {.cubic_a = onnx_attr_f(c, "cubic_coeff_a", -0.75),
                   .exclude_outside = onnx_attr_i(c, "exclude_outside", 0) != 0};
  onnx_attr_s(c, "mode", "nearest", o.mode, sizeof o.mode);
  /* before opset 11 (and in Upsample) positions map as asymmetric, rounding down */
  bool legacy = upsample || c->opset < 11;
  onnx_attr_s(c, "coordinate_transformation_mode", legacy ? "asymmetric" : "half_pixel", o.coord,
              sizeof o.coord);
  onnx_attr_s(c, "nearest_mode", legacy ? "floor" : "round_prefer_floor", o.nearest,
              sizeof o.nearest);
  if (!strcmp(o.mode, "bilinear")) strcpy(o.mode, "linear"); /* Upsample's old spelling */
  if (strcmp(o.mode, "nearest") && strcmp(o.mode, "linear") && strcmp(o.mode, "cubic"))
    return onnx_fail(c, DPC_ERR_INVALID, "unknown mode '%s'", o.mode);
  if (!strcmp(o.coord, "tf_crop_and_resize"))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "Resize with tf_crop_and_resize");
  double scales[DPC_MAX_RANK];
  int64_t sizes[DPC_MAX_RANK + 1];
  uint32_t si = legacy ? 1 : 2, zi = 3;
  const onnx_const *sk = NULL;
  if (upsample && c->opset < 9) {
    const Onnx__AttributeProto *a = onnx_attr(c, "scales");
    if (!a || a->n_floats != xs.rank)
      return onnx_fail(c, DPC_ERR_INVALID, "scales must have one entry per axis");
    for (uint32_t i = 0; i < xs.rank; i++) scales[i] = a->floats[i];
  } else if (onnx_has_in(c, zi) && !legacy) {
    if (onnx_const_ints(c, zi, sizes, DPC_MAX_RANK + 1, NULL) != (int)xs.rank)
      return c->d->status ? c->d->status
                          : onnx_fail(c, DPC_ERR_INVALID, "sizes must have one entry per axis");
    for (uint32_t i = 0; i < xs.rank; i++) scales[i] = (double)sizes[i] / (double)xs.d[i];
  } else if ((sk = onnx_in_known(c, si)) && dpc_tensor_numel(&sk->t) == (int64_t)xs.rank) {
    for (uint32_t i = 0; i < xs.rank; i++) scales[i] = dpc_tload(&sk->t, i);
  } else {
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "Resize without constant scales or sizes");
  }
  bool by_sizes = onnx_has_in(c, zi) && !legacy;
  for (uint32_t i = 0; i < xs.rank && x != DPC_NONE; i++) {
    if (DPC_DIM_IS_SYM(xs.d[i])) {
      if (scales[i] == 1) continue;
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "resizing a symbolic dimension");
    }
    int64_t out = by_sizes ? sizes[i] : (int64_t)floor((double)xs.d[i] * scales[i]);
    if (!(scales[i] > 0) || out < 1 || out > (1 << 24))
      return onnx_fail(c, DPC_ERR_INVALID, "scale %g gives %lld elements on axis %u", scales[i],
                       (long long)out, i);
    if (out == xs.d[i] && scales[i] == 1) continue;
    x = resize_axis(c, &o, x, i, out, scales[i]);
  }
  return x == DPC_NONE ? c->d->status : onnx_def(c, 0, x);
}
