/*
 * repair.c — make a placement's stage graph acyclic, then refine it (see partitioner.h).
 *
 * METIS cuts an undirected graph, so its parts may pass values A -> B -> A. A pipeline needs
 * stages in a line, and even model parallel pays an event and a stall for each return trip. So
 * the parts get an order (a rank each) and every node must sit at a rank no lower than any of
 * its inputs' producers: walking the nodes in topological order, a node below one of its inputs
 * moves up to that input's rank. Of the parts' orders (all of them up to 6 parts; past that, by
 * where their nodes sit in the graph on average) the one that moves the least compute wins.
 *
 * Sources (params, inputs, constants) have no inputs and are read by whoever needs them, so
 * they do not take part: each goes to the lowest rank among its readers — next to its reader
 * when it has one, as METIS would have wished, and never against the order.
 *
 * Refinement then moves single nodes between ranks while the order holds (a node may go
 * anywhere between its latest input's rank and its earliest reader's), taking a node's
 * private sources with it (a weight read by that node alone), to:
 *   1. bring a part over its memory limit under it, at the least cut cost per move;
 *   2. cut fewer bytes without leaving a part above its compute share (5% slack) or limit;
 *   3. at equal bytes, relieve a part above its compute share (as the order's repair may leave).
 * Nodes the model placed itself never move; if their placement is cyclic it stays so.
 */
#include "partitioner/partitioner.h"

#include <stdlib.h>
#include <string.h>

typedef struct rep {
  const dpc_graph *g;
  const dpc_repair_in *in;
  uint32_t n, P;
  bool *src;
  uint32_t *succ_off, *succ; /* the readers of each node's output(s), CSR */
  double *bytes;             /* bytes of each node's outputs (what a cut edge moves) */
  uint32_t *rank;            /* current rank of each node */
  double *load, *mem, *cap;  /* per rank: compute, memory, compute cap */
  double *limit;             /* per rank: memory limit (0 none) */
  uint32_t *seen, stamp;     /* per rank: the last crossings() count that met it */
} rep;

static uint32_t pred_of(const rep *r, uint32_t i, uint32_t k) {
  const dpc_node *nd = &r->g->nodes[i];
  return r->g->values[dpc_node_inputs(r->g, nd)[k]].node;
}

static dpc_status build(rep *r, dpc_diag *d) {
  const dpc_graph *g = r->g;
  uint32_t n = r->n;
  r->src = calloc(n ? n : 1, sizeof *r->src);
  r->succ_off = calloc(n + 1, sizeof *r->succ_off);
  r->bytes = calloc(n ? n : 1, sizeof *r->bytes);
  r->rank = calloc(n ? n : 1, sizeof *r->rank);
  size_t P = r->P;
  r->load = calloc(P, sizeof *r->load), r->mem = calloc(P, sizeof *r->mem);
  r->cap = calloc(P, sizeof *r->cap), r->limit = calloc(P, sizeof *r->limit);
  r->seen = calloc(P, sizeof *r->seen);
  if (!r->src || !r->succ_off || !r->bytes || !r->rank || !r->load || !r->mem || !r->cap ||
      !r->limit || !r->seen)
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory repairing the placement");
  size_t m = 0;
  for (uint32_t i = 0; i < n; i++) {
    const dpc_node *nd = &g->nodes[i];
    r->src[i] = nd->n_in == 0;
    for (uint32_t k = 0; k < nd->n_out; k++) {
      const dpc_value *v = &g->values[nd->out + k];
      r->bytes[i] += (double)dpc_shape_numel(&v->shape) * (double)dpc_dtype_size(v->dtype);
    }
    for (uint32_t k = 0; k < nd->n_in; k++) {
      uint32_t p = pred_of(r, i, k);
      if (p != i) r->succ_off[p + 1]++, m++;
    }
  }
  for (uint32_t i = 0; i < n; i++) r->succ_off[i + 1] += r->succ_off[i];
  r->succ = malloc((m ? m : 1) * sizeof *r->succ);
  uint32_t *fill = calloc(n ? n : 1, sizeof *fill);
  if (!r->succ || !fill) {
    free(fill);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory repairing the placement");
  }
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < g->nodes[i].n_in; k++) {
      uint32_t p = pred_of(r, i, k);
      if (p != i) r->succ[r->succ_off[p] + fill[p]++] = i;
    }
  free(fill);
  return DPC_OK;
}

