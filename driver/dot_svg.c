/*
 * dot_svg.c — Graphviz text to SVG for the HTML report (driver/report_html.h), by running
 * Graphviz's `dot` program: libgvc has no development headers on the machines dpc builds on,
 * and the program lays out exactly what `dpc plan --dot` users see. The text goes through
 * files in the temporary folder rather than pipes, so a large picture cannot deadlock the two
 * processes on full pipes.
 */
#include "driver/report_html.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A new empty file in the temporary folder, its name in path (n >= 64). -1 on failure. */
static int temp_file(char *path, size_t n, const char *what) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, n, "%s/dpc-%s-XXXXXX", dir && *dir ? dir : "/tmp", what);
  return mkstemp(path);
}

/* The whole of file `path` (malloc'd, NUL-terminated), or NULL. */
static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      size_t nc = cap ? cap * 2 : 65536;
      char *t = realloc(s, nc);
      if (!t) {
        free(s);
        fclose(f);
        return NULL;
      }
      s = t, cap = nc;
    }
    size_t got = fread(s + n, 1, cap - n - 1, f);
    n += got;
    if (!got) break;
  }
  fclose(f);
  s[n] = 0;
  if (len) *len = n;
  return s;
}

uint32_t dpc_report_dot_nodes(const char *dot) {
  uint32_t n = 0;
  for (const char *p = dot; (p = strstr(p, "shape=")); p++) n++;
  return n;
}

dpc_status dpc_report_dot_svg(const char *dot, size_t len, bool fast, char **svg, dpc_diag *d) {
  *svg = NULL;
  char in[512], out[512], err[512];
  int fi = temp_file(in, sizeof in, "dot"), fo = temp_file(out, sizeof out, "svg"),
      fe = temp_file(err, sizeof err, "err");
  dpc_status st = DPC_OK;
  if (fi < 0 || fo < 0 || fe < 0)
    st = dpc_diag_fail(d, DPC_ERR_IO,
                       "cannot make a temporary file for the placement picture in "
                       "'%s': %s (set TMPDIR to a writable folder)",
                       getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", strerror(errno));
  if (!st && write(fi, dot, len) != (ssize_t)len)
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot write the placement picture's Graphviz text to '%s'",
                       in);
  if (!st) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, in, O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    char *argv[] = {"dot", "-Tsvg", NULL, NULL, NULL, NULL, NULL};
    if (fast) { /* fewer crossing-reduction and ranking passes, straight edges */
      argv[2] = "-Gmclimit=0.3", argv[3] = "-Gnslimit=2", argv[4] = "-Gnslimit1=2";
      argv[5] = "-Gsplines=line";
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, "dot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int ws = 0;
    if (!rc && waitpid(pid, &ws, 0) < 0) rc = errno;
    if (rc == ENOENT || (!rc && WIFEXITED(ws) && WEXITSTATUS(ws) == 127))
      st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "the HTML report draws the placement with Graphviz's dot program, and "
                         "there is no 'dot' on PATH (install graphviz: scripts/setup does)");
    else if (rc)
      st = dpc_diag_fail(d, DPC_ERR_IO, "cannot run Graphviz's dot: %s", strerror(rc));
    else if (!WIFEXITED(ws) || WEXITSTATUS(ws)) {
      char *why = read_all(err, NULL);
      if (why) why[strcspn(why, "\n")] = 0;
      st = dpc_diag_fail(d, DPC_ERR_RUNTIME, "Graphviz's dot could not draw the placement: %s",
                         why && *why ? why : "it failed without saying why");
      free(why);
    }
  }
  if (!st && !(*svg = read_all(out, NULL)))
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot read dot's picture back from '%s'", out);
  if (!st && !strstr(*svg, "<svg")) {
    free(*svg);
    *svg = NULL;
    st = dpc_diag_fail(d, DPC_ERR_RUNTIME, "Graphviz's dot wrote no SVG for the placement");
  }
  if (fi >= 0) close(fi), unlink(in);
  if (fo >= 0) close(fo), unlink(out);
  if (fe >= 0) close(fe), unlink(err);
  return st;
}
