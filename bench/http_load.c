/*
 * http_load.c — an open-loop HTTP load generator for `dpc serve` (KServe v2 inference requests).
 *
 * The HTTP twin of batcher_load.c: requests arrive as a Poisson process at the offered rate
 * (exponential gaps, a fixed seed), each with a scheduled send time, and latency runs from that
 * time to the last byte of the answer, so a server that falls behind cannot hide its queueing in
 * a late send (closed-loop clients, which wait for an answer before sending again, do). Requests
 * go out over a pool of persistent HTTP/1.1 connections, one thread each, taken in schedule order:
 * a request scheduled while every connection is busy waits for one, and the wait is in its
 * latency. The server keeps its state from one rate to the next (the auto delay keeps what it
 * learnt); the connections are opened before each rate's clock starts.
 *
 *   bench_http_load URL MODEL [--rates R1,R2,..] [--seconds S] [--rows N] [--connections C]
 *                   [--binary] [--steps R1,R2,.. [--window-ms W]] [--warmup N]
 *                   [--input NAME] [--datatype T] [--features F | --shape D1,D2,..]
 *
 * The input's name, datatype and per-row shape come from GET /v2/models/MODEL (one input, read
 * with a few string searches, not a JSON parser); the flags override them or stand in when the
 * metadata cannot be read. Request bodies are built before the clock starts (16 of them, from
 * deterministic random data, used in turn), so sending costs the generator little. Before and
 * after each rate it reads GET /metrics for the rows per batch in between and the delay in force.
 *
 * It speaks only the protocol: it links nothing of dpc, and must not, so that it measures what
 * any client would see. Plain POSIX sockets and threads.
 */
#include "load_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { N_BODIES = 16, MAX_DIMS = 8, MAX_LIST = 64 };
/* a request's outcome besides an HTTP status */
enum { ST_NONE = 0, ST_CONN = -1, ST_TIMEOUT = -2, ST_BAD = -3 };

typedef struct req {
  uint64_t sched, done; /* ns since the run's start; done 0: not answered */
  int status;           /* the HTTP status, or ST_* */
} req;

/* One persistent connection and what has been read from it but not yet used. */
typedef struct conn {
  int fd; /* -1: not connected */
  char *buf;
  size_t len, cap;
  size_t used; /* bytes of buf the last answer took, dropped at the next read */
} conn;

typedef struct blob {
  char *p;
  size_t n;
} blob;

/* the server, and the run in progress (shared by the connection threads) */
static struct addrinfo *server_addr;
static char host_header[300];
static req *rq;
static size_t n_req;
static atomic_size_t next_req;
static uint64_t t_origin;
static blob bodies[N_BODIES];
static double recv_timeout_s = 60;

static void sleep_until(uint64_t at) {
  if (now_ns() >= at) return;
  struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) {
  }
}

/* Numbers separated by commas; returns how many, 0 for a malformed list. */
static size_t parse_list(const char *s, double *out, size_t max) {
  size_t n = 0;
  while (*s && n < max) {
    char *end;
    out[n++] = strtod(s, &end);
    if (end == s) return 0;
    s = *end == ',' ? end + 1 : end;
  }
  return n;
}

static void oom(void) {
  fprintf(stderr, "bench_http_load: out of memory\n");
  exit(1);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom();
  return p;
}

/* A growable string, for building request bodies. */
typedef struct sbuf {
  char *p;
  size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const void *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) oom();
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  if (b->n + (size_t)k + 1 > b->cap) {
    b->cap = (b->n + (size_t)k + 1) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) oom();
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

/* ---- connections ---- */

static void conn_close(conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->len = c->used = 0;
}

