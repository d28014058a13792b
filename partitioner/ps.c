/*
 * ps.c — the training step split for a parameter server (see partitioner.h).
 *
 * Asynchronous data parallelism moves the optimizer off the workers: a worker computes
 * gradients from its batch and the parameters it pulled; the server owns the parameters and
 * the optimizer state and applies gradients as they come. The training graph splits along the
 * same line as accumulation's (accumulate.c): what reads the data (forward, backward) goes to
 * the worker, whose outputs are the gradients (P.grad) and the loss; what reads a gradient (the
 * optimizer) goes to the server, whose inputs named P.grad take the gradients' place and whose
 * updates write the parameters and state. What reads neither (params, the learning-rate
 * schedule) goes wherever it is read.
 */
#include "partitioner/partitioner.h"

#include "ir/print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct half {
  const dpc_graph *r;
  dpc_graph *g;
  uint32_t *val; /* value of r -> value of g, DPC_NONE when not in this half */
} half;

static dpc_status nomem(dpc_diag *d) {
  return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory splitting the step for a server");
}

static dpc_status copy_node(half *h, uint32_t i, dpc_diag *d) {
  const dpc_graph *r = h->r;
  const dpc_node *n = &r->nodes[i];
  uint32_t id;
  dpc_status st = dpc_copy_node(h->g, r, i, h->val, DPC_NONE, 0, &id, d);
  for (uint32_t j = 0; j < n->n_out && !st; j++) {
    uint32_t v = h->g->nodes[id].out + j, nm = r->values[n->out + j].name;
    h->val[n->out + j] = v;
    if (nm != DPC_NONE) {
      const char *s = dpc_graph_str(r, nm);
      st = dpc_graph_set_name(h->g, v, s, strlen(s), d);
    }
  }
  return st;
}

/* An input in g standing for value rv of r (a gradient the server receives). */
static dpc_status input_for(half *h, uint32_t rv, dpc_diag *d) {
  const dpc_value *v = &h->r->values[rv];
  uint32_t mark = dpc_graph_attr_mark(h->g);
  if (dpc_graph_attr_dtype(h->g, "dtype", v->dtype) ||
      dpc_graph_attr_shape(h->g, "shape", v->shape.d, v->shape.rank))
    return nomem(d);
  dpc_node_desc desc = {DPC_OP_INPUT, NULL, 0, mark, 1, (dpc_loc){0}, DPC_NONE};
  uint32_t id;
  dpc_status st = dpc_graph_add_node(h->g, &desc, &id, d);
  if (st) return st;
  h->val[rv] = h->g->nodes[id].out;
  const char *s = dpc_graph_str(h->r, v->name);
  return dpc_graph_set_name(h->g, h->val[rv], s, strlen(s), d);
}

static dpc_status half_init(half *h, const dpc_graph *r, dpc_diag *d) {
  h->r = r;
  h->g = dpc_graph_new();
  h->val = malloc((r->n_values ? r->n_values : 1) * sizeof *h->val);
  if (!h->g || !h->val) return nomem(d);
  for (uint32_t v = 0; v < r->n_values; v++) h->val[v] = DPC_NONE;
  for (uint32_t k = 0; k < r->n_syms; k++) {
    const char *s = dpc_graph_str(r, r->syms[k]);
    if (dpc_graph_symbol(h->g, s, strlen(s)) != k) return nomem(d);
    h->g->sym_vals[k] = r->sym_vals[k];
  }
  if (r->name != DPC_NONE) {
    const char *s = dpc_graph_str(r, r->name);
    h->g->name = dpc_graph_intern(h->g, s, strlen(s));
  }
  return DPC_OK;
}

dpc_status dpc_ps_split(const dpc_graph *train, dpc_graph **worker, dpc_graph **server,
                        dpc_diag *d) {
  *worker = *server = NULL;
  const dpc_graph *r = train;
  uint32_t nn = r->n_nodes ? r->n_nodes : 1, nv = r->n_values ? r->n_values : 1;
  uint8_t *cls = calloc(nn, 1);
  bool *is_grad = calloc(nv, sizeof *is_grad), *need_w = calloc(nn, sizeof *need_w);
  bool *need_s = calloc(nn, sizeof *need_s);
  half w = {0}, s = {0};
  dpc_status st = cls && is_grad && need_w && need_s ? DPC_OK : nomem(d);
  if (!st) dpc_mark_grads(r, is_grad);
  if (!st) st = dpc_step_classify(r, is_grad, cls, d);
  /* the worker needs its part and what it reads, the server likewise (but not the gradients'
   * producers: they are its inputs) */
  for (uint32_t i = nn; !st && i-- > 0;) {
    if (i >= r->n_nodes) continue;
    need_w[i] |= cls[i] == DPC_STEP_PER_MB;
    need_s[i] |= cls[i] == DPC_STEP_OPTIMIZER;
    const dpc_node *n = &r->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t v = dpc_node_inputs(r, n)[k], p = r->values[v].node;
      if (need_w[i]) need_w[p] = true;
      if (need_s[i] && !is_grad[v]) need_s[p] = true;
    }
  }
  for (uint32_t u = 0; !st && u < r->n_updates; u++) {
    uint32_t t = r->values[r->updates[u].target].node, v = r->values[r->updates[u].value].node;
    if (cls[v] == DPC_STEP_PER_MB)
      st = dpc_graph_fail_node(r, v, d, DPC_ERR_UNSUPPORTED,
                               "updates state from the batch (batch statistics): a parameter "
                               "server cannot apply it yet");
    need_s[t] = need_s[v] = true;
  }
  /* transitive closure of what the server's update values read */
  for (uint32_t i = r->n_nodes; !st && i-- > 0;) {
    if (!need_s[i]) continue;
    const dpc_node *n = &r->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t v = dpc_node_inputs(r, n)[k];
      if (!is_grad[v]) need_s[r->values[v].node] = true;
    }
  }
  if (!st) st = half_init(&w, r, d);
  if (!st) st = half_init(&s, r, d);
  for (uint32_t i = 0; !st && i < r->n_nodes; i++) {
    if (need_w[i]) st = copy_node(&w, i, d);
    if (!st && need_s[i]) {
      const dpc_node *n = &r->nodes[i];
      for (uint32_t k = 0; !st && k < n->n_in; k++) {
        uint32_t v = dpc_node_inputs(r, n)[k];
        if (is_grad[v] && s.val[v] == DPC_NONE) st = input_for(&s, v, d);
      }
      if (!st) st = copy_node(&s, i, d);
    }
  }
  /* worker: the gradients and the loss out; server: the updates */
  for (uint32_t v = 0; !st && v < r->n_values; v++)
    if (is_grad[v] && w.val[v] != DPC_NONE) st = dpc_graph_add_output(w.g, w.val[v], d);
  if (!st && r->obj.loss != DPC_NONE) {
    if (w.val[r->obj.loss] == DPC_NONE)
      st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "the loss is not on the worker's side");
    else
      st = dpc_graph_add_output(w.g, w.val[r->obj.loss], d);
  }
  for (uint32_t u = 0; !st && u < r->n_updates; u++)
    st = dpc_graph_add_update(s.g, s.val[r->updates[u].target], s.val[r->updates[u].value],
                              r->updates[u].loc, d);
  if (!st) st = dpc_verify(w.g, d);
  if (!st) st = dpc_verify(s.g, d);
  free(cls), free(is_grad), free(need_w), free(need_s), free(w.val), free(s.val);
  if (st) {
    dpc_graph_free(w.g);
    dpc_graph_free(s.g);
    return st;
  }
  *worker = w.g;
  *server = s.g;
  return DPC_OK;
}
