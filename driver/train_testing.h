/*
 * train_testing.h — hooks that slow or stall part of a training run on purpose, for tests and
 * the benchmarks of asynchronous training only. Production code calls dpc_train, which has none;
 * tests call dpc_train_hooked, and the command line's test build (dpc-testing) reaches it through
 * include/dpc/testing.h.
 */
#ifndef DPC_TOOLS_TRAIN_TESTING_H
#define DPC_TOOLS_TRAIN_TESTING_H

#include "driver/train.h"

#include <stdint.h>

typedef struct dpc_train_test_hooks {
  uint32_t stall_device; /* dpc_session_test_hooks.stall_device */
  uint32_t slow_worker;  /* asynchronous worker k - 1 sleeps 20 ms a step (0: none) */
  uint32_t hold_worker;  /* asynchronous worker k - 1 pushes as late as the staleness allows */
  bool memory;           /* dpc_session_test_hooks.memory: every device is a "testmem" one */
  uint32_t host_devices; /* with memory: but the first ones, the CPU beside them */
} dpc_train_test_hooks;

/* dpc_train with test hooks (NULL: none, which is dpc_train). */
dpc_status dpc_train_hooked(const dpc_graph *g, const dpc_train_opts *o,
                            const dpc_train_test_hooks *hooks, dpc_diag *d);

#endif
