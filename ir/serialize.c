/*
 * serialize.c — writing and reading plans (see serialize.h). Little-endian, field by field, so
 * the bytes do not depend on struct padding or the compiler.
 */
#include "ir/serialize.h"
#include "ir/print.h"

#include <stdlib.h>
#include <string.h>

#define MAGIC   "DPCP"
#define VERSION 2u

/* ---- writing --------------------------------------------------------------------------------- */

static void w32(dpc_buf *b, uint32_t v) {
  unsigned char c[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  dpc_buf_putn(b, (const char *)c, 4);
}

static void w64(dpc_buf *b, uint64_t v) {
  w32(b, (uint32_t)v);
  w32(b, (uint32_t)(v >> 32));
}

static void wbytes(dpc_buf *b, const void *p, uint32_t n) {
  w32(b, n);
  if (n) dpc_buf_putn(b, p, n);
}

dpc_status dpc_plan_write(const dpc_plan *p, const dpc_plan_kernel *k, dpc_buf *b, dpc_diag *d) {
  const dpc_graph *g = p->g;
  dpc_buf_putn(b, MAGIC, 4);
  w32(b, VERSION);
  w32(b, g->name);
  wbytes(b, g->strs.data, g->strs.len);
  w32(b, g->n_nodes);
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    uint32_t f[11] = {(uint32_t)n->op, n->in,     n->n_in,  n->out,      n->n_out,  n->attr,
                      n->n_attr,       n->device, n->fused, n->loc.line, n->loc.col};
    for (int j = 0; j < 11; j++) w32(b, f[j]);
  }
  w32(b, g->n_values);
  for (uint32_t i = 0; i < g->n_values; i++) {
    const dpc_value *v = &g->values[i];
    w32(b, v->node), w32(b, v->index), w32(b, v->name), w32(b, (uint32_t)v->dtype),
        w32(b, v->shape.rank);
    for (uint32_t j = 0; j < v->shape.rank; j++) w64(b, (uint64_t)v->shape.d[j]);
  }
  w32(b, g->n_ids);
  for (uint32_t i = 0; i < g->n_ids; i++) w32(b, g->ids[i]);
  w32(b, g->n_attrs);
  for (uint32_t i = 0; i < g->n_attrs; i++) {
    const dpc_attr *a = &g->attrs[i];
    uint64_t payload;
    memcpy(&payload, &a->u, sizeof payload);
    w32(b, a->name), w32(b, a->kind), w32(b, a->dtype), w32(b, a->rank), w32(b, a->n),
        w32(b, a->dims);
    w64(b, payload);
  }
  w32(b, g->n_ints);
  for (uint32_t i = 0; i < g->n_ints; i++) w64(b, (uint64_t)g->ints[i]);
  w32(b, g->n_reals);
  for (uint32_t i = 0; i < g->n_reals; i++) {
    uint64_t bits;
    memcpy(&bits, &g->reals[i], 8);
    w64(b, bits);
  }
  w32(b, g->n_syms);
  for (uint32_t i = 0; i < g->n_syms; i++) w32(b, g->syms[i]), w64(b, (uint64_t)g->sym_vals[i]);
  w32(b, g->n_outputs);
  for (uint32_t i = 0; i < g->n_outputs; i++) w32(b, g->outputs[i]);
  w32(b, g->n_updates);
  for (uint32_t i = 0; i < g->n_updates; i++) {
    const dpc_update *u = &g->updates[i];
    w32(b, u->target), w32(b, u->value), w32(b, u->loc.line), w32(b, u->loc.col);
  }
  const dpc_objective *o = &g->obj;
  w32(b, o->loss), w32(b, o->optimizer), w32(b, o->attr), w32(b, o->n_attr), w32(b, o->loc.line),
      w32(b, o->loc.col);
  /* the plan */
  w32(b, p->training);
  w32(b, p->n_devs);
  for (uint32_t i = 0; i < p->n_devs; i++) {
    const dpc_plan_device *dv = &p->devs[i];
    wbytes(b, dv->name, (uint32_t)strlen(dv->name));
    w64(b, dv->bytes);
    w32(b, dv->n_steps);
    for (uint32_t j = 0; j < dv->n_steps; j++) {
      const dpc_step *s = &dv->steps[j];
      w32(b, (uint32_t)s->kind), w32(b, s->node), w32(b, s->src), w32(b, s->dst), w32(b, s->peer),
          w32(b, s->event);
    }
  }
  for (uint32_t i = 0; i < g->n_values; i++) {
    w32(b, p->slots[i].device);
    w64(b, p->slots[i].offset);
    w64(b, p->slots[i].bytes);
  }
  w32(b, p->n_events);
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const char *sym = k ? k[i].symbol : "";
    wbytes(b, sym, (uint32_t)strlen(sym));
    w64(b, k ? (uint64_t)k[i].total : 0);
  }
  return b->oom ? dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory writing a plan") : DPC_OK;
}

