/*
 * transport_mpi.c — the transport between processes over MPI (transport_mpi.h): one rank per
 * process, each with its own device.
 *
 * Device buffers are reached through the device's copies: a call stages the bytes in host
 * buffers of the transport's own (grown on the first call of each size, then reused) and hands
 * MPI those. The one exception is the all-reduce on a device whose handles are host pointers
 * (ops->host_visible, the cpu): MPI reads and writes the buffer itself, with no staging copies.
 *
 * All-reduce: rank k owns chunk k (n*k/D up to n*(k+1)/D, the chunks of collective.c). Every
 * rank sends chunk k of its input to its owner; the owner sums the D pieces in rank order with
 * collective.c's own additions (dpc_comm_add_into: the mean divides at the last one), then sends
 * the sum to every rank. So element i is ((x0 + x1) + ...) + x(D-1), as transport_shm.c computes
 * it: the same bits on every rank, run and transport.
 *
 * Messages are non-blocking and tagged with the kind of call and its sequence number (one
 * counter for the collectives, one per peer and direction for send and receive). A wait polls
 * its requests against the deadline; while it waits for a peer it also probes for any other
 * message from that peer: one tagged for another call means the two ranks' calls differ (one
 * skipped a call), and the wait fails saying so instead of running into the timeout. Messages
 * from one peer arrive in the order sent, and a rank sends everything of a call before anything
 * of the next, so a foreign tag that stays while the expected message has not come is a real
 * mismatch; the short grace (MISMATCH_GRACE_S) covers a matched message still in transfer.
 *
 * A failed call (timeout, mismatch, device error) marks the transport failed: later calls fail
 * at once with the first reason. Requests still pending are cancelled (receives) or released
 * (sends) and their host buffers are not freed, since MPI may still write or read them. abort()
 * is the one place that ends the process: MPI_Abort, so that mpirun stops every rank; the
 * caller has the message (its diag) and prints it before.
 */
#include "runtime/transport_mpi.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The kind of a message: the low bits of its tag; the sequence number is the rest. */
enum { K_RS, K_AG, K_BCAST, K_BARRIER, K_P2P, K_PING, K_SPAN = 8 };
static const char *const kind_names[K_SPAN] = {"all_reduce", "all_reduce", "broadcast", "barrier",
                                               "send",       "ping-pong",  "?",         "?"};

/* How long a message tagged for another call may stay visible while the expected one has not
 * arrived before it counts as a mismatch (a matched message still in transfer is done sooner). */
#define MISMATCH_GRACE_S 0.25
/* Elements summed per pass, so the partial sum stays in L1 (collective.c's BLOCK). */
#define BLOCK 4096
/* The all-reduce's pieces move in segments of this many bytes on host-visible devices. */
#define SEG_BYTES (1 << 20)

typedef struct hostbuf {
  void *p;
  size_t cap;
} hostbuf;

/* One outstanding request: a receive from, or a send to, peer (-1: every rank, a collective of
 * MPI's own), tagged tag; a receive must bring exactly `bytes`. */
typedef struct pending {
  MPI_Request req;
  int peer, tag;
  bool recv;
  size_t bytes;
} pending;

typedef struct mpit {
  MPI_Comm comm;
  int rank, size;
  dpc_device *dev;
  double timeout_s;
  dpc_mpi_allreduce algo;
  int seq_mod;           /* sequence numbers wrap here, so tags stay under MPI_TAG_UB */
  uint64_t coll;         /* collective calls made (all-reduce, broadcast, barrier) */
  uint64_t *sent, *rcvd; /* per peer: sends and receives made */
  char (*label)[112];    /* per rank: "rank 3 (cpu:0 on node7)" */
  char name[32];         /* this rank's device, as named at open */
  /* dpc_transport_mpi_split_hosts: the ranks of this one's host, and its column: the ranks with
   * this one's place in their hosts, one a host (column 0 is the hosts' first ranks); NULL and
   * 1 host when flat. even: every host has as many ranks. */
  dpc_transport *host, *column;
  int n_hosts;
  bool even;
  hostbuf in, out, pieces;
  hostbuf *abuf; /* send_async's copies, one per send not yet flushed (kept for the next ones) */
  size_t n_async, cap_async;
  pending *q;
  size_t nq, capq;
  bool failed, leak; /* leak: requests were left to MPI, so their buffers stay allocated */
  bool nap;          /* a long wait sleeps between polls (100 us) instead of yielding */
  char why[400];
} mpit;

static mpit *impl(const dpc_transport *t) {
  return t->impl;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int tag_of(const mpit *m, int kind, uint64_t seq) {
  return (int)(seq % (uint64_t)m->seq_mod) * K_SPAN + kind;
}

static const char *mpi_error(int rc, char *buf) {
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) snprintf(buf, MPI_MAX_ERROR_STRING, "%d", rc);
  return buf;
}

/* Hand outstanding requests back to MPI: a receive is cancelled, a send released (it may still
 * complete). Either may still touch its buffer, so the buffers are kept (leak). */
static void drop_pending(mpit *m) {
  for (size_t i = 0; i < m->nq; i++) {
    if (m->q[i].req == MPI_REQUEST_NULL) continue;
    if (m->q[i].recv) MPI_Cancel(&m->q[i].req);
    MPI_Request_free(&m->q[i].req);
    m->leak = true;
  }
  m->nq = 0;
}

/* This rank's call failed with d's message: later calls fail with it at once. */
static dpc_status failed(mpit *m, dpc_status st, dpc_diag *d) {
  drop_pending(m);
  if (!m->failed) {
    m->failed = true;
    snprintf(m->why, sizeof m->why, "%s", d->msg ? d->msg : "a call failed");
  }
  return st;
}

static dpc_status check_usable(mpit *m, uint32_t rank, const char *what, dpc_diag *d) {
  if (m->failed)
    return dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: %s refused: the transport failed earlier: %s",
                         m->label[m->rank], what, m->why);
  if (rank != (uint32_t)m->rank)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: %s as rank %u (this process is rank %d)",
                         m->label[m->rank], what, rank, m->rank);
  return DPC_OK;
}

/* A send or receive as `rank` with `peer`: usable, and another rank of the transport. */
static dpc_status check_peer(mpit *m, uint32_t rank, uint32_t peer, const char *what, dpc_diag *d) {
  dpc_status st = check_usable(m, rank, what, d);
  if (st || (peer < (uint32_t)m->size && peer != rank)) return st;
  return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: %s %s rank %u of %d", m->label[m->rank], what,
                       strcmp(what, "send") ? "from" : "to", peer, m->size);
}

