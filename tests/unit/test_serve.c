/*
 * test_serve.c — the inference request reader (driver/serve_request.c): "data" number arrays
 * read straight from the text (driver/serve_lift.c) give the same bits and the same refusals as
 * the JSON reader gives the same numbers nested one level deeper, which it reads itself.
 */
#include "driver/serve_lift.h"
#include "driver/serve_request.h"
#include "unit.h"

#include <stdint.h>

static dpc_serve_sig sig_of(dpc_serve_tensor *t, dpc_elem e, int64_t cols) {
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "x");
  t->elem = e;
  t->rank = 2;
  t->dims[0] = -1, t->dims[1] = cols;
  t->row_elems = (size_t)cols;
  t->elem_bytes = e == DPC_ELEM_F64 || e == DPC_ELEM_I64 ? 8 : e == DPC_ELEM_BOOL ? 1 : 4;
  return (dpc_serve_sig){"m", t, t, 1, 1, 64};
}

/* The request for tokens[0, n) as one row, flat (lifted) or nested ([[...]]: the JSON reader). */
static char *request(const char *type, const char *const *tok, size_t n, size_t cols, bool nested) {
  size_t cap = 256 + 64 * n, len = 0;
  char *s = malloc(cap);
  len += (size_t)snprintf(s + len, cap - len,
                          "{\"inputs\": [{\"name\": \"x\", \"datatype\": \"%s\", \"shape\": [1, "
                          "%zu],\n  \"data\": %s",
                          type, cols, nested ? "[[" : "[");
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? (i % 4 ? ", " : ",\n ") : "", tok[i]);
  snprintf(s + len, cap - len, "%s}]}", nested ? "]]" : "]");
  return s;
}

/* Parse both forms; their status, message and (when read) bytes must agree. */
static void same_both_ways(dpc_elem e, const char *type, const char *const *tok, size_t n,
                           size_t cols) {
  dpc_serve_tensor t;
  dpc_serve_sig sig = sig_of(&t, e, (int64_t)cols);
  char msg[2][512] = {"", ""};
  unsigned code[2];
  dpc_serve_request rq[2];
  for (int nested = 0; nested < 2; nested++) {
    char *body = request(type, tok, n, cols, nested);
    code[nested] = dpc_serve_request_parse(&sig, body, strlen(body), false, 0, &rq[nested],
                                           msg[nested], sizeof msg[nested]);
    free(body);
  }
  CHECK_MSG(code[0] == code[1] && !strcmp(msg[0], msg[1]), "%s: %u '%s' against %u '%s'", type,
            code[0], msg[0], code[1], msg[1]);
  if (code[0] == 200 && code[1] == 200)
    for (size_t i = 0; i < cols * t.elem_bytes; i++)
      if (rq[0].in[0][i] != rq[1].in[0][i]) {
        CHECK_MSG(false, "%s: byte %zu of element %zu ('%s') differs", type, i, i / t.elem_bytes,
                  tok[i / t.elem_bytes]);
        break;
      }
  for (int k = 0; k < 2; k++) dpc_serve_request_free(&sig, &rq[k]);
}

/* a few a line reads better than one a line */
/* clang-format off */
static const char *const reals[] = {
    "0", "-0", "1", "-1", "0.1", "0.5", "2.5", "3.14159265358979323846", "1e-30", "1E+30",
    "123456789012345678.5", "0.000001234", "9007199254740993", "1.7976931348623157e308",
    "4.9e-324", "-123.456e-7", "1e22", "1e23", "8.589973e9", "0.30000000000000004",
    "100000000000000000000000000000.0", "0.0000000000000000000000000001", "7.038531e-26",
    "1.00000000000000011102230246251565404236316680908203125", "2.2250738585072011e-308",
    "123456789012345", "1234567890123456", "-0.0", "5e-1", "99999999999999999999e-20"};
/* clang-format on */

static void reals_same_bits(void) {
  size_t n = sizeof reals / sizeof *reals;
  same_both_ways(DPC_ELEM_F32, "FP32", reals, n, n);
  same_both_ways(DPC_ELEM_F64, "FP64", reals, n, n);
  /* many printed doubles, as clients print them */
  enum { N = 400 };
  char buf[N][40];
  const char *tok[N];
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    double x = ((double)(r >> 11) / 9007199254740992.0 - 0.5) * pow(10, (int)(r % 40) - 20);
    static const char *const fmt[] = {"%.17g", "%.9g", "%.3e", "%.6f", "%g"};
    snprintf(buf[i], sizeof buf[i], fmt[i % 5], x);
    tok[i] = buf[i];
  }
  same_both_ways(DPC_ELEM_F32, "FP32", tok, N, N);
  same_both_ways(DPC_ELEM_F64, "FP64", tok, N, N);
}

