/*
 * test_cuda_ops.c — every op's CUDA kernel, checked without a GPU, on the op test cases.
 *
 *   test_cuda_ops table                 every row of ir/ops.def has a CUDA lowering or a reason
 *   test_cuda_ops nvrtc CASES_DIR OP    each case's kernels compile with NVRTC for sm_80 and
 *                                       sm_90 and ptxas accepts the PTX for both
 *   test_cuda_ops train MODEL           12 training steps of an example on fashion-sized data
 *                                       (x [48, 784], labels of 10 classes, batch 8, 2 epochs)
 *                                       with every kernel an emulated CUDA kernel (the
 *                                       cuda-emu backend, codegen/cuda/emu.c): the losses
 *                                       match the reference backend's within 1e-5
 *   test_cuda_ops source MODEL OP       print the kernels of OP's nodes in MODEL (shapes must
 *                                       be concrete) as the cuda backend compiles them (a
 *                                       fusion group's kernel for its root), for reading
 *   test_cuda_ops fused GRAPH           GRAPH's fusion groups as one kernel each, run on the
 *                                       host: the same bits as unfused, the reference's values
 *                                       (tests/cuda/cuda_fused.c)
 *   test_cuda_ops device-fused GRAPH fake|gpu
 *                                       the same graph's fused kernels on cuda:0, matmuls with
 *                                       their bias and ReLU on cuBLASLt
 *   test_cuda_ops device-artifact-dp MODEL fake|gpu
 *                                       the same compiled data parallel over cuda:0,cuda:1
 *   test_cuda_ops device-artifact MODEL fake|gpu
 *                                       MODEL compiled into a GPU artifact and run by the
 *                                       runtime library on cuda:0 (tests/cuda/cuda_artifact.c)
 *   test_cuda_ops emu CASES_DIR OP      each case's kernels run on the host (the same source,
 *                                       compiled by the system C++ compiler against
 *                                       codegen/cuda/emu/dpc_cuda_emu.h) and match the
 *                                       reference backend on the case's inputs
 *
 * The cases are tests/ops/cases/OP/NAME (model.graph, inputs as .npy, `# test:` directives),
 * the same ones the reference and LLVM backends are checked on. Every node of the op in the
 * case's graph is checked, with the graph bound at the shapes of the case's inputs; its inputs
 * are the reference backend's values of them, and its outputs are compared with the reference
 * backend's, at the tolerances the CPU op tests use. A case whose reference run fails (an
 * `error=` case: a bad label, an integer division by zero) has no values to compare and is
 * reported as skipped, never as passed.
 */
#include "codegen/cuda/cuda.h"
#include "codegen/cuda/emu.h"
#include "passes/pass.h"
#include "driver/train.h"
#include "runtime/rng.h"
#include "driver/driver.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "runtime/npy.h"
#include "tests/cuda/checks.h"
#include "tests/ops/tolerance.h"
#include "tests/unit/unit.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FEEDS 64

typedef struct directives {
  double rtol, atol;
  bool have_rtol, have_atol, training, error;
} directives;

static void read_directives(const char *path, directives *dv) {
  memset(dv, 0, sizeof *dv);
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "# test:", 7)) continue;
    for (char *tok = strtok(line + 7, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
      if (!strncmp(tok, "rtol=", 5))
        dv->rtol = strtod(tok + 5, NULL), dv->have_rtol = true;
      else if (!strncmp(tok, "atol=", 5))
        dv->atol = strtod(tok + 5, NULL), dv->have_atol = true;
      else if (!strncmp(tok, "training=", 9))
        dv->training = atoi(tok + 9) != 0;
      else if (!strncmp(tok, "error=", 6)) {
        dv->error = true;
        break;
      }
    }
  }
  fclose(f);
}

const char *g_work; /* a scratch folder for sources, PTX and shared objects (checks.h) */
static const char *g_mode;
static const dpc_codegen_backend *g_backend; /* device mode: dpc_codegen_cuda, or with emulation */

/* ---- nvrtc: compile for both architectures, ptxas on the PTX --------------------------------- */

int check_nvrtc(const dpc_cuda_kernel *k, const char *label) {
  static const char *const archs[] = {"sm_80", "sm_90"};
  int fails = 0;
  for (size_t a = 0; a < 2; a++) {
    dpc_diag d;
    dpc_diag_init(&d);
    dpc_cuda_binary b;
    if (dpc_cuda_compile(k->source, label, archs[a], &b, &d)) {
      printf("FAIL %s: %s\n", label, d.msg);
      dpc_diag_free(&d);
      fails++;
      continue;
    }
    dpc_diag_free(&d);
    char ptx[4200], cmd[9000];
    snprintf(ptx, sizeof ptx, "%s/k_%s.ptx", g_work, archs[a]);
    FILE *f = fopen(ptx, "wb");
    bool wrote = f && fwrite(b.ptx, 1, b.ptx_size, f) == b.ptx_size;
    if (f) fclose(f);
    bool elf = b.cubin_size > 4 && !memcmp(b.cubin,
                                           "\x7f"
                                           "ELF",
                                           4);
    size_t ptx_size = b.ptx_size, cubin_size = b.cubin_size;
    dpc_cuda_binary_free(&b);
    if (!wrote || !elf) {
      printf("FAIL %s: %s\n", label, !wrote ? "cannot write the PTX" : "the CUBIN is not ELF");
      fails++;
      continue;
    }
    snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s' -o '%s/k.cubin' 2>&1", DPC_PTXAS, archs[a], ptx,
             g_work);
    FILE *p = popen(cmd, "r");
    char out[2048] = "";
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    int rc = p ? pclose(p) : -1;
    if (rc != 0) {
      printf("FAIL %s: ptxas -arch=%s rejected the PTX (exit %d):\n%s\n", label, archs[a], rc, out);
      fails++;
      continue;
    }
    printf("ok   %s: %s, PTX %zu bytes, CUBIN %zu bytes, ptxas accepts it\n", label, archs[a],
           ptx_size, cubin_size);
  }
  return fails;
}

/* ---- emu: the same source compiled for the host and run on the reference values ---------------
 */

typedef struct dpc_kargs_host {
  void *p[32];
  unsigned long long step;
} dpc_kargs_host; /* the prelude's dpc_kargs, as the host sees it */

