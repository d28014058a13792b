/*
 * backend.c — the "cuda" codegen backend: each kernel step of a plan lowered to CUDA C (lower.c)
 * and compiled by NVRTC to CUBIN for each architecture asked for, plus PTX for the driver to
 * compile for any other, as a dpc_cuda_code (ir/native.h) that runtime/device_cuda.c loads and
 * launches on a `cuda:N` device. Nothing here needs a GPU or the driver.
 *
 * One kernel per node or fusion group (lower_fused.c). Kernels are kept per
 * source text, so a plan
 * compiled twice (train and eval) compiles each kernel once, and identical layers share code.
 *
 * Ahead of time (`dpc compile --backend cuda`) the same code goes into an artifact that is a
 * plain file, not a shared library (GPU code needs no linking, and the host has nothing to run):
 * "DPCA", u32 version 2, u32 target length + target ("CUDA sm_80,sm_90 ..."), u32 count, per plan
 * its role and the plan as ir/serialize.c writes it, each node's symbol "cuda:N" naming code N
 * of the table that follows (dpc_cuda_codes_write); then the checksum trailer of ir/seal.h.
 * runtime/artifact.c reads it.
 */
#include "codegen/backend.h"
#include "codegen/cuda/cuda.h"
#include "ir/fusion.h"
#include "ir/path.h"
#include "ir/seal.h"
#include "ir/serialize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct code_entry {
  char *source; /* the key */
  dpc_cuda_code code;
  dpc_cuda_binary bin[DPC_CUDA_CODE_ARCHS]; /* owns the CUBINs and the PTX of bin[0] */
  char *ptx;                                /* bin[0]'s PTX with its NUL */
} code_entry;

typedef struct cuda_state {
  uint32_t sm[DPC_CUDA_CODE_ARCHS], n_sm;
  dpc_gemm_precision precision;
  char target[160];
  code_entry **codes;
  uint32_t n_codes, cap_codes, compiled, cached;
  double seconds;
  const volatile sig_atomic_t *stop; /* dpc_codegen_options.stop */
} cuda_state;

/* "sm_80,sm_90" (the default when NULL or empty) into sm numbers, lowest first. */
static dpc_status parse_archs(const char *list, cuda_state *s, dpc_diag *d) {
  if (!list || !*list) list = "sm_80,sm_90";
  const char *p = list;
  while (*p) {
    unsigned v = 0;
    int used = 0;
    if (sscanf(p, "sm_%u%n", &v, &used) != 1 || v < 50 || v > 199 ||
        (p[used] != ',' && p[used] != 0))
      return dpc_diag_fail(d, DPC_ERR_INVALID,
                           "CUDA architectures '%s': not a list of real ones such as "
                           "sm_80,sm_90",
                           list);
    if (s->n_sm == DPC_CUDA_CODE_ARCHS)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "CUDA architectures '%s': at most %d", list,
                           DPC_CUDA_CODE_ARCHS);
    uint32_t at = s->n_sm++;
    while (at > 0 && s->sm[at - 1] > v) s->sm[at] = s->sm[at - 1], at--;
    s->sm[at] = v;
    p += used + (p[used] == ',');
  }
  return DPC_OK;
}

/* by dpc_gemm_precision */
static const char *const precision_names[] = {"fp32", "tf32", "bf16"};

static dpc_status parse_precision(const char *p, dpc_gemm_precision *out, dpc_diag *d) {
  *out = DPC_GEMM_FP32;
  if (!p || !*p) return DPC_OK;
  for (int i = 0; i < 3; i++)
    if (!strcmp(p, precision_names[i])) return *out = (dpc_gemm_precision)i, DPC_OK;
  return dpc_diag_fail(d, DPC_ERR_INVALID, "precision '%s': not one of fp32, tf32, bf16", p);
}

static dpc_status cuda_open(const dpc_codegen_options *o, void **state, dpc_diag *d) {
  if (!dpc_cuda_have_nvrtc())
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "the cuda backend needs NVRTC, and this dpc was built without the CUDA "
                         "toolkit (`dpc version` says so)");
  cuda_state *s = calloc(1, sizeof *s);
  if (!s) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  s->stop = o->stop;
  dpc_status st = parse_archs(o->cuda_arch, s, d);
  if (!st) st = parse_precision(o->precision, &s->precision, d);
  if (st) {
    free(s);
    return st;
  }
  int at = snprintf(s->target, sizeof s->target, "CUDA ");
  for (uint32_t a = 0; a < s->n_sm; a++)
    at +=
        snprintf(s->target + at, sizeof s->target - (size_t)at, "%ssm_%u", a ? "," : "", s->sm[a]);
  snprintf(s->target + at, sizeof s->target - (size_t)at,
           " (NVRTC CUBIN, PTX for other GPUs); matmuls on cuBLAS in %s where it loads",
           precision_names[s->precision]);
  *state = s;
  return DPC_OK;
}

