/*
 * api_serve.c — the HTTP inference server of include/dpc/serve.h: libmicrohttpd for HTTP,
 * jansson for the KServe v2 JSON, libdpcrt's batcher for the batching.
 *
 * Threads: libmicrohttpd polls every connection from a small pool of threads (epoll), so an idle
 * or slow client costs a socket, not a thread. An inference request, once read, goes to its
 * model's batcher with a done callback and its connection is suspended; the callback (on a
 * batcher worker) only resumes it, and the answer is written on the pool's thread. That is what
 * lets the batcher batch: every suspended connection is a request in its queue. The caller's
 * thread only sleeps in dpc_server_run, polling the stop flag, because a signal handler can do
 * nothing but set a flag.
 *
 * Draining: the listening socket is closed (new connections are refused), requests already
 * accepted are answered as usual but with "Connection: close", and the daemon stops once none is
 * under way (or drain_s has passed); then the batcher closes, answering what it still holds.
 */
#include "driver/api_internal.h"
#include "driver/serve_ranks.h"
#include "driver/serve_repo.h"
#include "driver/serve_request.h"
#include <dpc/serve.h>
#include <dpc/train.h>

#include <jansson.h>
#include <math.h>
#include <microhttpd.h>

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY        (64u << 20)
#define DEFAULT_MAX_CONNECTIONS 4096u
#define DEFAULT_TIMEOUT_S       30u
#define DEFAULT_DRAIN_S         30u

/* The statuses the server answers with, counted for /metrics. */
static const unsigned codes[] = {200, 400, 404, 405, 413, 500, 503};
#define N_CODES (sizeof codes / sizeof *codes)

typedef dpc_serve_tensor tensor;

/* One model served: its artifact, batcher and signature. */
typedef struct served {
  char name[256]; /* in URLs: /v2/models/NAME */
  dpc_model *model;
  dpc_batcher *b;
  unsigned n_in, n_out;
  tensor *in, *out;
  uint64_t max_batch;
  size_t real_digits; /* 9 round-trips a float, 17 a double: no longer numbers than needed */
} served;

struct dpc_server {
  served *models;
  unsigned n_models;
  /* --devices mpi: the model's lanes over the ranks, and whether this rank runs only its
   * device's part of the batches (every rank but 0: no HTTP) */
  dpc_serve_ranks *ranks;
  bool part;
  struct MHD_Daemon *d;
  unsigned port;
  uint64_t max_body;
  unsigned drain_s;
  dpc_log_fn log;
  void *log_user;
  atomic_uint_fast64_t answered[N_CODES];
  atomic_int active;    /* requests between their first byte and their answer's last */
  atomic_bool draining; /* stop accepting: ready says 503, answers close their connection */
  bool drained;
};

/* One request: its body as it arrives, then, for an inference, its tensors while the batcher
 * runs them (the connection suspended meanwhile) and the outcome. */
typedef struct request {
  char *body;
  size_t len, cap;
  bool too_big;
  /* an inference under way: set before the batcher has it, read after the resume */
  struct MHD_Connection *c;
  const served *ms;
  dpc_serve_sig sig;
  dpc_serve_request x;
  atomic_bool ran; /* the batcher answered: st and msg hold the outcome */
  dpc_status st;
  char msg[512];
} request;

static void say(const dpc_server *s, const char *fmt, ...) DPC_PRINTF(2, 3);
static void say(const dpc_server *s, const char *fmt, ...) {
  if (!s->log) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  s->log(s->log_user, msg);
}

static const char *datatype(dpc_elem e) {
  return dpc_serve_datatype(e);
}

/* ---- answers ------------------------------------------------------------------------------ */

static void count(dpc_server *s, unsigned code) {
  for (size_t i = 0; i < N_CODES; i++)
    if (codes[i] == code) atomic_fetch_add(&s->answered[i], 1);
}

/* Answer with len bytes of text (taken over); json_len, when not NULL, is the length of the JSON
 * part of a binary-data answer. */
static enum MHD_Result send_bytes(dpc_server *s, struct MHD_Connection *c, unsigned code,
                                  char *text, size_t len, const char *type, bool busy,
                                  const char *json_len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (busy) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  if (json_len) MHD_add_response_header(r, "Inference-Header-Content-Length", json_len);
  if (code == 405) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, POST");
  /* while draining, a kept-alive connection would bring more requests: end it */
  if (atomic_load(&s->draining)) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ok = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  count(s, code);
  return ok;
}

