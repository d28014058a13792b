/*
 * onnx.c — the ONNX importer: model, inputs, initializers, the node walk, outputs, and the
 * helpers the op importers (onnx_ops.c) and the folder (onnx_fold.c) are written with.
 *
 * Every error names the node (its number, op type and name) and, for files, the file. Ops
 * dpc does not support are collected over the whole model before anything is built, so a user
 * sees them all at once rather than one per attempt.
 */
#include "frontend/frontend.h"
#include "frontend/onnx_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The newest opset whose ops dpc knows the meaning of; newer models may have changed them. */
#define ONNX_MAX_OPSET 17

void onnx_const_free(onnx_const *k) {
  if (!k) return;
  free(k->t.data);
  free(k->sym);
  k->t.data = NULL;
  k->sym = NULL;
}

/* ---- errors ------------------------------------------------------------------------------- */

/* "[domain.]Op[ 'name']" for messages; the domain only when asked for (unknown ops). */
static void node_desc(const Onnx__NodeProto *nd, bool domain, char *buf, size_t n) {
  const char *dom = domain && nd->domain ? nd->domain : "";
  bool named = nd->name && *nd->name;
  snprintf(buf, n, "%s%s%s%s%s%s", dom, *dom ? "." : "", nd->op_type ? nd->op_type : "?",
           named ? " '" : "", named ? nd->name : "", named ? "'" : "");
}

static void node_label(const onnx_ctx *c, char *buf, size_t n) {
  if (!c->node) {
    snprintf(buf, n, "%s", c->file);
    return;
  }
  char desc[384];
  node_desc(c->node, false, desc, sizeof desc);
  snprintf(buf, n, "%s: node %u (%s)", c->file, c->node_no, desc);
}

dpc_status onnx_fail(onnx_ctx *c, dpc_status st, const char *fmt, ...) {
  char where[512];
  node_label(c, where, sizeof where);
  va_list ap;
  va_start(ap, fmt);
  dpc_diag_vfail(c->d, st, fmt, ap);
  va_end(ap);
  dpc_diag_prefix(c->d, "%s: ", where);
  return st;
}

/* ---- the name table --------------------------------------------------------------------- */

static onnx_entry *entry(onnx_ctx *c, const char *name, bool create) {
  uint32_t id = create ? dpc_graph_intern(c->g, name, strlen(name))
                       : dpc_strpool_find(&c->g->strs, name, strlen(name));
  if (id == DPC_NONE) return NULL;
  uint32_t e = dpc_idmap_get(&c->names, id);
  if (e != DPC_NONE) return &c->ents[e];
  if (!create) return NULL;
  if (DPC_VEC_RESERVE(c->ents, c->cap_ents, c->n_ents + 1) ||
      dpc_idmap_put(&c->names, id, c->n_ents))
    return NULL;
  c->ents[c->n_ents] = (onnx_entry){DPC_NONE, -1, -1};
  return &c->ents[c->n_ents++];
}

static int32_t add_const(onnx_ctx *c, onnx_const *k) {
  if (DPC_VEC_RESERVE(c->ks, c->cap_ks, c->n_ks + 1)) {
    onnx_const_free(k);
    return -1;
  }
  c->ks[c->n_ks] = *k;
  return (int32_t)c->n_ks++;
}

/* Name `v` after the ONNX name when it has none yet and the name is free, so `dpc print` and
 * messages show the model's own names. */
static void name_value(onnx_ctx *c, uint32_t v, const char *name) {
  if (!*name || c->g->values[v].name != DPC_NONE || dpc_graph_find(c->g, name) != DPC_NONE) return;
  dpc_diag tmp;
  dpc_diag_init(&tmp);
  (void)dpc_graph_set_name(c->g, v, name, strlen(name), &tmp);
  dpc_diag_free(&tmp);
}

/* ---- helpers for the op importers --------------------------------------------------------- */

bool onnx_has_in(onnx_ctx *c, uint32_t i) {
  return i < c->node->n_input && c->node->input[i] && *c->node->input[i];
}

static onnx_entry *in_entry(onnx_ctx *c, uint32_t i) {
  if (!onnx_has_in(c, i)) return NULL;
  onnx_entry *e = entry(c, c->node->input[i], false);
  if (!e || (e->value == DPC_NONE && e->k < 0)) {
    onnx_fail(c, DPC_ERR_INVALID,
              "input '%s' is not defined before this node (a missing "
              "initializer, a misspelt name, or a cycle)",
              c->node->input[i]);
    return NULL;
  }
  return e;
}

