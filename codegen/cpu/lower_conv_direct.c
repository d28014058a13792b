/*
 * lower_conv_direct.c — LLVM IR for conv2d computed directly, for depthwise and grouped
 * convolutions with few output channels per group.
 *
 * As im2col + GEMM (lower_window.c), a depthwise 3x3 convolution is a GEMM per channel with
 * M = 1 output channel, K = 9 taps: the micro-tile is almost all padding and the Col buffer
 * costs more to build than the product. Here each output row of each output channel is
 * computed in vector registers instead, a vector of output columns at a time:
 *
 *   y[o, oy, ox..ox+vl) = sum over ci, ky, kx of  w[o, ci, ky, kx] * x[ci, iy, ox*sw + off ..]
 *
 * (iy = oy*sh + ky*dh - pt, off = kx*dw - pl). The taps and the column chunks are unrolled at
 * generation time, so the masks for the left and right padding are constants; a padded input
 * row is skipped by a branch. Stride 2 loads two vectors of input and keeps the even lanes.
 *
 * Parallel iterations are (image, output channel, block of output rows), a block at least
 * MIN_COLS outputs (a whole 14x14 plane; three rows of 112): at batch 1 a MobileNet layer still
 * has hundreds, so both cores get work, and a small plane's set-up (the taps splatted, the
 * epilogue's loop) is paid once. The fusion group's epilogue (bias, ReLU6, SiLU...) runs over
 * the block just stored, while it is in L1.
 *
 * Only f32, strides 1 and 2, rows of at most MAX_CHUNKS vectors: anything else keeps the GEMM.
 */
#include "codegen/cpu/conv_direct.h"
#include "codegen/cpu/gemm.h"

#include <stdio.h>
#include <string.h>

/* Most output channels per group computed directly: a GEMM tile has at least this many rows,
 * so with fewer most of it would be padding. */
#define MAX_OPG 8
/* Most vectors of output columns one row unrolls into (7 for a 112-wide row of 16 lanes). */
#define MAX_CHUNKS 8
/* Most vectors of a flat plane (lower_flat) and most masked loads it unrolls: 13 x 9 for a
 * 14x14 plane of 3x3 taps. */
#define FLAT_VECTORS 32
#define FLAT_UNROLL  256
/* Output columns a parallel piece computes at least (whole rows, within one channel). */
#define MIN_COLS 256
/* Most taps per input channel the kernel unrolls. */
#define MAX_TAPS 49

bool cg_conv_direct_fits(const dpc_window *w, dpc_dtype t, int vector_bits) {
  if (t != DPC_F32 || w->groups < 2) return false;
  int64_t opg = w->oc / w->groups, vl = vector_bits / 32;
  if (opg > MAX_OPG || w->sw < 1 || w->sw > 2 || w->kh * w->kw > MAX_TAPS) return false;
  return w->ow > 0 && (w->ow + vl - 1) / vl <= MAX_CHUNKS;
}

/* vl input columns from column col (a constant) of the row at `row`, zeros where they fall
 * outside [0, w): a plain load inside the row, a masked one at its edges. */
static cg_val row_load(cg_fn *f, const gm_cfg *c, cg_val row, int64_t col, int64_t w) {
  int64_t lo = -col, hi = w - col;
  if (hi <= 0 || lo >= c->vl) return (cg_val){"zeroinitializer"};
  /* masked lanes still need a mapped address: point them at the row's first element */
  if (lo <= 0 && hi >= c->vl)
    return gm_vload(f, c, gm_gep(f, "float", row, cg_const_i64(col), false), 4);
  cg_val m = gm_lanes(f, c, cg_const_i64(lo), cg_const_i64(hi));
  return gm_mload(f, c, gm_gep(f, "float", row, cg_const_i64(col), false), m);
}

/* The input vector of output chunk ch under tap offset off: lanes ox = ch*vl + l read columns
 * ox*sw + off. */
