/*
 * serve_ranks.h — `dpc serve --devices mpi`: the lanes a batcher needs to serve a model split
 * over MPI ranks (runtime/ranks.h), one transport per instance over every rank of
 * MPI_COMM_WORLD, and the checks every rank makes together before serving.
 *
 *   dpc_serve_ranks *r;
 *   dpc_serve_ranks_open("model.dpx", instances, &r, m);         // every rank, collective
 *   bo.instances = dpc_serve_ranks_count(r), bo.ranks = dpc_serve_ranks_list(r);
 *   st = dpc_batcher_open(...);                                  // rank 0 also listens
 *   st = dpc_serve_ranks_agree(r, st, m);                        // every rank: all opened?
 *   ...
 *   dpc_serve_ranks_close(r);                                    // after the batcher, collective
 *
 * Without MPI at build time, open says so.
 */
#ifndef DPC_DRIVER_SERVE_RANKS_H
#define DPC_DRIVER_SERVE_RANKS_H

#include <dpc/dpc.h>
#include <dpc/compiler.h>

typedef struct dpc_serve_ranks dpc_serve_ranks;

/* The lanes for serving the artifact at path: `instances` of them (0: one per rank), after
 * checking that MPI is running and that every rank has the same artifact. */
dpc_status dpc_serve_ranks_open(const char *path, unsigned instances, dpc_serve_ranks **out,
                                dpc_message *m);
unsigned dpc_serve_ranks_count(const dpc_serve_ranks *r);
dpc_ranks *const *dpc_serve_ranks_list(const dpc_serve_ranks *r);
/* This process's rank (0 takes the requests). */
unsigned dpc_serve_ranks_self(const dpc_serve_ranks *r);
/* Collective: mine is this rank's status so far; fails on every rank, naming the first rank that
 * failed and its message, if any rank failed. */
dpc_status dpc_serve_ranks_agree(dpc_serve_ranks *r, dpc_status mine, dpc_message *m);
/* Rank 0 when it has no batcher to close (it failed to open one): the other ranks' instances
 * stop as if its batcher had closed. */
void dpc_serve_ranks_stop(dpc_serve_ranks *r);
void dpc_serve_ranks_close(dpc_serve_ranks *r);

#endif
