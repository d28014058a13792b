/*
 * cuda_fused.c — fusion groups as one CUDA kernel (codegen/cuda/lower_fused.c), checked on the
 * host: a graph's outputs by the reference backend, and by the cuda-emu backend (the CUDA source
 * NVRTC compiles, run on the CPU) with its fusion groups and with none.
 */
#include "codegen/cuda/emu.h"
#include "driver/driver.h"
#include "ir/fusion.h"
#include "passes/pass.h"
#include "runtime/rng.h"
#include "tests/cuda/checks.h"
#include "tests/ops/tolerance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_INPUTS = 16 };

/* The fusion groups the cuda backend's passes form in g: nodes fused into another (0 after a
 * failure); each group's kernel through NVRTC and ptxas, counted in *fails. */
static uint32_t fused_nodes(const dpc_graph *src, int *fails, dpc_diag *d) {
  dpc_graph *g = dpc_graph_clone(src);
  dpc_pass_opts po = {.fuse = dpc_codegen_fusion(&dpc_codegen_cuda_emu)};
  uint32_t n = 0;
  if (!g || dpc_passes_run(g, &po, d)) {
    dpc_graph_free(g);
    return 0;
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    n += g->nodes[i].fused != DPC_NONE;
    if (!dpc_group_is_root(g, i)) continue;
    dpc_cuda_kernel k;
    char label[64];
    snprintf(label, sizeof label, "the group of %s %u", dpc_op_name(g->nodes[i].op), i);
    if (dpc_cuda_lower(g, i, false, &k, d)) {
      printf("FAIL %s: %s\n", label, d->msg);
      ++*fails;
      dpc_diag_clear(d);
      continue;
    }
    *fails += check_nvrtc(&k, label);
    dpc_cuda_kernel_free(&k);
  }
  dpc_graph_free(g);
  return n;
}

/* Each input filled from the counter-based generator: floats in [-3, 3), integers in [-20, 20). */
static uint32_t make_inputs(const dpc_graph *g, dpc_named *feeds) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->n_nodes && n < MAX_INPUTS; i++) {
    if (g->nodes[i].op != DPC_OP_INPUT) continue;
    const dpc_value *v = &g->values[g->nodes[i].out];
    dpc_named *f = &feeds[n];
    f->name = (char *)dpc_graph_str(g, v->name);
    f->t = (dpc_tensor){NULL, v->dtype, v->shape};
    int64_t count = dpc_shape_numel(&v->shape);
    f->t.data = calloc((size_t)(count ? count : 1), dpc_dtype_size(v->dtype));
    for (int64_t e = 0; f->t.data && e < count; e++) {
      double u = dpc_rng_uniform(31 + n, (uint64_t)e);
      dpc_tstore(&f->t, e, dpc_dtype_is_int(v->dtype) ? (double)(int)(u * 40 - 20) : u * 6 - 3);
    }
    n++;
  }
  return n;
}

int test_cuda_fused(const char *graph, const dpc_codegen_backend *device) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  int fails = 0;
  if (dpc_driver_load(graph, &g, &d)) {
    printf("FAIL: %s\n", d.msg);
    dpc_diag_free(&d);
    return 1;
  }
  if (!device) { /* the groups, and their kernels through NVRTC */
    uint32_t fused = fused_nodes(g, &fails, &d);
    printf("%s %u nodes fused into groups\n", fused ? "ok  " : "FAIL", fused);
    fails += fused == 0;
  }
  dpc_named feeds[MAX_INPUTS];
  uint32_t n_feeds = make_inputs(g, feeds);
  dpc_codegen_backend unfused = dpc_codegen_cuda_emu;
  unfused.fusion = NULL;
  const dpc_codegen_backend *ways[3] = {NULL, device ? device : &dpc_codegen_cuda_emu, &unfused};
  static const char *const names[3] = {"reference", "fused", "unfused"};
  dpc_named *outs[3] = {NULL};
  uint32_t n_outs[3] = {0};
  int n_ways = device ? 2 : 3;
  for (int w = 0; w < n_ways; w++) {
    dpc_exec_opts x = {.backend = ways[w]};
    if (dpc_driver_infer(g, NULL, ways[w] ? &x : NULL, feeds, n_feeds, false, &outs[w], &n_outs[w],
                         &d)) {
      printf("FAIL the %s run: %s\n", names[w], d.msg);
      fails++;
      dpc_diag_clear(&d);
    }
  }
  for (uint32_t o = 0; !fails && o < n_outs[0]; o++) {
    const dpc_tensor *r = &outs[0][o].t, *f = &outs[1][o].t, *u = device ? f : &outs[2][o].t;
    size_t bytes = dpc_tensor_bytes(r);
    bool same = bytes == dpc_tensor_bytes(f) && !memcmp(f->data, u->data, bytes);
    double rtol, atol, worst = 0;
    default_tol(r->dtype, &rtol, &atol);
    int64_t bad = -1, count = dpc_shape_numel(&r->shape);
    for (int64_t e = 0; e < count; e++) {
      double want = dpc_tload(r, e), got = dpc_tload(f, e);
      if (!close_enough(got, want, rtol, atol) && bad < 0) bad = e;
      if (fabs(got - want) > worst) worst = fabs(got - want);
    }
    printf("%s %s: %s; against the reference %s (largest difference %.3g)\n",
           same && bad < 0 ? "ok  " : "FAIL", outs[0][o].name,
           device ? "fused kernels on cuda:0"
           : same ? "fused and unfused kernels give the same bits"
                  : "fused and unfused kernels differ",
           bad < 0 ? "within tolerance" : "off", worst);
    if (bad >= 0)
      printf("     element %lld: reference %.9g, fused %.9g\n", (long long)bad, dpc_tload(r, bad),
             dpc_tload(f, bad));
    fails += !same || bad >= 0;
  }
  for (int w = 0; w < 3; w++) dpc_named_free(outs[w], n_outs[w]);
  for (uint32_t i = 0; i < n_feeds; i++) free(feeds[i].t.data);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return fails ? 1 : 0;
}
