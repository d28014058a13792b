/*
 * cmd_plan.c — `dpc plan`: how a model's training step is spread over devices, what each device
 * does, how long the cost model says it takes, and what moves between them (dpc_net_plan,
 * <dpc/plan.h>): the flags in, the report out.
 */
#include "tools/dpc/cli.h"
#include "tools/dpc/outpath.h"
#include "tools/dpc/plan_cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt plan_opts[] = {
    CLI_OPT_LOSS,
    {"devices", true, false, "cpu (default), cpu:N or numa; GPUs with --simulate-devices"},
    {"strategy", true, false,
     "data (default with several devices), model (the graph's @ cpu:K placement, else METIS's), "
     "hybrid, pipeline, single, or auto (the fastest predicted of them that fits)"},
    {"explain", false, false,
     "with --strategy auto: the ranked table of the strategies tried and why each lost"},
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
    {"html", true, false,
     "FILE: one self-contained page (no network): the placement picture, each device's "
     "predicted step as a timeline, memory per device against its limit, and the ranked "
     "strategies with --strategy auto (measured beside predicted with --measure)"},
    {"profile", false, false,
     "time this model's kernels on one device's cores first and correct the cost model by "
     "them; with --strategy auto, at every per-device batch its candidates run"},
    {"measure", false, false,
     "run the plan (30 steps) and print its measured step beside the prediction; with "
     "--strategy auto, the 3 fastest predicted, choosing the fastest measured"},
    {"simulate-devices", true, false,
     "FILE: with --devices cuda:0,cuda:1,...: plan for those GPUs as the cluster file describes "
     "its devices and the link within a host (examples/clusters/h100-host.json), on a machine "
     "without them; --devices cpu,cuda:0,... plans the host's CPU beside them (model+cpu, "
     "pipeline+cpu; docs/gpu.md)"},
    {"cluster", true, false,
     "FILE: plan for the cluster described there instead of this machine's devices (see "
     "docs/clusters.md); not with --devices"},
    {"hosts", true, false,
     "H or HxN: with --devices mpi[:cpu:L], plan for H hosts of N devices (L by default) like "
     "this machine's, without mpirun"},
    {"link", true, false,
     "GBS,US: with --hosts, the link between hosts in GB/s and microseconds a message (default "
     "1.25,50: 10 Gb/s Ethernet)"},
    {"replicated", false, false,
     "with --cluster (one host) and a named strategy: plan every replica instead of composing "
     "one replica with the all-reduce, to check the composition"},
};
#define NPLAN (int)(sizeof plan_opts / sizeof *plan_opts)

/* --strategy auto: the strategies tried, fastest first (--explain: all of them, with why each
 * lost; else the choice alone). */
static void print_auto(const dpc_auto_report *r, bool explain) {
  if (r->n_profile_batches) {
    printf("profile: %u kernels timed on %u core%s (one device's) in %.1f s, at batch",
           r->profile_kernels, r->profile_threads, r->profile_threads == 1 ? "" : "s",
           r->profile_seconds);
    for (uint32_t i = 0; i < r->n_profile_batches; i++) {
      printf("%s %u", i ? "," : "", r->profile_batches[i]);
      if (r->profile_microbatches[i] > 1) printf(" in %u", r->profile_microbatches[i]);
    }
    printf(" (what each candidate's devices run, in micro-batches for pipelines); the cost model "
           "corrected by their times\n");
  }
  if (r->best < r->n_candidates) {
    const dpc_auto_candidate *b = &r->candidates[r->best];
    printf("strategy auto: %s, predicted %.3f ms a step (%.0f samples/s), the fastest of %u "
           "strategies tried in %.1f s\n",
           b->strategy, b->step_ms, b->samples_per_s, r->n_candidates, r->seconds);
  }
  /* measured: each beside its prediction, whether or not the table is asked for */
  for (uint32_t i = 0; i < r->n_candidates; i++) {
    const dpc_auto_candidate *c = &r->candidates[i];
    if (c->measured)
      printf("  measured %-50s %8.3f ms a step, predicted %8.3f (%+.0f%%)%s\n", c->strategy,
             c->measured_ms, c->step_ms, c->error_pct, i == r->best ? "  <- chosen" : "");
    else if (c->measure_note[0])
      printf("  measured %-50s %s\n", c->strategy, c->measure_note);
  }
  if (r->by_measurement)
    printf("strategy auto: chosen by measurement, against the prediction: %s\n",
           r->candidates[r->best].reason);
  if (!explain) return;
  printf("%-4s %-58s %10s %11s %11s %11s  %s\n", "rank", "strategy", "step ms", "measured ms",
         "memory MB", "comm MB", "why");
  for (uint32_t i = 0; i < r->n_candidates; i++) {
    const dpc_auto_candidate *c = &r->candidates[i];
    char rank[16] = "-", meas[32] = "-"; /* ranked when it runs */
    if (c->planned && c->fits) snprintf(rank, sizeof rank, "%u", i + 1);
    if (c->measured) snprintf(meas, sizeof meas, "%.3f", c->measured_ms);
    if (c->planned)
      printf("%-4s %-58s %10.3f %11s %11.1f %11.2f  %s\n", rank, c->strategy, c->step_ms, meas,
             (double)c->max_memory_bytes / 1e6, c->comm_bytes / 1e6, c->reason);
    else
      printf("%-4s %-58s %10s %11s %11s %11s  %s\n", "-", c->strategy, "-", "-", "-", "-",
             c->reason);
  }
}

