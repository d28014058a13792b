/*
 * scalar.h — one element of the elementwise binary ops and the comparisons, defined once.
 *
 * The reference kernels (runtime/ref) compute with these, and so does the ONNX importer's
 * constant folder (frontend/onnx_fold.c): a constant folded while importing is what running
 * the op would have given. Floats are computed in double; integers exactly in int64 and wrapped
 * to their dtype's width, as NumPy's integer arithmetic does.
 *
 * Integer division by zero has no value here: each caller checks the divisor first (the kernel
 * fails the run, the folder leaves the node in the graph, where the run fails the same way).
 * Must not: depend on anything outside ir/, allocate, or keep state.
 */
#ifndef DPC_IR_SCALAR_H
#define DPC_IR_SCALAR_H

#include "ir/op.h"

#include <math.h>

/* Two's-complement wrap of a 64-bit pattern to the width of an integer dtype. Done in unsigned
 * arithmetic so overflow is never undefined. */
static inline int64_t dpc_scalar_wrap(dpc_dtype t, uint64_t v) {
  if (t == DPC_I32) {
    uint32_t u = (uint32_t)v;
    return u <= (uint32_t)INT32_MAX ? (int64_t)u : (int64_t)u - 4294967296LL;
  }
  return v <= (uint64_t)INT64_MAX ? (int64_t)v : -(int64_t)(~v) - 1;
}

/* add, sub, mul, div, pow, max and min on floats. */
static inline double dpc_scalar_float(dpc_op op, double x, double y) {
  switch (op) {
  case DPC_OP_ADD: return x + y;
  case DPC_OP_SUB: return x - y;
  case DPC_OP_MUL: return x * y;
  case DPC_OP_DIV: return x / y;
  case DPC_OP_POW: return pow(x, y);
  /* NaN wins in either position, unlike fmax/fmin which drop it. */
  case DPC_OP_MAX: return x != x ? x : y != y ? y : x >= y ? x : y;
  case DPC_OP_MIN: return x != x ? x : y != y ? y : x <= y ? x : y;
  default: DPC_ASSERT(!"not a binary op"); return 0;
  }
}

/* add, sub, mul, div, max and min on integers of dtype t (div: y is not 0). */
static inline int64_t dpc_scalar_int(dpc_op op, dpc_dtype t, int64_t x, int64_t y) {
  switch (op) {
  case DPC_OP_ADD: return dpc_scalar_wrap(t, (uint64_t)x + (uint64_t)y);
  case DPC_OP_SUB: return dpc_scalar_wrap(t, (uint64_t)x - (uint64_t)y);
  case DPC_OP_MUL: return dpc_scalar_wrap(t, (uint64_t)x * (uint64_t)y);
  /* MIN / -1 overflows, which C leaves undefined; negating with wrap-around gives MIN back. */
  case DPC_OP_DIV: return y == -1 ? dpc_scalar_wrap(t, 0 - (uint64_t)x) : x / y;
  case DPC_OP_MAX: return x >= y ? x : y;
  case DPC_OP_MIN: return x <= y ? x : y;
  default: DPC_ASSERT(!"not an integer binary op"); return 0;
  }
}

/* equal, less or greater from the order of two elements: -1, 0, 1, or 2 when unordered. */
static inline bool dpc_scalar_compare(dpc_op op, int order) {
  return op == DPC_OP_EQUAL ? order == 0 : op == DPC_OP_LESS ? order == -1 : order == 1;
}

/* Integers are ordered exactly in int64 (through double, neighbours above 2^53 would be
 * equal); floats in double, where NaN is unordered, even with itself. */
static inline int dpc_scalar_order_int(int64_t u, int64_t v) {
  return u < v ? -1 : u > v ? 1 : 0;
}
static inline int dpc_scalar_order_float(double u, double v) {
  return u < v ? -1 : u > v ? 1 : u == v ? 0 : 2;
}

#endif
