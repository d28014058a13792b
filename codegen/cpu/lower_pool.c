/*
 * lower_pool.c — LLVM IR for max_pool2d, avg_pool2d and their gradients.
 *
 * The parallel loop runs over the (n, c) planes: every kernel reads and writes one plane of its
 * input and output per iteration, so iterations never write the same place. The window
 * geometry comes from dpc_window_of at generation time (the function the shape rule and the
 * reference kernels use), so every size, stride, padding and dilation is a constant in the IR.
 *
 * Forward: for each output position the kernel visits only the taps that fall inside the input.
 * Along each axis the output positions split into a left border (the window starts in the
 * padding), an interior (the whole window is inside: constant tap bounds LLVM can unroll) and a
 * right border (the window reaches past the input); only the borders compute their tap range,
 * [lo, hi), from the position. Nothing is tested per tap and nothing outside the input is read.
 *
 * Gradients are gathers, as ref_nn_grad.c: dx at each input position sums, over the windows
 * covering it (found directly from the position: a small range of window rows and columns, and
 * a divisibility test only with dilation), dy of the window where the position is the window's
 * argmax (max: first maximum, or first NaN) or dy / divisor (avg). Sums run in double in the
 * reference's order, so results match it to the last bit. max_pool2d_grad, where a plane's
 * argmaxes and sums fit the stack, scatters instead: each window's argmax once, then dy added
 * there in the order the reference's gather would add it (lower_max_pool_grad_scatter). Larger
 * planes gather, scanning each window once for its argmax into a bounded stack buffer (the
 * windows of a band of dx rows) instead of rescanning it for every position it covers, as the
 * reference does.
 */
#include "codegen/cpu/cg.h"
#include "codegen/cpu/pool2.h"

#include "ir/rules.h"

#include <math.h>
#include <string.h>

/* ---- i64 arithmetic ------------------------------------------------------------------------ */

static cg_val ibin(cg_fn *f, const char *ins, cg_val a, cg_val b) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = %s i64 %s, %s", r.s, ins, a.s, b.s);
  return r;
}

static cg_val isel(cg_fn *f, const char *pred, cg_val a, cg_val b) {
  cg_val c = cg_tmp(f), r = cg_tmp(f);
  cg_line(f, "%s = icmp %s i64 %s, %s", c.s, pred, a.s, b.s);
  cg_line(f, "%s = select i1 %s, i64 %s, i64 %s", r.s, c.s, a.s, b.s);
  return r;
}

static cg_val imin(cg_fn *f, cg_val a, cg_val b) {
  return isel(f, "slt", a, b);
}

static cg_val imax(cg_fn *f, cg_val a, cg_val b) {
  return isel(f, "sgt", a, b);
}

/* a / k for a constant k >= 1, a known to be >= 0 (sdiv by a constant becomes a multiply) */
static cg_val idiv(cg_fn *f, cg_val a, int64_t k) {
  return k == 1 ? a : ibin(f, "sdiv", a, cg_const_i64(k));
}

static cg_val ic(int64_t v) {
  return cg_const_i64(v);
}

/* if (cond) { ... }: values made inside do not reach past if_end (use accumulators). */
static uint32_t if_begin(cg_fn *f, cg_val cond) {
  uint32_t id = cg_label(f);
  cg_line(f, "br i1 %s, label %%I%u.then, label %%I%u.end", cond.s, id, id);
  dpc_buf_printf(&f->body, "I%u.then:\n", id);
  return id;
}

static void if_end(cg_fn *f, uint32_t id) {
  cg_line(f, "br label %%I%u.end", id);
  dpc_buf_printf(&f->body, "I%u.end:\n", id);
}

/* ---- floating point ------------------------------------------------------------------------ */

static cg_val to_double(cg_fn *f, cg_val v, dpc_dtype t) {
  if (!strcmp(cg_calc_type(t), "double")) return v;
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = fpext float %s to double", r.s, v.s);
  return r;
}

static cg_val from_double(cg_fn *f, cg_val v, dpc_dtype t) {
  if (!strcmp(cg_calc_type(t), "double")) return v;
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = fptrunc double %s to float", r.s, v.s);
  return r;
}

