/*
 * test_print.c — the printer and the parser agree: print -> parse -> print gives the same
 * text, and the graph parsed back has the same nodes, attributes, names and types.
 */
#include "frontend/frontend.h"
#include "ir/print.h"
#include "tests/unit/unit.h"

#include <stdlib.h>

#ifndef DPC_SOURCE_DIR
#error "DPC_SOURCE_DIR must point at the repository"
#endif

static char *print(const dpc_graph *g) {
  dpc_buf b = {0};
  CHECK(dpc_print_graph(g, &b) == DPC_OK);
  return dpc_buf_take(&b);
}

static bool same_attr(const dpc_graph *a, const dpc_attr *x, const dpc_graph *b,
                      const dpc_attr *y) {
  if (strcmp(dpc_graph_str(a, x->name), dpc_graph_str(b, y->name)) || x->kind != y->kind ||
      x->n != y->n)
    return false;
  switch ((dpc_attr_kind)x->kind) {
  case DPC_ATTR_INT: return x->u.i == y->u.i;
  case DPC_ATTR_FLOAT: return x->u.f == y->u.f;
  case DPC_ATTR_STR: return !strcmp(dpc_graph_str(a, x->u.s), dpc_graph_str(b, y->u.s));
  case DPC_ATTR_DTYPE: return x->dtype == y->dtype;
  case DPC_ATTR_INTS:
  case DPC_ATTR_SHAPE:
    return !memcmp(a->ints + x->u.off, b->ints + y->u.off, x->n * sizeof(int64_t));
  case DPC_ATTR_FLOATS:
    return !memcmp(a->reals + x->u.off, b->reals + y->u.off, x->n * sizeof(double));
  case DPC_ATTR_TENSOR:
    return x->dtype == y->dtype && x->rank == y->rank &&
           !memcmp(a->ints + x->dims, b->ints + y->dims, x->rank * sizeof(int64_t)) &&
           !memcmp(a->reals + x->u.off, b->reals + y->u.off, x->n * sizeof(double));
  default: return false;
  }
}

/* Same graph up to the names printing had to invent for anonymous values. */
static bool same_graph(const dpc_graph *a, const dpc_graph *b) {
  if (a->n_nodes != b->n_nodes || a->n_values != b->n_values || a->n_outputs != b->n_outputs ||
      a->n_updates != b->n_updates || (a->obj.loss == DPC_NONE) != (b->obj.loss == DPC_NONE)) {
    printf("    counts differ: nodes %u/%u values %u/%u\n", a->n_nodes, b->n_nodes, a->n_values,
           b->n_values);
    return false;
  }
  for (uint32_t i = 0; i < a->n_nodes; i++) {
    const dpc_node *x = &a->nodes[i], *y = &b->nodes[i];
    bool ok =
        x->op == y->op && x->n_in == y->n_in && x->n_out == y->n_out && x->n_attr == y->n_attr;
    for (uint32_t k = 0; ok && k < x->n_in; k++) ok = a->ids[x->in + k] == b->ids[y->in + k];
    for (uint32_t k = 0; ok && k < x->n_attr; k++)
      ok = same_attr(a, &a->attrs[x->attr + k], b, &b->attrs[y->attr + k]);
    ok = ok && (x->device == DPC_NONE) == (y->device == DPC_NONE);
    if (ok && x->device != DPC_NONE)
      ok = !strcmp(dpc_graph_str(a, x->device), dpc_graph_str(b, y->device));
    for (uint32_t k = 0; ok && k < x->n_out; k++) {
      const dpc_value *u = &a->values[x->out + k], *v = &b->values[y->out + k];
      ok = u->dtype == v->dtype && dpc_shape_eq(&u->shape, &v->shape);
      if (ok && u->name != DPC_NONE)
        ok = v->name != DPC_NONE && !strcmp(dpc_graph_str(a, u->name), dpc_graph_str(b, v->name));
    }
    if (!ok) {
      printf("    node %u (%s) differs\n", i, dpc_op_name(x->op));
      return false;
    }
  }
  for (uint32_t i = 0; i < a->n_outputs; i++)
    if (a->outputs[i] != b->outputs[i]) return false;
  if (a->n_syms != b->n_syms) return false;
  for (uint32_t k = 0; k < a->n_syms; k++)
    if (strcmp(dpc_graph_str(a, a->syms[k]), dpc_graph_str(b, b->syms[k]))) {
      printf("    symbol %u differs: '%s' vs '%s'\n", k, dpc_graph_str(a, a->syms[k]),
             dpc_graph_str(b, b->syms[k]));
      return false;
    }
  return true;
}

