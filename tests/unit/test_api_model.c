/*
 * test_api_model.c — libdpc's public API for running, compiling and looking at a model
 * (include/dpc/compiler.h), called as an application calls it: only <dpc/...> and libc. The
 * Fashion-MNIST MLP runs at batch 2 on the reference kernels and on LLVM with the same outputs,
 * and compiled to an artifact it gives them again.
 */
#include "tests/unit/unit.h"

#include <dpc/compiler.h>

#include <unistd.h>

static char tmpdir[64];

enum { BATCH = 2, FEATURES = 784, CLASSES = 10 };

/* A fixed input x: f32[2, 784], values in [-1, 1]. */
static float x_data[BATCH * FEATURES];

static dpc_array input_x(void) {
  for (int i = 0; i < BATCH * FEATURES; i++) x_data[i] = (float)sin(0.37 * i + 0.1);
  dpc_array x = {.name = "x", .elem = DPC_ELEM_F32, .rank = 2, .dims = {BATCH, FEATURES}};
  x.data = x_data;
  x.bytes = sizeof x_data;
  return x;
}

static dpc_net *load_mlp(dpc_message *m) {
  dpc_net *net = NULL;
  dpc_status st = dpc_net_load(DPC_SOURCE_DIR "/examples/fashion_mlp.graph", NULL, &net, m);
  CHECK_MSG(st == DPC_OK, "%s", dpc_message_text(m));
  return net;
}

/* The one output, logits: f32[2, 10]. */
static bool is_logits(const dpc_array *outs, unsigned n) {
  CHECK(n == 1);
  if (n != 1) return false;
  CHECK(!strcmp(outs[0].name, "logits"));
  CHECK(outs[0].elem == DPC_ELEM_F32);
  CHECK(outs[0].rank == 2 && outs[0].dims[0] == BATCH && outs[0].dims[1] == CLASSES);
  CHECK(outs[0].bytes == BATCH * CLASSES * sizeof(float));
  return outs[0].rank == 2 && outs[0].dims[0] == BATCH && outs[0].dims[1] == CLASSES &&
         outs[0].bytes == BATCH * CLASSES * sizeof(float);
}

static void same_values(const dpc_array *a, const dpc_array *b, double tol) {
  for (size_t i = 0; i < BATCH * CLASSES; i++)
    CHECK_NEAR(dpc_array_value(a, i), dpc_array_value(b, i), tol);
}

static void run_on(dpc_net *net, const char *backend, dpc_array **outs, unsigned *n,
                   dpc_message *m) {
  dpc_array x = input_x();
  dpc_build_opts b = {sizeof b, .backend = backend};
  dpc_status st = dpc_net_infer(net, &b, &x, 1, false, outs, n, m);
  CHECK_MSG(st == DPC_OK, "%s: %s", backend, dpc_message_text(m));
}

/* The reference kernels and LLVM agree; the artifact compiled at batch 2 gives the same. */
static void infer_backends_and_artifact(void) {
  dpc_message *m = dpc_message_new();
  dpc_net *net = load_mlp(m);
  if (!net) goto out;
  dpc_array *ref = NULL, *llvm = NULL, *aot = NULL;
  unsigned n_ref = 0, n_llvm = 0, n_aot = 0;
  run_on(net, "ref", &ref, &n_ref, m);
  run_on(net, "llvm", &llvm, &n_llvm, m);
  if (is_logits(ref, n_ref) && is_logits(llvm, n_llvm)) same_values(ref, llvm, 1e-5);

  char path[128];
  snprintf(path, sizeof path, "%s/mlp.dpx", tmpdir);
  dpc_compile_info info = {sizeof info};
  dpc_compile_opts co = {sizeof co, .batch = BATCH, .info = &info};
  dpc_status st = dpc_net_compile(net, &co, path, m);
  CHECK_MSG(st == DPC_OK, "%s", dpc_message_text(m));
  CHECK(info.batch == BATCH && info.replicas == 1 && info.n_plans == 1 && info.target[0]);
  CHECK(dpc_path_is_artifact(path));
  char what[512];
  CHECK_MSG(dpc_artifact_describe(path, what, sizeof what, m) == DPC_OK, "%s", dpc_message_text(m));
  dpc_array x = input_x();
  st = dpc_artifact_infer(path, &x, 1, false, &aot, &n_aot, m);
  CHECK_MSG(st == DPC_OK, "%s", dpc_message_text(m));
  if (is_logits(ref, n_ref) && is_logits(aot, n_aot)) same_values(ref, aot, 1e-5);
  CHECK(unlink(path) == 0);

  dpc_arrays_free(ref, n_ref);
  dpc_arrays_free(llvm, n_llvm);
  dpc_arrays_free(aot, n_aot);
  dpc_net_free(net);
out:
  dpc_message_free(m);
}

