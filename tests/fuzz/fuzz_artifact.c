/*
 * fuzz_artifact.c — libFuzzer target for what dpc reads of a compiled artifact before and after
 * dlopen: the whole-file checksum (ir/seal.h) and the plans blob (runtime/artifact.c). A damaged
 * blob must be refused with a message, never read out of bounds. An accepted one must keep the
 * reader's promises: each plan's steps and slots name nodes, values and devices it has, every
 * kernel symbol ends inside its field, and no host code is resolved (no library was loaded); a
 * GPU artifact's kernels name codes of its table that take the node's arguments.
 *
 * The input is the blob as aot.c (version 1) or the cuda backend (version 2, with its table of
 * CUBIN and PTX) writes it; the seeds are the blobs of small compiled models.
 */
#include "ir/seal.h"
#include "runtime/artifact.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Every index a session would follow through the plan, checked against what it has. */
static void check_plan(const dpc_plan *p, const dpc_native_kernel *k) {
  const dpc_graph *g = p->g;
  if (!g || !p->n_devs || !k) abort();
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (k[i].fn || (k[i].kind != DPC_KERNEL_NONE && k[i].kind != DPC_KERNEL_CUDA)) abort();
    const dpc_cuda_code *c = k[i].handle;
    if (k[i].kind == DPC_KERNEL_CUDA && (!c || !c->ptx || !c->n_launch || !c->n_args)) abort();
  }
  for (uint32_t v = 0; p->slots && v < g->n_values; v++) {
    const dpc_slot *s = &p->slots[v];
    if (s->bytes && (s->device >= p->n_devs || s->offset > p->devs[s->device].bytes ||
                     s->bytes > p->devs[s->device].bytes - s->offset))
      abort();
  }
  for (uint32_t dv = 0; dv < p->n_devs; dv++) {
    if (!p->devs[dv].name) abort();
    for (uint32_t j = 0; j < p->devs[dv].n_steps; j++) {
      const dpc_step *sp = &p->devs[dv].steps[j];
      if (sp->kind == DPC_STEP_KERNEL && sp->node >= g->n_nodes) abort();
      if (sp->kind == DPC_STEP_COPY && (sp->src >= g->n_values || sp->dst >= g->n_values)) abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  dpc_diag d;
  dpc_diag_init(&d);
  /* the checksum: a verdict and, for a refusal, a message */
  if (dpc_seal_check(data, size, "fuzz.dpx", &d) != DPC_OK && !d.msg) abort();
  dpc_diag_free(&d);
  dpc_diag_init(&d);
  dpc_artifact *a = NULL;
  if (dpc_artifact_parse(data, size, "fuzz.dpx", &a, &d) == DPC_OK) {
    static const char *const roles[] = {"infer", "train", "eval"};
    for (int i = 0; i < 3; i++) {
      const dpc_native_kernel *k = NULL;
      const dpc_plan *p = dpc_artifact_plan(a, roles[i], &k);
      if (p) check_plan(p, k);
    }
    if (!dpc_artifact_target(a)) abort();
    dpc_artifact_close(a);
  } else if (!d.msg || a) {
    abort();
  }
  dpc_diag_free(&d);
  return 0;
}
