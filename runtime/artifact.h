/*
 * artifact.h — loading a compiled artifact (.dpx, made by `dpc compile`): a shared library
 * holding a model's kernels as machine code and its plans as data. No LLVM is involved: the
 * file is checked against the checksum at its end, opened with dlopen, the plans read with
 * ir/serialize.c and checked, and each kernel found by its symbol.
 *
 *   dpc_artifact *a;
 *   dpc_artifact_open("model.dpx", &a, &d);
 *   const dpc_native_kernel *k;
 *   const dpc_plan *p = dpc_artifact_plan(a, "infer", &k);
 *   dpc_session_new(p, &(dpc_session_opts){.native = k}, &s, &d);
 */
#ifndef DPC_RUNTIME_ARTIFACT_H
#define DPC_RUNTIME_ARTIFACT_H

#include "ir/plan.h"
#include "runtime/kernel.h"

typedef struct dpc_artifact dpc_artifact;

/* Open an artifact. Refuses, with a message naming the file, one that does not match its
 * checksum (cut short, damaged, or older than checksums: ir/seal.h) before loading any of it,
 * one whose plans do not read back, and one built for instructions this CPU lacks (AVX-512,
 * AVX2, FMA). */
dpc_status dpc_artifact_open(const char *path, dpc_artifact **out, dpc_diag *d);
/* The plans of an artifact's blob (the dpc_artifact_blob symbol's bytes), nothing loaded and
 * no kernel resolved (their functions NULL): what dpc_artifact_open reads, for tests and the
 * fuzzer. `name` is used in messages. */
dpc_status dpc_artifact_parse(const unsigned char *blob, size_t len, const char *name,
                              dpc_artifact **out, dpc_diag *d);
void dpc_artifact_close(dpc_artifact *a);

/* The plan with this role ("infer", "train", "eval") and its kernels (one per node of its
 * graph), or NULL. */
const dpc_plan *dpc_artifact_plan(const dpc_artifact *a, const char *role,
                                  const dpc_native_kernel **kernels);
/* The role of plan i ("infer", "infer@4", ...), NULL past the last. */
const char *dpc_artifact_role(const dpc_artifact *a, uint32_t i);
/* What it was compiled for: "triple cpu features", or "CUDA sm_80,sm_90 ..." for GPU code. */
const char *dpc_artifact_target(const dpc_artifact *a);
/* The kind of device its kernels run on: "cuda" for GPU code (a session opens cuda:N devices
 * for its plans), NULL for the host's. */
const char *dpc_artifact_device_kind(const dpc_artifact *a);

#endif
