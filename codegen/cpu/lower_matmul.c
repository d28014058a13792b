/*
 * lower_matmul.c — LLVM IR for matmul: NumPy semantics (rule_matmul) on the GEMM generator.
 *
 * The node's geometry is settled here at generation time: 1-D operands promoted ([k] is a row
 * for a, a column for b, and transposing either is a no-op), transpose_a / transpose_b turned
 * into element strides (packing absorbs them), batch dimensions broadcast into per-operand
 * matrix strides (0 along a broadcast dimension). The kernel's parallel loop runs over
 * (batch, row block, column block) pieces of the output, chosen by gm_split so two cores get
 * equal shares of the MLP's products (128x784x512 splits its 512 columns in two; the weight
 * gradient 784x128x512 its 784 rows): each piece writes its own block of C and packs its own
 * operands, so iterations never share anything but read-only inputs.
 *
 * f32 and f64 accumulate in their own type with FMAs; f16 and bf16 are widened to f32 while
 * packed and rounded once, when the finished block is stored.
 */
#include "codegen/cpu/gemm.h"

#include <string.h>

typedef struct mm_geom {
  int64_t m, n, k;
  int64_t a_rs, a_cs, b_rs, b_cs;                 /* element strides within one matrix */
  dpc_shape batch;                                /* output batch shape */
  int64_t a_bs[DPC_MAX_RANK], b_bs[DPC_MAX_RANK]; /* per batch dimension, in elements */
  int64_t nbatch;
} mm_geom;

/* Strides of an operand's batch dimensions against the output's, 0 where it broadcasts. */
static void batch_strides(const dpc_shape *s, uint32_t nb, const dpc_shape *out, int64_t mat,
                          int64_t *st) {
  int64_t acc = mat;
  for (uint32_t i = out->rank; i-- > 0;) {
    int64_t j = (int64_t)i - (int64_t)(out->rank - nb);
    int64_t dim = j >= 0 ? s->d[j] : 1;
    st[i] = dim == 1 ? 0 : acc;
    acc *= dim;
  }
}

static void geometry(const dpc_graph *g, uint32_t node, mm_geom *mg) {
  const dpc_node *nd = &g->nodes[node];
  dpc_attrs at = dpc_node_attrs(g, node);
  dpc_shape sa = g->values[g->ids[nd->in]].shape, sb = g->values[g->ids[nd->in + 1]].shape;
  bool a1 = sa.rank == 1, b1 = sb.rank == 1;
  if (a1) sa.rank = 2, sa.d[1] = sa.d[0], sa.d[0] = 1;
  if (b1) sb.rank = 2, sb.d[1] = 1;
  bool ta = !a1 && dpc_attrs_int(at, "transpose_a"), tb = !b1 && dpc_attrs_int(at, "transpose_b");
  int64_t ar = sa.d[sa.rank - 2], ac = sa.d[sa.rank - 1];
  int64_t br = sb.d[sb.rank - 2], bc = sb.d[sb.rank - 1];
  memset(mg, 0, sizeof *mg);
  mg->m = ta ? ac : ar;
  mg->k = ta ? ar : ac;
  mg->n = tb ? br : bc;
  /* stored a is [ar, ac]: (i, p) is at i*ac + p, or at p*ac + i when transposed */
  mg->a_rs = ta ? 1 : ac;
  mg->a_cs = ta ? ac : 1;
  mg->b_rs = tb ? 1 : bc;
  mg->b_cs = tb ? bc : 1;
  uint32_t na = sa.rank - 2, nb = sb.rank - 2;
  dpc_shape *bo = &mg->batch;
  bo->rank = na > nb ? na : nb;
  for (uint32_t i = 0; i < bo->rank; i++) {
    int64_t u = i + na < bo->rank ? 1 : sa.d[i + na - bo->rank];
    int64_t v = i + nb < bo->rank ? 1 : sb.d[i + nb - bo->rank];
    bo->d[i] = u == 1 ? v : u;
  }
  batch_strides(&sa, na, bo, ar * ac, mg->a_bs);
  batch_strides(&sb, nb, bo, br * bc, mg->b_bs);
  mg->nbatch = 1;
  for (uint32_t i = 0; i < bo->rank; i++) mg->nbatch *= bo->d[i];
}

