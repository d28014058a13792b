/*
 * driver.c — load, bind, plan and run: the path shared by `dpc run` and the op tests.
 */
#include "driver/driver.h"

#include "driver/calibrate.h"
#include "codegen/cpu/cpu.h"
#include "frontend/frontend.h"
#include "frontend/onnx.h"
#include "ir/print.h"
#include "partitioner/partitioner.h"
#include "runtime/artifact.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "runtime/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void dpc_named_free(dpc_named *v, uint32_t n) {
  if (!v) return;
  for (uint32_t i = 0; i < n; i++) {
    free(v[i].name);
    free(v[i].t.data);
  }
  free(v);
}

dpc_status dpc_driver_default_horizon(dpc_graph *g, dpc_diag *d) {
  return dpc_optimizer_default_horizon(g, d);
}

dpc_status dpc_driver_load(const char *path, dpc_graph **out, dpc_diag *d) {
  return dpc_driver_load_known(path, NULL, 0, out, d);
}

dpc_status dpc_driver_load_batched(const char *path, dpc_graph **out, char **fixed, dpc_diag *d) {
  if (fixed) *fixed = NULL;
  if (!dpc_onnx_is_model_path(path)) return dpc_driver_load(path, out, d);
  dpc_onnx_opts o = {.leading_batch = true};
  dpc_status st = dpc_onnx_import_file_opts(path, &o, out, d);
  if (st && fixed) {
    /* the importer reports the model's own error when it fails as exported too */
    dpc_diag plain;
    dpc_diag_init(&plain);
    if (!dpc_onnx_import_file(path, out, &plain)) {
      *fixed = dpc_strdup(d->msg ? d->msg : "");
      dpc_diag_clear(d);
      st = *fixed ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    }
    dpc_diag_free(&plain);
  }
  if (!st && (st = dpc_verify(*out, d))) {
    dpc_graph_free(*out);
    *out = NULL;
  }
  return st;
}

/* Fix the value of each symbol from the shapes of the data given for the inputs. */
static dpc_status bind_symbols(const dpc_graph *g, const dpc_named *feeds, uint32_t n_feeds,
                               int64_t *vals, dpc_diag *d) {
  const char **from = calloc(g->n_syms ? g->n_syms : 1, sizeof *from);
  if (!from) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; k < g->n_syms; k++) vals[k] = -1;
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    const dpc_node *n = &g->nodes[i];
    if (n->op != DPC_OP_INPUT) continue;
    const dpc_value *v = &g->values[n->out];
    char name[96], ty[160];
    dpc_graph_value_label(g, n->out, name, sizeof name);
    dpc_graph_format_type(g, v->dtype, &v->shape, ty, sizeof ty);
    const dpc_named *f = NULL;
    for (uint32_t j = 0; j < n_feeds; j++)
      if (!strcmp(feeds[j].name, name)) f = &feeds[j];
    if (!f) {
      st = dpc_diag_fail(d, DPC_ERR_INVALID, "no data given for input '%s' (%s)", name, ty);
      break;
    }
    const dpc_shape *have = &f->t.shape;
    char hs[160];
    dpc_graph_format_type(g, f->t.dtype, have, hs, sizeof hs);
    if (have->rank != v->shape.rank) {
      st = dpc_diag_fail(d, DPC_ERR_SHAPE, "input '%s' is %s in the model, but the data is %s",
                         name, ty, hs);
      break;
    }
    for (uint32_t k = 0; k < have->rank && !st; k++) {
      int64_t want = v->shape.d[k];
      if (!DPC_DIM_IS_SYM(want)) {
        if (want != have->d[k])
          st = dpc_diag_fail(d, DPC_ERR_SHAPE, "input '%s' is %s in the model, but the data is %s",
                             name, ty, hs);
        continue;
      }
      uint32_t s = DPC_DIM_SYM_NO(want);
      if (vals[s] < 0) {
        vals[s] = have->d[k];
        from[s] = f->name;
      } else if (vals[s] != have->d[k]) {
        st = dpc_diag_fail(d, DPC_ERR_SHAPE,
                           "%s is %lld in the data for '%s' but %lld in the data for '%s'",
                           dpc_graph_str(g, g->syms[s]), (long long)vals[s], from[s],
                           (long long)have->d[k], f->name);
      }
    }
  }
  free(from);
  return st;
}

