/*
 * onnx_ops.c — ONNX ops onto dpc ops: elementwise, shape and layout, reductions, and the table
 * of every op the importer knows (the nets' layers are in onnx_nn.c).
 *
 * An importer reads the current node through the helpers of onnx_internal.h and defines its
 * outputs. Where ONNX changed an op's meaning between opsets (Softmax before 13, attributes
 * that became inputs), the importer follows the model's opset.
 */
#include "frontend/onnx_internal.h"
#include "frontend/onnx_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(i) onnx_in(c, (i))

/* ---- elementwise ---------------------------------------------------------------------------- */

/* The ops one dpc op does: the table row names it (c->op). */
static dpc_status imp_unary(onnx_ctx *c) {
  return onnx_def(c, 0, onnx_un(c, c->op, IN(0)));
}

/* Opsets before 7 broadcast only when asked, and align b at `axis` of a. */
static uint32_t legacy_broadcast(onnx_ctx *c, uint32_t a, uint32_t b) {
  if (a == DPC_NONE || b == DPC_NONE || c->opset >= 7 || !onnx_attr_i(c, "broadcast", 0) ||
      !onnx_attr(c, "axis"))
    return b;
  const dpc_shape *sa = &c->g->values[a].shape, *sb = &c->g->values[b].shape;
  int64_t axis = onnx_attr_i(c, "axis", 0);
  if (axis < 0) axis += sa->rank;
  if (axis < 0 || axis + sb->rank > sa->rank) return b;
  int64_t dims[DPC_MAX_RANK];
  uint32_t r = sa->rank - (uint32_t)axis;
  for (uint32_t i = 0; i < r; i++) dims[i] = i < sb->rank ? sb->d[i] : 1;
  return onnx_reshape(c, b, dims, r);
}

static dpc_status imp_binary(onnx_ctx *c) {
  uint32_t a = IN(0), b = IN(1);
  b = legacy_broadcast(c, a, b);
  return onnx_def(c, 0, onnx_bin(c, c->op, a, b));
}

/* Pow allows an exponent of another type, and integer bases: dpc's pow is floating point, so
 * integers go through f64 (exact for the small powers integer models use). */
static dpc_status imp_pow(onnx_ctx *c) {
  uint32_t a = IN(0), b = IN(1);
  if (a == DPC_NONE || b == DPC_NONE) return c->d->status;
  dpc_dtype ta = c->g->values[a].dtype;
  dpc_dtype work = dpc_dtype_is_float(ta) ? ta : DPC_F64;
  uint32_t y = onnx_bin(c, DPC_OP_POW, onnx_cast(c, a, work), onnx_cast(c, b, work));
  return onnx_def(c, 0, onnx_cast(c, y, ta));
}

/* Max, Min and Sum take one or more inputs. */
static dpc_status imp_variadic(onnx_ctx *c) {
  uint32_t y = IN(0);
  for (uint32_t i = 1; i < c->node->n_input && y != DPC_NONE; i++) y = onnx_bin(c, c->op, y, IN(i));
  return onnx_def(c, 0, y);
}

static dpc_status imp_identity(onnx_ctx *c) {
  return onnx_def(c, 0, IN(0));
}

static dpc_status imp_reciprocal(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  return onnx_def(c, 0, onnx_bin(c, DPC_OP_DIV, onnx_scalar(c, c->g->values[x].dtype, 1), x));
}

static dpc_status imp_leaky_relu(onnx_ctx *c) {
  uint32_t x = IN(0), mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_float(c->g, "alpha", onnx_attr_f(c, "alpha", 0.01)))
    return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = onnx_emit(c, DPC_OP_LEAKY_RELU, &x, 1, mark, 0, &y);
  return st ? st : onnx_def(c, 0, y);
}

/* Clip: bounds are attributes before opset 11 and optional inputs after; a bound computed at
 * run time becomes max/min against it. */
