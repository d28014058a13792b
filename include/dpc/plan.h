/*
 * plan.h — libdpc's strategies, devices and plans: a training strategy as data (which kind and
 * its numbers, parsed and checked against the devices and the batch by one function,
 * dpc_strategy_parse, which every front end calls), the devices of this machine and their
 * calibrated speeds, the plan of a training step over them with its predicted figures, and the
 * benchmark that measures a step.
 *
 * A strategy failure is a status and a message that describes values by meaning ("the 3 stages
 * do not divide the 2 devices"), plus a dpc_strategy_error saying which setting and which
 * problem, so a front end can name its own spelling of the setting (the command line adds its
 * flag names).
 */
#ifndef DPC_PLAN_H
#define DPC_PLAN_H

#include <dpc/compiler.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- strategies -------------------------------------------------------------------------- */

typedef enum dpc_strategy_kind {
  DPC_STRATEGY_SINGLE,    /* one device */
  DPC_STRATEGY_DATA,      /* synchronous data parallel: replicas average their gradients */
  DPC_STRATEGY_MODEL,     /* the model placed over the devices */
  DPC_STRATEGY_HYBRID,    /* data-parallel replicas of mp devices, the model split over them */
  DPC_STRATEGY_PIPELINE,  /* replicas of `mp` stages running micro-batches in a schedule */
  DPC_STRATEGY_ASYNC,     /* workers of a parameter server, gradients at most `staleness` old */
  DPC_STRATEGY_LOCAL_SGD, /* replicas step alone and average their params every `period` steps */
  DPC_STRATEGY_KINDS
} dpc_strategy_kind;

/* How the model strategy places nodes the model does not place itself. */
typedef enum dpc_placement_method {
  DPC_PLACEMENT_METIS,      /* METIS, weighted by the devices' speeds */
  DPC_PLACEMENT_CONTIGUOUS, /* a layer split: consecutive nodes together */
  DPC_PLACEMENT_ROUNDROBIN  /* node k on device k mod n */
} dpc_placement_method;

/* A strategy, parsed and checked: every number is the one that runs. */
typedef struct dpc_strategy {
  dpc_strategy_kind kind;
  uint32_t devices;      /* in all */
  uint32_t replicas;     /* data-parallel replicas (asynchronous: workers; model: 1) */
  uint32_t mp;           /* devices per replica: the model-parallel width, a pipeline's stages */
  uint32_t microbatches; /* each replica's share of a batch in this many parts (1: whole) */
  dpc_pipeline_schedule schedule; /* a pipeline's order (NONE otherwise) */
  uint32_t staleness;             /* asynchronous: updates a gradient may lag (0: synchronous) */
  uint32_t period;                /* local SGD: steps between averagings */
  dpc_placement_method placement; /* model */
  const char *shares;             /* data: "even" (NULL), "auto" or a list, as given */
  uint64_t memory_limit;          /* bytes each device has (0: no limit) */
  uint32_t given; /* 1u << dpc_strategy_field of each setting given, not defaulted */
} dpc_strategy;

/* What the caller asks for, before checking. Numbers are -1 when not given. */
typedef struct dpc_strategy_args {
  /* the kind's name ("data", "model", "hybrid", "pipeline", "single", "async", "local_sgd"),
   * optionally with settings after a colon: "pipeline:stages=2,microbatches=4,schedule=gpipe"
   * (keys: mp, stages, microbatches, dp, accumulate, schedule, placement, staleness, period).
   * NULL: data parallel over the devices (one device: single). */
  const char *text;
  int64_t mp, stages, microbatches, dp, accumulate, staleness, period;
  dpc_pipeline_schedule schedule; /* NONE: not given */
  const char *placement;          /* metis, contiguous, roundrobin; NULL: not given */
  bool async;                     /* asynchronous data parallel (the kind then is async) */
  const char *shares;
  uint64_t memory_limit;
  uint32_t devices; /* 0: as many as the strategy needs (a pipeline: stages x dp, else 1) */
  uint64_t batch;   /* samples per step, checked to split over the replicas (0: not checked) */
  uint32_t kinds;   /* the kinds the caller runs, 1u << kind each (0: every kind) */
} dpc_strategy_args;

