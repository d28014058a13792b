/*
 * print.c — the canonical `.graph` text of a graph.
 *
 * The rules that make printing stable (print -> parse -> print gives the same text):
 *  - a value is folded into the expression that uses it when it is anonymous, its node has one
 *    output and it has exactly one use, as an input of a node on the same device;
 *  - a folded scalar constant is written as a bare number when the parser would give that
 *    number the same dtype (the dtype of the first non-number input of the same call, f32 if
 *    none), else as constant(...);
 *  - anonymous values that cannot be folded get a generated name `_<n>` not used elsewhere;
 *  - neg is written `-x`, except of a bare number, which would read back as a negative number.
 * This file must stay in step with frontend/parse.c; tests/unit/test_print.c holds them together.
 */
#include "ir/print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const keywords[] = {"model", "input",  "param",  "state", "output", "minimize",
                                       "with",  "device", "update", "inf",   "nan"};

bool dpc_is_identifier(const char *s) {
  if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  size_t n = strlen(s);
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    bool alnum =
        c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '.' && i + 1 < n && s[i + 1] != '.')) return false;
  }
  if (strcmp(s, "_") == 0) return false;
  for (size_t k = 0; k < sizeof keywords / sizeof *keywords; k++)
    if (strcmp(s, keywords[k]) == 0) return false;
  return true;
}

typedef struct printer {
  const dpc_graph *g;
  dpc_buf *out;
  uint32_t *uses;     /* per value: uses as a node input */
  uint32_t *consumer; /* per value: the (last) node that uses it */
  bool *pinned;       /* per value: used by an output, update or the loss */
  char **gen;         /* per value: generated name, or NULL */
  bool *cut;          /* per value: would fold too deep, so it is printed as a statement */
  uint32_t *members;  /* per node: how many nodes are fused into it (passes/fuse.c) */
  uint32_t elide;     /* 0, or tensors of more values show this many and a count */
} printer;

/* Folded expressions are printed recursively; past this height a value gets a statement. */
#define FOLD_HEIGHT 64

static bool is_inline(const printer *p, uint32_t v) {
  const dpc_graph *g = p->g;
  const dpc_value *val = &g->values[v];
  const dpc_node *n = &g->nodes[val->node];
  if (val->name != DPC_NONE || p->pinned[v] || p->uses[v] != 1 || n->n_out != 1 || p->cut[v])
    return false;
  if (dpc_op_has(n->op, DPC_OPF_SOURCE) && n->op != DPC_OP_CONSTANT) return false;
  return n->device == g->nodes[p->consumer[v]].device;
}

static const char *value_name(const printer *p, uint32_t v) {
  const dpc_value *val = &p->g->values[v];
  if (p->gen[v]) return p->gen[v];
  if (val->name != DPC_NONE) return dpc_graph_str(p->g, val->name);
  return "_";
}

/* A name as the parser reads it back: in backticks unless it is a plain identifier (names
 * imported from ONNX hold '/', ':' and keywords such as `input`). */
static void put_name(dpc_buf *b, const char *s) {
  dpc_buf_printf(b, dpc_is_identifier(s) ? "%s" : "`%s`", s);
}

static void put_number(dpc_buf *b, double x) {
  char t[32];
  dpc_format_double(t, x);
  dpc_buf_puts(b, t);
}

static void put_string(dpc_buf *b, const char *s) {
  if (dpc_is_identifier(s)) {
    dpc_buf_puts(b, s);
    return;
  }
  dpc_buf_puts(b, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      dpc_buf_printf(b, "\\%c", c);
    else if (c == '\n')
      dpc_buf_puts(b, "\\n");
    else if (c < 32 || c >= 127)
      dpc_buf_printf(b, "\\x%02x", c);
    else
      dpc_buf_putn(b, (const char *)&c, 1);
  }
  dpc_buf_puts(b, "\"");
}

/* A dimension: a symbol's whole name (names run to 256 characters, so no fixed buffer), or
 * the number. */
static void put_dim(const printer *p, int64_t d) {
  const dpc_graph *g = p->g;
  if (DPC_DIM_IS_SYM(d) && DPC_DIM_SYM_NO(d) < g->n_syms) {
    put_name(p->out, dpc_graph_str(g, g->syms[DPC_DIM_SYM_NO(d)]));
  } else
    dpc_buf_printf(p->out, "%lld", (long long)d);
}

