/*
 * plan.h — what the partitioner hands the runtime: per device, an ordered list of steps, and
 * where every value lives.
 *
 * A plan owns the graph it runs, with every shape concrete. Steps name nodes of that graph.
 * The runtime only reads plans; it never needs the compiler to run one.
 */
#ifndef DPC_IR_PLAN_H
#define DPC_IR_PLAN_H

#include "ir/graph.h"

typedef enum dpc_step_kind {
  DPC_STEP_KERNEL, /* run node `node` */
  DPC_STEP_COPY,   /* copy value `src` into value `dst` (same shape), e.g. a state update */
  DPC_STEP_SEND,   /* later: send value `src` to device `peer` */
  DPC_STEP_RECV,   /* later: receive into value `dst` from device `peer` */
  DPC_STEP_SIGNAL, /* signal event `event`: value `src`, made on this device, is ready */
  DPC_STEP_WAIT    /* wait for event `event`: value `src`, made on device `peer`, is ready */
} dpc_step_kind;

typedef struct dpc_step {
  dpc_step_kind kind;
  uint32_t node;
  uint32_t src, dst;
  uint32_t peer, event;
} dpc_step;

typedef struct dpc_plan_device {
  char *name; /* "cpu:0" */
  dpc_step *steps;
  uint32_t n_steps, cap_steps;
  uint64_t bytes; /* size of the device's one planned buffer */
} dpc_plan_device;

/* Where one value lives: a byte range of a device's buffer. */
typedef struct dpc_slot {
  uint32_t device;
  uint64_t offset, bytes;
} dpc_slot;

typedef struct dpc_plan {
  dpc_graph *g; /* owned; every shape concrete */
  dpc_plan_device *devs;
  uint32_t n_devs;
  dpc_slot *slots; /* one per value of g */
  uint32_t n_events;
  bool training;
} dpc_plan;

void dpc_plan_free(dpc_plan *p);

/* Whether the plan's steps are in an order that runs (plan_check.c): every step reads only
 * values made by earlier steps of its device, received by earlier waits, or sources; every
 * wait's value is handed on by some device, every device a collective connects has one step for
 * it, and the step lists, played with waits and collectives blocking, all reach their ends. Else
 * an error naming the step that reads too early, or the stuck step and the step it waits for. */
dpc_status dpc_plan_check_comm(const dpc_plan *p, dpc_diag *d);

/* Alignment of every slot: a cache line, and enough for any vector load. */
#define DPC_SLOT_ALIGN 64

#endif