static cg_val tap_load(cg_fn *f, const gm_cfg *c, const dpc_window *w, cg_val row, int64_t ch,
                       int64_t off) {
  int64_t col = ch * c->vl * w->sw + off;
  if (w->sw == 1) return row_load(f, c, row, col, w->w);
  cg_val a = row_load(f, c, row, col, w->w), b = row_load(f, c, row, col + c->vl, w->w);
  if (!strcmp(a.s, "zeroinitializer") && !strcmp(b.s, "zeroinitializer")) return a;
  char idx[512];
  int n = snprintf(idx, sizeof idx, "<");
  for (int l = 0; l < c->vl; l++)
    n += snprintf(idx + n, sizeof idx - (size_t)n, "%si32 %d", l ? ", " : "", 2 * l);
  snprintf(idx + n, sizeof idx - (size_t)n, ">");
  return gm_ev(f, "shufflevector %s %s, %s %s, %s %s", c->vty, a.s, c->vty, b.s, c->ity, idx);
}

/* Lanes of vector v of a flat output plane that tap (ky, kx) reads inside the image (on[]);
 * *all / *none say whether every lane or no lane is on. */
static void flat_mask(const gm_cfg *c, const dpc_window *w, int64_t v, int64_t ky, int64_t kx,
                      bool *on, bool *all, bool *none) {
  *all = true;
  *none = true;
  for (int64_t l = 0; l < c->vl; l++) {
    int64_t p = v * c->vl + l, iy = p / w->ow + ky * w->dh - w->pt,
            ix = p % w->ow + kx * w->dw - w->pl;
    on[l] = p < w->oh * w->ow && iy >= 0 && iy < w->h && ix >= 0 && ix < w->w;
    *all = *all && on[l];
    *none = *none && !on[l];
  }
}

/* A small plane at stride 1 with the output the input's size (7x7, 14x14 "same"
 * convolutions): rows of 7 or 14 would leave most of a vector's lanes idle, so the plane is
 * taken flat, as P = oh*ow pixels in ceil(P / vl) vectors. Tap (ky, kx) of pixel p reads the
 * input plane at p + (ky*dh - pt)*w + kx*dw - pl, masked where that crosses the image's edge:
 * the masks are constants of the unrolled vectors and taps (as im2col_plane's in
 * lower_window.c). One parallel iteration per (image, output channel). */
static dpc_status lower_flat(cg_kernel *k, const gm_cfg *c, const dpc_window *w, int64_t n,
                             int64_t nvec, dpc_diag *d) {
  cg_fn *f = k->f;
  int64_t cpg = w->c / w->groups, opg = w->oc / w->groups, kk = w->kh * w->kw;
  int64_t plane = w->h * w->w, pout = w->oh * w->ow;
  k->total = n * w->oc;
  cg_val x = cg_arg_ptr(f, 0, DPC_F32), wt = cg_arg_ptr(f, 1, DPC_F32),
         y = cg_arg_ptr(f, cg_out_arg(f), DPC_F32);
  cg_val acc[FLAT_VECTORS];
  for (int64_t v = 0; v < nvec; v++) acc[v] = cg_acc_new(f, c->vty, (cg_val){"zeroinitializer"});
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"}); /* image * oc + o */
  cg_val o = gm_ev(f, "srem i64 %s, %lld", it.i.s, (long long)w->oc);
  cg_val img = gm_ev(f, "sdiv i64 %s, %lld", it.i.s, (long long)w->oc);
  cg_val grp = gm_ev(f, "sdiv i64 %s, %lld", o.s, (long long)opg);
  cg_val plane0 = cg_add(f, cg_mul(f, img, cg_const_i64(w->c)), cg_mul(f, grp, cg_const_i64(cpg)));
  for (int64_t v = 0; v < nvec; v++) cg_acc_set(f, acc[v], c->vty, (cg_val){"zeroinitializer"});
  cg_loop ci = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cpg));
  cg_val xp = gm_gep(f, "float", x, cg_mul(f, cg_add(f, plane0, ci.i), cg_const_i64(plane)), true);
  cg_val wbase = cg_mul(f, cg_add(f, cg_mul(f, o, cg_const_i64(cpg)), ci.i), cg_const_i64(kk));
  cg_val a[FLAT_VECTORS];
  for (int64_t v = 0; v < nvec; v++) a[v] = cg_acc_get(f, acc[v], c->vty);
  bool on[64];
  for (int64_t ky = 0; ky < w->kh; ky++)
    for (int64_t kx = 0; kx < w->kw; kx++) {
      cg_val ws =
          gm_splat(f, c, cg_load(f, wt, DPC_F32, cg_add(f, wbase, cg_const_i64(ky * w->kw + kx))));
      int64_t shift = (ky * w->dh - w->pt) * w->w + kx * w->dw - w->pl;
      for (int64_t v = 0; v < nvec; v++) {
        bool all, none, any;
        flat_mask(c, w, v, ky, kx, on, &all, &none);
        if (none) continue;
        cg_val p = gm_gep(f, "float", xp, cg_const_i64(v * c->vl + shift), false);
        cg_val in = all ? gm_vload(f, c, p, 4) : gm_mload(f, c, p, gm_lane_const(f, c, on, &any));
        cg_val prod = gm_ev(f, "fmul contract %s %s, %s", c->vty, ws.s, in.s);
        a[v] = gm_ev(f, "fadd contract %s %s, %s", c->vty, a[v].s, prod.s);
      }
    }
  for (int64_t v = 0; v < nvec; v++) cg_acc_set(f, acc[v], c->vty, a[v]);
  cg_loop_end(f, ci);
  cg_val yp = gm_gep(f, "float", y, cg_mul(f, it.i, cg_const_i64(pout)), true);
  for (int64_t v = 0; v < nvec; v++) {
    cg_val val = cg_acc_get(f, acc[v], c->vty);
    cg_val p = gm_gep(f, "float", yp, cg_const_i64(v * c->vl), false);
    if ((v + 1) * c->vl <= pout)
      gm_vstore(f, c, val, p, 4);
    else
      gm_mstore(f, c, val, p, gm_lanes(f, c, cg_const_i64(0), cg_const_i64(pout - v * c->vl)));
  }
  dpc_status st = cg_epilogue_block(f, 1, it.i, cg_add(f, it.i, cg_const_i64(1)), cg_const_i64(0),
                                    cg_const_i64(pout), d);
  if (st) return st;
  cg_loop_end(f, it);
  return DPC_OK;
}

