/*
 * emu.h — the "cuda-emu" codegen backend (emu.c): CUDA kernels run on the host under
 * emulation, one more row of the backend table (codegen/backend.h).
 */
#ifndef DPC_CODEGEN_CUDA_EMU_H
#define DPC_CODEGEN_CUDA_EMU_H

#include "codegen/backend.h"

extern const dpc_codegen_backend dpc_codegen_cuda_emu;

#endif
