/*
 * schedule.c — the single-device plan: the graph's own order, one slot per value.
 *
 * Slots are laid out one after another with no reuse: simple, and right for the oracle. The
 * memory-planning pass will share slots between values whose lifetimes do not overlap; a value
 * read by a fusion group (dpc_node.fused) is read when the group's root runs, so it must live
 * until then, not only until the member that names it.
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
  uint64_t off = 0;
  for (uint32_t v = 0; v < g->n_values; v++) {
    const dpc_value *val = &g->values[v];
    uint64_t bytes = (uint64_t)dpc_shape_numel(&val->shape) * dpc_dtype_size(val->dtype);
    p->slots[v] = (dpc_slot){0, off, bytes};
    off += (bytes + DPC_SLOT_ALIGN - 1) / DPC_SLOT_ALIGN * DPC_SLOT_ALIGN;
  }
  p->devs[0].bytes = off;
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    if (dpc_op_has(g->nodes[i].op, DPC_OPF_SOURCE)) continue;
    st = push_step(&p->devs[0], (dpc_step){.kind = DPC_STEP_KERNEL, .node = i}, d);
  }
  for (uint32_t i = 0; training && i < g->n_updates && !st; i++)
    st = push_step(&p->devs[0],
                   (dpc_step){.kind = DPC_STEP_COPY,
                              .node = DPC_NONE,
                              .src = g->updates[i].value,
                              .dst = g->updates[i].target},
                   d);
  if (st) {
    dpc_plan_free(p);
    return st;
  }
  *out = p;
  return DPC_OK;
}
