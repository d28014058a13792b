/*
 * overlap.h — a device's communication thread: collectives run beside the device's kernels.
 *
 *   dpc_overlap *o;  dpc_overlap_new(&o, &d);
 *   uint64_t k = dpc_overlap_post(o, reduce, ctx, step);   // returns at once
 *   ... kernels that do not read the result ...
 *   dpc_overlap_wait(o, k, &d);                            // before the first that does
 *
 * Jobs run one at a time in the order posted. A failed job makes every later wait fail with
 * its message (and the jobs after it are skipped); a session that failed is not run again.
 */
#ifndef DPC_RUNTIME_OVERLAP_H
#define DPC_RUNTIME_OVERLAP_H

#include "ir/base.h"

#include <stdint.h>

typedef struct dpc_overlap dpc_overlap;
typedef dpc_status (*dpc_overlap_fn)(void *ctx, uint32_t arg, dpc_diag *d);

dpc_status dpc_overlap_new(dpc_overlap **out, dpc_diag *d);
void dpc_overlap_free(dpc_overlap *o);
/* Queue fn(ctx, arg); returns its number (1, 2, ... over the thread's life). */
uint64_t dpc_overlap_post(dpc_overlap *o, dpc_overlap_fn fn, void *ctx, uint32_t arg);
/* How many jobs were ever posted: the number the next one follows. */
uint64_t dpc_overlap_posted(dpc_overlap *o);
/* Wait until job `seq` (and every one before it) has run. */
dpc_status dpc_overlap_wait(dpc_overlap *o, uint64_t seq, dpc_diag *d);

#endif
