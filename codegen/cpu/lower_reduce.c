/*
 * lower_reduce.c — LLVM IR for ops that combine many elements into one: softmax and
 * log_softmax, the two losses (softmax_cross_entropy, mse), reduce_sum / mean / max, and the
 * gradients softmax_grad, log_softmax_grad, softmax_cross_entropy_grad, sum_to and expand.
 *
 * Semantics are those of the reference kernels (runtime/ref/ref_reduce.c): float sums are
 * accumulated in double (f32, f16 and bf16 too), integer sums wrap, a NaN anywhere in a row makes
 * its maximum NaN (and so a softmax row all NaN), empty reductions give 0, -inf, the dtype's
 * minimum or NaN (mean) as there, a label outside [0, C) is bad data (cg_fail_if).
 *
 * Loop shapes, chosen so that the innermost loop always walks contiguous memory:
 *  - Along a row (the reduced axis is the last one, or the merged reduced dims end with it):
 *    one scalar accumulator per row, and the innermost loop is a reduction that LLVM
 *    vectorises because the accumulating fadd carries `reassoc` (max uses an nnan max plus a
 *    separate "saw a NaN" flag, both of which vectorise, and puts the NaN back at the end).
 *  - Across rows (the reduced axis is not the last one: softmax over axis 0, reduce_sum over
 *    the batch): the last kept dimension is cut into blocks of BLOCK columns with one
 *    accumulator per column in a fixed-size alloca; the innermost loop runs over the columns,
 *    elementwise, and the reduced dims are walked outside it in the reference's order.
 * exp is computed inline (cg_exp, lower_math.c) because a call to libm's exp in a loop stops it
 * vectorising.
 *
 * Parallelism: the outermost loop (rows, blocks of columns, or output elements) runs
 * [begin, end) and sets k->total; a loss that is one scalar has a trip count of 1.
 */
#include "codegen/cpu/cg.h"
#include "codegen/cpu/gemm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Columns per block when reducing across rows: 256 doubles (2 KiB) per accumulator stay in
 * L1 and give the vectorised column loop long trips; the accumulator arrays are this long. */
#define BLOCK 256
/* The softmax family reads a block of columns three times over, so its blocks are narrower:
 * dim x 64 elements stay in L2 between the passes where dim x 256 would not (measured: about
 * 1.5x faster along a 4096-long axis), and more blocks give more parallel iterations. */
#define ROW_BLOCK 64
/* Rows up to this long are summed by row_sum_f32. */
#define SHORT_ROW 1024

/* ---- text helpers -------------------------------------------------------------------------- */

static const dpc_value *in_val(const dpc_graph *g, uint32_t node, uint32_t i) {
  return &g->values[g->ids[g->nodes[node].in + i]];
}

/* A floating calc-type value of dtype t in double, and back (the reference's precision). */
static cg_val to_f64(cg_fn *f, cg_val v, dpc_dtype t) {
  return t == DPC_F64 ? v : cg_conv(f, "fpext", "float", v, "double");
}

static cg_val from_f64(cg_fn *f, cg_val v, dpc_dtype t) {
  return t == DPC_F64 ? v : cg_conv(f, "fptrunc", "double", v, "float");
}

/* i64 division and remainder by a positive constant (LLVM turns them into multiplies). */
static cg_val udivc(cg_fn *f, cg_val a, int64_t c) {
  return c == 1 ? a : cg_op2(f, "udiv", "i64", a, cg_const_i64(c));
}

static cg_val uremc(cg_fn *f, cg_val a, int64_t c) {
  return c == 1 ? cg_const_i64(0) : cg_op2(f, "urem", "i64", a, cg_const_i64(c));
}

static cg_val addmul(cg_fn *f, cg_val base, cg_val i, int64_t stride) {
  if (stride == 0) return base;
  return cg_add(f, base, stride == 1 ? i : cg_mul(f, i, cg_const_i64(stride)));
}

/* Raw element access in the stored type, no conversion: expand copies bits exactly. */
static cg_val load_raw(cg_fn *f, cg_val ptr, const char *st, cg_val idx) {
  cg_val p = cg_tmp(f), v = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", p.s, st, st, ptr.s, idx.s);
  cg_line(f, "%s = load %s, %s* %s", v.s, st, st, p.s);
  return v;
}

static void store_raw(cg_fn *f, cg_val ptr, const char *st, cg_val idx, cg_val v) {
  cg_val p = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", p.s, st, st, ptr.s, idx.s);
  cg_line(f, "store %s %s, %s* %s", st, v.s, st, p.s);
}

static cg_val emit_log64(cg_fn *f, cg_val v) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = call double @llvm.log.f64(double %s)", r.s, v.s);
  return r;
}

/* ---- accumulators: one per row (a scalar), or one per column of a block (an array) ---------- */

typedef struct lanes {
  bool block;   /* per-column accumulators, in arrays of BLOCK indexed by j */
  cg_val width; /* block: columns in this block (i64) */
  cg_val j;     /* block: the current column, inside a column loop */
} lanes;

typedef struct acc {
  cg_val slot;
  const char *ty;
} acc;

static acc acc_new(cg_fn *f, const lanes *ln, const char *ty) {
  acc a = {{{0}}, ty};
  snprintf(a.slot.s, sizeof a.slot.s, "%%red%u", f->n_label++);
  if (ln->block)
    dpc_buf_printf(&f->head, "  %s = alloca [%d x %s], align 32\n", a.slot.s, BLOCK, ty);
  else
    dpc_buf_printf(&f->head, "  %s = alloca %s\n", a.slot.s, ty);
  return a;
}

