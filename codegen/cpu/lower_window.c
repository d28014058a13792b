/*
 * lower_window.c — LLVM IR for conv2d and its two gradients, as GEMMs on the generator of
 * gemm.c. NCHW, any stride, asymmetric padding, dilation and groups, all fixed at generation
 * time from dpc_window_of (the function the shape rule uses, so kernel and rule agree).
 *
 * With K = cpg*kh*kw taps (q = (ci, ky, kx)) and P = oh*ow output pixels, per image and group:
 *
 *   conv2d              y[o, P]   = W[o, K] . Col[K, P]          Col = im2col(x)
 *   conv2d_grad_input   dCol[K, P] = W^T[K, o] . dY[o, P]        dx += col2im(dCol)
 *   conv2d_grad_weight  dW[o, K]  += dY[o, P] . Col^T[P, K]       summed over the batch
 *
 * im2col (lower_conv_im2col.c) builds the columns of a block of whole output rows into a stack
 * buffer (Col, at most COL_BYTES), which the GEMM then reads in place as its B. Blocks are as
 * many output rows as fit: all of a 28x28 or 14x14 image for the example CNN (288 x 196 floats
 * for its second layer), one row at a time for very large K; past that, K itself is cut (whole
 * channels).
 *
 * Three forward shapes go elsewhere: a 1x1 convolution with stride 1 and no padding is a GEMM on
 * x's planes as they lie (B = x, packed by the GEMM, no Col), a depthwise or grouped one with
 * few output channels per group is computed directly (lower_conv_direct.c), and a 3x3 "same"
 * one with enough channels as Winograd's F(2x2, 3x3) (lower_conv_winograd.c). That one's input
 * gradient takes the same kernel and its weight gradient Winograd's F(3x3, 2x2)
 * (lower_conv_winograd_dw.c); a weight gradient of at most 16 taps per output channel is dot
 * products over the pixels (lower_conv_wgrad_dot.c).
 *
 * Parallel iterations: conv2d runs (image, group, channel block, row block) pieces, each
 * writing its own part of y, a single image cut so that two cores share it (split_pieces); the
 * input gradient runs (image, group), because col2im scatters a row block into input rows that its
 * neighbours also touch; the weight gradient runs (group, o block, K block) pieces of dW, each
 * summing the whole batch, since that is the only split with disjoint outputs (and computes dW^T
 * instead when that fits the micro-tile better: 9 taps x 32 channels).
 *
 * f16/bf16 are computed in f32 like the GEMM: dx and dW are accumulated in f32 scratch and
 * rounded once at the end (adding into f16 memory would round at every tap).
 */
#include "codegen/cpu/conv_direct.h"
#include "codegen/cpu/conv_im2col.h"
#include "codegen/cpu/conv_wgrad_dot.h"
#include "codegen/cpu/conv_winograd.h"
#include "codegen/cpu/gemm.h"
#include "ir/rules.h"

#include <stdio.h>
#include <string.h>

/* Bytes of a Col / dCol block: half the L2, beside the GEMM's packed A. */
#define COL_BYTES CG_COL_BYTES

/* Output rows per block (rb) and the buffer's row stride (ld) for a Col of `rows` rows, and the
 * rows of it one block may hold (kq <= rows: K is cut only when a single output row of all K
 * taps exceeds the budget). */
static void col_block(const gm_cfg *c, const cg_conv_geom *cv, int64_t rows, int64_t *rb,
                      int64_t *ld, int64_t *kq) {
  const dpc_window *w = &cv->w;
  int64_t per_row = w->ow * rows * c->esize;
  *rb = COL_BYTES / (per_row ? per_row : 1);
  if (*rb < 1) *rb = 1;
  if (*rb > w->oh) *rb = w->oh;
  *ld = gm_pad_ld(c, cg_ceil_div(*rb * w->ow, c->nr) * c->nr);
  *kq = COL_BYTES / (*ld * c->esize);
  if (*kq > rows) *kq = rows;
  /* whole input channels per piece of K (col2im_rows gathers all of a channel's taps) */
  if (*kq < rows) *kq = *kq / cv->kk * cv->kk;
  if (*kq < cv->kk) *kq = cv->kk < rows ? cv->kk : rows;
}

/* Split the iteration index `it` into digits of the given (static) radices, last fastest. */
static void digits(cg_fn *f, cg_val it, const int64_t *radix, int n, cg_val *out) {
  for (int i = n; i-- > 0;) {
    out[i] = gm_ev(f, "srem i64 %s, %lld", it.s, (long long)radix[i]);
    it = gm_ev(f, "sdiv i64 %s, %lld", it.s, (long long)radix[i]);
  }
}

/* Bytes per second of the passes a forward convolution's pieces repeat, and its FLOP rate: the
 * weights, read again by every row block (from L2 when they fit half of it, else from L3 or
 * memory, and at batch 1 with prefetchers that see 14 short rows at a time, ~8 GB/s measured
 * on ResNet-18's last layer), and the im2col (or the GEMM's packing of x), built again by every
 * channel block. The figures only rank the cuts; they predict nothing. */
#define W_NEAR_BPS 50e9
#define W_FAR_BPS  8e9
#define COL_BPS    20e9
#define FLOP_PER_S 1e11
#define L2_HALF    (512 * 1024)
/* a single image is cut into at least 2 pieces (an even count, or at least 8) so two cores
 * share it, but never into pieces of fewer FLOPs than this */
#define MIN_PIECE_FLOP 1e6

/* A 1x1 convolution with stride 1 and no padding is a GEMM on x's channel planes as they lie:
 * B[ci, pixel] = x[plane0 + ci][pixel], packed by the GEMM itself with no Col copy. */
static bool pointwise(const dpc_window *w) {
  return w->kh == 1 && w->kw == 1 && w->sh == 1 && w->sw == 1 && w->pt == 0 && w->pl == 0 &&
         w->pb == 0 && w->pr == 0;
}