const onnx_const *onnx_in_const(onnx_ctx *c, uint32_t i) {
  if (!onnx_has_in(c, i)) return NULL;
  onnx_entry *e = entry(c, c->node->input[i], false);
  if (!e || e->k < 0 || c->ks[e->k].param) return NULL;
  return &c->ks[e->k];
}

bool onnx_in_flipped(onnx_ctx *c, uint32_t i) {
  if (!onnx_has_in(c, i)) return false;
  onnx_entry *e = entry(c, c->node->input[i], false);
  return e && e->k >= 0 && c->ks[e->k].flipped;
}

const onnx_const *onnx_in_known(onnx_ctx *c, uint32_t i) {
  const onnx_const *k = onnx_in_const(c, i);
  if (k || !onnx_has_in(c, i) || !c->opts) return k;
  onnx_entry *e = entry(c, c->node->input[i], false);
  if (!e || e->pos < 0 || (uint32_t)e->pos >= c->opts->n_known) return NULL;
  const dpc_tensor *t = &c->opts->known[e->pos];
  if (!t->data) return NULL;
  onnx_const kc = {.t = *t};
  size_t bytes = dpc_tensor_bytes(t);
  if (!(kc.t.data = malloc(bytes ? bytes : 1))) return NULL;
  memcpy(kc.t.data, t->data, bytes);
  if ((e->k = add_const(c, &kc)) < 0) return NULL;
  return &c->ks[e->k];
}

/* A constant as a node: params (float initializers) carry their values as init=data; others
 * become `constant`. */
static uint32_t materialise(onnx_ctx *c, onnx_const *k, const char *name) {
  dpc_graph *g = c->g;
  int64_t n = dpc_tensor_numel(&k->t);
  if (k->sym)
    for (int64_t j = 0; j < n; j++)
      if (k->sym[j])
        return onnx_fail(c, DPC_ERR_UNSUPPORTED,
                         "'%s' holds a symbolic dimension and is used "
                         "as data; dpc folds shapes only into Reshape, Expand, Slice and the like",
                         name),
               DPC_NONE;
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  if (!v) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory"), DPC_NONE;
  for (int64_t j = 0; j < n; j++) v[j] = dpc_tload(&k->t, j);
  uint32_t out;
  if (!k->param) {
    out = onnx_constant(c, k->t.dtype, &k->t.shape, v);
  } else {
    uint32_t mark = dpc_graph_attr_mark(g);
    dpc_status st = dpc_graph_attr_dtype(g, "dtype", k->t.dtype);
    if (!st) st = dpc_graph_attr_shape(g, "shape", k->t.shape.d, k->t.shape.rank);
    if (!st) st = dpc_graph_attr_str(g, "init", "data");
    if (!st) st = dpc_graph_attr_tensor(g, "data", k->t.dtype, &k->t.shape, v);
    if (st) {
      onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
      out = DPC_NONE;
    } else if (onnx_emit(c, k->state ? DPC_OP_STATE : DPC_OP_PARAM, NULL, 0, mark, 0, &out)) {
      out = DPC_NONE;
    }
  }
  free(v);
  if (out != DPC_NONE) name_value(c, out, name);
  return out;
}

/* The value an entry stands for, materialising its constant the first time. Entries live in
 * c->ents, which only entry(..., true) grows: materialise adds nodes, not entries. */
static uint32_t entry_value(onnx_ctx *c, onnx_entry *e, const char *name) {
  if (e->value == DPC_NONE) e->value = materialise(c, &c->ks[e->k], name);
  return e->value;
}

uint32_t onnx_in(onnx_ctx *c, uint32_t i) {
  onnx_entry *e = in_entry(c, i);
  if (!e) {
    if (!onnx_has_in(c, i)) onnx_fail(c, DPC_ERR_INVALID, "input %u is missing", i + 1);
    return DPC_NONE;
  }
  return entry_value(c, e, c->node->input[i]);
}

