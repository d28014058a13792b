/*
 * frontend.h — reading models into graphs.
 *
 * The .graph language is specified in docs/graph-format.md. Errors come back in the diag with
 * the file, line and column, and the source line for a caret; no input, however malformed,
 * crashes or hangs the parser (tests/fuzz/ runs it under libFuzzer).
 *
 *   dpc_graph *g;
 *   dpc_diag d; dpc_diag_init(&d);
 *   if (dpc_parse_file("examples/fashion_mlp.graph", &g, &d)) { char *m = dpc_diag_render(&d); ...
 * }
 */
#ifndef DPC_FRONTEND_FRONTEND_H
#define DPC_FRONTEND_FRONTEND_H

#include "ir/graph.h"

/* Parse .graph text; `name` is the file name used in messages. On success *out is a new graph
 * (free with dpc_graph_free) that keeps a copy of the text for later messages. */
dpc_status dpc_parse_graph(const char *name, const char *text, size_t len, dpc_graph **out,
                           dpc_diag *d);

/* Read and parse a file. */
dpc_status dpc_parse_file(const char *path, dpc_graph **out, dpc_diag *d);

/* Read a whole file into memory (NUL-terminated; *len excludes the NUL). Caller frees. */
dpc_status dpc_read_file(const char *path, char **data, size_t *len, dpc_diag *d);

/* Deepest nesting of brackets the parser accepts, and the tallest expression tree (chains such
 * as a + b + c count one level per operator). */
#define DPC_MAX_NESTING    200
#define DPC_MAX_EXPR_DEPTH 1000

#endif
