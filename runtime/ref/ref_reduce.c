/*
 * ref_reduce.c — reference kernels that combine many elements into one: softmax and
 * log_softmax along an axis, the two losses (softmax_cross_entropy, mse) and reduce_sum, mean
 * and max; and their gradients: softmax_grad, log_softmax_grad, softmax_cross_entropy_grad,
 * sum_to (the gradient of broadcasting) and expand (of the reductions).
 *
 * Accumulation is in double (or exact int64 for integer sums and maxima) in a local variable,
 * never in the output tensor, so a narrow output dtype costs one rounding at the end. Must not
 * allocate, keep state or print; a label outside its range is the user's error and is reported
 * through dpc_graph_fail_node.
 */
#include "runtime/ref/ref_internal.h"

/* ---- softmax and log_softmax ------------------------------------------------------------- */

/* Both are computed from x - max(x) so exp never overflows; a NaN anywhere in the row makes
 * the maximum NaN and hence the whole row NaN, as it would mathematically. */
static void softmax_like(const dpc_kernel_args *a, bool log_form) {
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  uint32_t rank = x->shape.rank;
  uint32_t ax = dpc_ref_axis(dpc_attrs_int(dpc_ref_attrs(a), "axis"), rank);
  int64_t outer = dpc_ref_prod(&x->shape, 0, ax), dim = x->shape.d[ax];
  int64_t inner = dpc_ref_prod(&x->shape, ax + 1, rank);
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * dim * inner + in;
      double m = -INFINITY, sum = 0;
      for (int64_t k = 0; k < dim; k++) {
        double v = dpc_tload(x, base + k * inner);
        if (v > m || v != v) m = v;
      }
      for (int64_t k = 0; k < dim; k++) sum += exp(dpc_tload(x, base + k * inner) - m);
      double lsum = log(sum);
      for (int64_t k = 0; k < dim; k++) {
        double z = dpc_tload(x, base + k * inner) - m;
        dpc_tstore(y, base + k * inner, log_form ? z - lsum : exp(z) / sum);
      }
    }
  }
}

dpc_status dpc_ref_softmax(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  softmax_like(a, false);
  return DPC_OK;
}

dpc_status dpc_ref_log_softmax(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  softmax_like(a, true);
  return DPC_OK;
}

/* dx = y * (dy - sum(dy * y)) for softmax, dx = dy - exp(y) * sum(dy) for log_softmax, with
 * y the forward output and the sums along the axis. */
static void softmax_grad_like(const dpc_kernel_args *a, bool log_form) {
  const dpc_tensor *dy = &a->in[0], *y = &a->in[1];
  dpc_tensor *dx = &a->out[0];
  uint32_t rank = dy->shape.rank;
  uint32_t ax = dpc_ref_axis(dpc_attrs_int(dpc_ref_attrs(a), "axis"), rank);
  int64_t outer = dpc_ref_prod(&dy->shape, 0, ax), dim = dy->shape.d[ax];
  int64_t inner = dpc_ref_prod(&dy->shape, ax + 1, rank);
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * dim * inner + in;
      double s = 0;
      for (int64_t k = 0; k < dim; k++) {
        double g = dpc_tload(dy, base + k * inner);
        s += log_form ? g : g * dpc_tload(y, base + k * inner);
      }
      for (int64_t k = 0; k < dim; k++) {
        double g = dpc_tload(dy, base + k * inner), v = dpc_tload(y, base + k * inner);
        dpc_tstore(dx, base + k * inner, log_form ? g - exp(v) * s : v * (g - s));
      }
    }
  }
}

dpc_status dpc_ref_softmax_grad(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  softmax_grad_like(a, false);
  return DPC_OK;
}

dpc_status dpc_ref_log_softmax_grad(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  softmax_grad_like(a, true);
  return DPC_OK;
}

/* ---- losses ------------------------------------------------------------------------------- */

/* The label check of softmax_cross_entropy and its gradient, with the same message. */
static dpc_status check_label(const dpc_kernel_args *a, int64_t lab, int64_t s, int64_t c,
                              dpc_diag *d) {
  if (lab >= 0 && lab < c) return DPC_OK;
  return dpc_graph_fail_node(a->g, a->node, d, DPC_ERR_RUNTIME,
                             "label %lld of sample %lld is outside [0, %lld)", (long long)lab,
                             (long long)s, (long long)c);
}

/* The maximum m of a row of c logits (NaN if any is NaN) and the sum of exp(v - m). */
static void row_max_sumexp(const dpc_tensor *logits, int64_t row, int64_t c, double *m,
                           double *sum) {
  double mx = -INFINITY, s = 0;
  for (int64_t k = 0; k < c; k++) {
    double v = dpc_tload(logits, row + k);
    if (v > mx || v != v) mx = v;
  }
  for (int64_t k = 0; k < c; k++) s += exp(dpc_tload(logits, row + k) - mx);
  *m = mx;
  *sum = s;
}

