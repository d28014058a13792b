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
/* A size in bytes: "512M", "2G", "1500000" (K, M, G are powers of 1024). False when malformed. */
DPC_COMPILER_API bool dpc_parse_size(const char *text, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
