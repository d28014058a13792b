/*
 * test_scale.c — plans over many devices: placement, data parallel, hybrid and pipeline at 24,
 * 64 and 256 devices (DPC_MAX_DEVICES) finish in seconds and account for every device; past
 * the limit, an error that names it.
 *
 * The devices' speeds are fixed here (a machine's calibration would make the test its own), and
 * the plans are of the transformer example, which has fewer nodes than 256 devices.
 */
#include "frontend/frontend.h"
#include "ir/fusion.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "driver/calibrate.h"
#include "driver/driver.h"
#include "plan_fixture.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Planning 256 devices takes a few seconds on a loaded two-core machine; before the quadratic
 * parts went, data parallel took minutes. A generous bound: a regression, not a benchmark. */
#define SECONDS_AT_MOST 20.0

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Which device of cpu:0 .. cpu:(n-1) node i of g is on; n when it is not one of them. */
static uint32_t device_of(const dpc_graph *g, uint32_t i, uint32_t n) {
  if (g->nodes[i].device == DPC_NONE) return n;
  const char *s = dpc_graph_str(g, g->nodes[i].device);
  char *end = NULL;
  unsigned long k = strncmp(s, "cpu:", 4) ? n : strtoul(s + 4, &end, 10);
  return end && !*end && k < n ? (uint32_t)k : n;
}

/* The simulator's step of p with every device alike (dpc plan's prediction). */
static double simulated_step(const dpc_plan *p) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_node_cost *c = calloc(p->g->n_nodes, sizeof *c);
  dpc_device_speed *sp = calloc(p->n_devs, sizeof *sp);
  dpc_sim_device *sim = calloc(p->n_devs, sizeof *sim);
  double step = 0;
  for (uint32_t k = 0; sp && k < p->n_devs; k++) sp[k] = unit_plan_speed();
  if (c && sp && sim && dpc_cost_graph(p->g, c, &d) == DPC_OK)
    step = dpc_simulate_step(p, c, sp, sim);
  free(c), free(sp), free(sim);
  dpc_diag_free(&d);
  return step;
}

/* Devices of p that run at least one kernel. */
static uint32_t busy_devices(const dpc_plan *p) {
  uint32_t busy = 0;
  for (uint32_t k = 0; k < p->n_devs; k++) {
    bool any = false;
    for (uint32_t j = 0; j < p->devs[k].n_steps && !any; j++)
      any = p->devs[k].steps[j].kind == DPC_STEP_KERNEL;
    busy += any;
  }
  return busy;
}

/* Model parallel over 24, 64 and 256 devices: METIS's placement, repaired, with a report entry
 * for every device (the report held 16, and repair wrote past them: 24 devices crashed `dpc
 * plan`; over 64 it refused). A device's memory in the report is set exactly when a node of
 * the model sits on it, and the plan spans every device. */
static void model_parallel(void) {
  static const uint32_t Ds[] = {24, 64, 256};
  for (size_t i = 0; i < sizeof Ds / sizeof *Ds; i++) {
    uint32_t D = Ds[i];
    dpc_place_report rep;
    double t0 = now_s();
    dpc_plan *p = unit_plan_transformer(D, D, 128, 1, DPC_SCHEDULE_NONE, &rep);
    double step = p ? simulated_step(p) : 0, secs = now_s() - t0;
    if (!p) continue;
    CHECK_MSG(p->n_devs == D, "%u devices in a plan for %u", p->n_devs, D);
    CHECK_MSG(rep.order_kept && rep.score > 0, "%u devices: a cycle, or no score", D);
    CHECK_MSG(secs < SECONDS_AT_MOST, "%u devices: planned and simulated in %.1f s", D, secs);
    /* the placed model's nodes are p->g's first nodes, in order (the passes append) */
    uint32_t *holds = calloc(D, sizeof *holds), used = 0;
    for (uint32_t n = 0; holds && n < p->g->n_nodes; n++) {
      uint32_t k = device_of(p->g, n, D);
      if (k < D) holds[k]++;
    }
    for (uint32_t k = 0; holds && k < D; k++) {
      used += holds[k] > 0;
      CHECK_MSG((rep.memory[k] > 0) == (holds[k] > 0),
                "%u devices: cpu:%u has %u nodes, %.0f bytes in the report", D, k, holds[k],
                rep.memory[k]);
    }
    double flops = 0, memory = 0;
    for (uint32_t k = 0; k < D; k++) flops += rep.flops[k], memory += rep.memory[k];
    CHECK_MSG(flops > 0 && memory > 0 && used >= 2 && busy_devices(p) >= 2,
              "%u devices: %g FLOPs, %g bytes, %u devices used", D, flops, memory, used);
    CHECK_MSG(step > 0, "%u devices: no step", D);
    free(holds);
    dpc_plan_free(p);
  }
}

/* Data parallel over 64 and 256 replicas and hybrid (4 devices a replica) over 256: every
 * device computes, every all-reduce joins all the replicas, in seconds. */
