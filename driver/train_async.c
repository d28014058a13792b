/*
 * train_async.c — asynchronous data parallel: workers and a parameter server with bounded
 * staleness (--sync async --staleness S).
 *
 * The training step splits (partitioner/ps.c) into a worker half (forward and backward: the
 * gradients) and a server half (the optimizer). The server's session is the trainer's training
 * session, so evaluation, checkpoints and --save see its params. Each worker has a session of
 * its own on one thread and a share of the batch (b = B / W rows): it pulls the params (copies
 * them from the server), computes its gradients and pushes them. The server applies an update
 * each time it holds W gradients — their mean, summed in the order of the workers that sent
 * them — exactly what a synchronous step does with W shards, but from whichever workers were
 * ready.
 *
 * Staleness is counted in updates: a gradient computed on version v and applied by the update
 * from version u has staleness u - v. The bound S holds by two rules under the server's lock:
 * an update from u to u + 1 waits while a worker still computes on a version v with u + 1 - v
 * > S (its gradient would come too late), and a worker does not start a step while it has a
 * gradient waiting for an update when S = 0 (so with S = 0 every update takes one gradient
 * from each worker, all computed on the same params: synchronous training). Past S, a slow
 * worker holds the others back; below it, they go on without it.
 */
#include "driver/train_async.h"

#include "codegen/cpu/cpu.h"
#include "partitioner/partitioner.h"
#include "runtime/topology.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool before(const pending *x, const pending *y, bool by_version) {
  if (by_version && x->version != y->version) return x->version < y->version;
  if (x->worker != y->worker) return x->worker < y->worker;
  return x->version < y->version;
}

static void sort_pending(pending *p, uint32_t n, bool by_version) {
  for (uint32_t i = 1; i < n; i++)
    for (uint32_t j = i; j > 0 && before(&p[j], &p[j - 1], by_version); j--) {
      pending tmp = p[j];
      p[j] = p[j - 1], p[j - 1] = tmp;
    }
}

/* The mean of the stalest pending gradients into the server's inputs, then the server's step.
 * Called with the lock held. It takes W of them, and more when one left waiting would pass the
 * bound, and sums them in worker order: the same bits whatever order they arrived in. */
static dpc_status apply_update(async_state *a, dpc_diag *d) {
  trainer *t = a->t;
  sort_pending(a->pend, a->n_pend, true);
  uint32_t W = a->W;
  while (W < a->n_pend && a->version + 1 - a->pend[W].version > a->S) W++;
  sort_pending(a->pend, W, false);
  uint64_t off = 0;
  for (uint32_t k = 0; k < a->n_grads; k++) {
    dpc_tensor in = dpc_session_input(t->train_full.s, a->s_grad[k]);
    int64_t n = dpc_tensor_numel(&in);
    for (int64_t e = 0; e < n; e++) {
      double sum = 0;
      for (uint32_t i = 0; i < W; i++) sum += a->pend[i].g[off + e];
      dpc_tstore(&in, e, sum / W);
    }
    off += (uint64_t)n;
  }
  dpc_session_set_step(t->train_full.s, a->version);
  dpc_status st = dpc_session_run(t->train_full.s, d);
  if (st) return st;
  /* the log: a step per update, with each gradient's worker and staleness */
  double loss = 0;
  uint64_t worst = 0;
  for (uint32_t i = 0; i < W; i++) {
    uint64_t stale = a->version - a->pend[i].version;
    if (stale > worst) worst = stale;
    loss += a->pend[i].loss / W;
    a->w[a->pend[i].worker].waiting--;
  }
  if (worst > a->max_staleness) a->max_staleness = worst;
  a->version++, a->step++, t->step++;
  a->loss_sum += loss * W * a->b, a->samples += (uint64_t)W * a->b;
  if (t->log) {
    fprintf(t->log, "{\"step\": %llu, \"epoch\": %llu, \"loss\": %.9g, \"staleness\": [",
            (unsigned long long)t->step, (unsigned long long)t->epoch, loss);
    for (uint32_t i = 0; i < W; i++)
      fprintf(t->log, "%s{\"worker\": %u, \"staleness\": %llu}", i ? ", " : "", a->pend[i].worker,
              (unsigned long long)(a->version - 1 - a->pend[i].version));
    fprintf(t->log, "]}\n");
    fflush(t->log);
  }
  if (t->o->on_step) {
    double dt = (double)(now_ns() - (uint64_t)a->epoch_t0) / 1e9;
    dpc_train_step s = {
        t->step, t->epoch, a->next, a->total, loss, NAN, dt > 0 ? (double)a->samples / dt : 0,
        W * a->b};
    t->o->on_step(t->o->user, &s);
  }
  /* the rest move up */
  float *keep[512];
  for (uint32_t i = 0; i < W; i++) keep[i] = a->pend[i].g;
  memmove(a->pend, a->pend + W, (a->n_pend - W) * sizeof *a->pend);
  a->n_pend -= W;
  for (uint32_t i = 0; i < W; i++) a->pend[a->n_pend + i].g = keep[i];
  return DPC_OK;
}

