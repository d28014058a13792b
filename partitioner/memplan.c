/*
 * memplan.c — a micro-batched plan's activations share memory by lifetime (see partitioner.h).
 *
 * The plans give every value a slot of its own. A step of M micro-batches (accumulation, a
 * pipeline) then holds all M micro-batches' activations at once, whatever the order, which is
 * what GPipe needs and 1F1B was made to avoid. So after the schedule has fixed each device's
 * order, the values of the micro-batches' forward and backward passes are laid out again: each
 * lives from the step whose kernel writes it to the last step on its device whose kernel reads
 * it (a fusion group's members are written and read when the group's root runs), and two values
 * may share bytes when those lifetimes do not meet. First fit by the step a value appears, in
 * a region after the values that keep their own slots.
 *
 * Left alone: everything outside the micro-batches (params, state, the averaged gradients, the
 * optimizer, the outputs: read after the step), values read on another device (the reader's
 * timing is its own), values a collective touches, and values sharing a slot already (an update
 * computed in its target's slot).
 */
#include "partitioner/partitioner.h"

#include "ir/fusion.h"

#include <stdlib.h>
#include <string.h>

typedef struct life {
  uint32_t v;
  uint32_t born, dies; /* step indices on the device, inclusive */
  uint64_t bytes, offset;
} life;

static int cmp_born(const void *a, const void *b) {
  const life *x = a, *y = b;
  if (x->born != y->born) return x->born < y->born ? -1 : 1;
  return x->v < y->v ? -1 : x->v > y->v;
}

static uint64_t align_up(uint64_t n) {
  return (n + DPC_SLOT_ALIGN - 1) / DPC_SLOT_ALIGN * DPC_SLOT_ALIGN;
}

dpc_status dpc_plan_share_activations(dpc_plan *p, dpc_diag *d) {
  const dpc_graph *g = p->g;
  uint32_t nv = g->n_values ? g->n_values : 1, nn = g->n_nodes ? g->n_nodes : 1;
  bool *keep = calloc(nv, sizeof *keep);
  uint32_t *step_of = malloc(nn * sizeof *step_of); /* a root's step index on its device */
  uint32_t *born = malloc(nv * sizeof *born), *dies = malloc(nv * sizeof *dies);
  life *lv = malloc(nv * sizeof *lv);
  if (!keep || !step_of || !born || !dies || !lv) {
    free(keep), free(step_of), free(born), free(dies), free(lv);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory planning memory");
  }
  /* what keeps its own slot */
  for (uint32_t v = 0; v < g->n_values; v++) {
    const dpc_node *n = &g->nodes[g->values[v].node];
    keep[v] = dpc_op_has(n->op, DPC_OPF_SOURCE) || dpc_op_has(n->op, DPC_OPF_COMM) ||
              (n->phase != DPC_PHASE_FORWARD && n->phase != DPC_PHASE_BACKWARD);
  }
  for (uint32_t o = 0; o < g->n_outputs; o++) keep[g->outputs[o]] = true;
  for (uint32_t u = 0; u < g->n_updates; u++)
    keep[g->updates[u].value] = keep[g->updates[u].target] = true;
  if (g->obj.loss != DPC_NONE) keep[g->obj.loss] = true;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    bool comm = dpc_op_has(n->op, DPC_OPF_COMM);
    uint32_t at = dpc_group_kernel(g, i);
    uint32_t here = p->slots[g->nodes[at].out].device; /* where the reader runs */
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t v = dpc_node_inputs(g, n)[k];
      /* read by a collective, or on another device than the value lives on */
      if (comm || p->slots[v].device != here) keep[v] = true;
    }
  }
  /* values sharing a slot already */
  for (uint32_t v = 0; v < g->n_values; v++)
    for (uint32_t w = v + 1; w < g->n_values && !keep[v]; w++)
      if (p->slots[w].device == p->slots[v].device && p->slots[w].offset == p->slots[v].offset &&
          p->slots[w].bytes && p->slots[v].bytes)
        keep[v] = keep[w] = true;
  dpc_status st = DPC_OK;
  for (uint32_t dv = 0; dv < p->n_devs && !st; dv++) {
    dpc_plan_device *pd = &p->devs[dv];
    for (uint32_t i = 0; i < g->n_nodes; i++) step_of[i] = UINT32_MAX;
    for (uint32_t j = 0; j < pd->n_steps; j++)
      if (pd->steps[j].kind == DPC_STEP_KERNEL) step_of[pd->steps[j].node] = j;
    for (uint32_t v = 0; v < g->n_values; v++) born[v] = UINT32_MAX, dies[v] = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
      uint32_t j = step_of[dpc_group_kernel(g, i)];
      if (j == UINT32_MAX) continue;
      const dpc_node *n = &g->nodes[i];
      for (uint32_t k = 0; k < n->n_out; k++) {
        uint32_t v = n->out + k;
        if (j < born[v]) born[v] = j;
        if (j > dies[v]) dies[v] = j;
      }
      for (uint32_t k = 0; k < n->n_in; k++) {
        uint32_t v = dpc_node_inputs(g, n)[k];
        if (j > dies[v]) dies[v] = j;
      }
    }
    /* the kept values, laid out again one after another (a shared slot stays shared) */
    uint32_t n_life = 0;
    uint64_t fixed = 0;
    for (uint32_t v = 0; v < g->n_values; v++) {
      dpc_slot *s = &p->slots[v];
      if (s->device != dv || !s->bytes) continue;
      if (!keep[v] && born[v] != UINT32_MAX) {
        lv[n_life++] = (life){v, born[v], dies[v] < born[v] ? born[v] : dies[v], s->bytes, 0};
        continue;
      }
      uint32_t first = v; /* the first value in this slot takes the new offset */
      for (uint32_t w = 0; w < v; w++)
        if (p->slots[w].device == dv && p->slots[w].offset == s->offset && p->slots[w].bytes &&
            (keep[w] || born[w] == UINT32_MAX)) {
          first = w;
          break;
        }
      if (first != v) {
        s->offset = p->slots[first].offset;
        continue;
      }
      s->offset = fixed;
      fixed += align_up(s->bytes);
    }
    /* first fit in address among the values alive at once */
    qsort(lv, n_life, sizeof *lv, cmp_born);
    uint64_t top = 0;
    for (uint32_t i = 0; i < n_life; i++) {
      uint64_t at = 0;
      bool moved = true;
      while (moved) {
        moved = false;
        for (uint32_t k = 0; k < i; k++) {
          const life *o = &lv[k];
          if (o->dies < lv[i].born || lv[i].dies < o->born) continue; /* lifetimes apart */
          if (at < o->offset + align_up(o->bytes) && o->offset < at + align_up(lv[i].bytes)) {
            at = o->offset + align_up(o->bytes);
            moved = true;
          }
        }
      }
      lv[i].offset = at;
      if (at + align_up(lv[i].bytes) > top) top = at + align_up(lv[i].bytes);
    }
    for (uint32_t i = 0; i < n_life; i++) p->slots[lv[i].v].offset = fixed + lv[i].offset;
    pd->bytes = fixed + top;
  }
  free(keep), free(step_of), free(born), free(dies), free(lv);
  return st;
}