dpc_status onnx_in_type(onnx_ctx *c, uint32_t i, dpc_dtype *t, dpc_shape *s) {
  onnx_entry *e = in_entry(c, i);
  if (!e)
    return c->d->status ? c->d->status
                        : onnx_fail(c, DPC_ERR_INVALID, "input %u is missing", i + 1);
  if (e->value != DPC_NONE) {
    *t = c->g->values[e->value].dtype;
    *s = c->g->values[e->value].shape;
  } else {
    *t = c->ks[e->k].t.dtype;
    *s = c->ks[e->k].t.shape;
  }
  return DPC_OK;
}

dpc_status onnx_emit(onnx_ctx *c, dpc_op op, const uint32_t *in, uint32_t n_in, uint32_t mark,
                     uint32_t n_out, uint32_t *out) {
  for (uint32_t i = 0; i < n_in; i++)
    if (in[i] == DPC_NONE) {
      dpc_graph_attr_reset(c->g, mark);
      return c->d->status ? c->d->status : onnx_fail(c, DPC_ERR_INTERNAL, "an input was lost");
    }
  dpc_node_desc nd = {
      .op = op, .in = in, .n_in = n_in, .attr_mark = mark, .n_out = n_out, .device = DPC_NONE};
  uint32_t node;
  dpc_diag tmp;
  dpc_diag_init(&tmp);
  dpc_status st = dpc_graph_add_node(c->g, &nd, &node, &tmp);
  if (st) {
    char *msg = dpc_diag_render(&tmp);
    const char *m = msg ? msg : "cannot add a node";
    if (!strncmp(m, "error: ", 7)) m += 7;
    onnx_fail(c, st, "%.*s", (int)strcspn(m, "\n"), m);
    free(msg);
    dpc_diag_free(&tmp);
    return st;
  }
  dpc_diag_free(&tmp);
  if (out) *out = c->g->nodes[node].out;
  return DPC_OK;
}

uint32_t onnx_n_out(onnx_ctx *c) {
  /* Trailing optional outputs may be left out or named "". */
  uint32_t n = (uint32_t)c->node->n_output;
  while (n > 0 && !*c->node->output[n - 1]) n--;
  return n;
}

static bool out_wanted(onnx_ctx *c, uint32_t k) {
  return k < c->node->n_output && *c->node->output[k];
}

static dpc_status check_new(onnx_ctx *c, uint32_t k, onnx_entry **e) {
  const char *name = c->node->output[k];
  onnx_entry *x = entry(c, name, false);
  if (x && (x->value != DPC_NONE || x->k >= 0))
    return onnx_fail(c, DPC_ERR_INVALID, "output '%s' is defined twice", name);
  if (!(*e = entry(c, name, true))) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  return DPC_OK;
}

dpc_status onnx_def(onnx_ctx *c, uint32_t k, uint32_t value) {
  if (value == DPC_NONE)
    return c->d->status ? c->d->status : onnx_fail(c, DPC_ERR_INTERNAL, "output lost");
  if (!out_wanted(c, k)) return DPC_OK;
  onnx_entry *e;
  dpc_status st = check_new(c, k, &e);
  if (st) return st;
  e->value = value;
  name_value(c, value, c->node->output[k]);
  return DPC_OK;
}

dpc_status onnx_def_const(onnx_ctx *c, uint32_t k, onnx_const *kc) {
  if (!out_wanted(c, k)) {
    onnx_const_free(kc);
    return DPC_OK;
  }
  onnx_entry *e;
  dpc_status st = check_new(c, k, &e);
  if (st) {
    onnx_const_free(kc);
    return st;
  }
  if ((e->k = add_const(c, kc)) < 0) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  return DPC_OK;
}

const Onnx__AttributeProto *onnx_attr(onnx_ctx *c, const char *name) {
  for (size_t i = 0; i < c->node->n_attribute; i++)
    if (c->node->attribute[i]->name && !strcmp(c->node->attribute[i]->name, name))
      return c->node->attribute[i];
  return NULL;
}

/* An attribute given with a value of another kind is an error (recorded in the diag, which
 * import_nodes checks after each node), and the default stands in for it meanwhile. */
static bool wrong_kind(onnx_ctx *c, const Onnx__AttributeProto *a, bool ok, const char *kind) {
  if (ok) return false;
  if (!c->d->status)
    onnx_fail(c, DPC_ERR_INVALID, "attribute '%s' must be %s", a->name ? a->name : "?", kind);
  return true;
}

