/*
 * test_runtime.c — the runtime's own pieces: .npy files, initializers, the session and the
 * driver path (symbolic batch bound from data, inputs only the loss needs left out).
 */
#include "frontend/frontend.h"
#include "runtime/batcher_auto.h"
#include "runtime/init.h"
#include "runtime/npy.h"
#include "runtime/rng.h"
#include "runtime/session.h"
#include "tests/unit/unit.h"
#include "driver/driver.h"

#include <stdlib.h>
#include <unistd.h>

static void npy_roundtrip(void) {
  char path[] = "/tmp/dpc_npy_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  for (int t = 0; t < DPC_DTYPE_COUNT; t++) {
    double vals[6] = {1, -2, 3.5, 0, 1, 65504};
    dpc_tensor a = {malloc(48), (dpc_dtype)t, {2, {2, 3}}};
    for (int i = 0; i < 6; i++) dpc_tstore(&a, i, vals[i]);
    dpc_diag d;
    dpc_diag_init(&d);
    CHECK(dpc_npy_write(path, &a, &d) == DPC_OK);
    dpc_tensor b;
    CHECK_MSG(dpc_npy_read(path, &b, &d) == DPC_OK, "%s", d.msg);
    CHECK(b.shape.rank == 2 && b.shape.d[0] == 2 && b.shape.d[1] == 3);
    CHECK(b.dtype == (t == DPC_BF16 ? DPC_F32 : (dpc_dtype)t));
    for (int i = 0; i < 6; i++) CHECK(dpc_tload(&b, i) == dpc_tload(&a, i));
    free(a.data);
    free(b.data);
    dpc_diag_free(&d);
  }
  unlink(path);
}

/* An .npy image with the given header text and `extra` bytes of data after it. */
static size_t make_npy(unsigned char *buf, unsigned version, const char *header, size_t extra) {
  size_t h = strlen(header);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)version;
  buf[7] = 0;
  buf[8] = (unsigned char)(h & 0xff);
  buf[9] = (unsigned char)(h >> 8);
  memcpy(buf + 10, header, h);
  memset(buf + 10 + h, 0, extra);
  return 10 + h + extra;
}

static void npy_rejects_garbage(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_tensor t;
  unsigned char buf[512];
  struct {
    unsigned version;
    const char *header;
    size_t extra;
    const char *want;
  } cases[] = {
      {1, "{'descr': '<f4'", 0, "not a valid .npy header"},
      {1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, "not supported"},
      {1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "big-endian"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 7, "truncated"},
      {1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "Fortran"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 16, "not a number"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999, 99999999), }", 0,
       "too large"},
      {1, "{'descr': '<f4', 'fortran_order': False}", 0, "missing"},
      {9, "{}", 0, "version"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t n = make_npy(buf, cases[i].version, cases[i].header, cases[i].extra);
    CHECK_MSG(dpc_npy_parse(buf, n, "f.npy", &t, &d) != DPC_OK, "case %zu parsed", i);
    CHECK_MSG(d.msg && strstr(d.msg, cases[i].want), "case %zu: %s", i, d.msg ? d.msg : "");
  }
  CHECK(dpc_npy_parse("not npy at all", 14, "f.npy", &t, &d) == DPC_ERR_SYNTAX);
  /* a header length that runs past the end */
  size_t n = make_npy(buf, 1, "{}", 0);
  buf[8] = 0xff;
  CHECK(dpc_npy_parse(buf, n, "f.npy", &t, &d) == DPC_ERR_SYNTAX && strstr(d.msg, "truncated"));
  dpc_diag_free(&d);
}

