/*
 * path.h — the few file-system steps that writing a file safely takes (write beside it, sync,
 * rename, sync the folder; clear what a killed writer left), shared by checkpoints
 * (runtime/safetensors.c), artifacts (codegen/cpu/aot.c) and the command line's path checks.
 */
#ifndef DPC_IR_PATH_H
#define DPC_IR_PATH_H

#include <stddef.h>
#include <sys/types.h>

/* The folder holding path into buf: "." for a bare name, "/" for a name at the root. */
void dpc_path_dir(const char *path, char *buf, size_t cap);

/* Make a rename in path's folder durable (a rename lives in the folder, not in the file): 0, or
 * -1 with errno. File systems that cannot sync a folder count as success. */
int dpc_path_sync_dir(const char *path);

/* The process id in a temporary file's name, BASE ".tmp." PID, or BASE ".tmp." PID SUFFIX when
 * suffix is not NULL; 0 when name is not one. */
pid_t dpc_path_temp_pid(const char *name, const char *base, const char *suffix);

#endif
