/*
 * api.c — the public embedding API (include/dpc/dpc.h) on top of artifacts and sessions.
 *
 * A model is an opened artifact, read-only once loaded (its runners may run on many threads);
 * a runner is a session on one of its plans, plus the caller's bound buffers. A bound buffer
 * becomes the value's memory where the session allows it (dpc_session_place); otherwise inputs
 * are copied in before each run and outputs copied out after it.
 */
#include "runtime/api_internal.h"
#include "runtime/artifact.h"
#include "runtime/ranks.h"
#include "runtime/session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)DPC_ELEM_F32 == (int)DPC_F32 && (int)DPC_ELEM_BOOL == (int)DPC_BOOL &&
                   (int)DPC_ELEM_BF16 == (int)DPC_BF16 && (int)DPC_ELEM_I64 == (int)DPC_I64,
               "public element types follow the internal dtypes");

struct dpc_model {
  dpc_artifact *a;
  char name[256];
};

typedef struct binding {
  uint32_t value;
  void *data;
  bool output;
  bool in_place; /* the session's value lives in data: nothing to copy */
} binding;

struct dpc_runner {
  dpc_model *m;
  const dpc_plan *plan;
  dpc_session *s;
  uint32_t *lists[3]; /* value ids per role */
  uint32_t counts[3];
  binding *binds;
  uint32_t n_binds;
  dpc_log_fn log;
  void *log_user;
  const int *cancel;
  int64_t batch, rows;    /* the plan's batch; the caller's rows (a partial batch when fewer) */
  const dpc_ranks *ranks; /* dpc_runner_opts.ranks */
  char err[1024];
};

static size_t gather(const dpc_runner *r, uint32_t v, void *dst, size_t limit);
static size_t caller_bytes(const dpc_runner *r, uint32_t v);

static void put_err(char *err, size_t n, const dpc_diag *d) {
  if (err && n) snprintf(err, n, "%s", d->msg ? d->msg : dpc_status_name(d->status));
}

DPC_API dpc_status dpc_model_load(const char *path, dpc_model **out, char *err, size_t err_len) {
  *out = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_model *m = calloc(1, sizeof *m);
  dpc_status st =
      m ? dpc_artifact_open(path, &m->a, &d) : dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
  if (st) {
    put_err(err, err_len, &d);
    free(m);
  } else {
    const dpc_plan *p = dpc_artifact_plan(m->a, "infer", NULL);
    snprintf(m->name, sizeof m->name, "%s",
             p && p->g->name != DPC_NONE ? dpc_graph_str(p->g, p->g->name) : "");
    *out = m;
  }
  dpc_diag_free(&d);
  return st;
}

DPC_API void dpc_model_free(dpc_model *m) {
  if (!m) return;
  dpc_artifact_close(m->a);
  free(m);
}

DPC_API const char *dpc_model_name(const dpc_model *m) {
  return m->name;
}

DPC_API int dpc_model_can_train(const dpc_model *m) {
  return dpc_artifact_plan(m->a, "train", NULL) != NULL;
}

/* Value ids of each role: inputs, outputs, params and state. */
static dpc_status list_roles(dpc_runner *r) {
  const dpc_graph *g = r->plan->g;
  for (int role = 0; role < 3; role++) {
    r->lists[role] = calloc(g->n_values ? g->n_values : 1, sizeof *r->lists[role]);
    if (!r->lists[role]) return DPC_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    dpc_op op = g->nodes[i].op;
    uint32_t v = g->nodes[i].out;
    if (g->values[v].name == DPC_NONE) continue;
    if (op == DPC_OP_INPUT) r->lists[DPC_ROLE_INPUT][r->counts[DPC_ROLE_INPUT]++] = v;
    if (dpc_op_has(op, DPC_OPF_PERSIST)) r->lists[DPC_ROLE_PARAM][r->counts[DPC_ROLE_PARAM]++] = v;
  }
  for (uint32_t i = 0; i < g->n_outputs; i++)
    r->lists[DPC_ROLE_OUTPUT][r->counts[DPC_ROLE_OUTPUT]++] = g->outputs[i];
  return DPC_OK;
}

