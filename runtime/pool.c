/*
 * pool.c — a CPU device's worker threads (see pool.h). pthreads for the threads, C11 atomics
 * for handing out work, hwloc to bind each worker to a core.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include "runtime/pool.h"

#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* How long an idle worker spins before it sleeps: SPINS pauses, about 200 µs. Longer than the
 * gaps inside a training step (a few single-threaded kernels, a part that finished early), so a
 * step never waits on a wake-up from the condvar, which costs 50-100 µs on these machines. */
#define SPINS 4000

/* Worker stacks hold the GEMM kernels' packed panels (allocas of up to a few MB). */
#define WORKER_STACK (16u << 20)

typedef struct job {
  dpc_native_fn fn;
  void *const *args;
  int64_t total;
  uint64_t step;
  int32_t training;
  uint32_t parts;
} job;

typedef struct worker {
  struct dpc_pool *pool;
  uint32_t index; /* 1..n-1: the part it runs; the caller runs part 0 */
  pthread_t thread;
} worker;

struct dpc_pool {
  uint32_t n;
  worker *workers;
  bool bound;
  hwloc_topology_t topo;
  bool have_topo;
  job job;
  _Atomic uint64_t gen;  /* bumped for every job */
  _Atomic uint32_t done; /* parts finished by workers */
  _Atomic int32_t bad;   /* a part's nonzero return */
  _Atomic bool stop;
  _Atomic uint32_t sleepers; /* workers asleep on cv: only then is a broadcast needed */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t caller; /* the thread last bound to core 0 by dpc_pool_run */
  bool have_caller;
  uint32_t *pus; /* dpc_pool_new_on: the OS PU index thread i is bound to; NULL: core i */
};

static void run_part(dpc_pool *p, const job *j, uint32_t i) {
  int64_t b = j->total * (int64_t)i / j->parts, e = j->total * (int64_t)(i + 1) / j->parts;
  if (b >= e) return;
  int32_t r = j->fn(j->args, b, e, j->step, j->training);
  if (r) atomic_store(&p->bad, r);
}

static void bind_to_core(dpc_pool *p, uint32_t core) {
  if (!p->have_topo) return;
  if (p->pus) {
    hwloc_bitmap_t one = hwloc_bitmap_alloc();
    hwloc_bitmap_only(one, p->pus[core]);
    if (hwloc_set_cpubind(p->topo, one, HWLOC_CPUBIND_THREAD)) p->bound = false;
    hwloc_bitmap_free(one);
    return;
  }
  int n = hwloc_get_nbobjs_by_type(p->topo, HWLOC_OBJ_CORE);
  if (n <= 0) return;
  hwloc_obj_t obj = hwloc_get_obj_by_type(p->topo, HWLOC_OBJ_CORE, core % (uint32_t)n);
  if (!obj) return;
  hwloc_bitmap_t set = hwloc_bitmap_dup(obj->cpuset);
  hwloc_bitmap_singlify(set);
  if (hwloc_set_cpubind(p->topo, set, HWLOC_CPUBIND_THREAD)) p->bound = false;
  hwloc_bitmap_free(set);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  dpc_pool *p = w->pool;
  bind_to_core(p, w->index);
  uint64_t seen = 0;
  for (;;) {
    uint64_t g;
    int spins = 0;
    while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
      if (++spins < SPINS) {
        dpc_cpu_relax();
        continue;
      }
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
      break;
    }
    seen = g;
    if (atomic_load(&p->stop)) return NULL;
    job j = p->job;
    if (w->index < j.parts) run_part(p, &j, w->index);
    atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
  }
}

dpc_status dpc_pool_new(uint32_t threads, dpc_pool **out, dpc_diag *d) {
  return dpc_pool_new_on(NULL, threads, out, d);
}

