/*
 * collective.h — what an all-reduce costs over links of known bandwidth and latency (the
 * alpha-beta model: each step of a ring pays the link's latency, each byte its bandwidth).
 *
 *   double s = dpc_allreduce_seconds(bytes, 8, 8, &nvlink, &ib);   // 8 hosts of 8 peers
 *
 * A flat ring over D peers takes 2 (D - 1) steps of bytes / D each. Over hosts it is
 * hierarchical: a reduce-scatter among a host's L peers over the within-host link, a ring
 * all-reduce of each peer's 1/L share among the H hosts over the between-hosts link (every peer
 * of a host runs its own ring at once, each over its own link), and an all-gather back within
 * the host. One host (H = 1) is the flat ring. The simulator (simulate.c) costs a collective by
 * the same rule when its devices have link figures, so a plan composed of one replica and this
 * formula can be checked against a plan of every replica.
 */
#ifndef DPC_PARTITIONER_COLLECTIVE_H
#define DPC_PARTITIONER_COLLECTIVE_H

#include <stdint.h>

typedef struct dpc_link_speed {
  double gbs;       /* bytes/s / 1e9 one peer sends (and receives) over it */
  double latency_s; /* per message */
} dpc_link_speed;

/* Seconds for an all-reduce of `bytes` (each peer's buffer) over `per_host` peers on each of
 * `hosts` hosts. 0 for a single peer. `between` may be NULL when hosts is 1. */
double dpc_allreduce_seconds(double bytes, uint32_t per_host, uint32_t hosts,
                             const dpc_link_speed *within, const dpc_link_speed *between);

/* The bytes each peer sends in that all-reduce (what it costs the links, not counting
 * latency). */
double dpc_allreduce_bytes(double bytes, uint32_t per_host, uint32_t hosts);

#endif
