/*
 * lower_elementwise.c — CUDA kernels for the elementwise ops: binary arithmetic with NumPy
 * broadcasting, unary functions, comparisons, not, where, cast, zeros_like and dropout.
 *
 * One thread per output element over a grid-stride loop; the offset of each operand comes from
 * the element's coordinates and the operand's broadcast strides, all compile-time constants.
 * Where every operand has the output's shape in f32 (nothing broadcast), the loop moves 16
 * bytes at a time (dpc_f4) when the pointers allow it, with a scalar tail and a scalar fallback
 * for unaligned buffers. Values are computed as ir/scalar.h and runtime/ref define them, in
 * the dtype's calc type (cu.h).
 */
#include "codegen/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A libm function for the calc type: "expf" for float, "exp" for double. */
static const char *fn(const char *name, const char *type, char *buf, size_t n) {
  snprintf(buf, n, "%s%s", name, strcmp(type, "float") ? "" : "f");
  return buf;
}

/* A double constant as text that the compilers read back exactly (inf for the absent bounds). */
static cu_expr konst(double v, const char *type) {
  cu_expr e;
  bool f = !strcmp(type, "float");
  if (isinf(v))
    snprintf(e.s, sizeof e.s, "%s%s", v < 0 ? "-" : "", f ? "DPC_INF_F" : "DPC_INF_D");
  else
    snprintf(e.s, sizeof e.s, "(%s)%.17g", type, v);
  return e;
}