/* Whether the update from the current version may happen: every step still computing would
 * keep its staleness within S (the update itself takes every waiting gradient that would
 * not). */
static bool update_allowed(const async_state *a) {
  for (uint32_t i = 0; i < a->W; i++)
    if (a->w[i].pulled != UINT64_MAX && a->version + 1 - a->w[i].pulled > a->S) return false;
  return true;
}

/* A test hook (test_hold_worker): this worker holds its gradient back as long as the others can
 * go on without it, until the staleness bound stops the next update or no other step is left.
 * As slow as a worker can be whatever the machine's load, where test_slow_worker's 20 ms sleep
 * could be no slower than the others on 2 busy cores. */
static void hold_back(async_state *a, const worker *w) {
  pthread_mutex_lock(&a->mu);
  for (;;) {
    bool others = a->next < a->total;
    for (uint32_t i = 0; i < a->W && !others; i++)
      others = i != w->id && a->w[i].pulled != UINT64_MAX;
    if (a->failed || !others || a->version >= w->pulled + a->S) break;
    pthread_cond_wait(&a->cv, &a->mu);
  }
  pthread_mutex_unlock(&a->mu);
}

/* The end of the epoch (or of the run) has come for a worker. Called with the lock held. */
static bool epoch_over(const async_state *a) {
  return a->failed || a->next >= a->total || a->remote_stop || dpc_train_cancelled(a->t);
}

dpc_status dpc_async_local_step(async_state *a, worker *w, uint64_t pos, dpc_diag *d) {
  trainer *t = a->t;
  uint32_t n;
  const uint64_t *idx = dpc_order_batch(&t->order, a->b, pos, &n);
  dpc_tensor x = dpc_session_input(w->run.s, w->run.x), y = dpc_session_input(w->run.s, w->run.y);
  dpc_status st = dpc_dataset_fill(t->train_ds, idx, n, &x, &y, d);
  dpc_session_set_step(w->run.s, pos);
  if (!st) st = dpc_session_run(w->run.s, d);
  if (st) return st;
  dpc_tensor lv = dpc_session_value(w->run.s, w->run.loss);
  w->loss = dpc_tload(&lv, 0);
  uint64_t off = 0;
  for (uint32_t k = 0; k < a->n_grads; k++) {
    dpc_tensor g = dpc_session_value(w->run.s, w->grad[k]);
    int64_t m = dpc_tensor_numel(&g);
    for (int64_t e = 0; e < m; e++) w->g[off + e] = (float)dpc_tload(&g, e);
    off += (uint64_t)m;
  }
  return DPC_OK;
}