static dpc_status imp_clip(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  dpc_dtype t = c->g->values[x].dtype;
  if (!dpc_dtype_is_float(t)) {
    /* dpc's clip is floating point: integers are bounded with max and min instead */
    for (uint32_t i = 1; i < 3; i++)
      if (onnx_has_in(c, i)) x = onnx_bin(c, i == 1 ? DPC_OP_MAX : DPC_OP_MIN, x, IN(i));
    return onnx_def(c, 0, x);
  }
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  dpc_status st = DPC_OK;
  uint32_t later[2] = {DPC_NONE, DPC_NONE};
  const char *names[2] = {"min", "max"};
  for (uint32_t i = 0; i < 2 && !st; i++) {
    if (c->opset < 11) {
      if (onnx_attr(c, names[i]))
        st = dpc_graph_attr_float(c->g, names[i], onnx_attr_f(c, names[i], 0));
      continue;
    }
    if (!onnx_has_in(c, i + 1)) continue;
    const onnx_const *k = onnx_in_const(c, i + 1);
    if (k && dpc_tensor_numel(&k->t) == 1)
      st = dpc_graph_attr_float(c->g, names[i], dpc_tload(&k->t, 0));
    else
      later[i] = i + 1;
  }
  if (st) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  if ((st = onnx_emit(c, DPC_OP_CLIP, &x, 1, mark, 0, &y))) return st;
  if (later[0] != DPC_NONE) y = onnx_bin(c, DPC_OP_MAX, y, IN(later[0]));
  if (later[1] != DPC_NONE) y = onnx_bin(c, DPC_OP_MIN, y, IN(later[1]));
  return onnx_def(c, 0, y);
}

static dpc_status imp_where(onnx_ctx *c) {
  uint32_t in[3] = {IN(0), IN(1), IN(2)}, y;
  dpc_status st = onnx_emit(c, DPC_OP_WHERE, in, 3, dpc_graph_attr_mark(c->g), 0, &y);
  return st ? st : onnx_def(c, 0, y);
}

/* ---- softmax ------------------------------------------------------------------------------ */

/* From opset 13 softmax runs along one axis; before, the input is seen as 2-D, the dims from
 * `axis` on flattened into one, and softmax runs along that. */
static dpc_status imp_softmax_like(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  dpc_shape s = c->g->values[x].shape;
  int64_t axis = onnx_attr_i(c, "axis", c->opset >= 13 ? -1 : 1);
  if (axis < 0) axis += s.rank;
  if (axis < 0 || (uint32_t)axis >= (s.rank ? s.rank : 1))
    return onnx_fail(c, DPC_ERR_INVALID, "axis %lld is out of range for rank %u",
                     (long long)onnx_attr_i(c, "axis", 0), s.rank);
  bool flat = c->opset < 13 && (uint32_t)axis != s.rank - 1;
  uint32_t in = x, mark, y;
  if (flat) {
    int64_t inner = 1;
    for (uint32_t i = (uint32_t)axis; i < s.rank; i++) {
      if (DPC_DIM_IS_SYM(s.d[i]))
        return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a symbolic dimension after the softmax axis");
      inner *= s.d[i];
    }
    int64_t dims[DPC_MAX_RANK];
    uint32_t r = 0;
    for (uint32_t i = 0; i < (uint32_t)axis; i++) dims[r++] = s.d[i];
    dims[r++] = inner;
    in = onnx_reshape(c, x, dims, r);
    axis = r - 1;
  }
  mark = dpc_graph_attr_mark(c->g);
  if (dpc_graph_attr_int(c->g, "axis", axis)) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = onnx_emit(c, c->op, &in, 1, mark, 0, &y);
  if (st) return st;
  if (flat) y = onnx_reshape(c, y, s.d, s.rank);
  return onnx_def(c, 0, y);
}

/* ---- shapes and layout -------------------------------------------------------------------- */

static dpc_status imp_shape_of(onnx_ctx *c) {
  dpc_dtype t;
  dpc_shape s;
  dpc_status st = onnx_in_type(c, 0, &t, &s);
  if (st) return st;
  int64_t r = s.rank, lo = onnx_attr_i(c, "start", 0), hi = onnx_attr_i(c, "end", r);
  if (lo < 0) lo += r;
  if (hi < 0) hi += r;
  lo = lo < 0 ? 0 : lo > r ? r : lo;
  hi = hi < 0 ? 0 : hi > r ? r : hi;
  int64_t n = hi > lo ? hi - lo : 0;
  onnx_const k = {.t = {.dtype = DPC_I64, .shape = {.rank = 1, .d = {n}}}};
  k.t.data = malloc((size_t)(n ? n : 1) * 8);
  k.sym = calloc((size_t)(n ? n : 1), 1);
  if (!k.t.data || !k.sym) {
    onnx_const_free(&k);
    return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  }
  for (int64_t i = 0; i < n; i++) {
    memcpy((char *)k.t.data + 8 * i, &s.d[lo + i], 8);
    k.sym[i] = DPC_DIM_IS_SYM(s.d[lo + i]);
  }
  return onnx_def_const(c, 0, &k);
}

