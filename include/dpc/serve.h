/*
 * serve.h — an HTTP inference server in libdpc: a compiled artifact served under its model name,
 * or a folder of them each under its folder's name, with the KServe v2 (Open Inference Protocol)
 * JSON endpoints, every request going through the batcher of libdpcrt (dpc.h, "the batcher").
 *
 *   #include <dpc/serve.h>
 *   dpc_message *msg = dpc_message_new();
 *   dpc_server_opts o = {sizeof o, .port = 8000, .instances = 2, .delay_us = 2000};
 *   dpc_server *s;
 *   if (dpc_server_open("model.dpx", &o, &s, msg)) { fprintf(stderr, "%s\n", ...); ... }
 *   printf("serving %s on port %u\n", dpc_server_model(s), dpc_server_port(s));
 *   dpc_server_run(s, &stop_flag, msg);  // serves until stop_flag is nonzero, then drains
 *   dpc_server_close(s);
 *
 * Endpoints (JSON only): GET /v2/health/live, /v2/health/ready, /v2 (server metadata),
 * /v2/models/NAME (inputs and outputs: name, datatype, shape with -1 for the batch),
 * /v2/models/NAME/ready, POST /v2/models/NAME/infer, and GET /metrics (Prometheus text).
 * docs/serving.md describes requests, answers, errors and limits.
 *
 * The server answers on its own threads (one per connection, up to max_connections, each with an
 * idle timeout so a slow client cannot hold one for ever); the caller's thread only waits in
 * dpc_server_run. As everywhere in libdpc, the library never prints: messages go to `log`.
 */
#ifndef DPC_SERVE_H
#define DPC_SERVE_H

#include <dpc/compiler.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dpc_server dpc_server;

/* How to serve. Zero-initialize it and set size; zero means the default for every field. */
typedef struct dpc_server_opts {
  size_t size;      /* sizeof(dpc_server_opts) */
  const char *host; /* the address to listen on (a name or a numeric IPv4/IPv6 address);
                       NULL: 127.0.0.1, so a server is reachable from elsewhere only when asked */
  unsigned port;    /* 0: a free port, chosen by the system (dpc_server_port tells which) */
  /* the batcher's (dpc_batcher_opts): instances, threads per instance's run, the most rows
   * in a batch (0: the artifact's --batch), how long the oldest request waits for more rows,
   * and the most requests waiting (beyond it: 503 with Retry-After; 0: no limit) */
  unsigned instances, threads;
  uint64_t max_batch, delay_us, max_queue;
  uint64_t max_body;        /* the largest request body in bytes: beyond it, 413. 0: 64 MiB */
  unsigned max_connections; /* connections open at a time: 0 for 4096 (an idle one costs a socket,
                               not a thread; the process's open-file limit bounds it too) */
  unsigned timeout_s;       /* a connection idle this long is closed: 0 for 30 s */
  unsigned drain_s;         /* on stop, how long to wait for the requests under way: 0 for 30 s */
  dpc_log_fn log;           /* NULL: nothing is said. Called on any of the server's threads (the
                               start, failed runs, 5xx answers, the drain), the message valid during
                               the call only */
  void *log_user;
  uint64_t latency_target_us; /* nonzero: the batcher chooses its delay itself for a p99 under
                                 this (dpc_batcher_opts.latency_target_us); delay_us is then only
                                 where it starts */
  /* NULL: the model runs in this process. "mpi": every MPI rank calls dpc_server_open (MPI
   * initialized with MPI_THREAD_MULTIPLE, dpc_mpi_init) on the same artifact, compiled split over
   * as many devices as there are ranks (dpc compile --devices cpu:R --strategy model); rank 0
   * listens and batches, and each batch flows through the ranks' devices, instances (default:
   * one per rank) pipelining consecutive batches. On the other ranks dpc_server_run returns once
   * rank 0's server has closed; dpc_server_close is collective. */
  const char *devices;
} dpc_server_opts;

/* Load the artifact at `path` (compiled with --batch B, best with --batch-sizes too), open its
 * batcher and start listening, as o says (NULL: defaults). A folder at `path` serves every model
 * in it: one subfolder per model, named as it is served, holding one .dpx and optionally a
 * config.json whose keys (instances, threads, max_batch, max_queue, batch_delay_us: a number or
 * "auto", latency_target_ms) override o for that model; each model has its own batcher. Requests
 * are answered from here on, without dpc_server_run. On failure *out is NULL and m says why (an
 * artifact with an input or output that is not batched, or of a type JSON has no datatype for here:
 * f16 and bf16, an address in use, ...). */
DPC_COMPILER_API dpc_status dpc_server_open(const char *path, const dpc_server_opts *o,
                                            dpc_server **out, dpc_message *m);
/* The port it listens on (the chosen one when opened with port 0). */
DPC_COMPILER_API unsigned dpc_server_port(const dpc_server *s);
/* The (first) model's name, as the URLs take it: /v2/models/NAME. Valid while s lives. */
DPC_COMPILER_API const char *dpc_server_model(const dpc_server *s);
/* How many models it serves (one for an artifact, those of the folder for a folder), and the
 * i-th's name (NULL past the last), in name order. */
DPC_COMPILER_API unsigned dpc_server_model_count(const dpc_server *s);
DPC_COMPILER_API const char *dpc_server_model_name(const dpc_server *s, unsigned i);
/* Block until *stop is nonzero (set it from a signal handler or another thread; it is read every
 * few milliseconds; stop must not be NULL: DPC_ERR_INVALID), then drain: stop accepting connections
 * (ready answers 503), answer every request already accepted, wait up to drain_s for them, and
 * return. DPC_ERR_BUSY when some were still under way after drain_s (they are cut off at close). */
DPC_COMPILER_API dpc_status dpc_server_run(dpc_server *s, const volatile int *stop, dpc_message *m);
/* Stop the server (draining first unless dpc_server_run did), close the batcher and free
 * everything. NULL is ignored. */
DPC_COMPILER_API void dpc_server_close(dpc_server *s);

#ifdef __cplusplus
}
#endif
#endif
