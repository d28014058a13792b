/*
 * cuda.h — the CUDA code generator: a node of a concrete graph as CUDA C source text, and that
 * text compiled with NVRTC to PTX and CUBIN.
 *
 *   dpc_cuda_kernel k;
 *   dpc_cuda_lower(g, node, false, &k, d);          // k.source, k.launch[0..n_launch)
 *   dpc_cuda_binary b;
 *   dpc_cuda_compile(k.source, "sm_90", &b, d);     // b.ptx (b.ptx_size bytes, no NUL), b.cubin
 *
 * Every kernel takes one argument, a dpc_kargs block (its definition is in the source): p[i]
 * the data of input i, then of the outputs; `step` the training step (dropout's stream). Shapes
 * are compile-time constants, so a kernel is made for one shape. The source is valid CUDA C++
 * for NVRTC and compiles with the system C++ compiler against emu/dpc_cuda_emu.h, which runs
 * it on the host (codegen/cuda/emu.c); that is how kernels are checked without a GPU.
 *
 * lower.c needs no CUDA toolkit; nvrtc.c (the only file that includes nvrtc.h) is built only
 * when the toolkit is found, and dpc_cuda_compile says so otherwise.
 */
#ifndef DPC_CODEGEN_CUDA_CUDA_H
#define DPC_CODEGEN_CUDA_CUDA_H

#include "codegen/backend.h"
#include "ir/graph.h"

/* Pointers a kernel's argument block carries: inputs then outputs. */
#define DPC_CUDA_MAX_ARGS 32
/* Kernels one node launches, one after the other on the same arguments. */
#define DPC_CUDA_MAX_LAUNCH 4

typedef struct dpc_cuda_launch {
  char name[64];
  uint32_t grid[3], block[3];
} dpc_cuda_launch;

typedef struct dpc_cuda_kernel {
  char *source;    /* malloc'd */
  uint32_t n_args; /* pointers in its argument block: the node's, or its fusion group's */
  uint32_t n_launch;
  uint32_t after_gemm; /* a fused matmul's: its epilogue's first launch (ir/native.h) */
  dpc_cuda_launch launch[DPC_CUDA_MAX_LAUNCH];
} dpc_cuda_kernel;

void dpc_cuda_kernel_free(dpc_cuda_kernel *k);

/* Whether op has a CUDA lowering; when not, *why says why (a source, communication, or not
 * lowered yet). */
bool dpc_cuda_lowers(dpc_op op, const char **why);

/* The kernel(s) of `node` of g, whose shapes must be concrete. `training` fixes the mode of
 * dropout and batch_norm (their own `training` attribute wins). A node that roots a fusion
 * group (ir/fusion.h: elementwise members only) gets the group's kernel, whose arguments are
 * the group's inputs, then the root's outputs. */
dpc_status dpc_cuda_lower(const dpc_graph *g, uint32_t node, bool training, dpc_cuda_kernel *k,
                          dpc_diag *d);

/* Whether `node` is a matmul cuBLAS can do in place of its kernel, and the GEMM it is (ir/
 * native.h: f32, batch dims that either match or broadcast one operand whole). For the root of
 * a fusion group with a matmul, the matmul's GEMM, with the epilogue cuBLASLt can apply when
 * the group is a bias added to each row of a 2-D result, then at most a ReLU. */
bool dpc_cuda_gemm_of(const dpc_graph *g, uint32_t node, dpc_gemm_precision precision,
                      dpc_cuda_gemm *out);

/* ---- NVRTC (nvrtc.c) ---------------------------------------------------------------------- */

typedef struct dpc_cuda_binary {
  char *ptx; /* PTX text without the NUL NVRTC counts (ptxas rejects it) */
  size_t ptx_size;
  void *cubin; /* ELF for the real architecture */
  size_t cubin_size;
} dpc_cuda_binary;

void dpc_cuda_binary_free(dpc_cuda_binary *b);

/* Whether this build has NVRTC (the CUDA toolkit was found). */
bool dpc_cuda_have_nvrtc(void);
/* Compile `source` for `arch` ("sm_80", "sm_90": a real architecture, so both PTX and CUBIN
 * come out). `what` names the kernel in an error, which carries NVRTC's log. */
dpc_status dpc_cuda_compile(const char *source, const char *what, const char *arch,
                            dpc_cuda_binary *out, dpc_diag *d);

/* The "cuda" codegen backend (backend.c): a plan's kernels as dpc_cuda_code handles. */
extern const dpc_codegen_backend dpc_codegen_cuda;

#endif
