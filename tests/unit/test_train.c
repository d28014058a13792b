/*
 * test_train.c — training end to end: per-step losses against PyTorch, bit-identical resume,
 * and the errors a user meets (labels out of range, data that does not fit, no objective).
 *
 * The PyTorch numbers come from tests/train/torch_mlp_oracle.py (run once, output committed).
 */
#include "frontend/frontend.h"
#include "runtime/npy.h"
#include "runtime/rng.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "runtime/safetensors.h"
#include "tests/unit/unit.h"
#include "driver/driver.h"
#include "driver/train.h"
#include "driver/train_testing.h"

#include <dirent.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifndef DPC_SOURCE_DIR
#error "DPC_SOURCE_DIR must point at the repository"
#endif

static char tmpdir[64]; /* made by the binary's setup, removed with its files by cleanup */

static void path_in(char *out, size_t n, const char *name) {
  CHECK_MSG(tmpdir[0], "no temporary folder for %s: the fixture's setup did not run", name);
  snprintf(out, n, "%s/%s", tmpdir[0] ? tmpdir : "/nonexistent", name);
}

static dpc_graph *load(const char *path) {
  dpc_graph *g = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK_MSG(dpc_parse_file(path, &g, &d) == DPC_OK, "%s", d.msg);
  dpc_diag_free(&d);
  return g;
}

static dpc_graph *parse(const char *text) {
  dpc_graph *g = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK_MSG(dpc_parse_graph("model.graph", text, strlen(text), &g, &d) == DPC_OK, "%s", d.msg);
  dpc_diag_free(&d);
  return g;
}

static void quiet_opts(dpc_train_opts *o) {
  dpc_train_defaults(o);
}

/* 10 steps of SGD on the first 320 Fashion-MNIST images match PyTorch (oracle committed). */
static void matches_pytorch(void) {
  char oracle[1024], model[1024];
  snprintf(oracle, sizeof oracle, "%s/tests/train/torch_mlp_losses.txt", DPC_SOURCE_DIR);
  snprintf(model, sizeof model, "%s/examples/fashion_mlp.graph", DPC_SOURCE_DIR);
  double want[2][10];
  int have[2] = {0, 0};
  FILE *f = fopen(oracle, "r");
  CHECK_MSG(f != NULL, "cannot open %s", oracle);
  if (!f) return;
  char kind[32];
  int step;
  double loss;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || sscanf(line, "%31s %d %lf", kind, &step, &loss) != 3 || step < 0 ||
        step > 9)
      continue;
    int k = !strcmp(kind, "momentum");
    want[k][step] = loss;
    have[k]++;
  }
  fclose(f);
  CHECK(have[0] == 10 && have[1] == 10);
  dpc_graph *g = load(model);
  if (!g) return;
  for (int k = 0; k < 2; k++) {
    dpc_train_opts o;
    quiet_opts(&o);
    char log[256];
    path_in(log, sizeof log, k ? "momentum.jsonl" : "sgd.jsonl");
    o.batch = 32, o.steps = 10, o.shuffle = false, o.lr = 0.1, o.momentum = k ? 0.9 : 0;
    o.schedule = "constant"; /* the example decays its rate; PyTorch's run does not */
    o.log_path = log;
    dpc_diag d;
    dpc_diag_init(&d);
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK,
              "%s (is dataset-fashion-mnist installed? scripts/setup)", d.msg);
    double got[10];
    CHECK(unit_read_losses(log, got, 10) == 10);
    for (int s = 0; s < 10; s++)
      CHECK_MSG(fabs(got[s] - want[k][s]) <= 1e-5 * fabs(want[k][s]),
                "%s step %d: dpc %.9g, PyTorch %.9g (rel %.2g)", k ? "momentum" : "sgd", s, got[s],
                want[k][s], fabs(got[s] - want[k][s]) / fabs(want[k][s]));
    dpc_diag_free(&d);
  }
  dpc_graph_free(g);
}

/* A small dataset of n samples of `width` values in [0, 1) and labels below `classes`. */
static void write_data(const char *xs, const char *ys, int64_t n, int64_t width, int64_t classes,
                       int64_t bad_label) {
  float *x = malloc((size_t)(n * width) * sizeof *x);
  int32_t *y = malloc((size_t)n * sizeof *y);
  for (int64_t i = 0; i < n * width; i++) x[i] = (float)dpc_rng_uniform(11, (uint64_t)i);
  for (int64_t i = 0; i < n; i++)
    y[i] = (int32_t)(dpc_rng_bits(12, (uint64_t)i) % (uint64_t)classes);
  if (bad_label >= 0) y[n / 2] = (int32_t)bad_label;
  dpc_tensor tx = {x, DPC_F32, {2, {n, width}}}, ty = {y, DPC_I32, {1, {n}}};
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(dpc_npy_write(xs, &tx, &d) == DPC_OK && dpc_npy_write(ys, &ty, &d) == DPC_OK);
  dpc_diag_free(&d);
  free(x);
  free(y);
}

static const char *small_model =
    "model small\ninput x: f32[N, 16]\ninput y: i32[N]\n"
    "param w1: f32[16, 32] = he_normal(seed=1)\nparam b1: f32[32] = zeros\n"
    "param w2: f32[32, 5] = xavier_uniform(seed=2)\nparam b2: f32[5] = zeros\n"
    "h = dropout(relu(matmul(x, w1) + b1), p=0.2, seed=3)\nlogits = matmul(h, w2) + b2\n"
    "loss = softmax_cross_entropy(logits, y)\noutput logits\n"
    "minimize loss with adam(lr=0.01, schedule=cosine, warmup=3)\n";

