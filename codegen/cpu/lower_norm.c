/*
 * lower_norm.c — LLVM IR for batch_norm, layer_norm and their gradients.
 *
 * Each kernel is the reference kernel (runtime/ref/ref_nn.c, ref_nn_grad.c) written out in IR:
 * the same two-pass statistics accumulated in double, the same expressions in the same order,
 * and no fast-math flags, so the results match the reference to the last bit for f64 (and f32,
 * f16, bf16 round once, from the same double). Shapes, epsilon and momentum are constants.
 *
 * Parallel loops: batch_norm and its gradient run over channels (each iteration reads its
 * channel's elements and writes its channel's outputs), layer_norm over rows. layer_norm_grad
 * has two kinds of iteration in one loop: the first `outer` compute dx of one row each; the
 * rest each sum dscale and dbias over all rows for one chunk of columns, recomputing each row's
 * statistics as the reference does (two bounded arrays of doubles on the stack, no heap), so no
 * two iterations write the same place.
 *
 * Training mode: from the node's own `training` attribute when given (then only that path is
 * generated), else the run's %training argument.
 */
#include "codegen/cpu/cg.h"

#include <math.h>
#include <string.h>

#define LN_CHUNK 256 /* columns of dscale/dbias per iteration: 4 KiB of doubles for each */

/* ---- small emitters ------------------------------------------------------------------------ */

static cg_val ic(int64_t v) {
  return cg_const_i64(v);
}

static cg_val dc(double v) {
  return cg_const(DPC_F64, v);
}

static cg_val ibin(cg_fn *f, const char *ins, cg_val a, cg_val b) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = %s i64 %s, %s", r.s, ins, a.s, b.s);
  return r;
}

/* a double operation */
static cg_val dop(cg_fn *f, const char *ins, cg_val a, cg_val b) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = %s double %s, %s", r.s, ins, a.s, b.s);
  return r;
}

static cg_val dsqrt(cg_fn *f, cg_val a) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = call double @llvm.sqrt.f64(double %s)", r.s, a.s);
  return r;
}

static cg_val dsel(cg_fn *f, cg_val c, cg_val a, cg_val b) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = select i1 %s, double %s, double %s", r.s, c.s, a.s, b.s);
  return r;
}

/* element idx of a tensor, as a double (what dpc_tload gives) */
static cg_val load_d(cg_fn *f, cg_val ptr, dpc_dtype t, cg_val idx) {
  cg_val v = cg_load(f, ptr, t, idx);
  if (!strcmp(cg_calc_type(t), "double")) return v;
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = fpext float %s to double", r.s, v.s);
  return r;
}

/* store a double, rounded as dpc_tstore rounds (through float for f16 and bf16) */
static void store_d(cg_fn *f, cg_val ptr, dpc_dtype t, cg_val idx, cg_val v) {
  cg_val out = v;
  if (strcmp(cg_calc_type(t), "double")) {
    out = cg_tmp(f);
    cg_line(f, "%s = fptrunc double %s to float", out.s, v.s);
  }
  cg_store(f, ptr, t, idx, out);
}

/* if (cond) { then } [else { ... }]: values made inside a branch do not reach past it (use
 * accumulators). */
static uint32_t if_begin(cg_fn *f, cg_val cond) {
  uint32_t id = cg_label(f);
  cg_line(f, "br i1 %s, label %%I%u.then, label %%I%u.else", cond.s, id, id);
  dpc_buf_printf(&f->body, "I%u.then:\n", id);
  return id;
}

static void if_else(cg_fn *f, uint32_t id) {
  cg_line(f, "br label %%I%u.end", id);
  dpc_buf_printf(&f->body, "I%u.else:\n", id);
}

static void if_end(cg_fn *f, uint32_t id) {
  cg_line(f, "br label %%I%u.end", id);
  dpc_buf_printf(&f->body, "I%u.end:\n", id);
}

static dpc_dtype in_type(const cg_fn *f, uint32_t i) {
  const dpc_graph *g = f->g;
  return g->values[g->ids[g->nodes[f->node].in + i]].dtype;
}

static dpc_dtype out_type(const cg_fn *f, uint32_t i) {
  const dpc_graph *g = f->g;
  return g->values[g->nodes[f->node].out + i].dtype;
}

static const dpc_shape *in_shape(const cg_fn *f, uint32_t i) {
  const dpc_graph *g = f->g;
  return &g->values[g->ids[g->nodes[f->node].in + i]].shape;
}

