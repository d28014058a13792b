/*
 * dpc.h — the public C API of dpc: run and train compiled models from an application.
 *
 * A model is compiled ahead of time with `dpc compile model.graph -o model.dpx --batch 32
 * [--train]`; the runtime library libdpcrt loads the artifact (no LLVM needed on the machine),
 * and a runner executes one of its plans on caller-owned buffers:
 *
 *   #include <dpc/dpc.h>
 *   char err[256];
 *   dpc_model *m;
 *   if (dpc_model_load("model.dpx", &m, err, sizeof err)) { fprintf(stderr, "%s\n", err); ... }
 *   dpc_runner_opts o = {sizeof o, .mode = DPC_MODE_INFER, .threads = 1};
 *   dpc_runner *r;
 *   if (dpc_runner_open(m, &o, &r, err, sizeof err)) { ... }
 *   _Alignas(64) float x[32 * 784], logits[32 * 10];
 *   dpc_runner_bind(r, "x", x, sizeof x);            // inputs are read at each run
 *   dpc_runner_bind(r, "logits", logits, sizeof logits); // outputs are written at each run
 *   if (dpc_runner_run(r)) fprintf(stderr, "%s\n", dpc_runner_error(r));
 *   dpc_runner_free(r);
 *   dpc_model_free(m);
 *
 * A DPC_MODE_TRAIN runner does one optimizer step per run (bind the data and the labels; read
 * "loss" with dpc_runner_read). Runners made with `share` use the other runner's params and
 * state, so an inference runner sees what a training runner learnt. Functions return a
 * dpc_status (0 is success); the message is in the `err` buffer given at creation, or
 * dpc_runner_error. Nothing here is global: any number of models and runners may coexist.
 *
 * Threads: a loaded model is never changed after dpc_model_load, so any number of runners on
 * one model may run at the same time from different threads, each with its own buffers. One
 * runner is used by one thread at a time (runners made with `share` count as one while any of
 * them trains: they use the same params; inference runners only read them, and may run at once,
 * as the batcher's instances do).
 *
 * Compatibility (this API is 0.x): a struct whose first field is `size` is extensible: the
 * caller sets size to sizeof the struct it was compiled with (`dpc_runner_opts o = {sizeof o}`)
 * and zero-initializes the rest; the library reads or writes only the fields that fit in size,
 * and zero means "the default" for every field added later. New fields go at the end, and new
 * functions are added, so within a minor version callers keep working. A minor version before
 * 1.0 may still change an existing declaration; this is said here with the version. 0.2 added
 * `size` to dpc_tensor_info (set it before dpc_runner_info), dpc_runner_opts and
 * dpc_runner_open, DPC_MODE_EVAL, in-place binding, dpc_runner_set_step and dpc_runner_step;
 * 0.3 added dpc_runner_opts.seed and dpc_runner_set_seed (and libdpc, dpc/compiler.h), then
 * the batcher (dpc_batcher_*) and DPC_ERR_BUSY, then dpc_ranks (dpc_runner_opts.ranks,
 * dpc_batcher_opts.ranks); 0.4 added dpc_build_opts.cuda_arch and .precision (dpc/compiler.h),
 * which moves the fields after a dpc_build_opts embedded in another options struct.
 */
#ifndef DPC_DPC_H
#define DPC_DPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DPC_BUILDING_RUNTIME) && (defined(__GNUC__) || defined(__clang__))
#define DPC_API __attribute__((visibility("default")))
#else
#define DPC_API
#endif

#define DPC_VERSION_MAJOR  0
#define DPC_VERSION_MINOR  4
#define DPC_VERSION_PATCH  0
#define DPC_VERSION_STRING "0.4.0"

/* Every dpc function that can fail returns one of these. DPC_OK is zero so `if (st)` reads as
 * "if it failed". */
typedef enum dpc_status {
  DPC_OK = 0,
  DPC_ERR_SYNTAX,      /* malformed input (a model, a file header) */
  DPC_ERR_SHAPE,       /* shapes or dtypes that do not fit */
  DPC_ERR_INVALID,     /* a bad argument, name or graph */
  DPC_ERR_IO,          /* a file could not be read or written */
  DPC_ERR_NOMEM,       /* an allocation failed */
  DPC_ERR_UNSUPPORTED, /* valid, but not something dpc does (yet) */
  DPC_ERR_RUNTIME,     /* a failure while running (a label out of range, ...) */
  DPC_ERR_INTERNAL,    /* a broken invariant inside dpc: a bug, please report it */
  DPC_ERR_BUSY,        /* a full queue or one that is closing: try again later, or elsewhere */
  DPC_STATUS_COUNT
} dpc_status;

