/*
 * lower_pool.c — LLVM IR for max_pool2d, avg_pool2d and their gradients.
 * (No op lowered here yet: these nodes run on the reference kernels.)
 */
#include "codegen/cpu/cg.h"

const cg_lower_fn cg_pool_table[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = NULL,
};