/* The setting a failure is about. */
typedef enum dpc_strategy_field {
  DPC_STRATEGY_FIELD_KIND,
  DPC_STRATEGY_FIELD_MP,
  DPC_STRATEGY_FIELD_STAGES,
  DPC_STRATEGY_FIELD_MICROBATCHES,
  DPC_STRATEGY_FIELD_DP,
  DPC_STRATEGY_FIELD_ACCUMULATE,
  DPC_STRATEGY_FIELD_SCHEDULE,
  DPC_STRATEGY_FIELD_PLACEMENT,
  DPC_STRATEGY_FIELD_STALENESS,
  DPC_STRATEGY_FIELD_PERIOD,
  DPC_STRATEGY_FIELD_ASYNC,
  DPC_STRATEGY_FIELD_DEVICES,
  DPC_STRATEGY_FIELD_BATCH,
  DPC_STRATEGY_FIELD_TEXT /* a key or value of the text form */
} dpc_strategy_field;

typedef enum dpc_strategy_problem {
  DPC_STRATEGY_OK,
  DPC_STRATEGY_UNKNOWN,       /* text: not one of the choices (`text`) */
  DPC_STRATEGY_RANGE,         /* a number outside [lo, hi] (`value`) */
  DPC_STRATEGY_ALONE,         /* a setting given without `kind`, the kind it belongs to */
  DPC_STRATEGY_MISSING,       /* `kind` needs the setting, from lo to hi */
  DPC_STRATEGY_EXCLUDES,      /* the setting does not go with `kind` */
  DPC_STRATEGY_FEW_DEVICES,   /* `kind` needs 2 or more devices, not `devices` */
  DPC_STRATEGY_MANY_DEVICES,  /* single takes one device, not `devices` */
  DPC_STRATEGY_DEVICES_SPLIT, /* the setting (`value`) does not divide `devices` */
  DPC_STRATEGY_BATCH_SPLIT,   /* the batch (`value`) does not split over `replicas` */
  DPC_STRATEGY_MICRO_SPLIT    /* `value` micro-batches do not divide a share of `lo` samples */
} dpc_strategy_problem;

typedef struct dpc_strategy_error {
  dpc_strategy_problem problem;
  dpc_strategy_field field;
  dpc_strategy_kind kind;
  const char *text; /* the text at fault (points into the args), or NULL */
  uint64_t value, lo, hi;
  uint32_t devices, replicas;
} dpc_strategy_error;

/* Arguments with nothing given. */
DPC_COMPILER_API void dpc_strategy_args_init(dpc_strategy_args *a);
/* The kind named `name` ("local-sgd" too); false when there is none. */
DPC_COMPILER_API bool dpc_strategy_kind_parse(const char *name, dpc_strategy_kind *out);
DPC_COMPILER_API const char *dpc_strategy_kind_name(dpc_strategy_kind k);
/* Parse and check a strategy: the one place a strategy's text, settings, device count and batch
 * are checked together. On failure *e (may be NULL) says what and d has the message. */
DPC_COMPILER_API dpc_status dpc_strategy_parse(const dpc_strategy_args *a, dpc_strategy *out,
                                               dpc_strategy_error *e, dpc_message *m);

/* ---- devices ----------------------------------------------------------------------------- */

/* How many devices a spec makes on this machine: "cpu" (one), "cpu:N", "numa" (one per NUMA
 * node). An error says why a spec is wrong (DPC_ERR_INVALID) or the machine unreadable. */
DPC_COMPILER_API dpc_status dpc_devices_count(const char *spec, uint32_t *n, dpc_message *m);
/* GPUs to train or run on with the cuda backend, "cuda:0,cuda:1,...": how many (the list in
 * order from cuda:0; DPC_ERR_INVALID naming the spec otherwise). Whether they are there is
 * checked when they are opened. */
