/*
 * fake_cublas.c — a stand-in for libcublas.so.13 in tests, loaded by runtime/device_cuda.c
 * through $DPC_CUBLAS beside the test driver (fake_driver.c), whose device memory is host
 * memory: the GEMM is computed here, column-major as cuBLAS defines it, so the runtime's mapping
 * of a row-major matmul onto it (runtime/cublas.c) is what the tests check. Only what dpc calls:
 * f32 operands, the three f32 compute types, host scalars.
 *
 * Test code: a process-wide count of the GEMMs run, guarded by a lock.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define API __attribute__((visibility("default")))

#define SUCCESS         0
#define NOT_INITIALIZED 1
#define INVALID_VALUE   7
#define NOT_SUPPORTED   15

static unsigned gemms;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct handle {
  unsigned magic;
  void *stream;
} handle;

API int cublasCreate_v2(void **out) {
  handle *h = calloc(1, sizeof *h);
  if (!h) return NOT_INITIALIZED;
  h->magic = 0xb1a5;
  *out = h;
  return SUCCESS;
}

API int cublasDestroy_v2(void *p) {
  handle *h = p;
  if (!h || h->magic != 0xb1a5) return NOT_INITIALIZED;
  h->magic = 0;
  free(h);
  return SUCCESS;
}

API int cublasSetStream_v2(void *p, void *stream) {
  handle *h = p;
  if (!h || h->magic != 0xb1a5) return NOT_INITIALIZED;
  h->stream = stream;
  return SUCCESS;
}

API const char *cublasGetStatusString(int s) {
  return s == SUCCESS           ? "CUBLAS_STATUS_SUCCESS"
         : s == NOT_INITIALIZED ? "CUBLAS_STATUS_NOT_INITIALIZED"
         : s == INVALID_VALUE   ? "CUBLAS_STATUS_INVALID_VALUE"
         : s == NOT_SUPPORTED   ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                : "CUBLAS_STATUS_UNKNOWN";
}

/* op(X)[i, j] of a column-major X with leading dimension ld */
static float at(const float *x, int ld, int trans, int i, int j) {
  return trans ? x[(int64_t)j + (int64_t)i * ld] : x[(int64_t)i + (int64_t)j * ld];
}

API int cublasGemmStridedBatchedEx(void *p, int ta, int tb, int m, int n, int k, const void *alpha,
                                   const void *A, int atype, int lda, long long sa, const void *B,
                                   int btype, int ldb, long long sb, const void *beta, void *C,
                                   int ctype, int ldc, long long sc, int batch, int compute,
                                   int algo) {
  handle *h = p;
  (void)algo;
  if (!h || h->magic != 0xb1a5) return NOT_INITIALIZED;
  if (atype != 0 || btype != 0 || ctype != 0 || (compute != 68 && compute != 75 && compute != 77))
    return NOT_SUPPORTED;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1) ||
      lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m)
    return INVALID_VALUE;
  const float al = *(const float *)alpha, be = *(const float *)beta;
  for (int b = 0; b < batch; b++) {
    const float *a = (const float *)A + b * sa, *bb = (const float *)B + b * sb;
    float *c = (float *)C + b * sc;
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        float acc = 0;
        for (int l = 0; l < k; l++) acc += at(a, lda, ta, i, l) * at(bb, ldb, tb, l, j);
        float *y = &c[(int64_t)i + (int64_t)j * ldc];
        *y = al * acc + (be != 0 ? be * *y : 0);
      }
  }
  pthread_mutex_lock(&lock);
  gemms++;
  pthread_mutex_unlock(&lock);
  return SUCCESS;
}

/* GEMMs run so far, for the test's checks. */
API unsigned dpc_fake_cublas_gemms(void);
API unsigned dpc_fake_cublas_gemms(void) {
  pthread_mutex_lock(&lock);
  unsigned n = gemms;
  pthread_mutex_unlock(&lock);
  return n;
}