static const char *const plan_roles[] = {"infer", "train", "eval"};

/* The rows of a plan's batch: its first batched input's leading dimension (0: none). */
static int64_t plan_batch(const dpc_plan *p) {
  const dpc_graph *g = p->g;
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == DPC_OP_INPUT && g->values[g->nodes[i].out].shape.rank)
      return g->values[g->nodes[i].out].shape.d[0];
  return 0;
}

unsigned dpc_model_infer_rows(const dpc_model *m, int64_t *rows, unsigned max) {
  unsigned n = 0;
  const dpc_plan *p = dpc_artifact_plan(m->a, "infer", NULL);
  if (p && max) rows[n++] = plan_batch(p);
  for (uint32_t i = 0; p && dpc_artifact_role(m->a, i); i++) {
    const char *ri = dpc_artifact_role(m->a, i);
    const dpc_plan *pi = !strncmp(ri, "infer@", 6) ? dpc_artifact_plan(m->a, ri, NULL) : NULL;
    int64_t bi = pi ? plan_batch(pi) : 0;
    bool seen = false;
    for (unsigned k = 0; k < n; k++) seen |= rows[k] == bi;
    if (pi && !seen && n < max) rows[n++] = bi;
  }
  for (unsigned i = 1; i < n; i++) /* a handful of sizes: insertion sort */
    for (unsigned k = i; k > 0 && rows[k - 1] > rows[k]; k--) {
      int64_t t = rows[k];
      rows[k] = rows[k - 1];
      rows[k - 1] = t;
    }
  return n;
}

/* The fields of o that fit in its size, the rest zero (older callers). */
static dpc_status read_opts(const dpc_runner_opts *o, dpc_runner_opts *out, dpc_diag *d) {
  memset(out, 0, sizeof *out);
  if (!o) return DPC_OK;
  if (o->size < offsetof(dpc_runner_opts, mode) + sizeof o->mode)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "the runner options' size is %zu: set it to sizeof(dpc_runner_opts)",
                         o->size);
  memcpy(out, o, o->size < sizeof *out ? o->size : sizeof *out);
  out->size = sizeof *out;
  if ((unsigned)out->mode > DPC_MODE_EVAL)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "no runner mode %d", (int)out->mode);
  return DPC_OK;
}

