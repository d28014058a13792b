/*
 * session.c — the executor: one buffer per device, one pass over each device's step list
 * (what it opens over several devices or processes is in session_open.c).
 *
 * Everything a step needs (its input and output tensors) is prepared when the session is made,
 * so a run only walks arrays. With several devices each device has a runner thread and a thread
 * pool on its own cores (runtime/executor.h), its step list waits on events for values other
 * devices compute, and communication steps go through runtime/collective.h. A device that fails
 * makes the others fail at once (aborted collectives, failed flag) instead of waiting out the
 * timeout, and the session refuses to run again.
 */
#include "runtime/session_impl.h"
#include "runtime/session_testing.h"

#include "ir/fusion.h"
#include "runtime/init.h"
#include "runtime/ranks.h"
#include "runtime/rng.h"
#include "runtime/topology.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

dpc_status dpc_session_profile(dpc_session *s, bool on, dpc_diag *d) {
  if (s->prof) {
    for (uint32_t i = 0; i < s->plan->n_devs; i++) free(s->prof[i]);
    free(s->prof);
    s->prof = NULL;
  }
  if (!on) return DPC_OK;
  s->prof = calloc(s->plan->n_devs, sizeof *s->prof);
  for (uint32_t i = 0; s->prof && i < s->plan->n_devs; i++) {
    uint32_t n = s->plan->devs[i].n_steps;
    if (!(s->prof[i] = calloc(n ? n : 1, sizeof **s->prof))) {
      dpc_session_profile(s, false, d);
      break;
    }
  }
  return s->prof ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory for the profile");
}

dpc_status dpc_session_trace(dpc_session *s, uint32_t runs, dpc_diag *d) {
  for (uint32_t i = 0; s->trace && i < s->plan->n_devs; i++) free(s->trace[i]);
  free(s->trace);
  free(s->n_trace);
  s->trace = NULL;
  s->n_trace = NULL;
  s->trace_runs = s->trace_run = 0;
  if (!runs) return DPC_OK;
  uint32_t most = 1;
  for (uint32_t i = 0; i < s->plan->n_devs; i++)
    if (s->plan->devs[i].n_steps > most) most = s->plan->devs[i].n_steps;
  s->trace_cap = most * runs;
  s->trace = calloc(s->plan->n_devs, sizeof *s->trace);
  s->n_trace = calloc(s->plan->n_devs, sizeof *s->n_trace);
  bool ok = s->trace && s->n_trace;
  for (uint32_t i = 0; ok && i < s->plan->n_devs; i++)
    ok = (s->trace[i] = malloc(s->trace_cap * sizeof **s->trace)) != NULL;
  if (!ok) {
    dpc_session_trace(s, 0, d);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory for the trace");
  }
  s->trace_runs = runs;
  return DPC_OK;
}

const dpc_trace_event *dpc_session_trace_events(const dpc_session *s, uint32_t dev, uint32_t *n) {
  *n = s->trace && dev < s->plan->n_devs ? s->n_trace[dev] : 0;
  return *n ? s->trace[dev] : NULL;
}

/* Time step j of device dev into the profile and the trace. */
static void record(dpc_session *s, uint32_t dev, uint32_t j, double t0) {
  double t1 = dpc_now_s();
  if (s->prof) s->prof[dev][j] += t1 - t0;
  if (s->trace && s->trace_run < s->trace_runs && s->n_trace[dev] < s->trace_cap)
    s->trace[dev][s->n_trace[dev]++] = (dpc_trace_event){j, s->trace_run, t0, t1};
}

const double *dpc_session_step_seconds(const dpc_session *s, uint32_t dev) {
  return s->prof && dev < s->plan->n_devs ? s->prof[dev] : NULL;
}

void dpc_session_free(dpc_session *s) {
  if (!s) return;
  const dpc_plan *p = s->plan;
  dpc_imports_free(&s->imports, s->devs);
  for (uint32_t e = 0; s->dev_events && e < p->n_events; e++) {
    dpc_device_event *ev = &s->dev_events[e];
    if (ev->impl && ev->owner && ev->owner->ops->event_free)
      ev->owner->ops->event_free(ev->owner, ev);
  }
  /* the threads, then the transports (NCCL's communicators, staging), then the devices they use */
  dpc_executor_free(s->ex);
  for (uint32_t i = 0; s->overlap && i < p->n_devs; i++) dpc_overlap_free(s->overlap[i]);
  free(s->overlap);
  for (uint32_t i = 0; i < s->n_comms; i++) dpc_transport_free(s->comms[i]);
  for (uint32_t i = 0; i < s->n_avg_comms; i++) {
    dpc_transport_free(s->avg_comms[i].t);
    free(s->avg_comms[i].set);
  }
  free(s->avg_comms);
  for (uint32_t i = 0; i < p->n_devs; i++) {
    if (s->devs && s->devs[i]) {
      if (s->mem && s->mem[i]) s->devs[i]->ops->free(s->devs[i], s->mem[i]);
      if (s->shadow && s->shadow[i]) dpc_device_host_free(s->devs[i], s->shadow[i]);
      dpc_device_close(s->devs[i]);
    }
    for (uint32_t j = 0; s->steps && s->steps[i] && j < p->devs[i].n_steps; j++)
      free(s->steps[i][j].imports);
    if (s->steps) free(s->steps[i]);
  }
  dpc_pool_free(s->pool);
  dpc_handoff_free(s->handoff);
  dpc_exchange_free(s->exchange);
  free(s->jobs);
  for (uint32_t i = 0; s->pools && i < p->n_devs; i++) dpc_pool_free(s->pools[i]);
  free(s->pools);
  free(s->comms);
  free((void *)s->events);
  dpc_session_profile(s, false, NULL);
  dpc_session_trace(s, 0, NULL);
  free(s->devs);
  free(s->mem);
  free(s->shadow);
  free(s->staged);
  free(s->reserved);
  free(s->core_shared);
  free(s->dev_events);
  free(s->steps);
  free(s->tensors);
  free(s->targs);
  free(s->tptrs);
  free(s->gptrs);
  free(s->given);
  free(s->shared);
  free(s->busy);
  free(s);
}

void dpc_session_busy(dpc_session *s, double *seconds, bool reset) {
  for (uint32_t i = 0; i < s->plan->n_devs; i++) {
    seconds[i] = s->busy[i];
    if (reset) s->busy[i] = 0;
  }
}

