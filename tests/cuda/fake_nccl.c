/*
 * fake_nccl.c — a stand-in for libnccl.so.2 in tests, loaded by runtime/transport_nccl.c
 * through $DPC_NCCL beside the test driver (fake_driver.c), whose device memory is host memory.
 * The communicators of ncclCommInitAll meet at each ncclAllReduce: the last rank to arrive sums
 * the ranks' buffers in rank order (or averages them) and writes every rank's result, and all
 * return together. Each call must come with its own GPU's stream and that GPU's context current
 * on the thread (asked of the test driver, found through $DPC_CUDA_DRIVER), as NCCL needs.
 *
 * Test code: a process-wide count of the all-reduces run, guarded by a lock.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

#define SUCCESS        0
#define SYSTEM_ERROR   2
#define INTERNAL_ERROR 3
#define INVALID_ARG    4
#define MAX_RANKS      8

typedef struct group {
  int n, arrived, refs;
  unsigned long generation;
  pthread_mutex_t lock;
  pthread_cond_t done;
  const void *send[MAX_RANKS];
  void *recv[MAX_RANKS];
  size_t count[MAX_RANKS];
  int dtype[MAX_RANKS], op[MAX_RANKS];
  int failed;
} group;

typedef struct comm {
  group *g;
  int rank, gpu;
} comm;

static unsigned all_reduces;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

/* The test driver's check that a stream is a GPU's and its context current here, found once by
 * ncclCommInitAll (before any rank's thread calls). */
static int (*stream_is)(int, void *);

static void find_driver_check(void) {
  const char *path = getenv("DPC_CUDA_DRIVER");
  void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  void *sym = h ? dlsym(h, "dpc_fake_cuda_stream_is") : NULL;
  memcpy(&stream_is, &sym, sizeof sym);
}

API int ncclGetVersion(int *v) {
  *v = 22809;
  return SUCCESS;
}

API const char *ncclGetErrorString(int r) {
  return r == INVALID_ARG ? "invalid argument (test NCCL)" : "error (test NCCL)";
}

API int ncclCommInitAll(void **comms, int n, const int *devlist) {
  if (n < 1 || n > MAX_RANKS) return INVALID_ARG;
  if (!stream_is) find_driver_check();
  if (!stream_is) return SYSTEM_ERROR; /* not beside the test driver */
  group *g = calloc(1, sizeof *g);
  if (!g) return SYSTEM_ERROR;
  g->n = g->refs = n;
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->done, NULL);
  for (int i = 0; i < n; i++) {
    comm *c = calloc(1, sizeof *c);
    if (!c) return SYSTEM_ERROR;
    c->g = g, c->rank = i, c->gpu = devlist[i];
    comms[i] = c;
  }
  return SUCCESS;
}

API int ncclCommDestroy(void *p) {
  comm *c = p;
  group *g = c->g;
  pthread_mutex_lock(&g->lock);
  int left = --g->refs;
  pthread_mutex_unlock(&g->lock);
  free(c);
  if (!left) {
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->done);
    free(g);
  }
  return SUCCESS;
}

/* The last to arrive: every rank's result, summed in rank order. */
static int reduce(group *g) {
  size_t n = g->count[0];
  int dt = g->dtype[0], op = g->op[0];
  for (int r = 1; r < g->n; r++)
    if (g->count[r] != n || g->dtype[r] != dt || g->op[r] != op) return INVALID_ARG;
  if ((dt != 7 && dt != 8) || (op != 0 && op != 4)) return INVALID_ARG;
  size_t es = dt == 8 ? 8 : 4;
  char *sum = malloc(n ? n * es : 1);
  if (!sum) return SYSTEM_ERROR;
  for (size_t i = 0; i < n; i++) {
    if (dt == 8) {
      double s = 0;
      for (int r = 0; r < g->n; r++) s += ((const double *)g->send[r])[i];
      ((double *)sum)[i] = op == 4 ? s / g->n : s;
    } else {
      float s = 0;
      for (int r = 0; r < g->n; r++) s += ((const float *)g->send[r])[i];
      ((float *)sum)[i] = op == 4 ? s / (float)g->n : s;
    }
  }
  for (int r = 0; r < g->n; r++) memcpy(g->recv[r], sum, n * es);
  free(sum);
  return SUCCESS;
}

API int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, void *p,
                      void *stream) {
  comm *c = p;
  if (!c || !stream_is(c->gpu, stream)) return INVALID_ARG;
  group *g = c->g;
  pthread_mutex_lock(&g->lock);
  unsigned long gen = g->generation;
  g->send[c->rank] = send, g->recv[c->rank] = recv, g->count[c->rank] = count;
  g->dtype[c->rank] = dtype, g->op[c->rank] = op;
  int rc = SUCCESS;
  if (++g->arrived == g->n) {
    g->failed = reduce(g);
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&g->done);
    pthread_mutex_lock(&count_lock);
    all_reduces++;
    pthread_mutex_unlock(&count_lock);
  } else {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    while (g->generation == gen && !rc)
      if (pthread_cond_timedwait(&g->done, &g->lock, &until)) rc = INTERNAL_ERROR;
  }
  if (!rc) rc = g->failed;
  pthread_mutex_unlock(&g->lock);
  return rc;
}

API unsigned dpc_fake_nccl_all_reduces(void);
API unsigned dpc_fake_nccl_all_reduces(void) {
  pthread_mutex_lock(&count_lock);
  unsigned n = all_reduces;
  pthread_mutex_unlock(&count_lock);
  return n;
}