/* The Col of a row block of rb output rows: its row stride, and how many of its K rows one
 * pass holds (whole input channels, col2im-style, when K must be cut to stay in COL_BYTES). */
/* Taps per pass of a forward convolution: all K, or whole input channels of a Col of KQ_COLS
 * columns. It depends on the convolution alone, not on the batch or on how pieces are cut:
 * the passes are where an output's sum is split, so an image gets the same bits at any batch
 * (docs/serving.md). */
#define KQ_COLS 256
static int64_t k_pass(const cg_conv_geom *cv, int esize) {
  int64_t kq = COL_BYTES / (KQ_COLS * esize);
  if (kq >= cv->K) return cv->K;
  kq = kq / cv->kk * cv->kk;
  return kq < cv->kk ? (cv->kk < cv->K ? cv->kk : cv->K) : kq;
}

/* The Col of a row block of rb output rows: its row stride, and whether a pass of it fits in
 * COL_BYTES. */
static bool col_rows(const gm_cfg *c, const cg_conv_geom *cv, int64_t rb, int64_t *ld) {
  *ld = gm_pad_ld(c, cg_ceil_div(rb * cv->w.ow, c->nr) * c->nr);
  return k_pass(cv, c->esize) * *ld * c->esize <= COL_BYTES;
}

/* Cut a forward convolution into pieces of rb output rows by ob output channels. Each row
 * block reads all of the piece's weights again and each channel block builds its im2col
 * again, so the cut that repeats least of what costs most wins: ResNet-18's last layer (9.4 MB
 * of weights, a 7x7 output) is cut by channels with every row in one piece, its first
 * (147 KB of weights, 56x56) by rows; partial micro-tiles count as the FLOPs they waste. */
static void split_pieces(const gm_cfg *c, const cg_conv_geom *cv, bool pw, int64_t *rb,
                         int64_t *ob) {
  const dpc_window *w = &cv->w;
  double wb = (double)cv->opg * (double)cv->K * c->esize;
  double colb = (double)cv->K * (double)cv->P * c->esize;
  double w_bps = wb > L2_HALF ? W_FAR_BPS : W_NEAR_BPS;
  double flop = 2.0 * (double)cv->opg * (double)cv->P * (double)cv->K;
  bool can_cut = cv->n * w->groups < 2 && flop / 2 >= MIN_PIECE_FLOP;
  double best = -1;
  *rb = w->oh;
  *ob = cv->opg;
  for (int64_t r = w->oh; r >= 1; r--) {
    int64_t nblk = cg_ceil_div(w->oh, r);
    if (r != cg_ceil_div(w->oh, nblk)) continue; /* the same blocks, less even */
    /* K is cut to keep Col in COL_BYTES, and each cut sweeps the piece's output once more
     * (beyond the GEMM's own KC blocks); a single channel's taps must fit */
    int64_t ld = 0, kq = k_pass(cv, c->esize);
    if (!pw && r > 1 && !col_rows(c, cv, r, &ld)) continue;
    double sweeps =
        (double)(cg_ceil_div(cv->K, kq) > cg_ceil_div(cv->K, c->kc) ? cg_ceil_div(cv->K, kq)
                                                                    : cg_ceil_div(cv->K, c->kc));
    int64_t prev = -1;
    for (int64_t nob = 1; nob <= cg_ceil_div(cv->opg, c->mr); nob++) {
      int64_t o = cg_ceil_div(cg_ceil_div(cv->opg, nob), c->mr) * c->mr;
      if (o == prev) continue;
      prev = o;
      int64_t nob_real = cg_ceil_div(cv->opg, o), pieces = cv->n * w->groups * nblk * nob_real;
      if (can_cut && !gm_pieces_shared(pieces)) continue;
      if (pieces > 1 && flop / (double)(nblk * nob_real) < MIN_PIECE_FLOP) continue;
      /* FLOPs the micro-tiles compute, padding included */
      double cols = 0, rows = 0;
      for (int64_t b = 0; b < nblk; b++)
        cols +=
            (double)(cg_ceil_div((w->oh - b * r < r ? w->oh - b * r : r) * w->ow, c->nr) * c->nr);
      for (int64_t b = 0; b < nob_real; b++)
        rows += (double)(cg_ceil_div(cv->opg - b * o < o ? cv->opg - b * o : o, c->mr) * c->mr);
      double cb = (double)o * (double)(r * w->ow) * c->esize; /* a piece's output */
      double t = (double)nblk * wb / w_bps + (double)nob_real * colb / COL_BPS +
                 sweeps * 2.0 * (double)cv->opg * (double)cv->P * c->esize /
                     (cb > L2_HALF ? COL_BPS : W_NEAR_BPS) +
                 2.0 * rows * cols * (double)cv->K / FLOP_PER_S;
      if (best < 0 || t < best) {
        best = t;
        *rb = r;
        *ob = o;
      }
    }
  }
}
/* ---- several images per GEMM, for small output planes ----------------------------------------
 *
 * A forward convolution whose output plane is small (ResNet-18's last layers at 32x32 inputs
 * have 2x2 and 1x1 planes) made one GEMM per image with as many columns as pixels: one of a
 * micro-tile's 32 columns used, and the whole weight matrix streamed once per image (72 ms of a
 * 740 ms ResNet-18 training step on a layer the cost model gives 1.4). Here a piece takes a
 * block of images instead: their Cols side by side make the GEMM's columns, its result goes to a
 * scratch of [channels, images x pixels] and from there to each image's planes (where the
 * epilogue runs on them). */

/* Columns a block of images aims at, and the planes below which images are blocked. */
#define IMG_COLS 256

