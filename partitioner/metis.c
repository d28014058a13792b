/*
 * metis.c — automatic placement with METIS k-way (the only file that includes metis.h).
 *
 * The model's graph (forward and loss, before the training passes) at the training batch is
 * seen as an undirected graph: a vertex per node with two weights — its compute (the cost
 * model's roofline time, at the devices' mean speed, of the kernels a training step runs for
 * it: the node, its gradient, its update; a small convolution is bound by memory, and its
 * gradients cost more than twice its forward) and its memory (its outputs; params four times:
 * value, gradient, optimizer state, update) — and an edge per value a node reads, weighted by
 * the value's bytes. METIS cuts it into one part per device, with target weights from the
 * devices' speeds so a faster device gets more compute, keeping the bytes that cross small.
 * Nodes the model places itself (`@ cpu:1`) keep their place. The training passes then put each
 * gradient next to the node it differentiates and each update next to its param.
 *
 * METIS knows nothing of direction, so its cut may send values from device A to B and back;
 * dpc_place_repair (repair.c) then orders the devices so every value flows forward, moves the
 * nodes that would flow back, brings devices under their memory limits and refines the cut.
 *
 * METIS's own edge cases (TOOLCHAIN.md): one part crashes k-way, so one device is handled here;
 * with no more nodes than parts k-way degenerates, so the nodes are dealt round-robin.
 */
#include "partitioner/partitioner.h"

#include "partitioner/cost.h"
#include "passes/pass.h"

#include <metis.h>
#include <stdio.h>
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

/* The bytes a node holds in a training step: its outputs; a param four times (value, gradient,
 * optimizer state, update). */
static double node_memory(const dpc_graph *g, const dpc_node_cost *c, uint32_t i) {
  return c[i].memory * (g->nodes[i].op == DPC_OP_PARAM ? 4 : 1);
}

/* Each node's share of a training step, in seconds at speed s: the kernels the training passes
 * make for it (the node, its gradient, its param's update). The passes put every node they add
 * on the device of the node it serves, so each node is given a device of its own ("#i") on a
 * copy, and the training graph's kernels are summed by device. False when the passes fail (the
 * caller then takes three times the forward's time). */
static bool training_cost(const dpc_graph *model, int64_t batch, const dpc_device_speed *s,
                          double *comp) {
  dpc_graph *g = dpc_graph_clone(model);
  dpc_diag d;
  dpc_diag_init(&d);
  bool ok = g != NULL;
  for (uint32_t i = 0; ok && i < model->n_nodes; i++) {
    char tag[24];
    int len = snprintf(tag, sizeof tag, "#%u", i);
    g->nodes[i].device = dpc_graph_intern(g, tag, (size_t)len);
    ok = g->nodes[i].device != DPC_NONE;
  }
  dpc_pass_opts po = {.training = true};
  ok = ok && dpc_optimizer_default_horizon(g, &d) == DPC_OK && dpc_passes_run(g, &po, &d) == DPC_OK;
  int64_t *vals = ok ? malloc((g->n_syms ? g->n_syms : 1) * sizeof *vals) : NULL;
  for (uint32_t k = 0; vals && k < g->n_syms; k++) vals[k] = batch;
  ok = ok && vals && dpc_graph_bind(g, vals, &d) == DPC_OK;
  dpc_node_cost *c = ok ? calloc(g->n_nodes ? g->n_nodes : 1, sizeof *c) : NULL;
  ok = ok && c && dpc_cost_graph(g, c, &d) == DPC_OK;
  for (uint32_t i = 0; ok && i < model->n_nodes; i++) comp[i] = 0;
  for (uint32_t i = 0; ok && i < g->n_nodes; i++) {
    const char *tag = g->nodes[i].device != DPC_NONE ? dpc_graph_str(g, g->nodes[i].device) : "";
    unsigned long k = tag[0] == '#' ? strtoul(tag + 1, NULL, 10) : model->n_nodes;
    if (k < model->n_nodes) comp[k] += dpc_cost_kernel_seconds(g, c, i, s);
  }
  free(c);
  free(vals);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return ok;
}

