/*
 * train.c — the training loop (see train.h): compile, plan per batch size, run, evaluate,
 * checkpoint. Checkpoint and parameter files are in train_io.c.
 */
#include "driver/train.h"
#include "driver/train_internal.h"

#include "runtime/session_testing.h"
#include "runtime/topology.h"
#include "driver/bench.h"

#include "partitioner/partitioner.h"
#include "runtime/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void dpc_train_defaults(dpc_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->epochs = 1;
  o->batch = 64;
  o->shuffle = true;
  o->lr = o->momentum = o->weight_decay = NAN;
}

/* ---- the model: inputs, objective overrides ------------------------------------------------- */

/* The data input is the model's one floating-point input, the labels its one integer input. */
static dpc_status pick_inputs(trainer *t, dpc_diag *d) {
  const dpc_graph *g = t->model;
  uint32_t nf = 0, ni = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op != DPC_OP_INPUT) continue;
    const dpc_value *v = &g->values[g->nodes[i].out];
    const char *name = dpc_graph_str(g, v->name);
    if (dpc_dtype_is_float(v->dtype))
      nf++, snprintf(t->x_name, sizeof t->x_name, "%s", name);
    else if (dpc_dtype_is_int(v->dtype))
      ni++, snprintf(t->y_name, sizeof t->y_name, "%s", name);
    else
      nf = 99;
  }
  if (nf != 1 || ni != 1)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "dpc train needs a model with one floating-point input (the data) and one "
                         "integer input (the labels); this one has %u and %u",
                         nf > 1 ? nf : nf, ni);
  const dpc_value *x = &g->values[dpc_graph_find(g, t->x_name)];
  const dpc_value *y = &g->values[dpc_graph_find(g, t->y_name)];
  if (t->art) {
    /* compiled for one batch size: the first dimension of both inputs */
    if (x->shape.rank < 1 || y->shape.rank != 1 || y->shape.d[0] != x->shape.d[0])
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "%s: its inputs %s and %s do not share a first (batch) dimension",
                           t->o->artifact, t->x_name, t->y_name);
    t->batch = (uint32_t)x->shape.d[0];
    if (t->o->batch && t->o->batch != t->batch)
      return dpc_diag_fail(d, DPC_ERR_INVALID,
                           "%s was compiled for batches of %u, not %u: train it at its own batch "
                           "size, or compile it again for batches of %u",
                           t->o->artifact, t->batch, t->o->batch, t->o->batch);
    return DPC_OK;
  }
  if (x->shape.rank < 1 || !DPC_DIM_IS_SYM(x->shape.d[0]) || y->shape.rank != 1 ||
      y->shape.d[0] != x->shape.d[0])
    return dpc_diag_fail(
        d, DPC_ERR_UNSUPPORTED,
        "dpc train needs the batch as the first, symbolic dimension of both inputs "
        "(input %s: f32[N, ...], input %s: i32[N])",
        t->x_name, t->y_name);
  for (uint32_t k = 1; k < x->shape.rank; k++)
    if (x->shape.d[k] < 0)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "input '%s': only its first dimension may be symbolic", t->x_name);
  t->batch_sym = DPC_DIM_SYM_NO(x->shape.d[0]);
  return DPC_OK;
}

static const char *optimizer_spec(const char *name) {
  for (uint32_t i = 0; i < dpc_optimizer_count; i++)
    if (!strcmp(dpc_optimizer_specs[i].name, name)) return dpc_optimizer_specs[i].attrs;
  return NULL;
}

/* Replace the objective's optimizer settings with the command line's, and fix the horizon of
 * schedules that need one. */
static dpc_status apply_overrides(trainer *t, uint64_t total_steps, dpc_diag *d) {
  dpc_graph *g = t->model;
  const dpc_train_opts *o = t->o;
  char old[64]; /* a copy: adding attributes may grow the string pool */
  snprintf(old, sizeof old, "%s", dpc_graph_str(g, g->obj.optimizer));
  const char *name = o->optimizer ? o->optimizer : old;
  const char *spec = optimizer_spec(name);
  if (!spec)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "unknown optimizer '%s' (sgd, adam, adamw)", name);
  if (!isnan(o->momentum) && strcmp(name, "sgd"))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "momentum applies to sgd, and the optimizer is %s",
                         name);
  uint32_t old_off = g->obj.attr, old_n = g->obj.n_attr;
  uint32_t mark = dpc_graph_attr_mark(g);
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; i < old_n && !st; i++) {
    /* keep the model's settings the new optimizer also takes */
    dpc_attr a = g->attrs[old_off + i];
    const char *an = dpc_graph_str(g, a.name);
    dpc_attr_spec sp;
    if (!dpc_spec_find(spec, an, &sp)) continue;
    if ((!strcmp(an, "lr") && !isnan(o->lr)) || (!strcmp(an, "momentum") && !isnan(o->momentum)) ||
        (!strcmp(an, "weight_decay") && !isnan(o->weight_decay)))
      continue;
    if (!strcmp(an, "total_steps") || (!strcmp(an, "schedule") && o->schedule)) continue;
    st = dpc_graph_attr_copy(g, g, &g->attrs[old_off + i]);
  }
  if (!st && !isnan(o->lr)) st = dpc_graph_attr_float(g, "lr", o->lr);
  if (!st && !isnan(o->momentum)) st = dpc_graph_attr_float(g, "momentum", o->momentum);
  if (!st && !isnan(o->weight_decay)) st = dpc_graph_attr_float(g, "weight_decay", o->weight_decay);
  if (!st && o->schedule) st = dpc_graph_attr_str(g, "schedule", o->schedule);
  if (!st) st = dpc_graph_attr_int(g, "total_steps", (int64_t)total_steps);
  if (st) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  uint32_t id = dpc_graph_intern(g, name, strlen(name));
  if (id == DPC_NONE) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  g->obj.optimizer = id;
  g->obj.attr = mark;
  g->obj.n_attr = dpc_graph_attr_mark(g) - mark;
  return DPC_OK;
}

/* ---- plans and sessions ---------------------------------------------------------------------- */

/* The host's CPU devices of r's plan: those of a mixed plan over several devices (a plan on one
 * device runs on the GPU). */
static uint32_t host_devices(const trainer *t, const run_t *r) {
  return r->plan->n_devs > 1 ? t->host_devices : 0;
}

dpc_status dpc_train_compile(trainer *t, run_t *r, dpc_diag *d) {
  if (!t->cg) return DPC_OK;
  r->native = calloc(r->plan->g->n_nodes ? r->plan->g->n_nodes : 1, sizeof *r->native);
  if (!r->native) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  uint32_t h = host_devices(t, r), n = r->plan->n_devs;
  dpc_status st = h ? dpc_codegen_compile_devices(t->cg_host, r->plan, 0, h, r->native, d) : DPC_OK;
  return st ? st : dpc_codegen_compile_devices(t->cg, r->plan, h, n - h, r->native, d);
}

