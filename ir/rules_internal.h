/*
 * rules_internal.h — what the shape-rule files (rules.c, rules_layout.c, rules_window.c) share:
 * accessors for a node's inputs and outputs, the checks most rules make, and every rule's
 * prototype for the table in rules.c. Not for use outside ir/.
 */
#ifndef DPC_IR_RULES_INTERNAL_H
#define DPC_IR_RULES_INTERNAL_H

#include "ir/rules.h"

#include <stdio.h>
#include <string.h>

#define IN(i)  (&g->values[g->ids[g->nodes[node].in + (i)]])
#define OUT(k) (&g->values[g->nodes[node].out + (k)])
#define NIN    (g->nodes[node].n_in)

static inline dpc_status fail(dpc_graph *g, uint32_t node, dpc_diag *d, const char *fmt, ...)
    DPC_PRINTF(4, 5);

static inline dpc_status fail(dpc_graph *g, uint32_t node, dpc_diag *d, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dpc_graph_fail_node(g, node, d, DPC_ERR_SHAPE, "%s", msg);
}

static inline void ty(const dpc_graph *g, const dpc_value *v, char *buf, size_t n) {
  dpc_graph_format_type(g, v->dtype, &v->shape, buf, n);
}

static inline int64_t resolve(const dpc_graph *g, int64_t d) {
  if (DPC_DIM_IS_SYM(d)) {
    uint32_t k = DPC_DIM_SYM_NO(d);
    if (k < g->n_syms && g->sym_vals[k] >= 0) return g->sym_vals[k];
  }
  return d;
}

static inline void set_out(dpc_graph *g, uint32_t node, uint32_t k, dpc_dtype t,
                           const dpc_shape *s) {
  OUT(k)->dtype = t;
  OUT(k)->shape = *s;
}

static inline dpc_status need_float(dpc_graph *g, uint32_t node, uint32_t i, dpc_diag *d) {
  if (dpc_dtype_is_float(IN(i)->dtype)) return DPC_OK;
  char t[160], nm[32];
  ty(g, IN(i), t, sizeof t);
  dpc_op_input_name(g->nodes[node].op, i, nm, sizeof nm);
  return fail(g, node, d, "input '%s' must be floating point, got %s", nm, t);
}

static inline dpc_status need_numeric(dpc_graph *g, uint32_t node, uint32_t i, dpc_diag *d) {
  if (IN(i)->dtype != DPC_BOOL) return DPC_OK;
  char nm[32];
  dpc_op_input_name(g->nodes[node].op, i, nm, sizeof nm);
  return fail(g, node, d, "input '%s' must be a number type, got bool", nm);
}

static inline dpc_status need_int(dpc_graph *g, uint32_t node, uint32_t i, dpc_diag *d) {
  if (dpc_dtype_is_int(IN(i)->dtype)) return DPC_OK;
  char t[160], nm[32];
  ty(g, IN(i), t, sizeof t);
  dpc_op_input_name(g->nodes[node].op, i, nm, sizeof nm);
  return fail(g, node, d, "input '%s' must be i32 or i64, got %s", nm, t);
}

static inline dpc_status same_dtype(dpc_graph *g, uint32_t node, uint32_t i, uint32_t j,
                                    dpc_diag *d) {
  if (IN(i)->dtype == IN(j)->dtype) return DPC_OK;
  char a[160], b[160];
  ty(g, IN(i), a, sizeof a);
  ty(g, IN(j), b, sizeof b);
  return fail(g, node, d, "inputs have different dtypes: %s and %s (use cast)", a, b);
}

static inline dpc_status get_axis(dpc_graph *g, uint32_t node, const char *attr, uint32_t rank,
                                  bool allow_end, uint32_t *out, dpc_diag *d) {
  int64_t ax = dpc_attrs_int(dpc_node_attrs(g, node), attr);
  /* Negative axes count from the end (-1 is the last dimension); allow_end admits `rank`
   * itself, as flatten does (ONNX: axis in [-r, r]). */
  int64_t lim = allow_end ? rank + 1 : rank;
  int64_t a = ax < 0 ? ax + rank : ax;
  if (a < 0 || a >= lim)
    return fail(g, node, d, "%s %lld is out of range for rank %u", attr, (long long)ax, rank);
  *out = (uint32_t)a;
  return DPC_OK;
}

