/*
 * outpath.c — checking output paths before the work starts (outpath.h). The check creates and
 * removes a file rather than asking access(2): access says yes to root everywhere, and knows
 * nothing of read-only mounts, /proc or full quotas.
 */
#include "tools/dpc/outpath.h"
#include "tools/dpc/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether folder `dir` takes a new file; why not into why. */
static bool dir_takes_file(const char *dir, char *why, size_t cap) {
  struct stat sb;
  if (stat(dir, &sb)) {
    snprintf(why, cap, "the folder '%s' %s", dir,
             errno == ENOENT ? "does not exist" : strerror(errno));
    return false;
  }
  if (!S_ISDIR(sb.st_mode)) {
    snprintf(why, cap, "'%s' is not a folder", dir);
    return false;
  }
  char probe[4400];
  snprintf(probe, sizeof probe, "%s/.dpc-write-check.%ld", dir, (long)getpid());
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) { /* left by a killed run of ours with the same pid */
    unlink(probe);
    fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0) {
    snprintf(why, cap, "cannot create a file in the folder '%s': %s", dir, strerror(errno));
    return false;
  }
  close(fd);
  unlink(probe);
  return true;
}

static int refuse(const char *cmd, const char *opt, const char *path, const char *why) {
  fprintf(stderr, "dpc %s: cannot write --%s '%s': %s\n", cmd, opt, path, why);
  return DPC_EXIT_ERROR;
}

int cli_check_output_file(const char *cmd, const char *opt, const char *path) {
  if (!path) return 0;
  char dir[4096], why[4600];
  size_t n = strlen(path);
  if (!n || path[n - 1] == '/') return refuse(cmd, opt, path, "that names a folder, not a file");
  if (n >= sizeof dir) return refuse(cmd, opt, path, "the path is too long");
  struct stat sb;
  if (!stat(path, &sb) && S_ISDIR(sb.st_mode))
    return refuse(cmd, opt, path, "that is a folder, not a file");
  dpc_path_folder(path, dir, sizeof dir);
  if (!dir_takes_file(dir, why, sizeof why)) return refuse(cmd, opt, path, why);
  /* an existing file is replaced or appended to: it must be writable */
  if (!stat(path, &sb) && access(path, W_OK)) {
    snprintf(why, sizeof why, "the file exists and is not writable: %s", strerror(errno));
    return refuse(cmd, opt, path, why);
  }
  return 0;
}

int cli_check_output_dir(const char *cmd, const char *opt, const char *path) {
  if (!path) return 0;
  char dir[4096], why[4600];
  if (!*path || strlen(path) >= sizeof dir) return refuse(cmd, opt, path, "not a usable path");
  struct stat sb;
  if (!stat(path, &sb)) {
    if (!dir_takes_file(path, why, sizeof why)) return refuse(cmd, opt, path, why);
    return 0;
  }
  if (errno != ENOENT) return refuse(cmd, opt, path, strerror(errno));
  /* to be created: "out/" names the folder out */
  snprintf(dir, sizeof dir, "%s", path);
  for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--) dir[n - 1] = 0;
  char parent[4096];
  dpc_path_folder(dir, parent, sizeof parent);
  if (!dir_takes_file(parent, why, sizeof why)) return refuse(cmd, opt, path, why);
  return 0;
}
