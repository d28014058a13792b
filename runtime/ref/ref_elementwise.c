/*
 * ref_elementwise.c — reference kernels for sources, constants and zeros_like, the elementwise
 * binary ops (NumPy broadcasting), the elementwise unary ops, the comparisons, not and where,
 * cast and dropout.
 *
 * These are the oracle other backends are tested against, so each element is computed the
 * obvious way: floats in double through dpc_tload/dpc_tstore, integers exactly in int64 with
 * NumPy's two's-complement wrap-around. Must not allocate, keep state or print; errors a user
 * can cause (integer division by zero) go through dpc_graph_fail_node.
 */
#include "runtime/ref/ref_internal.h"

#include "runtime/rng.h"

/* ---- sources ------------------------------------------------------------------------------ */

/* input, param and state get their values from the executor before the step runs. */
dpc_status dpc_ref_input(const dpc_kernel_args *a, dpc_diag *d) {
  (void)a, (void)d;
  return DPC_OK;
}

dpc_status dpc_ref_param(const dpc_kernel_args *a, dpc_diag *d) {
  (void)a, (void)d;
  return DPC_OK;
}

dpc_status dpc_ref_state(const dpc_kernel_args *a, dpc_diag *d) {
  (void)a, (void)d;
  return DPC_OK;
}

dpc_status dpc_ref_constant(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_attr *v = dpc_attrs_get(dpc_ref_attrs(a), "value");
  DPC_ASSERT(v && v->kind == DPC_ATTR_TENSOR);
  dpc_tensor *y = &a->out[0];
  int64_t n = dpc_tensor_numel(y);
  DPC_ASSERT(n == (int64_t)v->n);
  for (int64_t i = 0; i < n; i++) dpc_tstore(y, i, a->g->reals[v->u.off + (uint32_t)i]);
  return DPC_OK;
}

dpc_status dpc_ref_zeros_like(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  dpc_ref_zero(&a->out[0]);
  return DPC_OK;
}

/* ---- binary ------------------------------------------------------------------------------- */

/* Each element as ir/scalar.h defines it (the ONNX constant folder uses the same); integer
 * division by zero, which has no value, fails the run. */
static dpc_status binary(const dpc_kernel_args *a, dpc_diag *d, dpc_op op) {
  const dpc_tensor *x = &a->in[0], *y = &a->in[1];
  dpc_tensor *out = &a->out[0];
  dpc_ref_iter it;
  dpc_ref_iter_init(&it, &out->shape, 0, 0);
  dpc_ref_bcast_strides(&x->shape, &out->shape, it.stride[0]);
  dpc_ref_bcast_strides(&y->shape, &out->shape, it.stride[1]);
  bool ints = dpc_dtype_is_int(out->dtype) && op != DPC_OP_POW;
  int64_t n = dpc_tensor_numel(out);
  for (int64_t i = 0; i < n; i++, dpc_ref_iter_next(&it)) {
    if (!ints) {
      dpc_tstore(out, i, dpc_scalar_float(op, dpc_tload(x, it.off[0]), dpc_tload(y, it.off[1])));
      continue;
    }
    int64_t u = dpc_tload_i64(x, it.off[0]), v = dpc_tload_i64(y, it.off[1]);
    if (op == DPC_OP_DIV && v == 0) {
      char where[160];
      dpc_ref_format_index(&y->shape, it.off[1], where, sizeof where);
      return dpc_graph_fail_node(a->g, a->node, d, DPC_ERR_RUNTIME,
                                 "integer division by zero: element %s of the divisor is 0", where);
    }
    dpc_tstore_i64(out, i, dpc_scalar_int(op, out->dtype, u, v));
  }
  return DPC_OK;
}

dpc_status dpc_ref_add(const dpc_kernel_args *a, dpc_diag *d) {
  return binary(a, d, DPC_OP_ADD);
}
dpc_status dpc_ref_sub(const dpc_kernel_args *a, dpc_diag *d) {
  return binary(a, d, DPC_OP_SUB);
}
dpc_status dpc_ref_mul(const dpc_kernel_args *a, dpc_diag *d) {
  return binary(a, d, DPC_OP_MUL);
}
dpc_status dpc_ref_div(const dpc_kernel_args *a, dpc_diag *d) {
  return binary(a, d, DPC_OP_DIV);
}
dpc_status dpc_ref_pow(const dpc_kernel_args *a, dpc_diag *d) {
  return binary(a, d, DPC_OP_POW);
}
dpc_status dpc_ref_max(const dpc_kernel_args *a, dpc_diag *d) {
  return binary(a, d, DPC_OP_MAX);
}
dpc_status dpc_ref_min(const dpc_kernel_args *a, dpc_diag *d) {
  return binary(a, d, DPC_OP_MIN);
}

