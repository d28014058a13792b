/*
 * chains.c — improve a placement by moving whole chains of nodes between devices, each trial
 * repaired and scored by the caller (see partitioner.h).
 *
 * METIS weighs bytes against balance on an undirected graph, so it keeps a stem and the
 * branches it feeds together to save the stem's bytes, while the simulator may find the
 * branches are worth sending those bytes for: run side by side, they finish sooner. Single-node
 * moves cannot see that (moving one convolution of a branch away from its neighbours only adds
 * traffic), but moving a branch can. A chain is a run of nodes each of which is the only reader
 * of the one before and reads nothing else computed (a branch, a layer's matmul, add and relu);
 * each chain is tried on every other device, the result repaired so values still flow one way,
 * and kept when the placement is better (dpc_place_better). When no single move gains, pairs of
 * chains on different devices trade places: moving a branch onto the device of the head that reads
 * it, and the head onto the stem's, can gain where either move alone does not.
 *
 * Devices that hold nothing and are twins (the same speed and memory limit) are interchangeable:
 * a chain scores the same on any of them, so only the first is tried. A small model on many
 * devices leaves most of them empty, and this keeps the trials per sweep to the chains times the
 * devices in use (plus one per kind of empty device), not times all of them: at 256 devices,
 * seconds instead of a minute.
 */
#include "partitioner/partitioner.h"

#include <stdlib.h>
#include <string.h>

/* Non-source producers of node i's inputs: how many, and the last. */
static uint32_t computed_inputs(const dpc_graph *g, uint32_t i, uint32_t *last) {
  const dpc_node *nd = &g->nodes[i];
  uint32_t count = 0;
  for (uint32_t k = 0; k < nd->n_in; k++) {
    uint32_t p = g->values[dpc_node_inputs(g, nd)[k]].node;
    if (g->nodes[p].n_in == 0) continue;
    if (count && p == *last) continue;
    *last = p, count++;
  }
  return count;
}

enum { MAX_SWEEPS = 8 };

typedef struct mover {
  const dpc_graph *g;
  const dpc_repair_in *in;
  int32_t *part; /* the placement kept */
  dpc_place_trial_fn trial;
  void *ctx;
  dpc_place_report *rep;
  int32_t *t;            /* the trial placement */
  const uint32_t *chain; /* head of each node's chain */
  uint32_t *moves;
} mover;

/* Put chain h on device `to` in the trial placement; false when nothing moves. */
static bool place_chain(mover *m, uint32_t h, uint32_t to) {
  bool any = false;
  for (uint32_t i = h; i < m->g->n_nodes; i++)
    if (m->chain[i] == h && !m->in->fixed[i] && m->t[i] != (int32_t)to)
      m->t[i] = (int32_t)to, any = true;
  return any;
}

/* Repair and score the trial placement; keep it when it is better (dpc_place_better). */
static dpc_status try_trial(mover *m, bool *improved, dpc_diag *d) {
  dpc_place_report r = {0};
  double s = 0, busiest = 0;
  dpc_status st = dpc_place_repair(m->g, m->in, m->t, &r, d);
  if (!st) st = m->trial(m->ctx, m->t, &s, &busiest, d);
  if (!st && dpc_place_better(s, busiest, m->rep->score, m->rep->busiest)) {
    memcpy(m->part, m->t, m->g->n_nodes * sizeof *m->t);
    r.score = s, r.busiest = busiest, r.cut_kib = m->rep->cut_kib;
    *m->rep = r;
    *improved = true;
    (*m->moves)++;
  }
  return st;
}

bool dpc_place_better(double a_score, double a_busiest, double b_score, double b_busiest) {
  if (a_score < b_score * 0.995) return true;
  return a_busiest > 0 && b_busiest > 0 && a_score < b_score * 1.005 &&
         a_busiest < b_busiest * 0.95;
}

dpc_status dpc_place_move_chains(const dpc_graph *g, const dpc_repair_in *in, int32_t *part,
                                 dpc_place_trial_fn trial, void *ctx, dpc_place_report *rep,
                                 dpc_diag *d) {
  uint32_t n = g->n_nodes, P = in->n_parts;
  uint32_t *readers = calloc(n ? n : 1, sizeof *readers), *chain = calloc(n ? n : 1, sizeof *chain);
  int32_t *t = malloc((n ? n : 1) * sizeof *t);
  uint32_t *used = calloc(P ? P : 1, sizeof *used), *tried = calloc(P ? P : 1, sizeof *tried);
  if (!readers || !chain || !t || !used || !tried) {
    free(readers), free(chain), free(t), free(used), free(tried);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory improving the placement");
  }
  /* readers of each node among the computed nodes, counted once per reader */
  for (uint32_t i = 0; i < n; i++) {
    const dpc_node *nd = &g->nodes[i];
    for (uint32_t k = 0; k < nd->n_in; k++) {
      uint32_t p = g->values[dpc_node_inputs(g, nd)[k]].node, dup = 0;
      for (uint32_t j = 0; j < k; j++) dup |= g->values[dpc_node_inputs(g, nd)[j]].node == p;
      if (!dup && nd->n_in) readers[p]++;
    }
  }
  /* chain[i]: the head of the chain node i belongs to (sources: none) */
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = DPC_NONE;
    chain[i] = i;
    if (g->nodes[i].n_in == 0)
      chain[i] = DPC_NONE;
    else if (computed_inputs(g, i, &p) == 1 && readers[p] == 1 && chain[p] != DPC_NONE)
      chain[i] = chain[p];
  }
  dpc_status st = DPC_OK;
  uint32_t moves = 0;
  /* a trial keeps its move: refinement would move the chain back to save its bytes */
  dpc_repair_in order_only = *in;
  order_only.memory_only = true;
  mover mv = {g, &order_only, part, trial, ctx, rep, t, chain, &moves};
  uint32_t visit = 0; /* stamps `tried`: the kinds of empty device tried for this chain */
  for (uint32_t sweep = 0; !st && sweep < MAX_SWEEPS; sweep++) {
    bool improved = false;
    for (uint32_t h = 0; !st && h < n; h++) {
      if (chain[h] != h) continue;
      visit++;
      for (uint32_t to = 0, kept = UINT32_MAX; !st && to < P; to++) {
        if (kept != moves) { /* the devices in use, again after a move is kept */
          memset(used, 0, P * sizeof *used);
          for (uint32_t i = 0; i < n; i++) used[part[i]]++;
          kept = moves;
        }
        if (!used[to]) {
          uint32_t kind = in->twin ? in->twin[to] : to;
          if (tried[kind] == visit) continue;
          tried[kind] = visit;
        }
        memcpy(t, part, n * sizeof *t);
        if (place_chain(&mv, h, to)) st = try_trial(&mv, &improved, d);
      }
    }
    /* two chains trading devices: a light branch for the head beside the stem, say, where
     * either move alone gains nothing (each device would do both for a while) */
    for (uint32_t h = 0; !st && !improved && h < n; h++) {
      if (chain[h] != h) continue;
      for (uint32_t k = h + 1; !st && k < n; k++) {
        if (chain[k] != k || part[h] == part[k]) continue;
        memcpy(t, part, n * sizeof *t);
        bool a = place_chain(&mv, h, (uint32_t)part[k]), b = place_chain(&mv, k, (uint32_t)part[h]);
        if (a && b) st = try_trial(&mv, &improved, d);
      }
    }
    if (!improved) break;
  }
  rep->chain_moves = moves;
  free(readers), free(chain), free(t), free(used), free(tried);
  return st;
}