static void initializers(void) {
  dpc_graph *g;
  dpc_diag d;
  dpc_diag_init(&d);
  const char *src = "param a: f32[256, 256] = he_normal(seed=1)\n"
                    "param b: f32[256, 128] = xavier_uniform(seed=2)\n"
                    "param c: f32[64, 64] = uniform(low=-2, high=3)\n"
                    "param e: f32[64, 64] = uniform(low=-2, high=3)\n"
                    "state s: f32[4] = constant(0.25)\n";
  CHECK(dpc_parse_graph("init", src, strlen(src), &g, &d) == DPC_OK);
  if (!g) return;
  float *buf = malloc(256 * 256 * sizeof *buf);
  dpc_tensor t = {buf, DPC_F32, {2, {256, 256}}};
  CHECK(dpc_init_fill(g, 0, &t, &d) == DPC_OK);
  double sum = 0, sq = 0;
  for (int i = 0; i < 65536; i++) sum += buf[i], sq += (double)buf[i] * buf[i];
  double mean = sum / 65536, std = sqrt(sq / 65536 - mean * mean);
  CHECK_NEAR(mean, 0, 0.003);
  CHECK_NEAR(std, sqrt(2.0 / 256), 0.02 * sqrt(2.0 / 256)); /* kaiming: gain sqrt(2), fan_in 256 */
  t.shape.d[1] = 128;
  CHECK(dpc_init_fill(g, 1, &t, &d) == DPC_OK);
  double bound = sqrt(6.0 / (256 + 128)), mx = 0;
  for (int i = 0; i < 256 * 128; i++) mx = fmax(mx, fabs(buf[i]));
  CHECK(mx <= bound && mx > 0.99 * bound);
  /* no seed: the seed is the name's hash, so two params with one initializer differ */
  t.shape = (dpc_shape){2, {64, 64}};
  float *c2 = malloc(64 * 64 * sizeof *c2);
  dpc_tensor t2 = {c2, DPC_F32, t.shape};
  CHECK(dpc_init_fill(g, 2, &t, &d) == DPC_OK && dpc_init_fill(g, 3, &t2, &d) == DPC_OK);
  CHECK(memcmp(buf, c2, 64 * 64 * sizeof *c2) != 0);
  double lo = 1e9, hi = -1e9;
  for (int i = 0; i < 64 * 64; i++) lo = fmin(lo, buf[i]), hi = fmax(hi, buf[i]);
  CHECK(lo >= -2 && hi < 3 && lo < -1.9 && hi > 2.9);
  /* and it is reproducible */
  CHECK(dpc_init_fill(g, 3, &t, &d) == DPC_OK && !memcmp(buf, c2, 64 * 64 * sizeof *c2));
  t.shape = (dpc_shape){1, {4}};
  CHECK(dpc_init_fill(g, 4, &t, &d) == DPC_OK && buf[0] == 0.25f && buf[3] == 0.25f);
  /* the generator's first values, pinned so the Python mirror in tests/ops stays in step */
  CHECK(dpc_rng_bits(0, 0) == dpc_mix64(dpc_mix64(0)));
  CHECK(dpc_rng_uniform(7, 3) >= 0 && dpc_rng_uniform(7, 3) < 1);
  free(buf);
  free(c2);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* The MLP's labels input is only needed by the loss: inference runs without it, with the batch
 * size bound from x. */
static void driver_binds_batch(void) {
  const char *src = "input x: f32[N, 3]\ninput y: i32[N]\nparam w: f32[3, 2] = ones\n"
                    "logits = matmul(x, w) * 0.5\nloss = softmax_cross_entropy(logits, y)\n"
                    "output logits\nminimize loss with sgd(lr=0.1)\n";
  dpc_graph *g;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(dpc_parse_graph("m", src, strlen(src), &g, &d) == DPC_OK);
  if (!g) return;
  float xs[5 * 3];
  for (int i = 0; i < 15; i++) xs[i] = (float)i;
  dpc_named feed = {"x", {xs, DPC_F32, {2, {5, 3}}}};
  dpc_named *outs;
  uint32_t n;
  CHECK_MSG(dpc_driver_infer(g, NULL, NULL, &feed, 1, false, &outs, &n, &d) == DPC_OK, "%s", d.msg);
  if (d.status == DPC_OK) {
    CHECK(n == 1 && !strcmp(outs[0].name, "logits") && outs[0].t.shape.d[0] == 5);
    const float *o = outs[0].t.data;
    for (int r = 0; r < 5; r++) CHECK(o[2 * r] == 0.5f * (float)(3 * r + 3 * r + 1 + 3 * r + 2));
    dpc_named_free(outs, n);
  }
  /* a wrong feature size names the input and both shapes */
  feed.t.shape = (dpc_shape){2, {3, 5}};
  CHECK(dpc_driver_infer(g, NULL, NULL, &feed, 1, false, &outs, &n, &d) == DPC_ERR_SHAPE);
  CHECK_MSG(d.msg && strstr(d.msg, "f32[N, 3]") && strstr(d.msg, "f32[3, 5]"), "%s", d.msg);
  /* an unknown feed is refused with the inputs listed */
  dpc_named bogus = {"q", {xs, DPC_F32, {1, {3}}}};
  CHECK(dpc_driver_infer(g, NULL, NULL, &bogus, 1, false, &outs, &n, &d) == DPC_ERR_INVALID);
  CHECK_MSG(d.msg && strstr(d.msg, "inputs: x, y"), "%s", d.msg);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* The batcher's auto delay on made-up measurements: a batch of b rows takes 100 + 10 b us, one
 * instance, batches of at most 64 rows, a 20 ms target. */
static dpc_auto_input auto_input(double rate) {
  dpc_auto_input in = {.rate = rate,
                       .rows_per_req = 1,
                       .instances = 1,
                       .max_batch = 64,
                       .target_s = 0.020,
                       .behind_s = -1};
  for (int k = 0; k <= 6; k++)
    in.bucket_rows[k] = (double)(1 << k), in.bucket_s[k] = 100e-6 + 10e-6 * (double)(1 << k);
  return in;
}

static void batcher_auto_delay(void) {
  dpc_auto_input in = auto_input(0);
  /* the service time: measured points, linear between them, along the last two past the
   * largest */
  CHECK_NEAR(dpc_batcher_auto_service(&in, 1), 110e-6, 1e-12);
  CHECK_NEAR(dpc_batcher_auto_service(&in, 3), 130e-6, 1e-12);
  CHECK_NEAR(dpc_batcher_auto_service(&in, 128), 1380e-6, 1e-12);
  /* only batches of one and two measured (a light load): 32 rows along their line, where no
   * gain from batching would say 32 x 110 us */
  dpc_auto_input small = auto_input(0);
  for (int k = 2; k <= 6; k++) small.bucket_rows[k] = 0;
  CHECK_NEAR(dpc_batcher_auto_service(&small, 32), 420e-6, 1e-12);
  small.bucket_rows[1] = 0; /* one point: no more gain than measured */
  CHECK_NEAR(dpc_batcher_auto_service(&small, 32), 32 * 110e-6, 1e-12);
  small.bucket_rows[1] = 2, small.bucket_s[1] = 300e-6; /* steeper than proportional: as one */
  CHECK_NEAR(dpc_batcher_auto_service(&small, 32), 32 * 150e-6, 1e-12);
  dpc_auto_input none = {.rate = 5000, .rows_per_req = 1, .instances = 1, .max_batch = 64};
  CHECK_NEAR(dpc_batcher_auto_service(&none, 4), 0, 0);

  dpc_auto_choice c;
  dpc_batcher_auto_choose(&none, &c); /* nothing measured: no delay */
  CHECK(c.delay_us == 0 && strstr(c.why, "no load measured"));

  in = auto_input(1000); /* 11% busy with batches of one: waiting only adds latency */
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 0 && strstr(c.why, "light load") && strstr(c.why, "11% busy"), "%s",
            c.why);

  /* 88% busy with batches of one: a short delay makes batches that cut the p99 */
  in = auto_input(8000);
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us > 0 && c.delay_us <= 2000 && c.busy <= 0.8 && c.batch_rows > 1, "%s", c.why);
  CHECK_MSG(c.p99_s <= 0.020 && strstr(c.why, "shortest p99"), "%s", c.why);
  dpc_auto_input zero = in;
  zero.target_s = 1e-9; /* a delay of 0 only: its p99 is the longer */
  dpc_auto_choice c0;
  dpc_batcher_auto_choose(&zero, &c0);
  CHECK_MSG(c0.delay_us == 0 && strstr(c0.why, "target is shorter"), "%s", c0.why);
  CHECK_MSG(c.p99_s < c0.p99_s, "%g against %g with no delay", c.p99_s, c0.p99_s);

  /* past capacity (64 rows in 740 us is 86k rows/s): full batches, the target said missed */
  in = auto_input(100000);
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.batch_rows == 64 && strstr(c.why, "past capacity"), "%s", c.why);

  /* two instances halve the load each sees */
  in = auto_input(8000);
  in.instances = 2;
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 0 && strstr(c.why, "light load"), "%s", c.why);
}

