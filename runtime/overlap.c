/*
 * overlap.c — a device's communication thread (see overlap.h).
 *
 * A gradient's all-reduce is issued as soon as the gradient is computed, but if the device's
 * runner performs it, the backward pass stops until every device has arrived and the reduction
 * is done. Handed to this thread instead, it proceeds while the runner computes the next
 * gradients; the runner waits only where a kernel reads the reduced value (the optimizer's
 * update, at the end of the backward pass). Jobs run in the order posted, one at a time, so
 * every device meets the collectives in the plan's order, as before; the results are the same
 * bits.
 */
#include "runtime/overlap.h"

#include "runtime/topology.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { QUEUE = 1024 };

typedef struct job {
  dpc_overlap_fn fn;
  void *ctx;
  uint32_t arg;
} job;

struct dpc_overlap {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job q[QUEUE];
  uint64_t posted, done; /* jobs posted and finished, ever */
  bool stop;
  dpc_status st; /* the first failure, sticky until dpc_overlap_reset */
  dpc_diag diag;
};

static void *comm_main(void *arg) {
  dpc_overlap *o = arg;
  dpc_unbind_thread(); /* not its creator's core: that may be one device's */
  pthread_mutex_lock(&o->mu);
  for (;;) {
    while (!o->stop && o->done == o->posted) pthread_cond_wait(&o->cv, &o->mu);
    if (o->stop) break;
    job j = o->q[o->done % QUEUE];
    bool skip = o->st != DPC_OK; /* after a failure the rest are not run */
    pthread_mutex_unlock(&o->mu);
    dpc_diag d;
    dpc_diag_init(&d);
    dpc_status st = skip ? DPC_OK : j.fn(j.ctx, j.arg, &d);
    pthread_mutex_lock(&o->mu);
    if (st && !o->st) {
      o->st = st;
      dpc_diag_free(&o->diag);
      o->diag = d;
    } else {
      dpc_diag_free(&d);
    }
    o->done++;
    pthread_cond_broadcast(&o->cv);
  }
  pthread_mutex_unlock(&o->mu);
  return NULL;
}

dpc_status dpc_overlap_new(dpc_overlap **out, dpc_diag *d) {
  *out = NULL;
  dpc_overlap *o = calloc(1, sizeof *o);
  if (!o) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory starting a communication thread");
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->cv, NULL);
  dpc_diag_init(&o->diag);
  if (pthread_create(&o->thread, NULL, comm_main, o)) {
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    free(o);
    return dpc_diag_fail(d, DPC_ERR_RUNTIME, "cannot start a communication thread");
  }
  *out = o;
  return DPC_OK;
}

void dpc_overlap_free(dpc_overlap *o) {
  if (!o) return;
  pthread_mutex_lock(&o->mu);
  o->stop = true;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
  pthread_join(o->thread, NULL);
  pthread_mutex_destroy(&o->mu);
  pthread_cond_destroy(&o->cv);
  dpc_diag_free(&o->diag);
  free(o);
}

uint64_t dpc_overlap_post(dpc_overlap *o, dpc_overlap_fn fn, void *ctx, uint32_t arg) {
  pthread_mutex_lock(&o->mu);
  while (o->posted - o->done >= QUEUE) pthread_cond_wait(&o->cv, &o->mu);
  o->q[o->posted % QUEUE] = (job){fn, ctx, arg};
  uint64_t seq = ++o->posted;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
  return seq;
}

uint64_t dpc_overlap_posted(dpc_overlap *o) {
  pthread_mutex_lock(&o->mu);
  uint64_t n = o->posted;
  pthread_mutex_unlock(&o->mu);
  return n;
}

dpc_status dpc_overlap_wait(dpc_overlap *o, uint64_t seq, dpc_diag *d) {
  pthread_mutex_lock(&o->mu);
  while (o->done < seq) pthread_cond_wait(&o->cv, &o->mu);
  dpc_status st = o->st;
  if (st) dpc_diag_fail(d, st, "%s", o->diag.msg ? o->diag.msg : "a collective failed");
  pthread_mutex_unlock(&o->mu);
  return st;
}
