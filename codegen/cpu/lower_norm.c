/*
 * lower_norm.c — LLVM IR for batch_norm, layer_norm and their gradients.
 *
 * Each kernel is the reference kernel (runtime/ref/ref_nn.c, ref_nn_grad.c) written out in IR:
 * the same two-pass statistics accumulated in double, the same expressions in the same order,
 * and no fast-math flags. The one difference: each sum is kept in LANES interleaved partial
 * sums (see "sums in lanes"), so LLVM can vectorise it. That changes only double rounding:
 * f64 results may differ from the reference's in their last bits, f32, f16 and bf16 results
 * almost never do. Shapes, epsilon and momentum are constants.
 *
 * Parallel loops: batch_norm and its gradient run over channels (each iteration reads its
 * channel's elements and writes its channel's outputs), layer_norm over rows. layer_norm_grad
 * has two kinds of iteration in one loop: most compute dx of one row each; one per chunk of
 * LN_CHUNK columns sums dscale and dbias over all rows for those columns, recomputing each
 * row's statistics as the reference does (two bounded arrays of doubles on the stack, no
 * heap), so no two iterations write the same place.
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

/* ---- sums in lanes ------------------------------------------------------------------------- */

/* A sum over a row is LANES partial sums in double, element i going to lane i % LANES, added
 * pairwise at the end: independent chains LLVM vectorises, where one running sum is a chain
 * of dependent adds it may not reorder. The result differs from the reference's running sum
 * only by double rounding (relative 1e-16, far below what f32 keeps), and does not depend on
 * how the parallel loop is split. */
#define LANES 8

/* What is summed at element i of a row starting at index `base`: one or two terms. */
typedef enum term_kind {
  T_X,      /* x */
  T_DEV2,   /* (x - m)^2 */
  T_DY_DYX, /* dy, and dy * (x - m) * rstd */
  T_G_GX,   /* g = dy * scale[i], and g * (x - m) * rstd */
} term_kind;

typedef struct terms {
  term_kind kind;
  cg_val base, xp, dyp, scp, m, rstd;
  dpc_dtype tx, tdy, tsc;
} terms;

typedef struct lanes {
  int n; /* sums: 1 or 2 */
  cg_val acc[2][LANES];
} lanes;

static int n_terms(term_kind k) {
  return k == T_X || k == T_DEV2 ? 1 : 2;
}

static void lanes_new(cg_fn *f, lanes *l, int n) {
  l->n = n;
  for (int s = 0; s < n; s++)
    for (int j = 0; j < LANES; j++) l->acc[s][j] = cg_acc_new(f, "double", dc(0));
}

static void term_at(cg_fn *f, const terms *t, cg_val i, cg_val out[2]) {
  cg_val idx = ibin(f, "add", t->base, i);
  switch (t->kind) {
  case T_X: out[0] = load_d(f, t->xp, t->tx, idx); break;
  case T_DEV2: {
    cg_val e = dop(f, "fsub", load_d(f, t->xp, t->tx, idx), t->m);
    out[0] = dop(f, "fmul", e, e);
    break;
  }
  case T_DY_DYX:
  case T_G_GX: {
    cg_val g = load_d(f, t->dyp, t->tdy, idx);
    if (t->kind == T_G_GX) g = dop(f, "fmul", g, load_d(f, t->scp, t->tsc, i));
    out[0] = g;
    out[1] = dop(f, "fmul", dop(f, "fmul", g, dop(f, "fsub", load_d(f, t->xp, t->tx, idx), t->m)),
                 t->rstd);
    break;
  }
  }
}

static void lane_add(cg_fn *f, lanes *l, int j, const cg_val v[2]) {
  for (int s = 0; s < l->n; s++)
    cg_acc_set(f, l->acc[s][j], "double",
               dop(f, "fadd", cg_acc_get(f, l->acc[s][j], "double"), v[s]));
}

/* Add the terms of elements [0, len) of the row at t->base: whole groups of LANES in a loop,
 * the last len % LANES elements unrolled. */
static void lanes_add(cg_fn *f, lanes *l, const terms *t, int64_t len) {
  cg_val v[2];
  if (len / LANES) {
    cg_loop q = cg_loop_begin(f, ic(0), ic(len / LANES));
    cg_val i0 = ibin(f, "mul", q.i, ic(LANES));
    for (int j = 0; j < LANES; j++) {
      term_at(f, t, ibin(f, "add", i0, ic(j)), v);
      lane_add(f, l, j, v);
    }
    cg_loop_end(f, q);
  }
  for (int64_t j = 0; j < len % LANES; j++) {
    term_at(f, t, ic(len / LANES * LANES + j), v);
    lane_add(f, l, (int)j, v);
  }
}

