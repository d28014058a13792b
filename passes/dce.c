/*
 * dce.c — dead code elimination: keep the nodes that outputs, updates or the loss depend on.
 *
 * Nodes are in topological order, so one backward sweep marks everything live.
 */
#include "passes/pass.h"

#include <stdlib.h>

dpc_status dpc_pass_dce(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d) {
  (void)o;
  if (g->n_nodes == 0) return DPC_OK;
  bool *live = calloc(g->n_nodes, sizeof *live);
  if (!live) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory in dce");
  for (uint32_t i = 0; i < g->n_outputs; i++) live[g->values[g->outputs[i]].node] = true;
  for (uint32_t i = 0; i < g->n_updates; i++) {
    live[g->values[g->updates[i].value].node] = true;
    live[g->values[g->updates[i].target].node] = true;
  }
  if (g->obj.loss != DPC_NONE) live[g->values[g->obj.loss].node] = true;
  bool dead = false;
  for (uint32_t i = g->n_nodes; i-- > 0;) {
    if (!live[i]) {
      dead = true;
      continue;
    }
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) live[g->values[g->ids[n->in + k]].node] = true;
  }
  dpc_status st = dead ? dpc_graph_keep(g, live, d) : DPC_OK;
  free(live);
  return st;
}