typedef int (*launch_fn)(void *kernel, const unsigned *grid, const unsigned *block,
                         const dpc_kargs_host *args);

static const dpc_tensor *find_named(const dpc_named *v, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(v[i].name, name)) return &v[i].t;
  return NULL;
}

/* The emulated build of a kernel source (dpc_cuda_emu.h, the source, dpc_cuda_emu_launch.h), or
 * NULL after printing why. */
static void *build_emu(const char *source, const char *label) {
  char src[4200], wrap[4200], so[4200], cmd[16000];
  snprintf(src, sizeof src, "%s/kernel.cu", g_work);
  snprintf(wrap, sizeof wrap, "%s/wrap.cpp", g_work);
  /* a fresh name each time: dlopen of a path already loaded returns the loaded library */
  static unsigned serial;
  snprintf(so, sizeof so, "%s/kernel_%u.so", g_work, serial++);
  FILE *f = fopen(src, "w");
  if (!f || fputs(source, f) < 0) {
    printf("FAIL %s: cannot write %s\n", label, src);
    if (f) fclose(f);
    return NULL;
  }
  fclose(f);
  f = fopen(wrap, "w");
  if (!f) {
    printf("FAIL %s: cannot write %s\n", label, wrap);
    return NULL;
  }
  fprintf(
      f, "#include \"%s/dpc_cuda_emu.h\"\n#include \"%s\"\n#include \"%s/dpc_cuda_emu_launch.h\"\n",
      DPC_CUDA_EMU_DIR, src, DPC_CUDA_EMU_DIR);
  fclose(f);
  /* -fno-gnu-unique: the shared memory of a templated block reduction is a static in a
   * template, which would otherwise be one object for the whole process and keep every
   * library loaded */
  snprintf(
      cmd, sizeof cmd,
      "'%s' -std=c++17 -O0 -pipe -fPIC -shared -fno-gnu-unique -o '%s' '%s' -lpthread -lm 2>&1",
      DPC_HOST_CXX, so, wrap);
  FILE *p = popen(cmd, "r");
  char out[4096] = "";
  size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
  out[got] = 0;
  if (!p || pclose(p) != 0) {
    printf("FAIL %s: the host compiler rejected the kernel source:\n%s\n", label, out);
    return NULL;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!h) printf("FAIL %s: dlopen: %s\n", label, dlerror());
  unlink(so);
  return h;
}

/* Node `node`'s outputs `got` against the reference values, at the case's tolerances; 0 when
 * all agree. */
static int compare_outputs(const dpc_graph *gb, uint32_t node, const dpc_tensor *got,
                           const dpc_named *vals, uint32_t nv, const directives *dv,
                           uint32_t n_launch, const char *label) {
  const dpc_node *n = &gb->nodes[node];
  int fails = 0;
  for (uint32_t j = 0; j < n->n_out; j++) {
    const dpc_value *v = &gb->values[n->out + j];
    const dpc_tensor *want = find_named(vals, nv, dpc_graph_str(gb, v->name));
    if (!want || !got[j].data) {
      printf("FAIL %s: no %s value for output %u\n", label, want ? "computed" : "reference", j);
      fails = 1;
      continue;
    }
    double rtol, atol;
    default_tol(v->dtype, &rtol, &atol);
    if (dv->have_rtol) rtol = dv->rtol;
    if (dv->have_atol) atol = dv->atol;
    int64_t cnt = dpc_tensor_numel(&got[j]), bad = 0;
    double worst = 0;
    for (int64_t e = 0; e < cnt; e++) {
      double a = dpc_tload(&got[j], e), b = dpc_tload(want, e);
      bool ok = dpc_dtype_is_float(v->dtype) ? close_enough(a, b, rtol, atol)
                                             : dpc_tload_i64(&got[j], e) == dpc_tload_i64(want, e);
      if (!ok && bad++ < 5)
        printf("     %s[%lld] = %.9g, reference %.9g\n", dpc_graph_str(gb, v->name), (long long)e,
               a, b);
      if (isfinite(a) && isfinite(b) && fabs(a - b) > worst) worst = fabs(a - b);
    }
    if (bad) {
      printf("FAIL %s: output %u: %lld of %lld elements differ from the reference (rtol %g, atol "
             "%g)\n",
             label, j, (long long)bad, (long long)cnt, rtol, atol);
      fails = 1;
    } else {
      printf("ok   %s: output %u %s, %lld elements, %u launch(es), max abs error %.3g\n", label, j,
             dpc_dtype_name(v->dtype), (long long)cnt, n_launch, worst);
    }
  }
  return fails;
}

static int run_emu(const dpc_graph *gb, uint32_t node, const dpc_cuda_kernel *k,
                   const dpc_named *vals, uint32_t nv, const directives *dv, const char *label) {
  const dpc_node *n = &gb->nodes[node];
  void *h = build_emu(k->source, label);
  if (!h) return 1;
  /* POSIX's dlsym returns functions as void *; C has no cast between the two */
  launch_fn launch = NULL;
  void *sym = dlsym(h, "dpc_emu_launch");
  memcpy(&launch, &sym, sizeof launch);
  int fails = 0;
  dpc_kargs_host args = {{0}, 0};
  dpc_tensor outs[DPC_CUDA_MAX_ARGS];
  memset(outs, 0, sizeof outs);
  for (uint32_t i = 0; i < n->n_in; i++) {
    const dpc_value *v = dpc_node_input(gb, n, i);
    const dpc_tensor *t = find_named(vals, nv, dpc_graph_str(gb, v->name));
    if (!t) {
      printf("FAIL %s: no reference value for input %u\n", label, i);
      fails = 1;
      goto done;
    }
    args.p[i] = t->data;
  }
  for (uint32_t j = 0; j < n->n_out; j++) {
    const dpc_value *v = &gb->values[n->out + j];
    outs[j].dtype = v->dtype;
    outs[j].shape = v->shape;
    size_t bytes = dpc_tensor_bytes(&outs[j]);
    outs[j].data = malloc(bytes ? bytes : 1);
    /* all ones: NaN in the floats, -1 in the integers, so an element never written shows */
    memset(outs[j].data, 0xff, bytes ? bytes : 1);
    args.p[n->n_in + j] = outs[j].data;
  }
  if (!launch) {
    printf("FAIL %s: no dpc_emu_launch in the compiled kernel\n", label);
    fails = 1;
    goto done;
  }
  for (uint32_t l = 0; l < k->n_launch; l++) {
    void *fn = dlsym(h, k->launch[l].name);
    if (!fn || launch(fn, k->launch[l].grid, k->launch[l].block, &args)) {
      printf("FAIL %s: cannot launch %s\n", label, k->launch[l].name);
      fails = 1;
      goto done;
    }
  }
  fails = compare_outputs(gb, node, outs, vals, nv, dv, k->n_launch, label);
done:
  for (uint32_t j = 0; j < n->n_out; j++) free(outs[j].data);
  dlclose(h);
  return fails;
}

