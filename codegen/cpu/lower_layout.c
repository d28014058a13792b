/*
 * lower_layout.c — LLVM IR for layout ops: transpose, reshape, flatten, concat, split, slice,
 * gather and their gradients. (No op lowered here yet: these nodes run on the reference kernels.)
 */
#include "codegen/cpu/cg.h"

const cg_lower_fn cg_layout_table[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = NULL,
};