/* The Col row stride for nb images side by side: each image's im2col zeroes up to nr columns
 * past its own, so there is room for the last one's. */
static int64_t img_ld(const gm_cfg *c, const cg_conv_geom *cv, int64_t nb) {
  return gm_pad_ld(c, cg_ceil_div(nb * cv->P, c->nr) * c->nr + c->nr);
}

/* The Cols of taps [q0, q0 + nq) of images [b0, b0 + bn) side by side, image i's from column
 * i*P (each zeroes past its own columns, which the next one overwrites). */
static void im2col_images(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val x, cg_val b0,
                          cg_val bn, cg_val grp, cg_val q0, cg_val nq, bool whole, cg_val col,
                          int64_t ld) {
  const dpc_window *w = &cv->w;
  cg_loop im = cg_loop_begin(f, cg_const_i64(0), bn);
  cg_val plane0 = cg_add(f, cg_mulk(f, cg_add(f, b0, im.i), w->c), cg_mulk(f, grp, cv->cpg));
  cg_im2col_taps(f, c, cv, x, plane0, q0, nq, whole, cg_const_i64(0), cg_const_i64(w->oh),
                 gm_gep(f, c->ty, col, cg_mulk(f, im.i, cv->P), true), ld);
  cg_loop_end(f, im);
}

/* Whether f32 weights are read where they lie (gm_mat.direct for A) when cut into channel
 * blocks of ob: every block must have a whole micro-tile of rows (packing them for each piece
 * was a quarter of ResNet-18's 3x3 layers). */
static bool weights_in_place(const gm_cfg *c, const cg_conv_geom *cv, int64_t ob) {
  return gm_vec_ok(c, cv->t) && cv->t == c->calc &&
         cv->opg - (cg_ceil_div(cv->opg, ob) - 1) * ob >= c->mr;
}

/* Images per piece: 1 (one image per GEMM) unless planes are small and there are several; at
 * most as many as IMG_COLS columns hold and a pass of their Col fits COL_BYTES, and blocks of
 * equal size where that costs at most half of them: MobileNetV2's 7x7 planes at batch 8 made
 * blocks of 5 and 3 images, which two cores shared as 5:3 (1.6x on two threads, not 1.9x). */
static int64_t images_per_piece(const gm_cfg *c, const cg_conv_geom *cv) {
  if (cv->n < 2 || cv->P * 2 > IMG_COLS) return 1;
  int64_t nb = IMG_COLS / cv->P, kq = k_pass(cv, c->esize);
  if (nb > cv->n) nb = cv->n;
  while (nb > 1 && kq * img_ld(c, cv, nb) * c->esize > COL_BYTES) nb--;
  for (int64_t e = nb; e > 1 && 2 * e >= nb; e--)
    if (cv->n % e == 0) return e;
  return cg_ceil_div(cv->n, cg_ceil_div(cv->n, nb)); /* the blocks as even as they come */
}

static dpc_status lower_conv2d_images(cg_kernel *k, const cg_conv_geom *cv, int64_t nb,
                                      dpc_diag *d) {
  cg_fn *f = k->f;
  const dpc_window *w = &cv->w;
  int64_t cols = nb * cv->P, nimg = cg_ceil_div(cv->n, nb);
  gm_cfg c;
  gm_choose(&c, f->vector_bits, cv->t, cv->opg, cols, cv->K);
  /* channel blocks until two cores have work (an even count of pieces, or 8) */
  int64_t ob = cv->opg;
  for (;;) {
    int64_t pieces = nimg * w->groups * cg_ceil_div(cv->opg, ob);
    if (gm_pieces_shared(pieces) || ob <= c.mr) break;
    ob = cg_ceil_div(cg_ceil_div(ob, 2), c.mr) * c.mr;
  }
  int64_t nob = cg_ceil_div(cv->opg, ob);
  /* each image's im2col zeroes up to nr columns past its own: room for the last one's */
  int64_t ld = img_ld(&c, cv, nb), kq = k_pass(cv, c.esize);
  int64_t ldc = gm_pad_ld(&c, cg_ceil_div(cols, c.nr) * c.nr);
  gm_fit(&c, ob, cols);
  k->total = nimg * w->groups * nob;
  if (k->total == 0) return DPC_OK;
  const char *st_ty = cg_store_type(cv->t);
  cg_val x = cg_arg_ptr(f, 0, cv->t), wt = cg_arg_ptr(f, 1, cv->t),
         y = cg_arg_ptr(f, cg_out_arg(f), cv->t);
  cg_val col = gm_alloca(f, c.ty, kq * ld), cbuf = gm_alloca(f, c.ty, ob * ldc);
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  int64_t radix[3] = {nimg, w->groups, nob};
  cg_val dg[3]; /* image block, group, channel block */
  digits(f, it.i, radix, 3, dg);
  cg_val b0 = cg_mulk(f, dg[0], nb);
  cg_val bn = gm_min(f, cg_const_i64(nb), gm_sub(f, cg_const_i64(cv->n), b0));
  cg_val ncols = cg_mulk(f, bn, cv->P);
  cg_val o0 = cg_mulk(f, dg[2], ob);
  cg_val ocur = gm_min(f, cg_const_i64(ob), gm_sub(f, cg_const_i64(cv->opg), o0));
  cg_val wrow = cg_add(f, cg_mulk(f, dg[1], cv->opg), o0);
  bool w_direct = weights_in_place(&c, cv, ob);
  bool whole = cg_plane_ok(&c, cv, w->oh);
  cg_loop qc = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cg_ceil_div(cv->K, kq)));
  cg_val q0 = cg_mulk(f, qc.i, kq);
  cg_val nq = gm_min(f, cg_const_i64(kq), gm_sub(f, cg_const_i64(cv->K), q0));
  im2col_images(f, &c, cv, x, b0, bn, dg[1], q0, nq, whole, col, ld); /* kq: whole channels */
  cg_zero_tail(f, &c, col, ld, nq, ncols);
  gm_mat A = {gm_gep(f, st_ty, wt, cg_add(f, cg_mulk(f, wrow, cv->K), q0), true), cv->t, cv->K, 1,
              w_direct};
  gm_mat B = {col, c.calc, ld, 1, true, true};
  gm_mat C = {cbuf, c.calc, ldc, 1, false};
  gm_block(f, &c, &A, &B, &C, ocur, ncols, nq, gm_ev(f, "icmp sgt i64 %s, 0", qc.i.s));
  cg_loop_end(f, qc);
  /* the scratch's columns [i*P, (i+1)*P) are image b0+i's planes */
  cg_loop out = cg_loop_begin(f, cg_const_i64(0), bn);
  cg_val obase =
      cg_add(f, cg_add(f, cg_mulk(f, cg_add(f, b0, out.i), w->oc), cg_mulk(f, dg[1], cv->opg)), o0);
  cg_loop o = cg_loop_begin(f, cg_const_i64(0), ocur);
  cg_val src =
      gm_gep(f, c.ty, cbuf, cg_add(f, cg_mulk(f, o.i, ldc), cg_mulk(f, out.i, cv->P)), true);
  cg_val yrow = cg_mulk(f, cg_add(f, obase, o.i), cv->P);
  cg_loop px = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cv->P));
  cg_val v = gm_ev(f, "load %s, %s* %s", c.ty, c.ty, gm_gep(f, c.ty, src, px.i, true).s);
  cg_store(f, y, cv->t, cg_add(f, yrow, px.i), v);
  cg_loop_end(f, px);
  cg_loop_end(f, o);
  if (f->grp) {
    dpc_status st = cg_epilogue_block(f, 1, obase, cg_add(f, obase, ocur), cg_const_i64(0),
                                      cg_const_i64(cv->P), d);
    if (st) return st;
  }
  cg_loop_end(f, out);
  cg_loop_end(f, it);
  return DPC_OK;
}

