/*
 * test_grad.c — every gradient rule against central finite differences, in f64.
 *
 * Each recipe is a tiny model whose params (initialised randomly by their initializers) feed the
 * op under test, and whose scalar `loss` weighs the op's outputs with another random param so
 * every output element matters. The autodiff pass gives P.grad for every param; each element is
 * compared with (loss(p + h) - loss(p - h)) / 2h. The test enumerates the op table: an op flagged
 * differentiable with no recipe, or with no gradient rule, fails.
 */
#include "frontend/frontend.h"
#include "ir/print.h"
#include "partitioner/partitioner.h"
#include "passes/grad.h"
#include "passes/pass.h"
#include "runtime/session.h"
#include "tests/unit/unit.h"

#include <stdlib.h>

typedef struct recipe {
  const char *op;
  const char *text;
} recipe;

/* U(a, b) params: distinct seeds so no two params are equal. */
#define P(name, shape, lo, hi, seed)                                                               \
  "param " name ": f64" shape " = uniform(low=" #lo ", high=" #hi ", seed=" #seed ")\n"
#define LOSS(y, shape) P("r", shape, -1, 1, 99) "loss = reduce_sum(" y " * r)\n"

static const recipe recipes[] = {
    {"add", P("a", "[3, 4]", -1, 1, 1) P("b", "[4]", -1, 1, 2) "y = a + b\n" LOSS("y", "[3, 4]")},
    {"add", /* reuse: a reaches y three times */
     P("a", "[2, 3]", -1, 1, 1) "y = a * a + a\n" LOSS("y", "[2, 3]")},
    {"sub",
     P("a", "[3, 1]", -1, 1, 1) P("b", "[1, 4]", -1, 1, 2) "y = a - b\n" LOSS("y", "[3, 4]")},
    {"mul",
     P("a", "[2, 3, 4]", -1, 1, 1) P("b", "[3, 1]", -1, 1, 2) "y = a * b\n" LOSS("y", "[2, 3, 4]")},
    {"div", P("a", "[3, 4]", -1, 1, 1) P("b", "[4]", 0.5, 2, 2) "y = a / b\n" LOSS("y", "[3, 4]")},
    {"pow",
     P("a", "[3, 4]", 0.5, 2, 1) P("b", "[3, 4]", -1, 2, 2) "y = pow(a, b)\n" LOSS("y", "[3, 4]")},
    {"max",
     P("a", "[3, 4]", -1, 1, 1) P("b", "[4]", -1, 1, 2) "y = max(a, b)\n" LOSS("y", "[3, 4]")},
    {"min",
     P("a", "[3, 4]", -1, 1, 1) P("b", "[3, 4]", -1, 1, 2) "y = min(a, b)\n" LOSS("y", "[3, 4]")},
    {"neg", P("a", "[5]", -1, 1, 1) "y = -a\n" LOSS("y", "[5]")},
    {"abs", P("a", "[6]", -1, 1, 1) "y = abs(a)\n" LOSS("y", "[6]")},
    {"relu", P("a", "[8]", -1, 1, 1) "y = relu(a)\n" LOSS("y", "[8]")},
    {"relu6", P("a", "[8]", -2, 8, 1) "y = relu6(a)\n" LOSS("y", "[8]")},
    {"clip", P("a", "[8]", -2, 2, 1) "y = clip(a, min=-0.5, max=1)\n" LOSS("y", "[8]")},
    {"leaky_relu", P("a", "[8]", -1, 1, 1) "y = leaky_relu(a, alpha=0.2)\n" LOSS("y", "[8]")},
    {"gelu", P("a", "[8]", -3, 3, 1) "y = gelu(a)\n" LOSS("y", "[8]")},
    {"sigmoid", P("a", "[8]", -3, 3, 1) "y = sigmoid(a)\n" LOSS("y", "[8]")},
    {"tanh", P("a", "[8]", -2, 2, 1) "y = tanh(a)\n" LOSS("y", "[8]")},
    {"exp", P("a", "[8]", -2, 2, 1) "y = exp(a)\n" LOSS("y", "[8]")},
    {"log", P("a", "[8]", 0.2, 3, 1) "y = log(a)\n" LOSS("y", "[8]")},
    {"sqrt", P("a", "[8]", 0.2, 3, 1) "y = sqrt(a)\n" LOSS("y", "[8]")},
    {"rsqrt", P("a", "[8]", 0.2, 3, 1) "y = rsqrt(a)\n" LOSS("y", "[8]")},
    {"erf", P("a", "[8]", -2, 2, 1) "y = erf(a)\n" LOSS("y", "[8]")},
    {"cos", P("a", "[8]", -3, 3, 1) "y = cos(a)\n" LOSS("y", "[8]")},
    {"sin", P("a", "[8]", -3, 3, 1) "y = sin(a)\n" LOSS("y", "[8]")},
    {"where",
     P("a", "[3, 4]", -1, 1, 1)
         P("b", "[4]", -1, 1,
           2) "y = where(constant([[1], [0], [1]], dtype=bool), a, b)\n" LOSS("y", "[3, 4]")},
    {"softmax", P("a", "[3, 5]", -2, 2, 1) "y = softmax(a, axis=0)\n" LOSS("y", "[3, 5]")},
    {"log_softmax", P("a", "[3, 5]", -2, 2, 1) "y = log_softmax(a)\n" LOSS("y", "[3, 5]")},
    {"softmax_cross_entropy",
     P("a", "[4, 5]", -2, 2,
       1) "loss = softmax_cross_entropy(a, constant([0, 4, 2, 2], dtype=i64))\n"},
    {"mse", P("a", "[3, 4]", -1, 1, 1) P("b", "[3, 4]", -1, 1, 2) "loss = mse(a, b)\n"},
    {"reduce_sum",
     P("a", "[2, 3, 4]", -1, 1, 1) "y = reduce_sum(a, axes=[0, 2])\n" LOSS("y", "[3]")},
    {"reduce_sum",
     P("a", "[2, 3]", -1, 1, 1) "y = reduce_sum(a, axes=[-1], keepdims=1)\n" LOSS("y", "[2, 1]")},
    {"reduce_mean",
     P("a", "[2, 3, 4]", -1, 1, 1) "y = reduce_mean(a, axes=[1])\n" LOSS("y", "[2, 4]")},
    {"reduce_mean", P("a", "[2, 3]", -1, 1, 1) "loss = reduce_mean(a) * 3\n"},
    {"reduce_max",
     P("a", "[3, 4]", -1, 1, 1) "y = reduce_max(a, axes=[1], keepdims=1)\n" LOSS("y", "[3, 1]")},
    {"transpose",
     P("a", "[2, 3, 4]", -1, 1, 1) "y = transpose(a, perm=[2, 0, 1])\n" LOSS("y", "[4, 2, 3]")},
    {"reshape", P("a", "[2, 6]", -1, 1, 1) "y = reshape(a, shape=[3, -1])\n" LOSS("y", "[3, 4]")},
    {"flatten", P("a", "[2, 3, 2]", -1, 1, 1) "y = flatten(a, axis=2)\n" LOSS("y", "[6, 2]")},
    {"concat", P("a", "[2, 3]", -1, 1, 1)
                   P("b", "[2, 2]", -1, 1, 2) "y = concat(a, b, a, axis=1)\n" LOSS("y", "[2, 8]")},
    {"split", P("a", "[2, 5]", -1, 1, 1) "p, q, s = split(a, axis=1, sizes=[1, 3, 1])\n" P(
                  "r", "[2, 3]", -1, 1, 99) "loss = reduce_sum(q * r) + reduce_sum(p)\n"},
    {"slice",
     P("a", "[4, 5]", -1, 1,
       1) "y = slice(a, starts=[3, 0], ends=[-100, 5], steps=[-2, 2])\n" LOSS("y", "[2, 3]")},
    {"gather",
     P("a", "[4, 3]", -1, 1,
       1) "y = gather(a, constant([[1, 3], [1, -4]], dtype=i32))\n" LOSS("y", "[2, 2, 3]")},
    {"gather", P("a", "[2, 4]", -1, 1,
                 1) "y = gather(a, constant([3, 0, 3], dtype=i64), axis=1)\n" LOSS("y", "[2, 3]")},
    /* through f32 the finite difference would see f32 rounding: cast within f64 */
    {"cast", P("a", "[5]", -1, 1, 1) "y = cast(a, dtype=f64)\n" LOSS("y", "[5]")},
    {"matmul", P("a", "[3, 4]", -1, 1, 1)
                   P("b", "[4, 2]", -1, 1, 2) "y = matmul(a, b)\n" LOSS("y", "[3, 2]")},
    {"matmul", P("a", "[4, 3]", -1, 1, 1)
                   P("b", "[2, 4]", -1, 1,
                     2) "y = matmul(a, b, transpose_a=1, transpose_b=1)\n" LOSS("y", "[3, 2]")},
    {"matmul", P("a", "[2, 1, 3, 4]", -1, 1, 1)
                   P("b", "[3, 4, 2]", -1, 1, 2) "y = matmul(a, b)\n" LOSS("y", "[2, 3, 3, 2]")},
    {"matmul", P("a", "[4]", -1, 1, 1)
                   P("b", "[2, 4, 3]", -1, 1, 2) "y = matmul(a, b)\n" LOSS("y", "[2, 3]")},
    {"matmul", P("a", "[2, 3, 4]", -1, 1, 1)
                   P("b", "[4]", -1, 1, 2) "y = matmul(a, b)\n" LOSS("y", "[2, 3]")},
    {"conv2d",
     P("x", "[2, 4, 7, 6]", -1, 1, 1)
         P("w", "[6, 2, 3, 2]", -1, 1, 2) "y = conv2d(x, w, stride=[2, 1], pad=[1, 0, 2, 1], "
                                          "dilation=[1, 2], groups=2)\n" LOSS("y", "[2, 6, 4, 5]")},
    {"conv2d_grad_input", /* x (here r, which also weighs the loss) gives only the shape */
     P("r", "[2, 4, 7, 6]", -1, 1, 99) P("u", "[2, 6, 4, 5]", -1, 1, 1)
         P("w", "[6, 2, 3, 2]", -1, 1, 2) "y = conv2d_grad_input(u, w, r, stride=[2, 1], "
                                          "pad=[1, 0, 2, 1], dilation=[1, 2], groups=2)\n"
                                          "loss = reduce_sum(y * r)\n"},
    {"max_pool2d",
     P("x", "[2, 2, 5, 5]", -1, 1,
       1) "y = max_pool2d(x, kernel=3, stride=2, pad=1, ceil_mode=1)\n" LOSS("y", "[2, 2, 3, 3]")},
    {"avg_pool2d",
     P("x", "[2, 2, 5, 5]", -1, 1,
       1) "y = avg_pool2d(x, kernel=[2, 3], stride=2, pad=1)\n" LOSS("y", "[2, 2, 3, 3]")},
    {"avg_pool2d", P("x", "[1, 2, 5, 5]", -1, 1,
                     1) "y = avg_pool2d(x, kernel=3, stride=2, pad=1, count_include_pad=1, "
                        "ceil_mode=1)\n" LOSS("y", "[1, 2, 3, 3]")},
    {"batch_norm", P("x", "[4, 3, 2, 2]", -1, 1, 1) P("g", "[3]", 0.5, 2, 2)
                       P("b", "[3]", -1, 1, 3) "state m: f64[3] = zeros\nstate v: f64[3] = ones\n"
                                               "y = batch_norm(x, g, b, m, v, training=1)\n" LOSS(
                                                   "y", "[4, 3, 2, 2]")},
    {"batch_norm",
     P("x", "[4, 3]", -1, 1, 1) P("g", "[3]", 0.5, 2, 2)
         P("b", "[3]", -1, 1, 3) "state m: f64[3] = uniform(low=-1, high=1, seed=5)\nstate v: "
                                 "f64[3] = uniform(low=0.5, high=2, seed=6)\n"
                                 "y = batch_norm(x, g, b, m, v, training=0)\n" LOSS("y", "[4, 3]")},
    {"layer_norm",
     P("x", "[3, 2, 4]", -1, 1, 1) P("g", "[2, 4]", 0.5, 2, 2)
         P("b", "[2, 4]", -1, 1, 3) "y = layer_norm(x, g, b, axis=1)\n" LOSS("y", "[3, 2, 4]")},
    {"layer_norm", P("x", "[3, 5]", -1, 1, 1)
                       P("g", "[5]", 0.5, 2, 2) "y = layer_norm(x, g)\n" LOSS("y", "[3, 5]")},
    {"dropout",
     P("a", "[40]", -1, 1, 1) "y = dropout(a, p=0.3, seed=7, training=1)\n" LOSS("y", "[40]")},
};

