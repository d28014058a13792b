/*
 * pool.h — the worker threads of a CPU device, each bound to a core of its own.
 *
 * A compiled kernel does the iterations [begin, end) of its outermost loop (runtime/kernel.h);
 * the pool cuts [0, total) into one contiguous part per thread, runs them at once (the calling
 * thread takes the first part) and returns when all are done. Iterations write disjoint outputs,
 * so the result does not depend on how many threads there are.
 *
 *   dpc_pool *p;
 *   dpc_pool_new(0, &p, &d);                      // one thread per core, bound with hwloc
 *   int32_t bad = dpc_pool_run(p, k.fn, args, k.total, step, training);
 *   dpc_pool_free(p);
 *
 * Idle workers spin briefly (a kernel is often followed by another within microseconds), then
 * sleep on a condition variable.
 */
#ifndef DPC_RUNTIME_POOL_H
#define DPC_RUNTIME_POOL_H

#include "runtime/kernel.h"

typedef struct dpc_pool dpc_pool;

/* One pause of a spin-wait loop: it saves power and lets the other hyperthread run. */
static inline void dpc_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* A wait on another thread that spins (with pauses: a peer is usually microseconds behind),
 * then yields the core (threads may share cores), then gives up. Call dpc_backoff_wait after
 * each check that found nothing yet; it returns the seconds waited once they pass timeout_s,
 * else 0. */
typedef struct dpc_backoff {
  uint64_t spins;
  double t0;
  /* the waiting thread shares its core with another device's: it yields at once, since
   * spinning would take the core from the very thread it may be waiting for */
  bool shared;
} dpc_backoff;
double dpc_backoff_wait(dpc_backoff *b, double timeout_s);
/* Whether `threads` threads that wait on each other share cores: more of them than this process
 * may run on at once (its affinity). */
bool dpc_threads_share_cores(uint32_t threads);

/* threads 0: one per core of the machine. Threads are bound to cores (when hwloc can). */
dpc_status dpc_pool_new(uint32_t threads, dpc_pool **out, dpc_diag *d);
/* A pool for a device's cores: thread i (the caller is thread 0) bound to OS PU pus[i]
 * (runtime/topology.h's dpc_device_spec.pus); threads >= 1. */
dpc_status dpc_pool_new_on(const uint32_t *pus, uint32_t threads, dpc_pool **out, dpc_diag *d);
void dpc_pool_free(dpc_pool *p);
uint32_t dpc_pool_size(const dpc_pool *p);
/* Whether the threads could be bound to cores (false on machines hwloc cannot bind on). */
bool dpc_pool_bound(const dpc_pool *p);

/* Run fn over [0, total) across the threads; the nonzero return of any part, else 0. */
int32_t dpc_pool_run(dpc_pool *p, dpc_native_fn fn, void *const *args, int64_t total, uint64_t step,
                     int32_t training);

#endif
