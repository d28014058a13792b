/*
 * fake_cublas.c — a stand-in for libcublas.so.13 in tests, loaded by runtime/device_cuda.c
 * through $DPC_CUBLAS beside the test driver (fake_driver.c), whose device memory is host
 * memory: the GEMM is computed here, column-major as cuBLAS defines it, so the runtime's mapping
 * of a row-major matmul onto it (runtime/cublas.c) is what the tests check. Only what dpc calls:
 * f32 operands, the three f32 compute types, host scalars.
 *
 * It stands in for libcublasLt.so.13 too ($DPC_CUBLASLT names the same file): cublasLtMatmul with
 * the attributes dpc sets (transposes, a bias or bias-and-ReLU epilogue, the bias pointer) and
 * f32 layouts, no workspace, the default algorithm.
 *
 * Test code: process-wide counts of the GEMMs run, guarded by a lock.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define API __attribute__((visibility("default")))

#define SUCCESS         0
#define NOT_INITIALIZED 1
#define INVALID_VALUE   7
#define NOT_SUPPORTED   15

static unsigned gemms, lt_gemms;
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

/* ---- cuBLASLt ------------------------------------------------------------------------------ */

typedef struct lt_desc {
  unsigned magic;
  int ta, tb;
  unsigned epilogue; /* 1 default, 4 bias, 6 ReLU and bias */
  const float *bias;
} lt_desc;

typedef struct lt_layout {
  unsigned magic;
  uint64_t rows, cols;
  int64_t ld;
} lt_layout;

API int cublasLtCreate(void **out) {
  return cublasCreate_v2(out);
}

API int cublasLtDestroy(void *p) {
  return cublasDestroy_v2(p);
}

API int cublasLtMatmulDescCreate(void **out, int compute, int scale) {
  if ((compute != 68 && compute != 75 && compute != 77) || scale != 0) return NOT_SUPPORTED;
  lt_desc *dsc = calloc(1, sizeof *dsc);
  if (!dsc) return NOT_INITIALIZED;
  dsc->magic = 0xde5c, dsc->epilogue = 1;
  *out = dsc;
  return SUCCESS;
}

API int cublasLtMatmulDescDestroy(void *p) {
  lt_desc *dsc = p;
  if (!dsc || dsc->magic != 0xde5c) return INVALID_VALUE;
  dsc->magic = 0;
  free(dsc);
  return SUCCESS;
}

API int cublasLtMatmulDescSetAttribute(void *p, int attr, const void *buf, size_t size) {
  lt_desc *dsc = p;
  if (!dsc || dsc->magic != 0xde5c || !buf) return INVALID_VALUE;
  if ((attr == 3 || attr == 4) && size == sizeof(int32_t)) {
    int32_t v = *(const int32_t *)buf;
    if (v != 0 && v != 1) return INVALID_VALUE;
    *(attr == 3 ? &dsc->ta : &dsc->tb) = v;
  } else if (attr == 7 && size == sizeof(uint32_t)) {
    uint32_t v = *(const uint32_t *)buf;
    if (v != 1 && v != 4 && v != 6) return NOT_SUPPORTED;
    dsc->epilogue = v;
  } else if (attr == 8 && size == sizeof(void *)) {
    dsc->bias = *(const float *const *)buf;
  } else {
    return NOT_SUPPORTED;
  }
  return SUCCESS;
}

API int cublasLtMatrixLayoutCreate(void **out, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (type != 0) return NOT_SUPPORTED;
  if (ld < (int64_t)rows || ld < 1) return INVALID_VALUE;
  lt_layout *l = calloc(1, sizeof *l);
  if (!l) return NOT_INITIALIZED;
  l->magic = 0x1a70, l->rows = rows, l->cols = cols, l->ld = ld;
  *out = l;
  return SUCCESS;
}

API int cublasLtMatrixLayoutDestroy(void *p) {
  lt_layout *l = p;
  if (!l || l->magic != 0x1a70) return INVALID_VALUE;
  l->magic = 0;
  free(l);
  return SUCCESS;
}

/* D = alpha op(A) op(B) + beta C, then the epilogue, column-major; C and D must be one matrix. */
API int cublasLtMatmul(void *hp, void *dp, const void *alpha, const void *A, void *ap,
                       const void *B, void *bp, const void *beta, const void *C, void *cp, void *D,
                       void *outp, const void *algo, void *ws, size_t ws_size, void *stream) {
  handle *h = hp;
  lt_desc *dsc = dp;
  lt_layout *la = ap, *lb = bp, *lc = cp, *ld = outp;
  if (!h || h->magic != 0xb1a5) return NOT_INITIALIZED;
  if (!dsc || dsc->magic != 0xde5c || !la || !lb || !lc || !ld || la->magic != 0x1a70 ||
      lb->magic != 0x1a70 || ld->magic != 0x1a70 || C != D || algo || ws || ws_size || !stream)
    return INVALID_VALUE;
  uint64_t m = dsc->ta ? la->cols : la->rows, k = dsc->ta ? la->rows : la->cols;
  uint64_t kb = dsc->tb ? lb->cols : lb->rows, n = dsc->tb ? lb->rows : lb->cols;
  if (k != kb || ld->rows != m || ld->cols != n || (dsc->epilogue != 1 && !dsc->bias))
    return INVALID_VALUE;
  const float al = *(const float *)alpha, be = *(const float *)beta;
  const float *a = A, *b = B;
  float *y = D;
  for (uint64_t j = 0; j < n; j++)
    for (uint64_t i = 0; i < m; i++) {
      float acc = 0;
      for (uint64_t l = 0; l < k; l++)
        acc += at(a, (int)la->ld, dsc->ta, (int)i, (int)l) *
               at(b, (int)lb->ld, dsc->tb, (int)l, (int)j);
      float *o = &y[i + j * (uint64_t)ld->ld];
      float v = al * acc + (be != 0 ? be * *o : 0);
      if (dsc->epilogue & 4) v += dsc->bias[i];
      if ((dsc->epilogue & 2) && v < 0) v = 0;
      *o = v;
    }
  pthread_mutex_lock(&lock);
  lt_gemms++;
  pthread_mutex_unlock(&lock);
  return SUCCESS;
}

/* GEMMs run on the stand-in cuBLASLt, with their epilogues. */
API unsigned dpc_fake_cublaslt_gemms(void);
API unsigned dpc_fake_cublaslt_gemms(void) {
  pthread_mutex_lock(&lock);
  unsigned n = lt_gemms;
  pthread_mutex_unlock(&lock);
  return n;
}
