/*
 * test_devices.c — topology, device specs and the shared-memory all-reduce.
 */
#define _GNU_SOURCE /* sched_getaffinity: the cores a pool's thread is bound to */
#include "runtime/collective.h"
#include "runtime/pool.h"
#include "runtime/topology.h"
#include "runtime/transport.h"
#include "unit.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static dpc_topology *synthetic(const char *desc) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_topology *t = NULL;
  CHECK_MSG(dpc_topology_load(desc, &t, &d) == DPC_OK, "%s", d.msg);
  dpc_diag_free(&d);
  return t;
}

/* 2 packages x 2 NUMA nodes x 8 cores x 2 PUs, and this machine. */
static void topology(void) {
  dpc_topology *t = synthetic("pack:2 numa:2 core:8 pu:2");
  if (!t) return;
  CHECK(t->n_packages == 2 && t->n_numa == 4 && t->n_cores == 32 && t->n_pus == 64);
  CHECK(t->synthetic);
  /* cores in logical order: 8 per NUMA node, PUs two apart */
  CHECK(t->cores[0].numa == 0 && t->cores[8].numa == 1 && t->cores[31].numa == 3);
  CHECK(t->cores[16].package == 1 && t->cores[15].package == 0);
  CHECK(t->cores[1].pu == 2 && t->cores[31].pu == 62);
  dpc_topology_free(t);
  t = synthetic(NULL);
  if (!t) return;
  CHECK(t->n_cores >= 1 && t->n_pus >= t->n_cores && !t->synthetic);
  CHECK(strstr(t->description, "cores") != NULL);
  dpc_topology_free(t);
}

static void device_specs(void) {
  dpc_topology *t = synthetic("pack:2 numa:2 core:8 pu:2");
  if (!t) return;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_device_list l;
  /* cpu: one device on every core */
  CHECK(dpc_devices_parse(t, "cpu", &l, &d) == DPC_OK && l.n == 1 && l.devs[0].n_cores == 32);
  dpc_device_list_free(&l);
  /* cpu:3: 11 + 11 + 10 contiguous cores, no core twice */
  CHECK(dpc_devices_parse(t, "cpu:3", &l, &d) == DPC_OK && l.n == 3);
  if (l.n == 3) {
    CHECK(l.devs[0].n_cores == 11 && l.devs[1].n_cores == 11 && l.devs[2].n_cores == 10);
    CHECK(l.devs[1].cores[0] == 11 && l.devs[2].cores[0] == 22 && l.devs[2].cores[9] == 31);
    CHECK(!strcmp(l.devs[2].name, "cpu:2") && !l.devs[0].shared);
    CHECK(l.devs[1].pus[0] == t->cores[11].pu);
  }
  dpc_device_list_free(&l);
  /* numa: one per node, with its own cores */
  CHECK(dpc_devices_parse(t, "numa", &l, &d) == DPC_OK && l.n == 4);
  for (uint32_t i = 0; i < l.n; i++) {
    CHECK(l.devs[i].n_cores == 8 && l.devs[i].numa == i);
    for (uint32_t k = 0; k < l.devs[i].n_cores; k++) CHECK(t->cores[l.devs[i].cores[k]].numa == i);
  }
  dpc_device_list_free(&l);
  /* more devices than cores: they share, one core each */
  CHECK(dpc_devices_parse(t, "cpu:40", &l, &d) == DPC_OK && l.n == 40);
  if (l.n == 40) CHECK(l.devs[39].shared && l.devs[39].n_cores == 1 && l.devs[39].cores[0] == 7);
  dpc_device_list_free(&l);
  /* errors say what is accepted */
  CHECK(dpc_devices_parse(t, "cpu:0", &l, &d) == DPC_ERR_INVALID && strstr(d.msg, "from 1"));
  CHECK(dpc_devices_parse(t, "gpu", &l, &d) == DPC_ERR_UNSUPPORTED && strstr(d.msg, "cpu:N") &&
        strstr(d.msg, "the cuda backend"));
  dpc_diag_clear(&d);
  CHECK(dpc_devices_parse(t, "cuda:0", &l, &d) == DPC_ERR_UNSUPPORTED &&
        !strncmp(d.msg, "cuda:0: plans spread over CPU devices only; a GPU runs", 54));
  dpc_diag_clear(&d);
  CHECK(dpc_devices_parse(t, "tpu", &l, &d) == DPC_ERR_INVALID && strstr(d.msg, "cpu:N"));
  CHECK(dpc_devices_parse(t, "cpu:2x", &l, &d) == DPC_ERR_INVALID);
  dpc_diag_free(&d);
  dpc_topology_free(t);
}

