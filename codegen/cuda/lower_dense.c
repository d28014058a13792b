/*
 * lower_dense.c — CUDA kernels for the dense and windowed layers: matmul (shared-memory tiles),
 * conv2d and its two gradients (direct), max_pool2d, avg_pool2d and their gradients.
 *
 * matmul: 16x16 output tiles, one per block of 256 threads, K walked in 16-wide slices staged
 * in shared memory; batch dims broadcast as NumPy does, 1-D operands promoted as runtime/ref
 * promotes them. (cuBLAS is the runtime's fast path for large GEMMs; this kernel is the one
 * dpc generates and checks everywhere.) conv2d is an implicit GEMM in the same tiles where a
 * group has 16 output channels or more, else direct. The windowed ops take their geometry from
 * dpc_window_of, the function the shape rule and the reference kernels use, and gather: every
 * output element forms its own sum, so nothing needs atomics and results are deterministic.
 */
#include "codegen/cuda/cu.h"
#include "ir/rules.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define TILE 16

static const char *acc_type(dpc_dtype t) {
  return t == DPC_F64 ? "double" : "float";
}

/* A matmul's geometry, as runtime/ref promotes and broadcasts: 1-D operands made matrices,
 * batch dims broadcast NumPy's way, each operand's stride per batch dim in elements (0 along a
 * dim it broadcasts). */
typedef struct mm_geom {
  bool ta, tb;
  int64_t M, K, N, ar, ac, br, bc;
  dpc_shape ba, bb, bo; /* the batch dims of a, of b, and of the result */
  int64_t sta[DPC_MAX_RANK], stb[DPC_MAX_RANK];
} mm_geom;

static void matmul_geom(const dpc_value *va, const dpc_value *vb, dpc_attrs at, mm_geom *m) {
  memset(m, 0, sizeof *m);
  m->ta = dpc_attrs_int(at, "transpose_a") != 0, m->tb = dpc_attrs_int(at, "transpose_b") != 0;
  dpc_shape sa = va->shape, sb = vb->shape;
  if (sa.rank == 1) sa.rank = 2, sa.d[1] = sa.d[0], sa.d[0] = 1, m->ta = false;
  if (sb.rank == 1) sb.rank = 2, sb.d[1] = 1, m->tb = false;
  m->ar = sa.d[sa.rank - 2], m->ac = sa.d[sa.rank - 1], m->br = sb.d[sb.rank - 2],
  m->bc = sb.d[sb.rank - 1];
  m->M = m->ta ? m->ac : m->ar, m->K = m->ta ? m->ar : m->ac, m->N = m->tb ? m->br : m->bc;
  dpc_shape *ba = &m->ba, *bb = &m->bb, *bo = &m->bo;
  ba->rank = sa.rank - 2, bb->rank = sb.rank - 2;
  memcpy(ba->d, sa.d, ba->rank * sizeof(int64_t));
  memcpy(bb->d, sb.d, bb->rank * sizeof(int64_t));
  bo->rank = ba->rank > bb->rank ? ba->rank : bb->rank;
  for (uint32_t i = 0; i < bo->rank; i++) {
    int64_t u = i + ba->rank < bo->rank ? 1 : ba->d[i + ba->rank - bo->rank];
    int64_t v = i + bb->rank < bo->rank ? 1 : bb->d[i + bb->rank - bo->rank];
    bo->d[i] = u == 1 ? v : u;
  }
  for (int64_t i = bo->rank, s1 = m->ar * m->ac, s2 = m->br * m->bc; i-- > 0;) {
    int64_t ia = i - (int64_t)(bo->rank - ba->rank), ib = i - (int64_t)(bo->rank - bb->rank);
    if (ia >= 0) {
      m->sta[i] = ba->d[ia] == 1 ? 0 : s1;
      s1 *= ba->d[ia];
    }
    if (ib >= 0) {
      m->stb[i] = bb->d[ib] == 1 ? 0 : s2;
      s2 *= bb->d[ib];
    }
  }
}

/* An operand's stride over the flattened batch when one suffices: the matrix size when it has
 * every batch dim of the result, 0 when it broadcasts all of them; -1 when it mixes the two. */
