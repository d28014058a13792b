/*
 * gemm_stream.c — C = A B for one row of A and a large row-major B read where it lies,
 * streaming B's rows whole (see gemm.h, gm_stream).
 *
 * The register-tiled micro-kernel reads B one panel (at most 128 columns, 512 bytes of a row)
 * per step of k: at one row, B is thousands of short pieces of rows a row's width apart, which
 * the hardware prefetcher does not follow once B is out of cache (a 4096 x 4096 f32 matrix at
 * batch 1: 10.9 GB/s on one core, where a plain read streams 27). Here the sums of up to
 * STREAM_COLS columns live in an L1 buffer instead of registers, and each step of k reads the
 * piece's whole row: 16 KB in a row at 4096 columns, 2.9 ms for that matrix (23 GB/s). Cutting
 * the row in two pieces (8 KB runs) gave back most of the gain, and two cores streaming half
 * rows each this way were slower than the tiled kernel's halves: lower_matmul.c takes this path
 * only when one thread runs the whole product. Two rows or more, their sums 32 KB or more,
 * thrashed L1 and were no faster than the micro-kernel.
 *
 * The sums run in the micro-kernel's order: each KC block of k starts from zero, takes its
 * products in order of k (fmul and fadd with `contract`, fused into FMAs alike), and is then
 * added to C (the first block to zero, as the micro-kernel does); KC is gm_choose's, which
 * depends on k alone. So a row gets the same bits as on the tiled path, at any batch.
 */
#include "codegen/cpu/gemm.h"

/* The widest piece: its sums (16 KB) in L1 beside the rows of B passing through. */
#define STREAM_COLS 4096

bool gm_stream_ok(const gm_cfg *c, dpc_dtype t, int64_t m, int64_t n, int64_t k, int64_t b_cs) {
  /* B of 1 MiB or more (no longer in a core's L2 between calls) */
  return m == 1 && gm_vec_ok(c, t) && b_cs == 1 && n >= 2 * c->vl &&
         (double)k * (double)n * c->esize >= 1024.0 * 1024.0;
}

int64_t gm_stream_width(const gm_cfg *c) {
  return STREAM_COLS / c->vl * c->vl;
}

/* acc[off..] += s * b: one vector of B's row into the sums. */
static void fma_vec(cg_fn *f, const gm_cfg *c, cg_val s, cg_val b, cg_val acc, cg_val off) {
  cg_val at = gm_gep(f, c->ty, acc, off, true);
  cg_val prod = gm_ev(f, "fmul contract %s %s, %s", c->vty, s.s, b.s);
  cg_val sum = gm_ev(f, "fadd contract %s %s, %s", c->vty, gm_vload(f, c, at, 64).s, prod.s);
  gm_vstore(f, c, sum, at, 64);
}

void gm_stream(cg_fn *f, const gm_cfg *c, const gm_mat *a, const gm_mat *b, const gm_mat *cm,
               cg_val n, int64_t k) {
  int64_t KC = c->kc, VL = c->vl;
  cg_val acc = gm_alloca(f, c->ty, gm_stream_width(c));
  cg_val nfull = gm_ev(f, "sdiv i64 %s, %lld", n.s, (long long)VL);
  cg_val rem = gm_ev(f, "srem i64 %s, %lld", n.s, (long long)VL);
  cg_val tail = gm_ev(f, "icmp sgt i64 %s, 0", rem.s);
  cg_val tmask = gm_lanes(f, c, cg_const_i64(0), rem);
  cg_val last = cg_mul(f, nfull, cg_const_i64(VL)); /* where the masked vector starts */
  cg_val nvec = gm_ceil_div(f, n, VL);
  for (int64_t pc = 0; pc < k; pc += KC) {
    int64_t kc = k - pc < KC ? k - pc : KC;
    /* the block's sums from zero */
    cg_loop z = cg_loop_begin(f, cg_const_i64(0), nvec);
    gm_vstore(f, c, (cg_val){"zeroinitializer"},
              gm_gep(f, c->ty, acc, cg_mul(f, z.i, cg_const_i64(VL)), true), 64);
    cg_loop_end(f, z);
    /* a step of k: B's row of the piece, its last vector masked */
    cg_loop p = cg_loop_begin(f, cg_const_i64(pc), cg_const_i64(pc + kc));
    cg_val av = gm_ev(f, "load %s, %s* %s", c->ty, c->ty,
                      gm_gep(f, c->ty, a->p, cg_mul(f, p.i, cg_const_i64(a->cs)), true).s);
    cg_val s = gm_splat(f, c, av);
    cg_val brow = gm_gep(f, c->ty, b->p, cg_mul(f, p.i, cg_const_i64(b->rs)), true);
    cg_loop v = cg_loop_begin(f, cg_const_i64(0), nfull);
    cg_val off = cg_mul(f, v.i, cg_const_i64(VL));
    fma_vec(f, c, s, gm_vload(f, c, gm_gep(f, c->ty, brow, off, true), c->esize), acc, off);
    cg_loop_end(f, v);
    uint32_t t = gm_if(f, tail);
    fma_vec(f, c, s, gm_mload(f, c, gm_gep(f, c->ty, brow, last, false), tmask), acc, last);
    gm_endif(f, t);
    cg_loop_end(f, p);
    /* into C, as the micro-kernel: the sums plus C, or plus zero on the first block (which
     * turns a -0 sum into +0 there too) */
    cg_loop w = cg_loop_begin(f, cg_const_i64(0), nvec);
    cg_val at0 = cg_mul(f, w.i, cg_const_i64(VL));
    cg_val mask = gm_lanes(f, c, cg_const_i64(0), gm_sub(f, n, at0));
    cg_val sum = gm_vload(f, c, gm_gep(f, c->ty, acc, at0, true), 64);
    cg_val at = gm_gep(f, c->ty, cm->p, at0, false);
    cg_val old = pc > 0 ? gm_mload(f, c, at, mask) : (cg_val){"zeroinitializer"};
    gm_mstore(f, c, gm_ev(f, "fadd %s %s, %s", c->vty, sum.s, old.s), at, mask);
    cg_loop_end(f, w);
  }
}
