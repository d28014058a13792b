/*
 * cg.h — inside the CPU code generator: how a kernel is written as LLVM IR text.
 *
 * Kernels are generated as textual LLVM IR and parsed with LLVMParseIRInContext: the text is easy
 * to read back (--dump-llvm), and it puts fast-math flags on exactly the instructions that need
 * them. The text spells pointers with their pointee (`float*`), which LLVM 19's parser reads as
 * the opaque `ptr` (loads, stores and GEPs name their element type anyway); intrinsics that take
 * pointers are named with "p0". Every kernel has the signature
 *
 *   i32 @name(i8** noalias %args, i64 %begin, i64 %end, i64 %step, i32 %training)
 *
 * (ir/native.h, dpc_native_fn): args[i] is the data of input i, then of the outputs; the
 * kernel does iterations [begin, end) of its outermost loop. Loop counters and accumulators
 * live in allocas that the O3 pipeline promotes to registers, so the emitters never juggle phi
 * nodes. Nothing here touches the LLVM API itself: only backend.c does.
 */
#ifndef DPC_CODEGEN_CPU_CG_H
#define DPC_CODEGEN_CPU_CG_H

#include "ir/fusion.h"
#include "ir/graph.h"

/* A function being written. Values are numbered: %t<n>. */
typedef struct cg_fn {
  dpc_buf head; /* allocas, kept in the entry block so they can be promoted */
  dpc_buf body;
  uint32_t n_tmp, n_label;
  const dpc_graph *g;
  uint32_t node;
  int vector_bits; /* of the target: 128, 256 or 512 */
  /* The fusion group being compiled, or NULL for one node. With an anchor, `node` is the
   * anchor, and its lowering finds the output at args[grp->n_inputs] (cg_out_arg) and calls
   * cg_epilogue_rows on what it stores. */
  const dpc_group *grp;
  /* cg_parallel_begin: the access group of the parallel nest's loads and stores (0: none) */
  uint32_t par_group;
  uint32_t n_md; /* metadata nodes numbered so far: !1 .. !n_md */
  dpc_buf md;    /* their definitions, written after the function */
} cg_fn;

/* A value in the text: "%t12", or a constant such as "0x3FF0000000000000". */
typedef struct cg_val {
  char s[40];
} cg_val;

void cg_fn_init(cg_fn *f, const dpc_graph *g, uint32_t node, int vector_bits);
void cg_fn_free(cg_fn *f);
/* The whole function: define ... { entry: <allocas> <body> }, appended to out. */
void cg_fn_finish(cg_fn *f, const char *name, dpc_buf *out);

void cg_line(cg_fn *f, const char *fmt, ...) DPC_PRINTF(2, 3);
cg_val cg_tmp(cg_fn *f);
uint32_t cg_label(cg_fn *f);

/* LLVM type a dtype is stored as, and computed as (f16 and bf16 compute in float, bool is i8). */
const char *cg_store_type(dpc_dtype t);
const char *cg_calc_type(dpc_dtype t);
bool cg_is_fp(dpc_dtype t); /* computed with floating-point instructions */

/* Constants in a dtype's calc type. */
cg_val cg_const(dpc_dtype t, double v);
cg_val cg_const_i64(int64_t v);

/* The data pointer of args[i] as a pointer to the stored type. */
cg_val cg_arg_ptr(cg_fn *f, uint32_t i, dpc_dtype t);
/* Load / store element `idx` (an i64 value) of a tensor at `ptr`, converting to / from the
 * calc type. */
cg_val cg_load(cg_fn *f, cg_val ptr, dpc_dtype t, cg_val idx);
void cg_store(cg_fn *f, cg_val ptr, dpc_dtype t, cg_val idx, cg_val v);

/* Make the kernel return nonzero (bad data) when cond (an i1) holds. */
void cg_fail_if(cg_fn *f, cg_val cond);

/* i64 arithmetic helpers. */
cg_val cg_add(cg_fn *f, cg_val a, cg_val b);
cg_val cg_mul(cg_fn *f, cg_val a, cg_val b);

/* One instruction of any type: "r = ins ty a, b" (ins "fadd", "icmp slt", "fcmp olt", ...),
 * "r = select i1 c, ty a, ty b", and "r = ins from v to to" (a cast: "bitcast", "fpext", ...). */
cg_val cg_op2(cg_fn *f, const char *ins, const char *ty, cg_val a, cg_val b);
cg_val cg_sel(cg_fn *f, cg_val c, const char *ty, cg_val a, cg_val b);
cg_val cg_conv(cg_fn *f, const char *ins, const char *from, cg_val v, const char *to);
/* A floating constant of calc type ty ("float" or "double"). */
cg_val cg_fconst(const char *ty, double v);

/* A counted loop: `for (i = lo; i < hi; i++) { ... }`. begin returns the index value and the
 * loop's id, end closes it. Loops nest. */
typedef struct cg_loop {
  uint32_t id;
  cg_val i;
} cg_loop;
cg_loop cg_loop_begin(cg_fn *f, cg_val lo, cg_val hi);
void cg_loop_end(cg_fn *f, cg_loop l);

