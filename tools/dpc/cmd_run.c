/*
 * cmd_run.c — `dpc run`: a model's forward pass on .npy data, outputs written as .npy.
 */
#include "frontend/onnx.h"
#include "runtime/npy.h"
#include "tools/dpc/cli.h"
#include "tools/dpc/cli_legacy.h"
#include "driver/driver.h"
#include "tools/dpc/outpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const cli_opt run_opts[] = {
    {"input", true, true, "NAME=FILE.npy: data for an input (repeat for each input)"},
    {"param", true, true, "NAME=FILE.npy: a value for a param or state (repeat as needed)"},
    {"output-dir", true, false,
     "write each output as DIR/NAME.npy (default: print a summary only)"},
    {"inputs", true, false,
     "DIR: the inputs as DIR/input_0.pb, input_1.pb, ... (ONNX TensorProto, in input order)"},
    {"outputs", true, false, "DIR: write the outputs as DIR/output_0.pb, ... (ONNX TensorProto)"},
    {"training-mode", false, false, "run dropout and batch_norm as in training"},
    {"backend", true, false,
     "llvm (default: kernels compiled for this CPU) or ref (the reference kernels)"},
    {"dump-llvm", false, false,
     "print the generated LLVM IR (before and after optimisation) to stderr"},
    {"verify-each", false, false, "run the verifier after every pass"},
    {"print-after", true, false, "print the graph after PASS to stderr (comma-separated, or all)"},
};
#define NRUN (int)(sizeof run_opts / sizeof *run_opts)

/* Load NAME=PATH pairs into feeds. */
static int load_feeds(cli_parsed *p, const char *opt, dpc_named *feeds, uint32_t *n, dpc_diag *d) {
  for (int i = 0; i < cli_count(run_opts, NRUN, p, opt); i++) {
    const char *arg = cli_value(run_opts, NRUN, p, opt, i);
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
      return cli_usage_error("run", "--%s expects NAME=FILE.npy, got '%s'", opt, arg);
    dpc_named *f = &feeds[(*n)++];
    f->name = malloc((size_t)(eq - arg) + 1);
    if (!f->name) return cli_usage_error("run", "out of memory");
    memcpy(f->name, arg, (size_t)(eq - arg));
    f->name[eq - arg] = 0;
    for (uint32_t k = 0; k + 1 < *n; k++)
      if (!strcmp(feeds[k].name, f->name))
        return cli_usage_error("run", "'%s' is given twice", f->name);
    if (dpc_npy_read(eq + 1, &f->t, d)) return cli_report("run", d);
  }
  return DPC_EXIT_OK;
}

