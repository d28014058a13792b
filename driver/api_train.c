/*
 * api_train.c — libdpc's trainer (include/dpc/train.h): the public options checked and mapped
 * onto the internal trainer's (driver/train.h), the strategy typed once by dpc_strategy_parse
 * whether it comes parsed (the command line) or as text, and a caller's data source wrapped as a
 * dataset (runtime/data.h) so it goes through the same code as the built-in ones. The test-only
 * entry of include/dpc/testing.h is here too: it is the same run with hooks.
 */
#include "driver/api_internal.h"
#include "driver/train.h"
#include "driver/train_testing.h"

#include <dpc/testing.h>
#include <dpc/train.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

DPC_COMPILER_API void dpc_trainer_defaults(dpc_trainer_opts *o) {
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->epochs = 1;
  o->batch = 64;
  o->shuffle = true;
  o->lr = o->momentum = o->weight_decay = NAN;
  o->build.size = sizeof o->build;
}

/* The strategies the trainer runs (one device: single, whatever is asked). */
#define TRAIN_KINDS                                                                                \
  ((1u << DPC_STRATEGY_DATA) | (1u << DPC_STRATEGY_MODEL) | (1u << DPC_STRATEGY_HYBRID) |          \
   (1u << DPC_STRATEGY_PIPELINE) | (1u << DPC_STRATEGY_ASYNC) | (1u << DPC_STRATEGY_LOCAL_SGD))

/* The internal options and what they point into. */
typedef struct mapped {
  dpc_train_opts o;
  dpc_dataset_source train_src, test_src;
  dpc_strategy strategy;
  char devices[32]; /* "cpu:N" for a strategy that names its device count alone */
} mapped;

/* A public source as the runtime's: the same callback, the shape as a dpc_shape. */
static dpc_status map_source(const dpc_data_source *s, const char *what, dpc_dataset_source *out,
                             dpc_diag *d) {
  if (!DPC_API_HAS(s, user))
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the %s data source's size is %zu, less than the %zu it needs: set it to "
                         "sizeof(dpc_data_source)",
                         what, s->size, sizeof *s);
  if (s->rank > DPC_MAX_RANK || s->rank > DPC_TENSOR_MAX_RANK)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the %s data source '%s': its samples have %u dimensions, more than %d",
                         what, s->name ? s->name : "", s->rank, DPC_MAX_RANK);
  memset(out, 0, sizeof *out);
  out->name = s->name;
  out->samples = s->samples;
  out->sample.rank = s->rank;
  for (unsigned k = 0; k < s->rank; k++) out->sample.d[k] = s->dims[k];
  out->classes = s->classes;
  out->fill = s->fill;
  out->user = s->user;
  return DPC_OK;
}

/* The typed strategy into the trainer's settings: the kind by name (model, hybrid, pipeline),
 * the model-parallel width, micro-batches, the pipeline's schedule, asynchronous staleness and
 * the local SGD period; a strategy that names its device count alone (a pipeline's stages x
 * replicas) gives the devices when none are set. */
static dpc_status apply_strategy(mapped *m, const dpc_strategy *s, dpc_diag *d) {
  dpc_train_opts *o = &m->o;
  if (s->given & (1u << DPC_STRATEGY_FIELD_PLACEMENT))
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the trainer places a model with METIS: a strategy's placement setting "
                         "is for plans");
  if ((unsigned)s->kind >= DPC_STRATEGY_KINDS)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "strategy kind %d is not one dpc knows", (int)s->kind);
  if (s->kind == DPC_STRATEGY_PIPELINE || s->kind == DPC_STRATEGY_HYBRID) o->mp = s->mp;
  o->accumulate = s->microbatches;
  o->pipeline = s->schedule;
  o->strategy = s->kind == DPC_STRATEGY_MODEL || s->kind == DPC_STRATEGY_HYBRID ||
                        s->kind == DPC_STRATEGY_PIPELINE
                    ? dpc_strategy_kind_name(s->kind)
                    : NULL;
  o->async = s->kind == DPC_STRATEGY_ASYNC;
  if (o->async) o->staleness = s->staleness;
  if (s->kind == DPC_STRATEGY_LOCAL_SGD) o->local_sgd = s->period;
  if (!o->shares) o->shares = s->shares;
  if (!o->device_memory) o->device_memory = s->memory_limit;
  if (!o->devices && s->devices > 1) {
    snprintf(m->devices, sizeof m->devices, "cpu:%u", s->devices);
    o->devices = m->devices;
  }
  return DPC_OK;
}

