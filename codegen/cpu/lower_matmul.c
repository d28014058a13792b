/*
 * lower_matmul.c — LLVM IR for matmul: a packed, cache-blocked GEMM with a register-blocked
 * micro-kernel. (No op lowered here yet: these nodes run on the reference kernels.)
 */
#include "codegen/cpu/cg.h"

const cg_lower_fn cg_matmul_table[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = NULL,
};
