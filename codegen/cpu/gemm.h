/*
 * gemm.h — the GEMM generator shared by lower_matmul.c and lower_window.c: LLVM IR for
 * C = A B (or C += A B) on blocks of any size, packed and cache-blocked, with a register-blocked
 * micro-kernel written for the target's vector width.
 *
 *   gm_cfg c;
 *   gm_choose(&c, f->vector_bits, DPC_F32, m, n, k);    // micro-tile and blocking, at generation
 *   gm_fit(&c, mb_max, nb_max);                          // largest block one call computes
 *   ... in the kernel body, per parallel iteration:
 *   gm_block(f, &c, &a, &b, &cm, mb, nb, kk, acc);       // IR values: rows, columns, depth
 *
 * A matrix is a pointer plus two element strides fixed at generation time (gm_mat), so the
 * transposes of matmul and the row/column orders of convolution are all "packing". The packers
 * read any dtype (f16 and bf16 are widened as they are packed); the product is accumulated in
 * f32, or f64 for f64 data. Also here: small IR helpers the lowerings share (gm_ev & co).
 * Nothing here allocates at run time: every buffer is a fixed-size alloca in the entry block.
 */
#ifndef DPC_CODEGEN_CPU_GEMM_H
#define DPC_CODEGEN_CPU_GEMM_H

#include "codegen/cpu/cg.h"

/* What one generated GEMM computes with. Filled by gm_choose / gm_fit. */
typedef struct gm_cfg {
  dpc_dtype calc;     /* DPC_F32 or DPC_F64 */
  const char *ty;     /* "float" or "double" */
  int esize, vl;      /* bytes per element, elements per vector */
  char vty[32];       /* "<16 x float>" */
  char mty[24];       /* "<16 x i1>" */
  char ity[24];       /* "<16 x i32>" */
  char sfx[24];       /* masked intrinsic suffix, "v16f32.p0" */
  int mr, nv, nr;     /* micro-tile: mr rows x nv vectors (nr = nv * vl columns) */
  int64_t kc;         /* depth of a packed block */
  int64_t mc, nc;     /* rows of a packed A block, columns of a packed B block */
  int64_t mmax, nmax; /* the largest m and n one gm_block call is given */
  double cost;        /* gm_choose's estimate for the whole problem, in cycles */
} gm_cfg;

/* A matrix operand: element (i, j) is p[i * rs + j * cs], p pointing at the stored dtype t.
 * `direct` means gm_block reads the operand in place instead of packing it:
 *   B: p is calc-typed and row-major (cs == 1); vectors past the last column are masked off,
 *      unless `padded` says they can be read whole up to the next multiple of nr (zeros there,
 *      an rs chosen by gm_pad_ld: the im2col buffer), which keeps masks out of the k loop;
 *   A: p is calc-typed (weights as they lie, or stored transposed: rs == 1), and every call's
 *      m is at least mr (a short last strip is moved up over rows that exist rather than padded
 *      with zeros). */
typedef struct gm_mat {
  cg_val p;
  dpc_dtype t;
  int64_t rs, cs;
  bool direct;
  bool padded; /* B only, with direct */
} gm_mat;

/* Pick the micro-tile that wastes least on the problem's edges (a cost model of cycles), then
 * the cache blocking. m, n, k are the full problem's; gm_fit then bounds the blocks by what one
 * gm_block call computes. */
void gm_choose(gm_cfg *c, int vector_bits, dpc_dtype calc, int64_t m, int64_t n, int64_t k);
void gm_fit(gm_cfg *c, int64_t mb_max, int64_t nb_max);

/* How to cut an [m, n] product (nbatch of them, depth k) into the kernel's parallel iterations:
 * blocks of mb x nb (multiples of the micro-tile) so that there are enough of them to share
 * between cores, but each still large enough to amortise its packing. `scratch_c`: the output
 * goes through a calc-type buffer (f16/bf16 output), which bounds mb * nb. */