/* A pool bound to given PUs runs every part, each thread on its own PU. */
static int32_t count_parts(void *const *args, int64_t b, int64_t e, uint64_t step, int32_t tr) {
  (void)step, (void)tr;
  int64_t *hits = args[0];
  for (int64_t i = b; i < e; i++) hits[i]++;
  return 0;
}

/* With as many parts as threads, part i runs on thread i: it records the CPUs it may run on. */
static int32_t record_affinity(void *const *args, int64_t b, int64_t e, uint64_t step, int32_t tr) {
  (void)step, (void)tr;
  cpu_set_t *sets = args[0];
  for (int64_t i = b; i < e; i++)
    if (sched_getaffinity(0, sizeof sets[i], &sets[i])) CPU_ZERO(&sets[i]);
  return 0;
}

static void pool_on_cores(void) {
  dpc_topology *t = synthetic(NULL);
  if (!t) return;
  dpc_diag d;
  dpc_diag_init(&d);
  /* the caller runs part 0 and is bound to pus[0] by the run: put its binding back after */
  cpu_set_t mine;
  CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
  /* thread 2 shares thread 0's PU; on a one-core machine all three share it */
  uint32_t pus[3] = {t->cores[0].pu, t->cores[t->n_cores - 1].pu, t->cores[0].pu};
  dpc_pool *p = NULL;
  CHECK_MSG(dpc_pool_new_on(pus, 3, &p, &d) == DPC_OK, "%s", d.msg);
  if (p) {
    CHECK(dpc_pool_bound(p));
    int64_t hits[100] = {0};
    void *args[1] = {hits};
    CHECK(dpc_pool_run(p, count_parts, args, 100, 0, 0) == 0);
    for (int i = 0; i < 100; i++) CHECK(hits[i] == 1);
    cpu_set_t sets[3];
    void *sargs[1] = {sets};
    CHECK(dpc_pool_run(p, record_affinity, sargs, 3, 0, 0) == 0);
    for (int i = 0; i < 3; i++)
      CHECK_MSG(CPU_COUNT(&sets[i]) == 1 && CPU_ISSET((int)pus[i], &sets[i]),
                "thread %d may run on %d CPUs, not just PU %u", i, CPU_COUNT(&sets[i]), pus[i]);
    dpc_pool_free(p);
  }
  CHECK(sched_setaffinity(0, sizeof mine, &mine) == 0);
  dpc_diag_free(&d);
  dpc_topology_free(t);
}

/* ---- all-reduce ---------------------------------------------------------------------------- */

typedef struct ranker {
  dpc_comm *c;
  uint32_t rank;
  void *buf;
  dpc_dtype dt;
  int64_t n;
  dpc_reduce op;
  int calls;
  int stall; /* seconds to sleep before the first call (a stuck peer) */
  dpc_status st;
  char msg[512];
} ranker;

static void *rank_main(void *arg) {
  ranker *r = arg;
  dpc_diag d;
  dpc_diag_init(&d);
  if (r->stall) sleep((unsigned)r->stall);
  r->st = DPC_OK;
  for (int i = 0; i < r->calls && !r->st; i++)
    r->st = dpc_comm_all_reduce(r->c, r->rank, r->buf, r->dt, r->n, r->op, &d);
  snprintf(r->msg, sizeof r->msg, "%s", r->st ? d.msg : "");
  dpc_diag_free(&d);
  return NULL;
}

/* Run `ranks` threads through `calls` all-reduces of their buffers. */
static void run_ranks(dpc_comm *c, ranker *rs, uint32_t ranks) {
  pthread_t th[16];
  for (uint32_t i = 0; i < ranks; i++) pthread_create(&th[i], NULL, rank_main, &rs[i]);
  for (uint32_t i = 0; i < ranks; i++) pthread_join(th[i], NULL);
  (void)c;
}

