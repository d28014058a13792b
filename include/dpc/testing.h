/*
 * testing.h — FOR TESTS AND BENCHMARKS ONLY. Not installed, not part of libdpc's API, no
 * promise of stability: hooks that slow or stall part of a training run on purpose, so tests can
 * check what the trainer does with a slow worker or a stalled device, and the benchmarks of
 * docs/strategies.md can measure it. Production callers use dpc_trainer_run (dpc/train.h), which
 * has no hooks; the `dpc` command has no flag for them. The command line's test build,
 * `dpc-testing` (built beside `dpc`, never installed), adds --test-slow-worker through this.
 */
#ifndef DPC_TESTING_H
#define DPC_TESTING_H

#include <dpc/train.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dpc_trainer_test_hooks {
  size_t size;           /* sizeof(dpc_trainer_test_hooks) */
  uint32_t slow_worker;  /* asynchronous worker k - 1 sleeps 20 ms a step (0: none) */
  uint32_t hold_worker;  /* asynchronous worker k - 1 pushes as late as the staleness allows */
  uint32_t stall_device; /* device k - 1 stalls instead of running (0: none): the others time out */
  bool memory;           /* every device is a "testmem" one, whose memory the host cannot address */
} dpc_trainer_test_hooks;

/* dpc_trainer_run with the hooks (NULL: none, which is dpc_trainer_run). */
DPC_COMPILER_API dpc_status dpc_testing_trainer_run(const dpc_net *n, const dpc_trainer_opts *o,
                                                    const dpc_trainer_test_hooks *h,
                                                    dpc_message *m);

#ifdef __cplusplus
}
#endif
#endif
