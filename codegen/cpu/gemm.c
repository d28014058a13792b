/*
 * gemm.c — the GEMM generator (see gemm.h): packed, cache-blocked C = A B in LLVM IR.
 *
 * The loop nest is the classic one of BLIS / OpenBLAS, with every block size fixed when the IR
 * is written:
 *
 *   for jc over n by NC          B block: KC x NC, ~384 KiB, stays in L2 while A blocks pass
 *     for pc over k by KC          pack B[pc:pc+kc, jc:jc+nc] into NR-wide panels
 *       for ic over m by MC        pack A[ic:ic+mc, pc:pc+kc]  (~256 KiB, stays in L2)
 *         for jr over nc by NR     one B panel (KC x NR) stays in L1 while ...
 *           for ir over mc by MR     ... the micro-kernel runs every MR-row strip of A over it
 *
 * The micro-kernel keeps an MR x NR tile of C in MR*NV vector registers (NR = NV vectors) and,
 * per step of k, loads NV vectors of B and broadcasts MR scalars of A into NV*MR FMAs. With 32
 * registers (AVX-512) the default is 14 x 2 vectors (28 accumulators, 2 B vectors, and the A
 * broadcast folded into the FMA's memory operand): 28 FMAs per 16 loads keeps both FMA pipes
 * of a Zen 5 core busy with loads to spare. Other shapes (28x1, 8x3, 6x4, 4x6, 2x8) are picked
 * when they waste less on the edges of the problem (gm_choose's cost model); with 16 registers
 * (AVX2, SSE) 6x2 and its relatives.
 *
 * Edges never take a separate code path: the packers zero-fill the panels past the matrix, and
 * the micro-kernel loads and stores its C tile with masks for the rows and columns that exist,
 * so a 10-column output costs one masked store per row, not a scalar loop. The tile is summed
 * from zero and C added at the end, its lines prefetched before the k loop (see micro).
 *
 * Packing keeps A in its own orientation (a row-major copy for A, a column-major copy for A^T)
 * with a padded leading dimension, so it is a vector copy either way; B is packed into panels
 * whose rows are NR contiguous elements, which is a vector copy for B and a VL x VL in-register
 * transpose for B^T. Rows of every packed buffer are padded to an odd number of cache lines
 * (gm_pad_ld), so the 14 rows of an A strip, or the rows of a B panel, spread over the L1's
 * sets instead of piling into one (a 512-float row is exactly 2 KiB: without padding, 14 such
 * rows would share 2 of the 64 sets of a 12-way L1).
 *
 * Must not: allocate at run time (buffers are allocas, ~0.7 MiB in all for f32, ~1 MiB with
 * the f16/bf16 scratch), call out of the kernel, or read memory outside the operands except in
 * lanes a mask turns off, and those at mapped addresses: a masked-off lane on an unmapped page
 * still costs a microcode assist (it made a 9-column B^T pack 15x slower before dead rows were
 * pointed at live ones).
 */
#include "codegen/cpu/gemm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Cache budgets of one core, in bytes (Zen 4 and 5: 32-48 KiB L1d, 1 MiB L2). The packed B
 * block need not stay in L2: the micro-kernel streams each panel once per block of A. */
#define L1_PANELS (32 * 1024)   /* one A strip plus one B panel: the tile cost model's KC */
#define L2_A      (256 * 1024)  /* a packed A block, MC x KC */
#define L2_B      (1024 * 1024) /* a packed B block, KC x NC */
/* The deepest KC block, in bytes of a row of A. Deeper than an A strip and a B panel fit in
 * L1 together (kc_for): the panel then streams from L2, which feeds the 14x2 tile's 184 bytes
 * a step with room to spare, while each KC block costs a load and store of every C tile and
 * the micro-kernel's start and end. On a 32 KiB-L1 core, KC 176 -> 512 took 1024^3 from 0.98
 * to 1.03 of OpenBLAS and 2048^3 from 0.97 to 1.02. */
#define KC_BYTES (2048)
/* The output of an f16/bf16 GEMM is accumulated in a calc-type scratch of at most this many
 * elements (gm_split keeps blocks within it). */
#define SCRATCH_C (64 * 1024)

/* Bytes of an A read in place beyond which its next strip is prefetched. In a network the
 * weights of a layer are cold at any size (MobileNetV2's 14 MB come from memory each pass), and
 * the prefetch costs one load slot a step of k, so only an A that fits L1 is left alone. */
#define A_STREAMED (16 * 1024)
/* Rows ahead that pack_a prefetches. */
#define PF_ROWS 4

#define MAX_MR 28
#define MAX_NV GM_MAX_NV
#define MAX_VL 16

/* ---- IR helpers ------------------------------------------------------------------------------ */

cg_val gm_ev(cg_fn *f, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = %s", r.s, text);
  return r;
}

cg_val gm_alloca(cg_fn *f, const char *ty, int64_t n) {
  uint32_t id = cg_label(f);
  dpc_buf_printf(&f->head, "  %%buf%u = alloca [%lld x %s], align 64\n", id, (long long)n, ty);
  dpc_buf_printf(&f->head,
                 "  %%buf%u.p = getelementptr inbounds [%lld x %s], [%lld x %s]* %%buf%u, i64 0, "
                 "i64 0\n",
                 id, (long long)n, ty, (long long)n, ty, id);
  cg_val p;
  snprintf(p.s, sizeof p.s, "%%buf%u.p", id);
  return p;
}

cg_val gm_min(cg_fn *f, cg_val a, cg_val b) {
  cg_val c = gm_ev(f, "icmp slt i64 %s, %s", a.s, b.s);
  return gm_ev(f, "select i1 %s, i64 %s, i64 %s", c.s, a.s, b.s);
}

cg_val gm_max(cg_fn *f, cg_val a, cg_val b) {
  cg_val c = gm_ev(f, "icmp sgt i64 %s, %s", a.s, b.s);
  return gm_ev(f, "select i1 %s, i64 %s, i64 %s", c.s, a.s, b.s);
}

cg_val gm_sub(cg_fn *f, cg_val a, cg_val b) {
  return gm_ev(f, "sub i64 %s, %s", a.s, b.s);
}

cg_val gm_gep(cg_fn *f, const char *ty, cg_val p, cg_val idx, bool inb) {
  return gm_ev(f, "getelementptr %s%s, %s* %s, i64 %s", inb ? "inbounds " : "", ty, ty, p.s, idx.s);
}

cg_val gm_splat_i32(cg_fn *f, const gm_cfg *c, cg_val x64) {
  cg_val x = gm_ev(f, "trunc i64 %s to i32", x64.s);
  cg_val ins = gm_ev(f, "insertelement %s undef, i32 %s, i32 0", c->ity, x.s);
  return gm_ev(f, "shufflevector %s %s, %s undef, %s zeroinitializer", c->ity, ins.s, c->ity,
               c->ity);
}

