/*
 * plan_check.c — a plan's communication proven matched before it runs (plan.h).
 *
 * The step lists are played with the rules the runtime keeps, in-process or across ranks: a
 * wait blocks until its event is signalled; a collective blocks until every device it connects
 * stands at its step; everything else goes on. Each device advances as far as it can, round
 * after round. When no device can move and some have steps left, the plan would hang: the
 * message names a stuck device's step and the step of the device it waits for. A wait whose
 * event nobody signals (a missing send), a signal nobody waits for (a missing receive: events
 * exist only for values read on another device), and a collective a member has no step for are
 * named before playing, and after those any step that reads a value before its device has it (a
 * reordering gone wrong: it hangs nothing, it computes on stale bytes).
 */
#include "ir/plan.h"

#include <stdio.h>
#include <stdlib.h>

static bool is_collective(const dpc_plan *p, const dpc_step *sp) {
  return sp->kind == DPC_STEP_KERNEL && p->n_devs > 1 &&
         dpc_op_has(p->g->nodes[sp->node].op, DPC_OPF_COMM);
}

/* "cpu:1 step 7 (waits for 'h' from cpu:0)" */
static void describe(const dpc_plan *p, uint32_t dev, uint32_t j, char *buf, size_t n) {
  const dpc_graph *g = p->g;
  if (j >= p->devs[dev].n_steps) {
    snprintf(buf, n, "%s (done)", p->devs[dev].name);
    return;
  }
  const dpc_step *sp = &p->devs[dev].steps[j];
  char v[96] = "?";
  if (sp->kind == DPC_STEP_WAIT || sp->kind == DPC_STEP_SIGNAL) {
    if (sp->src < g->n_values) dpc_graph_value_label(g, sp->src, v, sizeof v);
    if (sp->kind == DPC_STEP_WAIT)
      snprintf(buf, n, "%s step %u (waits for '%s' from %s)", p->devs[dev].name, j + 1, v,
               sp->peer < p->n_devs ? p->devs[sp->peer].name : "?");
    else
      snprintf(buf, n, "%s step %u (hands on '%s')", p->devs[dev].name, j + 1, v);
  } else if (is_collective(p, sp)) {
    const dpc_node *nd = &g->nodes[sp->node];
    dpc_graph_value_label(g, nd->out, v, sizeof v);
    snprintf(buf, n, "%s step %u (%s of '%s')", p->devs[dev].name, j + 1, dpc_op_name(nd->op), v);
  } else {
    /* in a micro-batched step, which part of dpc plan's pipeline order the kernel is */
    const dpc_node *nd = sp->kind == DPC_STEP_KERNEL ? &g->nodes[sp->node] : NULL;
    uint8_t ph = nd ? nd->phase : DPC_PHASE_NONE;
    char part[32] = "";
    if (ph == DPC_PHASE_FORWARD || ph == DPC_PHASE_BACKWARD)
      snprintf(part, sizeof part, " (in %c%u)", ph == DPC_PHASE_FORWARD ? 'F' : 'B',
               (unsigned)nd->mb);
    else if (ph == DPC_PHASE_STEP)
      snprintf(part, sizeof part, " (the optimizer's)");
    snprintf(buf, n, "%s step %u%s", p->devs[dev].name, j + 1, part);
  }
}

/* Whether every member of collective step sp (on dev) stands at a step of the same node. */
static bool members_ready(const dpc_plan *p, const dpc_step *sp, const uint32_t *pc,
                          uint32_t *late) {
  const dpc_graph *g = p->g;
  const dpc_node *nd = &g->nodes[sp->node];
  for (uint32_t k = 0; k < nd->n_in; k++) {
    uint32_t m = p->slots[dpc_node_inputs(g, nd)[k]].device;
    const dpc_plan_device *md = &p->devs[m];
    if (pc[m] >= md->n_steps || md->steps[pc[m]].kind != DPC_STEP_KERNEL ||
        md->steps[pc[m]].node != sp->node) {
      *late = m;
      return false;
    }
  }
  return true;
}

/* Whether every step reads only what is there: on its own device a value made by an earlier
 * step, from another device one an earlier wait received, and sources anywhere. Playing the
 * communication cannot see this: a reordering that runs a kernel before what it reads on its own
 * device, or before its wait, hangs nothing and computes on stale bytes. */
static dpc_status check_order(const dpc_plan *p, dpc_diag *d) {
  const dpc_graph *g = p->g;
  uint32_t *have = calloc(g->n_values ? g->n_values : 1, sizeof *have); /* device + 1 */
  if (!have) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; i < p->n_devs && !st; i++) {
    uint32_t mark = i + 1;
    for (uint32_t j = 0; j < p->devs[i].n_steps && !st; j++) {
      const dpc_step *sp = &p->devs[i].steps[j];
      uint32_t missing = DPC_NONE;
      if (sp->kind == DPC_STEP_WAIT) {
        if (sp->src < g->n_values) have[sp->src] = mark;
        continue;
      }
      if (sp->kind == DPC_STEP_SIGNAL || sp->kind == DPC_STEP_COPY) {
        if (sp->src < g->n_values && have[sp->src] != mark) missing = sp->src;
      } else if (sp->kind == DPC_STEP_KERNEL) {
        const dpc_node *nd = &g->nodes[sp->node];
        bool comm = is_collective(p, sp);
        for (uint32_t k = 0; k < nd->n_in && missing == DPC_NONE; k++) {
          uint32_t v = dpc_node_inputs(g, nd)[k];
          if (dpc_op_has(g->nodes[g->values[v].node].op, DPC_OPF_SOURCE)) continue;
          if (comm && p->slots[v].device != i) continue; /* another member's share */
          if (have[v] != mark) missing = v;
        }
        for (uint32_t k = 0; k < nd->n_out; k++)
          if (!comm || p->slots[nd->out + k].device == i) have[nd->out + k] = mark;
      }
      if (missing == DPC_NONE) continue;
      char a[256], v[96];
      describe(p, i, j, a, sizeof a);
      dpc_graph_value_label(g, missing, v, sizeof v);
      uint32_t from = p->slots[missing].device;
      if (from == i || from >= p->n_devs)
        st = dpc_diag_fail(d, DPC_ERR_INVALID,
                           "%s reads '%s' before the step that makes it (the plan's steps are out "
                           "of order)",
                           a, v);
      else
        st = dpc_diag_fail(d, DPC_ERR_INVALID,
                           "%s reads '%s' from %s before it waits for it (the plan's steps are out "
                           "of order)",
                           a, v, p->devs[from].name);
    }
  }
  free(have);
  return st;
}

