/*
 * lower_conv_wgrad_dot.c — conv2d_grad_weight of a convolution with few taps per output channel
 * (K = cpg*kh*kw at most MAX_TAPS: fashion_cnn's one-channel first layer has 9), as dot
 * products over the pixels:
 *
 *   dW[o, q] = sum over images n and pixels p of  dY[n, o, p] * Col_n[q, p]
 *
 * As a GEMM (lower_window.c) the pixels are the depth of a product of 9 x 32, whose operand
 * dY^T had to be transposed in registers for every image: that packing took as long as the
 * multiplications. Here the pixels are the vector lanes. A tile of OT output channels keeps
 * OT x K vector accumulators; per vector of pixels it loads OT rows of dY and the K rows of the
 * image's Col (im2col, in L1) and does OT x K FMAs, no transposes. The lanes are summed once,
 * at the end, into dW.
 *
 * Parallel pieces are blocks of output channels of a group (dW's rows, disjoint), each summing
 * over the whole batch; the accumulators of a block live in a small buffer between images.
 * Only f32; pixels fill at least one vector.
 */
#include "codegen/cpu/conv_wgrad_dot.h"

#include <stdio.h>

/* Most taps, and accumulators a tile keeps: with 9 taps, two channels' 18 beside the 9 Col
 * vectors and a dY vector fit 32 registers (three channels' 27 spilled: 0.33 -> 0.39 ms). */
#define MAX_TAPS 16
#define MAX_ACC  20

bool cg_conv_wgrad_dot_fits(const cg_conv_geom *cv, int vector_bits) {
  return cv->t == DPC_F32 && cv->K <= MAX_TAPS && vector_bits >= 256 && cv->P >= vector_bits / 32;
}

