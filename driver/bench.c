/*
 * bench.c — timing a model's step (see bench.h).
 */
#include "driver/bench.h"

#include "partitioner/cost.h"
#include "driver/calibrate.h"

#include "partitioner/partitioner.h"
#include "runtime/rng.h"
#include "runtime/session.h"
#include "driver/train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Classes a label input indexes: the width of the logits it meets in a cross-entropy. */
static int64_t classes_of(const dpc_graph *g, uint32_t labels) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    if (n->op == DPC_OP_SOFTMAX_CROSS_ENTROPY && g->ids[n->in + 1] == labels) {
      const dpc_shape *s = &g->values[g->ids[n->in]].shape;
      return s->rank ? s->d[s->rank - 1] : 1;
    }
  }
  return 1;
}

/* Uniform data for float inputs, valid classes for integer ones. */
static void fill_inputs(const dpc_graph *g, dpc_session *s) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op != DPC_OP_INPUT) continue;
    uint32_t v = g->nodes[i].out;
    dpc_tensor t = dpc_session_input(s, v);
    int64_t n = dpc_tensor_numel(&t), c = classes_of(g, v);
    for (int64_t k = 0; k < n; k++) {
      if (dpc_dtype_is_float(t.dtype))
        dpc_tstore(&t, k, dpc_rng_uniform(1234 + v, (uint64_t)k));
      else
        dpc_tstore_i64(&t, k, (int64_t)(dpc_rng_bits(99 + v, (uint64_t)k) % (uint64_t)c));
    }
  }
}

/* The ops of a kernel step, its fusion group's members first: "conv2d + add + clip". */
static void ops_of(const dpc_graph *g, uint32_t node, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (uint32_t i = 0; i < node && k < n; i++)
    if (g->nodes[i].fused == node)
      k += (size_t)snprintf(out + k, n - k, "%s + ", dpc_op_name(g->nodes[i].op));
  if (k < n) snprintf(out + k, n - k, "%s", dpc_op_name(g->nodes[node].op));
}

/* What a profiled step computes: the value it writes and, for a kernel, its ops ("copy" for a
 * copy), and that value's type. */
static void step_what(const dpc_graph *g, const dpc_step *ps, char *lbl, size_t nl, char *ops,
                      size_t no, char *type, size_t nt) {
  uint32_t v = ps->kind == DPC_STEP_COPY ? ps->dst : g->nodes[ps->node].out;
  dpc_graph_value_label(g, v, lbl, nl);
  if (ps->kind == DPC_STEP_COPY)
    snprintf(ops, no, "copy");
  else
    ops_of(g, ps->node, ops, no);
  dpc_graph_format_type(g, g->values[v].dtype, &g->values[v].shape, type, nt);
}

/* The calibrated speed of the cores `threads` kernels run on (0: all of them): device 0 of
 * cpu:(cores / threads). */
static dpc_status speed_of(uint32_t threads, const char *devices, dpc_device_speed *sp,
                           dpc_diag *d) {
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_calibration cal = {0};
  dpc_status st = dpc_topology_load(NULL, &t, d);
  if (!st) {
    uint32_t per = threads && threads < t->n_cores ? threads : t->n_cores;
    char spec[32];
    snprintf(spec, sizeof spec, "cpu:%u", t->n_cores / per);
    st = dpc_devices_parse(t, devices ? devices : spec, &l, d);
  }
  if (!st) st = dpc_calibrate(t, &l, &(dpc_calibrate_opts){0}, &cal, d);
  if (!st) *sp = dpc_calibration_speed(&cal, &l, 0, NULL);
  dpc_calibration_free(&cal);
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  return st;
}

/* Run `steps` more steps with every step timed; keep the slowest kernels, and with a
 * profile_path write every one (device 0's, in the order they run). */