void gm_split(const gm_cfg *c, int64_t m, int64_t n, int64_t k, int64_t nbatch, bool scratch_c,
              int64_t *mb, int64_t *nb);

/* C[0:m, 0:n] = A[0:m, 0:k] B[0:k, 0:n], or += when acc (an i1) is true. m, n, k are i64 IR
 * values, at most c->mmax, c->nmax and anything; k >= 1. */
void gm_block(cg_fn *f, const gm_cfg *c, const gm_mat *a, const gm_mat *b, const gm_mat *cm,
              cg_val m, cg_val n, cg_val k, cg_val acc);

/* C[0, 0:n] = A[0, 0:k] B[0:k, 0:n] for one row of A and B calc-typed, row-major and read
 * where it lies, streaming B's rows of the piece whole with the sums in an L1 buffer
 * (gemm_stream.c): for a large B at one row, where the micro-kernel's short pieces of rows fall
 * well under memory bandwidth. The same bits as gm_block. n is an i64 IR value, at most
 * gm_stream_width(c); gm_stream_ok says when it applies. C is calc-typed. */
bool gm_stream_ok(const gm_cfg *c, dpc_dtype t, int64_t m, int64_t n, int64_t k, int64_t b_cs);
int64_t gm_stream_width(const gm_cfg *c); /* the most columns one gm_stream takes */
void gm_stream(cg_fn *f, const gm_cfg *c, const gm_mat *a, const gm_mat *b, const gm_mat *cm,
               cg_val n, int64_t k);

/* Most vectors across a micro-tile. */
#define GM_MAX_NV 8

/* What gm_block_then applies to each row of a micro-tile once its sums are complete, before it
 * is stored: v[0..c->nv) are the row's vectors at row `row`, columns from `col` on of the
 * block's C (mask: the lanes that exist), to be replaced by the results. `last` (an i1) says
 * whether this call's k completes the sums (a caller that cuts k into passes calls gm_block
 * once per pass). */
typedef dpc_status (*gm_tile_fn)(cg_fn *f, const gm_cfg *c, void *ctx, cg_val row, cg_val col,
                                 cg_val *v, const cg_val *mask, dpc_diag *d);
typedef struct gm_tile_hook {
  gm_tile_fn fn;
  void *ctx;
  cg_val last;
} gm_tile_hook;

/* gm_block, then `h` (NULL: none) on each finished tile. With a hook, C must be calc-typed
 * with contiguous rows (written in place, not through gm_block's scratch). */
dpc_status gm_block_then(cg_fn *f, const gm_cfg *c, const gm_mat *a, const gm_mat *b,
                         const gm_mat *cm, cg_val m, cg_val n, cg_val k, cg_val acc,
                         const gm_tile_hook *h, dpc_diag *d);

/* A fusion group's epilogue (lower_fused.c) in registers, as a gm_tile_hook's fn with a
 * cg_tile_epi for ctx: the block's rows and columns are the root's output's (seen as [P, Q] at
 * `axis`, as cg_epilogue_block) from r0 and c0 on. cg_tile_epi_init says whether the group's
 * chain can run so and, if it can, works out where each outside input lies, once: f32 add, sub,
 * mul, relu, relu6 and clip, with outside inputs constant along Q (a bias per channel), or
 * contiguous along it and the same for every row (a matmul's bias). */
typedef struct cg_tile_epi {
  cg_val r0, c0;
  uint32_t axis;
  uint32_t first, n_ext;                       /* the outside inputs' first argument, count */
  int64_t col[CG_MAX_OPERANDS];                /* 0: constant along a row; 1: contiguous */
  int64_t full[CG_MAX_OPERANDS][DPC_MAX_RANK]; /* broadcast strides, unmerged */
} cg_tile_epi;
bool cg_tile_epi_init(cg_tile_epi *te, const cg_fn *f, uint32_t axis, cg_val r0, cg_val c0);
dpc_status cg_epilogue_vec(cg_fn *f, const gm_cfg *c, void *ctx, cg_val row, cg_val col, cg_val *v,
                           const cg_val *mask, dpc_diag *d);