static enum MHD_Result send_text(dpc_server *s, struct MHD_Connection *c, unsigned code, char *text,
                                 size_t len, const char *type, bool busy) {
  return send_bytes(s, c, code, text, len, type, busy, NULL);
}

/* Answer with JSON (taken over). */
static enum MHD_Result send_json(dpc_server *s, struct MHD_Connection *c, unsigned code, json_t *j,
                                 bool busy) {
  /* answers with tensors are written by dpc_serve_answer_build; these carry no floats */
  char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!text) {
    static const char oom[] = "{\"error\":\"out of memory building the answer\"}";
    text = strdup(oom);
    code = 500;
    if (!text) return MHD_NO;
  }
  return send_text(s, c, code, text, strlen(text), "application/json", busy);
}

static enum MHD_Result send_error(dpc_server *s, struct MHD_Connection *c, unsigned code, bool busy,
                                  const char *fmt, ...) DPC_PRINTF(5, 6);
static enum MHD_Result send_error(dpc_server *s, struct MHD_Connection *c, unsigned code, bool busy,
                                  const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (code >= 500) say(s, "answered %u: %s", code, msg);
  return send_json(s, c, code, json_pack("{ss}", "error", msg), busy);
}

/* ---- metadata and metrics ----------------------------------------------------------------- */

static json_t *tensor_meta(const tensor *t) {
  json_t *shape = json_array();
  json_array_append_new(shape, json_integer(-1));
  for (unsigned k = 1; k < t->rank; k++) json_array_append_new(shape, json_integer(t->dims[k]));
  return json_pack("{ssssso}", "name", t->name, "datatype", datatype(t->elem), "shape", shape);
}

static json_t *model_meta(const served *s) {
  json_t *in = json_array(), *out = json_array();
  for (unsigned i = 0; i < s->n_in; i++) json_array_append_new(in, tensor_meta(&s->in[i]));
  for (unsigned i = 0; i < s->n_out; i++) json_array_append_new(out, tensor_meta(&s->out[i]));
  return json_pack("{sss[]sssoso}", "name", s->name, "versions", "platform", "dpc", "inputs", in,
                   "outputs", out);
}

/* /metrics: each family's HELP and TYPE once, then a sample per model. */
enum {
  M_REQUESTS,
  M_FAILED,
  M_REFUSED,
  M_BATCHES,
  M_ROWS,
  M_MEAN,
  M_QUEUE_S,
  M_COMPUTE_S,
  M_QUEUED,
  M_DELAY_S,
  M_TARGET_S, /* the auto delay's, only for models that have it */
  M_RATE,
  M_COUNT
};
static const struct {
  const char *name, *type, *help;
} families[M_COUNT] = {
    {"dpc_infer_requests_total", "counter", "Inference requests the batcher answered."},
    {"dpc_infer_failed_total", "counter", "Inference requests answered with a failed run."},
    {"dpc_infer_refused_total", "counter",
     "Inference requests refused: the queue full or closing."},
    {"dpc_batches_total", "counter", "Batches run."},
    {"dpc_batch_rows_total", "counter", "Rows of the batches run."},
    {"dpc_batch_size_mean", "gauge", "Mean rows per batch since the start."},
    {"dpc_queue_seconds_total", "counter", "Time requests waited for their batch, summed."},
    {"dpc_compute_seconds_total", "counter", "Time batches took to pack, run and unpack, summed."},
    {"dpc_queue_requests", "gauge", "Requests waiting for a batch now."},
    {"dpc_batch_delay_seconds", "gauge", "How long the oldest request waits for more rows now."},
    {"dpc_batch_delay_target_seconds", "gauge", "The p99 latency the auto delay aims under."},
    {"dpc_arrival_rate", "gauge", "Requests per second, as the auto delay measures them."},
};

static double metric(const dpc_batcher_stats *st, int f) {
  switch (f) {
  case M_REQUESTS: return (double)st->requests;
  case M_FAILED: return (double)st->failed;
  case M_REFUSED: return (double)st->refused;
  case M_BATCHES: return (double)st->batches;
  case M_ROWS: return (double)st->rows;
  case M_MEAN: return st->batches ? (double)st->rows / (double)st->batches : 0;
  case M_QUEUE_S: return (double)st->queue_ns_total * 1e-9;
  case M_COMPUTE_S: return (double)st->compute_ns_total * 1e-9;
  case M_QUEUED: return (double)st->queued;
  case M_DELAY_S: return (double)st->delay_us * 1e-6;
  case M_TARGET_S: return (double)st->latency_target_us * 1e-6;
  case M_RATE: return st->arrival_rate;
  default: return 0;
  }
}

