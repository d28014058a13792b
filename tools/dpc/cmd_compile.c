/*
 * cmd_compile.c — `dpc compile`: a model compiled ahead of time into an artifact (.dpx) that the
 * runtime library runs without LLVM (`dpc run model.dpx`, `dpc train model.dpx`, or an app
 * through include/dpc/dpc.h).
 */
#include "tools/dpc/cli.h"
#include "tools/dpc/interrupt.h"
#include "tools/dpc/outpath.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt compile_opts[] = {
    CLI_OPT_LOSS,
    {"output", true, false, "FILE.dpx to write (required)"},
    {"batch", true, false,
     "the batch size the plans are made for (default 64 with --train, as dpc train; else 1, "
     "an inference artifact serving one request at a time)"},
    {"dim", true, true, "NAME=VALUE: the size of another symbolic dimension"},
    {"batch-sizes", true, false,
     "more inference plans for smaller batches, e.g. 1,4 (an application runs a partial batch "
     "on the smallest that fits, without recompiling)"},
    {"devices", true, false,
     "data parallel over these devices, e.g. cpu:2, or cuda:0,cuda:1 with --backend cuda (the "
     "batch split equally; default one; the evaluation plan stays on one)"},
    {"strategy", true, false,
     "data (the batch split over --devices, the default) or model (inference only: the model "
     "split over --devices by the partitioner, each device holding a part; dpc serve pipelines "
     "consecutive batches through them)"},
    {"device-memory", true, false,
     "SIZE (512M, 2G): each device's memory; the inference plans must fit, and a model that "
     "does not fit on one of --devices is split over them"},
    {"train", false, false, "also compile the training step and an evaluation plan"},
    {"total-steps", true, false, "with --train: the horizon of a cosine or linear schedule"},
    {"backend", true, false,
     "llvm (the default: host machine code) or cuda (GPU kernels compiled by NVRTC to CUBIN and "
     "PTX; the artifact runs on cuda:0, or on the GPUs of --devices)"},
    CLI_OPT_CUDA,
    {"cpu", true, false,
     "target CPU (default native: this machine), e.g. x86-64-v3, skylake-avx512"},
    {"features", true, false, "target features, e.g. +avx2,+fma (default: the CPU's)"},
    {"dump-llvm", false, false, "print the generated LLVM IR to stderr"},
    {"verify-each", false, false, "run the verifier after every pass"},
};
#define NCOMPILE (int)(sizeof compile_opts / sizeof *compile_opts)

/* --batch-sizes: "1,4", each from 1 to below the batch, at most max of them. */
static bool parse_sizes(const char *list, long long batch, uint32_t *ks, uint32_t max,
                        uint32_t *n) {
  *n = 0;
  const char *at = list;
  do {
    char *end;
    long long k = strtoll(at, &end, 10);
    if (end == at || (*end && *end != ',') || k < 1 || k >= batch || *n == max) return false;
    ks[(*n)++] = (uint32_t)k;
    at = *end ? end + 1 : end;
    if (*end && !*at) return false; /* a trailing comma */
  } while (*at);
  return true;
}

