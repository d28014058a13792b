/*
 * cpu.h — the CPU backend: every kernel of a plan compiled to machine code with LLVM.
 *
 *   dpc_cpu_backend *cpu;
 *   dpc_cpu_backend_new(&(dpc_cpu_options){0}, &cpu, &d);        // the host, JIT
 *   dpc_native_kernel *k = calloc(plan->g->n_nodes, sizeof *k);
 *   dpc_cpu_compile_plan(cpu, plan, k, &d);                        // k[node]: kind HOST, fn
 *   dpc_session_new(plan, &(dpc_session_opts){.native = k}, &s, &d);
 *
 * This is the only module that includes LLVM headers. Kernels are cached by their IR: a kernel
 * already compiled (for another plan of the same model, another batch size's tail...) is not
 * compiled again, and compiled kernels are kept on disk for the next run. Nodes whose op has no
 * lowering yet are left to the reference kernels. Front ends reach it through its row of
 * codegen/backend.h ("llvm"); the functions below are for its own tests and benchmarks.
 */
#ifndef DPC_CODEGEN_CPU_CPU_H
#define DPC_CODEGEN_CPU_CPU_H

#include "codegen/backend.h"

/* --cpu, --features, --dump-llvm, the disk cache, compile threads, a stop flag. */
typedef dpc_codegen_options dpc_cpu_options;

typedef struct dpc_cpu_backend dpc_cpu_backend;

/* This backend's row in the table of codegen/backend.h, "llvm" (codegen/cpu/entry.c). */
extern const dpc_codegen_backend dpc_codegen_llvm;

dpc_status dpc_cpu_backend_new(const dpc_cpu_options *o, dpc_cpu_backend **out, dpc_diag *d);
void dpc_cpu_backend_free(dpc_cpu_backend *b);

/* Compile the kernel steps of `plan`: kernels[node] (an array of plan->g->n_nodes, zeroed by the
 * caller) gets the function of each node that has a lowering. The functions live as long as the
 * backend. */
dpc_status dpc_cpu_compile_plan(dpc_cpu_backend *b, const dpc_plan *plan,
                                dpc_native_kernel *kernels, dpc_diag *d);
/* The symbol node's kernel gets (dpc_k and the hash of its IR), as --dump-llvm shows it. */
dpc_status dpc_cpu_kernel_symbol(const dpc_cpu_backend *b, const dpc_graph *g, uint32_t node,
                                 char *out, size_t n, dpc_diag *d);

/* Compile plans ahead of time into an artifact at `path` (a shared library the runtime loads
 * without LLVM: runtime/artifact.h), for the backend's target (--cpu, --features). Links with the
 * system's C compiler driver (`cc`, or $CC). Writes a temporary file beside `path` and renames
 * it into place: on failure an existing `path` is left as it was, and no temporary remains. */
dpc_status dpc_cpu_compile_artifact(dpc_cpu_backend *b, const dpc_aot_plan *plans, uint32_t n,
                                    const char *path, dpc_diag *d);

/* Whether an op has a lowering (the rest run on reference kernels). */
bool dpc_cpu_lowers(dpc_op op);
/* The fusion groups the backend compiles as one kernel (DPC_FUSE_*, for dpc_pass_opts.fuse). */
unsigned dpc_cpu_fusion(void);

/* What the backend targets: "x86-64 znver... +avx512f,...", and the vector width it uses. */
const char *dpc_cpu_target_name(const dpc_cpu_backend *b);
int dpc_cpu_vector_bits(const dpc_cpu_backend *b);

/* Time spent compiling so far, in seconds, and kernels compiled / found in memory. */
void dpc_cpu_stats(const dpc_cpu_backend *b, double *seconds, uint32_t *compiled, uint32_t *cached);
/* Kernels read from the disk cache instead of compiled. */
uint32_t dpc_cpu_disk_hits(const dpc_cpu_backend *b);

#endif