static enum MHD_Result send_metrics(dpc_server *s, struct MHD_Connection *c) {
  dpc_batcher_stats *st = calloc(s->n_models, sizeof *st);
  /* a model's samples are under 12 KiB (its histograms' 60 buckets included): its name is at
   * most 255 bytes, its reason 224 */
  size_t cap = 4096 + 12288 * (size_t)s->n_models, len = 0;
  char *t = malloc(cap);
  if (!t || !st) {
    free(t), free(st);
    return MHD_NO;
  }
  bool any_auto = false;
  for (unsigned k = 0; k < s->n_models; k++) {
    st[k].size = sizeof st[k];
    if (s->models[k].b) dpc_batcher_get_stats(s->models[k].b, &st[k]);
    any_auto |= st[k].latency_target_us != 0;
  }
#define EMIT(...) len += (size_t)snprintf(t + len, len < cap ? cap - len : 0, __VA_ARGS__)
  EMIT("# HELP dpc_http_requests_total HTTP requests answered, by status code.\n"
       "# TYPE dpc_http_requests_total counter\n");
  for (size_t i = 0; i < N_CODES; i++)
    EMIT("dpc_http_requests_total{code=\"%u\"} %llu\n", codes[i],
         (unsigned long long)atomic_load(&s->answered[i]));
  for (int f = 0; f < M_COUNT; f++) {
    bool auto_only = f >= M_TARGET_S;
    if (auto_only && !any_auto) continue;
    EMIT("# HELP %s %s\n# TYPE %s %s\n", families[f].name, families[f].help, families[f].name,
         families[f].type);
    for (unsigned k = 0; k < s->n_models; k++)
      if (!auto_only || st[k].latency_target_us)
        /* counts as integers, the rest in fixed point: no exponents for a scraper to misread */
        EMIT(metric(&st[k], f) == floor(metric(&st[k], f)) ? "%s{model=\"%s\"} %.0f\n"
                                                           : "%s{model=\"%s\"} %.9f\n",
             families[f].name, s->models[k].name, metric(&st[k], f));
  }
  EMIT("# HELP dpc_instances Model instances.\n# TYPE dpc_instances gauge\n");
  for (unsigned k = 0; k < s->n_models; k++)
    EMIT("dpc_instances{model=\"%s\"} %u\n", s->models[k].name, st[k].instances);
  EMIT("# HELP dpc_instances_busy Model instances running a batch now.\n"
       "# TYPE dpc_instances_busy gauge\n");
  for (unsigned k = 0; k < s->n_models; k++)
    EMIT("dpc_instances_busy{model=\"%s\"} %u\n", s->models[k].name, st[k].busy);
  /* histograms: cumulative buckets, as Prometheus reads them */
  for (int h = 0; h < 3; h++) {
    static const char *const hname[] = {"dpc_batch_size", "dpc_queue_time_seconds",
                                        "dpc_compute_time_seconds"};
    static const char *const hhelp[] = {"Rows per batch.", "Time requests waited for their batch.",
                                        "Time batches took to pack, run and unpack."};
    EMIT("# HELP %s %s\n# TYPE %s histogram\n", hname[h], hhelp[h], hname[h]);
    for (unsigned k = 0; k < s->n_models; k++) {
      const uint64_t *hist = h == 0   ? st[k].batch_hist
                             : h == 1 ? st[k].queue_hist
                                      : st[k].compute_hist;
      unsigned n = h == 0 ? DPC_BATCHER_HIST : DPC_BATCHER_TIME_HIST;
      uint64_t cum = 0;
      for (unsigned b = 0; b + 1 < n; b++) {
        cum += hist[b];
        /* batch sizes: bucket b holds 2^b .. 2^(b+1) - 1 rows; times: up to 2^b x 64 us */
        if (h == 0)
          EMIT("%s_bucket{model=\"%s\",le=\"%llu\"} %llu\n", hname[h], s->models[k].name,
               (unsigned long long)((2ull << b) - 1), (unsigned long long)cum);
        else
          EMIT("%s_bucket{model=\"%s\",le=\"%.6f\"} %llu\n", hname[h], s->models[k].name,
               64e-6 * (double)(1ull << b), (unsigned long long)cum);
        if (h == 0 && (2ull << b) - 1 >= st[k].max_batch) break; /* no larger batch */
      }
      uint64_t count = 0;
      for (unsigned b = 0; b < n; b++) count += hist[b];
      double sum = h == 0   ? (double)st[k].rows
                   : h == 1 ? (double)st[k].queue_ns_total * 1e-9
                            : (double)st[k].compute_ns_total * 1e-9;
      EMIT("%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", hname[h], s->models[k].name,
           (unsigned long long)count);
      EMIT("%s_sum{model=\"%s\"} %.9f\n", hname[h], s->models[k].name, sum);
      EMIT("%s_count{model=\"%s\"} %llu\n", hname[h], s->models[k].name, (unsigned long long)count);
    }
  }
  if (any_auto) {
    /* the reason is text, which a sample cannot be: the label of an info metric */
    EMIT("# HELP dpc_batch_delay_info Why the auto delay is what it is.\n"
         "# TYPE dpc_batch_delay_info gauge\n");
    for (unsigned k = 0; k < s->n_models; k++) {
      if (!st[k].latency_target_us) continue;
      char why[sizeof st[k].delay_reason];
      size_t w = 0;
      for (const char *r = st[k].delay_reason; *r && w + 1 < sizeof why; r++)
        if (*r != '"' && *r != '\\' && *r != '\n') why[w++] = *r;
      why[w] = 0;
      EMIT("dpc_batch_delay_info{model=\"%s\",reason=\"%s\"} 1\n", s->models[k].name, why);
    }
  }
#undef EMIT
  free(st);
  if (len >= cap) {
    free(t);
    return send_error(s, c, 500, false, "the metrics do not fit their buffer");
  }
  return send_text(s, c, 200, t, len, "text/plain; version=0.0.4", false);
}

