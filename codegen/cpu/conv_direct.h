/*
 * conv_direct.h — conv2d computed directly, without im2col, where the GEMM would be too thin:
 * depthwise and grouped convolutions with few output channels per group (lower_conv_direct.c).
 * lower_window.c asks whether a convolution fits and hands it over.
 */
#ifndef DPC_CODEGEN_CPU_CONV_DIRECT_H
#define DPC_CODEGEN_CPU_CONV_DIRECT_H

#include "codegen/cpu/cg.h"
#include "ir/rules.h"

/* True when conv2d with window w and dtype t runs faster direct than as per-group GEMMs. */
bool cg_conv_direct_fits(const dpc_window *w, dpc_dtype t, int vector_bits);
/* The kernel body for conv2d node f->node with window w (cg_conv_direct_fits true), with the
 * fusion group's epilogue applied to each output row as it is finished. */
dpc_status cg_lower_conv_direct(cg_kernel *k, const dpc_window *w, dpc_diag *d);

#endif
