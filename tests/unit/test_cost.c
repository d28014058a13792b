/*
 * test_cost.c — the cost model: a rule for every op, exact FLOPs where they are known, and the
 * bytes a fused kernel moves.
 */
#include "codegen/cpu/cpu.h"
#include "frontend/frontend.h"
#include "partitioner/cost.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "driver/driver.h"
#include "unit.h"

#include <stdlib.h>

static void every_op_has_a_rule(void) {
  for (int op = 0; op < DPC_OP_COUNT; op++)
    CHECK_MSG(dpc_cost_has_rule((dpc_op)op), "%s has no cost rule", dpc_op_name((dpc_op)op));
}

/* Parse, run the pipeline (training when asked), bind every symbol to n. */
static dpc_graph *prepared(const char *text, bool training, unsigned fuse, int64_t n) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  CHECK_MSG(dpc_parse_graph("t.graph", text, strlen(text), &g, &d) == DPC_OK, "%s", d.msg);
  if (!g) return NULL;
  dpc_pass_opts po = {.training = training, .fuse = fuse};
  int64_t vals[8] = {n, n, n, n, n, n, n, n};
  CHECK_MSG((!training || dpc_driver_default_horizon(g, &d) == DPC_OK) &&
                dpc_passes_run(g, &po, &d) == DPC_OK && dpc_graph_bind(g, vals, &d) == DPC_OK,
            "%s", d.msg);
  dpc_diag_free(&d);
  return g;
}

static dpc_node_cost *costs(const dpc_graph *g) {
  dpc_node_cost *c = calloc(g->n_nodes, sizeof *c);
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK_MSG(dpc_cost_graph(g, c, &d) == DPC_OK, "%s", d.msg);
  dpc_diag_free(&d);
  return c;
}

static double flops_of(const dpc_graph *g, const dpc_node_cost *c, dpc_op op) {
  double f = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == op) f += c[i].flops;
  return f;
}

static void exact_flops(void) {
  dpc_graph *g = prepared("input a: f32[N, 3, 5]\ninput b: f32[7, 5]\n"
                          "y = matmul(a, b, transpose_b=1)\n"
                          "input c: f32[4, 6]\ninput e: f32[4, 9]\n"
                          "z = matmul(c, e, transpose_a=1)\n"
                          "input x: f32[N, 4, 10, 12]\ninput w: f32[8, 2, 3, 3]\n"
                          "v = conv2d(x, w, pad=1, groups=2)\n"
                          "p = max_pool2d(v, kernel=2)\n"
                          "output y, z, p\n",
                          false, 0, 2);
  if (!g) return;
  dpc_node_cost *c = costs(g);
  /* batched [2,3,5] x [5,7]: 2 * 2*3*7 * 5; [4,6]^T x [4,9]: 2 * 6*9 * 4 */
  CHECK(flops_of(g, c, DPC_OP_MATMUL) == 2.0 * 2 * 3 * 7 * 5 + 2.0 * 6 * 9 * 4);
  /* y [2, 8, 10, 12], each output 2 input channels x 9 taps, 2 FLOPs a tap */
  CHECK(flops_of(g, c, DPC_OP_CONV2D) == 2.0 * (2 * 8 * 10 * 12) * (2 * 3 * 3));
  CHECK(flops_of(g, c, DPC_OP_MAX_POOL2D) == (2.0 * 8 * 5 * 6) * 4);
  free(c);
  dpc_graph_free(g);
}

static dpc_graph *example(const char *name, bool training, unsigned fuse, int64_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s.graph", DPC_SOURCE_DIR, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    CHECK_MSG(false, "cannot open %s", path);
    return NULL;
  }
  static char text[1 << 16];
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[len] = 0;
  return prepared(text, training, fuse, n);
}

/* The MLP's training step: its GEMMs are 3.22 MFLOP a sample (forward, weight gradients, and
 * the input gradients of layers 2 and 3), as the anchors count them; its params as declared. */
static void mlp_training(void) {
  dpc_graph *g = example("fashion_mlp", true, 0, 128);
  if (!g) return;
  dpc_node_cost *c = costs(g);
  double fwd = 2.0 * (784 * 512 + 512 * 512 + 512 * 10), dx = 2.0 * (512 * 512 + 512 * 10);
  CHECK_MSG(flops_of(g, c, DPC_OP_MATMUL) == 128 * (2 * fwd + dx), "%.0f vs %.0f",
            flops_of(g, c, DPC_OP_MATMUL), 128 * (2 * fwd + dx));
  dpc_cost_total t = dpc_cost_sum(g, c);
  CHECK(t.param_bytes == 4.0 * (784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10));
  /* momentum buffers, one per param, and the step counter */
  CHECK(t.state_bytes >= t.param_bytes && t.state_bytes < t.param_bytes + 64);
  CHECK(t.flops > 128 * (2 * fwd + dx) && t.flops < 1.05 * 128 * (2 * fwd + dx));
  free(c);
  dpc_graph_free(g);
}