/* Batches that run on plans of 1, 4, 16 and 32 rows: a batch takes its plan's time, padding and
 * all; a plan not yet run is read off the measured plans by its rows; the cut leaves padding and
 * a plan slower per row for a smaller plan only when that serves 10% more rows a second. */
static void batcher_auto_plans(void) {
  dpc_auto_input in = {.rate = 1000,
                       .rows_per_req = 1,
                       .instances = 1,
                       .max_batch = 32,
                       .target_s = 0.010,
                       .behind_s = -1,
                       .n_plans = 4};
  const double rows[] = {1, 4, 16, 32}, us[] = {70, 200, 760, 1600};
  for (int k = 0; k < 4; k++)
    in.plan_rows[k] = rows[k], in.bucket_rows[k] = rows[k], in.bucket_s[k] = us[k] * 1e-6;
  CHECK(dpc_batcher_auto_plan(&in, 1) == 0 && dpc_batcher_auto_plan(&in, 2) == 1);
  CHECK(dpc_batcher_auto_plan(&in, 17) == 3 && dpc_batcher_auto_plan(&in, 99) == 3);
  CHECK_NEAR(dpc_batcher_auto_service(&in, 2), 200e-6, 1e-12);   /* pads to 4 */
  CHECK_NEAR(dpc_batcher_auto_service(&in, 17), 1600e-6, 1e-12); /* pads to 32 */
  in.bucket_rows[2] = 0; /* 16 not yet run: on the line from 4 to 32 rows at 16 */
  CHECK_NEAR(dpc_batcher_auto_service(&in, 9), (200 + 12.0 / 28 * 1400) * 1e-6, 1e-12);
  in.bucket_rows[2] = 16;
  /* 24 rows would pad to 32 (15 rows a ms): 16 of them run at 21 a ms */
  CHECK_NEAR(dpc_batcher_auto_cut(&in, 24), 16, 0);
  /* a full 32 (20 a ms) against 16 (21.1): within 10%, all of them */
  CHECK_NEAR(dpc_batcher_auto_cut(&in, 32), 32, 0);
  in.bucket_s[3] = 2000e-6; /* 32 at 16 a ms: 16 is 32% better */
  CHECK_NEAR(dpc_batcher_auto_cut(&in, 32), 16, 0);
  CHECK_NEAR(dpc_batcher_auto_cut(&in, 16), 16, 0); /* a plan's own rows: all */
  CHECK_NEAR(dpc_batcher_auto_cut(&in, 3), 3, 0);   /* 3 on the 4-plan: 15 a ms, 1 alone 14 */
  in.bucket_rows[3] = 0; /* the plan it pads to not measured: all, which measures it */
  CHECK_NEAR(dpc_batcher_auto_cut(&in, 24), 24, 0);
  dpc_auto_input flat = in;
  flat.n_plans = 0; /* no plans: rows are what they are */
  CHECK_NEAR(dpc_batcher_auto_cut(&flat, 24), 24, 0);
}

