/*
 * cmd_onnx.c — `dpc onnx-test`: run directories in the ONNX backend-test layout (model.onnx and
 * test_data_set_N directories with input_N.pb and output_N.pb) and compare with the expected
 * outputs.
 */
#include "tools/dpc/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt onnx_opts[] = {
    {"backend", true, false,
     "llvm (default: kernels compiled for this CPU), ref (the reference kernels) or cuda "
     "(kernels compiled by NVRTC, run on the GPU cuda:0)"},
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

/* One line per test: PASS, FAIL (with why) or SKIP; a pass only without --quiet. */
static void print_case(void *user, const dpc_onnx_case *c) {
  bool quiet = *(const bool *)user;
  if (c->verdict == DPC_ONNX_FAIL || !quiet)
    printf("%s %s%s%s\n",
           c->verdict == DPC_ONNX_PASS   ? "PASS"
           : c->verdict == DPC_ONNX_FAIL ? "FAIL"
                                         : "SKIP",
           c->dir, *c->why ? ": " : "", c->why);
  fflush(stdout);
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
    printf("\nONNX ops dpc imports: %s.\n", dpc_onnx_ops());
    return DPC_EXIT_OK;
  }
  if (p.npos < 1) return cli_usage_error("onnx-test", "expects test directories (see --help)");
  dpc_build_opts b;
  int rc = cli_build_opts("onnx-test", onnx_opts, NOPTS, &p, &b);
  if (rc) return rc;
  double rtol = 1e-3, atol = 1e-7, min_pass = -1;
  const char *v;
  char *end;
  if ((v = cli_get(onnx_opts, NOPTS, &p, "rtol")) && (rtol = strtod(v, &end), *end || rtol < 0))
    rc = cli_usage_error("onnx-test", "--rtol expects a number >= 0, got '%s'", v);
  else if ((v = cli_get(onnx_opts, NOPTS, &p, "atol")) &&
           (atol = strtod(v, &end), *end || atol < 0))
    rc = cli_usage_error("onnx-test", "--atol expects a number >= 0, got '%s'", v);
  else if ((v = cli_get(onnx_opts, NOPTS, &p, "min-pass")) &&
           (min_pass = strtod(v, &end), *end || min_pass < 0 || min_pass > 1))
    rc = cli_usage_error("onnx-test", "--min-pass expects a fraction in [0, 1], got '%s'", v);
  if (rc) return rc;
  bool quiet = cli_get(onnx_opts, NOPTS, &p, "quiet") != NULL;
  dpc_onnx_test_opts o = {sizeof o,
                          .build = b,
                          .rtol = &rtol,
                          .atol = &atol,
                          .fail_on_skip = cli_get(onnx_opts, NOPTS, &p, "fail-on-skip") != NULL,
                          .on_case = print_case,
                          .user = &quiet};
  dpc_onnx_totals t = {sizeof t};
  dpc_message *m = dpc_message_new();
  for (int i = 0; i < p.npos; i++) {
    if (dpc_onnx_test_run(p.pos[i], &o, &t, m)) {
      /* not a folder, or no test in it: the command line was wrong */
      rc = dpc_message_status(m) == DPC_ERR_INVALID
               ? cli_usage_error("onnx-test", "%s", dpc_message_brief(m))
               : cli_report("onnx-test", m);
      dpc_message_free(m);
      return rc;
    }
  }
  dpc_message_free(m);
  unsigned npass = t.passed, nfail = t.failed, nskip = t.skipped, nskip_op = t.skipped_op;
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