static cg_val acc_ptr(cg_fn *f, const lanes *ln, acc a) {
  if (!ln->block) return a.slot;
  cg_val p = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds [%d x %s], [%d x %s]* %s, i64 0, i64 %s", p.s, BLOCK,
          a.ty, BLOCK, a.ty, a.slot.s, ln->j.s);
  return p;
}

static cg_val acc_get(cg_fn *f, const lanes *ln, acc a) {
  cg_val p = acc_ptr(f, ln, a), v = cg_tmp(f);
  cg_line(f, "%s = load %s, %s* %s", v.s, a.ty, a.ty, p.s);
  return v;
}

static void acc_set(cg_fn *f, const lanes *ln, acc a, cg_val v) {
  cg_val p = acc_ptr(f, ln, a);
  cg_line(f, "store %s %s, %s* %s", a.ty, v.s, a.ty, p.s);
}

/* A loop over the columns of the block (nothing in row mode: the body runs once). */
static cg_loop cols_begin(cg_fn *f, lanes *ln) {
  cg_loop l = {0, {{0}}};
  if (!ln->block) return l;
  l = cg_loop_begin(f, cg_const_i64(0), ln->width);
  ln->j = l.i;
  return l;
}

static void cols_end(cg_fn *f, const lanes *ln, cg_loop l) {
  if (ln->block) cg_loop_end(f, l);
}

static void acc_fill(cg_fn *f, lanes *ln, acc a, cg_val init) {
  cg_loop l = cols_begin(f, ln);
  acc_set(f, ln, a, init);
  cols_end(f, ln, l);
}

/* sum += v, reassociable so that a row's sum vectorises (any order is as accurate as the
 * reference's, in double). */
static void sum_step(cg_fn *f, const lanes *ln, acc s, cg_val v) {
  cg_val cur = acc_get(f, ln, s);
  acc_set(f, ln, s, cg_op2(f, "fadd reassoc contract", s.ty, cur, v));
}

/* The NaN-propagating maximum `if (v > m || v != v) m = v` of the reference. Along a row,
 * LLVM only vectorises a max reduction it may treat as NaN-free (nnan nsz), so the row keeps
 * that max and, separately, whether it saw a NaN; max_final puts the NaN back. A NaN makes the
 * nnan compare poison, but only the max that is then replaced by NaN depends on it. Across
 * rows the exact form is elementwise and vectorises as it is. */
typedef struct maxacc {
  acc m, nan;
  bool fp;
} maxacc;

static maxacc max_new(cg_fn *f, lanes *ln, const char *ty, dpc_dtype t) {
  maxacc mx = {acc_new(f, ln, ty), {{{0}}, NULL}, cg_is_fp(t)};
  cg_val init = mx.fp          ? cg_fconst(ty, -INFINITY)
                : t == DPC_I32 ? cg_const_i64(INT32_MIN)
                               : cg_const_i64(INT64_MIN);
  acc_fill(f, ln, mx.m, init);
  if (mx.fp && !ln->block) {
    mx.nan = acc_new(f, ln, "i8");
    acc_fill(f, ln, mx.nan, cg_const_i64(0));
  }
  return mx;
}

static void max_step(cg_fn *f, const lanes *ln, maxacc mx, cg_val v) {
  const char *ty = mx.m.ty;
  cg_val cur = acc_get(f, ln, mx.m);
  if (!mx.fp) {
    acc_set(f, ln, mx.m, cg_sel(f, cg_op2(f, "icmp sgt", ty, v, cur), ty, v, cur));
    return;
  }
  if (ln->block) {
    cg_val gt = cg_op2(f, "fcmp ogt", ty, v, cur), un = cg_op2(f, "fcmp uno", ty, v, v);
    acc_set(f, ln, mx.m, cg_sel(f, cg_op2(f, "or", "i1", gt, un), ty, v, cur));
    return;
  }
  cg_val gt = cg_op2(f, "fcmp nnan nsz ogt", ty, v, cur), nm = cg_tmp(f);
  cg_line(f, "%s = select nnan nsz i1 %s, %s %s, %s %s", nm.s, gt.s, ty, v.s, ty, cur.s);
  acc_set(f, ln, mx.m, nm);
  cg_val un = cg_op2(f, "fcmp uno", ty, v, v), z = cg_conv(f, "zext", "i1", un, "i8");
  acc_set(f, ln, mx.nan, cg_op2(f, "or", "i8", acc_get(f, ln, mx.nan), z));
}

/* After the last max_step: the maximum, also left in mx.m for later acc_get. */
static cg_val max_final(cg_fn *f, const lanes *ln, maxacc mx) {
  cg_val m = acc_get(f, ln, mx.m);
  if (!mx.fp || ln->block) return m;
  cg_val saw = cg_op2(f, "icmp ne", "i8", acc_get(f, ln, mx.nan), cg_const_i64(0));
  m = cg_sel(f, saw, mx.m.ty, cg_fconst(mx.m.ty, NAN), m);
  acc_set(f, ln, mx.m, m);
  return m;
}

/* ---- the softmax family: rows along an axis ------------------------------------------------
 * x is [outer, dim, inner] around the axis. With inner == 1 a row is contiguous: one row per
 * parallel iteration, scalar accumulators. Otherwise a parallel iteration is one block of up
 * to ROW_BLOCK neighbouring columns (o, in..in+w) and walks k outside the columns. */

typedef struct rows {
  lanes ln;
  int64_t outer, dim, inner, nblk;
  cg_val base; /* offset of element k = 0 of the row, or of column 0 of the block */
  cg_loop lk, lj;
} rows;

