/*
 * run_cases.c — checks one op's reference kernel against values computed independently.
 *
 *   test_ops CASES_DIR OP [llvm]
 *
 * Each case is a folder CASES_DIR/OP/NAME holding model.graph, NAME.npy for each input (and
 * optionally for params), and expect_NAME.npy for each output, all written by
 * tests/ops/gen_cases.py with NumPy. A comment line `# test: rtol=.. atol=.. training=1
 * error=TEXT` in model.graph adjusts the check; error=TEXT expects the run to fail with a
 * message containing TEXT. An op with no case folder fails: every op must be tested. So does a
 * case that would check nothing or not what it claims: one with no expected outputs, an
 * expect_NAME.npy with no output NAME, or an expected file of another dtype than its output.
 */
#include "runtime/npy.h"
#include "driver/driver.h"
#include "tests/ops/tolerance.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct directives {
  double rtol, atol;
  bool have_rtol, have_atol;
  bool training;
  char error[256];
} directives;

static void read_directives(const char *path, directives *dv) {
  memset(dv, 0, sizeof *dv);
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    const char *p = strstr(line, "# test:");
    if (p != line) continue;
    char *tok = strtok(line + 7, " \t\n");
    for (; tok; tok = strtok(NULL, " \t\n")) {
      if (!strncmp(tok, "rtol=", 5))
        dv->rtol = strtod(tok + 5, NULL), dv->have_rtol = true;
      else if (!strncmp(tok, "atol=", 5))
        dv->atol = strtod(tok + 5, NULL), dv->have_atol = true;
      else if (!strncmp(tok, "training=", 9))
        dv->training = atoi(tok + 9) != 0;
      else if (!strncmp(tok, "error=", 6)) {
        /* the rest of the line, spaces included */
        const char *rest = strstr(p, "error=") + 6;
        snprintf(dv->error, sizeof dv->error, "%s", rest);
        dv->error[strcspn(dv->error, "\n")] = 0;
        break;
      }
    }
  }
  fclose(f);
}

/* The dtype NumPy stores an output of dtype t as: it has no bfloat16, so gen_cases.py writes
 * bf16 values (already rounded) as f32. */
static dpc_dtype npy_dtype(dpc_dtype t) {
  return t == DPC_BF16 ? DPC_F32 : t;
}

/* Every expect_NAME.npy in dir names one of the outputs; how many do not (each reported). */
static int stray_expectations(const char *dir, const char *name, const dpc_named *outs,
                              uint32_t no) {
  DIR *dp = opendir(dir);
  if (!dp) {
    printf("FAIL %s: cannot list %s\n", name, dir);
    return 1;
  }
  int stray = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, "expect_", 7) || len < 11 || strcmp(e->d_name + len - 4, ".npy"))
      continue;
    bool found = false;
    for (uint32_t i = 0; i < no && !found; i++)
      found = strlen(outs[i].name) == len - 11 && !strncmp(outs[i].name, e->d_name + 7, len - 11);
    if (!found) {
      printf("FAIL %s: %s names no output of the model\n", name, e->d_name);
      stray++;
    }
  }
  closedir(dp);
  return stray;
}

static dpc_exec_opts exec; /* the backend under test: reference, or LLVM with `llvm` */

