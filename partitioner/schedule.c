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

#include "ir/fusion.h"

#include <stdlib.h>
#include <string.h>

static dpc_status push_step(dpc_plan_device *dv, dpc_step s, dpc_diag *d) {
  if (DPC_VEC_RESERVE(dv->steps, dv->cap_steps, dv->n_steps + 1))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  dv->steps[dv->n_steps++] = s;
  return DPC_OK;
}

/* Whether update value v may be computed in its target t's slot. Nothing may read t after v's
 * kernel runs (it would see the new value), and that kernel may read t only at the element it
 * writes: an elementwise node, or a fusion group of elementwise nodes (an anchor, matmul or
 * conv2d, writes its whole product into the output before the epilogue reads the rest). Reads
 * before v's kernel are fine. Same shape and dtype, and v's first use as a target. A kernel
 * that stops on bad data part-way leaves t partly updated; the step fails then anyway.
 * last_read[t]: the latest kernel that reads t (DPC_NONE: none); elementwise[k]: whether
 * kernel k's nodes are all elementwise (both from kernel_reads, once per plan: scanning the
 * graph for each update made a replicated plan quadratic in its replicas). */
static bool update_in_place(const dpc_graph *g, uint32_t v, uint32_t t, const bool *taken,
                            const uint32_t *last_read, const bool *elementwise) {
  const dpc_value *vv = &g->values[v], *tv = &g->values[t];
  if (taken[v] || vv->dtype != tv->dtype || !dpc_shape_eq(&vv->shape, &tv->shape)) return false;
  uint32_t prod = vv->node;
  if (dpc_op_has(g->nodes[prod].op, DPC_OPF_SOURCE) || g->nodes[prod].fused != DPC_NONE)
    return false;
  return elementwise[prod] && (last_read[t] == DPC_NONE || last_read[t] <= prod);
}

/* For update_in_place: per value, the latest kernel that reads it; per kernel, whether it is
 * elementwise throughout. */
static void kernel_reads(const dpc_graph *g, uint32_t *last_read, bool *elementwise) {
  for (uint32_t v = 0; v < g->n_values; v++) last_read[v] = DPC_NONE;
  for (uint32_t n = 0; n < g->n_nodes; n++) elementwise[n] = true;
  for (uint32_t n = 0; n < g->n_nodes; n++) {
    const dpc_node *nd = &g->nodes[n];
    uint32_t at = dpc_group_kernel(g, n);
    if (!dpc_op_has(nd->op, DPC_OPF_ELEMWISE)) elementwise[at] = false;
    for (uint32_t i = 0; i < nd->n_in; i++) {
      uint32_t t = g->ids[nd->in + i];
      if (last_read[t] == DPC_NONE || at > last_read[t]) last_read[t] = at;
    }
  }
}

/* Which of `devs` node i runs on: its placement's index (0 when unplaced, or with one device);
 * DPC_NONE for communication between devices, which runs on every device it connects. dev_of
 * maps a device's name (its string id in g) to its index: a lookup, not a comparison of names
 * with each device's, which at hundreds of devices was most of planning's time. */
static dpc_status node_device(const dpc_graph *g, uint32_t i, const dpc_idmap *dev_of, uint32_t n,
                              uint32_t *out, dpc_diag *d) {
  const dpc_node *nd = &g->nodes[i];
  *out = 0;
  /* on one device, communication is an ordinary kernel: the reference computes it in place */
  if (n == 1) return DPC_OK;
  if (dpc_op_has(nd->op, DPC_OPF_COMM)) {
    *out = DPC_NONE; /* on its inputs' devices */
    if (nd->n_in > n)
      return dpc_graph_fail_node(g, i, d, DPC_ERR_INVALID,
                                 "%s connects %u devices, but the plan has %u", dpc_op_name(nd->op),
                                 nd->n_in, n);
    return DPC_OK;
  }
  if (nd->device == DPC_NONE) return DPC_OK;
  uint32_t k = dpc_idmap_get(dev_of, nd->device);
  if (k != DPC_NONE) {
    *out = k;
    return DPC_OK;
  }
  const char *want = dpc_graph_str(g, nd->device);
  return dpc_graph_fail_node(g, i, d, DPC_ERR_INVALID,
                             "is placed on '%s', which is not one of the plan's %u devices", want,
                             n);
}