/* The device and the device memory of value v. */
static dpc_device *device_of(const dpc_session *s, uint32_t v) {
  return s->devs[s->plan->slots[v].device];
}

/* Host memory laid out as value v: its place in its device's shadow, or (host-visible devices)
 * the device memory itself. */
static void *host_of(const dpc_session *s, uint32_t v) {
  const dpc_slot *sl = &s->plan->slots[v];
  return s->shadow[sl->device] ? s->shadow[sl->device] + sl->offset : s->tensors[v].data;
}

static dpc_status upload(dpc_session *s, uint32_t v, const void *host, dpc_diag *d) {
  dpc_device *dev = device_of(s, v);
  return dev->ops->copy(dev, DPC_COPY_H2D, s->tensors[v].data, host,
                        dpc_tensor_bytes(&s->tensors[v]), NULL, d);
}

/* Params, state and constants: made in host memory, then copied to their device. */
static dpc_status fill_sources(dpc_session *s, dpc_diag *d) {
  const dpc_graph *g = s->plan->g;
  dpc_status st = DPC_OK;
  void *host = NULL;
  size_t cap = 0;
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    const dpc_node *n = &g->nodes[i];
    bool source = (n->op == DPC_OP_PARAM || n->op == DPC_OP_STATE) && !s->shared[n->out];
    if (!source && n->op != DPC_OP_CONSTANT) continue;
    /* another process's device reads it there (dpc_session_open_peers refuses reading it here): its
     * pages here are never touched, so each process holds its own device's part of the model */
    if (source && s->exchange && s->plan->slots[n->out].device != s->self) continue;
    dpc_tensor t = s->tensors[n->out];
    size_t bytes = dpc_tensor_bytes(&t);
    if (!bytes) continue; /* an empty tensor: nothing to fill or copy */
    if (bytes > cap) {
      free(host);
      cap = bytes;
      if (!(host = calloc(1, cap))) {
        st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory filling params");
        break;
      }
    }
    memset(host, 0, bytes);
    t.data = host;
    if (source) {
      st = dpc_init_fill(g, i, &t, d);
    } else {
      const dpc_attr *v = dpc_attrs_get(dpc_node_attrs(g, i), "value");
      for (uint32_t k = 0; k < v->n; k++) dpc_tstore(&t, k, g->reals[v->u.off + k]);
    }
    if (!st) st = upload(s, n->out, host, d);
  }
  free(host);
  return st;
}

/* Point this session's params and state at another session's, where name, dtype and shape
 * agree. */
static void share_persistent(dpc_session *s, const dpc_session *other) {
  const dpc_graph *g = s->plan->g, *og = other->plan->g;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    if (!dpc_op_has(n->op, DPC_OPF_PERSIST) || g->values[n->out].name == DPC_NONE) continue;
    uint32_t v = dpc_graph_find(og, dpc_graph_str(g, g->values[n->out].name));
    if (v == DPC_NONE || !dpc_op_has(og->nodes[og->values[v].node].op, DPC_OPF_PERSIST)) continue;
    const dpc_tensor *t = &other->tensors[v];
    if (t->dtype != s->tensors[n->out].dtype || !dpc_shape_eq(&t->shape, &s->tensors[n->out].shape))
      continue;
    s->tensors[n->out] = *t;
    s->shared[n->out] = true;
  }
}

