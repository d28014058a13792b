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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

dpc_status dpc_ranks_hear(const struct dpc_ranks *r, dpc_ranks_word *word, uint64_t *rows,
                          dpc_diag *d) {
  if (!r->t->ops->ready)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "the %s transport cannot wait for a peer without a deadline",
                         r->t->ops->kind);
  /* yield for the first millisecond (a busy server's next batch is that close), then nap: an
   * idle lane costs a probe every 50 us, not a core */
  double t0 = now_s();
  while (!r->t->ops->ready(r->t, r->self, 0)) {
    if (now_s() - t0 < 1e-3) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
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