#define NRECIPES (sizeof recipes / sizeof recipes[0])

static double loss_at(dpc_session *s, uint32_t loss) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_session_set_step(s, 0);
  CHECK(dpc_session_run(s, &d) == DPC_OK);
  dpc_tensor t = dpc_session_value(s, loss);
  double v = dpc_tload(&t, 0);
  dpc_diag_free(&d);
  return v;
}

/* Compare every param's P.grad in gs (the gradient graph's session) with central finite
 * differences of fwd's loss in fs (the forward graph's session); the number of elements compared.
 */
static int compare_gradients(const char *label, const dpc_graph *fwd, uint32_t loss,
                             dpc_session *gs, dpc_session *fs) {
  dpc_diag d;
  dpc_diag_init(&d);
  int compared = 0;
  for (uint32_t i = 0; i < fwd->n_nodes; i++) {
    if (fwd->nodes[i].op != DPC_OP_PARAM) continue;
    uint32_t p = fwd->nodes[i].out;
    const char *pn = dpc_graph_str(fwd, fwd->values[p].name);
    char name[128];
    snprintf(name, sizeof name, "%s.grad", pn);
    dpc_tensor gt;
    if (dpc_session_get(gs, name, &gt, &d)) {
      CHECK_MSG(0, "%s: no gradient for '%s'", label, pn);
      continue;
    }
    dpc_tensor pt = dpc_session_value(fs, p);
    int64_t n = dpc_tensor_numel(&pt);
    for (int64_t k = 0; k < n; k++) {
      double x = dpc_tload(&pt, k), h = 1e-6 * (fabs(x) > 1 ? fabs(x) : 1);
      dpc_tstore(&pt, k, x + h);
      double lp = loss_at(fs, loss);
      dpc_tstore(&pt, k, x - h);
      double lm = loss_at(fs, loss);
      dpc_tstore(&pt, k, x);
      double fd = (lp - lm) / (2 * h), an = dpc_tload(&gt, k);
      double scale = fabs(fd) > fabs(an) ? fabs(fd) : fabs(an);
      CHECK_MSG(fabs(fd - an) <= 1e-6 * (scale > 1 ? scale : 1),
                "%s: d loss / d %s[%lld]: autodiff %.10g, finite difference %.10g", label, pn,
                (long long)k, an, fd);
      compared++;
    }
  }
  dpc_diag_free(&d);
  return compared;
}

