/*
 * types.c — dtype names and sizes, half-precision conversions, shape helpers.
 */
#include "ir/types.h"

#include <string.h>

static const struct {
  const char *name;
  size_t size;
} dtypes[DPC_DTYPE_COUNT] = {
    [DPC_F32] = {"f32", 4},   [DPC_F16] = {"f16", 2}, [DPC_BF16] = {"bf16", 2},
    [DPC_F64] = {"f64", 8},   [DPC_I32] = {"i32", 4}, [DPC_I64] = {"i64", 8},
    [DPC_BOOL] = {"bool", 1},
};

const char *dpc_dtype_name(dpc_dtype t) {
  return (unsigned)t < DPC_DTYPE_COUNT ? dtypes[t].name : "?";
}

bool dpc_dtype_parse(const char *s, size_t n, dpc_dtype *out) {
  for (int t = 0; t < DPC_DTYPE_COUNT; t++) {
    if (strlen(dtypes[t].name) == n && memcmp(dtypes[t].name, s, n) == 0) {
      *out = (dpc_dtype)t;
      return true;
    }
  }
  return false;
}

size_t dpc_dtype_size(dpc_dtype t) {
  DPC_ASSERT((unsigned)t < DPC_DTYPE_COUNT);
  return dtypes[t].size;
}

bool dpc_dtype_is_float(dpc_dtype t) {
  return t == DPC_F32 || t == DPC_F16 || t == DPC_BF16 || t == DPC_F64;
}

bool dpc_dtype_is_int(dpc_dtype t) {
  return t == DPC_I32 || t == DPC_I64;
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float dpc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    /* zero or subnormal: value = man * 2^-24 */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t dpc_f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
  if (a < 0x38800000u) {
    /* subnormal half (or zero): round |f| * 2^24 to an integer, ties to even */
    float v = bits_f32(a) * 16777216.0f;
    uint32_t m = (uint32_t)v;
    float rem = v - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
    return (uint16_t)(sign | m);
  }
  uint32_t exp = (a >> 23) - 112, man = a & 0x7fffff;
  uint32_t h = (exp << 10) | (man >> 13), rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* carries into exp correctly */
  return (uint16_t)(sign | h);
}

float dpc_bf16_to_f32(uint16_t h) {
  return bits_f32((uint32_t)h << 16);
}

uint16_t dpc_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

bool dpc_shape_is_concrete(const dpc_shape *s) {
  for (uint32_t i = 0; i < s->rank; i++)
    if (s->d[i] < 0) return false;
  return true;
}

int64_t dpc_shape_numel(const dpc_shape *s) {
  int64_t n = 1;
  for (uint32_t i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

bool dpc_shape_eq(const dpc_shape *a, const dpc_shape *b) {
  if (a->rank != b->rank) return false;
  for (uint32_t i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return false;
  return true;
}

void dpc_shape_strides(const dpc_shape *s, int64_t strides[DPC_MAX_RANK]) {
  int64_t st = 1;
  for (uint32_t i = s->rank; i-- > 0;) {
    strides[i] = st;
    st *= s->d[i];
  }
}

bool dpc_axis_norm(int64_t axis, uint32_t rank, uint32_t *out) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= (int64_t)rank) return false;
  *out = (uint32_t)axis;
  return true;
}