/* The value of one element of `op` from its operands' calc-type expressions. */
static dpc_status element(cu_gen *c, dpc_op op, dpc_dtype in_t, const cu_expr *x, cu_expr *out,
                          dpc_diag *d) {
  const char *T = cu_calc_type(in_t);
  bool ints = dpc_dtype_is_int(in_t);
  const char *U = in_t == DPC_I64 ? "unsigned long long" : "unsigned";
  char b1[16];
  const char *a = x[0].s, *b = op <= DPC_OP_MIN ? x[1].s : "";
  cu_expr *o = out;
  switch (op) {
  case DPC_OP_ADD:
  case DPC_OP_SUB:
  case DPC_OP_MUL: {
    const char *sym = op == DPC_OP_ADD ? "+" : op == DPC_OP_SUB ? "-" : "*";
    if (ints)
      snprintf(o->s, sizeof o->s, "(%s)((%s)(%s) %s (%s)(%s))", T, U, a, sym, U, b);
    else
      snprintf(o->s, sizeof o->s, "((%s) %s (%s))", a, sym, b);
    return DPC_OK;
  }
  case DPC_OP_DIV:
    /* integer division by zero fails the run on the reference backend; here it gives 0 rather
     * than trapping the device, and MIN / -1 wraps as in ir/scalar.h */
    if (ints)
      snprintf(o->s, sizeof o->s,
               "((%s) == 0 ? (%s)0 : (%s) == -1 ? (%s)(0 - (%s)(%s)) : (%s) / (%s))", b, T, b, T, U,
               a, a, b);
    else
      snprintf(o->s, sizeof o->s, "((%s) / (%s))", a, b);
    return DPC_OK;
  case DPC_OP_POW:
    if (ints)
      snprintf(o->s, sizeof o->s, "%s(pow((double)(%s), (double)(%s)))",
               in_t == DPC_I64 ? "dpc_sat64" : "dpc_sat32", a, b);
    else
      snprintf(o->s, sizeof o->s, "%s(%s, %s)", fn("pow", T, b1, sizeof b1), a, b);
    return DPC_OK;
  case DPC_OP_MAX:
  case DPC_OP_MIN:
    snprintf(o->s, sizeof o->s, "dpc_%s<%s>(%s, %s)", op == DPC_OP_MAX ? "max" : "min", T, a, b);
    return DPC_OK;
  default: break;
  }
  if (ints) {
    switch (op) {
    case DPC_OP_NEG: snprintf(o->s, sizeof o->s, "(%s)(0 - (%s)(%s))", T, U, a); return DPC_OK;
    case DPC_OP_ABS:
      snprintf(o->s, sizeof o->s, "((%s) < 0 ? (%s)(0 - (%s)(%s)) : (%s))", a, T, U, a, a);
      return DPC_OK;
    case DPC_OP_SIGN:
      snprintf(o->s, sizeof o->s, "(%s)((%s) > 0 ? 1 : (%s) < 0 ? -1 : 0)", T, a, a);
      return DPC_OK;
    default:
      return dpc_graph_fail_node(c->g, c->node, d, DPC_ERR_INTERNAL,
                                 "CUDA codegen: %s has no integer form", dpc_op_name(op));
    }
  }
  char f1[16], f2[16];
  switch (op) {
  case DPC_OP_NEG: snprintf(o->s, sizeof o->s, "(-(%s))", a); break;
  case DPC_OP_ABS: snprintf(o->s, sizeof o->s, "%s(%s)", fn("fabs", T, f1, sizeof f1), a); break;
  case DPC_OP_RELU: snprintf(o->s, sizeof o->s, "((%s) < 0 ? (%s)0 : (%s))", a, T, a); break;
  case DPC_OP_RELU6:
    snprintf(o->s, sizeof o->s, "((%s) < 0 ? (%s)0 : (%s) > 6 ? (%s)6 : (%s))", a, T, a, T, a);
    break;
  case DPC_OP_CLIP: {
    double lo = dpc_attrs_get(c->at, "min") ? dpc_attrs_float(c->at, "min") : -INFINITY;
    double hi = dpc_attrs_get(c->at, "max") ? dpc_attrs_float(c->at, "max") : INFINITY;
    cu_expr l = konst(lo, T), h = konst(hi, T);
    snprintf(o->s, sizeof o->s, "((%s) < %s ? %s : (%s) > %s ? %s : (%s))", a, l.s, l.s, a, h.s,
             h.s, a);
    break;
  }
  case DPC_OP_LEAKY_RELU: {
    cu_expr al = konst(dpc_attrs_float(c->at, "alpha"), T);
    snprintf(o->s, sizeof o->s, "((%s) >= 0 ? (%s) : %s * (%s))", a, a, al.s, a);
    break;
  }
  case DPC_OP_GELU:
    snprintf(o->s, sizeof o->s, "((%s)0.5 * (%s) * ((%s)1 + %s((%s) * (%s)0.70710678118654752)))",
             T, a, T, fn("erf", T, f1, sizeof f1), a, T);
    break;
  case DPC_OP_SIGMOID: /* two branches so exp never overflows */
    snprintf(o->s, sizeof o->s,
             "((%s) >= 0 ? (%s)1 / ((%s)1 + %s(-(%s))) : %s(%s) / ((%s)1 + %s(%s)))", a, T, T,
             fn("exp", T, f1, sizeof f1), a, f1, a, T, f1, a);
    break;
  case DPC_OP_TANH: snprintf(o->s, sizeof o->s, "%s(%s)", fn("tanh", T, f1, sizeof f1), a); break;
  case DPC_OP_EXP: snprintf(o->s, sizeof o->s, "%s(%s)", fn("exp", T, f1, sizeof f1), a); break;
  case DPC_OP_LOG: snprintf(o->s, sizeof o->s, "%s(%s)", fn("log", T, f1, sizeof f1), a); break;
  case DPC_OP_SQRT: snprintf(o->s, sizeof o->s, "%s(%s)", fn("sqrt", T, f1, sizeof f1), a); break;
  case DPC_OP_RSQRT:
    snprintf(o->s, sizeof o->s, "((%s)1 / %s(%s))", T, fn("sqrt", T, f1, sizeof f1), a);
    break;
  case DPC_OP_ERF: snprintf(o->s, sizeof o->s, "%s(%s)", fn("erf", T, f1, sizeof f1), a); break;
  case DPC_OP_FLOOR: snprintf(o->s, sizeof o->s, "%s(%s)", fn("floor", T, f1, sizeof f1), a); break;
  case DPC_OP_SIGN: /* NaN and both zeros come back unchanged */
    snprintf(o->s, sizeof o->s, "((%s) > 0 ? (%s)1 : (%s) < 0 ? (%s)-1 : (%s))", a, T, a, T, a);
    break;
  case DPC_OP_COS: snprintf(o->s, sizeof o->s, "%s(%s)", fn("cos", T, f1, sizeof f1), a); break;
  case DPC_OP_SIN: snprintf(o->s, sizeof o->s, "%s(%s)", fn("sin", T, f2, sizeof f2), a); break;
  default:
    return dpc_graph_fail_node(c->g, c->node, d, DPC_ERR_INTERNAL,
                               "CUDA codegen: %s is not elementwise arithmetic", dpc_op_name(op));
  }
  return DPC_OK;
}

