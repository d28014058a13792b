/*
 * interrupt.h — Ctrl-C and SIGTERM for long commands: the first signal asks the work to stop at
 * its next safe point. dpc train (CLI_INTERRUPT_STEP) says so and ends at once on a second
 * signal; dpc compile (CLI_INTERRUPT_CLEANUP) stops quietly, removes what it wrote, and then ends
 * as the signal says.
 *
 * The flag is the process's one piece of global mutable state, a volatile sig_atomic_t written
 * only by the handler; library code sees it through the pointer it is given
 * (dpc_trainer_opts.cancel, dpc_compile_opts.cancel: const volatile int *, which sig_atomic_t is
 * on the platforms dpc builds for), never by name.
 */
#ifndef DPC_TOOLS_INTERRUPT_H
#define DPC_TOOLS_INTERRUPT_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum cli_interrupt_mode {
  /* The first signal sets the flag and prints that the command will stop after the step under
   * way (on a new line when stderr is a terminal with a progress line on it); the second exits at
   * once with 128 + its number. Blocking calls resume after the handler (SA_RESTART). */
  CLI_INTERRUPT_STEP,
  /* A signal sets the flag and prints nothing: the work stops by itself soon and cleans up
   * (removes temporary files). No SA_RESTART, so a wait for a child (the linker) wakes with
   * EINTR; a signal ignored when dpc started (a background job of a script) stays ignored; a
   * second signal changes nothing. cli_interrupt_release then ends the process as the signal
   * asked. */
  CLI_INTERRUPT_CLEANUP
} cli_interrupt_mode;

/* Catch SIGINT and SIGTERM for command `cmd` (a static string) in the given mode; the handlers
 * they had are kept for cli_interrupt_release. */
void cli_interrupt_catch_mode(const char *cmd, bool tty, cli_interrupt_mode mode);
/* cli_interrupt_catch_mode(cmd, tty, CLI_INTERRUPT_STEP) */
void cli_interrupt_catch(const char *cmd, bool tty);
/* Put back the handlers cli_interrupt_catch_mode found; when a signal was caught, raise it again
 * so dpc ends as the signal says (130 for SIGINT, 143 for SIGTERM, as the shell reports it). */
void cli_interrupt_release(void);
/* The flag: 0, or the number of the first signal caught. */
const volatile sig_atomic_t *cli_interrupt_flag(void);
/* 130 for SIGINT, 143 for SIGTERM: the shell's status for a process the signal ended. */
int cli_interrupt_exit_code(void);
/* The signal's name, "SIGINT" or "SIGTERM". */
const char *cli_interrupt_name(void);

/* argv[0..argc) as one sh command line into f, quoted where needed, with "--resume PATH" in
 * place of any --resume or --init (and its value) the command had. */
void cli_print_resume_command(FILE *f, int argc, char **argv, const char *path);

#endif