void gm_iota(const gm_cfg *c, int step, char *out, size_t cap) {
  size_t o = (size_t)snprintf(out, cap, "<");
  for (int l = 0; l < c->vl; l++)
    o += (size_t)snprintf(out + o, cap - o, "%si32 %d", l ? ", " : "", l * step);
  snprintf(out + o, cap - o, ">");
}

/* Whether v is an integer literal (cg_const_i64's text), and its value. */
static bool literal(cg_val v, int64_t *out) {
  char *end;
  long long x = strtoll(v.s, &end, 10);
  if (end == v.s || *end) return false;
  *out = x;
  return true;
}

cg_val gm_lanes(cg_fn *f, const gm_cfg *c, cg_val lo, cg_val hi) {
  /* bounds known when the IR is written make a constant mask: LLVM does not fold the splats
   * and compares below (a 2x2 max pool's edge masks so built ran 10-25% slower) */
  int64_t klo, khi;
  if (literal(lo, &klo) && literal(hi, &khi)) {
    bool on[MAX_VL], any;
    for (int i = 0; i < c->vl; i++) on[i] = i >= klo && i < khi;
    return gm_lane_const(f, c, on, &any);
  }
  /* clamp to [-1, vl] first: the i32 compare must not see a truncated i64 */
  cg_val m1 = cg_const_i64(-1), top = cg_const_i64(c->vl);
  char io[256];
  gm_iota(c, 1, io, sizeof io);
  cg_val h = gm_splat_i32(f, c, gm_min(f, gm_max(f, hi, m1), top));
  cg_val below = gm_ev(f, "icmp slt %s %s, %s", c->ity, io, h.s);
  if (!strcmp(lo.s, "0")) return below;
  cg_val l = gm_splat_i32(f, c, gm_min(f, gm_max(f, lo, m1), top));
  cg_val above = gm_ev(f, "icmp sge %s %s, %s", c->ity, io, l.s);
  return gm_ev(f, "and %s %s, %s", c->mty, below.s, above.s);
}

cg_val gm_splat(cg_fn *f, const gm_cfg *c, cg_val s) {
  cg_val one = gm_ev(f, "insertelement %s undef, %s %s, i32 0", c->vty, c->ty, s.s);
  return gm_ev(f, "shufflevector %s %s, %s undef, %s zeroinitializer", c->vty, one.s, c->vty,
               c->ity);
}

static cg_val vptr(cg_fn *f, const gm_cfg *c, cg_val p) {
  return gm_ev(f, "bitcast %s* %s to %s*", c->ty, p.s, c->vty);
}

cg_val gm_mload(cg_fn *f, const gm_cfg *c, cg_val p, cg_val mask) {
  cg_val vp = vptr(f, c, p);
  return gm_ev(f, "call %s @llvm.masked.load.%s(%s* %s, i32 %d, %s %s, %s zeroinitializer)", c->vty,
               c->sfx, c->vty, vp.s, c->esize, c->mty, mask.s, c->vty);
}

void gm_mstore(cg_fn *f, const gm_cfg *c, cg_val v, cg_val p, cg_val mask) {
  cg_val vp = vptr(f, c, p);
  cg_line(f, "call void @llvm.masked.store.%s(%s %s, %s* %s, i32 %d, %s %s)", c->sfx, c->vty, v.s,
          c->vty, vp.s, c->esize, c->mty, mask.s);
}

cg_val gm_vload(cg_fn *f, const gm_cfg *c, cg_val p, int align) {
  cg_val vp = vptr(f, c, p);
  return gm_ev(f, "load %s, %s* %s, align %d", c->vty, c->vty, vp.s, align);
}

void gm_vstore(cg_fn *f, const gm_cfg *c, cg_val v, cg_val p, int align) {
  cg_val vp = vptr(f, c, p);
  cg_line(f, "store %s %s, %s* %s, align %d", c->vty, v.s, c->vty, vp.s, align);
}

/* A vector constant of i1 lanes: on[l]. */
cg_val gm_lane_const(cg_fn *f, const gm_cfg *c, const bool *on, bool *any) {
  char s[1024];
  size_t o = (size_t)snprintf(s, sizeof s, "<");
  *any = false;
  for (int l = 0; l < c->vl; l++) {
    o += (size_t)snprintf(s + o, sizeof s - o, "%si1 %s", l ? ", " : "", on[l] ? "true" : "false");
    *any = *any || on[l];
  }
  snprintf(s + o, sizeof s - o, ">");
  return gm_ev(f, "select i1 true, %s %s, %s zeroinitializer", c->mty, s, c->mty);
}

/* A shuffle of a and b (2 vl lanes) by the indices idx[0..vl). */
cg_val gm_shuffle(cg_fn *f, const gm_cfg *c, cg_val a, cg_val b, const int *idx) {
  char s[512];
  size_t o = (size_t)snprintf(s, sizeof s, "<");
  for (int l = 0; l < c->vl; l++)
    o += (size_t)snprintf(s + o, sizeof s - o, "%si32 %d", l ? ", " : "", idx[l]);
  snprintf(s + o, sizeof s - o, ">");
  return gm_ev(f, "shufflevector %s %s, %s %s, %s %s", c->vty, a.s, c->vty, b.s, c->ity, s);
}

uint32_t gm_if(cg_fn *f, cg_val cond) {
  uint32_t id = cg_label(f);
  cg_line(f, "br i1 %s, label %%I%u.then, label %%I%u.end", cond.s, id, id);
  dpc_buf_printf(&f->body, "I%u.then:\n", id);
  return id;
}

void gm_endif(cg_fn *f, uint32_t id) {
  cg_line(f, "br label %%I%u.end", id);
  dpc_buf_printf(&f->body, "I%u.end:\n", id);
}

cg_val gm_ceil_div(cg_fn *f, cg_val n, int64_t step) {
  cg_val t = gm_ev(f, "add i64 %s, %lld", n.s, (long long)(step - 1));
  return gm_ev(f, "sdiv i64 %s, %lld", t.s, (long long)step);
}

static cg_val mul_c(cg_fn *f, cg_val a, int64_t k) {
  if (k == 1) return a;
  return gm_ev(f, "mul i64 %s, %lld", a.s, (long long)k);
}

static cg_val add_c(cg_fn *f, cg_val a, int64_t k) {
  if (k == 0) return a;
  return gm_ev(f, "add i64 %s, %lld", a.s, (long long)k);
}

/* ---- choosing the shapes --------------------------------------------------------------------- */

static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

static int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

bool gm_vec_ok(const gm_cfg *c, dpc_dtype t) {
  return !strcmp(cg_store_type(t), c->ty);
}

