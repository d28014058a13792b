/*
 * cmd_train.c — `dpc train`: flags into libdpc's trainer options (dpc/train.h), dpc_trainer_run,
 * and progress for a person (a bar on a terminal, a line per epoch otherwise, the command that
 * resumes a stopped run). The training itself is libdpc's.
 *
 * Built a second time as the test build `dpc-testing` (DPC_CLI_TESTING, never installed), which
 * adds the test hooks' flags of dpc/testing.h: --test-slow-worker K, for the benchmarks of
 * docs/strategies.md.
 */
#include "tools/dpc/cli.h"
#include "tools/dpc/interrupt.h"
#include "tools/dpc/outpath.h"
#include "tools/dpc/plan_cluster.h"

#include <dpc/train.h>
#ifdef DPC_CLI_TESTING
#include <dpc/testing.h>
#endif

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const cli_opt train_opts[] = {
    {"data", true, false,
     "fashion-mnist (default), a folder of IDX files, or INPUTS.npy,LABELS.npy"},
    {"test-data", true, false,
     "data to evaluate on after each epoch (default: the test split of --data)"},
    {"epochs", true, false, "passes over the data (default 1)"},
    {"steps", true, false, "stop after this many optimizer steps in all"},
    {"batch", true, false, "samples per optimizer step (default 64)"},
    {"seed", true, false, "seed of the data order (default 0)"},
    {"no-shuffle", false, false, "visit samples in file order"},
    {"optimizer", true, false, "sgd, adam or adamw (default: the model's)"},
    CLI_OPT_LOSS,
    {"lr", true, false, "learning rate, above 0 (default: the model's)"},
    {"momentum", true, false, "SGD momentum, in [0, 1) (default: the model's)"},
    {"weight-decay", true, false, "weight decay, 0 or more (default: the model's)"},
    CLI_OPT_LR_SCHEDULE,
    CLI_OPT_PIPELINE_SCHEDULE,
    CLI_OPT_OLD_SCHEDULE,
    {"init", true, false, "FILE.safetensors: start from these params (names as in the model)"},
    {"save", true, false, "FILE.safetensors: write the final params (and model state) there"},
    {"checkpoint", true, false, "FILE.safetensors: where checkpoints go (written at the end too)"},
    {"checkpoint-every", true, false, "write a checkpoint every N steps (needs --checkpoint)"},
    {"resume", true, false, "FILE.safetensors: continue a run from its checkpoint"},
    {"trace", true, false,
     "FILE.json: a timeline of the first 20 steps, a track per device (chrome://tracing, "
     "Perfetto)"},
    {"log", true, false, "FILE.jsonl: one JSON object per step (and per epoch)"},
    {"backend", true, false,
     "llvm (default: kernels compiled for this CPU), ref (the reference kernels) or cuda "
     "(kernels compiled by NVRTC, run on the GPU cuda:0)"},
    CLI_OPT_CUDA,
    {"threads", true, false, "threads for compiled kernels (default: one per core)"},
    {"devices", true, false,
     "cpu (default), or cpu:N / numa: synchronous data parallel over those devices; mpi (run "
     "under mpirun): each rank one device; with --backend cuda: cuda:0,cuda:1,... (GPUs), or "
     "cpu,cuda:0,... (the CPU beside them, --strategy model or pipeline)"},
    CLI_OPT_SHARES,
    {"strategy", true, false,
     "with several devices: data (default), model (the graph's @ cpu:K placement, else METIS's), "
     "hybrid (data-parallel replicas of --mp devices each), pipeline (--stages, --microbatches, "
     "--dp), or auto (the fastest predicted that fits, as dpc plan --strategy auto)"},
    {"device-memory", true, false, "SIZE (512M, 2G): each device's memory; the plan must fit"},
    {"mp", true, false, "with --strategy hybrid: devices per replica (the model split over them)"},
    {"stages", true, false,
     "with --strategy pipeline: the pipeline's stages (devices per replica)"},
    {"microbatches", true, false, "with --strategy pipeline: micro-batches per batch (default 4)"},
    {"dp", true, false, "with --strategy pipeline: data-parallel replicas of the pipeline (1)"},
    {"sync", true, false,
     "sync (default) or async: the devices are workers of a parameter server (data parallel)"},
    {"staleness", true, false,
     "with --sync async: a gradient is applied at most S updates after its params (default 4; 0: "
     "synchronous)"},
#ifdef DPC_CLI_TESTING
    /* dpc-testing only, for the benchmarks of docs/strategies.md: worker K - 1 sleeps 20 ms a
     * step (dpc/testing.h); hidden from --help */
    {"test-slow-worker", true, false, ""},
#endif
    {"local-sgd", true, false,
     "K: data-parallel replicas step on their own gradients, averaging params every K steps"},
    {"accumulate", true, false,
     "K: split each replica's share of the batch into K micro-batches, one optimizer step"},
    {"timeout", true, false, "seconds a device waits for another before the step fails (60)"},
    {"pretend-hosts", true, false,
     "with --devices mpi: group the ranks into N pretended hosts (consecutive ranks), summed "
     "hierarchically as separate machines"},
    {"dump-llvm", false, false, "print the generated LLVM IR to stderr"},
    {"quiet", false, false, "print only errors and the final summary"},
    {"verify-each", false, false, "run the verifier after every pass"},
    {"print-after", true, false, "print the training graph after PASS (comma-separated, or all)"},
};
#define NTRAIN (int)(sizeof train_opts / sizeof *train_opts)