/* A short lower-case name for a status ("syntax error", "shape error", ...). Never NULL. */
DPC_API const char *dpc_status_name(dpc_status st);

/* The library's own version, which may differ from the header's if linked against another. */
DPC_API int dpc_version_major(void);
DPC_API int dpc_version_minor(void);
DPC_API int dpc_version_patch(void);

/* ---- models and runners ------------------------------------------------------------------ */

typedef struct dpc_model dpc_model;   /* a loaded artifact */
typedef struct dpc_runner dpc_runner; /* one of its plans, ready to run */
/* The processes (MPI ranks) that the devices of a model split over devices run in, one device
 * each, and which of them this one is: made by libdpc for `dpc serve --devices mpi` (<dpc/
 * serve.h>), over a communicator of its own per batcher instance. The runtime itself links no
 * MPI and makes none. */
typedef struct dpc_ranks dpc_ranks;

typedef enum dpc_mode {
  DPC_MODE_INFER, /* the forward pass */
  DPC_MODE_TRAIN, /* one optimizer step per run (artifacts compiled with --train) */
  DPC_MODE_EVAL /* the forward pass with the loss as an output (artifacts compiled with --train) */
} dpc_mode;

/* Element types, as the .graph language names them. */
typedef enum dpc_elem {
  DPC_ELEM_F32,
  DPC_ELEM_F16,
  DPC_ELEM_BF16,
  DPC_ELEM_F64,
  DPC_ELEM_I32,
  DPC_ELEM_I64,
  DPC_ELEM_BOOL
} dpc_elem;

typedef enum dpc_role {
  DPC_ROLE_INPUT,  /* data the caller gives each run */
  DPC_ROLE_OUTPUT, /* results the caller reads each run */
  DPC_ROLE_PARAM   /* params and state: persist across runs */
} dpc_role;

/* The most dimensions a tensor has: a model with more is refused where it is read (the .graph
 * parser, the ONNX importer, dpc_model_load), with a message that names the limit. */
#define DPC_TENSOR_MAX_RANK 8

typedef struct dpc_tensor_info {
  size_t size;      /* set by the caller: sizeof(dpc_tensor_info) */
  const char *name; /* valid while the runner lives */
  dpc_elem elem;
  unsigned rank;                     /* at most DPC_TENSOR_MAX_RANK */
  int64_t dims[DPC_TENSOR_MAX_RANK]; /* dims[0 .. rank) */
  size_t bytes;
} dpc_tensor_info;

/* Load an artifact made by `dpc compile`. On failure *out is NULL and err holds the message. */
DPC_API dpc_status dpc_model_load(const char *path, dpc_model **out, char *err, size_t err_len);
/* Free a model; its runners must be freed first. */
DPC_API void dpc_model_free(dpc_model *m);
DPC_API const char *dpc_model_name(const dpc_model *m);
/* Whether the artifact holds a training step (compiled with --train). */
DPC_API int dpc_model_can_train(const dpc_model *m);

/* Messages the runtime would otherwise drop (a binding that falls back to copying, a failed or
 * cancelled run), with the runner's `log_user`. Called on the thread that called the runner; the
 * message is valid during the call only. The library never prints. */
typedef void (*dpc_log_fn)(void *user, const char *msg);