DPC_COMPILER_API dpc_status dpc_gpus_count(const char *spec, uint32_t *n, dpc_message *m);
/* The GPUs a --devices spec names: spec for "cuda:0,...", the list after the host's CPU for
 * "cpu,cuda:0,..." (*with_cpu true; with_cpu may be NULL), NULL when it names none. */
DPC_COMPILER_API const char *dpc_devices_gpus(const char *spec, bool *with_cpu);
/* A size in bytes: "512M", "2G", "1500000" (K, M, G are powers of 1024). False when malformed. */
DPC_COMPILER_API bool dpc_parse_size(const char *text, uint64_t *out);

/* ---- the machine and its calibration (what `dpc devices` shows) ------------------------- */

typedef struct dpc_devices_opts {
  size_t size;
  bool no_calibrate;     /* list the devices without measuring them */
  bool refresh;          /* measure again even when cached figures exist */
  const char *cache_dir; /* where the figures are cached: NULL for $DPC_CACHE_DIR or
                            ~/.cache/dpc */
} dpc_devices_opts;

/* One device a spec makes of this machine. */
typedef struct dpc_device_info {
  char name[32];    /* "cpu:0" */
  uint32_t numa;    /* the NUMA node of its first core */
  uint32_t n_cores; /* the cores its threads run on */
  uint32_t *pus;    /* n_cores: the OS index of each core's processing unit (owned) */
  bool shared;      /* shares its cores with another device (more devices than cores) */
} dpc_device_info;

/* The machine, the devices of a spec and, unless not asked for, their measured speeds. */
typedef struct dpc_devices_report {
  char machine[160];    /* hwloc's summary: "1 package, 1 NUMA node, 2 cores, 2 PUs" */
  char cpu_model[96];   /* "" when hwloc has none */
  uint64_t l1d, l2, l3; /* the first core's cache sizes in bytes (0: absent or unknown) */
  uint32_t n;           /* devices */
  dpc_device_info *devices;
  bool calibrated;       /* the figures below are there */
  double *gflops;        /* n: GFLOP/s of dpc's GEMM on each device's cores */
  double *copy_gbs;      /* n x n, row = source device: GB/s of a copy between devices' memory; 0
                            where not measured (past 8 devices only to itself and the next) */
  char when[40];         /* UTC time of the measurement */
  bool from_cache;       /* read from the cache rather than measured now */
  char cache_path[1024]; /* the cache file read or written, "" when there is none */
} dpc_devices_report;

/* The devices `spec` ("cpu", "cpu:N", "numa"; NULL: "cpu") makes of this machine, measured
 * unless o->no_calibrate (measuring takes a second or two, reading the cache nothing). A wrong
 * spec is DPC_ERR_INVALID or DPC_ERR_UNSUPPORTED with why; *out is NULL on failure. o may be
 * NULL. Free with dpc_devices_report_free. */
DPC_COMPILER_API dpc_status dpc_devices_describe(const char *spec, const dpc_devices_opts *o,
                                                 dpc_devices_report **out, dpc_message *m);
DPC_COMPILER_API void dpc_devices_report_free(dpc_devices_report *r);

/* ---- plans: a training step over devices and its predicted figures (`dpc plan`) ---------- */

