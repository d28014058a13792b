/*
 * api_cluster.c — plans for a described cluster (include/dpc/cluster.h): the cluster file read
 * and checked, and each strategy composed of one replica planned and simulated for real (the
 * described devices' speeds, the within-host link) and the all-reduce across replicas added by
 * its alpha-beta cost (partitioner/collective.h).
 *
 * The replica is planned as two replicas (when there are two or more), so its collectives are
 * the real ones data parallelism makes: their number and bytes per device, the gradients
 * bucketed as training buckets them. The two stand for all R: the simulator costs each of their
 * collectives as the all-reduce among R peers over the cluster's links, so its delay reaches
 * the rest of the step as it would with every replica there. The
 * search is that of --strategy auto, over what fits a host: replicas of mp devices for each mp
 * dividing a host's devices, pipelines of as many stages, micro-batches grown while they help,
 * accumulation only when plain data parallelism does not fit. So its time grows with the
 * divisors of a host's devices, not with the cluster.
 */
#include "driver/api_internal.h"
#include "partitioner/collective.h"
#include "partitioner/cost.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"

#include "codegen/cpu/cpu.h"

#include <dpc/cluster.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the cluster file -------------------------------------------------------------------- */

static double mib(double bytes) {
  return bytes / (1024.0 * 1024.0);
}

/* A positive number at key (path names it in errors). */
static dpc_status get_num(json_t *obj, const char *file, const char *path, const char *key,
                          double *out, dpc_diag *d) {
  json_t *v = json_object_get(obj, key);
  if (!v)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: '%s%s' is missing (a positive number)", file,
                         path, key);
  if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: '%s%s' must be a positive number", file, path,
                         key);
  *out = json_number_value(v);
  return DPC_OK;
}

static dpc_status get_count(json_t *obj, const char *file, const char *key, uint32_t *out,
                            dpc_diag *d) {
  json_t *v = json_object_get(obj, key);
  if (!v || !json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65536)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: '%s' must be a whole number from 1 to 65536%s",
                         file, key, v ? "" : " (it is missing)");
  *out = (uint32_t)json_integer_value(v);
  return DPC_OK;
}

/* Every key of obj among `known` (NULL-terminated): a misspelt key is an error, not a default. */
static dpc_status known_keys(json_t *obj, const char *file, const char *path,
                             const char *const *known, dpc_diag *d) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    bool ok = false;
    for (const char *const *k = known; *k && !ok; k++) ok = !strcmp(*k, key);
    if (!ok) return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: unknown key '%s%s'", file, path, key);
  }
  return DPC_OK;
}

static dpc_status get_link(json_t *links, const char *file, const char *key, dpc_cluster_link *l,
                           dpc_diag *d) {
  json_t *v = json_object_get(links, key);
  char path[64];
  snprintf(path, sizeof path, "links.%s.", key);
  if (!v || !json_is_object(v))
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s: 'links.%s' must be an object {\"gbs\": ..., \"latency_us\": ...}%s",
                         file, key, v ? "" : " (it is missing)");
  static const char *const keys[] = {"gbs", "latency_us", "about", NULL};
  dpc_status st = known_keys(v, file, path, keys, d);
  if (!st) st = get_num(v, file, path, "gbs", &l->gbs, d);
  json_t *lat = json_object_get(v, "latency_us");
  if (!st && (!lat || !json_is_number(lat) || json_number_value(lat) < 0))
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: '%slatency_us' must be a number from 0%s", file,
                       path, lat ? "" : " (it is missing)");
  if (!st) l->latency_us = json_number_value(lat);
  return st;
}

static dpc_status get_string(json_t *obj, const char *file, const char *path, const char *key,
                             char *out, size_t cap, dpc_diag *d) {
  json_t *v = json_object_get(obj, key);
  if (!v) return DPC_OK;
  if (!json_is_string(v) || strlen(json_string_value(v)) >= cap)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: '%s%s' must be a string of at most %zu bytes",
                         file, path, key, cap - 1);
  snprintf(out, cap, "%s", json_string_value(v));
  return DPC_OK;
}

/* A size at key: "80G" or a number of bytes. */
static dpc_status get_memory(json_t *obj, const char *file, const char *path, uint64_t *out,
                             dpc_diag *d) {
  json_t *mem = json_object_get(obj, "memory");
  if (mem && json_is_integer(mem) && json_integer_value(mem) > 0) {
    *out = (uint64_t)json_integer_value(mem);
    return DPC_OK;
  }
  if (mem && json_is_string(mem) && dpc_parse_size(json_string_value(mem), out)) return DPC_OK;
  return dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: '%smemory' must be a size such as \"80G\" or a number of bytes%s", file,
                       path, mem ? "" : " (it is missing)");
}

/* The optional "host" (the CPU beside a host's devices) and its link to them. */
static dpc_status read_host(json_t *root, json_t *links, const char *file, dpc_cluster *c,
                            dpc_diag *d) {
  static const char *const keys[] = {"name", "gflops", "mem_gbs", "memory", "about", NULL};
  json_t *h = json_object_get(root, "host");
  dpc_status st = DPC_OK;
  if (h && !json_is_object(h))
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: 'host' must be an object", file);
  if (!st && h) st = known_keys(h, file, "host.", keys, d);
  if (!st && h) st = get_string(h, file, "host.", "name", c->host_name, sizeof c->host_name, d);
  if (!st && h) st = get_num(h, file, "host.", "gflops", &c->host_gflops, d);
  if (!st && h) st = get_num(h, file, "host.", "mem_gbs", &c->host_mem_gbs, d);
  if (!st && h) st = get_memory(h, file, "host.", &c->host_memory, d);
  if (!st && json_object_get(links, "host_to_device"))
    st = get_link(links, file, "host_to_device", &c->host_link, d);
  return st;
}

