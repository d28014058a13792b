/*
 * topology.c — hwloc's view of the machine (see topology.h), and devices made from it.
 */
#define _GNU_SOURCE /* pthread_setaffinity_np */
#include "runtime/topology.h"

#include <hwloc.h>
#include <pthread.h>
#include <unistd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dpc_topology_free(dpc_topology *t) {
  if (!t) return;
  free(t->cores);
  free(t->numa_memory);
  free(t);
}

/* The logical index of the ancestor of `o` of the given type, or 0 when there is none. */
static uint32_t ancestor_index(hwloc_topology_t topo, hwloc_obj_t o, hwloc_obj_type_t type) {
  hwloc_obj_t a = hwloc_get_ancestor_obj_by_type(topo, type, o);
  return a ? a->logical_index : 0;
}

/* NUMA nodes hang off the side of the tree in hwloc 2: the node whose cpuset holds the core. */
static uint32_t numa_of(hwloc_topology_t topo, hwloc_obj_t core) {
  hwloc_obj_t n = NULL;
  while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)))
    if (n->cpuset && hwloc_bitmap_isincluded(core->cpuset, n->cpuset)) return n->logical_index;
  return 0;
}

static uint64_t cache_size(hwloc_topology_t topo, hwloc_obj_t core, hwloc_obj_type_t type) {
  hwloc_obj_t c = hwloc_get_ancestor_obj_by_type(topo, type, core);
  if (!c && core->first_child) { /* L1 sits below the core in some topologies */
    for (hwloc_obj_t o = core->first_child; o; o = o->first_child)
      if (o->type == type) return o->attr ? o->attr->cache.size : 0;
  }
  return c && c->attr ? c->attr->cache.size : 0;
}

dpc_status dpc_topology_load(const char *synthetic, dpc_topology **out, dpc_diag *d) {
  *out = NULL;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo))
    return dpc_diag_fail(d, DPC_ERR_RUNTIME, "hwloc: cannot start topology discovery");
  if (synthetic && hwloc_topology_set_synthetic(topo, synthetic)) {
    hwloc_topology_destroy(topo);
    return dpc_diag_fail(d, DPC_ERR_INVALID, "hwloc: bad synthetic topology '%s'", synthetic);
  }
  if (hwloc_topology_load(topo)) {
    hwloc_topology_destroy(topo);
    return dpc_diag_fail(d, DPC_ERR_RUNTIME, "hwloc: cannot discover the machine's topology");
  }
  dpc_topology *t = calloc(1, sizeof *t);
  int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  int npus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  int npack = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  bool by_pu = ncores <= 0; /* some VMs show PUs without cores: treat each PU as a core */
  if (by_pu) ncores = npus;
  if (t && ncores > 0) {
    t->n_cores = (uint32_t)ncores;
    t->n_pus = npus > 0 ? (uint32_t)npus : (uint32_t)ncores;
    t->n_numa = nnuma > 0 ? (uint32_t)nnuma : 1;
    t->n_packages = npack > 0 ? (uint32_t)npack : 1;
    t->cores = calloc(t->n_cores, sizeof *t->cores);
    t->numa_memory = calloc(t->n_numa, sizeof *t->numa_memory);
  }
  if (!t || ncores <= 0 || !t->cores || !t->numa_memory) {
    hwloc_topology_destroy(topo);
    dpc_topology_free(t);
    return ncores <= 0 ? dpc_diag_fail(d, DPC_ERR_RUNTIME, "hwloc found no cores on this machine")
                       : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory reading the topology");
  }
  t->synthetic = synthetic != NULL;
  for (uint32_t i = 0; i < t->n_cores; i++) {
    hwloc_obj_t c = hwloc_get_obj_by_type(topo, by_pu ? HWLOC_OBJ_PU : HWLOC_OBJ_CORE, i);
    int pu = c && c->cpuset ? hwloc_bitmap_first(c->cpuset) : (int)i;
    t->cores[i] = (dpc_topo_core){(uint32_t)(pu >= 0 ? pu : (int)i), c ? numa_of(topo, c) : 0,
                                  c ? ancestor_index(topo, c, HWLOC_OBJ_PACKAGE) : 0};
    if (i == 0 && c) {
      t->l1d = cache_size(topo, c, HWLOC_OBJ_L1CACHE);
      t->l2 = cache_size(topo, c, HWLOC_OBJ_L2CACHE);
      t->l3 = cache_size(topo, c, HWLOC_OBJ_L3CACHE);
    }
  }
  hwloc_obj_t pack = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
  const char *model = pack ? hwloc_obj_get_info_by_name(pack, "CPUModel") : NULL;
  snprintf(t->cpu_model, sizeof t->cpu_model, "%s", model ? model : "");
  for (size_t k = strlen(t->cpu_model); k > 0 && t->cpu_model[k - 1] == ' '; k--)
    t->cpu_model[k - 1] = 0; /* /proc/cpuinfo pads some models with spaces */
  for (uint32_t i = 0; i < t->n_numa; i++) {
    hwloc_obj_t n = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    t->numa_memory[i] = n && n->attr ? n->attr->numanode.local_memory : 0;
  }
  snprintf(t->description, sizeof t->description,
           "%u package%s, %u NUMA node%s, %u cores, %u PUs%s", t->n_packages,
           t->n_packages == 1 ? "" : "s", t->n_numa, t->n_numa == 1 ? "" : "s", t->n_cores,
           t->n_pus, t->synthetic ? " (synthetic)" : "");
  hwloc_topology_destroy(topo);
  *out = t;
  return DPC_OK;
}

