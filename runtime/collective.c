/*
 * collective.c — ring all-reduce over shared memory (see collective.h).
 *
 * With D ranks and buffers cut into D chunks, step t of the reduce-scatter has rank r add its
 * predecessor's chunk (r-1-t) mod D into its own; after D-1 steps rank r holds the whole sum of
 * chunk (r+1) mod D. Step t of the all-gather has rank r copy chunk (r-t) mod D from its
 * predecessor. Every rank reads only its predecessor's buffer, in place.
 *
 * Synchronisation is one progress counter per rank, bumped after each step. Before step t a rank
 * waits until both neighbours have finished step t-1: the predecessor, because step t reads
 * what it wrote then; the successor, because step t overwrites the chunk the successor read at
 * step t-1. At the end a rank waits for both neighbours to finish, so its buffer is not handed
 * back (or re-published by the next call) while a neighbour still reads it.
 */
#include "runtime/collective.h"

#include "runtime/pool.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct slot {
  _Alignas(64) _Atomic uint64_t progress; /* steps finished, over all calls */
  void *buf;                              /* this call's buffer, published before progress */
  int64_t n;
  dpc_dtype dtype;
  uint64_t calls; /* calls finished: touched by its own rank only */
  char name[32];
} slot;

struct dpc_comm {
  uint32_t ranks;
  double timeout_s;
  bool shared; /* more ranks than cores: waits yield at once (dpc_backoff) */
  slot *slots;
  _Atomic int claimed; /* an abort took the message slot */
  _Atomic int aborted; /* rank + 1 of the rank that failed, 0 when none */
  char who[32], why[256];
  dpc_allreduce_algo algo;
  /* the adds for this CPU (AVX-512 when it has it) */
  void (*add_f32)(void *dst, const void *src, int64_t n, double div);
  void (*add_f64)(void *dst, const void *src, int64_t n, double div);
};

/* a[i] = (a[i] + b[i]) / div, in vectors: the loop is bound by memory, and on the baseline
 * x86-64 target the compiler would leave it scalar. With AVX-512 (chosen at run time) a vector
 * is one register; elsewhere 16 bytes. div == 1 skips the division. */
#define DEFINE_ADD(name, T, VT, attr)                                                              \
  attr static void name(void *dst, const void *src, int64_t n, double div) {                       \
    T *a = dst;                                                                                    \
    const T *b = src;                                                                              \
    const int64_t w = (int64_t)(sizeof(VT) / sizeof(T));                                           \
    const T q = (T)div;                                                                            \
    int64_t i = 0;                                                                                 \
    if (div == 1) {                                                                                \
      for (; i + w <= n; i += w) {                                                                 \
        VT x, y;                                                                                   \
        memcpy(&x, a + i, sizeof x);                                                               \
        memcpy(&y, b + i, sizeof y);                                                               \
        x += y;                                                                                    \
        memcpy(a + i, &x, sizeof x);                                                               \
      }                                                                                            \
      for (; i < n; i++) a[i] += b[i];                                                             \
    } else {                                                                                       \
      for (; i + w <= n; i += w) {                                                                 \
        VT x, y;                                                                                   \
        memcpy(&x, a + i, sizeof x);                                                               \
        memcpy(&y, b + i, sizeof y);                                                               \
        x = (x + y) / q;                                                                           \
        memcpy(a + i, &x, sizeof x);                                                               \
      }                                                                                            \
      for (; i < n; i++) a[i] = (a[i] + b[i]) / q;                                                 \
    }                                                                                              \
  }

typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
DEFINE_ADD(add_f32, float, v4f, )
DEFINE_ADD(add_f64, double, v2d, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX512_ADD 1
typedef float v16f __attribute__((vector_size(64)));
typedef double v8d __attribute__((vector_size(64)));
DEFINE_ADD(add_f32_avx512, float, v16f, __attribute__((target("avx512f"))))
DEFINE_ADD(add_f64_avx512, double, v8d, __attribute__((target("avx512f"))))
#endif

void dpc_comm_add_into(dpc_dtype dtype, void *dst, const void *src, int64_t n, double div) {
#ifdef HAVE_AVX512_ADD
  if (__builtin_cpu_supports("avx512f")) {
    (dtype == DPC_F64 ? add_f64_avx512 : add_f32_avx512)(dst, src, n, div);
    return;
  }
#endif
  (dtype == DPC_F64 ? add_f64 : add_f32)(dst, src, n, div);
}

dpc_status dpc_comm_new(uint32_t ranks, const char *const *names, double timeout_s, dpc_comm **out,
                        dpc_diag *d) {
  *out = NULL;
  if (ranks < 1 || !(timeout_s > 0))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "a collective needs at least one rank and a timeout");
  dpc_comm *c = calloc(1, sizeof *c);
  slot *s = c ? aligned_alloc(64, ranks * sizeof *s) : NULL;
  if (!s) {
    free(c);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory for a collective of %u ranks", ranks);
  }
  memset(s, 0, ranks * sizeof *s);
  for (uint32_t i = 0; i < ranks; i++) {
    atomic_init(&s[i].progress, 0);
    if (names && names[i])
      snprintf(s[i].name, sizeof s[i].name, "%s", names[i]);
    else
      snprintf(s[i].name, sizeof s[i].name, "rank %u", i);
  }
  c->ranks = ranks;
  c->timeout_s = timeout_s;
  c->shared = dpc_threads_share_cores(ranks);
  c->add_f32 = add_f32;
  c->add_f64 = add_f64;
#ifdef HAVE_AVX512_ADD
  if (__builtin_cpu_supports("avx512f")) {
    c->add_f32 = add_f32_avx512;
    c->add_f64 = add_f64_avx512;
  }
#endif
  c->slots = s;
  *out = c;
  return DPC_OK;
}

void dpc_comm_free(dpc_comm *c) {
  if (!c) return;
  free(c->slots);
  free(c);
}

uint32_t dpc_comm_ranks(const dpc_comm *c) {
  return c->ranks;
}

void dpc_comm_set_algorithm(dpc_comm *c, dpc_allreduce_algo algo) {
  c->algo = algo;
}

void dpc_comm_abort(dpc_comm *c, const char *who, const char *why) {
  int expect = 0;
  if (!atomic_compare_exchange_strong(&c->claimed, &expect, 1)) return; /* the first one counts */
  snprintf(c->who, sizeof c->who, "%s", who ? who : "a device");
  snprintf(c->why, sizeof c->why, "%s", why ? why : "it stopped");
  atomic_store_explicit(&c->aborted, 1, memory_order_release);
}

static dpc_status aborted(dpc_comm *c, uint32_t me, dpc_diag *d) {
  (void)atomic_load_explicit(&c->aborted, memory_order_acquire); /* who and why are set */
  return dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: all_reduce stopped because %s failed: %s",
                       c->slots[me].name, c->who, c->why);
}

/* Wait until rank `peer` has finished `target` steps. Spin first (a neighbour is usually a few
 * microseconds behind), then yield the core (ranks may share cores), then give up. */
static dpc_status wait_for(dpc_comm *c, uint32_t me, uint32_t peer, uint64_t target, uint64_t step,
                           uint64_t steps, dpc_diag *d) {
  dpc_backoff b = {.shared = c->shared};
  while (atomic_load_explicit(&c->slots[peer].progress, memory_order_acquire) < target) {
    if (atomic_load_explicit(&c->aborted, memory_order_acquire)) return aborted(c, me, d);
    double waited = dpc_backoff_wait(&b, c->timeout_s);
    if (waited > 0)
      return dpc_diag_fail(d, DPC_ERR_RUNTIME,
                           "%s waited %.1f s for %s in all_reduce (call %llu, step %llu of %llu): "
                           "%s is stuck or gone",
                           c->slots[me].name, waited, c->slots[peer].name,
                           (unsigned long long)c->slots[me].calls + 1, (unsigned long long)step,
                           (unsigned long long)steps, c->slots[peer].name);
  }
  return DPC_OK;
}