/* A worker of the server's process: its own (w->pair NULL), or the proxy of another rank's. */
static void *worker_main(void *arg) {
  worker *w = arg;
  async_state *a = w->a;
  trainer *t = a->t;
  dpc_status st = DPC_OK;
  /* a thread starts with its creator's binding, and the main thread may have been bound to
   * one core by a session's pool (evaluation): the workers would all share that core */
  dpc_unbind_thread();
  for (;;) {
    pthread_mutex_lock(&a->mu);
    /* S = 0: no new step while a gradient of ours waits; and no more than W waiting at all */
    while (!epoch_over(a) && ((a->S == 0 && w->waiting) || a->n_pend >= a->W))
      pthread_cond_wait(&a->cv, &a->mu);
    if (epoch_over(a)) {
      /* the others may wait for a gradient of ours that will not come: they look again */
      pthread_cond_broadcast(&a->cv);
      bool failed = a->failed;
      pthread_mutex_unlock(&a->mu);
      /* a proxy lets its rank go on to the end of the epoch (after a failure here the job ends
       * anyway: rank 0 aborts it) */
      if (w->pair && !failed && (st = dpc_async_proxy_end(a, w, &w->d))) {
        pthread_mutex_lock(&a->mu);
        w->st = st, a->failed = true;
        pthread_mutex_unlock(&a->mu);
      }
      break;
    }
    uint64_t pos = a->next++;
    w->pulled = a->version;
    if (w->pair) {
      st = dpc_async_proxy_pack(a, w, &w->d);
    } else {
      for (uint32_t k = 0; k < a->n_params && !st; k++)
        st = dpc_session_copy(w->run.s, w->param[k], t->train_full.s, a->s_param[k], &w->d);
    }
    pthread_mutex_unlock(&a->mu);

    bool stop = false;
    if (!st)
      st = w->pair ? dpc_async_proxy_step(a, w, pos, &stop, &w->d)
                   : dpc_async_local_step(a, w, pos, &w->d);
    if (!st && t->test &&
        t->test->slow_worker == w->id + 1) { /* a test hook: this worker is slow */
      struct timespec ts = {0, 20 * 1000000L};
      nanosleep(&ts, NULL);
    }
    if (!st && t->test && t->test->hold_worker == w->id + 1) hold_back(a, w);

    pthread_mutex_lock(&a->mu);
    if (st) {
      w->st = st, a->failed = true;
      pthread_cond_broadcast(&a->cv);
      pthread_mutex_unlock(&a->mu);
      break;
    }
    if (stop) a->remote_stop = true;
    pending *p = &a->pend[a->n_pend++];
    p->worker = w->id, p->version = w->pulled, p->loss = w->loss;
    float *g = p->g; /* the gradients change hands: no copy */
    p->g = w->g, w->g = g;
    w->pulled = UINT64_MAX;
    w->waiting++;
    while (!a->failed && a->n_pend >= a->W && update_allowed(a)) {
      if ((st = apply_update(a, &w->d))) {
        a->failed = true;
        w->st = st;
        break;
      }
    }
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (st) break;
  }
  return NULL;
}

/* A one-device, one-thread session of bound graph g (training: updates applied): its plan,
 * compiled kernels (dpc_train_compile) and session in r. */
static dpc_status open_single(trainer *t, const dpc_graph *g, const char *dev, bool training,
                              run_t *r, dpc_diag *d) {
  dpc_status st = dpc_plan_single(g, dev, training, &r->plan, d);
  if (!st) st = dpc_train_compile(t, r, d);
  dpc_session_opts so = {
      .training = true, .native = r->native, .threads = 1, .test = dpc_train_session_hooks(t)};
  if (!st) st = dpc_session_new(r->plan, &so, &r->s, d);
  return st;
}

static dpc_status open_worker(async_state *a, const dpc_graph *wg, uint32_t id, dpc_diag *d) {
  trainer *t = a->t;
  worker *w = &a->w[id];
  w->a = a, w->id = id, w->pulled = UINT64_MAX;
  dpc_diag_init(&w->d);
  uint32_t where = dpc_async_rank_of(a, id);
  /* rank 0 steps every worker (a proxy for another rank's); another rank only its own */
  if (t->rank != 0 && where != t->rank) return DPC_OK;
  w->g = malloc((a->grad_floats ? a->grad_floats : 1) * sizeof *w->g);
  if (!w->g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (where != 0 &&
      !(w->params = malloc(a->param_off[a->n_params] ? a->param_off[a->n_params] : 1)))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (where != t->rank) return DPC_OK; /* a proxy */
  dpc_graph *g = dpc_graph_clone(wg);
  int64_t *vals = g ? calloc(g->n_syms ? g->n_syms : 1, sizeof *vals) : NULL;
  dpc_status st = vals ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; !st && k < g->n_syms; k++) vals[k] = k == t->batch_sym ? (int64_t)a->b : -1;
  if (!st) st = dpc_graph_bind(g, vals, d);
  char dev[32];
  snprintf(dev, sizeof dev, "cpu:%u", id);
  if (!st) st = open_single(t, g, dev, false, &w->run, d);
  free(vals);
  dpc_graph_free(g);
  if (st) return st;
  const dpc_graph *pg = w->run.plan->g;
  w->run.x = dpc_graph_find(pg, t->x_name);
  w->run.y = dpc_graph_find(pg, t->y_name);
  w->run.loss = pg->outputs[pg->n_outputs - 1];
  w->param = calloc(a->n_params ? a->n_params : 1, sizeof *w->param);
  w->grad = calloc(a->n_grads ? a->n_grads : 1, sizeof *w->grad);
  if (!w->param || !w->grad) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  const dpc_graph *sg = t->train_full.plan->g;
  for (uint32_t k = 0; k < a->n_params; k++) {
    const char *nm = dpc_graph_str(sg, sg->values[a->s_param[k]].name);
    w->param[k] = dpc_graph_find(pg, nm);
  }
  for (uint32_t k = 0; k < a->n_grads; k++) {
    const char *nm = dpc_graph_str(sg, sg->values[a->s_grad[k]].name);
    w->grad[k] = dpc_graph_find(pg, nm);
    if (w->grad[k] == DPC_NONE)
      return dpc_diag_fail(d, DPC_ERR_INTERNAL, "the worker has no gradient '%s'", nm);
  }
  return DPC_OK;
}

