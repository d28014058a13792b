/*
 * test_codegen.c — the CPU backend end to end: the fusion pass's groups and their checks, every
 * example model compiled with LLVM (fused) against the reference kernels, training steps on
 * both backends, and a compiled artifact against the JIT and refused when damaged.
 *
 * Per-op agreement is tests/ops (llvm.op.*); this file checks what only whole graphs exercise:
 * fused kernels, group arguments, and the session running them.
 */
#include "codegen/cache.h"
#include "codegen/cpu/conv_winograd.h"
#include "codegen/cpu/conv_wgrad_dot.h"
#include "codegen/cpu/cpu.h"
#include "frontend/frontend.h"
#include "ir/fusion.h"
#include "ir/print.h"
#include "ir/seal.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "runtime/artifact.h"
#include "runtime/npy.h"
#include "runtime/rng.h"
#include "runtime/session.h"
#include "tests/unit/unit.h"
#include "driver/driver.h"
#include "driver/train.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef DPC_SOURCE_DIR
#error "DPC_SOURCE_DIR must point at the repository"
#endif

static char tmpdir[64]; /* made by the binary's setup, removed by its cleanup */

static void path_in(char *out, size_t n, const char *name) {
  CHECK_MSG(tmpdir[0], "no temporary folder for %s: the fixture's setup did not run", name);
  snprintf(out, n, "%s/%s", tmpdir[0] ? tmpdir : "/nonexistent", name);
}

static dpc_graph *parse(const char *text) {
  dpc_graph *g = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK_MSG(dpc_parse_graph("model.graph", text, strlen(text), &g, &d) == DPC_OK, "%s", d.msg);
  dpc_diag_free(&d);
  return g;
}

static uint32_t node_of(const dpc_graph *g, const char *name) {
  uint32_t v = dpc_graph_find(g, name);
  return v == DPC_NONE ? DPC_NONE : g->values[v].node;
}

/* The groups the pass forms, and the verifier's view of groups that break the rules. */
static void fuse_groups(void) {
  dpc_graph *g = parse("input x: f32[N, 8]\nparam b: f32[8] = zeros\nparam w: f32[8, 8] = zeros\n"
                       "t = x * 2\nu = t + b\nv = relu(u)\n" /* t, u fuse into v */
                       "s = sigmoid(v)\nk = s * s + v\n"     /* s is read twice, by k: fuses */
                       "m = matmul(k, w)\nh = tanh(m + b)\n" /* epilogue only when asked */
                       "e = exp(h)\nf = e + 1\noutput f, e, v, h\n"); /* outputs stay */
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_pass_opts po = {.fuse = DPC_FUSE_ELEMWISE, .verify_each = true};
  CHECK_MSG(dpc_passes_run(g, &po, &d) == DPC_OK, "%s", d.msg);
  uint32_t v = node_of(g, "v"), k = node_of(g, "k"), h = node_of(g, "h");
  CHECK(g->nodes[node_of(g, "t")].fused == v && g->nodes[node_of(g, "u")].fused == v);
  CHECK(g->nodes[v].fused == DPC_NONE); /* an output: a root */
  CHECK(g->nodes[node_of(g, "s")].fused == k);
  CHECK(g->nodes[node_of(g, "m")].fused == DPC_NONE); /* no epilogues asked for */
  CHECK(g->values[g->ids[g->nodes[h].in]].node != DPC_NONE &&
        g->nodes[g->values[g->ids[g->nodes[h].in]].node].fused == h); /* m + b into tanh */
  CHECK(g->nodes[node_of(g, "e")].fused == DPC_NONE);
  dpc_group grp;
  CHECK(dpc_group_is_root(g, v) && !dpc_group_is_root(g, node_of(g, "t")));
  if (dpc_group_get(g, v, &grp, &d) == DPC_OK) {
    CHECK(grp.anchor == DPC_NONE && grp.n_nodes == 3 && grp.nodes[2] == v);
    /* x, the constant 2, b: in the order the members read them */
    CHECK(grp.n_inputs == 3 && grp.inputs[0] == dpc_graph_find(g, "x") &&
          grp.inputs[2] == dpc_graph_find(g, "b"));
    dpc_group_free(&grp);
  }
  /* the printed graph shows each group on its root */
  dpc_buf b = {0};
  CHECK(dpc_print_graph(g, &b) == DPC_OK && b.data &&
        strstr(b.data, "# one kernel: mul + add + relu"));
  dpc_buf_free(&b);

  /* with epilogues the matmul joins, and its inputs come first */
  dpc_graph *g2 = dpc_graph_clone(g);
  po.fuse = DPC_FUSE_ELEMWISE | DPC_FUSE_EPILOGUE;
  CHECK_MSG(dpc_pass_fuse(g2, &po, &d) == DPC_OK, "%s", d.msg);
  uint32_t m = node_of(g2, "m");
  CHECK(g2->nodes[m].fused == node_of(g2, "h"));
  if (dpc_group_get(g2, node_of(g2, "h"), &grp, &d) == DPC_OK) {
    CHECK(grp.anchor == m && grp.n_inputs == 3 && grp.inputs[0] == dpc_graph_find(g2, "k") &&
          grp.inputs[1] == dpc_graph_find(g2, "w") && grp.inputs[2] == dpc_graph_find(g2, "b"));
    dpc_group_free(&grp);
  }
  CHECK(dpc_verify(g2, &d) == DPC_OK);
  dpc_graph_free(g2);

  /* broken groups: a member read from outside, an output fused away, a root that is a member */
  g->nodes[node_of(g, "s")].fused = v;
  CHECK(dpc_verify(g, &d) == DPC_ERR_INVALID && strstr(d.msg, "fused into a node that is not"));
  g->nodes[node_of(g, "s")].fused = k;
  g->nodes[v].fused = k;
  CHECK(dpc_verify(g, &d) == DPC_ERR_INVALID && strstr(d.msg, "fused into a node that is not"));
  g->nodes[v].fused = DPC_NONE;
  uint32_t e = node_of(g, "e"), f = node_of(g, "f");
  g->nodes[e].fused = f;
  CHECK(dpc_verify(g, &d) == DPC_ERR_INVALID && strstr(d.msg, "an output is fused away"));
  g->nodes[e].fused = DPC_NONE;
  g->nodes[node_of(g, "t")].fused = k; /* t is read by u, a member of v's group */
  CHECK(dpc_verify(g, &d) == DPC_ERR_INVALID && strstr(d.msg, "reads a value fused into"));
  g->nodes[node_of(g, "t")].fused = v;
  CHECK_MSG(dpc_verify(g, &d) == DPC_OK, "%s", d.msg);
  /* without fusion asked for, the pass clears every group */
  po.fuse = 0;
  CHECK(dpc_pass_fuse(g, &po, &d) == DPC_OK && g->nodes[node_of(g, "t")].fused == DPC_NONE);
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

static dpc_graph *load_example(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s.graph", DPC_SOURCE_DIR, name);
  dpc_graph *g = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK_MSG(dpc_driver_load(path, &g, &d) == DPC_OK, "%s", d.msg);
  dpc_diag_free(&d);
  return g;
}

/* Images in [0, 1) for a model's x: f32[N, 784]. */
static dpc_named make_x(int64_t n, uint64_t seed) {
  dpc_named x = {dpc_strdup("x"),
                 {malloc((size_t)(n * 784) * sizeof(float)), DPC_F32, {2, {n, 784}}}};
  for (int64_t i = 0; i < n * 784; i++)
    ((float *)x.t.data)[i] = (float)dpc_rng_uniform(seed, (uint64_t)i);
  return x;
}

static void drop(dpc_named *x) {
  free(x->name);
  free(x->t.data);
}

static const char *examples[] = {"fashion_mlp", "fashion_cnn", "wide_mlp", "inception_block",
                                 "transformer_block"};

/* Every example, compiled and fused, gives the reference backend's outputs. */
static void examples_match_reference(void) {
  for (size_t e = 0; e < sizeof examples / sizeof *examples; e++) {
    dpc_graph *g = load_example(examples[e]);
    if (!g) continue;
    dpc_named x = make_x(3, 7 + e);
    dpc_named *ref = NULL, *jit = NULL;
    uint32_t n_ref = 0, n_jit = 0;
    dpc_diag d;
    dpc_diag_init(&d);
    dpc_exec_opts llvm = {.backend = &dpc_codegen_llvm};
    CHECK_MSG(dpc_driver_infer(g, NULL, NULL, &x, 1, false, &ref, &n_ref, &d) == DPC_OK, "%s: %s",
              examples[e], d.msg);
    CHECK_MSG(dpc_driver_infer(g, NULL, &llvm, &x, 1, false, &jit, &n_jit, &d) == DPC_OK, "%s: %s",
              examples[e], d.msg);
    CHECK(n_ref == n_jit && n_ref > 0);
    for (uint32_t o = 0; o < n_ref && o < n_jit; o++) {
      int64_t n = dpc_tensor_numel(&ref[o].t);
      double worst = 0, scale = 1e-3;
      for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(dpc_tload(&ref[o].t, i)));
      for (int64_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(dpc_tload(&ref[o].t, i) - dpc_tload(&jit[o].t, i)));
      CHECK_MSG(worst <= 1e-4 * scale, "%s output %s: differs by %.3g (scale %.3g)", examples[e],
                ref[o].name, worst, scale);
    }
    dpc_named_free(ref, n_ref);
    dpc_named_free(jit, n_jit);
    drop(&x);
    dpc_diag_free(&d);
    dpc_graph_free(g);
  }
}

/* A named input of the given shape, uniform in [-1, 1). */
static dpc_named make_input(const char *name, dpc_shape shape, uint64_t seed) {
  dpc_named v = {dpc_strdup(name), {NULL, DPC_F32, shape}};
  int64_t n = dpc_shape_numel(&shape);
  v.t.data = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++)
    ((float *)v.t.data)[i] = (float)(2 * dpc_rng_uniform(seed, (uint64_t)i) - 1);
  return v;
}

