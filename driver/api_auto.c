/*
 * api_auto.c — `--strategy auto`: the strategies the devices allow, each planned and predicted
 * by the cost model and the simulator (dpc_net_plan), those over the memory limit dropped, the
 * fastest predicted step chosen, and for every other one the reason it lost, in numbers
 * (include/dpc/plan.h, dpc_net_plan_auto).
 *
 * The search is pruned rather than exhaustive: pipelines take each divisor of the devices as
 * their stage count and grow their micro-batches (S, 2S, 4S) only while that shortens the
 * predicted step; GPipe's order is tried only for the best 1F1B pipeline (the same bubble, more
 * memory); accumulation only when there is a memory limit to get under. So the candidates grow
 * with the divisors of the device count, not with their combinations.
 */
#include "driver/api_internal.h"
#include "driver/bench.h"
#include "runtime/topology.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_KINDS                                                                                 \
  ((1u << DPC_STRATEGY_SINGLE) | (1u << DPC_STRATEGY_DATA) | (1u << DPC_STRATEGY_MODEL) |          \
   (1u << DPC_STRATEGY_HYBRID) | (1u << DPC_STRATEGY_PIPELINE))

typedef struct search {
  const dpc_net *net;
  uint32_t batch, devices;
  const char *spec;
  uint64_t limit;
  const dpc_cost_profile *profile; /* NULL: the cost model as calibrated */
  dpc_auto_candidate *c;
  uint32_t n, cap;
} search;

static double mib(double bytes) {
  return bytes / (1024.0 * 1024.0);
}

/* Plan one candidate (its text form) and record its figures, or why it has none. */
static dpc_status try_candidate(search *s, const char *text, dpc_auto_candidate **out,
                                dpc_diag *d) {
  *out = NULL;
  if (DPC_VEC_RESERVE(s->c, s->cap, s->n + 1))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_auto_candidate *c = &s->c[s->n++];
  memset(c, 0, sizeof *c);
  snprintf(c->strategy, sizeof c->strategy, "%s", text);
  *out = c;
  dpc_strategy_args a;
  dpc_strategy_args_init(&a);
  a.text = text, a.devices = s->devices, a.batch = s->batch, a.kinds = PLAN_KINDS;
  a.memory_limit = s->limit;
  dpc_strategy ps;
  dpc_diag m;
  dpc_diag_init(&m);
  if (dpc_strategy_parse(&a, &ps, NULL, &m)) {
    snprintf(c->reason, sizeof c->reason, "not possible here: %s", m.msg ? m.msg : "invalid");
    dpc_diag_free(&m);
    return DPC_OK;
  }
  c->kind = ps.kind;
  dpc_plan_opts o = {sizeof o, .batch = s->batch, .devices = s->spec, .strategy = &ps,
                     .memory_limit = s->limit};
  dpc_plan_report *r = NULL;
  dpc_status st = dpc_api_plan_profiled(s->net, &o, s->profile, &r, &m);
  if (st && s->limit) {
    /* over the limit? the same plan without it says by how much */
    char why[200];
    snprintf(why, sizeof why, "%s", m.msg ? m.msg : "");
    dpc_plan_report_free(r);
    r = NULL;
    dpc_diag_clear(&m);
    o.memory_limit = 0;
    ps.memory_limit = 0;
    if (!dpc_api_plan_profiled(s->net, &o, s->profile, &r, &m)) {
      c->planned = true;
      c->fits = false;
      snprintf(c->reason, sizeof c->reason, "does not fit: %s", why);
    } else {
      snprintf(c->reason, sizeof c->reason, "not planned: %s", why);
    }
  } else if (st) {
    snprintf(c->reason, sizeof c->reason, "not planned: %s", m.msg ? m.msg : "failed");
  } else {
    c->planned = c->fits = true;
  }
  dpc_diag_free(&m);
  if (c->planned && r && r->n_devices) {
    c->step_ms = r->step_ms;
    c->samples_per_s = r->samples_per_s;
    c->comm_bytes = r->bytes_moved;
    c->bubble_pct = r->stages ? r->bubble_pct : 0;
    double busiest = -1;
    for (uint32_t i = 0; i < r->n_devices; i++) {
      const dpc_plan_report_device *dv = &r->devices[i];
      if (dv->memory_bytes > c->max_memory_bytes) {
        c->max_memory_bytes = dv->memory_bytes;
        snprintf(c->max_memory_device, sizeof c->max_memory_device, "%s", dv->name);
      }
      if (dv->compute_ms + dv->comm_ms > busiest) {
        busiest = dv->compute_ms + dv->comm_ms;
        c->busiest_compute_ms = dv->compute_ms, c->busiest_comm_ms = dv->comm_ms;
        snprintf(c->busiest_device, sizeof c->busiest_device, "%s", dv->name);
      }
    }
  } else {
    c->planned = false;
  }
  dpc_plan_report_free(r);
  return DPC_OK;
}

