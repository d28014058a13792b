/*
 * calibrate.c — device speed and copy bandwidth, measured and cached (see calibrate.h).
 */
#include "driver/calibrate.h"

#include "codegen/cache.h"
#include "codegen/cpu/cpu.h"
#include "frontend/frontend.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "runtime/pool.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GEMM_N      512
#define COPY_BYTES  (16u << 20)
#define FULL_MATRIX 8 /* devices up to which every pair's copy is measured */

void dpc_calibration_free(dpc_calibration *c) {
  free(c->gflops);
  free(c->copy_gbs);
  c->gflops = c->copy_gbs = NULL;
}

dpc_device_speed dpc_calibration_speed(const dpc_calibration *c, const dpc_device_list *l,
                                       uint32_t i, const dpc_cost_profile *profile) {
  const dpc_device_spec *s = &l->devs[i];
  /* devices of as many cores on one NUMA node are the same hardware: they differ only by what
   * else ran while each was measured, and the best figure among them is the least disturbed
   * (so equal replicas are predicted alike, and alike with a profile timed on device 0) */
  double gf = c->gflops[i], copy = c->copy_gbs[(size_t)i * c->n + i];
  for (uint32_t j = 0; j < l->n && j < c->n; j++) {
    const dpc_device_spec *o = &l->devs[j];
    if (o->n_cores != s->n_cores || o->numa != s->numa || o->shared != s->shared) continue;
    if (c->gflops[j] > gf) gf = c->gflops[j];
    if (c->copy_gbs[(size_t)j * c->n + j] > copy) copy = c->copy_gbs[(size_t)j * c->n + j];
  }
  return (dpc_device_speed){.gflops = gf,
                            .mem_gbs = 2 * copy,
                            .profile = profile,
                            .core_group = s->shared && s->n_cores ? s->cores[0] + 1 : 0};
}

/* ---- compute -------------------------------------------------------------------------------- */

/* The GEMM kernel, compiled once for all devices. */
static dpc_status compile_gemm(dpc_cpu_backend **cpu, dpc_plan **plan, dpc_native_kernel *k,
                               dpc_diag *d) {
  char text[256];
  snprintf(text, sizeof text,
           "model calibrate\ninput a: f32[%d, %d]\ninput b: f32[%d, %d]\ny = matmul(a, b)\n"
           "output y\n",
           GEMM_N, GEMM_N, GEMM_N, GEMM_N);
  dpc_graph *g = NULL;
  int64_t none = 0;
  dpc_pass_opts po = {0};
  dpc_status st = dpc_parse_graph("calibrate.graph", text, strlen(text), &g, d);
  if (!st) st = dpc_passes_run(g, &po, d);
  if (!st) st = dpc_graph_bind(g, &none, d);
  if (!st) st = dpc_plan_single(g, "cpu:0", false, plan, d);
  dpc_graph_free(g);
  if (!st) st = dpc_cpu_backend_new(&(dpc_cpu_options){0}, cpu, d);
  dpc_native_kernel *all = st ? NULL : calloc((*plan)->g->n_nodes, sizeof *all);
  if (!st && !all) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory calibrating");
  if (!st) st = dpc_cpu_compile_plan(*cpu, *plan, all, d);
  for (uint32_t i = 0; !st && i < (*plan)->g->n_nodes; i++)
    if (all[i].fn) *k = all[i];
  free(all);
  return st;
}

static dpc_status measure_gemm(const dpc_device_spec *dev, const dpc_native_kernel *k, double *out,
                               dpc_diag *d) {
  size_t n = (size_t)GEMM_N * GEMM_N;
  float *a = aligned_alloc(64, n * sizeof *a), *b = aligned_alloc(64, n * sizeof *b);
  float *y = aligned_alloc(64, n * sizeof *y);
  dpc_pool *pool = NULL;
  dpc_status st = a && b && y ? dpc_pool_new_on(dev->pus, dev->n_cores, &pool, d)
                              : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory calibrating");
  if (!st) {
    for (size_t i = 0; i < n; i++) a[i] = b[i] = (float)(i % 13) * 0.1f, y[i] = 0;
    void *args[3] = {a, b, y};
    double best = 1e30;
    for (int r = 0; r < 8; r++) {
      double t0 = dpc_now_s();
      dpc_pool_run(pool, k->fn, args, k->total, 0, 0);
      double t = dpc_now_s() - t0;
      if (r && t < best) best = t; /* the first run warms caches and wakes the threads */
    }
    *out = 2.0 * GEMM_N * GEMM_N * GEMM_N / best * 1e-9;
  }
  dpc_pool_free(pool);
  free(a);
  free(b);
  free(y);
  return st;
}