/* Compiled (fused) and reference outputs agree, the kernels compiled for target cpu (NULL: the
 * host). */
static void check_same_on(const char *what, const dpc_graph *g, const dpc_named *feeds,
                          uint32_t n_feeds, const dpc_codegen_options *cpu) {
  dpc_named *ref = NULL, *jit = NULL;
  uint32_t n_ref = 0, n_jit = 0;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_exec_opts llvm = {.backend = &dpc_codegen_llvm};
  if (cpu) llvm.cpu = *cpu;
  CHECK_MSG(dpc_driver_infer(g, NULL, NULL, feeds, n_feeds, false, &ref, &n_ref, &d) == DPC_OK,
            "%s: %s", what, d.msg);
  CHECK_MSG(dpc_driver_infer(g, NULL, &llvm, feeds, n_feeds, false, &jit, &n_jit, &d) == DPC_OK,
            "%s: %s", what, d.msg);
  CHECK(n_ref == n_jit && n_ref > 0);
  for (uint32_t o = 0; o < n_ref && o < n_jit; o++) {
    int64_t n = dpc_tensor_numel(&ref[o].t);
    double worst = 0, scale = 1e-3;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(dpc_tload(&ref[o].t, i)));
    for (int64_t i = 0; i < n; i++)
      worst = fmax(worst, fabs(dpc_tload(&ref[o].t, i) - dpc_tload(&jit[o].t, i)));
    CHECK_MSG(worst <= 1e-4 * scale, "%s output %s: differs by %.3g (scale %.3g)", what,
              ref[o].name, worst, scale);
  }
  dpc_named_free(ref, n_ref);
  dpc_named_free(jit, n_jit);
  dpc_diag_free(&d);
}

/* How many matmuls and convolutions of g the CPU backend's fusion makes anchors of a group: a
 * test of fused epilogues whose anchors did not fuse tests nothing. */
static uint32_t fused_anchors(const dpc_graph *g) {
  dpc_graph *c = dpc_graph_clone(g);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_pass_opts po = {.fuse = dpc_cpu_fusion()};
  CHECK_MSG(dpc_passes_run(c, &po, &d) == DPC_OK, "%s", d.msg);
  uint32_t anchors = 0;
  for (uint32_t i = 0; i < c->n_nodes; i++)
    if ((c->nodes[i].op == DPC_OP_MATMUL || c->nodes[i].op == DPC_OP_CONV2D) &&
        c->nodes[i].fused != DPC_NONE)
      anchors++;
  dpc_graph_free(c);
  dpc_diag_free(&d);
  return anchors;
}

static void check_same(const char *what, const dpc_graph *g, const dpc_named *feeds,
                       uint32_t n_feeds) {
  check_same_on(what, g, feeds, n_feeds, NULL);
}

/* Epilogues in every geometry the anchors produce: a batched matmul with a residual and with a
 * bias per row, a 2-D one, a narrow output (computed as C^T), conv2d with a bias per channel
 * and with one per image row (the columns then split into two dimensions). */
static void epilogues_match_reference(void) {
  dpc_graph *g = parse(
      "input x: f32[N, 6, 20]\ninput z: f32[N, 6, 9]\ninput im: f32[N, 3, 9, 10]\n"
      "input flat: f32[N, 40]\n"
      "param w: f32[20, 9] = he_normal(seed=1)\nparam c: f32[6, 1] = he_normal(seed=2)\n"
      "param v: f32[20, 10] = he_normal(seed=3)\nparam r: f32[40, 40] = he_normal(seed=4)\n"
      "param k: f32[5, 3, 3, 3] = he_normal(seed=5)\nparam kb: f32[5, 1, 1] = he_normal(seed=6)\n"
      "param pr: f32[9, 1] = he_normal(seed=7)\n"
      "a = tanh(matmul(x, w) + z)\n"
      "b = relu(matmul(x, w) * c - 0.5)\n"
      "e = sigmoid(matmul(flat, r) + 1)\n"
      "q = matmul(x, v) + 1\n"
      "h = relu(conv2d(im, k, pad=1) + kb)\n"
      "u = conv2d(im, k, pad=1) - pr\n"
      "output a, b, e, q, h, u\n");
  if (!g) return;
  /* every anchor fused, or the test tests nothing */
  uint32_t anchors = fused_anchors(g);
  CHECK_MSG(anchors == 6, "%u of 6 anchors fused", anchors);
  for (int64_t n = 1; n <= 3; n += 2) {
    dpc_named feeds[4] = {make_input("x", (dpc_shape){3, {n, 6, 20}}, 1),
                          make_input("z", (dpc_shape){3, {n, 6, 9}}, 2),
                          make_input("im", (dpc_shape){4, {n, 3, 9, 10}}, 3),
                          make_input("flat", (dpc_shape){2, {n, 40}}, 4)};
    check_same("epilogues", g, feeds, 4);
    for (int i = 0; i < 4; i++) drop(&feeds[i]);
  }
  dpc_graph_free(g);
}

/* The direct depthwise/grouped kernel and the 1x1 GEMM path with the epilogues of real
 * networks fused: bias + clip (MobileNet's ReLU6), SiLU (x * sigmoid(x)), hard-swish
 * (x * clip(x + 3, 0, 6) / 6), a grouped convolution with ReLU, a strided depthwise one with a
 * bias, and a 1x1 convolution with a bias and a residual. Rows of 37 and 40 columns take
 * several vectors and both edge masks. */
static void conv_direct_epilogues_match_reference(void) {
  dpc_graph *g = parse(
      "input im: f32[N, 8, 9, 37]\ninput res: f32[N, 12, 9, 37]\ninput wide: f32[N, 4, 7, 40]\n"
      "param dk: f32[8, 1, 3, 3] = he_normal(seed=1)\nparam db: f32[8, 1, 1] = he_normal(seed=2)\n"
      "param gk: f32[8, 2, 3, 3] = he_normal(seed=3)\nparam pk: f32[12, 8, 1, 1] = "
      "he_normal(seed=4)\n"
      "param pb: f32[12, 1, 1] = he_normal(seed=5)\nparam sk: f32[4, 1, 5, 5] = he_normal(seed=6)\n"
      "r6 = clip(conv2d(im, dk, pad=1, groups=8) + db, min=0, max=6)\n"
      "c1 = conv2d(im, dk, pad=1, groups=8)\nsilu = c1 * sigmoid(c1)\n"
      "c2 = conv2d(im, dk, stride=2, pad=1, groups=8) + db\n"
      "hswish = c2 * clip(c2 + 3, min=0, max=6) / 6\n"
      "grp = relu(conv2d(im, gk, pad=[1, 0, 1, 2], groups=4))\n"
      "pw = conv2d(im, pk) + pb + res\n"
      "s2 = conv2d(wide, sk, stride=2, pad=2, groups=4) + 0.5\n"
      "output r6, silu, hswish, grp, pw, s2\n");
  if (!g) return;
  /* every convolution fused, or the test tests nothing */
  uint32_t anchors = fused_anchors(g);
  CHECK_MSG(anchors == 6, "%u of 6 convolutions fused", anchors);
  for (int64_t n = 1; n <= 2; n++) {
    dpc_named feeds[3] = {make_input("im", (dpc_shape){4, {n, 8, 9, 37}}, 1),
                          make_input("res", (dpc_shape){4, {n, 12, 9, 37}}, 2),
                          make_input("wide", (dpc_shape){4, {n, 4, 7, 40}}, 3)};
    check_same("direct convolution epilogues", g, feeds, 3);
    for (int i = 0; i < 3; i++) drop(&feeds[i]);
  }
  dpc_graph_free(g);
}

/* The host's vector width as the CPU backend sees it (0 when it cannot start). */
static int host_vector_bits(void) {
  dpc_cpu_backend *b = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  int bits =
      dpc_cpu_backend_new(&(dpc_cpu_options){0}, &b, &d) == DPC_OK ? dpc_cpu_vector_bits(b) : 0;
  dpc_cpu_backend_free(b);
  dpc_diag_free(&d);
  return bits;
}

/* check_same at batch n on this host and, where it has AVX2, on a 256-bit target (8 lanes a
 * vector, other micro-tiles): inputs names[i] of shape [n, dims[i]] from seed i + 1. */
static void check_same_both(const char *what, const dpc_graph *g, const char *const *names,
                            const int64_t (*dims)[3], uint32_t n_in, int64_t n) {
  dpc_named feeds[8];
  for (uint32_t i = 0; i < n_in; i++)
    feeds[i] = make_input(names[i], (dpc_shape){4, {n, dims[i][0], dims[i][1], dims[i][2]}},
                          (uint64_t)i + 1);
  check_same(what, g, feeds, n_in);
  char avx2[160];
  snprintf(avx2, sizeof avx2, "%s, AVX2", what);
  if (host_vector_bits() >= 256)
    check_same_on(avx2, g, feeds, n_in,
                  &(dpc_codegen_options){.cpu = "haswell", .features = "+avx2,+fma,+f16c"});
  for (uint32_t i = 0; i < n_in; i++) drop(&feeds[i]);
}

/* Epilogues applied in registers as each GEMM tile is stored (chains of add, sub, mul, relu,
 * relu6 and clip, inputs constant along the row): 1x1 convolutions of 30 output channels (two
 * strips and a third moved up over rows that exist) on 7x9 planes (a vector and 15 lanes), with
 * ReLU6 as clip, as relu6 and as clip with only a lower bound; a strided 3x3 convolution by
 * im2col with a scale, a shift and ReLU; a matmul with a bias along its columns (45: a vector
 * and 13 lanes) and ReLU; and one with a residual, which keeps the pass over finished rows.
 * Every anchor must be fused, or the test tests nothing. */
