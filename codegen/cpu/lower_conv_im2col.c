/*
 * lower_conv_im2col.c — the data movement of convolutions as GEMMs (lower_window.c): im2col,
 * which copies each output pixel's receptive field into a column of Col, and col2im, which sums
 * the columns of dCol back into the input gradient. Every size is a constant of the IR.
 *
 * A tap's row of Col is built a vector of output columns at a time: one masked load per output
 * row and tap (stride 1), the even lanes of two loads (stride 2), or an element at a time. When
 * the stride is 1 and output rows are as wide as input rows ("same" padding), a tap's row is the
 * input plane shifted, and im2col_plane copies it with constant masks for the padding. col2im_rows
 * sums dCol into each vector of dx once, over all taps, rather than scattering tap by tap (which
 * re-reads what the previous tap just stored, a store forwarding stall each time).
 */
#include "codegen/cpu/conv_im2col.h"

#include <stdio.h>
#include <string.h>

/* Most vectors im2col_plane unrolls (taps x vectors of pixels): 117 for the CNN's second layer.
 * Its first (9 x 52) compiled in 0.4 s instead of 0.05 s, more than it saved in a run. */
#define PLANE_UNROLL 256

dpc_status cg_conv_init(cg_fn *f, cg_conv_geom *cv, dpc_diag *d) {
  const dpc_graph *g = f->g;
  dpc_status st = dpc_window_of(g, f->node, &cv->w, d);
  if (st) return st;
  const dpc_node *nd = &g->nodes[f->node];
  cv->t = g->values[nd->out].dtype;
  const dpc_window *w = &cv->w;
  /* n from dy (input 0 of the gradients) or x (input 0 of conv2d): both lead with it */
  cv->n = g->values[g->ids[nd->in]].shape.d[0];
  cv->cpg = w->c / w->groups;
  cv->opg = w->oc / w->groups;
  cv->kk = w->kh * w->kw;
  cv->K = cv->cpg * cv->kk;
  cv->P = w->oh * w->ow;
  return DPC_OK;
}

/* The tap (ci, ky, kx) of row q, and the output columns [lo, hi) whose input column
 * ox*sw + off (off = kx*dw - pl) falls inside the image (as tap_cols in ref_conv.c). */
typedef struct tap {
  cg_val ci, ky, off, lo, hi;
} tap;

static tap tap_of(cg_fn *f, const cg_conv_geom *cv, cg_val q) {
  const dpc_window *w = &cv->w;
  tap t;
  t.ci = gm_ev(f, "sdiv i64 %s, %lld", q.s, (long long)cv->kk);
  cg_val r = gm_ev(f, "srem i64 %s, %lld", q.s, (long long)cv->kk);
  t.ky = gm_ev(f, "sdiv i64 %s, %lld", r.s, (long long)w->kw);
  cg_val kx = gm_ev(f, "srem i64 %s, %lld", r.s, (long long)w->kw);
  t.off = gm_ev(f, "sub i64 %s, %lld", cg_mulk(f, kx, w->dw).s, (long long)w->pl);
  cg_val neg = gm_max(f, gm_sub(f, cg_const_i64(0), t.off), cg_const_i64(0));
  t.lo = gm_ev(f, "sdiv i64 %s, %lld", cg_add(f, neg, cg_const_i64(w->sw - 1)).s, (long long)w->sw);
  t.lo = gm_min(f, t.lo, cg_const_i64(w->ow));
  cg_val u = gm_sub(f, cg_const_i64(w->w - 1), t.off); /* last input column minus off */
  cg_val last = gm_ev(f, "sdiv i64 %s, %lld", u.s, (long long)w->sw);
  cg_val inside = gm_ev(f, "icmp sge i64 %s, 0", u.s);
  t.hi = gm_ev(f, "select i1 %s, i64 %s, i64 0", inside.s, cg_add(f, last, cg_const_i64(1)).s);
  t.hi = gm_max(f, gm_min(f, t.hi, cg_const_i64(w->ow)), t.lo);
  return t;
}

