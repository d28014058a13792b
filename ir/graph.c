/*
 * graph.c — creating, copying and growing graphs; checking a node against the op table before
 * it goes in. Shape rules live in rules.c, attribute reading in attr.c.
 */
#include "ir/graph.h"
#include "ir/rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpc_graph *dpc_graph_new(void) {
  dpc_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->name = DPC_NONE;
  g->obj.loss = DPC_NONE;
  g->obj.optimizer = DPC_NONE;
  dpc_strpool_init(&g->strs);
  dpc_idmap_init(&g->names);
  /* Payload pools start non-empty so `g->ints + off` is always arithmetic on a real array. */
  if (DPC_VEC_RESERVE(g->ints, g->cap_ints, 16) || DPC_VEC_RESERVE(g->reals, g->cap_reals, 16) ||
      DPC_VEC_RESERVE(g->ids, g->cap_ids, 16)) {
    dpc_graph_free(g);
    return NULL;
  }
  return g;
}

void dpc_graph_free(dpc_graph *g) {
  if (!g) return;
  dpc_strpool_free(&g->strs);
  dpc_idmap_free(&g->names);
  free(g->nodes);
  free(g->values);
  free(g->ids);
  free(g->attrs);
  free(g->ints);
  free(g->reals);
  free(g->syms);
  free(g->sym_vals);
  free(g->outputs);
  free(g->updates);
  free(g->src_name);
  free(g->src_text);
  free(g);
}

/* Copy n elements of an array into a fresh allocation of the same capacity. */
static int dup_array(void *dstp, const void *src, uint32_t n, uint32_t cap, size_t elem) {
  void *p = NULL;
  if (cap) {
    p = malloc((size_t)cap * elem);
    if (!p) return -1;
    if (n) memcpy(p, src, (size_t)n * elem);
  }
  memcpy(dstp, &p, sizeof p);
  return 0;
}

dpc_graph *dpc_graph_clone(const dpc_graph *s) {
  dpc_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  *g = *s;
  /* Null every owned pointer first so a failure midway frees only what was copied. */
  g->nodes = NULL, g->values = NULL, g->ids = NULL, g->attrs = NULL, g->ints = NULL;
  g->reals = NULL, g->syms = NULL, g->sym_vals = NULL, g->outputs = NULL, g->updates = NULL;
  g->src_name = NULL, g->src_text = NULL;
  dpc_strpool_init(&g->strs);
  dpc_idmap_init(&g->names);
  int bad = 0;
  bad |= dpc_strpool_copy(&g->strs, &s->strs);
  bad |= dpc_idmap_copy(&g->names, &s->names);
  bad |= dup_array(&g->nodes, s->nodes, s->n_nodes, s->cap_nodes, sizeof *s->nodes);
  bad |= dup_array(&g->values, s->values, s->n_values, s->cap_values, sizeof *s->values);
  bad |= dup_array(&g->ids, s->ids, s->n_ids, s->cap_ids, sizeof *s->ids);
  bad |= dup_array(&g->attrs, s->attrs, s->n_attrs, s->cap_attrs, sizeof *s->attrs);
  bad |= dup_array(&g->ints, s->ints, s->n_ints, s->cap_ints, sizeof *s->ints);
  bad |= dup_array(&g->reals, s->reals, s->n_reals, s->cap_reals, sizeof *s->reals);
  bad |= dup_array(&g->syms, s->syms, s->n_syms, s->cap_syms, sizeof *s->syms);
  bad |= dup_array(&g->sym_vals, s->sym_vals, s->n_syms, s->cap_sym_vals, sizeof *s->sym_vals);
  bad |= dup_array(&g->outputs, s->outputs, s->n_outputs, s->cap_outputs, sizeof *s->outputs);
  bad |= dup_array(&g->updates, s->updates, s->n_updates, s->cap_updates, sizeof *s->updates);
  if (s->src_name && !(g->src_name = dpc_strdup(s->src_name))) bad = 1;
  if (s->src_text) {
    g->src_text = malloc(s->src_len + 1);
    if (g->src_text)
      memcpy(g->src_text, s->src_text, s->src_len + 1);
    else
      bad = 1;
  }
  if (bad) {
    dpc_graph_free(g);
    return NULL;
  }
  return g;
}