static bool same_file(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  while (same) {
    int ca = fgetc(fa), cb = fgetc(fb);
    same = ca == cb;
    if (ca == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

/* Two epochs in one run equal one epoch, a checkpoint, and a resumed second epoch: params,
 * Adam moments, schedule, data order and dropout masks all continue exactly. */
static void resume_is_bit_identical(void) {
  char xs[256], ys[256], data[600], a_save[256], b_save[256], ck[256], a_log[256], b_log[256];
  path_in(xs, sizeof xs, "x.npy");
  path_in(ys, sizeof ys, "y.npy");
  write_data(xs, ys, 150, 16, 5, -1);
  snprintf(data, sizeof data, "%s,%s", xs, ys);
  path_in(a_save, sizeof a_save, "a.safetensors");
  path_in(b_save, sizeof b_save, "b.safetensors");
  path_in(ck, sizeof ck, "ck.safetensors");
  path_in(a_log, sizeof a_log, "a.jsonl");
  path_in(b_log, sizeof b_log, "b.jsonl");
  dpc_graph *g = parse(small_model);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_train_opts o;
  /* on the reference kernels, then on compiled ones (deterministic whatever the thread count) */
  for (int llvm = 0; llvm < 2; llvm++) {
    quiet_opts(&o);
    o.exec.backend = llvm ? &dpc_codegen_llvm : NULL;
    o.data = data, o.epochs = 2, o.batch = 32, o.seed = 5; /* 5 batches an epoch, the last 22 */
    o.save_path = a_save, o.log_path = a_log;
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s", d.msg);
    /* the same run, stopped after one epoch with a checkpoint, then resumed */
    o.save_path = NULL, o.log_path = b_log, o.steps = 5, o.checkpoint_path = ck;
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s", d.msg);
    o.steps = 0, o.checkpoint_path = NULL, o.resume_path = ck, o.save_path = b_save;
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s", d.msg);
    CHECK_MSG(same_file(a_save, b_save), "%s: params after resume differ from an uninterrupted run",
              llvm ? "llvm" : "ref");
    double la[16], lb[16];
    int na = unit_read_losses(a_log, la, 16), nb = unit_read_losses(b_log, lb, 16);
    CHECK(na == 10 && nb == 10);
    for (int i = 0; i < na && i < nb; i++)
      CHECK_MSG(la[i] == lb[i], "%s step %d: %.9g vs %.9g", llvm ? "llvm" : "ref", i + 1, la[i],
                lb[i]);
  }
  /* a checkpoint of another model is refused by name */
  dpc_graph *other =
      parse("input x: f32[N, 16]\ninput y: i32[N]\nparam q: f32[16, 5] = zeros\n"
            "logits = matmul(x, q)\nloss = softmax_cross_entropy(logits, y)\noutput logits\n"
            "minimize loss with adam(lr=0.01, schedule=cosine, warmup=3)\n");
  if (other) {
    CHECK(dpc_train(other, &o, &d) == DPC_ERR_INVALID && strstr(d.msg, "has no 'q'"));
    dpc_graph_free(other);
  }
  /* and so is a resume with another batch size */
  o.batch = 16;
  CHECK(dpc_train(g, &o, &d) == DPC_ERR_INVALID && strstr(d.msg, "--batch 32"));
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* The library side of Ctrl-C: a cancel flag raised during step 3 (here from the step callback)
 * stops the run after that step, on one device and with asynchronous workers (staleness 0); the
 * checkpoint goes to stop_checkpoint_path, on_stop says where the run got to, --save is not
 * written, and resuming from the checkpoint gives the uninterrupted run's losses bit for bit. */
typedef struct stop_probe {
  volatile sig_atomic_t flag;
  uint64_t at;
  int stops;
  dpc_train_stop got;
} stop_probe;

static void raise_at(void *user, const dpc_train_step *s) {
  stop_probe *p = user;
  if (s->step == p->at) p->flag = 2;
}

static void record_stop(void *user, const dpc_train_stop *s) {
  stop_probe *p = user;
  p->stops++;
  p->got = *s;
}

static void cancel_stops_between_steps(void) {
  char xs[256], ys[256], data[600], save[256], ck[256], a_log[256], b_log[256];
  path_in(xs, sizeof xs, "cx.npy");
  path_in(ys, sizeof ys, "cy.npy");
  write_data(xs, ys, 150, 16, 5, -1);
  snprintf(data, sizeof data, "%s,%s", xs, ys);
  path_in(save, sizeof save, "c.safetensors");
  path_in(ck, sizeof ck, "c.ckpt.safetensors");
  path_in(a_log, sizeof a_log, "ca.jsonl");
  path_in(b_log, sizeof b_log, "cb.jsonl");
  /* no dropout: asynchronous workers draw masks per sub-batch, not per step */
  dpc_graph *g = parse("model small\ninput x: f32[N, 16]\ninput y: i32[N]\n"
                       "param w1: f32[16, 32] = he_normal(seed=1)\nparam b1: f32[32] = zeros\n"
                       "param w2: f32[32, 5] = xavier_uniform(seed=2)\nparam b2: f32[5] = zeros\n"
                       "h = relu(matmul(x, w1) + b1)\nlogits = matmul(h, w2) + b2\n"
                       "loss = softmax_cross_entropy(logits, y)\noutput logits\n"
                       "minimize loss with adam(lr=0.01, schedule=cosine, warmup=3)\n");
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  for (int async = 0; async < 2; async++) {
    const char *what = async ? "async" : "one device";
    dpc_train_opts o;
    quiet_opts(&o);
    o.exec.backend = &dpc_codegen_llvm;
    o.data = data, o.epochs = 2, o.batch = 32, o.seed = 5;
    if (async) o.devices = "cpu:2", o.async = true, o.staleness = 0;
    o.log_path = a_log;
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s: %s", what, d.msg);
    stop_probe pr = {0, 3, 0, {0}};
    remove(save);
    remove(ck);
    o.log_path = b_log, o.save_path = save, o.stop_checkpoint_path = ck;
    o.cancel = &pr.flag, o.on_step = raise_at, o.on_stop = record_stop, o.user = &pr;
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s: %s", what, d.msg);
    CHECK_MSG(pr.stops == 1 && pr.got.step == 3 && pr.got.epoch == 0 && pr.got.batch == 3 &&
                  pr.got.checkpoint && !strcmp(pr.got.checkpoint, ck),
              "%s: %d stops, step %llu, epoch %llu, batch %llu", what, pr.stops,
              (unsigned long long)pr.got.step, (unsigned long long)pr.got.epoch,
              (unsigned long long)pr.got.batch);
    FILE *f = fopen(save, "rb");
    CHECK_MSG(f == NULL, "%s: a stopped run wrote --save", what);
    if (f) fclose(f);
    o.cancel = NULL, o.on_step = NULL, o.on_stop = NULL, o.resume_path = ck;
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s: resume: %s", what, d.msg);
    double la[32], lb[32];
    int na = unit_read_losses(a_log, la, 32), nb = unit_read_losses(b_log, lb, 32);
    CHECK_MSG(na >= 8 && na == nb, "%s: %d and %d steps", what, na, nb);
    for (int i = 0; i < na && i < nb; i++)
      CHECK_MSG(la[i] == lb[i], "%s step %d: %.9g vs %.9g", what, i + 1, la[i], lb[i]);
    /* already raised before the first step: nothing runs, and the checkpoint is of step 0 */
    pr = (stop_probe){1, 0, 0, {0}};
    o.resume_path = NULL, o.cancel = &pr.flag, o.on_stop = record_stop;
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s: %s", what, d.msg);
    CHECK_MSG(pr.stops == 1 && pr.got.step == 0, "%s: %d stops, step %llu", what, pr.stops,
              (unsigned long long)pr.got.step);
  }
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

static void clear_errors(void) {
  char xs[256], ys[256], data[600], folder[300];
  path_in(xs, sizeof xs, "bx.npy");
  path_in(ys, sizeof ys, "by.npy");
  snprintf(data, sizeof data, "%s,%s", xs, ys);
  dpc_graph *g = parse(small_model);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_train_opts o;
  quiet_opts(&o);
  o.data = data;
  /* a label the logits cannot hold */
  write_data(xs, ys, 40, 16, 5, 7);
  CHECK(dpc_train(g, &o, &d) == DPC_ERR_SHAPE && strstr(d.msg, "labels up to 7") &&
        strstr(d.msg, "5 classes"));
  /* samples of the wrong width */
  write_data(xs, ys, 40, 12, 5, -1);
  CHECK(dpc_train(g, &o, &d) == DPC_ERR_SHAPE && strstr(d.msg, "12 values") &&
        strstr(d.msg, "f32[N, 16]"));
  /* a folder without the IDX files */
  snprintf(folder, sizeof folder, "%s", tmpdir);
  o.data = folder;
  CHECK(dpc_train(g, &o, &d) != DPC_OK && d.msg && strstr(d.msg, "train-images-idx3-ubyte"));
  dpc_graph_free(g);
  /* a model with nothing to minimize */
  g = parse("input x: f32[N, 16]\ninput y: i32[N]\nparam w: f32[16, 5] = zeros\nlogits = matmul(x, "
            "w)\noutput logits\n");
  o.data = data;
  CHECK(g && dpc_train(g, &o, &d) == DPC_ERR_INVALID && strstr(d.msg, "nothing to minimize"));
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

static void setup_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/dpc_train_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    CHECK_MSG(0, "cannot make a temporary folder");
    tmpdir[0] = 0;
  }
}

/* Every file the tests left (a failed test may leave any), then the folder. */
static void cleanup_tmp(void) {
  DIR *dp = opendir(tmpdir);
  CHECK(dp != NULL);
  if (!dp) return;
  struct dirent *e;
  char p[256 + 64];
  while ((e = readdir(dp)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
      CHECK_MSG(unlink(p) == 0, "cannot remove %s", p);
    }
  closedir(dp);
  CHECK_MSG(rmdir(tmpdir) == 0, "cannot remove %s", tmpdir);
}

/* Shares: split in proportion, multiples of the granule, the leftovers to the largest
 * remainders; --shares parsed or refused with the reason. */
static void shares_split_and_parse(void) {
  uint32_t s[4];
  double w[4] = {3, 1, 0, 0};
  CHECK(dpc_driver_split_batch(256, 2, NULL, 1, s) && s[0] == 128 && s[1] == 128);
  CHECK(dpc_driver_split_batch(256, 2, w, 8, s) && s[0] == 192 && s[1] == 64);
  CHECK(dpc_driver_split_batch(10, 2, (double[]){20, 12}, 1, s) && s[0] == 6 && s[1] == 4);
  CHECK(dpc_driver_split_batch(10, 4, (double[]){11, 9, 7, 5}, 1, s) && s[0] == 3 && s[1] == 3 &&
        s[2] == 2 && s[3] == 2);
  /* a device measured as no speed at all still gets the least share */
  CHECK(dpc_driver_split_batch(64, 4, w, 4, s) && s[2] == 4 && s[3] == 4 && s[0] + s[1] == 56);
  CHECK(!dpc_driver_split_batch(3, 4, NULL, 1, s));
  /* a weight that is not a positive number counts as none */
  CHECK(dpc_driver_split_batch(256, 2, (double[]){NAN, 1}, 8, s) && s[0] == 8 && s[1] == 248);
  CHECK(dpc_driver_split_batch(256, 2, (double[]){INFINITY, -1}, 8, s) && s[0] + s[1] == 256);
  dpc_diag d;
  dpc_diag_init(&d);
  bool even, measure;
  CHECK(dpc_driver_parse_shares("144,112", 2, 256, s, &even, &measure, &d) == DPC_OK && !even &&
        !measure && s[0] == 144 && s[1] == 112);
  CHECK(dpc_driver_parse_shares("auto", 2, 256, s, &even, &measure, &d) == DPC_OK && measure);
  CHECK(dpc_driver_parse_shares("even", 2, 256, s, &even, &measure, &d) == DPC_OK && even);
  CHECK(dpc_driver_parse_shares("144,100", 2, 256, s, &even, &measure, &d) != DPC_OK &&
        strstr(d.msg, "adds up to 244 samples, not the batch of 256"));
  CHECK(dpc_driver_parse_shares("144", 2, 256, s, &even, &measure, &d) != DPC_OK &&
        strstr(d.msg, "2 positive sample counts"));
  CHECK(dpc_driver_parse_shares("256,0", 2, 256, s, &even, &measure, &d) != DPC_OK);
  dpc_diag_free(&d);
}

/* Data parallel equals one device on the same global batches: the small model (with dropout,
 * Adam and a cosine schedule) for one epoch of 21 steps — 20 batches of 32, then 10, which splits
 * over 2 devices and runs on the first device alone over 4 — on cpu:2 and cpu:4, compiled and
 * on the reference kernels, hybrid 2 x 2 (two replicas, each split by METIS over two
 * devices), and replicas given unequal shares (--shares: each weighed by its share; the tail
 * batch then splits over every device too), with the collectives on their own threads and in
 * the devices' step lists, and with SGD and momentum (whose new momentum is reduced, not the
 * gradient). Per-step losses within 1e-5, final params within
 * 1e-5, and two runs bit-identical. */
static void data_parallel_matches_one_device(void) {
  char xs[256], ys[256], data[600], save[4][256], logs[4][256];
  path_in(xs, sizeof xs, "dpx.npy");
  path_in(ys, sizeof ys, "dpy.npy");
  write_data(xs, ys, 650, 16, 5, -1);
  snprintf(data, sizeof data, "%s,%s", xs, ys);
  for (int k = 0; k < 4; k++) {
    char nm[32];
    snprintf(nm, sizeof nm, "dp%d.safetensors", k);
    path_in(save[k], sizeof save[k], nm);
    snprintf(nm, sizeof nm, "dp%d.jsonl", k);
    path_in(logs[k], sizeof logs[k], nm);
  }
  dpc_graph *g = parse(small_model);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  static const struct {
    const char *devices;
    bool llvm;
    uint32_t mp;        /* hybrid: devices per replica */
    const char *shares; /* unequal shares (the tail batch of 10 in the same proportions) */
    int comm_thread;    /* collectives on their own thread (1), in the step list (-1), auto */
    bool sgd;           /* SGD with momentum instead of the model's Adam: the momentum reduced */
  } runs[] = {{"cpu:2", true, 0, NULL, 1, false},       {"cpu:2", true, 0, NULL, -1, false},
              {"cpu:4", true, 0, NULL, 0, false},       {"cpu:2", false, 0, NULL, 0, false},
              {"cpu:4", true, 2, NULL, 1, false},       {"cpu:2", true, 0, "20,12", 0, false},
              {"cpu:4", true, 0, "11,9,7,5", 1, false}, {"cpu:2", false, 0, "9,23", -1, false},
              {"cpu:2", true, 0, NULL, 0, true},        {"cpu:4", true, 0, "11,9,7,5", 1, true},
              {"cpu:2", false, 0, "9,23", -1, true},    {"cpu:4", true, 2, NULL, 0, true}};
  for (size_t c = 0; c < sizeof runs / sizeof *runs; c++) {
    /* [0]: one device; [1], [2]: the devices, twice */
    for (int k = 0; k < 3; k++) {
      dpc_train_opts o;
      quiet_opts(&o);
      o.exec.backend = runs[c].llvm ? &dpc_codegen_llvm : NULL;
      o.data = data, o.epochs = 1, o.batch = 32, o.seed = 9;
      o.devices = k ? runs[c].devices : NULL;
      o.strategy = k && runs[c].mp ? "hybrid" : NULL;
      o.mp = runs[c].mp;
      o.shares = k ? runs[c].shares : NULL;
      o.comm_thread = runs[c].comm_thread;
      if (runs[c].sgd) o.optimizer = "sgd", o.lr = 0.05, o.momentum = 0.9;
      o.save_path = save[k], o.log_path = logs[k];
      CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s: %s", runs[c].devices, d.msg);
    }
    double l0[32], l1[32], l2[32];
    int n0 = unit_read_losses(logs[0], l0, 32), n1 = unit_read_losses(logs[1], l1, 32),
        n2 = unit_read_losses(logs[2], l2, 32);
    CHECK_MSG(n0 == 21 && n1 == 21 && n2 == 21, "%d %d %d steps", n0, n1, n2);
    for (int i = 0; i < n0 && i < n1; i++)
      CHECK_MSG(fabs(l0[i] - l1[i]) <= 1e-5 * fabs(l0[i]), "%s %s step %d: %.9g vs %.9g",
                runs[c].devices, runs[c].llvm ? "llvm" : "ref", i + 1, l0[i], l1[i]);
    for (int i = 0; i < n1 && i < n2; i++)
      CHECK_MSG(l1[i] == l2[i], "%s: two runs differ at step %d", runs[c].devices, i + 1);
    CHECK_MSG(same_file(save[1], save[2]), "%s: two runs saved different params", runs[c].devices);
    /* the saved params: the same names as one device's, the same values within 1e-5 */
    dpc_st_file *a = NULL, *b = NULL;
    CHECK(dpc_safetensors_read(save[0], &a, &d) == DPC_OK);
    CHECK(dpc_safetensors_read(save[1], &b, &d) == DPC_OK);
    if (a && b) {
      CHECK(dpc_st_count(a) == dpc_st_count(b));
      for (uint32_t i = 0; i < dpc_st_count(a); i++) {
        const dpc_st_tensor *ta = dpc_st_at(a, i);
        const dpc_tensor *tb = dpc_st_find(b, ta->name);
        CHECK_MSG(tb != NULL, "%s missing", ta->name);
        if (!tb) continue;
        double worst = 0;
        for (int64_t e = 0; e < dpc_tensor_numel(&ta->t); e++) {
          double x = dpc_tload(&ta->t, e), y = dpc_tload(tb, e);
          double err = fabs(x - y) / (fabs(x) > 1e-3 ? fabs(x) : 1e-3);
          if (err > worst) worst = err;
        }
        CHECK_MSG(worst <= 1e-5, "%s %s: %s differs by %.3g", runs[c].devices,
                  runs[c].llvm ? "llvm" : "ref", ta->name, worst);
      }
    }
    dpc_st_free(a);
    dpc_st_free(b);
  }
  for (int k = 0; k < 3; k++) {
    unlink(save[k]);
    unlink(logs[k]);
  }
  unlink(xs);
  unlink(ys);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* Model parallel with the model's own placement: the hidden layer on cpu:1, the rest on cpu:0;
 * values cross between them through events. The same kernels in the same order as on one
 * device: the losses and params must be bit-identical. */
static void model_parallel_matches_one_device(void) {
  char xs[256], ys[256], data[600], save[2][256], logs[2][256];
  path_in(xs, sizeof xs, "mpx.npy");
  path_in(ys, sizeof ys, "mpy.npy");
  write_data(xs, ys, 300, 16, 5, -1);
  snprintf(data, sizeof data, "%s,%s", xs, ys);
  for (int k = 0; k < 2; k++) {
    char nm[32];
    snprintf(nm, sizeof nm, "mp%d.safetensors", k);
    path_in(save[k], sizeof save[k], nm);
    snprintf(nm, sizeof nm, "mp%d.jsonl", k);
    path_in(logs[k], sizeof logs[k], nm);
  }
  dpc_graph *g = parse("model split\ninput x: f32[N, 16]\ninput y: i32[N]\n"
                       "param w1: f32[16, 32] = he_normal(seed=1)\nparam b1: f32[32] = zeros\n"
                       "param w2: f32[32, 5] = xavier_uniform(seed=2)\nparam b2: f32[5] = zeros\n"
                       "device cpu:1 {\n  h = relu(matmul(x, w1) + b1)\n}\n"
                       "logits = matmul(h, w2) + b2 @ cpu:0\n"
                       "loss = softmax_cross_entropy(logits, y)\noutput logits\n"
                       "minimize loss with sgd(lr=0.1, momentum=0.9)\n");
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  /* the plan: kernels on both devices, values handed over through events */
  dpc_graph *c = dpc_graph_clone(g);
  dpc_pass_opts po = {.training = true};
  int64_t n32[4] = {32, 32, 32, 32};
  const char *devs[2] = {"cpu:0", "cpu:1"};
  dpc_plan *plan = NULL;
  CHECK_MSG(c && dpc_passes_run(c, &po, &d) == DPC_OK && dpc_graph_bind(c, n32, &d) == DPC_OK &&
                dpc_plan_devices(c, devs, 2, true, &plan, &d) == DPC_OK,
            "%s", d.msg);
  if (plan) {
    uint32_t kernels[2] = {0, 0}, waits = 0;
    for (uint32_t i = 0; i < 2; i++)
      for (uint32_t j = 0; j < plan->devs[i].n_steps; j++) {
        kernels[i] += plan->devs[i].steps[j].kind == DPC_STEP_KERNEL;
        waits += plan->devs[i].steps[j].kind == DPC_STEP_WAIT;
      }
    CHECK_MSG(kernels[0] > 2 && kernels[1] > 2 && plan->n_events >= 2 && waits >= 2,
              "kernels %u + %u, %u events, %u waits", kernels[0], kernels[1], plan->n_events,
              waits);
    dpc_plan_free(plan);
  }
  dpc_graph_free(c);
  for (int llvm = 0; llvm < 2; llvm++) {
    for (int k = 0; k < 2; k++) {
      dpc_train_opts o;
      quiet_opts(&o);
      o.exec.backend = llvm ? &dpc_codegen_llvm : NULL;
      o.data = data, o.epochs = 1, o.batch = 32, o.seed = 4; /* 9 batches and one of 12 */
      o.devices = k ? "cpu:2" : NULL;
      o.strategy = k ? "model" : NULL;
      o.save_path = save[k], o.log_path = logs[k];
      CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s", d.msg);
    }
    double l0[16], l1[16];
    int n0 = unit_read_losses(logs[0], l0, 16), n1 = unit_read_losses(logs[1], l1, 16);
    CHECK_MSG(n0 == 10 && n1 == 10, "%d and %d steps", n0, n1);
    for (int i = 0; i < n0 && i < n1; i++)
      CHECK_MSG(l0[i] == l1[i], "%s step %d: %.9g vs %.9g", llvm ? "llvm" : "ref", i + 1, l0[i],
                l1[i]);
    CHECK_MSG(same_file(save[0], save[1]), "%s: params differ", llvm ? "llvm" : "ref");
  }
  /* a model without placement: METIS places it (dpc_driver_place) on 2 and on 4 devices, with
   * the same result */
  dpc_graph *plain = parse(small_model);
  for (int nd = 2; plain && nd <= 4; nd += 2) {
    for (int k = 0; k < 2; k++) {
      dpc_train_opts o;
      quiet_opts(&o);
      o.exec.backend = &dpc_codegen_llvm;
      o.data = data, o.epochs = 1, o.batch = 32, o.seed = 4;
      o.devices = k ? (nd == 2 ? "cpu:2" : "cpu:4") : NULL;
      o.strategy = k ? "model" : NULL;
      o.save_path = save[k], o.log_path = logs[k];
      CHECK_MSG(dpc_train(plain, &o, &d) == DPC_OK, "%s", d.msg);
    }
    double l0[16], l1[16];
    int n0 = unit_read_losses(logs[0], l0, 16), n1 = unit_read_losses(logs[1], l1, 16);
    CHECK(n0 == 10 && n1 == 10);
    for (int i = 0; i < n0 && i < n1; i++)
      CHECK_MSG(l0[i] == l1[i], "METIS on %d devices, step %d", nd, i + 1);
    CHECK_MSG(same_file(save[0], save[1]), "METIS placement on %d devices: params differ", nd);
  }
  dpc_graph_free(plain);
  for (int k = 0; k < 2; k++) {
    unlink(save[k]);
    unlink(logs[k]);
  }
  unlink(xs);
  unlink(ys);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* A device that never comes ends the step with an error naming it, within the timeout. */
static void stuck_device_fails_in_time(void) {
  char xs[256], ys[256], data[600];
  path_in(xs, sizeof xs, "stx.npy");
  path_in(ys, sizeof ys, "sty.npy");
  write_data(xs, ys, 256, 16, 5, -1);
  snprintf(data, sizeof data, "%s,%s", xs, ys);
  dpc_graph *g = parse(small_model);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_train_opts o;
  quiet_opts(&o);
  o.exec.backend = &dpc_codegen_llvm;
  o.data = data, o.epochs = 1, o.batch = 32, o.devices = "cpu:2", o.timeout_s = 1;
  const dpc_train_test_hooks *hooks = &(dpc_train_test_hooks){.stall_device = 2}; /* cpu:1 */
  struct timespec ts0, ts1;
  clock_gettime(CLOCK_MONOTONIC, &ts0);
  CHECK(dpc_train_hooked(g, &o, hooks, &d) == DPC_ERR_RUNTIME);
  clock_gettime(CLOCK_MONOTONIC, &ts1);
  double took = (double)(ts1.tv_sec - ts0.tv_sec) + (double)(ts1.tv_nsec - ts0.tv_nsec) * 1e-9;
  CHECK_MSG(strstr(d.msg, "cpu:0 waited") && strstr(d.msg, "for cpu:1") &&
                strstr(d.msg, "cpu:1 is stuck or gone"),
            "%s", d.msg);
  CHECK_MSG(took < 10, "a 1 s timeout took %.1f s", took);
  unlink(xs);
  unlink(ys);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* The data and step logs of one training comparison: 650 samples of 16 features in 5 classes
 * (20 full batches of 32 and a partial one), and up to 4 logs; all in the test folder. */
typedef struct fixture {
  char xs[256], ys[256], data[600], logs[4][256];
} fixture;

static void fixture_open(fixture *f, const char *tag) {
  char nm[64];
  snprintf(nm, sizeof nm, "%sx.npy", tag);
  path_in(f->xs, sizeof f->xs, nm);
  snprintf(nm, sizeof nm, "%sy.npy", tag);
  path_in(f->ys, sizeof f->ys, nm);
  write_data(f->xs, f->ys, 650, 16, 5, -1);
  snprintf(f->data, sizeof f->data, "%s,%s", f->xs, f->ys);
  for (int k = 0; k < 4; k++) {
    snprintf(nm, sizeof nm, "%s%d.jsonl", tag, k);
    path_in(f->logs[k], sizeof f->logs[k], nm);
  }
}

static void fixture_close(fixture *f) {
  for (int k = 0; k < 4; k++) unlink(f->logs[k]);
  unlink(f->xs);
  unlink(f->ys);
}

/* Gradient accumulation: K micro-batches averaged before one step equal one step on the whole
 * batch (1e-5 relative over 20 steps), alone, under data parallel and under model parallel,
 * on both backends; the same run twice gives the same bits. */
static void accumulation_matches_one_batch(void) {
  fixture f;
  fixture_open(&f, "ac");
  const char *data = f.data;
  char(*logs)[256] = f.logs;
  dpc_graph *g = parse(small_model);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  static const struct {
    uint32_t K;
    const char *devices, *strategy;
    bool llvm;
  } runs[] = {{2, NULL, NULL, true},
              {4, NULL, NULL, false},
              {8, NULL, NULL, true},
              {2, "cpu:2", NULL, true},
              {2, "cpu:2", "model", true}};
  for (size_t c = 0; c < sizeof runs / sizeof *runs; c++) {
    /* [0]: one device, no accumulation; [1], [2]: accumulation, twice */
    for (int k = 0; k < 3; k++) {
      dpc_train_opts o;
      quiet_opts(&o);
      o.exec.backend = runs[c].llvm ? &dpc_codegen_llvm : NULL;
      o.data = data, o.epochs = 1, o.batch = 32, o.seed = 9;
      o.devices = k ? runs[c].devices : NULL;
      o.strategy = k ? runs[c].strategy : NULL;
      o.accumulate = k ? runs[c].K : 1;
      o.log_path = logs[k];
      CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "K=%u: %s", runs[c].K, d.msg);
    }
    double l0[32], l1[32], l2[32];
    int n0 = unit_read_losses(logs[0], l0, 32), n1 = unit_read_losses(logs[1], l1, 32),
        n2 = unit_read_losses(logs[2], l2, 32);
    CHECK_MSG(n0 == 21 && n1 == 21 && n2 == 21, "%d %d %d steps", n0, n1, n2);
    for (int i = 0; i < n0 && i < n1; i++)
      CHECK_MSG(fabs(l0[i] - l1[i]) <= 1e-5 * fabs(l0[i]), "K=%u %s step %d: %.9g vs %.9g",
                runs[c].K, runs[c].devices ? runs[c].devices : "", i + 1, l0[i], l1[i]);
    for (int i = 0; i < n1 && i < n2; i++)
      CHECK_MSG(l1[i] == l2[i], "K=%u: two runs differ at step %d", runs[c].K, i + 1);
  }
  fixture_close(&f);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* Pipelines: M micro-batches through S stages in GPipe's and 1F1B's order equal accumulation of
 * M micro-batches bit for bit (the same kernels, the gradients summed in the same order) and
 * one batch within 1e-5, with and without data parallelism over the pipeline. */
static void pipeline_matches_accumulation(void) {
  fixture f;
  fixture_open(&f, "pp");
  const char *data = f.data;
  char(*logs)[256] = f.logs;
  dpc_graph *g = parse(small_model);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  static const struct {
    const char *devices;
    uint32_t S, M;
    dpc_pipeline_schedule sched;
  } runs[] = {{"cpu:2", 2, 4, DPC_SCHEDULE_GPIPE}, {"cpu:2", 2, 4, DPC_SCHEDULE_1F1B},
              {"cpu:3", 3, 8, DPC_SCHEDULE_1F1B},  {"cpu:4", 2, 2, DPC_SCHEDULE_1F1B},
              {"cpu:4", 4, 4, DPC_SCHEDULE_1F1B},  {"cpu:4", 4, 8, DPC_SCHEDULE_1F1B}};
  for (size_t c = 0; c < sizeof runs / sizeof *runs; c++) {
    /* [0]: one device, no accumulation; [1]: accumulation of M per replica; [2]: the pipeline */
    uint32_t dp = runs[c].devices[4] - '0';
    dp /= runs[c].S;
    for (int k = 0; k < 3; k++) {
      dpc_train_opts o;
      quiet_opts(&o);
      o.exec.backend = &dpc_codegen_llvm;
      o.data = data, o.epochs = 1, o.batch = 32, o.seed = 9;
      o.log_path = logs[k];
      if (k == 1) {
        char *spec = dp > 1 ? "cpu:2" : NULL;
        o.devices = spec, o.accumulate = runs[c].M;
      } else if (k == 2) {
        o.devices = runs[c].devices, o.strategy = "pipeline", o.mp = runs[c].S;
        o.accumulate = runs[c].M, o.pipeline = runs[c].sched;
      }
      CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s: %s", runs[c].devices, d.msg);
    }
    double l0[32], l1[32], l2[32];
    int n0 = unit_read_losses(logs[0], l0, 32), n1 = unit_read_losses(logs[1], l1, 32),
        n2 = unit_read_losses(logs[2], l2, 32);
    CHECK_MSG(n0 == 21 && n1 == 21 && n2 == 21, "%d %d %d steps", n0, n1, n2);
    for (int i = 0; i < n0 && i < n2; i++)
      CHECK_MSG(fabs(l0[i] - l2[i]) <= 1e-5 * fabs(l0[i]), "%s step %d: %.9g vs %.9g",
                runs[c].devices, i + 1, l0[i], l2[i]);
    for (int i = 0; i < n1 && i < n2; i++)
      CHECK_MSG(l1[i] == l2[i], "%s S=%u M=%u: pipeline and accumulation differ at step %d",
                runs[c].devices, runs[c].S, runs[c].M, i + 1);
  }
  fixture_close(&f);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* Local SGD: replicas step on their own gradients and average params every k steps. With SGD
 * and momentum the update is linear in the gradient, so averaging after every step (k = 1)
 * equals synchronous data parallel (1e-5); k = 4 differs from it but still trains, the same
 * bits every run. */
static void local_sgd(void) {
  fixture f;
  fixture_open(&f, "ls");
  const char *data = f.data;
  char(*logs)[256] = f.logs;
  const char *text = "model small\ninput x: f32[N, 16]\ninput y: i32[N]\n"
                     "param w1: f32[16, 32] = he_normal(seed=1)\nparam b1: f32[32] = zeros\n"
                     "param w2: f32[32, 5] = xavier_uniform(seed=2)\nparam b2: f32[5] = zeros\n"
                     "h = relu(matmul(x, w1) + b1)\nlogits = matmul(h, w2) + b2\n"
                     "loss = softmax_cross_entropy(logits, y)\noutput logits\n"
                     "minimize loss with sgd(lr=0.05, momentum=0.9)\n";
  dpc_graph *g = parse(text);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  /* [0] synchronous on cpu:2; [1] local SGD k = 1; [2], [3] k = 4 twice */
  const uint32_t k_of[4] = {0, 1, 4, 4};
  for (int k = 0; k < 4; k++) {
    dpc_train_opts o;
    quiet_opts(&o);
    o.exec.backend = &dpc_codegen_llvm;
    o.data = data, o.epochs = 1, o.batch = 32, o.seed = 9;
    o.devices = "cpu:2", o.local_sgd = k_of[k], o.log_path = logs[k];
    CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "local SGD k=%u: %s", k_of[k], d.msg);
  }
  double l[4][32];
  int n[4];
  for (int k = 0; k < 4; k++) n[k] = unit_read_losses(logs[k], l[k], 32);
  CHECK_MSG(n[0] == 21 && n[1] == 21 && n[2] == 21 && n[3] == 21, "%d %d %d %d steps", n[0], n[1],
            n[2], n[3]);
  bool differs = false;
  for (int i = 0; i < 21 && i < n[0] && i < n[1] && i < n[2] && i < n[3]; i++) {
    CHECK_MSG(fabs(l[0][i] - l[1][i]) <= 1e-5 * fabs(l[0][i]), "k=1 step %d: %.9g vs %.9g", i + 1,
              l[0][i], l[1][i]);
    CHECK_MSG(l[2][i] == l[3][i], "k=4: two runs differ at step %d", i + 1);
    differs |= fabs(l[0][i] - l[2][i]) > 1e-4 * fabs(l[0][i]);
  }
  CHECK_MSG(differs, "local SGD with k=4 trained exactly as synchronous training");
  /* and ends where synchronous training does, give or take 10% */
  CHECK_MSG(n[0] == 21 && n[2] == 21 && fabs(l[2][20] - l[0][20]) < 0.1 * l[0][20],
            "k=4 ends at loss %.4g, synchronous at %.4g", l[2][20], l[0][20]);
  fixture_close(&f);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* Asynchronous data parallel with a parameter server: with staleness 0 it is synchronous
 * training (1e-5 over 20 steps, on 2 and 4 workers); with one worker slowed (a test hook) and
 * staleness 2, no gradient in the step log is staler than 2 and the slow worker sends fewer
 * gradients than the others on average (they did not wait for it). */
static void async_parameter_server(void) {
  fixture f;
  fixture_open(&f, "as");
  const char *data = f.data;
  char(*logs)[256] = f.logs;
  /* no dropout: an asynchronous worker draws its masks per step of its own, not from the
   * synchronous step's rows */
  const char *text = "model small\ninput x: f32[N, 16]\ninput y: i32[N]\n"
                     "param w1: f32[16, 32] = he_normal(seed=1)\nparam b1: f32[32] = zeros\n"
                     "param w2: f32[32, 5] = xavier_uniform(seed=2)\nparam b2: f32[5] = zeros\n"
                     "h = relu(matmul(x, w1) + b1)\nlogits = matmul(h, w2) + b2\n"
                     "loss = softmax_cross_entropy(logits, y)\noutput logits\n"
                     "minimize loss with adam(lr=0.01)\n";
  dpc_graph *g = parse(text);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  const char *devs[2] = {"cpu:2", "cpu:4"};
  for (int c = 0; c < 2; c++) {
    for (int k = 0; k < 2; k++) { /* [0] synchronous data parallel, [1] async, staleness 0 */
      dpc_train_opts o;
      quiet_opts(&o);
      o.exec.backend = &dpc_codegen_llvm;
      o.data = data, o.epochs = 1, o.batch = 32, o.seed = 9, o.shuffle = false;
      o.devices = devs[c], o.async = k == 1, o.staleness = 0, o.log_path = logs[k];
      CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s: %s", devs[c], d.msg);
    }
    double l0[32], l1[32];
    int n0 = unit_read_losses(logs[0], l0, 32), n1 = unit_read_losses(logs[1], l1, 32);
    /* async leaves out the partial last batch: 20 updates */
    CHECK_MSG(n0 == 21 && n1 == 20, "%d, %d steps", n0, n1);
    for (int i = 0; i < n1 && i < n0; i++)
      CHECK_MSG(fabs(l0[i] - l1[i]) <= 1e-5 * fabs(l0[i]), "%s step %d: %.9g vs %.9g", devs[c],
                i + 1, l0[i], l1[i]);
  }
  /* worker 0 slow, staleness 2, 4 workers: it holds each gradient back until the others cannot
   * go on without it (not a sleep: on a loaded machine that need not be slow at all) */
  dpc_train_opts o;
  quiet_opts(&o);
  o.exec.backend = &dpc_codegen_llvm;
  o.data = data, o.epochs = 2, o.batch = 32, o.seed = 9;
  o.devices = "cpu:4", o.async = true, o.staleness = 2;
  const dpc_train_test_hooks *hooks = &(dpc_train_test_hooks){.hold_worker = 1};
  o.log_path = logs[1];
  CHECK_MSG(dpc_train_hooked(g, &o, hooks, &d) == DPC_OK, "slow worker: %s", d.msg);
  FILE *log = fopen(logs[1], "r");
  char line[4096];
  unsigned per_worker[4] = {0}, worst = 0, steps = 0, slow_at_bound = 0;
  while (log && fgets(line, sizeof line, log)) {
    if (!strstr(line, "\"staleness\": [")) continue;
    steps++;
    for (const char *p = strstr(line, "{\"worker\": "); p; p = strstr(p + 1, "{\"worker\": ")) {
      unsigned w = 0, s = 0;
      if (sscanf(p, "{\"worker\": %u, \"staleness\": %u}", &w, &s) != 2 || w > 3) continue;
      per_worker[w]++;
      slow_at_bound += w == 0 && s == 2;
      if (s > worst) worst = s;
    }
  }
  if (log) fclose(log);
  CHECK_MSG(steps >= 20 && worst <= 2, "%u updates, the stalest gradient %u behind", steps, worst);
  /* the others went on without it up to the bound: each of its gradients is 2 behind, but the
   * one an epoch's end lets go early */
  CHECK_MSG(slow_at_bound + 2 >= per_worker[0], "%u of the slow worker's %u gradients 2 behind",
            slow_at_bound, per_worker[0]);
  /* so the others took the batches it could not: it starts a step at most once per 2 updates,
   * but after an early release (who of the others takes which is the scheduler's business) */
  CHECK_MSG(per_worker[0] <= steps / 2 + 3 &&
                3 * per_worker[0] < per_worker[1] + per_worker[2] + per_worker[3],
            "gradients per worker: %u %u %u %u", per_worker[0], per_worker[1], per_worker[2],
            per_worker[3]);
  fixture_close(&f);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* The test device's memory is not host memory (runtime/device_testmem.c): any read or write of
 * it that goes around the device's copy and launch faults. Every strategy trains on it to the
 * same per-step losses and the same saved params as on cpu, bit for bit: single device on both
 * backends, data parallel, model parallel, hybrid, pipelines in GPipe's and 1F1B's order,
 * accumulation, asynchronous with staleness 0 and local SGD; then a checkpoint written on it
 * resumes on it to the same losses as an uninterrupted run on cpu. */
static void every_strategy_on_test_memory(void) {
  fixture f;
  fixture_open(&f, "tm");
  char save[2][256], ckpt[256];
  path_in(save[0], sizeof save[0], "tm0.safetensors");
  path_in(save[1], sizeof save[1], "tm1.safetensors");
  path_in(ckpt, sizeof ckpt, "tm.ckpt");
  dpc_graph *g = parse(small_model);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  static const struct {
    const char *what, *devices, *strategy;
    bool llvm;
    uint32_t mp, K, local_sgd;
    dpc_pipeline_schedule sched;
    bool async;
    uint32_t host; /* devices left cpu ones beside the test devices (a CPU beside GPUs) */
  } runs[] = {
      {"one device", NULL, NULL, true, 0, 1, 0, DPC_SCHEDULE_NONE, false},
      {"one device, reference kernels", NULL, NULL, false, 0, 1, 0, DPC_SCHEDULE_NONE, false},
      {"data parallel", "cpu:2", NULL, true, 0, 1, 0, DPC_SCHEDULE_NONE, false},
      {"data parallel, reference kernels", "cpu:2", NULL, false, 0, 1, 0, DPC_SCHEDULE_NONE, false},
      {"model parallel", "cpu:2", "model", true, 0, 1, 0, DPC_SCHEDULE_NONE, false},
      {"model parallel, cpu beside the test device", "cpu:2", "model", true, 0, 1, 0,
       DPC_SCHEDULE_NONE, false, 1},
      {"pipeline 1F1B, cpu beside the test device", "cpu:2", "pipeline", true, 2, 4, 0,
       DPC_SCHEDULE_1F1B, false, 1},
      {"hybrid", "cpu:4", "hybrid", true, 2, 1, 0, DPC_SCHEDULE_NONE, false},
      {"pipeline GPipe", "cpu:2", "pipeline", true, 2, 4, 0, DPC_SCHEDULE_GPIPE, false},
      {"pipeline 1F1B", "cpu:2", "pipeline", true, 2, 4, 0, DPC_SCHEDULE_1F1B, false},
      {"accumulation", NULL, NULL, true, 0, 4, 0, DPC_SCHEDULE_NONE, false},
      {"async, staleness 0", "cpu:2", NULL, true, 0, 1, 0, DPC_SCHEDULE_NONE, true},
      {"local SGD", "cpu:2", NULL, true, 0, 1, 2, DPC_SCHEDULE_NONE, false},
  };
  for (size_t c = 0; c < sizeof runs / sizeof *runs; c++) {
    for (int k = 0; k < 2; k++) { /* [0] cpu, [1] the test device */
      dpc_train_opts o;
      quiet_opts(&o);
      o.exec.backend = runs[c].llvm ? &dpc_codegen_llvm : NULL;
      o.data = f.data, o.epochs = 1, o.batch = 32, o.seed = 9;
      o.devices = runs[c].devices, o.strategy = runs[c].strategy, o.mp = runs[c].mp;
      o.accumulate = runs[c].K, o.pipeline = runs[c].sched, o.local_sgd = runs[c].local_sgd;
      o.async = runs[c].async, o.staleness = 0;
      const dpc_train_test_hooks *hooks =
          k == 1 ? &(dpc_train_test_hooks){.memory = true, .host_devices = runs[c].host} : NULL;
      o.save_path = save[k], o.log_path = f.logs[k];
      CHECK_MSG(dpc_train_hooked(g, &o, hooks, &d) == DPC_OK, "%s on %s: %s", runs[c].what,
                k ? "testmem" : "cpu", d.msg);
    }
    double l0[32], l1[32];
    int n0 = unit_read_losses(f.logs[0], l0, 32), n1 = unit_read_losses(f.logs[1], l1, 32);
    CHECK_MSG(n0 >= 20 && n0 == n1, "%s: %d and %d steps", runs[c].what, n0, n1);
    for (int i = 0; i < n0 && i < n1; i++)
      CHECK_MSG(l0[i] == l1[i], "%s step %d: %.9g on cpu, %.9g on the test device", runs[c].what,
                i + 1, l0[i], l1[i]);
    CHECK_MSG(same_file(save[0], save[1]), "%s: the saved params differ", runs[c].what);
  }
  /* one epoch and a checkpoint on the test device, resumed there for a second, against two
   * epochs on cpu */
  for (int k = 0; k < 3; k++) {
    dpc_train_opts o;
    quiet_opts(&o);
    o.exec.backend = &dpc_codegen_llvm;
    o.data = f.data, o.batch = 32, o.seed = 9, o.devices = "cpu:2";
    o.epochs = 2;
    const dpc_train_test_hooks *hooks = k > 0 ? &(dpc_train_test_hooks){.memory = true} : NULL;
    if (k == 1) o.checkpoint_path = ckpt, o.steps = 21;
    if (k == 2) o.resume_path = ckpt;
    o.log_path = f.logs[k];
    CHECK_MSG(dpc_train_hooked(g, &o, hooks, &d) == DPC_OK, "resume, run %d: %s", k, d.msg);
  }
  double full[64], first[64], rest[64];
  int nf = unit_read_losses(f.logs[0], full, 64), n1 = unit_read_losses(f.logs[1], first, 64),
      n2 = unit_read_losses(f.logs[2], rest, 64);
  CHECK_MSG(nf == 42 && n1 == 21 && n2 == 21, "%d, %d + %d steps", nf, n1, n2);
  for (int i = 0; i < nf && i < n1 + n2; i++) {
    double x = i < n1 ? first[i] : rest[i - n1];
    CHECK_MSG(full[i] == x, "resumed on the test device: step %d: %.9g against %.9g", i + 1, x,
              full[i]);
  }
  unlink(save[0]);
  unlink(save[1]);
  unlink(ckpt);
  fixture_close(&f);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

const unit_test unit_tests[] = {
    {"matches_pytorch", matches_pytorch},
    {"resume_is_bit_identical", resume_is_bit_identical},
    {"cancel_stops_between_steps", cancel_stops_between_steps},
    {"clear_errors", clear_errors},
    {"shares_split_and_parse", shares_split_and_parse},
    {"data_parallel_matches_one_device", data_parallel_matches_one_device},
    {"stuck_device_fails_in_time", stuck_device_fails_in_time},
    {"model_parallel_matches_one_device", model_parallel_matches_one_device},
    {"accumulation_matches_one_batch", accumulation_matches_one_batch},
    {"pipeline_matches_accumulation", pipeline_matches_accumulation},
    {"local_sgd", local_sgd},
    {"async_parameter_server", async_parameter_server},
    {"every_strategy_on_test_memory", every_strategy_on_test_memory},
    {NULL, NULL},
};
const unit_fixture unit_fixtures = {setup_tmp, cleanup_tmp};
