/*
 * test_strategy.c — dpc_strategy_parse: every kind from its settings and from its text, and
 * every combination it refuses, with the setting it blames and the message it gives.
 */
#include "tests/unit/unit.h"
#include "driver/strategy.h"

/* Parse `a`; on success *s holds the strategy, on failure *e and msg the reason. */
static dpc_status parse(const dpc_strategy_args *a, dpc_strategy *s, dpc_strategy_error *e,
                        char *msg, size_t n) {
  dpc_diag d;
  dpc_diag_init(&d);
  memset(s, 0xab, sizeof *s);
  dpc_status st = dpc_strategy_parse(a, s, e, &d);
  snprintf(msg, n, "%s", d.msg ? d.msg : "");
  dpc_diag_free(&d);
  return st;
}

static dpc_strategy_args args(const char *text, uint32_t devices) {
  dpc_strategy_args a;
  dpc_strategy_args_init(&a);
  a.text = text, a.devices = devices;
  return a;
}

static void every_kind(void) {
  dpc_strategy s;
  dpc_strategy_error e;
  char msg[512];
  /* nothing named: one device is single, several are data parallel */
  dpc_strategy_args a = args(NULL, 0);
  CHECK_MSG(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK, "%s", msg);
  CHECK(s.kind == DPC_STRATEGY_SINGLE && s.devices == 1 && s.replicas == 1 && s.mp == 1);
  CHECK(s.microbatches == 1 && s.schedule == DPC_SCHEDULE_NONE);
  a = args("single", 1);
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK && s.kind == DPC_STRATEGY_SINGLE);
  a = args(NULL, 4);
  a.accumulate = 2, a.batch = 64;
  CHECK_MSG(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK, "%s", msg);
  CHECK(s.kind == DPC_STRATEGY_DATA && s.devices == 4 && s.replicas == 4 && s.microbatches == 2);
  a = args("model", 3);
  a.placement = "contiguous";
  CHECK_MSG(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK, "%s", msg);
  CHECK(s.kind == DPC_STRATEGY_MODEL && s.replicas == 1 && s.mp == 3);
  CHECK(s.placement == DPC_PLACEMENT_CONTIGUOUS);
  a = args("model:placement=roundrobin", 2);
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK && s.placement == DPC_PLACEMENT_ROUNDROBIN);
  a = args("hybrid", 8);
  a.mp = 2;
  CHECK_MSG(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK, "%s", msg);
  CHECK(s.kind == DPC_STRATEGY_HYBRID && s.replicas == 4 && s.mp == 2);
  /* a pipeline: its own devices when none are given, 4 micro-batches and 1F1B by default */
  a = args("pipeline", 0);
  a.stages = 2, a.dp = 3;
  CHECK_MSG(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK, "%s", msg);
  CHECK(s.kind == DPC_STRATEGY_PIPELINE && s.devices == 6 && s.replicas == 3 && s.mp == 2);
  CHECK(s.microbatches == 4 && s.schedule == DPC_SCHEDULE_1F1B);
  a = args("pipeline:stages=2,microbatches=8,schedule=gpipe", 4);
  a.batch = 32;
  CHECK_MSG(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK, "%s", msg);
  CHECK(s.kind == DPC_STRATEGY_PIPELINE && s.devices == 4 && s.replicas == 2 && s.mp == 2);
  CHECK(s.microbatches == 8 && s.schedule == DPC_SCHEDULE_GPIPE);
  /* what was given, apart from what was defaulted */
  CHECK(s.given == ((1u << DPC_STRATEGY_FIELD_STAGES) | (1u << DPC_STRATEGY_FIELD_MICROBATCHES) |
                    (1u << DPC_STRATEGY_FIELD_SCHEDULE)));
  /* asynchronous and local SGD: by their settings (as the command line says) or by name */
  a = args(NULL, 2);
  a.async = true;
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK);
  CHECK(s.kind == DPC_STRATEGY_ASYNC && s.replicas == 2 && s.staleness == 4);
  a = args("async:staleness=0", 4);
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK);
  CHECK(s.kind == DPC_STRATEGY_ASYNC && s.replicas == 4 && s.staleness == 0);
  a = args("data", 2);
  a.period = 5;
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK);
  CHECK(s.kind == DPC_STRATEGY_LOCAL_SGD && s.period == 5 && s.replicas == 2);
  a = args("local-sgd:period=3", 2);
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK);
  CHECK(s.kind == DPC_STRATEGY_LOCAL_SGD && s.period == 3);
  a = args(NULL, 0);
  a.memory_limit = 1u << 20, a.shares = "auto";
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK);
  CHECK(s.memory_limit == 1u << 20 && !strcmp(s.shares, "auto"));
}

