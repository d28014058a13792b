/*
 * lower_layout.c — LLVM IR for layout ops: transpose, reshape, flatten, concat, split, slice,
 * gather, and the gradients slice_grad (a scatter into zeros) and gather_grad (the one that adds).
 *
 * These ops move elements without looking at them, so every element is copied as the integer
 * type of its width (i8, i16, i32, i64): the bits arrive exactly whatever the dtype (bf16, f16,
 * NaN payloads, -0), and an f32 and an i32 transpose of one shape hash to one compiled kernel.
 * Only gather_grad computes: it sums in double and rounds once, as the reference does.
 *
 * A copy is a walk: dimensions with, for the destination and the source, a stride and a base
 * offset, all constants taken from the plan's concrete shapes. Dimensions of size 1 are dropped
 * and neighbours that stay contiguous in both operands merge, so the innermost loop runs over the
 * longest run contiguous in both (reshape and flatten are a single loop; a slice that keeps whole
 * rows copies whole rows), which LLVM turns into memcpy-like vector loops. A transpose, whose
 * innermost output dimension reads the input with a stride, is walked in TILE x TILE tiles
 * instead, so that both sides' cache lines are used whole while they are in cache. The outermost
 * loop is the parallel one: the kernel does its iterations [begin, end), k->total is its trip
 * count, and each iteration writes a part of the output no other iteration writes.
 *
 * gather and gather_grad check every index before anything is written, as the reference does; on
 * a bad one the kernel returns nonzero at once and the runtime reruns the reference kernel for the
 * message. Kernels never allocate: gather_grad's double accumulators are a fixed stack array.
 */
#include "codegen/cpu/cg.h"
#include "ir/rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GG_CHUNK 512 /* columns of a gather_grad row summed at once: 4 KiB of doubles */
#define TILE     32  /* elements a side of the tiles a transpose is copied in */

/* ---- small emitters -------------------------------------------------------------------------- */

/* A dtype whose stored type is the integer of t's width, to move t's elements as bits. */
static dpc_dtype bits_dtype(dpc_dtype t) {
  switch (dpc_dtype_size(t)) {
  case 1: return DPC_BOOL; /* i8 */
  case 2: return DPC_BF16; /* i16; only its stored type is used, never cg_load's conversion */
  case 4: return DPC_I32;
  default: return DPC_I64;
  }
}

/* i64 arithmetic with a constant, folded where a is a constant too and left out where it would
 * do nothing: the emitted text is also what the kernel cache hashes, so it stays canonical. */
static bool literal(cg_val a, int64_t *v) {
  if (a.s[0] == '%') return false;
  *v = strtoll(a.s, NULL, 10);
  return true;
}

static cg_val add_c(cg_fn *f, cg_val a, int64_t c) {
  int64_t v;
  if (literal(a, &v)) return cg_const_i64(v + c);
  return c ? cg_add(f, a, cg_const_i64(c)) : a;
}

static cg_val add(cg_fn *f, cg_val a, cg_val b) {
  int64_t v;
  if (literal(b, &v)) return add_c(f, a, v);
  if (literal(a, &v)) return add_c(f, b, v);
  return cg_add(f, a, b);
}

static cg_val mul_c(cg_fn *f, cg_val a, int64_t c) {
  int64_t v;
  if (literal(a, &v)) return cg_const_i64(v * c);
  return c == 1 ? a : cg_mul(f, a, cg_const_i64(c));
}

/* dst[di] = src[si], elements of integer type ty: a plain move of the bits. */
static void move(cg_fn *f, const char *ty, cg_val dst, cg_val di, cg_val src, cg_val si) {
  cg_val ps = cg_tmp(f), v = cg_tmp(f), pd = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", ps.s, ty, ty, src.s, si.s);
  cg_line(f, "%s = load %s, %s* %s", v.s, ty, ty, ps.s);
  cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", pd.s, ty, ty, dst.s, di.s);
  cg_line(f, "store %s %s, %s* %s", ty, v.s, ty, pd.s);
}

/* `if (cond) {` ... if_end: blocks B<id>.then and B<id>.end (emit.c's loops use L<id>). */
static uint32_t if_begin(cg_fn *f, cg_val cond) {
  uint32_t id = cg_label(f);
  cg_line(f, "br i1 %s, label %%B%u.then, label %%B%u.end", cond.s, id, id);
  dpc_buf_printf(&f->body, "B%u.then:\n", id);
  return id;
}

static void if_end(cg_fn *f, uint32_t id) {
  cg_line(f, "br label %%B%u.end", id);
  dpc_buf_printf(&f->body, "B%u.end:\n", id);
}

/* (r / n, r % n) for an index r >= 0 of a loop over a [m, n] grid, without dividing where one
 * of the two sides is a single row or column. */
