/*
 * serve_lift.c — "data" number arrays read from the request's text (see serve_lift.h).
 */
#include "driver/serve_lift.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Arrays shorter than this stay with the JSON reader: the marker must fit in their place, and
 * a short one costs it little. */
enum { MIN_LIFT = 16, MAX_LIFTS = 1u << 20 };

static bool digit(char c) {
  return c >= '0' && c <= '9';
}

static bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The length of the JSON number at s (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?),
 * 0 if none starts there. */
static size_t number_len(const char *s, const char *end) {
  const char *p = s;
  if (p < end && *p == '-') p++;
  if (p == end) return 0;
  if (*p == '0')
    p++;
  else if (*p >= '1' && *p <= '9')
    while (p < end && digit(*p)) p++;
  else
    return 0;
  if (p < end && *p == '.') {
    if (++p == end || !digit(*p)) return 0;
    while (p < end && digit(*p)) p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    if (++p < end && (*p == '+' || *p == '-')) p++;
    if (p == end || !digit(*p)) return 0;
    while (p < end && digit(*p)) p++;
  }
  return (size_t)(p - s);
}

/* The position of the ']' closing the flat number array opened at s ('['), or NULL when its
 * contents are anything else. */
static const char *number_array(const char *s, const char *end) {
  const char *p = s + 1;
  while (p < end && space(*p)) p++;
  if (p < end && *p == ']') return NULL; /* empty: nothing to gain */
  for (;;) {
    size_t n = number_len(p, end);
    if (!n) return NULL;
    p += n;
    while (p < end && space(*p)) p++;
    if (p == end) return NULL;
    if (*p == ']') return p;
    if (*p != ',') return NULL;
    p++;
    while (p < end && space(*p)) p++;
  }
}

/* In the copy, the array [open, close] becomes the marker string of lift k and spaces; its line
 * breaks stay where they were (those the marker covers just after it), so the JSON reader's
 * line and column in a message about what follows are those of the request as sent. */
static void put_marker(char *copy, size_t open, size_t close, size_t k) {
  char mark[32];
  int m = snprintf(mark, sizeof mark, "\"\\u0001%zu\"", k);
  size_t breaks = 0;
  for (size_t i = open; i < open + (size_t)m; i++) breaks += copy[i] == '\n';
  memcpy(copy + open, mark, (size_t)m);
  for (size_t i = open + (size_t)m; i <= close; i++) {
    if (copy[i] == '\n') continue;
    copy[i] = breaks ? '\n' : ' ';
    if (breaks) breaks--;
  }
}

char *dpc_serve_lift(const char *json, size_t len, dpc_serve_lifts *l) {
  memset(l, 0, sizeof *l);
  l->text = json;
  char *copy = NULL;
  const char *end = json + len;
  for (size_t i = 0; i < len;) {
    if (json[i] != '"') {
      i++;
      continue;
    }
    size_t j = i + 1;
    bool plain = true;
    while (j < len && json[j] != '"') {
      if (json[j] == '\\') plain = false, j++;
      j++;
    }
    if (j >= len) break; /* unterminated: the JSON reader says so */
    bool data = plain && j - i - 1 == 4 && !memcmp(json + i + 1, "data", 4);
    i = j + 1;
    if (!data) continue;
    size_t k = i;
    while (k < len && space(json[k])) k++;
    if (k == len || json[k] != ':') continue;
    for (k++; k < len && space(json[k]); k++) continue;
    if (k == len || json[k] != '[') continue;
    const char *close = number_array(json + k, end);
    if (!close || (size_t)(close - (json + k)) + 1 < MIN_LIFT || l->n >= MAX_LIFTS) continue;
    if (!copy && !(copy = malloc(len + 1))) break;
    if (copy && l->n == 0) memcpy(copy, json, len), copy[len] = 0;
    if (l->n == l->cap) {
      size_t cap = l->cap ? 2 * l->cap : 8;
      size_t(*s)[2] = realloc(l->span, cap * sizeof *s);
      if (!s) {
        free(copy);
        dpc_serve_lifts_free(l);
        l->text = json;
        return NULL;
      }
      l->span = s, l->cap = cap;
    }
    size_t c = (size_t)(close - json);
    l->span[l->n][0] = k + 1, l->span[l->n][1] = c;
    put_marker(copy, k, c, l->n);
    l->n++;
    i = c + 1;
  }
  return copy;
}