int64_t gm_pad_ld(const gm_cfg *c, int64_t cols) {
  /* whole cache lines (also a whole number of vectors at any width), then an odd count of them:
   * row r then starts r * odd lines further on, which visits every set before repeating */
  int64_t lines = ceil_div(cols * c->esize, 64);
  if (lines % 2 == 0) lines++;
  return lines * 64 / c->esize;
}

typedef struct tile {
  int mr, nv;
} tile;

/* Micro-tiles that fit the register file: mr*nv accumulators + nv B vectors + 1 spare. */
static const tile tiles32[] = {{14, 2}, {28, 1}, {8, 3}, {6, 4}, {4, 6}, {2, 8}};
static const tile tiles16[] = {{6, 2}, {12, 1}, {4, 3}, {2, 4}};

/* The tile cost model's KC for an mr x nr tile: as deep as an A strip and a B panel (mr + nr
 * elements per step of k) fit ~32 KiB of L1 together. It weighs the tiles' per-block costs
 * against each other as the tile choices were tuned; the KC the kernels use is KC_BYTES. */
static int64_t kc_for(const gm_cfg *c, int mr, int64_t nr) {
  int64_t kc = L1_PANELS / ((mr + nr) * c->esize) / 16 * 16;
  return kc < 64 ? 64 : kc > 512 ? 512 : kc;
}

void gm_choose(gm_cfg *c, int vector_bits, dpc_dtype calc, int64_t m, int64_t n, int64_t k) {
  memset(c, 0, sizeof *c);
  c->calc = calc == DPC_F64 ? DPC_F64 : DPC_F32;
  c->ty = c->calc == DPC_F64 ? "double" : "float";
  c->esize = c->calc == DPC_F64 ? 8 : 4;
  c->vl = vector_bits / 8 / c->esize;
  const char *sc = c->calc == DPC_F64 ? "f64" : "f32";
  snprintf(c->vty, sizeof c->vty, "<%d x %s>", c->vl, c->ty);
  snprintf(c->mty, sizeof c->mty, "<%d x i1>", c->vl);
  snprintf(c->ity, sizeof c->ity, "<%d x i32>", c->vl);
  snprintf(c->sfx, sizeof c->sfx, "v%d%s.p0", c->vl, sc);
  if (m < 1) m = 1;
  if (n < 1) n = 1;
  if (k < 1) k = 1;
  /* Cost in cycles: per step of k a tile issues mr*nv FMAs (two pipes) and mr+nv loads (two
   * ports, but measured nearer 1.5 a cycle next to the FMAs: 28x1, at 29 loads per 28 FMAs, ran
   * 18% slower than 14x2); per KC block it loads and stores its C tile. Padding rows and columns
   * cost as much as real ones, which is what the choice is about. Fewer rows than a tile has
   * also get that tile cut to exactly them (fewer registers, so it still fits): fc3's
   * 10-row transposed products filled 10 of a 14x2 tile's rows. */
  const tile *menu = vector_bits >= 512 ? tiles32 : tiles16;
  size_t nmenu =
      vector_bits >= 512 ? sizeof tiles32 / sizeof *tiles32 : sizeof tiles16 / sizeof *tiles16;
  double best = 0;
  for (size_t i = 0; i < 2 * nmenu; i++) {
    tile cut = menu[i % nmenu];
    if (i >= nmenu) {
      if (m >= cut.mr) continue;
      cut.mr = (int)m;
    }
    const tile *t = &cut;
    int64_t nr = (int64_t)t->nv * c->vl;
    double fma = t->mr * t->nv / 2.0, loads = (t->mr + t->nv) / 1.5;
    double per_k = fma > loads ? fma : loads;
    double blocks = (double)ceil_div(k, kc_for(c, t->mr, nr));
    double cost = (double)(ceil_div(m, t->mr) * ceil_div(n, nr)) *
                  ((double)k * per_k + blocks * (2.0 * t->mr * t->nv + 20));
    if (i == 0 || cost < best) {
      best = c->cost = cost;
      c->mr = t->mr;
      c->nv = t->nv;
    }
  }
  c->nr = c->nv * c->vl;
  /* KC at most KC_BYTES, spread evenly over k (784 = 2 x 392 rather than 512 + 272); MC and
   * NC fill the L2 budgets. KC is the same whatever tile m chose: an element's sum is its KC
   * blocks' partial sums in turn, so a KC that followed m would round a row differently in
   * plans for different batch sizes, and a batched request would not get the bits it gets
   * alone. */
  int64_t deep = KC_BYTES / c->esize;
  c->kc = round_up(ceil_div(k, ceil_div(k, deep)), 8);
  int64_t kcp = gm_pad_ld(c, c->kc);
  c->mc = L2_A / (kcp * c->esize) / c->mr * c->mr;
  if (c->mc < c->mr) c->mc = c->mr;
  c->nc = L2_B / (round_up(c->kc, c->vl) * c->esize) / c->nr * c->nr;
  if (c->nc < c->nr) c->nc = c->nr;
  gm_fit(c, m, n);
}

void gm_fit(gm_cfg *c, int64_t mb_max, int64_t nb_max) {
  if (mb_max < 1) mb_max = 1;
  if (nb_max < 1) nb_max = 1;
  if (c->mc > round_up(mb_max, c->mr)) c->mc = round_up(mb_max, c->mr);
  if (c->nc > round_up(nb_max, c->nr)) c->nc = round_up(nb_max, c->nr);
  c->mmax = mb_max;
  c->nmax = nb_max;
}

void gm_split(const gm_cfg *c, int64_t m, int64_t n, int64_t k, int64_t nbatch, bool scratch_c,
              int64_t *mb, int64_t *nb) {
  int64_t MB = m < 1 ? 1 : m, NB = n < 1 ? 1 : n;
  /* a B block wider than NC would be re-packed per A block anyway: cut n there, evenly */
  if (NB > c->nc) NB = round_up(ceil_div(n, ceil_div(n, c->nc)), c->nr);
  while (scratch_c && MB * NB > SCRATCH_C && (MB > c->mr || NB > c->nr)) {
    if (MB >= NB && MB > c->mr)
      MB = round_up(ceil_div(MB, 2), c->mr);
    else
      NB = round_up(ceil_div(NB, 2), c->nr);
  }
  /* Enough pieces for two cores, and an even count so two cores get equal shares (or at least
   * 8, when the imbalance is small anyway). Halve the longer side: a piece repacks the A rows
   * and B columns it uses, so square pieces repack least. Stop before a piece falls under
   * ~1 MFLOP, where the split costs more than it gains. */
  double flops = 2.0 * (double)m * (double)n * (double)(k < 1 ? 1 : k) * (double)nbatch;
  for (;;) {
    int64_t pieces = nbatch * ceil_div(m, MB) * ceil_div(n, NB);
    if (gm_pieces_shared(pieces)) break;
    if (flops / (double)pieces / 2 < 1e6) break;
    if (MB >= NB && MB > c->mr)
      MB = round_up(ceil_div(MB, 2), c->mr);
    else if (NB > c->nr)
      NB = round_up(ceil_div(NB, 2), c->nr);
    else if (MB > c->mr)
      MB = round_up(ceil_div(MB, 2), c->mr);
    else
      break;
  }
  *mb = MB;
  *nb = NB;
}

