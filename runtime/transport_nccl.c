/*
 * transport_nccl.c — the GPUs' transport: the all-reduces of f32 and f64 gradients go to NCCL
 * (nccl.h), queued on each GPU's stream, GPU to GPU over NVLink or PCIe; everything else (the
 * f64-summed mean of local SGD, broadcast, send, receive, barrier) goes to a shared-memory
 * transport over the same devices, staged through the host.
 *
 * NCCL sums in its own order (a ring or a tree, as it chooses for the GPUs and sizes): every
 * rank gets the same bits, and a run on the same GPUs the same bits again, but not the bits of
 * the host's sum in rank order. The call returns once queued; the work that reads the result
 * is queued after it on the same stream.
 */
#include "runtime/nccl.h"
#include "runtime/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nccl {
  dpc_transport *host; /* the shared-memory transport for the rest */
  dpc_nccl_api api;
  void **comms; /* per rank */
  dpc_device **devs;
} nccl;

static nccl *impl(dpc_transport *t) {
  return t->impl;
}

/* NCCL's words for result r. */
static const char *nccl_why(const nccl *m, int r) {
  const char *why = m->api.error_string ? m->api.error_string(r) : NULL;
  return why ? why : "unknown error";
}

static dpc_status nccl_all_reduce(dpc_transport *t, uint32_t rank, void *buf, dpc_dtype dtype,
                                  int64_t n, dpc_reduce op, dpc_diag *d) {
  nccl *m = impl(t);
  if (op == DPC_REDUCE_MEAN_WIDE || (dtype != DPC_F32 && dtype != DPC_F64))
    return m->host->ops->all_reduce(m->host, rank, buf, dtype, n, op, d);
  if (rank >= t->ranks)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "all_reduce as rank %u of %u", rank, t->ranks);
  if (n <= 0) return DPC_OK;
  int ordinal;
  void *stream;
  dpc_status st = dpc_device_cuda_enter(m->devs[rank], &ordinal, &stream, d);
  if (st) return st;
  int r =
      m->api.all_reduce(buf, buf, (size_t)n, dtype == DPC_F64 ? DPC_NCCL_FLOAT64 : DPC_NCCL_FLOAT32,
                        op == DPC_REDUCE_SUM ? DPC_NCCL_SUM : DPC_NCCL_AVG, m->comms[rank], stream);
  if (r) {
    st =
        dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: ncclAllReduce of %lld elements failed: %s (NCCL %d)",
                      m->devs[rank]->name, (long long)n, nccl_why(m, r), r);
    m->host->ops->abort(m->host, m->devs[rank]->name, d->msg);
  }
  return st;
}

static dpc_status nccl_broadcast(dpc_transport *t, uint32_t rank, uint32_t root, void *buf,
                                 size_t bytes, dpc_diag *d) {
  dpc_transport *h = impl(t)->host;
  return h->ops->broadcast(h, rank, root, buf, bytes, d);
}

static dpc_status nccl_send(dpc_transport *t, uint32_t rank, uint32_t peer, const void *buf,
                            size_t bytes, dpc_diag *d) {
  dpc_transport *h = impl(t)->host;
  return h->ops->send(h, rank, peer, buf, bytes, d);
}

static dpc_status nccl_recv(dpc_transport *t, uint32_t rank, uint32_t peer, void *buf, size_t bytes,
                            dpc_diag *d) {
  dpc_transport *h = impl(t)->host;
  return h->ops->recv(h, rank, peer, buf, bytes, d);
}

static dpc_status nccl_barrier(dpc_transport *t, uint32_t rank, dpc_diag *d) {
  dpc_transport *h = impl(t)->host;
  return h->ops->barrier(h, rank, d);
}

static void nccl_abort(dpc_transport *t, const char *who, const char *why) {
  dpc_transport *h = impl(t)->host;
  h->ops->abort(h, who, why);
}

static void nccl_free(dpc_transport *t) {
  nccl *m = impl(t);
  for (uint32_t i = 0; m->comms && i < t->ranks; i++)
    if (m->comms[i]) m->api.comm_destroy(m->comms[i]);
  dpc_transport_free(m->host);
  dpc_nccl_unload(&m->api);
  free(m->comms);
  free(m->devs);
  free(m);
  free(t);
}

static const dpc_transport_ops nccl_ops = {
    .kind = "nccl",
    .all_reduce = nccl_all_reduce,
    .broadcast = nccl_broadcast,
    .send = nccl_send,
    .recv = nccl_recv,
    .barrier = nccl_barrier,
    .abort = nccl_abort,
    .free = nccl_free,
};

dpc_status dpc_transport_open_nccl(uint32_t ranks, dpc_device *const *devs,
                                   const char *const *names, double timeout_s, dpc_transport **out,
                                   dpc_diag *d) {
  *out = NULL;
  for (uint32_t i = 0; i < ranks; i++)
    if (strcmp(devs[i]->ops->kind, "cuda"))
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: NCCL joins GPUs only", devs[i]->name);
  dpc_transport *t = calloc(1, sizeof *t);
  nccl *m = t ? calloc(1, sizeof *m) : NULL;
  int *ordinals = calloc(ranks ? ranks : 1, sizeof *ordinals);
  if (m) m->comms = calloc(ranks ? ranks : 1, sizeof *m->comms);
  if (m) m->devs = calloc(ranks ? ranks : 1, sizeof *m->devs);
  if (!m || !ordinals || !m->comms || !m->devs) {
    if (m) free(m->comms), free(m->devs);
    free(m), free(t), free(ordinals);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening NCCL");
  }
  t->ops = &nccl_ops, t->ranks = ranks, t->impl = m;
  dpc_status st = dpc_nccl_load(&m->api, devs[0]->name, d);
  for (uint32_t i = 0; !st && i < ranks; i++) {
    void *stream;
    m->devs[i] = devs[i];
    st = dpc_device_cuda_enter(devs[i], &ordinals[i], &stream, d);
  }
  if (!st) {
    int r = m->api.comm_init_all(m->comms, (int)ranks, ordinals);
    if (r) {
      memset(m->comms, 0, ranks * sizeof *m->comms);
      st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s: ncclCommInitAll over %u GPUs failed: %s (NCCL %d)", devs[0]->name,
                         ranks, nccl_why(m, r), r);
    }
  }
  if (!st) st = dpc_transport_open("shm", ranks, devs, names, timeout_s, &m->host, d);
  free(ordinals);
  if (st) {
    nccl_free(t);
    return st;
  }
  *out = t;
  return DPC_OK;
}

void dpc_transport_nccl_version(dpc_transport *t, char *out, size_t cap) {
  if (t && t->ops == &nccl_ops)
    dpc_nccl_version_text(&impl(t)->api, out, cap);
  else
    snprintf(out, cap, "not NCCL");
}