/* Copy every output of a session's plan out as named tensors. */
static dpc_status collect_outputs(const dpc_plan *plan, const dpc_session *s, dpc_named **outs,
                                  uint32_t *n_outs, dpc_diag *d) {
  const dpc_graph *pg = plan->g;
  *n_outs = 0;
  *outs = calloc(pg->n_outputs ? pg->n_outputs : 1, sizeof **outs);
  if (!*outs) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; i < pg->n_outputs; i++) {
    char name[128];
    dpc_graph_value_label(pg, pg->outputs[i], name, sizeof name);
    /* data parallel: the other replicas' rows are NAME.replica1, ..., after the first's */
    uint32_t ids[DPC_MAX_DEVICES] = {pg->outputs[i]}, n = 1;
    const dpc_value *val = &pg->values[pg->outputs[i]];
    for (; plan->n_devs > 1 && val->shape.rank && val->name != DPC_NONE && n < DPC_MAX_DEVICES;
         n++) {
      char rn[512];
      snprintf(rn, sizeof rn, "%s.replica%u", dpc_graph_str(pg, val->name), n);
      if ((ids[n] = dpc_graph_find(pg, rn)) == DPC_NONE) break;
    }
    dpc_tensor t = dpc_session_value(s, pg->outputs[i]);
    size_t bytes = 0;
    for (uint32_t k = 0; k < n; k++) {
      dpc_tensor tk = dpc_session_value(s, ids[k]);
      bytes += dpc_tensor_bytes(&tk);
      if (k) t.shape.d[0] += tk.shape.d[0];
    }
    dpc_named *o = &(*outs)[i];
    o->name = dpc_strdup(name);
    o->t = t;
    o->t.data = malloc(bytes ? bytes : 1);
    *n_outs = i + 1;
    if (!o->name || !o->t.data) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    for (size_t k = 0, at = 0; k < n; k++) {
      dpc_tensor tk = dpc_session_value(s, ids[k]);
      memcpy((unsigned char *)o->t.data + at, tk.data, dpc_tensor_bytes(&tk));
      at += dpc_tensor_bytes(&tk);
    }
  }
  return DPC_OK;
}

dpc_status dpc_driver_infer(const dpc_graph *src, const dpc_pass_opts *po, const dpc_exec_opts *x,
                            const dpc_named *feeds, uint32_t n_feeds, bool training,
                            dpc_named **outs, uint32_t *n_outs, dpc_diag *d) {
  *outs = NULL;
  *n_outs = 0;
  dpc_graph *g = dpc_graph_clone(src);
  if (!g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_pass_opts o = po ? *po : (dpc_pass_opts){0};
  o.training = false;
  o.fuse = dpc_codegen_fusion(x ? x->backend : NULL);
  dpc_plan *plan = NULL;
  dpc_session *s = NULL;
  int64_t *vals = calloc(g->n_syms ? g->n_syms : 1, sizeof *vals);
  dpc_status st = vals ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) st = dpc_passes_run(g, &o, d);
  for (uint32_t j = 0; j < n_feeds && !st; j++) {
    uint32_t v = dpc_graph_find(src, feeds[j].name);
    if (v == DPC_NONE) {
      dpc_buf b = {0};
      for (uint32_t i = 0; i < src->n_nodes; i++)
        if (src->nodes[i].op == DPC_OP_INPUT)
          dpc_buf_printf(&b, "%s%s", b.len ? ", " : "",
                         dpc_graph_str(src, src->values[src->nodes[i].out].name));
      st = dpc_diag_fail(d, DPC_ERR_INVALID, "the model has no input named '%s' (its inputs: %s)",
                         feeds[j].name, b.data ? b.data : "none");
      dpc_buf_free(&b);
    }
  }
  if (!st) st = bind_symbols(g, feeds, n_feeds, vals, d);
  if (!st) st = dpc_graph_bind(g, vals, d);
  if (!st) st = dpc_plan_single(g, "cpu:0", false, &plan, d);
  dpc_codegen *cg = NULL;
  dpc_native_kernel *native = NULL;
  if (!st && x && dpc_codegen_compiles(x->backend)) {
    native = calloc(plan->g->n_nodes ? plan->g->n_nodes : 1, sizeof *native);
    st = !native ? dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory")
                 : dpc_driver_check_backend_device(x->backend, d);
    if (!st) st = dpc_codegen_new(x->backend, &x->cpu, &cg, d);
    if (!st) st = dpc_codegen_compile_plan(cg, plan, native, d);
  }
  if (!st)
    st = dpc_session_new(
        plan,
        &(dpc_session_opts){.training = training,
                            .native = native,
                            .device_kind = dpc_codegen_device_kind(x ? x->backend : NULL)},
        &s, d);
  for (uint32_t j = 0; j < n_feeds && !st; j++) {
    /* Data for values the pipeline removed (labels, in inference) is not needed. */
    if (dpc_graph_find(plan->g, feeds[j].name) == DPC_NONE) continue;
    st = dpc_session_set(s, feeds[j].name, &feeds[j].t, d);
  }
  if (!st) st = dpc_session_run(s, d);
  if (!st && (st = collect_outputs(plan, s, outs, n_outs, d))) {
    dpc_named_free(*outs, *n_outs);
    *outs = NULL;
    *n_outs = 0;
  }
  dpc_session_free(s);
  dpc_codegen_free(cg);
  free(native);
  dpc_plan_free(plan);
  dpc_graph_free(g);
  free(vals);
  return st;
}

bool dpc_driver_join_path(char *buf, size_t n, const char *dir, const char *name) {
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') len--;
  const char *sep = len == 1 && dir[0] == '/' ? "" : "/";
  int w = snprintf(buf, n, "%.*s%s%s", (int)len, dir, sep, name);
  return w >= 0 && (size_t)w < n;
}

bool dpc_driver_is_artifact(const char *path) {
  size_t n = strlen(path);
  if (n > 4 && !strcmp(path + n - 4, ".dpx")) return true;
  /* a model's name wins (a .graph holding junk gets the parser's message) */
  if ((n > 6 && !strcmp(path + n - 6, ".graph")) || dpc_onnx_is_model_path(path)) return false;
  /* otherwise by its content: a renamed artifact (model.so) is still machine code, or GPU
   * code's plain file */
  static const unsigned char elf_magic[4] = {0x7f, 'E', 'L', 'F'};
  FILE *f = fopen(path, "rb");
  unsigned char m[4] = {0};
  bool read = f && fread(m, 1, 4, f) == 4;
  if (f) fclose(f);
  return read && (!memcmp(m, elf_magic, 4) || !memcmp(m, "DPCA", 4));
}