static void rows_init(rows *r, const dpc_shape *s, uint32_t ax) {
  memset(r, 0, sizeof *r);
  r->outer = 1;
  r->inner = 1;
  for (uint32_t i = 0; i < ax; i++) r->outer *= s->d[i];
  for (uint32_t i = ax + 1; i < s->rank; i++) r->inner *= s->d[i];
  r->dim = s->d[ax];
  r->ln.block = r->inner > 1;
  r->nblk = r->ln.block ? (r->inner + ROW_BLOCK - 1) / ROW_BLOCK : 1;
}

/* The parallel trip count: rows, or blocks of columns. */
static int64_t rows_total(const rows *r) {
  return r->outer * r->nblk;
}

/* Position on parallel iteration p (an i64 value). */
static void rows_open(cg_fn *f, rows *r, cg_val p) {
  if (!r->ln.block) {
    r->base = cg_mul(f, p, cg_const_i64(r->dim));
    return;
  }
  if (r->nblk == 1) {
    r->base = cg_mul(f, p, cg_const_i64(r->dim * r->inner));
    r->ln.width = cg_const_i64(r->inner);
    return;
  }
  cg_val o = udivc(f, p, r->nblk), blk = uremc(f, p, r->nblk);
  cg_val col = cg_mul(f, blk, cg_const_i64(ROW_BLOCK));
  r->base = cg_add(f, cg_mul(f, o, cg_const_i64(r->dim * r->inner)), col);
  cg_val left = cg_op2(f, "sub", "i64", cg_const_i64(r->inner), col);
  cg_val full = cg_op2(f, "icmp sgt", "i64", left, cg_const_i64(ROW_BLOCK));
  r->ln.width = cg_sel(f, full, "i64", cg_const_i64(ROW_BLOCK), left);
}

/* A pass over every element of the row (block): returns the element's offset. */
static cg_val sweep_begin(cg_fn *f, rows *r) {
  r->lk = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(r->dim));
  cg_val off = addmul(f, r->base, r->lk.i, r->inner);
  if (r->ln.block) {
    r->lj = cols_begin(f, &r->ln);
    off = cg_add(f, off, r->lj.i);
  }
  return off;
}

static void sweep_end(cg_fn *f, rows *r) {
  cols_end(f, &r->ln, r->lj);
  cg_loop_end(f, r->lk);
}

/* The row maximum of x (NaN if any is NaN), left in an accumulator of the calc type. */
static maxacc row_max(cg_fn *f, rows *r, cg_val x, dpc_dtype t) {
  maxacc mx = max_new(f, &r->ln, cg_calc_type(t), t);
  cg_val off = sweep_begin(f, r);
  max_step(f, &r->ln, mx, cg_load(f, x, t, off));
  sweep_end(f, r);
  if (!r->ln.block) max_final(f, &r->ln, mx); /* across rows the max is already exact */
  return mx;
}

/* exp(x[off] - m) in the calc type. */
static cg_val exp_shifted(cg_fn *f, const rows *r, cg_val x, dpc_dtype t, maxacc mx, cg_val off) {
  const char *ct = cg_calc_type(t);
  cg_val v = cg_load(f, x, t, off);
  return cg_exp(f, ct, cg_op2(f, "fsub", ct, v, acc_get(f, &r->ln, mx.m)));
}

/* The sum of exp(x - m) in double. With `keep`, each exp is also stored at out (whose stored
 * type is the calc type), so the last pass need not compute it again. */
static acc row_sumexp(cg_fn *f, rows *r, cg_val x, dpc_dtype t, maxacc mx, cg_val keep_out,
                      bool keep) {
  acc s = acc_new(f, &r->ln, "double");
  acc_fill(f, &r->ln, s, cg_const(DPC_F64, 0));
  cg_val off = sweep_begin(f, r);
  cg_val e = exp_shifted(f, r, x, t, mx, off);
  sum_step(f, &r->ln, s, to_f64(f, e, t));
  if (keep) cg_store(f, keep_out, t, off, e);
  sweep_end(f, r);
  return s;
}

static dpc_status get_axis(cg_fn *f, uint32_t rank, uint32_t *ax, dpc_diag *d) {
  int64_t a = dpc_attrs_int(dpc_node_attrs(f->g, f->node), "axis");
  if (dpc_axis_norm(a, rank, ax)) return DPC_OK;
  return dpc_graph_fail_node(f->g, f->node, d, DPC_ERR_INTERNAL, "axis %lld out of range",
                             (long long)a);
}

/* softmax: exp(x - m) / sum; log_softmax: (x - m) - log(sum), both in double as the
 * reference. exp itself is in the calc type: float's few-ulp error is far inside what an f32
 * result can show. */
static dpc_status lower_softmax(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  const dpc_value *xv = in_val(f->g, f->node, 0);
  bool log_form = f->g->nodes[f->node].op == DPC_OP_LOG_SOFTMAX;
  dpc_dtype t = xv->dtype;
  uint32_t ax;
  dpc_status st = get_axis(f, xv->shape.rank, &ax, d);
  if (st) return st;
  cg_val x = cg_arg_ptr(f, 0, t), y = cg_arg_ptr(f, 1, t);
  rows r;
  rows_init(&r, &xv->shape, ax);
  k->total = rows_total(&r);
  cg_loop par = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  rows_open(f, &r, par.i);
  maxacc mx = row_max(f, &r, x, t);
  /* f32 and f64 outputs hold exp exactly as computed; f16 and bf16 would round it */
  bool keep = !log_form && (t == DPC_F32 || t == DPC_F64);
  acc s = row_sumexp(f, &r, x, t, mx, y, keep);
  cg_loop l = cols_begin(f, &r.ln);
  cg_val sv = acc_get(f, &r.ln, s);
  acc_set(f, &r.ln, s,
          log_form ? emit_log64(f, sv) : cg_op2(f, "fdiv", "double", cg_const(DPC_F64, 1), sv));
  cols_end(f, &r.ln, l);
  cg_val off = sweep_begin(f, &r), res;
  if (log_form) {
    cg_val v = to_f64(f, cg_load(f, x, t, off), t);
    cg_val z = cg_op2(f, "fsub", "double", v, to_f64(f, acc_get(f, &r.ln, mx.m), t));
    res = cg_op2(f, "fsub", "double", z, acc_get(f, &r.ln, s));
  } else {
    cg_val e = keep ? cg_load(f, y, t, off) : exp_shifted(f, &r, x, t, mx, off);
    res = cg_op2(f, "fmul", "double", to_f64(f, e, t), acc_get(f, &r.ln, s));
  }
  cg_store(f, y, t, off, from_f64(f, res, t));
  sweep_end(f, &r);
  cg_loop_end(f, par);
  return DPC_OK;
}