/* ---- one case ----------------------------------------------------------------------------------
 */

/* Give every value the op's nodes touch a name and make it an output, so the reference run
 * returns it. */
static dpc_status expose_values(dpc_graph *g, dpc_op op, dpc_diag *d) {
  uint32_t n_nodes = g->n_nodes;
  for (uint32_t i = 0; i < n_nodes; i++) {
    if (g->nodes[i].op != op) continue;
    uint32_t ids[DPC_CUDA_MAX_ARGS * 2], m = 0;
    const dpc_node *n = &g->nodes[i];
    for (uint32_t k = 0; k < n->n_in && m < DPC_CUDA_MAX_ARGS; k++) ids[m++] = g->ids[n->in + k];
    for (uint32_t k = 0; k < n->n_out && m < 2 * DPC_CUDA_MAX_ARGS; k++) ids[m++] = n->out + k;
    for (uint32_t k = 0; k < m; k++) {
      uint32_t v = ids[k];
      if (g->values[v].name == DPC_NONE) {
        char name[48];
        snprintf(name, sizeof name, "cuda_test_v%u", v);
        dpc_status st = dpc_graph_set_name(g, v, name, strlen(name), d);
        if (st) return st;
      }
      bool is_out = false;
      for (uint32_t o = 0; o < g->n_outputs; o++) is_out |= g->outputs[o] == v;
      if (!is_out) {
        dpc_status st = dpc_graph_add_output(g, v, d);
        if (st) return st;
      }
    }
  }
  return DPC_OK;
}

typedef struct tally {
  int passed, failed, skipped, nodes;
} tally;

static void run_case(const char *dir, const char *label, dpc_op op, tally *t) {
  char path[8192];
  snprintf(path, sizeof path, "%s/model.graph", dir);
  directives dv;
  read_directives(path, &dv);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL, *gb = NULL;
  dpc_named feeds[MAX_FEEDS] = {{0}}, *vals = NULL;
  uint32_t nf = 0, nv = 0;
  int fails = 0;
  if (dpc_driver_load(path, &g, &d)) {
    printf("skip %s: the model does not load (%s)\n", label, dv.error ? "an error case" : d.msg);
    t->skipped++;
    if (!dv.error) t->failed++, t->skipped--;
    goto done;
  }
  for (uint32_t i = 0; i < g->n_nodes && nf < MAX_FEEDS; i++) {
    dpc_op o = g->nodes[i].op;
    if (o != DPC_OP_INPUT && o != DPC_OP_PARAM && o != DPC_OP_STATE) continue;
    const char *vn = dpc_graph_str(g, g->values[g->nodes[i].out].name);
    snprintf(path, sizeof path, "%s/%s.npy", dir, vn);
    if (access(path, R_OK)) continue;
    feeds[nf].name = dpc_strdup(vn);
    if (dpc_npy_read(path, &feeds[nf++].t, &d)) {
      printf("FAIL %s: %s\n", label, d.msg);
      fails = 1;
      goto done;
    }
  }
  /* bind the symbols at the inputs' shapes */
  int64_t *sv = calloc(g->n_syms + 1, sizeof *sv);
  for (uint32_t s = 0; s < g->n_syms; s++) sv[s] = -1;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    if (n->op != DPC_OP_INPUT && n->op != DPC_OP_PARAM && n->op != DPC_OP_STATE) continue;
    const dpc_value *v = &g->values[n->out];
    for (uint32_t f = 0; f < nf; f++) {
      if (strcmp(feeds[f].name, dpc_graph_str(g, v->name))) continue;
      for (uint32_t k = 0; k < v->shape.rank && k < feeds[f].t.shape.rank; k++)
        if (DPC_DIM_IS_SYM(v->shape.d[k]))
          sv[DPC_DIM_SYM_NO(v->shape.d[k])] = feeds[f].t.shape.d[k];
    }
  }
  if (expose_values(g, op, &d)) {
    free(sv);
    printf("FAIL %s: %s\n", label, d.msg);
    fails = 1;
    goto done;
  }
  gb = dpc_graph_clone(g);
  dpc_status st = gb ? dpc_graph_bind(gb, sv, &d) : DPC_ERR_NOMEM;
  free(sv);
  if (st) {
    printf("FAIL %s: cannot bind the graph: %s\n", label, d.msg ? d.msg : "out of memory");
    fails = 1;
    goto done;
  }
  bool device = !strcmp(g_mode, "device");
  if (!strcmp(g_mode, "emu") || device) {
    if (dpc_driver_infer(g, NULL, NULL, feeds, nf, dv.training, &vals, &nv, &d)) {
      if (dv.error) {
        printf("skip %s: the reference run fails, as the case expects (%s)\n", label, d.msg);
        t->skipped++;
      } else {
        printf("FAIL %s: the reference run failed: %s\n", label, d.msg);
        t->failed++;
      }
      goto done;
    }
  }
  if (device) {
    /* the whole graph on cuda:0 through the cuda backend; each node of the op's outputs */
    dpc_named *got = NULL;
    uint32_t ng = 0;
    dpc_exec_opts x = {.backend = g_backend};
    if (dpc_driver_infer(g, NULL, &x, feeds, nf, dv.training, &got, &ng, &d)) {
      printf("FAIL %s: the run on %s failed: %s\n", label, g_backend->name, d.msg);
      t->failed++;
      goto done;
    }
    for (uint32_t i = 0; i < gb->n_nodes; i++) {
      if (gb->nodes[i].op != op) continue;
      char nlabel[700];
      snprintf(nlabel, sizeof nlabel, "%s#%u", label, i);
      dpc_tensor outs[DPC_CUDA_MAX_ARGS];
      memset(outs, 0, sizeof outs);
      for (uint32_t j = 0; j < gb->nodes[i].n_out && j < DPC_CUDA_MAX_ARGS; j++) {
        const dpc_tensor *o =
            find_named(got, ng, dpc_graph_str(gb, gb->values[gb->nodes[i].out + j].name));
        if (o) outs[j] = *o;
      }
      t->nodes++;
      fails |= compare_outputs(gb, i, outs, vals, nv, &dv, 0, nlabel) != 0;
    }
    dpc_named_free(got, ng);
    if (fails)
      t->failed++;
    else
      t->passed++;
    goto done;
  }
  for (uint32_t i = 0; i < gb->n_nodes; i++) {
    if (gb->nodes[i].op != op) continue;
    char nlabel[700];
    snprintf(nlabel, sizeof nlabel, "%s#%u", label, i);
    dpc_cuda_kernel k;
    dpc_diag_clear(&d);
    if (dpc_cuda_lower(gb, i, dv.training, &k, &d)) {
      printf("FAIL %s: %s\n", nlabel, d.msg);
      fails = 1;
      continue;
    }
    t->nodes++;
    if (!strcmp(g_mode, "nvrtc"))
      fails |= check_nvrtc(&k, nlabel) != 0;
    else
      fails |= run_emu(gb, i, &k, vals, nv, &dv, nlabel) != 0;
    dpc_cuda_kernel_free(&k);
  }
  if (fails)
    t->failed++;
  else
    t->passed++;
