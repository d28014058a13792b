/*
 * init.h — filling params and state from their initializers (zeros, he_normal(seed=1), ...).
 *
 * Values come from the counter-based generator in rng.h, so they are the same on every
 * backend and device, in any order. Without a seed, the seed is a hash of the param's name:
 * renaming or reordering other params never changes a param's initial value.
 */
#ifndef DPC_RUNTIME_INIT_H
#define DPC_RUNTIME_INIT_H

#include "ir/graph.h"
#include "ir/tensor.h"

/* Fill t (shape and dtype of the param/state node's output) from the node's initializer. */
dpc_status dpc_init_fill(const dpc_graph *g, uint32_t node, dpc_tensor *t, dpc_diag *d);

/* The seed a param uses when it names none: FNV-1a of its name. */
uint64_t dpc_init_default_seed(const char *name);

/* Fan-in and fan-out of a weight shape, as PyTorch's nn.init defines them: [in, out] for rank
 * 2 (dpc's matmul weights are x @ w), [out, in, k...] for rank 3 and above (convolutions). */
void dpc_init_fans(const dpc_shape *s, double *fan_in, double *fan_out);

#endif
