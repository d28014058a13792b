/*
 * backend.h — codegen backends, chosen by name: what turns a plan's kernel steps into code a
 * device runs, for this process (a JIT session) or ahead of time (an artifact).
 *
 *   const dpc_codegen_backend *be;
 *   dpc_codegen_backend_find("llvm", &be, &d);         // "ref": no compiled kernels
 *   dpc_codegen *cg;
 *   dpc_codegen_new(be, &(dpc_codegen_options){0}, &cg, &d);
 *   dpc_native_kernel *k = calloc(plan->g->n_nodes, sizeof *k);
 *   dpc_codegen_compile_plan(cg, plan, k, &d);         // handles of kind be->kind
 *   dpc_session_new(plan, &(dpc_session_opts){.native = k}, &s, &d);
 *   ...
 *   dpc_codegen_free(cg);                              // after the session: it owns the code
 *
 * The table (backend.c) has "ref" (the reference kernels: nothing compiled), "llvm" (host
 * machine code, codegen/cpu) and "cuda" (GPU code, codegen/cuda). A backend for another kind of
 * device is one more row: its kernel handles carry their own kind and a `handle`
 * (runtime/kernel.h), never a host function pointer, and the runtime runs a handle only on a device
 * of its kind.
 */
#ifndef DPC_CODEGEN_BACKEND_H
#define DPC_CODEGEN_BACKEND_H

#include "ir/plan.h"
#include "ir/native.h"

#include <signal.h>

typedef struct dpc_codegen_options {
  const char *cpu;      /* the target processor; NULL or "native": the host */
  const char *features; /* NULL: the host's when cpu is native, else none */
  /* --dump-llvm: called with each module's text before and after optimisation */
  void (*dump)(void *user, const char *what, const char *text);
  void *user;
  /* The folder of compiled kernels kept between runs: NULL for $DPC_CACHE_DIR or the default
   * (~/.cache/dpc), "" or "off" for none (codegen/cpu/jit.c). */
  const char *cache_dir;
  unsigned jobs; /* threads that compile kernels: 0 for one per core */
  /* the cuda backend's CUBIN architectures, "sm_80,sm_90" (the default for NULL): PTX of the
   * lowest goes along for any other GPU */
  const char *cuda_arch;
  /* the cuda backend's GEMMs on cuBLAS: "fp32" (the default for NULL: results as the CPU's),
   * "tf32" or "bf16" (inputs rounded so tensor cores take them; sums stay f32) */
  const char *precision;
  /* NULL, or a flag a signal handler sets: writing an artifact then stops at its next step
   * (a running linker is sent SIGTERM), removes its temporary files and fails. */
  const volatile sig_atomic_t *stop;
} dpc_codegen_options;

/* A plan and the role it plays in an artifact ("infer", "train", "eval"). */
typedef struct dpc_aot_plan {
  const char *role;
  const dpc_plan *plan;
} dpc_aot_plan;

/* What a backend has done so far: seconds compiling, kernels compiled, found in memory (another
 * plan had them), read from the disk cache. */
typedef struct dpc_codegen_stats {
  double seconds;
  uint32_t compiled, cached, from_disk;
} dpc_codegen_stats;

/* One row of the table. `state` is what open made; NULL functions are no-ops (compile_plan
 * leaves every node on the kernel table) or, for write_artifact, an error. */
typedef struct dpc_codegen_backend {
  const char *name;
  const char *what;         /* one line for help texts */
  dpc_kernel_kind kind;     /* what its kernel handles hold; NONE when it compiles nothing */
  unsigned (*fusion)(void); /* the fusion groups it compiles as one kernel (dpc_pass_opts.fuse) */
  dpc_status (*open)(const dpc_codegen_options *o, void **state, dpc_diag *d);
  /* kernels[node] (plan->g->n_nodes, zeroed by the caller) for each node it compiles; the code
   * lives as long as the state */
  dpc_status (*compile_plan)(void *state, const dpc_plan *plan, dpc_native_kernel *kernels,
                             dpc_diag *d);
  /* the plans ahead of time into the file `path`, which the runtime loads without a compiler */
  dpc_status (*write_artifact)(void *state, const dpc_aot_plan *plans, uint32_t n, const char *path,
                               dpc_diag *d);
  const char *(*target)(const void *state); /* what it compiles for, for reports */
  void (*stats)(const void *state, dpc_codegen_stats *out);
  void (*release)(void *state);
} dpc_codegen_backend;

/* The backend called `name`; an unknown name is an error that lists the known ones. */
dpc_status dpc_codegen_backend_find(const char *name, const dpc_codegen_backend **out, dpc_diag *d);
/* The known names, comma separated ("ref, llvm"), into out (n bytes), for messages and help. */
void dpc_codegen_backend_names(char *out, size_t n);
/* Whether plans compiled by `be` get kernel handles (false for NULL, the reference backend). */
bool dpc_codegen_compiles(const dpc_codegen_backend *be);
/* The kind of device the code of `be` runs on, as dpc_session_opts.device_kind takes it: "cuda"
 * for GPU code, NULL for host code (and the reference backend). */
const char *dpc_codegen_device_kind(const dpc_codegen_backend *be);
/* The fusion groups the passes should form for `be` (0 for NULL). */
unsigned dpc_codegen_fusion(const dpc_codegen_backend *be);

/* A backend opened for compiling: the JIT's code and caches live as long as it does. */
typedef struct dpc_codegen dpc_codegen;

dpc_status dpc_codegen_new(const dpc_codegen_backend *be, const dpc_codegen_options *o,
                           dpc_codegen **out, dpc_diag *d);
void dpc_codegen_free(dpc_codegen *c);
const dpc_codegen_backend *dpc_codegen_backend_of(const dpc_codegen *c);
dpc_status dpc_codegen_compile_plan(dpc_codegen *c, const dpc_plan *plan,
                                    dpc_native_kernel *kernels, dpc_diag *d);
/* The same for the kernels of devices first .. first + count - 1 of the plan only (a plan whose
 * devices are of two kinds is compiled by a backend for each). */
dpc_status dpc_codegen_compile_devices(dpc_codegen *c, const dpc_plan *plan, uint32_t first,
                                       uint32_t count, dpc_native_kernel *kernels, dpc_diag *d);
/* Writes a temporary file beside `path` and renames it into place: on failure an existing
 * `path` is left as it was. */
dpc_status dpc_codegen_write_artifact(dpc_codegen *c, const dpc_aot_plan *plans, uint32_t n,
                                      const char *path, dpc_diag *d);
/* "" when the backend does not say. */
const char *dpc_codegen_target(const dpc_codegen *c);
/* Zeros when the backend keeps none. */
void dpc_codegen_get_stats(const dpc_codegen *c, dpc_codegen_stats *out);

#endif