/* How to make a runner. Zero-initialize it and set size (see Compatibility above). */
typedef struct dpc_runner_opts {
  size_t size;             /* sizeof(dpc_runner_opts) */
  dpc_mode mode;           /* which plan: infer (default), train, or eval */
  const dpc_runner *share; /* NULL, or a runner of the same model whose params and state this one
                              uses (it must outlive this one) */
  unsigned threads;        /* threads per run: 0 for one per core (ignored on several devices,
                              where each device runs on its own cores) */
  const char *devices;     /* the devices of an artifact compiled for several, as `dpc train
                              --devices` takes them ("cpu:2"); NULL: cpu:N for its N */
  dpc_log_fn log;          /* NULL: messages are only kept for dpc_runner_error */
  void *log_user;
  const int *cancel; /* NULL, or a flag read (atomically) before every run: while it is
                        nonzero, runs fail with DPC_ERR_RUNTIME, "cancelled: ...". Set it
                        from any thread with an atomic store, e.g. __atomic_store_n */
  uint64_t step;     /* the step counter to start from: dropout masks are a function of
                        the model's compiled seed and the step, so a resumed run
                        continues a training run's masks exactly */
  uint64_t rows;     /* 0: the plan's batch. Else a partial batch of this many rows: the
                        runner takes the smallest plan of the mode made for at least that
                        many (dpc compile --batch-sizes 1,8; inference only: a train or eval
                        plan refuses a partial batch), pads the inputs' other rows
                        with zeros and gives the outputs' first rows. Batch inputs and
                        outputs then have `rows` rows (dpc_runner_info says so) and are
                        copied unless rows is the plan's own batch. */
  uint64_t seed;     /* 0: dropout masks come from the model's compiled seeds and the step.
                        Else this seed is mixed into every mask too, so runs with different
                        seeds drop differently and runs with the same seed alike (0.3) */
  /* NULL. Else an inference runner of a model split over processes, this one running its own
   * device's part: on device 0's process it takes the inputs and gives the outputs as usual,
   * each run handing the others their part; on the others it binds nothing and each run is the
   * device's part of a run device 0's process started (0.3) */
  const dpc_ranks *ranks;
} dpc_runner_opts;

/* A runner for one of the model's plans, as o says (NULL: an inference runner, defaults). */
DPC_API dpc_status dpc_runner_open(dpc_model *m, const dpc_runner_opts *o, dpc_runner **out,
                                   char *err, size_t err_len);
/* The same with the 0.1 arguments: dpc_runner_open with mode, share and threads set. */
DPC_API dpc_status dpc_runner_new(dpc_model *m, dpc_mode mode, const dpc_runner *share,
                                  unsigned threads, dpc_runner **out, char *err, size_t err_len);
DPC_API void dpc_runner_free(dpc_runner *r);
/* The message of the runner's last failure ("" if none). */
DPC_API const char *dpc_runner_error(const dpc_runner *r);

/* The tensors of a role, by index. dpc_runner_info needs info->size set (DPC_ERR_INVALID if it is
 * smaller than the 0.2 struct) and fills what fits in it. */
DPC_API unsigned dpc_runner_count(const dpc_runner *r, dpc_role role);
DPC_API dpc_status dpc_runner_info(const dpc_runner *r, dpc_role role, unsigned i,
                                   dpc_tensor_info *info);

/* Bind a caller-owned buffer (exactly the tensor's bytes) to an input or an output. Inputs are
 * read at every run and outputs written at every run until unbound (data NULL); the buffer must
 * stay valid until then. Where it can, the runner uses the buffer itself as the value's memory,
 * with no copy: the plan reads the input from it and writes the output into it during the run
 * (so the caller must not touch it while a run is in progress). That needs a buffer aligned to
 * 64 bytes, a model on one device, and a value whose memory the plan gives no other value;
 * otherwise the input is copied in before each run and the output out after it (and the log
 * callback says why). dpc_runner_in_place tells which. */
DPC_API dpc_status dpc_runner_bind(dpc_runner *r, const char *name, void *data, size_t bytes);
/* 1 if the bound value `name` uses the caller's buffer with no copy, 0 if not (or not bound). */
DPC_API int dpc_runner_in_place(const dpc_runner *r, const char *name);
/* Run the plan once: an inference, or one training step. Every input must be bound. */
DPC_API dpc_status dpc_runner_run(dpc_runner *r);
/* The step counter: runs completed (plus the step it was opened with or last set to). */
DPC_API uint64_t dpc_runner_step(const dpc_runner *r);
DPC_API void dpc_runner_set_step(dpc_runner *r, uint64_t step);
/* The run seed (dpc_runner_opts.seed) from the next run on; 0: the model's seeds alone. */
DPC_API void dpc_runner_set_seed(dpc_runner *r, uint64_t seed);
/* Copy any named value (a param, state, an output, the loss) out, or a param or state in. */
DPC_API dpc_status dpc_runner_read(dpc_runner *r, const char *name, void *data, size_t bytes);
DPC_API dpc_status dpc_runner_write(dpc_runner *r, const char *name, const void *data,
                                    size_t bytes);

/* ---- the batcher: requests of any row count, batched across threads ----------------------- */

