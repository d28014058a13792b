/*
 * dot_view.c — the Graphviz picture a person reads: what `dpc print --dot` and `dpc plan --dot`
 * draw unless asked for every node (dot.c, --dot-full).
 *
 * A training step on two devices holds hundreds of nodes, most of them scalar constants, the
 * learning-rate schedule, unnamed temporaries and the reshapes that pack gradients into buckets.
 * Drawn one box each they bury what a person looks for: which layer runs where, what it costs,
 * and what crosses between devices. So a node of the picture (a unit) is
 *   - a fusion group (one kernel), or a named value with the unnamed sub-expressions and the
 *     nodes that cost nothing which feed it alone (as `dpc print` folds them into a statement);
 *   - an input; a param or state drawn inside the first unit that reads it (a layer's kernel,
 *     its update), when that runs on the same device;
 *   - a collective once on each device it joins, in that device's cluster, with the reshapes,
 *     concatenations and slices that pack and unpack its bucket there.
 * Scalar constants and the scalar arithmetic passes add (schedules, step counters) are not
 * drawn. Edges between units of different devices carry the bytes that cross; the parts of one
 * collective are joined by an edge with the bytes each device contributes. Times appear on
 * units that cost something.
 * The graph is only read.
 */
#include "ir/fusion.h"
#include "partitioner/partitioner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct view {
  const dpc_graph *g;
  const double *ms; /* per node, or NULL */
  uint32_t n;       /* nodes; units n.. are the parts of collectives */
  uint32_t n_units;
  uint32_t *part0;  /* per node: a collective's first part, DPC_NONE otherwise */
  uint32_t *rep;    /* per node: its unit, DPC_NONE when not drawn */
  uint32_t *dev;    /* per unit: the device string id, DPC_NONE when unplaced */
  uint32_t *rd_off; /* per node: its readers rd_node/rd_slot[rd_off[i] .. rd_off[i+1]) */
  uint32_t *rd_node, *rd_slot;
} view;

typedef struct edge {
  uint32_t from, to, v;
} edge;

static bool is_comm(const dpc_graph *g, uint32_t i) {
  return dpc_op_has(g->nodes[i].op, DPC_OPF_COMM);
}

static bool is_scalar(const dpc_graph *g, uint32_t v) {
  const dpc_shape *s = &g->values[v].shape;
  return dpc_shape_is_concrete(s) && dpc_shape_numel(s) <= 1;
}

