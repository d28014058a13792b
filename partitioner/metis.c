/*
 * metis.c — automatic placement with METIS k-way (the only file that includes metis.h).
 *
 * The model's graph (forward and loss, before the training passes) at the training batch is
 * seen as an undirected graph: a vertex per node with two weights — its compute (FLOPs, three
 * times the forward's for a training step) and its memory (its outputs; params four times:
 * value, gradient, optimizer state, update) — and an edge per value a node reads, weighted by
 * the value's bytes. METIS cuts it into one part per device, with target weights from the
 * devices' speeds so a faster device gets more compute, keeping the bytes that cross small.
 * Nodes the model places itself (`@ cpu:1`) keep their place. The training passes then put each
 * gradient next to the node it differentiates and each update next to its param.
 *
 * METIS knows nothing of direction, so the cut may send values from device A to B and back; the
 * executor needs no repair for that (every device runs its steps in one global topological
 * order, so a wait always refers to an earlier step and cannot deadlock), but the back-and-forth
 * costs events, which the cost figures in `dpc plan` show.
 *
 * METIS's own edge cases (TOOLCHAIN.md): one part crashes k-way, so one device is handled here;
 * with no more nodes than parts k-way degenerates, so the nodes are dealt round-robin.
 */
#include "partitioner/partitioner.h"

#include "partitioner/cost.h"

#include <metis.h>
#include <stdlib.h>
#include <string.h>

typedef struct csr {
  idx_t *xadj, *adj, *w;
  idx_t n, m;
} csr;

static void csr_free(csr *c) {
  free(c->xadj);
  free(c->adj);
  free(c->w);
}

static int cmp_edge(const void *a, const void *b) {
  const idx_t *x = a, *y = b;
  return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* The symmetric adjacency of g's data edges, duplicates merged (weights summed), no loops. */
static dpc_status build_csr(const dpc_graph *g, csr *c, dpc_diag *d) {
  memset(c, 0, sizeof *c);
  size_t cap = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) cap += 2 * (size_t)g->nodes[i].n_in;
  idx_t *e = malloc((cap ? cap : 1) * 3 * sizeof *e);
  c->xadj = calloc(g->n_nodes + 1, sizeof *c->xadj);
  if (!e || !c->xadj) {
    free(e);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory placing the graph");
  }
  size_t m = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) {
      const dpc_value *v = &g->values[dpc_node_inputs(g, n)[k]];
      uint32_t p = v->node;
      if (p == i) continue;
      /* bytes in KiB, at least 1: METIS weights are 32-bit */
      double kib = (double)dpc_shape_numel(&v->shape) * (double)dpc_dtype_size(v->dtype) / 1024;
      idx_t w = kib < 1 ? 1 : kib > 1e9 ? (idx_t)1000000000 : (idx_t)kib;
      e[3 * m] = (idx_t)p, e[3 * m + 1] = (idx_t)i, e[3 * m + 2] = w, m++;
      e[3 * m] = (idx_t)i, e[3 * m + 1] = (idx_t)p, e[3 * m + 2] = w, m++;
    }
  }
  qsort(e, m, 3 * sizeof *e, cmp_edge);
  c->adj = malloc((m ? m : 1) * sizeof *c->adj);
  c->w = malloc((m ? m : 1) * sizeof *c->w);
  if (!c->adj || !c->w) {
    free(e);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory placing the graph");
  }
  size_t out = 0;
  for (size_t k = 0; k < m; k++) {
    if (out && k && e[3 * k] == e[3 * (k - 1)] && e[3 * k + 1] == e[3 * (k - 1) + 1]) {
      c->w[out - 1] += e[3 * k + 2];
      continue;
    }
    c->adj[out] = e[3 * k + 1];
    c->w[out] = e[3 * k + 2];
    c->xadj[e[3 * k] + 1]++;
    out++;
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) c->xadj[i + 1] += c->xadj[i];
  c->n = (idx_t)g->n_nodes;
  c->m = (idx_t)out;
  free(e);
  return DPC_OK;
}