static int by_offset(const void *a, const void *b) {
  const dpc_slot *x = *(const dpc_slot *const *)a, *y = *(const dpc_slot *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* A reserved buffer's parts this session uses, zeroed and touched as alloc would (the first run
 * then pays no page faults): all of it but the slots of shared params and state, whose memory is
 * the other session's. Another process's device (exchange) is left as reserved: only the values
 * handed to this process land there, each run writing them before they are read. */
static void touch_used(dpc_session *s, const dpc_session_opts *o) {
  const dpc_plan *p = s->plan;
  const dpc_graph *g = p->g;
  const dpc_slot **skip = malloc((g->n_values ? g->n_values : 1) * sizeof *skip);
  for (uint32_t i = 0; i < p->n_devs; i++) {
    if (!s->reserved[i] || (o->exchange && o->peers && i != o->self)) continue;
    uint32_t n = 0;
    for (uint32_t v = 0; skip && v < g->n_values; v++)
      if (s->shared[v] && p->slots[v].device == i && p->slots[v].bytes) skip[n++] = &p->slots[v];
    qsort(skip, n, sizeof *skip, by_offset);
    size_t at = 0;
    for (uint32_t k = 0; k < n; k++) {
      if (skip[k]->offset > at) memset(s->mem[i] + at, 0, skip[k]->offset - at);
      size_t end = skip[k]->offset + skip[k]->bytes;
      if (end > at) at = end;
    }
    if (at < p->devs[i].bytes) memset(s->mem[i] + at, 0, p->devs[i].bytes - at);
  }
  free(skip);
}

const char *dpc_kernel_kind_name(dpc_kernel_kind k) {
  static const char *const names[DPC_KERNEL_KIND_COUNT] = {"none", "host", "cuda"};
  return (unsigned)k < DPC_KERNEL_KIND_COUNT ? names[k] : "unknown";
}

/* A compiled kernel runs only on a device of its kind: host code on host devices, CUDA code on
 * GPUs. A handle from another backend (or one with code but no kind) is refused here rather
 * than called as a host function or handed to a GPU. */
static dpc_status kernel_fits(const dpc_graph *g, uint32_t node, const dpc_native_kernel *k,
                              const dpc_device *dev, dpc_diag *d) {
  dpc_kernel_kind runs = strcmp(dev->ops->kind, "cuda") ? DPC_KERNEL_HOST : DPC_KERNEL_CUDA;
  if (k->kind == DPC_KERNEL_NONE && !k->fn && !k->handle) return DPC_OK;
  if (k->kind != DPC_KERNEL_NONE && k->kind != runs && (unsigned)k->kind < DPC_KERNEL_KIND_COUNT)
    return dpc_graph_fail_node(g, node, d, DPC_ERR_UNSUPPORTED,
                               "its compiled kernel is %s code, and its device %s runs %s code "
                               "only",
                               dpc_kernel_kind_name(k->kind), dev->name,
                               dpc_kernel_kind_name(runs));
  if (k->kind == runs && (runs == DPC_KERNEL_HOST ? k->fn != NULL : k->handle != NULL))
    return DPC_OK;
  return dpc_graph_fail_node(g, node, d, DPC_ERR_INVALID,
                             "its compiled kernel handle is malformed (kind %s with%s code)",
                             dpc_kernel_kind_name(k->kind), k->fn || k->handle ? "" : "out");
}

dpc_status dpc_session_new(const dpc_plan *plan, const dpc_session_opts *o, dpc_session **out,
                           dpc_diag *d) {
  *out = NULL;
  const dpc_graph *g = plan->g;
  dpc_session *s = calloc(1, sizeof *s);
  if (!s) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory creating a session");
  s->plan = plan;
  s->run.training = o && o->training;
  s->kernels = o && o->kernels ? o->kernels : dpc_ref_kernels;
  size_t nv = g->n_values ? g->n_values : 1;
  s->devs = calloc(plan->n_devs, sizeof *s->devs);
  s->mem = calloc(plan->n_devs, sizeof *s->mem);
  s->steps = calloc(plan->n_devs, sizeof *s->steps);
  s->tensors = calloc(nv, sizeof *s->tensors);
  s->given = calloc(nv, sizeof *s->given);
  s->shared = calloc(nv, sizeof *s->shared);
  s->busy = calloc(plan->n_devs ? plan->n_devs : 1, sizeof *s->busy);
  s->shadow = calloc(plan->n_devs ? plan->n_devs : 1, sizeof *s->shadow);
  s->staged = calloc(nv, sizeof *s->staged);
  s->reserved = calloc(plan->n_devs ? plan->n_devs : 1, sizeof *s->reserved);
  s->core_shared = calloc(plan->n_devs ? plan->n_devs : 1, sizeof *s->core_shared);
  s->dev_events = calloc(plan->n_events ? plan->n_events : 1, sizeof *s->dev_events);
  uint32_t total_args = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) total_args += g->nodes[i].n_in + g->nodes[i].n_out;
  s->targs = calloc(total_args ? total_args : 1, sizeof *s->targs);
  s->tptrs = calloc(total_args ? total_args : 1, sizeof *s->tptrs);
  /* a group's inputs are some of its nodes' inputs, its outputs its root's: as many at most */
  s->gptrs = calloc(total_args ? total_args : 1, sizeof *s->gptrs);
  uint32_t n_gptrs = 0;
  dpc_status st = DPC_OK;
  if (!s->devs || !s->mem || !s->steps || !s->tensors || !s->given || !s->shared || !s->targs ||
      !s->tptrs || !s->gptrs || !s->busy || !s->shadow || !s->staged || !s->dev_events ||
      !s->reserved || !s->core_shared) {
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory creating a session");
    goto fail;
  }
  for (uint32_t i = 0; i < plan->n_devs; i++) {
    char name[48];
    bool host = o && (i < o->host_devices || (o->test && i < o->test->host_devices));
    const char *kind = host                                                   ? "cpu"
                       : o && o->test && o->test->memory                      ? "testmem"
                       : o && o->device_kind && strcmp(o->device_kind, "cpu") ? o->device_kind
                                                                              : NULL;
    uint32_t at = host || (kind && !strcmp(kind, "testmem")) ? i : i - (o ? o->host_devices : 0);
    snprintf(name, sizeof name, "%s:%u", kind ? kind : "", at);
    if ((st = dpc_device_open(kind ? name : plan->devs[i].name, &s->devs[i], d))) goto fail;
    const dpc_device_ops *ops = s->devs[i]->ops;
    /* a buffer only partly used here is reserved, and its used parts zeroed below */
    bool part = ops->reserve && ops->host_visible && o &&
                (o->share || (o->exchange && o->peers && i != o->self));
    if ((st = (part ? ops->reserve : ops->alloc)(s->devs[i], plan->devs[i].bytes,
                                                 (void **)&s->mem[i], d)))
      goto fail;
    s->reserved[i] = part;
    if (!s->devs[i]->ops->host_visible &&
        (st = dpc_device_host_alloc(s->devs[i], plan->devs[i].bytes, (void **)&s->shadow[i], d)))
      goto fail;
  }
  for (uint32_t v = 0; v < g->n_values; v++) {
    const dpc_slot *sl = &plan->slots[v];
    s->tensors[v] =
        (dpc_tensor){s->mem[sl->device] + sl->offset, g->values[v].dtype, g->values[v].shape};
  }
  if (o && o->share) share_persistent(s, o->share);
  touch_used(s, o);
  /* Argument tensors are copies of the value views, laid out per node: inputs then outputs. */
  uint32_t *base = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *base);
  if (!base) {
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory creating a session");
    goto fail;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    base[i] = k;
    for (uint32_t j = 0; j < n->n_in; j++)
      s->tptrs[k] = s->tensors[g->ids[n->in + j]].data,
      s->targs[k++] = s->tensors[g->ids[n->in + j]];
    for (uint32_t j = 0; j < n->n_out; j++)
      s->tptrs[k] = s->tensors[n->out + j].data, s->targs[k++] = s->tensors[n->out + j];
  }
  for (uint32_t i = 0; i < plan->n_devs && !st; i++) {
    const dpc_plan_device *pd = &plan->devs[i];
    s->steps[i] = calloc(pd->n_steps ? pd->n_steps : 1, sizeof *s->steps[i]);
    if (!s->steps[i]) {
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory creating a session");
      break;
    }
    for (uint32_t j = 0; j < pd->n_steps; j++) {
      const dpc_step *sp = &pd->steps[j];
      if (sp->kind == DPC_STEP_COPY) continue;
      if (sp->kind == DPC_STEP_WAIT || sp->kind == DPC_STEP_SIGNAL) {
        if (plan->n_devs > 1 && sp->event < plan->n_events) continue;
        st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: step %u waits on event %u of %u", pd->name, j,
                           sp->event, plan->n_events);
        break;
      }
      if (sp->kind != DPC_STEP_KERNEL) {
        st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: step kind %d is not run yet", pd->name,
                           (int)sp->kind);
        break;
      }
      const dpc_node *n = &g->nodes[sp->node];
      step_args *sa = &s->steps[i][j];
      sa->a = (dpc_kernel_args){g,
                                sp->node,
                                &s->targs[base[sp->node]],
                                n->n_in,
                                &s->targs[base[sp->node] + n->n_in],
                                n->n_out,
                                &s->run};
      if (plan->n_devs > 1 && dpc_op_has(n->op, DPC_OPF_COMM)) {
        sa->comm = true;
        sa->rank = sp->peer;
        continue;
      }
      dpc_kernel_fn fn = s->kernels[n->op];
      if (!fn) {
        st = dpc_graph_fail_node(g, sp->node, d, DPC_ERR_UNSUPPORTED,
                                 "this backend has no kernel for %s", dpc_op_name(n->op));
        break;
      }
      sa->fn = fn;
      if (o && o->native && (st = kernel_fits(g, sp->node, &o->native[sp->node], s->devs[i], d)))
        break;
      if (o && o->native) sa->native = o->native[sp->node];
      sa->ptrs = &s->tptrs[base[sp->node]];
      sa->n_ptrs = n->n_in + n->n_out;
      if (o && o->native && n->fused != DPC_NONE && o->native[n->fused].kind != DPC_KERNEL_NONE)
        sa->fused = true;
      for (uint32_t k2 = 0; k2 < n->n_in + n->n_out; k2++)
        sa->bytes += dpc_tensor_bytes(&s->targs[base[sp->node] + k2]);
      if (sa->native.kind != DPC_KERNEL_NONE && dpc_group_is_root(g, sp->node)) {
        dpc_group grp;
        if ((st = dpc_group_get(g, sp->node, &grp, d))) break;
        sa->ptrs = &s->gptrs[n_gptrs];
        sa->n_ptrs = grp.n_inputs + n->n_out;
        sa->bytes = 0;
        for (uint32_t k2 = 0; k2 < grp.n_inputs; k2++) {
          s->gptrs[n_gptrs++] = s->tensors[grp.inputs[k2]].data;
          sa->bytes += dpc_tensor_bytes(&s->tensors[grp.inputs[k2]]);
        }
        for (uint32_t k2 = 0; k2 < n->n_out; k2++) {
          s->gptrs[n_gptrs++] = s->tensors[n->out + k2].data;
          sa->bytes += dpc_tensor_bytes(&s->tensors[n->out + k2]);
        }
        dpc_group_free(&grp);
      }
    }
  }
  if (!st) st = dpc_session_open_imports(s, o, base, d);
  free(base);
  if (!st && o && o->peers && o->local > 1)
    st = dpc_session_open_rank_devices(s, o, d);
  else if (!st && o && o->peers)
    st = dpc_session_open_peers(s, o, d);
  else if (!st && plan->n_devs > 1)
    st = dpc_session_open_devices(s, o, d);
  else if (!st && o && o->native && (!o->threads || o->threads > 1))
    st = dpc_pool_new(o->threads, &s->pool, d);
  /* what each kernel step hands its device, now that the pools are made */
  for (uint32_t i = 0; i < plan->n_devs && !st; i++) {
    dpc_pool *pool = s->pools ? s->pools[i] : s->pool;
    for (uint32_t j = 0; j < plan->devs[i].n_steps; j++) {
      step_args *sa = &s->steps[i][j];
      sa->launch = (dpc_launch){sa->fn,   &sa->a,     sa->native,
                                sa->ptrs, sa->n_ptrs, sa->bytes >= SPLIT_MIN_BYTES ? pool : NULL,
                                &s->run};
    }
  }
  if (st || (st = fill_sources(s, d))) goto fail;
  *out = s;
  return DPC_OK;
