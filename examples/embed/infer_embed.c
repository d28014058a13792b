/*
 * infer_embed.c — an application that serves a dpc model through libdpcrt: inference on its own
 * buffers with no copy, one loaded model shared by runners on several threads, and a cancel
 * flag and a log callback.
 *
 *   infer_embed MODEL.dpx DIR [--devices SPEC] [--rows N]
 *
 * The model needs one f32 input [B, D] and an f32 output [B, C] (an artifact made by `dpc compile
 * examples/fashion_mlp.graph --batch B`). It writes DIR/x.npy (the first batch, for `dpc run`
 * to check against) and DIR/out.raw (the output for it, as raw little-endian floats), and prints
 * one line per check. --rows N runs a partial batch of N rows (N <= B) on the same artifact:
 * the rows past N are zero and their outputs ignored. Exit status: 0 when every check holds.
 */
#include <dpc/dpc.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 20 /* batches each thread serves */

typedef struct app {
  dpc_model *m;
  const char *devices;
  dpc_tensor_info x, y; /* the input and the output */
  int64_t rows;         /* rows given per batch (the rest are zero) */
} app;

/* Batch k's input: a pure function of k, so any thread can make any batch. */
static void make_batch(const app *a, int k, float *x) {
  unsigned long long s =
      0x9e3779b97f4a7c15ull ^ (unsigned long long)(k + 1) * 0xbf58476d1ce4e5b9ull;
  size_t n = a->x.bytes / sizeof *x, given = (size_t)a->rows * (size_t)a->x.dims[1];
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x[i] = i < given ? (float)(s >> 40) / (float)(1ull << 24) : 0.0f;
  }
}

