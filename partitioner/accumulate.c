/*
 * accumulate.c — the gradient-accumulation training graph (see partitioner.h).
 *
 * From the training graph bound at the micro-batch b, build one step over K micro-batches of
 * the batch B = K b:
 *
 *   x: f32[B, ...]                      the global inputs, as the data loader fills them
 *   x.mb<k> = slice(x, rows k*b ..)     micro-batch k's rows
 *   ... forward and backward of micro-batch k ...          (the nodes that depend on the data)
 *   w.grad.acc<k> = w.grad.acc<k-1> + w.grad.mb<k>         summed as each micro-batch ends
 *   w.grad = w.grad.acc<K-1> * (1/K)                        the whole batch's gradient
 *   ... one optimizer update from w.grad ...               (the nodes that read a gradient)
 *
 * Params, state and what depends on them alone (the learning-rate schedule) are built once;
 * so is the optimizer. Each micro-batch's loss is a mean over its rows, so the mean of the K
 * losses and of the K gradients is the whole batch's: the step equals one step on B, up to
 * float rounding. (A loss summed over rows would need the sum instead; the examples' losses are
 * means, as data parallelism assumes too.) The outputs (logits) are the micro-batches' outputs
 * concatenated, so training reports accuracy over the whole batch.
 *
 * The nodes of micro-batch k come before those of k+1: each device runs its steps in this order,
 * so a pipeline's stages (the device order placement repair makes) see micro-batch k's forward
 * pass on stage s before micro-batch k+1's — GPipe's order is a reordering of this one.
 */
#include "partitioner/partitioner.h"

#include "ir/print.h"
#include "passes/emit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SHARED = DPC_STEP_SHARED, PER_MB = DPC_STEP_PER_MB, OPTIMIZER = DPC_STEP_OPTIMIZER };

typedef struct acc {
  const dpc_graph *r; /* the training graph at the micro-batch */
  dpc_graph *g;
  uint32_t K;
  uint8_t *cls;   /* per node of r */
  bool *is_grad;  /* per value of r */
  uint32_t **val; /* [micro-batch][value of r] -> value of g (shared values: the same in all) */
  uint32_t **node;
  uint32_t loss_node; /* nodes of r up to it are the forward pass (autodiff appends) */
  bool fusing;        /* the graph was fused: epilogues may be added */
} acc;

static dpc_status nomem(dpc_diag *d) {
  return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the accumulation graph");
}

static dpc_status set_name(acc *a, uint32_t v, uint32_t rv, const char *suffix, uint32_t k,
                           dpc_diag *d) {
  uint32_t nm = a->r->values[rv].name;
  if (nm == DPC_NONE) return DPC_OK;
  char buf[300];
  if (suffix)
    snprintf(buf, sizeof buf, "%s.%s%u", dpc_graph_str(a->r, nm), suffix, k);
  else
    snprintf(buf, sizeof buf, "%s", dpc_graph_str(a->r, nm));
  return dpc_graph_set_name(a->g, v, buf, strlen(buf), d);
}

void dpc_mark_grads(const dpc_graph *g, bool *is_grad) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op != DPC_OP_PARAM) continue;
    uint32_t nm = g->values[g->nodes[i].out].name;
    if (nm == DPC_NONE) continue;
    char gname[300];
    snprintf(gname, sizeof gname, "%s.grad", dpc_graph_str(g, nm));
    uint32_t gv = dpc_graph_find(g, gname);
    if (gv != DPC_NONE) is_grad[gv] = true;
  }
}

/* The optimizer reads a gradient (or what did); a micro-batch node reads the data (or what
 * did); the rest is shared. */
