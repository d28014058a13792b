/*
 * train_io.c — the trainer's files: checkpoints (every param and state value plus where the run
 * stands), parameter files for --init and --save, and the JSON-lines step log.
 *
 * Checkpoints are safetensors written atomically (runtime/safetensors.c) with a CRC-32 of each
 * tensor, which every read verifies; the run's position goes in the metadata as decimal strings
 * under "dpc.*" keys.
 */
#include "runtime/safetensors.h"
#include "driver/train_internal.h"

#include "partitioner/partitioner.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FORMAT "dpc-checkpoint-1"

/* ---- reading metadata ----------------------------------------------------------------------- */

static dpc_status meta_u64(const dpc_st_file *f, const char *path, const char *key, uint64_t *out,
                           dpc_diag *d) {
  const char *v = dpc_st_meta_get(f, key);
  if (!v)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: not a dpc checkpoint (no '%s' in its metadata)",
                         path, key);
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-')
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: metadata '%s' is '%s', not a count", path, key,
                         v);
  *out = x;
  return DPC_OK;
}

dpc_status dpc_train_peek_checkpoint(trainer *t, dpc_diag *d) {
  const char *path = t->o->resume_path;
  dpc_st_file *f;
  dpc_status st = dpc_safetensors_read(path, &f, d);
  if (st) return st;
  const char *fmt = dpc_st_meta_get(f, "dpc.format");
  uint64_t batch, seed, shuffle, total;
  if (!fmt || strcmp(fmt, FORMAT)) {
    st =
        dpc_diag_fail(d, DPC_ERR_INVALID,
                      "%s: not a dpc checkpoint (use --init to start from a file of params)", path);
  } else if (!(st = meta_u64(f, path, "dpc.batch_size", &batch, d)) &&
             !(st = meta_u64(f, path, "dpc.seed", &seed, d)) &&
             !(st = meta_u64(f, path, "dpc.shuffle", &shuffle, d)) &&
             !(st = meta_u64(f, path, "dpc.total_steps", &total, d))) {
    if (batch != t->batch)
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s was made with --batch %llu; resume with the same batch size", path,
                         (unsigned long long)batch);
    else if (t->o->seed_given && seed != t->o->seed)
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s was made with --seed %llu, not %llu: another seed is another data "
                         "order, not this run resumed; leave --seed out",
                         path, (unsigned long long)seed, (unsigned long long)t->o->seed);
    /* The data order and the schedule's horizon are part of the run being resumed. */
    dpc_order_free(&t->order);
    if (!st) st = dpc_order_init(&t->order, dpc_dataset_size(t->train_ds), seed, shuffle != 0, d);
    t->total_steps = total;
  }
  dpc_st_free(f);
  return st;
}

dpc_status dpc_train_load_checkpoint(trainer *t, dpc_diag *d) {
  const char *path = t->o->resume_path;
  dpc_st_file *f;
  dpc_status st = dpc_safetensors_read(path, &f, d);
  if (st) return st;
  const dpc_graph *g = t->train_full.plan->g;
  /* every param and state of the training graph comes from the file, and nothing else is in it */
  uint32_t found = 0;
  for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
    if (!dpc_op_has(g->nodes[i].op, DPC_OPF_PERSIST)) continue;
    const char *name = dpc_graph_str(g, g->values[g->nodes[i].out].name);
    char base[256];
    const dpc_tensor *tt = dpc_st_find(f, name);
    if (dpc_replica_of(name, base, sizeof base)) {
      /* local SGD's replicas differ between averages: their own values, when the file has
       * them; otherwise (and in every other strategy) synced from the original */
      if (!tt) continue;
      t->replicas_loaded = true;
    }
    if (!tt) {
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s has no '%s' (was it made from another model or optimizer?)", path,
                         name);
      break;
    }
    found++;
    if ((st = dpc_session_set(t->train_full.s, name, tt, d))) dpc_diag_prefix(d, "%s: ", path);
  }
  if (!st && found != dpc_st_count(f)) {
    for (uint32_t i = 0; i < dpc_st_count(f); i++)
      if (dpc_graph_find(g, dpc_st_at(f, i)->name) == DPC_NONE) {
        st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s holds '%s', which this model does not have",
                           path, dpc_st_at(f, i)->name);
        break;
      }
  }
  if (!st && !(st = meta_u64(f, path, "dpc.step", &t->step, d)) &&
      !(st = meta_u64(f, path, "dpc.epoch", &t->epoch, d)))
    st = meta_u64(f, path, "dpc.batch", &t->batch_pos, d);
  if (!st && t->batch_pos > t->batches)
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: it stopped at batch %llu of an epoch of %llu: is the data the same?",
                       path, (unsigned long long)t->batch_pos, (unsigned long long)t->batches);
  t->resumed = !st;
  dpc_st_free(f);
  dpc_safetensors_clean(path, NULL);
  return st;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* The named persistent values of the training graph; params only when `params_only`, and then
 * also the state the model itself declares (batch_norm statistics), not the optimizer's. */
