/*
 * emit.c — writing CUDA C text: the prelude, kernel frames, loads and stores of every dtype,
 * element loops and broadcast offsets (see cu.h).
 */
#include "codegen/cuda/cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Written once into every kernel source. Only what both NVRTC (no standard headers) and the
 * host compiler with emu/dpc_cuda_emu.h accept: unions for bit casts, our own infinities. */
const char *const cu_prelude[] = {
    "typedef struct dpc_kargs { void *p[32]; unsigned long long step; } dpc_kargs;\n",
    "struct alignas(16) dpc_f4 { float v[4]; };\n",
    "__device__ __forceinline__ float dpc_u2f(unsigned u) {\n",
    "  union { unsigned u; float f; } c; c.u = u; return c.f; }\n",
    "__device__ __forceinline__ unsigned dpc_f2u(float f) {\n",
    "  union { unsigned u; float f; } c; c.f = f; return c.u; }\n",
    "__device__ __forceinline__ double dpc_u2d(unsigned long long u) {\n",
    "  union { unsigned long long u; double f; } c; c.u = u; return c.f; }\n",
    "#define DPC_INF_F dpc_u2f(0x7f800000u)\n",
    "#define DPC_INF_D dpc_u2d(0x7ff0000000000000ull)\n",
    "#define DPC_NAN_F dpc_u2f(0x7fc00000u)\n",
    "#define DPC_NAN_D dpc_u2d(0x7ff8000000000000ull)\n",
    /* IEEE half, round to nearest even (as ir/types.c) */
    "__device__ __forceinline__ float dpc_h2f(unsigned short h) {\n",
    "  unsigned s = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n",
    "  if (e == 0) { float v = (float)m * (1.0f / 16777216.0f); return s ? -v : v; }\n",
    "  if (e == 31) return dpc_u2f(s | 0x7f800000u | (m << 13));\n",
    "  return dpc_u2f(s | ((e + 112) << 23) | (m << 13)); }\n",
    "__device__ __forceinline__ unsigned short dpc_f2h(float f) {\n",
    "  unsigned u = dpc_f2u(f), a = u & 0x7fffffffu;\n",
    "  unsigned short s = (unsigned short)((u >> 16) & 0x8000u);\n",
    "  if (a >= 0x7f800000u) return (unsigned short)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : "
    "0u));\n",
    "  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);\n", "  if (a < 0x38800000u) {\n",
    "    float v = dpc_u2f(a) * 16777216.0f; unsigned m = (unsigned)v; float r = v - (float)m;\n",
    "    if (r > 0.5f || (r == 0.5f && (m & 1u))) m++;\n",
    "    return (unsigned short)(s | m); }\n",
    "  unsigned e = (a >> 23) - 112, m = a & 0x7fffffu, h = (e << 10) | (m >> 13), r = m & "
    "0x1fffu;\n",
    "  if (r > 0x1000u || (r == 0x1000u && (h & 1u))) h++;\n",
    "  return (unsigned short)(s | h); }\n",
    "__device__ __forceinline__ float dpc_b2f(unsigned short h) { return dpc_u2f((unsigned)h << "
    "16); }\n",
    "__device__ __forceinline__ unsigned short dpc_f2b(float f) {\n",
    "  unsigned u = dpc_f2u(f);\n",
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n",
    "  u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }\n",
    /* float -> integer saturates, NaN gives 0 (as dpc_tstore) */
    "__device__ __forceinline__ int dpc_sat32(double v) {\n",
    "  return !(v == v) ? 0 : v >= 2147483647.0 ? 2147483647 : v <= -2147483648.0 ? (-2147483647 - "
    "1) : (int)v; }\n",
    "__device__ __forceinline__ long long dpc_sat64(double v) {\n",
    "  return !(v == v) ? 0 : v >= 9223372036854775807.0 ? 9223372036854775807ll\n",
    "       : v <= -9223372036854775808.0 ? (-9223372036854775807ll - 1) : (long long)v; }\n",
    /* NaN wins, as ir/scalar.h */
    "template <typename T> __device__ __forceinline__ T dpc_max(T x, T y) {\n",
    "  return x != x ? x : y != y ? y : x >= y ? x : y; }\n",
    "template <typename T> __device__ __forceinline__ T dpc_min(T x, T y) {\n",
    "  return x != x ? x : y != y ? y : x <= y ? x : y; }\n",
    /* Block-wide sum and max: warp shuffles, then one value per warp through shared memory.
     * Every thread of the block must call them (blockDim.x a multiple of 32). */
    "template <typename T> __device__ __forceinline__ T dpc_warp_sum(T v) {\n",
    "  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);\n",
    "  return v; }\n", "template <typename T> __device__ __forceinline__ T dpc_warp_max(T v) {\n",
    "  for (int o = 16; o > 0; o >>= 1) v = dpc_max(v, __shfl_down_sync(0xffffffffu, v, o));\n",
    "  return v; }\n", "template <typename T> __device__ T dpc_block_sum(T v) {\n",
    "  __shared__ T part[32];\n",
    "  unsigned lane = threadIdx.x & 31u, w = threadIdx.x >> 5, nw = (blockDim.x + 31u) >> 5;\n",
    "  v = dpc_warp_sum(v);\n", "  __syncthreads();\n", "  if (lane == 0) part[w] = v;\n",
    "  __syncthreads();\n", "  T r = threadIdx.x < nw ? part[threadIdx.x] : (T)0;\n",
    "  r = dpc_warp_sum(r);\n", "  __syncthreads();\n", "  if (threadIdx.x == 0) part[0] = r;\n",
    "  __syncthreads();\n", "  return part[0]; }\n",
    "template <typename T> __device__ T dpc_block_max(T v, T lowest) {\n",
    "  __shared__ T part[32];\n",
    "  unsigned lane = threadIdx.x & 31u, w = threadIdx.x >> 5, nw = (blockDim.x + 31u) >> 5;\n",
    "  v = dpc_warp_max(v);\n", "  __syncthreads();\n", "  if (lane == 0) part[w] = v;\n",
    "  __syncthreads();\n", "  T r = threadIdx.x < nw ? part[threadIdx.x] : lowest;\n",
    "  r = dpc_warp_max(r);\n", "  __syncthreads();\n", "  if (threadIdx.x == 0) part[0] = r;\n",
    "  __syncthreads();\n", "  return part[0]; }\n",
    /* runtime/rng.h's counter-based generator, the same bits on every device */
    "__device__ __forceinline__ unsigned long long dpc_mix64(unsigned long long x) {\n",
    "  x += 0x9e3779b97f4a7c15ull;\n", "  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;\n",
    "  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;\n", "  return x ^ (x >> 31); }\n",
    "__device__ __forceinline__ double dpc_rng_uniform(unsigned long long seed, unsigned long long "
    "i) {\n",
    "  return (double)(dpc_mix64(dpc_mix64(seed) ^ i) >> 11) * (1.0 / 9007199254740992.0); }\n",
    NULL};