static int64_t prod(const dpc_shape *s, uint32_t lo, uint32_t hi) {
  int64_t n = 1;
  for (uint32_t i = lo; i < hi; i++) n *= s->d[i];
  return n;
}

/* The node's mode: 1 or 0 when its `training` attribute pins it, -1 when the run decides. */
static int fixed_mode(const cg_fn *f) {
  dpc_attrs at = dpc_node_attrs(f->g, f->node);
  if (!dpc_attrs_get(at, "training")) return -1;
  return dpc_attrs_int(at, "training") != 0;
}

/* An i1 that holds in training: a constant, or the run's %training. */
static cg_val training_flag(cg_fn *f, int mode) {
  cg_val r = cg_tmp(f);
  if (mode >= 0)
    cg_line(f, "%s = icmp ne i32 %d, 0", r.s, mode);
  else
    cg_line(f, "%s = icmp ne i32 %%training, 0", r.s);
  return r;
}

/* ---- batch_norm ---------------------------------------------------------------------------- */

/* [N, C, spatial...] seen per channel: element s of sample b of channel ch is at
 * (b*c + ch)*sp + s. */
typedef struct chan {
  int64_t n, c, sp, count;
} chan;

static chan chan_of(const dpc_shape *x) {
  chan k = {x->d[0], x->d[1], prod(x, 2, x->rank), 0};
  k.count = k.n * k.sp;
  return k;
}

/* Open the two loops over the elements of channel ch; gives the element's index. */
static void chan_begin(cg_fn *f, const chan *k, cg_val ch, cg_loop l[2], cg_val *idx) {
  l[0] = cg_loop_begin(f, ic(0), ic(k->n));
  cg_val base = ibin(f, "mul", ibin(f, "add", ibin(f, "mul", l[0].i, ic(k->c)), ch), ic(k->sp));
  l[1] = cg_loop_begin(f, ic(0), ic(k->sp));
  *idx = ibin(f, "add", base, l[1].i);
}

static void chan_end(cg_fn *f, cg_loop l[2]) {
  cg_loop_end(f, l[1]);
  cg_loop_end(f, l[0]);
}

/* The batch mean and biased variance of channel ch, two passes (mean, then squared
 * deviations: a variance that cannot go negative), stored into the accumulators m and v.
 * count is never 0 here. */
static void chan_stats(cg_fn *f, const chan *k, cg_val xp, dpc_dtype t, cg_val ch, cg_val m,
                       cg_val v) {
  cg_loop l[2];
  cg_val idx;
  cg_val sum = cg_acc_new(f, "double", dc(0));
  chan_begin(f, k, ch, l, &idx);
  cg_acc_set(f, sum, "double", dop(f, "fadd", cg_acc_get(f, sum, "double"), load_d(f, xp, t, idx)));
  chan_end(f, l);
  cg_val mean = dop(f, "fdiv", cg_acc_get(f, sum, "double"), dc((double)k->count));
  cg_val sq = cg_acc_new(f, "double", dc(0));
  chan_begin(f, k, ch, l, &idx);
  cg_val e = dop(f, "fsub", load_d(f, xp, t, idx), mean);
  cg_acc_set(f, sq, "double", dop(f, "fadd", cg_acc_get(f, sq, "double"), dop(f, "fmul", e, e)));
  chan_end(f, l);
  cg_acc_set(f, m, "double", mean);
  cg_acc_set(f, v, "double", dop(f, "fdiv", cg_acc_get(f, sq, "double"), dc((double)k->count)));
}

/* y = scale * (x - m) / sqrt(v + eps) + bias with the batch's statistics when training, the
 * running ones otherwise; running_mean/var become momentum*running + (1-momentum)*batch when
 * training, copies of the inputs otherwise. */
