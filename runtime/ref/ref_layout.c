/*
 * ref_layout.c — reference kernels that move elements without doing arithmetic on them:
 * transpose, reshape, flatten, concat, split, slice and gather; and the gradients of the last
 * two, slice_grad (a scatter into zeros) and gather_grad (the one that adds).
 *
 * Elements are copied as bytes (input and output share a dtype), so every dtype is moved
 * exactly. Slice bounds come from dpc_slice_axis, the same function the shape rule uses, so
 * the kernel and the rule can never disagree. Must not allocate, keep state or print; an
 * out-of-range gather index is the user's error and is reported through dpc_graph_fail_node.
 */
#include "runtime/ref/ref_internal.h"

/* Fill `y` in order from `x` at the offsets an iterator visits (its operand 0). */
static void strided_copy(dpc_tensor *y, const dpc_tensor *x, dpc_ref_iter *it) {
  int64_t n = dpc_tensor_numel(y);
  for (int64_t i = 0; i < n; i++, dpc_ref_iter_next(it)) dpc_ref_move(y, i, x, it->off[0], 1);
}

dpc_status dpc_ref_transpose(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  dpc_attrs at = dpc_ref_attrs(a);
  uint32_t rank = x->shape.rank;
  int64_t perm[DPC_MAX_RANK];
  if (dpc_attrs_get(at, "perm")) {
    uint32_t n = dpc_attrs_ints(at, "perm", perm, DPC_MAX_RANK, 0);
    DPC_ASSERT(n == rank);
  } else {
    for (uint32_t i = 0; i < rank; i++) perm[i] = rank - 1 - i;
  }
  int64_t xst[DPC_MAX_RANK];
  dpc_shape_strides(&x->shape, xst);
  dpc_ref_iter it;
  dpc_ref_iter_init(&it, &y->shape, 0, 0);
  for (uint32_t k = 0; k < rank; k++) it.stride[0][k] = xst[perm[k]];
  strided_copy(y, x, &it);
  return DPC_OK;
}

/* Row-major order is unchanged by a reshape, so the bytes are already right. */
static void same_bytes(const dpc_kernel_args *a) {
  if (a->out[0].data != a->in[0].data)
    dpc_ref_move(&a->out[0], 0, &a->in[0], 0, dpc_tensor_numel(&a->in[0]));
}

dpc_status dpc_ref_reshape(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  same_bytes(a);
  return DPC_OK;
}

dpc_status dpc_ref_flatten(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  same_bytes(a);
  return DPC_OK;
}

/* Concat and split both see a tensor as [outer, axis, inner]: along the axis, each piece is one
 * contiguous run of (its size on the axis) * inner elements per outer index. */
dpc_status dpc_ref_concat(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  dpc_tensor *y = &a->out[0];
  uint32_t rank = y->shape.rank;
  uint32_t ax = dpc_ref_axis(dpc_attrs_int(dpc_ref_attrs(a), "axis"), rank);
  int64_t outer = dpc_ref_prod(&y->shape, 0, ax), inner = dpc_ref_prod(&y->shape, ax + 1, rank);
  int64_t yrun = y->shape.d[ax] * inner, pos = 0;
  for (uint32_t j = 0; j < a->n_in; j++) {
    const dpc_tensor *x = &a->in[j];
    int64_t run = x->shape.d[ax] * inner;
    for (int64_t o = 0; o < outer; o++) dpc_ref_move(y, o * yrun + pos, x, o * run, run);
    pos += run;
  }
  return DPC_OK;
}

dpc_status dpc_ref_split(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0];
  uint32_t rank = x->shape.rank;
  uint32_t ax = dpc_ref_axis(dpc_attrs_int(dpc_ref_attrs(a), "axis"), rank);
  int64_t outer = dpc_ref_prod(&x->shape, 0, ax), inner = dpc_ref_prod(&x->shape, ax + 1, rank);
  int64_t xrun = x->shape.d[ax] * inner, pos = 0;
  for (uint32_t k = 0; k < a->n_out; k++) {
    dpc_tensor *y = &a->out[k];
    int64_t run = y->shape.d[ax] * inner;
    for (int64_t o = 0; o < outer; o++) dpc_ref_move(y, o * run, x, o * xrun + pos, run);
    pos += run;
  }
  return DPC_OK;
}

