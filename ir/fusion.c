/*
 * fusion.c — fusion groups as the code generator and the runtime see them (fusion.h).
 */
#include "ir/fusion.h"

#include <stdlib.h>
#include <string.h>

bool dpc_group_is_root(const dpc_graph *g, uint32_t node) {
  if (g->nodes[node].fused != DPC_NONE) return false;
  for (uint32_t i = node; i-- > 0;)
    if (g->nodes[i].fused == node) return true;
  return false;
}

void dpc_group_free(dpc_group *grp) {
  free(grp->nodes);
  free(grp->inputs);
  memset(grp, 0, sizeof *grp);
}

static bool inside(const dpc_graph *g, uint32_t root, uint32_t value) {
  uint32_t p = g->values[value].node;
  return p == root || g->nodes[p].fused == root;
}

static void add_inputs(const dpc_graph *g, uint32_t root, uint32_t node, dpc_group *grp) {
  const dpc_node *n = &g->nodes[node];
  for (uint32_t k = 0; k < n->n_in; k++) {
    uint32_t v = g->ids[n->in + k];
    if (!inside(g, root, v)) grp->inputs[grp->n_inputs++] = v;
  }
}

dpc_status dpc_group_get(const dpc_graph *g, uint32_t root, dpc_group *out, dpc_diag *d) {
  memset(out, 0, sizeof *out);
  out->root = root;
  out->anchor = DPC_NONE;
  uint32_t n = 1, n_in = g->nodes[root].n_in;
  for (uint32_t i = 0; i < root; i++)
    if (g->nodes[i].fused == root) n++, n_in += g->nodes[i].n_in;
  out->nodes = malloc(n * sizeof *out->nodes);
  out->inputs = malloc((n_in ? n_in : 1) * sizeof *out->inputs);
  if (!out->nodes || !out->inputs) {
    dpc_group_free(out);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory reading a fusion group");
  }
  for (uint32_t i = 0; i <= root; i++) {
    if (i != root && g->nodes[i].fused != root) continue;
    if (i != root && !dpc_op_has(g->nodes[i].op, DPC_OPF_ELEMWISE)) {
      if (out->anchor != DPC_NONE) {
        dpc_group_free(out);
        return dpc_graph_fail_node(g, root, d, DPC_ERR_INTERNAL, "a fusion group with two anchors");
      }
      out->anchor = i;
      continue;
    }
    out->nodes[out->n_nodes++] = i;
  }
  if (out->anchor != DPC_NONE) add_inputs(g, root, out->anchor, out);
  for (uint32_t i = 0; i < out->n_nodes; i++) add_inputs(g, root, out->nodes[i], out);
  return DPC_OK;
}
