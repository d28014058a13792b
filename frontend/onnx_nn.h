/*
 * onnx_nn.h — importers of the ONNX ops that are a net's layers (onnx_nn.c, onnx_lstm.c,
 * onnx_resize.c).
 */
#ifndef DPC_FRONTEND_ONNX_NN_H
#define DPC_FRONTEND_ONNX_NN_H

#include "frontend/onnx_internal.h"

dpc_status dpc_onnx_imp_conv(onnx_ctx *c);
dpc_status dpc_onnx_imp_conv_transpose(onnx_ctx *c);
dpc_status dpc_onnx_imp_max_pool(onnx_ctx *c);
dpc_status dpc_onnx_imp_avg_pool(onnx_ctx *c);
dpc_status dpc_onnx_imp_global_avg_pool(onnx_ctx *c);
dpc_status dpc_onnx_imp_global_max_pool(onnx_ctx *c);
dpc_status dpc_onnx_imp_batch_norm(onnx_ctx *c);
dpc_status dpc_onnx_imp_layer_norm(onnx_ctx *c);
dpc_status dpc_onnx_imp_gemm(onnx_ctx *c);
dpc_status dpc_onnx_imp_matmul(onnx_ctx *c);
dpc_status dpc_onnx_imp_dropout(onnx_ctx *c);
dpc_status dpc_onnx_imp_lstm(onnx_ctx *c);
dpc_status dpc_onnx_imp_resize(onnx_ctx *c); /* and Upsample */

#endif
