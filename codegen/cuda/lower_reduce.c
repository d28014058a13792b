/*
 * lower_reduce.c — CUDA kernels that combine many elements into one: reduce_sum, reduce_mean,
 * reduce_max and sum_to; softmax and log_softmax and their gradients; the losses
 * (softmax_cross_entropy and its gradient, mse); layer_norm and batch_norm.
 *
 * One block per result (an output element, a row, a channel): its threads stride over the
 * elements combined and meet in the prelude's dpc_block_sum / dpc_block_max (warp shuffles,
 * then shared memory). The order of a sum is fixed by the block size, so a result is the same
 * run to run. Formulas follow runtime/ref/ref_reduce.c and ref_nn.c; sums of f32 are kept in
 * float (the reference keeps double), well inside the op tests' tolerance.
 */
#include "codegen/cuda/cu.h"

#include <stdio.h>
#include <string.h>

/* The accumulator type of a floating dtype. */
static const char *acc_type(dpc_dtype t) {
  return t == DPC_F64 ? "double" : "float";
}
static const char *fsuf(dpc_dtype t) {
  return t == DPC_F64 ? "" : "f";
}
static const char *inf_of(dpc_dtype t) {
  return t == DPC_F64 ? "DPC_INF_D" : "DPC_INF_F";
}
static const char *nan_of(dpc_dtype t) {
  return t == DPC_F64 ? "DPC_NAN_D" : "DPC_NAN_F";
}

static uint32_t red_grid(int64_t n) {
  return (uint32_t)(n < 1 ? 1 : n > 65535 ? 65535 : n);
}

/* `long long var` = the offset of element `idx` of a box of dims[0..rank) walked row-major,
 * dimension k moving by strides[k]. */
static void box_offset(cu_gen *c, const int64_t *dims, const int64_t *strides, uint32_t rank,
                       const char *idx, const char *var) {
  cu_printf(c, "    long long %s = 0;\n    { long long r = %s;\n", var, idx);
  for (uint32_t k = rank; k-- > 0;)
    cu_printf(c, "      %s += (r %% %lldll) * %lldll; r /= %lldll;\n", var,
              (long long)(dims[k] ? dims[k] : 1), (long long)strides[k],
              (long long)(dims[k] ? dims[k] : 1));
  cu_printf(c, "      (void)r; }\n");
}

/* Reduce x (input 0) over the dims flagged in red[] into y (output 0), in the order of the
 * kept dims: one block per output element. */