static void split_index(cg_fn *f, cg_val r, int64_t m, int64_t n, cg_val *q, cg_val *rem) {
  *q = n == 1 ? r : m == 1 ? cg_const_i64(0) : cg_op2(f, "udiv", "i64", r, cg_const_i64(n));
  *rem = n == 1 ? cg_const_i64(0) : m == 1 ? r : cg_op2(f, "urem", "i64", r, cg_const_i64(n));
}

/* ---- walks ----------------------------------------------------------------------------------- */

typedef struct walk {
  uint32_t rank; /* after merging, at least 1 */
  bool empty;    /* some dimension is 0: there is nothing to copy */
  int64_t dims[DPC_MAX_RANK];
  int64_t st[2][DPC_MAX_RANK]; /* element strides: [0] the destination, [1] the source */
} walk;

/* A walk over `dims` with the destination and source strides given, merged: dimension i joins
 * the one before it when both operands continue contiguously across the boundary. */
static void walk_init(walk *w, uint32_t rank, const int64_t *dims, const int64_t *dst,
                      const int64_t *src) {
  memset(w, 0, sizeof *w);
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] == 0) w->empty = true;
    if (dims[i] == 1) continue; /* its index is always 0: no stride to follow */
    uint32_t m = w->rank;
    if (m && dst[i] * dims[i] == w->st[0][m - 1] && src[i] * dims[i] == w->st[1][m - 1]) {
      w->dims[m - 1] *= dims[i];
      w->st[0][m - 1] = dst[i];
      w->st[1][m - 1] = src[i];
    } else {
      w->dims[m] = dims[i];
      w->st[0][m] = dst[i];
      w->st[1][m] = src[i];
      w->rank++;
    }
  }
  if (w->rank == 0) w->rank = 1, w->dims[0] = 1; /* one element: strides stay 0 */
}

/* A walk over one contiguous run of n elements. */
static walk walk_run(int64_t n) {
  walk w = {.rank = 1, .empty = n == 0, .dims = {n}, .st = {{1}, {1}}};
  return w;
}

/* The walk's loops, moving one element in the innermost. The outermost runs over [lo, hi);
 * offsets start at dbase and sbase. */
static void emit_walk(cg_fn *f, const walk *w, const char *ty, cg_val dst, cg_val dbase, cg_val src,
                      cg_val sbase, cg_val lo, cg_val hi) {
  cg_loop loops[DPC_MAX_RANK];
  cg_val off[2] = {dbase, sbase};
  for (uint32_t l = 0; l < w->rank; l++) {
    loops[l] = cg_loop_begin(f, l ? cg_const_i64(0) : lo, l ? cg_const_i64(w->dims[l]) : hi);
    for (int k = 0; k < 2; k++)
      if (w->st[k][l]) off[k] = add(f, off[k], mul_c(f, loops[l].i, w->st[k][l]));
  }
  move(f, ty, dst, off[0], src, off[1]);
  for (uint32_t l = w->rank; l-- > 0;) cg_loop_end(f, loops[l]);
}

/* The dimension to tile a walk along with its innermost one, or -1. When the innermost
 * dimension reads the source with a stride (a transpose) while another reads it contiguously,
 * a plain walk touches a new source cache line for every element and has left it before its
 * neighbours are needed; walking TILE x TILE tiles of the two keeps both sides' lines in cache. */
static int tile_dim(const walk *w) {
  uint32_t a = w->rank - 1;
  if (w->rank < 2 || w->st[1][a] == 1 || w->dims[a] < TILE) return -1;
  for (uint32_t b = 0; b < a; b++)
    if (w->st[1][b] == 1 && w->dims[b] >= TILE) return (int)b;
  return -1;
}

/* One loop over the tiles of a dimension of size n: sets *lo and *hi to the tile's bounds. */
static cg_loop tile_loop(cg_fn *f, cg_val lo_it, cg_val hi_it, int64_t n, cg_val *lo, cg_val *hi) {
  cg_loop l = cg_loop_begin(f, lo_it, hi_it);
  *lo = mul_c(f, l.i, TILE);
  cg_val end = add_c(f, *lo, TILE), over = cg_op2(f, "icmp sgt", "i64", end, cg_const_i64(n));
  *hi = cg_tmp(f);
  cg_line(f, "%s = select i1 %s, i64 %lld, i64 %s", hi->s, over.s, (long long)n, end.s);
  return l;
}

/* A walk tiled along its innermost dimension a and dimension b (tile_dim): the other
 * dimensions in order with b's loop running over tiles, then a's tiles, then the two within the
 * tile. The outermost loop runs over [begin, end) and *total is its trip count: dimension 0, or
 * when that is b, whichever of the two tile loops has more trips, to split that many ways. */