/* Plan and open a session of graph `src` for batch size n, sharing persistent values with
 * `share` (or owning them when it is NULL). */
static dpc_status open_run(trainer *t, const dpc_graph *src, uint32_t n, bool training,
                           const dpc_session *share, run_t *r, dpc_diag *d) {
  dpc_graph *g = dpc_graph_clone(src);
  if (!g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  int64_t *vals = calloc(g->n_syms ? g->n_syms : 1, sizeof *vals);
  dpc_status st = vals ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  /* data parallel when training on several devices and the batch splits evenly between them */
  uint32_t D = t->replicas; /* devices */
  /* a mixed plan evaluates split as it trains: on one device the GPU would read the CPU's params
   * in host memory it cannot address */
  bool model = D > 1 && (training ? t->strategy.kind == DPC_STRATEGY_MODEL : t->host_devices > 0);
  /* a pipeline is hybrid's layout: replicas of mp stages (one replica: mp = D) */
  bool hybrid =
      training && D > 1 &&
      (t->strategy.kind == DPC_STRATEGY_HYBRID || t->strategy.kind == DPC_STRATEGY_PIPELINE);
  uint32_t mp = hybrid ? t->o->mp : 1, R = D / mp; /* data-parallel replicas */
  bool parallel = training && D > 1 && !model && n % R == 0;
  uint32_t per = parallel ? n / R : n;
  /* accumulation splits each replica's share; a share that does not split runs whole */
  uint32_t K =
      training && t->o->accumulate > 1 && per % t->o->accumulate == 0 ? t->o->accumulate : 1;
  /* --shares: a full batch splits as given; any other in the same proportions */
  uint32_t *shares = NULL;
  if (training && t->shares && !model && !hybrid) {
    double w[DPC_MAX_DEVICES]; /* R = devices / mp */
    for (uint32_t k = 0; k < R; k++) w[k] = t->shares[k];
    shares = calloc(R, sizeof *shares);
    if (!shares)
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    else if (n == t->batch)
      memcpy(shares, t->shares, R * sizeof *shares);
    parallel = !st && (n == t->batch || dpc_driver_split_batch(n, R, w, 1, shares));
    bool splits = t->o->accumulate > 1;
    for (uint32_t k = 0; parallel && splits && k < R; k++)
      splits = shares[k] % t->o->accumulate == 0;
    K = splits ? t->o->accumulate : 1;
    per = parallel ? shares[0] : n;
    if (!parallel) free(shares), shares = NULL;
  }
  for (uint32_t k = 0; !st && k < g->n_syms; k++)
    vals[k] = k == t->batch_sym ? (int64_t)(per / K) : -1;
  if (!st) st = dpc_graph_bind(g, vals, d);
  /* a batch that does not split over the replicas runs on the first replica's devices */
  if (!st)
    st = dpc_driver_plan(g, n,
                         &(dpc_driver_strategy){parallel ? R : 1, model ? D : mp, K, t->o->pipeline,
                                                t->o->local_sgd > 0, shares},
                         training, &r->plan, d);
  free(shares);
  r->parallel = parallel;
  /* across ranks, a plan over every rank's device runs with each rank running its own; a plan
   * over fewer (a batch that does not split) on rank 0 alone */
  r->across = t->peers && training && r->plan && r->plan->n_devs == t->ranks * t->local &&
              r->plan->n_devs > 1;
  r->split = r->across && (model || hybrid);
  if (!st && t->peers && training && hybrid && !parallel && t->ranks > 1)
    st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                       "a batch of %u does not split over the %u replicas across ranks: give a "
                       "batch size that divides the data set's size",
                       n, R);
  if (!st) st = dpc_driver_check_memory(r->plan, t->o->device_memory, d);
  if (!st) st = dpc_train_compile(t, r, d);
  dpc_session_opts so = {.training = training,
                         .share = share,
                         .native = r->native,
                         .threads = t->o->threads,
                         .devices = t->o->devices,
                         .device_kind = dpc_codegen_device_kind(t->o->exec.backend),
                         .host_devices = host_devices(t, r),
                         .timeout_s = t->o->timeout_s,
                         .comm_thread = t->o->comm_thread,
                         .test = dpc_train_session_hooks(t),
                         .peers = r->across ? t->peers : NULL,
                         .self = t->rank * t->local,
                         .local = t->local};
  /* across ranks, one plan: each rank checks its own against rank 0's before the first step */
  if (!st && r->across) st = dpc_train_mpi_check_plan(t, r->plan, d);
  if (!st) st = dpc_session_new(r->plan, &so, &r->s, d);
  free(vals);
  dpc_graph_free(g);
  if (st) return st;
  const char *comm = dpc_session_comm_note(r->s);
  if (comm[0] && !t->comm_noted && t->o->on_note) { /* NCCL, or why through the host */
    t->comm_noted = true;
    t->o->on_note(t->o->user, comm);
  }
  r->n = n;
  const dpc_graph *pg = r->plan->g;
  r->x = dpc_graph_find(pg, t->x_name);
  r->y = dpc_graph_find(pg, t->y_name);
  r->loss = pg->obj.loss != DPC_NONE ? pg->obj.loss : dpc_graph_find(pg, t->loss_name);
  if (r->across && !r->split && t->rank > 0 && r->loss != DPC_NONE) {
    /* this rank computes its own replica's copy of the reduced loss, not replica 0's */
    char nm[300];
    snprintf(nm, sizeof nm, "%s" DPC_REPLICA_SUFFIX "%u",
             dpc_graph_str(pg, pg->values[r->loss].name), t->rank * t->local);
    r->loss = dpc_graph_find(pg, nm);
  }
  r->lr = dpc_graph_find(pg, "opt.lr");
  r->logits = pg->n_outputs ? pg->outputs[0] : DPC_NONE;
  return DPC_OK;
}

static void close_run(run_t *r) {
  dpc_session_free(r->s);
  if (!r->borrowed) {
    free(r->native);
    dpc_plan_free(r->plan);
  }
  memset(r, 0, sizeof *r);
}

/* Two significant digits: a placement should not change with the last digits of a measurement
 * (runs on one cluster then place alike). */
static double two_digits(double x) {
  if (!(x > 0)) return 0;
  double scale = pow(10, floor(log10(x)) - 1);
  return round(x / scale) * scale;
}

/* Placing over n devices across ranks: when they span machines, the link measured between them
 * is the placement's (within a machine, its calibration holds). Pretended hosts share one
 * machine's memory, and with more ranks than cores their measurement is the scheduler's. */
static void cross_host_link(trainer *t, uint32_t n, dpc_driver_place_opts *po) {
  if (!t->peers || t->hosts < 2 || t->o->pretend_hosts || !(t->link_gbs > 0)) return;
  uint32_t ranks = (n + t->local - 1) / t->local, per_host = t->ranks / t->hosts;
  if (ranks <= per_host) return;
  po->link_gbs = two_digits(t->link_gbs), po->link_latency_s = two_digits(t->link_latency_s);
  if (t->o->on_note) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "placing over %u devices on %u hosts with the link measured between them (%.2f GB/s, "
             "%.1f us a message)",
             n, (ranks + per_host - 1) / per_host, po->link_gbs, po->link_latency_s * 1e6);
    t->o->on_note(t->o->user, msg);
  }
}

