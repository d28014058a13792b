/*
 * fake_driver.c — a stand-in for libcuda.so.1 in tests, loaded by runtime/device_cuda.c through
 * $DPC_CUDA_DRIVER, so the GPU path of the runtime (device memory, copies, modules, launches,
 * streams and events, and the session over them) runs where there is no GPU. It implements the
 * driver calls device_cuda.c makes: memory is host memory, a stream runs its work at once, and a
 * module is the host-emulated build (codegen/cuda/emu) of the same CUDA source whose CUBIN or
 * PTX the device loads: the test registers each image with the emulated library built from its
 * source (dpc_fake_cuda_register), and a module loaded from an image nobody registered fails.
 * An image at another address is found by its bytes (an artifact's copy of a registered one).
 * A launch runs the kernel with the grid, block and argument block the device passes.
 *
 * Test code: one process-wide table, guarded by a lock.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cu_result;
typedef uint64_t cu_ptr;
typedef int (*emu_launch_fn)(void *kernel, const unsigned *grid, const unsigned *block,
                             const void *args);

#define NOT_FOUND     500 /* CUDA_ERROR_NOT_FOUND */
#define INVALID_VALUE 1
#define NO_MEMORY     2
#define MAX_IMAGES    8192

static struct {
  const void *image;
  void *lib; /* dlopen handle of the emulated build */
} images[MAX_IMAGES];
static unsigned n_images, launches, allocated, events;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct fake_fn {
  emu_launch_fn launch;
  void *kernel;
} fake_fn;

#define API __attribute__((visibility("default")))

API void dpc_fake_cuda_register(const void *image, void *lib);
API void dpc_fake_cuda_register(const void *image, void *lib) {
  pthread_mutex_lock(&lock);
  unsigned i = 0;
  while (i < n_images && images[i].image != image) i++; /* memory reused: the newest wins */
  if (i < MAX_IMAGES) images[i].image = image, images[i].lib = lib;
  if (i == n_images && i < MAX_IMAGES) n_images++;
  pthread_mutex_unlock(&lock);
}

/* Kernels launched, buffers and events live, for the test's checks. */
API void dpc_fake_cuda_counts(unsigned *n_launches, unsigned *n_allocated, unsigned *n_events);
API void dpc_fake_cuda_counts(unsigned *n_launches, unsigned *n_allocated, unsigned *n_events) {
  pthread_mutex_lock(&lock);
  *n_launches = launches, *n_allocated = allocated, *n_events = events;
  pthread_mutex_unlock(&lock);
}

API cu_result cuInit(unsigned flags) {
  return flags ? INVALID_VALUE : 0;
}
API cu_result cuDriverGetVersion(int *v) {
  *v = 13000;
  return 0;
}
/* GPUs: $DPC_FAKE_CUDA_GPUS (1 to 8, default 1). Each has a context and one stream; a stream is
 * used only with its own context current on the calling thread, as on a GPU. */
#define MAX_GPUS 8
static int gpu_count(void) {
  const char *e = getenv("DPC_FAKE_CUDA_GPUS");
  int n = e ? atoi(e) : 1;
  return n < 1 ? 1 : n > MAX_GPUS ? MAX_GPUS : n;
}
static int the_ctx[MAX_GPUS], the_stream[MAX_GPUS];
static unsigned gpu_launches[MAX_GPUS];
static _Thread_local int *current;
/* 0 when s is the stream of the context current here */
static int on_stream(const void *s) {
  return current && s == &the_stream[current - the_ctx] ? 0 : INVALID_VALUE;
}

