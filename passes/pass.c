/*
 * pass.c — runs the ordered pass list with --verify-each and --print-after.
 */
#include "passes/pass.h"
#include "ir/print.h"

#include <string.h>

typedef struct pass_row {
  const char *name;
  dpc_pass_fn fn;
  int modes;
} pass_row;

static const pass_row passes[] = {
#define DPC_PASS(name, fn, modes, why) {#name, fn, modes},
#include "passes/passes.def"
#undef DPC_PASS
};

#define NPASSES (sizeof passes / sizeof passes[0])

uint32_t dpc_pass_count(void) {
  return (uint32_t)NPASSES;
}

const char *dpc_pass_name(uint32_t i) {
  return i < NPASSES ? passes[i].name : NULL;
}

/* Is `name` in the comma-separated list (or is the list "all")? */
static bool listed(const char *list, const char *name) {
  if (!list) return false;
  if (!strcmp(list, "all")) return true;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !memcmp(p, name, n)) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

dpc_status dpc_passes_check_names(const char *list, dpc_diag *d) {
  if (!list || !strcmp(list, "all")) return DPC_OK;
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    bool found = false;
    for (size_t i = 0; i < NPASSES && !found; i++)
      found = strlen(passes[i].name) == len && !memcmp(passes[i].name, p, len);
    if (!found) {
      dpc_buf b = {0};
      for (size_t i = 0; i < NPASSES; i++)
        dpc_buf_printf(&b, "%s%s", i ? ", " : "", passes[i].name);
      dpc_diag_fail(d, DPC_ERR_INVALID, "unknown pass '%.*s' (passes: %s, or all)", (int)len, p,
                    b.data ? b.data : "");
      dpc_buf_free(&b);
      return DPC_ERR_INVALID;
    }
    if (!e) break;
    p = e + 1;
  }
  return DPC_OK;
}

dpc_status dpc_passes_run(dpc_graph *g, const dpc_pass_opts *o, dpc_diag *d) {
  int mode = o->training ? DPC_PIPE_TRAIN : DPC_PIPE_INFER;
  dpc_status st = dpc_passes_check_names(o->print_after, d);
  if (st) return st;
  for (size_t i = 0; i < NPASSES; i++) {
    if (!(passes[i].modes & mode)) continue;
    if ((st = passes[i].fn(g, o, d))) {
      dpc_diag_prefix(d, "in pass '%s': ", passes[i].name);
      return st;
    }
    if (o->verify_each && (st = dpc_verify(g, d))) {
      dpc_diag_prefix(d, "after pass '%s': ", passes[i].name);
      return st;
    }
    if (o->dump && listed(o->print_after, passes[i].name)) {
      dpc_buf b = {0};
      if (dpc_print_graph(g, &b)) {
        dpc_buf_free(&b);
        return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory printing the graph");
      }
      o->dump(o->user, passes[i].name, b.data ? b.data : "");
      dpc_buf_free(&b);
    }
  }
  return DPC_OK;
}
