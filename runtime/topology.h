/*
 * topology.h — the machine as hwloc sees it, and the CPU devices a `--devices` spec makes of it.
 *
 *   dpc_topology *t;
 *   dpc_topology_load(NULL, &t, &d);                 // this machine (or a synthetic one, tests)
 *   dpc_device_list devs;
 *   dpc_devices_parse(t, "cpu:2", &devs, &d);        // cpu | cpu:N | numa
 *   ... devs.devs[i].cores: the OS indices of the PUs its workers are bound to
 *   dpc_device_list_free(&devs);
 *   dpc_topology_free(t);
 *
 * A CPU device is a set of cores with its own thread pool: `cpu` is one device on every core,
 * `cpu:N` N devices on equal shares of the cores (N may exceed the core count, for testing: then
 * devices share cores), `numa` one device per NUMA node. Cache and memory sizes come from hwloc
 * and may be wrong inside VMs (this project's machines report a 508 MiB L3); they are shown, not
 * relied on.
 */
#ifndef DPC_RUNTIME_TOPOLOGY_H
#define DPC_RUNTIME_TOPOLOGY_H

#include "ir/base.h"

typedef struct dpc_topo_core {
  uint32_t pu;      /* OS index of its first PU: what a thread is bound to */
  uint32_t numa;    /* logical index of its NUMA node */
  uint32_t package; /* logical index of its package */
} dpc_topo_core;

typedef struct dpc_topology {
  uint32_t n_packages, n_numa, n_cores, n_pus;
  dpc_topo_core *cores;  /* n_cores, in hwloc's logical order */
  uint64_t *numa_memory; /* n_numa: local memory in bytes (0 when unknown) */
  uint64_t l1d, l2, l3;  /* bytes, of the first core's caches (0 when absent) */
  bool synthetic;        /* not this machine: binding is meaningless */
  char description[160]; /* "1 package, 1 NUMA node, 2 cores, 2 PUs" */
  char cpu_model[96];    /* the first package's CPUModel, "" when hwloc has none */
} dpc_topology;

/* synthetic: NULL for this machine, or an hwloc synthetic description for tests
 * ("pack:2 numa:2 core:8 pu:2"). */
dpc_status dpc_topology_load(const char *synthetic, dpc_topology **out, dpc_diag *d);
void dpc_topology_free(dpc_topology *t);

typedef struct dpc_device_spec {
  char name[32];   /* "cpu:0" */
  uint32_t *cores; /* indices into dpc_topology.cores */
  uint32_t n_cores;
  uint32_t *pus; /* the OS PU indices of those cores, for binding */
  uint32_t numa; /* the NUMA node of its first core */
  bool shared;   /* shares cores with another device (cpu:N with N above the core count) */
} dpc_device_spec;

typedef struct dpc_device_list {
  dpc_device_spec *devs;
  uint32_t n;
} dpc_device_list;

/* Bind the calling thread to the PU with OS index `pu` (a device's core; best effort: a machine
 * that refuses leaves the thread unbound). */
void dpc_bind_thread(uint32_t pu);
/* The calling thread may run on any core again (a thread starts with its creator's binding). */
void dpc_unbind_thread(void);

/* spec: "cpu", "cpu:N" or "numa". Errors name the spec and what is accepted. */
dpc_status dpc_devices_parse(const dpc_topology *t, const char *spec, dpc_device_list *out,
                             dpc_diag *d);
void dpc_device_list_free(dpc_device_list *l);

#endif