/* Over GPUs, the placement takes their measured figures, and the run's start says which. */
static void place_on_gpus(const trainer *t, dpc_driver_place_opts *po, char *note, size_t len) {
  const char *kind = dpc_codegen_device_kind(t->o->exec.backend);
  if (!kind || strcmp(kind, "cuda") || t->peers) return;
  po->gpus = true, po->host_devices = t->host_devices, po->note = note, po->note_len = len;
}

static void said_placement(const trainer *t, const char *note) {
  if (note[0] && t->placed_auto && t->o->on_note) t->o->on_note(t->o->user, note);
}

/* Hybrid: the model placed over one replica's --mp devices (by itself, or by METIS). */
static dpc_status place_replica(trainer *t, dpc_diag *d) {
  char spec[32], note[400] = "";
  snprintf(spec, sizeof spec, "cpu:%u", t->o->mp);
  uint32_t replicas = t->replicas / t->o->mp;
  bool pipe = t->strategy.kind == DPC_STRATEGY_PIPELINE;
  dpc_driver_place_opts po = {t->o->device_memory,
                              NULL,
                              pipe ? t->o->accumulate : 1,
                              pipe ? t->o->pipeline : DPC_SCHEDULE_NONE,
                              0,
                              0};
  cross_host_link(t, t->o->mp, &po);
  place_on_gpus(t, &po, note, sizeof note);
  dpc_status st = dpc_driver_place(t->model, t->o->batch / replicas, spec, t->o->mp, &po,
                                   &t->placed_auto, NULL, d);
  said_placement(t, note);
  return st;
}

/* Model parallel, hybrid and pipelines: the model placed over the devices (over one replica's
 * --mp devices but for model parallel) by METIS, unless it places itself. Across ranks, rank 0
 * places (placing measures the devices, which would differ from rank to rank) and hands its
 * placement to the others. */
static dpc_status place(trainer *t, dpc_diag *d) {
  dpc_status st = DPC_OK;
  if (!t->peers || t->rank == 0) {
    char spec[32];
    snprintf(spec, sizeof spec, "cpu:%u", t->replicas);
    dpc_driver_place_opts po = {t->o->device_memory, NULL, 1, DPC_SCHEDULE_NONE, 0, 0};
    if (t->strategy.kind != DPC_STRATEGY_MODEL) {
      st = place_replica(t, d);
    } else {
      char note[400] = "";
      cross_host_link(t, t->replicas, &po);
      place_on_gpus(t, &po, note, sizeof note);
      st = dpc_driver_place(t->model, t->o->batch, t->peers ? spec : t->o->devices, t->replicas,
                            &po, &t->placed_auto, NULL, d);
      said_placement(t, note);
    }
  }
  return t->peers ? dpc_train_mpi_placement(t, st, d) : st;
}

/* Data parallel: every replica's params and state take replica 0's (after they were loaded, or
 * after a step that ran on replica 0 alone). Replica r's copy of P is P.replica<r>. */
static dpc_status sync_replicas(trainer *t, dpc_diag *d) {
  const run_t *r = &t->train_full;
  if (!r->parallel) return DPC_OK;
  const dpc_graph *g = r->plan->g;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (!dpc_op_has(g->nodes[i].op, DPC_OPF_PERSIST)) continue;
    uint32_t v = g->nodes[i].out;
    const char *name = dpc_graph_str(g, g->values[v].name);
    char base[256];
    if (!dpc_replica_of(name, base, sizeof base)) continue;
    uint32_t src = dpc_graph_find(g, base);
    if (src == DPC_NONE)
      return dpc_diag_fail(d, DPC_ERR_INTERNAL, "replica value '%s' has no '%s'", name, base);
    dpc_status st = dpc_session_copy(r->s, v, r->s, src, d);
    if (st) return st;
  }
  return DPC_OK;
}

/* Local SGD: each param becomes the mean of its replicas' copies (summed in double, replica 0
 * first: the same bits every run), by the session's transport; optimizer state stays each
 * replica's own. */
static dpc_status average_replicas(trainer *t, dpc_diag *d) {
  const run_t *r = &t->train_full;
  if (!r->parallel) return DPC_OK;
  const dpc_graph *g = r->plan->g;
  uint32_t R = t->replicas / (t->o->mp > 1 ? t->o->mp : 1), groups = 0;
  uint32_t *ids = malloc(((size_t)g->n_nodes * R + 1) * sizeof *ids);
  if (!ids) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory averaging replicas");
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    if (g->nodes[i].op != DPC_OP_PARAM) continue;
    uint32_t v = g->nodes[i].out;
    const char *name = dpc_graph_str(g, g->values[v].name);
    char base[256], nm[300];
    if (dpc_replica_of(name, base, sizeof base)) continue; /* a copy: done with its original */
    for (uint32_t k = 0; k < R && !st; k++) {
      snprintf(nm, sizeof nm, "%s" DPC_REPLICA_SUFFIX "%u", name, k);
      uint32_t c = k ? dpc_graph_find(g, nm) : v;
      if (c == DPC_NONE)
        st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "param '%s' has no replica %u", name, k);
      ids[(size_t)groups * R + k] = c;
    }
    groups++;
  }
  if (!st) st = dpc_session_average(r->s, ids, groups, R, d);
  free(ids);
  return st;
}

/* The session for a batch of n: the full one, or the one for the partial last batch. */
static dpc_status run_for(trainer *t, bool training, uint32_t n, run_t **out, dpc_diag *d) {
  run_t *full = training ? &t->train_full : &t->eval_full,
        *tail = training ? &t->train_tail : &t->eval_tail;
  const dpc_graph *g = training ? t->train_g : t->eval_g;
  if (n == full->n) {
    *out = full;
    return DPC_OK;
  }
  if (t->art)
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "a batch of %u for a plan of %u", n, full->n);
  if (tail->s && tail->n != n) close_run(tail);
  if (!tail->s) {
    dpc_status st = open_run(t, g, n, training, t->train_full.s, tail, d);
    if (st) return st;
  }
  *out = tail;
  return DPC_OK;
}

/* Copy batch `idx` straight into the run's input memory. */
static dpc_status feed(run_t *r, const dpc_dataset *ds, const uint64_t *idx, uint32_t n,
                       dpc_diag *d) {
  dpc_tensor x = dpc_session_input(r->s, r->x), y = dpc_session_input(r->s, r->y);
  return dpc_dataset_fill(ds, idx, n, &x, &y, d);
}

static double scalar(const run_t *r, uint32_t v) {
  if (v == DPC_NONE) return NAN;
  dpc_tensor s = dpc_session_value(r->s, v);
  return dpc_tload(&s, 0);
}

/* ---- evaluation ------------------------------------------------------------------------------ */