static int conn_open(conn *c) {
  conn_close(c);
  for (struct addrinfo *a = server_addr; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen)) {
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {(time_t)recv_timeout_s,
                         (long)((recv_timeout_s - floor(recv_timeout_s)) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    c->fd = fd;
    return 0;
  }
  return -1;
}

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

/* Reads more into the connection's buffer: >0 bytes read, 0 at end of stream, ST_TIMEOUT or
 * ST_CONN on a failure. */
static int conn_fill(conn *c) {
  if (c->cap - c->len < 16384) {
    c->cap = c->cap ? c->cap * 2 : 65536;
    c->buf = realloc(c->buf, c->cap);
    if (!c->buf) oom();
  }
  for (;;) {
    ssize_t k = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? ST_TIMEOUT : ST_CONN;
    c->len += (size_t)k;
    c->buf[c->len] = 0;
    return (int)k;
  }
}

static const char *find_crlf2(const char *p, size_t n) {
  for (size_t i = 0; i + 3 < n; i++)
    if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') return p + i;
  return NULL;
}

/* The value of a header in [h, end), or NULL; names compare without case. */
static const char *header(const char *h, const char *end, const char *name, size_t *len) {
  size_t nl = strlen(name);
  for (const char *line = h; line < end;) {
    const char *eol = line;
    while (eol < end && *eol != '\r') eol++;
    if ((size_t)(eol - line) > nl && line[nl] == ':' && !strncasecmp(line, name, nl)) {
      const char *v = line + nl + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      *len = (size_t)(eol - v);
      return v;
    }
    line = eol + 2;
  }
  return NULL;
}

/*
 * Reads one answer: sets *status, points *body and *body_len at its body (valid until the next
 * read) and *close_after when the server closes the connection after it. Returns 0, or ST_CONN
 * (with *got_any false when the server had closed the connection before answering: a kept-alive
 * connection it timed out, worth one retry), ST_TIMEOUT or ST_BAD.
 */
static int read_answer(conn *c, int *status, const char **body, size_t *body_len, bool *close_after,
                       bool *got_any) {
  if (c->used) {
    /* what followed the last answer (nothing, without pipelining) moves down */
    memmove(c->buf, c->buf + c->used, c->len - c->used);
    c->len -= c->used;
    c->used = 0;
  }
  const char *hend;
  *got_any = c->len > 0;
  while (!(hend = find_crlf2(c->buf ? c->buf : "", c->len))) {
    int k = conn_fill(c);
    if (k <= 0) return k == 0 ? ST_CONN : k;
    *got_any = true;
  }
  size_t hdr_len = (size_t)(hend - c->buf) + 4;
  int code = 0;
  if (sscanf(c->buf, "HTTP/1.%*d %d", &code) != 1) return ST_BAD;
  const char *first_eol = strstr(c->buf, "\r\n");
  const char *hs = first_eol + 2, *he = hend + 2;
  size_t vl;
  const char *v = header(hs, he, "Connection", &vl);
  *close_after = (v && vl >= 5 && !strncasecmp(v, "close", 5)) || !strncmp(c->buf, "HTTP/1.0", 8);
  v = header(hs, he, "Transfer-Encoding", &vl);
  bool chunked = v && vl >= 7 && !strncasecmp(v, "chunked", 7);
  const char *cl = header(hs, he, "Content-Length", &vl);
  size_t used;
  if (chunked) {
    /* decode in place: the chunks' data moves down to follow the header */
    size_t p = hdr_len, out = hdr_len;
    for (;;) {
      const char *eol;
      while (!(eol = strstr(c->buf + p, "\r\n"))) {
        int k = conn_fill(c);
        if (k <= 0) return k == 0 ? ST_CONN : k;
      }
      size_t size = strtoul(c->buf + p, NULL, 16), data = (size_t)(eol - c->buf) + 2;
      while (c->len < data + size + 2) {
        int k = conn_fill(c);
        if (k <= 0) return k == 0 ? ST_CONN : k;
      }
      if (!size) {
        used = data + 2; /* no trailers: dpc serve sends none */
        break;
      }
      memmove(c->buf + out, c->buf + data, size);
      out += size;
      p = data + size + 2;
    }
    *body_len = out - hdr_len;
  } else if (cl) {
    size_t n = strtoul(cl, NULL, 10);
    while (c->len < hdr_len + n) {
      int k = conn_fill(c);
      if (k <= 0) return k == 0 ? ST_CONN : k;
    }
    *body_len = n;
    used = hdr_len + n;
  } else if (code == 204 || code == 304 || code / 100 == 1) {
    *body_len = 0;
    used = hdr_len;
  } else {
    /* the body runs to the end of the stream */
    int k;
    while ((k = conn_fill(c)) > 0) {
    }
    if (k < 0) return k;
    *body_len = c->len - hdr_len;
    used = c->len;
    *close_after = true;
  }
  *status = code;
  *body = c->buf + hdr_len; /* valid until the next read, which drops the answer's bytes */
  c->used = used;
  return 0;
}

/*
 * Sends a request and reads its answer on c, connecting first if need be and once more if the
 * server had closed the kept-alive connection before answering. Returns the HTTP status or an
 * ST_* code; *body is valid until the next call on c.
 */
static int exchange(conn *c, const blob *request, const char **body, size_t *body_len) {
  for (int attempt = 0; attempt < 2; attempt++) {
    if (c->fd < 0 && conn_open(c)) return ST_CONN;
    if (send_all(c->fd, request->p, request->n)) {
      conn_close(c);
      continue;
    }
    int status;
    bool close_after = false, got_any = false;
    int r = read_answer(c, &status, body, body_len, &close_after, &got_any);
    if (r == ST_CONN && !got_any && attempt == 0) {
      conn_close(c);
      continue;
    }
    if (r) {
      conn_close(c);
      return r;
    }
    if (close_after) {
      /* the body stays readable: the buffer outlives the socket */
      close(c->fd);
      c->fd = -1;
      c->len = c->used = 0;
    }
    return status;
  }
  return ST_CONN;
}

/* A GET's whole body as a string (malloc'd), or NULL; *status gets the status. */
static char *http_get(conn *c, const char *path, int *status) {
  sbuf b = {0};
  sb_printf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host_header);
  blob r = {b.p, b.n};
  const char *body;
  size_t n;
  *status = exchange(c, &r, &body, &n);
  free(b.p);
  if (*status <= 0) return NULL;
  char *s = xmalloc(n + 1);
  memcpy(s, body, n);
  s[n] = 0;
  return s;
}

