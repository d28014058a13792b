/*
 * lower_pool2.c — max_pool2d with 2x2 windows at stride 2 (no padding, no dilation, even planes)
 * and its gradient, other max pools at column stride 1 or 2 and their gradient, a vector of
 * windows at a time. lower_pool.c hands these over.
 *
 * The windows tile the plane, so every input position is in exactly one. A chunk of vl windows
 * of an output row reads two vectors from each of its two input rows; their even and odd lanes
 * are the windows' four taps a b / c d. The forward's maximum and the gradient's argmax follow
 * the reference's scan, tap by tap in that order: a larger value, or a NaN (for the value: any
 * NaN replaces; for the argmax: the first NaN), takes over. So both match the reference to the
 * bit. The gradient puts dy + 0 (the reference's sum in double of that one term, which turns
 * -0 into +0) at each window's argmax and +0 at its three other taps, interleaving the lanes
 * back into the rows: every position of dx is written once, nothing is zeroed first.
 *
 * fashion_cnn's first pool at batch 128 (32 planes of 28x28 an image), one core: the gradient
 * 7.0 -> 1.2-1.4 ms, the forward 1.2 -> 0.6 ms; both now move their bytes at memory speed.
 *
 * Other max pools at column stride 1 or 2 (an Inception branch's 3x3 pool with padding 1,
 * ResNet's 3x3 stem pool at stride 2), any row stride, no dilation: a vector of vl windows of an
 * output row reads, per tap, vl consecutive positions of the tap's input row (stride 1: one
 * masked load) or their even lanes (stride 2: two), its lanes outside the input (the padding) or
 * past the row's windows turned off, and a row outside the input skipped. The taps are taken in
 * the reference's order, so the result is its to the bit. Their gradient is below.
 */
#include "codegen/cpu/pool2.h"
#include "codegen/cpu/gemm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Most vector chunks in an output row: the row's code is unrolled over them. */
#define MAX_CHUNKS 8

bool cg_pool2_fits(const dpc_window *w, dpc_dtype t, int vector_bits) {
  int vl = vector_bits / 32;
  return t == DPC_F32 && vl >= 4 && w->kh == 2 && w->kw == 2 && w->sh == 2 && w->sw == 2 &&
         w->dh == 1 && w->dw == 1 && !w->pt && !w->pl && !w->pb && !w->pr && w->h == 2 * w->oh &&
         w->w == 2 * w->ow && (w->ow + vl - 1) / vl <= MAX_CHUNKS;
}

/* The taps of chunk k of output row oy: t[0..4) = a b c d, vl windows each. Lanes past the
 * row's windows read nothing (zeros). */
static void taps(cg_fn *f, const gm_cfg *c, const dpc_window *w, cg_val xplane, cg_val oy,
                 int64_t k, cg_val t[4]) {
  int ev[64], od[64];
  for (int l = 0; l < c->vl; l++) ev[l] = 2 * l, od[l] = 2 * l + 1;
  cg_val row0 = cg_mul(f, cg_mul(f, oy, cg_const_i64(2)), cg_const_i64(w->w));
  for (int r = 0; r < 2; r++) {
    cg_val base = gm_gep(f, "float", xplane, cg_add(f, row0, cg_const_i64(r * w->w)), false);
    cg_val half[2];
    for (int h = 0; h < 2; h++) {
      int64_t col0 = 2 * k * c->vl + h * c->vl, left = w->w - col0;
      half[h] = left > 0 ? gm_mload(f, c, gm_gep(f, "float", base, cg_const_i64(col0), false),
                                    gm_lanes(f, c, cg_const_i64(0), cg_const_i64(left)))
                         : (cg_val){"zeroinitializer"};
    }
    t[2 * r] = gm_shuffle(f, c, half[0], half[1], ev);
    t[2 * r + 1] = gm_shuffle(f, c, half[0], half[1], od);
  }
}

