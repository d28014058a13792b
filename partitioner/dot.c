/*
 * dot.c — Graphviz text for every node of a graph, clustered by device (--dot-full).
 *
 * The picture drawn by default (dot_view.c) folds a step into the units a person reasons about;
 * this one is for debugging a pass: each node with its op, value name and type, each edge with
 * the type that flows, and edges that cross devices standing out.
 */
#include "partitioner/partitioner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Quote for a DOT string: escape quotes and backslashes. */
static void put_quoted(dpc_buf *b, const char *s) {
  dpc_buf_puts(b, "\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') dpc_buf_putn(b, "\\", 1);
    dpc_buf_putn(b, s, 1);
  }
  dpc_buf_puts(b, "\"");
}

static void put_node(const dpc_graph *g, uint32_t i, const double *ms, dpc_buf *b) {
  const dpc_node *n = &g->nodes[i];
  char lbl[512], name[96], ty[160];
  const dpc_value *v = &g->values[n->out];
  dpc_graph_value_label(g, n->out, name, sizeof name);
  dpc_graph_format_type(g, v->dtype, &v->shape, ty, sizeof ty);
  if (n->n_out > 1) snprintf(ty + strlen(ty), sizeof ty - strlen(ty), " (+%u)", n->n_out - 1);
  snprintf(lbl, sizeof lbl, "%s\n%s\n%s", dpc_op_name(n->op), name, ty);
  if (ms && ms[i] >= 0.0005)
    snprintf(lbl + strlen(lbl), sizeof lbl - strlen(lbl), "\n%.3f ms", ms[i]);
  const char *shape = dpc_op_has(n->op, DPC_OPF_SOURCE) ? "ellipse" : "box";
  const char *fill = n->op == DPC_OP_INPUT                ? "#dbe9f6"
                     : dpc_op_has(n->op, DPC_OPF_PERSIST) ? "#fde9c8"
                     : n->op == DPC_OP_CONSTANT           ? "#eeeeee"
                                                          : "#ffffff";
  dpc_buf_printf(b, "    n%u [shape=%s, style=filled, fillcolor=\"%s\", label=", i, shape, fill);
  put_quoted(b, lbl);
  dpc_buf_puts(b, "];\n");
}

dpc_status dpc_dot_graph_full(const dpc_graph *g, const double *ms, dpc_buf *b) {
  dpc_buf_printf(b, "digraph ");
  put_quoted(b, g->name != DPC_NONE ? dpc_graph_str(g, g->name) : "graph");
  dpc_buf_puts(b, " {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
                  "  edge [fontname=\"Helvetica\", fontsize=9];\n");
  /* One cluster per distinct device, in order of first appearance; unplaced nodes outside. */
  uint32_t *devs = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *devs);
  if (!devs) return DPC_ERR_NOMEM;
  uint32_t nd = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    uint32_t dv = g->nodes[i].device;
    bool seen = dv == DPC_NONE;
    for (uint32_t k = 0; k < nd && !seen; k++) seen = devs[k] == dv;
    if (!seen) devs[nd++] = dv;
  }
  for (uint32_t k = 0; k < nd; k++) {
    dpc_buf_printf(b, "  subgraph cluster_%u {\n    label=", k);
    put_quoted(b, dpc_graph_str(g, devs[k]));
    dpc_buf_puts(b, ";\n    style=filled;\n    color=\"#f3f3f3\";\n");
    for (uint32_t i = 0; i < g->n_nodes; i++)
      if (g->nodes[i].device == devs[k]) put_node(g, i, ms, b);
    dpc_buf_puts(b, "  }\n");
  }
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].device == DPC_NONE) put_node(g, i, ms, b);
  free(devs);
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t v = g->ids[n->in + k];
      uint32_t from = g->values[v].node;
      char ty[160];
      dpc_graph_format_type(g, g->values[v].dtype, &g->values[v].shape, ty, sizeof ty);
      bool cross = g->nodes[from].device != n->device;
      /* what crosses between devices is labelled with its bytes, when they are known */
      if (cross && dpc_shape_is_concrete(&g->values[v].shape)) {
        double kib = (double)dpc_shape_numel(&g->values[v].shape) *
                     (double)dpc_dtype_size(g->values[v].dtype) / 1024;
        snprintf(ty + strlen(ty), sizeof ty - strlen(ty), "\n%.1f KiB", kib);
      }
      dpc_buf_printf(b, "  n%u -> n%u [label=", from, i);
      put_quoted(b, ty);
      if (cross) dpc_buf_puts(b, ", color=red, fontcolor=red, style=dashed, penwidth=2");
      dpc_buf_puts(b, "];\n");
    }
  }
  dpc_buf_puts(b, "}\n");
  return b->oom ? DPC_ERR_NOMEM : DPC_OK;
}