/* Elements summed in one pass of the direct algorithm: 16 KiB of f32 (8 KiB of f64 values
 * counted in floats' room), so the partial sum stays in L1 while every buffer is read. */
#define BLOCK 4096

/* The other ranks' inputs match this rank's (checked once every rank has published). */
static dpc_status check_peers(dpc_comm *c, uint32_t rank, int64_t n, dpc_dtype dtype, dpc_diag *d) {
  for (uint32_t q = 0; q < c->ranks; q++) {
    const slot *p = &c->slots[q];
    if (p->n == n && p->dtype == dtype) continue;
    char msg[200];
    snprintf(msg, sizeof msg, "all_reduce of %lld %s here, of %lld %s on %s", (long long)n,
             dpc_dtype_name(dtype), (long long)p->n, dpc_dtype_name(p->dtype), p->name);
    dpc_comm_abort(c, c->slots[rank].name, msg);
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: %s", c->slots[rank].name, msg);
  }
  return DPC_OK;
}

/* Wait until every rank has finished `target` steps. */
static dpc_status wait_all(dpc_comm *c, uint32_t rank, uint64_t target, uint64_t step,
                           dpc_diag *d) {
  for (uint32_t q = 0; q < c->ranks; q++) {
    dpc_status st = q == rank ? DPC_OK : wait_for(c, rank, q, target, step, 2, d);
    if (st) return st;
  }
  return DPC_OK;
}

/* Rank r owns chunk r: it sums that chunk over every rank's buffer, in rank order, a block at a
 * time in a scratch that stays in L1, and writes the result into every buffer. No two ranks
 * touch the same chunk, so the only synchronisation is at the start (every input ready, every
 * rank done with the previous call) and the end (every chunk written). */
static dpc_status direct(dpc_comm *c, uint32_t rank, void *buf, dpc_dtype dtype, int64_t n,
                         dpc_reduce op, dpc_diag *d) {
  uint32_t D = c->ranks;
  slot *me = &c->slots[rank];
  uint64_t base = me->calls * 2;
  me->buf = buf;
  me->n = n;
  me->dtype = dtype;
  atomic_store_explicit(&me->progress, base + 1, memory_order_release);
  dpc_status st = wait_all(c, rank, base + 1, 1, d);
  if (!st) st = check_peers(c, rank, n, dtype, d);
  if (st) return st;
  size_t es = dtype == DPC_F64 ? 8 : 4;
  int64_t lo = n * (int64_t)rank / D, hi = n * (int64_t)(rank + 1) / D;
  _Alignas(64) char acc[BLOCK * 4];
  int64_t per = BLOCK * 4 / (int64_t)es;
  void (*add)(void *, const void *, int64_t, double) = dtype == DPC_F32 ? c->add_f32 : c->add_f64;
  bool wide_f32 = op == DPC_REDUCE_MEAN_WIDE && dtype == DPC_F32;
  if (wide_f32) {
    double *wide = (double *)(void *)acc;
    per = BLOCK * 4 / (int64_t)sizeof *wide;
    for (int64_t b = lo; b < hi; b += per) {
      int64_t m = hi - b < per ? hi - b : per;
      for (int64_t e = 0; e < m; e++) wide[e] = ((const float *)c->slots[0].buf)[b + e];
      for (uint32_t q = 1; q < D; q++)
        for (int64_t e = 0; e < m; e++) wide[e] += ((const float *)c->slots[q].buf)[b + e];
      for (uint32_t q = 0; q < D; q++)
        for (int64_t e = 0; e < m; e++) ((float *)c->slots[q].buf)[b + e] = (float)(wide[e] / D);
    }
  }
  for (int64_t b = lo; b < hi && !wide_f32; b += per) {
    int64_t m = hi - b < per ? hi - b : per;
    size_t off = (size_t)b * es, bytes = (size_t)m * es;
    memcpy(acc, (const char *)c->slots[0].buf + off, bytes);
    for (uint32_t q = 1; q < D; q++) {
      double div = op != DPC_REDUCE_SUM && q == D - 1 ? (double)D : 1;
      add(acc, (const char *)c->slots[q].buf + off, m, div);
    }
    for (uint32_t q = 0; q < D; q++) memcpy((char *)c->slots[q].buf + off, acc, bytes);
  }
  atomic_store_explicit(&me->progress, base + 2, memory_order_release);
  st = wait_all(c, rank, base + 2, 2, d);
  if (st) return st;
  me->calls++;
  return DPC_OK;
}

