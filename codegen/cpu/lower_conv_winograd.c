/*
 * lower_conv_winograd.c — LLVM IR for 3x3 convolutions with stride 1 and "same" padding as
 * Winograd's F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks").
 *
 * Every 2x2 block of outputs (a tile) is computed from the 4x4 input patch around it:
 *
 *   Y = A^T [ (G g G^T) (.) (B^T d B) ] A
 *
 * g a 3x3 filter, d the patch, (.) the elementwise product of two 4x4 matrices. Summed over the
 * input channels, each of the 16 positions xi of the 4x4 is a GEMM:
 *
 *   M[xi][o, tile] = U[xi][o, ci] . V[xi][ci, tile]     U = G g G^T,  V = B^T d B
 *
 * 16 multiplications per tile and channel pair where im2col + GEMM does 36. With the transforms
 * and partial tiles, ResNet-18's 3x3 layers of 56x56 to 14x14 take 62-71% of the time they took
 * as im2col + GEMM (docs/codegen.md).
 *
 * A parallel piece is (image, blocks of output channels, blocks of tile rows). It transforms
 * its channels' filters (U, a vl x vl block of filters at a time through register
 * transposes: once per piece when it has one block of them), and per block of tile rows
 * transforms the input patches (V, a vector of tiles at a time: the even and odd columns of
 * two loads give the patch's four columns), runs the 16 GEMMs into M, and transforms M into two
 * output rows per tile row, interleaving the tiles' two columns; the fusion group's epilogue runs
 * on those rows while they are in cache. The blocks are sized so that U, V and M stay in or near a
 * 1 MB L2. When a plane's tiles are one block of few vectors (49 tiles at 14x14) and the batch has
 * several images, a piece takes a block of images instead of one: their tiles side by side make the
 * GEMMs' columns and share one U (fashion_cnn's second layer at batch 64: 3.9 -> 3.2 ms).
 *
 * Only f32, 3x3, stride and dilation 1, padding 1 on every side (the output the input's size),
 * no groups, at least MIN_CHANNELS channels in and out (the GEMMs' depth and rows), output rows
 * of at most MAX_CHUNKS vectors of tiles, planes of at least MIN_PIXELS: anything else keeps
 * im2col + GEMM. The rule depends on the convolution only, so an image gets the same bits at
 * any batch.
 */
#include "codegen/cpu/conv_winograd.h"
#include "codegen/cpu/conv_winograd_int.h"
#include "codegen/cpu/conv_im2col.h"

#include <stdio.h>
#include <string.h>

/* Bytes of the transformed filters, input patches and products a piece keeps. Each GEMM reads a
 * sixteenth of U and V and writes a sixteenth of M, so those stay in L2 even when all three do
 * not quite. */
#define U_BYTES (512 * 1024)
#define V_BYTES (512 * 1024)
#define M_BYTES (256 * 1024)
/* The most V may take when a plane's tiles are all one block. */
#define V_MAX (2 * 1024 * 1024)
/* Smaller planes spend more on the transforms and on partial tiles than they save. 7x7 planes
 * (16 tiles covering 8x8) still gain: 128 channels at batch 8, 1.46 -> 0.84 ms; ResNet-18's
 * 512 at batch 8, 20.2 -> 18.1 ms, and the same at batch 1. */
#define MIN_PIXELS 49
/* Most vectors of tiles in a tile row (the transforms are unrolled over them). */
#define MAX_CHUNKS 8
/* Tiles a piece of several images aims at. */
#define IMG_TILES 256

/* Blocks of output channels and of tile rows, for a GEMM configuration c. Large planes with
 * few channels (ResNet's first layers) take blocks of tile rows with U, V and M within budget;
 * small planes with many (its third) take every tile in one block, V up to V_MAX, and loop over
 * blocks of output channels. Also sets the positions' strides (cg_wg_xi_stride). False when
 * neither fits. */