/* Why candidate c lost to the best, in numbers. */
static void explain(dpc_auto_candidate *c, const dpc_auto_candidate *best) {
  if (!c->planned || !c->fits) return; /* the reason is set already */
  double slower = best->step_ms > 0 ? 100 * (c->step_ms / best->step_ms - 1) : 0;
  char lead[160];
  if (c->bubble_pct >= 15)
    snprintf(lead, sizeof lead, "pipeline bubble: the devices idle %.0f%% of the step",
             c->bubble_pct);
  else if (c->busiest_comm_ms > 0.3 * c->step_ms && c->comm_bytes > 0)
    snprintf(lead, sizeof lead,
             "communication-bound: %.1f MB a step, %.2f ms of the %.2f ms step on %s",
             c->comm_bytes / 1e6, c->busiest_comm_ms, c->step_ms, c->busiest_device);
  else if (c->kind == DPC_STRATEGY_SINGLE)
    snprintf(lead, sizeof lead, "one device computes the whole step (%.2f ms)",
             c->busiest_compute_ms);
  else
    snprintf(lead, sizeof lead, "compute-bound: %s computes %.2f ms of the %.2f ms step",
             c->busiest_device, c->busiest_compute_ms, c->step_ms);
  snprintf(c->reason, sizeof c->reason, "%s; %+.0f%% against %s", lead, slower, best->strategy);
}

/* Run candidate c for `steps` timed steps as a benchmark trains it. */
static void measure_one(const search *s, dpc_auto_candidate *c, uint32_t steps) {
  dpc_strategy_args a;
  dpc_strategy_args_init(&a);
  a.text = c->strategy, a.devices = s->devices, a.batch = s->batch, a.kinds = PLAN_KINDS;
  a.memory_limit = s->limit;
  dpc_strategy ps;
  dpc_diag m;
  dpc_diag_init(&m);
  double median = 0;
  dpc_status st = dpc_strategy_parse(&a, &ps, NULL, &m);
  if (!st)
    st = dpc_api_measure_strategy(s->net, &ps, s->devices, s->spec, s->batch, steps, &median, &m);
  if (!st) {
    c->measured = true;
    c->measured_ms = median * 1e3;
    c->error_pct = (c->step_ms - c->measured_ms) / c->measured_ms * 100;
  } else {
    snprintf(c->measure_note, sizeof c->measure_note, "not measured: %s",
             m.msg ? m.msg : "the benchmark failed");
  }
  dpc_diag_free(&m);
}

/* The best predicted `top` that fit, measured; the fastest measured becomes the choice. */
static void measure_top(const search *s, dpc_auto_report *r, uint32_t top, uint32_t steps) {
  uint32_t fastest = r->n_candidates;
  for (uint32_t i = 0; i < r->n_candidates && r->n_measured < top; i++) {
    dpc_auto_candidate *c = &r->candidates[i];
    if (!c->planned || !c->fits) break; /* the runnable ones come first */
    measure_one(s, c, steps);
    if (!c->measured) continue;
    r->n_measured++;
    if (fastest == r->n_candidates || c->measured_ms < r->candidates[fastest].measured_ms)
      fastest = i;
  }
  if (fastest == r->n_candidates || fastest == r->best) return;
  /* the measurement reverses the prediction: the machine decides, and says so */
  dpc_auto_candidate *was = &r->candidates[r->best], *now = &r->candidates[fastest];
  r->by_measurement = true;
  char why[320];
  snprintf(why, sizeof why,
           "the fastest measured step: %.3f ms against %.3f ms measured for %s, which was "
           "predicted faster (%.3f against %.3f ms)",
           now->measured_ms, was->measured ? was->measured_ms : NAN, was->strategy, was->step_ms,
           now->step_ms);
  snprintf(was->reason, sizeof was->reason,
           "measured slower: %.3f ms against %.3f ms for %s, though predicted faster",
           was->measured ? was->measured_ms : NAN, now->measured_ms, now->strategy);
  snprintf(now->reason, sizeof now->reason, "%s", why);
  r->best = fastest;
}