dpc_status dpc_driver_describe_artifact(const char *path, char *out, size_t n, dpc_diag *d) {
  dpc_artifact *a = NULL;
  dpc_status st = dpc_artifact_open(path, &a, d);
  if (st) return st;
  static const char *const roles[] = {"infer", "train", "eval"};
  size_t k = (size_t)snprintf(out, n, "compiled artifact for %s, plans:", dpc_artifact_target(a));
  for (int i = 0; i < 3; i++)
    if (dpc_artifact_plan(a, roles[i], NULL) && k < n)
      k += (size_t)snprintf(out + k, n - k, " %s", roles[i]);
  dpc_artifact_close(a);
  return DPC_OK;
}

dpc_status dpc_driver_infer_artifact(const char *path, const dpc_named *feeds, uint32_t n_feeds,
                                     bool training, dpc_named **outs, uint32_t *n_outs,
                                     dpc_diag *d) {
  *outs = NULL;
  *n_outs = 0;
  dpc_artifact *a = NULL;
  dpc_session *s = NULL;
  dpc_status st = dpc_artifact_open(path, &a, d);
  const dpc_native_kernel *k = NULL;
  const dpc_plan *plan = st ? NULL : dpc_artifact_plan(a, "infer", &k);
  if (!st && !plan) st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s has no inference plan", path);
  if (!st)
    st = dpc_session_new(plan,
                         &(dpc_session_opts){.training = training,
                                             .native = k,
                                             .device_kind = dpc_artifact_device_kind(a)},
                         &s, d);
  for (uint32_t j = 0; j < n_feeds && !st; j++) {
    if (dpc_graph_find(plan->g, feeds[j].name) == DPC_NONE) continue; /* labels: not needed */
    st = dpc_session_set(s, feeds[j].name, &feeds[j].t, d);
  }
  if (!st) st = dpc_session_run(s, d);
  if (!st && (st = collect_outputs(plan, s, outs, n_outs, d))) {
    dpc_named_free(*outs, *n_outs);
    *outs = NULL;
    *n_outs = 0;
  }
  dpc_session_free(s);
  dpc_artifact_close(a);
  return st;
}

void dpc_driver_device_names(uint32_t n, dpc_device_names *out) {
  for (uint32_t k = 0; k < n && k < DPC_MAX_DEVICES; k++) {
    snprintf(out->name[k], sizeof out->name[k], "cpu:%u", k);
    out->ptr[k] = out->name[k];
  }
}

dpc_status dpc_driver_check_backend_device(const dpc_codegen_backend *be, dpc_diag *d) {
  const char *kind = dpc_codegen_device_kind(be);
  if (!kind) return DPC_OK;
  /* a GPU is only looked for: opening it (a context and a stream) is the session's */
  if (!strcmp(kind, "cuda")) return dpc_cuda_driver_check(0, d);
  char name[32];
  snprintf(name, sizeof name, "%s:0", kind);
  dpc_device *dev = NULL;
  dpc_status st = dpc_device_open(name, &dev, d);
  if (dev) dpc_device_close(dev);
  return st;
}

/* "cuda:0,cuda:1,...": how many, in order from cuda:0. */
static dpc_status gpu_list(const char *spec, uint32_t *count, dpc_diag *d) {
  *count = 0;
  for (const char *p = spec; *p;) {
    unsigned v = 0;
    int used = 0;
    if (sscanf(p, "cuda:%u%n", &v, &used) != 1 || (p[used] != ',' && p[used] != 0) || v != *count)
      return dpc_diag_fail(d, DPC_ERR_INVALID,
                           "%s: GPUs are given in order from cuda:0, as cuda:0,cuda:1,...", spec);
    if (++*count > DPC_MAX_DEVICES)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: at most %u devices", spec, DPC_MAX_DEVICES);
    p += used + (p[used] == ',');
  }
  return DPC_OK;
}

dpc_status dpc_driver_gpu_spec(const dpc_codegen_backend *be, const char *spec, char *cpu_spec,
                               size_t n, uint32_t *host_devices, dpc_diag *d) {
  cpu_spec[0] = 0;
  if (host_devices) *host_devices = 0;
  const char *kind = dpc_codegen_device_kind(be);
  bool cuda = kind && !strcmp(kind, "cuda");
  bool mixed = false;
  const char *gpus = dpc_driver_gpus(spec, &mixed);
  if (mixed && !host_devices)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s: the CPU beside GPUs runs in dpc train (the model or pipeline "
                         "strategy) only",
                         spec);
  if (!gpus) return DPC_OK;
  if (mixed) *host_devices = 1;
  if (!cuda)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s: GPU devices run the cuda backend's kernels, and the %s backend is "
                         "asked for",
                         gpus, be ? be->name : "llvm");
  uint32_t count = 0;
  dpc_status st = gpu_list(gpus, &count, d);
  if (st) return st;
  if ((st = dpc_cuda_driver_check((int)count - 1, d))) return st;
  snprintf(cpu_spec, n, "cpu:%u", count + (mixed ? 1 : 0));
  return DPC_OK;
}