/* The strategy: the caller's parsed one, or its text parsed against the devices and the batch
 * (NULL text: data parallel over the devices, single on one). */
static dpc_status map_strategy(mapped *m, const char *text, const dpc_strategy *typed,
                               dpc_diag *d) {
  dpc_status st;
  if (typed) {
    m->strategy = *typed;
    if (m->o.devices && typed->devices) {
      uint32_t n = 0;
      if ((st = dpc_driver_count_devices(m->o.devices, &n, d))) return st;
      if (n != typed->devices)
        return dpc_diag_fail(d, DPC_ERR_INVALID,
                             "the strategy was parsed for %u devices, and '%s' makes %u",
                             typed->devices, m->o.devices, n);
    }
  } else {
    dpc_strategy_args a;
    dpc_strategy_args_init(&a);
    a.text = text;
    a.shares = m->o.shares, a.memory_limit = m->o.device_memory;
    a.kinds = TRAIN_KINDS;
    a.batch = m->o.batch; /* 0 (an artifact's own batch): not checked */
    if (m->o.devices && (st = dpc_driver_count_devices(m->o.devices, &a.devices, d))) return st;
    if ((st = dpc_strategy_parse(&a, &m->strategy, NULL, d))) return st;
  }
  return apply_strategy(m, &m->strategy, d);
}

/* A public option's value, or its default when the caller's struct is too old to have it. */
#define GET(p, field, def) (DPC_API_HAS(p, field) ? (p)->field : (def))