/* (b, m) added to the list unless it is there already. */
static void want(uint32_t *batch, uint32_t *micro, uint32_t *n, uint32_t cap, uint32_t b,
                 uint32_t m) {
  for (uint32_t j = 0; j < *n; j++)
    if (batch[j] == b && micro[j] == m) return;
  if (*n < cap) batch[*n] = b, micro[(*n)++] = m;
}

/* The batch one replica runs and in how many micro-batches, for every candidate the search may
 * try: the whole batch (single, model), its data-parallel and hybrid shares, a pipeline's share
 * in its micro-batches (whose kernels are the micro-batch's, and its sums of gradients over
 * them), accumulation's. */
static uint32_t kernel_batches(const search *s, uint32_t *batch, uint32_t *micro, uint32_t cap) {
  uint32_t n = 0, B = s->batch, D = s->devices;
  want(batch, micro, &n, cap, B, 1);
  if (D > 1 && B % D == 0) want(batch, micro, &n, cap, B / D, 1);
  for (uint32_t mp = 2; mp < D; mp++)
    if (D % mp == 0 && B % (D / mp) == 0) want(batch, micro, &n, cap, B / (D / mp), 1);
  for (uint32_t st = 2; st <= D; st++) {
    if (D % st) continue;
    for (uint32_t k = 1; k <= 4; k *= 2)
      if (B % ((D / st) * st * k) == 0) want(batch, micro, &n, cap, B / (D / st), st * k);
  }
  for (uint32_t k = 2; k <= 8 && s->limit; k *= 2)
    if (B % (D * k) == 0) want(batch, micro, &n, cap, B / D, k);
  return n;
}

/* Time the model's kernels on one device's cores at each batch its candidates run: the cost model
 * is then corrected kernel by kernel, at the sizes each candidate's devices compute. */
static dpc_status profile_kernels(const search *s, dpc_auto_report *r, dpc_diag *d) {
  double t0 = dpc_now_s();
  r->profile = calloc(1, sizeof *r->profile);
  if (!r->profile) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  r->n_profile_batches = kernel_batches(s, r->profile_batches, r->profile_microbatches,
                                        sizeof r->profile_batches / sizeof *r->profile_batches);
  /* timed on the cores of one device, as the plan's devices will run them */
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_status st = dpc_topology_load(NULL, &t, d);
  if (!st) st = dpc_devices_parse(t, s->spec ? s->spec : "cpu", &l, d);
  uint32_t threads = st || !l.n ? 1 : l.devs[0].n_cores;
  r->profile_threads = threads;
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  for (uint32_t i = 0; i < r->n_profile_batches && !st; i++) {
    dpc_cost_profile one;
    uint32_t nk = 0;
    /* the first (the whole batch) keeps its sums by op for the report */
    st = dpc_bench_cost_profile(s->net->g, r->profile_batches[i], r->profile_microbatches[i],
                                threads, i ? &one : r->profile, &nk, d);
    if (!st) r->profile_kernels += nk;
    if (!st && i) {
      if (dpc_cost_profile_merge(r->profile, &one))
        st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
      dpc_cost_profile_free(&one);
    }
  }
  r->profile_seconds = dpc_now_s() - t0;
  return st;
}

static int by_step(const void *a, const void *b) {
  const dpc_auto_candidate *x = a, *y = b;
  int rx = x->planned && x->fits, ry = y->planned && y->fits;
  if (rx != ry) return ry - rx; /* runnable ones first */
  if (!rx) return 0;
  return (x->step_ms > y->step_ms) - (x->step_ms < y->step_ms);
}