/* ---- reading ----------------------------------------------------------------------------------
 */

typedef struct rd {
  const unsigned char *b;
  size_t len, pos;
  bool bad;
} rd;

static uint32_t r32(rd *r) {
  if (r->len - r->pos < 4) {
    r->bad = true;
    r->pos = r->len;
    return 0;
  }
  const unsigned char *c = r->b + r->pos;
  r->pos += 4;
  return (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
}

static uint64_t r64(rd *r) {
  uint64_t lo = r32(r);
  return lo | (uint64_t)r32(r) << 32;
}

/* A count of elements each at least `unit` bytes long: more than the rest of the buffer can
 * hold is corrupt (and must not turn into a huge allocation). */
static uint32_t rcount(rd *r, size_t unit) {
  uint32_t n = r32(r);
  if ((size_t)n > (r->len - r->pos) / unit) r->bad = true;
  return r->bad ? 0 : n;
}

/* Allocate an array for a graph field, replacing the one dpc_graph_new may have made; keeps
 * capacities consistent for later growth. */
#define ALLOC(arr, cap, n)                                                                         \
  (free(arr), (cap) = (n) ? (n) : 1, (arr) = calloc((cap), sizeof *(arr)), (arr) != NULL)

static dpc_status corrupt(dpc_diag *d, const char *name, const char *what) {
  return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: not a valid compiled plan (%s)", name, what);
}

/* The graph's fields, read and range-checked; the verifier checks the rest. */
static dpc_status read_graph(rd *r, const char *name, dpc_graph *g, dpc_diag *d) {
  g->name = r32(r);
  uint32_t slen = rcount(r, 1);
  if (r->bad) return corrupt(d, name, "truncated string pool");
  /* re-intern the strings in order: they land at the same offsets, and the hash table is
   * rebuilt */
  const char *s = (const char *)r->b + r->pos;
  if (slen && s[slen - 1] != 0) return corrupt(d, name, "string pool not terminated");
  for (uint32_t off = 0; off < slen;) {
    size_t n = strlen(s + off);
    if (dpc_strpool_intern(&g->strs, s + off, n) != off) return corrupt(d, name, "repeated string");
    off += (uint32_t)n + 1;
  }
  r->pos += slen;
  uint32_t strs = g->strs.len;
#define STR_OK(id) ((id) == DPC_NONE || ((id) < strs && ((id) == 0 || g->strs.data[(id)-1] == 0)))
  if (!STR_OK(g->name)) return corrupt(d, name, "model name");
  g->n_nodes = rcount(r, 44);
  if (r->bad || !ALLOC(g->nodes, g->cap_nodes, g->n_nodes)) return corrupt(d, name, "nodes");
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    dpc_node *n = &g->nodes[i];
    uint32_t op = r32(r);
    if (op >= DPC_OP_COUNT) return corrupt(d, name, "unknown op");
    n->op = (dpc_op)op;
    n->in = r32(r), n->n_in = r32(r), n->out = r32(r), n->n_out = r32(r), n->attr = r32(r),
    n->n_attr = r32(r);
    n->device = r32(r), n->fused = r32(r), n->loc.line = r32(r), n->loc.col = r32(r);
    if (!STR_OK(n->device)) return corrupt(d, name, "device name");
    if (n->fused != DPC_NONE && (n->fused <= i || n->fused >= g->n_nodes))
      return corrupt(d, name, "fusion group");
  }
  g->n_values = rcount(r, 20);
  if (r->bad || !ALLOC(g->values, g->cap_values, g->n_values)) return corrupt(d, name, "values");
  for (uint32_t i = 0; i < g->n_values; i++) {
    dpc_value *v = &g->values[i];
    v->node = r32(r), v->index = r32(r), v->name = r32(r);
    uint32_t t = r32(r), rank = r32(r);
    if (t >= DPC_DTYPE_COUNT || rank > DPC_MAX_RANK || !STR_OK(v->name))
      return corrupt(d, name, "value type");
    v->dtype = (dpc_dtype)t;
    v->shape.rank = rank;
    for (uint32_t j = 0; j < rank; j++) v->shape.d[j] = (int64_t)r64(r);
    if (v->name != DPC_NONE && dpc_idmap_put(&g->names, v->name, i))
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  g->n_ids = rcount(r, 4);
  if (r->bad || !ALLOC(g->ids, g->cap_ids, g->n_ids)) return corrupt(d, name, "input lists");
  for (uint32_t i = 0; i < g->n_ids; i++) g->ids[i] = r32(r);
  g->n_attrs = rcount(r, 32);
  if (r->bad || !ALLOC(g->attrs, g->cap_attrs, g->n_attrs)) return corrupt(d, name, "attributes");
  for (uint32_t i = 0; i < g->n_attrs; i++) {
    dpc_attr *a = &g->attrs[i];
    uint32_t nm = r32(r), kind = r32(r), dt = r32(r), rank = r32(r);
    a->name = nm, a->n = r32(r), a->dims = r32(r);
    uint64_t payload = r64(r);
    if (kind >= DPC_ATTR_KIND_COUNT || dt >= DPC_DTYPE_COUNT || rank > DPC_MAX_RANK ||
        !STR_OK(nm) || nm == DPC_NONE)
      return corrupt(d, name, "attribute");
    a->kind = (uint8_t)kind, a->dtype = (uint8_t)dt, a->rank = (uint16_t)rank;
    memcpy(&a->u, &payload, sizeof payload);
  }
  g->n_ints = rcount(r, 8);
  if (r->bad || !ALLOC(g->ints, g->cap_ints, g->n_ints)) return corrupt(d, name, "integers");
  for (uint32_t i = 0; i < g->n_ints; i++) g->ints[i] = (int64_t)r64(r);
  g->n_reals = rcount(r, 8);
  if (r->bad || !ALLOC(g->reals, g->cap_reals, g->n_reals)) return corrupt(d, name, "numbers");
  for (uint32_t i = 0; i < g->n_reals; i++) {
    uint64_t bits = r64(r);
    memcpy(&g->reals[i], &bits, 8);
  }
  /* attribute payloads point into the pools: check them now */
  for (uint32_t i = 0; i < g->n_attrs; i++) {
    const dpc_attr *a = &g->attrs[i];
    switch ((dpc_attr_kind)a->kind) {
    case DPC_ATTR_STR:
      if (!STR_OK(a->u.s) || a->u.s == DPC_NONE) return corrupt(d, name, "string attribute");
      break;
    case DPC_ATTR_INTS:
    case DPC_ATTR_SHAPE:
      if ((uint64_t)a->u.off + a->n > g->n_ints) return corrupt(d, name, "integer list");
      break;
    case DPC_ATTR_FLOATS:
      if ((uint64_t)a->u.off + a->n > g->n_reals) return corrupt(d, name, "number list");
      break;
    case DPC_ATTR_TENSOR: {
      if ((uint64_t)a->dims + a->rank > g->n_ints || (uint64_t)a->u.off + a->n > g->n_reals)
        return corrupt(d, name, "tensor attribute");
      dpc_shape sh = {.rank = a->rank};
      memcpy(sh.d, g->ints + a->dims, a->rank * sizeof(int64_t));
      for (uint32_t k = 0; k < a->rank; k++)
        if (sh.d[k] < 0 || sh.d[k] > (INT64_C(1) << 32))
          return corrupt(d, name, "tensor attribute");
      if (dpc_shape_numel(&sh) != a->n) return corrupt(d, name, "tensor attribute size");
      break;
    }
    default: break;
    }
  }
  g->n_syms = rcount(r, 12);
  if (r->bad || !ALLOC(g->syms, g->cap_syms, g->n_syms) ||
      !ALLOC(g->sym_vals, g->cap_sym_vals, g->n_syms))
    return corrupt(d, name, "symbols");
  for (uint32_t i = 0; i < g->n_syms; i++) {
    g->syms[i] = r32(r), g->sym_vals[i] = (int64_t)r64(r);
    if (!STR_OK(g->syms[i]) || g->syms[i] == DPC_NONE) return corrupt(d, name, "symbol");
  }
  g->n_outputs = rcount(r, 4);
  if (r->bad || !ALLOC(g->outputs, g->cap_outputs, g->n_outputs))
    return corrupt(d, name, "outputs");
  for (uint32_t i = 0; i < g->n_outputs; i++) g->outputs[i] = r32(r);
  g->n_updates = rcount(r, 16);
  if (r->bad || !ALLOC(g->updates, g->cap_updates, g->n_updates))
    return corrupt(d, name, "updates");
  for (uint32_t i = 0; i < g->n_updates; i++) {
    dpc_update *u = &g->updates[i];
    u->target = r32(r), u->value = r32(r), u->loc.line = r32(r), u->loc.col = r32(r);
  }
  dpc_objective *o = &g->obj;
  o->loss = r32(r), o->optimizer = r32(r), o->attr = r32(r), o->n_attr = r32(r),
  o->loc.line = r32(r), o->loc.col = r32(r);
  if (r->bad) return corrupt(d, name, "truncated graph");
  if (!STR_OK(o->optimizer) || (o->loss != DPC_NONE && o->optimizer == DPC_NONE) ||
      (uint64_t)o->attr + o->n_attr > g->n_attrs)
    return corrupt(d, name, "objective");
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] >= g->n_values) return corrupt(d, name, "output");
#undef STR_OK
  /* everything the verifier does not check is checked: it does the rest, types included */
  dpc_status st = dpc_verify(g, d);
  if (st) dpc_diag_prefix(d, "%s: not a valid compiled plan: ", name);
  return st;
}