dpc_status dpc_train_async_open(trainer *t, dpc_diag *d) {
  const dpc_train_opts *o = t->o;
  if (t->replicas < 2)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "asynchronous training needs several devices");
  if (t->batch % t->replicas)
    return dpc_diag_fail(
        d, DPC_ERR_INVALID,
        "asynchronous training: the batch of %u does not split evenly over %u workers", t->batch,
        t->replicas);
  async_state *a = calloc(1, sizeof *a);
  if (!a) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  t->async = a;
  a->t = t, a->W = t->replicas, a->S = o->staleness, a->b = t->batch / t->replicas;
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
  dpc_graph *wg = NULL, *sg = NULL;
  dpc_status st = dpc_ps_split(t->train_g, &wg, &sg, d);
  /* the server: the trainer's training session, so evaluation and checkpoints see its params */
  run_t *r = &t->train_full;
  if (!st) st = open_single(t, sg, "cpu:0", true, r, d);
  if (!st) {
    r->n = t->batch;
    r->x = r->y = r->loss = r->logits = DPC_NONE;
    r->lr = dpc_graph_find(r->plan->g, "opt.lr");
    const dpc_graph *g = r->plan->g;
    a->s_param = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *a->s_param);
    a->s_grad = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *a->s_grad);
    if (!a->s_param || !a->s_grad) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !st && i < g->n_nodes; i++) {
      uint32_t v = g->nodes[i].out;
      if (g->nodes[i].op == DPC_OP_PARAM) a->s_param[a->n_params++] = v;
      if (g->nodes[i].op == DPC_OP_INPUT) {
        a->s_grad[a->n_grads++] = v;
        a->grad_floats += (uint64_t)dpc_shape_numel(&g->values[v].shape);
      }
    }
    a->param_off = st ? NULL : calloc(a->n_params + 1, sizeof *a->param_off);
    if (!st && !a->param_off) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; !st && k < a->n_params; k++) {
      dpc_tensor v = dpc_session_value(r->s, a->s_param[k]);
      a->param_off[k + 1] = a->param_off[k] + dpc_tensor_bytes(&v);
    }
  }
  a->w = st ? NULL : calloc(a->W, sizeof *a->w);
  a->pend = st ? NULL : calloc(2 * (size_t)a->W, sizeof *a->pend);
  if (!st && (!a->w || !a->pend)) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; !st && i < 2 * a->W; i++)
    if (!(a->pend[i].g = malloc((a->grad_floats ? a->grad_floats : 1) * sizeof(float))))
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  /* first what every rank does together, then what each does alone */
  if (!st && t->peers) st = dpc_async_ranks_open(a, d);
  for (uint32_t i = 0; !st && i < a->W; i++) st = open_worker(a, wg, i, d);
  dpc_graph_free(wg);
  dpc_graph_free(sg);
  return st;
}

