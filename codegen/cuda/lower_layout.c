/*
 * lower_layout.c — CUDA kernels that move elements without arithmetic: transpose, reshape,
 * flatten, concat, split, slice and gather, expand, and the gradients slice_grad (a scatter
 * into zeros) and gather_grad (a sum).
 *
 * One thread per output element, each computing where its element comes from; elements are
 * copied in their stored form, so every dtype moves exactly. gather_grad gathers (each output
 * element sums the rows of dy whose index names it, in index order) instead of scattering with
 * atomics, so its sums are deterministic. Index rules follow runtime/ref/ref_layout.c; an index
 * outside its range (an error there) reads nothing and gives 0 here.
 */
#include "codegen/cuda/cu.h"
#include "ir/rules.h"

#include <stdio.h>
#include <string.h>

static uint32_t axis_of(cu_gen *c, uint32_t rank) {
  uint32_t ax = 0;
  dpc_axis_norm(dpc_attrs_int(c->at, "axis"), rank, &ax);
  return ax;
}

static int64_t prod(const dpc_shape *s, uint32_t lo, uint32_t hi) {
  int64_t n = 1;
  for (uint32_t i = lo; i < hi; i++) n *= s->d[i];
  return n;
}

/* y[i] = x[offset], offset = base + sum over k of coordinate k of i (in y's shape) times
 * stride[k]. */
static void strided_copy(cu_gen *c, const dpc_shape *ys, int64_t base, const int64_t *stride,
                         const char *from, const char *to, bool scatter) {
  cu_elementwise_begin(c, "", dpc_shape_numel(ys));
  cu_coords(c, ys, "i", "");
  cu_printf(c, "    long long off = %lldll", (long long)base);
  for (uint32_t k = 0; k < ys->rank; k++)
    if (stride[k]) cu_printf(c, " + c%u * %lldll", k, (long long)stride[k]);
  cu_printf(c, ";\n");
  if (scatter)
    cu_printf(c, "    %s[off] = %s[i];\n", to, from);
  else
    cu_printf(c, "    %s[i] = %s[off];\n", to, from);
  cu_elementwise_end(c);
}

static dpc_status lower_transpose(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_shape *xs = &cu_in(c, 0)->shape, *ys = &cu_out(c, 0)->shape;
  int64_t perm[DPC_MAX_RANK], xst[DPC_MAX_RANK], st[DPC_MAX_RANK];
  if (dpc_attrs_get(c->at, "perm"))
    dpc_attrs_ints(c->at, "perm", perm, DPC_MAX_RANK, 0);
  else
    for (uint32_t i = 0; i < xs->rank; i++) perm[i] = xs->rank - 1 - i;
  dpc_shape_strides(xs, xst);
  for (uint32_t k = 0; k < xs->rank; k++) st[k] = xst[perm[k]];
  strided_copy(c, ys, 0, st, "x0", "y0", false);
  return DPC_OK;
}

/* Row-major order is unchanged: a plain copy (the runtime may skip it by aliasing). */
static dpc_status lower_copy(cu_gen *c, dpc_diag *d) {
  (void)d;
  cu_elementwise_begin(c, "", dpc_shape_numel(&cu_out(c, 0)->shape));
  cu_printf(c, "    y0[i] = x0[i];\n");
  cu_elementwise_end(c);
  return DPC_OK;
}

/* Each output element finds its input by its coordinate along the axis. */
static dpc_status lower_concat(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_shape *ys = &cu_out(c, 0)->shape;
  uint32_t ax = axis_of(c, ys->rank);
  int64_t inner = prod(ys, ax + 1, ys->rank), dim = ys->d[ax];
  cu_elementwise_begin(c, "", dpc_shape_numel(ys));
  cu_printf(
      c, "    long long in = i %% %lldll, k = (i / %lldll) %% %lldll, o = i / (%lldll * %lldll);\n",
      (long long)inner, (long long)inner, (long long)dim, (long long)inner, (long long)dim);
  int64_t pos = 0;
  for (uint32_t j = 0; j < c->n->n_in; j++) {
    int64_t dj = cu_in(c, j)->shape.d[ax];
    cu_printf(c, "    %sif (k < %lldll) y0[i] = x%u[(o * %lldll + (k - %lldll)) * %lldll + in];\n",
              j ? "else " : "", (long long)(pos + dj), j, (long long)dj, (long long)pos,
              (long long)inner);
    pos += dj;
  }
  cu_elementwise_end(c);
  return DPC_OK;
}

