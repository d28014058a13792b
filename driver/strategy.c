/*
 * strategy.c — dpc_strategy_parse: a strategy's text and settings checked against the devices
 * and the batch, in the order a person fixes them (the kind, what goes with it, the numbers,
 * then whether they fit the devices and the batch).
 */
#include "driver/strategy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[DPC_STRATEGY_KINDS] = {
    "single", "data", "model", "hybrid", "pipeline", "async", "local_sgd"};

/* How a message names each setting. */
static const char *const field_meaning[] = {
    [DPC_STRATEGY_FIELD_KIND] = "strategy",
    [DPC_STRATEGY_FIELD_MP] = "devices per replica",
    [DPC_STRATEGY_FIELD_STAGES] = "pipeline stages",
    [DPC_STRATEGY_FIELD_MICROBATCHES] = "micro-batches per batch",
    [DPC_STRATEGY_FIELD_DP] = "data-parallel pipelines",
    [DPC_STRATEGY_FIELD_ACCUMULATE] = "accumulation",
    [DPC_STRATEGY_FIELD_SCHEDULE] = "pipeline schedule",
    [DPC_STRATEGY_FIELD_PLACEMENT] = "placement method",
    [DPC_STRATEGY_FIELD_STALENESS] = "staleness",
    [DPC_STRATEGY_FIELD_PERIOD] = "averaging period",
    [DPC_STRATEGY_FIELD_ASYNC] = "asynchronous training",
    [DPC_STRATEGY_FIELD_DEVICES] = "device count",
    [DPC_STRATEGY_FIELD_BATCH] = "batch size",
    [DPC_STRATEGY_FIELD_TEXT] = "strategy setting",
};

/* The text form's keys, in the order of the numeric settings below. */
enum { K_MP, K_STAGES, K_MICRO, K_DP, K_ACC, K_STALE, K_PERIOD, K_NUMS };
static const char *const num_keys[K_NUMS] = {"mp",         "stages",    "microbatches", "dp",
                                             "accumulate", "staleness", "period"};
static const dpc_strategy_field num_fields[K_NUMS] = {
    DPC_STRATEGY_FIELD_MP,    DPC_STRATEGY_FIELD_STAGES,     DPC_STRATEGY_FIELD_MICROBATCHES,
    DPC_STRATEGY_FIELD_DP,    DPC_STRATEGY_FIELD_ACCUMULATE, DPC_STRATEGY_FIELD_STALENESS,
    DPC_STRATEGY_FIELD_PERIOD};

void dpc_strategy_args_init(dpc_strategy_args *a) {
  memset(a, 0, sizeof *a);
  a->mp = a->stages = a->microbatches = a->dp = a->accumulate = a->staleness = a->period = -1;
}

bool dpc_strategy_kind_parse(const char *name, dpc_strategy_kind *out) {
  for (int k = 0; k < DPC_STRATEGY_KINDS; k++)
    if (!strcmp(name, kind_names[k])) return *out = (dpc_strategy_kind)k, true;
  if (!strcmp(name, "local-sgd")) return *out = DPC_STRATEGY_LOCAL_SGD, true;
  return false;
}

const char *dpc_strategy_kind_name(dpc_strategy_kind k) {
  return k < DPC_STRATEGY_KINDS ? kind_names[k] : "?";
}

/* The settings from both sources, merged. */
typedef struct settings {
  int64_t num[K_NUMS];
  dpc_pipeline_schedule schedule;
  const char *placement; /* NUL-terminated: the args' or the copy of the text */
  char text[256];        /* the text form, split in place */
} settings;

static dpc_status fail(dpc_strategy_error *e, dpc_strategy_error v, dpc_diag *d, const char *fmt,
                       ...) DPC_PRINTF(4, 5);
static dpc_status fail(dpc_strategy_error *e, dpc_strategy_error v, dpc_diag *d, const char *fmt,
                       ...) {
  if (e) *e = v;
  va_list ap;
  va_start(ap, fmt);
  dpc_status st = dpc_diag_vfail(d, DPC_ERR_INVALID, fmt, ap);
  va_end(ap);
  return st;
}

