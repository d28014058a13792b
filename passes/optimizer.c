/*
 * optimizer.c — the parameter update, appended as graph nodes.
 *
 * For every param with a gradient (P.grad, from autodiff) this appends the update the objective
 * asks for — SGD (momentum, Nesterov, weight decay), Adam or AdamW — and `update` statements
 * that store the new values after the step. Optimizer state is ordinary named `state`: P.momentum,
 * P.adam_m, P.adam_v, and opt.step (steps taken). The learning rate of the step is computed in the
 * graph from opt.step and the schedule (constant, step, cosine, linear; optional linear warm-up)
 * and named opt.lr, so a compiled model trains with its schedule and no host-side logic.
 * Formulas follow PyTorch's torch.optim (SGD's first momentum buffer is the gradient itself).
 */
#include "passes/emit.h"
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct opt_cfg {
  char name[16], schedule[16];
  double lr, momentum, weight_decay, beta1, beta2, eps, gamma, min_lr;
  int64_t nesterov, warmup, step_size, total_steps;
} opt_cfg;

static const char *spec_of(const char *opt) {
  for (uint32_t i = 0; i < dpc_optimizer_count; i++)
    if (!strcmp(dpc_optimizer_specs[i].name, opt)) return dpc_optimizer_specs[i].attrs;
  return NULL;
}

static dpc_status read_cfg(const dpc_graph *g, opt_cfg *c, dpc_diag *d) {
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", dpc_graph_str(g, g->obj.optimizer));
  const char *spec = spec_of(c->name);
  if (!spec) return dpc_diag_fail(d, DPC_ERR_INVALID, "unknown optimizer '%s'", c->name);
  dpc_attrs a = {g, g->obj.attr, g->obj.n_attr, spec};
  c->lr = dpc_attrs_float(a, "lr");
  c->weight_decay = dpc_attrs_float(a, "weight_decay");
  c->gamma = dpc_attrs_float(a, "gamma");
  c->min_lr = dpc_attrs_float(a, "min_lr");
  c->warmup = dpc_attrs_int(a, "warmup");
  c->step_size = dpc_attrs_int(a, "step_size");
  c->total_steps = dpc_attrs_int(a, "total_steps");
  dpc_attrs_str(a, "schedule", c->schedule, sizeof c->schedule);
  if (!strcmp(c->name, "sgd")) {
    c->momentum = dpc_attrs_float(a, "momentum");
    c->nesterov = dpc_attrs_int(a, "nesterov");
  } else {
    c->beta1 = dpc_attrs_float(a, "beta1");
    c->beta2 = dpc_attrs_float(a, "beta2");
    c->eps = dpc_attrs_float(a, "eps");
  }
  dpc_source src = dpc_graph_source(g);
  const char *why = NULL;
  if (!(c->lr > 0))
    why = "lr must be above 0";
  else if (c->momentum < 0 || c->momentum >= 1)
    why = "momentum must be in [0, 1)";
  else if (c->nesterov && c->momentum == 0)
    why = "nesterov needs a momentum";
  else if (c->weight_decay < 0)
    why = "weight_decay must be >= 0";
  else if (strcmp(c->name, "sgd") &&
           (c->beta1 < 0 || c->beta1 >= 1 || c->beta2 < 0 || c->beta2 >= 1))
    why = "beta1 and beta2 must be in [0, 1)";
  else if (c->warmup < 0)
    why = "warmup must be >= 0";
  else if (strcmp(c->schedule, "constant") && strcmp(c->schedule, "step") &&
           strcmp(c->schedule, "cosine") && strcmp(c->schedule, "linear"))
    why = "schedule must be constant, step, cosine or linear";
  else if (!strcmp(c->schedule, "step") && c->step_size < 1)
    why = "schedule=step needs step_size >= 1";
  else if ((!strcmp(c->schedule, "cosine") || !strcmp(c->schedule, "linear")) &&
           c->total_steps <= c->warmup)
    why = "this schedule needs total_steps above warmup (a training run sets total_steps from its "
          "epochs)";
  if (why) return dpc_diag_fail_at(d, DPC_ERR_INVALID, &src, g->obj.loc, "%s: %s", c->name, why);
  return DPC_OK;
}

static uint32_t num(dpc_emit *e, double v) {
  return dpc_emit_scalar(e, v, DPC_F32);
}

/* A state value initialised to zeros, named. */
static uint32_t new_state(dpc_emit *e, const char *name, dpc_dtype t, const dpc_shape *s) {
  dpc_emit_begin(e);
  dpc_emit_dtype(e, "dtype", t);
  dpc_emit_shape(e, "shape", s->d, s->rank);
  dpc_emit_str(e, "init", "zeros");
  uint32_t n = dpc_emit_node(e, DPC_OP_STATE, NULL, 0, 1);
  if (n == DPC_NONE) return DPC_NONE;
  uint32_t v = e->g->nodes[n].out;
  dpc_emit_name(e, v, name);
  return v;
}