/* ---- inference ---------------------------------------------------------------------------- */

static dpc_serve_sig signature(const served *s) {
  return (dpc_serve_sig){.model = s->name,
                         .in = s->in,
                         .out = s->out,
                         .n_in = s->n_in,
                         .n_out = s->n_out,
                         .max_batch = s->max_batch};
}

/* On a batcher worker: the request's batch ran. Only wake the connection; the answer is written
 * on the server's thread when MHD calls on_request again. */
static void on_ran(void *user, dpc_status st, const char *msg) {
  request *rq = user;
  rq->st = st;
  snprintf(rq->msg, sizeof rq->msg, "%s", msg);
  atomic_store(&rq->ran, true);
  MHD_resume_connection(rq->c);
}

/* Read the request, hand it to the model's batcher and suspend the connection: it holds no
 * thread while its batch waits and runs, so slow or idle clients cannot starve the others. */
static enum MHD_Result infer_start(dpc_server *s, const served *ms, struct MHD_Connection *c,
                                   request *rq) {
  char msg[512];
  if (rq->too_big)
    return send_error(s, c, 413, false, "the request body is over the server's limit of %llu bytes",
                      (unsigned long long)s->max_body);
  const char *hl =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
  uint64_t header_len = 0;
  if (hl) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(hl, &end, 10);
    if (end == hl || *end || errno || *hl == '-')
      return send_error(s, c, 400, false,
                        "the Inference-Header-Content-Length '%.32s' is not a byte count", hl);
    header_len = v;
  }
  if (!ms->b) return send_error(s, c, 503, true, "the server is shutting down");
  rq->ms = ms;
  rq->sig = signature(ms);
  unsigned code = dpc_serve_request_parse(&rq->sig, rq->body, rq->len, hl != NULL, header_len,
                                          &rq->x, msg, sizeof msg);
  if (code != 200) return send_error(s, c, code, false, "%s", msg);
  dpc_batcher_request br = {sizeof br,
                            .rows = rq->x.rows,
                            .inputs = (const void *const *)rq->x.in,
                            .outputs = (void *const *)rq->x.out,
                            .done = on_ran,
                            .user = rq};
  rq->c = c;
  /* suspended before the batcher has it, so on_ran's resume can never come first */
  MHD_suspend_connection(c);
  dpc_status st = dpc_batcher_submit(ms->b, &br, NULL, msg, sizeof msg);
  if (st) { /* refused: the outcome is known now; it is answered on the resume all the same */
    on_ran(rq, st, msg);
  }
  return MHD_YES;
}

