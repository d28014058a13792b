/*
 * onnx.h — ONNX models and tensors in and out of dpc (docs/onnx.md).
 *
 * The importer turns an ONNX ModelProto (opsets 11 to 17; older opsets where an op's meaning
 * did not change) into an ordinary dpc graph: graph inputs become inputs (dynamic dimensions
 * become symbols), float initializers become trainable params holding their values
 * (BatchNormalization's running statistics become state), and every other initializer or
 * Constant becomes a constant. Integer subgraphs that compute shapes (Shape, Gather on shapes,
 * arithmetic feeding Reshape or Slice) are folded while importing. Ops map onto rows of
 * ir/ops.def; ops outside the supported set are all reported at once, each with its node.
 *
 *   dpc_graph *g;
 *   if (dpc_onnx_import_file("model.onnx", &g, &diag)) ...
 */
#ifndef DPC_FRONTEND_ONNX_H
#define DPC_FRONTEND_ONNX_H

#include "ir/graph.h"
#include "ir/tensor.h"

/* Parse an ONNX model from memory; `name` is used in messages. A model that uses something
 * outside what dpc supports (an op, a dtype, a 3-D window) fails with DPC_ERR_UNSUPPORTED and
 * names every such node; anything malformed fails with DPC_ERR_SYNTAX or DPC_ERR_INVALID. */
dpc_status dpc_onnx_import(const char *name, const void *data, size_t len, dpc_graph **out,
                           dpc_diag *d);
dpc_status dpc_onnx_import_file(const char *path, dpc_graph **out, dpc_diag *d);

/* Values known for graph inputs before the run, by position among the graph's inputs
 * (initializers left out): known[k] for input k, a tensor with data NULL when unknown. An op
 * that needs an input as a constant (Reshape's shape, Slice's bounds, axes) reads it from
 * here, because dpc's ops take those as attributes; the input stays an input. `dpc run
 * --inputs` and `dpc onnx-test` pass the data they run with. */
typedef struct dpc_onnx_opts {
  const dpc_tensor *known;
  uint32_t n_known;
  /* A fixed-batch export (torch.onnx.export without dynamic_axes) as one with a dynamic batch:
   * the leading dimension of the first graph input, and of every other input whose leading
   * dimension has the same size, becomes the symbol `batch`, and a Reshape whose constant
   * shape holds that size where its input holds the batch takes the symbol there. A node that
   * fixes the batch some other way fails the import with a message naming it. Models whose
   * first input's leading dimension is already symbolic are imported unchanged. The commands
   * that take --batch (train, bench, plan, compile) ask for this. */
  bool leading_batch;
} dpc_onnx_opts;
dpc_status dpc_onnx_import_opts(const char *name, const void *data, size_t len,
                                const dpc_onnx_opts *o, dpc_graph **out, dpc_diag *d);
dpc_status dpc_onnx_import_file_opts(const char *path, const dpc_onnx_opts *o, dpc_graph **out,
                                     dpc_diag *d);

/* Whether a path names an ONNX model (by its extension, .onnx). */
bool dpc_onnx_is_model_path(const char *path);

/* A TensorProto (.pb file of the ONNX test layout). The data is malloc'd; *name (may be NULL
 * to ignore) is malloc'd too and is "" when the tensor has none. */
dpc_status dpc_onnx_tensor_read(const char *path, dpc_tensor *t, char **name, dpc_diag *d);
dpc_status dpc_onnx_tensor_decode(const void *data, size_t len, dpc_tensor *t, char **name,
                                  dpc_diag *d);
dpc_status dpc_onnx_tensor_write(const char *path, const char *name, const dpc_tensor *t,
                                 dpc_diag *d);

/* The ONNX ops the importer maps, as one space-separated list (for docs and `dpc onnx-test`). */
const char *dpc_onnx_supported_ops(void);

#endif
