/*
 * cmd_compile.c — `dpc compile`: a model compiled ahead of time into an artifact (.dpx) that the
 * runtime library runs without LLVM (`dpc run model.dpx`, `dpc train model.dpx`, or an app
 * through include/dpc/dpc.h).
 */
#include "codegen/cpu/cpu.h"
#include "partitioner/partitioner.h"
#include "tools/dpc/cli.h"
#include "tools/dpc/cli_legacy.h"
#include "driver/driver.h"
#include "tools/dpc/outpath.h"

#include <errno.h>
#include <signal.h>
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
     "data parallel over these devices, e.g. cpu:2 (the batch split equally; default one; the "
     "evaluation plan stays on one)"},
    {"train", false, false, "also compile the training step and an evaluation plan"},
    {"total-steps", true, false, "with --train: the horizon of a cosine or linear schedule"},
    {"cpu", true, false,
     "target CPU (default native: this machine), e.g. x86-64-v3, skylake-avx512"},
    {"features", true, false, "target features, e.g. +avx2,+fma (default: the CPU's)"},
    {"dump-llvm", false, false, "print the generated LLVM IR to stderr"},
    {"verify-each", false, false, "run the verifier after every pass"},
};
#define NCOMPILE (int)(sizeof compile_opts / sizeof *compile_opts)

/* The signal that asked a compile to stop (the accepted exception to no global state: a signal
 * handler has nowhere else to write). */
static volatile sig_atomic_t compile_stop;

static void on_stop(int sig) {
  compile_stop = sig;
}

/* SIGINT and SIGTERM set compile_stop instead of killing dpc at once, so the compile removes its
 * temporary files; no SA_RESTART, so waiting for the linker wakes up. A signal ignored when dpc
 * started (a background job of a script) stays ignored. */
static void catch_stop(struct sigaction *old) {
  static const int sigs[2] = {SIGINT, SIGTERM};
  struct sigaction sa = {0};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 2; i++) {
    sigaction(sigs[i], NULL, &old[i]);
    if (old[i].sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
  }
}

/* Put the handlers back; a caught signal is raised again, so dpc ends as the signal says. */
static void release_stop(const struct sigaction *old) {
  sigaction(SIGINT, &old[0], NULL);
  sigaction(SIGTERM, &old[1], NULL);
  if (compile_stop) raise(compile_stop);
}

/* A copy of g through the pipeline, every symbol bound, planned on one device, or data parallel
 * over `replicas` (each replica's symbols at vals / replicas where vals is the batch). */
static dpc_status make_plan(const dpc_graph *src, bool training, bool eval, const int64_t *vals,
                            int64_t batch, uint32_t replicas, bool verify, dpc_plan **out,
                            dpc_diag *d) {
  dpc_graph *g = dpc_graph_clone(src);
  if (!g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_pass_opts po = {.training = training, .verify_each = verify, .fuse = dpc_cpu_fusion()};
  dpc_status st = eval ? dpc_graph_add_output(g, g->obj.loss, d) : DPC_OK;
  if (!st) st = dpc_passes_run(g, &po, d);
  int64_t *per = calloc(g->n_syms ? g->n_syms : 1, sizeof *per);
  if (!per && !st) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t k = 0; per && k < g->n_syms; k++)
    per[k] = vals[k] == batch ? batch / replicas : vals[k];
  if (!st) st = dpc_graph_bind(g, per, d);
  if (!st && replicas > 1)
    st = dpc_driver_plan(g, batch, &(dpc_driver_strategy){.replicas = replicas, .mp = 1}, training,
                         out, d);
  else if (!st)
    st = dpc_plan_single(g, "cpu:0", training, out, d);
  free(per);
  dpc_graph_free(g);
  return st;
}

/* --batch-sizes: "1,4", each from 1 to below the batch, at most max of them. */
static bool parse_sizes(const char *list, long long batch, long long *ks, uint32_t max,
                        uint32_t *n) {
  *n = 0;
  const char *at = list;
  do {
    char *end;
    long long k = strtoll(at, &end, 10);
    if (end == at || (*end && *end != ',') || k < 1 || k >= batch || *n == max) return false;
    ks[(*n)++] = k;
    at = *end ? end + 1 : end;
    if (*end && !*at) return false; /* a trailing comma */
  } while (*at);
  return true;
}

