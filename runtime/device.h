/*
 * device.h — a device as the executor sees it: memory it hands out, copies into, out of and
 * between devices, a way to run a kernel on it, and the ordering points an asynchronous device
 * needs (events, synchronize), behind a vtable (ggml's backend habit).
 *
 * The session never touches device memory itself: a buffer's address is a handle that only the
 * device's own calls may dereference. The host CPU's handles happen to be host pointers
 * (host_visible), so views of its memory are read and filled in place, with no copy; the test
 * device "testmem" (tests only) hands out handles that fault when dereferenced, so any access
 * that goes around this table fails. GPUs ("cuda:N", device_cuda.c) implement the same table.
 */
#ifndef DPC_RUNTIME_DEVICE_H
#define DPC_RUNTIME_DEVICE_H

#include "runtime/kernel.h"

typedef struct dpc_device dpc_device;
struct dpc_pool;

typedef enum dpc_copy_kind {
  DPC_COPY_H2D,  /* host memory into this device's */
  DPC_COPY_D2H,  /* this device's memory to the host */
  DPC_COPY_D2D,  /* within this device */
  DPC_COPY_PEER, /* from another device's memory (peer) into this one's */
} dpc_copy_kind;

/* One kernel to run: a compiled one (native.fn, over the data pointers args[0 .. n_args)) or
 * else the kernel table's (fn over a). Data pointers and tensors hold device handles. */
typedef struct dpc_launch {
  dpc_kernel_fn fn;
  const dpc_kernel_args *a;
  dpc_native_kernel native;
  void *const *args;
  uint32_t n_args;
  struct dpc_pool *pool; /* splits a compiled kernel over the device's cores; NULL: one thread */
  const dpc_run_info *run;
} dpc_launch;

/* A point in a device's stream of work that another device waits for: values crossing devices
 * are recorded after the producer's work and waited on before the consumer's. */
typedef struct dpc_device_event {
  uint64_t recorded; /* times recorded (the cpu has no stream: its events are only counted) */
  void *impl;
  dpc_device *owner; /* the device that made impl, whose event_free releases it */
} dpc_device_event;

typedef struct dpc_device_ops {
  const char *kind; /* "cpu", "cuda", "testmem" */
  /* Handles are host pointers: the host may read and write them in place (views, in-place
   * input feeds). Otherwise everything goes through copy. */
  bool host_visible;
  /* Memory for a plan's buffer: zeroed and already touched, so the first step pays no page
   * faults (they cost ~12 us per 4 KiB page on the project's machines). */
  dpc_status (*alloc)(dpc_device *dev, size_t bytes, void **out, dpc_diag *d);
  /* Memory for a buffer of which the session writes only some parts (the rest is another
   * session's params, or another process's device): neither zeroed nor touched, so the parts
   * never written cost no memory; the session zeroes the parts it uses. Host-visible devices
   * only; NULL: alloc. Freed with free. */
  dpc_status (*reserve)(dpc_device *dev, size_t bytes, void **out, dpc_diag *d);
  void (*free)(dpc_device *dev, void *p);
  /* Copy bytes into dst from src, per kind: dst is this device's (H2D, D2D, PEER) or host
   * memory (D2H); src is host memory (H2D), this device's (D2H, D2D) or peer's (PEER). Ordered
   * after the work launched on this device before it. */
  dpc_status (*copy)(dpc_device *dev, dpc_copy_kind kind, void *dst, const void *src, size_t bytes,
                     dpc_device *peer, dpc_diag *d);
  /* Run one kernel. A compiled kernel that reports bad data sets *bad (nonzero). */
  dpc_status (*launch)(dpc_device *dev, const dpc_launch *l, int32_t *bad, dpc_diag *d);
  /* Mark e after the work launched so far; make later work on dev wait for e. */
  dpc_status (*event_record)(dpc_device *dev, dpc_device_event *e, dpc_diag *d);
  dpc_status (*event_wait)(dpc_device *dev, const dpc_device_event *e, dpc_diag *d);
  /* Release what event_record made for e (NULL: a device whose events hold nothing). */
  void (*event_free)(dpc_device *dev, dpc_device_event *e);
  /* Wait until the work launched on dev is done: before the host reads results back. */
  dpc_status (*synchronize)(dpc_device *dev, dpc_diag *d);
  /* Host memory this device copies to and from at full speed (a GPU's page-locked memory, which
   * its DMA reads in place), zeroed; for the session's host copies of its buffer and staging.
   * NULL: any host memory will do (dpc_device_host_alloc then takes calloc's). */
  dpc_status (*host_alloc)(dpc_device *dev, size_t bytes, void **out, dpc_diag *d);
  void (*host_free)(dpc_device *dev, void *p);
} dpc_device_ops;

