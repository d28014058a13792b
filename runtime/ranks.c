/*
 * ranks.c — the words device 0's process says to the other ranks of a split model (ranks.h).
 */
#include "runtime/ranks.h"

#include <sched.h>
#include <time.h>

dpc_status dpc_ranks_tell(const struct dpc_ranks *r, dpc_ranks_word word, uint64_t rows,
                          dpc_diag *d) {
  uint64_t msg[2] = {word, rows};
  for (uint32_t k = 1; k < r->t->ranks; k++) {
    dpc_status st = r->t->ops->send(r->t, r->self, k, msg, sizeof msg, d);
    if (st) return st;
  }
  return DPC_OK;
}

dpc_status dpc_ranks_stop_all(const struct dpc_ranks *const *lanes, unsigned n, dpc_diag *d) {
  dpc_status first = DPC_OK;
  for (unsigned i = 0; i < n; i++) {
    dpc_diag e;
    dpc_diag_init(&e);
    dpc_status st = dpc_ranks_tell(lanes[i], DPC_RANKS_STOP, 0, &e);
    if (st && !first) first = dpc_diag_fail(d, st, "%s", e.msg ? e.msg : "a lane failed");
    dpc_diag_free(&e);
  }
  return first;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool dpc_ranks_await(dpc_transport *t, uint32_t rank, uint32_t peer, double timeout_s,
                     long nap_us) {
  double t0 = now_s();
  while (!t->ops->ready(t, rank, peer)) {
    double waited = now_s() - t0;
    if (waited < 1e-3) {
      sched_yield();
      continue;
    }
    if (timeout_s > 0 && waited > timeout_s) return false;
    struct timespec ts = {0, nap_us * 1000};
    nanosleep(&ts, NULL);
  }
  return true;
}

dpc_status dpc_ranks_hear(const struct dpc_ranks *r, dpc_ranks_word *word, uint64_t *rows,
                          dpc_diag *d) {
  if (!r->t->ops->ready)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "the %s transport cannot wait for a peer without a deadline",
                         r->t->ops->kind);
  dpc_ranks_await(r->t, r->self, 0, 0, 50); /* an idle lane: a probe every 50 us */
  uint64_t msg[2];
  dpc_status st = r->t->ops->recv(r->t, r->self, 0, msg, sizeof msg, d);
  if (st) return st;
  if (msg[0] != DPC_RANKS_STOP && msg[0] != DPC_RANKS_RUN)
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "rank %u heard word %llu from rank 0", r->self,
                         (unsigned long long)msg[0]);
  *word = (dpc_ranks_word)msg[0];
  *rows = msg[1];
  return DPC_OK;
}