static void emit_tiled(cg_fn *f, const walk *w, uint32_t b, const char *ty, cg_val dst, cg_val src,
                       int64_t sbase, int64_t *total) {
  enum { TILES_B = -1, TILES_A = -2 };
  uint32_t a = w->rank - 1, nl = 0, no = 0;
  int64_t ntiles[2] = {(w->dims[b] + TILE - 1) / TILE, (w->dims[a] + TILE - 1) / TILE};
  int order[DPC_MAX_RANK + 1];
  if (b == 0 && ntiles[1] > ntiles[0]) order[no++] = TILES_A;
  for (uint32_t l = 0; l < a; l++) order[no++] = l == b ? TILES_B : (int)l;
  if (no == a) order[no++] = TILES_A;
  cg_loop loops[DPC_MAX_RANK + 2];
  cg_val off[2] = {cg_const_i64(0), cg_const_i64(sbase)}, tlo[2], thi[2];
  for (uint32_t j = 0; j < no; j++) {
    int which = order[j] == TILES_B ? 0 : order[j] == TILES_A ? 1 : -1;
    int64_t trips = which >= 0 ? ntiles[which] : w->dims[order[j]];
    cg_val lo = j ? cg_const_i64(0) : (cg_val){"%begin"};
    cg_val hi = j ? cg_const_i64(trips) : (cg_val){"%end"};
    if (!j) *total = trips;
    if (which >= 0) {
      loops[nl++] = tile_loop(f, lo, hi, w->dims[which ? a : b], &tlo[which], &thi[which]);
      continue;
    }
    loops[nl++] = cg_loop_begin(f, lo, hi);
    for (int k = 0; k < 2; k++)
      if (w->st[k][order[j]])
        off[k] = add(f, off[k], mul_c(f, loops[nl - 1].i, w->st[k][order[j]]));
  }
  /* within the tile: b outside, a (contiguous in the destination) innermost */
  for (int t = 0; t < 2; t++) {
    uint32_t dim = t ? a : b;
    loops[nl++] = cg_loop_begin(f, tlo[t], thi[t]);
    for (int k = 0; k < 2; k++) off[k] = add(f, off[k], mul_c(f, loops[nl - 1].i, w->st[k][dim]));
  }
  move(f, ty, dst, off[0], src, off[1]);
  while (nl-- > 0) cg_loop_end(f, loops[nl]);
}

/* The whole kernel as one walk from input 0 (from offset sbase) to output 0, parallel over the
 * walk's outermost dimension (or tiles of it). */
static void copy_kernel(cg_kernel *k, const walk *w, int64_t sbase) {
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_node *n = &g->nodes[f->node];
  k->total = w->empty ? 0 : w->dims[0];
  /* an empty result never touches memory: sbase may then lie outside the source */
  if (w->empty) return;
  dpc_dtype bt = bits_dtype(g->values[n->out].dtype);
  cg_val src = cg_arg_ptr(f, 0, bt), dst = cg_arg_ptr(f, n->n_in, bt);
  int b = tile_dim(w);
  if (b >= 0) {
    emit_tiled(f, w, (uint32_t)b, cg_store_type(bt), dst, src, sbase, &k->total);
    return;
  }
  emit_walk(f, w, cg_store_type(bt), dst, cg_const_i64(0), src, cg_const_i64(sbase),
            (cg_val){"%begin"}, (cg_val){"%end"});
}

static int64_t prod(const dpc_shape *s, uint32_t lo, uint32_t hi) {
  int64_t n = 1;
  for (uint32_t i = lo; i < hi; i++) n *= s->d[i];
  return n;
}

/* The node's `axis` attribute, made non-negative (the shape rule already accepted it). */
static uint32_t node_axis(const dpc_graph *g, uint32_t node, uint32_t rank) {
  uint32_t ax = 0;
  bool ok = dpc_axis_norm(dpc_attrs_int(dpc_node_attrs(g, node), "axis"), rank, &ax);
  DPC_ASSERT(ok);
  return ax;
}

static const dpc_value *in_val(const dpc_graph *g, uint32_t node, uint32_t i) {
  return &g->values[g->ids[g->nodes[node].in + i]];
}

/* ---- transpose, reshape, flatten ------------------------------------------------------------- */

static dpc_status lower_transpose(cg_kernel *k, dpc_diag *d) {
  (void)d;
  const dpc_graph *g = k->f->g;
  uint32_t node = k->f->node;
  const dpc_shape *xs = &in_val(g, node, 0)->shape, *ys = &g->values[g->nodes[node].out].shape;
  dpc_attrs at = dpc_node_attrs(g, node);
  uint32_t rank = xs->rank;
  int64_t perm[DPC_MAX_RANK], xst[DPC_MAX_RANK], yst[DPC_MAX_RANK], src[DPC_MAX_RANK];
  if (dpc_attrs_get(at, "perm")) {
    uint32_t np = dpc_attrs_ints(at, "perm", perm, DPC_MAX_RANK, 0);
    DPC_ASSERT(np == rank);
  } else {
    for (uint32_t i = 0; i < rank; i++) perm[i] = rank - 1 - i;
  }
  dpc_shape_strides(xs, xst);
  dpc_shape_strides(ys, yst);
  /* output dimension i walks input dimension perm[i] */
  for (uint32_t i = 0; i < rank; i++) src[i] = xst[perm[i]];
  walk w;
  walk_init(&w, rank, ys->d, yst, src);
  copy_kernel(k, &w, 0);
  return DPC_OK;
}