/* One refused strategy: the problem, the setting blamed and the message. */
typedef struct refusal {
  const char *what;
  dpc_strategy_args a;
  dpc_strategy_problem problem;
  dpc_strategy_field field;
  const char *msg;
} refusal;

static void refused(void) {
  refusal r[64];
  int n = 0;
#define REFUSE(WHAT, INIT, P, F, MSG)                                                              \
  do {                                                                                             \
    dpc_strategy_args a_;                                                                          \
    dpc_strategy_args_init(&a_);                                                                   \
    INIT;                                                                                          \
    CHECK_MSG(n < 64, "more refusals than r holds");                                               \
    if (n < 64) r[n++] = (refusal){WHAT, a_, P, F, MSG};                                           \
  } while (0)
  const uint32_t train = (1u << DPC_STRATEGY_DATA) | (1u << DPC_STRATEGY_MODEL) |
                         (1u << DPC_STRATEGY_HYBRID) | (1u << DPC_STRATEGY_PIPELINE);
  REFUSE("unknown kind", a_.text = "zigzag", DPC_STRATEGY_UNKNOWN, DPC_STRATEGY_FIELD_KIND,
         "the strategy 'zigzag' is not one of single, data, model, hybrid, pipeline, async or "
         "local_sgd");
  REFUSE("a kind the caller does not run", (a_.text = "single", a_.kinds = train),
         DPC_STRATEGY_UNKNOWN, DPC_STRATEGY_FIELD_KIND,
         "the strategy 'single' is not one of data, model, hybrid or pipeline");
  REFUSE("unknown key", a_.text = "pipeline:foo=1", DPC_STRATEGY_UNKNOWN, DPC_STRATEGY_FIELD_TEXT,
         "the strategy has no setting 'foo' (mp, stages, microbatches, dp, accumulate, schedule, "
         "placement, staleness or period)");
  REFUSE("key without value", a_.text = "pipeline:stages", DPC_STRATEGY_UNKNOWN,
         DPC_STRATEGY_FIELD_TEXT, "the strategy setting 'stages' has no value (key=value)");
  REFUSE("a word for a number", a_.text = "pipeline:stages=two", DPC_STRATEGY_RANGE,
         DPC_STRATEGY_FIELD_STAGES, "the strategy's stages takes a whole number, not 'two'");
  REFUSE("a key twice", (a_.text = "pipeline:stages=2", a_.stages = 2), DPC_STRATEGY_UNKNOWN,
         DPC_STRATEGY_FIELD_TEXT, "the strategy's stages is given twice");
  REFUSE("unknown schedule", a_.text = "pipeline:stages=2,schedule=zz", DPC_STRATEGY_UNKNOWN,
         DPC_STRATEGY_FIELD_SCHEDULE, "the pipeline schedule 'zz' is not gpipe or 1f1b");
  REFUSE("stages without a pipeline", a_.stages = 2, DPC_STRATEGY_ALONE, DPC_STRATEGY_FIELD_STAGES,
         "the pipeline stages setting belongs to the pipeline strategy alone");
  REFUSE("micro-batches without a pipeline", (a_.text = "data", a_.microbatches = 2),
         DPC_STRATEGY_ALONE, DPC_STRATEGY_FIELD_MICROBATCHES,
         "the micro-batches per batch setting belongs to the pipeline strategy alone");
  REFUSE("dp without a pipeline", a_.dp = 2, DPC_STRATEGY_ALONE, DPC_STRATEGY_FIELD_DP,
         "the data-parallel pipelines setting belongs to the pipeline strategy alone");
  REFUSE("mp without hybrid", (a_.text = "pipeline", a_.mp = 2), DPC_STRATEGY_ALONE,
         DPC_STRATEGY_FIELD_MP,
         "the devices per replica setting belongs to the hybrid strategy alone");
  REFUSE("staleness without async", a_.staleness = 2, DPC_STRATEGY_ALONE,
         DPC_STRATEGY_FIELD_STALENESS, "the staleness setting belongs to the async strategy alone");
  REFUSE("schedule without a pipeline", a_.schedule = DPC_SCHEDULE_GPIPE, DPC_STRATEGY_ALONE,
         DPC_STRATEGY_FIELD_SCHEDULE,
         "the pipeline schedule setting belongs to the pipeline strategy alone");
  REFUSE("placement without model", a_.placement = "metis", DPC_STRATEGY_ALONE,
         DPC_STRATEGY_FIELD_PLACEMENT,
         "the placement method setting belongs to the model strategy alone");
  REFUSE("unknown placement", (a_.text = "model", a_.placement = "zz", a_.devices = 2),
         DPC_STRATEGY_UNKNOWN, DPC_STRATEGY_FIELD_PLACEMENT,
         "the placement method 'zz' is not metis, contiguous or roundrobin");
  REFUSE("pipeline without stages", a_.text = "pipeline", DPC_STRATEGY_MISSING,
         DPC_STRATEGY_FIELD_STAGES,
         "the pipeline strategy needs its number of stages, from 2 to 256");
  REFUSE("pipeline of 257 stages", (a_.text = "pipeline", a_.stages = 257), DPC_STRATEGY_MISSING,
         DPC_STRATEGY_FIELD_STAGES,
         "the pipeline strategy needs its number of stages, from 2 to 256");
  REFUSE("hybrid without mp", (a_.text = "hybrid", a_.devices = 4), DPC_STRATEGY_MISSING,
         DPC_STRATEGY_FIELD_MP, "the hybrid strategy needs its devices per replica, from 2 to 256");
  REFUSE("local SGD without a period", (a_.text = "local_sgd", a_.devices = 2),
         DPC_STRATEGY_MISSING, DPC_STRATEGY_FIELD_PERIOD,
         "local SGD needs its averaging period, from 1 to 1000000 steps");
  REFUSE("accumulation in a pipeline", (a_.text = "pipeline", a_.stages = 2, a_.accumulate = 2),
         DPC_STRATEGY_EXCLUDES, DPC_STRATEGY_FIELD_ACCUMULATE,
         "a pipeline splits a batch into its micro-batches; an accumulation does not go with it");
  REFUSE("async model parallel", (a_.text = "model", a_.async = true, a_.devices = 2),
         DPC_STRATEGY_EXCLUDES, DPC_STRATEGY_FIELD_ASYNC,
         "asynchronous training runs data-parallel workers, not the model strategy");
  REFUSE("async local SGD", (a_.async = true, a_.period = 2, a_.devices = 2), DPC_STRATEGY_EXCLUDES,
         DPC_STRATEGY_FIELD_PERIOD, "local SGD's averaging does not go with asynchronous training");
  REFUSE("local SGD of hybrid replicas", (a_.text = "hybrid", a_.period = 2, a_.mp = 2),
         DPC_STRATEGY_EXCLUDES, DPC_STRATEGY_FIELD_PERIOD,
         "local SGD averages data-parallel replicas, not the hybrid strategy");
  REFUSE("async accumulation", (a_.async = true, a_.accumulate = 2, a_.devices = 2),
         DPC_STRATEGY_EXCLUDES, DPC_STRATEGY_FIELD_ACCUMULATE,
         "an accumulation does not go with asynchronous training");
  REFUSE("micro-batches 0", (a_.text = "pipeline", a_.stages = 2, a_.microbatches = 0),
         DPC_STRATEGY_RANGE, DPC_STRATEGY_FIELD_MICROBATCHES,
         "the micro-batches per batch must be from 1 to 256, not 0");
  REFUSE("257 pipelines", (a_.text = "pipeline", a_.stages = 2, a_.dp = 257), DPC_STRATEGY_RANGE,
         DPC_STRATEGY_FIELD_DP, "the data-parallel pipelines must be from 1 to 256, not 257");
  REFUSE("129 pipelines of 2 stages", (a_.text = "pipeline", a_.stages = 2, a_.dp = 129),
         DPC_STRATEGY_RANGE, DPC_STRATEGY_FIELD_DP,
         "129 pipelines of 2 stages make 258 devices; at most 256 devices");
  REFUSE("accumulation 257", a_.accumulate = 257, DPC_STRATEGY_RANGE, DPC_STRATEGY_FIELD_ACCUMULATE,
         "the accumulation must be from 1 to 256, not 257");
  REFUSE("staleness too large", (a_.async = true, a_.staleness = 1000001, a_.devices = 2),
         DPC_STRATEGY_RANGE, DPC_STRATEGY_FIELD_STALENESS,
         "the staleness must be from 0 to 1000000, not 1000001");
  REFUSE("period 0", (a_.period = 0, a_.devices = 2), DPC_STRATEGY_RANGE, DPC_STRATEGY_FIELD_PERIOD,
         "the averaging period must be from 1 to 1000000, not 0");
  REFUSE("single on several devices", (a_.text = "single", a_.devices = 2),
         DPC_STRATEGY_MANY_DEVICES, DPC_STRATEGY_FIELD_KIND,
         "the single strategy takes one device, not 2");
  REFUSE("model on one device", a_.text = "model", DPC_STRATEGY_FEW_DEVICES,
         DPC_STRATEGY_FIELD_KIND,
         "the model strategy spreads the model over several devices: it needs 2 or more devices, "
         "not 1");
  REFUSE("async on one device", a_.async = true, DPC_STRATEGY_FEW_DEVICES, DPC_STRATEGY_FIELD_ASYNC,
         "the async strategy trains data-parallel replicas on several devices: it needs 2 or "
         "more devices, not 1");
  REFUSE("local SGD on one device", (a_.period = 2, a_.devices = 1), DPC_STRATEGY_FEW_DEVICES,
         DPC_STRATEGY_FIELD_PERIOD,
         "the local_sgd strategy trains data-parallel replicas on several devices: it needs 2 or "
         "more devices, not 1");
  REFUSE("3 stages on 2 devices", (a_.text = "pipeline", a_.stages = 3, a_.devices = 2),
         DPC_STRATEGY_DEVICES_SPLIT, DPC_STRATEGY_FIELD_STAGES,
         "the 3 pipeline stages do not divide the 2 devices");
  REFUSE("pipelines that miss the devices",
         (a_.text = "pipeline", a_.stages = 2, a_.dp = 2, a_.devices = 2),
         DPC_STRATEGY_DEVICES_SPLIT, DPC_STRATEGY_FIELD_DP,
         "2 pipelines of 2 stages take 4 devices, not 2");
  REFUSE("hybrid of one replica", (a_.text = "hybrid", a_.mp = 4, a_.devices = 4),
         DPC_STRATEGY_DEVICES_SPLIT, DPC_STRATEGY_FIELD_MP,
         "4 devices per replica do not divide the 4 devices into 2 or more replicas");
  REFUSE("hybrid that does not divide", (a_.text = "hybrid", a_.mp = 3, a_.devices = 4),
         DPC_STRATEGY_DEVICES_SPLIT, DPC_STRATEGY_FIELD_MP,
         "3 devices per replica do not divide the 4 devices into 2 or more replicas");
  REFUSE("a batch over 2 replicas", (a_.batch = 63, a_.devices = 2), DPC_STRATEGY_BATCH_SPLIT,
         DPC_STRATEGY_FIELD_BATCH,
         "the batch of 63 does not split evenly over 2 data-parallel replicas");
  REFUSE("accumulation of a share", (a_.batch = 64, a_.devices = 2, a_.accumulate = 3),
         DPC_STRATEGY_MICRO_SPLIT, DPC_STRATEGY_FIELD_ACCUMULATE,
         "3 micro-batches do not divide 32 samples into equal parts");
  REFUSE("micro-batches of a pipeline's share",
         (a_.text = "pipeline:stages=2,microbatches=3", a_.batch = 64), DPC_STRATEGY_MICRO_SPLIT,
         DPC_STRATEGY_FIELD_MICROBATCHES,
         "3 micro-batches do not divide 64 samples into equal parts");
#undef REFUSE
  for (int i = 0; i < n; i++) {
    dpc_strategy s;
    dpc_strategy_error e;
    char msg[512];
    dpc_status st = parse(&r[i].a, &s, &e, msg, sizeof msg);
    CHECK_MSG(st == DPC_ERR_INVALID, "%s: status %d", r[i].what, (int)st);
    CHECK_MSG(e.problem == r[i].problem && e.field == r[i].field, "%s: problem %d field %d",
              r[i].what, (int)e.problem, (int)e.field);
    CHECK_MSG(!strcmp(msg, r[i].msg), "%s: '%s'", r[i].what, msg);
    CHECK_MSG(!strstr(msg, "--"), "%s names a flag: '%s'", r[i].what, msg);
  }
  /* the values a front end words its own message with */
  dpc_strategy_args a = args("pipeline", 2);
  a.stages = 3;
  dpc_strategy s;
  dpc_strategy_error e;
  char msg[512];
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_ERR_INVALID);
  CHECK(e.value == 3 && e.devices == 2 && e.kind == DPC_STRATEGY_PIPELINE);
  a = args(NULL, 2);
  a.batch = 64, a.accumulate = 3;
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_ERR_INVALID);
  CHECK(e.value == 3 && e.lo == 32 && e.replicas == 2);
  /* uneven shares and asynchronous workers split a batch by their own rules */
  a = args(NULL, 2);
  a.batch = 63, a.shares = "40,23";
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK);
  a = args(NULL, 2);
  a.batch = 63, a.async = true;
  CHECK(parse(&a, &s, &e, msg, sizeof msg) == DPC_OK);
}

static void kind_names(void) {
  for (int k = 0; k < DPC_STRATEGY_KINDS; k++) {
    dpc_strategy_kind back;
    CHECK(dpc_strategy_kind_parse(dpc_strategy_kind_name((dpc_strategy_kind)k), &back));
    CHECK(back == (dpc_strategy_kind)k);
  }
  dpc_strategy_kind k;
  CHECK(!dpc_strategy_kind_parse("Data", &k) && !dpc_strategy_kind_parse("", &k));
}

const unit_test unit_tests[] = {
    {"every_kind", every_kind},
    {"refused", refused},
    {"kind_names", kind_names},
    {NULL, NULL},
};