void cu_printf(cu_gen *c, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  dpc_buf_puts(&c->src, line);
}

const char *cu_store_type(dpc_dtype t) {
  switch (t) {
  case DPC_F32: return "float";
  case DPC_F64: return "double";
  case DPC_F16:
  case DPC_BF16: return "unsigned short";
  case DPC_I32: return "int";
  case DPC_I64: return "long long";
  case DPC_BOOL: return "unsigned char";
  default: return "void";
  }
}

const char *cu_calc_type(dpc_dtype t) {
  switch (t) {
  case DPC_F16:
  case DPC_BF16: return "float";
  case DPC_BOOL: return "int";
  default: return cu_store_type(t);
  }
}

cu_expr cu_load(dpc_dtype t, const char *ptr, const char *idx) {
  cu_expr e;
  switch (t) {
  case DPC_F16: snprintf(e.s, sizeof e.s, "dpc_h2f(%s[%s])", ptr, idx); break;
  case DPC_BF16: snprintf(e.s, sizeof e.s, "dpc_b2f(%s[%s])", ptr, idx); break;
  case DPC_BOOL: snprintf(e.s, sizeof e.s, "(int)(%s[%s] != 0)", ptr, idx); break;
  default: snprintf(e.s, sizeof e.s, "%s[%s]", ptr, idx); break;
  }
  return e;
}