dpc_status dpc_step_classify(const dpc_graph *r, const bool *is_grad, uint8_t *cls, dpc_diag *d) {
  for (uint32_t i = 0; i < r->n_nodes; i++) {
    const dpc_node *n = &r->nodes[i];
    bool opt = false, data = n->op == DPC_OP_INPUT;
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t v = dpc_node_inputs(r, n)[k], p = r->values[v].node;
      opt |= is_grad[v] || cls[p] == DPC_STEP_OPTIMIZER;
      data |= cls[p] == DPC_STEP_PER_MB && !is_grad[v];
    }
    cls[i] = opt ? DPC_STEP_OPTIMIZER : data ? DPC_STEP_PER_MB : DPC_STEP_SHARED;
    if (opt && data)
      return dpc_graph_fail_node(r, i, d, DPC_ERR_UNSUPPORTED,
                                 "reads both a gradient and the batch: the step cannot be split "
                                 "into micro-batches or moved to a server");
  }
  return DPC_OK;
}

/* Whether v is read after the step: an output, an update's value or the loss. */
static bool read_after(const dpc_graph *r, uint32_t v) {
  for (uint32_t i = 0; i < r->n_outputs; i++)
    if (r->outputs[i] == v) return true;
  for (uint32_t i = 0; i < r->n_updates; i++)
    if (r->updates[i].value == v) return true;
  return v == r->obj.loss;
}

/* A shared node that only the optimizer reads (a momentum times its factor) moves to the
 * optimizer: computed before the micro-batches, its value would be held through all of them
 * (a model-sized buffer for each such term). Readers come after the node, so a pass from the
 * last node back sees every reader's final part first. */
static dpc_status late_shared(acc *a, dpc_diag *d) {
  const dpc_graph *r = a->r;
  size_t nn = r->n_nodes ? r->n_nodes : 1;
  bool *read = calloc(nn, sizeof *read), *other = calloc(nn, sizeof *other);
  if (!read || !other) {
    free(read), free(other);
    return nomem(d);
  }
  for (uint32_t i = r->n_nodes; i-- > 0;) {
    const dpc_node *n = &r->nodes[i];
    if (a->cls[i] == SHARED && read[i] && !other[i] && !dpc_op_has(n->op, DPC_OPF_SOURCE)) {
      bool after = false;
      for (uint32_t j = 0; j < n->n_out; j++) after |= read_after(r, n->out + j);
      if (!after) a->cls[i] = OPTIMIZER;
    }
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t p = r->values[dpc_node_inputs(r, n)[k]].node;
      read[p] = true;
      other[p] |= a->cls[i] != OPTIMIZER;
    }
  }
  free(read), free(other);
  return DPC_OK;
}

/* Which part each node belongs to; state updated from the batch cannot be accumulated. */
static dpc_status classify(acc *a, dpc_diag *d) {
  const dpc_graph *r = a->r;
  dpc_status st = dpc_step_classify(r, a->is_grad, a->cls, d);
  if (!st) st = late_shared(a, d);
  if (st) return st;
  for (uint32_t i = 0; i < r->n_updates; i++) {
    uint32_t p = r->values[r->updates[i].value].node;
    if (a->cls[p] == PER_MB)
      return dpc_graph_fail_node(
          r, p, d, DPC_ERR_UNSUPPORTED,
          "updates state from the batch (batch statistics): gradient accumulation does not "
          "support it yet");
  }
  return DPC_OK;
}

static void tag(acc *a, uint32_t node, uint8_t phase, uint32_t k) {
  a->g->nodes[node].phase = phase;
  a->g->nodes[node].mb = (uint16_t)k;
}

static dpc_status clone_node(acc *a, uint32_t i, uint32_t k, dpc_diag *d) {
  const dpc_graph *r = a->r;
  const dpc_node *n = &r->nodes[i];
  uint32_t dev = DPC_NONE;
  if (n->device != DPC_NONE) {
    const char *s = dpc_graph_str(r, n->device);
    dev = dpc_graph_intern(a->g, s, strlen(s));
  }
  /* micro-batch k's rows of the whole batch come after k micro-batches' (a dropout's rows are
   * the micro-batch's: its output's first dimension) */
  const dpc_shape *sh = &r->values[n->out].shape;
  int64_t rows = n->n_out && sh->rank ? sh->d[0] : 1;
  uint32_t id;
  dpc_status st = dpc_copy_node(a->g, r, i, a->val[k], dev, (int64_t)k * rows, &id, d);
  if (st) return st;
  bool per = a->cls[i] == PER_MB;
  tag(a, id,
      a->cls[i] == SHARED      ? DPC_PHASE_SHARED
      : a->cls[i] == OPTIMIZER ? DPC_PHASE_STEP
      : i <= a->loss_node      ? DPC_PHASE_FORWARD
                               : DPC_PHASE_BACKWARD,
      k);
  for (uint32_t kk = per ? k : 0; kk < (per ? k + 1 : a->K); kk++) a->node[kk][i] = id;
  for (uint32_t j = 0; j < n->n_out && !st; j++) {
    uint32_t v = a->g->nodes[id].out + j;
    for (uint32_t kk = per ? k : 0; kk < (per ? k + 1 : a->K); kk++) a->val[kk][n->out + j] = v;
    st = set_name(a, v, n->out + j, per ? "mb" : NULL, k, d);
  }
  return st;
}

