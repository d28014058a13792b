/*
 * device_cuda.c — a GPU as a device ("cuda:N"), through the CUDA driver API loaded at run time
 * by cuda_driver.c (libcuda.so.1, or the library $DPC_CUDA_DRIVER names: the tests' stand-in),
 * never linked. Each device has the GPU's primary context and one stream: copies and kernels
 * are queued on it in the session's order, events order it against other devices, and
 * synchronize waits for it. Buffers are device memory; the host never reads them but through
 * copy.
 *
 * Kernels are the cuda backend's dpc_cuda_code (ir/native.h): loaded on first use (the CUBIN of
 * this GPU's architecture, else the PTX for the driver to compile) and kept per code for the
 * device's life. A code that is a GEMM goes to cuBLAS (cublas.h) on the device's stream instead,
 * once cuBLAS has loaded and made its handle at the first one; where it does not, the generated
 * kernels run, and why is kept (dpc_device_cuda_blas says it). A step with no CUDA kernel (the
 * reference kernel, which the session also runs to name the place of bad data) runs on the host on
 * copies of its tensors.
 */
#include "runtime/cublas.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef dpc_cu_result cu_result;
typedef dpc_cu_ptr cu_ptr;

#define CU_STREAM_NON_BLOCKING  1
#define CU_EVENT_DISABLE_TIMING 2
#define CU_ATTR_CC_MAJOR        75
#define CU_ATTR_CC_MINOR        76

/* A loaded dpc_cuda_code: its module and functions on this device. */
typedef struct loaded_code {
  const dpc_cuda_code *code;
  void *module;
  void *fn[DPC_CUDA_CODE_LAUNCHES];
} loaded_code;

typedef struct cuda_dev {
  dpc_cu_api api;
  int ordinal, sm;
  void *ctx, *stream;
  loaded_code *codes;
  uint32_t n_codes, cap_codes;
  dpc_cublas_api blas;
  void *blas_handle;
  int blas_state;      /* 0 not tried yet, 1 in use, -1 not to be had */
  char blas_note[256]; /* what was loaded, or why not */
  uint64_t blas_gemms; /* GEMMs cuBLAS ran */
  dpc_cublaslt_api lt;
  void *lt_handle;
  int lt_state;      /* as blas_state, for cuBLASLt */
  uint64_t lt_gemms; /* GEMMs cuBLASLt ran with their epilogue */
} cuda_dev;

static cuda_dev *impl(dpc_device *dev) {
  return dev->impl;
}

/* A failed call as a status naming the device and what it was doing. */
static dpc_status cu_fail(dpc_device *dev, cu_result r, const char *what, dpc_diag *d) {
  const char *why = NULL;
  cuda_dev *c = impl(dev);
  if (c->api.error_string) c->api.error_string(r, &why);
  return dpc_diag_fail(d, r == 2 ? DPC_ERR_NOMEM : DPC_ERR_INTERNAL, "%s: %s failed: %s (CUDA %d)",
                       dev->name, what, why ? why : "unknown error", r);
}

#define CU(call, what)                                                                             \
  do {                                                                                             \
    cu_result r_ = (call);                                                                         \
    if (r_ != 0) return cu_fail(dev, r_, what, d);                                                 \
  } while (0)

/* The calls of a device may come from any of the session's threads: each makes the device's
 * context current on its own thread first. */
static dpc_status enter(dpc_device *dev, dpc_diag *d) {
  CU(impl(dev)->api.ctx_set(impl(dev)->ctx), "cuCtxSetCurrent");
  return DPC_OK;
}

static dpc_status cuda_alloc(dpc_device *dev, size_t bytes, void **out, dpc_diag *d) {
  cuda_dev *c = impl(dev);
  dpc_status st = enter(dev, d);
  if (st) return st;
  cu_ptr p = 0;
  size_t n = bytes ? bytes : 64;
  CU(c->api.mem_alloc(&p, n), "cuMemAlloc");
  /* zeroed on the device's own stream, so its first kernels are ordered after it */
  cu_result r = c->api.memset8(p, 0, n, c->stream);
  if (r == 0) r = c->api.stream_sync(c->stream);
  if (r != 0) {
    c->api.mem_free(p);
    return cu_fail(dev, r, "cuMemsetD8Async", d);
  }
  *out = (void *)(uintptr_t)p;
  return DPC_OK;
}