/* ---- window geometry ------------------------------------------------------------------------ */

/* One axis of the window: kernel, stride, padding before and after, dilation, input size,
 * output size. */
typedef struct axis {
  int64_t k, s, pb, pa, d, n, out;
} axis;

/* The taps of the window at one output position along an axis: [lo, hi) fall inside the input,
 * `padded` of them (counting from 0) inside the padded input, and tap j reads start + j*d. */
typedef struct taps {
  cg_val start, lo, hi, padded;
} taps;

/* The output positions split [0, a) left border, [a, b) interior, [b, out) right border. An
 * interior window starts at or after 0 and ends before n. */
static void segments(const axis *x, int64_t seg[4]) {
  int64_t a = (x->pb + x->s - 1) / x->s;
  if (a > x->out) a = x->out;
  int64_t num = x->n - 1 - (x->k - 1) * x->d + x->pb, b = a;
  if (num >= 0) {
    b = num / x->s + 1;
    if (b > x->out) b = x->out;
    if (b < a) b = a;
  }
  seg[0] = 0, seg[1] = a, seg[2] = b, seg[3] = x->out;
}

/* The taps of output position o. In the interior they are all of them; at a border, tap j is
 * inside when 0 <= start + j*d < n. The rule guarantees start < n (a window starts inside the
 * input or its padding) and start >= -pb; the clamps only keep a range empty rather than
 * negative should that ever change. */
static taps taps_at(cg_fn *f, const axis *x, cg_val o, bool interior, bool want_padded) {
  taps t;
  t.start = ibin(f, "sub", ibin(f, "mul", o, ic(x->s)), ic(x->pb));
  if (interior) {
    t.lo = ic(0), t.hi = ic(x->k), t.padded = ic(x->k);
    return t;
  }
  /* first tap at or after 0: ceil(-start / d) */
  cg_val neg = imax(f, ibin(f, "sub", ic(0), t.start), ic(0));
  t.lo = idiv(f, ibin(f, "add", neg, ic(x->d - 1)), x->d);
  /* taps before n: j*d < n - start, so ceil((n - start) / d) of them from 0 */
  cg_val room = imax(f, ibin(f, "sub", ic(x->n), t.start), ic(0));
  t.hi = imax(f, imin(f, idiv(f, ibin(f, "add", room, ic(x->d - 1)), x->d), ic(x->k)), t.lo);
  t.padded = ic(0);
  if (want_padded) {
    /* taps before n + pa; start >= -pb, so none are before the padded input */
    cg_val proom = imax(f, ibin(f, "sub", ic(x->n + x->pa), t.start), ic(0));
    t.padded = imin(f, idiv(f, ibin(f, "add", proom, ic(x->d - 1)), x->d), ic(x->k));
  }
  return t;
}

typedef struct pool {
  dpc_window w;
  axis ay, ax;
  dpc_dtype t;
  bool is_max, include_pad;
} pool;

static dpc_status pool_init(cg_fn *f, pool *p, bool is_max, uint32_t x_in, dpc_diag *d) {
  const dpc_graph *g = f->g;
  dpc_status st = dpc_window_of(g, f->node, &p->w, d);
  if (st) return st;
  const dpc_window *w = &p->w;
  p->ay = (axis){w->kh, w->sh, w->pt, w->pb, w->dh, w->h, w->oh};
  p->ax = (axis){w->kw, w->sw, w->pl, w->pr, w->dw, w->w, w->ow};
  p->t = g->values[g->ids[g->nodes[f->node].in + x_in]].dtype;
  p->is_max = is_max;
  p->include_pad = !is_max && dpc_attrs_int(dpc_node_attrs(g, f->node), "count_include_pad") != 0;
  return DPC_OK;
}

/* The divisor of an avg window, as a double: the taps inside the input, or with
 * count_include_pad those inside the padded input (a ceil_mode window reaching past the
 * bottom/right padding does not count what lies beyond). The condition is separable, so the
 * count is a product of the two axes' counts. 0 (no tap inside) gives 0/0 = NaN, as the
 * reference. */