static dpc_status evaluate(trainer *t, dpc_train_epoch *ep, dpc_diag *d) {
  const dpc_dataset *ds = t->test_ds;
  uint64_t n = dpc_dataset_size(ds), correct = 0;
  double loss_sum = 0;
  uint64_t *idx = malloc((t->batch ? t->batch : 1) * sizeof *idx);
  if (!idx) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = DPC_OK;
  /* an artifact's plans take whole batches only: the samples past the last are left out */
  if (t->art) n -= n % t->batch;
  for (uint64_t start = 0; start < n && !st; start += t->batch) {
    uint32_t m = (uint32_t)(n - start < t->batch ? n - start : t->batch);
    for (uint32_t i = 0; i < m; i++) idx[i] = start + i;
    run_t *r;
    if ((st = run_for(t, false, m, &r, d)) || (st = feed(r, ds, idx, m, d)) ||
        (st = dpc_session_run(r->s, d)))
      break;
    loss_sum += scalar(r, r->loss) * m;
    dpc_tensor lg = dpc_session_value(r->s, r->logits), y = dpc_session_value(r->s, r->y);
    int64_t c = lg.shape.rank == 2 ? lg.shape.d[1] : 1;
    for (uint32_t i = 0; i < m; i++) {
      int64_t best = 0;
      for (int64_t k = 1; k < c; k++)
        if (dpc_tload(&lg, i * c + k) > dpc_tload(&lg, i * c + best)) best = k;
      correct += best == dpc_tload_i64(&y, i);
    }
  }
  free(idx);
  if (st) {
    dpc_diag_prefix(d, "evaluating on %s: ", dpc_dataset_name(ds));
    return st;
  }
  ep->evaluated = true;
  ep->test_samples = n;
  ep->test_loss = n ? loss_sum / (double)n : NAN;
  ep->test_accuracy = n ? (double)correct / (double)n : NAN;
  return DPC_OK;
}

/* ---- setup -------------------------------------------------------------------------------- */

/* Data shapes against the model: samples must hold as many values as the input's row, and
 * labels must index the logits. */
static dpc_status check_data(trainer *t, const dpc_dataset *ds, dpc_diag *d) {
  const dpc_graph *g = t->model;
  const dpc_value *x = &g->values[dpc_graph_find(g, t->x_name)];
  int64_t row = 1;
  for (uint32_t k = 1; k < x->shape.rank; k++) row *= x->shape.d[k];
  const dpc_shape *s = dpc_dataset_sample_shape(ds);
  if (dpc_shape_numel(s) != row) {
    char want[160], have[160] = "";
    dpc_graph_format_type(g, x->dtype, &x->shape, want, sizeof want);
    for (uint32_t k = 0, o = 0; k < s->rank; k++)
      o += (uint32_t)snprintf(have + o, sizeof have - o, "%s%lld", k ? ", " : "",
                              (long long)s->d[k]);
    return dpc_diag_fail(
        d, DPC_ERR_SHAPE,
        "%s has samples of shape [%s] (%lld values), but input '%s' is %s (%lld values a sample)",
        dpc_dataset_name(ds), have, (long long)dpc_shape_numel(s), t->x_name, want, (long long)row);
  }
  /* the labels feed softmax_cross_entropy: its logits have the class count */
  uint32_t yv = dpc_graph_find(g, t->y_name);
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    if (n->op != DPC_OP_SOFTMAX_CROSS_ENTROPY || g->ids[n->in + 1] != yv) continue;
    int64_t classes = g->values[g->ids[n->in]].shape.d[1];
    if (classes >= 0 && dpc_dataset_classes(ds) > classes)
      return dpc_diag_fail(
          d, DPC_ERR_SHAPE, "%s has labels up to %lld, but the model's logits have %lld classes",
          dpc_dataset_name(ds), (long long)dpc_dataset_classes(ds) - 1, (long long)classes);
  }
  return DPC_OK;
}

static void trainer_free(trainer *t) {
  dpc_train_async_free(t);
  close_run(&t->train_tail);
  close_run(&t->eval_tail);
  close_run(&t->eval_full);
  close_run(&t->train_full);
  dpc_artifact_close(t->art);
  dpc_codegen_free(t->cg);
  dpc_codegen_free(t->cg_host);
  dpc_graph_free(t->model);
  free(t->shares);
  dpc_graph_free(t->train_g);
  dpc_graph_free(t->eval_g);
  dpc_dataset_close(t->train_ds);
  dpc_dataset_close(t->test_ds);
  dpc_order_free(&t->order);
  if (t->log) fclose(t->log);
}

/* --shares: the replicas' shares of a full batch, given or measured (synchronous data parallel
 * over single devices only: hybrid and pipeline replicas, local SGD and the parameter server
 * keep equal shares). */
static dpc_status pick_shares(trainer *t, dpc_diag *d) {
  const dpc_train_opts *o = t->o;
  if (!o->shares || !strcmp(o->shares, "even")) return DPC_OK;
  if (t->replicas < 2 || t->replicas > DPC_BENCH_DEVICES || t->strategy.kind != DPC_STRATEGY_DATA ||
      t->art)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "a split of the batch by shares sizes synchronous data-parallel replicas: "
                         "2 to %d devices with the data strategy, not asynchronous, not local SGD, "
                         "not a compiled artifact",
                         DPC_BENCH_DEVICES);
  if (!(t->shares = calloc(t->replicas, sizeof *t->shares)))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  bool even = false, measure = false;
  dpc_status st =
      dpc_driver_parse_shares(o->shares, t->replicas, t->batch, t->shares, &even, &measure, d);
  if (!st && measure) {
    if (o->on_start) o->on_start(o->user, "measuring the devices for automatic shares");
    dpc_bench_opts bo = {.batch = t->batch,
                         .threads = o->threads,
                         .exec = o->exec,
                         .devices = o->devices,
                         .accumulate = o->accumulate};
    st = dpc_bench_measure_shares(t->model, &bo, t->replicas, t->shares, d);
  }
  if (!st && o->on_start) {
    char msg[256];
    int at = snprintf(msg, sizeof msg, "data-parallel shares of a batch of %u:", t->batch);
    for (uint32_t k = 0; k < t->replicas && at > 0 && (size_t)at < sizeof msg; k++)
      at += snprintf(msg + at, sizeof msg - (size_t)at, "%s%u", k ? "," : " ", t->shares[k]);
    o->on_start(o->user, msg);
  }
  return st;
}