/* ---- the micro-kernel ------------------------------------------------------------------------ */

typedef struct micro_args {
  cg_val ap;                /* A(row 0 of the strip, 0) in the packed block */
  int64_t a_rs, a_cs;       /* its strides */
  cg_val bp;                /* B(0, col 0 of the panel) */
  int64_t b_rs;             /* step of a B row: nr when packed, the buffer's row when direct */
  int b_align;              /* alignment of the B vectors */
  bool b_masked;            /* B read in place: vectors past the tile's columns are masked off */
  int64_t b_ahead;          /* B read in place: prefetch each row this many elements ahead, or 0 */
  bool a_pf;                /* A read in place: a line of the next strip prefetched each step */
  cg_val a_next;            /* with a_pf: the next strip's A(0, 0) */
  cg_val a_pf_on;           /* with a_pf, i1: this panel prefetches */
  cg_val cp;                /* C(row, col) of the tile's corner */
  int64_t ldc;              /* C row stride */
  cg_val mr, nr, kc;        /* rows and columns of the tile that exist, depth */
  cg_val lo;                /* with shifted: the first row that exists (rows [lo, mr) do) */
  bool shifted;             /* A read in place: a short last strip is moved up (gm_block) */
  cg_val first;             /* i1: start from zero instead of loading C */
  const gm_tile_hook *hook; /* or NULL */
  cg_val done;              /* with hook, i1: the sums are complete, run it */
  cg_val row, col;          /* with hook: the tile's corner in the block's C */
} micro_args;

/* The MR x NR tile: accumulators as phis of a do-while over k (kc >= 1), started from zero.
 * C is prefetched before the loop and added after it: by then (kc * MR * NV FMAs later, ~2500
 * cycles for 14x2 and kc = 176) its lines are in L1, where loading C first would stall on
 * memory once per tile per KC block (1024^3 and up, where C no longer stays in cache). Loads
 * and stores of C are masked to the rows and columns that exist. fmul/fadd carry `contract` so
 * the backend fuses them into FMAs where the target has them (and stays correct, unfused,
 * where it does not). */
static dpc_status micro(cg_fn *f, const gm_cfg *c, const micro_args *x, dpc_diag *d) {
  uint32_t id = cg_label(f);
  int MR = c->mr, NV = c->nv, VL = c->vl;
  cg_val cm[MAX_NV], mk[MAX_MR][MAX_NV], cptr[MAX_MR][MAX_NV], live[MAX_MR];
  for (int v = 0; v < NV; v++)
    cm[v] = gm_lanes(f, c, cg_const_i64(0), add_c(f, x->nr, -(int64_t)v * VL));
  bool shifted = x->shifted;
  for (int r = 0; r < MR; r++) {
    cg_val rv = gm_ev(f, "icmp sgt i64 %s, %d", x->mr.s, r);
    if (shifted)
      rv = gm_ev(f, "and i1 %s, %s", rv.s, gm_ev(f, "icmp sle i64 %s, %d", x->lo.s, r).s);
    live[r] = rv;
    for (int v = 0; v < NV; v++) {
      mk[r][v] = r == 0 && !shifted ? cm[v]
                                    : gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", rv.s,
                                            c->mty, cm[v].s, c->mty);
      /* rows past mr may lie past the matrix: they read and write nothing, but their address
       * must still be mapped (a masked access to an unmapped page costs a microcode assist,
       * ~100x a load), so they point at row 0 */
      cg_val at = gm_gep(f, c->ty, x->cp, cg_const_i64(r * x->ldc + v * VL), false);
      cptr[r][v] = r == 0 ? at
                          : gm_ev(f, "select i1 %s, %s* %s, %s* %s", rv.s, c->ty, at.s, c->ty,
                                  gm_gep(f, c->ty, x->cp, cg_const_i64(v * VL), false).s);
    }
  }
  cg_line(f, "br label %%K%u.pre", id);
  dpc_buf_printf(&f->body, "K%u.pre:\n", id);
  /* one prefetch per cache line of the tile's rows (for writing: the tile is stored) */
  int lines = (c->nr * c->esize + 63) / 64;
  for (int r = 0; r < MR; r++)
    for (int l = 0; l < lines; l++) {
      cg_val at = gm_gep(f, c->ty, cptr[r][0], cg_const_i64(l * 64 / c->esize), false);
      cg_val raw = gm_ev(f, "bitcast %s* %s to i8*", c->ty, at.s);
      cg_line(f, "call void @llvm.prefetch.p0(i8* %s, i32 1, i32 3, i32 1)", raw.s);
    }
  cg_line(f, "br label %%K%u.k", id);
  dpc_buf_printf(&f->body, "K%u.k:\n", id);
  cg_line(f, "%%K%u.p = phi i64 [0, %%K%u.pre], [%%K%u.pn, %%K%u.k]", id, id, id, id);
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < NV; v++)
      cg_line(f, "%%K%u.a%d_%d = phi %s [zeroinitializer, %%K%u.pre], [%%K%u.n%d_%d, %%K%u.k]", id,
              r, v, c->vty, id, id, r, v, id);
  cg_val p;
  snprintf(p.s, sizeof p.s, "%%K%u.p", id);
  cg_val bq = gm_gep(f, c->ty, x->bp, mul_c(f, p, x->b_rs), true);
  cg_val bv[MAX_NV];
  for (int v = 0; v < NV; v++) {
    cg_val at = gm_gep(f, c->ty, bq, cg_const_i64(v * VL), true);
    bv[v] = x->b_masked ? gm_mload(f, c, at, cm[v]) : gm_vload(f, c, at, x->b_align);
  }
  if (x->b_ahead)
    for (int v = 0; v < NV; v++) {
      cg_val at = gm_gep(f, c->ty, bq, cg_const_i64(v * VL + x->b_ahead), false);
      cg_line(f, "call void @llvm.prefetch.p0(i8* %s, i32 0, i32 3, i32 1)",
              gm_ev(f, "bitcast %s* %s to i8*", c->ty, at.s).s);
    }
  cg_val aq = gm_gep(f, c->ty, x->ap, mul_c(f, p, x->a_cs), true);
  if (x->a_pf) {
    /* line p / MR of row p % MR: the next strip's MR rows of kc elements in kc steps while
     * MR <= 64 / esize; spread over the loop, where all at once at the panel's start (140
     * prefetches for 14 rows of 160) were no faster than none */
    int64_t per = 64 / c->esize;
    cg_val r = gm_ev(f, "urem i64 %s, %d", p.s, MR);
    cg_val l = gm_ev(f, "udiv i64 %s, %d", p.s, MR);
    cg_val off = cg_add(f, mul_c(f, r, x->a_rs), mul_c(f, l, per));
    cg_val at = gm_gep(f, c->ty, x->a_next, off, false);
    cg_val safe =
        gm_ev(f, "select i1 %s, %s* %s, %s* %s", x->a_pf_on.s, c->ty, at.s, c->ty, x->ap.s);
    cg_line(f, "call void @llvm.prefetch.p0(i8* %s, i32 0, i32 3, i32 1)",
            gm_ev(f, "bitcast %s* %s to i8*", c->ty, safe.s).s);
  }
  for (int r = 0; r < MR; r++) {
    cg_val a = gm_ev(f, "load %s, %s* %s", c->ty, c->ty,
                     gm_gep(f, c->ty, aq, cg_const_i64(r * x->a_rs), true).s);
    cg_val s = gm_splat(f, c, a);
    for (int v = 0; v < NV; v++) {
      cg_val prod = gm_ev(f, "fmul contract %s %s, %s", c->vty, s.s, bv[v].s);
      cg_line(f, "%%K%u.n%d_%d = fadd contract %s %%K%u.a%d_%d, %s", id, r, v, c->vty, id, r, v,
              prod.s);
    }
  }
  cg_line(f, "%%K%u.pn = add nuw nsw i64 %%K%u.p, 1", id, id);
  cg_val more = gm_ev(f, "icmp slt i64 %%K%u.pn, %s", id, x->kc.s);
  cg_line(f, "br i1 %s, label %%K%u.k, label %%K%u.d", more.s, id, id);
  dpc_buf_printf(&f->body, "K%u.d:\n", id);
  /* C += the tile, or C = the tile on the first block of k */
  cg_val keep = gm_ev(f, "xor i1 %s, true", x->first.s);
  cg_val sum[MAX_MR][MAX_NV];
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < NV; v++) {
      cg_val acc;
      snprintf(acc.s, sizeof acc.s, "%%K%u.n%d_%d", id, r, v);
      cg_val m =
          gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", keep.s, c->mty, mk[r][v].s, c->mty);
      cg_val old = gm_mload(f, c, cptr[r][v], m);
      sum[r][v] = gm_ev(f, "fadd %s %s, %s", c->vty, acc.s, old.s);
    }
  dpc_status st = DPC_OK;
  if (x->hook) {
    /* the sums complete: the hook on each row's vectors before they are stored, so the tile
     * is stored once (the same chain run on the stored tile read back at once was slower than
     * the pass over whole rows: MobileNetV2 at batch 8, 65 to 67 ms; this, 64 ms) */
    cg_line(f, "br i1 %s, label %%K%u.h, label %%K%u.s", x->done.s, id, id);
    dpc_buf_printf(&f->body, "K%u.h:\n", id);
    for (int r = 0; r < MR && !st; r++) {
      /* a row that does not exist is computed on the first one's inputs and not stored */
      cg_val at = gm_ev(f, "select i1 %s, i64 %d, i64 %s", live[r].s, r, shifted ? x->lo.s : "0");
      cg_val v[MAX_NV];
      for (int q = 0; q < NV; q++) v[q] = sum[r][q];
      st = x->hook->fn(f, c, x->hook->ctx, cg_add(f, x->row, at), x->col, v, mk[r], d);
      for (int q = 0; q < NV; q++) gm_mstore(f, c, v[q], cptr[r][q], mk[r][q]);
    }
    cg_line(f, "br label %%K%u.e", id);
    dpc_buf_printf(&f->body, "K%u.s:\n", id);
  }
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < NV; v++) gm_mstore(f, c, sum[r][v], cptr[r][v], mk[r][v]);
  if (x->hook) {
    cg_line(f, "br label %%K%u.e", id);
    dpc_buf_printf(&f->body, "K%u.e:\n", id);
  }
  return st;
}

