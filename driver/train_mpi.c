/*
 * train_mpi.c — training across MPI ranks (dpc train --devices mpi): each rank is one device of
 * the synchronous data-parallel plan (rank r = device r), and the gradients' all-reduce goes
 * over the MPI transport (runtime/transport_mpi.h), which sums in rank order like the
 * shared-memory one, so the losses are those of `--devices cpu:R` in one process.
 *
 * Every rank loads the model and plans the same plan deterministically; a hash of the plan is
 * compared across ranks before the first step. Rank 0 alone reports and writes files; a step
 * that runs on one device (a partial last batch) runs on rank 0 and its result is broadcast.
 *
 * MPI belongs to the process: dpc_mpi_init (api_mpi.c) or the application initializes it. This
 * file keeps no state outside the trainer. Without MPI at build time, --devices mpi is an
 * error that says so.
 */
#include "driver/train_internal.h"

#include "partitioner/partitioner.h"
#include "runtime/device.h"
#include "runtime/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DPC_HAVE_MPI
#include "runtime/transport_mpi.h"
#endif

bool dpc_driver_is_mpi(const char *spec) {
  return spec && !strncmp(spec, "mpi", 3) && (spec[3] == 0 || spec[3] == ':');
}

/* The local devices of "mpi:LOCAL": "cpu" (one device a rank) or "cpu:L" (L devices a rank,
 * each on its share of the rank's cores). */
dpc_status dpc_driver_mpi_local(const char *spec, uint32_t *local, dpc_diag *d) {
  *local = 1;
  if (!spec[3] || !strcmp(spec + 3, ":cpu")) return DPC_OK;
  char *end;
  unsigned long l = !strncmp(spec + 3, ":cpu:", 5) ? strtoul(spec + 8, &end, 10) : 0;
  if (l >= 1 && l <= 64 && spec[8] >= '0' && spec[8] <= '9' && !*end) {
    *local = (uint32_t)l;
    return DPC_OK;
  }
  return dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: each rank's devices are 'cpu' (one, as 'mpi' alone) or 'cpu:N' (N "
                       "devices a rank, 1 to 64), as in 'mpi:cpu:2'",
                       spec);
}

#ifdef DPC_HAVE_MPI

dpc_status dpc_train_mpi_threads(const char *what, dpc_diag *d) {
  int level = 0;
  MPI_Query_thread(&level);
  if (level >= MPI_THREAD_MULTIPLE) return DPC_OK;
  return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                       "%s call MPI from several threads at once, and this MPI was started at "
                       "thread level %d, below MPI_THREAD_MULTIPLE",
                       what, level);
}

/* The ranks of comm, and the devices of spec on each. */
static dpc_status mpi_devices(const char *spec, MPI_Comm comm, uint32_t *ranks, uint32_t *local,
                              dpc_diag *d) {
  dpc_status st = dpc_driver_mpi_local(spec, local, d);
  if (st) return st;
  int inited = 0, size = 0;
  MPI_Initialized(&inited);
  if (!inited)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "--devices %s: MPI is not initialized (run dpc under mpirun, e.g. "
                         "'mpirun -np 2 dpc train MODEL --devices mpi')",
                         spec);
  MPI_Comm_size(comm, &size);
  if (*local > 1 && (st = dpc_train_mpi_threads("several devices a rank", d))) {
    dpc_diag_prefix(d, "--devices %s: ", spec);
    return st;
  }
  *ranks = (uint32_t)size;
  return DPC_OK;
}

dpc_status dpc_driver_mpi_world(const char *spec, uint32_t *n, dpc_diag *d) {
  uint32_t ranks = 0, local = 0;
  dpc_status st = mpi_devices(spec, MPI_COMM_WORLD, &ranks, &local, d);
  *n = ranks * local;
  return st;
}