static void cuda_free(dpc_device *dev, void *p) {
  cuda_dev *c = impl(dev);
  if (!p || c->api.ctx_set(c->ctx) != 0) return;
  c->api.stream_sync(c->stream);
  c->api.mem_free((cu_ptr)(uintptr_t)p);
}

static dpc_status cuda_copy(dpc_device *dev, dpc_copy_kind kind, void *dst, const void *src,
                            size_t bytes, dpc_device *peer, dpc_diag *d) {
  cuda_dev *c = impl(dev);
  dpc_status st = enter(dev, d);
  if (st || !bytes) return st;
  cu_ptr to = (cu_ptr)(uintptr_t)dst, from = (cu_ptr)(uintptr_t)src;
  switch (kind) {
  case DPC_COPY_H2D:
    /* the host buffer may change once copy returns: wait for the queue to take it */
    CU(c->api.h2d(to, src, bytes, c->stream), "cuMemcpyHtoDAsync");
    CU(c->api.stream_sync(c->stream), "cuStreamSynchronize");
    return DPC_OK;
  case DPC_COPY_D2H:
    CU(c->api.d2h(dst, from, bytes, c->stream), "cuMemcpyDtoHAsync");
    CU(c->api.stream_sync(c->stream), "cuStreamSynchronize");
    return DPC_OK;
  case DPC_COPY_D2D:
    if (to != from) CU(c->api.d2d(to, from, bytes, c->stream), "cuMemcpyDtoDAsync");
    return DPC_OK;
  case DPC_COPY_PEER:
    if (!peer || strcmp(peer->ops->kind, "cuda"))
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: a peer copy from %s, which is not a GPU",
                           dev->name, peer ? peer->name : "no device");
    CU(c->api.peer(to, c->ctx, from, impl(peer)->ctx, bytes, c->stream), "cuMemcpyPeerAsync");
    return DPC_OK;
  }
  return dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s: copy of unknown kind %d", dev->name, (int)kind);
}

/* The code's module on this device, loaded the first time. */
static dpc_status load_code(dpc_device *dev, const dpc_cuda_code *code, loaded_code **out,
                            dpc_diag *d) {
  cuda_dev *c = impl(dev);
  for (uint32_t i = 0; i < c->n_codes; i++)
    if (c->codes[i].code == code) return *out = &c->codes[i], DPC_OK;
  if (c->n_codes == c->cap_codes) {
    uint32_t cap = c->cap_codes ? 2 * c->cap_codes : 64;
    loaded_code *nc = realloc(c->codes, cap * sizeof *nc);
    if (!nc) return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory", dev->name);
    c->codes = nc, c->cap_codes = cap;
  }
  const void *image = code->ptx;
  for (uint32_t a = 0; a < code->n_cubin; a++)
    if ((int)code->cubin[a].sm == c->sm) image = code->cubin[a].data;
  loaded_code *L = &c->codes[c->n_codes];
  memset(L, 0, sizeof *L);
  L->code = code;
  CU(c->api.module_load(&L->module, image), "cuModuleLoadData");
  for (uint32_t l = 0; l < code->n_launch; l++) {
    cu_result r = c->api.module_function(&L->fn[l], L->module, code->launch[l].name);
    if (r != 0) {
      c->api.module_unload(L->module);
      return cu_fail(dev, r, code->launch[l].name, d);
    }
  }
  c->n_codes++;
  *out = L;
  return DPC_OK;
}

/* The kernels' one argument: the generated source's dpc_kargs. */
typedef struct kargs {
  void *p[32];
  unsigned long long step;
} kargs;