/* ---- packing --------------------------------------------------------------------------------- */

/* rows[0..vl) become their transpose, in log2(vl) rounds of two-input shuffles: the round with
 * distance d swaps bit d of the row index with bit d of the lane index. */
void gm_transpose(cg_fn *f, const gm_cfg *c, cg_val *rows) {
  int VL = c->vl;
  for (int d = 1; d < VL; d <<= 1) {
    char lo[512], hi[512];
    size_t ol = (size_t)snprintf(lo, sizeof lo, "<"), oh = (size_t)snprintf(hi, sizeof hi, "<");
    for (int l = 0; l < VL; l++) {
      int a = (l & d) ? VL + l - d : l, b = (l & d) ? VL + l : l + d;
      ol += (size_t)snprintf(lo + ol, sizeof lo - ol, "%si32 %d", l ? ", " : "", a);
      oh += (size_t)snprintf(hi + oh, sizeof hi - oh, "%si32 %d", l ? ", " : "", b);
    }
    snprintf(lo + ol, sizeof lo - ol, ">");
    snprintf(hi + oh, sizeof hi - oh, ">");
    for (int r = 0; r < VL; r++) {
      if (r & d) continue;
      cg_val x = gm_ev(f, "shufflevector %s %s, %s %s, %s %s", c->vty, rows[r].s, c->vty,
                       rows[r + d].s, c->ity, lo);
      cg_val y = gm_ev(f, "shufflevector %s %s, %s %s, %s %s", c->vty, rows[r].s, c->vty,
                       rows[r + d].s, c->ity, hi);
      rows[r] = x;
      rows[r + d] = y;
    }
  }
}

/* B[pc:pc+kc, jc:jc+ncur] into panels: panel q holds columns [q*nr, q*nr+nr) as kc rows of nr
 * contiguous elements, panels kca*nr apart; columns past ncur are zeros. */
