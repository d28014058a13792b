/*
 * train_async.h — the parameter server's state, shared by train_async.c (the server and the
 * workers of one process) and train_async_ranks.c (workers on other MPI ranks).
 *
 * Across ranks the server stays on rank 0 with the workers of rank 0; every worker of another
 * rank has a proxy on rank 0, a worker like the others whose step is done elsewhere: it sends
 * the params and the sub-batch's position to its rank and takes back the loss and the
 * gradients. So the staleness rules, the order of summation and the log are the same code, and
 * the bits are those of the workers in one process.
 */
#ifndef DPC_DRIVER_TRAIN_ASYNC_H
#define DPC_DRIVER_TRAIN_ASYNC_H

#include "driver/train_internal.h"
#include "runtime/transport.h"

#include <pthread.h>

typedef struct worker {
  struct async_state *a;
  uint32_t id;
  run_t run;        /* its plan, kernels and session; x, y and loss (not for a proxy) */
  uint32_t *param;  /* per server param: the worker's value id */
  uint32_t *grad;   /* per gradient: the worker's output value id */
  uint64_t pulled;  /* the version its step computes on, UINT64_MAX when idle */
  uint32_t waiting; /* its gradients pushed and not yet applied */
  double loss;      /* of its last step */
  float *g;         /* the gradients of its last step, concatenated (swapped into a pending) */
  /* across ranks: the transport between rank 0 and the worker's rank (rank 0 is its rank 0),
   * on both; NULL for a worker of rank 0 */
  dpc_transport *pair;
  unsigned char *params; /* the params packed to send (proxy) or as received (remote) */
  pthread_t th;
  dpc_status st;
  dpc_diag d;
} worker;

typedef struct pending {
  uint32_t worker;
  uint64_t version;
  double loss;
  float *g; /* every gradient, concatenated */
} pending;

typedef struct async_state {
  trainer *t;
  uint32_t W, S, b;
  worker *w;
  uint32_t n_params, n_grads;
  uint32_t *s_param;   /* server value id of each param */
  uint32_t *s_grad;    /* server input value id of each gradient */
  uint64_t *param_off; /* each param's offset in a packed copy, and the total at n_params */
  uint64_t grad_floats;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t version;     /* updates applied */
  uint64_t next, total; /* sub-batches handed out this epoch, and how many there are */
  pending *pend;
  uint32_t n_pend;
  bool failed;
  bool remote_stop; /* a rank's worker was asked to stop (its SIGTERM): the epoch ends */
  uint64_t max_staleness;
  double loss_sum;
  uint64_t samples, step;
  double epoch_t0;
  dpc_diag *d;
} async_state;

/* The rank a worker runs on (0 without MPI). */
static inline uint32_t dpc_async_rank_of(const async_state *a, uint32_t id) {
  return a->t->peers ? id / a->t->local : 0;
}

/* train_async.c: a worker's step on the params in its session: its sub-batch at position pos
 * filled, the step run, the loss and gradients into w->loss and w->g. */
dpc_status dpc_async_local_step(async_state *a, worker *w, uint64_t pos, dpc_diag *d);

/* train_async_ranks.c. Open the transports between rank 0 and the other ranks' workers
 * (collective: every rank calls it, in the same place). */
dpc_status dpc_async_ranks_open(async_state *a, dpc_diag *d);
/* A proxy on rank 0: the server's params packed into w->params (under the server's lock). */
dpc_status dpc_async_proxy_pack(async_state *a, worker *w, dpc_diag *d);
/* A proxy's step: the params and position to its rank, the loss and gradients back; *stop is
 * set when that rank was asked to stop. */
dpc_status dpc_async_proxy_step(async_state *a, worker *w, uint64_t pos, bool *stop, dpc_diag *d);
/* A proxy tells its rank that the epoch is over. */
dpc_status dpc_async_proxy_end(async_state *a, worker *w, dpc_diag *d);
/* A worker on a rank other than 0: steps as its proxy asks, until the epoch is over. */
void *dpc_async_remote_main(void *arg);
/* After an epoch: rank 0's position and step count to every rank, so every rank's loop takes
 * the same turns; failed says rank 0's epoch failed, and the others then fail too. */
dpc_status dpc_async_ranks_agree(async_state *a, bool failed, dpc_diag *d);

#endif