static dpc_status reduce_into(cu_gen *c, const bool *red, dpc_op op, dpc_diag *d) {
  (void)d;
  const dpc_value *x = cu_in(c, 0), *y = cu_out(c, 0);
  int64_t xst[DPC_MAX_RANK], kd[DPC_MAX_RANK], ks[DPC_MAX_RANK], cd[DPC_MAX_RANK], cs[DPC_MAX_RANK];
  uint32_t nk = 0, nc = 0;
  dpc_shape_strides(&x->shape, xst);
  for (uint32_t i = 0; i < x->shape.rank; i++) {
    if (red[i])
      cd[nc] = x->shape.d[i], cs[nc++] = xst[i];
    else
      kd[nk] = x->shape.d[i], ks[nk++] = xst[i];
  }
  int64_t nout = 1, ncut = 1;
  for (uint32_t i = 0; i < nk; i++) nout *= kd[i];
  for (uint32_t i = 0; i < nc; i++) ncut *= cd[i];
  bool ints = dpc_dtype_is_int(x->dtype);
  /* float sums are kept in double, as the reference keeps them */
  const char *A = ints ? (op == DPC_OP_REDUCE_SUM ? "unsigned long long" : "long long")
                  : op == DPC_OP_REDUCE_MAX ? acc_type(x->dtype)
                                            : "double";
  /* each thread sums a contiguous run of at least 32 elements in order, so a short reduction
   * is one thread's sequential sum (the reference's order, which decides sums like
   * 1e30 + 1 - 1e30) and a long one combines 128 in-order partial sums */
  int64_t chunk = (ncut + CU_RED_BLOCK - 1) / CU_RED_BLOCK;
  if (chunk < 32) chunk = 32;
  cu_kernel_begin(c, "", red_grid(nout), CU_RED_BLOCK);
  cu_printf(c, "  for (long long o = blockIdx.x; o < %lldll; o += gridDim.x) {\n", (long long)nout);
  box_offset(c, kd, ks, nk, "o", "base");
  char init[64];
  if (op != DPC_OP_REDUCE_MAX)
    snprintf(init, sizeof init, "(%s)0", A);
  else if (ints)
    snprintf(init, sizeof init, "%s",
             x->dtype == DPC_I32 ? "(-2147483647ll - 1)" : "(-9223372036854775807ll - 1)");
  else
    snprintf(init, sizeof init, "-%s", inf_of(x->dtype));
  cu_printf(c, "    %s acc = %s;\n", A, init);
  cu_printf(c,
            "    for (long long k = threadIdx.x * %lldll; k < (threadIdx.x + 1) * %lldll && k < "
            "%lldll; k++) {\n",
            (long long)chunk, (long long)chunk, (long long)ncut);
  box_offset(c, cd, cs, nc, "k", "off");
  cu_expr v = cu_load(x->dtype, "x0", "base + off");
  if (op == DPC_OP_REDUCE_MAX)
    cu_printf(c, "      acc = dpc_max<%s>(acc, (%s)(%s));\n", A, A, v.s);
  else
    cu_printf(c, "      acc += (%s)(%s);\n", A, v.s);
  cu_printf(c, "    }\n");
  if (op == DPC_OP_REDUCE_MAX)
    cu_printf(c, "    acc = dpc_block_max<%s>(acc, %s);\n", A, init);
  else
    cu_printf(c, "    acc = dpc_block_sum<%s>(acc);\n", A);
  cu_printf(c, "    if (threadIdx.x == 0) {\n");
  char val[256];
  if (ints && op == DPC_OP_REDUCE_SUM)
    snprintf(val, sizeof val, "(%s)acc", cu_store_type(y->dtype)); /* wraps like NumPy */
  else
    snprintf(val, sizeof val, "acc");
  if (op == DPC_OP_REDUCE_MEAN) {
    if (ncut)
      snprintf(val, sizeof val, "(%s)(acc / (%s)%lld)", A, A, (long long)ncut);
    else
      snprintf(val, sizeof val, "%s", nan_of(x->dtype));
  }
  cu_store(c, y->dtype, "y0", "o", val);
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

static void axes_flags(cu_gen *c, uint32_t rank, bool *red) {
  memset(red, 0, DPC_MAX_RANK * sizeof *red);
  if (dpc_attrs_get(c->at, "axes")) {
    int64_t axes[DPC_MAX_RANK];
    uint32_t n = dpc_attrs_ints(c->at, "axes", axes, DPC_MAX_RANK, 0);
    for (uint32_t i = 0; i < n && i < DPC_MAX_RANK; i++) {
      uint32_t ax = 0;
      if (dpc_axis_norm(axes[i], rank, &ax)) red[ax] = true;
    }
  } else {
    for (uint32_t i = 0; i < rank; i++) red[i] = true;
  }
}

static dpc_status lower_reduce(cu_gen *c, dpc_diag *d) {
  bool red[DPC_MAX_RANK];
  axes_flags(c, cu_in(c, 0)->shape.rank, red);
  return reduce_into(c, red, c->n->op, d);
}

/* sum_to(x, like): reduce_sum over x's leading extra dims and where like has 1 and x not. */
static dpc_status lower_sum_to(cu_gen *c, dpc_diag *d) {
  const dpc_shape *xs = &cu_in(c, 0)->shape, *ys = &cu_out(c, 0)->shape;
  uint32_t lead = xs->rank - ys->rank;
  bool red[DPC_MAX_RANK] = {0};
  for (uint32_t i = 0; i < xs->rank; i++)
    red[i] = i < lead || (ys->d[i - lead] == 1 && xs->d[i] != 1);
  return reduce_into(c, red, DPC_OP_REDUCE_SUM, d);
}

/* An axis attribute the shape rule accepted, made non-negative. */
static uint32_t axis_of(cu_gen *c, uint32_t rank) {
  uint32_t ax = 0;
  dpc_axis_norm(dpc_attrs_int(c->at, "axis"), rank, &ax);
  return ax;
}

/* The frame of a kernel over rows along `axis` of shape s: one block per (outer, inner) pair,
 * `base` the row's first element and `S` the step between its elements. */
static void rows_begin(cu_gen *c, const dpc_shape *s, uint32_t ax, int64_t *dim) {
  int64_t outer = 1, inner = 1;
  for (uint32_t i = 0; i < ax; i++) outer *= s->d[i];
  for (uint32_t i = ax + 1; i < s->rank; i++) inner *= s->d[i];
  *dim = s->d[ax];
  cu_kernel_begin(c, "", red_grid(outer * inner), CU_RED_BLOCK);
  cu_printf(c, "  for (long long row = blockIdx.x; row < %lldll; row += gridDim.x) {\n",
            (long long)(outer * inner));
  cu_printf(c, "    const long long S = %lldll;\n", (long long)inner);
  cu_printf(c, "    long long base = (row / S) * %lldll * S + row %% S;\n", (long long)*dim);
}

static void rows_end(cu_gen *c) {
  cu_printf(c, "  }\n");
  cu_kernel_end(c);
}

/* softmax and log_softmax from x - max(x); a NaN makes the max, and so the row, NaN. */
static dpc_status lower_softmax(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *x = cu_in(c, 0), *y = cu_out(c, 0);
  const char *A = acc_type(x->dtype), *f = fsuf(x->dtype);
  bool log_form = c->n->op == DPC_OP_LOG_SOFTMAX;
  int64_t dim;
  rows_begin(c, &x->shape, axis_of(c, x->shape.rank), &dim);
  cu_expr v = cu_load(x->dtype, "x0", "base + k * S");
  cu_printf(c, "    %s m = -%s;\n", A, inf_of(x->dtype));
  cu_printf(c, "    for (long long k = threadIdx.x; k < %lldll; k += blockDim.x)\n",
            (long long)dim);
  cu_printf(c, "      m = dpc_max<%s>(m, (%s)(%s));\n", A, A, v.s);
  cu_printf(c, "    m = dpc_block_max<%s>(m, -%s);\n", A, inf_of(x->dtype));
  cu_printf(c, "    %s s = 0;\n", A);
  cu_printf(c, "    for (long long k = threadIdx.x; k < %lldll; k += blockDim.x)\n",
            (long long)dim);
  cu_printf(c, "      s += exp%s((%s)(%s) - m);\n", f, A, v.s);
  cu_printf(c, "    s = dpc_block_sum<%s>(s);\n", A);
  cu_printf(c, "    %s ls = log%s(s);\n    (void)ls;\n", A, f);
  cu_printf(c, "    for (long long k = threadIdx.x; k < %lldll; k += blockDim.x) {\n",
            (long long)dim);
  cu_printf(c, "      %s z = (%s)(%s) - m;\n", A, A, v.s);
  char val[64];
  snprintf(val, sizeof val, log_form ? "z - ls" : "exp%s(z) / s", f);
  cu_store(c, y->dtype, "y0", "base + k * S", val);
  cu_printf(c, "    }\n");
  rows_end(c);
  return DPC_OK;
}

/* dx = y * (dy - sum(dy * y)) for softmax; dx = dy - exp(y) * sum(dy) for log_softmax. */
static dpc_status lower_softmax_grad(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *dy = cu_in(c, 0), *y = cu_in(c, 1), *dx = cu_out(c, 0);
  const char *A = acc_type(dx->dtype), *f = fsuf(dx->dtype);
  bool log_form = c->n->op == DPC_OP_LOG_SOFTMAX_GRAD;
  int64_t dim;
  rows_begin(c, &dy->shape, axis_of(c, dy->shape.rank), &dim);
  cu_expr g = cu_load(dy->dtype, "x0", "base + k * S"), v = cu_load(y->dtype, "x1", "base + k * S");
  cu_printf(c, "    %s s = 0;\n", A);
  cu_printf(c, "    for (long long k = threadIdx.x; k < %lldll; k += blockDim.x)\n",
            (long long)dim);
  if (log_form)
    cu_printf(c, "      s += (%s)(%s);\n", A, g.s);
  else
    cu_printf(c, "      s += (%s)(%s) * (%s)(%s);\n", A, g.s, A, v.s);
  cu_printf(c, "    s = dpc_block_sum<%s>(s);\n", A);
  cu_printf(c, "    for (long long k = threadIdx.x; k < %lldll; k += blockDim.x) {\n",
            (long long)dim);
  cu_printf(c, "      %s gv = (%s)(%s), yv = (%s)(%s);\n", A, A, g.s, A, v.s);
  char val[128];
  snprintf(val, sizeof val, log_form ? "gv - exp%s(yv) * s" : "yv * (gv - s)", f);
  cu_store(c, dx->dtype, "y0", "base + k * S", val);
  cu_printf(c, "    }\n");
  rows_end(c);
  return DPC_OK;
}

/* The max m and sum of exp(x - m) of row `row` of logits x<xi> with C columns, into m and s. */
static void row_max_sumexp(cu_gen *c, dpc_dtype t, const char *ptr, int64_t C) {
  const char *A = acc_type(t), *f = fsuf(t);
  cu_expr v = cu_load(t, ptr, "row * C + k");
  cu_printf(c, "    const long long C = %lldll;\n", (long long)C);
  cu_printf(c, "    %s m = -%s;\n", A, inf_of(t));
  cu_printf(c, "    for (long long k = threadIdx.x; k < C; k += blockDim.x)\n");
  cu_printf(c, "      m = dpc_max<%s>(m, (%s)(%s));\n", A, A, v.s);
  cu_printf(c, "    m = dpc_block_max<%s>(m, -%s);\n", A, inf_of(t));
  cu_printf(c, "    %s s = 0;\n", A);
  cu_printf(c, "    for (long long k = threadIdx.x; k < C; k += blockDim.x)\n");
  cu_printf(c, "      s += exp%s((%s)(%s) - m);\n", f, A, v.s);
  cu_printf(c, "    s = dpc_block_sum<%s>(s);\n", A);
}

/* mean over N of logsumexp(row) - row[label]; one block walks the rows (a label outside
 * [0, C) makes the loss NaN, where the reference backend fails the run). */
static dpc_status lower_sce(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *x = cu_in(c, 0), *lab = cu_in(c, 1), *y = cu_out(c, 0);
  const char *A = acc_type(x->dtype), *f = fsuf(x->dtype);
  int64_t N = x->shape.d[0], C = x->shape.d[1];
  cu_kernel_begin(c, "", 1, CU_RED_BLOCK);
  cu_printf(c, "  %s total = 0;\n", A);
  cu_printf(c, "  for (long long row = 0; row < %lldll; row++) {\n", (long long)N);
  row_max_sumexp(c, x->dtype, "x0", C);
  cu_printf(c, "    long long lab = (long long)x1[row];\n");
  (void)lab;
  cu_expr v = cu_load(x->dtype, "x0", "row * C + lab");
  cu_printf(c, "    if (lab < 0 || lab >= C) total += %s;\n", nan_of(x->dtype));
  cu_printf(c, "    else total += log%s(s) - ((%s)(%s) - m);\n  }\n", f, A, v.s);
  char val[160];
  if (N)
    snprintf(val, sizeof val, "total / (%s)%lld", A, (long long)N);
  else
    snprintf(val, sizeof val, "%s", nan_of(x->dtype));
  cu_printf(c, "  if (threadIdx.x == 0) {\n");
  cu_store(c, y->dtype, "y0", "0", val);
  cu_printf(c, "  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

/* dlogits = (softmax(logits) - onehot(label)) * dloss / N, one block per row. */
static dpc_status lower_sce_grad(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *dl = cu_in(c, 0), *x = cu_in(c, 1), *y = cu_out(c, 0);
  const char *A = acc_type(x->dtype), *f = fsuf(x->dtype);
  int64_t N = x->shape.d[0], C = x->shape.d[1];
  cu_kernel_begin(c, "", red_grid(N), CU_RED_BLOCK);
  cu_printf(c, "  for (long long row = blockIdx.x; row < %lldll; row += gridDim.x) {\n",
            (long long)N);
  row_max_sumexp(c, x->dtype, "x1", C);
  cu_expr g = cu_load(dl->dtype, "x0", "0"), v = cu_load(x->dtype, "x1", "row * C + k");
  cu_printf(c, "    %s scale = (%s)(%s) / (%s)%lld;\n", A, A, g.s, A, (long long)(N ? N : 1));
  cu_printf(c, "    long long lab = (long long)x2[row];\n");
  cu_printf(c, "    for (long long k = threadIdx.x; k < C; k += blockDim.x) {\n");
  char val[700];
  snprintf(val, sizeof val,
           "(lab < 0 || lab >= C) ? %s : (exp%s((%s)(%s) - m) / s - (k == lab ? (%s)1 : (%s)0)) "
           "* scale",
           nan_of(x->dtype), f, A, v.s, A, A);
  cu_store(c, y->dtype, "y0", "row * C + k", val);
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

static dpc_status lower_mse(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *p = cu_in(c, 0), *t = cu_in(c, 1), *y = cu_out(c, 0);
  const char *A = acc_type(p->dtype);
  int64_t n = dpc_shape_numel(&p->shape);
  cu_kernel_begin(c, "", 1, CU_RED_BLOCK);
  cu_expr a = cu_load(p->dtype, "x0", "i"), b = cu_load(t->dtype, "x1", "i");
  cu_printf(c, "  %s s = 0;\n", A);
  cu_printf(c, "  for (long long i = threadIdx.x; i < %lldll; i += blockDim.x) {\n", (long long)n);
  cu_printf(c, "    %s e = (%s)(%s) - (%s)(%s);\n    s += e * e;\n  }\n", A, A, a.s, A, b.s);
  cu_printf(c, "  s = dpc_block_sum<%s>(s);\n  if (threadIdx.x == 0) {\n", A);
  char val[96];
  if (n)
    snprintf(val, sizeof val, "s / (%s)%lld", A, (long long)n);
  else
    snprintf(val, sizeof val, "%s", nan_of(p->dtype));
  cu_store(c, y->dtype, "y0", "0", val);
  cu_printf(c, "  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

/* Normalise each row of dims [axis, rank): mean, then squared deviations (two passes, a
 * variance that cannot go negative), then scale and bias. */
static dpc_status lower_layer_norm(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *x = cu_in(c, 0), *sc = cu_in(c, 1), *y = cu_out(c, 0);
  const char *A = "double", *f = ""; /* statistics in double, as the reference */
  uint32_t ax = axis_of(c, x->shape.rank);
  int64_t outer = 1, inner = 1;
  for (uint32_t i = 0; i < ax; i++) outer *= x->shape.d[i];
  for (uint32_t i = ax; i < x->shape.rank; i++) inner *= x->shape.d[i];
  double eps = dpc_attrs_float(c->at, "epsilon");
  cu_kernel_begin(c, "", red_grid(outer), CU_RED_BLOCK);
  cu_printf(c,
            "  for (long long row = blockIdx.x; row < %lldll && %lldll > 0; row += gridDim.x) {\n",
            (long long)outer, (long long)inner);
  cu_printf(c, "    const long long R = %lldll, base = row * R;\n", (long long)inner);
  cu_expr v = cu_load(x->dtype, "x0", "base + j"), s = cu_load(sc->dtype, "x1", "j");
  cu_printf(c, "    %s sum = 0;\n", A);
  cu_printf(c, "    for (long long j = threadIdx.x; j < R; j += blockDim.x) sum += (%s)(%s);\n", A,
            v.s);
  cu_printf(c, "    %s m = dpc_block_sum<%s>(sum) / (%s)R;\n", A, A, A);
  cu_printf(c, "    %s sq = 0;\n", A);
  cu_printf(c, "    for (long long j = threadIdx.x; j < R; j += blockDim.x) {\n");
  cu_printf(c, "      %s e = (%s)(%s) - m;\n      sq += e * e;\n    }\n", A, A, v.s);
  cu_printf(c, "    %s den = sqrt%s(dpc_block_sum<%s>(sq) / (%s)R + (%s)%.17g);\n", A, f, A, A, A,
            eps);
  cu_printf(c, "    for (long long j = threadIdx.x; j < R; j += blockDim.x) {\n");
  cu_printf(c, "      %s r = ((%s)(%s) - m) / den * (%s)(%s);\n", A, A, v.s, A, s.s);
  if (c->n->n_in > 2) {
    cu_expr b = cu_load(cu_in(c, 2)->dtype, "x2", "j");
    cu_printf(c, "      r += (%s)(%s);\n", A, b.s);
  }
  cu_store(c, y->dtype, "y0", "base + j", "r");
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

/* One block per channel: the batch statistics in training (running ones otherwise), y, and
 * the running statistics to store back (read before written: they may share a buffer). */
static dpc_status lower_batch_norm(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *x = cu_in(c, 0);
  const char *A = "double", *f = ""; /* statistics in double, as the reference */
  bool training = c->training;
  if (dpc_attrs_get(c->at, "training")) training = dpc_attrs_int(c->at, "training") != 0;
  double eps = dpc_attrs_float(c->at, "epsilon"), mom = dpc_attrs_float(c->at, "momentum");
  int64_t n = x->shape.d[0], ch = x->shape.d[1], sp = 1;
  for (uint32_t i = 2; i < x->shape.rank; i++) sp *= x->shape.d[i];
  int64_t count = n * sp;
  cu_kernel_begin(c, "", red_grid(ch), CU_RED_BLOCK);
  cu_printf(c, "  for (long long ch = blockIdx.x; ch < %lldll; ch += gridDim.x) {\n",
            (long long)ch);
  cu_printf(c, "    const long long C = %lldll, SP = %lldll, CNT = %lldll;\n", (long long)ch,
            (long long)sp, (long long)count);
  cu_expr rm = cu_load(cu_in(c, 3)->dtype, "x3", "ch"),
          rv = cu_load(cu_in(c, 4)->dtype, "x4", "ch");
  cu_printf(c, "    %s rm = (%s)(%s), rv = (%s)(%s), m = rm, v = rv;\n", A, A, rm.s, A, rv.s);
  cu_printf(c, "    __syncthreads();\n"); /* every thread has read them before any writes */
  cu_expr xv = cu_load(x->dtype, "x0", "((k / SP) * C + ch) * SP + k % SP");
  if (training) {
    cu_printf(c, "    %s sum = 0, sq = 0;\n", A);
    cu_printf(c, "    for (long long k = threadIdx.x; k < CNT; k += blockDim.x) sum += (%s)(%s);\n",
              A, xv.s);
    cu_printf(c, "    sum = dpc_block_sum<%s>(sum);\n", A);
    cu_printf(c, "    m = CNT ? sum / (%s)CNT : %s;\n", A, nan_of(x->dtype));
    cu_printf(c, "    for (long long k = threadIdx.x; k < CNT; k += blockDim.x) {\n");
    cu_printf(c, "      %s e = (%s)(%s) - m;\n      sq += e * e;\n    }\n", A, A, xv.s);
    cu_printf(c, "    sq = dpc_block_sum<%s>(sq);\n", A);
    cu_printf(c, "    v = CNT ? sq / (%s)CNT : %s;\n", A, nan_of(x->dtype));
  }
  cu_expr sc = cu_load(cu_in(c, 1)->dtype, "x1", "ch"),
          bi = cu_load(cu_in(c, 2)->dtype, "x2", "ch");
  cu_printf(c, "    %s sc = (%s)(%s), bi = (%s)(%s), den = sqrt%s(v + (%s)%.17g);\n", A, A, sc.s, A,
            bi.s, f, A, eps);
  cu_printf(c, "    for (long long k = threadIdx.x; k < CNT; k += blockDim.x) {\n");
  cu_printf(c, "      long long i = ((k / SP) * C + ch) * SP + k %% SP;\n");
  cu_expr xi = cu_load(x->dtype, "x0", "i");
  char val[700];
  snprintf(val, sizeof val, "sc * ((%s)(%s) - m) / den + bi", A, xi.s);
  cu_store(c, cu_out(c, 0)->dtype, "y0", "i", val);
  cu_printf(c, "    }\n    if (threadIdx.x == 0) {\n");
  char vm[160], vv[160];
  if (training) {
    snprintf(vm, sizeof vm, "(%s)%.17g * rm + (%s)%.17g * m", A, mom, A, 1 - mom);
    snprintf(vv, sizeof vv, "(%s)%.17g * rv + (%s)%.17g * v", A, mom, A, 1 - mom);
  } else {
    snprintf(vm, sizeof vm, "rm");
    snprintf(vv, sizeof vv, "rv");
  }
  cu_store(c, cu_out(c, 1)->dtype, "y1", "ch", vm);
  cu_store(c, cu_out(c, 2)->dtype, "y2", "ch", vv);
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

/* Per channel over M = N * spatial elements, xhat = (x - mu) * rstd: dbias = sum dy, dscale =
 * sum dy * xhat; dx = scale * rstd * (dy - dbias/M - xhat * dscale/M) in training (batch
 * statistics), scale * rstd * dy otherwise. One block per channel. */
static dpc_status lower_batch_norm_grad(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *dy = cu_in(c, 0), *x = cu_in(c, 1);
  const char *A = "double", *f = ""; /* statistics in double, as the reference */
  bool training = c->training;
  if (dpc_attrs_get(c->at, "training")) training = dpc_attrs_int(c->at, "training") != 0;
  double eps = dpc_attrs_float(c->at, "epsilon");
  int64_t n = x->shape.d[0], ch = x->shape.d[1], sp = 1;
  for (uint32_t i = 2; i < x->shape.rank; i++) sp *= x->shape.d[i];
  int64_t count = n * sp;
  cu_kernel_begin(c, "", red_grid(ch), CU_RED_BLOCK);
  cu_printf(c, "  for (long long ch = blockIdx.x; ch < %lldll; ch += gridDim.x) {\n",
            (long long)ch);
  cu_printf(c, "    const long long C = %lldll, SP = %lldll, CNT = %lldll;\n", (long long)ch,
            (long long)sp, (long long)count);
  cu_expr mi = cu_load(cu_in(c, 3)->dtype, "x3", "ch"),
          vi = cu_load(cu_in(c, 4)->dtype, "x4", "ch");
  cu_printf(c, "    %s m = (%s)(%s), v = (%s)(%s);\n", A, A, mi.s, A, vi.s);
  cu_expr xv = cu_load(x->dtype, "x1", "((k / SP) * C + ch) * SP + k % SP");
  cu_expr gv = cu_load(dy->dtype, "x0", "((k / SP) * C + ch) * SP + k % SP");
  if (training && count) {
    cu_printf(c, "    %s sum = 0, sq = 0;\n", A);
    cu_printf(c, "    for (long long k = threadIdx.x; k < CNT; k += blockDim.x) sum += (%s)(%s);\n",
              A, xv.s);
    cu_printf(c, "    m = dpc_block_sum<%s>(sum) / (%s)CNT;\n", A, A);
    cu_printf(c, "    for (long long k = threadIdx.x; k < CNT; k += blockDim.x) {\n");
    cu_printf(c, "      %s e = (%s)(%s) - m;\n      sq += e * e;\n    }\n", A, A, xv.s);
    cu_printf(c, "    v = dpc_block_sum<%s>(sq) / (%s)CNT;\n", A, A);
  }
  cu_printf(c, "    %s rstd = (%s)1 / sqrt%s(v + (%s)%.17g), sb = 0, ss = 0;\n", A, A, f, A, eps);
  cu_printf(c, "    for (long long k = threadIdx.x; k < CNT; k += blockDim.x) {\n");
  cu_printf(
      c, "      %s g = (%s)(%s);\n      sb += g;\n      ss += g * ((%s)(%s) - m) * rstd;\n    }\n",
      A, A, gv.s, A, xv.s);
  cu_printf(c, "    sb = dpc_block_sum<%s>(sb);\n    ss = dpc_block_sum<%s>(ss);\n", A, A);
  cu_expr sc = cu_load(cu_in(c, 2)->dtype, "x2", "ch");
  cu_printf(c, "    %s kk = (%s)(%s) * rstd;\n", A, A, sc.s);
  cu_printf(c, "    for (long long k = threadIdx.x; k < CNT; k += blockDim.x) {\n");
  cu_printf(c, "      long long i = ((k / SP) * C + ch) * SP + k %% SP;\n");
  cu_printf(c, "      %s g = (%s)(%s), xh = ((%s)(%s) - m) * rstd;\n", A, A, gv.s, A, xv.s);
  cu_printf(c, "      (void)xh;\n");
  char val[200];
  if (training)
    snprintf(val, sizeof val, "kk * (g - sb / (%s)CNT - xh * ss / (%s)CNT)", A, A);
  else
    snprintf(val, sizeof val, "kk * g");
  cu_store(c, cu_out(c, 0)->dtype, "y0", "i", val);
  cu_printf(c, "    }\n    if (threadIdx.x == 0) {\n");
  cu_store(c, cu_out(c, 1)->dtype, "y1", "ch", "ss");
  cu_store(c, cu_out(c, 2)->dtype, "y2", "ch", "sb");
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

/* Mean m and rstd of row `row` (R elements of x1), by the whole block. */
static void ln_row_stats(cu_gen *c, dpc_dtype t, const char *A, const char *f, double eps) {
  cu_expr v = cu_load(t, "x1", "row * R + j");
  cu_printf(c, "    %s sum = 0, sq = 0;\n", A);
  cu_printf(c, "    for (long long j = threadIdx.x; j < R; j += blockDim.x) sum += (%s)(%s);\n", A,
            v.s);
  cu_printf(c, "    %s m = dpc_block_sum<%s>(sum) / (%s)R;\n", A, A, A);
  cu_printf(c, "    for (long long j = threadIdx.x; j < R; j += blockDim.x) {\n");
  cu_printf(c, "      %s e = (%s)(%s) - m;\n      sq += e * e;\n    }\n", A, A, v.s);
  cu_printf(c, "    %s rstd = (%s)1 / sqrt%s(dpc_block_sum<%s>(sq) / (%s)R + (%s)%.17g);\n", A, A,
            f, A, A, A, eps);
}

/* Two kernels. rows: one block per row, g = dy * scale, dx = rstd * (g - mean(g) - xhat *
 * mean(g * xhat)). cols: one block per column, dscale = sum dy * xhat and dbias = sum dy over
 * the rows, each row's statistics recomputed by the block (no scratch memory to keep them). */
static dpc_status lower_layer_norm_grad(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *dy = cu_in(c, 0), *x = cu_in(c, 1), *sc = cu_in(c, 2);
  const char *A = "double", *f = ""; /* statistics in double, as the reference */
  uint32_t ax = axis_of(c, x->shape.rank);
  int64_t outer = 1, inner = 1;
  for (uint32_t i = 0; i < ax; i++) outer *= x->shape.d[i];
  for (uint32_t i = ax; i < x->shape.rank; i++) inner *= x->shape.d[i];
  double eps = dpc_attrs_float(c->at, "epsilon");
  cu_expr gv = cu_load(dy->dtype, "x0", "row * R + j"), xv = cu_load(x->dtype, "x1", "row * R + j");
  cu_expr sv = cu_load(sc->dtype, "x2", "j");
  cu_kernel_begin(c, "rows", red_grid(outer), CU_RED_BLOCK);
  cu_printf(c, "  const long long R = %lldll;\n", (long long)inner);
  cu_printf(c, "  for (long long row = blockIdx.x; row < %lldll && R > 0; row += gridDim.x) {\n",
            (long long)outer);
  ln_row_stats(c, x->dtype, A, f, eps);
  cu_printf(c, "    %s mg = 0, mgx = 0;\n", A);
  cu_printf(c, "    for (long long j = threadIdx.x; j < R; j += blockDim.x) {\n");
  cu_printf(c, "      %s g = (%s)(%s) * (%s)(%s);\n      mg += g;\n", A, A, gv.s, A, sv.s);
  cu_printf(c, "      mgx += g * ((%s)(%s) - m) * rstd;\n    }\n", A, xv.s);
  cu_printf(c,
            "    mg = dpc_block_sum<%s>(mg) / (%s)R;\n    mgx = dpc_block_sum<%s>(mgx) / (%s)R;\n",
            A, A, A, A);
  cu_printf(c, "    for (long long j = threadIdx.x; j < R; j += blockDim.x) {\n");
  cu_printf(c, "      %s g = (%s)(%s) * (%s)(%s), xh = ((%s)(%s) - m) * rstd;\n", A, A, gv.s, A,
            sv.s, A, xv.s);
  cu_store(c, cu_out(c, 0)->dtype, "y0", "row * R + j", "rstd * (g - mg - xh * mgx)");
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);

  cu_kernel_begin(c, "cols", red_grid(inner), CU_RED_BLOCK);
  cu_printf(c, "  const long long R = %lldll;\n", (long long)inner);
  cu_printf(c, "  for (long long col = blockIdx.x; col < R; col += gridDim.x) {\n");
  cu_printf(c, "    %s ss = 0, sb = 0;\n", A);
  cu_printf(c, "    for (long long row = 0; row < %lldll; row++) {\n", (long long)outer);
  ln_row_stats(c, x->dtype, A, f, eps);
  cu_expr g1 = cu_load(dy->dtype, "x0", "row * R + col"),
          x1 = cu_load(x->dtype, "x1", "row * R + col");
  cu_printf(c, "      if (threadIdx.x == 0) {\n");
  cu_printf(c, "        %s g = (%s)(%s);\n        sb += g;\n", A, A, g1.s);
  cu_printf(c, "        ss += g * ((%s)(%s) - m) * rstd;\n      }\n    }\n", A, x1.s);
  cu_printf(c, "    if (threadIdx.x == 0) {\n");
  cu_store(c, cu_out(c, 1)->dtype, "y1", "col", "ss");
  cu_store(c, cu_out(c, 2)->dtype, "y2", "col", "sb");
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

const cu_lower_fn cu_reduce_table[DPC_OP_COUNT] = {
    [DPC_OP_REDUCE_SUM] = lower_reduce,
    [DPC_OP_REDUCE_MEAN] = lower_reduce,
    [DPC_OP_REDUCE_MAX] = lower_reduce,
    [DPC_OP_SUM_TO] = lower_sum_to,
    [DPC_OP_SOFTMAX] = lower_softmax,
    [DPC_OP_LOG_SOFTMAX] = lower_softmax,
    [DPC_OP_SOFTMAX_GRAD] = lower_softmax_grad,
    [DPC_OP_LOG_SOFTMAX_GRAD] = lower_softmax_grad,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY] = lower_sce,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY_GRAD] = lower_sce_grad,
    [DPC_OP_MSE] = lower_mse,
    [DPC_OP_LAYER_NORM] = lower_layer_norm,
    [DPC_OP_BATCH_NORM] = lower_batch_norm,
    [DPC_OP_BATCH_NORM_GRAD] = lower_batch_norm_grad,
    [DPC_OP_LAYER_NORM_GRAD] = lower_layer_norm_grad,
};