static dpc_status read_cluster(json_t *root, const char *file, dpc_cluster *c, dpc_diag *d) {
  static const char *const top[] = {"name",   "about", "hosts", "devices_per_host",
                                    "device", "links", "host",  NULL};
  static const char *const dev_keys[] = {"kind",   "name",  "gflops", "mem_gbs",
                                         "memory", "about", NULL};
  static const char *const link_keys[] = {"within_host", "between_hosts", "host_to_device", "about",
                                          NULL};
  if (!json_is_object(root))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: a cluster file is a JSON object", file);
  dpc_status st = known_keys(root, file, "", top, d);
  if (!st) st = get_string(root, file, "", "name", c->name, sizeof c->name, d);
  if (!st) st = get_count(root, file, "hosts", &c->hosts, d);
  if (!st) st = get_count(root, file, "devices_per_host", &c->devices_per_host, d);
  json_t *dev = json_object_get(root, "device");
  if (!st && (!dev || !json_is_object(dev)))
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: 'device' must be an object%s", file,
                       dev ? "" : " (it is missing)");
  if (!st) st = known_keys(dev, file, "device.", dev_keys, d);
  snprintf(c->device_kind, sizeof c->device_kind, "gpu");
  if (!st) st = get_string(dev, file, "device.", "kind", c->device_kind, sizeof c->device_kind, d);
  if (!st && strcmp(c->device_kind, "gpu") && strcmp(c->device_kind, "cpu"))
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: 'device.kind' must be \"gpu\" or \"cpu\", not '%s'",
                       file, c->device_kind);
  if (!st) st = get_string(dev, file, "device.", "name", c->device_name, sizeof c->device_name, d);
  if (!st) st = get_num(dev, file, "device.", "gflops", &c->gflops, d);
  if (!st) st = get_num(dev, file, "device.", "mem_gbs", &c->mem_gbs, d);
  if (!st) st = get_memory(dev, file, "device.", &c->memory, d);
  json_t *links = st ? NULL : json_object_get(root, "links");
  if (!st && (!links || !json_is_object(links)))
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: 'links' must be an object%s", file,
                       links ? "" : " (it is missing)");
  if (!st) st = known_keys(links, file, "links.", link_keys, d);
  if (!st && c->devices_per_host > 1) st = get_link(links, file, "within_host", &c->within_host, d);
  if (!st && c->hosts > 1) st = get_link(links, file, "between_hosts", &c->between_hosts, d);
  if (!st) st = read_host(root, links, file, c, d);
  if (!st && !c->name[0]) snprintf(c->name, sizeof c->name, "%s", file);
  return st;
}

DPC_COMPILER_API dpc_status dpc_cluster_load(const char *path, dpc_cluster *out, dpc_message *m) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return dpc_diag_fail(m, DPC_ERR_INVALID, "%s:%d: not a cluster file: %s", path, je.line,
                         je.text);
  dpc_status st = read_cluster(root, path, out, m);
  json_decref(root);
  return st;
}

/* ---- one candidate: a replica planned, the all-reduce added ------------------------------ */

typedef struct cluster_ctx {
  const dpc_net *net;
  const dpc_cluster *c;
  uint32_t D, batch;
  uint64_t limit;
  dpc_device_speed speed[DPC_MAX_DEVICES];
  dpc_link_speed within, between;
  /* mixed plans: the host's CPU as device 0, the D devices after it; each one's memory */
  bool with_host;
  dpc_device_speed mixed[DPC_MAX_DEVICES];
  uint64_t mixed_limit[DPC_MAX_DEVICES];
} cluster_ctx;

/* Device i of candidate c's replica: its speeds start at base(), its memory limit. */
static const dpc_device_speed *base(const cluster_ctx *x, const dpc_cluster_candidate *c) {
  return c->with_host ? x->mixed : x->speed;
}
static uint64_t dev_limit(const cluster_ctx *x, const dpc_cluster_candidate *c, uint32_t i) {
  return c->with_host && i < DPC_MAX_DEVICES ? x->mixed_limit[i] : x->limit;
}
/* Its name in the report: host0/gpu:3; a mixed replica's host0/cpu, then host0/gpu:0, ... */
static void dev_name(const cluster_ctx *x, const dpc_cluster_candidate *c, uint32_t i, char *out,
                     size_t cap) {
  const char *kind = x->c->device_kind[0] ? x->c->device_kind : "gpu";
  if (c->with_host && i == 0)
    snprintf(out, cap, "host0/cpu");
  else
    snprintf(out, cap, "host0/%.3s:%u", kind, c->with_host ? i - 1 : i);
}

/* What a candidate's plan says beyond its row of the table: one replica's devices. */
typedef struct cluster_detail {
  dpc_plan_report_device *dev;
  uint32_t n, allreduces, replica_batch;
  double ar_bytes, ar_sent;
  uint32_t per_host, hosts;
} cluster_detail;

