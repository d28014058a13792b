/*
 * session_open.c — what a session over several devices opens (session_impl.h): a buffer on the
 * reading device for each value it cannot address where it lives, and the check that no kernel
 * is handed another device's memory; a transport per set of devices a collective connects (NCCL
 * between GPUs where it loads); a thread per device for its collectives; the runner threads and
 * pools; and across processes, the peers' transports, handoffs and rank groups.
 */
#include "runtime/session_impl.h"

#include "ir/fusion.h"
#include "runtime/session_testing.h"
#include "runtime/ranks.h"
#include "runtime/topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether device i cannot address device j's memory in place: either is a GPU (two host-visible
 * devices share the host's memory). */
static bool apart(const dpc_session *s, uint32_t i, uint32_t j) {
  return i != j && (!s->devs[i]->ops->host_visible || !s->devs[j]->ops->host_visible);
}

/* Step sa (a kernel on device i) reads value v from another device: its import, and every
 * argument pointer to v redirected to it (args[0..n) the pointers, vals the values behind
 * them). */
static dpc_status import_value(dpc_session *s, uint32_t i, step_args *sa, uint32_t v, void **args,
                               dpc_tensor *views, const uint32_t *vals, uint32_t n, dpc_diag *d) {
  const dpc_slot *sl = &s->plan->slots[v];
  if (sl->device == i || !sl->bytes || !apart(s, i, sl->device)) return DPC_OK;
  uint32_t k;
  dpc_status st = dpc_imports_get(&s->imports, s->devs[i], i, v, sl->device, sl->bytes, &k, d);
  if (st) return st;
  void *buf = s->imports.v[k].buf;
  for (uint32_t a = 0; a < n; a++)
    if (vals[a] == v) {
      if (args) args[a] = buf;
      if (views) views[a].data = buf;
    }
  for (uint32_t m = 0; m < sa->n_imports; m++)
    if (sa->imports[m] == k) return DPC_OK;
  uint32_t *ni = realloc(sa->imports, (sa->n_imports + 1) * sizeof *ni);
  if (!ni) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening a session");
  sa->imports = ni;
  sa->imports[sa->n_imports++] = k;
  return DPC_OK;
}

/* Where a device cannot address another's memory (a GPU, or the host's CPU beside a GPU), each
 * kernel's inputs held there become imports (imports.h), copied in before it runs; then no
 * pointer a kernel is handed may be in the buffer of a device it cannot address, which is
 * checked here once. */
dpc_status dpc_session_open_imports(dpc_session *s, const dpc_session_opts *o, const uint32_t *base,
                                    dpc_diag *d) {
  const dpc_plan *p = s->plan;
  const dpc_graph *g = p->g;
  bool gpu = false;
  for (uint32_t i = 0; i < p->n_devs; i++) gpu = gpu || !s->devs[i]->ops->host_visible;
  if (p->n_devs < 2 || (o && o->peers) || !gpu) return DPC_OK;
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; !st && i < p->n_devs; i++) {
    for (uint32_t j = 0; !st && j < p->devs[i].n_steps; j++) {
      const dpc_step *sp = &p->devs[i].steps[j];
      step_args *sa = &s->steps[i][j];
      if (sp->kind != DPC_STEP_KERNEL || sa->comm) continue;
      const dpc_node *n = &g->nodes[sp->node];
      const uint32_t *in = dpc_node_inputs(g, n);
      bool group = sa->native.kind != DPC_KERNEL_NONE && dpc_group_is_root(g, sp->node);
      for (uint32_t k = 0; !st && k < n->n_in; k++)
        st = import_value(s, i, sa, in[k], group ? NULL : &s->tptrs[base[sp->node]],
                          &s->targs[base[sp->node]], in, n->n_in, d);
      if (!st && group) {
        dpc_group grp;
        if ((st = dpc_group_get(g, sp->node, &grp, d))) break;
        for (uint32_t k = 0; !st && k < grp.n_inputs; k++)
          st = import_value(s, i, sa, grp.inputs[k], sa->ptrs, NULL, grp.inputs, grp.n_inputs, d);
        dpc_group_free(&grp);
      }
      /* no pointer it runs with is in another device's buffer */
      for (uint32_t k = 0; !st && !sa->fused && k < sa->n_ptrs; k++) {
        const unsigned char *q = sa->ptrs[k];
        for (uint32_t o2 = 0; !st && o2 < p->n_devs; o2++)
          if (apart(s, i, o2) && q >= s->mem[o2] && q < s->mem[o2] + p->devs[o2].bytes)
            st = dpc_graph_fail_node(g, sp->node, d, DPC_ERR_INTERNAL,
                                     "%s would read or write %s's memory (argument %u)",
                                     p->devs[i].name, p->devs[o2].name, k);
      }
    }
  }
  return st;
}

