/*
 * lower_conv_winograd_dw.c — conv2d_grad_weight of a Winograd-shaped convolution (3x3, stride 1,
 * padding 1) as Winograd's F(3x3, 2x2), sharing the forward's input transform
 * (lower_conv_winograd.c, conv_winograd_int.h).
 *
 * dW[o][i] (3x3) sums, over images and 2x2 tiles of dy, the correlation of the tile's 4x4 input
 * patch (the forward's) with the tile's 2x2 of dy: Winograd's F(3x3, 2x2), with the same B as
 * the forward and
 *
 *   dW = A3^T [ sum over tiles (G2 g G2^T) (.) (B^T d B) ] A3,
 *   G2 = [1 0; 1/2 1/2; 1/2 -1/2; 0 1],  A3^T = [1 1 1 0; 0 1 -1 0; 0 1 1 -1].
 *
 * The sum over tiles is 16 GEMMs, M[xi][o, i] += U[xi][o, tiles] . V[xi][i, tiles]^T, with U the
 * transformed dy and V the transformed input (input_transform, as the forward's). A piece is a
 * block of output channels, summing over every image and tile: it transforms dy for its channels
 * and the input for all of them. Cutting the input channels instead halved the GEMMs' width
 * (fashion_cnn's second layer: 70 GFLOP/s against 110).
 *
 * One thread, batch 8: ResNet-18's 3x3 layers 1, 2 and 3 took 19.4, 17.9 and 17.1 ms as im2col +
 * GEMM and take 14.6, 11.3 and 12.2 (oneDNN 17.9, 16.2, 16.5; docs/benchmarks.md). */
#include "codegen/cpu/conv_im2col.h"
#include "codegen/cpu/conv_winograd_int.h"

#include <stdio.h>
#include <string.h>

#define DW_BYTES (1024 * 1024)     /* U and V of one block of tiles */
#define DW_M_MAX (2 * 1024 * 1024) /* the sums M */

typedef struct wdw {
  int64_t nob, ob;       /* output-channel blocks, channels each */
  int64_t ni, nty;       /* images a block of tiles takes (whole planes) or, with one, tile rows */
  int64_t ld, ldm;       /* row stride of U and V (tiles), of M (channels) */
  int64_t uxs, vxs, mxs; /* floats between positions' matrices (cg_wg_xi_stride) */
} wdw;

static bool dw_blocks(const gm_cfg *c, const dpc_window *w, int64_t n, wdw *b) {
  int64_t ci = w->c, co = w->oc, th = cg_ceil_div(w->oh, 2), tw = cg_ceil_div(w->ow, 2);
  /* two blocks of output channels for two cores, more while M is over its budget */
  b->ldm = gm_pad_ld(c, cg_ceil_div(ci, c->nr) * c->nr);
  b->nob = co % 2 == 0 && co >= 2 * MIN_CHANNELS ? 2 : 1;
  for (;;) {
    b->ob = co / b->nob;
    if (XI * 4 * b->ob * b->ldm <= DW_M_MAX) break;
    int64_t next = b->nob * 2;
    if (co % next || co / next < MIN_CHANNELS) return false;
    b->nob = next;
  }
  int64_t per_row = XI * 4 * tw * (b->ob + ci); /* bytes of U and V per tile row */
  b->ni = 1;
  b->nty = DW_BYTES / per_row;
  if (b->nty < 1) return false;
  if (b->nty >= th) { /* whole planes: as many images as fit */
    b->nty = th;
    b->ni = DW_BYTES / (per_row * th);
    if (b->ni > n) b->ni = n;
    if (b->ni < 1) b->ni = 1;
  }
  b->ld = gm_pad_ld(c, cg_ceil_div(b->ni * b->nty * tw, c->vl) * c->vl);
  b->uxs = cg_wg_xi_stride(b->ob * b->ld);
  b->vxs = cg_wg_xi_stride(ci * b->ld);
  b->mxs = cg_wg_xi_stride(b->ob * b->ldm);
  return true;
}