DPC_API dpc_status dpc_runner_open(dpc_model *m, const dpc_runner_opts *opts, dpc_runner **out,
                                   char *err, size_t err_len) {
  *out = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_runner_opts o;
  dpc_status st = read_opts(opts, &o, &d);
  const dpc_native_kernel *k = NULL;
  const char *role = st ? "" : plan_roles[o.mode];
  const dpc_plan *p = st ? NULL : dpc_artifact_plan(m->a, role, &k);
  int64_t batch = p ? plan_batch(p) : 0;
  /* a partial batch: the smallest plan of the mode made for at least o.rows */
  for (uint32_t i = 0; p && o.rows && o.rows < (uint64_t)batch && dpc_artifact_role(m->a, i); i++) {
    const char *ri = dpc_artifact_role(m->a, i);
    size_t n = strlen(role);
    const dpc_native_kernel *ki;
    const dpc_plan *pi =
        !strncmp(ri, role, n) && ri[n] == '@' ? dpc_artifact_plan(m->a, ri, &ki) : NULL;
    int64_t bi = pi ? plan_batch(pi) : 0;
    if (pi && bi >= (int64_t)o.rows && bi < batch) p = pi, k = ki, batch = bi;
  }
  dpc_runner *r = st ? NULL : calloc(1, sizeof *r);
  if (st)
    ;
  else if (!r)
    st = dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
  else if (!p)
    st = dpc_diag_fail(&d, DPC_ERR_INVALID, "the model has no %s plan%s", role,
                       o.mode != DPC_MODE_INFER ? " (compile it with dpc compile --train)" : "");
  else if (o.share && o.share->m != m)
    st = dpc_diag_fail(&d, DPC_ERR_INVALID,
                       "a runner can share params only with a runner of the same model");
  else if (o.rows && o.rows < (uint64_t)batch && o.mode != DPC_MODE_INFER)
    st = dpc_diag_fail(&d, DPC_ERR_UNSUPPORTED,
                       "a %s plan runs whole batches of %lld rows, not %llu: padding rows would "
                       "count in its loss",
                       role, (long long)batch, (unsigned long long)o.rows);
  else if (o.rows > (uint64_t)batch)
    st = dpc_diag_fail(&d, DPC_ERR_SHAPE, "a batch of %llu rows is more than the %s plan's %lld",
                       (unsigned long long)o.rows, role, (long long)batch);
  else if (o.ranks && o.mode != DPC_MODE_INFER)
    st = dpc_diag_fail(&d, DPC_ERR_UNSUPPORTED,
                       "a model split over processes runs inference plans only, not its %s plan",
                       role);
  else if (o.ranks && o.ranks->t->ranks != p->n_devs)
    st = dpc_diag_fail(&d, DPC_ERR_INVALID,
                       "the model is split over %u devices, and %u process%s take%s part: run one "
                       "process for each device (mpirun -np %u)",
                       p->n_devs, o.ranks->t->ranks, o.ranks->t->ranks == 1 ? "" : "es",
                       o.ranks->t->ranks == 1 ? "s" : "", p->n_devs);
  if (!st) {
    r->m = m;
    r->plan = p;
    r->batch = batch;
    r->rows = o.rows ? (int64_t)o.rows : batch;
    r->log = o.log;
    r->log_user = o.log_user;
    r->cancel = o.cancel;
    r->ranks = o.ranks;
    dpc_session_opts so = {
        .training = o.mode == DPC_MODE_TRAIN,
        .native = k,
        .threads = o.threads,
        /* GPUs are cuda:0.. in order; their host threads share the cores */
        .devices = p->n_devs > 1 && !o.ranks && !dpc_artifact_device_kind(m->a) ? o.devices : NULL,
        .share = o.share ? o.share->s : NULL,
        .peers = o.ranks ? o.ranks->t : NULL,
        .self = o.ranks ? o.ranks->self : 0,
        .exchange = o.ranks != NULL,
        .device_kind = dpc_artifact_device_kind(m->a)};
    st = dpc_session_new(p, &so, &r->s, &d);
  }
  if (!st) dpc_session_set_step(r->s, o.step);
  if (!st) dpc_session_set_seed(r->s, o.seed);
  if (!st && list_roles(r)) st = dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
  if (st) {
    put_err(err, err_len, &d);
    if (o.log) o.log(o.log_user, d.msg ? d.msg : dpc_status_name(st));
    dpc_runner_free(r);
  } else {
    *out = r;
  }
  dpc_diag_free(&d);
  return st;
}

DPC_API dpc_status dpc_runner_new(dpc_model *m, dpc_mode mode, const dpc_runner *share,
                                  unsigned threads, dpc_runner **out, char *err, size_t err_len) {
  dpc_runner_opts o = {sizeof o, .mode = mode, .share = share, .threads = threads};
  return dpc_runner_open(m, &o, out, err, err_len);
}

bool dpc_runner_pipelines(const dpc_runner *r) {
  return dpc_session_pipelines(r->s);
}

unsigned dpc_model_pipeline_devices(const dpc_model *m) {
  const dpc_plan *p = dpc_artifact_plan(m->a, "infer", NULL);
  return p && dpc_plan_pipelines(p) ? p->n_devs : 1;
}

unsigned dpc_runner_devices(const dpc_runner *r) {
  return r->plan->n_devs;
}

void dpc_runner_set_turns(dpc_runner *r, pthread_mutex_t *turns, unsigned n) {
  dpc_session_set_turns(r->s, turns, n);
}

DPC_API void dpc_runner_free(dpc_runner *r) {
  if (!r) return;
  dpc_session_free(r->s);
  for (int i = 0; i < 3; i++) free(r->lists[i]);
  free(r->binds);
  free(r);
}

DPC_API const char *dpc_runner_error(const dpc_runner *r) {
  return r->err;
}

