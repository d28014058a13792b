/*
 * test_ir.c — the IR on its own: op table, interning, dtypes, shape rules, graph surgery and
 * the verifier.
 */
#include "ir/graph.h"
#include "ir/print.h"
#include "ir/rules.h"
#include "runtime/kernel.h"
#include "tests/unit/unit.h"

#include <stdlib.h>

/* Every per-op table has a row for every op: the op table is the single source of truth. */
static void op_tables_complete(void) {
  for (int i = 0; i < DPC_OP_COUNT; i++) {
    CHECK_MSG(dpc_shape_rules[i] != NULL, "no shape rule for %s", dpc_op_name((dpc_op)i));
    CHECK_MSG(dpc_ref_kernels[i] != NULL, "no reference kernel for %s", dpc_op_name((dpc_op)i));
    /* every attribute spec parses (parse failures assert) */
    uint32_t n = dpc_op_attr_count((dpc_op)i);
    for (uint32_t k = 0; k < n; k++) {
      dpc_attr_spec sp;
      dpc_op_attr_at((dpc_op)i, k, &sp);
      CHECK(sp.name[0] != 0);
    }
    dpc_op found;
    CHECK(dpc_op_find(dpc_op_name((dpc_op)i), strlen(dpc_op_name((dpc_op)i)), &found) &&
          found == (dpc_op)i);
  }
  for (uint32_t i = 0; i < dpc_optimizer_count; i++)
    CHECK(dpc_spec_count(dpc_optimizer_specs[i].attrs) > 0);
}

static void op_arity(void) {
  uint32_t lo, hi;
  dpc_op_arity(DPC_OP_ADD, &lo, &hi);
  CHECK(lo == 2 && hi == 2);
  dpc_op_arity(DPC_OP_LAYER_NORM, &lo, &hi);
  CHECK(lo == 2 && hi == 3);
  dpc_op_arity(DPC_OP_CONCAT, &lo, &hi);
  CHECK(lo == 1 && hi == UINT32_MAX);
  CHECK(dpc_op_num_outputs(DPC_OP_SPLIT) == 0);
  CHECK(dpc_op_num_outputs(DPC_OP_BATCH_NORM) == 3);
  CHECK(strcmp(dpc_op_suggest("reluu"), "relu") == 0);
  CHECK(dpc_op_suggest("zzzzzzzz") == NULL);
}

static void interning(void) {
  dpc_strpool p;
  dpc_strpool_init(&p);
  uint32_t a = dpc_strpool_intern(&p, "alpha", 5), b = dpc_strpool_intern(&p, "beta", 4);
  CHECK(a != b && dpc_strpool_intern(&p, "alpha", 5) == a);
  char name[32];
  for (int i = 0; i < 5000; i++) {
    snprintf(name, sizeof name, "n%d", i);
    dpc_strpool_intern(&p, name, strlen(name));
  }
  CHECK(strcmp(dpc_strpool_get(&p, a), "alpha") == 0);
  CHECK(dpc_strpool_find(&p, "n4999", 5) != DPC_NONE);
  CHECK(dpc_strpool_find(&p, "n5000", 5) == DPC_NONE);
  CHECK(dpc_strpool_intern(&p, "a\0b", 3) == DPC_NONE);
  dpc_strpool_free(&p);

  dpc_idmap m;
  dpc_idmap_init(&m);
  for (uint32_t i = 0; i < 3000; i++) dpc_idmap_put(&m, i * 7, i);
  for (uint32_t i = 0; i < 3000; i += 2) dpc_idmap_del(&m, i * 7);
  bool ok = true;
  for (uint32_t i = 0; i < 3000; i++) ok &= dpc_idmap_get(&m, i * 7) == (i % 2 ? i : DPC_NONE);
  CHECK(ok);
  CHECK(m.count == 1500);
  dpc_idmap_free(&m);
}

static void half_precision(void) {
  /* every f16 bit pattern survives f16 -> f32 -> f16 (NaNs stay NaN) */
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = dpc_f16_to_f32((uint16_t)h);
    uint16_t back = dpc_f32_to_f16(f);
    if (isnan(f))
      bad += !isnan(dpc_f16_to_f32(back));
    else
      bad += back != h;
  }
  CHECK(bad == 0);
  CHECK(dpc_f16_to_f32(dpc_f32_to_f16(65504.0f)) == 65504.0f);
  CHECK(isinf(dpc_f16_to_f32(dpc_f32_to_f16(65520.0f))));
  CHECK(dpc_f16_to_f32(dpc_f32_to_f16(1.0f + 1.0f / 4096)) == 1.0f); /* tie to even */
  CHECK(dpc_bf16_to_f32(dpc_f32_to_bf16(1.0f)) == 1.0f);
  CHECK(dpc_bf16_to_f32(dpc_f32_to_bf16(3.14159f)) == 3.140625f);
  CHECK(isnan(dpc_bf16_to_f32(dpc_f32_to_bf16(NAN))));
}

