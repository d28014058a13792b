/*
 * collective.h — all-reduce among the devices of one process, over shared memory.
 *
 *   dpc_comm *c;
 *   dpc_comm_new(2, (const char *[]){"cpu:0", "cpu:1"}, 10.0, &c, &d);
 *   // on each device's thread, with its own buffer of n floats:
 *   dpc_comm_all_reduce(c, rank, buf, DPC_F32, n, DPC_REDUCE_MEAN, &d);
 *   dpc_comm_free(c);                                  // after every rank has returned
 *
 * A reduce-scatter then an all-gather, reading other ranks' buffers in place (no staging copies,
 * no allocation per call), either directly or around a ring (dpc_allreduce_algo). Element i's
 * sum is always taken in the same order, so results are identical on every rank and
 * bit-identical run to run. Ranks wait on each other's progress counters by spinning, then
 * yielding (ranks may share cores); a rank that waits longer than the timeout, or whose peer
 * failed (dpc_comm_abort), returns an error naming both devices.
 */
#ifndef DPC_RUNTIME_COLLECTIVE_H
#define DPC_RUNTIME_COLLECTIVE_H

#include "ir/types.h"

typedef struct dpc_comm dpc_comm;

/* MEAN_WIDE: the mean of f32 values summed in f64, rank 0 first, then rounded once (local SGD's
 * averaging of params); always by the direct algorithm. */
typedef enum dpc_reduce { DPC_REDUCE_SUM, DPC_REDUCE_MEAN, DPC_REDUCE_MEAN_WIDE } dpc_reduce;

/* How an all-reduce moves data. Both are a reduce-scatter then an all-gather with a fixed order
 * of summation. DIRECT (the default): rank r sums chunk r from every rank's buffer in one pass
 * and writes the result into every buffer — on shared memory every buffer is in reach, so this
 * moves 2 bytes per byte of buffer and rank, against 2.5 to 4 for the ring. RING: D-1 hops to the
 * next rank each way, the algorithm for links between machines; kept for them and to measure. */
typedef enum dpc_allreduce_algo { DPC_ALLREDUCE_DIRECT, DPC_ALLREDUCE_RING } dpc_allreduce_algo;

/* ranks >= 1 participants named names[i] (copied; used in messages); timeout_s > 0. */
dpc_status dpc_comm_new(uint32_t ranks, const char *const *names, double timeout_s, dpc_comm **out,
                        dpc_diag *d);
void dpc_comm_free(dpc_comm *c);
uint32_t dpc_comm_ranks(const dpc_comm *c);
/* Before the first collective; every rank uses the same. */
void dpc_comm_set_algorithm(dpc_comm *c, dpc_allreduce_algo algo);

/* Every rank calls this with its own buffer, the same dtype (f32 or f64), n and op, in the same
 * order of calls; on return buf holds the sum (or mean) over the ranks. The buffers must not
 * overlap. */
dpc_status dpc_comm_all_reduce(dpc_comm *c, uint32_t rank, void *buf, dpc_dtype dtype, int64_t n,
                               dpc_reduce op, dpc_diag *d);

/* dst[i] = dst[i] + src[i] (f32 or f64), divided by div unless div == 1: the very additions (and
 * the mean's one division) that every all-reduce here performs, for transports that sum their
 * pieces elsewhere (runtime/transport_mpi.c) and must give the same bits. */
void dpc_comm_add_into(dpc_dtype dtype, void *dst, const void *src, int64_t n, double div);

/* buf[i] = buf[i] / count (f32 or f64, divided in the element's own precision): a mean made
 * from a sum someone else added up (MPI's own all-reduce, sums in two tiers). */
void dpc_comm_divide(dpc_dtype dtype, void *buf, int64_t n, uint32_t count);

/* Device `who` failed (a rank, or another device of the run): every rank waiting in, or later
 * entering, a collective returns an error that names it and says why. */
void dpc_comm_abort(dpc_comm *c, const char *who, const char *why);

#endif