/* The typical service time: a slow first batch forgotten quickly, a preempted one counted as at
 * most twice the typical time. */
static void batcher_auto_measure(void) {
  dpc_auto_input in = auto_input(0);
  for (int k = 0; k < DPC_AUTO_BUCKETS; k++) in.bucket_rows[k] = 0;
  dpc_batcher_auto_measure(&in, 3, 8, 1000e-6); /* a plan's first run, cold */
  CHECK_NEAR(in.bucket_s[3], 1000e-6, 1e-12);
  CHECK_NEAR(in.bucket_rows[3], 8, 1e-12);
  for (int i = 0; i < 20; i++) dpc_batcher_auto_measure(&in, 3, 8, 200e-6);
  /* 800 us too slow at first, 0.7^20 of that left */
  CHECK_NEAR(in.bucket_s[3], 200e-6 + 800e-6 * 7.979e-4, 1e-9);
  double settled = in.bucket_s[3];
  dpc_batcher_auto_measure(&in, 3, 8, 20000e-6); /* preempted for 20 ms */
  CHECK_NEAR(in.bucket_s[3], settled * 1.1, 1e-12);
  CHECK_NEAR(in.stall_s, 5e-3, 1e-12);                 /* a quarter of the 20 ms target at most */
  dpc_batcher_auto_measure(&in, 3, 12, settled * 1.1); /* rows follow by a quarter */
  CHECK_NEAR(in.bucket_rows[3], 9, 1e-12);
  CHECK_NEAR(in.bucket_s[3], settled * 1.1, 1e-12);
  CHECK_NEAR(in.stall_s, 5e-3 * 0.998, 1e-12);           /* then decaying per batch */
  dpc_batcher_auto_measure(&in, DPC_AUTO_BUCKETS, 8, 1); /* out of range: ignored */
  dpc_batcher_auto_measure(&in, 2, 0, 1);
  CHECK(in.bucket_rows[2] == 0);
}