/* Row-major order is unchanged by reshape and flatten: one loop over all the elements. */
static dpc_status lower_reshape(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_node *n = &g->nodes[f->node];
  int64_t count = dpc_shape_numel(&g->values[n->out].shape);
  k->total = count;
  if (count == 0) return DPC_OK;
  dpc_dtype bt = bits_dtype(g->values[n->out].dtype);
  const char *ty = cg_store_type(bt);
  cg_val src = cg_arg_ptr(f, 0, bt), dst = cg_arg_ptr(f, 1, bt);
  /* the reference allows the executor to run a reshape in place: then nothing has to move */
  cg_val moved = cg_tmp(f);
  cg_line(f, "%s = icmp ne %s* %s, %s", moved.s, ty, src.s, dst.s);
  uint32_t b = if_begin(f, moved);
  walk w = walk_run(count);
  emit_walk(f, &w, ty, dst, cg_const_i64(0), src, cg_const_i64(0), (cg_val){"%begin"},
            (cg_val){"%end"});
  if_end(f, b);
  return DPC_OK;
}

/* ---- concat, split --------------------------------------------------------------------------- */

/* Both see the whole tensor (concat's output, split's input) as [outer, axis, inner]: part j (an
 * input of concat, an output of split) is, per outer index, one run of its size on the axis
 * times inner elements, at offset pos_j within the whole tensor's row of wrun elements. */
typedef struct parts {
  bool concat;
  uint32_t n;
  int64_t outer, inner, wrun;
  uint32_t ax;
} parts;

/* Part j's run (its elements per outer index), and in *arg its index in args. */
static int64_t part_run(const cg_fn *f, const parts *p, uint32_t j, uint32_t *arg) {
  const dpc_graph *g = f->g;
  const dpc_node *n = &g->nodes[f->node];
  const dpc_value *v = p->concat ? in_val(g, f->node, j) : &g->values[n->out + j];
  *arg = p->concat ? j : n->n_in + j;
  return v->shape.d[p->ax] * p->inner;
}

/* Copy the runs of part j for outer indices [0, rows) from row `o` on (o is an i64 value). */
static void emit_part(cg_fn *f, const parts *p, const char *ty, cg_val whole, cg_val piece,
                      int64_t run, int64_t pos, cg_val o, int64_t rows) {
  int64_t dims[2] = {rows, run}, wst[2] = {p->wrun, 1}, pst[2] = {run, 1};
  walk w;
  /* concat writes the whole tensor from the piece, split the other way round */
  walk_init(&w, 2, dims, p->concat ? wst : pst, p->concat ? pst : wst);
  cg_val wbase = add_c(f, mul_c(f, o, p->wrun), pos), pbase = mul_c(f, o, run);
  cg_val dst = p->concat ? whole : piece, src = p->concat ? piece : whole;
  emit_walk(f, &w, ty, dst, p->concat ? wbase : pbase, src, p->concat ? pbase : wbase,
            cg_const_i64(0), cg_const_i64(w.dims[0]));
}

