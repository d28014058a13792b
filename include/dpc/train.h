/*
 * train.h — libdpc's trainer: the epoch and step loop behind `dpc train`, with any strategy the
 * devices allow, data from a built-in dataset or from a source the caller provides, evaluation,
 * checkpoints and resume, the step log as a callback, and a cancel flag.
 *
 *   dpc_trainer_opts o;
 *   dpc_trainer_defaults(&o);              // fashion-mnist, 1 epoch, batch 64, seed 0
 *   o.devices = "cpu:2";                   // data parallel over two devices
 *   o.checkpoint_path = "run.safetensors";
 *   o.on_step = print_loss; o.user = &state;
 *   if (dpc_trainer_run(net, &o, msg)) fprintf(stderr, "%s\n", dpc_message_text(msg));
 *
 * Synchronous training with the same seed, devices and batch gives bit-identical losses run to
 * run, and a resumed run continues the stopped one bit-identically. Nothing here prints: progress
 * goes to the callbacks, on the thread that called dpc_trainer_run.
 */
#ifndef DPC_TRAIN_H
#define DPC_TRAIN_H

#include <dpc/plan.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Samples for training or evaluation, provided by the caller. The trainer asks for batches of
 * sample indices in its own (seeded, resumable) order; the source copies those samples into x
 * (n samples of `sample_elems` floats each, in the order asked) and their class labels into y.
 * The built-in datasets are sources like this one. */
typedef struct dpc_data_source {
  size_t size;      /* sizeof(dpc_data_source) */
  const char *name; /* for messages and logs */
  uint64_t samples; /* how many there are: indices run from 0 to samples - 1 */
  unsigned rank;    /* one sample's shape, e.g. {28, 28}: the model's input takes as many
                       elements per sample */
  int64_t dims[DPC_TENSOR_MAX_RANK];
  int64_t classes; /* 1 + the largest label (checked against the model's outputs) */
  /* Fill x[n * elems] and y[n] for samples idx[0..n). Non-zero fails the step; the message
   * (into err, err_len bytes) is reported with the source's name. */
  int (*fill)(void *user, const uint64_t *idx, uint32_t n, float *x, int64_t *y, char *err,
              size_t err_len);
  void *user;
} dpc_data_source;

typedef struct dpc_train_step {
  uint64_t step;           /* steps done, this one included */
  uint64_t epoch;          /* 0-based */
  uint64_t batch, batches; /* position in the epoch, 1-based, and batches per epoch */
  double loss, lr;
  double samples_per_s; /* over this step */
  uint32_t batch_size;
} dpc_train_step;

typedef struct dpc_train_epoch {
  uint64_t epoch; /* 0-based, the epoch just finished */
  uint64_t step;
  double train_loss; /* mean over the epoch's steps, weighted by batch size */
  double seconds;    /* wall time of the epoch's training steps */
  double samples_per_s;
  bool evaluated; /* false when there is no test data */
  double test_loss, test_accuracy;
  uint64_t test_samples;
  uint64_t max_staleness; /* asynchronous: the stalest gradient applied so far (updates behind) */
} dpc_train_epoch;

/* Where a run stopped on request (dpc_trainer_opts.cancel). */
typedef struct dpc_train_stop {
  uint64_t step;           /* steps done */
  uint64_t epoch;          /* 0-based epoch of the next step */
  uint64_t batch, batches; /* batches of that epoch done, and batches per epoch */
  const char *checkpoint;  /* where the checkpoint went; NULL: none was written */
} dpc_train_stop;