long dpc_serve_lift_index(const dpc_serve_lifts *l, const char *s) {
  if (!s || s[0] != '\x01' || !digit(s[1])) return -1;
  size_t k = 0;
  for (s++; digit(*s); s++) {
    k = k * 10 + (size_t)(*s - '0');
    if (k >= l->n) return -1;
  }
  return *s ? -1 : (long)k;
}

bool dpc_serve_lift_next(const char **at, const char *end, const char **tok, size_t *len) {
  const char *p = *at;
  while (p < end && space(*p)) p++;
  if (p >= end) return false;
  *tok = p;
  *len = number_len(p, end);
  p += *len;
  while (p < end && space(*p)) p++;
  if (p < end && *p == ',') p++;
  *at = p;
  return *len > 0;
}

/* 10^k for the exact fast path: every one is a double exactly. */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

bool dpc_serve_parse_real(const char *tok, size_t len, double *out) {
  const char *p = tok, *end = tok + len;
  if (!len || number_len(tok, end) != len) return false;
  bool neg = *p == '-';
  p += neg;
  /* Clinger's fast path: at most 15 significant digits and a power of ten up to 22 are both
   * doubles exactly, so one multiply or divide rounds once, to strtod's answer */
  uint64_t m = 0;
  int digits = 0, exp10 = 0;
  bool exact = true;
  for (; p < end && digit(*p); p++)
    if (m || *p != '0') {
      if (digits < 19)
        m = m * 10 + (uint64_t)(*p - '0'), digits++;
      else
        exact = false, exp10++;
    }
  if (p < end && *p == '.')
    for (p++; p < end && digit(*p); p++) {
      if (!m && *p == '0') {
        exp10--;
        continue;
      }
      if (digits < 19)
        m = m * 10 + (uint64_t)(*p - '0'), digits++, exp10--;
      else
        exact = false;
    }
  if (p < end) { /* the exponent */
    p++;
    bool eneg = *p == '-';
    if (*p == '+' || *p == '-') p++;
    int e = 0;
    for (; p < end; p++) e = e < 100000 ? e * 10 + (*p - '0') : e;
    exp10 += eneg ? -e : e;
  }
  /* "-0" is the integer 0, as the JSON reader has it; "-0.0" is negative zero */
  if (!m && !memchr(tok, '.', len) && !memchr(tok, 'e', len) && !memchr(tok, 'E', len)) {
    *out = 0;
    return true;
  }
  if (exact && digits <= 15 && exp10 >= -22 && exp10 <= 22) {
    double v = (double)m;
    v = exp10 < 0 ? v / pow10_exact[-exp10] : v * pow10_exact[exp10];
    *out = neg ? -v : v;
    return true;
  }
  char small[64], *buf = len < sizeof small ? small : malloc(len + 1);
  if (!buf) return false;
  memcpy(buf, tok, len);
  buf[len] = 0;
  *out = strtod(buf, NULL);
  if (buf != small) free(buf);
  return true;
}

bool dpc_serve_parse_int(const char *tok, size_t len, int64_t *out) {
  if (!len || number_len(tok, tok + len) != len) return false;
  for (size_t i = 0; i < len; i++)
    if (tok[i] == '.' || tok[i] == 'e' || tok[i] == 'E') return false;
  char buf[32];
  if (len >= sizeof buf) return false; /* more digits than any int64 */
  memcpy(buf, tok, len);
  buf[len] = 0;
  errno = 0;
  long long v = strtoll(buf, NULL, 10);
  if (errno == ERANGE) return false;
  *out = (int64_t)v;
  return true;
}

void dpc_serve_lifts_free(dpc_serve_lifts *l) {
  free(l->span);
  memset(l, 0, sizeof *l);
}