fail:
  dpc_session_free(s);
  return st;
}

static dpc_status find(const dpc_session *s, const char *name, uint32_t *v, dpc_diag *d) {
  *v = dpc_graph_find(s->plan->g, name);
  if (*v == DPC_NONE)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the model has no value named '%s' (or it is not needed)", name);
  return DPC_OK;
}

dpc_status dpc_session_set(dpc_session *s, const char *name, const dpc_tensor *t, dpc_diag *d) {
  uint32_t v;
  dpc_status st = find(s, name, &v, d);
  if (st) return st;
  const dpc_graph *g = s->plan->g;
  dpc_op op = g->nodes[g->values[v].node].op;
  if (op != DPC_OP_INPUT && op != DPC_OP_PARAM && op != DPC_OP_STATE)
    return dpc_diag_fail(
        d, DPC_ERR_INVALID,
        "'%s' is computed by the model (a %s); only inputs, params and state can be set", name,
        dpc_op_name(op));
  dpc_tensor *dst = &s->tensors[v];
  if (!dpc_shape_eq(&dst->shape, &t->shape)) {
    char want[160], have[160];
    dpc_graph_format_type(g, dst->dtype, &dst->shape, want, sizeof want);
    dpc_graph_format_type(g, t->dtype, &t->shape, have, sizeof have);
    return dpc_diag_fail(d, DPC_ERR_SHAPE, "'%s' is %s in the model, but the data given is %s",
                         name, want, have);
  }
  bool fl = dpc_dtype_is_float(dst->dtype), tf = dpc_dtype_is_float(t->dtype);
  if (fl != tf || (dst->dtype == DPC_BOOL) != (t->dtype == DPC_BOOL))
    return dpc_diag_fail(d, DPC_ERR_SHAPE, "'%s' is %s in the model, but the data given is %s",
                         name, dpc_dtype_name(dst->dtype), dpc_dtype_name(t->dtype));
  int64_t n = dpc_tensor_numel(dst);
  if (dst->dtype == t->dtype) {
    if ((st = upload(s, v, t->data, d))) return st;
    s->given[v] = true;
    s->staged[v] = false;
    return DPC_OK;
  }
  /* converted in host memory first, then copied to the device */
  dpc_tensor h = *dst;
  if (!(h.data = malloc(dpc_tensor_bytes(dst) ? dpc_tensor_bytes(dst) : 1)))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory setting '%s'", name);
  if (fl) {
    for (int64_t i = 0; i < n; i++) dpc_tstore(&h, i, dpc_tload(t, i));
  } else {
    for (int64_t i = 0; i < n && !st; i++) {
      int64_t x = dpc_tload_i64(t, i);
      if (dst->dtype == DPC_I32 && (x < INT32_MIN || x > INT32_MAX))
        st = dpc_diag_fail(d, DPC_ERR_INVALID, "'%s': element %lld (%lld) does not fit in i32",
                           name, (long long)i, (long long)x);
      else
        dpc_tstore_i64(&h, i, x);
    }
  }
  if (!st) st = upload(s, v, h.data, d);
  free(h.data);
  if (st) return st;
  s->given[v] = true;
  s->staged[v] = false;
  return DPC_OK;
}