/* Seconds on a monotonic clock. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct progress {
  bool tty, quiet;
  uint64_t epochs;
  double last_draw;
  double last_test_accuracy;
  int argc; /* the command line, for the one that resumes a stopped run */
  char **argv;
  bool stopped;
} progress;

static void on_start(void *user, const char *what) {
  progress *p = user;
  if (!p->quiet) fprintf(stderr, "dpc train: %s\n", what);
}

static void on_step(void *user, const dpc_train_step *s) {
  progress *p = user;
  if (!p->tty || p->quiet) return;
  double t = now_s();
  if (t - p->last_draw < 0.1 && s->batch != s->batches) return;
  p->last_draw = t;
  int width = 24, done = (int)(width * s->batch / (s->batches ? s->batches : 1));
  char bar[32];
  for (int i = 0; i < width; i++) bar[i] = i < done ? '#' : '.';
  bar[width] = 0;
  fprintf(stderr, "\repoch %llu/%llu [%s] %llu/%llu  loss %.4f  lr %.4g  %.0f samples/s   ",
          (unsigned long long)s->epoch + 1, (unsigned long long)p->epochs, bar,
          (unsigned long long)s->batch, (unsigned long long)s->batches, s->loss, s->lr,
          s->samples_per_s);
  fflush(stderr);
}

static void on_epoch(void *user, const dpc_train_epoch *e) {
  progress *p = user;
  if (p->tty && !p->quiet) fprintf(stderr, "\r%*s\r", 110, "");
  if (e->evaluated)
    p->last_test_accuracy = e->test_accuracy; /* the summary shows it, --quiet too */
  if (p->quiet) return;
  printf("epoch %llu/%llu: train loss %.4f", (unsigned long long)e->epoch + 1,
         (unsigned long long)p->epochs, e->train_loss);
  if (e->evaluated) {
    printf(", test loss %.4f, test accuracy %.2f%%", e->test_loss, 100 * e->test_accuracy);
  }
  printf(", %.1f s, %.0f samples/s\n", e->seconds, e->samples_per_s);
  fflush(stdout);
}

/* Resuming: what the checkpoint fixes and what the command line changes (on stderr, --quiet too) */
static void on_note(void *user, const char *what) {
  (void)user;
  fprintf(stderr, "dpc train: note: %s\n", what);
}

