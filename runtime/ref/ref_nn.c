/*
 * ref_nn.c — reference kernels for the layers: matmul, max_pool2d, avg_pool2d,
 * batch_norm and layer_norm.
 *
 * Every sum is accumulated in double. Window geometry (output size, padding, stride, dilation,
 * ceil_mode) comes from dpc_window_of, the function the shape rule itself uses, so the kernel
 * can never disagree with shape inference. Matmul is blocked just enough to read rows of b
 * contiguously; nothing else is tuned, since these kernels are the oracle, not the fast path.
 * Must not allocate (accumulators are fixed-size stack arrays), keep state or print.
 */
#include "runtime/ref/ref_internal.h"

/* ---- matmul ------------------------------------------------------------------------------- */

#define MM_CHUNK 256 /* output columns accumulated at once; 4 KiB of doubles on the stack */

/* One [m, k] x [k, n] product. a is stored [m, k], or [k, m] when ta; b is stored [k, n], or
 * [n, k] when tb; the result is stored [m, n] at yoff. */
typedef struct mm_geom {
  int64_t m, k, n;
  bool ta, tb;
} mm_geom;

static void gemm(const mm_geom *g, const dpc_tensor *a, int64_t aoff, const dpc_tensor *b,
                 int64_t boff, dpc_tensor *y, int64_t yoff) {
  double acc[MM_CHUNK], row[MM_CHUNK];
  for (int64_t i = 0; i < g->m; i++) {
    for (int64_t j0 = 0; j0 < g->n; j0 += MM_CHUNK) {
      int64_t jn = g->n - j0 < MM_CHUNK ? g->n - j0 : MM_CHUNK;
      for (int64_t j = 0; j < jn; j++) acc[j] = 0;
      /* k outer, j inner: each step adds a scaled (contiguous, unless tb) row of b. */
      for (int64_t p = 0; p < g->k; p++) {
        double av = dpc_tload(a, aoff + (g->ta ? p * g->m + i : i * g->k + p));
        if (!g->tb)
          dpc_ref_load(b, boff + p * g->n + j0, jn, 1, row);
        else
          for (int64_t j = 0; j < jn; j++) row[j] = dpc_tload(b, boff + (j0 + j) * g->k + p);
        for (int64_t j = 0; j < jn; j++) acc[j] += av * row[j];
      }
      for (int64_t j = 0; j < jn; j++) dpc_tstore(y, yoff + i * g->n + j0 + j, acc[j]);
    }
  }
}

