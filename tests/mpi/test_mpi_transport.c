/*
 * test_mpi_transport.c — the MPI transport (runtime/transport_mpi.c), run under mpirun by
 * tests/mpi/mpi_test.sh:
 *
 *   test_mpi_transport DEVICE MODE      DEVICE: cpu | testmem   MODE: see below
 *
 *   all       all-reduce (f32 and f64; sum, mean and the wide mean; 1, 7, 1000, 2^20, 3x2^20+5
 *             elements) equals, bit for bit on every rank, the rank-order sums computed here
 *             from the same seeded data; broadcast from each root; a send/receive ring;
 *             barriers that hold a rank back. Prints "MPI-OK" per rank.
 *   baseline  the same all-reduce sums through MPI_Iallreduce (DPC_MPI_ALLREDUCE=mpi): the
 *             same bits on every rank; with 2 ranks the rank-order bits too; with more it
 *             says how many elements differ from the rank-order sum.
 *   timeout   the last rank skips an all-reduce and sleeps: the others fail within the 2 s
 *             timeout plus slack naming it and its host, print "TIMEOUT-OK", and end the run
 *             with abort (MPI_Abort): the run exits non-zero instead of hanging.
 *   mismatch  the last rank skips an all-reduce and enters a barrier: the others report the
 *             mismatch well before the timeout ("MISMATCH-OK"), then abort.
 *   hosts     the ranks split into 2 pretended hosts of consecutive ranks
 *             (dpc_transport_mpi_split_hosts): sums and means equal, bit for bit on every rank,
 *             each host's rank-order sum added in host order (the mean dividing the total),
 *             then the wide mean (flat) and the rest of "all". With hosts of as many ranks
 *             (4 ranks) on the cpu this is the in-place path by columns; with hosts of 2 and 1
 *             ranks (3 ranks), or on testmem, the path through the hosts' first ranks.
 *
 * On testmem devices (runtime/device_testmem.c) a dereference of device memory faults, so a
 * transport that went around the device's copies would crash here.
 */
#include "runtime/transport_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fails;
static int me, D;
static int hosts; /* pretended hosts (mode hosts), 0: flat */

#define CHECK(c, ...)                                                                              \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "FAIL rank %d %s:%d: ", me, __FILE__, __LINE__);                             \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      fails++;                                                                                     \
    }                                                                                              \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* Rank r's element i of call `call`: seeded, of varied signs and magnitudes, so that another
 * order of summation gives other bits. */
static double value(int r, int64_t i, uint64_t call) {
  uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)r * 0xBF58476D1CE4E5B9ull +
               call * 0x94D049BB133111EBull + 12345;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  double u = (double)(z >> 11) / 9007199254740992.0 * 2 - 1; /* [-1, 1) */
  return ldexp(u, (int)(z % 17) - 8);
}

/* Across pretended hosts: each host's ranks (r * hosts / D) summed in rank order, the hosts'
 * sums added in host order, the mean dividing the total. */
static void expected_hosts(dpc_dtype dt, dpc_reduce op, int64_t i, uint64_t call, void *out) {
  double total = 0;
  float total32 = 0;
  for (int h = 0, r = 0; h < hosts; h++) {
    double acc = 0;
    float acc32 = 0;
    for (bool first = true; r < D && r * hosts / D == h; r++, first = false) {
      double x = value(r, i, call);
      acc = first ? x : acc + x;
      acc32 = first ? (float)x : acc32 + (float)x;
    }
    total = h ? total + acc : acc;
    total32 = h ? total32 + acc32 : acc32;
  }
  if (dt == DPC_F64)
    *(double *)out = op == DPC_REDUCE_SUM ? total : total / (double)D;
  else
    *(float *)out = op == DPC_REDUCE_SUM ? total32 : total32 / (float)D;
}

/* The rank-order result of element i, as the shm transport computes it (collective.c). */
static void expected(dpc_dtype dt, dpc_reduce op, int64_t i, uint64_t call, void *out) {
  if (hosts > 1 && hosts < D && op != DPC_REDUCE_MEAN_WIDE) {
    expected_hosts(dt, op, i, call, out);
    return;
  }
  if (dt == DPC_F64) {
    double acc = value(0, i, call);
    for (int q = 1; q < D; q++) {
      double x = value(q, i, call);
      acc = op != DPC_REDUCE_SUM && q == D - 1 ? (acc + x) / (double)D : acc + x;
    }
    *(double *)out = acc;
  } else if (op == DPC_REDUCE_MEAN_WIDE) {
    double wide = (float)value(0, i, call);
    for (int q = 1; q < D; q++) wide += (float)value(q, i, call);
    *(float *)out = (float)(wide / D);
  } else {
    float acc = (float)value(0, i, call);
    for (int q = 1; q < D; q++) {
      float x = (float)value(q, i, call);
      acc = op != DPC_REDUCE_SUM && q == D - 1 ? (acc + x) / (float)D : acc + x;
    }
    *(float *)out = acc;
  }
}

