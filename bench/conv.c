/*
 * conv.c — dpc's compiled conv2d and its gradients, timed single-threaded and checked against
 * the reference kernels (the oracle, which sums in double).
 *
 *   build/bench/bench_conv            the example CNN's layers (batch 64), then a sweep of odd
 *                                     geometries (stride, asymmetric padding, dilation, groups)
 *   bench_conv "conv2" conv2d_grad_input   only the cases whose name has "conv2", that op
 *   bench_conv --onednn [FILTER [OP]]      also oneDNN's time for each (where built with it:
 *                                          bench/conv_onednn.c), in its own layouts and from NCHW
 *
 * Each case is a one-node .graph through dpc's own pipeline, compiled with
 * dpc_cpu_compile_plan; the kernel is called over [0, total) on this thread (and once in three
 * ranges, last first, to check that its iterations are independent).
 */
#include "codegen/cpu/cpu.h"
#include "frontend/frontend.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "runtime/kernel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ccase {
  const char *what;
  int64_t n, c, h, w, oc, kh, kw;
  const char *attrs;                              /* after the operands: ", pad=1" */
  int64_t sh, sw, pt, pl, pb, pr, dh, dw, groups; /* the same geometry, for the shapes */
} ccase;

static const ccase cases[] = {
    {"cnn conv1", 64, 1, 28, 28, 32, 3, 3, ", pad=1", 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"cnn conv2", 64, 32, 14, 14, 64, 3, 3, ", pad=1", 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"odd", 3, 5, 17, 23, 7, 3, 2, ", stride=[2, 3], pad=[1, 2, 0, 1], dilation=2", 2, 3, 1, 2, 0,
     1, 2, 2, 1},
    {"groups", 2, 8, 19, 40, 12, 3, 3, ", pad=[0, 1, 2, 0], groups=4", 1, 1, 0, 1, 2, 0, 1, 1, 4},
    {"depthwise", 2, 6, 33, 33, 6, 5, 5, ", pad=2, groups=6", 1, 1, 2, 2, 2, 2, 1, 1, 6},
    {"wide", 1, 3, 9, 150, 40, 1, 3, ", pad=[0, 1], dilation=[1, 3]", 1, 1, 0, 1, 0, 1, 1, 3, 1},
    {"many taps", 2, 96, 12, 12, 50, 3, 3, ", pad=1, stride=2", 2, 2, 1, 1, 1, 1, 1, 1, 1},
    /* ResNet-18's 3x3 layers inside its blocks, at batch 8 */
    {"resnet l1", 8, 64, 56, 56, 64, 3, 3, ", pad=1", 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"resnet l2", 8, 128, 28, 28, 128, 3, 3, ", pad=1", 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"resnet l3", 8, 256, 14, 14, 256, 3, 3, ", pad=1", 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"resnet l4", 8, 512, 7, 7, 512, 3, 3, ", pad=1", 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* MobileNetV2's pointwise (1x1) layers: few output channels on large planes, and many
     * channels on 7x7 planes */
    {"mnv2 f1 pw", 8, 32, 112, 112, 16, 1, 1, "", 1, 1, 0, 0, 0, 0, 1, 1, 1},
    {"mnv2 f12 pw", 8, 96, 14, 14, 576, 1, 1, "", 1, 1, 0, 0, 0, 0, 1, 1, 1},
    {"mnv2 f15 pw b1", 1, 160, 7, 7, 960, 1, 1, "", 1, 1, 0, 0, 0, 0, 1, 1, 1},
    {"mnv2 f17 pw b1", 1, 960, 7, 7, 320, 1, 1, "", 1, 1, 0, 0, 0, 0, 1, 1, 1},
    {"mnv2 f18 pw b1", 1, 320, 7, 7, 1280, 1, 1, "", 1, 1, 0, 0, 0, 0, 1, 1, 1},
};

#ifdef DPC_BENCH_ONEDNN
#include "bench/conv_onednn.h"
#endif
static bool with_onednn; /* --onednn */

static void die(dpc_diag *d, const char *what) {
  char *m = dpc_diag_render(d);
  fprintf(stderr, "bench_conv: %s: %s", what, m);
  free(m);
  exit(1);
}

static float *random_data(int64_t n, unsigned *seed) {
  float *p = malloc((size_t)n * sizeof *p);
  if (!p) exit(1);
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    p[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

/* One op of one case: compile, run native and reference, compare, time. Returns nonzero on a
 * mismatch. */
static int run(const ccase *cc, dpc_op op) {
  int64_t oh = (cc->h + cc->pt + cc->pb - cc->dh * (cc->kh - 1) - 1) / cc->sh + 1;
  int64_t ow = (cc->w + cc->pl + cc->pr - cc->dw * (cc->kw - 1) - 1) / cc->sw + 1;
  int64_t xs[4] = {cc->n, cc->c, cc->h, cc->w},
          ws[4] = {cc->oc, cc->c / cc->groups, cc->kh, cc->kw};
  int64_t ys[4] = {cc->n, cc->oc, oh, ow};
  char text[1024], xt[64], wt[64], yt[64];
  snprintf(xt, sizeof xt, "f32[%lld, %lld, %lld, %lld]", (long long)xs[0], (long long)xs[1],
           (long long)xs[2], (long long)xs[3]);
  snprintf(wt, sizeof wt, "f32[%lld, %lld, %lld, %lld]", (long long)ws[0], (long long)ws[1],
           (long long)ws[2], (long long)ws[3]);
  snprintf(yt, sizeof yt, "f32[%lld, %lld, %lld, %lld]", (long long)ys[0], (long long)ys[1],
           (long long)ys[2], (long long)ys[3]);
  const int64_t *in_shape[3], *out_shape;
  int n_in;
  if (op == DPC_OP_CONV2D) {
    snprintf(text, sizeof text, "model c\ninput x: %s\ninput w: %s\nr = conv2d(x, w%s)\noutput r\n",
             xt, wt, cc->attrs);
    in_shape[0] = xs, in_shape[1] = ws, out_shape = ys, n_in = 2;
  } else if (op == DPC_OP_CONV2D_GRAD_INPUT) {
    snprintf(text, sizeof text,
             "model c\ninput dy: %s\ninput w: %s\ninput x: %s\nr = conv2d_grad_input(dy, w, x%s)\n"
             "output r\n",
             yt, wt, xt, cc->attrs);
    in_shape[0] = ys, in_shape[1] = ws, in_shape[2] = xs, out_shape = xs, n_in = 3;
  } else {
    snprintf(text, sizeof text,
             "model c\ninput dy: %s\ninput x: %s\ninput w: %s\nr = conv2d_grad_weight(dy, x, "
             "w%s)\noutput r\n",
             yt, xt, wt, cc->attrs);
    in_shape[0] = ys, in_shape[1] = xs, in_shape[2] = ws, out_shape = ws, n_in = 3;
  }
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g;
  dpc_plan *plan;
  dpc_cpu_backend *cpu;
  int64_t none = 0;
  dpc_pass_opts po = {0};
  if (dpc_parse_graph("c.graph", text, strlen(text), &g, &d)) die(&d, "parse");
  if (dpc_passes_run(g, &po, &d) || dpc_graph_bind(g, &none, &d)) die(&d, "passes");
  if (dpc_plan_single(g, "cpu:0", false, &plan, &d)) die(&d, "plan");
  const dpc_graph *pg = plan->g;
  dpc_native_kernel *k = calloc(pg->n_nodes, sizeof *k);
  if (!k) exit(1);
  if (dpc_cpu_backend_new(&(dpc_cpu_options){0}, &cpu, &d)) die(&d, "backend");
  if (dpc_cpu_compile_plan(cpu, plan, k, &d)) die(&d, "compile");
  uint32_t node = 0;
  for (uint32_t i = 0; i < pg->n_nodes; i++)
    if (pg->nodes[i].op == op) node = i;
  dpc_native_kernel kern = k[node];
  free(k);
  if (!kern.fn) {
    fprintf(stderr, "bench_conv: %s was not compiled\n", dpc_op_name(op));
    exit(1);
  }
  unsigned seed = 99;
  dpc_tensor in[3], out[2];
  void *args[4];
  for (int i = 0; i < n_in; i++) {
    in[i].dtype = DPC_F32;
    in[i].shape.rank = 4;
    memcpy(in[i].shape.d, in_shape[i], 4 * sizeof(int64_t));
    in[i].data = random_data(dpc_tensor_numel(&in[i]), &seed);
    args[i] = in[i].data;
  }
  for (int i = 0; i < 2; i++) {
    out[i].dtype = DPC_F32;
    out[i].shape.rank = 4;
    memcpy(out[i].shape.d, out_shape, 4 * sizeof(int64_t));
    out[i].data = random_data(dpc_tensor_numel(&out[i]), &seed);
  }
  int64_t ny = dpc_tensor_numel(&out[0]);
  /* native, in three ranges last first; then the reference */
  args[n_in] = out[0].data;
  for (int p = 3; p-- > 0;) kern.fn(args, kern.total * p / 3, kern.total * (p + 1) / 3, 0, 0);
  dpc_run_info ri = {false, 0};
  dpc_kernel_args ka = {pg, node, in, (uint32_t)n_in, &out[1], 1, &ri};
  double t0 = dpc_now_s();
  if (dpc_ref_kernels[op](&ka, &d)) die(&d, "reference");
  double tref = dpc_now_s() - t0;
  double worst = 0, big = 0;
  const float *y1 = out[0].data, *y2 = out[1].data;
  for (int64_t i = 0; i < ny; i++) {
    double e = fabs((double)y1[i] - y2[i]);
    if (!(e <= worst)) worst = e;
    if (fabs((double)y2[i]) > big) big = fabs((double)y2[i]);
  }
  double rel = worst / (big > 0 ? big : 1);
  int reps = 20;
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    t0 = dpc_now_s();
    kern.fn(args, 0, kern.total, 0, 0);
    double t = dpc_now_s() - t0;
    if (t < best) best = t;
  }
  double flop = 2.0 * (double)cc->n * (double)cc->oc * (double)(oh * ow) *
                (double)(cc->c / cc->groups * cc->kh * cc->kw);
  double compile_s;
  dpc_cpu_stats(cpu, &compile_s, NULL, NULL);
  printf("%-10s %-19s %8.3f ms %6.1f GF/s  (reference %8.2f ms)  pieces %4lld  compile %3.0f ms"
         "  diff %.1e%s\n",
         cc->what, dpc_op_name(op), best * 1e3, flop / best * 1e-9, tref * 1e3,
         (long long)kern.total, compile_s * 1e3, rel, rel < 1e-5 ? "" : "  MISMATCH");
#ifdef DPC_BENCH_ONEDNN
  if (with_onednn) {
    onednn_conv oc = {cc->n,  cc->c,  cc->h,  cc->w,  cc->oc, cc->kh, cc->kw, oh,     ow,
                      cc->sh, cc->sw, cc->pt, cc->pl, cc->pb, cc->pr, cc->dh, cc->dw, cc->groups};
    int kind = op == DPC_OP_CONV2D              ? ONEDNN_FWD
               : op == DPC_OP_CONV2D_GRAD_INPUT ? ONEDNN_BWD_DATA
                                                : ONEDNN_BWD_WEIGHTS;
    double own, nchw;
    char impl[64];
    onednn_conv_time(&oc, kind, reps, &own, &nchw, impl, sizeof impl);
    printf("%-10s %-19s oneDNN %8.3f ms (dpc %.2fx), from NCHW %8.3f ms (dpc %.2fx)  [%s]\n",
           cc->what, dpc_op_name(op), own * 1e3, own / best, nchw * 1e3, nchw / best, impl);
    fflush(stdout);
  }
#endif
  fflush(stdout);
  for (int i = 0; i < n_in; i++) free(in[i].data);
  for (int i = 0; i < 2; i++) free(out[i].data);
  dpc_cpu_backend_free(cpu);
  dpc_plan_free(plan);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return !(rel < 1e-5);
}

int main(int argc, char **argv) {
  static const dpc_op ops[] = {DPC_OP_CONV2D, DPC_OP_CONV2D_GRAD_INPUT, DPC_OP_CONV2D_GRAD_WEIGHT};
  int bad = 0;
  if (argc > 1 && !strcmp(argv[1], "--onednn")) {
#ifndef DPC_BENCH_ONEDNN
    fprintf(stderr, "bench_conv: built without oneDNN (bench/setup installs libdnnl-dev; then "
                    "reconfigure)\n");
    return 2;
#endif
    with_onednn = true;
    argv++;
    argc--;
  }
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (size_t j = 0; j < 3; j++)
      if (argc < 2 ||
          (strstr(cases[i].what, argv[1]) && (argc < 3 || !strcmp(dpc_op_name(ops[j]), argv[2]))))
        bad |= run(&cases[i], ops[j]);
  return bad;
}