/* ---- the model's input, from its metadata ---- */

typedef struct input_desc {
  char name[128], datatype[16];
  long dims[MAX_DIMS]; /* per row: the shape without the leading -1 */
  int n_dims;
} input_desc;

/* The string value of "key" at or after p (up to end), copied into out; the position after it. */
static const char *json_string(const char *p, const char *end, const char *key, char *out,
                               size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *k = strstr(p, pat);
  if (!k || k >= end) return NULL;
  const char *q = strchr(k + strlen(pat), '"');
  if (!q || q >= end) return NULL;
  const char *e = strchr(q + 1, '"');
  if (!e || e >= end || (size_t)(e - q - 1) >= cap) return NULL;
  memcpy(out, q + 1, (size_t)(e - q - 1));
  out[e - q - 1] = 0;
  return e + 1;
}

/* Reads the first input of {"inputs":[{"name":..,"datatype":..,"shape":[-1,..]}],..}; returns
 * the number of inputs, 0 when the text is not understood. */
static int parse_metadata(const char *json, input_desc *in) {
  const char *p = strstr(json, "\"inputs\"");
  if (!p) return 0;
  const char *outs = strstr(json, "\"outputs\"");
  const char *end = outs && outs > p ? outs : json + strlen(json);
  const char *obj = strchr(p, '{');
  if (!obj || obj >= end) return 0;
  /* the first input's object ends at the first '}' (its fields hold no objects) */
  const char *obj_end = strchr(obj, '}');
  if (!obj_end) return 0;
  if (!json_string(obj, obj_end, "name", in->name, sizeof in->name) ||
      !json_string(obj, obj_end, "datatype", in->datatype, sizeof in->datatype))
    return 0;
  const char *s = strstr(obj, "\"shape\"");
  if (!s || s > obj_end || !(s = strchr(s, '['))) return 0;
  in->n_dims = 0;
  char *q = (char *)s + 1;
  for (int first = 1;; first = 0) {
    while (*q == ' ') q++;
    if (*q == ']') break;
    char *e;
    long d = strtol(q, &e, 10);
    if (e == q) return 0;
    if (!first) {
      if (in->n_dims == MAX_DIMS) return 0;
      in->dims[in->n_dims++] = d;
    }
    q = e;
    while (*q == ' ') q++;
    if (*q == ',') q++;
  }
  int n = 0;
  for (const char *o = obj; o && o < end; o = strchr(o + 1, '{')) n++;
  return n;
}

static size_t dtype_size(const char *t) {
  if (!strcmp(t, "FP32") || !strcmp(t, "INT32")) return 4;
  if (!strcmp(t, "FP64") || !strcmp(t, "INT64")) return 8;
  if (!strcmp(t, "BOOL")) return 1;
  return 0;
}

/*
 * Builds request k: rows x features values from a fixed seed per k, as a JSON body or with the
 * binary data extension (and then asks for the outputs as bytes too, as a binary client would).
 */
