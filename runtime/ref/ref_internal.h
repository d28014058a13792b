/*
 * ref_internal.h — what the reference kernels share: their prototypes (the table in ref_table.c
 * points at them) and small helpers for walking row-major tensors, broadcasting and integer
 * wrap-around.
 *
 * Must not: allocate, keep state between calls, or print. Everything here works on the stack
 * with fixed-size arrays (ranks are at most DPC_MAX_RANK), so a kernel built from these helpers
 * never allocates either. Only the reference backend includes this header.
 */
#ifndef DPC_RUNTIME_REF_REF_INTERNAL_H
#define DPC_RUNTIME_REF_REF_INTERNAL_H

#include "ir/rules.h"
#include "ir/scalar.h" /* one element of the binary ops, and the integers' wrap-around */
#include "runtime/kernel.h"

#include <stdio.h>
#include <string.h>

/* ---- small accessors ---------------------------------------------------------------------- */

static inline dpc_attrs dpc_ref_attrs(const dpc_kernel_args *a) {
  return dpc_node_attrs(a->g, a->node);
}

static inline dpc_op dpc_ref_op(const dpc_kernel_args *a) {
  return a->g->nodes[a->node].op;
}

/* Product of dims [lo, hi) of a concrete shape. */
static inline int64_t dpc_ref_prod(const dpc_shape *s, uint32_t lo, uint32_t hi) {
  int64_t n = 1;
  for (uint32_t i = lo; i < hi; i++) n *= s->d[i];
  return n;
}

/* An axis attribute the shape rule already accepted, made non-negative. */
static inline uint32_t dpc_ref_axis(int64_t axis, uint32_t rank) {
  uint32_t ax = 0;
  bool ok = dpc_axis_norm(axis, rank, &ax);
  DPC_ASSERT(ok);
  return ax;
}

/* Move `count` elements between two tensors of the same dtype. memmove because the executor
 * may run layout ops in place, and the count check because empty tensors may have no data. */
static inline void dpc_ref_move(dpc_tensor *dst, int64_t di, const dpc_tensor *src, int64_t si,
                                int64_t count) {
  if (count <= 0) return;
  size_t es = dpc_dtype_size(dst->dtype);
  memmove((unsigned char *)dst->data + (size_t)di * es,
          (const unsigned char *)src->data + (size_t)si * es, (size_t)count * es);
}

/* n elements of t from offset `off`, `stride` apart, as doubles; the dtype switch sits outside
 * the loop for the common float types, so row loops vectorise. */
static inline void dpc_ref_load(const dpc_tensor *t, int64_t off, int64_t n, int64_t stride,
                                double *out) {
  if (t->dtype == DPC_F32) {
    const float *p = (const float *)t->data + off;
    for (int64_t j = 0; j < n; j++) out[j] = p[j * stride];
  } else if (t->dtype == DPC_F64) {
    const double *p = (const double *)t->data + off;
    for (int64_t j = 0; j < n; j++) out[j] = p[j * stride];
  } else {
    for (int64_t j = 0; j < n; j++) out[j] = dpc_tload(t, off + j * stride);
  }
}

/* n consecutive doubles stored into t from offset `off` (rounded as dpc_tstore rounds). */
static inline void dpc_ref_store(dpc_tensor *t, int64_t off, int64_t n, const double *in) {
  if (t->dtype == DPC_F32) {
    float *p = (float *)t->data + off;
    for (int64_t j = 0; j < n; j++) p[j] = (float)in[j];
  } else {
    for (int64_t j = 0; j < n; j++) dpc_tstore(t, off + j, in[j]);
  }
}

/* Set every element to zero: all-zero bytes are 0 (or false) in every dtype dpc has. */
static inline void dpc_ref_zero(dpc_tensor *t) {
  size_t n = dpc_tensor_bytes(t);
  if (n) memset(t->data, 0, n);
}

/* "[1, 0, 3]": the position of flat element `flat` in a row-major shape, for messages. */
static inline void dpc_ref_format_index(const dpc_shape *s, int64_t flat, char *buf, size_t n) {
  int64_t idx[DPC_MAX_RANK];
  for (uint32_t i = s->rank; i-- > 0;) {
    idx[i] = s->d[i] ? flat % s->d[i] : 0;
    flat = s->d[i] ? flat / s->d[i] : 0;
  }
  size_t len = 0;
  len += (size_t)snprintf(buf, n, "[");
  for (uint32_t i = 0; i < s->rank && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)idx[i]);
  if (len < n) snprintf(buf + len, n - len, "]");
}