static dpc_status lower_conv2d(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  cg_conv_geom cv;
  dpc_status st = cg_conv_init(f, &cv, d);
  if (st) return st;
  const dpc_window *w = &cv.w;
  if (cg_conv_direct_fits(w, cv.t, f->vector_bits)) return cg_lower_conv_direct(k, w, d);
  if (cg_conv_winograd_fits(w, cv.t, f->vector_bits)) return cg_lower_conv_winograd(k, w, d);
  bool pw = pointwise(w);
  gm_cfg c;
  gm_choose(&c, f->vector_bits, cv.t, cv.opg, cv.P, cv.K);
  int64_t nb = images_per_piece(&c, &cv);
  if (nb > 1) return lower_conv2d_images(k, &cv, nb, d);
  int64_t rb = w->oh, ld = 0, kq = k_pass(&cv, c.esize), ob = cv.opg;
  split_pieces(&c, &cv, pw, &rb, &ob);
  if (!pw) col_rows(&c, &cv, rb, &ld);
  gm_fit(&c, ob, rb * w->ow);
  int64_t nblk = cg_ceil_div(w->oh, rb), nob = cg_ceil_div(cv.opg, ob);
  k->total = cv.n * w->groups * nob * nblk;
  if (k->total == 0) return DPC_OK;
  const char *st_ty = cg_store_type(cv.t);
  cg_val x = cg_arg_ptr(f, 0, cv.t), wt = cg_arg_ptr(f, 1, cv.t),
         y = cg_arg_ptr(f, cg_out_arg(f), cv.t);
  cg_val col = pw ? x : gm_alloca(f, c.ty, kq * ld);
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  int64_t radix[4] = {cv.n, w->groups, nob, nblk};
  cg_val dg[4]; /* image, group, channel block, row block */
  digits(f, it.i, radix, 4, dg);
  cg_val oy0 = cg_mulk(f, dg[3], rb);
  cg_val nrows = gm_min(f, cg_const_i64(rb), gm_sub(f, cg_const_i64(w->oh), oy0));
  cg_val o0 = cg_mulk(f, dg[2], ob); /* within the group */
  cg_val ocur = gm_min(f, cg_const_i64(ob), gm_sub(f, cg_const_i64(cv.opg), o0));
  cg_val plane0 = cg_add(f, cg_mulk(f, dg[0], w->c), cg_mulk(f, dg[1], cv.cpg));
  /* first output plane of the piece */
  cg_val obase = cg_add(f, cg_add(f, cg_mulk(f, dg[0], w->oc), cg_mulk(f, dg[1], cv.opg)), o0);
  cg_val yoff = cg_add(f, cg_mulk(f, obase, cv.P), cg_mulk(f, oy0, w->ow));
  gm_mat C = {gm_gep(f, st_ty, y, yoff, true), cv.t, cv.P, 1, false};
  cg_val wrow = cg_add(f, cg_mulk(f, dg[1], cv.opg), o0); /* the piece's first row of W */
  bool w_direct = weights_in_place(&c, &cv, ob);
  /* fused: the bias, activation... on the output, y seen as [n * oc, oh * ow]: on each GEMM
   * tile as it is finished, in vector registers, where the chain allows; else on the piece's
   * output rows once they are all done */
  cg_val c0 = cg_mulk(f, oy0, w->ow);
  cg_tile_epi te;
  bool per_tile = f->grp && gm_vec_ok(&c, cv.t) && cg_tile_epi_init(&te, f, 1, obase, c0);
  int64_t npass = cg_ceil_div(cv.K, kq);
  cg_loop qc = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(npass));
  gm_tile_hook hook = {cg_epilogue_vec, &te, {{0}}};
  if (per_tile) hook.last = gm_ev(f, "icmp eq i64 %s, %lld", qc.i.s, (long long)(npass - 1));
  const gm_tile_hook *hp = per_tile ? &hook : NULL;
  cg_val q0 = cg_mulk(f, qc.i, kq);
  cg_val nq = gm_min(f, cg_const_i64(kq), gm_sub(f, cg_const_i64(cv.K), q0));
  cg_val acc = gm_ev(f, "icmp sgt i64 %s, 0", qc.i.s);
  gm_mat A = {gm_gep(f, st_ty, wt, cg_add(f, cg_mulk(f, wrow, cv.K), q0), true), cv.t, cv.K, 1,
              w_direct};
  if (pw) {
    /* the pass's input channels as they lie: B[ci, pixel] */
    cg_val xoff = cg_add(f, cg_mulk(f, cg_add(f, plane0, q0), cv.P), cg_mulk(f, oy0, w->ow));
    /* up to 64 output channels, the input planes are read in place, as matmul reads a thin
     * product's B: packing them copies activations that a network wrote long before (from
     * memory at batch 8) for a product too thin to repay it (MobileNetV2's 32 to 16 channels at
     * 112x112: 0.167 to 0.136 ms; at batch 8, 144 to 24 at 56x56 3.07 to 2.07 ms, 192 to 32 at
     * 28x28 1.11 to 0.85). Past 64 channels packing is as fast or faster (96 and 160 channels
     * even, 576 at 14x14 2.07 to 2.22 ms in place) */
    bool thin_b = ob <= 64 && gm_vec_ok(&c, cv.t);
    gm_mat B = {gm_gep(f, st_ty, x, xoff, true), cv.t, cv.P, 1, thin_b};
    st = gm_block_then(f, &c, &A, &B, &C, ocur, cg_mulk(f, nrows, w->ow), nq, acc, hp, d);
  } else {
    /* kq is whole channels (k_pass) */
    cg_im2col_taps(f, &c, &cv, x, plane0, q0, nq, cg_plane_ok(&c, &cv, rb), oy0, nrows, col, ld);
    gm_mat B = {col, c.calc, ld, 1, true, true};
    st = gm_block_then(f, &c, &A, &B, &C, ocur, cg_mulk(f, nrows, w->ow), nq, acc, hp, d);
  }
  if (st) return st;
  cg_loop_end(f, qc);
  if (f->grp && !per_tile) {
    st = cg_epilogue_block(f, 1, obase, cg_add(f, obase, ocur), c0,
                           cg_add(f, c0, cg_mulk(f, nrows, w->ow)), d);
    if (st) return st;
  }
  cg_loop_end(f, it);
  return DPC_OK;
}