static cg_val divisor(cg_fn *f, const pool *p, const taps *ty, const taps *tx) {
  cg_val cy = p->include_pad ? ty->padded : ibin(f, "sub", ty->hi, ty->lo);
  cg_val cx = p->include_pad ? tx->padded : ibin(f, "sub", tx->hi, tx->lo);
  cg_val n = ibin(f, "mul", cy, cx), r = cg_tmp(f);
  cg_line(f, "%s = sitofp i64 %s to double", r.s, n.s);
  return r;
}

/* ---- one window ----------------------------------------------------------------------------- */

typedef enum wkind {
  W_MAX,    /* the maximum, in the calc type; NaN propagates */
  W_AVG,    /* the sum in double, divided by the divisor */
  W_ARGMAX, /* i64: where in the plane (iy*W + ix) the maximum comes from, -1 for nowhere */
} wkind;

/* Open the loops over the window's taps inside the input (taps ty, tx of the plane at xbase),
 * row-major — the reference's order; gives the tap's value and, in *at, its place in the plane
 * (iy*W + ix). Close with taps_close. */
static cg_val taps_open(cg_fn *f, const pool *p, cg_val xp, cg_val xbase, const taps *ty,
                        const taps *tx, cg_loop *ly, cg_loop *lx, cg_val *at) {
  *ly = cg_loop_begin(f, ty->lo, ty->hi);
  cg_val iy = ibin(f, "add", ty->start, ibin(f, "mul", ly->i, ic(p->w.dh)));
  cg_val row = ibin(f, "mul", iy, ic(p->w.w));
  *lx = cg_loop_begin(f, tx->lo, tx->hi);
  cg_val ix = ibin(f, "add", tx->start, ibin(f, "mul", lx->i, ic(p->w.dw)));
  *at = ibin(f, "add", row, ix);
  return cg_load(f, xp, p->t, ibin(f, "add", xbase, *at));
}

static void taps_close(cg_fn *f, cg_loop ly, cg_loop lx) {
  cg_loop_end(f, lx);
  cg_loop_end(f, ly);
}

/* The window's maximum (W_MAX) or mean (W_AVG), over its taps inside the input. */
static cg_val window_reduce(cg_fn *f, const pool *p, wkind kind, cg_val xp, cg_val xbase,
                            const taps *ty, const taps *tx) {
  const char *ct = cg_calc_type(p->t);
  /* max starts at -inf, the identity of max, so a window with no input position gives -inf */
  cg_val acc = kind == W_AVG ? cg_acc_new(f, "double", cg_const(DPC_F64, 0))
                             : cg_acc_new(f, ct, cg_const(p->t, -INFINITY));
  cg_loop ly, lx;
  cg_val at, v = taps_open(f, p, xp, xbase, ty, tx, &ly, &lx, &at);
  if (kind == W_AVG) {
    cg_val s = cg_acc_get(f, acc, "double");
    cg_acc_set(f, acc, "double", cg_op2(f, "fadd", "double", s, to_double(f, v, p->t)));
  } else {
    /* m = v when v > m or v is NaN: v > NaN is false, so a NaN sticks */
    cg_val m = cg_acc_get(f, acc, ct), gt = cg_tmp(f), nan = cg_tmp(f), take = cg_tmp(f),
           r = cg_tmp(f);
    cg_line(f, "%s = fcmp ogt %s %s, %s", gt.s, ct, v.s, m.s);
    cg_line(f, "%s = fcmp uno %s %s, %s", nan.s, ct, v.s, v.s);
    cg_line(f, "%s = or i1 %s, %s", take.s, gt.s, nan.s);
    cg_line(f, "%s = select i1 %s, %s %s, %s %s", r.s, take.s, ct, v.s, ct, m.s);
    cg_acc_set(f, acc, ct, r);
  }
  taps_close(f, ly, lx);
  if (kind == W_MAX) return cg_acc_get(f, acc, ct);
  return cg_op2(f, "fdiv", "double", cg_acc_get(f, acc, "double"), divisor(f, p, ty, tx));
}