API cu_result cuDeviceGetCount(int *n) {
  *n = gpu_count();
  return 0;
}
API cu_result cuDeviceGet(int *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= gpu_count()) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = ordinal;
  return 0;
}
API cu_result cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  *v = attr == 75 ? 9 : attr == 76 ? 0 : 0; /* compute capability 9.0 */
  return 0;
}
API cu_result cuDeviceGetName(char *name, int len, int dev) {
  if (dev < 0 || dev >= gpu_count() || len < 1) return INVALID_VALUE;
  snprintf(name, (size_t)len, "dpc test GPU %d", dev);
  return 0;
}
API cu_result cuDeviceTotalMem_v2(size_t *bytes, int dev) {
  if (dev < 0 || dev >= gpu_count()) return INVALID_VALUE;
  *bytes = (size_t)16 << 30;
  return 0;
}
API cu_result cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  if (dev < 0 || dev >= gpu_count()) return 101;
  *ctx = &the_ctx[dev];
  return 0;
}
API cu_result cuDevicePrimaryCtxRelease_v2(int dev) {
  return dev >= 0 && dev < gpu_count() ? 0 : 101;
}
API cu_result cuCtxSetCurrent(void *ctx) {
  int *c = ctx;
  if (c < the_ctx || c >= the_ctx + gpu_count()) return INVALID_VALUE;
  current = c;
  return 0;
}
API cu_result cuStreamCreate(void **s, unsigned flags) {
  (void)flags;
  if (!current) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *s = &the_stream[current - the_ctx];
  return 0;
}
API cu_result cuStreamDestroy_v2(void *s) {
  return on_stream(s);
}
API cu_result cuStreamSynchronize(void *s) {
  return on_stream(s);
}
API cu_result cuMemAlloc_v2(cu_ptr *p, size_t n) {
  void *m = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m) return NO_MEMORY;
  /* what cudaMalloc leaves is not zero: a device that relied on it would show */
  memset(m, 0xa5, n);
  *p = (cu_ptr)(uintptr_t)m;
  pthread_mutex_lock(&lock);
  allocated++;
  pthread_mutex_unlock(&lock);
  return 0;
}
API cu_result cuMemFree_v2(cu_ptr p) {
  free((void *)(uintptr_t)p);
  pthread_mutex_lock(&lock);
  allocated--;
  pthread_mutex_unlock(&lock);
  return 0;
}
API cu_result cuMemsetD8Async(cu_ptr p, unsigned char v, size_t n, void *s) {
  if (on_stream(s)) return INVALID_VALUE;
  memset((void *)(uintptr_t)p, v, n);
  return 0;
}
/* Page-locked host memory: what cuMemHostAlloc gave and not yet freed, and the copies made
 * between it and device memory (the rest were from pageable memory) */
#define MAX_PINNED 256
static struct {
  char *p;
  size_t n;
} pinned[MAX_PINNED];
static unsigned pinned_copies, pageable_copies;

API cu_result cuMemHostAlloc(void **p, size_t n, unsigned flags) {
  if (flags) return INVALID_VALUE;
  pthread_mutex_lock(&lock);
  unsigned i = 0;
  while (i < MAX_PINNED && pinned[i].p) i++;
  char *m = i < MAX_PINNED ? malloc(n ? n : 1) : NULL;
  if (m) memset(m, 0x5a, n), pinned[i].p = m, pinned[i].n = n;
  pthread_mutex_unlock(&lock);
  if (!m) return NO_MEMORY;
  *p = m;
  return 0;
}
API cu_result cuMemFreeHost(void *p) {
  pthread_mutex_lock(&lock);
  unsigned i = 0;
  while (i < MAX_PINNED && pinned[i].p != p) i++;
  if (i < MAX_PINNED) pinned[i].p = NULL;
  pthread_mutex_unlock(&lock);
  if (i == MAX_PINNED) return INVALID_VALUE; /* not page-locked memory */
  free(p);
  return 0;
}
static void count_copy(const void *host, size_t n) {
  pthread_mutex_lock(&lock);
  bool in = false;
  for (unsigned i = 0; i < MAX_PINNED && !in; i++)
    in = pinned[i].p && (const char *)host >= pinned[i].p &&
         (const char *)host + n <= pinned[i].p + pinned[i].n;
  if (in)
    pinned_copies++;
  else
    pageable_copies++;
  pthread_mutex_unlock(&lock);
}
/* Page-locked buffers live, and copies to or from page-locked and pageable host memory. */
API void dpc_fake_cuda_pinned(unsigned *live, unsigned *from_pinned, unsigned *from_pageable);
API void dpc_fake_cuda_pinned(unsigned *live, unsigned *from_pinned, unsigned *from_pageable) {
  pthread_mutex_lock(&lock);
  unsigned n = 0;
  for (unsigned i = 0; i < MAX_PINNED; i++) n += pinned[i].p != NULL;
  *live = n, *from_pinned = pinned_copies, *from_pageable = pageable_copies;
  pthread_mutex_unlock(&lock);
}

API cu_result cuMemcpyHtoDAsync_v2(cu_ptr dst, const void *src, size_t n, void *s) {
  if (on_stream(s)) return INVALID_VALUE;
  count_copy(src, n);
  memcpy((void *)(uintptr_t)dst, src, n);
  return 0;
}
API cu_result cuMemcpyDtoHAsync_v2(void *dst, cu_ptr src, size_t n, void *s) {
  if (on_stream(s)) return INVALID_VALUE;
  count_copy(dst, n);
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return 0;
}
API cu_result cuMemcpyDtoDAsync_v2(cu_ptr dst, cu_ptr src, size_t n, void *s) {
  if (on_stream(s)) return INVALID_VALUE;
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return 0;
}
API cu_result cuMemcpyPeerAsync(cu_ptr dst, void *dctx, cu_ptr src, void *sctx, size_t n, void *s) {
  (void)dctx, (void)sctx, (void)s;
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return 0;
}
/* An image's bytes: a CUBIN's ELF reaches to the end of its section or program headers, PTX to
 * its NUL. */
