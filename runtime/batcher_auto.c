/*
 * batcher_auto.c — choosing the batcher's delay from measurements (see batcher_auto.h).
 *
 * The model: each instance takes the requests that came while it ran its last batch plus those
 * that come during the delay, so at a delay d a batch holds b rows with b = (rate per instance)
 * x (d + s(b)), s the measured service time: the fixed point of that, capped at max_batch. The
 * instances are busy rho = (rate per instance) x s(b) / b of the time, and the p99 latency is
 * about d + s(b) + (2.3 s(b) rho + stall) / (1 - rho): an M/D/1 queue's mean wait,
 * rho s / 2(1 - rho), times the ln 100 that turns an exponential tail's mean into its 99th
 * percentile, and a request that came while the process was stalled (preempted, its CPU shared)
 * waiting out the stall and then the queue it left, drained at the spare rate 1 - rho. On a busy
 * machine the stall is what the p99 is made of, and it favours delays that leave more capacity
 * spare. Crude, but it ranks delays the way measurement does, and its numbers say why in the
 * metrics.
 *
 * The model is only as good as its measurements, and on a shared machine they are noisy: so the
 * choice keeps headroom (a predicted 80% busy at most), keeps to short delays while the stalls
 * rather than the load put every prediction over the target, takes a longer delay for
 * throughput only when it frees 5% of the instances' time, keeps more (60%) for a while after the
 * queue fell behind, when the measurements have just proved optimistic, does not lower the delay
 * then, and changes the delay in force only for a clear gain, so that noise does not make it
 * swing. Nothing here reads a clock: the past comes in the input.
 */
#include "runtime/batcher_auto.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Delays tried, in microseconds: 0, then roughly 1-2-5 steps up to the target's half. */
static const uint64_t grid_us[] = {
    0,     50,    100,   200,   300,   500,   700,    1000,   1500,   2000,   3000,   5000,   7000,
    10000, 15000, 20000, 30000, 50000, 70000, 100000, 150000, 200000, 300000, 500000, 1000000};
#define N_GRID (sizeof grid_us / sizeof *grid_us)

/* The busy fraction a chosen delay may predict: normally, and after the queue fell behind. */
#define HEADROOM        0.8
#define HEADROOM_BEHIND 0.6
/* How long after the queue fell behind the second holds (seconds). */
#define BEHIND_HOLD_S 0.25
/* Light load, no delay: a request alone keeps the instances at most this busy; once a delay is
 * in force, the load must fall lower to drop it. */
#define LIGHT       0.5
#define LIGHT_LEAVE 0.4
/* The process using this share of the cores or more: they are full, whatever the instances'
 * own busy time says. */
#define CPU_FULL 0.9
/* A new delay replaces the one in force if it predicts a p99 this much shorter (or the one in
 * force no longer fits the target and the headroom). */
#define KEEP_MARGIN 0.15
/* Where throughput decides, a longer delay wins only by this much less busy time: with batches
 * that gain little from size, noise would otherwise pick the longest. */
#define CAPACITY_GAIN 0.05
/* The typical service time: the weights of a faster and a slower batch, and the most a slower
 * one counts for, in typical times. */
#define FASTER_WEIGHT 0.3
#define SLOWER_WEIGHT 0.1
#define SLOWER_CAP    2.0
#define ROWS_WEIGHT   0.25
/* The stall: what is left of the longest lately after each batch, and the most one counts for,
 * in targets (one long stall must not make every delay look past the target). */
#define STALL_DECAY 0.998
#define STALL_CAP   0.25

void dpc_batcher_auto_measure(dpc_auto_input *in, unsigned k, double rows, double s) {
  if (k >= DPC_AUTO_BUCKETS || rows <= 0) return;
  if (in->bucket_rows[k] <= 0) {
    in->bucket_rows[k] = rows, in->bucket_s[k] = s;
    return;
  }
  double e = in->bucket_s[k], stall = s - e;
  if (stall > STALL_CAP * in->target_s) stall = STALL_CAP * in->target_s;
  in->stall_s = stall > in->stall_s * STALL_DECAY ? stall : in->stall_s * STALL_DECAY;
  if (s > SLOWER_CAP * e) s = SLOWER_CAP * e;
  in->bucket_s[k] += (s < e ? FASTER_WEIGHT : SLOWER_WEIGHT) * (s - e);
  in->bucket_rows[k] += ROWS_WEIGHT * (rows - in->bucket_rows[k]);
}

/* The time at `rows` along the measured points (x[k], in->bucket_s[k]), x[k] > 0 where bucket k
 * was measured, x ascending with k. */