dpc_status dpc_graph_set_source(dpc_graph *g, const char *name, const char *text, size_t len,
                                dpc_diag *d) {
  free(g->src_name);
  free(g->src_text);
  g->src_name = name ? dpc_strdup(name) : NULL;
  g->src_text = malloc(len + 1);
  g->src_len = len;
  if ((name && !g->src_name) || !g->src_text)
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory keeping the source of '%s'",
                         name ? name : "graph");
  memcpy(g->src_text, text, len);
  g->src_text[len] = 0;
  return DPC_OK;
}

dpc_source dpc_graph_source(const dpc_graph *g) {
  dpc_source s = {g->src_name, g->src_text, g->src_len};
  return s;
}

uint32_t dpc_graph_intern(dpc_graph *g, const char *s, size_t n) {
  return dpc_strpool_intern(&g->strs, s, n);
}

/* ---- attributes ---------------------------------------------------------------------------- */

static dpc_attr *push_attr(dpc_graph *g, const char *name, dpc_attr_kind kind) {
  if (DPC_VEC_RESERVE(g->attrs, g->cap_attrs, g->n_attrs + 1)) return NULL;
  uint32_t id = dpc_graph_intern(g, name, strlen(name));
  if (id == DPC_NONE) return NULL;
  dpc_attr *a = &g->attrs[g->n_attrs++];
  memset(a, 0, sizeof *a);
  a->name = id;
  a->kind = (uint8_t)kind;
  return a;
}

static dpc_status nomem(void) {
  return DPC_ERR_NOMEM;
}

static int push_ints(dpc_graph *g, const int64_t *v, uint32_t n, uint32_t *off) {
  if (DPC_VEC_RESERVE(g->ints, g->cap_ints, (size_t)g->n_ints + n)) return -1;
  *off = g->n_ints;
  if (n) memcpy(g->ints + g->n_ints, v, n * sizeof *v);
  g->n_ints += n;
  return 0;
}

static int push_reals(dpc_graph *g, const double *v, uint32_t n, uint32_t *off) {
  if (DPC_VEC_RESERVE(g->reals, g->cap_reals, (size_t)g->n_reals + n)) return -1;
  *off = g->n_reals;
  if (n) memcpy(g->reals + g->n_reals, v, n * sizeof *v);
  g->n_reals += n;
  return 0;
}

dpc_status dpc_graph_attr_int(dpc_graph *g, const char *name, int64_t v) {
  dpc_attr *a = push_attr(g, name, DPC_ATTR_INT);
  if (!a) return nomem();
  a->u.i = v;
  return DPC_OK;
}

dpc_status dpc_graph_attr_float(dpc_graph *g, const char *name, double v) {
  dpc_attr *a = push_attr(g, name, DPC_ATTR_FLOAT);
  if (!a) return nomem();
  a->u.f = v;
  return DPC_OK;
}

dpc_status dpc_graph_attr_str(dpc_graph *g, const char *name, const char *v) {
  uint32_t s = dpc_graph_intern(g, v, strlen(v));
  if (s == DPC_NONE) return nomem();
  dpc_attr *a = push_attr(g, name, DPC_ATTR_STR);
  if (!a) return nomem();
  a->u.s = s;
  return DPC_OK;
}

dpc_status dpc_graph_attr_ints(dpc_graph *g, const char *name, const int64_t *v, uint32_t n) {
  uint32_t off;
  if (push_ints(g, v, n, &off)) return nomem();
  dpc_attr *a = push_attr(g, name, DPC_ATTR_INTS);
  if (!a) return nomem();
  a->n = n;
  a->u.off = off;
  return DPC_OK;
}

dpc_status dpc_graph_attr_floats(dpc_graph *g, const char *name, const double *v, uint32_t n) {
  uint32_t off;
  if (push_reals(g, v, n, &off)) return nomem();
  dpc_attr *a = push_attr(g, name, DPC_ATTR_FLOATS);
  if (!a) return nomem();
  a->n = n;
  a->u.off = off;
  return DPC_OK;
}

