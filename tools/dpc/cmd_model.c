/*
 * cmd_model.c — `dpc check`, `dpc print` and `dpc ops`: looking at models without running them.
 */
#include "tools/dpc/cli.h"
#include "tools/dpc/outpath.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt check_opts[] = {
    {"train", false, false,
     "check the training pipeline too (default: when the model has minimize)"},
    {"verify-each", false, false, "run the verifier after every pass"},
    {"print-after", true, false, "print the graph after PASS (comma-separated, or all)"},
    {"quiet", false, false, "print nothing on success"},
};
#define NCHECK (int)(sizeof check_opts / sizeof *check_opts)

int dpc_cmd_check(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("check", check_opts, NCHECK, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf("Usage: dpc check FILE.graph|FILE.onnx|FILE.dpx [OPTIONS]\n\n"
           "Parse a model, check every name, attribute and shape, and run the compiler's passes\n"
           "over it. Exits 0 when the model is valid; errors point at FILE:LINE:COL. A compiled\n"
           "artifact (.dpx) is checked against its checksum and its plans read back.\n");
    cli_print_options(check_opts, NCHECK);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1) return cli_usage_error("check", "expects one model file (see dpc check --help)");
  dpc_message *m = dpc_message_new();
  dpc_net *net = NULL;
  int rc = DPC_EXIT_OK;
  bool quiet = cli_get(check_opts, NCHECK, &p, "quiet") != NULL;
  if (dpc_path_is_artifact(p.pos[0])) {
    /* an artifact is checked whole: its checksum, its plans, its kernels */
    char what[1400];
    if (dpc_artifact_describe(p.pos[0], what, sizeof what, m))
      rc = cli_report("check", m);
    else if (!quiet)
      printf("%s: ok: %s\n", p.pos[0], what);
    goto done;
  }
  dpc_build_opts b;
  if ((rc = cli_build_opts("check", check_opts, NCHECK, &p, &b))) goto done;
  if (dpc_build_opts_check(&b, m) || dpc_net_load(p.pos[0], NULL, &net, m)) {
    rc = cli_report("check", m);
    goto done;
  }
  /* Check the pipelines the model will go through: inference always, training when it has an
   * objective (or --train asks). */
  bool trainable = dpc_net_trainable(net);
  bool train = trainable || cli_get(check_opts, NCHECK, &p, "train");
  if (dpc_net_check(net, false, &b, m)) {
    rc = cli_report("check", m);
    goto done;
  }
  if (train && !trainable) {
    fprintf(stderr,
            "dpc check: error: %s: --train needs the model to say what to minimize (minimize "
            "LOSS with sgd(lr=0.1))\n",
            p.pos[0]);
    rc = DPC_EXIT_ERROR;
    goto done;
  }
  if (train && dpc_net_check(net, true, &b, m)) {
    rc = cli_report("check", m);
    goto done;
  }
  if (!quiet) {
    dpc_net_summary s = {sizeof s};
    dpc_net_summarize(net, &s);
    printf("%s: ok: model %s, %u nodes, %u inputs, %u params (%lld weights)%s\n", p.pos[0],
           s.name ? s.name : "(unnamed)", s.nodes, s.inputs, s.params, (long long)s.weights,
           s.trainable ? ", trainable" : "");
  }
done:
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}

static const cli_opt print_opts[] = {
    {"dot", false, false,
     "print Graphviz instead of .graph text (render with dot -Tsvg): a node per statement"},
    {"dot-full", false, false, "print Graphviz with every node, constants and unnamed values too"},
    {"brief", false, false,
     "show only the first values of large constants and imported weights (does not parse back)"},
    {"output", true, false, "write to FILE instead of standard output"},
    {"train", false, false, "with --print-after: run the training pipeline"},
    {"verify-each", false, false, "run the verifier after every pass"},
    {"print-after", true, false,
     "run the passes and print the graph after PASS (comma-separated, or all)"},
};
#define NPRINT (int)(sizeof print_opts / sizeof *print_opts)

int dpc_cmd_print(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("print", print_opts, NPRINT, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf(
        "Usage: dpc print FILE.graph|FILE.onnx [OPTIONS]\n\n"
        "Print a model in canonical .graph form: one statement per named value, sub-expressions\n"
        "folded, attributes as given. Parsing the output gives the same model, and printing it\n"
        "again gives the same text. With --dot, print Graphviz with one cluster per device and a\n"
        "node per statement (scalar constants left out); --dot-full draws every node.\n");
    cli_print_options(print_opts, NPRINT);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1) return cli_usage_error("print", "expects one model file (see dpc print --help)");
  if (cli_check_output_file("print", "output", cli_get(print_opts, NPRINT, &p, "output")))
    return DPC_EXIT_ERROR;
  dpc_message *m = dpc_message_new();
  dpc_net *net = NULL;
  char *text = NULL;
  int rc = DPC_EXIT_OK;
  dpc_build_opts b;
  if ((rc = cli_build_opts("print", print_opts, NPRINT, &p, &b))) goto done;
  if (dpc_build_opts_check(&b, m) || dpc_net_load(p.pos[0], NULL, &net, m)) {
    rc = cli_report("print", m);
    goto done;
  }
  dpc_print_form form = cli_get(print_opts, NPRINT, &p, "dot-full") ? DPC_PRINT_DOT_FULL
                        : cli_get(print_opts, NPRINT, &p, "dot")    ? DPC_PRINT_DOT
                        : cli_get(print_opts, NPRINT, &p, "brief")  ? DPC_PRINT_BRIEF
                                                                    : DPC_PRINT_TEXT;
  bool train = cli_get(print_opts, NPRINT, &p, "train") != NULL;
  if (dpc_net_print(net, form, train, &b, &text, m)) {
    rc = cli_report("print", m);
    goto done;
  }
  if (!text) goto done; /* the --print-after dumps were the output */
  const char *outp = cli_get(print_opts, NPRINT, &p, "output");
  FILE *f = outp ? fopen(outp, "w") : stdout;
  if (!f) {
    fprintf(stderr, "dpc print: error: cannot create '%s'\n", outp);
    rc = DPC_EXIT_ERROR;
    goto done;
  }
  fputs(text, f);
  if (outp && fclose(f)) {
    fprintf(stderr, "dpc print: error: cannot write '%s'\n", outp);
    rc = DPC_EXIT_ERROR;
  }
done:
  free(text);
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}

int dpc_cmd_ops(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("ops", NULL, 0, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help || p.npos) {
    printf("Usage: dpc ops\n\nList every op of the .graph language with its inputs, outputs and "
           "attributes\n(name:kind, =default when optional, ? when optional without default).\n");
    return p.help ? DPC_EXIT_OK : DPC_EXIT_USAGE;
  }
  for (unsigned i = 0; i < dpc_op_count(); i++) {
    dpc_op_entry o = {sizeof o};
    if (!dpc_op_at(i, &o)) break;
    printf("%-22s (%s) -> %s", o.name, o.inputs, o.outputs);
    if (o.attrs[0]) printf("   %s", o.attrs);
    printf("\n");
  }
  printf("\nAliases: embedding(table, ids) = gather(table, ids, axis=0)\n"
         "Statements: input, param, state, output, update, minimize, device; see "
         "docs/graph-format.md\n");
  return DPC_EXIT_OK;
}