static dpc_status grow(mpit *m, hostbuf *b, size_t bytes, dpc_diag *d) {
  if (bytes <= b->cap) return DPC_OK;
  void *p = malloc(bytes);
  if (!p)
    return failed(m,
                  dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory staging %zu bytes",
                                m->label[m->rank], bytes),
                  d);
  free(b->p);
  b->p = p, b->cap = bytes;
  return DPC_OK;
}

static dpc_status push(mpit *m, pending p, dpc_diag *d) {
  if (m->nq == m->capq) {
    size_t cap = m->capq ? m->capq * 2 : 16;
    pending *q = realloc(m->q, cap * sizeof *q);
    if (!q)
      return failed(m, dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory", m->label[m->rank]), d);
    m->q = q, m->capq = cap;
  }
  m->q[m->nq++] = p;
  return DPC_OK;
}

/* A collective of MPI's own that was just started (rc, req) onto the list, or its failure. */
static dpc_status push_started(mpit *m, int rc, MPI_Request req, const char *what, dpc_diag *d) {
  char e[MPI_MAX_ERROR_STRING];
  if (rc != MPI_SUCCESS)
    return failed(
        m,
        dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: %s: %s", m->label[m->rank], what, mpi_error(rc, e)),
        d);
  pending p = {req, -1, 0, false, 0};
  return push(m, p, d);
}

/* MPI counts are ints: a longer message would need splitting, which nothing does yet. */
static dpc_status check_count(mpit *m, size_t bytes, const char *what, dpc_diag *d) {
  if (bytes <= INT_MAX) return DPC_OK;
  return failed(m,
                dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                              "%s: %s of a %zu-byte message: MPI messages here are under 2 GiB",
                              m->label[m->rank], what, bytes),
                d);
}

static dpc_status post_recv(mpit *m, void *buf, size_t bytes, int peer, int tag, dpc_diag *d) {
  pending p = {MPI_REQUEST_NULL, peer, tag, true, bytes};
  int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, m->comm, &p.req);
  char e[MPI_MAX_ERROR_STRING];
  if (rc != MPI_SUCCESS)
    return failed(m,
                  dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: MPI_Irecv from %s: %s", m->label[m->rank],
                                m->label[peer], mpi_error(rc, e)),
                  d);
  return push(m, p, d);
}

static dpc_status post_send(mpit *m, const void *buf, size_t bytes, int peer, int tag,
                            dpc_diag *d) {
  pending p = {MPI_REQUEST_NULL, peer, tag, false, bytes};
  int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, m->comm, &p.req);
  char e[MPI_MAX_ERROR_STRING];
  if (rc != MPI_SUCCESS)
    return failed(m,
                  dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: MPI_Isend to %s: %s", m->label[m->rank],
                                m->label[peer], mpi_error(rc, e)),
                  d);
  return push(m, p, d);
}

/* Whether a visible message from peer tagged `tag` is one of ours still pending. */
static bool expected_tag(const mpit *m, int peer, int tag) {
  for (size_t i = 0; i < m->nq; i++)
    if (m->q[i].recv && m->q[i].peer == peer && m->q[i].tag == tag) return true;
  return false;
}

/* Poll requests q[from .. to) until all are complete; the call is `what` number seq + 1. Fails
 * on the deadline (naming the first rank still waited for and its host), on a message of the
 * wrong size, and on a peer's message tagged for another call. When the range ends the list,
 * the list ends at `from` again. */
static dpc_status wait_range(mpit *m, size_t from, size_t to, const char *what, uint64_t seq,
                             double t0, dpc_diag *d) {
  uint64_t polls = 0;
  double suspect_since = 0;
  bool p2p = !strcmp(what, "send") || !strcmp(what, "receive"), ar = !strcmp(what, "all_reduce");
  char e[MPI_MAX_ERROR_STRING];
  for (;;) {
    int waiting = -2; /* the first peer still waited for; -2: none */
    for (size_t i = from; i < to; i++) {
      pending *p = &m->q[i];
      if (p->req == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Status s;
      int rc = MPI_Test(&p->req, &flag, &s);
      if (rc != MPI_SUCCESS) {
        bool truncated = rc == MPI_ERR_TRUNCATE;
        return failed(
            m,
            dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: %s #%llu: %s %s: %s%s", m->label[m->rank], what,
                          (unsigned long long)seq + 1, p->recv ? "receiving from" : "sending to",
                          p->peer >= 0 ? m->label[p->peer] : "the other ranks", mpi_error(rc, e),
                          truncated ? " (a longer message than this rank expects: the ranks' "
                                      "sizes or types differ)"
                                    : ""),
            d);
      }
      if (!flag) {
        if (waiting == -2) waiting = p->peer;
        continue;
      }
      if (p->recv && p->peer >= 0) {
        int count = 0;
        MPI_Get_count(&s, MPI_BYTE, &count);
        if ((size_t)count != p->bytes)
          return failed(m,
                        dpc_diag_fail(d, DPC_ERR_RUNTIME,
                                      "%s: %s #%llu: %s sent %d bytes where this rank expects "
                                      "%zu: the ranks' sizes or types differ",
                                      m->label[m->rank], what, (unsigned long long)seq + 1,
                                      m->label[p->peer], count, p->bytes),
                        d);
      }
    }
    if (waiting == -2) {
      if (to == m->nq) m->nq = from;
      return DPC_OK;
    }
    if (++polls % 64) {
      /* oversubscribed ranks share cores: after a while each idle poll gives its core away */
      if (polls > 2048 && m->nap) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
      } else if (polls > 2048) {
        sched_yield();
      }
      continue;
    }
    double t = now_s();
    /* a peer's message for another call, while its message for this one has not come */
    bool suspect = false;
    for (size_t i = from; i < to && !suspect; i++) {
      pending *p = &m->q[i];
      if (p->req == MPI_REQUEST_NULL || !p->recv || p->peer < 0) continue;
      int flag = 0;
      MPI_Status s;
      if (MPI_Iprobe(p->peer, MPI_ANY_TAG, m->comm, &flag, &s) != MPI_SUCCESS || !flag) continue;
      if (expected_tag(m, p->peer, s.MPI_TAG)) continue;
      /* sends and receives are a stream of their own beside the collectives: a peer's send
       * (send_async returns at once) may come before or after the collectives around it */
      if (p2p || s.MPI_TAG % K_SPAN == K_P2P) continue;
      /* a later message of this very all-reduce (its gather, the receive not yet posted) */
      if (ar && s.MPI_TAG == tag_of(m, K_AG, seq)) continue;
      suspect = true;
      if (suspect_since == 0) suspect_since = t;
      if (t - suspect_since < MISMATCH_GRACE_S) break;
      int kind = s.MPI_TAG % K_SPAN, theirs = s.MPI_TAG / K_SPAN;
      return failed(m,
                    dpc_diag_fail(d, DPC_ERR_RUNTIME,
                                  "%s: in %s #%llu, %s sent a message of its %s #%d: the ranks' "
                                  "calls differ (every rank must make the same calls in the "
                                  "same order; one skipped or added a call)",
                                  m->label[m->rank], what, (unsigned long long)seq + 1,
                                  m->label[p->peer], kind_names[kind], theirs + 1),
                    d);
    }
    if (!suspect) suspect_since = 0;
    if (t - t0 > m->timeout_s)
      return failed(
          m,
          dpc_diag_fail(
              d, DPC_ERR_RUNTIME, "%s waited %.1f s for %s in %s #%llu: %s is stuck or gone",
              m->label[m->rank], t - t0, waiting >= 0 ? m->label[waiting] : "the other ranks", what,
              (unsigned long long)seq + 1, waiting >= 0 ? m->label[waiting] : "one of them"),
          d);
  }
}