static uint32_t collect(trainer *t, bool params_only, dpc_st_tensor *out) {
  const dpc_graph *g = t->train_full.plan->g;
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    dpc_op op = g->nodes[i].op;
    if (!dpc_op_has(op, DPC_OPF_PERSIST)) continue;
    uint32_t v = g->nodes[i].out;
    const char *name = dpc_graph_str(g, g->values[v].name);
    char base[256];
    /* a data-parallel replica's copy: the same as the original, except under local SGD, where
     * a checkpoint keeps each replica's own params and optimizer state */
    if (dpc_replica_of(name, base, sizeof base) && (params_only || !t->o->local_sgd)) continue;
    if (params_only && op == DPC_OP_STATE && dpc_graph_find(t->model, name) == DPC_NONE) continue;
    if (out) out[n] = (dpc_st_tensor){name, dpc_session_value(t->train_full.s, v)};
    n++;
  }
  return n;
}

dpc_status dpc_train_save_checkpoint(trainer *t, uint64_t epoch, uint64_t batch, dpc_diag *d) {
  return dpc_train_save_checkpoint_to(t, t->o->checkpoint_path, epoch, batch, d);
}

dpc_status dpc_train_save_checkpoint_to(trainer *t, const char *path, uint64_t epoch,
                                        uint64_t batch, dpc_diag *d) {
  uint32_t n = collect(t, false, NULL);
  dpc_st_tensor *ts = calloc(n ? n : 1, sizeof *ts);
  if (!ts) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  collect(t, false, ts);
  char step[32], ep[32], b[32], bs[32], seed[32], shuf[8], total[32];
  snprintf(step, sizeof step, "%llu", (unsigned long long)t->step);
  snprintf(ep, sizeof ep, "%llu", (unsigned long long)epoch);
  snprintf(b, sizeof b, "%llu", (unsigned long long)batch);
  snprintf(bs, sizeof bs, "%u", t->batch);
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)t->order.seed);
  snprintf(shuf, sizeof shuf, "%d", t->order.shuffle ? 1 : 0);
  snprintf(total, sizeof total, "%llu", (unsigned long long)t->total_steps);
  const dpc_graph *g = t->model;
  dpc_st_meta meta[] = {
      {"dpc.format", FORMAT},
      {"dpc.model", g->name != DPC_NONE ? dpc_graph_str(g, g->name) : ""},
      {"dpc.version", DPC_VERSION_STRING},
      {"dpc.step", step},
      {"dpc.epoch", ep},
      {"dpc.batch", b},
      {"dpc.batch_size", bs},
      {"dpc.seed", seed},
      {"dpc.shuffle", shuf},
      {"dpc.total_steps", total},
  };
  /* checksummed: --resume (and --init) refuse a damaged file, naming the tensor */
  dpc_status st = dpc_safetensors_write_checked(path, ts, n, meta, sizeof meta / sizeof *meta, d);
  free(ts);
  return st;
}

dpc_status dpc_train_save_params(trainer *t, const char *path, dpc_diag *d) {
  uint32_t n = collect(t, true, NULL);
  dpc_st_tensor *ts = calloc(n ? n : 1, sizeof *ts);
  if (!ts) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  collect(t, true, ts);
  const dpc_graph *g = t->model;
  dpc_st_meta meta[] = {{"dpc.model", g->name != DPC_NONE ? dpc_graph_str(g, g->name) : ""}};
  dpc_status st = dpc_safetensors_write_checked(path, ts, n, meta, 1, d);
  free(ts);
  return st;
}

dpc_status dpc_train_load_params(trainer *t, const char *path, dpc_diag *d) {
  dpc_st_file *f;
  dpc_status st = dpc_safetensors_read(path, &f, d);
  if (st) return st;
  const dpc_graph *g = t->model;
  for (uint32_t i = 0; i < dpc_st_count(f) && !st; i++) {
    const dpc_st_tensor *e = dpc_st_at(f, i);
    uint32_t v = dpc_graph_find(g, e->name);
    if (v == DPC_NONE || !dpc_op_has(g->nodes[g->values[v].node].op, DPC_OPF_PERSIST)) {
      st =
          dpc_diag_fail(d, DPC_ERR_INVALID,
                        "%s holds '%s', which is not a param or state of the model", path, e->name);
      break;
    }
    if ((st = dpc_session_set(t->train_full.s, e->name, &e->t, d)))
      dpc_diag_prefix(d, "%s: ", path);
  }
  dpc_st_free(f);
  return st;
}

/* ---- the log ----------------------------------------------------------------------------- */

static void num(FILE *f, const char *key, double v) {
  if (isfinite(v))
    fprintf(f, ", \"%s\": %.9g", key, v);
  else
    fprintf(f, ", \"%s\": null", key);
}

void dpc_train_log_step(trainer *t, const dpc_train_step *s) {
  fprintf(t->log, "{\"step\": %llu, \"epoch\": %llu, \"batch\": %llu", (unsigned long long)s->step,
          (unsigned long long)s->epoch, (unsigned long long)s->batch);
  num(t->log, "loss", s->loss);
  num(t->log, "lr", s->lr);
  num(t->log, "samples_per_s", s->samples_per_s);
  fprintf(t->log, "}\n");
  fflush(t->log); /* a run that is stopped or dies keeps its steps' record */
}

