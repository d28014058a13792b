/*
 * fuse.c — fusion: mark groups of nodes that one kernel computes (dpc_node.fused, read through
 * ir/fusion.h).
 *
 * Elementwise ops are memory-bound: run alone, each reads and writes whole tensors, so a chain
 * of k of them moves the data k times where one kernel moves it once. The same holds for the
 * bias add and activation after a matmul or conv2d: applied as the result is stored, while it
 * is in cache, they cost no pass over memory of their own.
 *
 * Groups grow backwards from a root, the last elementwise node of a chain. A producer joins
 * when it is elementwise with the root's shape (or, with DPC_FUSE_EPILOGUE, a matmul or conv2d
 * with the root's shape and dtype, at most one per group), every use of its value is inside the
 * group, and the value is not an output, update or the loss: so nothing outside ever needs it
 * stored. Candidates are visited in decreasing node order, which means all of a value's users
 * (they come later) have decided before its producer does. Reductions that pay for fusion
 * (softmax, log-softmax, layer norm, softmax cross-entropy) are single ops already, each one
 * kernel by construction.
 */
#include "passes/pass.h"

#include <stdlib.h>
#include <string.h>

/* Kernel arguments stay few, and groups small enough to read in a dump. */
#define MAX_GROUP_INPUTS 16
#define MAX_GROUP_NODES  32

typedef struct fuser {
  dpc_graph *g;
  unsigned fuse;
  uint32_t *uses;   /* per value: reads by nodes */
  uint32_t *inside; /* per value: reads by the current group */
  bool *pinned;     /* per value: an output, update or the loss */
  bool *cand;       /* per node: feeds the current group */
  uint32_t n_inputs, n_nodes;
  bool anchored;
} fuser;

static bool is_anchor_op(dpc_op op) {
  return op == DPC_OP_MATMUL || op == DPC_OP_CONV2D;
}

static bool can_join(const fuser *f, uint32_t root, uint32_t p) {
  const dpc_graph *g = f->g;
  const dpc_node *n = &g->nodes[p], *r = &g->nodes[root];
  if (n->fused != DPC_NONE || n->n_out != 1 || n->device != r->device) return false;
  const dpc_value *v = &g->values[n->out], *rv = &g->values[r->out];
  if (f->pinned[n->out] || f->inside[n->out] != f->uses[n->out]) return false;
  if (!dpc_shape_eq(&v->shape, &rv->shape)) return false;
  if (f->n_nodes + 1 > MAX_GROUP_NODES || f->n_inputs - 1 + n->n_in > MAX_GROUP_INPUTS)
    return false;
  if (dpc_op_has(n->op, DPC_OPF_ELEMWISE)) return true;
  /* an anchor writes its result into the root's buffer, so it must have the root's dtype; a
   * matmul's epilogue works on rows and columns, so its operands are matrices (or batches) */
  if (!(f->fuse & DPC_FUSE_EPILOGUE) || !is_anchor_op(n->op) || f->anchored ||
      v->dtype != DPC_F32 || rv->dtype != DPC_F32)
    return false;
  for (uint32_t k = 0; k < n->n_in; k++)
    if (g->values[g->ids[n->in + k]].shape.rank < 2) return false;
  return true;
}

/* Mark what feeds node i as candidates, and count its reads as the group's. */
static void take_inputs(fuser *f, uint32_t i, uint32_t *lowest) {
  const dpc_node *n = &f->g->nodes[i];
  for (uint32_t k = 0; k < n->n_in; k++) {
    uint32_t v = f->g->ids[n->in + k], p = f->g->values[v].node;
    f->inside[v]++;
    f->n_inputs++;
    if (!dpc_op_has(f->g->nodes[p].op, DPC_OPF_SOURCE)) f->cand[p] = true;
    if (p < *lowest) *lowest = p;
  }
}

static void grow(fuser *f, uint32_t root) {
  dpc_graph *g = f->g;
  f->n_inputs = 0;
  f->n_nodes = 1;
  f->anchored = false;
  uint32_t lowest = root;
  take_inputs(f, root, &lowest);
  for (uint32_t i = root; i-- > lowest;) {
    if (!f->cand[i]) continue;
    f->cand[i] = false;
    if (!can_join(f, root, i)) continue;
    g->nodes[i].fused = root;
    f->n_nodes++;
    f->n_inputs--; /* its value is read inside now */
    if (dpc_op_has(g->nodes[i].op, DPC_OPF_ELEMWISE)) {
      take_inputs(f, i, &lowest);
    } else {
      /* an anchor's inputs are read before the group starts: never members */
      f->anchored = true;
      f->n_inputs += g->nodes[i].n_in;
    }
  }
  /* reset the per-group counts for the next root */
  for (uint32_t i = lowest; i <= root; i++) {
    f->cand[i] = false;
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) f->inside[g->ids[n->in + k]] = 0;
  }
}

dpc_status dpc_pass_fuse(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d) {
  for (uint32_t i = 0; i < g->n_nodes; i++) g->nodes[i].fused = DPC_NONE;
  if (!(o->fuse & DPC_FUSE_ELEMWISE) || g->n_nodes == 0) return DPC_OK;
  size_t nv = g->n_values ? g->n_values : 1;
  fuser f = {g,
             o->fuse,
             calloc(nv, sizeof(uint32_t)),
             calloc(nv, sizeof(uint32_t)),
             calloc(nv, sizeof(bool)),
             calloc(g->n_nodes, sizeof(bool)),
             0,
             0,
             false};
  dpc_status st = DPC_OK;
  if (!f.uses || !f.inside || !f.pinned || !f.cand) {
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory fusing");
    goto done;
  }
  for (uint32_t i = 0; i < g->n_nodes; i++)
    for (uint32_t k = 0; k < g->nodes[i].n_in; k++) f.uses[g->ids[g->nodes[i].in + k]]++;
  for (uint32_t i = 0; i < g->n_outputs; i++) f.pinned[g->outputs[i]] = true;
  for (uint32_t i = 0; i < g->n_updates; i++)
    f.pinned[g->updates[i].value] = f.pinned[g->updates[i].target] = true;
  if (g->obj.loss != DPC_NONE) f.pinned[g->obj.loss] = true;
  for (uint32_t r = g->n_nodes; r-- > 0;) {
    const dpc_node *n = &g->nodes[r];
    if (n->fused == DPC_NONE && dpc_op_has(n->op, DPC_OPF_ELEMWISE)) grow(&f, r);
  }
done:
  free(f.uses);
  free(f.inside);
  free(f.pinned);
  free(f.cand);
  return st;
}
