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
#include <dpc/compiler.h>
#include "partitioner/cost.h"

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

/* The synchronous data-parallel training graph (partitioner/data_parallel.c): reps[r] is the
 * training graph bound at replica r's share b_r of the batch (the same graph for every replica
 * when the shares are equal); the result holds `replicas` copies, copy r placed on devices[r]
 * (hybrid, mp > 1: the replica's own placement cpu:k goes to devices[r * mp + k]) and reading
 * rows [b_0 + .. + b_{r-1}, + b_r) of the global inputs of batch `batch` = the sum of the
 * shares, with every param's gradient and the loss all-reduced between the copies, each weighed
 * by its share (with reduce_grads; without, each copy steps on its own gradient, as local SGD
 * does). Replica 0 keeps the graph's names; replica r's are NAME.replica<r>. */
dpc_status dpc_data_parallel_graph(const dpc_graph *const *reps, int64_t batch, uint32_t replicas,
                                   uint32_t mp, const char *const *devices, bool reduce_grads,
                                   dpc_graph **out, dpc_diag *d);
/* The rows a bound replica graph takes: its first input's batch dimension (-1: no input with
 * one). */
int64_t dpc_replica_rows(const dpc_graph *g);

/* What automatic placement did: the first METIS cut of the chosen candidate (its objective: KiB,
 * or edges where edges are weighted alike; 0 for the layer split; repair and chain moves leave
 * it); after
 * repair, the bytes that cross devices (each value once per device that reads it), the forward
 * FLOPs and the estimated memory (bytes) each device got (placement takes at most
 * DPC_MAX_DEVICES devices, so every device has its entry), the busiest
 * device's compute against its share (1: even), the bytes over the memory limits (0: all fit),
 * the nodes moved to put the devices in an order the values follow, the chains moved, and
 * whether every value now flows from a device to itself or one after it. */
typedef struct dpc_place_report {
  double cut_kib, cut_bytes;
  double flops[DPC_MAX_DEVICES];
  double memory[DPC_MAX_DEVICES];
  double compute_ratio, over_limit;
  double score;   /* the chosen candidate's score (dpc_place_opts), 0 without one */
  double busiest; /* and its busiest device's compute (seconds; 0: not known) */
  uint32_t moved_for_order, chain_moves;
  bool order_kept;
} dpc_place_report;

/* What dpc_place_repair works from, per node of the bound graph: its compute, its memory
 * (bytes), whether its place is the model's own; per part: its share of the compute, its
 * memory limit in bytes (NULL or 0: none) and the first part whose device is its twin (the
 * same speed and limit; NULL: every device is different). */
typedef struct dpc_repair_in {
  uint32_t n_parts;
  bool memory_only; /* refine only to bring parts under their memory limits */
  const double *compute, *memory;
  const bool *fixed;
  const double *target, *mem_limit;
  const uint32_t *twin;
} dpc_repair_in;

/* Make the placement part[node] (parts 0..n_parts) acyclic between parts and refine it
 * (partitioner/repair.c): the parts get an order, every value flows to its own or a later
 * part, parts over their memory limit shed nodes, and fewer bytes cross. `g` must be bound. */
dpc_status dpc_place_repair(const dpc_graph *g, const dpc_repair_in *in, int32_t *part,
                            dpc_place_report *out, dpc_diag *d);

/* Scores placement part[node] of the bound graph: lower is better; *busiest gets the busiest
 * device's compute (0 when it does not count, as for a placement over a memory limit). */
typedef dpc_status (*dpc_place_trial_fn)(void *ctx, const int32_t *part, double *score,
                                         double *busiest, dpc_diag *d);

/* Placement a (score, busiest device) beats b: a score lower by over 0.5%, or one within 0.5%
 * whose busiest device computes less by over 5%. The simulator's step is good to 15-20%, not
 * to half a percent: within that, the placement that piles less on one device is the safer
 * (a kernel it underestimates hurts it less) and the better pipelined (throughput is bounded
 * by the busiest stage). */
bool dpc_place_better(double a_score, double a_busiest, double b_score, double b_busiest);

/* Improve placement `part` (scored rep->score and rep->busiest by `trial`) by moving whole
 * chains of nodes (runs in which each node is the only reader of the one before, such as a
 * branch) to other parts, each trial repaired (dpc_place_repair) and kept when it is better
 * (dpc_place_better) (partitioner/chains.c). rep gets the repair report and score of the result
 * and the moves kept. */
dpc_status dpc_place_move_chains(const dpc_graph *g, const dpc_repair_in *in, int32_t *part,
                                 dpc_place_trial_fn trial, void *ctx, dpc_place_report *rep,
                                 dpc_diag *d);

