/* cli_legacy.c — see cli_legacy.h. */
#include "tools/dpc/cli_legacy.h"

#include <stdio.h>
#include <string.h>

static void dump_llvm(void *user, const char *what, const char *text) {
  (void)user;
  fprintf(stderr, "; ---- %s ----\n%s\n", what, text);
}

int cli_exec_opts(const char *cmd, const cli_opt *opts, int nopts, const cli_parsed *p,
                  dpc_exec_opts *x) {
  const char *b = cli_get(opts, nopts, p, "backend");
  memset(x, 0, sizeof *x);
  dpc_diag d;
  dpc_diag_init(&d);
  if (dpc_codegen_backend_find(b ? b : "llvm", &x->backend, &d)) {
    int rc = cli_usage_error(cmd, "--backend: %s", d.msg);
    dpc_diag_free(&d);
    return rc;
  }
  dpc_diag_free(&d);
  if (cli_get(opts, nopts, p, "dump-llvm")) x->cpu.dump = dump_llvm;
  return DPC_EXIT_OK;
}