static bool wino_blocks(const gm_cfg *c, const dpc_window *w, int64_t ni, wino *p) {
  p->ci = w->c;
  p->co = w->oc;
  p->th = cg_ceil_div(w->oh, 2);
  p->tw = cg_ceil_div(w->ow, 2);
  p->ni = ni;
  int64_t ld1 = gm_pad_ld(c, cg_ceil_div(p->tw, c->nr) * c->nr);
  bool rows = ni == 1 && XI * 4 * p->ci * ld1 <= V_BYTES;
  if (!rows) {
    ld1 = gm_pad_ld(c, cg_ceil_div(ni * p->th * p->tw, c->nr) * c->nr);
    if (XI * 4 * p->ci * ld1 > V_MAX) return false;
  }
  int64_t mbmax = U_BYTES / (XI * 4 * p->ci);
  if (M_BYTES / (XI * 4 * ld1) < mbmax) mbmax = M_BYTES / (XI * 4 * ld1);
  if (mbmax < MIN_CHANNELS) return false;
  p->nob = cg_ceil_div(p->co, mbmax);
  p->mb = cg_ceil_div(p->co, p->nob);
  p->nty = rows ? p->th : 1;
  for (; rows && p->nty > 1; p->nty--) {
    p->ldv = gm_pad_ld(c, cg_ceil_div(p->nty * p->tw, c->nr) * c->nr);
    if (XI * 4 * p->ci * p->ldv <= V_BYTES && XI * 4 * p->mb * p->ldv <= M_BYTES) break;
  }
  if (!rows) p->nty = p->th;
  p->ntb = cg_ceil_div(p->th, p->nty);
  p->nty = cg_ceil_div(p->th, p->ntb); /* the same number of blocks, evener */
  p->ldv = gm_pad_ld(c, cg_ceil_div(ni * p->nty * p->tw, c->nr) * c->nr);
  p->uxs = cg_wg_xi_stride(p->mb * p->ci);
  p->vxs = cg_wg_xi_stride(p->ci * p->ldv);
  p->mxs = cg_wg_xi_stride(p->mb * p->ldv);
  return true;
}

/* Images a piece takes side by side: several when a plane's tiles are one block and fill few
 * vectors (ResNet-18's 14x14 planes have 49 tiles, 49 of 64 lanes), as many as IMG_TILES tiles
 * hold while the budgets do. Each element's sum is the same whatever the count (only the
 * columns the tiles sit in change), so an image gets the same bits at any batch. */
static int64_t images_per_piece(const gm_cfg *c, const dpc_window *w, int64_t n) {
  wino p;
  int64_t tiles = cg_ceil_div(w->oh, 2) * cg_ceil_div(w->ow, 2);
  if (n < 2 || !wino_blocks(c, w, 1, &p) || p.ntb > 1 || 2 * tiles > IMG_TILES) return 1;
  int64_t ni = IMG_TILES / tiles;
  if (ni > n) ni = n;
  while (ni > 1 && !wino_blocks(c, w, ni, &p)) ni--;
  return ni;
}

bool cg_conv_winograd_fits(const dpc_window *w, dpc_dtype t, int vector_bits) {
  if (t != DPC_F32 || w->groups != 1 || w->kh != 3 || w->kw != 3 || w->sh != 1 || w->sw != 1 ||
      w->dh != 1 || w->dw != 1 || w->pt != 1 || w->pl != 1 || w->pb != 1 || w->pr != 1)
    return false;
  if (w->c < MIN_CHANNELS || w->oc < MIN_CHANNELS || w->oh * w->ow < MIN_PIXELS) return false;
  int vl = vector_bits / 32;
  if (vl < 4 || cg_ceil_div(cg_ceil_div(w->ow, 2), vl) > MAX_CHUNKS) return false;
  gm_cfg c;
  gm_choose(&c, vector_bits, DPC_F32, w->oc, cg_ceil_div(w->oh, 2) * cg_ceil_div(w->ow, 2), w->c);
  wino p;
  return wino_blocks(&c, w, 1, &p);
}

cg_val cg_wg_vadd(cg_fn *f, const gm_cfg *c, cg_val a, cg_val b) {
  return gm_ev(f, "fadd %s %s, %s", c->vty, a.s, b.s);
}
cg_val cg_wg_vsub(cg_fn *f, const gm_cfg *c, cg_val a, cg_val b) {
  return gm_ev(f, "fsub %s %s, %s", c->vty, a.s, b.s);
}
cg_val cg_wg_vhalf(cg_fn *f, const gm_cfg *c, cg_val a) {
  return gm_ev(f, "fmul %s %s, %s", c->vty, a.s, gm_splat(f, c, cg_const(DPC_F32, 0.5)).s);
}

