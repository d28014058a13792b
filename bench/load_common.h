/*
 * load_common.h — what the open-loop load generators (batcher_load.c, http_load.c) share: the
 * clock they schedule and stamp by, and the percentiles of their latencies.
 */
#ifndef DPC_BENCH_LOAD_COMMON_H
#define DPC_BENCH_LOAD_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The p-th quantile (0 < p <= 1) of the n sorted nanosecond times, in microseconds. */
static inline double pct(const uint64_t *v, size_t n, double p) {
  if (!n) return 0;
  size_t i = (size_t)ceil(p * (double)n) - 1;
  return (double)v[i < n ? i : n - 1] / 1e3;
}

#endif