/* The plan of `reps` replicas of mp devices at `share` samples each (the model placed over the
 * mp devices first), as training would make it. */
static dpc_status replica_plan(const cluster_ctx *x, const dpc_cluster_candidate *c, uint32_t reps,
                               uint32_t share, dpc_plan **out, dpc_diag *d) {
  dpc_graph *g = dpc_graph_clone(x->net->g);
  if (!g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = DPC_OK;
  bool own = false; /* the model's own placement */
  for (uint32_t i = 0; i < g->n_nodes && !own; i++) own = g->nodes[i].device != DPC_NONE;
  dpc_pipeline_schedule sched = c->schedule;
  if (c->mp > 1 && !own) {
    dpc_driver_place_opts po = {x->limit, NULL, c->microbatches, sched};
    if (c->with_host) po.mem_limits = x->mixed_limit;
    st = dpc_driver_place_on(g, share, c->mp, base(x, c), &po, NULL, d);
  }
  if (!st) st = dpc_driver_default_horizon(g, d);
  dpc_pass_opts po = {.training = true, .fuse = dpc_cpu_fusion()};
  if (!st) st = dpc_passes_run(g, &po, d);
  dpc_driver_strategy ds = {reps, c->mp, c->microbatches, sched, false};
  if (!st) st = dpc_driver_plan_share(g, (int64_t)share * reps, share, &ds, true, out, d);
  dpc_graph_free(g);
  return st;
}

/* Simulate plan p at the given speeds: its step and each device's figures. */
static dpc_status simulate(const dpc_device_speed *speed, const dpc_plan *p, dpc_sim_device *sum,
                           double *step, dpc_diag *d) {
  dpc_node_cost *cost = calloc(p->g->n_nodes ? p->g->n_nodes : 1, sizeof *cost);
  dpc_status st =
      cost ? dpc_cost_graph(p->g, cost, d) : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) *step = dpc_simulate_step(p, cost, speed, sum);
  free(cost);
  return st;
}

/* Plan candidate c (kind, mp, microbatches set), composed: figures into c, the replica's
 * devices into det (may be NULL). A candidate that cannot be planned says why in c->reason. */