/* The objective's schedule when it needs a horizon the model does not give (cosine, linear);
 * NULL when it needs none or has one. */
static const char *schedule_without_horizon(const dpc_graph *g) {
  const char *sched = NULL;
  for (uint32_t i = 0; i < g->obj.n_attr; i++) {
    const dpc_attr *a = &g->attrs[g->obj.attr + i];
    const char *name = dpc_graph_str(g, a->name);
    if (!strcmp(name, "total_steps")) return NULL;
    if (!strcmp(name, "schedule") && a->kind == DPC_ATTR_STR) sched = dpc_graph_str(g, a->u.s);
  }
  return sched && (!strcmp(sched, "cosine") || !strcmp(sched, "linear")) ? sched : NULL;
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
        "driver (cc, or $CC). The file ends in a checksum the runtime checks before loading it;\n"
        "it is written beside FILE.dpx and renamed into place, so a failed or interrupted\n"
        "compile leaves an existing FILE.dpx as it was.\n");
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
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL;
  dpc_codegen *cg = NULL;
  /* infer, train, eval, then one inference plan per --batch-sizes entry */
  enum { MAX_SIZES = 12, MAX_PLANS = 3 + MAX_SIZES };
  dpc_plan *plans[MAX_PLANS] = {NULL};
  char roles[MAX_PLANS][16];
  int64_t *vals = NULL;
  int rc = DPC_EXIT_OK;
  dpc_exec_opts x = {0};
  if ((rc = cli_exec_opts("compile", compile_opts, NCOMPILE, &p, &x))) goto done;
  x.cpu.cpu = cli_get(compile_opts, NCOMPILE, &p, "cpu");
  x.cpu.features = cli_get(compile_opts, NCOMPILE, &p, "features");
  char *fixed = NULL;
  dpc_status lst = dpc_driver_load_batched(p.pos[0], &g, &fixed, &d);
  if (fixed)
    fprintf(stderr,
            "dpc compile: note: %s; until then it runs at the shapes it was exported with, "
            "whatever --batch says\n",
            fixed);
  free(fixed);
  if (lst) goto report;
  const char *loss = cli_get(compile_opts, NCOMPILE, &p, "loss");
  if (loss && dpc_driver_attach_loss(g, loss, &d)) goto report;
  /* symbols: --dim NAME=VALUE, the rest take --batch */
  vals = calloc(g->n_syms ? g->n_syms : 1, sizeof *vals);
  for (uint32_t k = 0; vals && k < g->n_syms; k++) vals[k] = batch;
  for (int i = 0; vals && i < cli_count(compile_opts, NCOMPILE, &p, "dim"); i++) {
    const char *a = cli_value(compile_opts, NCOMPILE, &p, "dim", i), *eq = strchr(a, '=');
    long long v = eq ? strtoll(eq + 1, &end, 10) : -1;
    uint32_t k = eq ? dpc_graph_find_symbol(g, a, (size_t)(eq - a)) : DPC_NONE;
    if (!eq || *end || v < 0 || k == DPC_NONE) {
      rc = cli_usage_error("compile",
                           "--dim expects NAME=VALUE for a dimension of the model, got '%s'", a);
      goto done;
    }
    vals[k] = v;
  }
  if (train) {
    if (g->obj.loss == DPC_NONE) {
      dpc_diag_fail(&d, DPC_ERR_INVALID,
                    "%s has nothing to minimize: --train needs a 'minimize' line", p.pos[0]);
      goto report;
    }
    const char *ts = cli_get(compile_opts, NCOMPILE, &p, "total-steps");
    const char *needs = ts ? NULL : schedule_without_horizon(g);
    if (needs) {
      rc = cli_usage_error("compile",
                           "--train: the model's %s learning-rate schedule needs its length: give "
                           "--total-steps N (the optimizer steps of the run, as dpc train "
                           "counts them from --epochs)",
                           needs);
      goto done;
    }
    if (ts) {
      long long n = strtoll(ts, &end, 10);
      if (*end || n < 1) {
        rc =
            cli_usage_error("compile", "--total-steps expects a whole number from 1, got '%s'", ts);
        goto done;
      }
      uint32_t mark = dpc_graph_attr_mark(g);
      for (uint32_t i = 0; i < g->obj.n_attr; i++)
        if (strcmp(dpc_graph_str(g, g->attrs[g->obj.attr + i].name), "total_steps"))
          dpc_graph_attr_copy(g, g, &g->attrs[g->obj.attr + i]);
      dpc_graph_attr_int(g, "total_steps", n);
      g->obj.attr = mark;
      g->obj.n_attr = dpc_graph_attr_mark(g) - mark;
    }
  }
  bool verify = cli_get(compile_opts, NCOMPILE, &p, "verify-each") != NULL;
  const char *size_list = cli_get(compile_opts, NCOMPILE, &p, "batch-sizes");
  long long sizes[MAX_SIZES];
  uint32_t n_sizes = 0;
  if (size_list && !parse_sizes(size_list, batch, sizes, MAX_SIZES, &n_sizes)) {
    rc = cli_usage_error("compile",
                         "--batch-sizes expects a list of at most %d sizes from 1 to below "
                         "--batch %lld, got '%s'",
                         MAX_SIZES, batch, size_list);
    goto done;
  }
  const char *devs = cli_get(compile_opts, NCOMPILE, &p, "devices");
  uint32_t replicas = 1;
  if (devs && dpc_driver_count_devices(devs, &replicas, &d)) goto report;
  if (replicas < 1 || batch % replicas) {
    rc = cli_usage_error("compile",
                         "--devices %s makes %u devices, which do not divide --batch %lld", devs,
                         replicas, batch);
    goto done;
  }
  dpc_aot_plan aot[MAX_PLANS];
  uint32_t n = 0;
  if (make_plan(g, false, false, vals, batch, replicas, verify, &plans[0], &d)) goto report;
  aot[n++] = (dpc_aot_plan){"infer", plans[0]};
  if (train) {
    if (make_plan(g, true, false, vals, batch, replicas, verify, &plans[1], &d) ||
        /* on one device: a data-parallel forward pass leaves each replica's loss its own */
        make_plan(g, false, true, vals, batch, 1, verify, &plans[2], &d))
      goto report;
    aot[n++] = (dpc_aot_plan){"train", plans[1]};
    aot[n++] = (dpc_aot_plan){"eval", plans[2]};
  }
  /* smaller batches: single-device plans named infer@ROWS (runtime/api.c picks among them) */
  for (uint32_t i = 0; i < n_sizes; i++) {
    long long k = sizes[i];
    int64_t *bv = calloc(g->n_syms ? g->n_syms : 1, sizeof *bv);
    for (uint32_t q = 0; bv && q < g->n_syms; q++) bv[q] = vals[q] == batch ? k : vals[q];
    dpc_status bst = bv ? make_plan(g, false, false, bv, k, 1, verify, &plans[n], &d)
                        : dpc_diag_fail(&d, DPC_ERR_NOMEM, "out of memory");
    free(bv);
    if (bst) goto report;
    snprintf(roles[n], sizeof roles[n], "infer@%lld", k);
    aot[n] = (dpc_aot_plan){roles[n], plans[n]};
    n++;
  }
  x.cpu.stop = &compile_stop;
  struct sigaction old[2];
  catch_stop(old);
  bool failed = dpc_codegen_new(x.backend, &x.cpu, &cg, &d) ||
                dpc_codegen_write_artifact(cg, aot, n, outp, &d);
  if (failed && compile_stop) cli_report("compile", &d);
  release_stop(old);
  if (failed) goto report;
  printf("%s: %s for %s, batch %lld%s%s%s\n", outp,
         g->name != DPC_NONE ? dpc_graph_str(g, g->name) : "model", dpc_codegen_target(cg), batch,
         replicas > 1 ? ", data parallel over " : "", replicas > 1 ? devs : "",
         train ? ", with training" : "");
  goto done;
report:
  rc = cli_report("compile", &d);
done:
  for (int i = 0; i < MAX_PLANS; i++) dpc_plan_free(plans[i]);
  dpc_codegen_free(cg);
  free(vals);
  dpc_graph_free(g);
  dpc_diag_free(&d);
  return rc;
}
