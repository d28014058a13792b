/*
 * lower_elementwise.c — LLVM IR for elementwise ops: unary and binary arithmetic with NumPy
 * broadcasting, comparisons, where, cast, zeros_like, dropout.
 *
 * The output's dimensions are first merged wherever every operand is laid out contiguously
 * across the boundary (x[N, 512] + b[512] stays two loops, x + y of one shape becomes one), then
 * one loop per remaining dimension walks the output, with each operand's offset advanced by its
 * own stride (0 along a broadcast dimension). The innermost loop is the one LLVM vectorises.
 * Semantics follow the reference kernels exactly (NaN propagation, integer wrap-around,
 * saturating casts); only floating-point rounding may differ, within the op tests' tolerance
 * (exp, and float erf, tanh and log, are arithmetic of their own, lower_math.c, so that their
 * loops vectorise).
 */
#include "codegen/cpu/cg.h"

#include <stdio.h>
#include <string.h>

#define MAXIN 3

typedef struct ew {
  uint32_t n_in;
  dpc_dtype in_t[MAXIN], out_t;
  uint32_t rank; /* after merging */
  int64_t dims[DPC_MAX_RANK];
  int64_t stride[MAXIN + 1][DPC_MAX_RANK]; /* inputs, then the output */
} ew;

uint32_t cg_ew_layout(const dpc_shape *out, const dpc_shape *const *ops, uint32_t n_ops,
                      int64_t *dims, int64_t (*stride)[DPC_MAX_RANK]) {
  int64_t st[CG_MAX_OPERANDS][DPC_MAX_RANK];
  uint32_t r = out->rank;
  for (uint32_t k = 0; k < n_ops; k++) {
    const dpc_shape *s = ops[k];
    int64_t acc = 1;
    for (uint32_t i = r; i-- > 0;) {
      int64_t j = (int64_t)i - (int64_t)(r - s->rank);
      int64_t dim = j >= 0 ? s->d[j] : 1;
      st[k][i] = dim == 1 && out->d[i] != 1 ? 0 : acc;
      acc *= dim;
    }
  }
  /* merge dimension i into i+1 when every operand continues contiguously across it */
  uint32_t m = 0;
  for (uint32_t i = 0; i < r; i++) {
    if (out->d[i] == 1 && r > 1) continue; /* size-1 dimensions add nothing */
    bool merge = m > 0;
    for (uint32_t k = 0; merge && k < n_ops; k++) merge = st[k][i] * out->d[i] == stride[k][m - 1];
    if (merge) {
      dims[m - 1] *= out->d[i];
      for (uint32_t k = 0; k < n_ops; k++) stride[k][m - 1] = st[k][i];
    } else {
      dims[m] = out->d[i];
      for (uint32_t k = 0; k < n_ops; k++) stride[k][m] = st[k][i];
      m++;
    }
  }
  if (m == 0) {
    dims[0] = 1;
    for (uint32_t k = 0; k < n_ops; k++) stride[k][0] = 0;
    m = 1;
  }
  return m;
}

/* Broadcast strides of each operand against the output, then merged dimensions. */
static void layout(const dpc_graph *g, uint32_t node, ew *e) {
  const dpc_node *n = &g->nodes[node];
  const dpc_shape *ops[MAXIN + 1];
  e->n_in = n->n_in;
  e->out_t = g->values[n->out].dtype;
  for (uint32_t k = 0; k < n->n_in; k++) {
    ops[k] = &g->values[g->ids[n->in + k]].shape;
    e->in_t[k] = g->values[g->ids[n->in + k]].dtype;
  }
  ops[n->n_in] = &g->values[n->out].shape;
  e->rank = cg_ew_layout(&g->values[n->out].shape, ops, n->n_in + 1, e->dims, e->stride);
}

static const char *sfx(dpc_dtype t) {
  return strcmp(cg_calc_type(t), "double") ? "f32" : "f64";
}

static cg_val call1(cg_fn *f, const char *fn, const char *ty, cg_val a) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = call %s @%s(%s %s)", r.s, ty, fn, ty, a.s);
  return r;
}

static cg_val fcmp(cg_fn *f, const char *pred, const char *ty, cg_val a, cg_val b) {
  return cg_op2(f, pred, ty, a, b); /* pred includes "fcmp xx" */
}

