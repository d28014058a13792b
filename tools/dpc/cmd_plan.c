/*
 * cmd_plan.c — `dpc plan`: how a model's training step is spread over devices, what each device
 * does, how long the cost model says it takes, and what moves between them.
 */
#include "partitioner/cost.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "driver/bench.h"
#include "driver/calibrate.h"
#include "tools/dpc/cli.h"
#include "driver/driver.h"
#include "tools/dpc/outpath.h"

#include "codegen/cpu/cpu.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_opt plan_opts[] = {
    CLI_OPT_LOSS,
    {"devices", true, false, "cpu (default), cpu:N or numa"},
    {"strategy", true, false,
     "data (default with several devices), model (the graph's @ cpu:K placement, else METIS's), "
     "hybrid, pipeline or single"},
    {"batch", true, false, "the global batch of one step (default 64, as dpc train)"},
    {"mp", true, false, "with --strategy hybrid: devices per data-parallel replica"},
    {"accumulate", true, false, "K: each replica's share of the batch in K micro-batches"},
    {"stages", true, false, "with --strategy pipeline: stages, the devices of one pipeline"},
    {"microbatches", true, false, "with --strategy pipeline: micro-batches per batch (default 4)"},
    CLI_OPT_PIPELINE_SCHEDULE,
    CLI_OPT_OLD_SCHEDULE,
    {"dp", true, false, "with --strategy pipeline: data-parallel pipelines (default 1)"},
    {"placement", true, false,
     "with --strategy model: metis (default), contiguous (a layer split) or roundrobin"},
    {"device-memory", true, false, "SIZE (512M, 2G): each device's memory; the plan must fit"},
    {"dot", true, false,
     "FILE: the plan as Graphviz: one cluster per device with its collectives, a node per fused "
     "kernel or named value, bytes on edges between devices"},
    {"dot-full", false, false, "with --dot: draw every node of the step graph instead"},
    {"json", true, false, "FILE: per device predicted time, memory, and the communication"},
    {"profile", false, false,
     "time this model's kernels on one core first and correct the cost model by them"},
    {"measure", false, false,
     "run the plan (30 steps) and print its measured step beside the "
     "prediction"},
};
#define NPLAN (int)(sizeof plan_opts / sizeof *plan_opts)

typedef dpc_sim_device dev_summary;

/* What make_plan works from and gives back. */
typedef struct plan_req {
  uint32_t batch, D, mp, accumulate;
  dpc_pipeline_schedule schedule;
  const dpc_cost_profile *profile; /* --profile: placement simulates with the measured times */
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
static void print_profile(const dpc_cost_profile *pr, uint32_t kernels) {
  printf("profile: %u kernels timed on one core; the cost model corrected by their times", kernels);
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
    printf("%s %s %.2f ms for %.2f predicted", n ? "," : " (furthest:", dpc_op_name((dpc_op)worst),
           pr->op_ms[worst], pr->op_pred_ms[worst]);
  }
  printf(")\n");
}

/* A pipeline's stages, each device's order as a line of F<k> / B<k>, the bubble the simulator
 * predicts (and what balanced stages would give) and each device's live activation peak. */