/* x takes over from the running m: x > m, or x a NaN (and, for the argmax, m not one). */
static cg_val takes_over(cg_fn *f, const gm_cfg *c, cg_val x, cg_val m, bool first_nan) {
  cg_val gt = cg_op2(f, "fcmp ogt", c->vty, x, m), nan = cg_op2(f, "fcmp uno", c->vty, x, x);
  if (first_nan) nan = cg_op2(f, "and", c->mty, nan, cg_op2(f, "fcmp ord", c->vty, m, m));
  return cg_op2(f, "or", c->mty, gt, nan);
}

static cg_val vsel(cg_fn *f, const gm_cfg *c, cg_val k, cg_val a, cg_val b) {
  return gm_ev(f, "select %s %s, %s %s, %s %s", c->mty, k.s, c->vty, a.s, c->vty, b.s);
}

/* The vector of windows of output row oy from column ch*vl: their maximum. */
typedef cg_val (*chunk_fn)(cg_fn *f, const gm_cfg *c, const dpc_window *w, cg_val xplane, cg_val oy,
                           int64_t ch);

/* A max pool's kernel body: every output row of every plane, a vector of windows at a time. */
static dpc_status lower_rows(cg_kernel *k, const dpc_window *w, chunk_fn chunk) {
  cg_fn *f = k->f;
  gm_cfg c;
  gm_choose(&c, f->vector_bits, DPC_F32, 1, 1, 1); /* the vector types */
  cg_val xp = cg_arg_ptr(f, 0, DPC_F32), yp = cg_arg_ptr(f, 1, DPC_F32);
  k->total = w->n * w->c;
  cg_loop pl = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val xplane = gm_gep(f, "float", xp, cg_mul(f, pl.i, cg_const_i64(w->h * w->w)), false);
  cg_val yplane = gm_gep(f, "float", yp, cg_mul(f, pl.i, cg_const_i64(w->oh * w->ow)), false);
  cg_loop oy = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(w->oh));
  cg_val yrow = gm_gep(f, "float", yplane, cg_mul(f, oy.i, cg_const_i64(w->ow)), false);
  for (int64_t ch = 0; ch * c.vl < w->ow; ch++)
    gm_mstore(f, &c, chunk(f, &c, w, xplane, oy.i, ch),
              gm_gep(f, "float", yrow, cg_const_i64(ch * c.vl), false),
              gm_lanes(f, &c, cg_const_i64(0), cg_const_i64(w->ow - ch * c.vl)));
  cg_loop_end(f, oy);
  cg_loop_end(f, pl);
  return DPC_OK;
}

static cg_val chunk2(cg_fn *f, const gm_cfg *c, const dpc_window *w, cg_val xplane, cg_val oy,
                     int64_t ch) {
  cg_val t[4];
  taps(f, c, w, xplane, oy, ch, t);
  cg_val m = t[0];
  for (int j = 1; j < 4; j++) m = vsel(f, c, takes_over(f, c, t[j], m, false), t[j], m);
  return m;
}

dpc_status cg_lower_max_pool2(cg_kernel *k, const dpc_window *w) {
  return lower_rows(k, w, chunk2);
}

/* A max pool gradient's planes, dy, x -> dx: the vector types, then the loop over the planes
 * (one iteration each) opened, with this iteration's plane of each; close it with
 * cg_loop_end. */
typedef struct grad_planes {
  cg_val dy, x, dx;
} grad_planes;

