/*
 * graph.h — the one graph type used at every stage of dpc.
 *
 * A graph is flat arrays indexed by 32-bit ids: nodes, values (the outputs of nodes), input-id
 * lists, attributes and their payloads. A node's outputs are consecutive values. Nodes are kept
 * in a topological order (every input is produced by an earlier node); the verifier checks it.
 * Because nothing points into another array, a graph copies, replicates and serialises cheaply.
 *
 *   dpc_graph *g = dpc_graph_new();
 *   uint32_t m = dpc_graph_attr_mark(g);
 *   dpc_graph_attr_int(g, "axis", 1);
 *   dpc_node_desc nd = {.op = DPC_OP_SOFTMAX, .in = &x, .n_in = 1, .attr_mark = m};
 *   uint32_t node;
 *   if (dpc_graph_add_node(g, &nd, &node, diag)) ...   // shape rule ran; error names the node
 *   uint32_t y = g->nodes[node].out;                    // its first output value
 */
#ifndef DPC_IR_GRAPH_H
#define DPC_IR_GRAPH_H

#include "ir/base.h"
#include "ir/intern.h"
#include "ir/op.h"
#include "ir/types.h"

typedef struct dpc_attr {
  uint32_t name; /* string id */
  uint8_t kind;  /* dpc_attr_kind */
  uint8_t dtype; /* TENSOR: element type; DTYPE: the value */
  uint16_t rank; /* TENSOR: rank */
  uint32_t n;    /* INTS, FLOATS, SHAPE: length; TENSOR: element count */
  uint32_t dims; /* TENSOR: offset of its dims in g->ints */
  union {
    int64_t i;    /* INT */
    double f;     /* FLOAT */
    uint32_t s;   /* STR: string id */
    uint32_t off; /* INTS, SHAPE: offset in g->ints; FLOATS, TENSOR: offset in g->reals */
  } u;
} dpc_attr;

typedef struct dpc_value {
  uint32_t node, index; /* producer and which of its outputs */
  uint32_t name;        /* string id, DPC_NONE when anonymous (a subexpression) */
  dpc_dtype dtype;
  dpc_shape shape;
} dpc_value;

typedef struct dpc_node {
  dpc_op op;
  uint32_t in, n_in;     /* inputs: value ids g->ids[in .. in+n_in) */
  uint32_t out, n_out;   /* outputs: values out .. out+n_out */
  uint32_t attr, n_attr; /* attributes: g->attrs[attr .. attr+n_attr) */
  uint32_t device;       /* string id of the device it is placed on, DPC_NONE when unplaced */
  /* DPC_NONE, or the later node whose kernel also computes this one (passes/fuse.c): the
   * node's outputs are used inside that group only, so a backend that fuses never stores them.
   * Backends that do not fuse run the node as usual. */
  uint32_t fused;
  dpc_loc loc; /* where it was written, for messages; line 0 when made by a pass */
  /* Where the node falls in a step of several micro-batches (partitioner/accumulate.c), for
   * pipeline schedules to reorder by: its micro-batch and phase. DPC_PHASE_NONE otherwise. */
  uint16_t mb;
  uint8_t phase;
} dpc_node;

enum {
  DPC_PHASE_NONE,     /* not part of a micro-batched step */
  DPC_PHASE_SHARED,   /* before any micro-batch: params, schedules, the global inputs */
  DPC_PHASE_FORWARD,  /* micro-batch mb's forward pass and loss */
  DPC_PHASE_BACKWARD, /* micro-batch mb's gradients and their running sums */
  DPC_PHASE_STEP      /* after every micro-batch: the averages and the optimizer */
};

/* `update TARGET = VALUE`: after a step, the param/state TARGET takes VALUE. */
typedef struct dpc_update {
  uint32_t target, value; /* value ids; target is the output of a param or state node */
  dpc_loc loc;
} dpc_update;

/* `minimize LOSS with OPTIMIZER(attrs)` */
typedef struct dpc_objective {
  uint32_t loss;      /* value id, DPC_NONE when the model has no objective */
  uint32_t optimizer; /* string id */
  uint32_t attr, n_attr;
  dpc_loc loc;
} dpc_objective;

