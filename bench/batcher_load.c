/*
 * batcher_load.c — an open-loop load generator for the batcher of libdpcrt, in process.
 *
 * Requests arrive as a Poisson process at the offered rate (exponential gaps, a fixed seed); a
 * generator thread submits each at its scheduled time, or at once if it is behind, and a done
 * callback stamps its answer. Latency is from the scheduled send time to the answer, so a
 * batcher that falls behind cannot hide its queueing in a late send (closed-loop generators,
 * which wait for an answer before sending again, do). Each (rate, delay) pair runs on a fresh
 * batcher for the given seconds, then closes it, which answers what is still queued.
 *
 *   bench_batcher_load MODEL.dpx [--rates R1,R2,..] [--delays US1,US2,..|auto] [--seconds S]
 *                      [--rows N] [--instances I] [--threads T] [--max-queue Q]
 *                      [--max-batch B]     (1: no batching, the baseline)
 *                      [--target-ms T]     (the auto delay's p99 target, default 50)
 *                      [--steps R1,R2,..]  (one run whose rate steps through R1, R2, ... for S
 *                                           seconds each, reported every --window-ms, default 250)
 *
 * Prints one line per pair: offered and achieved requests/s, p50/p90/p99/p99.9 latency in
 * microseconds, mean rows per batch, mean compute time per batch (packing, the run, unpacking)
 * in microseconds, requests refused (queue full), and the delay in force at the end (the auto
 * delay's choice). With --steps, one line per window of scheduled send times instead: its
 * offered rate, the requests answered, their p50 and p99, and the delay in force then.
 */
#include "load_common.h"

#include <dpc/dpc.h>

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct req {
  uint64_t sched, done; /* ns since the run's start; done 0: not answered */
  dpc_status st;
} req;

static uint64_t t_origin;
/* answers so far, and how many the generator waits for (once it has sent them all) */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_done = PTHREAD_COND_INITIALIZER;
static size_t answered, expected = SIZE_MAX;

/* On a batcher worker: stamp the answer. */
static void on_done(void *user, dpc_status st, const char *msg) {
  (void)msg;
  req *r = user;
  r->st = st;
  r->done = now_ns() - t_origin;
  pthread_mutex_lock(&mu);
  if (++answered >= expected) pthread_cond_signal(&all_done);
  pthread_mutex_unlock(&mu);
}