/* A fused kernel reads only what comes from outside its group: h1 = relu(x w1 + b1) moves x, w1,
 * b1 and h1, never the pre-activation. */
static void fused_bytes(void) {
  dpc_graph *g = example("fashion_mlp", false, dpc_cpu_fusion(), 64);
  if (!g) return;
  dpc_node_cost *c = costs(g);
  uint32_t h1 = dpc_graph_find(g, "h1");
  CHECK(h1 != DPC_NONE);
  if (h1 != DPC_NONE) {
    uint32_t root = g->values[h1].node;
    CHECK(g->nodes[root].fused == DPC_NONE);
    double bytes = 4.0 * (64 * 784 + 784 * 512 + 512 + 64 * 512);
    /* memory-bound speed: the time is the bytes */
    dpc_device_speed slow = {1e9, 1, NULL};
    double s = dpc_cost_kernel_seconds(g, c, root, &slow);
    CHECK_MSG(fabs(s - bytes * 1e-9) < 1e-12, "%.6g s for %.0f bytes", s, bytes);
    /* compute-bound: the GEMM's FLOPs at full speed, the add and relu at a quarter */
    dpc_device_speed fast = {1, 1e9, NULL};
    double gemm = 2.0 * 64 * 512 * 784, ew = 2.0 * 64 * 512;
    s = dpc_cost_kernel_seconds(g, c, root, &fast);
    CHECK_MSG(fabs(s - (gemm + 4 * ew) * 1e-9) < 1e-9 * s, "%.6g s", s);
    /* members cost nothing on their own */
    for (uint32_t i = 0; i < g->n_nodes; i++)
      if (g->nodes[i].fused == root) CHECK(dpc_cost_kernel_seconds(g, c, i, &fast) == 0);
    /* a profile that timed this kernel at 3x its prediction (twice, summed) scales it; a
     * kernel it did not time keeps the roofline's figure */
    dpc_cost_profile pr = {0};
    CHECK(dpc_cost_profile_add(&pr, g, root, 3e-3, 1e-3) == DPC_OK);
    CHECK(dpc_cost_profile_add(&pr, g, root, 3e-3, 1e-3) == DPC_OK);
    dpc_cost_profile_finish(&pr);
    dpc_device_speed timed = {1, 1e9, &pr};
    /* three entries: the kernel at its size, its ops in its size class, its GEMM */
    CHECK(pr.n == 3 && fabs(pr.factor[0] - 3) < 1e-12 && fabs(pr.factor[1] - 3) < 1e-12 &&
          fabs(pr.factor[2] - 3) < 1e-12);
    CHECK(fabs(dpc_cost_kernel_seconds(g, c, root, &timed) - 3 * s) < 1e-12 * s);
    uint32_t logits = g->values[dpc_graph_find(g, "logits")].node;
    CHECK(dpc_cost_kernel_key(g, logits) != dpc_cost_kernel_key(g, root));
    CHECK(dpc_cost_kernel_seconds(g, c, logits, &timed) ==
          dpc_cost_kernel_seconds(g, c, logits, &fast));
    /* the same kernel at half the batch, not timed at that size: its ops' factor in the next
     * size class applies */
    dpc_graph *g32 = example("fashion_mlp", false, dpc_cpu_fusion(), 32);
    if (g32) {
      dpc_node_cost *c32 = costs(g32);
      uint32_t r32 = g32->values[dpc_graph_find(g32, "h1")].node;
      CHECK(dpc_cost_kernel_key(g32, r32) != dpc_cost_kernel_key(g, root));
      double f32 = dpc_cost_kernel_seconds(g32, c32, r32, &fast);
      CHECK(fabs(dpc_cost_kernel_seconds(g32, c32, r32, &timed) - 3 * f32) < 1e-12 * f32);
      free(c32);
      dpc_graph_free(g32);
    }
    /* a profile of other kernels (another batch's) merged in: each kernel keeps its own
     * factor, and one both timed keeps the first's */
    dpc_cost_profile other = {0};
    CHECK(dpc_cost_profile_add(&other, g, logits, 1e-3, 2e-3) == DPC_OK);
    CHECK(dpc_cost_profile_add(&other, g, root, 5e-3, 1e-3) == DPC_OK);
    dpc_cost_profile_finish(&other);
    CHECK(dpc_cost_profile_merge(&pr, &other) == DPC_OK);
    CHECK(pr.n == 6);
    CHECK(fabs(dpc_cost_kernel_seconds(g, c, root, &timed) - 3 * s) < 1e-12 * s);
    double lf = dpc_cost_kernel_seconds(g, c, logits, &fast);
    CHECK(fabs(dpc_cost_kernel_seconds(g, c, logits, &timed) - 0.5 * lf) < 1e-12 * lf);
    dpc_cost_profile_free(&other);
    dpc_cost_profile_free(&pr);
  }
  free(c);
  dpc_graph_free(g);
}

