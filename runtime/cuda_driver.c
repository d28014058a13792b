/*
 * cuda_driver.c — the CUDA driver probe (cuda_driver.h): dlopen, dlsym of the entry points by
 * their versioned names, cuInit. Must not link libcuda or include cuda.h: a machine without
 * the driver runs everything else.
 */
#include "runtime/cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The driver API's ABI for the calls used: CUresult is an int-sized enum, CUdevice an int. */
typedef int cu_result;
typedef cu_result (*cu_init_fn)(unsigned flags);
typedef cu_result (*cu_count_fn)(int *count);
typedef cu_result (*cu_version_fn)(int *version);

void dpc_cuda_driver_probe(dpc_cuda_probe *p) {
  memset(p, 0, sizeof *p);
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    snprintf(p->note, sizeof p->note, "no CUDA driver found (%s)", why ? why : "libcuda.so.1");
    return;
  }
  /* dlsym gives functions as void *; C has no cast between the two, so copy the bits */
  cu_init_fn init = NULL;
  cu_count_fn count = NULL;
  cu_version_fn version = NULL;
  void *s1 = dlsym(h, "cuInit"), *s2 = dlsym(h, "cuDeviceGetCount"),
       *s3 = dlsym(h, "cuDriverGetVersion");
  memcpy(&init, &s1, sizeof init);
  memcpy(&count, &s2, sizeof count);
  memcpy(&version, &s3, sizeof version);
  if (!init || !count || !version) {
    snprintf(p->note, sizeof p->note, "no usable CUDA driver: libcuda.so.1 lacks cuInit");
    dlclose(h);
    return;
  }
  p->loaded = true;
  version(&p->version);
  cu_result r = init(0);
  if (r != 0) {
    /* 34 is CUDA_ERROR_STUB_LIBRARY (the toolkit's stub), 100 CUDA_ERROR_NO_DEVICE */
    snprintf(p->note, sizeof p->note, "CUDA driver found but cuInit failed (error %d%s)", r,
             r == 34    ? ": the toolkit's stub library, not a driver"
             : r == 100 ? ": no GPU"
                        : "");
    dlclose(h);
    return;
  }
  p->initialised = true;
  if (count(&p->gpus) != 0) p->gpus = 0;
  snprintf(p->note, sizeof p->note, "CUDA driver %d.%d, %d GPU%s", p->version / 1000,
           (p->version % 1000) / 10, p->gpus, p->gpus == 1 ? "" : "s");
  dlclose(h);
}