static dpc_status profile(dpc_session *s, const dpc_plan *p, const dpc_bench_opts *o,
                          dpc_bench_result *r, dpc_diag *d) {
  uint32_t steps = o->steps;
  dpc_cost_profile *collect = o->collect;
  dpc_device_speed sp;
  FILE *out = NULL;
  dpc_node_cost *cost = calloc(p->g->n_nodes ? p->g->n_nodes : 1, sizeof *cost);
  dpc_status st = cost ? speed_of(o->threads, o->devices, &sp, d)
                       : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) st = dpc_cost_graph(p->g, cost, d);
  if (!st && o->profile_path && !(out = fopen(o->profile_path, "w")))
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot write the profile to '%s': %s", o->profile_path,
                       strerror(errno));
  if (out) fprintf(out, "step\tmeasured_ms\tpredicted_ms\tvalue\ttype\tops\n");
  if (st) {
    free(cost);
    return st;
  }
  r->gflops = sp.gflops;
  r->mem_gbs = sp.mem_gbs / 2; /* as dpc devices shows it: the copy rate */
  st = dpc_session_profile(s, true, d);
  for (uint32_t i = 0; !st && i < steps; i++) st = dpc_session_run(s, d);
  if (st) {
    if (out) fclose(out);
    free(cost);
    return st;
  }
  const double *sec = dpc_session_step_seconds(s, 0);
  const dpc_plan_device *pd = &p->devs[0];
  r->n_top = r->n_kernels = 0;
  r->profiled_ms = r->predicted_ms = 0;
  for (uint32_t j = 0; j < pd->n_steps; j++) {
    double ms = sec[j] * 1e3 / steps, pred = 0;
    dpc_step_kind kind = pd->steps[j].kind;
    r->profiled_ms += ms;
    /* a pipeline's sends, receives and event waits are its waiting, not its work: in the
     * step's time, not among its kernels */
    if (kind != DPC_STEP_KERNEL && kind != DPC_STEP_COPY) continue;
    if (kind == DPC_STEP_KERNEL)
      pred = dpc_cost_kernel_seconds(p->g, cost, pd->steps[j].node, &sp) * 1e3;
    else /* a copy reads and writes its bytes */
      pred = 2.0 * (double)p->slots[pd->steps[j].dst].bytes / (sp.mem_gbs * 1e9) * 1e3;
    r->predicted_ms += pred;
    if (collect && pd->steps[j].kind == DPC_STEP_KERNEL &&
        dpc_cost_profile_add(collect, p->g, pd->steps[j].node, ms / 1e3, pred / 1e3)) {
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
      break;
    }
    if (pd->steps[j].kind == DPC_STEP_KERNEL && p->g->nodes[pd->steps[j].node].fused != DPC_NONE)
      continue;
    r->n_kernels++;
    char lbl[96], ops[160], type[96];
    step_what(p->g, &pd->steps[j], lbl, sizeof lbl, ops, sizeof ops, type, sizeof type);
    if (out) fprintf(out, "%u\t%.6f\t%.6f\t%s\t%s\t%s\n", j, ms, pred, lbl, type, ops);
    /* insertion into the sorted top list */
    uint32_t at = r->n_top;
    while (at > 0 && r->top[at - 1].ms < ms) at--;
    if (at >= DPC_BENCH_TOP) continue;
    uint32_t last = r->n_top < DPC_BENCH_TOP ? r->n_top : DPC_BENCH_TOP - 1;
    memmove(&r->top[at + 1], &r->top[at], (last - at) * sizeof *r->top);
    if (r->n_top < DPC_BENCH_TOP) r->n_top++;
    dpc_bench_kernel *e = &r->top[at];
    e->ms = ms;
    e->predicted_ms = pred;
    if (pd->steps[j].kind == DPC_STEP_COPY)
      snprintf(e->what, sizeof e->what, "copy into %s", lbl);
    else
      snprintf(e->what, sizeof e->what, "%s: %s", lbl, ops);
  }
  free(cost);
  if (out && (ferror(out) | fclose(out)) && !st)
    st = dpc_diag_fail(d, DPC_ERR_IO, "writing the profile to '%s' failed", o->profile_path);
  dpc_status off = dpc_session_profile(s, false, d);
  return st ? st : off;
}

