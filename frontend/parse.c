/*
 * parse.c — the .graph parser: statements into graph nodes (grammar in docs/graph-format.md).
 *
 * Each statement is parsed into a small syntax tree in a per-statement arena, then lowered into
 * nodes; lowering runs each node's shape rule, so a shape error points at the expression that
 * made it. The first error ends the parse. Recursion is bounded (DPC_MAX_NESTING), input is
 * lexed in one pass, so malformed input cannot crash or hang it.
 *
 * Must stay in step with ir/print.c (how bare numbers get their dtype, which forms print).
 */
#include "frontend/frontend.h"
#include "frontend/lex.h"
#include "ir/arena.h"
#include "ir/print.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { E_NUM, E_NAME, E_STR, E_CALL, E_BIN, E_NEG, E_LIST } ekind;

typedef struct expr expr;
typedef struct kwarg {
  const char *name;
  size_t len;
  dpc_loc loc;
  expr *val;
} kwarg;

struct expr {
  ekind k;
  dpc_loc loc;
  bool is_int;   /* E_NUM */
  int64_t ival;  /* E_NUM when is_int */
  double num;    /* E_NUM */
  const char *s; /* E_NAME, E_CALL: the name; E_STR: decoded text (in the arena) */
  size_t n;
  expr **args; /* E_CALL positional, E_LIST elements, E_BIN 2, E_NEG 1 */
  uint32_t nargs;
  kwarg *kw; /* E_CALL */
  uint32_t nkw;
  char op;        /* E_BIN: + - * / */
  uint32_t depth; /* height of this tree; lowering recurses this deep */
};

typedef struct parser {
  dpc_lexer lx;
  dpc_graph *g;
  dpc_diag *d;
  dpc_source src;
  dpc_arena ar;
  int depth;
  uint32_t block_device; /* device of the open `device X {` block, DPC_NONE outside */
  dpc_loc block_loc;
  dpc_loc model_loc;
} parser;

#define TOK (p->lx.tok)

static const char *const statement_keywords[] = {"model",    "input",  "param",  "state", "output",
                                                 "minimize", "update", "device", "with"};

static bool tok_is(const parser *p, const char *kw) {
  size_t n = strlen(kw);
  return TOK.kind == DPC_T_IDENT && !TOK.quoted && TOK.len == n && memcmp(TOK.start, kw, n) == 0;
}

static bool is_keyword(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof statement_keywords / sizeof *statement_keywords; i++)
    if (strlen(statement_keywords[i]) == n && memcmp(statement_keywords[i], s, n) == 0) return true;
  return false;
}

static dpc_status err(parser *p, dpc_loc loc, const char *fmt, ...) DPC_PRINTF(3, 4);
static dpc_status err(parser *p, dpc_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dpc_diag_vfail_at(p->d, DPC_ERR_SYNTAX, &p->src, loc, fmt, ap);
  va_end(ap);
  return DPC_ERR_SYNTAX;
}

/* Errors from the graph builder carry a status of their own (shape, invalid, nomem). */
static dpc_status err_st(parser *p, dpc_status st, dpc_loc loc, const char *fmt, ...)
    DPC_PRINTF(4, 5);
static dpc_status err_st(parser *p, dpc_status st, dpc_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dpc_diag_vfail_at(p->d, st, &p->src, loc, fmt, ap);
  va_end(ap);
  return st;
}

static dpc_status nomem(parser *p) {
  return dpc_diag_fail(p->d, DPC_ERR_NOMEM, "out of memory parsing %s", p->src.name);
}

static dpc_status next(parser *p) {
  return dpc_lex_next(&p->lx) == DPC_T_ERROR ? DPC_ERR_SYNTAX : DPC_OK;
}

static dpc_status expected(parser *p, const char *what) {
  char got[96];
  dpc_tok_describe(&TOK, got, sizeof got);
  return err(p, TOK.loc, "expected %s, got %s", what, got);
}

static dpc_status expect(parser *p, dpc_tok kind, const char *what) {
  if (TOK.kind != kind) return expected(p, what);
  return next(p);
}

/* ---- finding where a name is defined, for "used before its definition" ---------------------- */

/* Scan the whole text for a statement that defines `name`; true with its position if one does.
 * Runs only when an undefined name is reported, so a second lexing pass costs nothing
 * otherwise. */
static bool find_definition(parser *p, const char *name, size_t n, dpc_loc *where) {
  dpc_diag scratch;
  dpc_diag_init(&scratch);
  dpc_lexer lx;
  dpc_lex_init(&lx, p->src, &scratch);
  bool at_start = true, found = false;
  dpc_tok k;
  while ((k = dpc_lex_next(&lx)) != DPC_T_EOF && k != DPC_T_ERROR && !found) {
    if (k == DPC_T_NEWLINE || k == DPC_T_LBRACE) {
      at_start = true;
      continue;
    }
    if (!at_start || k != DPC_T_IDENT) {
      at_start = false;
      continue;
    }
    at_start = false;
    const dpc_token *t = &lx.tok;
    bool decl = (t->len == 5 && (!memcmp(t->start, "input", 5) || !memcmp(t->start, "param", 5) ||
                                 !memcmp(t->start, "state", 5)));
    if (decl) {
      if (dpc_lex_next(&lx) == DPC_T_IDENT && lx.tok.len == n && !memcmp(lx.tok.start, name, n)) {
        *where = lx.tok.loc;
        found = true;
      }
      continue;
    }
    /* NAME {, NAME} = ... */
    dpc_loc cand[64];
    bool match[64];
    uint32_t nc = 0;
    for (;;) {
      if (lx.tok.kind != DPC_T_IDENT || nc == 64) break;
      cand[nc] = lx.tok.loc;
      match[nc++] = lx.tok.len == n && !memcmp(lx.tok.start, name, n);
      k = dpc_lex_next(&lx);
      if (k == DPC_T_EQ) {
        for (uint32_t i = 0; i < nc; i++)
          if (match[i]) {
            *where = cand[i];
            found = true;
          }
        break;
      }
      if (k != DPC_T_COMMA) break;
      dpc_lex_next(&lx);
    }
    if (lx.tok.kind == DPC_T_NEWLINE) at_start = true;
  }
  dpc_lex_free(&lx);
  dpc_diag_free(&scratch);
  return found;
}

static dpc_status undefined(parser *p, const expr *e) {
  dpc_loc def;
  if (find_definition(p, e->s, e->n, &def)) {
    if (def.line > e->loc.line || (def.line == e->loc.line && def.col > e->loc.col))
      return err_st(p, DPC_ERR_INVALID, e->loc,
                    "'%.*s' is used before its definition at %u:%u (define values before using "
                    "them: a graph has no cycles)",
                    (int)e->n, e->s, def.line, def.col);
    return err_st(p, DPC_ERR_INVALID, e->loc,
                  "'%.*s' refers to the value being defined (a graph has no cycles)", (int)e->n,
                  e->s);
  }
  if (dpc_graph_find_symbol(p->g, e->s, e->n) != DPC_NONE)
    return err_st(p, DPC_ERR_INVALID, e->loc, "'%.*s' is a dimension, not a value", (int)e->n,
                  e->s);
  return err_st(p, DPC_ERR_INVALID, e->loc, "'%.*s' is not defined", (int)e->n, e->s);
}

/* ---- syntax trees ---------------------------------------------------------------------------- */