static void pack_b(cg_fn *f, const gm_cfg *c, const gm_mat *b, cg_val bp, int64_t kca, cg_val pc,
                   cg_val kc, cg_val jc, cg_val ncur) {
  int NR = c->nr, VL = c->vl, NV = c->nv;
  int valign = VL * c->esize;
  cg_loop jp = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, ncur, NR));
  cg_val ncol = gm_sub(f, ncur, mul_c(f, jp.i, NR)); /* columns left from this panel on */
  cg_val j0 = cg_add(f, jc, mul_c(f, jp.i, NR));
  cg_val panel = gm_gep(f, c->ty, bp, mul_c(f, jp.i, kca * NR), true);
  if (gm_vec_ok(c, b->t) && b->cs == 1) {
    /* rows of B are contiguous: NV masked vector loads per row */
    cg_val mask[MAX_NV];
    for (int v = 0; v < NV; v++)
      mask[v] = gm_lanes(f, c, cg_const_i64(0), add_c(f, ncol, -(int64_t)v * VL));
    cg_loop p = cg_loop_begin(f, cg_const_i64(0), kc);
    cg_val row = cg_add(f, mul_c(f, cg_add(f, pc, p.i), b->rs), j0);
    cg_val src = gm_gep(f, c->ty, b->p, row, false);
    cg_val dst = gm_gep(f, c->ty, panel, mul_c(f, p.i, NR), true);
    for (int v = 0; v < NV; v++) {
      cg_val x = gm_mload(f, c, gm_gep(f, c->ty, src, cg_const_i64(v * VL), false), mask[v]);
      gm_vstore(f, c, x, gm_gep(f, c->ty, dst, cg_const_i64(v * VL), true), valign);
    }
    cg_loop_end(f, p);
  } else if (gm_vec_ok(c, b->t) && b->rs == 1) {
    /* B^T: columns of B are contiguous; load vl of them vl deep, transpose in registers */
    cg_loop p0 = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, kc, VL));
    cg_val k0 = mul_c(f, p0.i, VL);
    cg_val kmask = gm_lanes(f, c, cg_const_i64(0), gm_sub(f, kc, k0));
    cg_val kbase = cg_add(f, pc, k0);
    for (int v = 0; v < NV; v++) {
      cg_val rows[MAX_VL];
      for (int l = 0; l < VL; l++) {
        cg_val live = gm_ev(f, "icmp sgt i64 %s, %d", ncol.s, v * VL + l);
        cg_val m =
            gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", live.s, c->mty, kmask.s, c->mty);
        /* a dead column reads (masked) the panel's first one: its own may be unmapped */
        cg_val j =
            gm_ev(f, "select i1 %s, i64 %s, i64 %s", live.s, add_c(f, j0, v * VL + l).s, j0.s);
        cg_val col = mul_c(f, j, b->cs);
        rows[l] = gm_mload(f, c, gm_gep(f, c->ty, b->p, cg_add(f, col, kbase), false), m);
      }
      gm_transpose(f, c, rows);
      /* rows past kc land in the panel's padding (kca is a multiple of vl) and are never read */
      cg_val dst = gm_gep(f, c->ty, panel, mul_c(f, k0, NR), true);
      for (int q = 0; q < VL; q++)
        gm_vstore(f, c, rows[q], gm_gep(f, c->ty, dst, cg_const_i64(q * NR + v * VL), true),
                  valign);
    }
    cg_loop_end(f, p0);
  } else {
    /* anything else (strided, or f16/bf16 to widen): element by element */
    cg_val live = gm_min(f, ncol, cg_const_i64(NR));
    cg_loop p = cg_loop_begin(f, cg_const_i64(0), kc);
    cg_val row = mul_c(f, cg_add(f, pc, p.i), b->rs);
    cg_val dst = gm_gep(f, c->ty, panel, mul_c(f, p.i, NR), true);
    cg_loop j = cg_loop_begin(f, cg_const_i64(0), live);
    cg_val x = cg_load(f, b->p, b->t, cg_add(f, row, mul_c(f, cg_add(f, j0, j.i), b->cs)));
    cg_line(f, "store %s %s, %s* %s", c->ty, x.s, c->ty, gm_gep(f, c->ty, dst, j.i, true).s);
    cg_loop_end(f, j);
    cg_loop z = cg_loop_begin(f, live, cg_const_i64(NR));
    cg_line(f, "store %s %s, %s* %s", c->ty, cg_const(c->calc, 0).s, c->ty,
            gm_gep(f, c->ty, dst, z.i, true).s);
    cg_loop_end(f, z);
    cg_loop_end(f, p);
  }
  cg_loop_end(f, jp);
}

/* Prefetch n elements from p + ahead. The rows a packer reads are a few hundred bytes each and
 * far apart: too short for the hardware prefetcher to pick up, so without this each would
 * start with a trip to memory (~350 cycles; 364 rows per A block at 2048^3, where prefetching
 * PF_ROWS rows ahead took dpc from 0.86 to 0.95 of OpenBLAS). Past the matrix's end the
 * prefetch is dropped: it never faults. */
static void prefetch_row(cg_fn *f, const gm_cfg *c, cg_val p, int64_t ahead, int64_t n) {
  cg_val row = gm_gep(f, c->ty, p, cg_const_i64(ahead), false);
  for (int64_t l = 0; l < ceil_div(n * c->esize, 64); l++) {
    cg_val at = gm_gep(f, c->ty, row, cg_const_i64(l * 64 / c->esize), false);
    cg_line(f, "call void @llvm.prefetch.p0(i8* %s, i32 0, i32 3, i32 1)",
            gm_ev(f, "bitcast %s* %s to i8*", c->ty, at.s).s);
  }
}

/* A[ic:ic+mcur, pc:pc+kc] into ap, rows padded with zeros to a multiple of mr. Row-major with
 * row stride ld, or (colmajor) column-major with column stride ld. */