static dpc_status evaluate(const cluster_ctx *x, dpc_cluster_candidate *c, cluster_detail *det,
                           dpc_diag *d) {
  const dpc_cluster *cl = x->c;
  uint32_t mp = c->mp ? c->mp : 1, M = c->microbatches ? c->microbatches : 1;
  c->mp = mp, c->microbatches = M;
  uint32_t R = c->with_host ? 1 : x->D / mp;
  c->replicas = R;
  if (!c->with_host && (x->D % mp || (mp > 1 && cl->devices_per_host % mp && R > 1) ||
                        (R == 1 && mp > cl->devices_per_host))) {
    snprintf(c->reason, sizeof c->reason,
             "not possible here: a replica of %u devices does not fit in hosts of %u", mp,
             cl->devices_per_host);
    return DPC_OK;
  }
  if (mp > DPC_MAX_DEVICES / 2) {
    snprintf(c->reason, sizeof c->reason, "not possible here: a replica of %u devices is over %u",
             mp, DPC_MAX_DEVICES / 2);
    return DPC_OK;
  }
  if (x->batch % R || (x->batch / R) % M) {
    snprintf(c->reason, sizeof c->reason,
             "not possible here: the batch of %u does not split into %u replicas of %u "
             "micro-batches",
             x->batch, R, M);
    return DPC_OK;
  }
  uint32_t share = x->batch / R, reps = R > 1 ? 2 : 1;
  dpc_plan *p = NULL;
  dpc_sim_device *sum = NULL;
  double step = 0;
  dpc_diag m;
  dpc_diag_init(&m);
  /* the all-reduce across R replicas: each replica device with its peers of the other
   * replicas, host-major, so a host holds per_host of them; the two replicas planned stand for
   * them all, their collectives costed as the cluster's */
  uint32_t per_host = R > 1 ? cl->devices_per_host / mp : 1;
  if (per_host > R) per_host = R;
  if (per_host < 1) per_host = 1;
  uint32_t hosts = R / per_host;
  dpc_device_speed speed[DPC_MAX_DEVICES];
  for (uint32_t i = 0; i < DPC_MAX_DEVICES; i++) {
    speed[i] = base(x, c)[i];
    speed[i].coll_per_host = per_host, speed[i].coll_hosts = hosts;
    speed[i].between_gbs = x->between.gbs, speed[i].between_latency_s = x->between.latency_s;
  }
  dpc_status st = replica_plan(x, c, reps, share, &p, &m);
  if (!st) {
    sum = calloc(p->n_devs, sizeof *sum);
    st = sum ? simulate(speed, p, sum, &step, &m)
             : dpc_diag_fail(&m, DPC_ERR_NOMEM, "out of memory");
  }
  if (st == DPC_ERR_NOMEM) {
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  } else if (st) {
    snprintf(c->reason, sizeof c->reason, "not planned: %s", m.msg ? m.msg : "failed");
    st = DPC_OK;
  } else {
    double worst_all = 0, most_bytes = 0, sent = 0;
    uint32_t colls = 0;
    uint64_t mem = 0;
    /* each replica device's collectives across all replicas: time, and bytes as the simulator
     * counted them received and as the ring sends them */
    double *all_s = calloc(mp, sizeof *all_s);
    double *two_b = calloc(mp, sizeof *two_b), *all_b = calloc(mp, sizeof *all_b);
    if (!all_s || !two_b || !all_b) {
      free(all_s), free(two_b), free(all_b);
      free(sum);
      dpc_plan_free(p);
      dpc_diag_free(&m);
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < mp && i < p->n_devs; i++) {
      double all = 0, bytes = 0;
      uint32_t n = 0;
      for (uint32_t j = 0; j < p->devs[i].n_steps; j++) {
        const dpc_step *s = &p->devs[i].steps[j];
        if (s->kind != DPC_STEP_KERNEL || !dpc_op_has(p->g->nodes[s->node].op, DPC_OPF_COMM))
          continue;
        const dpc_node *nd = &p->g->nodes[s->node];
        double b = (double)p->slots[nd->out].bytes;
        all += dpc_allreduce_seconds(b, per_host, hosts, &x->within, &x->between);
        two_b[i] += b * 2.0 * (p->n_devs - 1) / p->n_devs;
        all_b[i] += dpc_allreduce_bytes(b, per_host, hosts);
        bytes += b, n++;
      }
      all_s[i] = all;
      if (all > worst_all) worst_all = all;
      if (bytes > most_bytes) most_bytes = bytes, colls = n;
      if ((uint64_t)p->devs[i].bytes > mem) mem = p->devs[i].bytes;
    }
    sent = dpc_allreduce_bytes(most_bytes, per_host, hosts);
    c->planned = true;
    c->step_ms = step * 1e3;
    c->replica_ms = (step - worst_all) * 1e3; /* the rest of the step */
    c->allreduce_ms = R > 1 ? worst_all * 1e3 : 0;
    c->samples_per_s = c->step_ms > 0 ? x->batch / (c->step_ms / 1e3) : 0;
    c->max_memory_bytes = mem;
    c->fits = true;
    for (uint32_t i = 0; i < mp && i < p->n_devs && c->fits; i++) {
      uint64_t lim = dev_limit(x, c, i);
      if (!lim || (uint64_t)p->devs[i].bytes <= lim) continue;
      char name[32];
      dev_name(x, c, i, name, sizeof name);
      c->fits = false;
      snprintf(c->reason, sizeof c->reason,
               "does not fit: %s needs %.1f MiB, more than its %.1f MiB",
               c->with_host ? name : "a device", mib((double)p->devs[i].bytes), mib((double)lim));
    }
    double busy = 0;
    for (uint32_t i = 0; i < mp && i < p->n_devs; i++) busy += sum[i].compute_s + sum[i].comm_s;
    c->bubble_pct =
        c->kind == DPC_STRATEGY_PIPELINE && step > 0 ? 100 * (1 - busy / (mp * step)) : 0;
    if (c->bubble_pct < 0) c->bubble_pct = 0;
    if (c->with_host && c->fits && p->n_devs) /* the CPU's part, and what crosses PCIe to it */
      snprintf(c->reason, sizeof c->reason,
               "the CPU computes %.3f ms of the %.3f ms step; %.2f MB a step cross to it",
               sum[0].compute_s * 1e3, c->step_ms, sum[0].comm_bytes / 1e6);
    if (det) {
      det->dev = calloc(mp, sizeof *det->dev);
      if (!det->dev) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
      for (uint32_t i = 0; !st && i < mp && i < p->n_devs; i++) {
        dpc_plan_report_device *v = &det->dev[i];
        dev_name(x, c, i, v->name, sizeof v->name);
        v->kernels = sum[i].kernels, v->collectives = sum[i].comms;
        v->compute_ms = sum[i].compute_s * 1e3;
        /* its all-reduce across the replicas; its values crossing devices within the replica
         * and its all-reduce's bytes */
        v->comm_ms = R > 1 ? all_s[i] * 1e3 : 0;
        v->memory_bytes = p->devs[i].bytes;
        v->comm_bytes = sum[i].comm_bytes - two_b[i] + (R > 1 ? all_b[i] : 0);
        v->stage = 0;
      }
      det->n = mp, det->allreduces = R > 1 ? colls : 0, det->replica_batch = share;
      det->ar_bytes = R > 1 ? most_bytes : 0, det->ar_sent = R > 1 ? sent : 0;
      det->per_host = per_host, det->hosts = hosts;
    }
    free(all_s), free(two_b), free(all_b);
  }
  free(sum);
  dpc_plan_free(p);
  dpc_diag_free(&m);
  return st;
}

/* ---- the search -------------------------------------------------------------------------- */

typedef struct cands {
  dpc_cluster_candidate *c;
  cluster_detail *det; /* each one's devices, kept for the one chosen */
  uint32_t n, cap, cap_det;
} cands;

/* A strategy's text form into a candidate (kind, mp, micro-batches); false with why. "+cpu"
 * after model or pipeline puts the host's CPU beside the D devices (with_host: it is there). */
