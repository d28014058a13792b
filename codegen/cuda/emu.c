/*
 * emu.c — the "cuda-emu" codegen backend: every kernel of a plan generated as CUDA C (lower.c),
 * compiled by the host's C++ compiler against emu/dpc_cuda_emu.h, loaded with dlopen and run on
 * the CPU as a host kernel. It runs whole plans (`dpc train --backend cuda-emu`) on the same
 * kernel text NVRTC compiles, so training steps check the CUDA kernels without a GPU.
 *
 * It is a checking tool, not a fast path: each kernel is a shared library, threads of a block are
 * fibers (emu/dpc_cuda_emu.h), and the compiler and the emulation headers are the ones found when
 * dpc was built (DPC_HOST_CXX, DPC_CUDA_EMU_DIR). Kernels are kept per source text, so a plan
 * compiled twice (train and eval) compiles each kernel once.
 */
#include "codegen/cuda/emu.h"
#include "codegen/cuda/cuda.h"
#include "ir/fusion.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct emu_lib {
  char *source; /* the CUDA source (the key) */
  void *handle;
  dpc_native_fn fn;
} emu_lib;

typedef struct emu_state {
  char dir[64]; /* scratch folder for sources and libraries */
  emu_lib *libs;
  uint32_t n_libs, cap_libs, serial, compiled, cached;
} emu_state;

static dpc_status emu_open(const dpc_codegen_options *o, void **state, dpc_diag *d) {
  (void)o;
  emu_state *s = calloc(1, sizeof *s);
  if (!s) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  snprintf(s->dir, sizeof s->dir, "/tmp/dpc_cuda_emu_XXXXXX");
  if (!mkdtemp(s->dir)) {
    free(s);
    return dpc_diag_fail(d, DPC_ERR_IO, "cuda-emu: cannot make a scratch folder in /tmp");
  }
  *state = s;
  return DPC_OK;
}

static void emu_release(void *state) {
  emu_state *s = state;
  if (!s) return;
  for (uint32_t i = 0; i < s->n_libs; i++) {
    free(s->libs[i].source);
    if (s->libs[i].handle) dlclose(s->libs[i].handle);
  }
  free(s->libs);
  rmdir(s->dir);
  free(s);
}

/* Write `text` to path; false when it cannot. */
static bool write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  bool ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

/* The kernel's host entry (ir/native.h): all of it on the first call of a split, launched in
 * order on the node's pointers. */
static void entry_text(const dpc_cuda_kernel *k, uint32_t n_args, dpc_buf *out) {
  dpc_buf_printf(out,
                 "extern \"C\" int dpc_emu_entry(void *const *args, long long begin, long long "
                 "end, unsigned long long step, int training) {\n"
                 "  (void)training;\n  if (begin > 0 || end <= begin) return 0;\n"
                 "  dpc_kargs a;\n  memset(&a, 0, sizeof a);\n"
                 "  for (int i = 0; i < %u; i++) a.p[i] = args[i];\n  a.step = step;\n",
                 n_args);
  for (uint32_t l = 0; l < k->n_launch; l++) {
    const dpc_cuda_launch *L = &k->launch[l];
    dpc_buf_printf(out,
                   "  { unsigned g[3] = {%u, %u, %u}, b[3] = {%u, %u, %u};\n"
                   "    if (dpc_emu_launch(%s, g, b, &a)) return 1; }\n",
                   L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2],
                   L->name);
  }
  dpc_buf_puts(out, "  return 0;\n}\n");
}