/* A queue in front of a model's runners. Requests of 1 to max_batch rows come from any number
 * of threads; worker threads, one per instance (each its own runners on the model), take them in
 * arrival order and pack them into a batch of at most max_batch rows, run it on the smallest
 * plan that holds it (the artifact's --batch-sizes; the rows beyond it padded with zeros) and
 * copy each request's rows of every output back into its own buffers. A request's outputs are
 * the bits a runner with `rows` = its row count gives for it alone: rows never mix.
 *
 *   dpc_batcher_opts bo = {sizeof bo, .instances = 2, .delay_us = 2000, .max_queue = 256};
 *   dpc_batcher *b;
 *   if (dpc_batcher_open(m, &bo, &b, err, sizeof err)) { ... }
 *   const void *in[] = {x};                        // 3 rows of x, in dpc_batcher_info order
 *   void *out[] = {logits};                         // 3 rows of logits
 *   dpc_batcher_request rq = {sizeof rq, .rows = 3, .inputs = in, .outputs = out};
 *   dpc_batcher_ticket *t;
 *   dpc_status st = dpc_batcher_submit(b, &rq, &t, err, sizeof err);  // DPC_ERR_BUSY: queue full
 *   if (!st) st = dpc_batcher_wait(b, t, err, sizeof err);          // outputs written
 *   dpc_batcher_close(b);                           // finishes what is queued
 *
 * When a batch is cut: as soon as the queued requests fill max_batch rows, or when the oldest
 * has waited delay_us (0: at once, with whatever is queued when an instance is free). Waiting
 * makes batches larger (more throughput) and requests slower (more latency). Nothing is
 * global, no thread spins: idle workers and waiting callers sleep on condition variables, and
 * requests take no allocation once the batcher has served as many at a time before. */
typedef struct dpc_batcher dpc_batcher;
typedef struct dpc_batcher_ticket dpc_batcher_ticket; /* one submitted request, until waited */

/* How to make a batcher. Zero-initialize it and set size (see Compatibility above). */
typedef struct dpc_batcher_opts {
  size_t size;         /* sizeof(dpc_batcher_opts) */
  unsigned instances;  /* model instances, each its own runners and worker thread, all reading
                          one copy of the params: 0 means 1, or one per device for a model split
                          over devices (dpc compile --strategy model), whose instances take
                          turns on the devices so consecutive batches flow through them */
  unsigned threads;    /* threads per instance's run: 0 means 1 (the worker alone: instances
                          share the cores, and a run's thread pool binds from core 0) */
  const char *devices; /* each instance's devices, for an artifact compiled for several (as
                          dpc_runner_opts.devices) */
  uint64_t max_batch;  /* the most rows in a batch: 0 for the artifact's --batch */
  uint64_t delay_us;   /* how long the oldest queued request may wait for more rows before its
                          batch is cut: 0 runs what is queued as soon as an instance is free */
  uint64_t max_queue;  /* the most requests waiting for a batch: beyond it dpc_batcher_submit
                          fails with DPC_ERR_BUSY (a server answers 503). 0: no limit */
  dpc_log_fn log;      /* failed runs and the runners' messages; called on worker threads */
  void *log_user;
  /* Nonzero: the delay is chosen as the batcher runs (`auto`), from the arrival rate and the
   * service time of each batch size it measures: the shortest p99 latency under this target
   * while the load allows, the most throughput within it when the load is near capacity.
   * delay_us is then only the delay before the first measurement. Microseconds. */
  uint64_t latency_target_us;
  /* NULL. Else `instances` dpc_ranks (instances must be set), one per instance: a model split
   * over processes (dpc_runner_opts.ranks). On device 0's process the batcher takes requests as
   * usual and each batch flows through the other processes' devices; on the others it takes no
   * requests: its instances run their device's part of every batch device 0's process hands
   * them, until that batcher closes (which tells them to stop: close waits for it). (0.3) */
  dpc_ranks *const *ranks;
} dpc_batcher_opts;

/* One request. inputs[i] points to `rows` rows of the i-th input, outputs[i] to room for `rows`
 * rows of the i-th output (dpc_batcher_info gives their order and one row's bytes); the
 * buffers must stay valid, and the outputs untouched, until the request is answered. */