static void register_epilogues_match_reference(void) {
  dpc_graph *g =
      parse("input im: f32[N, 40, 7, 9]\ninput x: f32[N, 1, 3, 37]\ninput res: f32[N, 1, 3, 45]\n"
            "param k1: f32[30, 40, 1, 1] = he_normal(seed=1)\nparam kb: f32[30, 1, 1] = "
            "he_normal(seed=2)\n"
            "param k2: f32[30, 40, 1, 1] = he_normal(seed=3)\nparam k3: f32[30, 40, 1, 1] = "
            "he_normal(seed=4)\n"
            "param k4: f32[30, 40, 3, 3] = he_normal(seed=5)\nparam ks: f32[30, 1, 1] = "
            "he_normal(seed=6)\n"
            "param w1: f32[37, 45] = he_normal(seed=7)\nparam w2: f32[37, 45] = he_normal(seed=8)\n"
            "param wb: f32[45] = he_normal(seed=9)\n"
            "a = clip(conv2d(im, k1) + kb, min=0, max=6)\n"
            "b = relu6(conv2d(im, k2) + kb)\n"
            "c = clip(conv2d(im, k3) - kb, min=0.25)\n"
            "d = relu(conv2d(im, k4, stride=2, pad=1) * ks - 0.5)\n"
            "e = relu(matmul(x, w1) + wb)\n"
            "f = matmul(x, w2) + wb + res\n"
            "output a, b, c, d, e, f\n");
  if (!g) return;
  uint32_t anchors = fused_anchors(g);
  CHECK_MSG(anchors == 6, "%u of 6 anchors fused", anchors);
  const char *names[] = {"im", "x", "res"};
  const int64_t dims[][3] = {{40, 7, 9}, {1, 3, 37}, {1, 3, 45}};
  for (int64_t n = 1; n <= 2; n++) check_same_both("register epilogues", g, names, dims, 3, n);
  dpc_graph_free(g);
}

/* 3x3 "same" convolutions computed as Winograd's F(2x2, 3x3): an odd plane (the last tile row
 * and column half outside it) with input channels that are not a whole vector and a residual
 * epilogue; rows of 18 tiles (a vector and 2 lanes); one whose filters are cut into two
 * blocks of output channels and whose tile rows are cut into blocks; and a small plane with
 * many channels, all its tiles one block and several channel blocks to a piece. Each must take
 * the Winograd path, or the test tests nothing. */
static void conv_winograd_matches_reference(void) {
  dpc_graph *g = parse("input a: f32[N, 20, 15, 15]\ninput r: f32[N, 33, 15, 15]\n"
                       "input b: f32[N, 48, 14, 36]\ninput c: f32[N, 160, 16, 16]\n"
                       "input e: f32[N, 200, 14, 14]\ninput h: f32[N, 24, 7, 7]\n"
                       "param ak: f32[33, 20, 3, 3] = he_normal(seed=1)\n"
                       "param ab: f32[33, 1, 1] = he_normal(seed=2)\n"
                       "param bk: f32[64, 48, 3, 3] = he_normal(seed=3)\n"
                       "param ck: f32[40, 160, 3, 3] = he_normal(seed=4)\n"
                       "param ek: f32[72, 200, 3, 3] = he_normal(seed=5)\n"
                       "param hk: f32[16, 24, 3, 3] = he_normal(seed=6)\n"
                       "ya = relu(conv2d(a, ak, pad=1) + ab + r)\nyb = conv2d(b, bk, pad=1)\n"
                       "yc = conv2d(c, ck, pad=1) * 0.5\nye = conv2d(e, ek, pad=1)\n"
                       "yh = conv2d(h, hk, pad=1)\noutput ya, yb, yc, ye, yh\n");
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  uint32_t convs = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op != DPC_OP_CONV2D) continue;
    dpc_window w;
    CHECK_MSG(dpc_window_of(g, i, &w, &d) == DPC_OK, "%s", d.msg);
    CHECK_MSG(cg_conv_winograd_fits(&w, DPC_F32, 512) && cg_conv_winograd_fits(&w, DPC_F32, 256),
              "conv2d node %u (%lld -> %lld channels) does not take the Winograd path", i,
              (long long)w.c, (long long)w.oc);
    convs++;
  }
  CHECK(convs == 5);
  dpc_diag_free(&d);
  const char *names[6] = {"a", "r", "b", "c", "e", "h"};
  const int64_t dims[6][3] = {{20, 15, 15},  {33, 15, 15},  {48, 14, 36},
                              {160, 16, 16}, {200, 14, 14}, {24, 7, 7}};
  for (int64_t n = 1; n <= 2; n++) check_same_both("Winograd convolutions", g, names, dims, 6, n);
  dpc_graph_free(g);
}

/* The gradients of Winograd-shaped convolutions against the reference: gradient op `op` of
 * three convolutions, dy and x named dyX and xX for X in a, b, c, each taking the path `fits`
 * says (on 512- and 256-bit targets), at batch 1 and 2. c's channels and plane are given. */
static void check_winograd_gradients(const char *what, const char *op,
                                     bool (*fits)(const dpc_window *, dpc_dtype, int), int64_t co,
                                     int64_t ci, int64_t side) {
  char text[1024];
  snprintf(text, sizeof text,
           "input dya: f32[N, 33, 15, 15]\ninput xa: f32[N, 20, 15, 15]\n"
           "input dyb: f32[N, 64, 14, 36]\ninput xb: f32[N, 48, 14, 36]\n"
           "input dyc: f32[N, %lld, %lld, %lld]\ninput xc: f32[N, %lld, %lld, %lld]\n"
           "param ak: f32[33, 20, 3, 3] = he_normal(seed=1)\n"
           "param bk: f32[64, 48, 3, 3] = he_normal(seed=3)\n"
           "param ck: f32[%lld, %lld, 3, 3] = he_normal(seed=4)\n"
           "ga = %s(dya, %s, pad=1)\ngb = %s(dyb, %s, pad=1) * 0.5\ngc = %s(dyc, %s, pad=1)\n"
           "output ga, gb, gc\n",
           (long long)co, (long long)side, (long long)side, (long long)ci, (long long)side,
           (long long)side, (long long)co, (long long)ci, op,
           !strcmp(op, "conv2d_grad_input") ? "ak, xa" : "xa, ak", op,
           !strcmp(op, "conv2d_grad_input") ? "bk, xb" : "xb, bk", op,
           !strcmp(op, "conv2d_grad_input") ? "ck, xc" : "xc, ck");
  dpc_graph *g = parse(text);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  uint32_t convs = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (strcmp(dpc_op_name(g->nodes[i].op), op)) continue;
    dpc_window w;
    CHECK_MSG(dpc_window_of(g, i, &w, &d) == DPC_OK, "%s", d.msg);
    CHECK_MSG(fits(&w, DPC_F32, 512) && fits(&w, DPC_F32, 256),
              "%s node %u (%lld -> %lld channels) does not take the Winograd path", op, i,
              (long long)w.c, (long long)w.oc);
    convs++;
  }
  CHECK(convs == 3);
  dpc_diag_free(&d);
  const char *names[6] = {"dya", "xa", "dyb", "xb", "dyc", "xc"};
  const int64_t dims[6][3] = {{33, 15, 15}, {20, 15, 15},     {64, 14, 36},
                              {48, 14, 36}, {co, side, side}, {ci, side, side}};
  for (int64_t n = 1; n <= 2; n++) check_same_both(what, g, names, dims, 6, n);
  dpc_graph_free(g);
}

/* The input gradients of such convolutions take the same path, as convolutions of dy with the
 * filters transposed and turned: odd planes, one block of tile rows with several channel blocks
 * (160 channels of dx), and rows of 18 tiles. */
static void conv_winograd_grad_input_matches_reference(void) {
  check_winograd_gradients("Winograd input gradients", "conv2d_grad_input",
                           cg_conv_winograd_grad_input_fits, 40, 160, 16);
}

/* Their weight gradients too, as F(3x3, 2x2) summed over images and tiles: an odd plane (tiles
 * half outside it), several images' tiles in one block (15x15 and 14x36 at batch 2), and a
 * plane cut into blocks of tile rows (40x40). */
static void conv_winograd_grad_weight_matches_reference(void) {
  check_winograd_gradients("Winograd weight gradients", "conv2d_grad_weight",
                           cg_conv_winograd_grad_weight_fits, 32, 32, 40);
}

/* Weight gradients of few taps per output channel take the dot-product kernel
 * (lower_conv_wgrad_dot.c): fashion_cnn's one-channel first layer (a flat 28x28 plane, 32
 * channels: whole tiles), stride 2 with 33 channels (a last tile of one) and 42 pixels (a
 * masked last vector), and groups of 2 input channels of 2x2 taps. Against the reference, at
 * batch 1 and 3, on 512- and 256-bit targets. */