/* ---- links -------------------------------------------------------------------------------- */

typedef struct copy_job {
  uint32_t pu;
  char *buf;       /* touch: first-touch it here; copy: the destination */
  const char *src; /* copy: the source */
  double seconds;  /* copy: the median */
} copy_job;

static void *touch_main(void *arg) {
  copy_job *j = arg;
  dpc_bind_thread(j->pu);
  memset(j->buf, 1, COPY_BYTES);
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void *copy_main(void *arg) {
  copy_job *j = arg;
  dpc_bind_thread(j->pu);
  double t[7];
  for (int r = 0; r < 7; r++) {
    double t0 = dpc_now_s();
    memcpy(j->buf, j->src, COPY_BYTES);
    t[r] = dpc_now_s() - t0;
  }
  qsort(t, 7, sizeof *t, cmp_double);
  j->seconds = t[3];
  return NULL;
}

static void run_on(void *(*fn)(void *), copy_job *j) {
  pthread_t th;
  if (pthread_create(&th, NULL, fn, j)) {
    fn(j); /* no thread: measure unbound rather than not at all */
    return;
  }
  pthread_join(th, NULL);
}

static dpc_status measure_copy(const dpc_device_spec *from, const dpc_device_spec *to, double *out,
                               dpc_diag *d) {
  char *src = aligned_alloc(64, COPY_BYTES), *dst = aligned_alloc(64, COPY_BYTES);
  if (!src || !dst) {
    free(src);
    free(dst);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory calibrating");
  }
  copy_job ts = {from->pus[0], src, NULL, 0}, td = {to->pus[0], dst, NULL, 0};
  run_on(touch_main, &ts);
  run_on(touch_main, &td);
  copy_job c = {to->pus[0], dst, src, 0};
  run_on(copy_main, &c);
  *out = COPY_BYTES / c.seconds * 1e-9;
  free(src);
  free(dst);
  return DPC_OK;
}

/* ---- devices on the same cores ------------------------------------------------------------ */

/* The first device on exactly device i's cores (i itself when none before it is): cpu:N above
 * the core count puts several devices on each core, and they are one device measured, so it is
 * measured once. That keeps calibrating 256 devices on a small machine as quick as calibrating
 * its cores, and gives such devices equal figures, which the placement relies on to try one of
 * a kind of idle device rather than each. */
static uint32_t same_cores(const dpc_device_list *l, uint32_t i) {
  const dpc_device_spec *a = &l->devs[i];
  for (uint32_t j = 0; j < i; j++) {
    const dpc_device_spec *b = &l->devs[j];
    if (b->n_cores == a->n_cores && !memcmp(b->pus, a->pus, a->n_cores * sizeof *a->pus)) return j;
  }
  return i;
}

/* The copy from device i to device j: measured once per pair of core sets. */
static dpc_status link_speed(const dpc_device_list *l, const uint32_t *rep, uint32_t i, uint32_t j,
                             dpc_calibration *out, dpc_diag *d) {
  uint32_t n = l->n;
  for (uint32_t a = 0; a < n; a++) /* a pair measured before on the same cores */
    for (uint32_t b = 0; b < n; b++)
      if (rep[a] == rep[i] && rep[b] == rep[j] && out->copy_gbs[(size_t)a * n + b] > 0) {
        out->copy_gbs[(size_t)i * n + j] = out->copy_gbs[(size_t)a * n + b];
        return DPC_OK;
      }
  return measure_copy(&l->devs[i], &l->devs[j], &out->copy_gbs[(size_t)i * n + j], d);
}

/* ---- the cache ---------------------------------------------------------------------------- */

static void cache_path(const dpc_topology *t, const dpc_device_list *devs,
                       const dpc_calibrate_opts *o, char *out, size_t n) {
  out[0] = 0;
  char base[900];
  if (!dpc_cache_base_dir(o->cache_dir, base, sizeof base)) return;
  /* FNV-1a over everything the figures depend on */
  uint64_t h = 1469598103934665603ull;
  char key[512];
  /* "shared": devices on the same cores share one measurement (older caches measured each) */
  snprintf(key, sizeof key, "%s|shared|%s|%s|%u", DPC_VERSION_STRING, t->cpu_model, t->description,
           devs->n);
  for (const char *p = key; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  for (uint32_t i = 0; i < devs->n; i++)
    for (uint32_t k = 0; k < devs->devs[i].n_cores; k++)
      h = (h ^ (devs->devs[i].pus[k] + 1u + 977u * i)) * 1099511628211ull;
  snprintf(out, n, "%s/devices-%016llx.json", base, (unsigned long long)h);
}

static bool load_cache(const char *path, dpc_calibration *c) {
  json_t *root = path[0] ? json_load_file(path, 0, NULL) : NULL;
  if (!root) return false;
  json_t *gf = json_object_get(root, "gflops"), *cp = json_object_get(root, "copy_gbs");
  const char *when = json_string_value(json_object_get(root, "when"));
  bool ok = json_is_array(gf) && json_is_array(cp) && json_array_size(gf) == c->n &&
            json_array_size(cp) == (size_t)c->n * c->n && when;
  for (uint32_t i = 0; ok && i < c->n; i++) {
    ok = json_is_number(json_array_get(gf, i));
    c->gflops[i] = json_number_value(json_array_get(gf, i));
  }
  for (size_t i = 0; ok && i < (size_t)c->n * c->n; i++) {
    ok = json_is_number(json_array_get(cp, i));
    c->copy_gbs[i] = json_number_value(json_array_get(cp, i));
  }
  if (ok) snprintf(c->when, sizeof c->when, "%s", when);
  json_decref(root);
  return ok;
}

static void save_cache(const char *path, const dpc_calibration *c) {
  if (!path[0]) return;
  json_t *root = json_object(), *gf = json_array(), *cp = json_array();
  for (uint32_t i = 0; i < c->n; i++) json_array_append_new(gf, json_real(c->gflops[i]));
  for (size_t i = 0; i < (size_t)c->n * c->n; i++)
    json_array_append_new(cp, json_real(c->copy_gbs[i]));
  json_object_set_new(root, "version", json_string(DPC_VERSION_STRING));
  json_object_set_new(root, "when", json_string(c->when));
  json_object_set_new(root, "gflops", gf);
  json_object_set_new(root, "copy_gbs", cp);
  /* written whole, then renamed: a reader never sees half a file */
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  if (!json_dump_file(root, tmp, JSON_INDENT(1))) rename(tmp, path);
  json_decref(root);
}

dpc_status dpc_calibrate(const dpc_topology *t, const dpc_device_list *devs,
                         const dpc_calibrate_opts *o, dpc_calibration *out, dpc_diag *d) {
  memset(out, 0, sizeof *out);
  out->n = devs->n;
  out->gflops = calloc(devs->n, sizeof *out->gflops);
  out->copy_gbs = calloc((size_t)devs->n * devs->n, sizeof *out->copy_gbs);
  if (!out->gflops || !out->copy_gbs) {
    dpc_calibration_free(out);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory calibrating");
  }
  cache_path(t, devs, o, out->path, sizeof out->path);
  if (!o->refresh && load_cache(out->path, out)) {
    out->from_cache = true;
    return DPC_OK;
  }
  dpc_cpu_backend *cpu = NULL;
  dpc_plan *plan = NULL;
  dpc_native_kernel k = {0};
  uint32_t *rep = malloc(devs->n * sizeof *rep);
  dpc_status st = rep ? compile_gemm(&cpu, &plan, &k, d)
                      : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory calibrating");
  for (uint32_t i = 0; !st && i < devs->n; i++) {
    rep[i] = same_cores(devs, i);
    if (rep[i] < i)
      out->gflops[i] = out->gflops[rep[i]];
    else
      st = measure_gemm(&devs->devs[i], &k, &out->gflops[i], d);
  }
  for (uint32_t i = 0; !st && i < devs->n; i++)
    for (uint32_t j = 0; !st && j < devs->n; j++)
      if (devs->n <= FULL_MATRIX || j == i || j == (i + 1) % devs->n)
        st = link_speed(devs, rep, i, j, out, d);
  free(rep);
  dpc_cpu_backend_free(cpu);
  dpc_plan_free(plan);
  if (st) {
    dpc_calibration_free(out);
    return st;
  }
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(out->when, sizeof out->when, "%Y-%m-%d %H:%M UTC", &tm);
  save_cache(out->path, out);
  return DPC_OK;
}