static void data_parallel_and_hybrid(void) {
  static const uint32_t cases[][2] = {{64, 1}, {256, 1}, {64, 4}, {256, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    uint32_t D = cases[i][0], mp = cases[i][1], R = D / mp;
    dpc_place_report rep;
    double t0 = now_s();
    dpc_plan *p = unit_plan_transformer(D, mp, 256, 1, DPC_SCHEDULE_NONE, &rep);
    double step = p ? simulated_step(p) : 0, secs = now_s() - t0;
    if (!p) continue;
    CHECK_MSG(p->n_devs == D, "%u devices in a plan for %u", p->n_devs, D);
    CHECK_MSG(secs < SECONDS_AT_MOST, "%u devices, %u a replica: planned and simulated in %.1f s",
              D, mp, secs);
    uint32_t reduces = 0, wrong = 0;
    for (uint32_t n = 0; n < p->g->n_nodes; n++)
      if (p->g->nodes[n].op == DPC_OP_ALL_REDUCE) reduces++, wrong += p->g->nodes[n].n_in != R;
    CHECK_MSG(reduces > 0 && wrong == 0, "%u devices: %u all-reduces, %u not over %u replicas", D,
              reduces, wrong, R);
    CHECK_MSG(mp > 1 || busy_devices(p) == D, "%u replicas: %u devices compute", D,
              busy_devices(p));
    CHECK_MSG(mp == 1 || busy_devices(p) >= 2 * R, "%u replicas of %u: %u devices compute", R, mp,
              busy_devices(p));
    CHECK_MSG(step > 0, "%u devices: no step", D);
    dpc_plan_free(p);
  }
}

/* Pipelines: 64 stages, and 64 data-parallel pipelines of 4 stages (256 devices), each with 4
 * micro-batches: every stage numbered, every device of a replica a stage of its own. */
static void pipelines(void) {
  static const uint32_t cases[][2] = {{64, 64}, {256, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    uint32_t D = cases[i][0], S = cases[i][1];
    dpc_place_report rep;
    double t0 = now_s();
    dpc_plan *p = unit_plan_transformer(D, S, 256, 4, DPC_SCHEDULE_1F1B, &rep);
    double step = p ? simulated_step(p) : 0, secs = now_s() - t0;
    if (!p) continue;
    CHECK_MSG(p->n_devs == D, "%u devices in a plan for %u", p->n_devs, D);
    CHECK_MSG(secs < SECONDS_AT_MOST, "%u devices, %u stages: planned and simulated in %.1f s", D,
              S, secs);
    uint32_t *stage = calloc(D, sizeof *stage);
    CHECK(stage && dpc_pipeline_stages(p, S, stage) == S);
    for (uint32_t k = 0; stage && k < D; k++)
      CHECK_MSG(stage[k] < S, "%u stages: cpu:%u is stage %u", S, k, stage[k]);
    CHECK_MSG(step > 0, "%u devices: no step", D);
    free(stage);
    dpc_plan_free(p);
  }
}

/* One device past DPC_MAX_DEVICES: each entry point says the limit instead of writing past a
 * table. */
static void past_the_limit(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  uint32_t n = DPC_MAX_DEVICES + 1;
  const char *text = "input x: f32[N, 8]\nparam w: f32[8, 8] = ones\ny = relu(matmul(x, w))\n"
                     "output y\n";
  dpc_graph *g = NULL;
  CHECK(dpc_parse_graph("t.graph", text, strlen(text), &g, &d) == DPC_OK);
  const char **devs = calloc(n, sizeof *devs);
  char(*names)[16] = calloc(n, sizeof *names);
  for (uint32_t k = 0; devs && names && k < n; k++)
    snprintf(names[k], sizeof names[k], "cpu:%u", k), devs[k] = names[k];
  if (g && devs && names) {
    CHECK(dpc_place_metis(g, 4, devs, n, NULL, NULL, &d) == DPC_ERR_INVALID);
    CHECK_MSG(strstr(d.msg, "at most 256 devices"), "%s", d.msg);
  }
  dpc_diag_free(&d);
  dpc_diag_init(&d);
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  CHECK(dpc_topology_load(NULL, &t, &d) == DPC_OK);
  if (t) {
    CHECK(dpc_devices_parse(t, "cpu:257", &l, &d) == DPC_ERR_INVALID);
    CHECK_MSG(strstr(d.msg, "from 1 to 256"), "%s", d.msg);
    dpc_device_list_free(&l);
    dpc_topology_free(t);
  }
  dpc_diag_free(&d);
  dpc_diag_init(&d);
  dpc_plan *p = NULL;
  CHECK(dpc_driver_plan(g, 4, &(dpc_driver_strategy){n, 1, 1, DPC_SCHEDULE_NONE, false}, true, &p,
                        &d) == DPC_ERR_INVALID);
  CHECK_MSG(strstr(d.msg, "at most 256 devices") && !p, "%s", d.msg);
  free(devs);
  free(names);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* cpu:N above the core count puts devices on the same cores: calibration measures them once,
 * so their figures are equal (placement then tries one idle device of a kind, not each). */
static void same_cores_measured_once(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_calibration cal = {0};
  char dir[] = "/tmp/dpc_scale_XXXXXX", spec[32];
  CHECK(mkdtemp(dir) != NULL);
  CHECK(dpc_topology_load(NULL, &t, &d) == DPC_OK);
  if (t) {
    uint32_t n = 2 * t->n_cores > DPC_MAX_DEVICES ? DPC_MAX_DEVICES : 2 * t->n_cores;
    snprintf(spec, sizeof spec, "cpu:%u", n < 4 ? 4 : n);
    CHECK_MSG(dpc_devices_parse(t, spec, &l, &d) == DPC_OK, "%s", d.msg);
    dpc_calibrate_opts o = {true, dir};
    CHECK_MSG(dpc_calibrate(t, &l, &o, &cal, &d) == DPC_OK, "%s", d.msg);
    uint32_t pairs = 0;
    for (uint32_t i = 0; cal.gflops && i < l.n; i++)
      for (uint32_t j = 0; j < i; j++) {
        const dpc_device_spec *a = &l.devs[i], *b = &l.devs[j];
        if (a->n_cores != b->n_cores || memcmp(a->pus, b->pus, a->n_cores * sizeof *a->pus))
          continue;
        pairs++;
        CHECK_MSG(cal.gflops[i] == cal.gflops[j] && cal.gflops[i] > 0,
                  "%s: cpu:%u %.3f GFLOP/s, cpu:%u on the same cores %.3f", spec, i, cal.gflops[i],
                  j, cal.gflops[j]);
        CHECK_MSG(cal.copy_gbs[(size_t)i * l.n + i] == cal.copy_gbs[(size_t)j * l.n + j],
                  "%s: cpu:%u copies at %.3f GB/s, cpu:%u on the same cores %.3f", spec, i,
                  cal.copy_gbs[(size_t)i * l.n + i], j, cal.copy_gbs[(size_t)j * l.n + j]);
      }
    CHECK_MSG(pairs > 0, "%s: no two devices share cores", spec);
    if (cal.path[0]) unlink(cal.path);
    dpc_calibration_free(&cal);
    dpc_device_list_free(&l);
    dpc_topology_free(t);
  }
  rmdir(dir);
  dpc_diag_free(&d);
}

/* The simulator's step of p with its devices at 100 GFLOP/s, 20 GB/s, device k in core group
 * group[k] (0: cores of its own). */
static double step_grouped(const dpc_plan *p, const uint32_t *group) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_node_cost *c = calloc(p->g->n_nodes, sizeof *c);
  dpc_device_speed *sp = calloc(p->n_devs, sizeof *sp);
  dpc_sim_device *sim = calloc(p->n_devs, sizeof *sim);
  double step = 0;
  for (uint32_t k = 0; sp && k < p->n_devs; k++)
    sp[k] = unit_plan_speed(), sp[k].core_group = group[k];
  if (c && sp && sim && dpc_cost_graph(p->g, c, &d) == DPC_OK)
    step = dpc_simulate_step(p, c, sp, sim);
  free(c), free(sp), free(sim);
  dpc_diag_free(&d);
  return step;
}

/* Devices sharing cores take turns: two data-parallel replicas, busy all step, on one core take
 * about twice as long as on two; on cores of their own, exactly as long as unshared; a
 * two-stage model split, whose devices mostly wait on each other, slows less than that. */
static void shared_cores_take_turns(void) {
  dpc_place_report rep;
  dpc_plan *dp = unit_plan_transformer(2, 1, 64, 1, DPC_SCHEDULE_NONE, &rep);
  dpc_plan *mp = unit_plan_transformer(2, 2, 64, 1, DPC_SCHEDULE_NONE, &rep);
  static const uint32_t alone[2] = {0, 0}, apart[2] = {1, 2}, together[2] = {1, 1};
  if (dp) {
    double a = step_grouped(dp, alone), b = step_grouped(dp, apart), t = step_grouped(dp, together);
    CHECK_MSG(a > 0 && b == a, "data parallel: %.4g ms alone, %.4g ms on cores apart", a * 1e3,
              b * 1e3);
    CHECK_MSG(t > 1.8 * a && t < 2.05 * a, "data parallel: %.4g ms alone, %.4g ms on one core",
              a * 1e3, t * 1e3);
    if (mp) {
      double ma = step_grouped(mp, alone), mt = step_grouped(mp, together);
      CHECK_MSG(ma > 0 && mt > ma && mt / ma < t / a,
                "model parallel: %.4g ms alone, %.4g ms on one core (data: x%.2f)", ma * 1e3,
                mt * 1e3, t / a);
    }
  }
  dpc_plan_free(dp);
  dpc_plan_free(mp);
}

const unit_test unit_tests[] = {
    {"shared_cores_take_turns", shared_cores_take_turns},
    {"model_parallel", model_parallel},
    {"data_parallel_and_hybrid", data_parallel_and_hybrid},
    {"pipelines", pipelines},
    {"past_the_limit", past_the_limit},
    {"same_cores_measured_once", same_cores_measured_once},
    {NULL, NULL},
};
