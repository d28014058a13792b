/*
 * unit_main.c — runs the unit tests of one test file: all of them, or those named as arguments,
 * between the file's fixture setup and cleanup when it has them.
 */
#include "tests/unit/unit.h"

int unit_failures;

/* Weak: most test files define no fixture, and then its address is null. */
extern const unit_fixture unit_fixtures __attribute__((weak));

static bool selected(const unit_test *t, int argc, char **argv) {
  bool run = argc < 2;
  for (int i = 1; i < argc; i++) run |= !strcmp(argv[i], t->name);
  return run;
}

int main(int argc, char **argv) {
  int total = 0, failed = 0;
  for (const unit_test *t = unit_tests; t->name; t++) total += selected(t, argc, argv);
  if (total == 0) {
    printf("no test matched\n");
    return 1;
  }
  const unit_fixture *fx = &unit_fixtures;
  if (fx && fx->setup) {
    fx->setup();
    if (unit_failures) {
      printf("FAIL setup: no test run\n");
      return 1;
    }
  }
  for (const unit_test *t = unit_tests; t->name; t++) {
    if (!selected(t, argc, argv)) continue;
    int before = unit_failures;
    t->fn();
    bool ok = unit_failures == before;
    failed += !ok;
    printf("%s %s\n", ok ? "ok  " : "FAIL", t->name);
    fflush(stdout);
  }
  bool clean = true;
  if (fx && fx->cleanup) {
    int before = unit_failures;
    fx->cleanup();
    clean = unit_failures == before;
    if (!clean) printf("FAIL cleanup\n");
  }
  printf("%d of %d tests passed\n", total - failed, total);
  return failed || !clean ? 1 : 0;
}
