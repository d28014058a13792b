/*
 * pass.h — the pass pipeline: the ordered list in passes.def, run with verification and dumps.
 *
 * Printing a dump is the caller's business (only tools/dpc prints): the pipeline hands each
 * requested dump to a callback as text.
 */
#ifndef DPC_PASSES_PASS_H
#define DPC_PASSES_PASS_H

#include "ir/fusion.h"
#include "ir/graph.h"

enum { DPC_PIPE_INFER = 1, DPC_PIPE_TRAIN = 2, DPC_PIPE_ALL = 3 };

typedef struct dpc_pass_opts {
  bool training;    /* the training pipeline (else inference) */
  bool verify_each; /* run the verifier after every pass */
  unsigned fuse;    /* what the backend compiles as one kernel (DPC_FUSE_*, ir/fusion.h) */
  /* Comma-separated pass names after which to dump the graph, or "all"; NULL for none. */
  const char *print_after;
  /* Receives each dump: the pass name and the graph in .graph syntax. */
  void (*dump)(void *user, const char *pass, const char *text);
  void *user;
} dpc_pass_opts;

typedef dpc_status (*dpc_pass_fn)(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d);

#define DPC_PASS(name, fn, modes, why)                                                             \
  dpc_status fn(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d);
#include "passes/passes.def"
#undef DPC_PASS

/* Run the pipeline for o->training on g. */
dpc_status dpc_passes_run(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d);

/* A model whose optimizer's schedule needs total_steps and does not give it gets warmup + 1000
 * (dpc train sets it from --epochs; plans and placement only need a valid graph). */
dpc_status dpc_optimizer_default_horizon(dpc_graph *g, dpc_diag *d);

/* Check a --print-after list names only real passes; the message lists them if not. */
dpc_status dpc_passes_check_names(const char *list, dpc_diag *d);

/* Number of passes and the name of the i-th, in order (for --help). */
uint32_t dpc_pass_count(void);
const char *dpc_pass_name(uint32_t i);

#endif