static dpc_status wait_from(mpit *m, size_t from, const char *what, uint64_t seq, double t0,
                            dpc_diag *d) {
  return wait_range(m, from, m->nq, what, seq, t0, d);
}

/* Device to host staging: the device's work so far done, then its bytes copied out. */
static dpc_status stage_out(mpit *m, void *host, const void *buf, size_t bytes, dpc_diag *d) {
  dpc_device *dev = m->dev;
  dpc_status st = dev->ops->synchronize(dev, d);
  if (!st && bytes) st = dev->ops->copy(dev, DPC_COPY_D2H, host, buf, bytes, NULL, d);
  if (!st) st = dev->ops->synchronize(dev, d); /* an asynchronous copy has landed */
  return st ? failed(m, st, d) : DPC_OK;
}

static dpc_status stage_in(mpit *m, void *buf, const void *host, size_t bytes, dpc_diag *d) {
  dpc_device *dev = m->dev;
  dpc_status st = bytes ? dev->ops->copy(dev, DPC_COPY_H2D, buf, host, bytes, NULL, d) : DPC_OK;
  return st ? failed(m, st, d) : DPC_OK;
}

/* Sum chunk `me` of every rank in rank order into acc (len elements, which may be own):
 * piece(q) is rank q's, the other ranks' `stride` elements apart in others. */
static void sum_in_order(mpit *m, char *acc, const char *own, const char *others, int64_t len,
                         int64_t stride, dpc_dtype dtype, dpc_reduce op) {
  int D = m->size, me = m->rank;
  size_t es = dtype == DPC_F64 ? 8 : 4;
#define PIECE(q) ((q) == me ? own : others + (size_t)((q) < me ? (q) : (q)-1) * (size_t)stride * es)
  if (op == DPC_REDUCE_MEAN_WIDE && dtype == DPC_F32) {
    /* collective.c's wide mean: f32 values summed in f64 in rank order, rounded once */
    double wide[BLOCK / 2];
    const int64_t per = BLOCK / 2;
    for (int64_t b = 0; b < len; b += per) {
      int64_t n = len - b < per ? len - b : per;
      for (int64_t e = 0; e < n; e++) wide[e] = ((const float *)(const void *)PIECE(0))[b + e];
      for (int q = 1; q < D; q++)
        for (int64_t e = 0; e < n; e++) wide[e] += ((const float *)(const void *)PIECE(q))[b + e];
      for (int64_t e = 0; e < n; e++) ((float *)(void *)acc)[b + e] = (float)(wide[e] / D);
    }
    return;
  }
  const int64_t per = BLOCK * 4 / (int64_t)es;
  if (acc == own && me <= 1) {
    /* x1 + x0 is x0 + x1 bit for bit (IEEE addition commutes): ranks 0 and 1 sum in place,
     * block by block, without copies */
    for (int64_t b = 0; b < len; b += per) {
      int64_t n = len - b < per ? len - b : per;
      size_t off = (size_t)b * es;
      for (int q = 1; q < D; q++) {
        double div = op != DPC_REDUCE_SUM && q == D - 1 ? (double)D : 1;
        dpc_comm_add_into(dtype, acc + off, PIECE(q == 1 ? 1 - me : q) + off, n, div);
      }
    }
    return;
  }
  /* a block is summed in a buffer of its own and then stored, so acc may be own */
  _Alignas(64) char sum[BLOCK * 4];
  for (int64_t b = 0; b < len; b += per) {
    int64_t n = len - b < per ? len - b : per;
    size_t off = (size_t)b * es;
    memcpy(sum, PIECE(0) + off, (size_t)n * es);
    for (int q = 1; q < D; q++) {
      double div = op != DPC_REDUCE_SUM && q == D - 1 ? (double)D : 1;
      dpc_comm_add_into(dtype, sum, PIECE(q) + off, n, div);
    }
    memcpy(acc + off, sum, (size_t)n * es);
  }
#undef PIECE
}

/* The library's own all-reduce (the baseline): not bit-identical to DPC's beyond 2 ranks. */
static dpc_status all_reduce_mpi(mpit *m, void *buf, dpc_dtype dtype, int64_t n, dpc_reduce op,
                                 uint64_t seq, double t0, dpc_diag *d) {
  size_t es = dtype == DPC_F64 ? 8 : 4, bytes = (size_t)n * es;
  dpc_status st = check_count(m, bytes, "all_reduce", d);
  if (!st) st = grow(m, &m->in, bytes, d);
  if (!st) st = stage_out(m, m->in.p, buf, bytes, d);
  if (st) return st;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, m->in.p, (int)n, dtype == DPC_F64 ? MPI_DOUBLE : MPI_FLOAT,
                          MPI_SUM, m->comm, &req);
  size_t from = m->nq;
  if ((st = push_started(m, rc, req, "MPI_Iallreduce", d)) ||
      (st = wait_from(m, from, "all_reduce", seq, t0, d)))
    return st;
  if (op != DPC_REDUCE_SUM) dpc_comm_divide(dtype, m->in.p, n, (uint32_t)m->size);
  return stage_in(m, buf, m->in.p, bytes, d);
}