struct dpc_device {
  const dpc_device_ops *ops;
  char name[32]; /* "cpu:0" */
  void *impl;
};

/* Open a device by name: "cpu" or "cpu:N", "cuda:N" (device_cuda.c: fails naming why when
 * there is no driver or no such GPU); "testmem:N" for tests (not listed to users). */
dpc_status dpc_device_open(const char *name, dpc_device **out, dpc_diag *d);
void dpc_device_close(dpc_device *dev);

/* `bytes` from src (a handle of device `from`) into dst (a handle of device `to`), by whichever
 * of the two can address both: the reader's peer copy between devices alike (two GPUs, or host
 * memory on both sides), the GPU's own copy between a GPU and the host's CPU (into it, or out of
 * it, finished before this returns). */
dpc_status dpc_device_copy_between(dpc_device *to, void *dst, dpc_device *from, const void *src,
                                   size_t bytes, dpc_diag *d);

/* The host CPU's launch: the compiled kernel over the pool (or on the calling thread), else the
 * table's kernel. Other host devices reuse it once their handles are translated. */
dpc_status dpc_device_cpu_launch(dpc_device *dev, const dpc_launch *l, int32_t *bad, dpc_diag *d);

/* Host memory for copies to and from dev: its host_alloc's, else calloc's (zeroed either way);
 * freed with dpc_device_host_free on the same device. */
dpc_status dpc_device_host_alloc(dpc_device *dev, size_t bytes, void **out, dpc_diag *d);
void dpc_device_host_free(dpc_device *dev, void *p);

/* A cuda:N device's GEMM path: "cuda:0: matmuls on cuBLAS", or why the generated kernels run
 * instead; *gemms (when not NULL) the GEMMs cuBLAS has run. */
const char *dpc_device_cuda_blas(const dpc_device *dev, uint64_t *gemms);

/* A GPU's figures for planning, measured on it: its name and memory, the GFLOP/s of an f32 GEMM
 * on cuBLAS (0 where cuBLAS does not load: note says why), the GB/s of a copy within its memory
 * (each byte read once and written once). */
typedef struct dpc_cuda_figures {
  char name[64];
  uint64_t memory;
  double gemm_gflops, copy_gbs;
  uint32_t gemm_n; /* the square GEMM timed */
  char note[256];
} dpc_cuda_figures;
dpc_status dpc_device_cuda_measure(dpc_device *dev, dpc_cuda_figures *out, dpc_diag *d);
/* GB/s of a copy into dst's memory from src's (both cuda:N), the best of a few. */
dpc_status dpc_device_cuda_peer_gbs(dpc_device *dst, dpc_device *src, double *gbs, dpc_diag *d);

/* A cuda:N device's context made current on the calling thread, and its ordinal and stream (for
 * a library that queues work on it, as NCCL does). DPC_ERR_UNSUPPORTED for other devices. */
dpc_status dpc_device_cuda_enter(dpc_device *dev, int *ordinal, void **stream, dpc_diag *d);

#endif
