/*
 * serve_ranks.c — the lanes of `dpc serve --devices mpi` (serve_ranks.h).
 *
 * Each lane is an MPI transport of its own (a duplicate of MPI_COMM_WORLD), so one batcher
 * instance's messages never meet another's and the instances need no lock between them; the
 * transport's timeout bounds every wait inside a run, while the other ranks wait for rank 0's
 * next word without one (runtime/ranks.c). Opening and closing are collective: every rank makes
 * the same calls in the same order.
 */
#include "driver/serve_ranks.h"

#include "driver/driver.h"
#include "ir/base.h"
#include "runtime/device.h"
#include "runtime/ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DPC_HAVE_MPI
#include "runtime/transport_mpi.h"

/* How long a rank waits for another inside a run (an activation, an output): a stage of a
 * served model takes milliseconds; this is only for a peer that is stuck or gone. */
#define LANE_TIMEOUT_S 60.0
/* How long the ranks wait for each other in their checks: one may still be loading a large
 * model while the others are done. */
#define CHECK_TIMEOUT_S 600.0

struct dpc_serve_ranks {
  unsigned n, self, size;
  dpc_device *dev; /* the transports stage through it (a cpu: they read buffers in place) */
  /* the ranks' checks (the artifact's hash, agree): a transport of its own, since the other
   * ranks' instances already wait on their lanes when rank 0 opens its server */
  dpc_transport *ctl;
  dpc_transport **t;
  struct dpc_ranks *lanes;
  dpc_ranks **list;
};

/* The artifact's bytes, hashed: every rank must serve the same file. */
static dpc_status file_hash(const char *path, uint64_t *h, dpc_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) return dpc_diag_fail(d, DPC_ERR_IO, "%s: cannot read it", path);
  unsigned char buf[1 << 16];
  size_t n;
  *h = 0xcbf29ce484222325ull;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) *h = dpc_driver_fnv(*h, buf, n);
  bool bad = ferror(f);
  fclose(f);
  return bad ? dpc_diag_fail(d, DPC_ERR_IO, "%s: read error", path) : DPC_OK;
}

unsigned dpc_serve_ranks_count(const dpc_serve_ranks *r) {
  return r->n;
}

dpc_ranks *const *dpc_serve_ranks_list(const dpc_serve_ranks *r) {
  return r->list;
}

unsigned dpc_serve_ranks_self(const dpc_serve_ranks *r) {
  return r->self;
}

void dpc_serve_ranks_stop(dpc_serve_ranks *r) {
  if (r->self != 0) return;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_ranks_stop_all((const struct dpc_ranks *const *)r->list, r->n,
                     &d); /* mpirun reports a rank gone */
  dpc_diag_free(&d);
}

void dpc_serve_ranks_close(dpc_serve_ranks *r) {
  if (!r) return;
  for (unsigned i = 0; r->t && i < r->n; i++) dpc_transport_free(r->t[i]);
  dpc_transport_free(r->ctl);
  if (r->dev) dpc_device_close(r->dev);
  free(r->t);
  free(r->lanes);
  free(r->list);
  free(r);
}

dpc_status dpc_serve_ranks_agree(dpc_serve_ranks *r, dpc_status mine, dpc_message *m) {
  dpc_transport *t = r->ctl;
  /* every rank's status to every rank, then the first failed rank's message from it */
  double *st = calloc(r->size, sizeof *st);
  if (!st) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  st[r->self] = (double)mine;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_status rc = t->ops->all_reduce(t, r->self, st, DPC_F64, r->size, DPC_REDUCE_SUM, &d);
  unsigned first = r->size;
  for (unsigned k = 0; !rc && k < r->size && first == r->size; k++)
    if (st[k] != 0) first = k;
  char text[512] = {0};
  if (!rc && first < r->size) {
    if (first == r->self) snprintf(text, sizeof text, "%s", m && m->msg ? m->msg : "failed");
    rc = t->ops->broadcast(t, r->self, first, text, sizeof text, &d);
    if (!rc) rc = (dpc_status)st[first];
    text[sizeof text - 1] = 0;
  }
  free(st);
  if (rc && first < r->size && first != r->self)
    dpc_diag_fail(m, rc, "rank %u: %s", first, text);
  else if (rc && first == r->size)
    dpc_diag_fail(m, rc, "%s", d.msg ? d.msg : "the ranks could not agree");
  dpc_diag_free(&d);
  return rc;
}

