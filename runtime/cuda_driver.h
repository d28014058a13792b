/*
 * cuda_driver.h — the CUDA driver, found at run time: dlopen("libcuda.so.1"), never linked, so
 * dpc and libdpcrt start on machines without it. What is known of it is a probe: whether the
 * driver loads, initialises, its version and how many GPUs it sees, with a sentence for people.
 *
 * This is the first piece of the `cuda:N` devices (their vtable comes with the launch path);
 * no CUDA header is needed: the few types the probe uses are declared here by their ABI.
 */
#ifndef DPC_RUNTIME_CUDA_DRIVER_H
#define DPC_RUNTIME_CUDA_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dpc_cuda_probe {
  bool loaded;      /* libcuda.so.1 opened and its entry points found */
  bool initialised; /* cuInit(0) succeeded */
  int version;      /* cuDriverGetVersion: 13000 for CUDA 13.0; 0 when unknown */
  int gpus;         /* cuDeviceGetCount, 0 without a driver */
  char note[256];   /* "no CUDA driver found (...)" or "CUDA driver 13.0, 2 GPUs" */
} dpc_cuda_probe;

/* Look for the driver; never fails (what it found is in *p). The library is closed again. */
void dpc_cuda_driver_probe(dpc_cuda_probe *p);

#endif
