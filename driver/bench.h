/*
 * bench.h — `dpc bench`: time a model's training step (or forward pass) on synthetic data.
 *
 * The model goes through the same pipeline as dpc train (passes, fusion, plan, compile); the
 * data inputs are filled with uniform values and the label inputs with valid classes, once, so
 * what is timed is the step alone. The median of the timed steps is the figure to quote: the
 * machines are shared, and the median ignores the stray slow step.
 */
#ifndef DPC_TOOLS_BENCH_H
#define DPC_TOOLS_BENCH_H

#include "partitioner/cost.h"
#include "driver/driver.h"

#include <dpc/plan.h>

typedef struct dpc_bench_opts {
  uint32_t batch;      /* every symbolic dimension takes this size */
  uint32_t threads;    /* for compiled kernels: 0 = one per core */
  bool inference;      /* the forward pass instead of the training step */
  uint32_t warmup;     /* untimed steps first */
  uint32_t steps;      /* timed steps */
  dpc_exec_opts exec;  /* llvm or the reference kernels */
  bool profile;        /* after the timed steps, as many again with each kernel timed */
  const char *devices; /* NULL or cpu: one device; cpu:N / numa: data parallel (training) */
  bool model;          /* with devices: model parallel by the graph's own placement */
  uint32_t mp;         /* with model: replicas of mp devices each (0: one over all of them) */
  uint32_t accumulate; /* training: micro-batches per device's share (0, 1: none) */
  dpc_pipeline_schedule pipeline; /* with model: the micro-batches as a pipeline, this order */
  dpc_cost_profile *collect;      /* with profile (one device): every kernel's times added here */
  /* data parallel: --shares (even, auto or a list; NULL: even), or the shares themselves */
  const char *shares_spec;
  const uint32_t *shares;
  const char *profile_path; /* with profile: every kernel's row to this file (dpc/plan.h) */
} dpc_bench_opts;

/* The most data-parallel replicas --shares sizes (auto measures each); any plan dpc makes, up to
 * DPC_MAX_DEVICES devices, is benched and reported whole. */
#define DPC_BENCH_DEVICES 16

/* One kernel of the profile: the public type (dpc/plan.h), so results pass out unconverted. */
typedef dpc_benchmark_kernel dpc_bench_kernel;

#define DPC_BENCH_TOP DPC_BENCHMARK_TOP

typedef struct dpc_bench_result {
  double compile_s;              /* passes, plan, the JIT and the session (its memory touched) */
  double jit_s;                  /* of which generating and compiling kernels with LLVM */
  uint32_t kernels;              /* compiled */
  uint32_t disk_hits;            /* read from the disk cache instead */
  double median_s, min_s, p90_s; /* per step */
  double samples_per_s;          /* batch / median */
  char target[160];              /* what the kernels were compiled for, or "reference" */
  /* with opts.profile: the slowest kernels, slowest first, and the whole step's profiled time */
  dpc_bench_kernel top[DPC_BENCH_TOP];
  uint32_t n_top, n_kernels;
  double profiled_ms, predicted_ms;
  double gflops, mem_gbs; /* the calibrated speed the prediction used */
  /* each device's time computing (not waiting) per step, the median step's share of it, and
   * the replicas' shares of the batch it ran with (data parallel) */
  double busy_ms[DPC_MAX_DEVICES];
  uint32_t shares[DPC_MAX_DEVICES];
  uint32_t n_devices, n_shares;
} dpc_bench_result;

dpc_status dpc_bench(const dpc_graph *g, const dpc_bench_opts *o, dpc_bench_result *r, dpc_diag *d);

/* Data-parallel shares sized to the devices: run the step a few times with equal shares, then
 * with shares in proportion to each device's samples per second computing, then once more to
 * correct for work that does not scale with the share (the optimizer); shares[0 .. R) gets
 * them (R devices of o->devices, each share a multiple of o->accumulate, and of 8 of them when
 * the batch allows). */
dpc_status dpc_bench_measure_shares(const dpc_graph *g, const dpc_bench_opts *o, uint32_t R,
                                    uint32_t *shares, dpc_diag *d);

/* The cost model's correction for model g's training step at `batch` (in `accumulate`
 * micro-batches, 0 or 1: none) on this machine: a few steps on `threads` cores (the cores of one
 * device of the plan, so that how a kernel shares its work between threads is in its time) with
 * every kernel timed, each kernel's measured time over the cost model's prediction at those cores'
 * calibrated speed (dpc_cost_profile). *kernels gets the kernels timed. */
dpc_status dpc_bench_cost_profile(const dpc_graph *g, uint32_t batch, uint32_t accumulate,
                                  uint32_t threads, dpc_cost_profile *out, uint32_t *kernels,
                                  dpc_diag *d);

#endif