static float value(uint32_t rank, int64_t i) {
  return (float)((rank * 7919u + (uint64_t)i * 104729u) % 1000) / 128.0f - 3.0f;
}

/* Every rank ends with the sum (exact here: values are multiples of 1/128, small), over rank
 * counts that divide n and ones that do not, n smaller than the ranks, and n = 0. */
static dpc_allreduce_algo algo; /* the algorithm under test */

static dpc_status comm_new(uint32_t ranks, const char *const *names, double timeout_s,
                           dpc_comm **out, dpc_diag *d) {
  dpc_status st = dpc_comm_new(ranks, names, timeout_s, out, d);
  if (!st) dpc_comm_set_algorithm(*out, algo);
  return st;
}

static void sums(void) {
  static const uint32_t rank_counts[] = {1, 2, 3, 4, 7};
  static const int64_t sizes[] = {0, 1, 5, 16, 1000, 100003};
  dpc_diag d;
  dpc_diag_init(&d);
  for (size_t a = 0; a < sizeof rank_counts / sizeof *rank_counts; a++) {
    uint32_t D = rank_counts[a];
    for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++) {
      int64_t n = sizes[b];
      const char *names[7] = {"cpu:0", "cpu:1", "cpu:2", "cpu:3", "cpu:4", "cpu:5", "cpu:6"};
      dpc_comm *c = NULL;
      CHECK(comm_new(D, names, 30.0, &c, &d) == DPC_OK);
      if (!c) continue;
      ranker rs[7];
      for (uint32_t r = 0; r < D; r++) {
        float *buf = malloc((size_t)(n ? n : 1) * sizeof *buf);
        for (int64_t i = 0; i < n; i++) buf[i] = value(r, i);
        rs[r] = (ranker){c, r, buf, DPC_F32, n, DPC_REDUCE_SUM, 1, 0, DPC_OK, ""};
      }
      run_ranks(c, rs, D);
      int bad = 0;
      for (uint32_t r = 0; r < D; r++) {
        CHECK_MSG(rs[r].st == DPC_OK, "D=%u n=%lld: %s", D, (long long)n, rs[r].msg);
        const float *buf = rs[r].buf;
        for (int64_t i = 0; i < n && bad < 3; i++) {
          float want = 0;
          for (uint32_t q = 0; q < D; q++) want += value(q, i);
          if (buf[i] != want) {
            bad++;
            CHECK_MSG(buf[i] == want, "D=%u n=%lld rank %u [%lld]: %g, want %g", D, (long long)n, r,
                      (long long)i, buf[i], want);
          }
        }
        free(rs[r].buf);
      }
      dpc_comm_free(c);
    }
  }
  dpc_diag_free(&d);
}

/* Means of inexact values: the same bits on every rank and in every run, f32 and f64, over many
 * calls on the same communicator (each call's result fed into the next). */