bool cg_conv_winograd_grad_weight_fits(const dpc_window *w, dpc_dtype t, int vector_bits) {
  if (!cg_conv_winograd_fits(w, t, vector_bits)) return false;
  gm_cfg c;
  gm_choose(&c, vector_bits, DPC_F32, w->oc, w->c, 64);
  wdw b;
  return dw_blocks(&c, w, 1, &b);
}

/* U[xi][o][col0 + r * tw + tile] = (G2 g G2^T)[xi] for dy's tile rows [ty0, ty0 + nrt) of every
 * output channel of the image whose first plane is yplane0: a tile's 2x2 are the even and odd
 * lanes of a load from each of its two rows. */
static void dy_transform(cg_fn *f, const gm_cfg *c, const dpc_window *w, int64_t tw, int64_t nco,
                         cg_val dy, cg_val yplane0, cg_val ty0, cg_val nrt, cg_val u, int64_t ld,
                         int64_t uxs, cg_val col0) {
  int vl = c->vl;
  int ev[64], od[64];
  for (int l = 0; l < vl; l++) ev[l] = 2 * l, od[l] = 2 * l + 1;
  cg_loop o = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(nco));
  cg_val plane = gm_gep(f, "float", dy,
                        cg_mul(f, cg_add(f, yplane0, o.i), cg_const_i64(w->oh * w->ow)), false);
  cg_loop r = cg_loop_begin(f, cg_const_i64(0), nrt);
  cg_val oy = cg_mul(f, cg_add(f, ty0, r.i), cg_const_i64(2));
  cg_val rows[2], valid[2];
  for (int a = 0; a < 2; a++) {
    cg_val iy = cg_add(f, oy, cg_const_i64(a));
    valid[a] = gm_ev(f, "icmp slt i64 %s, %lld", iy.s, (long long)w->oh);
    cg_val at = gm_ev(f, "select i1 %s, i64 %s, i64 %s", valid[a].s, iy.s, oy.s);
    rows[a] = gm_gep(f, "float", plane, cg_mul(f, at, cg_const_i64(w->ow)), false);
  }
  cg_val dst = gm_gep(f, "float", u,
                      cg_add(f, cg_add(f, cg_mul(f, o.i, cg_const_i64(ld)), col0),
                             cg_mul(f, r.i, cg_const_i64(tw))),
                      false);
  for (int64_t k = 0; k * vl < tw; k++) {
    cg_val g[2][2];
    for (int a = 0; a < 2; a++) {
      cg_val v[2];
      for (int q = 0; q < 2; q++) {
        bool on[64], any;
        for (int l = 0; l < vl; l++) on[l] = 2 * k * vl + q * vl + l < w->ow;
        cg_val m = gm_lane_const(f, c, on, &any);
        if (!any) {
          v[q] = (cg_val){"zeroinitializer"};
          continue;
        }
        m = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", valid[a].s, c->mty, m.s, c->mty);
        v[q] = gm_mload(f, c, gm_gep(f, "float", rows[a], cg_const_i64(2 * k * vl + q * vl), false),
                        m);
      }
      g[a][0] = gm_shuffle(f, c, v[0], v[1], ev);
      g[a][1] = gm_shuffle(f, c, v[0], v[1], od);
    }
    cg_val s[2][4];
    for (int a = 0; a < 2; a++) { /* g G2^T */
      s[a][0] = g[a][0];
      s[a][1] = cg_wg_vhalf(f, c, cg_wg_vadd(f, c, g[a][0], g[a][1]));
      s[a][2] = cg_wg_vhalf(f, c, cg_wg_vsub(f, c, g[a][0], g[a][1]));
      s[a][3] = g[a][1];
    }
    bool on[64], any;
    for (int l = 0; l < vl; l++) on[l] = k * vl + l < tw;
    cg_val keep = gm_lane_const(f, c, on, &any);
    for (int j = 0; j < 4; j++) { /* G2 (g G2^T) */
      cg_val uu[4] = {s[0][j], cg_wg_vhalf(f, c, cg_wg_vadd(f, c, s[0][j], s[1][j])),
                      cg_wg_vhalf(f, c, cg_wg_vsub(f, c, s[0][j], s[1][j])), s[1][j]};
      for (int i = 0; i < 4; i++) {
        int64_t off = (int64_t)(4 * i + j) * uxs + k * vl;
        gm_mstore(f, c, uu[i], gm_gep(f, "float", dst, cg_const_i64(off), false), keep);
      }
    }
  }
  cg_loop_end(f, r);
  cg_loop_end(f, o);
}

