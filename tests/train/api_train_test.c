/*
 * api_train_test.c — libdpc's trainer through its public header alone (dpc/train.h): a caller's
 * data source trains the same losses, bit for bit, as the same samples given as an .npy pair; a
 * failing source and a label outside the classes end the run naming the source; the strategy's
 * text form trains what the same strategy parsed by dpc_strategy_parse trains; bad options are
 * refused with messages that name no command-line flag.
 *   api_train_test MODEL.graph WORK_DIR
 */
#include <dpc/train.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES 96
#define DIM     784
#define CLASSES 10
#define STEPS   6

static int fails;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (cond) {                                                                                    \
      printf("ok   ");                                                                             \
    } else {                                                                                       \
      printf("FAIL ");                                                                             \
      fails++;                                                                                     \
    }                                                                                              \
    printf(__VA_ARGS__);                                                                           \
    printf("\n");                                                                                  \
  } while (0)

static float xs[SAMPLES * DIM];
static int64_t ys[SAMPLES];

/* Deterministic samples: label k, and pixels that lean towards it. */
static void make_data(void) {
  unsigned long long s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < SAMPLES; i++) {
    ys[i] = (i * 7) % CLASSES;
    for (int j = 0; j < DIM; j++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      float u = (float)(s >> 40) / (float)(1ull << 24);
      xs[i * DIM + j] = u * 0.5f + (j % CLASSES == ys[i] ? 0.5f : 0.0f);
    }
  }
}

typedef struct source_state {
  int calls;
  int fail_at;   /* the call that fails (0: none) */
  int bad_label; /* write label 12 into the first sample (0: no) */
} source_state;

static int fill(void *user, const uint64_t *idx, uint32_t n, float *x, int64_t *y, char *err,
                size_t err_len) {
  source_state *st = user;
  if (++st->calls == st->fail_at) {
    snprintf(err, err_len, "the disk went away at call %d", st->calls);
    return 1;
  }
  for (uint32_t i = 0; i < n; i++) {
    memcpy(x + (size_t)i * DIM, xs + idx[i] * DIM, DIM * sizeof *x);
    y[i] = ys[idx[i]];
  }
  if (st->bad_label) y[0] = 12;
  return 0;
}

static dpc_data_source source(source_state *st) {
  dpc_data_source s = {sizeof s, "synthetic", SAMPLES, 1, {DIM}, CLASSES, fill, st};
  return s;
}

typedef struct record {
  double loss[64];
  int steps;
  double test_accuracy;
} record;

static void on_step(void *user, const dpc_train_step *s) {
  record *r = user;
  if (r->steps < 64) r->loss[r->steps++] = s->loss;
}

static void on_epoch(void *user, const dpc_train_epoch *e) {
  record *r = user;
  if (e->evaluated) r->test_accuracy = e->test_accuracy;
}

static void opts(dpc_trainer_opts *o, record *r) {
  dpc_trainer_defaults(o);
  o->build.backend = "ref";
  o->batch = 16;
  o->steps = STEPS;
  o->seed = 3;
  o->on_step = on_step;
  o->on_epoch = on_epoch;
  o->user = r;
  memset(r, 0, sizeof *r);
  r->test_accuracy = NAN;
}

static int same(const record *a, const record *b) {
  return a->steps == STEPS && b->steps == STEPS && !memcmp(a->loss, b->loss, sizeof a->loss);
}

/* a run with the message cleared first, so it shows this run's */
static dpc_status train_run(const dpc_net *n, const dpc_trainer_opts *o, dpc_message *m) {
  dpc_message_clear(m);
  return dpc_trainer_run(n, o, m);
}