dpc_status dpc_ref_matmul(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d; /* matmul cannot fail once its shapes passed the rule */
  const dpc_tensor *ta = &a->in[0], *tb = &a->in[1];
  dpc_tensor *y = &a->out[0];
  dpc_attrs at = dpc_ref_attrs(a);
  mm_geom g = {0, 0, 0, dpc_attrs_int(at, "transpose_a") != 0,
               dpc_attrs_int(at, "transpose_b") != 0};
  /* Promote 1-D operands as NumPy does ([k] -> [1, k] for a, [k, 1] for b); the added dim is
   * absent from the output shape, which changes nothing about the layout. */
  dpc_shape sa = ta->shape, sb = tb->shape;
  bool a1 = sa.rank == 1, b1 = sb.rank == 1;
  if (a1) sa.rank = 2, sa.d[1] = sa.d[0], sa.d[0] = 1;
  if (b1) sb.rank = 2, sb.d[1] = 1;
  /* A vector has no second dimension to swap: transposing it is a no-op (as rule_matmul). */
  if (a1) g.ta = false;
  if (b1) g.tb = false;
  int64_t ar = sa.d[sa.rank - 2], ac = sa.d[sa.rank - 1];
  int64_t br = sb.d[sb.rank - 2], bc = sb.d[sb.rank - 1];
  g.m = g.ta ? ac : ar, g.k = g.ta ? ar : ac;
  g.n = g.tb ? br : bc;
  DPC_ASSERT(g.k == (g.tb ? bc : br));
  dpc_shape ba = {.rank = sa.rank - 2}, bb = {.rank = sb.rank - 2}, bo = {0};
  memcpy(ba.d, sa.d, ba.rank * sizeof(int64_t));
  memcpy(bb.d, sb.d, bb.rank * sizeof(int64_t));
  bo.rank = ba.rank > bb.rank ? ba.rank : bb.rank;
  for (uint32_t i = 0; i < bo.rank; i++) {
    int64_t u = i + ba.rank < bo.rank ? 1 : ba.d[i + ba.rank - bo.rank];
    int64_t v = i + bb.rank < bo.rank ? 1 : bb.d[i + bb.rank - bo.rank];
    bo.d[i] = u == 1 ? v : u;
  }
  int64_t nbatch = dpc_shape_numel(&bo);
  DPC_ASSERT(dpc_tensor_numel(y) == nbatch * g.m * g.n);
  dpc_ref_iter it;
  dpc_ref_iter_init(&it, &bo, 0, 0);
  dpc_ref_bcast_strides(&ba, &bo, it.stride[0]);
  dpc_ref_bcast_strides(&bb, &bo, it.stride[1]);
  /* Batch strides count matrices; scale them to elements. */
  for (uint32_t i = 0; i < bo.rank; i++) it.stride[0][i] *= ar * ac, it.stride[1][i] *= br * bc;
  for (int64_t t = 0; t < nbatch; t++, dpc_ref_iter_next(&it))
    gemm(&g, ta, it.off[0], tb, it.off[1], y, t * g.m * g.n);
  return DPC_OK;
}

/* ---- pools (conv2d is in ref_conv.c) ----------------------------------------------------------
 */

/* Both pools: for each output position, visit the window positions that fall inside the input
 * (padding is never a candidate for max and never a summand for avg). */
static dpc_status pool(const dpc_kernel_args *a, dpc_diag *d, bool is_max) {
  dpc_window w;
  dpc_status st = dpc_window_of(a->g, a->node, &w, d);
  if (st) return st;
  const dpc_tensor *x = &a->in[0];
  dpc_tensor *y = &a->out[0];
  bool include_pad = !is_max && dpc_attrs_int(dpc_ref_attrs(a), "count_include_pad") != 0;
  int64_t planes = x->shape.d[0] * w.c;
  for (int64_t pl = 0; pl < planes; pl++) {
    for (int64_t oy = 0; oy < w.oh; oy++) {
      for (int64_t ox = 0; ox < w.ow; ox++) {
        /* A window that holds no input position (possible with dilation) gives -inf for max,
         * the identity of max, and NaN (0/0) for avg without count_include_pad. */
        double m = -INFINITY, sum = 0;
        int64_t inside = 0, padded = 0;
        for (int64_t ky = 0; ky < w.kh; ky++) {
          int64_t iy = oy * w.sh - w.pt + ky * w.dh;
          for (int64_t kx = 0; kx < w.kw; kx++) {
            int64_t ix = ox * w.sw - w.pl + kx * w.dw;
            /* With ceil_mode the last window may reach past the bottom/right padding; those
             * positions are not counted even with count_include_pad. */
            if (iy >= -w.pt && iy < w.h + w.pb && ix >= -w.pl && ix < w.w + w.pr) padded++;
            if (iy < 0 || iy >= w.h || ix < 0 || ix >= w.w) continue;
            double v = dpc_tload(x, (pl * w.h + iy) * w.w + ix);
            inside++;
            sum += v;
            if (v > m || v != v) m = v; /* v > NaN is false, so NaN sticks */
          }
        }
        int64_t div = include_pad ? padded : inside;
        double r = is_max ? m : div ? sum / (double)div : NAN;
        dpc_tstore(y, (pl * w.oh + oy) * w.ow + ox, r);
      }
    }
  }
  return DPC_OK;
}

dpc_status dpc_ref_max_pool2d(const dpc_kernel_args *a, dpc_diag *d) {
  return pool(a, d, true);
}

