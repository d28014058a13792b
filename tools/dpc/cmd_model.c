/*
 * cmd_model.c — `dpc check`, `dpc print` and `dpc ops`: looking at models without running them.
 */
#include "frontend/frontend.h"
#include "ir/print.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "tools/dpc/cli.h"
#include "driver/driver.h"
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
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  int rc = DPC_EXIT_OK;
  if (dpc_driver_is_artifact(p.pos[0])) {
    /* an artifact is checked whole: its checksum, its plans, its kernels */
    char what[1400];
    if (dpc_driver_describe_artifact(p.pos[0], what, sizeof what, &d))
      rc = cli_report("check", &d);
    else if (!cli_get(check_opts, NCHECK, &p, "quiet"))
      printf("%s: ok: %s\n", p.pos[0], what);
    goto done;
  }
  dpc_pass_opts po = {.verify_each = cli_get(check_opts, NCHECK, &p, "verify-each") != NULL,
                      .print_after = cli_get(check_opts, NCHECK, &p, "print-after"),
                      .dump = cli_print_dump};
  if (dpc_passes_check_names(po.print_after, &d) || dpc_driver_load(p.pos[0], &g, &d)) {
    rc = cli_report("check", &d);
    goto done;
  }
  /* Check the pipelines the model will go through: inference always, training when it has an
   * objective (or --train asks). */
  bool train = g->obj.loss != DPC_NONE || cli_get(check_opts, NCHECK, &p, "train");
  for (int pass = 0; pass < (train ? 2 : 1); pass++) {
    dpc_graph *c = dpc_graph_clone(g);
    if (!c) {
      dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
      rc = cli_report("check", &d);
      goto done;
    }
    po.training = pass == 1;
    if (po.training && g->obj.loss == DPC_NONE) {
      dpc_diag_fail(&d, DPC_ERR_INVALID,
                    "%s: --train needs the model to say what to minimize "
                    "(minimize LOSS with sgd(lr=0.1))",
                    p.pos[0]);
      dpc_graph_free(c);
      rc = cli_report("check", &d);
      goto done;
    }
    dpc_status st = po.training ? dpc_driver_default_horizon(c, &d) : DPC_OK;
    if (!st) st = dpc_passes_run(c, &po, &d);
    dpc_graph_free(c);
    if (st) {
      rc = cli_report("check", &d);
      goto done;
    }
  }
  if (!cli_get(check_opts, NCHECK, &p, "quiet")) {
    uint32_t nparams = 0, ninputs = 0;
    int64_t weights = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
      if (g->nodes[i].op == DPC_OP_INPUT) ninputs++;
      if (g->nodes[i].op == DPC_OP_PARAM) {
        nparams++;
        weights += dpc_shape_numel(&g->values[g->nodes[i].out].shape);
      }
    }
    printf("%s: ok: model %s, %u nodes, %u inputs, %u params (%lld weights)%s\n", p.pos[0],
           g->name != DPC_NONE ? dpc_graph_str(g, g->name) : "(unnamed)", g->n_nodes, ninputs,
           nparams, (long long)weights, g->obj.loss != DPC_NONE ? ", trainable" : "");
  }
done:
  dpc_graph_free(g);
  dpc_diag_free(&d);
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
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  dpc_buf b = {0};
  int rc = DPC_EXIT_OK;
  const char *after = cli_get(print_opts, NPRINT, &p, "print-after");
  if (dpc_passes_check_names(after, &d) || dpc_driver_load(p.pos[0], &g, &d)) {
    rc = cli_report("print", &d);
    goto done;
  }
  if (after || cli_get(print_opts, NPRINT, &p, "verify-each")) {
    dpc_pass_opts po = {.training = cli_get(print_opts, NPRINT, &p, "train") != NULL,
                        .verify_each = cli_get(print_opts, NPRINT, &p, "verify-each") != NULL,
                        .print_after = after,
                        .fuse = dpc_cpu_fusion(), /* as the default backend compiles it */
                        .dump = cli_print_dump};
    if ((po.training && dpc_driver_default_horizon(g, &d)) || dpc_passes_run(g, &po, &d)) {
      rc = cli_report("print", &d);
      goto done;
    }
    if (after) goto done; /* the dumps were the output */
  }
  dpc_status st = cli_get(print_opts, NPRINT, &p, "dot-full") ? dpc_dot_graph_full(g, NULL, &b)
                  : cli_get(print_opts, NPRINT, &p, "dot")    ? dpc_dot_graph(g, &b)
                  : cli_get(print_opts, NPRINT, &p, "brief")  ? dpc_print_graph_brief(g, 4, &b)
                                                              : dpc_print_graph(g, &b);
  if (st) {
    dpc_diag_fail(&d, st, "out of memory printing the model");
    rc = cli_report("print", &d);
    goto done;
  }
  const char *outp = cli_get(print_opts, NPRINT, &p, "output");
  FILE *f = outp ? fopen(outp, "w") : stdout;
  if (!f) {
    dpc_diag_fail(&d, DPC_ERR_IO, "cannot create '%s'", outp);
    rc = cli_report("print", &d);
    goto done;
  }
  fputs(b.data ? b.data : "", f);
  if (outp && fclose(f)) {
    dpc_diag_fail(&d, DPC_ERR_IO, "cannot write '%s'", outp);
    rc = cli_report("print", &d);
  }
done:
  dpc_buf_free(&b);
  dpc_graph_free(g);
  dpc_diag_free(&d);
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
  for (int i = 0; i < DPC_OP_COUNT; i++) {
    const dpc_op_info *o = dpc_op_get((dpc_op)i);
    if ((o->flags & DPC_OPF_SOURCE) && i != DPC_OP_CONSTANT) continue;
    printf("%-22s (%s) -> %s", o->name, o->inputs, o->outputs);
    if (o->attrs[0]) printf("   %s", o->attrs);
    printf("\n");
  }
  printf("\nAliases: embedding(table, ids) = gather(table, ids, axis=0)\n"
         "Statements: input, param, state, output, update, minimize, device; see "
         "docs/graph-format.md\n");
  return DPC_EXIT_OK;
}