/* U at `at` (positions p->uxs apart) = (G g G^T) for the filters g[0..9) (a tap each, a filter
 * a lane), the lanes `mask` says exist. */
static void transform_filters(cg_fn *f, const gm_cfg *c, const wino *p, const cg_val *g, cg_val u,
                              cg_val at, cg_val mask) {
  /* s = g G^T (3x4), then u = G s (4x4) */
  cg_val s[3][4], uu[4][4];
  for (int r = 0; r < 3; r++) {
    cg_val a = g[3 * r], b = g[3 * r + 1], d = g[3 * r + 2];
    cg_val ad = cg_wg_vadd(f, c, a, d);
    s[r][0] = a;
    s[r][1] = cg_wg_vhalf(f, c, cg_wg_vadd(f, c, ad, b));
    s[r][2] = cg_wg_vhalf(f, c, cg_wg_vsub(f, c, ad, b));
    s[r][3] = d;
  }
  for (int j = 0; j < 4; j++) {
    cg_val ad = cg_wg_vadd(f, c, s[0][j], s[2][j]);
    uu[0][j] = s[0][j];
    uu[1][j] = cg_wg_vhalf(f, c, cg_wg_vadd(f, c, ad, s[1][j]));
    uu[2][j] = cg_wg_vhalf(f, c, cg_wg_vsub(f, c, ad, s[1][j]));
    uu[3][j] = s[2][j];
  }
  for (int xi = 0; xi < XI; xi++) {
    cg_val q = gm_gep(f, "float", u, cg_add(f, at, cg_const_i64(xi * p->uxs)), true);
    gm_mstore(f, c, uu[xi / 4][xi % 4], q, mask);
  }
}

/* One vl x vl block of transformed filters from vl runs of 9 vl contiguous stored floats: run i
 * (i < nruns) starts at filter first + i * stride and holds vl filters' nine taps each (those
 * of rows r < nrows). Nine register transposes turn them into, per row r and tap, a vector
 * over the runs; row r's transform goes to U row urow0 + r (rows ld apart), column ucol0, taps
 * in turned order when `turn`. Gathers at a stride of 9 floats per tap fetched the same ones
 * before: ResNet-18's last 3x3 layer spent 1.1 ms of 2.9 in them at batch 1. */
static void filter_block(cg_fn *f, const gm_cfg *c, const wino *p, cg_val wt, cg_val first,
                         int64_t stride, cg_val nruns, cg_val nrows, bool turn, cg_val urow0,
                         int64_t ld, cg_val ucol0, cg_val u, cg_val buf) {
  int vl = c->vl;
  cg_val src[64], g[9];
  cg_val live = cg_mul(f, nrows, cg_const_i64(9));
  /* a loop over the nine vectors of the runs, each transposed into the small buffer, and a loop
   * over the rows' transforms from there: unrolled, the kernel took a few hundred ms more to
   * compile for the same speed */
  cg_loop j = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(9));
  cg_val jv = cg_mulk(f, j.i, vl);
  cg_val m = gm_lanes(f, c, cg_const_i64(0), gm_sub(f, live, jv));
  for (int i = 0; i < vl; i++) {
    /* a run past nruns loads nothing (its lanes masked off) from the first run's place */
    cg_val on = gm_ev(f, "icmp sgt i64 %s, %d", nruns.s, i);
    cg_val at = gm_ev(f, "select i1 %s, i64 %s, i64 %s", on.s,
                      cg_add(f, first, cg_const_i64(i * stride)).s, first.s);
    cg_val mi = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", on.s, c->mty, m.s, c->mty);
    src[i] = gm_mload(f, c, gm_gep(f, "float", wt, cg_add(f, cg_mulk(f, at, 9), jv), false), mi);
  }
  gm_transpose(f, c, src); /* src[q]: float j vl + q = 9 r + tap of every run */
  for (int q = 0; q < vl; q++)
    gm_vstore(f, c, src[q],
              gm_gep(f, "float", buf, cg_mulk(f, cg_add(f, jv, cg_const_i64(q)), vl), true),
              vl * 4);
  cg_loop_end(f, j);
  cg_val mask = gm_lanes(f, c, cg_const_i64(0), nruns);
  cg_loop r = cg_loop_begin(f, cg_const_i64(0), gm_min(f, nrows, cg_const_i64(vl)));
  for (int t = 0; t < 9; t++) {
    cg_val at = cg_add(f, cg_mulk(f, r.i, 9 * vl), cg_const_i64((turn ? 8 - t : t) * vl));
    g[t] = gm_vload(f, c, gm_gep(f, "float", buf, at, true), vl * 4);
  }
  cg_val at = cg_add(f, cg_mulk(f, cg_add(f, urow0, r.i), ld), ucol0);
  transform_filters(f, c, p, g, u, at, mask);
  cg_loop_end(f, r);
}

