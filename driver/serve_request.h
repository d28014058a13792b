/*
 * serve_request.h — one KServe v2 inference request read against a model's signature, and its
 * answer written: JSON tensors, or the binary tensor data extension (a JSON header of
 * Inference-Header-Content-Length bytes, then the tensors' raw little-endian bytes in order).
 *
 * No HTTP and no batcher here: api_serve.c moves the bytes, this file decides what they mean,
 * so the parser can be fuzzed on its own (tests/fuzz/fuzz_serve_request.c).
 */
#ifndef DPC_DRIVER_SERVE_REQUEST_H
#define DPC_DRIVER_SERVE_REQUEST_H

#include <dpc/dpc.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A model's input or output as the server sees it: dims[0] is the batch. */
typedef struct dpc_serve_tensor {
  char name[128];
  dpc_elem elem;
  unsigned rank;
  int64_t dims[DPC_TENSOR_MAX_RANK];
  size_t row_elems, elem_bytes;
} dpc_serve_tensor;

typedef struct dpc_serve_sig {
  const char *model;
  const dpc_serve_tensor *in, *out;
  unsigned n_in, n_out;
  uint64_t max_batch;
} dpc_serve_sig;

/* A request once read. in[i] holds rows x row of input i; out[i] is room for output i, which
 * the caller's run fills. send[i]: output i is in the answer (all of them when the request names
 * none); binary[i]: it travels as raw bytes after the JSON. */
typedef struct dpc_serve_request {
  void *root; /* the request's JSON (a json_t), for its "id" */
  unsigned char **in, **out;
  bool *send, *binary;
  uint64_t rows;
} dpc_serve_request;

/* The KServe v2 name of an element type; NULL for those the server cannot carry. */
const char *dpc_serve_datatype(dpc_elem e);

/* Read body[0, len) as a request for sig. header_len is the value of the request's
 * Inference-Header-Content-Length (has_header false when it had none): the JSON is then the
 * first header_len bytes and binary input data follows. Returns 200, or the HTTP status to answer
 * with (400 for a bad request, 500 when memory ran out) and the reason in msg. Either way
 * dpc_serve_request_free releases rq. */
unsigned dpc_serve_request_parse(const dpc_serve_sig *sig, const char *body, size_t len,
                                 bool has_header, uint64_t header_len, dpc_serve_request *rq,
                                 char *msg, size_t msg_size);

/* The answer to a request whose outputs were filled: a malloc'd body of *len bytes (NULL when
 * memory ran out). *header_len is 0 for an all-JSON answer, else the length of its JSON part, to
 * be sent as Inference-Header-Content-Length. real_digits: significant digits of a real number
 * (9 round-trips a float, 17 a double). */
char *dpc_serve_answer_build(const dpc_serve_sig *sig, const dpc_serve_request *rq,
                             unsigned real_digits, size_t *len, size_t *header_len);

void dpc_serve_request_free(const dpc_serve_sig *sig, dpc_serve_request *rq);

#endif