/* Check every param's gradient in one recipe; returns the number of elements compared. */
static int check_recipe(const recipe *r) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL, *fwd = NULL;
  dpc_plan *gplan = NULL, *fplan = NULL;
  dpc_session *gs = NULL, *fs = NULL;
  int compared = 0;
  char *text = malloc(strlen(r->text) + 64);
  sprintf(text, "%sminimize loss with sgd(lr=1)\n", r->text);
  if (dpc_parse_graph(r->op, text, strlen(text), &g, &d)) {
    CHECK_MSG(0, "%s: recipe does not parse: %s", r->op, d.msg);
    goto done;
  }
  fwd = dpc_graph_clone(g);
  uint32_t loss = g->obj.loss;
  /* gradients: infer + autodiff, every P.grad an output, then dce */
  dpc_pass_opts po = {.training = true};
  if (dpc_pass_infer(g, &po, &d) || dpc_pass_autodiff(g, &po, &d)) {
    CHECK_MSG(0, "%s: autodiff failed: %s", r->op, d.msg);
    goto done;
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op != DPC_OP_PARAM) continue;
    char name[128];
    snprintf(name, sizeof name, "%s.grad", dpc_graph_str(g, g->values[g->nodes[i].out].name));
    uint32_t gv = dpc_graph_find(g, name);
    if (gv != DPC_NONE) dpc_graph_add_output(g, gv, &d);
  }
  g->n_updates = 0;
  if (dpc_verify(g, &d) || dpc_plan_single(g, "cpu:0", false, &gplan, &d) ||
      dpc_session_new(gplan, NULL, &gs, &d) || dpc_session_run(gs, &d)) {
    CHECK_MSG(0, "%s: running the gradient graph failed: %s", r->op, d.msg);
    goto done;
  }
  if (dpc_plan_single(fwd, "cpu:0", false, &fplan, &d) || dpc_session_new(fplan, NULL, &fs, &d)) {
    CHECK_MSG(0, "%s: %s", r->op, d.msg);
    goto done;
  }
  compared = compare_gradients(r->op, fwd, loss, gs, fs);