/* Settings that cannot work say which one; a set cancel flag writes nothing. */
static void compile_refusals(void) {
  dpc_message *m = dpc_message_new();
  dpc_net *net = load_mlp(m);
  if (!net) goto out;
  char path[128];
  snprintf(path, sizeof path, "%s/refused.dpx", tmpdir);
  dpc_compile_info info = {sizeof info};
  const char *dims[] = {"nosuch=3"};
  dpc_compile_opts co = {sizeof co, .batch = 8, .dims = dims, .n_dims = 1, .info = &info};
  CHECK(dpc_net_compile(net, &co, path, m) == DPC_ERR_INVALID);
  CHECK(info.problem == DPC_COMPILE_BAD_DIM && info.index == 0);

  co = (dpc_compile_opts){sizeof co, .batch = 8, .devices = "cpu:3", .info = &info};
  CHECK(dpc_net_compile(net, &co, path, m) == DPC_ERR_INVALID);
  CHECK(info.problem == DPC_COMPILE_SPLIT && info.replicas == 3);
  CHECK_MSG(strstr(dpc_message_brief(m), "the 3 devices do not divide the batch 8"), "%s",
            dpc_message_brief(m));

  co = (dpc_compile_opts){sizeof co, .train = true, .info = &info};
  CHECK(dpc_net_compile(net, &co, path, m) == DPC_ERR_INVALID);
  CHECK(info.problem == DPC_COMPILE_NO_HORIZON && !strcmp(info.schedule, "cosine"));

  volatile int stop = 1;
  co = (dpc_compile_opts){sizeof co, .cancel = &stop, .info = &info};
  CHECK(dpc_net_compile(net, &co, path, m) == DPC_ERR_RUNTIME);
  CHECK(info.problem == DPC_COMPILE_FINE);
  CHECK_MSG(strstr(dpc_message_brief(m), "interrupted"), "%s", dpc_message_brief(m));
  CHECK(access(path, F_OK) != 0);
  dpc_net_free(net);
out:
  dpc_message_free(m);
}

/* check, print and the op table. */
static void check_print_ops(void) {
  dpc_message *m = dpc_message_new();
  dpc_net *net = load_mlp(m);
  if (!net) goto out;
  CHECK_MSG(dpc_net_check(net, false, NULL, m) == DPC_OK, "%s", dpc_message_text(m));
  CHECK_MSG(dpc_net_check(net, true, NULL, m) == DPC_OK, "%s", dpc_message_text(m));
  dpc_net_summary s = {sizeof s};
  dpc_net_summarize(net, &s);
  CHECK(s.name && !strcmp(s.name, "fashion_mlp") && s.inputs == 2 && s.params == 6 && s.trainable);
  char *text = NULL;
  CHECK_MSG(dpc_net_print(net, DPC_PRINT_TEXT, false, NULL, &text, m) == DPC_OK, "%s",
            dpc_message_text(m));
  CHECK(text && strstr(text, "model fashion_mlp"));
  free(text);
  dpc_build_opts bad = {sizeof bad, .backend = "nosuch"};
  CHECK(dpc_build_opts_check(&bad, m) == DPC_ERR_INVALID);
  CHECK(dpc_op_count() > 10);
  bool matmul = false;
  for (unsigned i = 0; i < dpc_op_count(); i++) {
    dpc_op_entry e = {sizeof e};
    CHECK(dpc_op_at(i, &e) && e.name && e.inputs && e.outputs && e.attrs);
    CHECK(!strcmp(e.name, dpc_op_name_at(i)));
    matmul |= !strcmp(e.name, "matmul");
  }
  CHECK(matmul);
  CHECK(dpc_op_name_at(dpc_op_count()) == NULL);
  dpc_net_free(net);
out:
  dpc_message_free(m);
}

static void setup_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/dpc_api_model_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    CHECK_MSG(0, "cannot make a temporary folder");
    tmpdir[0] = 0;
  }
}

static void cleanup_tmp(void) {
  CHECK(rmdir(tmpdir) == 0);
}

const unit_test unit_tests[] = {
    {"infer_backends_and_artifact", infer_backends_and_artifact},
    {"compile_refusals", compile_refusals},
    {"check_print_ops", check_print_ops},
    {NULL, NULL},
};
const unit_fixture unit_fixtures = {setup_tmp, cleanup_tmp};