static void fill(void *host, dpc_dtype dt, int r, int64_t n, uint64_t call) {
  for (int64_t i = 0; i < n; i++) {
    if (dt == DPC_F64)
      ((double *)host)[i] = value(r, i, call);
    else
      ((float *)host)[i] = (float)value(r, i, call);
  }
}

/* One all-reduce of n elements through the device; returns elements differing from the
 * rank-order result (-1 when the call failed), and the result's checksum in *sum. */
static int64_t reduce_once(dpc_transport *t, dpc_device *dev, dpc_dtype dt, dpc_reduce op,
                           int64_t n, uint64_t call, uint64_t *sum) {
  size_t es = dt == DPC_F64 ? 8 : 4, bytes = (size_t)n * es;
  void *host = malloc(bytes ? bytes : 8), *buf = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  int64_t bad = -1;
  fill(host, dt, me, n, call);
  if (dev->ops->alloc(dev, bytes, &buf, &d) ||
      dev->ops->copy(dev, DPC_COPY_H2D, buf, host, bytes, NULL, &d) ||
      t->ops->all_reduce(t, (uint32_t)me, buf, dt, n, op, &d) ||
      dev->ops->copy(dev, DPC_COPY_D2H, host, buf, bytes, NULL, &d)) {
    CHECK(0, "all_reduce of %lld %s: %s", (long long)n, dpc_dtype_name(dt), d.msg);
  } else {
    bad = 0;
    *sum = 1469598103934665603ull;
    for (int64_t i = 0; i < n; i++) {
      char want[8];
      expected(dt, op, i, call, want);
      bad += memcmp(want, (char *)host + (size_t)i * es, es) != 0;
      for (size_t b = 0; b < es; b++)
        *sum = (*sum ^ (unsigned char)((char *)host)[(size_t)i * es + b]) * 1099511628211ull;
    }
  }
  if (buf) dev->ops->free(dev, buf);
  free(host);
  dpc_diag_free(&d);
  return bad;
}

/* Every rank's checksum is the same. */
static bool same_everywhere(uint64_t sum) {
  uint64_t *all = calloc((size_t)D, sizeof *all);
  MPI_Allgather(&sum, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
  bool same = true;
  for (int q = 0; q < D; q++) same &= all[q] == sum;
  free(all);
  return same;
}

static void all_reduces(dpc_transport *t, dpc_device *dev, bool baseline) {
  /* the last: chunks of several segments and a partial one (transport_mpi.c's SEG_BYTES) */
  const int64_t sizes[] = {1, 7, 1000, 1 << 20, (3 << 20) + 5};
  const dpc_reduce ops[] = {DPC_REDUCE_SUM, DPC_REDUCE_MEAN, DPC_REDUCE_MEAN_WIDE};
  uint64_t call = 0;
  for (int k = 0; k < 2; k++) {
    dpc_dtype dt = k ? DPC_F64 : DPC_F32;
    for (int o = 0; o < (baseline ? 1 : 3); o++) {
      if (ops[o] == DPC_REDUCE_MEAN_WIDE && dt == DPC_F64) continue;
      for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        uint64_t sum = 0;
        int64_t bad = reduce_once(t, dev, dt, ops[o], sizes[s], call++, &sum);
        if (bad < 0) return;
        CHECK(same_everywhere(sum), "all_reduce of %lld %s (op %d): ranks differ",
              (long long)sizes[s], dpc_dtype_name(dt), (int)ops[o]);
        if (!baseline || D == 2)
          CHECK(bad == 0,
                "all_reduce of %lld %s (op %d): %lld elements differ from the "
                "%s result",
                (long long)sizes[s], dpc_dtype_name(dt), (int)ops[o], (long long)bad,
                hosts ? "hosts-then-ranks order" : "rank-order");
        else if (me == 0)
          printf("baseline: MPI_Iallreduce of %lld %s on %d ranks: %lld elements differ from "
                 "the rank-order sum\n",
                 (long long)sizes[s], dpc_dtype_name(dt), D, (long long)bad);
      }
    }
  }
}

