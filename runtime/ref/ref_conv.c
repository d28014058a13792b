/*
 * ref_conv.c — reference kernels for conv2d and its two gradients.
 *
 * Each output element's sum is formed in a double and stored once, in a fixed order, as in the
 * other reference kernels. The loops are arranged so the innermost one runs along a row of the
 * image (contiguous when the stride is 1): a block of output rows is accumulated in a double
 * buffer on the stack while the taps (channel, ky, kx) go by. That keeps the oracle obvious and
 * makes it fast enough to train the example CNN, which the element-at-a-time loops were not.
 * Must not allocate, keep state or print.
 */
#include "runtime/ref/ref_internal.h"

/* Doubles in a block: rows of the plane being accumulated, and one loaded row segment. */
#define BLOCK 4096

/* The output columns [lo, hi) whose tap kx lands inside the input row: ox*sw - pl + kx*dw in
 * [0, w). */
static void tap_cols(const dpc_window *w, int64_t kx, int64_t *lo, int64_t *hi) {
  int64_t off = kx * w->dw - w->pl; /* input column of output column 0 */
  int64_t l = off >= 0 ? 0 : (-off + w->sw - 1) / w->sw;
  int64_t h = off >= w->w ? 0 : (w->w - 1 - off) / w->sw + 1;
  *lo = l;
  *hi = h < w->ow ? h : w->ow;
  if (*hi < *lo) *hi = *lo;
}

/* y[b, o, oy, ox] = sum over ci, ky, kx of w[o, ci, ky, kx] * x[b, c0 + ci, iy, ix],
 * iy = oy*sh - pt + ky*dh, ix = ox*sw - pl + kx*dw, positions outside x contributing nothing. */
dpc_status dpc_ref_conv2d(const dpc_kernel_args *a, dpc_diag *d) {
  dpc_window w;
  dpc_status st = dpc_window_of(a->g, a->node, &w, d);
  if (st) return st;
  const dpc_tensor *x = &a->in[0], *k = &a->in[1];
  dpc_tensor *y = &a->out[0];
  int64_t n = x->shape.d[0], cpg = w.c / w.groups, opg = w.oc / w.groups;
  int64_t cols = w.ow < BLOCK ? w.ow : BLOCK, rows = BLOCK / (cols ? cols : 1);
  double acc[BLOCK], seg[BLOCK];
  for (int64_t b = 0; b < n; b++) {
    for (int64_t o = 0; o < w.oc; o++) {
      int64_t c0 = (o / opg) * cpg, ybase = (b * w.oc + o) * w.oh;
      for (int64_t x0 = 0; x0 < w.ow; x0 += cols) {
        int64_t x1 = x0 + cols < w.ow ? x0 + cols : w.ow;
        for (int64_t y0 = 0; y0 < w.oh; y0 += rows) {
          int64_t y1 = y0 + rows < w.oh ? y0 + rows : w.oh;
          for (int64_t i = 0; i < (y1 - y0) * cols; i++) acc[i] = 0;
          for (int64_t ci = 0; ci < cpg; ci++) {
            int64_t xbase = (b * w.c + c0 + ci) * w.h;
            for (int64_t ky = 0; ky < w.kh; ky++) {
              for (int64_t kx = 0; kx < w.kw; kx++) {
                double wv = dpc_tload(k, ((o * cpg + ci) * w.kh + ky) * w.kw + kx);
                int64_t lo, hi;
                tap_cols(&w, kx, &lo, &hi);
                if (lo < x0) lo = x0;
                if (hi > x1) hi = x1;
                if (lo >= hi) continue;
                for (int64_t oy = y0; oy < y1; oy++) {
                  int64_t iy = oy * w.sh - w.pt + ky * w.dh;
                  if (iy < 0 || iy >= w.h) continue;
                  dpc_ref_load(x, (xbase + iy) * w.w + lo * w.sw - w.pl + kx * w.dw, hi - lo, w.sw,
                               seg);
                  double *row = acc + (oy - y0) * cols + (lo - x0);
                  for (int64_t j = 0; j < hi - lo; j++) row[j] += wv * seg[j];
                }
              }
            }
          }
          for (int64_t oy = y0; oy < y1; oy++)
            dpc_ref_store(y, (ybase + oy) * w.ow + x0, x1 - x0, acc + (oy - y0) * cols);
        }
      }
    }
  }
  return DPC_OK;
}

/* dx[b, c, iy, ix] = sum over the outputs o of c's group, ky, kx of dy[b, o, oy, ox] *
 * w[o, c - c0, ky, kx] for every (oy, ox) whose tap (ky, kx) lands on (iy, ix). Accumulated a
 * block of input rows at a time, scattering each output row into the block. */
