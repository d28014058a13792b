/*
 * cublas.c — loading cuBLAS and cuBLASLt (cublas.h), and a row-major GEMM through their
 * column-major ones.
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
/* cublasLt.h's */
#define LT_DESC_TRANSA   3
#define LT_DESC_TRANSB   4
#define LT_DESC_EPILOGUE 7
#define LT_DESC_BIAS     8
#define LT_BIAS          4u
#define LT_RELU_BIAS     6u

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

/* The compute type for g's precision: how the products' inputs may be rounded. */
static int compute_type(const dpc_cuda_gemm *g) {
  return g->precision == DPC_GEMM_TF32   ? COMPUTE_32F_TF
         : g->precision == DPC_GEMM_BF16 ? COMPUTE_32F_BF
                                         : COMPUTE_32F;
}

int dpc_cublas_gemm(const dpc_cublas_api *api, void *handle, const dpc_cuda_gemm *g, const void *a,
                    const void *b, void *y) {
  /* Row-major y = op(a) op(b) is column-major y^T = op(b)^T op(a)^T, and a row-major matrix read
   * column-major is its transpose: so b goes first, each operand transposed when it was, with its
   * stored row length as the leading dimension. */
  const int lda = g->tb ? g->k : g->n, ldb = g->ta ? g->m : g->k;
  const int compute = compute_type(g);
  const float one = 1.0f, zero = 0.0f;
  return api->gemm_strided_batched(handle, g->tb ? OP_T : OP_N, g->ta ? OP_T : OP_N, g->n, g->m,
                                   g->k, &one, b, R_32F, lda, g->stride_b, a, R_32F, ldb,
                                   g->stride_a, &zero, y, R_32F, g->n, (long long)g->m * g->n,
                                   g->batch, compute, GEMM_DEFAULT);
}

static const dpc_dl_entry lt_entries[] = {
    {"cublasLtCreate", offsetof(dpc_cublaslt_api, create)},
    {"cublasLtDestroy", offsetof(dpc_cublaslt_api, destroy)},
    {"cublasLtMatmulDescCreate", offsetof(dpc_cublaslt_api, desc_create)},
    {"cublasLtMatmulDescDestroy", offsetof(dpc_cublaslt_api, desc_destroy)},
    {"cublasLtMatmulDescSetAttribute", offsetof(dpc_cublaslt_api, desc_set)},
    {"cublasLtMatrixLayoutCreate", offsetof(dpc_cublaslt_api, layout_create)},
    {"cublasLtMatrixLayoutDestroy", offsetof(dpc_cublaslt_api, layout_destroy)},
    {"cublasLtMatmul", offsetof(dpc_cublaslt_api, matmul)},
};

dpc_status dpc_cublaslt_load(dpc_cublaslt_api *api, const char *who, dpc_diag *d) {
  static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so"};
  static const dpc_dl_lib lib = {"DPC_CUBLASLT",
                                 "cuBLASLt",
                                 names,
                                 2,
                                 lt_entries,
                                 sizeof lt_entries / sizeof *lt_entries,
                                 offsetof(dpc_cublaslt_api, lib)};
  memset(api, 0, sizeof *api);
  return dpc_dl_load(&lib, who, api, d);
}

void dpc_cublaslt_unload(dpc_cublaslt_api *api) {
  if (api->lib) dlclose(api->lib);
  memset(api, 0, sizeof *api);
}

int dpc_cublaslt_gemm(const dpc_cublaslt_api *api, void *handle, const dpc_cuda_gemm *g,
                      const void *a, const void *b, const void *bias, void *y, void *stream) {
  /* as dpc_cublas_gemm: column-major y^T (n x m) = op(b)^T op(a)^T; each operand's layout is
   * its stored matrix read column-major, and the bias, one per row of y^T, is per column of y */
  const int compute = compute_type(g);
  const int32_t op_b = g->tb ? OP_T : OP_N, op_a = g->ta ? OP_T : OP_N;
  const uint32_t epi = g->epilogue == DPC_GEMM_BIAS_RELU ? LT_RELU_BIAS : LT_BIAS;
  const float one = 1.0f, zero = 0.0f;
  void *desc = NULL, *lb = NULL, *la = NULL, *ly = NULL;
  int r = api->desc_create(&desc, compute, R_32F);
  if (!r) r = api->desc_set(desc, LT_DESC_TRANSA, &op_b, sizeof op_b);
  if (!r) r = api->desc_set(desc, LT_DESC_TRANSB, &op_a, sizeof op_a);
  if (!r) r = api->desc_set(desc, LT_DESC_EPILOGUE, &epi, sizeof epi);
  if (!r) r = api->desc_set(desc, LT_DESC_BIAS, &bias, sizeof bias);
  if (!r)
    r = g->tb ? api->layout_create(&lb, R_32F, (uint64_t)g->k, (uint64_t)g->n, g->k)
              : api->layout_create(&lb, R_32F, (uint64_t)g->n, (uint64_t)g->k, g->n);
  if (!r)
    r = g->ta ? api->layout_create(&la, R_32F, (uint64_t)g->m, (uint64_t)g->k, g->m)
              : api->layout_create(&la, R_32F, (uint64_t)g->k, (uint64_t)g->m, g->k);
  if (!r) r = api->layout_create(&ly, R_32F, (uint64_t)g->n, (uint64_t)g->m, g->n);
  if (!r)
    r = api->matmul(handle, desc, &one, b, lb, a, la, &zero, y, ly, y, ly, NULL, NULL, 0, stream);
  if (ly) api->layout_destroy(ly);
  if (la) api->layout_destroy(la);
  if (lb) api->layout_destroy(lb);
  if (desc) api->desc_destroy(desc);
  return r;
}