/* The model through the training and evaluation pipelines, planned and compiled. */
static dpc_status compile_graph(trainer *t, dpc_diag *d) {
  const dpc_train_opts *o = t->o;
  dpc_status st;
  if ((st = apply_overrides(t, t->total_steps, d))) return st;
  if (o->on_start) o->on_start(o->user, "compiling the training graph");
  t->train_g = dpc_graph_clone(t->model);
  t->eval_g = dpc_graph_clone(t->model);
  if (!t->train_g || !t->eval_g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_pass_opts po = o->passes;
  po.training = true;
  po.fuse = dpc_codegen_fusion(o->exec.backend);
  const dpc_codegen_backend *host_be = NULL; /* a mixed plan's CPU: groups both backends compile */
  if (t->host_devices && (st = dpc_codegen_backend_find("llvm", &host_be, d))) return st;
  if (host_be) po.fuse &= dpc_codegen_fusion(host_be);
  if ((st = dpc_passes_run(t->train_g, &po, d))) return st;
  /* evaluation keeps the loss as a second output */
  if ((st = dpc_graph_add_output(t->eval_g, t->eval_g->obj.loss, d))) return st;
  po.training = false;
  po.print_after = NULL;
  if ((st = dpc_passes_run(t->eval_g, &po, d))) return st;
  if (t->eval_g->n_outputs < 2)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the model needs an 'output' (its logits) to be evaluated");
  if (dpc_codegen_compiles(o->exec.backend)) {
    if ((st = dpc_driver_check_backend_device(o->exec.backend, d))) return st;
    char what[64];
    snprintf(what, sizeof what, "compiling kernels with %s",
             o->exec.backend->kind == DPC_KERNEL_CUDA ? "NVRTC" : "LLVM");
    if (o->on_start) o->on_start(o->user, what);
    if ((st = dpc_codegen_new(o->exec.backend, &o->exec.cpu, &t->cg, d))) return st;
    if (host_be && (st = dpc_codegen_new(host_be, &o->exec.cpu, &t->cg_host, d))) return st;
  }
  if ((st = pick_shares(t, d))) return st;
  uint64_t tn = dpc_dataset_size(t->train_ds);
  uint32_t first = (uint32_t)(tn < t->batch ? tn : t->batch);
  if (o->async ? (st = dpc_train_async_open(t, d))
               : (st = open_run(t, t->train_g, first, true, NULL, &t->train_full, d)))
    return st;
  /* across ranks, replica 0's params are current on rank 0 alone: it evaluates */
  if (t->test_ds && t->rank == 0) {
    uint64_t en = dpc_dataset_size(t->test_ds);
    uint32_t ef = (uint32_t)(en < t->batch ? en : t->batch);
    if (ef && (st = open_run(t, t->eval_g, ef, false, t->train_full.s, &t->eval_full, d)))
      return st;
  }
  return DPC_OK;
}

/* Open opts.artifact: the model is its evaluation (or inference) graph, the batch its plans'. */
static dpc_status open_artifact(trainer *t, dpc_diag *d) {
  const dpc_train_opts *o = t->o;
  if (o->optimizer || o->schedule || !isnan(o->lr) || !isnan(o->momentum) ||
      !isnan(o->weight_decay))
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s has its optimizer compiled in: change it in the model and run dpc "
                         "compile again (or train the .graph)",
                         o->artifact);
  if (o->on_start) o->on_start(o->user, "loading the compiled artifact");
  dpc_status st = dpc_artifact_open(o->artifact, &t->art, d);
  if (st) return st;
  const dpc_plan *tp = dpc_artifact_plan(t->art, "train", NULL);
  const dpc_plan *ep = dpc_artifact_plan(t->art, "eval", NULL);
  if (!ep) ep = dpc_artifact_plan(t->art, "infer", NULL);
  if (!tp || !ep)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s holds no training step: compile it with dpc compile --train",
                         o->artifact);
  if (!(t->model = dpc_graph_clone(ep->g))) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  const dpc_graph *g = tp->g;
  snprintf(t->loss_name, sizeof t->loss_name, "%s",
           g->obj.loss != DPC_NONE && g->values[g->obj.loss].name != DPC_NONE
               ? dpc_graph_str(g, g->values[g->obj.loss].name)
               : "");
  return DPC_OK;
}

/* Sessions on the artifact's own plans and kernels. */
static dpc_status open_artifact_runs(trainer *t, dpc_diag *d) {
  const char *roles[2] = {"train", "eval"};
  run_t *runs[2] = {&t->train_full, &t->eval_full};
  for (int i = 0; i < 2; i++) {
    if (i == 1 && !t->test_ds) break;
    const dpc_native_kernel *k = NULL;
    const dpc_plan *p = dpc_artifact_plan(t->art, roles[i], &k);
    if (!p && i == 1) p = dpc_artifact_plan(t->art, "infer", &k);
    run_t *r = runs[i];
    r->plan = (dpc_plan *)p; /* borrowed: close_run leaves it to the artifact */
    r->native = (dpc_native_kernel *)k;
    r->borrowed = true;
    dpc_session_opts so = {.training = i == 0,
                           .share = i ? t->train_full.s : NULL,
                           .native = k,
                           .threads = t->o->threads,
                           .test = dpc_train_session_hooks(t),
                           .device_kind = dpc_artifact_device_kind(t->art)};
    dpc_status st = dpc_session_new(p, &so, &r->s, d);
    if (st) return st;
    const dpc_graph *pg = p->g;
    r->n = t->batch;
    r->x = dpc_graph_find(pg, t->x_name);
    r->y = dpc_graph_find(pg, t->y_name);
    r->loss = pg->obj.loss != DPC_NONE ? pg->obj.loss : dpc_graph_find(pg, t->loss_name);
    r->lr = dpc_graph_find(pg, "opt.lr");
    r->logits = pg->n_outputs ? pg->outputs[0] : DPC_NONE;
    if (r->y == DPC_NONE || r->loss == DPC_NONE || (i == 1 && pg->n_outputs < 2))
      return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: its %s plan lacks the labels or the loss",
                           t->o->artifact, roles[i]);
  }
  return DPC_OK;
}

/* The options' strategy, typed and checked against the devices (dpc_strategy_parse). The
 * options carry every setting; each kind is given only its own, as it alone reads them. */
static dpc_status parse_strategy(trainer *t, dpc_diag *d) {
  const dpc_train_opts *o = t->o;
  dpc_strategy_args a;
  dpc_strategy_args_init(&a);
  a.text = o->strategy, a.async = o->async, a.devices = t->replicas;
  a.kinds = (1u << DPC_STRATEGY_DATA) | (1u << DPC_STRATEGY_MODEL) | (1u << DPC_STRATEGY_HYBRID) |
            (1u << DPC_STRATEGY_PIPELINE);
  a.shares = o->shares, a.memory_limit = o->device_memory;
  dpc_strategy_kind k = DPC_STRATEGY_DATA;
  if (o->strategy) (void)dpc_strategy_kind_parse(o->strategy, &k);
  if (k == DPC_STRATEGY_PIPELINE)
    a.stages = o->mp, a.microbatches = o->accumulate ? o->accumulate : 1, a.schedule = o->pipeline;
  else if (o->accumulate > 1)
    a.accumulate = o->accumulate;
  if (k == DPC_STRATEGY_HYBRID) a.mp = o->mp;
  if (o->async) a.staleness = o->staleness;
  if (o->local_sgd) a.period = o->local_sgd;
  return dpc_strategy_parse(&a, &t->strategy, NULL, d);
}