typedef struct dpc_graph {
  uint32_t name; /* model name, string id; DPC_NONE if unnamed */
  dpc_strpool strs;
  dpc_node *nodes;
  uint32_t n_nodes, cap_nodes;
  dpc_value *values;
  uint32_t n_values, cap_values;
  uint32_t *ids;
  uint32_t n_ids, cap_ids;
  dpc_attr *attrs;
  uint32_t n_attrs, cap_attrs;
  int64_t *ints;
  uint32_t n_ints, cap_ints;
  double *reals;
  uint32_t n_reals, cap_reals;
  uint32_t *syms;    /* symbol names (string ids); symbol k is DPC_DIM_SYM(k) */
  int64_t *sym_vals; /* bound value of each symbol, -1 while unbound */
  uint32_t n_syms, cap_syms, cap_sym_vals;
  uint32_t *outputs; /* value ids */
  uint32_t n_outputs, cap_outputs;
  dpc_update *updates;
  uint32_t n_updates, cap_updates;
  dpc_objective obj;
  dpc_idmap names;           /* name string id -> value id */
  char *src_name, *src_text; /* owned copy of the text it was parsed from, for messages */
  size_t src_len;
} dpc_graph;

dpc_graph *dpc_graph_new(void);
void dpc_graph_free(dpc_graph *g);
/* A deep copy, or NULL when out of memory. */
dpc_graph *dpc_graph_clone(const dpc_graph *g);
/* Keep a copy of the text the graph came from, so later errors can quote it. */
dpc_status dpc_graph_set_source(dpc_graph *g, const char *name, const char *text, size_t len,
                                dpc_diag *d);
dpc_source dpc_graph_source(const dpc_graph *g);

static inline const char *dpc_graph_str(const dpc_graph *g, uint32_t id) {
  return dpc_strpool_get(&g->strs, id);
}
/* Intern a string; DPC_NONE when out of memory. */
uint32_t dpc_graph_intern(dpc_graph *g, const char *s, size_t n);

/* ---- building ---------------------------------------------------------------------------- */

/* Attributes for the next node (or objective) are appended first, then claimed by it. */
static inline uint32_t dpc_graph_attr_mark(const dpc_graph *g) {
  return g->n_attrs;
}
dpc_status dpc_graph_attr_int(dpc_graph *g, const char *name, int64_t v);
dpc_status dpc_graph_attr_float(dpc_graph *g, const char *name, double v);
dpc_status dpc_graph_attr_str(dpc_graph *g, const char *name, const char *v);
dpc_status dpc_graph_attr_ints(dpc_graph *g, const char *name, const int64_t *v, uint32_t n);
dpc_status dpc_graph_attr_floats(dpc_graph *g, const char *name, const double *v, uint32_t n);
dpc_status dpc_graph_attr_dtype(dpc_graph *g, const char *name, dpc_dtype t);
dpc_status dpc_graph_attr_shape(dpc_graph *g, const char *name, const int64_t *dims, uint32_t n);
dpc_status dpc_graph_attr_tensor(dpc_graph *g, const char *name, dpc_dtype t,
                                 const dpc_shape *shape, const double *data);
/* Copy attribute `a` of graph `src` (it may be g itself) to the end of g's attribute list. */
dpc_status dpc_graph_attr_copy(dpc_graph *g, const dpc_graph *src, const dpc_attr *a);
/* Drop attributes appended after `mark` (after a failed build). */
void dpc_graph_attr_reset(dpc_graph *g, uint32_t mark);

typedef struct dpc_node_desc {
  dpc_op op;
  const uint32_t *in; /* value ids */
  uint32_t n_in;
  uint32_t attr_mark; /* attributes from this mark to the end belong to the node */
  uint32_t n_out;     /* 0: the op's own count (must be given for split) */
  dpc_loc loc;
  uint32_t device; /* string id or DPC_NONE */
} dpc_node_desc;

/* Append a node after checking its inputs and attributes against the op table, then run its
 * shape rule. On failure nothing is added (its attributes are dropped too) and `d` says why,
 * pointing at desc->loc. */
dpc_status dpc_graph_add_node(dpc_graph *g, const dpc_node_desc *desc, uint32_t *node_out,
                              dpc_diag *d);
/* Name a value; fails if another value has the name. */
dpc_status dpc_graph_set_name(dpc_graph *g, uint32_t value, const char *name, size_t n,
                              dpc_diag *d);