dpc_status dpc_graph_attr_dtype(dpc_graph *g, const char *name, dpc_dtype t) {
  dpc_attr *a = push_attr(g, name, DPC_ATTR_DTYPE);
  if (!a) return nomem();
  a->dtype = (uint8_t)t;
  return DPC_OK;
}

dpc_status dpc_graph_attr_shape(dpc_graph *g, const char *name, const int64_t *dims, uint32_t n) {
  uint32_t off;
  if (push_ints(g, dims, n, &off)) return nomem();
  dpc_attr *a = push_attr(g, name, DPC_ATTR_SHAPE);
  if (!a) return nomem();
  a->n = n;
  a->u.off = off;
  return DPC_OK;
}

dpc_status dpc_graph_attr_tensor(dpc_graph *g, const char *name, dpc_dtype t,
                                 const dpc_shape *shape, const double *data) {
  int64_t numel = dpc_shape_numel(shape);
  if (numel < 0 || numel > UINT32_MAX / 2) return DPC_ERR_INVALID;
  uint32_t doff, roff;
  if (push_ints(g, shape->d, shape->rank, &doff)) return nomem();
  if (push_reals(g, data, (uint32_t)numel, &roff)) return nomem();
  dpc_attr *a = push_attr(g, name, DPC_ATTR_TENSOR);
  if (!a) return nomem();
  a->dtype = (uint8_t)t;
  a->rank = (uint16_t)shape->rank;
  a->n = (uint32_t)numel;
  a->dims = doff;
  a->u.off = roff;
  return DPC_OK;
}

dpc_status dpc_graph_attr_copy(dpc_graph *g, const dpc_graph *src, const dpc_attr *a) {
  /* Copy out of src first: when src == g the arrays may move while we append. */
  dpc_attr c = *a;
  char name[256];
  snprintf(name, sizeof name, "%s", dpc_graph_str(src, c.name));
  switch ((dpc_attr_kind)c.kind) {
  case DPC_ATTR_INT: return dpc_graph_attr_int(g, name, c.u.i);
  case DPC_ATTR_FLOAT: return dpc_graph_attr_float(g, name, c.u.f);
  case DPC_ATTR_DTYPE: return dpc_graph_attr_dtype(g, name, (dpc_dtype)c.dtype);
  case DPC_ATTR_STR: {
    char *s = dpc_strdup(dpc_graph_str(src, c.u.s));
    if (!s) return nomem();
    dpc_status st = dpc_graph_attr_str(g, name, s);
    free(s);
    return st;
  }
  case DPC_ATTR_INTS:
  case DPC_ATTR_SHAPE: {
    int64_t *v = malloc((c.n ? c.n : 1) * sizeof *v);
    if (!v) return nomem();
    memcpy(v, src->ints + c.u.off, c.n * sizeof *v);
    dpc_status st = c.kind == DPC_ATTR_INTS ? dpc_graph_attr_ints(g, name, v, c.n)
                                            : dpc_graph_attr_shape(g, name, v, c.n);
    free(v);
    return st;
  }
  case DPC_ATTR_FLOATS: {
    double *v = malloc((c.n ? c.n : 1) * sizeof *v);
    if (!v) return nomem();
    memcpy(v, src->reals + c.u.off, c.n * sizeof *v);
    dpc_status st = dpc_graph_attr_floats(g, name, v, c.n);
    free(v);
    return st;
  }
  case DPC_ATTR_TENSOR: {
    dpc_shape sh = {.rank = c.rank};
    memcpy(sh.d, src->ints + c.dims, c.rank * sizeof(int64_t));
    double *v = malloc((c.n ? c.n : 1) * sizeof *v);
    if (!v) return nomem();
    memcpy(v, src->reals + c.u.off, c.n * sizeof *v);
    dpc_status st = dpc_graph_attr_tensor(g, name, (dpc_dtype)c.dtype, &sh, v);
    free(v);
    return st;
  }
  default: return DPC_ERR_INTERNAL;
  }
}

void dpc_graph_attr_reset(dpc_graph *g, uint32_t mark) {
  if (mark < g->n_attrs) g->n_attrs = mark;
}