static cg_loop grad_begin(cg_kernel *k, const dpc_window *w, gm_cfg *c, grad_planes *g) {
  cg_fn *f = k->f;
  gm_choose(c, f->vector_bits, DPC_F32, 1, 1, 1);
  cg_val dyp = cg_arg_ptr(f, 0, DPC_F32), xp = cg_arg_ptr(f, 1, DPC_F32),
         dxp = cg_arg_ptr(f, 2, DPC_F32);
  k->total = w->n * w->c;
  cg_loop pl = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val in_at = cg_mul(f, pl.i, cg_const_i64(w->h * w->w));
  g->x = gm_gep(f, "float", xp, in_at, false);
  g->dx = gm_gep(f, "float", dxp, in_at, false);
  g->dy = gm_gep(f, "float", dyp, cg_mul(f, pl.i, cg_const_i64(w->oh * w->ow)), false);
  return pl;
}

/* Most taps a window may have here: the tap loops are unrolled. */
#define MAX_TAPS 49

bool cg_pool_vec_fits(const dpc_window *w, dpc_dtype t, int vector_bits) {
  int vl = vector_bits / 32;
  return t == DPC_F32 && vl >= 4 && w->sh >= 1 && (w->sw == 1 || w->sw == 2) && w->dh == 1 &&
         w->dw == 1 && w->kh * w->kw <= MAX_TAPS && (w->ow + vl - 1) / vl <= MAX_CHUNKS &&
         (w->w + vl - 1) / vl <= 2 * MAX_CHUNKS;
}

/* Row iy when 0 <= iy < rows, else row 0 (a mapped address, read with every lane off); *in
 * says which. */
static cg_val row_or_first(cg_fn *f, cg_val iy, int64_t rows, cg_val *in) {
  *in = gm_ev(f, "and i1 %s, %s", gm_ev(f, "icmp sge i64 %s, 0", iy.s).s,
              gm_ev(f, "icmp slt i64 %s, %lld", iy.s, (long long)rows).s);
  return gm_ev(f, "select i1 %s, i64 %s, i64 0", in->s, iy.s);
}

/* Row r of a plane of `cols` columns. */
static cg_val plane_row(cg_fn *f, cg_val plane, cg_val r, int64_t cols) {
  return gm_gep(f, "float", plane, cg_mul(f, r, cg_const_i64(cols)), false);
}

/* The lanes on[] as a mask, turned off unless row_in; false when no lane is on. */
static bool tap_mask_const(cg_fn *f, const gm_cfg *c, const bool *on, cg_val row_in, cg_val *mask,
                           bool *any) {
  cg_val lanes = gm_lane_const(f, c, on, any);
  if (!*any) return false;
  *mask = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", row_in.s, c->mty, lanes.s, c->mty);
  return true;
}

/* The lanes l of a vector starting at column c0 with 0 <= c0 + l < cols and lane l's own
 * column (own0 + l) below own_cols, turned off unless `row_in`; false when no lane is on. */
static bool tap_mask(cg_fn *f, const gm_cfg *c, int64_t c0, int64_t cols, int64_t own0,
                     int64_t own_cols, cg_val row_in, cg_val *mask) {
  bool on[64], any;
  for (int l = 0; l < c->vl; l++) on[l] = own0 + l < own_cols && c0 + l >= 0 && c0 + l < cols;
  return tap_mask_const(f, c, on, row_in, mask, &any);
}

/* At stride 2: tap kx of the vl windows of output columns ch*vl.., input columns
 * 2*(ch*vl + l) + kx - pl, as the even lanes of two masked loads; *mask the lanes whose window
 * exists and whose column is inside the input (turned off unless row_in). False when none is. */
static bool taps_s2(cg_fn *f, const gm_cfg *c, const dpc_window *w, cg_val row, cg_val row_in,
                    int64_t ch, int64_t kx, cg_val *v, cg_val *mask) {
  int vl = c->vl, ev[64];
  int64_t b = 2 * ch * vl + kx - w->pl; /* lane 0's column */
  bool on[64], any_out, any[2];

  for (int l = 0; l < vl; l++) {
    int64_t col = b + 2 * l;
    on[l] = ch * vl + l < w->ow && col >= 0 && col < w->w;
    ev[l] = 2 * l;
  }
  if (!tap_mask_const(f, c, on, row_in, mask, &any_out)) return false;
  cg_val half[2];
  for (int h = 0; h < 2; h++) {
    bool ld[64];
    for (int j = 0; j < vl; j++) ld[j] = (j % 2 == 0) && on[(h * vl + j) / 2];
    cg_val m;
    tap_mask_const(f, c, ld, row_in, &m, &any[h]);
    half[h] = any[h] ? gm_mload(f, c, gm_gep(f, "float", row, cg_const_i64(b + h * vl), false), m)
                     : (cg_val){"zeroinitializer"};
  }
  *v = gm_shuffle(f, c, half[0], half[1], ev);
  return true;
}

