/*
 * device.h — a device as the executor sees it: memory it can hand out and a way to run a
 * kernel on it, behind a vtable with optional slots (ggml's backend habit).
 *
 * Today there is the host CPU. CUDA devices (driver loaded with dlopen), NUMA-bound CPU groups
 * and MPI ranks implement the same table later; the executor does not change.
 */
#ifndef DPC_RUNTIME_DEVICE_H
#define DPC_RUNTIME_DEVICE_H

#include "runtime/kernel.h"

typedef struct dpc_device dpc_device;

typedef struct dpc_device_ops {
  const char *kind; /* "cpu" */
  /* Memory for a plan's buffer: zeroed and already touched, so the first step pays no page
   * faults (they cost ~12 us per 4 KiB page on the project's machines). */
  dpc_status (*alloc)(dpc_device *dev, size_t bytes, void **out, dpc_diag *d);
  void (*release)(dpc_device *dev, void *p);
  /* Run one kernel. Optional: absent means call fn directly on the host. */
  dpc_status (*launch)(dpc_device *dev, dpc_kernel_fn fn, const dpc_kernel_args *a, dpc_diag *d);
} dpc_device_ops;

struct dpc_device {
  const dpc_device_ops *ops;
  char name[32]; /* "cpu:0" */
  void *impl;
};

/* Open a device by name: "cpu" or "cpu:N". */
dpc_status dpc_device_open(const char *name, dpc_device **out, dpc_diag *d);
void dpc_device_close(dpc_device *dev);

#endif