static dpc_status imp_size(onnx_ctx *c) {
  dpc_dtype t;
  dpc_shape s;
  dpc_status st = onnx_in_type(c, 0, &t, &s);
  if (st) return st;
  if (!dpc_shape_is_concrete(&s))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "Size of a tensor with a symbolic dimension");
  onnx_const k = {.t = {.dtype = DPC_I64, .shape = {.rank = 0}}};
  int64_t n = dpc_shape_numel(&s);
  if (!(k.t.data = malloc(8))) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  memcpy(k.t.data, &n, 8);
  return onnx_def_const(c, 0, &k);
}

/* A fixed-batch export made symbolic (dpc_onnx_opts.leading_batch) still spells the batch as
 * a number in a Reshape's constant shape ([32, -1], [32, 400]): where the shape holds that
 * number at the position where its input holds the batch, it becomes the batch. Elsewhere the
 * number may be the batch moved or a dimension of the same size, and [2, 32, 32] from
 * [32, 64] checks equally with the batch in either place; a wrong guess would train a
 * different model, so such a shape keeps its numbers and the reshape fails naming the node. */
static void batch_target(onnx_ctx *c, const dpc_shape *in, int64_t *dims, const bool *sym, int n) {
  if (!c->batch) return;
  int at = -1;
  for (uint32_t i = 0; i < in->rank && at < 0; i++)
    if (in->d[i] == c->batch_dim) at = (int)i;
  if (at < 0 || at >= n) return;
  for (int i = 0; i < n; i++)
    if (dims[i] == c->batch_dim) return; /* a Shape chain or a 0 carried it already */
  if (!sym[at] && dims[at] == c->batch) dims[at] = c->batch_dim;
}

/* Reshape's target: 0 copies the input's dimension (unless allowzero), -1 is inferred. */
static dpc_status imp_reshape(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  int64_t dims[DPC_MAX_RANK + 1];
  bool sym[DPC_MAX_RANK + 1];
  int n;
  if (c->opset < 5)
    n = onnx_attr_ints(c, "shape", dims, DPC_MAX_RANK + 1), memset(sym, 0, sizeof sym);
  else
    n = onnx_const_ints(c, 1, dims, DPC_MAX_RANK + 1, sym);
  if (n < 0) return c->d->status ? c->d->status : onnx_fail(c, DPC_ERR_INVALID, "no shape");
  if (n > DPC_MAX_RANK)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "rank %d is above dpc's limit of %d", n, DPC_MAX_RANK);
  const dpc_shape *s = &c->g->values[x].shape;
  bool allowzero = onnx_attr_i(c, "allowzero", 0) != 0;
  for (int i = 0; i < n; i++) {
    if (sym[i]) continue;
    if (dims[i] == 0 && !allowzero) {
      if ((uint32_t)i >= s->rank)
        return onnx_fail(c, DPC_ERR_INVALID, "shape entry %d is 0 (copy) beyond the input's rank",
                         i);
      dims[i] = s->d[i];
    } else if (dims[i] < -1) {
      return onnx_fail(c, DPC_ERR_INVALID, "shape entry %d is %lld", i, (long long)dims[i]);
    }
  }
  batch_target(c, s, dims, sym, n);
  return onnx_def(c, 0, onnx_reshape(c, x, dims, (uint32_t)n));
}

static dpc_status imp_flatten(onnx_ctx *c) {
  uint32_t x = IN(0), mark = dpc_graph_attr_mark(c->g), y;
  if (x == DPC_NONE) return c->d->status;
  int64_t axis = onnx_attr_i(c, "axis", 1);
  if (axis < 0) axis += c->g->values[x].shape.rank;
  if (dpc_graph_attr_int(c->g, "axis", axis)) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = onnx_emit(c, DPC_OP_FLATTEN, &x, 1, mark, 0, &y);
  return st ? st : onnx_def(c, 0, y);
}

