/*
 * plan_fixture.h — the plans the simulator's tests work on (test_scale.c, test_trace.c): the
 * transformer example's training step, placed and planned as dpc plan does it, with every
 * device at one fixed speed (a machine's calibration would make a test its own).
 */
#ifndef DPC_TESTS_UNIT_PLAN_FIXTURE_H
#define DPC_TESTS_UNIT_PLAN_FIXTURE_H

#include "driver/driver.h"
#include "partitioner/partitioner.h"

/* The fixed speed of every device: 100 GFLOP/s, 20 GB/s. */
dpc_device_speed unit_plan_speed(void);

/* The transformer's training step at `batch` over D devices, as dpc plan makes it: R = D / mp
 * replicas, each placed over its mp devices by METIS (mp 1: plain data parallel; R 1: model
 * parallel, or a pipeline with M micro-batches). *rep (when not NULL) gets the placement's
 * report. NULL, with a failed check, when planning fails. */
dpc_plan *unit_plan_transformer(uint32_t D, uint32_t mp, uint32_t batch, uint32_t M,
                                dpc_pipeline_schedule sched, dpc_place_report *rep);

#endif