/* Whether `pieces` parallel iterations share well between two cores: an even number, or at
 * least 8 (the imbalance is small by then). */
static inline bool gm_pieces_shared(int64_t pieces) {
  return pieces >= 8 || (pieces >= 2 && pieces % 2 == 0);
}

/* A row stride (elements) for a row-major scratch of `cols` calc-type columns that keeps
 * consecutive rows off the same cache sets (see gemm.c). */
int64_t gm_pad_ld(const gm_cfg *c, int64_t cols);

/* Transpose the vl x vl matrix whose rows are the vectors rows[0..vl), in registers. */
void gm_transpose(cg_fn *f, const gm_cfg *c, cg_val *rows);

/* True when matrices of dtype t can be moved with whole vectors of the calc type. */
bool gm_vec_ok(const gm_cfg *c, dpc_dtype t);

/* ---- IR helpers ---------------------------------------------------------------------------- */

/* Emit "%tN = <text>" and return %tN. */
cg_val gm_ev(cg_fn *f, const char *fmt, ...) DPC_PRINTF(2, 3);
/* A fixed-size buffer of n elements of `ty` in the entry block, 64-byte aligned: a ty*. */
cg_val gm_alloca(cg_fn *f, const char *ty, int64_t n);
cg_val gm_min(cg_fn *f, cg_val a, cg_val b); /* i64, signed */
cg_val gm_max(cg_fn *f, cg_val a, cg_val b);
cg_val gm_sub(cg_fn *f, cg_val a, cg_val b);
/* &p[idx] for a ty* p; `inb` adds inbounds (only when the element is known to exist). */
cg_val gm_gep(cg_fn *f, const char *ty, cg_val p, cg_val idx, bool inb);
/* Lanes l with lo <= l < hi (i64 values) as a vector of i1. */
cg_val gm_lanes(cg_fn *f, const gm_cfg *c, cg_val lo, cg_val hi);
/* Masked vector load (zeros in the masked-off lanes; those are never read) and store, at a
 * calc-type element pointer p. */
cg_val gm_mload(cg_fn *f, const gm_cfg *c, cg_val p, cg_val mask);
void gm_mstore(cg_fn *f, const gm_cfg *c, cg_val v, cg_val p, cg_val mask);
/* The i64 value x64, truncated to i32, in every lane of an ity vector; and the ity constant
 * <0, step, ..., (vl-1)*step> as text (cap >= 256). */
cg_val gm_splat_i32(cg_fn *f, const gm_cfg *c, cg_val x64);
void gm_iota(const gm_cfg *c, int step, char *out, size_t cap);
/* The calc-type scalar s in every lane. */
cg_val gm_splat(cg_fn *f, const gm_cfg *c, cg_val s);
/* Whole-vector load and store at a calc-type element pointer with the given alignment. */
cg_val gm_vload(cg_fn *f, const gm_cfg *c, cg_val p, int align);
void gm_vstore(cg_fn *f, const gm_cfg *c, cg_val v, cg_val p, int align);
/* A constant vector of i1 lanes on[0..vl) (*any: whether one is set). */
cg_val gm_lane_const(cg_fn *f, const gm_cfg *c, const bool *on, bool *any);
/* The lanes idx[0..vl) of a and b side by side (b's numbered from vl). */
cg_val gm_shuffle(cg_fn *f, const gm_cfg *c, cg_val a, cg_val b, const int *idx);
/* if (cond) { ... } : gm_if returns the label id to close with gm_endif. */
uint32_t gm_if(cg_fn *f, cg_val cond);
void gm_endif(cg_fn *f, uint32_t id);
/* for (i = 0; i < ceil(n / step); i++): cg loop over block indices. */
cg_val gm_ceil_div(cg_fn *f, cg_val n, int64_t step);

#endif
