/*
 * api_devices.c — the devices of this machine and their calibration (include/dpc/plan.h):
 * what `dpc devices` shows, as data.
 */
#include "driver/api_internal.h"
#include "driver/calibrate.h"
#include "runtime/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The machine and the devices of a spec into the report's plain data. */
static dpc_status fill_devices(const dpc_topology *t, const dpc_device_list *l,
                               dpc_devices_report *r, dpc_diag *d) {
  snprintf(r->machine, sizeof r->machine, "%s", t->description);
  snprintf(r->cpu_model, sizeof r->cpu_model, "%s", t->cpu_model);
  r->l1d = t->l1d, r->l2 = t->l2, r->l3 = t->l3;
  r->devices = calloc(l->n ? l->n : 1, sizeof *r->devices);
  if (!r->devices) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  r->n = l->n;
  for (uint32_t i = 0; i < l->n; i++) {
    const dpc_device_spec *s = &l->devs[i];
    dpc_device_info *v = &r->devices[i];
    snprintf(v->name, sizeof v->name, "%s", s->name);
    v->numa = s->numa, v->shared = s->shared;
    v->pus = calloc(s->n_cores ? s->n_cores : 1, sizeof *v->pus);
    if (!v->pus) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    v->n_cores = s->n_cores;
    memcpy(v->pus, s->pus, s->n_cores * sizeof *v->pus);
  }
  return DPC_OK;
}

DPC_COMPILER_API dpc_status dpc_devices_describe(const char *spec, const dpc_devices_opts *o,
                                                 dpc_devices_report **out, dpc_message *m) {
  *out = NULL;
  dpc_devices_report *r = calloc(1, sizeof *r);
  if (!r) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_calibration cal = {0};
  bool calibrate = !(DPC_API_HAS(o, no_calibrate) && o->no_calibrate);
  dpc_calibrate_opts co = {.refresh = DPC_API_HAS(o, refresh) && o->refresh,
                           .cache_dir = DPC_API_HAS(o, cache_dir) ? o->cache_dir : NULL};
  dpc_status st = dpc_topology_load(NULL, &t, m);
  if (!st) st = dpc_devices_parse(t, spec ? spec : "cpu", &l, m);
  if (!st && calibrate) st = dpc_calibrate(t, &l, &co, &cal, m);
  if (!st) st = fill_devices(t, &l, r, m);
  if (!st && calibrate) {
    size_t n = l.n;
    r->gflops = malloc((n ? n : 1) * sizeof *r->gflops);
    r->copy_gbs = malloc((n ? n * n : 1) * sizeof *r->copy_gbs);
    if (!r->gflops || !r->copy_gbs) {
      st = dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
    } else {
      memcpy(r->gflops, cal.gflops, n * sizeof *r->gflops);
      memcpy(r->copy_gbs, cal.copy_gbs, n * n * sizeof *r->copy_gbs);
      r->calibrated = true;
      r->from_cache = cal.from_cache;
      snprintf(r->when, sizeof r->when, "%s", cal.when);
      snprintf(r->cache_path, sizeof r->cache_path, "%s", cal.path);
    }
  }
  dpc_calibration_free(&cal);
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  if (st) {
    dpc_devices_report_free(r);
    return st;
  }
  *out = r;
  return DPC_OK;
}

DPC_COMPILER_API void dpc_devices_report_free(dpc_devices_report *r) {
  if (!r) return;
  for (uint32_t i = 0; r->devices && i < r->n; i++) free(r->devices[i].pus);
  free(r->devices);
  free(r->gflops);
  free(r->copy_gbs);
  free(r);
}

DPC_COMPILER_API dpc_status dpc_gpu_measure(uint32_t gpu, dpc_gpu_figures *out, dpc_message *m) {
  memset(out, 0, sizeof *out);
  char name[32];
  snprintf(name, sizeof name, "cuda:%u", gpu);
  dpc_device *dev = NULL, *first = NULL;
  dpc_status st = dpc_device_open(name, &dev, m);
  dpc_cuda_figures f;
  if (!st) st = dpc_device_cuda_measure(dev, &f, m);
  if (!st) {
    snprintf(out->name, sizeof out->name, "%s", f.name);
    snprintf(out->note, sizeof out->note, "%s", f.note);
    out->memory = f.memory, out->gemm_gflops = f.gemm_gflops, out->copy_gbs = f.copy_gbs;
    out->gemm_n = f.gemm_n;
  }
  if (!st && gpu > 0 && !(st = dpc_device_open("cuda:0", &first, m)))
    st = dpc_device_cuda_peer_gbs(dev, first, &out->peer_gbs, m);
  dpc_device_close(first);
  dpc_device_close(dev);
  return st;
}