/* Sum s of the lanes, added pairwise. */
static cg_val lanes_total(cg_fn *f, const lanes *l, int s) {
  cg_val v[LANES];
  for (int j = 0; j < LANES; j++) v[j] = cg_acc_get(f, l->acc[s][j], "double");
  for (int w = LANES; w > 1; w /= 2)
    for (int j = 0; j < w / 2; j++) v[j] = dop(f, "fadd", v[2 * j], v[2 * j + 1]);
  return v[0];
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

/* The sums of terms t (its base aside) over channel ch: one row of sp elements per sample. */
static void chan_sum(cg_fn *f, const chan *k, cg_val ch, const terms *t, cg_val out[2]) {
  lanes l;
  lanes_new(f, &l, n_terms(t->kind));
  cg_loop lb = cg_loop_begin(f, ic(0), ic(k->n));
  terms row = *t;
  row.base = ibin(f, "mul", ibin(f, "add", ibin(f, "mul", lb.i, ic(k->c)), ch), ic(k->sp));
  lanes_add(f, &l, &row, k->sp);
  cg_loop_end(f, lb);
  for (int s = 0; s < l.n; s++) out[s] = lanes_total(f, &l, s);
}

/* The batch mean and biased variance of channel ch, two passes (mean, then squared
 * deviations: a variance that cannot go negative), stored into the accumulators m and v.
 * count is never 0 here. */
static void chan_stats(cg_fn *f, const chan *k, cg_val xp, dpc_dtype t, cg_val ch, cg_val m,
                       cg_val v) {
  terms tm = {.kind = T_X, .xp = xp, .tx = t};
  cg_val sum[2], sq[2];
  chan_sum(f, k, ch, &tm, sum);
  cg_val mean = dop(f, "fdiv", sum[0], dc((double)k->count));
  tm.kind = T_DEV2, tm.m = mean;
  chan_sum(f, k, ch, &tm, sq);
  cg_acc_set(f, m, "double", mean);
  cg_acc_set(f, v, "double", dop(f, "fdiv", sq[0], dc((double)k->count)));
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
  terms tg = {.kind = T_DY_DYX, .xp = xp, .dyp = dyp, .m = mv, .rstd = rstd, .tx = tx, .tdy = tdy};
  cg_val sums[2];
  chan_sum(f, &c, ch, &tg, sums);
  cg_val sbv = sums[0], ssv = sums[1];
  cg_loop l[2];
  cg_val idx, g;
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
  terms tr = {.kind = T_X, .base = base, .xp = xp, .tx = t};
  lanes l;
  lanes_new(f, &l, 1);
  lanes_add(f, &l, &tr, inner);
  *mean = dop(f, "fdiv", lanes_total(f, &l, 0), dc((double)inner));
  tr.kind = T_DEV2, tr.m = *mean;
  lanes_new(f, &l, 1);
  lanes_add(f, &l, &tr, inner);
  *sq = lanes_total(f, &l, 0);
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
  /* The chunk iterations cost about as much as all the rows together (each recomputes every
   * row's statistics), so they are spread evenly over the loop, chunk q at iteration
   * q * spacing, rather than bunched at one end where one thread would get them all. The rows
   * take the other iterations in order. */
  int64_t spacing = (outer + chunks) / chunks;
  cg_val q = ibin(f, "sdiv", li.i, ic(spacing));
  cg_val on = cg_tmp(f), first = cg_tmp(f), inr = cg_tmp(f), is_chunk = cg_tmp(f);
  cg_line(f, "%s = srem i64 %s, %lld", on.s, li.i.s, (long long)spacing);
  cg_line(f, "%s = icmp eq i64 %s, 0", first.s, on.s);
  cg_line(f, "%s = icmp slt i64 %s, %lld", inr.s, q.s, (long long)chunks);
  cg_line(f, "%s = and i1 %s, %s", is_chunk.s, first.s, inr.s);
  cg_val before = ibin(f, "add", q, ic(1)), clamp = cg_tmp(f), row = cg_tmp(f);
  cg_line(f, "%s = icmp slt i64 %s, %lld", clamp.s, before.s, (long long)chunks);
  cg_line(f, "%s = select i1 %s, i64 %s, i64 %lld", row.s, clamp.s, before.s, (long long)chunks);
  row = ibin(f, "sub", li.i, row);
  uint32_t br = if_begin(f, is_chunk);
  {
    /* dscale and dbias of columns [j0, j0 + jn), summed over every row */
    uint32_t id = cg_label(f);
    dpc_buf_printf(&f->head, "  %%ss%u = alloca [%d x double]\n", id, LN_CHUNK);
    dpc_buf_printf(&f->head, "  %%sb%u = alloca [%d x double]\n", id, LN_CHUNK);
    cg_val j0 = ibin(f, "mul", q, ic(LN_CHUNK));
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
  if_else(f, br);
  {
    /* dx of one row */
    cg_val base = ibin(f, "mul", row, ic(inner)), m, sq;
    row_sums(f, xp, tx, base, inner, &m, &sq);
    cg_val rstd = dop(f, "fdiv", dc(1), dsqrt(f, dop(f, "fadd", dop(f, "fdiv", sq, n), dc(eps))));
    terms tg = {T_G_GX, base, xp, dyp, scp, m, rstd, tx, tdy, tsc};
    lanes ls;
    lanes_new(f, &ls, 2);
    lanes_add(f, &ls, &tg, inner);
    cg_val mgv = dop(f, "fdiv", lanes_total(f, &ls, 0), n);
    cg_val mgxv = dop(f, "fdiv", lanes_total(f, &ls, 1), n);
    cg_loop l = cg_loop_begin(f, ic(0), ic(inner));
    cg_val i = ibin(f, "add", base, l.i);
    cg_val g = dop(f, "fmul", load_d(f, dyp, tdy, i), load_d(f, scp, tsc, l.i));
    cg_val xhat = dop(f, "fmul", dop(f, "fsub", load_d(f, xp, tx, i), m), rstd);
    cg_val r = dop(f, "fsub", dop(f, "fsub", g, mgv), dop(f, "fmul", xhat, mgxv));
    store_d(f, dxp, tdx, i, dop(f, "fmul", rstd, r));
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
