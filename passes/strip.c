/*
 * strip.c — turn a model into its inference graph: forget the objective and the updates.
 *
 * What remains is what the outputs need (dce removes the rest, including the loss and the
 * labels input, so running a model for inference never asks for labels).
 */
#include "passes/pass.h"

dpc_status dpc_pass_strip(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d) {
  (void)o;
  (void)d;
  g->obj.loss = DPC_NONE;
  g->obj.optimizer = DPC_NONE;
  g->obj.n_attr = 0;
  g->n_updates = 0;
  return DPC_OK;
}