dpc_status dpc_train_async_epoch(trainer *t, dpc_train_epoch *ep, dpc_diag *d) {
  async_state *a = t->async;
  a->d = d;
  /* A batch of the trainer is W sub-batches. Resumed mid-epoch (or stopped by --steps or a
   * cancel), the epoch goes on from update t->batch_pos: with staleness 0 update k took
   * sub-batches kW..kW+W-1, so that is where the next update's are. */
  uint64_t full = dpc_dataset_size(t->train_ds) / a->b; /* whole sub-batches: the rest waits */
  uint64_t first = t->batch_pos * a->W, updates0 = a->step;
  a->next = first < full ? first : full;
  a->total = full;
  if (!a->n_pend && a->version < t->step) a->version = t->step; /* resumed */
  if (t->o->steps) {
    uint64_t left = t->o->steps > t->step ? t->o->steps - t->step : 0;
    if (left * a->W < a->total - a->next) a->total = a->next + left * a->W;
  }
  a->loss_sum = 0, a->samples = 0;
  a->remote_stop = false;
  a->epoch_t0 = (double)now_ns();
  double t0 = dpc_now_s();
  /* across ranks, another rank's workers step as their proxies on rank 0 ask */
  bool remote = t->peers && t->rank != 0;
  bool *running = calloc(a->W, sizeof *running);
  if (!running) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; i < a->W && !st; i++) {
    a->w[i].st = DPC_OK;
    if (remote && dpc_async_rank_of(a, i) != t->rank) continue;
    if (pthread_create(&a->w[i].th, NULL, remote ? dpc_async_remote_main : worker_main, &a->w[i])) {
      pthread_mutex_lock(&a->mu);
      a->failed = true;
      pthread_cond_broadcast(&a->cv);
      pthread_mutex_unlock(&a->mu);
      st = dpc_diag_fail(d, DPC_ERR_RUNTIME, "cannot start a worker thread");
    }
    running[i] = !st;
  }
  for (uint32_t i = 0; i < a->W; i++)
    if (running[i]) pthread_join(a->w[i].th, NULL);
  free(running);
  for (uint32_t i = 0; i < a->W && !st; i++)
    if (a->w[i].st) {
      st = dpc_diag_fail(d, a->w[i].st, "worker %u: %s", i, a->w[i].d.msg ? a->w[i].d.msg : "");
    }
  /* another rank: the position after the epoch is rank 0's */
  if (remote) return st ? st : dpc_async_ranks_agree(a, false, d);
  /* gradients left over (fewer than W at the end of the epoch) wait for the next; stopped
   * early, the epoch continues from the updates done (a gradient no update took is computed
   * again) */
  if (a->next >= full && !dpc_train_cancelled(t) && !a->remote_stop) {
    t->batch_pos = t->batches;
  } else {
    t->batch_pos += a->step - updates0;
    if (t->batch_pos > t->batches) t->batch_pos = t->batches;
    a->n_pend = 0;
    for (uint32_t i = 0; i < a->W; i++) a->w[i].waiting = 0;
  }
  ep->step = t->step;
  ep->seconds = dpc_now_s() - t0;
  ep->train_loss = a->samples ? a->loss_sum / (double)a->samples : NAN;
  ep->samples_per_s = ep->seconds > 0 ? (double)a->samples / ep->seconds : 0;
  ep->max_staleness = a->max_staleness;
  if (t->peers) {
    dpc_status ast = dpc_async_ranks_agree(a, st != DPC_OK, d);
    if (!st) st = ast;
  }
  return st;
}

void dpc_train_async_free(trainer *t) {
  async_state *a = t->async;
  if (!a) return;
  for (uint32_t i = 0; a->w && i < a->W; i++) {
    dpc_session_free(a->w[i].run.s);
    dpc_plan_free(a->w[i].run.plan);
    free(a->w[i].run.native);
    free(a->w[i].param);
    free(a->w[i].grad);
    free(a->w[i].g);
    free(a->w[i].params);
    if (a->w[i].pair) dpc_transport_free(a->w[i].pair);
    dpc_diag_free(&a->w[i].d);
  }
  for (uint32_t i = 0; a->pend && i < 2 * a->W; i++) free(a->pend[i].g);
  free(a->w), free(a->pend), free(a->s_param), free(a->s_grad), free(a->param_off);
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->cv);
  free(a);
  t->async = NULL;
}