/* Input row of output row oy under tap t, and whether it is inside the image. */
static cg_val in_row(cg_fn *f, const cg_conv_geom *cv, const tap *t, cg_val oy, cg_val *valid) {
  const dpc_window *w = &cv->w;
  cg_val iy = cg_add(f, cg_mulk(f, oy, w->sh), cg_mulk(f, t->ky, w->dh));
  iy = gm_ev(f, "sub i64 %s, %lld", iy.s, (long long)w->pt);
  *valid = gm_ev(f, "icmp ult i64 %s, %lld", iy.s, (long long)w->h); /* 0 <= iy < h */
  return iy;
}

/* Lanes of the output-row chunk starting at column ox0 that the tap reads: [lo, hi) and < ow. */
static cg_val chunk_mask(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, const tap *t,
                         int64_t ox0) {
  cg_val m = gm_lanes(f, c, gm_sub(f, t->lo, cg_const_i64(ox0)),
                      gm_sub(f, gm_min(f, t->hi, cg_const_i64(cv->w.ow)), cg_const_i64(ox0)));
  return m;
}

/* Lanes l of the result are p[2 l], for the lanes m keeps (zeros elsewhere): two masked loads
 * of the 2 vl elements they span, each mask the output mask spread to the even lanes, and one
 * shuffle that keeps the even lanes. */
static cg_val load_even(cg_fn *f, const gm_cfg *c, cg_val p, cg_val m) {
  int VL = c->vl;
  char lo[512], hi[512], ev[512];
  size_t a = 0, b = 0, e = 0;
  for (int l = 0; l < VL; l++) {
    /* lane VL of the second operand (zeroinitializer) is false */
    a += (size_t)snprintf(lo + a, sizeof lo - a, "%si32 %d", l ? ", " : "<", l % 2 ? VL : l / 2);
    b += (size_t)snprintf(hi + b, sizeof hi - b, "%si32 %d", l ? ", " : "<",
                          l % 2 ? VL : VL / 2 + l / 2);
    e += (size_t)snprintf(ev + e, sizeof ev - e, "%si32 %d", l ? ", " : "<", 2 * l);
  }
  snprintf(lo + a, sizeof lo - a, ">");
  snprintf(hi + b, sizeof hi - b, ">");
  snprintf(ev + e, sizeof ev - e, ">");
  cg_val mlo =
      gm_ev(f, "shufflevector %s %s, %s zeroinitializer, %s %s", c->mty, m.s, c->mty, c->ity, lo);
  cg_val mhi =
      gm_ev(f, "shufflevector %s %s, %s zeroinitializer, %s %s", c->mty, m.s, c->mty, c->ity, hi);
  cg_val vlo = gm_mload(f, c, p, mlo);
  cg_val vhi = gm_mload(f, c, gm_gep(f, c->ty, p, cg_const_i64(VL), false), mhi);
  return gm_ev(f, "shufflevector %s %s, %s %s, %s %s", c->vty, vlo.s, c->vty, vhi.s, c->ity, ev);
}

/* Zero a row's columns [from, the next multiple of nr) (row: the row's first element): the
 * GEMM reads whole vectors there. At most nv masked stores. */
void cg_zero_cols(cg_fn *f, const gm_cfg *c, cg_val row, cg_val from) {
  cg_val left = gm_ev(f, "srem i64 %s, %d", from.s, c->nr);
  cg_val tail = gm_ev(f, "srem i64 %s, %d", gm_ev(f, "sub i64 %d, %s", c->nr, left.s).s, c->nr);
  for (int v = 0; v < c->nv; v++) {
    cg_val m = gm_lanes(f, c, cg_const_i64(0), gm_sub(f, tail, cg_const_i64(v * c->vl)));
    cg_val at = gm_gep(f, c->ty, row, cg_add(f, from, cg_const_i64(v * c->vl)), false);
    gm_mstore(f, c, (cg_val){"zeroinitializer"}, at, m);
  }
}

/* Zero columns [from, next multiple of nr) of rows [0, rows) of a buffer of row stride ld: the
 * GEMM reads whole vectors there. */
void cg_zero_tail(cg_fn *f, const gm_cfg *c, cg_val buf, int64_t ld, cg_val rows, cg_val from) {
  cg_loop r = cg_loop_begin(f, cg_const_i64(0), rows);
  cg_zero_cols(f, c, gm_gep(f, c->ty, buf, cg_mulk(f, r.i, ld), true), from);
  cg_loop_end(f, r);
}

