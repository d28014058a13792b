/*
 * test_trace.c — the simulated step's intervals (dpc_simulate_step_trace), which the HTML
 * report draws as its timeline: keeping them changes no prediction; each device's intervals
 * follow one another inside the step and the last ends it; its kernels and copies add up to the
 * compute the simulator reports, its collectives to its communication; a pipeline's later
 * stage starts by waiting for the first; in a mixed plan (the host's CPU beside a GPU), values
 * that cross between the two kinds pay the bus, and only those.
 *
 * The plans are of the transformer example with fixed device speeds (a machine's calibration
 * would make the test its own).
 */
#include "driver/driver.h"
#include "partitioner/cost.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "plan_fixture.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>

/* Simulate p without and with the trace; check the trace against the prediction. Returns the
 * trace (the caller frees it) for checks of its own. */
static dpc_sim_trace traced(const dpc_plan *p, const char *what) {
  dpc_sim_trace t = {0};
  dpc_diag d;
  dpc_diag_init(&d);
  uint32_t D = p->n_devs;
  dpc_node_cost *c = calloc(p->g->n_nodes, sizeof *c);
  dpc_device_speed *sp = calloc(D, sizeof *sp);
  dpc_sim_device *plain = calloc(D, sizeof *plain), *sim = calloc(D, sizeof *sim);
  double *compute = calloc(D, sizeof *compute), *comm = calloc(D, sizeof *comm),
         *last = calloc(D, sizeof *last);
  uint32_t *comms = calloc(D, sizeof *comms);
  CHECK(c && sp && plain && sim && compute && comm && last && comms &&
        dpc_cost_graph(p->g, c, &d) == DPC_OK);
  for (uint32_t k = 0; sp && k < D; k++) sp[k] = unit_plan_speed();
  double step = dpc_simulate_step(p, c, sp, plain);
  double step_t = dpc_simulate_step_trace(p, c, sp, sim, &t);
  CHECK_MSG(step > 0 && step == step_t, "%s: the step is %.9g s traced, %.9g s not", what, step_t,
            step);
  CHECK_MSG(!t.oom && t.n > 0, "%s: %u intervals", what, t.n);
  double end = 0;
  uint32_t bad = 0;
  for (uint32_t i = 0; i < t.n; i++) {
    const dpc_sim_span *s = &t.spans[i];
    if (s->device >= D) {
      bad++;
      continue;
    }
    /* in order on its device, inside the step, not empty */
    if (s->start_s < last[s->device] - 1e-15 || s->end_s <= s->start_s || s->end_s > step + 1e-15)
      bad++;
    last[s->device] = s->end_s;
    if (s->end_s > end) end = s->end_s;
    if (s->kind == DPC_SIM_KERNEL || s->kind == DPC_SIM_COPY)
      compute[s->device] += s->end_s - s->start_s;
    if (s->kind == DPC_SIM_COMM) comm[s->device] += s->end_s - s->start_s, comms[s->device]++;
  }
  CHECK_MSG(bad == 0, "%s: %u intervals out of order, empty or past the step", what, bad);
  CHECK_MSG(end == step, "%s: the last interval ends at %.9g s, the step at %.9g s", what, end,
            step);
  for (uint32_t k = 0; k < D; k++) {
    CHECK_MSG(fabs(compute[k] - sim[k].compute_s) <= 1e-9 * sim[k].compute_s + 1e-15,
              "%s: device %u computes %.9g s in its intervals, %.9g s by the simulator", what, k,
              compute[k], sim[k].compute_s);
    CHECK_MSG(fabs(comm[k] - sim[k].comm_s) <= 1e-9 * sim[k].comm_s + 1e-15 &&
                  comms[k] == sim[k].comms,
              "%s: device %u communicates %.9g s in %u intervals, %.9g s in %u by the simulator",
              what, k, comm[k], comms[k], sim[k].comm_s, sim[k].comms);
  }
  free(c), free(sp), free(plain), free(sim), free(compute), free(comm), free(last), free(comms);
  dpc_diag_free(&d);
  return t;
}

/* The plan of 2 devices in replicas of mp, traced: its intervals of one kind. */
static uint32_t spans_of(uint32_t mp, dpc_sim_kind kind, const char *what) {
  dpc_plan *p = unit_plan_transformer(2, mp, 64, 1, DPC_SCHEDULE_NONE, NULL);
  if (!p) return 0;
  dpc_sim_trace t = traced(p, what);
  uint32_t n = 0;
  for (uint32_t i = 0; i < t.n; i++) n += t.spans[i].kind == kind;
  dpc_sim_trace_free(&t);
  dpc_plan_free(p);
  return n;
}

/* Data parallel over 2: each device's all-reduces are intervals of their own. */
static void data_parallel(void) {
  uint32_t comm = spans_of(1, DPC_SIM_COMM, "data parallel on 2");
  CHECK_MSG(comm > 0, "data parallel on 2: %u collective intervals", comm);
}

