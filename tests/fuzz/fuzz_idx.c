/*
 * fuzz_idx.c — libFuzzer target for the dataset file reader: gzip data (truncated, corrupt,
 * several members) and IDX headers (bad magic, counts beyond the file) must be refused with a
 * message, never read out of bounds. Input starting with 1f 8b is inflated first, as
 * dpc_data_read_file does with a file.
 */
#include "runtime/data.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  dpc_diag d;
  dpc_diag_init(&d);
  void *raw = NULL;
  size_t len = size;
  const void *buf = data;
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    if (dpc_data_gunzip(data, size, "fuzz.gz", &raw, &len, &d) != DPC_OK) {
      if (!d.msg) abort();
      dpc_diag_free(&d);
      return 0;
    }
    buf = raw;
  }
  dpc_idx idx;
  if (dpc_idx_parse(buf, len, "fuzz.idx", &idx, &d) == DPC_OK) {
    /* touch every byte: the parser promised this much data */
    volatile unsigned sum = 0;
    int64_t n = dpc_shape_numel(&idx.shape);
    for (int64_t i = 0; i < n; i++) sum += idx.data[i];
    (void)sum;
  } else if (!d.msg) {
    abort();
  }
  free(raw);
  dpc_diag_free(&d);
  return 0;
}