/* A stopped run (Ctrl-C, SIGTERM): where it got to and how to go on. */
static void on_stop(void *user, const dpc_train_stop *s) {
  progress *p = user;
  p->stopped = true;
  if (p->tty && !p->quiet) fprintf(stderr, "\r%*s\r", 110, ""); /* the progress bar */
  fprintf(stderr, "dpc train: stopped by %s after step %llu (epoch %llu/%llu, batch %llu/%llu)\n",
          cli_interrupt_name(), (unsigned long long)s->step, (unsigned long long)s->epoch + 1,
          (unsigned long long)p->epochs, (unsigned long long)s->batch,
          (unsigned long long)s->batches);
  if (!s->checkpoint) {
    fprintf(stderr, "dpc train: nothing was kept: with --checkpoint FILE.safetensors (or --save "
                    "FILE.safetensors) a stopped run writes a checkpoint to resume from\n");
    return;
  }
  fprintf(stderr, "dpc train: checkpoint written to %s; resume with:\n  ", s->checkpoint);
  /* across ranks, under mpirun again (the rank count may differ: the checkpoint reshards) */
  if (dpc_mpi_size() > 0) fprintf(stderr, "mpirun -np %d ", dpc_mpi_size());
  cli_print_resume_command(stderr, p->argc, p->argv, s->checkpoint);
  fflush(stderr);
}

/* Where a stopped run without --checkpoint keeps its work: beside --save, mlp.safetensors ->
 * mlp.ckpt.safetensors. False when the name does not fit. */
static bool stop_checkpoint_path(const char *save, char *buf, size_t cap) {
  size_t n = strlen(save), ext = strlen(".safetensors");
  if (n > ext && !strcmp(save + n - ext, ".safetensors")) n -= ext;
  return (size_t)snprintf(buf, cap, "%.*s.ckpt.safetensors", (int)n, save) < cap;
}

/* Parse a non-negative integer option; false with a usage error printed. */
static bool get_u64(const cli_parsed *p, const char *name, uint64_t *out, uint64_t min) {
  const char *v = cli_get(train_opts, NTRAIN, p, name);
  if (!v) return true;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || x < min) {
    cli_usage_error("train", "--%s expects a whole number >= %llu, got '%s'", name,
                    (unsigned long long)min, v);
    return false;
  }
  *out = x;
  return true;
}

/* A number in [min, max) (above min when min is excluded); a usage error saying the range. */
static bool get_double(const cli_parsed *p, const char *name, double *out, double min,
                       bool min_excluded, double max) {
  const char *v = cli_get(train_opts, NTRAIN, p, name);
  if (!v) return true;
  char *end;
  double x = strtod(v, &end);
  if (end == v || *end || !isfinite(x) || x < min || (min_excluded && x == min) || x >= max) {
    if (isfinite(max))
      cli_usage_error("train", "--%s expects a number in [%g, %g), got '%s'", name, min, max, v);
    else
      cli_usage_error("train", "--%s expects a number %s %g, got '%s'", name,
                      min_excluded ? "above" : ">=", min, v);
    return false;
  }
  *out = x;
  return true;
}

/* The strategies dpc train runs: data (one device: single), model, hybrid and pipeline by
 * --strategy; asynchronous and local SGD by --sync async and --local-sgd. */
#define TRAIN_KINDS                                                                                \
  ((1u << DPC_STRATEGY_DATA) | (1u << DPC_STRATEGY_MODEL) | (1u << DPC_STRATEGY_HYBRID) |          \
   (1u << DPC_STRATEGY_PIPELINE))

/* A number option into a strategy argument (-1 when not given); false with a usage error. */
static bool get_arg(const cli_parsed *p, const char *name, int64_t *out, uint64_t min) {
  uint64_t x = 0;
  if (!get_u64(p, name, &x, min)) return false;
  if (cli_get(train_opts, NTRAIN, p, name)) *out = x > INT64_MAX ? INT64_MAX : (int64_t)x;
  return true;
}

/* --strategy and the options that go with it, typed by dpc_strategy_parse against --devices
 * before anything is loaded: an option the strategy would ignore, or a count that does not
 * divide, is a usage error (exit 2) naming the option. The trainer takes the result as it is
 * (dpc_trainer_opts.typed_strategy). */