void dpc_train_log_epoch(trainer *t, const dpc_train_epoch *e) {
  fprintf(t->log, "{\"epoch_end\": %llu, \"step\": %llu", (unsigned long long)e->epoch,
          (unsigned long long)e->step);
  num(t->log, "train_loss", e->train_loss);
  num(t->log, "seconds", e->seconds);
  num(t->log, "samples_per_s", e->samples_per_s);
  if (e->evaluated) {
    num(t->log, "test_loss", e->test_loss);
    num(t->log, "test_accuracy", e->test_accuracy);
  }
  fprintf(t->log, "}\n");
  fflush(t->log);
}

/* ---- the trace ------------------------------------------------------------------------------ */

/* One JSON string's content: the characters a label can hold, escaped. */
static void json_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
}

/* Each device's recorded steps: this process's own, or across ranks every rank's, gathered
 * (train_mpi.c); per device its events and how many. */
typedef struct trace_src {
  const dpc_trace_event **ev;
  uint32_t *n;
  dpc_trace_event *owned; /* the gathered events, when across ranks */
} trace_src;

dpc_status dpc_train_write_trace(trainer *t, dpc_diag *d) {
  const run_t *r = &t->train_full;
  if (!r->s) return DPC_OK;
  const dpc_plan *p = r->plan;
  const dpc_graph *g = p->g;
  trace_src src = {calloc(p->n_devs, sizeof *src.ev), calloc(p->n_devs, sizeof *src.n), NULL};
  dpc_status st = src.ev && src.n ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; !st && i < p->n_devs; i++)
    src.ev[i] = dpc_session_trace_events(r->s, i, &src.n[i]);
  /* across ranks every rank takes part; each rank's times become its own since a common barrier */
  if (!st && r->across) st = dpc_train_mpi_trace(t, src.ev, src.n, &src.owned, d);
  FILE *f = NULL;
  if (!st && t->o->trace_path && !(f = fopen(t->o->trace_path, "w")))
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot write the trace '%s'", t->o->trace_path);
  if (st || !f) {
    free(src.ev), free(src.n), free(src.owned);
    return st;
  }
  double t0 = -1;
  for (uint32_t i = 0; i < p->n_devs; i++)
    if (src.n[i] && (t0 < 0 || src.ev[i][0].start < t0)) t0 = src.ev[i][0].start;
  fprintf(f, "{\"traceEvents\": [\n");
  bool first = true;
  for (uint32_t i = 0; i < p->n_devs; i++) {
    char name[64];
    if (r->across)
      snprintf(name, sizeof name, "rank %u: %s", i / t->local, p->devs[i].name);
    else
      snprintf(name, sizeof name, "%s", p->devs[i].name);
    fprintf(
        f,
        "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %u, \"args\": {\"name\": \"%s\"}}",
        first ? "" : ",\n", i, name);
    first = false;
    const dpc_trace_event *e = src.ev[i];
    for (uint32_t k = 0; k < src.n[i]; k++) {
      if (e[k].step >= p->devs[i].n_steps) continue;
      const dpc_step *sp = &p->devs[i].steps[e[k].step];
      char lbl[160] = "";
      const char *cat = "kernel";
      if (sp->kind == DPC_STEP_KERNEL) {
        const dpc_node *nd = &g->nodes[sp->node];
        if (nd->fused != DPC_NONE) continue; /* computed by its group's kernel */
        dpc_graph_value_label(g, nd->out, lbl, sizeof lbl);
        size_t m = strlen(lbl);
        snprintf(lbl + m, sizeof lbl - m, " (%s)", dpc_op_name(nd->op));
        if (dpc_op_has(nd->op, DPC_OPF_COMM)) cat = "communication";
      } else if (sp->kind == DPC_STEP_WAIT) {
        snprintf(lbl, sizeof lbl, "wait for %s", p->devs[sp->peer].name);
        cat = "wait";
      } else if (sp->kind == DPC_STEP_SIGNAL) {
        continue;
      } else {
        char v[96];
        dpc_graph_value_label(g, sp->dst, v, sizeof v);
        snprintf(lbl, sizeof lbl, "copy into %s", v);
        cat = "copy";
      }
      fprintf(f, ",\n{\"name\": \"");
      json_text(f, lbl);
      fprintf(f,
              "\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %u, \"tid\": 0, \"ts\": %.3f, "
              "\"dur\": %.3f, \"args\": {\"step\": %u}}",
              cat, i, (e[k].start - t0) * 1e6, (e[k].end - e[k].start) * 1e6, e[k].run + 1);
    }
  }
  fprintf(f, "\n]}\n");
  free(src.ev), free(src.n), free(src.owned);
  return fclose(f) ? dpc_diag_fail(d, DPC_ERR_IO, "cannot write the trace '%s'", t->o->trace_path)
                   : DPC_OK;
}
