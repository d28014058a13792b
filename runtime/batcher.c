/*
 * batcher.c — the batcher of the public API (include/dpc/dpc.h): requests of any row count from
 * any thread, packed in arrival order into batches that run on a model's runners.
 *
 * One mutex guards the queue, the tickets and the counters; workers sleep on `work` (a request
 * came, the batcher closes, or the oldest request's delay runs out: a timed wait), callers on
 * their ticket's condition variable, close on `idle`. A worker holds the lock only to cut a batch
 * and to answer it: packing, the run and unpacking happen outside it, on the instance's own
 * buffers, so instances run in parallel. Tickets are recycled through a free list, so in the
 * steady state a request allocates nothing.
 *
 * Each instance has one runner per inference plan up to the one that holds max_batch rows, each
 * bound to the instance's staging buffers (64-byte aligned, so a one-device plan reads and
 * writes them in place): a batch of n rows runs on the smallest plan of at least n, its padding
 * rows zero, exactly as a runner opened with rows = n would run it, so every request's rows come
 * out as they would alone.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include "runtime/api_internal.h"
#include "runtime/batcher_auto.h"
#include "runtime/ranks.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* More plans than anyone compiles (--batch-sizes lists a few). */
#define MAX_PLANS 32

struct dpc_batcher_ticket {
  dpc_batcher_ticket *next; /* in the queue or the free list */
  dpc_batcher_ticket *all;  /* every ticket made, to free them at close */
  uint64_t rows;
  const void **inputs; /* n_in pointers, stored after the struct */
  void **outputs;      /* n_out pointers, after those */
  void (*done)(void *user, dpc_status st, const char *msg);
  void *user;
  uint64_t t_submit; /* ns, CLOCK_MONOTONIC */
  bool answered;
  dpc_status st;
  pthread_cond_t cv;
  char msg[256];
};

typedef struct instance {
  struct dpc_batcher *b;
  unsigned n_plans;
  int64_t plan_rows[MAX_PLANS];
  dpc_runner *runners[MAX_PLANS];
  unsigned char **in_buf, **out_buf; /* staging, the largest plan's rows of each */
  dpc_batcher_ticket **batch;        /* the batch being run: at most max_batch requests */
  pthread_t thread;
  bool started;
} instance;

typedef struct tensor {
  dpc_tensor_info info; /* one row's */
  char name[128];
  size_t row_bytes;
} tensor;

struct dpc_batcher {
  dpc_model *m;
  /* dpc_batcher_opts.ranks (one per instance), and whether this process is device 0's (the
   * one that takes requests); NULL: the model runs in this process */
  dpc_ranks *const *ranks;
  bool part;
  /* a model split over devices, run by several instances: a turn per device, which pipelines
   * consecutive batches through the devices (dpc_session_set_turns); NULL otherwise */
  pthread_mutex_t *turns;
  unsigned n_turns;
  uint64_t max_batch, delay_us, max_queue;
  dpc_log_fn log;
  void *log_user;
  unsigned n_in, n_out;
  tensor *in, *out;
  unsigned n_inst;
  instance *inst;

  pthread_mutex_t mu;
  pthread_cond_t work, idle;
  dpc_batcher_ticket *head, *tail, *free_list, *all;
  uint64_t outstanding; /* tickets submitted and not yet waited for (or called back) */
  bool closing;
  dpc_batcher_stats st; /* the counters; queued, busy and the settings filled in as read */

  /* the auto delay (latency_target_us > 0): what it measures and when it last chose */
  uint64_t latency_target_us;
  dpc_auto_input measured;
  uint64_t arrivals, arrival_rows, t_chosen;
  uint64_t cpu_at; /* the process's CPU time (ns) at t_chosen */
  unsigned cores;  /* the cores this process may run on */
  bool all_cores;  /* they are all the machine's: its whole CPU load counts (tune_delay) */
  uint64_t mach_busy, mach_total; /* the machine's CPU ticks at t_chosen */
  uint64_t t_behind; /* when a batch was last cut with a full batch still queued; 0: never */
  uint64_t cuts;     /* batches cut (cut_rows) */
  char why[sizeof((dpc_auto_choice *)0)->why];
};

/* The auto delay measures batches per plan, an instance's plans at most, in as many buckets as
 * the statistics' histogram has. */
_Static_assert(MAX_PLANS <= DPC_AUTO_BUCKETS, "a bucket for every plan");
_Static_assert(DPC_AUTO_BUCKETS == DPC_BATCHER_HIST, "one bucket per batch_hist entry");

