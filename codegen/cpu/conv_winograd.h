/*
 * conv_winograd.h — 3x3 convolutions with stride 1 as Winograd's F(2x2, 3x3): 16 GEMMs doing
 * 16 multiplications for every 36 of im2col + GEMM (lower_conv_winograd.c). lower_window.c asks
 * whether a convolution fits and hands it over.
 */
#ifndef DPC_CODEGEN_CPU_CONV_WINOGRAD_H
#define DPC_CODEGEN_CPU_CONV_WINOGRAD_H

#include "codegen/cpu/cg.h"
#include "ir/rules.h"

/* True when conv2d with window w and dtype t is computed as F(2x2, 3x3) on a target with
 * vector_bits wide vectors. Never depends on the batch, so an image gets the same bits at any
 * batch size. */
bool cg_conv_winograd_fits(const dpc_window *w, dpc_dtype t, int vector_bits);
/* The kernel body for conv2d node f->node (cg_conv_winograd_fits true), with the fusion group's
 * epilogue applied to each block of output rows as it is finished. */
dpc_status cg_lower_conv_winograd(cg_kernel *k, const dpc_window *w, dpc_diag *d);

/* The same for conv2d_grad_input of the convolution with window w (its forward's): stride 1 and
 * padding 1 make dx a 3x3 "same" convolution of dy, so it fits when both directions do. */
bool cg_conv_winograd_grad_input_fits(const dpc_window *w, dpc_dtype t, int vector_bits);
dpc_status cg_lower_conv_winograd_grad_input(cg_kernel *k, const dpc_window *w, dpc_diag *d);

/* And conv2d_grad_weight, as F(3x3, 2x2) summed over images and tiles. */
bool cg_conv_winograd_grad_weight_fits(const dpc_window *w, dpc_dtype t, int vector_bits);
dpc_status cg_lower_conv_winograd_grad_weight(cg_kernel *k, const dpc_window *w, dpc_diag *d);

#endif
