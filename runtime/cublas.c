/*
 * cublas.c — loading cuBLAS (cublas.h) and a row-major GEMM through its column-major one.
 */
#include "runtime/cublas.h"
#include "runtime/cuda_driver.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* cuBLAS's values of the enums used (cublas_api.h, library_types.h of CUDA 13) */
#define OP_N           0
#define OP_T           1
#define R_32F          0
#define COMPUTE_32F    68
#define COMPUTE_32F_BF 75 /* CUBLAS_COMPUTE_32F_FAST_16BF */
#define COMPUTE_32F_TF 77 /* CUBLAS_COMPUTE_32F_FAST_TF32 */
#define GEMM_DEFAULT   (-1)

static const dpc_dl_entry entries[] = {
    {"cublasCreate_v2", offsetof(dpc_cublas_api, create)},
    {"cublasDestroy_v2", offsetof(dpc_cublas_api, destroy)},
    {"cublasSetStream_v2", offsetof(dpc_cublas_api, set_stream)},
    {"cublasGemmStridedBatchedEx", offsetof(dpc_cublas_api, gemm_strided_batched)},
    {"cublasGetStatusString", offsetof(dpc_cublas_api, status_string)},
};

dpc_status dpc_cublas_load(dpc_cublas_api *api, const char *who, dpc_diag *d) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so"};
  static const dpc_dl_lib lib = {"DPC_CUBLAS",
                                 "cuBLAS",
                                 names,
                                 2,
                                 entries,
                                 sizeof entries / sizeof *entries,
                                 offsetof(dpc_cublas_api, lib)};
  memset(api, 0, sizeof *api);
  return dpc_dl_load(&lib, who, api, d);
}

void dpc_cublas_unload(dpc_cublas_api *api) {
  if (api->lib) dlclose(api->lib);
  memset(api, 0, sizeof *api);
}

int dpc_cublas_gemm(const dpc_cublas_api *api, void *handle, const dpc_cuda_gemm *g, const void *a,
                    const void *b, void *y) {
  /* Row-major y = op(a) op(b) is column-major y^T = op(b)^T op(a)^T, and a row-major matrix read
   * column-major is its transpose: so b goes first, each operand transposed when it was, with its
   * stored row length as the leading dimension. */
  const int lda = g->tb ? g->k : g->n, ldb = g->ta ? g->m : g->k;
  const int compute = g->precision == DPC_GEMM_TF32   ? COMPUTE_32F_TF
                      : g->precision == DPC_GEMM_BF16 ? COMPUTE_32F_BF
                                                      : COMPUTE_32F;
  const float one = 1.0f, zero = 0.0f;
  return api->gemm_strided_batched(handle, g->tb ? OP_T : OP_N, g->ta ? OP_T : OP_N, g->n, g->m,
                                   g->k, &one, b, R_32F, lda, g->stride_b, a, R_32F, ldb,
                                   g->stride_a, &zero, y, R_32F, g->n, (long long)g->m * g->n,
                                   g->batch, compute, GEMM_DEFAULT);
}