/* How quickly the arrival rate follows a change: the weight of the newest. */
#define RATE_WEIGHT 0.5
/* The auto delay is chosen again after a batch once this much time has passed (ns). */
#define CHOOSE_EVERY_NS 20000000u

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static dpc_status put(char *err, size_t n, dpc_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static dpc_status put(char *err, size_t n, dpc_status st, const char *fmt, ...) {
  if (err && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
  }
  return st;
}

/* ---- running a batch ----------------------------------------------------------------------- */

/* Pack the batch's requests into the staging buffers, run plan p (the smallest that holds them)
 * and copy each request's rows out. Outside the lock: the buffers are the instance's own. */
static dpc_status run_batch(instance *in, unsigned p, unsigned n, uint64_t rows, char *msg,
                            size_t msg_len) {
  const dpc_batcher *b = in->b;
  uint64_t plan = (uint64_t)in->plan_rows[p];
  for (unsigned i = 0; i < b->n_in; i++) {
    size_t rb = b->in[i].row_bytes, at = 0;
    for (unsigned k = 0; k < n; k++) {
      memcpy(in->in_buf[i] + at, in->batch[k]->inputs[i], in->batch[k]->rows * rb);
      at += in->batch[k]->rows * rb;
    }
    /* zero padding, as a runner with rows < its plan's pads */
    memset(in->in_buf[i] + at, 0, (plan - rows) * rb);
  }
  dpc_runner *r = in->runners[p];
  dpc_status st = dpc_runner_run(r);
  if (st) {
    snprintf(msg, msg_len, "%s", dpc_runner_error(r));
    return st;
  }
  for (unsigned o = 0; o < b->n_out; o++) {
    size_t rb = b->out[o].row_bytes, at = 0;
    for (unsigned k = 0; k < n; k++) {
      memcpy(in->batch[k]->outputs[o], in->out_buf[o] + at, in->batch[k]->rows * rb);
      at += in->batch[k]->rows * rb;
    }
  }
  msg[0] = 0;
  return DPC_OK;
}

/* Back to the free list; close waits for the last one. Under the lock. */
static void release(dpc_batcher *b, dpc_batcher_ticket *t) {
  t->next = b->free_list;
  b->free_list = t;
  if (--b->outstanding == 0 && b->closing) pthread_cond_broadcast(&b->idle);
}

/* The time_hist entry of ns nanoseconds (dpc.h: up to 2^k x 64 us). */
static unsigned time_bucket(uint64_t ns) {
  unsigned k = 0;
  while (k + 1 < DPC_BATCHER_TIME_HIST && ns > (64000ull << k)) k++;
  return k;
}

static uint64_t process_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The machine's CPU time so far, busy and in all (ticks of /proc/stat's first line); false when
 * it cannot be read. */
static bool machine_cpu(uint64_t *busy, uint64_t *total) {
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long v[8] = {0};
  int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7])
            : 0;
  if (f) fclose(f);
  if (n < 5) return false;
  *total = 0;
  for (int i = 0; i < 8; i++) *total += v[i];
  *busy = *total - v[3] - v[4]; /* less idle and waiting for I/O */
  return true;
}

/* The cores this process may run on (its affinity), at least 1. */
static unsigned process_cores(void) {
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  return n > 0 ? (unsigned)n : 1;
}

/* After a batch, under the lock, every CHOOSE_EVERY_NS: the arrival rate measured and the delay
 * chosen again. */
static void tune_delay(dpc_batcher *b, uint64_t now) {
  dpc_auto_input *m = &b->measured;
  if (now - b->t_chosen < CHOOSE_EVERY_NS) return;
  double span = (double)(now - b->t_chosen) * 1e-9;
  double rate = (double)b->arrivals / span;
  double per_req = b->arrivals ? (double)b->arrival_rows / (double)b->arrivals : 1;
  m->rate = m->rate > 0 ? m->rate + RATE_WEIGHT * (rate - m->rate) : rate;
  m->rows_per_req =
      m->rows_per_req > 0 ? m->rows_per_req + RATE_WEIGHT * (per_req - m->rows_per_req) : per_req;
  uint64_t cpu = process_cpu_ns();
  double busy = (double)(cpu - b->cpu_at) * 1e-9 / (span * b->cores);
  /* a process free to use every core shares them with whatever else runs (its clients, on a
   * test machine): cores kept busy by others are as full, and larger batches free some */
  uint64_t mb = 0, mt = 0;
  if (b->all_cores && machine_cpu(&mb, &mt) && mt > b->mach_total) {
    double machine = (double)(mb - b->mach_busy) / (double)(mt - b->mach_total);
    if (machine > busy) busy = machine;
    b->mach_busy = mb, b->mach_total = mt;
  }
  m->cpu_busy = m->cpu_busy > 0 ? m->cpu_busy + RATE_WEIGHT * (busy - m->cpu_busy) : busy;
  b->cpu_at = cpu;
  b->arrivals = b->arrival_rows = 0;
  b->t_chosen = now;
  m->delay_us = b->delay_us;
  m->behind_s = !b->t_behind ? -1 : now > b->t_behind ? (double)(now - b->t_behind) * 1e-9 : 0;
  dpc_auto_choice c;
  dpc_batcher_auto_choose(m, &c);
  b->delay_us = c.delay_us;
  memcpy(b->why, c.why, sizeof b->why);
}