/* The learning rate at step s (a float scalar), after warm-up and the schedule. */
static uint32_t schedule(dpc_emit *e, const opt_cfg *c, uint32_t s) {
  uint32_t lr = num(e, c->lr);
  uint32_t t = c->warmup ? dpc_emit2(e, DPC_OP_SUB, s, num(e, (double)c->warmup)) : s;
  uint32_t main = lr;
  if (!strcmp(c->schedule, "step")) {
    uint32_t k =
        dpc_emit1(e, DPC_OP_FLOOR, dpc_emit2(e, DPC_OP_DIV, t, num(e, (double)c->step_size)));
    main = dpc_emit2(e, DPC_OP_MUL, lr, dpc_emit2(e, DPC_OP_POW, num(e, c->gamma), k));
  } else if (!strcmp(c->schedule, "cosine") || !strcmp(c->schedule, "linear")) {
    double span = (double)(c->total_steps - c->warmup);
    uint32_t frac =
        dpc_emit2(e, DPC_OP_DIV, dpc_emit2(e, DPC_OP_MIN, t, num(e, span)), num(e, span));
    uint32_t w =
        !strcmp(c->schedule, "linear")
            ? dpc_emit2(e, DPC_OP_SUB, num(e, 1), frac)
            : dpc_emit2(
                  e, DPC_OP_MUL, num(e, 0.5),
                  dpc_emit2(e, DPC_OP_ADD, num(e, 1),
                            dpc_emit1(e, DPC_OP_COS,
                                      dpc_emit2(e, DPC_OP_MUL, frac, num(e, 3.141592653589793)))));
    main = dpc_emit2(e, DPC_OP_ADD, num(e, c->min_lr),
                     dpc_emit2(e, DPC_OP_MUL, num(e, c->lr - c->min_lr), w));
  }
  if (!c->warmup) return main;
  uint32_t ramp = dpc_emit2(
      e, DPC_OP_MUL, lr,
      dpc_emit2(e, DPC_OP_DIV, dpc_emit2(e, DPC_OP_ADD, s, num(e, 1)), num(e, (double)c->warmup)));
  return dpc_emit3(e, DPC_OP_WHERE, dpc_emit2(e, DPC_OP_LESS, s, num(e, (double)c->warmup)), ramp,
                   main);
}

static uint32_t as_dtype(dpc_emit *e, uint32_t v, dpc_dtype t) {
  if (v == DPC_NONE || e->g->values[v].dtype == t) return v;
  dpc_emit_begin(e);
  dpc_emit_dtype(e, "dtype", t);
  uint32_t n = dpc_emit_node(e, DPC_OP_CAST, &v, 1, 0);
  return n == DPC_NONE ? DPC_NONE : e->g->nodes[n].out;
}

/* p_new for one param; appends the state updates it needs. */
static uint32_t update_param(dpc_emit *e, const opt_cfg *c, uint32_t p, uint32_t grad,
                             uint32_t lr_f32, uint32_t t_f32) {
  dpc_graph *g = e->g;
  dpc_dtype ty = g->values[p].dtype;
  dpc_shape shape = g->values[p].shape;
  char pn[256], name[300]; /* a copy: naming new state grows the string pool */
  snprintf(pn, sizeof pn, "%s", dpc_graph_str(g, g->values[p].name));
  uint32_t lr = as_dtype(e, lr_f32, ty);
#define K(v) dpc_emit_scalar(e, (v), ty)
  bool adamw = !strcmp(c->name, "adamw");
  uint32_t gr = grad;
  if (c->weight_decay > 0 && !adamw)
    gr = dpc_emit2(e, DPC_OP_ADD, gr, dpc_emit2(e, DPC_OP_MUL, K(c->weight_decay), p));
  if (!strcmp(c->name, "sgd")) {
    uint32_t step = gr;
    if (c->momentum > 0) {
      snprintf(name, sizeof name, "%s.momentum", pn);
      uint32_t v = new_state(e, name, ty, &shape);
      uint32_t vn = dpc_emit2(e, DPC_OP_ADD, dpc_emit2(e, DPC_OP_MUL, K(c->momentum), v), gr);
      if (!e->st) e->st = dpc_graph_add_update(g, v, vn, (dpc_loc){0, 0}, e->d);
      step = c->nesterov
                 ? dpc_emit2(e, DPC_OP_ADD, gr, dpc_emit2(e, DPC_OP_MUL, K(c->momentum), vn))
                 : vn;
    }
    return dpc_emit2(e, DPC_OP_SUB, p, dpc_emit2(e, DPC_OP_MUL, lr, step));
  }
  /* adam, adamw */
  uint32_t base = p;
  if (adamw && c->weight_decay > 0)
    base =
        dpc_emit2(e, DPC_OP_MUL, p,
                  dpc_emit2(e, DPC_OP_SUB, K(1), dpc_emit2(e, DPC_OP_MUL, lr, K(c->weight_decay))));
  snprintf(name, sizeof name, "%s.adam_m", pn);
  uint32_t m = new_state(e, name, ty, &shape);
  snprintf(name, sizeof name, "%s.adam_v", pn);
  uint32_t v = new_state(e, name, ty, &shape);
  uint32_t mn = dpc_emit2(e, DPC_OP_ADD, dpc_emit2(e, DPC_OP_MUL, K(c->beta1), m),
                          dpc_emit2(e, DPC_OP_MUL, K(1 - c->beta1), gr));
  uint32_t vn =
      dpc_emit2(e, DPC_OP_ADD, dpc_emit2(e, DPC_OP_MUL, K(c->beta2), v),
                dpc_emit2(e, DPC_OP_MUL, K(1 - c->beta2), dpc_emit2(e, DPC_OP_MUL, gr, gr)));
  if (!e->st) e->st = dpc_graph_add_update(g, m, mn, (dpc_loc){0, 0}, e->d);
  if (!e->st) e->st = dpc_graph_add_update(g, v, vn, (dpc_loc){0, 0}, e->d);
  uint32_t t = as_dtype(e, t_f32, ty);
  uint32_t bc1 = dpc_emit2(e, DPC_OP_SUB, K(1), dpc_emit2(e, DPC_OP_POW, K(c->beta1), t));
  uint32_t bc2 = dpc_emit2(e, DPC_OP_SUB, K(1), dpc_emit2(e, DPC_OP_POW, K(c->beta2), t));
  uint32_t denom = dpc_emit2(
      e, DPC_OP_ADD, dpc_emit1(e, DPC_OP_SQRT, dpc_emit2(e, DPC_OP_DIV, vn, bc2)), K(c->eps));
  uint32_t stepv = dpc_emit2(e, DPC_OP_DIV, dpc_emit2(e, DPC_OP_DIV, mn, bc1), denom);
  return dpc_emit2(e, DPC_OP_SUB, base, dpc_emit2(e, DPC_OP_MUL, lr, stepv));
#undef K
}

