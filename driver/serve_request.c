/*
 * serve_request.c — a KServe v2 inference request read and its answer written (see
 * serve_request.h). Every refusal says which input or output it is about and what the model
 * takes, because the person reading it is writing a client.
 */
#include "driver/serve_request.h"
#include "driver/serve_lift.h"
#include "ir/base.h"

#include <jansson.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dpc_serve_datatype(dpc_elem e) {
  switch (e) {
  case DPC_ELEM_F32: return "FP32";
  case DPC_ELEM_F64: return "FP64";
  case DPC_ELEM_I32: return "INT32";
  case DPC_ELEM_I64: return "INT64";
  case DPC_ELEM_BOOL: return "BOOL";
  default: return NULL;
  }
}

static unsigned refuse(unsigned code, char *msg, size_t n, const char *fmt, ...) DPC_PRINTF(4, 5);
static unsigned refuse(unsigned code, char *msg, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, n, fmt, ap);
  va_end(ap);
  return code;
}

/* Flatten JSON data (a flat or nested array of values) into *vals. */
static bool flatten(json_t *data, json_t ***vals, size_t *n, size_t *cap) {
  if (!json_is_array(data)) {
    if (*n == *cap) {
      *cap = *cap ? 2 * *cap : 1024;
      json_t **v = realloc(*vals, *cap * sizeof *v);
      if (!v) return false;
      *vals = v;
    }
    (*vals)[(*n)++] = data;
    return true;
  }
  for (size_t i = 0; i < json_array_size(data); i++)
    if (!flatten(json_array_get(data, i), vals, n, cap)) return false;
  return true;
}

/* Store value v as element i of t's type at p; false when it is not one. */
static bool store(const dpc_serve_tensor *t, json_t *v, unsigned char *p, size_t i) {
  switch (t->elem) {
  case DPC_ELEM_F32:
  case DPC_ELEM_F64: {
    if (!json_is_number(v)) return false;
    double x = json_number_value(v);
    if (t->elem == DPC_ELEM_F32)
      ((float *)p)[i] = (float)x;
    else
      ((double *)p)[i] = x;
    return true;
  }
  case DPC_ELEM_I32:
    if (!json_is_integer(v)) return false;
    ((int32_t *)p)[i] = (int32_t)json_integer_value(v);
    return true;
  case DPC_ELEM_I64:
    if (!json_is_integer(v)) return false;
    ((int64_t *)p)[i] = (int64_t)json_integer_value(v);
    return true;
  case DPC_ELEM_BOOL:
    if (json_is_boolean(v))
      p[i] = json_is_true(v);
    else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
      p[i] = (unsigned char)json_integer_value(v);
    else
      return false;
    return true;
  default: return false;
  }
}

static json_t *load(const dpc_serve_tensor *t, const unsigned char *p, size_t i) {
  switch (t->elem) {
  case DPC_ELEM_F32:
  case DPC_ELEM_F64: {
    double x = t->elem == DPC_ELEM_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
    /* JSON has no NaN or infinity: null stands for them */
    return x - x == 0 ? json_real(x) : json_null();
  }
  case DPC_ELEM_I32: return json_integer(((const int32_t *)p)[i]);
  case DPC_ELEM_I64: return json_integer(((const int64_t *)p)[i]);
  case DPC_ELEM_BOOL: return json_boolean(p[i]);
  default: return json_null();
  }
}

static void shape_text(const json_t *shape, char *buf, size_t n) {
  char *t = json_is_array(shape) ? json_dumps(shape, JSON_COMPACT) : NULL;
  snprintf(buf, n, "%.100s", t ? t : "(none)");
  free(t);
}

