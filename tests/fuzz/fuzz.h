/*
 * fuzz.h — what the libFuzzer targets share.
 */
#ifndef DPC_TESTS_FUZZ_FUZZ_H
#define DPC_TESTS_FUZZ_FUZZ_H

#include "ir/tensor.h"

/* Read every element of a tensor a reader returned: it promised this much data, and ASan sees
 * any read past it. */
static inline void fuzz_touch(const dpc_tensor *t) {
  volatile double sum = 0;
  int64_t n = dpc_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) sum += dpc_tload(t, i);
  (void)sum;
}

#endif
