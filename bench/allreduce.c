/*
 * allreduce.c — dpc's shared-memory ring all-reduce against a plain memcpy of the same bytes.
 *
 *   build/bench/bench_allreduce [--devices cpu:2] [--reps N]
 *
 * One thread per device (runtime/topology.h), bound to the device's first core, each with its
 * own f32 buffer touched by that thread. After warm-up calls, every call is timed on rank 0 (the
 * collective itself lines the ranks up); the median is reported as time and as bus bandwidth,
 * 2 (D-1)/D x bytes / time, the figure NCCL and MPI benchmarks quote: the bytes each rank must
 * move. Both algorithms (collective.h): direct, the default on shared memory, and the ring. The
 * memcpy row copies the same bytes once between two buffers touched beforehand, on one core: what
 * any implementation has to beat to be "at memory speed".
 */
#include "runtime/collective.h"
#include "runtime/topology.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct rank_job {
  dpc_comm *c;
  uint32_t rank, pu;
  bool bind;
  int64_t n;
  int reps, warmup;
  double *times; /* rank 0: per timed call */
  int failed;
} rank_job;

static void *rank_main(void *arg) {
  rank_job *j = arg;
  if (j->bind) dpc_bind_thread(j->pu);
  float *buf = aligned_alloc(64, (size_t)(j->n + 16) * sizeof *buf);
  if (!buf) {
    j->failed = 1;
    return NULL;
  }
  for (int64_t i = 0; i < j->n; i++) buf[i] = (float)(i % 251) * 0.01f; /* touched here */
  dpc_diag d;
  dpc_diag_init(&d);
  for (int r = 0; r < j->warmup + j->reps; r++) {
    double t0 = dpc_now_s();
    if (dpc_comm_all_reduce(j->c, j->rank, buf, DPC_F32, j->n, DPC_REDUCE_MEAN, &d)) {
      fprintf(stderr, "bench_allreduce: %s\n", d.msg);
      j->failed = 1;
      break;
    }
    if (j->times && r >= j->warmup) j->times[r - j->warmup] = dpc_now_s() - t0;
  }
  dpc_diag_free(&d);
  free(buf);
  return NULL;
}

static double bench_memcpy(size_t bytes, int reps) {
  char *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
  if (!a || !b) exit(1);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double *t = malloc((size_t)reps * sizeof *t);
  for (int r = 0; r < reps + 2; r++) {
    double t0 = dpc_now_s();
    memcpy(b, a, bytes);
    if (r >= 2) t[r - 2] = dpc_now_s() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  double med = t[reps / 2];
  free(t);
  free(a);
  free(b);
  return med;
}

int main(int argc, char **argv) {
  const char *spec = "cpu:2";
  int reps = 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--devices") && i + 1 < argc) {
      spec = argv[++i];
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else {
      printf(
          "Usage: bench_allreduce [--devices cpu:N] [--reps N]\n\n"
          "Times the shared-memory all-reduce (f32, mean; direct and ring) among the devices at\n"
          "1, 4, 16 and 64 MiB per rank, against one memcpy of the same bytes.\n");
      return strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  if (reps < 1) reps = 1;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_topology *t = NULL;
  dpc_device_list devs;
  if (dpc_topology_load(NULL, &t, &d) || dpc_devices_parse(t, spec, &devs, &d)) {
    fprintf(stderr, "bench_allreduce: %s\n", d.msg);
    return 1;
  }
  uint32_t D = devs.n;
  printf("all-reduce (f32, mean) on %s: %u ranks, %s\n", spec, D, t->description);
  printf("%-7s %10s  %10s  %12s  %10s  %12s  %6s\n", "algo", "bytes", "ms", "bus GB/s", "memcpy ms",
         "memcpy GB/s", "ratio");
  static const int64_t mib[] = {1, 4, 16, 64};
  for (int algo = DPC_ALLREDUCE_DIRECT; algo <= DPC_ALLREDUCE_RING; algo++)
    for (size_t s = 0; s < sizeof mib / sizeof *mib; s++) {
      int64_t n = mib[s] * 1024 * 1024 / 4;
      const char **names = calloc(D, sizeof *names);
      for (uint32_t r = 0; r < D; r++) names[r] = devs.devs[r].name;
      dpc_comm *c = NULL;
      if (dpc_comm_new(D, names, 60.0, &c, &d)) {
        fprintf(stderr, "bench_allreduce: %s\n", d.msg);
        return 1;
      }
      dpc_comm_set_algorithm(c, (dpc_allreduce_algo)algo);
      rank_job *jobs = calloc(D, sizeof *jobs);
      pthread_t *th = calloc(D, sizeof *th);
      double *times = calloc((size_t)reps, sizeof *times);
      for (uint32_t r = 0; r < D; r++) {
        jobs[r] = (rank_job){
            c, r, devs.devs[r].pus[0], !t->synthetic, n, reps, 3, r == 0 ? times : NULL, 0};
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
      }
      int failed = 0;
      for (uint32_t r = 0; r < D; r++) {
        pthread_join(th[r], NULL);
        failed |= jobs[r].failed;
      }
      if (failed) return 1;
      qsort(times, (size_t)reps, sizeof *times, cmp_double);
      double ring = times[reps / 2], bytes = (double)n * 4;
      double bus = D > 1 ? 2.0 * (D - 1) / D * bytes / ring : 0;
      double cp = bench_memcpy((size_t)bytes, reps);
      printf("%-7s %6lld MiB  %10.3f  %12.2f  %10.3f  %12.2f  %6.2f\n",
             algo == DPC_ALLREDUCE_RING ? "ring" : "direct", (long long)mib[s], ring * 1e3,
             bus * 1e-9, cp * 1e3, bytes / cp * 1e-9, bus / (bytes / cp));
      fflush(stdout);
      free(times);
      free(th);
      free(jobs);
      free(names);
      dpc_comm_free(c);
    }
  dpc_device_list_free(&devs);
  dpc_topology_free(t);
  dpc_diag_free(&d);
  return 0;
}