static bool parse_strategy(const char *text, uint32_t D, bool with_host, dpc_cluster_candidate *c,
                           char *why, size_t cap) {
  memset(c, 0, sizeof *c);
  snprintf(c->strategy, sizeof c->strategy, "%s", text);
  char kind[32];
  size_t k = strcspn(text, ":");
  snprintf(kind, sizeof kind, "%.*s", (int)(k < sizeof kind - 1 ? k : sizeof kind - 1), text);
  size_t klen = strlen(kind);
  if (klen > 4 && !strcmp(kind + klen - 4, "+cpu")) {
    kind[klen - 4] = 0;
    c->with_host = true;
    if (strcmp(kind, "model") && strcmp(kind, "pipeline")) {
      snprintf(why, cap, "'%s': the host's CPU joins model or pipeline (model+cpu, pipeline+cpu)",
               text);
      return false;
    }
    if (!with_host) {
      snprintf(why, cap,
               "'%s' plans on the host's CPU beside the devices: the plan is not given the CPU",
               text);
      return false;
    }
  }
  if (!dpc_strategy_kind_parse(kind, &c->kind) ||
      (c->kind != DPC_STRATEGY_DATA && c->kind != DPC_STRATEGY_MODEL &&
       c->kind != DPC_STRATEGY_HYBRID && c->kind != DPC_STRATEGY_PIPELINE)) {
    snprintf(why, cap, "'%s': a cluster is planned for data, model, hybrid or pipeline", kind);
    return false;
  }
  c->mp = c->with_host ? D + 1 : c->kind == DPC_STRATEGY_MODEL ? D : 1;
  c->microbatches = 1;
  const char *s = text[k] ? text + k + 1 : "";
  c->schedule = c->kind == DPC_STRATEGY_PIPELINE ? DPC_SCHEDULE_1F1B : DPC_SCHEDULE_NONE;
  bool micro_given = false;
  while (*s) {
    char key[32], val[32];
    size_t kl = strcspn(s, "="), vl;
    if (!s[kl] || kl >= sizeof key) {
      snprintf(why, cap, "'%s': settings are key=value, separated by commas", text);
      return false;
    }
    snprintf(key, sizeof key, "%.*s", (int)kl, s);
    s += kl + 1;
    vl = strcspn(s, ",");
    snprintf(val, sizeof val, "%.*s", (int)(vl < sizeof val - 1 ? vl : sizeof val - 1), s);
    s += vl + (s[vl] == ',');
    char *end;
    unsigned long v = strtoul(val, &end, 10);
    bool num = end != val && !*end && v >= 1 && v <= 65536;
    if (!strcmp(key, "schedule") && c->kind == DPC_STRATEGY_PIPELINE &&
        (!strcmp(val, "1f1b") || !strcmp(val, "gpipe"))) {
      c->schedule = strcmp(val, "gpipe") ? DPC_SCHEDULE_1F1B : DPC_SCHEDULE_GPIPE;
      continue;
    }
    if (!num) {
      snprintf(why, cap, "'%s': %s=%s is not a setting of %s (a whole number from 1)", text, key,
               val, kind);
      return false;
    }
    if ((!strcmp(key, "mp") && c->kind == DPC_STRATEGY_HYBRID) ||
        (!strcmp(key, "stages") && c->kind == DPC_STRATEGY_PIPELINE && !c->with_host))
      c->mp = (uint32_t)v;
    else if ((!strcmp(key, "accumulate") && c->kind == DPC_STRATEGY_DATA) ||
             (!strcmp(key, "microbatches") && c->kind == DPC_STRATEGY_PIPELINE))
      c->microbatches = (uint32_t)v, micro_given = true;
    else {
      snprintf(why, cap, "'%s': %s is not a setting of %s here", text, key, kind);
      return false;
    }
  }
  if ((c->kind == DPC_STRATEGY_HYBRID || c->kind == DPC_STRATEGY_PIPELINE) && c->mp < 2) {
    snprintf(why, cap, "'%s': %s needs %s=K of 2 or more", text, kind,
             c->kind == DPC_STRATEGY_HYBRID ? "mp" : "stages");
    return false;
  }
  if (c->kind == DPC_STRATEGY_PIPELINE && !micro_given) c->microbatches = 4; /* as dpc plan */
  return true;
}

static dpc_status add(const cluster_ctx *x, cands *cs, const char *text,
                      dpc_cluster_candidate **out, dpc_diag *d) {
  if (DPC_VEC_RESERVE(cs->c, cs->cap, cs->n + 1) ||
      DPC_VEC_RESERVE(cs->det, cs->cap_det, cs->n + 1))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  cluster_detail *det = &cs->det[cs->n];
  memset(det, 0, sizeof *det);
  dpc_cluster_candidate *c = &cs->c[cs->n++];
  char why[200];
  *out = c;
  if (!parse_strategy(text, x->D, x->with_host, c, why, sizeof why))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s", why);
  return evaluate(x, c, det, d);
}

static int by_step(const void *a, const void *b) {
  const dpc_cluster_candidate *x = a, *y = b;
  int rx = x->planned && x->fits, ry = y->planned && y->fits;
  if (rx != ry) return ry - rx;
  if (!rx) return (y->planned - x->planned);
  return (x->step_ms > y->step_ms) - (x->step_ms < y->step_ms);
}