#define LO(k)  ((size_t)(n * (int64_t)(k) / D))
#define LEN(k) (LO((k) + 1) - LO(k))
/* Segment g of a chunk of len elements: its first element and length (segments of seg). */
#define SEG_LO(g)       ((size_t)(g)*seg)
#define SEG_LEN(len, g) ((len)-SEG_LO(g) < seg ? (len)-SEG_LO(g) : seg)
#define SEGS(len)       ((len) ? ((len) + seg - 1) / seg : 1)
/* On a device whose handles are host pointers (the cpu), MPI reads and writes the buffer itself:
 * no staging copies, one host buffer (the pieces of this rank's chunk). The same sums as below,
 * but every chunk moves in segments of SEG_BYTES, in order on one tag (MPI keeps the order of
 * one sender's messages on a tag), so a segment is summed while the next is in transfer and sent
 * on as soon as it is made. The gathers' receives into buf are posted once the reduce-scatter's
 * sends from it are complete, as MPI requires of a send buffer. */
enum { PART_RS = 1, PART_AG = 2, PART_BOTH = 3 };
/* parts: the reduce-scatter (chunk k of buf summed on rank k), the all-gather (every rank's
 * chunk to every rank), or both: the hierarchical all-reduce runs them apart. */
static dpc_status all_reduce_direct(mpit *m, void *buf, dpc_dtype dtype, int64_t n, dpc_reduce op,
                                    int parts, uint64_t seq, double t0, dpc_diag *d) {
  int D = m->size, me = m->rank;
  size_t es = dtype == DPC_F64 ? 8 : 4, mine = LEN(me), seg = SEG_BYTES / es;
  bool rs_part = parts & PART_RS, ag_part = parts & PART_AG;
  dpc_status st = check_count(m, ((size_t)n / (size_t)D + 1) * es, "all_reduce", d);
  /* one element more: an empty chunk's pieces still have an address */
  if (!st) st = grow(m, &m->pieces, ((size_t)(D - 1) * mine + 1) * es, d);
  if (!st && (st = m->dev->ops->synchronize(m->dev, d))) st = failed(m, st, d);
  if (st) return st;
  char *b = buf, *pieces = m->pieces.p;
  int rs = tag_of(m, K_RS, seq), ag = tag_of(m, K_AG, seq);
  size_t from = m->nq, segs = SEGS(mine), most = 0;
  for (int k = 0; k < D; k++)
    if (SEGS(LEN(k)) > most) most = SEGS(LEN(k));
  /* the pieces of this rank's chunk, segment by segment: D - 1 receives each */
  for (size_t g = 0; g < segs && !st && rs_part; g++)
    for (int q = 0; q < D && !st; q++)
      if (q != me)
        st = post_recv(m, pieces + ((size_t)(q < me ? q : q - 1) * mine + SEG_LO(g)) * es,
                       SEG_LEN(mine, g) * es, q, rs, d);
  size_t sends = m->nq;
  for (size_t g = 0; g < most && !st && rs_part; g++)
    for (int k = 0; k < D && !st; k++)
      if (k != me && g < SEGS(LEN(k)))
        st = post_send(m, b + (LO(k) + SEG_LO(g)) * es, SEG_LEN(LEN(k), g) * es, k, rs, d);
  size_t sent = m->nq;
  for (size_t g = 0; g < segs && !st; g++) {
    size_t at = from + g * (size_t)(D - 1);
    char *acc = b + (LO(me) + SEG_LO(g)) * es;
    if (rs_part) {
      if ((st = wait_range(m, at, at + (size_t)(D - 1), "all_reduce", seq, t0, d))) return st;
      sum_in_order(m, acc, acc, pieces + SEG_LO(g) * es, (int64_t)SEG_LEN(mine, g), (int64_t)mine,
                   dtype, op);
    }
    for (int k = 0; k < D && !st && ag_part; k++)
      if (k != me) st = post_send(m, acc, SEG_LEN(mine, g) * es, k, ag, d);
  }
  if (!st) st = wait_range(m, sends, sent, "all_reduce", seq, t0, d);
  for (size_t g = 0; g < most && !st && ag_part; g++)
    for (int k = 0; k < D && !st; k++)
      if (k != me && g < SEGS(LEN(k)))
        st = post_recv(m, b + (LO(k) + SEG_LO(g)) * es, SEG_LEN(LEN(k), g) * es, k, ag, d);
  return st ? st : wait_from(m, from, "all_reduce", seq, t0, d);
}
#undef SEG_LO
#undef SEG_LEN
#undef SEGS
#undef LO
#undef LEN

/* Across hosts (dpc_transport_mpi_split_hosts): each host's sum in rank order on every rank of
 * it, the hosts' sums added by their first ranks in host order, the result handed back inside
 * each host. Fewer bytes cross between hosts than in the flat all-reduce; the bits are fixed
 * run to run but are not the flat sum's ((x0 + x1) + (x2 + x3), not ((x0 + x1) + x2) + x3). The
 * mean divides the total on every rank alike. */
