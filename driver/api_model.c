/*
 * api_model.c — looking at models without running them (include/dpc/compiler.h): a model's
 * summary, printing, checking its pipelines, the op table.
 */
#include "driver/api_internal.h"
#include "ir/print.h"

#include <stdlib.h>
#include <string.h>

DPC_COMPILER_API void dpc_net_summarize(const dpc_net *n, dpc_net_summary *out) {
  dpc_net_summary s = {0};
  const dpc_graph *g = n->g;
  s.name = g->name != DPC_NONE ? dpc_graph_str(g, g->name) : NULL;
  s.nodes = g->n_nodes;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op == DPC_OP_INPUT) s.inputs++;
    if (g->nodes[i].op == DPC_OP_PARAM) {
      s.params++;
      s.weights += dpc_shape_numel(&g->values[g->nodes[i].out].shape);
    }
  }
  s.trainable = g->obj.loss != DPC_NONE;
  size_t n_copy = out->size < sizeof s ? out->size : sizeof s;
  s.size = out->size;
  memcpy(out, &s, n_copy);
}

/* b's pass options for one pipeline; `fuse`: kernels grouped as b's backend compiles them. */
static dpc_status pass_opts(const dpc_build_opts *b, bool fuse, bool training, dpc_pass_opts *po,
                            dpc_diag *d) {
  dpc_exec_opts x;
  dpc_status st = dpc_api_build(b, &x, po, d);
  if (st) return st;
  if (!fuse) po->fuse = 0;
  po->training = training;
  return DPC_OK;
}

DPC_COMPILER_API dpc_status dpc_net_print(const dpc_net *n, dpc_print_form form, bool training,
                                          const dpc_build_opts *b, char **text, dpc_message *m) {
  *text = NULL;
  dpc_pass_opts po;
  dpc_status st = pass_opts(b, true, training, &po, m);
  if (st) return st;
  dpc_graph *g = dpc_graph_clone(n->g);
  if (!g) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  bool after = po.print_after != NULL;
  if (after || po.verify_each) {
    st = training ? dpc_driver_default_horizon(g, m) : DPC_OK;
    if (!st) st = dpc_passes_run(g, &po, m);
    if (st || after) { /* with dumps, they were the output */
      dpc_graph_free(g);
      return st;
    }
  }
  dpc_buf out = {0};
  switch (form) {
  case DPC_PRINT_DOT_FULL: st = dpc_dot_graph_full(g, NULL, &out); break;
  case DPC_PRINT_DOT: st = dpc_dot_graph(g, &out); break;
  case DPC_PRINT_BRIEF: st = dpc_print_graph_brief(g, 4, &out); break;
  case DPC_PRINT_TEXT: st = dpc_print_graph(g, &out); break;
  default:
    dpc_graph_free(g);
    return dpc_diag_fail(m, DPC_ERR_INVALID, "%d is not a print form", (int)form);
  }
  dpc_graph_free(g);
  if (st) {
    dpc_buf_free(&out);
    return dpc_diag_fail(m, st, "out of memory printing the model");
  }
  *text = out.data ? dpc_buf_take(&out) : dpc_strdup("");
  if (!*text) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory printing the model");
  return DPC_OK;
}

DPC_COMPILER_API dpc_status dpc_net_check(const dpc_net *n, bool training, const dpc_build_opts *b,
                                          dpc_message *m) {
  dpc_pass_opts po;
  dpc_status st = pass_opts(b, false, training, &po, m);
  if (st) return st;
  if (training && n->g->obj.loss == DPC_NONE)
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "%s: training needs the model to say what to minimize "
                         "(minimize LOSS with sgd(lr=0.1))",
                         n->path);
  dpc_graph *c = dpc_graph_clone(n->g);
  if (!c) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  st = training ? dpc_driver_default_horizon(c, m) : DPC_OK;
  if (!st) st = dpc_passes_run(c, &po, m);
  dpc_graph_free(c);
  return st;
}

/* ---- the op table ------------------------------------------------------------------------ */

/* Whether op k is in the public table: every op but the sources, constant included. */
static bool listed(int k) {
  return !(dpc_op_get((dpc_op)k)->flags & DPC_OPF_SOURCE) || k == DPC_OP_CONSTANT;
}

static const dpc_op_info *op_at(unsigned i) {
  for (int k = 0; k < DPC_OP_COUNT; k++)
    if (listed(k) && i-- == 0) return dpc_op_get((dpc_op)k);
  return NULL;
}

DPC_COMPILER_API unsigned dpc_op_count(void) {
  unsigned n = 0;
  for (int k = 0; k < DPC_OP_COUNT; k++) n += listed(k);
  return n;
}

DPC_COMPILER_API const char *dpc_op_name_at(unsigned i) {
  const dpc_op_info *o = op_at(i);
  return o ? o->name : NULL;
}

DPC_COMPILER_API bool dpc_op_at(unsigned i, dpc_op_entry *out) {
  const dpc_op_info *o = op_at(i);
  if (!o) return false;
  dpc_op_entry e = {out->size, o->name, o->inputs, o->outputs, o->attrs};
  memcpy(out, &e, out->size < sizeof e ? out->size : sizeof e);
  return true;
}
