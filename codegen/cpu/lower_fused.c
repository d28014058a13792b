/*
 * lower_fused.c — a fusion group (ir/fusion.h, formed by passes/fuse.c) as one kernel.
 *
 * Without an anchor the group is one loop nest over the root's shape, laid out like a single
 * elementwise op (cg_ew_layout) but with every outside input as an operand: each element loads
 * the inputs, runs the chain in registers and stores the root's value, so the intermediate
 * tensors never exist. With an anchor (matmul, conv2d) the anchor's own lowering writes its
 * result into the root's output and calls cg_epilogue_rows on each block of rows it finishes,
 * which runs the chain over those rows in place while they are still in cache. Where the chain
 * is short and simple (bias, ReLU, ReLU6), the GEMM instead hands each row of a finished
 * micro-tile to cg_epilogue_vec, which runs the chain on its vectors before they are stored.
 */
#include "codegen/cpu/cg.h"
#include "codegen/cpu/gemm.h"

#include <stdio.h>
#include <string.h>

uint32_t cg_out_arg(const cg_fn *f) {
  return f->grp ? f->grp->n_inputs : f->g->nodes[f->node].n_in;
}

/* One member of the chain on its operands' values: scalars (cg_ew_element), or vectors
 * (cg_epilogue_vec). */
typedef dpc_status (*chain_op)(cg_fn *f, const void *ctx, uint32_t node, const cg_val *x,
                               cg_val *out, dpc_diag *d);

static dpc_status scalar_op(cg_fn *f, const void *ctx, uint32_t node, const cg_val *x, cg_val *out,
                            dpc_diag *d) {
  (void)ctx;
  return cg_ew_element(f, node, x, out, d);
}

/* The chain, given each outside input's value (in argument order) and the anchor's value. */
static dpc_status eval_chain(cg_fn *f, const cg_val *ext, cg_val anchor_val, chain_op op,
                             const void *ctx, cg_val *out, dpc_diag *d) {
  const dpc_graph *g = f->g;
  const dpc_group *grp = f->grp;
  cg_val vals[64];
  if (grp->n_nodes > 64) return dpc_diag_fail(d, DPC_ERR_INTERNAL, "fusion group too large");
  /* outside inputs are numbered in the order dpc_group_get lists them: the anchor's first */
  uint32_t e = grp->anchor != DPC_NONE ? g->nodes[grp->anchor].n_in : 0;
  for (uint32_t i = 0; i < grp->n_nodes; i++) {
    const dpc_node *n = &g->nodes[grp->nodes[i]];
    cg_val x[3];
    for (uint32_t k = 0; k < n->n_in && k < 3; k++) {
      uint32_t v = g->ids[n->in + k], p = g->values[v].node;
      if (p == grp->anchor) {
        x[k] = anchor_val;
      } else if (g->nodes[p].fused == grp->root) {
        uint32_t j = 0;
        while (j < i && grp->nodes[j] != p) j++;
        x[k] = vals[j];
      } else {
        x[k] = ext[e++];
      }
    }
    dpc_status st = op(f, ctx, grp->nodes[i], x, &vals[i], d);
    if (st) return st;
  }
  *out = vals[grp->n_nodes - 1];
  return DPC_OK;
}

/* Broadcast strides of shape s against out, one per dimension of out, unmerged. */
static void broadcast_strides(const dpc_shape *out, const dpc_shape *s, int64_t *st) {
  int64_t acc = 1;
  for (uint32_t i = out->rank; i-- > 0;) {
    int64_t j = (int64_t)i - (int64_t)(out->rank - s->rank);
    int64_t dim = j >= 0 ? s->d[j] : 1;
    st[i] = dim == 1 && out->d[i] != 1 ? 0 : acc;
    acc *= dim;
  }
}

/* Dimensions from..rank of s aligned against out's, as a shape of their own. */
static dpc_shape tail_shape(const dpc_shape *out, const dpc_shape *s, uint32_t from) {
  dpc_shape t;
  memset(&t, 0, sizeof t);
  t.rank = out->rank - from;
  for (uint32_t i = from; i < out->rank; i++) {
    int64_t j = (int64_t)i - (int64_t)(out->rank - s->rank);
    t.d[i - from] = j >= 0 ? s->d[j] : 1;
  }
  return t;
}

