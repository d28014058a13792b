/*
 * cmd_serve.c — `dpc serve`: a compiled artifact served over HTTP (KServe v2 JSON) through the
 * batcher, until SIGINT or SIGTERM, which drain it (include/dpc/serve.h).
 */
#include "tools/dpc/cli.h"
#include "tools/dpc/interrupt.h"
#include <dpc/serve.h>
#include <dpc/train.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static const cli_opt serve_opts[] = {
    {"port", true, false, "the TCP port (default 8000; 0: a free one, printed)"},
    {"host", true, false,
     "the address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every interface)"},
    {"instances", true, false,
     "model instances, each running batches on its own (default 1; for a model compiled split over "
     "devices, one per device: they take turns on the devices, a pipeline of batches)"},
    {"threads", true, false, "threads per instance's run (default 1)"},
    {"max-batch", true, false, "the most rows in a batch (default: the artifact's --batch)"},
    {"batch-delay", true, false,
     "USEC the oldest request waits for more rows (default 0), or auto (--latency-target-ms)"},
    {"latency-target-ms", true, false,
     "MS: the p99 latency --batch-delay auto aims under (default 50)"},
    {"max-queue", true, false,
     "the most requests waiting for a batch; beyond it, 503 (default 0: no limit)"},
    {"max-body", true, false, "the largest request body in bytes; beyond it, 413 (default 64 MiB)"},
    {"max-connections", true, false, "connections open at a time (default 4096)"},
    {"timeout", true, false, "seconds a connection may stay idle (default 30)"},
    {"devices", true, false,
     "mpi: under mpirun, an artifact compiled split over R devices (dpc compile --devices cpu:R "
     "--strategy model) served over R ranks, one device each; rank 0 listens"},
};
#define NSERVE (int)(sizeof serve_opts / sizeof *serve_opts)

/* A whole-number option (def when not given); false with a usage error. */
static bool serve_num(const cli_parsed *p, const char *name, uint64_t max, uint64_t *out) {
  const char *v = cli_get(serve_opts, NSERVE, p, name);
  if (!v) return true;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || x > max) {
    cli_usage_error("serve", "--%s expects a whole number up to %llu, got '%s'", name,
                    (unsigned long long)max, v);
    return false;
  }
  *out = x;
  return true;
}

/* --batch-delay USEC or auto, with --latency-target-ms for auto. */
static bool serve_delay(const cli_parsed *p, uint64_t *delay, uint64_t *target_us) {
  const char *v = cli_get(serve_opts, NSERVE, p, "batch-delay");
  const char *t = cli_get(serve_opts, NSERVE, p, "latency-target-ms");
  if (!v || strcmp(v, "auto")) {
    if (t) {
      cli_usage_error("serve", "--latency-target-ms goes with --batch-delay auto");
      return false;
    }
    return serve_num(p, "batch-delay", 60000000, delay);
  }
  uint64_t ms = 50;
  if (!serve_num(p, "latency-target-ms", 600000, &ms)) return false;
  if (!ms) {
    cli_usage_error("serve", "--latency-target-ms must be at least 1");
    return false;
  }
  *target_us = ms * 1000;
  return true;
}

static void serve_log(void *user, const char *msg) {
  (void)user;
  fprintf(stderr, "dpc serve: %s\n", msg);
}

static int serve(int *argc, char ***argv);

/* `--devices mpi`: MPI is started (only then) and ended with the command. Every rank opens its
 * part and they agree before serving, so a failure is every rank's and they end together. */
int dpc_cmd_serve(int argc, char **argv) {
  int rc = serve(&argc, &argv);
  dpc_mpi_finalize(false);
  return rc;
}

