/*
 * grad.h — gradient rules: for each differentiable op, how the gradients of its inputs are
 * built from the gradients of its outputs, as ordinary nodes.
 *
 * A rule gets the node, dy[k] for each output k (DPC_NONE where no gradient reached it) and
 * want[i] saying which inputs need a gradient; it fills dx[i] (DPC_NONE: no gradient). It builds
 * through an emitter whose nodes land on the forward node's device. Gradients of broadcast
 * operands are summed back to the operand's shape by the rule.
 */
#ifndef DPC_PASSES_GRAD_H
#define DPC_PASSES_GRAD_H

#include "passes/emit.h"

typedef struct dpc_grad_args {
  dpc_emit *e;
  uint32_t node;
  const uint32_t *dy; /* per output */
  const bool *want;   /* per input */
  uint32_t *dx;       /* per input, set to DPC_NONE by the caller */
} dpc_grad_args;

typedef void (*dpc_grad_rule)(const dpc_grad_args *a);

/* Indexed by op; every op flagged DPC_OPF_DIFF has a row (unit.grad checks it). */
extern const dpc_grad_rule dpc_grad_rules[DPC_OP_COUNT];

#endif
