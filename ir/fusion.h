/*
 * fusion.h — reading the fusion groups that passes/fuse.c marks (dpc_node.fused), for the code
 * generator that compiles a group into one kernel and the runtime that calls it.
 *
 * A group is a root node plus the nodes fused into it. At most one member is an anchor (a
 * matmul or conv2d whose result the rest of the group transforms, element by element, before
 * it is stored); all other members and the root are elementwise ops with the root's shape.
 * A group kernel's arguments are the group's inputs from outside, in dpc_group_inputs order,
 * then the root's outputs: with an anchor, its own inputs come first, so the anchor's kernel
 * finds them where an unfused one would.
 */
#ifndef DPC_IR_FUSION_H
#define DPC_IR_FUSION_H

#include "ir/graph.h"

/* What a backend can compile as one kernel; passes/fuse.c forms only those groups. */
enum {
  DPC_FUSE_ELEMWISE = 1, /* chains of elementwise ops */
  DPC_FUSE_EPILOGUE = 2  /* elementwise ops applied to a matmul's or conv2d's result as stored */
};

typedef struct dpc_group {
  uint32_t root;
  uint32_t anchor; /* the non-elementwise member, or DPC_NONE */
  uint32_t *nodes; /* the elementwise members in node order, then the root (not the anchor) */
  uint32_t n_nodes;
  uint32_t *inputs; /* value ids from outside the group, in argument order */
  uint32_t n_inputs;
} dpc_group;

/* The node whose kernel computes node n: its group's root, or n itself. */
static inline uint32_t dpc_group_kernel(const dpc_graph *g, uint32_t n) {
  return g->nodes[n].fused != DPC_NONE ? g->nodes[n].fused : n;
}

/* Whether some node is fused into `node`. */
bool dpc_group_is_root(const dpc_graph *g, uint32_t node);
/* The group rooted at `root` (which may have no members: then it is the node alone). */
dpc_status dpc_group_get(const dpc_graph *g, uint32_t root, dpc_group *out, dpc_diag *d);
void dpc_group_free(dpc_group *grp);

#endif