static inline bool broadcast(const dpc_shape *a, const dpc_shape *b, dpc_shape *out) {
  uint32_t r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (uint32_t i = 0; i < r; i++) {
    int64_t x = i < r - a->rank ? 1 : a->d[i - (r - a->rank)];
    int64_t y = i < r - b->rank ? 1 : b->d[i - (r - b->rank)];
    if (x == y)
      out->d[i] = x;
    else if (x == 1)
      out->d[i] = y;
    else if (y == 1)
      out->d[i] = x;
    else
      return false;
  }
  return true;
}

/* Broadcast inputs [0, n) together, or fail naming all of them. */
static inline dpc_status broadcast_inputs(dpc_graph *g, uint32_t node, uint32_t n, dpc_shape *out,
                                          dpc_diag *d) {
  *out = IN(0)->shape;
  bool ok = true;
  for (uint32_t i = 1; i < n && ok; i++) {
    dpc_shape so_far = *out; /* broadcast() must not write over an operand */
    ok = broadcast(&so_far, &IN(i)->shape, out);
  }
  if (ok) return DPC_OK;
  char t[3][160];
  for (uint32_t i = 0; i < n; i++) ty(g, IN(i), t[i], sizeof t[i]);
  if (n == 2) return fail(g, node, d, "cannot broadcast %s and %s", t[0], t[1]);
  return fail(g, node, d, "cannot broadcast %s, %s and %s", t[0], t[1], t[2]);
}

static inline dpc_status need_bool(dpc_graph *g, uint32_t node, uint32_t i, dpc_diag *d) {
  if (IN(i)->dtype == DPC_BOOL) return DPC_OK;
  char t[160], nm[32];
  ty(g, IN(i), t, sizeof t);
  dpc_op_input_name(g->nodes[node].op, i, nm, sizeof nm);
  return fail(g, node, d, "input '%s' must be bool, got %s", nm, t);
}

/* dy and the tensor it is the gradient of (input i) must have the same dtype and shape. */
static inline dpc_status same_type(dpc_graph *g, uint32_t node, uint32_t i, uint32_t j,
                                   dpc_diag *d) {
  dpc_status st = same_dtype(g, node, i, j, d);
  if (st || dpc_shape_eq(&IN(i)->shape, &IN(j)->shape)) return st;
  char a[160], b[160], na[32], nb[32];
  ty(g, IN(i), a, sizeof a);
  ty(g, IN(j), b, sizeof b);
  dpc_op_input_name(g->nodes[node].op, i, na, sizeof na);
  dpc_op_input_name(g->nodes[node].op, j, nb, sizeof nb);
  return fail(g, node, d, "'%s' %s and '%s' %s must have the same shape", na, a, nb, b);
}

/* dy (input 0) must be what the forward op produced from its input: `want`. */
static inline dpc_status dy_is(dpc_graph *g, uint32_t node, const dpc_shape *want, const char *what,
                               dpc_diag *d) {
  if (dpc_shape_eq(&IN(0)->shape, want)) return DPC_OK;
  char a[160], b[160];
  ty(g, IN(0), a, sizeof a);
  dpc_graph_format_type(g, IN(0)->dtype, want, b, sizeof b);
  return fail(g, node, d, "dy must be %s (the shape of the %s output), got %s", b, what, a);
}

/* ---- the rules ---- */

dpc_status dpc_rule_batch_norm(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_batch_norm_grad(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_binary(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_cast(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_compare(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_concat(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_constant(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_dropout(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_expand(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_flatten(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_gather(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_gather_grad(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_layer_norm(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_layer_norm_grad(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_matmul(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_mse(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_not(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_reduce(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_reshape(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_sce(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_sce_grad(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_slice(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_slice_grad(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_softmax(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_softmax_grad(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_source(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_split(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_all_reduce(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_sum_to(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_transpose(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_unary(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_where(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_window(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_window_grad(dpc_graph *g, uint32_t node, dpc_diag *d);
dpc_status dpc_rule_zeros_like(dpc_graph *g, uint32_t node, dpc_diag *d);

#endif