/* dW[o][c0 + i] = A3^T M[o][i] A3 for the block's channels, a vector of them at a time, each
 * filter's nine taps scattered 9 apart. */
static void dw_output(cg_fn *f, const gm_cfg *c, const dpc_window *w, const wdw *b, cg_val mbuf,
                      cg_val dw, cg_val o0) {
  int vl = c->vl;
  char ptrs[40];
  snprintf(ptrs, sizeof ptrs, "<%d x float*>", vl);
  cg_loop o = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(b->ob));
  for (int64_t k = 0; k * vl < w->c; k++) {
    bool on[64], any;
    for (int l = 0; l < vl; l++) on[l] = k * vl + l < w->c;
    cg_val keep = gm_lane_const(f, c, on, &any);
    cg_val m[16];
    for (int xi = 0; xi < XI; xi++) {
      cg_val at = cg_add(f, cg_mul(f, o.i, cg_const_i64(b->ldm)),
                         cg_const_i64((int64_t)xi * b->mxs + k * vl));
      m[xi] = gm_mload(f, c, gm_gep(f, "float", mbuf, at, true), keep);
    }
    cg_val s[3][4], y[3][3];
    for (int j = 0; j < 4; j++) { /* A3^T M */
      s[0][j] = cg_wg_vadd(f, c, cg_wg_vadd(f, c, m[j], m[4 + j]), m[8 + j]);
      s[1][j] = cg_wg_vsub(f, c, m[4 + j], m[8 + j]);
      s[2][j] = cg_wg_vsub(f, c, cg_wg_vadd(f, c, m[4 + j], m[8 + j]), m[12 + j]);
    }
    for (int i = 0; i < 3; i++) { /* (A3^T M) A3 */
      y[i][0] = cg_wg_vadd(f, c, cg_wg_vadd(f, c, s[i][0], s[i][1]), s[i][2]);
      y[i][1] = cg_wg_vsub(f, c, s[i][1], s[i][2]);
      y[i][2] = cg_wg_vsub(f, c, cg_wg_vadd(f, c, s[i][1], s[i][2]), s[i][3]);
    }
    cg_val first = cg_mul(
        f, cg_add(f, cg_mul(f, cg_add(f, o0, o.i), cg_const_i64(w->c)), cg_const_i64(k * vl)),
        cg_const_i64(9));
    cg_val base = gm_gep(f, "float", dw, first, false);
    for (int t = 0; t < 9; t++) {
      char idx[1024];
      size_t n = (size_t)snprintf(idx, sizeof idx, "<");
      for (int l = 0; l < vl; l++)
        n += (size_t)snprintf(idx + n, sizeof idx - n, "%si64 %d", l ? ", " : "", 9 * l + t);
      snprintf(idx + n, sizeof idx - n, ">");
      cg_val pv = gm_ev(f, "getelementptr float, float* %s, <%d x i64> %s", base.s, vl, idx);
      cg_line(f, "call void @llvm.masked.scatter.v%df32.v%dp0(%s %s, %s %s, i32 4, %s %s)", vl, vl,
              c->vty, y[t / 3][t % 3].s, ptrs, pv.s, c->mty, keep.s);
    }
  }
  cg_loop_end(f, o);
}