/* The vl windows of output row oy from column ch*vl, their taps in the reference's order: their
 * maximum as the forward keeps it (a later NaN replaces an earlier one) or, with codes, where
 * in the plane (iy*W + ix) each window's argmax lies, as the gradient's reference finds it (the
 * first tap holding the maximum, or the first NaN; -1 for no tap inside), an ity vector. */
static cg_val windows_row(cg_fn *f, const gm_cfg *c, const dpc_window *w, cg_val xplane, cg_val oy,
                          int64_t ch, cg_val *codes) {
  cg_val iy[MAX_TAPS], rows[MAX_TAPS], in[MAX_TAPS];
  for (int64_t ky = 0; ky < w->kh; ky++) {
    iy[ky] = cg_add(f, cg_mul(f, oy, cg_const_i64(w->sh)), cg_const_i64(ky - w->pt));
    rows[ky] = plane_row(f, xplane, row_or_first(f, iy[ky], w->h, &in[ky]), w->w);
  }
  /* max starts at -inf, the identity of max: a window with no tap inside gives -inf */
  cg_val m = gm_splat(f, c, cg_const(DPC_F32, -INFINITY)), best = {{0}};
  char io[256];
  if (codes) { /* lane l's column is sw * l past lane 0's */
    best = gm_splat_i32(f, c, cg_const_i64(-1));
    gm_iota(c, (int)w->sw, io, sizeof io);
  }
  for (int64_t ky = 0; ky < w->kh; ky++)
    for (int64_t kx = 0; kx < w->kw; kx++) {
      /* lane l is output column ch*vl + l, reading input column ix0 + sw * l */
      int64_t ix0 = w->sw * ch * c->vl + kx - w->pl;
      cg_val mask, v;
      if (w->sw == 1) {
        if (!tap_mask(f, c, ix0, w->w, ch * c->vl, w->ow, in[ky], &mask)) continue;
        v = gm_mload(f, c, gm_gep(f, "float", rows[ky], cg_const_i64(ix0), false), mask);
      } else if (!taps_s2(f, c, w, rows[ky], in[ky], ch, kx, &v, &mask)) {
        continue;
      }
      cg_val take = takes_over(f, c, v, m, codes != NULL);
      if (codes) /* the first tap inside wins even when every value is -inf */
        take = cg_op2(f, "or", c->mty, take,
                      gm_ev(f, "icmp slt %s %s, zeroinitializer", c->ity, best.s));
      take = cg_op2(f, "and", c->mty, take, mask);
      m = vsel(f, c, take, v, m);
      if (!codes) continue;
      cg_val pos = gm_ev(
          f, "add %s %s, %s", c->ity, io,
          gm_splat_i32(f, c, cg_add(f, cg_mul(f, iy[ky], cg_const_i64(w->w)), cg_const_i64(ix0)))
              .s);
      best = gm_ev(f, "select %s %s, %s %s, %s %s", c->mty, take.s, c->ity, pos.s, c->ity, best.s);
    }
  if (codes) *codes = best;
  return m;
}

static cg_val chunk_vec(cg_fn *f, const gm_cfg *c, const dpc_window *w, cg_val xplane, cg_val oy,
                        int64_t ch) {
  return windows_row(f, c, w, xplane, oy, ch, NULL);
}