static dpc_status compile_kernel(emu_state *s, const dpc_graph *g, uint32_t node, bool training,
                                 dpc_native_fn *fn, dpc_diag *d) {
  dpc_cuda_kernel k;
  dpc_status st = dpc_cuda_lower(g, node, training, &k, d);
  if (st) return st;
  for (uint32_t i = 0; i < s->n_libs; i++) {
    if (!strcmp(s->libs[i].source, k.source)) {
      *fn = s->libs[i].fn;
      s->cached++;
      dpc_cuda_kernel_free(&k);
      return DPC_OK;
    }
  }
  char src[128], wrap[128], so[128];
  uint32_t id = s->serial++;
  snprintf(src, sizeof src, "%s/k%u.cu", s->dir, id);
  snprintf(wrap, sizeof wrap, "%s/k%u.cpp", s->dir, id);
  snprintf(so, sizeof so, "%s/k%u.so", s->dir, id);
  dpc_buf w = {0};
  dpc_buf_printf(
      &w,
      "#include \"%s/dpc_cuda_emu.h\"\n#include \"%s\"\n#include \"%s/dpc_cuda_emu_launch.h\"\n",
      DPC_CUDA_EMU_DIR, src, DPC_CUDA_EMU_DIR);
  entry_text(&k, k.n_args, &w);
  bool wrote = write_file(src, k.source) && write_file(wrap, w.data);
  dpc_buf_free(&w);
  if (!wrote) {
    dpc_cuda_kernel_free(&k);
    return dpc_diag_fail(d, DPC_ERR_IO, "cuda-emu: cannot write %s", src);
  }
  /* -fno-gnu-unique: a block reduction's shared memory is a static in a template, otherwise
   * one object for the whole process that would also keep every library loaded */
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "'%s' -std=c++17 -O1 -pipe -fPIC -shared -fno-gnu-unique -o '%s' '%s' -lpthread -lm "
           "2>&1",
           DPC_HOST_CXX, so, wrap);
  FILE *p = popen(cmd, "r");
  char log[2048] = "";
  size_t got = p ? fread(log, 1, sizeof log - 1, p) : 0;
  log[got] = 0;
  int rc = p ? pclose(p) : -1;
  unlink(wrap);
  unlink(src);
  if (rc != 0) {
    unlink(so);
    dpc_cuda_kernel_free(&k);
    return dpc_graph_fail_node(g, node, d, DPC_ERR_INTERNAL,
                               "cuda-emu: the host compiler rejected the kernel: %s", log);
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  unlink(so);
  void *sym = h ? dlsym(h, "dpc_emu_entry") : NULL;
  if (!sym) {
    if (h) dlclose(h);
    dpc_cuda_kernel_free(&k);
    return dpc_graph_fail_node(g, node, d, DPC_ERR_INTERNAL, "cuda-emu: cannot load the kernel");
  }
  if (s->n_libs == s->cap_libs) {
    uint32_t cap = s->cap_libs ? 2 * s->cap_libs : 32;
    emu_lib *nl = realloc(s->libs, cap * sizeof *nl);
    if (!nl) {
      dlclose(h);
      dpc_cuda_kernel_free(&k);
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    }
    s->libs = nl, s->cap_libs = cap;
  }
  emu_lib *L = &s->libs[s->n_libs++];
  L->source = k.source; /* kept as the key; k is not freed */
  L->handle = h;
  memcpy(&L->fn, &sym, sizeof L->fn); /* dlsym gives a function as void * */
  *fn = L->fn;
  s->compiled++;
  return DPC_OK;
}

static dpc_status emu_compile_plan(void *state, const dpc_plan *plan, dpc_native_kernel *kernels,
                                   dpc_diag *d) {
  emu_state *s = state;
  const dpc_graph *g = plan->g;
  for (uint32_t dv = 0; dv < plan->n_devs; dv++) {
    for (uint32_t i = 0; i < plan->devs[dv].n_steps; i++) {
      const dpc_step *sp = &plan->devs[dv].steps[i];
      if (sp->kind != DPC_STEP_KERNEL || g->nodes[sp->node].fused != DPC_NONE) continue;
      if (!dpc_cuda_lowers(g->nodes[sp->node].op, NULL) || kernels[sp->node].kind) continue;
      dpc_native_fn fn = NULL;
      dpc_status st = compile_kernel(s, g, sp->node, plan->training, &fn, d);
      if (st) return st;
      kernels[sp->node] = (dpc_native_kernel){.kind = DPC_KERNEL_HOST, .fn = fn, .total = 1};
    }
  }
  return DPC_OK;
}

static const char *emu_target(const void *state) {
  (void)state;
  return "CUDA C run on the host (emulated blocks and threads)";
}

static void emu_stats(const void *state, dpc_codegen_stats *out) {
  const emu_state *s = state;
  memset(out, 0, sizeof *out);
  out->compiled = s->compiled;
  out->cached = s->cached;
}

static unsigned emu_fusion(void) {
  return DPC_FUSE_ELEMWISE | DPC_FUSE_EPILOGUE; /* as the cuda backend's */
}

const dpc_codegen_backend dpc_codegen_cuda_emu = {
    .name = "cuda-emu",
    .what = "CUDA C kernels (as for NVRTC) compiled by the host C++ compiler and run on the CPU "
            "under emulation: for checking GPU code without a GPU, slow",
    .kind = DPC_KERNEL_HOST,
    .fusion = emu_fusion,
    .open = emu_open,
    .compile_plan = emu_compile_plan,
    .target = emu_target,
    .stats = emu_stats,
    .release = emu_release,
};
