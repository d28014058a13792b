/*
 * collective.c — all-reduce costs over links (see collective.h).
 */
#include "partitioner/collective.h"

#include <stddef.h>

/* `steps` ring steps of `chunk` bytes each over link l. */
static double ring(uint32_t steps, double chunk, const dpc_link_speed *l) {
  if (!steps || !l || l->gbs <= 0) return 0;
  return steps * (l->latency_s + chunk / (l->gbs * 1e9));
}

double dpc_allreduce_seconds(double bytes, uint32_t per_host, uint32_t hosts,
                             const dpc_link_speed *within, const dpc_link_speed *between) {
  uint32_t L = per_host ? per_host : 1, H = hosts ? hosts : 1;
  if (L * H <= 1) return 0;
  double share = bytes / L; /* each peer's part after the reduce-scatter within the host */
  /* reduce-scatter and all-gather within the host, L - 1 steps each */
  double s = 2 * ring(L - 1, share, within);
  /* then a ring all-reduce of the share across the hosts: 2 (H - 1) steps of share / H */
  if (H > 1) s += ring(2 * (H - 1), share / H, between);
  return s;
}

double dpc_allreduce_bytes(double bytes, uint32_t per_host, uint32_t hosts) {
  uint32_t L = per_host ? per_host : 1, H = hosts ? hosts : 1;
  double share = bytes / L;
  return 2.0 * (L - 1) * share + (H > 1 ? 2.0 * (H - 1) * share / H : 0);
}
