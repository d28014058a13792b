/*
 * api_plan.c — plans of a training step over devices and their predicted figures
 * (dpc_net_plan, include/dpc/plan.h): placement, the plan, the cost model with this machine's
 * calibration, the simulated step, a pipeline's schedule, memory against this machine, the dot,
 * JSON and HTML files, and the measured step beside the prediction.
 */
#include "driver/api_internal.h"
#include "driver/bench.h"
#include "driver/calibrate.h"
#include "driver/report_html.h"
#include "partitioner/cost.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"

#include "codegen/cpu/cpu.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What make_plan works from and gives back. */
typedef struct plan_req {
  uint32_t batch, D, mp, accumulate;
  dpc_pipeline_schedule schedule;
  const dpc_cost_profile *profile; /* placement simulates with the measured times */
  bool model;
  const char *spec;
  dpc_placement_method placement;
  uint64_t limit;
  dpc_place_report rep; /* out: what automatic placement did */
  bool placed;          /* out: whether it placed */
  dpc_graph *placed_g;  /* out: the model as placed, before the training passes */
} plan_req;

/* The plan of the training step: bound at the replica batch, replicated when D > 1. */
static dpc_status make_plan(const dpc_graph *src, plan_req *q, dpc_plan **out, dpc_diag *d) {
  dpc_graph *g = dpc_graph_clone(src);
  if (!g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  uint32_t D = q->D, mp = q->mp, batch = q->batch;
  bool model = q->model;
  dpc_status st = DPC_OK;
  q->placed = false;
  if (model && q->placement != DPC_PLACEMENT_METIS) {
    dpc_device_names dn;
    dpc_driver_device_names(D, &dn);
    st = dpc_place_simple(g, batch, dn.ptr, D, q->placement == DPC_PLACEMENT_CONTIGUOUS, d);
  } else if (model) {
    dpc_driver_place_opts po = {q->limit, q->profile, 1, DPC_SCHEDULE_NONE};
    st = dpc_driver_place(g, batch, q->spec, D, &po, &q->placed, &q->rep, d);
  } else if (mp > 1) { /* hybrid: one replica placed over its mp devices */
    char rspec[32];
    snprintf(rspec, sizeof rspec, "cpu:%u", mp);
    dpc_driver_place_opts po = {q->limit, q->profile, q->accumulate, q->schedule};
    st = dpc_driver_place(g, batch / (D / mp), rspec, mp, &po, &q->placed, &q->rep, d);
  }
  if (!st && !(q->placed_g = dpc_graph_clone(g)))
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  uint32_t R = D / (mp > 1 ? mp : 1); /* data-parallel replicas */
  dpc_pass_opts po = {.training = true, .fuse = dpc_cpu_fusion()};
  if (!st) st = dpc_driver_default_horizon(g, d);
  if (!st) st = dpc_passes_run(g, &po, d);
  dpc_driver_strategy ds = {model ? 1 : R, model ? D : mp, q->accumulate, q->schedule, false};
  if (!st) st = dpc_driver_plan_share(g, batch, model ? batch : batch / R, &ds, true, out, d);
  dpc_graph_free(g);
  return st;
}

/* The op kinds whose kernels the profile found furthest from the cost model, in ms a step. */
static void profile_furthest(const dpc_cost_profile *pr, dpc_plan_report *r) {
  bool shown[DPC_OP_COUNT] = {false};
  for (int n = 0; n < 3; n++) {
    int worst = -1;
    for (int k = 0; k < DPC_OP_COUNT; k++)
      if (!shown[k] && pr->op_pred_ms[k] > 0 &&
          (worst < 0 ||
           fabs(pr->op_ms[k] - pr->op_pred_ms[k]) > fabs(pr->op_ms[worst] - pr->op_pred_ms[worst])))
        worst = k;
    if (worst < 0) break;
    shown[worst] = true;
    dpc_plan_profile_op *f = &r->furthest[r->n_furthest++];
    snprintf(f->op, sizeof f->op, "%s", dpc_op_name((dpc_op)worst));
    f->measured_ms = pr->op_ms[worst], f->predicted_ms = pr->op_pred_ms[worst];
  }
}

/* A pipeline's stages, each device's order of F<k> / B<k>, the bubble the simulator predicts
 * (and what balanced stages would give) and each device's live activation peak. Nothing when
 * the stages cannot be told. */
static void pipeline_info(const dpc_plan *p, const dpc_sim_device *sum, double step, uint32_t S,
                          uint32_t M, dpc_pipeline_schedule kind, dpc_plan_report *r) {
  uint32_t *stage = calloc(p->n_devs, sizeof *stage);
  if (!stage || !dpc_pipeline_stages(p, S, stage)) {
    free(stage);
    return;
  }
  double busy = 0;
  for (uint32_t i = 0; i < p->n_devs; i++) busy += sum[i].compute_s + sum[i].comm_s;
  double bubble = step > 0 ? 1 - busy / (p->n_devs * step) : 0;
  r->stages = S, r->microbatches = M, r->filled_stages = dpc_pipeline_filled(p, S, 0);
  r->schedule = kind == DPC_SCHEDULE_GPIPE ? DPC_SCHEDULE_GPIPE : DPC_SCHEDULE_1F1B;
  r->bubble_pct = bubble * 100;
  r->balanced_bubble_pct = 100.0 * (S - 1) / (M + S - 1);
  for (uint32_t i = 0; i < p->n_devs; i++) {
    dpc_plan_report_device *v = &r->devices[i];
    v->stage = stage[i];
    v->live_peak_bytes = dpc_pipeline_live_peak(p, i);
    int last_phase = -1, last_mb = -1, shown = 0;
    size_t at = 0;
    for (uint32_t j = 0; j < p->devs[i].n_steps && shown < 40; j++) {
      const dpc_step *st = &p->devs[i].steps[j];
      if (st->kind != DPC_STEP_KERNEL) continue;
      const dpc_node *n = &p->g->nodes[st->node];
      if (n->phase != DPC_PHASE_FORWARD && n->phase != DPC_PHASE_BACKWARD) continue;
      if (n->phase == last_phase && n->mb == last_mb) continue;
      last_phase = n->phase, last_mb = n->mb;
      int w = snprintf(v->order + at, sizeof v->order - at, "%s%c%u", shown ? " " : "",
                       n->phase == DPC_PHASE_FORWARD ? 'F' : 'B', n->mb);
      shown++;
      if (w < 0 || (size_t)w >= sizeof v->order - at) break;
      at += (size_t)w;
    }
  }
  free(stage);
}

/* A sentence into the report's warnings (malloc'd). */
static dpc_status add_warning(dpc_plan_report *r, dpc_diag *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char **w = realloc(r->warnings, (r->n_warnings + 1) * sizeof *w);
  if (w) r->warnings = w;
  char *s = n >= 0 && w ? malloc((size_t)n + 1) : NULL;
  if (!s) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  r->warnings[r->n_warnings++] = s;
  return DPC_OK;
}

/* What the plan puts on each NUMA node's devices against the node's memory: a plan too big for
 * this machine is still made (a plan may be for a bigger one), with a warning naming both. */
static dpc_status warn_memory(const dpc_plan *plan, const dpc_topology *t, const dpc_device_list *l,
                              dpc_plan_report *r, dpc_diag *d) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  uint32_t nodes = t->n_numa ? t->n_numa : 1;
  double phys = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
  dpc_status st = DPC_OK;
  for (uint32_t node = 0; node < nodes && !st; node++) {
    /* hwloc's node sizes can be short of the memory inside VMs: the larger of the two */
    double have = t->numa_memory ? (double)t->numa_memory[node] : 0;
    if (phys / nodes > have) have = phys / nodes;
    double need = 0, most = 0;
    uint32_t on = 0, at = 0;
    for (uint32_t k = 0; k < l->n && k < plan->n_devs; k++) {
      if (l->devs[k].numa != node) continue;
      double b = (double)plan->devs[k].bytes;
      need += b, on++;
      if (b > most) most = b, at = k;
    }
    if (!on || have <= 0 || need <= have) continue;
    if (on == 1)
      st = add_warning(r, d,
                       "%s is predicted to need %.1f MB a step, more than the %.1f MB of memory it "
                       "has here (NUMA node %u): the plan would not run on this machine",
                       plan->devs[at].name, need / 1e6, have / 1e6, node);
    else
      st = add_warning(r, d,
                       "the %u devices on NUMA node %u are predicted to need %.1f MB a step "
                       "together (%s the most, %.1f MB), more than the node's %.1f MB of memory: "
                       "the plan would not run on this machine",
                       on, node, need / 1e6, plan->devs[at].name, most / 1e6, have / 1e6);
  }
  return st;
}

