/*
 * types.h — element types and shapes.
 *
 * A shape is a rank and up to DPC_MAX_RANK dimensions. A dimension is a constant (>= 0) or a
 * named symbol such as the batch size N; symbols are numbered per graph and written with
 * DPC_DIM_SYM. A rank above DPC_MAX_RANK is a user error ("rank 9 is above dpc's limit of 8"),
 * not an abort.
 */
#ifndef DPC_IR_TYPES_H
#define DPC_IR_TYPES_H

#include "ir/base.h"

typedef enum dpc_dtype {
  DPC_F32,
  DPC_F16,
  DPC_BF16,
  DPC_F64,
  DPC_I32,
  DPC_I64,
  DPC_BOOL,
  DPC_DTYPE_COUNT
} dpc_dtype;

/* "f32", "f16", ...; the spelling used in .graph files. */
const char *dpc_dtype_name(dpc_dtype t);
/* Parse a dtype name; returns false for anything else. */
bool dpc_dtype_parse(const char *s, size_t n, dpc_dtype *out);
size_t dpc_dtype_size(dpc_dtype t);
bool dpc_dtype_is_float(dpc_dtype t);
bool dpc_dtype_is_int(dpc_dtype t); /* i32, i64 (bool is neither) */

/* IEEE half and bfloat16 conversions, round to nearest even. */
float dpc_f16_to_f32(uint16_t h);
uint16_t dpc_f32_to_f16(float f);
float dpc_bf16_to_f32(uint16_t h);
uint16_t dpc_f32_to_bf16(float f);

#define DPC_MAX_RANK 8

/* Dimension encoding: >= 0 constant; -1 "infer me" (only in reshape's shape attribute);
 * <= -2 symbol number (-d - 2). */
#define DPC_DIM_INFER     (-1)
#define DPC_DIM_SYM(k)    (-(int64_t)(k)-2)
#define DPC_DIM_IS_SYM(d) ((d) <= -2)
#define DPC_DIM_SYM_NO(d) ((uint32_t)(-((d) + 2))) /* d + 2 first: no overflow at INT64_MIN */

typedef struct dpc_shape {
  uint32_t rank;
  int64_t d[DPC_MAX_RANK];
} dpc_shape;

/* True when no dimension is symbolic. */
bool dpc_shape_is_concrete(const dpc_shape *s);
/* Product of the dimensions; only meaningful for concrete shapes. */
int64_t dpc_shape_numel(const dpc_shape *s);
bool dpc_shape_eq(const dpc_shape *a, const dpc_shape *b);
/* Row-major strides in elements. */
void dpc_shape_strides(const dpc_shape *s, int64_t strides[DPC_MAX_RANK]);
/* Normalise a possibly negative axis against rank; false when out of range. */
bool dpc_axis_norm(int64_t axis, uint32_t rank, uint32_t *out);

#endif