static dpc_status imp_transpose(onnx_ctx *c) {
  uint32_t x = IN(0), mark = dpc_graph_attr_mark(c->g), y;
  if (x == DPC_NONE) return c->d->status;
  int64_t perm[DPC_MAX_RANK];
  int n = onnx_attr_ints(c, "perm", perm, DPC_MAX_RANK);
  if (n > DPC_MAX_RANK) return onnx_fail(c, DPC_ERR_INVALID, "perm is longer than the rank");
  if (n >= 0 && dpc_graph_attr_ints(c->g, "perm", perm, (uint32_t)n))
    return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = onnx_emit(c, DPC_OP_TRANSPOSE, &x, 1, mark, 0, &y);
  return st ? st : onnx_def(c, 0, y);
}

static dpc_status imp_concat(onnx_ctx *c) {
  uint32_t n = (uint32_t)c->node->n_input;
  if (n == 0) return onnx_fail(c, DPC_ERR_INVALID, "Concat needs inputs");
  uint32_t *in = malloc(n * sizeof *in), y;
  if (!in) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; i < n; i++) in[i] = IN(i);
  uint32_t mark = dpc_graph_attr_mark(c->g);
  dpc_status st = dpc_graph_attr_int(c->g, "axis", onnx_attr_i(c, "axis", 0))
                      ? onnx_fail(c, DPC_ERR_NOMEM, "out of memory")
                      : onnx_emit(c, DPC_OP_CONCAT, in, n, mark, 0, &y);
  free(in);
  return st ? st : onnx_def(c, 0, y);
}

static dpc_status imp_split(onnx_ctx *c) {
  uint32_t x = IN(0), nout = (uint32_t)c->node->n_output;
  if (x == DPC_NONE) return c->d->status;
  if (nout == 0) return onnx_fail(c, DPC_ERR_INVALID, "Split has no outputs");
  int64_t sizes[256];
  int n = -1;
  if (c->opset >= 13 && onnx_has_in(c, 1))
    n = onnx_const_ints(c, 1, sizes, 256, NULL);
  else if (c->opset < 13)
    n = onnx_attr_ints(c, "split", sizes, 256);
  if (n < -1 || (n < 0 && c->d->status)) return c->d->status;
  if (n >= 0 && (uint32_t)n != nout)
    return onnx_fail(c, DPC_ERR_INVALID, "split has %d sizes for %u outputs", n, nout);
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_int(c->g, "axis", onnx_attr_i(c, "axis", 0)) ||
      (n >= 0 && dpc_graph_attr_ints(c->g, "sizes", sizes, (uint32_t)n)))
    return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = onnx_emit(c, DPC_OP_SPLIT, &x, 1, mark, nout, &y);
  for (uint32_t k = 0; !st && k < nout; k++) st = onnx_def(c, k, y + k);
  return st;
}

/* Slice: bounds are attributes before opset 10 and constant inputs after. Symbolic dimensions
 * can only be taken whole (start 0, end past the end, step 1), which leaves them out. */
static dpc_status imp_slice(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape *s = &c->g->values[x].shape;
  int64_t st_[DPC_MAX_RANK + 1], en[DPC_MAX_RANK + 1], ax[DPC_MAX_RANK + 1], sp[DPC_MAX_RANK + 1];
  int n = onnx_slice_args(c, st_, en, ax, sp);
  if (n < 0) return c->d->status;
  if (n > (int)s->rank)
    return onnx_fail(c, DPC_ERR_INVALID, "%d slice bounds for rank %u", n, s->rank);
  int m = 0;
  for (int i = 0; i < n; i++) {
    int64_t a = ax[i], step = sp[i];
    if (a < 0) a += s->rank;
    if (a >= 0 && a < (int64_t)s->rank && DPC_DIM_IS_SYM(s->d[a])) {
      if (st_[i] == 0 && en[i] >= INT32_MAX && step == 1) continue;
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "slicing symbolic dimension %lld", (long long)a);
    }
    st_[m] = st_[i], en[m] = en[i], ax[m] = a, sp[m] = step, m++;
  }
  if (m == 0) return onnx_def(c, 0, x);
  uint32_t mark = dpc_graph_attr_mark(c->g), y;
  if (dpc_graph_attr_ints(c->g, "starts", st_, (uint32_t)m) ||
      dpc_graph_attr_ints(c->g, "ends", en, (uint32_t)m) ||
      dpc_graph_attr_ints(c->g, "axes", ax, (uint32_t)m) ||
      dpc_graph_attr_ints(c->g, "steps", sp, (uint32_t)m))
    return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = onnx_emit(c, DPC_OP_SLICE, &x, 1, mark, 0, &y);
  return st ? st : onnx_def(c, 0, y);
}

