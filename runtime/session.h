/*
 * session.h — running a plan: the executor.
 *
 * A session opens the plan's devices, allocates each device's one buffer (planned once, touched
 * once), fills params, state and constants, and then runs the plan's steps as often as asked,
 * with no allocation per run. The plan must outlive the session.
 *
 *   dpc_session *s;
 *   dpc_session_new(plan, &(dpc_session_opts){0}, &s, &d);
 *   dpc_session_set_input(s, "x", &x, &d);
 *   dpc_session_run(s, &d);
 *   dpc_tensor y; dpc_session_get(s, "logits", &y, &d);   // a view into the session's memory
 */
#ifndef DPC_RUNTIME_SESSION_H
#define DPC_RUNTIME_SESSION_H

#include "ir/plan.h"
#include "runtime/kernel.h"

#include <pthread.h>

typedef struct dpc_session dpc_session;
struct dpc_transport;

typedef struct dpc_session_opts {
  bool training;                /* dropout and batch_norm in training mode */
  const dpc_kernel_fn *kernels; /* backend kernel table, NULL for the reference backend */
  /* Another session whose params and state this one uses in place of its own (matched by name,
   * dtype and shape): plans for other batch sizes, or an evaluation plan, then train and read
   * the same weights. It must outlive this session. */
  const dpc_session *share;
  /* Compiled kernels, one per node of the plan's graph (fn NULL where the node has none); the
   * array must outlive the session. NULL: every node runs on `kernels`. */
  const dpc_native_kernel *native;
  /* Threads that run compiled kernels: 0 for one per core, 1 for the calling thread alone.
   * With several devices each device runs on its own cores (below) and this is ignored. */
  uint32_t threads;
  /* Several devices: the --devices spec they come from (runtime/topology.h; NULL: cpu:N for
   * the plan's N devices), and how long a device may wait for another (0: 60 s) before the
   * run fails with an error naming both. */
  const char *devices;
  double timeout_s;
  /* What the plan's devices open as: NULL (or "cpu") for the names the plan gives them, "cuda"
   * for cuda:0 .. cuda:(n-1), where kernels of the cuda backend run (runtime/device_cuda.c).
   * With a device_kind, the plan's first host_devices devices are the host's CPU (cpu:0 ..) and
   * the rest device_kind:0 ..: a plan mixing the CPU and GPUs. */
  const char *device_kind;
  uint32_t host_devices;
  /* Tests only (runtime/session_testing.h): hooks that make a device misbehave; NULL here. */
  const struct dpc_session_test_hooks *test;
  /* Collectives on a thread of their own per device, so a gradient's all-reduce overlaps the
   * rest of the backward pass: 0 when the machine has a PU beyond the devices' cores (on the
   * devices' own cores the thread takes turns with the kernels and costs more than it hides:
   * 71-85k against 87k samples/s for fashion_mlp on 2 cores), 1 always, -1 never (the device
   * runs each collective where its step list has it). */
  int comm_thread;
  /* Across processes (dpc train --devices mpi): this process is device `self` of the plan and
   * runs that device's step list alone, over `peers` (borrowed; plan->n_devs ranks, this process
   * being rank `self`): every collective must connect all of the plan's devices in order, and a
   * value read on another device than the one making it is sent there (runtime/handoff.h). The
   * other devices' memory is still allocated here, so the inputs the data loader fills on device
   * 0 are in reach of every replica's slice and handed values land in their own slots. NULL:
   * every device runs in this process. */
  struct dpc_transport *peers;
  uint32_t self;
  /* With peers: devices self .. self + local - 1 run in this process (0 or 1: self alone), the
   * plan having peers->ranks * local devices, process r running devices r * local on. Values
   * pass between them in memory; collectives that reach other processes sum here first and
   * then across (runtime/transport_split.c); values handed between processes are not built. */
  uint32_t local;
  /* With peers (one device a process): an inference run whose request is in device 0's
   * process, as a model split over MPI ranks is served (runtime/exchange.h): device 0's process
   * hands each other device the inputs its kernels read before every run, and takes back the
   * plan's outputs made elsewhere after it; in the other processes the inputs count as given.
   * Each process fills only the params and state of its own device. */
  bool exchange;
} dpc_session_opts;

dpc_status dpc_session_new(const dpc_plan *plan, const dpc_session_opts *o, dpc_session **out,
                           dpc_diag *d);
void dpc_session_free(dpc_session *s);
/* How the collectives between its GPUs go: "all-reduces over NCCL 2.28.9", or "all-reduces through
 * the host: " and why NCCL is not used; "" when it has no collective between GPUs. */
const char *dpc_session_comm_note(const dpc_session *s);

/* Copy an input (or, to load weights, a param or state) into the session. Float data converts
 * to the model's float dtype and integer data to its integer dtype; the shape must be the
 * model's. */
dpc_status dpc_session_set(dpc_session *s, const char *name, const dpc_tensor *t, dpc_diag *d);
/* Host memory for input `value`, to fill in place; the input counts as given. On a device whose
 * memory the host can address (the cpu) it is the device memory itself, with no copy; otherwise
 * a host copy that the next run uploads through the device. */