/* W_ARGMAX: the first tap equal to the window's maximum (the first NaN when the maximum is NaN),
 * -1 when no tap is inside. That is the position the forward's strict `>` keeps (equal values,
 * -0 and +0 among them, compare equal, and the first is kept), found with two short dependency
 * chains (the maximum, then a select per tap) instead of one long one through value and index
 * together, which cost ~12 cycles a tap. */
static cg_val window_argmax(cg_fn *f, const pool *p, cg_val xp, cg_val xbase, const taps *ty,
                            const taps *tx) {
  const char *ct = cg_calc_type(p->t);
  cg_val m = window_reduce(f, p, W_MAX, xp, xbase, ty, tx), mnan = cg_tmp(f);
  cg_line(f, "%s = fcmp uno %s %s, %s", mnan.s, ct, m.s, m.s);
  cg_val best = cg_acc_new(f, "i64", ic(-1));
  cg_loop ly, lx;
  cg_val at, v = taps_open(f, p, xp, xbase, ty, tx, &ly, &lx, &at);
  cg_val eq = cg_tmp(f), vnan = cg_tmp(f), match = cg_tmp(f), none = cg_tmp(f), take = cg_tmp(f),
         nb = cg_tmp(f), b = cg_acc_get(f, best, "i64");
  cg_line(f, "%s = fcmp oeq %s %s, %s", eq.s, ct, v.s, m.s);
  cg_line(f, "%s = fcmp uno %s %s, %s", vnan.s, ct, v.s, v.s);
  cg_line(f, "%s = select i1 %s, i1 %s, i1 %s", match.s, mnan.s, vnan.s, eq.s);
  cg_line(f, "%s = icmp slt i64 %s, 0", none.s, b.s);
  cg_line(f, "%s = and i1 %s, %s", take.s, none.s, match.s);
  cg_line(f, "%s = select i1 %s, i64 %s, i64 %s", nb.s, take.s, at.s, b.s);
  cg_acc_set(f, best, "i64", nb);
  taps_close(f, ly, lx);
  return cg_acc_get(f, best, "i64");
}

/* Where a row of window results goes: element base + ox of ptr, of type t (W_MAX, W_AVG), or
 * of an argmax buffer of `itype` entries (W_ARGMAX). */
typedef struct sink {
  wkind kind;
  cg_val ptr, base;
  dpc_dtype t;
  const char *itype;
} sink;

/* Every window of one row (taps ty), the columns split into border, interior and border
 * segments so the interior's taps are constants. */
static void window_row(cg_fn *f, const pool *p, cg_val xp, cg_val xbase, const taps *ty,
                       const sink *s) {
  int64_t sx[4];
  segments(&p->ax, sx);
  for (int cs = 0; cs < 3; cs++) {
    if (sx[cs] >= sx[cs + 1]) continue;
    cg_loop lx = cg_loop_begin(f, ic(sx[cs]), ic(sx[cs + 1]));
    taps tx = taps_at(f, &p->ax, lx.i, cs == 1, p->include_pad);
    cg_val r = s->kind == W_ARGMAX ? window_argmax(f, p, xp, xbase, ty, &tx)
                                   : window_reduce(f, p, s->kind, xp, xbase, ty, &tx);
    cg_val at = ibin(f, "add", s->base, lx.i);
    if (s->kind == W_ARGMAX) {
      cg_val e = r;
      if (strcmp(s->itype, "i64")) {
        e = cg_tmp(f);
        cg_line(f, "%s = trunc i64 %s to %s", e.s, r.s, s->itype);
      }
      cg_val q = cg_tmp(f);
      cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", q.s, s->itype, s->itype,
              s->ptr.s, at.s);
      cg_line(f, "store %s %s, %s* %s", s->itype, e.s, s->itype, q.s);
    } else {
      cg_store(f, s->ptr, s->t, at, s->kind == W_AVG ? from_double(f, r, s->t) : r);
    }
    cg_loop_end(f, lx);
  }
}

