/*
 * outpath.h — output paths checked before the work starts, so that a run never ends by finding
 * it cannot write its result.
 */
#ifndef DPC_TOOLS_OUTPATH_H
#define DPC_TOOLS_OUTPATH_H

/* Whether command `cmd` will be able to write FILE `path`, given by option --`opt`: its folder
 * exists and takes a new file (one is created there and removed), and path is not a folder nor
 * an existing file it may not write. 0 when it will; otherwise the reason is printed, naming the
 * option and the path, and the result is DPC_EXIT_ERROR. NULL path: 0. */
int cli_check_output_file(const char *cmd, const char *opt, const char *path);
/* The same for a FOLDER the command writes files into, creating it when missing: it is a folder
 * that takes a new file, or it does not exist and its parent folder takes a new one. */
int cli_check_output_dir(const char *cmd, const char *opt, const char *path);

#endif