/* The op kinds whose kernels the profile found furthest from the cost model, in ms a step. */
static void print_profile(const dpc_plan_report *r, bool autos) {
  if (autos) /* the count and batches were said with the choice */
    printf("profile: the cost model corrected by the kernels' times");
  else
    printf("profile: %u kernels timed on one device's cores; the cost model corrected by their "
           "times",
           r->profile_kernels);
  for (uint32_t n = 0; n < r->n_furthest; n++)
    printf("%s %s %.2f ms for %.2f predicted", n ? "," : " (furthest:", r->furthest[n].op,
           r->furthest[n].measured_ms, r->furthest[n].predicted_ms);
  printf(")\n");
}

/* A pipeline's stages, each device's order as a line of F<k> / B<k>, the bubble the simulator
 * predicts (and what balanced stages would give) and each device's live activation peak. */
static void print_pipeline(const dpc_plan_report *r) {
  printf("pipeline: %u stages, %u micro-batches, %s; predicted bubble %.1f%% of the devices' "
         "time (balanced stages: (S-1)/(M+S-1) = %.1f%%)\n",
         r->stages, r->microbatches, r->schedule == DPC_SCHEDULE_GPIPE ? "GPipe" : "1F1B",
         r->bubble_pct, r->balanced_bubble_pct);
  if (r->filled_stages < r->stages) {
    printf("  the placement put forward work on %u of the %u stages; the others stay idle:",
           r->filled_stages, r->stages);
    for (uint32_t i = 0; i < r->n_devices; i++)
      if (r->devices[i].stage >= r->filled_stages) printf(" %s", r->devices[i].name);
    printf("\n");
  }
  for (uint32_t i = 0; i < r->n_devices; i++) {
    const dpc_plan_report_device *v = &r->devices[i];
    printf("  %-7s stage %u, live activations at most %6.2f MB:", v->name, v->stage,
           (double)v->live_peak_bytes / 1e6);
    printf("%s%s\n", v->order[0] ? " " : "", v->order);
  }
}

/* The plan: what each device does and the predicted step, then a pipeline's schedule, this
 * machine's memory warnings and what placement did. */