static dpc_status lower_batch_norm(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  dpc_attrs at = dpc_node_attrs(f->g, f->node);
  double eps = dpc_attrs_float(at, "epsilon"), mom = dpc_attrs_float(at, "momentum");
  int mode = fixed_mode(f);
  chan c = chan_of(in_shape(f, 0));
  dpc_dtype tx = in_type(f, 0), tsc = in_type(f, 1), tbi = in_type(f, 2), tm = in_type(f, 3),
            tv = in_type(f, 4), ty = out_type(f, 0), tmo = out_type(f, 1), tvo = out_type(f, 2);
  cg_val xp = cg_arg_ptr(f, 0, tx), scp = cg_arg_ptr(f, 1, tsc), bip = cg_arg_ptr(f, 2, tbi);
  cg_val mp = cg_arg_ptr(f, 3, tm), vp = cg_arg_ptr(f, 4, tv), yp = cg_arg_ptr(f, 5, ty);
  cg_val mop = cg_arg_ptr(f, 6, tmo), vop = cg_arg_ptr(f, 7, tvo);
  cg_val train = training_flag(f, mode);
  k->total = c.c;
  cg_loop lc = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val ch = lc.i;
  /* Read the running statistics before writing any output: the executor may hand the same
   * buffer as mean_in and mean_out to update them in place. */
  cg_val rm = load_d(f, mp, tm, ch), rv = load_d(f, vp, tv, ch);
  cg_val m = cg_acc_new(f, "double", rm), v = cg_acc_new(f, "double", rv);
  if (mode != 0) {
    uint32_t br = mode < 0 ? if_begin(f, train) : 0;
    if (c.count) {
      chan_stats(f, &c, xp, tx, ch, m, v);
    } else {
      /* no element: the mean and variance of nothing are NaN (0/0), as the reference */
      cg_acc_set(f, m, "double", dc(NAN));
      cg_acc_set(f, v, "double", dc(NAN));
    }
    if (mode < 0) {
      if_else(f, br);
      if_end(f, br);
    }
  }
  cg_val mv = cg_acc_get(f, m, "double"), vv = cg_acc_get(f, v, "double");
  cg_val sc = load_d(f, scp, tsc, ch), bi = load_d(f, bip, tbi, ch);
  cg_val den = dsqrt(f, dop(f, "fadd", vv, dc(eps)));
  cg_loop l[2];
  cg_val idx;
  chan_begin(f, &c, ch, l, &idx);
  cg_val y = dop(f, "fmul", sc, dop(f, "fsub", load_d(f, xp, tx, idx), mv));
  store_d(f, yp, ty, idx, dop(f, "fadd", dop(f, "fdiv", y, den), bi));
  chan_end(f, l);
  cg_val nm = dop(f, "fadd", dop(f, "fmul", dc(mom), rm), dop(f, "fmul", dc(1 - mom), mv));
  cg_val nv = dop(f, "fadd", dop(f, "fmul", dc(mom), rv), dop(f, "fmul", dc(1 - mom), vv));
  store_d(f, mop, tmo, ch, dsel(f, train, nm, rm));
  store_d(f, vop, tvo, ch, dsel(f, train, nv, rv));
  cg_loop_end(f, lc);
  return DPC_OK;
}

/* Per channel, over M = N * spatial elements, with xhat = (x - mu) * rstd:
 *   dbias = sum dy, dscale = sum dy * xhat, and
 *   training:  dx = scale * rstd * (dy - dbias/M - xhat * dscale/M);
 *   inference: dx = scale * rstd * dy (mu, var: the running statistics given). */