/* A value another device computes: wait until it has signalled this run's. Spin, then yield,
 * then fail after the timeout naming both devices; stop at once if a device failed. */
static dpc_status wait_event(dpc_session *s, uint32_t dev, const dpc_step *sp, dpc_diag *d) {
  uint64_t want = s->run.step + 1;
  dpc_backoff b = {.shared = s->core_shared && s->core_shared[dev]};
  while (atomic_load_explicit(&s->events[sp->event], memory_order_acquire) < want) {
    if (atomic_load(&s->failed))
      return dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s: stopped because another device failed",
                           s->plan->devs[dev].name);
    double waited = dpc_backoff_wait(&b, s->timeout_s);
    if (waited > 0)
      return dpc_diag_fail(d, DPC_ERR_RUNTIME,
                           "%s waited %.1f s for %s (event %u of the plan): %s is stuck or gone",
                           s->plan->devs[dev].name, waited, s->plan->devs[sp->peer].name, sp->event,
                           s->plan->devs[sp->peer].name);
  }
  return DPC_OK;
}

/* Collective step j of device i: this device's input, reduced in its output with every other
 * device's. */
static dpc_status run_comm(dpc_session *s, uint32_t i, uint32_t j, dpc_diag *d) {
  const step_args *sa = &s->steps[i][j];
  const dpc_step *sp = &s->plan->devs[i].steps[j];
  const dpc_tensor *x = &sa->a.in[sa->rank];
  dpc_tensor *y = &sa->a.out[sa->rank];
  dpc_device *dev = s->devs[i];
  size_t bytes = dpc_tensor_bytes(y);
  dpc_status st = DPC_OK;
  if (x->data != y->data) st = dev->ops->copy(dev, DPC_COPY_D2D, y->data, x->data, bytes, NULL, d);
  char op[16];
  dpc_attrs_str(dpc_node_attrs(s->plan->g, sp->node), "op", op, sizeof op);
  dpc_reduce red = strcmp(op, "sum") ? DPC_REDUCE_MEAN : DPC_REDUCE_SUM;
  if (st) return st;
  return sa->group->ops->all_reduce(sa->group, sa->rank, y->data, y->dtype, dpc_tensor_numel(y),
                                    red, d);
}

/* The job number of collective step j of device dev. */
static uint32_t job_of(const dpc_session *s, uint32_t dev, uint32_t j) {
  uint32_t job = 0;
  for (uint32_t i = 0; i < s->plan->n_devs; i++)
    for (uint32_t k = 0; k < s->plan->devs[i].n_steps; k++) {
      if (i == dev && k == j) return job;
      job += s->steps[i][k].comm;
    }
  return job;
}

static dpc_status comm_job(void *ctx, uint32_t job, dpc_diag *d) {
  dpc_session *s = ctx;
  return run_comm(s, s->jobs[job][0], s->jobs[job][1], d);
}

/* Step sa's reference kernel, never its compiled one. */
static dpc_status launch_table(dpc_device *dev, const step_args *sa, dpc_diag *d) {
  dpc_launch l = sa->launch;
  l.native.kind = DPC_KERNEL_NONE, l.native.fn = NULL;
  int32_t bad;
  return dev->ops->launch(dev, &l, &bad, d);
}

static dpc_status run_steps(dpc_session *s, uint32_t dev, dpc_diag *d);

/* Step j of device i. */
static dpc_status run_step(dpc_session *s, uint32_t i, uint32_t j, dpc_diag *d) {
  const dpc_plan *p = s->plan;
  const dpc_graph *g = p->g;
  const dpc_plan_device *pd = &p->devs[i];
  const dpc_step *sp = &pd->steps[j];
  dpc_device *dev = s->devs[i];
  if (sp->kind == DPC_STEP_COPY) {
    uint32_t from = p->slots[sp->src].device, to = p->slots[sp->dst].device;
    return dpc_device_copy_between(s->devs[to], s->tensors[sp->dst].data, s->devs[from],
                                   s->tensors[sp->src].data, dpc_tensor_bytes(&s->tensors[sp->dst]),
                                   d);
  }
  if (s->handoff && sp->kind == DPC_STEP_SIGNAL)
    return dpc_handoff_signal(s->handoff, sp, s->tensors, d);
  if (s->handoff && sp->kind == DPC_STEP_WAIT)
    return dpc_handoff_wait(s->handoff, sp, s->tensors, d);
  if (sp->kind == DPC_STEP_SIGNAL) {
    dpc_status st = dev->ops->event_record(dev, &s->dev_events[sp->event], d);
    if (st) return st;
    atomic_store_explicit(&s->events[sp->event], s->run.step + 1, memory_order_release);
    return DPC_OK;
  }
  if (sp->kind == DPC_STEP_WAIT) {
    dpc_status st = wait_event(s, i, sp, d);
    return st ? st : dev->ops->event_wait(dev, &s->dev_events[sp->event], d);
  }
  const step_args *sa = &s->steps[i][j];
  if (sa->fused) return DPC_OK;
  if (sa->comm) return run_comm(s, i, j, d);
  for (uint32_t k = 0; k < sa->n_imports; k++) {
    const dpc_import *x = &s->imports.v[sa->imports[k]];
    dpc_status st = dpc_imports_refresh(&s->imports, sa->imports[k], dev, s->devs[x->from],
                                        s->tensors[x->value].data, s->runs, d);
    if (st) return st;
  }
  int32_t bad = 0;
  dpc_status launched = dev->ops->launch(dev, &sa->launch, &bad, d);
  if (launched || !bad) return launched;
  /* bad data: the reference kernels find it again and say where (a group's members first, in
   * order, then its root) */
  dpc_status st = DPC_OK;
  for (uint32_t m = 0; m < j && !st; m++) {
    const step_args *ma = &s->steps[i][m];
    if (pd->steps[m].kind == DPC_STEP_KERNEL && ma->fused &&
        g->nodes[pd->steps[m].node].fused == sp->node)
      st = launch_table(dev, ma, d);
  }
  if (!st) st = launch_table(dev, sa, d);
  if (!st)
    st = dpc_graph_fail_node(p->g, sa->a.node, d, DPC_ERR_RUNTIME,
                             "the compiled kernel reported bad data the reference kernel accepts");
  return st;
}

/* Until the first value this device waits for from a peer has arrived (or the timeout): the
 * wait then happens here rather than inside the device's turn, where it would keep the other
 * runs taking turns on this device from its cores. */