/* Every strategy a host's shape allows, pruned as --strategy auto prunes. */
static dpc_status search(const cluster_ctx *x, cands *cs, dpc_diag *d) {
  const dpc_cluster *cl = x->c;
  uint32_t dph = cl->devices_per_host < x->D ? cl->devices_per_host : x->D;
  dpc_cluster_candidate *c = NULL;
  char text[96];
  dpc_status st = add(x, cs, "data", &c, d);
  bool data_fits = !st && c->planned && c->fits;
  if (!st && x->D > 1 && x->D <= cl->devices_per_host) st = add(x, cs, "model", &c, d);
  for (uint32_t mp = 2; mp < x->D && mp <= dph && !st; mp++) {
    if (dph % mp || x->D % mp) continue;
    snprintf(text, sizeof text, "hybrid:mp=%u", mp);
    st = add(x, cs, text, &c, d);
  }
  double best_pipe = INFINITY;
  uint32_t best_s = 0, best_m = 0;
  for (uint32_t S = 2; S <= dph && !st; S++) {
    if (dph % S || x->D % S) continue;
    double prev = INFINITY;
    for (uint32_t k = 1; k <= 4 && !st; k *= 2) {
      snprintf(text, sizeof text, "pipeline:stages=%u,microbatches=%u,schedule=1f1b", S, S * k);
      st = add(x, cs, text, &c, d);
      if (st || !c->planned || !c->fits || c->step_ms >= prev) break;
      prev = c->step_ms;
      if (c->step_ms < best_pipe) best_pipe = c->step_ms, best_s = S, best_m = S * k;
      /* more micro-batches can at best take the bubble away: grow them only when that could
       * beat the best so far (each doubling doubles the replica's graph to plan) */
      double best = INFINITY;
      for (uint32_t i = 0; i < cs->n; i++)
        if (cs->c[i].planned && cs->c[i].fits && cs->c[i].step_ms < best) best = cs->c[i].step_ms;
      if (c->allreduce_ms + c->replica_ms * (1 - c->bubble_pct / 100) >= best) break;
    }
  }
  /* GPipe's order for the best pipeline: the same bubble as 1F1B's, so it is planned only when
   * the step without any bubble could beat the best so far */
  const dpc_cluster_candidate *bp = NULL, *best = NULL;
  for (uint32_t i = 0; i < cs->n; i++) {
    const dpc_cluster_candidate *k = &cs->c[i];
    if (!k->planned || !k->fits) continue;
    if (!best || k->step_ms < best->step_ms) best = k;
    if (k->kind == DPC_STRATEGY_PIPELINE && k->mp == best_s && k->microbatches == best_m) bp = k;
  }
  if (!st && bp && bp->allreduce_ms + bp->replica_ms * (1 - bp->bubble_pct / 100) < best->step_ms) {
    snprintf(text, sizeof text, "pipeline:stages=%u,microbatches=%u,schedule=gpipe", best_s,
             best_m);
    st = add(x, cs, text, &c, d);
  }
  for (uint32_t k = 2; k <= 8 && !data_fits && !st; k *= 2) {
    snprintf(text, sizeof text, "data:accumulate=%u", k);
    st = add(x, cs, text, &c, d);
  }
  /* the host's CPU beside the devices: the model over all of them, and a pipeline of a stage
   * each, its micro-batches grown while they help */
  if (x->with_host && !st) st = add(x, cs, "model+cpu", &c, d);
  /* micro-batches: a multiple of the stages that divides the batch, else a power of two */
  uint32_t S = x->D + 1, ms[6], nm = 0, p2 = 1;
  while (p2 < S) p2 *= 2;
  for (uint32_t k = 1; k <= 4; k *= 2) ms[nm++] = S * k;
  for (uint32_t k = 1; k <= 4 && p2 != S; k *= 2) ms[nm++] = p2 * k;
  double prev = INFINITY;
  for (uint32_t j = 0, tried = 0; x->with_host && j < nm && tried < 3 && !st; j++) {
    if (x->batch % ms[j]) continue;
    tried++;
    snprintf(text, sizeof text, "pipeline+cpu:microbatches=%u,schedule=1f1b", ms[j]);
    st = add(x, cs, text, &c, d);
    if (st || !c->planned || !c->fits || c->step_ms >= prev) break;
    prev = c->step_ms;
  }
  return st;
}

/* Why each runnable one lost to the best, in numbers. */
static void explain(cands *cs) {
  const dpc_cluster_candidate *b = &cs->c[0];
  snprintf(cs->c[0].reason, sizeof cs->c[0].reason, "the fastest predicted step");
  for (uint32_t i = 1; i < cs->n; i++) {
    dpc_cluster_candidate *c = &cs->c[i];
    if (!c->planned || !c->fits) continue;
    double slower = b->step_ms > 0 ? 100 * (c->step_ms / b->step_ms - 1) : 0;
    if (c->with_host) { /* evaluate said the CPU's part */
      size_t n = strlen(c->reason);
      snprintf(c->reason + n, sizeof c->reason - n, "; %+.0f%% against %s", slower, b->strategy);
    } else if (c->bubble_pct >= 15)
      snprintf(c->reason, sizeof c->reason, "pipeline bubble: %.0f%% idle; %+.0f%% against %s",
               c->bubble_pct, slower, b->strategy);
    else if (c->allreduce_ms > 0.3 * c->step_ms)
      snprintf(c->reason, sizeof c->reason,
               "communication-bound: all-reduce %.2f ms of the %.2f ms step; %+.0f%% against %s",
               c->allreduce_ms, c->step_ms, slower, b->strategy);
    else
      snprintf(c->reason, sizeof c->reason,
               "compute-bound: the replica's step %.2f ms of %.2f ms; %+.0f%% against %s",
               c->replica_ms, c->step_ms, slower, b->strategy);
  }
}