/* Col[q - q0][(oy - oy0)*ow + ox] = x[plane0 + ci][iy][ox*sw + off] (0 outside the image), for
 * q in [q0, q0 + nq) and oy in [oy0, oy0 + nrows). plane0: the first channel plane of the
 * group in this image. Columns past nrows*ow up to the next nr are zeroed (the GEMM reads
 * whole vectors there). */
static void im2col(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val x, cg_val plane0,
                   cg_val q0, cg_val nq, cg_val oy0, cg_val nrows, cg_val col, int64_t ld) {
  const dpc_window *w = &cv->w;
  /* stride 2 loads the two vectors its outputs' inputs span and keeps the even lanes (an element
   * at a time, ResNet-18's 7x7 stem spent as long in im2col as in its GEMM) */
  bool vec = (w->sw == 1 || w->sw == 2) && gm_vec_ok(c, cv->t);
  int64_t chunks = cg_ceil_div(w->ow, c->vl);
  cg_loop q = cg_loop_begin(f, cg_const_i64(0), nq);
  tap t = tap_of(f, cv, cg_add(f, q0, q.i));
  cg_val plane = cg_mulk(f, cg_add(f, plane0, t.ci), w->h * w->w);
  cg_val dst = gm_gep(f, c->ty, col, cg_mulk(f, q.i, ld), true);
  cg_val masks[8];
  for (int64_t k = 0; vec && k < chunks && chunks <= 8; k++)
    masks[k] = chunk_mask(f, c, cv, &t, k * c->vl);
  cg_loop oy = cg_loop_begin(f, cg_const_i64(0), nrows);
  cg_val valid, iy = in_row(f, cv, &t, cg_add(f, oy0, oy.i), &valid);
  cg_val drow = gm_gep(f, c->ty, dst, cg_mulk(f, oy.i, w->ow), true);
  if (vec) {
    /* src(ox) = x + plane + iy*w + off + ox; lanes outside [lo, hi) or rows outside the image
     * stay unread, so the address may point before or past the plane */
    cg_val iyv = gm_ev(f, "select i1 %s, i64 %s, i64 0", valid.s, iy.s); /* keep it mapped */
    cg_val src =
        gm_gep(f, c->ty, x, cg_add(f, cg_add(f, plane, cg_mulk(f, iyv, w->w)), t.off), false);
    cg_loop ch = {0};
    if (chunks > 8) ch = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(chunks));
    for (int64_t k = 0; k < (chunks > 8 ? 1 : chunks); k++) {
      cg_val ox0 = chunks > 8 ? cg_mulk(f, ch.i, c->vl) : cg_const_i64(k * c->vl);
      cg_val m;
      if (chunks > 8) {
        cg_val hi = gm_sub(f, gm_min(f, t.hi, cg_const_i64(w->ow)), ox0);
        m = gm_lanes(f, c, gm_sub(f, t.lo, ox0), hi);
      } else {
        m = masks[k];
      }
      m = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", valid.s, c->mty, m.s, c->mty);
      cg_val v = w->sw == 1 ? gm_mload(f, c, gm_gep(f, c->ty, src, ox0, false), m)
                            : load_even(f, c, gm_gep(f, c->ty, src, cg_mulk(f, ox0, 2), false), m);
      cg_val keep = gm_lanes(f, c, cg_const_i64(0), gm_sub(f, cg_const_i64(w->ow), ox0));
      gm_mstore(f, c, v, gm_gep(f, c->ty, drow, ox0, true), keep);
    }
    if (chunks > 8) cg_loop_end(f, ch);
  } else {
    /* strided or widened: element by element, reading index 0 where the tap is outside */
    cg_loop ox = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(w->ow));
    cg_val a = gm_ev(f, "icmp sge i64 %s, %s", ox.i.s, t.lo.s);
    cg_val b = gm_ev(f, "icmp slt i64 %s, %s", ox.i.s, t.hi.s);
    cg_val ok = gm_ev(f, "and i1 %s, %s", valid.s, gm_ev(f, "and i1 %s, %s", a.s, b.s).s);
    cg_val ix = cg_add(f, cg_mulk(f, ox.i, w->sw), t.off);
    cg_val idx = cg_add(f, plane, cg_add(f, cg_mulk(f, iy, w->w), ix));
    idx = gm_ev(f, "select i1 %s, i64 %s, i64 0", ok.s, idx.s);
    cg_val v = cg_load(f, x, cv->t, idx);
    v = gm_ev(f, "select i1 %s, %s %s, %s %s", ok.s, c->ty, v.s, c->ty, cg_const(c->calc, 0).s);
    cg_line(f, "store %s %s, %s* %s", c->ty, v.s, c->ty, gm_gep(f, c->ty, drow, ox.i, true).s);
    cg_loop_end(f, ox);
  }
  cg_loop_end(f, oy);
  cg_zero_cols(f, c, dst, cg_mulk(f, nrows, w->ow));
  cg_loop_end(f, q);
}

