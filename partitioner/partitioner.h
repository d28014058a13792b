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

/* The graph as Graphviz text: one cluster per device, nodes labelled with op, name and type,
 * edges with the type that flows on them; edges between devices drawn red and dashed. */
dpc_status dpc_dot_graph(const dpc_graph *g, dpc_buf *out);

#endif
