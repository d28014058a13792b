/*
 * init.c — initializers for params and state.
 *
 * Formulas follow PyTorch's nn.init so that a model moved from PyTorch starts the same way in
 * distribution (the numbers differ: the generator is dpc's own, see rng.h).
 */
#include "runtime/init.h"
#include "runtime/rng.h"

#include <stdio.h>
#include <string.h>

uint64_t dpc_init_default_seed(const char *name) {
  uint64_t h = 1469598103934665603ull;
  for (; *name; name++) h = (h ^ (unsigned char)*name) * 1099511628211ull;
  return h;
}

void dpc_init_fans(const dpc_shape *s, double *fan_in, double *fan_out) {
  if (s->rank == 0) {
    *fan_in = *fan_out = 1;
  } else if (s->rank == 1) {
    *fan_in = *fan_out = (double)s->d[0];
  } else if (s->rank == 2) {
    *fan_in = (double)s->d[0];
    *fan_out = (double)s->d[1];
  } else {
    double rf = 1;
    for (uint32_t i = 2; i < s->rank; i++) rf *= (double)s->d[i];
    *fan_in = (double)s->d[1] * rf;
    *fan_out = (double)s->d[0] * rf;
  }
}

/* Look an initializer argument up with the initializer's own defaults. */
static const char *init_spec(const char *init) {
  for (uint32_t i = 0; i < dpc_init_count; i++)
    if (!strcmp(dpc_init_specs[i].name, init)) return dpc_init_specs[i].attrs;
  return NULL;
}

dpc_status dpc_init_fill(const dpc_graph *g, uint32_t node, dpc_tensor *t, dpc_diag *d) {
  dpc_attrs na = dpc_node_attrs(g, node);
  char init[64];
  dpc_attrs_str(na, "init", init, sizeof init);
  const char *spec = init_spec(init);
  if (!spec)
    return dpc_graph_fail_node(g, node, d, DPC_ERR_INVALID, "unknown initializer '%s'", init);
  /* Read arguments against the initializer's spec, so its defaults apply. */
  dpc_attrs a = {g, na.off, na.n, spec};
  int64_t n = dpc_tensor_numel(t);
  if (!strcmp(init, "data")) {
    const dpc_attr *v = dpc_attrs_get(na, "data");
    if (!v || v->kind != DPC_ATTR_TENSOR || (int64_t)v->n != n)
      return dpc_graph_fail_node(g, node, d, DPC_ERR_INVALID,
                                 "init=data needs data= with one value per element (%lld)",
                                 (long long)n);
    for (int64_t i = 0; i < n; i++) dpc_tstore(t, i, g->reals[v->u.off + i]);
    return DPC_OK;
  }
  double fan_in, fan_out;
  dpc_init_fans(&t->shape, &fan_in, &fan_out);
  uint64_t seed;
  if (dpc_attrs_get(na, "seed")) {
    seed = (uint64_t)dpc_attrs_get(na, "seed")->u.i;
  } else {
    char name[96];
    dpc_graph_value_label(g, g->nodes[node].out, name, sizeof name);
    seed = dpc_init_default_seed(name);
  }
  bool normal = false;
  double lo = 0, hi = 0, mean = 0, std = 0, c = 0;
  bool constant = false;
  if (!strcmp(init, "zeros")) {
    constant = true, c = 0;
  } else if (!strcmp(init, "ones")) {
    constant = true, c = 1;
  } else if (!strcmp(init, "constant")) {
    constant = true, c = dpc_attrs_float(a, "value");
  } else if (!strcmp(init, "uniform")) {
    lo = dpc_attrs_float(a, "low"), hi = dpc_attrs_float(a, "high");
  } else if (!strcmp(init, "normal")) {
    normal = true, mean = dpc_attrs_float(a, "mean"), std = dpc_attrs_float(a, "std");
  } else if (strstr(init, "xavier") || strstr(init, "glorot")) {
    double gain = dpc_attrs_float(a, "gain");
    if (strstr(init, "uniform")) {
      hi = gain * sqrt(6.0 / (fan_in + fan_out));
      lo = -hi;
    } else {
      normal = true, std = gain * sqrt(2.0 / (fan_in + fan_out));
    }
  } else { /* he / kaiming */
    double gain = dpc_attrs_float(a, "gain");
    char mode[16];
    dpc_attrs_str(a, "mode", mode, sizeof mode);
    if (strcmp(mode, "fan_in") && strcmp(mode, "fan_out"))
      return dpc_graph_fail_node(g, node, d, DPC_ERR_INVALID,
                                 "mode must be fan_in or fan_out, got '%s'", mode);
    double fan = !strcmp(mode, "fan_in") ? fan_in : fan_out;
    if (strstr(init, "uniform")) {
      hi = gain * sqrt(3.0 / fan);
      lo = -hi;
    } else {
      normal = true, std = gain / sqrt(fan);
    }
  }
  if (!constant && !(std >= 0 && hi >= lo))
    return dpc_graph_fail_node(g, node, d, DPC_ERR_INVALID, "%s: std must be >= 0 and low <= high",
                               init);
  for (int64_t i = 0; i < n; i++) {
    double v = constant ? c
               : normal ? mean + std * dpc_rng_normal(seed, (uint64_t)i)
                        : lo + (hi - lo) * dpc_rng_uniform(seed, (uint64_t)i);
    dpc_tstore(t, i, v);
  }
  return DPC_OK;
}
