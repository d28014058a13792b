/*
 * base.c — diagnostics, growable arrays and string building, shared by all of dpc.
 * The only output here is dpc_assert_fail's message, because an assert means dpc is broken and
 * there is no caller left to hand an error to.
 */
#include "ir/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How much of a long source line an excerpt keeps on each side of the caret. A 100 MB line must
 * not turn into a 100 MB error message. */
#define EXCERPT_SIDE 60

void dpc_assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "dpc: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
  abort();
}

static const char *const status_names[DPC_STATUS_COUNT] = {
    [DPC_OK] = "ok",
    [DPC_ERR_SYNTAX] = "syntax error",
    [DPC_ERR_SHAPE] = "shape error",
    [DPC_ERR_INVALID] = "invalid argument",
    [DPC_ERR_IO] = "i/o error",
    [DPC_ERR_NOMEM] = "out of memory",
    [DPC_ERR_UNSUPPORTED] = "unsupported",
    [DPC_ERR_RUNTIME] = "runtime error",
    [DPC_ERR_INTERNAL] = "internal error",
    [DPC_ERR_BUSY] = "busy",
};

const char *dpc_status_name(dpc_status st) {
  if ((unsigned)st >= DPC_STATUS_COUNT) return "unknown status";
  return status_names[st];
}

int dpc_version_major(void) {
  return DPC_VERSION_MAJOR;
}
int dpc_version_minor(void) {
  return DPC_VERSION_MINOR;
}
int dpc_version_patch(void) {
  return DPC_VERSION_PATCH;
}

/* ---- diagnostics -------------------------------------------------------------------------- */

void dpc_diag_init(dpc_diag *d) {
  memset(d, 0, sizeof *d);
}

void dpc_diag_clear(dpc_diag *d) {
  if (!d) return;
  free(d->msg);
  free(d->file);
  free(d->excerpt);
  free(d->rendered);
  dpc_diag_init(d);
}

void dpc_diag_free(dpc_diag *d) {
  dpc_diag_clear(d);
}

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

dpc_status dpc_diag_vfail(dpc_diag *d, dpc_status st, const char *fmt, va_list ap) {
  return dpc_diag_vfail_at(d, st, NULL, (dpc_loc){0, 0}, fmt, ap);
}

dpc_status dpc_diag_fail(dpc_diag *d, dpc_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dpc_diag_vfail(d, st, fmt, ap);
  va_end(ap);
  return st;
}

/* Copy the line that holds `loc` (cut to a window around the column), replacing bytes that a
 * terminal would not show as themselves with '?', so the caret stays under the right place. */
static void set_excerpt(dpc_diag *d, const dpc_source *src, dpc_loc loc) {
  const char *t = src->text;
  size_t n = src->len, pos = 0;
  for (uint32_t line = 1; line < loc.line && pos < n; pos++)
    if (t[pos] == '\n') line++;
  size_t start = pos, end = pos;
  while (end < n && t[end] != '\n') end++;
  size_t col = loc.col ? loc.col - 1 : 0;
  if (col > end - start) col = end - start;
  size_t from = col > EXCERPT_SIDE ? col - EXCERPT_SIDE : 0;
  size_t to = end - start - col > EXCERPT_SIDE ? col + EXCERPT_SIDE : end - start;
  bool cut_left = from > 0, cut_right = start + to < end;
  size_t len = to - from + (cut_left ? 3 : 0) + (cut_right ? 3 : 0);
  char *e = malloc(len + 1);
  if (!e) return;
  size_t k = 0;
  if (cut_left) memcpy(e + k, "...", 3), k += 3;
  for (size_t i = from; i < to; i++) {
    unsigned char c = (unsigned char)t[start + i];
    e[k++] = (c == '\t' || (c >= 32 && c < 127)) ? (char)c : '?';
  }
  if (cut_right) memcpy(e + k, "...", 3), k += 3;
  e[k] = 0;
  d->excerpt = e;
  d->caret = (uint32_t)(col - from + (cut_left ? 3 : 0));
}

dpc_status dpc_diag_vfail_at(dpc_diag *d, dpc_status st, const dpc_source *src, dpc_loc loc,
                             const char *fmt, va_list ap) {
  if (!d) return st;
  dpc_diag_clear(d);
  d->status = st;
  d->msg = vformat(fmt, ap);
  if (src && src->name) d->file = dpc_strdup(src->name);
  if (src && loc.line) {
    d->loc = loc;
    if (src->text) set_excerpt(d, src, loc);
  }
  return st;
}

