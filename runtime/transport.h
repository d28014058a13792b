/*
 * transport.h — how the devices of a run talk: all-reduce, broadcast, send, receive, barrier and
 * abort over device buffers, behind a vtable, so that a transport between processes (MPI) can
 * replace the shared-memory one without touching the session or the trainer.
 *
 *   dpc_transport *t;
 *   dpc_transport_open("shm", 2, devs, names, 60.0, &t, &d);
 *   // on each rank's thread, with a buffer of its own device:
 *   t->ops->all_reduce(t, rank, buf, DPC_F32, n, DPC_REDUCE_MEAN, &d);
 *   dpc_transport_free(t);                       // after every rank has returned
 *
 * Every rank makes the same calls in the same order. A rank that waits longer than the timeout,
 * or whose peer failed (abort), returns an error naming both. Buffers are device handles: a
 * transport reaches them through the devices' copies only (runtime/device.h).
 */
#ifndef DPC_RUNTIME_TRANSPORT_H
#define DPC_RUNTIME_TRANSPORT_H

#include "runtime/collective.h"
#include "runtime/device.h"

typedef struct dpc_transport dpc_transport;

typedef struct dpc_transport_ops {
  const char *kind; /* "shm" */
  /* buf (n elements of f32 or f64 on rank's device) becomes the sum or mean over the ranks,
   * summed in rank order: the same bits on every rank and every run. */
  dpc_status (*all_reduce)(dpc_transport *t, uint32_t rank, void *buf, dpc_dtype dtype, int64_t n,
                           dpc_reduce op, dpc_diag *d);
  /* buf takes root's bytes on every rank. */
  dpc_status (*broadcast)(dpc_transport *t, uint32_t rank, uint32_t root, void *buf, size_t bytes,
                          dpc_diag *d);
  /* Rank `rank` hands buf to rank `peer`, which receives it into its own buffer; send returns
   * once the bytes are taken. */
  dpc_status (*send)(dpc_transport *t, uint32_t rank, uint32_t peer, const void *buf, size_t bytes,
                     dpc_diag *d);
  dpc_status (*recv)(dpc_transport *t, uint32_t rank, uint32_t peer, void *buf, size_t bytes,
                     dpc_diag *d);
  /* Like send, but returns once buf's bytes are copied out, before the peer takes them, so two
   * ranks that send to each other at once cannot block each other; flush returns once every such
   * send has been taken. Messages to one peer arrive in the order sent, whichever of the two
   * sent them. NULL where the transport has none (shm: its ranks share the devices' memory). */
  dpc_status (*send_async)(dpc_transport *t, uint32_t rank, uint32_t peer, const void *buf,
                           size_t bytes, dpc_diag *d);
  dpc_status (*flush)(dpc_transport *t, uint32_t rank, dpc_diag *d);
  /* A transport among members[0 .. n) (ranks of t, distinct), member k being its rank k; every
   * rank of t makes the same subset calls in the same order, and one that is not a member gets
   * NULL. NULL where the transport has none. */
  dpc_status (*subset)(dpc_transport *t, uint32_t rank, const uint32_t *members, uint32_t n,
                       dpc_transport **out, dpc_diag *d);
  /* Whether the message from `peer` that the caller's next recv from it would take has arrived
   * (or is arriving), without waiting or taking it: for a process that waits, with no deadline,
   * for work a peer may hand it at any time; also true when the receive would fail at once (a
   * failed transport, a wrong peer), so that it says why. NULL where the transport has none. */
  bool (*ready)(dpc_transport *t, uint32_t rank, uint32_t peer);
  /* Returns once every rank has entered. */
  dpc_status (*barrier)(dpc_transport *t, uint32_t rank, dpc_diag *d);
  /* `who` failed: every rank waiting, or later entering, a call fails naming it and why. */
  void (*abort)(dpc_transport *t, const char *who, const char *why);
  void (*free)(dpc_transport *t);
} dpc_transport_ops;

struct dpc_transport {
  const dpc_transport_ops *ops;
  uint32_t ranks;
  void *impl;
};

/* A transport of `kind` ("shm": threads of one process) among ranks >= 1 devices devs[i]
 * (borrowed; they must outlive it), named names[i] in messages; timeout_s > 0. */
dpc_status dpc_transport_open(const char *kind, uint32_t ranks, dpc_device *const *devs,
                              const char *const *names, double timeout_s, dpc_transport **out,
                              dpc_diag *d);
void dpc_transport_free(dpc_transport *t);

/* The GPUs' transport (transport_nccl.c): devs are cuda:N devices; their f32 and f64 sums and
 * means go to NCCL on each GPU's stream (in NCCL's order: the same bits on every rank, not the
 * host's rank-order sum), the rest to a shared-memory transport over the same devices.
 * DPC_ERR_UNSUPPORTED, saying why, where NCCL is not to be had ($DPC_NCCL=off, not found, its
 * communicators not made): the caller then takes "shm". */
dpc_status dpc_transport_open_nccl(uint32_t ranks, dpc_device *const *devs,
                                   const char *const *names, double timeout_s, dpc_transport **out,
                                   dpc_diag *d);

/* A collective over `members` devices some of which run in other processes
 * (transport_split.c): devs[k] is member k's device when it runs here, else NULL; the members
 * here sum over shared memory, the first of them adds the other processes' sums over `across`
 * (taken over: freed with the result, also on failure), as its rank across_rank. All-reduce and
 * abort only. */
dpc_status dpc_transport_open_split(uint32_t members, dpc_device *const *devs,
                                    const char *const *names, dpc_transport *across,
                                    uint32_t across_rank, double timeout_s, dpc_transport **out,
                                    dpc_diag *d);
/* "NCCL 2.28.9": the version a transport of dpc_transport_open_nccl loaded. */
void dpc_transport_nccl_version(dpc_transport *t, char *out, size_t cap);

#endif
