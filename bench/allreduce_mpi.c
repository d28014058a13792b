/*
 * allreduce_mpi.c — the MPI transport's all-reduce (runtime/transport_mpi.c: rank-order sums,
 * bit-identical to the shared-memory transport) against MPI_Allreduce, f32, 4 KiB to 64 MiB.
 *
 *   mpirun --allow-run-as-root --oversubscribe -np 4 build/bench/bench_allreduce_mpi [--reps N]
 *          [--pretend-hosts H]
 *
 * --pretend-hosts H groups the ranks into H pretended hosts of consecutive ranks, so dpc's
 * all-reduce goes hierarchically (within each host, then between the hosts' first ranks);
 * MPI_Allreduce is MPI's whichever way.
 *
 * Each rank has a cpu device, whose memory the transport hands MPI as it is (no staging copies);
 * MPI_Allreduce works in place on a host buffer. The two
 * are timed in alternation, each call after an MPI_Barrier, as the slowest rank's time; the
 * median over the calls is printed with the algorithm bandwidth (bytes / time) and the bus
 * bandwidth, 2 (R-1)/R x bytes / time (the bytes each rank must move: NCCL's and the OSU
 * benchmarks' figure). Speed is measured here, never asserted.
 */
#include "runtime/transport_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The slowest rank's time of one call. */
static double slowest(double t) {
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me = 0, R = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &R);
  int reps = 20, hosts = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    if (!strcmp(argv[i], "--pretend-hosts") && i + 1 < argc) hosts = atoi(argv[++i]);
  }
  if (reps < 1) reps = 1;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_device *dev = NULL;
  dpc_transport *t = NULL;
  if (dpc_device_open("cpu:0", &dev, &d) ||
      dpc_transport_open_mpi(MPI_COMM_WORLD, dev, "cpu:0", 120, &t, &d) ||
      (hosts > 0 && dpc_transport_mpi_split_hosts(t, (uint32_t)hosts, &d))) {
    fprintf(stderr, "rank %d: %s\n", me, d.msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const size_t max_bytes = (size_t)64 << 20;
  void *buf = NULL;
  float *host = malloc(max_bytes);
  if (!host || dev->ops->alloc(dev, max_bytes, &buf, &d)) {
    fprintf(stderr, "rank %d: out of memory\n", me);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < max_bytes / 4; i++) host[i] = (float)((i + (size_t)me) % 7) * 0.25f;
  double *td = malloc((size_t)reps * sizeof *td), *tm = malloc((size_t)reps * sizeof *tm);
  if (me == 0) {
    printf("all-reduce, f32, %d ranks, median of %d calls each (slowest rank per call)\n", R, reps);
    if (hosts > 0) printf("dpc's on %d pretended hosts (hierarchical)\n", hosts);
    printf("%9s | %11s %9s %9s | %11s %9s %9s | %6s\n", "bytes", "dpc us", "algo GB/s", "bus GB/s",
           "MPI us", "algo GB/s", "bus GB/s", "dpc/MPI");
  }
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    int64_t n = (int64_t)(bytes / 4);
    for (int k = -2; k < reps; k++) { /* two warm-up calls of each */
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (t->ops->all_reduce(t, (uint32_t)me, buf, DPC_F32, n, DPC_REDUCE_SUM, &d)) {
        fprintf(stderr, "rank %d: %s\n", me, d.msg);
        t->ops->abort(t, "the benchmark", d.msg);
      }
      double a = slowest(MPI_Wtime() - t0);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, host, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double b = slowest(MPI_Wtime() - t0);
      if (k >= 0) td[k] = a, tm[k] = b;
      /* the sums grow without bound otherwise; the values do not matter to the time */
      if (k % 8 == 7) memset(host, 0, bytes);
    }
    qsort(td, (size_t)reps, sizeof *td, cmp_double);
    qsort(tm, (size_t)reps, sizeof *tm, cmp_double);
    double a = td[reps / 2], b = tm[reps / 2], bus = 2.0 * (R - 1) / R * (double)bytes;
    if (me == 0)
      printf("%9zu | %11.1f %9.2f %9.2f | %11.1f %9.2f %9.2f | %6.2f\n", bytes, a * 1e6,
             (double)bytes / a * 1e-9, bus / a * 1e-9, b * 1e6, (double)bytes / b * 1e-9,
             bus / b * 1e-9, a / b);
  }
  free(td);
  free(tm);
  free(host);
  dev->ops->free(dev, buf);
  dpc_transport_free(t);
  dpc_device_close(dev);
  dpc_diag_free(&d);
  MPI_Finalize();
  return 0;
}