int64_t onnx_attr_i(onnx_ctx *c, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  if (!a || wrong_kind(c, a, a->has_i, "an integer")) return def;
  return a->i;
}

double onnx_attr_f(onnx_ctx *c, const char *name, double def) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  if (!a || wrong_kind(c, a, a->has_f || a->has_i, "a number")) return def;
  return a->has_f ? a->f : (double)a->i;
}

int onnx_attr_ints(onnx_ctx *c, const char *name, int64_t *out, int max) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  if (!a) return -1;
  if (wrong_kind(c, a,
                 a->n_ints > 0 ||
                     (a->has_type && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS),
                 "a list of integers"))
    return -1;
  for (size_t i = 0; i < a->n_ints && (int)i < max; i++) out[i] = a->ints[i];
  return (int)a->n_ints;
}

void onnx_attr_s(onnx_ctx *c, const char *name, const char *def, char *buf, size_t n) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  if (!a || !a->has_s) {
    snprintf(buf, n, "%s", def);
    return;
  }
  size_t len = a->s.len < n - 1 ? a->s.len : n - 1;
  if (len) memcpy(buf, a->s.data, len);
  buf[len] = 0;
}

int onnx_const_ints(onnx_ctx *c, uint32_t i, int64_t *out, int max, bool *sym) {
  const onnx_const *k = onnx_in_known(c, i);
  if (!k) {
    onnx_fail(c, DPC_ERR_UNSUPPORTED,
              "input %u ('%s') must be a constant for dpc to import this "
              "node; it is computed at run time",
              i + 1, onnx_has_in(c, i) ? c->node->input[i] : "");
    return -1;
  }
  if (!dpc_dtype_is_int(k->t.dtype)) {
    onnx_fail(c, DPC_ERR_INVALID, "input %u must hold integers, not %s", i + 1,
              dpc_dtype_name(k->t.dtype));
    return -1;
  }
  int64_t n = dpc_tensor_numel(&k->t);
  if (n > max) {
    onnx_fail(c, DPC_ERR_UNSUPPORTED, "input %u has %lld values, more than the %d dpc takes", i + 1,
              (long long)n, max);
    return -1;
  }
  for (int64_t j = 0; j < n; j++) {
    out[j] = dpc_tload_i64(&k->t, j);
    if (sym)
      sym[j] = k->sym && k->sym[j];
    else if (k->sym && k->sym[j]) {
      onnx_fail(c, DPC_ERR_UNSUPPORTED, "input %u depends on a symbolic dimension here", i + 1);
      return -1;
    }
  }
  return (int)n;
}

int onnx_slice_args(onnx_ctx *c, int64_t *st, int64_t *en, int64_t *ax, int64_t *sp) {
  const int max = DPC_MAX_RANK + 1;
  int n, ne, na = -1, ns = -1;
  if (c->opset < 10) {
    n = onnx_attr_ints(c, "starts", st, max);
    ne = onnx_attr_ints(c, "ends", en, max);
    na = onnx_attr_ints(c, "axes", ax, max);
  } else {
    if ((n = onnx_const_ints(c, 1, st, max, NULL)) < 0 ||
        (ne = onnx_const_ints(c, 2, en, max, NULL)) < 0 ||
        (onnx_has_in(c, 3) && (na = onnx_const_ints(c, 3, ax, max, NULL)) < 0) ||
        (onnx_has_in(c, 4) && (ns = onnx_const_ints(c, 4, sp, max, NULL)) < 0))
      return -1;
  }
  if (c->d->status) return -1;
  if (n < 0 || n != ne || (na >= 0 && na != n) || (ns >= 0 && ns != n) || n > DPC_MAX_RANK) {
    onnx_fail(c, DPC_ERR_INVALID, "starts, ends, axes and steps must match in length");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    if (na < 0) ax[i] = i;
    if (ns < 0) sp[i] = 1;
  }
  return n;
}