static dpc_status rank_groups(dpc_session *s, uint32_t L, dpc_diag *d);

/* The transport of a collective over devs: NCCL where they are all GPUs and it is to be had,
 * else shared memory (staged through the host for GPUs); which, and why, in s->comm_note. */
static dpc_status open_group(dpc_session *s, uint32_t n, dpc_device *const *devs,
                             const char *const *names, dpc_transport **out, dpc_diag *d) {
  bool gpus = n > 1;
  for (uint32_t k = 0; k < n && gpus; k++) gpus = !strcmp(devs[k]->ops->kind, "cuda");
  if (gpus) {
    dpc_diag why;
    dpc_diag_init(&why);
    dpc_status st = dpc_transport_open_nccl(n, devs, names, s->timeout_s, out, &why);
    if (st == DPC_OK) {
      char version[48];
      dpc_transport_nccl_version(*out, version, sizeof version);
      snprintf(s->comm_note, sizeof s->comm_note, "all-reduces over %s", version);
    } else {
      snprintf(s->comm_note, sizeof s->comm_note, "all-reduces through the host: %s",
               why.msg ? why.msg : "NCCL failed");
    }
    dpc_diag_free(&why);
    if (st == DPC_OK) return st;
    if (st == DPC_ERR_NOMEM) return dpc_diag_fail(d, st, "out of memory opening NCCL");
  }
  return dpc_transport_open("shm", n, devs, names, s->timeout_s, out, d);
}

/* A communicator for each distinct list of devices a collective connects (all of them for data
 * parallel; each replica's k-th device across replicas for hybrid), shared by its steps. */
static dpc_status open_groups(dpc_session *s, dpc_diag *d) {
  const dpc_plan *plan = s->plan;
  const dpc_graph *g = plan->g;
  uint32_t *set = malloc(plan->n_devs * sizeof *set);
  const char **names = malloc(plan->n_devs * sizeof *names);
  dpc_device **devs = malloc(plan->n_devs * sizeof *devs);
  uint32_t **sets = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *sets);
  s->comms = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *s->comms);
  dpc_status st = set && names && devs && sets && s->comms
                      ? DPC_OK
                      : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening collectives");
  for (uint32_t i = 0; !st && i < plan->n_devs; i++) {
    for (uint32_t j = 0; !st && j < plan->devs[i].n_steps; j++) {
      step_args *sa = &s->steps[i][j];
      if (!sa->comm) continue;
      const dpc_node *n = &g->nodes[plan->devs[i].steps[j].node];
      for (uint32_t k = 0; k < n->n_in; k++) set[k] = plan->slots[g->ids[n->in + k]].device;
      uint32_t c = 0;
      while (c < s->n_comms &&
             (s->comms[c]->ranks != n->n_in || memcmp(sets[c], set, n->n_in * sizeof *set)))
        c++;
      if (c == s->n_comms) {
        if (!(sets[c] = malloc(n->n_in * sizeof *set))) {
          st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening collectives");
          break;
        }
        memcpy(sets[c], set, n->n_in * sizeof *set);
        for (uint32_t k = 0; k < n->n_in; k++) names[k] = plan->devs[set[k]].name;
        for (uint32_t k = 0; k < n->n_in; k++) devs[k] = s->devs[set[k]];
        if ((st = open_group(s, n->n_in, devs, names, &s->comms[c], d))) break;
        s->n_comms++;
      }
      sa->group = s->comms[c];
    }
  }
  for (uint32_t c = 0; sets && c < (g->n_nodes ? g->n_nodes : 1); c++) free(sets[c]);
  free(sets);
  free(set);
  free(names);
  free(devs);
  return st;
}

