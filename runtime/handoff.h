/*
 * handoff.h — values that cross processes: when a plan's devices run in different processes
 * (dpc_session_opts.peers), a value made on one device and read by a kernel on another is sent
 * by its maker when the maker signals the value's event, and received into the reader's own copy
 * of the value's slot when the reader waits for that event.
 *
 *   dpc_handoff *h;
 *   dpc_handoff_new(plan, self, peers, &h, &d);
 *   dpc_handoff_begin(h);                          // each run
 *   dpc_handoff_signal(h, step, tensors, &d);      // at self's DPC_STEP_SIGNAL
 *   dpc_handoff_wait(h, step, tensors, &d);        // at self's DPC_STEP_WAIT
 *   dpc_handoff_end(h, &d);                        // after the last step: every send taken
 *
 * A reader takes a peer's values in the order the peer sends them (received ahead into their
 * slots when a later one is waited for first), so both sides agree on every message without
 * naming values on the wire. Sends do not wait for the reader (the transport's send_async), so
 * two ranks handing values to each other at once never block each other: a plan whose steps
 * run in-process without deadlock runs so across processes.
 */
#ifndef DPC_RUNTIME_HANDOFF_H
#define DPC_RUNTIME_HANDOFF_H

#include "ir/plan.h"
#include "runtime/transport.h"

typedef struct dpc_handoff dpc_handoff;

/* The handoffs of device `self` of plan over peers (both borrowed; rank k is device k). Fails
 * naming the step when the plan's events do not say which value they carry, or when the
 * transport cannot send without waiting. */
dpc_status dpc_handoff_new(const dpc_plan *plan, uint32_t self, dpc_transport *peers,
                           dpc_handoff **out, dpc_diag *d);
void dpc_handoff_free(dpc_handoff *h);
/* Whether any value crosses to or from self. */
bool dpc_handoff_any(const dpc_handoff *h);
void dpc_handoff_begin(dpc_handoff *h);
/* Step sp (a SIGNAL or a WAIT of self's list); tensors: per value, this process's view of its
 * slot. */
dpc_status dpc_handoff_signal(dpc_handoff *h, const dpc_step *sp, const dpc_tensor *tensors,
                              dpc_diag *d);
dpc_status dpc_handoff_wait(dpc_handoff *h, const dpc_step *sp, const dpc_tensor *tensors,
                            dpc_diag *d);
dpc_status dpc_handoff_end(dpc_handoff *h, dpc_diag *d);

#endif