/* Scores a candidate placement (`placed` is the model with node.device set): the lower the
 * better, e.g. the simulator's step time; negative with d set when scoring fails. */
typedef double (*dpc_place_score_fn)(void *ctx, const dpc_graph *placed, double *busiest,
                                     dpc_diag *d);

typedef struct dpc_place_opts {
  const dpc_device_speed *speed; /* per device (NULL: equal devices) */
  const double *mem_limit;       /* bytes per device, kept under where it can be (NULL: none) */
  dpc_place_score_fn score;      /* chooses between the candidates (NULL: balance, then cut) */
  void *score_ctx;
} dpc_place_opts;

/* Place the nodes of `model` (its forward graph and loss, before the training passes) on
 * devices[0..n) with METIS (partitioner/metis.c): compute balanced by the devices' speed,
 * memory balanced (in proportion to the limits when given), bytes between devices few, then
 * repaired so values flow one way between devices (dpc_place_repair). Several METIS cuts are
 * made; o->score picks between them. Nodes the model places itself keep their place. Sets
 * node.device; the training passes then follow it. */
dpc_status dpc_place_metis(dpc_graph *model, int64_t batch, const char *const *devices, uint32_t n,
                           const dpc_place_opts *o, dpc_place_report *report, dpc_diag *d);

/* Baselines to measure METIS against: a contiguous split of the nodes in graph order by their
 * FLOPs (a layer split), or round-robin. The model's own placement is kept. */
dpc_status dpc_place_simple(dpc_graph *model, int64_t batch, const char *const *devices, uint32_t n,
                            bool contiguous, dpc_diag *d);

/* What the simulator predicts for one device of a plan: kernels and collectives it runs, its
 * compute and collective time, and the bytes it receives (events and collectives). */
typedef struct dpc_sim_device {
  uint32_t kernels, comms;
  double compute_s, comm_s, comm_bytes;
} dpc_sim_device;

/* The predicted time of one step of plan p (partitioner/simulate.c): c holds the cost of every
 * node of p->g, speed[i] is device i's speed (GEMM and copy bandwidth, as dpc devices measures
 * them), out[i] gets device i's figures. Each device walks its step list with its own clock; a
 * wait takes the clock of the signal it waits for plus the value's bytes at the copy
 * bandwidth; a collective starts when every device it joins has reached it. 0 when out of
 * memory. */
double dpc_simulate_step(const dpc_plan *p, const dpc_node_cost *c, const dpc_device_speed *speed,
                         dpc_sim_device *out);

/* What a device does over an interval of the simulated step: a kernel, a local copy, its part
 * of a collective, or waiting (for a value from another device, or for the others to reach a
 * collective). Time not covered by an interval is idle: the step's bubbles. */
typedef enum dpc_sim_kind { DPC_SIM_KERNEL, DPC_SIM_COPY, DPC_SIM_COMM, DPC_SIM_WAIT } dpc_sim_kind;
typedef struct dpc_sim_span {
  double start_s, end_s;
  uint32_t device;
  uint32_t node; /* the kernel's or collective's node of p->g; DPC_NONE for copies and waits */
  dpc_sim_kind kind;
} dpc_sim_span;
/* The intervals of one simulated step, in the order the simulation made them (each device's in
 * time order). oom: an interval could not be kept, the trace is incomplete. */
typedef struct dpc_sim_trace {
  dpc_sim_span *spans;
  uint32_t n, cap;
  bool oom;
} dpc_sim_trace;
/* dpc_simulate_step, also appending each device's intervals to *trace (NULL: none kept); the
 * prediction is the same either way. Free the trace with dpc_sim_trace_free. */
double dpc_simulate_step_trace(const dpc_plan *p, const dpc_node_cost *c,
                               const dpc_device_speed *speed, dpc_sim_device *out,
                               dpc_sim_trace *trace);
void dpc_sim_trace_free(dpc_sim_trace *t);

/* Copy node i of src into dst (data_parallel.c; the builders of this module share it): inputs
 * through val (value of src -> value of dst; an input mapped to DPC_NONE is an error), on
 * `device`, with its attributes, phase and micro-batch. A dropout's offset moves by
 * rows_before rows of its output: the copy draws the mask of its own rows of the whole batch. */
dpc_status dpc_copy_node(dpc_graph *dst, const dpc_graph *src, uint32_t i, const uint32_t *val,
                         uint32_t device, int64_t rows_before, uint32_t *id, dpc_diag *d);