static int serve(int *argc_, char ***argv_) {
  int argc = *argc_;
  char **argv = *argv_;
  cli_parsed p;
  if (!cli_parse("serve", serve_opts, NSERVE, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf(
        "Usage: dpc serve MODEL.dpx|FOLDER [--port P] [--host ADDR] [--instances N] [--max-batch "
        "R]\n"
        "                 [--batch-delay USEC|auto [--latency-target-ms MS]] [--max-queue N]\n\n"
        "Serve a compiled artifact over HTTP with the KServe v2 (Open Inference Protocol)\n"
        "JSON endpoints, under its model name: GET /v2/health/live, /v2/health/ready, /v2,\n"
        "/v2/models/NAME, /v2/models/NAME/ready, /metrics (Prometheus), and POST\n"
        "/v2/models/NAME/infer. Requests of 1 to max-batch rows are batched together (compile\n"
        "with --batch B --batch-sizes 1,2,4,... so small batches run on small plans).\n"
        "A FOLDER serves several models: one subfolder per model, named as it is served, with\n"
        "one .dpx and an optional config.json of its batching settings (instances, threads,\n"
        "max_batch, max_queue, batch_delay_us: a number or \"auto\", latency_target_ms), which\n"
        "override the options below for that model.\n"
        "SIGINT or SIGTERM drains: no new connections, every accepted request answered, exit 0.\n"
        "mpirun -np R dpc serve MODEL.dpx --devices mpi serves a model split over R devices\n"
        "with one rank a device: rank 0 listens, each batch flows through the ranks, and one\n"
        "instance per rank keeps them all busy (a pipeline of batches).\n"
        "See docs/serving.md.\n");
    cli_print_options(serve_opts, NSERVE);
    return DPC_EXIT_OK;
  }
  if (p.npos != 1)
    return cli_usage_error(
        "serve", "expects one artifact (.dpx) or folder of models (see dpc serve --help)");
  uint64_t port = 8000, instances = 0, threads = 0, max_batch = 0, delay = 0, queue = 0, body = 0,
           conns = 0, timeout = 0, target = 0;
  if (!serve_num(&p, "port", 65535, &port) || !serve_num(&p, "instances", 1024, &instances) ||
      !serve_num(&p, "threads", 1024, &threads) ||
      !serve_num(&p, "max-batch", UINT32_MAX, &max_batch) || !serve_delay(&p, &delay, &target) ||
      !serve_num(&p, "max-queue", UINT32_MAX, &queue) ||
      !serve_num(&p, "max-body", UINT64_MAX >> 1, &body) ||
      !serve_num(&p, "max-connections", 65536, &conns) ||
      !serve_num(&p, "timeout", 86400, &timeout))
    return DPC_EXIT_USAGE;
  const char *host = cli_get(serve_opts, NSERVE, &p, "host");
  const char *devices = cli_get(serve_opts, NSERVE, &p, "devices");
  bool mpi = devices != NULL;
  if (mpi && strcmp(devices, "mpi"))
    return cli_usage_error("serve",
                           "--devices takes mpi (under mpirun, one rank a device of an artifact "
                           "compiled split over the ranks), not '%s'",
                           devices);
  if (mpi) {
    dpc_message *mm = dpc_message_new();
    int mrc = dpc_mpi_init(argc_, argv_, mm) ? cli_report("serve", mm) : DPC_EXIT_OK;
    dpc_message_free(mm);
    if (mrc) return mrc;
  }
  /* under mpirun only rank 0 speaks for the server; the others print only errors */
  bool quiet = mpi && dpc_mpi_rank() > 0;
  dpc_server_opts o = {sizeof o,
                       .host = host,
                       .port = (unsigned)port,
                       .instances = (unsigned)instances,
                       .threads = (unsigned)threads,
                       .max_batch = max_batch,
                       .delay_us = delay,
                       .max_queue = queue,
                       .max_body = body,
                       .max_connections = (unsigned)conns,
                       .timeout_s = (unsigned)timeout,
                       .log = quiet ? NULL : serve_log,
                       .latency_target_us = target,
                       .devices = devices};
  /* every connection is a file descriptor: allow as many as the system lets this process have */
  struct rlimit fl;
  if (!getrlimit(RLIMIT_NOFILE, &fl) && fl.rlim_cur < fl.rlim_max) {
    fl.rlim_cur = fl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &fl);
  }
  dpc_message *m = dpc_message_new();
  dpc_server *s = NULL;
  /* caught before the server's threads start, so they inherit the handlers; no cleanup mode's
   * release at the end: a drained server has done what was asked and exits 0 */
  cli_interrupt_catch_mode("serve", false, CLI_INTERRUPT_CLEANUP);
  if (dpc_server_open(p.pos[0], &o, &s, m)) {
    int rc = cli_report("serve", m);
    dpc_message_free(m);
    return rc;
  }
  host = host ? host : "127.0.0.1";
  bool v6 = strchr(host, ':') != NULL;
  if (!quiet) {
    fprintf(stderr, "dpc serve: serving ");
    for (unsigned i = 0; i < dpc_server_model_count(s); i++)
      fprintf(stderr, "%s%s", i ? ", " : "", dpc_server_model_name(s, i));
    fprintf(stderr, " on http://%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", dpc_server_port(s));
    if (mpi) fprintf(stderr, ", split over %d ranks", dpc_mpi_size());
    fprintf(stderr, "\n");
  }
  dpc_status st = dpc_server_run(s, (const volatile int *)cli_interrupt_flag(), m);
  if (!quiet)
    fprintf(stderr, "dpc serve: %s: drained%s\n", cli_interrupt_name(),
            st ? ", some requests cut off" : "");
  dpc_server_close(s);
  int rc = st ? cli_report("serve", m) : DPC_EXIT_OK;
  dpc_message_free(m);
  return rc;
}
