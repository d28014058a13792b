/*
 * cuda_driver.h — the CUDA driver, found at run time: dlopen of libcuda.so.1 (or of the library
 * $DPC_CUDA_DRIVER names: the tests' stand-in), never linked, so dpc and libdpcrt start on
 * machines without it. One loader serves both users: the probe behind `dpc devices` (whether
 * the driver loads and initialises, its version, how many GPUs it sees) and the cuda:N devices
 * (device_cuda.c), which take the whole table of entry points.
 *
 * No CUDA header is needed: the driver API's types are declared here by their ABI (CUresult an
 * int-sized enum, CUdevice an int, CUdeviceptr an unsigned 64-bit integer, handles pointers).
 */
#ifndef DPC_RUNTIME_CUDA_DRIVER_H
#define DPC_RUNTIME_CUDA_DRIVER_H

#include "ir/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int dpc_cu_result;
typedef uint64_t dpc_cu_ptr;

/* The entry points dpc calls, by their exported (versioned) names in cuda_driver.c. */
typedef struct dpc_cu_api {
  void *lib;
  dpc_cu_result (*init)(unsigned);
  dpc_cu_result (*driver_version)(int *);
  dpc_cu_result (*device_count)(int *);
  dpc_cu_result (*device_get)(int *, int);
  dpc_cu_result (*device_attribute)(int *, int, int);
  dpc_cu_result (*device_name)(char *, int, int);
  dpc_cu_result (*device_memory)(size_t *, int);
  dpc_cu_result (*ctx_retain)(void **, int);
  dpc_cu_result (*ctx_release)(int);
  dpc_cu_result (*ctx_set)(void *);
  dpc_cu_result (*stream_create)(void **, unsigned);
  dpc_cu_result (*stream_destroy)(void *);
  dpc_cu_result (*stream_sync)(void *);
  dpc_cu_result (*mem_alloc)(dpc_cu_ptr *, size_t);
  dpc_cu_result (*mem_free)(dpc_cu_ptr);
  dpc_cu_result (*host_alloc)(void **, size_t, unsigned);
  dpc_cu_result (*host_free)(void *);
  dpc_cu_result (*memset8)(dpc_cu_ptr, unsigned char, size_t, void *);
  dpc_cu_result (*h2d)(dpc_cu_ptr, const void *, size_t, void *);
  dpc_cu_result (*d2h)(void *, dpc_cu_ptr, size_t, void *);
  dpc_cu_result (*d2d)(dpc_cu_ptr, dpc_cu_ptr, size_t, void *);
  dpc_cu_result (*peer)(dpc_cu_ptr, void *, dpc_cu_ptr, void *, size_t, void *);
  dpc_cu_result (*module_load)(void **, const void *);
  dpc_cu_result (*module_function)(void **, void *, const char *);
  dpc_cu_result (*module_unload)(void *);
  dpc_cu_result (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          unsigned, void *, void **, void **);
  dpc_cu_result (*event_create)(void **, unsigned);
  dpc_cu_result (*event_record)(void *, void *);
  dpc_cu_result (*event_destroy)(void *);
  dpc_cu_result (*stream_wait)(void *, void *, unsigned);
  dpc_cu_result (*error_string)(dpc_cu_result, const char **);
} dpc_cu_api;

/* An entry point a table of function pointers takes, by its exported name and its offset. */
typedef struct dpc_dl_entry {
  const char *name;
  size_t at;
} dpc_dl_entry;
/* Each entry's symbol in `lib` put into `table` at its offset: NULL, or the first one missing. */
const char *dpc_dl_bind(void *lib, const dpc_dl_entry *e, size_t n, void *table);

/* A library found at run time and bound (cuBLAS, NCCL): the one $env names ("off": none), else
 * the first of names[0..n_names) that opens; its entries bound into table (which gets the
 * handle at lib_at). Messages start with `who` and name the library as `what`: "WHO: no WHAT
 * found (...)", "WHO: WHAT is off ($ENV=off)", "WHO: the WHAT PATH lacks NAME"; nothing stays
 * open on failure. */
typedef struct dpc_dl_lib {
  const char *env, *what;
  const char *const *names;
  size_t n_names;
  const dpc_dl_entry *entries;
  size_t n_entries;
  size_t lib_at;
} dpc_dl_lib;
dpc_status dpc_dl_load(const dpc_dl_lib *l, const char *who, void *table, dpc_diag *d);

/* Open the driver and find every entry point of dpc_cu_api (cuInit is not called). On failure
 * the message starts with `who` ("cuda:0"): "no CUDA driver found (...)" or "the CUDA driver
 * PATH lacks NAME"; nothing stays open. */
dpc_status dpc_cuda_driver_load(dpc_cu_api *api, const char *who, dpc_diag *d);
void dpc_cuda_driver_unload(dpc_cu_api *api);

/* Whether GPU `ordinal` can be used: the driver loads, initialises and sees that many GPUs. No
 * context or stream is made (opening the device does that): it is the check a run makes before
 * compiling, so a machine without a GPU is told at once. Messages start with "cuda:N: ". */
dpc_status dpc_cuda_driver_check(int ordinal, dpc_diag *d);

typedef struct dpc_cuda_probe {
  bool loaded;      /* the driver opened and its entry points found */
  bool initialised; /* cuInit(0) succeeded */
  int version;      /* cuDriverGetVersion: 13000 for CUDA 13.0; 0 when unknown */
  int gpus;         /* cuDeviceGetCount, 0 without a driver */
  bool cublas;      /* dpc_cuda_driver_probe_cublas: with GPUs, cuBLAS loads (cublas.h) */
  bool cublaslt;    /* and beside it cuBLASLt */
  bool nccl;        /* and NCCL (nccl.h) */
  /* "no CUDA driver found (...)" or "CUDA driver 13.0, 2 GPUs", and after
   * dpc_cuda_driver_probe_cublas "; matmuls on cuBLAS" or why not, "; bias and ReLU epilogues on
   * cuBLASLt" or why not (with cuBLAS only), then "; all-reduces between GPUs over NCCL 2.28.9"
   * or why through the host */
  char note[384];
} dpc_cuda_probe;

/* Look for the driver; never fails (what it found is in *p). The library is closed again. */
void dpc_cuda_driver_probe(dpc_cuda_probe *p);
/* After the probe, where it found GPUs: whether cuBLAS and NCCL load (closed again), said in *p.
 * Apart, because opening cuBLAS takes a large fraction of a second: `dpc devices` asks, the
 * checks before a run do not (a device loads it at its first GEMM, a run over GPUs NCCL when it
 * opens their collectives). */
void dpc_cuda_driver_probe_cublas(dpc_cuda_probe *p);

#endif