static dpc_status check_ends(const dpc_plan *p, const bool *signalled_somewhere,
                             const bool *waited_somewhere, dpc_diag *d) {
  const dpc_graph *g = p->g;
  char a[256];
  for (uint32_t i = 0; i < p->n_devs; i++)
    for (uint32_t j = 0; j < p->devs[i].n_steps; j++) {
      const dpc_step *sp = &p->devs[i].steps[j];
      if (sp->kind == DPC_STEP_WAIT &&
          (sp->event >= p->n_events || !signalled_somewhere[sp->event])) {
        describe(p, i, j, a, sizeof a);
        return dpc_diag_fail(d, DPC_ERR_INVALID,
                             "%s waits for a value no device hands on (a missing send)", a);
      }
      /* events exist only for values read on another device */
      if (sp->kind == DPC_STEP_SIGNAL &&
          (sp->event >= p->n_events || !waited_somewhere[sp->event])) {
        describe(p, i, j, a, sizeof a);
        return dpc_diag_fail(d, DPC_ERR_INVALID,
                             "%s hands on a value no device waits for (a missing receive)", a);
      }
      if (!is_collective(p, sp)) continue;
      const dpc_node *nd = &g->nodes[sp->node];
      for (uint32_t k = 0; k < nd->n_in; k++) {
        uint32_t m = p->slots[dpc_node_inputs(g, nd)[k]].device, has = 0;
        for (uint32_t q = 0; q < p->devs[m].n_steps; q++)
          has +=
              p->devs[m].steps[q].kind == DPC_STEP_KERNEL && p->devs[m].steps[q].node == sp->node;
        if (has != 1) {
          describe(p, i, j, a, sizeof a);
          return dpc_diag_fail(d, DPC_ERR_INVALID,
                               "%s: %s, which it connects, has %u steps for it instead of one", a,
                               p->devs[m].name, has);
        }
      }
    }
  return DPC_OK;
}

dpc_status dpc_plan_check_comm(const dpc_plan *p, dpc_diag *d) {
  uint32_t n = p->n_devs, ne = p->n_events ? p->n_events : 1;
  uint32_t *pc = calloc(n ? n : 1, sizeof *pc);
  bool *sig = calloc(ne, sizeof *sig), *somewhere = calloc(ne, sizeof *somewhere);
  bool *waited = calloc(ne, sizeof *waited);
  dpc_status st =
      pc && sig && somewhere && waited ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; !st && i < n; i++)
    for (uint32_t j = 0; j < p->devs[i].n_steps; j++) {
      const dpc_step *sp = &p->devs[i].steps[j];
      if (sp->event >= p->n_events) continue;
      if (sp->kind == DPC_STEP_SIGNAL) somewhere[sp->event] = true;
      if (sp->kind == DPC_STEP_WAIT) waited[sp->event] = true;
    }
  if (!st) st = check_ends(p, somewhere, waited, d);
  if (!st) st = check_order(p, d);
  for (bool moved = true; !st && moved;) {
    moved = false;
    for (uint32_t i = 0; i < n; i++)
      while (pc[i] < p->devs[i].n_steps) {
        const dpc_step *sp = &p->devs[i].steps[pc[i]];
        uint32_t late;
        if (sp->kind == DPC_STEP_WAIT && !sig[sp->event]) break;
        if (is_collective(p, sp)) {
          if (!members_ready(p, sp, pc, &late)) break;
          /* every member passes it together */
          const dpc_node *nd = &p->g->nodes[sp->node];
          for (uint32_t k = 0; k < nd->n_in; k++) {
            uint32_t m = p->slots[dpc_node_inputs(p->g, nd)[k]].device;
            if (m != i) pc[m]++;
          }
        }
        if (sp->kind == DPC_STEP_SIGNAL) sig[sp->event] = true;
        pc[i]++;
        moved = true;
      }
  }
  for (uint32_t i = 0; !st && i < n; i++) {
    if (pc[i] >= p->devs[i].n_steps) continue;
    const dpc_step *sp = &p->devs[i].steps[pc[i]];
    uint32_t other = sp->kind == DPC_STEP_WAIT ? sp->peer : 0;
    if (sp->kind != DPC_STEP_WAIT) (void)members_ready(p, sp, pc, &other);
    char a[256], b[256];
    describe(p, i, pc[i], a, sizeof a);
    describe(p, other, pc[other], b, sizeof b);
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "the plan would hang: %s waits for %s, which cannot go on (the devices' "
                       "communication is not matched)",
                       a, b);
  }
  free(pc);
  free(sig);
  free(somewhere);
  free(waited);
  return st;
}
