/*
 * fuzz_graph.c — libFuzzer target for the .graph parser.
 *
 * Beyond "does not crash, leak or hang", it checks the parser's promises on every input that
 * parses: the graph verifies, and print -> parse -> print gives the same text. Any broken
 * promise aborts, which libFuzzer reports as a crash with the input that caused it.
 */
#include "frontend/frontend.h"
#include "ir/print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void die(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_graph: %s\n%s\n", what, detail ? detail : "");
  abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g = NULL, *g2 = NULL;
  if (dpc_parse_graph("fuzz.graph", (const char *)data, size, &g, &d) == DPC_OK) {
    if (dpc_verify(g, &d)) die("a parsed graph does not verify", d.msg);
    dpc_buf b1 = {0}, b2 = {0};
    if (dpc_print_graph(g, &b1)) die("printing failed", NULL);
    const char *t1 = b1.data ? b1.data : "";
    if (dpc_parse_graph("printed.graph", t1, strlen(t1), &g2, &d)) {
      char *m = dpc_diag_render(&d);
      fprintf(stderr, "%s\n", t1);
      die("the printed graph does not parse", m);
    }
    /* the text must describe the same graph, not merely print stably: the same symbols, and
     * every named value with the same type (node order may differ: folded subexpressions are
     * rebuilt where they are printed) */
    bool same =
        g->n_nodes == g2->n_nodes && g->n_syms == g2->n_syms && g->n_outputs == g2->n_outputs;
    for (uint32_t k = 0; same && k < g->n_syms; k++)
      same = !strcmp(dpc_graph_str(g, g->syms[k]), dpc_graph_str(g2, g2->syms[k]));
    for (uint32_t v = 0; same && v < g->n_values; v++) {
      if (g->values[v].name == DPC_NONE) continue;
      uint32_t u = dpc_graph_find(g2, dpc_graph_str(g, g->values[v].name));
      same = u != DPC_NONE && g->values[v].dtype == g2->values[u].dtype &&
             dpc_shape_eq(&g->values[v].shape, &g2->values[u].shape) &&
             g->nodes[g->values[v].node].op == g2->nodes[g2->values[u].node].op;
    }
    if (!same) {
      fprintf(stderr, "%s\n", t1);
      die("the printed text describes another graph", NULL);
    }
    if (dpc_print_graph(g2, &b2)) die("printing failed", NULL);
    if (strcmp(t1, b2.data ? b2.data : "")) {
      fprintf(stderr, "first:\n%s\nsecond:\n%s\n", t1, b2.data);
      die("print -> parse -> print changed the text", NULL);
    }
    dpc_buf_free(&b1);
    dpc_buf_free(&b2);
  } else {
    if (d.status == DPC_OK || !d.msg) die("a failed parse left no message", NULL);
    char *m = dpc_diag_render(&d);
    if (!m) die("rendering the error failed", NULL);
    free(m);
  }
  dpc_graph_free(g);
  dpc_graph_free(g2);
  dpc_diag_free(&d);
  return 0;
}
