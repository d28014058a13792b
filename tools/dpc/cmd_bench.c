/*
 * cmd_bench.c — `dpc bench`: the median step time and samples/s of a model (dpc_net_benchmark,
 * <dpc/plan.h>).
 */
#include "tools/dpc/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt bench_opts[] = {
    CLI_OPT_LOSS,
    {"batch", true, false,
     "samples per step; every symbolic dimension takes it (default 64, as dpc train)"},
    {"threads", true, false, "threads for compiled kernels (default: one per core)"},
    {"inference", false, false, "time the forward pass instead of the training step"},
    {"steps", true, false, "timed steps (default 50)"},
    {"warmup", true, false, "untimed steps before them (default 5)"},
    {"backend", true, false,
     "llvm (default), ref (the reference kernels) or cuda (NVRTC kernels on cuda:0)"},
    CLI_OPT_CUDA,
    {"json", false, false, "print one JSON object instead of text"},
    {"profile", false, false, "then time each kernel: where the step's time goes"},
    {"profile-out", true, false,
     "FILE: with the profile, every kernel in the order they run, tab-separated (implies "
     "--profile)"},
    {"devices", true, false, "cpu (default), or cpu:N / numa: data-parallel training over them"},
    {"strategy", true, false,
     "with several devices: data (default), model (@ cpu:K placement, else METIS's), hybrid:mp=K "
     "(replicas of K devices), pipeline (the devices as stages, --accumulate K micro-batches), or "
     "auto (the fastest predicted, as dpc plan --strategy auto)"},
    CLI_OPT_PIPELINE_SCHEDULE,
    CLI_OPT_OLD_SCHEDULE,
    {"accumulate", true, false, "K: each device's share of the batch in K micro-batches"},
    CLI_OPT_SHARES,
    {"dump-llvm", false, false, "print the generated LLVM IR to stderr"},
};
#define NBENCH (int)(sizeof bench_opts / sizeof *bench_opts)

static bool get_u32(const cli_parsed *p, const char *name, uint32_t *out, uint32_t min) {
  const char *v = cli_get(bench_opts, NBENCH, p, name);
  if (!v) return true;
  char *end;
  errno = 0;
  unsigned long x = strtoul(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || x < min || x > (1ul << 24)) {
    cli_usage_error("bench", "--%s expects a whole number from %u, got '%s'", name, min, v);
    return false;
  }
  *out = (uint32_t)x;
  return true;
}

/* --strategy auto: the fastest predicted strategy on the devices (dpc_net_plan_auto), timed as
 * `dpc plan --strategy auto --measure` times its candidates; what it chose goes to stderr so
 * --json stays one object. */
static int choose_strategy(const cli_parsed *p, const dpc_net *net, dpc_benchmark_opts *o,
                           dpc_strategy *s, uint32_t D, dpc_message *m) {
  static const char *const chosen_by_auto[] = {"accumulate", "pipeline-schedule", "schedule",
                                               "shares"};
  for (size_t k = 0; k < sizeof chosen_by_auto / sizeof *chosen_by_auto; k++)
    if (cli_get(bench_opts, NBENCH, p, chosen_by_auto[k]))
      return cli_usage_error("bench", "--%s: --strategy auto chooses it itself", chosen_by_auto[k]);
  if (o->inference)
    return cli_usage_error("bench", "--strategy auto chooses a training strategy; --inference "
                                    "times one device's forward pass");
  dpc_auto_opts ao = {sizeof ao, .batch = o->batch, .devices = o->devices};
  char chosen[96];
  int rc = cli_strategy_auto("bench", net, &ao, false, chosen, sizeof chosen);
  if (rc) return rc;
  dpc_strategy_args a;
  dpc_strategy_args_init(&a);
  a.text = chosen, a.devices = D, a.batch = o->batch;
  if (dpc_strategy_parse(&a, s, NULL, m)) return cli_report("bench", m);
  /* one device: the plain benchmark; a pipeline's micro-batches are the benchmark's accumulate */
  o->strategy = D > 1 ? s : NULL;
  o->accumulate = s->microbatches;
  return DPC_EXIT_OK;
}

/* The strategies dpc bench times. */
#define BENCH_KINDS                                                                                \
  ((1u << DPC_STRATEGY_DATA) | (1u << DPC_STRATEGY_MODEL) | (1u << DPC_STRATEGY_HYBRID) |          \
   (1u << DPC_STRATEGY_PIPELINE))

