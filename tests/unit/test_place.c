/*
 * test_place.c — automatic placement: METIS's cut, repaired so values flow one way between
 * devices, refined, and kept under memory limits.
 */
#include "frontend/frontend.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "driver/driver.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the devices, joined by the values that cross between them, form no cycle. */
static bool devices_acyclic(const dpc_graph *g) {
  enum { MAXD = 16 };
  uint32_t ids[MAXD], n = 0;
  bool edge[MAXD][MAXD] = {{false}};
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    uint32_t k = 0;
    while (k < n && ids[k] != g->nodes[i].device) k++;
    if (k == n && n < MAXD) ids[n++] = g->nodes[i].device;
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *nd = &g->nodes[i];
    for (uint32_t j = 0; j < nd->n_in; j++) {
      uint32_t from = g->nodes[g->values[dpc_node_inputs(g, nd)[j]].node].device, a = 0, b = 0;
      while (a < n && ids[a] != from) a++;
      while (b < n && ids[b] != nd->device) b++;
      if (a < n && b < n && a != b) edge[a][b] = true;
    }
  }
  /* Kahn: repeatedly remove a device with no incoming edge */
  bool gone[MAXD] = {false};
  for (uint32_t round = 0; round < n; round++) {
    uint32_t pick = n;
    for (uint32_t b = 0; b < n && pick == n; b++) {
      if (gone[b]) continue;
      bool in = false;
      for (uint32_t a = 0; a < n; a++) in |= !gone[a] && edge[a][b];
      if (!in) pick = b;
    }
    if (pick == n) return false;
    gone[pick] = true;
  }
  return true;
}

/* Placement as dpc uses it (METIS's cuts, repaired, chains moved, the best by the simulator):
 * every node placed; Inception's four branches on four devices, the two heavy ones (their
 * convolutions, where the compute is) apart from the stem, so they run side by side; the model's
 * own placement kept; one device and more devices than nodes handled (METIS crashes on one part and
 * degenerates with too few nodes). */
static uint32_t branch_device(const dpc_graph *g, const char *name) {
  uint32_t v = dpc_graph_find(g, name);
  CHECK(v != DPC_NONE);
  if (v == DPC_NONE) return DPC_NONE;
  const dpc_node *relu = &g->nodes[g->values[v].node];
  const dpc_node *conv = &g->nodes[g->values[dpc_node_inputs(g, relu)[0]].node];
  CHECK(conv->op == DPC_OP_CONV2D);
  return conv->device;
}