/* softmax_grad: y * (dy - sum(dy * y)); log_softmax_grad: dy - exp(y) * sum(dy); in double.
 * exp is in double here whatever the dtype: dy - exp(y) * s can cancel, and then the error of
 * a float exp would show. */
static dpc_status lower_softmax_grad(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  const dpc_value *dyv = in_val(f->g, f->node, 0);
  bool log_form = f->g->nodes[f->node].op == DPC_OP_LOG_SOFTMAX_GRAD;
  dpc_dtype t = dyv->dtype;
  uint32_t ax;
  dpc_status st = get_axis(f, dyv->shape.rank, &ax, d);
  if (st) return st;
  cg_val dy = cg_arg_ptr(f, 0, t), y = cg_arg_ptr(f, 1, t), dx = cg_arg_ptr(f, 2, t);
  rows r;
  rows_init(&r, &dyv->shape, ax);
  k->total = rows_total(&r);
  cg_loop par = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  rows_open(f, &r, par.i);
  acc s = acc_new(f, &r.ln, "double");
  acc_fill(f, &r.ln, s, cg_const(DPC_F64, 0));
  cg_val off = sweep_begin(f, &r);
  cg_val g = to_f64(f, cg_load(f, dy, t, off), t);
  if (!log_form) g = cg_op2(f, "fmul contract", "double", g, to_f64(f, cg_load(f, y, t, off), t));
  sum_step(f, &r.ln, s, g);
  sweep_end(f, &r);
  off = sweep_begin(f, &r);
  g = to_f64(f, cg_load(f, dy, t, off), t);
  cg_val v = to_f64(f, cg_load(f, y, t, off), t), sv = acc_get(f, &r.ln, s), res;
  if (log_form) {
    cg_val e = cg_exp(f, "double", v);
    res = cg_op2(f, "fsub", "double", g, cg_op2(f, "fmul", "double", e, sv));
  } else {
    res = cg_op2(f, "fmul", "double", v, cg_op2(f, "fsub", "double", g, sv));
  }
  cg_store(f, dx, t, off, from_f64(f, res, t));
  sweep_end(f, &r);
  cg_loop_end(f, par);
  return DPC_OK;
}

/* ---- losses ----------------------------------------------------------------------------- */

/* Label `s` as i64, reported as bad data outside [0, c); the returned index is clamped into
 * range so that nothing reads outside the row (the kernel's results are discarded then). */
static cg_val label_at(cg_fn *f, cg_val labels, dpc_dtype lt, cg_val s, int64_t c) {
  cg_val lab = cg_load(f, labels, lt, s);
  if (lt == DPC_I32) lab = cg_conv(f, "sext", "i32", lab, "i64");
  cg_val neg = cg_op2(f, "icmp slt", "i64", lab, cg_const_i64(0));
  cg_val big = cg_op2(f, "icmp sge", "i64", lab, cg_const_i64(c));
  cg_val bad = cg_op2(f, "or", "i1", neg, big);
  cg_fail_if(f, bad);
  return cg_sel(f, bad, "i64", cg_const_i64(0), lab);
}

/* The mean over the batch of log(sum exp(row - m)) - (row[label] - m). One scalar: the
 * parallel loop has a single iteration and the rows run inside it, in order. */
static dpc_status lower_sce(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_value *lv = in_val(f->g, f->node, 0), *yv = in_val(f->g, f->node, 1);
  dpc_dtype t = lv->dtype;
  int64_t n = lv->shape.d[0], c = lv->shape.d[1];
  cg_val x = cg_arg_ptr(f, 0, t), labels = cg_arg_ptr(f, 1, yv->dtype);
  cg_val out = cg_arg_ptr(f, 2, t);
  rows r;
  rows_init(&r, &lv->shape, 1);
  k->total = 1;
  cg_loop par = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  acc tot = acc_new(f, &r.ln, "double");
  acc_set(f, &r.ln, tot, cg_const(DPC_F64, 0));
  cg_loop ls = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(n));
  cg_val lab = label_at(f, labels, yv->dtype, ls.i, c);
  if (c > 0) { /* with no classes every label is bad, and there is no row[label] to read */
    rows_open(f, &r, ls.i);
    maxacc mx = row_max(f, &r, x, t);
    acc s = row_sumexp(f, &r, x, t, mx, x, false);
    cg_val xl = to_f64(f, cg_load(f, x, t, cg_add(f, r.base, lab)), t);
    cg_val z = cg_op2(f, "fsub", "double", xl, to_f64(f, acc_get(f, &r.ln, mx.m), t));
    cg_val term = cg_op2(f, "fsub", "double", emit_log64(f, acc_get(f, &r.ln, s)), z);
    acc_set(f, &r.ln, tot, cg_op2(f, "fadd", "double", acc_get(f, &r.ln, tot), term));
  }
  cg_loop_end(f, ls);
  /* the mean of no samples is NaN, as in the reference */
  cg_val loss =
      n ? cg_op2(f, "fdiv", "double", acc_get(f, &r.ln, tot), cg_const(DPC_F64, (double)n))
        : cg_const(DPC_F64, NAN);
  cg_store(f, out, t, cg_const_i64(0), from_f64(f, loss, t));
  cg_loop_end(f, par);
  return DPC_OK;
}