dpc_status dpc_train_mpi_open(trainer *t, dpc_diag *d) {
  MPI_Comm comm = t->o->mpi_comm ? *(const MPI_Comm *)t->o->mpi_comm : MPI_COMM_WORLD;
  dpc_status st = mpi_devices(t->o->devices, comm, &t->ranks, &t->local, d);
  if (st) return st;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  t->rank = (uint32_t)rank;
  char name[32];
  snprintf(name, sizeof name, "cpu:%u", t->rank * t->local);
  /* the transport stages through a device's copies; every rank's device is a cpu */
  if ((st = dpc_device_open("cpu:0", &t->peer_dev, d))) return st;
  double timeout = t->o->timeout_s > 0 ? t->o->timeout_s : 60;
  st = dpc_transport_open_mpi(comm, t->peer_dev, name, timeout, &t->peers, d);
  if (!st) st = dpc_transport_mpi_split_hosts(t->peers, t->o->pretend_hosts, d);
  uint32_t hosts = st ? 1 : dpc_transport_mpi_hosts(t->peers);
  double lat = 0, gbs = 0;
  if (!st) st = dpc_transport_mpi_link(t->peers, &lat, &gbs, d);
  t->hosts = hosts, t->link_gbs = gbs, t->link_latency_s = lat;
  if (!st && t->rank == 0 && t->o->on_note && hosts > 1 && (hosts < t->ranks || t->local > 1)) {
    char msg[200];
    snprintf(msg, sizeof msg, "%u ranks on %u %shosts: %s", t->ranks, hosts,
             t->o->pretend_hosts ? "pretended " : "",
             t->o->async ? "the parameter server on rank 0 talks to every worker directly"
                         : "gradients are summed within each host first");
    t->o->on_note(t->o->user, msg);
  }
  if (!st && t->rank == 0 && t->o->on_note && t->ranks > 1) {
    char msg[320];
    int at = snprintf(msg, sizeof msg, "the link %s, measured: %.1f us a message, %.2f GB/s",
                      hosts > 1 ? "between hosts" : "between ranks 0 and 1", lat * 1e6, gbs);
    if (hosts > 1 && at > 0 && (size_t)at < sizeof msg)
      snprintf(msg + at, sizeof msg - (size_t)at,
               " (dpc plan --devices %s --hosts %ux%u --link %.2f,%.1f plans with it)",
               t->o->devices, hosts, t->ranks / hosts * t->local, gbs, lat * 1e6);
    t->o->on_note(t->o->user, msg);
  }
  return st;
}

#else

dpc_status dpc_driver_mpi_world(const char *spec, uint32_t *n, dpc_diag *d) {
  (void)n;
  uint32_t local;
  dpc_status st = dpc_driver_mpi_local(spec, &local, d);
  return st ? st
            : dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                            "--devices %s: this dpc was built without MPI (install OpenMPI, "
                            "libopenmpi-dev, and build again; 'dpc version' says whether it is in)",
                            spec);
}

dpc_status dpc_train_mpi_threads(const char *what, dpc_diag *d) {
  (void)what;
  uint32_t n;
  return dpc_driver_mpi_world("mpi", &n, d);
}

dpc_status dpc_train_mpi_open(trainer *t, dpc_diag *d) {
  uint32_t n;
  return dpc_driver_mpi_world(t->o->devices, &n, d);
}

#endif

void dpc_train_mpi_close(trainer *t) {
  if (t->peers) dpc_transport_free(t->peers);
  if (t->peer_dev) dpc_device_close(t->peer_dev);
  t->peers = NULL;
  t->peer_dev = NULL;
}

uint64_t dpc_driver_fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* An attribute's name and value (a learning rate, a seed, a shape) into h. */
static uint64_t attr_hash(uint64_t h, const dpc_graph *g, const dpc_attr *a) {
  const char *name = dpc_graph_str(g, a->name);
  h = dpc_driver_fnv(h, name, strlen(name) + 1);
  uint32_t f[3] = {a->kind, a->dtype, a->n};
  h = dpc_driver_fnv(h, f, sizeof f);
  switch (a->kind) {
  case DPC_ATTR_STR: {
    const char *v = dpc_graph_str(g, a->u.s);
    return dpc_driver_fnv(h, v, strlen(v) + 1);
  }
  case DPC_ATTR_INTS:
  case DPC_ATTR_SHAPE: return dpc_driver_fnv(h, &g->ints[a->u.off], a->n * sizeof *g->ints);
  case DPC_ATTR_FLOATS:
  case DPC_ATTR_TENSOR: return dpc_driver_fnv(h, &g->reals[a->u.off], a->n * sizeof *g->reals);
  default: return dpc_driver_fnv(h, &a->u, sizeof a->u);
  }
}