static double along(const dpc_auto_input *in, const double *x, double rows) {
  int lo = -1, hi = -1, below = -1;
  for (int k = 0; k < DPC_AUTO_BUCKETS; k++) {
    if (x[k] <= 0) continue;
    if (x[k] <= rows) below = lo, lo = k;
    if (x[k] >= rows && hi < 0) hi = k;
  }
  if (lo < 0 && hi < 0) return 0;
  /* below every measurement: as slow as the smallest measured (a smaller batch is not slower) */
  if (lo < 0) return in->bucket_s[hi];
  if (hi < 0) {
    /* above every measurement: along the line through the two largest measured, so a load that
     * has so far made only small batches still predicts what larger ones gain; with one point,
     * or a line steeper than that, no more gain than measured (time grows with rows) */
    double r = x[lo], s = in->bucket_s[lo], per_row = s / r;
    if (below >= 0 && x[below] < r) {
      double slope = (s - in->bucket_s[below]) / (r - x[below]);
      if (slope < per_row) per_row = slope > 0 ? slope : 0;
    }
    return s + per_row * (rows - r);
  }
  if (lo == hi || x[hi] == x[lo]) return in->bucket_s[lo];
  double f = (rows - x[lo]) / (x[hi] - x[lo]);
  return in->bucket_s[lo] + f * (in->bucket_s[hi] - in->bucket_s[lo]);
}

unsigned dpc_batcher_auto_plan(const dpc_auto_input *in, double rows) {
  unsigned p = 0;
  while (p + 1 < in->n_plans && in->plan_rows[p] < rows) p++;
  return p;
}

double dpc_batcher_auto_cut(const dpc_auto_input *in, double rows) {
  unsigned p = dpc_batcher_auto_plan(in, rows);
  if (!in->n_plans || !p || in->bucket_rows[p] <= 0) return rows;
  double best = 1.1 * rows / in->bucket_s[p], cut = rows;
  for (unsigned q = 0; q < p; q++) {
    double rate = in->bucket_rows[q] > 0 ? in->plan_rows[q] / in->bucket_s[q] : 0;
    if (in->plan_rows[q] < rows && rate > best) best = rate, cut = in->plan_rows[q];
  }
  return cut;
}

double dpc_batcher_auto_service(const dpc_auto_input *in, double rows) {
  if (!in->n_plans) return along(in, in->bucket_rows, rows);
  unsigned p = dpc_batcher_auto_plan(in, rows);
  if (in->bucket_rows[p] > 0) return in->bucket_s[p];
  /* a plan not yet run: from the plans that were, by the rows each holds (a plan's time is
   * its whole batch's, whatever the rows it was given) */
  double x[DPC_AUTO_BUCKETS] = {0};
  for (unsigned k = 0; k < in->n_plans && k < DPC_AUTO_BUCKETS; k++)
    x[k] = in->bucket_rows[k] > 0 ? in->plan_rows[k] : 0;
  return along(in, x, in->plan_rows[p]);
}

typedef struct predicted {
  double b, s, rho, p99;
} predicted;

static predicted predict(const dpc_auto_input *in, double per_instance, double req_rows, double d) {
  predicted p = {req_rows, 0, 0, 0};
  double cap = (double)in->max_batch;
  for (int it = 0; it < 40; it++) {
    double s = dpc_batcher_auto_service(in, p.b);
    double b = per_instance * (d + s);
    b = b < req_rows ? req_rows : b > cap ? cap : b;
    if (in->n_plans) /* cut to the plan that serves best; plans make s a step: damped */
      b = 0.5 * (dpc_batcher_auto_cut(in, b) + p.b);
    if (fabs(b - p.b) < 1e-3 * p.b) {
      p.b = b;
      break;
    }
    p.b = b;
  }
  p.s = dpc_batcher_auto_service(in, p.b);
  p.rho = per_instance * p.s / p.b;
  /* a request that comes during a stall waits it out, then for the queue it left to drain at the
   * instances' spare rate */
  p.p99 = p.rho < 1 ? d + p.s + (2.3 * p.s * p.rho + in->stall_s) / (1 - p.rho) : INFINITY;
  return p;
}

