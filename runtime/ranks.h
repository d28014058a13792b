/*
 * ranks.h — a model split over devices that are processes (MPI ranks), served from the process
 * of device 0: what `dpc_ranks` (include/dpc/dpc.h) is, and the few words device 0's process
 * says to the others before each run.
 *
 * Each instance of the batcher is a lane: a transport of its own over every rank (its own
 * communicator), so the lanes' messages never meet and the instances run side by side. On device
 * 0's process an instance's run first tells every other rank "run the plan of R rows", then runs
 * device 0's steps; on the others the same instance waits for that word with no deadline (a
 * server may be idle for hours) and runs its own device's steps of that plan. "Stop" ends the
 * other ranks' instances when device 0's batcher closes.
 *
 * libdpc (driver/serve_ranks.c) opens the transports, over MPI; libdpcrt only calls them
 * through the transport's vtable, so it links no MPI.
 */
#ifndef DPC_RUNTIME_RANKS_H
#define DPC_RUNTIME_RANKS_H

#include "runtime/transport.h"

#include <stdbool.h>

struct dpc_ranks {
  dpc_transport *t; /* one rank per device of the model's plans; borrowed */
  uint32_t self;    /* this process's rank: its device */
};

typedef enum dpc_ranks_word { DPC_RANKS_STOP = 1, DPC_RANKS_RUN = 2 } dpc_ranks_word;

/* Device 0's process: every other rank hears `word` (and the plan's rows, for a run). */
dpc_status dpc_ranks_tell(const struct dpc_ranks *r, dpc_ranks_word word, uint64_t rows,
                          dpc_diag *d);
/* Device 0's process, closing: every lane's other ranks hear "stop", on all n lanes whatever
 * fails (a rank gone is mpirun's to report); the first failure is returned. */
dpc_status dpc_ranks_stop_all(const struct dpc_ranks *const *lanes, unsigned n, dpc_diag *d);
/* Until the message from `peer` that rank's next recv from it would take is visible (true) or
 * timeout_s passes (false; 0: no deadline): yielding for the first millisecond, a busy peer's
 * message being that close, then napping nap_us between probes, so an idle wait costs a probe
 * now and then, not a core. The transport must have the ready op. */
bool dpc_ranks_await(dpc_transport *t, uint32_t rank, uint32_t peer, double timeout_s, long nap_us);
/* Any other process: the next word from device 0's, waited for without a deadline. */
dpc_status dpc_ranks_hear(const struct dpc_ranks *r, dpc_ranks_word *word, uint64_t *rows,
                          dpc_diag *d);

#endif
