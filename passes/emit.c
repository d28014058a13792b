/*
 * emit.c — the pass-side node builder (see emit.h).
 */
#include "passes/emit.h"

#include <string.h>

dpc_emit dpc_emit_start(dpc_graph *g, uint32_t device, dpc_diag *d) {
  dpc_emit e = {g, d, device, DPC_OK, 0};
  return e;
}

static void nomem(dpc_emit *e) {
  if (!e->st) e->st = dpc_diag_fail(e->d, DPC_ERR_NOMEM, "out of memory building nodes");
}

void dpc_emit_begin(dpc_emit *e) {
  e->mark = dpc_graph_attr_mark(e->g);
}

uint32_t dpc_emit_node(dpc_emit *e, dpc_op op, const uint32_t *in, uint32_t n_in, uint32_t n_out) {
  if (e->st) {
    dpc_graph_attr_reset(e->g, e->mark);
    return DPC_NONE;
  }
  for (uint32_t i = 0; i < n_in; i++)
    if (in[i] == DPC_NONE) {
      dpc_graph_attr_reset(e->g, e->mark);
      e->st =
          dpc_diag_fail(e->d, DPC_ERR_INTERNAL, "building %s: a missing input", dpc_op_name(op));
      return DPC_NONE;
    }
  dpc_node_desc nd = {op, in, n_in, e->mark, n_out, {0, 0}, e->device};
  uint32_t node;
  e->st = dpc_graph_add_node(e->g, &nd, &node, e->d);
  e->mark = dpc_graph_attr_mark(e->g);
  return e->st ? DPC_NONE : node;
}

uint32_t dpc_emit_op(dpc_emit *e, dpc_op op, const uint32_t *in, uint32_t n_in) {
  dpc_emit_begin(e);
  uint32_t node = dpc_emit_node(e, op, in, n_in, 0);
  return node == DPC_NONE ? DPC_NONE : e->g->nodes[node].out;
}

uint32_t dpc_emit1(dpc_emit *e, dpc_op op, uint32_t a) {
  return dpc_emit_op(e, op, &a, 1);
}

uint32_t dpc_emit2(dpc_emit *e, dpc_op op, uint32_t a, uint32_t b) {
  uint32_t in[2] = {a, b};
  return dpc_emit_op(e, op, in, 2);
}

uint32_t dpc_emit3(dpc_emit *e, dpc_op op, uint32_t a, uint32_t b, uint32_t c) {
  uint32_t in[3] = {a, b, c};
  return dpc_emit_op(e, op, in, 3);
}

void dpc_emit_int(dpc_emit *e, const char *name, int64_t v) {
  if (!e->st && dpc_graph_attr_int(e->g, name, v)) nomem(e);
}

void dpc_emit_float(dpc_emit *e, const char *name, double v) {
  if (!e->st && dpc_graph_attr_float(e->g, name, v)) nomem(e);
}

void dpc_emit_ints(dpc_emit *e, const char *name, const int64_t *v, uint32_t n) {
  if (!e->st && dpc_graph_attr_ints(e->g, name, v, n)) nomem(e);
}

void dpc_emit_shape(dpc_emit *e, const char *name, const int64_t *dims, uint32_t n) {
  if (!e->st && dpc_graph_attr_shape(e->g, name, dims, n)) nomem(e);
}

void dpc_emit_dtype(dpc_emit *e, const char *name, dpc_dtype t) {
  if (!e->st && dpc_graph_attr_dtype(e->g, name, t)) nomem(e);
}

void dpc_emit_str(dpc_emit *e, const char *name, const char *v) {
  if (!e->st && dpc_graph_attr_str(e->g, name, v)) nomem(e);
}

void dpc_emit_copy_attr(dpc_emit *e, uint32_t from, const char *name) {
  if (e->st) return;
  const dpc_attr *a = dpc_attrs_get(dpc_node_attrs(e->g, from), name);
  if (a && dpc_graph_attr_copy(e->g, e->g, a)) nomem(e);
}

uint32_t dpc_emit_scalar(dpc_emit *e, double v, dpc_dtype t) {
  if (e->st) return DPC_NONE;
  dpc_emit_begin(e);
  dpc_shape s = {0};
  if (dpc_graph_attr_tensor(e->g, "value", t, &s, &v)) {
    nomem(e);
    return DPC_NONE;
  }
  uint32_t node = dpc_emit_node(e, DPC_OP_CONSTANT, NULL, 0, 1);
  return node == DPC_NONE ? DPC_NONE : e->g->nodes[node].out;
}

void dpc_emit_name(dpc_emit *e, uint32_t value, const char *name) {
  if (e->st) return;
  e->st = dpc_graph_set_name(e->g, value, name, strlen(name), e->d);
}