void cu_store(cu_gen *c, dpc_dtype t, const char *ptr, const char *idx, const char *value) {
  switch (t) {
  case DPC_F16: cu_printf(c, "    %s[%s] = dpc_f2h((float)(%s));\n", ptr, idx, value); break;
  case DPC_BF16: cu_printf(c, "    %s[%s] = dpc_f2b((float)(%s));\n", ptr, idx, value); break;
  case DPC_BOOL: cu_printf(c, "    %s[%s] = (unsigned char)((%s) != 0);\n", ptr, idx, value); break;
  default: cu_printf(c, "    %s[%s] = (%s)(%s);\n", ptr, idx, cu_store_type(t), value); break;
  }
}

void cu_kernel_begin(cu_gen *c, const char *suffix, uint32_t grid, uint32_t block) {
  dpc_cuda_launch *l = &c->k->launch[c->k->n_launch++];
  DPC_ASSERT(c->k->n_launch <= DPC_CUDA_MAX_LAUNCH);
  snprintf(l->name, sizeof l->name, "%s%s%s", c->base, suffix[0] ? "_" : "", suffix);
  l->grid[0] = grid ? grid : 1, l->grid[1] = l->grid[2] = 1;
  l->block[0] = block, l->block[1] = l->block[2] = 1;
  cu_printf(c, "\nextern \"C\" __global__ void __launch_bounds__(%u) %s(dpc_kargs a) {\n", block,
            l->name);
  uint32_t n_in = c->group_in ? c->n_group_in : c->n->n_in;
  for (uint32_t i = 0; i < n_in; i++) {
    dpc_dtype t = c->group_in ? c->g->values[c->group_in[i]].dtype : cu_in(c, i)->dtype;
    cu_printf(c, "  const %s *x%u = (const %s *)a.p[%u];\n", cu_store_type(t), i, cu_store_type(t),
              i);
  }
  for (uint32_t j = 0; j < c->n->n_out; j++) {
    dpc_dtype t = cu_out(c, j)->dtype;
    cu_printf(c, "  %s *y%u = (%s *)a.p[%u];\n", cu_store_type(t), j, cu_store_type(t),
              (c->out_arg ? c->out_arg : n_in) + j);
  }
  cu_printf(c, "  (void)a;\n");
}

void cu_kernel_end(cu_gen *c) {
  cu_printf(c, "}\n");
}

void cu_elementwise_begin(cu_gen *c, const char *suffix, int64_t n) {
  /* small tensors get a small block: no idle warps, and fewer host threads when emulated */
  int64_t block = n < CU_BLOCK ? ((n + 31) / 32) * 32 : CU_BLOCK;
  if (block < 32) block = 32;
  int64_t grid = (n + block - 1) / block;
  if (grid > 4096) grid = 4096; /* the loop strides over the rest */
  cu_kernel_begin(c, suffix, (uint32_t)grid, (uint32_t)block);
  cu_printf(c,
            "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < %lldll;\n"
            "       i += (long long)gridDim.x * blockDim.x) {\n",
            (long long)n);
}

void cu_elementwise_end(cu_gen *c) {
  cu_printf(c, "  }\n");
  cu_kernel_end(c);
}

void cu_coords(cu_gen *c, const dpc_shape *s, const char *idx, const char *prefix) {
  cu_printf(c, "    long long r%s = %s;\n", prefix, idx);
  for (uint32_t k = s->rank; k-- > 0;) {
    cu_printf(c, "    long long c%s%u = r%s %% %lldll; r%s /= %lldll;\n", prefix, k, prefix,
              (long long)(s->d[k] ? s->d[k] : 1), prefix, (long long)(s->d[k] ? s->d[k] : 1));
  }
  cu_printf(c, "    (void)r%s;\n", prefix);
}

cu_expr cu_bcast_offset(const dpc_shape *in, const dpc_shape *out, const char *prefix) {
  cu_expr e;
  size_t len = (size_t)snprintf(e.s, sizeof e.s, "0");
  int64_t stride = 1;
  for (uint32_t k = in->rank; k-- > 0;) {
    uint32_t ok = k + out->rank - in->rank;
    if (in->d[k] != 1 && len < sizeof e.s)
      len += (size_t)snprintf(e.s + len, sizeof e.s - len, " + c%s%u * %lldll", prefix, ok,
                              (long long)stride);
    stride *= in->d[k];
  }
  return e;
}
