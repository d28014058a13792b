/*
 * place_gpu.c — the figures a placement over this machine's GPUs works from (driver.h,
 * dpc_driver_gpu_speeds): each cuda:N measured by its device (runtime/device_cuda.c), so METIS
 * weighs a GPU by its GEMM rate and the values crossing GPUs by the copies between them, not by
 * the host CPU's calibration.
 */
#include "driver/driver.h"
#include "runtime/device.h"

#include <stdio.h>

/* A peer copy's cost beyond its bytes: not measured, roughly a copy's launch. */
#define PEER_LATENCY_S 10e-6

#define BUS_BYTES (16u << 20)

/* GB/s of a copy from host memory into dev's, the best of a few. */
static dpc_status bus_gbs(dpc_device *dev, double *gbs, dpc_diag *d) {
  *gbs = 0;
  void *buf = NULL, *host = NULL;
  dpc_status st = dev->ops->alloc(dev, BUS_BYTES, &buf, d);
  if (!st) st = dpc_device_host_alloc(dev, BUS_BYTES, &host, d);
  double best = 0;
  for (int r = 0; !st && r < 4; r++) { /* the first warms the path */
    double t0 = dpc_now_s();
    st = dev->ops->copy(dev, DPC_COPY_H2D, buf, host, BUS_BYTES, NULL, d);
    double t = dpc_now_s() - t0;
    if (!st && r && t > 0 && (best == 0 || t < best)) best = t;
  }
  if (!st) *gbs = best > 0 ? BUS_BYTES / best / 1e9 : 0;
  if (host) dpc_device_host_free(dev, host);
  if (buf) dev->ops->free(dev, buf);
  return st;
}

dpc_status dpc_driver_gpu_speeds(uint32_t n, dpc_device_speed *speed, double *bus, char *what,
                                 size_t len, dpc_diag *d) {
  dpc_device *first = NULL;
  dpc_status st = DPC_OK;
  double link = 0, gflops = 0, gbs = 0;
  for (uint32_t k = 0; k < n && !st; k++) {
    char name[32];
    snprintf(name, sizeof name, "cuda:%u", k);
    dpc_device *dev = NULL;
    dpc_cuda_figures f;
    st = dpc_device_open(name, &dev, d);
    if (!st) st = dpc_device_cuda_measure(dev, &f, d);
    if (!st && !(f.gemm_gflops > 0))
      st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: its GEMM rate is not measured (%s)", name,
                         f.note);
    double peer = 0;
    if (!st && k > 0) st = dpc_device_cuda_peer_gbs(dev, first, &peer, d);
    if (!st && k == 0 && bus) st = bus_gbs(dev, bus, d);
    if (!st) {
      speed[k] = (dpc_device_speed){.gflops = f.gemm_gflops, .mem_gbs = 2 * f.copy_gbs};
      if (peer > 0 && (link == 0 || peer < link)) link = peer;
      if (!k || f.gemm_gflops < gflops) gflops = f.gemm_gflops;
      if (!k || f.copy_gbs < gbs) gbs = f.copy_gbs;
    }
    if (k == 0 && !st)
      first = dev; /* kept open: each other GPU's copy from it is timed */
    else
      dpc_device_close(dev);
  }
  dpc_device_close(first);
  if (st) return st;
  if (!(link > 0)) link = gbs; /* one GPU: no value crosses */
  for (uint32_t k = 0; k < n; k++)
    speed[k].link_gbs = link, speed[k].link_latency_s = PEER_LATENCY_S;
  if (what && len)
    snprintf(what, len,
             "the GPUs' measured figures (the slowest of %u: GEMM %.0f GFLOP/s, copy %.0f GB/s, "
             "%.0f GB/s between GPUs)",
             n, gflops, gbs, link);
  return DPC_OK;
}
