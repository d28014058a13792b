/*
 * infer.c — shape inference over the whole graph.
 *
 * Nodes get their types when they are built, so on a fresh graph this changes nothing; it is
 * first in the list so that a graph edited by hand or by a tool (or bound to concrete symbol
 * values) is consistent before any pass relies on its types.
 */
#include "passes/pass.h"

dpc_status dpc_pass_infer(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d) {
  (void)o;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    dpc_status st = dpc_graph_infer_node(g, i, d);
    if (st) return st;
  }
  return DPC_OK;
}
