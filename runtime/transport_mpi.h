/*
 * transport_mpi.h — the MPI transport (kind "mpi"): one process per rank, each with its own
 * device; the `rank` argument of every call is the caller's own rank in the communicator.
 *
 *   dpc_transport *t;
 *   MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);  // the process's own
 *   dpc_transport_open_mpi(MPI_COMM_NULL, dev, "cpu:0", 60.0, &t, &d); // MPI_COMM_WORLD
 *   uint32_t me = dpc_transport_mpi_rank(t);
 *   t->ops->all_reduce(t, me, buf, DPC_F32, n, DPC_REDUCE_MEAN, &d);
 *   dpc_transport_free(t);                        // on every rank, like the open
 *
 * Only this header and runtime/transport_mpi.c see MPI (the dpc_runtime_mpi library): libdpcrt
 * does not link it. All-reduce gives the shared-memory transport's bits (rank-order sums); every
 * wait polls against the timeout and fails naming the rank waited for and its host; a rank
 * whose calls differ from a peer's (a skipped call) is reported, not waited on forever. See
 * docs/distributed.md.
 */
#ifndef DPC_RUNTIME_TRANSPORT_MPI_H
#define DPC_RUNTIME_TRANSPORT_MPI_H

#include "runtime/transport.h"

#include <mpi.h>

/* How all-reduce moves data. DPC (the default): a reduce-scatter whose chunk owners sum the
 * ranks' pieces in rank order, then an all-gather: bit-identical to transport_shm.c. MPI: the
 * library's MPI_Iallreduce (the mean divided afterwards), as a baseline to measure against;
 * its order of summation is MPI's, so results differ from DPC's beyond 2 ranks. The
 * environment variable DPC_MPI_ALLREDUCE=dpc|mpi sets it when the transport opens. */
typedef enum dpc_mpi_allreduce { DPC_MPI_ALLREDUCE_DPC, DPC_MPI_ALLREDUCE_MPI } dpc_mpi_allreduce;

/* The transport over comm (duplicated, so its messages never meet the caller's), with this
 * process's device dev (borrowed) named name in messages; timeout_s > 0 bounds every wait.
 * MPI_COMM_NULL means MPI_COMM_WORLD. MPI belongs to the process: it is initialized (thread level
 * serialized or more) before the open and finalized after the last free by whoever started the
 * process; the transport keeps no state outside itself. Collective: every rank of comm opens,
 * and later frees, its transport. */
dpc_status dpc_transport_open_mpi(MPI_Comm comm, dpc_device *dev, const char *name,
                                  double timeout_s, dpc_transport **out, dpc_diag *d);
/* The caller's rank in the transport. */
uint32_t dpc_transport_mpi_rank(const dpc_transport *t);
/* Before the first all-reduce; every rank sets the same. */
void dpc_transport_mpi_set_allreduce(dpc_transport *t, dpc_mpi_allreduce algo);
/* Group the ranks into hosts: those sharing memory (MPI_COMM_TYPE_SHARED), or with pretend > 0,
 * that many pretended hosts of consecutive ranks. When there are several hosts and one has
 * several ranks, sums and means (not the wide mean) go hierarchically: each host's ranks sum
 * first, the hosts' first ranks then add the hosts' sums, and each host hands the total to its
 * ranks. Collective, before the first all-reduce; once. */
dpc_status dpc_transport_mpi_split_hosts(dpc_transport *t, uint32_t pretend, dpc_diag *d);
/* Hosts found by the split (1 before it). */
uint32_t dpc_transport_mpi_hosts(const dpc_transport *t);
/* The link, measured by ping-pong: between the first ranks of hosts 0 and 1 when there are
 * several hosts, else between ranks 0 and 1: one-way seconds of an 8-byte message and GB/s of a
 * 1 MiB one (the fastest of several round trips), on rank 0 (0 elsewhere). Collective: every rank
 * calls it. */
dpc_status dpc_transport_mpi_link(dpc_transport *t, double *latency_s, double *gbs, dpc_diag *d);

#endif
