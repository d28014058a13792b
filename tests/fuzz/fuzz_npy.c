/*
 * fuzz_npy.c — libFuzzer target for the .npy reader: malformed headers and short data must be
 * refused with a message, never read out of bounds.
 */
#include "runtime/npy.h"
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_tensor t;
  if (dpc_npy_parse(data, size, "fuzz.npy", &t, &d) == DPC_OK) {
    fuzz_touch(&t);
    free(t.data);
  } else if (!d.msg) {
    abort();
  }
  dpc_diag_free(&d);
  return 0;
}
