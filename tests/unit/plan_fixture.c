/*
 * plan_fixture.c — the transformer plans of the simulator's tests (plan_fixture.h).
 */
#include "plan_fixture.h"
#include "passes/pass.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpc_device_speed unit_plan_speed(void) {
  return (dpc_device_speed){.gflops = 100, .mem_gbs = 20};
}

dpc_plan *unit_plan_transformer(uint32_t D, uint32_t mp, uint32_t batch, uint32_t M,
                                dpc_pipeline_schedule sched, dpc_place_report *rep) {
  dpc_diag d;
  dpc_diag_init(&d);
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/transformer_block.graph", DPC_SOURCE_DIR);
  dpc_graph *g = NULL;
  dpc_plan *p = NULL;
  uint32_t R = D / mp;
  dpc_place_report own;
  if (!rep) rep = &own;
  dpc_device_speed *speed = calloc(mp, sizeof *speed);
  CHECK_MSG(dpc_driver_load(path, &g, &d) == DPC_OK && speed, "%s", d.msg);
  for (uint32_t k = 0; speed && k < mp; k++) speed[k] = unit_plan_speed();
  dpc_status st = g && speed ? DPC_OK : DPC_ERR_NOMEM;
  memset(rep, 0, sizeof *rep);
  if (!st && mp > 1) {
    dpc_driver_place_opts po = {0, NULL, M, sched};
    st = dpc_driver_place_on(g, batch / R, mp, speed, &po, rep, &d);
  }
  dpc_pass_opts po = {.training = true, .fuse = DPC_FUSE_ELEMWISE | DPC_FUSE_EPILOGUE};
  if (!st) st = dpc_driver_default_horizon(g, &d);
  if (!st) st = dpc_passes_run(g, &po, &d);
  dpc_driver_strategy ds = {R, mp, M, sched, false};
  if (!st) st = dpc_driver_plan_share(g, batch, batch / R, &ds, true, &p, &d);
  CHECK_MSG(st == DPC_OK, "%u devices, %u per replica: %s", D, mp, d.msg);
  dpc_graph_free(g);
  free(speed);
  dpc_diag_free(&d);
  return p;
}