static void print_pipeline(const dpc_plan *p, const dpc_sim_device *sum, double step, uint32_t S,
                           uint32_t M, dpc_pipeline_schedule kind) {
  uint32_t *stage = calloc(p->n_devs, sizeof *stage);
  if (!stage || !dpc_pipeline_stages(p, S, stage)) {
    free(stage);
    return;
  }
  double busy = 0;
  for (uint32_t i = 0; i < p->n_devs; i++) busy += sum[i].compute_s + sum[i].comm_s;
  double bubble = step > 0 ? 1 - busy / (p->n_devs * step) : 0;
  printf("pipeline: %u stages, %u micro-batches, %s; predicted bubble %.1f%% of the devices' "
         "time (balanced stages: (S-1)/(M+S-1) = %.1f%%)\n",
         S, M, kind == DPC_SCHEDULE_GPIPE ? "GPipe" : "1F1B", bubble * 100,
         100.0 * (S - 1) / (M + S - 1));
  for (uint32_t i = 0; i < p->n_devs; i++) {
    printf("  %-7s stage %u, live activations at most %6.2f MB:", p->devs[i].name, stage[i],
           (double)dpc_pipeline_live_peak(p, i) / 1e6);
    int last_phase = -1, last_mb = -1, shown = 0;
    for (uint32_t j = 0; j < p->devs[i].n_steps && shown < 40; j++) {
      const dpc_step *st = &p->devs[i].steps[j];
      if (st->kind != DPC_STEP_KERNEL) continue;
      const dpc_node *n = &p->g->nodes[st->node];
      if (n->phase != DPC_PHASE_FORWARD && n->phase != DPC_PHASE_BACKWARD) continue;
      if (n->phase == last_phase && n->mb == last_mb) continue;
      last_phase = n->phase, last_mb = n->mb, shown++;
      printf(" %c%u", n->phase == DPC_PHASE_FORWARD ? 'F' : 'B', n->mb);
    }
    printf("\n");
  }
  free(stage);
}

/* What the plan puts on each NUMA node's devices against the node's memory: a plan too big for
 * this machine is still shown (a plan may be for a bigger one), with a warning naming both. */
static void warn_memory(const dpc_plan *plan, const dpc_topology *t, const dpc_device_list *l) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  uint32_t nodes = t->n_numa ? t->n_numa : 1;
  double phys = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
  for (uint32_t node = 0; node < nodes; node++) {
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
      fprintf(stderr,
              "dpc plan: warning: %s is predicted to need %.1f MB a step, more than the %.1f MB "
              "of memory it has here (NUMA node %u): the plan would not run on this machine\n",
              plan->devs[at].name, need / 1e6, have / 1e6, node);
    else
      fprintf(stderr,
              "dpc plan: warning: the %u devices on NUMA node %u are predicted to need %.1f MB a "
              "step together (%s the most, %.1f MB), more than the node's %.1f MB of memory: the "
              "plan would not run on this machine\n",
              on, node, need / 1e6, plan->devs[at].name, most / 1e6, have / 1e6);
  }
}

static dpc_status write_json(const char *path, const dpc_plan *p, const dev_summary *s,
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

/* The strategies dpc plan draws. */
#define PLAN_KINDS                                                                                 \
  ((1u << DPC_STRATEGY_SINGLE) | (1u << DPC_STRATEGY_DATA) | (1u << DPC_STRATEGY_MODEL) |          \
   (1u << DPC_STRATEGY_HYBRID) | (1u << DPC_STRATEGY_PIPELINE))

/* A whole-number option into a strategy argument (-1 when not given); its range is the
 * strategy's to check. False with a usage error. */
static bool plan_num(const cli_parsed *p, const char *name, int64_t *out) {
  const char *v = cli_get(plan_opts, NPLAN, p, name);
  if (!v) return true;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || x > INT64_MAX) {
    cli_usage_error("plan", "--%s expects a whole number, got '%s'", name, v);
    return false;
  }
  *out = (int64_t)x;
  return true;
}

