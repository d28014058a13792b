/*
 * cuda_driver.c — loading the CUDA driver (cuda_driver.h): dlopen, dlsym of the entry points by
 * their versioned names; and the probe behind `dpc devices`. Must not link libcuda or include
 * cuda.h: a machine without the driver runs everything else.
 */
#include "runtime/cuda_driver.h"
#include "runtime/cublas.h"
#include "runtime/nccl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Entry points by their exported (versioned) names, and where each goes in dpc_cu_api. */
static const dpc_dl_entry entries[] = {
    {"cuInit", offsetof(dpc_cu_api, init)},
    {"cuDriverGetVersion", offsetof(dpc_cu_api, driver_version)},
    {"cuDeviceGetCount", offsetof(dpc_cu_api, device_count)},
    {"cuDeviceGet", offsetof(dpc_cu_api, device_get)},
    {"cuDeviceGetAttribute", offsetof(dpc_cu_api, device_attribute)},
    {"cuDeviceGetName", offsetof(dpc_cu_api, device_name)},
    {"cuDeviceTotalMem_v2", offsetof(dpc_cu_api, device_memory)},
    {"cuDevicePrimaryCtxRetain", offsetof(dpc_cu_api, ctx_retain)},
    {"cuDevicePrimaryCtxRelease_v2", offsetof(dpc_cu_api, ctx_release)},
    {"cuCtxSetCurrent", offsetof(dpc_cu_api, ctx_set)},
    {"cuStreamCreate", offsetof(dpc_cu_api, stream_create)},
    {"cuStreamDestroy_v2", offsetof(dpc_cu_api, stream_destroy)},
    {"cuStreamSynchronize", offsetof(dpc_cu_api, stream_sync)},
    {"cuMemAlloc_v2", offsetof(dpc_cu_api, mem_alloc)},
    {"cuMemFree_v2", offsetof(dpc_cu_api, mem_free)},
    {"cuMemHostAlloc", offsetof(dpc_cu_api, host_alloc)},
    {"cuMemFreeHost", offsetof(dpc_cu_api, host_free)},
    {"cuMemsetD8Async", offsetof(dpc_cu_api, memset8)},
    {"cuMemcpyHtoDAsync_v2", offsetof(dpc_cu_api, h2d)},
    {"cuMemcpyDtoHAsync_v2", offsetof(dpc_cu_api, d2h)},
    {"cuMemcpyDtoDAsync_v2", offsetof(dpc_cu_api, d2d)},
    {"cuMemcpyPeerAsync", offsetof(dpc_cu_api, peer)},
    {"cuModuleLoadData", offsetof(dpc_cu_api, module_load)},
    {"cuModuleGetFunction", offsetof(dpc_cu_api, module_function)},
    {"cuModuleUnload", offsetof(dpc_cu_api, module_unload)},
    {"cuLaunchKernel", offsetof(dpc_cu_api, launch)},
    {"cuEventCreate", offsetof(dpc_cu_api, event_create)},
    {"cuEventRecord", offsetof(dpc_cu_api, event_record)},
    {"cuEventDestroy_v2", offsetof(dpc_cu_api, event_destroy)},
    {"cuStreamWaitEvent", offsetof(dpc_cu_api, stream_wait)},
    {"cuGetErrorString", offsetof(dpc_cu_api, error_string)},
};

dpc_status dpc_cuda_driver_load(dpc_cu_api *api, const char *who, dpc_diag *d) {
  memset(api, 0, sizeof *api);
  const char *path = getenv("DPC_CUDA_DRIVER");
  if (!path || !*path) path = "libcuda.so.1";
  if (!(api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
    const char *why = dlerror();
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: no CUDA driver found (%s)", who,
                         why ? why : path);
  }
  const char *missing = dpc_dl_bind(api->lib, entries, sizeof entries / sizeof *entries, api);
  if (missing) {
    dpc_cuda_driver_unload(api);
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: the CUDA driver %s lacks %s", who, path,
                         missing);
  }
  return DPC_OK;
}

const char *dpc_dl_bind(void *lib, const dpc_dl_entry *e, size_t n, void *table) {
  for (size_t i = 0; i < n; i++) {
    void *sym = dlsym(lib, e[i].name);
    if (!sym) return e[i].name;
    /* dlsym gives functions as void *; C has no cast between the two, so copy the bits */
    memcpy((char *)table + e[i].at, &sym, sizeof sym);
  }
  return NULL;
}

dpc_status dpc_dl_load(const dpc_dl_lib *l, const char *who, void *table, dpc_diag *d) {
  const char *path = getenv(l->env);
  if (path && !strcmp(path, "off"))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: %s is off ($%s=off)", who, l->what, l->env);
  bool given = path && *path;
  const char *first = given ? path : l->names[0];
  void *lib = NULL;
  for (size_t i = 0; i < (given ? 1 : l->n_names) && !lib; i++)
    lib = dlopen(given ? path : l->names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: no %s found (%s)", who, l->what,
                         why ? why : first);
  }
  const char *missing = dpc_dl_bind(lib, l->entries, l->n_entries, table);
  if (missing) {
    dlclose(lib);
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: the %s %s lacks %s", who, l->what, first,
                         missing);
  }
  memcpy((char *)table + l->lib_at, &lib, sizeof lib);
  return DPC_OK;
}