done:
  free(text);
  dpc_session_free(gs);
  dpc_session_free(fs);
  dpc_plan_free(gplan);
  dpc_plan_free(fplan);
  dpc_graph_free(g);
  dpc_graph_free(fwd);
  dpc_diag_free(&d);
  return compared;
}

/* Every differentiable op has a rule and at least one recipe; no other op has a rule. */
static void table_complete(void) {
  for (int op = 0; op < DPC_OP_COUNT; op++) {
    bool diff = dpc_op_has((dpc_op)op, DPC_OPF_DIFF);
    CHECK_MSG((dpc_grad_rules[op] != NULL) == diff, "%s: %s", dpc_op_name((dpc_op)op),
              diff ? "differentiable but has no gradient rule"
                   : "has a gradient rule but is not flagged differentiable");
    if (!diff) continue;
    bool found = false;
    for (size_t i = 0; i < NRECIPES && !found; i++)
      found = !strcmp(recipes[i].op, dpc_op_name((dpc_op)op));
    CHECK_MSG(found, "%s is differentiable but has no gradient-check recipe",
              dpc_op_name((dpc_op)op));
  }
}

static void finite_differences(void) {
  int total = 0;
  for (size_t i = 0; i < NRECIPES; i++) {
    int before = unit_failures;
    int n = check_recipe(&recipes[i]);
    CHECK_MSG(n > 0, "%s: nothing compared", recipes[i].op);
    total += n;
    if (unit_failures != before) printf("    (recipe %zu, %s)\n", i, recipes[i].op);
  }
  printf("    %d gradient elements compared over %zu recipes\n", total, NRECIPES);
}