static void broadcasts(dpc_transport *t, dpc_device *dev) {
  const int64_t n = 1000;
  float host[1000], want[1000];
  void *buf = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(dev->ops->alloc(dev, sizeof host, &buf, &d) == DPC_OK, "%s", d.msg);
  for (int root = 0; root < D && buf; root++) {
    fill(host, DPC_F32, me, n, 100 + (uint64_t)root);
    fill(want, DPC_F32, root, n, 100 + (uint64_t)root);
    dpc_status st = dev->ops->copy(dev, DPC_COPY_H2D, buf, host, sizeof host, NULL, &d);
    if (!st) st = t->ops->broadcast(t, (uint32_t)me, (uint32_t)root, buf, sizeof host, &d);
    if (!st) st = dev->ops->copy(dev, DPC_COPY_D2H, host, buf, sizeof host, NULL, &d);
    CHECK(!st, "broadcast from %d: %s", root, d.msg);
    CHECK(st || !memcmp(host, want, sizeof host), "broadcast from %d: other bytes", root);
  }
  if (buf) dev->ops->free(dev, buf);
  dpc_diag_free(&d);
}

/* Each rank hands its values to the next around the ring, small and large (the large ones go
 * by MPI's rendezvous protocol): rank 0 sends first, the others receive first. */
static void ring(dpc_transport *t, dpc_device *dev) {
  const int64_t sizes[] = {1000, 1 << 20};
  dpc_diag d;
  dpc_diag_init(&d);
  for (int s = 0; s < 2; s++) {
    int64_t n = sizes[s];
    size_t bytes = (size_t)n * 4;
    float *host = malloc(bytes), *want = malloc(bytes);
    void *buf = NULL, *got = NULL;
    int next = (me + 1) % D, prev = (me + D - 1) % D;
    fill(want, DPC_F32, prev, n, 200 + (uint64_t)s);
    fill(host, DPC_F32, me, n, 200 + (uint64_t)s);
    dpc_status st = dev->ops->alloc(dev, bytes, &buf, &d);
    if (!st) st = dev->ops->alloc(dev, bytes, &got, &d);
    if (!st) st = dev->ops->copy(dev, DPC_COPY_H2D, buf, host, bytes, NULL, &d);
    for (int phase = 0; phase < 2 && !st; phase++)
      st = (phase == (me == 0 ? 0 : 1))
               ? t->ops->send(t, (uint32_t)me, (uint32_t)next, buf, bytes, &d)
               : t->ops->recv(t, (uint32_t)me, (uint32_t)prev, got, bytes, &d);
    if (!st) st = dev->ops->copy(dev, DPC_COPY_D2H, host, got, bytes, NULL, &d);
    CHECK(!st, "ring of %lld: %s", (long long)n, d.msg);
    CHECK(st || !memcmp(host, want, bytes), "ring of %lld: other bytes from rank %d", (long long)n,
          prev);
    if (buf) dev->ops->free(dev, buf);
    if (got) dev->ops->free(dev, got);
    free(host);
    free(want);
  }
  dpc_diag_free(&d);
}

/* The last rank enters each barrier 0.3 s late: nobody may leave before it came. The ranks share
 * one machine, so the monotonic clock is one clock: each rank's exit time is compared with the
 * late rank's entry time, sent round after the barrier (a rank's own entry time would not do:
 * under load a rank enters late too, and its wait is shorter through no fault of the barrier). */
static void barriers(dpc_transport *t) {
  dpc_diag d;
  dpc_diag_init(&d);
  for (int k = 0; k < 3; k++) {
    if (me == D - 1) sleep_s(0.3);
    double entered = now_s();
    dpc_status st = t->ops->barrier(t, (uint32_t)me, &d);
    double left = now_s();
    CHECK(!st, "barrier %d: %s", k, d.msg);
    double late = entered;
    MPI_Bcast(&late, 1, MPI_DOUBLE, D - 1, MPI_COMM_WORLD);
    CHECK(left >= late, "barrier %d: left %.3f s before the late rank came", k, late - left);
  }
  dpc_diag_free(&d);
}

/* The last rank skips an all-reduce; the others must fail naming it (timeout: after waiting
 * the 2 s; mismatch: when its barrier message shows up), then end the job. */
