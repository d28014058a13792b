/*
 * ref_table.c — the reference backend's kernel table, one entry per op in ir/ops.def, and the
 * rule that decides whether a node runs in training mode.
 *
 * Must not hold kernels itself or any mutable state: the table is const and every kernel lives
 * in the ref_*.c file for its family. A missing entry is caught by a test, not at run time.
 */
#include "runtime/ref/ref_internal.h"

const dpc_kernel_fn dpc_ref_kernels[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = dpc_ref_input,
    [DPC_OP_PARAM] = dpc_ref_param,
    [DPC_OP_STATE] = dpc_ref_state,
    [DPC_OP_CONSTANT] = dpc_ref_constant,
    [DPC_OP_ADD] = dpc_ref_add,
    [DPC_OP_SUB] = dpc_ref_sub,
    [DPC_OP_MUL] = dpc_ref_mul,
    [DPC_OP_DIV] = dpc_ref_div,
    [DPC_OP_POW] = dpc_ref_pow,
    [DPC_OP_MAX] = dpc_ref_max,
    [DPC_OP_MIN] = dpc_ref_min,
    [DPC_OP_NEG] = dpc_ref_neg,
    [DPC_OP_ABS] = dpc_ref_abs,
    [DPC_OP_RELU] = dpc_ref_relu,
    [DPC_OP_RELU6] = dpc_ref_relu6,
    [DPC_OP_CLIP] = dpc_ref_clip,
    [DPC_OP_LEAKY_RELU] = dpc_ref_leaky_relu,
    [DPC_OP_GELU] = dpc_ref_gelu,
    [DPC_OP_SIGMOID] = dpc_ref_sigmoid,
    [DPC_OP_TANH] = dpc_ref_tanh,
    [DPC_OP_EXP] = dpc_ref_exp,
    [DPC_OP_LOG] = dpc_ref_log,
    [DPC_OP_SQRT] = dpc_ref_sqrt,
    [DPC_OP_RSQRT] = dpc_ref_rsqrt,
    [DPC_OP_ERF] = dpc_ref_erf,
    [DPC_OP_FLOOR] = dpc_ref_floor,
    [DPC_OP_SIGN] = dpc_ref_sign,
    [DPC_OP_COS] = dpc_ref_cos,
    [DPC_OP_SIN] = dpc_ref_sin,
    [DPC_OP_EQUAL] = dpc_ref_equal,
    [DPC_OP_LESS] = dpc_ref_less,
    [DPC_OP_GREATER] = dpc_ref_greater,
    [DPC_OP_NOT] = dpc_ref_not,
    [DPC_OP_WHERE] = dpc_ref_where,
    [DPC_OP_SOFTMAX] = dpc_ref_softmax,
    [DPC_OP_LOG_SOFTMAX] = dpc_ref_log_softmax,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY] = dpc_ref_softmax_cross_entropy,
    [DPC_OP_MSE] = dpc_ref_mse,
    [DPC_OP_REDUCE_SUM] = dpc_ref_reduce_sum,
    [DPC_OP_REDUCE_MEAN] = dpc_ref_reduce_mean,
    [DPC_OP_REDUCE_MAX] = dpc_ref_reduce_max,
    [DPC_OP_TRANSPOSE] = dpc_ref_transpose,
    [DPC_OP_RESHAPE] = dpc_ref_reshape,
    [DPC_OP_FLATTEN] = dpc_ref_flatten,
    [DPC_OP_CONCAT] = dpc_ref_concat,
    [DPC_OP_SPLIT] = dpc_ref_split,
    [DPC_OP_ALL_REDUCE] = dpc_ref_all_reduce,
    [DPC_OP_SLICE] = dpc_ref_slice,
    [DPC_OP_GATHER] = dpc_ref_gather,
    [DPC_OP_CAST] = dpc_ref_cast,
    [DPC_OP_MATMUL] = dpc_ref_matmul,
    [DPC_OP_CONV2D] = dpc_ref_conv2d,
    [DPC_OP_MAX_POOL2D] = dpc_ref_max_pool2d,
    [DPC_OP_AVG_POOL2D] = dpc_ref_avg_pool2d,
    [DPC_OP_BATCH_NORM] = dpc_ref_batch_norm,
    [DPC_OP_LAYER_NORM] = dpc_ref_layer_norm,
    [DPC_OP_DROPOUT] = dpc_ref_dropout,
    [DPC_OP_SUM_TO] = dpc_ref_sum_to,
    [DPC_OP_EXPAND] = dpc_ref_expand,
    [DPC_OP_ZEROS_LIKE] = dpc_ref_zeros_like,
    [DPC_OP_SOFTMAX_GRAD] = dpc_ref_softmax_grad,
    [DPC_OP_LOG_SOFTMAX_GRAD] = dpc_ref_log_softmax_grad,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY_GRAD] = dpc_ref_softmax_cross_entropy_grad,
    [DPC_OP_SLICE_GRAD] = dpc_ref_slice_grad,
    [DPC_OP_GATHER_GRAD] = dpc_ref_gather_grad,
    [DPC_OP_CONV2D_GRAD_INPUT] = dpc_ref_conv2d_grad_input,
    [DPC_OP_CONV2D_GRAD_WEIGHT] = dpc_ref_conv2d_grad_weight,
    [DPC_OP_MAX_POOL2D_GRAD] = dpc_ref_max_pool2d_grad,
    [DPC_OP_AVG_POOL2D_GRAD] = dpc_ref_avg_pool2d_grad,
    [DPC_OP_BATCH_NORM_GRAD] = dpc_ref_batch_norm_grad,
    [DPC_OP_LAYER_NORM_GRAD] = dpc_ref_layer_norm_grad,
};

bool dpc_kernel_training(const dpc_kernel_args *a) {
  /* A node's own `training` attribute (dropout, batch_norm) pins its mode, e.g. to keep
   * batch_norm in inference mode while fine-tuning; otherwise the run decides. */
  dpc_op op = dpc_ref_op(a);
  dpc_attr_spec spec;
  if (dpc_op_attr_find(op, "training", &spec)) {
    dpc_attrs at = dpc_ref_attrs(a);
    if (dpc_attrs_get(at, "training")) return dpc_attrs_int(at, "training") != 0;
  }
  return a->run && a->run->training;
}
