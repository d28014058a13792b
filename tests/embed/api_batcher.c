/*
 * api_batcher.c — the batcher of <dpc/dpc.h> against an inference artifact of
 * examples/fashion_mlp.graph with plans for 8, 4, 2 and 1 rows (dpc compile --batch 8
 * --batch-sizes 1,2,4):
 *   1. 200 requests of 1 to 4 rows from 8 threads, 2 instances, a 2 ms delay: each request's
 *      outputs are, bit for bit, a runner's with rows = its row count run on its rows alone,
 *      and there were fewer batches than requests;
 *   2. no delay: every request still answered, the same bits;
 *   3. max_queue 4 with the one worker held in a done callback: the 5th request is refused with
 *      DPC_ERR_BUSY, the four then answered;
 *   4. close with requests queued behind a 30 s delay: all answered, at once; after shutdown a
 *      submit is refused.
 * No check is about speed.
 *
 *   api_batcher MODEL.dpx      prints one line per check; exit status 1 on the first that fails
 */
#include <dpc/dpc.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL: " __VA_ARGS__);                                                                \
      printf("\n");                                                                                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#define MAX_ROWS 4

static dpc_model *model;
static size_t in_row, out_row; /* bytes of one row of x and of logits */

typedef struct request {
  uint64_t rows;
  float *x, *y;
  dpc_status st;
} request;

static uint32_t next_rand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static void make_requests(request *rq, unsigned n, uint32_t seed) {
  for (unsigned i = 0; i < n; i++) {
    rq[i].rows = 1 + next_rand(&seed) % MAX_ROWS;
    rq[i].x = malloc(rq[i].rows * in_row);
    rq[i].y = malloc(rq[i].rows * out_row);
    CHECK(rq[i].x && rq[i].y, "out of memory");
    for (size_t k = 0; k < rq[i].rows * in_row / sizeof(float); k++)
      rq[i].x[k] = (float)(next_rand(&seed) % 1000) / 1000.0f;
    memset(rq[i].y, 0xff, rq[i].rows * out_row);
    rq[i].st = DPC_ERR_INTERNAL;
  }
}

static void free_requests(request *rq, unsigned n) {
  for (unsigned i = 0; i < n; i++) free(rq[i].x), free(rq[i].y);
}

/* Each request's outputs against a plain runner with rows = its row count, bit for bit. */
static void check_against_runners(const request *rq, unsigned n, const char *what) {
  dpc_runner *r[MAX_ROWS + 1] = {0};
  float *x = malloc(MAX_ROWS * in_row), *y = malloc(MAX_ROWS * out_row);
  CHECK(x && y, "out of memory");
  char err[512];
  for (unsigned k = 1; k <= MAX_ROWS; k++) {
    dpc_runner_opts o = {sizeof o, .threads = 1, .rows = k};
    CHECK(!dpc_runner_open(model, &o, &r[k], err, sizeof err), "runner of %u rows: %s", k, err);
    CHECK(!dpc_runner_bind(r[k], "x", x, k * in_row) &&
              !dpc_runner_bind(r[k], "logits", y, k * out_row),
          "bind: %s", dpc_runner_error(r[k]));
  }
  for (unsigned i = 0; i < n; i++) {
    CHECK(rq[i].st == DPC_OK, "%s: request %u answered %s", what, i, dpc_status_name(rq[i].st));
    memcpy(x, rq[i].x, rq[i].rows * in_row);
    CHECK(!dpc_runner_run(r[rq[i].rows]), "run: %s", dpc_runner_error(r[rq[i].rows]));
    CHECK(!memcmp(y, rq[i].y, rq[i].rows * out_row),
          "%s: request %u (%llu rows): the batcher's outputs differ from a runner's", what, i,
          (unsigned long long)rq[i].rows);
  }
  for (unsigned k = 1; k <= MAX_ROWS; k++) dpc_runner_free(r[k]);
  free(x), free(y);
}

/* ---- 1, 2: many threads, each submitting and waiting in turn --------------------------------- */

