/*
 * pool2.h — max_pool2d with 2x2 windows at stride 2, and its gradient, and max_pool2d at stride
 * 1, on vectors of windows (lower_pool2.c). lower_pool.c asks whether a pool fits and hands it
 * over.
 */
#ifndef DPC_CODEGEN_CPU_POOL2_H
#define DPC_CODEGEN_CPU_POOL2_H

#include "codegen/cpu/cg.h"
#include "ir/rules.h"

/* True for f32 max pools with 2x2 windows at stride 2, no padding or dilation, over planes of
 * even height and width, on a target of vector_bits >= 128. */
bool cg_pool2_fits(const dpc_window *w, dpc_dtype t, int vector_bits);
/* The kernel bodies for max_pool2d (x -> y) and max_pool2d_grad (dy, x -> dx). */
dpc_status cg_lower_max_pool2(cg_kernel *k, const dpc_window *w);
dpc_status cg_lower_max_pool2_grad(cg_kernel *k, const dpc_window *w);

/* True for f32 max pools at column stride 1 or 2 and any row stride (any window of up to 49
 * taps and padding, no dilation) whose output rows are at most 8 vectors; the forward's kernel
 * body. */
bool cg_pool_vec_fits(const dpc_window *w, dpc_dtype t, int vector_bits);
dpc_status cg_lower_max_pool_vec(cg_kernel *k, const dpc_window *w);
/* max_pool2d_grad where the forward's vector kernel fits and a plane's window codes fit the
 * stack. */
bool cg_pool_vec_grad_fits(const dpc_window *w, dpc_dtype t, int vector_bits);
dpc_status cg_lower_max_pool_vec_grad(cg_kernel *k, const dpc_window *w);

#endif