static bool is_kept_value(const dpc_graph *g, uint32_t v) {
  if (v == g->obj.loss) return true;
  for (uint32_t k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return true;
  return false;
}

/* Scalar constants, and the scalars a pass computes from scalars: the learning-rate schedule,
 * the step counter. A loss reads a tensor, so it stays; so do the graph's outputs, its inputs
 * and params, and what the model's own statements compute. */
static bool is_hidden(const dpc_graph *g, uint32_t i) {
  const dpc_node *n = &g->nodes[i];
  if (dpc_op_has(n->op, DPC_OPF_COMM) || n->op == DPC_OP_INPUT || n->op == DPC_OP_PARAM ||
      (n->loc.line && n->op != DPC_OP_CONSTANT))
    return false;
  for (uint32_t k = 0; k < n->n_out; k++)
    if (!is_scalar(g, n->out + k) || is_kept_value(g, n->out + k)) return false;
  for (uint32_t k = 0; k < n->n_in; k++)
    if (!is_scalar(g, g->ids[n->in + k])) return false;
  return true;
}

/* Ops that only move a collective's data into or out of its bucket. */
static bool is_packing(dpc_op op) {
  return op == DPC_OP_RESHAPE || op == DPC_OP_CONCAT || op == DPC_OP_SLICE || op == DPC_OP_CAST;
}

/* A time that prints as 0.000 ms says nothing. */
static bool costs_nothing(const view *w, uint32_t i) {
  return w->ms && w->ms[i] < 0.0005;
}

/* The unit that value v comes from. */
static uint32_t value_unit(const view *w, uint32_t v) {
  uint32_t p = w->g->values[v].node;
  return w->part0[p] != DPC_NONE ? w->part0[p] + w->g->values[v].index : w->rep[p];
}

/* The unit that reads slot k of node r. */
static uint32_t reader_unit(const view *w, uint32_t r, uint32_t k) {
  return w->part0[r] != DPC_NONE ? w->part0[r] + k : w->rep[r];
}

/* Part k of collective c runs on the device of its input k. */
static uint32_t part_device(const dpc_graph *g, uint32_t c, uint32_t k) {
  return g->nodes[g->values[g->ids[g->nodes[c].in + k]].node].device;
}

static dpc_status view_init(view *w, const dpc_graph *g, const double *ms) {
  uint32_t n = g->n_nodes, m = n ? n : 1;
  *w = (view){.g = g, .ms = ms, .n = n};
  w->part0 = malloc(m * sizeof *w->part0);
  w->rep = malloc(m * sizeof *w->rep);
  w->rd_off = calloc(n + 1, sizeof *w->rd_off);
  uint32_t ids = g->n_ids ? g->n_ids : 1;
  w->rd_node = malloc(ids * sizeof *w->rd_node);
  w->rd_slot = malloc(ids * sizeof *w->rd_slot);
  if (!w->part0 || !w->rep || !w->rd_off || !w->rd_node || !w->rd_slot) return DPC_ERR_NOMEM;
  uint32_t units = n;
  for (uint32_t i = 0; i < n; i++) {
    w->part0[i] = is_comm(g, i) ? units : DPC_NONE;
    if (is_comm(g, i)) units += g->nodes[i].n_in;
    w->rep[i] = i;
  }
  w->n_units = units;
  w->dev = malloc((units ? units : 1) * sizeof *w->dev);
  if (!w->dev) return DPC_ERR_NOMEM;
  for (uint32_t i = 0; i < n; i++) {
    w->dev[i] = g->nodes[i].device;
    for (uint32_t k = 0; w->part0[i] != DPC_NONE && k < g->nodes[i].n_in; k++)
      w->dev[w->part0[i] + k] = part_device(g, i, k);
  }
  /* readers of each node, counted, then placed */
  for (uint32_t r = 0; r < n; r++)
    for (uint32_t k = 0; k < g->nodes[r].n_in; k++)
      w->rd_off[g->values[g->ids[g->nodes[r].in + k]].node + 1]++;
  for (uint32_t i = 0; i < n; i++) w->rd_off[i + 1] += w->rd_off[i];
  uint32_t *fill = calloc(m, sizeof *fill);
  if (!fill) return DPC_ERR_NOMEM;
  for (uint32_t r = 0; r < n; r++)
    for (uint32_t k = 0; k < g->nodes[r].n_in; k++) {
      uint32_t p = g->values[g->ids[g->nodes[r].in + k]].node;
      uint32_t at = w->rd_off[p] + fill[p]++;
      w->rd_node[at] = r, w->rd_slot[at] = k;
    }
  free(fill);
  return DPC_OK;
}

static void view_free(view *w) {
  free(w->part0), free(w->rep), free(w->dev), free(w->rd_off), free(w->rd_node), free(w->rd_slot);
}

/* The one unit that reads node i (DPC_NONE: none, or several); *first gets the unit of its
 * first reader in node order (DPC_NONE: none). */
static uint32_t only_reader(const view *w, uint32_t i, uint32_t *first) {
  uint32_t only = DPC_NONE, first_node = DPC_NONE;
  bool several = false;
  *first = DPC_NONE;
  for (uint32_t j = w->rd_off[i]; j < w->rd_off[i + 1]; j++) {
    uint32_t u = reader_unit(w, w->rd_node[j], w->rd_slot[j]);
    if (u == DPC_NONE) continue;
    if (w->rd_node[j] < first_node) first_node = w->rd_node[j], *first = u;
    if (only != DPC_NONE && u != only) several = true;
    only = u;
  }
  return several ? DPC_NONE : only;
}

/* Decide every node's unit. Unpacking first, producers before readers: a slice or reshape of
 * a collective's output on its device belongs to that part. Then readers before producers, so
 * a node folds into a unit already decided. */
static void view_fold(view *w) {
  const dpc_graph *g = w->g;
  bool *fixed = calloc(w->n ? w->n : 1, sizeof *fixed);
  for (uint32_t i = 0; fixed && i < w->n; i++) {
    const dpc_node *n = &g->nodes[i];
    if (!is_packing(n->op) || is_comm(g, i) || !n->n_in) continue;
    uint32_t from = value_unit(w, g->ids[n->in]);
    bool same = from >= w->n && from != DPC_NONE && w->dev[from] == n->device;
    for (uint32_t k = 1; same && k < n->n_in; k++)
      same = value_unit(w, g->ids[n->in + k]) == from || is_scalar(g, g->ids[n->in + k]);
    if (same) w->rep[i] = from, fixed[i] = true;
  }
  for (uint32_t i = w->n; i-- > 0;) {
    const dpc_node *n = &g->nodes[i];
    if ((fixed && fixed[i]) || is_comm(g, i)) continue;
    if (is_hidden(g, i)) {
      w->rep[i] = DPC_NONE;
      continue;
    }
    if (n->fused != DPC_NONE) {
      w->rep[i] = w->rep[n->fused];
      continue;
    }
    uint32_t first, to = only_reader(w, i, &first);
    /* a param or state is drawn in the first unit that reads it: a layer's kernel, its update */
    if (dpc_op_has(n->op, DPC_OPF_PERSIST) && first != DPC_NONE && first < w->n &&
        w->dev[first] == n->device) {
      w->rep[i] = first;
      continue;
    }
    if (to == DPC_NONE || w->dev[to] != n->device) continue;
    bool source = dpc_op_has(n->op, DPC_OPF_SOURCE);
    bool unnamed = g->values[n->out].name == DPC_NONE && !is_kept_value(g, n->out);
    /* a collective's part takes only the reshapes and slices of its bucket, not compute */
    if (to >= w->n ? is_packing(n->op) : !source && (unnamed || costs_nothing(w, i)))
      w->rep[i] = to;
  }
  free(fixed);
}

/* Quote for a DOT string: escape quotes and backslashes, newlines as \n. */
static void put_label(dpc_buf *b, const char *s) {
  dpc_buf_puts(b, "\"");
  for (; *s; s++) {
    if (*s == '\n') {
      dpc_buf_puts(b, "\\n");
      continue;
    }
    if (*s == '"' || *s == '\\') dpc_buf_putn(b, "\\", 1);
    dpc_buf_putn(b, s, 1);
  }
  dpc_buf_puts(b, "\"");
}

static void format_bytes(double bytes, char *buf, size_t n) {
  if (bytes < 1024)
    snprintf(buf, n, "%.0f B", bytes);
  else if (bytes < 1024.0 * 1024)
    snprintf(buf, n, "%.1f KiB", bytes / 1024);
  else
    snprintf(buf, n, "%.2f MiB", bytes / (1024.0 * 1024));
}

/* Bytes of value v, or -1 when its shape is not known yet. */
static double value_bytes(const dpc_graph *g, uint32_t v) {
  const dpc_value *x = &g->values[v];
  if (!dpc_shape_is_concrete(&x->shape)) return -1;
  return (double)dpc_shape_numel(&x->shape) * (double)dpc_dtype_size(x->dtype);
}

static void append(char *buf, size_t n, const char *s) {
  size_t len = strlen(buf);
  if (len + 1 < n) snprintf(buf + len, n - len, "%s", s);
}

/* One unit: its kernels' ops in order, its name, its type, what is folded in, its time. */
static void put_unit(const view *w, uint32_t u, const uint32_t *next, const uint32_t *head,
                     dpc_buf *b) {
  const dpc_graph *g = w->g;
  bool part = u >= w->n;
  uint32_t c = u, k = 0; /* the node that names the unit, and its output */
  if (part)
    for (c = 0; c < w->n; c++)
      if (w->part0[c] != DPC_NONE && u >= w->part0[c] && u < w->part0[c] + g->nodes[c].n_in) {
        k = u - w->part0[c];
        break;
      }
  const dpc_node *root = &g->nodes[c];
  char ops[160] = "", folded[160] = "", carried[160] = "", news[160] = "", name[96] = "";
  char ty[160], lbl[900], vn[96];
  double ms = 0;
  uint32_t n_ops = 0;
  dpc_op last = DPC_OP_COUNT;
  for (uint32_t i = head[u]; i != DPC_NONE; i = next[i]) {
    const dpc_node *n = &g->nodes[i];
    if (w->ms) ms += w->ms[i];
    dpc_graph_value_label(g, n->out, vn, sizeof vn);
    if (dpc_op_has(n->op, DPC_OPF_SOURCE) && i != c) { /* a param or state drawn here */
      append(folded, sizeof folded, folded[0] ? ", " : "+ ");
      append(folded, sizeof folded, vn);
    } else if (part && g->values[n->out].name != DPC_NONE) { /* what the bucket carries */
      append(carried, sizeof carried, carried[0] ? ", " : "");
      append(carried, sizeof carried, vn);
    } else if (!part && n->op != last) {
      append(ops, sizeof ops, n_ops++ ? " + " : "");
      append(ops, sizeof ops, dpc_op_name(n->op));
      last = n->op;
    }
  }
  /* the params and states whose next value this unit computes */
  for (uint32_t j = 0; j < g->n_updates; j++) {
    if (value_unit(w, g->updates[j].value) != u) continue;
    dpc_graph_value_label(g, g->updates[j].target, vn, sizeof vn);
    append(news, sizeof news, news[0] ? ", " : "new ");
    append(news, sizeof news, vn);
  }
  if (part) snprintf(ops, sizeof ops, "%s", dpc_op_name(root->op));
  uint32_t out = root->out + k;
  if (g->values[out].name != DPC_NONE) dpc_graph_value_label(g, out, name, sizeof name);
  dpc_graph_format_type(g, g->values[out].dtype, &g->values[out].shape, ty, sizeof ty);
  if (!part && root->n_out > 1)
    snprintf(ty + strlen(ty), sizeof ty - strlen(ty), " (+%u)", root->n_out - 1);
  snprintf(lbl, sizeof lbl, "%s", ops);
  const char *lines[] = {name, news, ty, carried, folded};
  for (size_t j = 0; j < sizeof lines / sizeof *lines; j++)
    if (lines[j][0]) append(lbl, sizeof lbl, "\n"), append(lbl, sizeof lbl, lines[j]);
  if (ms >= 0.0005) snprintf(lbl + strlen(lbl), sizeof lbl - strlen(lbl), "\n%.3f ms", ms);
  bool source = !part && dpc_op_has(root->op, DPC_OPF_SOURCE);
  const char *fill = part                                    ? "#f6d5d1"
                     : root->op == DPC_OP_INPUT              ? "#dbe9f6"
                     : dpc_op_has(root->op, DPC_OPF_PERSIST) ? "#fde9c8"
                                                             : "#ffffff";
  dpc_buf_printf(b, "    u%u [shape=%s, style=filled, fillcolor=\"%s\", label=", u,
                 source ? "ellipse" : "box", fill);
  put_label(b, lbl);
  dpc_buf_puts(b, "];\n");
}

static int edge_cmp(const void *a, const void *b) {
  const edge *x = a, *y = b;
  if (x->from != y->from) return x->from < y->from ? -1 : 1;
  if (x->to != y->to) return x->to < y->to ? -1 : 1;
  return x->v < y->v ? -1 : x->v > y->v;
}

/* The edges between units, each pair once; across devices labelled with the bytes of the
 * distinct values that cross. */
static dpc_status put_edges(const view *w, dpc_buf *b) {
  const dpc_graph *g = w->g;
  edge *e = malloc((g->n_ids ? g->n_ids : 1) * sizeof *e);
  if (!e) return DPC_ERR_NOMEM;
  uint32_t ne = 0;
  for (uint32_t i = 0; i < w->n; i++) {
    if (w->rep[i] == DPC_NONE && w->part0[i] == DPC_NONE) continue;
    for (uint32_t k = 0; k < g->nodes[i].n_in; k++) {
      uint32_t v = g->ids[g->nodes[i].in + k];
      uint32_t from = value_unit(w, v), to = reader_unit(w, i, k);
      if (from != DPC_NONE && to != DPC_NONE && from != to) e[ne++] = (edge){from, to, v};
    }
  }
  qsort(e, ne, sizeof *e, edge_cmp);
  for (uint32_t s = 0; s < ne;) {
    uint32_t t = s;
    double bytes = 0;
    for (; t < ne && e[t].from == e[s].from && e[t].to == e[s].to; t++) {
      double vb = value_bytes(g, e[t].v);
      if (t > s && e[t].v == e[t - 1].v) continue;
      bytes = bytes < 0 || vb < 0 ? -1 : bytes + vb;
    }
    dpc_buf_printf(b, "  u%u -> u%u", e[s].from, e[s].to);
    if (w->dev[e[s].from] != w->dev[e[s].to]) {
      char lbl[160];
      if (bytes >= 0)
        format_bytes(bytes, lbl, sizeof lbl);
      else
        dpc_graph_format_type(g, g->values[e[s].v].dtype, &g->values[e[s].v].shape, lbl,
                              sizeof lbl);
      dpc_buf_puts(b, " [label=");
      put_label(b, lbl);
      dpc_buf_puts(b, ", color=red, fontcolor=red, penwidth=2]");
    }
    dpc_buf_puts(b, ";\n");
    s = t;
  }
  free(e);
  /* a collective's parts, each contributing its input's bytes */
  for (uint32_t c = 0; c < w->n; c++) {
    if (w->part0[c] == DPC_NONE) continue;
    for (uint32_t k = 0; k + 1 < g->nodes[c].n_in; k++) {
      char lbl[160] = "";
      double vb = value_bytes(g, g->ids[g->nodes[c].in + k]);
      if (vb >= 0) format_bytes(vb, lbl, sizeof lbl);
      dpc_buf_printf(b,
                     "  u%u -> u%u [dir=both, style=dashed, color=red, "
                     "fontcolor=red, label=",
                     w->part0[c] + k, w->part0[c] + k + 1);
      put_label(b, lbl);
      dpc_buf_puts(b, "];\n");
    }
  }
  return DPC_OK;
}

dpc_status dpc_dot_graph_costs(const dpc_graph *g, const double *ms, dpc_buf *b) {
  view w;
  dpc_status st = view_init(&w, g, ms);
  uint32_t U = w.n_units ? w.n_units : 1;
  uint32_t *head = st ? NULL : malloc(U * sizeof *head);
  uint32_t *tail = st ? NULL : malloc(U * sizeof *tail);
  uint32_t *next = st ? NULL : malloc((w.n ? w.n : 1) * sizeof *next);
  uint32_t *devs = st ? NULL : malloc(U * sizeof *devs);
  if (!st && (!head || !tail || !next || !devs)) st = DPC_ERR_NOMEM;
  if (st) goto done;
  view_fold(&w);
  /* members of each unit, in node order */
  for (uint32_t u = 0; u < w.n_units; u++) head[u] = tail[u] = DPC_NONE;
  for (uint32_t i = 0; i < w.n; i++) {
    uint32_t u = w.part0[i] != DPC_NONE ? DPC_NONE : w.rep[i];
    next[i] = DPC_NONE;
    if (u == DPC_NONE) continue;
    if (tail[u] == DPC_NONE)
      head[u] = i;
    else
      next[tail[u]] = i;
    tail[u] = i;
  }
  bool *drawn = calloc(U, sizeof *drawn);
  if (!drawn) {
    st = DPC_ERR_NOMEM;
    goto done;
  }
  for (uint32_t i = 0; i < w.n; i++) {
    if (w.part0[i] != DPC_NONE)
      for (uint32_t k = 0; k < g->nodes[i].n_in; k++) drawn[w.part0[i] + k] = true;
    else if (w.rep[i] == i)
      drawn[i] = true;
  }
  dpc_buf_printf(b, "digraph ");
  put_label(b, g->name != DPC_NONE ? dpc_graph_str(g, g->name) : "graph");
  /* newrank: ranks across clusters, so edges between devices route without Graphviz's
   * "unable to reclaim box space" */
  dpc_buf_puts(b,
               " {\n  rankdir=TB;\n  newrank=true;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
               "  edge [fontname=\"Helvetica\", fontsize=9];\n");
  /* one cluster per device, in order of first appearance; unplaced units outside */
  uint32_t nd = 0;
  for (uint32_t u = 0; u < w.n_units; u++) {
    bool seen = !drawn[u] || w.dev[u] == DPC_NONE;
    for (uint32_t k = 0; k < nd && !seen; k++) seen = devs[k] == w.dev[u];
    if (!seen) devs[nd++] = w.dev[u];
  }
  for (uint32_t k = 0; k < nd; k++) {
    dpc_buf_printf(b, "  subgraph cluster_%u {\n    label=", k);
    put_label(b, dpc_graph_str(g, devs[k]));
    dpc_buf_puts(b, ";\n    style=filled;\n    color=\"#f3f3f3\";\n");
    for (uint32_t u = 0; u < w.n_units; u++)
      if (drawn[u] && w.dev[u] == devs[k]) put_unit(&w, u, next, head, b);
    dpc_buf_puts(b, "  }\n");
  }
  for (uint32_t u = 0; u < w.n_units; u++)
    if (drawn[u] && w.dev[u] == DPC_NONE) put_unit(&w, u, next, head, b);
  free(drawn);
  st = put_edges(&w, b);
  dpc_buf_puts(b, "}\n");
done:
  free(head), free(tail), free(next), free(devs);
  view_free(&w);
  return st ? st : b->oom ? DPC_ERR_NOMEM : DPC_OK;
}

dpc_status dpc_dot_graph(const dpc_graph *g, dpc_buf *b) {
  return dpc_dot_graph_costs(g, NULL, b);
}