/* Whether every input has the output's shape and all are f32: the 16-byte path applies. */
static bool vectorizable(const cu_gen *c, int64_t n) {
  const dpc_value *y = cu_out(c, 0);
  if (y->dtype != DPC_F32 || n < 4) return false;
  for (uint32_t i = 0; i < c->n->n_in; i++)
    if (cu_in(c, i)->dtype != DPC_F32 || !dpc_shape_eq(&cu_in(c, i)->shape, &y->shape))
      return false;
  return true;
}

/* Arithmetic ops (binary and unary), one element each. */
static dpc_status lower_arith(cu_gen *c, dpc_diag *d) {
  const dpc_value *y = cu_out(c, 0);
  int64_t n = dpc_shape_numel(&y->shape);
  dpc_dtype t = cu_in(c, 0)->dtype;
  cu_expr x[2], r;
  if (vectorizable(c, n)) {
    /* 16-byte loads and stores over n / 4 vectors when every pointer is aligned */
    for (uint32_t i = 0; i < c->n->n_in; i++) snprintf(x[i].s, sizeof x[i].s, "v%u.v[l]", i);
    dpc_status st = element(c, c->n->op, t, x, &r, d);
    if (st) return st;
    cu_elementwise_begin(c, "", (n + 3) / 4);
    cu_printf(c, "    bool aligned = ((unsigned long long)y0");
    for (uint32_t i = 0; i < c->n->n_in; i++) cu_printf(c, " | (unsigned long long)x%u", i);
    cu_printf(c, ") %% 16 == 0;\n");
    cu_printf(c, "    if (aligned && i < %lldll) {\n", (long long)(n / 4));
    for (uint32_t i = 0; i < c->n->n_in; i++)
      cu_printf(c, "      dpc_f4 v%u = ((const dpc_f4 *)x%u)[i];\n", i, i);
    cu_printf(c, "      dpc_f4 o;\n      for (int l = 0; l < 4; l++) o.v[l] = %s;\n", r.s);
    cu_printf(c, "      ((dpc_f4 *)y0)[i] = o;\n    } else {\n");
    cu_printf(c, "      for (long long e = i * 4; e < i * 4 + 4 && e < %lldll; e++) {\n",
              (long long)n);
    cu_printf(c, "        if (aligned && e < %lldll) continue;\n", (long long)(n / 4 * 4));
    for (uint32_t i = 0; i < c->n->n_in; i++) snprintf(x[i].s, sizeof x[i].s, "x%u[e]", i);
    st = element(c, c->n->op, t, x, &r, d);
    if (st) return st;
    cu_printf(c, "        y0[e] = %s;\n      }\n    }\n", r.s);
    cu_elementwise_end(c);
    return DPC_OK;
  }
  cu_elementwise_begin(c, "", n);
  cu_coords(c, &y->shape, "i", "");
  for (uint32_t i = 0; i < c->n->n_in; i++) {
    char ptr[8], idx[16];
    cu_expr off = cu_bcast_offset(&cu_in(c, i)->shape, &y->shape, "");
    cu_printf(c, "    long long o%u = %s;\n", i, off.s);
    snprintf(ptr, sizeof ptr, "x%u", i);
    snprintf(idx, sizeof idx, "o%u", i);
    x[i] = cu_load(cu_in(c, i)->dtype, ptr, idx);
  }
  dpc_status st = element(c, c->n->op, t, x, &r, d);
  if (st) return st;
  cu_store(c, y->dtype, "y0", "i", r.s);
  cu_elementwise_end(c);
  return DPC_OK;
}

/* equal, less, greater: integers exactly, floats in their own type (NaN unordered). */
static dpc_status lower_compare(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *y = cu_out(c, 0);
  int64_t n = dpc_shape_numel(&y->shape);
  cu_elementwise_begin(c, "", n);
  cu_coords(c, &y->shape, "i", "");
  cu_expr x[2];
  for (uint32_t i = 0; i < 2; i++) {
    char ptr[8], idx[16];
    cu_expr off = cu_bcast_offset(&cu_in(c, i)->shape, &y->shape, "");
    cu_printf(c, "    long long o%u = %s;\n", i, off.s);
    snprintf(ptr, sizeof ptr, "x%u", i);
    snprintf(idx, sizeof idx, "o%u", i);
    x[i] = cu_load(cu_in(c, i)->dtype, ptr, idx);
  }
  const char *sym = c->n->op == DPC_OP_EQUAL ? "==" : c->n->op == DPC_OP_LESS ? "<" : ">";
  char v[1200];
  snprintf(v, sizeof v, "(%s) %s (%s)", x[0].s, sym, x[1].s);
  cu_store(c, DPC_BOOL, "y0", "i", v);
  cu_elementwise_end(c);
  return DPC_OK;
}

