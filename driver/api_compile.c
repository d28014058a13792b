/*
 * api_compile.c — a model compiled ahead of time into an artifact (include/dpc/compiler.h,
 * dpc_net_compile): the plans made at the batch asked for, their kernels compiled for the target
 * CPU and written as one shared library that libdpcrt runs without LLVM.
 */
#include "driver/api_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dpc_compile_opts.cancel is an int the codegen reads as a sig_atomic_t (what a signal handler
 * may write): the two are one type on the platforms dpc builds for. */
_Static_assert(_Generic((sig_atomic_t)0, int : 1, default : 0), "sig_atomic_t is not int");

/* A copy of g through the pipeline, every symbol bound, planned on one device, data parallel
 * over `replicas` (each replica's symbols at vals / replicas where vals is the batch), or, with
 * `split` devices, as the placement on src's nodes puts it (model parallel). */
static dpc_status make_plan(const dpc_graph *src, const dpc_pass_opts *base, bool training,
                            bool eval, const int64_t *vals, int64_t batch, uint32_t replicas,
                            uint32_t split, dpc_plan **out, dpc_diag *d) {
  dpc_graph *g = dpc_graph_clone(src);
  if (!g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_pass_opts po = *base;
  po.training = training;
  dpc_status st = eval ? dpc_graph_add_output(g, g->obj.loss, d) : DPC_OK;
  if (!st) st = dpc_passes_run(g, &po, d);
  int64_t *per = calloc(g->n_syms ? g->n_syms : 1, sizeof *per);
  if (!per && !st) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; per && k < g->n_syms; k++)
    per[k] = vals[k] == batch ? batch / replicas : vals[k];
  if (!st) st = dpc_graph_bind(g, per, d);
  if (!st && split > 1)
    st = dpc_driver_plan(g, batch, &(dpc_driver_strategy){.replicas = 1, .mp = split}, training,
                         out, d);
  else if (!st && replicas > 1)
    st = dpc_driver_plan(g, batch, &(dpc_driver_strategy){.replicas = replicas, .mp = 1}, training,
                         out, d);
  else if (!st)
    st = dpc_plan_single(g, "cpu:0", training, out, d);
  free(per);
  dpc_graph_free(g);
  return st;
}

/* The objective's schedule when it needs a horizon the model does not give (cosine, linear);
 * NULL when it needs none or has one. */
static const char *schedule_without_horizon(const dpc_graph *g) {
  const char *sched = NULL;
  for (uint32_t i = 0; i < g->obj.n_attr; i++) {
    const dpc_attr *a = &g->attrs[g->obj.attr + i];
    const char *name = dpc_graph_str(g, a->name);
    if (!strcmp(name, "total_steps")) return NULL;
    if (!strcmp(name, "schedule") && a->kind == DPC_ATTR_STR) sched = dpc_graph_str(g, a->u.s);
  }
  return sched && (!strcmp(sched, "cosine") || !strcmp(sched, "linear")) ? sched : NULL;
}

/* The objective's total_steps set to n (any value it had replaced). */
static void set_horizon(dpc_graph *g, uint64_t n) {
  uint32_t mark = dpc_graph_attr_mark(g);
  for (uint32_t i = 0; i < g->obj.n_attr; i++)
    if (strcmp(dpc_graph_str(g, g->attrs[g->obj.attr + i].name), "total_steps"))
      dpc_graph_attr_copy(g, g, &g->attrs[g->obj.attr + i]);
  dpc_graph_attr_int(g, "total_steps", (int64_t)n);
  g->obj.attr = mark;
  g->obj.n_attr = dpc_graph_attr_mark(g) - mark;
}

/* The caller's info (of the size it says), written from a full one. */
static void give_info(const dpc_compile_opts *o, const dpc_compile_info *full) {
  dpc_compile_info *to = DPC_API_HAS(o, info) ? o->info : NULL;
  if (!to) return;
  size_t n = to->size < sizeof *full ? to->size : sizeof *full;
  size_t size = to->size;
  memcpy(to, full, n);
  to->size = size;
}

static bool cancelled(const volatile int *cancel) {
  return cancel && *cancel;
}

enum { MAX_PLANS = 3 + DPC_COMPILE_MAX_BATCH_SIZES };

static bool fits(const dpc_plan *p, uint64_t limit) {
  for (uint32_t k = 0; k < p->n_devs; k++)
    if (p->devs[k].bytes > limit) return false;
  return true;
}

/* The model's nodes placed over the n devices of `devs` by the partitioner, under the limit
 * (0: none), for make_plan's split. A placement the model gives itself is kept. */
static dpc_status place_split(dpc_graph *g, int64_t batch, const char *devs, uint32_t n,
                              uint64_t limit, dpc_diag *d) {
  bool placed = false;
  dpc_driver_place_opts po = {.mem_limit = limit, .microbatches = 1};
  return dpc_driver_place(g, batch, devs, n, &po, &placed, NULL, d);
}