void dpc_batcher_auto_choose(const dpc_auto_input *in, dpc_auto_choice *out) {
  memset(out, 0, sizeof *out);
  double req_rows = in->rows_per_req >= 1 ? in->rows_per_req : 1;
  double s1 = dpc_batcher_auto_service(in, req_rows);
  if (in->rate <= 0 || s1 <= 0) {
    out->batch_rows = req_rows;
    snprintf(out->why, sizeof out->why, "no load measured yet: no delay");
    return;
  }
  unsigned inst = in->instances ? in->instances : 1;
  double per_instance = in->rate * req_rows / inst; /* rows per second */
  double rho1 = per_instance * s1 / req_rows;
  bool behind = in->behind_s >= 0 && in->behind_s < BEHIND_HOLD_S;
  bool cores_full = in->cpu_busy >= CPU_FULL;
  if (!behind && !cores_full && rho1 <= (in->delay_us ? LIGHT_LEAVE : LIGHT)) {
    out->batch_rows = req_rows;
    out->busy = rho1;
    out->p99_s = predict(in, per_instance, req_rows, 0).p99;
    snprintf(out->why, sizeof out->why,
             "light load: %.0f requests/s, a request alone takes %.0f us, so the instances are "
             "%.0f%% busy without waiting for more",
             in->rate, s1 * 1e6, rho1 * 100);
    return;
  }
  double headroom = behind ? HEADROOM_BEHIND : HEADROOM, gain = cores_full ? 0 : CAPACITY_GAIN;
  int best = -1, fit = -1, calm = -1, any = -1;
  predicted pb = {0}, pf = {0}, pc = {0}, pa = {0};
  for (size_t g = 0; g < N_GRID; g++) {
    double d = (double)grid_us[g] * 1e-6;
    if (g && d > in->target_s / 2) break;
    /* just after the queue fell behind the measurements were optimistic: no shorter delay */
    if (behind && grid_us[g] < in->delay_us) continue;
    predicted p = predict(in, per_instance, req_rows, d);
    /* under the target with room to spare: the shortest p99 */
    if (p.p99 <= in->target_s && p.rho <= headroom && (best < 0 || p.p99 < pb.p99))
      best = (int)g, pb = p;
    /* under the target: the most capacity (a longer delay only for a clear gain, unless the
     * cores are full: the instances' busy time then understates what larger batches free) */
    if (p.p99 <= in->target_s && (fit < 0 || p.rho < pf.rho * (1 - gain))) fit = (int)g, pf = p;
    /* the target out of reach while capacity is to spare (the stalls, not the load, make the
     * predicted p99): the shortest p99 still; not when the cores are full, where the instances'
     * spare time is not the machine's */
    if (!cores_full && p.rho <= headroom && (calm < 0 || p.p99 < pc.p99)) calm = (int)g, pc = p;
    /* a batch alone within the target: the most capacity */
    if (d + p.s <= in->target_s && (any < 0 || p.rho < pa.rho * (1 - gain))) any = (int)g, pa = p;
  }
  const char *what;
  predicted p;
  uint64_t delay;
  char cores[96];
  snprintf(cores, sizeof cores,
           "the process uses %.0f%% of the cores: the most throughput under the target",
           in->cpu_busy * 100);
  if (cores_full && fit >= 0)
    delay = grid_us[fit], p = pf, what = cores;
  else if (best >= 0)
    delay = grid_us[best], p = pb,
    what = behind ? "the queue fell behind: the shortest p99 with 40% to spare"
                  : "the shortest p99 under the target";
  else if (fit >= 0)
    delay = grid_us[fit], p = pf, what = "near capacity: the most throughput under the target";
  else if (calm >= 0)
    delay = grid_us[calm], p = pc,
    what = "the target out of reach by the stalls measured: the shortest p99 with room to spare";
  else if (any >= 0)
    delay = grid_us[any], p = pa, what = "past capacity: the most throughput, the target missed";
  else
    delay = 0, p = predict(in, per_instance, req_rows, 0),
    what = "the target is shorter than a batch";
  /* the delay in force stays while it still fits with room to spare and the new one gains
   * little, or while the queue has lately fallen behind and the new one is shorter */
  if (delay != in->delay_us && (best >= 0 || behind) && !cores_full) {
    predicted cur = predict(in, per_instance, req_rows, (double)in->delay_us * 1e-6);
    bool fits = cur.p99 <= in->target_s && cur.rho <= headroom;
    if ((fits && p.p99 > cur.p99 * (1 - KEEP_MARGIN)) || (behind && delay < in->delay_us))
      delay = in->delay_us, p = cur,
      what = behind ? "the queue fell behind, the delay kept" : "kept (a change gains little)";
  }
  out->delay_us = delay;
  out->batch_rows = p.b;
  out->busy = p.rho;
  out->p99_s = p.p99;
  if (isfinite(p.p99))
    snprintf(out->why, sizeof out->why,
             "%s: %.0f requests/s; %llu us of delay makes batches of ~%.1f rows, %.0f us each; "
             "instances %.0f%% busy; p99 ~%.2f ms of %.2f",
             what, in->rate, (unsigned long long)delay, p.b, p.s * 1e6, p.rho * 100, p.p99 * 1e3,
             in->target_s * 1e3);
  else
    snprintf(out->why, sizeof out->why,
             "%s: %.0f requests/s; %llu us of delay makes batches of ~%.1f rows, %.0f us each; "
             "the instances would need %.0f%% of their time",
             what, in->rate, (unsigned long long)delay, p.b, p.s * 1e6, p.rho * 100);
}
