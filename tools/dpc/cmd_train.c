/*
 * cmd_train.c — `dpc train`: options, and progress for a person (a bar on a terminal, a line per
 * epoch otherwise). The training itself is tools/dpc/train.c.
 */
#include "tools/dpc/cli.h"
#include "tools/dpc/driver.h"
#include "tools/dpc/train.h"

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
    {"lr", true, false, "learning rate (default: the model's)"},
    {"momentum", true, false, "SGD momentum (default: the model's)"},
    {"weight-decay", true, false, "weight decay (default: the model's)"},
    {"schedule", true, false,
     "learning-rate schedule: constant, step, cosine or linear (default: the model's); with "
     "--strategy pipeline, gpipe or 1f1b (default) name the pipeline's"},
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
     "llvm (default: kernels compiled for this CPU) or ref (the reference kernels)"},
    {"threads", true, false, "threads for compiled kernels (default: one per core)"},
    {"devices", true, false,
     "cpu (default), or cpu:N / numa: synchronous data parallel over those devices"},
    CLI_OPT_SHARES,
    {"strategy", true, false,
     "with several devices: data (default), model (the graph's @ cpu:K placement, else METIS's), "
     "hybrid (data-parallel replicas of --mp devices each) or pipeline (--stages, --microbatches, "
     "--dp)"},
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
    {"test-slow-worker", true, false, ""}, /* benchmarks: worker K - 1 sleeps 20 ms a step */
    {"local-sgd", true, false,
     "K: data-parallel replicas step on their own gradients, averaging params every K steps"},
    {"accumulate", true, false,
     "K: split each replica's share of the batch into K micro-batches, one optimizer step"},
    {"timeout", true, false, "seconds a device waits for another before the step fails (60)"},
    {"dump-llvm", false, false, "print the generated LLVM IR to stderr"},
    {"quiet", false, false, "print only errors and the final summary"},
    {"verify-each", false, false, "run the verifier after every pass"},
    {"print-after", true, false, "print the training graph after PASS (comma-separated, or all)"},
};
#define NTRAIN (int)(sizeof train_opts / sizeof *train_opts)

typedef struct progress {
  bool tty, quiet;
  uint64_t epochs;
  double last_draw;
  double last_test_accuracy;
} progress;

static void on_start(void *user, const char *what) {
  progress *p = user;
  if (!p->quiet) fprintf(stderr, "dpc train: %s\n", what);
}