/* The rows to cut of the `rows` that fit a batch: the first requests that fill the plan
 * dpc_batcher_auto_cut picks by the measured times, the rest going first in the next batch.
 * Every 64th cut takes them all, so a plan passed over is measured again. Under the lock. */
static uint64_t cut_rows(dpc_batcher *b, uint64_t rows) {
  double cut = dpc_batcher_auto_cut(&b->measured, (double)rows);
  if (cut >= (double)rows || b->cuts++ % 64 == 0) return rows;
  uint64_t head = 0;
  for (const dpc_batcher_ticket *t = b->head; t && (double)(head + t->rows) <= cut; t = t->next)
    head += t->rows;
  return head ? head : rows;
}

static void *worker_main(void *arg) {
  instance *in = arg;
  dpc_batcher *b = in->b;
  char msg[sizeof in->batch[0]->msg];
  pthread_mutex_lock(&b->mu);
  for (;;) {
    if (!b->head) {
      if (b->closing) break;
      pthread_cond_wait(&b->work, &b->mu);
      continue;
    }
    /* Wait for more rows while the oldest request's delay lasts, unless they already fill a
     * batch or the batcher is draining. Every idle worker may wait here; whichever wakes first
     * cuts, and the others look again. */
    if (!b->closing && b->delay_us && b->st.queued_rows < b->max_batch) {
      uint64_t deadline = b->head->t_submit + b->delay_us * 1000u;
      if (now_ns() < deadline) {
        struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
        pthread_cond_timedwait(&b->work, &b->mu, &ts);
        continue;
      }
    }
    /* Cut: requests in arrival order while they fit (one that does not waits for the next),
     * or fewer where that runs a smaller plan to more effect. */
    uint64_t fit = 0;
    for (const dpc_batcher_ticket *t = b->head; t && fit + t->rows <= b->max_batch; t = t->next)
      fit += t->rows;
    uint64_t take = cut_rows(b, fit);
    unsigned n = 0;
    uint64_t rows = 0, t0 = now_ns();
    while (b->head && rows + b->head->rows <= take) {
      dpc_batcher_ticket *t = b->head;
      b->head = t->next;
      if (!b->head) b->tail = NULL;
      in->batch[n++] = t;
      rows += t->rows;
      uint64_t q = t0 - t->t_submit;
      b->st.queue_ns_total += q;
      if (q > b->st.queue_ns_max) b->st.queue_ns_max = q;
      b->st.queue_hist[time_bucket(q)]++;
    }
    b->st.queued -= n;
    b->st.queued_rows -= rows;
    if (b->st.queued_rows >= b->max_batch) b->t_behind = t0; /* for the auto delay */
    b->st.busy++;
    if (b->head) pthread_cond_signal(&b->work); /* the rest is another idle worker's */
    pthread_mutex_unlock(&b->mu);

    unsigned plan = dpc_batcher_auto_plan(&b->measured, (double)rows); /* its plan index */
    dpc_status st = run_batch(in, plan, n, rows, msg, sizeof msg);
    uint64_t dt = now_ns() - t0;
    if (st && b->log) b->log(b->log_user, msg);
    for (unsigned k = 0; k < n; k++)
      if (in->batch[k]->done) in->batch[k]->done(in->batch[k]->user, st, msg);

    pthread_mutex_lock(&b->mu);
    b->st.busy--;
    b->st.batches++;
    b->st.rows += rows;
    unsigned bucket = 0;
    while (bucket + 1 < DPC_BATCHER_HIST && (rows >> (bucket + 1))) bucket++;
    b->st.batch_hist[bucket]++;
    dpc_batcher_auto_measure(&b->measured, plan, (double)rows, (double)dt * 1e-9);
    if (b->latency_target_us) tune_delay(b, t0 + dt);
    b->st.compute_ns_total += dt;
    b->st.compute_hist[time_bucket(dt)]++;

    if (dt > b->st.compute_ns_max) b->st.compute_ns_max = dt;
    b->st.requests += n;
    if (st) b->st.failed += n;
    for (unsigned k = 0; k < n; k++) {
      dpc_batcher_ticket *t = in->batch[k];
      if (t->done) {
        release(b, t);
        continue;
      }
      t->st = st;
      memcpy(t->msg, msg, sizeof t->msg);
      t->answered = true;
      pthread_cond_signal(&t->cv);
    }
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* An instance on a process other than device 0's: its device's part of every batch device 0's
 * process runs on the same instance, until that batcher closes. A failure here cannot be
 * answered to a request: the transport's abort ends every process (MPI_Abort), saying why. */
static void *part_main(void *arg) {
  instance *in = arg;
  dpc_batcher *b = in->b;
  const dpc_ranks *r = b->ranks[in - b->inst];
  char msg[512];
  for (;;) {
    dpc_ranks_word word;
    uint64_t rows = 0;
    dpc_diag d;
    dpc_diag_init(&d);
    dpc_status st = dpc_ranks_hear(r, &word, &rows, &d);
    snprintf(msg, sizeof msg, "%s", st && d.msg ? d.msg : "");
    dpc_diag_free(&d);
    if (!st && word == DPC_RANKS_STOP) break;
    unsigned p = 0;
    while (!st && p < in->n_plans && in->plan_rows[p] != (int64_t)rows) p++;
    if (!st && p == in->n_plans) {
      st = DPC_ERR_INTERNAL;
      snprintf(msg, sizeof msg, "rank %u: rank 0 ran a plan of %llu rows, which this one lacks",
               r->self, (unsigned long long)rows);
    }
    uint64_t t0 = now_ns();
    if (!st && (st = dpc_runner_run(in->runners[p])))
      snprintf(msg, sizeof msg, "%s", dpc_runner_error(in->runners[p]));
    if (st) {
      if (b->log) b->log(b->log_user, msg);
      r->t->ops->abort(r->t, "the batcher", msg);
      break;
    }
    pthread_mutex_lock(&b->mu);
    b->st.batches++;
    b->st.rows += rows;
    b->st.compute_ns_total += now_ns() - t0;
    pthread_mutex_unlock(&b->mu);
  }
  return NULL;
}

/* Device 0's process: the other processes' instances stop (each hears it on its own lane). */
static void tell_stop(dpc_batcher *b) {
  if (!b->ranks || b->part) return;
  dpc_diag d;
  dpc_diag_init(&d);
  if (dpc_ranks_stop_all((const struct dpc_ranks *const *)b->ranks, b->n_inst, &d) && b->log)
    b->log(b->log_user, d.msg ? d.msg : "cannot tell the other ranks to stop");
  dpc_diag_free(&d);
}

/* ---- opening and closing ------------------------------------------------------------------- */

static dpc_status read_opts(const dpc_batcher_opts *o, dpc_batcher_opts *out, char *err,
                            size_t err_len) {
  memset(out, 0, sizeof *out);
  if (!o) return DPC_OK;
  if (o->size < offsetof(dpc_batcher_opts, instances) + sizeof o->instances)
    return put(err, err_len, DPC_ERR_INVALID,
               "the batcher options' size is %zu: set it to sizeof(dpc_batcher_opts)", o->size);
  memcpy(out, o, o->size < sizeof *out ? o->size : sizeof *out);
  out->size = sizeof *out;
  if (out->ranks && !out->instances)
    return put(err, err_len, DPC_ERR_INVALID,
               "a batcher over processes needs its instances counted: one dpc_ranks each");
  for (unsigned i = 0; out->ranks && i < out->instances; i++)
    if (!out->ranks[i] || out->ranks[i]->self != out->ranks[0]->self)
      return put(err, err_len, DPC_ERR_INVALID,
                 "instance %u's dpc_ranks is missing or names another process", i);
  return DPC_OK;
}

/* The tensors of a role as a request holds them, from the largest plan's runner: one row each,
 * refusing any without the plan's rows as its leading dimension. */
static dpc_status list_tensors(dpc_runner *r, int64_t rows, dpc_role role, tensor **out,
                               unsigned *count, char *err, size_t err_len) {
  unsigned n = dpc_runner_count(r, role);
  *count = n;
  if (!(*out = calloc(n ? n : 1, sizeof **out)))
    return put(err, err_len, DPC_ERR_NOMEM, "out of memory");
  for (unsigned i = 0; i < n; i++) {
    tensor *t = &(*out)[i];
    t->info.size = sizeof t->info;
    dpc_status st = dpc_runner_info(r, role, i, &t->info);
    if (st) return put(err, err_len, st, "cannot describe the model's tensors");
    snprintf(t->name, sizeof t->name, "%s", t->info.name);
    t->info.name = t->name;
    if (!t->info.rank || t->info.dims[0] != rows)
      return put(err, err_len, DPC_ERR_UNSUPPORTED,
                 "the batcher needs every input and output batched, and '%s' has no leading "
                 "dimension of the plan's %lld rows",
                 t->name, (long long)rows);
    t->row_bytes = t->info.bytes / (size_t)rows;
    t->info.dims[0] = 1;
    t->info.bytes = t->row_bytes;
  }
  return DPC_OK;
}

/* Instances when none are asked for: one, or one per device for a model split over devices
 * (with turns, so many batches in flight keep each device busy). */
static unsigned default_instances(const dpc_model *m) {
  return dpc_model_pipeline_devices(m);
}

/* Instances of a model split over devices take turns on each device, so that while one
 * instance's batch is on the second device the next instance's starts on the first: without
 * turns both would run on the first device's cores at once, and the second's stay idle. */
static dpc_status take_turns(dpc_batcher *b, char *err, size_t err_len) {
  unsigned n = 0;
  for (unsigned i = 0; i < b->n_inst; i++)
    for (unsigned p = 0; p < b->inst[i].n_plans; p++) {
      dpc_runner *r = b->inst[i].runners[p];
      if (!dpc_runner_pipelines(r)) return DPC_OK;
      if (dpc_runner_devices(r) > n) n = dpc_runner_devices(r);
    }
  if (!(b->turns = calloc(n, sizeof *b->turns)))
    return put(err, err_len, DPC_ERR_NOMEM, "out of memory");
  b->n_turns = n;
  for (unsigned k = 0; k < n; k++) pthread_mutex_init(&b->turns[k], NULL);
  for (unsigned i = 0; i < b->n_inst; i++)
    for (unsigned p = 0; p < b->inst[i].n_plans; p++)
      dpc_runner_set_turns(b->inst[i].runners[p], b->turns, n);
  return DPC_OK;
}

/* An instance's runners, one per plan up to the one that holds max_batch rows, bound to its
 * staging buffers. */
static dpc_status open_instance(dpc_batcher *b, instance *in, const dpc_batcher_opts *o,
                                const int64_t *rows, unsigned n_rows, char *err, size_t err_len) {
  in->b = b;
  for (unsigned i = 0; i < n_rows; i++) {
    in->plan_rows[in->n_plans++] = rows[i];
    if (rows[i] >= (int64_t)b->max_batch) break;
  }
  int64_t top = in->plan_rows[in->n_plans - 1];
  for (unsigned p = 0; p < in->n_plans; p++) {
    /* rows = the plan's own batch selects exactly that plan and lets it use the buffers in
     * place */
    /* every runner reads the first one's params (inference never writes them): one copy of
     * the weights however many instances and plans, which a model split over devices because
     * it does not fit one needs */
    dpc_runner *first = b->inst[0].runners[0];
    dpc_runner_opts ro = {sizeof ro,
                          .mode = DPC_MODE_INFER,
                          .threads = o->threads ? o->threads : 1,
                          .devices = o->devices,
                          .log = o->log,
                          .log_user = o->log_user,
                          .rows = (uint64_t)in->plan_rows[p],
                          .share = first,
                          .ranks = b->ranks ? b->ranks[in - b->inst] : NULL};
    dpc_status st = dpc_runner_open(b->m, &ro, &in->runners[p], err, err_len);
    if (st) return st;
  }
  if (!b->in) {
    dpc_runner *r = in->runners[in->n_plans - 1];
    dpc_status st = list_tensors(r, top, DPC_ROLE_INPUT, &b->in, &b->n_in, err, err_len);
    if (!st) st = list_tensors(r, top, DPC_ROLE_OUTPUT, &b->out, &b->n_out, err, err_len);
    if (st) return st;
    if (!b->n_in || !b->n_out)
      return put(err, err_len, DPC_ERR_UNSUPPORTED, "the model has no %s to batch",
                 b->n_in ? "output" : "input");
  }
  if (b->part) return DPC_OK; /* no requests here: nothing to stage */
  in->in_buf = calloc(b->n_in, sizeof *in->in_buf);
  in->out_buf = calloc(b->n_out, sizeof *in->out_buf);
  in->batch = calloc(b->max_batch, sizeof *in->batch);
  if (!in->in_buf || !in->out_buf || !in->batch)
    return put(err, err_len, DPC_ERR_NOMEM, "out of memory");
  for (unsigned k = 0; k < b->n_in + b->n_out; k++) {
    bool input = k < b->n_in;
    const tensor *t = input ? &b->in[k] : &b->out[k - b->n_in];
    size_t bytes = (t->row_bytes * (size_t)top + 63) / 64 * 64;
    unsigned char *buf = aligned_alloc(64, bytes ? bytes : 64);
    if (!buf) return put(err, err_len, DPC_ERR_NOMEM, "out of memory");
    memset(buf, 0, bytes);
    if (input)
      in->in_buf[k] = buf;
    else
      in->out_buf[k - b->n_in] = buf;
    for (unsigned p = 0; p < in->n_plans; p++) {
      dpc_runner *r = in->runners[p];
      if (dpc_runner_bind(r, t->name, buf, t->row_bytes * (size_t)in->plan_rows[p]))
        return put(err, err_len, DPC_ERR_INTERNAL, "binding '%s' for %lld rows: %s", t->name,
                   (long long)in->plan_rows[p], dpc_runner_error(r));
    }
  }
  return DPC_OK;
}

static void free_instance(dpc_batcher *b, instance *in) {
  for (unsigned p = 0; p < in->n_plans; p++) dpc_runner_free(in->runners[p]);
  for (unsigned i = 0; in->in_buf && i < b->n_in; i++) free(in->in_buf[i]);
  for (unsigned i = 0; in->out_buf && i < b->n_out; i++) free(in->out_buf[i]);
  free(in->in_buf);
  free(in->out_buf);
  free(in->batch);
}

static void free_batcher(dpc_batcher *b) {
  for (unsigned i = 0; b->inst && i < b->n_inst; i++) free_instance(b, &b->inst[i]);
  for (dpc_batcher_ticket *t = b->all, *next; t; t = next) {
    next = t->all;
    pthread_cond_destroy(&t->cv);
    free(t);
  }
  free(b->inst);
  for (unsigned k = 0; k < b->n_turns; k++) pthread_mutex_destroy(&b->turns[k]);
  free(b->turns);
  free(b->in);
  free(b->out);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->work);
  pthread_cond_destroy(&b->idle);
  free(b);
}

DPC_API dpc_status dpc_batcher_open(dpc_model *m, const dpc_batcher_opts *opts, dpc_batcher **out,
                                    char *err, size_t err_len) {
  *out = NULL;
  if (err && err_len) err[0] = 0;
  dpc_batcher_opts o;
  dpc_status st = read_opts(opts, &o, err, err_len);
  if (st) return st;
  int64_t rows[MAX_PLANS];
  unsigned n_rows = dpc_model_infer_rows(m, rows, MAX_PLANS);
  if (!n_rows || rows[n_rows - 1] <= 0)
    return put(err, err_len, DPC_ERR_UNSUPPORTED, "the model has no batched inference plan");
  uint64_t batch = (uint64_t)rows[n_rows - 1];
  if (o.max_batch > batch)
    return put(err, err_len, DPC_ERR_SHAPE,
               "max_batch %llu is more than the %llu rows the artifact was compiled for",
               (unsigned long long)o.max_batch, (unsigned long long)batch);

  dpc_batcher *b = calloc(1, sizeof *b);
  if (!b) return put(err, err_len, DPC_ERR_NOMEM, "out of memory");
  b->m = m;
  b->ranks = o.ranks;
  b->part = o.ranks && o.ranks[0]->self != 0;
  b->max_batch = o.max_batch ? o.max_batch : batch;
  b->delay_us = o.delay_us;
  b->max_queue = o.max_queue;
  b->latency_target_us = o.latency_target_us;
  unsigned n_inst = o.instances ? o.instances : default_instances(m);
  b->measured.instances = n_inst;
  b->measured.max_batch = o.max_batch ? o.max_batch : batch;
  b->measured.target_s = (double)o.latency_target_us * 1e-6;
  b->t_chosen = now_ns();
  b->cpu_at = process_cpu_ns();
  b->cores = process_cores();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  b->all_cores =
      online > 0 && b->cores == (unsigned)online && machine_cpu(&b->mach_busy, &b->mach_total);
  snprintf(b->why, sizeof b->why, "no load measured yet: the starting delay");
  b->log = o.log;
  b->log_user = o.log_user;
  b->n_inst = n_inst;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  /* the delay is measured on the monotonic clock, which a clock change does not move */
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->work, &ca);
  pthread_cond_init(&b->idle, NULL);
  pthread_condattr_destroy(&ca);
  b->inst = calloc(b->n_inst, sizeof *b->inst);
  if (!b->inst) st = put(err, err_len, DPC_ERR_NOMEM, "out of memory");
  for (unsigned i = 0; !st && i < b->n_inst; i++)
    st = open_instance(b, &b->inst[i], &o, rows, n_rows, err, err_len);
  /* the auto delay and the cut know the plans a batch may run on: every instance's */
  for (unsigned p = 0; !st && p < b->inst[0].n_plans; p++)
    b->measured.plan_rows[b->measured.n_plans++] = (double)b->inst[0].plan_rows[p];
  if (!st && b->n_inst > 1) st = take_turns(b, err, err_len);
  for (unsigned i = 0; !st && i < b->n_inst; i++) {
    if (pthread_create(&b->inst[i].thread, NULL, b->part ? part_main : worker_main, &b->inst[i]))
      st = put(err, err_len, DPC_ERR_RUNTIME, "cannot start batcher worker %u", i);
    else
      b->inst[i].started = true;
  }
  if (st) {
    if (b->log && err && err_len) b->log(b->log_user, err);
    pthread_mutex_lock(&b->mu);
    b->closing = true;
    pthread_cond_broadcast(&b->work);
    pthread_mutex_unlock(&b->mu);
    tell_stop(b);
    for (unsigned i = 0; b->inst && i < b->n_inst; i++)
      if (b->inst[i].started) pthread_join(b->inst[i].thread, NULL);
    free_batcher(b);
    return st;
  }
  *out = b;
  return DPC_OK;
}