/* Nested list of a tensor's values, row-major. */
static void put_tensor(const printer *p, const dpc_attr *a) {
  const int64_t *dims = p->g->ints + a->dims;
  const double *v = p->g->reals + a->u.off;
  if (a->rank == 0) {
    put_number(p->out, v[0]);
    return;
  }
  int64_t idx[DPC_MAX_RANK] = {0};
  int64_t total = a->n;
  bool empty = total == 0;
  if (p->elide && total > 2 * (int64_t)p->elide) { /* a summary for people; it does not parse */
    dpc_buf_puts(p->out, "<");
    for (uint32_t i = 0; i < p->elide; i++) {
      put_number(p->out, v[i]);
      dpc_buf_puts(p->out, ", ");
    }
    dpc_buf_printf(p->out, "... %lld values>", (long long)total);
    return;
  }
  for (uint32_t k = 0; k < a->rank; k++) dpc_buf_puts(p->out, "[");
  if (empty) {
    for (uint32_t k = 0; k < a->rank; k++) dpc_buf_puts(p->out, "]");
    return;
  }
  for (int64_t i = 0; i < total; i++) {
    put_number(p->out, v[i]);
    /* advance the multi-index, closing and opening brackets as dimensions roll over */
    int k = (int)a->rank - 1;
    uint32_t closed = 0;
    while (k >= 0 && ++idx[k] == dims[k]) {
      idx[k] = 0;
      closed++;
      k--;
    }
    for (uint32_t c = 0; c < closed; c++) dpc_buf_puts(p->out, "]");
    if (k >= 0) {
      dpc_buf_puts(p->out, ", ");
      for (uint32_t c = 0; c < closed; c++) dpc_buf_puts(p->out, "[");
    }
  }
}

static void put_attr_value(const printer *p, const dpc_attr *a) {
  const dpc_graph *g = p->g;
  dpc_buf *b = p->out;
  switch ((dpc_attr_kind)a->kind) {
  case DPC_ATTR_INT: dpc_buf_printf(b, "%lld", (long long)a->u.i); break;
  case DPC_ATTR_FLOAT: put_number(b, a->u.f); break;
  case DPC_ATTR_STR: put_string(b, dpc_graph_str(g, a->u.s)); break;
  case DPC_ATTR_DTYPE: dpc_buf_puts(b, dpc_dtype_name((dpc_dtype)a->dtype)); break;
  case DPC_ATTR_INTS:
  case DPC_ATTR_SHAPE:
    dpc_buf_puts(b, "[");
    for (uint32_t i = 0; i < a->n; i++) {
      if (i) dpc_buf_puts(b, ", ");
      if (a->kind == DPC_ATTR_SHAPE)
        put_dim(p, g->ints[a->u.off + i]);
      else
        dpc_buf_printf(b, "%lld", (long long)g->ints[a->u.off + i]);
    }
    dpc_buf_puts(b, "]");
    break;
  case DPC_ATTR_FLOATS:
    dpc_buf_puts(b, "[");
    for (uint32_t i = 0; i < a->n; i++) {
      if (i) dpc_buf_puts(b, ", ");
      put_number(b, g->reals[a->u.off + i]);
    }
    dpc_buf_puts(b, "]");
    break;
  case DPC_ATTR_TENSOR: put_tensor(p, a); break;
  default: DPC_ASSERT(!"unknown attribute kind");
  }
}

static void put_attrs(const printer *p, uint32_t off, uint32_t n, bool first, const char *skip1,
                      const char *skip2, const char *skip3) {
  for (uint32_t i = 0; i < n; i++) {
    const dpc_attr *a = &p->g->attrs[off + i];
    const char *nm = dpc_graph_str(p->g, a->name);
    if ((skip1 && !strcmp(nm, skip1)) || (skip2 && !strcmp(nm, skip2)) ||
        (skip3 && !strcmp(nm, skip3)))
      continue;
    if (!first) dpc_buf_puts(p->out, ", ");
    first = false;
    dpc_buf_printf(p->out, "%s=", nm);
    put_attr_value(p, a);
  }
}

static bool is_scalar_constant(const printer *p, uint32_t v) {
  const dpc_graph *g = p->g;
  const dpc_node *n = &g->nodes[g->values[v].node];
  return n->op == DPC_OP_CONSTANT && g->values[v].shape.rank == 0 && is_inline(p, v);
}

