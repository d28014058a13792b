/*
 * calibrate.h — how fast each device computes and how fast data moves between devices, measured
 * on this machine and cached, for `dpc devices` and (next) the partitioner's cost model.
 *
 *   dpc_calibration cal;
 *   dpc_calibrate(topo, &devs, "cpu:2", &(dpc_calibrate_opts){0}, &cal, &d);
 *   ... cal.gflops[i], cal.copy_gbs[i * cal.n + j]
 *   dpc_calibration_free(&cal);
 *
 * Compute: dpc's own compiled GEMM (512 x 512 x 512, f32) on the device's thread pool, best of
 * several runs. Links: a copy of 16 MiB from memory first touched on device i into memory first
 * touched on device j, made by a thread of device j (what a receive does), median of several.
 * Results are cached in dpc's cache folder under a key of the machine (CPU model, topology,
 * device cores) and dpc's version: measuring takes a second or two, reading the cache nothing.
 */
#ifndef DPC_TOOLS_CALIBRATE_H
#define DPC_TOOLS_CALIBRATE_H

#include "partitioner/cost.h"
#include "runtime/topology.h"

typedef struct dpc_calibrate_opts {
  bool refresh;          /* measure again even when a cached result exists */
  const char *cache_dir; /* NULL: dpc's cache folder (codegen/cache.h) */
} dpc_calibrate_opts;

typedef struct dpc_calibration {
  uint32_t n;
  double *gflops;   /* per device */
  double *copy_gbs; /* n x n, row = source device; 0 where not measured (over 8 devices: only
                       each device to itself and to the next) */
  char when[40];    /* UTC time of the measurement */
  bool from_cache;
  char path[1024]; /* the cache file, "" when there is no cache */
} dpc_calibration;

dpc_status dpc_calibrate(const dpc_topology *t, const dpc_device_list *devs,
                         const dpc_calibrate_opts *o, dpc_calibration *out, dpc_diag *d);
void dpc_calibration_free(dpc_calibration *c);

/* Device i of l as the cost model and the simulator see it (dpc_device_speed): its GEMM rate
 * (the best measured among devices of as many cores on its NUMA node: the same hardware);
 * the rate its kernels stream memory at, reads and writes counted apart, which is twice the
 * copy rate measured (a memcpy reads and writes every byte it copies); `profile`; and, when it
 * shares its cores with other devices, its core group. */
dpc_device_speed dpc_calibration_speed(const dpc_calibration *c, const dpc_device_list *l,
                                       uint32_t i, const dpc_cost_profile *profile);

#endif