/* U = the transformed filters of output channels [o0, o0 + ocur), vl x vl blocks at a time.
 * The forward's are stored transposed, U[xi][ci][o] (the GEMM reads them so: rs 1, cs mb), so
 * that a run (one output channel's vl input channels) is a column; the input gradient's,
 * whose filters are the stored ones transposed and turned, as U[xi][o][ci], a run (one stored
 * output channel, vl stored input channels) again a column. */
static void filter_transform(cg_fn *f, const gm_cfg *c, const wino *p, cg_val wt, cg_val o0,
                             cg_val ocur, cg_val u) {
  int vl = c->vl;
  cg_val buf = gm_alloca(f, "float", 9 * vl * vl);
  cg_loop cb = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cg_ceil_div(p->ci, vl)));
  cg_val c0 = cg_mul(f, cb.i, cg_const_i64(vl));
  cg_val ncol = gm_sub(f, cg_const_i64(p->ci), c0);
  cg_loop ob = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, ocur, vl));
  cg_val r0 = cg_mul(f, ob.i, cg_const_i64(vl));
  cg_val nr = gm_sub(f, ocur, r0);
  if (p->flip) /* run i: stored channel c0 + i, its input channels o0 + r0 + r */
    filter_block(f, c, p, wt, cg_add(f, cg_mul(f, c0, cg_const_i64(p->co)), cg_add(f, o0, r0)),
                 p->co, ncol, nr, true, r0, p->ci, c0, u, buf);
  else /* run i: output channel o0 + r0 + i, its input channels c0 + r */
    filter_block(f, c, p, wt, cg_add(f, cg_mul(f, cg_add(f, o0, r0), cg_const_i64(p->ci)), c0),
                 p->ci, nr, ncol, false, c0, p->mb, r0, u, buf);
  cg_loop_end(f, ob);
  cg_loop_end(f, cb);
}

/* Columns 2 t0 - 1 + 2 l + j (j = 0..3) of an input row for the tiles t0 + l of a chunk: the even
 * and odd lanes of two vectors loaded at 2 t0 - 1 and of two at 2 t0 + 1. Lanes outside the
 * row or past the last tile are zeros; `valid` (an i1) false makes the whole row zeros. */
static void patch_row(cg_fn *f, const gm_cfg *c, const dpc_window *w, const wino *p, cg_val row,
                      cg_val valid, int64_t t0, cg_val *out) {
  int vl = c->vl;
  int ev[64], od[64];
  for (int l = 0; l < vl; l++) {
    ev[l] = 2 * l;
    od[l] = 2 * l + 1;
  }
  for (int h = 0; h < 2; h++) {
    int64_t s = 2 * t0 - 1 + 2 * h; /* first column of the window */
    cg_val v[2];
    for (int q = 0; q < 2; q++) {
      bool on[64], any;
      for (int l = 0; l < vl; l++) {
        int64_t col = s + q * vl + l, tile = t0 + (q * vl + l) / 2;
        on[l] = col >= 0 && col < w->w && tile < p->tw;
      }
      cg_val m = gm_lane_const(f, c, on, &any);
      if (!any) {
        v[q] = (cg_val){"zeroinitializer"};
        continue;
      }
      m = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", valid.s, c->mty, m.s, c->mty);
      v[q] = gm_mload(f, c, gm_gep(f, "float", row, cg_const_i64(s + q * vl), false), m);
    }
    out[2 * h] = gm_shuffle(f, c, v[0], v[1], ev);
    out[2 * h + 1] = gm_shuffle(f, c, v[0], v[1], od);
  }
}

