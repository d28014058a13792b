/*
 * backend.c — the table of codegen backends, looked up by name, and the calls every front end
 * makes through a row (see backend.h). The reference backend's row is here: it compiles
 * nothing, so each node runs on the runtime's kernel table.
 */
#include "codegen/backend.h"
#include "codegen/cpu/cpu.h"
#include "codegen/cuda/cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dpc_codegen {
  const dpc_codegen_backend *be;
  void *state;
};

static const dpc_codegen_backend ref_backend = {
    .name = "ref",
    .what = "the reference kernels (plain C loops), nothing compiled",
    .kind = DPC_KERNEL_NONE,
};

/* In the order messages list them. */
static const dpc_codegen_backend *const table[] = {&ref_backend, &dpc_codegen_llvm,
                                                   &dpc_codegen_cuda};
#define N_BACKENDS (sizeof table / sizeof *table)

void dpc_codegen_backend_names(char *out, size_t n) {
  size_t at = 0;
  if (n) out[0] = 0;
  for (size_t i = 0; i < N_BACKENDS && at < n; i++) {
    int w = snprintf(out + at, n - at, "%s%s", i ? ", " : "", table[i]->name);
    if (w < 0) break;
    at += (size_t)w;
  }
}

dpc_status dpc_codegen_backend_find(const char *name, const dpc_codegen_backend **out,
                                    dpc_diag *d) {
  *out = NULL;
  for (size_t i = 0; name && i < N_BACKENDS; i++) {
    if (!strcmp(table[i]->name, name)) {
      *out = table[i];
      return DPC_OK;
    }
  }
  char names[256];
  dpc_codegen_backend_names(names, sizeof names);
  return dpc_diag_fail(d, DPC_ERR_INVALID, "no codegen backend is called '%s' (known: %s)",
                       name ? name : "(none)", names);
}

bool dpc_codegen_compiles(const dpc_codegen_backend *be) {
  return be && be->kind != DPC_KERNEL_NONE;
}

const char *dpc_codegen_device_kind(const dpc_codegen_backend *be) {
  return be && be->kind == DPC_KERNEL_CUDA ? "cuda" : NULL;
}

unsigned dpc_codegen_fusion(const dpc_codegen_backend *be) {
  return be && be->fusion ? be->fusion() : 0;
}

dpc_status dpc_codegen_new(const dpc_codegen_backend *be, const dpc_codegen_options *o,
                           dpc_codegen **out, dpc_diag *d) {
  *out = NULL;
  if (!be) return dpc_diag_fail(d, DPC_ERR_INVALID, "opening a codegen backend: none given");
  dpc_codegen *c = calloc(1, sizeof *c);
  if (!c) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  c->be = be;
  static const dpc_codegen_options defaults = {0};
  dpc_status st = be->open ? be->open(o ? o : &defaults, &c->state, d) : DPC_OK;
  if (st) {
    free(c);
    return st;
  }
  *out = c;
  return DPC_OK;
}

void dpc_codegen_free(dpc_codegen *c) {
  if (!c) return;
  if (c->be->release) c->be->release(c->state);
  free(c);
}

const dpc_codegen_backend *dpc_codegen_backend_of(const dpc_codegen *c) {
  return c->be;
}

dpc_status dpc_codegen_compile_devices(dpc_codegen *c, const dpc_plan *plan, uint32_t first,
                                       uint32_t count, dpc_native_kernel *kernels, dpc_diag *d) {
  if (!count) return DPC_OK;
  if (first == 0 && count >= plan->n_devs) return dpc_codegen_compile_plan(c, plan, kernels, d);
  /* the backends compile the kernel steps they find: a view whose other devices have none */
  dpc_plan_device *devs = calloc(plan->n_devs, sizeof *devs);
  if (!devs) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  memcpy(devs, plan->devs, plan->n_devs * sizeof *devs);
  for (uint32_t k = 0; k < plan->n_devs; k++)
    if (k < first || k - first >= count) devs[k].n_steps = 0;
  dpc_plan view = *plan;
  view.devs = devs;
  dpc_status st = dpc_codegen_compile_plan(c, &view, kernels, d);
  free(devs);
  return st;
}

dpc_status dpc_codegen_compile_plan(dpc_codegen *c, const dpc_plan *plan,
                                    dpc_native_kernel *kernels, dpc_diag *d) {
  return c->be->compile_plan ? c->be->compile_plan(c->state, plan, kernels, d) : DPC_OK;
}

dpc_status dpc_codegen_write_artifact(dpc_codegen *c, const dpc_aot_plan *plans, uint32_t n,
                                      const char *path, dpc_diag *d) {
  if (!c->be->write_artifact)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "cannot write '%s': the %s codegen backend writes no artifacts", path,
                         c->be->name);
  return c->be->write_artifact(c->state, plans, n, path, d);
}

const char *dpc_codegen_target(const dpc_codegen *c) {
  return c->be->target ? c->be->target(c->state) : "";
}

void dpc_codegen_get_stats(const dpc_codegen *c, dpc_codegen_stats *out) {
  memset(out, 0, sizeof *out);
  if (c->be->stats) c->be->stats(c->state, out);
}
