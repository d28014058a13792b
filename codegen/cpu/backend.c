/*
 * backend.c — the LLVM side of the CPU backend: target machine, the O3 pipeline, ORC LLJIT, and
 * kernel text generation (see cpu.h). Compiling a plan's kernels is jit.c; artifacts aot.c. The
 * kernels' IR is written by the lower_*.c files.
 *
 * Facts this file relies on (shared/design/TOOLCHAIN.md): LLVMRunPasses needs the target
 * machine or nothing is vectorised; LLJIT runs no IR optimisation itself; a JIT resolves no
 * external symbol (erff, tanhf) without the process's own symbols added as a generator.
 */
#include "codegen/cpu/backend.h"
#include "codegen/cpu/cg.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpc_status cg_llvm_error(dpc_diag *d, const char *what, LLVMErrorRef e) {
  char *m = LLVMGetErrorMessage(e);
  dpc_status st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "%s: %s", what, m);
  LLVMDisposeErrorMessage(m);
  return st;
}

/* Declarations every kernel module may use, and the generator's mixing function. */
static const char preamble[] =
    "declare float @llvm.exp.f32(float)\ndeclare double @llvm.exp.f64(double)\n"
    "declare float @llvm.log.f32(float)\ndeclare double @llvm.log.f64(double)\n"
    "declare float @llvm.sqrt.f32(float)\ndeclare double @llvm.sqrt.f64(double)\n"
    "declare float @llvm.pow.f32(float, float)\ndeclare double @llvm.pow.f64(double, double)\n"
    "declare float @llvm.floor.f32(float)\ndeclare double @llvm.floor.f64(double)\n"
    "declare float @llvm.cos.f32(float)\ndeclare double @llvm.cos.f64(double)\n"
    "declare float @llvm.sin.f32(float)\ndeclare double @llvm.sin.f64(double)\n"
    "declare float @llvm.fabs.f32(float)\ndeclare double @llvm.fabs.f64(double)\n"
    "declare float @llvm.fma.f32(float, float, float)\ndeclare double @llvm.fma.f64(double, "
    "double, double)\n"
    /* masked vector loads and stores, for the GEMM's edges (gemm.c), at every vector width.
     * Pointers are opaque in LLVM 19: an intrinsic's name mangles them as "p0" whatever they point
     * to (the typed pointer syntax of the arguments is read as `ptr`). */
    "declare void @llvm.prefetch.p0(i8*, i32, i32, i32)\n"
    "declare <16 x float> @llvm.masked.load.v16f32.p0("
    "<16 x float>*, i32, <16 x i1>, <16 x float>)\n"
    "declare void @llvm.masked.store.v16f32.p0(<16 x float>, <16 x float>*, i32, <16 x i1>)\n"
    "declare <8 x float> @llvm.masked.load.v8f32.p0("
    "<8 x float>*, i32, <8 x i1>, <8 x float>)\n"
    "declare void @llvm.masked.store.v8f32.p0(<8 x float>, <8 x float>*, i32, <8 x i1>)\n"
    "declare <4 x float> @llvm.masked.load.v4f32.p0("
    "<4 x float>*, i32, <4 x i1>, <4 x float>)\n"
    "declare void @llvm.masked.store.v4f32.p0(<4 x float>, <4 x float>*, i32, <4 x i1>)\n"
    "declare <8 x double> @llvm.masked.load.v8f64.p0("
    "<8 x double>*, i32, <8 x i1>, <8 x double>)\n"
    "declare void @llvm.masked.store.v8f64.p0(<8 x double>, <8 x double>*, i32, <8 x i1>)\n"
    "declare <4 x double> @llvm.masked.load.v4f64.p0("
    "<4 x double>*, i32, <4 x i1>, <4 x double>)\n"
    "declare void @llvm.masked.store.v4f64.p0(<4 x double>, <4 x double>*, i32, <4 x i1>)\n"
    "declare <2 x double> @llvm.masked.load.v2f64.p0("
    "<2 x double>*, i32, <2 x i1>, <2 x double>)\n"
    "declare void @llvm.masked.store.v2f64.p0(<2 x double>, <2 x double>*, i32, <2 x i1>)\n"
    "declare float @erff(float)\ndeclare double @erf(double)\n"
    "declare float @tanhf(float)\ndeclare double @tanh(double)\n"
    "declare i32 @llvm.fptosi.sat.i32.f32(float)\ndeclare i64 @llvm.fptosi.sat.i64.f32(float)\n"
    "declare i32 @llvm.fptosi.sat.i32.f64(double)\ndeclare i64 @llvm.fptosi.sat.i64.f64(double)\n"
    "define internal i64 @dpc_mix64(i64 %x) alwaysinline {\n"
    "  %a = add i64 %x, -7046029254386353131\n"
    "  %b = lshr i64 %a, 30\n  %c = xor i64 %a, %b\n  %d = mul i64 %c, -4658895280553007687\n"
    "  %e = lshr i64 %d, 27\n  %f = xor i64 %d, %e\n  %g = mul i64 %f, -7723592293110705685\n"
    "  %h = lshr i64 %g, 31\n  %i = xor i64 %g, %h\n  ret i64 %i\n}\n\n";