/* Is value v, as input of node `user`, printed as a bare number? The parser gives every bare
 * number of a call the dtype of the call's first argument that is not a bare number (f32 if
 * none). Scalar constants of that dtype print bare; if a scalar constant of another dtype would
 * come before the first tensor argument, no argument of the call prints bare, so the parser
 * cannot be misled. */
static bool is_literal(const printer *p, uint32_t v, uint32_t user) {
  if (!is_scalar_constant(p, v)) return false;
  const dpc_graph *g = p->g;
  const dpc_node *n = &g->nodes[user];
  dpc_dtype t = DPC_F32;
  uint32_t first = n->n_in;
  for (uint32_t i = 0; i < n->n_in; i++) {
    uint32_t u = g->ids[n->in + i];
    if (!is_scalar_constant(p, u)) {
      t = g->values[u].dtype;
      first = i;
      break;
    }
  }
  for (uint32_t i = 0; i < first; i++)
    if (g->values[g->ids[n->in + i]].dtype != t) return false;
  return g->values[v].dtype == t;
}

static void put_expr(const printer *p, uint32_t v, int parent_prec);

static void put_call(const printer *p, uint32_t node) {
  const dpc_graph *g = p->g;
  const dpc_node *n = &g->nodes[node];
  dpc_buf_printf(p->out, "%s(", dpc_op_name(n->op));
  if (n->op == DPC_OP_CONSTANT) {
    const dpc_attr *a = dpc_attrs_get(dpc_node_attrs(g, node), "value");
    put_tensor(p, a);
    if (a->dtype != DPC_F32)
      dpc_buf_printf(p->out, ", dtype=%s", dpc_dtype_name((dpc_dtype)a->dtype));
    dpc_buf_puts(p->out, ")");
    return;
  }
  for (uint32_t i = 0; i < n->n_in; i++) {
    if (i) dpc_buf_puts(p->out, ", ");
    put_expr(p, g->ids[n->in + i], 0);
  }
  put_attrs(p, n->attr, n->n_attr, n->n_in == 0, NULL, NULL, NULL);
  dpc_buf_puts(p->out, ")");
}

static int infix_prec(dpc_op op) {
  switch (op) {
  case DPC_OP_ADD:
  case DPC_OP_SUB: return 1;
  case DPC_OP_MUL:
  case DPC_OP_DIV: return 2;
  default: return 0;
  }
}

/* A node's own form: infix for + - * / without attributes, prefix minus for neg (unless of a
 * bare number, which would read back as a negative number), else a call. Parenthesised when
 * its precedence is below its parent's. */
static void put_form(const printer *p, uint32_t node, int parent_prec) {
  const dpc_graph *g = p->g;
  const dpc_node *n = &g->nodes[node];
  int prec = infix_prec(n->op);
  if (prec && n->n_attr == 0) {
    const char *sym = n->op == DPC_OP_ADD   ? " + "
                      : n->op == DPC_OP_SUB ? " - "
                      : n->op == DPC_OP_MUL ? " * "
                                            : " / ";
    bool paren = prec < parent_prec;
    if (paren) dpc_buf_puts(p->out, "(");
    put_expr(p, g->ids[n->in], prec);
    dpc_buf_puts(p->out, sym);
    put_expr(p, g->ids[n->in + 1], prec + 1);
    if (paren) dpc_buf_puts(p->out, ")");
  } else if (n->op == DPC_OP_NEG && !is_literal(p, g->ids[n->in], node)) {
    bool paren = 3 < parent_prec;
    if (paren) dpc_buf_puts(p->out, "(");
    dpc_buf_puts(p->out, "-");
    put_expr(p, g->ids[n->in], 3);
    if (paren) dpc_buf_puts(p->out, ")");
  } else {
    put_call(p, node);
  }
}

static void put_expr(const printer *p, uint32_t v, int parent_prec) {
  const dpc_graph *g = p->g;
  if (!is_inline(p, v)) {
    dpc_buf_puts(p->out, value_name(p, v));
    return;
  }
  uint32_t node = g->values[v].node;
  const dpc_node *n = &g->nodes[node];
  uint32_t user = p->consumer[v];
  if (n->op == DPC_OP_CONSTANT && is_literal(p, v, user)) {
    put_number(p->out, g->reals[dpc_attrs_get(dpc_node_attrs(g, node), "value")->u.off]);
    return;
  }
  put_form(p, node, parent_prec);
}

static void put_device(const printer *p, const dpc_node *n) {
  if (n->device != DPC_NONE) dpc_buf_printf(p->out, " @ %s", dpc_graph_str(p->g, n->device));
}

