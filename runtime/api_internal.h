/*
 * api_internal.h — what the batcher (batcher.c) needs of api.c's models beyond the public API:
 * the batch sizes of the inference plans, which dpc.h does not list. Hidden: not exported.
 */
#ifndef DPC_RUNTIME_API_INTERNAL_H
#define DPC_RUNTIME_API_INTERNAL_H

#include <dpc/dpc.h>

/* The rows of each inference plan of m (the --batch plan and every --batch-sizes one), distinct
 * and ascending, at most max of them; returns how many there are (0: no inference plan). */
unsigned dpc_model_infer_rows(const dpc_model *m, int64_t *rows, unsigned max);

#endif
