/*
 * cmd_run.c — `dpc run`: a model's forward pass on .npy data, outputs written as .npy.
 */
#include "tools/dpc/cli.h"
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
     "llvm (default: kernels compiled for this CPU), ref (the reference kernels) or cuda "
     "(kernels compiled by NVRTC, run on the GPU cuda:0)"},
    CLI_OPT_CUDA,
    {"dump-llvm", false, false,
     "print the generated LLVM IR (before and after optimisation) to stderr"},
    {"verify-each", false, false, "run the verifier after every pass"},
    {"print-after", true, false, "print the graph after PASS to stderr (comma-separated, or all)"},
};
#define NRUN (int)(sizeof run_opts / sizeof *run_opts)

/* Load NAME=PATH pairs into feeds (names and data malloc'd). */
static int load_feeds(cli_parsed *p, const char *opt, dpc_array *feeds, unsigned *n,
                      dpc_message *m) {
  for (int i = 0; i < cli_count(run_opts, NRUN, p, opt); i++) {
    const char *arg = cli_value(run_opts, NRUN, p, opt, i);
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
      return cli_usage_error("run", "--%s expects NAME=FILE.npy, got '%s'", opt, arg);
    char *name = malloc((size_t)(eq - arg) + 1);
    if (!name) return cli_usage_error("run", "out of memory");
    memcpy(name, arg, (size_t)(eq - arg));
    name[eq - arg] = 0;
    dpc_array *f = &feeds[(*n)++];
    f->name = name;
    for (unsigned k = 0; k + 1 < *n; k++)
      if (!strcmp(feeds[k].name, name)) return cli_usage_error("run", "'%s' is given twice", name);
    const char *keep = f->name;
    if (dpc_npy_load(eq + 1, f, m)) {
      f->name = keep;
      return cli_report("run", m);
    }
    free((char *)f->name); /* the file's base name: the option's name stands */
    f->name = keep;
  }
  return DPC_EXIT_OK;
}

/* DIR/NAME into buf without doubling the slashes DIR ends with; false when it does not fit. */
static bool join_path(char *buf, size_t n, const char *dir, const char *name) {
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') len--;
  const char *sep = len == 1 && dir[0] == '/' ? "" : "/";
  int w = snprintf(buf, n, "%.*s%s%s", (int)len, dir, sep, name);
  return w >= 0 && (size_t)w < n;
}

/* A shape as "2, 10". */
static void format_shape(const dpc_array *v, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (unsigned j = 0; j < v->rank && k < n; j++)
    k += (size_t)snprintf(out + k, n - k, "%s%lld", j ? ", " : "", (long long)v->dims[j]);
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
  dpc_message *m = dpc_message_new();
  dpc_net *net = NULL;
  dpc_array feeds[2 * CLI_MAX_VALUES] = {{0}};
  unsigned nfeeds = 0, nouts = 0, npb = 0;
  dpc_array *outs = NULL, *pb = NULL;
  int rc;
  if ((rc = load_feeds(&p, "input", feeds, &nfeeds, m)) ||
      (rc = load_feeds(&p, "param", feeds, &nfeeds, m)))
    goto done;
  dpc_build_opts b;
  if ((rc = cli_build_opts("run", run_opts, NRUN, &p, &b))) goto done;
  b.user = stderr; /* --print-after goes to stderr: stdout has the outputs */
  bool tm = cli_get(run_opts, NRUN, &p, "training-mode") != NULL;
  const char *pb_in = cli_get(run_opts, NRUN, &p, "inputs");
  if (pb_in && nfeeds) {
    rc = cli_usage_error("run", "give inputs with --inputs or with --input, not both");
    goto done;
  }
  if (pb_in && dpc_onnx_inputs_load(pb_in, &pb, &npb, m)) {
    rc = cli_report("run", m);
    goto done;
  }
  if (dpc_path_is_artifact(p.pos[0])
          ? dpc_artifact_infer(p.pos[0], feeds, nfeeds, tm, &outs, &nouts, m)
          : (dpc_net_load(p.pos[0],
                          &(dpc_load_opts){sizeof(dpc_load_opts), .known = pb, .n_known = npb},
                          &net, m) ||
             (pb && dpc_net_name_inputs(net, pb, npb, m)) ||
             dpc_net_infer(net, &b, pb ? pb : feeds, pb ? npb : nfeeds, tm, &outs, &nouts, m))) {
    rc = cli_report("run", m);
    goto done;
  }
  const char *pb_out = cli_get(run_opts, NRUN, &p, "outputs");
  if (pb_out && mkdir(pb_out, 0777) && errno != EEXIST) {
    fprintf(stderr, "dpc run: error: cannot create directory '%s': %s\n", pb_out, strerror(errno));
    rc = DPC_EXIT_ERROR;
    goto done;
  }
  for (unsigned i = 0; pb_out && i < nouts; i++) {
    char path[4200], name[32];
    snprintf(name, sizeof name, "output_%u.pb", i);
    if (!join_path(path, sizeof path, pb_out, name)) {
      rc = cli_usage_error("run", "--outputs %s: the path is too long", pb_out);
      goto done;
    }
    if (dpc_onnx_tensor_save(path, &outs[i], m)) {
      rc = cli_report("run", m);
      goto done;
    }
  }
  const char *dir = cli_get(run_opts, NRUN, &p, "output-dir");
  if (dir && mkdir(dir, 0777) && errno != EEXIST) {
    fprintf(stderr, "dpc run: error: cannot create directory '%s': %s\n", dir, strerror(errno));
    rc = DPC_EXIT_ERROR;
    goto done;
  }
  for (unsigned i = 0; i < nouts; i++) {
    char shape[160];
    format_shape(&outs[i], shape, sizeof shape);
    if (dir) {
      char path[4096], file[1024];
      snprintf(file, sizeof file, "%s.npy", outs[i].name);
      if (!join_path(path, sizeof path, dir, file)) {
        rc = cli_usage_error("run", "--output-dir %s: the path is too long", dir);
        goto done;
      }
      if (dpc_npy_save(path, &outs[i], m)) {
        rc = cli_report("run", m);
        goto done;
      }
      printf("%s: %s[%s] -> %s\n", outs[i].name, dpc_elem_name(outs[i].elem), shape, path);
    } else {
      double sum = 0;
      size_t n = 1;
      for (unsigned j = 0; j < outs[i].rank; j++) n *= (size_t)outs[i].dims[j];
      for (size_t j = 0; j < n; j++) sum += dpc_array_value(&outs[i], j);
      printf("%s: %s[%s] sum %.9g\n", outs[i].name, dpc_elem_name(outs[i].elem), shape, sum);
    }
  }
  rc = DPC_EXIT_OK;
done:
  for (unsigned i = 0; i < nfeeds; i++) {
    free((char *)feeds[i].name);
    free(feeds[i].data);
  }
  dpc_arrays_free(pb, npb);
  dpc_arrays_free(outs, nouts);
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}