static void pack_a(cg_fn *f, const gm_cfg *c, const gm_mat *a, cg_val ap, bool colmajor, int64_t ld,
                   cg_val ic, cg_val mcur, cg_val pc, cg_val kc) {
  int VL = c->vl;
  int valign = VL * c->esize;
  cg_val mrows = mul_c(f, gm_ceil_div(f, mcur, c->mr), c->mr);
  if (colmajor) {
    /* A^T: each column of the block is contiguous */
    cg_loop p = cg_loop_begin(f, cg_const_i64(0), kc);
    cg_val src = gm_gep(f, c->ty, a->p, cg_add(f, mul_c(f, cg_add(f, pc, p.i), a->cs), ic), false);
    cg_val dst = gm_gep(f, c->ty, ap, mul_c(f, p.i, ld), true);
    prefetch_row(f, c, src, PF_ROWS * a->cs, c->mc);
    cg_loop i0 = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, mrows, VL));
    cg_val off = mul_c(f, i0.i, VL);
    cg_val m = gm_lanes(f, c, cg_const_i64(0), gm_sub(f, mcur, off));
    cg_val x = gm_mload(f, c, gm_gep(f, c->ty, src, off, false), m);
    gm_vstore(f, c, x, gm_gep(f, c->ty, dst, off, true), valign);
    cg_loop_end(f, i0);
    cg_loop_end(f, p);
  } else if (gm_vec_ok(c, a->t) && a->cs == 1) {
    cg_loop i = cg_loop_begin(f, cg_const_i64(0), mrows);
    cg_val live = gm_ev(f, "icmp slt i64 %s, %s", i.i.s, mcur.s);
    cg_val row = gm_ev(f, "select i1 %s, i64 %s, i64 %s", live.s, cg_add(f, ic, i.i).s, ic.s);
    cg_val src = gm_gep(f, c->ty, a->p, cg_add(f, mul_c(f, row, a->rs), pc), false);
    prefetch_row(f, c, src, PF_ROWS * a->rs, c->kc);
    cg_val dst = gm_gep(f, c->ty, ap, mul_c(f, i.i, ld), true);
    cg_loop p0 = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, kc, VL));
    cg_val off = mul_c(f, p0.i, VL);
    cg_val km = gm_lanes(f, c, cg_const_i64(0), gm_sub(f, kc, off));
    cg_val m = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", live.s, c->mty, km.s, c->mty);
    cg_val x = gm_mload(f, c, gm_gep(f, c->ty, src, off, false), m);
    gm_vstore(f, c, x, gm_gep(f, c->ty, dst, off, true), valign);
    cg_loop_end(f, p0);
    cg_loop_end(f, i);
  } else {
    cg_loop i = cg_loop_begin(f, cg_const_i64(0), mrows);
    cg_val live = gm_ev(f, "icmp slt i64 %s, %s", i.i.s, mcur.s);
    cg_val dst = gm_gep(f, c->ty, ap, mul_c(f, i.i, ld), true);
    uint32_t yes = gm_if(f, live);
    cg_val row = mul_c(f, cg_add(f, ic, i.i), a->rs);
    cg_loop p = cg_loop_begin(f, cg_const_i64(0), kc);
    cg_val x = cg_load(f, a->p, a->t, cg_add(f, row, mul_c(f, cg_add(f, pc, p.i), a->cs)));
    cg_line(f, "store %s %s, %s* %s", c->ty, x.s, c->ty, gm_gep(f, c->ty, dst, p.i, true).s);
    cg_loop_end(f, p);
    gm_endif(f, yes);
    cg_val dead = gm_ev(f, "xor i1 %s, true", live.s);
    uint32_t no = gm_if(f, dead);
    cg_loop z = cg_loop_begin(f, cg_const_i64(0), kc);
    cg_line(f, "store %s %s, %s* %s", c->ty, cg_const(c->calc, 0).s, c->ty,
            gm_gep(f, c->ty, dst, z.i, true).s);
    cg_loop_end(f, z);
    gm_endif(f, no);
    cg_loop_end(f, i);
  }
}

/* ---- the block ------------------------------------------------------------------------------- */

/* Copy an m x n matrix between the caller's C (any dtype, any strides) and the calc-type
 * scratch s (row stride lds). */
static void copy_c(cg_fn *f, const gm_cfg *c, const gm_mat *cm, cg_val s, int64_t lds, cg_val m,
                   cg_val n, bool to_scratch) {
  cg_loop i = cg_loop_begin(f, cg_const_i64(0), m);
  cg_loop j = cg_loop_begin(f, cg_const_i64(0), n);
  cg_val idx = cg_add(f, mul_c(f, i.i, cm->rs), mul_c(f, j.i, cm->cs));
  cg_val sp = gm_gep(f, c->ty, s, cg_add(f, mul_c(f, i.i, lds), j.i), true);
  if (to_scratch) {
    cg_val x = cg_load(f, cm->p, cm->t, idx);
    cg_line(f, "store %s %s, %s* %s", c->ty, x.s, c->ty, sp.s);
  } else {
    cg_val x = gm_ev(f, "load %s, %s* %s", c->ty, c->ty, sp.s);
    cg_store(f, cm->p, cm->t, idx, x);
  }
  cg_loop_end(f, j);
  cg_loop_end(f, i);
}

/* The scratch (m x n, row stride lds) out to a calc-typed C stored transposed (rs == 1: C's
 * columns are contiguous): blocks of vl x vl through the register transpose, vl elements a store
 * where the scalar copy stored one (fc3's weight gradient, 10 x 512, written as 512 x 10). */
static void copy_c_transposed(cg_fn *f, const gm_cfg *c, const gm_mat *cm, cg_val s, int64_t lds,
                              cg_val m, cg_val n) {
  int VL = c->vl;
  cg_loop ib = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, m, VL));
  cg_val i0 = mul_c(f, ib.i, VL);
  cg_val im = gm_lanes(f, c, cg_const_i64(0), gm_sub(f, m, i0)); /* rows of the block that exist */
  cg_loop jb = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, n, VL));
  cg_val j0 = mul_c(f, jb.i, VL);
  cg_val nj = gm_sub(f, n, j0);
  cg_val jm = gm_lanes(f, c, cg_const_i64(0), nj);
  cg_val rows[MAX_VL];
  for (int r = 0; r < VL; r++) {
    /* a row past m reads nothing (masked off) from row i0, which exists */
    cg_val live = gm_ev(f, "icmp slt i64 %s, %s", add_c(f, i0, r).s, m.s);
    cg_val at = gm_ev(f, "select i1 %s, i64 %s, i64 %s", live.s, add_c(f, i0, r).s, i0.s);
    cg_val mk = gm_ev(f, "select i1 %s, %s %s, %s zeroinitializer", live.s, c->mty, jm.s, c->mty);
    rows[r] = gm_mload(f, c, gm_gep(f, c->ty, s, cg_add(f, mul_c(f, at, lds), j0), true), mk);
  }
  gm_transpose(f, c, rows);
  for (int q = 0; q < VL; q++) {
    /* row q of the transpose is C's column j0 + q, rows [i0, i0 + vl) */
    cg_val live = gm_ev(f, "icmp sgt i64 %s, %d", nj.s, q);
    uint32_t st = gm_if(f, live);
    cg_val at = cg_add(f, mul_c(f, add_c(f, j0, q), cm->cs), i0);
    gm_mstore(f, c, rows[q], gm_gep(f, c->ty, cm->p, at, true), im);
    gm_endif(f, st);
  }
  cg_loop_end(f, jb);
  cg_loop_end(f, ib);
}

void gm_block(cg_fn *f, const gm_cfg *c, const gm_mat *a, const gm_mat *b, const gm_mat *cm,
              cg_val m, cg_val n, cg_val k, cg_val acc) {
  (void)gm_block_then(f, c, a, b, cm, m, n, k, acc, NULL, NULL); /* no hook: cannot fail */
}

