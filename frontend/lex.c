/*
 * lex.c — the .graph lexer. Every byte of input either becomes part of a token, is skipped as
 * space or comment, or stops lexing with an error naming it; nothing reads past the end.
 */
#include "frontend/lex.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dpc_lex_init(dpc_lexer *lx, dpc_source src, dpc_diag *d) {
  memset(lx, 0, sizeof *lx);
  lx->src = src;
  lx->loc = (dpc_loc){1, 1};
  lx->d = d;
}

void dpc_lex_free(dpc_lexer *lx) {
  free(lx->tok.str);
  lx->tok.str = NULL;
}

static int peekc(const dpc_lexer *lx, size_t ahead) {
  size_t p = lx->pos + ahead;
  return p < lx->src.len ? (unsigned char)lx->src.text[p] : -1;
}

static void advance(dpc_lexer *lx) {
  if (lx->src.text[lx->pos] == '\n') {
    lx->loc.line++;
    lx->loc.col = 1;
  } else {
    lx->loc.col++;
  }
  lx->pos++;
}

static bool is_alpha(int c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_digit(int c) {
  return c >= '0' && c <= '9';
}

static dpc_tok error(dpc_lexer *lx, dpc_loc loc, const char *fmt, ...) DPC_PRINTF(3, 4);
static dpc_tok error(dpc_lexer *lx, dpc_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dpc_diag_vfail_at(lx->d, DPC_ERR_SYNTAX, &lx->src, loc, fmt, ap);
  va_end(ap);
  lx->tok.kind = DPC_T_ERROR;
  return DPC_T_ERROR;
}

static dpc_tok lex_number(dpc_lexer *lx) {
  dpc_token *t = &lx->tok;
  size_t start = lx->pos;
  bool is_float = false;
  while (is_digit(peekc(lx, 0))) advance(lx);
  if (peekc(lx, 0) == '.' && !is_alpha(peekc(lx, 1))) {
    is_float = true;
    advance(lx);
    while (is_digit(peekc(lx, 0))) advance(lx);
  }
  if (peekc(lx, 0) == 'e' || peekc(lx, 0) == 'E') {
    int c1 = peekc(lx, 1), c2 = peekc(lx, 2);
    if (is_digit(c1) || ((c1 == '+' || c1 == '-') && is_digit(c2))) {
      is_float = true;
      advance(lx);
      if (c1 == '+' || c1 == '-') advance(lx);
      while (is_digit(peekc(lx, 0))) advance(lx);
    }
  }
  if (is_alpha(peekc(lx, 0)))
    return error(lx, lx->loc, "unexpected '%c' after a number", peekc(lx, 0));
  size_t n = lx->pos - start;
  t->len = n;
  if (n > DPC_MAX_NUMBER)
    return error(lx, t->loc, "number longer than %d characters", DPC_MAX_NUMBER);
  char buf[DPC_MAX_NUMBER + 1];
  memcpy(buf, lx->src.text + start, n);
  buf[n] = 0;
  if (!is_float) {
    errno = 0;
    unsigned long long v = strtoull(buf, NULL, 10);
    if (errno || v > (unsigned long long)INT64_MAX)
      return error(lx, t->loc, "integer %s is too large (the limit is %lld)", buf,
                   (long long)INT64_MAX);
    t->kind = DPC_T_INT;
    t->ival = (int64_t)v;
    t->fval = (double)v;
    return t->kind;
  }
  t->kind = DPC_T_FLOAT;
  t->fval = strtod(buf, NULL);
  if (isinf(t->fval)) return error(lx, t->loc, "number %s is too large for a double", buf);
  return t->kind;
}

static dpc_tok lex_string(dpc_lexer *lx) {
  dpc_token *t = &lx->tok;
  advance(lx); /* opening quote */
  char *out = malloc(DPC_MAX_STRING + 1);
  if (!out) return error(lx, t->loc, "out of memory reading a string");
  size_t n = 0;
  for (;;) {
    int c = peekc(lx, 0);
    if (c < 0 || c == '\n') {
      free(out);
      return error(lx, t->loc, "string is not closed before the end of the line");
    }
    if (n == DPC_MAX_STRING) {
      free(out);
      return error(lx, t->loc, "string longer than %d characters", DPC_MAX_STRING);
    }
    if (c == '"') {
      advance(lx);
      break;
    }
    if (c == '\\') {
      dpc_loc el = lx->loc;
      advance(lx);
      int e = peekc(lx, 0);
      if (e == 'n')
        c = '\n';
      else if (e == 't')
        c = '\t';
      else if (e == '"' || e == '\\')
        c = e;
      else if (e == 'x') {
        int h1 = peekc(lx, 1), h2 = peekc(lx, 2);
        const char *hex = "0123456789abcdef";
        const char *p1 = h1 > 0 ? strchr(hex, h1 | 0x20) : NULL,
                   *p2 = h2 > 0 ? strchr(hex, h2 | 0x20) : NULL;
        if (!p1 || !p2 || h1 == 0 || h2 == 0) {
          free(out);
          return error(lx, el, "\\x must be followed by two hex digits");
        }
        c = (int)((p1 - hex) * 16 + (p2 - hex));
        if (c == 0) {
          free(out);
          return error(lx, el, "strings cannot hold a NUL byte");
        }
        advance(lx);
        advance(lx);
      } else {
        free(out);
        return error(lx, el, "unknown escape in string (use \\n \\t \\\" \\\\ or \\xHH)");
      }
    } else if (c == 0) {
      free(out);
      return error(lx, lx->loc, "strings cannot hold a NUL byte");
    }
    advance(lx);
    out[n++] = (char)c;
  }
  out[n] = 0;
  t->kind = DPC_T_STRING;
  t->str = out;
  t->str_len = n;
  t->len = 0;
  return t->kind;
}

dpc_tok dpc_lex_next(dpc_lexer *lx) {
  dpc_token *t = &lx->tok;
  free(t->str);
  memset(t, 0, sizeof *t);
  for (;;) {
    int c = peekc(lx, 0);
    if (c == ' ' || c == '\t' || c == '\r') {
      advance(lx);
    } else if (c == '#') {
      while (peekc(lx, 0) >= 0 && peekc(lx, 0) != '\n') advance(lx);
    } else if (c == '\\' &&
               (peekc(lx, 1) == '\n' || (peekc(lx, 1) == '\r' && peekc(lx, 2) == '\n'))) {
      advance(lx); /* a backslash at the end of a line continues the statement */
      if (peekc(lx, 0) == '\r') advance(lx);
      advance(lx);
    } else if (c == '\n' && lx->nest > 0) {
      advance(lx);
    } else {
      break;
    }
  }
  t->loc = lx->loc;
  t->start = lx->src.text + lx->pos;
  int c = peekc(lx, 0);
  if (c < 0) {
    t->kind = DPC_T_EOF;
    return t->kind;
  }
  if (is_digit(c) || (c == '.' && is_digit(peekc(lx, 1)))) return lex_number(lx);
  if (is_alpha(c)) {
    size_t start = lx->pos;
    advance(lx);
    for (;;) {
      int k = peekc(lx, 0);
      if (is_alpha(k) || is_digit(k))
        advance(lx);
      else if (k == '.' && (is_alpha(peekc(lx, 1)) || is_digit(peekc(lx, 1))))
        advance(lx);
      else
        break;
    }
    t->len = lx->pos - start;
    if (t->len > DPC_MAX_NAME)
      return error(lx, t->loc, "name longer than %d characters", DPC_MAX_NAME);
    if ((t->len == 3 && !memcmp(t->start, "inf", 3)) ||
        (t->len == 3 && !memcmp(t->start, "nan", 3))) {
      t->kind = DPC_T_FLOAT;
      t->fval = t->start[0] == 'i' ? INFINITY : NAN;
      return t->kind;
    }
    t->kind = DPC_T_IDENT;
    return t->kind;
  }
  if (c == '"') return lex_string(lx);
  if (c == '`') { /* a quoted name: any characters but backticks and line breaks */
    advance(lx);
    size_t start = lx->pos;
    for (;;) {
      int k = peekc(lx, 0);
      if (k < 0 || k == '\n' || k == 0) return error(lx, t->loc, "unterminated `name`");
      if (k == '`') break;
      advance(lx);
    }
    t->start = lx->src.text + start;
    t->len = lx->pos - start;
    advance(lx);
    if (t->len == 0) return error(lx, t->loc, "empty `name`");
    if (t->len > DPC_MAX_NAME)
      return error(lx, t->loc, "name longer than %d characters", DPC_MAX_NAME);
    t->kind = DPC_T_IDENT;
    t->quoted = true;
    return t->kind;
  }
  static const struct {
    char c;
    dpc_tok k;
  } punct[] = {{'(', DPC_T_LPAREN}, {')', DPC_T_RPAREN}, {'[', DPC_T_LBRACK},  {']', DPC_T_RBRACK},
               {'{', DPC_T_LBRACE}, {'}', DPC_T_RBRACE}, {',', DPC_T_COMMA},   {':', DPC_T_COLON},
               {'=', DPC_T_EQ},     {'+', DPC_T_PLUS},   {'-', DPC_T_MINUS},   {'*', DPC_T_STAR},
               {'/', DPC_T_SLASH},  {'@', DPC_T_AT},     {'\n', DPC_T_NEWLINE}};
  for (size_t i = 0; i < sizeof punct / sizeof *punct; i++) {
    if (punct[i].c != c) continue;
    if (c == '(' || c == '[') lx->nest++;
    if ((c == ')' || c == ']') && lx->nest > 0) lx->nest--;
    advance(lx);
    t->kind = punct[i].k;
    t->len = 1;
    return t->kind;
  }
  if (c >= 32 && c < 127) return error(lx, t->loc, "unexpected character '%c'", c);
  if (c >= 128)
    return error(lx, t->loc, "unexpected byte 0x%02x (only ASCII is allowed outside comments)", c);
  return error(lx, t->loc, "unexpected control character 0x%02x", c);
}

void dpc_tok_describe(const dpc_token *t, char *buf, size_t n) {
  switch (t->kind) {
  case DPC_T_EOF: snprintf(buf, n, "end of file"); break;
  case DPC_T_NEWLINE: snprintf(buf, n, "end of line"); break;
  case DPC_T_STRING: snprintf(buf, n, "a string"); break;
  case DPC_T_INT:
  case DPC_T_FLOAT:
    snprintf(buf, n, "number %.*s", (int)(t->len > 32 ? 32 : t->len), t->start);
    break;
  case DPC_T_IDENT: snprintf(buf, n, "'%.*s'", (int)(t->len > 64 ? 64 : t->len), t->start); break;
  default: snprintf(buf, n, "'%.*s'", (int)t->len, t->start); break;
  }
}