static void roundtrip_text(const char *name, const char *text) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL, *g2 = NULL, *g3 = NULL;
  if (dpc_parse_graph(name, text, strlen(text), &g, &d)) {
    char *m = dpc_diag_render(&d);
    CHECK_MSG(0, "%s does not parse: %s", name, m);
    free(m);
    dpc_diag_free(&d);
    return;
  }
  char *t1 = print(g);
  CHECK_MSG(dpc_parse_graph("printed", t1, strlen(t1), &g2, &d) == DPC_OK,
            "%s: printed text does not parse: %s\n%s", name, d.msg, t1);
  if (g2) {
    CHECK_MSG(same_graph(g, g2), "%s: the printed text describes another graph:\n%s", name, t1);
    char *t2 = print(g2);
    CHECK_MSG(!strcmp(t1, t2), "%s: second print differs:\n%s\n---\n%s", name, t1, t2);
    CHECK_MSG(dpc_parse_graph("printed2", t2, strlen(t2), &g3, &d) == DPC_OK, "%s", name);
    if (g3) CHECK_MSG(same_graph(g2, g3), "%s: graph changed by a round trip", name);
    CHECK_MSG(dpc_verify(g2, &d) == DPC_OK, "%s: %s", name, d.msg);
    free(t2);
  }
  free(t1);
  dpc_graph_free(g);
  dpc_graph_free(g2);
  dpc_graph_free(g3);
  dpc_diag_free(&d);
}

static void examples_roundtrip(void) {
  const char *ex[] = {"fashion_mlp", "fashion_cnn", "inception_block", "transformer_block",
                      "wide_mlp"};
  for (size_t i = 0; i < sizeof ex / sizeof *ex; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/%s.graph", DPC_SOURCE_DIR, ex[i]);
    char *text;
    size_t len;
    dpc_diag d;
    dpc_diag_init(&d);
    CHECK_MSG(dpc_read_file(path, &text, &len, &d) == DPC_OK, "%s", path);
    if (text) roundtrip_text(path, text);
    /* the parsed source and its canonical print are the same graph */
    dpc_graph *g = NULL, *g2 = NULL;
    if (text && !dpc_parse_graph(path, text, len, &g, &d)) {
      char *t = print(g);
      if (!dpc_parse_graph("p", t, strlen(t), &g2, &d)) CHECK_MSG(same_graph(g, g2), "%s", path);
      free(t);
    }
    dpc_graph_free(g);
    dpc_graph_free(g2);
    free(text);
    dpc_diag_free(&d);
  }
}

static void tricky_constructs(void) {
  roundtrip_text("literals",
                 "input i: i64[3]\ninput f: f32[3]\n"
                 "a = i * 2 - -3\nb = -f * 0.1 / (f - f - f)\nc = neg(2) + f\n"
                 "d = constant(7, dtype=i64) + i\ne = constant([[1, 2.5], [3, 4]], dtype=f64)\n"
                 "k = constant([[]])\nz = f * 1e-300 + inf\noutput a, b, c, d, e, z\n");
  roundtrip_text("strings",
                 "input x: f32[2, 3, 4, 4]\n"
                 "y = max_pool2d(x, kernel=[2, 2], stride=1, pad=[0, 1, 1, 0], ceil_mode=1)\n"
                 "param w: f32[3] = he_normal(mode=\"fan_out\", seed=4)\noutput y\n");
  roundtrip_text("multi",
                 "input x: f32[N, 6]\na, _, c = split(x, axis=1)\nq = split(x, axis=1, sizes=[6])\n"
                 "s = layer_norm(a, constant([1, 1]), constant([0, 0]))\n"
                 "state m: f32[6] = zeros\nupdate m = reduce_mean(x, axes=[0])\noutput c, s\n");
  roundtrip_text("placed", "input x: f32[N, 4]\ndevice cpu:1 {\n  h = relu(x) * 2\n}\n"
                           "r = relu(x) @ cpu:2\ng = sigmoid(h + r)\noutput g\n");
  roundtrip_text("training",
                 "input x: f32[N, 4]\ninput y: i32[N]\nparam w: f32[4, 3] = 0.01\n"
                 "loss = softmax_cross_entropy(matmul(x, w), y)\n"
                 "minimize loss with adam(lr=0.001, beta2=0.98, schedule=cosine, warmup=100)\n");
}