static void entry_free(code_entry *e) {
  if (!e) return;
  free(e->source);
  free(e->ptx);
  for (uint32_t a = 0; a < DPC_CUDA_CODE_ARCHS; a++) dpc_cuda_binary_free(&e->bin[a]);
  free(e);
}

static void cuda_release(void *state) {
  cuda_state *s = state;
  if (!s) return;
  for (uint32_t i = 0; i < s->n_codes; i++) entry_free(s->codes[i]);
  free(s->codes);
  free(s);
}

/* The node's code in a mode, compiled or found among those compiled before (counted as found
 * when `count`). */
static dpc_status node_code(cuda_state *s, const dpc_graph *g, uint32_t node, bool training,
                            bool count, code_entry **out, dpc_diag *d) {
  dpc_cuda_kernel k;
  dpc_status st = dpc_cuda_lower(g, node, training, &k, d);
  if (st) return st;
  for (uint32_t i = 0; i < s->n_codes; i++) {
    if (!strcmp(s->codes[i]->source, k.source)) {
      *out = s->codes[i];
      s->cached += count;
      dpc_cuda_kernel_free(&k);
      return DPC_OK;
    }
  }
  const dpc_node *n = &g->nodes[node];
  code_entry *e = calloc(1, sizeof *e);
  if (!e || k.n_launch > DPC_CUDA_CODE_LAUNCHES) {
    free(e);
    dpc_cuda_kernel_free(&k);
    return e ? dpc_graph_fail_node(g, node, d, DPC_ERR_INTERNAL, "too many CUDA launches")
             : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  e->source = k.source; /* the key; k's launches are copied below */
  char what[96];
  snprintf(what, sizeof what, "%s_%u.cu", dpc_op_name(n->op), node);
  for (uint32_t a = 0; a < s->n_sm && !st; a++) {
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%u", s->sm[a]);
    st = dpc_cuda_compile(e->source, what, arch, &e->bin[a], d);
    if (st) break;
    e->code.cubin[a].sm = s->sm[a];
    e->code.cubin[a].data = e->bin[a].cubin;
    e->code.cubin[a].size = e->bin[a].cubin_size;
  }
  if (!st && !(e->ptx = malloc(e->bin[0].ptx_size + 1)))
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st && s->n_codes == s->cap_codes) {
    uint32_t cap = s->cap_codes ? 2 * s->cap_codes : 32;
    code_entry **nc = realloc(s->codes, cap * sizeof *nc);
    if (!nc)
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    else
      s->codes = nc, s->cap_codes = cap;
  }
  if (st) { /* NVRTC's message names the node's kernel */
    entry_free(e);
    return st;
  }
  memcpy(e->ptx, e->bin[0].ptx, e->bin[0].ptx_size);
  e->ptx[e->bin[0].ptx_size] = 0;
  e->code.ptx = e->ptx;
  e->code.training = training;
  e->code.n_cubin = s->n_sm;
  e->code.n_launch = k.n_launch;
  e->code.n_args = k.n_args;
  e->code.after_gemm = k.after_gemm;
  dpc_cuda_gemm_of(g, node, s->precision, &e->code.gemm);
  for (uint32_t l = 0; l < k.n_launch; l++) {
    memcpy(e->code.launch[l].name, k.launch[l].name, sizeof e->code.launch[l].name);
    memcpy(e->code.launch[l].grid, k.launch[l].grid, sizeof k.launch[l].grid);
    memcpy(e->code.launch[l].block, k.launch[l].block, sizeof k.launch[l].block);
  }
  s->codes[s->n_codes++] = e;
  s->compiled++;
  *out = e;
  return DPC_OK;
}