/* Whether im2col_plane can build this Col: stride 1 with output rows as wide as the input's
 * (so a tap's whole column of pixels is one shifted run of the input plane), every output row
 * in one block, and a small enough unrolled body (taps x vectors of pixels). */
bool cg_plane_ok(const gm_cfg *c, const cg_conv_geom *cv, int64_t rb) {
  const dpc_window *w = &cv->w;
  return w->sh == 1 && w->sw == 1 && w->ow == w->w && rb == w->oh && gm_vec_ok(c, cv->t) &&
         cv->kk * cg_ceil_div(cv->P + c->nr, c->vl) <= PLANE_UNROLL;
}

/* im2col for plane_ok geometries, whole channels [ci0, ci0 + nci) at a time: row q of a tap
 * (ky, kx) is the input plane shifted by s = (ky*dh - pt)*w + kx*dw - pl, with the pixels whose
 * input falls in the padding masked off; both the shift and the masks are constants of the
 * unrolled taps, so a vector of Col costs one masked load and one store (the general im2col
 * spends ~10 instructions per output row and tap). */
static void im2col_plane(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val x, cg_val plane0,
                         cg_val ci0, cg_val nci, cg_val col, int64_t ld) {
  const dpc_window *w = &cv->w;
  /* up to the next multiple of nr: the GEMM reads whole vectors there, zeros past P */
  int64_t chunks = cg_ceil_div(cg_ceil_div(cv->P, c->nr) * c->nr, c->vl);
  cg_loop ci = cg_loop_begin(f, cg_const_i64(0), nci);
  cg_val base =
      gm_gep(f, c->ty, x, cg_mulk(f, cg_add(f, plane0, cg_add(f, ci0, ci.i)), w->h * w->w), true);
  cg_val rows = gm_gep(f, c->ty, col, cg_mulk(f, ci.i, cv->kk * ld), true);
  for (int64_t ky = 0; ky < w->kh; ky++)
    for (int64_t kx = 0; kx < w->kw; kx++) {
      int64_t sy = ky * w->dh - w->pt, sx = kx * w->dw - w->pl, shift = sy * w->w + sx;
      cg_val dst = gm_gep(f, c->ty, rows, cg_const_i64((ky * w->kw + kx) * ld), true);
      for (int64_t j = 0; j < chunks; j++) {
        bool on[64], live;
        for (int l = 0; l < c->vl; l++) {
          int64_t px = j * c->vl + l, iy = px / w->ow + sy, ix = px % w->ow + sx;
          on[l] = px < cv->P && iy >= 0 && iy < w->h && ix >= 0 && ix < w->w;
        }
        cg_val m = gm_lane_const(f, c, on, &live), v = {"zeroinitializer"};
        if (live)
          v = gm_mload(f, c, gm_gep(f, c->ty, base, cg_const_i64(j * c->vl + shift), false), m);
        gm_vstore(f, c, v, gm_gep(f, c->ty, dst, cg_const_i64(j * c->vl), true), c->esize);
      }
    }
  cg_loop_end(f, ci);
}

/* The Col of taps [q0, q0 + nq) over output rows [oy0, oy0 + nrows): whole planes at a time
 * (im2col_plane) when `whole` (plane_ok, and the taps are whole channels), else row by row. */
void cg_im2col_taps(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val x, cg_val plane0,
                    cg_val q0, cg_val nq, bool whole, cg_val oy0, cg_val nrows, cg_val col,
                    int64_t ld) {
  if (whole)
    im2col_plane(f, c, cv, x, plane0, gm_ev(f, "sdiv i64 %s, %lld", q0.s, (long long)cv->kk),
                 gm_ev(f, "sdiv i64 %s, %lld", nq.s, (long long)cv->kk), col, ld);
  else
    im2col(f, c, cv, x, plane0, q0, nq, oy0, nrows, col, ld);
}

