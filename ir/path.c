/*
 * path.c — see path.h.
 */
#include "ir/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void dpc_path_dir(const char *path, char *buf, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(buf, cap, ".");
  else if (slash == path)
    snprintf(buf, cap, "/");
  else
    snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

int dpc_path_sync_dir(const char *path) {
  char dir[4096];
  dpc_path_dir(path, dir, sizeof dir);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  /* some file systems cannot sync a folder; the data itself is synced already */
  if (rc && (errno == EINVAL || errno == ENOTSUP)) rc = 0;
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

pid_t dpc_path_temp_pid(const char *name, const char *base, const char *suffix) {
  size_t bl = strlen(base);
  if (strncmp(name, base, bl) || strncmp(name + bl, ".tmp.", 5)) return 0;
  const char *p = name + bl + 5;
  long v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > INT_MAX / 10) return 0;
    v = v * 10 + (*p - '0');
  }
  bool end = !*p || (suffix && !strcmp(p, suffix));
  return end && v > 0 ? (pid_t)v : 0;
}