/* --devices mpi: what runs across ranks today (synchronous data parallel, with accumulation or
 * local SGD, every full batch split evenly over the ranks; the parameter server on rank 0 with
 * workers on every rank; the model split over the ranks:
 * model parallel, a pipeline, hybrid). */
static dpc_status check_mpi(trainer *t, dpc_diag *d) {
  const dpc_train_opts *o = t->o;
  const char *what = NULL;
  dpc_strategy_kind k = t->strategy.kind;
  if (t->replicas > 1 && k != DPC_STRATEGY_DATA && k != DPC_STRATEGY_LOCAL_SGD &&
      k != DPC_STRATEGY_MODEL && k != DPC_STRATEGY_PIPELINE && k != DPC_STRATEGY_HYBRID &&
      k != DPC_STRATEGY_ASYNC)
    what = dpc_strategy_kind_name(k);
  else if (o->artifact)
    what = "a compiled artifact";
  else if (o->shares && strcmp(o->shares, "even"))
    what = "uneven shares";
  /* rank 0's checkpoint holds replica 0; local SGD's replicas differ between meetings */
  else if (o->local_sgd && (o->checkpoint_path || o->resume_path))
    what = "a checkpoint of local SGD";
  else if (o->local_sgd && t->local > 1)
    what = "local SGD with several devices a rank";
  if (what)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "across MPI ranks dpc trains synchronous data parallel (with "
                         "accumulation or local SGD), the asynchronous parameter server, model "
                         "parallel, pipelines and hybrid; %s is not built yet across ranks",
                         what);
  uint32_t R = k == DPC_STRATEGY_MODEL ? 1 : k == DPC_STRATEGY_PIPELINE ? 1 : t->replicas;
  if (k == DPC_STRATEGY_HYBRID) R = o->mp ? t->replicas / o->mp : t->replicas;
  if (R > 1 && o->batch % R)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the batch of %u does not split evenly over the %u replicas across "
                         "ranks: give a multiple of %u",
                         o->batch, R, R);
  return DPC_OK;
}

static dpc_status setup(trainer *t, const dpc_graph *src, dpc_diag *d) {
  const dpc_train_opts *o = t->o;
  dpc_status st;
  if (o->epochs < 1)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "the number of epochs 0 must be at least 1");
  t->replicas = 1;
  if (o->devices) {
    if ((st = dpc_driver_count_devices(o->devices, &t->replicas, d))) return st;
    if (t->peers) t->replicas = t->ranks * t->local; /* over the communicator given */
    if ((st = parse_strategy(t, d))) return st;
    if (t->host_devices && t->strategy.kind == DPC_STRATEGY_PIPELINE && o->mp != t->replicas)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "the CPU beside GPUs runs one pipeline over all %u devices (%u "
                           "stages), not %u of %u stages: a second would have no CPU",
                           t->replicas, t->replicas, t->replicas / (o->mp ? o->mp : 1), o->mp);
    if (t->peers && (st = check_mpi(t, d))) return st;
    if (t->replicas > 1 && o->artifact)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "a compiled artifact runs on one device; train the .graph on several");
  }
  if (o->artifact) {
    if ((st = open_artifact(t, d))) return st;
  } else {
    if (src->obj.loss == DPC_NONE)
      return dpc_diag_fail(d, DPC_ERR_INVALID,
                           "%s has nothing to minimize: add a line such as "
                           "'minimize loss with sgd(lr=0.05, momentum=0.9)'",
                           src->src_name ? src->src_name : "the model");
    if (o->batch < 1)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "the batch size 0 must be at least 1");
    if (!(t->model = dpc_graph_clone(src))) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    snprintf(t->loss_name, sizeof t->loss_name, "%s",
             src->values[src->obj.loss].name != DPC_NONE
                 ? dpc_graph_str(src, src->values[src->obj.loss].name)
                 : "");
    t->batch = o->batch;
  }
  if ((st = pick_inputs(t, d))) return st;
  if (o->on_start) o->on_start(o->user, "opening the data");
  const char *spec = o->data ? o->data : "fashion-mnist";
  if ((st = o->train_source ? dpc_dataset_from_source(o->train_source, &t->train_ds, d)
                            : dpc_dataset_open(spec, DPC_SPLIT_TRAIN, &t->train_ds, d)))
    return st;
  if ((st = check_data(t, t->train_ds, d))) return st;
  /* test data: given, or the test split of a named dataset or folder (not of an npy pair, not
   * of a caller's source) */
  bool npy_pair = strchr(spec, ',') != NULL;
  if (o->test_source || (!o->train_source && (o->test_data || !npy_pair))) {
    if ((st = o->test_source ? dpc_dataset_from_source(o->test_source, &t->test_ds, d)
                             : dpc_dataset_open(o->test_data ? o->test_data : spec, DPC_SPLIT_TEST,
                                                &t->test_ds, d)))
      return st;
    if ((st = check_data(t, t->test_ds, d))) return st;
    if (t->art && dpc_dataset_size(t->test_ds) < t->batch) {
      dpc_dataset_close(t->test_ds); /* not one whole batch to evaluate */
      t->test_ds = NULL;
    }
  }
  if ((st = dpc_order_init(&t->order, dpc_dataset_size(t->train_ds), o->seed, o->shuffle, d)))
    return st;
  t->batches = dpc_order_batches(&t->order, t->batch);
  if (t->art) {
    t->batches = dpc_dataset_size(t->train_ds) / t->batch;
    if (!t->batches)
      return dpc_diag_fail(
          d, DPC_ERR_INVALID, "%s has %llu samples, fewer than the batch of %u %s was compiled for",
          dpc_dataset_name(t->train_ds), (unsigned long long)dpc_dataset_size(t->train_ds),
          t->batch, o->artifact);
  }
  /* The schedule's horizon is the planned run, --epochs of batches, unless the model fixes it;
   * --steps only stops early, so a run stopped and resumed follows the same schedule. */
  const dpc_graph *og = t->art ? dpc_artifact_plan(t->art, "train", NULL)->g : t->model;
  const char *ospec =
      og->obj.optimizer != DPC_NONE ? optimizer_spec(dpc_graph_str(og, og->obj.optimizer)) : NULL;
  dpc_attrs oa = {og, og->obj.attr, og->obj.n_attr, ospec ? ospec : ""};
  int64_t fixed = ospec && dpc_attrs_get(oa, "total_steps") ? dpc_attrs_int(oa, "total_steps") : 0;
  t->total_steps = fixed > 0 ? (uint64_t)fixed : o->epochs * t->batches;
  /* across ranks, hybrid's and a pipeline's replicas cannot take the partial last batch of an
   * epoch unless it splits over them: refused now, not after an epoch's training */
  uint64_t tail = t->art ? 0 : dpc_dataset_size(t->train_ds) % t->batch;
  dpc_strategy_kind sk = t->strategy.kind;
  uint32_t dp = o->mp ? t->replicas / o->mp : t->replicas;
  if (t->peers && t->ranks > 1 && !o->async && tail && tail % dp && dp > 1 &&
      (sk == DPC_STRATEGY_HYBRID || sk == DPC_STRATEGY_PIPELINE) &&
      (!o->steps || o->steps >= t->batches))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "the last batch of each epoch has %llu of %s's %llu samples, which do not "
                         "split over the %u replicas across ranks: give a batch size that leaves "
                         "a last batch of a multiple of %u samples (or none), or stop before step "
                         "%llu",
                         (unsigned long long)tail, dpc_dataset_name(t->train_ds),
                         (unsigned long long)dpc_dataset_size(t->train_ds), dp, dp,
                         (unsigned long long)t->batches);
  if (o->resume_path && (st = dpc_train_peek_checkpoint(t, d))) return st;
  if (t->art) {
    if ((st = open_artifact_runs(t, d))) return st;
  } else if (t->replicas > 1 &&
             (t->strategy.kind == DPC_STRATEGY_MODEL || t->strategy.kind == DPC_STRATEGY_HYBRID ||
              t->strategy.kind == DPC_STRATEGY_PIPELINE) &&
             (st = place(t, d))) {
    return st;
  } else if ((st = compile_graph(t, d))) {
    return st;
  }
  if (o->init_path && (st = dpc_train_load_params(t, o->init_path, d))) return st;
  if (o->resume_path && (st = dpc_train_load_checkpoint(t, d))) return st;
  if ((o->init_path || o->resume_path) && !t->replicas_loaded && (st = sync_replicas(t, d)))
    return st;
  /* the first 20 steps of the full-batch session (the steady state, a few times over) */
  /* every rank records its devices' steps; rank 0 writes them all */
  if (t->given->trace_path && (st = dpc_session_trace(t->train_full.s, 20, d))) return st;
  if (o->log_path && !(t->log = fopen(o->log_path, t->resumed ? "a" : "w")))
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot write the log '%s'", o->log_path);
  return DPC_OK;
}