static int check_strategy(const cli_parsed *p, const dpc_trainer_opts *o, const char *strategy,
                          dpc_pipeline_schedule schedule, bool async, dpc_strategy *s) {
  dpc_strategy_args a;
  dpc_strategy_args_init(&a);
  /* by name too: the text form says async or local_sgd where the flags say --sync, --local-sgd */
  a.text = strategy, a.schedule = schedule, a.async = async;
  a.shares = o->shares, a.memory_limit = o->device_memory;
  a.kinds = TRAIN_KINDS | (1u << DPC_STRATEGY_ASYNC) | (1u << DPC_STRATEGY_LOCAL_SGD);
  if (!get_arg(p, "mp", &a.mp, 1) || !get_arg(p, "stages", &a.stages, 2) ||
      !get_arg(p, "microbatches", &a.microbatches, 1) || !get_arg(p, "dp", &a.dp, 1) ||
      !get_arg(p, "accumulate", &a.accumulate, 1) || !get_arg(p, "staleness", &a.staleness, 0) ||
      !get_arg(p, "local-sgd", &a.period, 1))
    return DPC_EXIT_USAGE;
  if (o->devices) {
    int rc = cli_devices_or_gpus("train", o->devices, cli_get(train_opts, NTRAIN, p, "backend"),
                                 &a.devices);
    if (rc) return rc;
  }
  /* a compiled artifact's batch is its own */
  a.batch = o->batch;
  dpc_strategy_error e;
  dpc_message *m = dpc_message_new();
  dpc_status st = dpc_strategy_parse(&a, s, &e, m);
  int rc = st ? cli_strategy_error("train", &e, TRAIN_KINDS, o->devices, m) : DPC_EXIT_OK;
  dpc_message_free(m);
  if (rc) return rc;
  if (s->given & (1u << DPC_STRATEGY_FIELD_PLACEMENT))
    return cli_usage_error("train", "--strategy: dpc train places a model with METIS; the "
                                    "placement setting is dpc plan's");
  return DPC_EXIT_OK;
}

/* --strategy auto over this machine's GPUs: each measured, the strategies ranked as `dpc plan
 * --devices cuda:0,cuda:1` ranks them for a host of such GPUs; with the CPU named first
 * (cpu,cuda:0,...) as `dpc plan` ranks them with it: a strategy over the GPUs alone then trains
 * on them (*devices loses the CPU), and model+cpu or pipeline+cpu trains split between both. */
static int auto_on_gpus(const dpc_net *net, const dpc_trainer_opts *o, bool quiet, char *chosen,
                        size_t n, const char **devices) {
  uint32_t count = 0, gpu[64];
  bool mixed = false;
  const char *gpus = dpc_devices_gpus(o->devices, &mixed);
  dpc_message *m = dpc_message_new();
  int rc = dpc_gpus_count(gpus, &count, m) || count > 64 ? cli_report("train", m) : 0;
  for (uint32_t k = 0; k < count; k++) gpu[k] = k; /* in order from cuda:0 (dpc_gpus_count) */
  dpc_cluster cl;
  if (!rc) rc = cli_measured_gpus("train", gpu, count, quiet ? NULL : stderr, &cl);
  char said[400];
  if (!rc && mixed && cli_host_cpu(&cl, said, sizeof said, m)) rc = cli_report("train", m);
  if (!rc && mixed && !quiet) fprintf(stderr, "dpc train: %s\n", said);
  dpc_cluster_report *r = NULL;
  dpc_cluster_opts co = {sizeof co, .batch = o->batch, .strategy = "auto",
                         .memory_limit = o->device_memory, .with_host = mixed};
  if (!rc && dpc_net_plan_cluster(net, &cl, &co, &r, m)) rc = cli_report("train", m);
  if (!rc) {
    const dpc_cluster_candidate *b = &r->candidates[r->best];
    /* model+cpu is model over cpu,cuda:0,...; pipeline+cpu[:...] a pipeline of a stage on each */
    const char *plus = strstr(b->strategy, "+cpu"), *given = o->devices;
    if (plus && !strncmp(b->strategy, "pipeline", 8))
      snprintf(chosen, n, "pipeline:stages=%u%s%s", count + 1, plus[4] ? "," : "",
               plus[4] ? plus + 5 : "");
    else
      snprintf(chosen, n, "%s", plus ? "model" : b->strategy);
    if (mixed && !plus) *devices = gpus; /* the GPUs alone were predicted faster */
    if (!quiet)
      fprintf(stderr,
              "dpc train: --strategy auto: %s, predicted %.3f ms a step on the measured GPUs%s, "
              "the fastest of %u (dpc plan --devices %s --strategy auto --explain shows them)%s\n",
              b->strategy, b->step_ms, mixed ? " and this CPU" : "", r->n_candidates, given,
              mixed && !plus ? "; it trains on the GPUs alone" : "");
  }
  dpc_cluster_report_free(r);
  dpc_message_free(m);
  return rc;
}

