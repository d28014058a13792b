/*
 * onnx_tensor.c — ONNX TensorProto to and from dpc tensors: the initializers of a model and the
 * input_N.pb / output_N.pb files of the ONNX test layout.
 *
 * A TensorProto holds its numbers either as little-endian bytes (raw_data) or in a typed list
 * whose field depends on the type (float16 and bool travel as int32_data); both are read. Only
 * raw_data is written, as onnx.numpy_helper does.
 */
#include "frontend/onnx.h"
#include "frontend/frontend.h"
#include "frontend/onnx_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool dpc_onnx_dtype(int32_t onnx, dpc_dtype *out) {
  switch (onnx) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = DPC_F32; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *out = DPC_F16; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = DPC_BF16; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = DPC_F64; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = DPC_I32; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = DPC_I64; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = DPC_BOOL; return true;
  default: return false;
  }
}

int32_t dpc_onnx_dtype_to(dpc_dtype t) {
  switch (t) {
  case DPC_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  case DPC_F16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
  case DPC_BF16: return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
  case DPC_F64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
  case DPC_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
  case DPC_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  case DPC_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
  default: return 0;
  }
}

const char *dpc_onnx_dtype_name(int32_t onnx) {
  static const char *const names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                      "int16",      "int32",   "int64",  "string", "bool",
                                      "float16",    "double",  "uint32", "uint64", "complex64",
                                      "complex128", "bfloat16"};
  if (onnx >= 0 && onnx < (int32_t)(sizeof names / sizeof *names)) return names[onnx];
  return "unknown";
}

/* Elements a shape holds, or -1 when a dimension is negative or the product is absurd (more
 * than 2^40 elements: no tensor dpc runs is that large, and it keeps sizes far from overflow). */
static int64_t checked_numel(const int64_t *dims, size_t n) {
  int64_t c = 1;
  for (size_t i = 0; i < n; i++) {
    if (dims[i] < 0) return -1;
    if (dims[i] == 0)
      c = 0;
    else if (c > (INT64_C(1) << 40) / dims[i])
      return -1;
    else
      c *= dims[i];
  }
  return c;
}

dpc_status dpc_onnx_tensor_from(const Onnx__TensorProto *tp, const char *what, dpc_tensor *t,
                                dpc_diag *d) {
  memset(t, 0, sizeof *t);
  const char *nm = tp->name && *tp->name ? tp->name : what;
  if (tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL || tp->n_external_data)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "tensor '%s' keeps its data in an external file, which dpc does not read",
                         nm);
  if (tp->segment) return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "tensor '%s' is segmented", nm);
  if (!dpc_onnx_dtype(tp->data_type, &t->dtype))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "tensor '%s' has element type %s (%d), which dpc "
                         "does not have",
                         nm, dpc_onnx_dtype_name(tp->data_type), tp->data_type);
  if (tp->n_dims > DPC_MAX_RANK)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "tensor '%s' has rank %zu, above dpc's limit of %d", nm, tp->n_dims,
                         DPC_MAX_RANK);
  int64_t n = checked_numel(tp->dims, tp->n_dims);
  if (n < 0)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "tensor '%s' has a negative or absurd dimension", nm);
  t->shape.rank = (uint32_t)tp->n_dims;
  for (size_t i = 0; i < tp->n_dims; i++) t->shape.d[i] = tp->dims[i];
  size_t es = dpc_dtype_size(t->dtype), bytes = (size_t)n * es;
  size_t have;
  if (tp->has_raw_data)
    have = tp->raw_data.len / es;
  else if (t->dtype == DPC_F32)
    have = tp->n_float_data;
  else if (t->dtype == DPC_F64)
    have = tp->n_double_data;
  else if (t->dtype == DPC_I64)
    have = tp->n_int64_data;
  else
    have = tp->n_int32_data;
  if (have != (size_t)n || (tp->has_raw_data && tp->raw_data.len != bytes))
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "tensor '%s' has %zu values of %s, its shape needs %lld", nm, have,
                         dpc_dtype_name(t->dtype), (long long)n);
  t->data = malloc(bytes ? bytes : 1);
  if (!t->data) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory for tensor '%s'", nm);
  if (tp->has_raw_data) {
    if (bytes) memcpy(t->data, tp->raw_data.data, bytes);
    return DPC_OK;
  }
  /* the typed lists hold the element type itself, except float16, bfloat16 and bool, which
   * travel widened into int32_data */
  const void *same = t->dtype == DPC_F32   ? (const void *)tp->float_data
                     : t->dtype == DPC_F64 ? (const void *)tp->double_data
                     : t->dtype == DPC_I64 ? (const void *)tp->int64_data
                     : t->dtype == DPC_I32 ? (const void *)tp->int32_data
                                           : NULL;
  if (same) {
    if (bytes) memcpy(t->data, same, bytes);
    return DPC_OK;
  }
  unsigned char *p = t->data;
  for (int64_t i = 0; i < n; i++) {
    if (t->dtype == DPC_BOOL) {
      p[i] = tp->int32_data[i] != 0;
    } else {
      uint16_t h = (uint16_t)tp->int32_data[i];
      memcpy(p + 2 * i, &h, 2);
    }
  }
  return DPC_OK;
}

dpc_status dpc_onnx_tensor_decode(const void *data, size_t len, dpc_tensor *t, char **name,
                                  dpc_diag *d) {
  memset(t, 0, sizeof *t);
  if (name) *name = NULL;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, data);
  if (!tp)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "not an ONNX TensorProto (truncated or damaged)");
  dpc_status st = dpc_onnx_tensor_from(tp, "tensor", t, d);
  if (!st && name && !(*name = dpc_strdup(tp->name ? tp->name : "")))
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (st) {
    free(t->data);
    t->data = NULL;
  }
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return st;
}

dpc_status dpc_onnx_tensor_read(const char *path, dpc_tensor *t, char **name, dpc_diag *d) {
  char *buf;
  size_t len;
  dpc_status st = dpc_read_file(path, &buf, &len, d);
  if (st) return st;
  st = dpc_onnx_tensor_decode(buf, len, t, name, d);
  free(buf);
  if (st) dpc_diag_prefix(d, "%s: ", path);
  return st;
}

dpc_status dpc_onnx_tensor_write(const char *path, const char *name, const dpc_tensor *t,
                                 dpc_diag *d) {
  Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
  int64_t dims[DPC_MAX_RANK];
  for (uint32_t i = 0; i < t->shape.rank; i++) dims[i] = t->shape.d[i];
  tp.n_dims = t->shape.rank;
  tp.dims = dims;
  tp.has_data_type = true;
  tp.data_type = dpc_onnx_dtype_to(t->dtype);
  tp.name = (char *)(name ? name : "");
  tp.has_raw_data = true;
  tp.raw_data.len = dpc_tensor_bytes(t);
  tp.raw_data.data = t->data;
  size_t n = onnx__tensor_proto__get_packed_size(&tp);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory writing '%s'", path);
  onnx__tensor_proto__pack(&tp, buf);
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(buf);
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  }
  bool ok = fwrite(buf, 1, n, f) == n;
  ok = (fclose(f) == 0) && ok;
  free(buf);
  if (!ok) return dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s'", path);
  return DPC_OK;
}