/* The collectives run on a thread per device (overlap.h), so the backward pass goes on while a
 * gradient is reduced: each collective gets its place among its device's (comm_k), and each
 * step that reads a reduced value (the group's members' inputs count for a fusion group's
 * root), or copies one, the last such place it needs (need_k). */
static dpc_status open_overlap(dpc_session *s, dpc_diag *d) {
  const dpc_plan *plan = s->plan;
  const dpc_graph *g = plan->g;
  uint32_t nv = g->n_values ? g->n_values : 1, nn = g->n_nodes ? g->n_nodes : 1, jobs = 0;
  int32_t *kval = malloc(nv * sizeof *kval), *need = malloc(nn * sizeof *need);
  s->overlap = calloc(plan->n_devs, sizeof *s->overlap);
  for (uint32_t i = 0; i < plan->n_devs; i++)
    for (uint32_t j = 0; j < plan->devs[i].n_steps; j++) jobs += s->steps[i][j].comm;
  s->jobs = calloc(jobs ? jobs : 1, sizeof *s->jobs);
  dpc_status st = kval && need && s->overlap && s->jobs
                      ? DPC_OK
                      : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening collectives");
  for (uint32_t v = 0; !st && v < g->n_values; v++) kval[v] = -1;
  for (uint32_t i = 0; !st && i < g->n_nodes; i++) need[i] = -1;
  jobs = 0;
  for (uint32_t i = 0; !st && i < plan->n_devs; i++) {
    int32_t k = 0;
    for (uint32_t j = 0; j < plan->devs[i].n_steps; j++) {
      step_args *sa = &s->steps[i][j];
      sa->comm_k = sa->need_k = -1;
      if (!sa->comm) continue;
      sa->comm_k = k++;
      kval[g->nodes[plan->devs[i].steps[j].node].out + sa->rank] = sa->comm_k;
      s->jobs[jobs][0] = i, s->jobs[jobs][1] = j, jobs++;
    }
    if (k && !st) st = dpc_overlap_new(&s->overlap[i], d);
  }
  for (uint32_t m = 0; !st && m < g->n_nodes; m++) {
    const dpc_node *n = &g->nodes[m];
    uint32_t root = dpc_group_kernel(g, m);
    for (uint32_t k = 0; k < n->n_in; k++) {
      int32_t kv = kval[g->ids[n->in + k]];
      if (kv > need[root]) need[root] = kv;
    }
  }
  for (uint32_t i = 0; !st && i < plan->n_devs; i++)
    for (uint32_t j = 0; j < plan->devs[i].n_steps; j++) {
      const dpc_step *sp = &plan->devs[i].steps[j];
      step_args *sa = &s->steps[i][j];
      if (sp->kind == DPC_STEP_KERNEL && !sa->comm) sa->need_k = need[sp->node];
      if (sp->kind == DPC_STEP_COPY) sa->need_k = kval[sp->src];
    }
  free(kval);
  free(need);
  return st;
}

/* dpc_session_opts.exchange: the run's two ends (exchange.h), on host-visible devices only;
 * every process but device 0's takes the inputs as given. */
static dpc_status exchange_open(dpc_session *s, dpc_diag *d) {
  const dpc_graph *g = s->plan->g;
  for (uint32_t i = 0; i < s->plan->n_devs; i++)
    if (!s->devs[i]->ops->host_visible)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "%s: an inference run across processes needs host-visible devices",
                           s->plan->devs[i].name);
  dpc_status st = dpc_exchange_new(s->plan, s->self, s->peers, &s->exchange, d);
  for (uint32_t i = 0; !st && s->self && i < g->n_nodes; i++)
    if (g->nodes[i].op == DPC_OP_INPUT) s->given[g->nodes[i].out] = true;
  return st;
}

/* Across processes (dpc_session_opts.peers): device `self`'s collectives go over the peers'
 * transport or a subset of it (rank_groups); values read across devices are handed over
 * (handoff.h); the device's kernels run on a pool of this process's threads. A param or state
 * read on another device than its own is refused: this process's copy of it would never see the
 * owner's updates. */