static void deterministic(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  const uint32_t D = 4;
  const int64_t n = 4099;
  for (int dt = 0; dt < 2; dt++) {
    dpc_dtype t = dt ? DPC_F64 : DPC_F32;
    size_t es = dt ? 8 : 4;
    void *first[4] = {0};
    for (int run = 0; run < 2; run++) {
      dpc_comm *c = NULL;
      CHECK(comm_new(D, NULL, 30.0, &c, &d) == DPC_OK);
      if (!c) break;
      ranker rs[4];
      for (uint32_t r = 0; r < D; r++) {
        void *buf = malloc((size_t)n * es);
        for (int64_t i = 0; i < n; i++) {
          double v = sin((double)(r * 31 + 1) * (double)i * 0.001) * 1e3 / 3.0;
          if (dt)
            ((double *)buf)[i] = v;
          else
            ((float *)buf)[i] = (float)v;
        }
        rs[r] = (ranker){c, r, buf, t, n, DPC_REDUCE_MEAN, 5, 0, DPC_OK, ""};
      }
      run_ranks(c, rs, D);
      for (uint32_t r = 0; r < D; r++) {
        CHECK_MSG(rs[r].st == DPC_OK, "%s", rs[r].msg);
        CHECK_MSG(!memcmp(rs[r].buf, rs[0].buf, (size_t)n * es), "%s: rank %u differs from rank 0",
                  dpc_dtype_name(t), r);
      }
      if (run == 0) {
        for (uint32_t r = 0; r < D; r++) first[r] = rs[r].buf;
      } else {
        CHECK_MSG(!memcmp(rs[0].buf, first[0], (size_t)n * es), "%s: two runs differ",
                  dpc_dtype_name(t));
        for (uint32_t r = 0; r < D; r++) {
          free(rs[r].buf);
          free(first[r]);
        }
      }
      dpc_comm_free(c);
    }
  }
  /* the mean is the sum divided by the ranks, within rounding */
  dpc_comm *c = NULL;
  CHECK(comm_new(3, NULL, 30.0, &c, &d) == DPC_OK);
  if (c) {
    ranker rs[3];
    double bufs[3][10];
    for (uint32_t r = 0; r < 3; r++) {
      for (int i = 0; i < 10; i++) bufs[r][i] = r + i * 0.5;
      rs[r] = (ranker){c, r, bufs[r], DPC_F64, 10, DPC_REDUCE_MEAN, 1, 0, DPC_OK, ""};
    }
    run_ranks(c, rs, 3);
    for (int i = 0; i < 10; i++) CHECK(fabs(bufs[2][i] - (1 + i * 0.5)) < 1e-12);
    dpc_comm_free(c);
  }
  dpc_diag_free(&d);
}

/* A stuck rank makes the others fail within the timeout, naming it; a failed rank (abort) makes
 * them fail at once with its reason; mismatched sizes are an error, not a crash. */
static void failures(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  const char *names[3] = {"cpu:0", "cpu:1", "cpu:2"};
  float a[64] = {0}, b[64] = {0}, e[64] = {0};
  dpc_comm *c = NULL;
  CHECK(comm_new(3, names, 0.3, &c, &d) == DPC_OK);
  if (c) {
    ranker rs[3] = {{c, 0, a, DPC_F32, 64, DPC_REDUCE_SUM, 1, 0, DPC_OK, ""},
                    {c, 1, b, DPC_F32, 64, DPC_REDUCE_SUM, 1, 0, DPC_OK, ""},
                    {c, 2, e, DPC_F32, 64, DPC_REDUCE_SUM, 0, 0, DPC_OK, ""}}; /* never comes */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_ranks(c, rs, 3);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(rs[0].st == DPC_ERR_RUNTIME && rs[1].st == DPC_ERR_RUNTIME);
    CHECK_MSG(strstr(rs[0].msg, "cpu:0 waited") || strstr(rs[1].msg, "for cpu:2"), "%s | %s",
              rs[0].msg, rs[1].msg);
    CHECK_MSG(strstr(rs[1].msg, "cpu:2") != NULL, "%s", rs[1].msg);
    CHECK_MSG(took < 5.0, "the timeout of 0.3 s took %.1f s", took);
    dpc_comm_free(c);
  }
  CHECK(comm_new(2, names, 30.0, &c, &d) == DPC_OK);
  if (c) {
    dpc_comm_abort(c, "cpu:1", "the loss became NaN");
    CHECK(dpc_comm_all_reduce(c, 0, a, DPC_F32, 64, DPC_REDUCE_SUM, &d) == DPC_ERR_RUNTIME);
    CHECK_MSG(strstr(d.msg, "cpu:1 failed: the loss became NaN") != NULL, "%s", d.msg);
    dpc_comm_free(c);
  }
  CHECK(comm_new(2, names, 30.0, &c, &d) == DPC_OK);
  if (c) {
    ranker rs[2] = {{c, 0, a, DPC_F32, 64, DPC_REDUCE_SUM, 1, 0, DPC_OK, ""},
                    {c, 1, b, DPC_F32, 32, DPC_REDUCE_SUM, 1, 0, DPC_OK, ""}};
    run_ranks(c, rs, 2);
    CHECK(rs[0].st != DPC_OK && rs[1].st != DPC_OK);
    CHECK_MSG(strstr(rs[0].msg, "64") && strstr(rs[0].msg, "32"), "%s", rs[0].msg);
    dpc_comm_free(c);
  }
  CHECK(comm_new(0, NULL, 1, &c, &d) == DPC_ERR_INVALID);
  dpc_diag_free(&d);
}