/* The axes of Squeeze/Unsqueeze/Reduce*: an attribute before opset 13 (18 for most reductions)
 * and an optional input after. *n = -1 when absent. */
static dpc_status axes_of(onnx_ctx *c, bool as_input, int64_t *axes, int *n) {
  *n = -1;
  if (!as_input) {
    *n = onnx_attr_ints(c, "axes", axes, DPC_MAX_RANK + 1);
    if (*n > DPC_MAX_RANK) return onnx_fail(c, DPC_ERR_INVALID, "too many axes");
    return DPC_OK;
  }
  if (!onnx_has_in(c, 1)) return DPC_OK;
  *n = onnx_const_ints(c, 1, axes, DPC_MAX_RANK + 1, NULL);
  if (*n < 0) return c->d->status;
  if (*n > DPC_MAX_RANK) return onnx_fail(c, DPC_ERR_INVALID, "too many axes");
  return DPC_OK;
}

/* Squeeze and Unsqueeze: a reshape to the shape onnx_squeeze_shape works out. */
static dpc_status squeeze(onnx_ctx *c, bool unsqueeze) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape *s = &c->g->values[x].shape;
  int64_t axes[DPC_MAX_RANK + 1];
  int n, bad;
  dpc_status st = axes_of(c, c->opset >= 13, axes, &n);
  if (st) return st;
  if (unsqueeze && n < 0) return onnx_fail(c, DPC_ERR_INVALID, "Unsqueeze needs axes");
  dpc_shape r;
  if (!onnx_squeeze_shape(s, axes, n, unsqueeze, &r, &bad)) {
    if (bad < 0)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "rank %u is above dpc's limit of %d",
                       s->rank + (uint32_t)n, DPC_MAX_RANK);
    return unsqueeze
               ? onnx_fail(c, DPC_ERR_INVALID, "axis %lld is out of range or repeated",
                           (long long)axes[bad])
               : onnx_fail(c, DPC_ERR_INVALID, "cannot squeeze axis %lld", (long long)axes[bad]);
  }
  return onnx_def(c, 0, onnx_reshape(c, x, r.d, r.rank));
}
static dpc_status imp_squeeze(onnx_ctx *c) {
  return squeeze(c, false);
}
static dpc_status imp_unsqueeze(onnx_ctx *c) {
  return squeeze(c, true);
}

/* Gather: constant negative indices are made positive here; run-time indices must already be
 * in range (dpc's gather does not wrap). */
static dpc_status imp_gather(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape *s = &c->g->values[x].shape;
  int64_t axis = onnx_attr_i(c, "axis", 0);
  if (axis < 0) axis += s->rank;
  if (axis < 0 || axis >= (int64_t)s->rank)
    return onnx_fail(c, DPC_ERR_INVALID, "axis %lld is out of range", (long long)axis);
  uint32_t idx;
  const onnx_const *k = onnx_in_const(c, 1);
  if (k && !DPC_DIM_IS_SYM(s->d[axis])) {
    int64_t n = dpc_tensor_numel(&k->t), dim = s->d[axis];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
      int64_t j = dpc_tload_i64(&k->t, i);
      if (j < -dim || j >= dim) {
        free(v);
        return onnx_fail(c, DPC_ERR_INVALID, "index %lld is out of range for dimension %lld",
                         (long long)j, (long long)dim);
      }
      v[i] = (double)(j < 0 ? j + dim : j);
    }
    idx = onnx_constant(c, DPC_I64, &k->t.shape, v);
    free(v);
  } else {
    idx = IN(1);
  }
  return onnx_def(c, 0, onnx_gather(c, x, idx, axis));
}

