/*
 * fuzz_npy.c — libFuzzer target for the .npy reader: malformed headers and short data must be
 * refused with a message, never read out of bounds.
 */
#include "runtime/npy.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_tensor t;
  if (dpc_npy_parse(data, size, "fuzz.npy", &t, &d) == DPC_OK) {
    /* touch every element: the reader promised this much data */
    volatile double sum = 0;
    int64_t n = dpc_tensor_numel(&t);
    for (int64_t i = 0; i < n; i++) sum += dpc_tload(&t, i);
    (void)sum;
    free(t.data);
  } else if (!d.msg) {
    abort();
  }
  dpc_diag_free(&d);
  return 0;
}