static expr *new_expr(parser *p, ekind k, dpc_loc loc) {
  expr *e = dpc_arena_alloc(&p->ar, sizeof *e);
  if (e) {
    e->k = k;
    e->loc = loc;
    e->depth = 1;
  }
  return e;
}

/* Set e's height from its children. Lowering recurses once per level, so a chain such as
 * x + x + ... + x (which parses in a loop) is bounded here rather than by the stack. */
static dpc_status set_depth(parser *p, expr *e) {
  uint32_t h = 0;
  for (uint32_t i = 0; i < e->nargs; i++)
    if (e->args[i]->depth > h) h = e->args[i]->depth;
  for (uint32_t i = 0; i < e->nkw; i++)
    if (e->kw[i].val->depth > h) h = e->kw[i].val->depth;
  e->depth = h + 1;
  if (e->depth > DPC_MAX_EXPR_DEPTH)
    return err(p, e->loc,
               "expression more than %d operations deep; split it into several statements",
               DPC_MAX_EXPR_DEPTH);
  return DPC_OK;
}

/* A growable list used while parsing arguments, copied into the arena when done. */
typedef struct exprvec {
  expr **v;
  uint32_t n, cap;
  kwarg *kw;
  uint32_t nkw, capkw;
} exprvec;

static dpc_status parse_expr(parser *p, expr **out);

static dpc_status parse_list(parser *p, expr **out) {
  dpc_loc loc = TOK.loc;
  dpc_status st = next(p); /* '[' */
  if (st) return st;
  exprvec v = {0};
  while (TOK.kind != DPC_T_RBRACK) {
    expr *e;
    if ((st = parse_expr(p, &e))) goto done;
    if (DPC_VEC_RESERVE(v.v, v.cap, v.n + 1)) {
      st = nomem(p);
      goto done;
    }
    v.v[v.n++] = e;
    if (TOK.kind == DPC_T_COMMA) {
      if ((st = next(p))) goto done;
    } else if (TOK.kind != DPC_T_RBRACK) {
      st = expected(p, "',' or ']' in a list");
      goto done;
    }
  }
  if ((st = next(p))) goto done;
  expr *e = new_expr(p, E_LIST, loc);
  if (!e || (v.n && !(e->args = dpc_arena_alloc(&p->ar, v.n * sizeof *e->args)))) {
    st = nomem(p);
    goto done;
  }
  if (v.n) memcpy(e->args, v.v, v.n * sizeof *e->args);
  e->nargs = v.n;
  if ((st = set_depth(p, e))) goto done;
  *out = e;
done:
  free(v.v);
  return st;
}

static dpc_status parse_call_args(parser *p, expr *call) {
  dpc_loc open = TOK.loc;
  dpc_status st = next(p); /* '(' */
  if (st) return st;
  exprvec v = {0};
  while (TOK.kind != DPC_T_RPAREN) {
    if (TOK.kind == DPC_T_EOF) {
      st = err(p, open, "'(' is not closed");
      goto done;
    }
    /* keyword argument: NAME '=' value */
    if (TOK.kind == DPC_T_IDENT) {
      dpc_lexer save = p->lx;
      const char *nm = TOK.start;
      size_t nl = TOK.len;
      dpc_loc nloc = TOK.loc;
      if ((st = next(p))) goto done;
      if (TOK.kind == DPC_T_EQ) {
        if ((st = next(p))) goto done;
        expr *val;
        if ((st = parse_expr(p, &val))) goto done;
        for (uint32_t i = 0; i < v.nkw; i++)
          if (v.kw[i].len == nl && !memcmp(v.kw[i].name, nm, nl)) {
            st = err(p, nloc, "'%.*s' is given twice", (int)nl, nm);
            goto done;
          }
        if (DPC_VEC_RESERVE(v.kw, v.capkw, v.nkw + 1)) {
          st = nomem(p);
          goto done;
        }
        v.kw[v.nkw++] = (kwarg){nm, nl, nloc, val};
        goto separator;
      }
      /* not a keyword: rewind and read it as an expression */
      free(p->lx.tok.str);
      p->lx = save;
    }
    if (v.nkw) {
      st = err(p, TOK.loc, "a positional argument cannot follow keyword arguments");
      goto done;
    }
    {
      expr *e;
      if ((st = parse_expr(p, &e))) goto done;
      if (DPC_VEC_RESERVE(v.v, v.cap, v.n + 1)) {
        st = nomem(p);
        goto done;
      }
      v.v[v.n++] = e;
    }
  separator:
    if (TOK.kind == DPC_T_COMMA) {
      if ((st = next(p))) goto done;
    } else if (TOK.kind != DPC_T_RPAREN) {
      if (TOK.kind == DPC_T_EOF)
        st = err(p, open, "'(' is not closed");
      else
        st = expected(p, "',' or ')' after an argument");
      goto done;
    }
  }
  if ((st = next(p))) goto done;
  if (v.n && !(call->args = dpc_arena_alloc(&p->ar, v.n * sizeof *call->args))) {
    st = nomem(p);
    goto done;
  }
  if (v.nkw && !(call->kw = dpc_arena_alloc(&p->ar, v.nkw * sizeof *call->kw))) {
    st = nomem(p);
    goto done;
  }
  if (v.n) memcpy(call->args, v.v, v.n * sizeof *call->args);
  if (v.nkw) memcpy(call->kw, v.kw, v.nkw * sizeof *call->kw);
  call->nargs = v.n;
  call->nkw = v.nkw;
  st = set_depth(p, call);
done:
  free(v.v);
  free(v.kw);
  return st;
}

static dpc_status enter(parser *p) {
  if (++p->depth > DPC_MAX_NESTING)
    return err(p, TOK.loc, "expression nested more than %d levels deep", DPC_MAX_NESTING);
  return DPC_OK;
}

static dpc_status parse_primary(parser *p, expr **out) {
  dpc_status st;
  expr *e;
  switch (TOK.kind) {
  case DPC_T_INT:
  case DPC_T_FLOAT:
    if (!(e = new_expr(p, E_NUM, TOK.loc))) return nomem(p);
    e->is_int = TOK.kind == DPC_T_INT;
    e->ival = TOK.ival;
    e->num = TOK.fval;
    *out = e;
    return next(p);
  case DPC_T_STRING:
    if (!(e = new_expr(p, E_STR, TOK.loc))) return nomem(p);
    if (!(e->s = dpc_arena_strndup(&p->ar, TOK.str, TOK.str_len))) return nomem(p);
    e->n = TOK.str_len;
    *out = e;
    return next(p);
  case DPC_T_IDENT:
    if (!TOK.quoted && is_keyword(TOK.start, TOK.len))
      return err(p, TOK.loc, "'%.*s' is a keyword, not a value", (int)TOK.len, TOK.start);
    if (!(e = new_expr(p, E_NAME, TOK.loc))) return nomem(p);
    e->s = TOK.start;
    e->n = TOK.len;
    if ((st = next(p))) return st;
    if (TOK.kind == DPC_T_LPAREN) {
      e->k = E_CALL;
      if ((st = parse_call_args(p, e))) return st;
    }
    *out = e;
    return DPC_OK;
  case DPC_T_LPAREN: {
    dpc_loc open = TOK.loc;
    if ((st = next(p)) || (st = parse_expr(p, out))) return st;
    if (TOK.kind != DPC_T_RPAREN) {
      if (TOK.kind == DPC_T_EOF) return err(p, open, "'(' is not closed");
      return expected(p, "')'");
    }
    return next(p);
  }
  case DPC_T_LBRACK: return parse_list(p, out);
  default: return expected(p, "an expression");
  }
}