static dpc_status lower_concat_split(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_node *n = &g->nodes[f->node];
  parts p = {.concat = n->op == DPC_OP_CONCAT};
  const dpc_value *whole = p.concat ? &g->values[n->out] : in_val(g, f->node, 0);
  uint32_t rank = whole->shape.rank;
  p.n = p.concat ? n->n_in : n->n_out;
  p.ax = node_axis(g, f->node, rank);
  p.outer = prod(&whole->shape, 0, p.ax);
  p.inner = prod(&whole->shape, p.ax + 1, rank);
  p.wrun = whole->shape.d[p.ax] * p.inner;
  k->total = 0;
  if (p.outer == 0 || p.wrun == 0) return DPC_OK;
  dpc_dtype bt = bits_dtype(whole->dtype);
  const char *ty = cg_store_type(bt);
  cg_val wptr = cg_arg_ptr(f, p.concat ? n->n_in : 0, bt);
  if (p.outer >= p.n) {
    /* parallel over outer indices; each iteration moves every part's run for its index */
    k->total = p.outer;
    cg_loop lo = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
    int64_t pos = 0;
    for (uint32_t j = 0; j < p.n; j++) {
      uint32_t arg;
      int64_t run = part_run(f, &p, j, &arg);
      if (run) {
        /* the piece's pointer is loaded where it is used; O3 hoists it out of the loop */
        cg_val piece = cg_arg_ptr(f, arg, bt);
        emit_part(f, &p, ty, wptr, piece, run, pos, lo.i, 1);
      }
      pos += run;
    }
    cg_loop_end(f, lo);
    return DPC_OK;
  }
  /* Fewer outer indices than parts (concat or split along axis 0, say): parallel over the parts
   * instead, each iteration moving one part whole, picked by a switch. */
  k->total = p.n;
  cg_loop lp = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  uint32_t sw = cg_label(f);
  /* written piecewise: the case list can be longer than one cg_line */
  dpc_buf_printf(&f->body, "  switch i64 %s, label %%B%u.end [", lp.i.s, sw);
  for (uint32_t j = 0; j < p.n; j++) {
    uint32_t arg;
    if (part_run(f, &p, j, &arg)) dpc_buf_printf(&f->body, " i64 %u, label %%B%u.c%u", j, sw, j);
  }
  dpc_buf_puts(&f->body, " ]\n");
  int64_t pos = 0;
  for (uint32_t j = 0; j < p.n; j++) {
    uint32_t arg;
    int64_t run = part_run(f, &p, j, &arg);
    if (run) {
      dpc_buf_printf(&f->body, "B%u.c%u:\n", sw, j);
      cg_val piece = cg_arg_ptr(f, arg, bt);
      emit_part(f, &p, ty, wptr, piece, run, pos, cg_const_i64(0), p.outer);
      cg_line(f, "br label %%B%u.end", sw);
    }
    pos += run;
  }
  dpc_buf_printf(&f->body, "B%u.end:\n", sw);
  cg_loop_end(f, lp);
  return DPC_OK;
}

/* ---- slice, slice_grad ----------------------------------------------------------------------- */

/* The slice of a tensor shaped xs under the node's starts/ends/axes/steps: per dimension the
 * first index taken, the step and the count (as slice_iter in ref_layout.c, with the same
 * dpc_slice_axis as the shape rule). Dimensions not listed are taken whole. */
static void slice_geometry(const dpc_graph *g, uint32_t node, const dpc_shape *xs, int64_t *first,
                           int64_t *step, int64_t *count) {
  dpc_attrs at = dpc_node_attrs(g, node);
  uint32_t rank = xs->rank;
  int64_t st[DPC_MAX_RANK], en[DPC_MAX_RANK], ax[DPC_MAX_RANK], sp[DPC_MAX_RANK];
  uint32_t n = dpc_attrs_ints(at, "starts", st, DPC_MAX_RANK, 0);
  DPC_ASSERT(n <= rank && dpc_attrs_ints(at, "ends", en, DPC_MAX_RANK, 0) == n);
  if (dpc_attrs_get(at, "axes"))
    dpc_attrs_ints(at, "axes", ax, DPC_MAX_RANK, 0);
  else
    for (uint32_t i = 0; i < n; i++) ax[i] = i;
  if (dpc_attrs_get(at, "steps"))
    dpc_attrs_ints(at, "steps", sp, DPC_MAX_RANK, 0);
  else
    for (uint32_t i = 0; i < n; i++) sp[i] = 1;
  for (uint32_t k = 0; k < rank; k++) first[k] = 0, step[k] = 1, count[k] = xs->d[k];
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k = 0;
    bool ok = dpc_axis_norm(ax[i], rank, &k);
    DPC_ASSERT(ok);
    dpc_slice_axis(xs->d[k], st[i], en[i], sp[i], &first[k], &count[k]);
    step[k] = sp[i];
  }
}

static dpc_status lower_slice(cg_kernel *k, dpc_diag *d) {
  (void)d;
  const dpc_graph *g = k->f->g;
  uint32_t node = k->f->node;
  const dpc_shape *xs = &in_val(g, node, 0)->shape, *ys = &g->values[g->nodes[node].out].shape;
  int64_t first[DPC_MAX_RANK], step[DPC_MAX_RANK], count[DPC_MAX_RANK];
  int64_t xst[DPC_MAX_RANK], yst[DPC_MAX_RANK], src[DPC_MAX_RANK], base = 0;
  slice_geometry(g, node, xs, first, step, count);
  dpc_shape_strides(xs, xst);
  dpc_shape_strides(ys, yst);
  for (uint32_t i = 0; i < xs->rank; i++) {
    DPC_ASSERT(count[i] == ys->d[i]);
    src[i] = step[i] * xst[i]; /* negative for a reversed axis */
    base += first[i] * xst[i];
  }
  walk w;
  walk_init(&w, xs->rank, ys->d, yst, src);
  copy_kernel(k, &w, base);
  return DPC_OK;
}

