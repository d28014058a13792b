/*
 * serve_repo.c — reading a folder of models for `dpc serve` (see serve_repo.h).
 */
#include "driver/serve_repo.h"

#include <jansson.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool dpc_serve_repo_is(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const dpc_serve_entry *)a)->name, ((const dpc_serve_entry *)b)->name);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n > k && !strcmp(s + n - k, suffix);
}

/* A whole number in [1, max] (0 allowed when zero_ok) from a config key. */
static dpc_status config_num(json_t *v, const char *file, const char *key, uint64_t max,
                             bool zero_ok, uint64_t *out, dpc_diag *d) {
  if (!json_is_integer(v) || json_integer_value(v) < (zero_ok ? 0 : 1) ||
      (uint64_t)json_integer_value(v) > max)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: \"%s\" must be a whole number from %d to %llu",
                         file, key, zero_ok ? 0 : 1, (unsigned long long)max);
  *out = (uint64_t)json_integer_value(v);
  return DPC_OK;
}

static dpc_status read_config(const char *file, dpc_serve_entry *e, dpc_diag *d) {
  json_error_t je;
  json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s:%d:%d: %s", file, je.line, je.column, je.text);
  dpc_status st = DPC_OK;
  if (!json_is_object(root))
    st = dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: a model's config is a JSON object", file);
  const char *key;
  json_t *v;
  uint64_t x = 0;
  json_object_foreach(root, key, v) {
    if (st) break;
    if (!strcmp(key, "instances")) {
      if (!(st = config_num(v, file, key, 1024, false, &x, d)))
        e->instances = (unsigned)x, e->has_instances = true;
    } else if (!strcmp(key, "threads")) {
      if (!(st = config_num(v, file, key, 1024, false, &x, d)))
        e->threads = (unsigned)x, e->has_threads = true;
    } else if (!strcmp(key, "max_batch")) {
      if (!(st = config_num(v, file, key, UINT32_MAX, false, &x, d)))
        e->max_batch = x, e->has_max_batch = true;
    } else if (!strcmp(key, "max_queue")) {
      if (!(st = config_num(v, file, key, UINT32_MAX, true, &x, d)))
        e->max_queue = x, e->has_max_queue = true;
    } else if (!strcmp(key, "batch_delay_us")) {
      if (json_is_string(v) && !strcmp(json_string_value(v), "auto")) {
        e->has_delay = true, e->delay_us = 0;
        if (!e->has_target) e->latency_target_us = 50000, e->has_target = true;
      } else if (!(st = config_num(v, file, key, 60000000, true, &x, d))) {
        e->delay_us = x, e->has_delay = true;
      }
    } else if (!strcmp(key, "latency_target_ms")) {
      if (!(st = config_num(v, file, key, 600000, false, &x, d)))
        e->latency_target_us = x * 1000, e->has_target = true;
    } else {
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s: unknown key \"%s\" (a model's config takes instances, threads, "
                         "max_batch, max_queue, batch_delay_us and latency_target_ms)",
                         file, key);
    }
  }
  /* a target alone means the auto delay; a fixed delay with a target is a contradiction */
  json_t *delay = json_object_get(root, "batch_delay_us");
  if (!st && e->has_target && json_is_integer(delay))
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: latency_target_ms goes with \"batch_delay_us\": \"auto\", not a fixed "
                       "delay",
                       file);
  json_decref(root);
  return st;
}

/* The subfolder `name` of dir as a model entry; *skip when it is not a folder. */
static dpc_status read_entry(const char *dir, const char *name, dpc_serve_entry *e, bool *skip,
                             dpc_diag *d) {
  *skip = false;
  size_t n = strlen(dir) + strlen(name) + 2;
  char *sub = malloc(n);
  if (!sub) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  snprintf(sub, n, "%s/%s", dir, name);
  struct stat sst;
  if (stat(sub, &sst) || !S_ISDIR(sst.st_mode)) {
    free(sub);
    *skip = true;
    return DPC_OK;
  }
  dpc_status st = DPC_OK;
  for (const char *c = name; *c && !st; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '_' || *c == '-' || *c == '.'))
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s: a model's folder name is its name in URLs: letters, digits, '_', "
                         "'-' and '.' only",
                         sub);
  if (!st && strlen(name) >= sizeof e->name)
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: the folder name is over %zu characters", sub,
                       sizeof e->name - 1);
  DIR *dh = st ? NULL : opendir(sub);
  if (!st && !dh) st = dpc_diag_fail(d, DPC_ERR_IO, "%s: cannot list the folder", sub);
  bool config = false;
  for (struct dirent *de; dh && !st && (de = readdir(dh));) {
    if (ends_with(de->d_name, ".dpx")) {
      if (e->artifact) {
        st = dpc_diag_fail(d, DPC_ERR_INVALID,
                           "%s: two artifacts (%s and %s): a model's folder holds one .dpx", sub,
                           strrchr(e->artifact, '/') + 1, de->d_name);
        break;
      }
      size_t k = strlen(sub) + strlen(de->d_name) + 2;
      if (!(e->artifact = malloc(k))) {
        st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
        break;
      }
      snprintf(e->artifact, k, "%s/%s", sub, de->d_name);
    } else if (!strcmp(de->d_name, "config.json")) {
      config = true;
    } else if (ends_with(de->d_name, ".graph") || ends_with(de->d_name, ".onnx")) {
      st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s/%s: the server takes compiled artifacts: dpc compile %s --batch B "
                         "--batch-sizes 1,2,4,... -o %s/model.dpx",
                         sub, de->d_name, de->d_name, name);
    }
  }
  if (dh) closedir(dh);
  if (!st && !e->artifact)
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: no compiled artifact (.dpx) in the model's folder",
                       sub);
  snprintf(e->name, sizeof e->name, "%s", name);
  if (!st && config) {
    size_t k = strlen(sub) + sizeof "/config.json";
    char *file = malloc(k);
    if (!file) {
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    } else {
      snprintf(file, k, "%s/config.json", sub);
      st = read_config(file, e, d);
      free(file);
    }
  }
  free(sub);
  return st;
}

dpc_status dpc_serve_repo_read(const char *dir, dpc_serve_entry **out, unsigned *n_out,
                               dpc_diag *d) {
  *out = NULL;
  *n_out = 0;
  DIR *dh = opendir(dir);
  if (!dh) return dpc_diag_fail(d, DPC_ERR_IO, "%s: cannot list the folder", dir);
  dpc_serve_entry *e = NULL;
  unsigned n = 0, cap = 0;
  dpc_status st = DPC_OK;
  for (struct dirent *de; !st && (de = readdir(dh));) {
    if (de->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      dpc_serve_entry *g = realloc(e, cap * sizeof *e);
      if (!g) {
        st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
        break;
      }
      e = g;
    }
    memset(&e[n], 0, sizeof *e);
    bool skip;
    st = read_entry(dir, de->d_name, &e[n], &skip, d);
    if (!skip || st) n++;
  }
  closedir(dh);
  if (!st && !n)
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: no models: a folder to serve holds one subfolder per model, each "
                       "with a compiled artifact (.dpx)",
                       dir);
  if (st) {
    dpc_serve_repo_free(e, n);
    return st;
  }
  qsort(e, n, sizeof *e, by_name);
  *out = e;
  *n_out = n;
  return DPC_OK;
}

void dpc_serve_repo_free(dpc_serve_entry *e, unsigned n) {
  for (unsigned i = 0; e && i < n; i++) free(e[i].artifact);
  free(e);
}
