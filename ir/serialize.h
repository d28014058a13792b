/*
 * serialize.h — plans as bytes, for compiled artifacts (.dpx) that the runtime loads without
 * the compiler.
 *
 * A plan is written with its graph (the flat arrays as they are: the index-based design makes
 * this a copy), its steps and slots, and for each node the symbol of its compiled kernel and
 * that kernel's trip count. Reading checks every index, count and dtype before anything is
 * used, then runs the verifier on the graph: a truncated or forged artifact is an error, never a
 * crash (tests/fuzz/fuzz_plan.c).
 */
#ifndef DPC_IR_SERIALIZE_H
#define DPC_IR_SERIALIZE_H

#include "ir/plan.h"

/* Per node of a plan's graph: the compiled kernel's symbol ("" when the node has none) and its
 * outer loop's trip count. */
typedef struct dpc_plan_kernel {
  char symbol[32];
  int64_t total;
} dpc_plan_kernel;

/* Append plan (and kernels, one per node of plan->g, or NULL) to out. */
dpc_status dpc_plan_write(const dpc_plan *plan, const dpc_plan_kernel *kernels, dpc_buf *out,
                          dpc_diag *d);

/* Read one plan from buf[*pos..len), advancing *pos. *kernels (malloc'd, one per node) may be
 * NULL when the caller does not want them. `name` is used in messages. */
dpc_status dpc_plan_read(const unsigned char *buf, size_t len, size_t *pos, const char *name,
                         dpc_plan **out, dpc_plan_kernel **kernels, dpc_diag *d);

#endif
