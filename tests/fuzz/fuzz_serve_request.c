/*
 * fuzz_serve_request.c — libFuzzer target for the HTTP server's inference request reader: any
 * body, JSON or binary-data extension, is either read into buffers of exactly the sizes the
 * model's signature gives (and answered) or refused with a status and a message; never a read
 * or write out of bounds.
 *
 * Input: two bytes of Inference-Header-Content-Length (little-endian; 0xffff: no such header),
 * then the body.
 */
#include "driver/serve_request.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const dpc_serve_tensor ins[] = {
    {"x", DPC_ELEM_F32, 2, {-1, 3}, 3, 4},
    {"k", DPC_ELEM_I64, 1, {-1}, 1, 8},
    {"m", DPC_ELEM_BOOL, 3, {-1, 2, 2}, 4, 1},
};
static const dpc_serve_tensor outs[] = {
    {"y", DPC_ELEM_F32, 2, {-1, 2}, 2, 4},
    {"z", DPC_ELEM_I32, 1, {-1}, 1, 4},
    {"w", DPC_ELEM_F64, 1, {-1}, 1, 8},
};

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (size < 2) return 0;
  unsigned hl = data[0] | (unsigned)data[1] << 8;
  dpc_serve_sig sig = {"fuzz", ins, outs, 3, 3, 16};
  dpc_serve_request rq;
  char msg[512] = "";
  /* a copy of exactly the body's bytes, so ASan sees a read past it */
  char *body = malloc(size - 2 + 1);
  if (!body) return 0;
  memcpy(body, data + 2, size - 2);
  unsigned code =
      dpc_serve_request_parse(&sig, body, size - 2, hl != 0xffff, hl, &rq, msg, sizeof msg);
  if (code == 200) {
    if (rq.rows < 1 || rq.rows > sig.max_batch) abort();
    volatile unsigned sum = 0;
    for (unsigned i = 0; i < sig.n_in; i++)
      for (size_t b = 0; b < rq.rows * ins[i].row_elems * ins[i].elem_bytes; b++)
        sum += rq.in[i][b];
    (void)sum;
    for (unsigned i = 0; i < sig.n_out; i++)
      memset(rq.out[i], (int)(i + 1), rq.rows * outs[i].row_elems * outs[i].elem_bytes);
    size_t len, json_len;
    char *ans = dpc_serve_answer_build(&sig, &rq, 9, &len, &json_len);
    if (ans && json_len > len) abort();
    free(ans);
  } else if (!msg[0] || (code != 400 && code != 500)) {
    abort();
  }
  dpc_serve_request_free(&sig, &rq);
  free(body);
  return 0;
}
