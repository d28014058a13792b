/*
 * train_embed.c — an application that trains and runs a dpc model through libdpcrt alone.
 *
 * It loads an artifact made by `dpc compile MODEL.graph --train --batch B -o model.dpx`, makes a
 * training runner and an inference runner that shares its params, trains on a synthetic task
 * (each class is a random prototype vector plus noise; the application owns its data, as a
 * real one would) and reports the accuracy of the shared params on fresh samples.
 *
 *   train_embed model.dpx [steps]
 *
 * The model needs one f32 input [B, D], one i32 label input [B] and an f32 output [B, C] (the
 * logits), like examples/fashion_mlp.graph. Exit status: 0 on success, 1 on any error.
 */
#include <dpc/dpc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A small, seeded generator so every run sees the same data. */
static unsigned long long next_u64(unsigned long long *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}
static float uniform(unsigned long long *s) {
  return (float)(next_u64(s) >> 40) / (float)(1ull << 24);
}

typedef struct task {
  int64_t batch, dim, classes;
  float *protos; /* classes x dim */
  unsigned long long rng;
} task;

/* One batch: label c gets prototype c plus noise as wide as five prototypes' spread. */
static void fill(task *t, float *x, int32_t *y) {
  for (int64_t i = 0; i < t->batch; i++) {
    int32_t c = (int32_t)(next_u64(&t->rng) % (unsigned long long)t->classes);
    y[i] = c;
    for (int64_t j = 0; j < t->dim; j++)
      x[i * t->dim + j] = t->protos[c * t->dim + j] + (uniform(&t->rng) - 0.5f);
  }
}

/* The one tensor of a role with this element type and rank. */
static int find(const dpc_runner *r, dpc_role role, dpc_elem e, unsigned rank,
                dpc_tensor_info *out) {
  for (unsigned i = 0; i < dpc_runner_count(r, role); i++) {
    out->size = sizeof *out;
    dpc_runner_info(r, role, i, out);
    if (out->elem == e && out->rank == rank) return 0;
  }
  return -1;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help")) {
    fprintf(stderr, "usage: %s MODEL.dpx [STEPS]\n", argv[0]);
    return argc < 2;
  }
  int steps = argc > 2 ? atoi(argv[2]) : 300;
  char err[512];
  dpc_model *m = NULL;
  dpc_runner *train = NULL, *infer = NULL;
  float *x = NULL, *logits = NULL;
  int32_t *y = NULL;
  task t = {.rng = 0x9e3779b97f4a7c15ull};
  int rc = 1;

  if (dpc_model_load(argv[1], &m, err, sizeof err)) goto fail;
  printf("model %s (libdpcrt %d.%d.%d)\n", dpc_model_name(m), dpc_version_major(),
         dpc_version_minor(), dpc_version_patch());
  if (dpc_runner_new(m, DPC_MODE_TRAIN, NULL, 0, &train, err, sizeof err)) goto fail;
  if (dpc_runner_new(m, DPC_MODE_INFER, train, 0, &infer, err, sizeof err)) goto fail;

  dpc_tensor_info xi, yi, li;
  if (find(train, DPC_ROLE_INPUT, DPC_ELEM_F32, 2, &xi) ||
      find(train, DPC_ROLE_INPUT, DPC_ELEM_I32, 1, &yi) ||
      find(infer, DPC_ROLE_OUTPUT, DPC_ELEM_F32, 2, &li)) {
    snprintf(err, sizeof err, "the model needs inputs f32[B, D] and i32[B], output f32[B, C]");
    goto fail;
  }
  t.batch = xi.dims[0];
  t.dim = xi.dims[1];
  t.classes = li.dims[1];
  x = malloc(xi.bytes);
  y = malloc(yi.bytes);
  logits = malloc(li.bytes);
  t.protos = malloc((size_t)(t.classes * t.dim) * sizeof *t.protos);
  if (!x || !y || !logits || !t.protos) {
    snprintf(err, sizeof err, "out of memory");
    goto fail;
  }
  for (int64_t i = 0; i < t.classes * t.dim; i++) t.protos[i] = 0.2f * uniform(&t.rng);
  printf("task: %lld classes, %lld features, batch %lld\n", (long long)t.classes, (long long)t.dim,
         (long long)t.batch);

  /* The runners read and write the application's buffers at every run. */
  if (dpc_runner_bind(train, xi.name, x, xi.bytes) ||
      dpc_runner_bind(train, yi.name, y, yi.bytes)) {
    snprintf(err, sizeof err, "%s", dpc_runner_error(train));
    goto fail;
  }
  if (dpc_runner_bind(infer, xi.name, x, xi.bytes) ||
      dpc_runner_bind(infer, li.name, logits, li.bytes)) {
    snprintf(err, sizeof err, "%s", dpc_runner_error(infer));
    goto fail;
  }

  for (int s = 1; s <= steps; s++) {
    fill(&t, x, y);
    if (dpc_runner_run(train)) {
      snprintf(err, sizeof err, "step %d: %s", s, dpc_runner_error(train));
      goto fail;
    }
    float loss;
    if (s % 50 == 0 || s == 1) {
      if (dpc_runner_read(train, "loss", &loss, sizeof loss)) {
        snprintf(err, sizeof err, "%s", dpc_runner_error(train));
        goto fail;
      }
      printf("step %d: loss %.4f\n", s, loss);
    }
  }

  int64_t right = 0, total = 0;
  for (int b = 0; b < 20; b++) {
    fill(&t, x, y);
    if (dpc_runner_run(infer)) {
      snprintf(err, sizeof err, "%s", dpc_runner_error(infer));
      goto fail;
    }
    for (int64_t i = 0; i < t.batch; i++, total++) {
      int64_t best = 0;
      for (int64_t c = 1; c < t.classes; c++)
        if (logits[i * t.classes + c] > logits[i * t.classes + best]) best = c;
      right += best == y[i];
    }
  }
  printf("accuracy %.4f on %lld fresh samples\n", (double)right / (double)total, (long long)total);
  rc = 0;
  goto done;
fail:
  fprintf(stderr, "train_embed: %s\n", err);
done:
  dpc_runner_free(infer);
  dpc_runner_free(train);
  dpc_model_free(m);
  free(x);
  free(y);
  free(logits);
  free(t.protos);
  return rc;
}
