/*
 * pipeline.c — pipeline schedules: each device's steps of a micro-batched step reordered into
 * GPipe's or 1F1B's order, and the live activation memory the order needs (see partitioner.h).
 *
 * A pipelined step is the accumulation graph (accumulate.c) placed in stages (the device line
 * placement repair makes), so every node knows its micro-batch and phase. Planned in graph
 * order, each device would run micro-batch 0's forward and backward before micro-batch 1's
 * forward: stage 0 would wait for the whole pipeline's round trip every micro-batch. The
 * schedules reorder each device's steps by (phase, micro-batch):
 *
 *   GPipe: F0 F1 .. F(M-1) B0 B1 .. B(M-1)        every stage the same
 *   1F1B:  stage s runs w = min(S - 1 - s, M) forwards, then alternates one forward and one
 *          backward (F(w+i) B(i)), then the backwards left: at most S - s micro-batches'
 *          activations are alive at once, against GPipe's M.
 *
 * Steps keep their order within one (phase, micro-batch): a kernel's waits stay before it and
 * its signals after it. Backward k always comes after forward k and in increasing k on every
 * stage, so the gradients are summed in the same order as without a pipeline: the result is
 * bit-identical to accumulation. Shared steps come first, the optimizer's last.
 */
#include "partitioner/partitioner.h"

#include <stdlib.h>
#include <string.h>

#define STEP_KEY(M) (3 * (M) + 1) /* past every forward and backward of either schedule */

/* The position of (phase, micro-batch) in stage s's order; shared first, the step last. 1F1B's
 * positions are not dense (a slot without a forward leaves a gap), so they reach 1 + w + 2(M-1)
 * + 1 <= 3M: the step is placed past that, not at 2M + 1, which came before the last backwards
 * of a stage with w > 2 (the optimizer read gradient sums still missing micro-batches). */
static uint32_t position(uint8_t phase, uint32_t mb, uint32_t s, uint32_t S, uint32_t M,
                         dpc_pipeline_schedule kind) {
  if (phase == DPC_PHASE_SHARED || phase == DPC_PHASE_NONE) return 0;
  if (phase == DPC_PHASE_STEP) return STEP_KEY(M);
  bool fwd = phase == DPC_PHASE_FORWARD;
  if (kind == DPC_SCHEDULE_GPIPE) return 1 + (fwd ? mb : M + mb);
  uint32_t w = S - 1 - s < M ? S - 1 - s : M;
  if (fwd && mb < w) return 1 + mb; /* warm-up */
  /* steady state: slot i holds F(w + i) then B(i) */
  if (fwd) return 1 + w + 2 * (mb - w);
  uint32_t i = mb;
  return 1 + w + 2 * i + (w + i < M ? 1 : 0);
}

typedef struct unit {
  uint32_t first, n; /* steps [first, first + n) */
  uint32_t key;
} unit;

static int cmp_unit(const void *a, const void *b) {
  const unit *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->first < y->first ? -1 : x->first > y->first;
}

/* Whether device dv runs a kernel of a micro-batch's forward pass. */
static bool runs_forward(const dpc_plan *p, uint32_t dv) {
  for (uint32_t j = 0; j < p->devs[dv].n_steps; j++) {
    const dpc_step *st = &p->devs[dv].steps[j];
    if (st->kind == DPC_STEP_KERNEL && p->g->nodes[st->node].phase == DPC_PHASE_FORWARD)
      return true;
  }
  return false;
}

uint32_t dpc_pipeline_filled(const dpc_plan *p, uint32_t mp, uint32_t dv) {
  if (mp < 1) mp = 1;
  uint32_t base = dv / mp * mp, filled = 0;
  for (uint32_t b = base; b < base + mp && b < p->n_devs; b++) filled += runs_forward(p, b);
  return filled;
}

dpc_status dpc_pipeline_order(dpc_plan *p, uint32_t S, uint32_t M, dpc_pipeline_schedule kind,
                              const uint32_t *stage_of_device, dpc_diag *d) {
  const dpc_graph *g = p->g;
  uint32_t filled = 0;
  for (uint32_t dv = 0; dv < p->n_devs; dv++) {
    dpc_plan_device *pd = &p->devs[dv];
    /* 1F1B's warm-up counts the stages that forward work flows through: with stages the
     * placement left empty counted, the filled ones would warm up as if further from the end
     * and run most of GPipe's order, holding as many activations */
    if (S && dv % S == 0) filled = dpc_pipeline_filled(p, S, dv);
    if (!pd->n_steps) continue; /* a stage the placement left empty */
    uint32_t s = stage_of_device[dv];
    uint32_t line = s < filled ? filled : s + 1; /* a device without forwards: no warm-up */
    unit *u = calloc(pd->n_steps ? pd->n_steps : 1, sizeof *u);
    dpc_step *out = malloc((pd->n_steps ? pd->n_steps : 1) * sizeof *out);
    if (!u || !out) {
      free(u), free(out);
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory ordering the pipeline");
    }
    /* units: the waits before a kernel, the kernel, the signals after it; a copy alone */
    uint32_t n = 0;
    for (uint32_t j = 0; j < pd->n_steps;) {
      uint32_t first = j;
      while (j < pd->n_steps && pd->steps[j].kind == DPC_STEP_WAIT) j++;
      uint32_t key = STEP_KEY(M) + 1; /* a copy (state update): after the step */
      if (j < pd->n_steps && pd->steps[j].kind == DPC_STEP_KERNEL) {
        const dpc_node *nd = &g->nodes[pd->steps[j].node];
        key = position(nd->phase, nd->mb, s, line, M, kind);
      }
      j++;
      while (j < pd->n_steps && pd->steps[j].kind == DPC_STEP_SIGNAL) j++;
      if (j > pd->n_steps) j = pd->n_steps;
      u[n++] = (unit){first, j - first, key};
    }
    qsort(u, n, sizeof *u, cmp_unit);
    uint32_t at = 0;
    for (uint32_t k = 0; k < n; k++) {
      memcpy(out + at, pd->steps + u[k].first, u[k].n * sizeof *out);
      at += u[k].n;
    }
    memcpy(pd->steps, out, pd->n_steps * sizeof *out);
    free(u), free(out);
  }
  return DPC_OK;
}

