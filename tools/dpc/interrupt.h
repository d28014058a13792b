/*
 * interrupt.h — Ctrl-C and SIGTERM for long commands (dpc train): the first signal asks the work
 * to stop at its next safe point, a second one ends the process at once.
 *
 * The flag is the process's one piece of global mutable state, a volatile sig_atomic_t written
 * only by the handler; library code sees it through the pointer it is given
 * (dpc_train_opts.cancel), never by name.
 */
#ifndef DPC_TOOLS_INTERRUPT_H
#define DPC_TOOLS_INTERRUPT_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

/* Catch SIGINT and SIGTERM for command `cmd` (a static string). The first signal sets the flag
 * and prints that the command will stop after the step under way (on a new line when stderr is a
 * terminal with a progress line on it); the second exits at once with 128 + its number. */
void cli_interrupt_catch(const char *cmd, bool tty);
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