/* What two ranks must agree on to run together: every device's steps, every value's place and
 * shape, every node's op and arguments. */
static uint64_t plan_hash(const dpc_plan *p) {
  uint64_t h = dpc_driver_fnv(0xcbf29ce484222325ull, &p->n_devs, sizeof p->n_devs);
  for (uint32_t i = 0; i < p->n_devs; i++) {
    const dpc_plan_device *pd = &p->devs[i];
    h = dpc_driver_fnv(h, &pd->n_steps, sizeof pd->n_steps);
    h = dpc_driver_fnv(h, &pd->bytes, sizeof pd->bytes);
    for (uint32_t j = 0; j < pd->n_steps; j++) {
      const dpc_step *s = &pd->steps[j];
      uint32_t f[6] = {(uint32_t)s->kind, s->node, s->src, s->dst, s->peer, s->event};
      h = dpc_driver_fnv(h, f, sizeof f);
    }
  }
  const dpc_graph *g = p->g;
  for (uint32_t v = 0; v < g->n_values; v++) {
    const dpc_slot *sl = &p->slots[v];
    uint64_t f[3] = {sl->device, sl->offset, sl->bytes};
    h = dpc_driver_fnv(h, f, sizeof f);
    h = dpc_driver_fnv(h, &g->values[v].dtype, sizeof g->values[v].dtype);
    h = dpc_driver_fnv(h, g->values[v].shape.d,
                       g->values[v].shape.rank * sizeof g->values[v].shape.d[0]);
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    uint32_t f[3] = {(uint32_t)n->op, n->n_in, n->n_out};
    h = dpc_driver_fnv(h, f, sizeof f);
    h = dpc_driver_fnv(h, &g->ids[n->in], n->n_in * sizeof *g->ids);
    for (uint32_t k = 0; k < n->n_attr; k++) h = attr_hash(h, g, &g->attrs[n->attr + k]);
  }
  for (uint32_t k = 0; k < g->obj.n_attr; k++) h = attr_hash(h, g, &g->attrs[g->obj.attr + k]);
  return h;
}

dpc_status dpc_train_mpi_check_plan(trainer *t, const dpc_plan *p, dpc_diag *d) {
  uint64_t mine = plan_hash(p), root = mine;
  dpc_transport *x = t->peers;
  /* rank 0's hash to everyone, then everyone's verdict to everyone: each rank then names the
   * same ranks, and none starts a step the others refuse */
  dpc_status st = x->ops->broadcast(x, t->rank, 0, &root, sizeof root, d);
  double *bad = st ? NULL : calloc(t->ranks, sizeof *bad);
  if (!st && !bad) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) {
    bad[t->rank] = mine != root;
    st = x->ops->all_reduce(x, t->rank, bad, DPC_F64, t->ranks, DPC_REDUCE_SUM, d);
  }
  for (uint32_t k = 1; !st && k < t->ranks; k++)
    if (bad[k])
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "rank %u planned a different step than rank 0 (plan hash %016llx on "
                         "rank 0%s): every rank must run the same dpc, model and options",
                         k, (unsigned long long)root, k == t->rank ? ", another here" : "");
  free(bad);
  return st;
}

dpc_status dpc_train_mpi_share(trainer *t, dpc_diag *d) {
  const run_t *r = &t->train_full;
  const dpc_graph *g = r->plan->g;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (!dpc_op_has(g->nodes[i].op, DPC_OPF_PERSIST)) continue;
    uint32_t v = g->nodes[i].out;
    char base[256];
    if (dpc_replica_of(dpc_graph_str(g, g->values[v].name), base, sizeof base)) continue;
    dpc_tensor x = dpc_session_value(r->s, v);
    dpc_status st = t->peers->ops->broadcast(t->peers, t->rank, 0, x.data, dpc_tensor_bytes(&x), d);
    if (st) return st;
  }
  return DPC_OK;
}