int dpc_cmd_bench(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("bench", bench_opts, NBENCH, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf("Usage: dpc bench FILE.graph|FILE.onnx [--batch B] [--threads T] [--inference]\n\n"
           "Time a model's training step (or, with --inference, its forward pass) on synthetic\n"
           "data: compile it as dpc train would, run warm-up steps, then time each step and print\n"
           "the median, the fastest and the 90th percentile, and samples/s at the median. The\n"
           "compile time printed is the JIT's: passes, plan and LLVM. --profile then times each\n"
           "kernel (a fusion group is one) and lists the slowest; --profile-out FILE writes\n"
           "all of them, in the order they run (step, measured_ms, predicted_ms, value, type,\n"
           "ops), for a spreadsheet or a layer-by-layer comparison. Figures and the commands\n"
           "behind them: docs/benchmarks.md.\n");
    cli_print_options(bench_opts, NBENCH);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1) return cli_usage_error("bench", "expects one model file (see dpc bench --help)");
  dpc_benchmark_opts o = {sizeof o, .batch = DPC_DEFAULT_BATCH, .warmup = 5, .steps = 50};
  o.inference = cli_get(bench_opts, NBENCH, &p, "inference") != NULL;
  o.profile_path = cli_get(bench_opts, NBENCH, &p, "profile-out");
  o.profile = cli_get(bench_opts, NBENCH, &p, "profile") != NULL || o.profile_path;
  o.devices = cli_get(bench_opts, NBENCH, &p, "devices");
  o.shares = cli_get(bench_opts, NBENCH, &p, "shares");
  dpc_pipeline_schedule sched = DPC_SCHEDULE_NONE;
  int src = cli_schedules("bench", bench_opts, NBENCH, &p, NULL, &sched);
  if (src) return src;
  uint32_t D = 1;
  if (o.devices && (src = cli_devices_or_gpus("bench", o.devices,
                                              cli_get(bench_opts, NBENCH, &p, "backend"), &D)))
    return src;
  /* a plain "pipeline" here is the devices as its stages, each share in --accumulate
   * micro-batches (the benchmark's own rule; the batch it checks itself); its text form may
   * say otherwise (pipeline:stages=2,dp=2,microbatches=4) */
  dpc_strategy_args a;
  dpc_strategy_args_init(&a);
  a.text = cli_get(bench_opts, NBENCH, &p, "strategy");
  bool automatic = a.text && !strcmp(a.text, "auto");
  if (automatic) a.text = NULL; /* checked as the default, chosen once the model is loaded */
  a.kinds = BENCH_KINDS, a.schedule = sched, a.devices = D, a.shares = o.shares;
  if (!get_u32(&p, "accumulate", &o.accumulate, 1)) return DPC_EXIT_USAGE;
  dpc_strategy_kind named = DPC_STRATEGY_DATA;
  char kind_name[16];
  snprintf(kind_name, sizeof kind_name, "%.*s", (int)strcspn(a.text ? a.text : "", ":"),
           a.text ? a.text : "");
  if (dpc_strategy_kind_parse(kind_name, &named) && named == DPC_STRATEGY_PIPELINE) {
    if (!strstr(a.text, "stages=")) a.stages = D; /* the text may name its stages itself */
    if (cli_get(bench_opts, NBENCH, &p, "accumulate")) a.microbatches = o.accumulate;
  }
  dpc_strategy s;
  dpc_strategy_error e;
  dpc_message *sm = dpc_message_new();
  src = dpc_strategy_parse(&a, &s, &e, sm)
            ? cli_strategy_error("bench", &e, BENCH_KINDS, o.devices ? o.devices : "cpu", sm)
            : DPC_EXIT_OK;
  dpc_message_free(sm);
  if (src) return src;
  if (s.given & (1u << DPC_STRATEGY_FIELD_PLACEMENT))
    return cli_usage_error("bench", "--strategy: dpc bench places a model as dpc train does; the "
                                    "placement setting is dpc plan's");
  o.strategy = &s;
  if (!get_u32(&p, "batch", &o.batch, 1) || !get_u32(&p, "threads", &o.threads, 1) ||
      !get_u32(&p, "steps", &o.steps, 1) || !get_u32(&p, "warmup", &o.warmup, 0))
    return DPC_EXIT_USAGE;
  /* refused before the compile and the timed steps rather than after them */
  FILE *pf = o.profile_path ? fopen(o.profile_path, "w") : NULL;
  if (o.profile_path && !pf) {
    fprintf(stderr, "dpc bench: error: cannot write the profile to '%s': %s\n", o.profile_path,
            strerror(errno));
    return DPC_EXIT_ERROR;
  }
  if (pf) fclose(pf);
  dpc_message *m = dpc_message_new();
  /* an unknown backend named as the library names it, with the ones it knows */
  dpc_build_opts bb = {sizeof bb, .backend = cli_get(bench_opts, NBENCH, &p, "backend")};
  int rc = dpc_build_opts_check(&bb, m)
               ? cli_usage_error("bench", "--backend: %s", dpc_message_brief(m))
               : cli_build_opts("bench", bench_opts, NBENCH, &p, &o.build);
  if (rc) {
    dpc_message_free(m);
    return rc;
  }
  dpc_net *net = NULL;
  dpc_benchmark_result *r = NULL;
  const char *loss = cli_get(bench_opts, NBENCH, &p, "loss");
  if (cli_load_batched("bench", p.pos[0], loss, &net, m)) rc = cli_report("bench", m);
  dpc_strategy chosen;
  if (!rc && automatic) rc = choose_strategy(&p, net, &o, &chosen, D, m);
  if (!rc && dpc_net_benchmark(net, &o, &r, m)) rc = cli_report("bench", m);
  if (r) {
    const char *name = dpc_net_name(net);
    const char *what = o.inference ? "inference" : "training";
    if (cli_get(bench_opts, NBENCH, &p, "json")) {
      printf("{\"model\": \"%s\", \"mode\": \"%s\", \"batch\": %u, \"threads\": %u, "
             "\"backend\": \"%s\", \"target\": \"%s\", \"compile_s\": %.4f, \"jit_s\": %.4f, "
             "\"kernels\": %u, \"disk_hits\": %u, "
             "\"median_ms\": %.4f, \"min_ms\": %.4f, \"p90_ms\": %.4f, \"samples_per_s\": %.1f}\n",
             name, what, o.batch, o.threads, r->backend, r->target, r->compile_s, r->jit_s,
             r->kernels, r->disk_hits, r->median_s * 1e3, r->min_s * 1e3, r->p90_s * 1e3,
             r->samples_per_s);
    } else {
      char th[32];
      if (o.threads)
        snprintf(th, sizeof th, "%u thread%s", o.threads, o.threads == 1 ? "" : "s");
      else
        snprintf(th, sizeof th, "a thread per core");
      printf("%s, %s step, batch %u, %s, %s\n", name, what, o.batch, th, r->target);
      printf("  compile: %.3f s, of which the JIT %.3f s for %u kernels", r->compile_s, r->jit_s,
             r->kernels);
      if (r->disk_hits) printf(" (%u more from the disk cache)", r->disk_hits);
      printf("\n");
      printf("  step:    median %.3f ms, fastest %.3f ms, 90th percentile %.3f ms (%u steps)\n",
             r->median_s * 1e3, r->min_s * 1e3, r->p90_s * 1e3, o.steps);
      printf("  %.0f samples/s\n", r->samples_per_s);
      if (r->n_shares) {
        printf("  shares:  ");
        for (uint32_t k = 0; k < r->n_shares; k++) printf("%s%u", k ? "," : "", r->shares[k]);
        printf(" samples; computing per step:");
        for (uint32_t k = 0; k < r->n_devices; k++) printf(" cpu:%u %.3f ms", k, r->busy_ms[k]);
        printf("\n");
      }
      if (o.profile) {
        printf("  profile: %u kernels, %.3f ms a step in all (mean of %u more steps); the cost "
               "model predicts %.3f ms\n"
               "  (calibrated: %.0f GFLOP/s, %.1f GB/s; dpc devices). The slowest:\n",
               r->n_kernels, r->profiled_ms, o.steps, r->predicted_ms, r->gflops, r->mem_gbs);
        printf("  %8s %6s %9s  %s\n", "measured", "share", "predicted", "kernel");
        for (uint32_t i = 0; i < r->n_top; i++)
          printf("  %5.3f ms %5.1f%% %6.3f ms  %s\n", r->top[i].ms,
                 r->profiled_ms > 0 ? 100 * r->top[i].ms / r->profiled_ms : 0,
                 r->top[i].predicted_ms, r->top[i].what);
      }
    }
  }
  dpc_benchmark_result_free(r);
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}