/* buf[ch][i*P + p] = src[((b0 + i)*planes + ch0 + ch)*P + p] for bn images and nch channels:
 * the planes of a block of images side by side, calc-typed, the rows' tails zeroed up to the
 * next nr (the GEMM reads whole vectors there). */
static void gather_planes(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val src,
                          int64_t planes, cg_val b0, cg_val bn, cg_val ch0, cg_val nch, cg_val buf,
                          int64_t ldb) {
  cg_loop ch = cg_loop_begin(f, cg_const_i64(0), nch);
  cg_loop i = cg_loop_begin(f, cg_const_i64(0), bn);
  cg_val from =
      cg_mulk(f, cg_add(f, cg_mulk(f, cg_add(f, b0, i.i), planes), cg_add(f, ch0, ch.i)), cv->P);
  cg_val to = gm_gep(f, c->ty, buf, cg_add(f, cg_mulk(f, ch.i, ldb), cg_mulk(f, i.i, cv->P)), true);
  cg_loop px = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cv->P));
  cg_val v = cg_load(f, src, cv->t, cg_add(f, from, px.i));
  cg_line(f, "store %s %s, %s* %s", c->ty, v.s, c->ty, gm_gep(f, c->ty, to, px.i, true).s);
  cg_loop_end(f, px);
  cg_loop_end(f, i);
  cg_loop_end(f, ch);
  cg_zero_tail(f, c, buf, ldb, nch, cg_mulk(f, bn, cv->P));
}

/* The input gradient of small planes, a block of images per piece: dY of the block gathered
 * side by side, dCol = W^T dY for all of them in one GEMM per pass of taps, then each image's
 * columns summed into its dx (f32 and f64; f16/bf16 take the per-image path). */
