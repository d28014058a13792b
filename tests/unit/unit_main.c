/*
 * unit_main.c — runs the unit tests of one test file: all of them, or those named as arguments.
 */
#include "tests/unit/unit.h"

int unit_failures;

int main(int argc, char **argv) {
  int total = 0, failed = 0;
  for (const unit_test *t = unit_tests; t->name; t++) {
    bool run = argc < 2;
    for (int i = 1; i < argc; i++) run |= !strcmp(argv[i], t->name);
    if (!run) continue;
    int before = unit_failures;
    t->fn();
    total++;
    bool ok = unit_failures == before;
    failed += !ok;
    printf("%s %s\n", ok ? "ok  " : "FAIL", t->name);
    fflush(stdout);
  }
  if (total == 0) {
    printf("no test matched\n");
    return 1;
  }
  printf("%d of %d tests passed\n", total - failed, total);
  return failed ? 1 : 0;
}