/* After the resume: the answer. */
static enum MHD_Result infer_finish(dpc_server *s, struct MHD_Connection *c, request *rq) {
  if (rq->st == DPC_ERR_BUSY) return send_error(s, c, 503, true, "%s", rq->msg);
  if (rq->st) return send_error(s, c, 500, false, "%s", rq->msg);
  size_t len, json_len;
  char *body =
      dpc_serve_answer_build(&rq->sig, &rq->x, (unsigned)rq->ms->real_digits, &len, &json_len);
  if (!body) return send_error(s, c, 500, false, "out of memory building the answer");
  if (!json_len) return send_text(s, c, 200, body, len, "application/json", false);
  char header[32];
  snprintf(header, sizeof header, "%zu", json_len);
  return send_bytes(s, c, 200, body, len, "application/octet-stream", false, header);
}

/* ---- routing ------------------------------------------------------------------------------ */

/* The names of the models served, for a 404: "'a', 'b'". */
static void model_names(const dpc_server *s, char *buf, size_t n) {
  size_t w = 0;
  buf[0] = 0;
  for (unsigned k = 0; k < s->n_models && w < n; k++)
    w += (size_t)snprintf(buf + w, n - w, "%s'%s'", k ? ", " : "", s->models[k].name);
}

static enum MHD_Result route(dpc_server *s, struct MHD_Connection *c, const char *url,
                             const char *method, request *rq) {
  bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
  const char *want = "GET"; /* the method the path takes, for 405 */
  if (!strcmp(url, "/v2/health/live")) {
    if (get) return send_json(s, c, 200, json_pack("{sb}", "live", 1), false);
  } else if (!strcmp(url, "/v2/health/ready")) {
    if (get && atomic_load(&s->draining))
      return send_error(s, c, 503, false, "not ready: the server is shutting down");
    if (get) return send_json(s, c, 200, json_pack("{sb}", "ready", 1), false);
  } else if (!strcmp(url, "/v2") || !strcmp(url, "/v2/")) {
    if (get)
      return send_json(s, c, 200,
                       json_pack("{sssss[s]}", "name", "dpc", "version", dpc_compiler_version(),
                                 "extensions", "binary_tensor_data"),
                       false);
  } else if (!strcmp(url, "/metrics")) {
    if (get) return send_metrics(s, c);
  } else if (!strncmp(url, "/v2/models/", 11)) {
    const char *name = url + 11, *slash = strchr(name, '/');
    size_t n = slash ? (size_t)(slash - name) : strlen(name);
    const char *rest = name + n;
    const served *ms = NULL;
    for (unsigned k = 0; k < s->n_models && !ms; k++)
      if (n == strlen(s->models[k].name) && !strncmp(name, s->models[k].name, n))
        ms = &s->models[k];
    if (!ms) {
      char names[300];
      model_names(s, names, sizeof names);
      return send_error(s, c, 404, false, "unknown model '%.*s': this server serves %s",
                        (int)(n > 200 ? 200 : n), name, names);
    }
    if (!*rest) {
      if (get) return send_json(s, c, 200, model_meta(ms), false);
    } else if (!strcmp(rest, "/ready")) {
      if (get && atomic_load(&s->draining))
        return send_error(s, c, 503, false, "not ready: the server is shutting down");
      if (get)
        return send_json(s, c, 200, json_pack("{sssb}", "name", ms->name, "ready", 1), false);
    } else if (!strcmp(rest, "/infer")) {
      if (post) return infer_start(s, ms, c, rq);
      want = "POST";
    } else
      return send_error(s, c, 404, false, "no such path '%.200s'", url);
  } else
    return send_error(s, c, 404, false, "no such path '%.200s'", url);
  return send_error(s, c, 405, false, "%.16s is not allowed on %.200s: it takes %s", method, url,
                    want);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
  (void)version;
  dpc_server *s = cls;
  request *rq = *con_cls;
  if (!rq) { /* the headers are in: the body, if any, comes in the next calls */
    if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
    *con_cls = rq;
    atomic_fetch_add(&s->active, 1);
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > s->max_body) {
      /* refused before a byte of it is read: a client cannot make the server take it in */
      rq->too_big = true;
      return send_error(s, c, 413, false,
                        "the request body of %s bytes is over the server's limit of %llu bytes", cl,
                        (unsigned long long)s->max_body);
    }
    return MHD_YES;
  }
  if (*data_size) {
    if (!rq->too_big && rq->len + *data_size > s->max_body) {
      rq->too_big = true; /* a chunked body can only be measured as it comes: drop the rest */
      free(rq->body);
      rq->body = NULL;
      rq->len = rq->cap = 0;
    }
    if (!rq->too_big) {
      if (rq->len + *data_size > rq->cap) {
        size_t cap = rq->cap ? rq->cap : 4096;
        while (cap < rq->len + *data_size) cap *= 2;
        char *b = realloc(rq->body, cap);
        if (!b) return MHD_NO;
        rq->body = b, rq->cap = cap;
      }
      memcpy(rq->body + rq->len, data, *data_size);
      rq->len += *data_size;
    }
    *data_size = 0;
    return MHD_YES;
  }
  if (rq->c) return infer_finish(s, c, rq); /* resumed: the batcher has answered */
  return route(s, c, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)c, (void)toe;
  dpc_server *s = cls;
  request *rq = *con_cls;
  if (!rq) return;
  if (rq->ms) dpc_serve_request_free(&rq->sig, &rq->x);
  free(rq->body);
  free(rq);
  *con_cls = NULL;
  atomic_fetch_sub(&s->active, 1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  const dpc_server *s = cls;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n && msg[n - 1] == '\n') msg[--n] = 0;
  s->log(s->log_user, msg);
}

