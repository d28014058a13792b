/*
 * checks.h — checks of test_cuda_ops that live in files of their own: GPU artifacts
 * (cuda_artifact.c: device-artifact MODEL fake|gpu) and fusion groups (cuda_fused.c: fused
 * GRAPH).
 */
#ifndef DPC_TESTS_CUDA_CHECKS_H
#define DPC_TESTS_CUDA_CHECKS_H

#include "codegen/backend.h"
#include "codegen/cuda/cuda.h"

#include <stdio.h>

/* test_cuda_ops.c's scratch folder, and its NVRTC check: k compiled for sm_80 and sm_90, and
 * ptxas accepting the PTX of both; the failures. */
extern const char *g_work;

/* One check's line, "ok   ..." or "FAIL ...", counted in `fails` when it does not hold. */
#define CUDA_EXPECT(fails, cond, ...)                                                              \
  do {                                                                                             \
    bool ok_ = (cond);                                                                             \
    printf("%s ", ok_ ? "ok  " : "FAIL");                                                          \
    printf(__VA_ARGS__);                                                                           \
    printf("\n");                                                                                  \
    (fails) += !ok_;                                                                               \
  } while (0)
int check_nvrtc(const dpc_cuda_kernel *k, const char *label);

/* Compile MODEL with `dpc_net_compile` for the cuda backend (inference, training and
 * evaluation plans at batch 8) into an artifact in `work`, then run it as an application does
 * (dpc_model_load, runners on cuda:0): one inference and 12 training steps, each checked against
 * the same plans on the reference backend. `be` compiles the artifact's plans once more where
 * the test driver needs the emulated builds of their kernels (NULL on a real GPU). With
 * `devices` (cuda:0,cuda:1) the inference and training plans are data parallel over them, each
 * GPU half the batch, against the same plans on the reference backend's CPU devices. 0 when all
 * holds. */
int test_cuda_artifact(const char *model, const dpc_codegen_backend *be, const char *work,
                       const char *devices);

/* GRAPH's outputs (its inputs filled with values of their dtypes) computed three ways: by the
 * reference backend, and by the CUDA kernels run on the host (cuda-emu) with and without fusion
 * groups. Fused and unfused must give the same bits, both the reference's values within the op
 * tests' tolerance, and the fused plan must have groups, each group's kernel compiling with
 * NVRTC and ptxas. With `device` (a cuda backend), the fused kernels run on cuda:0 instead, its
 * GEMMs on cuBLAS and cuBLASLt where they load, within tolerance of the reference. 0 when all
 * holds. */
int test_cuda_fused(const char *graph, const dpc_codegen_backend *device);

#endif
