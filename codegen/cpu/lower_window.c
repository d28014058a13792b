/*
 * lower_window.c — LLVM IR for conv2d and its gradients.
 * (No op lowered here yet: these nodes run on the reference kernels.)
 */
#include "codegen/cpu/cg.h"

const cg_lower_fn cg_window_table[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = NULL,
};
