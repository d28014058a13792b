/*
 * plan_cluster.h — `dpc plan MODEL --cluster FILE` (cmd_plan_cluster.c): cmd_plan.c hands its
 * parsed flags over when --cluster is given.
 */
#ifndef DPC_TOOLS_PLAN_CLUSTER_H
#define DPC_TOOLS_PLAN_CLUSTER_H

#include "tools/dpc/cli.h"

/* Plan the model of p (its one positional argument) for the cluster in `file`; the exit code. */
int cli_plan_cluster(const cli_opt *opts, int nopts, const cli_parsed *p, const char *file);

#endif