/* V[xi][ci][col0 + r * tw + tile] = (B^T d B)[xi] for tile rows [ty0, ty0 + nrt) of the image's
 * planes at plane0. */
void cg_wg_input_transform(cg_fn *f, const gm_cfg *c, const dpc_window *w, const wino *p, cg_val x,
                           cg_val plane0, cg_val ty0, cg_val nrt, cg_val v, cg_val col0) {
  int vl = c->vl;
  int64_t chunks = cg_ceil_div(p->tw, vl);
  cg_loop ci = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(p->ci));
  cg_val plane =
      gm_gep(f, "float", x, cg_mul(f, cg_add(f, plane0, ci.i), cg_const_i64(w->h * w->w)), false);
  cg_loop r = cg_loop_begin(f, cg_const_i64(0), nrt);
  cg_val top = gm_sub(f, cg_mul(f, cg_add(f, ty0, r.i), cg_const_i64(2)), cg_const_i64(1));
  cg_val rows[4], valid[4];
  for (int i = 0; i < 4; i++) {
    cg_val iy = cg_add(f, top, cg_const_i64(i));
    valid[i] = gm_ev(f, "icmp ult i64 %s, %lld", iy.s, (long long)w->h);
    cg_val iyv = gm_ev(f, "select i1 %s, i64 %s, i64 0", valid[i].s, iy.s); /* keep it mapped */
    rows[i] = gm_gep(f, "float", plane, cg_mul(f, iyv, cg_const_i64(w->w)), false);
  }
  cg_val dst = gm_gep(f, "float", v,
                      cg_add(f, cg_add(f, cg_mul(f, ci.i, cg_const_i64(p->ldv)), col0),
                             cg_mul(f, r.i, cg_const_i64(p->tw))),
                      false);
  for (int64_t k = 0; k < chunks; k++) {
    cg_val d[4][4], t[4][4];
    for (int i = 0; i < 4; i++) patch_row(f, c, w, p, rows[i], valid[i], k * vl, d[i]);
    for (int i = 0; i < 4; i++) { /* d B */
      t[i][0] = cg_wg_vsub(f, c, d[i][0], d[i][2]);
      t[i][1] = cg_wg_vadd(f, c, d[i][1], d[i][2]);
      t[i][2] = cg_wg_vsub(f, c, d[i][2], d[i][1]);
      t[i][3] = cg_wg_vsub(f, c, d[i][1], d[i][3]);
    }
    bool on[64], any;
    for (int l = 0; l < vl; l++) on[l] = k * vl + l < p->tw;
    cg_val keep = gm_lane_const(f, c, on, &any);
    for (int j = 0; j < 4; j++) { /* B^T (d B) */
      cg_val vv[4] = {cg_wg_vsub(f, c, t[0][j], t[2][j]), cg_wg_vadd(f, c, t[1][j], t[2][j]),
                      cg_wg_vsub(f, c, t[2][j], t[1][j]), cg_wg_vsub(f, c, t[1][j], t[3][j])};
      for (int i = 0; i < 4; i++) {
        int64_t off = (int64_t)(4 * i + j) * p->vxs + k * vl;
        gm_mstore(f, c, vv[i], gm_gep(f, "float", dst, cg_const_i64(off), false), keep);
      }
    }
  }
  cg_loop_end(f, r);
  cg_loop_end(f, ci);
}

/* y rows 2 ty, 2 ty + 1 of output channels [obase, obase + ocur) from M = A^T m A, for tile rows
 * [ty0, ty0 + nrt). */