static bool parse_schedule(const char *v, dpc_pipeline_schedule *out) {
  if (!strcmp(v, "gpipe")) return *out = DPC_SCHEDULE_GPIPE, true;
  if (!strcmp(v, "1f1b")) return *out = DPC_SCHEDULE_1F1B, true;
  return false;
}

/* "name:key=value,..." into the kind and s; the arguments' own settings must not repeat a key. */
static dpc_status parse_text(const dpc_strategy_args *a, settings *s, dpc_strategy_kind *kind,
                             bool *named, dpc_strategy_error *e, dpc_diag *d) {
  dpc_strategy_error v = {.problem = DPC_STRATEGY_UNKNOWN, .field = DPC_STRATEGY_FIELD_TEXT};
  *named = a->text != NULL;
  if (!a->text) return DPC_OK;
  if (strlen(a->text) >= sizeof s->text)
    return v.text = a->text, fail(e, v, d, "the strategy '%.40s...' is too long", a->text);
  memcpy(s->text, a->text, strlen(a->text) + 1);
  char *rest = strchr(s->text, ':');
  if (rest) *rest++ = '\0';
  uint32_t allowed = a->kinds ? a->kinds : (1u << DPC_STRATEGY_KINDS) - 1;
  if (!dpc_strategy_kind_parse(s->text, kind) || !(allowed & (1u << *kind))) {
    char list[128] = "";
    int n = 0, at = 0, count = 0;
    for (int k = 0; k < DPC_STRATEGY_KINDS; k++) count += (allowed >> k) & 1;
    for (int k = 0; k < DPC_STRATEGY_KINDS; k++)
      if (allowed & (1u << k))
        at += snprintf(list + at, sizeof list - (size_t)at, "%s%s",
                       n ? n + 1 == count ? " or " : ", " : "", kind_names[k]),
            n++;
    v.field = DPC_STRATEGY_FIELD_KIND, v.text = a->text;
    return fail(e, v, d, "the strategy '%s' is not one of %s", a->text, list);
  }
  for (char *kv = rest; kv && *kv;) {
    char *next = strchr(kv, ',');
    if (next) *next++ = '\0';
    char *val = strchr(kv, '=');
    if (!val) return fail(e, v, d, "the strategy setting '%s' has no value (key=value)", kv);
    *val++ = '\0';
    int k = 0;
    while (k < K_NUMS && strcmp(kv, num_keys[k])) k++;
    bool twice = false;
    if (k < K_NUMS) {
      char *end;
      errno = 0;
      long long x = strtoll(val, &end, 10);
      if (errno || end == val || *end || x < 0)
        return v.problem = DPC_STRATEGY_RANGE, v.field = num_fields[k], v.text = NULL, v.lo = 0,
               v.hi = UINT32_MAX,
               fail(e, v, d, "the strategy's %s takes a whole number, not '%s'", kv, val);
      twice = s->num[k] >= 0, s->num[k] = x;
    } else if (!strcmp(kv, "schedule")) {
      twice = s->schedule != DPC_SCHEDULE_NONE;
      if (!parse_schedule(val, &s->schedule))
        return v.field = DPC_STRATEGY_FIELD_SCHEDULE,
               fail(e, v, d, "the pipeline schedule '%s' is not gpipe or 1f1b", val);
    } else if (!strcmp(kv, "placement")) {
      twice = s->placement != NULL, s->placement = val;
    } else {
      return fail(e, v, d, "the strategy has no setting '%s' (%s)", kv,
                  "mp, stages, microbatches, dp, accumulate, schedule, placement, staleness or "
                  "period");
    }
    if (twice) return fail(e, v, d, "the strategy's %s is given twice", kv);
    kv = next;
  }
  return DPC_OK;
}