/* Between these two, every iteration of every loop ended reads and writes elements no other
 * iteration writes (an elementwise nest, in place or not): its loads and stores form one access
 * group and each loop says so (llvm.loop.parallel_accesses). The vectorizer then needs no
 * run-time overlap check, which an update computed in its target's slot (the same elements read
 * and written through two pointers) always failed, leaving every optimizer update scalar. */
void cg_parallel_begin(cg_fn *f);
void cg_parallel_end(cg_fn *f);
/* Append kernel text `text` to a module, its metadata numbers moved past those the module has
 * (*next: the first free one, updated), so that kernels can share a module. */
void cg_append_kernel_text(dpc_buf *out, const char *text, uint32_t *next);

/* A scalar accumulator in an alloca. */
cg_val cg_acc_new(cg_fn *f, const char *type, cg_val init);
cg_val cg_acc_get(cg_fn *f, cg_val acc, const char *type);
void cg_acc_set(cg_fn *f, cg_val acc, const char *type, cg_val v);

/* ---- elementwise helpers (lower_elementwise.c), shared with fused kernels ---------------- */

/* Operands (and the output) a layout handles at most. */
#define CG_MAX_OPERANDS 24
/* Broadcast each of ops[0..n_ops) (the output among them) against shape `out`, then merge
 * dimensions wherever every operand continues contiguously: dims and each operand's element
 * strides (0 along a broadcast dimension) per merged dimension. Returns the merged rank (>= 1). */
uint32_t cg_ew_layout(const dpc_shape *out, const dpc_shape *const *ops, uint32_t n_ops,
                      int64_t *dims, int64_t (*stride)[DPC_MAX_RANK]);
/* One element of elementwise node `node` (DPC_OPF_ELEMWISE), its operands given in their calc
 * types; the result is in the calc type of its output. */
dpc_status cg_ew_element(cg_fn *f, uint32_t node, const cg_val *x, cg_val *out, dpc_diag *d);

/* ---- exp, erf, tanh, log as arithmetic, so loops around them vectorise (lower_math.c) ---- */

/* e^z in ty ("float" or "double"): within a few ulps, NaN kept, 0 and inf where it under- and
 * overflows. */
cg_val cg_exp(cg_fn *f, const char *ty, cg_val z);
/* erf(x), tanh(x) and log(x) of a float: within 2e-7 relative (erf and tanh also absolute). */
cg_val cg_erf(cg_fn *f, cg_val x);
cg_val cg_tanh(cg_fn *f, cg_val x);
cg_val cg_log(cg_fn *f, cg_val x);

/* ---- fusion groups (lower_fused.c) ------------------------------------------------------- */

/* The index in args of node f->node's first output: n_in alone, after the group's inputs in a
 * group. */
uint32_t cg_out_arg(const cg_fn *f);
/* In a group with an anchor: apply the group's elementwise ops in place to the anchor's result,
 * already stored in the output, on rows [lo, hi) and columns [col_lo, col_hi) of the output seen
 * as [P, Q]: P the product of its dimensions 0..axis, Q of the rest (axis < rank - 1). Call it
 * on a block just written, while it is in cache. Without a group it does nothing. */
dpc_status cg_epilogue_block(cg_fn *f, uint32_t axis, cg_val lo, cg_val hi, cg_val col_lo,
                             cg_val col_hi, dpc_diag *d);
/* The same on whole rows. */
dpc_status cg_epilogue_rows(cg_fn *f, uint32_t axis, cg_val lo, cg_val hi, dpc_diag *d);

/* ---- lowering --------------------------------------------------------------------------- */

typedef struct cg_kernel {
  cg_fn *f;
  int64_t total; /* out: trip count of the outermost loop, split across cores */
} cg_kernel;

/* Writes the body of the kernel for node f->node (the function frame is added by the caller). */
typedef dpc_status (*cg_lower_fn)(cg_kernel *k, dpc_diag *d);

/* The lowering of each op, one table per file, each indexed by op (NULL: not that file's);
 * cg_lowering looks an op up in all of them. An op with no lowering anywhere runs on the
 * reference kernel. */
extern const cg_lower_fn cg_elementwise_table[DPC_OP_COUNT]; /* lower_elementwise.c */
extern const cg_lower_fn cg_reduce_table[DPC_OP_COUNT];      /* lower_reduce.c */
extern const cg_lower_fn cg_layout_table[DPC_OP_COUNT];      /* lower_layout.c */
extern const cg_lower_fn cg_matmul_table[DPC_OP_COUNT];      /* lower_matmul.c */
extern const cg_lower_fn cg_window_table[DPC_OP_COUNT];      /* lower_window.c: conv2d */
extern const cg_lower_fn cg_pool_table[DPC_OP_COUNT];        /* lower_pool.c: pools */
extern const cg_lower_fn cg_norm_table[DPC_OP_COUNT];        /* lower_norm.c: batch/layer norm */
cg_lower_fn cg_lowering(dpc_op op);
/* A fusion group's kernel (f->grp set): the anchor's lowering with its epilogue, or one loop
 * nest over the elementwise chain. */
dpc_status cg_lower_group(cg_kernel *k, dpc_diag *d);

#endif