dpc_status dpc_ref_conv2d_grad_input(const dpc_kernel_args *a, dpc_diag *d) {
  dpc_window w;
  dpc_status st = dpc_window_of(a->g, a->node, &w, d);
  if (st) return st;
  const dpc_tensor *dy = &a->in[0], *k = &a->in[1];
  dpc_tensor *dx = &a->out[0];
  int64_t n = dx->shape.d[0], cpg = w.c / w.groups, opg = w.oc / w.groups;
  /* input rows are accumulated whole; rows longer than a block go one at a time in pieces */
  int64_t cols = w.w < BLOCK ? w.w : BLOCK, rows = BLOCK / (cols ? cols : 1);
  double acc[BLOCK], seg[BLOCK];
  for (int64_t b = 0; b < n; b++) {
    for (int64_t c = 0; c < w.c; c++) {
      int64_t o0 = (c / cpg) * opg, ci = c % cpg, xbase = (b * w.c + c) * w.h;
      for (int64_t x0 = 0; x0 < w.w; x0 += cols) {
        int64_t x1 = x0 + cols < w.w ? x0 + cols : w.w;
        for (int64_t y0 = 0; y0 < w.h; y0 += rows) {
          int64_t y1 = y0 + rows < w.h ? y0 + rows : w.h;
          for (int64_t i = 0; i < (y1 - y0) * cols; i++) acc[i] = 0;
          for (int64_t o = o0; o < o0 + opg; o++) {
            int64_t dybase = (b * w.oc + o) * w.oh;
            for (int64_t ky = 0; ky < w.kh; ky++) {
              for (int64_t kx = 0; kx < w.kw; kx++) {
                double wv = dpc_tload(k, ((o * cpg + ci) * w.kh + ky) * w.kw + kx);
                int64_t lo, hi;
                tap_cols(&w, kx, &lo, &hi);
                /* keep the output columns whose input column falls in [x0, x1) */
                int64_t off = kx * w.dw - w.pl;
                while (lo < hi && lo * w.sw + off < x0) lo++;
                while (hi > lo && (hi - 1) * w.sw + off >= x1) hi--;
                if (lo >= hi) continue;
                for (int64_t oy = 0; oy < w.oh; oy++) {
                  int64_t iy = oy * w.sh - w.pt + ky * w.dh;
                  if (iy < y0 || iy >= y1) continue;
                  dpc_ref_load(dy, (dybase + oy) * w.ow + lo, hi - lo, 1, seg);
                  double *row = acc + (iy - y0) * cols + (lo * w.sw + off - x0);
                  for (int64_t j = 0; j < hi - lo; j++) row[j * w.sw] += wv * seg[j];
                }
              }
            }
          }
          for (int64_t iy = y0; iy < y1; iy++)
            dpc_ref_store(dx, (xbase + iy) * w.w + x0, x1 - x0, acc + (iy - y0) * cols);
        }
      }
    }
  }
  return DPC_OK;
}

/* dw[o, ci, ky, kx] = sum over b, oy, ox of dy[b, o, oy, ox] * x[b, c0 + ci, iy, ix] for the
 * input positions the tap sees: a dot product of output rows with (strided) input rows. */
dpc_status dpc_ref_conv2d_grad_weight(const dpc_kernel_args *a, dpc_diag *d) {
  dpc_window w;
  dpc_status st = dpc_window_of(a->g, a->node, &w, d);
  if (st) return st;
  const dpc_tensor *dy = &a->in[0], *x = &a->in[1];
  dpc_tensor *dw = &a->out[0];
  int64_t n = x->shape.d[0], cpg = w.c / w.groups, opg = w.oc / w.groups;
  double sa[BLOCK], sb[BLOCK];
  for (int64_t o = 0; o < w.oc; o++) {
    int64_t c0 = (o / opg) * cpg;
    for (int64_t ci = 0; ci < cpg; ci++) {
      for (int64_t ky = 0; ky < w.kh; ky++) {
        for (int64_t kx = 0; kx < w.kw; kx++) {
          int64_t lo, hi;
          tap_cols(&w, kx, &lo, &hi);
          double acc = 0;
          for (int64_t b = 0; b < n; b++) {
            int64_t xbase = (b * w.c + c0 + ci) * w.h, dybase = (b * w.oc + o) * w.oh;
            for (int64_t oy = 0; oy < w.oh; oy++) {
              int64_t iy = oy * w.sh - w.pt + ky * w.dh;
              if (iy < 0 || iy >= w.h) continue;
              for (int64_t s = lo; s < hi; s += BLOCK) {
                int64_t m = hi - s < BLOCK ? hi - s : BLOCK;
                dpc_ref_load(dy, (dybase + oy) * w.ow + s, m, 1, sa);
                dpc_ref_load(x, (xbase + iy) * w.w + s * w.sw - w.pl + kx * w.dw, m, w.sw, sb);
                for (int64_t j = 0; j < m; j++) acc += sa[j] * sb[j];
              }
            }
          }
          dpc_tstore(dw, ((o * cpg + ci) * w.kh + ky) * w.kw + kx, acc);
        }
      }
    }
  }
  return DPC_OK;
}