/* ---- the loop ------------------------------------------------------------------------------- */

/* The loss is NaN or infinite: data that is not finite is the cause to name, else the rate. */
static dpc_status loss_not_finite(const trainer *t, const run_t *r, const uint64_t *idx, uint32_t n,
                                  double loss, dpc_diag *d) {
  dpc_tensor x = dpc_session_input(r->s, r->x);
  int64_t numel = dpc_tensor_numel(&x), row = n ? numel / n : 1, bad = -1;
  for (int64_t e = 0; e < numel && bad < 0; e++)
    if (!isfinite(dpc_tload(&x, e))) bad = e;
  const char *what = isnan(loss) ? "NaN" : "infinite";
  if (bad >= 0) {
    double v = dpc_tload(&x, bad);
    return dpc_diag_fail(
        d, DPC_ERR_INVALID,
        "the loss became %s at step %llu: the data is not finite: sample %llu of "
        "%s holds %s in input '%s'",
        what, (unsigned long long)t->step, (unsigned long long)idx[row > 0 ? bad / row : 0],
        dpc_dataset_name(t->train_ds), isnan(v) ? "NaN" : "an infinity", t->x_name);
  }
  return dpc_diag_fail(
      d, DPC_ERR_RUNTIME,
      "the loss became %s at step %llu (epoch %llu): the learning rate may be too high", what,
      (unsigned long long)t->step, (unsigned long long)t->epoch + 1);
}

/* A resumed run: say when the options end it elsewhere than its checkpoint planned, or where
 * it has nothing left to do. */
static void note_resume(const trainer *t) {
  const dpc_train_opts *o = t->o;
  if (!t->resumed || !o->on_note) return;
  uint64_t end = o->epochs * t->batches;
  if (o->steps && o->steps < end) end = o->steps;
  char msg[512];
  if (t->step >= end || t->epoch >= o->epochs)
    snprintf(msg, sizeof msg,
             "%s is at step %llu (%llu whole epoch%s done): nothing is left to train within "
             "--epochs %llu%s; raise them to go on",
             o->resume_path, (unsigned long long)t->step, (unsigned long long)t->epoch,
             t->epoch == 1 ? "" : "s", (unsigned long long)o->epochs,
             o->steps ? " and --steps" : "");
  else if (end != t->total_steps)
    snprintf(msg, sizeof msg,
             "resuming %s at step %llu: training to step %llu (by --epochs %llu%s), while the "
             "learning-rate schedule keeps the checkpoint's horizon of %llu steps",
             o->resume_path, (unsigned long long)t->step, (unsigned long long)end,
             (unsigned long long)o->epochs, o->steps ? " and --steps" : "",
             (unsigned long long)t->total_steps);
  else
    return;
  o->on_note(o->user, msg);
}

dpc_status dpc_train(const dpc_graph *src, const dpc_train_opts *o, dpc_diag *d) {
  return dpc_train_hooked(src, o, NULL, d);
}

/* Whether to stop before the next step (dpc_train_opts.cancel). Across ranks a signal reaches
 * the ranks at different moments, and they must stop at the same step: they agree, each asking
 * every other, once a step (an all-reduce of their flags). */
static bool stop_now(trainer *t, dpc_status *st, dpc_diag *d) {
  bool stop = dpc_train_cancelled(t);
  /* a rank lost here is lost before the next step: the message names it */
  if (t->peers && !*st && (*st = dpc_train_mpi_any(t, &stop, d)))
    dpc_diag_prefix(d, "step %llu: ", (unsigned long long)t->step + 1);
  return stop;
}

