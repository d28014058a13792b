/*
 * test_frontend.c — the .graph parser: what it builds, and that hostile input (binary junk,
 * a 100 MB line, deep nesting, cycles) gives an error rather than a crash or a hang; and the
 * ONNX importer's constant folding against the kernels.
 * Error positions and messages for malformed models are golden tests in tests/errors/.
 */
#include "frontend/frontend.h"
#include "frontend/onnx.h"
#include "ir/print.h"
#include "tests/unit/unit.h"
#include "driver/driver.h"

#include <stdlib.h>
#include <time.h>

static dpc_status parse(const char *text, dpc_graph **g, dpc_diag *d) {
  return dpc_parse_graph("t.graph", text, strlen(text), g, d);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void builds_what_it_says(void) {
  const char *src = "model m\n"
                    "input x: f32[N, 4]  # a comment\n"
                    "param w: f32[4, 2] = uniform(low=-1, high=1, seed=3)\n"
                    "h = relu(matmul(x, w) + 1) * 2 @ cpu:1\n"
                    "a, b = split(h, axis=1)\n"
                    "c = concat(a,\n   b, axis=1)\n"
                    "device cpu:2 {\n  s = sigmoid(c)\n}\n"
                    "output s, h\n";
  dpc_graph *g;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(parse(src, &g, &d) == DPC_OK);
  if (!g) return;
  CHECK(strcmp(dpc_graph_str(g, g->name), "m") == 0);
  uint32_t h = dpc_graph_find(g, "h"), s = dpc_graph_find(g, "s");
  CHECK(h != DPC_NONE && s != DPC_NONE);
  CHECK(g->nodes[g->values[h].node].op == DPC_OP_MUL);
  CHECK(strcmp(dpc_graph_str(g, g->nodes[g->values[h].node].device), "cpu:1") == 0);
  /* the subexpressions of a placed statement are placed with it */
  uint32_t relu = g->values[g->ids[g->nodes[g->values[h].node].in]].node;
  CHECK(g->nodes[relu].op == DPC_OP_RELU &&
        g->nodes[relu].device == g->nodes[g->values[h].node].device);
  CHECK(strcmp(dpc_graph_str(g, g->nodes[g->values[s].node].device), "cpu:2") == 0);
  CHECK(g->n_outputs == 2 && g->outputs[0] == s);
  CHECK(g->values[dpc_graph_find(g, "a")].shape.d[1] == 1);
  /* the literal 1 took f32 from its neighbour */
  CHECK(dpc_verify(g, &d) == DPC_OK);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

static void literal_dtypes(void) {
  dpc_graph *g;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(parse("input i: i32[3]\ny = i * 2 + 1\noutput y\n", &g, &d) == DPC_OK);
  if (g) {
    CHECK(g->values[dpc_graph_find(g, "y")].dtype == DPC_I32);
    dpc_graph_free(g);
  }
  CHECK(parse("input i: i32[3]\ny = i * 2.5\n", &g, &d) == DPC_ERR_INVALID);
  CHECK(d.msg && strstr(d.msg, "not a whole number"));
  CHECK(parse("input f: f64[3]\ny = -f * -0.5\noutput y\n", &g, &d) == DPC_OK);
  if (g) {
    CHECK(g->values[dpc_graph_find(g, "y")].dtype == DPC_F64);
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

/* Any of these must fail cleanly, with a position. */
static void hostile_inputs(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g;
  /* seeded binary junk */
  uint64_t s = 88172645463325252ull;
  char buf[1024];
  int parsed = 0;
  for (int it = 0; it < 2000; it++) {
    size_t n = (size_t)(it % 1000) + 1;
    for (size_t i = 0; i < n; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      buf[i] = (char)(s & 0xff);
    }
    if (dpc_parse_graph("junk", buf, n, &g, &d) == DPC_OK) {
      parsed++;
      dpc_graph_free(g);
    }
  }
  CHECK(parsed < 50); /* nearly all junk is rejected; none crashed */

  /* deep nesting stops at the limit */
  size_t depth = 100000;
  char *deep = malloc(depth * 6 + 64);
  strcpy(deep, "input x: f32[2]\ny = ");
  size_t k = strlen(deep);
  for (size_t i = 0; i < depth; i++) memcpy(deep + k, "relu(", 5), k += 5;
  deep[k++] = 'x';
  for (size_t i = 0; i < depth; i++) deep[k++] = ')';
  deep[k] = 0;
  CHECK(parse(deep, &g, &d) == DPC_ERR_SYNTAX && strstr(d.msg, "nested"));
  /* and so does ((((x or ----x or [[[[ */
  const char *opens = "([-";
  for (int o = 0; o < 3; o++) {
    char *q = malloc(depth + 64);
    size_t pre = (size_t)snprintf(q, 64, "input x: f32[2]\ny = ");
    memset(q + pre, opens[o], depth);
    q[pre + depth] = 0;
    CHECK(parse(q, &g, &d) == DPC_ERR_SYNTAX);
    free(q);
  }
  free(deep);

  /* cycles cannot be written: a use before definition is reported as such */
  CHECK(parse("input x: f32[2]\na = relu(b)\nb = relu(a)\n", &g, &d) == DPC_ERR_INVALID &&
        strstr(d.msg, "before its definition"));
  CHECK(parse("input x: f32[2]\na = relu(a)\n", &g, &d) == DPC_ERR_INVALID &&
        strstr(d.msg, "being defined"));
  /* NUL in the middle */
  CHECK(dpc_parse_graph("nul", "input x: f32[2]\0\n", 17, &g, &d) == DPC_ERR_SYNTAX &&
        strstr(d.msg, "control character"));
  dpc_diag_free(&d);
}

/* A 100 MB line in several forms: each is handled in linear time. */
static void huge_lines(void) {
  size_t n = 100u << 20;
  char *big = malloc(n + 64);
  if (!big) {
    CHECK_MSG(0, "cannot allocate the %zu MB this test needs", n >> 20);
    return;
  }
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g;
  double t0 = now();
  /* a 100 MB comment, then a valid model */
  big[0] = '#';
  memset(big + 1, 'c', n);
  strcpy(big + n, "\ninput x: f32[2]\n");
  CHECK(parse(big, &g, &d) == DPC_OK);
  dpc_graph_free(g);
  /* 100 MB of spaces, then junk at the end */
  memset(big, ' ', n);
  strcpy(big + n, "$");
  CHECK(parse(big, &g, &d) == DPC_ERR_SYNTAX && d.loc.col == n + 1 && strlen(d.excerpt) < 200);
  /* a 100 MB name */
  memset(big, 'a', n);
  big[n] = 0;
  CHECK(parse(big, &g, &d) == DPC_ERR_SYNTAX && strstr(d.msg, "longer than"));
  /* a 100 MB expression, x + x + x ...: stops at the depth limit, long before the end */
  strcpy(big, "input x: f32[2]\ny = x");
  size_t k = strlen(big);
  while (k + 4 < n) memcpy(big + k, " + x", 4), k += 4;
  big[k] = 0;
  CHECK(parse(big, &g, &d) == DPC_ERR_SYNTAX && strstr(d.msg, "operations deep"));
  /* a long but legal chain parses */
  k = strlen("input x: f32[2]\ny = x");
  for (int i = 0; i < 900; i++) memcpy(big + k, " + x", 4), k += 4;
  big[k] = 0;
  CHECK(parse(big, &g, &d) == DPC_OK);
  if (g) {
    CHECK(g->n_nodes == 901);
    dpc_graph_free(g);
  }
  double dt = now() - t0;
  CHECK_MSG(dt < 60, "took %.1f s", dt);
  free(big);
  dpc_diag_free(&d);
}

static uint32_t count_op(const dpc_graph *g, dpc_op op) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op;
  return n;
}

static const dpc_tensor *output(const dpc_named *outs, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(outs[i].name, name)) return &outs[i].t;
  CHECK_MSG(0, "no output '%s'", name);
  return NULL;
}

static dpc_graph *import_fold_model(const char *name, dpc_diag *d) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/onnx/fold/%s.onnx", DPC_SOURCE_DIR, name);
  dpc_graph *g = NULL;
  CHECK_MSG(dpc_onnx_import_file(path, &g, d) == DPC_OK, "%s: %s", name, d->msg);
  return g;
}

/* A constant the ONNX importer folds is what the op's kernel gives (tests/onnx/fold): Max and
 * Min let NaN win in either position, and an integer division by zero is not folded into a
 * value but fails the run as the kernel does. */
static void onnx_folding_matches_kernels(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = import_fold_model("max_min_nan", &d);
  if (g) {
    /* one Max and one Min were folded, the others take an input */
    CHECK(count_op(g, DPC_OP_MAX) == 1 && count_op(g, DPC_OP_MIN) == 1);
    float a[4] = {NAN, 1, 2, NAN};
    char name[] = "a_in";
    dpc_named feed = {name, {a, DPC_F32, {1, {4}}}}, *outs = NULL;
    uint32_t no = 0;
    CHECK_MSG(dpc_driver_infer(g, NULL, NULL, &feed, 1, false, &outs, &no, &d) == DPC_OK, "%s",
              d.msg);
    /* b = {0, NaN, 3, NaN} */
    const double want_max[4] = {NAN, NAN, 3, NAN}, want_min[4] = {NAN, NAN, 2, NAN};
    const char *names[4] = {"folded_max", "run_max", "folded_min", "run_min"};
    for (int k = 0; k < 4 && no; k++) {
      const dpc_tensor *t = output(outs, no, names[k]);
      const double *want = k < 2 ? want_max : want_min;
      for (int i = 0; t && i < 4; i++) {
        double v = dpc_tload(t, i);
        CHECK_MSG(isnan(want[i]) ? isnan(v) : v == want[i], "%s[%d] = %g, expected %g", names[k], i,
                  v, want[i]);
      }
    }
    dpc_named_free(outs, no);
    dpc_graph_free(g);
  }
  g = import_fold_model("div_int_zero", &d);
  if (g) {
    CHECK_MSG(count_op(g, DPC_OP_DIV) == 1, "the Div by a 0 was folded away");
    int64_t x[3] = {1, 2, 3};
    char name[] = "x";
    dpc_named feed = {name, {x, DPC_I64, {1, {3}}}}, *outs = NULL;
    uint32_t no = 0;
    CHECK(dpc_driver_infer(g, NULL, NULL, &feed, 1, false, &outs, &no, &d) == DPC_ERR_RUNTIME &&
          d.msg && strstr(d.msg, "integer division by zero"));
    dpc_named_free(outs, no);
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

/* PyTorch's Linear exports as Gemm with transB=1 and a weight of [out, in]: the importer holds
 * each such weight as [in, out] under its name and makes the Gemm a plain matmul (the outputs
 * against PyTorch's are onnx.torch's business). */
static void onnx_gemm_weights_held_untransposed(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/onnx/torch/mlp/model.onnx", DPC_SOURCE_DIR);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  CHECK_MSG(dpc_onnx_import_file(path, &g, &d) == DPC_OK, "%s", d.msg);
  if (g) {
    uint32_t matmuls = 0, flipped = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
      const dpc_node *n = &g->nodes[i];
      if (n->op != DPC_OP_MATMUL) continue;
      matmuls++;
      const dpc_value *w = &g->values[g->ids[n->in + 1]];
      flipped += g->nodes[w->node].op == DPC_OP_PARAM && w->shape.rank == 2;
    }
    /* 784-128-64-10: weights [784, 128], [128, 64], [64, 10] */
    CHECK_MSG(matmuls == 3 && flipped == 3, "%u matmuls, %u on a 2-D param", matmuls, flipped);
    uint32_t w0 = dpc_graph_find(g, "0.weight");
    CHECK_MSG(w0 != DPC_NONE && g->values[w0].shape.d[0] == 784 && g->values[w0].shape.d[1] == 128,
              "the first weight is not held as [784, 128]");
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

static void duplicate_and_keyword_names(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g;
  CHECK(parse("input x: f32[2]\ninput x: f32[3]\n", &g, &d) == DPC_ERR_INVALID &&
        strstr(d.msg, "already defined on line 1"));
  CHECK(parse("input output: f32[2]\n", &g, &d) == DPC_ERR_SYNTAX);
  CHECK(parse("input x: f32[N]\ninput N: f32[2]\n", &g, &d) == DPC_ERR_INVALID);
  dpc_diag_free(&d);
}

const unit_test unit_tests[] = {
    {"builds_what_it_says", builds_what_it_says},
    {"onnx_gemm_weights_held_untransposed", onnx_gemm_weights_held_untransposed},
    {"literal_dtypes", literal_dtypes},
    {"hostile_inputs", hostile_inputs},
    {"huge_lines", huge_lines},
    {"duplicate_and_keyword_names", duplicate_and_keyword_names},
    {"onnx_folding_matches_kernels", onnx_folding_matches_kernels},
    {NULL, NULL},
};