int dpc_cmd_plan(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("plan", plan_opts, NPLAN, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf("Usage: dpc plan FILE.graph|FILE.onnx [--devices SPEC] [--strategy data] [--batch B]\n"
           "                [--dot FILE [--dot-full]] [--json FILE]\n\n"
           "Plan a model's training step over devices and show it: each device's kernels and\n"
           "collectives, its predicted compute and communication time (the cost model with\n"
           "this machine's calibration, as dpc devices measures it), its memory, and the bytes\n"
           "that move per step. --dot writes the plan as Graphviz: one cluster per device\n"
           "holding its kernels and collectives, a node per fused kernel or named value, the\n"
           "bytes on every edge between devices (--dot-full: every node of the step graph,\n"
           "scalar constants and unnamed values included). --json writes the figures.\n"
           "See docs/strategies.md.\n");
    cli_print_options(plan_opts, NPLAN);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1) return cli_usage_error("plan", "expects one model file (see dpc plan --help)");
  if (cli_get(plan_opts, NPLAN, &p, "dot-full") && !cli_get(plan_opts, NPLAN, &p, "dot"))
    return cli_usage_error("plan", "--dot-full says how --dot FILE draws; give --dot FILE too");
  const char *spec = cli_get(plan_opts, NPLAN, &p, "devices");
  const char *strategy = cli_get(plan_opts, NPLAN, &p, "strategy");
  const char *bs = cli_get(plan_opts, NPLAN, &p, "batch");
  char *end = NULL;
  unsigned long batch = bs ? strtoul(bs, &end, 10) : DPC_DEFAULT_BATCH;
  if (bs && (end == bs || *end || batch < 1 || batch > (1ul << 24)))
    return cli_usage_error("plan", "--batch expects a whole number from 1, got '%s'", bs);
  dpc_pipeline_schedule sched = DPC_SCHEDULE_NONE;
  int src = cli_schedules("plan", plan_opts, NPLAN, &p, NULL, &sched);
  if (src) return src;
  dpc_strategy_args a;
  dpc_strategy_args_init(&a);
  a.text = strategy, a.kinds = PLAN_KINDS, a.schedule = sched, a.batch = batch;
  a.placement = cli_get(plan_opts, NPLAN, &p, "placement");
  if (!plan_num(&p, "mp", &a.mp) || !plan_num(&p, "stages", &a.stages) ||
      !plan_num(&p, "microbatches", &a.microbatches) || !plan_num(&p, "dp", &a.dp) ||
      !plan_num(&p, "accumulate", &a.accumulate))
    return DPC_EXIT_USAGE;
  const char *mem = cli_get(plan_opts, NPLAN, &p, "device-memory");
  uint64_t limit = 0;
  if (mem && !dpc_driver_parse_size(mem, &limit))
    return cli_usage_error("plan", "--device-memory expects a size such as 512M or 2G, got '%s'",
                           mem);
  a.memory_limit = limit;
  if (spec) {
    int drc = cli_devices("plan", spec, &a.devices);
    if (drc) return drc;
  }
  dpc_strategy ps;
  dpc_strategy_error e;
  dpc_diag sd;
  dpc_diag_init(&sd);
  int vrc = dpc_strategy_parse(&a, &ps, &e, &sd)
                ? cli_strategy_error("plan", &e, PLAN_KINDS, spec ? spec : "cpu", &sd)
                : DPC_EXIT_OK;
  dpc_diag_free(&sd);
  if (vrc) return vrc;
  char pipe_spec[32];
  if (!spec && ps.devices > 1) { /* a pipeline's own devices: its stages times its pipelines */
    snprintf(pipe_spec, sizeof pipe_spec, "cpu:%u", ps.devices);
    spec = pipe_spec;
  }
  uint32_t D = ps.devices;
  bool model = ps.kind == DPC_STRATEGY_MODEL, pipeline = ps.kind == DPC_STRATEGY_PIPELINE;
  bool hybrid = pipeline || ps.kind == DPC_STRATEGY_HYBRID; /* the layout: replicas of mp devices */
  unsigned long mp = ps.mp, micro = ps.microbatches, acc = ps.microbatches;
  sched = ps.schedule;
  if (cli_check_output_file("plan", "dot", cli_get(plan_opts, NPLAN, &p, "dot")) ||
      cli_check_output_file("plan", "json", cli_get(plan_opts, NPLAN, &p, "json")))
    return DPC_EXIT_ERROR;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_calibration cal = {0};
  dpc_plan *plan = NULL;
  dpc_node_cost *cost = NULL;
  dev_summary *sum = NULL;
  int rc = DPC_EXIT_OK;
  char *fixed = NULL;
  dpc_status st = dpc_driver_load_batched(p.pos[0], &g, &fixed, &d);
  if (fixed)
    fprintf(stderr,
            "dpc plan: note: %s; until then it runs at the shapes it was exported with, whatever "
            "--batch says\n",
            fixed);
  free(fixed);
  const char *loss = cli_get(plan_opts, NPLAN, &p, "loss");
  if (!st && loss) st = dpc_driver_attach_loss(g, loss, &d);
  if (!st && g->obj.loss == DPC_NONE)
    st = dpc_diag_fail(&d, DPC_ERR_INVALID, "%s has nothing to minimize: plans are of training",
                       p.pos[0]);
  if (!st) st = dpc_topology_load(NULL, &t, &d);
  if (!st) st = dpc_devices_parse(t, spec ? spec : "cpu", &l, &d);
  if (!st && l.n != D)
    st = dpc_diag_fail(&d, DPC_ERR_INTERNAL, "--devices %s made %u devices, then %u", spec, D, l.n);
  if (!st) st = dpc_calibrate(t, &l, &(dpc_calibrate_opts){0}, &cal, &d);
  /* --profile: the cost model corrected per op kind by timing this model's kernels */
  dpc_cost_profile *prof = NULL;
  if (!st && cli_get(plan_opts, NPLAN, &p, "profile")) {
    uint32_t nk = 0;
    prof = calloc(1, sizeof *prof);
    st = prof ? dpc_bench_cost_profile(g, (uint32_t)batch, prof, &nk, &d)
              : dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
    if (!st) print_profile(prof, nk);
  }
  plan_req q = {.batch = (uint32_t)batch,
                .D = D,
                .mp = hybrid ? (uint32_t)mp : 1,
                .accumulate = (uint32_t)acc,
                .schedule = sched,
                .profile = prof,
                .model = model,
                .spec = spec ? spec : "cpu",
                .placement = ps.placement,
                .limit = limit};
  if (!st) st = make_plan(g, &q, &plan, &d);
  dpc_place_report rep = q.rep;
  bool placed = q.placed;
  if (!st) st = dpc_driver_check_memory(plan, limit, &d);
  if (!st) {
    cost = calloc(plan->g->n_nodes ? plan->g->n_nodes : 1, sizeof *cost);
    sum = calloc(D, sizeof *sum);
    st = cost && sum ? dpc_cost_graph(plan->g, cost, &d)
                     : dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
  }
  if (st) {
    rc = cli_report("plan", &d);
    goto done;
  }
  dpc_device_speed *speed = calloc(D, sizeof *speed);
  for (uint32_t i = 0; speed && i < D; i++)
    speed[i] = (dpc_device_speed){cal.gflops[i], cal.copy_gbs[(size_t)i * cal.n + i], prof};
  double step = speed ? dpc_simulate_step(plan, cost, speed, sum) : 0, comm = 0;
  free(speed);
  for (uint32_t i = 0; i < D; i++) comm += sum[i].comm_bytes;
  const char *name = g->name != DPC_NONE ? dpc_graph_str(g, g->name) : p.pos[0];
  if (D > 1)
    printf("%s, training step, batch %lu, %s on %u devices (%s)\n", name, batch,
           model      ? "model parallel"
           : pipeline ? "pipeline"
           : hybrid   ? "hybrid (data parallel over model-parallel replicas)"
                      : "data parallel",
           D, spec);
  else
    printf("%s, training step, batch %lu, on one device (%s)\n", name, batch, spec ? spec : "cpu");
  printf("%-8s %8s %12s %12s %10s %10s %12s\n", "device", "kernels", "collectives", "compute ms",
         "comm ms", "memory MB", "comm MB/step");
  for (uint32_t i = 0; i < D; i++)
    printf("%-8s %8u %12u %12.3f %10.3f %10.1f %12.2f\n", plan->devs[i].name, sum[i].kernels,
           sum[i].comms, sum[i].compute_s * 1e3, sum[i].comm_s * 1e3,
           (double)plan->devs[i].bytes / 1e6, sum[i].comm_bytes / 1e6);
  printf("predicted step %.3f ms (%.0f samples/s); %.2f MB moved between devices per step\n",
         step * 1e3, step > 0 ? (double)batch / step : 0, comm / 1e6);
  if (pipeline) print_pipeline(plan, sum, step, (uint32_t)mp, (uint32_t)micro, sched);
  warn_memory(plan, t, &l);
  if (placed)
    printf("placement: METIS (the best of its cuts by predicted step), %s; %u chain move%s\n",
           rep.order_kept ? "values flow one way between devices"
                          : "the model's own placement keeps a cycle between devices",
           rep.chain_moves, rep.chain_moves == 1 ? "" : "s");
  const char *dot = cli_get(plan_opts, NPLAN, &p, "dot");
  if (dot) {
    dpc_buf b = {0};
    FILE *f = fopen(dot, "w");
    /* each kernel's predicted time on its own device */
    double *ms = calloc(plan->g->n_nodes ? plan->g->n_nodes : 1, sizeof *ms);
    for (uint32_t i = 0; ms && i < D; i++) {
      dpc_device_speed sp = {cal.gflops[i], cal.copy_gbs[(size_t)i * cal.n + i], prof};
      for (uint32_t j = 0; j < plan->devs[i].n_steps; j++) {
        const dpc_step *s = &plan->devs[i].steps[j];
        if (s->kind == DPC_STEP_KERNEL)
          ms[s->node] = dpc_cost_kernel_seconds(plan->g, cost, s->node, &sp) * 1e3;
      }
    }
    bool full = cli_get(plan_opts, NPLAN, &p, "dot-full") != NULL;
    if (!f || (full ? dpc_dot_graph_full(plan->g, ms, &b) : dpc_dot_graph_costs(plan->g, ms, &b))) {
      dpc_diag_fail(&d, DPC_ERR_IO, "cannot write '%s'", dot);
      rc = cli_report("plan", &d);
    } else {
      fwrite(b.data, 1, b.len, f);
    }
    if (f) fclose(f);
    free(ms);
    dpc_buf_free(&b);
  }
  const char *json = cli_get(plan_opts, NPLAN, &p, "json");
  if (!rc && json && write_json(json, plan, sum, step, &d)) rc = cli_report("plan", &d);
  if (!rc && cli_get(plan_opts, NPLAN, &p, "measure")) {
    if (hybrid) {
      rc = cli_usage_error("plan", "--measure runs data, model and single plans; not hybrid yet");
    } else {
      dpc_bench_opts bo = {.batch = (uint32_t)batch,
                           .warmup = 5,
                           .steps = 30,
                           .devices = D > 1 ? spec : NULL,
                           .model = model};
      dpc_bench_result *br = calloc(1, sizeof *br);
      st = !br ? dpc_diag_fail(&d, DPC_ERR_NOMEM, "oom")
               : dpc_codegen_backend_find("llvm", &bo.exec.backend, &d);
      if (!st) st = dpc_bench(q.placed_g, &bo, br, &d);
      if (st)
        rc = cli_report("plan", &d);
      else
        printf("measured step %.3f ms (median of 30): the prediction is %+.0f%% of it\n",
               br->median_s * 1e3, (step - br->median_s) / br->median_s * 100);
      free(br);
    }
  }
done:
  if (prof) dpc_cost_profile_free(prof);
  free(prof);
  dpc_graph_free(q.placed_g);
  free(sum);
  free(cost);
  dpc_plan_free(plan);
  dpc_calibration_free(&cal);
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return rc;
}