/* ---- open, run, close --------------------------------------------------------------------- */

static dpc_status read_tensors(served *s, dpc_role role, tensor **out, unsigned *n,
                               dpc_message *m) {
  *n = dpc_batcher_count(s->b, role);
  if (!(*out = calloc(*n ? *n : 1, sizeof **out)))
    return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  for (unsigned i = 0; i < *n; i++) {
    dpc_tensor_info info = {sizeof info};
    dpc_status st = dpc_batcher_info(s->b, role, i, &info);
    if (st) return dpc_diag_fail(m, st, "cannot read the model's tensor %u", i);
    tensor *t = &(*out)[i];
    snprintf(t->name, sizeof t->name, "%s", info.name);
    t->elem = info.elem;
    t->rank = info.rank;
    memcpy(t->dims, info.dims, sizeof t->dims);
    t->row_elems = 1;
    for (unsigned k = 1; k < info.rank; k++) t->row_elems *= (size_t)info.dims[k];
    t->elem_bytes = t->row_elems ? info.bytes / t->row_elems : 0;
    if (!datatype(info.elem))
      return dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                           "the %s '%s' is %s: the HTTP server takes FP32, FP64, INT32, INT64 and "
                           "BOOL tensors only",
                           role == DPC_ROLE_INPUT ? "input" : "output", info.name,
                           dpc_elem_name(info.elem));
  }
  return DPC_OK;
}

/* Load one model and open its batcher: the server's options, what e (a folder's config; NULL
 * for a single artifact) overrides. */
static dpc_status open_model(served *ms, const char *path, const dpc_serve_entry *e,
                             const dpc_server_opts *d, dpc_serve_ranks *ranks, dpc_message *m) {
  char err[512];
  dpc_batcher_opts bo = {sizeof bo,
                         .instances = d->instances,
                         .threads = d->threads,
                         .max_batch = d->max_batch,
                         .delay_us = d->delay_us,
                         .max_queue = d->max_queue,
                         .log = d->log,
                         .log_user = d->log_user,
                         .latency_target_us = d->latency_target_us};
  if (ranks) bo.instances = dpc_serve_ranks_count(ranks), bo.ranks = dpc_serve_ranks_list(ranks);
  if (e) {
    if (e->has_instances) bo.instances = e->instances;
    if (e->has_threads) bo.threads = e->threads;
    if (e->has_max_batch) bo.max_batch = e->max_batch;
    if (e->has_max_queue) bo.max_queue = e->max_queue;
    if (e->has_delay) bo.delay_us = e->delay_us, bo.latency_target_us = 0;
    if (e->has_target) bo.latency_target_us = e->latency_target_us;
  }
  dpc_status st = dpc_model_load(path, &ms->model, err, sizeof err);
  if (st || (st = dpc_batcher_open(ms->model, &bo, &ms->b, err, sizeof err)))
    return e ? dpc_diag_fail(m, st, "model '%s': %s", e->name, err)
             : dpc_diag_fail(m, st, "%s", err);
  snprintf(ms->name, sizeof ms->name, "%s", e ? e->name : dpc_model_name(ms->model));
  dpc_batcher_stats bs = {sizeof bs};
  dpc_batcher_get_stats(ms->b, &bs);
  ms->max_batch = bs.max_batch;
  if ((st = read_tensors(ms, DPC_ROLE_INPUT, &ms->in, &ms->n_in, m)) ||
      (st = read_tensors(ms, DPC_ROLE_OUTPUT, &ms->out, &ms->n_out, m)))
    return st;
  ms->real_digits = 9;
  for (unsigned i = 0; i < ms->n_out; i++)
    if (ms->out[i].elem == DPC_ELEM_F64) ms->real_digits = 17;
  return DPC_OK;
}