/* Every replica's graph planned and simulated at once (one host): the check of the composition. */
static dpc_status replicated(const cluster_ctx *x, dpc_cluster_candidate *c, cluster_detail *det,
                             dpc_diag *d) {
  uint32_t R = x->D / c->mp;
  if (x->c->hosts > 1 || x->D > DPC_MAX_DEVICES)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "planning every replica takes one host of at most %u devices, not %u "
                         "hosts of %u",
                         DPC_MAX_DEVICES, x->c->hosts, x->c->devices_per_host);
  if (x->D % c->mp || x->batch % R || (x->batch / R) % c->microbatches)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s does not split %u devices and a batch of %u",
                         c->strategy, x->D, x->batch);
  dpc_plan *p = NULL;
  dpc_sim_device *sum = NULL;
  double step = 0;
  dpc_status st = replica_plan(x, c, R, x->batch / R, &p, d);
  if (!st) {
    sum = calloc(p->n_devs, sizeof *sum);
    st = sum ? simulate(x->speed, p, sum, &step, d)
             : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  uint64_t mem = 0;
  if (!st) {
    c->replicas = R;
    c->planned = true;
    c->step_ms = step * 1e3;
    c->samples_per_s = step > 0 ? x->batch / step : 0;
    det->dev = calloc(p->n_devs, sizeof *det->dev);
    if (!det->dev) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !st && i < p->n_devs; i++) {
      dpc_plan_report_device *v = &det->dev[i];
      dev_name(x, c, i, v->name, sizeof v->name);
      v->kernels = sum[i].kernels, v->collectives = sum[i].comms;
      v->compute_ms = sum[i].compute_s * 1e3, v->comm_ms = sum[i].comm_s * 1e3;
      v->memory_bytes = p->devs[i].bytes, v->comm_bytes = sum[i].comm_bytes;
      if (v->memory_bytes > mem) mem = v->memory_bytes;
      if (v->comm_ms > c->allreduce_ms) c->allreduce_ms = v->comm_ms;
    }
    det->n = p->n_devs, det->replica_batch = x->batch / R;
    det->per_host = R, det->hosts = 1;
    c->max_memory_bytes = mem;
    c->fits = !x->limit || mem <= x->limit;
    c->replica_ms = c->step_ms - c->allreduce_ms;
    snprintf(c->reason, sizeof c->reason, "every replica planned (%u devices)", p->n_devs);
  }
  free(sum);
  dpc_plan_free(p);
  return st;
}

