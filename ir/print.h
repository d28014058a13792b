/*
 * print.h — a graph as `.graph` text, and the verifier.
 *
 * The printer writes the canonical form of a graph: one statement per named value, anonymous
 * single-use subexpressions folded back into the expression that uses them, attributes as
 * given. Parsing the text gives the same graph, and printing that gives the same text
 * (docs/graph-format.md, "Canonical form").
 */
#ifndef DPC_IR_PRINT_H
#define DPC_IR_PRINT_H

#include "ir/graph.h"

/* The canonical text of g, appended to out. DPC_ERR_NOMEM is the only failure. */
dpc_status dpc_print_graph(const dpc_graph *g, dpc_buf *out);
/* The same, but a tensor of more than 2 * `elide` values (0: no limit) shows its first `elide` and
 * a count, `<0.1, 0.2, ... 1000 values>`: for reading imported weights' shapes, not parseable. */
dpc_status dpc_print_graph_brief(const dpc_graph *g, uint32_t elide, dpc_buf *out);

/* True for names the .graph language accepts as identifiers (and that are not keywords). */
bool dpc_is_identifier(const char *s);

/* Check every invariant of a graph: topological order, arity and attributes against the op
 * table, consistent names, and that each node's output types are what its shape rule says.
 * The first problem found is reported with the node it concerns. */
dpc_status dpc_verify(const dpc_graph *g, dpc_diag *d);

#endif
