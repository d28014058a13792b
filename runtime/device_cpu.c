/*
 * device_cpu.c — the host CPU as a device. Its handles are host pointers, its copies memcpy, and
 * it has no stream: work is done when launch returns, so events and synchronize only count.
 * Kernels run on the calling thread, split over the device's pool when the session gives one.
 */
#include "runtime/device.h"

#include "runtime/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpc_status dpc_device_testmem_open(int idx, dpc_device **out, dpc_diag *d);
dpc_status dpc_device_cuda_open(int idx, dpc_device **out, dpc_diag *d);
void dpc_device_cuda_close(dpc_device *dev);

static dpc_status cpu_alloc(dpc_device *dev, size_t bytes, void **out, dpc_diag *d) {
  size_t n = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, n ? n : 64);
  if (!p) return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: cannot allocate %zu bytes", dev->name, bytes);
  memset(p, 0, n ? n : 64);
  *out = p;
  return DPC_OK;
}

static dpc_status cpu_reserve(dpc_device *dev, size_t bytes, void **out, dpc_diag *d) {
  size_t n = (bytes + 63) / 64 * 64;
  if (!(*out = aligned_alloc(64, n ? n : 64)))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: cannot allocate %zu bytes", dev->name, bytes);
  return DPC_OK;
}

static void cpu_free(dpc_device *dev, void *p) {
  (void)dev;
  free(p);
}

static dpc_status cpu_copy(dpc_device *dev, dpc_copy_kind kind, void *dst, const void *src,
                           size_t bytes, dpc_device *peer, dpc_diag *d) {
  (void)dev, (void)kind, (void)peer, (void)d;
  /* a view written back onto itself (a host-visible value read, changed, then set) */
  if (bytes && dst != src) memcpy(dst, src, bytes);
  return DPC_OK;
}

dpc_status dpc_device_cpu_launch(dpc_device *dev, const dpc_launch *l, int32_t *bad, dpc_diag *d) {
  (void)dev;
  *bad = 0;
  if (l->native.kind != DPC_KERNEL_HOST)
    return l->fn(l->a, d); /* the session admits host code only */
  const dpc_run_info *r = l->run;
  *bad = l->pool ? dpc_pool_run(l->pool, l->native.fn, l->args, l->native.total,
                                dpc_run_kernel_step(r), r->training)
                 : l->native.fn(l->args, 0, l->native.total, dpc_run_kernel_step(r), r->training);
  return DPC_OK;
}

static dpc_status cpu_event_record(dpc_device *dev, dpc_device_event *e, dpc_diag *d) {
  (void)dev, (void)d;
  e->recorded++;
  return DPC_OK;
}

static dpc_status cpu_event_wait(dpc_device *dev, const dpc_device_event *e, dpc_diag *d) {
  (void)dev, (void)e, (void)d;
  return DPC_OK;
}

static dpc_status cpu_synchronize(dpc_device *dev, dpc_diag *d) {
  (void)dev, (void)d;
  return DPC_OK;
}

static const dpc_device_ops cpu_ops = {
    .kind = "cpu",
    .host_visible = true,
    .alloc = cpu_alloc,
    .reserve = cpu_reserve,
    .free = cpu_free,
    .copy = cpu_copy,
    .launch = dpc_device_cpu_launch,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .synchronize = cpu_synchronize,
};

dpc_status dpc_device_open(const char *name, dpc_device **out, dpc_diag *d) {
  *out = NULL;
  int idx = 0;
  char extra;
  if (sscanf(name, "testmem:%d%c", &idx, &extra) == 1 && idx >= 0)
    return dpc_device_testmem_open(idx, out, d);
  if (sscanf(name, "cuda:%d%c", &idx, &extra) == 1 && idx >= 0)
    return dpc_device_cuda_open(idx, out, d);
  if (strcmp(name, "cpu") != 0) {
    if (sscanf(name, "cpu:%d%c", &idx, &extra) != 1 || idx < 0)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "unknown device '%s' (devices are cpu, cpu:N and cuda:N)", name);
  }
  dpc_device *dev = calloc(1, sizeof *dev);
  if (!dev) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening %s", name);
  dev->ops = &cpu_ops;
  snprintf(dev->name, sizeof dev->name, "cpu:%d", idx);
  *out = dev;
  return DPC_OK;
}

dpc_status dpc_device_copy_between(dpc_device *to, void *dst, dpc_device *from, const void *src,
                                   size_t bytes, dpc_diag *d) {
  if (to == from) return to->ops->copy(to, DPC_COPY_D2D, dst, src, bytes, NULL, d);
  bool in = to->ops->host_visible, out = from->ops->host_visible;
  if (in == out) return to->ops->copy(to, DPC_COPY_PEER, dst, src, bytes, from, d);
  return out ? to->ops->copy(to, DPC_COPY_H2D, dst, src, bytes, NULL, d)
             : from->ops->copy(from, DPC_COPY_D2H, dst, src, bytes, NULL, d);
}

void dpc_device_close(dpc_device *dev) {
  if (dev && !strcmp(dev->ops->kind, "cuda")) dpc_device_cuda_close(dev);
  free(dev);
}

dpc_status dpc_device_host_alloc(dpc_device *dev, size_t bytes, void **out, dpc_diag *d) {
  if (dev->ops->host_alloc) return dev->ops->host_alloc(dev, bytes, out, d);
  if (!(*out = calloc(1, bytes ? bytes : 1)))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory for %zu bytes of host memory",
                         dev->name, bytes);
  return DPC_OK;
}

void dpc_device_host_free(dpc_device *dev, void *p) {
  if (dev->ops->host_free)
    dev->ops->host_free(dev, p);
  else
    free(p);
}