/* ---- nodes --------------------------------------------------------------------------------- */

/* Does an attribute of kind `have` satisfy a spec of kind `want`? Integers widen to floats and
 * a single integer stands for an integer list. */
static bool kind_fits(dpc_attr_kind want, dpc_attr_kind have) {
  if (want == have) return true;
  if (want == DPC_ATTR_INTS && have == DPC_ATTR_INT) return true;
  return false;
}

static dpc_status check_attrs(dpc_graph *g, const dpc_node_desc *nd, dpc_diag *d) {
  dpc_source src = dpc_graph_source(g);
  const char *opn = dpc_op_name(nd->op);
  for (uint32_t i = nd->attr_mark; i < g->n_attrs; i++) {
    dpc_attr *a = &g->attrs[i];
    const char *an = dpc_graph_str(g, a->name);
    dpc_attr_spec sp;
    if (!dpc_op_attr_find(nd->op, an, &sp)) {
      if (dpc_op_attr_count(nd->op) == 0)
        return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc,
                                "%s takes no attributes, got '%s'", opn, an);
      return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc,
                              "%s has no attribute '%s' (it takes: %s)", opn, an,
                              dpc_op_get(nd->op)->attrs);
    }
    if (!kind_fits(sp.kind, (dpc_attr_kind)a->kind)) {
      /* An integer given where a float is wanted is stored as the float. */
      if (sp.kind == DPC_ATTR_FLOAT && a->kind == DPC_ATTR_INT) {
        double f = (double)a->u.i;
        a->kind = DPC_ATTR_FLOAT;
        a->u.f = f;
      } else {
        return dpc_diag_fail_at(
            d, DPC_ERR_INVALID, &src, nd->loc, "%s attribute '%s' must be %s, got %s", opn, an,
            dpc_attr_kind_name(sp.kind), dpc_attr_kind_name((dpc_attr_kind)a->kind));
      }
    }
    for (uint32_t j = nd->attr_mark; j < i; j++)
      if (g->attrs[j].name == a->name)
        return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc, "%s attribute '%s' given twice",
                                opn, an);
  }
  uint32_t na = dpc_op_attr_count(nd->op);
  for (uint32_t k = 0; k < na; k++) {
    dpc_attr_spec sp;
    dpc_op_attr_at(nd->op, k, &sp);
    if (sp.need != DPC_ATTR_REQUIRED) continue;
    bool found = false;
    for (uint32_t i = nd->attr_mark; i < g->n_attrs && !found; i++)
      found = strcmp(dpc_graph_str(g, g->attrs[i].name), sp.name) == 0;
    if (!found)
      return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc, "%s needs attribute '%s' (%s)",
                              opn, sp.name, dpc_attr_kind_name(sp.kind));
  }
  return DPC_OK;
}