/* The settings that belong to one kind only: given with another, they would be ignored. */
static dpc_status check_alone(const settings *s, dpc_strategy_kind kind, dpc_strategy_error *e,
                              dpc_diag *d) {
  static const struct {
    int key;
    dpc_strategy_kind kind;
  } own[] = {{K_STAGES, DPC_STRATEGY_PIPELINE},
             {K_MICRO, DPC_STRATEGY_PIPELINE},
             {K_DP, DPC_STRATEGY_PIPELINE},
             {K_MP, DPC_STRATEGY_HYBRID},
             {K_STALE, DPC_STRATEGY_ASYNC}};
  dpc_strategy_error v = {.problem = DPC_STRATEGY_ALONE};
  for (size_t i = 0; i < sizeof own / sizeof *own; i++)
    if (s->num[own[i].key] >= 0 && kind != own[i].kind)
      return v.field = num_fields[own[i].key], v.kind = own[i].kind,
             fail(e, v, d, "the %s setting belongs to the %s strategy alone",
                  field_meaning[num_fields[own[i].key]], kind_names[own[i].kind]);
  if (s->schedule != DPC_SCHEDULE_NONE && kind != DPC_STRATEGY_PIPELINE)
    return v.field = DPC_STRATEGY_FIELD_SCHEDULE, v.kind = DPC_STRATEGY_PIPELINE,
           fail(e, v, d, "the pipeline schedule setting belongs to the pipeline strategy alone");
  if (s->placement && kind != DPC_STRATEGY_MODEL)
    return v.field = DPC_STRATEGY_FIELD_PLACEMENT, v.kind = DPC_STRATEGY_MODEL,
           fail(e, v, d, "the placement method setting belongs to the model strategy alone");
  return DPC_OK;
}

/* Each number within its range (the defaults filled in). */
static dpc_status check_numbers(settings *s, dpc_strategy_kind kind, dpc_strategy_error *e,
                                dpc_diag *d) {
  dpc_strategy_error v = {.problem = DPC_STRATEGY_MISSING, .kind = kind};
  if (kind == DPC_STRATEGY_PIPELINE && (s->num[K_STAGES] < 2 || s->num[K_STAGES] > DPC_MAX_DEVICES))
    return v.field = DPC_STRATEGY_FIELD_STAGES, v.lo = 2, v.hi = DPC_MAX_DEVICES,
           fail(e, v, d, "the pipeline strategy needs its number of stages, from 2 to %u",
                DPC_MAX_DEVICES);
  if (kind == DPC_STRATEGY_HYBRID && (s->num[K_MP] < 2 || s->num[K_MP] > DPC_MAX_DEVICES))
    return v.field = DPC_STRATEGY_FIELD_MP, v.lo = 2, v.hi = DPC_MAX_DEVICES,
           fail(e, v, d, "the hybrid strategy needs its devices per replica, from 2 to %u",
                DPC_MAX_DEVICES);
  if (kind == DPC_STRATEGY_PIPELINE && s->num[K_ACC] >= 0)
    return v.problem = DPC_STRATEGY_EXCLUDES, v.field = DPC_STRATEGY_FIELD_ACCUMULATE,
           fail(e, v, d,
                "a pipeline splits a batch into its micro-batches; an accumulation does not go "
                "with it");
  static const struct {
    int key;
    int64_t lo, hi;
  } range[] = {{K_MICRO, 1, 256},
               {K_DP, 1, DPC_MAX_DEVICES},
               {K_ACC, 1, 256},
               {K_STALE, 0, 1000000},
               {K_PERIOD, 1, 1000000}};
  v.problem = DPC_STRATEGY_RANGE;
  for (size_t i = 0; i < sizeof range / sizeof *range; i++) {
    int64_t x = s->num[range[i].key];
    if (x >= 0 && (x < range[i].lo || x > range[i].hi))
      return v.field = num_fields[range[i].key], v.value = (uint64_t)x,
             v.lo = (uint64_t)range[i].lo, v.hi = (uint64_t)range[i].hi,
             fail(e, v, d, "the %s must be from %lld to %lld, not %lld",
                  field_meaning[num_fields[range[i].key]], (long long)range[i].lo,
                  (long long)range[i].hi, (long long)x);
  }
  int64_t stages = s->num[K_STAGES], dp = s->num[K_DP] > 0 ? s->num[K_DP] : 1;
  if (kind == DPC_STRATEGY_PIPELINE && stages * dp > DPC_MAX_DEVICES)
    return v.field = DPC_STRATEGY_FIELD_DP, v.value = (uint64_t)dp, v.lo = 1,
           v.hi = (uint64_t)(DPC_MAX_DEVICES / stages),
           fail(e, v, d, "%lld pipelines of %lld stages make %lld devices; at most %u devices",
                (long long)dp, (long long)stages, (long long)(stages * dp), DPC_MAX_DEVICES);
  return DPC_OK;
}

