/*
 * kernel.h — how the executor calls a kernel, on any backend.
 *
 * A kernel sees the node it implements (op and attributes, read through the graph), its input
 * and output tensors with concrete shapes, and the run's mode. Kernels never allocate in the
 * steady state and never print; they return a status and fill the diag.
 */
#ifndef DPC_RUNTIME_KERNEL_H
#define DPC_RUNTIME_KERNEL_H

#include "ir/graph.h"
#include "ir/native.h"
#include "ir/tensor.h"

typedef struct dpc_run_info {
  bool training; /* dropout drops, batch_norm uses batch statistics */
  uint64_t step; /* counts runs of a session from 0; seeds dropout masks */
  uint64_t salt; /* 0, or the run seed mixed (dpc_session_set_seed): kernels see step ^ salt */
} dpc_run_info;

/* The step counter as kernels see it: dropout masks are a function of the node's seed and this,
 * so a run seed changes every mask while the session's own counter (events) stays the step. */
static inline uint64_t dpc_run_kernel_step(const dpc_run_info *r) {
  return r->step ^ r->salt;
}

typedef struct dpc_kernel_args {
  const dpc_graph *g;
  uint32_t node;
  const dpc_tensor *in;
  uint32_t n_in;
  dpc_tensor *out;
  uint32_t n_out;
  const dpc_run_info *run;
} dpc_kernel_args;

typedef dpc_status (*dpc_kernel_fn)(const dpc_kernel_args *a, dpc_diag *d);

/* "none", "host", "cuda" (for messages). */
const char *dpc_kernel_kind_name(dpc_kernel_kind k);

/* The reference backend: plain C loops for every op, the oracle other backends are tested
 * against. Indexed by op; a test checks every row is filled. */
extern const dpc_kernel_fn dpc_ref_kernels[DPC_OP_COUNT];

/* Whether a node runs in training mode: its `training` attribute if given, else the run's. */
bool dpc_kernel_training(const dpc_kernel_args *a);

#endif