dpc_status dpc_pass_optimizer(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d) {
  (void)o;
  if (g->obj.loss == DPC_NONE)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "the model has no objective to optimize");
  opt_cfg c;
  dpc_status st = read_cfg(g, &c, d);
  if (st) return st;
  if (dpc_graph_find(g, "opt.step") != DPC_NONE)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the model already has a value named 'opt.step' (the optimizer's own)");
  uint32_t n_nodes = g->n_nodes;
  dpc_emit e = dpc_emit_start(g, g->nodes[g->values[g->obj.loss].node].device, d);
  dpc_shape scalar = {0};
  uint32_t step = new_state(&e, "opt.step", DPC_I64, &scalar);
  uint32_t s = as_dtype(&e, step, DPC_F32);
  uint32_t lr = schedule(&e, &c, s);
  dpc_emit_name(&e, lr, "opt.lr");
  uint32_t t = dpc_emit2(&e, DPC_OP_ADD, s, num(&e, 1));
  uint32_t next = dpc_emit2(&e, DPC_OP_ADD, step, dpc_emit_scalar(&e, 1, DPC_I64));
  if (!e.st) e.st = dpc_graph_add_update(g, step, next, (dpc_loc){0, 0}, d);
  uint32_t updated = 0;
  for (uint32_t i = 0; i < n_nodes && !e.st; i++) {
    if (g->nodes[i].op != DPC_OP_PARAM) continue;
    uint32_t p = g->nodes[i].out;
    if (g->values[p].name == DPC_NONE || !dpc_dtype_is_float(g->values[p].dtype)) continue;
    char name[300];
    snprintf(name, sizeof name, "%s.grad", dpc_graph_str(g, g->values[p].name));
    uint32_t grad = dpc_graph_find(g, name);
    if (grad == DPC_NONE) continue; /* the loss does not depend on it */
    e.device = g->nodes[i].device;
    uint32_t pn = update_param(&e, &c, p, grad, lr, t);
    if (!e.st) e.st = dpc_graph_add_update(g, p, pn, (dpc_loc){0, 0}, d);
    updated++;
  }
  if (!e.st && updated == 0)
    e.st = dpc_diag_fail(d, DPC_ERR_INVALID, "no param has a gradient: nothing to update");
  return e.st;
}

dpc_status dpc_optimizer_default_horizon(dpc_graph *g, dpc_diag *d) {
  if (g->obj.loss == DPC_NONE) return DPC_OK;
  const char *spec = NULL;
  for (uint32_t i = 0; i < dpc_optimizer_count; i++)
    if (!strcmp(dpc_optimizer_specs[i].name, dpc_graph_str(g, g->obj.optimizer)))
      spec = dpc_optimizer_specs[i].attrs;
  if (!spec) return DPC_OK;
  dpc_attrs a = {g, g->obj.attr, g->obj.n_attr, spec};
  if (dpc_attrs_get(a, "total_steps")) return DPC_OK;
  /* Re-home the objective's attributes at the end with total_steps added. */
  uint32_t mark = dpc_graph_attr_mark(g), off = g->obj.attr, n = g->obj.n_attr;
  for (uint32_t i = 0; i < n; i++)
    if (dpc_graph_attr_copy(g, g, &g->attrs[off + i]))
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  int64_t warmup = dpc_attrs_int(a, "warmup");
  if (dpc_graph_attr_int(g, "total_steps", warmup + 1000))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  g->obj.attr = mark;
  g->obj.n_attr = dpc_graph_attr_mark(g) - mark;
  return DPC_OK;
}
