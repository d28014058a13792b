/*
 * api_onnx.c — ONNX's backend tests run and compared (include/dpc/compiler.h,
 * dpc_onnx_test_run): folders in the backend-test layout (model.onnx and test_data_set_N folders
 * with input_N.pb and output_N.pb), each data set's inputs run and every output compared with
 * the expected one.
 */
#include "driver/api_internal.h"
#include "frontend/onnx.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

DPC_COMPILER_API const char *dpc_onnx_ops(void) {
  return dpc_onnx_supported_ops();
}

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

/* One test folder: each data set imported (its inputs known), run and compared. */
static dpc_onnx_verdict run_test(const char *dir, const dpc_exec_opts *x, double rtol, double atol,
                                 char *why, size_t n) {
  char model[4200];
  dpc_driver_join_path(model, sizeof model, dir, "model.onnx");
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  dpc_onnx_verdict r = DPC_ONNX_PASS;
  uint32_t nsets = 0;
  char **sets = list_dir(dir, "test_data_set_", &nsets);
  if (!nsets) {
    snprintf(why, n, "no test_data_set_* directory");
    r = DPC_ONNX_FAIL;
  }
  /* Imported once per data set: inputs an op needs as constants take that set's values. */
  for (uint32_t s = 0; s < nsets && r == DPC_ONNX_PASS; s++) {
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
      r = st == DPC_ERR_UNSUPPORTED ? DPC_ONNX_SKIP : DPC_ONNX_FAIL;
    }
    dpc_diag_free(&rd);
    for (uint32_t k = 0; r == DPC_ONNX_PASS && k < no; k++) {
      char path[4500], file[32];
      snprintf(file, sizeof file, "output_%u.pb", k);
      dpc_driver_join_path(path, sizeof path, sd, file);
      dpc_tensor want;
      if (dpc_onnx_tensor_read(path, &want, NULL, &d)) {
        first_line(&d, "", why, n);
        r = d.status == DPC_ERR_UNSUPPORTED ? DPC_ONNX_SKIP : DPC_ONNX_FAIL;
        break;
      }
      char w2[400];
      if (!close_enough(&outs[k].t, &want, rtol, atol, w2, sizeof w2)) {
        snprintf(why, n, "%s, output %u ('%s'): %s", sets[s], k, outs[k].name, w2);
        r = DPC_ONNX_FAIL;
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

DPC_COMPILER_API dpc_status dpc_onnx_test_run(const char *arg, const dpc_onnx_test_opts *o,
                                              dpc_onnx_totals *totals, dpc_message *m) {
  dpc_exec_opts x;
  dpc_status st =
      dpc_api_build(DPC_API_HAS(o, build) && o->build.size ? &o->build : NULL, &x, NULL, m);
  if (st) return st;
  double rtol = DPC_API_HAS(o, rtol) && o->rtol ? *o->rtol : 1e-3;
  double atol = DPC_API_HAS(o, atol) && o->atol ? *o->atol : 1e-7;
  bool no_skip = DPC_API_HAS(o, fail_on_skip) && o->fail_on_skip;
  void (*on_case)(void *, const dpc_onnx_case *) = DPC_API_HAS(o, on_case) ? o->on_case : NULL;
  void *user = DPC_API_HAS(o, user) ? o->user : NULL;
  dpc_onnx_totals sum = {0};
  if (!arg || !is_dir(arg))
    return dpc_diag_fail(m, DPC_ERR_INVALID, "'%s' is not a directory", arg ? arg : "");
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
    dpc_onnx_verdict r = run_test(dir, &x, rtol, atol, why, sizeof why);
    if (r == DPC_ONNX_SKIP && no_skip) r = DPC_ONNX_FAIL;
    bool op = r == DPC_ONNX_SKIP && strstr(why, "an op dpc does not import");
    sum.passed += r == DPC_ONNX_PASS;
    sum.failed += r == DPC_ONNX_FAIL;
    sum.skipped += r == DPC_ONNX_SKIP;
    sum.skipped_op += op;
    if (on_case) on_case(user, &(dpc_onnx_case){dir, r, why, op});
  }
  free_list(subs, nsub);
  if (totals) {
    /* the fields the caller's struct has */
    if (DPC_API_HAS(totals, passed)) totals->passed += sum.passed;
    if (DPC_API_HAS(totals, failed)) totals->failed += sum.failed;
    if (DPC_API_HAS(totals, skipped)) totals->skipped += sum.skipped;
    if (DPC_API_HAS(totals, skipped_op)) totals->skipped_op += sum.skipped_op;
  }
  if (!found) /* a summary of nothing run would read as success */
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "'%s' holds no ONNX test: neither model.onnx nor directories with one",
                         arg);
  return DPC_OK;
}
