/*
 * dpc_cuda_emu_launch.h — the launcher of an emulated kernel (see dpc_cuda_emu.h), included
 * after the generated source so that it knows the kernels' argument block, dpc_kargs.
 *
 *   int dpc_emu_launch(kernel, grid[3], block[3], &args)
 *
 * starts one pthread per thread of a block, and each runs every block of the grid in turn,
 * meeting the others at a barrier between blocks. Returns 0, or -1 when the block is larger than
 * CUDA allows or a thread cannot start.
 */
#ifndef DPC_CUDA_EMU_LAUNCH_H
#define DPC_CUDA_EMU_LAUNCH_H

typedef void (*dpc_emu_kernel)(dpc_kargs);

struct dpc_emu_thread {
  pthread_t th;
  unsigned x, y, z;
  dpc_emu_kernel k;
  const dpc_kargs *args;
};

static void *dpc_emu_thread_main(void *p) {
  struct dpc_emu_thread *t = (struct dpc_emu_thread *)p;
  threadIdx.x = t->x, threadIdx.y = t->y, threadIdx.z = t->z;
  for (unsigned bz = 0; bz < gridDim.z; bz++)
    for (unsigned by = 0; by < gridDim.y; by++)
      for (unsigned bx = 0; bx < gridDim.x; bx++) {
        blockIdx.x = bx, blockIdx.y = by, blockIdx.z = bz;
        t->k(*t->args);
        /* no thread starts the next block while another still uses this one's shared memory */
        __syncthreads();
      }
  return NULL;
}

extern "C" int dpc_emu_launch(dpc_emu_kernel k, const unsigned *grid, const unsigned *block,
                              const dpc_kargs *args) {
  unsigned n = block[0] * block[1] * block[2];
  if (n == 0 || n > DPC_EMU_MAX_THREADS) return -1;
  gridDim.x = grid[0], gridDim.y = grid[1], gridDim.z = grid[2];
  blockDim.x = block[0], blockDim.y = block[1], blockDim.z = block[2];
  static struct dpc_emu_thread t[DPC_EMU_MAX_THREADS];
  pthread_barrier_init(&dpc_emu_barrier, NULL, n);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  int rc = 0;
  unsigned started = 0;
  for (unsigned z = 0; z < block[2]; z++)
    for (unsigned y = 0; y < block[1]; y++)
      for (unsigned x = 0; x < block[0]; x++) {
        struct dpc_emu_thread *p = &t[started];
        p->x = x, p->y = y, p->z = z, p->k = k, p->args = args;
        if (pthread_create(&p->th, &attr, dpc_emu_thread_main, p)) {
          rc = -1;
          break;
        }
        started++;
      }
  /* A thread that failed to start leaves the others waiting at the barrier for ever: give up
   * on the process's sanity only in that case, which a test reports as a failure. */
  for (unsigned i = 0; i < started && rc == 0; i++) pthread_join(t[i].th, NULL);
  pthread_attr_destroy(&attr);
  if (rc == 0) pthread_barrier_destroy(&dpc_emu_barrier);
  return rc;
}

#endif
