/*
 * kernel.h — how the executor calls a kernel, on any backend.
 *
 * A kernel sees the node it implements (op and attributes, read through the graph), its input
 * and output tensors with concrete shapes, and the run's mode. Kernels never allocate in the
 * steady state and never print; they return a status and fill the diag.
 */
#ifndef DPC_RUNTIME_KERNEL_H
#define DPC_RUNTIME_KERNEL_H

#include "ir/graph.h"
#include "runtime/tensor.h"

typedef struct dpc_run_info {
  bool training; /* dropout drops, batch_norm uses batch statistics */
  uint64_t step; /* counts runs of a session from 0; seeds dropout masks */
} dpc_run_info;

typedef struct dpc_kernel_args {
  const dpc_graph *g;
  uint32_t node;
  const dpc_tensor *in;
  uint32_t n_in;
  dpc_tensor *out;
  uint32_t n_out;
  const dpc_run_info *run;
} dpc_kernel_args;

typedef dpc_status (*dpc_kernel_fn)(const dpc_kernel_args *a, dpc_diag *d);

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
  DPC_KERNEL_CUDA, /* a GPU function in `handle` (for the CUDA backend; no device runs it yet) */
  DPC_KERNEL_KIND_COUNT
} dpc_kernel_kind;

typedef struct dpc_native_kernel {
  dpc_kernel_kind kind;
  dpc_native_fn fn; /* DPC_KERNEL_HOST */
  void *handle;     /* the other kinds: the backend's own handle to its code */
  int64_t total;    /* trip count of the parallel loop */
} dpc_native_kernel;

/* "none", "host", "cuda" (for messages). */
const char *dpc_kernel_kind_name(dpc_kernel_kind k);

/* The reference backend: plain C loops for every op, the oracle other backends are tested
 * against. Indexed by op; a test checks every row is filled. */
extern const dpc_kernel_fn dpc_ref_kernels[DPC_OP_COUNT];

/* Whether a node runs in training mode: its `training` attribute if given, else the run's. */
bool dpc_kernel_training(const dpc_kernel_args *a);

#endif