/* max/min with NaN propagation: a wins when it compares `pred` or is NaN */
static cg_val fminmax(cg_fn *f, const char *ty, bool is_max, cg_val a, cg_val b) {
  cg_val c = fcmp(f, is_max ? "fcmp ugt" : "fcmp ult", ty, a, b); /* unordered: a NaN wins */
  cg_val nb = fcmp(f, "fcmp uno", ty, b, b);
  cg_val pick = cg_sel(f, c, ty, a, b);
  return cg_sel(f, nb, ty, b, pick);
}

/* One element of the node's op, in the calc type of its operands. */
static dpc_status scalar(cg_fn *f, uint32_t node, const ew *e, const cg_val *x, cg_val train_on,
                         cg_val index, cg_val stream, cg_val *out, dpc_diag *d) {
  const dpc_graph *g = f->g;
  dpc_op op = g->nodes[node].op;
  dpc_attrs at = dpc_node_attrs(g, node);
  dpc_dtype t = e->n_in ? e->in_t[0] : e->out_t;
  const char *ty = cg_calc_type(t);
  bool fp = cg_is_fp(t);
  const char *s = sfx(t);
  char fn[48];
  cg_val r = {{0}};
  switch (op) {
  case DPC_OP_ADD: r = cg_op2(f, fp ? "fadd" : "add", ty, x[0], x[1]); break;
  case DPC_OP_SUB: r = cg_op2(f, fp ? "fsub" : "sub", ty, x[0], x[1]); break;
  case DPC_OP_MUL: r = cg_op2(f, fp ? "fmul" : "mul", ty, x[0], x[1]); break;
  case DPC_OP_DIV:
    if (fp) {
      r = cg_op2(f, "fdiv", ty, x[0], x[1]);
    } else {
      /* truncating division; x / 0 is bad data, MIN / -1 wraps (never sdiv it: it traps) */
      cg_val zero = cg_const(t, 0), m1 = cg_const(t, -1), one = cg_const(t, 1);
      cg_val bz = cg_op2(f, "icmp eq", ty, x[1], zero), bm1 = cg_op2(f, "icmp eq", ty, x[1], m1);
      cg_fail_if(f, bz);
      cg_val safe = cg_sel(f, bz, ty, one, cg_sel(f, bm1, ty, one, x[1]));
      cg_val q = cg_op2(f, "sdiv", ty, x[0], safe), neg = cg_op2(f, "sub", ty, zero, x[0]);
      r = cg_sel(f, bm1, ty, neg, q);
    }
    break;
  case DPC_OP_POW:
    snprintf(fn, sizeof fn, "llvm.pow.%s", s);
    r = cg_tmp(f);
    cg_line(f, "%s = call %s @%s(%s %s, %s %s)", r.s, ty, fn, ty, x[0].s, ty, x[1].s);
    break;
  case DPC_OP_MAX:
  case DPC_OP_MIN:
    if (fp) {
      r = fminmax(f, ty, op == DPC_OP_MAX, x[0], x[1]);
    } else {
      cg_val c = cg_op2(f, op == DPC_OP_MAX ? "icmp sgt" : "icmp slt", ty, x[0], x[1]);
      r = cg_sel(f, c, ty, x[0], x[1]);
    }
    break;
  case DPC_OP_NEG:
    if (fp) {
      r = cg_tmp(f);
      cg_line(f, "%s = fneg %s %s", r.s, ty, x[0].s);
    } else {
      r = cg_op2(f, "sub", ty, cg_const(t, 0), x[0]);
    }
    break;
  case DPC_OP_ABS:
    if (fp) {
      snprintf(fn, sizeof fn, "llvm.fabs.%s", s);
      r = call1(f, fn, ty, x[0]);
    } else {
      cg_val c = cg_op2(f, "icmp slt", ty, x[0], cg_const(t, 0));
      r = cg_sel(f, c, ty, cg_op2(f, "sub", ty, cg_const(t, 0), x[0]), x[0]);
    }
    break;
  case DPC_OP_RELU:
    r = cg_sel(f, fcmp(f, "fcmp olt", ty, x[0], cg_const(t, 0)), ty, cg_const(t, 0), x[0]);
    break;
  case DPC_OP_RELU6:
  case DPC_OP_CLIP: {
    /* NaN stays NaN: only ordered comparisons move a value */
    bool relu6 = op == DPC_OP_RELU6;
    r = x[0];
    if (relu6 || dpc_attrs_get(at, "min")) {
      cg_val lo = cg_const(t, relu6 ? 0 : dpc_attrs_float(at, "min"));
      r = cg_sel(f, fcmp(f, "fcmp olt", ty, r, lo), ty, lo, r);
    }
    if (relu6 || dpc_attrs_get(at, "max")) {
      cg_val hi = cg_const(t, relu6 ? 6 : dpc_attrs_float(at, "max"));
      r = cg_sel(f, fcmp(f, "fcmp ogt", ty, r, hi), ty, hi, r);
    }
    break;
  }
  case DPC_OP_LEAKY_RELU: {
    cg_val ax = cg_op2(f, "fmul", ty, x[0], cg_const(t, dpc_attrs_float(at, "alpha")));
    r = cg_sel(f, fcmp(f, "fcmp oge", ty, x[0], cg_const(t, 0)), ty, x[0], ax);
    /* NaN >= 0 is false, and alpha * NaN is NaN: NaN stays NaN */
    break;
  }
  case DPC_OP_GELU: {
    cg_val u = cg_op2(f, "fmul", ty, x[0], cg_const(t, 0.7071067811865476));
    cg_val er = strcmp(s, "f32") ? call1(f, "erf", ty, u) : cg_erf(f, u);
    cg_val one = cg_op2(f, "fadd", ty, er, cg_const(t, 1));
    r = cg_op2(f, "fmul", ty, cg_op2(f, "fmul", ty, x[0], cg_const(t, 0.5)), one);
    break;
  }
  case DPC_OP_SIGMOID: {
    /* stable on both sides: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below */
    cg_val ax = call1(f, strcmp(s, "f32") ? "llvm.fabs.f64" : "llvm.fabs.f32", ty, x[0]);
    cg_val ex = cg_exp(f, ty, cg_op2(f, "fsub", ty, cg_const(t, 0), ax)); /* e^-|x| */
    cg_val den = cg_op2(f, "fadd", ty, cg_const(t, 1), ex);
    cg_val pos = cg_op2(f, "fdiv", ty, cg_const(t, 1), den), neg = cg_op2(f, "fdiv", ty, ex, den);
    r = cg_sel(f, fcmp(f, "fcmp oge", ty, x[0], cg_const(t, 0)), ty, pos, neg);
    r = cg_sel(f, fcmp(f, "fcmp uno", ty, x[0], x[0]), ty, x[0], r);
    break;
  }
  case DPC_OP_TANH: r = strcmp(s, "f32") ? call1(f, "tanh", ty, x[0]) : cg_tanh(f, x[0]); break;
  case DPC_OP_EXP: r = cg_exp(f, ty, x[0]); break;
  case DPC_OP_LOG:
    if (strcmp(s, "f32")) {
      r = call1(f, "llvm.log.f64", ty, x[0]);
    } else {
      r = cg_log(f, x[0]);
    }
    break;
  case DPC_OP_SQRT:
  case DPC_OP_FLOOR:
  case DPC_OP_COS:
  case DPC_OP_SIN: {
    const char *name = op == DPC_OP_SQRT    ? "sqrt"
                       : op == DPC_OP_FLOOR ? "floor"
                       : op == DPC_OP_COS   ? "cos"
                                            : "sin";
    snprintf(fn, sizeof fn, "llvm.%s.%s", name, s);
    r = call1(f, fn, ty, x[0]);
    break;
  }
  case DPC_OP_RSQRT:
    snprintf(fn, sizeof fn, "llvm.sqrt.%s", s);
    r = cg_op2(f, "fdiv", ty, cg_const(t, 1), call1(f, fn, ty, x[0]));
    break;
  case DPC_OP_ERF: r = strcmp(s, "f32") ? call1(f, "erf", ty, x[0]) : cg_erf(f, x[0]); break;
  case DPC_OP_SIGN:
    if (fp) {
      cg_val pos = fcmp(f, "fcmp ogt", ty, x[0], cg_const(t, 0)),
             neg = fcmp(f, "fcmp olt", ty, x[0], cg_const(t, 0));
      r = cg_sel(f, pos, ty, cg_const(t, 1), cg_sel(f, neg, ty, cg_const(t, -1), x[0]));
    } else {
      cg_val pos = cg_op2(f, "icmp sgt", ty, x[0], cg_const(t, 0)),
             neg = cg_op2(f, "icmp slt", ty, x[0], cg_const(t, 0));
      r = cg_sel(f, pos, ty, cg_const(t, 1), cg_sel(f, neg, ty, cg_const(t, -1), cg_const(t, 0)));
    }
    break;
  case DPC_OP_EQUAL:
  case DPC_OP_LESS:
  case DPC_OP_GREATER: {
    const char *pred = op == DPC_OP_EQUAL  ? (fp ? "fcmp oeq" : "icmp eq")
                       : op == DPC_OP_LESS ? (fp ? "fcmp olt" : "icmp slt")
                                           : (fp ? "fcmp ogt" : "icmp sgt");
    cg_val c = cg_op2(f, pred, ty, x[0], x[1]);
    r = cg_tmp(f);
    cg_line(f, "%s = zext i1 %s to i8", r.s, c.s);
    break;
  }
  case DPC_OP_NOT: {
    cg_val c = cg_op2(f, "icmp eq", "i8", x[0], cg_const_i64(0));
    r = cg_tmp(f);
    cg_line(f, "%s = zext i1 %s to i8", r.s, c.s);
    break;
  }
  case DPC_OP_WHERE: {
    cg_val c = cg_op2(f, "icmp ne", "i8", x[0], cg_const_i64(0));
    r = cg_sel(f, c, cg_calc_type(e->in_t[1]), x[1], x[2]);
    break;
  }
  case DPC_OP_ZEROS_LIKE: r = cg_const(e->out_t, 0); break;
  case DPC_OP_DROPOUT: {
    /* keep element i when uniform(stream, i) >= p: the reference's generator, in IR */
    double p = dpc_attrs_float(at, "p");
    cg_val bits = cg_tmp(f), m = cg_tmp(f), sh = cg_tmp(f), u = cg_tmp(f), keep = cg_tmp(f);
    cg_line(f, "%s = call i64 @dpc_mix64(i64 %s)", m.s, stream.s);
    cg_line(f, "%s = xor i64 %s, %s", bits.s, m.s, index.s);
    cg_val mixed = cg_tmp(f);
    cg_line(f, "%s = call i64 @dpc_mix64(i64 %s)", mixed.s, bits.s);
    cg_line(f, "%s = lshr i64 %s, 11", sh.s, mixed.s);
    cg_line(f, "%s = uitofp i64 %s to double", u.s, sh.s);
    cg_val ud = cg_op2(f, "fmul", "double", u, cg_const(DPC_F64, 1.0 / 9007199254740992.0));
    cg_line(f, "%s = fcmp oge double %s, %s", keep.s, ud.s, cg_const(DPC_F64, p).s);
    /* x / (1 - p) in double, as the reference */
    cg_val xd = x[0];
    if (!strcmp(ty, "float")) {
      xd = cg_tmp(f);
      cg_line(f, "%s = fpext float %s to double", xd.s, x[0].s);
    }
    cg_val sc = cg_op2(f, "fdiv", "double", xd, cg_const(DPC_F64, 1 - p));
    cg_val kept = sc;
    if (!strcmp(ty, "float")) {
      kept = cg_tmp(f);
      cg_line(f, "%s = fptrunc double %s to float", kept.s, sc.s);
    }
    cg_val dropped = cg_sel(f, keep, ty, kept, cg_const(t, 0));
    r = p > 0 ? cg_sel(f, train_on, ty, dropped, x[0]) : x[0];
    break;
  }
  default:
    return dpc_graph_fail_node(g, node, d, DPC_ERR_INTERNAL, "no elementwise lowering for %s",
                               dpc_op_name(op));
  }
  *out = r;
  return DPC_OK;
}