static dpc_status lower_batch_norm_grad(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  double eps = dpc_attrs_float(dpc_node_attrs(f->g, f->node), "epsilon");
  int mode = fixed_mode(f);
  chan c = chan_of(in_shape(f, 1));
  dpc_dtype tdy = in_type(f, 0), tx = in_type(f, 1), tsc = in_type(f, 2), tm = in_type(f, 3),
            tv = in_type(f, 4), tdx = out_type(f, 0), tds = out_type(f, 1), tdb = out_type(f, 2);
  cg_val dyp = cg_arg_ptr(f, 0, tdy), xp = cg_arg_ptr(f, 1, tx), scp = cg_arg_ptr(f, 2, tsc);
  cg_val mp = cg_arg_ptr(f, 3, tm), vp = cg_arg_ptr(f, 4, tv), dxp = cg_arg_ptr(f, 5, tdx);
  cg_val dsp = cg_arg_ptr(f, 6, tds), dbp = cg_arg_ptr(f, 7, tdb);
  cg_val train = training_flag(f, mode);
  k->total = c.c;
  cg_loop lc = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val ch = lc.i;
  cg_val m = cg_acc_new(f, "double", load_d(f, mp, tm, ch));
  cg_val v = cg_acc_new(f, "double", load_d(f, vp, tv, ch));
  /* training recomputes the statistics as the forward did (the running ones otherwise; with
   * no element there is nothing to recompute them from) */
  if (mode != 0 && c.count) {
    uint32_t br = mode < 0 ? if_begin(f, train) : 0;
    chan_stats(f, &c, xp, tx, ch, m, v);
    if (mode < 0) {
      if_else(f, br);
      if_end(f, br);
    }
  }
  cg_val mv = cg_acc_get(f, m, "double"), vv = cg_acc_get(f, v, "double");
  cg_val rstd = dop(f, "fdiv", dc(1), dsqrt(f, dop(f, "fadd", vv, dc(eps))));
  cg_val sb = cg_acc_new(f, "double", dc(0)), ss = cg_acc_new(f, "double", dc(0));
  cg_loop l[2];
  cg_val idx;
  chan_begin(f, &c, ch, l, &idx);
  cg_val g = load_d(f, dyp, tdy, idx);
  cg_acc_set(f, sb, "double", dop(f, "fadd", cg_acc_get(f, sb, "double"), g));
  cg_val gx = dop(f, "fmul", dop(f, "fmul", g, dop(f, "fsub", load_d(f, xp, tx, idx), mv)), rstd);
  cg_acc_set(f, ss, "double", dop(f, "fadd", cg_acc_get(f, ss, "double"), gx));
  chan_end(f, l);
  cg_val sbv = cg_acc_get(f, sb, "double"), ssv = cg_acc_get(f, ss, "double");
  cg_val kk = dop(f, "fmul", load_d(f, scp, tsc, ch), rstd);
  cg_val cnt = dc((double)c.count), sbm = dop(f, "fdiv", sbv, cnt);
  chan_begin(f, &c, ch, l, &idx);
  g = load_d(f, dyp, tdy, idx);
  cg_val r = dop(f, "fmul", kk, g);
  if (mode != 0) {
    cg_val xhat = dop(f, "fmul", dop(f, "fsub", load_d(f, xp, tx, idx), mv), rstd);
    cg_val corr = dop(f, "fdiv", dop(f, "fmul", xhat, ssv), cnt);
    cg_val rt = dop(f, "fmul", kk, dop(f, "fsub", dop(f, "fsub", g, sbm), corr));
    r = mode > 0 ? rt : dsel(f, train, rt, r);
  }
  store_d(f, dxp, tdx, idx, r);
  chan_end(f, l);
  store_d(f, dsp, tds, ch, ssv);
  store_d(f, dbp, tdb, ch, sbv);
  cg_loop_end(f, lc);
  return DPC_OK;
}

/* ---- layer_norm ---------------------------------------------------------------------------- */

/* Rows of `inner` elements: the dimensions from `axis` on. */
static void rows_of(const cg_fn *f, uint32_t x_in, int64_t *outer, int64_t *inner) {
  const dpc_shape *x = in_shape(f, x_in);
  uint32_t ax = 0;
  bool ok = dpc_axis_norm(dpc_attrs_int(dpc_node_attrs(f->g, f->node), "axis"), x->rank, &ax);
  DPC_ASSERT(ok); /* the shape rule accepted it */
  *outer = prod(x, 0, ax);
  *inner = prod(x, ax, x->rank);
}

/* Mean and sum of squared deviations of the row at base, two passes as the reference. */
static void row_sums(cg_fn *f, cg_val xp, dpc_dtype t, cg_val base, int64_t inner, cg_val *mean,
                     cg_val *sq) {
  cg_val sum = cg_acc_new(f, "double", dc(0));
  cg_loop l = cg_loop_begin(f, ic(0), ic(inner));
  cg_val v = load_d(f, xp, t, ibin(f, "add", base, l.i));
  cg_acc_set(f, sum, "double", dop(f, "fadd", cg_acc_get(f, sum, "double"), v));
  cg_loop_end(f, l);
  cg_val m = dop(f, "fdiv", cg_acc_get(f, sum, "double"), dc((double)inner));
  cg_val acc = cg_acc_new(f, "double", dc(0));
  l = cg_loop_begin(f, ic(0), ic(inner));
  cg_val e = dop(f, "fsub", load_d(f, xp, t, ibin(f, "add", base, l.i)), m);
  cg_acc_set(f, acc, "double", dop(f, "fadd", cg_acc_get(f, acc, "double"), dop(f, "fmul", e, e)));
  cg_loop_end(f, l);
  *mean = m;
  *sq = cg_acc_get(f, acc, "double");
}