dpc_status cg_lower_max_pool_vec(cg_kernel *k, const dpc_window *w) {
  return lower_rows(k, w, chunk_vec);
}

/* Bytes of a plane's window codes (i32) the gradient keeps on the stack. */
#define CODES_BYTES (256 * 1024)

bool cg_pool_vec_grad_fits(const dpc_window *w, dpc_dtype t, int vector_bits) {
  return cg_pool_vec_fits(w, t, vector_bits) && w->oh * w->ow * 4 <= CODES_BYTES &&
         w->h * w->w <= INT32_MAX;
}

/* Tap kx's window of each lane of the vector of input columns ch*vl..: its code and dy from the
 * rows crow and dyrow, in *code and *g; *mask the lanes that are in such a window (and row_in).
 * At stride 1 the windows are consecutive; at stride 2 every other lane has one, lanes 2j and
 * 2j+1 (or 2j-1 and 2j) the same, so one load of the half it needs and a shuffle spread it.
 * False when no lane is in one. */
static bool tap_windows(cg_fn *f, const gm_cfg *c, const dpc_window *w, cg_val crow, cg_val dyrow,
                        int64_t ch, int64_t kx, cg_val row_in, cg_val *code, cg_val *g,
                        cg_val *mask) {
  int64_t base = ch * c->vl + w->pl - kx; /* lane l is window column (base + l) / sw */
  if (w->sw == 1) {
    if (!tap_mask(f, c, base, w->ow, ch * c->vl, w->w, row_in, mask)) return false;
    *code = gm_mload(f, c, gm_gep(f, "float", crow, cg_const_i64(base), false), *mask);
    *g = gm_mload(f, c, gm_gep(f, "float", dyrow, cg_const_i64(base), false), *mask);
    return true;
  }
  int64_t first = base >= 0 ? base / 2 : -((1 - base) / 2); /* floor(base / 2) */
  bool on[64], need[64] = {false}, any;
  int spread[64];
  for (int l = 0; l < c->vl; l++) {
    int64_t col = base + l;
    on[l] = ch * c->vl + l < w->w && col >= 0 && col % 2 == 0 && col / 2 < w->ow;
    spread[l] = on[l] ? (int)(col / 2 - first) : 0; /* lanes off read element 0 */
    if (on[l]) need[spread[l]] = true;
  }
  cg_val half;
  if (!tap_mask_const(f, c, on, row_in, mask, &any) ||
      !tap_mask_const(f, c, need, row_in, &half, &any))
    return false;
  cg_val cv = gm_mload(f, c, gm_gep(f, "float", crow, cg_const_i64(first), false), half);
  cg_val dv = gm_mload(f, c, gm_gep(f, "float", dyrow, cg_const_i64(first), false), half);
  *code = gm_shuffle(f, c, cv, cv, spread);
  *g = gm_shuffle(f, c, dv, dv, spread);
  return true;
}

/* Each window's code once (windows_row), then dx gathered a vector of positions at a time: the
 * windows covering position ix of row iy are ((iy + pt - ky) / sh, (ix + pl - kx) / sw) where
 * those divide, visited in the reference's order (ky, then kx ascending), dy added in double
 * where the window's code is the position, so every sum is the reference's. */
