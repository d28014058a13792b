/*
 * backend.h — what backend.c (JIT) and aot.c (artifacts) share inside the CPU backend: the
 * backend's state, kernel text generation and the LLVM steps from IR text to an optimised module.
 * Includes LLVM headers: only for codegen/cpu.
 */
#ifndef DPC_CODEGEN_CPU_BACKEND_H
#define DPC_CODEGEN_CPU_BACKEND_H

#include "codegen/cpu/cpu.h"

#include <llvm-c/Core.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/TargetMachine.h>

typedef struct cache_entry {
  uint64_t hash;
  dpc_native_fn fn;
} cache_entry;

struct dpc_cpu_backend {
  LLVMTargetMachineRef tm;
  LLVMOrcLLJITRef jit;
  char *triple, *cpu, *features;
  char name[512];
  int vector_bits;
  cache_entry *cache;
  uint32_t n_cache, cap_cache;
  uint32_t n_modules;
  double seconds;
  uint32_t compiled, cached, from_disk; /* kernels compiled, found in memory, read from disk */
  dpc_cpu_options o;
};

/* The declarations and helper functions every kernel module starts with, and the attribute
 * group #0 for the target's vector width. */
void cg_module_preamble(const dpc_cpu_backend *b, dpc_buf *out);
/* One kernel's function text, named KERNEL, for node `node` of g; its trip count in *total. */
dpc_status cg_kernel_text(const dpc_cpu_backend *b, const dpc_graph *g, uint32_t node, dpc_buf *out,
                          int64_t *total, dpc_diag *d);
uint64_t cg_hash(const char *s);
/* The symbol of the kernel whose IR hashes to h: "dpc_k" and 16 hex digits (out: 22 bytes). */
void cg_symbol(uint64_t h, char *out, size_t n);
/* Whether a plan step gets a kernel of its own (not fused into another's, and lowerable). */
bool cg_compiles(const dpc_graph *g, const dpc_step *sp);
/* A target machine for the backend's target: one per thread that compiles (they are not
 * thread-safe). NULL when LLVM has no such target. */
/* One kernel of a plan as cg_walk_plan hands it over: its text is `head`, then the function's
 * name and `(`, then `body` (the name is the caller's to write: cg_symbol of `hash` for the JIT
 * and artifacts alike). A kernel a plan needs twice (the same text) comes twice. */
typedef struct cg_plan_kernel {
  uint32_t node;
  uint64_t hash; /* of the kernel's text */
  int64_t total; /* trip count of its parallel loop */
  const char *head, *body;
  size_t head_len;
} cg_plan_kernel;
typedef dpc_status (*cg_kernel_visit)(void *user, const cg_plan_kernel *k, dpc_diag *d);
/* The walk the JIT (jit.c) and artifacts (aot.c) share: every step of every device of `plan`
 * that gets a kernel of its own (cg_compiles), in step order, its text generated and passed to
 * `visit`. Stops at the first failure, generating's or visit's. */
dpc_status cg_walk_plan(const dpc_cpu_backend *b, const dpc_plan *plan, cg_kernel_visit visit,
                        void *user, dpc_diag *d);
LLVMTargetMachineRef cg_target_machine(const dpc_cpu_backend *b);
/* Parse IR text into a module of ctx, verify it and run the O3 pipeline for target machine tm. */
dpc_status cg_parse_optimise(dpc_cpu_backend *b, LLVMTargetMachineRef tm, LLVMContextRef ctx,
                             const char *text, LLVMModuleRef *out, dpc_diag *d);
dpc_status cg_llvm_error(dpc_diag *d, const char *what, LLVMErrorRef e);

#endif