bool onnx_squeeze_shape(const dpc_shape *in, const int64_t *axes, int n, bool unsqueeze,
                        dpc_shape *out, int *bad) {
  bool at[DPC_MAX_RANK + 1] = {0};
  uint32_t r = unsqueeze ? in->rank + (uint32_t)(n > 0 ? n : 0) : in->rank;
  if (r > DPC_MAX_RANK) return *bad = -1, false;
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    /* Squeeze takes axes of size 1 (or symbolic: the data decides); Unsqueeze new ones */
    if (a < 0 || a >= (int64_t)r || (unsqueeze && at[a]) ||
        (!unsqueeze && in->d[a] != 1 && !DPC_DIM_IS_SYM(in->d[a])))
      return *bad = i, false;
    at[a] = true;
  }
  out->rank = 0;
  for (uint32_t i = 0, j = 0; i < r; i++) {
    if (unsqueeze)
      out->d[out->rank++] = at[i] ? 1 : in->d[j++];
    else if (!(n < 0 ? in->d[i] == 1 : at[i]))
      out->d[out->rank++] = in->d[i];
  }
  return true;
}

/* ---- the model ---------------------------------------------------------------------------- */

/* Every node whose op dpc does not import, in one message. */
static dpc_status check_ops(onnx_ctx *c, const Onnx__GraphProto *gp) {
  dpc_buf b = {0};
  uint32_t bad = 0;
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *nd = gp->node[i];
    const char *dom = nd->domain ? nd->domain : "";
    const char *op = nd->op_type ? nd->op_type : "";
    bool known = (!*dom || !strcmp(dom, "ai.onnx")) && onnx_find_op(op);
    if (known) continue;
    if (bad++ < 20) {
      char desc[384];
      node_desc(nd, true, desc, sizeof desc);
      dpc_buf_printf(&b, "\n  node %zu: %s", i, desc);
    }
  }
  if (!bad) return DPC_OK;
  if (bad > 20) dpc_buf_printf(&b, "\n  ... and %u more", bad - 20);
  dpc_diag_fail(c->d, b.oom ? DPC_ERR_NOMEM : DPC_ERR_UNSUPPORTED,
                "%s: %u node%s use%s an op dpc does not import:%s", c->file, bad,
                bad == 1 ? "" : "s", bad == 1 ? "s" : "", b.data ? b.data : "");
  dpc_buf_free(&b);
  return c->d->status;
}

/* How many inputs of the graph's nodes (and its outputs) name `name`. */
static size_t uses_of(const Onnx__GraphProto *gp, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < gp->n_node; i++)
    for (size_t j = 0; j < gp->node[i]->n_input; j++)
      n += gp->node[i]->input[j] && !strcmp(gp->node[i]->input[j], name);
  for (size_t i = 0; i < gp->n_output; i++)
    n += gp->output[i]->name && !strcmp(gp->output[i]->name, name);
  for (size_t i = 0; i < gp->n_input; i++) /* an input that may override it: leave it be */
    n += gp->input[i]->name && !strcmp(gp->input[i]->name, name) ? 2 : 0;
  return n;
}

/* A Gemm's weight given transposed (transB=1: PyTorch's Linear stores [out, in]) and used
 * nowhere else is held as its transpose, [in, out], under the same name: the Gemm then becomes
 * a plain matmul whose weight the GEMM reads in place (at a few rows it streams the weights
 * once instead of transposing all of them on every call; MobileNetV2's classifier spent 8% of
 * the network there). A checkpoint of the model holds the weight that way. */
static void flip_gemm_weights(onnx_ctx *c, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *nd = gp->node[i];
    if (!nd->op_type || strcmp(nd->op_type, "Gemm") || nd->n_input < 2 || !nd->input[1]) continue;
    bool tb = false;
    for (size_t a = 0; a < nd->n_attribute; a++)
      if (nd->attribute[a]->name && !strcmp(nd->attribute[a]->name, "transB"))
        tb = nd->attribute[a]->i != 0;
    onnx_entry *e = entry(c, nd->input[1], false);
    if (!tb || !e || e->k < 0 || uses_of(gp, nd->input[1]) != 1) continue;
    onnx_const *k = &c->ks[e->k];
    if (!k->param || k->state || k->t.shape.rank != 2) continue;
    int64_t r = k->t.shape.d[0], q = k->t.shape.d[1];
    size_t es = dpc_dtype_size(k->t.dtype);
    unsigned char *src = k->t.data, *dst = malloc((size_t)(r * q) * es + 1);
    if (!dst) continue; /* left as it is: the Gemm transposes it */
    for (int64_t y = 0; y < r; y++)
      for (int64_t x = 0; x < q; x++)
        memcpy(dst + (size_t)(x * r + y) * es, src + (size_t)(y * q + x) * es, es);
    free(k->t.data);
    k->t.data = dst;
    k->t.shape.d[0] = q;
    k->t.shape.d[1] = r;
    k->flipped = true;
  }
}