dpc_status cg_ew_element(cg_fn *f, uint32_t node, const cg_val *x, cg_val *out, dpc_diag *d) {
  const dpc_graph *g = f->g;
  const dpc_node *n = &g->nodes[node];
  ew e = {.n_in = n->n_in, .out_t = g->values[n->out].dtype};
  if (n->n_in > MAXIN || !dpc_op_has(n->op, DPC_OPF_ELEMWISE))
    return dpc_graph_fail_node(g, node, d, DPC_ERR_INTERNAL, "not an elementwise op to fuse");
  for (uint32_t k = 0; k < n->n_in; k++) e.in_t[k] = g->values[g->ids[n->in + k]].dtype;
  cg_val none = cg_const_i64(0);
  return scalar(f, node, &e, x, none, none, none, out, d);
}

/* cast between calc types, with the reference's semantics (saturating float -> int) */
static cg_val convert(cg_fn *f, cg_val v, dpc_dtype from, dpc_dtype to) {
  const char *a = cg_calc_type(from), *b = cg_calc_type(to);
  if (!strcmp(a, b) && (from == DPC_BOOL) == (to == DPC_BOOL)) return v;
  cg_val r = cg_tmp(f);
  bool ffp = cg_is_fp(from), tfp = cg_is_fp(to);
  if (to == DPC_BOOL) {
    cg_val c = cg_tmp(f);
    if (ffp)
      cg_line(f, "%s = fcmp une %s %s, %s", c.s, a, v.s, cg_const(from, 0).s);
    else
      cg_line(f, "%s = icmp ne %s %s, 0", c.s, a, v.s);
    cg_line(f, "%s = zext i1 %s to i8", r.s, c.s);
  } else if (from == DPC_BOOL) {
    if (tfp)
      cg_line(f, "%s = uitofp i8 %s to %s", r.s, v.s, b);
    else
      cg_line(f, "%s = zext i8 %s to %s", r.s, v.s, b);
  } else if (ffp && tfp) {
    cg_line(f, "%s = %s %s %s to %s", r.s, !strcmp(a, "float") ? "fpext" : "fptrunc", a, v.s, b);
  } else if (ffp) {
    cg_line(f, "%s = call %s @llvm.fptosi.sat.%s.%s(%s %s)", r.s, b, b, sfx(from), a, v.s);
  } else if (tfp) {
    cg_line(f, "%s = sitofp %s %s to %s", r.s, a, v.s, b);
  } else if (!strcmp(a, "i64")) {
    /* i64 -> i32 saturates, like dpc_tstore_i64 */
    cg_val lo = cg_tmp(f), hi = cg_tmp(f), c1 = cg_tmp(f), c2 = cg_tmp(f);
    cg_line(f, "%s = icmp slt i64 %s, -2147483648", c1.s, v.s);
    cg_line(f, "%s = select i1 %s, i64 -2147483648, i64 %s", lo.s, c1.s, v.s);
    cg_line(f, "%s = icmp sgt i64 %s, 2147483647", c2.s, lo.s);
    cg_line(f, "%s = select i1 %s, i64 2147483647, i64 %s", hi.s, c2.s, lo.s);
    cg_line(f, "%s = trunc i64 %s to i32", r.s, hi.s);
  } else {
    cg_line(f, "%s = sext %s %s to %s", r.s, a, v.s, b);
  }
  return r;
}