static dpc_status write_json(const char *path, const dpc_plan *p, const dpc_sim_device *s,
                             double step_s, dpc_diag *d) {
  FILE *f = fopen(path, "w");
  if (!f) return dpc_diag_fail(d, DPC_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  double comm = 0;
  fprintf(f, "{\"devices\": [");
  for (uint32_t i = 0; i < p->n_devs; i++) {
    fprintf(f,
            "%s{\"name\": \"%s\", \"kernels\": %u, \"collectives\": %u, \"compute_ms\": %.4f, "
            "\"comm_ms\": %.4f, \"memory_bytes\": %llu, \"comm_bytes\": %.0f}",
            i ? ", " : "", p->devs[i].name, s[i].kernels, s[i].comms, s[i].compute_s * 1e3,
            s[i].comm_s * 1e3, (unsigned long long)p->devs[i].bytes, s[i].comm_bytes);
    comm += s[i].comm_bytes;
  }
  fprintf(f, "], \"predicted_step_ms\": %.4f, \"comm_bytes_per_step\": %.0f}\n", step_s * 1e3,
          comm);
  return fclose(f) ? dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s'", path) : DPC_OK;
}

/* The plan as Graphviz text, each kernel with its predicted time on its own device. */
static dpc_status dot_text(bool full, const dpc_plan *plan, const dpc_node_cost *cost,
                           const dpc_calibration *cal, const dpc_device_list *l,
                           const dpc_cost_profile *prof, dpc_buf *b) {
  double *ms = calloc(plan->g->n_nodes ? plan->g->n_nodes : 1, sizeof *ms);
  if (!ms) return DPC_ERR_NOMEM;
  for (uint32_t i = 0; i < plan->n_devs; i++) {
    dpc_device_speed sp = dpc_calibration_speed(cal, l, i, prof);
    for (uint32_t j = 0; j < plan->devs[i].n_steps; j++) {
      const dpc_step *s = &plan->devs[i].steps[j];
      if (s->kind == DPC_STEP_KERNEL)
        ms[s->node] = dpc_cost_kernel_seconds(plan->g, cost, s->node, &sp) * 1e3;
    }
  }
  dpc_status st = full ? dpc_dot_graph_full(plan->g, ms, b) : dpc_dot_graph_costs(plan->g, ms, b);
  free(ms);
  return st ? st : b->oom ? DPC_ERR_NOMEM : DPC_OK;
}

static dpc_status write_dot(const char *path, bool full, const dpc_plan *plan,
                            const dpc_node_cost *cost, const dpc_calibration *cal,
                            const dpc_device_list *l, const dpc_cost_profile *prof, dpc_diag *d) {
  dpc_buf b = {0};
  FILE *f = fopen(path, "w");
  dpc_status st = DPC_OK;
  if (!f || dot_text(full, plan, cost, cal, l, prof, &b))
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s'", path);
  else
    fwrite(b.data, 1, b.len, f);
  if (f) fclose(f);
  dpc_buf_free(&b);
  return st;
}

/* The HTML page of the plan (driver/report_html.c): its placement laid out by dot, the
 * simulated step's intervals, memory against the limit, else against this machine's memory
 * shared by the devices. */
static dpc_status write_html(const char *path, const dpc_net *net, const dpc_plan_report *r,
                             const struct dpc_auto_report *autos, const dpc_plan *plan,
                             const dpc_sim_trace *trace, const dpc_node_cost *cost,
                             const dpc_calibration *cal, const dpc_device_list *l,
                             const dpc_cost_profile *prof, uint64_t limit, dpc_diag *d) {
  dpc_buf b = {0};
  char *svg = NULL;
  uint32_t nodes = 0;
  dpc_status st = dot_text(false, plan, cost, cal, l, prof, &b)
                      ? dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory drawing the placement")
                      : DPC_OK;
  if (!st) nodes = dpc_report_dot_nodes(b.data);
  if (!st && nodes <= DPC_REPORT_PICTURE_NODES)
    st = dpc_report_dot_svg(b.data, b.len, nodes > DPC_REPORT_PICTURE_FAST, &svg, d);
  dpc_buf_free(&b);
  if (st) return st;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  uint64_t share =
      pages > 0 && page > 0 && r->n_devices ? (uint64_t)pages * (uint64_t)page / r->n_devices : 0;
  dpc_html_input in = {.model = dpc_net_name(net),
                       .plan = r,
                       .autos = autos,
                       .g = plan->g,
                       .trace = trace,
                       .placement_svg = svg,
                       .placement_nodes = nodes,
                       .memory_limit = limit ? limit : share,
                       .limit_given = limit != 0};
  st = dpc_report_html_write(path, &in, d);
  free(svg);
  return st;
}

/* Run the plan's model as placed, 30 timed steps after 5, compiled with LLVM. */
static dpc_status measure(const dpc_graph *placed, uint32_t batch, uint32_t D, const char *spec,
                          bool model, double *median_s, dpc_diag *d) {
  dpc_bench_opts bo = {
      .batch = batch, .warmup = 5, .steps = 30, .devices = D > 1 ? spec : NULL, .model = model};
  dpc_bench_result *br = calloc(1, sizeof *br);
  dpc_status st = !br ? dpc_diag_fail(d, DPC_ERR_NOMEM, "oom")
                      : dpc_codegen_backend_find("llvm", &bo.exec.backend, d);
  if (!st) st = dpc_bench(placed, &bo, br, d);
  if (!st) *median_s = br->median_s;
  free(br);
  return st;
}

dpc_status dpc_api_measure_strategy(const dpc_net *net, const dpc_strategy *ps, uint32_t devices,
                                    const char *spec, uint32_t batch, uint32_t steps,
                                    double *median_s, dpc_diag *d) {
  dpc_benchmark_opts bo = {sizeof bo,
                           .batch = batch,
                           .warmup = 5,
                           .steps = steps,
                           .devices = devices > 1 ? spec : NULL,
                           .strategy = devices > 1 ? ps : NULL,
                           .accumulate = ps->microbatches};
  dpc_benchmark_result *br = NULL;
  dpc_status st = dpc_net_benchmark(net, &bo, &br, d);
  if (!st) *median_s = br->median_s;
  dpc_benchmark_result_free(br);
  return st;
}

#define PLAN_KINDS                                                                                 \
  ((1u << DPC_STRATEGY_SINGLE) | (1u << DPC_STRATEGY_DATA) | (1u << DPC_STRATEGY_MODEL) |          \
   (1u << DPC_STRATEGY_HYBRID) | (1u << DPC_STRATEGY_PIPELINE))

DPC_COMPILER_API dpc_status dpc_net_plan(const dpc_net *net, const dpc_plan_opts *o,
                                         dpc_plan_report **out, dpc_message *m) {
  /* the automatic choice timed the kernels already, at every batch its candidates run */
  const dpc_auto_report *a = DPC_API_HAS(o, html_auto) ? o->html_auto : NULL;
  bool want_profile = DPC_API_HAS(o, profile) && o->profile;
  return dpc_api_plan_profiled(net, o, want_profile && a ? a->profile : NULL, out, m);
}

dpc_status dpc_api_plan_profiled(const dpc_net *net, const dpc_plan_opts *o,
                                 const dpc_cost_profile *timed, dpc_plan_report **out,
                                 dpc_diag *m) {
  *out = NULL;
  uint32_t batch = DPC_API_HAS(o, batch) && o->batch ? o->batch : 64;
  const char *spec = DPC_API_HAS(o, devices) ? o->devices : NULL;
  const dpc_strategy *given = DPC_API_HAS(o, strategy) ? o->strategy : NULL;
  bool want_profile = DPC_API_HAS(o, profile) && o->profile;
  bool want_measure = DPC_API_HAS(o, measure) && o->measure;
  const char *dot = DPC_API_HAS(o, dot_path) ? o->dot_path : NULL;
  bool dot_full = DPC_API_HAS(o, dot_full) && o->dot_full;
  const char *json = DPC_API_HAS(o, json_path) ? o->json_path : NULL;
  const char *html = DPC_API_HAS(o, html_path) ? o->html_path : NULL;
  const struct dpc_auto_report *html_auto = DPC_API_HAS(o, html_auto) ? o->html_auto : NULL;
  dpc_strategy ps;
  if (given) {
    ps = *given;
  } else { /* data parallel over the devices (single on one) */
    dpc_strategy_args a;
    dpc_strategy_args_init(&a);
    a.kinds = PLAN_KINDS, a.batch = batch;
    dpc_status st = dpc_devices_count(spec ? spec : "cpu", &a.devices, m);
    if (!st) st = dpc_strategy_parse(&a, &ps, NULL, m);
    if (st) return st;
  }
  if (!(PLAN_KINDS & (1u << ps.kind)))
    return dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                         "plans are drawn for single, data, model, hybrid and pipeline "
                         "strategies, not %s",
                         dpc_strategy_kind_name(ps.kind));
  uint64_t limit =
      DPC_API_HAS(o, memory_limit) && o->memory_limit ? o->memory_limit : ps.memory_limit;
  char pipe_spec[32];
  if (!spec && ps.devices > 1) { /* a pipeline's own devices: its stages times its pipelines */
    snprintf(pipe_spec, sizeof pipe_spec, "cpu:%u", ps.devices);
    spec = pipe_spec;
  }
  if (!spec) spec = "cpu";
  uint32_t D = ps.devices;
  bool model = ps.kind == DPC_STRATEGY_MODEL, pipeline = ps.kind == DPC_STRATEGY_PIPELINE;
  bool hybrid = pipeline || ps.kind == DPC_STRATEGY_HYBRID; /* the layout: replicas of mp devices */
  const dpc_graph *g = net->g;
  if (g->obj.loss == DPC_NONE)
    return dpc_diag_fail(m, DPC_ERR_INVALID, "%s has nothing to minimize: plans are of training",
                         net->path);
  dpc_plan_report *r = calloc(1, sizeof *r);
  if (!r) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  r->kind = ps.kind, r->batch = batch;
  snprintf(r->devices_spec, sizeof r->devices_spec, "%s", spec);
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_calibration cal = {0};
  dpc_plan *plan = NULL;
  dpc_node_cost *cost = NULL;
  dpc_sim_device *sum = NULL;
  dpc_cost_profile *prof = NULL;
  dpc_sim_trace trace = {0};
  plan_req q = {0};
  dpc_status st = dpc_topology_load(NULL, &t, m);
  if (!st) st = dpc_devices_parse(t, spec, &l, m);
  if (!st && l.n != D)
    st = dpc_diag_fail(m, DPC_ERR_INVALID, "the strategy is for %u devices, and '%s' makes %u", D,
                       spec, l.n);
  if (!st) st = dpc_calibrate(t, &l, &(dpc_calibrate_opts){0}, &cal, m);
  /* the cost model corrected per op kind by timing this model's kernels */
  if (!st && timed) {
    r->profiled = true, r->profile_kernels = timed->n;
    profile_furthest(timed, r);
  } else if (!st && want_profile) {
    uint32_t nk = 0;
    prof = calloc(1, sizeof *prof);
    /* at the batch one replica runs, in its micro-batches */
    uint32_t replicas = model ? 1 : hybrid ? D / (ps.mp ? ps.mp : 1) : D;
    uint32_t share = replicas && batch % replicas == 0 ? batch / replicas : batch;
    st = prof ? dpc_bench_cost_profile(g, share, ps.microbatches, l.devs[0].n_cores, prof, &nk, m)
              : dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
    if (!st) {
      r->profiled = true, r->profile_kernels = nk;
      profile_furthest(prof, r);
    }
  }
  q = (plan_req){.batch = batch,
                 .D = D,
                 .mp = hybrid ? ps.mp : 1,
                 .accumulate = ps.microbatches,
                 .schedule = ps.schedule,
                 .profile = timed ? timed : prof,
                 .model = model,
                 .spec = spec,
                 .placement = ps.placement,
                 .limit = limit};
  if (!st) st = make_plan(g, &q, &plan, m);
  if (!st) st = dpc_driver_check_memory(plan, limit, m);
  if (!st) {
    cost = calloc(plan->g->n_nodes ? plan->g->n_nodes : 1, sizeof *cost);
    sum = calloc(D, sizeof *sum);
    r->devices = calloc(D, sizeof *r->devices);
    st = cost && sum && r->devices ? dpc_cost_graph(plan->g, cost, m)
                                   : dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  }
  double step = 0;
  if (!st) {
    dpc_device_speed *speed = calloc(D, sizeof *speed);
    for (uint32_t i = 0; speed && i < D; i++)
      speed[i] = dpc_calibration_speed(&cal, &l, i, q.profile);
    step = speed ? dpc_simulate_step_trace(plan, cost, speed, sum, html ? &trace : NULL) : 0;
    free(speed);
    double comm = 0;
    for (uint32_t i = 0; i < D; i++) {
      dpc_plan_report_device *v = &r->devices[i];
      snprintf(v->name, sizeof v->name, "%s", plan->devs[i].name);
      v->kernels = sum[i].kernels, v->collectives = sum[i].comms;
      v->compute_ms = sum[i].compute_s * 1e3, v->comm_ms = sum[i].comm_s * 1e3;
      v->memory_bytes = plan->devs[i].bytes, v->comm_bytes = sum[i].comm_bytes;
      comm += sum[i].comm_bytes;
    }
    r->n_devices = D;
    r->step_ms = step * 1e3;
    r->samples_per_s = step > 0 ? (double)batch / step : 0;
    r->bytes_moved = comm;
    if (pipeline) pipeline_info(plan, sum, step, ps.mp, ps.microbatches, ps.schedule, r);
    r->placed = q.placed, r->order_kept = q.rep.order_kept, r->chain_moves = q.rep.chain_moves;
    st = warn_memory(plan, t, &l, r, m);
  }
  if (!st && dot) st = write_dot(dot, dot_full, plan, cost, &cal, &l, q.profile, m);
  if (!st && json) st = write_json(json, plan, sum, step, m);
  if (!st && want_measure) {
    double median = 0;
    if (hybrid)
      st = dpc_api_measure_strategy(net, &ps, D, spec, batch, 30, &median, m);
    else
      st = measure(q.placed_g, batch, D, spec, model, &median, m);
    if (!st) {
      r->measured = true;
      r->measured_ms = median * 1e3;
      r->error_pct = (step - median) / median * 100;
    }
  }
  if (!st && html)
    st = write_html(html, net, r, html_auto, plan, &trace, cost, &cal, &l, q.profile, limit, m);
  if (prof) dpc_cost_profile_free(prof);
  free(prof);
  dpc_graph_free(q.placed_g);
  dpc_sim_trace_free(&trace);
  free(sum);
  free(cost);
  dpc_plan_free(plan);
  dpc_calibration_free(&cal);
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  if (st && !r->profiled && !r->n_devices) {
    dpc_plan_report_free(r);
    r = NULL;
  }
  *out = r;
  return st;
}

DPC_COMPILER_API void dpc_plan_report_free(dpc_plan_report *r) {
  if (!r) return;
  for (uint32_t i = 0; i < r->n_warnings; i++) free(r->warnings[i]);
  free(r->warnings);
  free(r->devices);
  free(r);
}
