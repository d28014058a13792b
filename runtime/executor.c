/*
 * executor.c — device runners (see executor.h). Between runs a worker first watches for the next
 * one for up to SPIN_S (the caller usually starts it within microseconds: the time to feed the
 * next batch), then sleeps on a condition variable. A wake-up costs 40-90 us on these machines,
 * and the other devices wait that long at their first collective: 2% of a 2.5 ms data-parallel
 * step. Only a runner with cores of its own watches; where devices share cores, sleeping keeps
 * an idle device off the cores the others compute on.
 */
#include "runtime/executor.h"

#include "runtime/pool.h"
#include "runtime/topology.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define SPIN_S 300e-6

typedef struct runner {
  struct dpc_executor *ex;
  uint32_t dev;
  pthread_t thread;
  dpc_diag diag;
  dpc_status st;
} runner;

struct dpc_executor {
  uint32_t n;
  runner *runners; /* [0] is the caller's */
  uint32_t *pus;   /* NULL: unbound */
  dpc_device_run_fn fn;
  void *ctx;
  pthread_mutex_t mu;
  pthread_cond_t start, done;
  _Atomic uint64_t gen; /* runs started */
  uint32_t finished;    /* workers done with the current run */
  _Atomic bool stop;
  bool spin;         /* every runner is bound to a PU of its own: watch before sleeping */
  _Atomic int first; /* device + 1 of the first failure in this run */
  bool caller_bound;
};

static void run_one(dpc_executor *ex, runner *r) {
  r->st = ex->fn(ex->ctx, r->dev, &r->diag);
  if (r->st) {
    int expect = 0;
    atomic_compare_exchange_strong(&ex->first, &expect, (int)r->dev + 1);
  }
}

static void *worker_main(void *arg) {
  runner *r = arg;
  dpc_executor *ex = r->ex;
  if (ex->pus) dpc_bind_thread(ex->pus[r->dev]);
  uint64_t seen = 0;
  for (;;) {
    double t0 = ex->spin ? dpc_now_s() : 0;
    for (uint32_t k = 1; ex->spin && atomic_load_explicit(&ex->gen, memory_order_acquire) == seen &&
                         !atomic_load(&ex->stop);
         k++) {
      dpc_cpu_relax();
      if (k % 256 == 0 && dpc_now_s() - t0 > SPIN_S) break;
    }
    pthread_mutex_lock(&ex->mu);
    while (ex->gen == seen && !ex->stop) pthread_cond_wait(&ex->start, &ex->mu);
    if (ex->stop) {
      pthread_mutex_unlock(&ex->mu);
      return NULL;
    }
    seen = ex->gen;
    pthread_mutex_unlock(&ex->mu);
    run_one(ex, r);
    pthread_mutex_lock(&ex->mu);
    ex->finished++;
    pthread_cond_signal(&ex->done);
    pthread_mutex_unlock(&ex->mu);
  }
}

dpc_status dpc_executor_new(uint32_t n, const uint32_t *first_pu, dpc_device_run_fn fn, void *ctx,
                            dpc_executor **out, dpc_diag *d) {
  *out = NULL;
  dpc_executor *ex = calloc(1, sizeof *ex);
  if (!ex || !(ex->runners = calloc(n ? n : 1, sizeof *ex->runners)) ||
      (first_pu && !(ex->pus = malloc(n * sizeof *ex->pus)))) {
    if (ex) free(ex->runners);
    free(ex);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory starting device runners");
  }
  for (uint32_t i = 0; first_pu && i < n; i++) ex->pus[i] = first_pu[i];
  ex->spin = first_pu != NULL;
  for (uint32_t i = 0; ex->spin && i < n; i++)
    for (uint32_t j = 0; j < i; j++) ex->spin &= first_pu[i] != first_pu[j];
  ex->n = n;
  ex->fn = fn;
  ex->ctx = ctx;
  pthread_mutex_init(&ex->mu, NULL);
  pthread_cond_init(&ex->start, NULL);
  pthread_cond_init(&ex->done, NULL);
  for (uint32_t i = 0; i < n; i++) {
    ex->runners[i] = (runner){ex, i, 0, {0}, DPC_OK};
    dpc_diag_init(&ex->runners[i].diag);
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 16u << 20); /* kernels keep packed GEMM panels on the stack */
  for (uint32_t i = 1; i < n; i++) {
    if (pthread_create(&ex->runners[i].thread, &attr, worker_main, &ex->runners[i])) {
      ex->n = i; /* stop the ones started */
      pthread_attr_destroy(&attr);
      dpc_executor_free(ex);
      return dpc_diag_fail(d, DPC_ERR_RUNTIME, "cannot start the runner of device %u", i);
    }
  }
  pthread_attr_destroy(&attr);
  *out = ex;
  return DPC_OK;
}

void dpc_executor_free(dpc_executor *ex) {
  if (!ex) return;
  pthread_mutex_lock(&ex->mu);
  ex->stop = true;
  pthread_cond_broadcast(&ex->start);
  pthread_mutex_unlock(&ex->mu);
  for (uint32_t i = 1; i < ex->n; i++) pthread_join(ex->runners[i].thread, NULL);
  for (uint32_t i = 0; i < ex->n; i++) dpc_diag_free(&ex->runners[i].diag);
  pthread_mutex_destroy(&ex->mu);
  pthread_cond_destroy(&ex->start);
  pthread_cond_destroy(&ex->done);
  free(ex->runners);
  free(ex->pus);
  free(ex);
}

dpc_status dpc_executor_run(dpc_executor *ex, dpc_diag *d) {
  if (ex->pus && !ex->caller_bound) {
    dpc_bind_thread(ex->pus[0]);
    ex->caller_bound = true;
  }
  atomic_store(&ex->first, 0);
  pthread_mutex_lock(&ex->mu);
  ex->finished = 0;
  ex->gen++;
  pthread_cond_broadcast(&ex->start);
  pthread_mutex_unlock(&ex->mu);
  run_one(ex, &ex->runners[0]);
  pthread_mutex_lock(&ex->mu);
  while (ex->finished < ex->n - 1) pthread_cond_wait(&ex->done, &ex->mu);
  pthread_mutex_unlock(&ex->mu);
  int first = atomic_load(&ex->first);
  if (!first) return DPC_OK;
  const runner *r = &ex->runners[first - 1];
  return dpc_diag_fail(d, r->st, "%s", r->diag.msg ? r->diag.msg : "a device failed");
}