DPC_API unsigned dpc_batcher_count(const dpc_batcher *b, dpc_role role) {
  return role == DPC_ROLE_INPUT ? b->n_in : role == DPC_ROLE_OUTPUT ? b->n_out : 0;
}

DPC_API dpc_status dpc_batcher_info(const dpc_batcher *b, dpc_role role, unsigned i,
                                    dpc_tensor_info *info) {
  if (role != DPC_ROLE_INPUT && role != DPC_ROLE_OUTPUT) return DPC_ERR_INVALID;
  if (i >= dpc_batcher_count(b, role) || info->size < sizeof *info) return DPC_ERR_INVALID;
  *info = (role == DPC_ROLE_INPUT ? b->in : b->out)[i].info;
  return DPC_OK;
}

DPC_API dpc_status dpc_batcher_submit(dpc_batcher *b, const dpc_batcher_request *rq,
                                      dpc_batcher_ticket **ticket, char *err, size_t err_len) {
  if (ticket) *ticket = NULL;
  if (!rq || rq->size < offsetof(dpc_batcher_request, outputs) + sizeof rq->outputs)
    return put(err, err_len, DPC_ERR_INVALID,
               "the request's size is %zu: set it to sizeof(dpc_batcher_request)",
               rq ? rq->size : 0);
  dpc_batcher_request r = {0};
  memcpy(&r, rq, rq->size < sizeof r ? rq->size : sizeof r);
  if (r.rows < 1 || r.rows > b->max_batch)
    return put(err, err_len, DPC_ERR_SHAPE, "a request of %llu rows: the batcher takes 1 to %llu",
               (unsigned long long)r.rows, (unsigned long long)b->max_batch);
  if (!r.inputs || !r.outputs || (!r.done && !ticket))
    return put(err, err_len, DPC_ERR_INVALID,
               "a request needs its inputs, its outputs, and a done callback or a ticket");
  for (unsigned i = 0; i < b->n_in; i++)
    if (!r.inputs[i])
      return put(err, err_len, DPC_ERR_INVALID, "input '%s' is NULL", b->in[i].name);
  for (unsigned i = 0; i < b->n_out; i++)
    if (!r.outputs[i])
      return put(err, err_len, DPC_ERR_INVALID, "output '%s' is NULL", b->out[i].name);

  if (b->part)
    return put(err, err_len, DPC_ERR_UNSUPPORTED,
               "this process runs its device's part of the batches rank 0 takes: submit there");
  pthread_mutex_lock(&b->mu);
  dpc_status st = DPC_OK;
  if (b->closing)
    st = put(err, err_len, DPC_ERR_BUSY, "the batcher is closing: no new requests");
  else if (b->max_queue && b->st.queued >= b->max_queue)
    st = put(err, err_len, DPC_ERR_BUSY, "the queue is full: %llu requests wait (max_queue %llu)",
             (unsigned long long)b->st.queued, (unsigned long long)b->max_queue);
  dpc_batcher_ticket *t = NULL;
  if (!st && !(t = b->free_list)) {
    /* a new ticket only when more requests are out than ever before */
    size_t ptrs = (b->n_in + b->n_out) * sizeof(void *);
    if (!(t = calloc(1, sizeof *t + ptrs))) {
      st = put(err, err_len, DPC_ERR_NOMEM, "out of memory queueing a request");
    } else {
      t->inputs = (const void **)(t + 1);
      t->outputs = (void **)(t->inputs + b->n_in);
      pthread_cond_init(&t->cv, NULL);
      t->all = b->all;
      b->all = t;
    }
  } else if (!st) {
    b->free_list = t->next;
  }
  if (st) {
    if (st == DPC_ERR_BUSY) b->st.refused++;
    pthread_mutex_unlock(&b->mu);
    return st;
  }
  t->next = NULL;
  t->rows = r.rows;
  memcpy(t->inputs, r.inputs, b->n_in * sizeof *t->inputs);
  memcpy(t->outputs, r.outputs, b->n_out * sizeof *t->outputs);
  t->done = r.done;
  t->user = r.user;
  t->answered = false;
  t->st = DPC_OK;
  t->msg[0] = 0;
  t->t_submit = now_ns();
  if (b->tail)
    b->tail->next = t;
  else
    b->head = t;
  b->tail = t;
  b->st.queued++;
  b->st.queued_rows += t->rows;
  b->arrivals++;
  b->arrival_rows += t->rows;
  b->outstanding++;
  pthread_cond_signal(&b->work);
  pthread_mutex_unlock(&b->mu);
  if (!r.done) *ticket = t;
  return DPC_OK;
}