/* Row `row` of the output seen as [P, Q] at axis: its index split into the dimensions up to
 * axis (a division each), and each outside input's offset there (full: broadcast strides). */
static void row_bases(cg_fn *f, const dpc_shape *out, uint32_t axis, cg_val row, uint32_t n_ext,
                      const int64_t (*full)[DPC_MAX_RANK], cg_val *base) {
  for (uint32_t i = 0; i < n_ext; i++) base[i] = cg_const_i64(0);
  cg_val rest = row;
  for (uint32_t a = axis + 1; a-- > 0;) {
    cg_val idx = rest;
    if (a > 0) {
      idx = cg_tmp(f);
      cg_line(f, "%s = urem i64 %s, %lld", idx.s, rest.s, (long long)out->d[a]);
      cg_val r2 = cg_tmp(f);
      cg_line(f, "%s = udiv i64 %s, %lld", r2.s, rest.s, (long long)out->d[a]);
      rest = r2;
    }
    for (uint32_t i = 0; i < n_ext; i++)
      if (full[i][a]) base[i] = cg_add(f, base[i], cg_mul(f, idx, cg_const_i64(full[i][a])));
  }
}

dpc_status cg_epilogue_block(cg_fn *f, uint32_t axis, cg_val lo, cg_val hi, cg_val col_lo,
                             cg_val col_hi, dpc_diag *d) {
  const dpc_group *grp = f->grp;
  if (!grp) return DPC_OK;
  const dpc_graph *g = f->g;
  const dpc_value *rv = &g->values[g->nodes[grp->root].out];
  const dpc_shape *out = &rv->shape;
  uint32_t first = grp->anchor != DPC_NONE ? g->nodes[grp->anchor].n_in : 0;
  uint32_t n_ext = grp->n_inputs - first;
  if (n_ext + 1 > CG_MAX_OPERANDS || out->rank == 0 || axis + 1 >= out->rank)
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "epilogue: too many inputs or a bad axis");
  /* per outside input: strides along every output dimension (0 where it broadcasts) */
  int64_t full[CG_MAX_OPERANDS][DPC_MAX_RANK];
  const dpc_shape *shapes[CG_MAX_OPERANDS];
  dpc_shape tails[CG_MAX_OPERANDS];
  for (uint32_t i = 0; i < n_ext; i++) {
    shapes[i] = &g->values[grp->inputs[first + i]].shape;
    broadcast_strides(out, shapes[i], full[i]);
  }
  /* the columns: the dimensions after `axis`, merged where every operand allows */
  for (uint32_t i = 0; i < n_ext; i++) tails[i] = tail_shape(out, shapes[i], axis + 1);
  tails[n_ext] = tail_shape(out, out, axis + 1);
  const dpc_shape *tp[CG_MAX_OPERANDS];
  for (uint32_t i = 0; i <= n_ext; i++) tp[i] = &tails[i];
  int64_t dims[DPC_MAX_RANK], stride[CG_MAX_OPERANDS][DPC_MAX_RANK];
  uint32_t rank = cg_ew_layout(&tails[n_ext], tp, n_ext + 1, dims, stride);
  int64_t q = dpc_shape_numel(&tails[n_ext]);

  cg_val ptr[CG_MAX_OPERANDS];
  for (uint32_t i = 0; i < n_ext; i++)
    ptr[i] = cg_arg_ptr(f, first + i, g->values[grp->inputs[first + i]].dtype);
  cg_val optr = cg_arg_ptr(f, grp->n_inputs, rv->dtype);

  cg_loop row = cg_loop_begin(f, lo, hi);
  cg_val base[CG_MAX_OPERANDS];
  row_bases(f, out, axis, row.i, n_ext, (const int64_t(*)[DPC_MAX_RANK])full, base);
  cg_val obase = cg_mul(f, row.i, cg_const_i64(q));
  cg_loop col = cg_loop_begin(f, col_lo, col_hi);
  cg_val off[CG_MAX_OPERANDS], ooff = cg_add(f, obase, col.i);
  for (uint32_t i = 0; i < n_ext; i++) off[i] = base[i];
  /* the column's place in each input: affine when the columns merged into one dimension (the
   * loop then vectorises), else the column split into its dimensions */
  cg_val cr = col.i;
  for (uint32_t lv = rank; lv-- > 0;) {
    cg_val idx = cr;
    if (lv > 0) {
      idx = cg_tmp(f);
      cg_line(f, "%s = urem i64 %s, %lld", idx.s, cr.s, (long long)dims[lv]);
      cg_val r2 = cg_tmp(f);
      cg_line(f, "%s = udiv i64 %s, %lld", r2.s, cr.s, (long long)dims[lv]);
      cr = r2;
    }
    for (uint32_t i = 0; i < n_ext; i++)
      if (stride[i][lv]) off[i] = cg_add(f, off[i], cg_mul(f, idx, cg_const_i64(stride[i][lv])));
  }
  cg_val ext[CG_MAX_OPERANDS + 4], r;
  for (uint32_t i = 0; i < n_ext; i++)
    ext[first + i] = cg_load(f, ptr[i], g->values[grp->inputs[first + i]].dtype, off[i]);
  cg_val a = cg_load(f, optr, rv->dtype, ooff);
  dpc_status st = eval_chain(f, ext, a, scalar_op, NULL, &r, d);
  if (st) return st;
  cg_store(f, optr, rv->dtype, ooff, r);
  cg_loop_end(f, col);
  cg_loop_end(f, row);
  return DPC_OK;
}

