/*
 * lower_fused.c — a fusion group of elementwise ops (ir/fusion.h, formed by passes/fuse.c with
 * DPC_FUSE_ELEMWISE) as one CUDA kernel: one thread per element of the root's shape reads each
 * input of the group once (broadcast as its shape says), computes the members in node order
 * into locals, and stores the root's value. A chain of k ops then reads and writes memory once
 * where k kernels would each read and write whole tensors.
 *
 * Each member's value is kept in its own dtype's stored form (a one-element local written
 * through cu_store), so a group rounds and saturates exactly where its unfused kernels would:
 * fused and unfused give the same bits. With an f32 root, a thread takes four elements, and the
 * f32 inputs of the root's shape, the anchor's result and the root move 16 bytes at a time
 * (dpc_f4) when their pointers are aligned; broadcast inputs are read element by element.
 *
 * A group with a matmul or conv2d (DPC_FUSE_EPILOGUE) is that op's own kernels, writing its f32
 * result into the root's output, then the epilogue kernel reading it back there, element by
 * element, in place. With cuBLAS the GEMM replaces the first (dpc_cuda_code.after_gemm), and
 * where the epilogue is a bias per column and a ReLU, cuBLASLt applies it as it stores the
 * GEMM's result, and no kernel runs (dpc_cuda_gemm_of).
 */
#include "codegen/cuda/cu.h"
#include "ir/fusion.h"

#include <stdio.h>
#include <string.h>

/* How one element of the group is read and written: its index variable, and in the 16-byte
 * path (vec) lane l of the vectors read before (each input in vin[k], the anchor's result, the
 * root's value). */
typedef struct element_at {
  const char *idx;
  bool vec;
  const bool *vin;
} element_at;

/* Where member `at` of the group finds operand value v: a member before it, the anchor's result
 * in the root's output, or an input. */
static cu_place operand(const dpc_graph *g, const dpc_group *grp, uint32_t at, uint32_t v,
                        const element_at *e) {
  cu_place p;
  if (grp->anchor != DPC_NONE && g->nodes[grp->anchor].out == v) {
    snprintf(p.ptr, sizeof p.ptr, "%s", e->vec ? "va.v" : "y0");
    snprintf(p.idx, sizeof p.idx, "%s", e->vec ? "l" : e->idx);
    return p;
  }
  for (uint32_t m = 0; m < at; m++)
    if (g->nodes[grp->nodes[m]].out == v) {
      snprintf(p.ptr, sizeof p.ptr, "t%u", m);
      snprintf(p.idx, sizeof p.idx, "0");
      return p;
    }
  uint32_t k = 0;
  while (k < grp->n_inputs && grp->inputs[k] != v) k++;
  if (e->vec && e->vin[k]) {
    snprintf(p.ptr, sizeof p.ptr, "v%u.v", k);
    snprintf(p.idx, sizeof p.idx, "l");
  } else {
    snprintf(p.ptr, sizeof p.ptr, "x%u", k);
    snprintf(p.idx, sizeof p.idx, "o%u", k);
  }
  return p;
}

/* One element of the group: the inputs' offsets (coordinates only where one is broadcast), then
 * the members in node order, the root's value stored. */
static dpc_status element_body(cu_gen *c, const dpc_group *grp, const element_at *e, dpc_diag *d) {
  const dpc_graph *g = c->g;
  uint32_t root = c->node;
  const dpc_value *y = cu_out(c, 0);
  bool broadcast = false;
  for (uint32_t k = 0; k < grp->n_inputs; k++)
    broadcast |= !dpc_shape_eq(&g->values[grp->inputs[k]].shape, &y->shape);
  if (broadcast) cu_coords(c, &y->shape, e->idx, "");
  for (uint32_t k = 0; k < grp->n_inputs; k++) {
    if (e->vec && e->vin[k]) continue;
    const dpc_shape *s = &g->values[grp->inputs[k]].shape;
    cu_expr off = cu_bcast_offset(s, &y->shape, "");
    cu_printf(c, "    long long o%u = %s;\n", k, dpc_shape_eq(s, &y->shape) ? e->idx : off.s);
  }
  dpc_status st = DPC_OK;
  for (uint32_t m = 0; m < grp->n_nodes && !st; m++) {
    uint32_t node = grp->nodes[m];
    const dpc_node *n = &g->nodes[node];
    cu_place in[3], out;
    for (uint32_t i = 0; i < n->n_in && i < 3; i++)
      in[i] = operand(g, grp, m, g->ids[n->in + i], e);
    if (node == root) {
      snprintf(out.ptr, sizeof out.ptr, "%s", e->vec ? "ov.v" : "y0");
      snprintf(out.idx, sizeof out.idx, "%s", e->vec ? "l" : e->idx);
    } else {
      snprintf(out.ptr, sizeof out.ptr, "t%u", m);
      snprintf(out.idx, sizeof out.idx, "0");
      cu_printf(c, "    %s t%u[1];\n", cu_store_type(g->values[n->out].dtype), m);
    }
    c->node = node, c->n = n, c->at = dpc_node_attrs(g, node);
    st = cu_elementwise_member(c, in, &out, d);
  }
  c->node = root, c->n = &g->nodes[root], c->at = dpc_node_attrs(g, root);
  return st;
}