dpc_status gm_block_then(cg_fn *f, const gm_cfg *c, const gm_mat *a, const gm_mat *b,
                         const gm_mat *cm, cg_val m, cg_val n, cg_val k, cg_val acc,
                         const gm_tile_hook *h, dpc_diag *d) {
  dpc_status st = DPC_OK;
  if (h && !(gm_vec_ok(c, cm->t) && cm->cs == 1))
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "gm_block_then: C is not written in place");
  int64_t MR = c->mr, NR = c->nr, KC = c->kc, MC = c->mc, NC = c->nc;
  int64_t kca = round_up(KC, c->vl); /* rows of a B panel */
  /* A: column-major copy when A^T is what is stored (its columns are contiguous) */
  bool a_col = !a->direct && gm_vec_ok(c, a->t) && a->rs == 1 && a->cs != 1;
  int64_t lda = a_col ? gm_pad_ld(c, round_up(MC, MR)) : gm_pad_ld(c, KC);
  cg_val ap = a->direct ? a->p : gm_alloca(f, c->ty, a_col ? KC * lda : round_up(MC, MR) * lda);
  cg_val bp = b->direct ? b->p : gm_alloca(f, c->ty, ceil_div(NC, NR) * kca * NR);
  /* C: straight into the output when it is calc-typed with contiguous rows */
  bool c_direct = gm_vec_ok(c, cm->t) && cm->cs == 1;
  cg_val cw = cm->p;
  int64_t ldc = cm->rs;
  if (!c_direct) {
    ldc = gm_pad_ld(c, round_up(c->nmax, NR));
    cw = gm_alloca(f, c->ty, c->mmax * ldc);
    uint32_t load = gm_if(f, acc);
    copy_c(f, c, cm, cw, ldc, m, n, true);
    gm_endif(f, load);
  }
  cg_val fresh = gm_ev(f, "xor i1 %s, true", acc.s);
  cg_loop jc = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, n, NC));
  cg_val j0 = mul_c(f, jc.i, NC);
  cg_val ncur = gm_min(f, cg_const_i64(NC), gm_sub(f, n, j0));
  cg_val nkb = gm_ceil_div(f, k, KC);
  cg_loop kb = cg_loop_begin(f, cg_const_i64(0), nkb);
  cg_val pc = mul_c(f, kb.i, KC);
  cg_val kc = gm_min(f, cg_const_i64(KC), gm_sub(f, k, pc));
  cg_val first = gm_ev(f, "and i1 %s, %s", gm_ev(f, "icmp eq i64 %s, 0", kb.i.s).s, fresh.s);
  if (!b->direct) pack_b(f, c, b, bp, kca, pc, kc, j0, ncur);
  cg_loop ic = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, m, MC));
  cg_val i0 = mul_c(f, ic.i, MC);
  cg_val mcur = gm_min(f, cg_const_i64(MC), gm_sub(f, m, i0));
  if (!a->direct) pack_a(f, c, a, ap, a_col, lda, i0, mcur, pc, kc);
  cg_loop jr = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, ncur, NR));
  cg_val jj = mul_c(f, jr.i, NR);
  micro_args x;
  x.nr = gm_min(f, cg_const_i64(NR), gm_sub(f, ncur, jj));
  if (b->direct) {
    x.bp = gm_gep(f, c->ty, b->p, cg_add(f, mul_c(f, pc, b->rs), cg_add(f, j0, jj)), true);
    x.b_rs = b->rs;
    x.b_align = c->esize;
    x.b_masked = !b->padded;
    /* rows of B far apart (the input planes of a 1x1 convolution, 50 KB apart at 112x112) are
     * as many streams as the panel is deep, more than the hardware prefetcher follows: each
     * row's panel two panels on is fetched while this one computes (MobileNetV2's 32 to 16
     * channels at 112x112, batch 8: 1.9 to 1.2 ms). The im2col buffer (padded) is in cache, and
     * tiles of one or two rows (a classifier at batch 1) are bound by their loads already:
     * the prefetches took one from 0.073 to 0.096 ms with its weights in cache. */
    x.b_ahead = b->padded || MR < 4 ? 0 : 2 * NR;
  } else {
    x.bp = gm_gep(f, c->ty, bp, mul_c(f, jr.i, kca * NR), true);
    x.b_rs = NR;
    x.b_align = c->vl * c->esize;
    x.b_masked = false;
    x.b_ahead = 0;
  }
  cg_loop ir = cg_loop_begin(f, cg_const_i64(0), gm_ceil_div(f, mcur, MR));
  cg_val ii = mul_c(f, ir.i, MR);
  x.mr = gm_min(f, cg_const_i64(MR), gm_sub(f, mcur, ii));
  x.lo = cg_const_i64(0);
  x.shifted = a->direct;
  x.a_pf = false;
  cg_val crow = cg_add(f, i0, ii), ccol = cg_add(f, j0, jj);
  if (a->direct) {
    /* A read where it lies has no zero rows past m to pad a short last strip with: the strip
     * moves up to end at row m instead (m >= MR, the caller's promise), and its first rows,
     * which the strip before computed, are masked off */
    cg_val top = gm_min(f, crow, gm_sub(f, m, cg_const_i64(MR)));
    x.lo = gm_sub(f, crow, top);
    x.mr = cg_add(f, x.lo, x.mr);
    crow = top;
    x.a_rs = a->rs;
    x.a_cs = a->cs;
    x.ap = gm_gep(f, c->ty, a->p, cg_add(f, mul_c(f, crow, a->rs), mul_c(f, pc, a->cs)), true);
    if (a->cs == 1 && c->mmax * a->rs * c->esize > A_STREAMED) {
      /* weights come from memory on the first panel, a few hundred bytes from each of MR rows
       * far apart, which the hardware prefetcher does not follow: the next strip's rows are
       * fetched while this one's first panel computes (MobileNetV2's 160 to 960 channels at
       * 7x7, its weights cold: 0.27 to 0.19 ms) */
      x.a_pf = true;
      x.a_pf_on = gm_ev(f, "icmp eq i64 %s, 0", jr.i.s);
      x.a_next = gm_gep(f, c->ty, x.ap, cg_const_i64(MR * a->rs), false);
    }
  } else {
    x.a_rs = a_col ? 1 : lda;
    x.a_cs = a_col ? lda : 1;
    x.ap = gm_gep(f, c->ty, ap, mul_c(f, ii, x.a_rs), true);
  }
  x.cp = gm_gep(f, c->ty, cw, cg_add(f, mul_c(f, crow, ldc), ccol), true);
  x.ldc = ldc;
  x.kc = kc;
  x.first = first;
  x.hook = h;
  if (h) {
    /* the sums are complete on the last block of k of the last pass */
    cg_val end = gm_ev(f, "icmp eq i64 %s, %s", kb.i.s, gm_sub(f, nkb, cg_const_i64(1)).s);
    x.done = gm_ev(f, "and i1 %s, %s", h->last.s, end.s);
    x.row = crow;
    x.col = ccol;
  }
  dpc_status mst = micro(f, c, &x, d);
  if (!st) st = mst;
  cg_loop_end(f, ir);
  cg_loop_end(f, jr);
  cg_loop_end(f, ic);
  cg_loop_end(f, kb);
  cg_loop_end(f, jc);
  if (c_direct) return st;
  if (gm_vec_ok(c, cm->t) && cm->rs == 1)
    copy_c_transposed(f, c, cm, cw, ldc, m, n);
  else
    copy_c(f, c, cm, cw, ldc, m, n, false);
  return st;
}