/* The kind asked for: the text's, made asynchronous or local SGD by those settings. */
static dpc_status resolve_kind(const dpc_strategy_args *a, const settings *s, bool named,
                               dpc_strategy_kind *kind, dpc_strategy_error *e, dpc_diag *d) {
  dpc_strategy_error v = {.problem = DPC_STRATEGY_EXCLUDES, .kind = *kind};
  bool data = !named || *kind == DPC_STRATEGY_DATA;
  if (a->async) {
    if (!data && *kind != DPC_STRATEGY_ASYNC)
      return v.field = DPC_STRATEGY_FIELD_ASYNC,
             fail(e, v, d, "asynchronous training runs data-parallel workers, not the %s strategy",
                  kind_names[*kind]);
    *kind = DPC_STRATEGY_ASYNC;
  }
  if (s->num[K_PERIOD] >= 0) {
    if (*kind == DPC_STRATEGY_ASYNC)
      return v.field = DPC_STRATEGY_FIELD_PERIOD, v.kind = DPC_STRATEGY_ASYNC,
             fail(e, v, d, "local SGD's averaging does not go with asynchronous training");
    if (!data && *kind != DPC_STRATEGY_LOCAL_SGD)
      return v.field = DPC_STRATEGY_FIELD_PERIOD,
             fail(e, v, d, "local SGD averages data-parallel replicas, not the %s strategy",
                  kind_names[*kind]);
    *kind = DPC_STRATEGY_LOCAL_SGD;
  } else if (*kind == DPC_STRATEGY_LOCAL_SGD) {
    v.problem = DPC_STRATEGY_MISSING, v.field = DPC_STRATEGY_FIELD_PERIOD, v.lo = 1, v.hi = 1000000;
    return fail(e, v, d, "local SGD needs its averaging period, from 1 to 1000000 steps");
  }
  if (*kind == DPC_STRATEGY_ASYNC && s->num[K_ACC] > 1)
    return v.field = DPC_STRATEGY_FIELD_ACCUMULATE, v.kind = DPC_STRATEGY_ASYNC,
           fail(e, v, d, "an accumulation does not go with asynchronous training");
  return DPC_OK;
}

/* The kinds that need several devices, when the devices are given: said before their numbers,
 * which would not help on one device. */
static dpc_status check_spread(const dpc_strategy_args *a, dpc_strategy_kind kind,
                               dpc_strategy_error *e, dpc_diag *d) {
  bool replicas = kind == DPC_STRATEGY_ASYNC || kind == DPC_STRATEGY_LOCAL_SGD;
  bool spread =
      kind == DPC_STRATEGY_MODEL || kind == DPC_STRATEGY_HYBRID || kind == DPC_STRATEGY_PIPELINE;
  uint32_t D = a->devices ? a->devices : 1;
  /* a pipeline without devices takes its own: stages x pipelines */
  if (!(replicas || spread) || D >= 2 || (kind == DPC_STRATEGY_PIPELINE && !a->devices))
    return DPC_OK;
  dpc_strategy_error v = {.problem = DPC_STRATEGY_FEW_DEVICES, .kind = kind, .devices = D};
  v.field = kind == DPC_STRATEGY_ASYNC       ? DPC_STRATEGY_FIELD_ASYNC
            : kind == DPC_STRATEGY_LOCAL_SGD ? DPC_STRATEGY_FIELD_PERIOD
                                             : DPC_STRATEGY_FIELD_KIND;
  return fail(e, v, d, "the %s strategy %s: it needs 2 or more devices, not %u", kind_names[kind],
              replicas ? "trains data-parallel replicas on several devices"
                       : "spreads the model over several devices",
              D);
}