static dpc_status fail(dpc_runner *r, dpc_status st, const char *fmt, ...) DPC_PRINTF(3, 4);
static dpc_status fail(dpc_runner *r, dpc_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, sizeof r->err, fmt, ap);
  va_end(ap);
  if (r->log) r->log(r->log_user, r->err);
  return st;
}

DPC_API unsigned dpc_runner_count(const dpc_runner *r, dpc_role role) {
  return (unsigned)role < 3 ? r->counts[role] : 0;
}

/* the public struct holds every dimension a graph can have */
_Static_assert(DPC_MAX_RANK <= DPC_TENSOR_MAX_RANK, "dpc_tensor_info.dims is smaller than a shape");

DPC_API dpc_status dpc_runner_info(const dpc_runner *r, dpc_role role, unsigned i,
                                   dpc_tensor_info *info) {
  if ((unsigned)role >= 3 || i >= r->counts[role]) return DPC_ERR_INVALID;
  if (info->size < sizeof *info) return DPC_ERR_INVALID; /* set size; no older struct had it */
  const dpc_graph *g = r->plan->g;
  const dpc_value *v = &g->values[r->lists[role][i]];
  memset(info, 0, sizeof *info);
  info->size = sizeof *info;
  info->name = dpc_graph_str(g, v->name);
  info->elem = (dpc_elem)v->dtype;
  info->rank = v->shape.rank;
  for (unsigned k = 0; k < v->shape.rank; k++) info->dims[k] = v->shape.d[k];
  info->bytes = caller_bytes(r, r->lists[role][i]);
  if (v->shape.rank && info->bytes != (size_t)dpc_shape_numel(&v->shape) * dpc_dtype_size(v->dtype))
    info->dims[0] = (int64_t)(info->bytes / ((size_t)dpc_shape_numel(&v->shape) /
                                             (size_t)v->shape.d[0] * dpc_dtype_size(v->dtype)));
  return DPC_OK;
}

/* Value v with its data-parallel replicas' copies ("name.replica1", ...) in replica order: a
 * batch output of an artifact compiled for several devices is each replica's rows, which the
 * caller sees as one tensor of the whole batch. A scalar (the loss, all-reduced) stays one. */
static uint32_t replicas_of(const dpc_runner *r, uint32_t v, uint32_t *ids, uint32_t max) {
  const dpc_graph *g = r->plan->g;
  ids[0] = v;
  bool output = false;
  for (uint32_t i = 0; i < g->n_outputs; i++) output |= g->outputs[i] == v;
  if (!output || r->plan->n_devs < 2 || g->values[v].shape.rank == 0) return 1;
  uint32_t n = 1;
  char name[512];
  for (; n < max; n++) {
    snprintf(name, sizeof name, "%s.replica%u", dpc_graph_str(g, g->values[v].name), n);
    if ((ids[n] = dpc_graph_find(g, name)) == DPC_NONE) break;
  }
  return n;
}

/* The bytes of value v as the caller sees it (all replicas' rows); copied into dst unless NULL.
 * Sizes come from the plan's types, so sizing reads no device memory. */
static size_t gather(const dpc_runner *r, uint32_t v, void *dst, size_t limit) {
  const dpc_graph *g = r->plan->g;
  uint32_t ids[DPC_MAX_DEVICES];
  uint32_t n = replicas_of(r, v, ids, DPC_MAX_DEVICES);
  size_t at = 0;
  for (uint32_t k = 0; k < n; k++) {
    const dpc_value *val = &g->values[ids[k]];
    size_t b = (size_t)dpc_shape_numel(&val->shape) * dpc_dtype_size(val->dtype);
    if (dst && at < limit) {
      dpc_tensor t = dpc_session_value(r->s, ids[k]);
      memcpy((unsigned char *)dst + at, t.data, b < limit - at ? b : limit - at);
    }
    at += b;
  }
  return at;
}

/* Whether v is an input or an output whose rows are the batch's (a partial batch cuts them). */
static bool batched(const dpc_runner *r, uint32_t v) {
  const dpc_graph *g = r->plan->g;
  if (r->rows >= r->batch || !g->values[v].shape.rank) return false;
  bool io = g->nodes[g->values[v].node].op == DPC_OP_INPUT;
  for (uint32_t i = 0; i < g->n_outputs; i++) io |= g->outputs[i] == v;
  size_t full = gather(r, v, NULL, 0), row = full / (size_t)g->values[v].shape.d[0];
  return io && row && full / row == (size_t)r->batch;
}