/* One METIS k-way cut of cs into n parts with the given seed. */
static dpc_status metis_cut(const dpc_graph *g, const dpc_node_cost *c, const double *comp, csr *cs,
                            uint32_t n, const double *target, const double *mem_share, float mem_ub,
                            bool unit_edges, idx_t seed, idx_t *part, double *cut_kib,
                            dpc_diag *d) {
  idx_t ncon = 2, np = (idx_t)n, objval = 0;
  idx_t *vw = malloc((size_t)g->n_nodes * 2 * sizeof *vw);
  real_t *tp = malloc((size_t)n * 2 * sizeof *tp);
  real_t ub[2] = {1.05f, mem_ub};
  if (!vw || !tp) {
    free(vw), free(tp);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory placing the graph");
  }
  for (uint32_t k = 0; k < n; k++)
    tp[2 * k] = (real_t)target[k], tp[2 * k + 1] = (real_t)mem_share[k];
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    double f = comp[i] * 1e9, mem = node_memory(g, c, i) / 1024; /* ns, KiB */
    vw[2 * i] = f < 1 ? 1 : f > 1e9 ? (idx_t)1000000000 : (idx_t)f;
    vw[2 * i + 1] = mem < 1 ? 1 : mem > 1e9 ? (idx_t)1000000000 : (idx_t)mem;
  }
  idx_t opts[METIS_NOPTIONS];
  METIS_SetDefaultOptions(opts);
  opts[METIS_OPTION_NUMBERING] = 0;
  opts[METIS_OPTION_SEED] = seed;
  int rc = METIS_PartGraphKway(&cs->n, &ncon, cs->xadj, cs->adj, vw, NULL,
                               unit_edges ? NULL : cs->w, &np, tp, ub, opts, &objval, part);
  free(vw), free(tp);
  if (rc != METIS_OK)
    return dpc_diag_fail(d, DPC_ERR_RUNTIME, "METIS could not partition the graph (code %d)", rc);
  *cut_kib = (double)objval;
  return DPC_OK;
}

/* Whether placement a is better than b: less memory over the limits; then the busiest device's
 * compute (against its share) lower by over 5%; then the fullest device's memory lower by over
 * 10%; then fewer bytes cut — METIS's own priorities (balance first, then the cut). */
static bool better(const dpc_place_report *a, const dpc_place_report *b) {
  if (a->over_limit != b->over_limit) return a->over_limit < b->over_limit;
  if (a->compute_ratio < b->compute_ratio / 1.05) return true;
  if (b->compute_ratio < a->compute_ratio / 1.05) return false;
  return a->cut_bytes < b->cut_bytes;
}

/* METIS's cut depends on its seed, and what repair makes of a cut depends on the cut, so
 * several are made: each of 3 seeds with memory balanced tightly (10%) or loosely, and with
 * edges weighted by their bytes or all alike (a cut of a few large values, such as a stem feeding
 * four branches, can be worth its bytes when it lets the branches run side by side). The
 * caller's score (the simulator's step time) or, without one, balance and then bytes choose. */
enum { SEEDS = 3, CANDIDATES = 4 * SEEDS }; /* and, when scored, contiguous_cut's split */

/* A source's share (a param's gradient and update) joins its first reader's: repair puts each
 * source beside a reader, so balancing METIS's parts by the source itself would balance
 * something placement then undoes (a heavy weight alone in a part, its reader elsewhere). */
static void fold_sources(const dpc_graph *g, const bool *fixed, double *comp) {
  for (uint32_t j = 0; j < g->n_nodes; j++) {
    const dpc_node *nd = &g->nodes[j];
    const uint32_t *in = dpc_node_inputs(g, nd);
    for (uint32_t k = 0; k < nd->n_in; k++) {
      uint32_t p = g->values[in[k]].node;
      if (p != j && g->nodes[p].n_in == 0 && !fixed[p]) comp[j] += comp[p], comp[p] = 0;
    }
  }
}

/* The layer split a person would make: nodes in graph order, each device taking its compute
 * share. METIS balances compute and memory together, and on a small model its best cut can be
 * one heavy node apart from the rest, which the order's repair then folds into one device (a
 * pipeline stage with nothing to do); the scored search always has this split to compare. */
static void contiguous_cut(const dpc_graph *g, const double *comp, uint32_t n, const double *target,
                           idx_t *part) {
  double total = 0, run = 0, edge = target[0];
  for (uint32_t i = 0; i < g->n_nodes; i++) total += comp[i];
  uint32_t k = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    /* a node goes where the larger part of its compute falls */
    while (k + 1 < n && total > 0 && run + comp[i] / 2 > edge * total) edge += target[++k];
    part[i] = (idx_t)k;
    run += comp[i];
  }
}

/* The candidate's score: the model with the placement part applied, scored by o->score. */
static dpc_status score_candidate(const dpc_graph *model, const uint32_t *dev_id,
                                  const int32_t *part, const dpc_place_opts *o, double *score,
                                  double *busiest, dpc_diag *d) {
  dpc_graph *c = dpc_graph_clone(model);
  if (!c) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory placing the graph");
  for (uint32_t i = 0; i < c->n_nodes; i++)
    if (c->nodes[i].device == DPC_NONE) c->nodes[i].device = dev_id[part[i]];
  *score = o->score(o->score_ctx, c, busiest, d);
  dpc_graph_free(c);
  return *score < 0 ? (d->status ? d->status : DPC_ERR_INTERNAL) : DPC_OK;
}