typedef struct dpc_plan_opts {
  size_t size;
  uint32_t batch;      /* samples per step (0: 64) */
  const char *devices; /* "cpu", "cpu:N" or "numa"; NULL: "cpu", or "cpu:N" for a strategy of
                          N > 1 devices of its own (a pipeline's stages x pipelines) */
  /* the strategy, from dpc_strategy_parse for these devices and this batch (single, data, model,
   * hybrid or pipeline); NULL: data parallel over the devices (single on one) */
  const dpc_strategy *strategy;
  uint64_t memory_limit; /* bytes each device has; the plan must fit (0: the strategy's) */
  bool profile;          /* time the model's kernels first (on one device's cores, at the batch
                            one replica runs), correcting the cost model */
  bool measure;          /* then run the plan, 30 timed steps (hybrid and pipeline as dpc train
                            runs them: replicas placed alike) */
  const char *dot_path;  /* NULL, or write the plan there as Graphviz: a cluster per device, a
                            node per fused kernel or named value, bytes on edges between devices */
  bool dot_full;         /* the dot file draws every node of the step graph instead */
  const char *json_path; /* NULL, or write the per-device figures there as JSON */
  /* NULL, or write the plan there as one self-contained HTML page (inline CSS and SVG, no
   * script, no URL): the placement picture (laid out by Graphviz's dot program, which must be on
   * PATH), the predicted timeline of one step per device, memory per device against its limit
   * (memory_limit, else this machine's memory shared by the devices), the per-device figures,
   * and with measure the measured step beside the predicted one */
  const char *html_path;
  /* NULL, or the report of the dpc_net_plan_auto that chose this strategy: with html_path, its
   * candidates are ranked in the page with their predicted and measured steps and why each
   * lost; with profile, its kernel profile is used instead of timing the kernels again */
  const struct dpc_auto_report *html_auto;
} dpc_plan_opts;

/* One device's share of the step, as the cost model with this machine's calibration predicts. */
typedef struct dpc_plan_report_device {
  char name[32];
  uint32_t kernels, collectives;
  double compute_ms, comm_ms; /* per step */
  uint64_t memory_bytes;      /* what the plan holds on it */
  double comm_bytes;          /* sent and received per step */
  /* a pipeline (dpc_plan_report.stages > 0): its stage, the most bytes of activations it keeps
   * alive at once, and its order of forward and backward micro-batches ("F0 F1 B0 F2 ...", at
   * most 40 of them; "" when it runs none) */
  uint32_t stage;
  uint64_t live_peak_bytes;
  char order[512];
} dpc_plan_report_device;

/* An op kind the profile found far from the cost model: its kernels' time per step. */
typedef struct dpc_plan_profile_op {
  char op[32];
  double measured_ms, predicted_ms;
} dpc_plan_profile_op;

typedef struct dpc_plan_report {
  /* with opts.profile: the kernels timed, and the (at most) three op kinds furthest from the
   * cost model, furthest first */
  bool profiled;
  uint32_t profile_kernels;
  dpc_plan_profile_op furthest[3];
  uint32_t n_furthest;

  /* the plan; n_devices is 0 when it failed before the plan was made */
  dpc_strategy_kind kind; /* what was planned */
  char devices_spec[64];  /* the devices it was planned on ("cpu:2") */
  uint32_t batch;
  uint32_t n_devices;
  dpc_plan_report_device *devices;
  double step_ms;       /* predicted for one step */
  double samples_per_s; /* batch / step */
  double bytes_moved;   /* between devices per step */

  /* a pipeline: stages, micro-batches, schedule and the share of the devices' time idle, as
   * predicted and as (S-1)/(M+S-1) gives for balanced stages, in percent (stages 0: none) */
  uint32_t stages, microbatches;
  uint32_t filled_stages; /* the stages the placement gave forward work (the rest stay idle) */
  dpc_pipeline_schedule schedule;
  double bubble_pct, balanced_bubble_pct;

  /* whether METIS placed the model (model, hybrid and pipeline strategies), and what it kept */
  bool placed;
  bool order_kept;      /* values flow one way between devices (else the model's own placement
                           keeps a cycle) */
  uint32_t chain_moves; /* nodes moved to keep chains on one device */

  /* where the plan needs more memory than this machine's NUMA nodes have: a sentence each (the
   * plan is still made: it may be for a bigger machine) */
  char **warnings;
  uint32_t n_warnings;

  /* with opts.measure: the median of the measured steps, and the prediction's error against
   * it in percent of it */
  bool measured;
  double measured_ms, error_pct;
} dpc_plan_report;

/* Plan the training step of model n over devices and predict its figures (cost model with the
 * devices' calibration, dpc_devices_describe), writing the dot and JSON files asked for. The
 * model must have a loss (dpc_net_trainable). On success *out has the report. On failure *out is
 * NULL, or holds what was done before it (the profile; the whole plan when writing a file or
 * measuring failed), to be shown with the message. Free with dpc_plan_report_free. */