static dpc_status lower_grad_input_images(cg_kernel *k, const cg_conv_geom *cv, int64_t nb) {
  cg_fn *f = k->f;
  const dpc_window *w = &cv->w;
  /* pieces are blocks of images (col2im of two pieces must not meet in dx): smaller blocks
   * until two cores have an even share (ResNet-18's 1x1 planes at batch 128 were one piece) */
  for (;;) {
    int64_t p = cg_ceil_div(cv->n, nb) * w->groups;
    if (nb == 1 || gm_pieces_shared(p)) break;
    nb = cg_ceil_div(cv->n, cg_ceil_div(cv->n, nb) + 1);
  }
  int64_t cols = nb * cv->P, nimg = cg_ceil_div(cv->n, nb), plane = w->h * w->w;
  gm_cfg c;
  gm_choose(&c, f->vector_bits, cv->t, cv->K, cols, cv->opg);
  int64_t ld = img_ld(&c, cv, nb), kq = k_pass(cv, c.esize);
  int64_t ldb = gm_pad_ld(&c, cg_ceil_div(cols, c.nr) * c.nr);
  gm_fit(&c, kq, cols);
  k->total = nimg * w->groups;
  if (k->total == 0) return DPC_OK;
  const char *st_ty = cg_store_type(cv->t);
  cg_val dy = cg_arg_ptr(f, 0, cv->t), wt = cg_arg_ptr(f, 1, cv->t), dx = cg_arg_ptr(f, 3, cv->t);
  cg_val col = gm_alloca(f, c.ty, kq * ld), dyb = gm_alloca(f, c.ty, cv->opg * ldb);
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  int64_t radix[2] = {nimg, w->groups};
  cg_val dg[2]; /* image block, group */
  digits(f, it.i, radix, 2, dg);
  cg_val b0 = cg_mulk(f, dg[0], nb);
  cg_val bn = gm_min(f, cg_const_i64(nb), gm_sub(f, cg_const_i64(cv->n), b0));
  gather_planes(f, &c, cv, dy, w->oc, b0, bn, cg_mulk(f, dg[1], cv->opg), cg_const_i64(cv->opg),
                dyb, ldb);
  cg_val dxp = gm_gep(f, c.ty, dx, cg_const_i64(0), true);
  cg_loop z = cg_loop_begin(f, cg_const_i64(0), bn);
  cg_val zbase = cg_mulk(
      f, cg_add(f, cg_mulk(f, cg_add(f, b0, z.i), w->c), cg_mulk(f, dg[1], cv->cpg)), plane);
  cg_loop e = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cv->cpg * plane));
  cg_line(f, "store %s %s, %s* %s", c.ty, cg_const(c.calc, 0).s, c.ty,
          gm_gep(f, c.ty, dxp, cg_add(f, zbase, e.i), true).s);
  cg_loop_end(f, e);
  cg_loop_end(f, z);
  cg_loop qc = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cg_ceil_div(cv->K, kq)));
  cg_val q0 = cg_mulk(f, qc.i, kq);
  cg_val nq = gm_min(f, cg_const_i64(kq), gm_sub(f, cg_const_i64(cv->K), q0));
  /* A(q, o) = w[group's o][q]: W^T, stored with q contiguous */
  gm_mat A = {gm_gep(f, st_ty, wt, cg_add(f, cg_mulk(f, dg[1], cv->opg * cv->K), q0), true), cv->t,
              1, cv->K, false};
  gm_mat B = {dyb, c.calc, ldb, 1, true, true};
  gm_mat C = {col, c.calc, ld, 1, false};
  gm_block(f, &c, &A, &B, &C, nq, cg_mulk(f, bn, cv->P), cg_const_i64(cv->opg), (cg_val){"false"});
  cg_loop im = cg_loop_begin(f, cg_const_i64(0), bn);
  cg_val plane0 = cg_add(f, cg_mulk(f, cg_add(f, b0, im.i), w->c), cg_mulk(f, dg[1], cv->cpg));
  cg_val src = gm_gep(f, c.ty, col, cg_mulk(f, im.i, cv->P), true);
  if (cg_rows_ok(&c, cv))
    cg_col2im_rows(f, &c, cv, dxp, plane0, q0, nq, cg_const_i64(0), cg_const_i64(w->oh), src, ld);
  else
    cg_col2im(f, &c, cv, dxp, plane0, q0, nq, cg_const_i64(0), cg_const_i64(w->oh), src, ld);
  cg_loop_end(f, im);
  cg_loop_end(f, qc);
  cg_loop_end(f, it);
  return DPC_OK;
}

static dpc_status lower_grad_input(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  cg_conv_geom cv;
  dpc_status st = cg_conv_init(f, &cv, d);
  if (st) return st;
  const dpc_window *w = &cv.w;
  if (cg_conv_winograd_grad_input_fits(w, cv.t, f->vector_bits))
    return cg_lower_conv_winograd_grad_input(k, w, d);
  gm_cfg c;
  gm_choose(&c, f->vector_bits, cv.t, cv.K, cv.P, cv.opg);
  int64_t nb = gm_vec_ok(&c, cv.t) ? images_per_piece(&c, &cv) : 1;
  if (nb > 1) return lower_grad_input_images(k, &cv, nb);
  int64_t rb, ld, kq;
  col_block(&c, &cv, cv.K, &rb, &ld, &kq);
  gm_fit(&c, kq, rb * w->ow);
  int64_t nblk = cg_ceil_div(w->oh, rb), plane = w->h * w->w, group = cv.cpg * plane;
  k->total = cv.n * w->groups;
  if (k->total == 0) return DPC_OK;
  const char *st_ty = cg_store_type(cv.t);
  cg_val dy = cg_arg_ptr(f, 0, cv.t), wt = cg_arg_ptr(f, 1, cv.t), dx = cg_arg_ptr(f, 3, cv.t);
  cg_val col = gm_alloca(f, c.ty, kq * ld);
  /* f16/bf16: sum in an f32 copy of the group's planes, rounded into dx once */
  bool scratch = !gm_vec_ok(&c, cv.t);
  cg_val sbuf = scratch ? gm_alloca(f, c.ty, group) : dx;
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  int64_t radix[2] = {cv.n, w->groups};
  cg_val dg[2]; /* image, group */
  digits(f, it.i, radix, 2, dg);
  cg_val plane0 = cg_add(f, cg_mulk(f, dg[0], w->c), cg_mulk(f, dg[1], cv.cpg));
  cg_val obase = cg_add(f, cg_mulk(f, dg[0], w->oc), cg_mulk(f, dg[1], cv.opg));
  /* the planes summed into: dx's own (calc-typed) or the scratch, addressed from plane 0 */
  cg_val acc_base = scratch ? cg_const_i64(0) : plane0;
  cg_val accp = scratch ? sbuf : gm_gep(f, c.ty, dx, cg_const_i64(0), true);
  cg_val zero0 = cg_mulk(f, acc_base, plane);
  cg_loop z = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(group));
  cg_line(f, "store %s %s, %s* %s", c.ty, cg_const(c.calc, 0).s, c.ty,
          gm_gep(f, c.ty, accp, cg_add(f, zero0, z.i), true).s);
  cg_loop_end(f, z);
  cg_loop blk = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(nblk));
  cg_val oy0 = cg_mulk(f, blk.i, rb);
  cg_val nrows = gm_min(f, cg_const_i64(rb), gm_sub(f, cg_const_i64(w->oh), oy0));
  cg_loop qc = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cg_ceil_div(cv.K, kq)));
  cg_val q0 = cg_mulk(f, qc.i, kq);
  cg_val nq = gm_min(f, cg_const_i64(kq), gm_sub(f, cg_const_i64(cv.K), q0));
  /* A(q, o) = w[group's o][q]: W^T, stored with q contiguous */
  gm_mat A = {gm_gep(f, st_ty, wt, cg_add(f, cg_mulk(f, dg[1], cv.opg * cv.K), q0), true), cv.t, 1,
              cv.K, false};
  gm_mat B = {
      gm_gep(f, st_ty, dy, cg_add(f, cg_mulk(f, obase, cv.P), cg_mulk(f, oy0, w->ow)), true), cv.t,
      cv.P, 1, false};
  gm_mat C = {col, c.calc, ld, 1, false};
  gm_block(f, &c, &A, &B, &C, nq, cg_mulk(f, nrows, w->ow), cg_const_i64(cv.opg),
           (cg_val){"false"});
  if (cg_rows_ok(&c, &cv))
    cg_col2im_rows(f, &c, &cv, accp, acc_base, q0, nq, oy0, nrows, col, ld);
  else
    cg_col2im(f, &c, &cv, accp, acc_base, q0, nq, oy0, nrows, col, ld);
  cg_loop_end(f, qc);
  cg_loop_end(f, blk);
  if (scratch) {
    cg_loop e = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(group));
    cg_val v = gm_ev(f, "load %s, %s* %s", c.ty, c.ty, gm_gep(f, c.ty, sbuf, e.i, true).s);
    cg_store(f, dx, cv.t, cg_add(f, cg_mulk(f, plane0, plane), e.i), v);
    cg_loop_end(f, e);
  }
  cg_loop_end(f, it);
  return DPC_OK;
}