/* How to train. dpc_trainer_defaults fills it (size included); set what differs. */
typedef struct dpc_trainer_opts {
  size_t size;
  /* A compiled artifact (dpc compile --train) to train instead of the net: its plans and kernels
   * run as they are (batch and optimizer as compiled; a partial last batch is left out). */
  const char *artifact;
  const char *data;      /* "fashion-mnist" (NULL), a folder of IDX files, or "X.npy,Y.npy" */
  const char *test_data; /* NULL: the test split of data, when it has one */
  const dpc_data_source *train_source; /* instead of data: the caller's samples */
  const dpc_data_source *test_source;  /* instead of test_data (NULL: no evaluation when
                                          train_source is set) */
  uint64_t epochs;                     /* 1 or more */
  uint64_t steps;                      /* stop after this many steps in all; 0: no limit */
  uint32_t batch;                      /* the global batch of one optimizer step */
  uint64_t seed;                       /* data order */
  bool seed_given;                     /* resuming a checkpoint of another seed is then an error */
  bool shuffle;
  const char *optimizer;             /* "sgd", "adam", "adamw"; NULL: the model's */
  double lr, momentum, weight_decay; /* NAN: the model's */
  const char *lr_schedule;           /* constant, step, cosine, linear; NULL: the model's */
  const char *init_path;             /* safetensors of initial params */
  const char *save_path;             /* the final params, named as in the model */
  const char *checkpoint_path;       /* where checkpoints go */
  uint64_t checkpoint_every;         /* steps; 0: only at the end when checkpoint_path is set */
  const char *resume_path;
  const char *log_path;   /* JSON lines, one per step and per epoch */
  const char *trace_path; /* Chrome trace of the first steps: a track per device */
  dpc_build_opts build;   /* backend ("llvm" by default), dumps, verification */
  uint32_t threads;       /* for compiled kernels on one device: 0 = one per core */
  /* The devices ("cpu", "cpu:N", "numa"; NULL: "cpu") and the strategy over them, in the text
   * form of dpc_strategy_parse (dpc/plan.h): "data" (the default with several devices),
   * "model", "hybrid:mp=2", "pipeline:stages=2,microbatches=4,schedule=1f1b", "async:staleness=4",
   * "local_sgd:period=8", "data:accumulate=4". NULL: data parallel (one device: single). */
  const char *devices;
  const char *strategy;
  /* Or the strategy already parsed by dpc_strategy_parse against these devices and batch (what
   * the command line does with its flags); when set, `strategy` is not read. */
  const dpc_strategy *typed_strategy;
  const char *shares;     /* data parallel: "even" (NULL), "auto" or a list "144,112" */
  uint64_t device_memory; /* bytes each device has (0: no limit): the plans must fit */
  double timeout_s;       /* how long a device waits for another before the step fails (0: 60) */
  /* Stop early once *cancel is non-zero (a signal handler or another thread sets it): the step
   * under way finishes, a checkpoint goes to checkpoint_path, else to stop_checkpoint_path,
   * else nowhere, on_stop says where, and dpc_trainer_run returns DPC_OK without writing save_path.
   */
  const volatile int *cancel;
  const char *stop_checkpoint_path;
  void (*on_start)(void *user, const char *what); /* what is being trained, and how */
  /* what a resumed run keeps from its checkpoint and what the options change */
  void (*on_note)(void *user, const char *what);
  void (*on_step)(void *user, const dpc_train_step *s);
  void (*on_epoch)(void *user, const dpc_train_epoch *e);
  void (*on_stop)(void *user, const dpc_train_stop *s);
  void *user;
  /* devices "mpi": group the ranks into this many pretended hosts of consecutive ranks, which
   * the all-reduce treats as separate machines (0: the real hosts, found by shared memory) */
  uint32_t pretend_hosts;
  /* devices "mpi": the communicator to train over, as a pointer to the application's MPI_Comm
   * (its ranks are the ranks of the run, rank 0 of it reporting); NULL: MPI_COMM_WORLD */
  const void *mpi_comm;
} dpc_trainer_opts;

/* Fill in the defaults: fashion-mnist, 1 epoch, batch 64, seed 0, shuffled, the model's own
 * optimizer settings, the llvm backend. */
DPC_COMPILER_API void dpc_trainer_defaults(dpc_trainer_opts *o);

/* Train the net (not modified; NULL with o->artifact). o NULL: the defaults. The options are
 * checked first (a failure says which value is wrong, in words, never a flag); a net that kept
 * the fixed batch it was exported with (dpc_net_fixed_batch) is refused with that reason, as it
 * trains at no batch of the trainer's choosing. Returns DPC_OK also when stopped by o->cancel. */
DPC_COMPILER_API dpc_status dpc_trainer_run(const dpc_net *n, const dpc_trainer_opts *o,
                                            dpc_message *m);

/* Training across MPI ranks: `mpirun -np R dpc train MODEL --devices mpi`, or an application
 * that does what dpc does:
 *
 *   dpc_mpi_init(&argc, &argv, msg);          // MPI_Init_thread, unless already initialized
 *   o.devices = "mpi";                         // rank r is device r of the plan ("mpi:cpu:2":
 *                                              // devices 2r and 2r + 1)
 *   dpc_status st = dpc_trainer_run(net, &o, msg);
 *   if (st) fprintf(stderr, "%s\n", dpc_message_text(msg));
 *   dpc_mpi_finalize(st != DPC_OK);            // a failure ends every rank (MPI_Abort)
 *
 * Rank 0 alone calls the callbacks and writes the log, checkpoints and params. MPI belongs to the
 * process: an application that initialized it itself skips dpc_mpi_init (several devices a rank
 * need MPI_THREAD_MULTIPLE, which dpc_mpi_init asks for). Without MPI at build
 * time (dpc_has_mpi() false) dpc_mpi_init fails saying so. */
DPC_COMPILER_API dpc_status dpc_mpi_init(int *argc, char ***argv, dpc_message *m);
/* Whether spec is a --devices for MPI ranks ("mpi", "mpi:cpu", "mpi:cpu:N"), checked before MPI
 * starts (so a mistake is reported by every rank alike, not as a failed job). */
DPC_COMPILER_API dpc_status dpc_mpi_check_devices(const char *spec, dpc_message *m);
/* This process's rank in MPI_COMM_WORLD; -1 when MPI is not initialized or not built in. */
DPC_COMPILER_API int dpc_mpi_rank(void);
/* The ranks in MPI_COMM_WORLD; 0 when MPI is not initialized or not built in. */
DPC_COMPILER_API int dpc_mpi_size(void);
/* MPI_Finalize, or with failed, MPI_Abort: the other ranks may be waiting on this one, and
 * ending the job is what reaches them. Nothing when MPI is not initialized. */
DPC_COMPILER_API void dpc_mpi_finalize(bool failed);

#ifdef __cplusplus
}
#endif
#endif