/* slice_grad(dy, x): dx shaped like x, zero but for the slice, which is dy. The parallel loop
 * runs over rows of dx: dimensions 0..p, where p is the first dimension the slice does not take
 * whole (the last if none), so that every iteration zeroes and fills only its own row. Row o is
 * index i = o % D_p on dimension p, under leading index q = o / D_p that the slice keeps whole;
 * when i is in the slice (i = first + j * step, 0 <= j < count) it receives row q * count_p + j
 * of dy through the strides of the remaining dimensions. */
static dpc_status lower_slice_grad(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_node *n = &g->nodes[f->node];
  const dpc_value *dy = in_val(g, f->node, 0), *dx = &g->values[n->out];
  dpc_shape xs = dx->shape;
  if (xs.rank == 0) xs.rank = 1, xs.d[0] = 1; /* a scalar is one row of one element */
  uint32_t rank = xs.rank;
  int64_t first[DPC_MAX_RANK], step[DPC_MAX_RANK], count[DPC_MAX_RANK];
  slice_geometry(g, f->node, &xs, first, step, count);
  k->total = 0;
  if (dpc_shape_numel(&xs) == 0) return DPC_OK;
  bool any = dpc_shape_numel(&dy->shape) > 0;
  uint32_t p = 0;
  while (p + 1 < rank && first[p] == 0 && step[p] == 1 && count[p] == xs.d[p]) p++;
  bool rest_whole = true; /* the slice takes every dimension after p whole */
  int64_t xst[DPC_MAX_RANK], dst[DPC_MAX_RANK], yst[DPC_MAX_RANK], rest_base = 0;
  dpc_shape_strides(&xs, xst);
  yst[rank - 1] = 1;
  for (uint32_t i = rank - 1; i-- > 0;) yst[i] = yst[i + 1] * count[i + 1];
  for (uint32_t i = p + 1; i < rank; i++) {
    rest_whole = rest_whole && first[i] == 0 && step[i] == 1 && count[i] == xs.d[i];
    dst[i] = step[i] * xst[i];
    rest_base += first[i] * xst[i];
  }
  int64_t rows = prod(&xs, 0, p + 1), lead = rows / xs.d[p], blk = xst[p];
  k->total = rows;
  dpc_dtype bt = bits_dtype(dx->dtype);
  const char *ty = cg_store_type(bt);
  cg_val src = cg_arg_ptr(f, 0, bt), out = cg_arg_ptr(f, n->n_in, bt);
  cg_loop lo = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val q, i, at = mul_c(f, lo.i, blk), in = {"false"}, j = {"0"};
  split_index(f, lo.i, lead, xs.d[p], &q, &i);
  if (any) {
    /* j = (i - first) / step when that divides exactly and lands in [0, count) */
    cg_val t = add_c(f, i, -first[p]), sp = cg_const_i64(step[p]);
    j = cg_op2(f, "sdiv", "i64", t, sp);
    cg_val exact = cg_op2(f, "icmp eq", "i64", cg_op2(f, "srem", "i64", t, sp), cg_const_i64(0));
    cg_val ge = cg_op2(f, "icmp sge", "i64", j, cg_const_i64(0));
    cg_val lt = cg_op2(f, "icmp slt", "i64", j, cg_const_i64(count[p]));
    in = cg_op2(f, "and", "i1", exact, cg_op2(f, "and", "i1", ge, lt));
  }
  /* zero the row unless dy is about to overwrite all of it */
  cg_val zero = rest_whole ? cg_op2(f, "xor", "i1", in, (cg_val){"true"}) : (cg_val){"true"};
  uint32_t bz = if_begin(f, zero);
  cg_loop lz = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(blk));
  cg_val pz = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", pz.s, ty, ty, out.s,
          add(f, at, lz.i).s);
  cg_line(f, "store %s 0, %s* %s", ty, ty, pz.s);
  cg_loop_end(f, lz);
  if_end(f, bz);
  if (any) {
    uint32_t bi = if_begin(f, in);
    cg_val row = mul_c(f, add(f, mul_c(f, q, count[p]), j), yst[p]);
    walk w;
    walk_init(&w, rank - p - 1, count + p + 1, dst + p + 1, yst + p + 1);
    emit_walk(f, &w, ty, out, add_c(f, at, rest_base), src, row, cg_const_i64(0),
              cg_const_i64(w.dims[0]));
    if_end(f, bi);
  }
  cg_loop_end(f, lo);
  return DPC_OK;
}

/* ---- gather, gather_grad --------------------------------------------------------------------- */

/* Index j of an i32 or i64 tensor, as i64. */
static cg_val load_index(cg_fn *f, cg_val ptr, dpc_dtype t, cg_val j) {
  cg_val v = cg_load(f, ptr, t, j);
  if (t == DPC_I64) return v;
  cg_val w = cg_tmp(f);
  cg_line(f, "%s = sext i32 %s to i64", w.s, v.s);
  return w;
}