dpc_status dpc_graph_add_node(dpc_graph *g, const dpc_node_desc *nd, uint32_t *node_out,
                              dpc_diag *d) {
  dpc_source src = dpc_graph_source(g);
  const char *opn = dpc_op_name(nd->op);
  uint32_t lo, hi;
  dpc_op_arity(nd->op, &lo, &hi);
  dpc_status st = DPC_OK;
  if (nd->n_in < lo || nd->n_in > hi) {
    if (lo == hi)
      st = dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc, "%s takes %u input%s (%s), got %u",
                            opn, lo, lo == 1 ? "" : "s", dpc_op_get(nd->op)->inputs, nd->n_in);
    else if (hi == UINT32_MAX)
      st = dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc,
                            "%s takes at least %u input%s, got %u", opn, lo, lo == 1 ? "" : "s",
                            nd->n_in);
    else
      st = dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc,
                            "%s takes %u to %u inputs (%s), got %u", opn, lo, hi,
                            dpc_op_get(nd->op)->inputs, nd->n_in);
    goto fail;
  }
  for (uint32_t i = 0; i < nd->n_in; i++) {
    if (nd->in[i] >= g->n_values) {
      st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s: input %u refers to value %u of %u", opn, i,
                         nd->in[i], g->n_values);
      goto fail;
    }
  }
  uint32_t n_out = nd->n_out ? nd->n_out : dpc_op_num_outputs(nd->op);
  uint32_t fixed = dpc_op_num_outputs(nd->op);
  if (n_out == 0 || (fixed && n_out != fixed)) {
    if (fixed)
      st = dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc, "%s has %u output%s (%s), not %u",
                            opn, fixed, fixed == 1 ? "" : "s", dpc_op_get(nd->op)->outputs, n_out);
    else
      st = dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, nd->loc,
                            "%s needs to know how many outputs to make", opn);
    goto fail;
  }
  if ((st = check_attrs(g, nd, d))) goto fail;

  /* nd->in may point into g->ids, which the reservation below can move: copy it first. */
  uint32_t small[16], *ins = nd->n_in <= 16 ? small : malloc(nd->n_in * sizeof *ins);
  if (ins && nd->n_in) memcpy(ins, nd->in, nd->n_in * sizeof *ins);
  if (!ins || DPC_VEC_RESERVE(g->nodes, g->cap_nodes, g->n_nodes + 1) ||
      DPC_VEC_RESERVE(g->values, g->cap_values, (size_t)g->n_values + n_out) ||
      DPC_VEC_RESERVE(g->ids, g->cap_ids, (size_t)g->n_ids + nd->n_in)) {
    if (ins != small) free(ins);
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory adding a %s node", opn);
    goto fail;
  }
  uint32_t id = g->n_nodes;
  dpc_node *n = &g->nodes[id];
  memset(n, 0, sizeof *n);
  n->op = nd->op;
  n->in = g->n_ids;
  n->n_in = nd->n_in;
  if (nd->n_in) memcpy(g->ids + g->n_ids, ins, nd->n_in * sizeof *ins);
  if (ins != small) free(ins);
  n->out = g->n_values;
  n->n_out = n_out;
  n->attr = nd->attr_mark;
  n->n_attr = g->n_attrs - nd->attr_mark;
  n->device = nd->device;
  n->fused = DPC_NONE;
  n->loc = nd->loc;
  for (uint32_t k = 0; k < n_out; k++) {
    dpc_value *v = &g->values[g->n_values + k];
    memset(v, 0, sizeof *v);
    v->node = id;
    v->index = k;
    v->name = DPC_NONE;
    v->dtype = DPC_F32;
  }
  uint32_t old_values = g->n_values, old_ids = g->n_ids;
  g->n_nodes++;
  g->n_values += n_out;
  g->n_ids += nd->n_in;
  st = dpc_graph_infer_node(g, id, d);
  if (st) {
    g->n_nodes--;
    g->n_values = old_values;
    g->n_ids = old_ids;
    goto fail;
  }
  if (node_out) *node_out = id;
  return DPC_OK;
fail:
  dpc_graph_attr_reset(g, nd->attr_mark);
  return st;
}

dpc_status dpc_graph_set_name(dpc_graph *g, uint32_t value, const char *name, size_t n,
                              dpc_diag *d) {
  uint32_t id = dpc_graph_intern(g, name, n);
  if (id == DPC_NONE) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory naming a value");
  uint32_t other = dpc_idmap_get(&g->names, id);
  if (other != DPC_NONE && other != value)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "'%s' is already defined", dpc_graph_str(g, id));
  if (g->values[value].name != DPC_NONE) dpc_idmap_del(&g->names, g->values[value].name);
  if (dpc_idmap_put(&g->names, id, value))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory naming a value");
  g->values[value].name = id;
  return DPC_OK;
}

uint32_t dpc_graph_find(const dpc_graph *g, const char *name) {
  uint32_t id = dpc_strpool_find(&g->strs, name, strlen(name));
  return id == DPC_NONE ? DPC_NONE : dpc_idmap_get(&g->names, id);
}

uint32_t dpc_graph_find_symbol(const dpc_graph *g, const char *name, size_t n) {
  uint32_t id = dpc_strpool_find(&g->strs, name, n);
  if (id == DPC_NONE) return DPC_NONE;
  for (uint32_t k = 0; k < g->n_syms; k++)
    if (g->syms[k] == id) return k;
  return DPC_NONE;
}