static void all_reduce_sums(void) {
  for (algo = DPC_ALLREDUCE_DIRECT; algo <= DPC_ALLREDUCE_RING; algo++) sums();
}

static void all_reduce_is_deterministic(void) {
  for (algo = DPC_ALLREDUCE_DIRECT; algo <= DPC_ALLREDUCE_RING; algo++) deterministic();
}

static void all_reduce_failures(void) {
  for (algo = DPC_ALLREDUCE_DIRECT; algo <= DPC_ALLREDUCE_RING; algo++) failures();
}

/* ---- the transport, over devices whose memory the host cannot address --------------------- */

#define TN 1003 /* elements: not a multiple of the ranks */

typedef struct trank {
  dpc_transport *t;
  dpc_device *dev;
  uint32_t rank;
  void *buf, *box;  /* device memory */
  float out[4][TN]; /* what came back: all-reduce, broadcast, receive, second all-reduce */
  dpc_status st;
  char msg[512];
} trank;

static void *trank_main(void *arg) {
  trank *r = arg;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_transport *t = r->t;
  const dpc_device_ops *o = r->dev->ops;
  uint32_t R = t->ranks, next = (r->rank + 1) % R, prev = (r->rank + R - 1) % R;
  float host[TN];
  size_t bytes = sizeof host;
  for (int64_t i = 0; i < TN; i++) host[i] = value(r->rank, i) * 1.1f;
  dpc_status st = o->copy(r->dev, DPC_COPY_H2D, r->buf, host, bytes, NULL, &d);
  if (!st) st = t->ops->all_reduce(t, r->rank, r->buf, DPC_F32, TN, DPC_REDUCE_MEAN, &d);
  if (!st) st = o->copy(r->dev, DPC_COPY_D2H, r->out[0], r->buf, bytes, NULL, &d);
  if (!st) st = o->copy(r->dev, DPC_COPY_H2D, r->box, host, bytes, NULL, &d);
  if (!st) st = t->ops->broadcast(t, r->rank, 1, r->box, bytes, &d);
  if (!st) st = o->copy(r->dev, DPC_COPY_D2H, r->out[1], r->box, bytes, NULL, &d);
  /* a ring: even ranks send first, odd ones receive first */
  if (!st) st = o->copy(r->dev, DPC_COPY_H2D, r->box, host, bytes, NULL, &d);
  for (int phase = 0; phase < 2 && !st; phase++)
    st = (phase == (int)(r->rank % 2)) ? t->ops->send(t, r->rank, next, r->box, bytes, &d)
                                       : t->ops->recv(t, r->rank, prev, r->buf, bytes, &d);
  if (!st) st = o->copy(r->dev, DPC_COPY_D2H, r->out[2], r->buf, bytes, NULL, &d);
  if (!st) st = t->ops->barrier(t, r->rank, &d);
  if (!st) st = o->copy(r->dev, DPC_COPY_H2D, r->buf, host, bytes, NULL, &d);
  if (!st) st = t->ops->all_reduce(t, r->rank, r->buf, DPC_F32, TN, DPC_REDUCE_SUM, &d);
  if (!st) st = o->copy(r->dev, DPC_COPY_D2H, r->out[3], r->buf, bytes, NULL, &d);
  r->st = st;
  snprintf(r->msg, sizeof r->msg, "%s", st ? d.msg : "");
  dpc_diag_free(&d);
  return NULL;
}

/* The shared-memory transport over test devices (runtime/device_testmem.c, whose handles fault
 * when dereferenced: the transport must use the devices' copies) and over cpu devices: every
 * call gives the values it should, all-reduce sums in rank order (the bits of the same sums
 * done here), and both kinds of device give the same bits. */
