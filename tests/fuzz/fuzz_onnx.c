/*
 * fuzz_onnx.c — libFuzzer target for the ONNX importer and the TensorProto reader: any bytes
 * must give a verified graph or an error with a message, never a crash, a leak or a hang.
 */
#include "frontend/onnx.h"
#include "ir/print.h"
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  if (dpc_onnx_import("fuzz.onnx", data, size, &g, &d) == DPC_OK) {
    if (dpc_verify(g, &d) && !d.msg) abort();
    dpc_graph_free(g);
  } else if (!d.msg) {
    abort();
  }
  dpc_diag_clear(&d);
  /* the same bytes with a fixed leading dimension made the batch, as dpc train imports them */
  dpc_onnx_opts batched = {.leading_batch = true};
  if (dpc_onnx_import_opts("fuzz.onnx", data, size, &batched, &g, &d) == DPC_OK) {
    if (dpc_verify(g, &d) && !d.msg) abort();
    dpc_graph_free(g);
  } else if (!d.msg) {
    abort();
  }
  dpc_diag_clear(&d);
  dpc_tensor t;
  if (dpc_onnx_tensor_decode(data, size, &t, NULL, &d) == DPC_OK) {
    fuzz_touch(&t);
    free(t.data);
  } else if (!d.msg) {
    abort();
  }
  dpc_diag_free(&d);
  return 0;
}
