/*
 * train_async_ranks.c — the parameter server's workers on other MPI ranks (--devices mpi
 * --sync async). See train_async.h: rank 0 holds the server, and a proxy per remote worker
 * that stands in for it in the server's bookkeeping.
 *
 * A proxy and its worker talk over a transport of their own (a subset of the ranks' transport:
 * rank 0 and the worker's rank), so the proxies on rank 0 run in threads side by side without
 * sharing a transport's state, and every wait has the run's timeout and names the rank it
 * waits for. Per step, the proxy sends a command (the sub-batch's position) and the params as
 * of the version the step computes on; the worker fills its sub-batch from its own copy of the
 * data (every rank draws the same order from the same seed), runs the step and sends back the
 * loss, whether it was asked to stop, and the gradients as the f32 the server sums. At the end
 * of an epoch the command says so, and rank 0 hands every rank the position it reached.
 */
#include "driver/train_async.h"

#include "runtime/topology.h"

#include <stdlib.h>
#include <string.h>

enum { CMD_END, CMD_STEP };

dpc_status dpc_async_ranks_open(async_state *a, dpc_diag *d) {
  trainer *t = a->t;
  dpc_transport *x = t->peers;
  if (!x->ops->subset)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "asynchronous training across ranks needs a transport with subsets");
  /* rank 0 runs a proxy for each worker of the other ranks, at once */
  dpc_status st = a->W - t->local > 1
                      ? dpc_train_mpi_threads("the parameter server's proxies for 2 or more "
                                              "workers on other ranks",
                                              d)
                      : DPC_OK;
  for (uint32_t i = 0; i < a->W && !st; i++) {
    uint32_t where = dpc_async_rank_of(a, i), members[2] = {0, where};
    if (where == 0) continue;
    /* every rank takes part in making each pair: a split of the ranks' communicator */
    st = x->ops->subset(x, t->rank, members, 2, &a->w[i].pair, d);
  }
  return st;
}

dpc_status dpc_async_proxy_pack(async_state *a, worker *w, dpc_diag *d) {
  const trainer *t = a->t;
  dpc_status st = DPC_OK;
  for (uint32_t k = 0; k < a->n_params && !st; k++)
    st = dpc_session_read(t->train_full.s, a->s_param[k], w->params + a->param_off[k], d);
  return st;
}

dpc_status dpc_async_proxy_step(async_state *a, worker *w, uint64_t pos, bool *stop, dpc_diag *d) {
  dpc_transport *p = w->pair;
  uint64_t cmd[2] = {CMD_STEP, pos};
  double reply[2];
  dpc_status st = p->ops->send(p, 0, 1, cmd, sizeof cmd, d);
  if (!st) st = p->ops->send(p, 0, 1, w->params, a->param_off[a->n_params], d);
  if (!st) st = p->ops->recv(p, 0, 1, reply, sizeof reply, d);
  if (!st) st = p->ops->recv(p, 0, 1, w->g, a->grad_floats * sizeof *w->g, d);
  if (st) {
    dpc_diag_prefix(d, "step %llu (sub-batch %llu): ", (unsigned long long)w->pulled + 1,
                    (unsigned long long)pos + 1);
    return st;
  }
  w->loss = reply[0];
  *stop = reply[1] != 0;
  return DPC_OK;
}

dpc_status dpc_async_proxy_end(async_state *a, worker *w, dpc_diag *d) {
  (void)a;
  uint64_t cmd[2] = {CMD_END, 0};
  return w->pair->ops->send(w->pair, 0, 1, cmd, sizeof cmd, d);
}

/* One command from rank 0 carried out; *end when it says the epoch is over. */
static dpc_status serve_one(async_state *a, worker *w, bool *end, dpc_diag *d) {
  trainer *t = a->t;
  dpc_transport *p = w->pair;
  uint64_t cmd[2];
  dpc_status st = p->ops->recv(p, 1, 0, cmd, sizeof cmd, d);
  if (st || (*end = cmd[0] == CMD_END)) return st;
  if ((st = p->ops->recv(p, 1, 0, w->params, a->param_off[a->n_params], d))) return st;
  for (uint32_t k = 0; k < a->n_params && !st; k++)
    st = dpc_session_write(w->run.s, w->param[k], w->params + a->param_off[k], d);
  if (!st) st = dpc_async_local_step(a, w, cmd[1], d);
  if (st) return st;
  double reply[2] = {w->loss, dpc_train_cancelled(t)};
  st = p->ops->send(p, 1, 0, reply, sizeof reply, d);
  if (!st) st = p->ops->send(p, 1, 0, w->g, a->grad_floats * sizeof *w->g, d);
  return st;
}

void *dpc_async_remote_main(void *arg) {
  worker *w = arg;
  async_state *a = w->a;
  dpc_unbind_thread(); /* as worker_main: not on the core the main thread may be bound to */
  bool end = false;
  while (!end && !w->st) w->st = serve_one(a, w, &end, &w->d);
  return NULL;
}

dpc_status dpc_async_ranks_agree(async_state *a, bool failed, dpc_diag *d) {
  trainer *t = a->t;
  uint64_t at[3] = {failed, t->step, t->batch_pos};
  dpc_diag quiet = {0};
  dpc_status st =
      t->peers->ops->broadcast(t->peers, t->rank, 0, at, sizeof at, failed ? &quiet : d);
  dpc_diag_clear(&quiet);
  /* a rank lost here is lost at the end of the epoch, after the last update */
  if (st && !failed) dpc_diag_prefix(d, "step %llu: ", (unsigned long long)t->step);
  if (st || t->rank == 0) return st;
  if (at[0])
    return dpc_diag_fail(d, DPC_ERR_RUNTIME,
                         "the parameter server on rank 0 failed in this epoch (it says why)");
  t->step = at[1], t->batch_pos = at[2];
  return DPC_OK;
}