static dpc_status parse_unary(parser *p, expr **out) {
  dpc_status st;
  if ((st = enter(p))) return st;
  if (TOK.kind == DPC_T_MINUS) {
    dpc_loc loc = TOK.loc;
    expr *x;
    if ((st = next(p)) || (st = parse_unary(p, &x))) return st;
    if (x->k == E_NUM) {
      /* -3 is a number, not neg(3); it can only overflow for -(-9223372036854775808) */
      x->ival = -x->ival;
      x->num = -x->num;
      x->loc = loc;
      *out = x;
    } else {
      expr *e = new_expr(p, E_NEG, loc);
      if (!e || !(e->args = dpc_arena_alloc(&p->ar, sizeof *e->args))) return nomem(p);
      e->args[0] = x;
      e->nargs = 1;
      if ((st = set_depth(p, e))) return st;
      *out = e;
    }
  } else if ((st = parse_primary(p, out))) {
    return st;
  }
  p->depth--;
  return DPC_OK;
}

static dpc_status parse_binary(parser *p, expr **out, int level) {
  dpc_status st;
  expr *lhs;
  if ((st = level == 1 ? parse_binary(p, &lhs, 2) : parse_unary(p, &lhs))) return st;
  for (;;) {
    char op = 0;
    if (level == 1 && TOK.kind == DPC_T_PLUS) op = '+';
    if (level == 1 && TOK.kind == DPC_T_MINUS) op = '-';
    if (level == 2 && TOK.kind == DPC_T_STAR) op = '*';
    if (level == 2 && TOK.kind == DPC_T_SLASH) op = '/';
    if (!op) break;
    dpc_loc loc = TOK.loc;
    expr *rhs;
    if ((st = next(p))) return st;
    if ((st = level == 1 ? parse_binary(p, &rhs, 2) : parse_unary(p, &rhs))) return st;
    expr *e = new_expr(p, E_BIN, loc);
    if (!e || !(e->args = dpc_arena_alloc(&p->ar, 2 * sizeof *e->args))) return nomem(p);
    e->op = op;
    e->args[0] = lhs;
    e->args[1] = rhs;
    e->nargs = 2;
    if ((st = set_depth(p, e))) return st;
    lhs = e;
  }
  *out = lhs;
  return DPC_OK;
}

static dpc_status parse_expr(parser *p, expr **out) {
  dpc_status st;
  if ((st = enter(p))) return st;
  if ((st = parse_binary(p, out, 1))) return st;
  p->depth--;
  return DPC_OK;
}

/* ---- attributes ------------------------------------------------------------------------------ */

static const char *ekind_name(const expr *e) {
  switch (e->k) {
  case E_NUM: return e->is_int ? "an integer" : "a number";
  case E_NAME: return "a name";
  case E_STR: return "a string";
  case E_LIST: return "a list";
  default: return "an expression";
  }
}

static dpc_status bad_attr(parser *p, const kwarg *kw, const char *what, const dpc_attr_spec *sp,
                           const char *want) {
  return err_st(p, DPC_ERR_INVALID, kw->val->loc, "%s: '%s' must be %s, got %s", what, sp->name,
                want, ekind_name(kw->val));
}

/* Nested list of numbers as a tensor: shape from the nesting, values row-major. */
typedef struct tensor_lit {
  dpc_shape shape;
  double *data;
  uint32_t n, cap;
  bool all_int;
} tensor_lit;

static dpc_status tensor_walk(parser *p, const expr *e, uint32_t level, tensor_lit *t) {
  if (e->k == E_NUM) {
    if (level != t->shape.rank)
      return err(p, e->loc,
                 "the nested list is not rectangular: a number where a list was expected");
    if (DPC_VEC_RESERVE(t->data, t->cap, t->n + 1)) return nomem(p);
    t->data[t->n++] = e->num;
    if (!e->is_int) t->all_int = false;
    return DPC_OK;
  }
  if (e->k != E_LIST)
    return err(p, e->loc, "a tensor value holds numbers and lists, not %s", ekind_name(e));
  if (level >= t->shape.rank) {
    if (level >= DPC_MAX_RANK)
      return err(p, e->loc, "a tensor has at most %d dimensions", DPC_MAX_RANK);
    if (level > t->shape.rank || t->n > 0)
      return err(p, e->loc,
                 "the nested list is not rectangular: a list where a number was expected");
    t->shape.d[t->shape.rank++] = e->nargs;
  } else if (t->shape.d[level] != e->nargs) {
    return err(p, e->loc,
               "the nested list is not rectangular: %u entries where an earlier list had %lld",
               e->nargs, (long long)t->shape.d[level]);
  }
  for (uint32_t i = 0; i < e->nargs; i++) {
    dpc_status st = tensor_walk(p, e->args[i], level + 1, t);
    if (st) return st;
  }
  /* An empty list at the innermost level fixes the rank there. */
  return DPC_OK;
}

static dpc_status check_number_fits(parser *p, dpc_loc loc, double v, dpc_dtype t) {
  if (dpc_dtype_is_int(t) || t == DPC_BOOL) {
    if (!(v == floor(v)) || isinf(v))
      return err_st(p, DPC_ERR_INVALID, loc,
                    "%g is not a whole number, but the values beside it are %s", v,
                    dpc_dtype_name(t));
    if (t == DPC_BOOL && v != 0 && v != 1)
      return err_st(p, DPC_ERR_INVALID, loc, "a bool value must be 0 or 1, got %g", v);
    if (t == DPC_I32 && (v < -2147483648.0 || v > 2147483647.0))
      return err_st(p, DPC_ERR_INVALID, loc, "%g does not fit in i32", v);
  }
  return DPC_OK;
}

static dpc_status push_tensor(parser *p, const char *name, const expr *e, dpc_dtype t) {
  tensor_lit lit = {.all_int = true};
  dpc_status st = tensor_walk(p, e, 0, &lit);
  if (!st) {
    for (uint32_t i = 0; i < lit.n && !st; i++) st = check_number_fits(p, e->loc, lit.data[i], t);
  }
  if (!st && dpc_graph_attr_tensor(p->g, name, t, &lit.shape, lit.data)) st = nomem(p);
  free(lit.data);
  return st;
}

