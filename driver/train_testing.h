/*
 * train_testing.h — hooks that slow or stall part of a training run on purpose, for tests and
 * the benchmarks of asynchronous training only. dpc_train_opts.test is NULL in production.
 */
#ifndef DPC_TOOLS_TRAIN_TESTING_H
#define DPC_TOOLS_TRAIN_TESTING_H

#include <stdint.h>

typedef struct dpc_train_test_hooks {
  uint32_t stall_device; /* dpc_session_test_hooks.stall_device */
  uint32_t slow_worker;  /* asynchronous worker k - 1 sleeps 20 ms a step (0: none) */
  uint32_t hold_worker;  /* asynchronous worker k - 1 pushes as late as the staleness allows */
  bool memory;           /* dpc_session_test_hooks.memory: every device is a "testmem" one */
} dpc_train_test_hooks;

#endif
