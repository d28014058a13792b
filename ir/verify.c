/*
 * verify.c — the graph verifier: every invariant of graph.h, checked from scratch.
 *
 * Run after parsing, after each pass with --verify-each, and in tests. It re-runs every shape
 * rule on a copy, so a pass that rewires a node without fixing its output types is caught
 * at the pass that did it.
 */
#include "ir/print.h"
#include "ir/rules.h"

#include <stdlib.h>
#include <string.h>

static dpc_status bad(const dpc_graph *g, uint32_t node, dpc_diag *d, const char *what) {
  return dpc_graph_fail_node(g, node, d, DPC_ERR_INVALID, "invalid graph: %s", what);
}

static dpc_status check_node(const dpc_graph *g, uint32_t i, dpc_diag *d) {
  const dpc_node *n = &g->nodes[i];
  if ((unsigned)n->op >= DPC_OP_COUNT) return bad(g, i, d, "unknown op");
  uint32_t lo, hi;
  dpc_op_arity(n->op, &lo, &hi);
  if (n->n_in < lo || n->n_in > hi) return bad(g, i, d, "wrong number of inputs");
  if ((uint64_t)n->in + n->n_in > g->n_ids) return bad(g, i, d, "input list out of range");
  for (uint32_t k = 0; k < n->n_in; k++) {
    uint32_t v = g->ids[n->in + k];
    if (v >= g->n_values) return bad(g, i, d, "input refers to a value that does not exist");
    if (g->values[v].node >= i)
      return bad(g, i, d, "input is produced later: not in topological order");
  }
  uint32_t fixed = dpc_op_num_outputs(n->op);
  if (n->n_out == 0 || (fixed && n->n_out != fixed)) return bad(g, i, d, "wrong number of outputs");
  if ((uint64_t)n->out + n->n_out > g->n_values) return bad(g, i, d, "outputs out of range");
  for (uint32_t k = 0; k < n->n_out; k++) {
    const dpc_value *v = &g->values[n->out + k];
    if (v->node != i || v->index != k)
      return bad(g, i, d, "output value does not point back at its node");
  }
  if ((uint64_t)n->attr + n->n_attr > g->n_attrs) return bad(g, i, d, "attributes out of range");
  for (uint32_t k = 0; k < n->n_attr; k++) {
    const dpc_attr *a = &g->attrs[n->attr + k];
    dpc_attr_spec sp;
    if (!dpc_op_attr_find(n->op, dpc_graph_str(g, a->name), &sp))
      return bad(g, i, d, "attribute not in the op's spec");
    bool fits = sp.kind == a->kind || (sp.kind == DPC_ATTR_INTS && a->kind == DPC_ATTR_INT);
    if (!fits) return bad(g, i, d, "attribute of the wrong kind");
  }
  uint32_t na = dpc_op_attr_count(n->op);
  for (uint32_t k = 0; k < na; k++) {
    dpc_attr_spec sp;
    dpc_op_attr_at(n->op, k, &sp);
    if (sp.need == DPC_ATTR_REQUIRED && !dpc_attrs_get(dpc_node_attrs(g, i), sp.name))
      return bad(g, i, d, "required attribute missing");
  }
  if (n->device != DPC_NONE && n->device >= g->strs.len)
    return bad(g, i, d, "device name out of range");
  if (n->fused != DPC_NONE &&
      (n->fused <= i || n->fused >= g->n_nodes || g->nodes[n->fused].fused != DPC_NONE))
    return bad(g, i, d, "fused into a node that is not a later group root");
  return DPC_OK;
}

/* A fused node's outputs stay inside its group: only the group reads them, and they are not
 * outputs, updates or the loss (a fusing backend never stores them). */
static dpc_status check_groups(const dpc_graph *g, dpc_diag *d) {
  for (uint32_t j = 0; j < g->n_nodes; j++) {
    const dpc_node *n = &g->nodes[j];
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t p = g->values[g->ids[n->in + k]].node, r = g->nodes[p].fused;
      if (r != DPC_NONE && j != r && n->fused != r)
        return bad(g, j, d, "reads a value fused into a group it is not part of");
    }
  }
