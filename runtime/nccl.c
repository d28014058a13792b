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
  static const char *const names[] = {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"};
  static const dpc_dl_lib lib = {"DPC_NCCL",
                                 "NCCL",
                                 names,
                                 2,
                                 entries,
                                 sizeof entries / sizeof *entries,
                                 offsetof(dpc_nccl_api, lib)};
  memset(api, 0, sizeof *api);
  return dpc_dl_load(&lib, who, api, d);
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
