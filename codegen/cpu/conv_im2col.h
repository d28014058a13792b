/*
 * conv_im2col.h — a convolution's geometry and the data movement of convolutions as GEMMs,
 * shared by lower_window.c (the forward and gradient lowerings) and lower_conv_im2col.c (im2col
 * and col2im).
 */
#ifndef DPC_CODEGEN_CPU_CONV_IM2COL_H
#define DPC_CODEGEN_CPU_CONV_IM2COL_H

#include "codegen/cpu/gemm.h"
#include "ir/rules.h"

/* Bytes of a Col / dCol block: half the L2, beside the GEMM's packed A. */
#define CG_COL_BYTES (512 * 1024)

/* A convolution node's geometry, per image and group: K = cpg*kh*kw taps (q = (ci, ky, kx)),
 * P = oh*ow output pixels. */
typedef struct cg_conv_geom {
  dpc_window w;
  dpc_dtype t;
  int64_t n, cpg, opg, kk, K, P; /* images, channels per group in and out, kh*kw, taps, pixels */
} cg_conv_geom;

/* The geometry of conv2d, conv2d_grad_input or conv2d_grad_weight node f->node. */
dpc_status cg_conv_init(cg_fn *f, cg_conv_geom *cv, dpc_diag *d);

static inline int64_t cg_ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
static inline cg_val cg_mulk(cg_fn *f, cg_val a, int64_t k) {
  return cg_mul(f, a, cg_const_i64(k));
}

/* Zero a row's columns [from, the next multiple of nr) (row: the row's first element): the
 * GEMM reads whole vectors there. */
void cg_zero_cols(cg_fn *f, const gm_cfg *c, cg_val row, cg_val from);
/* The same for rows [0, rows) of a buffer of row stride ld. */
void cg_zero_tail(cg_fn *f, const gm_cfg *c, cg_val buf, int64_t ld, cg_val rows, cg_val from);
/* Whether whole planes of Col can be built at once for row blocks of rb output rows (stride 1,
 * output rows as wide as the input's, every row in the block, a small enough unrolled body). */
bool cg_plane_ok(const gm_cfg *c, const cg_conv_geom *cv, int64_t rb);
/* The Col of taps [q0, q0 + nq) over output rows [oy0, oy0 + nrows) of the group's planes at
 * plane0, row stride ld: whole planes at a time when `whole` (cg_plane_ok, and the taps are
 * whole channels), else row by row. Columns past the rows are zeroed up to the next nr. */
void cg_im2col_taps(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val x, cg_val plane0,
                    cg_val q0, cg_val nq, bool whole, cg_val oy0, cg_val nrows, cg_val col,
                    int64_t ld);
/* dx += col2im(dCol) for the same block: tap by tap. dx is calc-typed. */
void cg_col2im(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val dx, cg_val plane0,
               cg_val q0, cg_val nq, cg_val oy0, cg_val nrows, cg_val col, int64_t ld);
/* Whether cg_col2im_rows can do this geometry (unit column stride, a small unrolled body). */
bool cg_rows_ok(const gm_cfg *c, const cg_conv_geom *cv);
/* The same sum as cg_col2im, gathered per input row (dCol holds whole channels). */
void cg_col2im_rows(cg_fn *f, const gm_cfg *c, const cg_conv_geom *cv, cg_val dx, cg_val plane0,
                    cg_val q0, cg_val nq, cg_val oy0, cg_val nrows, cg_val col, int64_t ld);

#endif
