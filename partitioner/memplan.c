/*
 * memplan.c — a plan's activations share memory by lifetime (see partitioner.h).
 *
 * The plans give every value a slot of its own. A training step then holds every activation and
 * every gradient at once, though most live for a few kernels; a step of M micro-batches
 * (accumulation, a pipeline) holds all M micro-batches' activations at once, whatever the order,
 * which is what GPipe needs and 1F1B was made to avoid. So after the schedule has fixed each
 * device's order, the values of the step (of a micro-batched step: the micro-batches' forward
 * and backward passes) are laid out again: each
 * lives from the step whose kernel writes it to the last step on its device whose kernel reads
 * it (a fusion group's members are written and read when the group's root runs), and two values
 * may share bytes when those lifetimes do not meet. First fit by the step a value appears, in
 * a region after the values that keep their own slots.
 *
 * Left alone: the sources (params, state, inputs), the outputs, the loss and the updates' values
 * and targets (read after the step), in a micro-batched step everything outside the
 * micro-batches (the averaged gradients, the optimizer), values read on another device (the
 * reader's timing is its own), values a collective touches, and values sharing a slot already (an
 * update computed in its target's slot).
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

static int cmp_size(const void *a, const void *b) {
  const life *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return cmp_born(a, b);
}

static uint64_t align_up(uint64_t n) {
  return (n + DPC_SLOT_ALIGN - 1) / DPC_SLOT_ALIGN * DPC_SLOT_ALIGN;
}

/* Each value in turn at the lowest address clear of the values placed before it that are alive
 * at the same time; the bytes all of them span. */
static uint64_t first_fit(life *lv, uint32_t n_life) {
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
  return top;
}

typedef struct placed {
  uint32_t device, v;
  uint64_t offset;
} placed;

static int cmp_placed(const void *a, const void *b) {
  const placed *x = a, *y = b;
  if (x->device != y->device) return x->device < y->device ? -1 : 1;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->v < y->v ? -1 : x->v > y->v;
}

/* Every pass below is over one device's steps and values, or a sort: a pipeline replicated over
 * many devices is planned in seconds (scanning every node and value for each device, and every
 * pair of values, was quadratic in the devices). */