static dpc_status cuda_compile_plan(void *state, const dpc_plan *plan, dpc_native_kernel *kernels,
                                    dpc_diag *d) {
  cuda_state *s = state;
  const dpc_graph *g = plan->g;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dpc_status st = DPC_OK;
  for (uint32_t dv = 0; dv < plan->n_devs && !st; dv++) {
    for (uint32_t i = 0; i < plan->devs[dv].n_steps && !st; i++) {
      const dpc_step *sp = &plan->devs[dv].steps[i];
      if (sp->kind != DPC_STEP_KERNEL || g->nodes[sp->node].fused != DPC_NONE) continue;
      if (!dpc_cuda_lowers(g->nodes[sp->node].op, NULL) || kernels[sp->node].kind) continue;
      /* a run may ask for the other mode of dropout and batch_norm than the plan's (inference
       * with training set): that mode's code goes along when it differs */
      code_entry *e = NULL, *other = NULL;
      st = node_code(s, g, sp->node, plan->training, true, &e, d);
      if (!st) st = node_code(s, g, sp->node, !plan->training, false, &other, d);
      if (st) break;
      if (other != e) e->code.other = &other->code, other->code.other = &e->code;
      kernels[sp->node] =
          (dpc_native_kernel){.kind = DPC_KERNEL_CUDA, .handle = &e->code, .total = 1};
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  s->seconds += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return st;
}

/* ---- artifacts ------------------------------------------------------------------------------ */

#define ARTIFACT_VERSION 2u

/* The index of code c in the artifact's table, added when new. */
static uint32_t table_index(const dpc_cuda_code ***table, uint32_t *n, uint32_t *cap,
                            const dpc_cuda_code *c) {
  for (uint32_t i = 0; i < *n; i++)
    if ((*table)[i] == c) return i;
  if (*n == *cap) {
    uint32_t nc = *cap ? 2 * *cap : 64;
    const dpc_cuda_code **t = realloc(*table, nc * sizeof *t);
    if (!t) return UINT32_MAX;
    *table = t, *cap = nc;
  }
  (*table)[*n] = c;
  return (*n)++;
}

static bool stopped(const cuda_state *s) {
  return s->stop && *s->stop;
}

/* The bytes, then their checksum, beside path and renamed over it: path is the old file or the
 * whole new one, never a part. */
static dpc_status write_sealed(const cuda_state *s, const dpc_buf *blob, const char *path,
                               dpc_diag *d) {
  char tmp[4096 + 32];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "cannot write '%s': the path is too long", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
  bool ok = fwrite(blob->data, 1, blob->len, f) == blob->len;
  ok = !fclose(f) && ok;
  dpc_status st = ok ? dpc_seal_append(tmp, d)
                     : dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
  if (!st && stopped(s))
    st = dpc_diag_fail(d, DPC_ERR_RUNTIME, "interrupted: '%s' was not written", path);
  if (!st && rename(tmp, path))
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  if (st) {
    unlink(tmp);
    return st;
  }
  if (dpc_path_sync_dir(path))
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot sync the folder of '%s': %s", path,
                         strerror(errno));
  return DPC_OK;
}

static dpc_status cuda_write_artifact(void *state, const dpc_aot_plan *plans, uint32_t n,
                                      const char *path, dpc_diag *d) {
  cuda_state *s = state;
  dpc_buf blob = {0};
  const dpc_cuda_code **table = NULL;
  uint32_t n_table = 0, cap_table = 0;
  dpc_artifact_blob_begin(&blob, ARTIFACT_VERSION, s->target, n);
  dpc_status st = DPC_OK;
  for (uint32_t p = 0; p < n && !st; p++) {
    const dpc_graph *g = plans[p].plan->g;
    uint32_t nodes = g->n_nodes ? g->n_nodes : 1;
    dpc_native_kernel *kernels = calloc(nodes, sizeof *kernels);
    dpc_plan_kernel *syms = calloc(nodes, sizeof *syms);
    st = kernels && syms ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    if (!st && stopped(s))
      st = dpc_diag_fail(d, DPC_ERR_RUNTIME, "interrupted: '%s' was not written", path);
    if (!st) st = cuda_compile_plan(s, plans[p].plan, kernels, d);
    for (uint32_t i = 0; !st && i < g->n_nodes; i++) {
      if (kernels[i].kind != DPC_KERNEL_CUDA) continue;
      const dpc_cuda_code *c = kernels[i].handle;
      uint32_t at = table_index(&table, &n_table, &cap_table, c);
      if (c->other && table_index(&table, &n_table, &cap_table, c->other) == UINT32_MAX)
        at = UINT32_MAX;
      if (at == UINT32_MAX) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
      snprintf(syms[i].symbol, sizeof syms[i].symbol, "cuda:%u", at);
      syms[i].total = kernels[i].total;
    }
    if (!st) {
      dpc_artifact_blob_role(&blob, plans[p].role);
      st = dpc_plan_write(plans[p].plan, syms, &blob, d);
    }
    free(kernels);
    free(syms);
  }
  if (!st) st = dpc_cuda_codes_write(table, n_table, &blob, d);
  if (!st && blob.oom) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) st = write_sealed(s, &blob, path, d);
  free(table);
  dpc_buf_free(&blob);
  return st;
}

static const char *cuda_target(const void *state) {
  return ((const cuda_state *)state)->target;
}

static void cuda_stats(const void *state, dpc_codegen_stats *out) {
  const cuda_state *s = state;
  memset(out, 0, sizeof *out);
  out->seconds = s->seconds;
  out->compiled = s->compiled;
  out->cached = s->cached;
}

static unsigned cuda_fusion(void) {
  return DPC_FUSE_ELEMWISE | DPC_FUSE_EPILOGUE;
}

const dpc_codegen_backend dpc_codegen_cuda = {
    .name = "cuda",
    .what = "CUDA kernels compiled by NVRTC, run on a GPU (cuda:N devices)",
    .kind = DPC_KERNEL_CUDA,
    .fusion = cuda_fusion,
    .open = cuda_open,
    .compile_plan = cuda_compile_plan,
    .write_artifact = cuda_write_artifact,
    .target = cuda_target,
    .stats = cuda_stats,
    .release = cuda_release,
};