dpc_status dpc_serve_ranks_open(const char *path, unsigned instances, dpc_serve_ranks **out,
                                dpc_message *m) {
  *out = NULL;
  int inited = 0, size = 0, rank = 0;
  MPI_Initialized(&inited);
  if (!inited)
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "--devices mpi: MPI is not initialized (run dpc under mpirun, e.g. "
                         "'mpirun -np 2 dpc serve MODEL.dpx --devices mpi')");
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE)
    return dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                         "--devices mpi: the server's instances call MPI at once, and this MPI "
                         "was started at thread level %d, below MPI_THREAD_MULTIPLE",
                         level);
  dpc_serve_ranks *r = calloc(1, sizeof *r);
  if (!r) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  r->self = (unsigned)rank, r->size = (unsigned)size;
  r->n = instances ? instances : (unsigned)size;
  r->t = calloc(r->n, sizeof *r->t);
  r->lanes = calloc(r->n, sizeof *r->lanes);
  r->list = calloc(r->n, sizeof *r->list);
  dpc_status st = !r->t || !r->lanes || !r->list ? dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory")
                                                 : dpc_device_open("cpu:0", &r->dev, m);
  char name[32];
  snprintf(name, sizeof name, "cpu:%u", r->self);
  if (!st) st = dpc_transport_open_mpi(MPI_COMM_WORLD, r->dev, name, CHECK_TIMEOUT_S, &r->ctl, m);
  for (unsigned i = 0; !st && i < r->n; i++) {
    st = dpc_transport_open_mpi(MPI_COMM_WORLD, r->dev, name, LANE_TIMEOUT_S, &r->t[i], m);
    r->lanes[i] = (struct dpc_ranks){r->t[i], r->self};
    r->list[i] = &r->lanes[i];
  }
  /* every rank must serve the same artifact: rank 0's hash against each rank's own */
  uint64_t mine = 0, root = 0;
  dpc_status fst = st ? st : file_hash(path, &mine, m);
  root = mine;
  if (!st) st = r->ctl->ops->broadcast(r->ctl, r->self, 0, &root, sizeof root, m);
  if (!st && !fst && mine != root)
    fst = dpc_diag_fail(m, DPC_ERR_INVALID,
                        "%s differs from rank 0's file of that name: every rank must serve the "
                        "same artifact (hash %016llx here, %016llx on rank 0)",
                        path, (unsigned long long)mine, (unsigned long long)root);
  if (!st) st = dpc_serve_ranks_agree(r, fst, m);
  if (st) {
    dpc_serve_ranks_close(r);
    return st;
  }
  *out = r;
  return DPC_OK;
}

#else

struct dpc_serve_ranks {
  int unused;
};

dpc_status dpc_serve_ranks_open(const char *path, unsigned instances, dpc_serve_ranks **out,
                                dpc_message *m) {
  (void)path, (void)instances;
  *out = NULL;
  return dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                       "--devices mpi: this dpc was built without MPI (install OpenMPI, "
                       "libopenmpi-dev, and build again)");
}

unsigned dpc_serve_ranks_count(const dpc_serve_ranks *r) {
  (void)r;
  return 0;
}

dpc_ranks *const *dpc_serve_ranks_list(const dpc_serve_ranks *r) {
  (void)r;
  return NULL;
}

unsigned dpc_serve_ranks_self(const dpc_serve_ranks *r) {
  (void)r;
  return 0;
}

dpc_status dpc_serve_ranks_agree(dpc_serve_ranks *r, dpc_status mine, dpc_message *m) {
  (void)r, (void)m;
  return mine;
}

void dpc_serve_ranks_stop(dpc_serve_ranks *r) {
  (void)r;
}

void dpc_serve_ranks_close(dpc_serve_ranks *r) {
  free(r);
}

#endif