int dpc_cmd_compile(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("compile", compile_opts, NCOMPILE, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf(
        "Usage: dpc compile FILE.graph|FILE.onnx --output FILE.dpx [OPTIONS]\n\n"
        "Compile a model ahead of time: every kernel as machine code for the target CPU, and the\n"
        "plans (inference; with --train also the training step and evaluation) for a fixed batch\n"
        "size, in one shared library. The runtime library runs it without LLVM: dpc run FILE.dpx,\n"
        "dpc train FILE.dpx, or an application through <dpc/dpc.h>. Linking needs a C compiler\n"
        "driver (cc, or $CC). With --backend cuda the kernels are GPU code instead (CUBIN for\n"
        "--cuda-arch, PTX for newer GPUs) in a plain file, nothing linked, which the same\n"
        "runtime library runs on cuda:0 where it finds a CUDA driver. The file ends in a\n"
        "checksum the runtime checks before loading it; it is written beside FILE.dpx and\n"
        "renamed into place, so a failed or interrupted compile leaves an existing FILE.dpx as\n"
        "it was.\n");
    cli_print_options(compile_opts, NCOMPILE);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1)
    return cli_usage_error("compile", "expects one model file (see dpc compile --help)");
  const char *outp = cli_get(compile_opts, NCOMPILE, &p, "output");
  if (!outp) return cli_usage_error("compile", "--output FILE.dpx is required");
  if (cli_check_output_file("compile", "output", outp)) return DPC_EXIT_ERROR;
  const char *bs = cli_get(compile_opts, NCOMPILE, &p, "batch");
  char *end;
  bool train = cli_get(compile_opts, NCOMPILE, &p, "train") != NULL;
  /* a training artifact takes dpc train's batch; inference answers one request at a time */
  long long batch = bs ? strtoll(bs, &end, 10) : train ? DPC_DEFAULT_BATCH : 1;
  if (bs && (*end || batch < 1 || batch > (1 << 24)))
    return cli_usage_error("compile", "--batch expects a whole number from 1, got '%s'", bs);
  if (!train && cli_get(compile_opts, NCOMPILE, &p, "total-steps"))
    return cli_usage_error("compile", "--total-steps goes with --train");
  uint64_t total_steps = 0;
  const char *ts = cli_get(compile_opts, NCOMPILE, &p, "total-steps");
  if (ts) {
    long long n = strtoll(ts, &end, 10);
    if (*end || n < 1)
      return cli_usage_error("compile", "--total-steps expects a whole number from 1, got '%s'",
                             ts);
    total_steps = (uint64_t)n;
  }
  const char *size_list = cli_get(compile_opts, NCOMPILE, &p, "batch-sizes");
  uint32_t sizes[DPC_COMPILE_MAX_BATCH_SIZES];
  uint32_t n_sizes = 0;
  if (size_list && !parse_sizes(size_list, batch, sizes, DPC_COMPILE_MAX_BATCH_SIZES, &n_sizes))
    return cli_usage_error("compile",
                           "--batch-sizes expects a list of at most %u sizes from 1 to below "
                           "--batch %lld, got '%s'",
                           DPC_COMPILE_MAX_BATCH_SIZES, batch, size_list);
  const char *dims[CLI_MAX_VALUES];
  int n_dims = cli_count(compile_opts, NCOMPILE, &p, "dim");
  for (int i = 0; i < n_dims; i++) dims[i] = cli_value(compile_opts, NCOMPILE, &p, "dim", i);
  const char *devs = cli_get(compile_opts, NCOMPILE, &p, "devices");
  const char *strategy = cli_get(compile_opts, NCOMPILE, &p, "strategy");
  if (strategy && strcmp(strategy, "data") && strcmp(strategy, "model"))
    return cli_usage_error("compile", "--strategy expects data or model, got '%s'", strategy);
  bool split = strategy && !strcmp(strategy, "model");
  if (split && !devs)
    return cli_usage_error("compile", "--strategy model splits the model over --devices: give "
                                      "at least two, e.g. --devices cpu:2");
  if (split && train)
    return cli_usage_error("compile", "--strategy model compiles inference plans only; to train "
                                      "a split model use dpc train --strategy model");
  const char *mem = cli_get(compile_opts, NCOMPILE, &p, "device-memory");
  uint64_t device_memory = 0;
  if (mem && !dpc_parse_size(mem, &device_memory))
    return cli_usage_error("compile", "--device-memory expects a size such as 512M or 2G, got '%s'",
                           mem);
  dpc_build_opts b;
  int rc = cli_build_opts("compile", compile_opts, NCOMPILE, &p, &b);
  if (rc) return rc;
  bool gpu_code = b.backend && !strcmp(b.backend, "cuda");
  if (devs && gpu_code != !strncmp(devs, "cuda", 4))
    return cli_usage_error("compile",
                           gpu_code ? "--devices %s: GPU code runs on GPUs: give them as "
                                      "cuda:0,cuda:1,..."
                                    : "--devices %s: GPUs run GPU code: compile it with --backend "
                                      "cuda",
                           devs);
  dpc_message *m = dpc_message_new();
  dpc_net *net = NULL;
  const char *loss = cli_get(compile_opts, NCOMPILE, &p, "loss");
  dpc_status lst = dpc_net_load(
      p.pos[0], &(dpc_load_opts){sizeof(dpc_load_opts), .batched = true, .loss = loss}, &net, m);
  if (net && dpc_net_fixed_batch(net))
    fprintf(stderr,
            "dpc compile: note: %s; until then it runs at the shapes it was exported with, "
            "whatever --batch says\n",
            dpc_net_fixed_batch(net));
  if (lst) goto report;
  dpc_compile_info info = {sizeof info};
  dpc_compile_opts co = {sizeof co,
                         .build = b,
                         .batch = (uint32_t)batch,
                         .batch_sizes = sizes,
                         .n_batch_sizes = n_sizes,
                         .dims = dims,
                         .n_dims = (unsigned)n_dims,
                         .devices = devs,
                         .train = train,
                         .total_steps = total_steps,
                         .cpu = cli_get(compile_opts, NCOMPILE, &p, "cpu"),
                         .features = cli_get(compile_opts, NCOMPILE, &p, "features"),
                         .cancel = cli_interrupt_flag(),
                         .info = &info,
                         .split = split,
                         .device_memory = device_memory};
  /* a signal stops the compile, which removes its temporary files; dpc then ends by it */
  cli_interrupt_catch_mode("compile", false, CLI_INTERRUPT_CLEANUP);
  dpc_status st = dpc_net_compile(net, &co, outp, m);
  if (st && cli_interrupt_exit_code()) cli_report("compile", m);
  cli_interrupt_release();
  if (st) {
    switch (info.problem) {
    case DPC_COMPILE_BAD_DIM:
      rc = cli_usage_error("compile",
                           "--dim expects NAME=VALUE for a dimension of the model, got '%s'",
                           dims[info.index]);
      goto done;
    case DPC_COMPILE_NO_LOSS:
      fprintf(stderr,
              "dpc compile: error: %s has nothing to minimize: --train needs a 'minimize' line\n",
              p.pos[0]);
      rc = DPC_EXIT_ERROR;
      goto done;
    case DPC_COMPILE_NO_HORIZON:
      rc = cli_usage_error("compile",
                           "--train: the model's %s learning-rate schedule needs its length: give "
                           "--total-steps N (the optimizer steps of the run, as dpc train "
                           "counts them from --epochs)",
                           info.schedule);
      goto done;
    case DPC_COMPILE_SPLIT:
      rc = cli_usage_error("compile",
                           "--devices %s makes %u devices, which do not divide --batch %lld", devs,
                           info.replicas, batch);
      goto done;
    case DPC_COMPILE_BAD_BATCH: /* refused above already */
    case DPC_COMPILE_FINE: goto report;
    }
    goto report;
  }
  dpc_net_summary sum = {sizeof sum};
  dpc_net_summarize(net, &sum);
  printf("%s: %s for %s, batch %lld%s%s%s\n", outp, sum.name ? sum.name : "model", info.target,
         batch, info.replicas > 1 ? ", data parallel over " : "", info.replicas > 1 ? devs : "",
         train ? ", with training" : "");
  if (info.split)
    printf("  split over %s (model parallel): at most %.1f MiB on one device%s\n", devs,
           (double)info.device_bytes / (1024.0 * 1024), split ? "" : ", as --device-memory asks");
  goto done;
report:
  rc = cli_report("compile", m);
done:
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}
