/*
 * test_plan_api.c — plans, devices and benchmarks through the public libdpc API (<dpc/plan.h>)
 * alone, linked against libdpc as an application is.
 */
#include "tests/unit/unit.h"

#include <dpc/plan.h>

#include <stdio.h>
#include <unistd.h>

static dpc_net *load_mlp(dpc_message *m) {
  dpc_net *net = NULL;
  dpc_status st = dpc_net_load(DPC_SOURCE_DIR "/examples/fashion_mlp.graph", NULL, &net, m);
  CHECK_MSG(st == DPC_OK, "%s", dpc_message_text(m));
  return net;
}

/* The devices of cpu:2 with their calibration (cached for the plans that follow). */
static void devices_describe(void) {
  dpc_message *m = dpc_message_new();
  dpc_devices_report *r = NULL;
  dpc_devices_opts o = {sizeof o};
  CHECK_MSG(dpc_devices_describe("cpu:2", &o, &r, m) == DPC_OK, "%s", dpc_message_text(m));
  if (r) {
    CHECK(r->n == 2 && r->calibrated && r->machine[0]);
    for (uint32_t i = 0; i < r->n; i++) {
      CHECK(r->devices[i].n_cores >= 1 && r->devices[i].pus);
      CHECK(r->gflops[i] > 0 && r->copy_gbs[i * r->n + i] > 0);
    }
    CHECK(!strcmp(r->devices[1].name, "cpu:1"));
  }
  dpc_devices_report_free(r);
  /* a wrong spec is the caller's error, said by meaning */
  r = NULL;
  CHECK(dpc_devices_describe("gpu:3", &o, &r, m) != DPC_OK && !r);
  CHECK(dpc_message_status(m) == DPC_ERR_INVALID || dpc_message_status(m) == DPC_ERR_UNSUPPORTED);
  dpc_message_free(m);
}

/* fashion_mlp data parallel over 2 devices: each device has work and memory, the step a time,
 * and a second plan (the strategy given this time) has the same figures. */
static void plan_data_parallel(void) {
  dpc_message *m = dpc_message_new();
  dpc_net *net = load_mlp(m);
  if (!net) {
    dpc_message_free(m);
    return;
  }
  char json[] = "/tmp/dpc_plan_api_XXXXXX";
  int fd = mkstemp(json);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  dpc_plan_opts o = {sizeof o, .batch = 64, .devices = "cpu:2", .json_path = json};
  dpc_plan_report *a = NULL, *b = NULL;
  CHECK_MSG(dpc_net_plan(net, &o, &a, m) == DPC_OK, "%s", dpc_message_text(m));
  dpc_strategy_args sa;
  dpc_strategy_args_init(&sa);
  sa.text = "data", sa.devices = 2, sa.batch = 64;
  dpc_strategy s;
  CHECK_MSG(dpc_strategy_parse(&sa, &s, NULL, m) == DPC_OK, "%s", dpc_message_text(m));
  o.strategy = &s, o.json_path = NULL;
  CHECK_MSG(dpc_net_plan(net, &o, &b, m) == DPC_OK, "%s", dpc_message_text(m));
  if (a && b) {
    CHECK(a->kind == DPC_STRATEGY_DATA && a->n_devices == 2 && a->batch == 64);
    CHECK(!strcmp(a->devices_spec, "cpu:2"));
    CHECK(a->step_ms > 0 && a->samples_per_s > 0 && a->bytes_moved > 0);
    CHECK(!a->stages && !a->placed && !a->profiled && !a->measured);
    CHECK(b->n_devices == a->n_devices);
    for (uint32_t i = 0; i < a->n_devices && i < b->n_devices; i++) {
      const dpc_plan_report_device *x = &a->devices[i], *y = &b->devices[i];
      CHECK(x->kernels > 0 && x->memory_bytes > 0 && x->compute_ms > 0);
      CHECK(x->collectives > 0); /* the replicas average their gradients */
      CHECK(!strcmp(x->name, y->name));
      CHECK(x->kernels == y->kernels && x->collectives == y->collectives);
      CHECK(x->memory_bytes == y->memory_bytes && x->comm_bytes == y->comm_bytes);
      CHECK(x->compute_ms == y->compute_ms && x->comm_ms == y->comm_ms);
    }
    CHECK(a->step_ms == b->step_ms && a->bytes_moved == b->bytes_moved);
  }
  /* the JSON file asked for holds the same step */
  FILE *f = fopen(json, "r");
  char text[4096] = "";
  if (f) {
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
  }
  char want[64];
  snprintf(want, sizeof want, "\"predicted_step_ms\": %.4f", a ? a->step_ms : -1.0);
  CHECK_MSG(strstr(text, want) != NULL, "%s not in %s", want, text);
  unlink(json);
  dpc_plan_report_free(a);
  dpc_plan_report_free(b);
  dpc_net_free(net);
  dpc_message_free(m);
}

/* A model with nothing to minimize has no training step to plan. */
static void plan_needs_loss(void) {
  dpc_message *m = dpc_message_new();
  char path[] = "/tmp/dpc_plan_api_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) {
    const char *text = "input x: f32[N, 4]\nparam w: f32[4, 2] = ones\ny = matmul(x, w)\n"
                       "output y\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
  }
  dpc_net *net = NULL;
  CHECK_MSG(dpc_net_load(path, NULL, &net, m) == DPC_OK, "%s", dpc_message_text(m));
  if (net) {
    CHECK(!dpc_net_trainable(net));
    dpc_plan_report *r = NULL;
    dpc_plan_opts o = {sizeof o};
    CHECK(dpc_net_plan(net, &o, &r, m) == DPC_ERR_INVALID && !r);
    CHECK(strstr(dpc_message_brief(m), "nothing to minimize") != NULL);
  }
  unlink(path);
  dpc_net_free(net);
  dpc_message_free(m);
}

const unit_test unit_tests[] = {
    {"devices_describe", devices_describe},
    {"plan_data_parallel", plan_data_parallel},
    {"plan_needs_loss", plan_needs_loss},
    {NULL, NULL},
};
