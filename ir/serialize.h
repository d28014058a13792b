/*
 * serialize.h — plans as bytes, for compiled artifacts (.dpx) that the runtime loads without
 * the compiler.
 *
 * A plan is written with its graph (the flat arrays as they are: the index-based design makes
 * this a copy), its steps and slots, and for each node the symbol of its compiled kernel and
 * that kernel's trip count. Reading checks every index, count and dtype before anything is
 * used, then runs the verifier on the graph: a truncated or forged artifact is an error, never a
 * crash (tests/fuzz/fuzz_plan.c).
 */
#ifndef DPC_IR_SERIALIZE_H
#define DPC_IR_SERIALIZE_H

#include "ir/native.h"
#include "ir/plan.h"

/* Per node of a plan's graph: the compiled kernel's symbol ("" when the node has none) and its
 * outer loop's trip count. */
typedef struct dpc_plan_kernel {
  char symbol[32];
  int64_t total;
} dpc_plan_kernel;

/* Append plan (and kernels, one per node of plan->g, or NULL) to out. */
dpc_status dpc_plan_write(const dpc_plan *plan, const dpc_plan_kernel *kernels, dpc_buf *out,
                          dpc_diag *d);

/* Read one plan from buf[*pos..len), advancing *pos. *kernels (malloc'd, one per node) may be
 * NULL when the caller does not want them. `name` is used in messages. */
dpc_status dpc_plan_read(const unsigned char *buf, size_t len, size_t *pos, const char *name,
                         dpc_plan **out, dpc_plan_kernel **kernels, dpc_diag *d);

/* An artifact's blob (runtime/artifact.c reads it): "DPCA", the version (1: host code in a shared
 * library, 2: GPU code with its table), the target and the count of plans; then per plan its
 * role ("infer", "train", ...) and dpc_plan_write's bytes. */
void dpc_artifact_blob_begin(dpc_buf *out, uint32_t version, const char *target, uint32_t n_plans);
void dpc_artifact_blob_role(dpc_buf *out, const char *role);

/* GPU code for an artifact: the distinct dpc_cuda_code of its plans (a node's symbol names one
 * by its index, "cuda:N"), each with its CUBINs, PTX, launches and cuBLAS GEMM, `other` written
 * as an index among them. Appended to out. */
dpc_status dpc_cuda_codes_write(const dpc_cuda_code *const *codes, uint32_t n, dpc_buf *out,
                                dpc_diag *d);

/* What dpc_cuda_codes_read makes: the codes, their images in memory of their own (each image
 * malloc'd, so aligned as the driver wants it), freed by dpc_cuda_codes_free. */
typedef struct dpc_cuda_codes {
  dpc_cuda_code *code;
  uint32_t n;
} dpc_cuda_codes;

/* Read a code table from buf[*pos..len), advancing *pos: every count, size and index checked
 * (launches and images within their limits, PTX ending in its NUL, `other` pairs each other's). */
dpc_status dpc_cuda_codes_read(const unsigned char *buf, size_t len, size_t *pos, const char *name,
                               dpc_cuda_codes *out, dpc_diag *d);
void dpc_cuda_codes_free(dpc_cuda_codes *c);

#endif