/* Names at the length limit print whole wherever they appear (a fuzzer found a symbol cut at
 * 80 characters). */
static void long_names(void) {
  char name[257], sym[257];
  memset(name, 'v', 256);
  name[256] = 0;
  memset(sym, 'S', 256);
  sym[256] = 0;
  char *src = malloc(4096);
  snprintf(src, 4096, "input %s: f32[%s, 4]\n%s.x = relu(%s) @ %s:1\noutput %s.x\n", name, sym,
           name, name, name, name);
  /* the value name above is 258 characters: too long, so shorten it by two */
  char *p = strstr(src, ".x = ");
  memmove(p - 2, p, strlen(p) + 1);
  p = strstr(src, "output ");
  p = strstr(p, ".x");
  memmove(p - 2, p, strlen(p) + 1);
  roundtrip_text("long names", src);
  free(src);
}

/* Anonymous values used twice (only passes make them) get stable generated names. */
static void anonymous_shared_values(void) {
  dpc_graph *g;
  dpc_diag d;
  dpc_diag_init(&d);
  const char *src = "input x: f32[3]\ny = relu(x)\n_2 = sigmoid(x)\noutput y\n";
  CHECK(dpc_parse_graph("t", src, strlen(src), &g, &d) == DPC_OK);
  if (!g) return;
  uint32_t y = dpc_graph_find(g, "y");
  /* make relu's input an anonymous exp(x) used by two nodes */
  uint32_t in = dpc_graph_find(g, "x"), node;
  dpc_node_desc nd = {.op = DPC_OP_EXP,
                      .in = &in,
                      .n_in = 1,
                      .attr_mark = dpc_graph_attr_mark(g),
                      .device = DPC_NONE};
  CHECK(dpc_graph_add_node(g, &nd, &node, &d) == DPC_OK);
  uint32_t e = g->nodes[node].out;
  uint32_t pair[2] = {e, e};
  dpc_node_desc add = {.op = DPC_OP_ADD,
                       .in = pair,
                       .n_in = 2,
                       .attr_mark = dpc_graph_attr_mark(g),
                       .device = DPC_NONE};
  CHECK(dpc_graph_add_node(g, &add, &node, &d) == DPC_OK);
  dpc_graph_set_name(g, g->nodes[node].out, "z", 1, &d);
  dpc_graph_add_output(g, g->nodes[node].out, &d);
  (void)y;
  char *t = print(g);
  CHECK_MSG(strstr(t, "= exp(x)") != NULL && strstr(t, "z = _"), "%s", t);
  CHECK_MSG(strstr(t, "_2 = sigmoid") != NULL, "%s", t);
  roundtrip_text("anon", t);
  free(t);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* A chain deeper than the fold limit is cut into statements, and still round-trips. */
static void deep_chains(void) {
  char *src = malloc(20000);
  strcpy(src, "input x: f32[2]\ny = x");
  for (int i = 0; i < 300; i++) strcat(src, " + x");
  strcat(src, "\noutput y\n");
  roundtrip_text("deep", src);
  free(src);
}

const unit_test unit_tests[] = {
    {"examples_roundtrip", examples_roundtrip},
    {"tricky_constructs", tricky_constructs},
    {"anonymous_shared_values", anonymous_shared_values},
    {"deep_chains", deep_chains},
    {"long_names", long_names},
    {NULL, NULL},
};