dpc_status dpc_pool_new_on(const uint32_t *pus, uint32_t threads, dpc_pool **out, dpc_diag *d) {
  *out = NULL;
  dpc_pool *p = calloc(1, sizeof *p);
  if (!p) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory creating threads");
  if (pus && threads) {
    if (!(p->pus = malloc(threads * sizeof *p->pus))) {
      free(p);
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory creating threads");
    }
    memcpy(p->pus, pus, threads * sizeof *p->pus);
  }
  p->bound = true;
  if (!hwloc_topology_init(&p->topo)) {
    if (!hwloc_topology_load(p->topo))
      p->have_topo = true;
    else
      hwloc_topology_destroy(p->topo);
  }
  if (!threads) {
    int cores = p->have_topo ? hwloc_get_nbobjs_by_type(p->topo, HWLOC_OBJ_CORE) : 1;
    threads = cores > 0 ? (uint32_t)cores : 1;
  }
  if (!p->have_topo) p->bound = false;
  p->n = threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->workers = calloc(threads, sizeof *p->workers);
  if (!p->workers) {
    dpc_pool_free(p);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory creating threads");
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, WORKER_STACK);
  for (uint32_t i = 1; i < threads; i++) {
    p->workers[i] = (worker){p, i, 0};
    if (pthread_create(&p->workers[i].thread, &attr, worker_main, &p->workers[i])) {
      p->n = i; /* the ones made so far get stopped */
      pthread_attr_destroy(&attr);
      dpc_pool_free(p);
      return dpc_diag_fail(d, DPC_ERR_RUNTIME, "cannot start worker thread %u", i);
    }
  }
  pthread_attr_destroy(&attr);
  *out = p;
  return DPC_OK;
}

void dpc_pool_free(dpc_pool *p) {
  if (!p) return;
  if (p->workers && p->n > 1) {
    atomic_store(&p->stop, true);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 1; i < p->n; i++) pthread_join(p->workers[i].thread, NULL);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  if (p->have_topo) hwloc_topology_destroy(p->topo);
  free(p->workers);
  free(p->pus);
  free(p);
}

uint32_t dpc_pool_size(const dpc_pool *p) {
  return p->n;
}

bool dpc_pool_bound(const dpc_pool *p) {
  return p->bound;
}

int32_t dpc_pool_run(dpc_pool *p, dpc_native_fn fn, void *const *args, int64_t total, uint64_t step,
                     int32_t training) {
  /* a loop of one iteration (a scalar loss) or a one-thread pool runs right here */
  if (p->n < 2 || total < 2) return fn(args, 0, total, step, training);
  uint32_t parts = total < (int64_t)p->n ? (uint32_t)total : p->n;
  /* The caller runs part 0 on core 0. Left unbound, the scheduler may keep it on a worker's
   * core, where the two take turns: a 2-thread GEMM then ran at a third of its speed. */
  if (!p->have_caller || !pthread_equal(p->caller, pthread_self())) {
    bind_to_core(p, 0);
    p->caller = pthread_self();
    p->have_caller = true;
  }
  p->job = (job){fn, args, total, step, training, parts};
  atomic_store(&p->done, 0);
  atomic_store(&p->bad, 0);
  /* Sequentially consistent: either a worker going to sleep sees the new generation, or we see
   * it counted among the sleepers and wake it. */
  atomic_fetch_add(&p->gen, 1);
  if (atomic_load(&p->sleepers)) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  run_part(p, &p->job, 0);
  while (atomic_load_explicit(&p->done, memory_order_acquire) < p->n - 1) {
  }
  return atomic_load(&p->bad);
}

bool dpc_threads_share_cores(uint32_t threads) {
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  return n > 0 && threads > (uint32_t)n;
}

double dpc_backoff_wait(dpc_backoff *b, double timeout_s) {
  if (++b->spins < 4000 && !b->shared) {
    dpc_cpu_relax();
    return 0;
  }
  sched_yield();
  if (b->spins % 64) return 0; /* the clock is read now and then, not on every yield */
  double t = dpc_now_s();
  if (b->t0 == 0) b->t0 = t;
  return t - b->t0 > timeout_s ? t - b->t0 : 0;
}
