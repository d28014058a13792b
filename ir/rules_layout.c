/*
 * rules_layout.c — shape rules of the layout ops (transpose, reshape, flatten, concat, split,
 * slice, gather, cast, their gradients) and of matmul. See rules.h.
 */
#include "ir/rules_internal.h"

/* ---- layout -------------------------------------------------------------------------------- */

dpc_status dpc_rule_transpose(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x = &IN(0)->shape;
  int64_t perm[DPC_MAX_RANK + 1];
  dpc_attrs a = dpc_node_attrs(g, node);
  uint32_t n = dpc_attrs_ints(a, "perm", perm, DPC_MAX_RANK + 1, 0);
  if (!dpc_attrs_get(a, "perm")) {
    n = x->rank;
    for (uint32_t i = 0; i < n; i++) perm[i] = n - 1 - i;
  }
  if (n != x->rank)
    return fail(g, node, d, "perm has %u entries but the input has rank %u", n, x->rank);
  bool seen[DPC_MAX_RANK] = {0};
  dpc_shape s = {.rank = n};
  for (uint32_t i = 0; i < n; i++) {
    if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
      return fail(g, node, d, "perm is not a permutation of 0..%u", n - 1);
    seen[perm[i]] = true;
    s.d[i] = x->d[perm[i]];
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* A product of dimensions as a constant times a sorted list of symbol numbers. */
typedef struct symprod {
  int64_t c;
  uint32_t n;
  int64_t sym[DPC_MAX_RANK];
} symprod;

static bool prod_mul(symprod *p, int64_t dim) {
  if (DPC_DIM_IS_SYM(dim)) {
    uint32_t i = p->n++;
    while (i > 0 && p->sym[i - 1] > dim) p->sym[i] = p->sym[i - 1], i--;
    p->sym[i] = dim;
    return true;
  }
  if (dim != 0 && p->c > INT64_MAX / dim) return false;
  p->c *= dim;
  return true;
}

dpc_status dpc_rule_reshape(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x = &IN(0)->shape;
  const dpc_attr *sa = dpc_attrs_get(dpc_node_attrs(g, node), "shape");
  if (sa->n > DPC_MAX_RANK)
    return fail(g, node, d, "rank %u is above dpc's limit of %d", sa->n, DPC_MAX_RANK);
  symprod pin = {1, 0, {0}}, pout = {1, 0, {0}};
  for (uint32_t i = 0; i < x->rank; i++)
    if (!prod_mul(&pin, x->d[i])) return fail(g, node, d, "input has too many elements");
  dpc_shape s = {.rank = sa->n};
  int infer = -1;
  for (uint32_t i = 0; i < sa->n; i++) {
    int64_t v = resolve(g, g->ints[sa->u.off + i]);
    s.d[i] = v;
    if (v == DPC_DIM_INFER) {
      if (infer >= 0) return fail(g, node, d, "shape has more than one -1");
      infer = (int)i;
    } else if (v < DPC_DIM_INFER && !DPC_DIM_IS_SYM(v)) {
      return fail(g, node, d, "shape has a negative dimension");
    } else if (!prod_mul(&pout, v)) {
      return fail(g, node, d, "shape has too many elements");
    }
  }
  char a[160];
  ty(g, IN(0), a, sizeof a);
  /* Symbols of the output must all come from the input. */
  uint32_t rest[DPC_MAX_RANK], nrest = 0, j = 0;
  for (uint32_t i = 0; i < pin.n; i++) {
    if (j < pout.n && pout.sym[j] == pin.sym[i])
      j++;
    else
      rest[nrest++] = (uint32_t)i;
  }
  if (j != pout.n)
    return fail(g, node, d,
                "cannot reshape %s: a symbolic dimension of the new shape is not in the input", a);
  if (infer < 0) {
    if (nrest || pin.c != pout.c)
      return fail(g, node, d, "cannot reshape %s (%lld elements) into a shape of %lld", a,
                  (long long)pin.c, (long long)pout.c);
  } else if (nrest == 0) {
    if (pout.c == 0 || pin.c % pout.c)
      return fail(g, node, d, "cannot reshape %s: its %lld elements do not divide by %lld", a,
                  (long long)pin.c, (long long)pout.c);
    s.d[infer] = pin.c / pout.c;
  } else if (nrest == 1 && pin.c == pout.c) {
    s.d[infer] = pin.sym[rest[0]];
  } else {
    return fail(g, node, d,
                "cannot infer -1 when reshaping %s: it would mix a symbolic dimension with others",
                a);
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* Product of x->d[lo..hi) as one dimension, if it is a constant or a single symbol. */
static bool collapse(const dpc_shape *x, uint32_t lo, uint32_t hi, int64_t *out) {
  symprod p = {1, 0, {0}};
  for (uint32_t i = lo; i < hi; i++)
    if (!prod_mul(&p, x->d[i])) return false;
  if (p.n == 0)
    *out = p.c;
  else if (p.n == 1 && p.c == 1)
    *out = p.sym[0];
  else
    return false;
  return true;
}

dpc_status dpc_rule_flatten(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x = &IN(0)->shape;
  uint32_t ax = 0;
  dpc_status st = get_axis(g, node, "axis", x->rank, true, &ax, d);
  if (st) return st;
  dpc_shape s = {.rank = 2};
  if (!collapse(x, 0, ax, &s.d[0]) || !collapse(x, ax, x->rank, &s.d[1])) {
    char a[160];
    ty(g, IN(0), a, sizeof a);
    return fail(g, node, d,
                "cannot flatten %s at axis %u: a symbolic dimension would be multiplied by another",
                a, ax);
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

dpc_status dpc_rule_concat(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x0 = &IN(0)->shape;
  uint32_t ax = 0;
  dpc_status st;
  if (x0->rank == 0) return fail(g, node, d, "cannot concatenate scalars");
  if ((st = get_axis(g, node, "axis", x0->rank, false, &ax, d))) return st;
  dpc_shape s = *x0;
  for (uint32_t i = 1; i < NIN; i++) {
    const dpc_shape *xi = &IN(i)->shape;
    char a[160], b[160];
    ty(g, IN(0), a, sizeof a);
    ty(g, IN(i), b, sizeof b);
    if ((st = same_dtype(g, node, 0, i, d))) return st;
    bool ok = xi->rank == x0->rank;
    for (uint32_t k = 0; ok && k < x0->rank; k++) ok = k == ax || xi->d[k] == x0->d[k];
    if (!ok)
      return fail(g, node, d, "input %u %s does not match input 0 %s outside axis %u", i, b, a, ax);
    if (DPC_DIM_IS_SYM(xi->d[ax]) || DPC_DIM_IS_SYM(s.d[ax]))
      return fail(g, node, d, "cannot concatenate along a symbolic dimension");
    s.d[ax] += xi->d[ax];
  }
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

dpc_status dpc_rule_split(dpc_graph *g, uint32_t node, dpc_diag *d) {
  const dpc_shape *x = &IN(0)->shape;
  uint32_t ax = 0, nout = g->nodes[node].n_out;
  dpc_status st;
  if (x->rank == 0) return fail(g, node, d, "cannot split a scalar");
  if ((st = get_axis(g, node, "axis", x->rank, false, &ax, d))) return st;
  int64_t dim = x->d[ax];
  if (DPC_DIM_IS_SYM(dim)) return fail(g, node, d, "cannot split along a symbolic dimension");
  dpc_attrs a = dpc_node_attrs(g, node);
  if (dpc_attrs_get(a, "sizes")) {
    const dpc_attr *sa = dpc_attrs_get(a, "sizes");
    uint32_t n = sa->kind == DPC_ATTR_INTS ? sa->n : 1;
    if (n != nout) return fail(g, node, d, "sizes has %u entries for %u outputs", n, nout);
    int64_t sum = 0;
    for (uint32_t k = 0; k < n; k++) {
      int64_t sz = sa->kind == DPC_ATTR_INTS ? g->ints[sa->u.off + k] : sa->u.i;
      if (sz < 0) return fail(g, node, d, "sizes has a negative entry");
      if (sz > dim - sum) return fail(g, node, d, "sizes add up to more than %lld", (long long)dim);
      sum += sz;
      dpc_shape s = *x;
      s.d[ax] = sz;
      set_out(g, node, k, IN(0)->dtype, &s);
    }
    if (sum != dim)
      return fail(g, node, d, "sizes add up to %lld, not %lld", (long long)sum, (long long)dim);
    return DPC_OK;
  }
  if (dim % nout)
    return fail(g, node, d, "dimension %lld does not split evenly into %u", (long long)dim, nout);
  dpc_shape s = *x;
  s.d[ax] = dim / nout;
  for (uint32_t k = 0; k < nout; k++) set_out(g, node, k, IN(0)->dtype, &s);
  return DPC_OK;
}

void dpc_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                    int64_t *count) {
  /* Compare before adding so huge sentinels such as INT64_MAX cannot overflow. */
  if (start < 0) start = start < -dim ? -1 : start + dim;
  if (end < 0) end = end < -dim ? -1 : end + dim;
  if (step > 0) {
    if (start < 0) start = 0;
    if (start > dim) start = dim;
    if (end < 0) end = 0;
    if (end > dim) end = dim;
    *first = start;
    *count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    /* ONNX: with a negative step the start is clamped to [0, dim-1], the end to [-1, dim-1]. */
    if (start < 0) start = 0;
    if (start > dim - 1) start = dim - 1;
    if (end > dim - 1) end = dim - 1;
    *first = start;
    *count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
}

/* The shape slice() takes from x under the node's starts/ends/axes/steps (slice and slice_grad
 * share the attributes). */
static dpc_status slice_shape(dpc_graph *g, uint32_t node, const dpc_shape *x, dpc_shape *s,
                              dpc_diag *d) {
  dpc_attrs a = dpc_node_attrs(g, node);
  int64_t st[DPC_MAX_RANK + 1], en[DPC_MAX_RANK + 1], ax[DPC_MAX_RANK + 1], sp[DPC_MAX_RANK + 1];
  uint32_t n = dpc_attrs_ints(a, "starts", st, DPC_MAX_RANK + 1, 0);
  uint32_t ne = dpc_attrs_ints(a, "ends", en, DPC_MAX_RANK + 1, 0);
  if (n != ne) return fail(g, node, d, "starts has %u entries and ends %u", n, ne);
  if (n > x->rank) return fail(g, node, d, "%u slice bounds for rank %u", n, x->rank);
  if (dpc_attrs_get(a, "axes")) {
    if (dpc_attrs_ints(a, "axes", ax, DPC_MAX_RANK + 1, 0) != n)
      return fail(g, node, d, "axes must have as many entries as starts");
  } else {
    for (uint32_t i = 0; i < n; i++) ax[i] = i;
  }
  if (dpc_attrs_get(a, "steps")) {
    if (dpc_attrs_ints(a, "steps", sp, DPC_MAX_RANK + 1, 0) != n)
      return fail(g, node, d, "steps must have as many entries as starts");
  } else {
    for (uint32_t i = 0; i < n; i++) sp[i] = 1;
  }
  *s = *x;
  bool seen[DPC_MAX_RANK] = {0};
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k;
    if (!dpc_axis_norm(ax[i], x->rank, &k))
      return fail(g, node, d, "axis %lld is out of range", (long long)ax[i]);
    if (seen[k]) return fail(g, node, d, "axis %u is sliced twice", k);
    seen[k] = true;
    if (sp[i] == 0) return fail(g, node, d, "a step of 0");
    if (DPC_DIM_IS_SYM(x->d[k])) return fail(g, node, d, "cannot slice a symbolic dimension");
    int64_t first, count;
    dpc_slice_axis(x->d[k], st[i], en[i], sp[i], &first, &count);
    s->d[k] = count;
  }
  return DPC_OK;
}

dpc_status dpc_rule_slice(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape s;
  dpc_status st = slice_shape(g, node, &IN(0)->shape, &s, d);
  if (st) return st;
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* slice_grad(dy, x): dx shaped like x. dy and x share the dtype, as a gradient and its value. */
dpc_status dpc_rule_slice_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape s;
  dpc_status st;
  if ((st = same_dtype(g, node, 0, 1, d))) return st;
  if ((st = slice_shape(g, node, &IN(1)->shape, &s, d))) return st;
  if ((st = dy_is(g, node, &s, "slice", d))) return st;
  set_out(g, node, 0, IN(0)->dtype, &IN(1)->shape);
  return DPC_OK;
}

/* The result shape of gather(data, indices) along the node's axis; data is input di. */
static dpc_status gather_shape(dpc_graph *g, uint32_t node, uint32_t di, dpc_shape *s,
                               dpc_diag *d) {
  dpc_status st;
  if ((st = need_int(g, node, di + 1, d))) return st;
  const dpc_shape *x = &IN(di)->shape, *idx = &IN(di + 1)->shape;
  uint32_t ax = 0;
  if (x->rank == 0) return fail(g, node, d, "data must have at least one dimension");
  if ((st = get_axis(g, node, "axis", x->rank, false, &ax, d))) return st;
  if (x->rank - 1 + idx->rank > DPC_MAX_RANK)
    return fail(g, node, d, "the result's rank is above dpc's limit of %d", DPC_MAX_RANK);
  memset(s, 0, sizeof *s);
  for (uint32_t i = 0; i < ax; i++) s->d[s->rank++] = x->d[i];
  for (uint32_t i = 0; i < idx->rank; i++) s->d[s->rank++] = idx->d[i];
  for (uint32_t i = ax + 1; i < x->rank; i++) s->d[s->rank++] = x->d[i];
  return DPC_OK;
}

dpc_status dpc_rule_gather(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape s;
  dpc_status st = gather_shape(g, node, 0, &s, d);
  if (st) return st;
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* gather_grad(dy, data, indices): ddata shaped like data; it sums, so floating point only. */
dpc_status dpc_rule_gather_grad(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_shape s;
  dpc_status st;
  if ((st = need_float(g, node, 0, d)) || (st = same_dtype(g, node, 0, 1, d))) return st;
  if ((st = gather_shape(g, node, 1, &s, d))) return st;
  if ((st = dy_is(g, node, &s, "gather", d))) return st;
  set_out(g, node, 0, IN(0)->dtype, &IN(1)->shape);
  return DPC_OK;
}

dpc_status dpc_rule_cast(dpc_graph *g, uint32_t node, dpc_diag *d) {
  (void)d;
  set_out(g, node, 0, dpc_attrs_dtype(dpc_node_attrs(g, node), "dtype"), &IN(0)->shape);
  return DPC_OK;
}

/* ---- matmul -----------------------------------------------------------------------------------
 */

dpc_status dpc_rule_matmul(dpc_graph *g, uint32_t node, dpc_diag *d) {
  dpc_status st;
  if ((st = same_dtype(g, node, 0, 1, d)) || (st = need_float(g, node, 0, d))) return st;
  dpc_attrs at = dpc_node_attrs(g, node);
  dpc_shape a = IN(0)->shape, b = IN(1)->shape;
  char sa[160], sb[160];
  ty(g, IN(0), sa, sizeof sa);
  ty(g, IN(1), sb, sizeof sb);
  if (a.rank == 0 || b.rank == 0)
    return fail(g, node, d, "needs at least 1-D operands, got %s and %s", sa, sb);
  bool a1 = a.rank == 1, b1 = b.rank == 1;
  if (a1) a.rank = 2, a.d[1] = a.d[0], a.d[0] = 1;
  if (b1) b.rank = 2, b.d[1] = 1;
  /* Transposing a vector is a no-op, as in NumPy: only operands of rank 2 or more swap. */
  if (!a1 && dpc_attrs_int(at, "transpose_a")) {
    int64_t t = a.d[a.rank - 1];
    a.d[a.rank - 1] = a.d[a.rank - 2], a.d[a.rank - 2] = t;
  }
  if (!b1 && dpc_attrs_int(at, "transpose_b")) {
    int64_t t = b.d[b.rank - 1];
    b.d[b.rank - 1] = b.d[b.rank - 2], b.d[b.rank - 2] = t;
  }
  int64_t m = a.d[a.rank - 2], k = a.d[a.rank - 1], k2 = b.d[b.rank - 2], n = b.d[b.rank - 1];
  if (k != k2) {
    char dk[80], dk2[80];
    dpc_graph_format_dim(g, k, dk, sizeof dk);
    dpc_graph_format_dim(g, k2, dk2, sizeof dk2);
    return fail(g, node, d, "inner dimensions differ (%s vs %s) in %s x %s", dk, dk2, sa, sb);
  }
  dpc_shape ba = {.rank = a.rank - 2}, bb = {.rank = b.rank - 2}, s;
  memcpy(ba.d, a.d, ba.rank * sizeof(int64_t));
  memcpy(bb.d, b.d, bb.rank * sizeof(int64_t));
  if (!broadcast(&ba, &bb, &s))
    return fail(g, node, d, "batch dimensions of %s and %s do not broadcast", sa, sb);
  if (s.rank + 2 > DPC_MAX_RANK) return fail(g, node, d, "result rank above dpc's limit");
  if (!a1) s.d[s.rank++] = m;
  if (!b1) s.d[s.rank++] = n;
  set_out(g, node, 0, IN(0)->dtype, &s);
  return DPC_OK;
}

/* all_reduce: as many outputs as inputs, every input the same float type. */
dpc_status dpc_rule_all_reduce(dpc_graph *g, uint32_t node, dpc_diag *d) {
  uint32_t nout = g->nodes[node].n_out;
  dpc_status st;
  if (nout != NIN)
    return fail(g, node, d, "all_reduce has %u inputs but %u outputs: one output per input", NIN,
                nout);
  if ((st = need_float(g, node, 0, d))) return st;
  for (uint32_t i = 1; i < NIN; i++) {
    if ((st = same_type(g, node, 0, i, d))) return st;
  }
  char op[16];
  dpc_attrs_str(dpc_node_attrs(g, node), "op", op, sizeof op);
  if (strcmp(op, "mean") && strcmp(op, "sum"))
    return fail(g, node, d, "all_reduce op is mean or sum, not '%s'", op);
  for (uint32_t k = 0; k < nout; k++) set_out(g, node, k, IN(0)->dtype, &IN(0)->shape);
  return DPC_OK;
}
