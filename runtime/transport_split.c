/*
 * transport_split.c — a collective over devices of which some run in this process and the rest
 * in others (transport.h, dpc_transport_open_split): a process with several devices of a plan
 * run across processes.
 *
 * The members in this process sum in member order over the shared-memory transport; the first
 * of them then adds the other processes' sums over `across` (one rank per process that holds
 * members, in process order) and hands the total back to the others with a shared-memory
 * broadcast, which also holds them until it is there. So an all-reduce over devices 0-3 held
 * two by two is (x0 + x1) + (x2 + x3): fixed run to run, not the flat order's bits. A mean is
 * the total divided by the number of members, on each member alike. Every call but all-reduce
 * and abort is refused: the session's collectives are all-reduces.
 */
#include "runtime/transport.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct split {
  dpc_transport *local;  /* the members in this process (NULL when only one) */
  dpc_transport *across; /* the first local members of every process, owned */
  uint32_t across_rank;
  uint32_t *local_of; /* per member: its place among the local ones, or UINT32_MAX */
} split;

static split *impl(dpc_transport *t) {
  return t->impl;
}

static dpc_status split_all_reduce(dpc_transport *t, uint32_t rank, void *buf, dpc_dtype dtype,
                                   int64_t n, dpc_reduce op, dpc_diag *d) {
  split *m = impl(t);
  if (rank >= t->ranks || m->local_of[rank] == UINT32_MAX)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "all_reduce as member %u, not one of this process's",
                         rank);
  if (op == DPC_REDUCE_MEAN_WIDE)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "the wide mean over devices in several processes with several devices "
                         "each is not built");
  uint32_t lk = m->local_of[rank];
  size_t es = dtype == DPC_F64 ? 8 : 4;
  dpc_status st = DPC_OK;
  if (m->local) st = m->local->ops->all_reduce(m->local, lk, buf, dtype, n, DPC_REDUCE_SUM, d);
  if (!st && lk == 0)
    st = m->across->ops->all_reduce(m->across, m->across_rank, buf, dtype, n, DPC_REDUCE_SUM, d);
  if (!st && m->local) st = m->local->ops->broadcast(m->local, lk, 0, buf, (size_t)n * es, d);
  if (st || op == DPC_REDUCE_SUM) return st;
  dpc_comm_divide(dtype, buf, n, t->ranks);
  return DPC_OK;
}

static void split_abort(dpc_transport *t, const char *who, const char *why) {
  split *m = impl(t);
  if (m->local) m->local->ops->abort(m->local, who, why);
  m->across->ops->abort(m->across, who, why);
}

static void split_free(dpc_transport *t) {
  split *m = impl(t);
  if (m) {
    dpc_transport_free(m->local);
    dpc_transport_free(m->across);
    free(m->local_of);
    free(m);
  }
  free(t);
}

static const dpc_transport_ops split_ops = {
    .kind = "split",
    .all_reduce = split_all_reduce,
    .abort = split_abort,
    .free = split_free,
};

dpc_status dpc_transport_open_split(uint32_t members, dpc_device *const *devs,
                                    const char *const *names, dpc_transport *across,
                                    uint32_t across_rank, double timeout_s, dpc_transport **out,
                                    dpc_diag *d) {
  *out = NULL;
  dpc_transport *t = calloc(1, sizeof *t);
  split *m = t ? calloc(1, sizeof *m) : NULL;
  dpc_device **ldevs = calloc(members ? members : 1, sizeof *ldevs);
  const char **lnames = calloc(members ? members : 1, sizeof *lnames);
  if (m) m->local_of = malloc((members ? members : 1) * sizeof *m->local_of);
  if (!m || !m->local_of || !ldevs || !lnames) {
    free(t), free(m ? m->local_of : NULL), free(m), free(ldevs), free(lnames);
    dpc_transport_free(across);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening a collective");
  }
  t->ops = &split_ops, t->impl = m, t->ranks = members;
  m->across = across, m->across_rank = across_rank;
  uint32_t nl = 0;
  dpc_status st = DPC_OK;
  for (uint32_t k = 0; k < members; k++) {
    m->local_of[k] = devs[k] ? nl : UINT32_MAX;
    if (!devs[k]) continue;
    if (!devs[k]->ops->host_visible)
      st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s: collectives across processes with several devices each need "
                         "devices whose memory the host reads (cpu)",
                         names[k]);
    ldevs[nl] = devs[k], lnames[nl] = names[k], nl++;
  }
  if (!st && !nl)
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "a collective with no member in this process");
  if (!st && nl > 1) st = dpc_transport_open("shm", nl, ldevs, lnames, timeout_s, &m->local, d);
  free(ldevs);
  free(lnames);
  if (st) {
    split_free(t);
    return st;
  }
  *out = t;
  return DPC_OK;
}