static void await_first(dpc_session *s) {
  uint32_t p = dpc_exchange_first_peer(s->exchange);
  /* past the timeout, the receive itself reports it */
  if (p != DPC_NONE && s->peers->ops->ready)
    dpc_ranks_await(s->peers, s->self, p, s->timeout_s, 20);
}

/* One process's device of a plan (one device, or one of several processes' devices): its steps,
 * in its turn, between the handoffs and the exchange's two ends. */
static dpc_status run_self(dpc_session *s, dpc_diag *d) {
  dpc_status st = DPC_OK;
  if (s->handoff) dpc_handoff_begin(s->handoff);
  if (s->exchange && (st = dpc_exchange_inputs(s->exchange, s->tensors, d))) return st;
  if (s->exchange && s->self) await_first(s);
  pthread_mutex_t *turn = s->peers && s->turns && s->self < s->n_turns ? &s->turns[s->self] : NULL;
  if (turn) pthread_mutex_lock(turn);
  st = run_steps(s, s->self, d);
  if (turn) pthread_mutex_unlock(turn);
  if (!st && s->handoff) st = dpc_handoff_end(s->handoff, d);
  if (!st && s->exchange) st = dpc_exchange_outputs(s->exchange, s->tensors, d);
  return st;
}

dpc_status dpc_session_run(dpc_session *s, dpc_diag *d) {
  const dpc_plan *p = s->plan;
  const dpc_graph *g = p->g;
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == DPC_OP_INPUT && !s->given[g->nodes[i].out]) {
      char lbl[96];
      dpc_graph_value_label(g, g->nodes[i].out, lbl, sizeof lbl);
      return dpc_diag_fail(d, DPC_ERR_INVALID, "input '%s' was not given", lbl);
    }
  if (s->broken)
    return dpc_diag_fail(d, DPC_ERR_RUNTIME,
                         "this session failed in an earlier step and cannot run again");
  s->runs++;
  dpc_status st;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    uint32_t v = g->nodes[i].out;
    if (g->nodes[i].op != DPC_OP_INPUT || !s->staged[v]) continue;
    if ((st = upload(s, v, host_of(s, v), d))) return st;
    s->staged[v] = false;
  }
  if (s->ex) {
    atomic_store(&s->failed, 0);
    atomic_store(&s->first, 0);
    if ((st = dpc_executor_run(s->ex, d))) {
      s->broken = true;
      /* the root cause, not whichever device the executor heard from first */
      if (atomic_load(&s->first)) return dpc_diag_fail(d, s->first_status, "%s", s->first_msg);
      return st;
    }
  } else if ((st = run_self(s, d))) {
    /* across processes, the peers' collectives are out of step with this one's now */
    if (s->peers) s->broken = true;
    return st;
  }
  if (s->trace) s->trace_run++;
  s->run.step++;
  return DPC_OK;
}

/* Device dev's step list, timed for the profile and the trace when they are on. */
static dpc_status run_steps(dpc_session *s, uint32_t dev, dpc_diag *d) {
  bool timed = s->prof || s->trace;
  const dpc_plan_device *pd = &s->plan->devs[dev];
  dpc_overlap *o = s->overlap ? s->overlap[dev] : NULL;
  uint64_t base = o ? dpc_overlap_posted(o) : 0, posted = base;
  bool after_comm = false; /* the last kernel step was a collective: its signals wait for it */
  for (uint32_t j = 0; j < pd->n_steps; j++) {
    double t0 = timed ? dpc_now_s() : 0;
    const step_args *sa = &s->steps[dev][j];
    dpc_status st = DPC_OK;
    if (o && pd->steps[j].kind == DPC_STEP_KERNEL && sa->comm) {
      posted = dpc_overlap_post(o, comm_job, s, job_of(s, dev, j));
      after_comm = true;
      if (timed) record(s, dev, j, t0);
      continue;
    }
    if (o && sa->need_k >= 0) st = dpc_overlap_wait(o, base + (uint64_t)sa->need_k + 1, d);
    if (!st && o && after_comm && pd->steps[j].kind == DPC_STEP_SIGNAL)
      st = dpc_overlap_wait(o, posted, d);
    if (pd->steps[j].kind == DPC_STEP_KERNEL) after_comm = false;
    /* computing, unlike waiting on a peer or in a collective: what sizes data-parallel shares */
    bool work = s->ex && pd->steps[j].kind != DPC_STEP_WAIT && !sa->comm && !sa->fused;
    double w0 = work ? dpc_now_s() : 0;
    if (!st) st = run_step(s, dev, j, d);
    if (st) return st;
    if (work) s->busy[dev] += dpc_now_s() - w0;
    if (timed) record(s, dev, j, t0);
  }
  /* the step ends with every collective done and the device idle: the loss and the state are
   * read after it */
  dpc_status st = o ? dpc_overlap_wait(o, posted, d) : DPC_OK;
  if (!st) st = s->devs[dev]->ops->synchronize(s->devs[dev], d);
  return st;
}

/* The transport between the devices set[0 .. n), in rank order; NULL when none is open. */
static dpc_transport *avg_find(const dpc_session *s, const uint32_t *set, uint32_t n) {
  for (uint32_t c = 0; c < s->n_avg_comms; c++)
    if (s->avg_comms[c].n == n && !memcmp(s->avg_comms[c].set, set, n * sizeof *set))
      return s->avg_comms[c].t;
  return NULL;
}

#define MAX_AVG_COPIES 256

/* Device dev's part of dpc_session_average: each copy it holds, rank k of its group. */
static dpc_status average_part(dpc_session *s, uint32_t dev, dpc_diag *d) {
  uint32_t set[MAX_AVG_COPIES], R = s->avg_r;
  for (uint32_t gi = 0; gi < s->avg_groups; gi++) {
    const uint32_t *vals = s->avg + (size_t)gi * R;
    for (uint32_t k = 0; k < R; k++) set[k] = s->plan->slots[vals[k]].device;
    dpc_transport *t = avg_find(s, set, R);
    for (uint32_t k = 0; k < R; k++) {
      if (set[k] != dev) continue;
      dpc_tensor *x = &s->tensors[vals[k]];
      dpc_status st =
          t->ops->all_reduce(t, k, x->data, x->dtype, dpc_tensor_numel(x), DPC_REDUCE_MEAN_WIDE, d);
      if (st) return st;
    }
  }
  return s->devs[dev]->ops->synchronize(s->devs[dev], d);
}

