/*
 * transport_shm.c — the shared-memory transport: the ranks are threads of one process.
 *
 * All-reduce is runtime/collective.h's, which reads every rank's buffer in place: on devices
 * whose memory the host can address (the cpu) the device buffers themselves, with no copy;
 * otherwise a host staging buffer per rank, filled and emptied through the device's copies
 * (the same sums in the same order, so the same bits). Broadcast and receive copy from the peer's
 * buffer with the receiving device's peer copy. A barrier is an all-reduce of nothing.
 */
#include "runtime/transport.h"

#include "runtime/pool.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct staging {
  void *buf;
  size_t cap;
} staging;

typedef struct shm {
  dpc_comm *comm;
  dpc_device **devs;
  char (*names)[32];
  double timeout_s;
  bool shared;       /* more ranks than cores: waits yield at once (dpc_backoff) */
  staging *stage;    /* per rank, touched by its own thread only */
  const void **bufs; /* per rank: the buffer of the broadcast under way */
  /* per (sender, receiver): the buffer offered, and how many were offered and taken */
  const void **box;
  _Atomic uint64_t *posted, *taken;
  _Atomic int claimed, aborted;
  char who[32], why[256];
} shm;

static shm *impl(dpc_transport *t) {
  return t->impl;
}

static void shm_abort(dpc_transport *t, const char *who, const char *why) {
  shm *m = impl(t);
  dpc_comm_abort(m->comm, who, why);
  int expect = 0;
  if (!atomic_compare_exchange_strong(&m->claimed, &expect, 1)) return;
  snprintf(m->who, sizeof m->who, "%s", who ? who : "a device");
  snprintf(m->why, sizeof m->why, "%s", why ? why : "it stopped");
  atomic_store_explicit(&m->aborted, 1, memory_order_release);
}

/* A step failed on rank: the others must not wait for it. */
static dpc_status failed(dpc_transport *t, uint32_t rank, dpc_status st, dpc_diag *d) {
  shm_abort(t, impl(t)->names[rank], d->msg);
  return st;
}

static dpc_status shm_all_reduce(dpc_transport *t, uint32_t rank, void *buf, dpc_dtype dtype,
                                 int64_t n, dpc_reduce op, dpc_diag *d) {
  shm *m = impl(t);
  dpc_device *dev = m->devs[rank];
  if (dev->ops->host_visible) return dpc_comm_all_reduce(m->comm, rank, buf, dtype, n, op, d);
  size_t bytes = (size_t)(n > 0 ? n : 0) * (dtype == DPC_F64 ? 8 : 4);
  staging *s = &m->stage[rank];
  if (bytes > s->cap) { /* the first call of each size only: the device's host memory (pinned) */
    void *nb = NULL;
    dpc_status ast = dpc_device_host_alloc(dev, bytes, &nb, d);
    if (ast) return failed(t, rank, ast, d);
    if (s->buf) dpc_device_host_free(dev, s->buf);
    s->buf = nb, s->cap = bytes;
  }
  dpc_status st = dev->ops->synchronize(dev, d);
  if (!st) st = dev->ops->copy(dev, DPC_COPY_D2H, s->buf, buf, bytes, NULL, d);
  if (st) return failed(t, rank, st, d);
  if ((st = dpc_comm_all_reduce(m->comm, rank, s->buf, dtype, n, op, d))) return st;
  if ((st = dev->ops->copy(dev, DPC_COPY_H2D, buf, s->buf, bytes, NULL, d)))
    return failed(t, rank, st, d);
  return DPC_OK;
}

static dpc_status shm_barrier(dpc_transport *t, uint32_t rank, dpc_diag *d) {
  return dpc_comm_all_reduce(impl(t)->comm, rank, NULL, DPC_F32, 0, DPC_REDUCE_SUM, d);
}

static dpc_status shm_broadcast(dpc_transport *t, uint32_t rank, uint32_t root, void *buf,
                                size_t bytes, dpc_diag *d) {
  shm *m = impl(t);
  if (root >= t->ranks)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "broadcast from rank %u of %u", root, t->ranks);
  m->bufs[rank] = buf;
  dpc_status st = rank == root ? m->devs[rank]->ops->synchronize(m->devs[rank], d) : DPC_OK;
  if (st) return failed(t, rank, st, d);
  if ((st = shm_barrier(t, rank, d))) return st; /* root's buffer is published and complete */
  if (rank != root && (st = m->devs[rank]->ops->copy(m->devs[rank], DPC_COPY_PEER, buf,
                                                     m->bufs[root], bytes, m->devs[root], d)))
    return failed(t, rank, st, d);
  return shm_barrier(t, rank, d); /* root may reuse its buffer */
}

