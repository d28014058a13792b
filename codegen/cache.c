/*
 * cache.c — where dpc's cache folder is, and making it exist.
 */
#include "codegen/cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool dpc_cache_base_dir(const char *override, char *out, size_t n) {
  const char *env = override ? override : getenv("DPC_CACHE_DIR");
  char base[3072];
  if (env) {
    if (!*env || !strcmp(env, "off")) return false;
    snprintf(base, sizeof base, "%s", env);
  } else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME")) {
    snprintf(base, sizeof base, "%s/dpc", getenv("XDG_CACHE_HOME"));
  } else if (getenv("HOME") && *getenv("HOME")) {
    snprintf(base, sizeof base, "%s/.cache/dpc", getenv("HOME"));
  } else {
    return false;
  }
  /* one level at a time: the parents of a default folder may not exist yet */
  for (char *p = base + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(base, 0755);
    *p = '/';
  }
  if (mkdir(base, 0755) && errno != EEXIST) return false;
  snprintf(out, n, "%s", base);
  return true;
}