static dpc_status all_reduce_hosts(mpit *m, void *buf, dpc_dtype dtype, int64_t n, dpc_reduce op,
                                   dpc_diag *d) {
  dpc_transport *h = m->host, *c = m->column;
  uint32_t hr = dpc_transport_mpi_rank(h);
  size_t es = dtype == DPC_F64 ? 8 : 4;
  dpc_status st = DPC_OK;
  if (m->even && m->dev->ops->host_visible) {
    /* Hosts of as many ranks each, in place: each host's reduce-scatter leaves chunk j of the
     * host's sum on its rank j, the ranks of column j add their hosts' chunks j in host order,
     * and each host gathers its chunks. Every rank moves a share, as in the flat all-reduce,
     * and the sums are those of the hosts' first ranks adding whole host sums. */
    mpit *hm = impl(h);
    int64_t L = hm->size, lo = n * (int64_t)hr / L, len = n * ((int64_t)hr + 1) / L - lo;
    if ((st = check_usable(hm, hr, "all_reduce", d)) ||
        (st = all_reduce_direct(hm, buf, dtype, n, DPC_REDUCE_SUM, PART_RS, hm->coll++, now_s(),
                                d)) ||
        (st = c->ops->all_reduce(c, dpc_transport_mpi_rank(c), (char *)buf + (size_t)lo * es, dtype,
                                 len, DPC_REDUCE_SUM, d)) ||
        (st =
             all_reduce_direct(hm, buf, dtype, n, DPC_REDUCE_SUM, PART_AG, hm->coll++, now_s(), d)))
      return failed(m, st, d);
  } else {
    /* each host's sum on each of its ranks, the hosts' sums added by their first ranks, the
     * total handed back inside each host */
    st = h->ops->all_reduce(h, hr, buf, dtype, n, DPC_REDUCE_SUM, d);
    if (!st && hr == 0)
      st = c->ops->all_reduce(c, dpc_transport_mpi_rank(c), buf, dtype, n, DPC_REDUCE_SUM, d);
    if (!st) st = h->ops->broadcast(h, hr, 0, buf, (size_t)n * es, d);
    if (st) return failed(m, st, d);
  }
  if (op == DPC_REDUCE_SUM || !n) return DPC_OK;
  /* the mean: the sum divided, on the host's copy when the device's memory is not the host's */
  void *x = buf;
  if (!m->dev->ops->host_visible) {
    if ((st = grow(m, &m->in, (size_t)n * es, d)) ||
        (st = stage_out(m, m->in.p, buf, (size_t)n * es, d)))
      return st;
    x = m->in.p;
  }
  dpc_comm_divide(dtype, x, n, (uint32_t)m->size);
  return x == buf ? DPC_OK : stage_in(m, buf, x, (size_t)n * es, d);
}

static dpc_status mpi_all_reduce(dpc_transport *t, uint32_t rank, void *buf, dpc_dtype dtype,
                                 int64_t n, dpc_reduce op, dpc_diag *d) {
  mpit *m = impl(t);
  dpc_status st = check_usable(m, rank, "all_reduce", d);
  if (st) return st;
  if (dtype != DPC_F32 && dtype != DPC_F64)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: all_reduce of %s (f32 and f64 only)",
                         m->label[m->rank], dpc_dtype_name(dtype));
  if (n < 0)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: all_reduce of %lld elements", m->label[m->rank],
                         (long long)n);
  uint64_t seq = m->coll++;
  int D = m->size, me = m->rank;
  if (D == 1 || n == 0) return DPC_OK; /* every rank alike: the same n everywhere */
  double t0 = now_s();
  if (m->algo == DPC_MPI_ALLREDUCE_MPI) return all_reduce_mpi(m, buf, dtype, n, op, seq, t0, d);
  if (m->n_hosts > 1 && m->n_hosts < D && op != DPC_REDUCE_MEAN_WIDE)
    return all_reduce_hosts(m, buf, dtype, n, op, d);
  if (m->dev->ops->host_visible)
    return all_reduce_direct(m, buf, dtype, n, op, PART_BOTH, seq, t0, d);
  size_t es = dtype == DPC_F64 ? 8 : 4, bytes = (size_t)n * es;
#define LO(k)  ((size_t)(n * (int64_t)(k) / D))
#define LEN(k) (LO((k) + 1) - LO(k))
  size_t mine = LEN(me);
  if ((st = check_count(m, ((size_t)n / (size_t)D + 1) * es, "all_reduce", d)) ||
      (st = grow(m, &m->in, bytes, d)) || (st = grow(m, &m->out, bytes, d)) ||
      (st = grow(m, &m->pieces, ((size_t)(D - 1) * mine + 1) * es, d)) ||
      (st = stage_out(m, m->in.p, buf, bytes, d)))
    return st;
  char *in = m->in.p, *out = m->out.p, *pieces = m->pieces.p;
  int rs = tag_of(m, K_RS, seq), ag = tag_of(m, K_AG, seq);
  size_t from = m->nq;
  /* receives first, so that the pieces land in place rather than in MPI's unexpected queue:
   * the reduce-scatter's pieces of this rank's chunk (rank order, this rank's own skipped) */
  for (int q = 0; q < D && !st; q++)
    if (q != me)
      st = post_recv(m, pieces + (size_t)(q < me ? q : q - 1) * mine * es, mine * es, q, rs, d);
  size_t gathers = m->nq;
  for (int k = 0; k < D && !st; k++)
    if (k != me) st = post_recv(m, out + LO(k) * es, LEN(k) * es, k, ag, d);
  for (int k = 0; k < D && !st; k++)
    if (k != me) st = post_send(m, in + LO(k) * es, LEN(k) * es, k, rs, d);
  if (st) return st;
  /* the pieces of this rank's chunk first: the reduce-scatter's receives alone */
  if ((st = wait_range(m, from, gathers, "all_reduce", seq, t0, d))) return st;
  sum_in_order(m, out + LO(me) * es, in + LO(me) * es, pieces, (int64_t)mine, (int64_t)mine, dtype,
               op);
  for (int k = 0; k < D && !st; k++)
    if (k != me) st = post_send(m, out + LO(me) * es, mine * es, k, ag, d);
  if (!st) st = wait_from(m, from, "all_reduce", seq, t0, d);
  if (!st) st = stage_in(m, buf, out, bytes, d);
  return st;
#undef LO
#undef LEN
}

static dpc_status mpi_broadcast(dpc_transport *t, uint32_t rank, uint32_t root, void *buf,
                                size_t bytes, dpc_diag *d) {
  mpit *m = impl(t);
  dpc_status st = check_usable(m, rank, "broadcast", d);
  if (st) return st;
  if (root >= t->ranks)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: broadcast from rank %u of %u", m->label[m->rank],
                         root, t->ranks);
  uint64_t seq = m->coll++;
  double t0 = now_s();
  int tag = tag_of(m, K_BCAST, seq);
  size_t from = m->nq;
  if ((st = check_count(m, bytes, "broadcast", d)) || (st = grow(m, &m->in, bytes, d))) return st;
  if (rank == root) {
    if ((st = stage_out(m, m->in.p, buf, bytes, d))) return st;
    for (int q = 0; q < m->size && !st; q++)
      if (q != m->rank) st = post_send(m, m->in.p, bytes, q, tag, d);
    return st ? st : wait_from(m, from, "broadcast", seq, t0, d);
  }
  if ((st = post_recv(m, m->in.p, bytes, (int)root, tag, d)) ||
      (st = wait_from(m, from, "broadcast", seq, t0, d)))
    return st;
  return stage_in(m, buf, m->in.p, bytes, d);
}