/* ---- unary -------------------------------------------------------------------------------- */

/* Attribute values some unary ops need, read once per kernel call rather than per element. */
typedef struct unary_params {
  double lo, hi; /* clip bounds; infinite when not given */
  double alpha;  /* leaky_relu slope */
} unary_params;

static double unary_float(dpc_op op, const unary_params *p, double x) {
  switch (op) {
  case DPC_OP_NEG: return -x;
  case DPC_OP_ABS: return fabs(x);
  case DPC_OP_RELU: return x < 0 ? 0 : x;
  /* Comparisons are false for NaN, so NaN falls through both bounds unchanged. */
  case DPC_OP_RELU6: return x < 0 ? 0 : x > 6 ? 6 : x;
  case DPC_OP_CLIP: return x < p->lo ? p->lo : x > p->hi ? p->hi : x;
  case DPC_OP_LEAKY_RELU: return x >= 0 ? x : p->alpha * x;
  case DPC_OP_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  /* Two branches so exp never overflows: the argument of exp is never positive. */
  case DPC_OP_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
  case DPC_OP_TANH: return tanh(x);
  case DPC_OP_EXP: return exp(x);
  case DPC_OP_LOG: return log(x);
  case DPC_OP_SQRT: return sqrt(x);
  case DPC_OP_RSQRT: return 1.0 / sqrt(x);
  case DPC_OP_ERF: return erf(x);
  case DPC_OP_FLOOR: return floor(x);
  /* NaN compares false both ways and comes back unchanged; so do 0 and -0. */
  case DPC_OP_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
  case DPC_OP_COS: return cos(x);
  case DPC_OP_SIN: return sin(x);
  default: DPC_ASSERT(!"not a unary op"); return 0;
  }
}

static dpc_status unary(const dpc_kernel_args *a, dpc_op op) {
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  dpc_attrs at = dpc_ref_attrs(a);
  unary_params p = {-INFINITY, INFINITY, 0};
  if (op == DPC_OP_CLIP) {
    if (dpc_attrs_get(at, "min")) p.lo = dpc_attrs_float(at, "min");
    if (dpc_attrs_get(at, "max")) p.hi = dpc_attrs_float(at, "max");
  }
  if (op == DPC_OP_LEAKY_RELU) p.alpha = dpc_attrs_float(at, "alpha");
  int64_t n = dpc_tensor_numel(y);
  /* neg, abs and sign are the only unary ops the rules allow on integers. */
  if (dpc_dtype_is_int(x->dtype)) {
    for (int64_t i = 0; i < n; i++) {
      int64_t v = dpc_tload_i64(x, i);
      if (op == DPC_OP_SIGN) {
        dpc_tstore_i64(y, i, v > 0 ? 1 : v < 0 ? -1 : 0);
        continue;
      }
      bool flip = op == DPC_OP_NEG || v < 0;
      dpc_tstore_i64(y, i, flip ? dpc_scalar_wrap(y->dtype, 0 - (uint64_t)v) : v);
    }
    return DPC_OK;
  }
  for (int64_t i = 0; i < n; i++) dpc_tstore(y, i, unary_float(op, &p, dpc_tload(x, i)));
  return DPC_OK;
}

dpc_status dpc_ref_neg(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_NEG);
}
dpc_status dpc_ref_abs(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_ABS);
}
dpc_status dpc_ref_relu(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_RELU);
}
dpc_status dpc_ref_relu6(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_RELU6);
}
dpc_status dpc_ref_clip(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_CLIP);
}
dpc_status dpc_ref_leaky_relu(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_LEAKY_RELU);
}
dpc_status dpc_ref_gelu(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_GELU);
}
dpc_status dpc_ref_sigmoid(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_SIGMOID);
}
dpc_status dpc_ref_tanh(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_TANH);
}
dpc_status dpc_ref_exp(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_EXP);
}
dpc_status dpc_ref_log(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_LOG);
}
dpc_status dpc_ref_sqrt(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_SQRT);
}
dpc_status dpc_ref_rsqrt(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_RSQRT);
}
dpc_status dpc_ref_erf(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_ERF);
}

dpc_status dpc_ref_floor(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_FLOOR);
}
dpc_status dpc_ref_sign(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_SIGN);
}
dpc_status dpc_ref_cos(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_COS);
}
dpc_status dpc_ref_sin(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  return unary(a, DPC_OP_SIN);
}

/* ---- comparison and selection ------------------------------------------------------------- */

/* equal, less, greater with broadcasting, into bool, ordered as ir/scalar.h orders: integers
 * exactly, everything else in double, where every comparison with NaN is false. */
