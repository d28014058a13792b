/*
 * api_internal.h — what the batcher (batcher.c) needs of api.c's models beyond the public API:
 * the batch sizes of the inference plans, which dpc.h does not list, and the turns a split
 * model's runners take on its devices. Hidden: not exported.
 */
#ifndef DPC_RUNTIME_API_INTERNAL_H
#define DPC_RUNTIME_API_INTERNAL_H

#include <dpc/dpc.h>

#include <pthread.h>
#include <stdbool.h>

/* The rows of each inference plan of m (the --batch plan and every --batch-sizes one), distinct
 * and ascending, at most max of them; returns how many there are (0: no inference plan). */
unsigned dpc_model_infer_rows(const dpc_model *m, int64_t *rows, unsigned max);

/* Whether r's plan passes values from device to device one way only, with no collective (a
 * model split over devices), so runs on several runners may share the devices' turns; and those
 * turns given (dpc_session_set_turns: a mutex per device of the plan, borrowed). */
bool dpc_runner_pipelines(const dpc_runner *r);
unsigned dpc_runner_devices(const dpc_runner *r);
/* The devices of m's inference plan when runs on several runners may share their turns (as
 * dpc_runner_pipelines), else 1: read from the artifact, no session made. */
unsigned dpc_model_pipeline_devices(const dpc_model *m);
void dpc_runner_set_turns(dpc_runner *r, pthread_mutex_t *turns, unsigned n);

#endif