/* Numbers separated by commas; "auto" reads as -1. */
static size_t parse_list(const char *s, double *out, size_t max) {
  size_t n = 0;
  while (*s && n < max) {
    char *end;
    if (!strncmp(s, "auto", 4)) {
      out[n++] = -1;
      end = (char *)s + 4;
      s = *end == ',' ? end + 1 : end;
      continue;
    }
    out[n++] = strtod(s, &end);
    s = *end == ',' ? end + 1 : end;
    if (end == s && *s) break;
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: %s MODEL.dpx [--rates R,..] [--delays US,..] [--seconds S] [--rows N] "
            "[--instances I] [--threads T] [--max-queue Q] [--max-batch B]\n",
            argv[0]);
    return 2;
  }
  double rates[32] = {1000, 5000, 10000}, delays[16] = {0, 1000}, seconds = 2, target_ms = 50;
  double steps[32], window_ms = 250;
  size_t n_rates = 3, n_delays = 2, n_steps = 0;
  unsigned rows = 1, instances = 1, threads = 1;
  uint64_t max_queue = 0, max_batch = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--rates"))
      n_rates = parse_list(argv[i + 1], rates, 32);
    else if (!strcmp(argv[i], "--delays"))
      n_delays = parse_list(argv[i + 1], delays, 16);
    else if (!strcmp(argv[i], "--steps"))
      n_steps = parse_list(argv[i + 1], steps, 32);
    else if (!strcmp(argv[i], "--target-ms"))
      target_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--window-ms"))
      window_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds"))
      seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--rows"))
      rows = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--instances"))
      instances = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads"))
      threads = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-queue"))
      max_queue = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--max-batch"))
      max_batch = strtoull(argv[i + 1], NULL, 10);
    else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  char err[512];
  dpc_model *m;
  if (dpc_model_load(argv[1], &m, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  printf("# %s: requests of %u rows, %u instance(s) of %u thread(s), %.1f s per point\n", argv[1],
         rows, instances, threads, seconds);
  if (n_steps) {
    /* one run through the steps: the rates list is the steps, each `seconds` long */
    memcpy(rates, steps, n_steps * sizeof *steps);
    n_rates = 1;
    printf("%8s %10s %10s %9s %9s %8s\n", "t_s", "offered/s", "answered", "p50_us", "p99_us",
           "delay_us");
  } else {
    printf("%10s %8s %10s %9s %9s %9s %9s %10s %10s %8s %8s\n", "offered/s", "delay_us",
           "achieved/s", "p50_us", "p90_us", "p99_us", "p99.9_us", "rows/batch", "compute_us",
           "refused", "final_us");
  }
  for (size_t di = 0; di < n_delays; di++) {
    for (size_t ri = 0; ri < n_rates; ri++) {
      bool is_auto = delays[di] < 0;
      dpc_batcher_opts bo = {sizeof bo,
                             .instances = instances,
                             .threads = threads,
                             .delay_us = is_auto ? 0 : (uint64_t)delays[di],
                             .max_queue = max_queue,
                             .max_batch = max_batch,
                             .latency_target_us = is_auto ? (uint64_t)(target_ms * 1000) : 0};
      dpc_batcher *b;
      if (dpc_batcher_open(m, &bo, &b, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
      }
      dpc_tensor_info xi = {sizeof xi}, yi = {sizeof yi};
      dpc_batcher_info(b, DPC_ROLE_INPUT, 0, &xi);
      dpc_batcher_info(b, DPC_ROLE_OUTPUT, 0, &yi);
      if (dpc_batcher_count(b, DPC_ROLE_INPUT) != 1 || dpc_batcher_count(b, DPC_ROLE_OUTPUT) != 1) {
        fprintf(stderr, "a model of one input and one output, please\n");
        return 1;
      }
      size_t n_phases = n_steps ? n_steps : 1, n = 0;
      const double *phase_rate = n_steps ? steps : &rates[ri];
      for (size_t ph = 0; ph < n_phases; ph++) n += (size_t)(phase_rate[ph] * seconds) + 1;
      req *rq = calloc(n, sizeof *rq);
      unsigned char *x = calloc(rows, xi.bytes), *y = malloc(n * rows * yi.bytes);
      uint64_t *lat = malloc(n * sizeof *lat);
      if (!rq || !x || !y || !lat) return 1;
      for (size_t k = 0; k < rows * xi.bytes / 4; k++) ((float *)x)[k] = (float)(k % 255) / 255;
      /* the schedule first, so drawing it costs nothing while sending */
      uint64_t seed = 88172645463325252ull, t = 0;
      size_t sent = 0;
      for (size_t ph = 0; ph < n_phases; ph++) {
        uint64_t end = (uint64_t)((double)(ph + 1) * seconds * 1e9);
        if (t < (uint64_t)((double)ph * seconds * 1e9)) t = (uint64_t)((double)ph * seconds * 1e9);
        while (sent < n) {
          seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
          double u = ((double)(seed >> 11) + 0.5) / 9007199254740992.0;
          uint64_t next = t + (uint64_t)(-log(u) / phase_rate[ph] * 1e9);
          if (next >= end) break;
          rq[sent++].sched = t = next;
        }
      }
      n = sent;
      /* the delay in force, sampled as the generator goes (for --steps) */
      size_t n_windows = (size_t)(seconds * (double)n_phases * 1e3 / window_ms) + 1;
      uint64_t *window_delay = calloc(n_windows, sizeof *window_delay);
      if (!window_delay) return 1;
      pthread_mutex_lock(&mu);
      answered = 0, expected = SIZE_MAX;
      pthread_mutex_unlock(&mu);
      t_origin = now_ns();
      size_t refused = 0;
      for (size_t i = 0; i < n; i++) {
        uint64_t at = t_origin + rq[i].sched;
        if (now_ns() < at) {
          struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
          while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) {
          }
        }
        const void *in[] = {x};
        void *out[] = {y + i * rows * yi.bytes};
        dpc_batcher_request r = {sizeof r,       .rows = rows,    .inputs = in,
                                 .outputs = out, .done = on_done, .user = &rq[i]};
        if (dpc_batcher_submit(b, &r, NULL, err, sizeof err)) refused++, rq[i].st = DPC_ERR_BUSY;
        size_t w = (size_t)((double)rq[i].sched / 1e6 / window_ms);
        if (n_steps && w < n_windows && (i % 16) == 0) {
          dpc_batcher_stats ws = {sizeof ws};
          dpc_batcher_get_stats(b, &ws);
          window_delay[w] = ws.delay_us;
        }
      }
      pthread_mutex_lock(&mu);
      expected = n - refused;
      while (answered < expected) pthread_cond_wait(&all_done, &mu);
      pthread_mutex_unlock(&mu);
      dpc_batcher_stats s = {sizeof s};
      dpc_batcher_get_stats(b, &s);
      dpc_batcher_close(b);
      size_t done = 0;
      uint64_t last = 0;
      for (size_t i = 0; i < n; i++) {
        if (rq[i].done && rq[i].st == DPC_OK) {
          lat[done++] = rq[i].done - rq[i].sched;
          if (rq[i].done > last) last = rq[i].done;
        }
      }
      if (n_steps) {
        /* per window of scheduled send times: what was offered, and how it was answered */
        for (size_t w = 0; w < n_windows; w++) {
          uint64_t lo = (uint64_t)((double)w * window_ms * 1e6),
                   hi = (uint64_t)((double)(w + 1) * window_ms * 1e6);
          size_t k = 0, offered = 0;
          for (size_t i = 0; i < n; i++) {
            if (rq[i].sched < lo || rq[i].sched >= hi) continue;
            offered++;
            if (rq[i].done && rq[i].st == DPC_OK) lat[k++] = rq[i].done - rq[i].sched;
          }
          if (!offered) continue;
          qsort(lat, k, sizeof *lat, cmp_u64);
          printf("%8.2f %10.0f %10zu %9.1f %9.1f %8llu\n", (double)lo / 1e9,
                 (double)offered / (window_ms / 1e3), k, pct(lat, k, 0.5), pct(lat, k, 0.99),
                 (unsigned long long)window_delay[w]);
        }
        if (is_auto) printf("# the auto delay's last reason: %s\n", s.delay_reason);
        free(rq), free(x), free(y), free(lat), free(window_delay);
        continue;
      }
      free(window_delay);
      qsort(lat, done, sizeof *lat, cmp_u64);
      char delay_text[16];
      if (is_auto)
        snprintf(delay_text, sizeof delay_text, "auto");
      else
        snprintf(delay_text, sizeof delay_text, "%.0f", delays[di]);
      printf("%10.0f %8s %10.0f %9.1f %9.1f %9.1f %9.1f %10.2f %10.1f %8zu %8llu\n", rates[ri],
             delay_text, last ? (double)done / ((double)last / 1e9) : 0, pct(lat, done, 0.5),
             pct(lat, done, 0.9), pct(lat, done, 0.99), pct(lat, done, 0.999),
             s.batches ? (double)s.rows / (double)s.batches : 0,
             s.batches ? (double)s.compute_ns_total / (double)s.batches / 1e3 : 0, refused,
             (unsigned long long)s.delay_us);
      if (is_auto) printf("#   auto: %s\n", s.delay_reason);
      fflush(stdout);
      free(rq), free(x), free(y), free(lat);
    }
  }
  dpc_model_free(m);
  return 0;
}
