/*
 * cublas.h — cuBLAS, found at run time as the CUDA driver is (cuda_driver.h): dlopen of
 * libcublas.so.13 (or of the library $DPC_CUBLAS names: the tests' stand-in; "off" for none),
 * never linked, since linking it costs every dpc start 0.4 s and a machine without it must run.
 * A cuda:N device loads it at its first GEMM and runs the generated matmul kernels when it does
 * not load.
 *
 * No cuBLAS header: the few types are declared by their ABI (cublasStatus_t and the enums are
 * ints, the handle a pointer).
 */
#ifndef DPC_RUNTIME_CUBLAS_H
#define DPC_RUNTIME_CUBLAS_H

#include "ir/base.h"
#include "ir/native.h"

typedef struct dpc_cublas_api {
  void *lib;
  int (*create)(void **handle);
  int (*destroy)(void *handle);
  int (*set_stream)(void *handle, void *stream);
  int (*gemm_strided_batched)(void *handle, int transa, int transb, int m, int n, int k,
                              const void *alpha, const void *a, int atype, int lda,
                              long long stride_a, const void *b, int btype, int ldb,
                              long long stride_b, const void *beta, void *c, int ctype, int ldc,
                              long long stride_c, int batch, int compute, int algo);
  const char *(*status_string)(int status);
} dpc_cublas_api;

/* Open cuBLAS and find its entry points. On failure the message starts with `who` ("cuda:0")
 * and says which library was looked for; nothing stays open. */
dpc_status dpc_cublas_load(dpc_cublas_api *api, const char *who, dpc_diag *d);
void dpc_cublas_unload(dpc_cublas_api *api);

/* Queue y = a b (g's row-major matrices, device pointers) on the stream the handle was given.
 * Returns cuBLAS's status: 0 for success. */
int dpc_cublas_gemm(const dpc_cublas_api *api, void *handle, const dpc_cuda_gemm *g, const void *a,
                    const void *b, void *y);

/* cuBLASLt (libcublasLt.so.13, or $DPC_CUBLASLT; "off" for none), for the GEMMs whose epilogue
 * it applies as it stores the result (dpc_cuda_gemm.epilogue): loaded beside cuBLAS, and
 * without it those GEMMs run on cuBLAS followed by the epilogue's kernel. */
typedef struct dpc_cublaslt_api {
  void *lib;
  int (*create)(void **handle);
  int (*destroy)(void *handle);
  int (*desc_create)(void **desc, int compute, int scale_type);
  int (*desc_destroy)(void *desc);
  int (*desc_set)(void *desc, int attr, const void *buf, size_t size);
  int (*layout_create)(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
  int (*layout_destroy)(void *layout);
  int (*matmul)(void *handle, void *desc, const void *alpha, const void *a, void *adesc,
                const void *b, void *bdesc, const void *beta, const void *c, void *cdesc, void *d,
                void *ddesc, const void *algo, void *workspace, size_t workspace_size,
                void *stream);
} dpc_cublaslt_api;

dpc_status dpc_cublaslt_load(dpc_cublaslt_api *api, const char *who, dpc_diag *d);
void dpc_cublaslt_unload(dpc_cublaslt_api *api);
/* Queue y = a b with g's epilogue (the bias a device pointer of g->n floats) on `stream`.
 * Returns cuBLAS's status: 0 for success. */
int dpc_cublaslt_gemm(const dpc_cublaslt_api *api, void *handle, const dpc_cuda_gemm *g,
                      const void *a, const void *b, const void *bias, void *y, void *stream);

#endif