/* A step without CUDA code: its kernel on the host, on copies of its tensors. */
static dpc_status launch_on_host(dpc_device *dev, const dpc_launch *l, int32_t *bad, dpc_diag *d) {
  const dpc_kernel_args *a = l->a;
  uint32_t n = a->n_in + a->n_out;
  dpc_tensor *t = calloc(n ? n : 1, sizeof *t);
  if (!t) return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory", dev->name);
  dpc_status st = DPC_OK;
  for (uint32_t k = 0; k < n && !st; k++) {
    t[k] = k < a->n_in ? a->in[k] : a->out[k - a->n_in];
    size_t bytes = dpc_tensor_bytes(&t[k]);
    void *host = malloc(bytes ? bytes : 1);
    if (!host) {
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory", dev->name);
      t[k].data = NULL;
      break;
    }
    st = cuda_copy(dev, DPC_COPY_D2H, host, t[k].data, bytes, NULL, d);
    t[k].data = host;
  }
  dpc_kernel_args ha = *a;
  ha.in = t, ha.out = t + a->n_in;
  dpc_launch hl = *l;
  hl.a = &ha;
  hl.native.kind = DPC_KERNEL_NONE;
  if (!st) st = dpc_device_cpu_launch(dev, &hl, bad, d);
  for (uint32_t k = a->n_in; k < n && !st; k++)
    st = cuda_copy(dev, DPC_COPY_H2D, a->out[k - a->n_in].data, t[k].data, dpc_tensor_bytes(&t[k]),
                   NULL, d);
  for (uint32_t k = 0; k < n; k++) free(t[k].data);
  free(t);
  return st;
}

/* Whether cuBLAS runs this device's GEMMs: loaded, with a handle on the device's stream, at the
 * first one asked (the context is current). */
static bool use_blas(dpc_device *dev) {
  cuda_dev *c = impl(dev);
  if (c->blas_state) return c->blas_state > 0;
  c->blas_state = -1;
  dpc_diag d;
  dpc_diag_init(&d);
  if (dpc_cublas_load(&c->blas, dev->name, &d)) {
    snprintf(c->blas_note, sizeof c->blas_note, "%s: the generated kernels run", d.msg);
    dpc_diag_free(&d);
    return false;
  }
  dpc_diag_free(&d);
  int r = c->blas.create(&c->blas_handle);
  if (r == 0 && (r = c->blas.set_stream(c->blas_handle, c->stream)) != 0)
    c->blas.destroy(c->blas_handle);
  if (r != 0) {
    snprintf(c->blas_note, sizeof c->blas_note,
             "%s: cuBLAS loaded but cublasCreate or cublasSetStream failed (%s): the generated "
             "kernels run",
             dev->name, c->blas.status_string(r));
    c->blas_handle = NULL;
    dpc_cublas_unload(&c->blas);
    return false;
  }
  snprintf(c->blas_note, sizeof c->blas_note, "%s: matmuls on cuBLAS", dev->name);
  c->blas_state = 1;
  return true;
}

/* Whether cuBLASLt applies this device's GEMM epilogues: loaded beside cuBLAS, at the first
 * GEMM with one. Without it the epilogue's kernel runs after cuBLAS's GEMM. */
static bool use_lt(dpc_device *dev) {
  cuda_dev *c = impl(dev);
  if (c->lt_state) return c->lt_state > 0;
  c->lt_state = -1;
  dpc_diag d;
  dpc_diag_init(&d);
  size_t at = strlen(c->blas_note);
  if (dpc_cublaslt_load(&c->lt, dev->name, &d)) {
    snprintf(c->blas_note + at, sizeof c->blas_note - at, "; epilogues as kernels (%s)",
             d.msg ? d.msg : "no cuBLASLt");
    dpc_diag_free(&d);
    return false;
  }
  dpc_diag_free(&d);
  if (c->lt.create(&c->lt_handle) != 0) {
    snprintf(c->blas_note + at, sizeof c->blas_note - at,
             "; epilogues as kernels (cublasLtCreate failed)");
    c->lt_handle = NULL;
    dpc_cublaslt_unload(&c->lt);
    return false;
  }
  snprintf(c->blas_note + at, sizeof c->blas_note - at, "; bias and ReLU epilogues on cuBLASLt");
  c->lt_state = 1;
  return true;
}