/* The global input for input node i and micro-batch k's rows of it. */
static dpc_status split_input(acc *a, uint32_t i, dpc_diag *d) {
  const dpc_graph *r = a->r;
  const dpc_node *n = &r->nodes[i];
  const dpc_value *x = &r->values[n->out];
  if (x->shape.rank == 0)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "input '%s' has no batch dimension to split",
                         dpc_graph_str(r, x->name));
  int64_t dims[DPC_MAX_RANK], per = x->shape.d[0];
  for (uint32_t j = 0; j < x->shape.rank; j++) dims[j] = x->shape.d[j];
  dims[0] = per * a->K;
  uint32_t dev = DPC_NONE;
  if (n->device != DPC_NONE) {
    const char *s = dpc_graph_str(r, n->device);
    dev = dpc_graph_intern(a->g, s, strlen(s));
  }
  dpc_emit e = dpc_emit_start(a->g, dev, d);
  dpc_emit_begin(&e);
  dpc_emit_dtype(&e, "dtype", x->dtype);
  dpc_emit_shape(&e, "shape", dims, x->shape.rank);
  uint32_t id = dpc_emit_node(&e, DPC_OP_INPUT, NULL, 0, 1);
  if (e.st) return e.st;
  tag(a, id, DPC_PHASE_SHARED, 0);
  uint32_t global = a->g->nodes[id].out;
  dpc_status st = set_name(a, global, n->out, NULL, 0, d);
  for (uint32_t k = 0; k < a->K && !st; k++) {
    int64_t start = per * k, end = per * (k + 1), axis = 0;
    dpc_emit_begin(&e);
    dpc_emit_ints(&e, "starts", &start, 1);
    dpc_emit_ints(&e, "ends", &end, 1);
    dpc_emit_ints(&e, "axes", &axis, 1);
    uint32_t s = dpc_emit_node(&e, DPC_OP_SLICE, &global, 1, 1);
    if (e.st) return e.st;
    tag(a, s, DPC_PHASE_FORWARD, k);
    a->node[k][i] = s;
    a->val[k][n->out] = a->g->nodes[s].out;
    st = set_name(a, a->g->nodes[s].out, n->out, "mb", k, d);
  }
  return st;
}

/* A weight gradient's matmul takes the running sum's add as its epilogue: the sum is then
 * added as the product is stored, instead of a pass over the gradient of its own (for a
 * 1024 x 1024 layer, 12 MB of traffic per micro-batch). Only a matmul alone in its kernel,
 * whose value only the add reads, and only when fusion is on (the graph has groups). */
static void fuse_into_sum(acc *a, uint32_t mm, uint32_t add) {
  dpc_graph *g = a->g;
  if (!a->fusing || g->nodes[mm].op != DPC_OP_MATMUL || g->nodes[mm].fused != DPC_NONE) return;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].fused == mm) return; /* a root already */
    if (i == add) continue;
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++)
      if (dpc_node_inputs(g, n)[k] == g->nodes[mm].out) return;
  }
  g->nodes[mm].fused = add;
}

/* Micro-batch k's value rv added to the running sum; after the last, the mean takes rv's name
 * and place for the optimizer. */