/* The models: path's artifact, or every model of path's folder. */
static dpc_status open_models(dpc_server *s, const char *path, const dpc_server_opts *d,
                              dpc_message *m) {
  dpc_serve_entry *e = NULL;
  unsigned n = 1;
  bool repo = dpc_serve_repo_is(path);
  dpc_status st = repo ? dpc_serve_repo_read(path, &e, &n, m) : DPC_OK;
  if (st) return st;
  if (!(s->models = calloc(n, sizeof *s->models))) {
    dpc_serve_repo_free(e, n);
    return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  }
  for (unsigned k = 0; k < n && !st; k++, s->n_models++)
    st =
        open_model(&s->models[k], repo ? e[k].artifact : path, repo ? &e[k] : NULL, d, s->ranks, m);
  dpc_serve_repo_free(e, n);
  return st;
}

static dpc_status listen_http(dpc_server *s, const dpc_server_opts *o, dpc_message *m);

DPC_COMPILER_API dpc_status dpc_server_open(const char *path, const dpc_server_opts *o,
                                            dpc_server **out, dpc_message *m) {
  *out = NULL;
  dpc_server_opts d = {sizeof d};
  if (o) memcpy(&d, o, o->size < sizeof d ? o->size : sizeof d);
  dpc_server *s = calloc(1, sizeof *s);
  if (!s) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  s->max_body = d.max_body ? d.max_body : DEFAULT_MAX_BODY;
  s->drain_s = d.drain_s ? d.drain_s : DEFAULT_DRAIN_S;
  s->log = d.log, s->log_user = d.log_user;
  dpc_status st = DPC_OK;
  if (d.devices) { /* zero when the caller's struct is older (copied by its size) */
    /* every rank opens its part, rank 0 its HTTP side too, then all agree before serving: a
     * rank left out would wait for rank 0 forever */
    if (strcmp(d.devices, "mpi"))
      st = dpc_diag_fail(m, DPC_ERR_INVALID,
                         "--devices %s: the server runs on this process's cores (the default) or "
                         "over MPI ranks ('mpi', under mpirun: one rank a device)",
                         d.devices);
    else if (dpc_serve_repo_is(path))
      st = dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                         "%s: --devices mpi serves one artifact compiled split over the ranks "
                         "(dpc compile --devices cpu:R --strategy model), not a folder",
                         path);
    if (st || (st = dpc_serve_ranks_open(path, d.instances, &s->ranks, m))) {
      dpc_server_close(s);
      return st;
    }
    s->part = dpc_serve_ranks_self(s->ranks) != 0;
    st = open_models(s, path, &d, m);
    if (!st && !s->part) st = listen_http(s, &d, m);
    if ((st = dpc_serve_ranks_agree(s->ranks, st, m))) {
      dpc_server_close(s);
      return st;
    }
    *out = s;
    return DPC_OK;
  }
  if ((st = open_models(s, path, &d, m)) || (st = listen_http(s, &d, m))) {
    dpc_server_close(s);
    return st;
  }
  *out = s;
  return DPC_OK;
}

/* Start the HTTP daemon on d's host and port. */
static dpc_status listen_http(dpc_server *s, const dpc_server_opts *o, dpc_message *m) {
  dpc_server_opts d = *o;
  const char *host = d.host ? d.host : "127.0.0.1";
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE},
                  *ai = NULL;
  char port[16];
  snprintf(port, sizeof port, "%u", d.port);
  int gai = getaddrinfo(host, port, &hints, &ai);
  if (gai)
    return dpc_diag_fail(m, DPC_ERR_INVALID, "cannot listen on '%s': %s", host, gai_strerror(gai));
  if (d.port > 65535) {
    freeaddrinfo(ai);
    return dpc_diag_fail(m, DPC_ERR_INVALID, "the port %u is not a TCP port (0 to 65535)", d.port);
  }
  /* A few threads polling every connection (epoll), not a thread per connection: an idle or
   * slow client costs a socket, not a thread, and a request waiting for its batch is suspended. */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                   (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0) |
                   (s->log ? MHD_USE_ERROR_LOG : 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned pool = cores < 2 ? 2u : cores > 8 ? 8u : (unsigned)cores;
  s->d = MHD_start_daemon(
      flags, (uint16_t)d.port, NULL, NULL, on_request, s, /* the logger first, or MHD prints */
      MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
      MHD_OPTION_THREAD_POOL_SIZE, pool, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)(d.max_connections ? d.max_connections : DEFAULT_MAX_CONNECTIONS),
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(d.timeout_s ? d.timeout_s : DEFAULT_TIMEOUT_S),
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
  freeaddrinfo(ai);
  if (!s->d)
    return dpc_diag_fail(m, DPC_ERR_IO,
                         "cannot listen on %s port %u (in use, or not an address of this "
                         "machine)",
                         host, d.port);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : d.port;
  return DPC_OK;
}