/* ---- forward -------------------------------------------------------------------------------- */

static dpc_status lower_pool(cg_kernel *k, dpc_diag *d, bool is_max) {
  cg_fn *f = k->f;
  pool p;
  dpc_status st = pool_init(f, &p, is_max, 0, d);
  if (st) return st;
  const dpc_window *w = &p.w;
  if (is_max && cg_pool2_fits(w, p.t, f->vector_bits)) return cg_lower_max_pool2(k, w);
  if (is_max && cg_pool_vec_fits(w, p.t, f->vector_bits)) return cg_lower_max_pool_vec(k, w);
  cg_val xp = cg_arg_ptr(f, 0, p.t), yp = cg_arg_ptr(f, 1, p.t);
  k->total = w->n * w->c;
  int64_t sy[4];
  segments(&p.ay, sy);
  cg_loop lp = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val xbase = ibin(f, "mul", lp.i, ic(w->h * w->w));
  cg_val ybase = ibin(f, "mul", lp.i, ic(w->oh * w->ow));
  for (int rs = 0; rs < 3; rs++) {
    if (sy[rs] >= sy[rs + 1]) continue;
    cg_loop ly = cg_loop_begin(f, ic(sy[rs]), ic(sy[rs + 1]));
    taps ty = taps_at(f, &p.ay, ly.i, rs == 1, p.include_pad);
    sink s = {is_max ? W_MAX : W_AVG, yp, ibin(f, "add", ybase, ibin(f, "mul", ly.i, ic(w->ow))),
              p.t, NULL};
    window_row(f, &p, xp, xbase, &ty, &s);
    cg_loop_end(f, ly);
  }
  cg_loop_end(f, lp);
  return DPC_OK;
}

static dpc_status lower_max_pool(cg_kernel *k, dpc_diag *d) {
  return lower_pool(k, d, true);
}

static dpc_status lower_avg_pool(cg_kernel *k, dpc_diag *d) {
  return lower_pool(k, d, false);
}

/* ---- gradients ------------------------------------------------------------------------------ */

/* The window positions o covering input position i along an axis: tap j of window o lands on i
 * when i + pb - j*d == o*s, 0 <= j < k, so o runs over [lo, hi]. In the reference's order (j
 * ascending, so o descending) the candidates are o = hi - c for c in [0, count); with dilation
 * a candidate covers i only when (i + pb - o*s) % d == 0, tested by cover_begin. */
typedef struct cover {
  cg_val lo, hi, count;
} cover;

static cover cover_of(cg_fn *f, const axis *x, cg_val i) {
  cover c;
  cg_val t = ibin(f, "add", i, ic(x->pb)); /* >= 0 */
  c.hi = imin(f, idiv(f, t, x->s), ic(x->out - 1));
  /* lowest o: ceil((t - (k-1)*d) / s), at least 0 */
  cg_val q = imax(f, ibin(f, "sub", t, ic((x->k - 1) * x->d)), ic(0));
  c.lo = idiv(f, ibin(f, "add", q, ic(x->s - 1)), x->s);
  c.count = imax(f, ibin(f, "add", ibin(f, "sub", c.hi, c.lo), ic(1)), ic(0));
  return c;
}

/* Open the loop over the windows covering i along an axis; gives the window position o, and
 * opens an `if` (returned in *cond, else UINT32_MAX) when dilation makes some candidates miss. */
static cg_loop cover_begin(cg_fn *f, const axis *x, cg_val i, const cover *c, cg_val *o,
                           uint32_t *cond) {
  cg_loop l = cg_loop_begin(f, ic(0), c->count);
  *o = ibin(f, "sub", c->hi, l.i);
  *cond = UINT32_MAX;
  if (x->d > 1) {
    cg_val r = ibin(f, "sub", ibin(f, "add", i, ic(x->pb)), ibin(f, "mul", *o, ic(x->s)));
    cg_val m = ibin(f, "srem", r, ic(x->d)), hit = cg_tmp(f);
    cg_line(f, "%s = icmp eq i64 %s, 0", hit.s, m.s);
    *cond = if_begin(f, hit);
  }
  return l;
}

