/*
 * imports.c — each reading device's copies of values held on other devices (imports.h).
 */
#include "runtime/imports.h"

#include <stdlib.h>

dpc_status dpc_imports_get(dpc_imports *im, dpc_device *dev, uint32_t dev_i, uint32_t value,
                           uint32_t from, size_t bytes, uint32_t *idx, dpc_diag *d) {
  for (uint32_t k = 0; k < im->n; k++)
    if (im->v[k].dev == dev_i && im->v[k].value == value) return *idx = k, DPC_OK;
  if (DPC_VEC_RESERVE(im->v, im->cap, im->n + 1))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory for a value from another device",
                         dev->name);
  dpc_import *x = &im->v[im->n];
  *x = (dpc_import){dev_i, value, from, NULL, bytes, 0};
  dpc_status st = dev->ops->alloc(dev, bytes ? bytes : 1, &x->buf, d);
  if (st) return st;
  *idx = im->n++;
  return DPC_OK;
}

dpc_status dpc_imports_refresh(dpc_imports *im, uint32_t idx, dpc_device *dev, dpc_device *from,
                               const void *src, uint64_t run, dpc_diag *d) {
  dpc_import *x = &im->v[idx];
  if (x->fresh == run) return DPC_OK;
  dpc_status st = dpc_device_copy_between(dev, x->buf, from, src, x->bytes, d);
  if (!st) x->fresh = run;
  return st;
}

void dpc_imports_free(dpc_imports *im, dpc_device *const *devs) {
  for (uint32_t k = 0; k < im->n; k++)
    if (im->v[k].buf && devs && devs[im->v[k].dev])
      devs[im->v[k].dev]->ops->free(devs[im->v[k].dev], im->v[k].buf);
  free(im->v);
  im->v = NULL, im->n = im->cap = 0;
}