/* (softmax(row) - onehot(label)) * dloss / N, one row per parallel iteration. p is formed in
 * double so that p - 1 at the label keeps its relative accuracy when p is near 1. */
static dpc_status lower_sce_grad(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_value *lv = in_val(f->g, f->node, 1), *yv = in_val(f->g, f->node, 2);
  dpc_dtype t = lv->dtype;
  int64_t n = lv->shape.d[0], c = lv->shape.d[1];
  cg_val dloss = cg_arg_ptr(f, 0, t), x = cg_arg_ptr(f, 1, t);
  cg_val labels = cg_arg_ptr(f, 2, yv->dtype), out = cg_arg_ptr(f, 3, t);
  cg_val scale = cg_const(DPC_F64, 0);
  if (n) {
    cg_val dl = to_f64(f, cg_load(f, dloss, t, cg_const_i64(0)), t);
    scale = cg_op2(f, "fdiv", "double", dl, cg_const(DPC_F64, (double)n));
  }
  rows r;
  rows_init(&r, &lv->shape, 1);
  k->total = n;
  cg_loop par = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val lab = label_at(f, labels, yv->dtype, par.i, c);
  rows_open(f, &r, par.i);
  maxacc mx = row_max(f, &r, x, t);
  bool keep = t == DPC_F32 || t == DPC_F64;
  acc s = row_sumexp(f, &r, x, t, mx, out, keep);
  cg_val inv = cg_op2(f, "fdiv", "double", cg_const(DPC_F64, 1), acc_get(f, &r.ln, s));
  cg_val off = sweep_begin(f, &r);
  cg_val e = keep ? cg_load(f, out, t, off) : exp_shifted(f, &r, x, t, mx, off);
  cg_val p = cg_op2(f, "fmul", "double", to_f64(f, e, t), inv);
  cg_val hit = cg_op2(f, "icmp eq", "i64", r.lk.i, lab);
  cg_val oh = cg_sel(f, hit, "double", cg_const(DPC_F64, 1), cg_const(DPC_F64, 0));
  cg_val res = cg_op2(f, "fmul", "double", cg_op2(f, "fsub", "double", p, oh), scale);
  cg_store(f, out, t, off, from_f64(f, res, t));
  sweep_end(f, &r);
  cg_loop_end(f, par);
  return DPC_OK;
}

/* mean((a - b)^2) over every element, in double; NaN for no elements. */
static dpc_status lower_mse(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_value *av = in_val(f->g, f->node, 0);
  dpc_dtype t = av->dtype;
  int64_t n = dpc_shape_numel(&av->shape);
  cg_val a = cg_arg_ptr(f, 0, t), b = cg_arg_ptr(f, 1, t), out = cg_arg_ptr(f, 2, t);
  k->total = 1;
  lanes ln = {0};
  cg_loop par = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  acc s = acc_new(f, &ln, "double");
  acc_set(f, &ln, s, cg_const(DPC_F64, 0));
  cg_loop li = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(n));
  cg_val va = to_f64(f, cg_load(f, a, t, li.i), t), vb = to_f64(f, cg_load(f, b, t, li.i), t);
  cg_val e = cg_op2(f, "fsub", "double", va, vb);
  sum_step(f, &ln, s, cg_op2(f, "fmul contract", "double", e, e));
  cg_loop_end(f, li);
  cg_val res = n ? cg_op2(f, "fdiv", "double", acc_get(f, &ln, s), cg_const(DPC_F64, (double)n))
                 : cg_const(DPC_F64, NAN);
  cg_store(f, out, t, cg_const_i64(0), from_f64(f, res, t));
  cg_loop_end(f, par);
  return DPC_OK;
}

/* ---- reductions over any set of axes ---------------------------------------------------------
 * x's dims of size 1 are dropped and neighbours of the same kind (kept or reduced) merged, so
 * x is an alternation of kept and reduced segments. The output is the kept segments in order,
 * row-major. If the last segment is reduced (or nothing is kept), one parallel iteration per
 * output element reduces its box with a scalar accumulator, innermost along the contiguous
 * segment. If the last segment is kept, it is cut into blocks of columns (see the top). */

typedef enum red_kind { RK_SUM, RK_MEAN, RK_MAX } red_kind;

typedef struct seg {
  int64_t n, stride;
  bool red;
} seg;

/* The accumulator of one output element: a sum (double for floats, the dtype for integers,
 * which wrap) or a max. */
typedef struct racc {
  red_kind kind;
  dpc_dtype t;
  acc sum;
  maxacc mx;
} racc;

static const char *racc_type(red_kind kind, dpc_dtype t) {
  return cg_is_fp(t) && kind != RK_MAX ? "double" : cg_calc_type(t);
}

static racc racc_new(cg_fn *f, lanes *ln, red_kind kind, dpc_dtype t) {
  racc a;
  memset(&a, 0, sizeof a);
  a.kind = kind;
  a.t = t;
  const char *ty = racc_type(kind, t);
  if (kind == RK_MAX) {
    a.mx = max_new(f, ln, ty, t);
  } else {
    a.sum = acc_new(f, ln, ty);
    acc_fill(f, ln, a.sum, cg_is_fp(t) ? cg_const(DPC_F64, 0) : cg_const_i64(0));
  }
  return a;
}