DPC_COMPILER_API unsigned dpc_server_port(const dpc_server *s) {
  return s->port;
}

DPC_COMPILER_API const char *dpc_server_model(const dpc_server *s) {
  return s->models[0].name;
}

DPC_COMPILER_API unsigned dpc_server_model_count(const dpc_server *s) {
  return s->n_models;
}

DPC_COMPILER_API const char *dpc_server_model_name(const dpc_server *s, unsigned i) {
  return i < s->n_models ? s->models[i].name : NULL;
}

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Stop accepting, answer what was accepted, stop the daemon. True when nothing was cut off. */
static bool drain(dpc_server *s) {
  if (s->drained || !s->d) return true;
  s->drained = true;
  atomic_store(&s->draining, true);
  MHD_socket fd = MHD_quiesce_daemon(s->d);
  /* closed at once, so connections are refused rather than left in the backlog */
  if (fd != MHD_INVALID_SOCKET) close(fd);
  say(s, "draining: %d requests under way", atomic_load(&s->active));
  bool done = false;
  /* twice idle 20 ms apart: a connection accepted just before may be about to start its request */
  for (long waited = 0, idle = 0; waited < (long)s->drain_s * 1000; waited += 10) {
    idle = atomic_load(&s->active) == 0 ? idle + 1 : 0;
    if (idle > 2) {
      done = true;
      break;
    }
    nap_ms(10);
  }
  if (!done) {
    say(s, "drain: %d requests still under way after %u s", atomic_load(&s->active), s->drain_s);
    /* Their connections are suspended on the batchers: closing a batcher runs what it holds and
     * answers every request, which resumes them, before the daemon they belong to stops. */
    for (unsigned k = 0; k < s->n_models; k++) {
      dpc_batcher *b = s->models[k].b;
      s->models[k].b = NULL;
      if (b) dpc_batcher_close(b);
    }
    for (int i = 0; i < 100 && atomic_load(&s->active); i++) nap_ms(10);
  }
  MHD_stop_daemon(s->d);
  s->d = NULL;
  return done;
}

DPC_COMPILER_API dpc_status dpc_server_run(dpc_server *s, const volatile int *stop,
                                           dpc_message *m) {
  if (!stop)
    return dpc_diag_fail(m, DPC_ERR_INVALID,
                         "the server runs until a stop flag is set: none was given");
  if (s->part) {
    /* this rank's instances run until rank 0's batcher closes and tells them to stop (its own
     * signal is rank 0's to act on: mpirun hands it to every rank) */
    for (unsigned k = 0; k < s->n_models; k++) {
      dpc_batcher_close(s->models[k].b);
      s->models[k].b = NULL;
    }
    return DPC_OK;
  }
  while (!*stop && !s->drained) nap_ms(20);
  if (!drain(s))
    return dpc_diag_fail(m, DPC_ERR_BUSY, "requests were still under way after %u s of draining",
                         s->drain_s);
  return DPC_OK;
}

DPC_COMPILER_API void dpc_server_close(dpc_server *s) {
  if (!s) return;
  drain(s);
  bool stopped = false; /* rank 0's batcher told the other ranks to stop */
  for (unsigned k = 0; s->models && k < s->n_models; k++) {
    served *ms = &s->models[k];
    if (ms->b) dpc_batcher_close(ms->b), stopped = true;
    if (ms->model) dpc_model_free(ms->model);
    free(ms->in);
    free(ms->out);
  }
  if (s->ranks && !s->part && !stopped) dpc_serve_ranks_stop(s->ranks);
  dpc_serve_ranks_close(s->ranks);
  free(s->models);
  free(s);
}
