/*
 * conv_winograd_int.h — what the Winograd kernels share: lower_conv_winograd.c (the forward
 * and the input gradient, F(2x2, 3x3)) and lower_conv_winograd_dw.c (the weight gradient,
 * F(3x3, 2x2)), which transform the input patches the same way. Not for other files.
 */
#ifndef DPC_CODEGEN_CPU_CONV_WINOGRAD_INT_H
#define DPC_CODEGEN_CPU_CONV_WINOGRAD_INT_H

#include "codegen/cpu/conv_winograd.h"
#include "codegen/cpu/gemm.h"

/* Fewer channels leave the GEMMs too shallow or too thin to gain. */
#define MIN_CHANNELS 16
/* Positions of the 4x4 transformed tile: one GEMM each. */
#define XI 16

typedef struct wino {
  int64_t n, ci, co, th, tw; /* images, channels in and out, tile rows and columns */
  int64_t mb, nob;           /* output channels per block, blocks */
  int64_t nty, ntb, ldv;     /* tile rows per block, blocks per image, V and M row stride */
  int64_t og, obpg;          /* pieces per image by channel blocks, channel blocks per piece */
  int64_t ng, per;           /* pieces per image by tile-row blocks, tile-row blocks per piece */
  bool flip;                 /* the input gradient: filters read transposed and turned 180 deg */
  int64_t ni;                /* images whose tiles sit side by side in V and M (one block each) */
  int64_t vxs, uxs, mxs;     /* floats from one position's matrix to the next in V, U and M */
} wino;

/* The distance between consecutive positions' matrices for matrices of `floats` elements: an
 * odd number of cache lines. A transform writes or reads all 16 positions of a tile at once, and
 * at distances that are multiples of 4 KB (64 channels of 208 tiles, 16 x 64 filters) the 16
 * streams fell in one L1 set: 64 -> 32 channels at 14x14 spent 1.5 ms of 5.1 transforming its
 * input, against 0.4 ms for 32 -> 64. */
static inline int64_t cg_wg_xi_stride(int64_t floats) {
  int64_t lines = (floats * 4 + 63) / 64;
  return (lines % 2 ? lines : lines + 1) * 16;
}

cg_val cg_wg_vadd(cg_fn *f, const gm_cfg *c, cg_val a, cg_val b);
cg_val cg_wg_vsub(cg_fn *f, const gm_cfg *c, cg_val a, cg_val b);
cg_val cg_wg_vhalf(cg_fn *f, const gm_cfg *c, cg_val a);
/* V[xi][ci][col0 + r * tw + tile] = (B^T d B)[xi] for tile rows [ty0, ty0 + nrt) of p->ci input
 * planes from plane0 (rows of V p->ldv apart, positions p->vxs elements apart). */
void cg_wg_input_transform(cg_fn *f, const gm_cfg *c, const dpc_window *w, const wino *p, cg_val x,
                           cg_val plane0, cg_val ty0, cg_val nrt, cg_val v, cg_val col0);

#endif