dpc_status cg_epilogue_rows(cg_fn *f, uint32_t axis, cg_val lo, cg_val hi, dpc_diag *d) {
  if (!f->grp) return DPC_OK;
  const dpc_shape *out = &f->g->values[f->g->nodes[f->grp->root].out].shape;
  int64_t q = 1;
  for (uint32_t i = axis + 1; i < out->rank; i++) q *= out->d[i];
  return cg_epilogue_block(f, axis, lo, hi, cg_const_i64(0), cg_const_i64(q), d);
}

/* A group with no anchor: one loop nest over the root's shape (as lower_elementwise.c). */
static dpc_status lower_chain(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_group *grp = f->grp;
  uint32_t n = grp->n_inputs;
  const dpc_value *rv = &g->values[g->nodes[grp->root].out];
  if (n + 1 > CG_MAX_OPERANDS)
    return dpc_graph_fail_node(g, grp->root, d, DPC_ERR_INTERNAL, "fusion group too wide");
  const dpc_shape *ops[CG_MAX_OPERANDS];
  for (uint32_t i = 0; i < n; i++) ops[i] = &g->values[grp->inputs[i]].shape;
  ops[n] = &rv->shape;
  int64_t dims[DPC_MAX_RANK], stride[CG_MAX_OPERANDS][DPC_MAX_RANK];
  uint32_t rank = cg_ew_layout(&rv->shape, ops, n + 1, dims, stride);
  cg_val ptr[CG_MAX_OPERANDS];
  for (uint32_t i = 0; i < n; i++) ptr[i] = cg_arg_ptr(f, i, g->values[grp->inputs[i]].dtype);
  ptr[n] = cg_arg_ptr(f, n, rv->dtype);
  cg_parallel_begin(f); /* each element on its own (cg.h) */
  k->total = dims[0];
  cg_loop loops[DPC_MAX_RANK];
  cg_val off[CG_MAX_OPERANDS];
  for (uint32_t i = 0; i <= n; i++) off[i] = cg_const_i64(0);
  for (uint32_t lv = 0; lv < rank; lv++) {
    cg_val lo = lv ? cg_const_i64(0) : (cg_val){"%begin"},
           hi = lv ? cg_const_i64(dims[lv]) : (cg_val){"%end"};
    loops[lv] = cg_loop_begin(f, lo, hi);
    for (uint32_t i = 0; i <= n; i++)
      if (stride[i][lv])
        off[i] = cg_add(f, off[i], cg_mul(f, loops[lv].i, cg_const_i64(stride[i][lv])));
  }
  cg_val ext[CG_MAX_OPERANDS], r;
  for (uint32_t i = 0; i < n; i++)
    ext[i] = cg_load(f, ptr[i], g->values[grp->inputs[i]].dtype, off[i]);
  dpc_status st = eval_chain(f, ext, (cg_val){{0}}, scalar_op, NULL, &r, d);
  if (st) return st;
  cg_store(f, ptr[n], rv->dtype, off[n], r);
  for (uint32_t lv = rank; lv-- > 0;) cg_loop_end(f, loops[lv]);
  cg_parallel_end(f);
  return DPC_OK;
}