/* An f32 root: four elements a thread, the f32 inputs of the root's shape (and the anchor's
 * result) read and the root stored 16 bytes at a time where every such pointer is aligned, the
 * rest element by element; a scalar tail and a scalar fallback for unaligned buffers. */
static dpc_status vector_body(cu_gen *c, const dpc_group *grp, int64_t n, dpc_diag *d) {
  const dpc_graph *g = c->g;
  const dpc_value *y = cu_out(c, 0);
  bool vin[DPC_CUDA_MAX_ARGS] = {false};
  cu_printf(c, "    bool aligned = ((unsigned long long)y0");
  for (uint32_t k = 0; k < grp->n_inputs; k++) {
    const dpc_value *x = &g->values[grp->inputs[k]];
    vin[k] = x->dtype == DPC_F32 && dpc_shape_eq(&x->shape, &y->shape);
    if (vin[k]) cu_printf(c, " | (unsigned long long)x%u", k);
  }
  cu_printf(c, ") %% 16 == 0;\n");
  cu_printf(c, "    if (aligned && i < %lldll) {\n", (long long)(n / 4));
  for (uint32_t k = 0; k < grp->n_inputs; k++)
    if (vin[k]) cu_printf(c, "    dpc_f4 v%u = ((const dpc_f4 *)x%u)[i];\n", k, k);
  if (grp->anchor != DPC_NONE) cu_printf(c, "    dpc_f4 va = ((const dpc_f4 *)y0)[i];\n");
  cu_printf(c, "    dpc_f4 ov;\n    for (int l = 0; l < 4; l++) {\n");
  cu_printf(c, "    long long e = i * 4 + l;\n    (void)e;\n");
  dpc_status st = element_body(c, grp, &(element_at){"e", true, vin}, d);
  if (st) return st;
  cu_printf(c, "    }\n    ((dpc_f4 *)y0)[i] = ov;\n    } else {\n");
  cu_printf(c, "    for (long long e = i * 4; e < i * 4 + 4 && e < %lldll; e++) {\n", (long long)n);
  cu_printf(c, "    if (aligned && e < %lldll) continue;\n", (long long)(n / 4 * 4));
  st = element_body(c, grp, &(element_at){"e", false, vin}, d);
  cu_printf(c, "    }\n    }\n");
  return st;
}

/* The anchor's own kernels, named after it, writing its result where the root's goes; its
 * inputs are the group's first (ir/fusion.h). */
static dpc_status lower_anchor(cu_gen *c, const dpc_group *grp, dpc_diag *d) {
  const dpc_graph *g = c->g;
  uint32_t root = c->node;
  char base[sizeof c->base];
  memcpy(base, c->base, sizeof base);
  snprintf(c->base, sizeof c->base, "dpc_%s_%u", dpc_op_name(g->nodes[grp->anchor].op),
           grp->anchor);
  c->node = grp->anchor, c->n = &g->nodes[grp->anchor], c->at = dpc_node_attrs(g, grp->anchor);
  c->out_arg = grp->n_inputs;
  cu_lower_fn f = cu_lowering(c->n->op);
  dpc_status st =
      f ? f(c, d)
        : dpc_graph_fail_node(g, grp->anchor, d, DPC_ERR_INTERNAL,
                              "CUDA codegen: no kernel for a fused %s", dpc_op_name(c->n->op));
  c->out_arg = 0;
  c->node = root, c->n = &g->nodes[root], c->at = dpc_node_attrs(g, root);
  memcpy(c->base, base, sizeof base);
  c->k->after_gemm = c->k->n_launch;
  return st;
}