static dpc_status lower(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  uint32_t node = f->node;
  dpc_op op = g->nodes[node].op;
  ew e;
  layout(g, node, &e);
  if (e.n_in > MAXIN)
    return dpc_graph_fail_node(g, node, d, DPC_ERR_INTERNAL, "too many inputs to lower");
  cg_val ptr[MAXIN + 1];
  for (uint32_t i = 0; i < e.n_in; i++) ptr[i] = cg_arg_ptr(f, i, e.in_t[i]);
  ptr[e.n_in] = cg_arg_ptr(f, e.n_in, e.out_t);
  cg_val stream = cg_const_i64(0);
  if (op == DPC_OP_DROPOUT) {
    /* dpc_rng_dropout_seed(seed, step) */
    dpc_attrs at = dpc_node_attrs(g, node);
    cg_val a = cg_tmp(f), b = cg_tmp(f);
    cg_line(f, "%s = add i64 %%step, %llu", a.s, (unsigned long long)0x5eedull);
    cg_line(f, "%s = call i64 @dpc_mix64(i64 %s)", b.s, a.s);
    stream = cg_tmp(f);
    cg_line(f, "%s = xor i64 %s, %llu", stream.s, b.s,
            (unsigned long long)dpc_attrs_int(at, "seed"));
    cg_val m = cg_tmp(f);
    cg_line(f, "%s = call i64 @dpc_mix64(i64 %s)", m.s, stream.s);
    stream = m;
  }
  /* training is decided per run unless the node says (dropout, batch_norm) */
  cg_val train_on = cg_tmp(f);
  const dpc_attr *tr =
      dpc_op_has(op, DPC_OPF_MODE) ? dpc_attrs_get(dpc_node_attrs(g, node), "training") : NULL;
  if (tr)
    cg_line(f, "%s = icmp ne i32 %d, 0", train_on.s, tr->u.i != 0);
  else
    cg_line(f, "%s = icmp ne i32 %%training, 0", train_on.s);
  cg_parallel_begin(f); /* each element on its own (cg.h) */
  k->total = e.dims[0];
  /* loops: the outermost over [begin, end), the rest whole; offsets carried per operand */
  cg_loop loops[DPC_MAX_RANK];
  cg_val off[MAXIN + 1];
  for (uint32_t i = 0; i <= e.n_in; i++) off[i] = cg_const_i64(0);
  for (uint32_t lv = 0; lv < e.rank; lv++) {
    cg_val lo = lv ? cg_const_i64(0) : (cg_val){"%begin"},
           hi = lv ? cg_const_i64(e.dims[lv]) : (cg_val){"%end"};
    loops[lv] = cg_loop_begin(f, lo, hi);
    for (uint32_t i = 0; i <= e.n_in; i++)
      if (e.stride[i][lv])
        off[i] = cg_add(f, off[i], cg_mul(f, loops[lv].i, cg_const_i64(e.stride[i][lv])));
  }
  cg_val x[MAXIN], r;
  for (uint32_t i = 0; i < e.n_in; i++) x[i] = cg_load(f, ptr[i], e.in_t[i], off[i]);
  dpc_status st = DPC_OK;
  if (op == DPC_OP_CAST) {
    r = convert(f, x[0], e.in_t[0], e.out_t);
  } else {
    /* dropout's mask is indexed from its offset (a replica's place in the whole batch) */
    int64_t first = op == DPC_OP_DROPOUT ? dpc_attrs_int(dpc_node_attrs(g, node), "offset") : 0;
    cg_val index = first ? cg_add(f, off[e.n_in], cg_const_i64(first)) : off[e.n_in];
    st = scalar(f, node, &e, x, train_on, index, stream, &r, d);
  }
  if (st) return st;
  cg_store(f, ptr[e.n_in], e.out_t, off[e.n_in], r);
  for (uint32_t lv = e.rank; lv-- > 0;) cg_loop_end(f, loops[lv]);
  cg_parallel_end(f);
  return DPC_OK;
}