dpc_tensor dpc_session_input(dpc_session *s, uint32_t value);
/* Let input or output `value` live in caller memory instead of its planned slot, so runs read
 * or write `data` directly (no copy); an input placed counts as given. DPC_ERR_UNSUPPORTED (and
 * nothing changed) where the plan does not allow it: several devices, data not aligned to
 * DPC_SLOT_ALIGN, or a slot that another value also uses (memory reuse, in-place ops, views).
 * data NULL puts the value back in its slot. Not while a run is in progress. */
dpc_status dpc_session_place(dpc_session *s, uint32_t value, void *data, dpc_diag *d);
/* Run every step once. Fails if an input was never set. */
dpc_status dpc_session_run(dpc_session *s, dpc_diag *d);
/* A host view of any named value's current contents, to read (change a value with
 * dpc_session_set or dpc_session_copy). On a device whose memory the host can address it is
 * the device memory itself; otherwise a host copy made now through the device, valid until the
 * next read of a value it shares memory with. */
dpc_status dpc_session_get(const dpc_session *s, const char *name, dpc_tensor *view, dpc_diag *d);
/* The same by value id. */
dpc_tensor dpc_session_value(const dpc_session *s, uint32_t value);
/* Copy value `value` out to host memory, or into it from host memory (bytes as the model's
 * dtype and shape), through the device. */
dpc_status dpc_session_read(const dpc_session *s, uint32_t value, void *host, dpc_diag *d);
dpc_status dpc_session_write(dpc_session *s, uint32_t value, const void *host, dpc_diag *d);
/* Several devices: each group of `copies` values (values[g * copies + k], each on a device of
 * its own: a param's replicas) becomes their mean, summed in f64 in the order given, through
 * the session's transport, every device doing its own part. Local SGD's averaging. */
dpc_status dpc_session_average(dpc_session *s, const uint32_t *values, uint32_t groups,
                               uint32_t copies, dpc_diag *d);
/* Value dst_value of dst takes src_value of src (the same session, or another whose plan has
 * the value's dtype and shape), device to device: a peer copy between different devices. */
dpc_status dpc_session_copy(dpc_session *dst, uint32_t dst_value, const dpc_session *src,
                            uint32_t src_value, dpc_diag *d);
/* How many times run has completed. */
uint64_t dpc_session_steps(const dpc_session *s);
/* Set the step counter (it seeds dropout masks): to resume a run, or to repeat a step exactly. */
void dpc_session_set_step(dpc_session *s, uint64_t step);
/* A run seed mixed into every dropout mask, beside the model's own seeds and the step (0: none,
 * the masks the model's seeds alone give). */
void dpc_session_set_seed(dpc_session *s, uint64_t seed);
/* Turns on the devices shared with other sessions of a split model (runs at once on the same
 * cores, as a server's instances are): each device takes turns[k] (a mutex per device, borrowed,
 * n of them) for its part of a run, so a device works on one run at a time and the next run's
 * first device starts while this one's later devices finish: consecutive runs pass through the
 * devices as a pipeline. Only for plans whose devices never wait on a later device nor meet in a
 * collective (dpc_session_pipelines): a device holding its turn waits only on earlier devices,
 * which never wait for a turn held by a later one, so turns cannot deadlock. Across processes
 * (peers with exchange) a session takes only its own device's turn, once the first value it
 * waits for has arrived. NULL: none. */
bool dpc_session_pipelines(const dpc_session *s);
/* The same of a plan run in one process. */
bool dpc_plan_pipelines(const dpc_plan *p);
void dpc_session_set_turns(dpc_session *s, pthread_mutex_t *turns, uint32_t n);
/* Time every step of the plan from now on (on) or no longer (off; the times are dropped). Costs
 * two clock reads a step: for `dpc bench --profile`, not for production runs. */
dpc_status dpc_session_profile(dpc_session *s, bool on, dpc_diag *d);
/* Seconds spent in each step of device dev's step list, summed over the runs since profiling
 * began (0 for steps a fusion group's root computes); NULL when not profiling. */
const double *dpc_session_step_seconds(const dpc_session *s, uint32_t dev);

/* Several devices: seconds each spent computing (its kernels and copies; not waiting for a
 * peer's value or in a collective) over the runs since the session opened or since the last
 * reset, into seconds[0 .. devices) (zeros on one device). Data parallelism sizes replicas'
 * shares by it (dpc --shares auto). */
void dpc_session_busy(dpc_session *s, double *seconds, bool reset);

/* A timeline (dpc train --trace): when each step of each device started and ended, for the next
 * `runs` runs (0 stops recording). Times are seconds on the monotonic clock. */
typedef struct dpc_trace_event {
  uint32_t step; /* index in the device's step list */
  uint32_t run;  /* which recorded run */
  double start, end;
} dpc_trace_event;
dpc_status dpc_session_trace(dpc_session *s, uint32_t runs, dpc_diag *d);
const dpc_trace_event *dpc_session_trace_events(const dpc_session *s, uint32_t dev, uint32_t *n);

#endif