dpc_status cg_lower_conv_winograd_grad_weight(cg_kernel *k, const dpc_window *w, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  int64_t n = f->g->values[f->g->ids[f->g->nodes[f->node].in]].shape.d[0];
  gm_cfg c;
  gm_choose(&c, f->vector_bits, DPC_F32, w->oc, w->c, 64);
  wdw b;
  DPC_ASSERT(dw_blocks(&c, w, n, &b)); /* cg_conv_winograd_grad_weight_fits said so */
  int64_t th = cg_ceil_div(w->oh, 2), tw = cg_ceil_div(w->ow, 2);
  int64_t ntb = cg_ceil_div(th, b.nty), nblk = cg_ceil_div(n, b.ni);
  gm_choose(&c, f->vector_bits, DPC_F32, b.ob, w->c, b.ni * b.nty * tw);
  gm_fit(&c, b.ob, w->c);
  /* the input transform as the forward's, over the block's channels */
  wino p;
  memset(&p, 0, sizeof p);
  p.ci = w->c, p.co = w->oc, p.th = th, p.tw = tw, p.ldv = b.ld, p.vxs = b.vxs;
  k->total = b.nob;
  if (n == 0) {
    k->total = 0;
    return DPC_OK;
  }
  cg_val dy = cg_arg_ptr(f, 0, DPC_F32), x = cg_arg_ptr(f, 1, DPC_F32),
         dw = cg_arg_ptr(f, cg_out_arg(f), DPC_F32);
  cg_val u = gm_alloca(f, "float", XI * b.uxs);
  cg_val v = gm_alloca(f, "float", XI * b.vxs);
  cg_val mbuf = gm_alloca(f, "float", XI * b.mxs);
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val o0 = cg_mul(f, it.i, cg_const_i64(b.ob));
  cg_loop ib = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(nblk));
  cg_val img0 = cg_mul(f, ib.i, cg_const_i64(b.ni));
  cg_val bn = gm_min(f, cg_const_i64(b.ni), gm_sub(f, cg_const_i64(n), img0));
  cg_loop tb = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(ntb));
  cg_val ty0 = cg_mul(f, tb.i, cg_const_i64(b.nty));
  cg_val nrt = gm_min(f, cg_const_i64(b.nty), gm_sub(f, cg_const_i64(th), ty0));
  cg_val tiles = cg_mul(f, nrt, cg_const_i64(tw));
  cg_loop im = cg_loop_begin(f, cg_const_i64(0), bn);
  cg_val img = cg_add(f, img0, im.i), col0 = cg_mul(f, im.i, tiles);
  cg_wg_input_transform(f, &c, w, &p, x, cg_mul(f, img, cg_const_i64(w->c)), ty0, nrt, v, col0);
  dy_transform(f, &c, w, tw, b.ob, dy, cg_add(f, cg_mul(f, img, cg_const_i64(w->oc)), o0), ty0, nrt,
               u, b.ld, b.uxs, col0);
  cg_loop_end(f, im);
  /* M += U V^T over the block's tiles; the first block of all starts M */
  cg_val first = gm_ev(f, "and i1 %s, %s", gm_ev(f, "icmp eq i64 %s, 0", ib.i.s).s,
                       gm_ev(f, "icmp eq i64 %s, 0", tb.i.s).s);
  cg_val acc = gm_ev(f, "xor i1 %s, true", first.s);
  cg_val nt = cg_mul(f, bn, tiles);
  cg_loop xi = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(XI));
  gm_mat A = {gm_gep(f, "float", u, cg_mul(f, xi.i, cg_const_i64(b.uxs)), true), DPC_F32, b.ld, 1,
              false};
  gm_mat B = {gm_gep(f, "float", v, cg_mul(f, xi.i, cg_const_i64(b.vxs)), true), DPC_F32, 1, b.ld,
              false};
  gm_mat C = {gm_gep(f, "float", mbuf, cg_mul(f, xi.i, cg_const_i64(b.mxs)), true), DPC_F32, b.ldm,
              1, false};
  gm_block(f, &c, &A, &B, &C, cg_const_i64(b.ob), cg_const_i64(w->c), nt, acc);
  cg_loop_end(f, xi);
  cg_loop_end(f, tb);
  cg_loop_end(f, ib);
  dw_output(f, &c, w, &b, mbuf, dw, o0);
  cg_loop_end(f, it);
  return DPC_OK;
}