/* dpc_session_average across processes: copy k of each group must live on device k; this
 * process averages its own copy with the peers'. */
static dpc_status average_peers(dpc_session *s, const uint32_t *values, uint32_t groups,
                                uint32_t copies, dpc_diag *d) {
  if (s->broken)
    return dpc_diag_fail(d, DPC_ERR_RUNTIME,
                         "this session failed in an earlier step and cannot run again");
  if (copies != s->plan->n_devs)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "averaging %u copies over %u processes", copies,
                         s->plan->n_devs);
  for (uint32_t gi = 0; gi < groups; gi++) {
    const uint32_t *vals = values + (size_t)gi * copies;
    for (uint32_t k = 0; k < copies; k++)
      if (s->plan->slots[vals[k]].device != k)
        return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                             "copy %u of a value is not on device %u: across processes copy k "
                             "lives on rank k",
                             k, k);
    dpc_tensor *x = &s->tensors[vals[s->self]];
    dpc_status st = s->peers->ops->all_reduce(s->peers, s->self, x->data, x->dtype,
                                              dpc_tensor_numel(x), DPC_REDUCE_MEAN_WIDE, d);
    if (st) {
      s->broken = true;
      return st;
    }
  }
  return s->devs[s->self]->ops->synchronize(s->devs[s->self], d);
}

dpc_status dpc_session_average(dpc_session *s, const uint32_t *values, uint32_t groups,
                               uint32_t copies, dpc_diag *d) {
  if (copies < 2) return DPC_OK;
  if (s->peers) return average_peers(s, values, groups, copies, d);
  if (!s->ex || copies > MAX_AVG_COPIES)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "averaging %u copies over %u devices", copies,
                         s->plan->n_devs);
  if (s->broken)
    return dpc_diag_fail(d, DPC_ERR_RUNTIME,
                         "this session failed in an earlier step and cannot run again");
  uint32_t set[MAX_AVG_COPIES];
  for (uint32_t gi = 0; gi < groups; gi++) {
    const uint32_t *vals = values + (size_t)gi * copies;
    for (uint32_t k = 0; k < copies; k++) {
      set[k] = s->plan->slots[vals[k]].device;
      for (uint32_t j = 0; j < k; j++)
        if (set[j] == set[k])
          return dpc_diag_fail(d, DPC_ERR_INVALID, "two copies of a value on %s",
                               s->plan->devs[set[k]].name);
    }
    if (avg_find(s, set, copies)) continue;
    dpc_device *devs[MAX_AVG_COPIES];
    const char *names[MAX_AVG_COPIES];
    for (uint32_t k = 0; k < copies; k++)
      devs[k] = s->devs[set[k]], names[k] = s->plan->devs[set[k]].name;
    struct avg_comm *nc = realloc(s->avg_comms, (s->n_avg_comms + 1) * sizeof *nc);
    if (!nc) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening a transport");
    s->avg_comms = nc;
    struct avg_comm *c = &nc[s->n_avg_comms];
    if (!(c->set = malloc(copies * sizeof *c->set)))
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening a transport");
    memcpy(c->set, set, copies * sizeof *set);
    c->n = copies;
    dpc_status st = dpc_transport_open("shm", copies, devs, names, s->timeout_s, &c->t, d);
    if (st) {
      free(c->set);
      return st;
    }
    s->n_avg_comms++;
  }
  s->avg = values, s->avg_groups = groups, s->avg_r = copies;
  atomic_store(&s->failed, 0);
  atomic_store(&s->first, 0);
  dpc_status st = dpc_executor_run(s->ex, d);
  s->avg = NULL;
  if (!st) return DPC_OK;
  s->broken = true;
  if (atomic_load(&s->first)) return dpc_diag_fail(d, s->first_status, "%s", s->first_msg);
  return st;
}

/* Device dev's step list on its runner thread (several devices). A device that fails claims
 * the run's error, then tells the others to stop waiting. */
dpc_status dpc_session_run_device(void *ctx, uint32_t dev, dpc_diag *d) {
  dpc_session *s = ctx;
  dev += s->dev0;
  const dpc_plan_device *pd = &s->plan->devs[dev];
  if (s->stall == dev + 1) { /* the test hook: stuck until the others give up on it */
    double t0 = dpc_now_s();
    while (!atomic_load(&s->failed) && dpc_now_s() - t0 < 10 * s->timeout_s) sched_yield();
    return dpc_diag_fail(d, DPC_ERR_RUNTIME, "%s stalled (test hook)", pd->name);
  }
  pthread_mutex_t *turn = s->turns && dev < s->n_turns && !s->avg ? &s->turns[dev] : NULL;
  if (turn) pthread_mutex_lock(turn);
  dpc_status st = s->avg ? average_part(s, dev, d) : run_steps(s, dev, d);
  if (turn) pthread_mutex_unlock(turn);
  if (!st) return DPC_OK;
  int none = 0;
  if (atomic_compare_exchange_strong(&s->first, &none, (int)dev + 1)) {
    s->first_status = st;
    snprintf(s->first_msg, sizeof s->first_msg, "%s", d->msg ? d->msg : "a device failed");
  }
  atomic_store(&s->failed, 1);
  for (uint32_t c = 0; c < s->n_comms; c++) s->comms[c]->ops->abort(s->comms[c], pd->name, d->msg);
  for (uint32_t c = 0; c < s->n_avg_comms; c++)
    s->avg_comms[c].t->ops->abort(s->avg_comms[c].t, pd->name, d->msg);
  /* collectives still queued end quickly now; none may outlive the run */
  if (s->overlap && s->overlap[dev]) {
    dpc_diag ignore;
    dpc_diag_init(&ignore);
    dpc_overlap_wait(s->overlap[dev], dpc_overlap_posted(s->overlap[dev]), &ignore);
    dpc_diag_free(&ignore);
  }
  return st;
}

dpc_status dpc_session_get(const dpc_session *s, const char *name, dpc_tensor *view, dpc_diag *d) {
  uint32_t v;
  dpc_status st = find(s, name, &v, d);
  if (st) return st;
  *view = dpc_session_value(s, v);
  return DPC_OK;
}