static dpc_status lower_not(cu_gen *c, dpc_diag *d) {
  (void)d;
  int64_t n = dpc_shape_numel(&cu_out(c, 0)->shape);
  cu_elementwise_begin(c, "", n);
  cu_expr x = cu_load(cu_in(c, 0)->dtype, "x0", "i");
  char v[600];
  snprintf(v, sizeof v, "!(%s)", x.s);
  cu_store(c, DPC_BOOL, "y0", "i", v);
  cu_elementwise_end(c);
  return DPC_OK;
}

/* The picked element is copied in its stored form, so every dtype comes through exactly. */
static dpc_status lower_where(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *y = cu_out(c, 0);
  int64_t n = dpc_shape_numel(&y->shape);
  cu_elementwise_begin(c, "", n);
  cu_coords(c, &y->shape, "i", "");
  cu_expr oc = cu_bcast_offset(&cu_in(c, 0)->shape, &y->shape, "");
  cu_expr oa = cu_bcast_offset(&cu_in(c, 1)->shape, &y->shape, "");
  cu_expr ob = cu_bcast_offset(&cu_in(c, 2)->shape, &y->shape, "");
  cu_printf(c, "    y0[i] = x0[%s] != 0 ? x1[%s] : x2[%s];\n", oc.s, oa.s, ob.s);
  cu_elementwise_end(c);
  return DPC_OK;
}

static dpc_status lower_cast(cu_gen *c, dpc_diag *d) {
  (void)d;
  dpc_dtype from = cu_in(c, 0)->dtype, to = cu_out(c, 0)->dtype;
  int64_t n = dpc_shape_numel(&cu_out(c, 0)->shape);
  cu_elementwise_begin(c, "", n);
  cu_expr x = cu_load(from, "x0", "i");
  char v[700];
  bool from_int = dpc_dtype_is_int(from), to_int = dpc_dtype_is_int(to);
  if (from_int && to_int) {
    /* exact through 64 bits; narrowing saturates like every other store */
    if (to == DPC_I32)
      snprintf(v, sizeof v,
               "(long long)(%s) > 2147483647ll ? 2147483647 : (long long)(%s) < -2147483648ll ? "
               "(-2147483647 - 1) : (int)(%s)",
               x.s, x.s, x.s);
    else
      snprintf(v, sizeof v, "(long long)(%s)", x.s);
  } else if (to_int) {
    snprintf(v, sizeof v, "%s((double)(%s))", to == DPC_I64 ? "dpc_sat64" : "dpc_sat32", x.s);
  } else if (from_int && to == DPC_F32) {
    snprintf(v, sizeof v, "(float)(long long)(%s)", x.s); /* one rounding */
  } else if (to == DPC_F64) {
    snprintf(v, sizeof v, "(double)(%s)", x.s);
  } else {
    snprintf(v, sizeof v, "(float)(double)(%s)", x.s);
  }
  cu_store(c, to, "y0", "i", v);
  cu_elementwise_end(c);
  return DPC_OK;
}

static dpc_status lower_zeros_like(cu_gen *c, dpc_diag *d) {
  (void)d;
  cu_elementwise_begin(c, "", dpc_shape_numel(&cu_out(c, 0)->shape));
  cu_printf(c, "    y0[i] = 0;\n");
  cu_elementwise_end(c);
  return DPC_OK;
}

/* The mask is runtime/rng.h's pure function of (seed, step, element), the same as the
 * reference backend's, so the gradient and every device agree on it. */