/* Feed the MLP's x (f64[5, 6]) and y (i32[5]) with fixed values, every class present. */
static void feed_mlp(dpc_session *s, dpc_diag *d) {
  double x[30];
  int32_t y[5];
  for (int i = 0; i < 30; i++) x[i] = sin(0.7 * i + 0.3);
  for (int i = 0; i < 5; i++) y[i] = (i * 3) % 4;
  dpc_tensor xt = {x, DPC_F64, {2, {5, 6}}}, yt = {y, DPC_I32, {1, {5}}};
  CHECK_MSG(dpc_session_set(s, "x", &xt, d) == DPC_OK, "%s", d->msg);
  CHECK_MSG(dpc_session_set(s, "y", &yt, d) == DPC_OK, "%s", d->msg);
}

/* A gradient through a symbolic batch and the MLP's shapes, end to end: the whole training
 * pipeline, bound to a batch of 5 and run, gives w.grad and b.grad equal to finite differences
 * of the forward graph's loss. */
static void mlp_with_batch(void) {
  const char *src = "input x: f64[N, 6]\ninput y: i32[N]\n" P("w", "[6, 4]", -1, 1, 1)
      P("b", "[4]", -1, 1, 2) "h = relu(matmul(x, w) + b)\nloss = softmax_cross_entropy(h, "
                              "y)\nminimize loss with sgd(lr=1)\n";
  dpc_graph *g = NULL, *fwd = NULL;
  dpc_plan *gplan = NULL, *fplan = NULL;
  dpc_session *gs = NULL, *fs = NULL;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(dpc_parse_graph("mlp", src, strlen(src), &g, &d) == DPC_OK);
  if (!g) goto done;
  fwd = dpc_graph_clone(g);
  uint32_t loss = fwd->obj.loss;
  dpc_pass_opts po = {.training = true, .verify_each = true};
  CHECK_MSG(dpc_passes_run(g, &po, &d) == DPC_OK, "%s", d.msg);
  CHECK(dpc_graph_find(g, "w.grad") != DPC_NONE && dpc_graph_find(g, "w.momentum") == DPC_NONE);
  CHECK(g->n_updates == 3); /* w, b, opt.step */
  /* the gradients as outputs, so their memory is not reused before they are read */
  const char *grads[2] = {"w.grad", "b.grad"};
  for (int i = 0; i < 2; i++) {
    uint32_t v = dpc_graph_find(g, grads[i]);
    CHECK_MSG(v != DPC_NONE, "no %s", grads[i]);
    if (v == DPC_NONE || dpc_graph_add_output(g, v, &d)) goto done;
  }
  int64_t batch[1] = {5};
  CHECK(g->n_syms == 1 && fwd->n_syms == 1);
  if (dpc_graph_bind(g, batch, &d) || dpc_plan_single(g, "cpu:0", true, &gplan, &d) ||
      dpc_session_new(gplan, NULL, &gs, &d)) {
    CHECK_MSG(0, "planning the training step: %s", d.msg);
    goto done;
  }
  feed_mlp(gs, &d);
  CHECK_MSG(dpc_session_run(gs, &d) == DPC_OK, "%s", d.msg);
  if (dpc_graph_bind(fwd, batch, &d) || dpc_plan_single(fwd, "cpu:0", false, &fplan, &d) ||
      dpc_session_new(fplan, NULL, &fs, &d)) {
    CHECK_MSG(0, "planning the forward graph: %s", d.msg);
    goto done;
  }
  feed_mlp(fs, &d);
  CHECK(compare_gradients("mlp", fwd, loss, gs, fs) == 6 * 4 + 4);
done:
  dpc_session_free(gs);
  dpc_session_free(fs);
  dpc_plan_free(gplan);
  dpc_plan_free(fplan);
  dpc_graph_free(g);
  dpc_graph_free(fwd);
  dpc_diag_free(&d);
}

const unit_test unit_tests[] = {
    {"table_complete", table_complete},
    {"finite_differences", finite_differences},
    {"mlp_with_batch", mlp_with_batch},
    {NULL, NULL},
};
