/*
 * nccl.c — loading NCCL (nccl.h).
 */
#include "runtime/nccl.h"
#include "runtime/cuda_driver.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dpc_dl_entry entries[] = {
    {"ncclGetVersion", offsetof(dpc_nccl_api, get_version)},
    {"ncclCommInitAll", offsetof(dpc_nccl_api, comm_init_all)},
    {"ncclCommDestroy", offsetof(dpc_nccl_api, comm_destroy)},
    {"ncclAllReduce", offsetof(dpc_nccl_api, all_reduce)},
    {"ncclGetErrorString", offsetof(dpc_nccl_api, error_string)},
};

dpc_status dpc_nccl_load(dpc_nccl_api *api, const char *who, dpc_diag *d) {
  memset(api, 0, sizeof *api);
  const char *path = getenv("DPC_NCCL");
  if (path && !strcmp(path, "off"))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: NCCL is off ($DPC_NCCL=off)", who);
  const char *names[] = {path && *path ? path : "libnccl.so.2",
                         "/usr/local/cuda/lib64/libnccl.so.2"};
  int tries = path && *path ? 1 : 2;
  for (int i = 0; i < tries && !api->lib; i++) api->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) {
    const char *why = dlerror();
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: no NCCL found (%s)", who,
                         why ? why : names[0]);
  }
  const char *missing = dpc_dl_bind(api->lib, entries, sizeof entries / sizeof *entries, api);
  if (missing) {
    dpc_nccl_unload(api);
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: the NCCL %s lacks %s", who, names[0],
                         missing);
  }
  return DPC_OK;
}

void dpc_nccl_unload(dpc_nccl_api *api) {
  if (api->lib) dlclose(api->lib);
  memset(api, 0, sizeof *api);
}

void dpc_nccl_version_text(const dpc_nccl_api *api, char *out, size_t cap) {
  int v = 0;
  if (!api->get_version || api->get_version(&v) || v <= 0) {
    snprintf(out, cap, "NCCL");
    return;
  }
  /* 2.9 and later: major * 10000 + minor * 100 + patch; before, major * 1000 + minor * 100 */
  if (v >= 10000)
    snprintf(out, cap, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  else
    snprintf(out, cap, "NCCL %d.%d.%d", v / 1000, v / 100 % 10, v % 100);
}
