/*
 * simulate.c — a plan's step, predicted: each device's compute and communication from the cost
 * model at its calibrated speed, and a small event simulation of the step lists (see
 * partitioner.h), optionally with each device's intervals (the timeline of a report).
 */
#include "partitioner/partitioner.h"

#include "partitioner/collective.h"

#include <stdlib.h>
#include <string.h>

/* Each device's predicted compute (cost model, calibrated speed) and communication: an
 * all-reduce moves 2 (D-1)/D of its bytes per device, at the devices' copy bandwidth. */
static void summarise(const dpc_plan *p, const dpc_node_cost *c, const dpc_device_speed *speed,
                      dpc_sim_device *out) {
  const dpc_graph *g = p->g;
  for (uint32_t i = 0; i < p->n_devs; i++) {
    dpc_device_speed sp = speed[i];
    dpc_sim_device *s = &out[i];
    memset(s, 0, sizeof *s);
    for (uint32_t j = 0; j < p->devs[i].n_steps; j++) {
      const dpc_step *st = &p->devs[i].steps[j];
      if (st->kind == DPC_STEP_COPY) {
        s->compute_s += 2.0 * (double)p->slots[st->dst].bytes / (sp.mem_gbs * 1e9);
        continue;
      }
      if (st->kind != DPC_STEP_KERNEL) continue;
      const dpc_node *n = &g->nodes[st->node];
      if (dpc_op_has(n->op, DPC_OPF_COMM) && p->n_devs > 1) {
        double bytes = (double)p->slots[n->out].bytes * 2.0 * (p->n_devs - 1) / p->n_devs;
        s->comms++;
        s->comm_bytes += bytes;
        if (sp.link_gbs > 0) { /* a ring over the devices it joins, latency per step */
          dpc_link_speed l = {sp.link_gbs, sp.link_latency_s};
          dpc_link_speed b = {sp.between_gbs, sp.between_latency_s};
          double v = (double)p->slots[n->out].bytes;
          s->comm_s += sp.coll_per_host
                           ? dpc_allreduce_seconds(v, sp.coll_per_host, sp.coll_hosts, &l, &b)
                           : dpc_allreduce_seconds(v, n->n_in, 1, &l, NULL);
        } else { /* in shared memory: each byte moved is read and written, as a copy's */
          s->comm_s += 2.0 * bytes / (sp.mem_gbs * 1e9);
        }
        continue;
      }
      if (n->fused != DPC_NONE) continue;
      s->kernels++;
      s->compute_s += dpc_cost_kernel_seconds(g, c, st->node, &sp);
    }
  }
}

/* One interval of device dev into the trace (a no-op without one, or for an empty interval). A
 * failed allocation marks the trace instead of changing the prediction. */
static void trace_add(dpc_sim_trace *t, uint32_t dev, dpc_sim_kind kind, uint32_t node, double a,
                      double b) {
  if (!t || b <= a) return;
  if (DPC_VEC_RESERVE(t->spans, t->cap, t->n + 1)) {
    t->oom = true;
    return;
  }
  t->spans[t->n++] = (dpc_sim_span){a, b, dev, node, kind};
}

/* The step's predicted time: each device walks its step list with its own clock; a wait takes
 * the clock of the signal it waits for (a value crossing devices costs its bytes at the copy
 * bandwidth), a collective starts when every device has reached it. Returns the latest clock,
 * and adds the bytes that cross devices through events to each receiver's comm_bytes. */
