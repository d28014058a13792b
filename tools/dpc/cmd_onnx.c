/*
 * cmd_onnx.c — `dpc onnx-test`: run directories in the ONNX backend-test layout (model.onnx and
 * test_data_set_N directories with input_N.pb and output_N.pb) and compare with the expected
 * outputs.
 */
#include "frontend/onnx.h"
#include "tools/dpc/cli.h"
#include "tools/dpc/cli_legacy.h"
#include "driver/driver.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const cli_opt onnx_opts[] = {
    {"backend", true, false,
     "llvm (default: kernels compiled for this CPU) or ref (the reference kernels)"},
    {"rtol", true, false, "relative tolerance (default 1e-3, as ONNX's backend tests)"},
    {"atol", true, false, "absolute tolerance (default 1e-7, as ONNX's backend tests)"},
    {"quiet", false, false, "print only failures and the summary"},
    {"min-pass", true, false,
     "F: exit 1 unless at least this fraction of the tests not skipped pass (0.98)"},
    {"fail-on-skip", false, false,
     "count a skipped test as failed (for suites dpc must run whole)"},
    {"dump-llvm", false, false, ""},
};
#define NOPTS (int)(sizeof onnx_opts / sizeof *onnx_opts)

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static bool is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of a directory whose names start with `prefix` (all when ""), sorted; caller
 * frees each and the array. */
static char **list_dir(const char *dir, const char *prefix, uint32_t *n) {
  *n = 0;
  DIR *dd = opendir(dir);
  if (!dd) return NULL;
  char **v = NULL;
  uint32_t cap = 0;
  struct dirent *e;
  while ((e = readdir(dd))) {
    if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix))) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nv = realloc(v, cap * sizeof *v);
      if (!nv) break;
      v = nv;
    }
    if (!(v[*n] = dpc_strdup(e->d_name))) break;
    (*n)++;
  }
  closedir(dd);
  if (v) qsort(v, *n, sizeof *v, cmp_str);
  return v;
}

static void free_list(char **v, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* Whether got matches want within the tolerances; why not in `why`. */
static bool close_enough(const dpc_tensor *got, const dpc_tensor *want, double rtol, double atol,
                         char *why, size_t n) {
  if (got->dtype != want->dtype) {
    snprintf(why, n, "dtype %s, expected %s", dpc_dtype_name(got->dtype),
             dpc_dtype_name(want->dtype));
    return false;
  }
  if (!dpc_shape_eq(&got->shape, &want->shape)) {
    snprintf(why, n, "shape differs (rank %u vs %u, %lld vs %lld elements)", got->shape.rank,
             want->shape.rank, (long long)dpc_tensor_numel(got), (long long)dpc_tensor_numel(want));
    return false;
  }
  int64_t m = dpc_tensor_numel(got), bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < m; i++) {
    double a = dpc_tload(got, i), b = dpc_tload(want, i);
    if (isnan(a) && isnan(b)) continue;
    if (isinf(a) || isinf(b) ? a == b : fabs(a - b) <= atol + rtol * fabs(b)) continue;
    if (first < 0) first = i;
    bad++;
    if (!(fabs(a - b) <= worst)) worst = fabs(a - b);
  }
  if (!bad) return true;
  snprintf(why, n,
           "%lld of %lld values differ (first at %lld: %.9g, expected %.9g; largest "
           "difference %.3g)",
           (long long)bad, (long long)m, (long long)first, dpc_tload(got, first),
           dpc_tload(want, first), worst);
  return false;
}

typedef enum { T_PASS, T_FAIL, T_SKIP } test_result;

/* A diagnostic on one line (its lines joined), without the file name the importer puts in
 * front. */
static void first_line(const dpc_diag *d, const char *drop, char *out, size_t n) {
  char *m = dpc_diag_render(d);
  const char *s = m ? m : "error";
  if (!strncmp(s, "error: ", 7)) s += 7;
  size_t k = strlen(drop);
  if (k && !strncmp(s, drop, k) && s[k] == ':') s += k + 2;
  size_t j = 0;
  while (*s && j + 1 < n) {
    if (*s != '\n') {
      out[j++] = *s++;
      continue;
    }
    while (*s == '\n' || *s == ' ') s++;
    if (*s) out[j++] = ' ';
  }
  out[j] = 0;
  free(m);
}

