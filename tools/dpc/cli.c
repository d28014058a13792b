/*
 * cli.c — option parsing and error reporting for the dpc command.
 */
#include "tools/dpc/cli.h"

#include <stdarg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int find_opt(const cli_opt *opts, int nopts, const char *name, size_t n) {
  for (int i = 0; i < nopts; i++)
    if (strlen(opts[i].name) == n && !strncmp(opts[i].name, name, n)) return i;
  return -1;
}

bool cli_parse(const char *cmd, const cli_opt *opts, int nopts, int argc, char **argv, int first,
               cli_parsed *out) {
  memset(out, 0, sizeof *out);
  out->pos = (const char **)argv + (first < argc ? first : argc);
  if (nopts > CLI_MAX_OPTS) { /* a programming error: the table outgrew the parser */
    fprintf(stderr, "dpc %s: internal error: %d options, at most %d\n", cmd, nopts, CLI_MAX_OPTS);
    return false;
  }
  bool only_pos = false;
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (!only_pos && !strcmp(a, "--")) {
      only_pos = true;
      continue;
    }
    if (!only_pos && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
      out->help = true;
      continue;
    }
    if (!only_pos && a[0] == '-' && a[1] == '-') {
      const char *name = a + 2, *eq = strchr(name, '=');
      size_t n = eq ? (size_t)(eq - name) : strlen(name);
      int k = find_opt(opts, nopts, name, n);
      if (k < 0) {
        cli_usage_error(cmd, "unknown option '--%.*s' (see dpc %s --help)", (int)n, name, cmd);
        return false;
      }
      const char *val = NULL;
      if (opts[k].takes_value) {
        if (eq)
          val = eq + 1;
        else if (i + 1 < argc)
          val = argv[++i];
        else {
          cli_usage_error(cmd, "option '--%s' needs a value", opts[k].name);
          return false;
        }
      } else if (eq) {
        cli_usage_error(cmd, "option '--%s' takes no value", opts[k].name);
        return false;
      } else {
        val = "1";
      }
      if (out->count[k] >= CLI_MAX_VALUES) {
        cli_usage_error(cmd, "option '--%s' given too many times", opts[k].name);
        return false;
      }
      if (!opts[k].repeat) out->count[k] = 0;
      out->values[k][out->count[k]++] = val;
      continue;
    }
    if (!only_pos && !strcmp(a, "-o") && find_opt(opts, nopts, "output", 6) >= 0) {
      /* -o FILE: the one short option, for --output as compilers spell it */
      if (i + 1 >= argc) {
        cli_usage_error(cmd, "option '-o' needs a value");
        return false;
      }
      int k = find_opt(opts, nopts, "output", 6);
      out->count[k] = 0;
      out->values[k][out->count[k]++] = argv[++i];
      continue;
    }
    if (!only_pos && a[0] == '-' && a[1] != 0) {
      cli_usage_error(cmd, "unknown option '%s' (see dpc %s --help)", a, cmd);
      return false;
    }
    /* slot first + npos was read already (npos <= i - first): the positionals gather there */
    argv[first + out->npos++] = (char *)a;
  }
  out->pos = (const char **)argv + first;
  return true;
}

const char *cli_get(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name) {
  int k = find_opt(opts, nopts, name, strlen(name));
  return k >= 0 && p->count[k] ? p->values[k][p->count[k] - 1] : NULL;
}

int cli_count(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name) {
  int k = find_opt(opts, nopts, name, strlen(name));
  return k >= 0 ? p->count[k] : 0;
}

const char *cli_value(const cli_opt *opts, int nopts, const cli_parsed *p, const char *name,
                      int i) {
  int k = find_opt(opts, nopts, name, strlen(name));
  return k >= 0 && i < p->count[k] ? p->values[k][i] : NULL;
}

void cli_print_options(const cli_opt *opts, int nopts) {
  printf("\nOptions:\n");
  for (int i = 0; i < nopts; i++) {
    if (!opts[i].help[0]) continue;
    char left[64];
    snprintf(left, sizeof left, "--%s%s", opts[i].name, opts[i].takes_value ? "=VALUE" : "");
    printf("  %-26s %s\n", left, opts[i].help);
  }
  printf("  %-26s %s\n", "--help", "show this help");
}

