/*
 * attr.c — reading attributes, with the defaults their spec declares.
 *
 * Readers assert that the name is in the spec: asking for an attribute an op does not have is
 * a bug in dpc, not in the user's model (the builder already rejected unknown names).
 */
#include "ir/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpc_attrs dpc_node_attrs(const dpc_graph *g, uint32_t node) {
  const dpc_node *n = &g->nodes[node];
  dpc_attrs a = {g, n->attr, n->n_attr, dpc_op_get(n->op)->attrs};
  return a;
}

const dpc_attr *dpc_attrs_get(dpc_attrs a, const char *name) {
  for (uint32_t i = 0; i < a.n; i++) {
    const dpc_attr *at = &a.g->attrs[a.off + i];
    if (strcmp(dpc_graph_str(a.g, at->name), name) == 0) return at;
  }
  return NULL;
}

static dpc_attr_spec spec_of(dpc_attrs a, const char *name) {
  dpc_attr_spec sp;
  bool ok = dpc_spec_find(a.spec, name, &sp);
  DPC_ASSERT(ok);
  return sp;
}

bool dpc_attrs_has(dpc_attrs a, const char *name) {
  if (dpc_attrs_get(a, name)) return true;
  return spec_of(a, name).need == DPC_ATTR_DEFAULT;
}

int64_t dpc_attrs_int(dpc_attrs a, const char *name) {
  const dpc_attr *at = dpc_attrs_get(a, name);
  if (at) {
    if (at->kind == DPC_ATTR_INT) return at->u.i;
    if (at->kind == DPC_ATTR_FLOAT) return (int64_t)at->u.f;
    DPC_ASSERT(!"attribute is not an integer");
  }
  dpc_attr_spec sp = spec_of(a, name);
  return sp.need == DPC_ATTR_DEFAULT ? strtoll(sp.def, NULL, 10) : 0;
}

double dpc_attrs_float(dpc_attrs a, const char *name) {
  const dpc_attr *at = dpc_attrs_get(a, name);
  if (at) {
    if (at->kind == DPC_ATTR_FLOAT) return at->u.f;
    if (at->kind == DPC_ATTR_INT) return (double)at->u.i;
    DPC_ASSERT(!"attribute is not a number");
  }
  dpc_attr_spec sp = spec_of(a, name);
  return sp.need == DPC_ATTR_DEFAULT ? strtod(sp.def, NULL) : 0.0;
}

void dpc_attrs_str(dpc_attrs a, const char *name, char *buf, size_t n) {
  const dpc_attr *at = dpc_attrs_get(a, name);
  if (at) {
    DPC_ASSERT(at->kind == DPC_ATTR_STR);
    snprintf(buf, n, "%s", dpc_graph_str(a.g, at->u.s));
    return;
  }
  dpc_attr_spec sp = spec_of(a, name);
  snprintf(buf, n, "%s", sp.need == DPC_ATTR_DEFAULT ? sp.def : "");
}

dpc_dtype dpc_attrs_dtype(dpc_attrs a, const char *name) {
  const dpc_attr *at = dpc_attrs_get(a, name);
  if (at) {
    DPC_ASSERT(at->kind == DPC_ATTR_DTYPE);
    return (dpc_dtype)at->dtype;
  }
  dpc_attr_spec sp = spec_of(a, name);
  dpc_dtype t = DPC_F32;
  if (sp.need == DPC_ATTR_DEFAULT) dpc_dtype_parse(sp.def, strlen(sp.def), &t);
  return t;
}

uint32_t dpc_attrs_ints(dpc_attrs a, const char *name, int64_t *out, uint32_t max,
                        uint32_t expand) {
  const dpc_attr *at = dpc_attrs_get(a, name);
  int64_t single;
  if (at && (at->kind == DPC_ATTR_INTS || at->kind == DPC_ATTR_SHAPE)) {
    uint32_t n = at->n < max ? at->n : max;
    memcpy(out, a.g->ints + at->u.off, n * sizeof *out);
    return at->n;
  }
  if (at) {
    DPC_ASSERT(at->kind == DPC_ATTR_INT);
    single = at->u.i;
  } else {
    dpc_attr_spec sp = spec_of(a, name);
    if (sp.need != DPC_ATTR_DEFAULT) return 0;
    single = strtoll(sp.def, NULL, 10);
  }
  uint32_t n = expand ? expand : 1;
  for (uint32_t i = 0; i < n && i < max; i++) out[i] = single;
  return n;
}

uint32_t dpc_attrs_floats(dpc_attrs a, const char *name, double *out, uint32_t max) {
  const dpc_attr *at = dpc_attrs_get(a, name);
  if (!at) return 0;
  if (at->kind == DPC_ATTR_FLOATS) {
    uint32_t n = at->n < max ? at->n : max;
    memcpy(out, a.g->reals + at->u.off, n * sizeof *out);
    return at->n;
  }
  if (max) out[0] = at->kind == DPC_ATTR_INT ? (double)at->u.i : at->u.f;
  return 1;
}