/* The bytes of v as the caller holds them: the whole batch (every replica's rows), or the
 * partial batch's rows. */
static size_t caller_bytes(const dpc_runner *r, uint32_t v) {
  size_t full = gather(r, v, NULL, 0);
  return batched(r, v) ? full / (size_t)r->batch * (size_t)r->rows : full;
}

/* The named value and its session memory, checking the caller's byte count. */
static dpc_status lookup(dpc_runner *r, const char *name, size_t bytes, uint32_t *v,
                         dpc_tensor *t) {
  *v = dpc_graph_find(r->plan->g, name);
  if (*v == DPC_NONE) return fail(r, DPC_ERR_INVALID, "the model has no value named '%s'", name);
  *t = dpc_session_value(r->s, *v);
  size_t want = caller_bytes(r, *v);
  if (bytes != want)
    return fail(r, DPC_ERR_SHAPE, "'%s' holds %zu bytes, the buffer given %zu", name, want, bytes);
  return DPC_OK;
}

DPC_API dpc_status dpc_runner_bind(dpc_runner *r, const char *name, void *data, size_t bytes) {
  uint32_t v;
  dpc_tensor t;
  const dpc_graph *g = r->plan->g;
  uint32_t found = DPC_NONE;
  for (uint32_t i = 0; i < r->n_binds; i++)
    if (!strcmp(dpc_graph_str(g, g->values[r->binds[i].value].name), name)) found = i;
  if (found != DPC_NONE && r->binds[found].in_place) {
    dpc_diag d;
    dpc_diag_init(&d);
    dpc_status pst = dpc_session_place(r->s, r->binds[found].value, NULL, &d);
    dpc_diag_free(&d);
    if (pst) return fail(r, DPC_ERR_INTERNAL, "cannot unbind '%s'", name);
    r->binds[found].in_place = false;
  }
  if (!data) {
    if (found != DPC_NONE) r->binds[found] = r->binds[--r->n_binds];
    return DPC_OK;
  }
  dpc_status st = lookup(r, name, bytes, &v, &t);
  if (st) return st;
  bool input = g->nodes[g->values[v].node].op == DPC_OP_INPUT, output = false;
  for (uint32_t i = 0; i < g->n_outputs; i++) output |= g->outputs[i] == v;
  if (!input && !output)
    return fail(r, DPC_ERR_INVALID,
                "'%s' is neither an input nor an output (read or write params instead)", name);
  if (found == DPC_NONE) {
    binding *nb = realloc(r->binds, (r->n_binds + 1) * sizeof *nb);
    if (!nb) return fail(r, DPC_ERR_NOMEM, "out of memory binding '%s'", name);
    r->binds = nb;
    found = r->n_binds++;
  }
  dpc_diag d;
  dpc_diag_init(&d);
  bool in_place = !batched(r, v)
                      ? !dpc_session_place(r->s, v, data, &d)
                      : !dpc_diag_fail(&d, DPC_ERR_UNSUPPORTED,
                                       "a partial batch of %lld rows runs on the plan for %lld",
                                       (long long)r->rows, (long long)r->batch);
  /* a plan over several devices always copies (its values are spread over the devices'
   * buffers): said only where the caller could do something about it */
  if (!in_place && r->log && r->plan->n_devs == 1) {
    char msg[512];
    snprintf(msg, sizeof msg, "'%s' is copied at every run: %s", name, d.msg ? d.msg : "");
    r->log(r->log_user, msg);
  }
  dpc_diag_free(&d);
  r->binds[found] = (binding){v, data, !input, in_place};
  return DPC_OK;
}

DPC_API int dpc_runner_in_place(const dpc_runner *r, const char *name) {
  const dpc_graph *g = r->plan->g;
  for (uint32_t i = 0; i < r->n_binds; i++)
    if (!strcmp(dpc_graph_str(g, g->values[r->binds[i].value].name), name))
      return r->binds[i].in_place;
  return 0;
}