const char *dpc_driver_gpus(const char *spec, bool *with_cpu) {
  bool cpu = spec && !strncmp(spec, "cpu,cuda", 8); /* the host's CPU, then the GPUs */
  if (with_cpu) *with_cpu = cpu;
  return cpu ? spec + 4 : spec && !strncmp(spec, "cuda", 4) ? spec : NULL;
}

dpc_status dpc_driver_count_devices(const char *spec, uint32_t *n, dpc_diag *d) {
  bool cpu = false;
  const char *gpus = dpc_driver_gpus(spec, &cpu);
  if (!gpus) return dpc_driver_count_cpu_devices(spec, n, d);
  dpc_status st = gpu_list(gpus, n, d);
  if (!st && cpu) ++*n; /* the host's CPU beside the GPUs */
  return st;
}

dpc_status dpc_driver_count_cpu_devices(const char *spec, uint32_t *n, dpc_diag *d) {
  if (dpc_driver_is_mpi(spec)) return dpc_driver_mpi_world(spec, n, d);
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_status st = dpc_topology_load(NULL, &t, d);
  if (!st) st = dpc_devices_parse(t, spec, &l, d);
  if (!st) *n = l.n;
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  return st;
}

/* A replica's graph for a share other than the first replica's: `bound` (bound at the first
 * replica's micro-batch) with its batch symbols (those bound to that micro-batch) rebound to
 * `rows`, then accumulated over K micro-batches. */
static dpc_status rebind_share(const dpc_graph *bound, int64_t rows, uint32_t K, dpc_graph **out,
                               dpc_diag *d) {
  *out = NULL;
  int64_t base = dpc_replica_rows(bound);
  dpc_graph *g = dpc_graph_clone(bound);
  int64_t *vals = calloc(bound->n_syms ? bound->n_syms : 1, sizeof *vals);
  dpc_status st = g && vals ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; !st && k < g->n_syms; k++)
    vals[k] = g->sym_vals[k] == base ? rows : g->sym_vals[k];
  if (!st) st = dpc_graph_bind(g, vals, d);
  free(vals);
  if (!st && K > 1) {
    dpc_graph *acc = NULL;
    st = dpc_accumulate_graph(g, K, &acc, d);
    dpc_graph_free(g);
    g = acc;
  }
  if (st) {
    dpc_graph_free(g);
    return st;
  }
  *out = g;
  return DPC_OK;
}

/* Replica r's weight: weights[r] when it is a positive number, else none (a device measured
 * as taking no time, or not at all, still gets the least share). */
static double weight_of(const double *weights, uint32_t r) {
  if (!weights) return 1;
  return weights[r] > 0 && weights[r] < 1e300 ? weights[r] : 0;
}

bool dpc_driver_split_batch(uint32_t n, uint32_t R, const double *weights, uint32_t K,
                            uint32_t *shares) {
  if (R == 0 || R > DPC_MAX_DEVICES || K == 0 || (uint64_t)R * K > n) return false;
  uint32_t units = n / K, left = units;
  double total = 0, rem[DPC_MAX_DEVICES];
  for (uint32_t r = 0; r < R; r++) total += weight_of(weights, r);
  for (uint32_t r = 0; r < R; r++) {
    double want = total > 0 ? units * (weight_of(weights, r) / total) : (double)units / R;
    uint32_t u = want < 1 ? 1 : want >= units ? units : (uint32_t)want;
    if (u > left - (R - 1 - r)) u = left - (R - 1 - r); /* leave one unit for each after */
    shares[r] = u, left -= u, rem[r] = want - u;
  }
  /* the leftovers, one unit at a time, to the largest remainders */
  while (left) {
    uint32_t best = 0;
    for (uint32_t r = 1; r < R; r++)
      if (rem[r] > rem[best]) best = r;
    shares[best]++, rem[best] -= 1, left--;
  }
  for (uint32_t r = 0; r < R; r++) shares[r] *= K;
  shares[R - 1] += n - units * K; /* what K does not divide: only a tail batch has it */
  return true;
}

dpc_status dpc_driver_parse_shares(const char *spec, uint32_t R, uint32_t batch, uint32_t *shares,
                                   bool *even, bool *auto_, dpc_diag *d) {
  *even = *auto_ = false;
  if (!spec || !strcmp(spec, "even")) {
    *even = true;
    return DPC_OK;
  }
  if (!strcmp(spec, "auto")) {
    *auto_ = true;
    return DPC_OK;
  }
  const char *p = spec;
  uint64_t sum = 0;
  for (uint32_t r = 0; r < R; r++) {
    char *end = NULL;
    unsigned long v = strtoul(p, &end, 10);
    if (end == p || v == 0 || v > UINT32_MAX || (r + 1 < R ? *end != ',' : *end != '\0'))
      return dpc_diag_fail(d, DPC_ERR_INVALID,
                           "the shares '%s': give even, auto, or %u positive sample counts "
                           "separated by commas, one per data-parallel replica",
                           spec, R);
    shares[r] = (uint32_t)v, sum += v, p = end + 1;
  }
  if (sum != batch)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the list of shares '%s' adds up to %llu samples, not the batch of %u",
                         spec, (unsigned long long)sum, batch);
  return DPC_OK;
}