static dpc_status imp_cast(onnx_ctx *c) {
  int64_t to = onnx_attr_i(c, "to", -1);
  dpc_dtype t;
  if (!strcmp(c->node->op_type, "CastLike")) {
    dpc_shape s;
    dpc_status st = onnx_in_type(c, 1, &t, &s);
    if (st) return st;
  } else if (!dpc_onnx_dtype((int32_t)to, &t)) {
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "cast to %s, a type dpc does not have",
                     dpc_onnx_dtype_name((int32_t)to));
  }
  return onnx_def(c, 0, onnx_cast(c, IN(0), t));
}

/* Expand broadcasts x to a shape: x plus zeros of the result's shape. */
static dpc_status imp_expand(onnx_ctx *c) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  int64_t dims[DPC_MAX_RANK + 1];
  int n = onnx_const_ints(c, 1, dims, DPC_MAX_RANK + 1, NULL);
  if (n < 0) return c->d->status;
  if (n > DPC_MAX_RANK) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "rank above dpc's limit");
  const dpc_shape *s = &c->g->values[x].shape;
  dpc_shape r = {.rank = (uint32_t)n > s->rank ? (uint32_t)n : s->rank};
  for (uint32_t i = 0; i < r.rank; i++) {
    int64_t a = i + s->rank >= r.rank ? s->d[i + s->rank - r.rank] : 1;
    int64_t b = i + (uint32_t)n >= r.rank ? dims[i + (uint32_t)n - r.rank] : 1;
    if (a != b && a != 1 && b != 1)
      return onnx_fail(c, DPC_ERR_INVALID, "cannot expand dimension %lld to %lld", (long long)a,
                       (long long)b);
    r.d[i] = a == 1 ? b : a;
    if (DPC_DIM_IS_SYM(r.d[i]) && a == 1)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "expanding to a symbolic dimension");
  }
  if (dpc_shape_eq(&r, s)) return onnx_def(c, 0, x);
  dpc_dtype t = c->g->values[x].dtype, work = t == DPC_BOOL ? DPC_I32 : t;
  if (!dpc_shape_is_concrete(&r) || dpc_shape_numel(&r) > (INT64_C(1) << 24))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "Expand to a symbolic or very large shape");
  uint32_t z = onnx_filled(c, work, &r, 0);
  return onnx_def(c, 0, onnx_cast(c, onnx_bin(c, DPC_OP_ADD, onnx_cast(c, x, work), z), t));
}

/* ---- reductions --------------------------------------------------------------------------- */

/* ReduceMin is the negated ReduceMax of -x: dpc has no reduce_min. */
static dpc_status reduce(onnx_ctx *c, dpc_op op, bool negate) {
  uint32_t x = IN(0);
  if (x == DPC_NONE) return c->d->status;
  bool axes_input = !strcmp(c->node->op_type, "ReduceSum") && c->opset >= 13;
  int64_t axes[DPC_MAX_RANK + 1];
  int n;
  dpc_status st = axes_of(c, axes_input, axes, &n);
  if (st) return st;
  bool keep = onnx_attr_i(c, "keepdims", 1) != 0;
  if (n == 0 && onnx_attr_i(c, "noop_with_empty_axes", 0)) return onnx_def(c, 0, x);
  if (negate) x = onnx_un(c, DPC_OP_NEG, x);
  uint32_t y = onnx_reduce(c, op, x, axes, n, keep);
  if (negate) y = onnx_un(c, DPC_OP_NEG, y);
  return onnx_def(c, 0, y);
}
static dpc_status imp_reduce(onnx_ctx *c) {
  return reduce(c, c->op, false);
}
static dpc_status imp_reduce_min(onnx_ctx *c) {
  return reduce(c, DPC_OP_REDUCE_MAX, true);
}

/* ---- constants (folded: these only make constants) ------------------------------------------ */

