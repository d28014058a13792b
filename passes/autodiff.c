/*
 * autodiff.c — reverse-mode differentiation as a graph rewrite.
 *
 * From the loss named by `minimize`, walk the nodes backwards once and append, for each node on
 * a path from a param to the loss, the nodes that turn its outputs' gradients into its inputs'
 * (rules in grad_rules.c). A value used several times receives the sum of its gradients. Only
 * floating-point values that depend on a param get gradients: labels, indices and constants are
 * skipped without complaint. The gradient of param P is named `P.grad`; the optimizer pass
 * finds it by that name. New nodes go on the device of the forward node they differentiate.
 */
#include "passes/grad.h"
#include "passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sum a new contribution into a value's gradient. */
static void accumulate(dpc_emit *e, uint32_t *grad, uint32_t v, uint32_t dx) {
  if (dx == DPC_NONE || e->st) return;
  grad[v] = grad[v] == DPC_NONE ? dx : dpc_emit2(e, DPC_OP_ADD, grad[v], dx);
}

dpc_status dpc_pass_autodiff(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d) {
  (void)o;
  uint32_t loss = g->obj.loss;
  if (loss == DPC_NONE)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the model has nothing to train: add 'minimize LOSS with sgd(lr=0.1)'");
  uint32_t n_nodes = g->n_nodes, n_values = g->n_values;
  /* depends[v]: v is floating point and computed (differentiably) from some param */
  bool *depends = calloc(n_values, sizeof *depends);
  bool *reaches = calloc(n_nodes, sizeof *reaches); /* node lies on a path to the loss */
  uint32_t *grad = malloc(n_values * sizeof *grad);
  dpc_status st = DPC_OK;
  if (!depends || !reaches || !grad) {
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory in autodiff");
    goto done;
  }
  for (uint32_t v = 0; v < n_values; v++) grad[v] = DPC_NONE;
  for (uint32_t i = 0; i < n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    bool dep = n->op == DPC_OP_PARAM;
    if (dpc_op_has(n->op, DPC_OPF_DIFF))
      for (uint32_t k = 0; k < n->n_in && !dep; k++) dep = depends[g->ids[n->in + k]];
    for (uint32_t k = 0; k < n->n_out; k++)
      depends[n->out + k] = dep && dpc_dtype_is_float(g->values[n->out + k].dtype);
  }
  reaches[g->values[loss].node] = true;
  for (uint32_t i = n_nodes; i-- > 0;) {
    if (!reaches[i]) continue;
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) reaches[g->values[g->ids[n->in + k]].node] = true;
  }
  if (!depends[loss]) {
    st = dpc_diag_fail(
        d, DPC_ERR_INVALID, "the loss '%s' does not depend on any param: nothing to train",
        g->values[loss].name != DPC_NONE ? dpc_graph_str(g, g->values[loss].name) : "?");
    goto done;
  }

  dpc_emit e = dpc_emit_start(g, g->nodes[g->values[loss].node].device, d);
  grad[loss] = dpc_emit_scalar(&e, 1.0, g->values[loss].dtype);
  for (uint32_t i = n_nodes; i-- > 0 && !e.st;) {
    /* g->nodes may move as nodes are appended: read what we need by index each time */
    if (!reaches[i] || !dpc_op_has(g->nodes[i].op, DPC_OPF_DIFF)) continue;
    dpc_node n = g->nodes[i];
    uint32_t dy[64], dx[64];
    bool want[64], any_dy = false, any_want = false;
    if (n.n_out > 64 || n.n_in > 64) {
      st = dpc_graph_fail_node(g, i, d, DPC_ERR_UNSUPPORTED,
                               "autodiff handles at most 64 inputs and outputs");
      goto done;
    }
    for (uint32_t k = 0; k < n.n_out; k++) any_dy |= (dy[k] = grad[n.out + k]) != DPC_NONE;
    for (uint32_t k = 0; k < n.n_in; k++) {
      want[k] = depends[g->ids[n.in + k]];
      any_want |= want[k];
      dx[k] = DPC_NONE;
    }
    if (!any_dy || !any_want) continue;
    dpc_grad_rule rule = dpc_grad_rules[n.op];
    if (!rule) {
      st = dpc_graph_fail_node(g, i, d, DPC_ERR_INTERNAL, "no gradient rule for %s",
                               dpc_op_name(n.op));
      goto done;
    }
    e.device = n.device;
    dpc_grad_args ga = {&e, i, dy, want, dx};
    rule(&ga);
    for (uint32_t k = 0; k < n.n_in; k++)
      if (want[k]) accumulate(&e, grad, g->ids[n.in + k], dx[k]);
  }
  if (e.st) {
    st = e.st;
    dpc_diag_prefix(d, "autodiff: ");
    goto done;
  }
  /* Name each param's gradient P.grad. A gradient that is already a named value (or another
   * param's gradient) is copied first, so every param gets a value of its own. */
  for (uint32_t i = 0; i < n_nodes && !st; i++) {
    if (g->nodes[i].op != DPC_OP_PARAM) continue;
    uint32_t p = g->nodes[i].out, gv = grad[p];
    if (gv == DPC_NONE || g->values[p].name == DPC_NONE) continue;
    char name[300];
    snprintf(name, sizeof name, "%s.grad", dpc_graph_str(g, g->values[p].name));
    if (dpc_graph_find(g, name) != DPC_NONE) {
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "autodiff names the gradient of '%s' '%s', but the model already has a "
                         "value of that name",
                         dpc_graph_str(g, g->values[p].name), name);
      break;
    }
    e.device = g->nodes[i].device;
    if (g->values[gv].name != DPC_NONE || g->nodes[g->values[gv].node].op == DPC_OP_CONSTANT) {
      dpc_emit_begin(&e);
      dpc_emit_dtype(&e, "dtype", g->values[gv].dtype);
      uint32_t c = dpc_emit_node(&e, DPC_OP_CAST, &gv, 1, 0);
      gv = c == DPC_NONE ? DPC_NONE : g->nodes[c].out;
    }
    dpc_emit_name(&e, gv, name);
    st = e.st;
  }
done:
  free(depends);
  free(reaches);
  free(grad);
  return st;
}