typedef struct trial_ctx {
  const dpc_graph *model;
  const uint32_t *dev_id;
  const dpc_place_opts *o;
} trial_ctx;

static dpc_status trial_score(void *ctx, const int32_t *part, double *score, double *busiest,
                              dpc_diag *d) {
  trial_ctx *t = ctx;
  return score_candidate(t->model, t->dev_id, part, t->o, score, busiest, d);
}

/* Whether the devices are of two kinds (the host's CPU beside GPUs). */
static bool mixed_kinds(const dpc_device_speed *speed, uint32_t n) {
  for (uint32_t k = 1; speed && k < n; k++)
    if (speed[k].host != speed[0].host) return true;
  return false;
}

/* Memory shares for devices of two kinds: a GPU's limit is a small fraction of the host's, and
 * shares by limit would fill the slow CPU with what the GPUs have room for. Instead each device
 * gets the memory of its compute share, capped at its limit, the excess spread over the devices
 * still under theirs by their compute (water-filling), so the CPU takes only what does not fit. */
static void mixed_shares(const double *mem, uint32_t n_nodes, uint32_t n, const double *target,
                         const double *limit, double *share) {
  double total = 0;
  for (uint32_t i = 0; i < n_nodes; i++) total += mem[i];
  bool capped[DPC_MAX_DEVICES] = {false};
  double left = total;
  for (uint32_t round = 0; round < n && total > 0; round++) {
    double t = 0;
    for (uint32_t k = 0; k < n; k++)
      if (!capped[k]) t += target[k];
    bool more = false;
    for (uint32_t k = 0; k < n && t > 0; k++) {
      if (capped[k]) continue;
      share[k] = left * target[k] / t;
      if (limit[k] > 0 && share[k] > limit[k]) capped[k] = more = true;
    }
    if (!more) break;
    left = total;
    for (uint32_t k = 0; k < n; k++)
      if (capped[k]) share[k] = limit[k], left -= limit[k];
    if (left < 0) left = 0;
  }
  double sum = 0;
  for (uint32_t k = 0; k < n; k++)
    sum += share[k] = share[k] > total * 1e-3 ? share[k] : total * 1e-3;
  for (uint32_t k = 0; k < n && sum > 0; k++) share[k] /= sum;
}