DPC_API dpc_status dpc_batcher_wait(dpc_batcher *b, dpc_batcher_ticket *t, char *err,
                                    size_t err_len) {
  if (!t) return put(err, err_len, DPC_ERR_INVALID, "no ticket");
  pthread_mutex_lock(&b->mu);
  while (!t->answered) pthread_cond_wait(&t->cv, &b->mu);
  dpc_status st = t->st;
  if (err && err_len) snprintf(err, err_len, "%s", t->msg);
  release(b, t);
  pthread_mutex_unlock(&b->mu);
  return st;
}

DPC_API dpc_status dpc_batcher_get_stats(dpc_batcher *b, dpc_batcher_stats *stats) {
  if (!stats || stats->size < offsetof(dpc_batcher_stats, requests) + sizeof stats->requests)
    return DPC_ERR_INVALID;
  size_t size = stats->size < sizeof *stats ? stats->size : sizeof *stats;
  pthread_mutex_lock(&b->mu);
  dpc_batcher_stats s = b->st;
  s.delay_us = b->delay_us;
  s.latency_target_us = b->latency_target_us;
  s.arrival_rate = b->measured.rate;
  if (b->latency_target_us) snprintf(s.delay_reason, sizeof s.delay_reason, "%s", b->why);
  pthread_mutex_unlock(&b->mu);
  s.size = size;
  s.max_batch = b->max_batch;
  s.instances = b->n_inst;
  memcpy(stats, &s, size);
  return DPC_OK;
}

DPC_API void dpc_batcher_shutdown(dpc_batcher *b) {
  pthread_mutex_lock(&b->mu);
  b->closing = true;
  pthread_cond_broadcast(&b->work); /* waiting out a delay no longer */
  pthread_mutex_unlock(&b->mu);
}

DPC_API void dpc_batcher_close(dpc_batcher *b) {
  if (!b) return;
  dpc_batcher_shutdown(b);
  for (unsigned i = 0; i < b->n_inst && !b->part; i++) pthread_join(b->inst[i].thread, NULL);
  /* the other processes' instances end when told; here, when device 0's batcher has told */
  tell_stop(b);
  for (unsigned i = 0; i < b->n_inst && b->part; i++) pthread_join(b->inst[i].thread, NULL);
  pthread_mutex_lock(&b->mu);
  while (b->outstanding) pthread_cond_wait(&b->idle, &b->mu);
  pthread_mutex_unlock(&b->mu);
  free_batcher(b);
}