/* One piece of the weight gradient (taps [q0, q0 + nq), channels from o0) summed over the batch
 * a block of ni images at a time: their Cols side by side (row stride ld) and their dYs gathered
 * the same way (ldb), so each GEMM sums over ni images' pixels. */
static void grad_weight_images(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, bool tr,
                               int64_t ni, cg_val x, cg_val dy, cg_val col, int64_t ld, cg_val dyb,
                               int64_t ldb, cg_val grp, cg_val q0, cg_val nq, cg_val o0,
                               const gm_mat *C, cg_val mcur, cg_val ncur) {
  const dpc_window *w = &cv->w;
  bool whole = cg_plane_ok(c, cv, w->oh) && (tr ? c->mmax : c->nmax) % cv->kk == 0;
  cg_loop ib = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cg_ceil_div(cv->n, ni)));
  cg_val b0 = cg_mulk(f, ib.i, ni);
  cg_val bn = gm_min(f, cg_const_i64(ni), gm_sub(f, cg_const_i64(cv->n), b0));
  im2col_images(f, c, cv, x, b0, bn, grp, q0, nq, whole, col, ld);
  gather_planes(f, c, cv, dy, w->oc, b0, bn, o0, tr ? ncur : mcur, dyb, ldb);
  gm_mat DY = {dyb, c->calc, ldb, 1, false}; /* dY[o, pixel] */
  gm_mat COL = {col, c->calc, ld, 1, false}; /* Col[q, pixel] */
  /* the pixels are the sum's index: the operand that has them as rows is transposed */
  gm_mat A = tr ? COL : DY, B = tr ? DY : COL;
  B.rs = 1;
  B.cs = tr ? ldb : ld;
  gm_block(f, c, &A, &B, C, mcur, ncur, cg_mulk(f, bn, cv->P),
           gm_ev(f, "icmp sgt i64 %s, 0", ib.i.s));
  cg_loop_end(f, ib);
}