/* --strategy auto: the fastest predicted synchronous strategy on --devices that fits
 * --device-memory (dpc_net_plan_auto; `dpc plan --strategy auto --explain` shows the table). */
static int choose_strategy(const cli_parsed *p, dpc_trainer_opts *o, bool artifact, char *chosen,
                           size_t n) {
  static const char *const chosen_by_auto[] = {
      "mp", "stages", "microbatches", "dp", "accumulate", "pipeline-schedule", "local-sgd"};
  for (size_t k = 0; k < sizeof chosen_by_auto / sizeof *chosen_by_auto; k++)
    if (cli_get(train_opts, NTRAIN, p, chosen_by_auto[k]))
      return cli_usage_error("train", "--%s: --strategy auto chooses it itself", chosen_by_auto[k]);
  const char *sync = cli_get(train_opts, NTRAIN, p, "sync");
  if (sync && strcmp(sync, "sync"))
    return cli_usage_error("train", "--strategy auto chooses among synchronous strategies; "
                                    "leave --sync out");
  if (artifact)
    return cli_usage_error("train", "--strategy auto plans a model; a compiled artifact's "
                                    "strategy is the one it was compiled with");
  dpc_message *m = dpc_message_new();
  dpc_net *net = NULL;
  dpc_load_opts lo = {sizeof lo, .batched = true, .loss = cli_get(train_opts, NTRAIN, p, "loss")};
  dpc_auto_opts ao = {sizeof ao, .batch = o->batch, .devices = o->devices,
                      .memory_limit = o->device_memory};
  bool quiet = cli_get(train_opts, NTRAIN, p, "quiet") != NULL;
  int rc = dpc_net_load(p->pos[0], &lo, &net, m) ? cli_report("train", m)
           : dpc_devices_gpus(o->devices, NULL)
               ? auto_on_gpus(net, o, quiet, chosen, n, &o->devices)
               : cli_strategy_auto("train", net, &ao, quiet, chosen, n);
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}

static int train(int *argc_, char ***argv_);

/* `--devices mpi`: MPI is started here (only then) and ended with the command; a failed rank
 * ends the job (MPI_Abort after its message), since the others may be waiting on it. A run
 * stopped by a signal is not failed: every rank stopped at the same step, after its checkpoint. */
int dpc_cmd_train(int argc, char **argv) {
  int rc = train(&argc, &argv);
  dpc_mpi_finalize(rc != DPC_EXIT_OK && rc != cli_interrupt_exit_code());
  return rc;
}