/* ---- walking a shape with up to two strided operands ------------------------------------- */

/* An odometer over `dims` that keeps, for each of two operands, the offset of the current
 * position given that operand's per-dimension strides. Strides may be 0 (broadcast) or
 * negative (reversed slices), which is why offsets are tracked rather than recomputed. */
typedef struct dpc_ref_iter {
  uint32_t rank;
  int64_t dims[DPC_MAX_RANK];
  int64_t idx[DPC_MAX_RANK];
  int64_t stride[2][DPC_MAX_RANK];
  int64_t off[2];
} dpc_ref_iter;

/* Start at the origin of `s` with both offsets at base0/base1 and all strides 0. */
static inline void dpc_ref_iter_init(dpc_ref_iter *it, const dpc_shape *s, int64_t base0,
                                     int64_t base1) {
  memset(it, 0, sizeof *it);
  it->rank = s->rank;
  memcpy(it->dims, s->d, s->rank * sizeof(int64_t));
  it->off[0] = base0;
  it->off[1] = base1;
}

/* Step to the next position in row-major order; after the last it wraps to the origin. */
static inline void dpc_ref_iter_next(dpc_ref_iter *it) {
  for (uint32_t k = it->rank; k-- > 0;) {
    it->idx[k]++;
    it->off[0] += it->stride[0][k];
    it->off[1] += it->stride[1][k];
    if (it->idx[k] < it->dims[k]) return;
    it->off[0] -= it->stride[0][k] * it->dims[k];
    it->off[1] -= it->stride[1][k] * it->dims[k];
    it->idx[k] = 0;
  }
}

/* Strides of `in` seen through the broadcast shape `out` (NumPy rules: align from the right;
 * a dimension of 1, or a missing one, repeats and so has stride 0). */
static inline void dpc_ref_bcast_strides(const dpc_shape *in, const dpc_shape *out,
                                         int64_t st[DPC_MAX_RANK]) {
  int64_t own[DPC_MAX_RANK];
  dpc_shape_strides(in, own);
  uint32_t lead = out->rank - in->rank;
  for (uint32_t i = 0; i < out->rank; i++) {
    if (i < lead)
      st[i] = 0;
    else
      st[i] = in->d[i - lead] == 1 ? 0 : own[i - lead];
  }
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* Each implements the op of the same name; the table in ref_table.c maps ops to them. */
/* ref_elementwise.c */
dpc_status dpc_ref_input(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_param(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_state(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_constant(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_add(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_sub(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_mul(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_div(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_pow(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_max(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_min(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_neg(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_abs(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_relu(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_relu6(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_clip(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_leaky_relu(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_gelu(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_sigmoid(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_tanh(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_exp(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_log(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_sqrt(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_rsqrt(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_erf(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_floor(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_sign(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_cos(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_sin(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_equal(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_less(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_greater(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_not(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_where(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_zeros_like(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_cast(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_dropout(const dpc_kernel_args *a, dpc_diag *d);

/* ref_reduce.c */
dpc_status dpc_ref_softmax(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_log_softmax(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_softmax_cross_entropy(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_mse(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_reduce_sum(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_reduce_mean(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_reduce_max(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_sum_to(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_expand(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_softmax_grad(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_log_softmax_grad(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_softmax_cross_entropy_grad(const dpc_kernel_args *a, dpc_diag *d);

/* ref_layout.c */
dpc_status dpc_ref_transpose(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_reshape(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_flatten(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_concat(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_split(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_all_reduce(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_slice(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_gather(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_slice_grad(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_gather_grad(const dpc_kernel_args *a, dpc_diag *d);

/* ref_nn.c */
dpc_status dpc_ref_matmul(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_conv2d(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_max_pool2d(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_avg_pool2d(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_batch_norm(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_layer_norm(const dpc_kernel_args *a, dpc_diag *d);

/* ref_nn_grad.c */
dpc_status dpc_ref_conv2d_grad_input(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_conv2d_grad_weight(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_max_pool2d_grad(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_avg_pool2d_grad(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_batch_norm_grad(const dpc_kernel_args *a, dpc_diag *d);
dpc_status dpc_ref_layer_norm_grad(const dpc_kernel_args *a, dpc_diag *d);

#endif