int dpc_cmd_run(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("run", run_opts, NRUN, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf("Usage: dpc run FILE.graph|FILE.onnx|FILE.dpx --input NAME=FILE.npy ... "
           "[--output-dir DIR]\n"
           "       dpc run FILE.onnx --inputs DIR [--outputs DIR]\n\n"
           "Run a model's forward pass once (compiled with LLVM unless --backend ref) and write "
           "every output\n"
           "named in the model's 'output' statement as DIR/NAME.npy. Symbolic dimensions (the\n"
           "batch N) take their size from the data. Inputs only the loss needs (labels) may be\n"
           "left out. Params start from their initializers unless --param gives a value.\n"
           "--inputs/--outputs read and write the ONNX test layout (input_N.pb, output_N.pb);\n"
           "an ONNX input that an op needs as a constant (a Reshape's shape) takes its value\n"
           "from there. See docs/onnx.md.\n");
    cli_print_options(run_opts, NRUN);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1) return cli_usage_error("run", "expects one model file (see dpc run --help)");
  if (cli_check_output_dir("run", "output-dir", cli_get(run_opts, NRUN, &p, "output-dir")) ||
      cli_check_output_dir("run", "outputs", cli_get(run_opts, NRUN, &p, "outputs")))
    return DPC_EXIT_ERROR;
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  dpc_named feeds[2 * CLI_MAX_VALUES] = {{0}};
  uint32_t nfeeds = 0, nouts = 0;
  dpc_named *outs = NULL;
  int rc;
  dpc_pass_opts po = {.verify_each = cli_get(run_opts, NRUN, &p, "verify-each") != NULL,
                      .print_after = cli_get(run_opts, NRUN, &p, "print-after"),
                      .dump = cli_print_dump,
                      .user = stderr};
  if ((rc = load_feeds(&p, "input", feeds, &nfeeds, &d)) ||
      (rc = load_feeds(&p, "param", feeds, &nfeeds, &d)))
    goto done;
  dpc_exec_opts x = {0};
  if ((rc = cli_exec_opts("run", run_opts, NRUN, &p, &x))) goto done;
  bool tm = cli_get(run_opts, NRUN, &p, "training-mode") != NULL;
  const char *pb_in = cli_get(run_opts, NRUN, &p, "inputs");
  dpc_named *pb = NULL;
  uint32_t npb = 0;
  if (pb_in && nfeeds) {
    rc = cli_usage_error("run", "give inputs with --inputs or with --input, not both");
    goto done;
  }
  if (pb_in && dpc_driver_onnx_inputs(pb_in, &pb, &npb, &d)) {
    rc = cli_report("run", &d);
    goto done;
  }
  if (dpc_driver_is_artifact(p.pos[0])
          ? dpc_driver_infer_artifact(p.pos[0], feeds, nfeeds, tm, &outs, &nouts, &d)
          : (dpc_driver_load_known(p.pos[0], pb, npb, &g, &d) ||
             (pb && dpc_driver_onnx_name_feeds(g, pb, npb, &d)) ||
             dpc_driver_infer(g, &po, &x, pb ? pb : feeds, pb ? npb : nfeeds, tm, &outs, &nouts,
                              &d))) {
    dpc_named_free(pb, npb);
    rc = cli_report("run", &d);
    goto done;
  }
  dpc_named_free(pb, npb);
  const char *pb_out = cli_get(run_opts, NRUN, &p, "outputs");
  if (pb_out && mkdir(pb_out, 0777) && errno != EEXIST) {
    dpc_diag_fail(&d, DPC_ERR_IO, "cannot create directory '%s': %s", pb_out, strerror(errno));
    rc = cli_report("run", &d);
    goto done;
  }
  for (uint32_t i = 0; pb_out && i < nouts; i++) {
    char path[4200], name[32];
    snprintf(name, sizeof name, "output_%u.pb", i);
    if (!dpc_driver_join_path(path, sizeof path, pb_out, name)) {
      rc = cli_usage_error("run", "--outputs %s: the path is too long", pb_out);
      goto done;
    }
    if (dpc_onnx_tensor_write(path, outs[i].name, &outs[i].t, &d)) {
      rc = cli_report("run", &d);
      goto done;
    }
  }
  const char *dir = cli_get(run_opts, NRUN, &p, "output-dir");
  if (dir && mkdir(dir, 0777) && errno != EEXIST) {
    dpc_diag_fail(&d, DPC_ERR_IO, "cannot create directory '%s': %s", dir, strerror(errno));
    rc = cli_report("run", &d);
    goto done;
  }
  for (uint32_t i = 0; i < nouts; i++) {
    char shape[160] = "";
    size_t k = 0;
    for (uint32_t j = 0; j < outs[i].t.shape.rank; j++)
      k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", j ? ", " : "",
                            (long long)outs[i].t.shape.d[j]);
    if (dir) {
      char path[4096], file[1024];
      snprintf(file, sizeof file, "%s.npy", outs[i].name);
      if (!dpc_driver_join_path(path, sizeof path, dir, file)) {
        rc = cli_usage_error("run", "--output-dir %s: the path is too long", dir);
        goto done;
      }
      if (dpc_npy_write(path, &outs[i].t, &d)) {
        rc = cli_report("run", &d);
        goto done;
      }
      printf("%s: %s[%s] -> %s\n", outs[i].name, dpc_dtype_name(outs[i].t.dtype), shape, path);
    } else {
      double sum = 0;
      int64_t n = dpc_tensor_numel(&outs[i].t);
      for (int64_t j = 0; j < n; j++) sum += dpc_tload(&outs[i].t, j);
      printf("%s: %s[%s] sum %.9g\n", outs[i].name, dpc_dtype_name(outs[i].t.dtype), shape, sum);
    }
  }
  rc = DPC_EXIT_OK;
done:
  for (uint32_t i = 0; i < nfeeds; i++) {
    free(feeds[i].name);
    free(feeds[i].t.data);
  }
  dpc_named_free(outs, nouts);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return rc;
}