/* the message names no flag: no " --" in it */
static int no_flag(const char *text) {
  return !strstr(text, "--");
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: api_train_test MODEL.graph WORK_DIR\n");
    return 2;
  }
  make_data();
  dpc_message *m = dpc_message_new();
  dpc_net *net = NULL;
  if (dpc_net_load(argv[1], NULL, &net, m)) {
    fprintf(stderr, "%s\n", dpc_message_text(m));
    return 1;
  }
  char xp[4096], yp[4096], pair[8200];
  snprintf(xp, sizeof xp, "%s/x.npy", argv[2]);
  snprintf(yp, sizeof yp, "%s/y.npy", argv[2]);
  snprintf(pair, sizeof pair, "%s,%s", xp, yp);
  dpc_array xa = {"x", DPC_ELEM_F32, 2, {SAMPLES, DIM}, xs, sizeof xs};
  dpc_array ya = {"y", DPC_ELEM_I64, 1, {SAMPLES}, ys, sizeof ys};
  if (dpc_npy_save(xp, &xa, m) || dpc_npy_save(yp, &ya, m)) {
    fprintf(stderr, "%s\n", dpc_message_text(m));
    return 1;
  }

  /* -- a source trains as the same samples in files, and evaluates the same -- */
  record files, src;
  dpc_trainer_opts o;
  opts(&o, &files);
  o.data = pair;
  o.test_data = pair;
  dpc_status st = train_run(net, &o, m);
  CHECK(!st, "the npy pair trains: %s", dpc_message_text(m));
  source_state s1 = {0}, s2 = {0};
  dpc_data_source train = source(&s1), test = source(&s2);
  opts(&o, &src);
  o.train_source = &train;
  o.test_source = &test;
  st = train_run(net, &o, m);
  CHECK(!st, "the source trains: %s", dpc_message_text(m));
  CHECK(same(&files, &src), "a source's losses are the npy pair's, bit for bit (%d, %d steps)",
        files.steps, src.steps);
  CHECK(s1.calls == STEPS && s2.calls > 0, "fill() is asked once a step (%d), and to evaluate",
        s1.calls);
  CHECK(!isnan(files.test_accuracy) && files.test_accuracy == src.test_accuracy,
        "the test source evaluates as the test files (%g, %g)", files.test_accuracy,
        src.test_accuracy);

  /* -- a failing source, a label outside the classes -- */
  source_state bad = {.fail_at = 3};
  train = source(&bad);
  opts(&o, &src);
  o.train_source = &train;
  st = train_run(net, &o, m);
  CHECK(st && strstr(dpc_message_text(m), "synthetic") &&
            strstr(dpc_message_text(m), "the disk went away at call 3") && src.steps == 2,
        "a failing fill() ends the run naming the source: %s", dpc_message_text(m));
  source_state label = {.bad_label = 1};
  train = source(&label);
  opts(&o, &src);
  o.train_source = &train;
  st = train_run(net, &o, m);
  CHECK(st && strstr(dpc_message_text(m), "synthetic") && strstr(dpc_message_text(m), "12"),
        "a label outside the classes is refused naming the source: %s", dpc_message_text(m));
  train = source(&s1);
  train.classes = 11;
  opts(&o, &src);
  o.train_source = &train;
  o.data = pair;
  st = train_run(net, &o, m);
  CHECK(st == DPC_ERR_INVALID && no_flag(dpc_message_text(m)),
        "a dataset and a source at once are refused: %s", dpc_message_text(m));

  /* -- the strategy's text form trains as the parsed strategy -- */
  static const struct {
    const char *devices, *text;
  } forms[] = {
      {"cpu:2", "local_sgd:period=2"},
      {NULL, "pipeline:stages=2,microbatches=2,schedule=gpipe"},
      {NULL, "data:accumulate=2"},
      {"cpu:2", "async:staleness=0"},
      {"cpu:2", "model"},
  };
  for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
    record text, typed;
    opts(&o, &text);
    o.data = pair;
    o.test_data = NULL;
    o.devices = forms[i].devices;
    o.strategy = forms[i].text;
    st = train_run(net, &o, m);
    CHECK(!st, "strategy '%s' as text trains: %s", forms[i].text, dpc_message_text(m));
    dpc_strategy_args a;
    dpc_strategy_args_init(&a);
    a.text = forms[i].text;
    a.batch = 16;
    if (forms[i].devices && dpc_devices_count(forms[i].devices, &a.devices, m)) return 1;
    dpc_strategy s;
    if (dpc_strategy_parse(&a, &s, NULL, m)) {
      CHECK(0, "strategy '%s' parses: %s", forms[i].text, dpc_message_text(m));
      continue;
    }
    opts(&o, &typed);
    o.data = pair;
    o.devices = forms[i].devices;
    o.strategy = "this text is not read";
    o.typed_strategy = &s;
    st = train_run(net, &o, m);
    CHECK(!st && same(&text, &typed), "strategy '%s' parsed trains the text's losses: %s",
          forms[i].text, dpc_message_text(m));
  }
  record none, data;
  opts(&o, &none);
  o.data = pair;
  o.devices = "cpu:2";
  st = train_run(net, &o, m);
  opts(&o, &data);
  o.data = pair;
  o.devices = "cpu:2";
  o.strategy = "data";
  st = st ? st : train_run(net, &o, m);
  CHECK(!st && same(&none, &data), "no strategy on cpu:2 is data parallel: %s",
        dpc_message_text(m));

  /* -- refused, in words of meaning -- */
  static const char *bad_texts[] = {"pipeline:stages=3", "hybrid", "model:placement=contiguous",
                                    "bogus"};
  for (size_t i = 0; i < sizeof bad_texts / sizeof *bad_texts; i++) {
    opts(&o, &src);
    o.data = pair;
    o.devices = "cpu:2";
    o.strategy = bad_texts[i];
    st = train_run(net, &o, m);
    CHECK(st && no_flag(dpc_message_text(m)) && src.steps == 0, "strategy '%s' refused: %s",
          bad_texts[i], dpc_message_text(m));
  }
  opts(&o, &src);
  o.data = pair;
  o.checkpoint_every = 2;
  st = train_run(net, &o, m);
  CHECK(st == DPC_ERR_INVALID && no_flag(dpc_message_text(m)),
        "checkpoints without a path refused: %s", dpc_message_text(m));
  opts(&o, &src);
  o.data = pair;
  o.lr = -1;
  st = train_run(net, &o, m);
  CHECK(st == DPC_ERR_INVALID && no_flag(dpc_message_text(m)), "a negative rate refused: %s",
        dpc_message_text(m));
  opts(&o, &src);
  o.size = 0;
  st = train_run(net, &o, m);
  CHECK(st == DPC_ERR_INVALID, "options of size 0 refused: %s", dpc_message_text(m));
  opts(&o, &src);
  st = train_run(NULL, &o, m);
  CHECK(st == DPC_ERR_INVALID, "no model refused: %s", dpc_message_text(m));

  dpc_net_free(net);
  dpc_message_free(m);
  printf("%d checks failed\n", fails);
  return fails != 0;
}