static void put_type(const printer *p, const dpc_value *v) {
  dpc_buf_printf(p->out, "%s[", dpc_dtype_name(v->dtype));
  /* Print the declared dims (symbols stay symbols even when bound). */
  const dpc_node *n = &p->g->nodes[v->node];
  const dpc_attr *sh = dpc_attrs_get(dpc_node_attrs(p->g, v->node), "shape");
  (void)n;
  for (uint32_t i = 0; i < sh->n; i++) {
    if (i) dpc_buf_puts(p->out, ", ");
    put_dim(p, p->g->ints[sh->u.off + i]);
  }
  dpc_buf_puts(p->out, "]");
}

static void put_source(const printer *p, uint32_t node) {
  const dpc_graph *g = p->g;
  const dpc_node *n = &g->nodes[node];
  const dpc_value *v = &g->values[n->out];
  dpc_buf_printf(p->out, "%s %s: ", dpc_op_name(n->op), value_name(p, n->out));
  put_type(p, v);
  if (n->op != DPC_OP_INPUT) {
    const dpc_attr *init = dpc_attrs_get(dpc_node_attrs(g, node), "init");
    if (init) {
      dpc_buf_printf(p->out, " = %s", dpc_graph_str(g, init->u.s));
      bool any = false;
      for (uint32_t i = 0; i < n->n_attr; i++) {
        const char *nm = dpc_graph_str(g, g->attrs[n->attr + i].name);
        if (strcmp(nm, "dtype") && strcmp(nm, "shape") && strcmp(nm, "init")) any = true;
      }
      if (any) {
        dpc_buf_puts(p->out, "(");
        put_attrs(p, n->attr, n->n_attr, true, "dtype", "shape", "init");
        dpc_buf_puts(p->out, ")");
      }
    }
  }
  put_device(p, n);
  dpc_buf_puts(p->out, "\n");
}

/* Fusion groups as comments, so the graph still parses: the root lists the group's ops. */
static void put_fusion(const printer *p, uint32_t node) {
  const dpc_graph *g = p->g;
  const dpc_node *n = &g->nodes[node];
  if (n->fused != DPC_NONE) {
    dpc_buf_printf(p->out, "  # fused into %s", value_name(p, g->nodes[n->fused].out));
  } else if (p->members[node]) {
    dpc_buf_puts(p->out, "  # one kernel:");
    for (uint32_t i = 0; i < node; i++)
      if (g->nodes[i].fused == node) dpc_buf_printf(p->out, " %s +", dpc_op_name(g->nodes[i].op));
    dpc_buf_printf(p->out, " %s", dpc_op_name(n->op));
  }
}

static void put_node(const printer *p, uint32_t node) {
  const dpc_graph *g = p->g;
  const dpc_node *n = &g->nodes[node];
  if (dpc_op_has(n->op, DPC_OPF_SOURCE) && n->op != DPC_OP_CONSTANT) {
    put_source(p, node);
    return;
  }
  for (uint32_t k = 0; k < n->n_out; k++) {
    if (k) dpc_buf_puts(p->out, ", ");
    dpc_buf_puts(p->out, value_name(p, n->out + k));
  }
  dpc_buf_puts(p->out, " = ");
  /* The top of a statement is printed in its own form even though it is named. */
  put_form(p, node, 0);
  put_device(p, n);
  put_fusion(p, node);
  dpc_buf_puts(p->out, "\n");
}

/* Names for anonymous values that must be printed by name. */
static int make_names(printer *p) {
  const dpc_graph *g = p->g;
  for (uint32_t v = 0; v < g->n_values; v++) {
    const dpc_value *val = &g->values[v];
    if (val->name != DPC_NONE && !dpc_is_identifier(dpc_graph_str(g, val->name))) {
      dpc_buf q = {0};
      put_name(&q, dpc_graph_str(g, val->name));
      if (!(p->gen[v] = dpc_buf_take(&q))) return -1;
      continue;
    }
    if (val->name != DPC_NONE || is_inline(p, v)) continue;
    if (p->uses[v] == 0 && !p->pinned[v]) continue; /* printed as `_` */
    char t[32];
    for (uint32_t k = 0;; k++) {
      if (k == 0)
        snprintf(t, sizeof t, "_%u", v);
      else
        snprintf(t, sizeof t, "_%u_%u", v, k);
      if (dpc_graph_find(g, t) != DPC_NONE) continue;
      bool taken = false;
      for (uint32_t u = 0; u < v && !taken; u++) taken = p->gen[u] && !strcmp(p->gen[u], t);
      if (!taken) break;
    }
    if (!(p->gen[v] = dpc_strdup(t))) return -1;
  }
  return 0;
}

