/*
 * ref_nn_grad.c — reference kernels for the gradients of the layers: max_pool2d_grad,
 * avg_pool2d_grad, batch_norm_grad and layer_norm_grad (the conv2d gradients are in ref_conv.c).
 *
 * Each is written straight from the adjoint of the forward loops in ref_nn.c, with the same
 * window geometry (dpc_window_of, which also reads the gradient ops), so forward and backward
 * can never disagree about which input positions a window covers. Every output element is
 * gathered — its whole sum formed in a double, then stored once — rather than scattered into
 * from the windows that touch it: that keeps one rounding per element, as the forward kernels
 * do, needs no zeroing pass, and lets an output share memory with nothing it still has to read.
 * The cost is recomputing a window's maximum or divisor once per input position it covers,
 * which is fine for the oracle. Must not allocate, keep state or print.
 */
#include "runtime/ref/ref_internal.h"

/* ---- pools ----------------------------------------------------------------------------------- */

/* The input position (iy * W + ix within the plane) that max_pool2d's window (oy, ox) takes its
 * value from: the first, row-major over (ky, kx), holding the maximum, or the first NaN. The
 * forward keeps exactly that value (v > m is strict, and a NaN sticks), so the gradient goes
 * where the value came from. Padding is never a candidate; the rule guarantees every window
 * holds an input position. */
static int64_t window_argmax(const dpc_tensor *x, const dpc_window *w, int64_t plane, int64_t oy,
                             int64_t ox) {
  double m = -INFINITY;
  int64_t best = -1;
  for (int64_t ky = 0; ky < w->kh; ky++) {
    int64_t iy = oy * w->sh - w->pt + ky * w->dh;
    if (iy < 0 || iy >= w->h) continue;
    for (int64_t kx = 0; kx < w->kw; kx++) {
      int64_t ix = ox * w->sw - w->pl + kx * w->dw;
      if (ix < 0 || ix >= w->w) continue;
      double v = dpc_tload(x, (plane * w->h + iy) * w->w + ix);
      /* best < 0: the first position wins even when every value is -inf */
      if (best < 0 || v > m || (v != v && m == m)) m = v, best = iy * w->w + ix;
    }
  }
  return best;
}

/* avg_pool2d's divisor for window (oy, ox), counted as the forward kernel counts it: the input
 * positions, or with count_include_pad the positions inside the padded input (a ceil_mode
 * window reaching past the bottom/right padding does not count what lies beyond). */
static int64_t window_divisor(const dpc_window *w, bool include_pad, int64_t oy, int64_t ox) {
  int64_t inside = 0, padded = 0;
  for (int64_t ky = 0; ky < w->kh; ky++) {
    int64_t iy = oy * w->sh - w->pt + ky * w->dh;
    for (int64_t kx = 0; kx < w->kw; kx++) {
      int64_t ix = ox * w->sw - w->pl + kx * w->dw;
      if (iy >= -w->pt && iy < w->h + w->pb && ix >= -w->pl && ix < w->w + w->pr) padded++;
      if (iy >= 0 && iy < w->h && ix >= 0 && ix < w->w) inside++;
    }
  }
  return include_pad ? padded : inside;
}

/* Both pool gradients: dx at an input position sums, over the windows that cover it, dy of the
 * window when the position is the window's argmax (max) or dy / divisor (avg). The windows
 * covering (iy, ix) are found from the taps: tap ky of window oy lands on iy when
 * iy + pt - ky*dh == oy*sh. */
