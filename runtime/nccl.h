/*
 * nccl.h — NCCL, found at run time as cuBLAS is (cublas.h): dlopen of libnccl.so.2 (or of the
 * library $DPC_NCCL names: the tests' stand-in; "off" for none), never linked. The GPUs of a
 * data-parallel run all-reduce their gradients with it (transport_nccl.c); where it does not
 * load, through the host (transport_shm.c's staging).
 *
 * No NCCL header: the few types are declared by their ABI (ncclResult_t and the enums are
 * ints, a communicator a pointer).
 */
#ifndef DPC_RUNTIME_NCCL_H
#define DPC_RUNTIME_NCCL_H

#include "ir/base.h"

/* nccl.h's values (NCCL 2.x: stable across its releases) */
#define DPC_NCCL_FLOAT32 7
#define DPC_NCCL_FLOAT64 8
#define DPC_NCCL_SUM     0
#define DPC_NCCL_AVG     4

typedef struct dpc_nccl_api {
  void *lib;
  int (*get_version)(int *version);
  int (*comm_init_all)(void **comms, int ndev, const int *devlist);
  int (*comm_destroy)(void *comm);
  int (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op, void *comm,
                    void *stream);
  const char *(*error_string)(int result);
} dpc_nccl_api;

/* Open NCCL and find its entry points. On failure the message starts with `who` ("cuda:0")
 * and says which library was looked for; nothing stays open. */
dpc_status dpc_nccl_load(dpc_nccl_api *api, const char *who, dpc_diag *d);
void dpc_nccl_unload(dpc_nccl_api *api);

/* "NCCL 2.28.9" from its version code, into out. */
void dpc_nccl_version_text(const dpc_nccl_api *api, char *out, size_t cap);

#endif