static int skip(dpc_transport *t, dpc_device *dev, bool mismatch) {
  const double timeout = 2.0, slack = 3.0;
  uint64_t sum;
  CHECK(reduce_once(t, dev, DPC_F32, DPC_REDUCE_SUM, 1000, 0, &sum) == 0, "first all_reduce");
  dpc_diag d;
  dpc_diag_init(&d);
  char host[MPI_MAX_PROCESSOR_NAME] = {0}, who[64];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  snprintf(who, sizeof who, "rank %d (", D - 1);
  if (me == D - 1) {
    if (mismatch) {
      dpc_status st = t->ops->barrier(t, (uint32_t)me, &d);
      fprintf(stderr, "rank %d (the skipper): barrier: %s\n", me, st ? d.msg : "returned");
    } else {
      sleep_s(timeout + slack + 5); /* stopped by the others' abort well before */
    }
    sleep_s(30);
    fprintf(stderr, "rank %d: not stopped by the others' abort\n", me);
    return 1;
  }
  void *buf = NULL;
  double t0 = now_s();
  dpc_status st = dev->ops->alloc(dev, 4000, &buf, &d);
  if (!st) st = t->ops->all_reduce(t, (uint32_t)me, buf, DPC_F32, 1000, DPC_REDUCE_SUM, &d);
  double took = now_s() - t0;
  fprintf(stderr, "rank %d: all_reduce failed after %.2f s: %s\n", me, took, d.msg);
  bool named = st && strstr(d.msg, who) && strstr(d.msg, host);
  bool ok = mismatch
                ? named && strstr(d.msg, "barrier") && took < timeout
                : named && strstr(d.msg, "waited") && took >= timeout && took < timeout + slack;
  /* a later call fails at once with the first reason */
  dpc_status again = t->ops->barrier(t, (uint32_t)me, &d);
  ok = ok && again && strstr(d.msg, "failed earlier");
  fprintf(stderr, "%s rank %d\n", ok ? (mismatch ? "MISMATCH-OK" : "TIMEOUT-OK") : "SKIP-BAD", me);
  if (me == 0) sleep_s(0.5); /* the others print theirs first */
  t->ops->abort(t, "the test", ok ? "the skipped call was reported" : "the skip went unreported");
  return 1; /* not reached: abort ends the job */
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s cpu|testmem all|baseline|timeout|mismatch|hosts\n", argv[0]);
    return 2;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &D);
  const char *mode = argv[2];
  bool baseline = !strcmp(mode, "baseline");
  if (baseline) setenv("DPC_MPI_ALLREDUCE", "mpi", 1);
  dpc_diag d;
  dpc_diag_init(&d);
  char devname[32];
  snprintf(devname, sizeof devname, "%s:0", argv[1]);
  dpc_device *dev = NULL;
  dpc_transport *t = NULL;
  bool skipping = !strcmp(mode, "timeout") || !strcmp(mode, "mismatch");
  if (dpc_device_open(devname, &dev, &d) ||
      dpc_transport_open_mpi(MPI_COMM_WORLD, dev, devname, skipping ? 2.0 : 30.0, &t, &d)) {
    fprintf(stderr, "rank %d: %s\n", me, d.msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  CHECK(dpc_transport_mpi_rank(t) == (uint32_t)me && t->ranks == (uint32_t)D, "rank or size");
  CHECK(!strcmp(t->ops->kind, "mpi"), "kind %s", t->ops->kind);
  if (skipping) return skip(t, dev, !strcmp(mode, "mismatch"));
  if (!strcmp(mode, "hosts")) {
    hosts = 2;
    if (dpc_transport_mpi_split_hosts(t, (uint32_t)hosts, &d)) {
      fprintf(stderr, "rank %d: %s\n", me, d.msg);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    CHECK(dpc_transport_mpi_hosts(t) == (uint32_t)hosts, "%u hosts", dpc_transport_mpi_hosts(t));
  }
  all_reduces(t, dev, baseline);
  if (!baseline) {
    broadcasts(t, dev);
    ring(t, dev);
    barriers(t);
    /* a call as another rank is refused */
    dpc_status st = t->ops->barrier(t, (uint32_t)(me + 1) % (uint32_t)D, &d);
    CHECK(st == DPC_ERR_INVALID, "a barrier as another rank: %d", (int)st);
  }
  int all = 0;
  MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!all) printf("MPI-OK rank %d of %d on %s (%s)\n", me, D, devname, mode);
  dpc_transport_free(t);
  dpc_device_close(dev);
  dpc_diag_free(&d);
  MPI_Finalize();
  return all ? 1 : 0;
}
