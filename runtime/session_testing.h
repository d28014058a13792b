/*
 * session_testing.h — hooks that make a session misbehave on purpose, for tests only. A
 * session given none (dpc_session_opts.test NULL, as every production caller leaves it) runs
 * as it would without this header.
 */
#ifndef DPC_RUNTIME_SESSION_TESTING_H
#define DPC_RUNTIME_SESSION_TESTING_H

#include <stdint.h>

typedef struct dpc_session_test_hooks {
  /* device k - 1 stalls instead of running its steps (0: none), to check that the others fail
   * within the timeout instead of hanging */
  uint32_t stall_device;
  /* open the plan's devices as "testmem" (runtime/device.h), whose memory the host cannot
   * address, so that any access around the device's calls fails */
  bool memory;
  /* with memory: the first host_devices devices stay cpu ones, as the host's CPU beside GPUs
   * (dpc_session_opts.host_devices) */
  uint32_t host_devices;
} dpc_session_test_hooks;

#endif