static dpc_status imp_constant(onnx_ctx *c) {
  onnx_const k = {0};
  const Onnx__AttributeProto *a;
  dpc_status st;
  if ((a = onnx_attr(c, "value")) && a->t) {
    if ((st = dpc_onnx_tensor_from(a->t, "value", &k.t, c->d))) {
      dpc_diag_prefix(c->d, "%s: node %u (Constant): ", c->file, c->node_no);
      return st;
    }
    return onnx_def_const(c, 0, &k);
  }
  bool is_float = false, is_list = false;
  if ((a = onnx_attr(c, "value_float")))
    is_float = true;
  else if ((a = onnx_attr(c, "value_floats")))
    is_float = is_list = true;
  else if ((a = onnx_attr(c, "value_int")))
    is_float = false;
  else if ((a = onnx_attr(c, "value_ints")))
    is_list = true;
  else
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a Constant with a sparse or string value");
  int64_t n = is_list ? (int64_t)(is_float ? a->n_floats : a->n_ints) : 1;
  k.t.dtype = is_float ? DPC_F32 : DPC_I64;
  k.t.shape.rank = is_list ? 1 : 0;
  k.t.shape.d[0] = n;
  if (!(k.t.data = malloc((size_t)(n ? n : 1) * 8))) return onnx_fail(c, DPC_ERR_NOMEM, "oom");
  for (int64_t i = 0; i < n; i++)
    dpc_tstore(&k.t, i, is_float ? (is_list ? a->floats[i] : a->f) : 0);
  if (!is_float)
    for (int64_t i = 0; i < n; i++)
      memcpy((char *)k.t.data + 8 * i, is_list ? &a->ints[i] : &a->i, 8);
  return onnx_def_const(c, 0, &k);
}

static dpc_status imp_constant_of_shape(onnx_ctx *c) {
  int64_t dims[DPC_MAX_RANK + 1];
  int n = onnx_const_ints(c, 0, dims, DPC_MAX_RANK + 1, NULL);
  if (n < 0) return c->d->status;
  if (n > DPC_MAX_RANK) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "rank above dpc's limit");
  onnx_const k = {.t = {.dtype = DPC_F32, .shape = {.rank = (uint32_t)n}}};
  double fill = 0;
  const Onnx__AttributeProto *a = onnx_attr(c, "value");
  if (a && a->t) {
    dpc_tensor v;
    dpc_status st = dpc_onnx_tensor_from(a->t, "value", &v, c->d);
    if (st) return st;
    k.t.dtype = v.dtype;
    fill = dpc_tensor_numel(&v) ? dpc_tload(&v, 0) : 0;
    free(v.data);
  }
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0) return onnx_fail(c, DPC_ERR_INVALID, "negative dimension");
    k.t.shape.d[i] = dims[i];
  }
  int64_t numel = dpc_shape_numel(&k.t.shape);
  if (numel > (INT64_C(1) << 24))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "a ConstantOfShape of more than 2^24 elements");
  if (!(k.t.data = malloc((size_t)(numel ? numel : 1) * dpc_dtype_size(k.t.dtype))))
    return onnx_fail(c, DPC_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < numel; i++) dpc_tstore(&k.t, i, fill);
  return onnx_def_const(c, 0, &k);
}

/* ---- the table -------------------------------------------------------------------------- */