uint32_t dpc_graph_symbol(dpc_graph *g, const char *name, size_t n) {
  uint32_t k = dpc_graph_find_symbol(g, name, n);
  if (k != DPC_NONE) return k;
  uint32_t id = dpc_graph_intern(g, name, n);
  if (id == DPC_NONE || DPC_VEC_RESERVE(g->syms, g->cap_syms, g->n_syms + 1) ||
      DPC_VEC_RESERVE(g->sym_vals, g->cap_sym_vals, g->n_syms + 1))
    return DPC_NONE;
  g->syms[g->n_syms] = id;
  g->sym_vals[g->n_syms] = -1;
  return g->n_syms++;
}

dpc_status dpc_graph_add_output(dpc_graph *g, uint32_t value, dpc_diag *d) {
  DPC_ASSERT(value < g->n_values);
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == value) return DPC_OK;
  if (DPC_VEC_RESERVE(g->outputs, g->cap_outputs, g->n_outputs + 1))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory adding an output");
  g->outputs[g->n_outputs++] = value;
  return DPC_OK;
}

dpc_status dpc_graph_add_update(dpc_graph *g, uint32_t target, uint32_t value, dpc_loc loc,
                                dpc_diag *d) {
  dpc_source src = dpc_graph_source(g);
  char tl[96], a[96], b[96];
  dpc_graph_value_label(g, target, tl, sizeof tl);
  const dpc_value *t = &g->values[target], *v = &g->values[value];
  if (!dpc_op_has(g->nodes[t->node].op, DPC_OPF_PERSIST))
    return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, loc,
                            "only a param or state can be updated; '%s' is declared with '%s'", tl,
                            dpc_op_name(g->nodes[t->node].op));
  for (uint32_t i = 0; i < g->n_updates; i++)
    if (g->updates[i].target == target)
      return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, loc, "'%s' is already updated at %u:%u", tl,
                              g->updates[i].loc.line, g->updates[i].loc.col);
  if (t->dtype != v->dtype || !dpc_shape_eq(&t->shape, &v->shape)) {
    dpc_graph_format_type(g, t->dtype, &t->shape, a, sizeof a);
    dpc_graph_format_type(g, v->dtype, &v->shape, b, sizeof b);
    return dpc_diag_fail_at(d, DPC_ERR_SHAPE, &src, loc,
                            "update of '%s' (%s) with a value of type %s", tl, a, b);
  }
  if (DPC_VEC_RESERVE(g->updates, g->cap_updates, g->n_updates + 1))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory adding an update");
  g->updates[g->n_updates++] = (dpc_update){target, value, loc};
  return DPC_OK;
}

dpc_status dpc_graph_set_objective(dpc_graph *g, uint32_t loss, const char *optimizer,
                                   uint32_t attr_mark, dpc_loc loc, dpc_diag *d) {
  dpc_source src = dpc_graph_source(g);
  const dpc_value *v = &g->values[loss];
  char lbl[96];
  dpc_graph_value_label(g, loss, lbl, sizeof lbl);
  if (g->obj.loss != DPC_NONE)
    return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, loc,
                            "the model already has an objective (minimize at %u:%u)",
                            g->obj.loc.line, g->obj.loc.col);
  if (v->shape.rank != 0 || !dpc_dtype_is_float(v->dtype)) {
    char ty[96];
    dpc_graph_format_type(g, v->dtype, &v->shape, ty, sizeof ty);
    return dpc_diag_fail_at(d, DPC_ERR_SHAPE, &src, loc,
                            "the loss '%s' must be a floating-point scalar, but it is %s", lbl, ty);
  }
  uint32_t oi = DPC_NONE;
  for (uint32_t i = 0; i < dpc_optimizer_count; i++)
    if (strcmp(dpc_optimizer_specs[i].name, optimizer) == 0) oi = i;
  if (oi == DPC_NONE)
    return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, loc,
                            "unknown optimizer '%s' (known: sgd, adam, adamw)", optimizer);
  const char *spec = dpc_optimizer_specs[oi].attrs;
  for (uint32_t i = attr_mark; i < g->n_attrs; i++) {
    dpc_attr *a = &g->attrs[i];
    dpc_attr_spec sp;
    const char *an = dpc_graph_str(g, a->name);
    if (!dpc_spec_find(spec, an, &sp))
      return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, loc,
                              "%s has no setting '%s' (it takes: %s)", optimizer, an, spec);
    if (sp.kind == DPC_ATTR_FLOAT && a->kind == DPC_ATTR_INT) {
      double f = (double)a->u.i;
      a->kind = DPC_ATTR_FLOAT;
      a->u.f = f;
    }
    if (sp.kind != a->kind)
      return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, loc, "%s setting '%s' must be %s",
                              optimizer, an, dpc_attr_kind_name(sp.kind));
    for (uint32_t j = attr_mark; j < i; j++)
      if (g->attrs[j].name == a->name)
        return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, loc, "%s setting '%s' given twice",
                                optimizer, an);
  }
  uint32_t id = dpc_graph_intern(g, optimizer, strlen(optimizer));
  if (id == DPC_NONE) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  g->obj = (dpc_objective){loss, id, attr_mark, g->n_attrs - attr_mark, loc};
  return DPC_OK;
}