dpc_status dpc_ref_softmax_cross_entropy(const dpc_kernel_args *a, dpc_diag *d) {
  const dpc_tensor *logits = &a->in[0], *labels = &a->in[1];
  int64_t n = logits->shape.d[0], c = logits->shape.d[1];
  double total = 0;
  for (int64_t s = 0; s < n; s++) {
    int64_t lab = dpc_tload_i64(labels, s);
    dpc_status st = check_label(a, lab, s, c, d);
    if (st) return st;
    const int64_t row = s * c;
    double m, sum;
    row_max_sumexp(logits, row, c, &m, &sum);
    /* logsumexp(row) - row[label], with the max taken out of both terms. */
    total += log(sum) - (dpc_tload(logits, row + lab) - m);
  }
  /* The mean of no samples is undefined; NaN says so without dividing by zero. */
  dpc_tstore(&a->out[0], 0, n ? total / (double)n : NAN);
  return DPC_OK;
}

/* dlogits = (softmax(logits) - onehot(labels)) * dloss / N: the mean over N in the forward
 * puts the 1/N here. */
dpc_status dpc_ref_softmax_cross_entropy_grad(const dpc_kernel_args *a, dpc_diag *d) {
  const dpc_tensor *dloss = &a->in[0], *logits = &a->in[1], *labels = &a->in[2];
  dpc_tensor *dl = &a->out[0];
  int64_t n = logits->shape.d[0], c = logits->shape.d[1];
  double scale = n ? dpc_tload(dloss, 0) / (double)n : 0;
  for (int64_t s = 0; s < n; s++) {
    int64_t lab = dpc_tload_i64(labels, s);
    dpc_status st = check_label(a, lab, s, c, d);
    if (st) return st;
    const int64_t row = s * c;
    double m, sum;
    row_max_sumexp(logits, row, c, &m, &sum);
    for (int64_t k = 0; k < c; k++) {
      double p = exp(dpc_tload(logits, row + k) - m) / sum;
      dpc_tstore(dl, row + k, (p - (k == lab ? 1.0 : 0.0)) * scale);
    }
  }
  return DPC_OK;
}

dpc_status dpc_ref_mse(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *p = &a->in[0], *t = &a->in[1];
  int64_t n = dpc_tensor_numel(p);
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = dpc_tload(p, i) - dpc_tload(t, i);
    sum += e * e;
  }
  dpc_tstore(&a->out[0], 0, n ? sum / (double)n : NAN);
  return DPC_OK;
}

/* ---- reductions ---------------------------------------------------------------------------- */

/* Reduce x over the dims marked in red[] into y. Walks the output in order; for each output
 * element, walks the sub-box of reduced dimensions of the input. y's shape may hold 1s where
 * dims were reduced (keepdims, sum_to) or not: either way its order is that of the kept dims. */
static void reduce_into(const dpc_tensor *x, dpc_tensor *y, const bool *red, dpc_op op) {
  uint32_t rank = x->shape.rank;
  int64_t xst[DPC_MAX_RANK];
  dpc_shape_strides(&x->shape, xst);
  dpc_shape kept = {0}, cut = {0};
  int64_t kst[DPC_MAX_RANK], cst[DPC_MAX_RANK];
  for (uint32_t i = 0; i < rank; i++) {
    if (red[i])
      cst[cut.rank] = xst[i], cut.d[cut.rank++] = x->shape.d[i];
    else
      kst[kept.rank] = xst[i], kept.d[kept.rank++] = x->shape.d[i];
  }
  dpc_ref_iter outer, box;
  dpc_ref_iter_init(&outer, &kept, 0, 0);
  memcpy(outer.stride[0], kst, kept.rank * sizeof(int64_t));
  dpc_ref_iter_init(&box, &cut, 0, 0);
  memcpy(box.stride[0], cst, cut.rank * sizeof(int64_t));
  int64_t nout = dpc_shape_numel(&kept), ncut = dpc_shape_numel(&cut);
  bool ints = dpc_dtype_is_int(x->dtype);
  for (int64_t o = 0; o < nout; o++, dpc_ref_iter_next(&outer)) {
    dpc_ref_iter it = box;
    it.off[0] = outer.off[0];
    if (ints && op == DPC_OP_REDUCE_SUM) {
      uint64_t sum = 0; /* unsigned: wraps like NumPy instead of overflowing */
      for (int64_t k = 0; k < ncut; k++, dpc_ref_iter_next(&it))
        sum += (uint64_t)dpc_tload_i64(x, it.off[0]);
      dpc_tstore_i64(y, o, dpc_scalar_wrap(y->dtype, sum));
    } else if (ints) {
      /* The max of nothing is INT64_MIN, saturated to the dtype's minimum by the store. */
      int64_t m = INT64_MIN;
      for (int64_t k = 0; k < ncut; k++, dpc_ref_iter_next(&it)) {
        int64_t v = dpc_tload_i64(x, it.off[0]);
        if (v > m) m = v;
      }
      dpc_tstore_i64(y, o, m);
    } else if (op == DPC_OP_REDUCE_MAX) {
      double m = -INFINITY; /* NaN, once seen, stays: v > NaN is false */
      for (int64_t k = 0; k < ncut; k++, dpc_ref_iter_next(&it)) {
        double v = dpc_tload(x, it.off[0]);
        if (v > m || v != v) m = v;
      }
      dpc_tstore(y, o, m);
    } else {
      double sum = 0;
      for (int64_t k = 0; k < ncut; k++, dpc_ref_iter_next(&it)) sum += dpc_tload(x, it.off[0]);
      if (op == DPC_OP_REDUCE_MEAN) sum = ncut ? sum / (double)ncut : NAN;
      dpc_tstore(y, o, sum);
    }
  }
}