/* The choice damped: after the queue fell behind, more headroom and no shorter delay; the delay
 * in force kept unless a change gains clearly; no delay at light load kept to a lower load once a
 * delay is in force. */
static void batcher_auto_damped(void) {
  dpc_auto_choice c, c_behind;
  /* 50k requests/s: 67% busy predicted at 200 us; just behind, 500 us and 58% */
  dpc_auto_input in = auto_input(50000);
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 200 && c.busy > 0.6 && c.busy <= 0.8, "%s", c.why);
  in.behind_s = 0.1;
  dpc_batcher_auto_choose(&in, &c_behind);
  CHECK_MSG(c_behind.delay_us == 500 && c_behind.busy <= 0.6 &&
                strstr(c_behind.why, "the queue fell behind"),
            "%s", c_behind.why);
  in.behind_s = 0.3; /* long enough ago: as before */
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 200 && !strstr(c.why, "behind"), "%s", c.why);

  /* behind, a longer delay in force stays though 200 us predicts the shorter p99 */
  in = auto_input(8000);
  in.delay_us = 2000, in.behind_s = 0.05;
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 2000 && strstr(c.why, "fell behind"), "%s", c.why);
  in.behind_s = -1; /* never behind: the delay in force goes for 200 us, 0.51 ms of p99 */
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 200 && c.p99_s < 0.52e-3 && strstr(c.why, "shortest p99"), "%s", c.why);
  /* 100 us predicts 0.53 ms, within 15% of the best: kept */
  in.delay_us = 100;
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 100 && c.p99_s > 0.52e-3 && strstr(c.why, "kept"), "%s", c.why);
  /* a light load behind stays at no delay: batches of one keep the instances 11% busy */
  in = auto_input(1000);
  in.behind_s = 0;
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 0 && c.busy < 0.12 && strstr(c.why, "fell behind"), "%s", c.why);

  /* stalls of 2.5 ms on a busy machine: a longer delay, for larger batches and time to spare */
  in = auto_input(20000);
  dpc_auto_choice calm;
  dpc_batcher_auto_choose(&in, &calm);
  in.stall_s = 2.5e-3;
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(calm.delay_us == 200 && c.delay_us == 500 && c.busy < calm.busy - 0.1 &&
                c.p99_s > 2.5e-3 && c.p99_s < 0.020,
            "%s against %s", c.why, calm.why);

  /* the process using 95% of the cores (its HTTP threads): the most capacity under the
   * target, not the shortest p99, and not light load either */
  in = auto_input(20000);
  in.cpu_busy = 0.95;
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us > calm.delay_us && c.busy < calm.busy && c.p99_s <= in.target_s &&
                strstr(c.why, "95% of the cores"),
            "%s against %s", c.why, calm.why);
  in = auto_input(1000);
  in.cpu_busy = 0.95;
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us > 0 && !strstr(c.why, "light load"), "%s", c.why);
  in.cpu_busy = 0.5; /* half the cores: light load as before */
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 0 && strstr(c.why, "light load"), "%s", c.why);

  /* 45% busy with batches of one: light with no delay in force, not once a delay is */
  in = auto_input(4091);
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(c.delay_us == 0 && strstr(c.why, "light load"), "%s", c.why);
  in.delay_us = 500;
  dpc_batcher_auto_choose(&in, &c);
  CHECK_MSG(!strstr(c.why, "light load") && strstr(c.why, "shortest p99"), "%s", c.why);
}

const unit_test unit_tests[] = {
    {"batcher_auto_delay", batcher_auto_delay},
    {"batcher_auto_measure", batcher_auto_measure},
    {"batcher_auto_damped", batcher_auto_damped},
    {"batcher_auto_plans", batcher_auto_plans},
    {"npy_roundtrip", npy_roundtrip},
    {"npy_rejects_garbage", npy_rejects_garbage},
    {"initializers", initializers},
    {"driver_binds_batch", driver_binds_batch},
    {NULL, NULL},
};