/* ---- compaction ----------------------------------------------------------------------------- */

dpc_status dpc_graph_keep(dpc_graph *g, const bool *keep, dpc_diag *d) {
  uint32_t *vmap = malloc((g->n_values ? g->n_values : 1) * sizeof *vmap);
  uint32_t *nmap = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *nmap);
  dpc_status st = DPC_OK;
  if (!vmap || !nmap) {
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory compacting the graph");
    goto done;
  }
  uint32_t nn = 0, nv = 0, ni = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    dpc_node n = g->nodes[i];
    nmap[i] = keep[i] ? nn : DPC_NONE;
    if (!keep[i]) {
      for (uint32_t k = 0; k < n.n_out; k++) vmap[n.out + k] = DPC_NONE;
      continue;
    }
    /* Inputs are remapped in place: ids only move towards the front. */
    for (uint32_t k = 0; k < n.n_in; k++) {
      uint32_t v = vmap[g->ids[n.in + k]];
      if (v == DPC_NONE) {
        st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "compaction dropped an input of a kept node");
        goto done;
      }
      g->ids[ni + k] = v;
    }
    n.in = ni;
    ni += n.n_in;
    for (uint32_t k = 0; k < n.n_out; k++) {
      vmap[n.out + k] = nv + k;
      g->values[nv + k] = g->values[n.out + k];
      g->values[nv + k].node = nn;
    }
    n.out = nv;
    nv += n.n_out;
    g->nodes[nn++] = n;
  }
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if ((g->outputs[i] = vmap[g->outputs[i]]) == DPC_NONE) st = DPC_ERR_INTERNAL;
  for (uint32_t i = 0; i < g->n_updates; i++) {
    g->updates[i].target = vmap[g->updates[i].target];
    g->updates[i].value = vmap[g->updates[i].value];
    if (g->updates[i].target == DPC_NONE || g->updates[i].value == DPC_NONE) st = DPC_ERR_INTERNAL;
  }
  if (g->obj.loss != DPC_NONE && (g->obj.loss = vmap[g->obj.loss]) == DPC_NONE)
    st = DPC_ERR_INTERNAL;
  if (st) {
    dpc_diag_fail(d, st, "compaction dropped a value that is still needed");
    goto done;
  }
  g->n_nodes = nn;
  g->n_values = nv;
  g->n_ids = ni;
  /* a group whose root was dropped is no group: its members run alone */
  for (uint32_t i = 0; i < nn; i++)
    if (g->nodes[i].fused != DPC_NONE) g->nodes[i].fused = nmap[g->nodes[i].fused];
  /* Rebuild the name map: names of dropped values are free again. */
  dpc_idmap_free(&g->names);
  dpc_idmap_init(&g->names);
  for (uint32_t v = 0; v < nv; v++) {
    if (g->values[v].name != DPC_NONE && dpc_idmap_put(&g->names, g->values[v].name, v)) {
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory compacting the graph");
      break;
    }
  }
done:
  free(vmap);
  free(nmap);
  return st;
}

