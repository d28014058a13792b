/*
 * plan_cluster.h — `dpc plan MODEL --cluster FILE` (cmd_plan_cluster.c): cmd_plan.c hands its
 * parsed flags over when --cluster is given.
 */
#ifndef DPC_TOOLS_PLAN_CLUSTER_H
#define DPC_TOOLS_PLAN_CLUSTER_H

#include "tools/dpc/cli.h"

#include <dpc/cluster.h>
#include <stdio.h>

/* What dpc plan has read already: --batch (0: not given), --device-memory (0: none), and
 * whether --devices named the CPU beside simulated GPUs (`cpu,cuda:0,...`). */
typedef struct cli_plan_sizes {
  uint32_t batch;
  uint64_t limit;
  bool host_cpu;
} cli_plan_sizes;

/* Plan the model of p (its one positional argument) for the cluster in `file`; the exit code.
 * gpus > 0 (`--devices cuda:0,cuda:1 --simulate-devices FILE`): that many of the file's
 * devices on one host, joined by its within-host link, stand for the GPUs named; with
 * sizes->host_cpu the host's CPU joins them (the file's "host", else this machine's CPU as
 * dpc devices measures it; the file's host_to_device link, else PCIe 4.0 x16). */
int cli_plan_cluster(const cli_opt *opts, int nopts, const cli_parsed *p, const char *file,
                     uint32_t gpus, const cli_plan_sizes *sizes);

/* `dpc plan MODEL --devices cuda:0,cuda:1,...` on a machine with those GPUs: each measured
 * (dpc_gpu_measure: GEMM GFLOP/s on cuBLAS, copy and peer-copy bandwidth, memory) and planned as
 * one host of them, the slowest figure of each kind for all; with sizes->host_cpu the CPU
 * joins as with --simulate-devices. */
int cli_plan_gpus(const cli_opt *opts, int nopts, const cli_parsed *p, const uint32_t *gpu,
                  uint32_t n, const cli_plan_sizes *sizes);
/* The GPUs gpu[0..n) of this machine measured (a line each to `say`, unless NULL) as a described
 * host of them, for `dpc CMD`; the exit code (an error said on stderr when a GPU is missing or has
 * no GEMM rate). */
int cli_measured_gpus(const char *cmd, const uint32_t *gpu, uint32_t n, FILE *say, dpc_cluster *cl);
/* The host's CPU beside cl's GPUs: cl's own "host" where it describes one, else this machine's
 * CPU as dpc devices measures it; cl's link to the GPUs, else PCIe 4.0 x16. The line that says
 * which into said. */
dpc_status cli_host_cpu(dpc_cluster *cl, char *said, size_t cap, dpc_message *m);

/* `dpc plan MODEL --devices mpi[:cpu:L] --hosts H[xN] [--link GBS,US]`: the plan for H hosts of
 * N devices (L when not given) like this machine's `cpu:N` devices (their measured speeds),
 * joined by a link of GBS GB/s and US microseconds a message (10 Gb/s Ethernet when not given):
 * a cluster plan without mpirun. */
int cli_plan_mpi(const cli_opt *opts, int nopts, const cli_parsed *p, const char *spec,
                 const cli_plan_sizes *sizes);

#endif