void dpc_cuda_driver_unload(dpc_cu_api *api) {
  if (api->lib) dlclose(api->lib);
  memset(api, 0, sizeof *api);
}

dpc_status dpc_cuda_driver_check(int ordinal, dpc_diag *d) {
  dpc_cuda_probe p;
  dpc_cuda_driver_probe(&p);
  if (p.initialised && ordinal < p.gpus) return DPC_OK;
  if (p.initialised && p.gpus == 1)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "cuda:%d: no such GPU: the CUDA driver sees one (cuda:0)", ordinal);
  if (p.initialised && p.gpus > 1)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "cuda:%d: no such GPU: the CUDA driver sees %d (cuda:0 to cuda:%d)",
                         ordinal, p.gpus, p.gpus - 1);
  return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "cuda:%d: %s", ordinal, p.note);
}

void dpc_cuda_driver_probe(dpc_cuda_probe *p) {
  memset(p, 0, sizeof *p);
  dpc_cu_api api;
  dpc_diag d;
  dpc_diag_init(&d);
  if (dpc_cuda_driver_load(&api, "cuda", &d)) {
    /* the note is the message without its "cuda: " */
    const char *m = d.msg ? d.msg : "cuda: no CUDA driver found";
    snprintf(p->note, sizeof p->note, "%s", strncmp(m, "cuda: ", 6) ? m : m + 6);
    dpc_diag_free(&d);
    return;
  }
  dpc_diag_free(&d);
  p->loaded = true;
  api.driver_version(&p->version);
  dpc_cu_result r = api.init(0);
  if (r != 0) {
    /* 34 is CUDA_ERROR_STUB_LIBRARY (the toolkit's stub), 100 CUDA_ERROR_NO_DEVICE */
    snprintf(p->note, sizeof p->note, "CUDA driver found but cuInit failed (error %d%s)", r,
             r == 34    ? ": the toolkit's stub library, not a driver"
             : r == 100 ? ": no GPU"
                        : "");
    dpc_cuda_driver_unload(&api);
    return;
  }
  p->initialised = true;
  if (api.device_count(&p->gpus) != 0) p->gpus = 0;
  snprintf(p->note, sizeof p->note, "CUDA driver %d.%d, %d GPU%s", p->version / 1000,
           (p->version % 1000) / 10, p->gpus, p->gpus == 1 ? "" : "s");
  dpc_cuda_driver_unload(&api);
}

/* Into p's note: "; " and, where `loaded`, `found`; else why not (the message of d, without its
 * "cuda: " start) and what runs instead. */
static void note_library(dpc_cuda_probe *p, bool loaded, const char *found, const dpc_diag *d,
                         const char *instead) {
  size_t at = strlen(p->note);
  if (at + 1 >= sizeof p->note) return;
  const char *m = d->msg ? d->msg : "cuda: not found";
  if (loaded)
    snprintf(p->note + at, sizeof p->note - at, "; %s", found);
  else
    snprintf(p->note + at, sizeof p->note - at, "; %s: %s", strncmp(m, "cuda: ", 6) ? m : m + 6,
             instead);
}

void dpc_cuda_driver_probe_cublas(dpc_cuda_probe *p) {
  if (p->gpus < 1) return;
  dpc_cublas_api blas;
  dpc_diag d;
  dpc_diag_init(&d);
  p->cublas = dpc_cublas_load(&blas, "cuda", &d) == DPC_OK;
  note_library(p, p->cublas, "matmuls on cuBLAS", &d, "matmuls run dpc's kernels");
  if (p->cublas) dpc_cublas_unload(&blas);
  dpc_diag_free(&d);
  if (p->cublas) { /* cuBLASLt matters only beside cuBLAS */
    dpc_cublaslt_api lt;
    dpc_diag_init(&d);
    p->cublaslt = dpc_cublaslt_load(&lt, "cuda", &d) == DPC_OK;
    note_library(p, p->cublaslt, "bias and ReLU epilogues on cuBLASLt", &d,
                 "matmul epilogues run as kernels");
    if (p->cublaslt) dpc_cublaslt_unload(&lt);
    dpc_diag_free(&d);
  }
  dpc_diag_init(&d);
  dpc_nccl_api nccl;
  char found[80] = "";
  p->nccl = dpc_nccl_load(&nccl, "cuda", &d) == DPC_OK;
  if (p->nccl) {
    char version[48];
    dpc_nccl_version_text(&nccl, version, sizeof version);
    snprintf(found, sizeof found, "all-reduces between GPUs over %s", version);
    dpc_nccl_unload(&nccl);
  }
  note_library(p, p->nccl, found, &d, "all-reduces between GPUs go through the host");
  dpc_diag_free(&d);
}
