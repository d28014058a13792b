/*
 * api_bench.c — a model's step timed on synthetic data (dpc_net_benchmark, include/dpc/plan.h),
 * through the driver's bench (driver/bench.h).
 */
#include "driver/api_internal.h"
#include "driver/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(DPC_BENCHMARK_TOP == DPC_BENCH_TOP, "the public profile's size is the bench's");
_Static_assert(sizeof((dpc_benchmark_result *)0)->busy_ms ==
                       sizeof((dpc_bench_result *)0)->busy_ms &&
                   sizeof((dpc_benchmark_result *)0)->shares ==
                       sizeof((dpc_bench_result *)0)->shares,
               "the public per-device figures are the bench's");

DPC_COMPILER_API dpc_status dpc_build_opts_check(const dpc_build_opts *b, dpc_message *m) {
  dpc_exec_opts x;
  dpc_pass_opts po;
  return dpc_api_build(b, &x, &po, m);
}

DPC_COMPILER_API dpc_status dpc_net_benchmark(const dpc_net *n, const dpc_benchmark_opts *o,
                                              dpc_benchmark_result **out, dpc_message *m) {
  *out = NULL;
  dpc_bench_opts bo = {.batch = 64, .steps = 50};
  const dpc_build_opts *b = DPC_API_HAS(o, build) && o->build.size ? &o->build : NULL;
  dpc_status st = dpc_api_build(b, &bo.exec, NULL, m);
  if (st) return st;
  if (DPC_API_HAS(o, batch) && o->batch) bo.batch = o->batch;
  if (DPC_API_HAS(o, threads)) bo.threads = o->threads;
  if (DPC_API_HAS(o, inference)) bo.inference = o->inference;
  if (DPC_API_HAS(o, warmup)) bo.warmup = o->warmup;
  if (DPC_API_HAS(o, steps) && o->steps) bo.steps = o->steps;
  if (DPC_API_HAS(o, profile)) bo.profile = o->profile;
  if (DPC_API_HAS(o, profile_path)) bo.profile_path = o->profile_path;
  if (DPC_API_HAS(o, devices)) bo.devices = o->devices;
  if (DPC_API_HAS(o, accumulate)) bo.accumulate = o->accumulate;
  const dpc_strategy *s = DPC_API_HAS(o, strategy) ? o->strategy : NULL;
  bo.shares_spec = DPC_API_HAS(o, shares) && o->shares ? o->shares : s ? s->shares : NULL;
  if (s) {
    if (s->kind != DPC_STRATEGY_DATA && s->kind != DPC_STRATEGY_MODEL &&
        s->kind != DPC_STRATEGY_PIPELINE && s->kind != DPC_STRATEGY_HYBRID &&
        s->kind != DPC_STRATEGY_SINGLE)
      return dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                           "a benchmark times single, data, model, hybrid and pipeline strategies, "
                           "not %s",
                           dpc_strategy_kind_name(s->kind));
    if (s->given & (1u << DPC_STRATEGY_FIELD_PLACEMENT))
      return dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                           "a benchmark places a model as training does; a placement method is "
                           "for plans");
    /* hybrid and pipeline: replicas of mp devices (a pipeline's stages), each placed alike,
     * each share in micro-batches */
    bo.model = s->kind == DPC_STRATEGY_MODEL || s->kind == DPC_STRATEGY_PIPELINE ||
               s->kind == DPC_STRATEGY_HYBRID;
    if (s->kind == DPC_STRATEGY_PIPELINE || s->kind == DPC_STRATEGY_HYBRID) bo.mp = s->mp;
    if (s->kind == DPC_STRATEGY_HYBRID && s->microbatches > 1) bo.accumulate = s->microbatches;
    if (s->kind == DPC_STRATEGY_PIPELINE) {
      if (s->given & (1u << DPC_STRATEGY_FIELD_MICROBATCHES)) bo.accumulate = s->microbatches;
      bo.pipeline = s->schedule;
    }
  }
  dpc_benchmark_result *r = calloc(1, sizeof *r);
  dpc_bench_result *br = calloc(1, sizeof *br);
  st = r && br ? dpc_bench(n->g, &bo, br, m) : dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  if (st) {
    free(r);
    free(br);
    return st;
  }
  snprintf(r->backend, sizeof r->backend, "%s", bo.exec.backend ? bo.exec.backend->name : "ref");
  snprintf(r->target, sizeof r->target, "%s", br->target);
  r->compile_s = br->compile_s, r->jit_s = br->jit_s;
  r->kernels = br->kernels, r->disk_hits = br->disk_hits;
  r->median_s = br->median_s, r->min_s = br->min_s, r->p90_s = br->p90_s;
  r->samples_per_s = br->samples_per_s;
  memcpy(r->top, br->top, sizeof r->top); /* the same type, the same length */
  r->n_top = br->n_top, r->n_kernels = br->n_kernels;
  r->profiled_ms = br->profiled_ms, r->predicted_ms = br->predicted_ms;
  r->gflops = br->gflops, r->mem_gbs = br->mem_gbs;
  memcpy(r->busy_ms, br->busy_ms, sizeof r->busy_ms);
  memcpy(r->shares, br->shares, sizeof r->shares);
  r->n_devices = br->n_devices, r->n_shares = br->n_shares;
  free(br);
  *out = r;
  return DPC_OK;
}

DPC_COMPILER_API void dpc_benchmark_result_free(dpc_benchmark_result *r) {
  free(r);
}