static size_t image_size(const void *image) {
  const unsigned char *b = image;
  if (memcmp(b,
             "\x7f"
             "ELF",
             4))
    return strlen(image) + 1;
  uint64_t shoff, phoff;
  uint16_t phent, phnum, shent, shnum;
  memcpy(&phoff, b + 0x20, 8), memcpy(&shoff, b + 0x28, 8);
  memcpy(&phent, b + 0x36, 2), memcpy(&phnum, b + 0x38, 2);
  memcpy(&shent, b + 0x3a, 2), memcpy(&shnum, b + 0x3c, 2);
  uint64_t sh = shoff + (uint64_t)shent * shnum, ph = phoff + (uint64_t)phent * phnum;
  return (size_t)(sh > ph ? sh : ph);
}

API cu_result cuModuleLoadData(void **module, const void *image) {
  pthread_mutex_lock(&lock);
  void *lib = NULL;
  for (unsigned i = 0; i < n_images && !lib; i++)
    if (images[i].image == image) lib = images[i].lib;
  size_t size = lib ? 0 : image_size(image);
  for (unsigned i = 0; i < n_images && !lib; i++)
    if (image_size(images[i].image) == size && !memcmp(images[i].image, image, size))
      lib = images[i].lib;
  pthread_mutex_unlock(&lock);
  if (!lib) return 200; /* CUDA_ERROR_INVALID_IMAGE */
  *module = lib;
  return 0;
}
API cu_result cuModuleGetFunction(void **fn, void *module, const char *name) {
  fake_fn *f = calloc(1, sizeof *f);
  if (!f) return NO_MEMORY;
  void *launch = dlsym(module, "dpc_emu_launch");
  f->kernel = dlsym(module, name);
  memcpy(&f->launch, &launch, sizeof launch);
  if (!f->launch || !f->kernel) {
    free(f);
    return NOT_FOUND;
  }
  *fn = f; /* kept for the process: the test's modules live as long */
  return 0;
}
API cu_result cuModuleUnload(void *module) {
  (void)module;
  return 0;
}
API cu_result cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, void *s, void **params,
                             void **extra) {
  if (on_stream(s) || shared || extra || !params) return INVALID_VALUE;
  const fake_fn *f = fn;
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  if (f->launch(f->kernel, grid, block, params[0])) return 719; /* CUDA_ERROR_LAUNCH_FAILED */
  pthread_mutex_lock(&lock);
  launches++;
  gpu_launches[current - the_ctx]++;
  pthread_mutex_unlock(&lock);
  return 0;
}
API cu_result cuEventCreate(void **e, unsigned flags) {
  (void)flags;
  *e = malloc(1);
  if (!*e) return NO_MEMORY;
  pthread_mutex_lock(&lock);
  events++;
  pthread_mutex_unlock(&lock);
  return 0;
}
API cu_result cuEventRecord(void *e, void *s) {
  return e && !on_stream(s) ? 0 : INVALID_VALUE;
}
API cu_result cuEventDestroy_v2(void *e) {
  free(e);
  pthread_mutex_lock(&lock);
  events--;
  pthread_mutex_unlock(&lock);
  return 0;
}
API cu_result cuStreamWaitEvent(void *s, void *e, unsigned flags) {
  return !on_stream(s) && e && !flags ? 0 : INVALID_VALUE;
}
API cu_result cuGetErrorString(cu_result r, const char **s) {
  *s = r == 200 ? "image not registered with the test driver" : "test driver error";
  return 0;
}

/* Kernels launched on GPU `gpu` (0 for one out of range). */
API unsigned dpc_fake_cuda_gpu_launches(int gpu);
API unsigned dpc_fake_cuda_gpu_launches(int gpu) {
  pthread_mutex_lock(&lock);
  unsigned n = gpu >= 0 && gpu < MAX_GPUS ? gpu_launches[gpu] : 0;
  pthread_mutex_unlock(&lock);
  return n;
}
/* Whether `stream` is GPU gpu's and its context is current on the calling thread: the test
 * NCCL (fake_nccl.c) checks each rank's call with it. */
API int dpc_fake_cuda_stream_is(int gpu, void *stream);
API int dpc_fake_cuda_stream_is(int gpu, void *stream) {
  return gpu >= 0 && gpu < gpu_count() && current == &the_ctx[gpu] && stream == &the_stream[gpu];
}
