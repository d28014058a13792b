/*
 * train_internal.h — the trainer's state, shared by train.c (the loop) and train_io.c (files).
 */
#ifndef DPC_TOOLS_TRAIN_INTERNAL_H
#define DPC_TOOLS_TRAIN_INTERNAL_H

#include "ir/plan.h"
#include "runtime/artifact.h"
#include "runtime/data.h"
#include "runtime/session.h"
#include "runtime/session_testing.h"
#include "driver/strategy.h"
#include "driver/train.h"
#include "driver/train_testing.h"

#include <stdio.h>

/* A plan for one batch size and its session, with the values the loop reads. */
typedef struct run_t {
  uint32_t n;
  dpc_plan *plan;
  dpc_session *s;
  dpc_native_kernel *native; /* compiled kernels, one per node; NULL on the reference backend */
  bool borrowed;             /* plan and kernels belong to the artifact */
  bool parallel;             /* data parallel over the devices: the replicas stay in step */
  bool across;               /* --devices mpi: every rank runs its own device's steps */
  bool split;                /* across, the model split over the ranks (not data parallel) */
  uint32_t x, y, loss, lr, logits; /* value ids in plan->g */
} run_t;

typedef struct trainer {
  const dpc_train_opts *o;
  const dpc_train_opts *given; /* as given: o is quiet on ranks > 0 */
  uint32_t replicas;           /* devices of --devices (1: one device) */
  dpc_strategy strategy;       /* the options' strategy, typed (one device: single) */
  bool placed_auto;            /* --strategy model placed the model with METIS */
  dpc_graph *model;            /* the model with the command line's optimizer settings */
  dpc_graph *train_g;          /* after the training passes, batch symbolic */
  dpc_graph *eval_g; /* after the inference passes; outputs: the model's first, then the loss */
  char x_name[256], y_name[256], loss_name[256];
  uint32_t batch_sym;
  uint32_t *shares;  /* --shares: each replica's samples of a full batch; NULL: even */
  uint32_t batch;    /* samples per step: --batch, or the artifact's */
  dpc_artifact *art; /* opts.artifact, opened; NULL when training a graph */
  dpc_dataset *train_ds, *test_ds;
  dpc_order order;
  uint64_t batches, total_steps;
  run_t train_full, train_tail, eval_full, eval_tail; /* train_full owns params and state */
  dpc_codegen *cg; /* the codegen backend, shared by every plan; NULL on the reference one */
  /* --devices cpu,cuda:0,...: device 0 of a plan over several is the host's CPU, its kernels
   * compiled by cg_host (LLVM), the GPUs' after it by cg */
  uint32_t host_devices;
  dpc_codegen *cg_host;
  uint64_t step, epoch, batch_pos; /* where the run is: steps done, epoch, next batch */
  bool resumed;
  bool comm_noted;      /* the GPUs' all-reduce path said (on_note) */
  bool replicas_loaded; /* local SGD: the checkpoint held every replica's own values */
  FILE *log;
  struct async_state *async;            /* --sync async: the workers and the server's bookkeeping */
  dpc_session_test_hooks session_hooks; /* what dpc_train_session_hooks hands the sessions */
  const dpc_train_test_hooks *test;     /* NULL but in tests (dpc_train_hooked) */
  /* --devices mpi (train_mpi.c): this process is rank `rank` of `ranks`, device `rank` of the
   * data-parallel plan; peers is the MPI transport between the ranks (NULL without MPI) */
  struct dpc_transport *peers;
  struct dpc_device *peer_dev; /* the device the transport stages through */
  uint32_t rank, ranks;
  uint32_t local; /* devices a rank (mpi:cpu:L); rank r runs devices r * local on */
  uint32_t hosts; /* hosts the ranks are on, real or pretended (1 without MPI) */
  double link_gbs, link_latency_s; /* rank 0: the link measured between hosts (or ranks 0, 1) */
  dpc_train_opts quiet;            /* ranks > 0: the options without callbacks and output files */
} trainer;

/* The test hooks a session of this run takes (NULL in production, where t->test is NULL). */
static inline const dpc_session_test_hooks *dpc_train_session_hooks(trainer *t) {
  if (!t->test) return NULL;
  t->session_hooks =
      (dpc_session_test_hooks){t->test->stall_device, t->test->memory, t->test->host_devices};
  return &t->session_hooks;
}