DPC_COMPILER_API dpc_status dpc_net_compile(const dpc_net *n, const dpc_compile_opts *o,
                                            const char *path, dpc_message *m) {
  dpc_compile_info info = {sizeof info, .replicas = 1};
  bool train = DPC_API_HAS(o, train) && o->train;
  uint32_t batch_given = DPC_API_HAS(o, batch) ? o->batch : 0;
  /* a training artifact takes the trainer's batch; inference answers one request at a time */
  int64_t batch = batch_given ? batch_given : train ? 64 : 1;
  const uint32_t *sizes = DPC_API_HAS(o, batch_sizes) ? o->batch_sizes : NULL;
  unsigned n_sizes = sizes && DPC_API_HAS(o, n_batch_sizes) ? o->n_batch_sizes : 0;
  const char *const *dims = DPC_API_HAS(o, dims) ? o->dims : NULL;
  unsigned n_dims = dims && DPC_API_HAS(o, n_dims) ? o->n_dims : 0;
  const char *devs = DPC_API_HAS(o, devices) ? o->devices : NULL;
  uint64_t total_steps = DPC_API_HAS(o, total_steps) ? o->total_steps : 0;
  const volatile int *cancel = DPC_API_HAS(o, cancel) ? o->cancel : NULL;
  info.batch = (uint32_t)batch;

  dpc_exec_opts x;
  dpc_pass_opts po;
  dpc_status st =
      dpc_api_build(DPC_API_HAS(o, build) && o->build.size ? &o->build : NULL, &x, &po, m);
  if (st) return st;
  if (!path) return dpc_diag_fail(m, DPC_ERR_INVALID, "no artifact path given");
  if (batch > DPC_COMPILE_MAX_BATCH) {
    info.problem = DPC_COMPILE_BAD_BATCH;
    give_info(o, &info);
    return dpc_diag_fail(m, DPC_ERR_INVALID, "the batch size %lld is more than the %u dpc compiles",
                         (long long)batch, DPC_COMPILE_MAX_BATCH);
  }
  if (DPC_API_HAS(o, cpu)) x.cpu.cpu = o->cpu;
  if (DPC_API_HAS(o, features)) x.cpu.features = o->features;

  dpc_graph *g = dpc_graph_clone(n->g);
  int64_t *vals = g ? calloc(g->n_syms ? g->n_syms : 1, sizeof *vals) : NULL;
  dpc_plan *plans[MAX_PLANS] = {NULL};
  char roles[MAX_PLANS][32];
  dpc_codegen *cg = NULL;
  if (!vals) {
    st = dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
    goto done;
  }
  /* symbols: the dims given, the rest take the batch */
  for (uint32_t k = 0; k < g->n_syms; k++) vals[k] = batch;
  for (unsigned i = 0; i < n_dims; i++) {
    const char *a = dims[i], *eq = a ? strchr(a, '=') : NULL;
    char *end = NULL;
    long long v = eq ? strtoll(eq + 1, &end, 10) : -1;
    uint32_t k = eq ? dpc_graph_find_symbol(g, a, (size_t)(eq - a)) : DPC_NONE;
    if (!eq || *end || v < 0 || k == DPC_NONE) {
      info.problem = DPC_COMPILE_BAD_DIM, info.index = i;
      st = dpc_diag_fail(m, DPC_ERR_INVALID,
                         "'%s' does not give a dimension of the model its size (NAME=VALUE)",
                         a ? a : "");
      goto done;
    }
    vals[k] = v;
  }
  if (train) {
    if (g->obj.loss == DPC_NONE) {
      info.problem = DPC_COMPILE_NO_LOSS;
      st = dpc_diag_fail(m, DPC_ERR_INVALID,
                         "%s has nothing to minimize: training needs a 'minimize' line", n->path);
      goto done;
    }
    const char *needs = total_steps ? NULL : schedule_without_horizon(g);
    if (needs) {
      info.problem = DPC_COMPILE_NO_HORIZON;
      snprintf(info.schedule, sizeof info.schedule, "%s", needs);
      st = dpc_diag_fail(m, DPC_ERR_INVALID,
                         "the model's %s learning-rate schedule needs its length: the number of "
                         "optimizer steps of the run",
                         needs);
      goto done;
    }
    if (total_steps) set_horizon(g, total_steps);
  }
  if (n_sizes > DPC_COMPILE_MAX_BATCH_SIZES) {
    info.problem = DPC_COMPILE_BAD_BATCH, info.index = DPC_COMPILE_MAX_BATCH_SIZES;
    st = dpc_diag_fail(m, DPC_ERR_INVALID, "%u more batch sizes are more than the %u one takes",
                       n_sizes, DPC_COMPILE_MAX_BATCH_SIZES);
    goto done;
  }
  for (unsigned i = 0; i < n_sizes; i++) {
    if (sizes[i] < 1 || sizes[i] >= batch) {
      info.problem = DPC_COMPILE_BAD_BATCH, info.index = i;
      st = dpc_diag_fail(m, DPC_ERR_INVALID,
                         "the batch size %u is not from 1 to below the batch %lld", sizes[i],
                         (long long)batch);
      goto done;
    }
  }
  uint32_t replicas = 1;
  const char *kind = dpc_codegen_device_kind(x.backend);
  bool gpus = kind && !strcmp(kind, "cuda");
  if (devs && gpus != !strncmp(devs, "cuda", 4)) {
    st = dpc_diag_fail(m, DPC_ERR_INVALID,
                       gpus ? "--devices %s: GPU code runs on GPUs: give them as cuda:0,cuda:1,..."
                            : "--devices %s: GPUs run GPU code: compile it with --backend cuda",
                       devs);
    goto done;
  }
  if (devs && (st = dpc_driver_count_devices(devs, &replicas, m))) goto done;
  /* GPUs need not be here to compile for them: a split is placed with this machine's figures */
  char gpu_spec[32];
  if (gpus && devs) snprintf(gpu_spec, sizeof gpu_spec, "cpu:%u", replicas), devs = gpu_spec;
  bool want_split = DPC_API_HAS(o, split) && o->split;
  uint64_t limit = DPC_API_HAS(o, device_memory) ? o->device_memory : 0;
  info.replicas = want_split ? 1 : replicas;
  if (replicas < 1 || (!want_split && batch % replicas)) {
    info.problem = DPC_COMPILE_SPLIT;
    st = dpc_diag_fail(m, DPC_ERR_INVALID, "the %u devices do not divide the batch %lld", replicas,
                       (long long)batch);
    goto done;
  }

  if (want_split && train) {
    st = dpc_diag_fail(m, DPC_ERR_INVALID,
                       "a model split over devices is compiled for inference only: train it "
                       "split with dpc train --strategy model");
    goto done;
  }
  if (want_split && replicas < 2) {
    st = dpc_diag_fail(m, DPC_ERR_INVALID, "splitting the model needs at least two devices");
    goto done;
  }

  dpc_aot_plan aot[MAX_PLANS];
  uint32_t np = 0, split = 1;
  if (cancelled(cancel)) goto stopped;
  if (!want_split && (st = make_plan(g, &po, false, false, vals, batch, replicas, 1, &plans[0], m)))
    goto done;
  /* a limit the batch's split does not fit: every replica holds the whole model, so split it */
  if (!want_split && limit && replicas > 1 && !train && !fits(plans[0], limit))
    want_split = true, dpc_plan_free(plans[0]), plans[0] = NULL;
  if (want_split) {
    if ((st = place_split(g, batch, devs, replicas, limit, m))) goto done;
    split = replicas, info.replicas = 1;
    if ((st = make_plan(g, &po, false, false, vals, batch, 1, split, &plans[0], m))) goto done;
  }
  info.split = split > 1 ? split : 0;
  for (uint32_t k = 0; k < plans[0]->n_devs; k++)
    if (plans[0]->devs[k].bytes > info.device_bytes) info.device_bytes = plans[0]->devs[k].bytes;
  if (limit && (st = dpc_driver_check_memory(plans[0], limit, m))) goto done;
  aot[np++] = (dpc_aot_plan){"infer", plans[0]};
  if (train) {
    if (cancelled(cancel)) goto stopped;
    if ((st = make_plan(g, &po, true, false, vals, batch, replicas, 1, &plans[1], m))) goto done;
    if (cancelled(cancel)) goto stopped;
    /* on one device: a data-parallel forward pass leaves each replica's loss its own */
    if ((st = make_plan(g, &po, false, true, vals, batch, 1, 1, &plans[2], m))) goto done;
    aot[np++] = (dpc_aot_plan){"train", plans[1]};
    aot[np++] = (dpc_aot_plan){"eval", plans[2]};
  }
  /* smaller batches: single-device plans named infer@ROWS (runtime/api.c picks among them) */
  for (unsigned i = 0; i < n_sizes; i++) {
    int64_t k = sizes[i];
    if (cancelled(cancel)) goto stopped;
    int64_t *bv = calloc(g->n_syms ? g->n_syms : 1, sizeof *bv);
    for (uint32_t q = 0; bv && q < g->n_syms; q++) bv[q] = vals[q] == batch ? k : vals[q];
    st = bv ? make_plan(g, &po, false, false, bv, k, 1, split, &plans[np], m)
            : dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
    free(bv);
    if (st) goto done;
    snprintf(roles[np], sizeof roles[np], "infer@%lld", (long long)k);
    aot[np] = (dpc_aot_plan){roles[np], plans[np]};
    np++;
  }
  if (cancelled(cancel)) goto stopped;
  x.cpu.stop = cancel;
  if ((st = dpc_codegen_new(x.backend, &x.cpu, &cg, m)) ||
      (st = dpc_codegen_write_artifact(cg, aot, np, path, m)))
    goto done;
  snprintf(info.target, sizeof info.target, "%s", dpc_codegen_target(cg));
  info.n_plans = np;
  goto done;
stopped:
  st = dpc_diag_fail(m, DPC_ERR_RUNTIME, "interrupted: '%s' was not written", path);
done:
  give_info(o, &info);
  for (int i = 0; i < MAX_PLANS; i++) dpc_plan_free(plans[i]);
  dpc_codegen_free(cg);
  free(vals);
  dpc_graph_free(g);
  return st;
}