static blob build_request(const char *model, const input_desc *in, unsigned rows, size_t features,
                          bool binary, unsigned k) {
  size_t count = rows * features, es = dtype_size(in->datatype);
  sbuf body = {0}, shape = {0}, data = {0};
  sb_printf(&shape, "[%u", rows);
  for (int d = 0; d < in->n_dims; d++) sb_printf(&shape, ",%ld", in->dims[d]);
  sb_put(&shape, "]", 1);
  uint64_t seed = 0x9E3779B97F4A7C15ull * (k + 1);
  for (size_t i = 0; i < count; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    double u = (double)(seed >> 11) / 9007199254740992.0;
    if (binary) {
      unsigned char v[8];
      if (!strcmp(in->datatype, "FP32")) {
        float f = (float)u;
        memcpy(v, &f, 4);
      } else if (!strcmp(in->datatype, "FP64")) {
        memcpy(v, &u, 8);
      } else if (!strcmp(in->datatype, "INT32")) {
        int32_t x = (int32_t)(u * 10);
        memcpy(v, &x, 4);
      } else if (!strcmp(in->datatype, "INT64")) {
        int64_t x = (int64_t)(u * 10);
        memcpy(v, &x, 8);
      } else {
        v[0] = u < 0.5;
      }
      sb_put(&data, v, es); /* little-endian hosts only, as the extension wants */
    } else {
      if (i) sb_put(&data, ",", 1);
      if (!strcmp(in->datatype, "FP32") || !strcmp(in->datatype, "FP64"))
        sb_printf(&data, "%.6g", u);
      else if (!strcmp(in->datatype, "BOOL"))
        sb_printf(&data, "%s", u < 0.5 ? "true" : "false");
      else
        sb_printf(&data, "%d", (int)(u * 10));
    }
  }
  size_t json_len;
  if (binary) {
    sb_printf(&body,
              "{\"inputs\":[{\"name\":\"%s\",\"shape\":%s,\"datatype\":\"%s\",\"parameters\":{"
              "\"binary_data_size\":%zu}}],\"parameters\":{\"binary_data_output\":true}}",
              in->name, shape.p, in->datatype, data.n);
    json_len = body.n;
    sb_put(&body, data.p, data.n);
  } else {
    sb_printf(&body, "{\"inputs\":[{\"name\":\"%s\",\"shape\":%s,\"datatype\":\"%s\",\"data\":[",
              in->name, shape.p, in->datatype);
    sb_put(&body, data.p, data.n);
    sb_put(&body, "]}]}", 4);
    json_len = body.n;
  }
  sbuf r = {0};
  sb_printf(&r, "POST /v2/models/%s/infer HTTP/1.1\r\nHost: %s\r\nContent-Length: %zu\r\n", model,
            host_header, body.n);
  if (binary)
    sb_printf(&r,
              "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: %zu\r\n",
              json_len);
  else
    sb_printf(&r, "Content-Type: application/json\r\n");
  sb_put(&r, "\r\n", 2);
  sb_put(&r, body.p, body.n);
  free(body.p), free(shape.p), free(data.p);
  return (blob){r.p, r.n};
}

/* ---- metrics ---- */

typedef struct metrics {
  bool ok;
  double batches, rows, delay_s;
} metrics;

/* The value of `name{...model="MODEL"...} V` in Prometheus text, or NAN. */
static double metric(const char *text, const char *name, const char *model) {
  char want[200];
  snprintf(want, sizeof want, "model=\"%s\"", model);
  size_t nl = strlen(name);
  for (const char *line = text; *line;) {
    const char *eol = strchr(line, '\n');
    if (!strncmp(line, name, nl) && line[nl] == '{') {
      const char *close_brace = strchr(line, '}'), *m = strstr(line, want);
      if (close_brace && m && m < close_brace && (!eol || close_brace < eol))
        return strtod(close_brace + 1, NULL);
    }
    if (!eol) break;
    line = eol + 1;
  }
  return NAN;
}

static metrics scrape(conn *c, const char *model) {
  metrics m = {0};
  int status;
  char *text = http_get(c, "/metrics", &status);
  if (!text || status != 200) {
    free(text);
    return m;
  }
  m.batches = metric(text, "dpc_batches_total", model);
  m.rows = metric(text, "dpc_batch_rows_total", model);
  m.delay_s = metric(text, "dpc_batch_delay_seconds", model);
  m.ok = !isnan(m.batches) && !isnan(m.rows);
  free(text);
  return m;
}

/* ---- the run ---- */

/* A connection's thread: takes the next request in schedule order, waits for its time, sends it
 * and stamps the answer. */
