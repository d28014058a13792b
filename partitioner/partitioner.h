/*
 * partitioner.h — from a graph to a plan: where each node runs, in what order, where each
 * value lives; and the Graphviz view of it.
 *
 * Today there is one device and the schedule is the graph's own topological order. The cost
 * model, METIS placement, send/recv insertion and the multi-device schedule land here next;
 * the plan type (ir/plan.h) already has room for them.
 */
#ifndef DPC_PARTITIONER_PARTITIONER_H
#define DPC_PARTITIONER_PARTITIONER_H

#include "ir/plan.h"

/* Plan g (whose shapes must all be concrete) to run on one device. The plan takes a copy of g.
 * Sources (inputs, params, state, constants) get slots but no steps: the runtime fills them.
 * Updates become copy steps after every kernel when `training`. */
dpc_status dpc_plan_single(const dpc_graph *g, const char *device, bool training, dpc_plan **out,
                           dpc_diag *d);

/* Plan g on devices devs[0..n): each node on the device it is placed on (node.device, one of
 * devs; unplaced nodes and every node of a one-device plan on devs[0]), communication ops on
 * every device they connect (input k on device k), an event wherever a kernel reads a value
 * computed on another device. Updates are computed in their target's slot where safe. */
dpc_status dpc_plan_devices(const dpc_graph *g, const char *const *devs, uint32_t n, bool training,
                            dpc_plan **out, dpc_diag *d);

/* The synchronous data-parallel training graph (partitioner/data_parallel.c): `replica` is the
 * training graph bound at the batch of one replica; the result holds `replicas` copies of it,
 * copy r placed on devices[r] (hybrid, mp > 1: the replica's own placement cpu:k goes to
 * devices[r * mp + k]) and reading rows [r b, (r + 1) b) of the global inputs of batch
 * `batch` = replicas x b, with every param's gradient and the loss all-reduced (mean) between
 * the copies. Replica 0 keeps the graph's names; replica r's are NAME.replica<r>. */
dpc_status dpc_data_parallel_graph(const dpc_graph *replica, int64_t batch, uint32_t replicas,
                                   uint32_t mp, const char *const *devices, dpc_graph **out,
                                   dpc_diag *d);

/* What automatic placement did: the bytes its cut moves (KiB, as METIS counts them) and the
 * forward FLOPs each device got (the first 16 devices). */
typedef struct dpc_place_report {
  double cut_kib;
  double flops[16];
} dpc_place_report;

/* Place the nodes of `model` (its forward graph and loss, before the training passes) on
 * devices[0..n) with METIS (partitioner/metis.c): compute balanced by `speed` (relative; NULL:
 * equal), memory balanced, bytes between devices few. Nodes the model places itself keep their
 * place. Sets node.device; the training passes then follow it. */
dpc_status dpc_place_metis(dpc_graph *model, int64_t batch, const char *const *devices,
                           const double *speed, uint32_t n, dpc_place_report *report, dpc_diag *d);

/* Baselines to measure METIS against: a contiguous split of the nodes in graph order by their
 * FLOPs (a layer split), or round-robin. The model's own placement is kept. */
dpc_status dpc_place_simple(dpc_graph *model, int64_t batch, const char *const *devices, uint32_t n,
                            bool contiguous, dpc_diag *d);

/* Replica r > 0 of a data-parallel graph names its values NAME.replica<r>. */
#define DPC_REPLICA_SUFFIX ".replica"
/* Whether `name` is a replica's copy; if so, base gets the original's name. */
bool dpc_replica_of(const char *name, char *base, size_t n);

/* The graph as Graphviz text: one cluster per device, nodes labelled with op, name and type,
 * edges with the type that flows on them; edges between devices drawn red and dashed. */
dpc_status dpc_dot_graph(const dpc_graph *g, dpc_buf *out);
/* The same with each node's time in its label (ms[node], 0 to leave it out; `dpc plan`), and
 * the bytes of every edge between devices. */
dpc_status dpc_dot_graph_costs(const dpc_graph *g, const double *ms, dpc_buf *out);

#endif
