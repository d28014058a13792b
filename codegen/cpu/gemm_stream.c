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
  return m >= 1 && m <= GM_STREAM_ROWS && gm_vec_ok(c, t) && b_cs == 1 && n >= 2 * c->vl &&
         (double)k * (double)n * c->esize >= 1024.0 * 1024.0;
}

int64_t gm_stream_width(const gm_cfg *c) {
  return STREAM_COLS / c->vl * c->vl;
}

/* acc[r][off..] += a_r * b for r < m: one vector of B's row, read once for every row of sums. */
static void fma_rows(cg_fn *f, const gm_cfg *c, int m, const cg_val *s, cg_val b, cg_val acc,
                     cg_val off, int64_t ld) {
  for (int r = 0; r < m; r++) {
    cg_val at = gm_gep(f, c->ty, acc, cg_add(f, off, cg_const_i64(r * ld)), true);
    cg_val prod = gm_ev(f, "fmul contract %s %s, %s", c->vty, s[r].s, b.s);
    cg_val sum = gm_ev(f, "fadd contract %s %s, %s", c->vty, gm_vload(f, c, at, 64).s, prod.s);
    gm_vstore(f, c, sum, at, 64);
  }
}

/* acc[r][v] = acc[r][v] + a_r * b over the piece's vectors v (the last masked), for r < m. */
static void row_step(cg_fn *f, const gm_cfg *c, int m, const cg_val *s, cg_val brow, cg_val acc,
                     int64_t ld, cg_val nfull, cg_val tail, cg_val tmask) {
  cg_loop v = cg_loop_begin(f, cg_const_i64(0), nfull);
  cg_val off = cg_mul(f, v.i, cg_const_i64(c->vl));
  fma_rows(f, c, m, s, gm_vload(f, c, gm_gep(f, c->ty, brow, off, true), c->esize), acc, off, ld);
  cg_loop_end(f, v);
  uint32_t t = gm_if(f, tail);
  cg_val last = cg_mul(f, nfull, cg_const_i64(c->vl));
  fma_rows(f, c, m, s, gm_mload(f, c, gm_gep(f, c->ty, brow, last, false), tmask), acc, last, ld);
  gm_endif(f, t);
}

void gm_stream(cg_fn *f, const gm_cfg *c, int m, const gm_mat *a, const gm_mat *b, const gm_mat *cm,
               cg_val n, int64_t k) {
  int64_t KC = c->kc, VL = c->vl;
  int64_t ld = (STREAM_COLS + VL - 1) / VL * VL + VL; /* a vector more: rows off one set */
  cg_val acc = gm_alloca(f, c->ty, m * ld);
  cg_val nfull = gm_ev(f, "sdiv i64 %s, %lld", n.s, (long long)VL);
  cg_val rem = gm_ev(f, "srem i64 %s, %lld", n.s, (long long)VL);
  cg_val tail = gm_ev(f, "icmp sgt i64 %s, 0", rem.s);
  cg_val tmask = gm_lanes(f, c, cg_const_i64(0), rem);
  cg_val nvec = gm_ceil_div(f, n, VL);
  for (int64_t pc = 0; pc < k; pc += KC) {
    int64_t kc = k - pc < KC ? k - pc : KC;
    /* the block's sums from zero */
    cg_loop z = cg_loop_begin(f, cg_const_i64(0), nvec);
    for (int r = 0; r < m; r++) {
      cg_val at = gm_gep(f, c->ty, acc,
                         cg_add(f, cg_mul(f, z.i, cg_const_i64(VL)), cg_const_i64(r * ld)), true);
      gm_vstore(f, c, (cg_val){"zeroinitializer"}, at, 64);
    }
    cg_loop_end(f, z);
    cg_loop p = cg_loop_begin(f, cg_const_i64(pc), cg_const_i64(pc + kc));
    cg_val s[GM_STREAM_ROWS];
    for (int r = 0; r < m; r++) {
      cg_val ai = cg_add(f, cg_mul(f, p.i, cg_const_i64(a->cs)), cg_const_i64(r * a->rs));
      cg_val av = gm_ev(f, "load %s, %s* %s", c->ty, c->ty, gm_gep(f, c->ty, a->p, ai, true).s);
      s[r] = gm_splat(f, c, av);
    }
    cg_val brow = gm_gep(f, c->ty, b->p, cg_mul(f, p.i, cg_const_i64(b->rs)), true);
    row_step(f, c, m, s, brow, acc, ld, nfull, tail, tmask);
    cg_loop_end(f, p);
    /* into C: the first block stores its sums, the others add theirs */
    cg_loop v = cg_loop_begin(f, cg_const_i64(0), nvec);
    cg_val off = cg_mul(f, v.i, cg_const_i64(VL));
    cg_val last = gm_ev(f, "icmp eq i64 %s, %s", v.i.s, gm_sub(f, nvec, cg_const_i64(1)).s);
    cg_val full = gm_lanes(f, c, cg_const_i64(0), cg_const_i64(VL));
    cg_val mask =
        gm_ev(f, "select i1 %s, %s %s, %s %s", gm_ev(f, "and i1 %s, %s", last.s, tail.s).s, c->mty,
              tmask.s, c->mty, full.s);
    for (int r = 0; r < m; r++) {
      cg_val sum =
          gm_vload(f, c, gm_gep(f, c->ty, acc, cg_add(f, off, cg_const_i64(r * ld)), true), 64);
      cg_val at = gm_gep(f, c->ty, cm->p, cg_add(f, off, cg_const_i64(r * cm->rs)), false);
      /* as the micro-kernel: the sums plus C, or plus zero on the first block (which turns a
       * -0 sum into +0 there too) */
      cg_val old = pc > 0 ? gm_mload(f, c, at, mask) : (cg_val){"zeroinitializer"};
      gm_mstore(f, c, gm_ev(f, "fadd %s %s, %s", c->vty, sum.s, old.s), at, mask);
    }
    cg_loop_end(f, v);
  }
}