static dpc_status lower_grad_weight(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  cg_conv_geom cv;
  dpc_status st = cg_conv_init(f, &cv, d);
  if (st) return st;
  const dpc_window *w = &cv.w;
  if (cg_conv_winograd_grad_weight_fits(w, cv.t, f->vector_bits))
    return cg_lower_conv_winograd_grad_weight(k, w, d);
  if (cg_conv_wgrad_dot_fits(&cv, f->vector_bits)) return cg_lower_conv_wgrad_dot(k, &cv, d);
  /* dW[o, q], or dW^T[q, o] when the tile fits that better: the first layer of the CNN (32 x 9)
   * in f16, or on a target the dot products do not take, where 9 taps would fill 9 of 16 lanes
   * and 32 channels fill 2 vectors exactly */
  gm_cfg c, ct;
  gm_choose(&c, f->vector_bits, cv.t, cv.opg, cv.K, cv.P);
  gm_choose(&ct, f->vector_bits, cv.t, cv.K, cv.opg, cv.P);
  bool tr = ct.cost < 0.9 * c.cost;
  if (tr) c = ct;
  int64_t M = tr ? cv.K : cv.opg, N = tr ? cv.opg : cv.K;
  /* summed over the batch in a calc-type scratch when dW is f16/bf16 or transposed */
  bool scratch = tr || !gm_vec_ok(&c, cv.t);
  int64_t mb, nb;
  gm_split(&c, M, N, cv.n * cv.P, w->groups, scratch, &mb, &nb);
  gm_choose(&c, f->vector_bits, cv.t, mb, nb, cv.P);
  /* small planes: the sum over pixels runs over a block of images at a time, their Cols and
   * dYs side by side, instead of one image's few pixels per GEMM; its depth sets the GEMM's KC
   * (chosen for one 1x1 plane, KC was 8: dW read and written 16 times a call) */
  int64_t ni = gm_vec_ok(&c, cv.t) ? images_per_piece(&c, &cv) : 1, ldb = 0;
  if (ni > 1) gm_choose(&c, f->vector_bits, cv.t, mb, nb, ni * cv.P);
  int64_t rb, ld, kq;
  col_block(&c, &cv, tr ? mb : nb, &rb, &ld, &kq);
  (void)kq; /* all of a piece's taps are built at once: they are at most the GEMM's MC or NC */
  if (ni > 1) {
    rb = w->oh;
    ld = img_ld(&c, &cv, ni);
    ldb = gm_pad_ld(&c, cg_ceil_div(ni * cv.P, c.nr) * c.nr);
  }
  gm_fit(&c, mb, nb);
  int64_t tm = cg_ceil_div(M, mb), tn = cg_ceil_div(N, nb), nblk = cg_ceil_div(w->oh, rb);
  k->total = w->groups * tm * tn;
  if (k->total == 0) return DPC_OK;
  const char *st_ty = cg_store_type(cv.t);
  cg_val dy = cg_arg_ptr(f, 0, cv.t), x = cg_arg_ptr(f, 1, cv.t), dw = cg_arg_ptr(f, 3, cv.t);
  cg_val col = gm_alloca(f, c.ty, (tr ? mb : nb) * ld);
  cg_val dyb = ni > 1 ? gm_alloca(f, c.ty, (tr ? nb : mb) * ldb) : col;
  int64_t lds = gm_pad_ld(&c, nb);
  cg_val sbuf = scratch ? gm_alloca(f, c.ty, mb * lds) : dw;
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  int64_t radix[3] = {w->groups, tm, tn};
  cg_val dg[3]; /* group, row block, column block */
  digits(f, it.i, radix, 3, dg);
  cg_val m0 = cg_mulk(f, dg[1], mb), n0 = cg_mulk(f, dg[2], nb);
  cg_val mcur = gm_min(f, cg_const_i64(mb), gm_sub(f, cg_const_i64(M), m0));
  cg_val ncur = gm_min(f, cg_const_i64(nb), gm_sub(f, cg_const_i64(N), n0));
  cg_val q0 = tr ? m0 : n0, nq = tr ? mcur : ncur;                /* the piece's taps */
  cg_val o0 = cg_add(f, cg_mulk(f, dg[0], cv.opg), tr ? n0 : m0); /* its first channel */
  cg_val dwoff = cg_add(f, cg_mulk(f, o0, cv.K), q0);
  gm_mat C = scratch ? (gm_mat){sbuf, c.calc, lds, 1, false}
                     : (gm_mat){gm_gep(f, st_ty, dw, dwoff, true), cv.t, cv.K, 1, false};
  if (ni > 1) {
    grad_weight_images(f, &c, &cv, tr, ni, x, dy, col, ld, dyb, ldb, dg[0], q0, nq, o0, &C, mcur,
                       ncur);
  } else {
    cg_loop b = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(cv.n));
    cg_val plane0 = cg_add(f, cg_mulk(f, b.i, w->c), cg_mulk(f, dg[0], cv.cpg));
    cg_loop blk = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(nblk));
    cg_val oy0 = cg_mulk(f, blk.i, rb);
    cg_val nrows = gm_min(f, cg_const_i64(rb), gm_sub(f, cg_const_i64(w->oh), oy0));
    /* whole planes when the pieces are whole channels */
    cg_im2col_taps(f, &c, &cv, x, plane0, q0, nq,
                   cg_plane_ok(&c, &cv, rb) && (tr ? mb : nb) % cv.kk == 0, oy0, nrows, col, ld);
    cg_val dyoff =
        cg_add(f, cg_mulk(f, cg_add(f, cg_mulk(f, b.i, w->oc), o0), cv.P), cg_mulk(f, oy0, w->ow));
    gm_mat DY = {gm_gep(f, st_ty, dy, dyoff, true), cv.t, cv.P, 1, false}; /* dY[o, pixel] */
    gm_mat COL = {col, c.calc, ld, 1, false};                              /* Col[q, pixel] */
    /* the pixels are the sum's index: the operand that has them as rows is transposed */
    gm_mat A = tr ? COL : DY, B = tr ? DY : COL;
    B.rs = 1;
    B.cs = tr ? cv.P : ld;
    cg_val acc = gm_ev(f, "or i1 %s, %s", gm_ev(f, "icmp sgt i64 %s, 0", b.i.s).s,
                       gm_ev(f, "icmp sgt i64 %s, 0", blk.i.s).s);
    gm_block(f, &c, &A, &B, &C, mcur, ncur, cg_mulk(f, nrows, w->ow), acc);
    cg_loop_end(f, blk);
    cg_loop_end(f, b);
  }
  if (scratch) {
    cg_loop i = cg_loop_begin(f, cg_const_i64(0), mcur);
    cg_loop j = cg_loop_begin(f, cg_const_i64(0), ncur);
    cg_val v = gm_ev(f, "load %s, %s* %s", c.ty, c.ty,
                     gm_gep(f, c.ty, sbuf, cg_add(f, cg_mulk(f, i.i, lds), j.i), true).s);
    cg_val o = tr ? j.i : i.i, q = tr ? i.i : j.i;
    cg_store(f, dw, cv.t, cg_add(f, dwoff, cg_add(f, cg_mulk(f, o, cv.K), q)), v);
    cg_loop_end(f, j);
    cg_loop_end(f, i);
  }
  cg_loop_end(f, it);
  return DPC_OK;
}

const cg_lower_fn cg_window_table[DPC_OP_COUNT] = {
    [DPC_OP_CONV2D] = lower_conv2d,
    [DPC_OP_CONV2D_GRAD_INPUT] = lower_grad_input,
    [DPC_OP_CONV2D_GRAD_WEIGHT] = lower_grad_weight,
};