static bool is_one_of(const char *v, const char *const *names) {
  for (; *names; names++)
    if (!strcmp(v, *names)) return true;
  return false;
}

int cli_schedules(const char *cmd, const cli_opt *opts, int nopts, const cli_parsed *p,
                  const char **lr, dpc_pipeline_schedule *pipe) {
  static const char *const lr_kinds[] = {"constant", "step", "cosine", "linear", NULL};
  static const char *const pipe_kinds[] = {"gpipe", "1f1b", NULL};
  const char *l = cli_get(opts, nopts, p, "lr-schedule");
  const char *q = cli_get(opts, nopts, p, "pipeline-schedule");
  const char *old = cli_get(opts, nopts, p, "schedule");
  if (old) {
    bool is_pipe = is_one_of(old, pipe_kinds);
    if (!is_pipe && !is_one_of(old, lr_kinds))
      return cli_usage_error(cmd,
                             "--schedule %s: neither a learning-rate schedule (--lr-schedule "
                             "constant, step, cosine or linear) nor a pipeline order "
                             "(--pipeline-schedule gpipe or 1f1b)",
                             old);
    const char *now = is_pipe ? "--pipeline-schedule" : "--lr-schedule";
    if (is_pipe ? q != NULL : l != NULL)
      return cli_usage_error(cmd, "--schedule %s and %s both given: use %s alone", old, now, now);
    fprintf(stderr, "dpc %s: note: --schedule is deprecated; this is %s %s\n", cmd, now, old);
    if (is_pipe)
      q = old;
    else
      l = old;
  }
  if (l && !is_one_of(l, lr_kinds))
    return cli_usage_error(cmd, "--lr-schedule is constant, step, cosine or linear, not '%s'", l);
  if (l && !lr)
    return cli_usage_error(cmd,
                           "--lr-schedule %s: dpc %s takes no learning-rate schedule (the "
                           "model's applies)",
                           l, cmd);
  if (q && !is_one_of(q, pipe_kinds))
    return cli_usage_error(cmd, "--pipeline-schedule is gpipe or 1f1b, not '%s'", q);
  if (lr) *lr = l;
  *pipe = !q ? DPC_SCHEDULE_NONE : !strcmp(q, "gpipe") ? DPC_SCHEDULE_GPIPE : DPC_SCHEDULE_1F1B;
  return DPC_EXIT_OK;
}

int cli_devices_or_gpus(const char *cmd, const char *spec, const char *backend, uint32_t *n) {
  bool cuda = backend && !strcmp(backend, "cuda");
  bool mixed = false; /* the host's CPU, then the GPUs */
  const char *gpus = dpc_devices_gpus(spec, &mixed);
  if (cuda && !gpus && strcmp(spec, "cpu") && strcmp(spec, "cpu:1"))
    return cli_usage_error(cmd,
                           "--devices %s: with --backend cuda the devices are GPUs: cuda:0, "
                           "or cuda:0,cuda:1,... to train across them, or cpu,cuda:0,... with "
                           "the CPU beside them",
                           spec);
  if (!gpus) return cli_devices(cmd, spec, n);
  if (!cuda)
    return cli_usage_error(cmd,
                           "--devices %s: GPUs run the cuda backend's kernels: add "
                           "--backend cuda",
                           spec);
  dpc_message *m = dpc_message_new();
  int rc = dpc_gpus_count(gpus, n, m) ? cli_usage_error(cmd, "--devices %s", dpc_message_brief(m))
                                      : DPC_EXIT_OK;
  if (!rc && mixed) ++*n;
  dpc_message_free(m);
  return rc;
}