static dpc_status accumulate(acc *a, uint32_t rv, uint32_t k, uint32_t *sum, dpc_diag *d) {
  uint32_t p = a->r->values[rv].node, dev = a->g->nodes[a->node[k][p]].device;
  dpc_emit e = dpc_emit_start(a->g, dev, d);
  uint32_t v = a->val[k][rv];
  *sum = k == 0 ? v : dpc_emit2(&e, DPC_OP_ADD, *sum, v);
  if (k > 0 && !e.st) {
    tag(a, a->g->values[*sum].node, a->g->nodes[a->node[k][p]].phase, k);
    fuse_into_sum(a, a->g->values[v].node, a->g->values[*sum].node);
    dpc_status st = set_name(a, *sum, rv, "acc", k, d);
    if (st) return st;
  }
  if (k + 1 < a->K || e.st) return e.st;
  uint32_t scale = dpc_emit_scalar(&e, 1.0 / a->K, a->r->values[rv].dtype);
  uint32_t mean = dpc_emit2(&e, DPC_OP_MUL, *sum, scale);
  if (e.st) return e.st;
  tag(a, a->g->values[scale].node, DPC_PHASE_STEP, 0);
  tag(a, a->g->values[mean].node, DPC_PHASE_STEP, 0);
  for (uint32_t kk = 0; kk < a->K; kk++) a->val[kk][rv] = mean;
  return set_name(a, mean, rv, NULL, 0, d);
}

static dpc_status build(acc *a, dpc_diag *d) {
  const dpc_graph *r = a->r;
  dpc_status st = DPC_OK;
  /* what is averaged: the gradients and the loss */
  bool *avg = calloc(r->n_values ? r->n_values : 1, sizeof *avg);
  uint32_t *sum = calloc(r->n_values ? r->n_values : 1, sizeof *sum);
  if (!avg || !sum) st = nomem(d);
  for (uint32_t v = 0; !st && v < r->n_values; v++) avg[v] = a->is_grad[v] || v == r->obj.loss;
  for (uint32_t i = 0; i < r->n_nodes && !st; i++)
    if (a->cls[i] == SHARED) st = r->nodes[i].op == DPC_OP_INPUT ? DPC_OK : clone_node(a, i, 0, d);
  for (uint32_t i = 0; i < r->n_nodes && !st; i++)
    if (r->nodes[i].op == DPC_OP_INPUT) st = split_input(a, i, d);
  for (uint32_t k = 0; k < a->K && !st; k++)
    for (uint32_t i = 0; i < r->n_nodes && !st; i++) {
      const dpc_node *n = &r->nodes[i];
      if (a->cls[i] != PER_MB || n->op == DPC_OP_INPUT) continue;
      st = clone_node(a, i, k, d);
      for (uint32_t j = 0; j < n->n_out && !st; j++)
        if (avg[n->out + j]) st = accumulate(a, n->out + j, k, &sum[n->out + j], d);
    }
  for (uint32_t i = 0; i < r->n_nodes && !st; i++)
    if (a->cls[i] == OPTIMIZER) st = clone_node(a, i, 0, d);
  /* fusion groups within one part stay; a member of another part's group leaves it (the
   * gradient's GEMM, whose momentum epilogue now reads the mean) */
  for (uint32_t i = 0; i < r->n_nodes && !st; i++) {
    const dpc_node *n = &r->nodes[i];
    if (n->fused == DPC_NONE || n->op == DPC_OP_INPUT) continue;
    bool same = a->cls[n->fused] == a->cls[i];
    for (uint32_t j = 0; j < n->n_out; j++) same &= !avg[n->out + j];
    for (uint32_t k = 0; k < (a->cls[i] == PER_MB ? a->K : 1); k++)
      if (a->g->nodes[a->node[k][i]].fused == DPC_NONE) /* not given to a running sum */
        a->g->nodes[a->node[k][i]].fused = same ? a->node[k][n->fused] : DPC_NONE;
  }
  for (uint32_t i = 0; i < r->n_updates && !st; i++)
    st = dpc_graph_add_update(a->g, a->val[0][r->updates[i].target], a->val[0][r->updates[i].value],
                              r->updates[i].loc, d);
  /* outputs: the micro-batches' rows, concatenated */
  for (uint32_t i = 0; i < r->n_outputs && !st; i++) {
    uint32_t o = r->outputs[i], p = r->values[o].node, out = a->val[0][o];
    if (a->cls[p] == PER_MB) {
      uint32_t ins[256];
      for (uint32_t k = 0; k < a->K; k++) ins[k] = a->val[k][o];
      dpc_emit e = dpc_emit_start(a->g, a->g->nodes[a->node[a->K - 1][p]].device, d);
      dpc_emit_begin(&e);
      dpc_emit_int(&e, "axis", 0);
      uint32_t c = dpc_emit_node(&e, DPC_OP_CONCAT, ins, a->K, 1);
      if ((st = e.st)) break;
      tag(a, c, DPC_PHASE_STEP, 0);
      out = a->g->nodes[c].out;
      st = set_name(a, out, o, NULL, 0, d);
    }
    if (!st) st = dpc_graph_add_output(a->g, out, d);
  }
  if (!st && r->obj.loss != DPC_NONE) {
    uint32_t mark = dpc_graph_attr_mark(a->g);
    for (uint32_t k = 0; k < r->obj.n_attr && !st; k++)
      if (dpc_graph_attr_copy(a->g, r, &r->attrs[r->obj.attr + k])) st = nomem(d);
    if (!st)
      st = dpc_graph_set_objective(a->g, a->val[0][r->obj.loss], dpc_graph_str(r, r->obj.optimizer),
                                   mark, r->obj.loc, d);
  }
  free(avg);
  free(sum);
  return st;
}