/* The gradient-accumulation training graph (partitioner/accumulate.c): `micro` is the
 * training graph bound at the micro-batch b; the result runs K micro-batches of the global
 * inputs of batch K b one after another, averages their gradients and losses, and makes one
 * optimizer step. Micro-batch k's values are NAME.mb<k>; the averages keep the names (w.grad,
 * loss), so data parallelism can be built on top. */
dpc_status dpc_accumulate_graph(const dpc_graph *micro, uint32_t K, dpc_graph **out, dpc_diag *d);

/* Pipeline schedules (partitioner/pipeline.c). */

/* Reorder each device's steps of plan p (of a micro-batched graph: dpc_accumulate_graph, then
 * placed in S stages) into the schedule's order for its stage stage_of_device[dev], for M
 * micro-batches. */
dpc_status dpc_pipeline_order(dpc_plan *p, uint32_t S, uint32_t M, dpc_pipeline_schedule kind,
                              const uint32_t *stage_of_device, dpc_diag *d);
/* Each device's stage: its place in its replica's line of mp devices (devices r mp .. r mp +
 * mp - 1), in the order forward values flow between them. Returns mp (0: out of memory). */
uint32_t dpc_pipeline_stages(const dpc_plan *p, uint32_t mp, uint32_t *stage_of_device);
/* How many devices of device dv's line of mp (its replica's stages) run forward kernels: the
 * stages the placement filled, which dpc_pipeline_stages numbers first. */
uint32_t dpc_pipeline_filled(const dpc_plan *p, uint32_t mp, uint32_t dv);
/* The most bytes of activations (values a micro-batch's forward pass makes) alive at once on
 * device dv in its step order, from the kernel that makes one to the last that reads it: what
 * a planner that reuses buffers would hold for them. */
uint64_t dpc_pipeline_live_peak(const dpc_plan *p, uint32_t dv);

/* The gradients of a training graph: is_grad[v] set for each value autodiff named P.grad for
 * a param P (is_grad has g->n_values entries, false elsewhere). */
void dpc_mark_grads(const dpc_graph *g, bool *is_grad);

/* How a training step splits (accumulate.c): a node reads the batch (forward and backward,
 * repeated per micro-batch or run by a worker), reads a gradient (the optimizer: once, or on
 * a server), or neither (params, schedules: shared). cls has g->n_nodes entries. */
enum { DPC_STEP_SHARED, DPC_STEP_PER_MB, DPC_STEP_OPTIMIZER };
dpc_status dpc_step_classify(const dpc_graph *g, const bool *is_grad, uint8_t *cls, dpc_diag *d);

/* The step split for a parameter server (partitioner/ps.c): `worker` computes from the inputs
 * the gradients (outputs P.grad) and the loss (the last output); `server` takes inputs P.grad
 * and updates the params and optimizer state. */
dpc_status dpc_ps_split(const dpc_graph *train, dpc_graph **worker, dpc_graph **server,
                        dpc_diag *d);

/* Lay the activations of plan p (in its final order; of a micro-batched step, the
 * micro-batches') out again so values whose lifetimes do not meet share bytes
 * (partitioner/memplan.c); each device's buffer shrinks to what its order needs at once. */
dpc_status dpc_plan_share_activations(dpc_plan *p, dpc_diag *d);

/* Collectives whose results no step of the plan reads (the loss averaged for the report) moved
 * to the end of each device's list, in their order: otherwise each is a meeting of the devices in
 * the middle of the step, where one waits for the slowest (schedule.c). */
void dpc_plan_defer_unread_collectives(dpc_plan *p);

/* Replica r > 0 of a data-parallel graph names its values NAME.replica<r>. */
#define DPC_REPLICA_SUFFIX ".replica"
/* Whether `name` is a replica's copy; if so, base gets the original's name. */
bool dpc_replica_of(const char *name, char *base, size_t n);

/* The graph as Graphviz text a person reads (partitioner/dot_view.c): one cluster per device;
 * a node per fusion group or named value (unnamed sub-expressions and nodes that cost nothing
 * folded into the value they feed, params and states into their first reader, scalar constants
 * and the scalar arithmetic of passes left out), a collective drawn on each device it joins;
 * edges between devices carry their bytes. */
dpc_status dpc_dot_graph(const dpc_graph *g, dpc_buf *out);
/* The same with each unit's time in its label (ms[node] summed over the unit, shown when it
 * rounds above 0.000 ms; `dpc plan`). */
dpc_status dpc_dot_graph_costs(const dpc_graph *g, const double *ms, dpc_buf *out);
/* Every node and edge of the graph (partitioner/dot.c; --dot-full), with ms[node] as above
 * (ms may be NULL). */
dpc_status dpc_dot_graph_full(const dpc_graph *g, const double *ms, dpc_buf *out);

#endif