static void conv_wgrad_dot_matches_reference(void) {
  dpc_graph *g = parse("input dya: f32[N, 32, 28, 28]\ninput xa: f32[N, 1, 28, 28]\n"
                       "input dyb: f32[N, 33, 7, 6]\ninput xb: f32[N, 1, 13, 11]\n"
                       "input dyc: f32[N, 6, 8, 8]\ninput xc: f32[N, 4, 9, 9]\n"
                       "param ak: f32[32, 1, 3, 3] = he_normal(seed=1)\n"
                       "param bk: f32[33, 1, 3, 3] = he_normal(seed=2)\n"
                       "param ck: f32[6, 2, 2, 2] = he_normal(seed=3)\n"
                       "ga = conv2d_grad_weight(dya, xa, ak, pad=1)\n"
                       "gb = conv2d_grad_weight(dyb, xb, bk, stride=2, pad=1) * 0.5\n"
                       "gc = conv2d_grad_weight(dyc, xc, ck, groups=2)\noutput ga, gb, gc\n");
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  uint32_t convs = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op != DPC_OP_CONV2D_GRAD_WEIGHT) continue;
    cg_conv_geom cv;
    CHECK_MSG(dpc_window_of(g, i, &cv.w, &d) == DPC_OK, "%s", d.msg);
    cv.t = DPC_F32;
    cv.cpg = cv.w.c / cv.w.groups;
    cv.K = cv.cpg * cv.w.kh * cv.w.kw;
    cv.P = cv.w.oh * cv.w.ow;
    CHECK_MSG(cg_conv_wgrad_dot_fits(&cv, 512) && cg_conv_wgrad_dot_fits(&cv, 256),
              "conv2d_grad_weight node %u (%lld taps) does not take the dot-product path", i,
              (long long)cv.K);
    convs++;
  }
  CHECK(convs == 3);
  dpc_diag_free(&d);
  const char *names[6] = {"dya", "xa", "dyb", "xb", "dyc", "xc"};
  const int64_t dims[6][3] = {{32, 28, 28}, {1, 28, 28}, {33, 7, 6},
                              {1, 13, 11},  {6, 8, 8},   {4, 9, 9}};
  for (int64_t n = 1; n <= 3; n += 2)
    check_same_both("dot-product weight gradients", g, names, dims, 6, n);
  dpc_graph_free(g);
}

/* An image gets the same bits from a convolution alone as in a batch (a served request batched
 * with others is answered as it would be alone): the sums over taps are cut into the same
 * passes whether the image's plane is computed in pieces of rows, of channels, or beside other
 * images' (7x7 planes at batch 7). Each convolution here has more taps than one pass holds. */
static void conv_bits_same_at_any_batch(void) {
  dpc_graph *g = parse("input big: f32[N, 64, 28, 28]\ninput deep: f32[N, 200, 7, 7]\n"
                       "input wide: f32[N, 600, 7, 7]\ninput small: f32[N, 32, 14, 14]\n"
                       "param bk: f32[64, 64, 3, 3] = he_normal(seed=1)\n"
                       "param dk: f32[40, 200, 3, 3] = he_normal(seed=2)\n"
                       "param pk: f32[32, 600, 1, 1] = he_normal(seed=3)\n"
                       "param sk: f32[48, 32, 3, 3] = he_normal(seed=4)\n"
                       "a = conv2d(big, bk, pad=1)\nb = conv2d(deep, dk, pad=1)\n"
                       "c = conv2d(wide, pk)\ne = conv2d(small, sk, pad=1)\noutput a, b, c, e\n");
  if (!g) return;
  /* small: Winograd with several images' tiles side by side in one GEMM (5 and 2 of the 7) */
  const char *names[4] = {"big", "deep", "wide", "small"};
  const int64_t chans[4] = {64, 200, 600, 32}, side[4] = {28, 7, 7, 14};
  dpc_named one[4], seven[4];
  for (int i = 0; i < 4; i++) {
    one[i] = make_input(names[i], (dpc_shape){4, {1, chans[i], side[i], side[i]}}, (uint64_t)i + 1);
    seven[i] =
        make_input(names[i], (dpc_shape){4, {7, chans[i], side[i], side[i]}}, (uint64_t)i + 1);
  }
  dpc_named *r1 = NULL, *r7 = NULL;
  uint32_t n1 = 0, n7 = 0;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_exec_opts llvm = {.backend = &dpc_codegen_llvm};
  CHECK_MSG(dpc_driver_infer(g, NULL, &llvm, one, 4, false, &r1, &n1, &d) == DPC_OK, "%s", d.msg);
  CHECK_MSG(dpc_driver_infer(g, NULL, &llvm, seven, 4, false, &r7, &n7, &d) == DPC_OK, "%s", d.msg);
  CHECK(n1 == 4 && n7 == 4);
  for (uint32_t o = 0; o < n1 && o < n7; o++)
    CHECK_MSG(!memcmp(r1[o].t.data, r7[o].t.data, dpc_tensor_bytes(&r1[o].t)),
              "output %s: image 0 alone differs from image 0 of 7", r1[o].name);
  dpc_named_free(r1, n1);
  dpc_named_free(r7, n7);
  for (int i = 0; i < 4; i++) {
    drop(&one[i]);
    drop(&seven[i]);
  }
  dpc_diag_free(&d);
  dpc_graph_free(g);
}

/* gemv_stream_matches' model at batch n on `threads` threads, compiled (LLVM) or on the
 * reference kernels: its outputs a and e into out[0] and out[1] (malloc'd). */
