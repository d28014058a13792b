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