/* An iterator over the slice of a tensor shaped `xs` whose result is shaped `ys`: operand 0
 * is the offset in x of each element of the result, in order. */
static void slice_iter(const dpc_kernel_args *a, const dpc_shape *xs, const dpc_shape *ys,
                       dpc_ref_iter *it) {
  dpc_attrs at = dpc_ref_attrs(a);
  uint32_t rank = xs->rank;
  int64_t st[DPC_MAX_RANK], en[DPC_MAX_RANK], ax[DPC_MAX_RANK], sp[DPC_MAX_RANK];
  uint32_t n = dpc_attrs_ints(at, "starts", st, DPC_MAX_RANK, 0);
  DPC_ASSERT(n <= rank && dpc_attrs_ints(at, "ends", en, DPC_MAX_RANK, 0) == n);
  /* Absent axes mean the first n dims; absent steps mean 1 (as in the rule). */
  if (dpc_attrs_get(at, "axes")) {
    dpc_attrs_ints(at, "axes", ax, DPC_MAX_RANK, 0);
  } else {
    for (uint32_t i = 0; i < n; i++) ax[i] = i;
  }
  if (dpc_attrs_get(at, "steps")) {
    dpc_attrs_ints(at, "steps", sp, DPC_MAX_RANK, 0);
  } else {
    for (uint32_t i = 0; i < n; i++) sp[i] = 1;
  }
  /* Axes not listed are taken whole: first 0, step 1. */
  int64_t first[DPC_MAX_RANK] = {0}, step[DPC_MAX_RANK], xst[DPC_MAX_RANK];
  for (uint32_t k = 0; k < rank; k++) step[k] = 1;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k = dpc_ref_axis(ax[i], rank);
    int64_t count;
    dpc_slice_axis(xs->d[k], st[i], en[i], sp[i], &first[k], &count);
    DPC_ASSERT(count == ys->d[k]);
    step[k] = sp[i];
  }
  dpc_shape_strides(xs, xst);
  int64_t base = 0;
  for (uint32_t k = 0; k < rank; k++) base += first[k] * xst[k];
  dpc_ref_iter_init(it, ys, base, 0);
  for (uint32_t k = 0; k < rank; k++) it->stride[0][k] = step[k] * xst[k];
}

dpc_status dpc_ref_slice(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  dpc_ref_iter it;
  slice_iter(a, &x->shape, &y->shape, &it);
  /* An empty result never dereferences base, which may then point before the data. */
  strided_copy(y, x, &it);
  return DPC_OK;
}

/* The slice's elements are distinct positions of x, so each is written once: no sums. */
dpc_status dpc_ref_slice_grad(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *dy = &a->in[0];
  dpc_tensor *dx = &a->out[0];
  dpc_ref_iter it;
  slice_iter(a, &dx->shape, &dy->shape, &it);
  dpc_ref_zero(dx);
  int64_t n = dpc_tensor_numel(dy);
  for (int64_t i = 0; i < n; i++, dpc_ref_iter_next(&it)) dpc_ref_move(dx, it.off[0], dy, i, 1);
  return DPC_OK;
}

/* Every index of a gather (or its gradient) in [-dim, dim), checked before any output is written
 * so a bad one is reported even when the result is empty. */
static dpc_status check_indices(const dpc_kernel_args *a, const dpc_tensor *idx, int64_t dim,
                                uint32_t ax, dpc_diag *d) {
  int64_t ni = dpc_tensor_numel(idx);
  for (int64_t j = 0; j < ni; j++) {
    int64_t k = dpc_tload_i64(idx, j);
    if (k < -dim || k >= dim) {
      char where[160];
      dpc_ref_format_index(&idx->shape, j, where, sizeof where);
      return dpc_graph_fail_node(a->g, a->node, d, DPC_ERR_RUNTIME,
                                 "index %lld at indices%s is outside [%lld, %lld) (axis %u of "
                                 "data has size %lld)",
                                 (long long)k, where, (long long)-dim, (long long)dim, ax,
                                 (long long)dim);
    }
  }
  return DPC_OK;
}