cg_lower_fn cg_lowering(dpc_op op) {
  static const cg_lower_fn *const tables[] = {
      cg_elementwise_table, cg_reduce_table, cg_layout_table, cg_matmul_table,
      cg_window_table,      cg_norm_table,   cg_pool_table};
  if ((unsigned)op >= DPC_OP_COUNT) return NULL;
  for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
    if (tables[i][op]) return tables[i][op];
  return NULL;
}

bool dpc_cpu_lowers(dpc_op op) {
  return cg_lowering(op) != NULL;
}

unsigned dpc_cpu_fusion(void) {
  return DPC_FUSE_ELEMWISE | DPC_FUSE_EPILOGUE;
}

/* Whether a plan step gets a kernel of its own: nodes fused into a group are compiled with
 * their group's root. */
bool cg_compiles(const dpc_graph *g, const dpc_step *sp) {
  return sp->kind == DPC_STEP_KERNEL && g->nodes[sp->node].fused == DPC_NONE &&
         dpc_cpu_lowers(g->nodes[sp->node].op);
}

dpc_status dpc_cpu_backend_new(const dpc_cpu_options *o, dpc_cpu_backend **out, dpc_diag *d) {
  *out = NULL;
  if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "LLVM has no code generator for this machine");
  dpc_cpu_backend *b = calloc(1, sizeof *b);
  if (!b) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (o) b->o = *o;
  bool native = !b->o.cpu || !strcmp(b->o.cpu, "native");
  b->triple = LLVMGetDefaultTargetTriple();
  b->cpu = native ? LLVMGetHostCPUName() : LLVMCreateMessage(b->o.cpu);
  b->features = native && !b->o.features ? LLVMGetHostCPUFeatures()
                                         : LLVMCreateMessage(b->o.features ? b->o.features : "");
  LLVMTargetRef target;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(b->triple, &target, &err)) {
    dpc_status st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "LLVM target '%s': %s", b->triple, err);
    LLVMDisposeMessage(err);
    dpc_cpu_backend_free(b);
    return st;
  }
  b->tm = LLVMCreateTargetMachine(target, b->triple, b->cpu, b->features,
                                  LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelDefault);
  b->vector_bits = strstr(b->features, "+avx512f") ? 512 : strstr(b->features, "+avx2") ? 256 : 128;
  snprintf(b->name, sizeof b->name, "%s %s (%d-bit vectors)", b->triple, b->cpu, b->vector_bits);
  LLVMOrcJITTargetMachineBuilderRef jtmb;
  LLVMErrorRef e = LLVMOrcJITTargetMachineBuilderDetectHost(&jtmb);
  if (e) {
    dpc_status st = cg_llvm_error(d, "detecting the host for the JIT", e);
    dpc_cpu_backend_free(b);
    return st;
  }
  LLVMOrcLLJITBuilderRef lb = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(lb, jtmb);
  if ((e = LLVMOrcCreateLLJIT(&b->jit, lb))) {
    dpc_status st = cg_llvm_error(d, "creating the JIT", e);
    dpc_cpu_backend_free(b);
    return st;
  }
  LLVMOrcDefinitionGeneratorRef gen;
  e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &gen, LLVMOrcLLJITGetGlobalPrefix(b->jit), NULL, NULL);
  if (e) {
    dpc_status st = cg_llvm_error(d, "resolving libm for the JIT", e);
    dpc_cpu_backend_free(b);
    return st;
  }
  LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(b->jit), gen);
  *out = b;
  return DPC_OK;
}

void dpc_cpu_backend_free(dpc_cpu_backend *b) {
  if (!b) return;
  if (b->jit) LLVMOrcDisposeLLJIT(b->jit);
  if (b->tm) LLVMDisposeTargetMachine(b->tm);
  if (b->triple) LLVMDisposeMessage(b->triple);
  if (b->cpu) LLVMDisposeMessage(b->cpu);
  if (b->features) LLVMDisposeMessage(b->features);
  free(b->cache);
  free(b);
}

const char *dpc_cpu_target_name(const dpc_cpu_backend *b) {
  return b->name;
}

int dpc_cpu_vector_bits(const dpc_cpu_backend *b) {
  return b->vector_bits;
}

void dpc_cpu_stats(const dpc_cpu_backend *b, double *seconds, uint32_t *compiled,
                   uint32_t *cached) {
  if (seconds) *seconds = b->seconds;
  if (compiled) *compiled = b->compiled;
  if (cached) *cached = b->cached;
}

uint32_t dpc_cpu_disk_hits(const dpc_cpu_backend *b) {
  return b->from_disk;
}

