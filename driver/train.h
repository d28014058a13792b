/*
 * train.h — training a model on a dataset: the loop behind `dpc train`, as library code.
 *
 * It compiles the model's training graph (autodiff and optimizer passes), plans it for the batch
 * size (and once more for a partial last batch), runs it over the dataset epoch by epoch, and
 * evaluates on the test split after each epoch. Params, optimizer state and batch_norm statistics
 * live in one session; the other plans' sessions share them by name. Checkpoints (safetensors)
 * hold every param and state value plus the step, epoch, batch and data-order seed, so a
 * resumed run continues bit-identically. Nothing here prints: progress goes to callbacks.
 */
#ifndef DPC_TOOLS_TRAIN_H
#define DPC_TOOLS_TRAIN_H

#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/data.h"
#include "driver/driver.h"

/* dpc_train_step, dpc_train_epoch and dpc_train_stop: the public API's, reported as they are */
#include <dpc/train.h>

typedef struct dpc_train_opts {
  /* A compiled artifact (dpc compile --train) to train instead of a graph: its plans and
   * kernels run as they are, so the batch size and the optimizer are the ones compiled in, and a
   * partial last batch is left out. NULL: compile the graph given to dpc_train. */
  const char *artifact;
  const char *data;      /* --data; NULL means fashion-mnist */
  const char *test_data; /* --test-data; NULL: the test split of --data when it has one */
  /* the caller's samples instead of data and test_data (NULL: none; no test source, no
   * evaluation when train_source is set) */
  const dpc_dataset_source *train_source, *test_source;
  uint64_t epochs; /* >= 1 */
  uint64_t steps;  /* stop after this many steps in all; 0: no limit */
  uint32_t batch;  /* global batch of one optimizer step */
  uint64_t seed;   /* data order */
  bool seed_given; /* --seed was given: resuming a checkpoint of another seed is an error */
  bool shuffle;
  const char *optimizer; /* overrides of the model's objective; NULL / NAN when not given */
  double lr, momentum, weight_decay;
  const char *schedule;        /* constant, step, cosine, linear; NULL: the model's */
  const char *init_path;       /* safetensors of initial params */
  const char *save_path;       /* final params, named as in the model */
  const char *checkpoint_path; /* where checkpoints go */
  uint64_t checkpoint_every;   /* steps; 0: only at the end when checkpoint_path is set */
  const char *resume_path;
  const char *log_path;   /* JSON lines, one per step */
  const char *trace_path; /* Chrome trace (Perfetto) of the first steps: a track per device */
  dpc_pass_opts passes;   /* verify_each, print_after, dump */
  dpc_exec_opts exec;     /* reference kernels, or compiled with LLVM (the default in dpc train) */
  uint32_t threads;       /* for compiled kernels: 0 = one per core */
  /* --devices: NULL or "cpu" for one device; cpu:N / numa for synchronous data parallel over
   * those devices (each full batch split evenly between them; a batch that does not split
   * evenly runs on the first device) */
  const char *devices;
  /* with several devices: "data" (the default), "model" (the graph's own placement, `@ cpu:1` or
   * device blocks, else METIS's; values passed between devices) or "hybrid" (data-parallel
   * replicas of `mp` devices each, the model split over them) */
  const char *strategy;
  uint32_t mp;
  /* --shares (data parallel): each replica's samples of a batch: "even" (NULL), "auto" (measured
   * before training: faster devices take more) or a list summing to --batch, e.g. "144,112" */
  const char *shares;
  /* micro-batches each replica's share of a batch is split into, their gradients averaged
   * before one optimizer step (1: none); a batch that does not split runs whole */
  uint32_t accumulate;
  /* --strategy pipeline: the micro-batches (accumulate) run as a pipeline over each replica's
   * mp stages in this order */
  dpc_pipeline_schedule pipeline;
  /* local SGD: data-parallel replicas step on their own gradients and average their params
   * every local_sgd steps and at the end of each epoch (0: synchronous data parallel) */
  uint32_t local_sgd;
  /* bytes each device has (0: no limit): the plans must fit */
  uint64_t device_memory;
  double timeout_s;       /* how long a device waits for another before the step fails (0: 60 s) */
  uint32_t pretend_hosts; /* dpc_trainer_opts.pretend_hosts */
  const void *mpi_comm;   /* dpc_trainer_opts.mpi_comm */
  int comm_thread;        /* dpc_session_opts.comm_thread: 0 auto, 1 always, -1 never */
  /* asynchronous data parallel: the devices are workers of a parameter server that applies
   * the mean of every `replicas` gradients it receives; a gradient is applied at most
   * `staleness` updates after the version it was computed on (0: synchronous) */
  bool async;
  uint32_t staleness;
  /* Stop early once *cancel is non-zero (set by a signal handler, or by another thread): the
   * step under way finishes (every device's part, every micro-batch; asynchronous workers finish
   * the gradient they compute, and one that no update can take any more is dropped), a checkpoint
   * goes to checkpoint_path, else to stop_checkpoint_path, else nowhere, on_stop says where,
   * and dpc_train returns DPC_OK without writing save_path. NULL: never. */
  const volatile int *cancel;
  const char *stop_checkpoint_path;
  void (*on_stop)(void *user, const dpc_train_stop *s);
  void (*on_start)(void *user, const char *what);
  /* what a resumed run keeps from its checkpoint and changes by the options (NULL: none) */
  void (*on_note)(void *user, const char *what);
  void (*on_step)(void *user, const dpc_train_step *s);
  void (*on_epoch)(void *user, const dpc_train_epoch *e);
  void *user;
} dpc_train_opts;

/* Fill in the defaults: fashion-mnist, 1 epoch, batch 64, seed 0, shuffle, no overrides. */
void dpc_train_defaults(dpc_train_opts *o);

/* Train model g (a parsed, verified graph; not modified; NULL with o->artifact). libdpc's
 * dpc_trainer_run (driver/api_train.c) maps its public options onto these; tests reach the
 * hooks of driver/train_testing.h through dpc_train_hooked. */
dpc_status dpc_train(const dpc_graph *g, const dpc_train_opts *o, dpc_diag *d);

#endif