dpc_tensor dpc_session_value(const dpc_session *s, uint32_t value) {
  dpc_tensor t = s->tensors[value];
  if (!s->shadow[s->plan->slots[value].device]) return t;
  dpc_device *dev = device_of(s, value);
  t.data = host_of(s, value);
  dpc_diag ignore;
  dpc_diag_init(&ignore);
  /* the shadow is a cache of the device's memory, refreshed on every read */
  if (dev->ops->synchronize(dev, &ignore) ||
      dev->ops->copy(dev, DPC_COPY_D2H, t.data, s->tensors[value].data, dpc_tensor_bytes(&t), NULL,
                     &ignore))
    memset(t.data, 0xff, dpc_tensor_bytes(&t)); /* NaN, not stale data */
  dpc_diag_free(&ignore);
  return t;
}

dpc_status dpc_session_read(const dpc_session *s, uint32_t value, void *host, dpc_diag *d) {
  dpc_device *dev = device_of(s, value);
  dpc_status st = dev->ops->synchronize(dev, d);
  return st ? st
            : dev->ops->copy(dev, DPC_COPY_D2H, host, s->tensors[value].data,
                             dpc_tensor_bytes(&s->tensors[value]), NULL, d);
}

dpc_status dpc_session_write(dpc_session *s, uint32_t value, const void *host, dpc_diag *d) {
  dpc_status st = upload(s, value, host, d);
  if (st) return st;
  s->given[value] = true;
  s->staged[value] = false;
  return DPC_OK;
}

dpc_status dpc_session_copy(dpc_session *dst, uint32_t dst_value, const dpc_session *src,
                            uint32_t src_value, dpc_diag *d) {
  dpc_device *to = device_of(dst, dst_value), *from = device_of(src, src_value);
  dpc_tensor *t = &dst->tensors[dst_value];
  size_t bytes = dpc_tensor_bytes(t);
  if (bytes != dpc_tensor_bytes(&src->tensors[src_value]))
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "a copy of %zu bytes into %zu",
                         dpc_tensor_bytes(&src->tensors[src_value]), bytes);
  /* sessions open devices of their own: the same name is the same device */
  bool same = !strcmp(to->name, from->name);
  dpc_status st = from->ops->synchronize(from, d);
  if (!st)
    st = to->ops->copy(to, same ? DPC_COPY_D2D : DPC_COPY_PEER, t->data,
                       src->tensors[src_value].data, bytes, same ? NULL : from, d);
  if (!st) dst->staged[dst_value] = false;
  return st;
}

uint64_t dpc_session_steps(const dpc_session *s) {
  return s->run.step;
}

void dpc_session_set_step(dpc_session *s, uint64_t step) {
  s->run.step = step;
}

bool dpc_session_pipelines(const dpc_session *s) {
  return (!s->peers || s->exchange) && dpc_plan_pipelines(s->plan);
}

bool dpc_plan_pipelines(const dpc_plan *p) {
  const dpc_graph *g = p->g;
  if (p->n_devs < 2) return false;
  for (uint32_t k = 0; k < p->n_devs; k++)
    for (uint32_t j = 0; j < p->devs[k].n_steps; j++) {
      const dpc_step *st = &p->devs[k].steps[j];
      if (st->kind == DPC_STEP_WAIT && st->peer >= k) return false;
      if (st->kind == DPC_STEP_SEND || st->kind == DPC_STEP_RECV) return false;
      if (st->kind == DPC_STEP_KERNEL && dpc_op_has(g->nodes[st->node].op, DPC_OPF_COMM))
        return false;
    }
  return true;
}

void dpc_session_set_turns(dpc_session *s, pthread_mutex_t *turns, uint32_t n) {
  s->turns = turns;
  s->n_turns = n;
}

void dpc_session_set_seed(dpc_session *s, uint64_t seed) {
  s->run.salt = seed ? dpc_mix64(seed ^ 0x5eed5a17ull) : 0;
}

dpc_tensor dpc_session_input(dpc_session *s, uint32_t value) {
  s->given[value] = true;
  dpc_tensor t = s->tensors[value];
  if (!s->shadow[s->plan->slots[value].device]) return t;
  s->staged[value] = true;
  t.data = host_of(s, value);
  return t;
}

/* Every argument pointer to value v's memory moves with it: a slot no other value overlaps is
 * only ever reached through v's own pointers, all equal to its start. */
dpc_status dpc_session_place(dpc_session *s, uint32_t value, void *data, dpc_diag *d) {
  const dpc_plan *plan = s->plan;
  const dpc_graph *g = plan->g;
  if (value >= g->n_values) return dpc_diag_fail(d, DPC_ERR_INVALID, "no value %u", value);
  const dpc_slot *sl = &plan->slots[value];
  const char *name =
      g->values[value].name != DPC_NONE ? dpc_graph_str(g, g->values[value].name) : "a value";
  if (plan->n_devs != 1)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "'%s' is in a plan over %u devices", name,
                         plan->n_devs);
  if (s->shadow[sl->device])
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "'%s' lives in device memory the host cannot address", name);
  if (data && (uintptr_t)data % DPC_SLOT_ALIGN)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "the buffer for '%s' is not %d-byte aligned", name,
                         DPC_SLOT_ALIGN);
  /* a param or state may be another session's through `share`: it keeps its own memory */
  if (s->shared[value] || sl->bytes == 0 ||
      dpc_op_has(g->nodes[g->values[value].node].op, DPC_OPF_PERSIST))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "'%s' has no memory of its own", name);
  for (uint32_t u = 0; u < g->n_values; u++) {
    const dpc_slot *o = &plan->slots[u];
    if (u != value && o->bytes && o->device == sl->device && o->offset < sl->offset + sl->bytes &&
        sl->offset < o->offset + o->bytes)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "'%s' shares its memory with other values",
                           name);
  }
  void *old = s->tensors[value].data;
  void *now = data ? data : s->mem[sl->device] + sl->offset;
  uint32_t total = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) total += g->nodes[i].n_in + g->nodes[i].n_out;
  for (uint32_t k = 0; k < total; k++) {
    if (s->targs[k].data == old) s->targs[k].data = now;
    if (s->tptrs[k] == old) s->tptrs[k] = now;
    if (s->gptrs[k] == old) s->gptrs[k] = now;
  }
  s->tensors[value].data = now;
  if (data && g->nodes[g->values[value].node].op == DPC_OP_INPUT) s->given[value] = true;
  return DPC_OK;
}

const char *dpc_session_comm_note(const dpc_session *s) {
  return s->comm_note;
}
