/*
 * main.c — the dpc command: dispatch to subcommands.
 */
#include "tools/dpc/cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f,
          "dpc %s — dataflow graph compiler and scheduler\n"
          "\n"
          "Usage: dpc COMMAND [OPTIONS] ...\n"
          "\n"
          "Commands:\n"
          "  check FILE       check a model (.graph or .onnx): syntax, names, shapes\n"
          "  print FILE       print a model in canonical .graph form, or as Graphviz (--dot)\n"
          "  run FILE         run a model on .npy inputs and write its outputs as .npy\n"
          "  train FILE       train a model on a dataset (Fashion-MNIST by default)\n"
          "  compile FILE     compile a model ahead of time into an artifact (.dpx)\n"
          "  bench FILE       time a model's training step or forward pass\n"
          "  serve FILE.dpx   serve a compiled model over HTTP (KServe v2 JSON), batching\n"
          "  devices          list the devices of this machine, with measured speeds\n"
          "  plan FILE        show how a training step is spread over devices, with predictions\n"
          "  onnx-test DIR... run ONNX backend tests (model.onnx, test_data_set_*) and compare\n"
          "  ops              list the ops a .graph model can use\n"
          "  version          print the version\n"
          "  help [COMMAND]   show help\n"
          "\n"
          "Run 'dpc COMMAND --help' for a command's options. The .graph language is described in\n"
          "docs/graph-format.md.\n",
          DPC_VERSION_STRING);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return DPC_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    if (argc > 2 && strcmp(cmd, "help") == 0) {
      char *sub[] = {argv[0], argv[2], "--help"};
      return main(3, sub);
    }
    usage(stdout);
    return DPC_EXIT_OK;
  }
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    if (argc > 2 && !strcmp(argv[2], "--help")) {
      printf(
          "Usage: dpc version\n\nPrint dpc's version, whether the MPI transport is built in, and "
          "whether CUDA code generation (NVRTC) is.\n");
      return DPC_EXIT_OK;
    }
    printf("dpc %s\n", DPC_VERSION_STRING);
    printf("mpi transport: %s\n", dpc_has_mpi() ? "built in" : "not built");
    printf("cuda codegen: %s\n",
           dpc_has_cuda_codegen() ? "built in (NVRTC)" : "not built (no CUDA toolkit found)");
    return DPC_EXIT_OK;
  }
  if (!strcmp(cmd, "check")) return dpc_cmd_check(argc, argv);
  if (!strcmp(cmd, "print")) return dpc_cmd_print(argc, argv);
  if (!strcmp(cmd, "run")) return dpc_cmd_run(argc, argv);
  if (!strcmp(cmd, "train")) return dpc_cmd_train(argc, argv);
  if (!strcmp(cmd, "compile")) return dpc_cmd_compile(argc, argv);
  if (!strcmp(cmd, "ops")) return dpc_cmd_ops(argc, argv);
  if (!strcmp(cmd, "bench")) return dpc_cmd_bench(argc, argv);
  if (!strcmp(cmd, "serve")) return dpc_cmd_serve(argc, argv);
  if (!strcmp(cmd, "devices")) return dpc_cmd_devices(argc, argv);
  if (!strcmp(cmd, "plan")) return dpc_cmd_plan(argc, argv);
  if (!strcmp(cmd, "onnx-test")) return dpc_cmd_onnx_test(argc, argv);
  fprintf(stderr, "dpc: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return DPC_EXIT_USAGE;
}