static void racc_step(cg_fn *f, const lanes *ln, racc a, cg_val v) {
  if (a.kind == RK_MAX) {
    max_step(f, ln, a.mx, v);
  } else if (cg_is_fp(a.t)) {
    sum_step(f, ln, a.sum, to_f64(f, v, a.t));
  } else {
    cg_val cur = acc_get(f, ln, a.sum);
    acc_set(f, ln, a.sum, cg_op2(f, "add", a.sum.ty, cur, v));
  }
}

/* The output value, in the calc type. */
static cg_val racc_final(cg_fn *f, const lanes *ln, racc a, int64_t ncut) {
  if (a.kind == RK_MAX) return max_final(f, ln, a.mx);
  cg_val s = acc_get(f, ln, a.sum);
  if (!cg_is_fp(a.t)) return s;
  if (a.kind == RK_MEAN) s = cg_op2(f, "fdiv", "double", s, cg_const(DPC_F64, (double)ncut));
  return from_f64(f, s, a.t);
}

/* The input offset of the kept segments' position `q` (a flat index over them, row-major). */
static cg_val kept_offset(cg_fn *f, const seg *sg, uint32_t ns, cg_val q) {
  cg_val off = cg_const_i64(0), rem = q;
  uint32_t first = ns;
  for (uint32_t i = 0; i < ns; i++)
    if (!sg[i].red) {
      first = i;
      break;
    }
  for (uint32_t i = ns; i-- > 0;) {
    if (sg[i].red) continue;
    cg_val c = i == first ? rem : uremc(f, rem, sg[i].n);
    if (i != first) rem = udivc(f, rem, sg[i].n);
    off = addmul(f, off, c, sg[i].stride);
  }
  return off;
}

/* The sum, in double, of n contiguous f32 at x[base]: vectors of the target's width widened to
 * double, the last one masked, then halved down to one lane. For short rows (global average
 * pooling's 7x7 = 49), where the loop LLVM vectorises ran its remainder one element at a time:
 * MobileNetV2's pool of 8 x 1280 planes took 0.32 ms, ONNX Runtime's 0.045. */
static cg_val row_sum_f32(cg_fn *f, cg_val x, cg_val base, int64_t n) {
  gm_cfg c; /* f32 vectors of the target's width: the loads and the tail's mask */
  gm_choose(&c, f->vector_bits, DPC_F32, 1, 1, 1);
  int vl = c.vl;
  const char *vf = c.vty;
  char vd[32];
  snprintf(vd, sizeof vd, "<%d x double>", vl);
  cg_val slot = cg_tmp(f);
  dpc_buf_printf(&f->head, "  %s = alloca %s\n", slot.s, vd);
  cg_line(f, "store %s zeroinitializer, %s* %s", vd, vd, slot.s);
  int64_t full = n / vl, tail = n % vl;
  for (int chunk = 0; chunk < 2; chunk++) {
    if (chunk == 0 && full == 0) continue;
    if (chunk == 1 && tail == 0) break;
    cg_loop l = {0, {{0}}};
    cg_val at = cg_add(f, base, cg_const_i64(full * vl));
    if (chunk == 0) {
      l = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(full));
      at = cg_add(f, base, cg_mul(f, l.i, cg_const_i64(vl)));
    }
    cg_val p = gm_gep(f, "float", x, at, true);
    cg_val v = chunk == 0
                   ? gm_vload(f, &c, p, 4)
                   : gm_mload(f, &c, p, gm_lanes(f, &c, cg_const_i64(0), cg_const_i64(tail)));
    cg_val w = cg_conv(f, "fpext", vf, v, vd), cur = cg_tmp(f);
    cg_line(f, "%s = load %s, %s* %s", cur.s, vd, vd, slot.s);
    cg_line(f, "store %s %s, %s* %s", vd, cg_op2(f, "fadd reassoc", vd, cur, w).s, vd, slot.s);
    if (chunk == 0) cg_loop_end(f, l);
  }
  cg_val sum = cg_tmp(f);
  cg_line(f, "%s = load %s, %s* %s", sum.s, vd, vd, slot.s);
  for (int h = vl / 2; h >= 1; h /= 2) {
    /* lanes [0, h) plus lanes [h, 2h); the upper half is left over and never read */
    char lo[256], hi[256];
    size_t ol = (size_t)snprintf(lo, sizeof lo, "<"), oh = (size_t)snprintf(hi, sizeof hi, "<");
    for (int i = 0; i < vl; i++) {
      ol += (size_t)snprintf(lo + ol, sizeof lo - ol, "%si32 %d", i ? ", " : "", i % h);
      oh += (size_t)snprintf(hi + oh, sizeof hi - oh, "%si32 %d", i ? ", " : "", h + i % h);
    }
    snprintf(lo + ol, sizeof lo - ol, ">");
    snprintf(hi + oh, sizeof hi - oh, ">");
    cg_val a = cg_tmp(f), b = cg_tmp(f);
    cg_line(f, "%s = shufflevector %s %s, %s undef, <%d x i32> %s", a.s, vd, sum.s, vd, vl, lo);
    cg_line(f, "%s = shufflevector %s %s, %s undef, <%d x i32> %s", b.s, vd, sum.s, vd, vl, hi);
    sum = cg_op2(f, "fadd reassoc", vd, a, b);
  }
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = extractelement %s %s, i32 0", r.s, vd, sum.s);
  return r;
}