dpc_status dpc_plan_share_activations(dpc_plan *p, dpc_diag *d) {
  const dpc_graph *g = p->g;
  uint32_t nv = g->n_values ? g->n_values : 1, nn = g->n_nodes ? g->n_nodes : 1;
  bool *keep = calloc(nv, sizeof *keep);
  uint32_t *born = malloc(nv * sizeof *born), *dies = malloc(nv * sizeof *dies);
  uint32_t *mark = calloc(nv, sizeof *mark); /* born and dies hold for device mark - 1 */
  life *lv = malloc(nv * sizeof *lv), *by_size = malloc(nv * sizeof *by_size);
  placed *by_slot = malloc(nv * sizeof *by_slot);
  uint32_t *member = malloc(nn * sizeof *member),
           *first_member = calloc(nn + 1, sizeof *first_member);
  uint32_t *dev_first = calloc(p->n_devs + 1, sizeof *dev_first), *fill = malloc(nn * sizeof *fill);
  if (!keep || !born || !dies || !mark || !lv || !by_size || !by_slot || !member || !first_member ||
      !dev_first || !fill) {
    free(keep), free(born), free(dies), free(mark), free(lv), free(by_size), free(by_slot);
    free(member);
    free(first_member), free(dev_first), free(fill);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory planning memory");
  }
  /* what keeps its own slot */
  for (uint32_t v = 0; v < g->n_values; v++) {
    const dpc_node *n = &g->nodes[g->values[v].node];
    keep[v] = dpc_op_has(n->op, DPC_OPF_SOURCE) || dpc_op_has(n->op, DPC_OPF_COMM);
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
  /* values sharing a slot already: each with the next one in its slot */
  uint32_t n_placed = 0;
  for (uint32_t v = 0; v < g->n_values; v++)
    if (p->slots[v].bytes)
      by_slot[n_placed++] = (placed){p->slots[v].device, v, p->slots[v].offset};
  qsort(by_slot, n_placed, sizeof *by_slot, cmp_placed);
  for (uint32_t k = 0; k + 1 < n_placed; k++) {
    /* every value of a run sharing one offset (a chain computed in place has several) */
    const placed *a = &by_slot[k], *b = &by_slot[k + 1];
    if (a->device == b->device && a->offset == b->offset) keep[a->v] = keep[b->v] = true;
  }
  /* each kernel's nodes (its fusion group); by_slot stays in offset order on each device, so a
   * slot's values come one after another */
  for (uint32_t i = 0; i < g->n_nodes; i++) first_member[dpc_group_kernel(g, i) + 1]++;
  for (uint32_t i = 0; i < g->n_nodes; i++) first_member[i + 1] += first_member[i];
  for (uint32_t i = 0; i < g->n_nodes; i++) fill[i] = first_member[i];
  for (uint32_t i = 0; i < g->n_nodes; i++) member[fill[dpc_group_kernel(g, i)]++] = i;
  for (uint32_t k = 0; k < n_placed; k++) dev_first[by_slot[k].device + 1]++;
  for (uint32_t dv = 0; dv < p->n_devs; dv++) dev_first[dv + 1] += dev_first[dv];
  dpc_status st = DPC_OK;
  for (uint32_t dv = 0; dv < p->n_devs && !st; dv++) {
    dpc_plan_device *pd = &p->devs[dv];
    /* each value's first and last step on this device: written by a kernel that runs here
     * (a group's members when its root does), read by one */
    for (uint32_t j = 0; j < pd->n_steps; j++) {
      if (pd->steps[j].kind != DPC_STEP_KERNEL) continue;
      uint32_t r = pd->steps[j].node;
      for (uint32_t e = first_member[r]; e < first_member[r + 1]; e++) {
        const dpc_node *n = &g->nodes[member[e]];
        for (uint32_t k = 0; k < n->n_out + n->n_in; k++) {
          uint32_t v = k < n->n_out ? n->out + k : dpc_node_inputs(g, n)[k - n->n_out];
          if (mark[v] != dv + 1) mark[v] = dv + 1, born[v] = UINT32_MAX, dies[v] = 0;
          if (k < n->n_out && j < born[v]) born[v] = j;
          if (j > dies[v]) dies[v] = j;
        }
      }
    }
    /* the kept values, laid out again one after another in their old order; the values of a
     * shared slot (consecutive here) keep sharing it at its new offset */
    uint32_t n_life = 0;
    uint64_t fixed = 0, last_old = UINT64_MAX, last_new = 0;
    for (uint32_t k = dev_first[dv]; k < dev_first[dv + 1]; k++) {
      uint32_t v = by_slot[k].v;
      dpc_slot *s = &p->slots[v];
      uint32_t b = mark[v] == dv + 1 ? born[v] : UINT32_MAX;
      if (!keep[v] && b != UINT32_MAX) {
        lv[n_life++] = (life){v, b, dies[v] < b ? b : dies[v], s->bytes, 0};
        continue;
      }
      if (by_slot[k].offset == last_old) { /* joins that slot */
        s->offset = last_new;
        continue;
      }
      last_old = by_slot[k].offset, last_new = fixed;
      s->offset = fixed;
      fixed += align_up(s->bytes);
    }
    /* first fit taking the values by the step they appear, and again largest first; the
     * smaller layout wins. By appearance alone, long-lived gradients of gradient accumulation
     * (a running sum per weight) land above short-lived ones and leave holes as they move
     * between micro-batches: wide_mlp at 8 micro-batches spanned 54 MB where 41 MB are ever
     * alive at once. Largest first packs those; by appearance suits activations in a chain. */
    qsort(lv, n_life, sizeof *lv, cmp_born);
    uint64_t top = first_fit(lv, n_life);
    memcpy(by_size, lv, n_life * sizeof *lv);
    qsort(by_size, n_life, sizeof *by_size, cmp_size);
    uint64_t top_size = first_fit(by_size, n_life);
    const life *best = top_size < top ? by_size : lv;
    if (top_size < top) top = top_size;
    for (uint32_t i = 0; i < n_life; i++) p->slots[best[i].v].offset = fixed + best[i].offset;
    pd->bytes = fixed + top;
  }
  free(keep), free(born), free(dies), free(mark), free(lv), free(by_size), free(by_slot);
  free(member);
  free(first_member), free(dev_first), free(fill);
  return st;
}