/* Offsets of batch matrix `t` (an i64 value) in a and b. */
static void batch_offsets(cg_fn *f, const mm_geom *mg, cg_val t, cg_val *aoff, cg_val *boff) {
  *aoff = *boff = cg_const_i64(0);
  cg_val rem = t;
  for (uint32_t i = mg->batch.rank; i-- > 0;) {
    int64_t dim = mg->batch.d[i];
    if (dim == 1) continue;
    cg_val digit = gm_ev(f, "srem i64 %s, %lld", rem.s, (long long)dim);
    rem = gm_ev(f, "sdiv i64 %s, %lld", rem.s, (long long)dim);
    if (mg->a_bs[i]) *aoff = cg_add(f, *aoff, cg_mul(f, digit, cg_const_i64(mg->a_bs[i])));
    if (mg->b_bs[i]) *boff = cg_add(f, *boff, cg_mul(f, digit, cg_const_i64(mg->b_bs[i])));
  }
}

/* One row against a large B (gm_stream), when one thread runs the whole kernel: its columns
 * in pieces as wide as gm_stream takes, B's rows streamed whole. Two threads are better served
 * by the tiled pieces (each core streams half of every row: a 1024-wide layer at batch 1 took
 * 0.6-0.9 ms so, 1.7 ms as halves of rows streamed into L1 sums). */
static dpc_status lower_stream(cg_fn *f, const mm_geom *mg, const gm_cfg *c, cg_val pa, cg_val pb,
                               cg_val py, dpc_diag *d) {
  const dpc_graph *g = f->g;
  dpc_dtype t = g->values[g->nodes[f->node].out].dtype;
  const char *st = cg_store_type(t);
  int64_t w = gm_stream_width(c);
  cg_loop it = cg_loop_begin(f, cg_const_i64(0), cg_const_i64((mg->n + w - 1) / w));
  cg_val n0 = cg_mul(f, it.i, cg_const_i64(w));
  cg_val ncur = gm_min(f, cg_const_i64(w), gm_sub(f, cg_const_i64(mg->n), n0));
  gm_mat A = {pa, t, mg->a_rs, mg->a_cs, false, false};
  gm_mat B = {gm_gep(f, st, pb, n0, true), t, mg->b_rs, 1, true, false};
  gm_mat C = {gm_gep(f, st, py, n0, true), t, mg->n, 1, false, false};
  gm_stream(f, c, &A, &B, &C, ncur, mg->k);
  if (f->grp) {
    /* fused: the bias, activation... on this piece of y while it is in cache */
    uint32_t axis = g->values[g->nodes[f->node].out].shape.rank - 2;
    dpc_status est = cg_epilogue_block(f, axis, cg_const_i64(0), cg_const_i64(mg->m), n0,
                                       cg_add(f, n0, ncur), d);
    if (est) return est;
  }
  cg_loop_end(f, it);
  return DPC_OK;
}

