/*
 * device_testmem.c — a device for tests only ("testmem:N"): host memory whose handles are not
 * host pointers. A handle is the address with bits 62 and 55 set, which is not canonical on
 * x86-64 (nor a user address on AArch64, whose top-byte-ignore stops at bit 56), so a load or
 * store through it faults at once. Only this file's calls strip the tag: its copies, and its
 * launch, which hands kernels the real addresses. A memcpy of device memory anywhere else then
 * crashes the test that trains on it, instead of passing on memory that happens to be the
 * host's. Not listed by `dpc devices`.
 */
#include "runtime/device.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG            (((uintptr_t)1 << 62) | ((uintptr_t)1 << 55))
#define MAX_STACK_ARGS 64

static void *untag(const void *p) {
  return (void *)((uintptr_t)p & ~TAG);
}

static bool tagged(const void *p) {
  return ((uintptr_t)p & TAG) == TAG;
}

static dpc_status tm_alloc(dpc_device *dev, size_t bytes, void **out, dpc_diag *d) {
  size_t n = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, n ? n : 64);
  if (!p) return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: cannot allocate %zu bytes", dev->name, bytes);
  memset(p, 0, n ? n : 64);
  *out = (void *)((uintptr_t)p | TAG);
  return DPC_OK;
}

static void tm_free(dpc_device *dev, void *p) {
  (void)dev;
  free(untag(p));
}

static dpc_status tm_copy(dpc_device *dev, dpc_copy_kind kind, void *dst, const void *src,
                          size_t bytes, dpc_device *peer, dpc_diag *d) {
  bool dst_dev = kind != DPC_COPY_D2H, src_dev = kind != DPC_COPY_H2D;
  if (kind == DPC_COPY_PEER && (!peer || peer == dev))
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s: a peer copy without another device", dev->name);
  /* a host pointer given as device memory, or device memory given as host memory */
  if (dst_dev != tagged(dst) || src_dev != tagged(src))
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s: copy of kind %d between %s and %s memory",
                         dev->name, (int)kind, tagged(dst) ? "device" : "host",
                         tagged(src) ? "device" : "host");
  void *to = untag(dst);
  const void *from = untag(src);
  if (bytes && to != from) memcpy(to, from, bytes);
  return DPC_OK;
}

static dpc_status tm_launch(dpc_device *dev, const dpc_launch *l, int32_t *bad, dpc_diag *d) {
  dpc_launch real = *l;
  if (l->native.kind == DPC_KERNEL_HOST) {
    void *stack[MAX_STACK_ARGS], **args = l->n_args <= MAX_STACK_ARGS ? stack : NULL;
    if (!args && !(args = malloc(l->n_args * sizeof *args)))
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory launching", dev->name);
    for (uint32_t k = 0; k < l->n_args; k++) args[k] = untag(l->args[k]);
    real.args = args;
    dpc_status st = dpc_device_cpu_launch(dev, &real, bad, d);
    if (args != stack) free(args);
    return st;
  }
  const dpc_kernel_args *a = l->a;
  uint32_t n = a->n_in + a->n_out;
  dpc_tensor stack[MAX_STACK_ARGS], *t = n <= MAX_STACK_ARGS ? stack : NULL;
  if (!t && !(t = malloc(n * sizeof *t)))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory launching", dev->name);
  for (uint32_t k = 0; k < a->n_in; k++) t[k] = a->in[k], t[k].data = untag(a->in[k].data);
  for (uint32_t k = 0; k < a->n_out; k++)
    t[a->n_in + k] = a->out[k], t[a->n_in + k].data = untag(a->out[k].data);
  dpc_kernel_args ra = *a;
  ra.in = t;
  ra.out = t + a->n_in;
  real.a = &ra;
  dpc_status st = dpc_device_cpu_launch(dev, &real, bad, d);
  if (t != stack) free(t);
  return st;
}

static dpc_status tm_event_record(dpc_device *dev, dpc_device_event *e, dpc_diag *d) {
  (void)dev, (void)d;
  e->recorded++;
  return DPC_OK;
}

/* an asynchronous device would wait on nothing here: say so */
static dpc_status tm_event_wait(dpc_device *dev, const dpc_device_event *e, dpc_diag *d) {
  if (!e->recorded)
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s waits on an event never recorded", dev->name);
  return DPC_OK;
}

static dpc_status tm_synchronize(dpc_device *dev, dpc_diag *d) {
  (void)dev, (void)d;
  return DPC_OK;
}

static const dpc_device_ops testmem_ops = {
    .kind = "testmem",
    .host_visible = false,
    .alloc = tm_alloc,
    .free = tm_free,
    .copy = tm_copy,
    .launch = tm_launch,
    .event_record = tm_event_record,
    .event_wait = tm_event_wait,
    .synchronize = tm_synchronize,
};

dpc_status dpc_device_testmem_open(int idx, dpc_device **out, dpc_diag *d);

dpc_status dpc_device_testmem_open(int idx, dpc_device **out, dpc_diag *d) {
  dpc_device *dev = calloc(1, sizeof *dev);
  if (!dev) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening testmem:%d", idx);
  dev->ops = &testmem_ops;
  snprintf(dev->name, sizeof dev->name, "testmem:%d", idx);
  *out = dev;
  return DPC_OK;
}