static void number_format(void) {
  const double vals[] = {0.1, 1.0 / 3, 2, -0.5, 1e-300, 123456789012345678.0, 5e-324, 0.3};
  for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
    char t[32];
    dpc_format_double(t, vals[i]);
    CHECK_MSG(strtod(t, NULL) == vals[i], "%s", t);
  }
  char t[32];
  dpc_format_double(t, 0.1);
  CHECK(strcmp(t, "0.1") == 0);
}

/* Build `x: f32[N, 3]`, `b: f32[3]`, y = x + b with the builder API. */
static dpc_graph *small_graph(uint32_t *x, uint32_t *y) {
  dpc_graph *g = dpc_graph_new();
  uint32_t n = dpc_graph_symbol(g, "N", 1);
  int64_t xs[2] = {DPC_DIM_SYM(n), 3}, bs[1] = {3};
  uint32_t m = dpc_graph_attr_mark(g), node;
  dpc_graph_attr_dtype(g, "dtype", DPC_F32);
  dpc_graph_attr_shape(g, "shape", xs, 2);
  dpc_node_desc nd = {.op = DPC_OP_INPUT, .attr_mark = m, .device = DPC_NONE};
  CHECK(dpc_graph_add_node(g, &nd, &node, NULL) == DPC_OK);
  *x = g->nodes[node].out;
  dpc_graph_set_name(g, *x, "x", 1, NULL);
  m = dpc_graph_attr_mark(g);
  dpc_graph_attr_dtype(g, "dtype", DPC_F32);
  dpc_graph_attr_shape(g, "shape", bs, 1);
  nd.attr_mark = m;
  nd.op = DPC_OP_PARAM;
  CHECK(dpc_graph_add_node(g, &nd, &node, NULL) == DPC_OK);
  uint32_t b = g->nodes[node].out;
  dpc_graph_set_name(g, b, "b", 1, NULL);
  uint32_t in[2] = {*x, b};
  dpc_node_desc add = {.op = DPC_OP_ADD,
                       .in = in,
                       .n_in = 2,
                       .attr_mark = dpc_graph_attr_mark(g),
                       .device = DPC_NONE};
  CHECK(dpc_graph_add_node(g, &add, &node, NULL) == DPC_OK);
  *y = g->nodes[node].out;
  dpc_graph_set_name(g, *y, "y", 1, NULL);
  dpc_graph_add_output(g, *y, NULL);
  return g;
}