dpc_status dpc_driver_plan(const dpc_graph *bound, int64_t batch, const dpc_driver_strategy *s,
                           bool training, dpc_plan **out, dpc_diag *d) {
  uint32_t replicas = s->replicas ? s->replicas : 1, mp = s->mp, accumulate = s->accumulate;
  dpc_pipeline_schedule schedule = s->schedule;
  if (mp < 1) mp = 1;
  if ((uint64_t)replicas * mp > DPC_MAX_DEVICES)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "a plan has at most %u devices, not %llu",
                         DPC_MAX_DEVICES, (unsigned long long)replicas * mp);
  dpc_device_names dn;
  dpc_driver_device_names(replicas * mp, &dn);
  dpc_graph *acc = NULL;
  dpc_status st = DPC_OK;
  const dpc_graph *unacc = bound;
  uint32_t K = training && accumulate > 1 ? accumulate : 1;
  if (training && accumulate > 1) {
    st = dpc_accumulate_graph(bound, accumulate, &acc, d);
    if (st) return st;
    bound = acc;
  }
  if (replicas < 2) {
    st = dpc_plan_devices(bound, dn.ptr, mp, training, out, d);
  } else {
    const dpc_graph **reps = calloc(replicas, sizeof *reps);
    dpc_graph **own = calloc(replicas, sizeof *own);
    if (!reps || !own) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    for (uint32_t r = 0; !st && r < replicas; r++) {
      reps[r] = bound;
      if (s->shares && s->shares[r] != s->shares[0])
        st = rebind_share(unacc, s->shares[r] / K, K, &own[r], d);
      if (!st && own[r]) reps[r] = own[r];
    }
    dpc_graph *dp = NULL;
    if (!st) st = dpc_data_parallel_graph(reps, batch, replicas, mp, dn.ptr, !s->local, &dp, d);
    if (!st) st = dpc_plan_devices(dp, dn.ptr, replicas * mp, true, out, d);
    dpc_graph_free(dp);
    for (uint32_t r = 0; own && r < replicas; r++) dpc_graph_free(own[r]);
    free(own);
    free((void *)reps);
  }
  bool micro = acc != NULL;
  dpc_graph_free(acc);
  if (!st && micro && schedule != DPC_SCHEDULE_NONE) {
    uint32_t *stage = calloc((*out)->n_devs, sizeof *stage);
    st = stage && dpc_pipeline_stages(*out, mp, stage)
             ? dpc_pipeline_order(*out, mp, accumulate, schedule, stage, d)
             : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    free(stage);
  }
  if (!st) dpc_plan_defer_unread_collectives(*out);
  /* activations (every micro-batch's, in a micro-batched step) live only as long as each
   * device's order needs them: values whose lifetimes do not meet share bytes */
  if (!st) st = dpc_plan_share_activations(*out, d);
  /* a plan that could hang is an error now, not a stall at run time */
  if (!st) st = dpc_plan_check_comm(*out, d);
  if (st && *out) {
    dpc_plan_free(*out);
    *out = NULL;
  }
  return st;
}

dpc_status dpc_driver_plan_share(dpc_graph *g, int64_t batch, uint32_t share,
                                 const dpc_driver_strategy *s, bool training, dpc_plan **out,
                                 dpc_diag *d) {
  uint32_t K = training && s->accumulate > 1 ? s->accumulate : 1;
  if (share % K)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%u accumulated micro-batches do not divide a share of %u samples", K,
                         share);
  int64_t *vals = calloc(g->n_syms ? g->n_syms : 1, sizeof *vals);
  if (!vals) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; k < g->n_syms; k++) vals[k] = share / K;
  dpc_status st = dpc_graph_bind(g, vals, d);
  free(vals);
  dpc_driver_strategy sk = *s;
  sk.accumulate = K;
  return st ? st : dpc_driver_plan(g, batch, &sk, training, out, d);
}

/* The plan of a training step of `placed` at `batch` on n devices: each device's bytes, and
 * the simulator's step time at the devices' speeds and its busiest device's compute. */
static dpc_status plan_step(const dpc_graph *placed, int64_t batch, uint32_t n,
                            const dpc_device_speed *speed, const dpc_driver_place_opts *o,
                            double *bytes, double *step, double *busiest, dpc_diag *d) {
  dpc_graph *g = dpc_graph_clone(placed);
  dpc_status st =
      g ? dpc_driver_default_horizon(g, d) : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_pass_opts po = {.training = true, .fuse = dpc_cpu_fusion()};
  if (!st) st = dpc_passes_run(g, &po, d);
  uint32_t M = o->microbatches > 1 && batch % o->microbatches == 0 ? o->microbatches : 1;
  dpc_plan *p = NULL;
  dpc_driver_strategy ds = {1, n, M, o->schedule, false};
  if (!st) st = dpc_driver_plan_share(g, batch, (uint32_t)batch, &ds, true, &p, d);
  for (uint32_t k = 0; !st && k < n; k++) bytes[k] = k < p->n_devs ? (double)p->devs[k].bytes : 0;
  dpc_node_cost *c = st ? NULL : calloc(p->g->n_nodes ? p->g->n_nodes : 1, sizeof *c);
  dpc_sim_device *sim = st ? NULL : calloc(p->n_devs, sizeof *sim);
  if (!st && (!c || !sim)) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) st = dpc_cost_graph(p->g, c, d);
  if (!st) *step = dpc_simulate_step(p, c, speed, sim);
  *busiest = 0;
  for (uint32_t k = 0; !st && k < p->n_devs; k++)
    if (sim[k].compute_s > *busiest) *busiest = sim[k].compute_s;
  free(c), free(sim);
  dpc_plan_free(p);
  dpc_graph_free(g);
  return st;
}