static dpc_status lower(cg_kernel *k, dpc_diag *d) {
  cg_fn *f = k->f;
  const dpc_graph *g = f->g;
  const dpc_node *nd = &g->nodes[f->node];
  dpc_dtype t = g->values[nd->out].dtype;
  mm_geom mg;
  geometry(g, f->node, &mg);
  cg_val pa = cg_arg_ptr(f, 0, t), pb = cg_arg_ptr(f, 1, t), py = cg_arg_ptr(f, cg_out_arg(f), t);
  int64_t mn = mg.m * mg.n;
  if (mn == 0 || mg.nbatch == 0) {
    k->total = 0; /* an empty output: nothing to do */
    return DPC_OK;
  }
  if (mg.k == 0) {
    /* an empty sum: zeros, one batch matrix per iteration */
    k->total = mg.nbatch;
    cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
    cg_val base = cg_mul(f, it.i, cg_const_i64(mn));
    cg_loop e = cg_loop_begin(f, cg_const_i64(0), cg_const_i64(mn));
    cg_store(f, py, t, cg_add(f, base, e.i), cg_const(t, 0));
    cg_loop_end(f, e);
    cg_loop_end(f, it);
    return DPC_OK;
  }
  /* C = A B, or C^T = B^T A^T when the output is narrow: N = 10 fills 10 of 16 lanes of one
   * vector per row (and 28x1 tiles are load-bound), while M = 128 rows make 8 full vectors and
   * the 10 columns become 10 of 14 rows of a 14x2 tile. The transposed C is written through the
   * GEMM's scratch (C^T's rows are not contiguous), a copy of m*n elements per piece. */
  gm_cfg c, ct;
  gm_choose(&c, f->vector_bits, t, mg.m, mg.n, mg.k);
  gm_choose(&ct, f->vector_bits, t, mg.n, mg.m, mg.k);
  /* A few rows (inference at batch 1 to 8): packing B, often a whole weight matrix, costs more
   * than the product, which uses each of its elements once per row. The micro-kernel then reads
   * B where it lies (gm_mat.direct), a row of B per step of k, so B is streamed once (the
   * last panel's vectors masked to the columns that exist), when every piece but the last is
   * whole panels (checked once they are cut).
   * The sums run in the same order either way: a row gets the same bits at any batch. */
  bool stream = mg.nbatch == 1 && gm_stream_ok(&c, t, mg.m, mg.n, mg.k, mg.b_cs);
  bool few = mg.m <= 8 && mg.b_cs == 1 && gm_vec_ok(&c, t);
  bool tr = !few && ct.cost < 0.8 * c.cost;
  if (tr) c = ct;
  int64_t M = tr ? mg.n : mg.m, N = tr ? mg.m : mg.n;
  int64_t mb, nb;
  gm_split(&c, M, N, mg.k, mg.nbatch, tr || !gm_vec_ok(&c, t), &mb, &nb);
  /* a few rows are bound by reading B, not by their FLOPs: in two pieces, two cores read it,
   * when a half is whole tiles (so B is still read in place) and cheaper than the whole. A
   * half of 64 columns under a 48-column tile packed B on every call: a batch of 8 through
   * 784 x 128 ran at 49 GFLOP/s in halves, 109 whole */
  if (few && mg.nbatch == 1 && mb >= M && nb >= N && N >= 128 && mg.k * N >= 65536) {
    int64_t half = (N / 2 + 63) / 64 * 64;
    gm_cfg ch;
    gm_choose(&ch, f->vector_bits, t, mb, half, mg.k);
    if (half % ch.nr == 0 && ch.cost < 0.9 * c.cost) nb = half;
  }
  gm_choose(&c, f->vector_bits, t, mb, nb, mg.k); /* the tile that suits one piece */
  gm_fit(&c, mb, nb);
  /* Up to 16 rows (after transposing), B is read in place too when its rows are contiguous:
   * its panels are used by a strip or eight of A, too few to repay packing them. fc3's weight
   * gradient, 512 x 10 x 128 transposed to 10 rows, went from 65 to 94 GFLOP/s; from 32 rows
   * on, packing was as fast or faster. */
  bool thin = M <= 16 && gm_vec_ok(&c, t) && (tr ? mg.a_rs : mg.b_cs) == 1;
  bool direct = (few || thin) && (nb % c.nr == 0 || nb >= N);
  int64_t tm = (M + mb - 1) / mb, tn = (N + nb - 1) / nb;
  k->total = mg.nbatch * tm * tn;
  uint32_t tiled = 0;
  if (stream) {
    /* the pool hands a thread alone all of [0, total), two threads a part each */
    cg_val all = gm_ev(f, "and i1 %s, %s", gm_ev(f, "icmp eq i64 %%begin, 0").s,
                       gm_ev(f, "icmp eq i64 %%end, %lld", (long long)k->total).s);
    uint32_t alone = gm_if(f, all);
    dpc_status sst = lower_stream(f, &mg, &c, pa, pb, py, d);
    if (sst) return sst;
    gm_endif(f, alone);
    tiled = gm_if(f, gm_ev(f, "xor i1 %s, true", all.s));
  }
  /* iteration = (batch, row block, column block), column blocks innermost */
  cg_loop it = cg_loop_begin(f, (cg_val){"%begin"}, (cg_val){"%end"});
  cg_val bt = gm_ev(f, "sdiv i64 %s, %lld", it.i.s, (long long)(tm * tn));
  cg_val rest = gm_ev(f, "srem i64 %s, %lld", it.i.s, (long long)(tm * tn));
  cg_val im = gm_ev(f, "sdiv i64 %s, %lld", rest.s, (long long)tn);
  cg_val in = gm_ev(f, "srem i64 %s, %lld", rest.s, (long long)tn);
  cg_val aoff, boff;
  batch_offsets(f, &mg, bt, &aoff, &boff);
  cg_val m0 = cg_mul(f, im, cg_const_i64(mb)), n0 = cg_mul(f, in, cg_const_i64(nb));
  cg_val mcur = gm_min(f, cg_const_i64(mb), gm_sub(f, cg_const_i64(M), m0));
  cg_val ncur = gm_min(f, cg_const_i64(nb), gm_sub(f, cg_const_i64(N), n0));
  /* rows of the product come from a (from b^T when transposed), columns from b (a^T) */
  const char *st = cg_store_type(t);
  cg_val rbase = tr ? cg_add(f, boff, cg_mul(f, m0, cg_const_i64(mg.b_cs)))
                    : cg_add(f, aoff, cg_mul(f, m0, cg_const_i64(mg.a_rs)));
  cg_val cbase = tr ? cg_add(f, aoff, cg_mul(f, n0, cg_const_i64(mg.a_rs)))
                    : cg_add(f, boff, cg_mul(f, n0, cg_const_i64(mg.b_cs)));
  gm_mat A = tr ? (gm_mat){gm_gep(f, st, pb, rbase, true), t, mg.b_cs, mg.b_rs, false}
                : (gm_mat){gm_gep(f, st, pa, rbase, true), t, mg.a_rs, mg.a_cs, false};
  gm_mat B = tr ? (gm_mat){gm_gep(f, st, pa, cbase, true), t, mg.a_cs, mg.a_rs, direct}
                : (gm_mat){gm_gep(f, st, pb, cbase, true), t, mg.b_rs, mg.b_cs, direct};
  /* y[bt][i][j] at bt*m*n + i*n + j; the transposed product's (i, j) is y's (j, i) */
  cg_val corner = tr ? cg_add(f, cg_mul(f, n0, cg_const_i64(mg.n)), m0)
                     : cg_add(f, cg_mul(f, m0, cg_const_i64(mg.n)), n0);
  cg_val yoff = cg_add(f, cg_mul(f, bt, cg_const_i64(mn)), corner);
  gm_mat C = {gm_gep(f, st, py, yoff, true), t, tr ? 1 : mg.n, tr ? mg.n : 1, false};
  /* fused: the bias, activation... in registers on each tile as it is stored where the chain
   * allows; else on the piece once it is done */
  uint32_t axis = g->values[nd->out].shape.rank - 2;
  /* the piece's first row and column of y seen as [batch * m, n] (swapped back for the
   * transposed product) */
  cg_val r0 = {{0}}, c0 = tr ? m0 : n0;
  cg_tile_epi te;
  bool per_tile = false;
  if (f->grp) {
    r0 = cg_add(f, cg_mul(f, bt, cg_const_i64(mg.m)), tr ? n0 : m0);
    per_tile = !tr && gm_vec_ok(&c, t) && cg_tile_epi_init(&te, f, axis, r0, c0);
  }
  gm_tile_hook hook = {cg_epilogue_vec, &te, (cg_val){"true"}};
  dpc_status bst = gm_block_then(f, &c, &A, &B, &C, mcur, ncur, cg_const_i64(mg.k),
                                 (cg_val){"false"}, per_tile ? &hook : NULL, d);
  if (bst) return bst;
  if (f->grp && !per_tile) {
    /* fused: the bias, activation... on this piece of y while it is in cache */
    dpc_status est = cg_epilogue_block(f, axis, r0, cg_add(f, r0, tr ? ncur : mcur), c0,
                                       cg_add(f, c0, tr ? mcur : ncur), d);
    if (est) return est;
  }
  cg_loop_end(f, it);
  if (stream) gm_endif(f, tiled);
  return DPC_OK;
}

const cg_lower_fn cg_matmul_table[DPC_OP_COUNT] = {
    [DPC_OP_MATMUL] = lower,
};
