/*
 * native.h — the calling convention of a compiled kernel: what a code generator (codegen/cpu)
 * produces and the runtime calls. It sits beside the plan in ir/ because both sides need it and
 * neither may include the other.
 */
#ifndef DPC_IR_NATIVE_H
#define DPC_IR_NATIVE_H

#include <stdbool.h>
#include <stdint.h>

/* A compiled kernel for the host (codegen/cpu, or an artifact's): machine code specialised to
 * one node of one plan, with every shape known. args holds the data pointers of the node's
 * inputs, then of its outputs. It does the iterations [begin, end) of its outermost parallel
 * loop (of `total`), so a device can split the work across its cores. Returns 0, or nonzero when
 * the data is bad (a label out of range, an integer division by zero): the runtime then runs the
 * reference kernel on the same data for the message that names the place. */
typedef int32_t (*dpc_native_fn)(void *const *args, int64_t begin, int64_t end, uint64_t step,
                                 int32_t training);

/* What a compiled kernel handle holds, so code for one kind of device is never run as another's
 * (a GPU function is not a host function pointer). Zero is none, so a zeroed array of handles
 * means "every node on the kernel table". */
typedef enum dpc_kernel_kind {
  DPC_KERNEL_NONE = 0, /* no compiled kernel: the node runs on the kernel table */
  DPC_KERNEL_HOST,     /* host machine code: `fn` */
  DPC_KERNEL_CUDA,     /* GPU code: `handle` is a const dpc_cuda_code * */
  DPC_KERNEL_KIND_COUNT
} dpc_kernel_kind;

/* What a DPC_KERNEL_CUDA handle points to (codegen/cuda/backend.c makes it, runtime/
 * device_cuda.c loads and launches it): one node's kernels as CUBIN for each architecture
 * compiled, and PTX for the driver to compile for any other, launched in order with one
 * argument, the kernels' dpc_kargs block (the node's data pointers, inputs then outputs, and the
 * step). No dynamic shared memory: a kernel's is static. A matmul with a fused epilogue is its
 * GEMM's launches, then the epilogue's: after a GEMM on cuBLAS the launches from `after_gemm`
 * on run (none for a plain matmul), and when cuBLASLt applies the epilogue itself, none. The
 * GEMM's operands are arguments 0 and 1, its result the last. */
/* A matmul cuBLAS can do instead of the generated kernels (the runtime falls back on them
 * where cuBLAS does not load): f32 operands and result, row-major, y[b] (m x n) = op(a[b])
 * op(x1[b]) with op the transpose where ta / tb, for b < batch; a[b] starts stride_a elements
 * after a[0] (0: one matrix for every b), likewise x1; y's matrices lie one after the other.
 * `precision` is how cuBLAS may round the products' inputs: fp32 (none), tf32 or bf16. */
typedef enum dpc_gemm_precision {
  DPC_GEMM_FP32 = 0,
  DPC_GEMM_TF32,
  DPC_GEMM_BF16,
} dpc_gemm_precision;

/* A GEMM's epilogue that cuBLASLt can apply as it stores the result: a bias of n elements added
 * to every row (argument bias_arg), then optionally ReLU. */
typedef enum dpc_gemm_epilogue {
  DPC_GEMM_PLAIN = 0,
  DPC_GEMM_BIAS,
  DPC_GEMM_BIAS_RELU,
} dpc_gemm_epilogue;

typedef struct dpc_cuda_gemm {
  bool on;
  bool ta, tb;
  dpc_gemm_precision precision;
  int32_t m, n, k, batch;
  int64_t stride_a, stride_b;
  dpc_gemm_epilogue epilogue;
  uint32_t bias_arg;
} dpc_cuda_gemm;

#define DPC_CUDA_CODE_ARCHS    4
#define DPC_CUDA_CODE_LAUNCHES 4
typedef struct dpc_cuda_code {
  uint32_t n_cubin;
  struct {
    uint32_t sm; /* 80 for sm_80 */
    const void *data;
    uint64_t size;
  } cubin[DPC_CUDA_CODE_ARCHS];
  const char *ptx; /* NUL-terminated */
  /* Compiled for this mode of dropout and batch_norm; `other` (NULL when the node's code is the
   * same in both) is the code for the other mode, which a run in that mode launches instead. */
  bool training;
  const struct dpc_cuda_code *other;
  uint32_t n_launch, n_args;
  struct {
    char name[64];
    uint32_t grid[3], block[3];
  } launch[DPC_CUDA_CODE_LAUNCHES];
  dpc_cuda_gemm gemm;
  uint32_t after_gemm;
} dpc_cuda_code;

typedef struct dpc_native_kernel {
  dpc_kernel_kind kind;
  dpc_native_fn fn; /* DPC_KERNEL_HOST */
  void *handle;     /* the other kinds: the backend's own handle to its code */
  int64_t total;    /* trip count of the parallel loop */
} dpc_native_kernel;

#endif