static void cover_end(cg_fn *f, cg_loop l, uint32_t cond) {
  if (cond != UINT32_MAX) if_end(f, cond);
  cg_loop_end(f, l);
}

/* Stack for max_pool2d_grad's argmax buffer: one entry per window of the rows a band of dx
 * rows needs. */
#define ARGMAX_BYTES (64 * 1024)

/* max_pool2d_grad keeps the argmax of every window a band of dx rows needs in a buffer, so
 * each window is scanned once, not once per position it covers: the whole plane when it fits,
 * else bands of `rows` dx rows (their windows: at most cap rows of them). *rows 0: not even one
 * dx row's windows fit, scan per covering window instead. */
static void argmax_bands(const pool *p, const char **itype, int64_t *rows, int64_t *cap) {
  const dpc_window *w = &p->w;
  *itype = w->h * w->w <= INT32_MAX ? "i32" : "i64";
  int64_t esz = strcmp(*itype, "i32") ? 8 : 4;
  *cap = ARGMAX_BYTES / esz / w->ow;
  if (w->oh <= *cap) {
    *rows = w->h, *cap = w->oh;
    return;
  }
  /* dx rows [i, i + B) need window rows lo(i) .. hi(i + B - 1): at most
   * floor((B - 1 + (kh-1)*dh) / sh) + 1 of them */
  *rows = (*cap - 1) * w->sh - (w->kh - 1) * w->dh;
  if (*rows < 1) *rows = 0;
}

/* A stack array of n elements of `type` at function entry; its first element's address. */
static cg_val stack_array(cg_fn *f, int64_t n, const char *type) {
  uint32_t id = cg_label(f);
  dpc_buf_printf(&f->head, "  %%sa%u = alloca [%lld x %s]\n", id, (long long)n, type);
  cg_val v = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds [%lld x %s], [%lld x %s]* %%sa%u, i64 0, i64 0", v.s,
          (long long)n, type, (long long)n, type, id);
  return v;
}

/* max_pool2d_grad for planes whose windows' argmaxes and dx sums both fit the stack: each
 * window's argmax once (row segments, constant taps inside), then dy of every window added at
 * its argmax, in descending window order — the order the reference's gather visits a
 * position's windows in, so every sum is the same double — and dx stored from the sums. One
 * argmax scan and one add per window, instead of a gather over the windows covering each
 * position (a stride-1 3x3 window: nine visits to nine windows per position). */
static bool scatter_fits(const dpc_window *w) {
  return w->oh * w->ow * 4 <= ARGMAX_BYTES && w->h * w->w * 8 <= ARGMAX_BYTES &&
         w->h * w->w <= INT32_MAX;
}