static dpc_status add_initializers(onnx_ctx *c, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *tp = gp->initializer[i];
    if (!tp->name || !*tp->name)
      return onnx_fail(c, DPC_ERR_INVALID, "initializer %zu has no name", i);
    onnx_const k = {0};
    dpc_status st = dpc_onnx_tensor_from(tp, tp->name, &k.t, c->d);
    if (st) {
      dpc_diag_prefix(c->d, "%s: initializer '%s': ", c->file, tp->name);
      return st;
    }
    k.param = dpc_dtype_is_float(k.t.dtype);
    onnx_entry *e = entry(c, tp->name, true);
    if (!e) {
      onnx_const_free(&k);
      return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
    }
    if (e->k >= 0) {
      onnx_const_free(&k);
      return onnx_fail(c, DPC_ERR_INVALID, "initializer '%s' is given twice", tp->name);
    }
    if ((e->k = add_const(c, &k)) < 0) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  }
  /* BatchNormalization's running statistics are state: training updates them, the optimizer
   * does not. */
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *nd = gp->node[i];
    if (!nd->op_type || strcmp(nd->op_type, "BatchNormalization")) continue;
    for (size_t j = 3; j < 5 && j < nd->n_input; j++) {
      onnx_entry *e = entry(c, nd->input[j], false);
      if (e && e->k >= 0) c->ks[e->k].state = true;
    }
  }
  flip_gemm_weights(c, gp);
  return DPC_OK;
}

/* dpc_onnx_opts.leading_batch: the first input's fixed leading dimension is the batch the
 * model was exported at; later inputs whose leading dimension has that size share it. */
static dpc_status leading_batch(onnx_ctx *c, uint32_t pos, int64_t *dims) {
  if (!c->opts || !c->opts->leading_batch || DPC_DIM_IS_SYM(dims[0])) return DPC_OK;
  if (pos == 0 && dims[0] > 0) {
    uint32_t s = dpc_graph_symbol(c->g, "batch", 5);
    if (s == DPC_NONE) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
    c->batch = dims[0];
    c->batch_dim = DPC_DIM_SYM(s);
  }
  if (c->batch && dims[0] == c->batch) dims[0] = c->batch_dim;
  return DPC_OK;
}

static dpc_status add_inputs(onnx_ctx *c, const Onnx__GraphProto *gp) {
  uint32_t unknown = 0, pos = 0;
  dpc_status st;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const char *name = vi->name ? vi->name : "";
    if (!*name) return onnx_fail(c, DPC_ERR_INVALID, "graph input %zu has no name", i);
    /* Before IR version 4 every initializer is also listed as an input (a default the caller
     * may override); the data files then feed only the others. */
    const onnx_entry *known = entry(c, name, false);
    if (known && known->k >= 0) continue;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED,
                       "graph input '%s' is not a tensor (a sequence, map or optional); dpc "
                       "imports tensors only",
                       name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    dpc_dtype dt;
    if (!dpc_onnx_dtype(tt->elem_type, &dt))
      return onnx_fail(c, DPC_ERR_UNSUPPORTED,
                       "graph input '%s' has element type %s, which dpc "
                       "does not have",
                       name, dpc_onnx_dtype_name(tt->elem_type));
    if (!tt->shape)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "graph input '%s' has no shape (not even a rank)",
                       name);
    if (tt->shape->n_dim > DPC_MAX_RANK)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED,
                       "graph input '%s' has rank %zu, above dpc's limit "
                       "of %d",
                       name, tt->shape->n_dim, DPC_MAX_RANK);
    int64_t dims[DPC_MAX_RANK];
    for (size_t k = 0; k < tt->shape->n_dim; k++) {
      const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
      char sym[300];
      if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (dm->dim_value < 0 || dm->dim_value > (INT64_C(1) << 40))
          return onnx_fail(c, DPC_ERR_INVALID, "graph input '%s' has dimension %lld", name,
                           (long long)dm->dim_value);
        dims[k] = dm->dim_value;
        continue;
      }
      if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param &&
          *dm->dim_param)
        snprintf(sym, sizeof sym, "%s", dm->dim_param);
      else
        snprintf(sym, sizeof sym, "d%u", unknown++);
      uint32_t s = dpc_graph_symbol(c->g, sym, strlen(sym));
      if (s == DPC_NONE) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
      dims[k] = DPC_DIM_SYM(s);
    }
    if (tt->shape->n_dim && (st = leading_batch(c, pos, dims))) return st;
    uint32_t mark = dpc_graph_attr_mark(c->g), v;
    if (dpc_graph_attr_dtype(c->g, "dtype", dt) ||
        dpc_graph_attr_shape(c->g, "shape", dims, (uint32_t)tt->shape->n_dim))
      return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
    if ((st = onnx_emit(c, DPC_OP_INPUT, NULL, 0, mark, 0, &v))) return st;
    onnx_entry *e = entry(c, name, true);
    if (!e) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
    if (e->value != DPC_NONE || e->k >= 0)
      return onnx_fail(c, DPC_ERR_INVALID, "graph input '%s' is listed twice", name);
    e->value = v;
    e->pos = (int32_t)pos++;
    name_value(c, v, name);
  }
  return DPC_OK;
}

