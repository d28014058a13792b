/*
 * cli.h — shared pieces of the dpc command: option parsing and error reporting.
 *
 * tools/dpc is the only code in dpc that prints for a person or exits. Exit codes: 0 success,
 * 1 the input was wrong (a model, data, a file), 2 the command line was wrong.
 */
#ifndef DPC_TOOLS_CLI_H
#define DPC_TOOLS_CLI_H

#include <dpc/plan.h>

#include <stdbool.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define CLI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLI_PRINTF(f, a)
#endif

#define DPC_EXIT_OK    0
#define DPC_EXIT_ERROR 1
#define DPC_EXIT_USAGE 2

typedef struct cli_opt {
  const char *name; /* without the leading dashes */
  bool takes_value;
  bool repeat;      /* may be given several times (values collected) */
  const char *help; /* one line; "" hides the option from --help */
} cli_opt;

/* the cuda backend's own build flags (cli_build_opts reads them) */
#define CLI_OPT_CUDA                                                                               \
  {"cuda-arch", true, false,                                                                       \
   "with --backend cuda: GPU architectures to compile CUBIN for (default sm_80,sm_90; PTX of the " \
   "lowest goes along for newer GPUs)"},                                                           \
  {                                                                                                \
    "precision", true, false,                                                                      \
        "with --backend cuda: fp32 (default: results as the CPU's), tf32 or bf16 (cuBLAS may "     \
        "round "                                                                                   \
        "matmul inputs for tensor cores; sums stay f32)"                                           \
  }

/* --loss, shared by train, plan, bench and compile (dpc_driver_attach_loss) */
#define CLI_OPT_LOSS                                                                               \
  {                                                                                                \
    "loss", true, false,                                                                           \
        "softmax_cross_entropy or mse: the loss on the model's first output, for a model that "    \
        "has "                                                                                     \
        "none (ONNX); the labels become a new input"                                               \
  }

/* --shares, shared by train and bench (dpc_driver_parse_shares) */
#define CLI_OPT_SHARES                                                                             \
  {                                                                                                \
    "shares", true, false,                                                                         \
        "data parallel: each device's samples of the batch: even (default), auto (measured: "      \
        "faster devices take more) or a list like 144,112"                                         \
  }

/* The batch of one step when --batch is not given: train, plan, bench and compile --train share
 * it, so what plan predicts and bench times is what train runs. */
#define DPC_DEFAULT_BATCH 64

/* --lr-schedule, --pipeline-schedule and the old --schedule, which took either kind */
#define CLI_OPT_LR_SCHEDULE                                                                        \
  {                                                                                                \
    "lr-schedule", true, false,                                                                    \
        "learning-rate schedule: constant, step, cosine or linear (default: the model's)"          \
  }
#define CLI_OPT_PIPELINE_SCHEDULE                                                                  \
  {                                                                                                \
    "pipeline-schedule", true, false,                                                              \
        "with --strategy pipeline: the micro-batches' order, gpipe or 1f1b (default)"              \
  }
#define CLI_OPT_OLD_SCHEDULE                                                                       \
  { "schedule", true, false, "deprecated: --lr-schedule or --pipeline-schedule, by its value" }

#define CLI_MAX_VALUES 256 /* values of one repeated option (--input, --param, --dim) */
#define CLI_MAX_OPTS   64  /* options one command may have */

typedef struct cli_parsed {
  const char *values[CLI_MAX_OPTS][CLI_MAX_VALUES]; /* per option: values in order */
  int count[CLI_MAX_OPTS];
  const char **pos; /* positional arguments: argv's own slots, reordered (no limit) */
  int npos;
  bool help;
} cli_parsed;

/* Parse argv[first..] against opts (at most CLI_MAX_OPTS). Unknown options and missing values
 * print a message naming the command and return false. The positional arguments are gathered at
 * the front of argv[first..] (argv is reordered), so any number of them fits. */
bool cli_parse(const char *cmd, const cli_opt *opts, int nopts, int argc, char **argv, int first,
               cli_parsed *out);
/* The value of option `name` (last one given), or NULL. */
const char *cli_get(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name);
int cli_count(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name);
const char *cli_value(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name, int i);
void cli_print_options(const cli_opt *opts, int nopts);

/* --backend, --dump-llvm, --verify-each and --print-after (those of them the command has) into
 * build options (size set; dumps of the graph to stdout, of LLVM IR to stderr); a usage error
 * (exit code) when --backend names no backend. */
int cli_build_opts(const char *cmd, const cli_opt *opts, int nopts, const cli_parsed *p,
                   dpc_build_opts *b);

/* The schedules a command line asks for: --lr-schedule (NULL unless lr is non-NULL: a command
 * that takes none refuses one), --pipeline-schedule (DPC_SCHEDULE_NONE when not given) and the
 * deprecated --schedule, mapped by its value to one of them with a note on stderr. A usage error
 * (exit code) for an unknown value or the two kinds mixed up. */
int cli_schedules(const char *cmd, const cli_opt *opts, int nopts, const cli_parsed *p,
                  const char **lr, dpc_pipeline_schedule *pipe);

/* --devices SPEC: how many devices it makes here, or a usage error (exit code) saying why not. */
int cli_devices(const char *cmd, const char *spec, uint32_t *n);
/* cli_devices, and GPUs too for train and bench: "cuda:0,cuda:1,..." with --backend cuda (their
 * presence is checked when they are opened). */
int cli_devices_or_gpus(const char *cmd, const char *spec, const char *backend, uint32_t *n);

/* The model at path with its inputs' leading dimension as the batch (and --loss attached when
 * given), for the commands that take --batch; when an ONNX export keeps the batch it was
 * exported with, a note on stderr says so, even when attaching the loss then fails (the model is
 * loaded again without it, on that failure only, to tell). */
dpc_status cli_load_batched(const char *cmd, const char *path, const char *loss, dpc_net **net,
                            dpc_message *m);

/* --print-after output: the graph after a pass, to stdout (user NULL) or to the FILE* given. */
void cli_print_dump(void *user, const char *pass, const char *text);

/* A dpc_strategy_parse failure as a usage error naming the flags (exit code); `kinds` are the
 * strategies the command runs, `devices` the --devices spec the count came from. */
int cli_strategy_error(const char *cmd, const dpc_strategy_error *e, uint32_t kinds,
                       const char *devices, dpc_message *m);

/* --strategy auto: the fastest predicted strategy for net (dpc_net_plan_auto with o), its text
 * form into chosen, and unless quiet a line on stderr saying what was chosen; the exit code. */
int cli_strategy_auto(const char *cmd, const dpc_net *net, const dpc_auto_opts *o, bool quiet,
                      char *chosen, size_t n);

/* Print a diagnostic for a person (stderr) and return the exit code that goes with it. */
int cli_report(const char *cmd, dpc_message *m);
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

int dpc_cmd_check(int argc, char **argv);
int dpc_cmd_devices(int argc, char **argv);
int dpc_cmd_plan(int argc, char **argv);
int dpc_cmd_print(int argc, char **argv);
int dpc_cmd_run(int argc, char **argv);
int dpc_cmd_train(int argc, char **argv);
int dpc_cmd_compile(int argc, char **argv);
int dpc_cmd_ops(int argc, char **argv);
int dpc_cmd_bench(int argc, char **argv);
int dpc_cmd_onnx_test(int argc, char **argv);
int dpc_cmd_serve(int argc, char **argv);

#endif