dpc_status dpc_comm_all_reduce(dpc_comm *c, uint32_t rank, void *buf, dpc_dtype dtype, int64_t n,
                               dpc_reduce op, dpc_diag *d) {
  if (rank >= c->ranks)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "all_reduce: rank %u of %u", rank, c->ranks);
  if (dtype != DPC_F32 && dtype != DPC_F64)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: all_reduce of %s (f32 and f64 only)",
                         c->slots[rank].name, dpc_dtype_name(dtype));
  if (atomic_load_explicit(&c->aborted, memory_order_acquire)) return aborted(c, rank, d);
  uint32_t D = c->ranks;
  slot *me = &c->slots[rank];
  if (D == 1) {
    me->calls++;
    return DPC_OK;
  }
  if (c->algo == DPC_ALLREDUCE_DIRECT || op == DPC_REDUCE_MEAN_WIDE)
    return direct(c, rank, buf, dtype, n, op, d);
  uint32_t pred = (rank + D - 1) % D, succ = (rank + 1) % D;
  uint64_t steps = 2 * (uint64_t)(D - 1), base = me->calls * (steps + 1);
  me->buf = buf;
  me->n = n;
  me->dtype = dtype;
  atomic_store_explicit(&me->progress, base + 1, memory_order_release);
  size_t es = dtype == DPC_F64 ? 8 : 4;
  for (uint64_t t = 0; t < steps; t++) {
    dpc_status st = wait_for(c, rank, pred, base + 1 + t, t + 1, steps, d);
    if (!st) st = wait_for(c, rank, succ, base + 1 + t, t + 1, steps, d);
    if (st) return st;
    const slot *p = &c->slots[pred];
    if (t == 0 && (p->n != n || p->dtype != dtype)) {
      char msg[200];
      snprintf(msg, sizeof msg, "all_reduce of %lld %s here, of %lld %s on %s", (long long)n,
               dpc_dtype_name(dtype), (long long)p->n, dpc_dtype_name(p->dtype), p->name);
      dpc_comm_abort(c, c->slots[rank].name, msg);
      return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: %s", me->name, msg);
    }
    bool rs = t < D - 1;
    uint32_t k = rs ? (uint32_t)((rank + 2 * D - 1 - t) % D)
                    : (uint32_t)((rank + 2 * D - (t - (D - 1))) % D);
    int64_t lo = n * (int64_t)k / D, hi = n * (int64_t)(k + 1) / D;
    char *dst = (char *)buf + (size_t)lo * es;
    const char *src = (const char *)p->buf + (size_t)lo * es;
    if (rs) {
      /* the last reduce-scatter step completes chunk k: the mean divides it there, once */
      double div = op == DPC_REDUCE_MEAN && t == D - 2 ? (double)D : 1;
      (dtype == DPC_F32 ? c->add_f32 : c->add_f64)(dst, src, hi - lo, div);
    } else if (hi > lo) {
      memcpy(dst, src, (size_t)(hi - lo) * es);
    }
    atomic_store_explicit(&me->progress, base + 2 + t, memory_order_release);
  }
  dpc_status st = wait_for(c, rank, pred, base + 1 + steps, steps, steps, d);
  if (!st) st = wait_for(c, rank, succ, base + 1 + steps, steps, steps, d);
  if (st) return st;
  me->calls++;
  return DPC_OK;
}

void dpc_comm_divide(dpc_dtype dtype, void *buf, int64_t n, uint32_t count) {
  for (int64_t i = 0; i < n; i++) {
    if (dtype == DPC_F64)
      ((double *)buf)[i] /= count;
    else
      ((float *)buf)[i] /= (float)count;
  }
}
