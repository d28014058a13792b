/*
 * lex.h — tokens of the .graph language.
 *
 * A streaming lexer: it holds one token at a time, so input of any size lexes in constant
 * memory. Newlines end statements except inside ( ) and [ ], where they are skipped so long
 * calls can span lines.
 */
#ifndef DPC_FRONTEND_LEX_H
#define DPC_FRONTEND_LEX_H

#include "ir/base.h"

typedef enum dpc_tok {
  DPC_T_EOF,
  DPC_T_NEWLINE,
  DPC_T_IDENT,
  DPC_T_INT,
  DPC_T_FLOAT,
  DPC_T_STRING,
  DPC_T_LPAREN,
  DPC_T_RPAREN,
  DPC_T_LBRACK,
  DPC_T_RBRACK,
  DPC_T_LBRACE,
  DPC_T_RBRACE,
  DPC_T_COMMA,
  DPC_T_COLON,
  DPC_T_EQ,
  DPC_T_PLUS,
  DPC_T_MINUS,
  DPC_T_STAR,
  DPC_T_SLASH,
  DPC_T_AT,
  DPC_T_ERROR /* the lexer's diag says why */
} dpc_tok;

typedef struct dpc_token {
  dpc_tok kind;
  const char *start; /* into the source text */
  size_t len;
  dpc_loc loc;
  int64_t ival; /* DPC_T_INT */
  double fval;  /* DPC_T_INT and DPC_T_FLOAT */
  char *str;    /* DPC_T_STRING: decoded, malloc'd, owned by the lexer until the next token */
  size_t str_len;
  bool quoted; /* DPC_T_IDENT written `in backticks`: a name even when it spells a keyword */
} dpc_token;

typedef struct dpc_lexer {
  dpc_source src;
  size_t pos;
  dpc_loc loc;
  int nest; /* depth of ( and [ */
  dpc_token tok;
  dpc_diag *d;
} dpc_lexer;

/* Longest identifier, number and string the language accepts. */
#define DPC_MAX_NAME   256
#define DPC_MAX_NUMBER 64
#define DPC_MAX_STRING 4096

void dpc_lex_init(dpc_lexer *lx, dpc_source src, dpc_diag *d);
void dpc_lex_free(dpc_lexer *lx);
/* Advance to the next token (in lx->tok). DPC_T_ERROR leaves the reason in the diag. */
dpc_tok dpc_lex_next(dpc_lexer *lx);
/* A short description of a token for messages: "'foo'", "number 3", "end of line". */
void dpc_tok_describe(const dpc_token *t, char *buf, size_t n);

#endif