static void metis_placement(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  const char *devs[4] = {"cpu:0", "cpu:1", "cpu:2", "cpu:3"};
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/inception_block.graph", DPC_SOURCE_DIR);
  /* four like devices at fixed speeds (a machine's calibration would make the test its own),
   * several of them: the spread must not hang on one setting */
  static const double speeds[][2] = {{180, 20}, {190, 18}, {150, 20}, {200, 10}};
  dpc_graph *g = NULL;
  for (size_t sp = 0; sp < sizeof speeds / sizeof *speeds; sp++) {
    CHECK_MSG(dpc_driver_load(path, &g, &d) == DPC_OK, "%s", d.msg);
    if (!g) break;
    dpc_place_report rep;
    dpc_device_speed speed[4];
    for (int k = 0; k < 4; k++) speed[k] = (dpc_device_speed){speeds[sp][0], speeds[sp][1], NULL};
    CHECK_MSG(dpc_driver_place_on(g, 128, 4, speed, NULL, &rep, &d) == DPC_OK, "%s", d.msg);
    CHECK(rep.score > 0 && rep.order_kept);
    for (uint32_t i = 0; i < g->n_nodes; i++) CHECK(g->nodes[i].device != DPC_NONE);
    uint32_t stem = g->nodes[g->values[dpc_graph_find(g, "stem")].node].device;
    uint32_t br[4] = {branch_device(g, "br1"), branch_device(g, "br2"), branch_device(g, "br3"),
                      branch_device(g, "br4")};
    /* the heavy two apart from the stem; all four on devices of their own */
    CHECK_MSG(br[1] != stem && br[2] != stem, "br2 %s, br3 %s, stem %s", dpc_graph_str(g, br[1]),
              dpc_graph_str(g, br[2]), dpc_graph_str(g, stem));
    for (int a = 0; a < 4; a++)
      for (int b = a + 1; b < 4; b++)
        CHECK_MSG(br[a] != br[b], "%g GFLOP/s, %g GB/s: br%d and br%d both on %s", speeds[sp][0],
                  speeds[sp][1], a + 1, b + 1, dpc_graph_str(g, br[a]));
    CHECK(devices_acyclic(g));
    CHECK(rep.cut_bytes > 0);
    dpc_graph_free(g);
    g = NULL;
  }
  /* the model's own placement is kept; one device puts everything on it */
  const char *text = "input x: f32[N, 8]\nparam w: f32[8, 8] = ones\n"
                     "h = relu(matmul(x, w)) @ cpu:1\ny = h * 2\noutput y\n";
  CHECK(dpc_parse_graph("t.graph", text, strlen(text), &g, &d) == DPC_OK);
  if (g) {
    uint32_t h = g->values[dpc_graph_find(g, "h")].node;
    CHECK(dpc_place_metis(g, 4, devs, 1, NULL, NULL, &d) == DPC_OK);
    CHECK(!strcmp(dpc_graph_str(g, g->nodes[h].device), "cpu:1"));
    uint32_t y = g->values[dpc_graph_find(g, "y")].node;
    CHECK(!strcmp(dpc_graph_str(g, g->nodes[y].device), "cpu:0"));
    dpc_graph_free(g);
  }
  /* more devices than nodes: dealt round-robin, every device id valid */
  CHECK(dpc_parse_graph("t.graph", text, strlen(text), &g, &d) == DPC_OK);
  if (g) {
    CHECK(dpc_place_metis(g, 4, devs, 4, NULL, NULL, &d) == DPC_OK || g->n_nodes > 4);
    for (uint32_t i = 0; i < g->n_nodes; i++) CHECK(g->nodes[i].device != DPC_NONE);
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

/* On every example and 2, 3 and 4 devices, METIS's placement after repair sends values one way
 * between devices (no device waits for one that waits for it). */
static void acyclic_on_examples(void) {
  const char *models[] = {"fashion_mlp", "fashion_cnn", "inception_block", "wide_mlp",
                          "transformer_block"};
  const char *devs[4] = {"cpu:0", "cpu:1", "cpu:2", "cpu:3"};
  dpc_diag d;
  dpc_diag_init(&d);
  for (size_t m = 0; m < sizeof models / sizeof *models; m++)
    for (uint32_t n = 2; n <= 4; n++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/examples/%s.graph", DPC_SOURCE_DIR, models[m]);
      dpc_graph *g = NULL;
      CHECK_MSG(dpc_driver_load(path, &g, &d) == DPC_OK, "%s", d.msg);
      if (!g) continue;
      dpc_place_report rep;
      CHECK_MSG(dpc_place_metis(g, 64, devs, n, NULL, &rep, &d) == DPC_OK, "%s", d.msg);
      CHECK_MSG(rep.order_kept && devices_acyclic(g), "%s on %u devices: a cycle", models[m], n);
      double flops = 0;
      for (uint32_t k = 0; k < n; k++) flops += rep.flops[k];
      CHECK_MSG(flops > 0 && rep.compute_ratio >= 1 && rep.cut_bytes > 0, "%s on %u", models[m], n);
      dpc_graph_free(g);
    }
  dpc_diag_free(&d);
}

/* Repair by hand-made parts: a chain a -> b -> c -> d cut 0 1 0 1 goes back and forth; the
 * repair puts it in a line moving as little compute as possible, and a memory limit moves
 * nodes off a full part. */
static void repair_chain(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  const char *text = "input x: f32[4, 8]\na = relu(x)\nb = relu(a)\nc = relu(b)\ne = relu(c)\n"
                     "output e\n";
  dpc_graph *g = NULL;
  CHECK(dpc_parse_graph("t.graph", text, strlen(text), &g, &d) == DPC_OK);
  if (g) {
    CHECK(g->n_nodes == 5);
    double comp[5] = {0, 1, 1, 1, 1}, mem[5] = {128, 128, 128, 128, 128}, target[2] = {.5, .5};
    bool fixed[5] = {false};
    int32_t part[5] = {0, 0, 1, 0, 1};
    dpc_place_report rep = {0};
    dpc_repair_in in = {2, false, comp, mem, fixed, target, NULL};
    CHECK(dpc_place_repair(g, &in, part, &rep, &d) == DPC_OK);
    CHECK(rep.order_kept && rep.moved_for_order == 1);
    for (int i = 2; i < 5; i++) CHECK(part[i] >= part[i - 1]);
    /* part 0 may hold 2 nodes' memory (256 bytes): the split lands after b */
    int32_t part2[5] = {0, 0, 0, 0, 1};
    double limit[2] = {300, 1000};
    dpc_repair_in lim = {2, false, comp, mem, fixed, target, limit};
    CHECK(dpc_place_repair(g, &lim, part2, &rep, &d) == DPC_OK);
    CHECK_MSG(rep.over_limit == 0 && rep.memory[0] <= 300, "%.0f over, part 0 %.0f", rep.over_limit,
              rep.memory[0]);
    CHECK(rep.order_kept);
    for (int i = 2; i < 5; i++) CHECK(part2[i] >= part2[i - 1]);
    /* a node the model placed itself does not move, even against the order */
    int32_t part3[5] = {0, 0, 1, 0, 1};
    bool fix3[5] = {false, false, true, true, false};
    dpc_repair_in fx = {2, false, comp, mem, fix3, target, NULL};
    CHECK(dpc_place_repair(g, &fx, part3, &rep, &d) == DPC_OK);
    CHECK(part3[2] == 1 && part3[3] == 0 && !rep.order_kept);
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

/* text's training graph, parsed, passed, bound to a batch of `mb` and planned as a pipeline of S
 * stages, M micro-batches (the plan holds its own graph); NULL (the check failed, said)
 * otherwise. */
static dpc_plan *plan_pipeline(const char *text, int64_t mb, uint32_t S, uint32_t M,
                               dpc_pipeline_schedule sc, dpc_diag *d) {
  dpc_graph *g = NULL;
  CHECK_MSG(dpc_parse_graph("t.graph", text, strlen(text), &g, d) == DPC_OK, "%s", d->msg);
  if (!g) return NULL;
  dpc_pass_opts po = {.training = true};
  int64_t vals[4] = {mb, mb, mb, mb};
  dpc_plan *p = NULL;
  CHECK_MSG(dpc_passes_run(g, &po, d) == DPC_OK && dpc_graph_bind(g, vals, d) == DPC_OK &&
                dpc_driver_plan(g, mb * M, &(dpc_driver_strategy){1, S, M, sc, false}, true, &p,
                                d) == DPC_OK,
            "%s", d->msg);
  dpc_graph_free(g);
  return p;
}

/* A pipeline of S equal stages (one layer each, placed by hand), M micro-batches: the
 * simulator's bubble is (S-1)/(M+S-1) of the devices' time, give or take the optimizer step
 * and the hand-overs; 1F1B holds fewer activations than GPipe on every stage that has fewer
 * than M micro-batches in flight, and allocates less there (memplan.c shares their bytes by
 * lifetime). */
static void pipeline_bubble_and_memory(void) {
  enum { S = 4 };
  dpc_diag d;
  dpc_diag_init(&d);
  char text[2048];
  int at = snprintf(text, sizeof text, "input x: f32[N, 256]\ninput y: i32[N]\n");
  for (int k = 0; k < S; k++)
    at += snprintf(text + at, sizeof text - at,
                   "param w%d: f32[256, 256] = he_normal(seed=%d)\n"
                   "h%d = relu(matmul(%s, w%d)) @ cpu:%d\n",
                   k, k + 1, k, k ? (char[8]){'h', (char)('0' + k - 1), 0} : "x", k, k);
  snprintf(text + at, sizeof text - at,
           "loss = softmax_cross_entropy(h%d, y) @ cpu:%d\nminimize loss with sgd(lr=0.1)\n", S - 1,
           S - 1);
  static const uint32_t Ms[] = {4, 8, 16};
  for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++) {
    uint32_t M = Ms[m];
    uint64_t peak[2][S] = {{0}}, bytes[2][S] = {{0}};
    for (int sc = 0; sc < 2; sc++) {
      dpc_plan *p = plan_pipeline(text, 32, S, M, sc ? DPC_SCHEDULE_1F1B : DPC_SCHEDULE_GPIPE, &d);
      if (p) {
        dpc_node_cost *c = calloc(p->g->n_nodes, sizeof *c);
        dpc_sim_device sim[S];
        dpc_device_speed sp[S];
        for (int k = 0; k < S; k++) sp[k] = (dpc_device_speed){100, 20, NULL};
        CHECK(c && dpc_cost_graph(p->g, c, &d) == DPC_OK);
        double step = dpc_simulate_step(p, c, sp, sim), busy = 0;
        for (int k = 0; k < S; k++) busy += sim[k].compute_s + sim[k].comm_s;
        double bubble = 1 - busy / (S * step), want = (double)(S - 1) / (M + S - 1);
        /* the stages are equal in forward + backward, not in each: stage 0 slices the batch
         * (forward) and needs no input gradient (backward). GPipe's forward phase runs at the
         * slowest stage's forward pace and its backward phase at the slowest backward, so at
         * 16 micro-batches it is predicted 0.10 above the formula; 1F1B, which alternates,
         * stays within 0.04 */
        double tol = !sc && M > 8 ? 0.12 : 0.04;
        CHECK_MSG(fabs(bubble - want) < tol, "M=%u %s: bubble %.3f, balanced stages %.3f", M,
                  sc ? "1F1B" : "GPipe", bubble, want);
        uint32_t stage[S];
        CHECK(dpc_pipeline_stages(p, S, stage) == S);
        for (int k = 0; k < S; k++) {
          CHECK_MSG(stage[k] == (uint32_t)k, "cpu:%d is stage %u", k, stage[k]);
          peak[sc][k] = dpc_pipeline_live_peak(p, (uint32_t)k);
          bytes[sc][k] = p->devs[k].bytes; /* what the device allocates: shared by lifetime */
        }
        free(c);
      }
      dpc_plan_free(p);
    }
    /* 1F1B holds min(S - s, M) micro-batches' activations on stage s, GPipe M */
    for (int k = 0; k < S; k++)
      CHECK_MSG(S - k < (int)M ? peak[1][k] < peak[0][k] : peak[1][k] <= peak[0][k],
                "M=%u stage %d: 1F1B %llu bytes, GPipe %llu", M, k, (unsigned long long)peak[1][k],
                (unsigned long long)peak[0][k]);
    /* and the buffers the devices allocate follow: never more under 1F1B, less in all (the
     * values another stage reads keep their own bytes: that stage reads them when it will) */
    uint64_t all[2] = {0, 0};
    for (int k = 0; k < S; k++) {
      CHECK_MSG(bytes[1][k] <= bytes[0][k], "M=%u stage %d: 1F1B allocates %llu bytes, GPipe %llu",
                M, k, (unsigned long long)bytes[1][k], (unsigned long long)bytes[0][k]);
      all[0] += bytes[0][k], all[1] += bytes[1][k];
    }
    CHECK_MSG(all[1] < all[0], "M=%u: 1F1B allocates %llu bytes in all, GPipe %llu", M,
              (unsigned long long)all[1], (unsigned long long)all[0]);
    /* GPipe holds all M micro-batches' activations, 1F1B at most S - s */
    CHECK(peak[0][0] >= (uint64_t)M * 32 * 256 * 4);
  }
  dpc_diag_free(&d);
}

/* The forwards before device dv's first backward, in its step order. */
static uint32_t forwards_first(const dpc_plan *p, uint32_t dv) {
  uint32_t n = 0, last = UINT32_MAX;
  for (uint32_t j = 0; j < p->devs[dv].n_steps; j++) {
    const dpc_step *st = &p->devs[dv].steps[j];
    if (st->kind != DPC_STEP_KERNEL) continue;
    const dpc_node *nd = &p->g->nodes[st->node];
    if (nd->phase == DPC_PHASE_BACKWARD) return n;
    if (nd->phase == DPC_PHASE_FORWARD && nd->mb != last) n++, last = nd->mb;
  }
  return n;
}

/* A pipeline of 6 stages whose model fills 3 (its layers placed by hand on cpu:0..2): 1F1B warms
 * up over the 3 stages forward work flows through, as a 3-stage pipeline does (stage s runs
 * 3 - s forwards before its first backward), not over the 6 asked for (which would run 6 - s:
 * nearly GPipe's order, holding as many activations). */
static void pipeline_empty_stages(void) {
  enum { L = 3, M = 8 };
  dpc_diag d;
  dpc_diag_init(&d);
  const char *text =
      "input x: f32[N, 64]\ninput y: i32[N]\n"
      "param w0: f32[64, 64] = he_normal(seed=1)\n"
      "param w1: f32[64, 64] = he_normal(seed=2)\n"
      "param w2: f32[64, 64] = he_normal(seed=3)\n"
      "h0 = relu(matmul(x, w0)) @ cpu:0\nh1 = relu(matmul(h0, w1)) @ cpu:1\n"
      "h2 = relu(matmul(h1, w2)) @ cpu:2\n"
      "loss = softmax_cross_entropy(h2, y) @ cpu:2\nminimize loss with sgd(lr=0.1)\n";
  uint64_t peak[2][L] = {{0}};
  for (int wide = 0; wide < 2; wide++) {
    uint32_t S = wide ? 2 * L : L;
    dpc_plan *p = plan_pipeline(text, 8, S, M, DPC_SCHEDULE_1F1B, &d);
    if (p) {
      uint32_t stage[2 * L];
      CHECK(dpc_pipeline_stages(p, S, stage) == S);
      CHECK_MSG(dpc_pipeline_filled(p, S, 0) == L, "%u stages filled of %u",
                dpc_pipeline_filled(p, S, 0), S);
      for (uint32_t k = 0; k < L; k++) {
        CHECK_MSG(stage[k] == k, "cpu:%u is stage %u", k, stage[k]);
        CHECK_MSG(forwards_first(p, k) == L - k, "%u stages: stage %u runs %u forwards first", S, k,
                  forwards_first(p, k));
        peak[wide][k] = dpc_pipeline_live_peak(p, k);
      }
    }
    dpc_plan_free(p);
  }
  for (uint32_t k = 0; k < L; k++)
    CHECK_MSG(peak[1][k] == peak[0][k],
              "stage %u: %llu bytes of activations in 6 stages, %llu in 3", k,
              (unsigned long long)peak[1][k], (unsigned long long)peak[0][k]);
  dpc_diag_free(&d);
}

/* Data parallel: small gradients share one all-reduce (a bucket), a large one has its own, and
 * the loss its own: w1 [512, 512] (1 MiB) alone, w2 [512, 10], b1, b2 together. */
/* The data-parallel plan of model `text` (batch 8 a replica) on two devices; *g is the training
 * graph it came from, for the caller to free. */
static dpc_plan *two_replicas(const char *text, unsigned fuse, dpc_graph **g, dpc_diag *d) {
  *g = NULL;
  CHECK(dpc_parse_graph("t.graph", text, strlen(text), g, d) == DPC_OK);
  dpc_pass_opts po = {.training = true, .fuse = fuse};
  int64_t vals[1] = {8};
  dpc_plan *p = NULL;
  CHECK_MSG(*g && dpc_passes_run(*g, &po, d) == DPC_OK && dpc_graph_bind(*g, vals, d) == DPC_OK &&
                dpc_driver_plan(*g, 16, &(dpc_driver_strategy){2, 1, 1, DPC_SCHEDULE_NONE, false},
                                true, &p, d) == DPC_OK,
            "%s", d->msg);
  return p;
}

static void gradient_buckets(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  const char *text = "input x: f32[N, 512]\ninput y: i32[N]\n"
                     "param w1: f32[512, 512] = he_normal(seed=1)\nparam b1: f32[512] = zeros\n"
                     "param w2: f32[512, 10] = he_normal(seed=2)\nparam b2: f32[10] = zeros\n"
                     "h = relu(matmul(x, w1) + b1)\nlogits = matmul(h, w2) + b2\n"
                     "loss = softmax_cross_entropy(logits, y)\nminimize loss with sgd(lr=0.1)\n";
  dpc_graph *g;
  dpc_plan *p = two_replicas(text, 0, &g, &d);
  if (p) {
    uint32_t reduces = 0, bucket_in = 0;
    for (uint32_t i = 0; i < p->g->n_nodes; i++) {
      const dpc_node *n = &p->g->nodes[i];
      if (n->op != DPC_OP_ALL_REDUCE) continue;
      reduces++;
      const dpc_value *v = &p->g->values[dpc_node_inputs(p->g, n)[0]];
      if (v->shape.rank == 1 && v->shape.d[0] == 512 + 512 * 10 + 10) bucket_in++;
    }
    CHECK_MSG(reduces == 3 && bucket_in == 1, "%u all-reduces, %u of the bucket", reduces,
              bucket_in);
    /* and the gradients keep their names and shapes, now slices of the bucket */
    uint32_t gb = dpc_graph_find(p->g, "b1.grad");
    CHECK(gb != DPC_NONE && p->g->values[gb].shape.rank == 1 && p->g->values[gb].shape.d[0] == 512);
  }
  dpc_plan_free(p);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

/* SGD with momentum, data parallel: the replicas reduce the new momentum (which the GEMM that
 * computes the gradient adds up as it stores it), not the gradient; Adam, whose update is not
 * linear in the gradient, reduces the gradient. */
static void momentum_reduced(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  for (int adam = 0; adam < 2; adam++) {
    char text[600];
    snprintf(text, sizeof text,
             "input x: f32[N, 512]\ninput y: i32[N]\n"
             "param w1: f32[512, 512] = he_normal(seed=1)\nparam b1: f32[512] = zeros\n"
             "param w2: f32[512, 10] = he_normal(seed=2)\n"
             "h = relu(matmul(x, w1) + b1)\nlogits = matmul(h, w2)\n"
             "loss = softmax_cross_entropy(logits, y)\nminimize loss with %s\n",
             adam ? "adam(lr=0.01)" : "sgd(lr=0.1, momentum=0.9)");
    dpc_graph *g;
    dpc_plan *p = two_replicas(text, DPC_FUSE_ELEMWISE | DPC_FUSE_EPILOGUE, &g, &d);
    if (p) {
      /* w1's update reads the all-reduce of its momentum (SGD) or of its gradient (Adam) */
      uint32_t mom = dpc_graph_find(p->g, "w1.momentum"), grad = dpc_graph_find(p->g, "w1.grad");
      bool mom_reduced = false;
      for (uint32_t k = 0; k < p->g->n_updates; k++)
        if (p->g->updates[k].target == mom)
          mom_reduced =
              p->g->nodes[p->g->values[p->g->updates[k].value].node].op == DPC_OP_ALL_REDUCE;
      bool grad_reduced =
          grad != DPC_NONE && p->g->nodes[p->g->values[grad].node].op == DPC_OP_ALL_REDUCE;
      CHECK_MSG(adam ? grad_reduced && mom == DPC_NONE : mom_reduced && !grad_reduced,
                "%s: momentum reduced %d, gradient reduced %d", adam ? "adam" : "sgd", mom_reduced,
                grad_reduced);
    }
    dpc_plan_free(p);
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

/* Gradient accumulation holds one running sum per weight: a weight-heavy model (four 1 MiB
 * layers, SGD with momentum, 8 rows a micro-batch) planned at 2, 4 and 8 micro-batches takes
 * no more memory than one step on the whole batch (but the micro-batches' outputs), which holds
 * a second momentum instead (its update is the gradient GEMM's epilogue, so it cannot be
 * computed in place); within the params, momentum, running sums, two layers' gradients in
 * flight and 1 MiB for the rest. The
 * momentum's decay, the gradients' means and the optimizer's temporaries share bytes with the
 * micro-batches' values once those are done (kept apart, they held three more copies of the
 * weights). */
static void move_step(dpc_plan *p, uint32_t dev, uint32_t j, uint32_t to);
static bool check_fails(const dpc_plan *p, const char *a, const char *b, const char *what);

static void accumulation_memory(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  const char *text = "input x: f32[N, 512]\ninput y: i32[N]\n"
                     "param w1: f32[512, 512] = he_normal(seed=1)\n"
                     "param w2: f32[512, 512] = he_normal(seed=2)\n"
                     "param w3: f32[512, 512] = he_normal(seed=3)\n"
                     "param w4: f32[512, 512] = he_normal(seed=4)\n"
                     "h1 = relu(matmul(x, w1))\nh2 = relu(matmul(h1, w2))\n"
                     "h3 = relu(matmul(h2, w3))\nlogits = matmul(h3, w4)\n"
                     "loss = softmax_cross_entropy(logits, y)\n"
                     "minimize loss with sgd(lr=0.1, momentum=0.9)\n";
  const uint64_t mib = 1 << 20, weights = 4 * mib;
  uint64_t one = 0;
  static const uint32_t Ks[] = {1, 2, 4, 8};
  for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
    dpc_graph *g = NULL;
    CHECK_MSG(dpc_parse_graph("t.graph", text, strlen(text), &g, &d) == DPC_OK, "%s", d.msg);
    if (!g) continue;
    dpc_pass_opts po = {.training = true, .fuse = DPC_FUSE_ELEMWISE | DPC_FUSE_EPILOGUE};
    int64_t vals[1] = {8};
    dpc_plan *p = NULL;
    CHECK_MSG(dpc_passes_run(g, &po, &d) == DPC_OK && dpc_graph_bind(g, vals, &d) == DPC_OK &&
                  dpc_driver_plan(g, 8 * Ks[c],
                                  &(dpc_driver_strategy){1, 1, Ks[c], DPC_SCHEDULE_NONE, false},
                                  true, &p, &d) == DPC_OK,
              "K=%u: %s", Ks[c], d.msg);
    if (p) {
      uint64_t bytes = p->devs[0].bytes;
      if (Ks[c] == 1) one = bytes;
      /* and the micro-batches' outputs, held for the whole batch's (8 x 512 floats each) */
      CHECK_MSG(bytes <= one + Ks[c] * 32 * 1024,
                "K=%u: %llu bytes, one step on the whole batch %llu", Ks[c],
                (unsigned long long)bytes, (unsigned long long)one);
      CHECK_MSG(bytes <= 3 * weights + 2 * mib + mib, "K=%u: %.2f MiB for 4 MiB of weights", Ks[c],
                (double)bytes / mib);
    }
    /* the order check names a micro-batched kernel's part: a backward of micro-batch 1, then the
     * optimizer, moved to the front */
    for (int which = 0; p && Ks[c] == 4 && which < 2; which++) {
      uint8_t phase = which ? DPC_PHASE_STEP : DPC_PHASE_BACKWARD;
      uint32_t j = 0;
      while (j < p->devs[0].n_steps && (p->devs[0].steps[j].kind != DPC_STEP_KERNEL ||
                                        p->g->nodes[p->devs[0].steps[j].node].phase != phase ||
                                        (!which && p->g->nodes[p->devs[0].steps[j].node].mb != 1)))
        j++;
      CHECK_MSG(j < p->devs[0].n_steps, "K=4: no kernel of phase %u", phase);
      if (j == p->devs[0].n_steps) break;
      move_step(p, 0, j, 0);
      check_fails(p, which ? "cpu:0 step 1 (the optimizer's) reads" : "cpu:0 step 1 (in B1) reads",
                  "before the step that makes it", "a micro-batched kernel too early");
    }
    dpc_plan_free(p);
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

/* Step j of device dev moved to position `to` of its list, the steps between shifted. */
static void move_step(dpc_plan *p, uint32_t dev, uint32_t j, uint32_t to) {
  dpc_step *st = p->devs[dev].steps, x = st[j];
  if (to < j)
    memmove(st + to + 1, st + to, (j - to) * sizeof *st);
  else
    memmove(st + j, st + j + 1, (to - j) * sizeof *st);
  st[to] = x;
}

static uint32_t find_step(const dpc_plan *p, uint32_t dev, dpc_step_kind kind, uint32_t nth) {
  for (uint32_t j = 0; j < p->devs[dev].n_steps; j++)
    if (p->devs[dev].steps[j].kind == kind &&
        (kind != DPC_STEP_KERNEL ||
         dpc_op_has(p->g->nodes[p->devs[dev].steps[j].node].op, DPC_OPF_COMM)) &&
        !nth--)
      return j;
  return DPC_NONE;
}

static bool check_fails(const dpc_plan *p, const char *a, const char *b, const char *what) {
  dpc_diag d;
  dpc_diag_init(&d);
  bool ok = dpc_plan_check_comm(p, &d) != DPC_OK && d.msg && strstr(d.msg, a) && strstr(d.msg, b);
  CHECK_MSG(ok, "%s: %s", what, d.msg ? d.msg : "accepted");
  dpc_diag_free(&d);
  return ok;
}

/* The communication check: the plans dpc builds pass it; hand-broken ones (a send or a receive
 * taken out, collectives in different orders on two devices, a wait moved before what it needs)
 * fail, naming the stuck step and the one it waits for; so do kernels moved before a value they
 * read, made on their device or received from another. */
static void comm_check(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  const char *dp_text = "input x: f32[N, 64]\ninput y: i32[N]\n"
                        "param w1: f32[64, 512] = he_normal(seed=1)\nparam b1: f32[512] = zeros\n"
                        "param w2: f32[512, 10] = he_normal(seed=2)\nparam b2: f32[10] = zeros\n"
                        "h = relu(matmul(x, w1) + b1)\nlogits = matmul(h, w2) + b2\n"
                        "loss = softmax_cross_entropy(logits, y)\nminimize loss with sgd(lr=0.1)\n";
  dpc_graph *g;
  dpc_plan *p = two_replicas(dp_text, 0, &g, &d);
  if (p) {
    CHECK_MSG(dpc_plan_check_comm(p, &d) == DPC_OK, "%s", d.msg);
    uint32_t c0 = find_step(p, 1, DPC_STEP_KERNEL, 0), c1 = find_step(p, 1, DPC_STEP_KERNEL, 1);
    CHECK_MSG(c0 != DPC_NONE && c1 != DPC_NONE, "two collectives on cpu:1: %u %u", c0, c1);
    if (c0 != DPC_NONE && c1 != DPC_NONE) {
      move_step(p, 1, c1, c0); /* cpu:1 enters the second all-reduce first */
      check_fails(p, "would hang: cpu:", "all_reduce", "collectives out of order");
    }
  }
  dpc_plan_free(p);
  dpc_graph_free(g);
  const char *mp_text = "input x: f32[N, 16]\ninput y: i32[N]\n"
                        "param w1: f32[16, 32] = he_normal(seed=1)\nparam b1: f32[32] = zeros\n"
                        "param w2: f32[32, 5] = xavier_uniform(seed=2)\nparam b2: f32[5] = zeros\n"
                        "device cpu:1 {\n  h = relu(matmul(x, w1) + b1)\n}\n"
                        "logits = matmul(h, w2) + b2 @ cpu:0\n"
                        "loss = softmax_cross_entropy(logits, y)\noutput logits\n"
                        "minimize loss with sgd(lr=0.1)\n";
  const char *devs[2] = {"cpu:0", "cpu:1"};
  int64_t n8[1] = {8};
  for (int broken = 0; broken < 6; broken++) {
    g = NULL;
    p = NULL;
    dpc_pass_opts po = {.training = true};
    CHECK_MSG(dpc_parse_graph("t.graph", mp_text, strlen(mp_text), &g, &d) == DPC_OK &&
                  dpc_passes_run(g, &po, &d) == DPC_OK && dpc_graph_bind(g, n8, &d) == DPC_OK &&
                  dpc_plan_devices(g, devs, 2, true, &p, &d) == DPC_OK,
              "%s", d.msg);
    if (p) {
      /* h is made on cpu:1 and read on cpu:0; h's gradient goes back */
      uint32_t sig = find_step(p, 1, DPC_STEP_SIGNAL, 0), w0 = find_step(p, 0, DPC_STEP_WAIT, 0),
               w1 = find_step(p, 1, DPC_STEP_WAIT, 0);
      CHECK_MSG(sig != DPC_NONE && w0 != DPC_NONE && w1 != DPC_NONE, "steps %u %u %u", sig, w0, w1);
      if (!broken) {
        CHECK_MSG(dpc_plan_check_comm(p, &d) == DPC_OK, "%s", d.msg);
      } else if (broken == 1 && sig != DPC_NONE) {
        move_step(p, 1, sig, p->devs[1].n_steps - 1);
        p->devs[1].n_steps--; /* cpu:1 never hands h on */
        check_fails(p, "cpu:0 step", "no device hands on (a missing send)", "a missing send");
      } else if (broken == 2 && w1 != DPC_NONE) {
        move_step(p, 1, w1, 0); /* cpu:1 waits for h's gradient before it makes h */
        check_fails(p, "would hang: cpu:0 step", "cpu:1 step 1 (waits for", "a cycle");
      } else if (broken == 3 && w0 != DPC_NONE) {
        move_step(p, 0, w0, p->devs[0].n_steps - 1);
        p->devs[0].n_steps--; /* cpu:0 never takes h */
        check_fails(p, "cpu:1 step", "no device waits for (a missing receive)",
                    "a missing receive");
      } else if (broken == 4 && w0 != DPC_NONE) {
        uint32_t k = w0 + 1;
        while (k < p->devs[0].n_steps && p->devs[0].steps[k].kind != DPC_STEP_KERNEL) k++;
        move_step(p, 0, k, w0); /* cpu:0 reads h before it has it: no hang, stale bytes */
        check_fails(p, "cpu:0 step", "from cpu:1 before it waits for it", "a read before its wait");
      } else if (broken == 5) {
        uint32_t k = p->devs[1].n_steps;
        while (k-- > 0 && p->devs[1].steps[k].kind != DPC_STEP_KERNEL) {
        }
        move_step(p, 1, k, 0); /* cpu:1's last kernel (an update) before the gradient it reads */
        check_fails(p, "cpu:1 step 1 reads", "before the step that makes it", "a kernel too early");
      }
    }
    dpc_plan_free(p);
    dpc_graph_free(g);
  }
  dpc_diag_free(&d);
}

/* A link given to dpc_driver_place (the one measured between MPI ranks on different hosts)
 * is the one its cost model prices the cut with: over a very slow one the chosen placement's
 * predicted step is longer and it cuts no more than over this machine's own. */
static void given_link(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/inception_block.graph", DPC_SOURCE_DIR);
  dpc_place_report rep[2];
  for (int slow = 0; slow < 2; slow++) {
    dpc_graph *g = NULL;
    CHECK_MSG(dpc_driver_load(path, &g, &d) == DPC_OK, "%s", d.msg);
    if (!g) break;
    dpc_driver_place_opts po = {0, NULL, 1, DPC_SCHEDULE_NONE, slow ? 0.001 : 0, slow ? 1e-3 : 0};
    bool placed = false;
    CHECK_MSG(dpc_driver_place(g, 64, "cpu:2", 2, &po, &placed, &rep[slow], &d) == DPC_OK, "%s",
              d.msg);
    CHECK(placed);
    dpc_graph_free(g);
  }
  CHECK_MSG(rep[1].score > rep[0].score,
            "predicted %g s over a 1 MB/s link, %g s over this "
            "machine's",
            rep[1].score, rep[0].score);
  CHECK_MSG(rep[1].cut_bytes <= rep[0].cut_bytes,
            "%g bytes cross over the slow link, %g over the fast", rep[1].cut_bytes,
            rep[0].cut_bytes);
  dpc_diag_free(&d);
}

const unit_test unit_tests[] = {
    {"given_link", given_link},
    {"comm_check", comm_check},
    {"metis_placement", metis_placement},
    {"acyclic_on_examples", acyclic_on_examples},
    {"repair_chain", repair_chain},
    {"pipeline_bubble_and_memory", pipeline_bubble_and_memory},
    {"pipeline_empty_stages", pipeline_empty_stages},
    {"gradient_buckets", gradient_buckets},
    {"momentum_reduced", momentum_reduced},
    {"accumulation_memory", accumulation_memory},
    {NULL, NULL},
};