typedef struct client {
  dpc_batcher *b;
  request *rq;
  unsigned n;
} client;

static void *client_main(void *arg) {
  client *c = arg;
  char err[512];
  for (unsigned i = 0; i < c->n; i++) {
    request *q = &c->rq[i];
    const void *in[] = {q->x};
    void *out[] = {q->y};
    dpc_batcher_request r = {sizeof r, .rows = q->rows, .inputs = in, .outputs = out};
    dpc_batcher_ticket *t;
    q->st = dpc_batcher_submit(c->b, &r, &t, err, sizeof err);
    if (!q->st) q->st = dpc_batcher_wait(c->b, t, err, sizeof err);
  }
  return NULL;
}

static void many_threads(unsigned instances, uint64_t delay_us, unsigned threads, unsigned n,
                         const char *what) {
  char err[512];
  dpc_batcher_opts bo = {sizeof bo, .instances = instances, .delay_us = delay_us};
  dpc_batcher *b;
  CHECK(!dpc_batcher_open(model, &bo, &b, err, sizeof err), "open: %s", err);
  request *rq = calloc(n, sizeof *rq);
  CHECK(rq, "out of memory");
  make_requests(rq, n, 12345u + (uint32_t)delay_us);
  pthread_t th[16];
  client c[16];
  for (unsigned i = 0; i < threads; i++) {
    unsigned from = n * i / threads, to = n * (i + 1) / threads;
    c[i] = (client){b, rq + from, to - from};
    CHECK(!pthread_create(&th[i], NULL, client_main, &c[i]), "pthread_create");
  }
  for (unsigned i = 0; i < threads; i++) pthread_join(th[i], NULL);
  dpc_batcher_stats s = {sizeof s};
  CHECK(!dpc_batcher_get_stats(b, &s), "stats");
  dpc_batcher_close(b);
  uint64_t rows = 0, hist = 0;
  for (unsigned i = 0; i < n; i++) rows += rq[i].rows;
  for (unsigned k = 0; k < DPC_BATCHER_HIST; k++) hist += s.batch_hist[k];
  check_against_runners(rq, n, what);
  CHECK(s.requests == n && s.rows == rows && s.failed == 0 && s.refused == 0,
        "%s: stats say %llu requests of %llu rows, %llu failed, %llu refused", what,
        (unsigned long long)s.requests, (unsigned long long)s.rows, (unsigned long long)s.failed,
        (unsigned long long)s.refused);
  CHECK(hist == s.batches && s.instances == instances && s.delay_us == delay_us &&
            s.max_batch == 8 && s.queued == 0 && s.busy == 0,
        "%s: inconsistent stats", what);
  CHECK(s.queue_ns_max * n >= s.queue_ns_total &&
            s.compute_ns_max * s.batches >= s.compute_ns_total,
        "%s: a maximum below the mean", what);
  printf("%s: %u requests (%llu rows) from %u threads in %llu batches (%.2f rows each), answered "
         "with a runner's bits\n",
         what, n, (unsigned long long)rows, threads, (unsigned long long)s.batches,
         (double)s.rows / (double)s.batches);
  if (delay_us) CHECK(s.batches < n, "%s: no request was batched with another", what);
  free_requests(rq, n);
  free(rq);
}

/* ---- 3: a full queue ----------------------------------------------------------------------- */

typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started, open, called;
  dpc_status st;
} gate;

/* The done callback runs on the worker: holding it here keeps the worker from the queue. */
static void hold_worker(void *user, dpc_status st, const char *msg) {
  (void)msg;
  gate *g = user;
  pthread_mutex_lock(&g->mu);
  g->st = st;
  g->started = 1;
  pthread_cond_broadcast(&g->cv);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  g->called++;
  pthread_mutex_unlock(&g->mu);
}