static void *conn_main(void *arg) {
  conn *c = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&next_req, 1);
    if (i >= n_req) break;
    sleep_until(t_origin + rq[i].sched);
    const char *body;
    size_t n;
    int st = exchange(c, &bodies[i % N_BODIES], &body, &n);
    if (st == 200 && n && body[0] != '{') st = ST_BAD; /* an answer, not a proxy's page */
    rq[i].done = now_ns() - t_origin;
    rq[i].status = st;
  }
  return NULL;
}

/* With --steps: the delay in force, read from /metrics twice a window. */
typedef struct sampler {
  const char *model;
  double window_ms;
  size_t n_windows;
  double *delay_us; /* per window, the last read; NAN when none */
  atomic_bool stop;
} sampler;

static void *sampler_main(void *arg) {
  sampler *s = arg;
  conn c = {-1, NULL, 0, 0, 0};
  while (!atomic_load(&s->stop)) {
    uint64_t t = now_ns();
    if (t >= t_origin) {
      size_t w = (size_t)((double)(t - t_origin) / 1e6 / s->window_ms);
      metrics m = scrape(&c, s->model);
      if (w < s->n_windows && m.ok && !isnan(m.delay_s)) s->delay_us[w] = m.delay_s * 1e6;
    }
    sleep_until(t + (uint64_t)(s->window_ms * 5e5));
  }
  conn_close(&c);
  free(c.buf);
  return NULL;
}

static const char *status_name(int st, char *buf, size_t cap) {
  switch (st) {
  case ST_CONN: return "connection";
  case ST_TIMEOUT: return "timeout";
  case ST_BAD: return "malformed";
  case ST_NONE: return "unanswered";
  default: snprintf(buf, cap, "%d", st); return buf;
  }
}

/* Prints "#   errors: 503 x12, connection x1" when there were any. */
static void print_errors(size_t lo_req, size_t hi_req) {
  int codes[16];
  size_t counts[16], n_codes = 0;
  for (size_t i = lo_req; i < hi_req; i++) {
    if (rq[i].status == 200) continue;
    size_t k = 0;
    while (k < n_codes && codes[k] != rq[i].status) k++;
    if (k == n_codes && n_codes < 16) codes[n_codes] = rq[i].status, counts[n_codes++] = 0;
    if (k < n_codes) counts[k]++;
  }
  if (!n_codes) return;
  printf("#   errors:");
  for (size_t k = 0; k < n_codes; k++) {
    char b[16];
    printf("%s %s x%zu", k ? "," : "", status_name(codes[k], b, sizeof b), counts[k]);
  }
  printf("\n");
}

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s URL MODEL [--rates R1,R2,..] [--seconds S] [--rows N] [--connections C]\n"
          "          [--binary] [--steps R1,R2,.. [--window-ms W]] [--warmup N]\n"
          "          [--input NAME] [--datatype T] [--features F | --shape D1,D2,..]\n"
          "\n"
          "An open-loop (Poisson) load of KServe v2 inference requests on `dpc serve` (or any\n"
          "server of the protocol) at URL, e.g. http://127.0.0.1:8000, for model MODEL. Latency\n"
          "runs from each request's scheduled send time to the end of its answer.\n"
          "\n"
          "  --rates R1,R2,..   offered requests/s, one run each (default 100,1000,5000)\n"
          "  --seconds S        seconds per rate, or per step (default 2)\n"
          "  --rows N           rows per request (default 1)\n"
          "  --connections C    kept-alive connections, one thread each (default 64)\n"
          "  --binary           tensors as raw bytes (the binary tensor data extension)\n"
          "  --steps R1,R2,..   one run whose rate steps through R1, R2, ..., S seconds each,\n"
          "                     reported per window of --window-ms (default 250)\n"
          "  --warmup N         requests sent one at a time before the first rate (default 200)\n"
          "  --timeout S        seconds to wait for an answer (default 60)\n"
          "  --input NAME, --datatype T, --features F, --shape D1,D2,..\n"
          "                     the input's name, datatype (FP32, FP64, INT32, INT64, BOOL) and\n"
          "                     shape of one row, instead of those of GET /v2/models/MODEL\n"
          "\n"
          "Per rate: offered and achieved requests/s (answered 200, over the run's length),\n"
          "p50/p90/p99/p99.9 latency in microseconds, errors (answers other than 200 and failed\n"
          "connections), and from GET /metrics the mean rows per batch during the run and the\n"
          "server's delay at its end (- when the server has no such metrics). With --steps, per\n"
          "window: its offered rate, requests answered, p50, p99 and the delay read then.\n",
          argv0);
}

