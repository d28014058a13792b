/*
 * artifact.c — opening .dpx artifacts: the whole file checked against its checksum
 * (ir/seal.h), then its plans read with every length checked. Host code (codegen/cpu/aot.c) is a
 * shared library, loaded, each kernel found by its symbol; GPU code (codegen/cuda/backend.c) is
 * a plain file whose blob ends in the table of its kernels' CUBIN and PTX, each node's symbol
 * "cuda:N" naming one.
 */
#include "runtime/artifact.h"
#include "ir/fusion.h"
#include "ir/seal.h"
#include "ir/serialize.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct art_plan {
  char role[16];
  dpc_plan *plan;
  dpc_plan_kernel *symbols; /* per node, as the blob names them */
  dpc_native_kernel *kernels;
} art_plan;

struct dpc_artifact {
  void *lib;
  char target[1200];
  art_plan *plans;
  uint32_t n;
  bool cuda;            /* version 2: GPU code */
  dpc_cuda_codes codes; /* its table */
};

static uint32_t get32(const unsigned char *b, size_t len, size_t *pos, bool *bad) {
  if (len - *pos < 4) {
    *bad = true;
    return 0;
  }
  const unsigned char *c = b + *pos;
  *pos += 4;
  return (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
}

/* A length-prefixed string into buf (at most n - 1 bytes). */
static bool get_str(const unsigned char *b, size_t len, size_t *pos, char *buf, size_t n) {
  bool bad = false;
  uint32_t l = get32(b, len, pos, &bad);
  if (bad || l >= n || l > len - *pos) return false;
  memcpy(buf, b + *pos, l);
  buf[l] = 0;
  *pos += l;
  return true;
}

/* Instructions the artifact's code may use that this CPU must have. */
static dpc_status check_cpu(const char *path, const char *target, dpc_diag *d) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  static const struct {
    const char *feature, *cpu;
  } need[] = {{"+avx512f", "avx512f"}, {"+avx2", "avx2"}, {"+fma", "fma"}};
  __builtin_cpu_init();
  for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
    const char *at = strstr(target, need[i].feature);
    if (!at || (at[strlen(need[i].feature)] != ',' && at[strlen(need[i].feature)] != 0)) continue;
    bool have = !strcmp(need[i].cpu, "avx512f") ? __builtin_cpu_supports("avx512f")
                : !strcmp(need[i].cpu, "avx2")  ? __builtin_cpu_supports("avx2")
                                                : __builtin_cpu_supports("fma");
    if (!have)
      return dpc_diag_fail(
          d, DPC_ERR_UNSUPPORTED,
          "%s was compiled for CPUs with %s, which this one lacks (compile it with --cpu for "
          "this machine)",
          path, need[i].cpu);
  }
#else
  (void)path, (void)target, (void)d;
#endif
  return DPC_OK;
}

/* The pointers a node's kernel takes: its inputs and outputs, or its fusion group's inputs and
 * its outputs; 0 when the group cannot be read. */
static uint32_t kernel_args(const dpc_graph *g, uint32_t node) {
  const dpc_node *n = &g->nodes[node];
  if (!dpc_group_is_root(g, node)) return n->n_in + n->n_out;
  dpc_group grp;
  dpc_diag d;
  dpc_diag_init(&d);
  uint32_t got = 0;
  if (!dpc_group_get(g, node, &grp, &d)) {
    got = grp.n_inputs + n->n_out;
    dpc_group_free(&grp);
  }
  dpc_diag_free(&d);
  return got;
}

/* A GPU artifact's kernels from its code table: "cuda:N" is code N, which takes the node's
 * data pointers (kernel_args). */
static dpc_status resolve_cuda(dpc_artifact *a, art_plan *ap, const char *path, dpc_diag *d) {
  const dpc_graph *g = ap->plan->g;
  for (uint32_t j = 0; j < g->n_nodes; j++) {
    const char *sym = ap->symbols[j].symbol;
    if (!sym[0]) continue;
    unsigned idx = 0;
    int used = 0;
    if (sscanf(sym, "cuda:%u%n", &idx, &used) != 1 || sym[used] || idx >= a->codes.n ||
        a->codes.code[idx].n_args != kernel_args(g, j))
      return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: corrupt kernel table (node %u: '%s')", path, j,
                           sym);
    ap->kernels[j].kind = DPC_KERNEL_CUDA;
    ap->kernels[j].handle = &a->codes.code[idx];
  }
  return DPC_OK;
}

