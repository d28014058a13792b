/*
 * cost.h — what each node of a graph costs: arithmetic, memory traffic, and the memory it holds.
 *
 *   dpc_node_cost *c = calloc(g->n_nodes, sizeof *c);
 *   dpc_cost_graph(g, c, &d);                       // g bound: every shape concrete
 *   dpc_cost_total t = dpc_cost_sum(g, c);          // FLOPs, bytes, parameter memory, ...
 *   double s = dpc_cost_kernel_seconds(g, c, node, &speed);   // one kernel (a fusion group)
 *
 * FLOPs come from one rule per op (the table in cost.c, indexed by the op enum, checked
 * complete by unit.cost): 2 M N K for matmul, the same per output element and kernel tap for
 * convolutions and their gradients, a small constant per element for elementwise ops (1 for
 * add, ~10 for a transcendental), per input element for reductions. Bytes are what a kernel
 * reads and writes: for a fusion group, only the group's inputs from outside and the root's
 * outputs, because that is what fusion saves. The partitioner weighs nodes with these figures,
 * and the simulator turns them into time with a device's calibrated speed.
 */
#ifndef DPC_PARTITIONER_COST_H
#define DPC_PARTITIONER_COST_H

#include "ir/graph.h"

typedef struct dpc_node_cost {
  double flops;     /* floating-point (or integer) operations per run */
  double bytes_in;  /* bytes its kernel reads */
  double bytes_out; /* bytes its kernel writes */
  double memory;    /* bytes of its outputs: what it holds while they live */
  /* a kernel's root (or an unfused node): over its fusion group, the GEMM-class and other
   * FLOPs, and the bytes read from outside the group (each value once) and written */
  double kernel_gemm, kernel_other, kernel_bytes;
} dpc_node_cost;

/* Per-node costs of g (whose shapes must be concrete, fusion groups marked as they will run);
 * out has g->n_nodes entries. */
dpc_status dpc_cost_graph(const dpc_graph *g, dpc_node_cost *out, dpc_diag *d);

/* Whether every op has a cost rule (unit.cost enumerates the table). */
bool dpc_cost_has_rule(dpc_op op);

typedef struct dpc_cost_total {
  double flops, bytes;     /* over every kernel: FLOPs, bytes read + written */
  double param_bytes;      /* params */
  double state_bytes;      /* optimizer and model state */
  double activation_bytes; /* every other value (no reuse: what the plan holds today) */
} dpc_cost_total;

dpc_cost_total dpc_cost_sum(const dpc_graph *g, const dpc_node_cost *c);

/* A device's speed: GEMM-class arithmetic and memory bandwidth (dpc devices measures both). */
typedef struct dpc_device_speed {
  double gflops;  /* FLOP/s / 1e9 of matmul and convolution */
  double mem_gbs; /* bytes/s / 1e9 a kernel streams */
  /* NULL, or what timing the model's kernels found (`dpc plan --profile`): the roofline knows
   * nothing of a kernel's loop structure, such as a stride-1 pooling gradient's gather */
  const struct dpc_cost_profile *profile;
  /* the link to the other devices of its plan (a described cluster's within-host link): a
   * value that crosses devices costs latency + bytes / bandwidth, a collective over D devices
   * 2 (D - 1) ring steps (collective.h). 0: no link figures, the copy bandwidth above instead */
  double link_gbs, link_latency_s;
  /* a plan that stands for a larger cluster (two of its many replicas): each collective costs
   * the all-reduce among coll_per_host peers on each of coll_hosts hosts, over the link above
   * within a host and the between_* link across hosts, whatever devices it joins in the plan.
   * 0: the devices it joins, in one ring */
  uint32_t coll_per_host, coll_hosts;
  double between_gbs, between_latency_s;
  /* devices with the same nonzero group share their cores (more devices than cores): while
   * one computes, the others on its cores take their turns (0: cores of its own) */
  uint32_t core_group;
  /* a mixed plan: the host's CPU (host) beside GPUs (not host). A value that crosses between the
   * two kinds costs bus_latency_s + bytes / bus_gbs (PCIe) instead of the link above; the
   * receiver's figures count. 0: no bus, the link above for every crossing */
  bool host;
  double bus_gbs, bus_latency_s;
} dpc_device_speed;

/* Measured over predicted time, per kernel kind: a kernel is known by its key (its ops and its
 * size: the elements its root reads and writes), failing that by its GEMM or convolution (op and
 * operand sizes) timed inside another fusion, and failing that by its ops and the power of two of
 * its size (the sums over the sizes of that class timed; the next class up or down when that has
 * none); one not timed at any size near its own keeps the roofline's figure. (A factor per root
 * op was tried for those: a fused GELU makes `mul` kernels look 7x slow, and every other `mul`
 * inherited it; the sums by op are kept for the report.) */
typedef struct dpc_cost_profile {
  double op_factor[DPC_OP_COUNT];                       /* 0: none known */
  double op_ms[DPC_OP_COUNT], op_pred_ms[DPC_OP_COUNT]; /* the sums by root op, per step */
  uint64_t *key;
  double *factor;
  uint32_t n, cap;
} dpc_cost_profile;

/* The key of the kernel rooted at `node` (with its fusion group). */
uint64_t dpc_cost_kernel_key(const dpc_graph *g, uint32_t node);
/* Add a timed kernel (measured and predicted seconds) to the profile; finish turns the sums
 * into factors. */
dpc_status dpc_cost_profile_add(dpc_cost_profile *p, const dpc_graph *g, uint32_t node,
                                double measured, double predicted);
void dpc_cost_profile_finish(dpc_cost_profile *p);
/* Add a finished profile's kernel kinds that `into` does not know yet (profiles of one model at
 * several batch sizes: their kernels differ by the size of their outputs). The sums by op stay
 * `into`'s. */
dpc_status dpc_cost_profile_merge(dpc_cost_profile *into, const dpc_cost_profile *from);
void dpc_cost_profile_free(dpc_cost_profile *p);

/* The predicted time of the kernel rooted at `node` (with its fusion group, if any): its
 * arithmetic at the device's speed (elementwise and reduction ops at a quarter of it: they do
 * not run at GEMM efficiency) or its memory traffic, whichever is longer (a roofline). 0 for
 * sources and fused members. */
double dpc_cost_kernel_seconds(const dpc_graph *g, const dpc_node_cost *c, uint32_t node,
                               const dpc_device_speed *s);

#endif