static int64_t flat_stride(const int64_t *st, const dpc_shape *bo, int64_t mat) {
  bool all = true, none = true;
  for (uint32_t i = 0; i < bo->rank; i++) {
    if (bo->d[i] == 1) continue;
    all &= st[i] != 0, none &= st[i] == 0;
  }
  if (none) return 0;
  if (!all) return -1;
  /* having every dim, the strides are those of a packed array of matrices */
  int64_t want = mat;
  for (uint32_t i = bo->rank; i-- > 0;) {
    if (bo->d[i] != 1 && st[i] != want) return -1;
    want *= bo->d[i];
  }
  return mat;
}

bool cu_matmul_gemm(const dpc_graph *g, uint32_t node, dpc_gemm_precision precision,
                    dpc_cuda_gemm *out) {
  memset(out, 0, sizeof *out);
  const dpc_node *n = &g->nodes[node];
  if (n->op != DPC_OP_MATMUL || n->n_in != 2) return false;
  const dpc_value *va = dpc_node_input(g, n, 0), *vb = dpc_node_input(g, n, 1),
                  *vy = &g->values[n->out];
  if (va->dtype != DPC_F32 || vb->dtype != DPC_F32 || vy->dtype != DPC_F32) return false;
  mm_geom m;
  matmul_geom(va, vb, dpc_node_attrs(g, node), &m);
  int64_t batch = dpc_shape_numel(&m.bo);
  int64_t sa = flat_stride(m.sta, &m.bo, m.ar * m.ac), sb = flat_stride(m.stb, &m.bo, m.br * m.bc);
  const int64_t lim = INT32_MAX;
  if (sa < 0 || sb < 0 || m.M < 1 || m.N < 1 || m.K < 1 || batch < 1 || m.M > lim || m.N > lim ||
      m.K > lim || batch > lim)
    return false;
  *out = (dpc_cuda_gemm){.on = true,
                         .ta = m.ta,
                         .tb = m.tb,
                         .precision = precision,
                         .m = (int32_t)m.M,
                         .n = (int32_t)m.N,
                         .k = (int32_t)m.K,
                         .batch = (int32_t)batch,
                         .stride_a = sa,
                         .stride_b = sb};
  return true;
}

/* The frame of a kernel over TILE x TILE output tiles (matmul, conv2d as an implicit GEMM): a
 * grid of at most 65535 blocks of TILE * TILE threads striding over `tiles`. */
static void tile_kernel(cu_gen *c, int64_t tiles) {
  cu_kernel_begin(c, "", (uint32_t)(tiles < 1 ? 1 : tiles > 65535 ? 65535 : tiles), TILE * TILE);
}

/* The staging tiles As and Bs of the accumulator type A, each thread's (tx, ty), and the loop
 * over the tiles, opened: each pass computes tile t. */
static void tile_loop(cu_gen *c, const char *A, int64_t tiles) {
  cu_printf(c, "  __shared__ %s As[%d][%d], Bs[%d][%d];\n", A, TILE, TILE + 1, TILE, TILE + 1);
  cu_printf(c, "  const int tx = threadIdx.x %% %d, ty = threadIdx.x / %d;\n", TILE, TILE);
  cu_printf(c, "  for (long long t = blockIdx.x; t < %lldll; t += gridDim.x) {\n",
            (long long)tiles);
}

/* Once a K slice is staged in As and Bs: acc takes its products, and the slice's loop closes. */
static void tile_product(cu_gen *c) {
  cu_printf(c, "      __syncthreads();\n");
  cu_printf(c, "      for (int q = 0; q < %d; q++) acc += As[ty][q] * Bs[q][tx];\n", TILE);
  cu_printf(c, "      __syncthreads();\n    }\n");
}