static dpc_status cuda_launch(dpc_device *dev, const dpc_launch *l, int32_t *bad, dpc_diag *d) {
  *bad = 0;
  if (l->native.kind != DPC_KERNEL_CUDA) return launch_on_host(dev, l, bad, d);
  cuda_dev *c = impl(dev);
  const dpc_cuda_code *code = l->native.handle;
  if (code->other && code->training != (l->run->training != 0)) code = code->other;
  if (l->n_args > 32 || l->n_args != code->n_args)
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s: a kernel of %u arguments given %u", dev->name,
                         code->n_args, l->n_args);
  dpc_status st = enter(dev, d);
  uint32_t first = 0; /* the launches the GEMM leaves to run */
  if (!st && code->gemm.on && use_blas(dev)) {
    const dpc_cuda_gemm *gm = &code->gemm;
    void *y = l->args[code->n_args - 1];
    if (gm->epilogue != DPC_GEMM_PLAIN && use_lt(dev)) {
      int r = dpc_cublaslt_gemm(&c->lt, c->lt_handle, gm, l->args[0], l->args[1],
                                l->args[gm->bias_arg], y, c->stream);
      if (r != 0)
        return dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s: cublasLtMatmul (%dx%dx%d) failed: %s",
                             dev->name, gm->m, gm->n, gm->k, c->blas.status_string(r));
      c->lt_gemms++;
      return DPC_OK;
    }
    int r = dpc_cublas_gemm(&c->blas, c->blas_handle, gm, l->args[0], l->args[1], y);
    if (r != 0)
      return dpc_diag_fail(d, DPC_ERR_INTERNAL,
                           "%s: cublasGemmStridedBatchedEx (%dx%dx%d) failed: %s", dev->name, gm->m,
                           gm->n, gm->k, c->blas.status_string(r));
    c->blas_gemms++;
    first = code->after_gemm;
    if (first >= code->n_launch) return DPC_OK;
  }
  loaded_code *L = NULL;
  if (!st) st = load_code(dev, code, &L, d);
  if (st) return st;
  kargs a;
  memset(&a, 0, sizeof a);
  for (uint32_t k = 0; k < l->n_args; k++) a.p[k] = l->args[k];
  a.step = dpc_run_kernel_step(l->run);
  void *params[] = {&a};
  for (uint32_t k = first; k < code->n_launch; k++) {
    const uint32_t *g = code->launch[k].grid, *b = code->launch[k].block;
    CU(c->api.launch(L->fn[k], g[0], g[1], g[2], b[0], b[1], b[2], 0, c->stream, params, NULL),
       code->launch[k].name);
  }
  return DPC_OK;
}