/* Whether node `reader` is the only reader of v, and v is nothing else: not an output, update
 * value or target, or the loss, and computed by a node (a source is set from outside). */
static bool sole_reader(const dpc_graph *g, uint32_t v, uint32_t reader) {
  if (dpc_op_has(g->nodes[g->values[v].node].op, DPC_OPF_SOURCE) || v == g->obj.loss) return false;
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return false;
  for (uint32_t i = 0; i < g->n_updates; i++)
    if (g->updates[i].value == v || g->updates[i].target == v) return false;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (i == reader) continue;
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++)
      if (dpc_node_inputs(g, n)[k] == v) return false;
  }
  return true;
}

typedef struct planner {
  dpc_plan *p;
  uint32_t *ndev;  /* per node: device, DPC_NONE for communication */
  uint32_t *vdev;  /* per value: the device its slot is on */
  uint32_t *event; /* per value: the event a cross-device reader waits on, or DPC_NONE */
  bool *waited;    /* [device][event]: already waited for in this step list */
  uint32_t *in_place;
  bool *taken;
  uint32_t *last_read; /* per value (update_in_place) */
  bool *elementwise;   /* per node (update_in_place) */
} planner;

static void planner_free(planner *pl) {
  free(pl->ndev);
  free(pl->vdev);
  free(pl->event);
  free(pl->waited);
  free(pl->in_place);
  free(pl->taken);
  free(pl->last_read);
  free(pl->elementwise);
}

/* The kernel step of node i on device dev, with the waits before it and the signals after. */
static dpc_status emit_node(planner *pl, uint32_t i, uint32_t dev, uint32_t rank, dpc_diag *d) {
  dpc_plan *p = pl->p;
  const dpc_graph *g = p->g;
  const dpc_node *nd = &g->nodes[i];
  dpc_status st = DPC_OK;
  for (uint32_t k = 0; k < nd->n_in && !st; k++) {
    uint32_t v = dpc_node_inputs(g, nd)[k], e = pl->event[v];
    if (e == DPC_NONE || pl->vdev[v] == dev || pl->waited[(size_t)dev * p->n_events + e]) continue;
    pl->waited[(size_t)dev * p->n_events + e] = true;
    st = push_step(
        &p->devs[dev],
        (dpc_step){
            .kind = DPC_STEP_WAIT, .node = DPC_NONE, .src = v, .peer = pl->vdev[v], .event = e},
        d);
  }
  if (!st)
    st = push_step(&p->devs[dev], (dpc_step){.kind = DPC_STEP_KERNEL, .node = i, .peer = rank}, d);
  for (uint32_t k = 0; k < nd->n_out && !st; k++) {
    uint32_t v = nd->out + k;
    if (pl->event[v] != DPC_NONE && pl->vdev[v] == dev)
      st = push_step(&p->devs[dev],
                     (dpc_step){.kind = DPC_STEP_SIGNAL,
                                .node = DPC_NONE,
                                .src = v,
                                .peer = dev,
                                .event = pl->event[v]},
                     d);
  }
  return st;
}

