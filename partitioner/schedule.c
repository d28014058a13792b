/*
 * schedule.c — the single-device plan: the graph's own order, one slot per value.
 *
 * Slots are laid out one after another with no reuse: simple, and right for the oracle. The
 * memory-planning pass will share slots between values whose lifetimes do not overlap; a value
 * read by a fusion group (dpc_node.fused) is read when the group's root runs, so it must live
 * until then, not only until the member that names it.
 *
 * One sharing is done already, because it saves a copy of every parameter and optimizer state
 * each step: an update (new w, new momentum) is computed straight into its target's slot when
 * that is safe (update_in_place), instead of into a slot of its own copied back at the end.
 */
#include "partitioner/partitioner.h"

#include <stdlib.h>
#include <string.h>

static dpc_status push_step(dpc_plan_device *dv, dpc_step s, dpc_diag *d) {
  if (DPC_VEC_RESERVE(dv->steps, dv->cap_steps, dv->n_steps + 1))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  dv->steps[dv->n_steps++] = s;
  return DPC_OK;
}

/* When a node's kernel runs: a fusion group's members run with their root. */
static uint32_t run_at(const dpc_graph *g, uint32_t n) {
  return g->nodes[n].fused != DPC_NONE ? g->nodes[n].fused : n;
}

/* Whether update value v may be computed in its target t's slot. Nothing may read t after v's
 * kernel runs (it would see the new value), and that kernel may read t only at the element it
 * writes: an elementwise node, or a fusion group of elementwise nodes (an anchor, matmul or
 * conv2d, writes its whole product into the output before the epilogue reads the rest). Reads
 * before v's kernel are fine. Same shape and dtype, and v's first use as a target. A kernel
 * that stops on bad data part-way leaves t partly updated; the step fails then anyway. */
static bool update_in_place(const dpc_graph *g, uint32_t v, uint32_t t, const bool *taken) {
  const dpc_value *vv = &g->values[v], *tv = &g->values[t];
  if (taken[v] || vv->dtype != tv->dtype || !dpc_shape_eq(&vv->shape, &tv->shape)) return false;
  uint32_t prod = vv->node;
  if (dpc_op_has(g->nodes[prod].op, DPC_OPF_SOURCE) || g->nodes[prod].fused != DPC_NONE)
    return false;
  for (uint32_t n = 0; n < g->n_nodes; n++) {
    const dpc_node *nd = &g->nodes[n];
    uint32_t at = run_at(g, n);
    if (at == prod && !dpc_op_has(nd->op, DPC_OPF_ELEMWISE)) return false;
    for (uint32_t i = 0; i < nd->n_in; i++)
      if (g->ids[nd->in + i] == t && at > prod) return false;
  }
  return true;
}

dpc_status dpc_plan_single(const dpc_graph *src, const char *device, bool training, dpc_plan **out,
                           dpc_diag *d) {
  *out = NULL;
  for (uint32_t v = 0; v < src->n_values; v++) {
    if (!dpc_shape_is_concrete(&src->values[v].shape)) {
      char ty[160], lbl[96];
      dpc_graph_format_type(src, src->values[v].dtype, &src->values[v].shape, ty, sizeof ty);
      dpc_graph_value_label(src, v, lbl, sizeof lbl);
      return dpc_diag_fail(d, DPC_ERR_INVALID,
                           "cannot plan '%s' of type %s: bind its symbolic dimensions first", lbl,
                           ty);
    }
  }
  dpc_plan *p = calloc(1, sizeof *p);
  if (!p) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  p->training = training;
  p->g = dpc_graph_clone(src);
  p->devs = calloc(1, sizeof *p->devs);
  p->slots = calloc(src->n_values ? src->n_values : 1, sizeof *p->slots);
  if (!p->g || !p->devs || !p->slots || !(p->devs[0].name = dpc_strdup(device))) {
    dpc_plan_free(p);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  }
  p->n_devs = 1;
  const dpc_graph *g = p->g;
  /* in_place[v]: the target whose slot update value v shares, else DPC_NONE */
  uint32_t *in_place = malloc((g->n_values ? g->n_values : 1) * sizeof *in_place);
  bool *taken = calloc(g->n_values ? g->n_values : 1, sizeof *taken);
  if (!in_place || !taken) {
    free(in_place);
    free(taken);
    dpc_plan_free(p);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  }
  for (uint32_t v = 0; v < g->n_values; v++) in_place[v] = DPC_NONE;
  for (uint32_t i = 0; training && i < g->n_updates; i++) {
    uint32_t v = g->updates[i].value, t = g->updates[i].target;
    if (update_in_place(g, v, t, taken)) {
      in_place[v] = t;
      taken[v] = true;
    }
  }
  uint64_t off = 0;
  for (uint32_t v = 0; v < g->n_values; v++) {
    if (in_place[v] != DPC_NONE) continue;
    const dpc_value *val = &g->values[v];
    uint64_t bytes = (uint64_t)dpc_shape_numel(&val->shape) * dpc_dtype_size(val->dtype);
    p->slots[v] = (dpc_slot){0, off, bytes};
    off += (bytes + DPC_SLOT_ALIGN - 1) / DPC_SLOT_ALIGN * DPC_SLOT_ALIGN;
  }
  for (uint32_t v = 0; v < g->n_values; v++)
    if (in_place[v] != DPC_NONE) p->slots[v] = p->slots[in_place[v]];
  p->devs[0].bytes = off;
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    if (dpc_op_has(g->nodes[i].op, DPC_OPF_SOURCE)) continue;
    st = push_step(&p->devs[0], (dpc_step){.kind = DPC_STEP_KERNEL, .node = i}, d);
  }
  for (uint32_t i = 0; training && i < g->n_updates && !st; i++)
    if (in_place[g->updates[i].value] != g->updates[i].target)
      st = push_step(&p->devs[0],
                     (dpc_step){.kind = DPC_STEP_COPY,
                                .node = DPC_NONE,
                                .src = g->updates[i].value,
                                .dst = g->updates[i].target},
                     d);
  free(in_place);
  free(taken);
  if (st) {
    dpc_plan_free(p);
    return st;
  }
  *out = p;
  return DPC_OK;
}