typedef struct score_ctx {
  int64_t batch;
  uint32_t n;
  const dpc_device_speed *speed;
  const dpc_driver_place_opts *o;
  double *bytes;
} score_ctx;

/* Device k's memory limit under o: its own, else the one for all (0: none). */
static uint64_t limit_of(const dpc_driver_place_opts *o, uint32_t k) {
  return o->mem_limits ? o->mem_limits[k] : o->mem_limit;
}

/* A candidate's score: the predicted step in seconds, and its busiest device's compute; one
 * that does not fit the memory limit scores above any that fits, by how much it is over. */
static double score_placement(void *ctx, const dpc_graph *placed, double *busiest, dpc_diag *d) {
  score_ctx *x = ctx;
  double step = 0, over = 0;
  if (plan_step(placed, x->batch, x->n, x->speed, x->o, x->bytes, &step, busiest, d)) return -1;
  double least = 0; /* the smallest limit, to scale how far over */
  for (uint32_t k = 0; k < x->n; k++) {
    uint64_t limit = limit_of(x->o, k);
    if (limit && x->bytes[k] > (double)limit) over += x->bytes[k] - (double)limit;
    if (limit && (!least || (double)limit < least)) least = (double)limit;
  }
  if (over > 0) *busiest = 0;
  return over > 0 ? 1e6 + over / least : step;
}

enum { MEMORY_ROUNDS = 5 };

dpc_status dpc_driver_place_on(dpc_graph *model, int64_t batch, uint32_t n,
                               const dpc_device_speed *speed, const dpc_driver_place_opts *o,
                               dpc_place_report *report, dpc_diag *d) {
  static const dpc_driver_place_opts none = {0};
  if (!o) o = &none;
  bool limited = false;
  for (uint32_t k = 0; k < n && k < DPC_MAX_DEVICES; k++) limited = limited || limit_of(o, k);
  if (n > DPC_MAX_DEVICES) /* the device names */
    return dpc_diag_fail(d, DPC_ERR_INVALID, "placement takes at most %u devices, not %u",
                         DPC_MAX_DEVICES, n);
  dpc_device_names dn;
  dpc_driver_device_names(n, &dn);
  dpc_place_report own, *rep = report ? report : &own;
  double *budget = calloc(n, sizeof *budget), *bytes = calloc(n, sizeof *bytes);
  double *room = calloc(n, sizeof *room), scale = 1;
  dpc_status st =
      budget && bytes && room ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; !st && k < n; k++) budget[k] = room[k] = (double)limit_of(o, k);
  /* Each candidate placement is planned and simulated; the fastest that fits wins. The
   * placement's memory estimate (outputs, params four times) is not the plan's (buffers shared,
   * fusion, workspace), so the plan measures it and over-full devices get less next round. */
  for (uint32_t round = 0; !st; round++) {
    dpc_graph *g = dpc_graph_clone(model);
    if (!g) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    score_ctx x = {batch, n, speed, o, bytes};
    dpc_place_opts po = {speed, limited ? budget : NULL, score_placement, &x};
    if (!st) st = dpc_place_metis(g, batch, dn.ptr, n, &po, rep, d);
    bool fits = true;
    double step, busiest;
    if (!st && limited && round + 1 < MEMORY_ROUNDS) {
      st = plan_step(g, batch, n, speed, o, bytes, &step, &busiest, d);
      /* the budget in the estimate's terms: the limit over the plan's bytes per estimated
       * byte, less what the plan put over the limit on a device last time */
      double est_all = 0, bytes_all = 0;
      for (uint32_t k = 0; !st && k < n; k++) est_all += rep->memory[k], bytes_all += bytes[k];
      if (est_all > 0 && bytes_all / est_all > scale) scale = bytes_all / est_all;
      for (uint32_t k = 0; !st && k < n; k++) {
        double lim = (double)limit_of(o, k);
        if (lim > 0 && bytes[k] > lim) fits = false, room[k] -= (bytes[k] - lim) * 1.1;
        budget[k] = room[k] > 0 ? room[k] / scale : 1;
      }
    }
    if (!st && (fits || round + 1 >= MEMORY_ROUNDS))
      for (uint32_t i = 0; !st && i < model->n_nodes; i++) { /* string ids are per graph */
        const char *dev = dpc_graph_str(g, g->nodes[i].device);
        model->nodes[i].device = dpc_graph_intern(model, dev, strlen(dev));
        if (model->nodes[i].device == DPC_NONE)
          st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
      }
    dpc_graph_free(g);
    if (fits || round + 1 >= MEMORY_ROUNDS) break;
  }
  free(budget), free(bytes), free(room);
  return st;
}

/* A copy's cost between the host and a GPU beyond its bytes: not measured, roughly a copy's
 * launch. */
#define BUS_S 10e-6