dpc_status dpc_bench(const dpc_graph *src, const dpc_bench_opts *o, dpc_bench_result *r,
                     dpc_diag *d) {
  memset(r, 0, sizeof *r);
  if (!o->inference && src->obj.loss == DPC_NONE)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the model has nothing to minimize: bench its forward pass with "
                         "--inference");
  if (o->batch < 1 || o->steps < 1)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the batch size and the number of steps must be at least 1");
  /* GPUs: their host threads are planned as cpu:N is, and the session opens cuda:0..N-1 */
  char cpu_spec[32];
  dpc_status gst =
      dpc_driver_gpu_spec(o->exec.backend, o->devices, cpu_spec, sizeof cpu_spec, NULL, d);
  if (gst) return gst;
  if (cpu_spec[0]) {
    dpc_bench_opts on_gpus = *o;
    on_gpus.devices = cpu_spec;
    return dpc_bench(src, &on_gpus, r, d);
  }
  if (o->shares_spec && strcmp(o->shares_spec, "even")) {
    uint32_t D = 1, shares[DPC_BENCH_DEVICES];
    bool even = true, measure = false;
    dpc_status st = o->devices ? dpc_driver_count_devices(o->devices, &D, d) : DPC_OK;
    if (!st && (D < 2 || D > DPC_BENCH_DEVICES || o->model || o->inference))
      st = dpc_diag_fail(
          d, DPC_ERR_INVALID,
          "a split of the batch by shares sizes data-parallel replicas: training on 2 "
          "to %d devices with the data strategy",
          DPC_BENCH_DEVICES);
    if (!st) st = dpc_driver_parse_shares(o->shares_spec, D, o->batch, shares, &even, &measure, d);
    if (!st && measure) st = dpc_bench_measure_shares(src, o, D, shares, d);
    if (st) return st;
    dpc_bench_opts m = *o;
    m.shares_spec = NULL, m.shares = D > 1 && !even ? shares : NULL;
    return dpc_bench(src, &m, r, d);
  }
  double t0 = dpc_now_s();
  dpc_graph *g = dpc_graph_clone(src);
  double *times = calloc(o->steps, sizeof *times);
  dpc_plan *plan = NULL;
  dpc_codegen *cg = NULL;
  dpc_native_kernel *native = NULL;
  dpc_session *s = NULL;
  dpc_status st = g && times ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_pass_opts po = {.training = !o->inference, .fuse = dpc_codegen_fusion(o->exec.backend)};
  if (!st && po.training) st = dpc_driver_default_horizon(g, d);
  uint32_t D = 1;
  if (!st && o->devices) st = dpc_driver_count_devices(o->devices, &D, d);
  /* model parallel: replicas of mp devices each (hybrid, or pipelines side by side), the model
   * placed over one replica's devices at its share of the batch, as dpc train and dpc plan do */
  uint32_t mp = o->model ? (o->mp > 1 && o->mp < D ? o->mp : D) : 1, R = D / mp;
  if (!st && o->model && (D % mp || o->batch % R))
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: %u replicas of %u devices do not split the %u devices or a batch of %u",
                       o->devices, R, mp, D, o->batch);
  if (!st && o->model && o->devices) {
    bool placed;
    char rspec[32];
    snprintf(rspec, sizeof rspec, "cpu:%u", mp);
    dpc_driver_place_opts pl = {0, NULL, o->pipeline ? o->accumulate : 1, o->pipeline};
    const char *kind = dpc_codegen_device_kind(o->exec.backend);
    pl.gpus = kind && !strcmp(kind, "cuda"); /* the GPUs measured, as dpc train places */
    st = dpc_driver_place(g, o->batch / R, R > 1 ? rspec : o->devices, mp, &pl, &placed, NULL, d);
  }
  if (!st) st = dpc_passes_run(g, &po, d);
  bool dp = D > 1 && !o->model;
  if (!st && dp && !po.training)
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: data parallel is for training", o->devices);
  if (!st && dp && !o->shares && o->batch % D)
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: a batch of %u does not split evenly over %u devices (give it uneven "
                       "shares)",
                       o->devices, o->batch, D);
  dpc_driver_strategy ds = {o->model ? R : D,
                            o->model ? mp : 1,
                            o->accumulate,
                            o->model ? o->pipeline : DPC_SCHEDULE_NONE,
                            false,
                            dp ? o->shares : NULL};
  uint32_t first = o->model ? o->batch / R : dp && o->shares ? o->shares[0] : o->batch / D;
  if (!st) st = dpc_driver_plan_share(g, o->batch, first, &ds, po.training, &plan, d);
  if (!st && dpc_codegen_compiles(o->exec.backend)) {
    native = calloc(plan->g->n_nodes ? plan->g->n_nodes : 1, sizeof *native);
    st = !native ? dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory")
                 : dpc_driver_check_backend_device(o->exec.backend, d);
    if (!st) st = dpc_codegen_new(o->exec.backend, &o->exec.cpu, &cg, d);
    if (!st) st = dpc_codegen_compile_plan(cg, plan, native, d);
  }
  dpc_session_opts so = {.training = po.training,
                         .native = native,
                         .threads = o->threads,
                         .devices = o->devices,
                         .device_kind = dpc_codegen_device_kind(o->exec.backend)};
  if (!st) st = dpc_session_new(plan, &so, &s, d);
  if (!st) {
    r->compile_s = dpc_now_s() - t0;
    if (cg) {
      dpc_codegen_stats cs;
      dpc_codegen_get_stats(cg, &cs);
      r->jit_s = cs.seconds;
      r->kernels = cs.compiled;
      r->disk_hits = cs.from_disk;
      snprintf(r->target, sizeof r->target, "%s", dpc_codegen_target(cg));
    } else {
      snprintf(r->target, sizeof r->target, "reference kernels");
    }
    fill_inputs(plan->g, s);
  }
  /* a plan has at most DPC_MAX_DEVICES devices (dpc_driver_plan); this held 16, and
   * dpc_session_busy wrote one entry per device past them */
  double busy[DPC_MAX_DEVICES];
  if (!st && plan->n_devs > DPC_MAX_DEVICES)
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "a plan has at most %u devices, not %u", DPC_MAX_DEVICES,
                       plan->n_devs);
  for (uint32_t i = 0; !st && i < o->warmup + o->steps; i++) {
    if (i == o->warmup) dpc_session_busy(s, busy, true);
    double a = dpc_now_s();
    st = dpc_session_run(s, d);
    if (i >= o->warmup) times[i - o->warmup] = dpc_now_s() - a;
  }
  if (!st) {
    dpc_session_busy(s, busy, false);
    r->n_devices = plan->n_devs;
    for (uint32_t k = 0; k < plan->n_devs; k++) r->busy_ms[k] = busy[k] * 1e3 / o->steps;
  }
  for (uint32_t k = 0; dp && k < D && k < DPC_MAX_DEVICES; k++)
    r->shares[k] = o->shares ? o->shares[k] : o->batch / D, r->n_shares = k + 1;
  if (!st && o->profile) st = profile(s, plan, o, r, d);
  if (!st) {
    qsort(times, o->steps, sizeof *times, cmp_double);
    r->median_s = times[o->steps / 2];
    r->min_s = times[0];
    r->p90_s = times[(o->steps * 9) / 10 < o->steps ? (o->steps * 9) / 10 : o->steps - 1];
    r->samples_per_s = r->median_s > 0 ? o->batch / r->median_s : 0;
  }
  dpc_session_free(s);
  dpc_codegen_free(cg);
  free(native);
  dpc_plan_free(plan);
  free(times);
  dpc_graph_free(g);
  return st;
}