/* A pipeline of 2 stages and 4 micro-batches: the last stage's first backward kernel starts
 * after the first stage's forward pass of micro-batch 0 ends (the loss needs its activations),
 * and the last stage waits at some point for the first. */
static void pipeline(void) {
  dpc_plan *p = unit_plan_transformer(2, 2, 64, 4, DPC_SCHEDULE_1F1B, NULL);
  if (!p) return;
  dpc_sim_trace t = traced(p, "pipeline of 2 stages");
  uint32_t stage[2] = {0, 0};
  CHECK(dpc_pipeline_stages(p, 2, stage) == 2);
  double fwd0_end = -1, bwd1_start = -1; /* stage 0's forward of mb 0, stage 1's first backward */
  uint32_t waits1 = 0;
  for (uint32_t i = 0; i < t.n; i++) {
    const dpc_sim_span *s = &t.spans[i];
    uint32_t st = stage[s->device];
    if (st == 1 && s->kind == DPC_SIM_WAIT) waits1++;
    if (s->kind != DPC_SIM_KERNEL) continue;
    const dpc_node *n = &p->g->nodes[s->node];
    if (st == 0 && n->phase == DPC_PHASE_FORWARD && n->mb == 0 && s->end_s > fwd0_end)
      fwd0_end = s->end_s;
    if (st == 1 && n->phase == DPC_PHASE_BACKWARD && bwd1_start < 0) bwd1_start = s->start_s;
  }
  CHECK_MSG(fwd0_end > 0 && bwd1_start >= fwd0_end && waits1 > 0,
            "the last stage's first backward kernel starts at %g s, the first stage's forward of "
            "micro-batch 0 ends at %g s; the last stage waits %u times",
            bwd1_start, fwd0_end, waits1);
  dpc_sim_trace_free(&t);
  dpc_plan_free(p);
}

/* Model parallel over 2 devices placed by METIS: one of them waits for the other. */
static void model_parallel(void) {
  uint32_t waits = spans_of(2, DPC_SIM_WAIT, "model parallel on 2");
  CHECK_MSG(waits > 0, "model parallel on 2: %u waits", waits);
}

/* The step of p with device 0 the host's CPU (host0) or not, and every device's bus at gbs. */
static double step_with_bus(const dpc_plan *p, bool host0, double gbs) {
  dpc_diag d;
  dpc_diag_init(&d);
  uint32_t D = p->n_devs;
  dpc_node_cost *c = calloc(p->g->n_nodes, sizeof *c);
  dpc_device_speed *sp = calloc(D, sizeof *sp);
  dpc_sim_device *sim = calloc(D, sizeof *sim);
  double step = 0;
  if (c && sp && sim && dpc_cost_graph(p->g, c, &d) == DPC_OK) {
    for (uint32_t k = 0; k < D; k++) {
      sp[k] = unit_plan_speed();
      sp[k].host = host0 && k == 0;
      sp[k].bus_gbs = gbs, sp[k].bus_latency_s = gbs > 0 ? 1e-5 : 0;
    }
    step = dpc_simulate_step(p, c, sp, sim);
  }
  free(c), free(sp), free(sim);
  dpc_diag_free(&d);
  return step;
}

/* A pipeline of 2 stages with stage 0 the host's CPU: a slow bus lengthens the step by at least
 * what crosses it; the same bus between devices of one kind changes nothing. */
static void bus_between_kinds(void) {
  dpc_plan *p = unit_plan_transformer(2, 2, 64, 4, DPC_SCHEDULE_1F1B, NULL);
  if (!p) return;
  double plain = step_with_bus(p, false, 0);
  double same_kind = step_with_bus(p, false, 0.01);
  double mixed = step_with_bus(p, true, 0.01);
  dpc_node_cost *c = calloc(p->g->n_nodes, sizeof *c);
  dpc_device_speed sp[2] = {unit_plan_speed(), unit_plan_speed()};
  dpc_sim_device sim[2];
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(c && dpc_cost_graph(p->g, c, &d) == DPC_OK);
  dpc_simulate_step(p, c, sp, sim);
  /* every crossing pays its bytes at 0.01 GB/s; not all of them are on the critical path (here
   * about half are: 46 ms of 92) */
  double crossed = sim[0].comm_bytes + sim[1].comm_bytes;
  CHECK_MSG(plain > 0 && same_kind == plain,
            "a bus between devices of one kind: step %.9g s, %.9g s without", same_kind, plain);
  CHECK_MSG(crossed > 0 && mixed > plain + crossed / 4 / 0.01e9,
            "CPU and GPU over a 0.01 GB/s bus: step %.6g s against %.6g s, %.0f bytes crossing",
            mixed, plain, crossed);
  free(c);
  dpc_diag_free(&d);
  dpc_plan_free(p);
}

const unit_test unit_tests[] = {
    {"bus_between_kinds", bus_between_kinds},
    {"data_parallel", data_parallel},
    {"pipeline", pipeline},
    {"model_parallel", model_parallel},
    {NULL, NULL},
};