/* Whether the run was asked to stop (dpc_train_opts.cancel). */
static inline bool dpc_train_cancelled(const trainer *t) {
  return t->o->cancel && *t->o->cancel;
}

/* train_io.c */
dpc_status dpc_train_peek_checkpoint(trainer *t, dpc_diag *d); /* settings the graph needs */
dpc_status dpc_train_load_checkpoint(trainer *t, dpc_diag *d); /* values and position */
dpc_status dpc_train_save_checkpoint(trainer *t, uint64_t epoch, uint64_t batch, dpc_diag *d);
dpc_status dpc_train_save_checkpoint_to(trainer *t, const char *path, uint64_t epoch,
                                        uint64_t batch, dpc_diag *d);
dpc_status dpc_train_load_params(trainer *t, const char *path, dpc_diag *d);
/* --trace: the recorded first steps of the training session as a Chrome trace. */
dpc_status dpc_train_write_trace(trainer *t, dpc_diag *d);
dpc_status dpc_train_save_params(trainer *t, const char *path, dpc_diag *d);
void dpc_train_log_step(trainer *t, const dpc_train_step *s);
void dpc_train_log_epoch(trainer *t, const dpc_train_epoch *e);

/* train.c: r's plan's kernels compiled with the trainer's LLVM backend into r->native (nothing
 * on the reference backend). */
dpc_status dpc_train_compile(trainer *t, run_t *r, dpc_diag *d);

/* train_async.c: --sync async. Open the server (as t->train_full) and the workers, from t->train_g;
 * run (the rest of) one epoch from t->batch_pos, leaving t->batch_pos where it stopped (t->batches
 * when the epoch is done); free them. */
dpc_status dpc_train_async_open(trainer *t, dpc_diag *d);
dpc_status dpc_train_async_epoch(trainer *t, dpc_train_epoch *ep, dpc_diag *d);
void dpc_train_async_free(trainer *t);

/* train_mpi.c: --devices mpi. Open the transport between the ranks (t->peers, t->rank); close
 * it. */
dpc_status dpc_train_mpi_open(trainer *t, dpc_diag *d);
/* MPI_THREAD_MULTIPLE, or an error saying that `what` (a plural subject) needs it. */
dpc_status dpc_train_mpi_threads(const char *what, dpc_diag *d);
void dpc_train_mpi_close(trainer *t);
/* Every rank planned p alike (a hash compared across ranks), or an error naming the ranks. */
dpc_status dpc_train_mpi_check_plan(trainer *t, const dpc_plan *p, dpc_diag *d);
/* Replica 0's params and state (current on rank 0 after a step it ran alone) to every rank. */
dpc_status dpc_train_mpi_share(trainer *t, dpc_diag *d);
/* A model split over the ranks (run_t.split): value v of r to every rank from the rank whose
 * device holds it; every param and state of the training run likewise (before rank 0
 * evaluates or writes them). Nothing otherwise. Every rank calls them alike. */
dpc_status dpc_train_mpi_fetch(trainer *t, const run_t *r, uint32_t v, dpc_diag *d);
dpc_status dpc_train_mpi_gather(trainer *t, dpc_diag *d);
/* *flag becomes whether it is set on any rank. Every rank calls it alike. */
dpc_status dpc_train_mpi_any(trainer *t, bool *flag, dpc_diag *d);
/* --trace across ranks: every device's recorded steps to rank 0, each rank's times measured
 * from a barrier they pass together (so hosts' clocks need not agree); ev[i], n[i] are this
 * rank's own on entry and every rank's on return (in *owned, freed by the caller). */
dpc_status dpc_train_mpi_trace(trainer *t, const dpc_trace_event **ev, uint32_t *n,
                               dpc_trace_event **owned, dpc_diag *d);
/* Rank 0's placement of t->model (st: how placing it went there) to every rank; on rank 0 st
 * comes back, elsewhere rank 0's failure is reported as such. */
dpc_status dpc_train_mpi_placement(trainer *t, dpc_status st, dpc_diag *d);

#endif