dpc_status cg_lower_group(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  const dpc_group *grp = f->grp;
  if (grp->anchor == DPC_NONE) {
    f->node = grp->root;
    return lower_chain(k, d);
  }
  f->node = grp->anchor;
  cg_lower_fn lower = cg_lowering(f->g->nodes[grp->anchor].op);
  if (!lower)
    return dpc_graph_fail_node(f->g, grp->anchor, d, DPC_ERR_INTERNAL,
                               "fused into an op the backend cannot lower");
  return lower(k, d);
}

/* ---- the epilogue on a GEMM tile, in vector registers -------------------------------------- */

static bool tile_op_ok(dpc_op op) {
  return op == DPC_OP_ADD || op == DPC_OP_SUB || op == DPC_OP_MUL || op == DPC_OP_RELU ||
         op == DPC_OP_RELU6 || op == DPC_OP_CLIP;
}

bool cg_tile_epi_init(cg_tile_epi *te, const cg_fn *f, uint32_t axis, cg_val r0, cg_val c0) {
  te->r0 = r0;
  te->c0 = c0;
  te->axis = axis;
  const dpc_group *grp = f->grp;
  if (!grp || grp->anchor == DPC_NONE) return false;
  const dpc_graph *g = f->g;
  const dpc_value *rv = &g->values[g->nodes[grp->root].out];
  const dpc_shape *out = &rv->shape;
  if (rv->dtype != DPC_F32 || out->rank == 0 || axis + 1 >= out->rank) return false;
  if (grp->n_nodes > 64) return false;
  for (uint32_t i = 0; i < grp->n_nodes; i++) {
    const dpc_node *n = &g->nodes[grp->nodes[i]];
    if (!tile_op_ok(n->op) || g->values[n->out].dtype != DPC_F32) return false;
  }
  te->first = g->nodes[grp->anchor].n_in;
  te->n_ext = grp->n_inputs - te->first;
  if (te->n_ext + 1 > CG_MAX_OPERANDS || te->first > 4) return false;
  dpc_shape tails[CG_MAX_OPERANDS];
  const dpc_shape *tp[CG_MAX_OPERANDS];
  for (uint32_t i = 0; i < te->n_ext; i++) {
    const dpc_value *v = &g->values[grp->inputs[te->first + i]];
    if (v->dtype != DPC_F32) return false;
    broadcast_strides(out, &v->shape, te->full[i]);
    tails[i] = tail_shape(out, &v->shape, axis + 1);
  }
  tails[te->n_ext] = tail_shape(out, out, axis + 1);
  for (uint32_t i = 0; i <= te->n_ext; i++) tp[i] = &tails[i];
  int64_t dims[DPC_MAX_RANK], stride[CG_MAX_OPERANDS][DPC_MAX_RANK];
  uint32_t rank = cg_ew_layout(&tails[te->n_ext], tp, te->n_ext + 1, dims, stride);
  if (rank != 1 || stride[te->n_ext][0] != 1) return false;
  for (uint32_t i = 0; i < te->n_ext; i++) {
    /* along the row, only an input that is the same for every row (a matmul's bias, in L1):
     * one that differs (a residual) is left to the pass over finished rows, since read at the
     * tile's end its lines arrive late (MobileNetV2's 24-channel residual blocks at 56x56,
     * batch 8: 2.82 to 3.02 ms), where the pass streams them in order */
    bool per_row = false;
    for (uint32_t a = 0; a <= axis; a++) per_row |= te->full[i][a] != 0 && out->d[a] != 1;
    if (stride[i][0] != 0 && (stride[i][0] != 1 || per_row)) return false;
    te->col[i] = stride[i][0];
  }
  return true;
}