/* dx[plane0 + ci][iy][ox*sw + off] += dCol[q - q0][(oy - oy0)*ow + ox], the transpose of
 * im2col; dx is calc-typed here (the caller's scratch for f16/bf16). */
void cg_col2im(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val dx, cg_val plane0,
               cg_val q0, cg_val nq, cg_val oy0, cg_val nrows, cg_val col, int64_t ld) {
  const dpc_window *w = &cv->w;
  bool vec = w->sw == 1;
  int64_t chunks = cg_ceil_div(w->ow, c->vl);
  cg_loop q = cg_loop_begin(f, cg_const_i64(0), nq);
  tap t = tap_of(f, cv, cg_add(f, q0, q.i));
  cg_val plane = cg_mulk(f, cg_add(f, plane0, t.ci), w->h * w->w);
  cg_val srcq = gm_gep(f, c->ty, col, cg_mulk(f, q.i, ld), true);
  cg_val masks[8];
  for (int64_t k = 0; vec && k < chunks && chunks <= 8; k++)
    masks[k] = chunk_mask(f, c, cv, &t, k * c->vl);
  cg_loop oy = cg_loop_begin(f, cg_const_i64(0), nrows);
  cg_val valid, iy = in_row(f, cv, &t, cg_add(f, oy0, oy.i), &valid);
  uint32_t inside = gm_if(f, valid);
  cg_val srow = gm_gep(f, c->ty, srcq, cg_mulk(f, oy.i, w->ow), true);
  cg_val drow = cg_add(f, plane, cg_add(f, cg_mulk(f, iy, w->w), t.off)); /* index of ox = 0 */
  if (vec) {
    cg_val dst = gm_gep(f, c->ty, dx, drow, false);
    cg_loop ch = {0};
    if (chunks > 8) ch = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(chunks));
    for (int64_t k = 0; k < (chunks > 8 ? 1 : chunks); k++) {
      cg_val ox0 = chunks > 8 ? cg_mulk(f, ch.i, c->vl) : cg_const_i64(k * c->vl);
      cg_val m = chunks > 8 ? gm_lanes(f, c, gm_sub(f, t.lo, ox0),
                                       gm_sub(f, gm_min(f, t.hi, cg_const_i64(w->ow)), ox0))
                            : masks[k];
      cg_val p = gm_gep(f, c->ty, dst, ox0, false);
      cg_val old = gm_mload(f, c, p, m);
      cg_val add = gm_mload(f, c, gm_gep(f, c->ty, srow, ox0, true), m);
      gm_mstore(f, c, gm_ev(f, "fadd %s %s, %s", c->vty, old.s, add.s), p, m);
    }
    if (chunks > 8) cg_loop_end(f, ch);
  } else {
    cg_loop ox = cg_loop_begin(f, t.lo, t.hi);
    cg_val p = gm_gep(f, c->ty, dx, cg_add(f, drow, cg_mulk(f, ox.i, w->sw)), true);
    cg_val old = gm_ev(f, "load %s, %s* %s", c->ty, c->ty, p.s);
    cg_val add = gm_ev(f, "load %s, %s* %s", c->ty, c->ty, gm_gep(f, c->ty, srow, ox.i, true).s);
    cg_line(f, "store %s %s, %s* %s", c->ty, gm_ev(f, "fadd %s %s, %s", c->ty, old.s, add.s).s,
            c->ty, p.s);
    cg_loop_end(f, ox);
  }
  gm_endif(f, inside);
  cg_loop_end(f, oy);
  cg_loop_end(f, q);
}

/* Whether col2im_rows can do this geometry: unit column stride, and a tap loop small enough to
 * unroll (kh*kw masked loads per vector of an input row). */
bool cg_rows_ok(const gm_cfg *c, const cg_conv_geom *cv) {
  return cv->w.sw == 1 && cv->kk * cg_ceil_div(cv->w.w, c->vl) <= 64;
}

/* The same sum as col2im, gathered per input row instead of scattered per tap: each vector of
 * dx is loaded once, gets every tap's contribution from dCol (masked loads at shifted columns,
 * the masks constants), and is stored once. Scattering tap by tap re-read a vector the previous
 * tap had just stored one element over, which store forwarding cannot serve: 2x slower overall.
 * dCol holds whole channels: rows [q0, q0 + nq) are channels [q0/kk, (q0+nq)/kk). */