/* Convert one keyword argument to an attribute of the given spec and append it to the graph. */
static dpc_status push_attr(parser *p, const char *what, const char *specs, const kwarg *kw) {
  char name[40];
  dpc_attr_spec sp;
  if (kw->len >= sizeof name || (snprintf(name, sizeof name, "%.*s", (int)kw->len, kw->name),
                                 !dpc_spec_find(specs, name, &sp))) {
    if (!*specs)
      return err_st(p, DPC_ERR_INVALID, kw->loc, "%s takes no attributes, got '%.*s'", what,
                    (int)(kw->len > 64 ? 64 : kw->len), kw->name);
    /* did you mean? */
    const char *best = NULL;
    uint32_t bd = 3, n = dpc_spec_count(specs);
    dpc_attr_spec cand[64];
    for (uint32_t i = 0; i < n && i < 64; i++) {
      dpc_spec_at(specs, i, &cand[i]);
      if (kw->len < sizeof name) {
        uint32_t dd = dpc_edit_distance(name, cand[i].name);
        if (dd < bd) bd = dd, best = cand[i].name;
      }
    }
    dpc_buf list = {0};
    for (uint32_t i = 0; i < n && i < 64; i++)
      dpc_buf_printf(&list, "%s%s", i ? ", " : "", cand[i].name);
    dpc_status st;
    if (best)
      st = err_st(p, DPC_ERR_INVALID, kw->loc, "%s has no attribute '%.*s'; did you mean '%s'?",
                  what, (int)(kw->len > 64 ? 64 : kw->len), kw->name, best);
    else
      st = err_st(p, DPC_ERR_INVALID, kw->loc, "%s has no attribute '%.*s' (it takes: %s)", what,
                  (int)(kw->len > 64 ? 64 : kw->len), kw->name, list.data ? list.data : "");
    dpc_buf_free(&list);
    return st;
  }
  const expr *v = kw->val;
  dpc_graph *g = p->g;
  dpc_status st = DPC_OK;
  switch (sp.kind) {
  case DPC_ATTR_INT:
    if (v->k != E_NUM || !v->is_int) return bad_attr(p, kw, what, &sp, "an integer");
    st = dpc_graph_attr_int(g, name, v->ival);
    break;
  case DPC_ATTR_FLOAT:
    if (v->k != E_NUM) return bad_attr(p, kw, what, &sp, "a number");
    st = dpc_graph_attr_float(g, name, v->num);
    break;
  case DPC_ATTR_STR: {
    if (v->k != E_NAME && v->k != E_STR) return bad_attr(p, kw, what, &sp, "a word or a string");
    char *s = dpc_arena_strndup(&p->ar, v->s, v->n);
    if (!s) return nomem(p);
    st = dpc_graph_attr_str(g, name, s);
    break;
  }
  case DPC_ATTR_DTYPE: {
    dpc_dtype t;
    if (v->k != E_NAME || !dpc_dtype_parse(v->s, v->n, &t))
      return err_st(p, DPC_ERR_INVALID, v->loc,
                    "%s: '%s' must be a dtype (f32, f16, bf16, f64, i32, i64, bool)", what,
                    sp.name);
    st = dpc_graph_attr_dtype(g, name, t);
    break;
  }
  case DPC_ATTR_INTS:
  case DPC_ATTR_FLOATS:
  case DPC_ATTR_SHAPE: {
    bool floats = sp.kind == DPC_ATTR_FLOATS;
    if (v->k == E_NUM && sp.kind == DPC_ATTR_INTS) {
      if (!v->is_int) return bad_attr(p, kw, what, &sp, "an integer or a list of integers");
      st = dpc_graph_attr_int(g, name, v->ival);
      break;
    }
    if (v->k == E_NUM && floats) {
      st = dpc_graph_attr_floats(g, name, &v->num, 1);
      break;
    }
    if (v->k != E_LIST)
      return bad_attr(p, kw, what, &sp, floats ? "a number or a list of numbers" : "a list");
    int64_t *iv = dpc_arena_alloc(&p->ar, (v->nargs + 1) * sizeof *iv);
    double *fv = dpc_arena_alloc(&p->ar, (v->nargs + 1) * sizeof *fv);
    if (!iv || !fv) return nomem(p);
    if (sp.kind == DPC_ATTR_SHAPE && v->nargs > DPC_MAX_RANK)
      return err_st(p, DPC_ERR_INVALID, v->loc, "a shape has at most %d dimensions", DPC_MAX_RANK);
    for (uint32_t i = 0; i < v->nargs; i++) {
      const expr *x = v->args[i];
      if (sp.kind == DPC_ATTR_SHAPE && x->k == E_NAME) {
        uint32_t k = dpc_graph_find_symbol(g, x->s, x->n);
        if (k == DPC_NONE)
          return err_st(p, DPC_ERR_INVALID, x->loc,
                        "unknown dimension '%.*s' (dimensions are named in input declarations)",
                        (int)x->n, x->s);
        iv[i] = DPC_DIM_SYM(k);
        continue;
      }
      if (x->k != E_NUM || (!floats && !x->is_int))
        return err_st(p, DPC_ERR_INVALID, x->loc, "%s: '%s' must hold %s, got %s", what, sp.name,
                      floats                      ? "numbers"
                      : sp.kind == DPC_ATTR_SHAPE ? "integers and dimension names"
                                                  : "integers",
                      ekind_name(x));
      if (sp.kind == DPC_ATTR_SHAPE && x->ival < -1)
        return err_st(p, DPC_ERR_INVALID, x->loc, "%s: a dimension must be >= 0, or -1 to infer it",
                      what);
      iv[i] = x->ival;
      fv[i] = x->num;
    }
    if (floats)
      st = dpc_graph_attr_floats(g, name, fv, v->nargs);
    else if (sp.kind == DPC_ATTR_SHAPE)
      st = dpc_graph_attr_shape(g, name, iv, v->nargs);
    else
      st = dpc_graph_attr_ints(g, name, iv, v->nargs);
    break;
  }
  case DPC_ATTR_TENSOR: return push_tensor(p, name, v, DPC_F32);
  default: return dpc_diag_fail(p->d, DPC_ERR_INTERNAL, "attribute kind %d", (int)sp.kind);
  }
  return st ? nomem(p) : DPC_OK;
}

/* ---- lowering expressions to nodes -------------------------------------------------------------
 */

static dpc_status add_node(parser *p, dpc_op op, const uint32_t *in, uint32_t n_in, uint32_t mark,
                           uint32_t n_out, dpc_loc loc, uint32_t device, uint32_t *node) {
  dpc_node_desc nd = {op, in, n_in, mark, n_out, loc, device};
  return dpc_graph_add_node(p->g, &nd, node, p->d);
}

static dpc_status lower(parser *p, const expr *e, dpc_dtype ctx, uint32_t device, uint32_t *val);

static dpc_status make_scalar(parser *p, const expr *e, dpc_dtype t, uint32_t device,
                              uint32_t *val) {
  dpc_status st = check_number_fits(p, e->loc, e->num, t);
  if (st) return st;
  uint32_t mark = dpc_graph_attr_mark(p->g), node;
  dpc_shape s = {0};
  if (dpc_graph_attr_tensor(p->g, "value", t, &s, &e->num)) return nomem(p);
  if ((st = add_node(p, DPC_OP_CONSTANT, NULL, 0, mark, 1, e->loc, device, &node))) return st;
  *val = p->g->nodes[node].out;
  return DPC_OK;
}

static dpc_status lower_constant(parser *p, const expr *e, uint32_t device, uint32_t *node) {
  if (e->nargs != 1)
    return err_st(p, DPC_ERR_INVALID, e->loc,
                  "constant takes one value (a number or a nested list), got %u", e->nargs);
  dpc_dtype t = DPC_F32;
  for (uint32_t i = 0; i < e->nkw; i++) {
    const kwarg *kw = &e->kw[i];
    if (kw->len != 5 || memcmp(kw->name, "dtype", 5))
      return err_st(p, DPC_ERR_INVALID, kw->loc, "constant takes only 'dtype', got '%.*s'",
                    (int)(kw->len > 64 ? 64 : kw->len), kw->name);
    if (kw->val->k != E_NAME || !dpc_dtype_parse(kw->val->s, kw->val->n, &t))
      return err_st(p, DPC_ERR_INVALID, kw->val->loc,
                    "constant: 'dtype' must be a dtype (f32, f16, bf16, f64, i32, i64, bool)");
  }
  uint32_t mark = dpc_graph_attr_mark(p->g);
  dpc_status st = push_tensor(p, "value", e->args[0], t);
  if (st) return st;
  return add_node(p, DPC_OP_CONSTANT, NULL, 0, mark, 1, e->loc, device, node);
}

