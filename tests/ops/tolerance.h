/*
 * tolerance.h — how close an op's output must be to the expected one: the tolerances by dtype and
 * the comparison that the CPU op tests (run_cases.c) and the CUDA emulation tests share, so both
 * backends are held to the same bar.
 */
#ifndef DPC_TESTS_OPS_TOLERANCE_H
#define DPC_TESTS_OPS_TOLERANCE_H

#include "ir/tensor.h"

#include <math.h>
#include <stdbool.h>

static inline void default_tol(dpc_dtype t, double *rtol, double *atol) {
  switch (t) {
  case DPC_F64: *rtol = 1e-10, *atol = 1e-12; break;
  case DPC_F32: *rtol = 1e-5, *atol = 1e-6; break;
  case DPC_F16: *rtol = 2e-3, *atol = 1e-3; break;
  case DPC_BF16: *rtol = 1e-2, *atol = 1e-2; break;
  default: *rtol = 0, *atol = 0; break;
  }
}

static inline bool close_enough(double a, double b, double rtol, double atol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= atol + rtol * fabs(b);
}

#endif
