/*
 * device_cpu.c — the host CPU as a device. Kernels run on the calling thread; binding workers
 * to cores with hwloc comes with the multi-device executor.
 */
#include "runtime/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dpc_status cpu_alloc(dpc_device *dev, size_t bytes, void **out, dpc_diag *d) {
  size_t n = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, n ? n : 64);
  if (!p) return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: cannot allocate %zu bytes", dev->name, bytes);
  memset(p, 0, n ? n : 64);
  *out = p;
  return DPC_OK;
}

static void cpu_release(dpc_device *dev, void *p) {
  (void)dev;
  free(p);
}

static const dpc_device_ops cpu_ops = {
    .kind = "cpu",
    .alloc = cpu_alloc,
    .release = cpu_release,
    .launch = NULL, /* host: the executor calls the kernel directly */
};

dpc_status dpc_device_open(const char *name, dpc_device **out, dpc_diag *d) {
  *out = NULL;
  int idx = 0;
  if (strcmp(name, "cpu") != 0) {
    char extra;
    if (sscanf(name, "cpu:%d%c", &idx, &extra) != 1 || idx < 0)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "unknown device '%s' (this build runs on cpu or cpu:N)", name);
  }
  dpc_device *dev = calloc(1, sizeof *dev);
  if (!dev) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening %s", name);
  dev->ops = &cpu_ops;
  snprintf(dev->name, sizeof dev->name, "cpu:%d", idx);
  *out = dev;
  return DPC_OK;
}

void dpc_device_close(dpc_device *dev) {
  free(dev);
}
