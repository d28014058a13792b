/*
 * api.c — the public embedding API (include/dpc/dpc.h) on top of artifacts and sessions.
 *
 * A model is an opened artifact; a runner is a session on one of its plans, plus the caller's
 * bound buffers: inputs are copied in before each run and outputs copied out after it, so the
 * session keeps its planned memory and the caller keeps its own.
 */
#include "runtime/artifact.h"
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
} binding;

struct dpc_runner {
  dpc_model *m;
  const dpc_plan *plan;
  dpc_session *s;
  uint32_t *lists[3]; /* value ids per role */
  uint32_t counts[3];
  binding *binds;
  uint32_t n_binds;
  char err[1024];
};

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

DPC_API dpc_status dpc_runner_new(dpc_model *m, dpc_mode mode, const dpc_runner *share,
                                  unsigned threads, dpc_runner **out, char *err, size_t err_len) {
  *out = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  const dpc_native_kernel *k = NULL;
  const char *role = mode == DPC_MODE_TRAIN ? "train" : "infer";
  const dpc_plan *p = dpc_artifact_plan(m->a, role, &k);
  dpc_runner *r = calloc(1, sizeof *r);
  dpc_status st = DPC_OK;
  if (!r)
    st = dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
  else if (!p)
    st = dpc_diag_fail(&d, DPC_ERR_INVALID, "the model has no %s plan%s", role,
                       mode == DPC_MODE_TRAIN ? " (compile it with dpc compile --train)" : "");
  else if (share && share->m != m)
    st = dpc_diag_fail(&d, DPC_ERR_INVALID,
                       "a runner can share params only with a runner of the same model");
  if (!st) {
    r->m = m;
    r->plan = p;
    dpc_session_opts so = {.training = mode == DPC_MODE_TRAIN,
                           .native = k,
                           .threads = threads,
                           .share = share ? share->s : NULL};
    st = dpc_session_new(p, &so, &r->s, &d);
  }
  if (!st && list_roles(r)) st = dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
  if (st) {
    put_err(err, err_len, &d);
    dpc_runner_free(r);
  } else {
    *out = r;
  }
  dpc_diag_free(&d);
  return st;
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
  const dpc_graph *g = r->plan->g;
  const dpc_value *v = &g->values[r->lists[role][i]];
  memset(info, 0, sizeof *info);
  info->name = dpc_graph_str(g, v->name);
  info->elem = (dpc_elem)v->dtype;
  info->rank = v->shape.rank;
  for (unsigned k = 0; k < v->shape.rank; k++) info->dims[k] = v->shape.d[k];
  info->bytes = (size_t)dpc_shape_numel(&v->shape) * dpc_dtype_size(v->dtype);
  return DPC_OK;
}

/* The named value and its session memory, checking the caller's byte count. */
static dpc_status lookup(dpc_runner *r, const char *name, size_t bytes, uint32_t *v,
                         dpc_tensor *t) {
  *v = dpc_graph_find(r->plan->g, name);
  if (*v == DPC_NONE) return fail(r, DPC_ERR_INVALID, "the model has no value named '%s'", name);
  *t = dpc_session_value(r->s, *v);
  if (bytes != dpc_tensor_bytes(t))
    return fail(r, DPC_ERR_SHAPE, "'%s' holds %zu bytes, the buffer given %zu", name,
                dpc_tensor_bytes(t), bytes);
  return DPC_OK;
}

DPC_API dpc_status dpc_runner_bind(dpc_runner *r, const char *name, void *data, size_t bytes) {
  uint32_t v;
  dpc_tensor t;
  const dpc_graph *g = r->plan->g;
  uint32_t found = DPC_NONE;
  for (uint32_t i = 0; i < r->n_binds; i++)
    if (!strcmp(dpc_graph_str(g, g->values[r->binds[i].value].name), name)) found = i;
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
  r->binds[found] = (binding){v, data, !input};
  return DPC_OK;
}

DPC_API dpc_status dpc_runner_run(dpc_runner *r) {
  const dpc_graph *g = r->plan->g;
  for (uint32_t i = 0; i < r->counts[DPC_ROLE_INPUT]; i++) {
    uint32_t v = r->lists[DPC_ROLE_INPUT][i];
    const binding *b = NULL;
    for (uint32_t k = 0; k < r->n_binds; k++)
      if (r->binds[k].value == v) b = &r->binds[k];
    if (!b)
      return fail(r, DPC_ERR_INVALID, "input '%s' is not bound",
                  dpc_graph_str(g, g->values[v].name));
  }
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_status st = DPC_OK;
  /* inputs and outputs cross to and from the device through its copies */
  for (uint32_t k = 0; k < r->n_binds && !st; k++)
    if (!r->binds[k].output) st = dpc_session_write(r->s, r->binds[k].value, r->binds[k].data, &d);
  if (!st) st = dpc_session_run(r->s, &d);
  for (uint32_t k = 0; k < r->n_binds && !st; k++)
    if (r->binds[k].output) st = dpc_session_read(r->s, r->binds[k].value, r->binds[k].data, &d);
  if (st) snprintf(r->err, sizeof r->err, "%s", d.msg ? d.msg : dpc_status_name(st));
  dpc_diag_free(&d);
  if (st) return st;
  r->err[0] = 0;
  return DPC_OK;
}

DPC_API dpc_status dpc_runner_read(dpc_runner *r, const char *name, void *data, size_t bytes) {
  uint32_t v;
  dpc_tensor t;
  dpc_status st = lookup(r, name, bytes, &v, &t);
  if (st) return st;
  dpc_diag d;
  dpc_diag_init(&d);
  st = dpc_session_read(r->s, v, data, &d);
  if (st) snprintf(r->err, sizeof r->err, "%s", d.msg ? d.msg : dpc_status_name(st));
  dpc_diag_free(&d);
  return st;
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