static void output_transform(cg_fn *f, const gm_cfg *c, const dpc_window *w, const wino *p,
                             cg_val mbuf, cg_val y, cg_val obase, cg_val ocur, cg_val ty0,
                             cg_val nrt) {
  int vl = c->vl;
  int64_t chunks = cg_ceil_div(p->tw, vl), P = w->oh * w->ow;
  int lo[64], hi[64];
  for (int l = 0; l < vl; l++) { /* the two columns of each tile side by side */
    lo[l] = l % 2 ? vl + l / 2 : l / 2;
    hi[l] = l % 2 ? vl + vl / 2 + l / 2 : vl / 2 + l / 2;
  }
  cg_loop o = cg_loop_begin(f, cg_const_i64(0), ocur);
  cg_loop r = cg_loop_begin(f, cg_const_i64(0), nrt);
  cg_val src = gm_gep(
      f, "float", mbuf,
      cg_add(f, cg_mul(f, o.i, cg_const_i64(p->ldv)), cg_mul(f, r.i, cg_const_i64(p->tw))), false);
  cg_val oy = cg_mul(f, cg_add(f, ty0, r.i), cg_const_i64(2));
  cg_val row1 =
      gm_ev(f, "icmp slt i64 %s, %lld", cg_add(f, oy, cg_const_i64(1)).s, (long long)w->oh);
  cg_val off1 = gm_ev(f, "select i1 %s, i64 %lld, i64 0", row1.s, (long long)w->ow);
  cg_val yrow = gm_gep(f, "float", y,
                       cg_add(f, cg_mul(f, cg_add(f, obase, o.i), cg_const_i64(P)),
                              cg_mul(f, oy, cg_const_i64(w->ow))),
                       false);
  for (int64_t k = 0; k < chunks; k++) {
    bool on[64], any;
    for (int l = 0; l < vl; l++) on[l] = k * vl + l < p->tw;
    cg_val in = gm_lane_const(f, c, on, &any);
    cg_val m[16];
    for (int xi = 0; xi < XI; xi++) {
      int64_t off = (int64_t)xi * p->mxs + k * vl;
      m[xi] = gm_mload(f, c, gm_gep(f, "float", src, cg_const_i64(off), false), in);
    }
    cg_val s[4][2], yv[2][2];
    for (int i = 0; i < 4; i++) { /* m A */
      s[i][0] = cg_wg_vadd(f, c, cg_wg_vadd(f, c, m[4 * i], m[4 * i + 1]), m[4 * i + 2]);
      s[i][1] = cg_wg_vsub(f, c, cg_wg_vsub(f, c, m[4 * i + 1], m[4 * i + 2]), m[4 * i + 3]);
    }
    for (int j = 0; j < 2; j++) { /* A^T (m A) */
      yv[0][j] = cg_wg_vadd(f, c, cg_wg_vadd(f, c, s[0][j], s[1][j]), s[2][j]);
      yv[1][j] = cg_wg_vsub(f, c, cg_wg_vsub(f, c, s[1][j], s[2][j]), s[3][j]);
    }
    for (int rr = 0; rr < 2; rr++) {
      cg_val half[2] = {gm_shuffle(f, c, yv[rr][0], yv[rr][1], lo),
                        gm_shuffle(f, c, yv[rr][0], yv[rr][1], hi)};
      for (int h = 0; h < 2; h++) {
        int64_t col0 = 2 * k * vl + h * vl;
        for (int l = 0; l < vl; l++) on[l] = col0 + l < w->ow;
        cg_val keep = gm_lane_const(f, c, on, &any);
        if (!any) continue;
        if (rr == 1)
          keep =
              gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", row1.s, c->mty, keep.s, c->mty);
        /* a second row past the plane is not written, and its address stays on the first */
        cg_val at = gm_gep(f, "float", yrow,
                           cg_add(f, rr ? off1 : cg_const_i64(0), cg_const_i64(col0)), false);
        gm_mstore(f, c, half[h], at, keep);
      }
    }
  }
  cg_loop_end(f, r);
  cg_loop_end(f, o);
}

/* The input gradient of a convolution that fits, as the convolution it is: dy correlated with
 * the filters transposed and turned 180 degrees, padding 3 - 1 - 1 = 1 on every side. */
static dpc_window grad_input_window(const dpc_window *w) {
  dpc_window g = *w;
  g.c = w->oc, g.h = w->oh, g.w = w->ow;
  g.oc = w->c, g.oh = w->h, g.ow = w->w;
  return g;
}

bool cg_conv_winograd_grad_input_fits(const dpc_window *w, dpc_dtype t, int vector_bits) {
  dpc_window g = grad_input_window(w);
  return cg_conv_winograd_fits(w, t, vector_bits) && cg_conv_winograd_fits(&g, t, vector_bits);
}

static dpc_status lower(cg_kernel *k, const dpc_window *w, bool flip, dpc_diag *d);