/* Lower a call of `op` with positional args and keyword attributes; bare numbers among the
 * args take the dtype of the first argument that is not a bare number (see ir/print.c). */
static dpc_status lower_call(parser *p, dpc_op op, const char *what, expr *const *args,
                             uint32_t nargs, const kwarg *kw, uint32_t nkw, dpc_loc loc,
                             uint32_t n_out, uint32_t device, uint32_t *node) {
  uint32_t small[8], *in = nargs <= 8 ? small : dpc_arena_alloc(&p->ar, nargs * sizeof *in);
  if (!in) return nomem(p);
  dpc_status st;
  dpc_dtype ctx = DPC_F32;
  bool have_ctx = false;
  for (uint32_t i = 0; i < nargs; i++) {
    if (args[i]->k == E_NUM) continue;
    if ((st = lower(p, args[i], DPC_F32, device, &in[i]))) return st;
    if (!have_ctx) ctx = p->g->values[in[i]].dtype, have_ctx = true;
  }
  for (uint32_t i = 0; i < nargs; i++)
    if (args[i]->k == E_NUM && (st = make_scalar(p, args[i], ctx, device, &in[i]))) return st;
  uint32_t mark = dpc_graph_attr_mark(p->g);
  for (uint32_t i = 0; i < nkw; i++) {
    if ((st = push_attr(p, what, dpc_op_get(op)->attrs, &kw[i]))) {
      dpc_graph_attr_reset(p->g, mark);
      return st;
    }
  }
  return add_node(p, op, in, nargs, mark, n_out, loc, device, node);
}

/* Resolve the op a call names, with the language's aliases. */
static dpc_status call_op(parser *p, const expr *e, dpc_op *op) {
  if (e->n == 9 && !memcmp(e->s, "embedding", 9)) {
    *op = DPC_OP_GATHER;
    return DPC_OK;
  }
  if (dpc_op_find(e->s, e->n, op)) {
    if (dpc_op_has(*op, DPC_OPF_SOURCE) && *op != DPC_OP_CONSTANT)
      return err(p, e->loc, "'%s' is a statement (%s NAME: TYPE), not something to call",
                 dpc_op_name(*op), dpc_op_name(*op));
    return DPC_OK;
  }
  char name[DPC_MAX_NAME + 1];
  snprintf(name, sizeof name, "%.*s", (int)e->n, e->s);
  const char *s = dpc_op_suggest(name);
  if (s) return err_st(p, DPC_ERR_INVALID, e->loc, "unknown op '%s'; did you mean '%s'?", name, s);
  return err_st(p, DPC_ERR_INVALID, e->loc, "unknown op '%s' (dpc ops lists them all)", name);
}

static dpc_status lower_node(parser *p, const expr *e, uint32_t n_out, uint32_t device,
                             uint32_t *node) {
  static const dpc_op bin[] = {
      ['+'] = DPC_OP_ADD, ['-'] = DPC_OP_SUB, ['*'] = DPC_OP_MUL, ['/'] = DPC_OP_DIV};
  switch (e->k) {
  case E_BIN: {
    dpc_op op = bin[(unsigned char)e->op];
    return lower_call(p, op, dpc_op_name(op), e->args, 2, NULL, 0, e->loc, n_out, device, node);
  }
  case E_NEG:
    return lower_call(p, DPC_OP_NEG, "neg", e->args, 1, NULL, 0, e->loc, n_out, device, node);
  case E_CALL: {
    dpc_op op;
    dpc_status st = call_op(p, e, &op);
    if (st) return st;
    if (op == DPC_OP_CONSTANT) {
      if (n_out > 1)
        return err_st(p, DPC_ERR_INVALID, e->loc, "constant has 1 output, not %u", n_out);
      return lower_constant(p, e, device, node);
    }
    char what[DPC_MAX_NAME + 1];
    snprintf(what, sizeof what, "%.*s", (int)e->n, e->s);
    return lower_call(p, op, what, e->args, e->nargs, e->kw, e->nkw, e->loc, n_out, device, node);
  }
  default: return dpc_diag_fail(p->d, DPC_ERR_INTERNAL, "lower_node on a leaf");
  }
}

static dpc_status lower(parser *p, const expr *e, dpc_dtype ctx, uint32_t device, uint32_t *val) {
  dpc_status st;
  uint32_t node;
  switch (e->k) {
  case E_NUM: return make_scalar(p, e, ctx, device, val);
  case E_NAME: {
    char name[DPC_MAX_NAME + 1];
    snprintf(name, sizeof name, "%.*s", (int)e->n, e->s);
    *val = dpc_graph_find(p->g, name);
    return *val == DPC_NONE ? undefined(p, e) : DPC_OK;
  }
  case E_STR: return err_st(p, DPC_ERR_INVALID, e->loc, "a string can only be an attribute value");
  case E_LIST:
    return err_st(p, DPC_ERR_INVALID, e->loc,
                  "a list can only be an attribute value; write constant([...]) for a tensor");
  default:
    if ((st = lower_node(p, e, 1, device, &node))) return st;
    if (p->g->nodes[node].n_out != 1)
      return err_st(p, DPC_ERR_INVALID, e->loc, "%s has %u results; name them with 'a, b = ...'",
                    dpc_op_name(p->g->nodes[node].op), p->g->nodes[node].n_out);
    *val = p->g->nodes[node].out;
    return DPC_OK;
  }
}

/* ---- statements ----------------------------------------------------------------------------- */

static dpc_status define(parser *p, uint32_t value, const char *name, size_t n, bool quoted,
                         dpc_loc loc) {
  if (!quoted && n == 1 && name[0] == '_')
    return err(p, loc, "'_' discards a result; it cannot name a value");
  if (!quoted &&
      (is_keyword(name, n) || (n == 3 && (!memcmp(name, "inf", 3) || !memcmp(name, "nan", 3)))))
    return err(p, loc, "'%.*s' is a keyword and cannot name a value", (int)n, name);
  char buf[DPC_MAX_NAME + 1];
  snprintf(buf, sizeof buf, "%.*s", (int)n, name);
  uint32_t other = dpc_graph_find(p->g, buf);
  if (other != DPC_NONE) {
    dpc_loc at = p->g->nodes[p->g->values[other].node].loc;
    return err_st(p, DPC_ERR_INVALID, loc, "'%s' is already defined on line %u", buf, at.line);
  }
  if (dpc_graph_find_symbol(p->g, name, n) != DPC_NONE)
    return err_st(p, DPC_ERR_INVALID, loc, "'%s' already names a dimension", buf);
  return dpc_graph_set_name(p->g, value, name, n, p->d);
}