void dpc_device_list_free(dpc_device_list *l) {
  for (uint32_t i = 0; l->devs && i < l->n; i++) {
    free(l->devs[i].cores);
    free(l->devs[i].pus);
  }
  free(l->devs);
  l->devs = NULL;
  l->n = 0;
}

/* Device i of n takes cores [first, first + count) of the topology's order. */
static dpc_status add_device(dpc_device_list *l, const dpc_topology *t, uint32_t i, uint32_t first,
                             uint32_t count, bool shared, dpc_diag *d) {
  dpc_device_spec *s = &l->devs[i];
  snprintf(s->name, sizeof s->name, "cpu:%u", i);
  s->cores = malloc(count * sizeof *s->cores);
  s->pus = malloc(count * sizeof *s->pus);
  if (!s->cores || !s->pus) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory for devices");
  for (uint32_t k = 0; k < count; k++) {
    s->cores[k] = (first + k) % t->n_cores;
    s->pus[k] = t->cores[s->cores[k]].pu;
  }
  s->n_cores = count;
  s->numa = t->cores[s->cores[0]].numa;
  s->shared = shared;
  return DPC_OK;
}

dpc_status dpc_devices_parse(const dpc_topology *t, const char *spec, dpc_device_list *out,
                             dpc_diag *d) {
  memset(out, 0, sizeof *out);
  uint32_t n = 0;
  bool numa = false;
  if (!strcmp(spec, "cpu")) {
    n = 1;
  } else if (!strcmp(spec, "numa")) {
    n = t->n_numa;
    numa = true;
  } else if (!strncmp(spec, "cpu:", 4)) {
    char *end;
    unsigned long v = strtoul(spec + 4, &end, 10);
    /* up to the most a plan has: plans for machines wider than this one (devices share cores) */
    if (end == spec + 4 || *end || spec[4] == '-' || v < 1 || v > DPC_MAX_DEVICES)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: cpu:N takes a number of devices from 1 to %u",
                           spec, DPC_MAX_DEVICES);
    n = (uint32_t)v;
  } else if (!strncmp(spec, "cuda", 4) || !strncmp(spec, "gpu", 3)) {
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s: plans spread over CPU devices only; a GPU runs a model through "
                         "the cuda backend (training over a list of GPUs such as "
                         "cuda:0,cuda:1), GPU plans are made for described GPUs, and the CPU "
                         "devices are cpu (one device on all cores), cpu:N (N devices sharing "
                         "the cores) and numa (one per NUMA node)",
                         spec);
  } else {
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s: expected cpu (one device on all cores), cpu:N (N devices "
                         "sharing the cores) or numa (one per NUMA node)",
                         spec);
  }
  out->devs = calloc(n, sizeof *out->devs);
  if (!out->devs) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory for devices");
  out->n = n;
  dpc_status st = DPC_OK;
  if (numa) {
    /* cores are in logical order, so each node's cores are contiguous */
    uint32_t first = 0;
    for (uint32_t i = 0; i < n && !st; i++) {
      uint32_t count = 0;
      while (first + count < t->n_cores && t->cores[first + count].numa == i) count++;
      if (!count)
        st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "numa: NUMA node %u has no cores", i);
      else
        st = add_device(out, t, i, first, count, false, d);
      first += count;
    }
  } else {
    /* equal shares, the first (cores mod n) devices one core more; above the core count,
     * device i runs on core i mod cores */
    bool shared = n > t->n_cores;
    for (uint32_t i = 0; i < n && !st; i++) {
      uint32_t first = shared ? i % t->n_cores
                              : i * (t->n_cores / n) + (i < t->n_cores % n ? i : t->n_cores % n);
      uint32_t count = shared ? 1 : t->n_cores / n + (i < t->n_cores % n);
      st = add_device(out, t, i, first, count, shared, d);
    }
  }
  if (st) dpc_device_list_free(out);
  return st;
}

void dpc_unbind_thread(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  long n = sysconf(_SC_NPROCESSORS_CONF);
  for (long i = 0; i < n && i < CPU_SETSIZE; i++) CPU_SET((int)i, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void dpc_bind_thread(uint32_t pu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET((int)pu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