/* The node computing the gradient of param `name`: a matmul whose output has its shape. */
static uint32_t weight_grad(const dpc_graph *g, const char *name) {
  uint32_t w = dpc_graph_find(g, name);
  for (uint32_t i = 0; w != DPC_NONE && i < g->n_nodes; i++) {
    const dpc_shape *o = &g->values[g->nodes[i].out].shape, *ws = &g->values[w].shape;
    if (g->nodes[i].op == DPC_OP_MATMUL && dpc_shape_numel(o) == dpc_shape_numel(ws) &&
        o->rank == ws->rank)
      return i;
  }
  return DPC_NONE;
}

/* The profile's factor on the kernel rooted at node: its time with pr over its time without
 * (NAN when its costs are not there). */
static double profiled_factor(const dpc_graph *g, uint32_t node, const dpc_cost_profile *pr) {
  dpc_node_cost *c = costs(g);
  dpc_device_speed fast = {100, 100, NULL}, timed = {100, 100, pr};
  double t = c ? dpc_cost_kernel_seconds(g, c, node, &fast) : 0;
  double f = t > 0 ? dpc_cost_kernel_seconds(g, c, node, &timed) / t : NAN;
  free(c);
  return f;
}

/* A weight gradient writes as much at every batch: timed at one batch (the whole one), its
 * factor must not stand for another's (a data-parallel share's), which reads less. */
static void weight_grad_keys_by_batch(void) {
  dpc_graph *g128 = example("fashion_mlp", true, 0, 128),
            *g32 = example("fashion_mlp", true, 0, 32);
  if (g128 && g32) {
    uint32_t a = weight_grad(g128, "w1"), b = weight_grad(g32, "w1");
    CHECK(a != DPC_NONE && b != DPC_NONE);
    if (a != DPC_NONE && b != DPC_NONE) {
      CHECK(dpc_cost_kernel_key(g128, a) != dpc_cost_kernel_key(g32, b));
      /* timed at both batches, the whole batch's profile first (as dpc plan --profile merges
       * them): the batch-32 kernel takes its own factor */
      dpc_cost_profile pr = {0}, share = {0};
      CHECK(dpc_cost_profile_add(&pr, g128, a, 4e-3, 1e-3) == DPC_OK);
      CHECK(dpc_cost_profile_add(&share, g32, b, 2e-3, 1e-3) == DPC_OK);
      dpc_cost_profile_finish(&pr);
      dpc_cost_profile_finish(&share);
      CHECK(dpc_cost_profile_merge(&pr, &share) == DPC_OK);
      double f = profiled_factor(g32, b, &pr);
      CHECK_MSG(fabs(f - 2) < 1e-12, "%.6g times the roofline", f);
      dpc_cost_profile_free(&share);
      dpc_cost_profile_free(&pr);
    }
  }
  dpc_graph_free(g128);
  dpc_graph_free(g32);
}

/* A weight gradient kept apart (as data parallel keeps it, for its all-reduce) takes the factor
 * timed for the same GEMM fused into the momentum update (as one device runs it). */
static void gemm_factor_across_fusions(void) {
  dpc_graph *fused = example("fashion_mlp", true, dpc_cpu_fusion(), 64),
            *apart = example("fashion_mlp", true, 0, 64);
  if (fused && apart) {
    uint32_t m = weight_grad(fused, "w1"), b = weight_grad(apart, "w1");
    CHECK(m != DPC_NONE && b != DPC_NONE);
    uint32_t root = m != DPC_NONE && fused->nodes[m].fused != DPC_NONE ? fused->nodes[m].fused : m;
    CHECK_MSG(root != m, "w1's gradient is not fused into its update");
    if (b != DPC_NONE && root != m) {
      CHECK(dpc_cost_kernel_key(fused, root) != dpc_cost_kernel_key(apart, b));
      dpc_cost_profile pr = {0};
      CHECK(dpc_cost_profile_add(&pr, fused, root, 3e-3, 1e-3) == DPC_OK);
      dpc_cost_profile_finish(&pr);
      double f = profiled_factor(apart, b, &pr);
      CHECK_MSG(fabs(f - 3) < 1e-12, "%.6g times the roofline", f);
      dpc_cost_profile_free(&pr);
    }
  }
  dpc_graph_free(fused);
  dpc_graph_free(apart);
}

static void symbolic_is_an_error(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  const char *text = "input a: f32[N, 3]\ny = relu(a)\noutput y\n";
  CHECK(dpc_parse_graph("t.graph", text, strlen(text), &g, &d) == DPC_OK);
  if (g) {
    dpc_node_cost c[8];
    CHECK(dpc_cost_graph(g, c, &d) == DPC_ERR_INVALID && strstr(d.msg, "bind"));
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

const unit_test unit_tests[] = {
    {"every_op_has_a_rule", every_op_has_a_rule},
    {"exact_flops", exact_flops},
    {"mlp_training", mlp_training},
    {"fused_bytes", fused_bytes},
    {"weight_grad_keys_by_batch", weight_grad_keys_by_batch},
    {"gemm_factor_across_fusions", gemm_factor_across_fusions},
    {"symbolic_is_an_error", symbolic_is_an_error},
    {NULL, NULL},
};