/* y = (x - mean) / sqrt(var + eps) * scale (+ bias) per row. */
static dpc_status lower_layer_norm(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  double eps = dpc_attrs_float(dpc_node_attrs(f->g, f->node), "epsilon");
  bool has_bias = f->g->nodes[f->node].n_in > 2;
  int64_t outer, inner;
  rows_of(f, 0, &outer, &inner);
  k->total = inner ? outer : 0; /* nothing to normalise, and no mean to divide out */
  if (!inner) return DPC_OK;
  dpc_dtype tx = in_type(f, 0), tsc = in_type(f, 1), tbi = has_bias ? in_type(f, 2) : tx,
            ty = out_type(f, 0);
  cg_val xp = cg_arg_ptr(f, 0, tx), scp = cg_arg_ptr(f, 1, tsc);
  cg_val bip = has_bias ? cg_arg_ptr(f, 2, tbi) : cg_const_i64(0);
  cg_val yp = cg_arg_ptr(f, has_bias ? 3 : 2, ty);
  cg_loop lo = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val base = ibin(f, "mul", lo.i, ic(inner)), m, sq;
  row_sums(f, xp, tx, base, inner, &m, &sq);
  cg_val den = dsqrt(f, dop(f, "fadd", dop(f, "fdiv", sq, dc((double)inner)), dc(eps)));
  cg_loop l = cg_loop_begin(f, ic(0), ic(inner));
  cg_val i = ibin(f, "add", base, l.i);
  cg_val r = dop(f, "fdiv", dop(f, "fsub", load_d(f, xp, tx, i), m), den);
  r = dop(f, "fmul", r, load_d(f, scp, tsc, l.i));
  if (has_bias) r = dop(f, "fadd", r, load_d(f, bip, tbi, l.i));
  store_d(f, yp, ty, i, r);
  cg_loop_end(f, l);
  cg_loop_end(f, lo);
  return DPC_OK;
}

/* Element j of the column-sum array %<name><id> (an alloca of LN_CHUNK doubles). */
static cg_val chunk_at(cg_fn *f, const char *name, uint32_t id, cg_val j) {
  cg_val p = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds [%d x double], [%d x double]* %%%s%u, i64 0, i64 %s", p.s,
          LN_CHUNK, LN_CHUNK, name, id, j.s);
  return p;
}

static cg_val chunk_get(cg_fn *f, cg_val p) {
  cg_val v = cg_tmp(f);
  cg_line(f, "%s = load double, double* %s", v.s, p.s);
  return v;
}

/* Per row of the normalised dims (M elements), g = dy * scale:
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat));
 * and over the rows, dscale = sum dy * xhat, dbias = sum dy, a chunk of columns per
 * iteration. */