dpc_status dpc_train_mpi_fetch(trainer *t, const run_t *r, uint32_t v, dpc_diag *d) {
  if (!r->split || v == DPC_NONE) return DPC_OK;
  dpc_tensor x = dpc_session_value(r->s, v);
  return t->peers->ops->broadcast(t->peers, t->rank, r->plan->slots[v].device / t->local, x.data,
                                  dpc_tensor_bytes(&x), d);
}

dpc_status dpc_train_mpi_gather(trainer *t, dpc_diag *d) {
  const run_t *r = &t->train_full;
  if (!r->split) return DPC_OK;
  const dpc_graph *g = r->plan->g;
  dpc_status st = DPC_OK;
  for (uint32_t i = 0; i < g->n_nodes && !st; i++)
    if (dpc_op_has(g->nodes[i].op, DPC_OPF_PERSIST))
      st = dpc_train_mpi_fetch(t, r, g->nodes[i].out, d);
  return st;
}

dpc_status dpc_train_mpi_placement(trainer *t, dpc_status st, dpc_diag *d) {
  dpc_graph *g = t->model;
  /* [0]: rank 0 placed it; then per node its device's number, or DPC_NONE */
  uint32_t n = g->n_nodes + 1, *dev = calloc(n, sizeof *dev);
  if (!dev) return st ? st : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (t->rank == 0) {
    dev[0] = st == DPC_OK;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
      unsigned k;
      const dpc_node *nd = &g->nodes[i];
      dev[i + 1] = nd->device != DPC_NONE && sscanf(dpc_graph_str(g, nd->device), "cpu:%u", &k) == 1
                       ? k
                       : DPC_NONE;
    }
  }
  dpc_diag quiet = {0};
  dpc_status bst = t->peers->ops->broadcast(t->peers, t->rank, 0, dev, n * sizeof *dev,
                                            t->rank == 0 && st ? &quiet : d);
  dpc_diag_clear(&quiet);
  if (t->rank == 0 || bst) {
    free(dev);
    return st ? st : bst;
  }
  if (!dev[0]) {
    free(dev);
    return dpc_diag_fail(d, DPC_ERR_RUNTIME, "rank 0 could not place the model (it says why)");
  }
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    char name[32];
    snprintf(name, sizeof name, "cpu:%u", dev[i + 1]);
    g->nodes[i].device =
        dev[i + 1] == DPC_NONE ? DPC_NONE : dpc_graph_intern(g, name, strlen(name));
    if (dev[i + 1] != DPC_NONE && g->nodes[i].device == DPC_NONE)
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  free(dev);
  return st;
}

dpc_status dpc_train_mpi_trace(trainer *t, const dpc_trace_event **ev, uint32_t *n,
                               dpc_trace_event **owned, dpc_diag *d) {
  *owned = NULL;
  const dpc_plan *p = t->train_full.plan;
  dpc_transport *x = t->peers;
  dpc_status st = x->ops->barrier(x, t->rank, d);
  double tb = dpc_now_s();
  uint64_t total = 0;
  for (uint32_t i = 0; !st && i < p->n_devs; i++) {
    uint32_t owner = i / t->local;
    if (owner != t->rank) n[i] = 0;
    st = x->ops->broadcast(x, t->rank, owner, &n[i], sizeof n[i], d);
    total += n[i];
  }
  dpc_trace_event *all = st ? NULL : malloc((total ? total : 1) * sizeof *all);
  if (!st && !all) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory gathering the trace");
  for (uint32_t i = 0, at = 0; !st && i < p->n_devs; at += n[i], i++) {
    uint32_t owner = i / t->local;
    if (owner == t->rank)
      for (uint32_t k = 0; k < n[i]; k++) {
        all[at + k] = ev[i][k];
        all[at + k].start -= tb, all[at + k].end -= tb;
      }
    if (n[i]) st = x->ops->broadcast(x, t->rank, owner, all + at, n[i] * sizeof *all, d);
    ev[i] = all + at;
  }
  if (st) {
    free(all);
    return st;
  }
  *owned = all;
  return DPC_OK;
}

dpc_status dpc_train_mpi_any(trainer *t, bool *flag, dpc_diag *d) {
  double f = *flag;
  dpc_status st = t->peers->ops->all_reduce(t->peers, t->rank, &f, DPC_F64, 1, DPC_REDUCE_SUM, d);
  *flag = f > 0;
  return st;
}
