/*
 * session_impl.h — the session's own state, shared by its two files: session.c (making one,
 * running it, its values) and session_open.c (what a session over several devices or processes
 * opens: copies between devices that share no memory, collectives, runner threads, peers).
 */
#ifndef DPC_RUNTIME_SESSION_IMPL_H
#define DPC_RUNTIME_SESSION_IMPL_H

#include "runtime/session.h"

#include "runtime/device.h"
#include "runtime/exchange.h"
#include "runtime/executor.h"
#include "runtime/handoff.h"
#include "runtime/imports.h"
#include "runtime/overlap.h"
#include "runtime/pool.h"
#include "runtime/transport.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct step_args {
  dpc_kernel_args a;
  dpc_kernel_fn fn;         /* the table's kernel: run when there is no native one, and for the
                               message when a native kernel reports bad data */
  dpc_native_kernel native; /* kind DPC_KERNEL_NONE when none, else DPC_KERNEL_HOST */
  void **ptrs;              /* the native kernel's args: input then output data pointers (for a
                               fusion group's root, the group's inputs then its outputs) */
  uint32_t n_ptrs;
  dpc_launch launch;    /* what the device runs: the native kernel, else fn */
  bool fused;           /* computed by its group's compiled kernel: nothing to run */
  bool comm;            /* a communication op between devices: this device's part of it */
  uint32_t rank;        /* comm: which input/output is this device's */
  dpc_transport *group; /* comm: the transport of the devices it connects */
  int32_t comm_k;       /* comm: its place among the device's collectives (overlap.h) */
  int32_t need_k;       /* the last of them whose result this step reads; -1: none */
  uint64_t bytes;       /* the data the native kernel reads and writes */
  uint32_t *imports;    /* the values it reads from other devices' memory (imports.h) */
  uint32_t n_imports;
} step_args;

/* A native kernel that touches less data than this runs on the calling thread alone: waking
 * the device's other threads and waiting for them costs microseconds, more than such a kernel
 * takes (a small model's forward pass ran 7-11x slower split over 2 cores). */
#define SPLIT_MIN_BYTES (64u << 10)

struct dpc_session {
  const dpc_plan *plan;
  dpc_device **devs;
  unsigned char **mem; /* per device buffer (a device handle) */
  /* per device whose memory the host cannot address: a host copy of its buffer, laid out the
   * same, that views are read from and inputs filled in (then uploaded by the next run) */
  unsigned char **shadow;
  bool *staged;                 /* per value: an input filled in the shadow, not yet uploaded */
  dpc_device_event *dev_events; /* per plan event: the producer's point in its work */
  step_args **steps;            /* per device, per step (kernel steps only) */
  dpc_tensor *tensors;          /* per value: view into its slot */
  dpc_tensor *targs;            /* argument tensors, gathered per step */
  void **tptrs;                 /* their data pointers, for native kernels */
  void **gptrs;                 /* the arguments of compiled fusion groups */
  bool *given;                  /* per value: input set at least once */
  bool *shared;                 /* per value: memory belongs to another session (opts.share) */
  dpc_run_info run;
  const dpc_kernel_fn *kernels;
  dpc_pool *pool; /* runs compiled kernels across the cores; NULL without them */
  double **prof;  /* per device, per step: seconds (dpc_session_profile); NULL when off */
  double *busy;   /* per device: seconds computing, not waiting (dpc_session_busy) */
  /* several devices */
  dpc_pool **pools;      /* per device: its cores */
  dpc_executor *ex;      /* its runner threads */
  dpc_transport **comms; /* one per set of devices a collective connects, in rank order */
  char comm_note[200];   /* GPUs' collectives: "NCCL 2.28.9", or why they go through the host */
  dpc_imports imports;   /* values read across devices that share no memory */
  uint64_t runs;         /* dpc_session_run calls: when each import was copied */
  uint32_t n_comms;
  /* dpc_session_average: a transport per list of devices that hold a value's copies, and the
   * call under way (its copies, `avg_r` per group) */
  struct avg_comm {
    uint32_t *set, n;
    dpc_transport *t;
  } * avg_comms;
  uint32_t n_avg_comms;
  const uint32_t *avg;
  uint32_t avg_groups, avg_r;
  dpc_overlap **overlap;    /* per device with collectives: the thread that runs them */
  uint32_t (*jobs)[2];      /* per collective step: its device and step index */
  _Atomic uint64_t *events; /* per plan event: the run (step + 1) that last signalled it */
  _Atomic int failed;       /* a device failed in this run: stop waiting */
  /* the device that failed first (claimed before `failed` is raised, so the devices that fail
   * because of it cannot claim it) and its message: the run's error */
  _Atomic int first;
  dpc_status first_status;
  char first_msg[512];
  bool broken;          /* a run failed: events and collectives are out of step */
  dpc_transport *peers; /* dpc_session_opts.peers: only device `self` runs here */
  uint32_t self;
  dpc_handoff *handoff;   /* with peers: the values that cross to and from the other processes */
  dpc_exchange *exchange; /* dpc_session_opts.exchange: the run's inputs and outputs */
  bool *reserved;         /* per device: its buffer was reserved (touch_used zeroes its parts) */
  bool *core_shared;      /* per device: it shares its cores with another device (open_devices) */
  uint32_t dev0; /* the executor's device i is plan device dev0 + i (several devices a process) */
  double timeout_s;
  uint32_t stall; /* dpc_session_test_hooks.stall_device */
  /* dpc_session_trace: per device, the recorded step events */
  dpc_trace_event **trace;
  uint32_t *n_trace, trace_cap, trace_runs, trace_run;
  pthread_mutex_t *turns; /* dpc_session_set_turns: per device, borrowed */
  uint32_t n_turns;
};

/* session_open.c, called by dpc_session_new: each kernel's inputs held on devices it cannot
 * address as imports (base: each node's first argument in targs/tptrs); and the devices of a
 * plan over several (runner threads, pools, collectives), over peers in other processes, or
 * several devices a process among peers. */
dpc_status dpc_session_open_imports(dpc_session *s, const dpc_session_opts *o, const uint32_t *base,
                                    dpc_diag *d);
dpc_status dpc_session_open_devices(dpc_session *s, const dpc_session_opts *o, dpc_diag *d);
dpc_status dpc_session_open_peers(dpc_session *s, const dpc_session_opts *o, dpc_diag *d);
dpc_status dpc_session_open_rank_devices(dpc_session *s, const dpc_session_opts *o, dpc_diag *d);
/* session.c: a device's runner (the executor's callback). */
dpc_status dpc_session_run_device(void *ctx, uint32_t dev, dpc_diag *d);

#endif