dpc_status dpc_place_metis(dpc_graph *model, int64_t batch, const char *const *devices,
                           const double *speed, uint32_t n, dpc_place_report *report, dpc_diag *d) {
  if (report) memset(report, 0, sizeof *report);
  if (n < 1) return dpc_diag_fail(d, DPC_ERR_INVALID, "placement needs at least one device");
  uint32_t *dev_id = malloc(n * sizeof *dev_id);
  if (!dev_id) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory placing the graph");
  for (uint32_t k = 0; k < n; k++) {
    dev_id[k] = dpc_graph_intern(model, devices[k], strlen(devices[k]));
    if (dev_id[k] == DPC_NONE) {
      free(dev_id);
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory placing the graph");
    }
  }
  /* costs at the training batch, on a bound copy */
  dpc_graph *g = dpc_graph_clone(model);
  int64_t *vals = g ? malloc((g->n_syms ? g->n_syms : 1) * sizeof *vals) : NULL;
  dpc_node_cost *c = g ? calloc(g->n_nodes ? g->n_nodes : 1, sizeof *c) : NULL;
  dpc_status st = g && vals && c ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; !st && k < g->n_syms; k++) vals[k] = batch;
  if (!st) st = dpc_graph_bind(g, vals, d);
  if (!st) st = dpc_cost_graph(g, c, d);
  idx_t *part = st ? NULL : malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *part);
  if (!st && !part) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory placing the graph");
  csr cs = {0};
  if (!st && n > 1 && g->n_nodes > n) {
    st = build_csr(g, &cs, d);
    idx_t ncon = 2, np = (idx_t)n, objval = 0;
    idx_t *vw = st ? NULL : malloc((size_t)g->n_nodes * 2 * sizeof *vw);
    real_t *tp = st ? NULL : malloc((size_t)n * 2 * sizeof *tp);
    real_t ub[2] = {1.05f, 1.10f};
    if (!st && (!vw || !tp)) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    double total = 0;
    for (uint32_t k = 0; !st && k < n; k++) total += speed && speed[k] > 0 ? speed[k] : 1;
    for (uint32_t k = 0; !st && k < n; k++) {
      tp[2 * k] = (real_t)((speed && speed[k] > 0 ? speed[k] : 1) / total); /* compute */
      tp[2 * k + 1] = (real_t)(1.0 / n);                                    /* memory */
    }
    for (uint32_t i = 0; !st && i < g->n_nodes; i++) {
      bool param = g->nodes[i].op == DPC_OP_PARAM;
      double f = c[i].flops * 3 / 1e3, mem = c[i].memory * (param ? 4 : 1) / 1024;
      vw[2 * i] = f < 1 ? 1 : f > 1e9 ? (idx_t)1000000000 : (idx_t)f;
      vw[2 * i + 1] = mem < 1 ? 1 : mem > 1e9 ? (idx_t)1000000000 : (idx_t)mem;
    }
    if (!st) {
      idx_t opts[METIS_NOPTIONS];
      METIS_SetDefaultOptions(opts);
      opts[METIS_OPTION_NUMBERING] = 0;
      opts[METIS_OPTION_SEED] = 1; /* the same placement every time */
      int rc = METIS_PartGraphKway(&cs.n, &ncon, cs.xadj, cs.adj, vw, NULL, cs.w, &np, tp, ub, opts,
                                   &objval, part);
      if (rc != METIS_OK)
        st = dpc_diag_fail(d, DPC_ERR_RUNTIME, "METIS could not partition the graph (code %d)", rc);
      if (report) report->cut_kib = (double)objval;
    }
    free(vw);
    free(tp);
  } else if (!st) {
    for (uint32_t i = 0; i < g->n_nodes; i++) part[i] = (idx_t)(n > 1 ? i % n : 0);
  }
  /* the model's own placement wins; the rest take their part's device */
  for (uint32_t i = 0; !st && i < model->n_nodes; i++) {
    dpc_node *nd = &model->nodes[i];
    if (nd->device == DPC_NONE)
      nd->device = dev_id[part[i] >= 0 && (uint32_t)part[i] < n ? part[i] : 0];
    if (report)
      for (uint32_t k = 0; k < n; k++)
        if (nd->device == dev_id[k]) report->flops[k < 16 ? k : 15] += c[i].flops;
  }
  csr_free(&cs);
  free(part);
  free(c);
  free(vals);
  dpc_graph_free(g);
  free(dev_id);
  return st;
}

dpc_status dpc_place_simple(dpc_graph *model, int64_t batch, const char *const *devices, uint32_t n,
                            bool contiguous, dpc_diag *d) {
  if (n < 1) return dpc_diag_fail(d, DPC_ERR_INVALID, "placement needs at least one device");
  dpc_graph *g = dpc_graph_clone(model);
  int64_t *vals = g ? malloc((g->n_syms ? g->n_syms : 1) * sizeof *vals) : NULL;
  dpc_node_cost *c = g ? calloc(g->n_nodes ? g->n_nodes : 1, sizeof *c) : NULL;
  dpc_status st = g && vals && c ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; !st && k < g->n_syms; k++) vals[k] = batch;
  if (!st) st = dpc_graph_bind(g, vals, d);
  if (!st) st = dpc_cost_graph(g, c, d);
  double total = 0, run = 0;
  for (uint32_t i = 0; !st && i < g->n_nodes; i++) total += c[i].flops;
  for (uint32_t i = 0; !st && i < model->n_nodes; i++) {
    dpc_node *nd = &model->nodes[i];
    /* contiguous: the node's device is where the FLOPs before it end, as a layer split does */
    uint32_t k = contiguous ? (uint32_t)(total > 0 ? run / total * n : 0) : i % n;
    run += c[i].flops;
    if (k >= n) k = n - 1;
    if (nd->device == DPC_NONE) {
      nd->device = dpc_graph_intern(model, devices[k], strlen(devices[k]));
      if (nd->device == DPC_NONE) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    }
  }
  free(c);
  free(vals);
  dpc_graph_free(g);
  return st;
}