static const onnx_op_row ops[] = {
    {"Abs", imp_unary, DPC_OP_ABS},
    {"Add", imp_binary, DPC_OP_ADD},
    {"AveragePool", dpc_onnx_imp_avg_pool},
    {"BatchNormalization", dpc_onnx_imp_batch_norm},
    {"Cast", imp_cast},
    {"CastLike", imp_cast},
    {"Clip", imp_clip},
    {"Concat", imp_concat},
    {"Constant", imp_constant},
    {"ConstantOfShape", imp_constant_of_shape},
    {"Conv", dpc_onnx_imp_conv},
    {"ConvTranspose", dpc_onnx_imp_conv_transpose},
    {"Cos", imp_unary, DPC_OP_COS},
    {"Div", imp_binary, DPC_OP_DIV},
    {"Dropout", dpc_onnx_imp_dropout},
    {"Equal", imp_binary, DPC_OP_EQUAL},
    {"Erf", imp_unary, DPC_OP_ERF},
    {"Exp", imp_unary, DPC_OP_EXP},
    {"Expand", imp_expand},
    {"Flatten", imp_flatten},
    {"Floor", imp_unary, DPC_OP_FLOOR},
    {"Gather", imp_gather},
    {"Gemm", dpc_onnx_imp_gemm},
    {"GlobalAveragePool", dpc_onnx_imp_global_avg_pool},
    {"GlobalMaxPool", dpc_onnx_imp_global_max_pool},
    {"Greater", imp_binary, DPC_OP_GREATER},
    {"Identity", imp_identity},
    {"LayerNormalization", dpc_onnx_imp_layer_norm},
    {"LeakyRelu", imp_leaky_relu},
    {"Less", imp_binary, DPC_OP_LESS},
    {"Log", imp_unary, DPC_OP_LOG},
    {"LogSoftmax", imp_softmax_like, DPC_OP_LOG_SOFTMAX},
    {"LSTM", dpc_onnx_imp_lstm},
    {"MatMul", dpc_onnx_imp_matmul},
    {"Max", imp_variadic, DPC_OP_MAX},
    {"MaxPool", dpc_onnx_imp_max_pool},
    {"Min", imp_variadic, DPC_OP_MIN},
    {"Mul", imp_binary, DPC_OP_MUL},
    {"Neg", imp_unary, DPC_OP_NEG},
    {"Not", imp_unary, DPC_OP_NOT},
    {"Pow", imp_pow},
    {"Reciprocal", imp_reciprocal},
    {"ReduceMax", imp_reduce, DPC_OP_REDUCE_MAX},
    {"ReduceMean", imp_reduce, DPC_OP_REDUCE_MEAN},
    {"ReduceMin", imp_reduce_min},
    {"ReduceSum", imp_reduce, DPC_OP_REDUCE_SUM},
    {"Relu", imp_unary, DPC_OP_RELU},
    {"Reshape", imp_reshape},
    {"Resize", dpc_onnx_imp_resize},
    {"Shape", imp_shape_of},
    {"Sigmoid", imp_unary, DPC_OP_SIGMOID},
    {"Sign", imp_unary, DPC_OP_SIGN},
    {"Sin", imp_unary, DPC_OP_SIN},
    {"Size", imp_size},
    {"Slice", imp_slice},
    {"Softmax", imp_softmax_like, DPC_OP_SOFTMAX},
    {"Split", imp_split},
    {"Sqrt", imp_unary, DPC_OP_SQRT},
    {"Squeeze", imp_squeeze},
    {"Sub", imp_binary, DPC_OP_SUB},
    {"Sum", imp_variadic, DPC_OP_ADD},
    {"Tanh", imp_unary, DPC_OP_TANH},
    {"Transpose", imp_transpose},
    {"Unsqueeze", imp_unsqueeze},
    {"Upsample", dpc_onnx_imp_resize},
    {"Where", imp_where},
};

const onnx_op_row *onnx_find_op(const char *op_type) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op_type)) return &ops[i];
  const onnx_op_row *r = onnx_find_composed(op_type);
  return r ? r : onnx_find_indexed(op_type);
}

const char *dpc_onnx_supported_ops(void) {
  return "Abs Add AveragePool BatchNormalization Cast CastLike Clip Concat Constant "
         "ConstantOfShape Conv ConvTranspose Cos Div Dropout Equal Erf Exp Expand Flatten Floor "
         "Gather Gemm GlobalAveragePool GlobalMaxPool Greater Identity LayerNormalization "
         "LeakyRelu Less Log LogSoftmax LSTM MatMul Max MaxPool Min Mul Neg Not Pow Reciprocal "
         "ReduceMax ReduceMean ReduceMin ReduceSum Relu Reshape Resize Shape Sigmoid Sign Sin Size "
         "Slice Softmax Split Sqrt Squeeze Sub Sum Tanh Transpose Unsqueeze Upsample Where; "
         "composed from those: And ArgMax ArgMin Ceil DepthToSpace Elu EyeLike GatherElements "
         "GreaterOrEqual HardSigmoid Hardmax InstanceNormalization IsInf LessOrEqual Mean "
         "NegativeLogLikelihoodLoss OneHot Or Pad PRelu Range ReduceL1 ReduceL2 ReduceLogSum "
         "ReduceLogSumExp ReduceSumSquare Round Selu Shrink SoftmaxCrossEntropyLoss Softplus "
         "Softsign SpaceToDepth ThresholdedRelu Tile Trilu Xor";
}