static dpc_status import_nodes(onnx_ctx *c, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_node; i++) {
    c->node = gp->node[i];
    c->node_no = (uint32_t)i;
    for (size_t j = 0; j < c->node->n_output; j++)
      if (!c->node->output[j]) return onnx_fail(c, DPC_ERR_INVALID, "output %zu has no name", j);
    for (size_t j = 0; j < c->node->n_input; j++)
      if (!c->node->input[j]) return onnx_fail(c, DPC_ERR_INVALID, "input %zu has no name", j);
    bool folded = false;
    dpc_status st = onnx_try_fold(c, &folded);
    if (!st && !folded) {
      const onnx_op_row *row = onnx_find_op(c->node->op_type);
      c->op = row->op;
      st = row->fn(c);
    }
    if (!st) st = c->d->status; /* an attribute of the wrong kind */
    if (st) return st;
    for (uint32_t k = 0; k < onnx_n_out(c); k++) {
      onnx_entry *e = *c->node->output[k] ? entry(c, c->node->output[k], false) : NULL;
      if (*c->node->output[k] && (!e || (e->value == DPC_NONE && e->k < 0)))
        return onnx_fail(c, DPC_ERR_UNSUPPORTED, "output %u ('%s') is not something dpc computes",
                         k + 1, c->node->output[k]);
    }
  }
  c->node = NULL;
  return DPC_OK;
}

static dpc_status add_outputs(onnx_ctx *c, const Onnx__GraphProto *gp) {
  if (!gp->n_output) return onnx_fail(c, DPC_ERR_INVALID, "the graph has no outputs");
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *name = gp->output[i]->name ? gp->output[i]->name : "";
    onnx_entry *e = entry(c, name, false);
    if (!e || (e->value == DPC_NONE && e->k < 0))
      return onnx_fail(c, DPC_ERR_INVALID, "graph output '%s' is never computed", name);
    uint32_t v = entry_value(c, e, name);
    if (v == DPC_NONE) return c->d->status;
    /* The same value twice (or an input as an output) still gets its own output slot. */
    for (uint32_t j = 0; j < c->g->n_outputs; j++)
      if (c->g->outputs[j] == v) {
        dpc_shape sh = c->g->values[v].shape;
        if ((v = onnx_reshape(c, v, sh.d, sh.rank)) == DPC_NONE) return c->d->status;
        break;
      }
    dpc_diag tmp;
    dpc_diag_init(&tmp);
    dpc_status st = dpc_graph_add_output(c->g, v, &tmp);
    dpc_diag_free(&tmp);
    if (st) return onnx_fail(c, st, "cannot make '%s' an output", name);
  }
  return DPC_OK;
}

dpc_status dpc_onnx_import(const char *name, const void *data, size_t len, dpc_graph **out,
                           dpc_diag *d) {
  return dpc_onnx_import_opts(name, data, len, NULL, out, d);
}