static dpc_status plan_build(planner *pl, const char *const *devs, uint32_t n, bool training,
                             dpc_diag *d) {
  dpc_plan *p = pl->p;
  const dpc_graph *g = p->g;
  uint32_t nn = g->n_nodes ? g->n_nodes : 1, nv = g->n_values ? g->n_values : 1;
  pl->ndev = malloc(nn * sizeof *pl->ndev);
  pl->vdev = calloc(nv, sizeof *pl->vdev);
  pl->event = malloc(nv * sizeof *pl->event);
  pl->in_place = malloc(nv * sizeof *pl->in_place);
  pl->taken = calloc(nv, sizeof *pl->taken);
  pl->last_read = malloc(nv * sizeof *pl->last_read);
  pl->elementwise = malloc(nn * sizeof *pl->elementwise);
  if (!pl->ndev || !pl->vdev || !pl->event || !pl->in_place || !pl->taken || !pl->last_read ||
      !pl->elementwise)
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  dpc_status st = DPC_OK;
  dpc_idmap dev_of;
  dpc_idmap_init(&dev_of);
  for (uint32_t k = n; k-- > 0 && !st;) { /* the first of two devices of one name wins */
    uint32_t id = dpc_strpool_find(&g->strs, devs[k], strlen(devs[k]));
    if (id != DPC_NONE && dpc_idmap_put(&dev_of, id, k))
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  }
  /* communication: output k lives where input k does, and the inputs are on distinct devices */
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    st = node_device(g, i, &dev_of, n, &pl->ndev[i], d);
    const dpc_node *nd = &g->nodes[i];
    for (uint32_t k = 0; k < nd->n_out && !st; k++)
      pl->vdev[nd->out + k] =
          pl->ndev[i] == DPC_NONE ? pl->vdev[dpc_node_inputs(g, nd)[k]] : pl->ndev[i];
    for (uint32_t k = 0; pl->ndev[i] == DPC_NONE && k < nd->n_in && !st; k++)
      for (uint32_t q = 0; q < k && !st; q++)
        if (pl->vdev[dpc_node_inputs(g, nd)[k]] == pl->vdev[dpc_node_inputs(g, nd)[q]])
          st = dpc_graph_fail_node(g, i, d, DPC_ERR_INVALID,
                                   "inputs %u and %u of %s are both on %s", q, k,
                                   dpc_op_name(nd->op), devs[pl->vdev[dpc_node_inputs(g, nd)[k]]]);
  }
  dpc_idmap_free(&dev_of);
  /* an event for every value a kernel on another device reads (sources are set before the
   * step; communication lines its devices up itself) */
  for (uint32_t v = 0; v < g->n_values; v++) pl->event[v] = DPC_NONE;
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    const dpc_node *nd = &g->nodes[i];
    if (pl->ndev[i] == DPC_NONE || dpc_op_has(nd->op, DPC_OPF_SOURCE)) continue;
    for (uint32_t k = 0; k < nd->n_in; k++) {
      uint32_t v = dpc_node_inputs(g, nd)[k];
      if (pl->vdev[v] == pl->ndev[i] || dpc_op_has(g->nodes[g->values[v].node].op, DPC_OPF_SOURCE))
        continue;
      if (pl->event[v] == DPC_NONE) pl->event[v] = p->n_events++;
    }
  }
  pl->waited = calloc((size_t)n * (p->n_events ? p->n_events : 1), sizeof *pl->waited);
  if (!st && !pl->waited) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  /* updates computed in their target's slot where safe (update_in_place) */
  for (uint32_t v = 0; v < g->n_values; v++) pl->in_place[v] = DPC_NONE;
  if (training) kernel_reads(g, pl->last_read, pl->elementwise);
  for (uint32_t i = 0; training && i < g->n_updates && !st; i++) {
    uint32_t v = g->updates[i].value, t = g->updates[i].target;
    if (pl->vdev[v] != pl->vdev[t])
      st = dpc_diag_fail(d, DPC_ERR_INVALID, "an update crosses devices (%s to %s)",
                         devs[pl->vdev[v]], devs[pl->vdev[t]]);
    else if (update_in_place(g, v, t, pl->taken, pl->last_read, pl->elementwise)) {
      pl->in_place[v] = t;
      pl->taken[v] = true;
    }
  }
  /* slots, one buffer per device */
  for (uint32_t v = 0; v < g->n_values && !st; v++) {
    if (pl->in_place[v] != DPC_NONE) continue;
    const dpc_value *val = &g->values[v];
    uint64_t bytes = (uint64_t)dpc_shape_numel(&val->shape) * dpc_dtype_size(val->dtype);
    dpc_plan_device *dv = &p->devs[pl->vdev[v]];
    p->slots[v] = (dpc_slot){pl->vdev[v], dv->bytes, bytes};
    dv->bytes += (bytes + DPC_SLOT_ALIGN - 1) / DPC_SLOT_ALIGN * DPC_SLOT_ALIGN;
  }
  for (uint32_t v = 0; v < g->n_values; v++)
    if (pl->in_place[v] != DPC_NONE) p->slots[v] = p->slots[pl->in_place[v]];
  /* each device's share of a collective is reduced where its input lies when nothing else reads
   * the input (a gradient): no copy into the output first */
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    const dpc_node *nd = &g->nodes[i];
    if (pl->ndev[i] != DPC_NONE) continue;
    for (uint32_t k = 0; k < nd->n_in; k++) {
      uint32_t v = dpc_node_inputs(g, nd)[k];
      if (sole_reader(g, v, i)) p->slots[nd->out + k] = p->slots[v];
    }
  }
  /* each device's steps in the graph's order */
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    const dpc_node *nd = &g->nodes[i];
    if (dpc_op_has(nd->op, DPC_OPF_SOURCE)) continue;
    if (pl->ndev[i] != DPC_NONE) {
      st = emit_node(pl, i, pl->ndev[i], 0, d);
      continue;
    }
    for (uint32_t k = 0; k < nd->n_in && !st; k++)
      st = emit_node(pl, i, pl->vdev[dpc_node_inputs(g, nd)[k]], k, d);
  }
  for (uint32_t i = 0; training && i < g->n_updates && !st; i++)
    if (pl->in_place[g->updates[i].value] != g->updates[i].target)
      st = push_step(&p->devs[pl->vdev[g->updates[i].target]],
                     (dpc_step){.kind = DPC_STEP_COPY,
                                .node = DPC_NONE,
                                .src = g->updates[i].value,
                                .dst = g->updates[i].target},
                     d);
  return st;
}