dpc_status cg_lower_conv_winograd(cg_kernel *k, const dpc_window *w, dpc_diag *d) {
  return lower(k, w, false, d);
}

dpc_status cg_lower_conv_winograd_grad_input(cg_kernel *k, const dpc_window *w, dpc_diag *d) {
  dpc_window g = grad_input_window(w);
  return lower(k, &g, true, d);
}

static dpc_status lower(cg_kernel *k, const dpc_window *w, bool flip, dpc_diag *d) {
  cg_fn *f = k->f;
  wino p;
  gm_cfg c;
  gm_choose(&c, f->vector_bits, DPC_F32, w->oc, cg_ceil_div(w->oh, 2) * cg_ceil_div(w->ow, 2),
            w->c);
  DPC_ASSERT(wino_blocks(&c, w, 1, &p)); /* cg_conv_winograd_fits said so */
  int64_t n = f->g->values[f->g->ids[f->g->nodes[f->node].in]].shape.d[0];
  int64_t ni = images_per_piece(&c, w, n);
  DPC_ASSERT(wino_blocks(&c, w, ni, &p));
  /* the GEMMs' own configuration, for their real sizes, unless its wider tile would take V
   * past its budget (7x7 planes of many images): the first one fits */
  gm_cfg g;
  wino q;
  gm_choose(&g, f->vector_bits, DPC_F32, p.mb, ni * p.nty * p.tw, p.ci);
  if (wino_blocks(&g, w, ni, &q)) c = g, p = q;
  gm_fit(&c, p.mb, p.ldv);
  p.n = n;
  p.flip = flip;
  int64_t nblk = cg_ceil_div(n, ni); /* blocks of images */
  /* Pieces: with several blocks of tile rows, one channel block each (its U made once) and
   * the tile-row blocks shared out; with one, the channel blocks shared out (V made once per
   * piece). Either way until two cores have work. */
  p.og = p.ntb > 1 ? p.nob : 1;
  p.ng = 1;
  while (p.ng < p.ntb && !gm_pieces_shared(nblk * p.og * p.ng)) p.ng++;
  while (p.og < p.nob && !gm_pieces_shared(nblk * p.og * p.ng)) p.og++;
  p.per = cg_ceil_div(p.ntb, p.ng);
  p.ng = cg_ceil_div(p.ntb, p.per);
  p.obpg = cg_ceil_div(p.nob, p.og);
  p.og = cg_ceil_div(p.nob, p.obpg);
  k->total = nblk * p.og * p.ng;
  if (k->total == 0) return DPC_OK;
  cg_val x = cg_arg_ptr(f, 0, DPC_F32), wt = cg_arg_ptr(f, 1, DPC_F32),
         y = cg_arg_ptr(f, cg_out_arg(f), DPC_F32);
  cg_val u = gm_alloca(f, "float", XI * p.uxs);
  cg_val v = gm_alloca(f, "float", XI * p.vxs);
  cg_val mbuf = gm_alloca(f, "float", XI * p.mxs);
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  /* it = (image block * og + channel-block group) * ng + tile-row-block group */
  cg_val grp = gm_ev(f, "srem i64 %s, %lld", it.i.s, (long long)p.ng);
  cg_val rest = gm_ev(f, "sdiv i64 %s, %lld", it.i.s, (long long)p.ng);
  cg_val og = gm_ev(f, "srem i64 %s, %lld", rest.s, (long long)p.og);
  cg_val img0 = cg_mul(f, gm_ev(f, "sdiv i64 %s, %lld", rest.s, (long long)p.og),
                       cg_const_i64(ni)); /* the block's first image */
  cg_val bn = gm_min(f, cg_const_i64(ni), gm_sub(f, cg_const_i64(n), img0));
  cg_val ob0 = cg_mul(f, og, cg_const_i64(p.obpg));
  cg_val ob1 = gm_min(f, cg_add(f, ob0, cg_const_i64(p.obpg)), cg_const_i64(p.nob));
  bool hoist = p.obpg == 1; /* one channel block a piece: its U before the tile rows */
  if (hoist) {
    cg_val o0 = cg_mul(f, ob0, cg_const_i64(p.mb));
    filter_transform(f, &c, &p, wt, o0,
                     gm_min(f, cg_const_i64(p.mb), gm_sub(f, cg_const_i64(p.co), o0)), u);
  }
  cg_val tb0 = cg_mul(f, grp, cg_const_i64(p.per));
  cg_val tb1 = gm_min(f, cg_add(f, tb0, cg_const_i64(p.per)), cg_const_i64(p.ntb));
  cg_loop tb = cg_loop_begin(f, tb0, tb1);
  cg_val ty0 = cg_mul(f, tb.i, cg_const_i64(p.nty));
  cg_val nrt = gm_min(f, cg_const_i64(p.nty), gm_sub(f, cg_const_i64(p.th), ty0));
  cg_val tiles = cg_mul(f, nrt, cg_const_i64(p.tw)); /* an image's, side by side */
  cg_val nt = cg_mul(f, bn, tiles);
  cg_loop im = cg_loop_begin(f, cg_const_i64(0), bn);
  cg_wg_input_transform(f, &c, w, &p, x, cg_mul(f, cg_add(f, img0, im.i), cg_const_i64(p.ci)), ty0,
                        nrt, v, cg_mul(f, im.i, tiles));
  cg_loop_end(f, im);
  /* the GEMM reads whole vectors past nt: zeros there, unless nt is whole tiles */
  uint32_t tail =
      gm_if(f, gm_ev(f, "icmp ne i64 %s, 0", gm_ev(f, "srem i64 %s, %d", nt.s, c.nr).s));
  cg_loop zx = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(XI));
  cg_zero_tail(f, &c, gm_gep(f, "float", v, cg_mulk(f, zx.i, p.vxs), true), p.ldv,
               cg_const_i64(p.ci), nt);
  cg_loop_end(f, zx);
  gm_endif(f, tail);
  cg_loop ob = cg_loop_begin(f, ob0, ob1);
  cg_val o0 = cg_mul(f, ob.i, cg_const_i64(p.mb));
  cg_val ocur = gm_min(f, cg_const_i64(p.mb), gm_sub(f, cg_const_i64(p.co), o0));
  if (!hoist) filter_transform(f, &c, &p, wt, o0, ocur, u);
  /* U's rows are read in place when every block has a whole micro-tile of them */
  bool direct = p.co - (p.nob - 1) * p.mb >= c.mr;
  cg_loop xi = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(XI));
  /* the forward's U is stored transposed (filter_transform) */
  gm_mat A = {gm_gep(f, "float", u, cg_mul(f, xi.i, cg_const_i64(p.uxs)), true), DPC_F32,
              flip ? p.ci : 1, flip ? 1 : p.mb, direct};
  gm_mat B = {gm_gep(f, "float", v, cg_mul(f, xi.i, cg_const_i64(p.vxs)), true),
              DPC_F32,
              p.ldv,
              1,
              true,
              true};
  gm_mat C = {gm_gep(f, "float", mbuf, cg_mul(f, xi.i, cg_const_i64(p.mxs)), true), DPC_F32, p.ldv,
              1, false};
  gm_block(f, &c, &A, &B, &C, ocur, nt, cg_const_i64(p.ci), (cg_val){"false"});
  cg_loop_end(f, xi);
  cg_loop om = cg_loop_begin(f, cg_const_i64(0), bn);
  cg_val obase = cg_add(f, cg_mul(f, cg_add(f, img0, om.i), cg_const_i64(p.co)), o0);
  output_transform(f, &c, w, &p, gm_gep(f, "float", mbuf, cg_mul(f, om.i, tiles), true), y, obase,
                   ocur, ty0, nrt);
  if (f->grp) {
    cg_val c0 = cg_mul(f, cg_mul(f, ty0, cg_const_i64(2)), cg_const_i64(w->ow));
    cg_val c1 =
        cg_mul(f, gm_min(f, cg_mul(f, cg_add(f, ty0, nrt), cg_const_i64(2)), cg_const_i64(w->oh)),
               cg_const_i64(w->ow));
    dpc_status st = cg_epilogue_block(f, 1, obase, cg_add(f, obase, ocur), c0, c1, d);
    if (st) return st;
  }
  cg_loop_end(f, om);
  cg_loop_end(f, ob);
  cg_loop_end(f, tb);
  cg_loop_end(f, it);
  return DPC_OK;
}