static dpc_status cuda_event_record(dpc_device *dev, dpc_device_event *e, dpc_diag *d) {
  cuda_dev *c = impl(dev);
  dpc_status st = enter(dev, d);
  if (st) return st;
  if (!e->impl) {
    CU(c->api.event_create(&e->impl, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    e->owner = dev;
  }
  CU(c->api.event_record(e->impl, c->stream), "cuEventRecord");
  e->recorded++;
  return DPC_OK;
}

static dpc_status cuda_event_wait(dpc_device *dev, const dpc_device_event *e, dpc_diag *d) {
  cuda_dev *c = impl(dev);
  dpc_status st = enter(dev, d);
  if (st || !e->impl) return st; /* an event of a host device: its work is done already */
  CU(c->api.stream_wait(c->stream, e->impl, 0), "cuStreamWaitEvent");
  return DPC_OK;
}

static void cuda_event_free(dpc_device *dev, dpc_device_event *e) {
  cuda_dev *c = impl(dev);
  if (e->impl && c->api.ctx_set(c->ctx) == 0) c->api.event_destroy(e->impl);
  e->impl = NULL, e->owner = NULL;
}

static dpc_status cuda_synchronize(dpc_device *dev, dpc_diag *d) {
  dpc_status st = enter(dev, d);
  if (st) return st;
  CU(impl(dev)->api.stream_sync(impl(dev)->stream), "cuStreamSynchronize");
  return DPC_OK;
}

/* Page-locked: the GPU's copy engines read and write it in place, where pageable memory goes
 * through the driver's own staging buffer at about half the speed. */
static dpc_status cuda_host_alloc(dpc_device *dev, size_t bytes, void **out, dpc_diag *d) {
  cuda_dev *c = impl(dev);
  dpc_status st = enter(dev, d);
  if (st) return st;
  CU(c->api.host_alloc(out, bytes ? bytes : 64, 0), "cuMemHostAlloc");
  memset(*out, 0, bytes);
  return DPC_OK;
}

static void cuda_host_free(dpc_device *dev, void *p) {
  cuda_dev *c = impl(dev);
  if (p && c->api.ctx_set(c->ctx) == 0) c->api.host_free(p);
}

static const dpc_device_ops cuda_ops = {
    .kind = "cuda",
    .host_visible = false,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .launch = cuda_launch,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    .event_free = cuda_event_free,
    .synchronize = cuda_synchronize,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
};

static void close_impl(cuda_dev *c) {
  if (!c) return;
  if (c->ctx && c->api.ctx_set(c->ctx) == 0) {
    if (c->blas_handle) c->blas.destroy(c->blas_handle);
    if (c->lt_handle) c->lt.destroy(c->lt_handle);
    for (uint32_t i = 0; i < c->n_codes; i++) c->api.module_unload(c->codes[i].module);
    if (c->stream) c->api.stream_destroy(c->stream);
    c->api.ctx_release(c->ordinal);
  }
  free(c->codes);
  dpc_cublas_unload(&c->blas);
  dpc_cublaslt_unload(&c->lt);
  dpc_cuda_driver_unload(&c->api);
  free(c);
}

dpc_status dpc_device_cuda_open(int idx, dpc_device **out, dpc_diag *d);
void dpc_device_cuda_close(dpc_device *dev);

dpc_status dpc_device_cuda_open(int idx, dpc_device **out, dpc_diag *d) {
  *out = NULL;
  dpc_device *dev = calloc(1, sizeof *dev);
  cuda_dev *c = calloc(1, sizeof *c);
  if (!dev || !c) {
    free(dev), free(c);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening cuda:%d", idx);
  }
  dev->ops = &cuda_ops, dev->impl = c;
  snprintf(dev->name, sizeof dev->name, "cuda:%d", idx);
  c->ordinal = idx;
  dpc_status st = dpc_cuda_driver_load(&c->api, dev->name, d);
  int major = 0, minor = 0, dv = 0;
  cu_result r = 0;
  const char *what = NULL;
  if (!st && (r = c->api.init(0)))
    what = "cuInit";
  else if (!st && (r = c->api.device_get(&dv, idx)))
    what = "cuDeviceGet (is there a GPU of that number?)";
  else if (!st && ((r = c->api.device_attribute(&major, CU_ATTR_CC_MAJOR, dv)) ||
                   (r = c->api.device_attribute(&minor, CU_ATTR_CC_MINOR, dv))))
    what = "cuDeviceGetAttribute";
  else if (!st && (r = c->api.ctx_retain(&c->ctx, dv)))
    what = "cuDevicePrimaryCtxRetain";
  else if (!st && (r = c->api.ctx_set(c->ctx)))
    what = "cuCtxSetCurrent";
  else if (!st && (r = c->api.stream_create(&c->stream, CU_STREAM_NON_BLOCKING)))
    what = "cuStreamCreate";
  if (what) st = cu_fail(dev, r, what, d);
  if (st) {
    close_impl(c);
    free(dev);
    return st;
  }
  c->ordinal = dv;
  c->sm = major * 10 + minor;
  *out = dev;
  return DPC_OK;
}

void dpc_device_cuda_close(dpc_device *dev) {
  close_impl(impl(dev));
}

const char *dpc_device_cuda_blas(const dpc_device *dev, uint64_t *gemms) {
  const cuda_dev *c = dev->impl;
  if (gemms) *gemms = c->blas_gemms + c->lt_gemms;
  return c->blas_state ? c->blas_note : "cuBLAS not tried yet (no GEMM has run)";
}

dpc_status dpc_device_cuda_enter(dpc_device *dev, int *ordinal, void **stream, dpc_diag *d) {
  if (strcmp(dev->ops->kind, "cuda"))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s is not a GPU", dev->name);
  dpc_status st = enter(dev, d);
  if (st) return st;
  *ordinal = impl(dev)->ordinal, *stream = impl(dev)->stream;
  return DPC_OK;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { COPY_BYTES = 64 << 20, TIMES = 5 };

/* The best of TIMES copies of `bytes` of kind (peer: from src), each waited for. */
static dpc_status time_copy(dpc_device *dev, dpc_copy_kind kind, void *dst, const void *from,
                            size_t bytes, dpc_device *src, double *best, dpc_diag *d) {
  *best = INFINITY;
  for (int k = 0; k < TIMES; k++) {
    double t0 = now_s();
    dpc_status st = cuda_copy(dev, kind, dst, from, bytes, src, d);
    if (!st) st = cuda_synchronize(dev, d);
    if (st) return st;
    double t = now_s() - t0;
    if (t < *best) *best = t;
  }
  return DPC_OK;
}

/* A square f32 GEMM on cuBLAS, grown from 256 until one takes 20 ms or it is 4096 wide (so a
 * slow stand-in measures in a moment and a GPU at a size that fills it): GFLOP/s of the best of
 * three at the last size. */
static dpc_status time_gemm(dpc_device *dev, dpc_cuda_figures *f, dpc_diag *d) {
  cuda_dev *c = impl(dev);
  dpc_status st = DPC_OK;
  for (int32_t n = 256; !st && n <= 4096; n *= 2) {
    void *a = NULL, *b = NULL, *y = NULL;
    size_t bytes = (size_t)n * (size_t)n * 4;
    st = cuda_alloc(dev, bytes, &a, d);
    if (!st) st = cuda_alloc(dev, bytes, &b, d);
    if (!st) st = cuda_alloc(dev, bytes, &y, d);
    dpc_cuda_gemm g = {.on = true, .precision = DPC_GEMM_FP32, .m = n, .n = n, .k = n, .batch = 1};
    double best = INFINITY;
    for (int k = 0; !st && k < 3; k++) {
      double t0 = now_s();
      int r = dpc_cublas_gemm(&c->blas, c->blas_handle, &g, a, b, y);
      if (r)
        st = dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: cublasGemmStridedBatchedEx (%d) failed: %s",
                           dev->name, n, c->blas.status_string(r));
      if (!st) st = cuda_synchronize(dev, d);
      double t = now_s() - t0;
      if (!st && t < best) best = t;
    }
    cuda_free(dev, a), cuda_free(dev, b), cuda_free(dev, y);
    if (st) break;
    f->gemm_n = (uint32_t)n;
    f->gemm_gflops = best > 0 ? 2.0 * n * (double)n * n / best / 1e9 : 0;
    if (best > 0.02) break;
  }
  return st;
}

dpc_status dpc_device_cuda_measure(dpc_device *dev, dpc_cuda_figures *f, dpc_diag *d) {
  memset(f, 0, sizeof *f);
  if (strcmp(dev->ops->kind, "cuda"))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s is not a GPU", dev->name);
  cuda_dev *c = impl(dev);
  dpc_status st = enter(dev, d);
  int dv = 0;
  size_t mem = 0;
  if (!st) CU(c->api.device_get(&dv, c->ordinal), "cuDeviceGet");
  if (!st) CU(c->api.device_name(f->name, (int)sizeof f->name, dv), "cuDeviceGetName");
  if (!st) CU(c->api.device_memory(&mem, dv), "cuDeviceTotalMem");
  f->memory = mem;
  void *x = NULL, *y = NULL;
  double t = 0;
  if (!st) st = cuda_alloc(dev, COPY_BYTES, &x, d);
  if (!st) st = cuda_alloc(dev, COPY_BYTES, &y, d);
  if (!st) st = time_copy(dev, DPC_COPY_D2D, y, x, COPY_BYTES, NULL, &t, d);
  if (!st) f->copy_gbs = COPY_BYTES / t / 1e9;
  cuda_free(dev, x), cuda_free(dev, y);
  if (!st && use_blas(dev)) st = time_gemm(dev, f, d);
  if (!st) snprintf(f->note, sizeof f->note, "%s", c->blas_note);
  return st;
}

dpc_status dpc_device_cuda_peer_gbs(dpc_device *dst, dpc_device *src, double *gbs, dpc_diag *d) {
  *gbs = 0;
  if (strcmp(dst->ops->kind, "cuda") || strcmp(src->ops->kind, "cuda"))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "a peer copy between %s and %s, not two GPUs",
                         dst->name, src->name);
  void *x = NULL, *y = NULL;
  double t = 0;
  dpc_status st = cuda_alloc(src, COPY_BYTES, &x, d);
  if (!st) st = cuda_alloc(dst, COPY_BYTES, &y, d);
  if (!st) st = time_copy(dst, DPC_COPY_PEER, y, x, COPY_BYTES, src, &t, d);
  if (!st) *gbs = COPY_BYTES / t / 1e9;
  cuda_free(src, x), cuda_free(dst, y);
  return st;
}
