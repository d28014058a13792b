/* cli_legacy.h — internal-type helpers for commands not yet moved onto the public headers;
 * removed once every command calls libdpc only. */
#ifndef DPC_TOOLS_CLI_LEGACY_H
#define DPC_TOOLS_CLI_LEGACY_H
#include "driver/driver.h"
#include "tools/dpc/cli.h"
int cli_exec_opts(const char *cmd, const cli_opt *opts, int nopts, const cli_parsed *p,
                  dpc_exec_opts *x);
#endif
