/*
 * exchange.h — the inputs and outputs of an inference plan whose devices run in different
 * processes (a model split over MPI ranks, served from rank 0): the process of device 0 holds the
 * request, so before a run it hands every other device the inputs that device's kernels read,
 * and after the run it takes back the plan's outputs made elsewhere. The values between devices
 * go through the handoff (handoff.h) as in training; this adds the two ends.
 *
 *   dpc_exchange *x;
 *   dpc_exchange_new(plan, self, peers, &x, &d);
 *   dpc_exchange_inputs(x, tensors, &d);    // before self's steps: device 0 sends, others take
 *   ... self's steps ...
 *   dpc_exchange_outputs(x, tensors, &d);   // after: others send what they made, device 0 takes
 *
 * Both sides walk the same lists in the same order (values by id, devices in order), so no
 * message names a value. Devices must be host-visible (the cpu): values are sent from and
 * received into their slots directly.
 */
#ifndef DPC_RUNTIME_EXCHANGE_H
#define DPC_RUNTIME_EXCHANGE_H

#include "ir/plan.h"
#include "runtime/transport.h"

typedef struct dpc_exchange dpc_exchange;

/* The exchange of device `self` of plan over peers (both borrowed; rank k is device k, as the
 * session checked before it opens one). */
dpc_status dpc_exchange_new(const dpc_plan *plan, uint32_t self, dpc_transport *peers,
                            dpc_exchange **out, dpc_diag *d);
void dpc_exchange_free(dpc_exchange *x);
/* tensors: per value, this process's view of its slot. */
dpc_status dpc_exchange_inputs(dpc_exchange *x, const dpc_tensor *tensors, dpc_diag *d);
dpc_status dpc_exchange_outputs(dpc_exchange *x, const dpc_tensor *tensors, dpc_diag *d);
/* The device self first waits for a value from in a run (DPC_NONE: none), so a process can see
 * that value's arrival before it starts (transport ready) instead of waiting inside its turn. */
uint32_t dpc_exchange_first_peer(const dpc_exchange *x);

#endif