dpc_status dpc_plan_read(const unsigned char *buf, size_t len, size_t *pos, const char *name,
                         dpc_plan **out, dpc_plan_kernel **kernels, dpc_diag *d) {
  *out = NULL;
  if (kernels) *kernels = NULL;
  rd r = {buf, len, *pos, false};
  if (len - r.pos < 8 || memcmp(buf + r.pos, MAGIC, 4)) return corrupt(d, name, "no plan header");
  r.pos += 4;
  uint32_t version = r32(&r);
  if (version != VERSION)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s: compiled plan format %u, this runtime reads %u (recompile it)", name,
                         version, VERSION);
  dpc_plan *p = calloc(1, sizeof *p);
  dpc_plan_kernel *k = NULL;
  if (!p || !(p->g = dpc_graph_new())) {
    free(p);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  dpc_status st = read_graph(&r, name, p->g, d);
  const dpc_graph *g = p->g;
  if (!st) {
    p->training = r32(&r) != 0;
    p->n_devs = rcount(&r, 16);
    if (r.bad || p->n_devs == 0 || !(p->devs = calloc(p->n_devs, sizeof *p->devs)))
      st = corrupt(d, name, "devices");
  }
  for (uint32_t i = 0; !st && i < p->n_devs; i++) {
    dpc_plan_device *dv = &p->devs[i];
    uint32_t nl = rcount(&r, 1);
    if (r.bad || !(dv->name = malloc(nl + 1))) {
      st = corrupt(d, name, "device");
      break;
    }
    memcpy(dv->name, buf + r.pos, nl);
    dv->name[nl] = 0;
    r.pos += nl;
    dv->bytes = r64(&r);
    dv->n_steps = rcount(&r, 24);
    if (r.bad || !ALLOC(dv->steps, dv->cap_steps, dv->n_steps)) {
      st = corrupt(d, name, "steps");
      break;
    }
    for (uint32_t j = 0; j < dv->n_steps; j++) {
      dpc_step *s = &dv->steps[j];
      uint32_t kind = r32(&r);
      s->node = r32(&r), s->src = r32(&r), s->dst = r32(&r), s->peer = r32(&r), s->event = r32(&r);
      s->kind = (dpc_step_kind)kind;
      bool ok = kind <= DPC_STEP_WAIT;
      if (kind == DPC_STEP_KERNEL)
        ok = s->node < g->n_nodes && !dpc_op_has(g->nodes[s->node].op, DPC_OPF_SOURCE);
      if (kind == DPC_STEP_COPY)
        ok = s->src < g->n_values && s->dst < g->n_values &&
             g->values[s->src].dtype == g->values[s->dst].dtype &&
             dpc_shape_eq(&g->values[s->src].shape, &g->values[s->dst].shape);
      if (!ok) {
        st = corrupt(d, name, "step");
        break;
      }
    }
  }
  if (!st && !(p->slots = calloc(g->n_values ? g->n_values : 1, sizeof *p->slots)))
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; !st && i < g->n_values; i++) {
    dpc_slot *sl = &p->slots[i];
    sl->device = r32(&r), sl->offset = r64(&r), sl->bytes = r64(&r);
    const dpc_value *v = &g->values[i];
    /* slots must hold their value and lie inside their device's buffer */
    uint64_t need = dpc_shape_is_concrete(&v->shape)
                        ? (uint64_t)dpc_shape_numel(&v->shape) * dpc_dtype_size(v->dtype)
                        : UINT64_MAX;
    if (r.bad || sl->device >= p->n_devs || sl->bytes != need ||
        sl->offset > p->devs[sl->device].bytes ||
        sl->bytes > p->devs[sl->device].bytes - sl->offset)
      st = corrupt(d, name, "value slot");
  }
  if (!st) p->n_events = r32(&r);
  if (!st && !(k = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *k)))
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; !st && i < g->n_nodes; i++) {
    uint32_t nl = rcount(&r, 1);
    if (r.bad || nl >= sizeof k[i].symbol) {
      st = corrupt(d, name, "kernel symbol");
      break;
    }
    memcpy(k[i].symbol, buf + r.pos, nl);
    r.pos += nl;
    k[i].total = (int64_t)r64(&r);
    if (k[i].total < 0) st = corrupt(d, name, "kernel trip count");
  }
  if (!st && r.bad) st = corrupt(d, name, "truncated");
  if (st) {
    free(k);
    dpc_plan_free(p);
    return st;
  }
  *pos = r.pos;
  *out = p;
  if (kernels)
    *kernels = k;
  else
    free(k);
  return DPC_OK;
}

