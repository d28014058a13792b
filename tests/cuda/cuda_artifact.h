/*
 * cuda_artifact.h — the GPU artifact check of test_cuda_ops (device-artifact MODEL fake|gpu).
 */
#ifndef DPC_TESTS_CUDA_ARTIFACT_H
#define DPC_TESTS_CUDA_ARTIFACT_H

#include "codegen/backend.h"

/* Compile MODEL with `dpc_net_compile` for the cuda backend (inference, training and
 * evaluation plans at batch 8) into an artifact in `work`, then run it as an application does
 * (dpc_model_load, runners on cuda:0): one inference and 12 training steps, each checked against
 * the same plans on the reference backend. `be` compiles the artifact's plans once more where
 * the test driver needs the emulated builds of their kernels (NULL on a real GPU). 0 when all
 * holds. */
int test_cuda_artifact(const char *model, const dpc_codegen_backend *be, const char *work);

#endif