DPC_COMPILER_API dpc_status dpc_net_plan(const dpc_net *n, const dpc_plan_opts *o,
                                         dpc_plan_report **out, dpc_message *m);
DPC_COMPILER_API void dpc_plan_report_free(dpc_plan_report *r);

/* ---- choosing the strategy (`--strategy auto`) ------------------------------------------ */

typedef struct dpc_auto_opts {
  size_t size;
  uint32_t batch;        /* samples per step (0: 64) */
  const char *devices;   /* "cpu", "cpu:N" or "numa" (NULL: "cpu") */
  uint64_t memory_limit; /* bytes each device has (0: no limit) */
  /* then run the fastest predicted this many (that fit), measure_steps timed steps each (0: 30)
   * after 5 untimed, and choose by the measured step: the prediction ranks, the machine decides */
  uint32_t measure_top;
  uint32_t measure_steps;
  /* first time the model's kernels on one device's cores at every per-device batch the candidates
   * run (the whole batch, its data-parallel shares, the pipelines' micro-batches), and predict with
   * the cost model corrected by those times: seconds more, closer predictions */
  bool profile;
} dpc_auto_opts;

/* One strategy tried: its text form (dpc_strategy_parse reads it back), its predicted figures,
 * and why it won or lost. */
typedef struct dpc_auto_candidate {
  char strategy[96];
  dpc_strategy_kind kind;
  bool planned;              /* a plan was made (else reason says why not) */
  bool fits;                 /* within the memory limit */
  double step_ms;            /* predicted for one step */
  double samples_per_s;      /* batch / step */
  uint64_t max_memory_bytes; /* on the fullest device, named here */
  char max_memory_device[32];
  double comm_bytes;       /* moved between devices per step */
  double bubble_pct;       /* a pipeline's idle share of the devices' time */
  char busiest_device[32]; /* the device with the most work, and its compute and
                              communication per step */
  double busiest_compute_ms, busiest_comm_ms;
  char reason[320]; /* "the fastest predicted step", or why it lost, in numbers */
  /* with measure_top: whether it ran, its median step, the prediction's error against it (in
   * percent of it), or why it was not measured */
  bool measured;
  double measured_ms, error_pct;
  char measure_note[200];
} dpc_auto_candidate;

typedef struct dpc_auto_report {
  dpc_auto_candidate *candidates; /* fastest first; those that do not run last */
  uint32_t n_candidates;
  uint32_t best; /* index of the chosen one; n_candidates when none fits */
  uint32_t devices, batch;
  double seconds; /* the search's own time, measuring included */
  /* with measure_top: the choice is the fastest measured, and by_measurement says when that is
   * not the fastest predicted (the measurement reversed the ranking) */
  uint32_t n_measured;
  bool by_measurement;
  /* with opts.profile: the batches whose kernels were timed, each in how many micro-batches
   * (1: none; a pipeline's stages sum their gradients over them), the kernels timed, the time
   * it took, and the profile itself (dpc_net_plan reuses it when given this report in
   * html_auto and asked to profile) */
  uint32_t profile_batches[12], profile_microbatches[12], n_profile_batches;
  uint32_t profile_kernels, profile_threads;
  double profile_seconds;
  struct dpc_cost_profile *profile;
} dpc_auto_report;

/* Choose the training strategy for model n on these devices: every strategy they allow (single;
 * data; model; hybrid over each divisor; pipelines over each divisor of stages, their
 * micro-batches grown while it helps, 1F1B and GPipe; accumulation under a memory limit) planned
 * and predicted as dpc_net_plan does, those over the memory limit dropped, the fastest predicted
 * step chosen; with measure_top, the fastest measured of the best predicted instead (one whose
 * benchmark failed says why in measure_note). On success (and when nothing
 * fits, with DPC_ERR_INVALID) *out holds the ranked table. Free with dpc_auto_report_free. */
DPC_COMPILER_API dpc_status dpc_net_plan_auto(const dpc_net *n, const dpc_auto_opts *o,
                                              dpc_auto_report **out, dpc_message *m);