dpc_status dpc_session_open_peers(dpc_session *s, const dpc_session_opts *o, dpc_diag *d) {
  const dpc_plan *plan = s->plan;
  const dpc_graph *g = plan->g;
  if (o->peers->ranks != plan->n_devs || o->self >= plan->n_devs)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the plan has %u devices, but %u processes take part (this one is %u)",
                         plan->n_devs, o->peers->ranks, o->self);
  s->peers = o->peers;
  s->self = o->self;
  const dpc_plan_device *pd = &plan->devs[s->self];
  for (uint32_t j = 0; j < pd->n_steps; j++) {
    step_args *sa = &s->steps[s->self][j];
    const dpc_step *sp = &pd->steps[j];
    if (sp->kind == DPC_STEP_COPY && plan->slots[sp->src].device != plan->slots[sp->dst].device)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "%s copies a value from another device, which is in another process",
                           pd->name);
    if (sp->kind != DPC_STEP_KERNEL) continue;
    const dpc_node *n = &g->nodes[sp->node];
    for (uint32_t k = 0; !sa->comm && k < n->n_in; k++) {
      uint32_t v = dpc_node_inputs(g, n)[k];
      if (plan->slots[v].device != s->self &&
          dpc_op_has(g->nodes[g->values[v].node].op, DPC_OPF_PERSIST))
        return dpc_graph_fail_node(g, sp->node, d, DPC_ERR_UNSUPPORTED,
                                   "%s reads a param or state kept on %s, another process: "
                                   "across processes each device reads only its own",
                                   pd->name, plan->devs[plan->slots[v].device].name);
    }
  }
  /* across processes a hang would cost every rank the timeout: proven matched first */
  dpc_status st = dpc_plan_check_comm(plan, d);
  if (!st) st = rank_groups(s, 1, d);
  if (!st) st = dpc_handoff_new(plan, s->self, s->peers, &s->handoff, d);
  if (!st && o->exchange) st = exchange_open(s, d);
  if (st) return st;
  if (o->native && (!o->threads || o->threads > 1)) return dpc_pool_new(o->threads, &s->pool, d);
  return DPC_OK;
}

/* Across processes (L devices each): the collectives of this process's devices, opened by every
 * process alike in the plan's order (a group of ranks is made by all of them together).
 * - Within one process: a shared-memory transport, in the process that holds the group.
 * - One member a process: the MPI transport among them, the peers' own when it is every device
 *   in order and each process runs one (its bits are the in-process transport's).
 * - Several members in some process: a split transport (transport_split.c), the members here
 *   summing in memory before MPI.
 * Each group has a communicator of its own when a process runs several devices, so each group's
 * device thread makes its MPI calls on its own. */