uint64_t cg_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Generate one kernel's function text (named KERNEL) for node `node`. */
dpc_status cg_kernel_text(const dpc_cpu_backend *b, const dpc_graph *g, uint32_t node, dpc_buf *out,
                          int64_t *total, dpc_diag *d) {
  cg_fn f;
  cg_fn_init(&f, g, node, b->vector_bits);
  cg_kernel k = {&f, 1};
  dpc_group grp;
  dpc_status st = DPC_OK;
  bool group = dpc_group_is_root(g, node);
  if (group && !(st = dpc_group_get(g, node, &grp, d))) {
    f.grp = &grp;
    st = cg_lower_group(&k, d);
    dpc_group_free(&grp);
  } else if (!group) {
    st = cg_lowering(g->nodes[node].op)(&k, d);
  }
  if (!st) {
    cg_fn_finish(&f, "KERNEL", out);
    *total = k.total;
    if (out->oom) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory generating a kernel");
  }
  cg_fn_free(&f);
  return st;
}

void cg_symbol(uint64_t h, char *out, size_t n) {
  snprintf(out, n, "dpc_k%016llx", (unsigned long long)h);
}

dpc_status dpc_cpu_kernel_symbol(const dpc_cpu_backend *b, const dpc_graph *g, uint32_t node,
                                 char *out, size_t n, dpc_diag *d) {
  dpc_buf text = {0};
  int64_t total;
  dpc_status st = cg_kernel_text(b, g, node, &text, &total, d);
  if (!st) cg_symbol(cg_hash(text.data), out, n);
  dpc_buf_free(&text);
  return st;
}

dpc_status cg_walk_plan(const dpc_cpu_backend *b, const dpc_plan *plan, cg_kernel_visit visit,
                        void *user, dpc_diag *d) {
  const dpc_graph *g = plan->g;
  dpc_status st = DPC_OK;
  for (uint32_t dv = 0; dv < plan->n_devs && !st; dv++) {
    for (uint32_t j = 0; j < plan->devs[dv].n_steps && !st; j++) {
      const dpc_step *sp = &plan->devs[dv].steps[j];
      if (!cg_compiles(g, sp)) continue;
      dpc_buf text = {0};
      cg_plan_kernel k = {.node = sp->node, .total = 1};
      st = cg_kernel_text(b, g, sp->node, &text, &k.total, d);
      const char *at = st ? NULL : strstr(text.data, "@KERNEL(");
      if (!st && !at)
        st = dpc_graph_fail_node(g, sp->node, d, DPC_ERR_INTERNAL,
                                 "its kernel's text names no function @KERNEL");
      if (!st) {
        k.hash = cg_hash(text.data);
        k.head = text.data;
        k.head_len = (size_t)(at - text.data);
        k.body = at + strlen("@KERNEL(");
        st = visit(user, &k, d);
      }
      dpc_buf_free(&text);
    }
  }
  return st;
}

void cg_module_preamble(const dpc_cpu_backend *b, dpc_buf *out) {
  dpc_buf_puts(out, preamble);
  dpc_buf_printf(out, "attributes #0 = { nounwind \"prefer-vector-width\"=\"%d\" }\n\n",
                 b->vector_bits);
}

LLVMTargetMachineRef cg_target_machine(const dpc_cpu_backend *b) {
  LLVMTargetRef target;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(b->triple, &target, &err)) {
    LLVMDisposeMessage(err);
    return NULL;
  }
  return LLVMCreateTargetMachine(target, b->triple, b->cpu, b->features, LLVMCodeGenLevelAggressive,
                                 LLVMRelocPIC, LLVMCodeModelDefault);
}

dpc_status cg_parse_optimise(dpc_cpu_backend *b, LLVMTargetMachineRef tm, LLVMContextRef ctx,
                             const char *text, LLVMModuleRef *out, dpc_diag *d) {
  *out = NULL;
  LLVMMemoryBufferRef mb =
      LLVMCreateMemoryBufferWithMemoryRangeCopy(text, strlen(text), "dpc-kernels");
  LLVMModuleRef m = NULL;
  char *err = NULL;
  if (LLVMParseIRInContext(ctx, mb, &m, &err)) {
    dpc_status st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "generated IR does not parse: %s", err);
    LLVMDisposeMessage(err);
    return st;
  }
  if (LLVMVerifyModule(m, LLVMReturnStatusAction, &err)) {
    dpc_status st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "generated IR is invalid: %s", err);
    LLVMDisposeMessage(err);
    LLVMDisposeModule(m);
    return st;
  }
  if (err) LLVMDisposeMessage(err);
  LLVMSetTarget(m, b->triple);
  LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(m, dl);
  LLVMDisposeTargetData(dl);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(m, "default<O3>", tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e) {
    LLVMDisposeModule(m);
    return cg_llvm_error(d, "optimising kernels", e);
  }
  if (b->o.dump) {
    char *s = LLVMPrintModuleToString(m);
    b->o.dump(b->o.user, "llvm-optimised", s);
    LLVMDisposeMessage(s);
  }
  *out = m;
  return DPC_OK;
}