static int train(int *argc_, char ***argv_) {
  int argc = *argc_;
  char **argv = *argv_;
  cli_parsed p;
  if (!cli_parse("train", train_opts, NTRAIN, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf("Usage: dpc train FILE.graph|FILE.onnx [OPTIONS]\n"
           "       dpc train FILE.dpx [OPTIONS]\n\n"
           "Train a model on a dataset: the model's 'minimize LOSS with OPTIMIZER(...)' says what\n"
           "to minimise and how; its one floating-point input takes the data and its one integer\n"
           "input the labels. After each epoch the model is evaluated on the test split (loss and\n"
           "accuracy of its first output). See docs/training.md.\n\n"
           "An ONNX model has no objective: --loss softmax_cross_entropy (or mse) attaches one\n"
           "to its first output, with a new input 'labels'; SGD unless --optimizer says otherwise\n"
           "(docs/onnx.md). An export with a fixed batch (no dynamic_axes) trains at any\n"
           "--batch: its inputs' leading dimension is taken as the batch.\n\n"
           "A FILE.dpx from 'dpc compile --train' runs its compiled kernels without LLVM: its\n"
           "batch size and optimizer are the ones compiled in, and a partial last batch (of the\n"
           "training or the test data) is left out.\n\n"
           "--devices cpu:N trains data parallel: the model is replicated on N devices (each\n"
           "its own cores), each global --batch is split evenly between them, and gradients are\n"
           "averaged with an all-reduce before every update, so the result is single-device\n"
           "training on the same batches. See docs/strategies.md.\n\n"
           "mpirun -np R dpc train MODEL --devices mpi trains the same across R processes (or\n"
           "machines): rank r is device r, gradients are summed over MPI in rank order, rank 0\n"
           "alone prints and writes files, and a rank lost or silent past --timeout ends every\n"
           "rank with an error. See docs/distributed.md.\n\n"
           "Ctrl-C (or SIGTERM) stops after the step under way: the checkpoint goes to\n"
           "--checkpoint, else beside --save (m.safetensors -> m.ckpt.safetensors), and the\n"
           "command that resumes is printed; exit status 130 (143 for SIGTERM). A second Ctrl-C\n"
           "stops at once. Output paths are checked before anything starts.\n");
    cli_print_options(train_opts, NTRAIN);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1) return cli_usage_error("train", "expects one model file (see dpc train --help)");
  dpc_trainer_opts o;
  dpc_trainer_defaults(&o);
  uint64_t batch = o.batch;
  if (!get_u64(&p, "epochs", &o.epochs, 1) || !get_u64(&p, "steps", &o.steps, 1) ||
      !get_u64(&p, "batch", &batch, 1) || !get_u64(&p, "seed", &o.seed, 0) ||
      !get_u64(&p, "checkpoint-every", &o.checkpoint_every, 1) ||
      !get_double(&p, "lr", &o.lr, 0, true, INFINITY) ||
      !get_double(&p, "momentum", &o.momentum, 0, false, 1) ||
      !get_double(&p, "weight-decay", &o.weight_decay, 0, false, INFINITY))
    return DPC_EXIT_USAGE;
  o.seed_given = cli_get(train_opts, NTRAIN, &p, "seed") != NULL;
  if (batch > (1u << 24)) return cli_usage_error("train", "--batch is limited to %u", 1u << 24);
  o.batch = (uint32_t)batch;
  o.data = cli_get(train_opts, NTRAIN, &p, "data");
  o.test_data = cli_get(train_opts, NTRAIN, &p, "test-data");
  o.shuffle = !cli_get(train_opts, NTRAIN, &p, "no-shuffle");
  o.optimizer = cli_get(train_opts, NTRAIN, &p, "optimizer");
  if (o.optimizer && strcmp(o.optimizer, "sgd") && strcmp(o.optimizer, "adam") &&
      strcmp(o.optimizer, "adamw"))
    return cli_usage_error("train", "--optimizer is sgd, adam or adamw, not '%s'", o.optimizer);
  if (o.optimizer && strcmp(o.optimizer, "sgd") && !isnan(o.momentum))
    return cli_usage_error("train", "--momentum applies to sgd, not to --optimizer %s",
                           o.optimizer);
  dpc_pipeline_schedule schedule = DPC_SCHEDULE_NONE;
  int src = cli_schedules("train", train_opts, NTRAIN, &p, &o.lr_schedule, &schedule);
  if (src) return src;
  o.init_path = cli_get(train_opts, NTRAIN, &p, "init");
  o.save_path = cli_get(train_opts, NTRAIN, &p, "save");
  o.checkpoint_path = cli_get(train_opts, NTRAIN, &p, "checkpoint");
  o.resume_path = cli_get(train_opts, NTRAIN, &p, "resume");
  o.log_path = cli_get(train_opts, NTRAIN, &p, "log");
  o.trace_path = cli_get(train_opts, NTRAIN, &p, "trace");
  if (o.checkpoint_every && !o.checkpoint_path)
    return cli_usage_error("train", "--checkpoint-every needs --checkpoint FILE.safetensors");
  if (o.resume_path && o.init_path)
    return cli_usage_error("train", "--resume and --init do not go together");
  int xrc = cli_build_opts("train", train_opts, NTRAIN, &p, &o.build);
  if (xrc) return xrc;
  uint64_t threads = 0;
  if (!get_u64(&p, "threads", &threads, 1)) return DPC_EXIT_USAGE;
  o.threads = (uint32_t)(threads > 1024 ? 1024 : threads);
  o.devices = cli_get(train_opts, NTRAIN, &p, "devices");
  bool mpi = o.devices && !strncmp(o.devices, "mpi", 3) && (!o.devices[3] || o.devices[3] == ':');
  if (mpi) {
    dpc_message *mm = dpc_message_new();
    /* a mistaken spec is the command line's: said before MPI starts, exit 2 */
    int mrc = dpc_mpi_check_devices(o.devices, mm)
                  ? cli_usage_error("train", "--devices %s", dpc_message_brief(mm))
              : dpc_mpi_init(argc_, argv_, mm) ? cli_report("train", mm)
                                               : DPC_EXIT_OK;
    dpc_message_free(mm);
    if (mrc) return mrc;
  }
  const char *strategy = cli_get(train_opts, NTRAIN, &p, "strategy");
  o.shares = cli_get(train_opts, NTRAIN, &p, "shares");
  const char *mem = cli_get(train_opts, NTRAIN, &p, "device-memory");
  if (mem && !dpc_parse_size(mem, &o.device_memory))
    return cli_usage_error("train", "--device-memory expects a size such as 512M or 2G, got '%s'",
                           mem);
  const char *sync = cli_get(train_opts, NTRAIN, &p, "sync");
  if (sync && strcmp(sync, "sync") && strcmp(sync, "async"))
    return cli_usage_error("train", "--sync is sync or async, not '%s'", sync);
#ifdef DPC_CLI_TESTING
  uint64_t slow = 0;
  if (!get_u64(&p, "test-slow-worker", &slow, 1)) return DPC_EXIT_USAGE;
  dpc_trainer_test_hooks hooks = {sizeof hooks,
                                  .slow_worker = (uint32_t)(slow > 1024 ? 1024 : slow)};
#endif
  /* a compiled artifact: its batch size unless --batch names it again */
  bool artifact = dpc_path_is_artifact(p.pos[0]);
  if (artifact && !cli_get(train_opts, NTRAIN, &p, "batch")) o.batch = 0;
  char chosen[96];
  if (strategy && !strcmp(strategy, "auto")) {
    int arc = choose_strategy(&p, &o, artifact, chosen, sizeof chosen);
    if (arc) return arc;
    strategy = strcmp(chosen, "single") ? chosen : NULL;
  }
  dpc_strategy typed;
  int vrc = check_strategy(&p, &o, strategy, schedule, sync && !strcmp(sync, "async"), &typed);
  if (vrc) return vrc;
  o.typed_strategy = &typed;
  uint64_t timeout = 0;
  if (!get_u64(&p, "timeout", &timeout, 1)) return DPC_EXIT_USAGE;
  o.timeout_s = (double)timeout;
  uint64_t hosts = 0;
  if (!get_u64(&p, "pretend-hosts", &hosts, 1)) return DPC_EXIT_USAGE;
  if (hosts && (!o.devices || strncmp(o.devices, "mpi", 3)))
    return cli_usage_error("train", "--pretend-hosts groups MPI ranks: give --devices mpi (or "
                                    "mpi:cpu:L) and run under mpirun");
  o.pretend_hosts = (uint32_t)(hosts > 4096 ? 4096 : hosts);
  progress prog = {isatty(STDERR_FILENO) != 0,
                   cli_get(train_opts, NTRAIN, &p, "quiet") != NULL,
                   o.epochs,
                   0,
                   NAN,
                   argc,
                   argv,
                   false};
  o.on_start = on_start;
  o.on_note = on_note;
  o.on_step = on_step;
  o.on_epoch = on_epoch;
  o.on_stop = on_stop;
  o.user = &prog;
  /* Ctrl-C or SIGTERM: the step under way finishes and a checkpoint is written (to --checkpoint,
   * else beside --save) before the run ends */
  char stop_ck[4096];
  if (!o.checkpoint_path && o.save_path &&
      !stop_checkpoint_path(o.save_path, stop_ck, sizeof stop_ck))
    return cli_usage_error("train", "--save: the path is too long");
  o.stop_checkpoint_path = o.checkpoint_path || !o.save_path ? NULL : stop_ck;
  o.cancel = cli_interrupt_flag();
  cli_interrupt_catch("train", prog.tty && !prog.quiet);

  if (artifact) {
    /* its kernels always */
    o.artifact = p.pos[0];
    const char *be = cli_get(train_opts, NTRAIN, &p, "backend");
    if ((be && strcmp(be, "llvm")) || o.build.print_after ||
        cli_get(train_opts, NTRAIN, &p, "dump-llvm"))
      return cli_usage_error("train",
                             "%s is compiled already: --backend, --print-after and --dump-llvm "
                             "apply to a .graph",
                             p.pos[0]);
  }

  const char *loss = cli_get(train_opts, NTRAIN, &p, "loss");
  if (loss && o.artifact)
    return cli_usage_error("train", "--loss applies to a model, not to a compiled artifact");
  /* every output is checked now, not found unwritable after the training */
  if (cli_check_output_file("train", "save", o.save_path) ||
      cli_check_output_file("train", "checkpoint", o.checkpoint_path) ||
      cli_check_output_file("train", "log", o.log_path) ||
      cli_check_output_file("train", "trace", o.trace_path))
    return DPC_EXIT_ERROR;
  dpc_message *m = dpc_message_new();
  if (!m) {
    fprintf(stderr, "dpc train: out of memory\n");
    return DPC_EXIT_ERROR;
  }
  dpc_net *net = NULL;
  int rc = DPC_EXIT_OK;
  double t0 = now_s();
  /* an ONNX export with a fixed batch: its leading dimension becomes the batch */
  dpc_load_opts lo = {sizeof lo, .batched = true, .loss = loss};
  dpc_status st = o.artifact ? DPC_OK : dpc_net_load(p.pos[0], &lo, &net, m);
  if (st && loss) {
    /* the loss may not fit a model that kept its fixed batch: why it kept it is then the error,
     * as the trainer says of such a model */
    dpc_load_opts plain = {sizeof plain, .batched = true};
    dpc_net *kept = NULL;
    dpc_message *km = dpc_message_new();
    if (km && !dpc_net_load(p.pos[0], &plain, &kept, km) && dpc_net_fixed_batch(kept)) {
      dpc_message_clear(m);
      st = dpc_trainer_run(kept, &o, m); /* refuses it at once, with that reason */
    }
    dpc_net_free(kept);
    dpc_message_free(km);
  }
#ifdef DPC_CLI_TESTING
  if (!st) st = dpc_testing_trainer_run(net, &o, slow ? &hooks : NULL, m);
#else
  if (!st) st = dpc_trainer_run(net, &o, m);
#endif
  if (st) {
    if (prog.tty) fprintf(stderr, "\n");
    rc = cli_report("train", m);
  } else if (prog.stopped) {
    rc = cli_interrupt_exit_code();
  } else if (dpc_mpi_rank() <= 0) { /* across ranks, rank 0 speaks for the run */
    printf("trained %s in %.1f s", p.pos[0], now_s() - t0);
    if (!isnan(prog.last_test_accuracy))
      printf(": test accuracy %.2f%%", 100 * prog.last_test_accuracy);
    printf("\n");
    if (o.save_path) printf("params saved to %s\n", o.save_path);
    if (o.checkpoint_path) printf("checkpoint written to %s\n", o.checkpoint_path);
  }
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}