static dpc_status reduce_into(cg_kernel *k, const bool *red, red_kind kind) {
  cg_fn *f = k->f;
  const dpc_value *xv = in_val(f->g, f->node, 0);
  dpc_dtype t = xv->dtype;
  const dpc_shape *xs = &xv->shape;
  int64_t xst[DPC_MAX_RANK];
  dpc_shape_strides(xs, xst);
  int64_t nout = 1, ncut = 1;
  seg sg[DPC_MAX_RANK];
  uint32_t ns = 0;
  for (uint32_t i = 0; i < xs->rank; i++) {
    if (red[i])
      ncut *= xs->d[i];
    else
      nout *= xs->d[i];
    if (xs->d[i] == 1) continue;
    if (ns && sg[ns - 1].red == red[i] && sg[ns - 1].stride == xs->d[i] * xst[i]) {
      sg[ns - 1].n *= xs->d[i];
      sg[ns - 1].stride = xst[i];
    } else {
      sg[ns++] = (seg){xs->d[i], xst[i], red[i]};
    }
  }
  cg_val x = cg_arg_ptr(f, 0, t), y = cg_arg_ptr(f, f->g->nodes[f->node].n_in, t);
  if (nout == 0) { /* nothing to write */
    k->total = 0;
    return DPC_OK;
  }
  if (ncut == 0) { /* every output is the reduction of nothing */
    k->total = nout;
    double v = kind == RK_SUM ? 0 : kind == RK_MEAN ? NAN : -INFINITY;
    cg_val c = cg_is_fp(t)      ? cg_const(t, v)
               : kind != RK_MAX ? cg_const_i64(0)
               : t == DPC_I32   ? cg_const_i64(INT32_MIN)
                                : cg_const_i64(INT64_MIN);
    cg_loop par = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
    cg_store(f, y, t, par.i, c);
    cg_loop_end(f, par);
    return DPC_OK;
  }
  lanes ln = {0};
  ln.block = ns > 0 && !sg[ns - 1].red;
  cg_loop par, rl[DPC_MAX_RANK];
  cg_val base, obase;
  int64_t w = 1;
  if (!ln.block) {
    k->total = nout;
    par = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
    base = kept_offset(f, sg, ns, par.i);
    obase = par.i;
  } else {
    w = sg[ns - 1].n;
    int64_t nblk = (w + BLOCK - 1) / BLOCK;
    k->total = nout / w * nblk;
    par = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
    cg_val q = udivc(f, par.i, nblk), blk = uremc(f, par.i, nblk);
    cg_val col = cg_mul(f, blk, cg_const_i64(BLOCK));
    base = cg_add(f, kept_offset(f, sg, ns - 1, q), col);
    obase = cg_add(f, cg_mul(f, q, cg_const_i64(w)), col);
    if (nblk == 1) {
      ln.width = cg_const_i64(w);
    } else {
      cg_val left = cg_op2(f, "sub", "i64", cg_const_i64(w), col);
      cg_val full = cg_op2(f, "icmp sgt", "i64", left, cg_const_i64(BLOCK));
      ln.width = cg_sel(f, full, "i64", cg_const_i64(BLOCK), left);
    }
  }
  if (!ln.block && t == DPC_F32 && kind != RK_MAX && ns >= 1 && sg[ns - 1].red &&
      sg[ns - 1].stride == 1 && sg[ns - 1].n == ncut && ncut <= SHORT_ROW &&
      f->vector_bits >= 128 && ncut >= f->vector_bits / 32) {
    /* one short contiguous row per output, at least a vector long (shorter ones keep the
     * reference's order, which LLVM leaves alone there) */
    cg_val sum = row_sum_f32(f, x, base, sg[ns - 1].n);
    if (kind == RK_MEAN) sum = cg_op2(f, "fdiv", "double", sum, cg_const(DPC_F64, (double)ncut));
    cg_store(f, y, t, obase, from_f64(f, sum, t));
    cg_loop_end(f, par);
    return DPC_OK;
  }
  racc a = racc_new(f, &ln, kind, t);
  cg_val off = base;
  for (uint32_t i = 0; i < ns; i++) {
    if (!sg[i].red) continue;
    rl[i] = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(sg[i].n));
    off = addmul(f, off, rl[i].i, sg[i].stride);
  }
  cg_loop lj = cols_begin(f, &ln);
  if (ln.block) off = cg_add(f, off, lj.i);
  racc_step(f, &ln, a, cg_load(f, x, t, off));
  cols_end(f, &ln, lj);
  for (uint32_t i = ns; i-- > 0;)
    if (sg[i].red) cg_loop_end(f, rl[i]);
  lj = cols_begin(f, &ln);
  cg_val res = racc_final(f, &ln, a, ncut);
  cg_store(f, y, t, ln.block ? cg_add(f, obase, lj.i) : obase, res);
  cols_end(f, &ln, lj);
  cg_loop_end(f, par);
  return DPC_OK;
}

/* The axes attribute as flags against `rank`; all axes when absent (as the shape rules). */
static void axes_flags(const cg_fn *f, uint32_t rank, bool red[DPC_MAX_RANK]) {
  dpc_attrs at = dpc_node_attrs(f->g, f->node);
  memset(red, 0, DPC_MAX_RANK * sizeof *red);
  if (!dpc_attrs_get(at, "axes")) {
    for (uint32_t i = 0; i < rank; i++) red[i] = true;
    return;
  }
  int64_t axes[DPC_MAX_RANK];
  uint32_t n = dpc_attrs_ints(at, "axes", axes, DPC_MAX_RANK, 0);
  for (uint32_t i = 0; i < n && i < DPC_MAX_RANK; i++) {
    uint32_t ax = 0;
    if (dpc_axis_norm(axes[i], rank, &ax)) red[ax] = true;
  }
}