static dpc_status lower_dropout(cu_gen *c, dpc_diag *d) {
  (void)d;
  dpc_dtype t = cu_out(c, 0)->dtype;
  double p = dpc_attrs_float(c->at, "p");
  bool training = c->training;
  if (dpc_attrs_get(c->at, "training")) training = dpc_attrs_int(c->at, "training") != 0;
  int64_t n = dpc_shape_numel(&cu_out(c, 0)->shape);
  cu_elementwise_begin(c, "", n);
  cu_expr x = cu_load(t, "x0", "i");
  if (!training || !(p > 0)) {
    cu_store(c, t, "y0", "i", x.s);
  } else {
    cu_printf(
        c, "    unsigned long long stream = dpc_mix64(%lluull ^ dpc_mix64(a.step + 0x5eedull));\n",
        (unsigned long long)dpc_attrs_int(c->at, "seed"));
    cu_printf(
        c, "    bool keep = dpc_rng_uniform(stream, %lluull + (unsigned long long)i) >= %.17g;\n",
        (unsigned long long)dpc_attrs_int(c->at, "offset"), p);
    char v[800];
    snprintf(v, sizeof v, "keep ? (double)(%s) / %.17g : 0.0", x.s, 1.0 - p);
    cu_store(c, t, "y0", "i", v);
  }
  cu_elementwise_end(c);
  return DPC_OK;
}

dpc_status cu_elementwise_member(cu_gen *c, const cu_place *in, const cu_place *out, dpc_diag *d) {
  dpc_op op = c->n->op;
  dpc_dtype yt = cu_out(c, 0)->dtype;
  if (op == DPC_OP_WHERE) { /* the picked element in its stored form, as lower_where */
    cu_printf(c, "    %s[%s] = %s[%s] != 0 ? %s[%s] : %s[%s];\n", out->ptr, out->idx, in[0].ptr,
              in[0].idx, in[1].ptr, in[1].idx, in[2].ptr, in[2].idx);
    return DPC_OK;
  }
  cu_expr x[2], r;
  for (uint32_t i = 0; i < c->n->n_in && i < 2; i++)
    x[i] = cu_load(cu_in(c, i)->dtype, in[i].ptr, in[i].idx);
  if (op == DPC_OP_EQUAL || op == DPC_OP_LESS || op == DPC_OP_GREATER) {
    const char *sym = op == DPC_OP_EQUAL ? "==" : op == DPC_OP_LESS ? "<" : ">";
    snprintf(r.s, sizeof r.s, "(%s) %s (%s)", x[0].s, sym, x[1].s);
  } else if (op == DPC_OP_NOT) {
    snprintf(r.s, sizeof r.s, "!(%s)", x[0].s);
  } else {
    dpc_status st = element(c, op, cu_in(c, 0)->dtype, x, &r, d);
    if (st) return st;
  }
  cu_store(c, yt, out->ptr, out->idx, r.s);
  return DPC_OK;
}

const cu_lower_fn cu_elementwise_table[DPC_OP_COUNT] = {
    [DPC_OP_ADD] = lower_arith,        [DPC_OP_SUB] = lower_arith,
    [DPC_OP_MUL] = lower_arith,        [DPC_OP_DIV] = lower_arith,
    [DPC_OP_POW] = lower_arith,        [DPC_OP_MAX] = lower_arith,
    [DPC_OP_MIN] = lower_arith,        [DPC_OP_NEG] = lower_arith,
    [DPC_OP_ABS] = lower_arith,        [DPC_OP_RELU] = lower_arith,
    [DPC_OP_RELU6] = lower_arith,      [DPC_OP_CLIP] = lower_arith,
    [DPC_OP_LEAKY_RELU] = lower_arith, [DPC_OP_GELU] = lower_arith,
    [DPC_OP_SIGMOID] = lower_arith,    [DPC_OP_TANH] = lower_arith,
    [DPC_OP_EXP] = lower_arith,        [DPC_OP_LOG] = lower_arith,
    [DPC_OP_SQRT] = lower_arith,       [DPC_OP_RSQRT] = lower_arith,
    [DPC_OP_ERF] = lower_arith,        [DPC_OP_FLOOR] = lower_arith,
    [DPC_OP_SIGN] = lower_arith,       [DPC_OP_COS] = lower_arith,
    [DPC_OP_SIN] = lower_arith,        [DPC_OP_EQUAL] = lower_compare,
    [DPC_OP_LESS] = lower_compare,     [DPC_OP_GREATER] = lower_compare,
    [DPC_OP_NOT] = lower_not,          [DPC_OP_WHERE] = lower_where,
    [DPC_OP_CAST] = lower_cast,        [DPC_OP_ZEROS_LIKE] = lower_zeros_like,
    [DPC_OP_DROPOUT] = lower_dropout,
};
