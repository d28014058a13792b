/*
 * cu.h — inside the CUDA code generator: how a kernel's text is written (emit.c) and the
 * lowering tables each family of ops fills (lower_*.c).
 *
 * Conventions of the generated text: input i is `x<i>`, output j is `y<j>`, each a typed
 * pointer taken from the argument block; f16 and bf16 are stored as unsigned short and computed
 * in float through the prelude's conversions (no cuda_fp16.h, so the host compiler needs no
 * CUDA header either); f32 computes in float, f64 in double, integers in their own width with
 * wrap-around done in unsigned arithmetic.
 */
#ifndef DPC_CODEGEN_CUDA_CU_H
#define DPC_CODEGEN_CUDA_CU_H

#include "codegen/cuda/cuda.h"

#include <stdarg.h>

/* Threads of a block for one-thread-per-element kernels, and for row reductions. */
#define CU_BLOCK     256
#define CU_RED_BLOCK 128

typedef struct cu_gen {
  const dpc_graph *g;
  uint32_t node;
  const dpc_node *n;
  dpc_attrs at;
  bool training;
  dpc_buf src;
  dpc_cuda_kernel *k;
  char base[48]; /* kernel names start with it */
  /* a fusion group's kernel: its inputs from outside (value ids, x<k>), then the root's
   * outputs; NULL for one node's kernel, whose inputs are the node's */
  const uint32_t *group_in;
  uint32_t n_group_in;
  /* a fused matmul's or conv2d's own kernel: where its output y0 is in the argument block (the
   * group root's output, after the group's inputs); 0 for the usual place, after the inputs */
  uint32_t out_arg;
} cu_gen;

static inline const dpc_value *cu_in(const cu_gen *c, uint32_t i) {
  return dpc_node_input(c->g, c->n, i);
}
static inline const dpc_value *cu_out(const cu_gen *c, uint32_t i) {
  return &c->g->values[c->n->out + i];
}

void cu_printf(cu_gen *c, const char *fmt, ...) DPC_PRINTF(2, 3);

const char *cu_store_type(dpc_dtype t);
const char *cu_calc_type(dpc_dtype t);

/* An element read as its calc type: "dpc_h2f(x0[i])". */
typedef struct cu_expr {
  char s[512];
} cu_expr;
cu_expr cu_load(dpc_dtype t, const char *ptr, const char *idx);
/* `ptr[idx] = value;` with the conversion from the calc type (saturating into integers). */
void cu_store(cu_gen *c, dpc_dtype t, const char *ptr, const char *idx, const char *value);

/* Start kernel `<base>_<suffix>`: its signature and the pointers x<i>, y<j>; it is launched
 * with grid x block threads (one dimension each). */
void cu_kernel_begin(cu_gen *c, const char *suffix, uint32_t grid, uint32_t block);
void cu_kernel_end(cu_gen *c);

/* A one-thread-per-element kernel over n elements (grid-stride loop, index `i`). */
void cu_elementwise_begin(cu_gen *c, const char *suffix, int64_t n);
void cu_elementwise_end(cu_gen *c);
/* Declares long long c<prefix><k> = coordinate k of row-major index `idx` in shape s. */
void cu_coords(cu_gen *c, const dpc_shape *s, const char *idx, const char *prefix);
/* The offset in a tensor shaped `in`, broadcast against `out`, at coordinates c<prefix><k>. */
cu_expr cu_bcast_offset(const dpc_shape *in, const dpc_shape *out, const char *prefix);

/* Where a fused member reads an operand or writes its value: `ptr[idx]`, an input of the group
 * (x<k>[o<k>]), a member's value held in a one-element local (t<m>[0]), or the root's output. */
typedef struct cu_place {
  char ptr[16], idx[16];
} cu_place;
/* The statement computing elementwise node c->node (an ELEMWISE op of ir/ops.def) from its
 * operands at `in` into `out`, stored in its dtype so that every rounding and saturation is an
 * unfused kernel's (lower_elementwise.c). */
dpc_status cu_elementwise_member(cu_gen *c, const cu_place *in, const cu_place *out, dpc_diag *d);
/* The GEMM of matmul `node` alone (dpc_cuda_gemm_of without its fusion group; lower_dense.c). */
bool cu_matmul_gemm(const dpc_graph *g, uint32_t node, dpc_gemm_precision precision,
                    dpc_cuda_gemm *out);
/* The fusion group rooted at c->node as one kernel (lower_fused.c). */
dpc_status cu_lower_group(cu_gen *c, dpc_diag *d);

/* One per lowering file, indexed by op (NULL: not that file's). */
typedef dpc_status (*cu_lower_fn)(cu_gen *c, dpc_diag *d);
/* The lowering of op, from whichever table has it (lower.c); NULL when none does. */
cu_lower_fn cu_lowering(dpc_op op);
extern const cu_lower_fn cu_elementwise_table[DPC_OP_COUNT]; /* lower_elementwise.c */
extern const cu_lower_fn cu_reduce_table[DPC_OP_COUNT];      /* lower_reduce.c */
extern const cu_lower_fn cu_layout_table[DPC_OP_COUNT];      /* lower_layout.c */
extern const cu_lower_fn cu_dense_table[DPC_OP_COUNT];       /* lower_dense.c */

/* The prelude every source starts with: the argument block, conversions, block reductions. */
extern const char *const cu_prelude[]; /* lines, NULL-terminated */

#endif