static void full_queue(void) {
  char err[512];
  dpc_batcher_opts bo = {sizeof bo, .instances = 1, .max_queue = 4};
  dpc_batcher *b;
  CHECK(!dpc_batcher_open(model, &bo, &b, err, sizeof err), "open: %s", err);
  request rq[6];
  make_requests(rq, 6, 777u);
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, DPC_ERR_INTERNAL};
  const void *in0[] = {rq[0].x};
  void *out0[] = {rq[0].y};
  dpc_batcher_request r0 = {sizeof r0,       .rows = rq[0].rows,  .inputs = in0,
                            .outputs = out0, .done = hold_worker, .user = &g};
  CHECK(!dpc_batcher_submit(b, &r0, NULL, err, sizeof err), "submit with a callback: %s", err);
  pthread_mutex_lock(&g.mu);
  while (!g.started) pthread_cond_wait(&g.cv, &g.mu);
  pthread_mutex_unlock(&g.mu);
  rq[0].st = g.st;
  dpc_batcher_ticket *t[5];
  for (unsigned i = 1; i <= 5; i++) {
    const void *in[] = {rq[i].x};
    void *out[] = {rq[i].y};
    dpc_batcher_request r = {sizeof r, .rows = rq[i].rows, .inputs = in, .outputs = out};
    dpc_status st = dpc_batcher_submit(b, &r, &t[i - 1], err, sizeof err);
    if (i < 5) CHECK(!st, "request %u of 4 refused: %s", i, err);
    if (i == 5) {
      CHECK(st == DPC_ERR_BUSY && !t[4] && strstr(err, "queue is full"),
            "the 5th request with 4 queued was not refused as busy (%s: %s)", dpc_status_name(st),
            err);
      printf("full queue: the 5th request refused (%s: %s)\n", dpc_status_name(st), err);
    }
  }
  dpc_batcher_stats s = {sizeof s};
  dpc_batcher_get_stats(b, &s);
  CHECK(s.queued == 4 && s.busy == 1 && s.refused == 1, "stats: %llu queued, %u busy, %llu refused",
        (unsigned long long)s.queued, s.busy, (unsigned long long)s.refused);
  pthread_mutex_lock(&g.mu);
  g.open = 1;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  for (unsigned i = 1; i < 5; i++) rq[i].st = dpc_batcher_wait(b, t[i - 1], err, sizeof err);
  dpc_batcher_close(b);
  CHECK(g.called == 1, "the callback ran %d times", g.called);
  check_against_runners(rq, 5, "full queue");
  printf("full queue: the callback's request and the 4 queued answered with a runner's bits\n");
  free_requests(rq, 6);
}

/* ---- 4: close with requests in flight ------------------------------------------------------- */

typedef struct closer {
  dpc_batcher *b;
  request *rq;
  unsigned n;
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  unsigned *submitted;
} closer;