static dpc_status lower_reduce(cg_kernel *k, dpc_diag *d) {
  (void)d;
  dpc_op op = k->f->g->nodes[k->f->node].op;
  bool red[DPC_MAX_RANK];
  axes_flags(k->f, in_val(k->f->g, k->f->node, 0)->shape.rank, red);
  return reduce_into(k, red,
                     op == DPC_OP_REDUCE_SUM    ? RK_SUM
                     : op == DPC_OP_REDUCE_MEAN ? RK_MEAN
                                                : RK_MAX);
}

/* sum_to(x, like): a reduce_sum over x's leading extra dims and where like has 1 and x not. */
static dpc_status lower_sum_to(cg_kernel *k, dpc_diag *d) {
  (void)d;
  const dpc_shape *xs = &in_val(k->f->g, k->f->node, 0)->shape;
  const dpc_shape *ys = &k->f->g->values[k->f->g->nodes[k->f->node].out].shape;
  uint32_t lead = xs->rank - ys->rank;
  bool red[DPC_MAX_RANK] = {0};
  for (uint32_t i = 0; i < xs->rank; i++)
    red[i] = i < lead || (ys->d[i - lead] == 1 && xs->d[i] != 1);
  return reduce_into(k, red, RK_SUM);
}

/* ---- expand ------------------------------------------------------------------------------
 * A broadcasting copy: x's stride is 0 along the expanded axes. Dims are merged where both
 * x and y continue contiguously (as lower_elementwise.c does), so the innermost loop copies a
 * contiguous run or repeats one element along it. Without mean the bits are copied as they are
 * (any dtype, as the reference's memmove); with mean each element is divided, in double, by
 * the number of repeats. */
static dpc_status lower_expand(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_value *xv = in_val(g, f->node, 0);
  const dpc_shape *ys = &g->values[g->nodes[f->node].out].shape;
  dpc_dtype t = xv->dtype;
  uint32_t rank = ys->rank;
  bool in_a[DPC_MAX_RANK];
  axes_flags(f, rank, in_a);
  bool kept = xv->shape.rank == rank;
  bool mean = dpc_attrs_int(dpc_node_attrs(g, f->node), "mean") != 0;
  int64_t xst[DPC_MAX_RANK], yst[DPC_MAX_RANK], st[DPC_MAX_RANK];
  dpc_shape_strides(&xv->shape, xst);
  dpc_shape_strides(ys, yst);
  double repeats = 1;
  for (uint32_t i = 0, j = 0; i < rank; i++) {
    if (in_a[i]) {
      repeats *= (double)ys->d[i];
      j += kept;
      st[i] = 0;
    } else {
      st[i] = xst[j++];
    }
  }
  int64_t dims[DPC_MAX_RANK], sx[DPC_MAX_RANK], sy[DPC_MAX_RANK];
  uint32_t m = 0;
  for (uint32_t i = 0; i < rank; i++) {
    if (ys->d[i] == 1) continue;
    if (m && sx[m - 1] == st[i] * ys->d[i] && sy[m - 1] == yst[i] * ys->d[i]) {
      dims[m - 1] *= ys->d[i];
      sx[m - 1] = st[i];
      sy[m - 1] = yst[i];
    } else {
      dims[m] = ys->d[i], sx[m] = st[i], sy[m] = yst[i];
      m++;
    }
  }
  if (m == 0) dims[0] = 1, sx[0] = 0, sy[0] = 0, m = 1;
  const char *stt = cg_store_type(t);
  cg_val x = cg_arg_ptr(f, 0, t), y = cg_arg_ptr(f, 2, t);
  k->total = dims[0];
  cg_loop loops[DPC_MAX_RANK];
  cg_val ox = cg_const_i64(0), oy = cg_const_i64(0);
  for (uint32_t lv = 0; lv < m; lv++) {
    cg_val lo = lv ? cg_const_i64(0) : (cg_val){"%begin"};
    cg_val hi = lv ? cg_const_i64(dims[lv]) : (cg_val){"%end"};
    loops[lv] = cg_loop_begin(f, lo, hi);
    ox = addmul(f, ox, loops[lv].i, sx[lv]);
    oy = addmul(f, oy, loops[lv].i, sy[lv]);
  }
  if (mean) {
    cg_val v = to_f64(f, cg_load(f, x, t, ox), t);
    v = cg_op2(f, "fdiv", "double", v, cg_const(DPC_F64, repeats));
    cg_store(f, y, t, oy, from_f64(f, v, t));
  } else {
    store_raw(f, y, stt, oy, load_raw(f, x, stt, ox));
  }
  for (uint32_t lv = m; lv-- > 0;) cg_loop_end(f, loops[lv]);
  return DPC_OK;
}

const cg_lower_fn cg_reduce_table[DPC_OP_COUNT] = {
    [DPC_OP_SOFTMAX] = lower_softmax,
    [DPC_OP_LOG_SOFTMAX] = lower_softmax,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY] = lower_sce,
    [DPC_OP_MSE] = lower_mse,
    [DPC_OP_REDUCE_SUM] = lower_reduce,
    [DPC_OP_REDUCE_MEAN] = lower_reduce,
    [DPC_OP_REDUCE_MAX] = lower_reduce,
    [DPC_OP_SUM_TO] = lower_sum_to,
    [DPC_OP_EXPAND] = lower_expand,
    [DPC_OP_SOFTMAX_GRAD] = lower_softmax_grad,
    [DPC_OP_LOG_SOFTMAX_GRAD] = lower_softmax_grad,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY_GRAD] = lower_sce_grad,
};