static void run_gemv(const char *text, int64_t n, uint32_t threads, bool llvm, float *out[2]) {
  out[0] = out[1] = NULL;
  dpc_graph *g = parse(text);
  if (!g) return;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_pass_opts po = {.fuse = llvm ? dpc_cpu_fusion() : 0};
  dpc_plan *plan = NULL;
  dpc_cpu_backend *b = NULL;
  dpc_native_kernel *k = NULL;
  dpc_session *s = NULL;
  int64_t vals[1] = {n};
  CHECK_MSG(dpc_passes_run(g, &po, &d) == DPC_OK && dpc_graph_bind(g, vals, &d) == DPC_OK &&
                dpc_plan_single(g, "cpu:0", false, &plan, &d) == DPC_OK,
            "%s", d.msg);
  if (plan && llvm) {
    k = calloc(plan->g->n_nodes, sizeof *k);
    CHECK_MSG(dpc_cpu_backend_new(&(dpc_cpu_options){.cache_dir = "off"}, &b, &d) == DPC_OK &&
                  dpc_cpu_compile_plan(b, plan, k, &d) == DPC_OK,
              "%s", d.msg);
  }
  if (plan && (!llvm || b))
    CHECK_MSG(dpc_session_new(plan, &(dpc_session_opts){.native = k, .threads = threads}, &s, &d) ==
                  DPC_OK,
              "%s", d.msg);
  if (s) {
    const char *in[2] = {"x", "z"};
    for (int i = 0; i < 2; i++) {
      dpc_tensor t = dpc_session_input(s, dpc_graph_find(plan->g, in[i]));
      for (int64_t j = 0; j < dpc_tensor_numel(&t); j++)
        dpc_tstore(&t, j, 2 * dpc_rng_uniform((uint64_t)i + 1, (uint64_t)j) - 1);
    }
    CHECK_MSG(dpc_session_run(s, &d) == DPC_OK, "%s", d.msg);
    for (int o = 0; o < 2; o++) {
      dpc_tensor y = dpc_session_value(s, plan->g->outputs[o]);
      out[o] = malloc(dpc_tensor_bytes(&y));
      if (out[o]) memcpy(out[o], y.data, dpc_tensor_bytes(&y));
    }
  }
  dpc_session_free(s);
  free(k);
  dpc_cpu_backend_free(b);
  dpc_plan_free(plan);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* One row against a large weight (1 MiB or more) on one thread streams the weight's rows with
 * the sums in an L1 buffer (gemm_stream.c): `a`, with a bias and ReLU, has K = 1280 in three
 * passes and 1000 columns (the last vector 8 lanes); `e` has 4100 columns, two pieces, the
 * second of 4 columns. Against the reference at batch 1; and the row's bits are the same on two
 * threads (the tiled kernel's halves), and as row 0 at batch 5 (the few-row micro-kernel) and
 * at batch 40 (packed): a served request batched with others is answered as it would be
 * alone. */
static void gemv_stream_matches(void) {
  const char *text = "input x: f32[N, 1280]\ninput z: f32[N, 300]\n"
                     "param w: f32[1280, 1000] = he_normal(seed=1)\n"
                     "param b: f32[1000] = he_normal(seed=2)\n"
                     "param v: f32[300, 4100] = he_normal(seed=3)\n"
                     "a = relu(matmul(x, w) + b)\ne = matmul(z, v)\noutput a, e\n";
  static const struct {
    int64_t n;
    uint32_t threads;
  } runs[] = {{1, 1}, {1, 2}, {5, 1}, {40, 2}};
  const int64_t cols[2] = {1000, 4100};
  float *ref[2], *one[2];
  run_gemv(text, 1, 1, false, ref);
  run_gemv(text, 1, 1, true, one);
  for (int o = 0; o < 2 && ref[o] && one[o]; o++) {
    double worst = 0, scale = 1e-3;
    for (int64_t i = 0; i < cols[o]; i++) scale = fmax(scale, fabs(ref[o][i]));
    for (int64_t i = 0; i < cols[o]; i++) worst = fmax(worst, fabs(ref[o][i] - one[o][i]));
    CHECK_MSG(worst <= 1e-4 * scale, "output %d: differs from the reference by %.3g (scale %.3g)",
              o, worst, scale);
  }
  for (size_t r = 1; r < sizeof runs / sizeof *runs; r++) {
    float *got[2];
    run_gemv(text, runs[r].n, runs[r].threads, true, got);
    for (int o = 0; o < 2; o++) {
      CHECK(got[o] && one[o]);
      if (got[o] && one[o])
        CHECK_MSG(!memcmp(got[o], one[o], (size_t)cols[o] * sizeof(float)),
                  "output %d: one row alone on one thread differs from row 0 at batch %lld on %u",
                  o, (long long)runs[r].n, runs[r].threads);
      free(got[o]);
    }
  }
  for (int o = 0; o < 2; o++) free(ref[o]), free(one[o]);
}

/* Forward convolutions of one image cut into pieces so that both cores work: a 1x1 one and a
 * strided 3x3 one (im2col row by row) by blocks of output rows, a 3x3 "same" one (im2col of
 * whole planes) by blocks of output channels, the last block partial; each piece applies its
 * epilogue to its own part. `deep` has more weights (1 MB) than its im2col: it is cut by output
 * channels with K in several passes, its weights read in place, and its 149 channels end on a
 * short micro-tile strip (moved up over rows that exist); `stem` is a 7x7 stride-2 one whose
 * im2col keeps the even lanes of two loads, over an output row of 19 (a vector and 3 lanes);
 * `tiny` has 3x3 output planes, several images to a GEMM, with a bias and ReLU; and both
 * gradients of `tiny`'s and `deep`'s convolutions, whose small planes also put several images
 * in a GEMM (7 images: `deep`'s in blocks of 5 and 2). */
static void conv_pieces_match_reference(void) {
  dpc_graph *g = parse("input big: f32[N, 48, 20, 20]\ninput img: f32[N, 16, 12, 12]\n"
                       "input wide: f32[N, 16, 48, 48]\n"
                       "input deep: f32[N, 200, 7, 7]\ninput rgb: f32[N, 3, 37, 37]\n"
                       "input tiny: f32[N, 8, 6, 6]\ninput dyt: f32[N, 24, 3, 3]\n"
                       "input dyd: f32[N, 149, 7, 7]\n"
                       "param tk: f32[24, 8, 3, 3] = he_normal(seed=7)\n"
                       "param tb: f32[24, 1, 1] = he_normal(seed=8)\n"
                       "param pk: f32[64, 48, 1, 1] = he_normal(seed=1)\n"
                       "param k3: f32[136, 16, 3, 3] = he_normal(seed=2)\n"
                       "param kb: f32[136, 1, 1] = he_normal(seed=3)\n"
                       "param sk: f32[32, 16, 3, 3] = he_normal(seed=4)\n"
                       "param dk: f32[149, 200, 3, 3] = he_normal(seed=5)\n"
                       "param rk: f32[21, 3, 7, 7] = he_normal(seed=6)\n"
                       "a = conv2d(big, pk) + 1\n"
                       "b = relu(conv2d(img, k3, pad=1) + kb)\n"
                       "c = conv2d(wide, sk, stride=2, pad=1) * 0.5\n"
                       "e = relu(conv2d(deep, dk, pad=1))\n"
                       "s = conv2d(rgb, rk, stride=2, pad=3)\n"
                       "t = relu(conv2d(tiny, tk, stride=2, pad=1) + tb)\n"
                       "tdx = conv2d_grad_input(dyt, tk, tiny, stride=2, pad=1)\n"
                       "tdw = conv2d_grad_weight(dyt, tiny, tk, stride=2, pad=1)\n"
                       "ddx = conv2d_grad_input(dyd, dk, deep, pad=1)\n"
                       "ddw = conv2d_grad_weight(dyd, deep, dk, pad=1)\n"
                       "output a, b, c, e, s, t, tdx, tdw, ddx, ddw\n");
  if (!g) return;
  /* 2 and 7 images: several images per GEMM where planes are small (7x7, 3x3), 7 of them in
   * two blocks of `deep`'s (5 and 2) */
  const int64_t batches[3] = {1, 2, 7};
  for (int bi = 0; bi < 3; bi++) {
    int64_t n = batches[bi];
    dpc_named feeds[8] = {make_input("big", (dpc_shape){4, {n, 48, 20, 20}}, 1),
                          make_input("img", (dpc_shape){4, {n, 16, 12, 12}}, 2),
                          make_input("wide", (dpc_shape){4, {n, 16, 48, 48}}, 3),
                          make_input("deep", (dpc_shape){4, {n, 200, 7, 7}}, 4),
                          make_input("rgb", (dpc_shape){4, {n, 3, 37, 37}}, 5),
                          make_input("tiny", (dpc_shape){4, {n, 8, 6, 6}}, 6),
                          make_input("dyt", (dpc_shape){4, {n, 24, 3, 3}}, 7),
                          make_input("dyd", (dpc_shape){4, {n, 149, 7, 7}}, 8)};
    check_same("convolution pieces", g, feeds, 8);
    for (int i = 0; i < 8; i++) drop(&feeds[i]);
  }
  dpc_graph_free(g);
}

/* Training steps on the compiled backend follow the reference backend's losses. */
static void training_matches_reference(void) {
  char xs[256], ys[256], data[600], log[2][256];
  path_in(xs, sizeof xs, "x.npy");
  path_in(ys, sizeof ys, "y.npy");
  snprintf(data, sizeof data, "%s,%s", xs, ys);
  dpc_named x = make_x(48, 3);
  int32_t labels[48];
  for (int i = 0; i < 48; i++) labels[i] = (int32_t)(dpc_rng_bits(4, (uint64_t)i) % 10);
  dpc_tensor ty = {labels, DPC_I32, {1, {48}}};
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(dpc_npy_write(xs, &x.t, &d) == DPC_OK && dpc_npy_write(ys, &ty, &d) == DPC_OK);
  drop(&x);
  const char *models[] = {"fashion_mlp", "fashion_cnn"};
  for (int m = 0; m < 2; m++) {
    dpc_graph *g = load_example(models[m]);
    if (!g) continue;
    for (int b = 0; b < 2; b++) {
      path_in(log[b], sizeof log[b], b ? "llvm.jsonl" : "ref.jsonl");
      dpc_train_opts o;
      dpc_train_defaults(&o);
      o.data = data, o.batch = 16, o.epochs = 2, o.seed = 9, o.log_path = log[b];
      o.exec.backend = b == 1 ? &dpc_codegen_llvm : NULL;
      o.threads = 2;
      CHECK_MSG(dpc_train(g, &o, &d) == DPC_OK, "%s: %s", models[m], d.msg);
    }
    double l[2][8];
    int n0 = unit_read_losses(log[0], l[0], 8), n1 = unit_read_losses(log[1], l[1], 8);
    CHECK(n0 == 6 && n1 == 6);
    for (int s = 0; s < n0 && s < n1; s++)
      CHECK_MSG(fabs(l[0][s] - l[1][s]) <= 1e-4 * fabs(l[0][s]), "%s step %d: ref %.8g, llvm %.8g",
                models[m], s + 1, l[0][s], l[1][s]);
    unlink(log[0]);
    unlink(log[1]);
    dpc_graph_free(g);
  }
  unlink(xs);
  unlink(ys);
  dpc_diag_free(&d);
}

/* dpc compile's artifact, loaded without LLVM, computes what the JIT computes. */
static void artifact_matches_jit(void) {
  dpc_graph *g = load_example("fashion_mlp");
  if (!g) return;
  char path[256];
  path_in(path, sizeof path, "mlp.dpx");
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_pass_opts po = {.fuse = dpc_cpu_fusion()};
  int64_t n = 5;
  dpc_plan *plan = NULL;
  dpc_cpu_backend *b = NULL;
  dpc_graph *c = dpc_graph_clone(g);
  CHECK(c && dpc_passes_run(c, &po, &d) == DPC_OK);
  uint32_t sym = dpc_graph_symbol(c, "N", 1);
  int64_t *vals = calloc(c->n_syms, sizeof *vals);
  vals[sym] = n;
  CHECK_MSG(dpc_graph_bind(c, vals, &d) == DPC_OK, "%s", d.msg);
  CHECK_MSG(dpc_plan_single(c, "cpu:0", false, &plan, &d) == DPC_OK, "%s", d.msg);
  CHECK_MSG(dpc_cpu_backend_new(&(dpc_cpu_options){0}, &b, &d) == DPC_OK, "%s", d.msg);
  dpc_aot_plan ap = {"infer", plan};
  CHECK_MSG(dpc_cpu_compile_artifact(b, &ap, 1, path, &d) == DPC_OK, "%s", d.msg);
  dpc_named x = make_x(n, 21);
  dpc_named *aot = NULL, *jit = NULL;
  uint32_t n_aot = 0, n_jit = 0;
  dpc_exec_opts llvm = {.backend = &dpc_codegen_llvm};
  CHECK_MSG(dpc_driver_infer_artifact(path, &x, 1, false, &aot, &n_aot, &d) == DPC_OK, "%s", d.msg);
  CHECK_MSG(dpc_driver_infer(g, NULL, &llvm, &x, 1, false, &jit, &n_jit, &d) == DPC_OK, "%s",
            d.msg);
  CHECK(n_aot == 1 && n_jit == 1);
  if (n_aot == 1 && n_jit == 1)
    CHECK(!memcmp(aot[0].t.data, jit[0].t.data, dpc_tensor_bytes(&jit[0].t)));
  dpc_named_free(aot, n_aot);
  dpc_named_free(jit, n_jit);
  drop(&x);
  dpc_cpu_backend_free(b);
  dpc_plan_free(plan);
  free(vals);
  dpc_graph_free(c);
  dpc_graph_free(g);
  unlink(path);
  dpc_diag_free(&d);
}

/* Plan fashion_mlp's inference at batch n, fused as the LLVM backend compiles it. */
static dpc_plan *mlp_plan(int64_t n) {
  dpc_graph *g = load_example("fashion_mlp");
  if (!g) return NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_pass_opts po = {.fuse = dpc_cpu_fusion()};
  dpc_plan *plan = NULL;
  int64_t vals[4] = {n, n, n, n};
  CHECK(g->n_syms <= 4);
  CHECK_MSG(dpc_passes_run(g, &po, &d) == DPC_OK && dpc_graph_bind(g, vals, &d) == DPC_OK &&
                dpc_plan_single(g, "cpu:0", false, &plan, &d) == DPC_OK,
            "%s", d.msg);
  dpc_diag_free(&d);
  dpc_graph_free(g);
  return plan;
}

static bool write_bytes(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(b, 1, n, f) == n;
  if (f && fclose(f)) ok = false;
  return ok;
}

/* An artifact cut short or with a byte flipped anywhere (ELF header, code, plans, checksum) is
 * refused by dpc_artifact_open with a message naming the file, before dlopen maps any of it
 * (a cut file mapped faults with SIGBUS; damaged code runs). */
static void damaged_artifact_refused(void) {
  static const unsigned char check[] = "123456789";
  CHECK(dpc_seal_crc64(0, check, 9) == 0x995DC9BBDF1939FAull); /* CRC-64/XZ's check value */
  dpc_plan *plan = mlp_plan(3);
  if (!plan) return;
  char path[256], bad[300];
  snprintf(path, sizeof path, "%s/whole.dpx", tmpdir);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_cpu_backend *b = NULL;
  dpc_aot_plan ap = {"infer", plan};
  CHECK_MSG(dpc_cpu_backend_new(&(dpc_cpu_options){0}, &b, &d) == DPC_OK &&
                dpc_cpu_compile_artifact(b, &ap, 1, path, &d) == DPC_OK,
            "%s", d.msg);
  dpc_artifact *a = NULL;
  CHECK_MSG(dpc_artifact_open(path, &a, &d) == DPC_OK, "%s", d.msg);
  dpc_artifact_close(a);
  FILE *f = fopen(path, "rb");
  unsigned char *buf = malloc(1 << 22);
  size_t n = f && buf ? fread(buf, 1, 1 << 22, f) : 0;
  if (f) fclose(f);
  CHECK(n > 4096 && n < (1 << 22));
  for (int i = 0; n > 4096 && n < (1 << 22) && i < 41; i++) {
    /* 0..19: cut at i/20 of the file (0: empty), 20: the trailer dropped (an artifact from
     * before checksums), 21..40: one byte flipped, from the first to the last */
    size_t len = i < 20 ? n * (size_t)i / 20 : i == 20 ? n - DPC_SEAL_BYTES : n;
    size_t at = (n - 1) * (size_t)(i - 21) / 19;
    if (i > 20) buf[at] ^= 0xff;
    snprintf(bad, sizeof bad, "%s/bad%d.dpx", tmpdir, i);
    CHECK(write_bytes(bad, buf, len));
    if (i > 20) buf[at] ^= 0xff;
    dpc_diag_free(&d);
    dpc_diag_init(&d);
    a = NULL;
    CHECK_MSG(dpc_artifact_open(bad, &a, &d) != DPC_OK && !a, "case %d accepted", i);
    CHECK_MSG(d.msg && strstr(d.msg, bad), "case %d: %s", i, d.msg ? d.msg : "no message");
    if (i == 20) CHECK(d.msg && strstr(d.msg, "compile it again"));
    if (i > 20) CHECK(d.msg && strstr(d.msg, i < 40 ? "is damaged" : "does not end in"));
    dpc_artifact_close(a);
    unlink(bad);
  }
  free(buf);
  unlink(path);
  dpc_cpu_backend_free(b);
  dpc_plan_free(plan);
  dpc_diag_free(&d);
}

/* Training plans compute an update in its target's slot (no copy back) exactly when that is
 * safe: fashion_mlp with SGD momentum, unfused (the reference backend's plan) and fused (the
 * LLVM backend's, where each weight gradient's matmul anchors the momentum update's group). */
/* fashion_mlp's training step at batch 8 on one device, fused as the CPU backend fuses or not. */
static dpc_plan *example_training_plan(const char *name, bool fused, dpc_graph **g, dpc_diag *d) {
  dpc_plan *plan = NULL;
  if (!(*g = load_example(name))) return NULL;
  dpc_pass_opts po = {.training = true, .fuse = fused ? dpc_cpu_fusion() : 0};
  int64_t vals[4] = {8, 8, 8, 8};
  CHECK_MSG(dpc_driver_default_horizon(*g, d) == DPC_OK && dpc_passes_run(*g, &po, d) == DPC_OK &&
                dpc_graph_bind(*g, vals, d) == DPC_OK &&
                dpc_plan_single(*g, "cpu:0", true, &plan, d) == DPC_OK,
            "%s", d->msg);
  return plan;
}

static dpc_plan *mlp_training_plan(bool fused, dpc_graph **g, dpc_diag *d) {
  return example_training_plan("fashion_mlp", fused, g, d);
}

static void updates_in_place(void) {
  for (int fused = 0; fused < 2; fused++) {
    dpc_graph *g = NULL;
    dpc_diag d;
    dpc_diag_init(&d);
    dpc_plan *plan = mlp_training_plan(fused, &g, &d);
    if (!plan) {
      dpc_graph_free(g);
      dpc_diag_free(&d);
      return;
    }
    const dpc_graph *pg = plan->g;
    int shared = 0, copied = 0;
    for (uint32_t i = 0; i < pg->n_updates; i++) {
      uint32_t v = pg->updates[i].value, t = pg->updates[i].target;
      bool same = plan->slots[v].offset == plan->slots[t].offset;
      bool copy = false;
      for (uint32_t j = 0; j < plan->devs[0].n_steps; j++)
        copy |= plan->devs[0].steps[j].kind == DPC_STEP_COPY && plan->devs[0].steps[j].dst == t;
      CHECK_MSG(same != copy, "update %u of target %u: shared %d, copied %d", i, t, same, copy);
      /* a momentum buffer whose new value's kernel is the weight gradient's matmul must not be
       * overwritten before the epilogue reads it */
      uint32_t prod = pg->values[v].node;
      bool anchored = false;
      for (uint32_t n = 0; n < pg->n_nodes; n++)
        anchored |= pg->nodes[n].fused == prod && pg->nodes[n].op == DPC_OP_MATMUL;
      if (anchored) CHECK_MSG(!same, "update %u is anchored by a matmul but shares its slot", i);
      shared += same;
      copied += copy;
    }
    /* 6 weights + 6 momenta + the step counter; fused, the 3 weight-momentum updates copy */
    CHECK_MSG(shared + copied == 13 && copied == (fused ? 3 : 0), "fused %d: %d shared, %d copied",
              fused, shared, copied);
    dpc_plan_free(plan);
    dpc_graph_free(g);
    dpc_diag_free(&d);
  }
}

static void keep_optimised(void *user, const char *what, const char *text) {
  if (strcmp(what, "llvm-optimised")) return;
  dpc_buf_puts(user, text);
  dpc_buf_puts(user, "\n; ---- end of module ----\n");
}

/* Compile every kernel of plan with a fresh backend and no cache, appending each optimised
 * module's IR to dumps; with node != DPC_NONE, name gets "@<symbol of its kernel>(". */
static bool compile_optimised(const dpc_plan *plan, uint32_t node, dpc_buf *dumps, char *name,
                              size_t n) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_cpu_backend *b = NULL;
  dpc_native_kernel *k = calloc(plan->g->n_nodes, sizeof *k);
  char sym[64] = "";
  bool ok = k &&
            dpc_cpu_backend_new(
                &(dpc_cpu_options){.dump = keep_optimised, .user = dumps, .cache_dir = "off"}, &b,
                &d) == DPC_OK &&
            (node == DPC_NONE ||
             dpc_cpu_kernel_symbol(b, plan->g, node, sym, sizeof sym, &d) == DPC_OK) &&
            dpc_cpu_compile_plan(b, plan, k, &d) == DPC_OK;
  CHECK_MSG(ok, "%s", d.msg ? d.msg : "out of memory");
  if (name) snprintf(name, n, "@%s(", sym);
  free(k);
  dpc_cpu_backend_free(b);
  dpc_diag_free(&d);
  return ok;
}

/* The optimised module in dumps that defines `name`, and its end (NULL, NULL: none). */
static const char *module_of(const dpc_buf *dumps, const char *name, const char **end) {
  const char *at = dumps->data ? strstr(dumps->data, name) : NULL;
  *end = at ? strstr(at, "; ---- end of module ----") : NULL;
  return *end ? at : NULL;
}

/* An update computed in its target's slot reads and writes the same elements through two
 * pointers. The vectorizer guarded its vector loop with an overlap check that such an update
 * always fails, so every optimizer update ran the scalar loop, 5x slower than the memory allows;
 * the kernels' loops now say their iterations are independent (cg_parallel_begin). w1's
 * update must come out of LLVM as vector code with no overlap check before it. */
static void updates_vectorized(void) {
  dpc_graph *g = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_plan *plan = mlp_training_plan(true, &g, &d);
  dpc_buf dumps = {0};
  if (plan) {
    const dpc_graph *pg = plan->g;
    uint32_t w1 = dpc_graph_find(pg, "w1"), prod = DPC_NONE;
    for (uint32_t i = 0; i < pg->n_updates; i++)
      if (pg->updates[i].target == w1) prod = pg->values[pg->updates[i].value].node;
    CHECK(prod != DPC_NONE && plan->slots[pg->nodes[prod].out].offset == plan->slots[w1].offset);
    char name[80] = "";
    if (prod != DPC_NONE) compile_optimised(plan, prod, &dumps, name, sizeof name);
    const char *end, *at = module_of(&dumps, name, &end);
    CHECK_MSG(at, "no optimised module holds the update's kernel %s", name);
    /* vector code, reached without the overlap check (which fails on in-place updates) */
    const char *vec = at ? strstr(at, " x float>") : NULL;
    const char *check = at ? strstr(at, "vector.memcheck") : NULL;
    CHECK_MSG(vec && vec < end, "w1's update is not vectorized");
    CHECK_MSG(!check || check > end, "w1's update runs vectorized only after an overlap check");
  }
  dpc_buf_free(&dumps);
  dpc_plan_free(plan);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* exp and erf are arithmetic in the kernels (lower_math.c), not calls to libm, which kept every
 * loop around them scalar: the transformer's training step (GELU, its gradient, softmax) must
 * call no expf, erff or llvm.exp anywhere, and its GELU kernel must come out as vector code. */
static void transcendentals_vectorized(void) {
  dpc_graph *g = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_plan *plan = example_training_plan("transformer_block", true, &g, &d);
  dpc_buf dumps = {0};
  if (plan) {
    const dpc_graph *pg = plan->g;
    uint32_t gelu = DPC_NONE;
    for (uint32_t i = 0; i < pg->n_nodes && gelu == DPC_NONE; i++)
      if (pg->nodes[i].op == DPC_OP_GELU)
        gelu = pg->nodes[i].fused == DPC_NONE ? i : pg->nodes[i].fused;
    CHECK(gelu != DPC_NONE);
    char name[80] = "";
    if (gelu != DPC_NONE) compile_optimised(plan, gelu, &dumps, name, sizeof name);
    const char *all = dumps.data ? dumps.data : "";
    CHECK_MSG(!strstr(all, "@erff(") && !strstr(all, "@expf(") && !strstr(all, "@llvm.exp."),
              "a kernel of the transformer still calls erff or expf");
    const char *end, *at = module_of(&dumps, name, &end);
    const char *vec = at ? strstr(at, " x float>") : NULL;
    CHECK_MSG(at && vec && vec < end, "the GELU kernel %s is not vectorized", name);
  }
  dpc_buf_free(&dumps);
  dpc_plan_free(plan);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* tanh and log of floats likewise: one fused kernel, vector code, no call to tanhf or logf. */
static void tanh_log_vectorized(void) {
  dpc_graph *g = parse("model m\ninput x: f32[64, 256]\ny = tanh(x) + log(x * x + 1)\noutput y\n");
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_plan *plan = NULL;
  dpc_buf dumps = {0};
  int64_t none = 0;
  dpc_pass_opts po = {.fuse = dpc_cpu_fusion()};
  CHECK_MSG(g && dpc_passes_run(g, &po, &d) == DPC_OK && dpc_graph_bind(g, &none, &d) == DPC_OK &&
                dpc_plan_single(g, "cpu:0", false, &plan, &d) == DPC_OK,
            "%s", d.msg);
  if (plan && compile_optimised(plan, DPC_NONE, &dumps, NULL, 0)) {
    const char *all = dumps.data ? dumps.data : "";
    CHECK_MSG(!strstr(all, "@tanhf(") && !strstr(all, "@logf(") && !strstr(all, "@llvm.log."),
              "the kernel still calls tanhf or logf");
    CHECK_MSG(strstr(all, " x float>") != NULL, "tanh(x) + log(x * x + 1) is not vectorized");
  }
  dpc_buf_free(&dumps);
  dpc_plan_free(plan);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* Compile a plan with a fresh backend on the cache folder; report what it compiled and read. */
static void compile_with_cache(const dpc_plan *plan, const char *dir, uint32_t *compiled,
                               uint32_t *hits, float *logits) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_cpu_backend *b = NULL;
  dpc_native_kernel *k = calloc(plan->g->n_nodes, sizeof *k);
  dpc_session *s = NULL;
  CHECK_MSG(dpc_cpu_backend_new(&(dpc_cpu_options){.cache_dir = dir}, &b, &d) == DPC_OK &&
                dpc_cpu_compile_plan(b, plan, k, &d) == DPC_OK,
            "%s", d.msg);
  dpc_cpu_stats(b, NULL, compiled, NULL);
  *hits = dpc_cpu_disk_hits(b);
  CHECK_MSG(dpc_session_new(plan, &(dpc_session_opts){.native = k, .threads = 1}, &s, &d) == DPC_OK,
            "%s", d.msg);
  if (s) {
    uint32_t x = dpc_graph_find(plan->g, "x");
    dpc_tensor t = dpc_session_input(s, x);
    for (int64_t i = 0; i < dpc_tensor_numel(&t); i++)
      dpc_tstore(&t, i, dpc_rng_uniform(5, (uint64_t)i));
    CHECK(dpc_session_run(s, &d) == DPC_OK);
    dpc_tensor y = dpc_session_value(s, plan->g->outputs[0]);
    memcpy(logits, y.data, dpc_tensor_bytes(&y));
  }
  dpc_session_free(s);
  free(k);
  dpc_cpu_backend_free(b);
  dpc_diag_free(&d);
}

/* Kernels compiled once are read back from the disk cache by the next backend, give the same
 * results, and an entry cut short is compiled again instead of linked. */
static void disk_cache(void) {
  dpc_plan *plan = mlp_plan(4);
  if (!plan) return;
  char dir[256], cmd[600];
  path_in(dir, sizeof dir, "cache");
  float a[40], b[40], c[40];
  uint32_t compiled, hits;
  compile_with_cache(plan, dir, &compiled, &hits, a);
  CHECK_MSG(compiled > 0 && hits == 0, "first: %u compiled, %u from disk", compiled, hits);
  uint32_t n = compiled;
  compile_with_cache(plan, dir, &compiled, &hits, b);
  CHECK_MSG(compiled == 0 && hits == n, "second: %u compiled, %u from disk", compiled, hits);
  CHECK(!memcmp(a, b, sizeof a));
  /* cut one entry short: it is compiled again, the others still read */
  snprintf(cmd, sizeof cmd,
           "f=$(ls %s/*/*.o | head -1) && head -c 100 \"$f\" > \"$f.x\" && mv \"$f.x\" \"$f\"",
           dir);
  CHECK(system(cmd) == 0);
  compile_with_cache(plan, dir, &compiled, &hits, c);
  CHECK_MSG(compiled == 1 && hits == n - 1, "after damage: %u compiled, %u from disk", compiled,
            hits);
  CHECK(!memcmp(a, c, sizeof a));
  /* "off": nothing read or written */
  compile_with_cache(plan, "off", &compiled, &hits, c);
  CHECK(compiled == n && hits == 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  dpc_plan_free(plan);
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Set or (value NULL) unset an environment variable for the test. */
static void set_env(const char *name, const char *value) {
  CHECK(value ? setenv(name, value, 1) == 0 : unsetenv(name) == 0);
}

/* Where the cache folder is (the argument, then $DPC_CACHE_DIR, $XDG_CACHE_HOME/dpc,
 * ~/.cache/dpc) and that it is made with its parents; "off" or "" means none. */
static void cache_folder(void) {
  const char *names[3] = {"DPC_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  char *saved[3];
  for (int i = 0; i < 3; i++) saved[i] = getenv(names[i]) ? dpc_strdup(getenv(names[i])) : NULL;
  char root[256], want[512], got[512] = "", cmd[600];
  path_in(root, sizeof root, "cachedir");
  char home[400];
  snprintf(home, sizeof home, "%s/home", root);
  set_env("HOME", home); /* a broken lookup must not write into the real home */

  snprintf(want, sizeof want, "%s/given/a/b", root);
  set_env("DPC_CACHE_DIR", "off");
  CHECK(dpc_cache_base_dir(want, got, sizeof got)); /* the argument wins over the environment */
  CHECK_MSG(!strcmp(got, want) && is_dir(want), "%s", got);
  CHECK(!dpc_cache_base_dir("off", got, sizeof got));
  CHECK(!dpc_cache_base_dir("", got, sizeof got));

  snprintf(want, sizeof want, "%s/env", root);
  set_env("DPC_CACHE_DIR", want);
  CHECK(dpc_cache_base_dir(NULL, got, sizeof got));
  CHECK_MSG(!strcmp(got, want) && is_dir(want), "%s", got);

  char xdg[400];
  snprintf(xdg, sizeof xdg, "%s/xdg", root);
  set_env("XDG_CACHE_HOME", xdg);
  set_env("DPC_CACHE_DIR", "off"); /* off even when another place is known */
  CHECK(!dpc_cache_base_dir(NULL, got, sizeof got));
  set_env("DPC_CACHE_DIR", NULL);
  snprintf(want, sizeof want, "%s/xdg/dpc", root);
  CHECK(dpc_cache_base_dir(NULL, got, sizeof got));
  CHECK_MSG(!strcmp(got, want) && is_dir(want), "%s", got);

  set_env("XDG_CACHE_HOME", "");
  snprintf(want, sizeof want, "%s/home/.cache/dpc", root);
  CHECK(dpc_cache_base_dir(NULL, got, sizeof got));
  CHECK_MSG(!strcmp(got, want) && is_dir(want), "%s", got);
  set_env("HOME", NULL);
  CHECK(!dpc_cache_base_dir(NULL, got, sizeof got)); /* no home: no cache */

  /* a file where a parent folder should be: no cache rather than a broken one */
  snprintf(want, sizeof want, "%s/file", root);
  FILE *f = fopen(want, "w");
  CHECK(f && fclose(f) == 0);
  snprintf(want, sizeof want, "%s/file/dpc", root);
  CHECK(!dpc_cache_base_dir(want, got, sizeof got));

  for (int i = 0; i < 3; i++) {
    set_env(names[i], saved[i]);
    free(saved[i]);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  CHECK(system(cmd) == 0);
}

/* Run `plan` once on x = the uniform numbers of seed 5 with the kernel handles k (NULL: the
 * reference kernels); its first output into out (up to n floats). The status of opening the
 * session, whose message stays in d. */
static dpc_status run_mlp(const dpc_plan *plan, const dpc_native_kernel *k, float *out, size_t n,
                          dpc_diag *d) {
  dpc_session *s = NULL;
  dpc_status st = dpc_session_new(plan, &(dpc_session_opts){.native = k, .threads = 1}, &s, d);
  if (st) return st;
  dpc_tensor t = dpc_session_input(s, dpc_graph_find(plan->g, "x"));
  for (int64_t i = 0; i < dpc_tensor_numel(&t); i++)
    dpc_tstore(&t, i, dpc_rng_uniform(5, (uint64_t)i));
  CHECK_MSG(dpc_session_run(s, d) == DPC_OK, "%s", d->msg);
  dpc_tensor y = dpc_session_value(s, plan->g->outputs[0]);
  CHECK(dpc_tensor_bytes(&y) <= n * sizeof *out);
  if (dpc_tensor_bytes(&y) <= n * sizeof *out) memcpy(out, y.data, dpc_tensor_bytes(&y));
  dpc_session_free(s);
  return DPC_OK;
}

/* Backends are found by name; an unknown name is refused with the names that exist. */
static void backend_by_name(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  const dpc_codegen_backend *llvm = NULL, *ref = NULL, *none = &dpc_codegen_llvm;
  CHECK_MSG(dpc_codegen_backend_find("llvm", &llvm, &d) == DPC_OK, "%s", d.msg);
  CHECK(llvm == &dpc_codegen_llvm && !strcmp(llvm->name, "llvm"));
  CHECK(llvm && llvm->kind == DPC_KERNEL_HOST && dpc_codegen_compiles(llvm));
  CHECK(dpc_codegen_fusion(llvm) == dpc_cpu_fusion() && dpc_cpu_fusion() != 0);
  CHECK_MSG(dpc_codegen_backend_find("ref", &ref, &d) == DPC_OK, "%s", d.msg);
  CHECK(ref && !strcmp(ref->name, "ref") && ref->kind == DPC_KERNEL_NONE);
  CHECK(!dpc_codegen_compiles(ref) && !dpc_codegen_compiles(NULL));
  CHECK(dpc_codegen_fusion(ref) == 0 && dpc_codegen_fusion(NULL) == 0);
  CHECK(dpc_codegen_backend_find("LLVM", &none, &d) == DPC_ERR_INVALID && none == NULL);
  CHECK_MSG(d.msg && strstr(d.msg, "'LLVM'") && strstr(d.msg, "ref, llvm, cuda"), "%s", d.msg);
  char names[64];
  dpc_codegen_backend_names(names, sizeof names);
  CHECK_MSG(!strcmp(names, "ref, llvm, cuda"), "%s", names);
  dpc_diag_free(&d);
}

/* A plan compiled through the interface, by each backend, runs to the reference's outputs; the
 * artifact written through it computes what its JIT does; "ref" writes no artifact. */
static void backend_plan_matches_reference(void) {
  dpc_plan *plan = mlp_plan(4);
  if (!plan) return;
  dpc_diag d;
  dpc_diag_init(&d);
  float want[40] = {0};
  CHECK_MSG(run_mlp(plan, NULL, want, 40, &d) == DPC_OK, "%s", d.msg);
  const char *names[] = {"ref", "llvm"};
  for (int b = 0; b < 2; b++) {
    const dpc_codegen_backend *be = NULL;
    dpc_codegen *cg = NULL;
    dpc_native_kernel *k = calloc(plan->g->n_nodes, sizeof *k);
    CHECK_MSG(dpc_codegen_backend_find(names[b], &be, &d) == DPC_OK &&
                  dpc_codegen_new(be, &(dpc_codegen_options){.cache_dir = "off"}, &cg, &d) ==
                      DPC_OK &&
                  dpc_codegen_compile_plan(cg, plan, k, &d) == DPC_OK,
              "%s: %s", names[b], d.msg);
    uint32_t host = 0;
    for (uint32_t i = 0; i < plan->g->n_nodes; i++) host += k[i].kind == DPC_KERNEL_HOST;
    /* every fashion_mlp kernel lowers: the llvm backend compiles several, ref none */
    CHECK_MSG(b ? host >= 3 : host == 0, "%s: %u host kernels", names[b], host);
    float got[40] = {0};
    CHECK_MSG(run_mlp(plan, k, got, 40, &d) == DPC_OK, "%s: %s", names[b], d.msg);
    for (int i = 0; i < 40; i++)
      CHECK_MSG(fabsf(got[i] - want[i]) <= 1e-4f * fmaxf(1, fabsf(want[i])),
                "%s logit %d: %.8g, reference %.8g", names[b], i, got[i], want[i]);
    if (cg) {
      dpc_codegen_stats cs;
      dpc_codegen_get_stats(cg, &cs);
      CHECK_MSG(b ? cs.compiled == host || cs.compiled + cs.cached == host : cs.compiled == 0,
                "%s: %u compiled, %u cached", names[b], cs.compiled, cs.cached);
      char path[256];
      path_in(path, sizeof path, "through.dpx");
      dpc_aot_plan ap = {"infer", plan};
      dpc_status st = dpc_codegen_write_artifact(cg, &ap, 1, path, &d);
      if (!b) {
        CHECK(st == DPC_ERR_UNSUPPORTED && d.msg && strstr(d.msg, "ref"));
        CHECK(access(path, F_OK) != 0);
      } else {
        CHECK_MSG(st == DPC_OK, "%s", d.msg);
        CHECK(dpc_codegen_target(cg)[0] != 0);
        dpc_artifact *a = NULL;
        const dpc_native_kernel *ak = NULL;
        CHECK_MSG(dpc_artifact_open(path, &a, &d) == DPC_OK, "%s", d.msg);
        const dpc_plan *ap2 = a ? dpc_artifact_plan(a, "infer", &ak) : NULL;
        CHECK(ap2 && ak);
        if (ap2 && ak) {
          float aot[40] = {0};
          CHECK_MSG(run_mlp(ap2, ak, aot, 40, &d) == DPC_OK, "%s", d.msg);
          CHECK(!memcmp(aot, got, sizeof aot));
        }
        dpc_artifact_close(a);
        unlink(path);
      }
    }
    dpc_codegen_free(cg);
    free(k);
  }
  dpc_diag_free(&d);
  dpc_plan_free(plan);
}

/* A kernel handle names its backend: a cpu device runs host code only, so a handle of another
 * kind is refused with an error naming the node and the kind, even when it holds a callable
 * host pointer (a session that called handles blindly would run it), and a handle with code but
 * no kind is refused as malformed. */
static void foreign_kernel_refused(void) {
  dpc_plan *plan = mlp_plan(4);
  if (!plan) return;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_codegen *cg = NULL;
  dpc_native_kernel *k = calloc(plan->g->n_nodes, sizeof *k);
  CHECK_MSG(dpc_codegen_new(&dpc_codegen_llvm, &(dpc_codegen_options){.cache_dir = "off"}, &cg,
                            &d) == DPC_OK &&
                dpc_codegen_compile_plan(cg, plan, k, &d) == DPC_OK,
            "%s", d.msg);
  uint32_t node = DPC_NONE;
  for (uint32_t i = 0; i < plan->g->n_nodes && node == DPC_NONE; i++)
    if (k[i].kind == DPC_KERNEL_HOST && k[i].fn) node = i;
  CHECK(node != DPC_NONE);
  float out[40];
  if (node != DPC_NONE) {
    CHECK_MSG(run_mlp(plan, k, out, 40, &d) == DPC_OK, "%s", d.msg);
    dpc_native_kernel keep = k[node];
    k[node].kind = DPC_KERNEL_CUDA;
    CHECK(run_mlp(plan, k, out, 40, &d) == DPC_ERR_UNSUPPORTED);
    CHECK_MSG(d.msg && strstr(d.msg, "cuda code") && strstr(d.msg, "host code only"), "%s", d.msg);
    const char *op = dpc_op_name(plan->g->nodes[node].op);
    CHECK_MSG(d.msg && strstr(d.msg, op), "'%s' not named in: %s", op, d.msg);
    k[node].kind = DPC_KERNEL_NONE;
    CHECK(run_mlp(plan, k, out, 40, &d) == DPC_ERR_INVALID);
    CHECK_MSG(d.msg && strstr(d.msg, "malformed"), "%s", d.msg);
    k[node] = keep;
    CHECK_MSG(run_mlp(plan, k, out, 40, &d) == DPC_OK, "%s", d.msg);
  }
  dpc_codegen_free(cg);
  free(k);
  dpc_diag_free(&d);
  dpc_plan_free(plan);
}

static void setup_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/dpc_codegen_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    CHECK_MSG(0, "cannot make a temporary folder");
    tmpdir[0] = 0;
  }
}

static void cleanup_tmp(void) {
  CHECK(rmdir(tmpdir) == 0);
}

const unit_test unit_tests[] = {
    {"fuse_groups", fuse_groups},
    {"examples_match_reference", examples_match_reference},
    {"epilogues_match_reference", epilogues_match_reference},
    {"conv_direct_epilogues_match_reference", conv_direct_epilogues_match_reference},
    {"conv_pieces_match_reference", conv_pieces_match_reference},
    {"conv_bits_same_at_any_batch", conv_bits_same_at_any_batch},
    {"gemv_stream_matches", gemv_stream_matches},
    {"register_epilogues_match_reference", register_epilogues_match_reference},
    {"conv_winograd_matches_reference", conv_winograd_matches_reference},
    {"conv_winograd_grad_input_matches_reference", conv_winograd_grad_input_matches_reference},
    {"conv_winograd_grad_weight_matches_reference", conv_winograd_grad_weight_matches_reference},
    {"conv_wgrad_dot_matches_reference", conv_wgrad_dot_matches_reference},
    {"training_matches_reference", training_matches_reference},
    {"artifact_matches_jit", artifact_matches_jit},
    {"damaged_artifact_refused", damaged_artifact_refused},
    {"updates_in_place", updates_in_place},
    {"updates_vectorized", updates_vectorized},
    {"transcendentals_vectorized", transcendentals_vectorized},
    {"tanh_log_vectorized", tanh_log_vectorized},
    {"disk_cache", disk_cache},
    {"cache_folder", cache_folder},
    {"backend_by_name", backend_by_name},
    {"backend_plan_matches_reference", backend_plan_matches_reference},
    {"foreign_kernel_refused", foreign_kernel_refused},
    {NULL, NULL},
};
const unit_fixture unit_fixtures = {setup_tmp, cleanup_tmp};