/* This machine's CPU devices of spec (n of them), as its calibration has them. */
static dpc_status cpu_speeds(const char *spec, uint32_t n, const dpc_driver_place_opts *o,
                             dpc_device_speed *speed, dpc_diag *d) {
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_calibration cal = {0};
  dpc_status st = dpc_topology_load(NULL, &t, d);
  if (!st) st = dpc_devices_parse(t, spec, &l, d);
  if (!st && l.n != n)
    st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s makes %u devices, not %u", spec, l.n, n);
  if (!st) st = dpc_calibrate(t, &l, &(dpc_calibrate_opts){0}, &cal, d);
  for (uint32_t k = 0; !st && k < n; k++) {
    speed[k] = dpc_calibration_speed(&cal, &l, k, o ? o->profile : NULL);
    if (o && o->link_gbs > 0)
      speed[k].link_gbs = o->link_gbs, speed[k].link_latency_s = o->link_latency_s;
  }
  dpc_calibration_free(&cal);
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  return st;
}

/* Over GPUs: their measured figures, after the host's CPU devices (o->host_devices of them, as
 * the calibration has them) in a mixed plan, whose crossings between the two go over the bus
 * measured into cuda:0. DPC_ERR_UNSUPPORTED (said in o->note) when the GPUs are not measured. */
static dpc_status gpu_speeds(const char *spec, uint32_t n, const dpc_driver_place_opts *o,
                             dpc_device_speed *speed, dpc_diag *d) {
  uint32_t h = o->host_devices < n ? o->host_devices : 0;
  char what[320] = "";
  double bus = 0;
  dpc_device_speed *cpu = h ? calloc(n, sizeof *cpu) : NULL;
  dpc_status st = h && !cpu ? dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory") : DPC_OK;
  if (!st) st = dpc_driver_gpu_speeds(n - h, speed + h, h ? &bus : NULL, what, sizeof what, d);
  if (!st && h) st = cpu_speeds(spec, n, o, cpu, d);
  for (uint32_t k = 0; !st && h && k < n; k++) {
    if (k < h) speed[k] = cpu[k], speed[k].link_gbs = bus, speed[k].link_latency_s = BUS_S;
    speed[k].host = k < h, speed[k].bus_gbs = bus, speed[k].bus_latency_s = BUS_S;
  }
  free(cpu);
  if (o->note && o->note_len && st)
    snprintf(o->note, o->note_len, "placing with this machine's CPU figures: %s",
             d->msg ? d->msg : "the GPUs are not measured");
  else if (o->note && o->note_len && h)
    snprintf(o->note, o->note_len,
             "placing with the CPU's calibration beside %s; %.1f GB/s between the CPU and cuda:0",
             what, bus);
  else if (o->note && o->note_len)
    snprintf(o->note, o->note_len, "placing with %s", what);
  return st;
}

dpc_status dpc_driver_place(dpc_graph *model, int64_t batch, const char *spec, uint32_t n,
                            const dpc_driver_place_opts *o, bool *placed_auto,
                            dpc_place_report *report, dpc_diag *d) {
  *placed_auto = false;
  if (report) memset(report, 0, sizeof *report);
  for (uint32_t i = 0; i < model->n_nodes; i++)
    if (model->nodes[i].device != DPC_NONE) return DPC_OK; /* the model's own placement */
  dpc_device_speed *speed = calloc(n ? n : 1, sizeof *speed);
  if (!speed) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = o && o->gpus ? gpu_speeds(spec, n, o, speed, d) : DPC_ERR_UNSUPPORTED;
  if (st == DPC_ERR_UNSUPPORTED) { /* no GPUs, or not measured (said in the note) */
    if (o && o->gpus) dpc_diag_clear(d);
    st = cpu_speeds(spec, n, o, speed, d);
  }
  if (!st) st = dpc_driver_place_on(model, batch, n, speed, o, report, d);
  *placed_auto = !st;
  free(speed);
  return st;
}

bool dpc_driver_parse_size(const char *s, uint64_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v > 0)) return false;
  double mult = 1;
  if (*end == 'K' || *end == 'k')
    mult = 1024.0, end++;
  else if (*end == 'M' || *end == 'm')
    mult = 1024.0 * 1024, end++;
  else if (*end == 'G' || *end == 'g')
    mult = 1024.0 * 1024 * 1024, end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end) return false;
  *out = (uint64_t)(v * mult);
  return *out > 0;
}

dpc_status dpc_driver_check_memory(const dpc_plan *p, uint64_t limit, dpc_diag *d) {
  if (!limit) return DPC_OK;
  uint64_t total = 0, worst = 0;
  uint32_t at = 0;
  for (uint32_t i = 0; i < p->n_devs; i++) {
    total += p->devs[i].bytes;
    if (p->devs[i].bytes > worst) worst = p->devs[i].bytes, at = i;
  }
  double mib = 1024.0 * 1024;
  if (total > limit * (uint64_t)p->n_devs)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the plan needs %.1f MiB in all, but %u device%s of %.1f MiB hold%s only "
                         "%.1f MiB: give more devices or more memory",
                         (double)total / mib, p->n_devs, p->n_devs == 1 ? "" : "s",
                         (double)limit / mib, p->n_devs == 1 ? "s" : "",
                         (double)limit * p->n_devs / mib);
  if (worst > limit)
    return dpc_diag_fail(
        d, DPC_ERR_INVALID,
        "%s needs %.1f MiB, more than the device memory of %.1f MiB (the plan needs "
        "%.1f MiB in all over %u devices): the placement does not fit",
        p->devs[at].name, (double)worst / mib, (double)limit / mib, (double)total / mib, p->n_devs);
  return DPC_OK;
}