static void integers_and_refusals(void) {
  const char *const ints[] = {"0",  "-5", "9223372036854775807", "-9223372036854775808",
                              "12", "1",  "2147483648",          "-1"};
  size_t n = sizeof ints / sizeof *ints;
  same_both_ways(DPC_ELEM_I64, "INT64", ints, n, n);
  same_both_ways(DPC_ELEM_I32, "INT32", ints, n, n);
  const char *const bools[] = {"0", "1", "1", "0", "0", "1", "1", "1", "0"};
  same_both_ways(DPC_ELEM_BOOL, "BOOL", bools, 9, 9);
  /* refusals: a fraction for an integer, a 2 for a boolean, too few and too many values */
  const char *const frac[] = {"1", "2", "3.5", "4", "5", "6", "7", "8"};
  same_both_ways(DPC_ELEM_I64, "INT64", frac, 8, 8);
  const char *const two[] = {"0", "1", "2", "0", "1", "0", "1", "0"};
  same_both_ways(DPC_ELEM_BOOL, "BOOL", two, 8, 8);
  same_both_ways(DPC_ELEM_F32, "FP32", reals, 20, 21);
  same_both_ways(DPC_ELEM_F32, "FP32", reals, 20, 19);
}

/* An integer past int64 for a float input: a real number (the JSON reader refuses it as too
 * big an integer, though JSON allows it). */
static void big_integer_as_real(void) {
  dpc_serve_tensor t;
  dpc_serve_sig sig = sig_of(&t, DPC_ELEM_F64, 8);
  const char *tok[] = {"1", "2", "123456789012345678901234", "4", "5", "6", "7", "8"};
  char *body = request("FP64", tok, 8, 8, false), msg[512];
  dpc_serve_request rq;
  CHECK_MSG(dpc_serve_request_parse(&sig, body, strlen(body), false, 0, &rq, msg, sizeof msg) ==
                200,
            "%s", msg);
  if (rq.in) CHECK(((double *)rq.in[0])[2] == 123456789012345678901234.0);
  dpc_serve_request_free(&sig, &rq);
  free(body);
}

/* What is lifted and what is not; a marker the client wrote is not one; a JSON error after a
 * lifted array keeps its line and column. */
static void lift_rules(void) {
  dpc_serve_lifts l;
  const char *text = "{\"data\": [1, 2, 3, 4, 5, 6, 7], \"x\": {\"data\" :\n [1,2]}, "
                     "\"data2\": [1, 2, 3, 4, 5, 6, 7, 8], \"d\": [\"data\", 1, 2, 3, 4, 5, 6, 7],"
                     " \"data\": [1, 2, 3, 4, 5, 6, [7]], \"data\":[01, 2, 3, 4, 5, 6, 7, 8]}";
  char *copy = dpc_serve_lift(text, strlen(text), &l);
  CHECK(copy != NULL && l.n == 1);
  if (copy) CHECK(!strncmp(copy, "{\"data\": \"\\u00010\"", 18) && strlen(copy) == strlen(text));
  CHECK(dpc_serve_lift_index(&l, "\x01"
                                 "0") == 0);
  CHECK(dpc_serve_lift_index(&l, "\x01"
                                 "1") == -1 &&
        dpc_serve_lift_index(&l, "0") == -1);
  CHECK(dpc_serve_lift_index(&l, "\x01"
                                 "0x") == -1 &&
        dpc_serve_lift_index(&l, NULL) == -1);
  free(copy);
  dpc_serve_lifts_free(&l);

  dpc_serve_tensor t;
  dpc_serve_sig sig = sig_of(&t, DPC_ELEM_F32, 2);
  dpc_serve_request rq;
  char msg[512];
  const char *forged = "{\"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": [1, 2], "
                       "\"data\": \"\\u00010\"}]}";
  CHECK(dpc_serve_request_parse(&sig, forged, strlen(forged), false, 0, &rq, msg, sizeof msg) ==
        400);
  CHECK_MSG(strstr(msg, "has no \"data\" array") != NULL, "%s", msg);
  dpc_serve_request_free(&sig, &rq);
  /* the same error after a lifted array and after one the JSON reader reads (a string in it) */
  const char *broken[] = {"{\"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": "
                          "[1, 8], \"data\": [1,\n2,\n3,\n4,\n5, 6, 7, 8]}] x}",
                          "{\"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": "
                          "[1, 8], \"data\": [\"1\",\n2,\n3,\n4,\n5, 6, 7, 8]}] x}"};
  char said[2][512];
  for (int k = 0; k < 2; k++) {
    CHECK(dpc_serve_request_parse(&sig, broken[k], strlen(broken[k]), false, 0, &rq, said[k],
                                  sizeof said[k]) == 400);
    dpc_serve_request_free(&sig, &rq);
  }
  CHECK_MSG(!strcmp(said[0], said[1]) && strstr(said[0], "line 5") != NULL, "'%s' against '%s'",
            said[0], said[1]);
}

const unit_test unit_tests[] = {
    {"reals_same_bits", reals_same_bits},
    {"integers_and_refusals", integers_and_refusals},
    {"big_integer_as_real", big_integer_as_real},
    {"lift_rules", lift_rules},
    {NULL, NULL},
};