/* The value with this name, or DPC_NONE. */
uint32_t dpc_graph_find(const dpc_graph *g, const char *name);
/* The number of a symbolic dimension, creating it; DPC_NONE when out of memory. */
uint32_t dpc_graph_symbol(dpc_graph *g, const char *name, size_t n);
/* The symbol's number or DPC_NONE. */
uint32_t dpc_graph_find_symbol(const dpc_graph *g, const char *name, size_t n);
dpc_status dpc_graph_add_output(dpc_graph *g, uint32_t value, dpc_diag *d);
dpc_status dpc_graph_add_update(dpc_graph *g, uint32_t target, uint32_t value, dpc_loc loc,
                                dpc_diag *d);
dpc_status dpc_graph_set_objective(dpc_graph *g, uint32_t loss, const char *optimizer,
                                   uint32_t attr_mark, dpc_loc loc, dpc_diag *d);

/* Keep only the nodes with keep[node] set, renumbering nodes and values. Every input of a kept
 * node, every output, update and the loss must be kept (DPC_ERR_INTERNAL otherwise). */
dpc_status dpc_graph_keep(dpc_graph *g, const bool *keep, dpc_diag *d);

/* Run the shape rule of one node again (after its inputs changed). */
dpc_status dpc_graph_infer_node(dpc_graph *g, uint32_t node, dpc_diag *d);

/* Bind symbol values (vals[k] for symbol k, -1 to leave unbound) and infer every shape again,
 * so the graph becomes concrete. */
dpc_status dpc_graph_bind(dpc_graph *g, const int64_t *vals, dpc_diag *d);

/* ---- reading ----------------------------------------------------------------------------- */

static inline const uint32_t *dpc_node_inputs(const dpc_graph *g, const dpc_node *n) {
  return g->ids + n->in;
}
static inline const dpc_value *dpc_node_input(const dpc_graph *g, const dpc_node *n, uint32_t i) {
  return &g->values[g->ids[n->in + i]];
}

/* A read-only view of an attribute list and the spec that gives its defaults. */
typedef struct dpc_attrs {
  const dpc_graph *g;
  uint32_t off, n;
  const char *spec;
} dpc_attrs;

dpc_attrs dpc_node_attrs(const dpc_graph *g, uint32_t node);
/* The stored attribute, or NULL when it was not given. */
const dpc_attr *dpc_attrs_get(dpc_attrs a, const char *name);
/* True when given, or when the spec has a default. */
bool dpc_attrs_has(dpc_attrs a, const char *name);
int64_t dpc_attrs_int(dpc_attrs a, const char *name);
double dpc_attrs_float(dpc_attrs a, const char *name);
/* String value into buf (the spec default when absent; "" when optional and absent). */
void dpc_attrs_str(dpc_attrs a, const char *name, char *buf, size_t n);
dpc_dtype dpc_attrs_dtype(dpc_attrs a, const char *name);
/* Integer list into out (at most max entries); a single integer expands to `expand` copies when
 * expand > 0. Returns the number of entries, 0 when absent without default. */
uint32_t dpc_attrs_ints(dpc_attrs a, const char *name, int64_t *out, uint32_t max, uint32_t expand);
/* Float list, likewise. */
uint32_t dpc_attrs_floats(dpc_attrs a, const char *name, double *out, uint32_t max);

/* "'h1' (relu)" or "relu at 4:7": how messages name a node. */
void dpc_graph_node_label(const dpc_graph *g, uint32_t node, char *buf, size_t n);
/* "h1" or "%12": how messages name a value. */
void dpc_graph_value_label(const dpc_graph *g, uint32_t value, char *buf, size_t n);
/* "f32[N, 784]" */
void dpc_graph_format_type(const dpc_graph *g, dpc_dtype t, const dpc_shape *s, char *buf,
                           size_t n);
/* "N" or "784": one dimension. */
void dpc_graph_format_dim(const dpc_graph *g, int64_t d, char *buf, size_t n);

/* An error about a node: points at where it was written and names it. */
dpc_status dpc_graph_fail_node(const dpc_graph *g, uint32_t node, dpc_diag *d, dpc_status st,
                               const char *fmt, ...) DPC_PRINTF(5, 6);

#endif