static dpc_status lower_matmul(cu_gen *c, dpc_diag *d) {
  (void)d;
  const dpc_value *va = cu_in(c, 0), *vb = cu_in(c, 1), *vy = cu_out(c, 0);
  mm_geom m;
  matmul_geom(va, vb, c->at, &m);
  const bool ta = m.ta, tb = m.tb;
  const int64_t M = m.M, K = m.K, N = m.N;
  const dpc_shape bo = m.bo;
  const int64_t *sta = m.sta, *stb = m.stb;
  int64_t nbatch = dpc_shape_numel(&bo), tm = (M + TILE - 1) / TILE, tn = (N + TILE - 1) / TILE;
  int64_t tiles = nbatch * tm * tn;
  const char *A = acc_type(vy->dtype);
  tile_kernel(c, tiles);
  cu_printf(c, "  const long long M = %lldll, K = %lldll, N = %lldll, TM = %lldll, TN = %lldll;\n",
            (long long)M, (long long)K, (long long)N, (long long)tm, (long long)tn);
  tile_loop(c, A, tiles);
  cu_printf(c,
            "    long long bt = t / (TM * TN), row = ((t / TN) %% TM) * %d + ty, col = (t %% TN) * "
            "%d + tx;\n",
            TILE, TILE);
  cu_printf(c, "    long long aoff = 0, boff = 0;\n    { long long r = bt;\n");
  for (uint32_t i = bo.rank; i-- > 0;)
    cu_printf(c,
              "      { long long q = r %% %lldll; r /= %lldll; aoff += q * %lldll; boff += q * "
              "%lldll; }\n",
              (long long)bo.d[i], (long long)bo.d[i], (long long)sta[i], (long long)stb[i]);
  cu_printf(c, "      (void)r; }\n");
  cu_printf(c, "    %s acc = 0;\n", A);
  cu_printf(c, "    for (long long k0 = 0; k0 < K; k0 += %d) {\n", TILE);
  char ai[128], bi[128];
  snprintf(ai, sizeof ai, "aoff + %s", ta ? "(k0 + tx) * M + row" : "row * K + k0 + tx");
  snprintf(bi, sizeof bi, "boff + %s", tb ? "col * K + k0 + ty" : "(k0 + ty) * N + col");
  cu_expr la = cu_load(va->dtype, "x0", ai), lb = cu_load(vb->dtype, "x1", bi);
  cu_printf(c, "      As[ty][tx] = (row < M && k0 + tx < K) ? (%s)(%s) : (%s)0;\n", A, la.s, A);
  cu_printf(c, "      Bs[ty][tx] = (col < N && k0 + ty < K) ? (%s)(%s) : (%s)0;\n", A, lb.s, A);
  tile_product(c);
  cu_printf(c, "    if (row < M && col < N) {\n");
  cu_store(c, vy->dtype, "y0", "bt * M * N + row * N + col", "acc");
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

/* The window geometry as constants in the kernel. */
static void window_consts(cu_gen *c, const dpc_window *w) {
  cu_printf(c,
            "  const long long H = %lldll, W = %lldll, OH = %lldll, OW = %lldll, KH = %lldll, "
            "KW = %lldll;\n",
            (long long)w->h, (long long)w->w, (long long)w->oh, (long long)w->ow, (long long)w->kh,
            (long long)w->kw);
  cu_printf(c,
            "  const long long SH = %lldll, SW = %lldll, PT = %lldll, PL = %lldll, PB = %lldll, "
            "PR = %lldll, DH = %lldll, DW = %lldll;\n",
            (long long)w->sh, (long long)w->sw, (long long)w->pt, (long long)w->pl,
            (long long)w->pb, (long long)w->pr, (long long)w->dh, (long long)w->dw);
  cu_printf(c, "  const long long C = %lldll, OC = %lldll, CPG = %lldll, OPG = %lldll;\n",
            (long long)w->c, (long long)w->oc, (long long)(w->c / (w->groups ? w->groups : 1)),
            (long long)(w->oc / (w->groups ? w->groups : 1)));
  cu_printf(c, "  (void)PB; (void)PR; (void)C; (void)OC; (void)CPG; (void)OPG;\n");
}

/* conv2d as an implicit GEMM, per group: the weights [OPG, CPG*KH*KW] times the input's windows
 * [CPG*KH*KW, B*OH*OW], gathered from x as each K slice is staged in shared memory (no im2col
 * buffer), in 16x16 output tiles as the matmul kernel. The sum runs over (ci, ky, kx) in the
 * direct kernel's order, a padded position adding a zero product. */
static void conv2d_tiles(cu_gen *c, const dpc_window *w) {
  const dpc_value *x = cu_in(c, 0), *k = cu_in(c, 1), *y = cu_out(c, 0);
  const char *A = acc_type(y->dtype);
  int64_t G = w->groups ? w->groups : 1, opg = w->oc / G, cpg = w->c / G;
  int64_t K = cpg * w->kh * w->kw, N = w->n * w->oh * w->ow;
  int64_t tm = (opg + TILE - 1) / TILE, tn = (N + TILE - 1) / TILE, tiles = G * tm * tn;
  tile_kernel(c, tiles);
  window_consts(c, w);
  cu_printf(c, "  const long long K = %lldll, N = %lldll, TM = %lldll, TN = %lldll;\n",
            (long long)K, (long long)N, (long long)tm, (long long)tn);
  tile_loop(c, A, tiles);
  cu_printf(c, "    long long grp = t / (TM * TN), row = ((t / TN) %% TM) * %d + ty;\n", TILE);
  /* the column a thread stages in Bs is the one it sums: (b, oy, ox) of the output */
  cu_printf(c, "    long long col = (t %% TN) * %d + tx;\n", TILE);
  cu_printf(c, "    long long ox = col %% OW, oy = (col / OW) %% OH, b = col / (OW * OH);\n");
  cu_printf(c, "    %s acc = 0;\n", A);
  cu_printf(c, "    for (long long k0 = 0; k0 < K; k0 += %d) {\n", TILE);
  cu_expr la = cu_load(k->dtype, "x1", "(grp * OPG + row) * K + k0 + tx");
  cu_printf(c, "      As[ty][tx] = (row < OPG && k0 + tx < K) ? (%s)(%s) : (%s)0;\n", A, la.s, A);
  cu_printf(c, "      { long long kk = k0 + ty, ci = kk / (KH * KW), ky = (kk / KW) %% KH, "
               "kx = kk %% KW;\n");
  cu_printf(c, "        long long iy = oy * SH - PT + ky * DH, ix = ox * SW - PL + kx * DW;\n");
  cu_expr lx = cu_load(x->dtype, "x0", "((b * C + grp * CPG + ci) * H + iy) * W + ix");
  cu_printf(c,
            "        Bs[ty][tx] = (col < N && kk < K && iy >= 0 && iy < H && ix >= 0 && ix < W) "
            "? (%s)(%s) : (%s)0; }\n",
            A, lx.s, A);
  tile_product(c);
  cu_printf(c, "    if (row < OPG && col < N) {\n");
  cu_store(c, y->dtype, "y0", "((b * OC + grp * OPG + row) * OH + oy) * OW + ox", "acc");
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
}

static dpc_status lower_conv2d(cu_gen *c, dpc_diag *d) {
  dpc_window w;
  dpc_status st = dpc_window_of(c->g, c->node, &w, d);
  if (st) return st;
  int64_t G = w.groups ? w.groups : 1;
  /* a tile of 16 output channels pays where a group has them and a window to sum over; a
   * depthwise or narrow convolution gathers per output element (below) */
  if (w.oc / G >= TILE && (w.c / G) * w.kh * w.kw >= TILE) {
    conv2d_tiles(c, &w);
    return DPC_OK;
  }
  const dpc_value *x = cu_in(c, 0), *k = cu_in(c, 1), *y = cu_out(c, 0);
  const char *A = acc_type(y->dtype);
  cu_elementwise_begin(c, "", dpc_shape_numel(&y->shape));
  window_consts(c, &w);
  cu_printf(c, "    long long ox = i %% OW, oy = (i / OW) %% OH, o = (i / (OW * OH)) %% OC, b = i "
               "/ (OW * OH * OC);\n");
  cu_printf(c, "    long long c0 = (o / OPG) * CPG;\n    %s acc = 0;\n", A);
  cu_printf(c, "    for (long long ci = 0; ci < CPG; ci++)\n");
  cu_printf(c, "      for (long long ky = 0; ky < KH; ky++) {\n");
  cu_printf(
      c,
      "        long long iy = oy * SH - PT + ky * DH;\n        if (iy < 0 || iy >= H) continue;\n");
  cu_printf(c, "        for (long long kx = 0; kx < KW; kx++) {\n");
  cu_printf(c, "          long long ix = ox * SW - PL + kx * DW;\n          if (ix < 0 || ix >= W) "
               "continue;\n");
  cu_expr xv = cu_load(x->dtype, "x0", "((b * C + c0 + ci) * H + iy) * W + ix");
  cu_expr kv = cu_load(k->dtype, "x1", "((o * CPG + ci) * KH + ky) * KW + kx");
  cu_printf(c, "          acc += (%s)(%s) * (%s)(%s);\n        }\n      }\n", A, kv.s, A, xv.s);
  cu_store(c, y->dtype, "y0", "i", "acc");
  cu_elementwise_end(c);
  return DPC_OK;
}

/* dx[b, c, iy, ix]: the outputs of c's group whose taps land on (iy, ix). */
static dpc_status lower_conv2d_grad_input(cu_gen *c, dpc_diag *d) {
  dpc_window w;
  dpc_status st = dpc_window_of(c->g, c->node, &w, d);
  if (st) return st;
  const dpc_value *dy = cu_in(c, 0), *k = cu_in(c, 1), *dx = cu_out(c, 0);
  const char *A = acc_type(dx->dtype);
  cu_elementwise_begin(c, "", dpc_shape_numel(&dx->shape));
  window_consts(c, &w);
  cu_printf(c, "    long long ix = i %% W, iy = (i / W) %% H, ch = (i / (W * H)) %% C, b = i / (W "
               "* H * C);\n");
  cu_printf(c, "    long long o0 = (ch / CPG) * OPG, ci = ch %% CPG;\n    %s acc = 0;\n", A);
  cu_printf(c, "    for (long long o = o0; o < o0 + OPG; o++)\n");
  cu_printf(c, "      for (long long ky = 0; ky < KH; ky++) {\n");
  cu_printf(c, "        long long ty = iy + PT - ky * DH;\n");
  cu_printf(c, "        if (ty < 0 || ty %% SH || ty / SH >= OH) continue;\n");
  cu_printf(c, "        for (long long kx = 0; kx < KW; kx++) {\n");
  cu_printf(c, "          long long tx = ix + PL - kx * DW;\n");
  cu_printf(c, "          if (tx < 0 || tx %% SW || tx / SW >= OW) continue;\n");
  cu_expr gv = cu_load(dy->dtype, "x0", "((b * OC + o) * OH + ty / SH) * OW + tx / SW");
  cu_expr kv = cu_load(k->dtype, "x1", "((o * CPG + ci) * KH + ky) * KW + kx");
  cu_printf(c, "          acc += (%s)(%s) * (%s)(%s);\n        }\n      }\n", A, kv.s, A, gv.s);
  cu_store(c, dx->dtype, "y0", "i", "acc");
  cu_elementwise_end(c);
  return DPC_OK;
}

/* dw[o, ci, ky, kx]: one block per weight, its threads over (b, oy, ox). */
static dpc_status lower_conv2d_grad_weight(cu_gen *c, dpc_diag *d) {
  dpc_window w;
  dpc_status st = dpc_window_of(c->g, c->node, &w, d);
  if (st) return st;
  const dpc_value *dy = cu_in(c, 0), *x = cu_in(c, 1), *dw = cu_out(c, 0);
  const char *A = acc_type(dw->dtype);
  int64_t n = x->shape.d[0], nw = dpc_shape_numel(&dw->shape);
  cu_kernel_begin(c, "", (uint32_t)(nw < 1 ? 1 : nw > 65535 ? 65535 : nw), CU_RED_BLOCK);
  window_consts(c, &w);
  cu_printf(c, "  for (long long e = blockIdx.x; e < %lldll; e += gridDim.x) {\n", (long long)nw);
  cu_printf(c, "    long long kx = e %% KW, ky = (e / KW) %% KH, ci = (e / (KW * KH)) %% CPG, o = "
               "e / (KW * KH * CPG);\n");
  cu_printf(c, "    long long c0 = (o / OPG) * CPG;\n    %s acc = 0;\n", A);
  cu_printf(c, "    for (long long q = threadIdx.x; q < %lldll * OH * OW; q += blockDim.x) {\n",
            (long long)n);
  cu_printf(c, "      long long ox = q %% OW, oy = (q / OW) %% OH, b = q / (OW * OH);\n");
  cu_printf(c, "      long long iy = oy * SH - PT + ky * DH, ix = ox * SW - PL + kx * DW;\n");
  cu_printf(c, "      if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;\n");
  cu_expr gv = cu_load(dy->dtype, "x0", "((b * OC + o) * OH + oy) * OW + ox");
  cu_expr xv = cu_load(x->dtype, "x1", "((b * C + c0 + ci) * H + iy) * W + ix");
  cu_printf(c, "      acc += (%s)(%s) * (%s)(%s);\n    }\n", A, gv.s, A, xv.s);
  cu_printf(c, "    acc = dpc_block_sum<%s>(acc);\n    if (threadIdx.x == 0) {\n", A);
  cu_store(c, dw->dtype, "y0", "e", "acc");
  cu_printf(c, "    }\n  }\n");
  cu_kernel_end(c);
  return DPC_OK;
}

/* Both pools: the window positions inside the input (padding is never a candidate for max
 * nor a summand for avg; count_include_pad counts it in avg's divisor). */
static dpc_status lower_pool(cu_gen *c, dpc_diag *d) {
  dpc_window w;
  dpc_status st = dpc_window_of(c->g, c->node, &w, d);
  if (st) return st;
  bool is_max = c->n->op == DPC_OP_MAX_POOL2D;
  bool include_pad = !is_max && dpc_attrs_int(c->at, "count_include_pad") != 0;
  const dpc_value *x = cu_in(c, 0), *y = cu_out(c, 0);
  const char *A = acc_type(y->dtype);
  const char *inf = y->dtype == DPC_F64 ? "DPC_INF_D" : "DPC_INF_F";
  const char *nan = y->dtype == DPC_F64 ? "DPC_NAN_D" : "DPC_NAN_F";
  cu_elementwise_begin(c, "", dpc_shape_numel(&y->shape));
  window_consts(c, &w);
  cu_printf(c, "    long long ox = i %% OW, oy = (i / OW) %% OH, pl = i / (OW * OH);\n");
  cu_printf(c, "    %s m = -%s, sum = 0;\n    long long inside = 0, padded = 0;\n", A, inf);
  cu_printf(c, "    for (long long ky = 0; ky < KH; ky++) {\n");
  cu_printf(c, "      long long iy = oy * SH - PT + ky * DH;\n");
  cu_printf(c, "      for (long long kx = 0; kx < KW; kx++) {\n");
  cu_printf(c, "        long long ix = ox * SW - PL + kx * DW;\n");
  cu_printf(c, "        if (iy >= -PT && iy < H + PB && ix >= -PL && ix < W + PR) padded++;\n");
  cu_printf(c, "        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;\n");
  cu_expr v = cu_load(x->dtype, "x0", "(pl * H + iy) * W + ix");
  cu_printf(c, "        %s v = (%s)(%s);\n        inside++;\n        sum += v;\n", A, A, v.s);
  cu_printf(c, "        if (v > m || v != v) m = v;\n      }\n    }\n");
  cu_printf(c, "    (void)inside; (void)padded; (void)sum;\n");
  char val[160];
  if (is_max)
    snprintf(val, sizeof val, "m");
  else
    snprintf(val, sizeof val, "%s ? sum / (%s)%s : %s", include_pad ? "padded" : "inside", A,
             include_pad ? "padded" : "inside", nan);
  cu_store(c, y->dtype, "y0", "i", val);
  cu_elementwise_end(c);
  return DPC_OK;
}

/* dx at an input position: over the windows covering it, dy when it is the window's argmax
 * (the first maximum, or the first NaN, row-major) or dy / the window's divisor. */
static dpc_status lower_pool_grad(cu_gen *c, dpc_diag *d) {
  dpc_window w;
  dpc_status st = dpc_window_of(c->g, c->node, &w, d);
  if (st) return st;
  bool is_max = c->n->op == DPC_OP_MAX_POOL2D_GRAD;
  bool include_pad = !is_max && dpc_attrs_int(c->at, "count_include_pad") != 0;
  const dpc_value *dy = cu_in(c, 0), *x = cu_in(c, 1), *dx = cu_out(c, 0);
  const char *A = acc_type(dx->dtype);
  cu_elementwise_begin(c, "", dpc_shape_numel(&dx->shape));
  window_consts(c, &w);
  cu_printf(c, "    long long ix = i %% W, iy = (i / W) %% H, pl = i / (W * H);\n");
  cu_printf(c, "    %s acc = 0;\n", A);
  cu_printf(c, "    for (long long ky = 0; ky < KH; ky++) {\n");
  cu_printf(c, "      long long ty = iy + PT - ky * DH;\n");
  cu_printf(c, "      if (ty < 0 || ty %% SH || ty / SH >= OH) continue;\n");
  cu_printf(c, "      for (long long kx = 0; kx < KW; kx++) {\n");
  cu_printf(c, "        long long tx = ix + PL - kx * DW;\n");
  cu_printf(c, "        if (tx < 0 || tx %% SW || tx / SW >= OW) continue;\n");
  cu_printf(c, "        long long oy = ty / SH, ox = tx / SW;\n");
  cu_expr g = cu_load(dy->dtype, "x0", "(pl * OH + oy) * OW + ox");
  cu_printf(c, "        %s g = (%s)(%s);\n", A, A, g.s);
  cu_printf(c, "        long long best = -1, inside = 0, padded = 0;\n        %s m = 0;\n", A);
  cu_printf(c, "        for (long long qy = 0; qy < KH; qy++) {\n");
  cu_printf(c, "          long long jy = oy * SH - PT + qy * DH;\n");
  cu_printf(c, "          for (long long qx = 0; qx < KW; qx++) {\n");
  cu_printf(c, "            long long jx = ox * SW - PL + qx * DW;\n");
  cu_printf(c, "            if (jy >= -PT && jy < H + PB && jx >= -PL && jx < W + PR) padded++;\n");
  cu_printf(c, "            if (jy < 0 || jy >= H || jx < 0 || jx >= W) continue;\n");
  cu_printf(c, "            inside++;\n");
  if (is_max) {
    cu_expr v = cu_load(x->dtype, "x1", "(pl * H + jy) * W + jx");
    cu_printf(c, "            %s v = (%s)(%s);\n", A, A, v.s);
    cu_printf(
        c, "            if (best < 0 || v > m || (v != v && m == m)) m = v, best = jy * W + jx;\n");
  }
  cu_printf(c,
            "          }\n        }\n        (void)m; (void)best; (void)inside; (void)padded;\n");
  if (is_max)
    cu_printf(c, "        if (best == iy * W + ix) acc += g;\n");
  else
    cu_printf(c, "        acc += g / (%s)%s;\n", A, include_pad ? "padded" : "inside");
  cu_printf(c, "      }\n    }\n");
  cu_store(c, dx->dtype, "y0", "i", "acc");
  cu_elementwise_end(c);
  return DPC_OK;
}

const cu_lower_fn cu_dense_table[DPC_OP_COUNT] = {
    [DPC_OP_MATMUL] = lower_matmul,
    [DPC_OP_CONV2D] = lower_conv2d,
    [DPC_OP_CONV2D_GRAD_INPUT] = lower_conv2d_grad_input,
    [DPC_OP_CONV2D_GRAD_WEIGHT] = lower_conv2d_grad_weight,
    [DPC_OP_MAX_POOL2D] = lower_pool,
    [DPC_OP_AVG_POOL2D] = lower_pool,
    [DPC_OP_MAX_POOL2D_GRAD] = lower_pool_grad,
    [DPC_OP_AVG_POOL2D_GRAD] = lower_pool_grad,
};
