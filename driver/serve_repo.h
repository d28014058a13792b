/*
 * serve_repo.h — a folder of models for `dpc serve DIR` (a model repository): one subfolder per
 * model, holding one compiled artifact (.dpx) and, optionally, a config.json with that model's
 * batching settings. The subfolder's name is the name the model is served under.
 *
 *   models/
 *     mlp/      mlp.dpx   config.json   {"instances": 2, "batch_delay_us": "auto",
 *     cnn/      cnn.dpx                  "latency_target_ms": 20}
 */
#ifndef DPC_DRIVER_SERVE_REPO_H
#define DPC_DRIVER_SERVE_REPO_H

#include "ir/base.h"

#include <stdbool.h>
#include <stdint.h>

/* One model of the folder, and what its config.json sets (has_* says which it sets: the rest
 * come from the server's options). */
typedef struct dpc_serve_entry {
  char name[128];
  char *artifact; /* the .dpx's path */
  bool has_instances, has_threads, has_max_batch, has_delay, has_target, has_max_queue;
  unsigned instances, threads;
  uint64_t max_batch, delay_us, latency_target_us, max_queue;
} dpc_serve_entry;

/* Whether path is a folder (a repository) rather than a file. */
bool dpc_serve_repo_is(const char *path);

/* The models of the folder, in name order. A subfolder without exactly one .dpx, a name a URL
 * cannot carry, or a config.json with an unknown key or a bad value is an error naming it. */
dpc_status dpc_serve_repo_read(const char *dir, dpc_serve_entry **out, unsigned *n, dpc_diag *d);

void dpc_serve_repo_free(dpc_serve_entry *e, unsigned n);

#endif