dpc_status cg_lower_conv_direct(cg_kernel *k, const dpc_window *w, dpc_diag *d) {
  cg_fn *f = k->f;
  gm_cfg c;
  gm_choose(&c, f->vector_bits, DPC_F32, 1, w->ow, 1); /* only the vector types are used */
  int64_t n = f->g->values[f->g->ids[f->g->nodes[f->node].in]].shape.d[0];
  int64_t cpg = w->c / w->groups, opg = w->oc / w->groups, kk = w->kh * w->kw;
  int64_t plane = w->h * w->w, nch = (w->ow + c.vl - 1) / c.vl;
  int64_t nvec = (w->oh * w->ow + c.vl - 1) / c.vl;
  if (w->sh == 1 && w->sw == 1 && w->oh == w->h && w->ow == w->w && nvec < w->oh * nch &&
      nvec <= FLAT_VECTORS && nvec * kk <= FLAT_UNROLL)
    return lower_flat(k, &c, w, n, nvec, d);
  /* output rows per piece: enough columns to amortise the piece's set-up and epilogue call */
  int64_t rb = (MIN_COLS + w->ow - 1) / w->ow;
  if (rb > w->oh) rb = w->oh;
  int64_t nblk = (w->oh + rb - 1) / rb;
  k->total = n * w->oc * nblk;
  if (k->total == 0) return DPC_OK;
  cg_val x = cg_arg_ptr(f, 0, DPC_F32), wt = cg_arg_ptr(f, 1, DPC_F32),
         y = cg_arg_ptr(f, cg_out_arg(f), DPC_F32);
  cg_val acc[MAX_CHUNKS];
  for (int64_t ch = 0; ch < nch; ch++) acc[ch] = cg_acc_new(f, c.vty, (cg_val){"zeroinitializer"});
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  /* it = (image * oc + o) * nblk + row block */
  cg_val blk = gm_ev(f, "srem i64 %s, %lld", it.i.s, (long long)nblk);
  cg_val row = gm_ev(f, "sdiv i64 %s, %lld", it.i.s, (long long)nblk); /* image * oc + o */
  cg_val o = gm_ev(f, "srem i64 %s, %lld", row.s, (long long)w->oc);
  cg_val img = gm_ev(f, "sdiv i64 %s, %lld", row.s, (long long)w->oc);
  cg_val grp = gm_ev(f, "sdiv i64 %s, %lld", o.s, (long long)opg);
  cg_val plane0 = cg_add(f, cg_mul(f, img, cg_const_i64(w->c)), cg_mul(f, grp, cg_const_i64(cpg)));
  cg_val oy0 = cg_mul(f, blk, cg_const_i64(rb));
  cg_val oy1 = gm_min(f, cg_add(f, oy0, cg_const_i64(rb)), cg_const_i64(w->oh));
  /* depthwise: the channel's taps, splatted once for all the piece's rows (y may alias w as
   * far as LLVM knows, so it would not hoist them itself) */
  cg_val pre[MAX_TAPS];
  if (cpg == 1)
    for (int64_t t = 0; t < kk; t++)
      pre[t] = gm_splat(
          f, &c,
          cg_load(f, wt, DPC_F32, cg_add(f, cg_mul(f, o, cg_const_i64(kk)), cg_const_i64(t))));
  cg_loop oyl = cg_loop_begin(f, oy0, oy1);
  cg_val oy = oyl.i;
  for (int64_t ch = 0; ch < nch; ch++) cg_acc_set(f, acc[ch], c.vty, (cg_val){"zeroinitializer"});
  cg_loop ci = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cpg));
  cg_val xplane = cg_mul(f, cg_add(f, plane0, ci.i), cg_const_i64(plane));
  cg_val wbase = cg_mul(f, cg_add(f, cg_mul(f, o, cg_const_i64(cpg)), ci.i), cg_const_i64(kk));
  for (int64_t ky = 0; ky < w->kh; ky++) {
    cg_val iy = cg_add(f, cg_mul(f, oy, cg_const_i64(w->sh)), cg_const_i64(ky * w->dh - w->pt));
    cg_val inside = gm_ev(f, "icmp ult i64 %s, %lld", iy.s, (long long)w->h); /* 0 <= iy < h */
    uint32_t id = gm_if(f, inside);
    cg_val rowp = gm_gep(f, "float", x, cg_add(f, xplane, cg_mul(f, iy, cg_const_i64(w->w))), true);
    cg_val a[MAX_CHUNKS];
    for (int64_t ch = 0; ch < nch; ch++) a[ch] = cg_acc_get(f, acc[ch], c.vty);
    for (int64_t kx = 0; kx < w->kw; kx++) {
      cg_val ws =
          cpg == 1
              ? pre[ky * w->kw + kx]
              : gm_splat(f, &c,
                         cg_load(f, wt, DPC_F32, cg_add(f, wbase, cg_const_i64(ky * w->kw + kx))));
      for (int64_t ch = 0; ch < nch; ch++) {
        cg_val in = tap_load(f, &c, w, rowp, ch, kx * w->dw - w->pl);
        if (!strcmp(in.s, "zeroinitializer")) continue;
        cg_val p = gm_ev(f, "fmul contract %s %s, %s", c.vty, ws.s, in.s);
        a[ch] = gm_ev(f, "fadd contract %s %s, %s", c.vty, a[ch].s, p.s);
      }
    }
    for (int64_t ch = 0; ch < nch; ch++) cg_acc_set(f, acc[ch], c.vty, a[ch]);
    gm_endif(f, id);
  }
  cg_loop_end(f, ci);
  cg_val yrow = gm_gep(
      f, "float", y,
      cg_add(f, cg_mul(f, row, cg_const_i64(w->oh * w->ow)), cg_mul(f, oy, cg_const_i64(w->ow))),
      true);
  for (int64_t ch = 0; ch < nch; ch++) {
    cg_val v = cg_acc_get(f, acc[ch], c.vty);
    cg_val p = gm_gep(f, "float", yrow, cg_const_i64(ch * c.vl), false);
    if ((ch + 1) * c.vl <= w->ow)
      gm_vstore(f, &c, v, p, 4);
    else
      gm_mstore(f, &c, v, p, gm_lanes(f, &c, cg_const_i64(0), cg_const_i64(w->ow - ch * c.vl)));
  }
  cg_loop_end(f, oyl);
  /* fused: the epilogue on the piece's rows, y seen as [n * oc, oh * ow] */
  dpc_status st = cg_epilogue_block(f, 1, row, cg_add(f, row, cg_const_i64(1)),
                                    cg_mul(f, oy0, cg_const_i64(w->ow)),
                                    cg_mul(f, oy1, cg_const_i64(w->ow)), d);
  if (st) return st;
  cg_loop_end(f, it);
  return DPC_OK;
}