/* ---- artifacts ------------------------------------------------------------------------------- */

void dpc_artifact_blob_begin(dpc_buf *b, uint32_t version, const char *target, uint32_t n_plans) {
  dpc_buf_putn(b, "DPCA", 4);
  w32(b, version);
  wbytes(b, target, (uint32_t)strlen(target));
  w32(b, n_plans);
}

void dpc_artifact_blob_role(dpc_buf *b, const char *role) {
  wbytes(b, role, (uint32_t)strlen(role));
}

/* ---- GPU code -------------------------------------------------------------------------------- */

#define CODES_MAGIC "DPCG"

static dpc_status codes_corrupt(dpc_diag *d, const char *name, const char *what) {
  return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: not valid GPU code (%s)", name, what);
}

dpc_status dpc_cuda_codes_write(const dpc_cuda_code *const *codes, uint32_t n, dpc_buf *b,
                                dpc_diag *d) {
  dpc_buf_putn(b, CODES_MAGIC, 4);
  w32(b, n);
  for (uint32_t i = 0; i < n; i++) {
    const dpc_cuda_code *c = codes[i];
    w32(b, c->n_cubin);
    for (uint32_t a = 0; a < c->n_cubin; a++) {
      if (c->cubin[a].size > UINT32_MAX)
        return dpc_diag_fail(d, DPC_ERR_INVALID, "a CUBIN of %llu bytes is too large to write",
                             (unsigned long long)c->cubin[a].size);
      w32(b, c->cubin[a].sm);
      wbytes(b, c->cubin[a].data, (uint32_t)c->cubin[a].size);
    }
    wbytes(b, c->ptx, c->ptx ? (uint32_t)strlen(c->ptx) + 1 : 0);
    uint32_t other = UINT32_MAX;
    for (uint32_t k = 0; c->other && k < n; k++)
      if (codes[k] == c->other) other = k;
    if (c->other && other == UINT32_MAX)
      return dpc_diag_fail(d, DPC_ERR_INTERNAL, "a kernel's other-mode code is not in the table");
    w32(b, c->training), w32(b, other), w32(b, c->n_launch), w32(b, c->n_args);
    for (uint32_t l = 0; l < c->n_launch; l++) {
      dpc_buf_putn(b, c->launch[l].name, sizeof c->launch[l].name);
      for (int k = 0; k < 3; k++) w32(b, c->launch[l].grid[k]);
      for (int k = 0; k < 3; k++) w32(b, c->launch[l].block[k]);
    }
    const dpc_cuda_gemm *g = &c->gemm;
    w32(b, g->on), w32(b, g->ta), w32(b, g->tb), w32(b, (uint32_t)g->precision);
    w32(b, (uint32_t)g->m), w32(b, (uint32_t)g->n), w32(b, (uint32_t)g->k),
        w32(b, (uint32_t)g->batch);
    w64(b, (uint64_t)g->stride_a), w64(b, (uint64_t)g->stride_b);
    w32(b, (uint32_t)g->epilogue), w32(b, g->bias_arg), w32(b, c->after_gemm);
  }
  return b->oom ? dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory writing GPU code") : DPC_OK;
}