static void rep_free(rep *r) {
  free(r->src), free(r->succ_off), free(r->succ), free(r->bytes), free(r->rank);
  free(r->load), free(r->mem), free(r->cap), free(r->limit), free(r->seen);
}

/* Each movable source to the lowest rank of its readers. */
static void place_sources(rep *r) {
  for (uint32_t i = 0; i < r->n; i++) {
    if (!r->src[i] || r->in->fixed[i] || r->succ_off[i] == r->succ_off[i + 1]) continue;
    uint32_t lo = r->P;
    for (uint32_t e = r->succ_off[i]; e < r->succ_off[i + 1]; e++)
      if (r->rank[r->succ[e]] < lo) lo = r->rank[r->succ[e]];
    r->rank[i] = lo;
  }
}

/* Ranks under the part order pos[part] -> rank; returns the compute moved. */
static double order_ranks(rep *r, const int32_t *part, const uint32_t *pos, uint32_t *moved) {
  double cost = 0;
  *moved = 0;
  for (uint32_t i = 0; i < r->n; i++) {
    uint32_t want = pos[part[i]];
    r->rank[i] = want;
    if (r->src[i] || r->in->fixed[i]) continue;
    for (uint32_t k = 0; k < r->g->nodes[i].n_in; k++) {
      uint32_t p = pred_of(r, i, k);
      if (!r->src[p] && r->rank[p] > r->rank[i]) r->rank[i] = r->rank[p];
    }
    if (r->rank[i] != want) cost += r->in->compute[i] + 1e-9, (*moved)++;
  }
  place_sources(r);
  return cost;
}

static bool next_perm(uint32_t *a, uint32_t n) {
  int i = (int)n - 2;
  while (i >= 0 && a[i] >= a[i + 1]) i--;
  if (i < 0) return false;
  int j = (int)n - 1;
  while (a[j] <= a[i]) j--;
  uint32_t t = a[i];
  a[i] = a[j], a[j] = t;
  for (uint32_t l = (uint32_t)i + 1, h = n - 1; l < h; l++, h--) t = a[l], a[l] = a[h], a[h] = t;
  return true;
}