#define INSIDE(v) (g->nodes[g->values[v].node].fused != DPC_NONE)
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (INSIDE(g->outputs[i]))
      return bad(g, g->values[g->outputs[i]].node, d, "an output is fused away");
  for (uint32_t i = 0; i < g->n_updates; i++)
    if (INSIDE(g->updates[i].value) || INSIDE(g->updates[i].target))
      return bad(g, g->values[g->updates[i].value].node, d, "an update is fused away");
  if (g->obj.loss != DPC_NONE && INSIDE(g->obj.loss))
    return bad(g, g->values[g->obj.loss].node, d, "the loss is fused away");
#undef INSIDE
  return DPC_OK;
}

dpc_status dpc_verify(const dpc_graph *g, dpc_diag *d) {
  dpc_status st;
  uint32_t produced = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if ((st = check_node(g, i, d))) return st;
    if (g->nodes[i].out != produced) return bad(g, i, d, "outputs are not numbered in node order");
    produced += g->nodes[i].n_out;
  }
  if (produced != g->n_values)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "invalid graph: %u values but nodes produce %u",
                         g->n_values, produced);
  for (uint32_t v = 0; v < g->n_values; v++) {
    const dpc_value *val = &g->values[v];
    for (uint32_t k = 0; k < val->shape.rank; k++)
      /* symbol k is -2 - k: below -1 - n_syms there is none (compared before any negation,
       * which a damaged file's INT64_MIN would overflow) */
      if (DPC_DIM_IS_SYM(val->shape.d[k]) && val->shape.d[k] < -1 - (int64_t)g->n_syms)
        return bad(g, val->node, d, "shape refers to an unknown symbol");
    if (val->name != DPC_NONE && dpc_idmap_get(&g->names, val->name) != v)
      return bad(g, val->node, d, "value name is not in the name table");
  }
  if (g->names.count > g->n_values)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "invalid graph: the name table names missing values");
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] >= g->n_values)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "invalid graph: output %u does not exist", i);
  for (uint32_t i = 0; i < g->n_updates; i++) {
    const dpc_update *u = &g->updates[i];
    if (u->target >= g->n_values || u->value >= g->n_values)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "invalid graph: update %u refers to a missing value",
                           i);
    const dpc_value *t = &g->values[u->target], *v = &g->values[u->value];
    if (!dpc_op_has(g->nodes[t->node].op, DPC_OPF_PERSIST))
      return bad(g, t->node, d, "an update targets something that is not a param or state");
    if (t->dtype != v->dtype || !dpc_shape_eq(&t->shape, &v->shape))
      return bad(g, v->node, d, "an update's value does not match its target's type");
  }
  if (g->obj.loss != DPC_NONE) {
    if (g->obj.loss >= g->n_values)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "invalid graph: the loss does not exist");
    const dpc_value *l = &g->values[g->obj.loss];
    if (l->shape.rank != 0 || !dpc_dtype_is_float(l->dtype))
      return bad(g, l->node, d, "the loss is not a floating-point scalar");
  }

  if ((st = check_groups(g, d))) return st;

  /* Re-derive every type on a copy and compare. */
  dpc_graph *c = dpc_graph_clone(g);
  if (!c) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory verifying the graph");
  st = DPC_OK;
  for (uint32_t i = 0; i < c->n_nodes && !st; i++) {
    if ((st = dpc_graph_infer_node(c, i, d))) break;
    const dpc_node *n = &c->nodes[i];
    for (uint32_t k = 0; k < n->n_out; k++) {
      const dpc_value *a = &c->values[n->out + k], *b = &g->values[n->out + k];
      if (a->dtype != b->dtype || !dpc_shape_eq(&a->shape, &b->shape)) {
        char want[160], have[160];
        dpc_graph_format_type(g, a->dtype, &a->shape, want, sizeof want);
        dpc_graph_format_type(g, b->dtype, &b->shape, have, sizeof have);
        st = dpc_graph_fail_node(
            g, i, d, DPC_ERR_INVALID,
            "invalid graph: output %u is recorded as %s but its shape rule gives %s", k, have,
            want);
        break;
      }
    }
  }
  dpc_graph_free(c);
  return st;
}