static dpc_status mpi_send(dpc_transport *t, uint32_t rank, uint32_t peer, const void *buf,
                           size_t bytes, dpc_diag *d) {
  mpit *m = impl(t);
  dpc_status st = check_peer(m, rank, peer, "send", d);
  if (st) return st;
  uint64_t seq = m->sent[peer]++;
  double t0 = now_s();
  size_t from = m->nq;
  /* a host-visible device's buffer is handed to MPI itself (its work so far done): send
   * returns when it is taken */
  const void *host = buf;
  if ((st = check_count(m, bytes, "send", d))) return st;
  if (m->dev->ops->host_visible) {
    if ((st = m->dev->ops->synchronize(m->dev, d))) return failed(m, st, d);
  } else if (!(st = grow(m, &m->in, bytes, d)) && !(st = stage_out(m, m->in.p, buf, bytes, d))) {
    host = m->in.p;
  }
  if (st || (st = post_send(m, host, bytes, (int)peer, tag_of(m, K_P2P, seq), d))) return st;
  return wait_from(m, from, "send", seq, t0, d);
}

static dpc_status mpi_recv(dpc_transport *t, uint32_t rank, uint32_t peer, void *buf, size_t bytes,
                           dpc_diag *d) {
  mpit *m = impl(t);
  dpc_status st = check_peer(m, rank, peer, "receive", d);
  if (st) return st;
  uint64_t seq = m->rcvd[peer]++;
  double t0 = now_s();
  size_t from = m->nq;
  bool direct = m->dev->ops->host_visible;
  if (direct && (st = m->dev->ops->synchronize(m->dev, d))) return failed(m, st, d);
  if ((st = check_count(m, bytes, "receive", d)) || (!direct && (st = grow(m, &m->in, bytes, d))) ||
      (st = post_recv(m, direct ? buf : m->in.p, bytes, (int)peer, tag_of(m, K_P2P, seq), d)) ||
      (st = wait_from(m, from, "receive", seq, t0, d)))
    return st;
  return direct ? DPC_OK : stage_in(m, buf, m->in.p, bytes, d);
}

static dpc_status mpi_send_async(dpc_transport *t, uint32_t rank, uint32_t peer, const void *buf,
                                 size_t bytes, dpc_diag *d) {
  mpit *m = impl(t);
  dpc_status st = check_peer(m, rank, peer, "send", d);
  if (st) return st;
  if (m->n_async == m->cap_async) {
    size_t cap = m->cap_async ? m->cap_async * 2 : 8;
    hostbuf *b = realloc(m->abuf, cap * sizeof *b);
    if (!b)
      return failed(m, dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory", m->label[m->rank]), d);
    memset(b + m->cap_async, 0, (cap - m->cap_async) * sizeof *b);
    m->abuf = b, m->cap_async = cap;
  }
  hostbuf *b = &m->abuf[m->n_async];
  uint64_t seq = m->sent[peer]++;
  if ((st = check_count(m, bytes, "send", d)) || (st = grow(m, b, bytes, d)) ||
      (st = stage_out(m, b->p, buf, bytes, d)) ||
      (st = post_send(m, b->p, bytes, (int)peer, tag_of(m, K_P2P, seq), d)))
    return st;
  m->n_async++;
  return DPC_OK;
}

/* Between calls the list holds only send_async's requests: every other call empties its part. */
static dpc_status mpi_flush(dpc_transport *t, uint32_t rank, dpc_diag *d) {
  mpit *m = impl(t);
  dpc_status st = check_usable(m, rank, "send", d);
  if (st) return st;
  st = wait_from(m, 0, "send", 0, now_s(), d);
  if (!st) m->n_async = 0;
  return st;
}

/* A failed transport, or a wrong rank or peer, is "ready": the receive that follows fails at
 * once and says why, where "not yet" would keep a wait without a deadline waiting forever. */
static bool mpi_ready(dpc_transport *t, uint32_t rank, uint32_t peer) {
  mpit *m = impl(t);
  if (m->failed || rank != (uint32_t)m->rank || peer >= (uint32_t)m->size) return true;
  int flag = 0;
  MPI_Iprobe((int)peer, tag_of(m, K_P2P, m->rcvd[peer]), m->comm, &flag, MPI_STATUS_IGNORE);
  return flag != 0;
}

/* MPI_Comm_split has no deadline: every rank makes its subset calls while setting up, together. */
static dpc_status mpi_subset(dpc_transport *t, uint32_t rank, const uint32_t *members, uint32_t n,
                             dpc_transport **out, dpc_diag *d) {
  mpit *m = impl(t);
  *out = NULL;
  dpc_status st = check_usable(m, rank, "subset", d);
  if (st) return st;
  int key = -1;
  for (uint32_t k = 0; k < n; k++)
    if (members[k] == rank) key = (int)k;
  MPI_Comm sub = MPI_COMM_NULL;
  char e[MPI_MAX_ERROR_STRING];
  int rc = MPI_Comm_split(m->comm, key >= 0 ? 0 : MPI_UNDEFINED, key >= 0 ? key : 0, &sub);
  if (rc != MPI_SUCCESS)
    return failed(m,
                  dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: MPI_Comm_split: %s", m->label[m->rank],
                                mpi_error(rc, e)),
                  d);
  if (sub == MPI_COMM_NULL) return DPC_OK;
  st = dpc_transport_open_mpi(sub, m->dev, m->name, m->timeout_s, out, d);
  MPI_Comm_free(&sub);
  if (!st) impl(*out)->algo = m->algo;
  return st;
}

/* A dissemination barrier: in round k every rank tells rank + 2^k and hears from rank - 2^k;
 * after ceil(log2 D) rounds everyone has heard, directly or not, from everyone. The peers of
 * one rank's rounds are distinct (2^k < D), so one tag per barrier suffices. */