/* Every index in [-dim, dim), all checked before anything is written (a bad one is reported
 * even when the result is empty). Opens `if (no bad index) {`: the caller closes it with
 * if_end, as the last thing in the kernel, so a bad index returns at once. */
static uint32_t check_indices(cg_fn *f, cg_val idx, dpc_dtype it, int64_t ni, int64_t dim) {
  if (ni > 0) {
    cg_loop l = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(ni));
    cg_val v = load_index(f, idx, it, l.i);
    cg_val below = cg_op2(f, "icmp slt", "i64", v, cg_const_i64(-dim));
    cg_val above = cg_op2(f, "icmp sge", "i64", v, cg_const_i64(dim));
    cg_fail_if(f, cg_op2(f, "or", "i1", below, above));
    cg_loop_end(f, l);
  }
  cg_val st = cg_tmp(f);
  cg_line(f, "%s = load i32, i32* %%status", st.s);
  return if_begin(f, cg_op2(f, "icmp eq", "i32", st, (cg_val){"0"}));
}

/* gather(data, indices): y is [outer, ni, inner] from data [outer, dim, inner]. The parallel
 * loop runs over the outer * ni rows of y, each one contiguous run of inner elements. */
static dpc_status lower_gather(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_value *x = in_val(g, f->node, 0), *iv = in_val(g, f->node, 1);
  uint32_t rank = x->shape.rank, ax = node_axis(g, f->node, rank);
  int64_t outer = prod(&x->shape, 0, ax), dim = x->shape.d[ax];
  int64_t inner = prod(&x->shape, ax + 1, rank), ni = dpc_shape_numel(&iv->shape);
  dpc_dtype bt = bits_dtype(x->dtype);
  const char *ty = cg_store_type(bt);
  cg_val idx = cg_arg_ptr(f, 1, iv->dtype);
  uint32_t ok = check_indices(f, idx, iv->dtype, ni, dim);
  int64_t rows = outer * ni;
  /* an empty result still runs once, for the check */
  k->total = 1;
  if (rows > 0 && inner > 0) {
    k->total = rows;
    cg_val src = cg_arg_ptr(f, 0, bt), dst = cg_arg_ptr(f, 2, bt);
    cg_loop lr = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
    cg_val o, j;
    split_index(f, lr.i, outer, ni, &o, &j);
    cg_val kv = load_index(f, idx, iv->dtype, j);
    cg_val neg = cg_op2(f, "icmp slt", "i64", kv, cg_const_i64(0)), up = add_c(f, kv, dim);
    cg_val kw = cg_tmp(f);
    cg_line(f, "%s = select i1 %s, i64 %s, i64 %s", kw.s, neg.s, up.s, kv.s);
    cg_val from = mul_c(f, add(f, mul_c(f, o, dim), kw), inner);
    walk w = walk_run(inner);
    emit_walk(f, &w, ty, dst, mul_c(f, lr.i, inner), src, from, cg_const_i64(0),
              cg_const_i64(inner));
    cg_loop_end(f, lr);
  }
  if_end(f, ok);
  return DPC_OK;
}

/* gather_grad(dy, data, indices): row k of ddata (per outer index) is the sum of the rows of dy
 * whose index wraps to k. The parallel loop runs over ddata's outer * dim rows and each row
 * gathers its sum, so repeated indices never race and nothing has to be zeroed first. The sum is
 * in double, in the order of the indices, rounded once: the reference's arithmetic exactly. Wide
 * rows are summed GG_CHUNK columns at a time in a stack array. */