/* The kind fitted to `D` devices: the replicas and each one's devices. */
static dpc_status fit_devices(const settings *s, dpc_strategy *o, dpc_strategy_error *e,
                              dpc_diag *d) {
  uint32_t D = o->devices;
  dpc_strategy_error v = {.kind = o->kind, .devices = D};
  if (o->kind == DPC_STRATEGY_SINGLE && D > 1)
    return v.problem = DPC_STRATEGY_MANY_DEVICES, v.field = DPC_STRATEGY_FIELD_KIND,
           fail(e, v, d, "the single strategy takes one device, not %u", D);
  v.problem = DPC_STRATEGY_DEVICES_SPLIT;
  if (o->kind == DPC_STRATEGY_PIPELINE) {
    int64_t S = s->num[K_STAGES];
    if (D % S)
      return v.field = DPC_STRATEGY_FIELD_STAGES, v.value = (uint64_t)S,
             fail(e, v, d, "the %lld pipeline stages do not divide the %u devices", (long long)S,
                  D);
    if (s->num[K_DP] >= 0 && D != S * s->num[K_DP])
      return v.field = DPC_STRATEGY_FIELD_DP, v.value = (uint64_t)s->num[K_DP], v.lo = (uint64_t)S,
             fail(e, v, d, "%lld pipelines of %lld stages take %lld devices, not %u",
                  (long long)s->num[K_DP], (long long)S, (long long)(S * s->num[K_DP]), D);
  }
  if (o->kind == DPC_STRATEGY_HYBRID && (D % o->mp || D / o->mp < 2))
    return v.field = DPC_STRATEGY_FIELD_MP, v.value = o->mp,
           fail(e, v, d,
                "%u devices per replica do not divide the %u devices into 2 or more "
                "replicas",
                o->mp, D);
  return DPC_OK;
}

/* Every replica's share of the batch splits into the micro-batches. */
static dpc_status fit_batch(const dpc_strategy_args *a, const dpc_strategy *o,
                            dpc_strategy_error *e, dpc_diag *d) {
  bool even = !o->shares || !strcmp(o->shares, "even");
  if (!a->batch || !even || o->kind == DPC_STRATEGY_ASYNC) return DPC_OK;
  dpc_strategy_error v = {.problem = DPC_STRATEGY_BATCH_SPLIT,
                          .field = DPC_STRATEGY_FIELD_BATCH,
                          .kind = o->kind,
                          .value = a->batch,
                          .devices = o->devices,
                          .replicas = o->replicas};
  if (a->batch % o->replicas)
    return fail(e, v, d, "the batch of %llu does not split evenly over %u data-parallel replicas",
                (unsigned long long)a->batch, o->replicas);
  uint64_t share = a->batch / o->replicas;
  if (share % o->microbatches)
    return v.problem = DPC_STRATEGY_MICRO_SPLIT,
           v.field = o->kind == DPC_STRATEGY_PIPELINE ? DPC_STRATEGY_FIELD_MICROBATCHES
                                                      : DPC_STRATEGY_FIELD_ACCUMULATE,
           v.value = o->microbatches, v.lo = share,
           fail(e, v, d, "%u micro-batches do not divide %llu samples into equal parts",
                o->microbatches, (unsigned long long)share);
  return DPC_OK;
}