dpc_status dpc_bench_measure_shares(const dpc_graph *g, const dpc_bench_opts *o, uint32_t R,
                                    uint32_t *shares, dpc_diag *d) {
  if (R < 2 || R > DPC_BENCH_DEVICES)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "automatic shares measure 2 to %d devices, not %u",
                         DPC_BENCH_DEVICES, R);
  uint32_t K = o->accumulate > 1 ? o->accumulate : 1;
  if (!dpc_driver_split_batch(o->batch, R, NULL, K, shares) || o->batch % K)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "automatic shares: a batch of %u cannot give %u devices %u samples each",
                         o->batch, R, K);
  /* shares in steps of 8 samples where the batch allows: rows the GEMM tiles like, and fewer
   * distinct shapes for the kernel cache to compile */
  uint32_t G = o->batch % (8 * K) == 0 && o->batch >= 8 * K * R ? 8 * K : K;
  dpc_bench_opts p = *o;
  p.shares_spec = NULL, p.profile = false, p.collect = NULL;
  p.warmup = 3, p.steps = 12;
  dpc_bench_result *r = calloc(1, sizeof *r);
  dpc_status st = r ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  /* round 1 from equal shares, round 2 from round 1's: a device's time has a part the share does
   * not change (its optimizer step), which the first, proportional guess leaves out */
  for (int round = 0; !st && round < 2; round++) {
    uint32_t cur[DPC_BENCH_DEVICES];
    memcpy(cur, shares, R * sizeof *cur);
    p.shares = cur;
    st = dpc_bench(g, &p, r, d);
    if (st) break;
    double speed[DPC_BENCH_DEVICES];
    for (uint32_t k = 0; k < R; k++) speed[k] = r->busy_ms[k] > 0 ? cur[k] / r->busy_ms[k] : 0;
    if (!dpc_driver_split_batch(o->batch, R, speed, G, shares))
      st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "cannot split a batch of %u", o->batch);
  }
  free(r);
  return st;
}

dpc_status dpc_bench_cost_profile(const dpc_graph *g, uint32_t batch, uint32_t accumulate,
                                  uint32_t threads, dpc_cost_profile *out, uint32_t *kernels,
                                  dpc_diag *d) {
  memset(out, 0, sizeof *out);
  /* micro-batches repeat the same kernels: fewer steps time as many */
  uint32_t steps = accumulate > 1 ? 10 + 20 / accumulate : 30;
  dpc_bench_opts o = {.batch = batch,
                      .accumulate = accumulate > 1 ? accumulate : 0,
                      .threads = threads ? threads : 1,
                      .warmup = accumulate > 1 ? 3 : 5,
                      .steps = steps,
                      .profile = true,
                      .collect = out};
  dpc_status st = dpc_codegen_backend_find("llvm", &o.exec.backend, d);
  dpc_bench_result *r = st ? NULL : calloc(1, sizeof *r);
  if (!r) return st ? st : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  st = dpc_bench(g, &o, r, d);
  /* timing every kernel costs time, and a mean is not a median: the kernels' times are scaled
   * to sum to the untimed steps' median */
  double scale = !st && r->profiled_ms > 0 ? r->median_s * 1e3 / r->profiled_ms : 1;
  for (uint32_t i = 0; i < out->n; i++) out->factor[i] *= scale;
  for (int k = 0; k < DPC_OP_COUNT; k++) out->op_ms[k] *= scale;
  dpc_cost_profile_finish(out);
  if (!st && kernels) *kernels = r->n_kernels;
  free(r);
  return st;
}