static void transport_over_devices(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  static trank rk[2][3];
  for (int kind = 0; kind < 2; kind++) {
    const uint32_t R = 3;
    dpc_device *devs[3] = {0};
    const char *names[3] = {"dev0", "dev1", "dev2"};
    for (uint32_t i = 0; i < R; i++) {
      char nm[32];
      snprintf(nm, sizeof nm, "%s:%u", kind ? "cpu" : "testmem", i);
      CHECK(dpc_device_open(nm, &devs[i], &d) == DPC_OK);
    }
    dpc_transport *t = NULL;
    CHECK_MSG(dpc_transport_open("shm", R, devs, names, 10, &t, &d) == DPC_OK, "%s", d.msg);
    if (!t) return;
    CHECK(devs[0]->ops->host_visible == (kind == 1));
    pthread_t th[3];
    for (uint32_t i = 0; i < R; i++) {
      trank *r = &rk[kind][i];
      *r = (trank){.t = t, .dev = devs[i], .rank = i};
      CHECK(devs[i]->ops->alloc(devs[i], TN * 4, &r->buf, &d) == DPC_OK);
      CHECK(devs[i]->ops->alloc(devs[i], TN * 4, &r->box, &d) == DPC_OK);
      pthread_create(&th[i], NULL, trank_main, r);
    }
    for (uint32_t i = 0; i < R; i++) pthread_join(th[i], NULL);
    for (uint32_t i = 0; i < R; i++) {
      trank *r = &rk[kind][i];
      CHECK_MSG(r->st == DPC_OK, "%s rank %u: %s", kind ? "cpu" : "testmem", i, r->msg);
      uint32_t prev = (i + R - 1) % R;
      bool mean = true, bcast = true, recv = true, sum = true;
      for (int64_t e = 0; e < TN; e++) {
        float x0 = value(0, e) * 1.1f, x1 = value(1, e) * 1.1f, x2 = value(2, e) * 1.1f;
        mean &= r->out[0][e] == ((x0 + x1) + x2) / 3.0f;
        bcast &= r->out[1][e] == x1;
        recv &= r->out[2][e] == value(prev, e) * 1.1f;
        sum &= r->out[3][e] == (x0 + x1) + x2;
      }
      CHECK_MSG(mean && bcast && recv && sum, "%s rank %u: mean %d broadcast %d receive %d sum %d",
                kind ? "cpu" : "testmem", i, mean, bcast, recv, sum);
      if (kind == 1)
        CHECK_MSG(!memcmp(r->out, rk[0][i].out, sizeof r->out),
                  "rank %u: testmem and cpu give different bits", i);
      devs[i]->ops->free(devs[i], r->buf);
      devs[i]->ops->free(devs[i], r->box);
    }
    dpc_transport_free(t);
    for (uint32_t i = 0; i < R; i++) dpc_device_close(devs[i]);
  }
  /* an abort reaches a rank waiting in a receive, naming who failed */
  dpc_device *dev[2];
  CHECK(dpc_device_open("testmem:0", &dev[0], &d) == DPC_OK);
  CHECK(dpc_device_open("testmem:1", &dev[1], &d) == DPC_OK);
  dpc_transport *t = NULL;
  CHECK(dpc_transport_open("shm", 2, dev, (const char *[]){"a", "b"}, 10, &t, &d) == DPC_OK);
  if (t) {
    t->ops->abort(t, "b", "it ran out of memory");
    void *buf = NULL;
    CHECK(dev[0]->ops->alloc(dev[0], 64, &buf, &d) == DPC_OK);
    CHECK(t->ops->recv(t, 0, 1, buf, 64, &d) == DPC_ERR_RUNTIME && strstr(d.msg, "b failed") &&
          strstr(d.msg, "out of memory"));
    dev[0]->ops->free(dev[0], buf);
    dpc_transport_free(t);
  }
  dpc_device_close(dev[0]);
  dpc_device_close(dev[1]);
  dpc_diag_free(&d);
}

const unit_test unit_tests[] = {
    {"topology", topology},
    {"device_specs", device_specs},
    {"pool_on_cores", pool_on_cores},
    {"all_reduce_sums", all_reduce_sums},
    {"all_reduce_is_deterministic", all_reduce_is_deterministic},
    {"all_reduce_failures", all_reduce_failures},
    {"transport_over_devices", transport_over_devices},
    {NULL, NULL},
};