dpc_status dpc_train_hooked(const dpc_graph *src, const dpc_train_opts *o,
                            const dpc_train_test_hooks *hooks, dpc_diag *d) {
  trainer t;
  memset(&t, 0, sizeof t);
  t.o = t.given = o;
  t.test = hooks;
  dpc_status st = DPC_OK;
  if (dpc_driver_is_mpi(o->devices) && !(st = dpc_train_mpi_open(&t, d)) && t.rank > 0) {
    /* rank 0 reports and writes the files; the others train quietly beside it */
    t.quiet = *o;
    t.quiet.on_start = NULL, t.quiet.on_note = NULL, t.quiet.on_step = NULL;
    t.quiet.on_epoch = NULL, t.quiet.on_stop = NULL;
    t.quiet.log_path = t.quiet.trace_path = t.quiet.save_path = NULL;
    t.quiet.checkpoint_path = t.quiet.stop_checkpoint_path = NULL;
    t.o = o = &t.quiet;
  }
  /* GPUs: their host threads are planned as cpu:N is, and the session opens cuda:0..N-1 */
  dpc_train_opts on_gpus;
  char cpu_spec[32];
  dpc_strategy_kind sk = DPC_STRATEGY_DATA;
  if (o->strategy) (void)dpc_strategy_kind_parse(o->strategy, &sk);
  bool mixed = false;
  (void)dpc_driver_gpus(o->devices, &mixed);
  if (!st && mixed && sk != DPC_STRATEGY_MODEL && sk != DPC_STRATEGY_PIPELINE)
    st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                       "%s: the CPU beside GPUs trains the model split between them (the model or "
                       "pipeline strategy); data parallel replicas would all wait for the slowest",
                       o->devices);
  if (!st)
    st = dpc_driver_gpu_spec(o->exec.backend, o->devices, cpu_spec, sizeof cpu_spec,
                             &t.host_devices, d);
  if (!st && cpu_spec[0] && (o->async || o->local_sgd))
    st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                       "%s: across GPUs dpc trains synchronously (data, model, hybrid, pipeline); "
                       "asynchronous training and local SGD run on CPU devices",
                       o->devices);
  if (!st && cpu_spec[0]) {
    on_gpus = *o;
    on_gpus.devices = cpu_spec;
    t.o = o = &on_gpus;
  }
  if (!st) st = setup(&t, src, d);
  if (!st) note_resume(&t);
  bool stopped = false; /* asked to stop: checked between steps, never inside one */
  while (!st && t.epoch < o->epochs && (!o->steps || t.step < o->steps)) {
    if ((stopped = stop_now(&t, &st, d)) || st) break;
    dpc_order_epoch(&t.order, t.epoch);
    dpc_train_epoch ep = {.epoch = t.epoch};
    double epoch_time = 0, loss_sum = 0;
    uint64_t samples = 0;
    if (o->async) { /* the workers run the epoch; the server's updates are the steps */
      if ((st = dpc_train_async_epoch(&t, &ep, d))) break;
      epoch_time = ep.seconds, loss_sum = ep.train_loss, samples = 1;
    }
    for (; !o->async && t.batch_pos < t.batches && (!o->steps || t.step < o->steps);
         t.batch_pos++) {
      if (stop_now(&t, &st, d) || st) break;
      uint32_t n;
      const uint64_t *idx = dpc_order_batch(&t.order, t.batch, t.batch_pos, &n);
      run_t *r;
      /* a step's time starts after its session is found: the partial last batch's is opened
       * once, on first use, and its planning and compiling are not a step's work */
      if ((st = run_for(&t, true, n, &r, d))) break;
      double t0 = dpc_now_s();
      /* across ranks, a batch that runs on the first device alone runs on rank 0 */
      bool idle = t.peers && !r->across && t.rank > 0;
      if (!idle && (st = feed(r, t.train_ds, idx, n, d))) break;
      /* the step counter seeds dropout: the same step draws the same mask after a resume */
      dpc_session_set_step(r->s, t.step);
      if (!idle && (st = dpc_session_run(r->s, d))) {
        dpc_diag_prefix(d, "step %llu: ", (unsigned long long)t.step + 1);
        break;
      }
      if (!r->across && t.peers && (st = dpc_train_mpi_share(&t, d))) {
        dpc_diag_prefix(d, "step %llu: ", (unsigned long long)t.step + 1);
        break;
      }
      /* a model split over the ranks: its loss and rate from the ranks that compute them */
      if (r->split && ((st = dpc_train_mpi_fetch(&t, r, r->loss, d)) ||
                       (st = dpc_train_mpi_fetch(&t, r, r->lr, d)))) {
        dpc_diag_prefix(d, "step %llu: ", (unsigned long long)t.step + 1);
        break;
      }
      /* a batch that ran on the first device alone: the other replicas catch up */
      if (!r->parallel && (st = sync_replicas(&t, d))) break;
      /* local SGD: the replicas meet every local_sgd steps and at the end of an epoch */
      if (o->local_sgd && r->parallel &&
          ((t.step + 1) % o->local_sgd == 0 || t.batch_pos + 1 == t.batches) &&
          (st = average_replicas(&t, d)))
        break;
      double dt = dpc_now_s() - t0;
      t.step++;
      dpc_train_step s = {t.step,
                          t.epoch,
                          t.batch_pos + 1,
                          t.batches,
                          scalar(r, r->loss),
                          scalar(r, r->lr),
                          dt > 0 ? n / dt : 0,
                          n};
      if (!idle && (isnan(s.loss) || isinf(s.loss))) {
        st = loss_not_finite(&t, r, idx, n, s.loss, d);
        break;
      }
      epoch_time += dt;
      loss_sum += s.loss * n;
      samples += n;
      if (t.log) dpc_train_log_step(&t, &s);
      if (o->on_step) o->on_step(o->user, &s);
      bool last = t.batch_pos + 1 == t.batches;
      if (t.given->checkpoint_every && t.given->checkpoint_path &&
          t.step % t.given->checkpoint_every == 0) {
        /* position after this batch */
        uint64_t e = t.epoch, b = t.batch_pos + 1;
        if (last) e++, b = 0;
        if ((st = dpc_train_mpi_gather(&t, d)) || (st = dpc_train_save_checkpoint(&t, e, b, d)))
          break;
      }
    }
    if (st) break;
    /* stopped: the position stays where the steps got to (a finished epoch is evaluated and
     * counted by the resumed run), and a partial epoch gets no summary */
    if ((stopped = stop_now(&t, &st, d)) || st) break;
    bool finished = t.batch_pos == t.batches;
    ep.step = t.step;
    if (!o->async) {
      ep.train_loss = samples ? loss_sum / (double)samples : NAN;
      ep.seconds = epoch_time;
      ep.samples_per_s = epoch_time > 0 ? (double)samples / epoch_time : 0;
    }
    if (finished && t.test_ds && (st = dpc_train_mpi_gather(&t, d))) break;
    if (finished && t.test_ds && t.eval_full.s && (st = evaluate(&t, &ep, d))) break;
    if (finished || samples) {
      if (t.log) dpc_train_log_epoch(&t, &ep);
      if (o->on_epoch) o->on_epoch(o->user, &ep);
    }
    if (finished) {
      t.epoch++;
      t.batch_pos = 0;
    }
  }
  if (!st && stopped && (t.given->checkpoint_path || t.given->stop_checkpoint_path))
    st = dpc_train_mpi_gather(&t, d);
  if (!st && stopped) {
    const char *ck = o->checkpoint_path ? o->checkpoint_path : o->stop_checkpoint_path;
    if (ck) st = dpc_train_save_checkpoint_to(&t, ck, t.epoch, t.batch_pos, d);
    dpc_train_stop s = {t.step, t.epoch, t.batch_pos, t.batches, ck};
    if (!st && o->on_stop) o->on_stop(o->user, &s);
  }
  if (!st && !stopped && (t.given->checkpoint_path || t.given->save_path))
    st = dpc_train_mpi_gather(&t, d);
  if (!st && !stopped && o->checkpoint_path)
    st = dpc_train_save_checkpoint(&t, t.epoch, t.batch_pos, d);
  if (!st && !stopped && o->save_path) st = dpc_train_save_params(&t, o->save_path, d);
  if (!st && t.given->trace_path) st = dpc_train_write_trace(&t, d);
  trainer_free(&t);
  dpc_train_mpi_close(&t);
  return st;
}