int cli_devices(const char *cmd, const char *spec, uint32_t *n) {
  dpc_message *m = dpc_message_new();
  int rc = DPC_EXIT_OK;
  if (dpc_devices_count(spec, n, m)) {
    dpc_status st = dpc_message_status(m);
    rc = st == DPC_ERR_INVALID || st == DPC_ERR_UNSUPPORTED
             ? cli_usage_error(cmd, "--devices %s", m ? dpc_message_brief(m) : spec)
             : cli_report(cmd, m); /* the machine's topology could not be read */
  }
  dpc_message_free(m);
  return rc;
}

static void dump_llvm(void *user, const char *what, const char *text) {
  (void)user;
  fprintf(stderr, "; ---- %s ----\n%s\n", what, text);
}

int cli_build_opts(const char *cmd, const cli_opt *opts, int nopts, const cli_parsed *p,
                   dpc_build_opts *b) {
  memset(b, 0, sizeof *b);
  b->size = sizeof *b;
  b->backend = cli_get(opts, nopts, p, "backend");
  /* the library's table decides which names exist, and words the failure */
  if (b->backend) {
    dpc_build_opts only = {sizeof only, .backend = b->backend};
    dpc_message *m = dpc_message_new();
    int rc = dpc_build_opts_check(&only, m)
                 ? cli_usage_error(cmd, "--backend: %s", dpc_message_brief(m))
                 : DPC_EXIT_OK;
    dpc_message_free(m);
    if (rc) return rc;
  }
  b->cuda_arch = cli_get(opts, nopts, p, "cuda-arch");
  b->precision = cli_get(opts, nopts, p, "precision");
  /* each alone, so the message names the flag at fault */
  for (int which = 0; which < 2; which++) {
    const char *v = which ? b->precision : b->cuda_arch;
    if (!v) continue;
    dpc_build_opts only = {sizeof only, .backend = b->backend};
    if (which)
      only.precision = v;
    else
      only.cuda_arch = v;
    dpc_message *m = dpc_message_new();
    int rc = dpc_build_opts_check(&only, m)
                 ? cli_usage_error(cmd, "--%s: %s", which ? "precision" : "cuda-arch",
                                   dpc_message_brief(m))
                 : DPC_EXIT_OK;
    dpc_message_free(m);
    if (rc) return rc;
  }
  if (cli_get(opts, nopts, p, "dump-llvm")) b->on_llvm = dump_llvm;
  b->verify_each = cli_get(opts, nopts, p, "verify-each") != NULL;
  b->print_after = cli_get(opts, nopts, p, "print-after");
  if (b->print_after) b->on_dump = cli_print_dump;
  return DPC_EXIT_OK;
}

void cli_print_dump(void *user, const char *pass, const char *text) {
  FILE *f = user ? (FILE *)user : stdout;
  fprintf(f, "# ---- after %s ----\n%s", pass, text);
  fflush(f);
}

dpc_status cli_load_batched(const char *cmd, const char *path, const char *loss, dpc_net **net,
                            dpc_message *m) {
  dpc_load_opts lo = {sizeof lo, .batched = true, .loss = loss};
  dpc_status st = dpc_net_load(path, &lo, net, m);
  dpc_net *plain = NULL;
  dpc_message *pm = st && loss ? dpc_message_new() : NULL;
  lo.loss = NULL;
  if (pm && dpc_net_load(path, &lo, &plain, pm)) plain = NULL;
  const dpc_net *shown = st ? plain : *net;
  if (shown && dpc_net_fixed_batch(shown))
    fprintf(stderr,
            "dpc %s: note: %s; until then it runs at the shapes it was exported with, whatever "
            "--batch says\n",
            cmd, dpc_net_fixed_batch(shown));
  dpc_net_free(plain);
  dpc_message_free(pm);
  return st;
}

int cli_report(const char *cmd, dpc_message *m) {
  const char *text = dpc_message_text(m);
  /* a message that names its file starts with it; others get the command's name */
  if (!dpc_message_file(m)) fprintf(stderr, "dpc %s: ", cmd);
  fprintf(stderr, "%s\n", text);
  return dpc_message_status(m) == DPC_ERR_INTERNAL ? 3 : DPC_EXIT_ERROR;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "dpc %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return DPC_EXIT_USAGE;
}