static dpc_status mpi_barrier(dpc_transport *t, uint32_t rank, dpc_diag *d) {
  mpit *m = impl(t);
  dpc_status st = check_usable(m, rank, "barrier", d);
  if (st) return st;
  uint64_t seq = m->coll++;
  double t0 = now_s();
  int D = m->size, tag = tag_of(m, K_BARRIER, seq);
  for (int dist = 1; dist < D && !st; dist *= 2) {
    size_t from = m->nq;
    st = post_recv(m, NULL, 0, (m->rank + D - dist) % D, tag, d);
    if (!st) st = post_send(m, NULL, 0, (m->rank + dist) % D, tag, d);
    if (!st) st = wait_from(m, from, "barrier", seq, t0, d);
  }
  return st;
}

static void mpi_abort(dpc_transport *t, const char *who, const char *why) {
  mpit *m = impl(t);
  if (!m->failed) {
    m->failed = true;
    snprintf(m->why, sizeof m->why, "%s failed: %s", who ? who : "a device",
             why ? why : "it stopped");
  }
  /* the other ranks are other processes, waiting in calls of their own: only ending the job
   * (mpirun stops every rank) reaches them. The caller has printed the message. */
  MPI_Abort(m->comm, 1);
}

static void mpi_free(dpc_transport *t) {
  mpit *m = impl(t);
  if (m) {
    dpc_transport_free(m->host);
    dpc_transport_free(m->column);
    drop_pending(m);
    if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
    if (!m->leak) {
      free(m->in.p);
      free(m->out.p);
      free(m->pieces.p);
      for (size_t i = 0; i < m->cap_async; i++) free(m->abuf[i].p);
    }
    free(m->abuf);
    free(m->q);
    free(m->sent);
    free(m->rcvd);
    free(m->label);
    free(m);
  }
  free(t);
}

static const dpc_transport_ops mpi_ops = {
    .kind = "mpi",
    .all_reduce = mpi_all_reduce,
    .broadcast = mpi_broadcast,
    .send = mpi_send,
    .recv = mpi_recv,
    .send_async = mpi_send_async,
    .flush = mpi_flush,
    .ready = mpi_ready,
    .subset = mpi_subset,
    .barrier = mpi_barrier,
    .abort = mpi_abort,
    .free = mpi_free,
};

/* What every rank tells the others at open, for messages. */
typedef struct whoami {
  char name[32];
  char host[MPI_MAX_PROCESSOR_NAME];
  int world; /* the rank mpirun gave it: the one to name, also in a subset's messages */
} whoami;

/* MPI is the process's, like main's argv: whoever starts the process initializes and finalizes
 * it (MPI_Init_thread with MPI_THREAD_SERIALIZED or more), so the transport keeps no state
 * outside itself. */
static dpc_status check_init(dpc_diag *d) {
  int inited = 0, fin = 0;
  MPI_Finalized(&fin);
  if (fin) return dpc_diag_fail(d, DPC_ERR_RUNTIME, "MPI transport: MPI was already finalized");
  MPI_Initialized(&inited);
  if (!inited)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "MPI transport: MPI is not initialized (the process calls "
                         "MPI_Init_thread before opening a transport)");
  return DPC_OK;
}

dpc_status dpc_transport_open_mpi(MPI_Comm comm, dpc_device *dev, const char *name,
                                  double timeout_s, dpc_transport **out, dpc_diag *d) {
  *out = NULL;
  if (!dev || !(timeout_s > 0))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "MPI transport: a device and a timeout are needed");
  dpc_mpi_allreduce algo = DPC_MPI_ALLREDUCE_DPC;
  const char *env = getenv("DPC_MPI_ALLREDUCE");
  if (env && *env && strcmp(env, "dpc")) {
    if (strcmp(env, "mpi"))
      return dpc_diag_fail(d, DPC_ERR_INVALID,
                           "DPC_MPI_ALLREDUCE is '%s': it takes dpc (rank-order sums, the "
                           "default) or mpi (MPI's own all-reduce)",
                           env);
    algo = DPC_MPI_ALLREDUCE_MPI;
  }
  dpc_status st = check_init(d);
  if (st) return st;
  dpc_transport *t = calloc(1, sizeof *t);
  mpit *m = t ? calloc(1, sizeof *m) : NULL;
  if (!m) {
    free(t);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening an MPI transport");
  }
  t->ops = &mpi_ops, t->impl = m;
  m->comm = MPI_COMM_NULL;
  m->dev = dev;
  m->timeout_s = timeout_s;
  m->algo = algo;
  char e[MPI_MAX_ERROR_STRING];
  int rc = MPI_Comm_dup(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, &m->comm);
  if (rc != MPI_SUCCESS) {
    m->comm = MPI_COMM_NULL;
    mpi_free(t);
    return dpc_diag_fail(d, DPC_ERR_RUNTIME, "MPI transport: MPI_Comm_dup: %s", mpi_error(rc, e));
  }
  /* failures come back as codes, to be worded here, instead of ending the process */
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(m->comm, &m->rank);
  MPI_Comm_size(m->comm, &m->size);
  int *ub = NULL, has = 0;
  MPI_Comm_get_attr(m->comm, MPI_TAG_UB, &ub, &has);
  m->seq_mod = (has && ub ? *ub : 32767) / K_SPAN;
  t->ranks = (uint32_t)m->size;
  size_t D = (size_t)m->size;
  m->sent = calloc(D, sizeof *m->sent);
  m->rcvd = calloc(D, sizeof *m->rcvd);
  m->label = calloc(D, sizeof *m->label);
  whoami *all = calloc(D, sizeof *all);
  if (!m->sent || !m->rcvd || !m->label || !all) {
    free(all);
    mpi_free(t);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening an MPI transport");
  }
  /* every rank's name and host, for messages: gathered without a deadline of its own beyond
   * the transport's, like every other wait */
  whoami me = {{0}, {0}, 0};
  MPI_Comm_rank(MPI_COMM_WORLD, &me.world);
  snprintf(me.name, sizeof me.name, "%s", name ? name : dev->name);
  snprintf(m->name, sizeof m->name, "%s", me.name);
  int len = 0;
  MPI_Get_processor_name(me.host, &len);
  snprintf(m->label[m->rank], sizeof m->label[0], "rank %d", me.world);
  MPI_Request req = MPI_REQUEST_NULL;
  rc = MPI_Iallgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, m->comm, &req);
  st = push_started(m, rc, req, "MPI_Iallgather", d);
  if (!st) st = wait_from(m, 0, "open", 0, now_s(), d);
  if (st) {
    free(all);
    mpi_free(t);
    return st;
  }
  for (size_t i = 0; i < D; i++) {
    all[i].name[sizeof all[i].name - 1] = all[i].host[sizeof all[i].host - 1] = 0;
    snprintf(m->label[i], sizeof m->label[i], "rank %d (%s on %s)", all[i].world, all[i].name,
             all[i].host);
  }
  free(all);
  *out = t;
  return DPC_OK;
}

