/*
 * exchange.c — the two ends of an inference run across processes (exchange.h).
 */
#include "runtime/exchange.h"

#include <stdlib.h>
#include <string.h>

struct dpc_exchange {
  const dpc_plan *plan;
  uint32_t self, n_devs;
  dpc_transport *t;
  uint32_t **in, *n_in;   /* per device but 0: the inputs its kernels read, by value id */
  uint32_t **out, *n_out; /* per device but 0: the plan's outputs it makes, in output order */
  uint32_t first_peer;
};

void dpc_exchange_free(dpc_exchange *x) {
  if (!x) return;
  for (uint32_t k = 0; k < x->n_devs; k++) {
    if (x->in) free(x->in[k]);
    if (x->out) free(x->out[k]);
  }
  free(x->in), free(x->n_in), free(x->out), free(x->n_out);
  free(x);
}

/* Device k's lists: marks[] is scratch of one flag per value. */
static dpc_status lists_of(dpc_exchange *x, uint32_t k, bool *marks, dpc_diag *d) {
  const dpc_plan *p = x->plan;
  const dpc_graph *g = p->g;
  memset(marks, 0, g->n_values * sizeof *marks);
  uint32_t n = 0;
  for (uint32_t j = 0; j < p->devs[k].n_steps; j++) {
    const dpc_step *sp = &p->devs[k].steps[j];
    if (sp->kind != DPC_STEP_KERNEL) continue;
    const dpc_node *nd = &g->nodes[sp->node];
    for (uint32_t i = 0; i < nd->n_in; i++) {
      uint32_t v = dpc_node_inputs(g, nd)[i];
      if (g->nodes[g->values[v].node].op == DPC_OP_INPUT && !marks[v]) marks[v] = true, n++;
    }
  }
  x->in[k] = malloc((n ? n : 1) * sizeof **x->in);
  x->out[k] = malloc((g->n_outputs ? g->n_outputs : 1) * sizeof **x->out);
  if (!x->in[k] || !x->out[k]) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t v = 0; v < g->n_values; v++)
    if (marks[v]) x->in[k][x->n_in[k]++] = v;
  memset(marks, 0, g->n_values * sizeof *marks);
  for (uint32_t i = 0; i < g->n_outputs; i++) {
    uint32_t v = g->outputs[i];
    if (p->slots[v].device != k || marks[v]) continue;
    marks[v] = true;
    x->out[k][x->n_out[k]++] = v;
  }
  return DPC_OK;
}

dpc_status dpc_exchange_new(const dpc_plan *plan, uint32_t self, dpc_transport *peers,
                            dpc_exchange **out, dpc_diag *d) {
  *out = NULL;
  uint32_t n = plan->n_devs;
  dpc_exchange *x = calloc(1, sizeof *x);
  bool *marks = calloc(plan->g->n_values ? plan->g->n_values : 1, sizeof *marks);
  if (x) {
    x->plan = plan, x->self = self, x->n_devs = n, x->t = peers, x->first_peer = DPC_NONE;
    x->in = calloc(n, sizeof *x->in), x->n_in = calloc(n, sizeof *x->n_in);
    x->out = calloc(n, sizeof *x->out), x->n_out = calloc(n, sizeof *x->n_out);
  }
  dpc_status st = DPC_OK;
  if (!x || !marks || !x->in || !x->n_in || !x->out || !x->n_out)
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 1; k < n && !st; k++)
    if (self == 0 || k == self) st = lists_of(x, k, marks, d);
  free(marks);
  for (uint32_t j = 0; !st && j < plan->devs[self].n_steps; j++)
    if (plan->devs[self].steps[j].kind == DPC_STEP_WAIT) {
      x->first_peer = plan->devs[self].steps[j].peer;
      break;
    }
  if (st) {
    dpc_exchange_free(x);
    return st;
  }
  *out = x;
  return DPC_OK;
}

/* Device 0's process sends (to_zero false) or takes (true) device k's list; device k's does the
 * other side. */
static dpc_status move(dpc_exchange *x, uint32_t k, const uint32_t *vals, uint32_t n, bool to_zero,
                       const dpc_tensor *tensors, dpc_diag *d) {
  dpc_transport *t = x->t;
  bool sends = (x->self == 0) != to_zero;
  uint32_t peer = x->self == 0 ? k : 0;
  for (uint32_t i = 0; i < n; i++) {
    const dpc_tensor *v = &tensors[vals[i]];
    size_t bytes = dpc_tensor_bytes(v);
    dpc_status st = sends ? t->ops->send(t, x->self, peer, v->data, bytes, d)
                          : t->ops->recv(t, x->self, peer, v->data, bytes, d);
    if (st) return st;
  }
  return DPC_OK;
}

/* Each device's list of one kind, this process's side of it (device 0's: every device's). */
static dpc_status each(dpc_exchange *x, uint32_t *const *vals, const uint32_t *n, bool to_zero,
                       const dpc_tensor *tensors, dpc_diag *d) {
  for (uint32_t k = 1; k < x->n_devs; k++) {
    if (x->self != 0 && k != x->self) continue;
    dpc_status st = move(x, k, vals[k], n[k], to_zero, tensors, d);
    if (st) return st;
  }
  return DPC_OK;
}

dpc_status dpc_exchange_inputs(dpc_exchange *x, const dpc_tensor *tensors, dpc_diag *d) {
  return each(x, x->in, x->n_in, false, tensors, d);
}

dpc_status dpc_exchange_outputs(dpc_exchange *x, const dpc_tensor *tensors, dpc_diag *d) {
  return each(x, x->out, x->n_out, true, tensors, d);
}

uint32_t dpc_exchange_first_peer(const dpc_exchange *x) {
  return x->first_peer;
}