dpc_status dpc_driver_onnx_inputs(const char *dir, dpc_named **out, uint32_t *n, dpc_diag *d) {
  *n = 0;
  *out = NULL;
  uint32_t cap = 0;
  for (uint32_t k = 0;; k++) {
    char path[4200];
    char file[32];
    snprintf(file, sizeof file, "input_%u.pb", k);
    if (!dpc_driver_join_path(path, sizeof path, dir, file))
      return dpc_diag_fail(d, DPC_ERR_INVALID, "'%s': the path is too long", dir);
    struct stat sb;
    if (stat(path, &sb) || !S_ISREG(sb.st_mode)) break;
    if (k == cap) {
      cap = cap ? 2 * cap : 8;
      dpc_named *v = realloc(*out, cap * sizeof *v);
      if (!v) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
      *out = v;
    }
    dpc_named *f = &(*out)[k];
    memset(f, 0, sizeof *f);
    *n = k + 1;
    dpc_status st = dpc_onnx_tensor_read(path, &f->t, &f->name, d);
    if (st) return st;
  }
  return DPC_OK;
}

dpc_status dpc_driver_onnx_name_feeds(const dpc_graph *g, dpc_named *feeds, uint32_t n,
                                      dpc_diag *d) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < g->n_nodes && k < n; i++) {
    if (g->nodes[i].op != DPC_OP_INPUT) continue;
    char label[256];
    dpc_graph_value_label(g, g->nodes[i].out, label, sizeof label);
    free(feeds[k].name);
    if (!(feeds[k++].name = dpc_strdup(label)))
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  if (k < n)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%u input files for a model with %u inputs", n, k);
  return DPC_OK;
}

dpc_status dpc_driver_load_known(const char *path, const dpc_named *known, uint32_t n,
                                 dpc_graph **out, dpc_diag *d) {
  *out = NULL;
  if (dpc_driver_is_artifact(path))
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s is a compiled artifact (machine code from dpc compile), not a model: "
                         "dpc run, dpc train and dpc check take it; the other commands need the "
                         ".graph or .onnx it was compiled from",
                         path);
  dpc_status st;
  if (!dpc_onnx_is_model_path(path)) {
    st = dpc_parse_file(path, out, d);
  } else {
    dpc_tensor *ts = n ? calloc(n, sizeof *ts) : NULL;
    if (n && !ts) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) ts[i] = known[i].t;
    dpc_onnx_opts o = {ts, n};
    st = dpc_onnx_import_file_opts(path, &o, out, d);
    free(ts);
  }
  if (!st && (st = dpc_verify(*out, d))) {
    dpc_graph_free(*out);
    *out = NULL;
  }
  return st;
}

dpc_status dpc_driver_attach_loss(dpc_graph *g, const char *loss, dpc_diag *d) {
  bool sce = !strcmp(loss, "softmax_cross_entropy");
  if (!sce && strcmp(loss, "mse"))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "the loss '%s' is not softmax_cross_entropy or mse",
                         loss);
  if (g->obj.loss != DPC_NONE)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the model has its own objective ('minimize'); an attached loss is for "
                         "models without one");
  if (!g->n_outputs) return dpc_diag_fail(d, DPC_ERR_INVALID, "the model has no output");
  if (dpc_graph_find(g, "labels") != DPC_NONE)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the model already has a value named 'labels', the name an attached loss "
                         "gives its new input");
  uint32_t out = g->outputs[0];
  const dpc_value *ov = &g->values[out];
  dpc_shape ls = ov->shape;
  if (sce) {
    if (ov->shape.rank != 2)
      return dpc_diag_fail(d, DPC_ERR_SHAPE,
                           "softmax_cross_entropy needs the first output to be [batch, classes]");
    ls.rank = 1;
  }
  uint32_t mark = dpc_graph_attr_mark(g), labels, node;
  dpc_status st;
  if ((st = dpc_graph_attr_dtype(g, "dtype", sce ? DPC_I64 : ov->dtype)) ||
      (st = dpc_graph_attr_shape(g, "shape", ls.d, ls.rank)))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_node_desc in = {.op = DPC_OP_INPUT, .attr_mark = mark, .device = DPC_NONE};
  if ((st = dpc_graph_add_node(g, &in, &node, d))) return st;
  labels = g->nodes[node].out;
  if ((st = dpc_graph_set_name(g, labels, "labels", 6, d))) return st;
  uint32_t ins[2] = {out, labels};
  dpc_node_desc ln = {.op = sce ? DPC_OP_SOFTMAX_CROSS_ENTROPY : DPC_OP_MSE,
                      .in = ins,
                      .n_in = 2,
                      .attr_mark = dpc_graph_attr_mark(g),
                      .device = DPC_NONE};
  if ((st = dpc_graph_add_node(g, &ln, &node, d))) return st;
  if ((st = dpc_graph_set_name(g, g->nodes[node].out, "loss", 4, d))) return st;
  return dpc_graph_set_objective(g, g->nodes[node].out, "sgd", dpc_graph_attr_mark(g), (dpc_loc){0},
                                 d);
}