static int run_case(const char *dir, const char *name) {
  char path[8192];
  snprintf(path, sizeof path, "%s/model.graph", dir);
  directives dv;
  read_directives(path, &dv);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  dpc_named feeds[64] = {{0}}, *outs = NULL;
  uint32_t nf = 0, no = 0;
  int fails = 0;
  if (dpc_driver_load(path, &g, &d)) {
    if (dv.error[0] && d.msg && strstr(d.msg, dv.error)) {
      printf("ok   %s (error when loading: %s)\n", name, d.msg);
      goto done;
    }
    char *m = dpc_diag_render(&d);
    printf("FAIL %s: cannot load the model:\n%s", name, m);
    free(m);
    fails = 1;
    goto done;
  }
  for (uint32_t i = 0; i < g->n_nodes && nf < 64; i++) {
    dpc_op op = g->nodes[i].op;
    if (op != DPC_OP_INPUT && op != DPC_OP_PARAM && op != DPC_OP_STATE) continue;
    const char *vn = dpc_graph_str(g, g->values[g->nodes[i].out].name);
    snprintf(path, sizeof path, "%s/%s.npy", dir, vn);
    FILE *f = fopen(path, "rb");
    if (!f) {
      if (op == DPC_OP_INPUT) {
        printf("FAIL %s: no data file %s for input '%s'\n", name, path, vn);
        fails = 1;
        goto done;
      }
      continue;
    }
    fclose(f);
    feeds[nf].name = dpc_strdup(vn);
    if (dpc_npy_read(path, &feeds[nf++].t, &d)) {
      char *m = dpc_diag_render(&d);
      printf("FAIL %s: %s", name, m);
      free(m);
      fails = 1;
      goto done;
    }
  }
  dpc_status st = dpc_driver_infer(g, NULL, &exec, feeds, nf, dv.training, &outs, &no, &d);
  if (dv.error[0]) {
    if (!st) {
      printf("FAIL %s: expected an error containing '%s', but the run succeeded\n", name, dv.error);
      fails = 1;
    } else if (!d.msg || !strstr(d.msg, dv.error)) {
      printf("FAIL %s: expected an error containing '%s', got: %s\n", name, dv.error,
             d.msg ? d.msg : "?");
      fails = 1;
    } else {
      printf("ok   %s (error: %s)\n", name, d.msg);
    }
    goto done;
  }
  if (st) {
    char *m = dpc_diag_render(&d);
    printf("FAIL %s: run failed: %s", name, m);
    free(m);
    fails = 1;
    goto done;
  }
  if (no == 0) {
    printf("FAIL %s: the model has no outputs, so nothing would be checked\n", name);
    fails = 1;
    goto done;
  }
  if (stray_expectations(dir, name, outs, no)) fails = 1;
  for (uint32_t i = 0; i < no; i++) {
    dpc_tensor want;
    snprintf(path, sizeof path, "%s/expect_%s.npy", dir, outs[i].name);
    if (dpc_npy_read(path, &want, &d)) {
      printf("FAIL %s: no expected data for output '%s' (%s)\n", name, outs[i].name, path);
      fails = 1;
      continue;
    }
    const dpc_tensor *have = &outs[i].t;
    if (want.dtype != npy_dtype(have->dtype)) {
      printf("FAIL %s: output '%s' is %s, expected %s\n", name, outs[i].name,
             dpc_dtype_name(have->dtype), dpc_dtype_name(want.dtype));
      fails = 1;
      free(want.data);
      continue;
    }
    if (!dpc_shape_eq(&have->shape, &want.shape)) {
      char hs[160] = "", ws[160] = "";
      for (uint32_t k = 0, o1 = 0, o2 = 0; k < DPC_MAX_RANK; k++) {
        if (k < have->shape.rank)
          o1 += (uint32_t)snprintf(hs + o1, sizeof hs - o1, "%s%lld", k ? ", " : "",
                                   (long long)have->shape.d[k]);
        if (k < want.shape.rank)
          o2 += (uint32_t)snprintf(ws + o2, sizeof ws - o2, "%s%lld", k ? ", " : "",
                                   (long long)want.shape.d[k]);
      }
      printf("FAIL %s: output '%s' has shape [%s], expected [%s]\n", name, outs[i].name, hs, ws);
      fails = 1;
      free(want.data);
      continue;
    }
    double rtol, atol;
    default_tol(have->dtype, &rtol, &atol);
    if (dv.have_rtol) rtol = dv.rtol;
    if (dv.have_atol) atol = dv.atol;
    int64_t n = dpc_tensor_numel(have), bad = 0;
    double worst = 0;
    for (int64_t j = 0; j < n; j++) {
      double a = dpc_tload(have, j), b = dpc_tload(&want, j);
      bool ok = dpc_dtype_is_float(have->dtype) ? close_enough(a, b, rtol, atol)
                                                : dpc_tload_i64(have, j) == dpc_tload_i64(&want, j);
      if (!ok) {
        if (bad < 5)
          printf("     %s[%lld] = %.9g, expected %.9g\n", outs[i].name, (long long)j, a, b);
        bad++;
      }
      if (isfinite(a) && isfinite(b) && fabs(a - b) > worst) worst = fabs(a - b);
    }
    if (bad) {
      printf("FAIL %s: output '%s': %lld of %lld elements differ (rtol %g, atol %g)\n", name,
             outs[i].name, (long long)bad, (long long)n, rtol, atol);
      fails = 1;
    } else {
      printf("ok   %s: %s %s, %lld elements, max abs error %.3g\n", name, outs[i].name,
             dpc_dtype_name(have->dtype), (long long)n, worst);
    }
    free(want.data);
  }
done:
  for (uint32_t i = 0; i < nf; i++) {
    free(feeds[i].name);
    free(feeds[i].t.data);
  }
  dpc_named_free(outs, no);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return fails;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "llvm"))) {
    fprintf(stderr, "usage: test_ops CASES_DIR OP [llvm]\n");
    return 2;
  }
  if (argc == 4) {
    dpc_diag d;
    dpc_diag_init(&d);
    if (dpc_codegen_backend_find(argv[3], &exec.backend, &d)) {
      printf("FAIL: %s\n", d.msg);
      dpc_diag_free(&d);
      return 1;
    }
    dpc_diag_free(&d);
  }
  if (exec.backend) {
    dpc_op op;
    bool known = dpc_op_find(argv[2], strlen(argv[2]), &op);
    bool source = known && dpc_op_has(op, DPC_OPF_SOURCE);
    bool comm = known && dpc_op_has(op, DPC_OPF_COMM);
    if (known && !source && !comm && !dpc_cpu_lowers(op)) {
      /* the reference kernel would run in its place and the test would prove nothing */
      printf("FAIL: op '%s' has no LLVM lowering\n", argv[2]);
      return 1;
    }
    printf("backend: LLVM (%s)\n", source ? "a source: its value is set, no kernel runs"
                                   : comm ? "communication: the executor runs it, no kernel"
                                          : "compiled kernel");
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", argv[1], argv[2]);
  DIR *dp = opendir(dir);
  if (!dp) {
    printf("FAIL: op '%s' has no test cases (expected a folder %s)\n", argv[2], dir);
    return 1;
  }
  char *names[512];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp)) && n < 512)
    if (e->d_name[0] != '.') names[n++] = dpc_strdup(e->d_name);
  closedir(dp);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  int fails = 0;
  for (int i = 0; i < n; i++) {
    char cdir[4096 + 300], label[600];
    snprintf(cdir, sizeof cdir, "%s/%s", dir, names[i]);
    snprintf(label, sizeof label, "%s/%s", argv[2], names[i]);
    fails += run_case(cdir, label);
    free(names[i]);
  }
  if (n == 0) {
    printf("FAIL: op '%s' has an empty case folder\n", argv[2]);
    return 1;
  }
  printf("%d of %d cases passed\n", n - fails, n);
  return fails ? 1 : 0;
}