typedef struct dpc_batcher_request {
  size_t size; /* sizeof(dpc_batcher_request) */
  uint64_t rows;
  const void *const *inputs;
  void *const *outputs;
  /* NULL: the caller waits with dpc_batcher_wait. Else called once on a worker thread when the
   * request is answered (msg "" on success, valid during the call only), and no ticket is
   * given: for servers that answer from a callback. It delays that instance's next batch, so
   * keep it short; it must not call dpc_batcher_close. */
  void (*done)(void *user, dpc_status st, const char *msg);
  void *user;
} dpc_batcher_request;

/* Batches by rows in powers of two: hist[k] counts batches of 2^k to 2^(k+1) - 1 rows. */
#define DPC_BATCHER_HIST 32
/* Times by powers of two from 64 us: time_hist[k] counts times up to 2^k x 64 us (k < 15: up to
 * 1.05 s), time_hist[15] those above. */
#define DPC_BATCHER_TIME_HIST 16

typedef struct dpc_batcher_stats {
  size_t size;            /* set by the caller: sizeof(dpc_batcher_stats) */
  uint64_t requests;      /* answered (failed included) */
  uint64_t failed;        /* answered with an error (a failed run) */
  uint64_t refused;       /* refused by dpc_batcher_submit: queue full or closing */
  uint64_t batches, rows; /* batches run and their rows (rows / batches: the mean) */
  uint64_t batch_hist[DPC_BATCHER_HIST];
  uint64_t queue_ns_total; /* per request, from submit to the start of its batch */
  uint64_t queue_ns_max;
  uint64_t compute_ns_total; /* per batch: packing, the run and unpacking */
  uint64_t compute_ns_max;
  uint64_t delay_us; /* the delay in force */
  uint64_t max_batch;
  uint64_t queued, queued_rows; /* waiting for a batch now */
  unsigned instances, busy;     /* instances, and those running a batch now */
  uint64_t latency_target_us;   /* the auto delay's target; 0: the delay is fixed */
  double arrival_rate;          /* requests per second, as the auto delay last measured them */
  char delay_reason[224];       /* why the auto delay is what it is, in numbers */
  uint64_t queue_hist[DPC_BATCHER_TIME_HIST];   /* requests by their queue_ns */
  uint64_t compute_hist[DPC_BATCHER_TIME_HIST]; /* batches by their compute time */
} dpc_batcher_stats;

/* A batcher on m (which must outlive it), as o says (NULL: defaults). Refuses a model with an
 * input or output that is not batched (no leading batch dimension). */
DPC_API dpc_status dpc_batcher_open(dpc_model *m, const dpc_batcher_opts *o, dpc_batcher **out,
                                    char *err, size_t err_len);
/* The inputs (DPC_ROLE_INPUT) and outputs (DPC_ROLE_OUTPUT) of a request, in the order of its
 * arrays: the info of one row (dims[0] = 1, bytes = one row's bytes). */
DPC_API unsigned dpc_batcher_count(const dpc_batcher *b, dpc_role role);
DPC_API dpc_status dpc_batcher_info(const dpc_batcher *b, dpc_role role, unsigned i,
                                    dpc_tensor_info *info);
/* Queue a request; safe from any number of threads. DPC_ERR_BUSY when max_queue requests wait
 * already or the batcher is closing, DPC_ERR_SHAPE for rows outside 1..max_batch. Unless rq->done
 * is set, *ticket must be given to dpc_batcher_wait exactly once. */
DPC_API dpc_status dpc_batcher_submit(dpc_batcher *b, const dpc_batcher_request *rq,
                                      dpc_batcher_ticket **ticket, char *err, size_t err_len);
/* Block until the request is answered; its status (and message in err) then, the outputs
 * written on success. The ticket is gone after this. */
DPC_API dpc_status dpc_batcher_wait(dpc_batcher *b, dpc_batcher_ticket *ticket, char *err,
                                    size_t err_len);
/* Counters since open; stats->size set by the caller. */
DPC_API dpc_status dpc_batcher_get_stats(dpc_batcher *b, dpc_batcher_stats *stats);
/* Stop accepting: later submits fail with DPC_ERR_BUSY; what is queued still runs. Returns at
 * once (a server calls it on SIGTERM, then stops its threads, then closes). */
DPC_API void dpc_batcher_shutdown(dpc_batcher *b);
/* Drain and free: stop accepting, run everything queued (without waiting out the delay), join
 * the workers, and wait until every ticket has been waited for (by other threads: a ticket the
 * closing thread still holds would never be). No call on b may begin after it returns. */
DPC_API void dpc_batcher_close(dpc_batcher *b);

#ifdef __cplusplus
}
#endif
#endif