DPC_COMPILER_API void dpc_auto_report_free(dpc_auto_report *r);

/* ---- benchmarks: a training step (or forward pass) timed on synthetic data (`dpc bench`) - */

typedef struct dpc_benchmark_opts {
  size_t size;
  dpc_build_opts build; /* backend, LLVM dumps, cache (build.size 0: the defaults) */
  uint32_t batch;       /* samples per step, every symbolic dimension (0: 64) */
  uint32_t threads;     /* for compiled kernels (0: one per core) */
  bool inference;       /* time the forward pass instead of the training step */
  uint32_t warmup;      /* untimed steps first (0: none) */
  uint32_t steps;       /* timed steps (0: 50) */
  bool profile;         /* then as many steps again with each kernel timed (dpc_benchmark_result
                           top and the totals) */
  const char *devices;  /* NULL or "cpu": one device; "cpu:N" / "numa": training over them */
  /* with several devices: data parallel (NULL), model (the graph's own placement, else
   * METIS's), hybrid (replicas of mp devices, the model placed over each) or pipeline (replicas
   * of mp stages, accumulate micro-batches), from dpc_strategy_parse; a placement method is not
   * taken (a benchmark places as training does) */
  const dpc_strategy *strategy;
  uint32_t accumulate; /* training: each device's share in this many micro-batches (0, 1: whole);
                          a pipeline strategy's own micro-batches, when given, win */
  const char *shares;  /* data parallel: "even" (NULL), "auto" (measured) or a list "144,112"
                          (NULL: the strategy's) */
  /* with profile: every kernel of the step written to this file, in the order they run, as
   * tab-separated columns under a header (step, measured_ms, predicted_ms, value, type, ops);
   * NULL: none (0.4) */
  const char *profile_path;
} dpc_benchmark_opts;

/* One kernel of the profile: what it computes and its time per step. */
typedef struct dpc_benchmark_kernel {
  char what[200];      /* "h1 = relu(matmul(x, w1) + b1): matmul + add + relu" */
  double ms;           /* per step, mean over the profiled steps */
  double predicted_ms; /* the cost model's figure with this machine's calibration */
} dpc_benchmark_kernel;

#define DPC_BENCHMARK_TOP 24

typedef struct dpc_benchmark_result {
  char backend[16];              /* the backend that ran: "llvm" or "ref" */
  char target[160];              /* what the kernels were compiled for, or "reference" */
  double compile_s;              /* passes, plan, the JIT and the session (its memory touched) */
  double jit_s;                  /* of which generating and compiling kernels with LLVM */
  uint32_t kernels;              /* compiled */
  uint32_t disk_hits;            /* read from the disk cache instead */
  double median_s, min_s, p90_s; /* per step */
  double samples_per_s;          /* batch / median */
  /* with opts.profile: the slowest kernels, slowest first, the kernels in all, the whole
   * step's profiled time and the cost model's prediction of it, and the calibrated speed the
   * prediction used */
  dpc_benchmark_kernel top[DPC_BENCHMARK_TOP];
  uint32_t n_top, n_kernels;
  double profiled_ms, predicted_ms;
  double gflops, mem_gbs;
  /* several devices: each one's time computing (not waiting) in the median step, and the
   * replicas' shares of the batch (data parallel) */
  double busy_ms[DPC_MAX_DEVICES];
  uint32_t shares[DPC_MAX_DEVICES];
  uint32_t n_devices, n_shares;
} dpc_benchmark_result;

/* Time model n's training step (or forward pass) as training compiles it, on synthetic data
 * filled once: warm-up steps, then each timed step; the median is the figure to quote. *out is
 * NULL on failure; free with dpc_benchmark_result_free. */
DPC_COMPILER_API dpc_status dpc_net_benchmark(const dpc_net *n, const dpc_benchmark_opts *o,
                                              dpc_benchmark_result **out, dpc_message *m);
DPC_COMPILER_API void dpc_benchmark_result_free(dpc_benchmark_result *r);

#ifdef __cplusplus
}
#endif
#endif