dpc_status cg_lower_max_pool_vec_grad(cg_kernel *k, const dpc_window *w) {
  cg_fn *f = k->f;
  gm_cfg c;
  grad_planes gp;
  char dty[32], io[256];
  /* the codes as floats' bits: loaded and stored with the float vectors' masked moves */
  cg_val codes = gm_alloca(f, "float", w->oh * w->ow);
  cg_loop pl = grad_begin(k, w, &c, &gp);
  snprintf(dty, sizeof dty, "<%d x double>", c.vl);
  gm_iota(&c, 1, io, sizeof io);
  cg_val xplane = gp.x, dxplane = gp.dx, dyplane = gp.dy;
  cg_loop oy = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(w->oh));
  cg_val crow = gm_gep(f, "float", codes, cg_mul(f, oy.i, cg_const_i64(w->ow)), false);
  for (int64_t ch = 0; ch * c.vl < w->ow; ch++) {
    cg_val code;
    windows_row(f, &c, w, xplane, oy.i, ch, &code);
    gm_mstore(f, &c, gm_ev(f, "bitcast %s %s to %s", c.ity, code.s, c.vty),
              gm_gep(f, "float", crow, cg_const_i64(ch * c.vl), false),
              gm_lanes(f, &c, cg_const_i64(0), cg_const_i64(w->ow - ch * c.vl)));
  }
  cg_loop_end(f, oy);
  /* input rows a block of sh at a time: row iyb*sh + r is in the windows of tap rows ky with
   * (r + pt - ky) divisible by sh, window row iyb + (r + pt - ky) / sh; the others are never
   * generated (at stride 2, half the taps) */
  int64_t sh = w->sh, rest = w->h % sh;
  cg_loop ib = cg_loop_begin(f, cg_const_i64(0), cg_const_i64((w->h + sh - 1) / sh));
  for (int64_t r = 0; r < sh; r++) {
    cg_val iy = cg_add(f, cg_mul(f, ib.i, cg_const_i64(sh)), cg_const_i64(r));
    /* a last block short of sh rows: this row's stores turned off */
    cg_val row_ok = rest && r >= rest ? gm_ev(f, "icmp slt i64 %s, %lld", iy.s, (long long)w->h)
                                      : (cg_val){"true"};
    cg_val dxrow = gm_gep(f, "float", dxplane, cg_mul(f, iy, cg_const_i64(w->w)), false);
    cg_val rowpos = cg_mul(f, iy, cg_const_i64(w->w));
    cg_val crows[MAX_TAPS], dyrows[MAX_TAPS], in[MAX_TAPS];
    bool tap_row[MAX_TAPS];
    for (int64_t ky = 0; ky < w->kh; ky++) {
      int64_t num = r + w->pt - ky;
      tap_row[ky] = ((num % sh) + sh) % sh == 0;
      if (!tap_row[ky]) continue;
      cg_val wr = row_or_first(f, cg_add(f, ib.i, cg_const_i64(num / sh)), w->oh, &in[ky]);
      in[ky] = gm_ev(f, "and i1 %s, %s", in[ky].s, row_ok.s);
      crows[ky] = plane_row(f, codes, wr, w->ow);
      dyrows[ky] = plane_row(f, dyplane, wr, w->ow);
    }
    for (int64_t ch = 0; ch * c.vl < w->w; ch++) {
      cg_val pos = gm_ev(f, "add %s %s, %s", c.ity, io,
                         gm_splat_i32(f, &c, cg_add(f, rowpos, cg_const_i64(ch * c.vl))).s);
      cg_val acc = {"zeroinitializer"};
      for (int64_t ky = 0; ky < w->kh; ky++)
        for (int64_t kx = 0; tap_row[ky] && kx < w->kw; kx++) {
          cg_val cv, g, mask;
          if (!tap_windows(f, &c, w, crows[ky], dyrows[ky], ch, kx, in[ky], &cv, &g, &mask))
            continue;
          cg_val eq = gm_ev(f, "icmp eq %s %s, %s", c.ity,
                            gm_ev(f, "bitcast %s %s to %s", c.vty, cv.s, c.ity).s, pos.s);
          /* a select, not a multiply: dy of a window whose maximum is elsewhere may be NaN */
          cg_val add = gm_ev(f, "select %s %s, %s %s, %s zeroinitializer", c.mty,
                             cg_op2(f, "and", c.mty, eq, mask).s, dty,
                             gm_ev(f, "fpext %s %s to %s", c.vty, g.s, dty).s, dty);
          acc = cg_op2(f, "fadd", dty, acc, add);
        }
      cg_val lanes = gm_lanes(f, &c, cg_const_i64(0), cg_const_i64(w->w - ch * c.vl));
      lanes = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", row_ok.s, c.mty, lanes.s, c.mty);
      gm_mstore(f, &c, gm_ev(f, "fptrunc %s %s to %s", dty, acc.s, c.vty),
                gm_gep(f, "float", dxrow, cg_const_i64(ch * c.vl), false), lanes);
    }
  }
  cg_loop_end(f, ib);
  cg_loop_end(f, pl);
  return DPC_OK;
}