static test_result run_test(const char *dir, const dpc_exec_opts *x, double rtol, double atol,
                            char *why, size_t n) {
  char model[4200];
  dpc_driver_join_path(model, sizeof model, dir, "model.onnx");
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  test_result r = T_PASS;
  uint32_t nsets = 0;
  char **sets = NULL;
  sets = list_dir(dir, "test_data_set_", &nsets);
  if (!nsets) {
    snprintf(why, n, "no test_data_set_* directory");
    r = T_FAIL;
  }
  /* Imported once per data set: inputs an op needs as constants take that set's values. */
  for (uint32_t s = 0; s < nsets && r == T_PASS; s++) {
    char sd[4400];
    dpc_driver_join_path(sd, sizeof sd, dir, sets[s]);
    dpc_named *feeds = NULL, *outs = NULL;
    uint32_t nf = 0, no = 0;
    dpc_graph_free(g);
    g = NULL;
    /* The model's own problems (an op, a type) come first; then the data's. */
    dpc_diag rd;
    dpc_diag_init(&rd);
    bool read_ok = !dpc_driver_onnx_inputs(sd, &feeds, &nf, &rd);
    if (!read_ok) {
      dpc_named_free(feeds, nf);
      feeds = NULL, nf = 0;
    }
    dpc_status st = dpc_driver_load_known(model, feeds, nf, &g, &d);
    if (!st && !read_ok) { /* the model imported: the data's problem is the one to report */
      dpc_diag_free(&d);
      d = rd;
      dpc_diag_init(&rd);
      st = d.status;
    }
    if (!st) st = dpc_driver_onnx_name_feeds(g, feeds, nf, &d);
    if (!st) st = dpc_driver_infer(g, NULL, x, feeds, nf, false, &outs, &no, &d);
    if (st) {
      first_line(&d, model, why, n);
      r = st == DPC_ERR_UNSUPPORTED ? T_SKIP : T_FAIL;
    }
    dpc_diag_free(&rd);
    for (uint32_t k = 0; r == T_PASS && k < no; k++) {
      char path[4500], file[32];
      snprintf(file, sizeof file, "output_%u.pb", k);
      dpc_driver_join_path(path, sizeof path, sd, file);
      dpc_tensor want;
      if (dpc_onnx_tensor_read(path, &want, NULL, &d)) {
        first_line(&d, "", why, n);
        r = d.status == DPC_ERR_UNSUPPORTED ? T_SKIP : T_FAIL;
        break;
      }
      char w2[400];
      if (!close_enough(&outs[k].t, &want, rtol, atol, w2, sizeof w2)) {
        snprintf(why, n, "%s, output %u ('%s'): %s", sets[s], k, outs[k].name, w2);
        r = T_FAIL;
      }
      free(want.data);
    }
    dpc_named_free(feeds, nf);
    dpc_named_free(outs, no);
  }
  free_list(sets, nsets);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return r;
}