/* A device name: `cpu`, `cpu:1`, `cuda:0`. */
static dpc_status parse_device_name(parser *p, const char *after, uint32_t *device) {
  dpc_status st;
  if (TOK.kind != DPC_T_IDENT) {
    char what[64];
    snprintf(what, sizeof what, "a device such as cpu:1 after '%s'", after);
    return expected(p, what);
  }
  /* a device is written bare, so a quoted name (which may hold '@' or spaces) is refused */
  if (TOK.quoted)
    return err_st(p, DPC_ERR_INVALID, TOK.loc,
                  "a device name is written without backticks, such as cpu:1");
  char buf[DPC_MAX_NAME + 32];
  int n = snprintf(buf, sizeof buf, "%.*s", (int)TOK.len, TOK.start);
  if ((st = next(p))) return st;
  if (TOK.kind == DPC_T_COLON) {
    if ((st = next(p))) return st;
    if (TOK.kind != DPC_T_INT) return expected(p, "a device number after ':'");
    snprintf(buf + n, sizeof buf - (size_t)n, ":%lld", (long long)TOK.ival);
    if ((st = next(p))) return st;
  }
  *device = dpc_graph_intern(p->g, buf, strlen(buf));
  return *device == DPC_NONE ? nomem(p) : DPC_OK;
}

/* `@ cpu:1` after a statement, or the open block's device. */
static dpc_status parse_placement(parser *p, uint32_t *device) {
  *device = p->block_device;
  if (TOK.kind != DPC_T_AT) return DPC_OK;
  dpc_status st = next(p);
  return st ? st : parse_device_name(p, "@", device);
}

/* Statements are parsed before their placement is known (it comes last), so nodes are placed
 * afterwards: every node made by the statement gets the device. */
static void place_from(parser *p, uint32_t first_node, uint32_t device) {
  for (uint32_t i = first_node; i < p->g->n_nodes; i++) p->g->nodes[i].device = device;
}

static dpc_status parse_type(parser *p, bool allow_symbols, dpc_dtype *t, int64_t *dims,
                             uint32_t *rank) {
  dpc_status st;
  if (TOK.kind != DPC_T_IDENT || !dpc_dtype_parse(TOK.start, TOK.len, t))
    return expected(p, "a dtype (f32, f16, bf16, f64, i32, i64, bool)");
  if ((st = next(p)) || (st = expect(p, DPC_T_LBRACK, "'[' after the dtype"))) return st;
  *rank = 0;
  while (TOK.kind != DPC_T_RBRACK) {
    if (*rank == DPC_MAX_RANK)
      return err_st(p, DPC_ERR_INVALID, TOK.loc, "a shape has at most %d dimensions", DPC_MAX_RANK);
    if (TOK.kind == DPC_T_INT) {
      if (TOK.ival > (INT64_C(1) << 40))
        return err_st(p, DPC_ERR_INVALID, TOK.loc,
                      "dimension %lld is larger than dpc allows (2^40)", (long long)TOK.ival);
      dims[(*rank)++] = TOK.ival;
    } else if (TOK.kind == DPC_T_IDENT && (TOK.quoted || !is_keyword(TOK.start, TOK.len))) {
      if (!allow_symbols)
        return err_st(
            p, DPC_ERR_INVALID, TOK.loc,
            "'%.*s': a param or state needs a concrete shape (only inputs have named dimensions)",
            (int)TOK.len, TOK.start);
      char nm[DPC_MAX_NAME + 1];
      snprintf(nm, sizeof nm, "%.*s", (int)TOK.len, TOK.start);
      if (dpc_graph_find(p->g, nm) != DPC_NONE)
        return err_st(p, DPC_ERR_INVALID, TOK.loc,
                      "'%s' names a value; a dimension needs a name of its own", nm);
      uint32_t k = dpc_graph_symbol(p->g, TOK.start, TOK.len);
      if (k == DPC_NONE) return nomem(p);
      dims[(*rank)++] = DPC_DIM_SYM(k);
    } else {
      return expected(p, "a dimension (a number or a name such as N)");
    }
    if ((st = next(p))) return st;
    if (TOK.kind == DPC_T_COMMA) {
      if ((st = next(p))) return st;
    } else if (TOK.kind != DPC_T_RBRACK) {
      return expected(p, "',' or ']' in the shape");
    }
  }
  return next(p);
}

/* input NAME: TYPE | param NAME: TYPE [= INIT] | state NAME: TYPE [= INIT] */
static dpc_status parse_decl(parser *p, dpc_op op) {
  dpc_status st;
  const char *kwname = dpc_op_name(op);
  if ((st = next(p))) return st;
  if (TOK.kind != DPC_T_IDENT) return expected(p, op == DPC_OP_INPUT ? "an input name" : "a name");
  const char *name = TOK.start;
  size_t nlen = TOK.len;
  dpc_loc nloc = TOK.loc;
  bool quoted = TOK.quoted;
  if (!quoted && is_keyword(name, nlen))
    return err(p, nloc, "'%.*s' is a keyword and cannot name a value", (int)nlen, name);
  if ((st = next(p)) || (st = expect(p, DPC_T_COLON, "':' and a type after the name"))) return st;
  dpc_dtype t = DPC_F32;
  int64_t dims[DPC_MAX_RANK];
  uint32_t rank = 0;
  if ((st = parse_type(p, op == DPC_OP_INPUT, &t, dims, &rank))) return st;
  dpc_graph *g = p->g;
  uint32_t mark = dpc_graph_attr_mark(g);
  if (dpc_graph_attr_dtype(g, "dtype", t) || dpc_graph_attr_shape(g, "shape", dims, rank))
    return nomem(p);
  if (op != DPC_OP_INPUT && TOK.kind == DPC_T_EQ) {
    if ((st = next(p))) return st;
    dpc_loc iloc = TOK.loc;
    expr *e;
    if ((st = parse_expr(p, &e))) return st;
    if (e->k == E_NUM) {
      if (dpc_graph_attr_str(g, "init", "constant") || dpc_graph_attr_float(g, "value", e->num))
        return nomem(p);
    } else if (e->k == E_NAME || e->k == E_CALL) {
      char iname[DPC_MAX_NAME + 1];
      snprintf(iname, sizeof iname, "%.*s", (int)e->n, e->s);
      const dpc_callspec *spec = NULL;
      for (uint32_t i = 0; i < dpc_init_count; i++)
        if (!strcmp(dpc_init_specs[i].name, iname)) spec = &dpc_init_specs[i];
      if (!spec)
        return err_st(
            p, DPC_ERR_INVALID, iloc,
            "unknown initializer '%s' (known: zeros, ones, constant, uniform, normal, "
            "xavier_uniform, xavier_normal, he_uniform, he_normal and the glorot_/kaiming_ "
            "spellings)",
            iname);
      if (dpc_graph_attr_str(g, "init", iname)) return nomem(p);
      uint32_t npos = e->k == E_CALL ? e->nargs : 0;
      if (npos > 1 || (npos == 1 && strcmp(iname, "constant")))
        return err_st(p, DPC_ERR_INVALID, iloc, "%s takes keyword arguments only (such as seed=1)",
                      iname);
      if (npos == 1) {
        if (e->args[0]->k != E_NUM)
          return err_st(p, DPC_ERR_INVALID, e->args[0]->loc, "constant needs a number");
        if (dpc_graph_attr_float(g, "value", e->args[0]->num)) return nomem(p);
      }
      for (uint32_t i = 0; e->k == E_CALL && i < e->nkw; i++)
        if ((st = push_attr(p, iname, spec->attrs, &e->kw[i]))) return st;
      dpc_attr_spec sp;
      if (dpc_spec_find(spec->attrs, "value", &sp) && sp.need == DPC_ATTR_REQUIRED &&
          !dpc_attrs_get((dpc_attrs){g, mark, g->n_attrs - mark, dpc_op_get(op)->attrs}, "value"))
        return err_st(p, DPC_ERR_INVALID, iloc, "constant needs a value: constant(0.1)");
    } else {
      return err_st(p, DPC_ERR_INVALID, iloc,
                    "an initializer is a name such as zeros or he_normal(seed=1), or a number");
    }
  }
  uint32_t device, node, first = g->n_nodes;
  if ((st = parse_placement(p, &device))) return st;
  if ((st = add_node(p, op, NULL, 0, mark, 1, nloc, device, &node))) return st;
  (void)kwname;
  place_from(p, first, device);
  return define(p, g->nodes[node].out, name, nlen, quoted, nloc);
}