/* One kernel per output, each a strided copy of its part of x. */
static dpc_status lower_split(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_shape *xs = &cu_in(c, 0)->shape;
  uint32_t ax = axis_of(c, xs->rank);
  int64_t inner = prod(xs, ax + 1, xs->rank), pos = 0;
  if (c->n->n_out > DPC_CUDA_MAX_LAUNCH) {
    /* more outputs than launches: one kernel writes them all */
    cu_elementwise_begin(c, "", dpc_shape_numel(xs));
    cu_printf(
        c,
        "    long long in = i %% %lldll, k = (i / %lldll) %% %lldll, o = i / (%lldll * %lldll);\n",
        (long long)inner, (long long)inner, (long long)xs->d[ax], (long long)inner,
        (long long)xs->d[ax]);
    for (uint32_t j = 0; j < c->n->n_out; j++) {
      int64_t dj = cu_out(c, j)->shape.d[ax];
      cu_printf(c,
                "    %sif (k < %lldll) y%u[(o * %lldll + (k - %lldll)) * %lldll + in] = x0[i];\n",
                j ? "else " : "", (long long)(pos + dj), j, (long long)dj, (long long)pos,
                (long long)inner);
      pos += dj;
    }
    cu_elementwise_end(c);
    return DPC_OK;
  }
  for (uint32_t j = 0; j < c->n->n_out; j++) {
    const dpc_shape *ys = &cu_out(c, j)->shape;
    int64_t dj = ys->d[ax];
    char suffix[16], to[8];
    snprintf(suffix, sizeof suffix, "out%u", j);
    snprintf(to, sizeof to, "y%u", j);
    cu_elementwise_begin(c, suffix, dpc_shape_numel(ys));
    cu_printf(
        c,
        "    long long in = i %% %lldll, k = (i / %lldll) %% %lldll, o = i / (%lldll * %lldll);\n",
        (long long)inner, (long long)inner, (long long)dj, (long long)inner, (long long)dj);
    cu_printf(c, "    %s[i] = x0[(o * %lldll + k + %lldll) * %lldll + in];\n", to,
              (long long)xs->d[ax], (long long)pos, (long long)inner);
    cu_elementwise_end(c);
    pos += dj;
  }
  return DPC_OK;
}

/* The offset of the slice's first element in a tensor shaped xs and its strides per result
 * dim, from the same dpc_slice_axis the shape rule uses. */
static void slice_geometry(cu_gen *c, const dpc_shape *xs, int64_t *base, int64_t *stride) {
  int64_t st[DPC_MAX_RANK], en[DPC_MAX_RANK], ax[DPC_MAX_RANK], sp[DPC_MAX_RANK];
  uint32_t n = dpc_attrs_ints(c->at, "starts", st, DPC_MAX_RANK, 0);
  dpc_attrs_ints(c->at, "ends", en, DPC_MAX_RANK, 0);
  if (dpc_attrs_get(c->at, "axes"))
    dpc_attrs_ints(c->at, "axes", ax, DPC_MAX_RANK, 0);
  else
    for (uint32_t i = 0; i < n; i++) ax[i] = i;
  if (dpc_attrs_get(c->at, "steps"))
    dpc_attrs_ints(c->at, "steps", sp, DPC_MAX_RANK, 0);
  else
    for (uint32_t i = 0; i < n; i++) sp[i] = 1;
  int64_t first[DPC_MAX_RANK] = {0}, step[DPC_MAX_RANK], xst[DPC_MAX_RANK];
  for (uint32_t k = 0; k < xs->rank; k++) step[k] = 1;
  for (uint32_t i = 0; i < n && i < DPC_MAX_RANK; i++) {
    uint32_t k = 0;
    dpc_axis_norm(ax[i], xs->rank, &k);
    int64_t count;
    dpc_slice_axis(xs->d[k], st[i], en[i], sp[i], &first[k], &count);
    step[k] = sp[i];
  }
  dpc_shape_strides(xs, xst);
  *base = 0;
  for (uint32_t k = 0; k < xs->rank; k++) *base += first[k] * xst[k], stride[k] = step[k] * xst[k];
}

static dpc_status lower_slice(cu_gen *c, dpc_diag *d) {
  (void)d;
  int64_t base, stride[DPC_MAX_RANK];
  slice_geometry(c, &cu_in(c, 0)->shape, &base, stride);
  strided_copy(c, &cu_out(c, 0)->shape, base, stride, "x0", "y0", false);
  return DPC_OK;
}

/* Two kernels: zero dx, then place dy (the slice's positions are distinct: no sums). */
static dpc_status lower_slice_grad(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_shape *xs = &cu_out(c, 0)->shape;
  cu_elementwise_begin(c, "zero", dpc_shape_numel(xs));
  cu_printf(c, "    y0[i] = 0;\n");
  cu_elementwise_end(c);
  int64_t base, stride[DPC_MAX_RANK];
  slice_geometry(c, xs, &base, stride);
  strided_copy(c, &cu_in(c, 0)->shape, base, stride, "x0", "y0", true);
  return DPC_OK;
}

static dpc_status lower_gather(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_shape *xs = &cu_in(c, 0)->shape;
  uint32_t ax = axis_of(c, xs->rank);
  int64_t dim = xs->d[ax], inner = prod(xs, ax + 1, xs->rank);
  int64_t ni = dpc_shape_numel(&cu_in(c, 1)->shape);
  cu_elementwise_begin(c, "", dpc_shape_numel(&cu_out(c, 0)->shape));
  cu_printf(
      c, "    long long in = i %% %lldll, j = (i / %lldll) %% %lldll, o = i / (%lldll * %lldll);\n",
      (long long)inner, (long long)inner, (long long)(ni ? ni : 1), (long long)inner,
      (long long)(ni ? ni : 1));
  cu_printf(c, "    long long k = (long long)x1[j];\n    if (k < 0) k += %lldll;\n",
            (long long)dim);
  cu_printf(c, "    if (k < 0 || k >= %lldll) y0[i] = 0;\n", (long long)dim);
  cu_printf(c, "    else y0[i] = x0[(o * %lldll + k) * %lldll + in];\n", (long long)dim,
            (long long)inner);
  cu_elementwise_end(c);
  return DPC_OK;
}