int dpc_cmd_onnx_test(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("onnx-test", onnx_opts, NOPTS, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf("Usage: dpc onnx-test DIR... [--backend ref|llvm] [--rtol R] [--atol A]\n\n"
           "Run ONNX backend tests: each DIR holds model.onnx and test_data_set_*/ with\n"
           "input_N.pb and output_N.pb (a DIR holding such directories runs them all). A line per\n"
           "test says PASS, FAIL (with why) or SKIP (the model uses something dpc does not\n"
           "support, named), then 'N passed, N failed, N skipped'. Outputs match when\n"
           "|got - expected| <= atol + rtol * |expected|. See docs/onnx.md.\n");
    cli_print_options(onnx_opts, NOPTS);
    printf("\nONNX ops dpc imports: %s.\n", dpc_onnx_supported_ops());
    return DPC_EXIT_OK;
  }
  if (p.npos < 1) return cli_usage_error("onnx-test", "expects test directories (see --help)");
  dpc_exec_opts x = {0};
  int rc = cli_exec_opts("onnx-test", onnx_opts, NOPTS, &p, &x);
  if (rc) return rc;
  double rtol = 1e-3, atol = 1e-7, min_pass = -1;
  const char *v;
  char *end;
  if ((v = cli_get(onnx_opts, NOPTS, &p, "rtol")) && (rtol = strtod(v, &end), *end || rtol < 0))
    return cli_usage_error("onnx-test", "--rtol expects a number >= 0, got '%s'", v);
  if ((v = cli_get(onnx_opts, NOPTS, &p, "atol")) && (atol = strtod(v, &end), *end || atol < 0))
    return cli_usage_error("onnx-test", "--atol expects a number >= 0, got '%s'", v);
  if ((v = cli_get(onnx_opts, NOPTS, &p, "min-pass")) &&
      (min_pass = strtod(v, &end), *end || min_pass < 0 || min_pass > 1))
    return cli_usage_error("onnx-test", "--min-pass expects a fraction in [0, 1], got '%s'", v);
  bool quiet = cli_get(onnx_opts, NOPTS, &p, "quiet") != NULL;
  bool no_skip = cli_get(onnx_opts, NOPTS, &p, "fail-on-skip") != NULL;
  uint32_t npass = 0, nfail = 0, nskip = 0, nskip_op = 0;
  for (int i = 0; i < p.npos; i++) {
    const char *arg = p.pos[i];
    if (!is_dir(arg)) return cli_usage_error("onnx-test", "'%s' is not a directory", arg);
    char probe[4400];
    dpc_driver_join_path(probe, sizeof probe, arg, "model.onnx");
    uint32_t nsub = 0, found = 0;
    bool single = is_file(probe);
    char **subs = single ? NULL : list_dir(arg, "", &nsub);
    uint32_t count = single ? 1 : nsub;
    for (uint32_t k = 0; k < count; k++) {
      char dir[4096];
      if (!single) {
        if (!dpc_driver_join_path(dir, sizeof dir, arg, subs[k])) continue;
        dpc_driver_join_path(probe, sizeof probe, dir, "model.onnx");
        if (!is_file(probe)) continue;
      } else {
        snprintf(dir, sizeof dir, "%.4000s", arg);
      }
      found++;
      char why[1024] = "";
      test_result r = run_test(dir, &x, rtol, atol, why, sizeof why);
      if (r == T_SKIP && no_skip) r = T_FAIL;
      if (r == T_PASS)
        npass++;
      else if (r == T_FAIL)
        nfail++;
      else
        nskip++;
      if (r == T_SKIP && strstr(why, "an op dpc does not import")) nskip_op++;
      if (r == T_FAIL || !quiet)
        printf("%s %s%s%s\n",
               r == T_PASS   ? "PASS"
               : r == T_FAIL ? "FAIL"
                             : "SKIP",
               dir, *why ? ": " : "", why);
      fflush(stdout);
    }
    free_list(subs, nsub);
    if (!found) /* a summary of nothing run would read as success */
      return cli_usage_error("onnx-test",
                             "'%s' holds no ONNX test: neither model.onnx nor directories with "
                             "one",
                             arg);
  }
  printf("%u passed, %u failed, %u skipped", npass, nfail, nskip);
  if (nskip)
    printf(" (%u for an op dpc does not import, %u for an element type or form of an op it "
           "does not support)",
           nskip_op, nskip - nskip_op);
  printf("\n");
  if (min_pass >= 0 && (npass + nfail == 0 || npass < min_pass * (npass + nfail))) {
    fprintf(stderr, "onnx-test: %u of %u tests that ran passed, below --min-pass %g\n", npass,
            npass + nfail, min_pass);
    return DPC_EXIT_ERROR;
  }
  return nfail && min_pass < 0 ? DPC_EXIT_ERROR : DPC_EXIT_OK;
}