static void *close_client(void *arg) {
  closer *c = arg;
  char err[512];
  dpc_batcher_ticket *t[8];
  for (unsigned i = 0; i < c->n; i++) {
    const void *in[] = {c->rq[i].x};
    void *out[] = {c->rq[i].y};
    dpc_batcher_request r = {sizeof r, .rows = c->rq[i].rows, .inputs = in, .outputs = out};
    c->rq[i].st = dpc_batcher_submit(c->b, &r, &t[i], err, sizeof err);
  }
  pthread_mutex_lock(c->mu);
  ++*c->submitted;
  pthread_cond_broadcast(c->cv);
  pthread_mutex_unlock(c->mu);
  /* waits while the main thread closes */
  for (unsigned i = 0; i < c->n; i++)
    if (!c->rq[i].st) c->rq[i].st = dpc_batcher_wait(c->b, t[i], err, sizeof err);
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void close_in_flight(void) {
  char err[512];
  dpc_batcher_opts bo = {sizeof bo, .instances = 1, .delay_us = 30000000};
  dpc_batcher *b;
  CHECK(!dpc_batcher_open(model, &bo, &b, err, sizeof err), "open: %s", err);
  enum { THREADS = 6, EACH = 3 };
  request rq[THREADS * EACH];
  make_requests(rq, THREADS * EACH, 4242u);
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  unsigned submitted = 0;
  pthread_t th[THREADS];
  closer c[THREADS];
  for (unsigned i = 0; i < THREADS; i++) {
    c[i] = (closer){b, rq + i * EACH, EACH, &mu, &cv, &submitted};
    CHECK(!pthread_create(&th[i], NULL, close_client, &c[i]), "pthread_create");
  }
  pthread_mutex_lock(&mu);
  while (submitted < THREADS) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  dpc_batcher_stats s = {sizeof s};
  dpc_batcher_get_stats(b, &s);
  dpc_batcher_shutdown(b);
  float x[784], y[10];
  const void *in[] = {x};
  void *out[] = {y};
  dpc_batcher_request late = {sizeof late, .rows = 1, .inputs = in, .outputs = out};
  dpc_batcher_ticket *t;
  dpc_status st = dpc_batcher_submit(b, &late, &t, err, sizeof err);
  CHECK(st == DPC_ERR_BUSY && strstr(err, "closing"), "a submit after shutdown: %s (%s)",
        dpc_status_name(st), err);
  double t0 = now_s();
  dpc_batcher_close(b);
  double dt = now_s() - t0;
  for (unsigned i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  /* a semantic bound, not a speed one: close must not wait out the 30 s delay */
  CHECK(dt < 25, "close took %.1f s: it waited out the delay", dt);
  check_against_runners(rq, THREADS * EACH, "close");
  printf("close: %llu requests queued behind a 30 s delay (%u in all) answered with a runner's "
         "bits; a submit after shutdown refused (%s)\n",
         (unsigned long long)s.queued, THREADS * EACH, err);
  free_requests(rq, THREADS * EACH);
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char err[512];
  CHECK(!dpc_model_load(argv[1], &model, err, sizeof err), "load: %s", err);

  dpc_batcher *b = NULL;
  dpc_batcher_opts bad = {0};
  CHECK(dpc_batcher_open(model, &bad, &b, err, sizeof err) == DPC_ERR_INVALID && !b &&
            strstr(err, "sizeof(dpc_batcher_opts)"),
        "options without their size were taken (%s)", err);
  dpc_batcher_opts big = {sizeof big, .max_batch = 9};
  CHECK(dpc_batcher_open(model, &big, &b, err, sizeof err) == DPC_ERR_SHAPE && !b,
        "max_batch over the artifact's batch was taken");
  CHECK(!dpc_batcher_open(model, NULL, &b, err, sizeof err), "open with defaults: %s", err);
  CHECK(dpc_batcher_count(b, DPC_ROLE_INPUT) == 1 && dpc_batcher_count(b, DPC_ROLE_OUTPUT) == 1,
        "expected one input and one output");
  dpc_tensor_info xi = {sizeof xi}, yi = {sizeof yi};
  CHECK(!dpc_batcher_info(b, DPC_ROLE_INPUT, 0, &xi) &&
            !dpc_batcher_info(b, DPC_ROLE_OUTPUT, 0, &yi),
        "info");
  CHECK(!strcmp(xi.name, "x") && xi.dims[0] == 1 && xi.dims[1] == 784 && xi.bytes == 784 * 4 &&
            !strcmp(yi.name, "logits") && yi.bytes == 40,
        "info: %s %zu bytes, %s %zu bytes", xi.name, xi.bytes, yi.name, yi.bytes);
  in_row = xi.bytes, out_row = yi.bytes;
  float x[9 * 784], y[9 * 10];
  const void *in[] = {x};
  void *out[] = {y};
  dpc_batcher_request r9 = {sizeof r9, .rows = 9, .inputs = in, .outputs = out};
  dpc_batcher_ticket *t;
  CHECK(dpc_batcher_submit(b, &r9, &t, err, sizeof err) == DPC_ERR_SHAPE,
        "a request of 9 rows was taken");
  dpc_batcher_close(b);
  printf("options: size checked, max_batch over the batch refused, a request of 9 rows refused (%s)"
         "\n",
         err);

  many_threads(2, 2000, 8, 200, "delay 2000 us");
  many_threads(2, 0, 8, 100, "delay 0");
  full_queue();
  close_in_flight();
  dpc_model_free(model);
  printf("api_batcher: ok\n");
  return 0;
}
