/*
 * entry.c — the CPU backend as a row of the codegen backend table (codegen/backend.h): "llvm",
 * host machine code, the JIT of jit.c and the artifacts of aot.c.
 */
#include "codegen/cpu/cpu.h"

static dpc_status cpu_open(const dpc_codegen_options *o, void **state, dpc_diag *d) {
  dpc_cpu_backend *b = NULL;
  dpc_status st = dpc_cpu_backend_new(o, &b, d);
  *state = b;
  return st;
}

static dpc_status cpu_compile_plan(void *state, const dpc_plan *plan, dpc_native_kernel *kernels,
                                   dpc_diag *d) {
  return dpc_cpu_compile_plan(state, plan, kernels, d);
}

static dpc_status cpu_write_artifact(void *state, const dpc_aot_plan *plans, uint32_t n,
                                     const char *path, dpc_diag *d) {
  return dpc_cpu_compile_artifact(state, plans, n, path, d);
}

static const char *cpu_target(const void *state) {
  return dpc_cpu_target_name(state);
}

static void cpu_stats(const void *state, dpc_codegen_stats *out) {
  dpc_cpu_stats(state, &out->seconds, &out->compiled, &out->cached);
  out->from_disk = dpc_cpu_disk_hits(state);
}

static void cpu_release(void *state) {
  dpc_cpu_backend_free(state);
}

const dpc_codegen_backend dpc_codegen_llvm = {
    .name = "llvm",
    .what = "kernels compiled to machine code for this CPU with LLVM",
    .kind = DPC_KERNEL_HOST,
    .fusion = dpc_cpu_fusion,
    .open = cpu_open,
    .compile_plan = cpu_compile_plan,
    .write_artifact = cpu_write_artifact,
    .target = cpu_target,
    .stats = cpu_stats,
    .release = cpu_release,
};