DPC_COMPILER_API dpc_status dpc_net_plan_auto(const dpc_net *n, const dpc_auto_opts *o,
                                              dpc_auto_report **out, dpc_message *m) {
  *out = NULL;
  if (!DPC_API_HAS(o, memory_limit))
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "the automatic strategy's options are missing or "
                         "too short: set size to sizeof(dpc_auto_opts)");
  if (!dpc_net_trainable(n))
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "%s has nothing to minimize: strategies are chosen for training",
                         dpc_net_name(n));
  search s = {
      .net = n, .batch = o->batch ? o->batch : 64, .spec = o->devices, .limit = o->memory_limit};
  dpc_status st = dpc_devices_count(o->devices ? o->devices : "cpu", &s.devices, m);
  if (st) return st;
  double t0 = dpc_now_s();
  dpc_auto_report *r = calloc(1, sizeof *r);
  if (!r) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  if (DPC_API_HAS(o, profile) && o->profile) {
    st = profile_kernels(&s, r, m);
    if (st) {
      dpc_auto_report_free(r);
      return st;
    }
    s.profile = r->profile;
  }
  dpc_auto_candidate *c = NULL;
  char text[96];
  if (s.devices == 1) {
    st = try_candidate(&s, "single", &c, m);
  } else {
    st = try_candidate(&s, "data", &c, m);
    if (!st) st = try_candidate(&s, "model", &c, m);
    for (uint32_t mp = 2; mp < s.devices && !st; mp++) {
      if (s.devices % mp) continue;
      snprintf(text, sizeof text, "hybrid:mp=%u", mp);
      st = try_candidate(&s, text, &c, m);
    }
    /* pipelines: micro-batches grow while they shorten the step */
    double best_pipe = INFINITY;
    uint32_t best_s = 0, best_m = 0;
    for (uint32_t stages = 2; stages <= s.devices && !st; stages++) {
      if (s.devices % stages) continue;
      double prev = INFINITY;
      for (uint32_t k = 1; k <= 4 && !st; k *= 2) {
        uint32_t micro = stages * k;
        snprintf(text, sizeof text, "pipeline:stages=%u,dp=%u,microbatches=%u,schedule=1f1b",
                 stages, s.devices / stages, micro);
        st = try_candidate(&s, text, &c, m);
        if (st || !c->planned || !c->fits || c->step_ms >= prev) break;
        prev = c->step_ms;
        if (c->step_ms < best_pipe) best_pipe = c->step_ms, best_s = stages, best_m = micro;
      }
    }
    if (!st && best_s) {
      snprintf(text, sizeof text, "pipeline:stages=%u,dp=%u,microbatches=%u,schedule=gpipe", best_s,
               s.devices / best_s, best_m);
      st = try_candidate(&s, text, &c, m);
    }
  }
  /* a memory limit: the data-parallel step in smaller pieces */
  for (uint32_t k = 2; k <= 8 && s.limit && !st; k *= 2) {
    snprintf(text, sizeof text, "data:accumulate=%u", k);
    st = try_candidate(&s, text, &c, m);
  }
  if (st) {
    free(s.c);
    dpc_auto_report_free(r);
    return st;
  }
  qsort(s.c, s.n, sizeof *s.c, by_step);
  r->candidates = s.c;
  r->n_candidates = s.n;
  r->devices = s.devices;
  r->batch = s.batch;
  r->best = s.n && s.c[0].planned && s.c[0].fits ? 0 : s.n;
  if (r->best < s.n) {
    snprintf(s.c[0].reason, sizeof s.c[0].reason, "the fastest predicted step");
    for (uint32_t i = 1; i < s.n; i++) explain(&s.c[i], &s.c[0]);
    uint32_t top = DPC_API_HAS(o, measure_top) ? o->measure_top : 0;
    uint32_t steps = DPC_API_HAS(o, measure_steps) && o->measure_steps ? o->measure_steps : 30;
    if (top) measure_top(&s, r, top, steps);
  }
  r->seconds = dpc_now_s() - t0;
  *out = r;
  if (r->best == s.n && s.limit)
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "no strategy fits: none of the %u tried runs on %u device%s of %.1f MiB "
                         "each (the table says what each needs)",
                         s.n, s.devices, s.devices == 1 ? "" : "s", mib((double)s.limit));
  if (r->best == s.n)
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "no strategy could be planned on %u device%s (the table says why)",
                         s.devices, s.devices == 1 ? "" : "s");
  return DPC_OK;
}

DPC_COMPILER_API void dpc_auto_report_free(dpc_auto_report *r) {
  if (!r) return;
  free(r->candidates);
  if (r->profile) dpc_cost_profile_free(r->profile);
  free(r->profile);
  free(r);
}