static int cmp_mean(const void *a, const void *b) {
  const double *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Choose the part order; leaves r->rank at the best order's ranks and fills order[rank]. */
static dpc_status choose_order(rep *r, const int32_t *part, uint32_t *order, dpc_place_report *out,
                               dpc_diag *d) {
  uint32_t P = r->P, *pos = malloc(P * sizeof *pos), *perm = malloc(P * sizeof *perm);
  double *mean = calloc(2 * (size_t)P, sizeof *mean);
  if (!pos || !perm || !mean) {
    free(pos), free(perm), free(mean);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory repairing the placement");
  }
  for (uint32_t k = 0; k < P; k++) perm[k] = k;
  uint32_t moved = 0, best_moved = 0;
  if (P <= 6) {
    double best = -1;
    do {
      for (uint32_t k = 0; k < P; k++) pos[perm[k]] = k;
      double c = order_ranks(r, part, pos, &moved);
      if (best < 0 || c < best) best = c, best_moved = moved, memcpy(order, perm, P * sizeof *perm);
    } while (best > 0 && next_perm(perm, P));
  } else { /* by the mean position of each part's nodes */
    double *cnt = calloc(P, sizeof *cnt);
    if (!cnt) {
      free(pos), free(perm), free(mean);
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory repairing the placement");
    }
    for (uint32_t i = 0; i < r->n; i++)
      if (!r->src[i]) mean[2 * part[i]] += i, cnt[part[i]]++;
    for (uint32_t k = 0; k < P; k++)
      mean[2 * k] = cnt[k] ? mean[2 * k] / cnt[k] : (double)r->n, mean[2 * k + 1] = k;
    free(cnt);
    qsort(mean, P, 2 * sizeof *mean, cmp_mean);
    for (uint32_t k = 0; k < P; k++) order[k] = (uint32_t)mean[2 * k + 1];
  }
  for (uint32_t k = 0; k < P; k++) pos[order[k]] = k;
  order_ranks(r, part, pos, &moved);
  if (P <= 6) moved = best_moved;
  if (out) out->moved_for_order = moved;
  free(pos), free(perm), free(mean);
  return DPC_OK;
}

/* The rank range node i may take with the order kept. */
static void range(const rep *r, uint32_t i, uint32_t *lo, uint32_t *hi) {
  *lo = 0, *hi = r->P - 1;
  for (uint32_t k = 0; k < r->g->nodes[i].n_in; k++) {
    uint32_t p = pred_of(r, i, k);
    if (!r->src[p] && r->rank[p] > *lo) *lo = r->rank[p];
  }
  for (uint32_t e = r->succ_off[i]; e < r->succ_off[i + 1]; e++)
    if (r->rank[r->succ[e]] < *hi) *hi = r->rank[r->succ[e]];
}

/* Whether source s is read by node i alone (it then moves with i). */
static bool private_source(const rep *r, uint32_t s, uint32_t i) {
  if (!r->src[s] || r->in->fixed[s]) return false;
  for (uint32_t e = r->succ_off[s]; e < r->succ_off[s + 1]; e++)
    if (r->succ[e] != i) return false;
  return true;
}

/* The ranks other than its own that read node p's output, with node i placed at `at`: a value
 * crosses once to each rank that reads it, however many of its readers are there. A rank is
 * counted once by marking it with this call's stamp, so any number of ranks costs no more than
 * the readers. */
static uint32_t crossings(rep *r, uint32_t p, uint32_t i, uint32_t at) {
  if (++r->stamp == 0) { /* wrapped: old marks could read as this call's */
    memset(r->seen, 0, r->P * sizeof *r->seen);
    r->stamp = 1;
  }
  uint32_t own = p == i ? at : r->rank[p], count = 0;
  for (uint32_t e = r->succ_off[p]; e < r->succ_off[p + 1]; e++) {
    uint32_t s = r->succ[e], k = s == i ? at : r->rank[s];
    if (k != own && r->seen[k] != r->stamp) r->seen[k] = r->stamp, count++;
  }
  return count;
}

/* Bytes that cross ranks through node i's inputs and outputs if it sat at rank `at` (its
 * private sources with it). */
static double cut_at(rep *r, uint32_t i, uint32_t at) {
  double cut = r->bytes[i] * crossings(r, i, i, at);
  const dpc_node *nd = &r->g->nodes[i];
  for (uint32_t k = 0; k < nd->n_in; k++) {
    uint32_t p = pred_of(r, i, k), dup = 0;
    for (uint32_t j = 0; j < k; j++) dup |= pred_of(r, i, j) == p;
    if (!dup && !private_source(r, p, i)) cut += r->bytes[p] * crossings(r, p, i, at);
  }
  return cut;
}

static double group_mem(const rep *r, uint32_t i) {
  double m = r->in->memory[i];
  for (uint32_t k = 0; k < r->g->nodes[i].n_in; k++) {
    uint32_t p = pred_of(r, i, k);
    if (private_source(r, p, i)) m += r->in->memory[p];
  }
  return m;
}

static void tally(rep *r) {
  memset(r->load, 0, r->P * sizeof *r->load);
  memset(r->mem, 0, r->P * sizeof *r->mem);
  for (uint32_t i = 0; i < r->n; i++)
    r->load[r->rank[i]] += r->in->compute[i], r->mem[r->rank[i]] += r->in->memory[i];
}

static void move(rep *r, uint32_t i, uint32_t to) {
  for (uint32_t k = 0; k < r->g->nodes[i].n_in; k++) {
    uint32_t p = pred_of(r, i, k);
    if (private_source(r, p, i)) r->rank[p] = to;
  }
  r->rank[i] = to;
}

static bool over(const rep *r, uint32_t k) {
  return r->limit[k] > 0 && r->mem[k] > r->limit[k];
}

/* One sweep over the movable nodes; returns the moves made. */
static uint32_t sweep(rep *r) {
  uint32_t moves = 0;
  for (uint32_t i = 0; i < r->n; i++) {
    if (r->src[i] || r->in->fixed[i]) continue;
    uint32_t lo, hi, from = r->rank[i];
    range(r, i, &lo, &hi);
    if (lo == hi) continue;
    double c = r->in->compute[i], m = group_mem(r, i), here = cut_at(r, i, from);
    double best_score = 0;
    uint32_t best = from;
    for (uint32_t to = lo; to <= hi; to++) {
      if (to == from) continue;
      if (r->limit[to] > 0 && r->mem[to] + m > r->limit[to]) continue;
      double gain = here - cut_at(r, i, to); /* bytes no longer cut */
      double ratio_to = (r->load[to] + c) / r->cap[to], ratio_from = r->load[from] / r->cap[from];
      bool balanced = ratio_to <= 1.05 || ratio_to < ratio_from;
      double score;
      if (over(r, from))
        score = 1e18 + gain; /* any move that frees memory, the cheapest first */
      else if (!balanced || over(r, to) || r->in->memory_only)
        continue;
      else if (gain > 0)
        score = gain;
      else if (gain == 0 && ratio_from > 1.05 && ratio_to < ratio_from && c > 0)
        score = 1e-9 * (ratio_from - ratio_to); /* relieves a part above its share */
      else
        continue;
      if (best == from || score > best_score) best = to, best_score = score;
    }
    if (best == from) continue;
    r->load[from] -= c, r->load[best] += c, r->mem[from] -= m, r->mem[best] += m;
    move(r, i, best);
    moves++;
  }
  return moves;
}

dpc_status dpc_place_repair(const dpc_graph *g, const dpc_repair_in *in, int32_t *part,
                            dpc_place_report *out, dpc_diag *d) {
  rep r = {.g = g, .in = in, .n = g->n_nodes, .P = in->n_parts};
  if (r.P < 2) return DPC_OK;
  if (r.P > DPC_MAX_DEVICES) /* the report has an entry per device */
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "automatic placement handles at most %u devices, not %u", DPC_MAX_DEVICES,
                         r.P);
  dpc_status st = build(&r, d);
  uint32_t *order = st ? NULL : malloc(r.P * sizeof *order);
  if (!st && !order) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory repairing the placement");
  if (!st) st = choose_order(&r, part, order, out, d);
  if (!st) {
    double total = 0;
    for (uint32_t i = 0; i < r.n; i++) total += in->compute[i];
    for (uint32_t k = 0; k < r.P; k++) {
      r.cap[k] = in->target[order[k]] * total;
      if (r.cap[k] <= 0) r.cap[k] = 1e-30;
      r.limit[k] = in->mem_limit ? in->mem_limit[order[k]] : 0;
    }
    tally(&r);
    /* a chain frees memory one boundary node per sweep; otherwise a few sweeps settle it */
    for (uint32_t pass = 0; pass < r.n + 8; pass++) {
      bool any_over = false;
      for (uint32_t k = 0; k < r.P; k++) any_over |= over(&r, k);
      if (!sweep(&r) || (!any_over && pass >= 8)) break;
      place_sources(&r);
      tally(&r);
    }
    if (out) {
      out->compute_ratio = out->over_limit = out->cut_bytes = 0;
      for (uint32_t k = 0; k < r.P; k++) {
        double cr = r.load[k] / r.cap[k];
        if (cr > out->compute_ratio) out->compute_ratio = cr;
        if (over(&r, k)) out->over_limit += r.mem[k] - r.limit[k];
      }
      for (uint32_t i = 0; i < r.n; i++)
        out->cut_bytes += r.bytes[i] * crossings(&r, i, i, r.rank[i]);
      for (uint32_t k = 0; k < r.P; k++) out->memory[order[k]] = r.mem[k];
      out->order_kept = true;
      for (uint32_t i = 0; i < r.n; i++)
        for (uint32_t k = 0; k < g->nodes[i].n_in; k++)
          if (r.rank[pred_of(&r, i, k)] > r.rank[i]) out->order_kept = false;
    }
    for (uint32_t i = 0; i < r.n; i++) part[i] = (int32_t)order[r.rank[i]];
  }
  free(order);
  rep_free(&r);
  return st;
}
