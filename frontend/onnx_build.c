/*
 * onnx_build.c — small builders the op importers share: one node each (or a cast and a node),
 * with the node's attributes set, returning the new value or DPC_NONE after an error (which the
 * diag holds, naming the ONNX node). A DPC_NONE input passes through, so a chain of builders
 * stops at the first failure and the caller checks once.
 */
#include "frontend/onnx_internal.h"

#include <stdlib.h>

#define OOM() onnx_fail(c, DPC_ERR_NOMEM, "out of memory")

uint32_t onnx_un(onnx_ctx *c, dpc_op op, uint32_t x) {
  uint32_t out;
  return onnx_emit(c, op, &x, 1, dpc_graph_attr_mark(c->g), 0, &out) ? DPC_NONE : out;
}

uint32_t onnx_bin(onnx_ctx *c, dpc_op op, uint32_t a, uint32_t b) {
  uint32_t in[2] = {a, b}, out;
  return onnx_emit(c, op, in, 2, dpc_graph_attr_mark(c->g), 0, &out) ? DPC_NONE : out;
}

uint32_t onnx_reshape(onnx_ctx *c, uint32_t x, const int64_t *dims, uint32_t rank) {
  if (x == DPC_NONE) return DPC_NONE;
  uint32_t mark = dpc_graph_attr_mark(c->g), out;
  if (dpc_graph_attr_shape(c->g, "shape", dims, rank)) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_RESHAPE, &x, 1, mark, 0, &out) ? DPC_NONE : out;
}

uint32_t onnx_cast(onnx_ctx *c, uint32_t x, dpc_dtype t) {
  if (x == DPC_NONE) return DPC_NONE;
  if (c->g->values[x].dtype == t) return x;
  uint32_t mark = dpc_graph_attr_mark(c->g), out;
  if (dpc_graph_attr_dtype(c->g, "dtype", t)) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_CAST, &x, 1, mark, 0, &out) ? DPC_NONE : out;
}

uint32_t onnx_constant(onnx_ctx *c, dpc_dtype t, const dpc_shape *s, const double *v) {
  uint32_t mark = dpc_graph_attr_mark(c->g), out;
  if (dpc_graph_attr_tensor(c->g, "value", t, s, v)) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_CONSTANT, NULL, 0, mark, 0, &out) ? DPC_NONE : out;
}

uint32_t onnx_scalar(onnx_ctx *c, dpc_dtype t, double v) {
  dpc_shape s = {0};
  return onnx_constant(c, t, &s, &v);
}

uint32_t onnx_where(onnx_ctx *c, uint32_t cond, uint32_t a, uint32_t b) {
  uint32_t in[3] = {cond, a, b}, y;
  for (uint32_t i = 0; i < 3; i++)
    if (in[i] == DPC_NONE) return DPC_NONE;
  return onnx_emit(c, DPC_OP_WHERE, in, 3, dpc_graph_attr_mark(c->g), 0, &y) ? DPC_NONE : y;
}

uint32_t onnx_reduce(onnx_ctx *c, dpc_op op, uint32_t x, const int64_t *axes, int n, bool keep) {
  if (x == DPC_NONE) return DPC_NONE;
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if ((n > 0 && dpc_graph_attr_ints(c->g, "axes", axes, (uint32_t)n)) ||
      dpc_graph_attr_int(c->g, "keepdims", keep))
    return OOM(), DPC_NONE;
  return onnx_emit(c, op, &x, 1, mark, 0, &y) ? DPC_NONE : y;
}

uint32_t onnx_filled(onnx_ctx *c, dpc_dtype t, const dpc_shape *s, double v) {
  int64_t n = dpc_shape_numel(s);
  if (!dpc_shape_is_concrete(s) || n > (INT64_C(1) << 24))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a constant block of symbolic or huge shape"),
           DPC_NONE;
  double *vals = malloc((size_t)(n ? n : 1) * sizeof *vals);
  if (!vals) return OOM(), DPC_NONE;
  for (int64_t i = 0; i < n; i++) vals[i] = v;
  uint32_t y = onnx_constant(c, t, s, vals);
  free(vals);
  return y;
}

uint32_t onnx_slice(onnx_ctx *c, uint32_t x, int64_t axis, int64_t lo, int64_t hi, int64_t step) {
  if (x == DPC_NONE) return DPC_NONE;
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_ints(c->g, "starts", &lo, 1) || dpc_graph_attr_ints(c->g, "ends", &hi, 1) ||
      dpc_graph_attr_ints(c->g, "axes", &axis, 1) || dpc_graph_attr_ints(c->g, "steps", &step, 1))
    return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_SLICE, &x, 1, mark, 0, &y) ? DPC_NONE : y;
}

uint32_t onnx_concat(onnx_ctx *c, const uint32_t *xs, uint32_t n, int64_t axis) {
  for (uint32_t i = 0; i < n; i++)
    if (xs[i] == DPC_NONE) return DPC_NONE;
  if (n == 1) return xs[0];
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_int(c->g, "axis", axis)) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_CONCAT, xs, n, mark, 0, &y) ? DPC_NONE : y;
}

uint32_t onnx_gather(onnx_ctx *c, uint32_t x, uint32_t idx, int64_t axis) {
  if (x == DPC_NONE || idx == DPC_NONE) return DPC_NONE;
  uint32_t in[2] = {x, idx}, mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_int(c->g, "axis", axis)) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_GATHER, in, 2, mark, 0, &y) ? DPC_NONE : y;
}

uint32_t onnx_transpose(onnx_ctx *c, uint32_t x, const int64_t *perm, uint32_t n) {
  if (x == DPC_NONE) return DPC_NONE;
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_ints(c->g, "perm", perm, n)) return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_TRANSPOSE, &x, 1, mark, 0, &y) ? DPC_NONE : y;
}

uint32_t onnx_k(onnx_ctx *c, uint32_t like, double v) {
  return like == DPC_NONE ? DPC_NONE : onnx_scalar(c, c->g->values[like].dtype, v);
}

uint32_t onnx_matmul(onnx_ctx *c, uint32_t a, uint32_t b, bool trans_a, bool trans_b) {
  if (a == DPC_NONE || b == DPC_NONE) return DPC_NONE;
  uint32_t in[2] = {a, b}, mark = dpc_graph_attr_mark(c->g), y;
  if ((trans_a && dpc_graph_attr_int(c->g, "transpose_a", 1)) ||
      (trans_b && dpc_graph_attr_int(c->g, "transpose_b", 1)))
    return OOM(), DPC_NONE;
  return onnx_emit(c, DPC_OP_MATMUL, in, 2, mark, 0, &y) ? DPC_NONE : y;
}

void onnx_moments(onnx_ctx *c, uint32_t x, const int64_t *axes, int n, double eps, uint32_t *mean,
                  uint32_t *dev, uint32_t *inv) {
  *mean = onnx_reduce(c, DPC_OP_REDUCE_MEAN, x, axes, n, true);
  *dev = onnx_bin(c, DPC_OP_SUB, x, *mean);
  uint32_t var = onnx_reduce(c, DPC_OP_REDUCE_MEAN, onnx_mul(c, *dev, *dev), axes, n, true);
  *inv = onnx_un(c, DPC_OP_RSQRT, onnx_add(c, var, onnx_k(c, x, eps)));
}