done:
  for (uint32_t i = 0; i < nf; i++) {
    free(feeds[i].name);
    free(feeds[i].t.data);
  }
  dpc_named_free(vals, nv);
  dpc_graph_free(gb);
  dpc_graph_free(g);
  dpc_diag_free(&d);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every op has a lowering or a stated reason; "not yet" is a failure. */
static int check_table(void) {
  int fails = 0, lowered = 0;
  for (int op = 0; op < DPC_OP_COUNT; op++) {
    const char *why = NULL;
    if (dpc_cuda_lowers((dpc_op)op, &why)) {
      lowered++;
      continue;
    }
    bool reason = why && strcmp(why, "no CUDA lowering yet");
    printf("%s %s: %s\n", reason ? "ok  " : "FAIL", dpc_op_name((dpc_op)op), why);
    fails += !reason;
  }
  printf("%d of %d ops lowered to CUDA, %d without a reason\n", lowered, DPC_OP_COUNT, fails);
  return fails ? 1 : 0;
}

/* The kernels of op's nodes in a model, printed with their launches. */
static int print_source(const char *model, const char *opname) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  int rc = 0;
  /* the passes as the cuda backend's plans run them: fusion groups formed */
  dpc_pass_opts po = {.fuse = dpc_codegen_fusion(&dpc_codegen_cuda)};
  if (dpc_driver_load(model, &g, &d) || dpc_passes_run(g, &po, &d)) {
    printf("FAIL: %s\n", d.msg);
    rc = 1;
  }
  for (uint32_t i = 0; !rc && i < g->n_nodes; i++) {
    if (strcmp(dpc_op_name(g->nodes[i].op), opname) || g->nodes[i].fused != DPC_NONE) continue;
    dpc_cuda_kernel k;
    if (dpc_cuda_lower(g, i, false, &k, &d)) {
      printf("FAIL: %s\n", d.msg);
      rc = 1;
      continue;
    }
    fputs(k.source, stdout);
    for (uint32_t l = 0; l < k.n_launch; l++)
      printf("// launch %s<<<%u, %u>>>\n", k.launch[l].name, k.launch[l].grid[0],
             k.launch[l].block[0]);
    dpc_cuda_kernel_free(&k);
  }
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return rc;
}

/* ---- device: the cuda backend's kernels on a cuda:0 device, a GPU or the test driver --------
 *
 * With the test driver (tests/cuda/fake_driver.c, by $DPC_CUDA_DRIVER), every kernel the backend
 * compiles is also built for the host emulation from the same source, and its CUBINs and PTX are
 * registered with the driver as that build: the runtime's GPU device then loads and launches
 * them as it would on a GPU. */

static void (*g_register)(const void *image, void *lib);
static dpc_codegen_backend with_emulation;

static dpc_status emulated_compile_plan(void *state, const dpc_plan *plan,
                                        dpc_native_kernel *kernels, dpc_diag *d) {
  dpc_status st = dpc_codegen_cuda.compile_plan(state, plan, kernels, d);
  /* per call: a later plan's code may sit where a freed one was, so it is registered again */
  const void *done[1024];
  uint32_t n_done = 0;
  for (uint32_t i = 0; !st && i < plan->g->n_nodes; i++) {
    if (kernels[i].kind != DPC_KERNEL_CUDA) continue;
    const dpc_cuda_code *code = kernels[i].handle;
    for (const dpc_cuda_code *c = code; !st && c; c = c->other == code ? NULL : c->other) {
      bool seen = false;
      for (uint32_t k = 0; k < n_done && !seen; k++) seen = done[k] == c;
      if (seen) continue;
      dpc_cuda_kernel k;
      if ((st = dpc_cuda_lower(plan->g, i, c->training, &k, d))) break;
      void *lib = build_emu(k.source, dpc_op_name(plan->g->nodes[i].op));
      dpc_cuda_kernel_free(&k);
      if (!lib) return dpc_diag_fail(d, DPC_ERR_INTERNAL, "the emulated build failed (above)");
      for (uint32_t a = 0; a < c->n_cubin; a++) g_register(c->cubin[a].data, lib);
      g_register(c->ptx, lib);
      if (n_done < 1024) done[n_done++] = c;
    }
  }
  return st;
}

/* GEMMs the test cuBLAS and cuBLASLt have run (fake_cublas.c); NULL until a fake backend is
 * open. */
static unsigned (*g_gemms)(void), (*g_lt_gemms)(void);
static bool g_blas_off; /* fake-kernels */
static bool g_lt_off;   /* fake-kernels, fake-nolt */

/* Whether work took the path asked for on a test library: some ran there (`count` of it), or,
 * with the library `off`, none did ("N <what> (<why>)"). 0 when so, and when count is NULL (no
 * test library open). */
