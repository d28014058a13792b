/*
 * interrupt.c — the signal flag of long commands and the command line that resumes them
 * (interrupt.h).
 */
#include "tools/dpc/interrupt.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The accepted exception to "no global mutable state": a signal handler can reach nothing else.
 * The message is built before the handler is installed, so the handler only reads it. */
static volatile sig_atomic_t stop_signal;
static cli_interrupt_mode stop_mode;
static char stop_message[160];
static size_t stop_message_len;
static const int stop_sigs[2] = {SIGINT, SIGTERM};
static struct sigaction stop_old[2];
static bool stop_caught;

static void on_signal(int sig) {
  if (stop_mode == CLI_INTERRUPT_CLEANUP) {
    stop_signal = sig; /* the work stops and cleans up; release raises it again */
    return;
  }
  if (stop_signal) _exit(128 + sig); /* the second: no checkpoint, no cleanup */
  stop_signal = sig;
  /* write(2) is async-signal-safe; stdio is not */
  ssize_t put = write(STDERR_FILENO, stop_message, stop_message_len);
  (void)put;
}

void cli_interrupt_catch_mode(const char *cmd, bool tty, cli_interrupt_mode mode) {
  stop_mode = mode;
  snprintf(stop_message, sizeof stop_message,
           "%sdpc %s: stopping after the step under way (a second Ctrl-C or SIGTERM stops at "
           "once, losing it)\n",
           tty ? "\n" : "", cmd);
  stop_message_len = strlen(stop_message);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  /* STEP: blocking calls in the workers resume after the handler rather than fail with EINTR;
   * CLEANUP: they fail with EINTR, so a wait for the linker wakes */
  sa.sa_flags = mode == CLI_INTERRUPT_STEP ? SA_RESTART : 0;
  for (int i = 0; i < 2; i++) {
    sigaction(stop_sigs[i], NULL, &stop_old[i]);
    if (mode == CLI_INTERRUPT_CLEANUP && stop_old[i].sa_handler == SIG_IGN) continue;
    sigaction(stop_sigs[i], &sa, NULL);
  }
  stop_caught = true;
}

void cli_interrupt_catch(const char *cmd, bool tty) {
  cli_interrupt_catch_mode(cmd, tty, CLI_INTERRUPT_STEP);
}

void cli_interrupt_release(void) {
  if (!stop_caught) return;
  for (int i = 0; i < 2; i++) sigaction(stop_sigs[i], &stop_old[i], NULL);
  stop_caught = false;
  if (stop_signal) raise(stop_signal);
}

const volatile sig_atomic_t *cli_interrupt_flag(void) {
  return &stop_signal;
}

int cli_interrupt_exit_code(void) {
  return stop_signal ? 128 + stop_signal : 0;
}

const char *cli_interrupt_name(void) {
  return stop_signal == SIGTERM ? "SIGTERM" : "SIGINT";
}

/* One word for sh: as it is when it holds only characters no shell treats specially, else in
 * single quotes (a quote inside becomes '\''). */
static void print_word(FILE *f, const char *w) {
  bool plain = *w != 0;
  for (const char *p = w; *p && plain; p++)
    plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%",
                   *p) != NULL;
  if (plain) {
    fputs(w, f);
    return;
  }
  fputc('\'', f);
  for (const char *p = w; *p; p++) {
    if (*p == '\'')
      fputs("'\\''", f);
    else
      fputc(*p, f);
  }
  fputc('\'', f);
}

/* Whether argv[i] is option --name, as "--name VALUE" (*skip 1) or "--name=VALUE" (*skip 0). */
static bool is_opt(const char *a, const char *name, int *skip) {
  size_t n = strlen(name);
  if (strncmp(a, "--", 2) || strncmp(a + 2, name, n)) return false;
  if (a[2 + n] == 0) return *skip = 1, true;
  if (a[2 + n] == '=') return *skip = 0, true;
  return false;
}

void cli_print_resume_command(FILE *f, int argc, char **argv, const char *path) {
  bool added = false, options = true;
  for (int i = 0; i < argc; i++) {
    int skip = 0;
    if (options && !strcmp(argv[i], "--")) { /* positional arguments only from here on */
      fputs(" --resume ", f);
      print_word(f, path);
      added = true, options = false;
    } else if (options && (is_opt(argv[i], "resume", &skip) || is_opt(argv[i], "init", &skip))) {
      /* the checkpoint replaces an earlier --resume, and --init does not go with --resume */
      i += skip;
      continue;
    }
    if (i) fputc(' ', f);
    print_word(f, argv[i]);
  }
  if (!added) {
    fputs(" --resume ", f);
    print_word(f, path);
  }
  fputc('\n', f);
}
