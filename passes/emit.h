/*
 * emit.h — building nodes from inside a pass, tersely.
 *
 * Passes that write new computation (autodiff, the optimizer) make many small nodes. An emitter
 * carries the graph, the device new nodes go on, and a sticky status: after the first failure
 * every call returns DPC_NONE and does nothing, so a rule can be written as straight-line code
 * and checked once at the end.
 *
 *   dpc_emit e = dpc_emit_start(g, device, d);
 *   uint32_t t = dpc_emit2(&e, DPC_OP_MUL, dy, dpc_emit_scalar(&e, 0.5, DPC_F32));
 *   if (e.st) return e.st;
 */
#ifndef DPC_PASSES_EMIT_H
#define DPC_PASSES_EMIT_H

#include "ir/graph.h"

typedef struct dpc_emit {
  dpc_graph *g;
  dpc_diag *d;
  uint32_t device; /* placement of the nodes made, DPC_NONE for none */
  dpc_status st;   /* first failure, sticky */
  uint32_t mark;   /* attribute mark of the node being built */
} dpc_emit;

dpc_emit dpc_emit_start(dpc_graph *g, uint32_t device, dpc_diag *d);

/* A node without attributes; returns its first output value. */
uint32_t dpc_emit_op(dpc_emit *e, dpc_op op, const uint32_t *in, uint32_t n_in);
uint32_t dpc_emit1(dpc_emit *e, dpc_op op, uint32_t a);
uint32_t dpc_emit2(dpc_emit *e, dpc_op op, uint32_t a, uint32_t b);
uint32_t dpc_emit3(dpc_emit *e, dpc_op op, uint32_t a, uint32_t b, uint32_t c);

/* A node with attributes: begin, push attributes, finish. Returns the node id. */
void dpc_emit_begin(dpc_emit *e);
void dpc_emit_int(dpc_emit *e, const char *name, int64_t v);
void dpc_emit_float(dpc_emit *e, const char *name, double v);
void dpc_emit_ints(dpc_emit *e, const char *name, const int64_t *v, uint32_t n);
void dpc_emit_shape(dpc_emit *e, const char *name, const int64_t *dims, uint32_t n);
void dpc_emit_dtype(dpc_emit *e, const char *name, dpc_dtype t);
void dpc_emit_str(dpc_emit *e, const char *name, const char *v);
/* Copy attribute `name` of node `from` if it was given there. */
void dpc_emit_copy_attr(dpc_emit *e, uint32_t from, const char *name);
uint32_t dpc_emit_node(dpc_emit *e, dpc_op op, const uint32_t *in, uint32_t n_in, uint32_t n_out);

/* A scalar constant. */
uint32_t dpc_emit_scalar(dpc_emit *e, double v, dpc_dtype t);
/* Name a value (fails on a clash). */
void dpc_emit_name(dpc_emit *e, uint32_t value, const char *name);

#endif