static void compare(const dpc_kernel_args *a, dpc_op op) {
  const dpc_tensor *x = &a->in[0], *y = &a->in[1];
  dpc_tensor *out = &a->out[0];
  dpc_ref_iter it;
  dpc_ref_iter_init(&it, &out->shape, 0, 0);
  dpc_ref_bcast_strides(&x->shape, &out->shape, it.stride[0]);
  dpc_ref_bcast_strides(&y->shape, &out->shape, it.stride[1]);
  bool ints = dpc_dtype_is_int(x->dtype);
  int64_t n = dpc_tensor_numel(out);
  for (int64_t i = 0; i < n; i++, dpc_ref_iter_next(&it)) {
    int order = ints
                    ? dpc_scalar_order_int(dpc_tload_i64(x, it.off[0]), dpc_tload_i64(y, it.off[1]))
                    : dpc_scalar_order_float(dpc_tload(x, it.off[0]), dpc_tload(y, it.off[1]));
    dpc_tstore(out, i, dpc_scalar_compare(op, order) ? 1.0 : 0.0);
  }
}

dpc_status dpc_ref_equal(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  compare(a, DPC_OP_EQUAL);
  return DPC_OK;
}
dpc_status dpc_ref_less(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  compare(a, DPC_OP_LESS);
  return DPC_OK;
}
dpc_status dpc_ref_greater(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  compare(a, DPC_OP_GREATER);
  return DPC_OK;
}

dpc_status dpc_ref_not(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  int64_t n = dpc_tensor_numel(y);
  for (int64_t i = 0; i < n; i++) dpc_tstore(y, i, dpc_tload(x, i) != 0 ? 0.0 : 1.0);
  return DPC_OK;
}

/* The picked element is moved as bytes, so every dtype comes through exactly. */
dpc_status dpc_ref_where(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *c = &a->in[0], *x = &a->in[1], *y = &a->in[2];
  dpc_tensor *out = &a->out[0];
  /* An iterator follows two operands: one walks cond and a, a second in step with it walks b. */
  dpc_ref_iter ca, b;
  dpc_ref_iter_init(&ca, &out->shape, 0, 0);
  dpc_ref_bcast_strides(&c->shape, &out->shape, ca.stride[0]);
  dpc_ref_bcast_strides(&x->shape, &out->shape, ca.stride[1]);
  dpc_ref_iter_init(&b, &out->shape, 0, 0);
  dpc_ref_bcast_strides(&y->shape, &out->shape, b.stride[0]);
  int64_t n = dpc_tensor_numel(out);
  for (int64_t i = 0; i < n; i++, dpc_ref_iter_next(&ca), dpc_ref_iter_next(&b)) {
    if (dpc_tload(c, ca.off[0]) != 0)
      dpc_ref_move(out, i, x, ca.off[1], 1);
    else
      dpc_ref_move(out, i, y, b.off[0], 1);
  }
  return DPC_OK;
}

/* ---- cast and dropout --------------------------------------------------------------------- */

dpc_status dpc_ref_cast(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  int64_t n = dpc_tensor_numel(y);
  bool from_int = dpc_dtype_is_int(x->dtype), to_int = dpc_dtype_is_int(y->dtype);
  for (int64_t i = 0; i < n; i++) {
    if (from_int && to_int) {
      /* Exact through int64; narrowing to i32 saturates like every other store. */
      dpc_tstore_i64(y, i, dpc_tload_i64(x, i));
    } else if (from_int && y->dtype == DPC_F32) {
      /* One rounding, int64 -> float; going through double would round twice above 2^53. */
      dpc_tstore(y, i, (double)(float)dpc_tload_i64(x, i));
    } else {
      /* Float -> int truncates and saturates in dpc_tstore; -> bool is != 0; bool reads 0/1. */
      dpc_tstore(y, i, dpc_tload(x, i));
    }
  }
  return DPC_OK;
}

dpc_status dpc_ref_dropout(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  dpc_attrs at = dpc_ref_attrs(a);
  double p = dpc_attrs_float(at, "p");
  int64_t n = dpc_tensor_numel(y);
  if (!dpc_kernel_training(a) || !(p > 0)) {
    for (int64_t i = 0; i < n; i++) dpc_tstore(y, i, dpc_tload(x, i));
    return DPC_OK;
  }
  /* The mask is a pure function of (seed, step, element), so every backend drops the same
   * elements and the gradient can recompute it instead of storing it. */
  uint64_t stream =
      dpc_rng_dropout_seed((uint64_t)dpc_attrs_int(at, "seed"), dpc_run_kernel_step(a->run));
  double keep_p = 1.0 - p;
  uint64_t offset = (uint64_t)dpc_attrs_int(at, "offset");
  for (int64_t i = 0; i < n; i++) {
    bool keep = dpc_rng_uniform(stream, offset + (uint64_t)i) >= p;
    dpc_tstore(y, i, keep ? dpc_tload(x, i) / keep_p : 0.0);
  }
  return DPC_OK;
}