dpc_status dpc_graph_infer_node(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape_rule rule = dpc_shape_rules[g->nodes[node].op];
  DPC_ASSERT(rule != NULL);
  return rule(g, node, d);
}

dpc_status dpc_graph_bind(dpc_graph *g, const int64_t *vals, dpc_diag *d) {
  for (uint32_t k = 0; k < g->n_syms; k++) g->sym_vals[k] = vals[k];
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    dpc_status st = dpc_graph_infer_node(g, i, d);
    if (st) return st;
  }
  return DPC_OK;
}

/* ---- labels -----------------------------------------------------------------------------------
 */

void dpc_graph_value_label(const dpc_graph *g, uint32_t value, char *buf, size_t n) {
  if (g->values[value].name != DPC_NONE)
    snprintf(buf, n, "%s", dpc_graph_str(g, g->values[value].name));
  else
    snprintf(buf, n, "%%%u", value);
}

void dpc_graph_node_label(const dpc_graph *g, uint32_t node, char *buf, size_t n) {
  const dpc_node *nd = &g->nodes[node];
  for (uint32_t k = 0; k < nd->n_out; k++) {
    const dpc_value *v = &g->values[nd->out + k];
    if (v->name != DPC_NONE) {
      snprintf(buf, n, "'%s' (%s)", dpc_graph_str(g, v->name), dpc_op_name(nd->op));
      return;
    }
  }
  if (nd->loc.line)
    snprintf(buf, n, "%s at %u:%u", dpc_op_name(nd->op), nd->loc.line, nd->loc.col);
  else
    snprintf(buf, n, "%s node %u", dpc_op_name(nd->op), node);
}

void dpc_graph_format_dim(const dpc_graph *g, int64_t d, char *buf, size_t n) {
  if (DPC_DIM_IS_SYM(d) && DPC_DIM_SYM_NO(d) < g->n_syms)
    snprintf(buf, n, "%s", dpc_graph_str(g, g->syms[DPC_DIM_SYM_NO(d)]));
  else
    snprintf(buf, n, "%lld", (long long)d);
}

void dpc_graph_format_type(const dpc_graph *g, dpc_dtype t, const dpc_shape *s, char *buf,
                           size_t n) {
  dpc_buf b = {0};
  dpc_buf_printf(&b, "%s[", dpc_dtype_name(t));
  for (uint32_t i = 0; i < s->rank; i++) {
    char dim[80];
    dpc_graph_format_dim(g, s->d[i], dim, sizeof dim);
    dpc_buf_printf(&b, "%s%s", i ? ", " : "", dim);
  }
  dpc_buf_puts(&b, "]");
  snprintf(buf, n, "%s", b.data ? b.data : "?");
  dpc_buf_free(&b);
}

dpc_status dpc_graph_fail_node(const dpc_graph *g, uint32_t node, dpc_diag *d, dpc_status st,
                               const char *fmt, ...) {
  if (!d) return st;
  /* The position already says where; an anonymous node is named by its op alone. */
  char lbl[128];
  const dpc_node *nd = &g->nodes[node];
  /* the verifier reports nodes whose outputs lie out of range (a damaged compiled plan): those
   * are named by op and number, their outputs never read */
  bool outs_ok = (uint64_t)nd->out + nd->n_out <= g->n_values, named = false;
  for (uint32_t k = 0; outs_ok && k < nd->n_out; k++)
    named |= g->values[nd->out + k].name != DPC_NONE;
  if (!outs_ok)
    snprintf(lbl, sizeof lbl, "%s node %u", dpc_op_name(nd->op), node);
  else if (named || !nd->loc.line)
    dpc_graph_node_label(g, node, lbl, sizeof lbl);
  else
    snprintf(lbl, sizeof lbl, "%s", dpc_op_name(nd->op));
  va_list ap;
  va_start(ap, fmt);
  dpc_buf b = {0};
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dpc_buf_printf(&b, "%s: %s", lbl, msg);
  dpc_source src = dpc_graph_source(g);
  dpc_diag_fail_at(d, st, &src, g->nodes[node].loc, "%s", b.data ? b.data : msg);
  dpc_buf_free(&b);
  return st;
}