/* The plans of a blob into a, kernels unresolved: every length checked against len. */
static dpc_status read_blob(dpc_artifact *a, const unsigned char *blob, size_t len,
                            const char *path, dpc_diag *d) {
  size_t pos = 4;
  bool bad = len < 12 || memcmp(blob, "DPCA", 4) != 0;
  if (bad) return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: no artifact header", path);
  uint32_t version = get32(blob, len, &pos, &bad);
  if (version != 1 && version != 2)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s: artifact format %u, this runtime reads 1 and 2 (recompile it)", path,
                         version);
  a->cuda = version == 2;
  if (!get_str(blob, len, &pos, a->target, sizeof a->target))
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: corrupt artifact header", path);
  uint32_t n = get32(blob, len, &pos, &bad);
  if (bad || n == 0 || n > 16)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: corrupt artifact header", path);
  if (!(a->plans = calloc(n, sizeof *a->plans)))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; i < n; i++) {
    art_plan *ap = &a->plans[i];
    if (!get_str(blob, len, &pos, ap->role, sizeof ap->role))
      return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: corrupt plan table", path);
    dpc_status st = dpc_plan_read(blob, len, &pos, path, &ap->plan, &ap->symbols, d);
    if (st) return st;
    a->n = i + 1;
    uint32_t nodes = ap->plan->g->n_nodes;
    ap->kernels = calloc(nodes ? nodes : 1, sizeof *ap->kernels);
    if (!ap->kernels) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; j < nodes; j++) {
      /* a symbol must end inside its field: dlsym reads it as a string */
      if (!memchr(ap->symbols[j].symbol, 0, sizeof ap->symbols[j].symbol))
        return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: corrupt kernel table", path);
      ap->kernels[j].total = ap->symbols[j].total;
    }
  }
  if (a->cuda) {
    dpc_status st = dpc_cuda_codes_read(blob, len, &pos, path, &a->codes, d);
    if (st) return st;
    for (uint32_t i = 0; i < a->n && !st; i++) st = resolve_cuda(a, &a->plans[i], path, d);
    if (st) return st;
  }
  if (pos != len)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: %zu stray bytes after the plans", path, len - pos);
  return DPC_OK;
}

dpc_status dpc_artifact_parse(const unsigned char *blob, size_t len, const char *name,
                              dpc_artifact **out, dpc_diag *d) {
  *out = NULL;
  dpc_artifact *a = calloc(1, sizeof *a);
  if (!a) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = read_blob(a, blob, len, name, d);
  if (st) {
    dpc_artifact_close(a);
    return st;
  }
  *out = a;
  return DPC_OK;
}

dpc_status dpc_artifact_open(const char *path, dpc_artifact **out, dpc_diag *d) {
  *out = NULL;
  /* A cut or damaged file must be refused before dlopen maps it: a mapping past its end faults
   * with SIGBUS on first touch, and damaged code runs as whatever instructions it now holds. */
  unsigned char *data = NULL;
  size_t data_len = 0;
  dpc_status st = dpc_seal_read_file(path, &data, &data_len, d);
  if (st) return st;
  /* GPU code is the blob itself ("DPCA"), less the trailer; host code a shared library */
  bool plain = data_len >= 4 + DPC_SEAL_BYTES && !memcmp(data, "DPCA", 4);
  dpc_artifact *a = calloc(1, sizeof *a);
  if (a && plain) st = read_blob(a, data, data_len - DPC_SEAL_BYTES, path, d);
  free(data);
  if (!a) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (plain) {
    if (!st && !a->cuda)
      st = dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s holds host code but is not a shared library", path);
    if (st) goto fail;
    *out = a;
    return DPC_OK;
  }
  /* dlopen searches the library path for a bare name: make it a path */
  char full[4096];
  snprintf(full, sizeof full, "%s%s", strchr(path, '/') ? "" : "./", path);
  a->lib = dlopen(full, RTLD_NOW | RTLD_LOCAL);
  if (!a->lib) {
    const char *why = dlerror();
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot load '%s': %s", path, why ? why : "?");
    goto fail;
  }
  const int64_t *size = dlsym(a->lib, "dpc_artifact_size");
  const unsigned char *blob = dlsym(a->lib, "dpc_artifact_blob");
  if (!size || !blob || *size < 12) {
    st = dpc_diag_fail(d, DPC_ERR_SYNTAX, "'%s' is a shared library but not a dpc artifact", path);
    goto fail;
  }
  if ((st = read_blob(a, blob, (size_t)*size, path, d))) goto fail;
  if (a->cuda) {
    st = dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: a shared library holding GPU code", path);
    goto fail;
  }
  if ((st = check_cpu(path, a->target, d))) goto fail;
  for (uint32_t i = 0; i < a->n && !st; i++) {
    art_plan *ap = &a->plans[i];
    for (uint32_t j = 0; j < ap->plan->g->n_nodes && !st; j++) {
      const char *name = ap->symbols[j].symbol;
      if (!name[0]) continue;
      void *sym = dlsym(a->lib, name);
      if (!sym)
        st = dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: kernel %s is missing", path, name);
      else {
        memcpy(&ap->kernels[j].fn, &sym, sizeof sym);
        ap->kernels[j].kind = DPC_KERNEL_HOST;
      }
    }
  }
  if (st) goto fail;
  *out = a;
  return DPC_OK;
fail:
  dpc_artifact_close(a);
  return st;
}

void dpc_artifact_close(dpc_artifact *a) {
  if (!a) return;
  for (uint32_t i = 0; i < a->n; i++) {
    dpc_plan_free(a->plans[i].plan);
    free(a->plans[i].kernels);
    free(a->plans[i].symbols);
  }
  free(a->plans);
  dpc_cuda_codes_free(&a->codes);
  if (a->lib) dlclose(a->lib);
  free(a);
}

const dpc_plan *dpc_artifact_plan(const dpc_artifact *a, const char *role,
                                  const dpc_native_kernel **kernels) {
  for (uint32_t i = 0; i < a->n; i++)
    if (!strcmp(a->plans[i].role, role)) {
      if (kernels) *kernels = a->plans[i].kernels;
      return a->plans[i].plan;
    }
  return NULL;
}

const char *dpc_artifact_target(const dpc_artifact *a) {
  return a->target;
}

const char *dpc_artifact_device_kind(const dpc_artifact *a) {
  return a->cuda ? "cuda" : NULL;
}

const char *dpc_artifact_role(const dpc_artifact *a, uint32_t i) {
  return i < a->n ? a->plans[i].role : NULL;
}