uint32_t dpc_transport_mpi_rank(const dpc_transport *t) {
  return (uint32_t)impl(t)->rank;
}

void dpc_transport_mpi_set_allreduce(dpc_transport *t, dpc_mpi_allreduce algo) {
  impl(t)->algo = algo;
}

dpc_status dpc_transport_mpi_split_hosts(dpc_transport *t, uint32_t pretend, dpc_diag *d) {
  mpit *m = impl(t);
  dpc_status st = check_usable(m, (uint32_t)m->rank, "split_hosts", d);
  if (st) return st;
  if (m->host)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: the ranks are split into hosts already",
                         m->label[m->rank]);
  if (pretend > (uint32_t)m->size)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%u pretended hosts for %d ranks: at most one a rank",
                         pretend, m->size);
  char e[MPI_MAX_ERROR_STRING];
  MPI_Comm hc = MPI_COMM_NULL, lc = MPI_COMM_NULL;
  /* pretended hosts take consecutive ranks, as mpirun's --map-by slot fills real ones */
  int rc = pretend
               ? MPI_Comm_split(m->comm, (int)((uint64_t)m->rank * pretend / (uint64_t)m->size),
                                m->rank, &hc)
               : MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &hc);
  int hr = 0, leader = 0, hosts = 0, size[2] = {0, 0}, sizes[2] = {0, 0};
  if (rc == MPI_SUCCESS) MPI_Comm_rank(hc, &hr);
  if (rc == MPI_SUCCESS) MPI_Comm_size(hc, &size[0]);
  leader = hr == 0, size[1] = -size[0];
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&leader, &hosts, 1, MPI_INT, MPI_SUM, m->comm);
  /* the largest host and (negated) the smallest */
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(size, sizes, 2, MPI_INT, MPI_MAX, m->comm);
  /* a column: the ranks with this one's place in their hosts, in host order */
  if (rc == MPI_SUCCESS) rc = MPI_Comm_split(m->comm, hr, m->rank, &lc);
  if (rc != MPI_SUCCESS) {
    if (hc != MPI_COMM_NULL) MPI_Comm_free(&hc);
    return failed(m,
                  dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: splitting the ranks into hosts: %s",
                                m->label[m->rank], mpi_error(rc, e)),
                  d);
  }
  st = dpc_transport_open_mpi(hc, m->dev, m->name, m->timeout_s, &m->host, d);
  if (!st) st = dpc_transport_open_mpi(lc, m->dev, m->name, m->timeout_s, &m->column, d);
  MPI_Comm_free(&hc);
  MPI_Comm_free(&lc);
  if (st) return failed(m, st, d);
  m->n_hosts = hosts;
  m->even = sizes[0] == -sizes[1];
  return DPC_OK;
}

uint32_t dpc_transport_mpi_hosts(const dpc_transport *t) {
  return impl(t)->n_hosts > 0 ? (uint32_t)impl(t)->n_hosts : 1;
}

/* Round trips of `bytes` between ranks 0 and 1 of m; the one-way seconds on rank 0 (the fastest
 * of reps), 0 elsewhere. */
static dpc_status ping_pong(mpit *m, size_t bytes, int reps, double *one_way, dpc_diag *d) {
  *one_way = 0;
  uint64_t seq = m->coll++; /* on every rank: the collectives' numbers stay in step */
  if (m->rank > 1) return DPC_OK;
  dpc_status st = grow(m, &m->in, bytes ? bytes : 1, d);
  int tag = tag_of(m, K_PING, seq), peer = 1 - m->rank;
  /* the fastest round trip: the link's own time, where a median also holds the scheduler's when
   * ranks share cores (a descheduled peer costs a time slice, milliseconds) */
  double fastest = 0;
  for (int r = 0; !st && r < reps; r++) {
    double t0 = now_s();
    size_t from = m->nq;
    if (m->rank == 0) {
      st = post_send(m, m->in.p, bytes, peer, tag, d);
      if (!st) st = wait_from(m, from, "ping-pong", seq, t0, d);
      if (!st) st = post_recv(m, m->in.p, bytes, peer, tag, d);
    } else {
      st = post_recv(m, m->in.p, bytes, peer, tag, d);
      if (!st) st = wait_from(m, from, "ping-pong", seq, t0, d);
      if (!st) st = post_send(m, m->in.p, bytes, peer, tag, d);
    }
    if (!st) st = wait_from(m, from, "ping-pong", seq, t0, d);
    double one = (now_s() - t0) / 2;
    if (!st && (r == 0 || one < fastest)) fastest = one;
  }
  if (!st && m->rank == 0) *one_way = fastest;
  return st;
}

dpc_status dpc_transport_mpi_link(dpc_transport *t, double *latency_s, double *gbs, dpc_diag *d) {
  mpit *m = impl(t);
  *latency_s = *gbs = 0;
  dpc_status st = check_usable(m, (uint32_t)m->rank, "link", d);
  if (st || m->size < 2) return st;
  /* across hosts, between the first ranks of hosts 0 and 1; else between ranks 0 and 1 */
  mpit *x = m->n_hosts > 1 ? (impl(m->host)->rank == 0 ? impl(m->column) : NULL) : m;
  const size_t big = (size_t)1 << 20;
  double small = 0, large = 0;
  if (x && ((st = ping_pong(x, 8, 31, &small, d)) || (st = ping_pong(x, big, 15, &large, d))))
    return x == m ? st : failed(m, st, d);
  *latency_s = small;
  *gbs = large > small ? (double)big / (large - small) * 1e-9 : 0;
  /* every rank leaves together; those not measuring wait napping, so that neither their polls
   * nor their next work (compiling kernels) take the cores the measurement runs on: with more
   * ranks than cores the figure was a tenth of the link's or less */
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Ibarrier(m->comm, &req);
  size_t from = m->nq;
  if ((st = push_started(m, rc, req, "MPI_Ibarrier", d))) return st;
  m->nap = !x || x->rank > 1;
  st = wait_from(m, from, "barrier", m->coll++, now_s(), d);
  m->nap = false;
  return st;
}