dpc_status dpc_plan_devices(const dpc_graph *src, const char *const *devs, uint32_t n,
                            bool training, dpc_plan **out, dpc_diag *d) {
  *out = NULL;
  if (n < 1) return dpc_diag_fail(d, DPC_ERR_INVALID, "a plan needs at least one device");
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
  p->devs = calloc(n, sizeof *p->devs);
  p->slots = calloc(src->n_values ? src->n_values : 1, sizeof *p->slots);
  bool ok = p->g && p->devs && p->slots;
  for (uint32_t k = 0; ok && k < n; k++) ok = (p->devs[k].name = dpc_strdup(devs[k])) != NULL;
  if (!ok) {
    dpc_plan_free(p);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the plan");
  }
  p->n_devs = n;
  planner pl = {p, NULL, NULL, NULL, NULL, NULL, NULL};
  dpc_status st = plan_build(&pl, devs, n, training, d);
  planner_free(&pl);
  if (st) {
    dpc_plan_free(p);
    return st;
  }
  *out = p;
  return DPC_OK;
}

dpc_status dpc_plan_single(const dpc_graph *src, const char *device, bool training, dpc_plan **out,
                           dpc_diag *d) {
  return dpc_plan_devices(src, &device, 1, training, out, d);
}

void dpc_plan_defer_unread_collectives(dpc_plan *p) {
  const dpc_graph *g = p->g;
  bool *read = calloc(g->n_values ? g->n_values : 1, sizeof *read);
  if (!read) return; /* an order that is only slower */
  for (uint32_t i = 0; i < p->n_devs; i++)
    for (uint32_t j = 0; j < p->devs[i].n_steps; j++) {
      const dpc_step *sp = &p->devs[i].steps[j];
      if (sp->kind == DPC_STEP_COPY) read[sp->src] = true;
      if (sp->kind != DPC_STEP_KERNEL) continue;
      const dpc_node *nd = &g->nodes[sp->node];
      for (uint32_t k = 0; k < nd->n_in; k++) read[dpc_node_inputs(g, nd)[k]] = true;
    }
  for (uint32_t i = 0; i < p->n_devs; i++) {
    dpc_plan_device *pd = &p->devs[i];
    uint32_t keep = 0, moved = 0;
    dpc_step *later = malloc((pd->n_steps ? pd->n_steps : 1) * sizeof *later);
    if (!later) break;
    for (uint32_t j = 0; j < pd->n_steps; j++) {
      const dpc_step *sp = &pd->steps[j];
      bool unread = sp->kind == DPC_STEP_KERNEL && dpc_op_has(g->nodes[sp->node].op, DPC_OPF_COMM);
      const dpc_node *nd = unread ? &g->nodes[sp->node] : NULL;
      for (uint32_t k = 0; nd && k < nd->n_out; k++) unread = unread && !read[nd->out + k];
      if (unread)
        later[moved++] = *sp;
      else
        pd->steps[keep++] = *sp;
    }
    if (moved) memcpy(pd->steps + keep, later, moved * sizeof *later);
    free(later);
  }
  free(read);
}
