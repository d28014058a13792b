/*
 * plan.c — freeing plans. Building them is the partitioner's job.
 */
#include "ir/plan.h"

#include <stdlib.h>

void dpc_plan_free(dpc_plan *p) {
  if (!p) return;
  for (uint32_t i = 0; i < p->n_devs; i++) {
    free(p->devs[i].name);
    free(p->devs[i].steps);
  }
  free(p->devs);
  free(p->slots);
  dpc_graph_free(p->g);
  free(p);
}