dpc_status cg_lower_max_pool2_grad(cg_kernel *k, const dpc_window *w) {
  cg_fn *f = k->f;
  gm_cfg c;
  grad_planes gp;
  cg_loop pl = grad_begin(k, w, &c, &gp);
  cg_val xplane = gp.x, dxplane = gp.dx, dyplane = gp.dy;
  /* a's and b's lanes alternately: the low half, then the high */
  int lo[64], hi[64];
  for (int l = 0; l < c.vl; l++) {
    lo[l] = (l % 2 ? c.vl : 0) + l / 2;
    hi[l] = (l % 2 ? c.vl : 0) + c.vl / 2 + l / 2;
  }
  cg_loop oy = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(w->oh));
  cg_val dyrow = gm_gep(f, "float", dyplane, cg_mul(f, oy.i, cg_const_i64(w->ow)), false);
  cg_val dxrow0 = gm_gep(f, "float", dxplane,
                         cg_mul(f, cg_mul(f, oy.i, cg_const_i64(2)), cg_const_i64(w->w)), false);
  for (int64_t ch = 0; ch * c.vl < w->ow; ch++) {
    cg_val t[4];
    taps(f, &c, w, xplane, oy.i, ch, t);
    /* at[j]: the lanes whose argmax is tap j so far; a tap that takes over takes its lanes
     * from the taps before it */
    cg_val m = t[0], at[4];
    at[0] = gm_lanes(f, &c, cg_const_i64(0), cg_const_i64(c.vl));
    for (int j = 1; j < 4; j++) {
      cg_val won = takes_over(f, &c, t[j], m, true);
      m = vsel(f, &c, won, t[j], m);
      for (int q = 0; q < j; q++)
        at[q] = gm_ev(f, "select %s %s, %s zeroinitializer, %s %s", c.mty, won.s, c.mty, c.mty,
                      at[q].s);
      at[j] = won;
    }
    cg_val dy = gm_mload(f, &c, gm_gep(f, "float", dyrow, cg_const_i64(ch * c.vl), false),
                         gm_lanes(f, &c, cg_const_i64(0), cg_const_i64(w->ow - ch * c.vl)));
    cg_val g = cg_op2(f, "fadd", c.vty, dy, (cg_val){"zeroinitializer"}); /* -0 + 0 = +0 */
    cg_val gt[4];
    for (int j = 0; j < 4; j++) gt[j] = vsel(f, &c, at[j], g, (cg_val){"zeroinitializer"});
    for (int r = 0; r < 2; r++) {
      cg_val row = gm_gep(f, "float", dxrow0, cg_const_i64(r * w->w), false);
      for (int h = 0; h < 2; h++) {
        int64_t col0 = 2 * ch * c.vl + h * c.vl, cols = w->w - col0;
        if (cols <= 0) continue;
        gm_mstore(f, &c, gm_shuffle(f, &c, gt[2 * r], gt[2 * r + 1], h ? hi : lo),
                  gm_gep(f, "float", row, cg_const_i64(col0), false),
                  gm_lanes(f, &c, cg_const_i64(0), cg_const_i64(cols)));
      }
    }
  }
  cg_loop_end(f, oy);
  cg_loop_end(f, pl);
  return DPC_OK;
}
