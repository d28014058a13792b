/*
 * tensor.h — a tensor with its data: a pointer, a dtype and a concrete shape, laid out
 * row-major and contiguous. The memory belongs to someone else (a device buffer, a caller).
 *
 * The element readers convert any dtype to double and back; the reference kernels are written
 * against them once instead of once per dtype. Stores saturate when converting to integers, so
 * an out-of-range or NaN value is never undefined behaviour.
 */
#ifndef DPC_IR_TENSOR_H
#define DPC_IR_TENSOR_H

#include "ir/types.h"

#include <math.h>
#include <string.h>

typedef struct dpc_tensor {
  void *data;
  dpc_dtype dtype;
  dpc_shape shape;
} dpc_tensor;

static inline int64_t dpc_tensor_numel(const dpc_tensor *t) {
  return dpc_shape_numel(&t->shape);
}
static inline size_t dpc_tensor_bytes(const dpc_tensor *t) {
  return (size_t)dpc_tensor_numel(t) * dpc_dtype_size(t->dtype);
}

static inline double dpc_tload(const dpc_tensor *t, int64_t i) {
  const unsigned char *p = (const unsigned char *)t->data;
  switch (t->dtype) {
  case DPC_F32: {
    float v;
    memcpy(&v, p + 4 * i, 4);
    return v;
  }
  case DPC_F64: {
    double v;
    memcpy(&v, p + 8 * i, 8);
    return v;
  }
  case DPC_F16: {
    uint16_t v;
    memcpy(&v, p + 2 * i, 2);
    return dpc_f16_to_f32(v);
  }
  case DPC_BF16: {
    uint16_t v;
    memcpy(&v, p + 2 * i, 2);
    return dpc_bf16_to_f32(v);
  }
  case DPC_I32: {
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
  }
  case DPC_I64: {
    int64_t v;
    memcpy(&v, p + 8 * i, 8);
    return (double)v;
  }
  case DPC_BOOL: return p[i] != 0;
  default: return 0;
  }
}

/* Exact integer read (for indices and integer arithmetic). Floats are truncated. */
static inline int64_t dpc_tload_i64(const dpc_tensor *t, int64_t i) {
  const unsigned char *p = (const unsigned char *)t->data;
  if (t->dtype == DPC_I64) {
    int64_t v;
    memcpy(&v, p + 8 * i, 8);
    return v;
  }
  if (t->dtype == DPC_I32) {
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
  }
  double d = dpc_tload(t, i);
  if (!(d == d)) return 0;
  if (d >= 9223372036854775807.0) return INT64_MAX;
  if (d <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)d;
}

static inline void dpc_tstore(dpc_tensor *t, int64_t i, double v) {
  unsigned char *p = (unsigned char *)t->data;
  switch (t->dtype) {
  case DPC_F32: {
    float f = (float)v;
    memcpy(p + 4 * i, &f, 4);
    break;
  }
  case DPC_F64: memcpy(p + 8 * i, &v, 8); break;
  case DPC_F16: {
    uint16_t h = dpc_f32_to_f16((float)v);
    memcpy(p + 2 * i, &h, 2);
    break;
  }
  case DPC_BF16: {
    uint16_t h = dpc_f32_to_bf16((float)v);
    memcpy(p + 2 * i, &h, 2);
    break;
  }
  case DPC_I32: {
    int32_t x = !(v == v)            ? 0
                : v >= 2147483647.0  ? INT32_MAX
                : v <= -2147483648.0 ? INT32_MIN
                                     : (int32_t)v;
    memcpy(p + 4 * i, &x, 4);
    break;
  }
  case DPC_I64: {
    int64_t x = !(v == v)                     ? 0
                : v >= 9223372036854775807.0  ? INT64_MAX
                : v <= -9223372036854775808.0 ? INT64_MIN
                                              : (int64_t)v;
    memcpy(p + 8 * i, &x, 8);
    break;
  }
  case DPC_BOOL: p[i] = v != 0; break;
  default: break;
  }
}

static inline void dpc_tstore_i64(dpc_tensor *t, int64_t i, int64_t v) {
  unsigned char *p = (unsigned char *)t->data;
  if (t->dtype == DPC_I64)
    memcpy(p + 8 * i, &v, 8);
  else if (t->dtype == DPC_I32) {
    int32_t x = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
    memcpy(p + 4 * i, &x, 4);
  } else
    dpc_tstore(t, i, (double)v);
}

#endif