static void model_shape_text(const dpc_serve_tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[-1");
  for (unsigned j = 1; j < t->rank && k < n; j++)
    k += (size_t)snprintf(buf + k, n - k, ",%lld", (long long)t->dims[j]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

static const char *kind_text(dpc_elem e) {
  return e == DPC_ELEM_BOOL                       ? "a boolean"
         : e == DPC_ELEM_I32 || e == DPC_ELEM_I64 ? "an integer"
                                                  : "a number";
}

/* The JSON values of one input's "data" into its buffer. */
static unsigned read_json_data(const dpc_serve_tensor *t, json_t *data, size_t want,
                               unsigned char *p, char *msg, size_t n) {
  json_t **vals = NULL;
  size_t n_vals = 0, cap = 0;
  unsigned code = 200;
  if (!flatten(data, &vals, &n_vals, &cap))
    code = refuse(500, msg, n, "out of memory");
  else if (n_vals != want)
    code = refuse(400, msg, n, "input '%s' has %zu values in \"data\": its shape needs %zu",
                  t->name, n_vals, want);
  for (size_t v = 0; code == 200 && v < want; v++)
    if (!store(t, vals[v], p, v))
      code = refuse(400, msg, n, "input '%s': data[%zu] is not %s", t->name, v, kind_text(t->elem));
  free(vals);
  return code;
}

/* Element i of t's type at p from a JSON number token; false when it is not one of that type. */
static bool store_token(const dpc_serve_tensor *t, const char *tok, size_t len, unsigned char *p,
                        size_t i) {
  double x;
  int64_t v;
  switch (t->elem) {
  case DPC_ELEM_F32:
    if (!dpc_serve_parse_real(tok, len, &x)) return false;
    ((float *)p)[i] = (float)x;
    return true;
  case DPC_ELEM_F64:
    if (!dpc_serve_parse_real(tok, len, &x)) return false;
    ((double *)p)[i] = x;
    return true;
  case DPC_ELEM_I32:
    if (!dpc_serve_parse_int(tok, len, &v)) return false;
    ((int32_t *)p)[i] = (int32_t)v;
    return true;
  case DPC_ELEM_I64:
    if (!dpc_serve_parse_int(tok, len, &v)) return false;
    ((int64_t *)p)[i] = v;
    return true;
  case DPC_ELEM_BOOL:
    if (!dpc_serve_parse_int(tok, len, &v) || (v != 0 && v != 1)) return false;
    p[i] = (unsigned char)v;
    return true;
  default: return false;
  }
}

/* A lifted "data" array (serve_lift.h) into one input's buffer: the same checks, in the same
 * order, as read_json_data. */
static unsigned read_lifted_data(const dpc_serve_tensor *t, const dpc_serve_lifts *l, long k,
                                 size_t want, unsigned char *p, char *msg, size_t n) {
  const char *at = l->text + l->span[k][0], *end = l->text + l->span[k][1], *tok;
  size_t len, count = 0, bad = SIZE_MAX;
  while (dpc_serve_lift_next(&at, end, &tok, &len)) {
    if (count < want && bad == SIZE_MAX && !store_token(t, tok, len, p, count)) bad = count;
    count++;
  }
  if (count != want)
    return refuse(400, msg, n, "input '%s' has %zu values in \"data\": its shape needs %zu",
                  t->name, count, want);
  if (bad != SIZE_MAX)
    return refuse(400, msg, n, "input '%s': data[%zu] is not %s", t->name, bad, kind_text(t->elem));
  return 200;
}

/* One entry of "inputs": checked against the model and read into rq->in. */
static unsigned read_input(const dpc_serve_sig *sig, json_t *e, size_t k, dpc_serve_request *rq,
                           const char **rows_from, const unsigned char *bin, size_t bin_len,
                           size_t *bin_off, bool has_header, const dpc_serve_lifts *lifts,
                           char *msg, size_t n) {
  const char *name = json_string_value(json_object_get(e, "name"));
  if (!name) return refuse(400, msg, n, "inputs[%zu] has no \"name\" string", k);
  unsigned i = 0;
  while (i < sig->n_in && strcmp(sig->in[i].name, name)) i++;
  if (i == sig->n_in) {
    size_t w =
        (size_t)snprintf(msg, n, "unknown input '%.128s': model '%s' takes", name, sig->model);
    for (unsigned j = 0; j < sig->n_in && w < n; j++)
      w += (size_t)snprintf(msg + w, n - w, "%s '%s'", j ? "," : "", sig->in[j].name);
    return 400;
  }
  const dpc_serve_tensor *t = &sig->in[i];
  if (rq->in[i]) return refuse(400, msg, n, "input '%s' is given twice", t->name);
  const char *dt = json_string_value(json_object_get(e, "datatype"));
  if (!dt || strcmp(dt, dpc_serve_datatype(t->elem)))
    return refuse(400, msg, n, "input '%s' has datatype %.32s: the model takes %s", t->name,
                  dt ? dt : "(none)", dpc_serve_datatype(t->elem));
  json_t *shape = json_object_get(e, "shape");
  bool fits = json_is_array(shape) && json_array_size(shape) == t->rank;
  for (unsigned j = 0; fits && j < t->rank; j++) {
    json_t *d = json_array_get(shape, j);
    fits = json_is_integer(d) &&
           (j ? json_integer_value(d) == t->dims[j] : json_integer_value(d) >= 1);
  }
  if (!fits) {
    char got[128], want[128];
    shape_text(shape, got, sizeof got);
    model_shape_text(t, want, sizeof want);
    return refuse(400, msg, n,
                  "input '%s' has shape %s: the model takes %s (rows first, at least 1)", t->name,
                  got, want);
  }
  uint64_t r = (uint64_t)json_integer_value(json_array_get(shape, 0));
  if (r > sig->max_batch)
    return refuse(400, msg, n, "input '%s' has %llu rows, more than the server's max batch of %llu",
                  t->name, (unsigned long long)r, (unsigned long long)sig->max_batch);
  if (*rows_from && r != rq->rows)
    return refuse(400, msg, n, "input '%s' has %llu rows and '%s' %llu: every input needs as many",
                  t->name, (unsigned long long)r, *rows_from, (unsigned long long)rq->rows);
  rq->rows = r, *rows_from = t->name;

  size_t want = (size_t)r * t->row_elems, bytes = want * t->elem_bytes;
  if (!(rq->in[i] = malloc(bytes + 1))) return refuse(500, msg, n, "out of memory");
  json_t *size = json_object_get(json_object_get(e, "parameters"), "binary_data_size");
  json_t *data = json_object_get(e, "data");
  long lifted = dpc_serve_lift_index(lifts, json_string_value(data));
  if (!size) {
    if (lifted >= 0) return read_lifted_data(t, lifts, lifted, want, rq->in[i], msg, n);
    if (!json_is_array(data))
      return refuse(400, msg, n, "input '%s' has no \"data\" array (nor binary_data_size)",
                    t->name);
    return read_json_data(t, data, want, rq->in[i], msg, n);
  }
  if (data)
    return refuse(400, msg, n,
                  "input '%s' has both \"data\" and binary_data_size: one or the other", t->name);
  if (!has_header)
    return refuse(400, msg, n,
                  "input '%s' has binary_data_size but the request has no "
                  "Inference-Header-Content-Length header to say where the binary data starts",
                  t->name);
  if (!json_is_integer(size) || (uint64_t)json_integer_value(size) != bytes)
    return refuse(400, msg, n,
                  "input '%s' has binary_data_size %.32s: %llu rows of %s need %zu bytes", t->name,
                  json_is_integer(size) ? "other" : "that is not an integer", (unsigned long long)r,
                  dpc_serve_datatype(t->elem), bytes);
  if (bin_len - *bin_off < bytes)
    return refuse(400, msg, n,
                  "the binary data ends before input '%s': it needs %zu bytes at offset %zu of %zu",
                  t->name, bytes, *bin_off, bin_len);
  memcpy(rq->in[i], bin + *bin_off, bytes);
  *bin_off += bytes;
  if (t->elem == DPC_ELEM_BOOL)
    for (size_t v = 0; v < want; v++)
      if (rq->in[i][v] > 1)
        return refuse(400, msg, n, "input '%s': binary element %zu is %u, not a boolean (0 or 1)",
                      t->name, v, rq->in[i][v]);
  return 200;
}

/* "outputs" (which outputs, which of them as binary data) and the request-wide
 * binary_data_output; with no "outputs", every output is answered. */
static unsigned read_outputs(const dpc_serve_sig *sig, json_t *root, dpc_serve_request *rq,
                             char *msg, size_t n) {
  json_t *all = json_object_get(json_object_get(root, "parameters"), "binary_data_output");
  if (all && !json_is_boolean(all))
    return refuse(400, msg, n, "parameters.binary_data_output is not a boolean");
  bool binary = json_is_true(all);
  json_t *outs = json_object_get(root, "outputs");
  if (outs && !json_is_array(outs)) return refuse(400, msg, n, "\"outputs\" is not an array");
  if (json_array_size(outs) == 0) {
    for (unsigned i = 0; i < sig->n_out; i++) rq->send[i] = true, rq->binary[i] = binary;
    return 200;
  }
  for (size_t k = 0; k < json_array_size(outs); k++) {
    json_t *e = json_array_get(outs, k);
    const char *name = json_string_value(json_object_get(e, "name"));
    if (!name) return refuse(400, msg, n, "outputs[%zu] has no \"name\" string", k);
    unsigned i = 0;
    while (i < sig->n_out && strcmp(sig->out[i].name, name)) i++;
    if (i == sig->n_out) {
      size_t w =
          (size_t)snprintf(msg, n, "unknown output '%.128s': model '%s' gives", name, sig->model);
      for (unsigned j = 0; j < sig->n_out && w < n; j++)
        w += (size_t)snprintf(msg + w, n - w, "%s '%s'", j ? "," : "", sig->out[j].name);
      return 400;
    }
    if (rq->send[i]) return refuse(400, msg, n, "output '%s' is asked for twice", name);
    json_t *b = json_object_get(json_object_get(e, "parameters"), "binary_data");
    if (b && !json_is_boolean(b))
      return refuse(400, msg, n, "outputs[%zu].parameters.binary_data is not a boolean", k);
    rq->send[i] = true;
    rq->binary[i] = b ? json_is_true(b) : binary;
  }
  return 200;
}

static unsigned parse(const dpc_serve_sig *sig, const char *body, size_t len, bool has_header,
                      uint64_t header_len, dpc_serve_request *rq, dpc_serve_lifts *lifts, char *msg,
                      size_t msg_size);

unsigned dpc_serve_request_parse(const dpc_serve_sig *sig, const char *body, size_t len,
                                 bool has_header, uint64_t header_len, dpc_serve_request *rq,
                                 char *msg, size_t msg_size) {
  dpc_serve_lifts lifts;
  unsigned code = parse(sig, body, len, has_header, header_len, rq, &lifts, msg, msg_size);
  dpc_serve_lifts_free(&lifts);
  return code;
}

static unsigned parse(const dpc_serve_sig *sig, const char *body, size_t len, bool has_header,
                      uint64_t header_len, dpc_serve_request *rq, dpc_serve_lifts *lifts, char *msg,
                      size_t msg_size) {
  memset(rq, 0, sizeof *rq);
  memset(lifts, 0, sizeof *lifts);
  size_t n = msg_size;
  size_t json_len = len;
  if (has_header) {
    if (header_len > len)
      return refuse(400, msg, n,
                    "the Inference-Header-Content-Length of %llu is more than the body's %zu "
                    "bytes",
                    (unsigned long long)header_len, len);
    json_len = (size_t)header_len;
  }
  if (json_len == 0)
    return refuse(400, msg, n, "empty body: an inference request is a JSON object with \"inputs\"");
  json_error_t je;
  char *lifted = dpc_serve_lift(body, json_len, lifts);
  json_t *root = json_loadb(lifted ? lifted : body, json_len, JSON_REJECT_DUPLICATES, &je);
  free(lifted);
  rq->root = root;
  if (!root)
    return refuse(400, msg, n, "malformed JSON at line %d, column %d: %s", je.line, je.column,
                  je.text);
  json_t *inputs = json_object_get(root, "inputs");
  if (!json_is_object(root) || !json_is_array(inputs))
    return refuse(400, msg, n, "an inference request is a JSON object with an array \"inputs\"");
  if (!(rq->in = calloc(sig->n_in + 1u, sizeof *rq->in)) ||
      !(rq->out = calloc(sig->n_out + 1u, sizeof *rq->out)) ||
      !(rq->send = calloc(sig->n_out + 1u, sizeof *rq->send)) ||
      !(rq->binary = calloc(sig->n_out + 1u, sizeof *rq->binary)))
    return refuse(500, msg, n, "out of memory");
  const unsigned char *bin = (const unsigned char *)body + json_len;
  size_t bin_len = len - json_len, bin_off = 0;
  const char *rows_from = NULL;
  for (size_t k = 0; k < json_array_size(inputs); k++) {
    unsigned code = read_input(sig, json_array_get(inputs, k), k, rq, &rows_from, bin, bin_len,
                               &bin_off, has_header, lifts, msg, n);
    if (code != 200) return code;
  }
  for (unsigned i = 0; i < sig->n_in; i++)
    if (!rq->in[i]) return refuse(400, msg, n, "input '%s' is missing", sig->in[i].name);
  if (bin_off != bin_len)
    return refuse(400, msg, n,
                  "%zu bytes of binary data follow the JSON header, but the inputs' "
                  "binary_data_size claim %zu",
                  bin_len, bin_off);
  unsigned code = read_outputs(sig, root, rq, msg, n);
  if (code != 200) return code;
  for (unsigned i = 0; i < sig->n_out; i++)
    if (!(rq->out[i] =
              malloc((size_t)rq->rows * sig->out[i].row_elems * sig->out[i].elem_bytes + 1)))
      return refuse(500, msg, n, "out of memory");
  return 200;
}

char *dpc_serve_answer_build(const dpc_serve_sig *sig, const dpc_serve_request *rq,
                             unsigned real_digits, size_t *len, size_t *header_len) {
  *len = *header_len = 0;
  json_t *outs = json_array();
  size_t bin_len = 0;
  for (unsigned i = 0; outs && i < sig->n_out; i++) {
    if (!rq->send[i]) continue;
    const dpc_serve_tensor *t = &sig->out[i];
    size_t count = (size_t)rq->rows * t->row_elems;
    json_t *shape = json_array();
    json_array_append_new(shape, json_integer((json_int_t)rq->rows));
    for (unsigned j = 1; j < t->rank; j++) json_array_append_new(shape, json_integer(t->dims[j]));
    json_t *o = json_pack("{sssssO}", "name", t->name, "datatype", dpc_serve_datatype(t->elem),
                          "shape", shape);
    json_decref(shape);
    if (!o) {
      json_decref(outs);
      return NULL;
    }
    if (rq->binary[i]) {
      json_object_set_new(
          o, "parameters",
          json_pack("{sI}", "binary_data_size", (json_int_t)(count * t->elem_bytes)));
      bin_len += count * t->elem_bytes;
    } else {
      json_t *data = json_array();
      for (size_t v = 0; v < count; v++) json_array_append_new(data, load(t, rq->out[i], v));
      json_object_set_new(o, "data", data);
    }
    json_array_append_new(outs, o);
  }
  json_t *ans = json_pack("{ssso}", "model_name", sig->model, "outputs", outs);
  json_t *id = json_object_get(rq->root, "id");
  if (ans && json_is_string(id)) json_object_set(ans, "id", id);
  char *text = ans ? json_dumps(ans, JSON_COMPACT | JSON_REAL_PRECISION((int)real_digits)) : NULL;
  json_decref(ans);
  if (!text) return NULL;
  size_t json_len = strlen(text);
  char *body = realloc(text, json_len + bin_len + 1);
  if (!body) {
    free(text);
    return NULL;
  }
  size_t at = json_len;
  for (unsigned i = 0; i < sig->n_out; i++) {
    if (!rq->send[i] || !rq->binary[i]) continue;
    size_t bytes = (size_t)rq->rows * sig->out[i].row_elems * sig->out[i].elem_bytes;
    memcpy(body + at, rq->out[i], bytes);
    at += bytes;
  }
  *len = at;
  *header_len = bin_len ? json_len : 0;
  return body;
}

void dpc_serve_request_free(const dpc_serve_sig *sig, dpc_serve_request *rq) {
  for (unsigned i = 0; rq->in && i < sig->n_in; i++) free(rq->in[i]);
  for (unsigned i = 0; rq->out && i < sig->n_out; i++) free(rq->out[i]);
  free(rq->in);
  free(rq->out);
  free(rq->send);
  free(rq->binary);
  json_decref(rq->root);
  memset(rq, 0, sizeof *rq);
}