DPC_COMPILER_API dpc_status dpc_net_plan_cluster(const dpc_net *n, const dpc_cluster *cl,
                                                 const dpc_cluster_opts *o,
                                                 dpc_cluster_report **out, dpc_message *m) {
  *out = NULL;
  if (!DPC_API_HAS(o, replicated))
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "the cluster plan's options are missing or too short: set size to "
                         "sizeof(dpc_cluster_opts)");
  if (!dpc_net_trainable(n))
    return dpc_diag_fail(m, DPC_ERR_INVALID, "%s has nothing to minimize: plans are of training",
                         dpc_net_name(n));
  uint64_t D64 = (uint64_t)cl->hosts * cl->devices_per_host;
  if (!D64 || D64 > 65536)
    return dpc_diag_fail(m, DPC_ERR_INVALID, "the cluster '%s' has %llu devices: 1 to 65536",
                         cl->name, (unsigned long long)D64);
  bool with_host = DPC_API_HAS(o, with_host) && o->with_host;
  if (with_host && (cl->hosts > 1 || D64 + 1 > DPC_MAX_DEVICES / 2))
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "the host's CPU joins plans of one host of at most %u devices; '%s' "
                         "has %u hosts of %u",
                         DPC_MAX_DEVICES / 2 - 1, cl->name, cl->hosts, cl->devices_per_host);
  if (with_host &&
      !(cl->host_gflops > 0 && cl->host_mem_gbs > 0 && cl->host_memory && cl->host_link.gbs > 0))
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "'%s' describes no host CPU to plan on: it needs 'host' (gflops, "
                         "mem_gbs, memory) and 'links.host_to_device'",
                         cl->name);
  if (with_host && DPC_API_HAS(o, replicated) && o->replicated)
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "planning every replica checks replicas of one kind of device; a plan "
                         "with the host's CPU is one replica already");
  cluster_ctx *x = calloc(1, sizeof *x);
  if (!x) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  x->net = n, x->c = cl, x->D = (uint32_t)D64;
  x->batch = o->batch ? o->batch : 64 * x->D;
  x->limit = o->memory_limit ? o->memory_limit : cl->memory;
  x->within = (dpc_link_speed){cl->within_host.gbs, cl->within_host.latency_us * 1e-6};
  x->between = (dpc_link_speed){cl->between_hosts.gbs, cl->between_hosts.latency_us * 1e-6};
  for (uint32_t i = 0; i < DPC_MAX_DEVICES; i++)
    x->speed[i] = (dpc_device_speed){.gflops = cl->gflops,
                                     .mem_gbs = cl->mem_gbs,
                                     .link_gbs = x->within.gbs,
                                     .link_latency_s = x->within.latency_s};
  x->with_host = with_host;
  if (with_host) { /* the CPU first, then the devices; crossings between the two over PCIe */
    double bus = cl->host_link.gbs, bus_lat = cl->host_link.latency_us * 1e-6;
    for (uint32_t i = 0; i < DPC_MAX_DEVICES; i++) {
      x->mixed[i] = i ? x->speed[i - 1]
                      : (dpc_device_speed){.gflops = cl->host_gflops,
                                           .mem_gbs = cl->host_mem_gbs,
                                           .link_gbs = bus,
                                           .link_latency_s = bus_lat,
                                           .host = true};
      x->mixed[i].bus_gbs = bus, x->mixed[i].bus_latency_s = bus_lat;
      x->mixed_limit[i] = i ? x->limit : cl->host_memory;
    }
  }
  double t0 = dpc_now_s();
  cands cs = {0};
  cluster_detail det = {0};
  dpc_status st = DPC_OK;
  const char *text = o->strategy;
  bool autos = !text || !strcmp(text, "auto");
  if (autos && o->replicated)
    st = dpc_diag_fail(m, DPC_ERR_INVALID, "planning every replica takes a named strategy");
  else if (autos)
    st = search(x, &cs, m);
  else {
    dpc_cluster_candidate *c = NULL;
    if (DPC_VEC_RESERVE(cs.c, cs.cap, 1)) st = dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
    char why[200];
    if (!st) {
      c = &cs.c[cs.n++];
      if (!parse_strategy(text, x->D, x->with_host, c, why, sizeof why))
        st = dpc_diag_fail(m, DPC_ERR_INVALID, "%s", why);
    }
    if (!st) st = o->replicated ? replicated(x, c, &det, m) : evaluate(x, c, NULL, m);
    if (!st && !c->planned)
      st = dpc_diag_fail(m, DPC_ERR_INVALID, "%s on %s: %s", c->strategy, cl->name, c->reason);
  }
  dpc_cluster_report *r = st ? NULL : calloc(1, sizeof *r);
  if (!st && !r) st = dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  /* the best's devices, as its evaluation kept them: found before the sort, and put first after
   * it (its strategy's text is its name) */
  uint32_t bi = 0;
  for (uint32_t i = 1; r && cs.det && i < cs.n; i++)
    if (by_step(&cs.c[i], &cs.c[bi]) < 0) bi = i;
  char best_text[96] = "";
  if (r && cs.det && cs.n) {
    det = cs.det[bi], cs.det[bi].dev = NULL;
    snprintf(best_text, sizeof best_text, "%s", cs.c[bi].strategy);
  }
  if (r) {
    qsort(cs.c, cs.n, sizeof *cs.c, by_step);
    for (uint32_t i = 1; best_text[0] && i < cs.n; i++)
      if (!strcmp(cs.c[i].strategy, best_text) && by_step(&cs.c[i], &cs.c[0]) == 0) {
        dpc_cluster_candidate t = cs.c[0];
        cs.c[0] = cs.c[i], cs.c[i] = t;
      }
    r->best = cs.n && cs.c[0].planned && cs.c[0].fits ? 0 : cs.n;
    if (r->best < cs.n && autos) explain(&cs);
    r->candidates = cs.c, r->n_candidates = cs.n;
    cs.c = NULL;
    r->cluster = *cl;
    r->devices = x->D + (with_host ? 1 : 0), r->batch = x->batch, r->memory_limit = x->limit;
    /* the choice's devices: planned once more, keeping them (the replicated plan has them) */
    if (r->best < r->n_candidates && !o->replicated && !det.dev)
      st = evaluate(x, &r->candidates[r->best], &det, m);
    if (!st && r->best == r->n_candidates && autos)
      st = dpc_diag_fail(m, DPC_ERR_INVALID,
                         "no strategy fits: none of the %u tried runs on %u devices of %.1f MiB "
                         "each (the table says what each needs)",
                         r->n_candidates, x->D, mib((double)x->limit));
    else if (!st && r->best == r->n_candidates)
      st = dpc_diag_fail(m, DPC_ERR_INVALID, "%s on %s: %s", r->candidates[0].strategy, cl->name,
                         r->candidates[0].reason);
    if (r->best < r->n_candidates) {
      const dpc_cluster_candidate *b = &r->candidates[r->best];
      r->replicas = b->replicas, r->mp = b->mp, r->microbatches = b->microbatches;
      r->with_host = b->with_host;
    }
    r->replica_devices = det.dev, r->n_replica_devices = det.n;
    det.dev = NULL;
    r->replica_batch = det.replica_batch, r->allreduces = det.allreduces;
    r->allreduce_bytes = det.ar_bytes, r->allreduce_sent = det.ar_sent;
    r->peers_per_host = det.per_host, r->hosts_spanned = det.hosts;
    r->seconds = dpc_now_s() - t0;
  }
  free(det.dev);
  for (uint32_t i = 0; cs.det && i < cs.n; i++) free(cs.det[i].dev);
  free(cs.det);
  free(cs.c);
  free(x);
  *out = r;
  return st;
}

DPC_COMPILER_API void dpc_cluster_report_free(dpc_cluster_report *r) {
  if (!r) return;
  free(r->candidates);
  free(r->replica_devices);
  free(r);
}