static dpc_status pool_grad(const dpc_kernel_args *a, dpc_diag *d, bool is_max) {
  dpc_window w;
  dpc_status st = dpc_window_of(a->g, a->node, &w, d);
  if (st) return st;
  const dpc_tensor *dy = &a->in[0], *x = &a->in[1];
  dpc_tensor *dx = &a->out[0];
  bool include_pad = !is_max && dpc_attrs_int(dpc_ref_attrs(a), "count_include_pad") != 0;
  int64_t planes = x->shape.d[0] * w.c;
  for (int64_t pl = 0; pl < planes; pl++) {
    for (int64_t iy = 0; iy < w.h; iy++) {
      for (int64_t ix = 0; ix < w.w; ix++) {
        double acc = 0;
        for (int64_t ky = 0; ky < w.kh; ky++) {
          int64_t ty = iy + w.pt - ky * w.dh;
          if (ty < 0 || ty % w.sh || ty / w.sh >= w.oh) continue;
          for (int64_t kx = 0; kx < w.kw; kx++) {
            int64_t tx = ix + w.pl - kx * w.dw;
            if (tx < 0 || tx % w.sw || tx / w.sw >= w.ow) continue;
            int64_t oy = ty / w.sh, ox = tx / w.sw;
            double g = dpc_tload(dy, (pl * w.oh + oy) * w.ow + ox);
            if (is_max) {
              if (window_argmax(x, &w, pl, oy, ox) == iy * w.w + ix) acc += g;
            } else {
              acc += g / (double)window_divisor(&w, include_pad, oy, ox);
            }
          }
        }
        dpc_tstore(dx, (pl * w.h + iy) * w.w + ix, acc);
      }
    }
  }
  return DPC_OK;
}

dpc_status dpc_ref_max_pool2d_grad(const dpc_kernel_args *a, dpc_diag *d) {
  return pool_grad(a, d, true);
}

dpc_status dpc_ref_avg_pool2d_grad(const dpc_kernel_args *a, dpc_diag *d) {
  return pool_grad(a, d, false);
}

/* ---- normalisation ----------------------------------------------------------------------------
 */

/* Per channel, over M = N * spatial elements, with xhat = (x - mu) * rstd:
 *   dbias = sum dy, dscale = sum dy * xhat, and
 *   training:  dx = scale * rstd * (dy - dbias/M - xhat * dscale/M)  (mu, var from the batch:
 *              they depend on x, hence the two correction terms);
 *   inference: dx = scale * rstd * dy  (mu, var are the running statistics, constants). */
dpc_status dpc_ref_batch_norm_grad(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *dy = &a->in[0], *x = &a->in[1], *scale = &a->in[2];
  const dpc_tensor *mean_in = &a->in[3], *var_in = &a->in[4];
  dpc_tensor *dx = &a->out[0], *dscale = &a->out[1], *dbias = &a->out[2];
  double eps = dpc_attrs_float(dpc_ref_attrs(a), "epsilon");
  bool training = dpc_kernel_training(a);
  int64_t n = x->shape.d[0], c = x->shape.d[1];
  int64_t sp = dpc_ref_prod(&x->shape, 2, x->shape.rank), count = n * sp;
  for (int64_t ch = 0; ch < c; ch++) {
    double m = dpc_tload(mean_in, ch), v = dpc_tload(var_in, ch);
    if (training && count) {
      /* Two passes, as the forward, so both see the same statistics. */
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < n; b++)
        for (int64_t s = 0; s < sp; s++) sum += dpc_tload(x, (b * c + ch) * sp + s);
      m = sum / (double)count;
      for (int64_t b = 0; b < n; b++) {
        for (int64_t s = 0; s < sp; s++) {
          double e = dpc_tload(x, (b * c + ch) * sp + s) - m;
          sq += e * e;
        }
      }
      v = sq / (double)count;
    }
    double rstd = 1.0 / sqrt(v + eps), sb = 0, ss = 0;
    for (int64_t b = 0; b < n; b++) {
      for (int64_t s = 0; s < sp; s++) {
        int64_t i = (b * c + ch) * sp + s;
        double g = dpc_tload(dy, i);
        sb += g;
        ss += g * (dpc_tload(x, i) - m) * rstd;
      }
    }
    double k = dpc_tload(scale, ch) * rstd;
    for (int64_t b = 0; b < n; b++) {
      for (int64_t s = 0; s < sp; s++) {
        int64_t i = (b * c + ch) * sp + s;
        double g = dpc_tload(dy, i), xhat = (dpc_tload(x, i) - m) * rstd;
        double r = training ? k * (g - sb / (double)count - xhat * ss / (double)count) : k * g;
        dpc_tstore(dx, i, r);
      }
    }
    dpc_tstore(dscale, ch, ss);
    dpc_tstore(dbias, ch, sb);
  }
  return DPC_OK;
}