static void on_step(void *user, const dpc_train_step *s) {
  progress *p = user;
  if (!p->tty || p->quiet) return;
  double t = dpc_now_s();
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
  if (p->quiet) return;
  printf("epoch %llu/%llu: train loss %.4f", (unsigned long long)e->epoch + 1,
         (unsigned long long)p->epochs, e->train_loss);
  if (e->evaluated) {
    printf(", test loss %.4f, test accuracy %.2f%%", e->test_loss, 100 * e->test_accuracy);
    p->last_test_accuracy = e->test_accuracy;
  }
  printf(", %.1f s, %.0f samples/s\n", e->seconds, e->samples_per_s);
  fflush(stdout);
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

static bool get_double(const cli_parsed *p, const char *name, double *out) {
  const char *v = cli_get(train_opts, NTRAIN, p, name);
  if (!v) return true;
  char *end;
  double x = strtod(v, &end);
  if (end == v || *end || !isfinite(x) || x < 0) {
    cli_usage_error("train", "--%s expects a number >= 0, got '%s'", name, v);
    return false;
  }
  *out = x;
  return true;
}

int dpc_cmd_train(int argc, char **argv) {
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
           "(docs/onnx.md).\n\n"
           "A FILE.dpx from 'dpc compile --train' runs its compiled kernels without LLVM: its\n"
           "batch size and optimizer are the ones compiled in, and a partial last batch (of the\n"
           "training or the test data) is left out.\n\n"
           "--devices cpu:N trains data parallel: the model is replicated on N devices (each\n"
           "its own cores), each global --batch is split evenly between them, and gradients are\n"
           "averaged with an all-reduce before every update, so the result is single-device\n"
           "training on the same batches. See docs/strategies.md.\n");
    cli_print_options(train_opts, NTRAIN);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1) return cli_usage_error("train", "expects one model file (see dpc train --help)");
  dpc_train_opts o;
  dpc_train_defaults(&o);
  uint64_t batch = o.batch;
  if (!get_u64(&p, "epochs", &o.epochs, 1) || !get_u64(&p, "steps", &o.steps, 1) ||
      !get_u64(&p, "batch", &batch, 1) || !get_u64(&p, "seed", &o.seed, 0) ||
      !get_u64(&p, "checkpoint-every", &o.checkpoint_every, 1) || !get_double(&p, "lr", &o.lr) ||
      !get_double(&p, "momentum", &o.momentum) || !get_double(&p, "weight-decay", &o.weight_decay))
    return DPC_EXIT_USAGE;
  if (batch > (1u << 24)) return cli_usage_error("train", "--batch is limited to %u", 1u << 24);
  o.batch = (uint32_t)batch;
  o.data = cli_get(train_opts, NTRAIN, &p, "data");
  o.test_data = cli_get(train_opts, NTRAIN, &p, "test-data");
  o.shuffle = !cli_get(train_opts, NTRAIN, &p, "no-shuffle");
  o.optimizer = cli_get(train_opts, NTRAIN, &p, "optimizer");
  o.schedule = cli_get(train_opts, NTRAIN, &p, "schedule");
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
  int xrc = cli_exec_opts("train", train_opts, NTRAIN, &p, &o.exec);
  if (xrc) return xrc;
  uint64_t threads = 0;
  if (!get_u64(&p, "threads", &threads, 1)) return DPC_EXIT_USAGE;
  o.threads = (uint32_t)(threads > 1024 ? 1024 : threads);
  o.devices = cli_get(train_opts, NTRAIN, &p, "devices");
  o.strategy = cli_get(train_opts, NTRAIN, &p, "strategy");
  o.shares = cli_get(train_opts, NTRAIN, &p, "shares");
  const char *mem = cli_get(train_opts, NTRAIN, &p, "device-memory");
  if (mem && !dpc_driver_parse_size(mem, &o.device_memory))
    return cli_usage_error("train", "--device-memory expects a size such as 512M or 2G, got '%s'",
                           mem);
  uint64_t mp = 0;
  if (!get_u64(&p, "mp", &mp, 1)) return DPC_EXIT_USAGE;
  if (mp > DPC_MAX_DEVICES) /* was cut to 256 without a word */
    return cli_usage_error("train", "--mp is at most %u devices, not %llu", DPC_MAX_DEVICES,
                           (unsigned long long)mp);
  o.mp = (uint32_t)mp;
  uint64_t accumulate = 1;
  if (!get_u64(&p, "accumulate", &accumulate, 1)) return DPC_EXIT_USAGE;
  if (accumulate > 256) return cli_usage_error("train", "--accumulate is at most 256");
  o.accumulate = (uint32_t)accumulate;
  const char *sync = cli_get(train_opts, NTRAIN, &p, "sync");
  if (sync && strcmp(sync, "sync") && strcmp(sync, "async"))
    return cli_usage_error("train", "--sync is sync or async, not '%s'", sync);
  o.async = sync && !strcmp(sync, "async");
  uint64_t stale = 4;
  if (!get_u64(&p, "staleness", &stale, 0)) return DPC_EXIT_USAGE;
  if (cli_get(train_opts, NTRAIN, &p, "staleness") && !o.async)
    return cli_usage_error("train", "--staleness goes with --sync async");
  if (stale > 1000000) return cli_usage_error("train", "--staleness is at most 1000000");
  o.staleness = (uint32_t)stale;
  uint64_t slow = 0;
  if (!get_u64(&p, "test-slow-worker", &slow, 1)) return DPC_EXIT_USAGE;
  o.test_slow_worker = (uint32_t)(slow > 1024 ? 1024 : slow);
  uint64_t local = 0;
  if (!get_u64(&p, "local-sgd", &local, 1)) return DPC_EXIT_USAGE;
  if (local > 1000000) return cli_usage_error("train", "--local-sgd is at most 1000000 steps");
  o.local_sgd = (uint32_t)local;
  char pipe_devices[32];
  if (o.strategy && !strcmp(o.strategy, "pipeline")) {
    uint64_t stages = 0, micro = 4, dp = 1;
    if (!get_u64(&p, "stages", &stages, 2) || !get_u64(&p, "microbatches", &micro, 1) ||
        !get_u64(&p, "dp", &dp, 1))
      return DPC_EXIT_USAGE;
    if (!stages || stages > DPC_MAX_DEVICES || micro > 256 || dp > DPC_MAX_DEVICES ||
        stages * dp > DPC_MAX_DEVICES || accumulate > 1)
      return cli_usage_error("train",
                             "--strategy pipeline needs --stages S (2 to %u, S x --dp at most "
                             "%u devices); --microbatches M (up to 256) replaces --accumulate",
                             DPC_MAX_DEVICES, DPC_MAX_DEVICES);
    /* --schedule gpipe|1f1b is the pipeline's; other values name a learning-rate schedule */
    const char *sched = o.schedule;
    bool pipe_sched = sched && (!strcmp(sched, "gpipe") || !strcmp(sched, "1f1b"));
    o.pipeline = pipe_sched && !strcmp(sched, "gpipe") ? DPC_SCHEDULE_GPIPE : DPC_SCHEDULE_1F1B;
    if (pipe_sched) o.schedule = NULL;
    o.mp = (uint32_t)stages, o.accumulate = (uint32_t)micro;
    if (!o.devices) {
      snprintf(pipe_devices, sizeof pipe_devices, "cpu:%u", (unsigned)(stages * dp));
      o.devices = pipe_devices;
    }
  }
  uint64_t timeout = 0;
  if (!get_u64(&p, "timeout", &timeout, 1)) return DPC_EXIT_USAGE;
  o.timeout_s = (double)timeout;
  o.passes.verify_each = cli_get(train_opts, NTRAIN, &p, "verify-each") != NULL;
  o.passes.print_after = cli_get(train_opts, NTRAIN, &p, "print-after");
  o.passes.dump = cli_print_dump;
  progress prog = {isatty(STDERR_FILENO) != 0, cli_get(train_opts, NTRAIN, &p, "quiet") != NULL,
                   o.epochs, 0, NAN};
  o.on_start = on_start;
  o.on_step = on_step;
  o.on_epoch = on_epoch;
  o.user = &prog;

  if (dpc_driver_is_artifact(p.pos[0])) {
    /* a compiled artifact: its batch size unless --batch names it again, its kernels always */
    o.artifact = p.pos[0];
    if (!cli_get(train_opts, NTRAIN, &p, "batch")) o.batch = 0;
    const char *be = cli_get(train_opts, NTRAIN, &p, "backend");
    if ((be && strcmp(be, "llvm")) || o.passes.print_after ||
        cli_get(train_opts, NTRAIN, &p, "dump-llvm"))
      return cli_usage_error("train",
                             "%s is compiled already: --backend, --print-after and --dump-llvm "
                             "apply to a .graph",
                             p.pos[0]);
  }

  const char *loss = cli_get(train_opts, NTRAIN, &p, "loss");
  if (loss && o.artifact)
    return cli_usage_error("train", "--loss applies to a model, not to a compiled artifact");
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  int rc = DPC_EXIT_OK;
  double t0 = dpc_now_s();
  if (dpc_passes_check_names(o.passes.print_after, &d) ||
      (!o.artifact && dpc_driver_load(p.pos[0], &g, &d)) ||
      (loss && dpc_driver_attach_loss(g, loss, &d)) || dpc_train(g, &o, &d)) {
    if (prog.tty) fprintf(stderr, "\n");
    rc = cli_report("train", &d);
  } else {
    printf("trained %s in %.1f s", p.pos[0], dpc_now_s() - t0);
    if (!isnan(prog.last_test_accuracy))
      printf(": test accuracy %.2f%%", 100 * prog.last_test_accuracy);
    printf("\n");
    if (o.save_path) printf("params saved to %s\n", o.save_path);
    if (o.checkpoint_path) printf("checkpoint written to %s\n", o.checkpoint_path);
  }
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return rc;
}
