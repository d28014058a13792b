/*
 * conv_wgrad_dot.h — the weight gradient of a convolution with few taps per output channel as
 * dot products over the pixels (lower_conv_wgrad_dot.c); lower_window.c asks whether a
 * convolution fits and hands it over.
 */
#ifndef DPC_CODEGEN_CPU_CONV_WGRAD_DOT_H
#define DPC_CODEGEN_CPU_CONV_WGRAD_DOT_H

#include "codegen/cpu/conv_im2col.h"

/* True when conv2d_grad_weight of geometry cv runs as dot products (f32, few taps). */
bool cg_conv_wgrad_dot_fits(const cg_conv_geom *cv, int vector_bits);
/* The kernel body for conv2d_grad_weight node f->node (cg_conv_wgrad_dot_fits true). */
dpc_status cg_lower_conv_wgrad_dot(cg_kernel *k, const cg_conv_geom *cv, dpc_diag *d);

#endif