static void lower_max_pool_grad_scatter(cg_kernel *k, const pool *p) {
  cg_fn *f = k->f;
  const dpc_window *w = &p->w;
  int64_t hw = w->h * w->w, ohw = w->oh * w->ow;
  cg_val dyp = cg_arg_ptr(f, 0, p->t), xp = cg_arg_ptr(f, 1, p->t), dxp = cg_arg_ptr(f, 2, p->t);
  k->total = w->n * w->c;
  cg_val am = stack_array(f, ohw, "i32"), acc = stack_array(f, hw, "double");
  cg_loop lp = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val xbase = ibin(f, "mul", lp.i, ic(hw)), ybase = ibin(f, "mul", lp.i, ic(ohw));
  cg_loop lz = cg_loop_begin(f, ic(0), ic(hw));
  cg_store(f, acc, DPC_F64, lz.i, cg_const(DPC_F64, 0));
  cg_loop_end(f, lz);
  int64_t sy[4];
  segments(&p->ay, sy);
  for (int rs = 0; rs < 3; rs++) {
    if (sy[rs] >= sy[rs + 1]) continue;
    cg_loop ly = cg_loop_begin(f, ic(sy[rs]), ic(sy[rs + 1]));
    taps ty = taps_at(f, &p->ay, ly.i, rs == 1, false);
    sink sk = {W_ARGMAX, am, ibin(f, "mul", ly.i, ic(w->ow)), p->t, "i32"};
    window_row(f, p, xp, xbase, &ty, &sk);
    cg_loop_end(f, ly);
  }
  cg_loop lw = cg_loop_begin(f, ic(0), ic(ohw));
  cg_val e = ibin(f, "sub", ic(ohw - 1), lw.i);
  cg_val q = cg_tmp(f), b32 = cg_tmp(f), b = cg_tmp(f), has = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds i32, i32* %s, i64 %s", q.s, am.s, e.s);
  cg_line(f, "%s = load i32, i32* %s", b32.s, q.s);
  cg_line(f, "%s = sext i32 %s to i64", b.s, b32.s);
  cg_line(f, "%s = icmp sge i64 %s, 0", has.s, b.s);
  uint32_t id = if_begin(f, has);
  cg_val g = to_double(f, cg_load(f, dyp, p->t, ibin(f, "add", ybase, e)), p->t);
  cg_store(f, acc, DPC_F64, b, cg_op2(f, "fadd", "double", cg_load(f, acc, DPC_F64, b), g));
  if_end(f, id);
  cg_loop_end(f, lw);
  cg_loop ls = cg_loop_begin(f, ic(0), ic(hw));
  cg_store(f, dxp, p->t, ibin(f, "add", xbase, ls.i),
           from_double(f, cg_load(f, acc, DPC_F64, ls.i), p->t));
  cg_loop_end(f, ls);
  cg_loop_end(f, lp);
}