static void print_plan(const dpc_plan_report *r, const char *name) {
  uint32_t D = r->n_devices;
  if (D > 1)
    printf("%s, training step, batch %u, %s on %u devices (%s)\n", name, r->batch,
           r->kind == DPC_STRATEGY_MODEL      ? "model parallel"
           : r->kind == DPC_STRATEGY_PIPELINE ? "pipeline"
           : r->kind == DPC_STRATEGY_HYBRID ? "hybrid (data parallel over model-parallel replicas)"
                                            : "data parallel",
           D, r->devices_spec);
  else
    printf("%s, training step, batch %u, on one device (%s)\n", name, r->batch, r->devices_spec);
  printf("%-8s %8s %12s %12s %10s %10s %12s\n", "device", "kernels", "collectives", "compute ms",
         "comm ms", "memory MB", "comm MB/step");
  for (uint32_t i = 0; i < D; i++) {
    const dpc_plan_report_device *v = &r->devices[i];
    printf("%-8s %8u %12u %12.3f %10.3f %10.1f %12.2f\n", v->name, v->kernels, v->collectives,
           v->compute_ms, v->comm_ms, (double)v->memory_bytes / 1e6, v->comm_bytes / 1e6);
  }
  printf("predicted step %.3f ms (%.0f samples/s); %.2f MB moved between devices per step\n",
         r->step_ms, r->samples_per_s, r->bytes_moved / 1e6);
  if (r->stages) print_pipeline(r);
  for (uint32_t i = 0; i < r->n_warnings; i++)
    fprintf(stderr, "dpc plan: warning: %s\n", r->warnings[i]);
  if (r->placed)
    printf("placement: METIS (the best of its cuts by predicted step), %s; %u chain move%s\n",
           r->order_kept ? "values flow one way between devices"
                         : "the model's own placement keeps a cycle between devices",
           r->chain_moves, r->chain_moves == 1 ? "" : "s");
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

/* `--devices [cpu,]cuda:0,cuda:1,...` for --simulate-devices: how many GPUs, each named once,
 * and whether the CPU is named beside them. */
static int cuda_devices(const char *spec, uint32_t *n, bool *cpu, uint32_t *idx) {
  if (!spec)
    return cli_usage_error("plan", "--simulate-devices FILE stands in for GPUs: name them with "
                                   "--devices cuda:0,cuda:1,... (cpu,cuda:0,... for the CPU too)");
  bool seen[64] = {false};
  *n = 0, *cpu = false;
  for (const char *s = spec; *s;) {
    char *end = NULL;
    if (!strncmp(s, "cpu", 3) && (!s[3] || s[3] == ',') && !*cpu) {
      *cpu = true;
      s += s[3] ? 4 : 3;
      continue;
    }
    unsigned long k = strncmp(s, "cuda:", 5) ? 64 : strtoul(s + 5, &end, 10);
    if (k >= 64 || !end || end == s + 5 || (*end && *end != ',') || seen[k])
      return cli_usage_error("plan",
                             "--devices with --simulate-devices: a list of distinct GPUs "
                             "cuda:0,cuda:1,... (at most cuda:63), with cpu once for the host's "
                             "CPU beside them, got '%s'",
                             spec);
    seen[k] = true;
    idx[(*n)++] = (uint32_t)k;
    s = *end ? end + 1 : end;
  }
  if (!*n)
    return cli_usage_error("plan",
                           "--devices %s with --simulate-devices: name the GPUs too, as "
                           "in cpu,cuda:0",
                           spec);
  return DPC_EXIT_OK;
}

int dpc_cmd_plan(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("plan", plan_opts, NPLAN, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf("Usage: dpc plan FILE.graph|FILE.onnx [--devices SPEC] [--strategy data] [--batch B]\n"
           "                [--dot FILE [--dot-full]] [--json FILE] [--html FILE]\n\n"
           "Plan a model's training step over devices and show it: each device's kernels and\n"
           "collectives, its predicted compute and communication time (the cost model with\n"
           "this machine's calibration, as dpc devices measures it), its memory, and the bytes\n"
           "that move per step. --dot writes the plan as Graphviz: one cluster per device\n"
           "holding its kernels and collectives, a node per fused kernel or named value, the\n"
           "bytes on every edge between devices (--dot-full: every node of the step graph,\n"
           "scalar constants and unnamed values included). --json writes the figures.\n"
           "--cluster FILE plans for a described cluster instead (hosts, devices, links),\n"
           "composing one replica's plan with the all-reduce across replicas; --devices mpi\n"
           "--hosts 4x2 does the same for 4 hosts of 2 devices like this machine's.\n"
           "--html writes a page to open in a browser, from disk and offline: the placement\n"
           "(drawn with Graphviz's dot), one predicted step per device as a timeline of\n"
           "compute, communication, waits and idle time, memory per device against its limit,\n"
           "and with --strategy auto the strategies tried, ranked, measured with --measure.\n"
           "See docs/strategies.md.\n");
    cli_print_options(plan_opts, NPLAN);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1) return cli_usage_error("plan", "expects one model file (see dpc plan --help)");
  /* the batch and the memory limit, for this machine's devices and a described cluster alike */
  const char *bs = cli_get(plan_opts, NPLAN, &p, "batch");
  char *end = NULL;
  unsigned long batch = bs ? strtoul(bs, &end, 10) : DPC_DEFAULT_BATCH;
  if (bs && (end == bs || *end || batch < 1 || batch > (1ul << 24)))
    return cli_usage_error("plan", "--batch expects a whole number from 1, got '%s'", bs);
  const char *mem = cli_get(plan_opts, NPLAN, &p, "device-memory");
  uint64_t limit = 0;
  if (mem && !dpc_parse_size(mem, &limit))
    return cli_usage_error("plan", "--device-memory expects a size such as 512M or 2G, got '%s'",
                           mem);
  cli_plan_sizes sizes = {bs ? (uint32_t)batch : 0, limit};
  const char *cluster = cli_get(plan_opts, NPLAN, &p, "cluster");
  if (cluster && cli_get(plan_opts, NPLAN, &p, "devices"))
    return cli_usage_error("plan", "--devices and --cluster exclude each other: this machine's "
                                   "devices, or the described cluster's");
  if (cluster) return cli_plan_cluster(plan_opts, NPLAN, &p, cluster, 0, &sizes);
  const char *dspec = cli_get(plan_opts, NPLAN, &p, "devices");
  if (dspec && !strncmp(dspec, "mpi", 3) && (!dspec[3] || dspec[3] == ':'))
    return cli_plan_mpi(plan_opts, NPLAN, &p, dspec, &sizes);
  if (cli_get(plan_opts, NPLAN, &p, "hosts") || cli_get(plan_opts, NPLAN, &p, "link"))
    return cli_usage_error("plan", "--hosts and --link describe the hosts of --devices mpi; give "
                                   "--devices mpi (or mpi:cpu:L) too");
  const char *simulated = cli_get(plan_opts, NPLAN, &p, "simulate-devices");
  bool gpu_list = dspec && strstr(dspec, "cuda:"); /* cpu may stand anywhere in the list */
  if (simulated || gpu_list) {                     /* described GPUs, or this machine's measured */
    uint32_t gpus = 0, idx[64];
    int grc = cuda_devices(cli_get(plan_opts, NPLAN, &p, "devices"), &gpus, &sizes.host_cpu, idx);
    if (grc) return grc;
    return simulated ? cli_plan_cluster(plan_opts, NPLAN, &p, simulated, gpus, &sizes)
                     : cli_plan_gpus(plan_opts, NPLAN, &p, idx, gpus, &sizes);
  }
  if (cli_get(plan_opts, NPLAN, &p, "replicated"))
    return cli_usage_error("plan", "--replicated checks a --cluster FILE plan; give it too");
  if (cli_get(plan_opts, NPLAN, &p, "dot-full") && !cli_get(plan_opts, NPLAN, &p, "dot"))
    return cli_usage_error("plan", "--dot-full says how --dot FILE draws; give --dot FILE too");
  const char *spec = cli_get(plan_opts, NPLAN, &p, "devices");
  const char *strategy = cli_get(plan_opts, NPLAN, &p, "strategy");
  bool autos = strategy && !strcmp(strategy, "auto");
  if (cli_get(plan_opts, NPLAN, &p, "explain") && !autos)
    return cli_usage_error("plan", "--explain shows how --strategy auto chose; give it too");
  static const char *const chosen_by_auto[] = {
      "mp",         "stages",    "microbatches",      "dp",
      "accumulate", "placement", "pipeline-schedule", "schedule"};
  for (size_t k = 0; autos && k < sizeof chosen_by_auto / sizeof *chosen_by_auto; k++)
    if (cli_get(plan_opts, NPLAN, &p, chosen_by_auto[k]))
      return cli_usage_error("plan", "--%s: --strategy auto chooses it itself", chosen_by_auto[k]);
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
  a.memory_limit = limit;
  if (spec) {
    int drc = cli_devices("plan", spec, &a.devices);
    if (drc) return drc;
  }
  char chosen[96];
  const char *html = cli_get(plan_opts, NPLAN, &p, "html");
  if (cli_check_output_file("plan", "html", html)) return DPC_EXIT_ERROR;
  dpc_auto_report *ar = NULL; /* with --strategy auto: the table, kept for --html */
  if (autos) {
    /* the choice, then its plan shown as any other */
    dpc_message *am = dpc_message_new();
    dpc_net *anet = NULL;
    dpc_auto_opts ao = {sizeof ao,
                        .batch = (uint32_t)batch,
                        .devices = spec,
                        .memory_limit = limit,
                        .measure_top = cli_get(plan_opts, NPLAN, &p, "measure") ? 3 : 0,
                        .profile = cli_get(plan_opts, NPLAN, &p, "profile") != NULL};
    dpc_status ast =
        cli_load_batched("plan", p.pos[0], cli_get(plan_opts, NPLAN, &p, "loss"), &anet, am);
    if (!ast) ast = dpc_net_plan_auto(anet, &ao, &ar, am);
    if (ar) print_auto(ar, cli_get(plan_opts, NPLAN, &p, "explain") != NULL);
    int arc = ast ? cli_report("plan", am) : DPC_EXIT_OK;
    if (!ast) snprintf(chosen, sizeof chosen, "%s", ar->candidates[ar->best].strategy);
    dpc_net_free(anet);
    dpc_message_free(am);
    if (arc) {
      dpc_auto_report_free(ar);
      return arc;
    }
    a.text = chosen;
    strategy = chosen;
  }
  dpc_strategy ps;
  dpc_strategy_error e;
  dpc_message *sm = dpc_message_new();
  int vrc = dpc_strategy_parse(&a, &ps, &e, sm)
                ? cli_strategy_error("plan", &e, PLAN_KINDS, spec ? spec : "cpu", sm)
                : DPC_EXIT_OK;
  dpc_message_free(sm);
  const char *dot = cli_get(plan_opts, NPLAN, &p, "dot");
  const char *json = cli_get(plan_opts, NPLAN, &p, "json");
  if (!vrc &&
      (cli_check_output_file("plan", "dot", dot) || cli_check_output_file("plan", "json", json)))
    vrc = DPC_EXIT_ERROR;
  if (vrc) {
    dpc_auto_report_free(ar);
    return vrc;
  }
  /* with auto, the measuring was the choosing: its figures are printed already */
  bool measure = cli_get(plan_opts, NPLAN, &p, "measure") != NULL && !autos;
  dpc_plan_opts o = {sizeof o,
                     .batch = (uint32_t)batch,
                     .devices = spec,
                     .strategy = &ps,
                     .memory_limit = limit,
                     .profile = cli_get(plan_opts, NPLAN, &p, "profile") != NULL,
                     .measure = measure,
                     .dot_path = dot,
                     .dot_full = cli_get(plan_opts, NPLAN, &p, "dot-full") != NULL,
                     .json_path = json,
                     .html_path = html,
                     .html_auto = ar};
  dpc_message *m = dpc_message_new();
  dpc_net *net = NULL;
  dpc_plan_report *r = NULL;
  int rc = DPC_EXIT_OK;
  dpc_status st =
      cli_load_batched("plan", p.pos[0], cli_get(plan_opts, NPLAN, &p, "loss"), &net, m);
  if (!st) st = dpc_net_plan(net, &o, &r, m);
  if (r && r->profiled && r->n_furthest) print_profile(r, autos);
  if (r && r->n_devices) print_plan(r, dpc_net_name(net));
  if (st)
    rc = cli_report("plan", m);
  else if (r->measured)
    printf("measured step %.3f ms (median of 30): the prediction is %+.0f%% of it\n",
           r->measured_ms, r->error_pct);
  if (!rc && html) printf("report: %s\n", html);
  dpc_plan_report_free(r);
  dpc_auto_report_free(ar);
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}