int main(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout, argv[0]);
    return 0;
  }
  if (argc < 3) {
    usage(stderr, argv[0]);
    return 2;
  }
  const char *url = argv[1], *model = argv[2];
  double rates[MAX_LIST] = {100, 1000, 5000}, steps[MAX_LIST], seconds = 2, window_ms = 250;
  double shape_list[MAX_DIMS];
  size_t n_rates = 3, n_steps = 0, n_shape = 0;
  unsigned rows = 1, n_conns = 64, warmup = 200;
  bool binary = false;
  const char *input_name = NULL, *datatype = NULL;
  for (int i = 3; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(o, "--help")) {
      usage(stdout, argv[0]);
      return 0;
    } else if (!strcmp(o, "--binary")) {
      binary = true;
      continue;
    }
    if (!v) {
      fprintf(stderr, "bench_http_load: %s needs a value (--help)\n", o);
      return 2;
    }
    i++;
    if (!strcmp(o, "--rates"))
      n_rates = parse_list(v, rates, MAX_LIST);
    else if (!strcmp(o, "--steps"))
      n_steps = parse_list(v, steps, MAX_LIST);
    else if (!strcmp(o, "--seconds"))
      seconds = atof(v);
    else if (!strcmp(o, "--window-ms"))
      window_ms = atof(v);
    else if (!strcmp(o, "--rows"))
      rows = (unsigned)atoi(v);
    else if (!strcmp(o, "--connections"))
      n_conns = (unsigned)atoi(v);
    else if (!strcmp(o, "--warmup"))
      warmup = (unsigned)atoi(v);
    else if (!strcmp(o, "--timeout"))
      recv_timeout_s = atof(v);
    else if (!strcmp(o, "--input"))
      input_name = v;
    else if (!strcmp(o, "--datatype"))
      datatype = v;
    else if (!strcmp(o, "--features") || !strcmp(o, "--shape"))
      n_shape = parse_list(v, shape_list, MAX_DIMS);
    else {
      fprintf(stderr, "bench_http_load: unknown option %s (--help)\n", o);
      return 2;
    }
    if ((!strcmp(o, "--rates") && !n_rates) || (!strcmp(o, "--steps") && !n_steps) ||
        ((!strcmp(o, "--features") || !strcmp(o, "--shape")) && !n_shape)) {
      fprintf(stderr, "bench_http_load: %s takes numbers separated by commas, not '%s'\n", o, v);
      return 2;
    }
  }
  if (seconds <= 0 || window_ms <= 0 || !rows || !n_conns || recv_timeout_s <= 0) {
    fprintf(stderr, "bench_http_load: --seconds, --window-ms, --rows, --connections and "
                    "--timeout must be positive\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  /* the server: http://HOST[:PORT][/] */
  char host[256], port[16] = "80";
  const char *h = url;
  if (!strncmp(h, "http://", 7)) h += 7;
  size_t hl = strcspn(h, "/");
  if (!hl || hl >= sizeof host) {
    fprintf(stderr, "bench_http_load: a URL like http://127.0.0.1:8000, not '%s'\n", url);
    return 2;
  }
  memcpy(host, h, hl);
  host[hl] = 0;
  snprintf(host_header, sizeof host_header, "%s", host);
  char *colon = strrchr(host, ':');
  if (colon && !strchr(colon, ']')) {
    snprintf(port, sizeof port, "%s", colon + 1);
    *colon = 0;
  }
  if (host[0] == '[') {
    memmove(host, host + 1, strlen(host));
    host[strcspn(host, "]")] = 0;
  }
  struct addrinfo hints = {0};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(host, port, &hints, &server_addr);
  if (gai) {
    fprintf(stderr, "bench_http_load: %s: %s\n", url, gai_strerror(gai));
    return 1;
  }

  /* the input: the metadata's, then the flags' */
  conn ctl = {-1, NULL, 0, 0, 0};
  input_desc in = {0};
  int status, n_inputs = 0;
  char path[300];
  snprintf(path, sizeof path, "/v2/models/%s", model);
  char *meta = http_get(&ctl, path, &status);
  if (status == ST_CONN) {
    fprintf(stderr, "bench_http_load: cannot connect to %s\n", url);
    return 1;
  }
  if (meta && status == 200) n_inputs = parse_metadata(meta, &in);
  if (!n_inputs && !(input_name && datatype && n_shape)) {
    fprintf(stderr,
            "bench_http_load: GET %s answered %d%s%s; give --input, --datatype and --features\n",
            path, status, meta ? ": " : "", meta ? meta : "");
    return 1;
  }
  if (n_inputs > 1)
    fprintf(stderr, "bench_http_load: %s has %d inputs; only '%s' is sent\n", model, n_inputs,
            in.name);
  free(meta);
  if (input_name) snprintf(in.name, sizeof in.name, "%s", input_name);
  if (datatype) snprintf(in.datatype, sizeof in.datatype, "%s", datatype);
  if (n_shape) {
    in.n_dims = (int)n_shape;
    for (size_t d = 0; d < n_shape; d++) in.dims[d] = (long)shape_list[d];
  }
  if (!dtype_size(in.datatype)) {
    fprintf(stderr, "bench_http_load: datatype %s: FP32, FP64, INT32, INT64 or BOOL\n",
            in.datatype);
    return 1;
  }
  size_t features = 1;
  for (int d = 0; d < in.n_dims; d++) {
    if (in.dims[d] <= 0) {
      fprintf(stderr, "bench_http_load: input '%s' has a dimension of %ld: give --shape\n", in.name,
              in.dims[d]);
      return 1;
    }
    features *= (size_t)in.dims[d];
  }
  for (unsigned k = 0; k < N_BODIES; k++)
    bodies[k] = build_request(model, &in, rows, features, binary, k);

  /* warm-up, one at a time: the first answer says whether the requests are understood */
  for (unsigned i = 0; i < warmup || i == 0; i++) {
    const char *body;
    size_t n;
    int st = exchange(&ctl, &bodies[i % N_BODIES], &body, &n);
    if (st != 200) {
      char b[16];
      fprintf(stderr, "bench_http_load: a warm-up request answered %s: %.*s\n",
              status_name(st, b, sizeof b), st > 0 ? (int)(n < 500 ? n : 500) : 0,
              st > 0 ? body : "");
      return 1;
    }
  }

  char shape_text[128] = "";
  for (int d = 0; d < in.n_dims; d++)
    snprintf(shape_text + strlen(shape_text), sizeof shape_text - strlen(shape_text), "%s%ld",
             d ? "," : "", in.dims[d]);
  printf("# %s %s: input %s %s [N,%s], requests of %u row(s) as %s (%zu bytes), %u connections, "
         "%.1f s per %s\n",
         url, model, in.name, in.datatype, shape_text, rows, binary ? "binary" : "JSON",
         bodies[0].n, n_conns, seconds, n_steps ? "step" : "rate");
  if (n_steps) {
    printf("%8s %10s %10s %9s %9s %8s\n", "t_s", "offered/s", "answered", "p50_us", "p99_us",
           "delay_us");
  } else {
    printf("%10s %10s %9s %9s %9s %9s %8s %10s %8s\n", "offered/s", "achieved/s", "p50_us",
           "p90_us", "p99_us", "p99.9_us", "errors", "rows/batch", "delay_us");
  }
  fflush(stdout);

  conn *conns = xmalloc(n_conns * sizeof *conns);
  for (unsigned k = 0; k < n_conns; k++) conns[k] = (conn){-1, NULL, 0, 0, 0};
  pthread_t *threads = xmalloc(n_conns * sizeof *threads);
  size_t n_runs = n_steps ? 1 : n_rates;
  for (size_t ri = 0; ri < n_runs; ri++) {
    size_t n_phases = n_steps ? n_steps : 1;
    const double *phase_rate = n_steps ? steps : &rates[ri];
    size_t n = 0;
    for (size_t ph = 0; ph < n_phases; ph++) n += (size_t)(phase_rate[ph] * seconds * 1.2) + 16;
    rq = calloc(n, sizeof *rq);
    uint64_t *lat = xmalloc(n * sizeof *lat);
    if (!rq) oom();
    /* the schedule first, so drawing it costs nothing while sending */
    uint64_t seed = 88172645463325252ull, t = 0;
    size_t sent = 0;
    for (size_t ph = 0; ph < n_phases; ph++) {
      uint64_t start = (uint64_t)((double)ph * seconds * 1e9),
               end = (uint64_t)((double)(ph + 1) * seconds * 1e9);
      if (t < start) t = start;
      while (sent < n && phase_rate[ph] > 0) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        double u = ((double)(seed >> 11) + 0.5) / 9007199254740992.0;
        uint64_t next = t + (uint64_t)(-log(u) / phase_rate[ph] * 1e9);
        if (next >= end) break;
        rq[sent++].sched = t = next;
      }
    }
    n_req = sent;
    atomic_store(&next_req, 0);
    /* every connection open before the clock starts */
    for (unsigned k = 0; k < n_conns; k++)
      if (conns[k].fd < 0 && conn_open(&conns[k])) {
        fprintf(stderr, "bench_http_load: cannot open connection %u to %s\n", k + 1, url);
        return 1;
      }
    metrics m0 = scrape(&ctl, model);
    t_origin = now_ns() + 20000000u; /* 20 ms for the threads to start */
    sampler smp = {model, window_ms, 0, NULL};
    pthread_t smp_thread;
    if (n_steps) {
      smp.n_windows = (size_t)(seconds * (double)n_phases * 1e3 / window_ms) + 1;
      smp.delay_us = xmalloc(smp.n_windows * sizeof *smp.delay_us);
      for (size_t w = 0; w < smp.n_windows; w++) smp.delay_us[w] = NAN;
      atomic_store(&smp.stop, false);
      pthread_create(&smp_thread, NULL, sampler_main, &smp);
    }
    for (unsigned k = 0; k < n_conns; k++)
      if (pthread_create(&threads[k], NULL, conn_main, &conns[k])) {
        fprintf(stderr, "bench_http_load: cannot start thread %u\n", k + 1);
        return 1;
      }
    for (unsigned k = 0; k < n_conns; k++) pthread_join(threads[k], NULL);
    if (n_steps) {
      atomic_store(&smp.stop, true);
      pthread_join(smp_thread, NULL);
    }
    metrics m1 = scrape(&ctl, model);

    if (n_steps) {
      /* per window of scheduled send times: what was offered, and how it was answered */
      for (size_t w = 0; w < smp.n_windows; w++) {
        uint64_t lo = (uint64_t)((double)w * window_ms * 1e6),
                 hi = (uint64_t)((double)(w + 1) * window_ms * 1e6);
        size_t k = 0, offered = 0;
        for (size_t i = 0; i < n_req; i++) {
          if (rq[i].sched < lo || rq[i].sched >= hi) continue;
          offered++;
          if (rq[i].status == 200) lat[k++] = rq[i].done - rq[i].sched;
        }
        if (!offered) continue;
        qsort(lat, k, sizeof *lat, cmp_u64);
        char delay_text[24] = "-";
        if (!isnan(smp.delay_us[w]))
          snprintf(delay_text, sizeof delay_text, "%.0f", smp.delay_us[w]);
        printf("%8.2f %10.0f %10zu %9.1f %9.1f %8s\n", (double)lo / 1e9,
               (double)offered / (window_ms / 1e3), k, pct(lat, k, 0.5), pct(lat, k, 0.99),
               delay_text);
      }
      print_errors(0, n_req);
      free(smp.delay_us);
    } else {
      size_t ok = 0, errors = 0;
      uint64_t last = 0;
      for (size_t i = 0; i < n_req; i++) {
        if (rq[i].status != 200) {
          errors++;
          continue;
        }
        lat[ok++] = rq[i].done - rq[i].sched;
        if (rq[i].done > last) last = rq[i].done;
      }
      qsort(lat, ok, sizeof *lat, cmp_u64);
      char batch_text[24] = "-", delay_text[24] = "-";
      if (m0.ok && m1.ok && m1.batches > m0.batches)
        snprintf(batch_text, sizeof batch_text, "%.2f",
                 (m1.rows - m0.rows) / (m1.batches - m0.batches));
      if (m1.ok && !isnan(m1.delay_s))
        snprintf(delay_text, sizeof delay_text, "%.0f", m1.delay_s * 1e6);
      printf("%10.0f %10.0f %9.1f %9.1f %9.1f %9.1f %8zu %10s %8s\n", rates[ri],
             last ? (double)ok / ((double)last / 1e9) : 0, pct(lat, ok, 0.5), pct(lat, ok, 0.9),
             pct(lat, ok, 0.99), pct(lat, ok, 0.999), errors, batch_text, delay_text);
      print_errors(0, n_req);
    }
    fflush(stdout);
    free(rq), free(lat);
    rq = NULL;
  }
  for (unsigned k = 0; k < n_conns; k++) conn_close(&conns[k]), free(conns[k].buf);
  conn_close(&ctl);
  free(ctl.buf), free(conns), free(threads);
  for (unsigned k = 0; k < N_BODIES; k++) free(bodies[k].p);
  freeaddrinfo(server_addr);
  return 0;
}