/* NAME {, NAME} = EXPR [@ device] */
static dpc_status parse_assign(parser *p) {
  dpc_status st;
  struct {
    const char *s;
    size_t n;
    dpc_loc loc;
    bool quoted;
  } tg[64];
  uint32_t nt = 0;
  for (;;) {
    if (TOK.kind != DPC_T_IDENT) return expected(p, "a name to assign to");
    if (nt == 64) return err(p, TOK.loc, "more than 64 names on the left of '='");
    tg[nt].s = TOK.start;
    tg[nt].n = TOK.len;
    tg[nt].quoted = TOK.quoted;
    tg[nt++].loc = TOK.loc;
    if ((st = next(p))) return st;
    if (TOK.kind == DPC_T_COMMA) {
      if ((st = next(p))) return st;
      continue;
    }
    if (TOK.kind == DPC_T_EQ) break;
    if (nt == 1)
      return expected(p, "'=' after the name (statements are: model, input, param, state, NAME = "
                         "expression, output, update, minimize, device)");
    return expected(p, "',' or '='");
  }
  if ((st = next(p))) return st;
  expr *e;
  if ((st = parse_expr(p, &e))) return st;
  uint32_t device, first = p->g->n_nodes, node;
  if ((st = parse_placement(p, &device))) return st;
  if (e->k == E_NAME)
    return err_st(p, DPC_ERR_INVALID, tg[0].loc,
                  "'%.*s = %.*s' only gives a value a second name; use %.*s", (int)tg[0].n, tg[0].s,
                  (int)e->n, e->s, (int)e->n, e->s);
  if (e->k == E_NUM) {
    if (nt != 1) return err_st(p, DPC_ERR_INVALID, e->loc, "a number is one value, not %u", nt);
    uint32_t v;
    if ((st = make_scalar(p, e, DPC_F32, device, &v))) return st;
    place_from(p, first, device);
    if (tg[0].n == 1 && tg[0].s[0] == '_') return DPC_OK; /* `_ = 2`: discarded */
    return define(p, v, tg[0].s, tg[0].n, tg[0].quoted, tg[0].loc);
  }
  if (e->k == E_STR || e->k == E_LIST) {
    uint32_t v;
    return lower(p, e, DPC_F32, device, &v); /* reports the error */
  }
  if (nt > 1 && e->k != E_CALL)
    return err_st(p, DPC_ERR_INVALID, tg[1].loc, "only a call can give several results");
  /* A single name on an op with several outputs binds the first. */
  uint32_t n_out = nt > 1 ? nt : 0;
  if (e->k == E_CALL && nt == 1) {
    dpc_op op;
    if (!call_op(p, e, &op) && dpc_op_num_outputs(op) == 0) n_out = 1;
    dpc_diag_clear(p->d);
  }
  if ((st = lower_node(p, e, n_out, device, &node))) return st;
  place_from(p, first, device);
  const dpc_node *n = &p->g->nodes[node];
  if (nt > 1 && n->n_out != nt)
    return err_st(p, DPC_ERR_INVALID, e->loc, "%s gives %u results, but %u names are assigned",
                  dpc_op_name(n->op), n->n_out, nt);
  for (uint32_t i = 0; i < nt; i++) {
    if (tg[i].n == 1 && tg[i].s[0] == '_') continue;
    for (uint32_t j = 0; j < i; j++)
      if (tg[j].n == tg[i].n && !memcmp(tg[j].s, tg[i].s, tg[i].n))
        return err_st(p, DPC_ERR_INVALID, tg[i].loc, "'%.*s' is assigned twice", (int)tg[i].n,
                      tg[i].s);
    if ((st = define(p, n->out + i, tg[i].s, tg[i].n, tg[i].quoted, tg[i].loc))) return st;
  }
  return DPC_OK;
}

static dpc_status lookup(parser *p, uint32_t *val) {
  if (TOK.kind != DPC_T_IDENT) return expected(p, "a name");
  expr e = {.k = E_NAME, .loc = TOK.loc, .s = TOK.start, .n = TOK.len};
  char name[DPC_MAX_NAME + 1];
  snprintf(name, sizeof name, "%.*s", (int)TOK.len, TOK.start);
  *val = dpc_graph_find(p->g, name);
  if (*val == DPC_NONE) return undefined(p, &e);
  return next(p);
}

static dpc_status parse_output(parser *p) {
  dpc_status st = next(p);
  if (st) return st;
  for (;;) {
    uint32_t v;
    dpc_loc loc = TOK.loc;
    if ((st = lookup(p, &v))) return st;
    for (uint32_t i = 0; i < p->g->n_outputs; i++)
      if (p->g->outputs[i] == v)
        return err_st(p, DPC_ERR_INVALID, loc, "this value is already an output");
    if ((st = dpc_graph_add_output(p->g, v, p->d))) return st;
    if (TOK.kind != DPC_T_COMMA) return DPC_OK;
    if ((st = next(p))) return st;
  }
}

static dpc_status parse_minimize(parser *p) {
  dpc_loc loc = TOK.loc;
  dpc_status st = next(p);
  uint32_t loss;
  if (st || (st = lookup(p, &loss))) return st;
  if (!tok_is(p, "with"))
    return expected(p, "'with' and an optimizer, as in: minimize loss with sgd(lr=0.1)");
  if ((st = next(p))) return st;
  if (TOK.kind != DPC_T_IDENT) return expected(p, "an optimizer (sgd, adam, adamw)");
  char opt[DPC_MAX_NAME + 1];
  snprintf(opt, sizeof opt, "%.*s", (int)TOK.len, TOK.start);
  dpc_loc oloc = TOK.loc;
  const dpc_callspec *spec = NULL;
  for (uint32_t i = 0; i < dpc_optimizer_count; i++)
    if (!strcmp(dpc_optimizer_specs[i].name, opt)) spec = &dpc_optimizer_specs[i];
  if (!spec)
    return err_st(p, DPC_ERR_INVALID, oloc, "unknown optimizer '%s' (known: sgd, adam, adamw)",
                  opt);
  expr call = {.k = E_CALL, .loc = oloc};
  if ((st = next(p))) return st;
  if (TOK.kind == DPC_T_LPAREN && (st = parse_call_args(p, &call))) return st;
  if (call.nargs)
    return err_st(p, DPC_ERR_INVALID, call.args[0]->loc, "%s takes keyword settings only (lr=0.1)",
                  opt);
  uint32_t mark = dpc_graph_attr_mark(p->g);
  for (uint32_t i = 0; i < call.nkw; i++)
    if ((st = push_attr(p, opt, spec->attrs, &call.kw[i]))) return st;
  (void)loc;
  return dpc_graph_set_objective(p->g, loss, opt, mark, loc, p->d);
}