static dpc_status lower_layer_norm_grad(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  double eps = dpc_attrs_float(dpc_node_attrs(f->g, f->node), "epsilon");
  int64_t outer, inner;
  rows_of(f, 1, &outer, &inner);
  int64_t chunks = (inner + LN_CHUNK - 1) / LN_CHUNK;
  k->total = inner ? outer + chunks : 0; /* nothing was normalised: every output is empty */
  if (!inner) return DPC_OK;
  dpc_dtype tdy = in_type(f, 0), tx = in_type(f, 1), tsc = in_type(f, 2), tdx = out_type(f, 0),
            tds = out_type(f, 1), tdb = out_type(f, 2);
  cg_val dyp = cg_arg_ptr(f, 0, tdy), xp = cg_arg_ptr(f, 1, tx), scp = cg_arg_ptr(f, 2, tsc);
  cg_val dxp = cg_arg_ptr(f, 3, tdx), dsp = cg_arg_ptr(f, 4, tds), dbp = cg_arg_ptr(f, 5, tdb);
  cg_val n = dc((double)inner);
  cg_loop li = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val is_row = cg_tmp(f);
  cg_line(f, "%s = icmp slt i64 %s, %lld", is_row.s, li.i.s, (long long)outer);
  uint32_t br = if_begin(f, is_row);
  {
    /* dx of row li */
    cg_val base = ibin(f, "mul", li.i, ic(inner)), m, sq;
    row_sums(f, xp, tx, base, inner, &m, &sq);
    cg_val rstd = dop(f, "fdiv", dc(1), dsqrt(f, dop(f, "fadd", dop(f, "fdiv", sq, n), dc(eps))));
    cg_val mg = cg_acc_new(f, "double", dc(0)), mgx = cg_acc_new(f, "double", dc(0));
    cg_loop l = cg_loop_begin(f, ic(0), ic(inner));
    cg_val i = ibin(f, "add", base, l.i);
    cg_val g = dop(f, "fmul", load_d(f, dyp, tdy, i), load_d(f, scp, tsc, l.i));
    cg_acc_set(f, mg, "double", dop(f, "fadd", cg_acc_get(f, mg, "double"), g));
    cg_val gx = dop(f, "fmul", dop(f, "fmul", g, dop(f, "fsub", load_d(f, xp, tx, i), m)), rstd);
    cg_acc_set(f, mgx, "double", dop(f, "fadd", cg_acc_get(f, mgx, "double"), gx));
    cg_loop_end(f, l);
    cg_val mgv = dop(f, "fdiv", cg_acc_get(f, mg, "double"), n);
    cg_val mgxv = dop(f, "fdiv", cg_acc_get(f, mgx, "double"), n);
    l = cg_loop_begin(f, ic(0), ic(inner));
    i = ibin(f, "add", base, l.i);
    g = dop(f, "fmul", load_d(f, dyp, tdy, i), load_d(f, scp, tsc, l.i));
    cg_val xhat = dop(f, "fmul", dop(f, "fsub", load_d(f, xp, tx, i), m), rstd);
    cg_val r = dop(f, "fsub", dop(f, "fsub", g, mgv), dop(f, "fmul", xhat, mgxv));
    store_d(f, dxp, tdx, i, dop(f, "fmul", rstd, r));
    cg_loop_end(f, l);
  }
  if_else(f, br);
  {
    /* dscale and dbias of columns [j0, j0 + jn), summed over every row */
    uint32_t id = cg_label(f);
    dpc_buf_printf(&f->head, "  %%ss%u = alloca [%d x double]\n", id, LN_CHUNK);
    dpc_buf_printf(&f->head, "  %%sb%u = alloca [%d x double]\n", id, LN_CHUNK);
    cg_val j0 = ibin(f, "mul", ibin(f, "sub", li.i, ic(outer)), ic(LN_CHUNK));
    cg_val left = ibin(f, "sub", ic(inner), j0), small = cg_tmp(f), jn = cg_tmp(f);
    cg_line(f, "%s = icmp slt i64 %s, %d", small.s, left.s, LN_CHUNK);
    cg_line(f, "%s = select i1 %s, i64 %s, i64 %d", jn.s, small.s, left.s, LN_CHUNK);
    cg_loop l = cg_loop_begin(f, ic(0), jn);
    cg_line(f, "store double %s, double* %s", dc(0).s, chunk_at(f, "ss", id, l.i).s);
    cg_line(f, "store double %s, double* %s", dc(0).s, chunk_at(f, "sb", id, l.i).s);
    cg_loop_end(f, l);
    cg_loop lo = cg_loop_begin(f, ic(0), ic(outer));
    cg_val base = ibin(f, "mul", lo.i, ic(inner)), m, sq;
    row_sums(f, xp, tx, base, inner, &m, &sq);
    cg_val rstd = dop(f, "fdiv", dc(1), dsqrt(f, dop(f, "fadd", dop(f, "fdiv", sq, n), dc(eps))));
    l = cg_loop_begin(f, ic(0), jn);
    cg_val i = ibin(f, "add", base, ibin(f, "add", j0, l.i));
    cg_val g = load_d(f, dyp, tdy, i);
    cg_val gx = dop(f, "fmul", dop(f, "fmul", g, dop(f, "fsub", load_d(f, xp, tx, i), m)), rstd);
    cg_val ps = chunk_at(f, "ss", id, l.i), pb = chunk_at(f, "sb", id, l.i);
    cg_line(f, "store double %s, double* %s", dop(f, "fadd", chunk_get(f, pb), g).s, pb.s);
    cg_line(f, "store double %s, double* %s", dop(f, "fadd", chunk_get(f, ps), gx).s, ps.s);
    cg_loop_end(f, l);
    cg_loop_end(f, lo);
    l = cg_loop_begin(f, ic(0), jn);
    cg_val j = ibin(f, "add", j0, l.i);
    store_d(f, dsp, tds, j, chunk_get(f, chunk_at(f, "ss", id, l.i)));
    store_d(f, dbp, tdb, j, chunk_get(f, chunk_at(f, "sb", id, l.i)));
    cg_loop_end(f, l);
  }
  if_end(f, br);
  cg_loop_end(f, li);
  return DPC_OK;
}

const cg_lower_fn cg_norm_table[DPC_OP_COUNT] = {
    [DPC_OP_BATCH_NORM] = lower_batch_norm,
    [DPC_OP_LAYER_NORM] = lower_layer_norm,
    [DPC_OP_BATCH_NORM_GRAD] = lower_batch_norm_grad,
    [DPC_OP_LAYER_NORM_GRAD] = lower_layer_norm_grad,
};