/* Check the public options and map them onto the internal ones. */
static dpc_status map_opts(const dpc_net *n, const dpc_trainer_opts *p, mapped *m, dpc_diag *d) {
  dpc_train_opts *o = &m->o;
  dpc_status st;
  dpc_train_defaults(o);
  o->artifact = GET(p, artifact, NULL);
  if (!n && !o->artifact)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "no model to train: give a net or an artifact");
  if (n && o->artifact)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "a net and the artifact %s: the trainer trains one of them", o->artifact);
  /* a model that kept the batch it was exported with trains at no other: its reason */
  if (n && n->fixed) return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s", n->fixed);
  o->data = GET(p, data, NULL);
  o->test_data = GET(p, test_data, NULL);
  const dpc_data_source *train_src = GET(p, train_source, NULL);
  const dpc_data_source *test_src = GET(p, test_source, NULL);
  if (train_src && o->data)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the training data is a dataset (%s) or a source, not both", o->data);
  if (test_src && o->test_data)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the test data is a dataset (%s) or a source, not both", o->test_data);
  if (train_src && (st = map_source(train_src, "training", &m->train_src, d))) return st;
  if (test_src && (st = map_source(test_src, "test", &m->test_src, d))) return st;
  o->train_source = train_src ? &m->train_src : NULL;
  o->test_source = test_src ? &m->test_src : NULL;
  o->epochs = GET(p, epochs, 1);
  o->steps = GET(p, steps, 0);
  o->batch = GET(p, batch, 64);
  if (o->batch > (1u << 24))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "the batch size %u is above the limit of %u", o->batch,
                         1u << 24);
  o->seed = GET(p, seed, 0);
  o->seed_given = GET(p, seed_given, false);
  o->shuffle = GET(p, shuffle, true);
  o->optimizer = GET(p, optimizer, NULL);
  o->lr = GET(p, lr, NAN);
  o->momentum = GET(p, momentum, NAN);
  o->weight_decay = GET(p, weight_decay, NAN);
  if (!isnan(o->lr) && !(isfinite(o->lr) && o->lr > 0))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "the learning rate %g must be above 0", o->lr);
  if (!isnan(o->momentum) && !(o->momentum >= 0 && o->momentum < 1))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "the momentum %g must be in [0, 1)", o->momentum);
  if (!isnan(o->weight_decay) && !(isfinite(o->weight_decay) && o->weight_decay >= 0))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "the weight decay %g must be 0 or more",
                         o->weight_decay);
  o->schedule = GET(p, lr_schedule, NULL);
  o->init_path = GET(p, init_path, NULL);
  o->save_path = GET(p, save_path, NULL);
  o->checkpoint_path = GET(p, checkpoint_path, NULL);
  o->checkpoint_every = GET(p, checkpoint_every, 0);
  o->resume_path = GET(p, resume_path, NULL);
  if (o->checkpoint_every && !o->checkpoint_path)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "a checkpoint every %llu steps needs a path to write checkpoints to",
                         (unsigned long long)o->checkpoint_every);
  if (o->resume_path && o->init_path)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "a run resumes from a checkpoint (%s) or starts from initial params "
                         "(%s), not both",
                         o->resume_path, o->init_path);
  o->log_path = GET(p, log_path, NULL);
  o->trace_path = GET(p, trace_path, NULL);
  if ((st = dpc_api_build(DPC_API_HAS(p, build) ? &p->build : NULL, &o->exec, &o->passes, d)))
    return st;
  uint32_t threads = GET(p, threads, 0);
  o->threads = threads > 1024 ? 1024 : threads;
  o->devices = GET(p, devices, NULL);
  o->shares = GET(p, shares, NULL);
  o->device_memory = GET(p, device_memory, 0);
  o->timeout_s = GET(p, timeout_s, 0);
  if (!(o->timeout_s >= 0))
    return dpc_diag_fail(d, DPC_ERR_INVALID, "the timeout %g s must be 0 (the default) or more",
                         o->timeout_s);
  if ((st = map_strategy(m, GET(p, strategy, NULL), GET(p, typed_strategy, NULL), d))) return st;
  o->cancel = GET(p, cancel, NULL);
  o->stop_checkpoint_path = GET(p, stop_checkpoint_path, NULL);
  o->on_start = GET(p, on_start, NULL);
  o->on_note = GET(p, on_note, NULL);
  o->on_step = GET(p, on_step, NULL);
  o->on_epoch = GET(p, on_epoch, NULL);
  o->on_stop = GET(p, on_stop, NULL);
  o->user = GET(p, user, NULL);
  o->pretend_hosts = GET(p, pretend_hosts, 0);
  o->mpi_comm = GET(p, mpi_comm, NULL);
  if (o->pretend_hosts && !dpc_driver_is_mpi(o->devices))
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%u pretended hosts group MPI ranks, and the devices are %s, not mpi",
                         o->pretend_hosts, o->devices ? o->devices : "cpu");
  return DPC_OK;
}

static dpc_status run(const dpc_net *n, const dpc_trainer_opts *p,
                      const dpc_train_test_hooks *hooks, dpc_diag *d) {
  dpc_trainer_opts defaults;
  if (!p) {
    dpc_trainer_defaults(&defaults);
    p = &defaults;
  }
  if (p->size == 0)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the trainer options' size is 0: fill them with dpc_trainer_defaults");
  mapped m;
  dpc_status st = map_opts(n, p, &m, d);
  if (st) return st;
  return dpc_train_hooked(n ? n->g : NULL, &m.o, hooks, d);
}

DPC_COMPILER_API dpc_status dpc_trainer_run(const dpc_net *n, const dpc_trainer_opts *o,
                                            dpc_message *m) {
  return run(n, o, NULL, m);
}

DPC_COMPILER_API dpc_status dpc_testing_trainer_run(const dpc_net *n, const dpc_trainer_opts *o,
                                                    const dpc_trainer_test_hooks *h,
                                                    dpc_message *m) {
  if (!h) return run(n, o, NULL, m);
  dpc_train_test_hooks hooks = {GET(h, stall_device, 0), GET(h, slow_worker, 0),
                                GET(h, hold_worker, 0), GET(h, memory, false)};
  return run(n, o, &hooks, m);
}