static void builder_and_rules(void) {
  uint32_t x, y;
  dpc_graph *g = small_graph(&x, &y);
  CHECK(g->values[y].shape.rank == 2 && DPC_DIM_IS_SYM(g->values[y].shape.d[0]) &&
        g->values[y].shape.d[1] == 3);
  CHECK(dpc_verify(g, NULL) == DPC_OK);

  /* a failing node leaves the graph as it was */
  dpc_diag d;
  dpc_diag_init(&d);
  uint32_t nn = g->n_nodes, nv = g->n_values, na = g->n_attrs;
  uint32_t in[2] = {x, y}; /* [N, 3] x [N, 3]: inner 3 vs N */
  uint32_t m = dpc_graph_attr_mark(g);
  dpc_graph_attr_int(g, "transpose_a", 0);
  dpc_node_desc mm = {.op = DPC_OP_MATMUL, .in = in, .n_in = 2, .attr_mark = m, .device = DPC_NONE};
  CHECK(dpc_graph_add_node(g, &mm, NULL, &d) == DPC_ERR_SHAPE);
  CHECK(d.msg && strstr(d.msg, "inner dimensions differ"));
  CHECK(g->n_nodes == nn && g->n_values == nv && g->n_attrs == na);

  /* unknown attribute, wrong arity */
  m = dpc_graph_attr_mark(g);
  dpc_graph_attr_int(g, "axiss", 1);
  dpc_node_desc sm = {
      .op = DPC_OP_SOFTMAX, .in = in, .n_in = 1, .attr_mark = m, .device = DPC_NONE};
  CHECK(dpc_graph_add_node(g, &sm, NULL, &d) == DPC_ERR_INVALID && strstr(d.msg, "axiss"));
  dpc_node_desc ar = {.op = DPC_OP_RELU,
                      .in = in,
                      .n_in = 2,
                      .attr_mark = dpc_graph_attr_mark(g),
                      .device = DPC_NONE};
  CHECK(dpc_graph_add_node(g, &ar, NULL, &d) == DPC_ERR_INVALID && strstr(d.msg, "takes 1 input"));
  CHECK(dpc_verify(g, NULL) == DPC_OK);

  /* binding N makes every shape concrete */
  int64_t vals[1] = {5};
  dpc_graph *c = dpc_graph_clone(g);
  CHECK(dpc_graph_bind(c, vals, NULL) == DPC_OK);
  CHECK(c->values[y].shape.d[0] == 5);
  dpc_graph_free(c);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

static void verifier_catches_breakage(void) {
  uint32_t x, y;
  dpc_graph *g = small_graph(&x, &y);
  dpc_diag d;
  dpc_diag_init(&d);
  /* point the add at its own output: no longer topological */
  g->ids[g->nodes[2].in] = y;
  CHECK(dpc_verify(g, &d) == DPC_ERR_INVALID && strstr(d.msg, "topological"));
  g->ids[g->nodes[2].in] = x;
  /* a wrong recorded shape */
  g->values[y].shape.d[1] = 4;
  CHECK(dpc_verify(g, &d) == DPC_ERR_INVALID && strstr(d.msg, "shape rule gives"));
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

static void keep_compacts(void) {
  uint32_t x, y;
  dpc_graph *g = small_graph(&x, &y);
  /* drop nothing needed: keep all */
  bool keep[3] = {true, true, true};
  CHECK(dpc_graph_keep(g, keep, NULL) == DPC_OK);
  CHECK(dpc_graph_find(g, "y") == y);
  /* dropping the param that y needs is an internal error, reported not crashed */
  bool bad[3] = {true, false, true};
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *c = dpc_graph_clone(g);
  CHECK(dpc_graph_keep(c, bad, &d) == DPC_ERR_INTERNAL);
  dpc_graph_free(c);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

static void slice_bounds(void) {
  int64_t first, count;
  dpc_slice_axis(10, 2, 8, 2, &first, &count);
  CHECK(first == 2 && count == 3);
  dpc_slice_axis(10, -3, INT64_MAX, 1, &first, &count);
  CHECK(first == 7 && count == 3);
  dpc_slice_axis(10, -1, INT64_MIN, -1, &first, &count);
  CHECK(first == 9 && count == 10);
  dpc_slice_axis(10, 100, -100, -3, &first, &count);
  CHECK(first == 9 && count == 4);
  dpc_slice_axis(10, 5, 2, 1, &first, &count);
  CHECK(count == 0);
  dpc_slice_axis(0, 0, 5, 1, &first, &count);
  CHECK(count == 0);
}

static void diag_render(void) {
  const char *text = "a = 1\nbb = relu(q)\n";
  dpc_source src = {"m.graph", text, strlen(text)};
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_diag_fail_at(&d, DPC_ERR_INVALID, &src, (dpc_loc){2, 11}, "'q' is not defined");
  char *r = dpc_diag_render(&d);
  CHECK(strcmp(r, "m.graph:2:11: error: 'q' is not defined\n  bb = relu(q)\n            ^\n") == 0);
  free(r);
  dpc_diag_prefix(&d, "in pass '%s': ", "dce");
  CHECK(strcmp(d.msg, "in pass 'dce': 'q' is not defined") == 0);
  /* a very long line is cut around the caret */
  size_t n = 100000;
  char *big = malloc(n + 1);
  memset(big, 'x', n);
  big[n] = 0;
  dpc_source bs = {"big", big, n};
  dpc_diag_fail_at(&d, DPC_ERR_SYNTAX, &bs, (dpc_loc){1, 50000}, "here");
  CHECK(strlen(d.excerpt) < 200 && d.excerpt[d.caret] == 'x');
  free(big);
  dpc_diag_free(&d);
}

const unit_test unit_tests[] = {
    {"op_tables_complete", op_tables_complete},
    {"op_arity", op_arity},
    {"interning", interning},
    {"half_precision", half_precision},
    {"number_format", number_format},
    {"builder_and_rules", builder_and_rules},
    {"verifier_catches_breakage", verifier_catches_breakage},
    {"keep_compacts", keep_compacts},
    {"slice_bounds", slice_bounds},
    {"diag_render", diag_render},
    {NULL, NULL},
};
