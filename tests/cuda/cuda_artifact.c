/*
 * cuda_artifact.c — a GPU artifact made and run as its users make and run it: dpc_net_compile
 * with the cuda backend writes it, dpc_model_load and runners (include/dpc/dpc.h) run it on
 * cuda:0, and every output and loss is compared with the same plans on the reference backend.
 */
#include "tests/cuda/checks.h"
#include "runtime/artifact.h"
#include "runtime/rng.h"
#include "runtime/session.h"

#include <dpc/compiler.h>
#include <dpc/dpc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 8, STEPS = 12, PIXELS = 784, CLASSES = 10 };

static int fails;

#define CHECK(cond, ...) CUDA_EXPECT(fails, cond, __VA_ARGS__)

/* The artifact's plan for `role` on the reference kernels, on this CPU. */
static dpc_session *reference(const dpc_artifact *a, const char *role, bool training) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_session *s = NULL;
  const dpc_plan *p = dpc_artifact_plan(a, role, NULL);
  if (!p || dpc_session_new(p, &(dpc_session_opts){.training = training}, &s, &d))
    printf("FAIL the reference session for the %s plan: %s\n", role, d.msg ? d.msg : "no plan");
  dpc_diag_free(&d);
  return s;
}

/* Each role's plan compiled once more by be, so the test driver has its kernels' emulated
 * builds; the codegen owns them and must outlive the runs. */
static dpc_codegen *register_kernels(const dpc_artifact *a, const dpc_codegen_backend *be) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_codegen *cg = NULL;
  dpc_status st = dpc_codegen_new(be, &(dpc_codegen_options){0}, &cg, &d);
  for (uint32_t i = 0; !st && dpc_artifact_role(a, i); i++) {
    const dpc_plan *p = dpc_artifact_plan(a, dpc_artifact_role(a, i), NULL);
    dpc_native_kernel *k = calloc(p->g->n_nodes, sizeof *k);
    st = k ? dpc_codegen_compile_plan(cg, p, k, &d) : DPC_ERR_NOMEM;
    free(k);
  }
  if (st) printf("FAIL the kernels' emulated builds: %s\n", d.msg ? d.msg : "out of memory");
  dpc_diag_free(&d);
  if (st) dpc_codegen_free(cg);
  return st ? NULL : cg;
}

static void fill(float *x, int32_t *y, int step) {
  for (int i = 0; i < BATCH * PIXELS; i++)
    x[i] = (float)dpc_rng_uniform(11 + (uint64_t)step, (uint64_t)i);
  for (int i = 0; i < BATCH; i++)
    y[i] = (int32_t)(dpc_rng_bits(5, (uint64_t)(step * BATCH + i)) % CLASSES);
}

static double rel(double a, double b) {
  return fabs(a - b) / (fabs(b) > 1e-6 ? fabs(b) : 1e-6);
}

/* One inference of the runner against the reference session: the largest difference over the
 * largest logit (the products are summed in another order, and logits near 0 have no relative
 * precision of their own). */
static double infer_error(dpc_runner *r, dpc_session *ref, float *x, int32_t *y) {
  float got[BATCH * CLASSES];
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_tensor tx = {x, DPC_F32, {2, {BATCH, PIXELS}}};
  dpc_tensor view;
  double worst = INFINITY;
  (void)y;
  if (dpc_runner_bind(r, "x", x, sizeof(float) * BATCH * PIXELS) || dpc_runner_run(r) ||
      dpc_runner_read(r, "logits", got, sizeof got))
    printf("FAIL the artifact's inference on cuda:0: %s\n", dpc_runner_error(r));
  else if (dpc_session_set(ref, "x", &tx, &d) || dpc_session_run(ref, &d) ||
           dpc_session_get(ref, "logits", &view, &d))
    printf("FAIL the reference inference: %s\n", d.msg);
  else {
    double diff = 0, scale = 0;
    const float *want = view.data;
    for (int i = 0; i < BATCH * CLASSES; i++) {
      diff = fmax(diff, fabs(got[i] - want[i]));
      scale = fmax(scale, fabs(want[i]));
    }
    worst = diff / fmax(scale, 1e-6);
  }
  dpc_diag_free(&d);
  return worst;
}