/* Import an unpacked model; *batch gets the fixed batch made symbolic (0: none). */
static dpc_status import_model(const char *name, const Onnx__ModelProto *m, const dpc_onnx_opts *o,
                               dpc_graph **out, int64_t *batch, dpc_diag *d) {
  onnx_ctx c = {.d = d, .file = name, .opset = -1, .opts = o};
  dpc_idmap_init(&c.names);
  dpc_status st = DPC_OK;
  const Onnx__GraphProto *gp = m->graph;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const char *dom = m->opset_import[i]->domain ? m->opset_import[i]->domain : "";
    if (!*dom || !strcmp(dom, "ai.onnx")) c.opset = m->opset_import[i]->version;
  }
  if (!gp) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: the model has no graph", name);
  } else if ((st = check_ops(&c, gp))) {
  } else if (c.opset < 1) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: the model imports no opset of the ONNX domain",
                       name);
  } else if (c.opset > ONNX_MAX_OPSET) {
    st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                       "%s: opset %lld is newer than dpc knows (%d); "
                       "convert the model to opset %d or lower",
                       name, (long long)c.opset, ONNX_MAX_OPSET, ONNX_MAX_OPSET);
  } else if (!(c.g = dpc_graph_new())) {
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  } else {
    if (gp->name && *gp->name) c.g->name = dpc_graph_intern(c.g, gp->name, strlen(gp->name));
    if (!(st = add_initializers(&c, gp)) && !(st = add_inputs(&c, gp)) &&
        !(st = import_nodes(&c, gp)))
      st = add_outputs(&c, gp);
  }
  for (uint32_t i = 0; i < c.n_ks; i++) onnx_const_free(&c.ks[i]);
  free(c.ks);
  free(c.ents);
  dpc_idmap_free(&c.names);
  *batch = c.batch;
  if (st) {
    dpc_graph_free(c.g);
    return st;
  }
  *out = c.g;
  return DPC_OK;
}

/* A fixed-batch model that failed with its batch made symbolic: when it imports as exported,
 * the symbolic batch is what the failing node cannot take, and the message says so; when it
 * does not, its own error is the one to report. */
static void explain_batch(const char *name, const Onnx__ModelProto *m, const dpc_onnx_opts *o,
                          int64_t batch, dpc_diag *d) {
  dpc_onnx_opts fixed = *o;
  fixed.leading_batch = false;
  dpc_diag plain;
  dpc_diag_init(&plain);
  dpc_graph *g = NULL;
  int64_t none;
  if (import_model(name, m, &fixed, &g, &none, &plain)) {
    dpc_diag_free(d);
    *d = plain;
    return;
  }
  dpc_graph_free(g);
  dpc_diag_free(&plain);
  dpc_buf b = {0};
  dpc_buf_printf(&b,
                 "%s; the model's inputs have the fixed leading dimension %lld, which dpc "
                 "takes as the batch and makes symbolic so that the batch size and the strategies "
                 "apply, and this node cannot take it symbolic: export the model with a "
                 "dynamic batch (torch.onnx.export(..., dynamic_axes=...))",
                 d->msg ? d->msg : "", (long long)batch);
  char *msg = dpc_buf_take(&b);
  if (msg) {
    free(d->msg);
    d->msg = msg;
  }
}

dpc_status dpc_onnx_import_opts(const char *name, const void *data, size_t len,
                                const dpc_onnx_opts *o, dpc_graph **out, dpc_diag *d) {
  *out = NULL;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
  if (!m)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: not an ONNX model (truncated or damaged protobuf)",
                         name);
  int64_t batch = 0;
  dpc_status st = import_model(name, m, o, out, &batch, d);
  if (st && batch) {
    explain_batch(name, m, o, batch, d);
    st = d->status;
  }
  onnx__model_proto__free_unpacked(m, NULL);
  return st;
}

dpc_status dpc_onnx_import_file(const char *path, dpc_graph **out, dpc_diag *d) {
  return dpc_onnx_import_file_opts(path, NULL, out, d);
}

dpc_status dpc_onnx_import_file_opts(const char *path, const dpc_onnx_opts *o, dpc_graph **out,
                                     dpc_diag *d) {
  char *buf;
  size_t len;
  dpc_status st = dpc_read_file(path, &buf, &len, d);
  if (st) return st;
  st = dpc_onnx_import_opts(path, buf, len, o, out, d);
  free(buf);
  return st;
}

bool dpc_onnx_is_model_path(const char *path) {
  size_t n = strlen(path);
  return n >= 5 && !strcmp(path + n - 5, ".onnx");
}