/* x below lo becomes lo (ordered: NaN stays), or above hi becomes hi: as the scalar ops do */
static cg_val vclamp(cg_fn *f, const gm_cfg *c, cg_val x, double bound, bool below) {
  cg_val b = gm_splat(f, c, cg_const(DPC_F32, bound));
  cg_val m = gm_ev(f, "fcmp %s %s %s, %s", below ? "olt" : "ogt", c->vty, x.s, b.s);
  return gm_ev(f, "select %s %s, %s %s, %s %s", c->mty, m.s, c->vty, b.s, c->vty, x.s);
}

static dpc_status vector_op(cg_fn *f, const void *ctx, uint32_t node, const cg_val *x, cg_val *out,
                            dpc_diag *d) {
  (void)d;
  const gm_cfg *c = ctx;
  const dpc_graph *g = f->g;
  dpc_attrs at = dpc_node_attrs(g, node);
  switch (g->nodes[node].op) {
  case DPC_OP_ADD: *out = gm_ev(f, "fadd %s %s, %s", c->vty, x[0].s, x[1].s); break;
  case DPC_OP_SUB: *out = gm_ev(f, "fsub %s %s, %s", c->vty, x[0].s, x[1].s); break;
  case DPC_OP_MUL: *out = gm_ev(f, "fmul %s %s, %s", c->vty, x[0].s, x[1].s); break;
  case DPC_OP_RELU: *out = vclamp(f, c, x[0], 0, true); break;
  case DPC_OP_RELU6: *out = vclamp(f, c, vclamp(f, c, x[0], 0, true), 6, false); break;
  default: { /* clip (tile_op_ok) */
    cg_val r = x[0];
    if (dpc_attrs_get(at, "min")) r = vclamp(f, c, r, dpc_attrs_float(at, "min"), true);
    if (dpc_attrs_get(at, "max")) r = vclamp(f, c, r, dpc_attrs_float(at, "max"), false);
    *out = r;
  }
  }
  return DPC_OK;
}

dpc_status cg_epilogue_vec(cg_fn *f, const gm_cfg *c, void *ctx, cg_val row, cg_val col, cg_val *v,
                           const cg_val *mask, dpc_diag *d) {
  const cg_tile_epi *te = ctx; /* from cg_tile_epi_init, which accepted the chain */
  if (c->calc != DPC_F32) return dpc_diag_fail(d, DPC_ERR_INTERNAL, "epilogue: not f32 vectors");
  const dpc_graph *g = f->g;
  const dpc_shape *out = &g->values[g->nodes[f->grp->root].out].shape;
  row = cg_add(f, te->r0, row);
  col = cg_add(f, te->c0, col);
  cg_val base[CG_MAX_OPERANDS], ptr[CG_MAX_OPERANDS], row_ext[CG_MAX_OPERANDS];
  row_bases(f, out, te->axis, row, te->n_ext, te->full, base);
  for (uint32_t i = 0; i < te->n_ext; i++) {
    ptr[i] = cg_arg_ptr(f, te->first + i, DPC_F32);
    if (!te->col[i]) /* constant along the row: one load, splatted */
      row_ext[i] = gm_splat(
          f, c, gm_ev(f, "load float, float* %s", gm_gep(f, "float", ptr[i], base[i], true).s));
  }
  for (int q = 0; q < c->nv; q++) {
    /* outside inputs numbered as eval_chain takes them, from the anchor's operands on */
    cg_val ext[CG_MAX_OPERANDS + 4];
    for (uint32_t i = 0; i < te->n_ext; i++) {
      cg_val at = cg_add(f, base[i], cg_add(f, col, cg_const_i64(q * c->vl)));
      ext[te->first + i] =
          te->col[i] ? gm_mload(f, c, gm_gep(f, "float", ptr[i], at, false), mask[q]) : row_ext[i];
    }
    dpc_status st = eval_chain(f, ext, v[q], vector_op, c, &v[q], d);
    if (st) return st;
  }
  return DPC_OK;
}
