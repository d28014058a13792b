/*
 * lower_reduce.c — LLVM IR for reductions, softmax family, losses, sum_to, expand.
 * (No op lowered here yet: these nodes run on the reference kernels.)
 */
#include "codegen/cpu/cg.h"

const cg_lower_fn cg_reduce_table[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = NULL,
};