dpc_status cg_lower_conv_wgrad_dot(cg_kernel *k, const cg_conv_geom *cv, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_window *w = &cv->w;
  gm_cfg c;
  gm_choose(&c, f->vector_bits, DPC_F32, 1, cv->P, 1); /* the vector types, and im2col's nr */
  int vl = c.vl;
  int64_t K = cv->K, nvec = cg_ceil_div(cv->P, vl);
  int64_t ot = MAX_ACC / K;
  if (ot > cv->opg) ot = cv->opg;
  /* blocks of whole tiles, until two cores have work */
  int64_t ob = cg_ceil_div(cv->opg, ot) * ot;
  while (!gm_pieces_shared(w->groups * cg_ceil_div(cv->opg, ob)) && ob > ot)
    ob = cg_ceil_div(cg_ceil_div(ob, 2), ot) * ot;
  int64_t nob = cg_ceil_div(cv->opg, ob);
  k->total = w->groups * nob;
  if (k->total == 0) return DPC_OK;
  int64_t ld = gm_pad_ld(&c, cg_ceil_div(cv->P, c.nr) * c.nr);
  cg_val dy = cg_arg_ptr(f, 0, DPC_F32), x = cg_arg_ptr(f, 1, DPC_F32),
         dw = cg_arg_ptr(f, 3, DPC_F32);
  cg_val col = gm_alloca(f, "float", K * ld);
  cg_val accb = gm_alloca(f, "float", ob * K * vl);
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val grp = gm_ev(f, "sdiv i64 %s, %lld", it.i.s, (long long)nob);
  cg_val o0 = cg_mulk(f, gm_ev(f, "srem i64 %s, %lld", it.i.s, (long long)nob), ob);
  cg_val ocur = gm_min(f, cg_const_i64(ob), gm_sub(f, cg_const_i64(cv->opg), o0));
  cg_loop z = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(ob * K));
  gm_vstore(f, &c, (cg_val){"zeroinitializer"}, gm_gep(f, "float", accb, cg_mulk(f, z.i, vl), true),
            vl * 4);
  cg_loop_end(f, z);
  cg_loop n = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cv->n));
  cg_val plane0 = cg_add(f, cg_mulk(f, n.i, w->c), cg_mulk(f, grp, cv->cpg));
  cg_im2col_taps(f, &c, cv, x, plane0, cg_const_i64(0), cg_const_i64(K), cg_plane_ok(&c, cv, w->oh),
                 cg_const_i64(0), cg_const_i64(w->oh), col, ld);
  /* dY rows of the block's channels in image n */
  cg_val dyrow0 =
      cg_mulk(f, cg_add(f, cg_add(f, cg_mulk(f, n.i, w->oc), cg_mulk(f, grp, cv->opg)), o0), cv->P);
  cg_loop tl = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, ocur, ot));
  cg_val t0 = cg_mulk(f, tl.i, ot);
  cg_val acc[MAX_ACC], slot[MAX_ACC], rowp[MAX_ACC], live[MAX_ACC];
  for (int64_t i = 0; i < ot; i++) {
    /* a channel past the block reads row t0 (masked off: it adds nothing) */
    live[i] = gm_ev(f, "icmp slt i64 %s, %s", cg_add(f, t0, cg_const_i64(i)).s, ocur.s);
    cg_val r =
        gm_ev(f, "select i1 %s, i64 %s, i64 %s", live[i].s, cg_add(f, t0, cg_const_i64(i)).s, t0.s);
    rowp[i] = gm_gep(f, "float", dy, cg_add(f, dyrow0, cg_mulk(f, r, cv->P)), true);
    for (int64_t q = 0; q < K; q++) {
      /* channel t0 + i's tap q in the block's buffer */
      slot[i * K + q] = gm_gep(
          f, "float", accb,
          cg_mulk(f, cg_add(f, cg_mulk(f, cg_add(f, t0, cg_const_i64(i)), K), cg_const_i64(q)), vl),
          true);
      acc[i * K + q] = cg_acc_new(f, c.vty, gm_vload(f, &c, slot[i * K + q], vl * 4));
    }
  }
  cg_loop v = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(nvec));
  cg_val p0 = cg_mulk(f, v.i, vl);
  /* the last vector's pixels past P: dY masked to zeros (Col is zero there too) */
  cg_val pm = gm_lanes(f, &c, cg_const_i64(0), gm_sub(f, cg_const_i64(cv->P), p0));
  cg_val cols[MAX_TAPS];
  for (int64_t q = 0; q < K; q++)
    cols[q] =
        gm_vload(f, &c, gm_gep(f, "float", col, cg_add(f, cg_const_i64(q * ld), p0), true), vl * 4);
  for (int64_t i = 0; i < ot; i++) {
    cg_val m = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", live[i].s, c.mty, pm.s, c.mty);
    cg_val g = gm_mload(f, &c, gm_gep(f, "float", rowp[i], p0, true), m);
    for (int64_t q = 0; q < K; q++) {
      cg_val a = cg_acc_get(f, acc[i * K + q], c.vty);
      cg_val prod = gm_ev(f, "fmul contract %s %s, %s", c.vty, g.s, cols[q].s);
      cg_acc_set(f, acc[i * K + q], c.vty, gm_ev(f, "fadd contract %s %s, %s", c.vty, a.s, prod.s));
    }
  }
  cg_loop_end(f, v);
  for (int64_t a = 0; a < ot * K; a++)
    gm_vstore(f, &c, cg_acc_get(f, acc[a], c.vty), slot[a], vl * 4);
  cg_loop_end(f, tl);
  cg_loop_end(f, n);
  /* each accumulator's lanes summed into dW[grp * opg + o0 + o, q] */
  cg_loop e = cg_loop_begin(f, cg_const_i64(0), cg_mul(f, ocur, cg_const_i64(K)));
  cg_val sacc = cg_acc_new(f, "float", cg_const(DPC_F32, 0));
  cg_loop l = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(vl));
  cg_val lane = gm_ev(f, "load float, float* %s",
                      gm_gep(f, "float", accb, cg_add(f, cg_mulk(f, e.i, vl), l.i), true).s);
  cg_acc_set(f, sacc, "float",
             gm_ev(f, "fadd float %s, %s", cg_acc_get(f, sacc, "float").s, lane.s));
  cg_loop_end(f, l);
  cg_val sum = cg_acc_get(f, sacc, "float");
  cg_val out = cg_add(f, cg_mulk(f, cg_add(f, cg_mulk(f, grp, cv->opg), o0), K), e.i);
  cg_line(f, "store float %s, float* %s", sum.s, gm_gep(f, "float", dw, out, true).s);
  cg_loop_end(f, e);
  cg_loop_end(f, it);
  return DPC_OK;
}