static dpc_status parse_update(parser *p) {
  dpc_loc loc = TOK.loc;
  dpc_status st = next(p);
  uint32_t target, value;
  if (st || (st = lookup(p, &target))) return st;
  if ((st = expect(p, DPC_T_EQ, "'=' after the updated name"))) return st;
  expr *e;
  if ((st = parse_expr(p, &e))) return st;
  uint32_t device, first = p->g->n_nodes;
  if ((st = parse_placement(p, &device))) return st;
  if ((st = lower(p, e, p->g->values[target].dtype, device, &value))) return st;
  place_from(p, first, device);
  return dpc_graph_add_update(p->g, target, value, loc, p->d);
}

static dpc_status parse_device_block(parser *p) {
  dpc_loc loc = TOK.loc;
  if (p->block_device != DPC_NONE)
    return err(p, loc, "device blocks do not nest (the block at %u:%u is still open)",
               p->block_loc.line, p->block_loc.col);
  uint32_t device;
  dpc_status st = next(p);
  if (st || (st = parse_device_name(p, "device", &device))) return st;
  if ((st = expect(p, DPC_T_LBRACE, "'{' to open the device block"))) return st;
  if (TOK.kind != DPC_T_NEWLINE) return expected(p, "a new line after '{'");
  p->block_device = device;
  p->block_loc = loc;
  return DPC_OK;
}

static dpc_status parse_statement(parser *p) {
  dpc_status st;
  /* `output = ...`: a keyword used as a name reads better as that than as a syntax error. */
  if (TOK.kind == DPC_T_IDENT && !TOK.quoted && is_keyword(TOK.start, TOK.len)) {
    dpc_lexer save = p->lx;
    dpc_loc kloc = TOK.loc;
    const char *kw = TOK.start;
    int kn = (int)TOK.len;
    if ((st = next(p))) return st;
    bool assign = TOK.kind == DPC_T_EQ || TOK.kind == DPC_T_COMMA;
    free(p->lx.tok.str);
    p->lx = save;
    if (assign) return err(p, kloc, "'%.*s' is a keyword and cannot name a value", kn, kw);
  }
  if (tok_is(p, "model")) {
    dpc_loc loc = TOK.loc;
    if (p->g->name != DPC_NONE)
      return err_st(p, DPC_ERR_INVALID, loc, "the model is already named at %u:%u",
                    p->model_loc.line, p->model_loc.col);
    if ((st = next(p))) return st;
    if (TOK.kind != DPC_T_IDENT || (!TOK.quoted && is_keyword(TOK.start, TOK.len)))
      return expected(p, "the model's name");
    if ((p->g->name = dpc_graph_intern(p->g, TOK.start, TOK.len)) == DPC_NONE) return nomem(p);
    p->model_loc = loc;
    return next(p);
  }
  if (tok_is(p, "input")) return parse_decl(p, DPC_OP_INPUT);
  if (tok_is(p, "param")) return parse_decl(p, DPC_OP_PARAM);
  if (tok_is(p, "state")) return parse_decl(p, DPC_OP_STATE);
  if (tok_is(p, "output")) return parse_output(p);
  if (tok_is(p, "minimize")) return parse_minimize(p);
  if (tok_is(p, "update")) return parse_update(p);
  if (tok_is(p, "device")) return parse_device_block(p);
  if (tok_is(p, "with"))
    return err(p, TOK.loc, "'with' belongs in: minimize LOSS with OPTIMIZER(...)");
  if (TOK.kind == DPC_T_IDENT) return parse_assign(p);
  return expected(p, "a statement (model, input, param, state, NAME = expression, output, update, "
                     "minimize, device)");
}

static dpc_status parse_all(parser *p) {
  dpc_status st = next(p);
  if (st) return st;
  for (;;) {
    while (TOK.kind == DPC_T_NEWLINE)
      if ((st = next(p))) return st;
    if (TOK.kind == DPC_T_EOF) break;
    if (TOK.kind == DPC_T_RBRACE) {
      if (p->block_device == DPC_NONE) return err(p, TOK.loc, "'}' without an open device block");
      p->block_device = DPC_NONE;
      if ((st = next(p))) return st;
    } else {
      p->depth = 0;
      st = parse_statement(p);
      dpc_arena_free(&p->ar);
      if (st) return st;
    }
    if (TOK.kind != DPC_T_NEWLINE && TOK.kind != DPC_T_EOF) {
      if (TOK.kind == DPC_T_RPAREN || TOK.kind == DPC_T_RBRACK)
        return err(p, TOK.loc, "'%c' without a matching opening bracket", TOK.start[0]);
      return expected(p, "the end of the statement");
    }
  }
  if (p->block_device != DPC_NONE)
    return err(p, p->block_loc, "this device block is not closed with '}'");
  /* an empty file would compile to an empty artifact that computes nothing */
  if (!p->g->n_nodes)
    return err(p, (dpc_loc){1, 1},
               "no model here: the file defines no input, param or value (see "
               "docs/graph-format.md)");
  return DPC_OK;
}

dpc_status dpc_parse_graph(const char *name, const char *text, size_t len, dpc_graph **out,
                           dpc_diag *d) {
  *out = NULL;
  parser p = {0};
  p.d = d;
  p.block_device = DPC_NONE;
  p.g = dpc_graph_new();
  if (!p.g) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  dpc_status st = dpc_graph_set_source(p.g, name, text, len, d);
  if (st) {
    dpc_graph_free(p.g);
    return st;
  }
  p.src = dpc_graph_source(p.g);
  dpc_arena_init(&p.ar);
  dpc_lex_init(&p.lx, p.src, d);
  st = parse_all(&p);
  dpc_lex_free(&p.lx);
  dpc_arena_free(&p.ar);
  if (st) {
    if (d && d->status == DPC_OK) dpc_diag_fail(d, st, "parse failed");
    dpc_graph_free(p.g);
    return st;
  }
  *out = p.g;
  return DPC_OK;
}

dpc_status dpc_read_file(const char *path, char **data, size_t *len, dpc_diag *d) {
  *data = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return dpc_diag_fail(d, DPC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 65536 + 1 > cap) {
      size_t nc = cap ? cap * 2 : 65536 * 2;
      char *b = realloc(buf, nc);
      if (!b) {
        free(buf);
        fclose(f);
        return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory reading '%s'", path);
      }
      buf = b;
      cap = nc;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  int e = errno;
  fclose(f);
  if (bad) {
    free(buf);
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot read '%s': %s", path, strerror(e));
  }
  buf[n] = 0;
  *data = buf;
  *len = n;
  return DPC_OK;
}

dpc_status dpc_parse_file(const char *path, dpc_graph **out, dpc_diag *d) {
  char *text;
  size_t len;
  *out = NULL;
  dpc_status st = dpc_read_file(path, &text, &len, d);
  if (st) return st;
  st = dpc_parse_graph(path, text, len, out, d);
  free(text);
  return st;
}