/* Wait until *c reaches target (peer's side of a send or receive). */
static dpc_status wait_count(dpc_transport *t, uint32_t rank, uint32_t peer, _Atomic uint64_t *c,
                             uint64_t target, const char *what, dpc_diag *d) {
  shm *m = impl(t);
  dpc_backoff b = {.shared = m->shared};
  while (atomic_load_explicit(c, memory_order_acquire) < target) {
    if (atomic_load_explicit(&m->aborted, memory_order_acquire))
      return dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: %s stopped because %s failed: %s",
                           m->names[rank], what, m->who, m->why);
    double waited = dpc_backoff_wait(&b, m->timeout_s);
    if (waited > 0)
      return dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s waited %.1f s for %s in %s: %s is stuck or gone",
                           m->names[rank], waited, m->names[peer], what, m->names[peer]);
  }
  return DPC_OK;
}

static dpc_status shm_send(dpc_transport *t, uint32_t rank, uint32_t peer, const void *buf,
                           size_t bytes, dpc_diag *d) {
  (void)bytes;
  shm *m = impl(t);
  if (peer >= t->ranks || peer == rank)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: send to rank %u of %u", m->names[rank], peer,
                         t->ranks);
  size_t k = (size_t)rank * t->ranks + peer;
  dpc_status st = m->devs[rank]->ops->synchronize(m->devs[rank], d);
  if (st) return failed(t, rank, st, d);
  m->box[k] = buf;
  uint64_t n = atomic_load_explicit(&m->posted[k], memory_order_relaxed) + 1;
  atomic_store_explicit(&m->posted[k], n, memory_order_release);
  return wait_count(t, rank, peer, &m->taken[k], n, "send", d);
}

static dpc_status shm_recv(dpc_transport *t, uint32_t rank, uint32_t peer, void *buf, size_t bytes,
                           dpc_diag *d) {
  shm *m = impl(t);
  if (peer >= t->ranks || peer == rank)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: receive from rank %u of %u", m->names[rank], peer,
                         t->ranks);
  size_t k = (size_t)peer * t->ranks + rank;
  uint64_t n = atomic_load_explicit(&m->taken[k], memory_order_relaxed) + 1;
  dpc_status st = wait_count(t, rank, peer, &m->posted[k], n, "receive", d);
  if (st) return st;
  if ((st = m->devs[rank]->ops->copy(m->devs[rank], DPC_COPY_PEER, buf, m->box[k], bytes,
                                     m->devs[peer], d)))
    return failed(t, rank, st, d);
  atomic_store_explicit(&m->taken[k], n, memory_order_release);
  return DPC_OK;
}

static void shm_free(dpc_transport *t) {
  shm *m = impl(t);
  if (m) {
    dpc_comm_free(m->comm);
    for (uint32_t i = 0; m->stage && i < t->ranks; i++)
      if (m->stage[i].buf && m->devs) dpc_device_host_free(m->devs[i], m->stage[i].buf);
    free(m->stage);
    free(m->devs);
    free(m->names);
    free(m->bufs);
    free(m->box);
    free((void *)m->posted);
    free((void *)m->taken);
    free(m);
  }
  free(t);
}

static const dpc_transport_ops shm_ops = {
    .kind = "shm",
    .all_reduce = shm_all_reduce,
    .broadcast = shm_broadcast,
    .send = shm_send,
    .recv = shm_recv,
    .barrier = shm_barrier,
    .abort = shm_abort,
    .free = shm_free,
};

dpc_status dpc_transport_open(const char *kind, uint32_t ranks, dpc_device *const *devs,
                              const char *const *names, double timeout_s, dpc_transport **out,
                              dpc_diag *d) {
  *out = NULL;
  if (strcmp(kind, "shm"))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "unknown transport '%s' (this build has shm)",
                         kind);
  dpc_transport *t = calloc(1, sizeof *t);
  shm *m = t ? calloc(1, sizeof *m) : NULL;
  if (!m) {
    free(t);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening a transport of %u", ranks);
  }
  t->ops = &shm_ops, t->ranks = ranks, t->impl = m;
  size_t pairs = ranks ? (size_t)ranks * ranks : 1;
  m->timeout_s = timeout_s;
  m->shared = dpc_threads_share_cores(ranks);
  m->devs = calloc(ranks ? ranks : 1, sizeof *m->devs);
  m->names = calloc(ranks ? ranks : 1, sizeof *m->names);
  m->stage = calloc(ranks ? ranks : 1, sizeof *m->stage);
  m->bufs = calloc(ranks ? ranks : 1, sizeof *m->bufs);
  m->box = calloc(pairs, sizeof *m->box);
  m->posted = calloc(pairs, sizeof *m->posted);
  m->taken = calloc(pairs, sizeof *m->taken);
  dpc_status st = m->devs && m->names && m->stage && m->bufs && m->box && m->posted && m->taken
                      ? dpc_comm_new(ranks, names, timeout_s, &m->comm, d)
                      : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening a transport");
  if (st) {
    shm_free(t);
    return st;
  }
  for (uint32_t i = 0; i < ranks; i++) {
    m->devs[i] = devs[i];
    snprintf(m->names[i], sizeof m->names[i], "%s", names && names[i] ? names[i] : devs[i]->name);
  }
  *out = t;
  return DPC_OK;
}

void dpc_transport_free(dpc_transport *t) {
  if (t) t->ops->free(t);
}