dpc_status dpc_ref_gather(const dpc_kernel_args *a, dpc_diag *d) {
  const dpc_tensor *x = &a->in[0], *idx = &a->in[1];
  dpc_tensor *y = &a->out[0];
  uint32_t rank = x->shape.rank;
  uint32_t ax = dpc_ref_axis(dpc_attrs_int(dpc_ref_attrs(a), "axis"), rank);
  int64_t outer = dpc_ref_prod(&x->shape, 0, ax), dim = x->shape.d[ax];
  int64_t inner = dpc_ref_prod(&x->shape, ax + 1, rank), ni = dpc_tensor_numel(idx);
  dpc_status st = check_indices(a, idx, dim, ax, d);
  if (st) return st;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < ni; j++) {
      int64_t k = dpc_tload_i64(idx, j);
      if (k < 0) k += dim;
      dpc_ref_move(y, (o * ni + j) * inner, x, (o * dim + k) * inner, inner);
    }
  }
  return DPC_OK;
}

#define GG_CHUNK 256 /* columns of a ddata row summed at once; 2 KiB of doubles on the stack */

/* Row k of ddata (per outer index) is the sum of the rows of dy whose index is k. Each output
 * row is gathered rather than scattered into: the sum stays in double and is rounded once, no
 * zeroing pass is needed, and the stack holds one chunk of the row. */
dpc_status dpc_ref_gather_grad(const dpc_kernel_args *a, dpc_diag *d) {
  const dpc_tensor *dy = &a->in[0], *data = &a->in[1], *idx = &a->in[2];
  dpc_tensor *dd = &a->out[0];
  uint32_t rank = data->shape.rank;
  uint32_t ax = dpc_ref_axis(dpc_attrs_int(dpc_ref_attrs(a), "axis"), rank);
  int64_t outer = dpc_ref_prod(&data->shape, 0, ax), dim = data->shape.d[ax];
  int64_t inner = dpc_ref_prod(&data->shape, ax + 1, rank), ni = dpc_tensor_numel(idx);
  dpc_status st = check_indices(a, idx, dim, ax, d);
  if (st) return st;
  double acc[GG_CHUNK];
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t k = 0; k < dim; k++) {
      for (int64_t t0 = 0; t0 < inner; t0 += GG_CHUNK) {
        int64_t tn = inner - t0 < GG_CHUNK ? inner - t0 : GG_CHUNK;
        for (int64_t t = 0; t < tn; t++) acc[t] = 0;
        for (int64_t j = 0; j < ni; j++) {
          int64_t kj = dpc_tload_i64(idx, j);
          if ((kj < 0 ? kj + dim : kj) != k) continue;
          for (int64_t t = 0; t < tn; t++) acc[t] += dpc_tload(dy, (o * ni + j) * inner + t0 + t);
        }
        for (int64_t t = 0; t < tn; t++) dpc_tstore(dd, (o * dim + k) * inner + t0 + t, acc[t]);
      }
    }
  }
  return DPC_OK;
}

/* The sum (or mean) of every input, in input order, written to every output: on one device,
 * what the collective computes across devices. */
dpc_status dpc_ref_all_reduce(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  char op[16];
  dpc_attrs_str(dpc_ref_attrs(a), "op", op, sizeof op);
  bool mean = !strcmp(op, "mean");
  int64_t n = dpc_tensor_numel(&a->out[0]);
  for (int64_t i = 0; i < n; i++) {
    double s = 0;
    for (uint32_t j = 0; j < a->n_in; j++) s += dpc_tload(&a->in[j], i);
    if (mean) s /= a->n_in;
    for (uint32_t k = 0; k < a->n_out; k++) dpc_tstore(&a->out[k], i, s);
  }
  return DPC_OK;
}