dpc_status dpc_ref_avg_pool2d(const dpc_kernel_args *a, dpc_diag *d) {
  return pool(a, d, false);
}

/* ---- normalisation -------------------------------------------------------------------------- */

dpc_status dpc_ref_batch_norm(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0], *scale = &a->in[1], *bias = &a->in[2];
  const dpc_tensor *mean_in = &a->in[3], *var_in = &a->in[4];
  dpc_tensor *y = &a->out[0], *mean_out = &a->out[1], *var_out = &a->out[2];
  dpc_attrs at = dpc_ref_attrs(a);
  double eps = dpc_attrs_float(at, "epsilon"), mom = dpc_attrs_float(at, "momentum");
  bool training = dpc_kernel_training(a);
  int64_t n = x->shape.d[0], c = x->shape.d[1];
  int64_t sp = dpc_ref_prod(&x->shape, 2, x->shape.rank), count = n * sp;
  for (int64_t ch = 0; ch < c; ch++) {
    /* Read the running statistics before writing any output: the executor may hand the same
     * buffer as mean_in and mean_out to update them in place. */
    double rm = dpc_tload(mean_in, ch), rv = dpc_tload(var_in, ch);
    double m = rm, v = rv;
    if (training) {
      /* Two passes (mean, then squared deviations) for a variance that cannot go negative. */
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < n; b++)
        for (int64_t s = 0; s < sp; s++) sum += dpc_tload(x, (b * c + ch) * sp + s);
      m = count ? sum / (double)count : NAN;
      for (int64_t b = 0; b < n; b++) {
        for (int64_t s = 0; s < sp; s++) {
          double e = dpc_tload(x, (b * c + ch) * sp + s) - m;
          sq += e * e;
        }
      }
      v = count ? sq / (double)count : NAN;
    }
    double sc = dpc_tload(scale, ch), bi = dpc_tload(bias, ch), den = sqrt(v + eps);
    for (int64_t b = 0; b < n; b++) {
      for (int64_t s = 0; s < sp; s++) {
        int64_t i = (b * c + ch) * sp + s;
        dpc_tstore(y, i, sc * (dpc_tload(x, i) - m) / den + bi);
      }
    }
    dpc_tstore(mean_out, ch, training ? mom * rm + (1 - mom) * m : rm);
    dpc_tstore(var_out, ch, training ? mom * rv + (1 - mom) * v : rv);
  }
  return DPC_OK;
}

dpc_status dpc_ref_layer_norm(const dpc_kernel_args *a, dpc_diag *d) {
  (void)d;
  const dpc_tensor *x = &a->in[0], *scale = &a->in[1];
  const dpc_tensor *bias = a->n_in > 2 ? &a->in[2] : NULL;
  dpc_tensor *y = &a->out[0];
  dpc_attrs at = dpc_ref_attrs(a);
  uint32_t rank = x->shape.rank;
  uint32_t ax = dpc_ref_axis(dpc_attrs_int(at, "axis"), rank);
  double eps = dpc_attrs_float(at, "epsilon");
  int64_t outer = dpc_ref_prod(&x->shape, 0, ax), inner = dpc_ref_prod(&x->shape, ax, rank);
  if (inner == 0) return DPC_OK; /* nothing to normalise, and no mean to divide out */
  for (int64_t o = 0; o < outer; o++) {
    int64_t base = o * inner;
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < inner; j++) sum += dpc_tload(x, base + j);
    double m = sum / (double)inner;
    for (int64_t j = 0; j < inner; j++) {
      double e = dpc_tload(x, base + j) - m;
      sq += e * e;
    }
    double den = sqrt(sq / (double)inner + eps);
    for (int64_t j = 0; j < inner; j++) {
      double r = (dpc_tload(x, base + j) - m) / den * dpc_tload(scale, j);
      if (bias) r += dpc_tload(bias, j);
      dpc_tstore(y, base + j, r);
    }
  }
  return DPC_OK;
}