static dpc_status lower_pool_grad(cg_kernel *k, dpc_diag *d, bool is_max) {
  cg_fn *f = k->f;
  pool p;
  dpc_status st = pool_init(f, &p, is_max, 1, d);
  if (st) return st;
  const dpc_window *w = &p.w;
  if (is_max && cg_pool2_fits(w, p.t, f->vector_bits)) return cg_lower_max_pool2_grad(k, w);
  if (is_max && cg_pool_vec_grad_fits(w, p.t, f->vector_bits))
    return cg_lower_max_pool_vec_grad(k, w);
  if (is_max && scatter_fits(w)) {
    lower_max_pool_grad_scatter(k, &p);
    return DPC_OK;
  }
  cg_val dyp = cg_arg_ptr(f, 0, p.t), xp = cg_arg_ptr(f, 1, p.t), dxp = cg_arg_ptr(f, 2, p.t);
  k->total = w->n * w->c;
  const char *it = "i64";
  int64_t band = w->h, cap = 0;
  if (is_max) argmax_bands(&p, &it, &band, &cap);
  bool buffered = is_max && band > 0;
  if (!buffered) band = w->h;
  cg_val buf = buffered ? stack_array(f, cap * w->ow, it) : ic(0);
  cg_loop lp = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val xbase = ibin(f, "mul", lp.i, ic(w->h * w->w));
  cg_val ybase = ibin(f, "mul", lp.i, ic(w->oh * w->ow));
  cg_loop lb = cg_loop_begin(f, ic(0), ic((w->h + band - 1) / band));
  cg_val iy0 = ibin(f, "mul", lb.i, ic(band));
  cg_val iy1 = imin(f, ibin(f, "add", iy0, ic(band)), ic(w->h));
  cg_val oyf = ic(0);
  if (buffered) {
    /* the argmax of every window the band's rows need: rows first .. last */
    oyf = cover_of(f, &p.ay, iy0).lo;
    cg_val oyl = cover_of(f, &p.ay, ibin(f, "sub", iy1, ic(1))).hi;
    cg_loop lo = cg_loop_begin(f, oyf, ibin(f, "add", oyl, ic(1)));
    taps ty = taps_at(f, &p.ay, lo.i, false, false);
    cg_val base = ibin(f, "mul", ibin(f, "sub", lo.i, oyf), ic(w->ow));
    sink s = {W_ARGMAX, buf, base, p.t, it};
    window_row(f, &p, xp, xbase, &ty, &s);
    cg_loop_end(f, lo);
  }
  cg_loop liy = cg_loop_begin(f, iy0, iy1);
  cover cy = cover_of(f, &p.ay, liy.i);
  cg_loop lix = cg_loop_begin(f, ic(0), ic(w->w));
  cover cx = cover_of(f, &p.ax, lix.i);
  cg_val pos = ibin(f, "add", ibin(f, "mul", liy.i, ic(w->w)), lix.i);
  cg_val acc = cg_acc_new(f, "double", cg_const(DPC_F64, 0));
  cg_val oy, ox;
  uint32_t ify, ifx;
  cg_loop loy = cover_begin(f, &p.ay, liy.i, &cy, &oy, &ify);
  /* the window row's taps: for the argmax scan, or its share of the divisor */
  taps ty = {{{0}}, {{0}}, {{0}}, {{0}}};
  if (!buffered) ty = taps_at(f, &p.ay, oy, false, p.include_pad);
  cg_loop lox = cover_begin(f, &p.ax, lix.i, &cx, &ox, &ifx);
  cg_val at = ibin(f, "add", ybase, ibin(f, "add", ibin(f, "mul", oy, ic(w->ow)), ox));
  cg_val g = to_double(f, cg_load(f, dyp, p.t, at), p.t);
  cg_val sum = cg_acc_get(f, acc, "double");
  if (is_max) {
    cg_val b;
    if (buffered) {
      cg_val e = ibin(f, "add", ibin(f, "mul", ibin(f, "sub", oy, oyf), ic(w->ow)), ox);
      cg_val q = cg_tmp(f), v = cg_tmp(f);
      cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", q.s, it, it, buf.s, e.s);
      cg_line(f, "%s = load %s, %s* %s", v.s, it, it, q.s);
      b = v;
      if (strcmp(it, "i64")) {
        b = cg_tmp(f);
        cg_line(f, "%s = sext %s %s to i64", b.s, it, v.s);
      }
    } else {
      taps tx = taps_at(f, &p.ax, ox, false, false);
      b = window_argmax(f, &p, xp, xbase, &ty, &tx);
    }
    /* a select, not a multiply: dy of a window that takes its maximum elsewhere may be NaN */
    cg_val hit = cg_tmp(f), add = cg_tmp(f);
    cg_line(f, "%s = icmp eq i64 %s, %s", hit.s, b.s, pos.s);
    cg_line(f, "%s = select i1 %s, double %s, double %s", add.s, hit.s, g.s,
            cg_const(DPC_F64, 0).s);
    cg_acc_set(f, acc, "double", cg_op2(f, "fadd", "double", sum, add));
  } else {
    taps tx = taps_at(f, &p.ax, ox, false, p.include_pad);
    cg_val share = cg_op2(f, "fdiv", "double", g, divisor(f, &p, &ty, &tx));
    cg_acc_set(f, acc, "double", cg_op2(f, "fadd", "double", sum, share));
  }
  cover_end(f, lox, ifx);
  cover_end(f, loy, ify);
  cg_val r = from_double(f, cg_acc_get(f, acc, "double"), p.t);
  cg_store(f, dxp, p.t, ibin(f, "add", xbase, pos), r);
  cg_loop_end(f, lix);
  cg_loop_end(f, liy);
  cg_loop_end(f, lb);
  cg_loop_end(f, lp);
  return DPC_OK;
}

static dpc_status lower_max_pool_grad(cg_kernel *k, dpc_diag *d) {
  return lower_pool_grad(k, d, true);
}

static dpc_status lower_avg_pool_grad(cg_kernel *k, dpc_diag *d) {
  return lower_pool_grad(k, d, false);
}

const cg_lower_fn cg_pool_table[DPC_OP_COUNT] = {
    [DPC_OP_MAX_POOL2D] = lower_max_pool,
    [DPC_OP_AVG_POOL2D] = lower_avg_pool,
    [DPC_OP_MAX_POOL2D_GRAD] = lower_max_pool_grad,
    [DPC_OP_AVG_POOL2D_GRAD] = lower_avg_pool_grad,
};