dpc_status dpc_print_graph(const dpc_graph *g, dpc_buf *out) {
  return dpc_print_graph_brief(g, 0, out);
}

dpc_status dpc_print_graph_brief(const dpc_graph *g, uint32_t elide, dpc_buf *out) {
  printer p = {g, out, NULL, NULL, NULL, NULL, NULL, NULL, elide};
  uint32_t *height = NULL;
  size_t nv = g->n_values ? g->n_values : 1;
  p.uses = calloc(nv, sizeof *p.uses);
  p.consumer = calloc(nv, sizeof *p.consumer);
  p.pinned = calloc(nv, sizeof *p.pinned);
  p.gen = calloc(nv, sizeof *p.gen);
  p.cut = calloc(nv, sizeof *p.cut);
  height = calloc(nv, sizeof *height);
  p.members = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p.members);
  dpc_status st = DPC_ERR_NOMEM;
  if (!p.uses || !p.consumer || !p.pinned || !p.gen || !p.cut || !height || !p.members) goto done;
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].fused != DPC_NONE) p.members[g->nodes[i].fused]++;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t v = g->ids[n->in + k];
      p.uses[v]++;
      p.consumer[v] = i;
    }
  }
  for (uint32_t i = 0; i < g->n_outputs; i++) p.pinned[g->outputs[i]] = true;
  for (uint32_t i = 0; i < g->n_updates; i++) {
    p.pinned[g->updates[i].target] = true;
    p.pinned[g->updates[i].value] = true;
  }
  if (g->obj.loss != DPC_NONE) p.pinned[g->obj.loss] = true;
  /* Heights in node order (inputs come first), cutting folds that would grow too tall. */
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    uint32_t h = 0;
    for (uint32_t k = 0; k < n->n_in; k++) {
      uint32_t u = g->ids[n->in + k];
      if (is_inline(&p, u) && height[u] > h) h = height[u];
    }
    for (uint32_t k = 0; k < n->n_out; k++) height[n->out + k] = h + 1;
    if (h + 1 > FOLD_HEIGHT)
      for (uint32_t k = 0; k < n->n_out; k++) p.cut[n->out + k] = true, height[n->out + k] = 0;
  }
  /* a fusion group's root is a statement of its own, with the group folded into it */
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (p.members[i])
      for (uint32_t k = 0; k < g->nodes[i].n_out; k++) p.cut[g->nodes[i].out + k] = true;
  if (make_names(&p)) goto done;

  if (g->name != DPC_NONE) {
    dpc_buf_puts(out, "model ");
    put_name(out, dpc_graph_str(g, g->name));
    dpc_buf_puts(out, "\n\n");
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    if (n->n_out == 1 && is_inline(&p, n->out)) continue;
    put_node(&p, i);
  }
  if (g->n_outputs || g->n_updates || g->obj.loss != DPC_NONE) dpc_buf_puts(out, "\n");
  if (g->n_outputs) {
    dpc_buf_puts(out, "output ");
    for (uint32_t i = 0; i < g->n_outputs; i++)
      dpc_buf_printf(out, "%s%s", i ? ", " : "", value_name(&p, g->outputs[i]));
    dpc_buf_puts(out, "\n");
  }
  for (uint32_t i = 0; i < g->n_updates; i++)
    dpc_buf_printf(out, "update %s = %s\n", value_name(&p, g->updates[i].target),
                   value_name(&p, g->updates[i].value));
  if (g->obj.loss != DPC_NONE) {
    dpc_buf_printf(out, "minimize %s with %s", value_name(&p, g->obj.loss),
                   dpc_graph_str(g, g->obj.optimizer));
    dpc_buf_puts(out, "(");
    put_attrs(&p, g->obj.attr, g->obj.n_attr, true, NULL, NULL, NULL);
    dpc_buf_puts(out, ")\n");
  }
  st = out->oom ? DPC_ERR_NOMEM : DPC_OK;
done:
  if (p.gen)
    for (uint32_t v = 0; v < g->n_values; v++) free(p.gen[v]);
  free(p.uses);
  free(p.consumer);
  free(p.pinned);
  free(p.gen);
  free(p.cut);
  free(p.members);
  free(height);
  return st;
}