static dpc_status lower_gather_grad(cg_kernel *k, dpc_diag *d) {
  (void)d;
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_value *dy = in_val(g, f->node, 0), *x = in_val(g, f->node, 1);
  const dpc_value *iv = in_val(g, f->node, 2);
  uint32_t rank = x->shape.rank, ax = node_axis(g, f->node, rank);
  int64_t outer = prod(&x->shape, 0, ax), dim = x->shape.d[ax];
  int64_t inner = prod(&x->shape, ax + 1, rank), ni = dpc_shape_numel(&iv->shape);
  dpc_dtype t = dy->dtype;
  const char *ct = cg_calc_type(t);
  bool widen = strcmp(ct, "double") != 0;
  cg_val idx = cg_arg_ptr(f, 2, iv->dtype);
  uint32_t ok = check_indices(f, idx, iv->dtype, ni, dim);
  int64_t rows = outer * dim;
  k->total = 1;
  if (rows > 0 && inner > 0) {
    k->total = rows;
    int64_t chunk = inner < GG_CHUNK ? inner : GG_CHUNK;
    dpc_buf_printf(&f->head, "  %%gacc = alloca [%lld x double], align 64\n", (long long)chunk);
    cg_val src = cg_arg_ptr(f, 0, t), dst = cg_arg_ptr(f, 3, t);
    cg_loop lr = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
    cg_val o, kk;
    split_index(f, lr.i, outer, dim, &o, &kk);
    cg_val kneg = add_c(f, kk, -dim); /* the negative index that wraps to kk */
    cg_val dyrow0 = mul_c(f, o, ni), ddrow = mul_c(f, lr.i, inner);
    /* columns [t0, t0 + tn) of the row: one chunk, or a loop over chunks */
    cg_loop lc = {0, {{0}}};
    cg_val t0 = cg_const_i64(0), tn = cg_const_i64(chunk);
    if (inner > chunk) {
      lc = cg_loop_begin(f, cg_const_i64(0), cg_const_i64((inner + chunk - 1) / chunk));
      t0 = mul_c(f, lc.i, chunk);
      cg_val left = cg_op2(f, "sub", "i64", cg_const_i64(inner), t0);
      cg_val small = cg_op2(f, "icmp slt", "i64", left, cg_const_i64(chunk));
      tn = cg_tmp(f);
      cg_line(f, "%s = select i1 %s, i64 %s, i64 %lld", tn.s, small.s, left.s, (long long)chunk);
    }
    char accty[48];
    snprintf(accty, sizeof accty, "[%lld x double]", (long long)chunk);
    cg_val zero = cg_const(DPC_F64, 0);
    /* acc[0, tn) = 0 */
    cg_loop lz = cg_loop_begin(f, cg_const_i64(0), tn);
    cg_val pz = cg_tmp(f);
    cg_line(f, "%s = getelementptr inbounds %s, %s* %%gacc, i64 0, i64 %s", pz.s, accty, accty,
            lz.i.s);
    cg_line(f, "store double %s, double* %s", zero.s, pz.s);
    cg_loop_end(f, lz);
    /* acc += each row of dy whose index is kk or kk - dim, in index order */
    cg_loop lj = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(ni));
    cg_val kv = load_index(f, idx, iv->dtype, lj.i);
    cg_val hit = cg_op2(f, "or", "i1", cg_op2(f, "icmp eq", "i64", kv, kk),
                        cg_op2(f, "icmp eq", "i64", kv, kneg));
    uint32_t bh = if_begin(f, hit);
    cg_val from = add(f, mul_c(f, add(f, dyrow0, lj.i), inner), t0);
    cg_loop la = cg_loop_begin(f, cg_const_i64(0), tn);
    cg_val v = cg_load(f, src, t, add(f, from, la.i));
    if (widen) {
      cg_val w = cg_tmp(f);
      cg_line(f, "%s = fpext float %s to double", w.s, v.s);
      v = w;
    }
    cg_val pa = cg_tmp(f), a = cg_tmp(f);
    cg_line(f, "%s = getelementptr inbounds %s, %s* %%gacc, i64 0, i64 %s", pa.s, accty, accty,
            la.i.s);
    cg_line(f, "%s = load double, double* %s", a.s, pa.s);
    cg_line(f, "store double %s, double* %s", cg_op2(f, "fadd", "double", a, v).s, pa.s);
    cg_loop_end(f, la);
    if_end(f, bh);
    cg_loop_end(f, lj);
    /* the row's chunk, rounded once to the dtype (double -> float -> f16/bf16, as dpc_tstore) */
    cg_loop ls = cg_loop_begin(f, cg_const_i64(0), tn);
    cg_val ps = cg_tmp(f), s = cg_tmp(f);
    cg_line(f, "%s = getelementptr inbounds %s, %s* %%gacc, i64 0, i64 %s", ps.s, accty, accty,
            ls.i.s);
    cg_line(f, "%s = load double, double* %s", s.s, ps.s);
    if (widen) {
      cg_val r = cg_tmp(f);
      cg_line(f, "%s = fptrunc double %s to float", r.s, s.s);
      s = r;
    }
    cg_store(f, dst, t, add(f, add(f, ddrow, t0), ls.i), s);
    cg_loop_end(f, ls);
    if (inner > chunk) cg_loop_end(f, lc);
    cg_loop_end(f, lr);
  }
  if_end(f, ok);
  return DPC_OK;
}

const cg_lower_fn cg_layout_table[DPC_OP_COUNT] = {
    [DPC_OP_TRANSPOSE] = lower_transpose,     [DPC_OP_RESHAPE] = lower_reshape,
    [DPC_OP_FLATTEN] = lower_reshape,         [DPC_OP_CONCAT] = lower_concat_split,
    [DPC_OP_SPLIT] = lower_concat_split,      [DPC_OP_SLICE] = lower_slice,
    [DPC_OP_GATHER] = lower_gather,           [DPC_OP_SLICE_GRAD] = lower_slice_grad,
    [DPC_OP_GATHER_GRAD] = lower_gather_grad,
};