static void train_steps(dpc_runner *r, dpc_session *ref, float *x, int32_t *y) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_tensor tx = {x, DPC_F32, {2, {BATCH, PIXELS}}}, ty = {y, DPC_I32, {1, {BATCH}}}, view;
  for (int s = 0; s < STEPS; s++) {
    fill(x, y, s);
    float got = NAN;
    if (dpc_runner_bind(r, "x", x, sizeof(float) * BATCH * PIXELS) ||
        dpc_runner_bind(r, "y", y, sizeof(int32_t) * BATCH) || dpc_runner_run(r) ||
        dpc_runner_read(r, "loss", &got, sizeof got)) {
      CHECK(false, "step %d on cuda:0: %s", s + 1, dpc_runner_error(r));
      break;
    }
    if (dpc_session_set(ref, "x", &tx, &d) || dpc_session_set(ref, "y", &ty, &d) ||
        dpc_session_run(ref, &d) || dpc_session_get(ref, "loss", &view, &d)) {
      CHECK(false, "reference step %d: %s", s + 1, d.msg);
      break;
    }
    double want = *(const float *)view.data;
    CHECK(rel(got, want) <= 1e-5, "step %2d: reference %.9g, the artifact on cuda:0 %.9g", s + 1,
          want, (double)got);
  }
  dpc_diag_free(&d);
}

/* MODEL compiled for the GPU into path (over `devices`, or one), opened; NULL after saying why. */
static dpc_artifact *compile_open(const char *model, const char *path, const char *devices) {
  dpc_message *m = dpc_message_new();
  dpc_net *net = NULL;
  dpc_compile_info info = {sizeof info};
  dpc_compile_opts co = {sizeof co,
                         .build = {sizeof(dpc_build_opts), .backend = "cuda"},
                         .batch = BATCH,
                         .train = true,
                         .total_steps = STEPS,
                         .devices = devices,
                         .info = &info};
  bool ok =
      !dpc_net_load(model, &(dpc_load_opts){sizeof(dpc_load_opts), .batched = true}, &net, m) &&
      !dpc_net_compile(net, &co, path, m);
  if (!ok) printf("FAIL compiling %s for the GPU: %s\n", model, dpc_message_brief(m));
  dpc_net_free(net);
  dpc_message_free(m);
  if (!ok) return NULL;
  CHECK(info.n_plans == 3 && strstr(info.target, "CUDA sm_80,sm_90") &&
            info.replicas == (devices ? 2u : 1u),
        "%u plans for %s, %u replica%s", info.n_plans, info.target, info.replicas,
        info.replicas == 1 ? "" : "s");
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_artifact *a = NULL;
  if (dpc_artifact_open(path, &a, &d)) printf("FAIL the artifact does not open: %s\n", d.msg);
  dpc_diag_free(&d);
  return a;
}

int test_cuda_artifact(const char *model, const dpc_codegen_backend *be, const char *work,
                       const char *devices) {
  fails = 0;
  char path[4200], one[4200], err[1024] = "";
  snprintf(path, sizeof path, "%s/model.dpx", work);
  snprintf(one, sizeof one, "%s/one.dpx", work);
  dpc_artifact *a = compile_open(model, path, devices);
  /* data parallel is checked against one device: the same model compiled without --devices */
  dpc_artifact *ra = devices && a ? compile_open(model, one, NULL) : a;
  if (!a || !ra) {
    dpc_artifact_close(a);
    return 1;
  }
  const char *kind = dpc_artifact_device_kind(a);
  CHECK(kind && !strcmp(kind, "cuda"), "its kernels run on %s devices", kind ? kind : "host");
  unsigned gpu_kernels = 0;
  const dpc_native_kernel *k = NULL;
  const dpc_plan *tp = dpc_artifact_plan(a, "train", &k);
  for (uint32_t i = 0; tp && i < tp->g->n_nodes; i++) gpu_kernels += k[i].kind == DPC_KERNEL_CUDA;
  CHECK(gpu_kernels > 10, "the training plan has %u GPU kernels", gpu_kernels);
  dpc_codegen *cg = be ? register_kernels(a, be) : NULL;
  dpc_session *ri = reference(ra, "infer", false), *rt = reference(ra, "train", true);
  dpc_model *mod = NULL;
  dpc_runner *inf = NULL, *tr = NULL;
  float *x = malloc(sizeof(float) * BATCH * PIXELS);
  int32_t y[BATCH];
  if ((be && !cg) || !ri || !rt || !x) {
    fails++;
  } else if (dpc_model_load(path, &mod, err, sizeof err) ||
             dpc_runner_new(mod, DPC_MODE_INFER, NULL, 1, &inf, err, sizeof err) ||
             dpc_runner_new(mod, DPC_MODE_TRAIN, NULL, 1, &tr, err, sizeof err)) {
    CHECK(false, "the runtime library opens the artifact on cuda:0: %s", err);
  } else {
    fill(x, y, 99);
    double e = infer_error(inf, ri, x, y);
    CHECK(e <= 1e-5, "inference on cuda:0 matches the reference backend (largest error %.2g)", e);
    train_steps(tr, rt, x, y);
  }
  dpc_runner_free(inf);
  dpc_runner_free(tr);
  dpc_model_free(mod);
  dpc_session_free(ri);
  dpc_session_free(rt);
  dpc_codegen_free(cg);
  if (ra != a) dpc_artifact_close(ra);
  dpc_artifact_close(a);
  free(x);
  return fails ? 1 : 0;
}