static dpc_status lower_gather_grad(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *dy = cu_in(c, 0), *dd = cu_out(c, 0);
  const dpc_shape *xs = &cu_in(c, 1)->shape;
  uint32_t ax = axis_of(c, xs->rank);
  int64_t dim = xs->d[ax], inner = prod(xs, ax + 1, xs->rank);
  int64_t ni = dpc_shape_numel(&cu_in(c, 2)->shape);
  const char *A = dd->dtype == DPC_F64 ? "double" : cu_calc_type(dd->dtype);
  cu_elementwise_begin(c, "", dpc_shape_numel(&dd->shape));
  cu_printf(
      c, "    long long in = i %% %lldll, k = (i / %lldll) %% %lldll, o = i / (%lldll * %lldll);\n",
      (long long)inner, (long long)inner, (long long)dim, (long long)inner, (long long)dim);
  cu_printf(c, "    %s acc = 0;\n", A);
  cu_printf(c, "    for (long long j = 0; j < %lldll; j++) {\n", (long long)ni);
  cu_printf(c, "      long long kj = (long long)x2[j];\n      if (kj < 0) kj += %lldll;\n",
            (long long)dim);
  cu_expr g = cu_load(dy->dtype, "x0", "(o * NI + j) * IN + in");
  cu_printf(c, "      const long long NI = %lldll, IN = %lldll;\n", (long long)ni,
            (long long)inner);
  cu_printf(c, "      if (kj == k) acc += (%s)(%s);\n    }\n", A, g.s);
  cu_store(c, dd->dtype, "y0", "i", "acc");
  cu_elementwise_end(c);
  return DPC_OK;
}

/* expand(x, like): x read at the output position with the expanded axes' coordinates dropped
 * (or zeroed where x keeps them as 1); mean=1 divides by the number of repeats. */
static dpc_status lower_expand(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *x = cu_in(c, 0), *y = cu_out(c, 0);
  uint32_t rank = y->shape.rank;
  bool in_a[DPC_MAX_RANK] = {0};
  if (dpc_attrs_get(c->at, "axes")) {
    int64_t axes[DPC_MAX_RANK];
    uint32_t n = dpc_attrs_ints(c->at, "axes", axes, DPC_MAX_RANK, 0);
    for (uint32_t i = 0; i < n && i < DPC_MAX_RANK; i++) {
      uint32_t a = 0;
      if (dpc_axis_norm(axes[i], rank, &a)) in_a[a] = true;
    }
  } else {
    for (uint32_t i = 0; i < rank; i++) in_a[i] = true;
  }
  bool kept = x->shape.rank == rank, mean = dpc_attrs_int(c->at, "mean") != 0;
  int64_t xst[DPC_MAX_RANK], st[DPC_MAX_RANK] = {0};
  dpc_shape_strides(&x->shape, xst);
  double repeats = 1;
  for (uint32_t i = 0, j = 0; i < rank; i++) {
    if (in_a[i]) {
      repeats *= (double)y->shape.d[i];
      j += kept;
      continue;
    }
    st[i] = xst[j++];
  }
  if (!mean) {
    strided_copy(c, &y->shape, 0, st, "x0", "y0", false);
    return DPC_OK;
  }
  cu_elementwise_begin(c, "", dpc_shape_numel(&y->shape));
  cu_coords(c, &y->shape, "i", "");
  cu_printf(c, "    long long off = 0");
  for (uint32_t k = 0; k < rank; k++)
    if (st[k]) cu_printf(c, " + c%u * %lldll", k, (long long)st[k]);
  cu_printf(c, ";\n");
  cu_expr v = cu_load(x->dtype, "x0", "off");
  char val[700];
  snprintf(val, sizeof val, "(double)(%s) / %.17g", v.s, repeats);
  cu_store(c, y->dtype, "y0", "i", val);
  cu_elementwise_end(c);
  return DPC_OK;
}

const cu_lower_fn cu_layout_table[DPC_OP_COUNT] = {
    [DPC_OP_TRANSPOSE] = lower_transpose,
    [DPC_OP_RESHAPE] = lower_copy,
    [DPC_OP_FLATTEN] = lower_copy,
    [DPC_OP_CONCAT] = lower_concat,
    [DPC_OP_SPLIT] = lower_split,
    [DPC_OP_SLICE] = lower_slice,
    [DPC_OP_SLICE_GRAD] = lower_slice_grad,
    [DPC_OP_GATHER] = lower_gather,
    [DPC_OP_GATHER_GRAD] = lower_gather_grad,
    [DPC_OP_EXPAND] = lower_expand,
};
