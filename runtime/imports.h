/*
 * imports.h — values a device reads from another device's memory, when the two do not share an
 * address space (a GPU beside a GPU): the reading device gets a buffer of its own for each such
 * value, and the value is copied into it (a peer copy on the reader's queue, after the wait for
 * its producer) before the first kernel that reads it in each run; between a GPU and the host's
 * CPU it is the GPU's copy into or out of its memory. Devices whose memory the host addresses
 * (the cpu) read each other's memory in place and need none.
 *
 *   uint32_t k;
 *   dpc_imports_get(&im, devs[i], i, v, j, bytes, &k, &d);    // at session open
 *   dpc_imports_refresh(&im, k, devs[i], devs[j], src, run, &d);  // before a kernel reads it
 */
#ifndef DPC_RUNTIME_IMPORTS_H
#define DPC_RUNTIME_IMPORTS_H

#include "runtime/device.h"

typedef struct dpc_import {
  uint32_t dev, value, from; /* the reading device, the value, the device that holds it */
  void *buf;                 /* on dev */
  size_t bytes;
  uint64_t fresh; /* the run it was last copied in (0: never) */
} dpc_import;

typedef struct dpc_imports {
  dpc_import *v;
  uint32_t n, cap;
} dpc_imports;

/* The import of `value` (held on device `from`) for device index dev_i (device dev), made the
 * first time it is asked for: *idx gets its index. */
dpc_status dpc_imports_get(dpc_imports *im, dpc_device *dev, uint32_t dev_i, uint32_t value,
                           uint32_t from, size_t bytes, uint32_t *idx, dpc_diag *d);
/* Copy import idx from src (on device `from`) unless it was copied in this run already. */
dpc_status dpc_imports_refresh(dpc_imports *im, uint32_t idx, dpc_device *dev, dpc_device *from,
                               const void *src, uint64_t run, dpc_diag *d);
/* Give every buffer back to its device (devs indexed as dev_i). */
void dpc_imports_free(dpc_imports *im, dpc_device *const *devs);

#endif