static double simulate(const dpc_plan *p, const dpc_node_cost *c, const dpc_device_speed *speed,
                       dpc_sim_device *sum, dpc_sim_trace *tr) {
  uint32_t n = p->n_devs;
  double *clock = calloc(n, sizeof *clock), *sig = malloc((p->n_events + 1) * sizeof *sig);
  uint32_t *pos = calloc(n, sizeof *pos);
  double *ebytes = calloc(p->n_events + 1, sizeof *ebytes);
  uint32_t *esrc = calloc(p->n_events + 1, sizeof *esrc);
  if (!clock || !sig || !pos || !ebytes || !esrc) {
    free(clock), free(sig), free(pos), free(ebytes), free(esrc);
    return 0;
  }
  for (uint32_t e = 0; e <= p->n_events; e++) sig[e] = -1;
  const dpc_graph *g = p->g;
  /* each event's bytes: the value whose producer signals it */
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = 1; j < p->devs[i].n_steps; j++) {
      const dpc_step *st = &p->devs[i].steps[j];
      if (st->kind != DPC_STEP_SIGNAL) continue;
      uint32_t k = j; /* the kernel just before it (other signals may sit between) */
      while (k > 0 && p->devs[i].steps[k].kind != DPC_STEP_KERNEL) k--;
      const dpc_node *nd = &g->nodes[p->devs[i].steps[k].node];
      esrc[st->event] = i;
      for (uint32_t o = 0; o < nd->n_out; o++)
        ebytes[st->event] += (double)p->slots[nd->out + o].bytes;
    }
  bool progress = true;
  while (progress) {
    progress = false;
    for (uint32_t i = 0; i < n; i++) {
      dpc_device_speed sp = speed[i];
      while (pos[i] < p->devs[i].n_steps) {
        const dpc_step *st = &p->devs[i].steps[pos[i]];
        if (st->kind == DPC_STEP_WAIT) {
          if (sig[st->event] < 0) break;
          double eb = ebytes[st->event], arrive = sig[st->event];
          if (sp.bus_gbs > 0 && speed[esrc[st->event]].host != sp.host)
            arrive += sp.bus_latency_s + eb / (sp.bus_gbs * 1e9);
          else if (sp.link_gbs > 0)
            arrive += sp.link_latency_s + eb / (sp.link_gbs * 1e9);
          else
            arrive += eb / (sp.mem_gbs * 1e9);
          trace_add(tr, i, DPC_SIM_WAIT, DPC_NONE, clock[i], arrive);
          if (arrive > clock[i]) clock[i] = arrive;
          sum[i].comm_bytes += ebytes[st->event];
        } else if (st->kind == DPC_STEP_SIGNAL) {
          sig[st->event] = clock[i];
        } else if (st->kind == DPC_STEP_COPY) {
          double t0 = clock[i];
          clock[i] += 2.0 * (double)p->slots[st->dst].bytes / (sp.mem_gbs * 1e9);
          trace_add(tr, i, DPC_SIM_COPY, DPC_NONE, t0, clock[i]);
        } else if (st->kind == DPC_STEP_KERNEL && dpc_op_has(g->nodes[st->node].op, DPC_OPF_COMM) &&
                   n > 1) {
          /* every device it connects (its inputs' devices) must be at this collective */
          const dpc_node *cn = &g->nodes[st->node];
          bool all = true;
          double start = 0;
          for (uint32_t k = 0; k < cn->n_in && all; k++) {
            uint32_t q = p->slots[g->ids[cn->in + k]].device;
            const dpc_plan_device *pq = &p->devs[q];
            all = pos[q] < pq->n_steps && pq->steps[pos[q]].kind == DPC_STEP_KERNEL &&
                  pq->steps[pos[q]].node == st->node;
            if (all && clock[q] > start) start = clock[q];
          }
          if (!all) break;
          for (uint32_t k = 0; k < cn->n_in; k++) {
            uint32_t q = p->slots[g->ids[cn->in + k]].device;
            trace_add(tr, q, DPC_SIM_WAIT, DPC_NONE, clock[q], start);
            clock[q] = start + sum[q].comm_s / (sum[q].comms ? sum[q].comms : 1);
            trace_add(tr, q, DPC_SIM_COMM, st->node, start, clock[q]);
            if (q != i) pos[q]++;
          }
        } else if (st->kind == DPC_STEP_KERNEL) {
          double t0 = clock[i];
          clock[i] += dpc_cost_kernel_seconds(g, c, st->node, &sp);
          trace_add(tr, i, DPC_SIM_KERNEL, st->node, t0, clock[i]);
        }
        pos[i]++;
        progress = true;
      }
    }
  }
  double end = 0;
  for (uint32_t i = 0; i < n; i++)
    if (clock[i] > end) end = clock[i];
  free(clock), free(sig), free(pos), free(ebytes), free(esrc);
  return end;
}

/* Devices that share cores take turns on them: device i runs at its own speed over
 * 1 + the busy share of the step of each other device of its group (processor sharing; a device
 * busy all step halves its partner's speed, one that mostly waits barely slows it). The busy
 * shares come from the previous round's simulation, a few rounds to settle. */
#define SHARE_ROUNDS 4

double dpc_simulate_step(const dpc_plan *p, const dpc_node_cost *c, const dpc_device_speed *speed,
                         dpc_sim_device *out) {
  return dpc_simulate_step_trace(p, c, speed, out, NULL);
}

double dpc_simulate_step_trace(const dpc_plan *p, const dpc_node_cost *c,
                               const dpc_device_speed *speed, dpc_sim_device *out,
                               dpc_sim_trace *trace) {
  bool shared = false;
  for (uint32_t i = 0; i < p->n_devs; i++) shared |= speed[i].core_group != 0;
  summarise(p, c, speed, out);
  double step = simulate(p, c, speed, out, shared ? NULL : trace);
  if (!shared) return step;
  dpc_device_speed *sp = malloc(p->n_devs * sizeof *sp);
  double *busy = malloc(p->n_devs * sizeof *busy);
  bool traced = false; /* the last round records the trace */
  for (int round = 0; sp && busy && step > 0 && round < SHARE_ROUNDS; round++) {
    for (uint32_t i = 0; i < p->n_devs; i++) {
      double b = (out[i].compute_s + out[i].comm_s) / step;
      busy[i] = b < 1 ? b : 1;
    }
    for (uint32_t i = 0; i < p->n_devs; i++) {
      double slow = 1;
      for (uint32_t j = 0; j < p->n_devs && speed[i].core_group; j++)
        if (j != i && speed[j].core_group == speed[i].core_group) slow += busy[j];
      sp[i] = speed[i];
      sp[i].gflops /= slow, sp[i].mem_gbs /= slow;
    }
    summarise(p, c, sp, out);
    traced = round + 1 == SHARE_ROUNDS;
    step = simulate(p, c, sp, out, traced ? trace : NULL);
  }
  if (trace && !traced) { /* no rounds ran (out of memory, or an empty step): the first, recorded */
    summarise(p, c, speed, out);
    step = simulate(p, c, speed, out, trace);
  }
  free(sp), free(busy);
  return step;
}

void dpc_sim_trace_free(dpc_sim_trace *t) {
  free(t->spans);
  *t = (dpc_sim_trace){0};
}
