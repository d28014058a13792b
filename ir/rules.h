/*
 * rules.h — shape rules: for each op, the dtypes and shapes of its outputs from those of its
 * inputs and its attributes, or an error that names the node and the shapes that don't fit.
 *
 * Also the geometry helpers that kernels share with the rules (slice bounds, convolution and
 * pooling windows), so a backend can never disagree with shape inference about them.
 */
#ifndef DPC_IR_RULES_H
#define DPC_IR_RULES_H

#include "ir/graph.h"

typedef dpc_status (*dpc_shape_rule)(dpc_graph *g, uint32_t node, dpc_diag *d);

/* Indexed by op; a test checks every row is filled. */
extern const dpc_shape_rule dpc_shape_rules[DPC_OP_COUNT];

/* One axis of a slice, normalised the NumPy/ONNX way: negative indices count from the end,
 * bounds are clamped. Gives the first index and the number of elements taken. */
void dpc_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                    int64_t *count);

/* The window geometry of conv2d and the 2-D pools, NCHW. */
typedef struct dpc_window {
  int64_t n, c, h, w;     /* input */
  int64_t oc, oh, ow;     /* output channels and size */
  int64_t kh, kw;         /* kernel */
  int64_t sh, sw;         /* stride */
  int64_t pt, pl, pb, pr; /* padding: top, left, bottom, right */
  int64_t dh, dw;         /* dilation */
  int64_t groups;         /* conv2d only, 1 otherwise */
} dpc_window;

/* Fill a window from a conv2d or pool node, or from one of their gradient ops, of a graph whose
 * shapes are known. Errors name `node`. */
dpc_status dpc_window_of(const dpc_graph *g, uint32_t node, dpc_window *win, dpc_diag *d);

/* The same from explicit values: the geometry of forward op `kind` (conv2d, max_pool2d or
 * avg_pool2d) applied to input value x and, for conv2d, weight value w (DPC_NONE for pools),
 * with the attributes of `node`, which errors name. */
dpc_status dpc_window_from(const dpc_graph *g, uint32_t node, dpc_op kind, uint32_t x, uint32_t w,
                           dpc_window *win, dpc_diag *d);

/* Padding attribute in any of its forms (p, [ph, pw], [t, l, b, r]) as t, l, b, r. */
bool dpc_pads4(dpc_attrs a, int64_t out[4]);

#endif
