/*
 * executor.h — one worker thread per device, each running its device's step list at once.
 *
 *   dpc_executor *ex;
 *   dpc_executor_new(n_devs, first_pus, run_device, session, &ex, &d);
 *   dpc_executor_run(ex, &d);     // run_device(session, i, d_i) on every device, concurrently
 *   dpc_executor_free(ex);
 *
 * Device 0 runs on the calling thread, device i > 0 on a worker bound to the device's first
 * core (its kernels then use the device's own thread pool). A run returns when every device has
 * finished; if any failed, the error of the one that failed first (the others usually fail
 * because of it: a peer that never came) is returned.
 */
#ifndef DPC_RUNTIME_EXECUTOR_H
#define DPC_RUNTIME_EXECUTOR_H

#include "ir/base.h"

typedef struct dpc_executor dpc_executor;

typedef dpc_status (*dpc_device_run_fn)(void *ctx, uint32_t dev, dpc_diag *d);

/* first_pu[i]: the OS PU index device i's runner is bound to (NULL: unbound). */
dpc_status dpc_executor_new(uint32_t n_devs, const uint32_t *first_pu, dpc_device_run_fn fn,
                            void *ctx, dpc_executor **out, dpc_diag *d);
void dpc_executor_free(dpc_executor *ex);
dpc_status dpc_executor_run(dpc_executor *ex, dpc_diag *d);

#endif
