/*
 * api_seed.c — the run seed of <dpc/dpc.h> on an artifact of tests/embed/dropout.graph (a
 * dropout layer that always drops): without a seed the masks are the model's; a seed changes
 * them; the same seed (as an option or set later) repeats them; seed 0 is no seed.
 *
 *   api_seed MODEL.dpx      prints one line per check; exit status 1 on the first that fails
 */
#include <dpc/dpc.h>

#include <stdio.h>
#include <string.h>

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL: " __VA_ARGS__);                                                                \
      printf("\n");                                                                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* One run at step 0 with this seed (set at open, or afterwards with set_later). */
static dpc_status run_with(dpc_model *m, uint64_t seed, int set_later, float *y, char *err) {
  static float x[4 * 64];
  for (int i = 0; i < 4 * 64; i++) x[i] = 1.0f;
  dpc_runner_opts o = {sizeof o, .threads = 1, .seed = set_later ? 0 : seed};
  dpc_runner *r;
  dpc_status st = dpc_runner_open(m, &o, &r, err, 256);
  if (st) return st;
  if (set_later) dpc_runner_set_seed(r, seed);
  dpc_runner_bind(r, "x", x, sizeof x);
  dpc_runner_bind(r, "y", y, 4 * 64 * sizeof *y);
  st = dpc_runner_run(r);
  if (st) snprintf(err, 256, "%s", dpc_runner_error(r));
  dpc_runner_free(r);
  return st;
}

static int dropped(const float *y) {
  int n = 0;
  for (int i = 0; i < 4 * 64; i++) n += y[i] == 0.0f;
  return n;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: api_seed MODEL.dpx\n");
    return 2;
  }
  char err[256];
  dpc_model *m;
  CHECK(!dpc_model_load(argv[1], &m, err, sizeof err), "load: %s", err);
  static float none[256], zero[256], five[256], five_later[256], six[256];
  CHECK(!run_with(m, 0, 0, none, err), "no seed: %s", err);
  CHECK(!run_with(m, 0, 1, zero, err), "seed 0: %s", err);
  CHECK(!run_with(m, 5, 0, five, err), "seed 5: %s", err);
  CHECK(!run_with(m, 5, 1, five_later, err), "seed 5 set later: %s", err);
  CHECK(!run_with(m, 6, 0, six, err), "seed 6: %s", err);
  CHECK(dropped(none) > 64 && dropped(none) < 192, "p=0.5 dropped %d of 256", dropped(none));
  CHECK(!memcmp(none, zero, sizeof none), "seed 0 is not the same as no seed");
  CHECK(memcmp(none, five, sizeof none), "seed 5 gives the model's own masks");
  CHECK(!memcmp(five, five_later, sizeof five), "seed 5 at open and set later differ");
  CHECK(memcmp(five, six, sizeof five), "seeds 5 and 6 give the same masks");
  printf("run seed: none = 0 (%d dropped), 5 != none (%d dropped), 5 at open = 5 set later, "
         "6 != 5\n",
         dropped(none), dropped(five));
  dpc_model_free(m);
  return 0;
}