static dpc_status rank_groups(dpc_session *s, uint32_t L, dpc_diag *d) {
  const dpc_plan *plan = s->plan;
  const dpc_graph *g = plan->g;
  uint32_t cap = g->n_nodes ? g->n_nodes : 1, n_sets = 0, n = plan->n_devs, me = s->self / L;
  uint32_t **sets = calloc(cap, sizeof *sets), *len = calloc(cap, sizeof *len);
  uint32_t *ranks = calloc(n, sizeof *ranks);
  dpc_device **devs = calloc(n, sizeof *devs);
  const char **names = calloc(n, sizeof *names);
  dpc_transport **group = calloc(cap, sizeof *group);
  s->comms = calloc(cap, sizeof *s->comms);
  dpc_status st = sets && len && ranks && devs && names && group && s->comms
                      ? DPC_OK
                      : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening collectives");
  for (uint32_t i = 0; !st && i < n; i++)
    for (uint32_t j = 0; !st && j < plan->devs[i].n_steps; j++) {
      if (!s->steps[i][j].comm) continue;
      const dpc_node *nd = &g->nodes[plan->devs[i].steps[j].node];
      const uint32_t *in = dpc_node_inputs(g, nd);
      uint32_t c = 0;
      for (bool same = false; c < n_sets && !same; c += !same) {
        same = len[c] == nd->n_in;
        for (uint32_t k = 0; same && k < nd->n_in; k++)
          same = sets[c][k] == plan->slots[in[k]].device;
      }
      if (c == n_sets) {
        if (!(sets[c] = malloc(nd->n_in * sizeof **sets))) {
          st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening collectives");
          break;
        }
        uint32_t nr = 0, mine = UINT32_MAX, local = 0;
        for (uint32_t k = 0; k < nd->n_in; k++) {
          uint32_t dv = sets[c][k] = plan->slots[in[k]].device, r = dv / L;
          uint32_t q = 0;
          while (q < nr && ranks[q] != r) q++;
          if (q == nr) ranks[nr++] = r; /* the processes in their members' order */
          if (r == me) mine = q;
          devs[k] = r == me ? s->devs[dv] : NULL;
          names[k] = plan->devs[dv].name;
          local += r == me;
        }
        len[c] = nd->n_in;
        n_sets++;
        bool all = L == 1 && nd->n_in == n;
        for (uint32_t k = 0; all && k < nd->n_in; k++) all = sets[c][k] == k;
        dpc_transport *across = NULL;
        if (all)
          group[c] = s->peers;
        else if (nr == 1 && local)
          st = dpc_transport_open("shm", local, devs, names, s->timeout_s, &group[c], d);
        else if (!s->peers->ops->subset)
          st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                             "a collective of %s connects some of the devices only, which the %s "
                             "transport cannot do",
                             plan->devs[i].name, s->peers->ops->kind);
        else if (!(st = s->peers->ops->subset(s->peers, me, ranks, nr, &across, d)) && across &&
                 nr == nd->n_in)
          group[c] = across;
        else if (!st && across)
          st = dpc_transport_open_split(nd->n_in, devs, names, across, mine, s->timeout_s,
                                        &group[c], d);
        if (!st && group[c] && group[c] != s->peers) s->comms[s->n_comms++] = group[c];
      }
      if (i / L == me) s->steps[i][j].group = group[c];
    }
  for (uint32_t c = 0; sets && c < n_sets; c++) free(sets[c]);
  free(sets), free(len), free(ranks), free(devs), free(names), free(group);
  return st;
}

/* Across processes with several devices each (dpc_session_opts.local > 1): devices self ..
 * self + local - 1 run here, on a runner each, as dpc_session_open_devices runs every device;
 * values pass between them through events, and collectives that reach other processes go
 * hierarchically (rank_groups). Values handed between processes, and params or state read on
 * another device, are not built here. */
