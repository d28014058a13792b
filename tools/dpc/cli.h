/*
 * cli.h — shared pieces of the dpc command: option parsing and error reporting.
 *
 * tools/dpc is the only code in dpc that prints for a person or exits. Exit codes: 0 success,
 * 1 the input was wrong (a model, data, a file), 2 the command line was wrong.
 */
#ifndef DPC_TOOLS_CLI_H
#define DPC_TOOLS_CLI_H

#include "ir/base.h"

#define DPC_EXIT_OK    0
#define DPC_EXIT_ERROR 1
#define DPC_EXIT_USAGE 2

typedef struct cli_opt {
  const char *name; /* without the leading dashes */
  bool takes_value;
  bool repeat;      /* may be given several times (values collected) */
  const char *help; /* one line; "" hides the option from --help */
} cli_opt;

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

#define CLI_MAX_VALUES 256
#define CLI_MAX_OPTS   64 /* options one command may have */

typedef struct cli_parsed {
  const char *values[CLI_MAX_OPTS][CLI_MAX_VALUES]; /* per option: values in order */
  int count[CLI_MAX_OPTS];
  const char *pos[64]; /* positional arguments */
  int npos;
  bool help;
} cli_parsed;

/* Parse argv[first..] against opts (at most 32). Unknown options and missing values print a
 * message naming the command and return false. */
bool cli_parse(const char *cmd, const cli_opt *opts, int nopts, int argc, char **argv, int first,
               cli_parsed *out);
/* The value of option `name` (last one given), or NULL. */
const char *cli_get(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name);
int cli_count(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name);
const char *cli_value(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name, int i);
void cli_print_options(const cli_opt *opts, int nopts);

struct dpc_exec_opts;
/* --backend and --dump-llvm into exec options; a usage error (exit code) when --backend is
 * neither llvm nor ref. */
int cli_exec_opts(const char *cmd, const cli_opt *opts, int nopts, const cli_parsed *p,
                  struct dpc_exec_opts *x);

/* --print-after output: the graph after a pass, to stdout (user NULL) or to the FILE* given. */
void cli_print_dump(void *user, const char *pass, const char *text);

/* Print a diagnostic for a person (stderr) and return the exit code that goes with it. */
int cli_report(const char *cmd, const dpc_diag *d);
int cli_usage_error(const char *cmd, const char *fmt, ...) DPC_PRINTF(2, 3);

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

#endif
