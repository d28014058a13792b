/*
 * npycmp.c — compare two .npy files element by element.
 *   npycmp GOT.npy WANT.npy [RTOL [ATOL]]     exit 0 when every |got - want| <= atol + rtol*|want|
 */
#include "runtime/npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: npycmp GOT.npy WANT.npy [RTOL [ATOL]]\n");
    return 2;
  }
  double rtol = argc > 3 ? strtod(argv[3], NULL) : 1e-5,
         atol = argc > 4 ? strtod(argv[4], NULL) : 1e-6;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_tensor a, b;
  if (dpc_npy_read(argv[1], &a, &d) || dpc_npy_read(argv[2], &b, &d)) {
    fprintf(stderr, "npycmp: %s\n", d.msg);
    return 1;
  }
  if (!dpc_shape_eq(&a.shape, &b.shape)) {
    fprintf(stderr, "npycmp: shapes differ\n");
    return 1;
  }
  int64_t n = dpc_tensor_numel(&a), bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = dpc_tload(&a, i), y = dpc_tload(&b, i), e = fabs(x - y);
    if (!(e <= atol + rtol * fabs(y))) {
      if (bad++ < 5) fprintf(stderr, "  [%lld] got %.9g want %.9g\n", (long long)i, x, y);
    }
    if (e > worst) worst = e;
  }
  printf("%lld elements, %lld differ, max abs error %.3g\n", (long long)n, (long long)bad, worst);
  free(a.data);
  free(b.data);
  dpc_diag_free(&d);
  return bad ? 1 : 0;
}