dpc_status dpc_session_open_rank_devices(dpc_session *s, const dpc_session_opts *o, dpc_diag *d) {
  const dpc_plan *plan = s->plan;
  const dpc_graph *g = plan->g;
  uint32_t L = o->local, n = plan->n_devs;
  if (o->peers->ranks * L != n || o->self % L || o->self + L > n)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the plan has %u devices, but %u processes of %u devices take part (this "
                         "one from device %u)",
                         n, o->peers->ranks, L, o->self);
  if (!o->peers->ops->subset)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "the %s transport cannot make groups of ranks",
                         o->peers->ops->kind);
  s->peers = o->peers;
  s->self = s->dev0 = o->self;
  s->timeout_s = o->timeout_s > 0 ? o->timeout_s : 60;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = 0; j < plan->devs[i].n_steps; j++) {
      const dpc_step *sp = &plan->devs[i].steps[j];
      bool cross = (sp->kind == DPC_STEP_WAIT && sp->peer / L != i / L) ||
                   (sp->kind == DPC_STEP_COPY &&
                    plan->slots[sp->src].device / L != plan->slots[sp->dst].device / L);
      if (cross)
        return dpc_diag_fail(
            d, DPC_ERR_UNSUPPORTED,
            "%s reads a value made on %s, in another process: with several "
            "devices a process only collectives cross between processes",
            plan->devs[i].name,
            plan->devs[sp->kind == DPC_STEP_WAIT ? sp->peer : plan->slots[sp->src].device].name);
      if (sp->kind != DPC_STEP_KERNEL || s->steps[i][j].comm) continue;
      const dpc_node *nd = &g->nodes[sp->node];
      for (uint32_t k = 0; k < nd->n_in; k++) {
        uint32_t v = dpc_node_inputs(g, nd)[k];
        if (plan->slots[v].device / L != i / L &&
            dpc_op_has(g->nodes[g->values[v].node].op, DPC_OPF_PERSIST))
          return dpc_graph_fail_node(g, sp->node, d, DPC_ERR_UNSUPPORTED,
                                     "%s reads a param or state kept on %s, in another process",
                                     plan->devs[i].name, plan->devs[plan->slots[v].device].name);
      }
    }
  dpc_status st = dpc_plan_check_comm(plan, d);
  char spec[32];
  snprintf(spec, sizeof spec, "cpu:%u", L);
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  if (!st) st = dpc_topology_load(NULL, &t, d);
  if (!st) st = dpc_devices_parse(t, spec, &l, d);
  s->pools = st ? NULL : calloc(n, sizeof *s->pools);
  s->events = st ? NULL : calloc(plan->n_events ? plan->n_events : 1, sizeof *s->events);
  uint32_t *first = st ? NULL : calloc(L, sizeof *first);
  if (!st && (!s->pools || !s->events || !first))
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening devices");
  for (uint32_t i = 0; !st && i < L; i++) {
    first[i] = l.devs[i].pus[0];
    if (o->native)
      st = dpc_pool_new_on(l.devs[i].pus, l.devs[i].n_cores, &s->pools[s->dev0 + i], d);
  }
  if (!st) st = rank_groups(s, L, d);
  if (!st)
    st = dpc_executor_new(L, t->synthetic ? NULL : first, dpc_session_run_device, s, &s->ex, d);
  free(first);
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  return st;
}

/* Several devices: the cores of each (from the --devices spec), a pool on them, a runner, the
 * collectives and the events. */
dpc_status dpc_session_open_devices(dpc_session *s, const dpc_session_opts *o, dpc_diag *d) {
  const dpc_plan *plan = s->plan;
  uint32_t n = plan->n_devs;
  char spec[32];
  snprintf(spec, sizeof spec, "cpu:%u", n);
  const char *want = o && o->devices ? o->devices : spec;
  dpc_topology *t = NULL;
  dpc_device_list l = {0};
  dpc_status st = dpc_topology_load(NULL, &t, d);
  if (!st) st = dpc_devices_parse(t, want, &l, d);
  if (!st && l.n != n)
    st =
        dpc_diag_fail(d, DPC_ERR_INVALID, "the plan has %u devices, but %s makes %u", n, want, l.n);
  s->timeout_s = o && o->timeout_s > 0 ? o->timeout_s : 60;
  s->stall = o && o->test ? o->test->stall_device : 0;
  s->pools = st ? NULL : calloc(n, sizeof *s->pools);
  s->events = st ? NULL : calloc(plan->n_events ? plan->n_events : 1, sizeof *s->events);
  const char **names = st ? NULL : calloc(n, sizeof *names);
  uint32_t *first = st ? NULL : calloc(n, sizeof *first);
  if (!st && (!s->pools || !s->events || !names || !first))
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening devices");
  for (uint32_t i = 0; !st && i < n; i++) {
    names[i] = plan->devs[i].name;
    first[i] = l.devs[i].pus[0];
    s->core_shared[i] = l.devs[i].shared;
    if (o && o->native) st = dpc_pool_new_on(l.devs[i].pus, l.devs[i].n_cores, &s->pools[i], d);
  }
  if (!st) st = open_groups(s, d);
  /* a collective thread needs a PU the devices' kernels do not use */
  uint32_t used = 0;
  for (uint32_t i = 0; !st && i < n; i++) used += l.devs[i].n_cores;
  int ct = o ? o->comm_thread : 0;
  if (!st && (ct > 0 || (ct == 0 && t->n_pus > used))) st = open_overlap(s, d);
  if (!st)
    st = dpc_executor_new(n, t->synthetic ? NULL : first, dpc_session_run_device, s, &s->ex, d);
  free(names);
  free(first);
  dpc_device_list_free(&l);
  dpc_topology_free(t);
  return st;
}