static void *alloc64(size_t bytes) {
  return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static void log_line(void *user, const char *msg) {
  fprintf(stderr, "infer_embed: %s: %s\n", (const char *)user, msg);
}

/* An inference runner of the app's model with the options every runner here shares. */
static dpc_status open_runner(const app *a, const char *who, const int *cancel, dpc_runner **r,
                              char *err, size_t n) {
  dpc_runner_opts o = {
      sizeof o,        .mode = DPC_MODE_INFER,  .threads = 1,     .devices = a->devices,
      .log = log_line, .log_user = (void *)who, .cancel = cancel, .rows = a->rows};
  return dpc_runner_open(a->m, &o, r, err, n);
}

/* Serve batches k = first, first + step, ... < RUNS, each output into out[k]. */
typedef struct job {
  const app *a;
  int first, step;
  float **out;
  char err[256];
  int failed;
} job;

static void *serve(void *arg) {
  job *j = arg;
  const app *a = j->a;
  dpc_runner *r = NULL;
  float *x = alloc64(a->x.bytes), *y = alloc64(a->y.bytes);
  j->failed = 1;
  if (!x || !y) {
    snprintf(j->err, sizeof j->err, "out of memory");
  } else if (!open_runner(a, "worker", NULL, &r, j->err, sizeof j->err)) {
    if (dpc_runner_bind(r, a->x.name, x, a->x.bytes) ||
        dpc_runner_bind(r, a->y.name, y, a->y.bytes))
      snprintf(j->err, sizeof j->err, "%s", dpc_runner_error(r));
    else {
      j->failed = 0;
      for (int k = j->first; k < RUNS && !j->failed; k += j->step) {
        make_batch(a, k, x);
        if (dpc_runner_run(r)) {
          snprintf(j->err, sizeof j->err, "batch %d: %s", k, dpc_runner_error(r));
          j->failed = 1;
        } else {
          memcpy(j->out[k], y, a->y.bytes);
        }
      }
    }
  }
  dpc_runner_free(r);
  free(x);
  free(y);
  return NULL;
}

/* The one tensor of a role that is f32 of rank 2. */
static int find(const dpc_runner *r, dpc_role role, dpc_tensor_info *out) {
  for (unsigned i = 0; i < dpc_runner_count(r, role); i++) {
    out->size = sizeof *out;
    if (!dpc_runner_info(r, role, i, out) && out->elem == DPC_ELEM_F32 && out->rank == 2) return 0;
  }
  return -1;
}

static int write_file(const char *dir, const char *name, const void *head, size_t hlen,
                      const void *data, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int bad = (hlen && fwrite(head, 1, hlen, f) != hlen) || fwrite(data, 1, len, f) != len;
  return fclose(f) || bad ? -1 : 0;
}

/* x as a .npy file (format 1.0; the header padded so the data starts at 64 bytes multiple). */
static int write_npy(const char *dir, const app *a, const float *x) {
  char head[256];
  int n = snprintf(head + 10, sizeof head - 10,
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                   (long long)a->x.dims[0], (long long)a->x.dims[1]);
  size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64;
  memset(head + 10 + n, ' ', total - 10 - (size_t)n);
  head[total - 1] = '\n';
  memcpy(head, "\x93NUMPY\x01\x00", 8);
  head[8] = (char)((total - 10) & 0xff), head[9] = (char)((total - 10) >> 8);
  return write_file(dir, "x.npy", head, total, x, a->x.bytes);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.dpx DIR [--devices SPEC] [--rows N]\n", argv[0]);
    return 1;
  }
  app a = {0};
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--devices")) a.devices = argv[i + 1];
    if (!strcmp(argv[i], "--rows")) a.rows = strtoull(argv[i + 1], NULL, 10);
  }
  char err[512] = "";
  dpc_runner *r = NULL, *copy = NULL, *cancelled = NULL;
  float *x = NULL, *y = NULL, *x_odd = NULL, *y_odd = NULL, **one = NULL, **two = NULL;
  unsigned char *odd = NULL;
  int rc = 1;
  if (dpc_model_load(argv[1], &a.m, err, sizeof err)) goto fail;
  if (open_runner(&a, "main", NULL, &r, err, sizeof err)) goto fail;
  if (find(r, DPC_ROLE_INPUT, &a.x) || find(r, DPC_ROLE_OUTPUT, &a.y)) {
    snprintf(err, sizeof err, "the model needs an input f32[B, D] and an output f32[B, C]");
    goto fail;
  }
  printf("model %s: %s[%lld, %lld] -> %s[%lld, %lld] (libdpcrt %d.%d.%d)\n", dpc_model_name(a.m),
         a.x.name, (long long)a.x.dims[0], (long long)a.x.dims[1], a.y.name, (long long)a.y.dims[0],
         (long long)a.y.dims[1], dpc_version_major(), dpc_version_minor(), dpc_version_patch());

  /* One thread, on 64-byte aligned buffers: the runner uses them as the model's memory. */
  x = alloc64(a.x.bytes), y = alloc64(a.y.bytes);
  odd = malloc(a.x.bytes + a.y.bytes + 8);
  one = calloc(RUNS, sizeof *one), two = calloc(RUNS, sizeof *two);
  if (!x || !y || !odd || !one || !two) goto nomem;
  for (int k = 0; k < RUNS; k++)
    if (!(one[k] = malloc(a.y.bytes)) || !(two[k] = malloc(a.y.bytes))) goto nomem;
  if (dpc_runner_bind(r, a.x.name, x, a.x.bytes) || dpc_runner_bind(r, a.y.name, y, a.y.bytes))
    goto runner_fail;
  printf("in place: %s %s, %s %s\n", a.x.name, dpc_runner_in_place(r, a.x.name) ? "yes" : "no",
         a.y.name, dpc_runner_in_place(r, a.y.name) ? "yes" : "no");
  for (int k = 0; k < RUNS; k++) {
    make_batch(&a, k, x);
    if (dpc_runner_run(r)) goto runner_fail;
    memcpy(one[k], y, a.y.bytes);
  }
  make_batch(&a, 0, x);
  if (write_npy(argv[2], &a, x) || write_file(argv[2], "out.raw", NULL, 0, one[0], a.y.bytes)) {
    snprintf(err, sizeof err, "cannot write into %s", argv[2]);
    goto fail;
  }
  /* No copy: what the runner holds as the output is the caller's buffer itself. */
  if (dpc_runner_in_place(r, a.y.name)) {
    float probe;
    y[0] = 1234.5f;
    if (dpc_runner_read(r, a.y.name, y_odd = malloc(a.y.bytes), a.y.bytes)) goto runner_fail;
    probe = y_odd[0];
    free(y_odd), y_odd = NULL;
    printf("no copy: %s\n", probe == 1234.5f ? "the runner's output is the caller's buffer"
                                             : "FAILED: the runner kept its own copy");
    if (probe != 1234.5f) goto done;
  }

  /* The same model on buffers that are not aligned: copied in and out, the same results. */
  x_odd = (float *)(odd + 4), y_odd = (float *)(odd + 4 + a.x.bytes);
  if (open_runner(&a, "copy", NULL, &copy, err, sizeof err)) goto fail;
  if (dpc_runner_bind(copy, a.x.name, x_odd, a.x.bytes) ||
      dpc_runner_bind(copy, a.y.name, y_odd, a.y.bytes) || dpc_runner_in_place(copy, a.x.name)) {
    snprintf(err, sizeof err, "copy runner: %s", dpc_runner_error(copy));
    goto fail;
  }
  int same = 1;
  for (int k = 0; k < RUNS; k++) {
    make_batch(&a, k, x_odd);
    if (dpc_runner_run(copy)) {
      snprintf(err, sizeof err, "%s", dpc_runner_error(copy));
      goto fail;
    }
    same &= !memcmp(y_odd, one[k], a.y.bytes);
  }
  printf("copied buffers: %s\n", same ? "the same outputs" : "FAILED: different outputs");
  y_odd = x_odd = NULL;
  if (!same) goto done;

  /* Two threads, each with its own runner on the one loaded model. */
  job jobs[2] = {{&a, 0, 2, two, "", 0}, {&a, 1, 2, two, "", 0}};
  pthread_t th[2];
  for (int t = 0; t < 2; t++)
    if (pthread_create(&th[t], NULL, serve, &jobs[t])) {
      snprintf(err, sizeof err, "cannot start a thread");
      goto fail;
    }
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < 2; t++)
    if (jobs[t].failed) {
      snprintf(err, sizeof err, "thread %d: %s", t, jobs[t].err);
      goto fail;
    }
  same = 1;
  for (int k = 0; k < RUNS; k++) same &= !memcmp(one[k], two[k], a.y.bytes);
  printf("two threads: %s\n", same ? "the same outputs as one thread" : "FAILED: outputs differ");
  if (!same) goto done;

  /* A cancelled runner refuses to run and says so, through the status and the log. */
  int stop = 1;
  if (open_runner(&a, "cancelled", &stop, &cancelled, err, sizeof err)) goto fail;
  dpc_runner_bind(cancelled, a.x.name, x, a.x.bytes);
  dpc_status st = dpc_runner_run(cancelled);
  printf("cancel: %s (%s)\n", st == DPC_ERR_RUNTIME ? "refused" : "FAILED: ran",
         dpc_runner_error(cancelled));
  if (st != DPC_ERR_RUNTIME) goto done;
  rc = 0;
  goto done;
nomem:
  snprintf(err, sizeof err, "out of memory");
  goto fail;
runner_fail:
  snprintf(err, sizeof err, "%s", dpc_runner_error(r));
fail:
  fprintf(stderr, "infer_embed: %s\n", err);
done:
  dpc_runner_free(cancelled);
  dpc_runner_free(copy);
  dpc_runner_free(r);
  dpc_model_free(a.m);
  for (int k = 0; k < RUNS && one && two; k++) free(one[k]), free(two[k]);
  free(one), free(two), free(x), free(y), free(odd);
  return rc;
}