dpc_status dpc_accumulate_graph(const dpc_graph *micro, uint32_t K, dpc_graph **out, dpc_diag *d) {
  *out = NULL;
  if (K < 2 || K > 256)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "accumulation takes 2 to 256 micro-batches, not %u",
                         K);
  acc a = {micro, dpc_graph_new(), K, NULL, NULL, NULL, NULL, 0, false};
  size_t nn = micro->n_nodes ? micro->n_nodes : 1, nv = micro->n_values ? micro->n_values : 1;
  a.cls = calloc(nn, 1);
  a.is_grad = calloc(nv, sizeof *a.is_grad);
  a.val = calloc(K, sizeof *a.val);
  a.node = calloc(K, sizeof *a.node);
  dpc_status st = a.g && a.cls && a.is_grad && a.val && a.node ? DPC_OK : nomem(d);
  for (uint32_t k = 0; !st && k < K; k++) {
    a.val[k] = malloc(nv * sizeof **a.val);
    a.node[k] = malloc(nn * sizeof **a.node);
    if (!a.val[k] || !a.node[k]) st = nomem(d);
  }
  if (!st) dpc_mark_grads(micro, a.is_grad);
  /* symbols as bound there: shapes inside are the micro-batch's, the inputs the whole batch's */
  for (uint32_t k = 0; !st && k < micro->n_syms; k++) {
    const char *s = dpc_graph_str(micro, micro->syms[k]);
    if (dpc_graph_symbol(a.g, s, strlen(s)) != k) st = nomem(d);
  }
  for (uint32_t k = 0; !st && k < micro->n_syms; k++) a.g->sym_vals[k] = micro->sym_vals[k];
  if (!st && micro->name != DPC_NONE) {
    const char *s = dpc_graph_str(micro, micro->name);
    a.g->name = dpc_graph_intern(a.g, s, strlen(s));
  }
  for (uint32_t i = 0; i < micro->n_nodes; i++) a.fusing |= micro->nodes[i].fused != DPC_NONE;
  a.loss_node = micro->obj.loss != DPC_NONE ? micro->values[micro->obj.loss].node : micro->n_nodes;
  if (!st) st = classify(&a, d);
  if (!st) st = build(&a, d);
  if (!st) st = dpc_verify(a.g, d);
  for (uint32_t k = 0; k < K && a.val; k++) {
    free(a.val[k]);
    if (a.node) free(a.node[k]);
  }
  free(a.val), free(a.node), free(a.cls), free(a.is_grad);
  if (st) {
    dpc_graph_free(a.g);
    return st;
  }
  *out = a.g;
  return DPC_OK;
}
