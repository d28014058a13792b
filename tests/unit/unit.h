/*
 * unit.h — a very small unit-test harness.
 *
 * Each test file defines `const unit_test unit_tests[]` ending with {NULL, NULL}; unit_main.c
 * runs them all (or the ones named on the command line) and prints one line per test. CHECK
 * records a failure and carries on, so one run shows every broken expectation.
 *
 * A test file whose tests share a fixture (a temporary folder) also defines
 * `const unit_fixture unit_fixtures = {setup, cleanup};`: setup runs before the first selected
 * test and cleanup after the last, however the tests are selected. A CHECK failing in setup
 * stops the binary before any test runs.
 */
#ifndef DPC_TESTS_UNIT_H
#define DPC_TESTS_UNIT_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct unit_test {
  const char *name;
  void (*fn)(void);
} unit_test;

typedef struct unit_fixture {
  void (*setup)(void);
  void (*cleanup)(void);
} unit_fixture;

extern const unit_test unit_tests[];
extern int unit_failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("    %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                          \
      unit_failures++;                                                                             \
    }                                                                                              \
  } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("    %s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                          \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      unit_failures++;                                                                             \
    }                                                                                              \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
  do {                                                                                             \
    double a_ = (a), b_ = (b);                                                                     \
    if (!(fabs(a_ - b_) <= (tol))) {                                                               \
      printf("    %s:%d: CHECK_NEAR failed: %s = %.10g, %s = %.10g\n", __FILE__, __LINE__, #a, a_, \
             #b, b_);                                                                              \
      unit_failures++;                                                                             \
    }                                                                                              \
  } while (0)

/* The per-step losses of a `dpc train --log` file (its "step" lines), at most max; how many. */
static inline int unit_read_losses(const char *path, double *out, int max) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof line, f) && n < max) {
    const char *p = strstr(line, "\"loss\": ");
    if (strncmp(line, "{\"step\"", 7) || !p) continue;
    out[n++] = strtod(p + 8, NULL);
  }
  fclose(f);
  return n;
}

#endif