/* The axes attribute of a reduction (or of expand, against like's rank) as flags; all axes
 * when absent. */
static void axes_flags(const dpc_kernel_args *a, uint32_t rank, bool red[DPC_MAX_RANK]) {
  dpc_attrs at = dpc_ref_attrs(a);
  memset(red, 0, DPC_MAX_RANK * sizeof *red);
  if (dpc_attrs_get(at, "axes")) {
    int64_t axes[DPC_MAX_RANK];
    uint32_t n = dpc_attrs_ints(at, "axes", axes, DPC_MAX_RANK, 0);
    DPC_ASSERT(n <= DPC_MAX_RANK);
    for (uint32_t i = 0; i < n; i++) red[dpc_ref_axis(axes[i], rank)] = true;
  } else {
    for (uint32_t i = 0; i < rank; i++) red[i] = true;
  }
}

static void reduce(const dpc_kernel_args *a, dpc_op op) {
  bool red[DPC_MAX_RANK];
  axes_flags(a, a->in[0].shape.rank, red);
  reduce_into(&a->in[0], &a->out[0], red, op);
}

dpc_status dpc_ref_reduce_sum(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  reduce(a, DPC_OP_REDUCE_SUM);
  return DPC_OK;
}

dpc_status dpc_ref_reduce_mean(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  reduce(a, DPC_OP_REDUCE_MEAN);
  return DPC_OK;
}

dpc_status dpc_ref_reduce_max(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  reduce(a, DPC_OP_REDUCE_MAX);
  return DPC_OK;
}

/* ---- gradients of broadcasting and reducing ------------------------------------------------ */

/* sum_to(x, like): a reduce_sum of x over its leading extra dims and over the dims where like
 * (the output's shape) has 1 and x does not. */
dpc_status dpc_ref_sum_to(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  uint32_t lead = x->shape.rank - y->shape.rank;
  bool red[DPC_MAX_RANK] = {0};
  for (uint32_t i = 0; i < x->shape.rank; i++)
    red[i] = i < lead || (y->shape.d[i - lead] == 1 && x->shape.d[i] != 1);
  reduce_into(x, y, red, DPC_OP_REDUCE_SUM);
  return DPC_OK;
}

/* expand(x, like): every output element reads x at its own position with the coordinates on the
 * expanded axes dropped (x without those dims) or zeroed (x with 1s there); both are a stride
 * of 0 along those axes. mean=1 divides by the number of repeats. */
dpc_status dpc_ref_expand(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  uint32_t rank = y->shape.rank;
  bool in_a[DPC_MAX_RANK];
  axes_flags(a, rank, in_a);
  bool kept = x->shape.rank == rank, mean = dpc_attrs_int(dpc_ref_attrs(a), "mean") != 0;
  int64_t xst[DPC_MAX_RANK];
  dpc_shape_strides(&x->shape, xst);
  dpc_ref_iter it;
  dpc_ref_iter_init(&it, &y->shape, 0, 0);
  double repeats = 1;
  for (uint32_t i = 0, j = 0; i < rank; i++) {
    if (in_a[i]) {
      repeats *= (double)y->shape.d[i];
      j += kept; /* x's dim of size 1 here is skipped; a dropped one was never there */
      continue;
    }
    it.stride[0][i] = xst[j++];
  }
  int64_t n = dpc_tensor_numel(y);
  for (int64_t i = 0; i < n; i++, dpc_ref_iter_next(&it)) {
    if (mean)
      dpc_tstore(y, i, dpc_tload(x, it.off[0]) / repeats);
    else
      dpc_ref_move(y, i, x, it.off[0], 1); /* exact for every dtype */
  }
  return DPC_OK;
}