void dpc_cuda_codes_free(dpc_cuda_codes *c) {
  if (!c) return;
  for (uint32_t i = 0; c->code && i < c->n; i++) {
    for (uint32_t a = 0; a < c->code[i].n_cubin; a++) free((void *)c->code[i].cubin[a].data);
    free((void *)c->code[i].ptx);
  }
  free(c->code);
  c->code = NULL;
  c->n = 0;
}

/* A length-prefixed image into memory of its own; NULL when it does not fit the buffer. */
static void *read_image(rd *r, uint32_t *size) {
  uint32_t n = rcount(r, 1);
  void *p = r->bad || n == 0 ? NULL : malloc(n);
  if (!p) return r->bad = true, NULL;
  memcpy(p, r->b + r->pos, n);
  r->pos += n;
  *size = n;
  return p;
}

static dpc_status read_code(rd *r, const char *name, dpc_cuda_code *c, uint32_t n_codes,
                            uint32_t *other, dpc_diag *d) {
  uint32_t n_cubin = r32(r);
  if (r->bad || n_cubin > DPC_CUDA_CODE_ARCHS) return codes_corrupt(d, name, "architectures");
  for (uint32_t a = 0; a < n_cubin; a++) {
    c->n_cubin = a + 1; /* the images read so far are freed on failure */
    uint32_t size = 0;
    c->cubin[a].sm = r32(r);
    c->cubin[a].data = read_image(r, &size);
    c->cubin[a].size = size;
    if (!c->cubin[a].data || c->cubin[a].sm < 50 || c->cubin[a].sm > 199)
      return codes_corrupt(d, name, "CUBIN");
  }
  uint32_t ptx_size = 0;
  char *ptx = read_image(r, &ptx_size);
  c->ptx = ptx;
  if (!ptx || ptx[ptx_size - 1] != 0 || strlen(ptx) + 1 != ptx_size)
    return codes_corrupt(d, name, "PTX");
  c->training = r32(r) != 0;
  *other = r32(r);
  c->n_launch = r32(r), c->n_args = r32(r);
  if (r->bad || (*other != UINT32_MAX && *other >= n_codes) || c->n_launch == 0 ||
      c->n_launch > DPC_CUDA_CODE_LAUNCHES || c->n_args == 0 || c->n_args > 4096)
    return codes_corrupt(d, name, "launches");
  for (uint32_t l = 0; l < c->n_launch; l++) {
    if (r->len - r->pos < sizeof c->launch[l].name) return codes_corrupt(d, name, "truncated");
    memcpy(c->launch[l].name, r->b + r->pos, sizeof c->launch[l].name);
    r->pos += sizeof c->launch[l].name;
    uint64_t threads = 1;
    for (int k = 0; k < 3; k++) c->launch[l].grid[k] = r32(r);
    for (int k = 0; k < 3; k++) threads *= (c->launch[l].block[k] = r32(r));
    bool named = memchr(c->launch[l].name, 0, sizeof c->launch[l].name) && c->launch[l].name[0];
    if (r->bad || !named || !c->launch[l].grid[0] || !c->launch[l].grid[1] ||
        !c->launch[l].grid[2] || threads == 0 || threads > 1024)
      return codes_corrupt(d, name, "launch");
  }
  dpc_cuda_gemm *g = &c->gemm;
  uint32_t on = r32(r), ta = r32(r), tb = r32(r), prec = r32(r);
  g->on = on != 0, g->ta = ta != 0, g->tb = tb != 0, g->precision = (dpc_gemm_precision)prec;
  g->m = (int32_t)r32(r), g->n = (int32_t)r32(r), g->k = (int32_t)r32(r),
  g->batch = (int32_t)r32(r);
  g->stride_a = (int64_t)r64(r), g->stride_b = (int64_t)r64(r);
  uint32_t epi = r32(r);
  g->epilogue = (dpc_gemm_epilogue)epi, g->bias_arg = r32(r), c->after_gemm = r32(r);
  if (r->bad || prec > DPC_GEMM_BF16 ||
      (g->on &&
       (g->m < 1 || g->n < 1 || g->k < 1 || g->batch < 1 || g->stride_a < 0 || g->stride_b < 0)) ||
      epi > DPC_GEMM_BIAS_RELU || (epi && (!g->on || g->bias_arg + 1 >= c->n_args)) ||
      c->after_gemm > c->n_launch)
    return codes_corrupt(d, name, "GEMM");
  return DPC_OK;
}