dpc_status dpc_diag_fail_at(dpc_diag *d, dpc_status st, const dpc_source *src, dpc_loc loc,
                            const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dpc_diag_vfail_at(d, st, src, loc, fmt, ap);
  va_end(ap);
  return st;
}

void dpc_diag_prefix(dpc_diag *d, const char *fmt, ...) {
  if (!d || d->status == DPC_OK) return;
  va_list ap;
  va_start(ap, fmt);
  char *p = vformat(fmt, ap);
  va_end(ap);
  if (!p) return;
  dpc_buf b = {0};
  dpc_buf_puts(&b, p);
  dpc_buf_puts(&b, d->msg ? d->msg : "");
  free(p);
  char *m = dpc_buf_take(&b);
  if (m) {
    free(d->msg);
    d->msg = m;
  }
}

char *dpc_diag_render(const dpc_diag *d) {
  dpc_buf b = {0};
  if (d->file) {
    dpc_buf_puts(&b, d->file);
    if (d->loc.line) dpc_buf_printf(&b, ":%u:%u", d->loc.line, d->loc.col);
    dpc_buf_puts(&b, ": ");
  }
  dpc_buf_printf(&b, "error: %s\n", d->msg ? d->msg : dpc_status_name(d->status));
  if (d->excerpt) {
    dpc_buf_printf(&b, "  %s\n  ", d->excerpt);
    for (uint32_t i = 0; i < d->caret; i++) dpc_buf_puts(&b, d->excerpt[i] == '\t' ? "\t" : " ");
    dpc_buf_puts(&b, "^\n");
  }
  return dpc_buf_take(&b);
}

/* ---- growable arrays ------------------------------------------------------------------------ */

int dpc_vec_grow_(void *arrp, uint32_t *cap, size_t need, size_t elem) {
  if (need > UINT32_MAX) return -1;
  size_t ncap = *cap ? *cap : 8;
  while (ncap < need) ncap *= 2;
  if (ncap > UINT32_MAX) ncap = UINT32_MAX;
  if (ncap > SIZE_MAX / elem) return -1;
  void *old;
  memcpy(&old, arrp, sizeof old);
  void *p = realloc(old, ncap * elem);
  if (!p) return -1;
  memcpy(arrp, &p, sizeof p);
  *cap = (uint32_t)ncap;
  return 0;
}

/* ---- string building ------------------------------------------------------------------------ */

void dpc_buf_free(dpc_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

static bool buf_reserve(dpc_buf *b, size_t extra) {
  if (b->oom) return false;
  if (b->len + extra + 1 <= b->cap) return true;
  size_t ncap = b->cap ? b->cap : 64;
  while (ncap < b->len + extra + 1) ncap *= 2;
  char *p = realloc(b->data, ncap);
  if (!p) {
    b->oom = true;
    return false;
  }
  b->data = p;
  b->cap = ncap;
  return true;
}

void dpc_buf_putn(dpc_buf *b, const char *s, size_t n) {
  if (!buf_reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
}

void dpc_buf_puts(dpc_buf *b, const char *s) {
  dpc_buf_putn(b, s, strlen(s));
}

void dpc_buf_printf(dpc_buf *b, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n >= 0 && buf_reserve(b, (size_t)n)) {
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    b->len += (size_t)n;
  }
  va_end(ap2);
}

char *dpc_buf_take(dpc_buf *b) {
  char *s = b->oom ? NULL : b->data;
  if (b->oom) free(b->data);
  if (!b->oom && !s) s = dpc_strdup("");
  memset(b, 0, sizeof *b);
  return s;
}

void dpc_format_double(char out[32], double v) {
  if (isnan(v)) {
    strcpy(out, "nan");
    return;
  }
  if (isinf(v)) {
    strcpy(out, v < 0 ? "-inf" : "inf");
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(out, 32, "%.*g", prec, v);
    if (strtod(out, NULL) == v) break;
  }
  /* Keep a float looking like a float only where the reader needs it: plain "2" is fine, the
   * parser types a literal by where it stands, not by its spelling. */
}

char *dpc_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

uint32_t dpc_edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return UINT32_MAX;
  uint32_t row[65];
  for (size_t j = 0; j <= lb; j++) row[j] = (uint32_t)j;
  for (size_t i = 1; i <= la; i++) {
    uint32_t prev = row[0];
    row[0] = (uint32_t)i;
    for (size_t j = 1; j <= lb; j++) {
      uint32_t cur = row[j];
      uint32_t best = prev + (a[i - 1] != b[j - 1]);
      if (row[j] + 1 < best) best = row[j] + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      prev = cur;
    }
  }
  return row[lb];
}

double dpc_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