DPC_API uint64_t dpc_runner_step(const dpc_runner *r) {
  return dpc_session_steps(r->s);
}

DPC_API void dpc_runner_set_step(dpc_runner *r, uint64_t step) {
  dpc_session_set_step(r->s, step);
}

DPC_API void dpc_runner_set_seed(dpc_runner *r, uint64_t seed) {
  dpc_session_set_seed(r->s, seed);
}

/* A run of one device's part on a process other than device 0's: its inputs come from there,
 * its outputs go there. */
static dpc_status run_part(dpc_runner *r) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_status st = dpc_session_run(r->s, &d);
  if (st) fail(r, st, "%s", d.msg ? d.msg : dpc_status_name(st));
  dpc_diag_free(&d);
  return st;
}

DPC_API dpc_status dpc_runner_run(dpc_runner *r) {
  const dpc_graph *g = r->plan->g;
  if (r->cancel && __atomic_load_n(r->cancel, __ATOMIC_ACQUIRE))
    return fail(r, DPC_ERR_RUNTIME, "cancelled: the cancel flag was set before the run");
  if (r->ranks && r->ranks->self) return run_part(r);
  for (uint32_t i = 0; i < r->counts[DPC_ROLE_INPUT]; i++) {
    uint32_t v = r->lists[DPC_ROLE_INPUT][i];
    const binding *b = NULL;
    for (uint32_t k = 0; k < r->n_binds; k++)
      if (r->binds[k].value == v) b = &r->binds[k];
    if (!b)
      return fail(r, DPC_ERR_INVALID, "input '%s' is not bound",
                  dpc_graph_str(g, g->values[v].name));
    if (b->in_place) continue;
    dpc_tensor t = dpc_session_input(r->s, v);
    size_t cb = caller_bytes(r, v);
    memcpy(t.data, b->data, cb);
    memset((unsigned char *)t.data + cb, 0, dpc_tensor_bytes(&t) - cb);
  }
  dpc_diag d;
  dpc_diag_init(&d);
  /* the other processes run this plan's parts of the batch too, told before the inputs go */
  dpc_status st = r->ranks ? dpc_ranks_tell(r->ranks, DPC_RANKS_RUN, (uint64_t)r->batch, &d) : 0;
  if (!st) st = dpc_session_run(r->s, &d);
  if (st) {
    snprintf(r->err, sizeof r->err, "%s", d.msg ? d.msg : dpc_status_name(st));
    if (r->log) r->log(r->log_user, r->err);
  }
  dpc_diag_free(&d);
  if (st) return st;
  for (uint32_t k = 0; k < r->n_binds; k++) {
    if (!r->binds[k].output || r->binds[k].in_place) continue;
    gather(r, r->binds[k].value, r->binds[k].data, caller_bytes(r, r->binds[k].value));
  }
  r->err[0] = 0;
  return DPC_OK;
}

DPC_API dpc_status dpc_runner_read(dpc_runner *r, const char *name, void *data, size_t bytes) {
  uint32_t v;
  dpc_tensor t;
  dpc_status st = lookup(r, name, bytes, &v, &t);
  if (st) return st;
  gather(r, v, data, bytes);
  return DPC_OK;
}

DPC_API dpc_status dpc_runner_write(dpc_runner *r, const char *name, const void *data,
                                    size_t bytes) {
  uint32_t v;
  dpc_tensor t;
  dpc_status st = lookup(r, name, bytes, &v, &t);
  if (st) return st;
  const dpc_graph *g = r->plan->g;
  if (!dpc_op_has(g->nodes[g->values[v].node].op, DPC_OPF_PERSIST))
    return fail(r, DPC_ERR_INVALID, "'%s' is not a param or state", name);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_tensor src = t;
  src.data = (void *)data;
  st = dpc_session_set(r->s, name, &src, &d);
  if (st) snprintf(r->err, sizeof r->err, "%s", d.msg ? d.msg : dpc_status_name(st));
  dpc_diag_free(&d);
  return st;
}
