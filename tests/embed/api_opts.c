/*
 * api_opts.c — the runner options of <dpc/dpc.h> against a training artifact of
 * examples/fashion_mlp.graph (dpc compile --train --batch B): sizes checked, the evaluation
 * plan's loss is the training step's before it steps, the step counter starts where asked, a
 * batch larger than the plan is refused, and failures reach the log callback.
 *
 *   api_opts MODEL.dpx      prints one line per check; exit status 1 on the first that fails
 */
#include <dpc/dpc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void count_log(void *user, const char *msg) {
  (void)msg;
  ++*(int *)user;
}

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL: " __VA_ARGS__);                                                                \
      printf("\n");                                                                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char err[512];
  dpc_model *m;
  CHECK(!dpc_model_load(argv[1], &m, err, sizeof err), "load: %s", err);

  dpc_runner *r = NULL;
  dpc_runner_opts bad = {0};
  CHECK(dpc_runner_open(m, &bad, &r, err, sizeof err) == DPC_ERR_INVALID && !r &&
            strstr(err, "sizeof(dpc_runner_opts)"),
        "options without their size were taken (%s)", err);
  printf("options without a size: refused (%s)\n", err);

  int logged = 0;
  dpc_runner_opts o = {sizeof o,   .mode = DPC_MODE_TRAIN, .threads = 1,
                       .step = 41, .log = count_log,       .log_user = &logged};
  dpc_runner *train, *eval;
  CHECK(!dpc_runner_open(m, &o, &train, err, sizeof err), "train runner: %s", err);
  CHECK(dpc_runner_step(train) == 41, "started at step %llu, not 41",
        (unsigned long long)dpc_runner_step(train));
  dpc_runner_opts oe = {sizeof oe, .mode = DPC_MODE_EVAL, .share = train, .threads = 1};
  CHECK(!dpc_runner_open(m, &oe, &eval, err, sizeof err), "eval runner: %s", err);

  dpc_tensor_info x = {0};
  CHECK(dpc_runner_info(train, DPC_ROLE_INPUT, 0, &x) == DPC_ERR_INVALID,
        "an info without its size was filled");
  x.size = sizeof x;
  CHECK(!dpc_runner_info(train, DPC_ROLE_INPUT, 0, &x) && !strcmp(x.name, "x"), "no input x");
  int64_t batch = x.dims[0];
  int found_loss = 0;
  for (unsigned i = 0; i < dpc_runner_count(eval, DPC_ROLE_OUTPUT); i++) {
    dpc_tensor_info t = {sizeof t};
    dpc_runner_info(eval, DPC_ROLE_OUTPUT, i, &t);
    found_loss |= !strcmp(t.name, "loss") && t.rank == 0;
  }
  CHECK(found_loss, "the evaluation plan has no loss output");

  float *xs = calloc((size_t)(batch * 784), sizeof *xs);
  int32_t *ys = calloc((size_t)batch, sizeof *ys);
  CHECK(xs && ys, "out of memory");
  for (int64_t i = 0; i < batch * 784; i++) xs[i] = (float)((i * 37) % 101) / 101.0f;
  for (int64_t i = 0; i < batch; i++) ys[i] = (int32_t)(i % 10);
  size_t xb = (size_t)(batch * 784) * sizeof *xs, yb = (size_t)batch * sizeof *ys;
  CHECK(!dpc_runner_bind(eval, "x", xs, xb) && !dpc_runner_bind(eval, "y", ys, yb) &&
            !dpc_runner_bind(train, "x", xs, xb) && !dpc_runner_bind(train, "y", ys, yb),
        "bind: %s %s", dpc_runner_error(eval), dpc_runner_error(train));
  float before, stepped, after;
  CHECK(!dpc_runner_run(eval) && !dpc_runner_read(eval, "loss", &before, sizeof before), "eval: %s",
        dpc_runner_error(eval));
  CHECK(!dpc_runner_run(train) && !dpc_runner_read(train, "loss", &stepped, sizeof stepped),
        "train: %s", dpc_runner_error(train));
  CHECK(!dpc_runner_run(eval) && !dpc_runner_read(eval, "loss", &after, sizeof after), "eval: %s",
        dpc_runner_error(eval));
  CHECK(fabsf(before - stepped) <= 1e-5f * fabsf(before) && after < before,
        "eval loss %g, the step's %g, after it %g", before, stepped, after);
  printf("eval plan: loss %.6f before the step (the step's %.6f), %.6f after\n", before, stepped,
         after);
  CHECK(dpc_runner_step(train) == 42, "one run from step 41 left step %llu",
        (unsigned long long)dpc_runner_step(train));
  dpc_runner_set_step(train, 7);
  CHECK(dpc_runner_step(train) == 7, "set_step did not take");
  printf("step: 41 -> 42 after a run, set to 7\n");

  dpc_runner *big = NULL;
  dpc_runner_opts ob = {sizeof ob, .rows = (uint64_t)batch + 1, .log = count_log,
                        .log_user = &logged};
  int before_log = logged;
  CHECK(dpc_runner_open(m, &ob, &big, err, sizeof err) == DPC_ERR_SHAPE && !big,
        "a batch over the plan's was taken");
  CHECK(logged == before_log + 1, "the failure did not reach the log callback");
  printf("rows over the batch: refused (%s), logged\n", err);
  dpc_runner_opts op = {sizeof op, .mode = DPC_MODE_TRAIN, .rows = (uint64_t)batch - 1};
  CHECK(dpc_runner_open(m, &op, &big, err, sizeof err) == DPC_ERR_UNSUPPORTED && !big,
        "a training step took a padded batch");
  printf("a partial batch for the training step: refused (%s)\n", err);

  dpc_runner_free(eval);
  dpc_runner_free(train);
  dpc_model_free(m);
  free(xs);
  free(ys);
  printf("api_opts: ok\n");
  return 0;
}