dpc_status cu_lower_group(cu_gen *c, dpc_diag *d) {
  const dpc_graph *g = c->g;
  uint32_t root = c->node;
  dpc_group grp;
  dpc_status st = dpc_group_get(g, root, &grp, d);
  if (st) return st;
  if (grp.n_inputs + g->nodes[root].n_out > DPC_CUDA_MAX_ARGS) {
    st = dpc_graph_fail_node(g, root, d, DPC_ERR_INTERNAL,
                             "CUDA codegen: a fusion group with too many inputs");
    dpc_group_free(&grp);
    return st;
  }
  if (grp.anchor != DPC_NONE) st = lower_anchor(c, &grp, d);
  if (st) {
    dpc_group_free(&grp);
    return st;
  }
  c->group_in = grp.inputs;
  c->n_group_in = grp.n_inputs;
  c->k->n_args = grp.n_inputs + g->nodes[root].n_out;
  const dpc_value *y = cu_out(c, 0);
  int64_t n = dpc_shape_numel(&y->shape);
  bool vec = y->dtype == DPC_F32 && n >= 4;
  cu_elementwise_begin(c, "", vec ? (n + 3) / 4 : n);
  st = vec ? vector_body(c, &grp, n, d) : element_body(c, &grp, &(element_at){"i", false, NULL}, d);
  if (!st) cu_elementwise_end(c);
  c->group_in = NULL;
  c->n_group_in = 0;
  dpc_group_free(&grp);
  return st;
}

/* The epilogue cuBLASLt can apply for a group over a GEMM of one m x n matrix: its members an
 * add of the GEMM's result and a bias of n floats (shaped [n] or [1, n]), then at most a ReLU of
 * that sum, the root. */
static dpc_gemm_epilogue lt_epilogue(const dpc_graph *g, const dpc_group *grp,
                                     const dpc_cuda_gemm *gm, uint32_t *bias_arg) {
  if (gm->batch != 1 || grp->n_nodes < 1 || grp->n_nodes > 2) return DPC_GEMM_PLAIN;
  const dpc_node *add = &g->nodes[grp->nodes[0]];
  uint32_t y = g->nodes[grp->anchor].out;
  if (add->op != DPC_OP_ADD || g->values[add->out].shape.rank != 2) return DPC_GEMM_PLAIN;
  uint32_t a = g->ids[add->in], b = g->ids[add->in + 1];
  uint32_t bias = a == y ? b : b == y ? a : DPC_NONE;
  if (bias == DPC_NONE || bias == y) return DPC_GEMM_PLAIN;
  const dpc_value *bv = &g->values[bias];
  bool row = bv->dtype == DPC_F32 && bv->shape.rank >= 1 && bv->shape.rank <= 2 &&
             bv->shape.d[bv->shape.rank - 1] == gm->n && dpc_shape_numel(&bv->shape) == gm->n;
  if (!row) return DPC_GEMM_PLAIN;
  uint32_t k = 0;
  while (k < grp->n_inputs && grp->inputs[k] != bias) k++;
  if (k == grp->n_inputs) return DPC_GEMM_PLAIN;
  *bias_arg = k;
  if (grp->n_nodes == 1) return DPC_GEMM_BIAS;
  const dpc_node *act = &g->nodes[grp->nodes[1]];
  return act->op == DPC_OP_RELU && g->ids[act->in] == add->out ? DPC_GEMM_BIAS_RELU
                                                               : DPC_GEMM_PLAIN;
}

bool dpc_cuda_gemm_of(const dpc_graph *g, uint32_t node, dpc_gemm_precision precision,
                      dpc_cuda_gemm *out) {
  if (!dpc_group_is_root(g, node)) return cu_matmul_gemm(g, node, precision, out);
  memset(out, 0, sizeof *out);
  dpc_group grp;
  dpc_diag d;
  dpc_diag_init(&d);
  bool on = false;
  if (!dpc_group_get(g, node, &grp, &d)) {
    on = grp.anchor != DPC_NONE && cu_matmul_gemm(g, grp.anchor, precision, out);
    if (on) out->epilogue = lt_epilogue(g, &grp, out, &out->bias_arg);
    dpc_group_free(&grp);
  }
  dpc_diag_free(&d);
  return on;
}