dpc_status dpc_cuda_codes_read(const unsigned char *buf, size_t len, size_t *pos, const char *name,
                               dpc_cuda_codes *out, dpc_diag *d) {
  memset(out, 0, sizeof *out);
  rd r = {buf, len, *pos, false};
  if (len - r.pos < 8 || memcmp(buf + r.pos, CODES_MAGIC, 4))
    return codes_corrupt(d, name, "no GPU code header");
  r.pos += 4;
  uint32_t n = rcount(&r, 64);
  if (r.bad) return codes_corrupt(d, name, "count");
  out->code = calloc(n ? n : 1, sizeof *out->code);
  uint32_t *other = calloc(n ? n : 1, sizeof *other);
  dpc_status st = out->code && other ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; !st && i < n; i++) {
    out->n = i + 1; /* what is read so far is freed on failure */
    st = read_code(&r, name, &out->code[i], n, &other[i], d);
  }
  /* each other-mode code names the one that names it, and is of the other mode */
  for (uint32_t i = 0; !st && i < n; i++) {
    if (other[i] == UINT32_MAX) continue;
    const dpc_cuda_code *o = &out->code[other[i]];
    if (other[i] == i || other[other[i]] != i || o->training == out->code[i].training ||
        o->n_args != out->code[i].n_args)
      st = codes_corrupt(d, name, "other-mode code");
    else
      out->code[i].other = o;
  }
  free(other);
  if (st) {
    dpc_cuda_codes_free(out);
    return st;
  }
  *pos = r.pos;
  return DPC_OK;
}