uint32_t dpc_pipeline_stages(const dpc_plan *p, uint32_t mp, uint32_t *stage_of_device) {
  const dpc_graph *g = p->g;
  uint32_t n = p->n_devs;
  if (mp < 1) mp = 1;
  /* edge[a * n + b]: a forward kernel on b reads a forward value made on a */
  bool *edge = calloc((size_t)n * n, sizeof *edge), *has = calloc(n, sizeof *has);
  bool *done = calloc(n, sizeof *done);
  if (!edge || !has || !done) {
    free(edge), free(has), free(done);
    return 0;
  }
  for (uint32_t b = 0; b < n; b++) {
    has[b] = runs_forward(p, b);
    for (uint32_t j = 0; j < p->devs[b].n_steps; j++) {
      const dpc_step *st = &p->devs[b].steps[j];
      if (st->kind != DPC_STEP_KERNEL) continue;
      const dpc_node *nd = &g->nodes[st->node];
      if (nd->phase != DPC_PHASE_FORWARD) continue;
      for (uint32_t k = 0; k < nd->n_in; k++) {
        uint32_t v = dpc_node_inputs(g, nd)[k], a = p->slots[v].device;
        if (a < n && a != b && g->nodes[g->values[v].node].phase == DPC_PHASE_FORWARD)
          edge[(size_t)a * n + b] = true;
      }
    }
  }
  /* within each replica's group of mp devices: a topological order of the devices, the first
   * ready (lowest index) first; devices without a forward kernel last */
  for (uint32_t base = 0; base < n; base += mp) {
    uint32_t end = base + mp < n ? base + mp : n, next = 0;
    for (uint32_t round = base; round < end; round++) {
      uint32_t pick = end;
      for (uint32_t b = base; b < end && pick == end; b++) {
        if (done[b] || !has[b]) continue;
        bool ready = true;
        for (uint32_t a = base; a < end; a++) ready &= done[a] || !edge[(size_t)a * n + b];
        if (ready) pick = b;
      }
      if (pick == end) /* the rest: no forward kernel, or a cycle the model's placement made */
        for (uint32_t b = base; b < end && pick == end; b++)
          if (!done[b]) pick = b;
      done[pick] = true;
      stage_of_device[pick] = next++;
    }
  }
  free(edge), free(has), free(done);
  return mp;
}

/* Whether value v is an activation: made by a micro-batch's forward pass (kept for its
 * backward pass, which is what a schedule decides the lifetime of). */
static bool activation(const dpc_graph *g, uint32_t v) {
  const dpc_node *n = &g->nodes[g->values[v].node];
  return !dpc_op_has(n->op, DPC_OPF_SOURCE) && n->phase == DPC_PHASE_FORWARD;
}

uint64_t dpc_pipeline_live_peak(const dpc_plan *p, uint32_t dv) {
  const dpc_graph *g = p->g;
  const dpc_plan_device *pd = &p->devs[dv];
  uint32_t *last = malloc((g->n_values ? g->n_values : 1) * sizeof *last);
  uint32_t *born = malloc((g->n_values ? g->n_values : 1) * sizeof *born);
  int64_t *delta = calloc(pd->n_steps + 1, sizeof *delta);
  uint64_t peak = 0;
  if (!last || !born || !delta) goto out;
  for (uint32_t v = 0; v < g->n_values; v++) last[v] = born[v] = UINT32_MAX;
  /* a value is alive on this device from the step that makes it (or first reads it, when made
   * elsewhere) to the last step here that reads it */
  for (uint32_t j = 0; j < pd->n_steps; j++) {
    const dpc_step *st = &pd->steps[j];
    if (st->kind != DPC_STEP_KERNEL) continue;
    const dpc_node *n = &g->nodes[st->node];
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t v = dpc_node_inputs(g, n)[k];
      if (!activation(g, v) || p->slots[v].device != dv) continue;
      if (born[v] == UINT32_MAX) born[v] = j;
      last[v] = j;
    }
    for (uint32_t k = 0; k < n->n_out; k++) {
      uint32_t v = n->out + k;
      if (p->slots[v].device != dv) continue;
      if (born[v] == UINT32_MAX) born[v] = j;
      if (last[v] == UINT32_MAX || last[v] < j) last[v] = j;
    }
  }
  for (uint32_t v = 0; v < g->n_values; v++) {
    if (born[v] == UINT32_MAX || !activation(g, v)) continue;
    bool kept = false; /* an output or an update's value lives to the end */
    for (uint32_t o = 0; o < g->n_outputs; o++) kept |= g->outputs[o] == v;
    for (uint32_t u = 0; u < g->n_updates; u++) kept |= g->updates[u].value == v;
    uint32_t end = kept ? pd->n_steps : last[v] + 1;
    delta[born[v]] += (int64_t)p->slots[v].bytes;
    delta[end] -= (int64_t)p->slots[v].bytes;
  }
  int64_t live = 0;
  for (uint32_t j = 0; j <= pd->n_steps; j++) {
    live += delta[j];
    if (live > (int64_t)peak) peak = (uint64_t)live;
  }
out:
  free(last), free(born), free(delta);
  return peak;
}