/* Mean and 1/sqrt(var + eps) of one row of `inner` elements, two passes as in the forward. */
static void row_stats(const dpc_tensor *x, int64_t base, int64_t inner, double eps, double *mean,
                      double *rstd) {
  double sum = 0, sq = 0;
  for (int64_t j = 0; j < inner; j++) sum += dpc_tload(x, base + j);
  double m = sum / (double)inner;
  for (int64_t j = 0; j < inner; j++) {
    double e = dpc_tload(x, base + j) - m;
    sq += e * e;
  }
  *mean = m;
  *rstd = 1.0 / sqrt(sq / (double)inner + eps);
}

#define LN_CHUNK 256 /* columns of dscale/dbias summed at once; 4 KiB of doubles on the stack */

/* Per row of the normalised dims (M elements), g = dy * scale:
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat));
 * and over the rows, dscale = sum dy * xhat, dbias = sum dy. The column sums are gathered a
 * chunk of columns at a time, recomputing each row's statistics per chunk instead of storing
 * them (no allocation). */
dpc_status dpc_ref_layer_norm_grad(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *dy = &a->in[0], *x = &a->in[1], *scale = &a->in[2];
  dpc_tensor *dx = &a->out[0], *dscale = &a->out[1], *dbias = &a->out[2];
  dpc_attrs at = dpc_ref_attrs(a);
  uint32_t rank = x->shape.rank;
  uint32_t ax = dpc_ref_axis(dpc_attrs_int(at, "axis"), rank);
  double eps = dpc_attrs_float(at, "epsilon");
  int64_t outer = dpc_ref_prod(&x->shape, 0, ax), inner = dpc_ref_prod(&x->shape, ax, rank);
  if (inner == 0) return DPC_OK; /* nothing was normalised: every output is empty */
  for (int64_t o = 0; o < outer; o++) {
    int64_t base = o * inner;
    double m, rstd, mg = 0, mgx = 0;
    row_stats(x, base, inner, eps, &m, &rstd);
    for (int64_t j = 0; j < inner; j++) {
      double g = dpc_tload(dy, base + j) * dpc_tload(scale, j);
      mg += g;
      mgx += g * (dpc_tload(x, base + j) - m) * rstd;
    }
    mg /= (double)inner, mgx /= (double)inner;
    for (int64_t j = 0; j < inner; j++) {
      double g = dpc_tload(dy, base + j) * dpc_tload(scale, j);
      double xhat = (dpc_tload(x, base + j) - m) * rstd;
      dpc_tstore(dx, base + j, rstd * (g - mg - xhat * mgx));
    }
  }
  double ss[LN_CHUNK], sb[LN_CHUNK];
  for (int64_t j0 = 0; j0 < inner; j0 += LN_CHUNK) {
    int64_t jn = inner - j0 < LN_CHUNK ? inner - j0 : LN_CHUNK;
    for (int64_t j = 0; j < jn; j++) ss[j] = sb[j] = 0;
    for (int64_t o = 0; o < outer; o++) {
      int64_t base = o * inner;
      double m, rstd;
      row_stats(x, base, inner, eps, &m, &rstd);
      for (int64_t j = 0; j < jn; j++) {
        double g = dpc_tload(dy, base + j0 + j);
        sb[j] += g;
        ss[j] += g * (dpc_tload(x, base + j0 + j) - m) * rstd;
      }
    }
    for (int64_t j = 0; j < jn; j++) {
      dpc_tstore(dscale, j0 + j, ss[j]);
      dpc_tstore(dbias, j0 + j, sb[j]);
    }
  }
  return DPC_OK;
}