dpc_status dpc_strategy_parse(const dpc_strategy_args *a, dpc_strategy *out, dpc_strategy_error *e,
                              dpc_diag *d) {
  settings s = {.schedule = DPC_SCHEDULE_NONE};
  for (int k = 0; k < K_NUMS; k++) s.num[k] = -1;
  if (e) memset(e, 0, sizeof *e);
  dpc_strategy_kind kind = DPC_STRATEGY_DATA;
  bool named = false;
  dpc_status st = parse_text(a, &s, &kind, &named, e, d);
  if (st) return st;
  /* the arguments' own settings, each given at most once between them and the text */
  const int64_t args_num[K_NUMS] = {a->mp,         a->stages,    a->microbatches, a->dp,
                                    a->accumulate, a->staleness, a->period};
  dpc_strategy_error twice = {.problem = DPC_STRATEGY_UNKNOWN, .field = DPC_STRATEGY_FIELD_TEXT};
  for (int k = 0; k < K_NUMS; k++) {
    if (args_num[k] < 0) continue;
    if (s.num[k] >= 0) return fail(e, twice, d, "the strategy's %s is given twice", num_keys[k]);
    s.num[k] = args_num[k];
  }
  if (a->schedule != DPC_SCHEDULE_NONE) {
    if (s.schedule != DPC_SCHEDULE_NONE)
      return fail(e, twice, d, "the strategy's schedule is given twice");
    s.schedule = a->schedule;
  }
  if (a->placement) {
    if (s.placement) return fail(e, twice, d, "the strategy's placement is given twice");
    s.placement = a->placement;
  }
  if ((st = resolve_kind(a, &s, named, &kind, e, d)) || (st = check_alone(&s, kind, e, d)) ||
      (st = check_spread(a, kind, e, d)) || (st = check_numbers(&s, kind, e, d)))
    return st;
  dpc_strategy o = {.kind = kind,
                    .schedule = DPC_SCHEDULE_NONE,
                    .shares = a->shares,
                    .memory_limit = a->memory_limit,
                    .mp = 1,
                    .microbatches = 1,
                    .placement = DPC_PLACEMENT_METIS};
  if (s.placement) {
    if (!strcmp(s.placement, "contiguous"))
      o.placement = DPC_PLACEMENT_CONTIGUOUS;
    else if (!strcmp(s.placement, "roundrobin"))
      o.placement = DPC_PLACEMENT_ROUNDROBIN;
    else if (strcmp(s.placement, "metis"))
      return fail(e,
                  (dpc_strategy_error){.problem = DPC_STRATEGY_UNKNOWN,
                                       .field = DPC_STRATEGY_FIELD_PLACEMENT,
                                       .text = s.placement == a->placement ? a->placement : NULL},
                  d, "the placement method '%s' is not metis, contiguous or roundrobin",
                  s.placement);
  }
  if (kind == DPC_STRATEGY_PIPELINE) {
    o.mp = (uint32_t)s.num[K_STAGES];
    o.microbatches = s.num[K_MICRO] >= 0 ? (uint32_t)s.num[K_MICRO] : 4;
    o.schedule = s.schedule != DPC_SCHEDULE_NONE ? s.schedule : DPC_SCHEDULE_1F1B;
  } else if (s.num[K_ACC] >= 0) {
    o.microbatches = (uint32_t)s.num[K_ACC];
  }
  for (int k = 0; k < K_NUMS; k++)
    if (s.num[k] >= 0) o.given |= 1u << num_fields[k];
  if (s.schedule != DPC_SCHEDULE_NONE) o.given |= 1u << DPC_STRATEGY_FIELD_SCHEDULE;
  if (s.placement) o.given |= 1u << DPC_STRATEGY_FIELD_PLACEMENT;
  if (kind == DPC_STRATEGY_HYBRID) o.mp = (uint32_t)s.num[K_MP];
  if (kind == DPC_STRATEGY_ASYNC) o.staleness = s.num[K_STALE] >= 0 ? (uint32_t)s.num[K_STALE] : 4;
  if (kind == DPC_STRATEGY_LOCAL_SGD) o.period = (uint32_t)s.num[K_PERIOD];
  o.devices = a->devices;
  if (!o.devices)
    o.devices =
        kind == DPC_STRATEGY_PIPELINE ? o.mp * (uint32_t)(s.num[K_DP] >= 0 ? s.num[K_DP] : 1) : 1;
  /* data parallel over one device is one device; a strategy not named fits the devices */
  if (kind == DPC_STRATEGY_DATA && o.devices == 1) o.kind = DPC_STRATEGY_SINGLE;
  if ((st = fit_devices(&s, &o, e, d))) return st;
  o.replicas = o.kind == DPC_STRATEGY_MODEL ? 1 : o.devices / o.mp;
  if (o.kind == DPC_STRATEGY_MODEL) o.mp = o.devices;
  if ((st = fit_batch(a, &o, e, d))) return st;
  *out = o;
  return DPC_OK;
}