static int check_ran(unsigned (*count)(void), bool off, const char *what, const char *off_why) {
  if (!count) return 0;
  unsigned n = count();
  bool ok = off ? n == 0 : n > 0;
  printf("%s %u %s (%s)\n", ok ? "ok  " : "FAIL", n, what, off ? off_why : "expected some");
  return ok ? 0 : 1;
}

/* With the test libraries, whether the matmuls took the path asked for: cuBLAS (some GEMMs ran
 * there) or the generated kernels (none did). 0 when they did. */
static int check_gemm_path(void) {
  return check_ran(g_gemms, g_blas_off, "GEMMs ran on the test cuBLAS",
                   "off: the generated matmul kernels run");
}

/* After training with the test libraries: the matmuls whose bias (and ReLU) fused ran on
 * cuBLASLt with their epilogue, or (without it) none did. 0 when so. */
static int check_lt_path(void) {
  return check_ran(g_lt_gemms, g_lt_off, "GEMMs ran with their epilogue on the test cuBLASLt",
                   "off: the epilogues run as kernels");
}

/* With the test driver, after a training run: its sessions' host copies of the GPUs' buffers
 * and its staging were page-locked (some copies came from such memory), and all given back. */
static int check_pinned(void) {
  void *h = dlopen(DPC_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  void *sym = h ? dlsym(h, "dpc_fake_cuda_pinned") : NULL;
  void (*pinned)(unsigned *, unsigned *, unsigned *) = NULL;
  memcpy(&pinned, &sym, sizeof sym);
  if (!pinned) return printf("FAIL: the test driver has no dpc_fake_cuda_pinned\n"), 1;
  unsigned live, from_pinned, from_pageable;
  pinned(&live, &from_pinned, &from_pageable);
  bool ok = live == 0 && from_pinned > 0;
  printf("%s %u copies between the GPU and page-locked host memory, %u from pageable memory; %u "
         "page-locked buffers left\n",
         ok ? "ok  " : "FAIL", from_pinned, from_pageable, live);
  return ok ? 0 : 1;
}

/* All-reduces the test NCCL has run (fake_nccl.c); NULL until a fake backend is open. */
static unsigned (*g_reduces)(void);
static bool g_nccl_off; /* fake-host */

/* "fake": the test driver, cuBLAS, cuBLASLt and NCCL; "fake-kernels": the test driver with cuBLAS
 * off, so matmuls run the generated kernels; "fake-nolt": cuBLASLt off, so a fused matmul is
 * cuBLAS's GEMM and then its epilogue's kernel; "fake-host": with NCCL off, so the GPUs'
 * all-reduces go through the host; "gpu": the machine's driver, cuBLAS and NCCL. 77 (ctest's skip)
 * when cuda:0 does not open on a GPU, 1 when a test library does not load, else 0. */
static int open_backend(const char *which) {
  bool kernels = !strcmp(which, "fake-kernels");
  g_nccl_off = !strcmp(which, "fake-host");
  g_lt_off = kernels || !strcmp(which, "fake-nolt");
  if (kernels || g_nccl_off || !strcmp(which, "fake") || !strcmp(which, "fake-nolt")) {
    setenv("DPC_CUBLASLT", g_lt_off ? "off" : DPC_FAKE_CUBLAS, 1);
    setenv("DPC_NCCL", g_nccl_off ? "off" : DPC_FAKE_NCCL, 1);
    void *hn = dlopen(DPC_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
    void *rs = hn ? dlsym(hn, "dpc_fake_nccl_all_reduces") : NULL;
    if (!rs) return printf("FAIL: cannot load the test NCCL %s\n", DPC_FAKE_NCCL), 1;
    memcpy(&g_reduces, &rs, sizeof rs);
    setenv("DPC_CUBLAS", kernels ? "off" : DPC_FAKE_CUBLAS, 1);
    g_blas_off = kernels;
    void *hb = dlopen(DPC_FAKE_CUBLAS, RTLD_NOW | RTLD_LOCAL);
    void *gs = hb ? dlsym(hb, "dpc_fake_cublas_gemms") : NULL;
    void *ls = hb ? dlsym(hb, "dpc_fake_cublaslt_gemms") : NULL;
    if (!gs || !ls) return printf("FAIL: cannot load the test cuBLAS %s\n", DPC_FAKE_CUBLAS), 1;
    memcpy(&g_gemms, &gs, sizeof gs);
    memcpy(&g_lt_gemms, &ls, sizeof ls);
    setenv("DPC_CUDA_DRIVER", DPC_FAKE_CUDA, 1);
    void *h = dlopen(DPC_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, "dpc_fake_cuda_register") : NULL;
    if (!sym) return printf("FAIL: cannot load the test driver %s\n", DPC_FAKE_CUDA), 1;
    memcpy(&g_register, &sym, sizeof sym);
    with_emulation = dpc_codegen_cuda;
    with_emulation.compile_plan = emulated_compile_plan;
    g_backend = &with_emulation;
    return 0;
  }
  unsetenv("DPC_CUDA_DRIVER");
  unsetenv("DPC_CUBLAS");
  unsetenv("DPC_CUBLASLT");
  unsetenv("DPC_NCCL");
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_device *dev = NULL;
  if (dpc_device_open("cuda:0", &dev, &d)) {
    printf("skip: no GPU to run on: %s\n", d.msg);
    dpc_diag_free(&d);
    return 77;
  }
  dpc_device_close(dev);
  dpc_diag_free(&d);
  g_backend = &dpc_codegen_cuda;
  return 0;
}

/* The cuda device's own calls over the test driver: the probe finding it, opening (and naming
 * a GPU that is not there), memory zeroed at allocation, copies each way and within the device,
 * events made, waited on and released, and every buffer and event given back. */
static int device_basics(void) {
  int fails = 0;
#define EXPECT(cond, ...) CUDA_EXPECT(fails, cond, __VA_ARGS__)
  void *h = dlopen(DPC_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  void *sym = h ? dlsym(h, "dpc_fake_cuda_counts") : NULL;
  void (*counts)(unsigned *, unsigned *, unsigned *) = NULL;
  memcpy(&counts, &sym, sizeof sym);
  if (!counts) return printf("FAIL: cannot load the test driver %s\n", DPC_FAKE_CUDA), 1;
  /* the probe behind `dpc devices` loads the driver the devices load */
  dpc_cuda_probe probe;
  dpc_cuda_driver_probe(&probe);
  dpc_cuda_driver_probe_cublas(&probe);
  EXPECT(probe.loaded && probe.initialised && probe.gpus == 1 && probe.version == 13000 &&
             probe.cublas && probe.cublaslt && probe.nccl &&
             !strcmp(probe.note, "CUDA driver 13.0, 1 GPU; matmuls on cuBLAS; bias and ReLU "
                                 "epilogues on cuBLASLt; all-reduces between GPUs over NCCL "
                                 "2.28.9"),
         "the probe finds the test driver, cuBLAS, cuBLASLt and NCCL: %s", probe.note);
  setenv("DPC_CUBLASLT", "off", 1);
  dpc_cuda_driver_probe(&probe);
  dpc_cuda_driver_probe_cublas(&probe);
  EXPECT(probe.cublas && !probe.cublaslt &&
             strstr(probe.note, "; cuBLASLt is off ($DPC_CUBLASLT=off): matmul epilogues run as "
                                "kernels"),
         "without cuBLASLt the probe says the epilogues run as kernels: %s", probe.note);
  setenv("DPC_CUBLASLT", DPC_FAKE_CUBLAS, 1);
  setenv("DPC_CUBLAS", "/nonexistent/libcublas.so.13", 1);
  setenv("DPC_NCCL", "off", 1);
  dpc_cuda_driver_probe(&probe);
  dpc_cuda_driver_probe_cublas(&probe);
  EXPECT(!probe.nccl && strstr(probe.note, "; NCCL is off ($DPC_NCCL=off): all-reduces between "
                                           "GPUs go through the host"),
         "without NCCL the probe says the all-reduces go through the host: %s", probe.note);
  setenv("DPC_NCCL", DPC_FAKE_NCCL, 1);
  EXPECT(probe.gpus == 1 && !probe.cublas &&
             strstr(probe.note, "CUDA driver 13.0, 1 GPU; no cuBLAS found (/nonexistent/") &&
             strstr(probe.note, "matmuls run dpc's kernels"),
         "without cuBLAS the probe says the generated matmuls run: %s", probe.note);
  setenv("DPC_CUBLAS", DPC_FAKE_CUBLAS, 1);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_device *dev = NULL;
  EXPECT(dpc_device_open("cuda:1", &dev, &d) != DPC_OK && d.msg && strstr(d.msg, "cuda:1") &&
             strstr(d.msg, "cuDeviceGet"),
         "cuda:1 (no such GPU) fails naming the device and the call: %s", d.msg);
  dpc_diag_clear(&d);
  if (dpc_device_open("cuda:0", &dev, &d)) {
    printf("FAIL cuda:0 does not open: %s\n", d.msg);
    dpc_diag_free(&d);
    return 1;
  }
  EXPECT(!strcmp(dev->ops->kind, "cuda") && !dev->ops->host_visible && !strcmp(dev->name, "cuda:0"),
         "cuda:0 is a %s device, host visible: %d", dev->ops->kind, dev->ops->host_visible);
  uint64_t gemms = 1;
  const char *blas = dpc_device_cuda_blas(dev, &gemms);
  EXPECT(gemms == 0 && strstr(blas, "not tried yet"), "cuBLAS is loaded at the first GEMM: %s",
         blas);
  enum { N = 1000 };
  unsigned char host[N], back[N];
  void *a = NULL, *b = NULL;
  EXPECT(!dev->ops->alloc(dev, N, &a, &d) && !dev->ops->alloc(dev, N, &b, &d), "two buffers");
  memset(back, 1, N);
  bool zero = !dev->ops->copy(dev, DPC_COPY_D2H, back, a, N, NULL, &d);
  for (int i = 0; i < N && zero; i++) zero = back[i] == 0;
  EXPECT(zero, "a new buffer reads back as zeros (the driver's memory starts as 0xa5)");
  for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 7 + 3);
  memset(back, 0, N);
  bool same = !dev->ops->copy(dev, DPC_COPY_H2D, a, host, N, NULL, &d) &&
              !dev->ops->copy(dev, DPC_COPY_D2D, b, a, N, NULL, &d) &&
              !dev->ops->copy(dev, DPC_COPY_D2H, back, b, N, NULL, &d) && !memcmp(host, back, N);
  EXPECT(same, "host to device, device to device and back give the same bytes");
  dpc_device_event e = {0};
  EXPECT(!dev->ops->event_record(dev, &e, &d) && e.impl && e.owner == dev && e.recorded == 1 &&
             !dev->ops->event_wait(dev, &e, &d) && !dev->ops->synchronize(dev, &d),
         "an event recorded, waited on, and the stream synchronized");
  unsigned launched, live, events;
  counts(&launched, &live, &events);
  EXPECT(live == 2 && events == 1, "2 buffers and 1 event live (%u, %u)", live, events);
  dev->ops->event_free(dev, &e);
  dev->ops->free(dev, a);
  dev->ops->free(dev, b);
  counts(&launched, &live, &events);
  EXPECT(live == 0 && events == 0 && !e.impl, "all given back (%u buffers, %u events live)", live,
         events);
  dpc_device_close(dev);
  dpc_diag_free(&d);
#undef EXPECT
  return fails ? 1 : 0;
}

/* Twelve steps of `model` on `be` (over `devices`, NULL for one) against the reference backend on
 * one device: losses within a relative 1e-5. */
/* The strategy of the device run (device-mp: model; device-pp: a pipeline of 2 stages and 4
 * micro-batches, 1F1B); NULL: the default over its devices. */
static const char *g_strategy;
/* device-mixed: the model's own placement over the host's CPU and cuda:0 */
static bool g_mixed;

/* What the trainer notes at its start (placement, the collectives' path), for the checks. */
static char g_notes[2048];
static void keep_note(void *user, const char *msg) {
  (void)user;
  size_t at = strlen(g_notes);
  snprintf(g_notes + at, sizeof g_notes - at, "%s\n", msg);
}

/* The test losses of a training log's epochs (the lines that have one), at most max. */
static int read_test_losses(const char *path, double *out, int max) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int n = 0;
  while (f && fgets(line, sizeof line, f) && n < max) {
    const char *p = strstr(line, "\"test_loss\": ");
    if (p) out[n++] = strtod(p + 13, NULL);
  }
  if (f) fclose(f);
  return n;
}

static int train_model(const char *model, const dpc_codegen_backend *be, const char *devices) {
  char work[] = "/tmp/dpc_cuda_train_XXXXXX";
  if (!mkdtemp(work)) return printf("FAIL: cannot make a scratch folder\n"), 1;
  char xs[128], ys[128], data[300], log[2][128];
  snprintf(xs, sizeof xs, "%s/x.npy", work);
  snprintf(ys, sizeof ys, "%s/y.npy", work);
  snprintf(data, sizeof data, "%s,%s", xs, ys);
  enum { N = 48 };
  float *x = malloc(sizeof(float) * N * 784);
  int32_t labels[N];
  for (int i = 0; i < N * 784; i++) x[i] = (float)dpc_rng_uniform(3, (uint64_t)i);
  for (int i = 0; i < N; i++) labels[i] = (int32_t)(dpc_rng_bits(4, (uint64_t)i) % 10);
  dpc_tensor tx = {x, DPC_F32, {2, {N, 784}}}, ty = {labels, DPC_I32, {1, {N}}};
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  int fails = 0;
  if (dpc_npy_write(xs, &tx, &d) || dpc_npy_write(ys, &ty, &d) || dpc_driver_load(model, &g, &d)) {
    printf("FAIL: %s\n", d.msg);
    fails = 1;
    goto done;
  }
  for (int b = 0; b < 2; b++) {
    snprintf(log[b], sizeof log[b], "%s/%s.jsonl", work, b ? "cuda" : "ref");
    dpc_train_opts o;
    dpc_train_defaults(&o);
    o.data = data, o.batch = 8, o.epochs = 2, o.seed = 9, o.log_path = log[b];
    if (g_mixed) o.test_data = data; /* evaluated split as it trains */
    o.exec.backend = b ? be : NULL;
    o.devices = b ? devices : NULL;
    o.strategy = b ? g_strategy : NULL;
    if (b && g_strategy && !strcmp(g_strategy, "pipeline"))
      o.mp = 2, o.accumulate = 4, o.pipeline = DPC_SCHEDULE_1F1B;
    o.exec.cpu.cache_dir = "off";
    o.threads = 1;
    if (b) o.on_note = keep_note;
    if (dpc_train(g, &o, &d)) {
      printf("FAIL %s on %s: %s\n", model, b ? be->name : "ref", d.msg);
      fails = 1;
      goto done;
    }
  }
  double l[2][16];
  int n0 = unit_read_losses(log[0], l[0], 16), n1 = unit_read_losses(log[1], l[1], 16);
  if (n0 != 12 || n1 != 12) {
    printf("FAIL: %d and %d steps logged, 12 expected\n", n0, n1);
    fails = 1;
  }
  if (g_strategy && devices && !g_mixed) { /* placed over the GPUs by their own figures */
    bool ok = strstr(g_notes, "placing with the GPUs' measured figures (the slowest of 2: GEMM ");
    printf("%s the placement over the GPUs: %s", ok ? "ok  " : "FAIL",
           g_notes[0] ? g_notes : "no note\n");
    fails |= !ok;
  }
  if (g_mixed) { /* each epoch evaluated over the same split */
    double e[2][4];
    int m0 = read_test_losses(log[0], e[0], 4), m1 = read_test_losses(log[1], e[1], 4);
    bool ok = m0 == 2 && m1 == 2;
    for (int k = 0; ok && k < 2; k++) ok = fabs(e[0][k] - e[1][k]) <= 1e-5 * fabs(e[0][k]);
    printf("%s test losses of %d and %d epochs: reference %.9g %.9g, %s %.9g %.9g\n",
           ok ? "ok  " : "FAIL", m0, m1, m0 > 0 ? e[0][0] : 0, m0 > 1 ? e[0][1] : 0, be->name,
           m1 > 0 ? e[1][0] : 0, m1 > 1 ? e[1][1] : 0);
    fails |= !ok;
  }
  for (int s = 0; s < n0 && s < n1; s++) {
    bool ok = fabs(l[0][s] - l[1][s]) <= 1e-5 * fabs(l[0][s]);
    printf("%s step %2d: reference %.9g, %s %.9g\n", ok ? "ok  " : "FAIL", s + 1, l[0][s], be->name,
           l[1][s]);
    fails |= !ok;
  }
done:
  free(x);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
  if (system(cmd)) printf("note: could not remove %s\n", work);
  return fails;
}

/* Kernels the test driver has launched on its GPU `gpu` (0 when it is not loaded). */
static unsigned fake_launches(int gpu) {
  void *h = dlopen(DPC_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  void *sym = h ? dlsym(h, "dpc_fake_cuda_gpu_launches") : NULL;
  unsigned (*on)(int) = NULL;
  memcpy(&on, &sym, sizeof sym);
  return on ? on(gpu) : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "train"))
    return train_model(argv[2], &dpc_codegen_cuda_emu, NULL);
  if (argc == 3 && !strcmp(argv[1], "fused")) {
    char work[] = "/tmp/dpc_cuda_fused_XXXXXX";
    if (!mkdtemp(work)) return printf("FAIL: cannot make a scratch folder\n"), 1;
    g_work = work;
    int rc = test_cuda_fused(argv[2], NULL);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (system(cmd)) printf("note: could not remove %s\n", work);
    return rc;
  }
  if (argc == 2 && !strcmp(argv[1], "device-basics")) {
    setenv("DPC_CUDA_DRIVER", DPC_FAKE_CUDA, 1);
    setenv("DPC_CUBLAS", DPC_FAKE_CUBLAS, 1);
    setenv("DPC_CUBLASLT", DPC_FAKE_CUBLAS, 1);
    setenv("DPC_NCCL", DPC_FAKE_NCCL, 1);
    return device_basics();
  }
  /* device-train MODEL fake|gpu, device-dp MODEL fake|gpu, device CASES OP fake|gpu */
  bool two_gpus =
      argc == 4 && (!strcmp(argv[1], "device-dp") || !strcmp(argv[1], "device-mp") ||
                    !strcmp(argv[1], "device-pp") || !strcmp(argv[1], "device-artifact-dp"));
  if (two_gpus && (!strcmp(argv[1], "device-mp") || !strcmp(argv[1], "device-pp")))
    g_strategy = !strcmp(argv[1], "device-mp") ? "model" : "pipeline";
  bool artifact =
      argc == 4 && (!strcmp(argv[1], "device-artifact") || !strcmp(argv[1], "device-artifact-dp"));
  bool fused = argc == 4 && !strcmp(argv[1], "device-fused");
  g_mixed = argc == 4 && !strcmp(argv[1], "device-mixed");
  if (g_mixed) g_strategy = "model";
  bool dev_mode = (argc == 4 && !strcmp(argv[1], "device-train")) || two_gpus || artifact ||
                  fused || g_mixed || (argc == 5 && !strcmp(argv[1], "device"));
  /* data parallel over two GPUs: the test driver has two */
  if (two_gpus) setenv("DPC_FAKE_CUDA_GPUS", "2", 1);
  if (dev_mode) {
    int rc = open_backend(argv[argc - 1]);
    if (rc) return rc;
    if (two_gpus && !strcmp(argv[argc - 1], "gpu")) {
      dpc_cuda_probe probe;
      dpc_cuda_driver_probe(&probe);
      if (probe.gpus < 2) return printf("skip: fewer than 2 GPUs: %s\n", probe.note), 77;
    }
    if (argc == 4) {
      char work[] = "/tmp/dpc_cuda_dev_XXXXXX";
      if (!mkdtemp(work)) return printf("FAIL: cannot make a scratch folder\n"), 1;
      g_work = work;
      rc = artifact  ? test_cuda_artifact(argv[2], strcmp(argv[3], "gpu") ? g_backend : NULL, work,
                                         two_gpus ? "cuda:0,cuda:1" : NULL)
           : fused   ? test_cuda_fused(argv[2], g_backend)
           : g_mixed ? train_model(argv[2], g_backend, "cpu,cuda:0")
                     : train_model(argv[2], g_backend, two_gpus ? "cuda:0,cuda:1" : NULL);
      if (two_gpus && !strcmp(argv[argc - 1], "fake")) {
        unsigned l0 = fake_launches(0), l1 = fake_launches(1);
        bool both = l0 > 0 && l1 > 0;
        printf("%s kernels launched on cuda:0 %u, on cuda:1 %u (%s)\n", both ? "ok  " : "FAIL", l0,
               l1, g_strategy ? "the model's parts on both GPUs" : "both replicas on their GPU");
        rc |= !both;
      }
      if (g_mixed && !strcmp(argv[argc - 1], "fake")) {
        unsigned l0 = fake_launches(0);
        printf("%s kernels launched on cuda:0 %u (the layers placed on the GPU; the middle one "
               "runs on the CPU)\n",
               l0 ? "ok  " : "FAIL", l0);
        rc |= !l0;
      }
      if (two_gpus && !g_strategy) /* the all-reduces took the path asked for */
        rc |= check_ran(g_reduces, g_nccl_off, "all-reduces ran on the test NCCL",
                        "off: through the host");
      rc |= check_gemm_path();
      rc |= check_lt_path();
      if (g_gemms) rc |= check_pinned();
      char cmd[200];
      snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
      if (system(cmd)) printf("note: could not remove %s\n", work);
      return rc;
    }
    argc = 4; /* the op's cases as below, in mode "device" */
  }
  if (argc == 2 && !strcmp(argv[1], "table")) return check_table();
  if (argc == 4 && !strcmp(argv[1], "source")) return print_source(argv[2], argv[3]);
  if (argc != 4 || (strcmp(argv[1], "nvrtc") && strcmp(argv[1], "emu") && !dev_mode)) {
    fprintf(stderr, "usage: test_cuda_ops table | (nvrtc|emu) CASES_DIR OP | train MODEL |\n"
                    "       fused GRAPH |\n"
                    "       device CASES_DIR OP fake|fake-kernels|gpu |\n"
                    "       (device-train|device-dp|device-mp|device-pp|device-mixed|\n"
                    "        device-artifact|\n"
                    "        device-artifact-dp|device-fused) MODEL "
                    "fake|fake-kernels|fake-nolt|fake-host|gpu |\n"
                    "       device-basics\n");
    return 2;
  }
  g_mode = argv[1];
  dpc_op op;
  if (!dpc_op_find(argv[3], strlen(argv[3]), &op)) {
    printf("FAIL: no op '%s'\n", argv[3]);
    return 1;
  }
  const char *why = NULL;
  if (!dpc_cuda_lowers(op, &why)) {
    bool reason = why && strcmp(why, "no CUDA lowering yet");
    printf("%s: op '%s' has no CUDA kernel: %s\n", reason ? "ok" : "FAIL", argv[3], why);
    return reason ? 0 : 1;
  }
  char work[] = "/tmp/dpc_cuda_test_XXXXXX";
  if (!mkdtemp(work)) {
    printf("FAIL: cannot make a scratch folder\n");
    return 1;
  }
  g_work = work;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", argv[2], argv[3]);
  DIR *dp = opendir(dir);
  if (!dp) {
    printf("FAIL: op '%s' has no test cases (expected a folder %s)\n", argv[3], dir);
    return 1;
  }
  char *names[512];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp)) && n < 512)
    if (e->d_name[0] != '.') names[n++] = dpc_strdup(e->d_name);
  closedir(dp);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  tally t = {0};
  for (int i = 0; i < n; i++) {
    char cdir[4096 + 300], label[600];
    snprintf(cdir, sizeof cdir, "%s/%s", dir, names[i]);
    snprintf(label, sizeof label, "%s/%s", argv[3], names[i]);
    run_case(cdir, label, op, &t);
    free(names[i]);
  }
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
  if (system(cmd)) printf("note: could not remove %s\n", work);
  printf("%s: %d cases passed, %d failed, %d skipped (%d kernels checked)\n", g_mode, t.passed,
         t.failed, t.skipped, t.nodes);
  if (t.nodes == 0) {
    printf("FAIL: no kernel of '%s' was checked\n", argv[3]);
    return 1;
  }
  if (dev_mode && op == DPC_OP_MATMUL && check_gemm_path()) return 1;
  return t.failed ? 1 : 0;
}