void cg_col2im_rows(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val dx, cg_val plane0,
                    cg_val q0, cg_val nq, cg_val oy0, cg_val nrows, cg_val col, int64_t ld) {
  const dpc_window *w = &cv->w;
  int64_t chunks = cg_ceil_div(w->w, c->vl);
  cg_val ci0 = gm_ev(f, "sdiv i64 %s, %lld", q0.s, (long long)cv->kk);
  cg_val nci = gm_ev(f, "sdiv i64 %s, %lld", nq.s, (long long)cv->kk);
  /* the input rows this block of output rows reaches */
  cg_val top = gm_ev(f, "sub i64 %s, %lld", cg_mulk(f, oy0, w->sh).s, (long long)w->pt);
  cg_val last = cg_add(f, cg_mulk(f, cg_add(f, oy0, gm_sub(f, nrows, cg_const_i64(1))), w->sh),
                       cg_const_i64((w->kh - 1) * w->dh - w->pt + 1));
  cg_val iy_lo = gm_max(f, top, cg_const_i64(0));
  cg_val iy_hi = gm_min(f, last, cg_const_i64(w->h));
  cg_loop ci = cg_loop_begin(f, cg_const_i64(0), nci);
  cg_val plane = cg_mulk(f, cg_add(f, plane0, cg_add(f, ci0, ci.i)), w->h * w->w);
  cg_val qrow = gm_gep(f, c->ty, col, cg_mulk(f, ci.i, cv->kk * ld), true);
  cg_loop iy = cg_loop_begin(f, iy_lo, iy_hi);
  cg_val valid[64], rel[64];
  for (int64_t ky = 0; ky < w->kh; ky++) {
    /* output row of tap ky: (iy + pt - ky*dh) / sh when that divides, inside the block */
    cg_val t = cg_add(f, iy.i, cg_const_i64(w->pt - ky * w->dh));
    cg_val oy = t, ok = {"true"};
    if (w->sh > 1) {
      oy = gm_ev(f, "sdiv i64 %s, %lld", t.s, (long long)w->sh);
      ok = gm_ev(f, "icmp eq i64 %s, 0", gm_ev(f, "srem i64 %s, %lld", t.s, (long long)w->sh).s);
    }
    cg_val r = gm_sub(f, oy, oy0);
    cg_val in = gm_ev(f, "icmp ult i64 %s, %s", r.s, nrows.s);
    valid[ky] = gm_ev(f, "and i1 %s, %s", in.s, ok.s);
    rel[ky] = gm_ev(f, "select i1 %s, i64 %s, i64 0", valid[ky].s, r.s);
  }
  for (int64_t x0 = 0; x0 < chunks; x0++) {
    int64_t ix0 = x0 * c->vl;
    cg_val p = gm_gep(f, c->ty, dx,
                      cg_add(f, plane, cg_add(f, cg_mulk(f, iy.i, w->w), cg_const_i64(ix0))), true);
    cg_val keep = gm_lanes(f, c, cg_const_i64(0), cg_const_i64(w->w - ix0));
    cg_val acc = gm_mload(f, c, p, keep);
    for (int64_t ky = 0; ky < w->kh; ky++) {
      for (int64_t kx = 0; kx < w->kw; kx++) {
        /* lane l is input column ix0 + l, output column ix0 + l - off */
        int64_t off = kx * w->dw - w->pl, lo = off - ix0, hi = off - ix0 + w->ow;
        if (hi > w->w - ix0) hi = w->w - ix0;
        if (lo >= hi || lo >= c->vl || hi <= 0) continue; /* this tap misses the chunk */
        cg_val m = gm_lanes(f, c, cg_const_i64(lo), cg_const_i64(hi));
        m = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", valid[ky].s, c->mty, m.s, c->mty);
        cg_val src =
            cg_add(f, cg_const_i64((ky * w->kw + kx) * ld + ix0 - off), cg_mulk(f, rel[ky], w->ow));
        cg_val v = gm_mload(f, c, gm_gep(f, c->ty, qrow, src, false), m);
        acc = gm_ev(f, "fadd %s %s, %s", c->vty, acc.s, v.s);
      }
    }
    gm_mstore(f, c, acc, p, keep);
  }
  cg_loop_end(f, iy);
  cg_loop_end(f, ci);
}
