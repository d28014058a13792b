/*
 * cluster.h — plans for a cluster described in a file rather than this machine's devices
 * (`dpc plan --cluster FILE`): hosts of devices of a given speed and memory, joined by links of a
 * given bandwidth and latency within and between hosts. So a 64-GPU plan can be examined on a
 * laptop.
 *
 * The plan is composed rather than drawn device by device: one data-parallel replica (mp
 * devices within one host, the model placed over them, or a pipeline of mp stages) is planned
 * and simulated for real at the described devices' speeds and the within-host link, and the
 * gradients' all-reduce across the replicas is added by the alpha-beta cost of a hierarchical
 * ring (within each host, then across hosts). Planning time so grows with the replica, not the
 * cluster. The file format is in docs/clusters.md.
 */
#ifndef DPC_CLUSTER_H
#define DPC_CLUSTER_H

#include <dpc/plan.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dpc_cluster_link {
  double gbs;        /* GB/s (1e9 bytes) each device sends over it */
  double latency_us; /* per message */
} dpc_cluster_link;

/* A described cluster: hosts x devices_per_host devices alike. */
typedef struct dpc_cluster {
  char name[96];
  uint32_t hosts, devices_per_host;
  char device_kind[16]; /* "gpu" or "cpu": how its devices are named in the report */
  char device_name[64]; /* "H100 SXM" */
  double gflops;        /* FP32 GEMM, GFLOP/s */
  double mem_gbs;       /* memory bandwidth, GB/s */
  uint64_t memory;      /* bytes each device has */
  dpc_cluster_link within_host, between_hosts; /* between_hosts: 0 with one host */
  /* the CPU of a host beside its devices, for mixed CPU and GPU plans (dpc_cluster_opts
   * .with_host): its speed and memory (the file's "host"; host_gflops 0: not described), and
   * the link between it and each device ("links.host_to_device": PCIe) */
  char host_name[64];
  double host_gflops, host_mem_gbs;
  uint64_t host_memory;
  dpc_cluster_link host_link;
} dpc_cluster;

/* Read a cluster file (JSON). An error names the file, the key and what is wrong with it. */
DPC_COMPILER_API dpc_status dpc_cluster_load(const char *path, dpc_cluster *out, dpc_message *m);

typedef struct dpc_cluster_opts {
  size_t size;
  uint32_t batch; /* samples per step over the whole cluster (0: 64 per device) */
  /* NULL or "auto": the fastest predicted that fits; else one of "data", "data:accumulate=K",
   * "model" (one host), "hybrid:mp=K", "pipeline:stages=S[,microbatches=M][,schedule=S]" (4
   * micro-batches and 1f1b unless given; K and S divide a host's devices: a replica stays
   * within one host) */
  const char *strategy;
  uint64_t memory_limit; /* bytes each device has (0: the cluster's) */
  /* plan every replica's graph and simulate them all instead of composing (one host only, at
   * most 256 devices): a check of the composition, as slow as planning for these devices is */
  bool replicated;
  /* plan on the host's CPU too, as one more device beside the GPUs (one host; the cluster's
   * host_gflops, host_mem_gbs, host_memory and host_link set): besides the strategies over the
   * devices alone, "model+cpu" (the model placed over the CPU and the devices) and
   * "pipeline+cpu[:microbatches=M][,schedule=S]" (a stage on the CPU, then one per device) */
  bool with_host;
} dpc_cluster_opts;

/* One strategy tried. */
typedef struct dpc_cluster_candidate {
  char strategy[96]; /* its text form (dpc_cluster_opts.strategy reads it back) */
  dpc_strategy_kind kind;
  uint32_t replicas, mp, microbatches;
  dpc_pipeline_schedule schedule; /* a pipeline's order (NONE otherwise) */
  bool planned, fits;
  double step_ms;      /* predicted: the replica's step and the all-reduce across replicas */
  double replica_ms;   /* of which one replica's own step */
  double allreduce_ms; /* and the gradients' all-reduce across the replicas */
  double samples_per_s;
  uint64_t max_memory_bytes; /* the most any device of it holds */
  double bubble_pct;         /* a pipeline's idle share of the devices' time */
  char reason[256];          /* why it won, or lost, or was not planned */
  bool with_host;            /* one replica: the host's CPU (its first device) and the devices */
} dpc_cluster_candidate;

typedef struct dpc_cluster_report {
  dpc_cluster cluster;
  uint32_t devices, batch;           /* devices: the host's CPU counted when it joins (with_host) */
  dpc_cluster_candidate *candidates; /* fastest first; those that do not fit or run last */
  uint32_t n_candidates, best;       /* best: n_candidates when none fits */
  /* the chosen plan: its replicas of mp devices, each replica's batch, one replica's devices
   * (named as in the cluster: "host0/gpu:3") with their figures and memory */
  uint32_t replicas, mp, microbatches, replica_batch;
  dpc_plan_report_device *replica_devices;
  uint32_t n_replica_devices;
  uint64_t memory_limit;                  /* what each device was held to */
  uint32_t allreduces;                    /* collectives across replicas per step (per device) */
  double allreduce_bytes;                 /* the gradients each device reduces per step */
  double allreduce_sent;                  /* the bytes each device sends for that, per step */
  uint32_t peers_per_host, hosts_spanned; /* the all-reduce's shape */
  double seconds;                         /* planning time */
  /* the chosen plan's first replica device is the host's CPU, held to host_memory rather than
   * memory_limit */
  bool with_host;
} dpc_cluster_report;

/* Plan model n's training step for cluster c. On success *out has the report; when nothing
 * fits, DPC_ERR_INVALID with *out holding the table that says why. Free with
 * dpc_cluster_report_free. */
DPC_COMPILER_API dpc_status dpc_net_plan_cluster(const dpc_net *n, const dpc_cluster *c,
                                                 const dpc_cluster_opts *o,
                                                 dpc_cluster_report **out, dpc_message *m);
DPC_COMPILER_API void dpc_cluster_report_free(dpc_cluster_report *r);

#ifdef __cplusplus
}
#endif
#endif
