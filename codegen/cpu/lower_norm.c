/*
 * lower_norm.c — LLVM IR for batch_norm, layer_norm and their gradients.
 * (No op lowered here yet: these nodes run on the reference kernels.)
 */
#include "codegen/cpu/cg.h"

const cg_lower_fn cg_norm_table[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = NULL,
};