dpc_status dpc_place_metis(dpc_graph *model, int64_t batch, const char *const *devices, uint32_t n,
                           const dpc_place_opts *o, dpc_place_report *report, dpc_diag *d) {
  static const dpc_place_opts none = {0};
  if (!o) o = &none;
  const dpc_device_speed *speed = o->speed;
  const double *mem_limit = o->mem_limit;
  if (report) memset(report, 0, sizeof *report);
  if (n < 1) return dpc_diag_fail(d, DPC_ERR_INVALID, "placement needs at least one device");
  if (n > DPC_MAX_DEVICES) /* the report has an entry per device */
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "automatic placement handles at most %u devices, not %u", DPC_MAX_DEVICES,
                         n);
  uint32_t N = model->n_nodes ? model->n_nodes : 1;
  uint32_t *dev_id = calloc(n, sizeof *dev_id);
  dpc_graph *g = dpc_graph_clone(model);
  int64_t *vals = malloc((model->n_syms ? model->n_syms : 1) * sizeof *vals);
  dpc_node_cost *c = calloc(N, sizeof *c);
  idx_t *part = malloc(N * sizeof *part);
  int32_t *p32 = malloc(N * sizeof *p32), *best = malloc(N * sizeof *best);
  bool *fixed = calloc(N, sizeof *fixed);
  double *comp = malloc(N * sizeof *comp), *mem = malloc(N * sizeof *mem);
  double *target = malloc(n * sizeof *target), *mshare = malloc(n * sizeof *mshare);
  uint32_t *twin = malloc(n * sizeof *twin);
  dpc_status st = dev_id && g && vals && c && part && p32 && best && fixed && comp && mem &&
                          target && mshare && twin
                      ? DPC_OK
                      : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory placing the graph");
  for (uint32_t k = 0; !st && k < n; k++) {
    dev_id[k] = dpc_graph_intern(model, devices[k], strlen(devices[k]));
    if (dev_id[k] == DPC_NONE) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  /* costs at the training batch, on a bound copy */
  for (uint32_t k = 0; !st && k < g->n_syms; k++) vals[k] = batch;
  if (!st) st = dpc_graph_bind(g, vals, d);
  if (!st) st = dpc_cost_graph(g, c, d);
  /* compute shares by speed; memory shares by the limits (equal without them) */
  double total = 0, mtotal = 0;
  dpc_device_speed mean = {0, 0, NULL};
  for (uint32_t k = 0; !st && k < n; k++) {
    double gf = speed && speed[k].gflops > 0 ? speed[k].gflops : 100;
    double gb = speed && speed[k].mem_gbs > 0 ? speed[k].mem_gbs : 20;
    mean.gflops += gf / n, mean.mem_gbs += gb / n;
    if (speed) mean.profile = speed[k].profile;
    total += speed && speed[k].gflops > 0 ? speed[k].gflops : 1;
    mtotal += mem_limit && mem_limit[k] > 0 ? mem_limit[k] : 0;
  }
  for (uint32_t k = 0; !st && k < n; k++) {
    target[k] = (speed && speed[k].gflops > 0 ? speed[k].gflops : 1) / total;
    mshare[k] = mtotal > 0 && mem_limit[k] > 0 ? mem_limit[k] / mtotal : 1.0 / n;
  }
  for (uint32_t i = 0; !st && i < g->n_nodes; i++) {
    mem[i] = node_memory(g, c, i);
    fixed[i] = model->nodes[i].device != DPC_NONE;
  }
  if (!st && mixed_kinds(speed, n) && mem_limit)
    mixed_shares(mem, g->n_nodes, n, target, mem_limit, mshare);
  for (uint32_t k = 0; !st && k < n; k++) /* devices alike in speed and limit are twins */
    for (twin[k] = 0; twin[k] < k; twin[k]++) {
      uint32_t j = twin[k];
      bool same_speed =
          !speed || (speed[j].gflops == speed[k].gflops && speed[j].mem_gbs == speed[k].mem_gbs &&
                     speed[j].profile == speed[k].profile);
      if (same_speed && (!mem_limit || mem_limit[j] == mem_limit[k])) break;
    }
  if (!st && !training_cost(model, batch, &mean, comp))
    for (uint32_t i = 0; i < g->n_nodes; i++) comp[i] = 3 * dpc_cost_kernel_seconds(g, c, i, &mean);
  fold_sources(g, fixed, comp);
  csr cs = {0};
  bool use_metis = n > 1 && g && g->n_nodes > n;
  if (!st && use_metis) st = build_csr(g, &cs, d);
  dpc_place_report best_rep = {0}, rep;
  idx_t n_cand = use_metis ? CANDIDATES + (o->score ? 1 : 0) : 1;
  for (idx_t cand = 0; !st && cand < n_cand; cand++) {
    memset(&rep, 0, sizeof rep);
    if (use_metis && cand == CANDIDATES)
      contiguous_cut(g, comp, n, target, part);
    else if (use_metis)
      st = metis_cut(g, c, comp, &cs, n, target, mshare, cand / SEEDS % 2 ? (float)n : 1.10f,
                     cand / (2 * SEEDS), cand % SEEDS + 1, part, &rep.cut_kib, d);
    else /* METIS crashes on one part and degenerates with no more nodes than parts */
      for (uint32_t i = 0; i < g->n_nodes; i++) part[i] = (idx_t)(n > 1 ? i % n : 0);
    /* the model's own placement wins */
    for (uint32_t i = 0; !st && i < g->n_nodes; i++) {
      p32[i] = part[i] >= 0 && (uint32_t)part[i] < n ? (int32_t)part[i] : 0;
      for (uint32_t k = 0; k < n; k++)
        if (model->nodes[i].device == dev_id[k]) p32[i] = (int32_t)k;
    }
    dpc_repair_in in = {n, false, comp, mem, fixed, target, mem_limit, twin};
    if (!st && n > 1) st = dpc_place_repair(g, &in, p32, &rep, d);
    if (!st && o->score) st = score_candidate(model, dev_id, p32, o, &rep.score, &rep.busiest, d);
    bool wins = o->score
                    ? dpc_place_better(rep.score, rep.busiest, best_rep.score, best_rep.busiest) ||
                          (rep.score == best_rep.score && rep.cut_bytes < best_rep.cut_bytes)
                    : better(&rep, &best_rep);
    if (!st && (cand == 0 || wins)) {
      best_rep = rep;
      memcpy(best, p32, g->n_nodes * sizeof *best);
    }
  }
  if (!st && o->score && n > 1) {
    trial_ctx tc = {model, dev_id, o};
    dpc_repair_in in = {n, false, comp, mem, fixed, target, mem_limit, twin};
    st = dpc_place_move_chains(g, &in, best, trial_score, &tc, &best_rep, d);
  }
  for (uint32_t i = 0; !st && i < model->n_nodes; i++) {
    dpc_node *nd = &model->nodes[i];
    if (nd->device == DPC_NONE) nd->device = dev_id[best[i]];
    for (uint32_t k = 0; k < n; k++)
      if (nd->device == dev_id[k]) best_rep.flops[k] += c[i].flops;
  }
  if (!st && report) *report = best_rep;
  csr_free(&cs);
  free(dev_id), free(vals), free(c), free(part), free(p32), free(best), free(fixed);
  free(comp), free(mem), free(target), free(mshare), free(twin);
  dpc_graph_free(g);
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
