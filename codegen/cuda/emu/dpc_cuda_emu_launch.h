/*
 * dpc_cuda_emu_launch.h — the launcher of an emulated kernel (see dpc_cuda_emu.h), included
 * after the generated source so that it knows the kernels' argument block, dpc_kargs.
 *
 *   int dpc_emu_launch(kernel, grid[3], block[3], &args)
 *
 * runs every block of the grid in turn on the calling thread, each thread of a block a fiber
 * with its own stack, switched at __syncthreads. Returns 0, or -1 when the block is larger than
 * CUDA allows, memory runs out, or the threads of a block do not all reach the same barriers.
 */
#ifndef DPC_CUDA_EMU_LAUNCH_H
#define DPC_CUDA_EMU_LAUNCH_H

typedef void (*dpc_emu_kernel)(dpc_kargs);

#define DPC_EMU_STACK (64 * 1024)

static thread_local dpc_emu_kernel dpc_emu_k;
static thread_local const dpc_kargs *dpc_emu_args;

#if DPC_EMU_FAST_SWITCH
/* A fiber starts here (dpc_emu_switch's `ret` lands on it) and never returns: once the kernel
 * has ended it goes back to the launcher, which does not resume it again. */
static void dpc_emu_fiber_main(void) {
  dpc_emu_k(*dpc_emu_args);
  dpc_emu_fibers[dpc_emu_cur].done = true;
  void *unused;
  dpc_emu_switch(&unused, dpc_emu_main_sp);
  abort();
}

/* A fresh fiber's stack as dpc_emu_switch leaves one: six saved registers, then the address it
 * returns to, with the stack aligned as at a call (rsp = 8 mod 16 at the function's entry). */
static void dpc_emu_fiber_init(struct dpc_emu_fiber *f, char *stack, size_t size) {
  uintptr_t top = ((uintptr_t)(stack + size)) & ~(uintptr_t)15;
  void **sp = (void **)top;
  *--sp = NULL; /* the return address fiber_main never uses */
  *--sp = (void *)dpc_emu_fiber_main;
  for (int r = 0; r < 6; r++) *--sp = NULL;
  f->sp = sp;
}

static void dpc_emu_resume(struct dpc_emu_fiber *f) {
  dpc_emu_switch(&dpc_emu_main_sp, f->sp);
}
#else
static void dpc_emu_fiber_main(void) {
  dpc_emu_k(*dpc_emu_args);
  dpc_emu_fibers[dpc_emu_cur].done = true;
  /* returning resumes uc_link: the launcher */
}

static void dpc_emu_fiber_init(struct dpc_emu_fiber *f, char *stack, size_t size) {
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = stack;
  f->ctx.uc_stack.ss_size = size;
  f->ctx.uc_link = &dpc_emu_main;
  makecontext(&f->ctx, dpc_emu_fiber_main, 0);
}

static void dpc_emu_resume(struct dpc_emu_fiber *f) {
  swapcontext(&dpc_emu_main, &f->ctx);
}
#endif

extern "C" int dpc_emu_launch(dpc_emu_kernel k, const unsigned *grid, const unsigned *block,
                              const dpc_kargs *args) {
  unsigned n = block[0] * block[1] * block[2];
  if (n == 0 || n > DPC_EMU_MAX_THREADS) return -1;
  gridDim.x = grid[0], gridDim.y = grid[1], gridDim.z = grid[2];
  blockDim.x = block[0], blockDim.y = block[1], blockDim.z = block[2];
  struct dpc_emu_fiber *f = (struct dpc_emu_fiber *)calloc(n, sizeof *f);
  char *stacks = (char *)malloc((size_t)n * DPC_EMU_STACK);
  if (!f || !stacks) {
    free(f);
    free(stacks);
    return -1;
  }
  dpc_emu_fibers = f, dpc_emu_k = k, dpc_emu_args = args;
  int rc = 0;
  for (unsigned bz = 0; bz < grid[2] && rc == 0; bz++)
    for (unsigned by = 0; by < grid[1] && rc == 0; by++)
      for (unsigned bx = 0; bx < grid[0] && rc == 0; bx++) {
        blockIdx.x = bx, blockIdx.y = by, blockIdx.z = bz;
        for (unsigned i = 0; i < n; i++) {
          f[i].x = i % block[0], f[i].y = (i / block[0]) % block[1],
          f[i].z = i / (block[0] * block[1]);
          f[i].done = false;
          dpc_emu_fiber_init(&f[i], stacks + (size_t)i * DPC_EMU_STACK, DPC_EMU_STACK);
        }
        /* one round runs every thread to its next barrier (or its end); rounds repeat until all
         * have ended, and a round where some end while others wait is a divergent barrier */
        for (;;) {
          unsigned ended = 0, waiting = 0;
          for (unsigned i = 0; i < n; i++) {
            if (f[i].done) continue;
            dpc_emu_cur = i;
            threadIdx.x = f[i].x, threadIdx.y = f[i].y, threadIdx.z = f[i].z;
            dpc_emu_resume(&f[i]);
            if (f[i].done)
              ended++;
            else
              waiting++;
          }
          if (waiting == 0) break;
          if (ended) {
            rc = -1;
            break;
          }
        }
      }
  free(stacks);
  free(f);
  dpc_emu_fibers = NULL;
  return rc;
}

#endif