const cg_lower_fn cg_elementwise_table[DPC_OP_COUNT] = {
    [DPC_OP_ADD] = lower,        [DPC_OP_SUB] = lower,        [DPC_OP_MUL] = lower,
    [DPC_OP_DIV] = lower,        [DPC_OP_POW] = lower,        [DPC_OP_MAX] = lower,
    [DPC_OP_MIN] = lower,        [DPC_OP_NEG] = lower,        [DPC_OP_ABS] = lower,
    [DPC_OP_RELU] = lower,       [DPC_OP_RELU6] = lower,      [DPC_OP_CLIP] = lower,
    [DPC_OP_LEAKY_RELU] = lower, [DPC_OP_GELU] = lower,       [DPC_OP_SIGMOID] = lower,
    [DPC_OP_TANH] = lower,       [DPC_OP_EXP] = lower,        [DPC_OP_LOG] = lower,
    [DPC_OP_SQRT] = lower,       [DPC_OP_RSQRT] = lower,      [DPC_OP_ERF] = lower,
    [DPC_OP_FLOOR] = lower,      [DPC_OP_SIGN] = lower,       [DPC_OP_COS] = lower,
    [DPC_OP_SIN] = lower,        [DPC_OP_EQUAL] = lower,      [DPC_OP_LESS] = lower,
    [DPC_OP_GREATER] = lower,    [DPC_OP_NOT] = lower,        [DPC_OP_WHERE] = lower,
    [DPC_OP_CAST] = lower,       [DPC_OP_ZEROS_LIKE] = lower, [DPC_OP_DROPOUT] = lower,
};
